"""pylucid.signal.windows and the window creation functions against torch."""

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid.signal import windows

WINDOWS = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}), ("exponential", {"tau": 2.5}),
           ("gaussian", {}), ("gaussian", {"std": 3.0}), ("general_cosine", {"a": [0.46, 0.23, 0.31]}),
           ("general_hamming", {}), ("general_hamming", {"alpha": 0.6}), ("hamming", {}), ("hann", {}),
           ("kaiser", {}), ("kaiser", {"beta": 3.5}), ("nuttall", {})]


def _close(got, want, dtype):
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


def test_names_match_torch():
    assert sorted(windows.__all__) == sorted(torch.signal.windows.__all__)


@pytest.mark.parametrize("name,kw", WINDOWS)
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_match_torch(name, kw, sym, dtype):
    for M in (0, 1, 2, 7, 16):
        got = getattr(windows, name)(M, sym=sym, dtype=getattr(pl, dtype), **kw)
        want = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dtype), **kw)
        _close(got, want, dtype)


def test_default_dtype_requires_grad_and_center():
    w = windows.hann(8)
    assert w.dtype == pl.float32 and not w.requires_grad
    assert windows.kaiser(5, requires_grad=True).requires_grad
    assert windows.hann(0, requires_grad=True).requires_grad
    got = windows.exponential(9, center=2.0, sym=False, dtype=pl.float64)
    want = torch.signal.windows.exponential(9, center=2.0, sym=False, dtype=torch.float64)
    _close(got, want, "float64")
    pl.set_default_dtype(pl.float64)
    try:
        assert windows.gaussian(4).dtype == pl.float64
    finally:
        pl.set_default_dtype(pl.float32)


@pytest.mark.parametrize("call", [
    lambda m: m.hann(-1), lambda m: m.hann(4, dtype=m_int(m)), lambda m: m.exponential(4, tau=0.0),
    lambda m: m.exponential(4, center=1.0, sym=True), lambda m: m.gaussian(4, std=-1.0),
    lambda m: m.kaiser(4, beta=-1.0), lambda m: m.general_cosine(4, a=[]),
])
def test_window_errors_match_torch(call):
    with pytest.raises(ValueError):
        call(torch.signal.windows)
    with pytest.raises(ValueError):
        call(windows)
    with pytest.raises(TypeError):
        windows.general_cosine(4, a=0.5)


def m_int(m):
    return torch.int64 if m is torch.signal.windows else pl.int64


CREATION = [("hann_window", {}), ("hamming_window", {}), ("hamming_window", {"alpha": 0.5, "beta": 0.3}),
            ("blackman_window", {}), ("bartlett_window", {}), ("kaiser_window", {}), ("kaiser_window", {"beta": 4.0})]


@pytest.mark.parametrize("name,kw", CREATION)
@pytest.mark.parametrize("periodic", [True, False, None])
def test_creation_windows_match_torch(name, kw, periodic):
    if periodic is None and kw:
        pytest.skip("torch takes alpha / beta only after periodic")
    for n in (0, 1, 2, 5, 12):
        for dtype in ("float32", "float64"):
            args = (n,) if periodic is None else (n, periodic)
            got = getattr(pl, name)(*args, dtype=getattr(pl, dtype), **kw)
            want = getattr(torch, name)(*args, dtype=getattr(torch, dtype), **kw)
            _close(got, want, dtype)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("periodic", [None, "abc", 1, [1.0]])
def test_creation_windows_take_a_bool_periodic_only(name, periodic):
    with pytest.raises(TypeError):
        getattr(torch, name)(6, periodic)
    with pytest.raises(TypeError, match=rf"^{name}: periodic must be a bool"):
        getattr(pl, name)(6, periodic)


def test_creation_windows_are_declared_in_pylucid():
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        d = pl.ops.declaration(name)
        assert d.op is None and "pylucid" in d.namespaces and not d.methods
    assert pl.ops.declaration("hann", "pylucid.signal.windows").fn is windows.hann


def test_window_in_stft_style_use():
    """A periodic Hann window times frames of a signal, differentiated through the signal."""
    x = pl.tensor(np.random.default_rng(0).standard_normal(16), requires_grad=True)
    w = pl.hann_window(16, dtype=pl.float64)
    (x * w).square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() * torch.hann_window(16, dtype=torch.float64)
                               .numpy() ** 2, rtol=1e-12)
