"""Op-database entries for the element-wise catalogue (issue 3): unary math, activations,
rounding, clamp, binary ops with broadcasting and weak scalars, classification and comparisons."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.core import U, _bcast_errors, binary_samples, noncontig, unary_samples

NAN, INF = float("nan"), float("inf")


def _scalar_ref(fn):
    """PyTorch reference for a binary op whose torch form refuses Python scalars: a scalar
    becomes a 0-d tensor of the other operand's dtype (pylucid's weak-scalar rule)."""

    def ref(a, b):
        if not isinstance(b, torch.Tensor):
            b = torch.tensor(b, dtype=a.dtype)
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, dtype=b.dtype)
        return fn(a, b)

    return ref


def _not_tensor(name):
    return lambda: [ErrorInput(([1.0, 2.0],), exc=TypeError, match=name)]


def _with(base, *extra):
    """``base`` samples plus ``extra`` ones."""
    return lambda: base() + list(extra)


def unary(name, op=None, ref=None, lo=-2.0, hi=2.0, extra=(), **kw):
    """An entry for a unary op: 2-d, 0-d, empty and non-contiguous samples in ``[lo, hi]`` plus ``extra``."""
    op = op or getattr(pl, name)
    ref = ref or getattr(torch, name)
    kw.setdefault("error_inputs", _not_tensor(name))
    return OpEntry(name, op, ref, _with(unary_samples(lo, hi), *extra), **kw)


def _kinks(*values, name="kinks"):
    """A sample on the non-smooth points, compared with PyTorch but not finite-differenced."""
    return Sample((np.array(values, dtype=np.float64),), name=name, gradcheck=False)


def _cbrt_ref(x):
    return torch.sign(x) * torch.abs(x) ** (1.0 / 3.0)


def _elu(x, **k):
    return pl.elu(x, **k)


ENTRIES = [
    # -- exponentials and logarithms -------------------------------------------------
    unary("exp2", extra=[Sample((np.array([-200.0, 200.0, 0.0]),), name="overflow", gradcheck=False)]),
    unary("expm1", extra=[Sample((np.array([1e-10, -1e-12, 0.0]),), name="tiny")]),
    unary("log2", lo=0.2, hi=3.0, extra=[_kinks(0.0, -1.0, name="domain")]),
    unary("log10", lo=0.2, hi=3.0, extra=[_kinks(0.0, -1.0, name="domain")]),
    unary("log1p", lo=-0.5, hi=2.0, extra=[Sample((np.array([1e-10, -1e-12]),), name="tiny"),
                                            _kinks(-1.0, -2.0, name="domain")]),
    # -- trigonometric and hyperbolic ------------------------------------------------
    unary("tan", lo=-1.2, hi=1.2),
    unary("arcsin", ref=torch.asin, lo=-0.9, hi=0.9, extra=[_kinks(1.5, -1.0, name="domain")]),
    unary("arccos", ref=torch.acos, lo=-0.9, hi=0.9, extra=[_kinks(1.5, name="domain")]),
    unary("arctan", ref=torch.atan),
    unary("sinh"),
    unary("cosh"),
    unary("tanh", extra=[Sample((np.array([-50.0, 50.0]),), name="saturated")]),
    unary("arcsinh", ref=torch.asinh),
    unary("arccosh", ref=torch.acosh, lo=1.2, hi=3.0, extra=[_kinks(0.5, 1.0, name="domain")]),
    unary("arctanh", ref=torch.atanh, lo=-0.9, hi=0.9, extra=[_kinks(1.0, -1.0, 2.0, name="domain")]),
    # -- error function, powers and roots --------------------------------------------
    unary("erf"),
    unary("erfinv", lo=-0.9, hi=0.9, extra=[_kinks(1.0, -1.0, 1.5, name="domain")]),
    unary("reciprocal", lo=0.5, hi=2.0, extra=[Sample((-U(3, lo=0.5, hi=2.0),), name="negative"),
                                               _kinks(0.0, name="zero"),
                                               Sample((np.array([1, 2, 4]),), name="int->float")]),
    unary("rsqrt", lo=0.2, hi=3.0, extra=[_kinks(0.0, -1.0, name="domain")]),
    unary("cube", ref=lambda x: torch.pow(x, 3), extra=[Sample((np.array([1, -2]),), name="int")]),
    unary("cbrt", ref=_cbrt_ref, lo=0.2, hi=3.0, extra=[Sample((-U(3, lo=0.2, hi=3.0),), name="negative")]),
    # -- rounding: zero gradients as in PyTorch --------------------------------------
    *[unary(n, extra=[_kinks(0.5, 1.5, 2.5, -0.5, -2.5, name="halves"),
                      Sample((np.array([3, -4]),), name="int")])
      for n in ("floor", "ceil", "trunc")],
    OpEntry("round", lambda x, **k: pl.round(x, **k), lambda x, **k: torch.round(x, **k),
            _with(unary_samples(-5.0, 5.0), _kinks(0.5, 1.5, 2.5, -0.5, -2.5, name="halves-to-even"),
                  Sample((U(3, 4, lo=-5, hi=5),), {"decimals": 2}, "decimals"),
                  Sample((U(3, lo=-500, hi=500),), {"decimals": -2}, "negative-decimals"),
                  Sample((np.array([3, -4]),), name="int")),
            error_inputs=lambda: [ErrorInput((U(2),), {"decimals": 1.5}, TypeError, "round: decimals")]),
    unary("frac", lo=-3.0, hi=3.0,
          error_inputs=lambda: [ErrorInput((np.array([1, 2]),), exc=TypeError, match="frac: expected a floating")]),
    # -- clamp -------------------------------------------------------------------------
    OpEntry("clamp", lambda x, lo=None, hi=None: pl.clamp(x, lo, hi),
            lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
            lambda: [Sample((U(3, 4), -0.5, 0.5), name="scalars"),
                     Sample((U(3, 4), -0.5), name="min-only"),
                     Sample((U(3, 4), None, 0.5), name="max-only"),
                     Sample((np.array(1.5), -1.0, 1.0), name="0d"),
                     Sample((U(0, 3), -1.0, 1.0), name="empty"),
                     Sample((noncontig(3, 4), -0.5, 0.5), name="noncontig"),
                     Sample((U(3, 4), U(4, lo=-1.0, hi=0.0, seed=1), U(3, 1, lo=0.0, hi=1.0, seed=2)),
                            name="tensor-bounds-broadcast"),
                     Sample((U(3, 4), None, U(4, lo=-1.0, hi=1.0, seed=1)), name="tensor-max-only"),
                     Sample((U(2, 3), U(2, 3, lo=0.5, hi=1.0, seed=1), U(2, 3, lo=-1.0, hi=0.0, seed=2)),
                            name="min>max"),
                     Sample((np.array([-1.0, 1.0, 0.0, NAN]), -1.0, 1.0), name="boundary-nan", gradcheck=False),
                     Sample((np.array([1, 5, -3]), 0, 2), name="int"),
                     Sample((np.array([1, 5, -3]), 0.5), name="int-float-bound")],
            error_inputs=lambda: [ErrorInput((U(2),), exc=ValueError, match="clamp: at least one"),
                                  ErrorInput(([1.0],), {"lo": 0.0}, TypeError, "clamp: expected a Tensor"),
                                  ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="clamp: shapes")]),
    OpEntry("nan_to_num", lambda x, **k: pl.nan_to_num(x, **k), lambda x, **k: torch.nan_to_num(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((np.array([NAN, INF, -INF, 1.0]),), name="special", gradcheck=False),
                     Sample((np.array([NAN, INF, -INF, 1.0]),), {"nan": 2.0, "posinf": 9.0, "neginf": -9.0},
                            name="values", gradcheck=False),
                     Sample((np.array([1, 2]),), name="int"), Sample((np.array(NAN),), name="0d", gradcheck=False)],
            error_inputs=lambda: [ErrorInput((U(2),), {"nan": "x"}, TypeError, "nan_to_num: nan")]),
    # -- activations ----------------------------------------------------------------------
    unary("sigmoid", extra=[Sample((np.array([-1000.0, 1000.0, -50.0, 50.0]),), name="large")]),
    OpEntry("logit", lambda x, **k: pl.logit(x, **k), lambda x, **k: torch.logit(x, **k),
            _with(unary_samples(0.05, 0.95), Sample((U(3, 4, lo=0.05, hi=0.95),), {"eps": 0.1}, "eps"),
                  Sample((np.array([-0.5, 0.0, 1.0, 1.5]),), name="outside", gradcheck=False),
                  Sample((np.array([-0.5, 0.0, 1.0, 1.5]),), {"eps": 1e-6}, "outside-eps", gradcheck=False)),
            error_inputs=lambda: [ErrorInput((U(2),), {"eps": "a"}, TypeError, "logit: eps")]),
    unary("relu", extra=[_kinks(0.0, -1.0, 1.0, NAN), Sample((np.array([-2, 0, 3]),), name="int")],
          error_inputs=lambda: [ErrorInput((np.array([True]),), exc=TypeError, match="relu: bool")]),
    unary("relu6", ref=F.relu6, lo=-2.0, hi=8.0, extra=[_kinks(0.0, 6.0, -1.0, 7.0, name="boundaries")]),
    OpEntry("hardtanh", lambda x, *a: pl.hardtanh(x, *a), lambda x, *a: F.hardtanh(x, *a),
            _with(unary_samples(), _kinks(-1.0, 1.0, -2.0, 2.0, name="boundaries"),
                  Sample((U(3, 4, lo=-3, hi=3), -2.0, 0.5), name="bounds")),
            error_inputs=lambda: [ErrorInput((U(2), 1.0, -1.0), exc=ValueError, match="hardtanh: max_val")]),
    OpEntry("leaky_relu", lambda x, *a: pl.leaky_relu(x, *a), lambda x, *a: F.leaky_relu(x, *a),
            _with(unary_samples(), _kinks(0.0, -1.0), Sample((U(3, 4),), name="default"),
                  Sample((U(3, 4), 0.3), name="slope")),
            error_inputs=lambda: [ErrorInput((U(2), "a"), exc=TypeError, match="leaky_relu: negative_slope")]),
    OpEntry("elu", _elu, lambda x, **k: F.elu(x, **k),
            _with(unary_samples(), Sample((U(3, 4),), {"alpha": 0.5}, "alpha"), _kinks(0.0, -1.0, 1.0),
                  Sample((np.array([-100.0, 100.0, 1000.0]),), name="large", gradcheck=False)),
            error_inputs=_not_tensor("elu")),
    unary("selu", extra=[_kinks(0.0)]),
    OpEntry("gelu", lambda x, **k: pl.gelu(x, **k), lambda x, **k: F.gelu(x, **k),
            _with(unary_samples(-4.0, 4.0), Sample((U(3, 4, lo=-4, hi=4),), {"approximate": "tanh"}, "tanh"),
                  Sample((np.array([-30.0, 30.0]),), {"approximate": "tanh"}, "tanh-large"),
                  Sample((noncontig(3, 4),), {"approximate": "none"}, "none-noncontig")),
            error_inputs=lambda: [ErrorInput((U(2),), {"approximate": "fast"}, ValueError, "gelu: approximate")]),
    unary("silu", ref=F.silu, extra=[Sample((np.array([-800.0, 800.0]),), name="large", gradcheck=False)]),
    OpEntry("softplus", lambda x, *a: pl.softplus(x, *a), lambda x, *a: F.softplus(x, *a),
            _with(unary_samples(-5.0, 5.0), Sample((U(3, 4, lo=-5, hi=5), 2.0, 3.0), name="beta-threshold"),
                  Sample((np.array([-100.0, 30.0, 100.0]),), name="large", gradcheck=False),
                  Sample((np.array([-700.0, -30.0]),), name="tiny")),
            error_inputs=lambda: [ErrorInput((U(2), "a"), exc=TypeError, match="softplus: beta")]),
    unary("mish", ref=F.mish, lo=-4.0, hi=4.0),
    unary("hardsigmoid", ref=F.hardsigmoid, lo=-4.0, hi=4.0, extra=[_kinks(-3.0, 3.0, 0.0)]),
    unary("hardswish", ref=F.hardswish, lo=-4.0, hi=4.0, extra=[_kinks(-3.0, 3.0, 0.0)]),
    # -- binary -------------------------------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), _scalar_ref(getattr(torch, n)),
              _with(binary_samples(),
                    Sample((np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])), name="ties", gradcheck=False),
                    Sample((np.array([NAN, 1.0, NAN]), np.array([1.0, NAN, NAN])), name="nan", gradcheck=False),
                    Sample((np.array([1, 5]), np.array([3, 2])), name="int")),
              error_inputs=_bcast_errors(n))
      for n in ("maximum", "minimum", "fmax", "fmin")],
    OpEntry("fmod", pl.fmod, torch.fmod,
            _with(binary_samples(-5.0, 5.0, 0.7, 2.0),
                  Sample((np.array([-7.0, 7.0, -7.0]), np.array([3.0, -3.0, -3.0])), name="signs"),
                  Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int")),
            gradgrad=False,
            error_inputs=lambda: _bcast_errors("fmod")() + [
                ErrorInput((np.array([1, 2]), np.array([1, 0])), exc=ZeroDivisionError, match="fmod: integer")]),
    OpEntry("trunc_divide", pl.trunc_divide, lambda a, b: torch.div(a, b, rounding_mode="trunc"),
            lambda: [Sample((U(3, 4) * 5, U(3, 4, lo=0.5, hi=2)), name="float"),
                     Sample((U(3, 4) * 5, -2.0), name="scalar"),
                     Sample((np.array([7, -7, 5, -5, 6]), np.array([2, 2, -3, -3, 3])), name="int"),
                     Sample((np.array([1.0, -1.0, 0.0]), np.array([0.0, 0.0, 0.0])), name="float-by-zero")],
            grad=False,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]), np.array([1, 0])), exc=ZeroDivisionError,
                                             match="trunc_divide: integer division by zero")]),
    OpEntry("atan2", pl.atan2, _scalar_ref(torch.atan2),
            _with(binary_samples(), Sample((np.array([0.0, 1.0, -1.0]), np.array([-1.0, 0.0, 0.0])),
                                           name="axes", gradcheck=False)),
            error_inputs=_bcast_errors("atan2")),
    OpEntry("hypot", pl.hypot, _scalar_ref(torch.hypot),
            _with(binary_samples(0.5, 2.0), Sample((np.array([3.0, -5.0]), np.array([4.0, 12.0])), name="exact")),
            error_inputs=_bcast_errors("hypot")),
    OpEntry("copysign", pl.copysign, torch.copysign,
            _with(binary_samples(),
                  Sample((np.array([1.0, 2.0, 0.0, 3.0]), np.array([-0.0, 0.0, -1.0, -2.0])), name="signed-zero",
                         gradcheck=False)),
            error_inputs=_bcast_errors("copysign")),
    *[OpEntry(n, getattr(pl, n), _scalar_ref(getattr(torch, n)),
              _with(binary_samples(),
                    Sample((np.array([1000.0, -1000.0, 0.0]), np.array([1000.0, -1000.0, -800.0])), name="extreme"),
                    Sample((np.array([INF, -INF]), np.array([1.0, 1.0])), name="inf", gradcheck=False)),
              error_inputs=_bcast_errors(n))
      for n in ("logaddexp", "logaddexp2")],
    OpEntry("lerp", pl.lerp, torch.lerp,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1), U(3, 4, lo=0, hi=1, seed=2)), name="tensor-weight"),
                     Sample((U(3, 4), U(3, 4, seed=1), 0.3), name="scalar-weight"),
                     Sample((U(3, 4), U(3, 4, seed=1), 0.8), name="scalar-weight-high"),
                     Sample((U(2, 1, 4), U(3, 1, seed=1), U(4, lo=0, hi=1, seed=2)), name="broadcast"),
                     Sample((np.array(1.0), np.array(3.0), np.array(0.25)), name="0d"),
                     Sample((U(0, 2), U(2, seed=1), 0.5), name="empty")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4), 0.5), exc=ShapeMismatch, match="lerp: shapes"),
                                  ErrorInput((U(2), [1.0, 2.0], 0.5), exc=TypeError, match="lerp: end")]),
    # -- classification, closeness, shifts (no gradients) -------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1.0, NAN, INF, -INF, 0.0]),)), Sample((np.array([1, -2]),), name="int"),
                       Sample((U(0, 2),), name="empty"), Sample((np.array(INF),), name="0d")],
              grad=False, error_inputs=_not_tensor(n))
      for n in ("isnan", "isinf", "isfinite", "isposinf", "isneginf")],
    OpEntry("isclose", lambda a, b, **k: pl.isclose(a, b, **k), lambda a, b, **k: torch.isclose(a, b, **k),
            lambda: [Sample((np.array([1.0, 1.0 + 1e-9, 2.0, INF, NAN]), np.array([1.0, 1.0, 2.1, INF, NAN]))),
                     Sample((np.array([1.0, NAN]), np.array([1.0, NAN])), {"equal_nan": True}, "equal-nan"),
                     Sample((np.array([1.0, 1.05]), np.array([1.0, 1.0])), {"rtol": 0.1, "atol": 0.0}, "rtol"),
                     Sample((U(2, 3), U(3, seed=1)), name="broadcast")],
            grad=False,
            error_inputs=lambda: [ErrorInput((U(2), U(2)), {"rtol": -1.0}, ValueError, "isclose: rtol"),
                                  ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="isclose: shapes")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([1, 6, -8, 3]), np.array([1, 2, 1, 0]))),
                       Sample((np.array([1, -16]), 2), name="scalar"),
                       Sample((np.array([[1], [4]]), np.array([0, 1, 2])), name="broadcast")],
              grad=False, error_inputs=lambda n=n: [ErrorInput((U(2), U(2)), exc=TypeError, match=n)])
      for n in ("bitwise_left_shift", "bitwise_right_shift")],
]

