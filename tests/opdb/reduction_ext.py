"""Op-database entries for the catalogue reductions, scans and sorting/selection ops (issue 3)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.core import U, noncontig

INF = float("inf")
NAN = float("nan")


def _red(dims=True):
    """Generic reduction samples: all dims, one dim, keepdim, negative dim, 0-d, non-contiguous."""
    s = [Sample((U(3, 4),), name="all"), Sample((U(3, 4),), {"dim": 1}, "dim1"),
         Sample((U(2, 3, 4),), {"dim": 0, "keepdim": True}, "keep"), Sample((U(2, 3, 4),), {"dim": -1}, "neg"),
         Sample((np.array(1.5),), name="0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig")]
    if dims:
        s.append(Sample((U(2, 3, 4),), {"dim": (0, 2)}, "dims"))
    return s


def _no_ties(*shape, seed=0):
    return np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape).astype(float) / 4 - 1


def _prod_samples():
    return _red(dims=False) + [
        Sample((np.array([2.0, 0.0, 3.0, 1.5]),), name="one-zero"),
        Sample((np.array([[2.0, 0.0, 3.0, 0.0], [1.0, 2.0, 0.0, 0.5]]),), {"dim": 1}, "two-zeros"),
        Sample((np.array([[0.0, 1.5], [0.0, 2.0]]),), {"dim": 0, "keepdim": True}, "zeros-dim0"),
        Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 0}, "int32->int64"),
        Sample((np.array([True, True]),), name="bool"), Sample((U(0, 3),), {"dim": 0}, "empty")]


def _var_samples():
    return _red() + [Sample((U(3, 4),), {"dim": 1, "correction": 0}, "corr0"),
                     Sample((U(3, 4),), {"dim": 1, "unbiased": False}, "unbiased-false"),
                     Sample((U(3, 4),), {"dim": 0, "correction": 2}, "corr2"),
                     Sample((U(2, 3),), {"dim": 0, "correction": 3}, "corr>N", gradcheck=False),
                     Sample((U(1, 3),), {"dim": 0}, "N=1-nan", gradcheck=False)]


def _norm_samples():
    return [Sample((U(3, 4),), name="fro"), Sample((U(3, 4),), {"p": 1, "dim": 1}, "p1"),
            Sample((U(3, 4),), {"p": 3, "dim": 0, "keepdim": True}, "p3"),
            Sample((U(3, 4),), {"p": 0.5, "dim": 1}, "p0.5"),
            Sample((_no_ties(3, 4),), {"p": INF, "dim": 1}, "inf"),
            Sample((_no_ties(3, 4) + 0.1,), {"p": -INF}, "-inf"),
            Sample((U(2, 3, 4),), {"p": 2, "dim": (1, 2)}, "dims"),
            Sample((np.zeros(3),), {"p": 2}, "zero-vector", gradcheck=False),
            Sample((np.array([1.0, -3.0, 3.0]),), {"p": INF}, "inf-ties", gradcheck=False),
            Sample((U(3, 4),), {"p": 0}, "p0"), Sample((np.array(-2.0),), name="0d")]


def _selecting(extra=()):
    return [Sample((_no_ties(3, 4),), {"dim": 1}, "dim1"), Sample((_no_ties(2, 3, 4),), {"dim": 0, "keepdim": True},
                                                                     "keep"),
            Sample((_no_ties(3, 5).T,), {"dim": -1}, "noncontig"), Sample((np.array(2.5),), {"dim": 0}, "0d"),
            *extra]


def _quiet(fn):
    """torch warns about ``correction >= N``; the suite compares the inf/NaN it returns."""
    def f(*a, **k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*a, **k)
    return f


def _ref_nt(fn):
    """torch's namedtuple results as plain tuples, so the suite compares element by element."""
    def f(*a, **k):
        out = fn(*a, **k)
        return tuple(out) if isinstance(out, tuple) else out
    return f


def _sort_samples():
    return [Sample((_no_ties(3, 4),),), Sample((_no_ties(3, 4),), {"dim": 0, "descending": True}, "desc"),
            Sample((np.array([[2.0, 1.0, 2.0, 1.0, 3.0]]),), {"stable": True}, "ties-stable", gradcheck=False),
            Sample((np.array([[2.0, 1.0, 2.0, 1.0, 3.0]]),), {"stable": True, "descending": True}, "ties-desc",
                   gradcheck=False),
            Sample((np.array([1.0, NAN, -1.0, NAN]),), {"stable": True}, "nan", gradcheck=False),
            Sample((np.array([1.0, NAN, -1.0]),), {"stable": True, "descending": True}, "nan-desc", gradcheck=False),
            Sample((np.array([3, 1, 2], dtype=np.int32),), name="int"),
            Sample((np.array(1.5),), name="0d"), Sample((U(0, 3),), name="empty"),
            Sample((_no_ties(4, 3).T,), {"dim": 0}, "noncontig")]


def _cum_samples():
    return [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(2, 3, 4),), {"dim": 0}, "dim0"),
            Sample((noncontig(3, 4),), {"dim": -1}, "noncontig"), Sample((np.array(1.5),), {"dim": 0}, "0d"),
            Sample((U(0, 3),), {"dim": 1}, "empty")]


def _cumprod_samples():
    return _cum_samples() + [
        Sample((np.array([2.0, 0.0, 3.0, 1.5]),), {"dim": 0}, "one-zero"),
        Sample((np.array([[2.0, 0.0, 3.0, 0.0, 0.5], [0.0, 1.5, 2.0, 0.5, 1.0]]),), {"dim": 1}, "two-zeros"),
        Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 1}, "int32->int64")]


def _cumext_samples():
    return [Sample((_no_ties(3, 4),), {"dim": 1}, "dim1"), Sample((_no_ties(2, 3, 4),), {"dim": 0}, "dim0"),
            Sample((np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0]),), {"dim": 0}, "ties", gradcheck=False),
            Sample((np.array([1.0, NAN, 3.0, NAN, 5.0]),), {"dim": 0}, "nan", gradcheck=False),
            Sample((np.array([3, 1, 4, 1], dtype=np.int64),), {"dim": 0}, "int"),
            Sample((np.array(1.5),), {"dim": 0}, "0d")]


def _lse_samples():
    return [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims"),
            Sample((np.array([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]]),), {"dim": 1}, "huge", gradcheck=False),
            Sample((np.array([[-INF, 0.5, 1.0], [-INF, -INF, 2.0]]),), {"dim": 1}, "-inf", gradcheck=False),
            Sample((np.array(1.5),), {"dim": 0}, "0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig"),
            Sample((np.array([1, 2, 3]),), {"dim": 0}, "int")]


ENTRIES = [
    # ---------------------------------------------------------------- reductions
    OpEntry("prod", lambda x, **k: pl.prod(x, **k), lambda x, **k: torch.prod(x, **k), _prod_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3),), {"dim": 3}, IndexError, "prod: dimension out of range"),
                                  ErrorInput((U(2, 3),), {"dim": (0, 1)}, TypeError, "prod: dim must be an int")]),
    OpEntry("argmax", lambda x, **k: pl.argmax(x, **k), lambda x, **k: torch.argmax(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(3, 4),), {"dim": 0, "keepdim": True}, "keep"),
                     Sample((U(3, 4),), {"keepdim": True}, "all-keep"),
                     Sample((np.array([1.0, 3.0, 3.0]),), {"dim": 0}, "ties"),
                     Sample((np.array([1.0, NAN, 3.0, NAN]),), name="nan"),
                     Sample((np.array([1, 5, 5]),), name="int"), Sample((np.array(1.0),), name="0d")],
            grad=False, error_inputs=lambda: [ErrorInput((U(0, 3),), {"dim": 0}, IndexError, "argmax")]),
    OpEntry("argmin", lambda x, **k: pl.argmin(x, **k), lambda x, **k: torch.argmin(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((np.array([[1.0, 1.0, 3.0]]),), {"dim": 1}, "ties")], grad=False),
    OpEntry("var", lambda x, **k: pl.var(x, **k), _quiet(lambda x, **k: torch.var(x, **k)), _var_samples,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), {}, DtypeMismatch, "var: std and var only"),
                                  ErrorInput((U(3),), {"correction": 1, "unbiased": True}, ValueError, "var")]),
    OpEntry("std", lambda x, **k: pl.std(x, **k), _quiet(lambda x, **k: torch.std(x, **k)),
            lambda: _var_samples() + [Sample((np.full((2, 3), 1.5),), {"dim": 1}, "constant", gradcheck=False)]),
    OpEntry("logsumexp", lambda x, **k: pl.logsumexp(x, **k), lambda x, **k: torch.logsumexp(x, **k), _lse_samples),
    OpEntry("norm", lambda x, **k: pl.ops.reduction.norm(x, **k), lambda x, **k: torch.norm(x, **k), _norm_samples,
            error_inputs=lambda: [ErrorInput((U(3),), {"p": "nuc"}, ValueError, "norm: p='nuc'"),
                                  ErrorInput((np.array([1, 2]),), {}, DtypeMismatch, "norm")]),
    *[OpEntry(n, lambda x, n=n, **k: getattr(pl, n)(x, **k), lambda x, n=n, **k: getattr(torch, n)(x, **k),
              lambda: [Sample((np.array([[1.0, 0.0], [2.0, 3.0]]),)),
                       Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": 1}, "int-dim"),
                       Sample((np.array([[True, False], [True, True]]),), {"dim": 0, "keepdim": True}, "bool"),
                       Sample((np.array([[1, 0], [2, 0]], dtype=np.uint8),), {"dim": 1}, "uint8"),
                       Sample((U(0, 2),), {"dim": 0}, "empty"), Sample((np.array(0.0),), name="0d")],
              grad=False) for n in ("all", "any")],
    OpEntry("count_nonzero", lambda x, **k: pl.count_nonzero(x, **k), lambda x, **k: torch.count_nonzero(x, **k),
            lambda: [Sample((np.array([[1.0, 0.0], [2.0, 3.0]]),)),
                     Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": 1}, "dim"),
                     Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": (0, 1)}, "dims")], grad=False),
    OpEntry("median", lambda x: pl.median(x), lambda x: torch.median(x),
            lambda: [Sample((_no_ties(3, 4),), name="even"), Sample((_no_ties(5),), name="odd"),
                     Sample((np.array([1.0, 2.0, 2.0, 1.0]),), name="ties-lower", gradcheck=False),
                     Sample((np.array([1.0, NAN, 2.0]),), name="nan", gradcheck=False),
                     Sample((np.array([3, 1, 2, 4]),), name="int"), Sample((np.array(1.5),), name="0d"),
                     Sample((U(0),), name="empty")]),
    OpEntry("nanmedian", lambda x: pl.nanmedian(x), lambda x: torch.nanmedian(x),
            lambda: [Sample((_no_ties(3, 4),), name="even"),
                     Sample((np.array([1.0, NAN, 2.0, 4.0]),), name="nan", gradcheck=False),
                     Sample((np.array([NAN, NAN]),), name="all-nan", gradcheck=False)]),
    OpEntry("median_dim", lambda x, **k: pl.median(x, **k), _ref_nt(lambda x, **k: torch.median(x, **k)),
            lambda: _selecting([Sample((np.array([[1.0, 2.0, 2.0, 3.0, 2.0, 0.0]]),), {"dim": 1}, "ties",
                                       gradcheck=False),
                                Sample((np.array([[1.0, NAN, 2.0], [3.0, 1.0, 2.0]]),), {"dim": 1}, "nan",
                                       gradcheck=False)]),
            error_inputs=lambda: [ErrorInput((U(2, 0),), {"dim": 1}, IndexError, "median: expected reduction dim")]),
    OpEntry("nanmedian_dim", lambda x, **k: pl.nanmedian(x, **k), _ref_nt(lambda x, **k: torch.nanmedian(x, **k)),
            lambda: _selecting([Sample((np.array([[1.0, NAN, 2.0, 4.0], [5.0, 1.0, NAN, NAN]]),), {"dim": 1}, "nan",
                                       gradcheck=False)])),
    OpEntry("mode", lambda x, **k: pl.mode(x, **k), _ref_nt(lambda x, **k: torch.mode(x, **k)),
            lambda: _selecting([Sample((np.array([[2.0, 2.0, 1.0, 1.0, 5.0], [0.0, 7.0, 7.0, 0.0, 0.0]]),), {"dim": 1},
                                       "ties", gradcheck=False),
                                Sample((np.array([3, 1, 3, 1, 2]),), {}, "int")])),
    OpEntry("max_with_indices", lambda x, **k: pl.max_with_indices(x, **k),
            _ref_nt(lambda x, **k: torch.max(x, **k)),
            lambda: _selecting([Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]),), {"dim": 1}, "ties",
                                       gradcheck=False),
                                Sample((np.array([[1.0, NAN, 3.0]]),), {"dim": 1}, "nan", gradcheck=False)])),
    OpEntry("min_with_indices", lambda x, **k: pl.min_with_indices(x, **k),
            _ref_nt(lambda x, **k: torch.min(x, **k)),
            lambda: _selecting([Sample((np.array([[1.0, 0.0, 0.0]]),), {"dim": 1}, "ties", gradcheck=False)])),
    # ---------------------------------------------------------------- scans
    OpEntry("cumsum", lambda x, **k: pl.cumsum(x, **k), lambda x, **k: torch.cumsum(x, **k),
            lambda: _cum_samples() + [Sample((np.array([2**30, 2**30], dtype=np.int32),), {"dim": 0}, "int32-overflow"),
                                      Sample((np.array([True, True]),), {"dim": 0}, "bool")],
            error_inputs=lambda: [ErrorInput((U(3),), {"dim": 1}, IndexError, "cumsum: dimension out of range")]),
    OpEntry("cumprod", lambda x, **k: pl.cumprod(x, **k), lambda x, **k: torch.cumprod(x, **k), _cumprod_samples),
    OpEntry("cummax", lambda x, **k: pl.cummax(x, **k), _ref_nt(lambda x, **k: torch.cummax(x, **k)),
            _cumext_samples),
    OpEntry("cummin", lambda x, **k: pl.cummin(x, **k), _ref_nt(lambda x, **k: torch.cummin(x, **k)),
            _cumext_samples),
    OpEntry("logcumsumexp", lambda x, **k: pl.logcumsumexp(x, **k), lambda x, **k: torch.logcumsumexp(x, **k),
            lambda: _cum_samples() + [
                Sample((np.array([1e4, 1e4, -1e4, 0.0]),), {"dim": 0}, "huge"),
                Sample((np.array([-1e4, 0.0, 1e4]),), {"dim": 0}, "huge-rising"),
                Sample((np.array([[-INF, 0.5, 1.0], [0.0, -INF, 2.0]]),), {"dim": 1}, "-inf", gradcheck=False)]),
    # ---------------------------------------------------------------- sorting / selection
    OpEntry("sort", lambda x, **k: pl.sort(x, **k), _ref_nt(lambda x, **k: torch.sort(x, **k)), _sort_samples,
            error_inputs=lambda: [ErrorInput((U(3),), {"dim": 2}, IndexError, "sort: dimension out of range")]),
    OpEntry("argsort", lambda x, **k: pl.argsort(x, **k), lambda x, **k: torch.argsort(x, **k),
            lambda: [s for s in _sort_samples() if s.name != "empty"], grad=False),
    OpEntry("topk", lambda x, k, **kw: pl.topk(x, k, **kw), _ref_nt(lambda x, k, **kw: torch.topk(x, k, **kw)),
            lambda: [Sample((_no_ties(3, 5), 2)), Sample((_no_ties(3, 5), 2), {"dim": 0, "largest": False}, "smallest"),
                     Sample((_no_ties(3, 5), 0), name="k0"), Sample((_no_ties(3, 5), 5), name="k=n"),
                     Sample((np.array(2.5), 1), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3), 4), {}, IndexError, "topk: k=4 is out of range")]),
    OpEntry("kthvalue", lambda x, k, **kw: pl.kthvalue(x, k, **kw),
            _ref_nt(lambda x, k, **kw: torch.kthvalue(x, k, **kw)),
            lambda: [Sample((_no_ties(3, 5), 2)), Sample((_no_ties(3, 5), 3), {"dim": 0, "keepdim": True}, "keep"),
                     Sample((np.array(2.5), 1), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3), 4), {}, IndexError, "kthvalue: k=4 is out of range")]),
    OpEntry("unique", lambda x, **k: pl.unique(x, **k), lambda x, **k: torch.unique(x, **k),
            lambda: [Sample((np.array([3, 1, 2, 1, 3]),), {"return_inverse": True, "return_counts": True}),
                     Sample((np.array([[3.0, 1.0], [1.0, 2.0]]),), {"return_inverse": True}, "2d"),
                     Sample((np.array([[1, 2], [1, 2], [0, 3]]),), {"dim": 0, "return_inverse": True,
                                                                    "return_counts": True}, "dim0"),
                     Sample((np.array([3, 1, 3]),), {"sorted": False}, "unsorted")], grad=False),
    OpEntry("unique_consecutive", lambda x, **k: pl.unique_consecutive(x, **k),
            lambda x, **k: torch.unique_consecutive(x, **k),
            lambda: [Sample((np.array([1, 1, 2, 2, 3, 1, 1]),), {"return_inverse": True, "return_counts": True}),
                     Sample((np.array([[1, 2], [1, 2], [0, 3], [1, 2]]),), {"dim": 0, "return_inverse": True,
                                                                            "return_counts": True}, "dim0"),
                     Sample((np.array([1.0, 1.0, 2.0]),), name="float")], grad=False),
    OpEntry("searchsorted", lambda s, v, **k: pl.searchsorted(s, v, **k),
            lambda s, v, **k: torch.searchsorted(s, v, **k),
            lambda: [Sample((np.array([1.0, 3.0, 5.0, 7.0]), np.array([3.0, 6.0, 9.0, 0.0]))),
                     Sample((np.array([1.0, 3.0, 5.0, 7.0]), np.array([[3.0, 5.0]])), {"right": True}, "right"),
                     Sample((np.array([1, 3, 5]), np.array([3])), {"side": "right", "out_int32": True}, "side"),
                     Sample((np.array([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]), np.array([[3.0], [3.0]])), name="2d"),
                     Sample((np.array([1.0, 3.0, 5.0, 7.0]), 4.0), name="scalar")],
            grad=False, error_inputs=lambda: [ErrorInput((U(2, 3), U(3, 1)), {}, ValueError, "searchsorted")]),
    # internal gather/scatter pair behind every value-selecting op
    OpEntry("select_along_dim", lambda x, i: pl.ops.sorting.select_along_dim(x, i, 1),
            lambda x, i: torch.take_along_dim(x, i, 1),
            lambda: [Sample((U(3, 4), np.array([[0, 3], [1, 1], [2, 0]])))], amp=False),
    OpEntry("select_along_dim_backward",
            lambda g, i: pl.ops.sorting.select_along_dim_backward(g, i, 1, (3, 4)),
            lambda g, i: torch.zeros(3, 4, dtype=g.dtype).scatter_add(1, i, g),
            lambda: [Sample((U(3, 2), np.array([[0, 3], [1, 1], [2, 0]])))], amp=False),
]
