"""Element-wise catalogue: numerics, conventions and behaviours the generic op suite does not cover.

PyTorch 2.13 CPU is the oracle throughout. RuntimeWarnings are errors in this
module: NumPy must stay silent where PyTorch is.
"""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pylucid as pl

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def P(x, dtype=np.float64, requires_grad=False):
    return pl.tensor(np.asarray(x, dtype=dtype), requires_grad=requires_grad)


def T(x, dtype=torch.float64, requires_grad=False):
    return torch.tensor(np.asarray(x), dtype=dtype, requires_grad=requires_grad)


def npy(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy().astype(np.float64)
    if isinstance(t, pl.Tensor):
        return np.asarray(t.detach()._data, dtype=np.float64)
    return np.asarray(t, dtype=np.float64)


def close(a, b, atol=1e-12, rtol=1e-10):
    np.testing.assert_allclose(npy(a), npy(b), atol=atol, rtol=rtol, equal_nan=True)


def grad_pair(pl_fn, torch_fn, *xs, dtype=np.float64):
    """Forward values and input gradients of pylucid and PyTorch on the same float inputs."""
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    p = [P(x, dtype, True) for x in xs]
    t = [T(x, tdt, True) for x in xs]
    py, ty = pl_fn(*p), torch_fn(*t)
    # explicit ones as the cotangent (not .sum(): a sum of inf and -inf would itself warn)
    pg = pl.autograd.grad(py, p, pl.ones(py.shape, dtype=py.dtype), allow_unused=True)
    tg = torch.autograd.grad(ty, t, torch.ones_like(ty), allow_unused=True)
    return py, ty, pg, tg


# ---------------------------------------------------------------- numerics vs torch
@pytest.mark.parametrize("x", [[-1000.0, -100.0, -30.0, -1e-8, 0.0, 1e-8, 19.9, 20.1, 30.0, 100.0, 1000.0]])
@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 5.0), (0.5, 20.0)])
def test_softplus_stable_large_and_tiny(x, beta, threshold):
    py, ty, (pg,), (tg,) = grad_pair(lambda v: pl.softplus(v, beta, threshold),
                                     lambda v: F.softplus(v, beta, threshold), x)
    close(py, ty, atol=0, rtol=1e-12)
    close(pg, tg, atol=1e-300, rtol=1e-12)
    assert np.isfinite(npy(py)).all()


def test_softplus_float32_tail_is_not_flushed():
    x = [-80.0, -50.0]
    close(pl.softplus(P(x, np.float32)), F.softplus(T(x, torch.float32)), atol=0, rtol=1e-5)


@pytest.mark.parametrize("a,b", [([1000.0, -1000.0, 0.0, 1e-20, -800.0], [1000.0, -1000.0, -800.0, -1e-20, 700.0])])
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_stable(name, a, b):
    py, ty, pg, tg = grad_pair(getattr(pl, name), getattr(torch, name), a, b)
    close(py, ty, atol=0, rtol=1e-14)
    for g, h in zip(pg, tg):
        close(g, h, atol=1e-300, rtol=1e-12)


@pytest.mark.parametrize("name", ["log1p", "expm1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_expm1_tiny_and_large(name, dtype):
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    x = [1e-30, -1e-20, 1e-10, -1e-7, 0.0, 5.0] + ([20.0, 80.0] if name == "expm1" else [1e10, 1e30])
    py, ty = getattr(pl, name)(P(x, dtype)), getattr(torch, name)(T(x, tdt))
    close(py, ty, atol=0, rtol=2e-7 if dtype == np.float32 else 1e-15)
    # tiny inputs keep full relative precision (log(1 + x) would give 0)
    assert npy(py)[0] == pytest.approx(1e-30, rel=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_large_inputs_no_overflow_warning(dtype):
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    x = [-1e4, -1000.0, -89.0, -20.0, 0.0, 20.0, 89.0, 1000.0, 1e4]
    py, ty, (pg,), (tg,) = grad_pair(pl.sigmoid, torch.sigmoid, x, dtype=dtype)
    close(py, ty, atol=1e-30, rtol=1e-6)
    close(pg, tg, atol=1e-30, rtol=1e-6)
    close(pl.silu(P(x, dtype)), F.silu(T(x, tdt)), atol=1e-30, rtol=1e-6)
    close(pl.logsigmoid(P(x, dtype)), F.logsigmoid(T(x, tdt)), atol=1e-30, rtol=1e-6)


def test_pow_zero_zero_and_gradient():
    for a, b in [([0.0, 0.0, 0.0, 2.0], [0.0, 2.0, -1.0, 0.0])]:
        py, ty, pg, tg = grad_pair(pl.pow, torch.pow, a, b)
        close(py, ty)
        for g, h in zip(pg, tg):
            close(g, h)
    # scalar exponent 0 and scalar base 0
    x = P([0.0, 1.5], requires_grad=True)
    (g,) = pl.autograd.grad(pl.pow(x, 0).sum(), x)
    xt = T([0.0, 1.5], requires_grad=True)
    (h,) = torch.autograd.grad(torch.pow(xt, 0).sum(), xt)
    close(g, h)


def test_pow_zeros_sample_graph_formula_is_silent():
    # the graph-mode formula used to compute 0 * -inf inside Mul (a warning, made an error here)
    a, b = P([0.0, 0.0, 2.0], requires_grad=True), P([0.0, 2.0, 0.0], requires_grad=True)
    y = pl.pow(a, b).sum()
    ga, gb = pl.autograd.grad(y, [a, b], create_graph=True)
    close(ga, [0.0, 0.0, 0.0])
    close(gb, [0.0, 0.0, np.log(2.0)])


@pytest.mark.parametrize("inner", ["log", "sqrt", "reciprocal"])
def test_where_with_inf_nan_in_inactive_branch(inner):
    x = [-1.0, 0.0, 4.0]
    py, ty, (pg,), (tg,) = grad_pair(lambda v: pl.where(v > 0, getattr(pl, inner)(v), 0.0),
                                     lambda v: torch.where(v > 0, getattr(torch, inner)(v), 0.0), x)
    close(py, ty)
    close(pg, tg)  # PyTorch's answer, NaN included where it has one


@pytest.mark.parametrize("name,torch_fn", [
    ("floor_divide", torch.floor_divide), ("remainder", torch.remainder), ("fmod", torch.fmod),
    ("trunc_divide", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
])
def test_integer_division_by_zero_raises(name, torch_fn):
    a, b = np.array([5, -5]), np.array([2, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # PyTorch raises RuntimeError("ZeroDivisionError")
        torch_fn(torch.tensor(a), torch.tensor(b))
    with pytest.raises(ZeroDivisionError, match=f"{name}: integer division by zero"):
        getattr(pl, name)(pl.tensor(a), pl.tensor(b))
    with pytest.raises(ZeroDivisionError):
        getattr(pl, name)(pl.tensor(a), 0)


def test_true_division_of_ints_by_zero_gives_inf_nan():
    a, b = np.array([1, -1, 0]), np.array([0, 0, 0])
    out = pl.div(pl.tensor(a), pl.tensor(b))
    ref = torch.div(torch.tensor(a), torch.tensor(b))
    assert out.dtype == pl.float32 and ref.dtype == torch.float32
    close(out, ref)


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_div_rounding_modes(mode, dtype):
    a = np.array([7, -7, 7, -7, 0, 9], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, 3], dtype=dtype)
    out = pl.div(pl.tensor(a), pl.tensor(b), rounding_mode=mode)
    ref = torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode=mode)
    assert out.dtype.name == str(ref.dtype).removeprefix("torch.")
    close(out, ref)
    out_s = pl.div(pl.tensor(a), -2.0, rounding_mode=mode)
    ref_s = torch.div(torch.from_numpy(a), -2.0, rounding_mode=mode)
    assert out_s.dtype.name == str(ref_s.dtype).removeprefix("torch.")
    close(out_s, ref_s)
    if mode is not None or dtype != "int64":  # int tensor / int scalar: see the xfail test below
        out_i = pl.div(pl.tensor(a), -2, rounding_mode=mode)
        ref_i = torch.div(torch.from_numpy(a), -2, rounding_mode=mode)
        assert out_i.dtype.name == str(ref_i.dtype).removeprefix("torch.")
        close(out_i, ref_i)
    with pytest.raises(ValueError, match="div: rounding_mode"):
        pl.div(pl.tensor(a), pl.tensor(b), rounding_mode="round")


def test_div_int_tensor_by_int_scalar_is_default_float():
    assert pl.div(pl.tensor([1, 2]), 2).dtype == pl.float32
    assert pl.reciprocal(pl.tensor([1, 2])).dtype == pl.float32


def test_gelu_tanh_vs_exact_float32():
    x = np.linspace(-8, 8, 401).astype(np.float32)
    for approx in ("none", "tanh"):
        py, ty, (pg,), (tg,) = grad_pair(lambda v: pl.gelu(v, approximate=approx),
                                         lambda v: F.gelu(v, approximate=approx), x, dtype=np.float32)
        # float32 tolerance; in the far negative tail PyTorch's float32 erf rounds
        # 1 + erf(x/sqrt 2) to 0 a little earlier than scipy's kernel
        close(py, ty, atol=1e-5, rtol=1e-5)
        close(pg, tg, atol=1e-5, rtol=1e-5)
    exact, approx = npy(pl.gelu(P(x, np.float32))), npy(pl.gelu(P(x, np.float32), approximate="tanh"))
    assert np.abs(exact - approx).max() < 1e-3  # the approximation is close but not equal
    assert np.abs(exact - approx).max() > 1e-5


def test_hypot_no_overflow():
    for dtype, big in ((np.float64, 1e200), (np.float32, 1e30)):
        close(pl.hypot(P([big, 3.0], dtype), P([big, 4.0], dtype)), [big * np.sqrt(2), 5.0], rtol=1e-6)


# ---------------------------------------------------------------- no NumPy warnings where PyTorch is silent
@pytest.mark.parametrize("fn,x", [
    (pl.log, [0.0, -1.0]), (pl.sqrt, [-1.0, 0.0]), (pl.log2, [0.0, -1.0]), (pl.log10, [0.0, -1.0]),
    (pl.log1p, [-1.0, -2.0]), (pl.arcsin, [2.0, 1.0]), (pl.arccos, [2.0, -1.0]), (pl.arccosh, [0.0, 1.0]),
    (pl.arctanh, [1.0, 2.0]), (pl.rsqrt, [0.0, -1.0]), (pl.reciprocal, [0.0, 1.0]), (pl.erfinv, [1.0, 2.0]),
    (pl.logit, [0.0, 1.0, 2.0]), (pl.exp, [1000.0, 0.0]), (pl.exp2, [2000.0]), (pl.expm1, [1000.0]),
    (pl.sinh, [1000.0]), (pl.cosh, [-1000.0]), (pl.sigmoid, [-1e5, 1e5]), (pl.softplus, [-1e5, 1e5]),
    (pl.elu, [1000.0, -1000.0]), (pl.mish, [-1e5, 1e5]), (pl.silu, [-1e5, 1e5]), (pl.tan, [1e30]),
])
def test_domain_edges_are_silent_forward_and_backward(fn, x):
    name = fn.__name__
    tfn = {"arcsin": torch.asin, "arccos": torch.acos, "arccosh": torch.acosh, "arctanh": torch.atanh,
           "elu": F.elu, "mish": F.mish, "silu": F.silu, "softplus": F.softplus}.get(name, getattr(torch, name, None))
    py, ty, (pg,), (tg,) = grad_pair(fn, tfn, x)
    close(py, ty, rtol=1e-12)
    close(pg, tg, rtol=1e-12)


def test_zero_over_zero_is_silent():
    a = P([0.0, 1.0], requires_grad=True)
    b = P([0.0, 0.0], requires_grad=True)
    y = pl.div(a, b)
    ga, gb = pl.autograd.grad(y.sum(), [a, b])
    at, bt = T([0.0, 1.0], requires_grad=True), T([0.0, 0.0], requires_grad=True)
    ht = torch.autograd.grad((at / bt).sum(), [at, bt])
    close(y, at / bt)
    close(ga, ht[0])
    close(gb, ht[1])


# ---------------------------------------------------------------- non-smooth points follow PyTorch
def test_maximum_minimum_ties_split_gradient_equally():
    a, b = [1.0, 2.0, 3.0, 5.0], [1.0, 4.0, 3.0, 0.0]
    for name in ("maximum", "minimum"):
        _, _, pg, tg = grad_pair(getattr(pl, name), getattr(torch, name), a, b)
        close(pg[0], tg[0])
        close(pg[1], tg[1])
        assert npy(pg[0])[0] == 0.5 and npy(pg[1])[0] == 0.5
    # against a broadcast scalar tensor: the tied entries still split
    x = P([1.0, 2.0], requires_grad=True)
    (g,) = pl.autograd.grad(pl.maximum(x, 1.0).sum(), x)
    close(g, [0.5, 1.0])


def test_clamp_boundary_passes_gradient_hardtanh_does_not():
    x = [-1.0, -0.5, 1.0, 2.0]
    _, _, (gc,), (tc,) = grad_pair(lambda v: pl.clamp(v, -1.0, 1.0), lambda v: torch.clamp(v, -1.0, 1.0), x)
    close(gc, tc)
    close(gc, [1.0, 1.0, 1.0, 0.0])
    _, _, (gh,), (th,) = grad_pair(pl.hardtanh, F.hardtanh, x)
    close(gh, th)
    close(gh, [0.0, 1.0, 0.0, 0.0])
    _, _, (gr,), (tr,) = grad_pair(pl.relu6, F.relu6, [0.0, 6.0, 3.0])
    close(gr, tr)


@pytest.mark.parametrize("name,tfn", [("relu", torch.relu), ("abs", torch.abs), ("leaky_relu", F.leaky_relu),
                                      ("elu", F.elu), ("selu", F.selu), ("hardswish", F.hardswish),
                                      ("hardsigmoid", F.hardsigmoid), ("sign", torch.sign)])
def test_kinks_match_pytorch(name, tfn):
    x = [0.0, -3.0, 3.0, -1.0, 1.0]
    py, ty, (pg,), (tg,) = grad_pair(getattr(pl, name), tfn, x)
    close(py, ty)
    close(pg, tg, rtol=1e-7)  # PyTorch's hardsigmoid slope is float(1/6) even in float64


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign"])
def test_piecewise_constant_zero_gradient(name):
    _, _, (pg,), (tg,) = grad_pair(getattr(pl, name), getattr(torch, name), [-1.5, 0.3, 2.5])
    close(pg, tg)
    close(pg, [0.0, 0.0, 0.0])


def test_clamp_tensor_bounds_gradients():
    x, lo, hi = [-2.0, 0.0, 2.0, 0.5], [-1.0, 0.5, -1.0, 1.0], [1.0, 1.0, 1.0, 0.0]
    _, _, pg, tg = grad_pair(pl.clamp, torch.clamp, x, lo, hi)
    for g, h in zip(pg, tg):
        close(g, h)


# ---------------------------------------------------------------- in-place variants
@pytest.mark.parametrize("name,args", [("relu_", ()), ("sigmoid_", ()), ("tanh_", ()), ("clamp_", (-0.5, 0.5)),
                                       ("exp_", ()), ("floor_", ()), ("expm1_", ()), ("lerp_", None),
                                       ("nan_to_num_", ()), ("atan2_", None), ("fmod_", (0.7,))])
def test_inplace_variants(name, args):
    x0 = np.array([-1.5, -0.2, 0.3, 2.0])
    if args is None:
        args = (P([1.0, 2.0, 3.0, 4.0]), 0.25) if name == "lerp_" else (P([1.0, -2.0, 3.0, -4.0]),)
        targs = tuple(T(npy(a)) if isinstance(a, pl.Tensor) else a for a in args)
    else:
        targs = args
    leaf = P(x0, requires_grad=True)
    x = leaf * 1.0
    version = x._version[0]
    out = getattr(x, name)(*args)
    assert out is x and x._version[0] == version + 1
    tleaf = T(x0, requires_grad=True)
    tx = tleaf * 1.0
    getattr(tx, name)(*targs)
    close(x, tx)
    (g,) = pl.autograd.grad((x * P([1.0, 2.0, 3.0, 4.0])).sum(), leaf)
    (h,) = torch.autograd.grad((tx * T([1.0, 2.0, 3.0, 4.0])).sum(), tleaf)
    close(g, h)


def test_inplace_refused_on_leaf_and_functional_forms():
    leaf = P([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="relu_: a leaf tensor"):
        leaf.relu_()
    y = P([1.0, -1.0])
    assert pl.relu_(y) is y
    close(y, [1.0, 0.0])
    pl.sigmoid_(y)
    close(y, [1 / (1 + np.exp(-1.0)), 0.5])


# ---------------------------------------------------------------- API surface
def test_aliases_and_methods():
    assert pl.asin is pl.arcsin and pl.acos is pl.arccos and pl.atan is pl.arctan
    assert pl.asinh is pl.arcsinh and pl.acosh is pl.arccosh and pl.atanh is pl.arctanh
    assert pl.clip is pl.clamp and pl.arctan2 is pl.atan2 and pl.negative is pl.neg and pl.fix is pl.trunc
    x = P([0.25, 0.5])
    for m in ("exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "arcsin", "acos", "atan", "sinh", "cosh",
              "tanh", "asinh", "atanh", "sigmoid", "logit", "relu", "erf", "erfinv", "reciprocal", "rsqrt", "floor",
              "ceil", "round", "trunc", "frac", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num"):
        close(getattr(x, m)(), getattr(torch.tensor([0.25, 0.5], dtype=torch.float64), m)())
    for m in ("maximum", "minimum", "fmax", "fmin", "fmod", "atan2", "hypot", "copysign", "logaddexp",
              "logaddexp2", "float_power", "isclose"):
        close(getattr(x, m)(P([0.3, 0.4])), getattr(T([0.25, 0.5]), m)(T([0.3, 0.4])))
    close(x.clamp(min=0.3), T([0.25, 0.5]).clamp(min=0.3))
    close(x.clip(max=0.3), T([0.25, 0.5]).clip(max=0.3))
    close(round(P([1.25, 2.5])), torch.round(T([1.25, 2.5])))
    close(P([1, 8], np.int64) << 2, torch.tensor([1, 8]) << 2)
    close(P([1, 8], np.int64) >> 1, torch.tensor([1, 8]) >> 1)



def test_operators_reflected_and_unary():
    a, b = np.array([1, 6, -3]), np.array([2, 3, 1])
    pa, pb, ta, tb = pl.tensor(a), pl.tensor(b), torch.tensor(a), torch.tensor(b)
    for op in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: x == y, lambda x, y: x != y,
               lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y):
        close(op(pa, pb), op(ta, tb))
        close(op(5, pa), op(5, ta))  # the reflected form (or the swapped comparison) with a Python number first
        close(op(pa, 5), op(ta, 5))
    s = pl.tensor(np.array([1, 2])), torch.tensor(np.array([1, 2]))
    close(1 << s[0], 1 << s[1])
    close(64 >> s[0], 64 >> s[1])
    close(~pa, ~ta)
    close(-pa, -ta)
    x = P([0.5, -2.0])
    assert +x is x and x.positive() is x and pl.positive(x) is x
    assert hash(x) != hash(P([0.5, -2.0])) and {x: 1}[x] == 1  # identity hash: == is element-wise
    close(round(P([1.26, -2.5])), torch.round(T([1.26, -2.5])))
    close(round(P([1.26, -2.55]), 1), torch.round(T([1.26, -2.55]), decimals=1))


def test_special_namespace():
    for name in pl.special.__all__:
        assert hasattr(torch.special, name), name
        assert callable(getattr(pl.special, name)), name
    # the functions both namespaces have are the same objects; the torch.special-only ones stay out of pylucid
    for name in ("erf", "erfinv", "exp2", "expm1", "log1p", "round", "erfc", "digamma", "polygamma", "i0", "sinc",
                 "xlogy", "softmax", "log_softmax", "logsumexp", "logit"):
        assert getattr(pl.special, name) is getattr(pl, name), name
    for name in ("gammaln", "psi", "i1", "i0e", "i1e", "entr", "ndtr", "log_ndtr", "ndtri", "xlog1py", "multigammaln",
                 "expit"):
        assert not hasattr(pl, name) and not hasattr(torch, name), name
    x = [0.3, 0.7, 1.5]
    close(pl.special.psi(P(x)), torch.special.psi(T(x)))
    close(pl.special.gammaln(P(x)), torch.special.gammaln(T(x)))
    close(pl.special.expit(P(x)), torch.special.expit(T(x)))
    close(P(x).polygamma(2), T(x).polygamma(2))
    close(pl.special.round(P([0.5, 1.5]), decimals=0), torch.special.round(T([0.5, 1.5])))

def test_float_power_celu_and_composites():
    out = pl.float_power(P([2.0, 3.0], np.float32), 2)
    assert out.dtype == pl.float64
    close(out, torch.float_power(T([2.0, 3.0], torch.float32), 2))
    close(pl.float_power(2, P([1.0, 3.0], np.float32)), torch.float_power(2, T([1.0, 3.0], torch.float32)))
    x = [-2.0, -0.3, 0.0, 0.7, 3.0]
    for pfn, tfn in [(lambda v: pl.celu(v, 2.0), lambda v: F.celu(v, 2.0)), (pl.logsigmoid, F.logsigmoid),
                     (pl.softsign, F.softsign), (pl.tanhshrink, F.tanhshrink), (pl.softshrink, F.softshrink),
                     (pl.hardshrink, F.hardshrink), (lambda v: pl.threshold(v, 0.5, -1.0),
                                                      lambda v: F.threshold(v, 0.5, -1.0))]:
        py, ty, (pg,), (tg,) = grad_pair(pfn, tfn, x)
        close(py, ty)
        close(pg, tg)


def test_allclose_equal():
    a, b = P([1.0, 2.0]), P([1.0, 2.0 + 1e-9])
    assert pl.allclose(a, b) is True and pl.allclose(a, P([1.0, 2.1])) is False
    assert pl.allclose(P([np.nan]), P([np.nan])) is False and pl.allclose(P([np.nan]), P([np.nan]), equal_nan=True)
    assert pl.equal(a, P([1.0, 2.0])) is True and pl.equal(a, b) is False and pl.equal(a, P([1.0])) is False
    assert a.allclose(b) and a.equal(a)


def test_integer_and_bool_inputs():
    i = np.array([-2, 0, 3])
    for name in ("relu", "floor", "ceil", "round", "trunc", "isnan", "isfinite", "isposinf"):
        out, ref = getattr(pl, name)(pl.tensor(i)), getattr(torch, name)(torch.tensor(i))
        assert out.dtype.name == str(ref.dtype).removeprefix("torch.")
        close(out, ref)
    for name in ("sigmoid", "tanh", "exp2", "erf", "reciprocal", "arcsinh"):
        out = getattr(pl, name)(pl.tensor(i))
        assert out.dtype == pl.float32, name
    out = pl.clamp(pl.tensor(i), min=0.5)
    ref = torch.clamp(torch.tensor(i), min=0.5)
    assert out.dtype == pl.float32 and ref.dtype == torch.float32
    close(out, ref)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "relu", "gelu", "silu", "erf", "exp2", "expm1", "log1p", "tan",
                                  "softplus", "mish", "elu", "hardswish", "cbrt", "rsqrt", "erfinv", "round"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_forward(name, dtype):
    x = np.array([0.1, 0.25, 0.5, 0.75], dtype=np.float32)
    out = getattr(pl, name)(pl.tensor(x).to(getattr(pl, dtype)))
    assert out.dtype == getattr(pl, dtype)
    ref = getattr(pl, name)(pl.tensor(x))
    close(out.to(pl.float32), ref, atol=2e-2, rtol=2e-2)


def test_autocast_policies():
    x = P([0.5, 1.0], np.float32)
    with pl.amp.autocast("cpu", dtype=pl.bfloat16):
        assert pl.gelu(x).dtype == pl.float32  # ForceFP32
        assert pl.sigmoid(x).dtype == pl.bfloat16  # Promote
        assert pl.relu(x).dtype == pl.float32  # KeepInput


_CSV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "reference", "op_policies.csv")
# the reference table names some ops differently from PyTorch (and pylucid's registry)
_TABLE_NAMES = {"hard_sigmoid": "hardsigmoid", "hard_swish": "hardswish", "cube_root": "cbrt", "gelu_exact": "gelu"}


def test_renamed_ops_follow_the_reference_table():
    if not os.path.exists(_CSV):
        pytest.skip("shared/reference/op_policies.csv is not beside this checkout")
    with open(_CSV) as f:
        rows = {r["op"]: r for r in csv.DictReader(f)}
    for table_name, name in _TABLE_NAMES.items():
        row, sch = rows[table_name], pl.ops.schema(name)
        assert sch.amp_policy.value == row["amp_policy"], name
        if row["saves_output"] == "true":
            assert sch.saves_output, name
        if row["saves_input"] == "true":
            assert sch.saves_input, name
        if row["real_valued"] == "true":
            assert sch.real_valued, name


# ---------------------------------------------------------------- bad inputs and non-finite values, against PyTorch
@pytest.mark.parametrize("call", [
    lambda lib: lib.add(lib.tensor([1, 2]), lib.tensor([3, 4]), alpha=2.0),
    lambda lib: lib.sub(lib.tensor([1, 2]), lib.tensor([3, 4]), alpha=0.5),
    lambda lib: lib.rsub(lib.tensor([True, False]), lib.tensor([1.0, 2.0]), alpha=2.0),
    lambda lib: lib.addcdiv(lib.tensor([1, 2]), lib.tensor([3, 4]), lib.tensor([1, 2])),
    lambda lib: lib.deg2rad(lib.tensor([1 + 1j])),
    lambda lib: lib.ones(2, 3).sum_to_size(2, 4),
    lambda lib: lib.ones(0, 3).sum_to_size(2, 3),
    lambda lib: lib.ones(2, 3).sum_to_size([1.0, 2.0]),
    lambda lib: lib.addr(lib.zeros(0), lib.ones(2), lib.ones(3), beta=0),
    lambda lib: lib.addr(lib.zeros(2, 3, dtype=lib.bool), lib.ones(2, dtype=lib.bool), lib.ones(3, dtype=lib.bool),
                         alpha="x"),
    lambda lib: lib.addbmm(lib.zeros(2, 2, dtype=lib.bool), lib.ones(1, 2, 3, dtype=lib.bool),
                           lib.ones(1, 3, 2, dtype=lib.bool)),
    lambda lib: lib.zeros(2).fill_(None),
    lambda lib: lib.isclose(lib.ones(2), lib.ones(2), atol=float("nan")),
    lambda lib: lib.polar(lib.tensor([1, 2]), lib.tensor([0, 1])),
    lambda lib: lib.addcmul(*[lib.tensor([1, 2], dtype=lib.uint8)] * 3, value=-1.5),
    lambda lib: lib.fill(lib.tensor([1, 2], dtype=lib.uint8), -1.0),
])
def test_refused_as_in_torch(call):
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        call(torch)
    with pytest.raises((TypeError, ValueError, pl.LucidError)):
        call(pl)


@pytest.mark.parametrize("call", [
    lambda lib: lib.maximum(lib.tensor([1, 2, 3]), lib.tensor(1.5)),
    lambda lib: lib.atan2(lib.tensor([1, 2, 3]), lib.tensor(1.5)),
    lambda lib: lib.ldexp(lib.ones(3, dtype=lib.bfloat16), lib.tensor([1, 2, 3])),
    lambda lib: lib.div(lib.tensor([1.0, -1.0, 7.0]), lib.tensor([-float("inf"), float("inf"), 0.1]),
                        rounding_mode="floor"),
    lambda lib: lib.angle(lib.tensor([float("nan"), float("inf"), -float("inf"), -1.0])),
    lambda lib: lib.addr(lib.zeros(2, 3, dtype=lib.float64), lib.ones(2), lib.ones(3), beta=0),
    lambda lib: lib.addbmm(lib.ones(2, 3, dtype=lib.int32), lib.ones(4, 2, 5, dtype=lib.int32),
                           lib.ones(4, 5, 3, dtype=lib.int32)),
    lambda lib: lib.addbmm(lib.full((2, 3), 2), lib.ones(0, 2, 5), lib.ones(0, 5, 3), beta=3),
    lambda lib: lib.addbmm(lib.full((2, 3), float("nan")), lib.ones(0, 2, 5), lib.ones(0, 5, 3), beta=0),
])
def test_values_and_dtypes_as_torch(call):
    """(Cases the fuzzer found wrong: weak float scalars with integer tensors, ldexp's half dtype, floor division by
    an infinity, angle of +inf, addr/addbmm dtypes with beta=0 or no batches.)"""
    t, p = call(torch), call(pl)
    assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(p.to(pl.float64).numpy() if not p.dtype.is_complex else p.numpy(),
                               t.double().numpy(), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("fn", [pl.sin, pl.cos, pl.tan, pl.frac, lambda x: pl.dist(x, x), lambda x: pl.trapezoid(x),
                                lambda x: pl.lerp(x, x.flip(0), 0.3), lambda x: x.to(pl.int64),
                                lambda x: pl.lt(x.to(pl.bfloat16), 1.0)])
def test_no_numpy_warnings_where_the_answer_is_nan(fn):
    import warnings

    x = pl.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fn(x)


# ---------------------------------------------------------------- creation functions
@pytest.mark.parametrize("args,kwargs", [((0.0, -8.000001, -4.0), {}), ((0.5, 5.7, 1.5), {}), ((1.5,), {}),
                                         ((-0.5, 3.2, 1), {})])
def test_integer_arange_truncates_its_bounds_as_torch(args, kwargs):
    assert pl.arange(*args, dtype=pl.int64).tolist() == torch.arange(*args, dtype=torch.int64).tolist()


@pytest.mark.parametrize("args", [(0, 1.2, 4), (0.5, 2.2, 4, 3.0), (-1.7, 2.9, 5, 2.5), (1.9, -0.5, 3)])
def test_integer_logspace_truncates_its_exponents_as_torch(args):
    start, end, steps, *base = args
    kw = {"base": base[0]} if base else {}
    assert (pl.logspace(start, end, steps, dtype=pl.int64, **kw).tolist()
            == torch.logspace(start, end, steps, dtype=torch.int64, **kw).tolist())


@pytest.mark.parametrize("call,exc", [
    (lambda lib: lib.zeros(2**62), pl.LucidError), (lambda lib: lib.arange(0, float("nan")), ValueError),
    (lambda lib: lib.arange(0, float("inf")), ValueError), (lambda lib: lib.arange("a"), TypeError),
    (lambda lib: lib.arange(0, 5, 0.5, dtype=lib.int64), ValueError), (lambda lib: lib.full(2.5, 1.0), TypeError),
    (lambda lib: lib.full((2,), "a"), TypeError), (lambda lib: lib.eye(2.5), TypeError),
    (lambda lib: lib.linspace(0, 1, 2.5), TypeError), (lambda lib: lib.logspace(0, 2, -3), ValueError),
    (lambda lib: lib.tensor([[1, 2], [3]]), ValueError), (lambda lib: lib.rand(-1), ValueError),
])
def test_creation_arguments_are_checked(call, exc):
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        call(torch)
    with pytest.raises(exc) as e:
        call(pl)
    assert not isinstance(e.value, MemoryError)


def test_unsigned_fill_and_scale_wrap_negative_ints_as_torch():
    x = np.array([1, 2], dtype=np.uint8)
    assert pl.fill(pl.tensor(x), -1).tolist() == torch.fill(torch.tensor(x), -1).tolist()
    assert pl.addcmul(*[pl.tensor(x)] * 3, value=-2).tolist() == torch.addcmul(*[torch.tensor(x)] * 3,
                                                                                 value=-2).tolist()
