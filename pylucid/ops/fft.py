"""Discrete Fourier transforms: three primitives (``fft_c2c``, ``fft_r2c``, ``fft_c2r``) and the
``pylucid.fft`` functions built on them.

The public functions (``fft``, ``rfft2``, ``irfftn``, ``hfft``, ...) live in
:mod:`pylucid.fft`; they validate ``n``/``s``, ``dim`` and ``norm`` and call
one primitive, exactly like PyTorch's ``_fft_c2c``/``_fft_r2c``/``_fft_c2r``.

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
from ._op import Op, apply
from .schema import FORCE_FP32, OpSchema

__all__: list = []  # the public functions are in pylucid.fft (torch.fft is a module, not a function)

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


def resize_dims(t: Tensor, dims, sizes) -> Tensor:
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
        gi = resize_dims(gi, dims, [self.shapes[0][d] for d in dims])
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
        full = resize_dims(g, dims[-1:], sizes[-1:])  # zero-fill the dropped half of the spectrum
        gi = apply(FftC2C, (full,), {"dims": dims, "sizes": sizes, "norm": _DUAL[p["norm"]], "forward": False})
        gi = _real(gi)
        return resize_dims(gi, dims, [self.shapes[0][d] for d in dims])


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
        gi = resize_dims(gi, dims, [in_shape[d] for d in dims])
        return gi if self.extra else _real(gi)


# ---------------------------------------------------------------- argument handling shared by pylucid.fft
def check_norm(norm, op):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be None, 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def prepare(input, op, real_only=False):
    """Validate the input; half precision is computed in float32 (as a differentiable cast)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if real_only and input.dtype.is_complex:
        raise _dt_error(f"{op}: expects a real input tensor, got {input.dtype}")
    if input.dtype in (_dt.float16, _dt.bfloat16):
        from .conversion import cast

        input = cast(input, _dt.float32)
    return input


def _dt_error(msg):
    from ..errors import DtypeMismatch

    return DtypeMismatch(msg)


def c2c(x, dims, sizes, norm, forward):
    return apply(FftC2C, (x,), {"dims": tuple(dims), "sizes": tuple(sizes), "norm": norm, "forward": forward})


def r2c(x, dims, sizes, norm):
    return apply(FftR2C, (x,), {"dims": tuple(dims), "sizes": tuple(sizes), "norm": norm})


def c2r(x, dims, sizes, norm):
    return apply(FftC2R, (x,), {"dims": tuple(dims), "sizes": tuple(sizes), "norm": norm})
