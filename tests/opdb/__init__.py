"""The OpInfo-style op database (DESIGN.md §6).

Every registered op has an ``OpEntry`` here: sample inputs (NumPy arrays and
Python scalars), the PyTorch reference, the dtypes it supports, error inputs,
and which gradient checks apply. ``tests/test_ops.py`` runs every entry
through one generic suite; ``test_coverage`` fails when a registered op has no
entry. Each op family has its own module (``tests/opdb/<family>.py``) that
defines ``ENTRIES``; add the module name to ``_FAMILIES`` below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

FLOAT_DTYPES = ("float32", "float64")


@dataclass
class Sample:
    """One call: positional ``args`` (NumPy arrays become tensors; anything else
    is passed as is to both frameworks) and ``kwargs`` (passed as is)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""
    #: positions of the args to differentiate (default: every floating array)
    grad_args: tuple | None = None
    #: False for points where the function is not differentiable (ties, kinks)
    #: and finite differences would disagree with any subgradient
    gradcheck: bool = True


@dataclass
class ErrorInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    exc: type = Exception
    match: str = ""


@dataclass
class OpEntry:
    #: the registered op name (``pylucid.ops.schema(name)``)
    name: str
    #: pylucid callable taking pylucid tensors in the sample's positions
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
    #: extra names this entry covers (ops registered under other names but
    #: only reachable through this entry's function, e.g. ``getitem_backward``)
    covers: tuple = ()
    #: skip CUDA for this entry (with the reason)
    cuda_skip: str = ""
    #: compare outputs as sets/sorted etc.: ``postprocess(out) -> out`` applied to both results (numpy)
    postprocess: Callable[[Any], Any] | None = None
    #: maximum number of elements gradcheck perturbs (keeps finite differences fast)
    gradcheck_max_numel: int = 64


_FAMILIES = ["core", "elementwise_ext", "reduction_ext", "shape_ext", "indexing_ext", "linalg_ext", "special", "fft",
             "complex", "nn_core", "nn_conv", "nn_rnn", "random_ext"]


def rng(seed: int = 0):
    return np.random.default_rng(seed)


def all_entries() -> list:
    out = []
    for fam in _FAMILIES:
        mod = importlib.import_module(f"tests.opdb.{fam}")
        out.extend(mod.ENTRIES)
    return out
