"""Dtype casts, device copies and clones: differentiable conversions.

Casts are ops so that autocast and type promotion stay in the graph: the
gradient of a cast is the incoming gradient cast back, so a float32 leaf used
under float16 autocast receives a float32 ``.grad``.
"""

from __future__ import annotations

from .. import _memory_format as _mf
from .. import dtypes as _dt
from .._interop import c_contiguous
from .._state import state as _state
from .._tensor import Tensor, _new_tensor
from ._op import Op, apply, check_inplace_leaf, commit_inplace
from .registry import declare
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
    def forward(be, x, dtype, in_dtype, rounded=None):
        # rounded: autocast's cast of a float32 result whose kernel also wrote it in ``dtype`` (see
        # ArrayBackend.amp_rounded): that array, the conversion's values, without converting again
        if rounded is not None:
            return rounded
        if x.dtype.kind == "c" and not dtype.is_complex:
            import warnings

            warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=4)
            x = x.real
        if x.dtype.kind == "f" and not (dtype.is_floating_point or dtype.is_complex):
            with be.errstate():  # NaN/inf to an integer is undefined in C: the value is the platform's, no warning
                return be.astype(x, dtype.numpy_dtype)
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


@declare(Cast, method="astype")
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


@declare(Clone)
def clone(x: Tensor, *, memory_format=None) -> Tensor:
    """A copy of ``x`` with its own storage, differentiable (``dx = g``).

    ``memory_format`` (default ``preserve_format``): a channels-last tensor stays channels-last, anything else
    is copied row-major; ``contiguous_format``/``channels_last``/``channels_last_3d`` ask for that layout.
    (PyTorch also keeps the strides of other dense permuted layouts; pylucid copies those row-major.)
    """
    fmt = _mf.check("clone", memory_format)
    if fmt is _mf.preserve_format:
        fmt = _mf.format_of(x._data) if x._data.ndim in (4, 5) else _mf.contiguous_format
    if fmt is _mf.contiguous_format:
        return apply(Clone, (x,))
    return apply(Contiguous, (x,), {"order": _mf.axes_order(fmt, x._data.ndim, "clone")})


class Contiguous(Op):
    """A packed copy of ``x``: C-contiguous, or with its axes laid out in ``order`` (a memory format's physical
    axis order, e.g. ``(0, 2, 3, 1)`` for channels-last); ``dx = g``."""

    schema = OpSchema("contiguous", amp_policy=KEEP_INPUT, family="conversion")

    @staticmethod
    def forward(be, x, order=None):
        if order is None:
            return be.ascontiguousarray(x)
        return _mf.in_layout(x, order)

    def backward(self, g):
        return g

    def backward_fast(self, be, g):
        return g


@declare(Contiguous)
def contiguous(x: Tensor, memory_format=None) -> Tensor:
    """``x`` itself when it is laid out in ``memory_format`` (default ``pylucid.contiguous_format``: row-major),
    else a differentiable packed copy in that layout (``pylucid.channels_last`` for 4-d tensors,
    ``channels_last_3d`` for 5-d ones). ``preserve_format`` is refused, as PyTorch refuses it.

    >>> import pylucid
    >>> x = pylucid.ones(1, 2, 2, 3)
    >>> x.contiguous(memory_format=pylucid.channels_last).stride()
    (12, 1, 6, 2)
    """
    if memory_format is None or memory_format is _mf.contiguous_format:
        if c_contiguous(x._data):
            return x
        return apply(Contiguous, (x,))
    fmt = _mf.check("contiguous", memory_format)
    if fmt is _mf.preserve_format:
        raise RuntimeError("contiguous: preserve memory format is unsupported by the contiguous operator")
    order = _mf.axes_order(fmt, x._data.ndim, "contiguous")
    if _mf.is_dense_in(x._data, order):
        return x
    return apply(Contiguous, (x,), {"order": order})


# ---------------------------------------------------------------- writes into a tensor's storage
class Fill(Op):
    """``y = value`` everywhere, with ``x``'s shape and dtype; ``dx = 0``.

    Nothing is saved, so an in-place ``fill_``/``zero_`` on a tensor inside a
    graph rebases its history onto this node without invalidating any saved
    tensor (PyTorch's ``FillBackward``).
    """

    schema = OpSchema("fill", amp_policy=KEEP_INPUT, family="conversion")
    promote_args = ()

    @staticmethod
    def forward(be, x, value):
        return be.full(x.shape, value, dtype=x.dtype)

    def backward(self, g):
        from ..creation import zeros_like

        return zeros_like(g)


@declare(Fill, method=False)  # torch.fill is a function; the method is fill_
def fill(input: Tensor, value) -> Tensor:
    """A tensor like ``input`` holding ``value`` everywhere; differentiable in a 0-d tensor ``value``
    (``dvalue = sum(g)``) and in ``input`` (whose gradient is zero).

    >>> import pylucid
    >>> pylucid.fill(pylucid.zeros(2, dtype=pylucid.int64), 3)
    tensor([3, 3])
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"fill: expected a Tensor input, got {type(input).__name__}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"fill: value must be a number or a 0-d tensor, got a tensor of shape {value.shape}")
        if value._requires_grad and _state.grad_enabled:
            from .elementwise import add
            from .shape import broadcast_to

            return add(apply(Fill, (input,), {"value": 0}), broadcast_to(value.to(input.dtype), input.shape))
        value = value.item()
    from ..creation import _py_number, _scalar_to

    if not isinstance(value, (bool, int, float, complex)):
        if _py_number(value) is None:
            raise TypeError(f"fill: value must be a number or a 0-d tensor, got {type(value).__name__}")
        value = _py_number(value)  # a NumPy scalar
    # PyTorch's conversion: out of the dtype's range is refused, a negative int wraps for uint8 (-1 is 255)
    return apply(Fill, (input,), {"value": _scalar_to("fill", value, input._data.dtype)})


@declare(method="fill_")
def fill_(self: Tensor, value) -> Tensor:
    """Set every element to ``value`` in place (differentiable: the gradient to the old values is zero; a 0-d
    ``value`` that requires grad gets ``sum(g)``). On a tensor inside a graph, its history is rebased onto the
    fill, as in PyTorch.

    >>> import pylucid
    >>> pylucid.zeros(2).fill_(3)
    tensor([3., 3.])
    """
    check_inplace_leaf(self, "fill_")
    if not isinstance(value, (bool, int, float, complex, Tensor)):
        from ..creation import _py_number

        if _py_number(value) is None:
            raise TypeError(f"fill_: value must be a number or a 0-d tensor, got {type(value).__name__}")
        value = _py_number(value)  # a NumPy scalar
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"fill_: value must be a number or a 0-d tensor, got a tensor of shape {value.shape}")
    if isinstance(value, Tensor) and not (value._requires_grad and _state.grad_enabled):
        value = value.item()
    if not isinstance(value, Tensor) and (value.__class__ is not int or value):  # 0 fits every dtype (zero_)
        from ..creation import _scalar_to

        value = _scalar_to("fill_", value, self._data.dtype)
    if (self._requires_grad or isinstance(value, Tensor)) and _state.grad_enabled:
        return commit_inplace(self, fill(self, value), "fill_")
    if isinstance(value, Tensor):
        value = value.item()
    with self._device.backend.device_ctx():
        self._data[...] = value
    self._version[0] += 1
    return self


@declare(method="zero_")
def zero_(self: Tensor) -> Tensor:
    """Set every element to zero in place."""
    return fill_(self, 0)


@declare(namespaces=(), method="copy_")
def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast, cast, moved to this device) into this tensor in place; differentiable in ``src``."""
    check_inplace_leaf(self, "copy_")
    if not isinstance(src, Tensor):
        from ..creation import tensor

        src = tensor(src)
    src = src.to(device=self.device, dtype=self.dtype)
    if _state.grad_enabled and (src._requires_grad or self._requires_grad):
        from .elementwise import add
        from .shape import broadcast_to

        # the old values get a zero gradient through ``fill``, which saves nothing
        return commit_inplace(self, add(broadcast_to(src, self.shape), fill(self, 0)), "copy_")
    with self._device.backend.device_ctx():
        self._data[...] = src._data
    self._version[0] += 1
    return self
