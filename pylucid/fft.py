"""``pylucid.fft``: discrete Fourier transforms, as ``torch.fft``.

Every transform takes ``n`` (1-d) or ``s`` (n-d) to zero-pad or trim the
input first, ``dim`` and ``norm``: ``"backward"`` (default: no scaling
forward, ``1/n`` on the inverse), ``"ortho"`` (``1/sqrt(n)`` both ways) or
``"forward"`` (``1/n`` forward, none on the inverse). They are composites of
three primitives in :mod:`pylucid.ops.fft` (``fft_c2c``, ``fft_r2c``,
``fft_c2r``), whose gradients are FFTs again, so every transform is
differentiable any number of times.

>>> import pylucid
>>> pylucid.fft.fft(pylucid.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""

from __future__ import annotations

from . import dtypes as _dt
from ._tensor import Tensor
from .errors import LucidError
from .ops import fft as _ops
from .ops._utils import norm_dim

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _one_dim(input, n, dim, op):
    if input.ndim == 0:
        raise IndexError(f"{op}: expected a tensor with at least 1 dim, got a 0-d tensor")
    d = norm_dim(dim, input.ndim, op)
    if n is None:
        n = input.shape[d]
    n = int(n)
    return d, n


def _check_sizes(sizes, op):
    for n in sizes:
        if n < 1:
            raise LucidError(f"{op}: invalid number of data points ({n}) specified; every transformed size must be "
                             ">= 1")


def _n_dims(input, s, dim, op, default_all=True):
    """Normalise (s, dim) as torch.fft.fftn: dim None -> last len(s) dims (or all / the last two)."""
    nd = input.ndim
    if s is not None:
        s = [int(v) for v in (s if isinstance(s, (list, tuple)) else (s,))]
    if dim is None:
        if s is not None:
            if len(s) > nd:
                raise ValueError(f"{op}: got s={tuple(s)} with more entries than the input's {nd} dims")
            dims = list(range(nd - len(s), nd))
        else:
            dims = list(range(nd)) if default_all else [nd - 2, nd - 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        if nd == 0:
            raise IndexError(f"{op}: expected a tensor with at least 1 dim, got a 0-d tensor")
        dims = [norm_dim(d, nd, op) for d in dims]
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} names a dimension more than once")
        if s is not None and len(s) != len(dims):
            raise ValueError(f"{op}: s={tuple(s)} and dim={tuple(dim)} must have the same length")
    if nd == 0 or any(d < 0 for d in dims):
        raise IndexError(f"{op}: the input has {nd} dims, too few for the requested transform")
    if s is None:
        s = [input.shape[d] for d in dims]
    else:
        s = [input.shape[d] if v == -1 else v for d, v in zip(dims, s)]
    return dims, s


# ---------------------------------------------------------------- complex-to-complex
def _c2c(input, dims, s, norm, forward, op):
    norm = _ops.check_norm(norm, op)
    _check_sizes(s, op)
    return _ops.c2c(_ops.prepare(input, op), dims, s, norm, forward)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """1-d DFT ``X_k = sum_j x_j exp(-2 pi i jk/n)`` along ``dim`` (``n`` pads or trims first).

    Real input is allowed (the full, two-sided spectrum); float32 gives complex64.

    >>> import pylucid
    >>> pylucid.fft.fft(pylucid.tensor([1.0, 2.0]), norm="forward")
    tensor([ 1.5+0.j, -0.5+0.j])
    """
    _ops.prepare(input, "fft")
    d, n = _one_dim(input, n, dim, "fft")
    return _c2c(input, [d], [n], norm, True, "fft")


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """1-d inverse DFT ``x_j = (1/n) sum_k X_k exp(2 pi i jk/n)`` (with the default ``norm``)."""
    _ops.prepare(input, "ifft")
    d, n = _one_dim(input, n, dim, "ifft")
    return _c2c(input, [d], [n], norm, False, "ifft")


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d DFT over ``dim`` (all dims by default, or the last ``len(s)``); ``s`` pads or trims.

    >>> import pylucid
    >>> pylucid.fft.fftn(pylucid.ones(2, 2)).real
    tensor([[4., 0.],
            [0., 0.]])
    """
    _ops.prepare(input, "fftn")
    dims, s = _n_dims(input, s, dim, "fftn")
    return _c2c(input, dims, s, norm, True, "fftn")


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d inverse DFT over ``dim`` (all dims by default)."""
    _ops.prepare(input, "ifftn")
    dims, s = _n_dims(input, s, dim, "ifftn")
    return _c2c(input, dims, s, norm, False, "ifftn")


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d DFT over ``dim`` (the last two by default)."""
    return fftn(input, s, dim, norm)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d inverse DFT over ``dim`` (the last two by default)."""
    return ifftn(input, s, dim, norm)


# ---------------------------------------------------------------- real-to-complex (one-sided)
def _r2c(input, dims, s, norm, op):
    norm = _ops.check_norm(norm, op)
    _check_sizes(s, op)
    return _ops.r2c(_ops.prepare(input, op, real_only=True), dims, s, norm)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """One-sided DFT of a real signal: the ``n // 2 + 1`` non-negative frequencies.

    >>> import pylucid
    >>> pylucid.fft.rfft(pylucid.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    _ops.prepare(input, "rfft", real_only=True)
    d, n = _one_dim(input, n, dim, "rfft")
    return _r2c(input, [d], [n], norm, "rfft")


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d DFT of a real signal; the last transformed dim is one-sided (``s[-1] // 2 + 1``)."""
    _ops.prepare(input, "rfftn", real_only=True)
    dims, s = _n_dims(input, s, dim, "rfftn")
    return _r2c(input, dims, s, norm, "rfftn")


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d DFT of a real signal over ``dim`` (one-sided in the last)."""
    return rfftn(input, s, dim, norm)


# ---------------------------------------------------------------- complex-to-real (inverse of rfft)
def _c2r(input, dims, s, norm, op):
    norm = _ops.check_norm(norm, op)
    _check_sizes(s, op)
    return _ops.c2r(_ops.prepare(input, op), dims, s, norm)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (m - 1)``) from ``m`` bins.

    The imaginary parts of the DC (and, for even ``n``, Nyquist) bins are ignored.

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 2.0, 3.0, 4.0])
    >>> pylucid.fft.irfft(pylucid.fft.rfft(x))
    tensor([1., 2., 3., 4.])
    """
    _ops.prepare(input, "irfft")
    if input.ndim == 0:
        raise IndexError("irfft: expected a tensor with at least 1 dim, got a 0-d tensor")
    d = norm_dim(dim, input.ndim, "irfft")
    n = 2 * (input.shape[d] - 1) if n is None else int(n)
    return _c2r(input, [d], [n], norm, "irfft")


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfftn`; the last output size defaults to ``2 * (m - 1)``."""
    _ops.prepare(input, "irfftn")
    given = s is not None
    dims, s = _n_dims(input, s, dim, "irfftn")
    if not given:
        s[-1] = 2 * (input.shape[dims[-1]] - 1)
    return _c2r(input, dims, s, norm, "irfftn")


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfft2`."""
    return irfftn(input, s, dim, norm)


# ---------------------------------------------------------------- Hermitian signals
def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """DFT of a Hermitian-symmetric signal given by its first half: a real spectrum of length ``n``.

    A composite: ``irfft(conj(x), n, norm=<dual of norm>)``, as PyTorch computes it.
    """
    from .ops.complex import conj

    norm = _ops.check_norm(norm, "hfft")
    return irfft(conj(_ops.prepare(input, "hfft")), n, dim, _ops._DUAL[norm])


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`hfft` for a real signal: ``conj(rfft(x, n, norm=<dual of norm>))`` (a composite)."""
    from .ops.complex import conj

    norm = _ops.check_norm(norm, "ihfft")
    return conj(rfft(input, n, dim, _ops._DUAL[norm]))


# ---------------------------------------------------------------- helpers
def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Sample frequencies ``[0, 1, ..., n/2-1, -n/2, ..., -1] / (d n)`` of an ``n``-point DFT.

    >>> import pylucid
    >>> pylucid.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    from .creation import tensor

    if int(n) < 1:
        raise ValueError(f"fftfreq: n must be >= 1, got {n}")
    n = int(n)
    vals = [(k if k < (n + 1) // 2 else k - n) / (d * n) for k in range(n)]
    return tensor(vals, dtype=dtype or _dt.get_default_dtype(), device=device, requires_grad=requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Non-negative sample frequencies ``[0, 1, ..., n//2] / (d n)`` of an ``n``-point ``rfft``.

    >>> import pylucid
    >>> pylucid.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    from .creation import tensor

    if int(n) < 1:
        raise ValueError(f"rfftfreq: n must be >= 1, got {n}")
    n = int(n)
    vals = [k / (d * n) for k in range(n // 2 + 1)]
    return tensor(vals, dtype=dtype or _dt.get_default_dtype(), device=device, requires_grad=requires_grad)


def _roll(input, shifts, dims):
    # a composite of slicing and cat, so the shift is differentiable (its adjoint is the opposite shift)
    from .ops.shape import cat

    for sh, d in zip(shifts, dims):
        n = input.shape[d]
        if n == 0 or sh % n == 0:
            continue
        sh %= n
        lo = [slice(None)] * input.ndim
        hi = [slice(None)] * input.ndim
        lo[d] = slice(n - sh, n)
        hi[d] = slice(0, n - sh)
        input = cat([input[tuple(lo)], input[tuple(hi)]], d)
    return input


def _shift_dims(input, dim, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if dim is None:
        return list(range(input.ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [norm_dim(d, input.ndim, op) for d in dims]


def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero frequency to the centre: roll each of ``dim`` (all by default) by ``n // 2``.

    >>> import pylucid
    >>> pylucid.fft.fftshift(pylucid.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    dims = _shift_dims(input, dim, "fftshift")
    return _roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """Inverse of :func:`fftshift`: roll each of ``dim`` by ``-(n // 2)``."""
    dims = _shift_dims(input, dim, "ifftshift")
    return _roll(input, [-(input.shape[d] // 2) for d in dims], dims)


