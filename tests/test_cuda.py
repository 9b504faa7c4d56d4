"""CUDA-specific tests: memory API, movement, DLPack, device errors, GPU random numbers,
half-precision matmul, and every fused kernel against its reference implementation.

GPU tests carry the ``cuda`` mark and skip cleanly without CuPy or a GPU (CI has none).
The reference implementations in ``pylucid.backend.reference`` are also checked
against PyTorch on the CPU, so CI tests the semantics the kernels are held to.
"""

from __future__ import annotations

import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

import pylucid
from pylucid.backend import cuda_launch, cuda_sources, reference

CUDA = pylucid.cuda.is_available()
cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA GPU/CuPy here")
# the low-overhead launch path is disabled by design when several GPUs are visible (it skips the
# device context); its tests assert that it ran, so they need exactly one GPU
single_gpu = pytest.mark.skipif(CUDA and pylucid.cuda.device_count() > 1, reason="fast launch is single-GPU only")


def _rng(seed=0):
    return np.random.default_rng(seed)


# ----------------------------------------------------------------- runs everywhere
def test_import_does_not_import_cupy():
    code = "import sys, pylucid; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_gpu_gives_clear_errors():
    if CUDA:
        pytest.skip("a GPU is present")
    assert pylucid.cuda.device_count() == 0
    with pytest.raises(pylucid.errors.DeviceUnavailable, match="CUDA is not available"):
        pylucid.zeros(2, device="cuda")
    with pytest.raises(pylucid.errors.DeviceUnavailable, match="memory_allocated"):
        pylucid.cuda.memory_allocated()


def test_references_match_torch_on_cpu():
    g = _rng()
    x = g.standard_normal((5, 7))
    gy = g.standard_normal((5, 7))
    tx = torch.tensor(x, requires_grad=True)
    for log in (False, True):
        ty = torch.log_softmax(tx, -1) if log else torch.softmax(tx, -1)
        (tg,) = torch.autograd.grad(ty, tx, torch.tensor(gy))
        y = reference.softmax_ref(np, x, log)
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(reference.softmax_backward_ref(np, y, gy, log), tg.numpy(), rtol=1e-10, atol=1e-12)
    # layer norm forward/backward
    w, b = g.standard_normal(7), g.standard_normal(7)
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty = torch.nn.functional.layer_norm(tx, (7,), tw, tb, 1e-5)
    tgx, tgw, tgb = torch.autograd.grad(ty, (tx, tw, tb), torch.tensor(gy))
    y, mean, rstd = reference.layer_norm_ref(np, x, w, b, 1e-5)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    dx, dw, db = reference.layer_norm_backward_ref(np, gy, x, mean, rstd, w)
    for a, r in ((dx, tgx), (dw, tgw), (db, tgb)):
        np.testing.assert_allclose(a, r.numpy(), rtol=1e-9, atol=1e-10)
    # cross-entropy with an ignored row
    t = np.array([1, 0, -100, 6, 3])
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t), reduction="none")
    (tgl,) = torch.autograd.grad(tl, tx, torch.ones(5, dtype=torch.float64))
    loss, lse = reference.cross_entropy_ref(np, x, t)
    np.testing.assert_allclose(loss, tl.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reference.cross_entropy_backward_ref(np, np.ones(5), x, lse, t), tgl.numpy(), atol=1e-12)
    # embedding backward with repeats and padding
    idx = np.array([[1, 3, 1], [0, 3, 3]])
    ge = g.standard_normal((2, 3, 4))
    tw = torch.zeros(5, 4, dtype=torch.float64, requires_grad=True)
    te = torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=0)
    (tgw,) = torch.autograd.grad(te, tw, torch.tensor(ge))
    np.testing.assert_allclose(reference.embedding_backward_ref(np, ge, idx, 5, 0), tgw.numpy(), atol=1e-12)
    # bias + activation
    bias = g.standard_normal(7)
    for act, fn in (("relu", torch.relu), ("gelu", torch.nn.functional.gelu),
                    ("gelu_tanh", lambda z: torch.nn.functional.gelu(z, approximate="tanh"))):
        tz = fn(tx + torch.tensor(bias))
        (tgz,) = torch.autograd.grad(tz, tx, torch.tensor(gy))
        np.testing.assert_allclose(reference.bias_act_ref(np, x, bias, act), tz.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        np.testing.assert_allclose(reference.bias_act_backward_ref(np, gy, x, bias, act), tgz.numpy(), rtol=1e-9,
                                   atol=1e-12)


@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_reference_matches_torch(decoupled):
    g = _rng(1)
    ps = [g.standard_normal((3, 4)), g.standard_normal(5)]
    tps = [torch.tensor(p.copy(), requires_grad=True) for p in ps]
    opt_cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = opt_cls(tps, lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    ms = [np.zeros_like(p) for p in ps]
    vs = [np.zeros_like(p) for p in ps]
    for step in range(1, 4):
        grads = [g.standard_normal(p.shape) for p in ps]
        for tp, gr in zip(tps, grads):
            tp.grad = torch.tensor(gr)
        opt.step()
        reference.adam_step_ref(np, ps, grads, ms, vs, step=step, lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8,
                        weight_decay=0.1, decoupled=decoupled)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------- GPU only
@cuda_only
def test_device_queries():
    assert pylucid.cuda.device_count() >= 1
    assert pylucid.cuda.current_device() == 0
    assert isinstance(pylucid.cuda.get_device_name(), str) and pylucid.cuda.get_device_name()
    pylucid.cuda.synchronize()
    pylucid.cuda.synchronize("cuda:0")
    with pytest.raises(ValueError, match="out of range"):
        pylucid.cuda.synchronize(pylucid.cuda.device_count())


@cuda_only
def test_memory_api():
    pylucid.cuda.empty_cache()
    pylucid.cuda.reset_peak_memory_stats()
    base = pylucid.cuda.memory_allocated()
    t = pylucid.zeros(1 << 20, device="cuda")  # 4 MiB
    assert pylucid.cuda.memory_allocated() >= base + 4 * (1 << 20)
    peak = pylucid.cuda.max_memory_allocated()
    assert peak >= pylucid.cuda.memory_allocated()
    del t
    assert pylucid.cuda.memory_allocated() <= base + 512
    assert pylucid.cuda.max_memory_allocated() >= peak  # the peak remembers the freed tensor
    pylucid.cuda.reset_peak_memory_stats()
    assert pylucid.cuda.max_memory_allocated() < peak
    assert pylucid.cuda.memory_reserved() >= pylucid.cuda.memory_allocated()
    pylucid.cuda.empty_cache()


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int64"])
def test_zero_dim_tensor_stays_zero_dim_on_gpu(dtype):
    t = pylucid.tensor(1.5 if dtype != "int64" else 3, dtype=getattr(pylucid, dtype), device="cuda")
    assert t.shape == () and t.cpu().shape == ()


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "bool"])
def test_movement_roundtrip(dtype):
    dt = getattr(pylucid, dtype)
    x = pylucid.tensor([[1.5, -2.0, 0.0], [3.25, 4.0, -1.0]]).to(dt)
    y = x.to("cuda")
    assert y.device == pylucid.device("cuda:0") and y.is_cuda and y.dtype is dt
    assert y.cuda() is y
    z = y.cpu()
    assert z.device == pylucid.device("cpu") and z.dtype is dt
    np.testing.assert_array_equal(np.asarray(z._data).astype(np.float64), np.asarray(x._data).astype(np.float64))
    assert pylucid.tensor([1.0, 2.0], device="cuda").tolist() == [1.0, 2.0]
    assert "device='cuda:0'" in repr(y)


@cuda_only
def test_movement_is_differentiable():
    x = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.cuda() * 2).sum()
    y.backward()
    assert x.grad.device == pylucid.device("cpu")
    np.testing.assert_allclose(np.asarray(x.grad._data), [2.0, 2.0, 2.0])
    # two copies of one CPU leaf: its two gradients (CPU arrays made by CUDA nodes) are summed on the CPU
    x.grad = None
    z = x.cuda()
    ((z * 2).sum() + (x.to("cuda") * 3).sum() + (z * z).sum()).backward()
    np.testing.assert_allclose(np.asarray(x.grad._data), [7.0, 9.0, 11.0])


@cuda_only
def test_numpy_on_cuda_tensor_raises_with_advice():
    t = pylucid.ones(3, device="cuda")
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        t.numpy()
    np.testing.assert_array_equal(t.cpu().numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(t), np.ones(3, np.float32))


@cuda_only
def test_device_mismatch_names_both_devices():
    a = pylucid.ones(3)
    b = pylucid.ones(3, device="cuda")
    with pytest.raises(pylucid.DeviceMismatch, match=r"cpu.*cuda:0|cuda:0.*cpu"):
        a + b
    with pytest.raises(pylucid.DeviceMismatch, match="cuda:0"):
        pylucid.matmul(b.reshape(3, 1), a.reshape(1, 3))


@cuda_only
def test_dlpack_shares_memory_with_cupy():
    import cupy

    c = cupy.arange(6, dtype=cupy.float32)
    t = pylucid.from_dlpack(c)
    assert t.device == pylucid.device("cuda:0") and t.data_ptr() == c.data.ptr
    c[0] = 42.0
    assert t[0].item() == 42.0
    back = cupy.from_dlpack(t)
    assert back.data.ptr == c.data.ptr


@cuda_only
def test_dlpack_shares_memory_with_torch():
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    tt = torch.arange(6, dtype=torch.float32, device="cuda")
    t = pylucid.from_dlpack(tt)
    assert t.data_ptr() == tt.data_ptr()
    tt[1] = -7.0
    torch.cuda.synchronize()
    assert t[1].item() == -7.0
    p = pylucid.arange(4, dtype=pylucid.float32, device="cuda")
    tp = torch.from_dlpack(p)
    assert tp.data_ptr() == p.data_ptr() and tp.device.type == "cuda"
    tp.mul_(3)
    torch.cuda.synchronize()
    assert p.tolist() == [0.0, 3.0, 6.0, 9.0]


@cuda_only
def test_generator_reproducible_on_gpu():
    pylucid.manual_seed(123)
    a = pylucid.randn(1000, device="cuda")
    pylucid.manual_seed(123)
    b = pylucid.randn(1000, device="cuda")
    assert a.device.type == "cuda"
    assert bool((a == b).all())
    g = pylucid.Generator("cuda").manual_seed(7)
    u1 = pylucid.rand(500, generator=g, device="cuda")
    g.manual_seed(7)
    u2 = pylucid.rand(500, generator=g, device="cuda")
    assert bool((u1 == u2).all())
    assert 0.0 <= u1.min().item() and u1.max().item() < 1.0
    g.manual_seed(8)
    assert not bool((pylucid.rand(500, generator=g, device="cuda") == u1).all())
    m = a.mean().item()
    assert abs(m) < 0.2
    pylucid.cuda.manual_seed(5)
    r1 = pylucid.randint(0, 10, (100,), device="cuda")
    pylucid.cuda.manual_seed(5)
    r2 = pylucid.randint(0, 10, (100,), device="cuda")
    assert bool((r1 == r2).all()) and r1.dtype is pylucid.int64 and 0 <= r1.min().item() and r1.max().item() < 10
    h = pylucid.randn(10, device="cuda", dtype=pylucid.bfloat16)
    assert h.dtype is pylucid.bfloat16


@cuda_only
def test_randperm_on_gpu():
    pylucid.manual_seed(3)
    p = pylucid.randperm(50, device="cuda")
    assert p.device.type == "cuda" and sorted(p.tolist()) == list(range(50))


def _ref_matmul(a, b):
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


@cuda_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((64, 32), (32, 48)), ((3, 16, 8), (3, 8, 24)), ((2, 3, 16, 8), (8, 24)),
                                    ((16, 8), (4, 8, 5)), ((1, 7, 5), (4, 5, 6)), ((5,), (5, 3)), ((4, 5), (5,)),
                                    ((5,), (5,)), ((0, 3), (3, 4))])
def test_half_matmul_stays_half(dtype, shapes):
    g = _rng(2)
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    a = g.standard_normal(shapes[0]).astype(npdt)
    b = g.standard_normal(shapes[1]).astype(npdt)
    ta, tb = pylucid.tensor(a, device="cuda"), pylucid.tensor(b, device="cuda")
    out = ta @ tb
    assert out.dtype is getattr(pylucid, dtype)
    ref = _ref_matmul(a, b)
    got = np.asarray(out.cpu()._data).astype(np.float64)
    assert got.shape == ref.shape
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, np.sqrt(shapes[0][-1])))
    be = pylucid.device("cuda").backend
    assert be.gemm_error is None, be.gemm_error


@cuda_only
def test_half_matmul_backend_empty_k():
    be = _be()
    for dt in (np.float16, ml_dtypes.bfloat16):
        a = be.asarray(np.zeros((2, 4, 0), dtype=dt))
        b = be.asarray(np.zeros((2, 0, 3), dtype=dt))
        out = be.matmul(a, b)
        assert out.shape == (2, 4, 3) and out.dtype == dt and not bool(be.xp.any(out.astype(np.float32)))


@cuda_only
def test_bf16_routes_keep_dtype():
    be = _be()
    x = be.asarray(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16))
    for out in (be.where(x > 0, x, 0.0), be.clip(x, -1, 1), be.cumsum(x, axis=1), be.sort(x, axis=1),
                be.tril(x), be.triu(x, 1), be.maximum.accumulate(x, axis=1)):
        assert out.dtype == x.dtype
    np.testing.assert_allclose(be.to_numpy(be.cumsum(x, axis=1)).astype(np.float32),
                               np.cumsum(be.to_numpy(x).astype(np.float32), axis=1), rtol=1e-2, atol=1e-2)


@cuda_only
@pytest.mark.parametrize("name", ["maximum", "minimum", "logaddexp"])
def test_ufunc_accumulate_fallback(name):
    be = _be()
    x = _rng(12).standard_normal((3, 37))
    x[1, 5] = np.nan
    got = be.to_numpy(getattr(be, name).accumulate(be.asarray(x), axis=1))
    np.testing.assert_allclose(got, getattr(np, name).accumulate(x, axis=1), rtol=1e-12, atol=1e-12)


@cuda_only
def test_half_matmul_grad_and_autocast():
    a = pylucid.randn(8, 16, device="cuda", requires_grad=True)
    b = pylucid.randn(16, 4, device="cuda", requires_grad=True)
    for dt in (pylucid.float16, pylucid.bfloat16):
        with pylucid.amp.autocast("cuda", dtype=dt):
            y = a @ b
        assert y.dtype is dt
        y.float().sum().backward()
        assert a.grad.dtype is pylucid.float32 and b.grad.dtype is pylucid.float32
        a.grad = b.grad = None


@cuda_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_elementwise_and_reductions(dtype):
    dt = getattr(pylucid, dtype)
    x = pylucid.tensor(np.linspace(-2, 2, 64).reshape(8, 8), device="cuda").to(dt)
    xc = x.cpu()
    for fn in (lambda t: t * 2 + 1, lambda t: t.exp(), lambda t: t.sum(), lambda t: t.mean(1), lambda t: t.max(),
               lambda t: t.sqrt(), lambda t: t / 3, lambda t: t.abs(), lambda t: t.sum(0)):
        gpu, cpu = fn(x), fn(xc)
        assert gpu.dtype is cpu.dtype is dt
        np.testing.assert_allclose(np.asarray(gpu.cpu()._data, np.float32), np.asarray(cpu._data, np.float32),
                                   rtol=2e-2, atol=2e-2)


@cuda_only
def test_scatter_add_accumulates_repeats():
    be = pylucid.device("cuda").backend
    cp = be.xp
    for dt in (np.float32, np.float64, np.float16):
        target = cp.zeros(4, dtype=dt)
        be.scatter_add(target, cp.asarray([0, 2, 2, 2, 3]), cp.asarray([1, 1, 2, 3, 4], dtype=dt))
        np.testing.assert_allclose(cp.asnumpy(target).astype(np.float64), [1, 0, 6, 4])


# ----------------------------------------------------------------- kernels vs references (GPU)
def _be():
    return pylucid.device("cuda").backend


def _close(a, b, dtype):
    tol = {np.float64: 1e-10, np.float32: 2e-5, np.float16: 2e-3}[dtype]
    np.testing.assert_allclose(_be().to_numpy(a).astype(np.float64), _be().to_numpy(b).astype(np.float64),
                               rtol=tol, atol=tol)


KDTYPES = [np.float32, np.float64, np.float16]


def _record_casts(monkeypatch, be):
    """The ``(shape, from, to)`` of every ``be.astype`` call from now on (a list that fills as they happen)."""
    casts = []
    real = be.astype
    monkeypatch.setattr(be, "astype", lambda a, dt, copy=True: (casts.append((a.shape, a.dtype, np.dtype(dt))),
                                                                  real(a, dt, copy))[1])
    return casts


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("shape", [(4, 7), (3, 2, 1000), (1, 1), (5, 4096), (2, 0)])
def test_softmax_kernel(dtype, shape):
    be = _be()
    cp = be.xp
    x = cp.asarray(_rng(3).standard_normal(shape) * 4, dtype=dtype)
    g = cp.asarray(_rng(4).standard_normal(shape), dtype=dtype)
    if x.size == 0:
        assert be.softmax(x).shape == x.shape and be.softmax_backward(x, g).shape == x.shape
        return
    for log in (False, True):
        ref = reference.softmax_ref(cp, x.astype(np.float64), log).astype(dtype)
        y = be.softmax(x, log)
        assert y.dtype == dtype and y.shape == x.shape
        _close(y, ref, dtype)
        ref_g = reference.softmax_backward_ref(cp, y.astype(np.float64), g.astype(np.float64), log)
        _close(be.softmax_backward(y, g, log), ref_g, dtype)


@cuda_only
def test_softmax_kernel_special_values():
    be = _be()
    cp = be.xp
    x = cp.asarray([[0.0, float("-inf"), 1.0], [float("nan"), 1.0, 2.0], [float("-inf")] * 3], dtype=np.float32)
    got = be.to_numpy(be.softmax(x))
    ref = torch.softmax(torch.tensor(be.to_numpy(x)), -1).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def _ln_inputs(shape, dtype, seed):
    """``(be, cp, rng, cols, x, gy)`` for the layer-norm kernel tests (the rng continues after x and gy)."""
    be = _be()
    cp = be.xp
    g0 = _rng(seed)
    x = cp.asarray(g0.standard_normal(shape) * 3 + 1, dtype=dtype)
    gy = cp.asarray(g0.standard_normal(shape), dtype=dtype)
    return be, cp, g0, shape[-1], x, gy


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("affine", [True, False])
# block per row, warp per row on whole 16-byte words (96, 64, 1000: a lane holds up to 8 words), warp per row
# element by element (770 = 2 mod 4), block per row for long rows
@pytest.mark.parametrize("shape", [(3, 5, 300), (1100, 96), (2, 700, 64), (1030, 1000), (1030, 770),
                                   (1030, 2500)])
def test_layer_norm_kernel(dtype, affine, shape):
    be, cp, g0, cols, x, gy = _ln_inputs(shape, dtype, 5)
    w = cp.asarray(g0.standard_normal(cols), dtype=dtype) if affine else None
    b = cp.asarray(g0.standard_normal(cols), dtype=dtype) if affine else None
    y, mean, rstd = be.layer_norm(x, w, b, 1e-5)

    def f64(a):
        return None if a is None else a.astype(np.float64)

    ry, rmean, rrstd = reference.layer_norm_ref(cp, f64(x), f64(w), f64(b), 1e-5)
    assert y.dtype == dtype and mean.shape == shape[:-1]
    _close(y, ry, dtype)
    _close(mean, rmean, dtype)
    _close(rstd, rrstd, dtype)
    dx, dw, db = be.layer_norm_backward(gy, x, mean, rstd, w)
    rdx, rdw, rdb = reference.layer_norm_backward_ref(cp, f64(gy), f64(x), rmean, rrstd, f64(w))
    _close(dx, rdx, dtype)
    if affine:
        tol = 1e-2 if dtype == np.float16 else 1e-4
        np.testing.assert_allclose(be.to_numpy(dw).astype(np.float64), be.to_numpy(rdw), rtol=tol, atol=tol)
        np.testing.assert_allclose(be.to_numpy(db).astype(np.float64), be.to_numpy(rdb), rtol=1e-2, atol=1e-2)
    else:
        assert dw is None and db is None


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("cols", [1000, 1001])  # rows of whole 16-byte words, and element by element
def test_cross_entropy_kernel(dtype, cols):
    be = _be()
    cp = be.xp
    g0 = _rng(6)
    logits = cp.asarray(g0.standard_normal((9, cols)) * 3, dtype=dtype)
    target = cp.asarray([0, 999, 5, -100, 17, 3, 3, 500, -100])
    loss, lse = be.cross_entropy(logits, target, -100)
    rloss, rlse = reference.cross_entropy_ref(cp, logits.astype(np.float64), target, -100)
    _close(loss, rloss, dtype)
    _close(lse, rlse, dtype)
    g = cp.asarray(g0.standard_normal(9), dtype=dtype)
    dx = be.cross_entropy_backward(g, logits, lse, target, -100)
    rdx = reference.cross_entropy_backward_ref(cp, g.astype(np.float64), logits.astype(np.float64), rlse, target, -100)
    _close(dx, rdx, dtype)


@cuda_only
def test_word_kernels_on_views_off_16_byte_alignment():
    """The kernels that read 16-byte words take views starting 2 or 4 bytes into a word element by element,
    with the results of an aligned copy of the same values."""
    be = _be()
    cp = be.xp
    g0 = _rng(11)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    for dt in (bf16, np.dtype(np.float32)):
        rows, cols = 16, 256
        flat = be.astype(cp.asarray(g0.standard_normal(rows * cols + 1) * 2, dtype=np.float32), dt)
        view = flat[1:].reshape(rows, cols)  # one element into an aligned allocation
        assert view.data.ptr % 16 and view.flags.c_contiguous
        copy = view.copy()
        bias = cp.asarray(g0.standard_normal(cols), dtype=np.float32)
        for got, want in ((be.bias_act(view, bias, "gelu_tanh"), be.bias_act(copy, bias, "gelu_tanh")),
                          (be.bias_act_backward(view, view, bias, "gelu"),
                           be.bias_act_backward(copy, copy, bias, "gelu"))):
            np.testing.assert_array_equal(be.to_numpy(got).view(np.uint8), be.to_numpy(want).view(np.uint8))
        target = cp.asarray(g0.integers(0, cols, rows))
        (loss_v, lse_v), (loss_c, lse_c) = be.cross_entropy(view, target), be.cross_entropy(copy, target)
        _close(loss_v, loss_c, np.float32)
        _close(lse_v, lse_c, np.float32)
        g = cp.full(rows, 0.5, dtype=np.float32)
        _close(be.cross_entropy_backward(g, view, lse_v, target), be.cross_entropy_backward(g, copy, lse_c, target),
               np.float32)
    x = cp.asarray(g0.standard_normal(1100 * 96 + 1), dtype=np.float32)[1:].reshape(1100, 96)
    gy = cp.asarray(g0.standard_normal((1100, 96)), dtype=np.float32)
    w, b = cp.asarray(g0.standard_normal(96), dtype=np.float32), cp.asarray(g0.standard_normal(96), dtype=np.float32)
    y, mean, rstd = be.layer_norm(x, w, b, 1e-5)
    for got, want in zip(be.layer_norm_backward(gy, x, mean, rstd, w),
                         be.layer_norm_backward(gy, x.copy(), mean, rstd, w)):
        _close(got, want, np.float32)


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("deterministic", [False, True])
def test_embedding_backward_kernel(dtype, deterministic):
    be = _be()
    cp = be.xp
    g0 = _rng(7)
    idx = cp.asarray(g0.integers(0, 20, (6, 9)))
    g = cp.asarray(g0.standard_normal((6, 9, 16)), dtype=dtype)
    for pad in (None, 3):
        dw = be.embedding_backward(g, idx, 20, pad, deterministic=deterministic)
        ref = reference.embedding_backward_ref(cp, g.astype(np.float64), idx, 20, pad)
        assert dw.shape == (20, 16) and dw.dtype == dtype
        _close(dw, ref, dtype)
    if deterministic:
        a = be.embedding_backward(g, idx, 20, None, deterministic=True)
        b = be.embedding_backward(g, idx, 20, None, deterministic=True)
        assert bool(cp.all(a == b))


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_kernel(dtype, decoupled):
    be = _be()
    cp = be.xp
    g0 = _rng(8)
    shapes = [(300, 257), (7,), (70000,), (1,)]
    ps = [cp.asarray(g0.standard_normal(s), dtype=dtype) for s in shapes]
    ref_ps = [p.astype(np.float64) for p in ps]
    ms = [cp.zeros_like(p) for p in ps]
    vs = [cp.zeros_like(p) for p in ps]
    rms = [cp.zeros_like(p) for p in ref_ps]
    rvs = [cp.zeros_like(p) for p in ref_ps]
    hp = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.05, decoupled=decoupled)
    for step in range(1, 7):  # fresh gradients every step: the pointer table is re-uploaded asynchronously
        gs = [cp.asarray(g0.standard_normal(s), dtype=dtype) for s in shapes]
        be.adam_step(ps, gs, ms, vs, step=step, **hp)
        reference.adam_step_ref(cp, ref_ps, [g.astype(np.float64) for g in gs], rms, rvs, step=step, **hp)
    for p, r in zip(ps, ref_ps):
        if dtype == np.float16:  # half parameters and moments are rounded every step; the reference is not
            np.testing.assert_allclose(be.to_numpy(p).astype(np.float64), be.to_numpy(r), rtol=1e-2, atol=1e-2)
        else:
            _close(p, r, dtype)


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
@pytest.mark.parametrize("act", ["none", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(33, 65), (17, 128)])  # element by element (and a tail), whole 16-byte words
def test_bias_act_kernel(dtype, act, shape):
    be = _be()
    cp = be.xp
    g0 = _rng(9)
    x = cp.asarray(g0.standard_normal(shape) * 2, dtype=dtype)
    b = cp.asarray(g0.standard_normal(shape[-1]), dtype=dtype)
    g = cp.asarray(g0.standard_normal(shape), dtype=dtype)
    for bias in (b, None):
        bb = None if bias is None else bias.astype(np.float64)
        _close(be.bias_act(x, bias, act), reference.bias_act_ref(cp, x.astype(np.float64), bb, act), dtype)
        _close(be.bias_act_backward(g, x, bias, act),
               reference.bias_act_backward_ref(cp, g.astype(np.float64), x.astype(np.float64), bb, act), dtype)


@cuda_only
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(37, 129), (9, 264)])
def test_bias_act_half_reads_in_place(half, act, shape):
    """Half inputs are read and written by the kernels as they are (no float32 copies): the result is the float32
    computation of the widened inputs rounded once, bit for bit, with a float32 bias or none."""
    be = _be()
    cp = be.xp
    dt = np.dtype(getattr(ml_dtypes, half) if half == "bfloat16" else np.float16)
    g0 = _rng(10)
    x = be.astype(cp.asarray(g0.standard_normal(shape) * 3, dtype=np.float32), dt)
    g = be.astype(cp.asarray(g0.standard_normal(shape), dtype=np.float32), dt)
    for bias in (None, cp.asarray(g0.standard_normal(shape[-1]), dtype=np.float32)):
        want = be.astype(be.bias_act(be.astype(x, np.float32), bias, act), dt)
        got = be.bias_act(x, bias, act)
        assert got.dtype == dt
        np.testing.assert_array_equal(be.to_numpy(got).view(np.uint16), be.to_numpy(want).view(np.uint16))
        want = be.astype(be.bias_act_backward(be.astype(g, np.float32), be.astype(x, np.float32), bias, act), dt)
        got = be.bias_act_backward(g, x, bias, act)
        np.testing.assert_array_equal(be.to_numpy(got).view(np.uint16), be.to_numpy(want).view(np.uint16))


@cuda_only
@pytest.mark.parametrize("op", ["multiply", "add", "subtract", "true_divide"])
@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 3, 1000])
def test_vectorised_binary_matches_cupy(op, n):
    be = _be()
    cp = be.xp
    a = cp.asarray(_rng(10).standard_normal(n), dtype=np.float32)
    b = cp.asarray(_rng(11).standard_normal(n) + 3, dtype=np.float32)
    got = getattr(be, op)(a, b)
    assert bool(cp.all(got == getattr(cp, op)(a, b)))
    # misaligned view: falls back to CuPy
    got2 = getattr(be, op)(a[1:], b[1:])
    assert bool(cp.all(got2 == getattr(cp, op)(a[1:], b[1:])))


@cuda_only
def test_multi_gpu_placement():
    if pylucid.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    t = pylucid.ones(4, device="cuda:1")
    assert t._data.device.id == 1
    u = t.to("cuda:0")
    assert u._data.device.id == 0 and u.tolist() == [1.0] * 4
    with pytest.raises(pylucid.DeviceMismatch, match="cuda:0.*cuda:1|cuda:1.*cuda:0"):
        t + u


# ----------------------------------------------------------------- backend primitives (CPU fallbacks everywhere)
@pytest.mark.parametrize("kind", ["max", "min", "mul", "add"])
def test_scatter_primitives_cpu(kind):
    be = pylucid.device("cpu").backend
    uf = {"max": np.maximum, "min": np.minimum, "mul": np.multiply, "add": np.add}[kind]
    t = np.arange(1.0, 6.0)
    idx = np.array([0, 2, 2, 4, 2])
    v = np.array([3.0, -1.0, 7.0, 0.5, 2.0])
    ref = t.copy()
    uf.at(ref, idx, v)
    getattr(be, "scatter_" + kind)(t, idx, v)
    np.testing.assert_array_equal(t, ref)


def test_fused_fallbacks_match_ops_on_cpu():
    # the portable fallbacks the ops call on the CPU equal the kernels' references
    be = pylucid.device("cpu").backend
    g0 = _rng(20)
    x, g = g0.standard_normal((4, 9)), g0.standard_normal((4, 9))
    for log in (False, True):
        y = be.softmax(x, log)
        np.testing.assert_allclose(y, reference.softmax_ref(np, x, log), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(be.softmax_backward(y, g, log), reference.softmax_backward_ref(np, y, g, log),
                                   rtol=1e-12, atol=1e-12)
    w, b = g0.standard_normal(9), g0.standard_normal(9)
    y, m, r = be.layer_norm(x, w, b, 1e-5)
    ry, rm, rr = reference.layer_norm_ref(np, x, w, b, 1e-5)
    for a, c in ((y, ry), (m, rm), (r, rr)):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)
    t = np.array([1, 0, -100, 8])
    loss, lse = be.cross_entropy(x, t)
    np.testing.assert_allclose(loss, reference.cross_entropy_ref(np, x, t)[0], rtol=1e-12)
    ps, gs = [g0.standard_normal(5)], [g0.standard_normal(5)]
    ms, vs = [np.zeros(5)], [np.zeros(5)]
    ref = [ps[0].copy()]
    be.adam_step(ps, gs, ms, vs, step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    reference.adam_step_ref(np, ref, gs, [np.zeros(5)], [np.zeros(5)], step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    np.testing.assert_array_equal(ps[0], ref[0])


# ----------------------------------------------------------------- integration on the GPU (vs the CPU backend)
def _both(arr, requires_grad=False):
    c = pylucid.tensor(arr, requires_grad=requires_grad)
    d = pylucid.tensor(arr, device="cuda", requires_grad=requires_grad)
    return c, d


def _np(t):
    return np.asarray(t.detach().cpu()._data).astype(np.float64)


@cuda_only
@pytest.mark.parametrize("kind", ["max", "min", "mul", "add"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_scatter_primitives_gpu(kind, dtype):
    be = _be()
    cp = be.xp
    uf = {"max": np.maximum, "min": np.minimum, "mul": np.multiply, "add": np.add}[kind]
    t = (np.arange(12).reshape(3, 4) % 5 + 1).astype(dtype)
    idx = (np.array([0, 2, 2, 1, 2, 0]), np.array([1, 3, 3, 0, 3, 1]))
    v = np.array([3, -1, 7, 2, 2, 5]).astype(dtype)
    ref = t.copy()
    uf.at(ref, idx, v)
    got = cp.asarray(t)
    getattr(be, "scatter_" + kind)(got, tuple(cp.asarray(i) for i in idx), cp.asarray(v))
    np.testing.assert_allclose(cp.asnumpy(got).astype(np.float64), ref.astype(np.float64), rtol=1e-3)


@cuda_only
def test_scatter_max_propagates_nan_gpu():
    be = _be()
    cp = be.xp
    t = cp.zeros(3)
    be.scatter_max(t, cp.asarray([1, 1, 2]), cp.asarray([float("nan"), 1.0, 2.0]))
    got = cp.asnumpy(t)
    assert np.isnan(got[1]) and got[2] == 2.0 and got[0] == 0.0


@cuda_only
def test_deterministic_scatter_add_is_reproducible_and_sequential():
    be = _be()
    cp = be.xp
    g0 = _rng(21)
    idx = g0.integers(0, 7, 5000)
    vals = g0.standard_normal(5000).astype(np.float32) * 1e3
    ref = np.zeros(7, np.float32)
    np.add.at(ref, idx, vals)  # NumPy's add.at is sequential: the order the deterministic path follows
    pylucid.use_deterministic_algorithms(True)
    try:
        outs = []
        for _ in range(2):
            t = cp.zeros(7, dtype=np.float32)
            be.scatter_add(t, cp.asarray(idx), cp.asarray(vals))
            outs.append(cp.asnumpy(t))
        # the embedding backward follows the flag through the op
        w = pylucid.randn(7, 3, device="cuda", requires_grad=True)
        i = pylucid.tensor(idx[:200], device="cuda")
        pylucid.nn.functional.embedding(i, w).sum().backward()
        cnt = np.bincount(idx[:200], minlength=7).astype(np.float64)
        np.testing.assert_allclose(_np(w.grad), np.repeat(cnt[:, None], 3, 1))
    finally:
        pylucid.use_deterministic_algorithms(False)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], ref)


@cuda_only
def test_singular_detection_gpu():
    be = _be()
    cp = be.xp
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        be.raise_if_singular(cp.asarray([[1.0, 2.0], [2.0, 4.0]]), "inv")
    be.raise_if_singular(cp.asarray([[[1.0, 0.0], [0.0, 1.0]]]), "inv")


@cuda_only
def test_ufunc_methods_survive_vector_path():
    be = _be()
    cp = be.xp
    a = cp.arange(3.0)
    np.testing.assert_array_equal(cp.asnumpy(be.multiply.outer(a, a)), np.multiply.outer(np.arange(3.0),
                                                                                         np.arange(3.0)))
    assert float(be.add.reduce(a)) == 3.0


@cuda_only
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_op_gpu_matches_cpu(log, dim):
    x = _rng(22).standard_normal((6, 33))
    c, d = _both(x, requires_grad=True)
    fn = pylucid.log_softmax if log else pylucid.softmax
    yc, yd = fn(c, dim), fn(d, dim)
    np.testing.assert_allclose(_np(yd), _np(yc), rtol=1e-5, atol=1e-6)
    w = _rng(23).standard_normal((6, 33))
    (yc * pylucid.tensor(w)).sum().backward()
    (yd * pylucid.tensor(w, device="cuda")).sum().backward()
    np.testing.assert_allclose(_np(d.grad), _np(c.grad), rtol=1e-5, atol=1e-6)


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
# warp per row on 16-byte words, warp per row element by element, block per row (the add after)
@pytest.mark.parametrize("shape", [(1100, 96), (1030, 770), (3, 5, 300)])
def test_layer_norm_backward_adds_a_residual_gradient(dtype, shape):
    """``residual`` comes out added to dx, as one separate add gives it (within the one rounding)."""
    be, cp, g0, cols, x, gy = _ln_inputs(shape, dtype, 6)
    res = cp.asarray(g0.standard_normal(shape), dtype=dtype)
    w = cp.asarray(g0.standard_normal(cols), dtype=dtype)
    _, mean, rstd = be.layer_norm(x, w, None, 1e-5)
    dx, dw, db = be.layer_norm_backward(gy, x, mean, rstd, w)
    dx2, dw2, db2 = be.layer_norm_backward(gy, x, mean, rstd, w, residual=res)
    want = dx.astype(np.float64) + res.astype(np.float64)
    _close(dx2, want, dtype)
    assert dx2.dtype == dtype and bool((dw2 == dw).all()) and bool((db2 == db).all())


@cuda_only
@pytest.mark.parametrize("half", [False, True])
def test_residual_stream_gradient_is_added_inside_the_layer_norm_backward(half, monkeypatch):
    """A pre-norm residual block ``x + f(ln(x))``: the engine hands the residual gradient to the layer
    norm's backward kernel (no separate add), and the gradients are torch's."""
    from pylucid.ops.nn import LayerNorm

    ran = []
    orig = LayerNorm.backward_fast_accumulate

    def spy(self, be, pending, *grads):
        out = orig(self, be, pending, *grads)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(LayerNorm, "backward_fast_accumulate", spy)
    rng = _rng(7)
    x0 = rng.standard_normal((4, 300, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    grads = []
    for lib, dev in ((pylucid, "cuda"), (torch, "cpu")):
        x = lib.tensor(x0, device=dev).requires_grad_()
        ln = lib.nn.LayerNorm(64).to(dev)
        lin = lib.tensor(w1, device=dev).requires_grad_()
        ctx = lib.autocast("cuda" if lib is pylucid else "cpu", dtype=lib.bfloat16) if half else \
            __import__("contextlib").nullcontext()
        with ctx:
            h = x.to(lib.bfloat16) if half else x
            for _ in range(2):
                h = h + (ln(h) @ lin).to(h.dtype)
            loss = (h.float() ** 2).sum()
        loss.backward()
        grads.append([np.asarray(t.grad.detach().cpu().float().numpy() if lib is torch else
                                 t.grad.float().cpu().numpy()) for t in (x, lin, ln.weight)])
    assert ran and all(ran), ran  # both norms took the pending residual gradient
    tol = 5e-2 if half else 1e-4
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * float(np.abs(b).max()))


@cuda_only
def test_layer_norm_module_gpu_matches_cpu():
    pylucid.manual_seed(0)
    ln = pylucid.nn.LayerNorm(48)
    ln_gpu = pylucid.nn.LayerNorm(48).to("cuda")
    ln_gpu.load_state_dict({k: v.cuda() for k, v in ln.state_dict().items()})
    x = _rng(24).standard_normal((4, 5, 48)).astype(np.float32)
    c, d = _both(x, requires_grad=True)
    yc, yd = ln(c), ln_gpu(d)
    np.testing.assert_allclose(_np(yd), _np(yc), rtol=1e-4, atol=1e-5)
    w = _rng(25).standard_normal((4, 5, 48)).astype(np.float32)
    (yc * pylucid.tensor(w)).sum().backward()
    (yd * pylucid.tensor(w, device="cuda")).sum().backward()
    np.testing.assert_allclose(_np(d.grad), _np(c.grad), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_np(ln_gpu.weight.grad), _np(ln.weight.grad), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_np(ln_gpu.bias.grad), _np(ln.bias.grad), rtol=1e-4, atol=1e-4)


@cuda_only
@pytest.mark.parametrize("shape", [(7, 5), (6, 3, 11), (4, 64, 9, 13), (3, 2, 3, 4, 5), (1, 3, 1, 1),
                                   (64, 8, 16, 16), (3, 5, 100, 101), (2, 130, 70, 70)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_kernels_match_torch(shape, training, affine):
    """The fused per-channel kernels (forward, and dx/dweight/dbias in one backward call) against PyTorch; the
    last three shapes train over several blocks per channel (uneven ranges included)."""
    if training and np.prod(shape) == shape[1]:  # one value per channel: both refuse to train
        with pytest.raises(ValueError):
            pylucid.nn.functional.batch_norm(pylucid.ones(shape, device="cuda"), None, None, training=True)
        return
    r = _rng(31)
    c = shape[1]
    x = r.standard_normal(shape) * 3 + 1.5
    g = r.standard_normal(shape)
    w, b = r.standard_normal(c), r.standard_normal(c)
    rm, rv = r.standard_normal(c), r.random(c) + 0.5
    tx = torch.tensor(x, requires_grad=True)
    tw, tb = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
    ty = torch.nn.functional.batch_norm(tx, torch.tensor(rm), torch.tensor(rv), tw, tb, training, 0.1, 1e-5)
    ty.backward(torch.tensor(g))
    dev = dict(device="cuda", dtype=pylucid.float64)
    px = pylucid.tensor(x, requires_grad=True, **dev)
    pw, pb = (pylucid.tensor(w, requires_grad=True, **dev), pylucid.tensor(b, requires_grad=True, **dev)) \
        if affine else (None, None)
    prm, prv = pylucid.tensor(rm, **dev), pylucid.tensor(rv, **dev)
    py = pylucid.nn.functional.batch_norm(px, prm, prv, pw, pb, training, 0.1, 1e-5)
    py.backward(pylucid.tensor(g, **dev))
    np.testing.assert_allclose(_np(py), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_np(px.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_np(prm), torch.tensor(rm).numpy() if not training else
                               (0.9 * rm + 0.1 * x.mean(axis=tuple(i for i in range(len(shape)) if i != 1))),
                               rtol=1e-10, atol=1e-10)
    if affine:
        np.testing.assert_allclose(_np(pw.grad), tw.grad.numpy(), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(_np(pb.grad), tb.grad.numpy(), rtol=1e-9, atol=1e-9)


@cuda_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_relu_kernels_match_cpu(dtype):
    """relu's forward and backward kernels (half storage read directly) against the CPU, NaN and 0 included."""
    x = np.array([[-2.0, -0.0, 0.0, 0.5, np.nan, 3.0, -np.inf, np.inf]] * 3, np.float32)
    g = _rng(34).standard_normal(x.shape).astype(np.float32)
    out = []
    for dev in ("cpu", "cuda"):
        t = pylucid.tensor(x, device=dev).to(getattr(pylucid, dtype)).requires_grad_()
        y = pylucid.relu(t)
        y.backward(pylucid.tensor(g, device=dev).to(y.dtype))
        assert y.dtype == t.dtype and t.grad.dtype == t.dtype
        out.append((_np(y.float()), _np(t.grad.float())))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    np.testing.assert_array_equal(out[1][1], out[0][1])


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(8, 16, 7, 9), (32, 16, 32, 32)])
def test_batch_norm_module_gpu_matches_cpu(dtype, shape):
    """BatchNorm2d training steps on the GPU (fused kernels; the larger shape over several blocks per channel)
    and the CPU (array path), float32 and bfloat16."""
    pylucid.manual_seed(0)
    dt = getattr(pylucid, dtype)
    cpu, gpu = pylucid.nn.BatchNorm2d(16), pylucid.nn.BatchNorm2d(16).to("cuda")
    gpu.load_state_dict({k: v.cuda() for k, v in cpu.state_dict().items()})
    x = _rng(32).standard_normal(shape).astype(np.float32)
    g = _rng(33).standard_normal(shape).astype(np.float32)
    c, d = pylucid.tensor(x).to(dt).requires_grad_(), pylucid.tensor(x, device="cuda").to(dt).requires_grad_()
    yc, yd = cpu(c), gpu(d)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_np(yd.float()), _np(yc.float()), **tol)
    (yc.float() * pylucid.tensor(g)).sum().backward()
    (yd.float() * pylucid.tensor(g, device="cuda")).sum().backward()
    np.testing.assert_allclose(_np(d.grad.float()), _np(c.grad.float()), **tol)
    np.testing.assert_allclose(_np(gpu.weight.grad), _np(cpu.weight.grad), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(_np(gpu.running_var), _np(cpu.running_var), rtol=1e-4, atol=1e-4)


@cuda_only
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gpu_matches_cpu(reduction):
    x = _rng(26).standard_normal((8, 11)).astype(np.float32) * 3
    t = np.array([0, 10, 3, -100, 5, 5, 1, -100])
    c, d = _both(x, requires_grad=True)
    F = pylucid.nn.functional
    lc = F.cross_entropy(c, pylucid.tensor(t), reduction=reduction)
    ld = F.cross_entropy(d, pylucid.tensor(t, device="cuda"), reduction=reduction)
    np.testing.assert_allclose(_np(ld), _np(lc), rtol=1e-5, atol=1e-6)
    lc.sum().backward()
    ld.sum().backward()
    np.testing.assert_allclose(_np(d.grad), _np(c.grad), rtol=1e-5, atol=1e-6)
    tt = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), reduction=reduction)
    np.testing.assert_allclose(_np(ld), tt.numpy(), rtol=1e-5, atol=1e-6)


@cuda_only
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_gpu_matches_cpu(padding_idx):
    pylucid.manual_seed(1)
    emb = pylucid.nn.Embedding(10, 6, padding_idx=padding_idx)
    emb_gpu = pylucid.nn.Embedding(10, 6, padding_idx=padding_idx).to("cuda")
    emb_gpu.load_state_dict({k: v.cuda() for k, v in emb.state_dict().items()})
    idx = np.array([[1, 2, 2, 9], [0, 2, 1, 1]])
    w = _rng(27).standard_normal((2, 4, 6)).astype(np.float32)
    (emb(pylucid.tensor(idx)) * pylucid.tensor(w)).sum().backward()
    (emb_gpu(pylucid.tensor(idx, device="cuda")) * pylucid.tensor(w, device="cuda")).sum().backward()
    np.testing.assert_allclose(_np(emb_gpu.weight.grad), _np(emb.weight.grad), rtol=1e-5, atol=1e-6)


@cuda_only
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_embedding_index_check_raises_at_the_next_synchronisation(idx_dtype):
    F = pylucid.nn.functional
    w = pylucid.randn(10, 4, device="cuda", requires_grad=True)
    F.embedding(pylucid.tensor(np.array([[0, 9], [3, 3]], idx_dtype), device="cuda"), w)
    pylucid.cuda.synchronize()  # in range: nothing to report
    F.embedding(pylucid.tensor(np.array([1, 10, 2], idx_dtype), device="cuda"), w)
    with pytest.raises(IndexError, match=r"^embedding: index out of range in self \(indices must be in \[0, 10\), "
                                         r"got min 1, max 10\)"):
        pylucid.cuda.synchronize()
    pylucid.cuda.synchronize()  # reported once
    # a negative index: the lookup reads a wrapped row, the backward skips it (no write out of bounds), and the
    # error comes with the first read on the host
    out = F.embedding(pylucid.tensor(np.array([-1, 2], idx_dtype), device="cuda"), w)
    out.sum().backward()
    with pytest.raises(IndexError, match="got min -1, max 2"):
        out.sum().item()
    g = w.grad.cpu().numpy()
    np.testing.assert_array_equal(g[2], np.ones(4, np.float32))
    np.testing.assert_array_equal(np.delete(g, 2, axis=0), np.zeros((9, 4), np.float32))


@cuda_only
def test_index_range_checks_every_size_and_more_than_the_slots():
    import cupy as cp

    be = pylucid.device("cuda").backend
    rng = _rng(31)
    seen = []
    for n in (1, 31, 32, 33, 1024, 1025, 5000):
        a = rng.integers(-50, 50, n)
        be.check_index_range(cp.asarray(a), 100, 200, lambda lo, hi: seen.append((lo, hi)) or IndexError("x"))
        with pytest.raises(IndexError):
            be.raise_index_errors()
        assert seen.pop() == (a.min(), a.max())
        # a strided view of int32 indices: the same values
        v = cp.asarray(a.astype(np.int32))[::-1]
        be.check_index_range(v, -50, 50, lambda lo, hi: IndexError(f"{lo} {hi}"))
        be.raise_index_errors()  # in range
    # more pending checks than slots: the oldest are waited for, one failure among them is still reported
    # (the failure surfaces at a later check that finds its copy done, or at the synchronisation)
    with pytest.raises(IndexError, match="bad 0 4"):
        for k in range(be.CHECK_SLOTS + 9):
            be.check_index_range(cp.arange(5), 0, 4 if k == 3 else 5, lambda lo, hi: IndexError(f"bad {lo} {hi}"))
        pylucid.cuda.synchronize()
    for _ in range(be.CHECK_SLOTS + 9):  # every slot is free again
        be.check_index_range(cp.arange(5), 0, 5, lambda lo, hi: IndexError("not expected"))
    pylucid.cuda.synchronize()
    assert len(be._check_bufs[3]) == be.CHECK_SLOTS


@cuda_only
def test_embedding_index_check_does_not_wait_for_the_gpu():
    import cupy as cp

    spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long n) {
        long long t0 = clock64(); while (clock64() - t0 < n) {} }""", "spin")
    w = pylucid.randn(10, 4, device="cuda")
    idx = pylucid.tensor([1, 2], device="cuda")
    pylucid.nn.functional.embedding(idx, w)  # kernels compiled
    pylucid.cuda.synchronize()
    khz = cp.cuda.Device().attributes["ClockRate"]
    spin((1,), (1,), (khz * 1000,))  # about a second of GPU time
    busy = cp.cuda.get_current_stream().record()
    pylucid.nn.functional.embedding(idx, w)
    assert not busy.done  # the lookup and its index check returned while the GPU was still busy
    pylucid.cuda.synchronize()


def _mlp(seed):
    pylucid.manual_seed(seed)
    nn = pylucid.nn
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))


@cuda_only
@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "SGD", "Adam-amsgrad", "Adam-maximize"])
def test_training_steps_gpu_match_cpu(opt_name):
    name, _, variant = opt_name.partition("-")
    kw = {"lr": 1e-2}
    if name != "SGD":
        kw["weight_decay"] = 0.01
    if variant:
        kw[variant] = True
    cpu_m, gpu_m = _mlp(3), _mlp(3).to("cuda")
    gpu_m.load_state_dict({k: v.cuda() for k, v in cpu_m.state_dict().items()})
    oc = getattr(pylucid.optim, name)(cpu_m.parameters(), **kw)
    og = getattr(pylucid.optim, name)(gpu_m.parameters(), **kw)
    g0 = _rng(28)
    F = pylucid.nn.functional
    for _ in range(4):
        x = g0.standard_normal((9, 12)).astype(np.float32)
        t = g0.integers(0, 5, 9)
        for m, o, dev in ((cpu_m, oc, "cpu"), (gpu_m, og, "cuda")):
            o.zero_grad()
            loss = F.cross_entropy(m(pylucid.tensor(x, device=dev)), pylucid.tensor(t, device=dev))
            loss.backward()
            o.step()
    for (k, pc), pg in zip(cpu_m.state_dict().items(), gpu_m.state_dict().values()):
        assert pg.device.type == "cuda"
        np.testing.assert_allclose(_np(pg), _np(pc), rtol=1e-4, atol=1e-5, err_msg=k)


@cuda_only
@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_adam_step_on_cuda_is_one_fused_call_per_group(opt_name, monkeypatch):
    """Adam/AdamW on contiguous float32 CUDA parameters take the fused multi-tensor op (one backend call per
    group and step count), which launches the multi-tensor kernel once; AMSGrad keeps the generic path."""
    real = pylucid.ops._fused_adam_
    calls, launches = [], []

    def counting(params, *args, **kwargs):
        calls.append(len(params))
        return real(params, *args, **kwargs)

    be = pylucid.zeros(1, device="cuda").device.backend
    real_fused = be._adam_fused
    monkeypatch.setattr(pylucid.ops, "_fused_adam_", counting)
    monkeypatch.setattr(be, "_adam_fused", lambda *a: (launches.append(1), real_fused(*a)))
    m = _mlp(6).to("cuda")
    opt = getattr(pylucid.optim, opt_name)(m.parameters(), lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        m(pylucid.randn(3, 12, device="cuda")).square().sum().backward()
        opt.step()
    assert calls == [4, 4] and launches == [1, 1]
    assert all(st["step"] == 2 for st in opt.state.values())
    amsgrad = pylucid.optim.Adam(m.parameters(), amsgrad=True)
    m(pylucid.randn(3, 12, device="cuda")).square().sum().backward()
    amsgrad.step()
    assert calls == [4, 4]


@cuda_only
@pytest.mark.parametrize("kwargs", [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
                                    dict(momentum=0.7, dampening=0.2, maximize=True)])
def test_sgd_step_on_cuda_is_one_launch_and_matches_cpu(kwargs, monkeypatch):
    """SGD on contiguous float32 CUDA parameters runs the multi-tensor kernel once per step and follows the CPU
    step (float32 rounding: the kernel may contract a product and a sum into one FMA)."""
    be = pylucid.zeros(1, device="cuda").device.backend
    launches = []
    real = be._multi_tables
    monkeypatch.setattr(be, "_multi_tables", lambda *a: (launches.append(1), real(*a))[1])
    cpu_m = _mlp(6)
    gpu_m = _mlp(6).to("cuda")
    gpu_m.load_state_dict({k: v.cuda() for k, v in cpu_m.state_dict().items()})
    oc, og = pylucid.optim.SGD(cpu_m.parameters(), lr=0.05, **kwargs), pylucid.optim.SGD(gpu_m.parameters(), lr=0.05,
                                                                                         **kwargs)
    g0 = _rng(5)
    for _ in range(4):
        x = g0.standard_normal((9, 12)).astype(np.float32)
        for m, o, dev in ((cpu_m, oc, "cpu"), (gpu_m, og, "cuda")):
            o.zero_grad()
            m(pylucid.tensor(x, device=dev)).square().sum().backward()
            o.step()
    assert len(launches) == 4
    for (k, pc), pg in zip(cpu_m.state_dict().items(), gpu_m.state_dict().values()):
        np.testing.assert_allclose(_np(pg), _np(pc), rtol=1e-4, atol=1e-5, err_msg=k)


@cuda_only
def test_conv_pool_gpu_match_cpu():
    nn = pylucid.nn
    pylucid.manual_seed(4)
    cpu_m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4))
    gpu_m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4)).to("cuda")
    gpu_m.load_state_dict({k: v.cuda() for k, v in cpu_m.state_dict().items()})
    x = _rng(29).standard_normal((2, 3, 8, 8)).astype(np.float32)
    c, d = _both(x, requires_grad=True)
    yc, yd = cpu_m(c), gpu_m(d)
    np.testing.assert_allclose(_np(yd), _np(yc), rtol=1e-4, atol=1e-4)
    yc.square().sum().backward()
    yd.square().sum().backward()
    np.testing.assert_allclose(_np(d.grad), _np(c.grad), rtol=1e-3, atol=1e-3)
    for (k, pc), pg in zip(cpu_m.named_parameters(), gpu_m.parameters()):
        np.testing.assert_allclose(_np(pg.grad), _np(pc.grad), rtol=1e-3, atol=1e-3, err_msg=k)


@cuda_only
def test_module_to_moves_optimizer_state_and_gradscaler():
    m = _mlp(5)
    opt = pylucid.optim.Adam(m.parameters(), lr=1e-3)
    m(pylucid.randn(2, 12)).sum().backward()
    opt.step()
    m.to("cuda")
    opt.zero_grad()
    scaler = pylucid.amp.GradScaler("cuda")
    with pylucid.amp.autocast("cuda", dtype=pylucid.bfloat16):
        loss = m(pylucid.randn(2, 12, device="cuda")).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    for st in opt.state.values():
        assert st["exp_avg"].device.type == "cuda"


@cuda_only
def test_polygamma_digamma_gpu():
    x = np.array([0.5, 1.0, 2.5, 7.0])
    c, d = _both(x)
    for n in (0, 1, 3):
        np.testing.assert_allclose(_np(pylucid.polygamma(n, d)), _np(pylucid.polygamma(n, c)), rtol=1e-10)
    np.testing.assert_allclose(_np(pylucid.digamma(d)), _np(pylucid.digamma(c)), rtol=1e-10)


@cuda_only
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_optimizer_state_follows_module_to_cuda(opt_name):
    """Module.to("cuda") moves parameters, buffers and (on the next step) optimizer state."""
    import pylucid.nn as nn

    def make():
        pylucid.manual_seed(3)
        m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        kw = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.01}
        return m, getattr(pylucid.optim, opt_name)(m.parameters(), **kw)

    x = pylucid.randn(16, 4)

    def step(m, opt, dev):
        loss = (m(x.to(dev)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    m_cpu, o_cpu = make()
    ref = [step(m_cpu, o_cpu, "cpu") for _ in range(4)]
    m, o = make()
    got = [step(m, o, "cpu") for _ in range(2)]
    weight = m[0].weight
    m.to("cuda")
    assert m[0].weight is weight and weight.device.type == "cuda" and m[1].running_mean.device.type == "cuda"
    got += [step(m, o, "cuda") for _ in range(2)]
    assert all(v.device.type == "cuda" for st in o.state.values() for v in st.values() if isinstance(v, pylucid.Tensor))
    np.testing.assert_allclose(got, ref, rtol=1e-5)


# ----------------------------------------------------- fast element-wise launches (CUDABackend.fast_launch)
# CPU half: _FastLaunch's decisions with a fake array class and a NumPy emulation of the kernels.
from pylucid.backend import cuda as _cuda_mod  # noqa: E402

_BF16_NP = np.dtype(ml_dtypes.bfloat16)
_FAST_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), _BF16_NP]


class _FakeArr(np.ndarray):
    """Stands in for cupy.ndarray: exposes the C-level ``_c_contiguous`` flag CuPy has."""

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


def _fa(x, dtype=None):
    return np.ascontiguousarray(np.asarray(x, dtype=dtype)).view(_FakeArr)


class _FakeBackend:
    fast_launch = True


def _emulated_build(launches):
    """``build(op, kind, dtype)`` whose kernels compute with NumPy the way the CUDA source does."""

    def build(op, kind, dt):
        if cuda_sources.fast_source(op, kind, np.dtype(dt).name) is None:
            return None
        half = dt in (np.dtype(np.float16), _BF16_NP)
        cdt = np.float32 if half else dt
        uf = getattr(np, op)

        def kern(grid, block, args):
            assert isinstance(grid, tuple) and isinstance(block, tuple) and grid[0] * block[0] >= args[-1]
            launches.append((op, kind, dt))
            n = args[-1]
            assert isinstance(n, int) and n > 0
            if kind == "u":
                a, c = args[0], args[1]
                c[...] = uf(np.asarray(a).astype(cdt)).astype(dt)
                return
            x, y, c = args[0], args[1], args[2]
            if kind == "as":
                assert y.__class__ is float
                y = np.asarray(y).astype(cdt)  # the kernel's (float)s: one rounding of the double
            if kind == "sa":
                assert x.__class__ is float
                x = np.asarray(x).astype(cdt)
            c[...] = uf(np.asarray(x).astype(cdt), np.asarray(y).astype(cdt)).astype(dt)

        return kern

    return build


def _fast(op, launches, unary=False, generic=None, vec_min=None):
    be = _FakeBackend()
    gen = generic or (lambda *a, **k: getattr(np, op)(*[np.asarray(v) for v in a], **k))
    alloc = lambda shape, dt: np.empty(shape, dt).view(_FakeArr)  # noqa: E731
    return _cuda_mod._FastLaunch(be, op, gen, _FakeArr, alloc, _emulated_build(launches), unary=unary,
                                 vec_min=vec_min), be


@pytest.mark.parametrize("op", sorted(cuda_sources.FAST_BINARY))
@pytest.mark.parametrize("dt", _FAST_DTYPES, ids=lambda d: d.name)
def test_fast_launch_binary_decisions_cpu(op, dt):
    launches = []
    f, be = _fast(op, launches)
    rng = _rng(1)
    a = _fa(rng.standard_normal((3, 4)) + 2, dt)
    b = _fa(rng.standard_normal((3, 4)) + 2, dt)
    ref = getattr(np, op)
    # taken: same shape/dtype/contiguous, 0-d, scalar of the array's own dtype in either position
    cases = [((a, b), "aa"), ((_fa(2.5, dt), _fa(1.5, dt)), "aa"), ((a, dt.type(0.75)), "as"),
             ((dt.type(0.75), a), "sa")]
    if dt in (np.float32, np.float64, _BF16_NP):
        cases += [((a, 0.1), "as"), ((0.1, a), "sa"), ((a, 3), "as"), ((3, a), "sa")]
    for args, kind in cases:
        n0 = len(launches)
        out = f(*args)
        assert len(launches) == n0 + 1 and launches[-1] == (op, kind, dt), (args, kind)
        assert out.dtype == dt and out.shape == np.broadcast(*[np.asarray(v) for v in args]).shape
        # the reference: float32 arithmetic for half types (a Python scalar rounded once to float32)
        cdt = np.float32 if dt in (np.float16, _BF16_NP) else dt
        want = ref(*[np.asarray(v).astype(cdt) if isinstance(v, np.ndarray) or v.__class__ is dt.type
                     else np.asarray(float(v)).astype(cdt) for v in args]).astype(dt)
        np.testing.assert_array_equal(np.asarray(out).astype(np.float64), want.astype(np.float64))
    # not taken: broadcasting, strided views, empty, mixed dtypes, keyword arguments, Python scalars with half
    # arrays, NumPy scalars of another dtype, huge ints, kill-switch off
    other = np.float64 if dt != np.float64 else np.float32
    fallbacks = [(a, _fa(np.ones(4), dt)), (_fa(np.ones((3, 1)), dt), a), (a[:, ::2], b[:, ::2]),
                 (a.T, b.T), (_fa(np.ones((0, 4)), dt), _fa(np.ones((0, 4)), dt)), (a, b.astype(other).view(_FakeArr)),
                 (a, np.dtype(other).type(2.0)), (a[:, ::2], 2.0 if dt != _BF16_NP else dt.type(2)), (a, True),
                 (a, 2 ** 60), (np.asarray(a), np.asarray(b))]
    if dt == np.float16:  # CuPy's float16 ufunc already keeps float16 with a Python scalar
        fallbacks += [(a, 0.5), (0.5, a), (a, 2)]
    for args in fallbacks:
        n0 = len(launches)
        f(*args)
        assert len(launches) == n0, args
    n0 = len(launches)
    f(a, b, out=np.empty((3, 4), dt))
    be.fast_launch = False
    f(a, b)
    f(a, dt.type(2))
    assert len(launches) == n0


def test_fast_launch_unary_and_other_dtypes_cpu():
    launches = []
    f, be = _fast("exp", launches, unary=True)
    x = _fa(np.linspace(-2, 2, 7), np.float32)
    np.testing.assert_array_equal(f(x), np.exp(np.asarray(x)))
    assert launches == [("exp", "u", np.dtype(np.float32))]
    for args in [(_fa(x, np.float16),), (_fa(x, _BF16_NP),), (x[::2],), (_fa(np.ones(0), np.float32),), (1.5,),
                 (_fa([1, 2], np.int64),)]:
        f(*args)
    assert len(launches) == 1  # transcendental half, strided, empty, scalar, int: the generic call
    g, _ = _fast("negative", launches, unary=True)
    np.testing.assert_array_equal(g(_fa([1.5, -2.0], _BF16_NP)).astype(np.float32), [-1.5, 2.0])
    assert launches[-1] == ("negative", "u", _BF16_NP)
    # integer/bool/complex arrays: no kernel built, generic call, and the table remembers that (one lookup)
    h, _ = _fast("add", launches)
    n0 = len(launches)
    np.testing.assert_array_equal(h(_fa([1, 2], np.int64), _fa([3, 4], np.int64)), [4, 6])
    np.testing.assert_array_equal(h(_fa([1, 2], np.int64), 1), [2, 3])
    h(_fa([1 + 1j]), _fa([1j]))
    assert len(launches) == n0 and h._aa[np.dtype(np.int64)] is None and h._as.get(np.dtype(np.int64)) is None


def test_fast_launch_keeps_vector_path_for_large_float32_cpu():
    launches, generic_calls = [], []

    def generic(a, b, **kw):
        generic_calls.append(a.size)
        return np.multiply(np.asarray(a), np.asarray(b))

    f, _ = _fast("multiply", launches, generic=generic, vec_min=64)
    big, small = _fa(np.ones(64), np.float32), _fa(np.ones(63), np.float32)
    f(big, big)
    f(small, small)
    f(_fa(np.ones(64), np.float64), _fa(np.ones(64), np.float64))
    f(big, 2.0)
    assert generic_calls == [64] and len(launches) == 3


def test_fast_launch_forwards_ufunc_methods_cpu():
    f, _ = _fast("multiply", [], generic=np.multiply)
    np.testing.assert_array_equal(f.outer(np.arange(2.0), np.arange(3.0)), np.multiply.outer(np.arange(2.0),
                                                                                             np.arange(3.0)))
    assert f.reduce(np.arange(1.0, 4.0)) == 6.0


@pytest.mark.parametrize("op,kind", [(op, k) for op in cuda_sources.FAST_BINARY for k in ("aa", "as", "sa")]
                         + [(op, "u") for op in cuda_sources.FAST_UNARY])
def test_fast_kernel_sources_are_well_formed(op, kind):
    for name in ("float32", "float64", "float16", "bfloat16"):
        got = cuda_sources.fast_source(op, kind, name)
        if kind == "u" and name in ("float16", "bfloat16") and op not in cuda_sources.FAST_UNARY_HALF:
            assert got is None
            continue
        src, kname = got
        assert f"void {kname}(" in src and src.count("{") == src.count("}") and "scalar_t" not in src
    assert cuda_sources.fast_source(op, kind, "int64") is None
    assert cuda_sources.fast_source("maximum", kind, "float32") is None


def _param_layout(src, kname):
    """The argument layout (p: pointer, d: double, q: long long) of kernel ``kname`` in ``src``."""
    sig = src.split(f"void {kname}(", 1)[1].split(")", 1)[0]
    kinds = []
    for param in sig.split(","):
        param = param.strip()
        kinds.append("p" if "*" in param else "d" if param.startswith("double") else
                     "q" if param.startswith("long long") else "?")
    return "".join(kinds)


@pytest.mark.parametrize("kind", sorted(cuda_launch.RAW_LAYOUTS))
def test_raw_launch_layouts_match_kernel_signatures(kind):
    """raw_launcher writes each argument into the slot and type the kernel's signature declares."""
    if kind == "cast":
        sources = [cuda_sources.cast_source(a, b) for a, b in sorted(cuda_sources.CAST_PAIRS)]
    elif kind == "int_s":
        sources = [cuda_sources.int_scalar_inplace_source(op, dt) for op in cuda_sources.INPLACE_INT_OPS
                   for dt in ("int32", "int64")]
    else:
        ops = cuda_sources.FAST_UNARY if kind == "u" else cuda_sources.FAST_BINARY
        sources = [cuda_sources.fast_source(op, kind, dt) for op in ops for dt in ("float32", "float64", "bfloat16")]
    sources = [s for s in sources if s is not None]
    assert sources
    for src, kname in sources:
        assert _param_layout(src, kname) == cuda_launch.RAW_LAYOUTS[kind], kname

@pytest.mark.parametrize("layout", sorted(set(cuda_launch.RAW_LAYOUTS.values())))
def test_raw_launch_closure_writes_every_slot(layout):
    """The generated closure of each layout puts each argument in its slot, in the slot's type, and launches
    on the current stream; another thread's call goes to the kernel's own call."""

    class Arr:  # what the closure reads of a CuPy array
        def __init__(self, ptr):
            self.data = type("Mem", (), {"ptr": ptr})()

    launches, fallbacks = [], []
    n = len(layout)
    q = np.zeros(n, np.uint64)
    slots = np.array([q.ctypes.data + 8 * i for i in range(n)], np.uint64)
    make = cuda_launch._raw_closure_factory(layout)
    stream = type("Stream", (), {"ptr": 77})()
    owner = [1]
    k = make(lambda grid, block, args: fallbacks.append(args), 1234, q, q.view(np.float64), slots.ctypes.data,
             lambda *a: launches.append((a, q.copy())), lambda: stream, 1, lambda: owner[0])
    args = tuple(Arr(1000 + j) if ch == "p" else 0.25 * (j + 1) if ch == "d" else 10**12 + j
                 for j, ch in enumerate(layout))
    k((5,), (256,), args)
    assert len(launches) == 1 and not fallbacks
    call, block = launches[0]
    assert call == (1234, 5, 1, 1, 256, 1, 1, 0, 77, slots.ctypes.data, 0)
    for j, ch in enumerate(layout):
        got = block.view(np.float64)[j] if ch == "d" else int(block[j])
        assert got == (1000 + j if ch == "p" else args[j]), (layout, j)
    owner[0] = 2  # another thread
    k((5,), (256,), args)
    assert len(launches) == 1 and fallbacks == [args]



@pytest.mark.parametrize("layout", ["pppppppqfii", "ppqud", "p", ""])
def test_generic_launch_closure_writes_every_slot(layout):
    """generic_launcher's generated closure writes each argument into its slot in the declared width (a
    32-bit value in the low half of its slot), takes an integer as a raw pointer, launches 1-3 dim grids
    on the current stream, and hands another thread's call, a wrong argument count or a pointer of
    another kind to the kernel's own call."""

    class Arr:  # what the closure reads of a CuPy array
        def __init__(self, ptr):
            self.data = type("Mem", (), {"ptr": ptr})()

    launches, fallbacks = [], []
    n = len(layout)
    q = np.zeros(max(n, 1), np.uint64)
    slots = np.array([q.ctypes.data + 8 * i for i in range(max(n, 1))], np.uint64)
    stream = type("Stream", (), {"ptr": 77})()
    owner = [1]
    k = cuda_launch._generic_closure_factory(layout)(
        lambda grid, block, args: fallbacks.append(args), 1234, q, slots.ctypes.data,
        lambda *a: launches.append((a, q.copy())), lambda: stream, 1, lambda: owner[0], Arr)
    values = {"p": lambda j: Arr(1000 + j), "q": lambda j: -(10**12) - j, "i": lambda j: np.int32(-5 - j),
              "u": lambda j: np.uint32(3 * 10**9 + j), "f": lambda j: np.float32(0.25 * (j + 1)),
              "d": lambda j: 0.1 * (j + 1)}
    args = tuple(values[ch](j) for j, ch in enumerate(layout))
    k((5, 3), (32, 8, 2), args)
    assert len(launches) == 1 and not fallbacks
    call, block = launches[0]
    assert call == (1234, 5, 3, 1, 32, 8, 2, 0, 77, slots.ctypes.data, 0)
    views = {"p": block, "q": block.view(np.int64), "d": block.view(np.float64)}
    for j, ch in enumerate(layout):
        if ch in "iuf":
            got = block.view({"i": np.int32, "u": np.uint32, "f": np.float32}[ch])[2 * j]
            want = args[j]
        else:
            got = views[ch][j]
            want = 1000 + j if ch == "p" else args[j]
        assert got == want, (layout, j, got, want)
    k((7,), (64,), args)  # one-dim grid and block
    assert launches[-1][0][1:7] == (7, 1, 1, 64, 1, 1)
    if "p" in layout:
        j = layout.index("p")
        k((1,), (1,), args[:j] + (np.uint64(0),) + args[j + 1:])  # a null pointer
        assert int(launches[-1][1][j]) == 0
        odd = args[:j] + ("not a pointer",) + args[j + 1:]
        k((1,), (1,), odd)
        assert fallbacks == [odd]
        fallbacks.clear()
    k((1,), (1,), args + (0,))  # another argument count
    owner[0] = 2  # another thread
    k((1,), (1,), args)
    assert fallbacks == [args + (0,), args]


def test_add_bias_cpu_broadcasts_like_plus():
    from pylucid.backend.cpu import CPUBackend

    be = CPUBackend()
    y = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, 2.0, 3.0])
    ref = y + b
    out = be.add_bias_(y.copy(), b)
    np.testing.assert_array_equal(out, ref)
    # a bias that would grow the output is not written in place
    y1 = np.arange(3.0)
    np.testing.assert_array_equal(be.add_bias_(y1, np.ones((2, 3))), np.arange(3.0) + np.ones((2, 3)))
    np.testing.assert_array_equal(y1, np.arange(3.0))


@cuda_only
@pytest.mark.parametrize("dt", _FAST_DTYPES, ids=lambda d: d.name)
@single_gpu
def test_add_bias_kernel_matches_broadcast_add(dt):
    be = _be()
    for shape in [(5,), (7, 33), (4, 9, 512), (3, 1)]:
        y, _ = _gpu_operands(be.xp, dt, shape)
        b, _ = _gpu_operands(be.xp, dt, shape[-1:])
        ref = y + b
        out = be.add_bias_(y.copy(), b)
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(_host(be, out), _host(be, ref))
    assert be._bias_add.get((np.dtype(dt), np.dtype(dt))) is not None
    if dt.itemsize == 2:  # autocast's float32 bias on a half output: added in float32, rounded once
        y, _ = _gpu_operands(be.xp, dt, (4, 9, 512))
        b = be.xp.asarray(_rng(3).standard_normal(512).astype(np.float32))
        ref = (y.astype(np.float32) + b).astype(dt)
        out = be.add_bias_(y.copy(), b)
        assert out.dtype == dt
        np.testing.assert_array_equal(_host(be, out), _host(be, ref))


@cuda_only
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_linear_autocast_cuda_matches_cpu(half):
    """LinearAutocast on the GPU (float32 C from half GEMMs, float32 bias gradient from the column-sum kernel,
    mixed bias add) against the same op on the CPU."""
    import pylucid.nn.functional as F

    g = _rng(7)
    xn, wn, bn = (g.standard_normal(s).astype(np.float32) for s in ((4, 16, 64), (48, 64), (48,)))
    res = {}
    for dev in ("cpu", "cuda"):
        x, w, b = (pylucid.tensor(a, device=dev, requires_grad=True) for a in (xn, wn, bn))
        with pylucid.amp.autocast(dev, dtype=getattr(pylucid, half)):
            y = F.linear(x, w, b)
        assert y.grad_fn.name() == "LinearAutocastBackward" and y.dtype == getattr(pylucid, half)
        (y.float() ** 2).sum().backward()
        res[dev] = [y.float().detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in (x, w, b)]
        assert all(t.grad.dtype == pylucid.float32 for t in (x, w, b))
    for a, c in zip(res["cpu"], res["cuda"]):
        np.testing.assert_allclose(c, a, rtol=2e-2, atol=2e-2 * np.abs(a).max())
    assert 4 in _lt_epilogues(_be())  # the float32 bias went into cuBLASLt's bias epilogue (rounded to half)


@pytest.mark.parametrize("name", sorted(cuda_sources.KERNELS))
def test_every_kernel_has_a_raw_launch_layout(name):
    """get_kernel's direct launches need a parsed layout for every kernel (else CuPy's call is kept)."""
    index_kernel = name in cuda_sources._INDEX_KERNELS  # these run over int32/int64 indices
    for dtype in ((np.int32, np.int64) if index_kernel else (np.float32, np.float64)):
        src = cuda_sources.kernel_source(name, dtype)
        layout = cuda_launch.signature_layout(src, name)
        assert layout is not None and layout == _param_layout_full(src, name), (name, layout)
    layer_norm_src = cuda_sources.KERNELS["layer_norm_fwd"].replace("scalar_t", "float")
    assert cuda_launch.signature_layout(layer_norm_src, "layer_norm_fwd") == "pppppppqfii"


def _param_layout_full(src, kname):
    sig = src.split(f"void {kname}(", 1)[1].split(")", 1)[0]
    out = []
    for param in sig.split(","):
        p = param.strip().replace("const ", "")
        out.append("p" if "*" in p else "q" if p.startswith(("long long", "unsigned long long")) else
                   "u" if p.startswith("unsigned") else "i" if p.startswith("int") else
                   "d" if p.startswith("double") else "f" if p.startswith("float") else "?")
    return "".join(out)


# GPU half: the fast kernels against CuPy's ufuncs (the kill-switch off), bit for bit where the arithmetic is
# the same; and the end-to-end op path in both modes.
@pytest.fixture
def _generic_mode(monkeypatch):
    from pylucid.backend.cuda import CUDABackend

    def run(fn):
        monkeypatch.setattr(CUDABackend, "fast_launch", False)
        try:
            return fn()
        finally:
            monkeypatch.setattr(CUDABackend, "fast_launch", True)

    return run


def _gpu_operands(cp, dt, shape, seed=0):
    rng = _rng(seed)
    a = np.asarray(rng.standard_normal(shape) * 3)
    b = np.asarray(rng.standard_normal(shape) * 3 + 0.5)
    if a.size:  # specials: zeros (x/0 -> inf/nan), inf, nan
        a.flat[0], b.flat[0] = 0.0, 0.0
        if a.size > 3:
            a.flat[1], a.flat[2], b.flat[3] = np.inf, np.nan, -np.inf
    to = lambda x: pylucid.tensor(x.astype(np.float32)).to(_dt_pl(dt)).to("cuda")._data  # noqa: E731
    return to(a), to(b)


def _dt_pl(dt):
    return {np.dtype(np.float32): pylucid.float32, np.dtype(np.float64): pylucid.float64,
            np.dtype(np.float16): pylucid.float16, _BF16_NP: pylucid.bfloat16}[np.dtype(dt)]


def _host(be, x):
    return np.asarray(be.to_numpy(x)).astype(np.float64)


def _check_same(be, fast, gen, exact, rtol):
    assert fast.dtype == gen.dtype and fast.shape == gen.shape
    if exact:
        np.testing.assert_array_equal(_host(be, fast), _host(be, gen))
    else:
        np.testing.assert_allclose(_host(be, fast), _host(be, gen), rtol=rtol, atol=0, equal_nan=True)


@cuda_only
@pytest.mark.parametrize("op", sorted(cuda_sources.FAST_BINARY))
@pytest.mark.parametrize("dt", _FAST_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (1,), (1000,), (7, 33), (3, 5, 1031), (70000,)])
@single_gpu
def test_fast_launch_binary_matches_ufunc_gpu(op, dt, shape, _generic_mode):
    be = _be()
    f = getattr(be, op)
    a, b = _gpu_operands(be.xp, dt, shape)
    # bfloat16 division: the kernel rounds the float32 quotient once (PyTorch's result); CuPy's bfloat16
    # division may use an approximate reciprocal, so allow one bfloat16 ulp there
    exact = not (dt == _BF16_NP and op == "true_divide")
    scalars = [dt.type(0.3)] + ([0.1, -3, 1e30] if dt in (np.float32, np.float64) else [])
    calls = [(a, b)] + [(a, s) for s in scalars] + [(s, a) for s in scalars]
    for args in calls:
        out = f(*args)
        ref = _generic_mode(lambda: f(*args))
        _check_same(be, out, ref, exact, 2 ** -7)
    kinds = [("aa", f._aa)] if not (dt == np.float32 and np.prod(shape) >= _cuda_mod._VEC_MIN) else []
    for kind, table in kinds + [("as", f._as), ("sa", f._sa)]:
        assert table.get(dt) is not None, (kind, cuda_launch.fast_kernel_errors)  # the fast kernel was built and used


@cuda_only
@pytest.mark.parametrize("dt", [np.dtype(np.float16), _BF16_NP], ids=lambda d: d.name)
@single_gpu
def test_fast_half_kernels_on_unaligned_views_gpu(dt, _generic_mode):
    """The half kernels take 16-byte words where the bases are aligned; views at an odd offset (x[1:]) take the
    one-element path: same results either way."""
    be = _be()
    a, b = _gpu_operands(be.xp, dt, (1003,))
    for x, y in ((a[1:], b[1:]), (a[1:], b[:-1]), (a[3:], b[3:])):
        out = be.add(x, y)
        _check_same(be, out, _generic_mode(lambda: be.add(x, y)), True, 0)
        c = be.astype(x, np.dtype(np.float32))
        np.testing.assert_array_equal(_host(be, c), _host(be, x).astype(np.float32))


@cuda_only
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_half_logits_under_autocast_reads_them_in_place(half, reduction, monkeypatch):
    """Under autocast, cross entropy of half logits is float32 (the op is ForceFP32) without a float32 copy of
    the logits: the loss equals PyTorch's float32 cross entropy of the same (half-rounded) values, and the
    logits' gradient is PyTorch's float32 gradient rounded once to the half dtype."""
    g0 = _rng(40)
    x = (g0.standard_normal((37, 1029)) * 4).astype(np.float32)
    t = g0.integers(0, 1029, 37)
    t[5] = -100
    hx = pylucid.tensor(x, device="cuda").to(getattr(pylucid, half)).detach().requires_grad_()
    casts = _record_casts(monkeypatch, hx.device.backend)
    with pylucid.autocast("cuda", dtype=getattr(pylucid, half)):
        loss = pylucid.nn.functional.cross_entropy(hx, pylucid.tensor(t, device="cuda"), reduction=reduction)
    assert loss.dtype is pylucid.float32
    assert not [c for c in casts if c[0] == (37, 1029) and c[1] != c[2]], casts  # no copy of the logits
    (loss.sum() if reduction == "none" else loss).backward()
    assert hx.grad.dtype is getattr(pylucid, half)
    tx = torch.tensor(hx.detach().float().cpu().numpy(), requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t), reduction=reduction)
    (tl.sum() if reduction == "none" else tl).backward()
    np.testing.assert_allclose(loss.detach().cpu().numpy(), tl.detach().numpy(), rtol=2e-6, atol=2e-6)
    ref_g = tx.grad.to(getattr(torch, half)).float().numpy()
    got_g = hx.grad.float().cpu().numpy()
    # one half ulp where the float32 gradients differ in their last bits before rounding
    # (float16: one subnormal step, 2**-24, below 2**-14)
    np.testing.assert_allclose(got_g, ref_g, rtol=2 ** -7 if half == "bfloat16" else 2 ** -10,
                               atol=1e-8 if half == "bfloat16" else 2 ** -23)
    # outside autocast a half loss stays half, as PyTorch
    assert pylucid.nn.functional.cross_entropy(hx, pylucid.tensor(t, device="cuda")).dtype is getattr(pylucid, half)


@cuda_only
@pytest.mark.parametrize("inplace", [False, True])
def test_autocast_cast_of_a_float_out_result_reuses_its_rounding(inplace, monkeypatch):
    """A float_out kernel (layer norm, GELU of a half input under autocast) also writes its float32 result rounded
    to the half dtype; the next op's autocast cast of that result takes it instead of converting again. Once the
    result is modified in place, the cast converts the modified values."""
    g0 = _rng(43)
    bf = pylucid.bfloat16
    x = pylucid.tensor(g0.standard_normal((1024, 256)).astype(np.float32), device="cuda").to(bf).requires_grad_()
    ln = pylucid.nn.LayerNorm(256).to("cuda")
    lin = pylucid.nn.Linear(256, 512).to("cuda")
    casts = _record_casts(monkeypatch, x.device.backend)
    with pylucid.autocast("cuda", dtype=bf):
        h = ln(x)
        if inplace:
            h.mul_(2.0)
        y = pylucid.nn.functional.gelu(lin(h))
    monkeypatch.undo()
    f32_to_half = [c for c in casts if c[0] == (1024, 256) and c[1] == np.float32 and c[2] != np.float32]
    assert len(f32_to_half) == (1 if inplace else 0), casts
    assert y.dtype is pylucid.float32
    with pylucid.no_grad():
        hf = pylucid.nn.functional.layer_norm(x.float(), (256,), ln.weight, ln.bias) * (2.0 if inplace else 1.0)
        ref = pylucid.nn.functional.gelu(pylucid.nn.functional.linear(hf.to(bf), lin.weight.to(bf), lin.bias.to(bf))
                                         .float())
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ref.cpu().numpy())
    y.sum().backward()
    assert x.grad is not None and x.grad.dtype is bf and lin.weight.grad.dtype is pylucid.float32


@cuda_only
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(1100, 96), (1100, 770), (3, 5, 300)])  # warp on words / warp / block per row
def test_layer_norm_half_input_under_autocast_reads_it_in_place(half, shape, monkeypatch):
    """Under autocast, layer norm of a half input is float32 (the op is ForceFP32) without a float32 copy of the
    input: the result is the float32 layer norm of the same values bit for bit; the input's gradient is the float32
    gradient rounded to the half dtype (within one half ulp: the row sums may add in another order), the weight
    and bias gradients float32; double backward still works."""
    g0 = _rng(42)
    hdt = getattr(pylucid, half)
    cols = shape[-1]
    hx = pylucid.tensor((g0.standard_normal(shape) * 3 + 1).astype(np.float32), device="cuda").to(hdt)
    hx = hx.detach().requires_grad_()
    ln = pylucid.nn.LayerNorm(cols).to("cuda")
    with pylucid.no_grad():
        ln.weight.copy_(pylucid.tensor(g0.standard_normal(cols).astype(np.float32), device="cuda"))
        ln.bias.copy_(pylucid.tensor(g0.standard_normal(cols).astype(np.float32), device="cuda"))
    gy = pylucid.tensor(g0.standard_normal(shape).astype(np.float32), device="cuda")
    casts = _record_casts(monkeypatch, hx.device.backend)
    with pylucid.autocast("cuda", dtype=hdt):
        y = ln(hx)
    assert y.dtype is pylucid.float32
    assert not [c for c in casts if c[0] == shape and c[1] != c[2]], casts  # no copy of the input
    y.backward(gy)
    monkeypatch.undo()
    assert hx.grad.dtype is hdt and ln.weight.grad.dtype is pylucid.float32
    got = (hx.grad.float().cpu().numpy(), ln.weight.grad.cpu().numpy(), ln.bias.grad.cpu().numpy())
    ln.zero_grad()
    fx = hx.detach().float().requires_grad_()
    fy = ln(fx)
    fy.backward(gy)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), fy.detach().cpu().numpy())
    ulp = 2 ** -7 if half == "bfloat16" else 2 ** -10
    np.testing.assert_allclose(got[0], fx.grad.to(hdt).float().cpu().numpy(), rtol=ulp, atol=1e-5)
    np.testing.assert_allclose(got[1], ln.weight.grad.cpu().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[2], ln.bias.grad.cpu().numpy(), rtol=1e-4, atol=1e-4)
    # against PyTorch's float32 layer norm of the same values
    tx = torch.tensor(hx.detach().float().cpu().numpy())
    ty = torch.nn.functional.layer_norm(tx, (cols,), torch.tensor(ln.weight.detach().cpu().numpy()),
                                        torch.tensor(ln.bias.detach().cpu().numpy()))
    np.testing.assert_allclose(y.detach().cpu().numpy(), ty.numpy(), rtol=1e-5, atol=1e-5)
    # second order through the graph formula
    x2 = hx.detach().requires_grad_()
    with pylucid.autocast("cuda", dtype=hdt):
        y2 = ln(x2)
    (gx,) = pylucid.autograd.grad((y2 * gy).sum(), x2, create_graph=True)
    assert gx.dtype is hdt
    (ggx,) = pylucid.autograd.grad((gx.float() ** 2).sum(), x2)
    tx2 = tx.clone().requires_grad_()
    tw, tb = (torch.tensor(p.detach().cpu().numpy()) for p in (ln.weight, ln.bias))
    (tg,) = torch.autograd.grad((torch.nn.functional.layer_norm(tx2, (cols,), tw, tb)
                                 * torch.tensor(gy.cpu().numpy())).sum(), tx2, create_graph=True)
    (tgg,) = torch.autograd.grad((tg.to(getattr(torch, half)).float() ** 2).sum(), tx2)
    np.testing.assert_allclose(ggx.float().cpu().numpy(), tgg.numpy(), rtol=5e-2, atol=5e-2)


@cuda_only
def test_half_kept_autocast_short_path_matches_general_dispatch(general_dispatch_calls):
    """Layer norm and gelu (ForceFP32, their half input read as it is) skip the general dispatch under CUDA
    autocast where it would cast nothing (ops/_op.py: _autocast_half_kept): results, dtypes and gradients equal
    the general path's (anomaly mode always takes it); a half weight, which needs a cast, goes the general way."""
    import contextlib

    g0 = _rng(43)
    general = general_dispatch_calls
    xs = (g0.standard_normal((6, 40)) * 2).astype(np.float32)
    ws, bs = g0.standard_normal(40).astype(np.float32), g0.standard_normal(40).astype(np.float32)
    F = pylucid.nn.functional

    def run(anomaly):
        hx = pylucid.tensor(xs, device="cuda").to(pylucid.bfloat16).requires_grad_()
        fx = pylucid.tensor(xs, device="cuda", requires_grad=True)
        w = pylucid.tensor(ws, device="cuda", requires_grad=True)
        b = pylucid.tensor(bs, device="cuda", requires_grad=True)
        general[0] = 0
        with pylucid.autocast("cuda", dtype=pylucid.bfloat16), (
                pylucid.autograd.detect_anomaly() if anomaly else contextlib.nullcontext()):
            outs = [F.layer_norm(hx, (40,), w, b), F.layer_norm(fx, (40,), w, b), F.layer_norm(hx, (40,)),
                    F.gelu(hx, approximate="tanh"), F.gelu(fx), F.layer_norm(fx, (40,), w.to(pylucid.bfloat16))]
        taken = general[0]
        sum((o.float() * (k + 1)).sum() for k, o in enumerate(outs)).backward()
        return ([(o.dtype, o.detach().float().cpu().numpy()) for o in outs],
                [t.grad.float().cpu().numpy() for t in (hx, fx, w, b)], taken)

    fast, gen = run(False), run(True)
    for (dt1, v1), (dt2, v2) in zip(fast[0], gen[0]):
        assert dt1 == dt2
        np.testing.assert_array_equal(v1, v2)
    for g1, g2 in zip(fast[1], gen[1]):
        np.testing.assert_array_equal(g1, g2)
    assert [o[0] for o in fast[0]] == [pylucid.float32] * 6
    # only the call with a bfloat16 weight goes the general way (its w.to() is a plain cast op): 1 call
    assert gen[2] >= 6 and fast[2] == 1, (fast[2], gen[2])


@cuda_only
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(8, 1024), (5, 333)])  # whole 16-byte words, and element by element
def test_gelu_half_input_under_autocast_reads_it_in_place(half, approximate, shape, monkeypatch):
    """Under autocast, gelu of a half input is float32 (the op is ForceFP32) without a float32 copy of the input:
    the result is the float32 gelu of the same values bit for bit, and the input's gradient is the float32
    gradient rounded once to the half dtype (as the cast's backward rounds it); double backward still works."""
    g0 = _rng(41)
    hdt = getattr(pylucid, half)
    hx = pylucid.tensor((g0.standard_normal(shape) * 3).astype(np.float32), device="cuda").to(hdt)
    hx = hx.detach().requires_grad_()
    gy = pylucid.tensor(g0.standard_normal(shape).astype(np.float32), device="cuda")
    casts = _record_casts(monkeypatch, hx.device.backend)
    with pylucid.autocast("cuda", dtype=hdt):
        y = pylucid.nn.functional.gelu(hx, approximate=approximate)
    assert y.dtype is pylucid.float32
    assert not [c for c in casts if c[0] == shape and c[1] != c[2]], casts  # no copy of the input
    y.backward(gy)
    assert hx.grad.dtype is hdt
    monkeypatch.undo()
    fx = hx.detach().float().requires_grad_()
    fy = pylucid.nn.functional.gelu(fx, approximate=approximate)
    fy.backward(gy)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), fy.detach().cpu().numpy())
    np.testing.assert_array_equal(hx.grad.float().cpu().numpy(), fx.grad.to(hdt).float().cpu().numpy())
    # against PyTorch's float32 gelu of the same values
    tx = torch.tensor(hx.detach().float().cpu().numpy(), requires_grad=True)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    np.testing.assert_allclose(y.detach().cpu().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    # second order through the graph formula (float32 computation, the gradient cast to the input's dtype)
    x2 = hx.detach().requires_grad_()
    with pylucid.autocast("cuda", dtype=hdt):
        y2 = pylucid.nn.functional.gelu(x2, approximate=approximate)
    (gx,) = pylucid.autograd.grad(y2.sum(), x2, create_graph=True)
    assert gx.dtype is hdt
    (ggx,) = pylucid.autograd.grad(gx.float().sum(), x2)
    tx2 = torch.tensor(x2.detach().float().cpu().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad(torch.nn.functional.gelu(tx2, approximate=approximate).sum(), tx2, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx2)
    np.testing.assert_allclose(gx.detach().float().cpu().numpy(), tg.detach().to(getattr(torch, half)).float().numpy(),
                               rtol=2 ** -7, atol=1e-3)
    np.testing.assert_allclose(ggx.float().cpu().numpy(), tgg.numpy(), rtol=1e-2, atol=2e-2)


@cuda_only
@pytest.mark.parametrize("op", sorted(cuda_sources.FAST_UNARY))
@pytest.mark.parametrize("dt", _FAST_DTYPES, ids=lambda d: d.name)
@single_gpu
def test_fast_launch_unary_matches_ufunc_gpu(op, dt, _generic_mode):
    be = _be()
    f = getattr(be, op)
    a, _ = _gpu_operands(be.xp, dt, (5, 301))
    if op in ("log", "sqrt"):
        a = be.xp.abs(a)
    out = f(a)
    ref = _generic_mode(lambda: f(a))
    exact = op == "negative"
    _check_same(be, out, ref, exact, 1e-6 if dt != np.float64 else 1e-14)
    if dt in (np.float32, np.float64) or op in cuda_sources.FAST_UNARY_HALF:
        assert f._aa.get(dt) is not None, cuda_launch.fast_kernel_errors


@cuda_only
@single_gpu
def test_fast_launch_falls_back_gpu(_generic_mode):
    be = _be()
    cp = be.xp
    a = cp.arange(12, dtype=np.float32).reshape(3, 4) + 1
    cases = [(a, cp.ones(4, dtype=np.float32)), (a[:, ::2], a[:, 1::2]), (a.T, a.T), (a, a.astype(np.float64)),
             (cp.ones((0, 4), np.float32), cp.ones((0, 4), np.float32)), (a, np.float64(2.0)),
             (cp.arange(4), cp.arange(4)), (cp.arange(4), 2), (a.astype(np.float16), 0.5)]
    for x, y in cases:
        for op in cuda_sources.FAST_BINARY:
            f = getattr(be, op)
            out = f(x, y)
            ref = _generic_mode(lambda: f(x, y))
            assert out.dtype == ref.dtype and out.shape == ref.shape
            np.testing.assert_array_equal(cp.asnumpy(out), cp.asnumpy(ref))
    out = cp.empty((3, 4), np.float32)
    be.add(a, a, out=out)  # keyword call: the ufunc, writing into out
    np.testing.assert_array_equal(cp.asnumpy(out), cp.asnumpy(a + a))
    assert cuda_launch.fast_kernel_errors == {}


@cuda_only
@single_gpu
def test_fast_launch_kill_switch_gpu(monkeypatch):
    from pylucid.backend.cuda import CUDABackend

    be = _be()
    a = be.xp.ones(10, dtype=np.float32)
    be.multiply(a, a)
    built = dict(be.multiply._aa)
    monkeypatch.setattr(CUDABackend, "fast_launch", False)
    called = []
    monkeypatch.setattr(be.multiply, "_kernel", lambda *args: called.append(args))
    be.multiply(a, a)
    be.multiply(a, 2.0)
    assert called == [] and be.multiply._aa == built


@cuda_only
@single_gpu
def test_raw_launch_matches_cupy_call_on_streams_and_threads():
    """The direct cuLaunchKernel path gives CuPy's call's results, on the current (non-default)
    stream in order, and from a second thread (which takes CuPy's call)."""
    import threading

    be = _be()
    cp = be.xp
    a = cp.linspace(-3, 3, 5000, dtype=np.float32)
    b = cp.linspace(1, 2, 5000, dtype=np.float32)
    be.multiply(a, 2.0)
    k = be.multiply._as[np.dtype(np.float32)]
    assert getattr(k, "function", None) is not None  # the raw launcher was installed
    ref = cp.asnumpy(a * np.float32(1.5) + b)
    with cp.cuda.Stream(non_blocking=True) as st:
        y = a
        for _ in range(50):  # a chain of dependent launches on the side stream
            y = be.add(be.multiply(y, 1.0), 0.0)
        out = be.add(be.multiply(a, 1.5), b)
        st.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), cp.asnumpy(a))
    np.testing.assert_array_equal(cp.asnumpy(out), ref)
    got = {}

    def worker():
        got["y"] = cp.asnumpy(be.add(be.multiply(a, 1.5), b))
        got["c"] = cp.asnumpy(be.astype(a, np.dtype(np.float16)))

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    np.testing.assert_array_equal(got["y"], ref)
    np.testing.assert_array_equal(got["c"], cp.asnumpy(a).astype(np.float16))


def test_strided_copy_source_layout():
    for size in (2, 4, 8, 16):
        src, name = cuda_sources.strided_copy_source(size)
        assert cuda_launch.signature_layout(src, name) == "ppqi" + "q" * 2 * cuda_sources.COPY_MAX_NDIM
        assert src.count("{") == src.count("}")
    assert cuda_sources.strided_copy_source(1) is None and cuda_sources.strided_copy_source(3) is None


@cuda_only
@single_gpu
def test_strided_copy_matches_cupy():
    be = _be()
    cp = be.xp
    base = cp.arange(2 * 3 * 4 * 5 * 6 * 2, dtype=np.float64).reshape(2, 3, 4, 5, 6, 2)
    views = [lambda b: b.transpose(5, 3, 1, 0, 2, 4), lambda b: b[:, ::2, 1:, ::-1, :, 0], lambda b: b[1, :, 2].T,
             lambda b: b.reshape(6, 240).T, lambda b: cp.broadcast_to(b[0, 0, 0, 0, :, :1], (3, 6, 4)),
             lambda b: b[..., 1][::-1]]
    for dt in (np.float64, np.float32, np.float16, _BF16_NP, np.int64, np.complex64):
        typed = be.astype(base.astype(np.float32), dt) if dt == _BF16_NP else base.astype(dt)
        for view in views:
            xv = view(typed)
            got = be.ascontiguousarray(xv)
            assert got.flags.c_contiguous and got.dtype == xv.dtype and got.shape == xv.shape
            ref = cp.ascontiguousarray(xv)
            np.testing.assert_array_equal(cp.asnumpy(got.view(np.uint8)), cp.asnumpy(ref.view(np.uint8)))
    # a contiguous last axis (attention's q/k/v permutes): 16-byte words; unaligned or odd runs: element words
    heads = cp.arange(4 * 6 * 3 * 8 * 16, dtype=np.float64).reshape(4, 6, 3, 8, 16)
    runs = [lambda b: b.transpose(2, 0, 3, 1, 4), lambda b: b.transpose(2, 0, 3, 1, 4)[..., 1:9],
            lambda b: b[:, ::2].transpose(1, 0, 2, 3, 4)[..., :8], lambda b: b.transpose(0, 1, 3, 2, 4)[..., :12]]
    for dt in (np.float64, np.float32, np.float16, _BF16_NP, np.int16):
        typed = be.astype(heads.astype(np.float32), dt) if dt == _BF16_NP else heads.astype(dt)
        for view in runs:
            xv = view(typed)
            got = be.ascontiguousarray(xv)
            assert got.flags.c_contiguous and got.shape == xv.shape
            np.testing.assert_array_equal(cp.asnumpy(got.view(np.uint8)),
                                          cp.asnumpy(cp.ascontiguousarray(xv).view(np.uint8)))
    # the launch is remembered per layout (shape, strides, item size, 16-byte alignment): one layout at aligned and
    # unaligned addresses in turn, twice, copies right every time; so does reshape's view-or-copy answer per layout
    flat = cp.arange(4 + 4 * 6 * 8 * 16, dtype=np.float32)
    for _ in range(2):
        for off in (0, 1, 4):
            xv = flat[off:off + 4 * 6 * 8 * 16].reshape(4, 6, 8, 16).transpose(0, 2, 1, 3)
            np.testing.assert_array_equal(cp.asnumpy(be.ascontiguousarray(xv)), cp.asnumpy(cp.ascontiguousarray(xv)))
            np.testing.assert_array_equal(cp.asnumpy(be.reshape(xv, (4, 8, 96))), cp.asnumpy(xv).reshape(4, 8, 96))
            assert be.reshape(xv, (4, 8, 6, 2, 8)).data.ptr == xv.data.ptr  # a view: no copy
    assert {2, 4, 8, 16} <= set(be._copy) and all(k is not None for k in be._copy.values())
    c = cp.ones((2, 3))
    assert be.ascontiguousarray(c) is c
    seven = cp.ones((1, 2, 1, 2, 1, 2, 1))[..., ::-1, :]  # length-1 axes dropped: three axes for the kernel
    np.testing.assert_array_equal(cp.asnumpy(be.ascontiguousarray(seven)), cp.asnumpy(seven))
    many = cp.arange(2 ** 8, dtype=np.float32).reshape((2,) * 8)[:, ::-1, :, ::-1, :, ::-1, :, ::-1]
    np.testing.assert_array_equal(cp.asnumpy(be.ascontiguousarray(many)), cp.asnumpy(many))  # CuPy's copy


@cuda_only
@single_gpu
def test_copy_into_strided_views_matches_cupy():
    """``copy_into`` (the strided-assign kernel) writes every layout CuPy's assignment writes, bit for bit."""
    be = _be()
    cp = be.xp
    for dt in (np.float64, np.float32, np.float16, _BF16_NP, np.int32):
        for dst_of, src_shape in ((lambda o: o.transpose(2, 0, 3, 1, 4)[1], (4, 8, 6, 16)),
                                  (lambda o: o[:, 1], (4, 3, 8, 16)), (lambda o: o[..., 1:9], (4, 6, 3, 8, 8)),
                                  (lambda o: o[::2, :, 0, :, ::2], (2, 6, 8, 8))):
            out = cp.zeros((4, 6, 3, 8, 16), dtype=np.float32)
            out = be.astype(out, dt) if dt == _BF16_NP else out.astype(dt)
            ref = out.copy()
            src = cp.arange(int(np.prod(src_shape)), dtype=np.float32).reshape(src_shape)
            src = be.astype(src, dt) if dt == _BF16_NP else src.astype(dt)
            got = be.copy_into(dst_of(out), src)
            dst_of(ref)[...] = src
            assert got.shape == src_shape
            np.testing.assert_array_equal(cp.asnumpy(out.view(np.uint8)), cp.asnumpy(ref.view(np.uint8)))
    assert {2, 4, 8, 16} <= set(be._assign) and all(k is not None for k in be._assign.values())


@cuda_only
def test_generic_launcher_matches_rawkernel_call(monkeypatch):
    """get_kernel's direct launch against CuPy's RawKernel call: same results for kernels with float,
    int and null-pointer arguments, on a side stream and from another thread."""
    import threading

    be = _be()
    cp = be.xp
    x = cp.asarray(_rng(11).standard_normal((64, 96)).astype(np.float32))
    w = cp.asarray(_rng(12).standard_normal(96).astype(np.float32))
    g = cp.asarray(_rng(13).standard_normal((64, 96)).astype(np.float32))

    def run():
        y, mean, rstd = be.layer_norm(x, w, w, 1e-5)
        gx, gw, gb = be.layer_norm_backward(g, x, mean, rstd, w)
        return [cp.asnumpy(a) for a in (y, mean, rstd, gx, gw, gb, be.sum(g, axis=0),
                                        be.softmax(x), be.relu_backward(x, g))]

    direct = run()
    assert getattr(cuda_launch.get_kernel("layer_norm_fwd", np.dtype(np.float32)), "layout", None) == "pppppppqfii"
    with cp.cuda.Stream(non_blocking=True) as st:
        side = run()
        st.synchronize()
    got = {}
    th = threading.Thread(target=lambda: got.setdefault("r", run()))
    th.start()
    th.join()
    monkeypatch.setattr(cuda_launch, "_RAW_GET_KERNEL", False)
    monkeypatch.setattr(cuda_launch, "_cache", {})
    monkeypatch.setattr(cuda_launch, "_cache_one", {})
    ref = run()
    assert not hasattr(cuda_launch.get_kernel("layer_norm_fwd", np.dtype(np.float32)), "layout")
    for res in (direct, side, got["r"]):
        for a, b in zip(res, ref):
            np.testing.assert_array_equal(a, b)


@cuda_only
@single_gpu
def test_raw_launch_switch_off_keeps_cupy_call(monkeypatch):
    from pylucid.backend.cuda import CUDABackend

    monkeypatch.setattr(CUDABackend, "raw_launch", False)
    be = CUDABackend(0)  # a fresh backend builds its kernels now
    cp = be.xp
    a = cp.arange(1, 301, dtype=np.float64)
    np.testing.assert_array_equal(cp.asnumpy(be.true_divide(1.0, be.multiply(a, a))), 1.0 / cp.asnumpy(a) ** 2)
    k = be.multiply._aa[np.dtype(np.float64)]
    assert getattr(k, "function", None) is None and hasattr(k, "ptr")  # CuPy's Function itself


@cuda_only
@pytest.mark.parametrize("dtype", [pylucid.float32, pylucid.float64, pylucid.float16])
@single_gpu
def test_fast_launch_op_chain_fwd_bwd_gpu(dtype, _generic_mode):
    def run():
        pylucid.manual_seed(0)
        x = pylucid.randn(1000, device="cuda").to(dtype).requires_grad_()
        y = x
        for _ in range(10):
            y = (y * 1.0001 + 0.0001 - x) / 1.5
        y = -pylucid.exp(pylucid.tanh(y))
        y.sum().backward()
        return y.detach().cpu().numpy().astype(np.float64), x.grad.cpu().numpy().astype(np.float64)

    fy, fg = run()
    gy, gg = _generic_mode(run)
    np.testing.assert_allclose(fy, gy, rtol=1e-6 if dtype != pylucid.float16 else 1e-3)
    np.testing.assert_allclose(fg, gg, rtol=1e-6 if dtype != pylucid.float16 else 1e-3)


@cuda_only
def test_training_step_on_second_gpu():
    """Everything a training step touches stays on cuda:1 (creation, random draws, backward, in-place updates)."""
    if pylucid.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    import pylucid.nn as nn

    dev = "cuda:1"
    for fn in (lambda: pylucid.zeros(3, device=dev), lambda: pylucid.eye(2, device=dev),
               lambda: pylucid.randn(3, device=dev), lambda: pylucid.rand(3, device=dev),
               lambda: pylucid.randint(0, 5, (3,), device=dev)):
        assert fn()._data.device.id == 1
    pylucid.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(dev)
    for opt in (pylucid.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), pylucid.optim.Adam(model.parameters())):
        x = pylucid.randn(5, 8, device=dev)
        y = pylucid.randint(0, 4, (5,), device=dev)
        for _ in range(2):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert all(p._data.device.id == 1 and p.grad._data.device.id == 1 for p in model.parameters())
        assert np.isfinite(loss.item())


# ----------------------------------------------------------------- the direct cuBLAS path
def test_gemm_layout_helpers_on_numpy_views():
    """How the CUDA backend hands operands to cuBLAS, decided from shapes and strides alone (runs anywhere)."""
    from pylucid.backend.cuda import _batch_stride, _fold_rows, _mat_layout

    a = np.zeros((6, 10), np.float32)
    assert _mat_layout(a, 6, 10) == (0, 10)  # row-major
    assert _mat_layout(a.T, 10, 6) == (1, 10)  # a transposed view: column-major, same leading dim
    assert _mat_layout(a[:, :4], 6, 4) == (0, 10)  # a column slice keeps the parent's row stride
    assert _mat_layout(a[::2], 3, 10) == (0, 20)
    assert _mat_layout(a[:, ::2], 6, 5) is None  # no unit stride: copied first
    assert _mat_layout(a[:1, :], 1, 10) == (0, 10)
    assert _mat_layout(a[:, :1], 6, 1) == (0, 10)
    assert _mat_layout(np.broadcast_to(a[:1], (6, 10)), 6, 10) is None
    q = np.zeros((2, 5, 3, 4, 8), np.float32).transpose(2, 0, 3, 1, 4)[0]  # (b, h, t, d) from a fused qkv
    assert _mat_layout(q, 5, 8) == (0, 3 * 4 * 8)
    assert _batch_stride(q, (2, 4)) is None  # (b, h) do not collapse to one stride
    c = np.zeros((2, 4, 5, 8), np.float32)
    assert _batch_stride(c, (2, 4)) == 40
    assert _batch_stride(c[:, :1], (2, 1)) == 160
    assert _batch_stride(c[0, 0], (2, 4)) == 0  # a matrix broadcast over the batch
    assert _batch_stride(c[:1], (2, 4)) is None  # partly broadcast: materialised
    assert _fold_rows(c, 5, 8 * 4) == 40
    assert _fold_rows(c.transpose(1, 0, 2, 3), 5, 32) is None


def _gemm_cases():
    g = _rng(21)

    def mk(*shape):
        return g.standard_normal(shape)

    base = mk(4, 6, 3, 5, 8)
    return {
        "2d": (mk(7, 5), mk(5, 9)),
        "2d_aT": (mk(5, 7).T, mk(5, 9)),
        "2d_bT": (mk(7, 5), mk(9, 5).T),
        "2d_both_T": (mk(5, 7).T, mk(9, 5).T),
        "col_slice": (mk(7, 12)[:, 2:7], mk(5, 9)),
        "row_vec_left": (mk(5), mk(5, 9)),
        "row_vec_right": (mk(3, 7, 5), mk(5)),
        "vec_vec": (mk(5), mk(5)),
        "batched": (mk(3, 7, 5), mk(3, 5, 9)),
        "batched_bT": (mk(3, 7, 5), mk(3, 9, 5).transpose(0, 2, 1)),
        "broadcast_2d_left": (mk(7, 5), mk(2, 3, 5, 9)),
        "linear_fold": (mk(2, 3, 7, 5), mk(9, 5).T),
        "linear_no_fold": (mk(3, 2, 7, 5).transpose(1, 0, 2, 3), mk(5, 9)),
        "partial_broadcast": (mk(2, 1, 7, 5), mk(1, 3, 5, 9)),
        "attention_qk": (base.transpose(2, 0, 3, 1, 4)[0], base.transpose(2, 0, 3, 1, 4)[1].swapaxes(-1, -2)),
        "k_one": (mk(4, 1), mk(1, 6)),
        "m_one": (mk(1, 5), mk(5, 6)),
    }


@cuda_only
def test_gemm_remembers_only_calls_made_without_copies():
    """_gemm keeps the cuBLAS call of a product whose operands went as they were, keyed by shapes, strides and
    dtypes: the same shape with other strides (a transposed view) is its own entry, and an operand that had to be
    copied (both strides > 1) is never remembered."""
    be = _be()
    cp = be.xp
    be._gemm_geo.clear()
    a = cp.asarray(_rng(3).standard_normal((6, 4)), np.float32)
    at = cp.ascontiguousarray(a.T).T  # same shape, column-major
    b = cp.asarray(_rng(4).standard_normal((4, 5)), np.float32)
    for x in (a, at, a, at):
        np.testing.assert_allclose(be.to_numpy(be._gemm(x, b)), be.to_numpy(a) @ be.to_numpy(b), rtol=1e-5, atol=1e-5)
    assert len(be._gemm_geo) == 2
    wide = cp.asarray(_rng(5).standard_normal((12, 8)), np.float32)[::2, ::2]  # strides of 2 on both axes
    np.testing.assert_allclose(be.to_numpy(be._gemm(wide, b)), be.to_numpy(wide) @ be.to_numpy(b), rtol=1e-5,
                               atol=1e-5)
    assert len(be._gemm_geo) == 2


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", sorted(_gemm_cases()))
def test_direct_gemm_layouts(dtype, case):
    """Every operand layout the cuBLAS path accepts (views, transposes, broadcasts) against a float64 product."""
    be = _be()
    cp = be.xp
    a, b = _gemm_cases()[case]
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    ah, bh = a.astype(npdt), b.astype(npdt)
    ref = np.matmul(ah.astype(np.float64), bh.astype(np.float64))

    def on_gpu(x, scale=1.0):
        # rebuild the same view on the device: strides (in elements) and offset of the host view
        base = x.base if x.base is not None else x
        while base.base is not None:
            base = base.base
        dev = be.asarray((np.ascontiguousarray(base) * scale).astype(npdt))
        off = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // x.itemsize
        es = tuple(s // x.itemsize for s in x.strides)
        e = np.dtype(npdt).itemsize
        return cp.lib.stride_tricks.as_strided(dev.reshape(-1)[off:], x.shape, tuple(s * e for s in es))

    # the views are built from float64 host arrays, then cast: re-derive them on float64 bases. The second call
    # has the first one's shapes and strides and new values: it takes the remembered cuBLAS call of _gemm
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 2e-2}[dtype]
    for scale in (1.0, -2.0):
        got = be.matmul(on_gpu(a, scale), on_gpu(b))
        assert got.dtype == np.dtype(npdt)
        assert be.gemm_error is None, be.gemm_error
        np.testing.assert_allclose(be.to_numpy(got).astype(np.float64), ref * scale, rtol=tol, atol=tol * 3 * abs(scale))


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("axis,keepdims", [((0,), False), ((0, 1), True), (0, False), ((1, 0), False),
                                           ((-3,), True), ((1,), False)])
def test_column_sum_over_leading_axes(dtype, axis, keepdims):
    """Sums over leading axes (bias/norm-weight gradients) through the column-sum kernel equal the float64 sum."""
    be = _be()
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = _rng(22).standard_normal((6, 70, 33)).astype(npdt)
    got = be.sum(be.asarray(x), axis=axis, keepdims=keepdims)
    ref = np.sum(x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert got.dtype == np.dtype(npdt) and got.shape == ref.shape
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(be.to_numpy(got).astype(np.float64), ref, rtol=tol, atol=tol * 10)


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,offset", [((8192, 768), 0), ((2049, 2304), 0), ((3000, 33), 0), ((515, 64), 1),
                                          ((40, 7, 24), 0)])
def test_column_sum_chunks_and_layouts(dtype, shape, offset):
    """Many rows (summed in row chunks, then the chunks' partials by the last block to finish), 16-byte words
    and single elements (a width that is not a multiple of a word, a base pointer off 16-byte alignment), half
    input to a float32 result (a bias gradient under autocast): each equals the float64 sum, and a second call
    gives the same bits."""
    be = _be()
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    n = math.prod(shape)
    flat = be.asarray((_rng(25).standard_normal(n + offset) + 0.5).astype(npdt))
    x = flat[offset:].reshape(shape)
    assert x.flags.c_contiguous and (x.data.ptr % 16 != 0) == bool(offset)
    host = be.to_numpy(x).astype(np.float64)
    lead = tuple(range(len(shape) - 1))
    ref = host.sum(axis=lead)
    got = be.sum(x, axis=lead)
    assert got.dtype == np.dtype(npdt) and got.shape == ref.shape
    tol = {"float64": 1e-12, "float32": 2e-5, "float16": 4e-3, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(be.to_numpy(got).astype(np.float64), ref, rtol=tol, atol=tol * 10)
    assert (be.to_numpy(be.sum(x, axis=lead)) == be.to_numpy(got)).all()  # fixed summation order
    # the last block of each column group resets its arrival counter: zeros for the next call on the stream
    assert all(not be.to_numpy(cnt).any() for cnt in be._col_counters.values())
    if dtype in ("float16", "bfloat16"):
        g32 = be.sum_to_shape_as(x, shape[-1:], np.dtype(np.float32))
        assert g32.dtype == np.float32
        # accumulated in float32 and rounded once: far closer than a half result
        np.testing.assert_allclose(be.to_numpy(g32), ref, rtol=1e-5, atol=1e-3)


@cuda_only
@pytest.mark.parametrize("rows,cols,split", [(528, 1536, 768), (3, 40, 8), (2000, 66, 33)])
def test_column_sum_split_into_two_arrays(rows, cols, split):
    """One launch, two results (a layer norm's weight and bias gradients): the first ``split`` columns'
    sums and the rest's, each its own buffer, the same bits as two separate column sums."""
    be = _be()
    x = be.asarray(_rng(26).standard_normal((rows, cols)).astype(np.float32))
    a, b = be._col_sum(x, rows, cols, cols, np.dtype(np.float32), split=split)
    assert a.shape == (split,) and b.shape == (cols - split,) and a.base is None and b.base is None
    ref = be.to_numpy(x).astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(be.to_numpy(a), ref[:split], rtol=2e-5, atol=2e-4)
    np.testing.assert_allclose(be.to_numpy(b), ref[split:], rtol=2e-5, atol=2e-4)
    whole = be.to_numpy(be._col_sum(x, rows, cols, cols, np.dtype(np.float32)))
    assert (be.to_numpy(a) == whole[:split]).all() and (be.to_numpy(b) == whole[split:]).all()


@cuda_only
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_gelu_kernel_matches_torch(approximate, dtype):
    x = _rng(23).standard_normal((37, 129)) * 3
    x[0, :3] = [0.0, -30.0, 30.0]
    g = _rng(24).standard_normal((37, 129))
    tdt = getattr(torch, dtype)
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    (tg,) = torch.autograd.grad(ty, tx, torch.tensor(g, dtype=tdt))
    px = pylucid.tensor(x, dtype=getattr(pylucid, dtype), device="cuda", requires_grad=True)
    py = pylucid.nn.functional.gelu(px, approximate=approximate)
    py.backward(pylucid.tensor(g, dtype=getattr(pylucid, dtype), device="cuda"))
    # float32: CUDA's erff/tanhf are within 2 ulp, and torch's tanh-form derivative is arranged differently
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(py.detach().cpu().numpy().astype(np.float64), ty.detach().double().numpy(),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(px.grad.cpu().numpy().astype(np.float64), tg.double().numpy(), rtol=tol, atol=tol)
    z = pylucid.tensor(0.5, dtype=getattr(pylucid, dtype), device="cuda")
    assert pylucid.nn.functional.gelu(z, approximate=approximate).shape == ()  # 0-d stays 0-d


@cuda_only
@pytest.mark.parametrize("pair", sorted(cuda_sources.CAST_PAIRS))
def test_fast_cast_is_bit_exact(pair):
    """The cast kernels round exactly as NumPy/ml_dtypes do, NaN/inf/subnormals/ties included."""
    be = _be()
    src, dst = (ml_dtypes.bfloat16 if n == "bfloat16" else np.dtype(n) for n in pair)
    vals = np.concatenate([_rng(25).standard_normal(3000) * 10.0 ** _rng(26).integers(-8, 6, 3000),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-8, 3e38, 1 + 2.0 ** -8,
                            1 + 3 * 2.0 ** -9, 2.0 ** -24, 2.0 ** -25]])
    with np.errstate(over="ignore"):
        host = vals.astype(src)
        ref = host.astype(dst)
    got = be.to_numpy(be.astype(be.asarray(host), np.dtype(dst)))
    assert got.dtype == np.dtype(dst)
    same = (got.view(f"u{got.itemsize}") == ref.view(f"u{ref.itemsize}")) | (np.isnan(got.astype(np.float64))
                                                                             & np.isnan(ref.astype(np.float64)))
    assert same.all(), (host[~same][:5], got[~same][:5], ref[~same][:5])


def test_cross_entropy_reduce_and_relu_refs_match_torch():
    x = _rng(30).standard_normal((6, 5))
    t = np.array([1, -100, 4, 0, -100, 2])
    loss, _ = reference.cross_entropy_ref(np, x, t)
    for red in ("mean", "sum"):
        out, count = reference.cross_entropy_reduce_ref(np, loss, t, -100, red == "mean")
        ref = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), reduction=red)
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-12)
        assert count == 4
    y = np.array([-1.0, 0.0, 2.0, np.nan, 3.0])
    g = np.array([1.0, 2.0, 3.0, 4.0, np.inf])
    ty = torch.tensor(y, requires_grad=True)
    ref = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(y), 0.0)
    np.testing.assert_array_equal(reference.relu_backward_ref(np, y, g), ref.numpy())
    del ty


@cuda_only
@pytest.mark.parametrize("dtype", KDTYPES)
def test_cross_entropy_reduce_kernel_and_scalar_grad(dtype):
    be = _be()
    cp = be.xp
    x = cp.asarray(_rng(31).standard_normal((300, 7)), dtype=dtype)
    t = cp.asarray(_rng(32).integers(0, 7, 300))
    t[::5] = -100
    loss, lse = be.cross_entropy(x, t)
    for mean in (True, False):
        out, count = be.cross_entropy_reduce(loss, t, -100, mean)
        r_out, r_count = reference.cross_entropy_reduce_ref(cp, loss.astype(np.float64), t, -100, mean)
        assert out.shape == () and out.dtype == loss.dtype
        _close(out, r_out, dtype)
        assert float(count) == float(r_count) == 240
    none = cp.full(300, -100)
    out, count = be.cross_entropy_reduce(be.cross_entropy(x, none)[0], none, -100, True)
    assert bool(cp.isnan(out)) and float(count) == 0  # every row ignored: 0/0
    empty = be.cross_entropy_backward(cp.broadcast_to(cp.asarray(1.0, dtype=dtype), (0,)), x[:0], lse[:0], t[:0])
    assert empty.shape == (0, 7)
    g = cp.asarray(0.25, dtype=dtype)
    for gg in (g, cp.broadcast_to(g, (300,))):
        got = be.cross_entropy_backward(gg, x, lse, t)
        _close(got, be.cross_entropy_backward(cp.full(300, 0.25, dtype=dtype), x, lse, t), dtype)


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_relu_backward_kernel(dtype):
    be = _be()
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    y = np.array([-1.0, 0.0, 2.0, np.nan, 3.0, -0.0] * 50).astype(npdt)
    g = np.array([1.0, 2.0, 3.0, 4.0, np.inf, 5.0] * 50).astype(npdt)
    got = be.to_numpy(be.relu_backward(be.asarray(y), be.asarray(g)))
    assert got.dtype == np.dtype(npdt)
    np.testing.assert_array_equal(got.astype(np.float64), reference.relu_backward_ref(np, y.astype(np.float64),
                                                                              g.astype(np.float64)))


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 4099, 70001])
def test_relu_kernels_vectorised_and_unaligned(dtype, n):
    """The relu kernels' 16-byte-word path (aligned operands), its tail (n not a multiple of the word) and the
    element path (a view one element into its storage: not 16-byte aligned) all equal the CPU's relu and
    threshold_backward."""
    be = _be()
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    base = np.array([-1.5, 0.0, 2.0, np.nan, 3.0, -0.0, -np.inf, 0.25] * (n // 8 + 2))
    y_all = base[: n + 1].astype(npdt)
    g_all = _rng(7).standard_normal(n + 1).astype(npdt)
    for lo in (0, 1):  # aligned; one element in
        y, g = y_all[lo:lo + n], g_all[lo:lo + n]
        dy, dg = be.asarray(y_all)[lo:lo + n], be.asarray(g_all)[lo:lo + n]
        fwd = be.to_numpy(be.relu(dy))
        bwd = be.to_numpy(be.relu_backward(dy, dg))
        y64 = y.astype(np.float64)
        np.testing.assert_array_equal(fwd.astype(np.float64), np.where((y64 > 0) | np.isnan(y64), y64, 0.0))
        np.testing.assert_array_equal(bwd.astype(np.float64),
                                      reference.relu_backward_ref(np, y64, g.astype(np.float64)))
        assert fwd.dtype == np.dtype(npdt) and bwd.dtype == np.dtype(npdt)


@cuda_only
def test_bf16_python_scalar_keeps_dtype_and_autocast_backward_stays_on_cublas(monkeypatch):
    """bfloat16 times a Python float stays bfloat16 (CuPy's ufunc would give float32), so an autocast
    backward never mixes dtypes and every product goes to cuBLAS directly."""
    be = _be()
    cp = be.xp
    a = be.astype(cp.linspace(-2, 2, 64, dtype=np.float32), _BF16_NP)
    for x in (a, a[::2]):  # the fast kernel, and the strided (generic) route
        for op in cuda_sources.FAST_BINARY:
            assert getattr(be, op)(x, 0.3).dtype == _BF16_NP and getattr(be, op)(0.3, x).dtype == _BF16_NP
    calls = []
    real = cp.matmul
    monkeypatch.setattr(cp, "matmul", lambda *a, **k: calls.append((a[0].dtype, a[1].dtype)) or real(*a, **k))
    lin = pylucid.nn.Linear(16, 48).to("cuda")
    x = pylucid.randn(2, 5, 16, device="cuda", requires_grad=True)
    with pylucid.amp.autocast("cuda", dtype=pylucid.bfloat16):
        q, k, v = lin(x).reshape(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        att = pylucid.softmax((q @ k.transpose(-2, -1)) * 0.35, dim=-1)
        out = (att @ v).transpose(1, 2).reshape(2, 5, 16)
    out.float().pow(2).mean().backward()
    assert calls == []
    assert x.grad.dtype is pylucid.float32 and lin.weight.grad.dtype is pylucid.float32
    assert be.gemm_error is None


@cuda_only
def test_direct_gemm_follows_the_current_stream():
    be = _be()
    cp = be.xp
    a = cp.asarray(_rng(40).standard_normal((64, 32)), dtype=np.float32)
    b = cp.asarray(_rng(41).standard_normal((32, 16)), dtype=np.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        out = be.matmul(a, b)
        col = be.sum(out, axis=0)
    s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(a) @ cp.asnumpy(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cp.asnumpy(col), (cp.asnumpy(a) @ cp.asnumpy(b)).sum(0), rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------- cuBLASLt: cached algorithms and epilogues
def _lt_epilogues(be):
    """The epilogues of the cuBLASLt plans that were built and accepted so far."""
    from pylucid.backend.cublaslt import cublaslt

    lt = cublaslt()
    return {key[12] for key, plan in lt.plans.items() if plan is not None} if lt else set()


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("case", ["linear", "nn", "fold", "one_row", "sliced"])
def test_bias_epilogue_matches_separate_add(dtype, case, monkeypatch):
    """``matmul_bias`` through cuBLASLt's bias epilogue against the GEMM and the bias kernel (cuBLASLt off) and
    a float64 product on the host; the epilogue must have run."""
    be = _be()
    g = _rng(10)
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)

    def dev(*shape):
        return be.asarray(g.standard_normal(shape).astype(npdt))

    a, b = {"linear": lambda: (dev(40, 24), dev(56, 24).T), "nn": lambda: (dev(40, 24), dev(24, 56)),
            "fold": lambda: (dev(3, 5, 24), dev(56, 24).T), "one_row": lambda: (dev(1, 24), dev(56, 24).T),
            "sliced": lambda: (dev(40, 96)[:, 32:56], dev(56, 24).T)}[case]()
    bias = dev(56)
    fused = be.matmul_bias(a, b, bias)
    assert 4 in _lt_epilogues(be)
    monkeypatch.setattr(type(be), "use_cublaslt", False)
    plain = be.matmul_bias(a, b, bias)
    assert be.gemm_error is None, be.gemm_error
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(_host(be, fused), _host(be, plain), rtol=tol, atol=tol * 2)
    want = np.matmul(_host(be, a), _host(be, b)) + _host(be, bias)
    np.testing.assert_allclose(_host(be, fused), want, rtol=tol * 2, atol=tol * 4)


@cuda_only
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(8, 16), (3, 7, 16), (1, 16), (16,)])
def test_linear_bias_epilogues_match_torch(dtype, shape):
    """Linear with a bias on the GPU (the bias added inside the GEMM) against torch's float64 Linear, values and
    gradients; the epilogue must have run (else the test proves nothing)."""
    import pylucid.nn.functional as F

    g = _rng(11)
    xn, wn, bn = g.standard_normal(shape), g.standard_normal((24, 16)), g.standard_normal(24)
    gn = g.standard_normal(shape[:-1] + (24,))
    pdt = getattr(pylucid, dtype)
    x, w, b = (pylucid.tensor(a, dtype=pdt, device="cuda", requires_grad=True) for a in (xn, wn, bn))
    y = F.linear(x, w, b)
    y.backward(pylucid.tensor(gn, dtype=pdt, device="cuda"))
    tdt = getattr(torch, dtype)
    xt, wt, bt = (torch.tensor(a).to(tdt).double().requires_grad_() for a in (xn, wn, bn))
    yt = torch.nn.functional.linear(xt, wt, bt)
    yt.backward(torch.tensor(gn).to(tdt).double())
    tol = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
    for got, want in ((y, yt), (x.grad, xt.grad), (w.grad, wt.grad), (b.grad, bt.grad)):
        assert got.dtype is pdt
        want = want.detach().numpy()
        np.testing.assert_allclose(got.detach().float().cpu().numpy(), want, rtol=tol,
                                   atol=tol * max(1.0, np.abs(want).max()))
    if len(shape) >= 2:
        assert 4 in _lt_epilogues(_be())


@cuda_only
def test_cublaslt_on_a_side_stream_and_in_a_graph():
    """cuBLASLt calls follow the current stream (their own workspace per stream) and replay in a CUDA graph."""
    be = _be()
    cp = be.xp
    a = cp.asarray(_rng(42).standard_normal((64, 32)), dtype=np.float32)
    w = cp.asarray(_rng(43).standard_normal((48, 32)), dtype=np.float32)
    bias = cp.asarray(_rng(44).standard_normal(48), dtype=np.float32)
    want = cp.asnumpy(a) @ cp.asnumpy(w).T + cp.asnumpy(bias)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        out = be.matmul_bias(a, w.T, bias)
    s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), want, rtol=1e-5, atol=1e-4)
    lin = pylucid.nn.Linear(32, 48).to("cuda")
    x = pylucid.randn(64, 32, device="cuda")
    g = pylucid.cuda.CUDAGraph()
    side = pylucid.cuda.Stream()
    with pylucid.cuda.stream(side):
        y_eager = lin(x)  # warm-up on the capture stream: its cuBLASLt workspace exists before the capture
    pylucid.cuda.synchronize()
    with pylucid.cuda.graph(g, stream=side):
        y = lin(x)
    x.copy_(pylucid.randn(64, 32, device="cuda"))
    g.replay()
    pylucid.cuda.synchronize()
    np.testing.assert_allclose(y.detach().cpu().numpy(), lin(x).detach().cpu().numpy(), rtol=1e-5, atol=1e-5)
    assert y_eager.shape == y.shape


@cuda_only
def test_capture_gives_the_stream_a_cublaslt_workspace():
    """A capture on a stream that never ran eagerly still gets cuBLASLt's bias epilogue: the workspace of the
    capturing stream is allocated before the capture begins (inside it nothing may be allocated), and the
    replayed Linear equals the eager one."""
    from pylucid.backend.cublaslt import cublaslt

    lt = cublaslt()
    if lt is None:
        pytest.skip("libcublasLt not found")
    lin = pylucid.nn.Linear(768, 3072).to("cuda")
    x = pylucid.randn(4096, 768, device="cuda")
    side = pylucid.cuda.Stream()
    dev = _be().xp.cuda.runtime.getDevice()
    assert (dev, side.cuda_stream) not in lt.workspaces
    g = pylucid.cuda.CUDAGraph()
    with pylucid.no_grad(), pylucid.amp.autocast("cuda", dtype=pylucid.bfloat16):
        with pylucid.cuda.graph(g, stream=side):
            y = lin(x)
        assert (dev, side.cuda_stream) in lt.workspaces
        x.copy_(pylucid.randn(4096, 768, device="cuda"))
        g.replay()
        pylucid.cuda.synchronize()
        want = lin(x)
    np.testing.assert_allclose(y.float().cpu().numpy(), want.float().cpu().numpy(), rtol=1e-2, atol=1e-2)


@cuda_only
@pytest.mark.parametrize("args,dtype", [((5,), None), ((0, 1, 0.25), None), ((2, 11, 3), "int32"),
                                        ((0.0, -8.000001, -4.0), "int64"), ((-3, 7, 0.7), "float64"),
                                        ((0, 1, 0.1), "float32"), ((1, 2, 0.125), "bfloat16"), ((0, 4), "uint8"),
                                        ((1000,), "float16")])
def test_arange_on_the_gpu_matches_torch_and_queues_no_upload(args, dtype, monkeypatch):
    """arange(device='cuda') gives PyTorch's values and dtype; the integer and float32/float64 ranges are made by
    kernels on the device, with no host array uploaded (the half ones are still computed on the host)."""
    import torch

    be = pylucid.device("cuda").backend
    uploads = []
    real = type(be).asarray
    monkeypatch.setattr(type(be), "asarray", lambda self, *a, **k: uploads.append(a) or real(self, *a, **k))
    got = pylucid.arange(*args, dtype=getattr(pylucid, dtype) if dtype else None, device="cuda")
    want = torch.arange(*args, dtype=getattr(torch, dtype) if dtype else None)
    assert got.device.type == "cuda" and str(got.dtype) == str(want.dtype).replace("torch", "pylucid")
    np.testing.assert_array_equal(got.float().cpu().numpy(), want.float().numpy())
    assert bool(uploads) == (dtype in ("bfloat16", "float16"))


def test_int_scalar_inplace_sources_cover_the_integer_updates_only():
    for op in cuda_sources.INPLACE_INT_OPS:
        for dt in ("int32", "int64"):
            src, kname = cuda_sources.int_scalar_inplace_source(op, dt)
            assert f"void {kname}(" in src and src.count("{") == src.count("}")
            assert "unsigned long long" in src  # wrap-around arithmetic, not signed overflow
    assert cuda_sources.int_scalar_inplace_source("true_divide", "int64") is None
    assert cuda_sources.int_scalar_inplace_source("add", "uint8") is None
    assert cuda_sources.int_scalar_inplace_source("add", "float32") is None


_INPLACE_CASES = [
    # (dtype, self shape, operand: "scalar" / a shape / "T" for a transposed self, scalar value)
    ("float32", (3, 5), "scalar", 0.75), ("float32", (3, 5), (3, 5), None), ("float32", (3, 5), (5,), None),
    ("float32", (3, 5), "T", None), ("float64", (4,), "scalar", -2), ("float64", (), (), None),
    ("bfloat16", (6, 7), "scalar", 0.1), ("bfloat16", (6, 7), (6, 7), None), ("float16", (9,), (9,), None),
    ("float16", (9,), "scalar", 0.3), ("int64", (), "scalar", 1), ("int64", (4,), "scalar", -3),
    ("int64", (3,), "scalar", 2 ** 62), ("int32", (5,), "scalar", 7), ("int32", (5,), "scalar", 2 ** 40),
    ("int64", (3,), (3,), None),
]


@cuda_only
@single_gpu
@pytest.mark.parametrize("dtype,shape,operand,value", _INPLACE_CASES)
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_inplace_arithmetic_on_the_gpu_matches_torch(op, dtype, shape, operand, value):
    """x.add_/sub_/mul_/div_ on a GPU tensor (the fast kernels written back into x where they apply, CuPy's ufunc
    elsewhere) give PyTorch's values and dtype, keep x's storage and bump its version; integer overflow wraps."""
    g = _rng(3)
    tdt = getattr(torch, dtype)
    if dtype.startswith("int"):
        base = torch.tensor(g.integers(-50, 50, shape), dtype=tdt)
        if value is not None and value > 2 ** 31:
            base = base * 3 + 2 ** 30 if dtype == "int64" else base
        other_t = torch.tensor(g.integers(1, 9, operand), dtype=tdt) if isinstance(operand, tuple) else None
    else:
        base = torch.tensor(g.standard_normal(shape), dtype=torch.float64).to(tdt)
        other_t = (torch.tensor(g.standard_normal(operand), dtype=torch.float64).to(tdt) + 3
                   if isinstance(operand, tuple) else None)
    if op == "div_" and dtype.startswith("int"):
        pytest.skip("integer true division does not fit an integer tensor (an error in both)")
    if dtype == "int32" and value is not None and value >= 2 ** 31:
        # PyTorch refuses a Python int outside int32's range for an int32 tensor; so does pylucid
        x = pylucid.tensor(base.numpy(), device="cuda")
        with pytest.raises(Exception):
            getattr(x, op)(value)
        return
    t = base.clone()
    x = pylucid.tensor(base.float().numpy() if dtype in ("bfloat16",) else base.numpy(),
                       dtype=getattr(pylucid, dtype), device="cuda")
    if operand == "T":
        t, x = t.t(), x.t()
        other_t = torch.tensor(g.standard_normal(t.shape), dtype=tdt)
    other_x = None
    if other_t is not None:
        other_x = pylucid.tensor(other_t.float().numpy() if dtype == "bfloat16" else other_t.numpy(),
                                 dtype=getattr(pylucid, dtype), device="cuda")
    ptr, version = x._data.data.ptr, x._version[0]
    if other_t is None and dtype in ("bfloat16", "float16"):
        # a half tensor with a Python scalar: the scalar rounded to the half dtype, then computed in float32 and
        # rounded once (PyTorch keeps the scalar in float32: a documented one-ulp deviation, docs/semantics.md)
        want = getattr(t.float(), op)(float(torch.tensor(value, dtype=tdt))).to(tdt)
    else:
        want = getattr(t, op)(value if other_t is None else other_t)
    got = getattr(x, op)(value if other_x is None else other_x)
    assert got is x and x._data.data.ptr == ptr and x._version[0] == version + 1
    assert str(x.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(x.cpu().float().numpy() if dtype in ("bfloat16", "float16") else x.cpu().numpy(),
                                  want.float().numpy() if dtype in ("bfloat16", "float16") else want.numpy())


@cuda_only
@single_gpu
def test_inplace_integer_counter_takes_the_kernel(monkeypatch):
    """A step counter's += 1 (batch norm's num_batches_tracked) runs the integer kernel, not CuPy's ufunc."""
    be = pylucid.device("cuda").backend
    bn = pylucid.nn.BatchNorm2d(3).to("cuda")
    x = pylucid.randn(4, 3, 5, 5, device="cuda")

    class NoUfunc:
        def __getattr__(self, name):
            raise AssertionError(f"CuPy's {name} ufunc was called")

    real = be.xp
    bn(x)  # kernels compiled
    monkeypatch.setattr(be, "xp", type("Mixed", (), {"__getattr__": lambda self, n: (
        NoUfunc().__getattr__(n) if n in ("add", "subtract", "multiply") else getattr(real, n))})())
    c = pylucid.tensor(5, dtype=pylucid.int64, device="cuda")
    c.add_(1)
    c -= 2
    c.mul_(3)
    monkeypatch.setattr(be, "xp", real)
    assert c.item() == 12
    bn(x)
    assert bn.num_batches_tracked.item() == 2
