"""The CPU fast paths of the transformer ops against PyTorch: softmax / log-softmax over the last axis (the shared
shift and its fallback to row maxima), the embedding backward's sorted row sums, GELU's float32 derivative."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid
from pylucid.ops import special


def _softmax_pair(fn, tfn, x, g):
    px = pylucid.tensor(x).requires_grad_()
    tx = torch.tensor(x).requires_grad_()
    py, ty = fn(px, -1), tfn(tx, -1)
    py.backward(pylucid.tensor(g))
    ty.backward(torch.tensor(g))
    return py.detach().numpy(), ty.detach().numpy(), px.grad.numpy(), tx.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("case", ["narrow", "wide", "rows_apart", "causal", "nonfinite"])
def test_softmax_last_axis_matches_torch(case, log, dtype):
    r = np.random.default_rng(5)
    x = r.standard_normal((3, 4, 16, 33))
    if case == "wide":  # one row's entries spread far beyond the shared-shift window
        x[0, 0, 0] *= 40
    elif case == "rows_apart":  # every row narrow, but rows 30 apart: each row needs its own shift
        x += 30 * np.arange(x.shape[-2])[:, None]
    elif case == "causal":
        x = x + np.triu(np.full((16, 33), -np.inf), 1)
    elif case == "nonfinite":
        x[0, 0, 0, 3], x[0, 1, 2] = np.nan, -np.inf  # a NaN row and an all -inf row (NaN in PyTorch too)
        x[1, 0, 0, 5] = np.inf
    x = x.astype(dtype)
    g = r.standard_normal(x.shape).astype(dtype)
    fn, tfn = (pylucid.log_softmax, torch.log_softmax) if log else (pylucid.softmax, torch.softmax)
    y, ty, gx, tgx = _softmax_pair(fn, tfn, x, g)
    tol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(y, ty, rtol=tol * 4, atol=tol)
    np.testing.assert_allclose(gx, tgx, rtol=tol * 4, atol=tol * 4)
    assert np.array_equal(np.isnan(y), np.isnan(ty))


def test_softmax_shift_choice():
    be = pylucid.device("cpu").backend
    narrow = np.array([[0.0, 1.0, 2.0], [-3.0, 0.5, 0.0]], np.float32)
    assert np.ndim(special._cpu_shift(be, narrow)) == 0  # the shared maximum
    apart = narrow + np.array([[0.0], [50.0]], np.float32)
    np.testing.assert_array_equal(special._cpu_shift(be, apart), [[2.0], [50.5]])  # the row maxima
    assert np.ndim(special._cpu_shift(be, np.array([[0.0, np.nan]], np.float32))) == 2


def test_softmax_half_and_empty():
    x = np.random.default_rng(1).standard_normal((5, 9)).astype(np.float32)
    for dt in (pylucid.bfloat16, pylucid.float16):
        y = pylucid.softmax(pylucid.tensor(x).to(dt), -1)
        want = torch.softmax(torch.tensor(x).to(getattr(torch, dt.name)), -1).float().numpy()
        assert y.dtype is dt
        np.testing.assert_allclose(y.float().numpy(), want, atol=1e-2)
    assert pylucid.softmax(pylucid.zeros(2, 0), -1).shape == (2, 0)
    assert pylucid.log_softmax(pylucid.zeros(0, 3), -1).shape == (0, 3)


@pytest.mark.parametrize("num,shape,padding_idx", [(65, (16, 64), None), (1000, (3, 5), 2), (4, (50,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_backward_sums_repeated_rows(num, shape, padding_idx, dtype):
    r = np.random.default_rng(7)
    idx = r.integers(0, num, shape)
    w = r.standard_normal((num, 6)).astype(dtype)
    g = r.standard_normal(shape + (6,)).astype(dtype)
    pw, tw = pylucid.tensor(w).requires_grad_(), torch.tensor(w).requires_grad_()
    pylucid.nn.functional.embedding(pylucid.tensor(idx), pw, padding_idx=padding_idx).backward(pylucid.tensor(g))
    torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=padding_idx).backward(torch.tensor(g))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), rtol=tol, atol=tol)


def test_gelu_float32_derivative_both_signs():
    x = np.concatenate([np.linspace(-8, 8, 4001), [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0]]).astype(np.float32)
    px = pylucid.tensor(x).requires_grad_()
    pylucid.nn.functional.gelu(px).sum().backward()
    tx = torch.tensor(x, dtype=torch.float64).requires_grad_()
    torch.nn.functional.gelu(tx).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=0, atol=5e-7)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_rows_backward_matches_torch(affine, dtype):
    # rows far from zero mean (the centring must come before the products); the oracle is PyTorch in float64 on
    # the same values (its float32 kernel is off by as much as ours here: the statistics' rounding dominates)
    r = np.random.default_rng(11)
    x = (r.standard_normal((4, 9, 48)) * 0.5 + 20.0).astype(dtype)
    g = r.standard_normal(x.shape).astype(dtype)
    w, b = r.standard_normal(48).astype(dtype), r.standard_normal(48).astype(dtype)
    pw, pb = (pylucid.tensor(w).requires_grad_(), pylucid.tensor(b).requires_grad_()) if affine else (None, None)
    t64 = [torch.tensor(a.astype(np.float64)).requires_grad_() for a in (x, w, b)]
    tx, tw, tb = t64 if affine else (t64[0], None, None)
    px = pylucid.tensor(x).requires_grad_()
    pylucid.nn.functional.layer_norm(px, (48,), pw, pb).backward(pylucid.tensor(g))
    torch.nn.functional.layer_norm(tx, (48,), tw, tb).backward(torch.tensor(g.astype(np.float64)))
    tol = 6e-5 if dtype == "float32" else 1e-11
    pairs = [(px, tx)] + ([(pw, tw), (pb, tb)] if affine else [])
    for p, t in pairs:
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


def test_gelu_float32_same_values_with_and_without_grad():
    x = np.random.default_rng(4).standard_normal(70001).astype(np.float32) * 4
    x[:4] = [np.inf, -np.inf, 0.0, -7.0]
    with pylucid.no_grad():
        plain = pylucid.nn.functional.gelu(pylucid.tensor(x)).numpy()
    with_grad = pylucid.nn.functional.gelu(pylucid.tensor(x).requires_grad_()).detach().numpy()
    np.testing.assert_array_equal(plain, with_grad)
    assert plain[0] == np.inf and np.isnan(plain[1]) and plain[2] == 0
    want = torch.nn.functional.gelu(torch.tensor(x, dtype=torch.float64)).numpy()
    # PyTorch's own float32 gelu is off by up to ~1.1e-6 on AVX-512 machines (oneDNN's, which runs here, by the
    # same; both ~5e-7 on AVX2)
    np.testing.assert_allclose(plain[4:], want[4:], rtol=1e-6, atol=1.5e-6)
