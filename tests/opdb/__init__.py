"""The OpInfo-style op database (DESIGN.md §6).

Every public op has an ``OpEntry`` here: sample inputs (NumPy arrays and
Python scalars), the PyTorch reference, the dtypes it supports, error inputs,
and which gradient checks apply. ``tests/test_ops.py`` runs every entry
through one generic suite. Two coverage tests keep the table complete: every
registered op has an entry, and every public function of ``pylucid``,
``pylucid.nn.functional``, ``pylucid.linalg``, ``pylucid.fft``,
``pylucid.special`` and ``pylucid.Tensor`` is either reached by an entry or is
on the suite's list of non-op API.

An entry is named after what it tests:

- a registered op: its schema name (``"sqrt"``, ``"fft_c2c"``);
- a composite (a public function built from other ops, declared with no op
  class): its public name, qualified outside ``pylucid`` (``"split"``,
  ``"linalg.matrix_norm"``, ``"nn.functional.glu"``, ``"fft.rfft"``); a
  ``Tensor``-only method by its method name (``"view_as"``).

A second entry for the same name with other fixed arguments (eval-mode batch
norm, ``linalg.vector_norm`` as a second front end of ``norm``) sets
``variant``, which becomes part of its test id.

Variants, as PyTorch's OpInfo has them, are found through the declaration of
the entry's function (``pylucid.ops.registry``): its ``Tensor`` methods,
in-place methods, aliases and operator dunders. The suite calls each of them
by ``getattr`` on the entry's samples and compares with the function.

Each op family has a module ``tests/opdb/<family>.py`` that defines
``ENTRIES``; list it in ``_FAMILIES`` below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import pylucid
from pylucid.errors import ShapeMismatch
from pylucid.ops import registry

FLOAT_DTYPES = ("float32", "float64")
ALL_FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
NAN, INF = float("nan"), float("inf")

#: the namespaces whose public functions are ops (with the prefix an entry name carries for them)
NAMESPACES = {"pylucid": "", "pylucid.nn.functional": "nn.functional.", "pylucid.linalg": "linalg.",
              "pylucid.fft": "fft.", "pylucid.special": "special."}


@dataclass
class Sample:
    """One call: positional ``args`` (NumPy arrays become tensors, lists/tuples of
    arrays lists/tuples of tensors; anything else is passed as is to both
    frameworks) and ``kwargs`` (passed as is).

    Complex arrays run in complex64 (float32 runs) or complex128 (float64 runs):
    their gradients are compared with PyTorch's with complex cotangents, first
    and second order (``gradcheck`` perturbs real numbers only)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""
    #: positions of the args to differentiate (default: every floating or complex array)
    grad_args: tuple | None = None
    #: False for points where the function is not differentiable (ties, kinks)
    #: and finite differences would disagree with any subgradient
    gradcheck: bool = True
    #: second derivatives vs PyTorch for a real sample gradgradcheck cannot take (a kink):
    #: ``"all"`` compares every element, ``"finite"`` only where PyTorch's is finite (where it gives
    #: NaN pylucid's value is a documented deviation)
    gradgrad_ref: str = ""


@dataclass
class ErrorInput:
    """Bad input: the exception it raises (``exc``, message matching ``match``), or,
    when ``exc`` is a ``Warning`` subclass, the warning it gives."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    exc: type = Exception
    match: str = ""


@dataclass
class OpEntry:
    #: the registered op name, or a composite's public name (module docstring)
    name: str
    #: pylucid callable taking pylucid tensors in the sample's positions; when it is the declared
    #: public function itself, the declaration's methods, in-place variants and aliases are checked too
    op: Callable
    #: PyTorch reference taking torch tensors in the same positions
    ref: Callable
    samples: Callable[[], list]
    dtypes: tuple = FLOAT_DTYPES
    #: first-order gradient vs PyTorch, and gradcheck (float64 finite differences)
    grad: bool = True
    #: second-order: gradgradcheck
    gradgrad: bool = True
    error_inputs: Callable[[], list] = lambda: []
    atol: float = 1e-5
    rtol: float = 1.3e-6
    #: check the output dtype under autocast against the schema's AMP policy
    amp: bool = True
    #: other names this entry's samples reach: registered ops only reachable through this entry's
    #: function (``getitem_backward``) or public composites its function calls (module docstring)
    covers: tuple = ()
    #: skip CUDA for this entry (with the reason)
    cuda_skip: str = ""
    #: compare outputs as sets/sorted etc.: ``postprocess(out) -> out`` applied to both results (numpy)
    postprocess: Callable[[Any], Any] | None = None
    #: maximum number of elements gradcheck perturbs (keeps finite differences fast)
    gradcheck_max_numel: int = 64
    #: a second entry for the same name with other fixed arguments: part of the test id
    variant: str = ""
    #: a sampler: outputs are compared with PyTorch's by shape and dtype only, and the op (which takes
    #: ``generator=``) must repeat its draws under one seed
    random: bool = False
    #: registered ops the graph of some sample must contain, instead of the entry's own: a composite that must run
    #: one primitive, a variant of a function that dispatches to another op (``max(a, b)`` runs ``maximum``)
    runs: tuple = ()

    @property
    def id(self) -> str:
        return f"{self.name}-{self.variant}" if self.variant else self.name

    @property
    def op_class(self):
        """The registered op class of this entry, or None for a composite."""
        return pylucid.ops.op_class(self.name) if self.name in _registered() else None

    def declaration(self):
        """The declaration of the entry's function when the entry calls the declared function itself (not a
        wrapper), else None: for an op entry one of the declarations whose op is the entry's op class, for a
        composite the composite's own. Its methods, in-place names, aliases and dunders are the variants."""
        return registry.declaration_of(self.op)

    def method_variants(self) -> list:
        """``[(name, method)]``: the ``Tensor`` methods the declaration installs (``x.name(*rest)``)."""
        d = self.declaration()
        return [(m, getattr(pylucid.Tensor, m)) for m in d.methods] if d else []

    def inplace_variants(self) -> list:
        """``[(name, method)]``: the in-place ``Tensor`` methods (``x.name_(*rest)`` writes into ``x``)."""
        d = self.declaration()
        return [(m, getattr(pylucid.Tensor, m)) for m in d.inplace] if d else []

    def alias_variants(self) -> list:
        """``[(qualified name, function)]``: every other name of the function in its namespaces."""
        d = self.declaration()
        if not d:
            return []
        return [(f"{ns}.{a}", getattr(importlib.import_module(ns), a)) for ns in d.namespaces for a in d.aliases]

    def dunder_variants(self) -> list:
        """``[(name, method)]``: the operator methods (``__add__``, ``__radd__``, ``__iadd__``, ...)."""
        d = self.declaration()
        return [(m, getattr(pylucid.Tensor, m)) for m in d.dunders] if d else []


_FAMILIES = ["conversion", "elementwise", "activation", "compare", "reduction", "scan", "sorting", "shape",
             "indexing", "linalg", "special", "fft", "complex", "nn", "conv", "random", "signal", "sampling", "rnn"]


def _registered() -> frozenset:
    return frozenset(pylucid.ops.list_ops())


def all_entries() -> list:
    out = []
    for fam in _FAMILIES:
        mod = importlib.import_module(f"tests.opdb.{fam}")
        out.extend(mod.ENTRIES)
    return out


def public_names(d) -> set:
    """The names an entry can carry to cover declaration ``d`` (module docstring)."""
    names = {NAMESPACES.get(ns, ns + ".") + n for ns in d.namespaces for n in (d.name, *d.aliases)}
    if not d.namespaces:
        names.update((d.name, *d.methods))
    return names


# ---------------------------------------------------------------- sample builders shared by the families
def rng(seed: int = 0):
    return np.random.default_rng(seed)


def U(*shape, lo=-2.0, hi=2.0, seed=0):
    """Uniform float64 samples in ``[lo, hi)``."""
    return rng(seed).uniform(lo, hi, size=shape)


def C(*shape, seed=0):
    """Complex128 samples (standard normal real and imaginary parts)."""
    g = rng(seed)
    return g.standard_normal(shape) + 1j * g.standard_normal(shape)


def I(*values):  # noqa: E743 - an index array
    return np.array(values, dtype=np.int64)


def noncontig(*shape, seed=0):
    """A non-contiguous array (a transposed view) of the given shape."""
    return U(*reversed(shape), seed=seed).T


def no_ties(*shape, seed=0):
    """Distinct values (selections and max/min are not differentiable at ties)."""
    return rng(seed).permutation(int(np.prod(shape))).reshape(shape).astype(float) / 4 - 1


def unary_samples(lo=-2.0, hi=2.0):
    def f():
        return [
            Sample((U(3, 4, lo=lo, hi=hi),), name="2d"),
            Sample((np.array(U(1, lo=lo, hi=hi)[0]),), name="0d"),
            Sample((U(0, 3, lo=lo, hi=hi),), name="empty"),
            Sample((noncontig(3, 5, seed=2) * (hi - lo) / 4 + (hi + lo) / 2,), name="noncontig"),
        ]
    return f


def binary_samples(lo=-2.0, hi=2.0, blo=None, bhi=None):
    blo = lo if blo is None else blo
    bhi = hi if bhi is None else bhi

    def f():
        return [
            Sample((U(3, 4, lo=lo, hi=hi), U(3, 4, lo=blo, hi=bhi, seed=1)), name="same"),
            Sample((U(2, 1, 4, lo=lo, hi=hi), U(3, 1, lo=blo, hi=bhi, seed=1)), name="broadcast"),
            Sample((np.array(1.5 if lo >= 0 else -1.5), U(3, lo=blo, hi=bhi, seed=1)), name="0d-lhs"),
            Sample((U(3, 2, lo=lo, hi=hi), 2.5 if blo >= 0 or bhi <= 0 else 1.5), name="scalar"),
            Sample((U(0, 2, lo=lo, hi=hi), U(2, lo=blo, hi=bhi, seed=1)), name="empty"),
            Sample((noncontig(4, 3, seed=3) * 0 + U(4, 3, lo=lo, hi=hi), U(3, lo=blo, hi=bhi, seed=1).T),
                   name="noncontig"),
        ]
    return f


def with_samples(base, *extra):
    """``base`` samples plus ``extra`` ones."""
    return lambda: base() + list(extra)


def kinks(*values, name="kinks"):
    """A sample on the non-smooth points, compared with PyTorch but not finite-differenced."""
    return Sample((np.array(values, dtype=np.float64),), name=name, gradcheck=False)


def bcast_errors(fn_name):
    def f():
        return [ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match=rf"{fn_name}: shapes \(2, 3\) and \(4,\)")]
    return f


def optional(make) -> list:
    """``[make()]``, or ``[]`` where the checkout does not have the function yet (AttributeError): for names that
    arrive with a family's conversion. The coverage tests, not this helper, say which names must exist."""
    try:
        return [make()]
    except AttributeError:
        return []


def not_tensor(name):
    """A list where a Tensor is expected: TypeError naming the op."""
    return lambda: [ErrorInput(([1.0, 2.0],), exc=TypeError, match=name)]
