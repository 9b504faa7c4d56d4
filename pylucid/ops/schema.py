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


@dataclass(frozen=True)
class OpSchema:
    """The versioned, declared facts of one op (the registry's entry).

    ``saves_input``/``saves_output`` declare what the backward keeps alive;
    dispatch keeps exactly that and nothing else. ``real_valued`` ops turn
    integer and bool inputs into the default float dtype (``sqrt(4) == 2.0``).
    ``version`` starts at 1 and is bumped whenever the op's semantics change.
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

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError(f"OpSchema {self.name!r}: version must be >= 1, got {self.version}")
        if not isinstance(self.amp_policy, AmpPolicy):
            raise TypeError(f"OpSchema {self.name!r}: amp_policy must be an AmpPolicy, got {self.amp_policy!r}")
        if not self.deterministic and not self.deterministic_note:
            raise ValueError(f"OpSchema {self.name!r}: a non-deterministic op needs a deterministic_note")


PROMOTE = AmpPolicy.PROMOTE
KEEP_INPUT = AmpPolicy.KEEP_INPUT
FORCE_FP32 = AmpPolicy.FORCE_FP32
