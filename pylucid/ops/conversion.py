"""Dtype casts, device copies and clones: differentiable conversions.

Casts are ops so that autocast and type promotion stay in the graph: the
gradient of a cast is the incoming gradient cast back, so a float32 leaf used
under float16 autocast receives a float32 ``.grad``.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._tensor import Tensor, _new_tensor
from ._op import Op, apply
from .schema import KEEP_INPUT, OpSchema


class Cast(Op):
    """``y = x`` converted to ``dtype``; ``dx = g`` converted back to ``x``'s dtype.

    Complex to real keeps the real part (PyTorch warns that the imaginary part
    is discarded, and so does pylucid, once per call site). The gradient of a
    real-to-complex cast is the real part of the complex gradient: PyTorch's
    convention, where a real input's gradient is ``dL/dx`` of the real loss.
    """

    schema = OpSchema("astype", amp_policy=KEEP_INPUT, family="conversion")
    promote_args = ()

    @staticmethod
    def forward(be, x, dtype, in_dtype):
        if x.dtype.kind == "c" and not dtype.is_complex:
            import warnings

            warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=4)
            x = x.real
        return be.astype(x, dtype.numpy_dtype)

    def backward(self, g):
        in_dtype = self.params["in_dtype"]
        if g._data.dtype.kind == "c" and not in_dtype.is_complex:
            from .complex import real

            g = real(g)
        return cast(g, in_dtype)

    def backward_fast(self, be, g):
        in_dtype = self.params["in_dtype"]
        if g.dtype.kind == "c" and not in_dtype.is_complex:
            g = g.real
        return be.astype(g, in_dtype.numpy_dtype)


def cast(x: Tensor, dtype) -> Tensor:
    """``x`` converted to ``dtype`` (differentiable between floating dtypes).

    >>> import pylucid
    >>> pylucid.cast(pylucid.tensor([1.7, -2.2]), pylucid.int64)
    tensor([ 1, -2])
    """
    dtype = _dt.as_dtype(dtype)
    if not isinstance(x, Tensor):
        raise TypeError(f"astype: expected a Tensor, got {type(x).__name__}")
    if x._data.dtype == dtype.numpy_dtype:
        return x
    return apply(Cast, (x,), {"dtype": dtype, "in_dtype": x.dtype})


class ToDevice(Op):
    """Copy to another device; the gradient is copied back to the source device."""

    schema = OpSchema("to_device", amp_policy=KEEP_INPUT, family="conversion")
    promote_args = ()

    @staticmethod
    def forward(be, x, device, source):
        if be is source.backend:
            return x
        return be.asarray(source.backend.to_numpy(x))

    def backward(self, g):
        return to_device(g, self.params["source"])

    def backward_fast(self, be, g):
        return self.params["source"].backend.asarray(be.to_numpy(g))


def to_device(x: Tensor, device) -> Tensor:
    """``x`` copied to ``device`` (differentiable: the gradient is copied back)."""
    from .._state import state
    from ..device import device as _device
    from ._op import _make_node

    device = _device(device)
    if x._device is device:
        return x
    data = ToDevice.forward(device.backend, x._data, device, x._device)
    out = _new_tensor(data, device)
    if x._requires_grad and state.grad_enabled:
        params = {"device": device, "source": x._device}
        out.grad_fn = _make_node(ToDevice, (x,), params, state, device)
        out._requires_grad = True
    return out


class Clone(Op):
    """A copy with its own storage; ``dx = g``."""

    schema = OpSchema("clone", amp_policy=KEEP_INPUT, family="conversion")

    @staticmethod
    def forward(be, x):
        return x.copy()

    def backward(self, g):
        return g

    def backward_fast(self, be, g):
        return g


def clone(x: Tensor, *, memory_format=None) -> Tensor:
    """A copy of ``x`` with its own storage, differentiable (``dx = g``)."""
    return apply(Clone, (x,))


class Contiguous(Op):
    """A C-contiguous copy when ``x`` is not contiguous; ``dx = g``."""

    schema = OpSchema("contiguous", amp_policy=KEEP_INPUT, family="conversion")

    @staticmethod
    def forward(be, x):
        return be.ascontiguousarray(x)

    def backward(self, g):
        return g

    def backward_fast(self, be, g):
        return g


def contiguous(x: Tensor, memory_format=None) -> Tensor:
    if x._data.flags.c_contiguous:
        return x
    return apply(Contiguous, (x,))


Tensor.clone = clone
Tensor.contiguous = contiguous
Tensor.astype = cast
