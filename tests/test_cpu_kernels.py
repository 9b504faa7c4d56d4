"""The CPU kernels of pylucid/backend/base.py against PyTorch: the stride-1 tap-GEMM convolution path
(taken from 16 input channels, so the op database's small samples do not reach it), the im2col path at
the same sizes, and the query-tiled attention with several blocks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pylucid as pl
from pylucid.backend.base import ArrayBackend

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


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [{"padding": 1}, {"padding": 2, "dilation": 2}, {"stride": 2, "padding": 1},
                                {"groups": 2}])
def test_conv_paths_match_torch(nd, kw):
    r = np.random.default_rng(nd)
    sp = {1: (9,), 2: (6, 5), 3: (4, 5, 3)}[nd]
    x = r.standard_normal((2, 16) + sp)
    w = r.standard_normal((5, 16 // kw.get("groups", 1)) + (3,) * nd) * 0.2
    b = r.standard_normal(5 if "groups" not in kw else 6)
    if "groups" in kw:
        w = r.standard_normal((6, 8) + (3,) * nd) * 0.2
    _compare(*CONV[nd], (x, w, b), kw, "float64")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv_taps_half_and_single(dtype):
    r = np.random.default_rng(0)
    _compare(*CONV[2], (r.standard_normal((2, 16, 7, 6)), r.standard_normal((4, 16, 3, 2)) * 0.2),
             {"padding": (1, 0)}, dtype)


@pytest.mark.parametrize("kw", [{"padding": 1}, {"padding": 1, "dilation": 2, "output_padding": 1},
                                {"stride": 2, "padding": 1, "output_padding": 1}])
@pytest.mark.parametrize("nd", [1, 2])
def test_conv_transpose_paths_match_torch(nd, kw):
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
