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
from ..errors import DtypeMismatch, LucidError
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
