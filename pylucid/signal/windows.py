"""``pylucid.signal.windows``: the window functions of ``torch.signal.windows``.

Each window is ``M`` samples of a closed-form curve, computed in float64
from ``arange`` and element-wise ops and cast to ``dtype`` (the default
dtype when None; float32 or float64 only, as PyTorch). ``sym=True`` gives the
symmetric window of filter design; ``sym=False`` the periodic window of
spectral analysis (the first ``M`` samples of the symmetric window of
``M + 1``). ``M == 0`` gives an empty tensor and ``M == 1`` a single one.

>>> import pylucid
>>> from pylucid.signal import windows
>>> windows.hann(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
>>> windows.bartlett(4, sym=False)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..ops.registry import declare

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]

_NS = ("pylucid.signal.windows",)


def _check(name: str, M, dtype):
    from .. import dtypes as _dt

    if dtype is None:
        dtype = _dt.get_default_dtype()
    M = M.__index__() if hasattr(M, "__index__") else M
    if not isinstance(M, int):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if dtype not in (_dt.float32, _dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return M, dtype


def _finish(w, dtype, requires_grad):
    w = w.to(dtype)
    return w.requires_grad_(True) if requires_grad else w


def _trivial(M, dtype, device, requires_grad):
    """The windows of 0 and 1 samples (empty and ``[1.]``), or None."""
    if M > 1:
        return None
    from .. import creation

    return creation.ones(M, dtype=dtype, device=device, requires_grad=requires_grad)


def _grid(M, start, step, device):
    """``start + step * n`` for ``n = 0 .. M-1``, float64."""
    from .. import creation, dtypes

    return creation.arange(M, dtype=dtypes.float64, device=device) * step + start


def _denominator(M, sym):
    return M - 1 if sym else M


@declare(namespaces=_NS, method=False)
def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The general cosine window :math:`w_n = \sum_i (-1)^i a_i \cos(2\pi i n / N)`.

    ``N = M - 1`` for a symmetric window, ``M`` for a periodic one; ``a`` is a list or tuple of
    coefficients (at least one).

    >>> import pylucid
    >>> pylucid.signal.windows.general_cosine(3, a=[0.5, 0.5])
    tensor([0., 1., 0.])
    """
    M, dtype = _check("general_cosine", M, dtype)
    if not isinstance(a, Iterable):
        raise TypeError("general_cosine: coefficients a must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("general_cosine: coefficients a cannot be empty")
    t = _trivial(M, dtype, device, requires_grad)
    if t is not None:
        return t
    k = _grid(M, 0.0, 2 * math.pi / _denominator(M, sym), device)
    w = None
    for i, c in enumerate(a):
        term = (k * i).cos() * ((-1) ** i * float(c))
        w = term if w is None else w + term
    return _finish(w, dtype, requires_grad)


@declare(namespaces=_NS, method=False)
def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The generalized Hamming window :math:`w_n = \alpha - (1 - \alpha) \cos(2\pi n / N)`.

    >>> import pylucid
    >>> pylucid.signal.windows.general_hamming(3, alpha=0.5)
    tensor([0., 1., 0.])
    """
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


@declare(namespaces=_NS, method=False)
def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Hamming window :math:`w_n = 0.54 - 0.46 \cos(2\pi n / N)`.

    >>> import pylucid
    >>> pylucid.signal.windows.hamming(3)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(namespaces=_NS, method=False)
def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Hann window :math:`w_n = \sin^2(\pi n / N)`.

    >>> import pylucid
    >>> pylucid.signal.windows.hann(3)
    tensor([0., 1., 0.])
    """
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(namespaces=_NS, method=False)
def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Blackman window :math:`w_n = 0.42 - 0.5 \cos(2\pi n / N) + 0.08 \cos(4\pi n / N)`.

    >>> import pylucid
    >>> [abs(round(v, 4)) for v in pylucid.signal.windows.blackman(5).tolist()]
    [0.0, 0.34, 1.0, 0.34, 0.0]
    """
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(namespaces=_NS, method=False)
def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""Nuttall's minimum 4-term Blackman-Harris window (coefficients 0.3635819, 0.4891775, 0.1365995, 0.0106411).

    >>> import pylucid
    >>> pylucid.signal.windows.nuttall(3).round(decimals=4)
    tensor([0.0004, 1.0000, 0.0004])
    """
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


@declare(namespaces=_NS, method=False)
def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Bartlett (triangular) window :math:`w_n = 1 - |2n / N - 1|`.

    >>> import pylucid
    >>> pylucid.signal.windows.bartlett(5)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    M, dtype = _check("bartlett", M, dtype)
    t = _trivial(M, dtype, device, requires_grad)
    if t is not None:
        return t
    k = _grid(M, -1.0, 2.0 / _denominator(M, sym), device)
    return _finish(1.0 - k.abs(), dtype, requires_grad)


@declare(namespaces=_NS, method=False)
def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The cosine (sine) window :math:`w_n = \sin(\pi (n + 1/2) / M)` (``M + 1`` for a periodic window).

    >>> import pylucid
    >>> pylucid.signal.windows.cosine(2).round(decimals=4)
    tensor([0.7071, 0.7071])
    """
    M, dtype = _check("cosine", M, dtype)
    if M == 0:
        return _trivial(M, dtype, device, requires_grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    return _finish(_grid(M, 0.5 * c, c, device).sin(), dtype, requires_grad)


@declare(namespaces=_NS, method=False)
def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The exponential (Poisson) window :math:`w_n = \exp(-|n - c| / \tau)`.

    ``center`` defaults to the middle (``M / 2`` periodic, ``(M - 1) / 2``
    symmetric) and must be None for a symmetric window; ``tau > 0``.

    >>> import pylucid
    >>> pylucid.signal.windows.exponential(3, tau=1.0).round(decimals=4)
    tensor([0.3679, 1.0000, 0.3679])
    """
    M, dtype = _check("exponential", M, dtype)
    if tau <= 0:
        raise ValueError(f"exponential: tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("exponential: center must be None for symmetric windows")
    if M == 0:
        return _trivial(M, dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _grid(M, -center / tau, 1.0 / tau, device)
    return _finish((-k.abs()).exp(), dtype, requires_grad)


@declare(namespaces=_NS, method=False)
def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Gaussian window :math:`w_n = \exp(-(n - c)^2 / (2\sigma^2))`, ``c`` the middle; ``std > 0``.

    >>> import pylucid
    >>> pylucid.signal.windows.gaussian(3).round(decimals=4)
    tensor([0.6065, 1.0000, 0.6065])
    """
    M, dtype = _check("gaussian", M, dtype)
    if std <= 0:
        raise ValueError(f"gaussian: standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _trivial(M, dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1.0 / (std * math.sqrt(2))
    k = _grid(M, start * c, c, device)
    return _finish((-(k * k)).exp(), dtype, requires_grad)


@declare(namespaces=_NS, method=False)
def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Kaiser window :math:`w_n = I_0(\beta \sqrt{1 - (2n/N - 1)^2}) / I_0(\beta)`; ``beta >= 0``.

    >>> import pylucid
    >>> pylucid.signal.windows.kaiser(3, beta=0.0)
    tensor([1., 1., 1.])
    """
    M, dtype = _check("kaiser", M, dtype)
    if beta < 0:
        raise ValueError(f"kaiser: beta must be non-negative, got: {beta} instead.")
    t = _trivial(M, dtype, device, requires_grad)
    if t is not None:
        return t
    from .. import ops

    k = _grid(M, -beta, 2.0 * beta / _denominator(M, sym), device)
    # clamp: rounding may leave beta^2 - k^2 a hair below zero at the ends
    w = ops.i0((beta * beta - k * k).clamp(min=0.0).sqrt()) / ops.i0(k.new_tensor(float(beta)))
    return _finish(w, dtype, requires_grad)
