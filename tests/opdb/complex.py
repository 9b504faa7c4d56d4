"""Op-database entries for the complex ops (``pylucid/ops/complex.py``).

The generic suite's gradcheck perturbs real numbers only, so the first entry of
each op takes and returns real tensors: a complex input is a real ``(..., 2)``
array seen through ``view_as_complex``, a complex output is returned through
``view_as_real``. That checks each op's gradient (and its second derivative)
through the real and imaginary parts by finite differences. The ``complex``
variants call the declared functions on complex samples directly (gradients vs
PyTorch with complex cotangents, and their methods and aliases).
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import C, ErrorInput, OpEntry, Sample, U


def _c(fn):
    """pylucid: real (..., 2) -> complex -> fn -> real view if complex."""
    def f(x, *a, **k):
        out = fn(pl.view_as_complex(x) if x.ndim and x.shape[-1] == 2 else x, *a, **k)
        return pl.view_as_real(out) if out.dtype.is_complex else out
    return f


def as_complex(x):
    """torch.view_as_complex refuses NumPy-made empty tensors (stride 0): build the same value with complex()."""
    return torch.complex(x[..., 0], x[..., 1])


def as_real(z):
    """torch.view_as_real's backward refuses NumPy-made empty gradients (stride 0): stack real and imag."""
    return torch.stack([z.real, z.imag], -1)


def _tc(fn):
    def f(x, *a, **k):
        out = fn(as_complex(x), *a, **k)
        return as_real(out) if out.is_complex() else out
    return f


def _csamples():
    return [Sample((U(3, 4, 2),), name="2d"), Sample((U(2),), name="0d"), Sample((U(0, 3, 2),), name="empty"),
            Sample((np.array([[0.0, 0.0], [1.0, 0.0], [-1.5, 0.0], [0.0, -2.0]]),), name="axes", gradcheck=False)]


ENTRIES = [
    OpEntry("real", _c(pl.real), _tc(torch.real), _csamples),
    OpEntry("imag", _c(pl.imag), _tc(torch.imag), _csamples,
            error_inputs=lambda: [ErrorInput((U(3),), {}, DtypeMismatch, "imag: expected a complex tensor")]),
    OpEntry("conj", _c(pl.conj), _tc(torch.conj), _csamples),
    # angle: the gradient is singular at 0, so the "axes" sample (holding 0) is not gradchecked
    OpEntry("angle", lambda x: pl.angle(pl.view_as_complex(x)) if x.ndim and x.shape[-1] == 2 else pl.angle(x),
            lambda x: torch.angle(as_complex(x)) if x.ndim and x.shape[-1] == 2 else torch.angle(x),
            lambda: [Sample((U(3, 4, 2),), name="complex"), Sample((U(2),), name="0d"),
                     Sample((np.array([[1.0, 0.0], [0.5, 1e-3], [0.0, -2.0]]),), name="axes"),
                     Sample((np.array([[-1.5, 0.0]]),), name="branch-cut", gradcheck=False),
                     Sample((np.array([-1.0, 0.0, 2.0]),), name="real", gradcheck=False)]),
    OpEntry("view_as_real", lambda x: pl.view_as_real(pl.view_as_complex(x) * 1.0),
            lambda x: as_real(as_complex(x) * 1.0), _csamples,
            error_inputs=lambda: [ErrorInput((U(3, 1),), {}, ShapeMismatch, "view_as_complex: the last dimension")]),
    OpEntry("view_as_complex", _c(lambda z: z), _tc(lambda z: z), _csamples,
            error_inputs=lambda: [ErrorInput((np.arange(4).reshape(2, 2),), {}, DtypeMismatch, "view_as_complex")]),
    OpEntry("complex", lambda a, b: pl.view_as_real(pl.complex(a, b)), lambda a, b: as_real(torch.complex(a, b)),
            lambda: [Sample((U(3, 4), U(3, 4, seed=1))), Sample((U(2, 1), U(3, seed=1)), name="broadcast"),
                     Sample((np.array(1.0), U(3, seed=1)), name="0d"), Sample((U(0, 2), U(2, seed=1)), name="empty")],
            error_inputs=lambda: [ErrorInput((U(2), np.arange(2)), {}, DtypeMismatch, "complex: expected float32")]),
    # -- the declared functions on complex samples ---------------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((C(3, 2),)), Sample((np.array([1.0, -2.0, 0.5]),), name="real")], variant="complex")
      for n in ("real", "conj", "angle")],
    OpEntry("imag", pl.imag, torch.imag, lambda: [Sample((C(3, 2),))], variant="complex"),
    OpEntry("real", lambda z: z.real, lambda z: z.real, lambda: [Sample((C(3, 2),))], variant="property"),
    OpEntry("imag", lambda z: z.imag, lambda z: z.imag, lambda: [Sample((C(3, 2),))], variant="property"),
    OpEntry("view_as_real", pl.view_as_real, torch.view_as_real, lambda: [Sample((C(3, 2),))], variant="complex"),
    OpEntry("view_as_complex", pl.view_as_complex, torch.view_as_complex, lambda: [Sample((U(3, 2),))],
            variant="direct"),
    OpEntry("complex", pl.complex, torch.complex, lambda: [Sample((U(3, 4), U(3, 4, seed=1)))], variant="direct"),
    # -- composites ------------------------------------------------------------------------------
    OpEntry("polar", pl.polar, torch.polar,
            lambda: [Sample((U(3, 4, lo=0.3, hi=2.0), U(3, 4, seed=1))), Sample((U(3, lo=0.3, hi=2.0), 0.5 * U(3)),
                                                                              name="1d")]),
    OpEntry("sgn", pl.sgn, torch.sgn,
            lambda: [Sample((C(3, 2),)), Sample((np.array([0j, 1 + 1j, -2.0 + 0j]),), name="complex-zero",
                                                gradgrad_ref="finite"),
                     Sample((U(3, 4),), name="real")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n), lambda: [Sample((C(3, 2),)), Sample((U(3),), name="real")])
      for n in ("conj_physical", "resolve_conj", "resolve_neg")],
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((C(3),)), Sample((U(3),), name="real"), Sample((np.array([1, 2]),), name="int")],
              grad=False) for n in ("is_complex", "is_conj")],
]
