"""Op-database entries for sorting and selection (``pylucid/ops/sorting.py``): ``sort``, ``topk``,
``kthvalue``, ``unique``, ``searchsorted``, the internal gather/scatter pair behind every value-selecting op,
and the composites ``msort`` and ``bucketize``."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from tests.opdb import NAN, ErrorInput, OpEntry, Sample, U, no_ties


def _ref_nt(fn):
    """torch's namedtuple results as plain tuples, so the suite compares element by element."""
    def f(*a, **k):
        out = fn(*a, **k)
        return tuple(out) if isinstance(out, tuple) else out
    return f


def _sort_samples():
    return [Sample((no_ties(3, 4),),), Sample((no_ties(3, 4),), {"dim": 0, "descending": True}, "desc"),
            Sample((no_ties(3, 4),), {"dim": 1}, "dim1"),
            Sample((np.array([[2.0, 1.0, 2.0, 1.0, 3.0]]),), {"stable": True}, "ties-stable", gradcheck=False),
            Sample((np.array([[2.0, 1.0, 2.0, 1.0, 3.0]]),), {"stable": True, "descending": True}, "ties-desc",
                   gradcheck=False),
            Sample((np.array([1.0, NAN, -1.0, NAN]),), {"stable": True}, "nan", gradcheck=False),
            Sample((np.array([1.0, NAN, -1.0]),), {"stable": True, "descending": True}, "nan-desc", gradcheck=False),
            Sample((np.array([3, 1, 2], dtype=np.int32),), name="int"),
            Sample((np.array(1.5),), name="0d"), Sample((U(0, 3),), name="empty"),
            Sample((no_ties(4, 3).T,), {"dim": 0}, "noncontig")]


ENTRIES = [
    OpEntry("sort", pl.sort, _ref_nt(torch.sort), _sort_samples,
            error_inputs=lambda: [ErrorInput((U(3),), {"dim": 2}, IndexError, "sort: dimension out of range")]),
    OpEntry("argsort", pl.argsort, torch.argsort,
            lambda: [s for s in _sort_samples() if s.name != "empty"], grad=False),
    OpEntry("msort", pl.msort, torch.msort,
            lambda: [Sample((no_ties(3, 4),)), Sample((np.array([3, 1, 2]),), name="int")]),
    OpEntry("topk", pl.topk, _ref_nt(torch.topk),
            lambda: [Sample((no_ties(3, 5), 2)), Sample((no_ties(3, 5), 2), {"dim": 0, "largest": False}, "smallest"),
                     Sample((no_ties(3, 4), 2), {"largest": False}, "smallest-last-dim"),
                     Sample((no_ties(3, 5), 0), name="k0"), Sample((no_ties(3, 5), 5), name="k=n"),
                     Sample((np.array(2.5), 1), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3), 4), {}, IndexError, "topk: k=4 is out of range")]),
    OpEntry("kthvalue", pl.kthvalue, _ref_nt(torch.kthvalue),
            lambda: [Sample((no_ties(3, 5), 2)), Sample((no_ties(3, 5), 3), {"dim": 0, "keepdim": True}, "keep"),
                     Sample((no_ties(3, 4), 2, 1), name="positional-dim"), Sample((np.array(2.5), 1), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3), 4), {}, IndexError, "kthvalue: k=4 is out of range")]),
    OpEntry("unique", pl.unique, torch.unique,
            lambda: [Sample((np.array([3, 1, 2, 1, 3]),), {"return_inverse": True, "return_counts": True}),
                     Sample((np.array([3, 1, 3, 2, 1]),), {"sorted": True, "return_inverse": True,
                                                           "return_counts": True}, "sorted"),
                     Sample((np.array([[3.0, 1.0], [1.0, 2.0]]),), {"return_inverse": True}, "2d"),
                     Sample((np.array([[1, 2], [1, 2], [0, 3]]),), {"dim": 0, "return_inverse": True,
                                                                    "return_counts": True}, "dim0"),
                     Sample((np.array([[1, 2], [1, 2], [0, 5]]),), {"dim": 0}, "dim0-values"),
                     Sample((np.array([3, 1, 3]),), {"sorted": False}, "unsorted")], grad=False),
    OpEntry("unique_consecutive", pl.unique_consecutive, torch.unique_consecutive,
            lambda: [Sample((np.array([1, 1, 2, 2, 3, 1, 1]),), {"return_inverse": True, "return_counts": True}),
                     Sample((np.array([[1, 2], [1, 2], [0, 3], [1, 2]]),), {"dim": 0, "return_inverse": True,
                                                                            "return_counts": True}, "dim0"),
                     Sample((np.array([1.0, 1.0, 2.0]),), name="float"),
                     Sample((U(0),), {"return_inverse": True, "return_counts": True}, "empty"),
                     Sample((U(2, 0, 3),), {"dim": 1, "return_inverse": True, "return_counts": True}, "empty-dim")],
            grad=False),
    OpEntry("searchsorted", pl.searchsorted, torch.searchsorted,
            lambda: [Sample((np.array([1.0, 3.0, 5.0, 7.0]), np.array([3.0, 6.0, 9.0, 0.0]))),
                     Sample((np.array([1.0, 3.0, 5.0, 7.0]), np.array([[3.0, 5.0]])), {"right": True}, "right"),
                     Sample((np.array([1.0, 3.0, 5.0]), np.array([3.0, 4.0])), {"right": True}, "right-1d"),
                     Sample((np.array([1, 3, 5]), np.array([3])), {"side": "right", "out_int32": True}, "side"),
                     Sample((np.array([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]), np.array([[3.0], [3.0]])), name="2d"),
                     Sample((np.array([1.0, 3.0, 5.0, 7.0]), 4.0), name="scalar"),
                     Sample((np.array([True, True, True]), 4.0), name="bool-float-scalar"),
                     Sample((np.array([1, 3, 5]), 2.5), name="int-float-scalar"),
                     Sample((U(0), U(0)), name="empty"), Sample((U(0, 0), U(0, 0)), name="empty-2d"),
                     Sample((U(2, 0), U(2, 3)), name="empty-sequence")],
            grad=False, error_inputs=lambda: [ErrorInput((U(2, 3), U(3, 1)), {}, ValueError, "searchsorted")]),
    OpEntry("bucketize", pl.bucketize, torch.bucketize,
            lambda: [Sample((np.array([0.0, 3.0, 6.0, 9.0]), np.array([1.0, 3.0, 5.0, 7.0]))),
                     Sample((np.array([[0.0, 3.0], [6.0, 9.0]]), np.array([1.0, 3.0, 5.0, 7.0])), {"right": True},
                            "right-2d"),
                     Sample((np.array([1, 5]), np.array([1, 3, 5])), {"out_int32": True}, "int32")], grad=False),
    # internal gather/scatter pair behind every value-selecting op
    OpEntry("select_along_dim", lambda x, i: pl.ops.sorting.select_along_dim(x, i, 1),
            lambda x, i: torch.take_along_dim(x, i, 1),
            lambda: [Sample((U(3, 4), np.array([[0, 3], [1, 1], [2, 0]])))], amp=False),
    OpEntry("select_along_dim_backward",
            lambda g, i: pl.ops.sorting.select_along_dim_backward(g, i, 1, (3, 4)),
            lambda g, i: torch.zeros(3, 4, dtype=g.dtype).scatter_add(1, i, g),
            lambda: [Sample((U(3, 2), np.array([[0, 3], [1, 1], [2, 0]])))], amp=False),
]
