"""Discrete Fourier transforms: three primitives (``fft_c2c``, ``fft_r2c``, ``fft_c2r``) and the
``pylucid.fft`` functions built on them.

The public functions (``fft``, ``rfft2``, ``irfftn``, ``hfft``, ...) are
declared here in the ``pylucid.fft`` namespace; they validate ``n``/``s``,
``dim`` and ``norm`` and call one primitive, exactly like PyTorch's
``_fft_c2c``/``_fft_r2c``/``_fft_c2r``.

Gradients (graph mode, so they differentiate again):

- ``c2c``: the adjoint of a DFT is the inverse DFT with the *dual*
  normalisation (``backward`` <-> ``forward``, ``ortho`` stays): the unscaled
  forward transform ``F`` has adjoint ``F^H = n * ifft``. A real input gets the
  real part of that.
- ``r2c`` (``rfft``): zero-pad the one-sided gradient back to the full
  spectrum, inverse c2c with the dual norm, real part (the dropped half of a
  real signal's spectrum is a function of the kept half, so it carries no
  gradient of its own, as in PyTorch).
- ``c2r`` (``irfft``): ``rfft`` of the gradient with the dual norm, and the
  bins that stand for two conjugate bins of the full spectrum (all but the DC
  and, for even ``n``, the Nyquist bin) doubled (PyTorch's Hermitian weighting).

``n``/``s`` zero-pad or trim the input before the transform; the gradient is
trimmed or zero-padded back to the input's shape. Outputs follow PyTorch's
dtypes: float32 (and half, computed in float32) -> complex64, float64 ->
complex128; NumPy's float32 transforms are cast back to complex64.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._tensor import Tensor
from ..errors import DtypeMismatch, LucidError, ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor, norm_dim
from .registry import declare
from .schema import FORCE_FP32, OpSchema

_NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _double(dt):
    return (dt.kind == "f" and dt.itemsize == 8) or (dt.kind == "c" and dt.itemsize == 16)


def _complex_of(dt):
    return "complex128" if _double(dt) else "complex64"


def _real_of(dt):
    return "float64" if _double(dt) else "float32"


def _as_compute(be, x):
    # NumPy's/CuPy's FFT does not take half precision: compute float16/bfloat16 in float32
    if x.dtype.kind not in "fc" or x.dtype.itemsize < 4 or str(x.dtype) == "bfloat16":
        return x.astype("float32")
    return x


def _resize_dims(t: Tensor, dims, sizes) -> Tensor:
    """``t`` trimmed or zero-padded (at the end) along each of ``dims`` to ``sizes``; differentiable."""
    from ..creation import zeros
    from .shape import cat

    for d, n in zip(dims, sizes):
        cur = t.shape[d]
        if cur > n:
            idx = [slice(None)] * t.ndim
            idx[d] = slice(0, n)
            t = t[tuple(idx)]
        elif cur < n:
            shape = list(t.shape)
            shape[d] = n - cur
            t = cat([t, zeros(*shape, dtype=t.dtype, device=t.device)], d)
    return t


class FftC2C(Op):
    """Complex-to-complex DFT over ``dims`` (``forward``: ``fftn``, else ``ifftn``) with ``sizes`` and ``norm``."""

    schema = OpSchema("fft_c2c", amp_policy=FORCE_FP32, real_valued=True, family="fft")

    @staticmethod
    def forward(be, x, dims, sizes, norm, forward):
        x = _as_compute(be, x)
        fn = be.fft.fftn if forward else be.fft.ifftn
        with be.errstate():  # NaN/inf input gives NaN/inf bins, as PyTorch, without NumPy's warning
            return fn(x, s=sizes, axes=dims, norm=norm).astype(_complex_of(x.dtype), copy=False)

    def backward(self, g):
        p = self.params
        dims = p["dims"]
        gi = apply(FftC2C, (g,), {"dims": dims, "sizes": p["sizes"], "norm": _DUAL[p["norm"]],
                                  "forward": not p["forward"]})
        gi = _resize_dims(gi, dims, [self.shapes[0][d] for d in dims])
        return gi if self.extra else _real(gi)


def _real(t):
    from .complex import real

    return real(t)


def _record_input_kind(self, arrays, out):
    # whether the (cast) input was complex: a real input's gradient is the real part
    self.extra = arrays[0].dtype.kind == "c"


FftC2C.save_extra = _record_input_kind


class FftR2C(Op):
    """Real-to-complex one-sided DFT (``rfftn``) over ``dims``; the last of ``dims`` is halved."""

    schema = OpSchema("fft_r2c", amp_policy=FORCE_FP32, real_valued=True, family="fft")

    @staticmethod
    def forward(be, x, dims, sizes, norm):
        x = _as_compute(be, x)
        with be.errstate():
            return be.fft.rfftn(x, s=sizes, axes=dims, norm=norm).astype(_complex_of(x.dtype), copy=False)

    def backward(self, g):
        p = self.params
        dims, sizes = p["dims"], p["sizes"]
        full = _resize_dims(g, dims[-1:], sizes[-1:])  # zero-fill the dropped half of the spectrum
        gi = apply(FftC2C, (full,), {"dims": dims, "sizes": sizes, "norm": _DUAL[p["norm"]], "forward": False})
        gi = _real(gi)
        return _resize_dims(gi, dims, [self.shapes[0][d] for d in dims])


class FftC2R(Op):
    """Complex one-sided spectrum to real signal (``irfftn``) with output ``sizes`` over ``dims``."""

    schema = OpSchema("fft_c2r", amp_policy=FORCE_FP32, real_valued=True, family="fft")
    save_extra = _record_input_kind

    @staticmethod
    def forward(be, x, dims, sizes, norm):
        x = _as_compute(be, x)
        if any(x.shape[d] == 0 for d in dims):
            # an empty spectrum zero-padded to ``sizes`` is all zeros (NumPy's pocketfft reads past an empty axis)
            shape = list(x.shape)
            for d, n in zip(dims, sizes):
                shape[d] = n
            return be.zeros(tuple(shape), dtype=_real_of(x.dtype))
        with be.errstate():
            out = be.fft.irfftn(x, s=sizes, axes=dims, norm=norm)
        return out.astype(_real_of(x.dtype), copy=False)

    def backward(self, g):
        from .._tensor import _new_tensor
        from .elementwise import mul

        p = self.params
        dims, sizes = p["dims"], p["sizes"]
        gi = apply(FftR2C, (g,), {"dims": dims, "sizes": sizes, "norm": _DUAL[p["norm"]]})
        n = sizes[-1]
        half = n // 2 + 1
        doubled = n - half  # bins 1 .. n - half stand for a conjugate pair of the full spectrum
        if doubled > 0:
            w = [1.0] * half
            for k in range(1, 1 + doubled):
                w[k] = 2.0
            shape = [1] * gi.ndim
            shape[dims[-1]] = half
            be = gi.device.backend
            weight = _new_tensor(be.asarray(w, dtype=gi.dtype.to_real().numpy_dtype).reshape(shape), gi.device)
            gi = mul(gi, weight)
        in_shape = self.shapes[0]
        gi = _resize_dims(gi, dims, [in_shape[d] for d in dims])
        return gi if self.extra else _real(gi)


# ---------------------------------------------------------------- argument handling
def _check_norm(norm, op):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be None, 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def _prepare(input, op, real_only=False):
    """Validate the input; half precision is computed in float32 (as a differentiable cast)."""
    check_tensor(input, op)
    if real_only and input.dtype.is_complex:
        raise DtypeMismatch(f"{op}: expects a real input tensor, got {input.dtype}")
    if input.dtype in (_dt.float16, _dt.bfloat16):
        from .conversion import cast

        input = cast(input, _dt.float32)
    return input


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


def _transform(op_cls, input, dims, s, norm, op, real_only=False, **params):
    """Run one primitive over ``dims`` with transformed sizes ``s``, after checking ``norm`` and ``s``."""
    norm = _check_norm(norm, op)
    _check_sizes(s, op)
    return apply(op_cls, (_prepare(input, op, real_only),), {"dims": tuple(dims), "sizes": tuple(s), "norm": norm,
                                                              **params})


# ---------------------------------------------------------------- complex-to-complex


@declare(FftC2C, namespaces="pylucid.fft", method=False)
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """1-d DFT ``X_k = sum_j x_j exp(-2 pi i jk/n)`` along ``dim`` (``n`` pads or trims first).

    Real input is allowed (the full, two-sided spectrum); float32 gives complex64.

    >>> import pylucid
    >>> pylucid.fft.fft(pylucid.tensor([1.0, 2.0]), norm="forward")
    tensor([ 1.5+0.j, -0.5+0.j])
    """
    _prepare(input, "fft")
    d, n = _one_dim(input, n, dim, "fft")
    return _transform(FftC2C, input, [d], [n], norm, "fft", forward=True)


@declare(FftC2C, namespaces="pylucid.fft", method=False)
def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """1-d inverse DFT ``x_j = (1/n) sum_k X_k exp(2 pi i jk/n)`` (with the default ``norm``)."""
    _prepare(input, "ifft")
    d, n = _one_dim(input, n, dim, "ifft")
    return _transform(FftC2C, input, [d], [n], norm, "ifft", forward=False)


@declare(FftC2C, namespaces="pylucid.fft", method=False)
def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d DFT over ``dim`` (all dims by default, or the last ``len(s)``); ``s`` pads or trims.

    >>> import pylucid
    >>> pylucid.fft.fftn(pylucid.ones(2, 2)).real
    tensor([[4., 0.],
            [0., 0.]])
    """
    _prepare(input, "fftn")
    dims, s = _n_dims(input, s, dim, "fftn")
    return _transform(FftC2C, input, dims, s, norm, "fftn", forward=True)


@declare(FftC2C, namespaces="pylucid.fft", method=False)
def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d inverse DFT over ``dim`` (all dims by default)."""
    _prepare(input, "ifftn")
    dims, s = _n_dims(input, s, dim, "ifftn")
    return _transform(FftC2C, input, dims, s, norm, "ifftn", forward=False)


@declare(namespaces="pylucid.fft", method=False)
def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d DFT over ``dim`` (the last two by default)."""
    return fftn(input, s, dim, norm)


@declare(namespaces="pylucid.fft", method=False)
def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d inverse DFT over ``dim`` (the last two by default)."""
    return ifftn(input, s, dim, norm)


# ---------------------------------------------------------------- real-to-complex (one-sided)


@declare(FftR2C, namespaces="pylucid.fft", method=False)
def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """One-sided DFT of a real signal: the ``n // 2 + 1`` non-negative frequencies.

    >>> import pylucid
    >>> pylucid.fft.rfft(pylucid.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    _prepare(input, "rfft", real_only=True)
    d, n = _one_dim(input, n, dim, "rfft")
    return _transform(FftR2C, input, [d], [n], norm, "rfft", real_only=True)


@declare(FftR2C, namespaces="pylucid.fft", method=False)
def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d DFT of a real signal; the last transformed dim is one-sided (``s[-1] // 2 + 1``)."""
    _prepare(input, "rfftn", real_only=True)
    dims, s = _n_dims(input, s, dim, "rfftn")
    return _transform(FftR2C, input, dims, s, norm, "rfftn", real_only=True)


@declare(namespaces="pylucid.fft", method=False)
def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d DFT of a real signal over ``dim`` (one-sided in the last)."""
    return rfftn(input, s, dim, norm)


# ---------------------------------------------------------------- complex-to-real (inverse of rfft)


@declare(FftC2R, namespaces="pylucid.fft", method=False)
def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (m - 1)``) from ``m`` bins.

    The imaginary parts of the DC (and, for even ``n``, Nyquist) bins are ignored.

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 2.0, 3.0, 4.0])
    >>> pylucid.fft.irfft(pylucid.fft.rfft(x))
    tensor([1., 2., 3., 4.])
    """
    _prepare(input, "irfft")
    if input.ndim == 0:
        raise IndexError("irfft: expected a tensor with at least 1 dim, got a 0-d tensor")
    d = norm_dim(dim, input.ndim, "irfft")
    n = 2 * (input.shape[d] - 1) if n is None else int(n)
    return _transform(FftC2R, input, [d], [n], norm, "irfft")


@declare(FftC2R, namespaces="pylucid.fft", method=False)
def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfftn`; the last output size defaults to ``2 * (m - 1)``."""
    _prepare(input, "irfftn")
    given = s is not None
    dims, s = _n_dims(input, s, dim, "irfftn")
    if not given:
        s[-1] = 2 * (input.shape[dims[-1]] - 1)
    return _transform(FftC2R, input, dims, s, norm, "irfftn")


@declare(namespaces="pylucid.fft", method=False)
def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfft2`."""
    return irfftn(input, s, dim, norm)


# ---------------------------------------------------------------- Hermitian signals
@declare(namespaces="pylucid.fft", method=False)
def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """DFT of a Hermitian-symmetric signal given by its first half: a real spectrum of length ``n``.

    A composite: ``irfft(conj(x), n, norm=<dual of norm>)``, as PyTorch computes it.
    """
    from .complex import conj

    norm = _check_norm(norm, "hfft")
    return irfft(conj(_prepare(input, "hfft")), n, dim, _DUAL[norm])


@declare(namespaces="pylucid.fft", method=False)
def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`hfft` for a real signal: ``conj(rfft(x, n, norm=<dual of norm>))`` (a composite)."""
    from .complex import conj

    norm = _check_norm(norm, "ihfft")
    return conj(rfft(input, n, dim, _DUAL[norm]))


# ---------------------------------------------------------------- helpers
def _check_points(n, op):
    if int(n) < 1:
        raise ValueError(f"{op}: n must be >= 1, got {n}")
    return int(n)


def _frequencies(vals, dtype, device, requires_grad):
    from ..creation import tensor

    return tensor(vals, dtype=dtype or _dt.get_default_dtype(), device=device, requires_grad=requires_grad)


@declare(namespaces="pylucid.fft", method=False)
def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Sample frequencies ``[0, 1, ..., n/2-1, -n/2, ..., -1] / (d n)`` of an ``n``-point DFT.

    >>> import pylucid
    >>> pylucid.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    n = _check_points(n, "fftfreq")
    vals = [(k if k < (n + 1) // 2 else k - n) / (d * n) for k in range(n)]
    return _frequencies(vals, dtype, device, requires_grad)


@declare(namespaces="pylucid.fft", method=False)
def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Non-negative sample frequencies ``[0, 1, ..., n//2] / (d n)`` of an ``n``-point ``rfft``.

    >>> import pylucid
    >>> pylucid.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    n = _check_points(n, "rfftfreq")
    vals = [k / (d * n) for k in range(n // 2 + 1)]
    return _frequencies(vals, dtype, device, requires_grad)


def _shift(input, dim, op, sign):
    """Roll each of ``dim`` (all by default) by ``sign * (n // 2)``; a ``roll``, whose gradient is the opposite roll."""
    from .conversion import clone
    from .shape import roll

    check_tensor(input, op)
    if dim is None:
        dims = list(range(input.ndim))
    else:
        dims = [norm_dim(d, input.ndim, op) for d in ([dim] if isinstance(dim, int) else dim)]
    if not dims:  # a 0-d input or dim=(): nothing moves
        return clone(input)
    return roll(input, [sign * (input.shape[d] // 2) for d in dims], dims)


@declare(namespaces="pylucid.fft", method=False)
def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero frequency to the centre: roll each of ``dim`` (all by default) by ``n // 2``.

    >>> import pylucid
    >>> pylucid.fft.fftshift(pylucid.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    return _shift(input, dim, "fftshift", 1)


@declare(namespaces="pylucid.fft", method=False)
def ifftshift(input: Tensor, dim=None) -> Tensor:
    """Inverse of :func:`fftshift`: roll each of ``dim`` by ``-(n // 2)``."""
    return _shift(input, dim, "ifftshift", -1)


# ---------------------------------------------------------------- Hermitian n-d transforms
@declare(namespaces="pylucid.fft", method=False)
def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """N-d DFT of a signal Hermitian-symmetric in every transformed dim, given by its half in the last: a real
    output whose last size defaults to ``2 * (m - 1)``. A composite, as PyTorch computes it: a forward c2c
    transform over the other dims, then ``irfft(conj(.))`` over the last with the dual norm.

    >>> import pylucid
    >>> pylucid.fft.hfftn(pylucid.tensor([[1.0, 0.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    from .complex import conj

    norm = _check_norm(norm, "hfftn")
    x = _prepare(input, "hfftn")
    given = s is not None
    dims, s = _n_dims(x, s, dim, "hfftn")
    if not given:
        s[-1] = 2 * (x.shape[dims[-1]] - 1)
    _check_sizes(s, "hfftn")
    if len(dims) > 1:
        x = fftn(x, s[:-1], dims[:-1], norm)
    return irfft(conj(x), s[-1], dims[-1], _DUAL[norm])


@declare(namespaces="pylucid.fft", method=False)
def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d :func:`hfftn` over ``dim`` (the last two by default)."""
    return hfftn(input, s, dim, norm)


@declare(namespaces="pylucid.fft", method=False)
def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """Inverse of :func:`hfftn` for a real signal: the one-sided half of its inverse DFT (``conj(rfft)`` with the
    dual norm over the last dim, then an inverse c2c over the others). A composite.

    >>> import pylucid
    >>> pylucid.fft.ihfftn(pylucid.ones(2, 2))
    tensor([[1.-0.j, 0.-0.j],
            [0.+0.j, 0.+0.j]])
    """
    from .complex import conj

    norm = _check_norm(norm, "ihfftn")
    x = _prepare(input, "ihfftn", real_only=True)
    dims, s = _n_dims(x, s, dim, "ihfftn")
    _check_sizes(s, "ihfftn")
    out = conj(rfft(x, s[-1], dims[-1], _DUAL[norm]))
    if len(dims) == 1:
        return out
    return ifftn(out, s[:-1], dims[:-1], norm)


@declare(namespaces="pylucid.fft", method=False)
def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """2-d :func:`ihfftn` over ``dim`` (the last two by default)."""
    _prepare(input, "ihfft2", real_only=True)
    return ihfftn(input, s, dim, norm)


# ---------------------------------------------------------------- short-time Fourier transform
def _stft_window(window, win_length, n_fft, like, op):
    """The window (ones by default) zero-padded on both sides to ``n_fft``, centred as PyTorch."""
    from ..creation import ones
    from ..nn.functional import pad

    if window is None:
        window = ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    else:
        check_tensor(window, op, "window")
        if window.ndim != 1 or window.shape[0] != win_length:
            raise ValueError(f"{op}: window must be 1-d of size win_length={win_length}, got shape "
                             f"{tuple(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = pad(window, (left, n_fft - win_length - left))
    return window


def _frame_index(be, n_frames, n_fft, hop):
    return be.arange(n_frames, dtype="int64")[:, None] * hop + be.arange(n_fft, dtype="int64")[None, :]


def _stft_lengths(op, n_fft, hop_length, win_length):
    if not isinstance(n_fft, int) or n_fft <= 0:
        raise ValueError(f"{op}: n_fft must be a positive int, got {n_fft!r}")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not isinstance(hop, int) or hop <= 0:
        raise ValueError(f"{op}: hop_length must be a positive int, got {hop!r}")
    if not isinstance(win, int) or not 0 < win <= n_fft:
        raise ValueError(f"{op}: win_length must be an int in [1, n_fft={n_fft}], got {win!r}")
    return hop, win


@declare(method=True)
def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: bool | None = None, return_complex: bool | None = None) -> Tensor:
    """Short-time Fourier transform ``X[f, t] = sum_k w[k] x[t hop + k] exp(-2 pi i f k / n_fft)``.

    ``input`` is 1-d ``(L,)`` or batched ``(B, L)``; the result is
    ``(B?, n_fft // 2 + 1, n_frames)`` (``onesided``, the default for real
    input and window) or ``(B?, n_fft, n_frames)``. ``hop_length`` defaults to
    ``n_fft // 4``, ``win_length`` to ``n_fft``, ``window`` to ones (zero-padded
    to ``n_fft`` around the centre); ``center`` pads ``n_fft // 2`` on both
    sides with ``pad_mode`` first; ``normalized`` scales by ``n_fft^{-1/2}``.
    As in PyTorch 2, ``return_complex`` must be given for real input;
    ``False`` returns ``view_as_real`` of the result. A composite (frames by
    indexing, one FFT), differentiable in ``input`` and ``window``.

    >>> import pylucid
    >>> X = pylucid.stft(pylucid.ones(8), 4, hop_length=2, center=False, return_complex=True)
    >>> X.shape, X[0]
    ((3, 3), tensor([4.+0.j, 4.+0.j, 4.+0.j]))
    """
    from ..nn.functional import pad
    from .complex import view_as_real
    from .elementwise import mul
    from .shape import transpose, unsqueeze

    op = "stft"
    check_tensor(input, op)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeMismatch(f"stft: expected a float or complex input, got {input.dtype.name}")
    hop, win = _stft_lengths(op, n_fft, hop_length, win_length)
    if return_complex is None:
        if not input.dtype.is_complex and (window is None or not window.dtype.is_complex):
            raise ValueError("stft: return_complex must be given explicitly for real inputs (as in PyTorch 2); "
                             "return_complex=True is the recommended value")
        return_complex = True
    if input.ndim not in (1, 2):
        raise ShapeMismatch(f"stft: expected a 1-d (L,) or 2-d (B, L) input, got shape {tuple(input.shape)}")
    x = input if input.ndim == 2 else unsqueeze(input, 0)
    x = _prepare(x, op)
    if center:
        p = n_fft // 2
        if pad_mode not in ("reflect", "constant", "replicate", "circular"):
            raise ValueError(f"stft: pad_mode must be 'reflect', 'constant', 'replicate' or 'circular', got "
                             f"{pad_mode!r}")
        x = pad(unsqueeze(x, 1), (p, p), mode=pad_mode)[:, 0]
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise ValueError(f"stft: n_fft={n_fft} must be in (0, {length}] (the padded input length)")
    w = _stft_window(window, win, n_fft, x, op)
    complex_case = x.dtype.is_complex or w.dtype.is_complex
    if onesided is None:
        onesided = not complex_case
    elif onesided and complex_case:
        raise ValueError("stft: onesided=True needs a real input and a real window")
    n_frames = 1 + (length - n_fft) // hop
    frames = x[:, _new_index(x, _frame_index(x.device.backend, n_frames, n_fft, hop))]  # (B, n_frames, n_fft)
    frames = mul(frames, w)
    norm = "ortho" if normalized else "backward"
    spec = rfft(frames, dim=-1, norm=norm) if onesided else fft(frames, dim=-1, norm=norm)
    out = transpose(spec, -1, -2)
    if input.ndim == 1:
        out = out[0]
    return out if return_complex else view_as_real(out)


def _new_index(like, arr):
    from .._tensor import _new_tensor

    return _new_tensor(arr, like.device)


def _overlap_add(frames: Tensor, hop: int, total: int) -> Tensor:
    """``y[b, j * hop + i] += frames[b, j, i]``: the frames summed at their offsets, into ``(B, total)``.

    Frames ``k = ceil(n_fft / hop)`` apart do not overlap, so each of the ``k`` groups ``j = r, r + k, ...``
    is laid end to end (each frame padded to ``k * hop``) and the groups are added at offsets ``r * hop``:
    ``k`` pads and adds, in a fixed order on every device (an atomic scatter would round differently from
    run to run), and differentiable to any order.
    """
    from ..nn.functional import pad
    from .elementwise import add

    b, n_frames, n_fft = frames.shape
    k = -(-n_fft // hop)
    span = k * hop
    y = None
    for r in range(min(k, n_frames)):
        group = frames[:, r::k, :]
        m = group.shape[1]
        laid = pad(group, (0, span - n_fft)).reshape(b, m * span)
        off = r * hop
        laid = laid[:, :total - off] if m * span > total - off else laid
        part = pad(laid, (off, total - off - laid.shape[1]))
        y = part if y is None else add(y, part)
    return y


@declare(method=True)
def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Tensor | None = None, center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False) -> Tensor:
    """Inverse of :func:`stft` by windowed overlap-add: ``y = sum_t w(n - t hop) frame_t(n - t hop) /
    sum_t w(n - t hop)^2``.

    ``input`` is ``(B?, n_freq, n_frames)`` complex; ``onesided`` defaults to
    ``n_freq == n_fft // 2 + 1`` (an inverse ``rfft``), else a full inverse FFT
    (real part unless ``return_complex``). ``center`` drops the ``n_fft // 2``
    padded samples at both ends; ``length`` trims or zero-pads the result. A
    window envelope below ``1e-11`` anywhere in the kept span is an error
    (the overlap-add cannot be inverted there), as in PyTorch. A composite,
    differentiable in ``input``.

    >>> import pylucid
    >>> x = pylucid.arange(8.0)
    >>> w = pylucid.hann_window(4) if hasattr(pylucid, "hann_window") else pylucid.ones(4)
    >>> X = pylucid.stft(x, 4, hop_length=1, window=w, return_complex=True)
    >>> pylucid.istft(X, 4, hop_length=1, window=w, length=8).allclose(x, atol=1e-5)
    True
    """
    from ..nn.functional import pad
    from .complex import real
    from .elementwise import div, mul
    from .shape import transpose, unsqueeze

    op = "istft"
    check_tensor(input, op)
    hop, win = _stft_lengths(op, n_fft, hop_length, win_length)
    if not input.dtype.is_complex:
        raise DtypeMismatch(f"istft: expected a complex input (stft(..., return_complex=True)), got {input.dtype}")
    if input.ndim not in (2, 3):
        raise ShapeMismatch(f"istft: expected a 2-d (n_freq, n_frames) or 3-d (B, n_freq, n_frames) input, got "
                            f"shape {tuple(input.shape)}")
    x = input if input.ndim == 3 else unsqueeze(input, 0)
    n_freq, n_frames = x.shape[-2:]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided and n_freq != n_fft // 2 + 1:
        raise ShapeMismatch(f"istft: a one-sided input needs n_fft // 2 + 1 = {n_fft // 2 + 1} frequencies, got "
                            f"{n_freq}")
    if not onesided and n_freq != n_fft:
        raise ShapeMismatch(f"istft: a two-sided input needs n_fft = {n_fft} frequencies, got {n_freq}")
    if onesided and return_complex:
        raise ValueError("istft: return_complex=True needs a two-sided input (onesided=False)")
    if window is not None and window.dtype.is_complex and not return_complex:
        raise ValueError("istft: a complex window needs return_complex=True")
    if length is not None and length < 0:
        raise ValueError(f"istft: length must be non-negative, got {length}")
    w = _stft_window(window, win, n_fft, real(x) if x.dtype.is_complex else x, op)
    norm = "ortho" if normalized else "backward"
    frames = transpose(x, -1, -2)  # (B, n_frames, n_freq)
    frames = irfft(frames, n_fft, -1, norm) if onesided else ifft(frames, n_fft, -1, norm)
    if not onesided and not return_complex:
        frames = real(frames)
    frames = mul(frames, w)
    total = n_fft + hop * (n_frames - 1)
    y = _overlap_add(frames, hop, total)
    env = _overlap_add(mul(w, w).reshape(1, 1, n_fft).expand(1, n_frames, n_fft), hop, total)[0]
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    stop = min(end, total)
    y, env = y[:, start:stop], env[start:stop]
    if env.numel() and bool((env.abs()._data < 1e-11).any()):
        raise LucidError("istft: the window overlap-add envelope is below 1e-11 somewhere in the output span: "
                         "the window and hop_length do not satisfy the NOLA condition")
    y = div(y, env)
    if end > total:
        y = pad(y, (0, end - total))
    return y[0] if input.ndim == 2 else y
