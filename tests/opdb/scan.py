"""Op-database entries for the scans (``pylucid/ops/scan.py``): cumulative sums, products, extremes and
``logcumsumexp``, and the composite ``diff``."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from tests.opdb import INF, NAN, C, ErrorInput, OpEntry, Sample, U, no_ties, noncontig


def _cum_samples():
    return [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(2, 3, 4),), {"dim": 0}, "dim0"),
            Sample((noncontig(3, 4),), {"dim": -1}, "noncontig"), Sample((np.array(1.5),), {"dim": 0}, "0d"),
            Sample((U(0, 3),), {"dim": 1}, "empty")]


def _cumprod_samples():
    with_zero = C(5, seed=4)
    with_zero[2] = 0
    return _cum_samples() + [
        Sample((np.array([2.0, 0.0, 3.0, 1.5]),), {"dim": 0}, "one-zero"),
        Sample((np.array([[2.0, 0.0, 3.0, 0.0, 0.5], [0.0, 1.5, 2.0, 0.5, 1.0]]),), {"dim": 1}, "two-zeros"),
        Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 1}, "int32->int64"),
        # the local derivative is conjugated for complex inputs, with and without a zero
        Sample((C(5, seed=4),), {"dim": 0}, "complex"), Sample((with_zero,), {"dim": 0}, "complex-zero")]


def _cumext_samples():
    return [Sample((no_ties(3, 4),), {"dim": 1}, "dim1"), Sample((no_ties(2, 3, 4),), {"dim": 0}, "dim0"),
            Sample((np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0]),), {"dim": 0}, "ties", gradcheck=False),
            Sample((np.array([1.0, NAN, 3.0, NAN, 5.0]),), {"dim": 0}, "nan", gradcheck=False),
            Sample((np.array([3, 1, 4, 1], dtype=np.int64),), {"dim": 0}, "int"),
            Sample((np.array(1.5),), {"dim": 0}, "0d")]


def _ref_nt(fn):
    """torch's namedtuple results as plain tuples, so the suite compares element by element."""
    def f(*a, **k):
        return tuple(fn(*a, **k))
    return f


ENTRIES = [
    OpEntry("cumsum", pl.cumsum, torch.cumsum,
            lambda: _cum_samples() + [Sample((np.array([2**30, 2**30], dtype=np.int32),), {"dim": 0}, "int32-overflow"),
                                      Sample((np.array([[3, -1, 4], [1, -5, 9]], dtype=np.int32),), {"dim": 0},
                                             "int32"),
                                      Sample((np.array([True, True]),), {"dim": 0}, "bool"),
                                      Sample((C(3, 2),), {"dim": 0}, "complex")],
            error_inputs=lambda: [ErrorInput((U(3),), {"dim": 1}, IndexError, "cumsum: dimension out of range")]),
    OpEntry("cumprod", pl.cumprod, torch.cumprod, _cumprod_samples),
    OpEntry("cummax", pl.cummax, _ref_nt(torch.cummax), _cumext_samples),
    OpEntry("cummin", pl.cummin, _ref_nt(torch.cummin), _cumext_samples),
    OpEntry("logcumsumexp", pl.logcumsumexp, torch.logcumsumexp,
            lambda: _cum_samples() + [
                Sample((np.array([1e4, 1e4, -1e4, 0.0]),), {"dim": 0}, "huge"),
                Sample((np.array([-1e4, 0.0, 1e4]),), {"dim": 0}, "huge-rising"),
                Sample((np.array([[-INF, 0.5, 1.0], [0.0, -INF, 2.0]]),), {"dim": 1}, "-inf", gradcheck=False),
                # complex: PyTorch's element-by-element combination (the imaginary parts' multiples of 2 pi agree)
                Sample((C(3, 4) * 3,), {"dim": 1}, "complex"), Sample((C(2, 3, 2),), {"dim": 0}, "complex-dim0"),
                Sample((np.array([1e4 + 3j, 1e4 - 2j, -1e4 + 1j, 5 + 20j]),), {"dim": 0}, "complex-ties-huge"),
                Sample((np.array([complex(-INF, 0.0), 1 + 1j, complex(-INF, 2.0)]),), {"dim": 0}, "complex-inf",
                       grad_args=())]),
    OpEntry("diff", pl.diff, torch.diff,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"n": 2, "dim": 0}, "n2"),
                     Sample((U(3, 4), 1, 1, U(3, 1, seed=1), U(3, 2, seed=2)), name="prepend-append"),
                     Sample((np.array([1, 4, 9, 16]),), name="int"), Sample((np.array([True, False, False]),),
                                                                             name="bool")]),
    # -- integration and differentiation rules --------------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((U(3, 4),), name="dx1"), Sample((U(3, 4),), {"dx": 0.5, "dim": 0}, "dx"),
                       Sample((U(3, 4), np.sort(U(4, seed=1))), name="x-1d"),
                       Sample((U(2, 3), np.sort(U(2, 3, seed=1), axis=0)), {"dim": 0}, "x-same-shape"),
                       Sample((U(2, 3, 4), np.sort(U(3, 4, seed=1), axis=0)), {"dim": 1}, "x-broadcast"),
                       Sample((U(3, 1),), name="one-point"), Sample((U(3, 0),), name="empty"),
                       Sample((np.array([1, 4, 9, 16]),), name="int")],
              error_inputs=lambda n=n: [ErrorInput((np.array(1.0),), exc=ValueError, match=f"{n}: y must have"),
                                        ErrorInput((U(3, 4), U(3)), exc=ValueError, match=f"{n}: a 1-d x")])
      for n in ("trapezoid", "cumulative_trapezoid")],
    OpEntry("trapz", pl.trapz, torch.trapz,
            lambda: [Sample((U(3, 4), np.sort(U(4, seed=1))), name="x"), Sample((U(3, 4),), {"dx": 2.0}, "dx"),
                     Sample((U(3, 4),), {"dim": 0}, "dim")]),
    OpEntry("gradient", pl.gradient, lambda x, **k: tuple(torch.gradient(x, **k)),
            lambda: [Sample((U(5),), name="1d"), Sample((U(3, 4),), name="2d"),
                     Sample((U(3, 4),), {"edge_order": 2}, "edge2"), Sample((U(3, 4),), {"spacing": 0.5}, "spacing"),
                     Sample((U(3, 4),), {"spacing": [2.0, 0.25], "edge_order": 2}, "spacings"),
                     Sample((U(3, 4),), {"dim": 1}, "dim"), Sample((U(2, 3, 4),), {"dim": (0, 2)}, "dims"),
                     Sample((U(2, 3),), {"dim": 0}, "two-points"),
                     Sample((np.array([1, 4, 9, 16]),), name="int")],
            error_inputs=lambda: [ErrorInput((U(1, 3),), {"dim": 0}, ValueError, "gradient: each dimension size"),
                                  ErrorInput((U(3),), {"edge_order": 3}, ValueError, "gradient: edge_order")]),
    OpEntry("gradient", lambda x, c, **k: pl.gradient(x, spacing=[c], dim=1, **k),
            lambda x, c, **k: tuple(torch.gradient(x, spacing=[c], dim=1, **k)),
            lambda: [Sample((U(3, 5), np.array([0.0, 0.5, 1.5, 1.7, 3.0])), name="coordinates"),
                     Sample((U(3, 5), np.array([0.0, 0.5, 1.5, 1.7, 3.0])), {"edge_order": 2}, "coordinates-edge2"),
                     Sample((U(2, 2), np.array([0.0, 0.5])), name="two-points")],
            variant="coordinates"),
]
