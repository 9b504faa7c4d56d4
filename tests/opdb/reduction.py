"""Op-database entries for the reductions (``pylucid/ops/reduction.py``): the documented ``mean``/``max``/
``min``, sums and products, statistics, norms, logical reductions, medians and modes, and the composites
(``amax``, ``nansum``, ``var_mean``, ...)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch
from tests.opdb import INF, NAN, C, ErrorInput, OpEntry, Sample, U, no_ties, noncontig


def _red(dims=True):
    """Generic reduction samples: all dims, one dim, keepdim, negative dim, 0-d, non-contiguous."""
    s = [Sample((U(3, 4),), name="all"), Sample((U(3, 4),), {"dim": 1}, "dim1"),
         Sample((U(2, 3, 4),), {"dim": 0, "keepdim": True}, "keep"), Sample((U(2, 3, 4),), {"dim": -1}, "neg"),
         Sample((np.array(1.5),), name="0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig")]
    if dims:
        s.append(Sample((U(2, 3, 4),), {"dim": (0, 2)}, "dims"))
    return s


def _prod_samples():
    return _red(dims=False) + [
        Sample((np.array([2.0, 0.0, 3.0, 1.5]),), name="one-zero"),
        Sample((np.array([[2.0, 0.0, 3.0, 0.0], [1.0, 2.0, 0.0, 0.5]]),), {"dim": 1}, "two-zeros"),
        Sample((np.array([[0.0, 1.5], [0.0, 2.0]]),), {"dim": 0, "keepdim": True}, "zeros-dim0"),
        Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 0}, "int32->int64"),
        Sample((np.array([True, True]),), name="bool"), Sample((U(0, 3),), {"dim": 0}, "empty"),
        Sample((C(3),), name="complex")]


def _var_samples():
    return _red() + [Sample((U(3, 4),), {"dim": 1, "correction": 0}, "corr0"),
                     Sample((U(3, 4),), {"dim": 1, "unbiased": False}, "unbiased-false"),
                     Sample((U(3, 4),), {"dim": 1, "unbiased": True}, "unbiased-true"),
                     Sample((U(3, 4),), {"dim": 0, "correction": 2}, "corr2"),
                     Sample((U(3, 4),), {"correction": 2}, "corr2-all"),
                     Sample((U(2, 3),), {"dim": 0, "correction": 3}, "corr>N", gradcheck=False),
                     Sample((U(1, 3),), {"dim": 0}, "N=1-nan", gradcheck=False),
                     Sample((np.array(1.5),), {"dim": 0, "keepdim": True}, "0d-dim", gradcheck=False),
                     Sample((C(3, 4),), {"dim": 1}, "complex"), Sample((C(3, 4),), name="complex-all")]


def norm_at_zero_samples(key):
    """The subgradient conventions at zero, first and second order, and complex inputs: for each ``p``/``ord``."""
    zeros3 = np.array([0.0, 3.0, -4.0, 0.0])
    out = []
    for p, mode in ((2, "all"), (1, "all"), (3, "all"), (0.5, "finite"), (INF, "")):
        kw = {key: p}
        out += [Sample((np.zeros(4),), kw, f"zeros-{p}", gradcheck=False),
                Sample((zeros3,), kw, f"some-zeros-{p}", gradcheck=p == 2 or p == 3, gradgrad_ref=mode),
                Sample((C(4),), kw, f"complex-{p}"),
                Sample((np.array([0j, 3 - 4j, 1j]),), kw, f"complex-zero-{p}", gradgrad_ref="finite")]
    return out


def _norm_samples():
    return [Sample((U(3, 4),), name="fro"), Sample((U(3, 4),), {"p": "fro"}, "fro-named"),
            Sample((U(3, 4),), {"p": 1, "dim": 1}, "p1"), Sample((U(3, 4),), {"p": 1}, "p1-all"),
            Sample((U(3, 4),), {"p": 2, "dim": 1}, "p2-dim"),
            Sample((U(3, 4),), {"p": 3, "dim": 0, "keepdim": True}, "p3"),
            Sample((U(3, 4),), {"p": 0.5, "dim": 1}, "p0.5"),
            Sample((no_ties(3, 4),), {"p": INF, "dim": 1}, "inf"), Sample((no_ties(3, 4),), {"p": INF}, "inf-all"),
            Sample((no_ties(3, 4) + 0.1,), {"p": -INF}, "-inf"),
            Sample((U(2, 3, 4),), {"p": 2, "dim": (1, 2)}, "dims"),
            Sample((np.zeros(3),), {"p": 2}, "zero-vector", gradcheck=False),
            Sample((np.array([1.0, -3.0, 3.0]),), {"p": INF}, "inf-ties", gradcheck=False),
            Sample((U(3, 4),), {"p": 0}, "p0"), Sample((np.array(-2.0),), name="0d"), *norm_at_zero_samples("p")]


def _selecting(extra=()):
    return [Sample((no_ties(3, 4),), {"dim": 1}, "dim1"), Sample((no_ties(2, 3, 4),), {"dim": 0, "keepdim": True},
                                                                    "keep"),
            Sample((no_ties(3, 5).T,), {"dim": -1}, "noncontig"), Sample((np.array(2.5),), {"dim": 0}, "0d"),
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


def _lse_samples():
    return [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims"),
            Sample((U(3, 4) * 300,), {"dim": 1}, "large"),
            Sample((np.array([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]]),), {"dim": 1}, "huge", gradcheck=False),
            Sample((np.array([[-INF, 0.5, 1.0], [-INF, -INF, 2.0]]),), {"dim": 1}, "-inf", gradcheck=False),
            Sample((np.array(1.5),), {"dim": 0}, "0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig"),
            Sample((np.array([1, 2, 3]),), {"dim": 0}, "int"),
            Sample((C(3, 4) * 20,), {"dim": 1}, "complex"), Sample((C(2, 3) * 1e4,), {"dim": 1}, "complex-huge")]


def _amax_ref(name):
    fn = getattr(torch, name)
    return lambda x, dim=(), keepdim=False: fn(x, dim=dim, keepdim=keepdim)


def _minmax_ref(reduce, arg, elementwise):
    """``max``/``min``'s three forms: values (torch's amax/amin: ties share the gradient) for all dims or a tuple;
    ``(values, first index)`` for one int dim; the element-wise form for a Tensor argument."""
    def ref(x, dim=None, keepdim=False):
        if isinstance(dim, torch.Tensor):
            return elementwise(x, dim)
        if isinstance(dim, int):
            return reduce(x, dim, keepdim), arg(x, dim, keepdim)
        return reduce(x, dim=() if dim is None else dim, keepdim=keepdim)
    return ref


def _nan_samples():
    return [Sample((np.array([1.0, NAN, 0.0, -2.5]),), name="nan"),
            Sample((np.array([[1.0, NAN, 2.0], [NAN, NAN, 3.0]]),), {"dim": 1}, "dim"),
            # an all-NaN slice: NaN value and NaN gradient (PyTorch's g / 0 * 0)
            Sample((np.array([[1.0, NAN], [NAN, NAN]]),), {"dim": 0, "keepdim": True}, "all-nan-column",
                   gradcheck=False),
            Sample((np.array([[1.0, NAN, 2.0], [NAN, 4.0, 3.0]]),), {"dim": 1, "keepdim": True}, "keep"),
            Sample((np.array(NAN),), name="0d"), Sample((np.array(2.0),), {"dim": 0}, "0d-dim"),
            Sample((U(0, 3),), {"dim": 1}, "empty"), Sample((U(2, 3, 4),), {"dim": (0, 2)}, "dims"),
            Sample((U(3, 4),), name="no-nan")]


ENTRIES = [
    # -- the documented ops ------------------------------------------------------------
    OpEntry("mean", pl.mean, torch.mean,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((U(3, 4),), {"dim": (0, 1)}, "all-dims-tuple"),
                     Sample((U(2, 3, 4),), {"dim": -1, "keepdim": False}, "neg"),
                     Sample((np.array(2.0),), name="0d"),
                     Sample((noncontig(3, 4),), {"dim": 0}, "noncontig"),
                     Sample((U(0, 3),), {"dim": 0}, "empty-nan"), Sample((C(3),), name="complex"),
                     Sample((np.array(2.0),), {"dim": -1}, "0d-dim"),
                     Sample((np.array(2.0),), {"dim": 0, "keepdim": True}, "0d-dim-keep")],
            error_inputs=lambda: [ErrorInput((U(2, 3),), {"dim": 2}, IndexError, "mean: dimension out of range"),
                                  ErrorInput((U(2, 3),), {"dim": (0, 0)}, ValueError, "more than once"),
                                  ErrorInput((np.arange(3),), {}, TypeError, "mean: could not infer")]),
    # pylucid.max/min: values for all dims or a tuple, (values, indices) for one int dim, element-wise with a Tensor
    OpEntry("max", pl.max, _minmax_ref(torch.amax, torch.argmax, torch.maximum),
            lambda: [Sample((U(3, 4),), gradcheck=True), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]),), {"dim": 1}, "ties", gradcheck=False),
                     Sample((np.array([[1.0, 3.0], [3.0, 0.0]]),), {}, "ties-all", gradcheck=False),
                     Sample((np.array([[1.0, NAN], [0.0, 1.0]]),), {"dim": 1}, "nan", gradcheck=False),
                     Sample((np.array(-1.0),), name="0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig")],
            error_inputs=lambda: [ErrorInput((U(0, 3),), {"dim": 0}, IndexError, "max: expected reduction dim 0"),
                                  ErrorInput((U(2, 3),), {"dim": 5}, IndexError, "max: dimension out of range")]),
    OpEntry("min", pl.min, _minmax_ref(torch.amin, torch.argmin, torch.minimum),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 0, "keepdim": True}, "dim0"),
                     Sample((U(3, 4),), {"dim": 0}, "dim0-drop"),
                     Sample((U(2, 3, 4),), {"dim": (1, 2)}, "dims"),
                     Sample((np.array([[1.0, -3.0, -3.0], [2.0, 2.0, 5.0]]),), {"dim": 1}, "ties", gradcheck=False),
                     Sample((np.array([2.0, 2.0, 2.0]),), {}, "all-tied", gradcheck=False),
                     Sample((np.array(4.0),), name="0d")],
            error_inputs=lambda: [ErrorInput((U(0),), {}, IndexError, "min: cannot reduce an empty tensor")]),
    # with a Tensor argument: the element-wise maximum/minimum (those ops' entries check their AMP policy)
    *[OpEntry(n, getattr(pl, n), _minmax_ref(None, None, getattr(torch, e)),
              lambda: [Sample((U(3, 4), U(3, 4, seed=1))), Sample((U(3, 4), U(4, seed=1)), name="broadcast")],
              variant="elementwise", amp=False, runs=(e,)) for n, e in (("max", "maximum"), ("min", "minimum"))],
    # -- sums and products ---------------------------------------------------------------
    OpEntry("sum", pl.sum, torch.sum,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(3, 4),), {"dim": 1, "keepdim": True}, "dim1-keep"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 0}, "int32->int64"),
                     Sample((np.array([[3, -1, 4], [1, -5, 9]], dtype=np.int32),), name="int32-all"),
                     Sample((np.array([True, True, False]),), {}, "bool->int64"),
                     Sample((U(0, 3),), {"dim": 0}, "empty"), Sample((np.array(3.0),), name="0d"),
                     Sample((np.array(3.0),), {"dim": 0, "keepdim": True}, "0d-dim-keep"),
                     Sample((np.array(3.0),), {"dim": (-1,)}, "0d-dims"),
                     Sample((U(0, 3),), {"dim": 1, "keepdim": True}, "empty-keep"),
                     Sample((U(0, 3),), name="empty-all"),
                     Sample((C(3, 2),), {"dim": 0}, "complex")]),
    OpEntry("prod", pl.prod, torch.prod, _prod_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3),), {"dim": 3}, IndexError, "prod: dimension out of range"),
                                  ErrorInput((U(2, 3),), {"dim": (0, 1)}, TypeError, "prod: dim must be an int")]),
    OpEntry("nansum", pl.nansum, torch.nansum, lambda: _nan_samples() + [Sample((np.array([1, 2, 3]),), name="int")]),
    OpEntry("nanmean", pl.nanmean, torch.nanmean, _nan_samples,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), exc=DtypeMismatch, match="nanmean")]),
    # -- extremes and their positions ------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), _amax_ref(n),
              lambda: [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(3, 4),), name="all"),
                       Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                       Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]),), {"dim": 1}, "ties", gradcheck=False),
                       Sample((np.array([3, 1, 3]),), name="int"), Sample((np.array(1.5),), name="0d"),
                       Sample((np.array(1.5),), {"dim": 0, "keepdim": True}, "0d-dim"),
                       Sample((U(0, 3),), {"dim": 1}, "empty-kept-dim"),
                       Sample((U(0, 3),), {"dim": 1, "keepdim": True}, "empty-keep")],
              error_inputs=lambda n=n: [ErrorInput((U(0, 3),), {"dim": 0}, IndexError,
                                                   f"{n}: expected reduction dim 0 to have non-zero size")])
      for n in ("amax", "amin")],
    OpEntry("argmax", pl.argmax, torch.argmax,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(3, 4),), {"dim": 0, "keepdim": True}, "keep"),
                     Sample((U(3, 4),), {"keepdim": True}, "all-keep"),
                     Sample((np.array([1.0, 3.0, 3.0]),), {"dim": 0}, "ties"),
                     Sample((np.array([1.0, NAN, 3.0, NAN]),), name="nan"),
                     Sample((np.array([1, 5, 5]),), name="int"), Sample((np.array(1.0),), name="0d")],
            grad=False, error_inputs=lambda: [ErrorInput((U(0, 3),), {"dim": 0}, IndexError, "argmax")]),
    OpEntry("argmin", pl.argmin, torch.argmin,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((np.array([[1.0, 1.0, 3.0]]),), {"dim": 1}, "ties")], grad=False),
    OpEntry("max_with_indices", pl.max_with_indices, _ref_nt(torch.max),
            lambda: _selecting([Sample((no_ties(3, 4), 1), name="positional-dim"),
                                Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]),), {"dim": 1}, "ties",
                                       gradcheck=False),
                                Sample((np.array([[1.0, NAN, 3.0]]),), {"dim": 1}, "nan", gradcheck=False)])),
    OpEntry("min_with_indices", pl.min_with_indices, _ref_nt(torch.min),
            lambda: _selecting([Sample((no_ties(3, 4), 0), name="positional-dim"),
                                Sample((np.array([[1.0, 0.0, 0.0]]),), {"dim": 1}, "ties", gradcheck=False)])),
    # -- statistics --------------------------------------------------------------------------
    OpEntry("var", pl.var, _quiet(torch.var), _var_samples,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), {}, DtypeMismatch, "var: std and var only"),
                                  ErrorInput((U(3),), {"correction": "x"}, TypeError, "var: correction must be"),
                                  ErrorInput((U(3),), {"correction": 1, "unbiased": True}, ValueError, "var")]),
    OpEntry("std", pl.std, _quiet(torch.std),
            lambda: _var_samples() + [Sample((np.full((2, 3), 1.5),), {"dim": 1}, "constant", gradcheck=False)]),
    *[OpEntry(n, getattr(pl, n), _quiet(getattr(torch, n)),
              lambda: [Sample((U(3, 4),), {"dim": 1}, "dim1"), Sample((U(3, 4),), {"dim": 0, "correction": 0}, "corr0"),
                       Sample((U(3, 4),), name="all"), Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "keep")])
      for n in ("var_mean", "std_mean")],
    OpEntry("logsumexp", pl.logsumexp, torch.logsumexp, _lse_samples),
    # -- norms: one primitive behind every vector-norm front end ------------------------------
    OpEntry("norm", pl.ops.reduction.norm, torch.norm, _norm_samples,
            error_inputs=lambda: [ErrorInput((U(3),), {"p": "nuc"}, ValueError, "norm: p='nuc'"),
                                  ErrorInput((U(0),), {"p": INF}, IndexError, "norm: cannot compute the inf norm"),
                                  ErrorInput((U(2, 0),), {"p": -INF, "dim": 1}, IndexError, "norm: cannot compute"),
                                  ErrorInput((np.array([1, 2]),), {}, DtypeMismatch, "norm")]),
    OpEntry("norm", pl.norm, torch.norm,
            lambda: [Sample((U(3, 4),), name="fro"), *[Sample((U(3, 4),), {"p": p}, str(p)) for p in (1, 2, INF)],
                     Sample((U(3, 4),), {"p": 2, "dim": 1}, "dim"), Sample((U(3, 4),), {"p": "nuc"}, "nuc"),
                     Sample((np.zeros(4),), name="zeros", gradcheck=False),
                     Sample((np.array([0.0, 3.0, -4.0, 0.0]),), name="some-zeros", gradgrad_ref="all"),
                     Sample((C(4),), name="complex"), Sample((np.array([0j, 3 - 4j, 1j]),), name="complex-zero")],
            variant="pylucid", runs=("norm",), amp=False),  # nuc runs svd: the op's own entries check AMP
    # half precision accumulates in float32: the sum of squares here overflows float16
    OpEntry("norm", pl.linalg.vector_norm, torch.linalg.vector_norm, lambda: [Sample((np.full(4096, 300.0),),
                                                                                     name="large")],
            variant="half", dtypes=("float16", "bfloat16"), grad=False, amp=False),
    # -- logical reductions ------------------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([[1.0, 0.0], [2.0, 3.0]]),)),
                       Sample((U(3, 4) > -1.5,), name="bool-all"), Sample((U(3, 4) > 1.9,), {"dim": 1}, "bool-dim"),
                       Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": 1}, "int-dim"),
                       Sample((np.array([[True, False], [True, True]]),), {"dim": 0, "keepdim": True}, "bool"),
                       Sample((np.array([[1, 0], [2, 0]], dtype=np.uint8),), {"dim": 1}, "uint8"),
                       Sample((U(0, 2),), {"dim": 0}, "empty"), Sample((np.array(0.0),), name="0d")],
              grad=False) for n in ("all", "any")],
    OpEntry("count_nonzero", pl.count_nonzero, torch.count_nonzero,
            lambda: [Sample((np.array([[1.0, 0.0], [2.0, 3.0]]),)),
                     Sample((U(3, 4) > 0,), {"dim": 0}, "bool-dim0"),
                     Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": 1}, "dim"),
                     Sample((np.array([[1, 0, 0], [2, 3, 0]]),), {"dim": (0, 1)}, "dims")], grad=False),
    # -- medians and modes -------------------------------------------------------------------
    OpEntry("median", pl.median, torch.median,
            lambda: [Sample((no_ties(3, 4),), name="even"), Sample((no_ties(5),), name="odd"),
                     Sample((np.array([1.0, 2.0, 2.0, 1.0]),), name="ties-lower", gradcheck=False),
                     Sample((np.array([1.0, NAN, 2.0]),), name="nan", gradcheck=False),
                     Sample((np.array([3, 1, 2, 4]),), name="int"), Sample((np.array(1.5),), name="0d"),
                     Sample((U(0),), name="empty"), Sample((np.zeros(0, dtype=np.int64),), name="empty-int")]),
    OpEntry("nanmedian", pl.nanmedian, torch.nanmedian,
            lambda: [Sample((no_ties(3, 4),), name="even"),
                     Sample((np.array([1.0, NAN, 2.0, 4.0]),), name="nan", gradcheck=False),
                     Sample((np.array([NAN, NAN]),), name="all-nan", gradcheck=False)]),
    OpEntry("median_dim", pl.median, _ref_nt(torch.median),
            lambda: _selecting([Sample((np.array([[1.0, 2.0, 2.0, 3.0, 2.0, 0.0]]),), {"dim": 1}, "ties",
                                       gradcheck=False),
                                Sample((np.array([[1.0, NAN, 2.0], [3.0, 1.0, 2.0]]),), {"dim": 1}, "nan",
                                       gradcheck=False)]),
            error_inputs=lambda: [ErrorInput((U(2, 0),), {"dim": 1}, IndexError, "median: expected reduction dim")]),
    OpEntry("nanmedian_dim", pl.nanmedian, _ref_nt(torch.nanmedian),
            lambda: _selecting([Sample((np.array([[1.0, NAN, 2.0, 4.0], [5.0, 1.0, NAN, NAN]]),), {"dim": 1}, "nan",
                                       gradcheck=False)])),
    OpEntry("mode", pl.mode, _ref_nt(torch.mode),
            lambda: _selecting([Sample((np.array([[2.0, 2.0, 1.0, 1.0, 5.0], [0.0, 7.0, 7.0, 0.0, 0.0]]),), {"dim": 1},
                                       "ties", gradcheck=False),
                                Sample((np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 0.0, 0.0]]),), {"dim": 1},
                                       "ties-pairs", gradcheck=False),
                                Sample((np.array([3, 1, 3, 1, 2]),), {}, "int")])),
]

ENTRIES += [
    OpEntry("aminmax", pl.aminmax, _ref_nt(torch.aminmax),
            lambda: [Sample((U(3, 4),), name="all"), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": 0, "keepdim": True}, "keep"), Sample((U(3, 4),), {"dim": -1}, "neg"),
                     Sample((np.array(1.5),), name="0d"),
                     Sample((np.array(1.5),), {"dim": 0, "keepdim": True}, "0d-dim"),
                     Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]),), {"dim": 1}, "ties", gradcheck=False),
                     Sample((np.array([3, 1, 3]),), name="int"), Sample((U(0, 3),), {"dim": 1}, "empty-kept-dim")],
            error_inputs=lambda: [ErrorInput((U(0, 3),), {}, IndexError, "aminmax: cannot reduce an empty tensor"),
                                  ErrorInput((U(2, 3),), {"dim": (0, 1)}, TypeError, "aminmax: dim must be an int")]),
    OpEntry("dist", pl.dist, torch.dist,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1)), name="p2"), Sample((U(2, 1, 4), U(3, 1, seed=1)), name="bcast"),
                     # p=0: PyTorch's dist backward fails (an undefined tensor); pylucid's gradient is zero
                     *[Sample((U(3, 4), U(3, 4, seed=1)), {"p": p}, f"p{p}", gradcheck=p not in (0, INF),
                              grad_args=() if p == 0 else None) for p in (1, 3, 0.5, 0, INF)],
                     Sample((np.array([1.0, 2.0]), np.array([1.0, 2.0])), name="equal", gradcheck=False),
                     Sample((np.array(1.5), np.array(-0.5)), name="0d")],
            error_inputs=lambda: [ErrorInput((U(2), [1.0, 2.0]), exc=TypeError, match="dist: other")]),
    OpEntry("renorm", pl.renorm, torch.renorm,
            lambda: [Sample((U(3, 4), 2, 0, 1.5), name="rows"), Sample((U(3, 4), 1, 1, 2.0), name="p1-cols"),
                     Sample((U(2, 3, 4), 3, -1, 1.0), name="3d"), Sample((U(3, 4), 2, 0, 100.0), name="no-change"),
                     Sample((U(3, 4), 2.5, 0, 0.5), name="all-scaled")],
            error_inputs=lambda: [ErrorInput((U(3), 2, 0, 1.0), exc=ValueError, match="renorm: input needs"),
                                  ErrorInput((U(3, 2), 0, 0, 1.0), exc=ValueError, match="renorm: p must"),
                                  ErrorInput((U(3, 2), 2, 0, -1.0), exc=ValueError, match="renorm: maxnorm")]),
]

# the statistics family
from tests.opdb.statistics import ENTRIES as _STATISTICS  # noqa: E402

ENTRIES += _STATISTICS
