"""``OpSchema`` and ``AmpPolicy``: the declared facts of every op."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AmpPolicy(enum.Enum):
    """What an op does with floating inputs under ``autocast``.

    - ``PROMOTE``: run in the autocast dtype (float16/bfloat16).
    - ``KEEP_INPUT``: run in the inputs' own (promoted) dtype.
    - ``FORCE_FP32``: always run in float32 (numerically sensitive ops).
    """

    PROMOTE = "Promote"
    KEEP_INPUT = "KeepInput"
    FORCE_FP32 = "ForceFP32"


#: the dtype kinds ``OpSchema.accepts`` names
DTYPE_KINDS = ("float", "complex", "int", "bool")


@dataclass(frozen=True)
class OpSchema:
    """The versioned, declared facts of one op (the registry's entry).

    ``saves_input``/``saves_output`` declare what the backward keeps alive;
    dispatch keeps exactly that and nothing else. ``real_valued`` ops turn
    integer and bool inputs into the default float dtype (``sqrt(4) == 2.0``).
    ``version`` starts at 1 and is bumped whenever the op's semantics change.

    ``accepts`` names the dtype kinds its tensor inputs may have (``"float"``,
    ``"complex"``, ``"int"``, ``"bool"``; empty: every kind), checked on the
    compute dtype before ``forward`` runs: ``accepts=("float", "int", "bool")``
    refuses complex tensors. A tuple of such tuples gives one per input (the
    last covers the remaining inputs). ``int_params`` names params that must be
    ints beyond those the public function's signature declares
    (docs/semantics/validation.md). ``seeded`` marks a non-deterministic op
    whose only source of variation is pylucid's random generator (dropout's
    mask): reproducible under a seed, so ``use_deterministic_algorithms(True)``
    allows it, as PyTorch allows dropout.
    """

    name: str
    version: int = 1
    amp_policy: AmpPolicy = AmpPolicy.KEEP_INPUT
    saves_input: bool = False
    saves_output: bool = False
    deterministic: bool = True
    deterministic_note: str = ""
    real_valued: bool = False
    differentiable: bool = True
    family: str = ""
    accepts: tuple = ()
    int_params: tuple = ()
    seeded: bool = False

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError(f"OpSchema {self.name!r}: version must be >= 1, got {self.version}")
        if not isinstance(self.amp_policy, AmpPolicy):
            raise TypeError(f"OpSchema {self.name!r}: amp_policy must be an AmpPolicy, got {self.amp_policy!r}")
        for a in self.accepts:
            for k in a if isinstance(a, tuple) else (a,):
                if k not in DTYPE_KINDS:
                    raise ValueError(f"OpSchema {self.name!r}: accepts names unknown dtype kind {k!r}; "
                                     f"known: {DTYPE_KINDS}")
        if not self.deterministic and not self.deterministic_note:
            raise ValueError(f"OpSchema {self.name!r}: a non-deterministic op needs a deterministic_note")


PROMOTE = AmpPolicy.PROMOTE
KEEP_INPUT = AmpPolicy.KEEP_INPUT
FORCE_FP32 = AmpPolicy.FORCE_FP32
