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


def _igamma_samples():
    # d/d input (the shape parameter) is not implemented in PyTorch: only ``other`` is differentiated
    return [Sample((U(3, 4, lo=0.5, hi=3), U(3, 4, lo=0.2, hi=3, seed=1)), grad_args=(1,)),
            Sample((U(2, 1, 3, lo=0.5, hi=3), U(4, 1, lo=0.2, hi=3, seed=1)), name="broadcast", grad_args=(1,)),
            Sample((np.array(1.5), U(3, lo=0.2, hi=3, seed=1)), name="0d", grad_args=(1,)),
            Sample((U(0, 3, lo=0.5, hi=3), U(3, lo=0.2, hi=3)), name="empty", grad_args=(1,)),
            Sample((np.array([0.0, 1.0, 2.0, 1.0]), np.array([1.0, 0.0, INF, 30.0])), name="edges", grad_args=())]


def _poly_samples():
    x = np.array([0.3, -0.7, 1.0, -1.0, 1.5, 0.9, 0.2, 0.0])
    return [Sample((x, np.array([0, 1, 2, 3, 5, 10, -1, 4]))), Sample((U(3, 4, lo=-1, hi=1), 3), name="scalar-n"),
            Sample((U(2, 1, lo=-1, hi=1), np.array([[2, 7, 12]])), name="broadcast"),
            Sample((0.25, np.array([0, 1, 3])), name="scalar-x"), Sample((np.array(0.25), 4), name="0d"),
            Sample((U(0, 3), 2), name="empty"), Sample((x, np.array([2.7, 3.2, 1.9, 0.0, 2.0, 1.0, 3.0, 2.0])),
                                                      name="float-n")]


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
    # -- incomplete gamma, zeta, erfcx ---------------------------------------------------------
    *[OpEntry(n, f, t, _igamma_samples, atol=1e-5, rtol=1e-5) for n, f, t in (
        ("igamma", pl.igamma, torch.igamma), ("igammac", pl.igammac, torch.igammac),
        ("special.gammainc", S.gammainc, torch.special.gammainc),
        ("special.gammaincc", S.gammaincc, torch.special.gammaincc))],
    OpEntry("mvlgamma", pl.mvlgamma, torch.mvlgamma,
            lambda: [Sample((U(3, 4, lo=2.0, hi=4.0), 2)), Sample((U(3, lo=1.5, hi=4.0), 3), name="p3"),
                     Sample((np.array(2.5), 1), name="0d")]),
    OpEntry("zeta", S.zeta, torch.special.zeta,
            lambda: [Sample((U(3, 4, lo=1.5, hi=4), U(3, 4, lo=0.5, hi=3, seed=1)), grad_args=(1,)),
                     Sample((U(2, 1, 3, lo=1.5, hi=4), U(4, 1, lo=0.5, hi=3, seed=1)), name="broadcast",
                            grad_args=(1,)),
                     Sample((2.0, U(3, lo=0.5, hi=3)), name="scalar-x"),
                     Sample((U(3, lo=1.5, hi=4), 1.0), name="riemann", grad_args=()),
                     Sample((np.array([1.0, 0.5, 2.0, 2.0]), np.array([1.0, 1.0, 0.0, -1.5])), name="edges",
                            grad_args=()),
                     Sample((U(0, 3, lo=1.5, hi=4), U(3, lo=0.5, hi=3)), name="empty", grad_args=(1,))],
            atol=1e-4, rtol=1e-5),
    OpEntry("erfcx", S.erfcx, torch.special.erfcx,
            _unary(-2, 3, [Sample((np.array([30.0, -3.0, 1e3]),), name="tails")])),
    # -- no derivative in PyTorch: Bessel-type functions and orthogonal polynomials -------------
    *[OpEntry(n, getattr(S, n), getattr(torch.special, n), _unary(lo, hi, [Sample((np.array(edge),), name="edges")]),
              grad=False, gradgrad=False, atol=1e-5, rtol=1e-5)
      for n, lo, hi, edge in (
          ("bessel_j0", -5, 5, [0.0, 30.0]), ("bessel_j1", -5, 5, [0.0, 30.0]),
          ("bessel_y0", 0.1, 5, [0.0, -1.0, 30.0]), ("bessel_y1", 0.1, 5, [0.0, -1.0, 30.0]),
          ("modified_bessel_i0", -3, 3, [0.0, 20.0]), ("modified_bessel_i1", -3, 3, [0.0, -20.0]),
          ("modified_bessel_k0", 0.1, 5, [0.0, -1.0, 30.0]), ("modified_bessel_k1", 0.1, 5, [0.0, -1.0, 30.0]),
          ("scaled_modified_bessel_k0", 0.1, 5, [0.0, -1.0, 300.0]),
          ("scaled_modified_bessel_k1", 0.1, 5, [0.0, -1.0, 300.0]),
          ("spherical_bessel_j0", -5, 5, [0.0, 1e-4, -0.49, 0.51, 100.0]),
          ("airy_ai", -5, 3, [0.0, -20.0, 20.0]))],
    *[OpEntry(n, getattr(S, n), getattr(torch.special, n), _poly_samples, grad=False, gradgrad=False, rtol=1e-5)
      for n in sorted(k for k in dir(S) if k.endswith(("_polynomial_t", "_polynomial_u", "_polynomial_v",
                                                          "_polynomial_w", "_polynomial_h", "_polynomial_he",
                                                          "_polynomial_l", "_polynomial_p")))],
]
