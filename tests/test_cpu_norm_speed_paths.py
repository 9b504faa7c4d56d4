"""The CPU fast paths around the convolutions of the small CNNs (MNIST, DCGAN, ResNet): Adadelta's blocked
array step, batch norm's training passes, 2x2 max pooling; each against PyTorch (the oracle) and, where it
replaces a general path, against that path bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid
from pylucid import optim
from pylucid.optim import adadelta as _adadelta

# one parameter larger than a block (the step splits it, and runs on threads), a few small ones, a 0-d one
ADA_SHAPES = [(_adadelta._BLOCK + 1000,), (32, 1, 3, 3), (7,), ()]
ADA_KWARGS = [dict(), dict(lr=0.5, rho=0.5, weight_decay=0.1), dict(lr=0.5, maximize=True, eps=1e-4)]


def _adadelta_run(lib, kwargs, dtype, steps=4, generic=False, threads=2):
    rng = np.random.default_rng(1)
    ps = [lib.tensor(rng.standard_normal(s).astype(dtype)).requires_grad_() for s in ADA_SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in ADA_SHAPES] for _ in range(steps)]
    opt = getattr(lib.optim, "Adadelta")(ps, **kwargs)
    if generic:
        opt._cpu_step = lambda group: False  # the per-tensor formula
    old = pylucid.get_num_threads()
    pylucid.set_num_threads(threads)
    try:
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = lib.tensor(g)
            opt.step()
    finally:
        pylucid.set_num_threads(old)
    return opt, [p.detach().numpy().copy() for p in ps]


@pytest.mark.parametrize("kwargs", ADA_KWARGS, ids=["default", "weight_decay", "maximize"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adadelta_cpu_step_matches_torch_and_the_generic_path(kwargs, dtype):
    opt, got = _adadelta_run(pylucid, kwargs, dtype)
    _, want = _adadelta_run(torch, kwargs, dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # the same operations in the same order as the per-tensor formula: the same bits, on any thread count
    _, generic = _adadelta_run(pylucid, kwargs, dtype, generic=True)
    _, one_thread = _adadelta_run(pylucid, kwargs, dtype, threads=1)
    for a, b, c in zip(got, generic, one_thread):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    p = opt.param_groups[0]["params"][0]
    st = opt.state[p]
    assert st["step"] == 4
    assert p._version[0] >= 4 and st["square_avg"]._version[0] == 4 and st["acc_delta"]._version[0] == 4


def test_adadelta_cpu_step_falls_back_for_a_strided_gradient():
    w = pylucid.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), requires_grad=True)
    tw = torch.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), requires_grad=True)
    g = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    w.grad, tw.grad = pylucid.tensor(g).t(), torch.tensor(g).t()  # transposed views
    opt, topt = optim.Adadelta([w], lr=0.5), torch.optim.Adadelta([tw], lr=0.5)
    assert not opt._cpu_step(opt.param_groups[0]) and opt.state[w] == {}
    for _ in range(3):
        opt.step()
        topt.step()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------- 2x2 max pooling
def _pool_pair(arr, grad, **kw):
    a, b = pylucid.tensor(arr).requires_grad_(), torch.tensor(arr).requires_grad_()
    ya, ia = pylucid.nn.functional.max_pool2d(a, 2, return_indices=True, **kw)
    yb, ib = torch.nn.functional.max_pool2d(b, 2, return_indices=True, **kw)
    ya.backward(pylucid.tensor(grad))
    yb.backward(torch.tensor(grad))
    return (ya.detach().numpy(), ia.numpy(), a.grad.numpy()), (yb.detach().numpy(), ib.numpy(), b.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 40, 24, 24), (2, 3, 6, 4), (1, 1, 2, 2)])
def test_max_pool_2x2_matches_torch_with_ties(dtype, shape):
    rng = np.random.default_rng(2)
    # few distinct values: many windows hold their maximum twice or more (the first in row-major order wins)
    x = rng.integers(-2, 3, shape).astype(dtype)
    g = rng.standard_normal((shape[0], shape[1], shape[2] // 2, shape[3] // 2)).astype(dtype)
    got, want = _pool_pair(x, g)
    assert got[1].dtype == np.int64
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", ["nan", "odd", "ceil", "padded"])
def test_max_pool_2x2_other_inputs_take_the_general_path(case):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7 if case in ("odd", "ceil") else 6, 6)).astype(np.float32)
    kw = {"ceil": {"ceil_mode": True}, "padded": {"padding": 1}}.get(case, {})
    if case == "nan":
        x[0, 0, 0, 0] = x[1, 2, 3, 3] = x[1, 2, 2, 3] = np.nan
    out = {"ceil": (2, 3, 4, 3), "padded": (2, 3, 4, 4)}.get(case, (2, 3, 3, 3))
    got, want = _pool_pair(x, rng.standard_normal(out).astype(np.float32), **kw)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_max_pool_scatter_matches_the_portable_version():
    from pylucid.backend.base import ArrayBackend

    be = pylucid.tensor([1.0]).device.backend
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 32, 12, 12)).astype(np.float32)  # enough planes for the threaded split
    _, idx = be.max_pool2d_2x2(x)
    g = rng.standard_normal(idx.shape).astype(np.float32)
    g[0, 0, 0, :2] = [np.inf, np.nan]  # written as they are, never multiplied
    g2, i2 = g.reshape(512, -1), idx.reshape(512, -1)
    np.testing.assert_array_equal(be.max_pool_scatter(g2, i2, 144), ArrayBackend.max_pool_scatter(be, g2, i2, 144))


# ---------------------------------------------------------------------------------------------- batch norm
# groups of images (one group, several: 16x512x4x4 and 64x16x2x2, a short last one: 33x64x8x8),
# and the per-image rows on the threads (16x64x16x16)
BN_SHAPES = [(16, 128, 8, 8), (16, 512, 4, 4), (64, 16, 2, 2), (4, 8, 300), (4, 32, 16, 16),
             (33, 64, 8, 8), (16, 64, 16, 16)]


def _bn_pair(x, g, affine, mean=0.0, threads=2):
    rng = np.random.default_rng(5)
    c = x.shape[1]
    w = rng.standard_normal(c).astype(x.dtype) if affine else None
    b = rng.standard_normal(c).astype(x.dtype) if affine else None
    res = []
    old = pylucid.get_num_threads()
    pylucid.set_num_threads(threads)
    try:
        for lib in (pylucid, torch):
            xt = lib.tensor(x).requires_grad_()
            wt = None if w is None else lib.tensor(w).requires_grad_()
            bt = None if b is None else lib.tensor(b).requires_grad_()
            rm, rv = lib.zeros(c, dtype=xt.dtype), lib.ones(c, dtype=xt.dtype)
            y = lib.nn.functional.batch_norm(xt, rm, rv, wt, bt, True, 0.1, 1e-5)
            y.backward(lib.tensor(g))
            grads = [xt.grad] + ([wt.grad, bt.grad] if affine else [])
            res.append([t.detach().numpy().copy() for t in [y, rm, rv] + grads])
    finally:
        pylucid.set_num_threads(old)
    return res


@pytest.mark.parametrize("shape", BN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mean", [0.0, 50.0], ids=["centred", "large_mean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_training_matches_torch(shape, mean, dtype):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(shape) * 2 + mean).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    for affine in (True, False):
        got, want = _bn_pair(x, g, affine)
        # float32: PyTorch's own error against float64 is of the same order (large means: 50 times that)
        tol = (2e-4 if mean else 2e-5) if dtype == np.float32 else 1e-10
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.abs(b).max()))
        # per-image partial sums reduced in a fixed order: the same bits on one thread
        for a, b in zip(got, _bn_pair(x, g, affine, threads=1)[0]):
            np.testing.assert_array_equal(a, b)


def test_batch_norm_paths_cover_both_layouts_and_restore_numpy_buffer_size():
    be = pylucid.tensor([1.0]).device.backend
    assert not be._bn_by_rows(np.empty((16, 512, 4, 4), np.float32))
    assert be._bn_by_rows(np.empty((16, 64, 16, 16), np.float32))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 128, 4, 4)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    size = np.getbufsize()
    y, mean, var = be.batch_norm(x, w, b, None, None, True, 1e-5)
    dx, dw, db = be.batch_norm_backward(g, x, w, mean, var, True, 1e-5)
    assert np.getbufsize() == size  # the shorter ufunc buffer is set for the call only
    from pylucid.backend.base import ArrayBackend

    y0, mean0, var0 = ArrayBackend.batch_norm(be, x, w, b, None, None, True, 1e-5)
    grads0 = ArrayBackend.batch_norm_backward(be, g, x, w, mean0, var0, True, 1e-5)
    for a, r in zip((y, mean, var) + (dx, dw, db), (y0, mean0, var0) + grads0):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(r).max()))
    dx2, dw2, db2 = be.batch_norm_backward(g, x, w, mean, var, True, 1e-5, need_dx=False)
    assert dx2 is None
    np.testing.assert_array_equal(dw2, dw)
    np.testing.assert_array_equal(db2, db)
