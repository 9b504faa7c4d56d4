"""Op-database entries for the statistics (``pylucid/ops/statistics.py``): ``bincount histc histogram histogramdd``,
``quantile nanquantile`` in every interpolation mode, ``cov corrcoef`` and ``cdist``. ``tests/opdb/reduction.py``
lists them with the reductions."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import INF, NAN, ErrorInput, OpEntry, Sample, U, no_ties


def _nt(fn):
    """torch's named-tuple results as plain tuples."""
    def f(*a, **k):
        return tuple(fn(*a, **k))
    return f


def _ints(*v):
    return np.array(v, dtype=np.int64)


def _quantile_samples(nan_ok):
    s = [Sample((no_ties(3, 4),), {"q": 0.3}, "all"), Sample((no_ties(3, 4),), {"q": 0.6, "dim": 1}, "dim1"),
         Sample((no_ties(3, 4),), {"q": 0.5, "dim": 0, "keepdim": True}, "keep"),
         Sample((no_ties(2, 3, 4),), {"q": 0.25, "dim": -1}, "neg-dim"),
         Sample((no_ties(3, 4), np.array([0.1, 0.5, 0.9])), {"dim": 1}, "q-tensor"),
         Sample((no_ties(3, 4), np.array([0.0, 1.0])), {"dim": 1}, "q-ends", gradcheck=False),
         Sample((no_ties(3, 4), np.array([0.2, 0.75])), {"keepdim": True}, "q-tensor-all-keep"),
         Sample((no_ties(3, 4), np.array([0.2, 0.75])), {"dim": 0, "interpolation": "lower"}, "q-tensor-lower",
                grad_args=(0,)),
         Sample((no_ties(2, 3), np.array(0.4)), {"dim": 0}, "q-0d"),
         Sample((np.array(1.5),), {"q": 0.5}, "0d"), Sample((np.array(1.5),), {"q": 0.5, "dim": 0}, "0d-dim"),
         Sample((np.array([1.0, 2.0, 2.0, 5.0]),), {"q": 0.5}, "ties", gradcheck=False)]
    s += [Sample((no_ties(3, 5),), {"q": q, "dim": 1, "interpolation": m}, f"{m}-{q}")
          for m in ("linear", "lower", "higher", "midpoint", "nearest") for q in (0.375, 0.5)]
    nan = np.array([[1.0, NAN, 3.0, 0.5], [2.0, 4.0, 1.0, 3.0], [NAN, NAN, NAN, NAN]])
    s += [Sample((nan,), {"q": 0.4, "dim": 1}, "nan", gradcheck=False),
          Sample((nan, np.array([0.0, 0.5, 1.0])), {"dim": 1, "interpolation": "nearest"}, "nan-nearest",
                 gradcheck=False, grad_args=(0,)),
          Sample((nan, np.array([0.2, 0.5])), {"dim": 1}, "nan-q-tensor", gradcheck=False)]
    return s


def _q_errors(name):
    return lambda: [ErrorInput((U(3),), {"q": 1.5}, ValueError, f"{name}: q values must be in the range"),
                    ErrorInput((U(3),), {"q": 0.5, "interpolation": "cubic"}, ValueError, f"{name}: interpolation"),
                    ErrorInput((np.array([1, 2]),), {"q": 0.5}, DtypeMismatch, name),
                    ErrorInput((U(0),), {"q": 0.5}, ValueError, f"{name}: input tensor must be non-empty")]


def _cdist_samples():
    a, b = U(4, 3), U(5, 3, seed=1)
    s = [Sample((a, b), {"p": p}, f"p{p}", gradcheck=p not in (0, INF))
         for p in (2.0, 1.0, 3.0, 0.0, INF)]
    s += [Sample((a, b), {"p": 1.5}, "p1.5"),
          Sample((U(2, 4, 3), U(2, 5, 3, seed=1)), name="batch"),
          Sample((U(1, 4, 3), U(2, 5, 3, seed=1)), name="batch-broadcast"),
          Sample((a, b), {"compute_mode": "use_mm_for_euclid_dist"}, "mm"),
          Sample((a, b), {"compute_mode": "donot_use_mm_for_euclid_dist"}, "no-mm"),
          Sample((U(30, 2), U(3, 2, seed=1)), name="mm-if-necessary"),
          Sample((U(0, 3), b), name="empty"),
          Sample((np.array([[0.0, 1.0], [2.0, 2.0]]), np.array([[0.0, 1.0], [1.0, 1.0]])), name="coincident",
                 gradcheck=False)]
    return s


ENTRIES = [
    OpEntry("bincount", pl.bincount, torch.bincount,
            lambda: [Sample((_ints(1, 1, 3, 0, 7),), name="plain"),
                     Sample((_ints(0, 2),), {"minlength": 5}, "minlength"),
                     Sample((_ints(2, 0, 2), np.array([0.5, 1.0, 2.0])), name="weights"),
                     Sample((_ints(2, 0, 2), _ints(3, 4, 5)), name="int-weights"),
                     Sample((np.zeros(0, dtype=np.int64),), name="empty"),
                     Sample((np.zeros(0, dtype=np.int64),), {"minlength": 3}, "empty-minlength")],
            grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((_ints(1, -2),), exc=ValueError, match="bincount: input must contain"),
                                  ErrorInput((np.array([True]),), exc=ValueError, match="bincount: input must be"),
                                  ErrorInput((U(3),), exc=ValueError, match="bincount: input must be a 1-d"),
                                  ErrorInput((_ints(1, 2), U(3)), exc=ShapeMismatch, match="bincount: weights")]),
    OpEntry("histc", pl.histc, torch.histc,
            lambda: [Sample((U(40),), name="default"), Sample((U(40),), {"bins": 7, "min": -1.0, "max": 1.5}, "range"),
                     Sample((U(3, 5),), {"bins": 4}, "2d"),
                     Sample((np.array([1.0, 2.0, 1.0, 2.0]),), {"bins": 4, "min": 3, "max": 3}, "min-eq-max"),
                     Sample((np.full(3, 2.0),), {"bins": 3}, "constant"), Sample((U(0),), {"bins": 3}, "empty"),
                     Sample((np.array([0.0, 1.0, 2.0, NAN, INF]),), {"bins": 2, "min": 0, "max": 2}, "edges-nan"),
                     Sample((np.array(0.5),), {"bins": 2}, "0d")],
            grad=False,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), {"bins": 2}, DtypeMismatch, "histc"),
                                  ErrorInput((U(3),), {"bins": 0}, ValueError, "histc: bins"),
                                  ErrorInput((U(3),), {"min": 2, "max": 1}, ValueError, "histc: max"),
                                  ErrorInput((np.array([1.0, NAN]),), {}, ValueError, "histc: the data's range")]),
    OpEntry("histogram", pl.histogram, _nt(torch.histogram),
            lambda: [Sample((U(40),), {"bins": 5}, "int-bins"), Sample((U(3, 5),), {"bins": 4, "range": (-1.0, 1.0)},
                                                                    "range"),
                     Sample((U(40), np.array([-2.0, -0.5, 0.0, 0.3, 2.0])), name="edges"),
                     Sample((U(40),), {"bins": 6, "weight": None, "density": True}, "density"),
                     Sample((np.full(4, 1.0),), {"bins": 2}, "constant"),
                     Sample((np.array([0.0, 1.0, 2.0, 3.0]),), {"bins": 3}, "edge-values"),
                     Sample((U(0),), {"bins": 2}, "empty"),
                     Sample((np.array([INF, 1.0]),), {"bins": 2, "range": (0, 2)}, "inf-in-range")],
            grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), {"bins": 2}, DtypeMismatch, "histogram"),
                                  ErrorInput((np.array([1.0, INF]),), {"bins": 2}, ValueError, "histogram: the data's "
                                                                                               "range"),
                                  ErrorInput((U(3), np.array([1.0, 0.0])), exc=ValueError, match="increasing")]),
    OpEntry("histogram", lambda x, w, **k: pl.histogram(x, weight=w, **k),
            lambda x, w, **k: tuple(torch.histogram(x, weight=w, **k)),
            lambda: [Sample((U(30), U(30, lo=0, hi=1, seed=3)), {"bins": 4}, "weight"),
                     Sample((U(30), U(30, lo=0, hi=1, seed=3)), {"bins": 4, "density": True}, "weight-density")],
            variant="weight", grad=False, amp=False),
    OpEntry("histogramdd", pl.histogramdd, _nt(torch.histogramdd),
            lambda: [Sample((U(20, 2),), {"bins": [2, 3]}, "int-bins"),
                     Sample((U(4, 5, 3),), {"bins": 2}, "batched-points"),
                     Sample((np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]]),),
                            {"bins": 2, "range": [0.0, 2.0, 0.0, 4.0]}, "range-edges"),
                     Sample((U(20, 2),), {"bins": [3, 2], "density": True}, "density"),
                     Sample((U(0, 2),), {"bins": 2}, "empty"),
                     Sample((np.full((3, 1), 2.0),), {"bins": 2}, "constant")],
            grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((U(5, 2),), {"bins": [2]}, ValueError, "histogramdd: expected 2 bin"),
                                  ErrorInput((np.array([[1, 2]]),), {"bins": 2}, DtypeMismatch, "histogramdd")]),
    OpEntry("histogramdd", lambda x, e0, e1, w, **k: pl.histogramdd(x, bins=[e0, e1], weight=w, **k),
            lambda x, e0, e1, w, **k: tuple(torch.histogramdd(x, bins=[e0, e1], weight=w, **k)),
            lambda: [Sample((U(20, 2), np.array([-2.0, 0.0, 0.5, 2.0]), np.array([-1.0, 1.0]),
                             U(20, lo=0, hi=1, seed=5)), name="edges-weight"),
                     Sample((U(20, 2), np.array([-2.0, 0.0, 0.5, 2.0]), np.array([-1.0, 1.0]),
                             U(20, lo=0, hi=1, seed=5)), {"density": True}, "edges-weight-density")],
            variant="edges", grad=False, amp=False),
    OpEntry("quantile", pl.quantile, torch.quantile, lambda: _quantile_samples(False),
            error_inputs=_q_errors("quantile")),
    OpEntry("nanquantile", pl.nanquantile, torch.nanquantile, lambda: _quantile_samples(True),
            error_inputs=_q_errors("nanquantile")),
    OpEntry("cov", pl.cov, torch.cov,
            lambda: [Sample((U(3, 5),), name="2d"), Sample((U(5),), name="1d"),
                     Sample((U(3, 5),), {"correction": 0}, "corr0"), Sample((U(2, 4),), {"correction": 2}, "corr2"),
                     Sample((np.array([[1, 2, 4], [3, 1, 0]]),), name="int->float")],
            error_inputs=lambda: [ErrorInput((U(2, 2, 2),), exc=ValueError, match="cov: expected input to have two"),
                                  ErrorInput((U(2, 3),), {"fweights": pl.tensor([1.0, 2.0, 1.0])}, DtypeMismatch,
                                             "cov: fweights")]),
    OpEntry("cov", lambda x, a, f, **k: pl.cov(x, aweights=a, fweights=f, **k),
            lambda x, a, f, **k: torch.cov(x, aweights=a, fweights=f, **k),
            lambda: [Sample((U(3, 5), U(5, lo=0.1, hi=1, seed=4), _ints(1, 2, 1, 3, 1)), name="both"),
                     Sample((U(3, 5), U(5, lo=0.1, hi=1, seed=4), _ints(1, 2, 1, 3, 1)), {"correction": 0},
                            "both-corr0")],
            variant="weights"),
    OpEntry("cov", lambda x, a: pl.cov(x, aweights=a), lambda x, a: torch.cov(x, aweights=a),
            lambda: [Sample((U(3, 5), U(5, lo=0.1, hi=1, seed=4)), name="aweights")], variant="aweights"),
    OpEntry("corrcoef", pl.corrcoef, torch.corrcoef,
            lambda: [Sample((U(3, 5),), name="2d"), Sample((U(5),), name="1d", gradcheck=False),
                     Sample((np.array([[0.0, 1.0, 2.0], [0.0, 2.0, 4.1]]),), name="near-1"),
                     Sample((np.array([[1, 2, 4], [3, 1, 0]]),), name="int->float")]),
    OpEntry("cdist", pl.cdist, torch.cdist, _cdist_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3), U(2, 4)), exc=ShapeMismatch, match="cdist: x1 and x2"),
                                  ErrorInput((U(3), U(2, 3)), exc=ValueError, match="cdist: x1 must have"),
                                  ErrorInput((U(2, 3), U(2, 3)), {"p": -1.0}, ValueError, "cdist: p"),
                                  ErrorInput((U(2, 3), U(2, 3)), {"compute_mode": "x"}, ValueError, "compute_mode")]),
]
