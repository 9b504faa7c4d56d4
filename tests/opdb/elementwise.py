"""Op-database entries for the element-wise ops (``pylucid/ops/elementwise.py``): arithmetic with broadcasting
and weak scalars, the documented ``sqrt``/``square``, unary math, rounding, clamp, the binary ops and the
composites built on them (``addcmul``, ``float_power``, ...). Complex samples check PyTorch's complex
gradient convention (``g * conj(f'(z))``) first and second order."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import (
    INF,
    NAN,
    C,
    ErrorInput,
    OpEntry,
    Sample,
    U,
    bcast_errors,
    binary_samples,
    kinks,
    noncontig,
    not_tensor,
    optional,
    unary_samples,
    with_samples,
)


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


def _complex1():
    return Sample((C(3, 2),), name="complex")


def unary(name, op=None, ref=None, lo=-2.0, hi=2.0, extra=(), complex_=False, **kw):
    """An entry for a unary op: 2-d, 0-d, empty and non-contiguous samples in ``[lo, hi]`` plus ``extra``
    (and a complex sample with ``complex_``)."""
    op = op or getattr(pl, name)
    ref = ref or getattr(torch, name)
    kw.setdefault("error_inputs", not_tensor(name))
    extra = [*extra, _complex1()] if complex_ else list(extra)
    return OpEntry(name, op, ref, with_samples(unary_samples(lo, hi), *extra), **kw)


def _cbrt_ref(x):
    return torch.sign(x) * torch.abs(x) ** (1.0 / 3.0)


def _complex_binary():
    z, w = C(3, seed=0), C(3, seed=1)
    return [Sample((z, w), name="complex"), Sample((U(3), w), name="real-complex"),
            Sample((C(2, 3, seed=2), C(3, seed=3)), name="complex-broadcast")]


def _arith(name, extra=(), blo=None, bhi=None, **kw):
    return OpEntry(name, getattr(pl, name), getattr(torch, name),
                   with_samples(binary_samples(blo=blo, bhi=bhi), *_complex_binary(), *extra),
                   error_inputs=kw.pop("error_inputs", bcast_errors(name)), **kw)


ENTRIES = [
    # -- the documented ops ------------------------------------------------------------
    unary("sqrt", lo=0.2, hi=3.0, complex_=True,
          extra=[kinks(0.0, -1.0, name="domain"), Sample((np.array([1, 4, 9]),), name="int->float")],
          error_inputs=lambda: [ErrorInput(([1.0],), exc=TypeError, match="sqrt")]),
    unary("square", complex_=True, extra=[Sample((np.array([3, -4]),), name="int"),
                                          Sample((np.array([True, False]),), name="bool->int64")]),
    # -- arithmetic ----------------------------------------------------------------------
    _arith("add", extra=[Sample((U(3, 4), U(3, 4, seed=1)), {"alpha": 2.0}, "alpha"),
                         Sample((np.array([1, 2]), np.array([3, 4])), {"alpha": 3}, "int-alpha")]),
    _arith("sub", extra=[Sample((U(3, 4), U(3, 4, seed=1)), {"alpha": -0.5}, "alpha")]),
    _arith("mul", extra=[Sample((2.5, U(3, 4)), name="scalar-lhs"), Sample((C(3), 2 - 1j), name="complex-scalar"),
                         Sample((np.array([1, 2]), np.array([True, False])), name="int-bool")],
           error_inputs=lambda: bcast_errors("mul")() + [ErrorInput((U(2), "x"), exc=TypeError, match="mul")]),
    _arith("div", blo=0.5, bhi=2.0,
           extra=[Sample((1 + 2j, C(3)), name="complex-scalar-lhs"),
                  Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int->float")]),
    # rounded division is piecewise constant: zero gradients, recorded as PyTorch does. The operator dunders take
    # no rounding_mode, so the entry calls through a lambda (and checks Tensor.div_ with a rounding mode itself)
    OpEntry("div_rounding", lambda a, b, **k: pl.div(a, b, **k), torch.div,
            lambda: [Sample((U(3, 4) * 3, U(3, 4, lo=0.3, hi=2.0, seed=1)), {"rounding_mode": "floor"}, "floor"),
                     Sample((U(3, 4) * 3, U(3, 4, lo=0.3, hi=2.0, seed=1)), {"rounding_mode": "trunc"}, "trunc"),
                     Sample((U(2, 1, 3) * 3, U(3, lo=0.3, hi=2.0, seed=1)), {"rounding_mode": "floor"}, "broadcast"),
                     Sample((U(3) * 3, -1.5), {"rounding_mode": "trunc"}, "scalar"),
                     Sample((np.array(2.5), U(0, lo=0.3, hi=2.0)), {"rounding_mode": "floor"}, "empty"),
                     Sample((np.array([[3, -1, 4], [1, -5, 9]]), 2), {"rounding_mode": "floor"}, "int-floor"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), {"rounding_mode": "trunc"}, "int-trunc")],
            error_inputs=lambda: [ErrorInput((U(2), U(2)), {"rounding_mode": "round"}, ValueError,
                                             "div: rounding_mode must be"),
                                  ErrorInput((np.array([1, 2]), np.array([1, 0])), {"rounding_mode": "floor"},
                                             ZeroDivisionError, "integer division by zero")]),
    OpEntry("div_rounding", lambda a, b, **k: a.clone().div_(b, **k), torch.Tensor.div_,
            lambda: [Sample((U(3, 4) * 3, U(3, 4, lo=0.3, hi=2.0, seed=1)), {"rounding_mode": "floor"}, "floor"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), {"rounding_mode": "trunc"}, "int-trunc")],
            variant="inplace", grad=False, amp=False),
    OpEntry("pow", pl.pow, torch.pow, lambda: binary_samples(0.5, 2.0)() + [
                Sample((np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.0])), name="zeros", gradcheck=False),
                Sample((U(3, lo=0.5, hi=2), 2), name="square"), Sample((U(3, lo=0.5, hi=2), 0), name="pow0"),
                Sample((U(3, 4), 2), name="negative-base-int-exponent"), Sample((U(3, 4), 3.0), name="cube"),
                Sample((2.0, U(3)), name="scalar-base"),
                Sample((C(3), C(3, seed=1)), name="complex"), Sample((C(3), 2.5), name="complex-float-exponent"),
                Sample((U(3, lo=0.5, hi=2), C(3, seed=1)), name="real-base-complex-exponent"),
                Sample((np.array([2, 3]), 2), name="int")]),
    unary("neg", complex_=True, extra=[Sample((np.array([1, -2]),), name="int")]),
    unary("abs", complex_=True, extra=[Sample((np.array([1, -2]),), name="int"),
                                       Sample((np.array([[0.0, 1.0j], [3.0 - 4.0j, -2.0]]),), name="complex-axes",
                                              gradcheck=False)]),
    unary("sign", gradgrad=False, extra=[kinks(0.0, -0.0, 2.0, NAN, INF, -INF),
                                         Sample((np.array([3, 0, -2]),), name="int")]),
    unary("exp", complex_=True, extra=[Sample((np.array([1, 2]),), name="int->float")]),
    unary("log", lo=0.2, hi=3.0, complex_=True, extra=[kinks(0.0, -1.0, name="domain")]),
    unary("sin", complex_=True),
    unary("cos", complex_=True),
    OpEntry("floor_divide", pl.floor_divide, torch.floor_divide,
            lambda: [Sample((U(3, 4) * 5, U(3, 4, lo=0.5, hi=2)), name="float"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int"),
                     Sample((np.array([7, -7, 5]), 2), name="int-scalar")],
            grad=False, error_inputs=lambda: [ErrorInput((np.array([1, 2]), np.array([1, 0])),
                                                         exc=ZeroDivisionError, match="integer division by zero")]),
    OpEntry("remainder", pl.remainder, torch.remainder,
            lambda: [Sample((U(3, 4) * 5, U(3, 4, lo=0.7, hi=2)), name="float"),
                     Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int"),
                     Sample((U(4) * 5, 1.5), name="scalar"), Sample((np.array([[3, -1, 4], [1, -5, 9]]), 3),
                                                                    name="int-scalar")],
            gradgrad=False),
    # -- exponentials and logarithms -------------------------------------------------
    unary("exp2", complex_=True, extra=[Sample((np.array([-200.0, 200.0, 0.0]),), name="overflow", gradcheck=False)]),
    unary("expm1", complex_=True, extra=[Sample((np.array([1e-10, -1e-12, 0.0]),), name="tiny")]),
    unary("log2", lo=0.2, hi=3.0, complex_=True, extra=[kinks(0.0, -1.0, name="domain")]),
    unary("log10", lo=0.2, hi=3.0, complex_=True, extra=[kinks(0.0, -1.0, name="domain")]),
    unary("log1p", lo=-0.5, hi=2.0, complex_=True, extra=[Sample((np.array([1e-10, -1e-12]),), name="tiny"),
                                                          kinks(-1.0, -2.0, name="domain")]),
    # -- trigonometric and hyperbolic ------------------------------------------------
    unary("tan", lo=-1.2, hi=1.2, complex_=True),
    unary("arcsin", ref=torch.asin, lo=-0.9, hi=0.9, complex_=True, extra=[kinks(1.5, -1.0, name="domain")]),
    unary("arccos", ref=torch.acos, lo=-0.9, hi=0.9, complex_=True, extra=[kinks(1.5, name="domain")]),
    unary("arctan", ref=torch.atan, complex_=True),
    unary("sinh", complex_=True),
    unary("cosh", complex_=True),
    unary("arcsinh", ref=torch.asinh, complex_=True),
    unary("arccosh", ref=torch.acosh, lo=1.2, hi=3.0, complex_=True, extra=[kinks(0.5, 1.0, name="domain")]),
    unary("arctanh", ref=torch.atanh, lo=-0.9, hi=0.9, complex_=True, extra=[kinks(1.0, -1.0, 2.0, name="domain")]),
    # -- error function, powers and roots --------------------------------------------
    unary("erf"),
    unary("erfinv", lo=-0.9, hi=0.9, extra=[kinks(1.0, -1.0, 1.5, name="domain")]),
    unary("reciprocal", lo=0.5, hi=2.0, complex_=True,
          extra=[Sample((-U(3, lo=0.5, hi=2.0),), name="negative"), kinks(0.0, name="zero"),
                 Sample((np.array([1, 2, 4]),), name="int->float")]),
    unary("rsqrt", lo=0.2, hi=3.0, complex_=True, extra=[kinks(0.0, -1.0, name="domain")]),
    unary("cube", ref=lambda x: torch.pow(x, 3), extra=[Sample((np.array([1, -2]),), name="int"),
                                                        Sample((np.array([True, False]),), name="bool->int64")]),
    unary("cbrt", ref=_cbrt_ref, lo=0.2, hi=3.0, extra=[Sample((-U(3, lo=0.2, hi=3.0),), name="negative"),
                                                        Sample((U(3, 4),), name="both-signs")]),
    # -- rounding: zero gradients as in PyTorch --------------------------------------
    *[unary(n, extra=[kinks(0.5, 1.5, 2.5, -0.5, -2.5, name="halves"), Sample((np.array([3, -4]),), name="int")])
      for n in ("floor", "ceil", "trunc")],
    OpEntry("round", pl.round, torch.round,
            with_samples(unary_samples(-5.0, 5.0), kinks(0.5, 1.5, 2.5, -0.5, -2.5, name="halves-to-even"),
                         Sample((U(3, 4, lo=-5, hi=5),), {"decimals": 2}, "decimals"),
                         Sample((U(3, 4, lo=-20, hi=20),), {"decimals": 1}, "decimals1"),
                         Sample((U(3, lo=-500, hi=500),), {"decimals": -2}, "negative-decimals"),
                         Sample((np.array([3, -4]),), name="int")),
            error_inputs=lambda: [ErrorInput((U(2),), {"decimals": 1.5}, TypeError, "round: decimals")]),
    unary("frac", lo=-3.0, hi=3.0,
          error_inputs=lambda: [ErrorInput((np.array([1, 2]),), exc=TypeError, match="frac: expected a floating"),
                                ErrorInput((np.array([1j]),), exc=TypeError, match="frac: complex")]),
    # -- clamp -------------------------------------------------------------------------
    OpEntry("clamp", pl.clamp, torch.clamp,
            lambda: [Sample((U(3, 4), -0.5, 0.5), name="scalars"),
                     Sample((U(3, 4),), {"min": -0.5, "max": 0.5}, "keywords"),
                     Sample((U(3, 4), -0.5), name="min-only"),
                     Sample((U(3, 4), None, 0.5), name="max-only"),
                     Sample((np.array(1.5), -1.0, 1.0), name="0d"),
                     Sample((U(0, 3), -1.0, 1.0), name="empty"),
                     Sample((noncontig(3, 4), -0.5, 0.5), name="noncontig"),
                     Sample((U(3, 4), U(4, lo=-1.0, hi=0.0, seed=1), U(3, 1, lo=0.0, hi=1.0, seed=2)),
                            name="tensor-bounds-broadcast"),
                     Sample((U(3, 4), U(3, 4, seed=1) * 0.5 - 0.3, U(3, 4, seed=1) * 0.5 + 0.3), name="tensor-bounds"),
                     Sample((U(3, 4), None, U(4, lo=-1.0, hi=1.0, seed=1)), name="tensor-max-only"),
                     Sample((U(2, 3), U(2, 3, lo=0.5, hi=1.0, seed=1), U(2, 3, lo=-1.0, hi=0.0, seed=2)),
                            name="min>max"),
                     Sample((np.array([-1.0, 1.0, 0.0, NAN]), -1.0, 1.0), name="boundary-nan", gradcheck=False),
                     Sample((np.array([1, 5, -3]), 0, 2), name="int"),
                     Sample((np.array([1, 5, -3]), 0.5), name="int-float-bound")],
            error_inputs=lambda: [ErrorInput((U(2),), exc=ValueError, match="clamp: at least one"),
                                  ErrorInput(([1.0],), {"min": 0.0}, TypeError, "clamp: expected a Tensor"),
                                  ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="clamp: shapes")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((U(3, 4), 0.3)), Sample((U(3, 4), U(4, seed=1)), name="tensor-bound"),
                       Sample((np.array([1, 5, -3]), 2), name="int"),
                       Sample((np.array([0.3, 0.3, 1.0]), 0.3), name="at-bound", gradcheck=False)])
      for n in ("clamp_min", "clamp_max")],
    OpEntry("nan_to_num", pl.nan_to_num, torch.nan_to_num,
            lambda: [Sample((U(3, 4),)), Sample((np.array([NAN, INF, -INF, 1.0]),), name="special", gradcheck=False),
                     Sample((np.array([complex(NAN, 0.5), complex(1.0, -INF), complex(INF, NAN), 2 - 1j]),),
                            name="complex-special", grad_args=()),  # PyTorch has no complex nan_to_num gradient
                     Sample((np.array([1.0, NAN, INF, -INF, 0.0, -2.5]),), {"nan": 2.0, "posinf": 9.0, "neginf": -9.0},
                            name="values", gradcheck=False),
                     Sample((np.array([1, 2]),), name="int"), Sample((np.array(NAN),), name="0d", gradcheck=False)],
            error_inputs=lambda: [ErrorInput((U(2),), {"nan": "x"}, TypeError, "nan_to_num: nan")]),
    # -- binary -------------------------------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), _scalar_ref(getattr(torch, n)),
              with_samples(binary_samples(),
                           Sample((np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])), name="ties", gradcheck=False),
                           Sample((np.array([NAN, 1.0, NAN]), np.array([1.0, NAN, NAN])), name="nan", gradcheck=False),
                           Sample((np.array([1, 5]), np.array([3, 2])), name="int")),
              error_inputs=bcast_errors(n))
      for n in ("maximum", "minimum", "fmax", "fmin")],
    OpEntry("fmod", pl.fmod, torch.fmod,
            with_samples(binary_samples(-5.0, 5.0, 0.7, 2.0),
                         Sample((np.array([-7.0, 7.0, -7.0]), np.array([3.0, -3.0, -3.0])), name="signs"),
                         Sample((np.array([7, -7, 5]), np.array([2, 2, -3])), name="int")),
            gradgrad=False,
            error_inputs=lambda: bcast_errors("fmod")() + [
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
            with_samples(binary_samples(), Sample((np.array([0.0, 1.0, -1.0]), np.array([-1.0, 0.0, 0.0])),
                                                  name="axes", gradcheck=False)),
            error_inputs=bcast_errors("atan2")),
    OpEntry("hypot", pl.hypot, _scalar_ref(torch.hypot),
            with_samples(binary_samples(0.5, 2.0), Sample((np.array([3.0, -5.0]), np.array([4.0, 12.0])),
                                                          name="exact")),
            error_inputs=bcast_errors("hypot")),
    OpEntry("copysign", pl.copysign, torch.copysign,
            with_samples(binary_samples(),
                         Sample((np.array([1.0, 2.0, 0.0, 3.0]), np.array([-0.0, 0.0, -1.0, -2.0])), name="signed-zero",
                                gradcheck=False)),
            error_inputs=bcast_errors("copysign")),
    *[OpEntry(n, getattr(pl, n), _scalar_ref(getattr(torch, n)),
              with_samples(binary_samples(),
                           Sample((np.array([1000.0, -1000.0, 0.0]), np.array([1000.0, -1000.0, -800.0])),
                                  name="extreme"),
                           Sample((np.array([INF, -INF]), np.array([1.0, 1.0])), name="inf", gradcheck=False)),
              error_inputs=bcast_errors(n))
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
    # -- composites ---------------------------------------------------------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda lo=lo: [Sample((U(3, 4), U(3, 4, seed=1), U(3, 4, lo=lo, hi=2.0, seed=2)), name="same"),
                             Sample((U(3, 4), U(4, seed=1), U(3, 1, lo=lo, hi=2.0, seed=2)), {"value": 0.5},
                                    "broadcast-value"),
                             Sample((U(2), U(2, seed=1), U(2, lo=lo, hi=2.0, seed=2)), {"value": -2}, "int-value")])
      for n, lo in (("addcmul", -2.0), ("addcdiv", 0.5))],
    # integer operands: the multiplier is cast to their type (0.5 -> 0, -2 wraps for uint8), as PyTorch
    OpEntry("addcmul", pl.addcmul, torch.addcmul,
            lambda: [Sample((np.array([1, 2]), np.array([3, 4]), np.array([2, 2])), {"value": 0.5}, "int-half"),
                     Sample((np.array([1, 2]), np.array([3, 4]), np.array([2, 2])), {"value": 2.7}, "int-trunc"),
                     Sample((np.array([1, 2], dtype=np.uint8), np.array([1, 2], dtype=np.uint8),
                             np.array([1, 2], dtype=np.uint8)), {"value": -2}, "uint8-wrap")],
            variant="integer", amp=False),
    OpEntry("float_power", pl.float_power, torch.float_power,
            lambda: [Sample((U(3, 4, lo=0.5, hi=2.0).astype(np.float32), U(3, 4, seed=1)), name="float->float64"),
                     Sample((np.array([2, 3]), 2), name="int-scalar"), Sample((U(3, lo=0.5, hi=2.0), 1.5),
                                                                              name="scalar"),
                     Sample((U(3, lo=0.5, hi=2.0), C(3)), name="complex")], amp=False),
    # pylucid.positive / +x: the tensor itself (bool tensors too, where PyTorch refuses them)
    *optional(lambda: OpEntry("positive", pl.positive, torch.positive,
                              lambda: [Sample((U(3, 4),)), Sample((np.array([1, -2]),), name="int")])),
    # Python's round(x, ndigits): round with decimals=ndigits (torch.Tensor has no __round__)
    *optional(lambda: OpEntry("round", pl.Tensor.__round__, lambda x, nd=None: torch.round(x, decimals=nd or 0),
                              lambda: [Sample((U(3, 4, lo=-5, hi=5),)), Sample((U(3, 4, lo=-5, hi=5), 2),
                                                                               name="ndigits"),
                                       kinks(0.5, 1.5, 2.5, -0.5, name="halves-to-even")], variant="builtin")),
    OpEntry("sum_to_size", pl.Tensor.sum_to_size, torch.Tensor.sum_to_size,
            lambda: [Sample((U(2, 3, 4), 3, 1)), Sample((U(2, 3), (1, 3)), name="tuple"),
                     Sample((U(2, 3), 2, 3), name="same"), Sample((U(3, 4), 4), name="drop-leading"),
                     Sample((U(2, 3), ()), name="to-0d"), Sample((np.array(True), ()), name="bool-0d"),
                     Sample((np.array([True, True]), 2), name="bool-same")],
            error_inputs=lambda: [ErrorInput((U(2, 3), 2, 3, 4), exc=ShapeMismatch, match="sum_to_size")]),
    # -- angles, exponents, signs, integer arithmetic ------------------------------------------------
    *[unary(n, extra=[Sample((np.array([180, -90, 0]),), name="int->float")]) for n in ("deg2rad", "rad2deg")],
    OpEntry("rsub", pl.rsub, torch.rsub,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1)), name="same"), Sample((U(2, 1, 3), U(4, 1, seed=1)),
                                                                             name="broadcast"),
                     Sample((U(3, 4), 2.5), name="scalar"), Sample((U(3), U(3, seed=1)), {"alpha": 2.0}, "alpha"),
                     Sample((np.array([1, 2]), np.array([5, 7])), {"alpha": 3}, "int-alpha"),
                     Sample((np.array(1.5), U(0, seed=1)), name="empty")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="sub: shapes")]),
    OpEntry("ldexp", pl.ldexp, torch.ldexp,
            # (non-negative integer exponents: PyTorch's gradient takes 2 ** other in integer arithmetic, 0 for
            # other < 0; pylucid's is 2.0 ** other)
            lambda: [Sample((U(3, 4), np.array([[1, 2, 0, 3]] * 3)), name="int-exponent"),
                     Sample((U(3, 4), U(3, 4, seed=1)), name="float-exponent"),
                     Sample((U(2, 1, 3), np.array([2, 1, 0])), name="broadcast"),
                     Sample((np.array([1, 3]), np.array([3, -1])), name="int->float"),
                     Sample((np.array(1.5), np.array(2.0)), name="0d")],
            error_inputs=lambda: [ErrorInput((U(2), 2), exc=TypeError, match="ldexp: other must be a Tensor")]),
    OpEntry("frexp", pl.frexp, lambda x: tuple(torch.frexp(x)),
            lambda: [Sample((U(3, 4, lo=-50, hi=50),), name="2d"), Sample((np.array(0.3),), name="0d"),
                     Sample((U(0, 3),), name="empty"),
                     Sample((np.array([8.0, -0.75, 0.0, -0.0, 1e-30, 1e30]),), name="exact", gradcheck=False)],
            dtypes=("float32", "float64", "float16", "bfloat16"),
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), exc=TypeError, match="frexp: expected a floating")]),
    OpEntry("signbit", pl.signbit, torch.signbit,
            # (no NaN: the sign of a NaN converted between formats is the converter's choice)
            lambda: [Sample((np.array([-1.0, -0.0, 0.0, 2.0, -INF, INF]),), name="special"),
                     Sample((U(3, 4),), name="2d"), Sample((np.array(-0.5),), name="0d"),
                     Sample((U(0, 2),), name="empty"),
                     Sample((np.array([-3, 0, 4]),), name="int"), Sample((np.array([True, False]),), name="bool")],
            dtypes=("float32", "float64", "float16", "bfloat16"), grad=False, error_inputs=not_tensor("signbit")),
    OpEntry("heaviside", pl.heaviside, torch.heaviside,
            lambda: [Sample((np.array([-1.5, 0.0, 2.0, -0.0, NAN, INF]), np.array([0.5])), name="values-1"),
                     Sample((np.array([[0.0, 1.0], [-1.0, 0.0]]), np.array([[2.0, 3.0], [4.0, 5.0]])), name="same"),
                     Sample((U(3, 4), np.array(0.25)), name="0d-values"), Sample((U(0, 2), U(2)), name="empty"),
                     Sample((np.array([-2, 0, 3]), np.array([7])), name="int")],
            grad=False,
            error_inputs=lambda: [ErrorInput((U(2), 0.5), exc=TypeError, match="heaviside: values must be a Tensor"),
                                  ErrorInput((U(2), np.array([1])), exc=DtypeMismatch, match="heaviside: input and")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((np.array([12, -9, 0, 7, 0]), np.array([18, 6, 0, -3, 5])), name="signs-zeros"),
                       Sample((np.array([[4], [6]]), np.array([6, 9, 10])), name="broadcast"),
                       Sample((np.array(12), np.array([8, 3])), name="0d"),
                       Sample((np.array([4, 6], dtype=np.int32), np.array([6, 9], dtype=np.int32)), name="int32"),
                       Sample((np.zeros(0, dtype=np.int64), np.array([3])), name="empty")],
              grad=False, amp=False,
              error_inputs=lambda n=n: [ErrorInput((U(2), np.array([1, 2])), exc=TypeError,
                                                   match=f"{n}: expected integer tensors")])
      for n in ("gcd", "lcm")],
    OpEntry("nextafter", pl.nextafter, torch.nextafter,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1)), name="same"), Sample((U(2, 1, 3), U(4, 1, seed=1)),
                                                                             name="broadcast"),
                     Sample((np.array([0.0, 1.0, -1.0, INF, NAN]), np.array([1.0, 1.0, -INF, 0.0, 0.0])),
                            name="special", gradcheck=False),
                     Sample((np.array(1.0), U(0, seed=1)), name="empty")],
            gradgrad=False,  # finite differences see the one-ulp step (second derivative 0, as PyTorch's)
            error_inputs=lambda: [ErrorInput((np.array([1, 2]), np.array([1, 2])), exc=TypeError,
                                             match="nextafter: expected floating")]),
    # -- addbmm, addr ---------------------------------------------------------------------------------
    OpEntry("addbmm", pl.addbmm, torch.addbmm,
            lambda: [Sample((U(2, 3), U(4, 2, 5, seed=1), U(4, 5, 3, seed=2)), name="plain"),
                     Sample((U(3), U(2, 2, 4, seed=1), U(2, 4, 3, seed=2)), {"beta": 0.5, "alpha": -2.0},
                            "broadcast-scaled"),
                     # beta=0: PyTorch gives input a zero gradient, pylucid none (input is not used)
                     Sample((np.full((2, 2), NAN), U(3, 2, 1, seed=1), U(3, 1, 2, seed=2)), {"beta": 0}, "beta0",
                            grad_args=(1, 2)),
                     Sample((U(2, 3), U(0, 2, 5, seed=1), U(0, 5, 3, seed=2)), name="empty-batch"),
                     Sample((np.ones((2, 2), dtype=np.int64), np.ones((1, 2, 2), dtype=np.int64),
                             np.ones((1, 2, 2), dtype=np.int64)), {"beta": 0.6, "alpha": 2.2}, "int-truncated")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4, 2, 5), U(4, 4, 3)), exc=ShapeMismatch, match="bmm")]),
    OpEntry("addr", pl.addr, torch.addr,
            lambda: [Sample((U(2, 3), U(2, seed=1), U(3, seed=2)), name="plain"),
                     Sample((U(3), U(2, seed=1), U(3, seed=2)), {"beta": 2.0, "alpha": 0.5}, "broadcast-scaled"),
                     Sample((np.full((2, 3), NAN), U(2, seed=1), U(3, seed=2)), {"beta": 0}, "beta0",
                            grad_args=(1, 2)),
                     Sample((U(0, 3), U(0, seed=1), U(3, seed=2)), name="empty"),
                     Sample((np.zeros((2, 2), dtype=bool), np.array([True, False]), np.array([True, True])),
                            {"beta": 3, "alpha": 2}, "bool"),
                     Sample((np.array([[1, 2], [3, 4]]), np.array([1, 2]), np.array([3, 4])), {"beta": 2, "alpha": 3},
                            "int")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(2, 2), U(3)), exc=Exception,
                                             match="addr: vec1 and vec2 must be 1-d"),
                                  ErrorInput((np.ones((2, 2), dtype=np.int64), np.array([1, 2]), np.array([1, 2])),
                                             {"alpha": 0.5}, TypeError, "addr: for integer tensors")]),
]
