"""FFT and complex tensors beyond the generic suite: output dtypes, complex-valued inputs and outputs,
real losses of complex intermediates against PyTorch (first and second order), helpers and edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid.errors import LucidError


def _grads(fn_pl, fn_t, x, create_graph=True):
    xp, xt = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (gp,) = pl.autograd.grad(fn_pl(xp), xp, create_graph=create_graph)
    (gt,) = torch.autograd.grad(fn_t(xt), xt, create_graph=create_graph)
    return xp, xt, gp, gt


@pytest.mark.parametrize("name,dt,want", [("fft", "float32", "complex64"), ("fft", "float64", "complex128"),
                                          ("rfft", "float32", "complex64"), ("irfft", "complex64", "float32"),
                                          ("irfft", "complex128", "float64"), ("ifft", "complex64", "complex64"),
                                          ("fft", "int64", "complex64"), ("rfft", "float16", "complex64")])
def test_output_dtypes(name, dt, want):
    x = pl.tensor(np.arange(6).astype(dt))
    assert getattr(pl.fft, name)(x).dtype.name == want


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_real_loss_of_complex_spectrum_matches_torch_to_second_order(norm):
    x = np.random.default_rng(0).standard_normal((3, 8))

    def f_pl(t):
        z = pl.fft.rfft(t, norm=norm)
        return (pl.real(z) * pl.imag(z)).sum() + pl.angle(z[:, 1:3]).sum() + pl.fft.irfft(z * 2.0, n=8).sum()

    def f_t(t):
        z = torch.fft.rfft(t, norm=norm)
        return (z.real * z.imag).sum() + torch.angle(z[:, 1:3]).sum() + torch.fft.irfft(z * 2.0, n=8).sum()

    xp, xt, gp, gt = _grads(f_pl, f_t, x)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), atol=1e-10)
    (ggp,) = pl.autograd.grad((gp * gp).sum(), xp)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(ggp.numpy(), ggt.numpy(), atol=1e-9)


def test_abs_of_fft_first_order_matches_torch():
    # abs of a complex tensor is the core's Abs: first order is right (g * x/|x|)
    x = np.random.default_rng(1).standard_normal((4, 6))
    _, _, gp, gt = _grads(lambda t: pl.fft.fft(t).abs().sum(), lambda t: torch.fft.fft(t).abs().sum(), x, False)
    np.testing.assert_allclose(gp.numpy(), gt.numpy(), atol=1e-10)


def test_complex_leaf_gradient_is_conjugate_wirtinger():
    z = np.array([1 + 2j, -0.5 + 1j])
    zp, zt = pl.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    (pl.real(pl.fft.fft(zp)) * 3.0 + pl.imag(pl.conj(zp))).sum().backward()
    (torch.fft.fft(zt).real * 3.0 + zt.conj().imag).sum().backward()
    np.testing.assert_allclose(zp.grad.numpy(), zt.grad.numpy(), atol=1e-12)
    assert zp.grad.dtype is pl.complex128


def test_helpers_match_torch():
    np.testing.assert_allclose(pl.fft.fftfreq(5, d=0.5).numpy(), torch.fft.fftfreq(5, d=0.5).numpy())
    np.testing.assert_allclose(pl.fft.rfftfreq(6).numpy(), torch.fft.rfftfreq(6).numpy())
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(pl.fft.fftshift(pl.tensor(x)).numpy(), torch.fft.fftshift(torch.tensor(x)).numpy())
    np.testing.assert_allclose(pl.fft.ifftshift(pl.tensor(x), dim=1).numpy(),
                               torch.fft.ifftshift(torch.tensor(x), dim=1).numpy())
    np.testing.assert_allclose(pl.fft.hfft(pl.tensor(x + 1j)).numpy(), torch.fft.hfft(torch.tensor(x + 1j)).numpy())


def test_empty_batch_gives_empty_result():
    # PyTorch's MKL backend raises on an empty batch; pylucid returns the empty spectrum
    assert pl.fft.fft(pl.zeros(0, 4)).shape == (0, 4)
    assert pl.fft.rfft(pl.zeros(0, 4)).shape == (0, 3)


def test_complex_ops_forward_and_dtypes():
    z = pl.tensor([1 + 2j, -3 - 1j])
    assert pl.real(z).dtype is pl.float32 and pl.is_complex(z) and not pl.is_complex(pl.real(z))
    assert pl.polar(pl.tensor([2.0]), pl.tensor([np.pi / 2])).dtype is pl.complex64
    np.testing.assert_allclose(pl.polar(pl.tensor([2.0]), pl.tensor([np.pi / 2])).numpy(), [2j], atol=1e-6)
    assert pl.view_as_real(z).shape == (2, 2)
    np.testing.assert_allclose(pl.conj_physical(z).numpy(), np.conj(z.numpy()))
    r = pl.tensor([1.0, -2.0])
    assert pl.real(r) is r and pl.conj(r) is r
    with pytest.raises(pl.DtypeMismatch, match="complex: expected real and imag to have the same dtype"):
        pl.complex(pl.ones(2), pl.ones(2, dtype=pl.float64))


def test_fft_names_are_torch_fft_names():
    assert pl.fft.__all__
    for name in pl.fft.__all__:
        assert callable(getattr(pl.fft, name)) and hasattr(torch.fft, name), name


@pytest.mark.parametrize("shape,dim", [((5,), None), ((4, 5), 1), ((4, 5), (0, 1)), ((3, 4, 6), (-1, 0))])
def test_shifts_match_torch_with_gradients(shape, dim):
    a = np.random.default_rng(2).standard_normal(shape)
    w = np.arange(a.size, dtype=float).reshape(shape)
    for name in ("fftshift", "ifftshift"):
        x, xt = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = getattr(pl.fft, name)(x, dim=dim), getattr(torch.fft, name)(xt, dim=dim)
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        (y * pl.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_shift_of_a_0d_tensor_is_a_copy():
    # torch.fft.fftshift raises on a 0-d input ("shifts required"); pylucid has nothing to move
    x = pl.tensor(3.0)
    y = pl.fft.fftshift(x)
    assert y.item() == 3.0 and not np.shares_memory(y._data, x._data)


def test_non_tensor_input_names_the_transform():
    with pytest.raises(TypeError, match="rfft: input must be a Tensor, got list"):
        pl.fft.rfft([1.0, 2.0])
    with pytest.raises(TypeError, match="fftshift: input must be a Tensor, got list"):
        pl.fft.fftshift([1.0, 2.0])


# ---------------------------------------------------------------- stft / istft
def test_stft_istft_round_trip_with_a_hann_window():
    x = np.random.default_rng(0).standard_normal((2, 64))
    w = np.hanning(17)[1:]  # periodic Hann of length 16
    X = pl.stft(pl.tensor(x), 16, hop_length=4, window=pl.tensor(w), return_complex=True)
    tX = torch.stft(torch.tensor(x), 16, hop_length=4, window=torch.tensor(w), return_complex=True)
    np.testing.assert_allclose(X.numpy(), tX.numpy(), atol=1e-10)
    y = pl.istft(X, 16, hop_length=4, window=pl.tensor(w), length=64)
    np.testing.assert_allclose(y.numpy(), x, atol=1e-10)


def test_stft_requires_return_complex_for_real_input_as_torch_2():
    with pytest.raises(ValueError, match="stft: return_complex must be given"):
        pl.stft(pl.ones(16), 8)
    with pytest.raises(RuntimeError):
        torch.stft(torch.ones(16), 8, window=torch.ones(8))
    assert pl.stft(pl.ones(16), 8, return_complex=False).shape == (5, 9, 2)  # 1 + (16 + 8 - 8) // 2 frames


def test_istft_rejects_a_window_that_does_not_overlap():
    X = pl.stft(pl.ones(32), 8, hop_length=8, window=pl.ones(8), return_complex=True)
    w = pl.tensor([0.0] * 4 + [1.0] * 4)
    with pytest.raises(LucidError, match="istft: the window"):
        pl.istft(X, 8, hop_length=8, window=w)


@pytest.mark.parametrize("name", ["hfft2", "hfftn", "ihfft2", "ihfftn"])
def test_hermitian_nd_transforms_invert_each_other(name):
    x = np.random.default_rng(1).standard_normal((4, 6))
    if name.startswith("i"):
        spec = getattr(pl.fft, name)(pl.tensor(x))
        back = getattr(pl.fft, name[1:])(spec, s=x.shape)
        np.testing.assert_allclose(back.numpy(), x, atol=1e-12)
    else:
        np.testing.assert_allclose(getattr(pl.fft, name)(pl.tensor(x + 0j)).numpy(),
                                   getattr(torch.fft, name)(torch.tensor(x + 0j)).numpy(), atol=1e-10)


@pytest.mark.parametrize("shape, n", [((0,), 8), ((2, 0), 6)])
def test_irfft_of_an_empty_spectrum_is_zeros(shape, n):
    x = np.zeros(shape, dtype=np.complex64)
    np.testing.assert_array_equal(pl.fft.irfft(pl.tensor(x), n=n).numpy(),
                                  torch.fft.irfft(torch.tensor(x), n=n).numpy())
    np.testing.assert_array_equal(pl.fft.irfftn(pl.tensor(x), s=(n,)).numpy(),
                                  torch.fft.irfftn(torch.tensor(x), s=(n,)).numpy())
