"""Op-database entries for the indexing/scatter ops (issue 3): index_select, index_add,
gather, scatter, scatter_add, scatter_reduce, nonzero, one_hot. Composites
(take, take_along_dim, masked_*, index_copy/fill) are tested in tests/test_shape_indexing.py."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.core import U, noncontig

_ALL = ("float32", "float64", "float16", "bfloat16")


def I(*values):  # noqa: E743 - an index array
    return np.array(values, dtype=np.int64)


def _t(i):
    return torch.from_numpy(np.asarray(i))


def _pl(i):
    return pl.tensor(np.asarray(i))


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


ENTRIES = [
    OpEntry("index_select", lambda x, d, i: pl.index_select(x, d, _pl(i)),
            lambda x, d, i: torch.index_select(x, d, _t(i)), _index_select_samples, dtypes=_ALL,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 0, I(3)), exc=IndexError, match="index_select: index 3 is out of bounds"),
                ErrorInput((U(3, 4), 0, I(-1)), exc=IndexError, match="index_select: index -1 is out of bounds"),
                ErrorInput((U(3, 4), 0, np.array([0.5])), exc=TypeError, match="index_select: index must be")]),
    OpEntry("index_add", lambda x, d, i, s, **k: pl.index_add(x, d, _pl(i), s, **k),
            lambda x, d, i, s, **k: torch.index_add(x, d, _t(i), s, **k), _index_add_samples,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 0, I(0), U(2, 4)), exc=ShapeMismatch, match="index_add: source of shape"),
                ErrorInput((U(3, 4), 0, I(0), np.ones((1, 4), np.float32)), exc=DtypeMismatch,
                           match="index_add: self")]),
    OpEntry("gather", lambda x, d, i: pl.gather(x, d, _pl(i)), lambda x, d, i: torch.gather(x, d, _t(i)),
            _gather_samples, dtypes=_ALL,
            error_inputs=lambda: [
                ErrorInput((U(3, 4), 1, I(4).reshape(1, 1)), exc=IndexError, match="gather: index 4 is out of"),
                ErrorInput((U(3, 4), 1, I(0, 1)), exc=ValueError, match="gather: index tensor must have"),
                ErrorInput((U(3, 4), 1, np.zeros((4, 1), np.int64)), exc=ShapeMismatch, match="gather: index of")]),
    OpEntry("scatter_add", lambda x, d, i, s: pl.scatter_add(x, d, _pl(i), s),
            lambda x, d, i, s: torch.scatter_add(x, d, _t(i), s), _scatter_add_samples,
            error_inputs=lambda: [ErrorInput((U(3, 4), 1, np.zeros((3, 3), np.int64), U(3, 2)), exc=ShapeMismatch,
                                             match="scatter_add: index of shape")]),
    OpEntry("scatter", lambda x, d, i, s, **k: pl.scatter(x, d, _pl(i), s, **k),
            lambda x, d, i, s: torch.scatter(x, d, _t(i), s), _scatter_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(3, 4), 1, I(0).reshape(1, 1), 1.0), {"reduce": "max"},
                                             exc=ValueError, match="scatter: reduce")]),
    OpEntry("scatter_reduce", lambda x, d, i, s, r, **k: pl.scatter_reduce(x, d, _pl(i), s, r, **k),
            lambda x, d, i, s, r, **k: torch.scatter_reduce(x, d, _t(i), s, r, **k), _scatter_reduce_samples,
            error_inputs=lambda: [ErrorInput((U(3), 0, I(0), U(1), "max"), exc=ValueError,
                                             match="scatter_reduce: reduce must be")]),
    OpEntry("nonzero", lambda x, **k: pl.nonzero(x, **k), lambda x, **k: torch.nonzero(x, **k),
            lambda: [Sample((np.array([[0.0, 1.5], [2.0, 0.0]]),)), Sample((np.array([0, 3, 0, 4]),), name="int"),
                     Sample((np.array([True, False, True]),), {"as_tuple": True}, "as-tuple"),
                     Sample((np.array(2.0),), name="0d"), Sample((np.zeros((0, 3)),), name="empty"),
                     Sample((U(2, 3, 2) > 0,), {"as_tuple": True}, "3d-tuple")], grad=False, amp=False),
    OpEntry("one_hot", lambda x, *a: pl.one_hot(x, *a), lambda x, *a: torch.nn.functional.one_hot(x, *a),
            lambda: [Sample((I(0, 2, 1),)), Sample((I(0, 2, 1).reshape(3, 1), 5), name="num-classes"),
                     Sample((np.array(1, dtype=np.int64), 3), name="0d"),
                     Sample((np.zeros((0,), np.int64), 3), name="empty")], grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((I(0, 3), 3), exc=ValueError, match="one_hot: class values"),
                                  ErrorInput((I(-1),), exc=ValueError, match="one_hot: class values"),
                                  ErrorInput((U(3),), exc=TypeError, match="one_hot: expects an integer")]),
]
