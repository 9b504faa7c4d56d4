"""Op-database entries for the special functions and the softmax family (``pylucid/ops/special.py``,
``pylucid.special``)."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
import pylucid.special as S
from tests.opdb import ErrorInput, OpEntry, Sample, U, noncontig

INF = float("inf")


def _unary(lo, hi, extra=(), with_int=True):
    def f():
        return [Sample((U(3, 4, lo=lo, hi=hi),), name="2d"), Sample((np.array((lo + hi) / 2 + 0.1),), name="0d"),
                Sample((U(0, 3, lo=lo, hi=hi),), name="empty"),
                Sample((noncontig(3, 4, seed=2) * (hi - lo) / 4 + (hi + lo) / 2,), name="noncontig"),
                *([Sample((np.array([1, 2, 3]),), name="int")] if with_int else []), *extra]
    return f


def _softmax_samples():
    return [Sample((U(3, 4),), {"dim": 1}), Sample((U(2, 3, 4),), {"dim": 0}, "dim0"),
            Sample((noncontig(3, 4),), {"dim": -1}, "noncontig"), Sample((np.array(1.5),), {"dim": 0}, "0d"),
            Sample((U(0, 3),), {"dim": 1}, "empty"),
            Sample((np.array([[1e4, -1e4, 0.0], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]]),), {"dim": 1}, "huge",
                   gradcheck=False),
            Sample((np.array([[-INF, 0.5, 1.0], [-INF, -INF, 2.0]]),), {"dim": 1}, "-inf", gradcheck=False),
            Sample((U(3, 4).astype(np.float32),), {"dim": 1, "dtype": pl.float64}, "dtype", grad_args=())]


def _tdtype(k):
    k = dict(k)
    if "dtype" in k:
        k["dtype"] = getattr(torch, k["dtype"].name)
    return k


ENTRIES = [
    OpEntry("softmax", pl.softmax, lambda x, **k: torch.softmax(x, **_tdtype(k)),
            _softmax_samples,
            error_inputs=lambda: [ErrorInput((U(3),), {"dim": None}, TypeError, "softmax: dim is required")]),
    OpEntry("log_softmax", pl.log_softmax, lambda x, **k: torch.log_softmax(x, **_tdtype(k)),
            _softmax_samples),
    OpEntry("erfc", pl.erfc, torch.erfc, _unary(-2, 2, [Sample((np.array([10.0, -10.0, 30.0]),), name="tails")])),
    OpEntry("lgamma", pl.lgamma, torch.lgamma, _unary(0.3, 4, [Sample((np.array([-1.5, -0.5, 0.5]),), name="neg"),
                                                               Sample((U(3, 4),), name="both-signs",
                                                                      gradcheck=False)])),
    OpEntry("digamma", S.digamma, torch.digamma,
            _unary(0.3, 4, [Sample((np.array([-1.5, 0.0, 2.5]),), name="zero", gradcheck=False),
                            Sample((U(3, 4),), name="both-signs", gradcheck=False)], with_int=False),
            atol=1e-4),
    OpEntry("polygamma", lambda n, x: pl.polygamma(n, x), lambda n, x: torch.polygamma(n, x),
            lambda: [Sample((1, U(3, 4, lo=0.5, hi=3))), Sample((0, U(3, lo=0.5, hi=3)), name="n0"),
                     Sample((3, U(2, 2, lo=0.5, hi=3)), name="n3"), Sample((2, np.array(1.5)), name="0d")],
            atol=1e-4, rtol=1e-5,
            error_inputs=lambda: [ErrorInput((-1, U(3)), {}, ValueError, "polygamma: n must be")]),
    OpEntry("i0", S.i0, torch.special.i0,
            _unary(-3, 3, [Sample((np.array([0.0, 1.0]),), name="zero", gradcheck=False)])),
    OpEntry("i1", S.i1, torch.special.i1, _unary(-3, 3, [Sample((np.array([0.0, -1.0]),), name="zero")])),
    OpEntry("i0e", S.i0e, torch.special.i0e, _unary(-3, 3)),
    OpEntry("i1e", S.i1e, torch.special.i1e, _unary(-3, 3, [Sample((np.array([0.0, -1.0]),), name="zero")])),
    OpEntry("entr", S.entr, torch.special.entr,
            _unary(0.2, 3, [Sample((np.array([0.0, -1.0, 0.5]),), name="zero-neg", gradcheck=False),
                            Sample((np.array([0.0, 0.5, 1.0, 2.0, -1.0]),), name="range", gradcheck=False)])),
    OpEntry("sinc", S.sinc, torch.sinc, _unary(-2, 2, [Sample((np.array([0.0, 1.0]),), name="zero", gradcheck=False)])),
    OpEntry("ndtr", S.ndtr, torch.special.ndtr, _unary(-3, 3)),
    OpEntry("log_ndtr", S.log_ndtr, torch.special.log_ndtr,
            _unary(-3, 3, [Sample((np.array([-30.0, -10.0, 5.0]),), name="tails")])),
    *[OpEntry(n, getattr(S, n), getattr(torch.special, n),
              lambda: [Sample((U(3, 4, lo=0.2, hi=2), U(3, 4, lo=0.2, hi=2, seed=1)), name="same"),
                       Sample((U(2, 1, 4, lo=0.2, hi=2), U(3, 1, lo=0.2, hi=2, seed=1)), name="broadcast"),
                       Sample((np.array([0.0, 0.0, 1.0]), np.array([0.0, 2.0, 0.5])), name="zero-x",
                              gradcheck=False),
                       Sample((np.array([0.0, 1.5]), np.array([np.nan, 1.0])), name="nan", gradcheck=False),
                       Sample((U(3, lo=0.2, hi=2), 2.0), name="scalar-other"),
                       Sample((1.5, U(3, lo=0.2, hi=2)), name="scalar-x"),
                       Sample((U(3, 4), U(3, 4, lo=0.3, hi=2.0, seed=1)), name="negative-x")])
      for n in ("xlogy", "xlog1py")],
    # Tensor.polygamma(n): the tensor first
    OpEntry("polygamma", pl.Tensor.polygamma, torch.Tensor.polygamma,
            lambda: [Sample((U(3, 4, lo=0.5, hi=3), 1)), Sample((U(3, lo=0.5, hi=3), 2), name="n2")], variant="method",
            atol=1e-4, rtol=1e-5),
    # the pylucid.special names
    OpEntry("special.gammaln", S.gammaln, torch.special.gammaln, _unary(0.3, 4)),
    OpEntry("special.psi", S.psi, torch.special.psi, _unary(0.3, 4, with_int=False), atol=1e-4),
    # -- composites --------------------------------------------------------------------------
    OpEntry("special.ndtri", S.ndtri, torch.special.ndtri,
            lambda: [Sample((U(3, 4, lo=0.05, hi=0.95),)), Sample((np.array([0.0, 1.0, 0.5]),), name="ends",
                                                                   gradcheck=False)]),
    OpEntry("special.multigammaln", S.multigammaln, torch.special.multigammaln,
            lambda: [Sample((U(3, 4, lo=2.0, hi=4.0), 2)), Sample((U(3, lo=2.0, hi=4.0), 3), name="p3")]),
]
