"""Op-database entries for indexing and scatter (``pylucid/ops/indexing.py``): ``getitem`` in all its forms,
``index_put``, ``where``, index_select/index_add, gather/scatter and their reductions, nonzero, one_hot, and
the composites (take, take_along_dim, masked_*, index_copy/fill, setitem)."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import ALL_FLOAT_DTYPES, INF, NAN, ErrorInput, I, OpEntry, Sample, U, no_ties, noncontig


def _index_select_samples():
    return [Sample((U(3, 4), 1, I(2, 0, 2)), name="repeat"), Sample((U(3, 4), 0, I(1)), name="one"),
            Sample((U(3, 4), -1, I()), name="empty-index"), Sample((noncontig(4, 3), 0, I(3, 0)), name="noncontig"),
            Sample((U(2, 3, 2), 1, I(2, 0)), name="3d")]


def _index_add_samples():
    return [Sample((U(3, 4), 0, I(0, 2, 0), U(3, 4, seed=1)), name="repeat"),
            Sample((U(3, 4), 1, I(3), U(3, 1, seed=1)), {"alpha": 2.5}, "alpha"),
            Sample((U(3, 4), 1, I(), U(3, 0, seed=1)), name="empty")]


def _gather_samples():
    rng = np.random.default_rng(0)
    return [Sample((U(3, 4), 1, rng.integers(0, 4, (3, 5))), name="wider"),
            Sample((U(3, 4), 0, rng.integers(0, 3, (2, 4))), name="dim0"),
            Sample((U(3, 4), 1, rng.integers(0, 4, (2, 2))), name="index-smaller"),
            Sample((U(2, 3, 4), -1, rng.integers(0, 4, (2, 3, 4))), name="3d"),
            Sample((noncontig(3, 4), 0, I(0, 2, 2, 1).reshape(1, 4)), name="noncontig"),
            Sample((U(3, 4), 1, np.zeros((3, 0), dtype=np.int64)), name="empty")]


def _scatter_add_samples():
    rng = np.random.default_rng(1)
    return [Sample((U(3, 4), 1, rng.integers(0, 4, (3, 5)), U(3, 5, seed=1)), name="repeats"),
            Sample((U(3, 4), 0, rng.integers(0, 3, (2, 4)), U(2, 4, seed=1)), name="dim0"),
            Sample((U(3, 4), 1, rng.integers(0, 4, (2, 2)), U(3, 3, seed=1)), name="src-larger",
                   grad_args=(0,)),  # PyTorch's backward fails for d/dsrc here; test_shape_indexing.py checks it
            Sample((U(3, 4), 1, np.zeros((3, 0), dtype=np.int64), U(3, 0, seed=1)), name="empty")]


def _scatter_samples():
    # unique targets per row: the value written at a repeated index is unspecified in PyTorch
    return [Sample((U(3, 4), 1, I(3, 0, 1, 2, 0, 3).reshape(3, 2), U(3, 2, seed=1)), name="tensor"),
            Sample((U(3, 4), 0, I(2, 1, 0, 1).reshape(1, 4), U(2, 5, seed=1)), name="src-larger",
                   grad_args=(0,)),
            Sample((U(3, 4), 1, I(0, 1, 2).reshape(3, 1), 2.5), name="value"),
            Sample((noncontig(3, 4), 1, I(1, 1, 1).reshape(3, 1), U(3, 1, seed=2)), name="noncontig")]


def _scatter_reduce_samples():
    out = []
    idx = I(0, 2, 0, 1, 0, 2)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            out.append(Sample((U(4), 0, idx, U(6, seed=1, lo=0.5, hi=2) * np.array([1, -1, 1, 1, -1, 1]), red),
                              {"include_self": inc}, f"{red}-self{int(inc)}"))
        out.append(Sample((U(2, 3), 1, I(0, 0, 1, 2, 2, 2).reshape(2, 3), U(2, 3, seed=2), red),
                          name=f"{red}-2d"))
    for inc in (True, False):
        out.append(Sample((np.array([1.0, 2.0, 3.0]), 0, I(0, 0, 1, 1), np.array([1.0, 0.5, 2.0, 2.0]), "amax"),
                          {"include_self": inc}, f"amax-ties-self{int(inc)}", gradcheck=False))
        out.append(Sample((np.array([0.0, 2.0, 3.0]), 0, I(0, 1, 1, 2), np.array([1.5, 0.0, 2.0, 0.0]), "prod"),
                          {"include_self": inc}, f"prod-zeros-self{int(inc)}"))
        out.append(Sample((np.array([1.0, 2.0]), 0, I(0, 0, 0), np.array([0.0, 3.0, 0.0]), "prod"),
                          {"include_self": inc}, f"prod-two-zeros-self{int(inc)}",
                          gradcheck=False))  # first order matches PyTorch; the second is not exact at two zeros
    out.append(Sample((np.array([4, 5, 6]), 0, I(0, 0, 2), np.array([1, 2, 3]), "mean"), {"include_self": True},
                      "int-mean-floors"))
    return out




def _getitem_samples():
    return [Sample((U(3, 4), (slice(1, None), slice(None, None, 2))), name="slices"),
            Sample((U(3, 4), 1), name="int"), Sample((U(3, 4), (Ellipsis, None, 0)), name="ellipsis-none"),
            Sample((U(2, 3, 4), (Ellipsis, None, 1)), name="ellipsis-none-last"),
            Sample((U(2, 3, 4), (0, slice(None), -1)), name="mixed"),
            Sample((U(3, 4), np.array([0, 2, 0])), name="int-array-repeat"),
            Sample((U(3, 4), (I(2, 0, 2), slice(1, None))), name="int-tensor-slice"),
            Sample((U(2, 3, 4), (I(1, 0), slice(None), I(3, 2))), name="advanced-split"),
            Sample((U(3, 4), U(3, 4) > 0), name="bool-mask")]


def _setitem(x, index, value):
    """``x[index] = value`` on a copy (the function writes in place and returns None)."""
    y = x * 1.0
    y[index] = value
    return y


def _setitem_samples():
    return [Sample((U(3, 4), (1,), U(4, seed=2)), name="row"),
            Sample((U(3, 4), (slice(None, 2), 0), U(2, seed=2)), name="slice"),
            Sample((U(3, 4), U(3, 4) > 0, 0.5), name="mask-scalar"),
            Sample((U(3, 4), (I(0, 2),), U(2, 4, seed=2)), name="int-tensor")]


def _masked(*shape, seed=0):
    return U(*shape, seed=seed) > 0


def _index_reduce_samples():
    # distinct source values per target slice keep amax/amin away from ties (not differentiable there)
    src = no_ties(3, 4)
    return [Sample((U(3, 4, lo=0.5, hi=2), 1, I(0, 2, 0, 1), src + 2, reduce), {"include_self": inc},
                   f"{reduce}-{'self' if inc else 'noself'}")
            for reduce in ("prod", "mean", "amax", "amin") for inc in (True, False)] + [
        Sample((U(4, 2), 0, I(3, 3), U(2, 2, seed=1), "mean"), name="rows-mean"),
        Sample((np.array([1, 2, 3]), 0, I(0, 0), np.array([4, 5]), "prod"), name="int-prod")]


ENTRIES = [
    OpEntry("index_select", pl.index_select, torch.index_select, _index_select_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 0, I(3)), exc=IndexError, match="index_select: index 3 is out of bounds"),
                ErrorInput((U(3, 4), 0, I(-1)), exc=IndexError, match="index_select: index -1 is out of bounds"),
                ErrorInput((U(3, 4), 0, np.array([0.5])), exc=TypeError, match="index_select: index must be")]),
    OpEntry("index_add", pl.index_add, torch.index_add, _index_add_samples,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 0, I(0), U(2, 4)), exc=ShapeMismatch, match="index_add: source of shape"),
                ErrorInput((U(3, 4), 0, I(0), np.ones((1, 4), np.float32)), exc=DtypeMismatch,
                           match="index_add: self")]),
    OpEntry("gather", pl.gather, torch.gather,
            _gather_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 1, I(4).reshape(1, 1)), exc=IndexError, match="gather: index 4 is out of"),
                ErrorInput((U(3, 4), 1, I(0, 1)), exc=ValueError, match="gather: index tensor must have"),
                ErrorInput((U(3, 4), 1, np.zeros((4, 1), np.int64)), exc=ShapeMismatch, match="gather: index of")]),
    OpEntry("scatter_add", pl.scatter_add, torch.scatter_add, _scatter_add_samples,
            error_inputs=lambda: [ErrorInput((U(3, 4), 1, np.zeros((3, 3), np.int64), U(3, 2)), exc=ShapeMismatch,
                                             match="scatter_add: index of shape")]),
    OpEntry("scatter", pl.scatter, torch.scatter, _scatter_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3, 4), 1, I(0).reshape(1, 1), 1.0), {"reduce": "max"},
                                             exc=ValueError, match="scatter: reduce")]),
    OpEntry("scatter_reduce", pl.scatter_reduce, torch.scatter_reduce, _scatter_reduce_samples,
            error_inputs=lambda: [ErrorInput((U(3), 0, I(0), U(1), "max"), exc=ValueError,
                                             match="scatter_reduce: reduce must be")]),
    OpEntry("nonzero", pl.nonzero, torch.nonzero,
            lambda: [Sample((np.array([[0.0, 1.5], [2.0, 0.0]]),)), Sample((np.array([0, 3, 0, 4]),), name="int"),
                     Sample((np.array([True, False, True]),), {"as_tuple": True}, "as-tuple"),
                     Sample((np.array(2.0),), name="0d"), Sample((np.zeros((0, 3)),), name="empty"),
                     Sample((U(2, 3, 2) > 0,), {"as_tuple": True}, "3d-tuple")], grad=False, amp=False),
    OpEntry("one_hot", pl.one_hot, torch.nn.functional.one_hot,
            lambda: [Sample((I(0, 2, 1),)), Sample((I(0, 2, 1).reshape(3, 1), 5), name="num-classes"),
                     Sample((np.array(1, dtype=np.int64), 3), name="0d"),
                     Sample((np.zeros((0,), np.int64), 3), name="empty"),
                     Sample((I(0, 2, 1),), {"num_classes": 4}, "keyword")], grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((I(0, 3), 3), exc=ValueError, match="one_hot: class values"),
                                  ErrorInput((I(-1),), exc=ValueError, match="one_hot: class values"),
                                  ErrorInput((U(3),), exc=TypeError, match="one_hot: expects an integer")]),
    OpEntry("getitem", pl.getitem, lambda x, i: x[i], _getitem_samples, covers=("getitem_backward",),
            error_inputs=lambda: [ErrorInput((U(3, 4), 5), exc=IndexError, match="getitem"),
                                  ErrorInput((U(3, 4), 1.5), exc=TypeError, match="getitem")]),
    OpEntry("setitem", _setitem, _setitem, _setitem_samples),
    # the function itself writes in place and returns None
    OpEntry("setitem", pl.setitem, lambda x, i, v: x.__setitem__(i, v), lambda: _setitem_samples()[:2],
            variant="in-place", grad=False, amp=False),
    OpEntry("index_put", pl.index_put, torch.index_put,
            lambda: [Sample((U(3, 4), (I(1),), U(4, seed=1))),
                     Sample((U(3, 4), (I(0, 2),), U(2, 4, seed=1)), name="rows"),
                     Sample((U(3, 4), (I(0, 2), I(1, 3)), U(2, seed=1)), name="points"),
                     Sample((U(3, 4), (I(0, 0, 2),), U(3, 4, seed=1), True), name="accumulate"),
                     Sample((U(3, 4), (I(1, 1),), np.array(2.0), True), name="accumulate-scalar")],
            error_inputs=lambda: [ErrorInput((U(3, 4), I(1), U(4)), exc=TypeError, match="index_put: indices"),
                                  ErrorInput((U(3), (I(0), I(0)), U(1)), exc=IndexError, match="index_put")]),
    OpEntry("index_put", pl.Tensor.index_put, torch.Tensor.index_put,
            lambda: [Sample((U(3, 4), (I(1),), U(4, seed=1))), Sample((U(3, 4), (I(0, 2),), U(2, 4, seed=1)),
                                                                      name="rows")],
            variant="method"),
    # Tensor.index_put_ takes PyTorch's (indices, values, accumulate) order
    OpEntry("index_put_", pl.Tensor.index_put_, torch.Tensor.index_put_,
            lambda: [Sample((U(3, 4), (I(1),), U(4, seed=1))),
                     Sample((U(3, 4), (I(0, 0),), U(2, 4, seed=1), True), name="accumulate")], grad=False, amp=False),
    OpEntry("where", pl.where, torch.where,
            lambda: [Sample((U(3, 4) > 0, U(3, 4), U(3, 4, seed=1))),
                     Sample((U(3, 1) > 0, U(1, 4), U(3, 4, seed=1)), name="broadcast"),
                     Sample((U(4) > 0, U(4), 0.0), name="scalar"),
                     Sample((np.array([True, False]), np.array([1.0, INF]), np.array([NAN, 2.0])),
                            name="inf-nan-inactive", gradcheck=False)]),
    # Tensor.where(condition, other): the tensor is the value where condition holds
    OpEntry("where", pl.Tensor.where, torch.Tensor.where,
            lambda: [Sample((U(3, 4), U(3, 4) > 0, U(3, 4, seed=1))), Sample((U(3, 4), U(3, 4) > 0, 0.5),
                                                                             name="scalar")],
            variant="method"),
    # -- composites ----------------------------------------------------------------------------
    OpEntry("take", pl.take, torch.take,
            lambda: [Sample((U(3, 4), np.array([[0, 11], [5, 5]]))), Sample((U(3, 4), I(-1, 0)), name="negative")]),
    OpEntry("take_along_dim", pl.take_along_dim, torch.take_along_dim,
            lambda: [Sample((U(3, 4), np.argsort(U(3, 4), axis=1)), {"dim": 1}),
                     Sample((U(3, 4), I(0, 5, 11)), name="flat")]),
    OpEntry("index_copy", pl.index_copy, torch.index_copy,
            lambda: [Sample((U(3, 4), 0, I(2, 0), U(2, 4, seed=3))), Sample((U(3, 4), 1, I(3), U(3, 1, seed=3)),
                                                                           name="dim1")]),
    OpEntry("index_fill", pl.index_fill, torch.index_fill,
            lambda: [Sample((U(3, 4), 1, I(1, 3), -1.0)), Sample((U(3, 4), 0, I(0), np.array(2.5)), name="0d-value",
                                                                 grad_args=(0,))]),
    OpEntry("masked_fill", pl.masked_fill, torch.masked_fill,
            lambda: [Sample((U(3, 4), _masked(3, 4), 0.5)), Sample((U(3, 4), _masked(4, seed=1), -1.0),
                                                                   name="broadcast"),
                     Sample((U(3, 4), _masked(3, 4), np.array(2.0)), name="0d-value", grad_args=(0,))]),
    OpEntry("masked_select", pl.masked_select, torch.masked_select,
            lambda: [Sample((U(3, 4), _masked(3, 4))), Sample((U(3, 4), _masked(4, seed=1)), name="broadcast")]),
    OpEntry("masked_scatter", pl.masked_scatter, torch.masked_scatter,
            lambda: [Sample((U(3, 4), _masked(3, 4), U(12, seed=4))), Sample((U(3, 4), _masked(4, seed=1), U(3, 4,
                                                                                                             seed=4)),
                                                                              name="broadcast")]),
    OpEntry("argwhere", pl.argwhere, torch.argwhere,
            lambda: [Sample((U(3, 4) > 0,)), Sample((np.array([0.0, 1.5, 0.0]),), name="float")], grad=False),
    OpEntry("index_reduce", pl.index_reduce, torch.index_reduce, _index_reduce_samples,
            error_inputs=lambda: [ErrorInput((U(3), 0, I(0), U(1), "sum"), exc=ValueError,
                                             match="index_reduce: reduce must be")]),
    OpEntry("put", pl.put, torch.put,
            lambda: [Sample((U(3, 4), I(0, 5, -1), U(3, seed=1))),
                     Sample((U(3, 4), I(1, 1, 2), U(3, seed=1), True), name="accumulate"),
                     Sample((U(2, 2), I(3, 0).reshape(2, 1), U(1, 2, seed=1)), name="shapes")],
            error_inputs=lambda: [ErrorInput((U(3), I(0, 1), U(3)), exc=ShapeMismatch, match="put: index"),
                                  ErrorInput((U(3), I(3), U(1)), exc=IndexError, match="put: index 3")]),
    OpEntry("nonzero_static", pl.nonzero_static, torch.nonzero_static,
            lambda: [Sample((I(0, 1, 0, 2),), {"size": 3}), Sample((np.array([[0.0, 1.0], [1.0, 1.0]]),),
                                                                   {"size": 1, "fill_value": -5}, "cut"),
                     Sample((np.zeros((0,)),), {"size": 2}, "empty")], grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((I(1),), {"size": -1}, exc=ValueError, match="nonzero_static: size")]),
]
