"""Op-database entries for the core ops (issue 2): the four documented ops and
what the engine needs."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample, rng


def U(*shape, lo=-2.0, hi=2.0, seed=0):
    return rng(seed).uniform(lo, hi, size=shape)


def noncontig(*shape, seed=0):
    """A non-contiguous array (a transposed view) of the given shape."""
    a = U(*reversed(shape), seed=seed)
    return a.T


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


def _minmax_ref(reduce, arg):
    """torch's amax/amin (ties share the gradient) and, for one int dim, argmax/argmin's first index."""
    def ref(x, dim=None, keepdim=False):
        if isinstance(dim, int):
            return reduce(x, dim, keepdim), arg(x, dim, keepdim)
        return reduce(x, dim=() if dim is None else dim, keepdim=keepdim)
    return ref


def _bcast_errors(fn_name):
    def f():
        return [ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match=rf"{fn_name}: shapes \(2, 3\) and \(4,\)")]
    return f


ENTRIES = [
    # -- the four documented ops -------------------------------------------
    OpEntry("sqrt", pl.sqrt, torch.sqrt, unary_samples(0.2, 3.0),
            error_inputs=lambda: [ErrorInput(([1.0],), exc=TypeError, match="sqrt")]),
    OpEntry("square", pl.square, torch.square, unary_samples()),
    OpEntry("mean", lambda x, **k: pl.mean(x, **k), lambda x, **k: torch.mean(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((U(2, 3, 4),), {"dim": -1, "keepdim": False}, "neg"),
                     Sample((np.array(2.0),), name="0d"),
                     Sample((noncontig(3, 4),), {"dim": 0}, "noncontig"),
                     Sample((U(0, 3),), {"dim": 0}, "empty-nan")],
            error_inputs=lambda: [ErrorInput((U(2, 3),), {"dim": 2}, IndexError, "mean: dimension out of range"),
                                  ErrorInput((U(2, 3),), {"dim": (0, 0)}, ValueError, "more than once"),
                                  ErrorInput((np.arange(3),), {}, TypeError, "mean: could not infer")]),
    OpEntry("max", lambda x, **k: pl.max(x, **k), _minmax_ref(torch.amax, torch.argmax),
            lambda: [Sample((U(3, 4),), gradcheck=True), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]),), {"dim": 1}, "ties", gradcheck=False),
                     Sample((np.array([[1.0, 3.0], [3.0, 0.0]]),), {}, "ties-all", gradcheck=False),
                     Sample((np.array([[1.0, np.nan], [0.0, 1.0]]),), {"dim": 1}, "nan", gradcheck=False),
                     Sample((np.array(-1.0),), name="0d"), Sample((noncontig(3, 4),), {"dim": 0}, "noncontig")],
            error_inputs=lambda: [ErrorInput((U(0, 3),), {"dim": 0}, IndexError, "max: expected reduction dim 0"),
                                  ErrorInput((U(2, 3),), {"dim": 5}, IndexError, "max: dimension out of range")]),
    OpEntry("min", lambda x, **k: pl.min(x, **k), _minmax_ref(torch.amin, torch.argmin),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 0, "keepdim": True}, "dim0"),
                     Sample((U(2, 3, 4),), {"dim": (1, 2)}, "dims"),
                     Sample((np.array([[1.0, -3.0, -3.0], [2.0, 2.0, 5.0]]),), {"dim": 1}, "ties", gradcheck=False),
                     Sample((np.array([2.0, 2.0, 2.0]),), {}, "all-tied", gradcheck=False),
                     Sample((np.array(4.0),), name="0d")],
            error_inputs=lambda: [ErrorInput((U(0),), {}, IndexError, "min: cannot reduce an empty tensor")]),
    # -- arithmetic -----------------------------------------------------------------
    OpEntry("add", pl.add, torch.add, binary_samples(), error_inputs=_bcast_errors("add")),
    OpEntry("sub", pl.sub, torch.sub, binary_samples(), error_inputs=_bcast_errors("sub")),
    OpEntry("mul", pl.mul, torch.mul, binary_samples(),
            error_inputs=lambda: _bcast_errors("mul")() + [ErrorInput((U(2), "x"), exc=TypeError, match="mul")]),
    OpEntry("div", pl.div, torch.div, binary_samples(blo=0.5, bhi=2.0), error_inputs=_bcast_errors("div")),
    OpEntry("pow", pl.pow, torch.pow, lambda: binary_samples(0.5, 2.0)() + [
                Sample((np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.0])), name="zeros", gradcheck=False),
                Sample((U(3, lo=0.5, hi=2), 2), name="square"), Sample((U(3, lo=0.5, hi=2), 0), name="pow0"),
                Sample((2.0, U(3)), name="scalar-base")]),
    OpEntry("neg", pl.neg, torch.neg, unary_samples()),
    OpEntry("abs", pl.abs, torch.abs, unary_samples()),
    OpEntry("sign", pl.sign, torch.sign, unary_samples(), gradgrad=False),
    OpEntry("exp", pl.exp, torch.exp, unary_samples()),
    OpEntry("log", pl.log, torch.log, unary_samples(0.2, 3.0)),
    OpEntry("sin", pl.sin, torch.sin, unary_samples()),
    OpEntry("cos", pl.cos, torch.cos, unary_samples()),
    OpEntry("floor_divide", pl.floor_divide, torch.floor_divide,
            lambda: [Sample((U(3, 4) * 5, U(3, 4, lo=0.5, hi=2)), name="float"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int")],
            grad=False, error_inputs=lambda: [ErrorInput((np.array([1, 2]), np.array([1, 0])),
                                                         exc=ZeroDivisionError, match="integer division by zero")]),
    OpEntry("remainder", pl.remainder, torch.remainder,
            lambda: [Sample((U(3, 4) * 5, U(3, 4, lo=0.7, hi=2)), name="float"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int"),
                     Sample((U(4) * 5, 1.5), name="scalar")],
            gradgrad=False),
    # -- comparisons and logic ------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))),
                       Sample((U(2, 3), U(3, seed=1)), name="broadcast"), Sample((U(4), 0.0), name="scalar"),
                       Sample((np.array([1, 2, 3]), 2), name="int")],
              grad=False, error_inputs=_bcast_errors(n))
      for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([True, False, True]), np.array([True, True, False]))),
                       Sample((np.array([0.0, 1.5, 0.0]), np.array([1.0, 0.0, 0.0])), name="float")],
              grad=False) for n in ("logical_and", "logical_or", "logical_xor")],
    OpEntry("logical_not", pl.logical_not, torch.logical_not,
            lambda: [Sample((np.array([True, False]),)), Sample((np.array([0.0, 2.0]),), name="float")], grad=False),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1, 6, 3]), np.array([3, 5, 1]))),
                       Sample((np.array([True, False]), np.array([True, True])), name="bool")],
              grad=False, error_inputs=lambda n=n: [ErrorInput((U(2), U(2)), exc=TypeError, match=n)])
      for n in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    OpEntry("bitwise_not", pl.bitwise_not, torch.bitwise_not,
            lambda: [Sample((np.array([1, -6, 3]),)), Sample((np.array([True, False]),), name="bool")], grad=False),
    OpEntry("where", pl.where, torch.where,
            lambda: [Sample((U(3, 4) > 0, U(3, 4), U(3, 4, seed=1))),
                     Sample((U(3, 1) > 0, U(1, 4), U(3, 4, seed=1)), name="broadcast"),
                     Sample((U(4) > 0, U(4), 0.0), name="scalar"),
                     Sample((np.array([True, False]), np.array([1.0, np.inf]), np.array([np.nan, 2.0])),
                            name="inf-nan-inactive", gradcheck=False)]),
    # -- reductions -----------------------------------------------------------------
    OpEntry("sum", lambda x, **k: pl.sum(x, **k), lambda x, **k: torch.sum(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"dim": 1}, "dim1"),
                     Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep"),
                     Sample((np.array([[1, 2], [3, 4]], dtype=np.int32),), {"dim": 0}, "int32->int64"),
                     Sample((np.array([True, True, False]),), {}, "bool->int64"),
                     Sample((U(0, 3),), {"dim": 0}, "empty"), Sample((np.array(3.0),), name="0d")]),
    # -- shape -----------------------------------------------------------------------
    OpEntry("reshape", lambda x, s: pl.reshape(x, s), lambda x, s: torch.reshape(x, s),
            lambda: [Sample((U(3, 4), (4, 3))), Sample((U(3, 4), (-1,)), name="flat"),
                     Sample((noncontig(3, 4), (2, 6)), name="noncontig-copy"),
                     Sample((np.array(1.0), (1, 1)), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3, 4), (5, 2)), exc=ShapeMismatch, match="reshape: shape")]),
    OpEntry("view", lambda x, s: x.view(s), lambda x, s: x.view(s),
            lambda: [Sample((U(3, 4), (2, 6))), Sample((U(3, 4), (12,)), name="flat")],
            error_inputs=lambda: [ErrorInput((noncontig(3, 4), (12,)), exc=pl.LucidError, match="view: size")]),
    OpEntry("broadcast_to", lambda x, s: pl.broadcast_to(x, s), lambda x, s: torch.broadcast_to(x, s),
            lambda: [Sample((U(3, 1), (2, 3, 4))), Sample((np.array(2.0), (3,)), name="0d"),
                     Sample((U(1, 4), (-1, 4)), name="keep")],
            error_inputs=lambda: [ErrorInput((U(3, 2), (3, 4)), exc=ShapeMismatch, match="broadcast_to")]),
    OpEntry("permute", lambda x, d: pl.permute(x, d), lambda x, d: torch.permute(x, d),
            lambda: [Sample((U(2, 3, 4), (2, 0, 1))), Sample((U(2, 3), (1, 0)), name="transpose")],
            error_inputs=lambda: [ErrorInput((U(2, 3), (0, 0)), exc=ValueError, match="permute")]),
    OpEntry("unbind", lambda x, dim=0: pl.unbind(x, dim), lambda x, dim=0: torch.unbind(x, dim),
            lambda: [Sample((U(3, 4),)), Sample((U(2, 3, 4),), {"dim": 1}, "dim1"),
                     Sample((noncontig(3, 4),), {"dim": -1}, "noncontig-neg")],
            error_inputs=lambda: [ErrorInput((U(2, 3), 2), exc=IndexError, match="unbind")]),
    OpEntry("concatenate", lambda *xs, dim=0: pl.cat(list(xs), dim), lambda *xs, dim=0: torch.cat(list(xs), dim),
            lambda: [Sample((U(2, 3), U(1, 3, seed=1))), Sample((U(2, 3), U(2, 1, seed=1)), {"dim": 1}, "dim1"),
                     Sample((U(2, 0), U(2, 2, seed=1)), {"dim": -1}, "empty")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(2, 4)), exc=ShapeMismatch, match="cat: sizes")]),
    # -- indexing --------------------------------------------------------------------
    OpEntry("getitem", lambda x, i: x[i], lambda x, i: x[i],
            lambda: [Sample((U(3, 4), (slice(1, None), slice(None, None, 2))), name="slices"),
                     Sample((U(3, 4), 1), name="int"), Sample((U(3, 4), (Ellipsis, None, 0)), name="ellipsis-none"),
                     Sample((U(2, 3, 4), (0, slice(None), -1)), name="mixed"),
                     Sample((U(3, 4), np.array([0, 2, 0])), name="int-array-repeat"),
                     Sample((U(3, 4), U(3, 4) > 0), name="bool-mask")],
            covers=("getitem_backward",),
            error_inputs=lambda: [ErrorInput((U(3, 4), 5), exc=IndexError, match="getitem"),
                                  ErrorInput((U(3, 4), 1.5), exc=TypeError, match="getitem")]),
    OpEntry("index_put", lambda x, v, i: pl.ops.index_put(x, v, i),
            lambda x, v, i: torch.index_put(x, (torch.as_tensor(i),) if not isinstance(i, tuple) else i, v),
            lambda: [Sample((U(3, 4), U(4, seed=1), np.array([1]))),
                     Sample((U(3, 4), U(2, 4, seed=1), np.array([0, 2])), name="rows")]),
    # -- linalg --------------------------------------------------------------------------
    OpEntry("matmul", pl.matmul, torch.matmul,
            lambda: [Sample((U(3, 4), U(4, 5, seed=1)), name="2d"), Sample((U(4), U(4, 2, seed=1)), name="1d-2d"),
                     Sample((U(3, 4), U(4, seed=1)), name="2d-1d"), Sample((U(4), U(4, seed=1)), name="dot"),
                     Sample((U(2, 3, 4), U(4, 2, seed=1)), name="batch-bcast"),
                     Sample((U(2, 1, 3, 4), U(5, 4, 2, seed=1)), name="batch-bcast-both"),
                     Sample((U(3, 0), U(0, 2, seed=1)), name="empty-k")],
            atol=1e-5, rtol=1e-5,
            error_inputs=lambda: [ErrorInput((U(3, 4), U(3, 4)), exc=ShapeMismatch, match=r"matmul: shapes \(3, 4\)")]),
    # -- conversions -------------------------------------------------------------------------
    OpEntry("astype", lambda x: pl.cast(x, pl.float64) if x.dtype != pl.float64 else pl.cast(x, pl.float32),
            lambda x: x.to(torch.float64) if x.dtype != torch.float64 else x.to(torch.float32),
            lambda: [Sample((U(3, 4),), gradcheck=False), Sample((np.array([1, 2]),), name="int")], amp=False,
            rtol=1e-6),
    OpEntry("clone", pl.clone, torch.clone, unary_samples()),
    OpEntry("contiguous", lambda x: x.contiguous(), lambda x: x.contiguous(),
            lambda: [Sample((noncontig(3, 4),), name="noncontig")]),
    # a round trip through the other device kind (a no-op copy on a CPU-only machine)
    OpEntry("to_device", lambda x: x.to("cpu").to(x.device) if x.device.type != "cpu" else x.to("cpu"),
            lambda x: x, unary_samples(), amp=False),
]
