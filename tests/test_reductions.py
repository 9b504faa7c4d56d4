"""Reductions, scans, sorting and special functions: numerics and behaviour the generic suite does not cover,
and hypothesis properties of reductions over random axes against NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pylucid as pl
import pylucid.special as S

INF = float("inf")


def _pair(a, requires_grad=True):
    a = np.asarray(a, dtype=np.float64)
    return pl.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def _close(p, t, atol=1e-10):
    np.testing.assert_allclose(np.asarray(p.detach()._data, dtype=np.float64), t.detach().numpy().astype(np.float64),
                               atol=atol, rtol=1e-7, equal_nan=True)


# ------------------------------------------------------------------------------------------ numerics
@pytest.mark.parametrize("row", [[1e4, 1e4, 1e4], [-1e4, -1e4, 0.0], [1e4, -1e4, 0.5], [-INF, 0.0, 1.0],
                                 [-INF, -INF, 3.0]])
@pytest.mark.parametrize("fn", ["log_softmax", "logsumexp", "softmax"])
def test_softmax_family_huge_logits(fn, row):
    x, xt = _pair([row, row[::-1]])
    y = getattr(pl, fn)(x, dim=1)
    yt = getattr(torch, fn)(xt, dim=1)
    _close(y, yt)
    assert not np.isnan(y._data).any()
    w = np.arange(y.numel(), dtype=np.float64).reshape(y.shape)
    (y * pl.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    _close(x.grad, xt.grad)
    assert np.isfinite(x.grad._data).all()


def test_logsumexp_all_neg_inf_matches_torch():
    x, xt = _pair([-INF, -INF])
    _close(pl.logsumexp(x, 0), torch.logsumexp(xt, 0))


@pytest.mark.parametrize("p", [2, "fro"])
def test_norm_gradient_zero_vector_is_zero(p):
    for fn in (pl.norm, pl.ops.reduction.norm):  # the public torch.norm front end and the registered op
        x, xt = _pair(np.zeros(4))
        fn(x, p=p).backward()
        torch.norm(xt, p=p).backward()
        _close(x.grad, xt.grad)
        assert not np.isnan(x.grad._data).any()


def test_std_gradient_nan_only_where_torch():
    for data, kw in [(np.full((2, 3), 1.5), {"dim": 1}), (np.array([[1.0, 2.0, 4.0]]), {"dim": 0}),
                     (np.array([[1.0, 1.0], [0.0, 3.0]]), {"dim": 1, "correction": 0})]:
        x, xt = _pair(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pl.std(x, **kw).sum().backward()
            torch.std(xt, **kw).sum().backward()
        np.testing.assert_array_equal(np.isnan(x.grad._data), np.isnan(xt.grad.numpy()))
        _close(x.grad, xt.grad)


@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0, 1.5], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
def test_prod_gradient_with_zeros(data):
    x, xt = _pair(data)
    (g,) = pl.autograd.grad(pl.prod(x), x, create_graph=True)
    (gt,) = torch.autograd.grad(torch.prod(xt), xt, create_graph=True)
    _close(g, gt)
    w = np.linspace(0.5, 1.5, len(data))
    (gg,) = pl.autograd.grad((g * pl.tensor(w)).sum(), x)
    (ggt,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), xt)
    _close(gg, ggt)


def test_cumprod_gradgrad_with_zeros():
    x, xt = _pair([1.5, 0.0, 2.0, 0.0, 3.0])
    (g,) = pl.autograd.grad(pl.cumprod(x, 0).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad(torch.cumprod(xt, 0).sum(), xt, create_graph=True)
    _close(g, gt)
    (gg,) = pl.autograd.grad(g.sum(), x)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    _close(gg, ggt)


@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (None, False)])
def test_prod_gradgrad_with_zeros_along_a_dim(dim, keepdim):
    data = np.array([[2.0, 0.0, 3.0, 1.5], [0.0, 0.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    x, xt = _pair(data)
    y = pl.prod(x) if dim is None else pl.prod(x, dim, keepdim)
    yt = torch.prod(xt) if dim is None else torch.prod(xt, dim, keepdim)
    w = np.linspace(0.5, 1.5, yt.numel()).reshape(tuple(yt.shape))
    (g,) = pl.autograd.grad((y * pl.tensor(w)).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((yt * torch.tensor(w)).sum(), xt, create_graph=True)
    _close(g, gt)
    (gg,) = pl.autograd.grad((g * g).sum(), x)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    _close(gg, ggt)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_gradient_huge_entries_and_signed_zero_grads(dim):
    # first order runs the O(n) log-space form: positive, negative and zero upstream gradients
    data = np.array([[1e4, -1e4, 0.5, 7.0, 3.0, 2.0], [-1000.0, 0.0, -1000.0, 5.0, 1.0, -2.0]])
    w = np.array([[1.0, 0.0, -2.0, 0.5, 0.0, -1.0], [0.0, 3.0, -1.0, 0.0, 2.0, 1.0]])
    x, xt = _pair(data)
    (pl.logcumsumexp(x, dim) * pl.tensor(w)).sum().backward()
    (torch.logcumsumexp(xt, dim) * torch.tensor(w)).sum().backward()
    _close(x.grad, xt.grad, atol=1e-9)


def test_logcumsumexp_gradgrad_through_the_upstream_gradient():
    # under create_graph the formula stays differentiable in g too, zero entries of g included. PyTorch's own
    # double backward gives NaN there, so the reference is the explicit sum_{i>=k} g_i exp(x_k - y_i) in torch
    x, xt = _pair(np.random.default_rng(0).standard_normal((2, 5)))
    w, wt = _pair([[1.0, 0.0, -2.0, 0.5, 0.0], [0.0, 3.0, -1.0, 0.0, 2.0]])
    (g,) = pl.autograd.grad((pl.logcumsumexp(x, 1) * w).sum(), x, create_graph=True)
    yt = torch.logcumsumexp(xt, 1)
    upper = torch.triu(torch.ones(5, 5, dtype=torch.bool))
    gt = (torch.exp(torch.where(upper, xt[:, :, None] - yt[:, None, :], -INF)) * wt[:, None, :]).sum(-1)
    _close(g, gt)
    gx, gw = pl.autograd.grad((g * g).sum(), (x, w))
    gxt, gwt = torch.autograd.grad((gt * gt).sum(), (xt, wt))
    _close(gx, gxt)
    _close(gw, gwt)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan_inplace_methods(name):
    for data, dt in (([[1.0, 2.0], [3.0, 4.0]], None), ([[1, 2], [3, 4]], "int32")):
        x = pl.tensor(data, dtype=getattr(pl, dt) if dt else None)
        xt = torch.tensor(data, dtype=getattr(torch, dt) if dt else None)
        assert getattr(x, name + "_")(1) is x
        getattr(xt, name + "_")(1)
        assert x.tolist() == xt.tolist() and str(x.dtype).split(".")[-1] == str(xt.dtype).split(".")[-1]


def test_methods_are_the_declared_functions():
    names = ("sum mean amax amin prod argmax argmin var std logsumexp all any count_nonzero nansum nanmean median "
             "nanmedian mode cumsum cumprod cummax cummin logcumsumexp diff sort argsort msort topk kthvalue unique "
             "unique_consecutive").split()
    for n in names:
        assert getattr(pl.Tensor, n) is getattr(pl, n), n
        assert pl.ops.declaration(n).fn is getattr(pl, n), n
    assert pl.special.logsumexp is pl.logsumexp is pl.ops.declaration("logsumexp", "pylucid.special").fn


def test_median_lower_middle_and_ties():
    x = pl.tensor([4.0, 1.0, 3.0, 2.0])
    assert pl.median(x).item() == 2.0 == torch.median(torch.tensor([4.0, 1.0, 3.0, 2.0])).item()
    x, xt = _pair([1.0, 2.0, 2.0, 1.0])
    pl.median(x).backward()
    torch.median(xt).backward()
    _close(x.grad, xt.grad)


def test_mode_ties_as_torch():
    data = np.array([[2.0, 2.0, 1.0, 1.0, 5.0], [0.0, 7.0, 7.0, 0.0, 0.0], [3.0, 1.0, 3.0, 1.0, 2.0]])
    v, i = pl.mode(pl.tensor(data), 1)
    vt, it = torch.mode(torch.tensor(data), 1)
    np.testing.assert_array_equal(v._data, vt.numpy())
    np.testing.assert_array_equal(i._data, it.numpy())


@pytest.mark.parametrize("correction", [2, 3, 5])
def test_var_correction_larger_than_n(correction):
    data = np.array([[1.0, 2.0], [3.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.var(torch.tensor(data), dim=1, correction=correction)
    _close(pl.var(pl.tensor(data), dim=1, correction=correction), ref)


def test_cumsum_int32_promotes_to_int64():
    x = pl.tensor([2**31 - 1, 1, 1], dtype=pl.int32)
    y = pl.cumsum(x, 0)
    assert y.dtype == pl.int64
    assert y.tolist() == torch.cumsum(torch.tensor([2**31 - 1, 1, 1], dtype=torch.int32), 0).tolist()


def test_sum_prod_int_bool_promote_to_int64():
    for a in (np.array([1, 2], dtype=np.int32), np.array([True, True])):
        assert pl.prod(pl.tensor(a)).dtype == pl.int64
        assert pl.sum(pl.tensor(a)).dtype == pl.int64


def test_max_with_indices_vs_max_over_one_dim():
    x = pl.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    v, i = pl.max_with_indices(x, 1)
    assert i.tolist() == [1]
    v.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0]]  # the indexed form sends the gradient to one index
    x.grad = None
    v, i = pl.max(x, 1)
    assert i.tolist() == [1]
    v.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5]]  # the documented max shares it among ties


_MINMAX_DATA = np.array([[[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, -1.0, 0.5], [np.nan, 1.0, 4.0, 4.0]],
                         [[0.0, -3.0, 5.0, 5.0], [7.0, 1.0, 1.0, 7.0], [-1.0, -1.0, -1.0, -1.0]]])


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_one_int_dim_is_torch_named_tuple(name, dim, keepdim):
    x, xt = _pair(_MINMAX_DATA)
    for out in (getattr(pl, name)(x, dim, keepdim), getattr(x, name)(dim=dim, keepdim=keepdim)):
        ref = getattr(torch, name)(xt, dim, keepdim)
        assert type(out).__name__ == "ValuesIndices" and out._fields == ("values", "indices")
        _close(out.values, ref.values)
        assert out.indices.dtype == pl.int64 and out.indices.tolist() == ref.indices.tolist()
    # the values' gradient: tied positions share it (torch.amax's rule), NaN takes it whole
    w = np.linspace(0.5, 1.5, ref.values.numel()).reshape(tuple(ref.values.shape))
    (out.values * pl.tensor(w)).sum().backward()
    (getattr(torch, "a" + name)(xt, dim, keepdim) * torch.tensor(w)).sum().backward()
    _close(x.grad, xt.grad)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_all_dims_or_a_tuple_give_values(name):
    x, xt = _pair(_MINMAX_DATA[1])
    for dim in (None, (0,), (0, 1), (-1,), ()):
        kw = {} if dim is None else {"dim": dim}
        out = getattr(pl, name)(x, **kw)
        assert isinstance(out, pl.Tensor)
        _close(out, getattr(torch, "a" + name)(xt, dim=() if dim is None else dim))
    v, i = getattr(pl, name)(pl.tensor(2.5), 0)  # a 0-d input reduces over nothing, as PyTorch
    assert v.item() == 2.5 and i.item() == 0


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_of_two_tensors_is_elementwise(name):
    a, at = _pair([[1.0, 4.0, 2.0], [0.0, -1.0, 3.0]])
    b, bt = _pair([2.0, 4.0, -5.0])
    for out in (getattr(pl, name)(a, b), getattr(a, name)(b), getattr(pl, name)(a, other=b)):
        ref = getattr(torch, name)(at, bt)
        _close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    _close(a.grad, at.grad)
    _close(b.grad, bt.grad)
    with pytest.raises(TypeError, match=f"{name}: keepdim applies to a reduction"):
        getattr(pl, name)(a, b, True)
    with pytest.raises(TypeError, match=f"{name}: pass either a dim or other="):
        getattr(pl, name)(a, 1, other=b)
    with pytest.raises(TypeError, match=f"a{name}: dim must be an int or a tuple of ints, got a Tensor"):
        getattr(pl, "a" + name)(a, b)


def test_sort_gradgrad_and_topk_gradient():
    x, xt = _pair([[3.0, 1.0, 2.0, 5.0]])
    v, _ = pl.topk(x, 2)
    vt, _ = torch.topk(xt, 2)
    (g,) = pl.autograd.grad((v * v).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((vt * vt).sum(), xt, create_graph=True)
    _close(g, gt)
    (gg,) = pl.autograd.grad(g.sum(), x)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    _close(gg, ggt)


def test_diff_and_bucketize_against_torch():
    a = np.array([[1.0, 4.0, 9.0, 16.0], [2.0, 3.0, 5.0, 7.0]])
    for kw in ({}, {"n": 2}, {"dim": 0}, {"n": 5}):
        _close(pl.diff(pl.tensor(a), **kw), torch.diff(torch.tensor(a), **kw))
    p = pl.diff(pl.tensor(a), prepend=pl.tensor(a[:, :1]), append=pl.tensor(a[:, :2]))
    _close(p, torch.diff(torch.tensor(a), prepend=torch.tensor(a[:, :1]), append=torch.tensor(a[:, :2])))
    b = np.array([1.0, 3.0, 5.0, 7.0])
    v = np.array([[0.0, 1.0, 4.0], [5.0, 7.0, 9.0]])
    for right in (False, True):
        assert pl.bucketize(pl.tensor(v), pl.tensor(b), right=right).tolist() == \
            torch.bucketize(torch.tensor(v), torch.tensor(b), right=right).tolist()
    assert pl.msort(pl.tensor(a.T)).tolist() == torch.msort(torch.tensor(a.T)).tolist()
    x, xt = _pair(a)
    pl.diff(x, n=2).sum().backward()
    torch.diff(xt, n=2).sum().backward()
    _close(x.grad, xt.grad)


def test_nansum_nanmean_and_composites():
    a = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    x, xt = _pair(a)
    _close(pl.nansum(x, 1), torch.nansum(xt, 1))
    _close(pl.nanmean(x, 1), torch.nanmean(xt, 1))
    pl.nansum(x).backward()
    torch.nansum(xt).backward()
    _close(x.grad, xt.grad)
    c = np.array([[1.0, 2.0, 4.0], [0.5, 0.0, 3.0]])
    for ours, ref in ((pl.var_mean, torch.var_mean), (pl.std_mean, torch.std_mean)):
        for o, r in zip(ours(pl.tensor(c), 1), ref(torch.tensor(c), 1)):
            _close(o, r)


def test_special_namespace_and_lazy_names():
    x = np.array([0.5, 1.5, 3.0])
    _close(S.gammaln(pl.tensor(x)), torch.special.gammaln(torch.tensor(x)))
    _close(S.psi(pl.tensor(x)), torch.special.psi(torch.tensor(x)))
    _close(S.multigammaln(pl.tensor(x + 2), 3), torch.special.multigammaln(torch.tensor(x + 2), 3))
    _close(S.logsumexp(pl.tensor(x), 0), torch.special.logsumexp(torch.tensor(x), 0))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        S.nope  # noqa: B018
    if hasattr(pl, "erf"):
        _close(S.erf(pl.tensor(x)), torch.special.erf(torch.tensor(x)))


def test_softmax_under_autocast_is_float32():
    x = pl.tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    with pl.amp.autocast("cpu", dtype=pl.bfloat16):
        assert pl.softmax(x, 1).dtype == pl.float32
        assert pl.log_softmax(x, 1).dtype == pl.float32


# ------------------------------------------------------------------------------------------ hypothesis: random axes
@st.composite
def _array_and_axes(draw, min_side=1):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(min_side, 4), min_size=ndim, max_size=ndim)))
    seed = draw(st.integers(0, 2**16))
    a = np.random.default_rng(seed).uniform(0.5, 1.5, size=shape) * np.where(
        np.random.default_rng(seed + 1).random(shape) > 0.5, 1, -1)
    axes = draw(st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda d: d % ndim, max_size=ndim))
    return a, tuple(axes), draw(st.booleans())


_HYP = settings(max_examples=50, deadline=None)


@_HYP
@given(_array_and_axes())
def test_property_sum_mean_var_amax(case):
    a, axes, keep = case
    ax = axes if axes else None
    x = pl.tensor(a)
    np.testing.assert_allclose(pl.sum(x, ax, keep)._data, np.sum(a, axis=ax, keepdims=keep), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pl.mean(x, ax, keep)._data, np.mean(a, axis=ax, keepdims=keep), rtol=1e-12)
    np.testing.assert_allclose(pl.amax(x, axes, keep)._data, np.amax(a, axis=ax, keepdims=keep))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = np.var(a, axis=ax, keepdims=keep, ddof=1)
    np.testing.assert_allclose(pl.var(x, ax, keepdim=keep)._data, ref, rtol=1e-10, equal_nan=True)


@_HYP
@given(_array_and_axes())
def test_property_prod_one_axis(case):
    a, axes, keep = case
    ax = axes[0] if axes else None
    np.testing.assert_allclose(pl.prod(pl.tensor(a), ax, keep)._data, np.prod(a, axis=ax, keepdims=keep),
                               rtol=1e-12)


# ------------------------------------------------------------------------------------------ edge cases vs PyTorch
def test_prod_with_bool_dtype_is_a_logical_and():
    x = np.array([[True, False], [True, True]])
    got = pl.prod(pl.tensor(x), 1, dtype=pl.bool)
    want = torch.prod(torch.tensor(x), 1, dtype=torch.bool)
    assert got.dtype == pl.bool and got.tolist() == want.tolist()


def test_bfloat16_orders_nan_last_as_pytorch():
    v = [1.0, float("nan"), -1.0, 2.0]
    p, t = pl.tensor(v).to(pl.bfloat16), torch.tensor(v).bfloat16()
    assert pl.sort(p).indices.tolist() == torch.sort(t).indices.tolist()
    assert pl.argsort(p, descending=True).tolist() == torch.argsort(t, descending=True, stable=True).tolist()
    assert float(pl.nanmedian(p)) == float(torch.nanmedian(t))
    assert pl.nanmedian(p[None], 1).indices.tolist() == torch.nanmedian(t[None], 1).indices.tolist()
    assert pl.cummax(p, 0).indices.tolist() == torch.cummax(t, 0).indices.tolist()
    assert pl.cummin(p, 0).indices.tolist() == torch.cummin(t, 0).indices.tolist()


@pytest.mark.parametrize("name", ["mode", "max_with_indices", "min_with_indices"])
def test_single_dim_reductions_refuse_dim_none(name):
    with pytest.raises(TypeError, match=f"{name}: dim must be an int"):
        getattr(pl, name)(pl.ones(3, 4), dim=None)


def test_named_tuple_fields():
    x = pl.tensor([[1.0, 5.0], [3.0, -2.0]])
    mm = pl.aminmax(x, dim=1)
    assert mm.min.tolist() == [1.0, -2.0] and mm.max.tolist() == [5.0, 3.0]
    fr = pl.frexp(pl.tensor([8.0]))
    assert fr.mantissa.tolist() == [0.5] and fr.exponent.tolist() == [4] and fr.exponent.dtype == pl.int32
    h = pl.histogram(pl.tensor([1.0, 2.0, 1.0]), bins=2)
    assert h.hist.tolist() == [2.0, 1.0] and h.bin_edges.tolist() == [1.0, 1.5, 2.0]


def test_div_rounding_in_place_and_zero_gradient():
    x = pl.tensor([7.0, -7.5], requires_grad=True)
    y = pl.div(x, 2.0, rounding_mode="floor")
    assert y.requires_grad and y.tolist() == [3.0, -4.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    z = pl.tensor([7, -7])
    assert z.div_(2, rounding_mode="trunc") is z and z.tolist() == [3, -3]
    with pytest.raises(ValueError, match="div: rounding_mode"):
        pl.tensor([1.0]).div_(2.0, rounding_mode="ceil")


def test_float_power_inplace_needs_a_double_base():
    x = pl.tensor([2.0, 3.0], dtype=pl.float64)
    assert x.float_power_(2).tolist() == [4.0, 9.0]
    with pytest.raises(pl.errors.DtypeMismatch, match="float_power_: the base must be float64"):
        pl.tensor([2.0]).float_power_(2)


def test_quantile_gradient_reaches_q_with_linear_interpolation_only():
    xs = np.array([3.0, 1.0, 4.0, 1.5, 9.0])
    for mode in ("linear", "midpoint"):
        qp = pl.tensor([0.3, 0.8], dtype=pl.float64, requires_grad=True)
        qt = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
        outp = pl.quantile(pl.tensor(xs), qp, interpolation=mode)
        outt = torch.quantile(torch.tensor(xs), qt, interpolation=mode)
        _close(outp, outt)
        if mode == "linear":
            outp.sum().backward()
            outt.sum().backward()
            _close(qp.grad, qt.grad)
        else:
            assert not outp.requires_grad and not outt.requires_grad


def test_cov_warns_without_degrees_of_freedom():
    with pytest.warns(RuntimeWarning, match="cov: degrees of freedom"):
        out = pl.cov(pl.tensor([1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cov(torch.tensor([1.0]))
    _close(out, want)


# ---------------------------------------------------------------- bad inputs and non-finite values, against PyTorch
@pytest.mark.parametrize("call", [
    lambda lib: lib.argmax(lib.tensor([True, False])),
    lambda lib: lib.histc(lib.ones(3), bins=4, min=0.0, max=float("nan")),
    lambda lib: lib.searchsorted(lib.tensor([1.0, 3.0]), [1.0, 2.0]),
    lambda lib: lib.trapezoid(lib.tensor([True, False, True])),
    lambda lib: lib.cumulative_trapezoid(lib.tensor([True, False, True])),
    lambda lib: lib.gradient(lib.tensor([1, 2, 4], dtype=lib.uint8)),
])
def test_refused_as_in_torch(call):
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        call(torch)
    with pytest.raises((TypeError, ValueError, pl.LucidError)):
        call(pl)


def test_cdist_half_precision_product_path_is_computed_in_float32():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-2, 2, (30, 2)), rng.uniform(-2, 2, (3, 2))
    a[0] = b[0] + 0.1  # a close pair: the bfloat16 formula cancels
    exact = torch.cdist(torch.tensor(a), torch.tensor(b))
    got = pl.cdist(pl.tensor(a).to(pl.bfloat16), pl.tensor(b).to(pl.bfloat16))
    assert got.dtype == pl.bfloat16
    np.testing.assert_allclose(got.to(pl.float64).numpy(), exact.numpy(), rtol=3e-2, atol=3e-2)


def test_max_of_bool_along_a_dim_as_torch():
    x = np.array([[True, False, True], [False, False, True]])
    v, i = pl.max(pl.tensor(x), dim=1)
    tv, ti = torch.max(torch.tensor(x), dim=1)
    assert v.tolist() == tv.tolist() and i.tolist() == ti.tolist()


def test_ties_and_infinite_means():
    x = pl.tensor([[1.0, float("inf"), 2.0], [3.0, -float("inf"), 4.0]])
    var, mean = pl.var_mean(x, dim=1, correction=0)
    np.testing.assert_array_equal(mean.numpy(), torch.mean(torch.tensor(x.numpy()), dim=1).numpy())
    assert bool(pl.isnan(var).all())
    v, i = pl.topk(pl.tensor([3, 1, 3, 2]), 2)
    assert v.tolist() == [3, 3] and sorted(i.tolist()) == [0, 2]


def test_cdist_p0_counts_differences_and_propagates_nan_as_torch():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    a[0, 0], a[1, 1], b[2] = np.nan, np.inf, a[3]  # a NaN, an infinity, an equal row
    got = pl.cdist(pl.tensor(a), pl.tensor(b), p=0.0)
    want = torch.cdist(torch.tensor(a), torch.tensor(b), p=0.0)
    assert got.dtype == pl.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_cdist_pinf_propagates_nan():
    """A documented deviation: PyTorch's CPU kernel drops the NaN (its max), pylucid's answer is vector_norm's."""
    a, b = np.array([[np.nan, 1.0], [0.0, 1.0]]), np.array([[0.0, 3.0]])
    got = pl.cdist(pl.tensor(a), pl.tensor(b), p=float("inf"))
    want = torch.linalg.vector_norm(torch.tensor(a)[:, None] - torch.tensor(b)[None], float("inf"), -1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert torch.cdist(torch.tensor(a), torch.tensor(b), p=float("inf"))[0, 0] == 2.0  # what PyTorch drops


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bins", [1, 4, 6, 37, 100])
@pytest.mark.parametrize("shape", [(), (1,), (50,)])
def test_histogram_bin_edges_and_counts_equal_torch(dtype, bins, shape):
    # one value sits on the middle edge of its widened range; the edges are PyTorch's linspace to the last bit
    x = (np.random.default_rng(bins).standard_normal(shape) * 3 + 0.5478467345237732).astype(dtype)
    w = np.abs(x) + 0.25
    for kw in ({}, {"density": True}):
        got = pl.histogram(pl.tensor(x), bins=bins, weight=pl.tensor(w), **kw)
        want = torch.histogram(torch.tensor(x), bins=bins, weight=torch.tensor(w), **kw)
        np.testing.assert_array_equal(got.bin_edges.numpy(), want.bin_edges.numpy())
        np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-6)
    got = pl.histogramdd(pl.tensor(x.reshape(-1, 1)), bins=bins)
    want = torch.histogramdd(torch.tensor(x.reshape(-1, 1)), bins=bins)
    np.testing.assert_array_equal(got.bin_edges[0].numpy(), want.bin_edges[0].numpy())
    np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())


@pytest.mark.parametrize("name", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((0, 3), 1), ((2, 0), 0), ((2, 0), 1), ((0, 0), 0),
                                       ((0, 0, 3), 1), ((0,), 0), ((0, 3), None)])
def test_unique_along_a_dim_of_an_empty_input_as_torch(name, shape, dim):
    kw = {"dim": dim, "return_inverse": True, "return_counts": True}
    try:
        want = getattr(torch, name)(torch.ones(shape), **kw)
    except RuntimeError:
        with pytest.raises(pl.ShapeMismatch, match=rf"^{name}: the input of shape"):
            getattr(pl, name)(pl.ones(shape), **kw)
        return
    got = getattr(pl, name)(pl.ones(shape), **kw)
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
