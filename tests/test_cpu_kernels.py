"""The CPU kernels of pylucid/backend/base.py and cpu.py against PyTorch: the stride-1 tap-GEMM convolution
path (taken from 16 input channels on grids whose padding adds under 40% rows, so the op database's small
samples do not reach it; the tests below lift that bound to run it on small grids too), the im2col path at
the same sizes, the query-tiled attention with several blocks, the GEMM into strided views, GELU, the
relu gradient, the fused cross-entropy and the max pool's argmax."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pylucid as pl
import pylucid.backends  # noqa: F401 - the oneDNN switch
from pylucid.backend.base import ArrayBackend
from pylucid.backend.cpu import CPUBackend

@pytest.fixture(autouse=True)
def _gemm_kernels():
    """These are tests of the CPU backend's own GEMM kernels: oneDNN's convolutions (tests/test_onednn.py),
    where installed, are switched off."""
    with pl.backends.mkldnn.flags(enabled=False):
        yield


CONV = {1: (F.conv1d, pl.nn.functional.conv1d), 2: (F.conv2d, pl.nn.functional.conv2d),
        3: (F.conv3d, pl.nn.functional.conv3d)}
CONV_T = {1: (F.conv_transpose1d, pl.nn.functional.conv_transpose1d),
          2: (F.conv_transpose2d, pl.nn.functional.conv_transpose2d)}


def _grads(lib, fn, arrays, kwargs, dtype):
    ts = [lib.tensor(a).to(getattr(lib, dtype)).requires_grad_() for a in arrays]
    y = fn(*ts, **kwargs)
    g = np.cos(np.arange(y.numel()).reshape(tuple(y.shape)))
    y.backward(lib.tensor(g).to(getattr(lib, dtype)))
    f32 = lib.float32
    return [y.detach().to(f32).numpy()] + [t.grad.to(f32).numpy() for t in ts]


def _compare(tfn, pfn, arrays, kwargs, dtype):
    tol = {"float64": 1e-10, "float32": 1e-4, "bfloat16": 3e-2}[dtype]
    for a, b in zip(_grads(pl, pfn, arrays, kwargs, dtype), _grads(torch, tfn, arrays, kwargs, dtype)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, float(np.abs(b).max())))


@pytest.fixture(params=["taps", "im2col"])
def conv_path(request, monkeypatch):
    """Run a test with the tap path allowed on any grid, then with it never taken."""
    monkeypatch.setattr(ArrayBackend, "_TAP_MAX_WASTE", 1e9 if request.param == "taps" else 0.0)
    return request.param


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [{"padding": 1}, {"padding": 2, "dilation": 2}, {"stride": 2, "padding": 1},
                                {"groups": 2}])
def test_conv_paths_match_torch(nd, kw, conv_path):
    r = np.random.default_rng(nd)
    sp = {1: (9,), 2: (6, 5), 3: (4, 5, 3)}[nd]
    x = r.standard_normal((2, 16) + sp)
    w = r.standard_normal((5, 16 // kw.get("groups", 1)) + (3,) * nd) * 0.2
    b = r.standard_normal(5 if "groups" not in kw else 6)
    if "groups" in kw:
        w = r.standard_normal((6, 8) + (3,) * nd) * 0.2
    _compare(*CONV[nd], (x, w, b), kw, "float64")


@pytest.mark.parametrize("kw", [{"padding": "same", "dilation": (1, 2)}, {"padding": (3, 0)}, {"padding": (0, 4)}])
def test_conv_taps_shared_padding_grid(kw, conv_path):
    """Uneven ('same' with an even kernel), kernel-wide and one-sided padding on the shared-padding grid:
    a pad wider than the kernel's reach makes the grid the output's extent, not the input's plus padding."""
    r = np.random.default_rng(7)
    x = r.standard_normal((3, 16, 5, 6))
    w = r.standard_normal((4, 16, 4, 3)) * 0.2
    _compare(*CONV[2], (x, w, r.standard_normal(4)), kw, "float64")


@pytest.mark.parametrize("kw", [{"padding": 1}, {"stride": 2, "padding": 1}])
def test_conv_wide_channels(kw, conv_path):
    """Over 32 channels (40: a partial tile) the channels-first outputs are copied tile by tile."""
    r = np.random.default_rng(9)
    x, w = r.standard_normal((2, 40, 17, 16)), r.standard_normal((40, 40, 3, 3)) * 0.1
    _compare(*CONV[2], (x, w, r.standard_normal(40)), kw, "float32")
    _compare(*CONV_T[2], (x, w), kw, "float64")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv_taps_half_and_single(dtype, conv_path):
    r = np.random.default_rng(0)
    _compare(*CONV[2], (r.standard_normal((2, 16, 7, 6)), r.standard_normal((4, 16, 3, 2)) * 0.2),
             {"padding": (1, 0)}, dtype)


@pytest.mark.parametrize("kw", [{"padding": 1}, {"padding": 1, "dilation": 2, "output_padding": 1},
                                {"stride": 2, "padding": 1, "output_padding": 1}])
@pytest.mark.parametrize("nd", [1, 2])
def test_conv_transpose_paths_match_torch(nd, kw, conv_path):
    r = np.random.default_rng(3)
    sp = {1: (8,), 2: (5, 4)}[nd]
    x = r.standard_normal((2, 16) + sp)
    w = r.standard_normal((16, 16) + (3,) * nd) * 0.2  # 16 out channels: the tap path for every part
    _compare(*CONV_T[nd], (x, w), kw, "float64")


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
@pytest.mark.parametrize("shape", [(20, 20, True, False), (20, 13, True, False), (13, 20, True, False),
                                   (20, 17, False, True)])
def test_sdpa_tiled_matches_torch(monkeypatch, dtype, shape):
    monkeypatch.setattr(ArrayBackend, "_SDPA_BLOCK", 7)
    L, S, causal, with_mask = shape
    r = np.random.default_rng(L * S)
    arrays = [r.standard_normal((2, 3, L, 4)), r.standard_normal((2, 3, S, 4)), r.standard_normal((2, 3, S, 5))]
    mask = r.standard_normal((L, S)) if with_mask else None

    def fn(lib):
        sdpa = F.scaled_dot_product_attention if lib is torch else pl.nn.functional.scaled_dot_product_attention

        def f(q, k, v):
            m = None if mask is None else lib.tensor(mask).to(q.dtype)
            return sdpa(q, k, v, attn_mask=m, is_causal=causal)
        return f
    _compare(fn(torch), fn(pl), arrays, {}, dtype)


def test_conv_empty_batch_wide_channels():
    x = pl.zeros(0, 16, 5, 5, requires_grad=True)
    w = pl.ones(4, 16, 3, 3, requires_grad=True)
    y = pl.nn.functional.conv2d(x, w, padding=1)
    assert tuple(y.shape) == (0, 4, 5, 5)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 16, 5, 5) and float(w.grad.abs().sum()) == 0.0


@pytest.mark.parametrize("kw", [{"padding": 1}, {"stride": 2, "padding": 1}, {"padding": 1, "groups": 2},
                                {"stride": 2, "padding": 1, "groups": 2}])
def test_batch_split_across_threads(monkeypatch, kw):
    """The CPU backend's split of layout copies, col2im and batch-norm passes over the batch (forced on tiny
    arrays, 3 threads on 5 images: uneven chunks) gives PyTorch's results: taps, im2col, classes, col2im."""
    monkeypatch.setattr(CPUBackend, "_PAR_MIN", 0)
    n0 = pl.get_num_threads()
    pl.set_num_threads(3)
    try:
        r = np.random.default_rng(11)
        x, w = r.standard_normal((5, 16, 6, 7)), r.standard_normal((6, 16 // kw.get("groups", 1), 3, 3)) * 0.2
        _compare(*CONV[2], (x, w, r.standard_normal(6)), kw, "float32")
        _compare(*CONV_T[2], (x, r.standard_normal((16, 4, 3, 3)) * 0.2), kw, "float64")
        def bn(lib):
            return lambda t, w_, b_: lib.nn.functional.batch_norm(t, None, None, w_, b_, training=True)
        for shift in (0.0, 50.0):  # the folded and the centred gradient sums
            args = (r.standard_normal((5, 6, 16, 9)) + shift, r.standard_normal(6), r.standard_normal(6))
            _compare(bn(torch), bn(pl), args, {}, "float64")
            split = _grads(pl, bn(pl), args, {}, "float32")
            pl.set_num_threads(1)
            for a, b in zip(split, _grads(pl, bn(pl), args, {}, "float32")):  # the same bits on one thread
                np.testing.assert_array_equal(a, b)
            pl.set_num_threads(3)
    finally:
        pl.set_num_threads(n0)


def test_conv_taps_taken_on_large_grids(monkeypatch):
    """The default bound: a 3x3 kernel on 14x12 (a 15x13 shared-padding grid, 1.16x) runs the taps, on 4x3
    (5x4, 1.67x) im2col."""
    calls = []
    orig = ArrayBackend._conv_taps

    def spy(self, *a):
        calls.append(a[0].shape)
        return orig(self, *a)
    monkeypatch.setattr(ArrayBackend, "_conv_taps", spy)
    r = np.random.default_rng(5)
    for size in ((14, 12), (4, 3)):
        x, w = r.standard_normal((2, 16) + size), r.standard_normal((4, 16, 3, 3)) * 0.2
        _compare(*CONV[2], (x, w), {"padding": 1}, "float32")
    assert calls == [(2, 16, 14, 12)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_gemm_into_strided_views(dtype, accumulate):
    be = CPUBackend()
    r = np.random.default_rng(1)
    a = r.standard_normal((40, 30)).astype(dtype)
    b3 = r.standard_normal((30, 3, 20)).astype(dtype)  # b = b3[:, 1]: rows 60 elements apart
    cases = [(a, b3[:, 1]), (np.asfortranarray(a), b3[:, 2]), (a[::1, :25], np.asfortranarray(b3[:25, 0]))]
    for x, y in cases:
        base = r.standard_normal((50, 26)).astype(dtype)
        out = base.copy()
        view = out[5:5 + x.shape[0], 3:3 + y.shape[1]]
        be._gemm_into(x, y, view, accumulate)
        want = base.copy()
        want[5:5 + x.shape[0], 3:3 + y.shape[1]] = (want[5:5 + x.shape[0], 3:3 + y.shape[1]] if accumulate else 0) \
            + x.astype(np.float64) @ y.astype(np.float64)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gelu_matches_torch(dtype):
    r = np.random.default_rng(2)
    x = np.concatenate([r.standard_normal(70000) * 4, [0.0, -0.0, 30.0, -30.0, 1e-30, -1e-30, 1e20, -1e20]])
    g = r.standard_normal(x.size)
    tol = {"float32": 2e-6, "bfloat16": 1e-2}[dtype]
    for a, b in zip(_grads(pl, pl.nn.functional.gelu, [x], {}, dtype), _grads(torch, F.gelu, [x], {}, dtype)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # float32 with a random (not smooth) seed gradient
    xt = pl.tensor(x.astype(np.float32)).requires_grad_()
    pl.nn.functional.gelu(xt).backward(pl.tensor(g.astype(np.float32)))
    tt = torch.tensor(x.astype(np.float32)).requires_grad_()
    F.gelu(tt).backward(torch.tensor(g.astype(np.float32)))
    np.testing.assert_allclose(xt.grad.numpy(), tt.grad.numpy(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_backward_nonfinite(dtype):
    y = np.array([[np.nan, 0.0, -0.0, 1.0, 0.0, 0.0, 2.0, np.nan]], dtype=dtype)
    g = np.array([[1.0, np.inf, np.nan, np.nan, -np.inf, -2.0, -0.0, np.inf]], dtype=dtype)
    got = CPUBackend().relu_backward(y, g)
    want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(y), 0).numpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[0, 1:3]).any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cross_entropy_fused_matches_torch(reduction, dtype):
    r = np.random.default_rng(4)
    x = r.standard_normal((37, 11)) * 3
    t = r.integers(0, 11, 37)
    t[[3, 17]] = -100

    def fn(lib):
        tt = lib.tensor(t)
        return lambda z: lib.nn.functional.cross_entropy(z, tt, reduction=reduction)
    tol = {"float32": 1e-5, "bfloat16": 2e-2}[dtype]
    for a, b in zip(_grads(pl, fn(pl), [x], {}, dtype), _grads(torch, fn(torch), [x], {}, dtype)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # every target ignored: the mean is 0/0 = NaN, as PyTorch
    none = pl.nn.functional.cross_entropy(pl.tensor(x.astype(np.float32)), pl.tensor(np.full(37, -100)))
    assert np.isnan(none.item())


def test_max_pool_first_max_and_nan():
    x = np.array([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 3.0], [np.nan, 1.0, 5.0, 5.0], [2.0, np.nan, 5.0, 5.0]]]])
    for stride in (2, 1):
        a = pl.nn.functional.max_pool2d(pl.tensor(x), 2, stride, return_indices=True)
        b = F.max_pool2d(torch.tensor(x), 2, stride, return_indices=True)
        np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
        np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())


def _mkl_routed_backend():
    """A CPU backend whose GEMMs take the MKL routes (matmul through ctypes ``gemm`` calls, transposed
    operands passed as flags) with whichever CBLAS this process has: the routing is what is tested."""
    be = CPUBackend()
    if not be._blas():
        pytest.skip("no CBLAS gemm found in this process")
    be._mkl = True
    return be


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_matmul_route_matches_numpy(dtype, monkeypatch):
    import pylucid.backend.cpu as cpu

    monkeypatch.setattr(cpu, "_MKL_MIN_MACS", 1)
    be = _mkl_routed_backend()
    r = np.random.default_rng(6)
    a = r.standard_normal((4, 1, 9, 7)).astype(dtype)
    b = r.standard_normal((3, 7, 5)).astype(dtype)
    cases = [(a, b), (a[0, 0], b[1]), (np.asfortranarray(a[1, 0]), b[2].T.copy().T), (a[..., ::2, :], b),
             (np.broadcast_to(a[0, 0, :1], (9, 7)), b[0]), (a[:, :, :, :0], b[:, :0])]
    for x, y in cases:
        got = be.matmul(x, y)
        assert got.shape == np.matmul(x, y).shape and got.dtype == dtype
        np.testing.assert_allclose(got, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-5)
    # transposed left operand into a view, not accumulated (OpenBLAS leaves it to NumPy, MKL takes it)
    out = np.zeros((12, 10), dtype)
    at = r.standard_normal((7, 9)).astype(dtype)
    be._gemm_into(at.T, b[0], out[2:11, 1:6], False)
    want = np.zeros((12, 10))
    want[2:11, 1:6] = at.T.astype(np.float64) @ b[0]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_blas_choice_env(monkeypatch):
    import pylucid.backend.cpu as cpu

    monkeypatch.setenv("PYLUCID_CPU_BLAS", "openblas")
    assert cpu._find_mkl() == {}
    fns, is_mkl = cpu._find_cblas()
    assert not is_mkl and set(fns) <= {np.dtype(np.float32), np.dtype(np.float64)}


def test_conv_mkl_route_matches_torch():
    """Forward and both gradients of the im2col and tap paths through the MKL routes."""
    be = _mkl_routed_backend()
    r = np.random.default_rng(7)
    for kw, c in (({"padding": 1}, 16), ({"stride": 2, "padding": 1}, 16), ({"padding": 1}, 3)):
        x, w = r.standard_normal((2, c, 9, 8)), r.standard_normal((6, c, 3, 3)) * 0.2
        xt, wt = torch.tensor(x).requires_grad_(), torch.tensor(w).requires_grad_()
        y = F.conv2d(xt, wt, **kw)
        g = np.cos(np.arange(y.numel())).reshape(tuple(y.shape))
        y.backward(torch.tensor(g))
        pads = tuple((kw["padding"],) * 2 for _ in range(2))
        stride = (kw.get("stride", 1),) * 2
        got = be.conv_nd_gemm(x, w, None, stride, pads, (1, 1), 1)
        dx, dw = be.conv_nd_gemm_backward(g, x, w, stride, pads, (1, 1), 1)
        for a, b in ((got, y), (dx, xt.grad), (dw, wt.grad)):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("offset", [0.5, 100.0])
def test_batch_norm_training_fast_path_matches_torch(dtype, affine, offset):
    """Large enough for the CPU backend's fewer-pass batch norm (>= 4096 elements, >= 16 per channel and image);
    a mean of 50 standard deviations checks the two-pass variance and the centred gradient sums."""
    r = np.random.default_rng(8)
    x = r.standard_normal((6, 6, 12, 12)) * 2 + offset
    g = np.cos(np.arange(x.size)).reshape(x.shape)
    w, b = r.standard_normal(6), r.standard_normal(6)
    outs = []
    for lib in (pl, torch):
        dt = getattr(lib, dtype)
        xt = lib.tensor(x).to(dt).requires_grad_()
        wt, bt = [lib.tensor(v).to(dt).requires_grad_() if affine else None for v in (w, b)]
        rm, rv = lib.zeros(6, dtype=dt), lib.ones(6, dtype=dt)
        y = lib.nn.functional.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=0.3, eps=1e-5)
        y.backward(lib.tensor(g).to(dt))
        outs.append([a.detach().numpy() for a in (y, xt.grad, rm, rv) + ((wt.grad, bt.grad) if affine else ())])
    tol = {"float32": 1e-4, "float64": 1e-10}[dtype]
    for a, e in zip(*outs):
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, float(np.abs(e).max())))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [{"stride": 2, "padding": 1}, {"stride": 3, "padding": 2},
                                {"stride": 2, "dilation": 3, "padding": 2}, {"stride": 3}])
@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_conv_strided_data_grad_classes_match_torch(nd, kw, dtype, monkeypatch):
    """The col2im-free data gradient of strided convolutions (residue classes of the stride, one GEMM per tap
    on a coarse grid), forced on every grid: odd sizes, a stride past the kernel (classes no tap reaches),
    dilation; also as the forward of the transposed convolution, with output_padding."""
    calls = []
    orig = ArrayBackend._conv_classes_dx

    def spy(self, *a):
        calls.append(1)
        return orig(self, *a)
    monkeypatch.setattr(ArrayBackend, "_conv_classes_dx", spy)
    monkeypatch.setattr(ArrayBackend, "_TAP_MAX_WASTE", 1e9)
    r = np.random.default_rng(nd)
    sp = {1: (11,), 2: (7, 6), 3: (5, 6, 4)}[nd]
    k = 2 if kw["stride"] == 3 and "padding" not in kw else 3
    x = r.standard_normal((2, 16) + sp)  # 16 channels: the backend's channels-last paths (fewer: the op's own)
    w = r.standard_normal((4, 16) + (k,) * nd) * 0.3
    _compare(*CONV[nd], (x, w), kw, dtype)
    assert calls
    if nd < 3:
        calls.clear()
        xt = r.standard_normal((2, 4) + sp[:nd])
        opad = 1 if kw.get("dilation", 1) > 1 or kw["stride"] > 1 else 0
        _compare(*CONV_T[nd], (xt, w), dict(kw, output_padding=opad), dtype)
        assert calls


def test_parallel_chunks_cover_once_and_raise():
    from pylucid import _threads

    seen = []
    _threads.parallel_chunks(lambda lo, hi: seen.append((lo, hi)), 7, threads=3)
    assert sorted(seen) == [(0, 2), (2, 4), (4, 7)]
    seen.clear()
    _threads.parallel_chunks(lambda lo, hi: seen.append((lo, hi)), 2, threads=5)  # no more chunks than items
    assert sorted(seen) == [(0, 1), (1, 2)]

    def fail(lo, hi):
        if lo > 0:
            raise ValueError(f"chunk {lo}")
    with pytest.raises(ValueError, match="chunk"):
        _threads.parallel_chunks(fail, 4, threads=2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,dim,keepdim", [((300, 1000), 1, False), ((2, 50, 700), -1, True),
                                               ((70, 1000), (1,), False)])
def test_last_axis_sums_through_gemv_match_torch(dtype, shape, dim, keepdim):
    """sum/mean over the last axis of large contiguous rows (the CPU backend's GEMV path) against torch, with
    inf and NaN rows, and the path actually taken."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(dtype)
    a.reshape(-1, shape[-1])[3, 5] = np.inf
    a.reshape(-1, shape[-1])[4, 7] = np.nan
    a.reshape(-1, shape[-1])[6, :2] = (np.inf, -np.inf)
    assert pl.device("cpu").backend._row_sums(a, dim, keepdim) is not None
    for name in ("sum", "mean"):
        got = getattr(pl, name)(pl.tensor(a), dim=dim, keepdim=keepdim).numpy()
        want = getattr(torch, name)(torch.tensor(a), dim=dim, keepdim=keepdim).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got) * np.sign(got), np.isinf(want) * np.sign(want))
        # a blocked sum's rounding: within a few ulps of the row's sum of magnitudes (PyTorch's error is ~1e-8 of
        # it, the GEMV's ~3e-8 measured over 2000 rows of 1000 float32 normals)
        mag = np.abs(a).sum(axis=-1, keepdims=keepdim) / (shape[-1] if name == "mean" else 1)
        ok = np.isfinite(want)
        assert (np.abs(got[ok] - want[ok]) <= 4 * np.finfo(dtype).eps * mag[ok]).all()


def _spy(monkeypatch, name, cls=ArrayBackend):
    calls = []
    orig = getattr(cls, name)

    def spy(self, *a, **k):
        calls.append(name)
        return orig(self, *a, **k)
    monkeypatch.setattr(cls, name, spy)
    return calls


@pytest.mark.parametrize("nd,sp", [(1, (13,)), (2, (7, 6)), (3, (5, 4, 3))])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_conv1x1_matches_torch(nd, sp, stride, dtype, monkeypatch):
    """1x1 convolutions as per-image channels-first GEMMs (forward, data and weight gradient; bias; odd sizes,
    strides past the image, batch 1; dilation changes nothing), also as a transposed convolution with
    output_padding, and with the layout copies split over threads (forced on tiny arrays, 3 threads on 3 images)."""
    calls = []
    for name in ("_conv1x1", "_conv1x1_dx", "_conv1x1_dw"):
        calls.append(_spy(monkeypatch, name))
    r = np.random.default_rng(stride + 10 * nd)
    for n in (1, 3):
        x = r.standard_normal((n, 16) + sp)
        w = r.standard_normal((5, 16) + (1,) * nd) * 0.3
        _compare(*CONV[nd], (x, w, r.standard_normal(5)), {"stride": stride, "dilation": 2}, dtype)
    assert all(calls)
    if nd < 3:
        xt = r.standard_normal((2, 16) + sp)
        opad = stride - 1
        _compare(*CONV_T[nd], (xt, r.standard_normal((16, 5) + (1,) * nd) * 0.3), {"stride": stride,
                                                                                 "output_padding": opad}, dtype)
    monkeypatch.setattr(CPUBackend, "_PAR_MIN", 0)
    n0 = pl.get_num_threads()
    pl.set_num_threads(3)
    try:
        x = r.standard_normal((3, 16) + sp)
        _compare(*CONV[nd], (x, r.standard_normal((4, 16) + (1,) * nd) * 0.3), {"stride": stride}, dtype)
    finally:
        pl.set_num_threads(n0)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_conv1x1_backend_noncontiguous_and_half(stride, dtype):
    """The backend's 1x1 path on non-contiguous arrays (a channels-last view, a negative-stride gradient) and
    half inputs (computed in float32, rounded once), against PyTorch in float64."""
    be = CPUBackend()
    r = np.random.default_rng(7)
    x = np.moveaxis(r.standard_normal((2, 9, 7, 3)), -1, 1).astype(dtype)  # (2, 3, 9, 7), channels-last memory
    w = (r.standard_normal((4, 3, 1, 1)) * 0.5).astype(dtype)
    b = r.standard_normal(4).astype(dtype)
    pads, st, dl = ((0, 0), (0, 0)), (stride, stride), (1, 1)
    y = be.conv_nd_gemm(x, w, b, st, pads, dl, 1)
    xt, wt, bt = (torch.tensor(a.astype(np.float64)) for a in (x, w, b))
    yt = F.conv2d(xt, wt, bt, stride=stride)
    tol = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    assert y.dtype == dtype and y.shape == tuple(yt.shape)
    np.testing.assert_allclose(y.astype(np.float64), yt.numpy(), rtol=tol, atol=tol * 4)
    g = r.standard_normal(tuple(yt.shape)).astype(dtype)[..., ::-1]  # non-contiguous: a reversed last axis
    dx, dw = be.conv_nd_gemm_backward(g, x, w, st, pads, dl, 1)
    dxt, dwt, _ = torch.ops.aten.convolution_backward(torch.tensor(g.astype(np.float64)), xt, wt, None, [stride] * 2,
                                                      [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
    assert dx.dtype == dw.dtype == dtype
    np.testing.assert_allclose(dx.astype(np.float64), dxt.numpy(), rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(dw.astype(np.float64), dwt.numpy(), rtol=tol, atol=tol * 10)


def test_conv1x1_empty_batch():
    """An empty batch on the 1x1 path: PyTorch's shapes and a zero weight gradient."""
    shape = (0, 16, 5, 5)
    outs = []
    for lib in (torch, pl):
        x = lib.ones(shape, requires_grad=True)
        w = lib.ones((4, shape[1], 1, 1), requires_grad=True)
        y = lib.nn.functional.conv2d(x, w, stride=2)
        y.sum().backward()
        outs.append((tuple(y.shape), tuple(x.grad.shape), float(w.grad.abs().sum())))
    assert outs[0] == outs[1]


def _special_floats(n):
    """``n`` float32 values with every class a bfloat16 rounding meets: normal values of many binades, ties to
    even both ways, subnormals, signed zeros, infinities, the largest value (rounds to infinity), NaNs."""
    r = np.random.default_rng(11)
    x = (r.standard_normal(n) * np.exp2(r.integers(-140, 120, n))).astype(np.float32)
    bits = np.array([0x3F808000, 0x3F818000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                     0xFF800000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x80000000, 0x00000000], np.uint32)
    x[:bits.size] = bits.view(np.float32)
    x[bits.size::997] = np.nan
    return x


@pytest.mark.parametrize("shape", [(1 << 16,), (3, 257, 129), (1 << 17 | 5,)])
def test_bfloat16_casts_match_ml_dtypes_bit_for_bit(shape):
    """The CPU backend's whole-array float32 <-> bfloat16 casts (round to nearest even) give ml_dtypes' bits,
    NaNs, infinities, subnormals and ties included; those arrays are large enough to take the fast path."""
    be = CPUBackend()
    bf = np.dtype(pl.bfloat16.numpy_dtype)
    x = _special_floats(int(np.prod(shape))).reshape(shape)
    with np.errstate(invalid="ignore"):
        want = x.astype(bf)
    got = be.astype(x, bf)
    assert got.dtype == bf and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    back = be.astype(want, np.float32)
    np.testing.assert_array_equal(back.view(np.uint32), want.astype(np.float32).view(np.uint32))
    # torch's rounding agrees on the non-NaN values (its NaN bits are another quiet NaN)
    fin = ~np.isnan(x)
    t = torch.from_numpy(x).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got.view(np.uint16)[fin], t[fin])


def test_bfloat16_casts_of_views_and_small_arrays():
    be = CPUBackend()
    bf = np.dtype(pl.bfloat16.numpy_dtype)
    x = _special_floats(1 << 17).reshape(256, 512)
    for a in (x[:, ::2], x.T, x[:3]):  # strided views and a small array: ml_dtypes' own cast
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(be.astype(a, bf).view(np.uint16), a.astype(bf).view(np.uint16))
    same = x.astype(bf)
    assert be.astype(same, bf, copy=False) is same
