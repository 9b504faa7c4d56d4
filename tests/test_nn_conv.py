"""Conv/pool/resampling layers against torch.nn with copied weights, double backward
through a convolution (a gradient penalty), padding modes and reprs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid import nn


def _copy(pm, tm):
    pm.load_state_dict({k: pl.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _compare(pm, tm, shape, seed=0, atol=1e-5, out_index=None, **call):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    px = pl.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    po, to = pm(px, **call), tm(tx, **call)
    if out_index is not None:
        po, to = po[out_index], to[out_index]
    np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), atol=atol, rtol=1e-4)
    g = np.random.default_rng(seed + 1).standard_normal(to.shape).astype(np.float32)
    (po * pl.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=atol, rtol=1e-4)
    tparams = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), atol=atol, rtol=1e-4, err_msg=name)


CONV_CASES = [
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 9)),
    ("Conv2d", (4, 6, (3, 2)), {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2}, (2, 4, 7, 8)),
    ("Conv2d", (3, 4, 3), {"padding": "same", "bias": False}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 3), {"padding": 2, "padding_mode": "reflect"}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 3), {"padding": (1, 2), "padding_mode": "replicate"}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "circular"}, (2, 3, 6, 5)),
    ("Conv3d", (2, 3, 2), {"padding": 1}, (1, 2, 4, 3, 4)),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5)),
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "groups": 2, "dilation": 2}, (2, 4, 4, 3)),
    ("ConvTranspose3d", (2, 2, 2), {"stride": 2}, (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONV_CASES)])
def test_conv_modules_match_torch(name, args, kwargs, shape):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kwargs).double().float()
    pm = getattr(nn, name)(*args, **kwargs)
    _copy(pm, tm)
    assert repr(pm) == repr(tm)
    assert [n for n, _ in pm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    _compare(pm, tm, shape)


def test_conv_transpose_output_size():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(2, 3, 3, stride=2)
    pm = nn.ConvTranspose2d(2, 3, 3, stride=2)
    _copy(pm, tm)
    _compare(pm, tm, (1, 2, 4, 4), output_size=(10, 10))


LAYER_CASES = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 10)),
    ("MaxPool2d", (2,), {}, (2, 3, 8, 8)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "dilation": 1, "ceil_mode": True}, (2, 3, 7, 6)),
    ("MaxPool3d", (2,), {"stride": 1}, (1, 2, 3, 4, 3)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 10)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 3, 7, 6)),
    ("AvgPool2d", (2,), {"divisor_override": 3}, (2, 3, 6, 6)),
    ("AvgPool3d", (2,), {}, (1, 2, 4, 4, 4)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 7)),
    ("AdaptiveAvgPool2d", ((3, None),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool3d", (2,), {}, (1, 2, 5, 3, 4)),
    ("AdaptiveMaxPool1d", (3,), {}, (2, 3, 7)),
    ("AdaptiveMaxPool2d", (3,), {}, (2, 3, 7, 5)),
    ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}, (2, 3, 4, 3)),
    ("Upsample", (), {"size": (7, 5), "mode": "bilinear", "align_corners": False}, (2, 3, 4, 3)),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True}, (2, 3, 4, 3)),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, (1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), {"size": (5, 4)}, (1, 2, 3, 3)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 2)),
    ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)),
    ("Unfold", ((2, 3),), {"padding": 1, "stride": 2}, (2, 3, 5, 6)),
    ("Fold", ((4, 5), 2), {}, (2, 12, 12)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAYER_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYER_CASES)])
def test_layers_match_torch(name, args, kwargs, shape):
    tm = getattr(torch.nn, name)(*args, **kwargs)
    pm = getattr(nn, name)(*args, **kwargs)
    assert repr(pm) == repr(tm)
    _compare(pm, tm, shape)


def test_max_pool_return_indices_module():
    tm = torch.nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)
    pm = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7)).astype(np.float32)
    (pv, pi), (tv, ti) = pm(pl.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_array_equal(pi.numpy(), ti.numpy())
    assert pi.dtype == pl.int64
    np.testing.assert_array_equal(pv.numpy(), tv.numpy())


def test_default_init_statistics():
    m = nn.Conv2d(6, 16, 5)
    bound = 1 / np.sqrt(6 * 25)
    w = m.weight.detach().numpy()
    assert w.shape == (16, 6, 5, 5) and np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    t = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert t.weight.shape == (4, 3, 3, 3)
    assert np.abs(t.weight.detach().numpy()).max() <= 1 / np.sqrt(3 * 9)


def test_gradient_penalty_through_conv2d_matches_torch():
    """d/dw of ||d out / d x||^2: needs the graph-mode backward of conv2d and max_pool2d."""
    torch.manual_seed(0)
    tconv = torch.nn.Conv2d(2, 3, 3, padding=1, stride=2).double()
    pconv = nn.Conv2d(2, 3, 3, padding=1, stride=2).double()
    _copy(pconv, tconv)
    x = np.random.default_rng(0).standard_normal((2, 2, 6, 5))

    def penalty(conv, xx, F, lib):
        y = F.max_pool2d(lib.tanh(conv(xx)), 2, ceil_mode=True)
        (gx,) = lib.autograd.grad(y.sum() if lib is torch else y.sum(), [xx], create_graph=True)
        return (gx * gx).sum()

    px = pl.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    pp = penalty(pconv, px, pl.nn.functional, pl)
    tp = penalty(tconv, tx, torch.nn.functional, torch)
    np.testing.assert_allclose(pp.item(), tp.item(), rtol=1e-10)
    pp.backward()
    tp.backward()
    np.testing.assert_allclose(pconv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pconv.bias.grad.numpy(), tconv.bias.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_double_backward_conv_transpose_and_avg_pool():
    torch.manual_seed(0)
    w = np.random.default_rng(1).standard_normal((2, 3, 3, 3))
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 3))

    def run(lib, F, X, W):
        y = F.avg_pool2d(F.conv_transpose2d(X, W, stride=2, padding=1), 2, ceil_mode=True, count_include_pad=False)
        (gw,) = lib.autograd.grad((y * y).sum(), [W], create_graph=True)
        return (gw ** 2).sum()

    pw, px = pl.tensor(w, requires_grad=True), pl.tensor(x, requires_grad=True)
    tw, tx = torch.tensor(w, requires_grad=True), torch.tensor(x, requires_grad=True)
    pr, tr = run(pl, pl.nn.functional, px, pw), run(torch, torch.nn.functional, tx, tw)
    pr.backward()
    tr.backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_lenet_forward_backward_matches_torch():
    torch.manual_seed(0)

    def build(lib):
        n = lib.nn
        return n.Sequential(n.Conv2d(1, 6, 5), n.ReLU(), n.MaxPool2d(2), n.Conv2d(6, 16, 5), n.ReLU(), n.MaxPool2d(2),
                            n.Flatten(), n.Linear(256, 120), n.ReLU(), n.Linear(120, 84), n.ReLU(), n.Linear(84, 10))

    tm, pm = build(torch), build(pl)
    _copy(pm, tm)
    _compare(pm, tm, (8, 1, 28, 28), atol=1e-4)


def test_float16_autocast_and_bfloat16():
    x = pl.randn(1, 2, 5, 5)
    w = pl.randn(3, 2, 3, 3)
    with pl.amp.autocast("cpu", dtype=pl.float16):
        y = pl.conv2d(x, w)
        p = pl.max_pool2d(x, 2)
    assert y.dtype == pl.float16 and p.dtype == pl.float32
    yb = pl.conv2d(x.to(pl.bfloat16), w.to(pl.bfloat16))
    assert yb.dtype == pl.bfloat16
    np.testing.assert_allclose(yb.float().numpy(), pl.conv2d(x, w).numpy(), atol=0.1, rtol=0.05)


def test_errors_name_the_op():
    with pytest.raises(ValueError, match="Conv2d: in_channels"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(pl.ShapeMismatch, match="conv2d: expected input with 3 channels"):
        nn.Conv2d(3, 4, 3)(pl.zeros(1, 2, 5, 5))
    with pytest.raises(TypeError, match="conv2d: input must be a Tensor"):
        pl.conv2d(np.zeros((1, 1, 3, 3)), pl.zeros(1, 1, 2, 2))
    with pytest.raises(pl.DtypeMismatch, match=r"conv2d: input \(pylucid.int64\) and weight \(pylucid.float32\)"):
        pl.conv2d(pl.zeros(1, 1, 3, 3, dtype=pl.int64), pl.zeros(1, 1, 2, 2))


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.nn.functional.max_pool1d(x, 2, 1), lambda lib, x: lib.nn.functional.avg_pool1d(x, 2, 1),
    lambda lib, x: lib.nn.functional.lp_pool1d(x, 3, 2, ceil_mode=True),
])
@pytest.mark.parametrize("shape", [(0, 9), (2, 0, 9), (0, 0, 9)])
def test_pools_refuse_empty_non_batch_dims_as_torch(call, shape):
    with pytest.raises(RuntimeError):
        call(torch, torch.zeros(shape))
    with pytest.raises(pl.ShapeMismatch, match=r"pool1d: expected input with non-zero sizes"):
        call(pl, pl.zeros(*shape))


@pytest.mark.parametrize("call, shape", [
    (lambda lib, x: lib.nn.functional.max_pool2d(x, 2, 1), (0, 5, 6)),
    (lambda lib, x: lib.nn.functional.avg_pool3d(x, 2, 1), (2, 0, 4, 4, 3)),
    (lambda lib, x: lib.nn.functional.unfold(x, 2), (0, 4, 4)),
    (lambda lib, x: lib.nn.functional.fold(x, (4, 3), (2, 2), dilation=(2, 1)), (0, 4)),
    (lambda lib, x: lib.nn.functional.fold(x, (4, 3), (2, 2), dilation=(2, 1)), (2, 0, 4)),
])
def test_unfold_fold_and_nd_pools_refuse_empty_non_batch_dims_as_torch(call, shape):
    with pytest.raises(RuntimeError):
        call(torch, torch.zeros(shape))
    with pytest.raises(pl.ShapeMismatch, match=r"expected input with non-zero sizes"):
        call(pl, pl.zeros(*shape))


def test_empty_batch_pools_match_torch():
    for call, shape in ((lambda lib, x: lib.nn.functional.max_pool2d(x, 2, 1), (0, 2, 5, 6)),
                        (lambda lib, x: lib.nn.functional.avg_pool3d(x, 2, 1), (0, 2, 4, 4, 3)),
                        (lambda lib, x: lib.nn.functional.unfold(x, 2), (0, 2, 4, 4)),
                        (lambda lib, x: lib.nn.functional.fold(x, (4, 3), (2, 2), dilation=(2, 1)), (0, 4, 4))):
        assert tuple(call(pl, pl.zeros(*shape)).shape) == tuple(call(torch, torch.zeros(shape)).shape)


def _grid_pair(x, g, **kw):
    t = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g), **kw).numpy()
    p = pl.nn.functional.grid_sample(pl.tensor(x), pl.tensor(g), **kw).numpy()
    return p, t


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("dims", [2, 3])
def test_grid_sample_infinite_coordinate_under_border_padding_is_the_edge_as_torch(mode, dims):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2) + (3,) * dims).astype(np.float32)
    g = rng.uniform(-1, 1, (1,) + (1,) * (dims - 1) + (4, dims)).astype(np.float32)
    g[..., 0, 0], g[..., 1, 0], g[..., 2, dims - 1] = np.inf, -np.inf, np.inf
    p, t = _grid_pair(x, g, mode=mode, padding_mode="border", align_corners=True)
    np.testing.assert_allclose(p, t, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_off_input_points_do_not_pick_up_an_infinite_pixel(mode):
    # the points off the input gather pixel 0 and mask it: an inf there must not become NaN (0 * inf)
    x = np.arange(12.0, dtype=np.float32).reshape(1, 1, 3, 4)
    x[0, 0, 0, 0], x[0, 0, 0, 1] = np.inf, np.nan
    g = np.array([[[[3.0, 3.0], [-3.0, 2.5], [0.5, 0.5], [2.0, -2.5]]]], np.float32)
    p, t = _grid_pair(x, g, mode=mode, padding_mode="zeros", align_corners=False)
    np.testing.assert_allclose(p, t, atol=1e-5)


def test_grid_sample_nan_coordinate_and_align_corners_type():
    x = np.ones((1, 1, 3, 3), np.float32)
    g = np.array([[[[np.nan, 0.0], [0.2, 0.1]]]], np.float32)
    p, t = _grid_pair(x, g, mode="nearest", padding_mode="zeros", align_corners=False)
    np.testing.assert_array_equal(p, t)  # off the input: 0 in both
    p, _ = _grid_pair(x, g, mode="bilinear", padding_mode="border", align_corners=False)
    assert np.isnan(p[0, 0, 0, 0]) and p[0, 0, 0, 1] == 1.0  # no value to clamp NaN to (docs/semantics)
    for bad in (None, "abc", 1):
        with pytest.raises(TypeError):
            torch.grid_sampler_2d(torch.tensor(x), torch.zeros(1, 1, 1, 2), 0, 0, bad)
        with pytest.raises(TypeError, match="grid_sampler_2d: align_corners must be a bool"):
            pl.grid_sampler_2d(pl.tensor(x), pl.zeros(1, 1, 1, 2), 0, 0, bad)


def test_conv_repeat_calls_keep_every_check():
    """A repeated conv2d call skips its argument checks (remembered per shapes, dtypes and geometry), with the
    results of a first call; arguments that hash like a checked call's (1.0 and True hash as 1) still meet their
    own checks, and a failing call is never remembered."""
    g = np.random.default_rng(0)
    x = pl.tensor(g.standard_normal((2, 4, 7, 7)).astype(np.float32))
    w = pl.tensor(g.standard_normal((6, 2, 3, 3)).astype(np.float32), requires_grad=True)
    want = torch.nn.functional.conv2d(torch.tensor(x.numpy()), torch.tensor(w.detach().numpy()), stride=(2, 1),
                                      padding=1, groups=2)
    for _ in range(3):  # the first call checks and remembers, the others take the remembered geometry
        y = pl.conv2d(x, w, stride=(2, 1), padding=1, groups=2)
        np.testing.assert_allclose(y.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    y.sum().backward()
    assert w.grad is not None and w.grad.shape == w.shape
    with pytest.raises(TypeError, match="stride"):
        pl.conv2d(x, w, stride=(2.0, 1), padding=1, groups=2)
    with pytest.raises((TypeError, ValueError), match="groups"):
        pl.conv2d(x, w, stride=(2, 1), padding=1, groups=2.0)
    with pytest.raises(ValueError, match="padding"):
        pl.conv2d(x, w, stride=(2, 1), padding=-1, groups=2)
    for _ in range(2):  # a failing call stays failing
        with pytest.raises(pl.errors.ShapeMismatch):
            pl.conv2d(pl.zeros(2, 4, 1, 1), w, padding=0, groups=2)
