"""Op-database entries for comparisons, logic, bit operations and classification (``pylucid/ops/compare.py``):
bool or integer results, no gradients."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import INF, NAN, ErrorInput, OpEntry, Sample, U, bcast_errors, not_tensor


def _cmp_samples():
    return [Sample((np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))),
            Sample((U(2, 3), U(3, seed=1)), name="broadcast"), Sample((U(3, 4), U(3, 4, seed=1)), name="2d"),
            Sample((U(4), 0.0), name="scalar"), Sample((np.array([1, 2, 3]), 2), name="int"),
            Sample((np.array([NAN, 1.0]), np.array([NAN, 1.0])), name="nan")]


ENTRIES = [
    *[OpEntry(n, getattr(pl, n), getattr(torch, n), _cmp_samples, grad=False, error_inputs=bcast_errors(n))
      for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([True, False, True]), np.array([True, True, False]))),
                       Sample((np.array([0.0, 1.5, 0.0]), np.array([1.0, 0.0, 0.0])), name="float"),
                       Sample((U(3, 4), U(3, 4, seed=1)), name="float-2d")],
              grad=False) for n in ("logical_and", "logical_or", "logical_xor")],
    OpEntry("logical_not", pl.logical_not, torch.logical_not,
            lambda: [Sample((np.array([True, False]),)), Sample((np.array([0.0, 2.0]),), name="float")], grad=False),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1, 6, 3]), np.array([3, 5, 1]))),
                       Sample((np.array([[3, -1, 4], [1, -5, 9]]), np.array([[11, 7, 2], [3, 0, 4]])), name="2d"),
                       Sample((np.array([True, False]), np.array([True, True])), name="bool")],
              grad=False, error_inputs=lambda n=n: [ErrorInput((U(2), U(2)), exc=TypeError, match=n)])
      for n in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    OpEntry("bitwise_not", pl.bitwise_not, torch.bitwise_not,
            lambda: [Sample((np.array([1, -6, 3]),)), Sample((np.array([True, False]),), name="bool")], grad=False),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1, 6, -8, 3]), np.array([1, 2, 1, 0]))),
                       Sample((np.array([1, -16]), 2), name="scalar"),
                       Sample((np.array([[1], [4]]), np.array([0, 1, 2])), name="broadcast")],
              grad=False, error_inputs=lambda n=n: [ErrorInput((U(2), U(2)), exc=TypeError, match=n)])
      for n in ("bitwise_left_shift", "bitwise_right_shift")],
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1.0, NAN, INF, -INF, 0.0, -2.5]),)), Sample((np.array([1, -2]),), name="int"),
                       Sample((U(0, 2),), name="empty"), Sample((np.array(INF),), name="0d")],
              grad=False, error_inputs=not_tensor(n))
      for n in ("isnan", "isinf", "isfinite", "isposinf", "isneginf")],
    OpEntry("isclose", pl.isclose, torch.isclose,
            lambda: [Sample((np.array([1.0, 1.0 + 1e-9, 2.0, INF, NAN]), np.array([1.0, 1.0, 2.1, INF, NAN]))),
                     Sample((np.array([1.0, NAN]), np.array([1.0, NAN])), {"equal_nan": True}, "equal-nan"),
                     Sample((np.array([1.0, 1.05]), np.array([1.0, 1.0])), {"rtol": 0.1, "atol": 0.0}, "rtol"),
                     Sample((U(3, 4), U(3, 4) + 1e-9), name="near"),
                     Sample((U(2, 3), U(3, seed=1)), name="broadcast")],
            grad=False,
            error_inputs=lambda: [ErrorInput((U(2), U(2)), {"rtol": -1.0}, ValueError, "isclose: rtol"),
                                  ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="isclose: shapes")]),
    # -- composites: one Python bool --------------------------------------------------------
    OpEntry("allclose", pl.allclose, torch.allclose,
            lambda: [Sample((U(3, 4), U(3, 4) + 1e-9), name="close"), Sample((U(3, 4), U(3, 4, seed=1)), name="far"),
                     Sample((np.array([1.0, NAN]), np.array([1.0, NAN])), {"equal_nan": True}, "equal-nan"),
                     Sample((U(2, 3), U(3)[None, :] * 0 + U(2, 3)), name="broadcast")], grad=False),
    OpEntry("equal", pl.equal, torch.equal,
            lambda: [Sample((U(3, 4), U(3, 4)), name="same"), Sample((U(3, 4), U(3, 4, seed=1)), name="different"),
                     Sample((U(3, 4), U(4, 3)), name="other-shape"), Sample((np.array([1, 2]), np.array([1, 2])),
                                                                            name="int")], grad=False),
    OpEntry("isin", pl.isin, torch.isin,
            lambda: [Sample((np.array([[1, 2], [3, 4]]), np.array([2, 3, 9])), name="int"),
                     Sample((np.array([1, 2, 3]), 2), name="scalar-test"), Sample((2, np.array([1, 2])), name="scalar"),
                     Sample((np.array([1.5, 2.0, NAN]), np.array([2.0, NAN])), name="float-nan"),
                     Sample((np.array([1, 2, 3]), np.array([2.0, 3.5])), name="int-float"),
                     Sample((np.array([1, 2, 3]), np.array([2, 3])), {"invert": True}, "invert"),
                     Sample((np.array([3, 1, 2]), np.array([1, 2])), {"assume_unique": True}, "unique"),
                     Sample((np.zeros((0, 2)), np.array([1.0])), name="empty"),
                     Sample((np.array(2.0), np.zeros(0)), name="0d-empty-test")],
            grad=False,
            error_inputs=lambda: [ErrorInput((1, 2), exc=TypeError, match="isin: elements or test_elements")]),
    OpEntry("isreal", pl.isreal, torch.isreal,
            lambda: [Sample((np.array([1 + 0j, 2j, complex(NAN, 0.0), complex(0.0, NAN)]),), name="complex"),
                     Sample((U(3, 4),), name="real"), Sample((np.array([1, 2]),), name="int"),
                     Sample((np.array(1.5),), name="0d"), Sample((U(0, 2),), name="empty")],
            grad=False, error_inputs=not_tensor("isreal")),
]
