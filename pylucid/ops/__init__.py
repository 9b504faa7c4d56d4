"""Ops: ``OpSchema``, ``AmpPolicy``, the registry and one module per op family.

>>> import pylucid
>>> s = pylucid.ops.schema("mean")
>>> s.amp_policy.value, s.saves_input, s.saves_output
('Promote', False, False)
>>> "sqrt" in pylucid.ops.list_ops()
True
"""

from .._state import state as _state
from .._tensor import _TENSOR_TYPES, Tensor
from ._op import _FAST_FLOAT, _FAST_INT_OK, Op, apply, inplace_variant
from .registry import list_ops, op_class, schema
from .schema import AmpPolicy, OpSchema

from .conversion import cast, clone, contiguous, to_device  # noqa: E402
from .elementwise import (  # noqa: E402
    abs, absolute, add, cos, div, divide, exp, floor_divide, log, mul, multiply, neg, negative, pow, remainder,
    sign, sin, sqrt, square, sub, sum_to_size, true_divide,
)
from .compare import (  # noqa: E402
    bitwise_and, bitwise_not, bitwise_or, bitwise_xor, eq, ge, gt, le, logical_and, logical_not, logical_or,
    logical_xor, lt, ne,
)
from .reduction import amax, amin, max, mean, min, sum  # noqa: E402
from .shape import (  # noqa: E402
    broadcast_to, cat, concat, concatenate, expand, expand_as, flatten, permute, reshape, squeeze, stack, swapaxes,
    swapdims, t, transpose, unsqueeze, view,
)
from .indexing import getitem, index_put, setitem, where  # noqa: E402
from .linalg import matmul  # noqa: E402

subtract = sub

# family modules; each defines __all__ (bound under private names: ``complex`` is also a function)
from . import activation as _activation, complex as _complex, conv as _conv, fft as _fft  # noqa: E402
from . import nn as _nn, random_ops as _random_ops, scan as _scan, sorting as _sorting  # noqa: E402
from . import special as _special  # noqa: E402
from . import compare as _compare, elementwise as _elementwise, indexing as _indexing  # noqa: E402
from . import linalg as _linalg, reduction as _reduction, shape as _shape  # noqa: E402
from .activation import *  # noqa: E402,F401,F403
from .scan import *  # noqa: E402,F401,F403
from .sorting import *  # noqa: E402,F401,F403
from .special import *  # noqa: E402,F401,F403
from .fft import *  # noqa: E402,F401,F403
from .complex import *  # noqa: E402,F401,F403
from .nn import *  # noqa: E402,F401,F403
from .conv import *  # noqa: E402,F401,F403
from .random_ops import *  # noqa: E402,F401,F403
from .elementwise import *  # noqa: E402,F401,F403
from .compare import *  # noqa: E402,F401,F403
from .reduction import *  # noqa: E402,F401,F403
from .shape import *  # noqa: E402,F401,F403
from .indexing import *  # noqa: E402,F401,F403
from .linalg import *  # noqa: E402,F401,F403

_FAMILY_MODULES = (_elementwise, _compare, _reduction, _shape, _indexing, _linalg, _activation, _scan, _sorting,
                   _special, _fft, _complex, _nn, _conv, _random_ops)
__all__ = sorted({n for m in _FAMILY_MODULES for n in getattr(m, "__all__", ())} | {
    "cast", "clone", "contiguous", "abs", "absolute", "add", "cos", "div", "divide", "exp", "floor_divide", "log",
    "mul", "multiply", "neg", "negative", "pow", "remainder", "sign", "sin", "sqrt", "square", "sub", "subtract",
    "true_divide", "addcmul", "addcdiv", "eq", "ge", "gt", "le", "lt", "ne", "logical_and", "logical_not", "logical_or",
    "logical_xor",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "amax", "amin", "max", "mean", "min", "sum",
    "broadcast_to", "cat", "concat", "concatenate", "expand", "flatten", "permute", "reshape", "squeeze", "stack",
    "swapaxes", "swapdims", "t", "transpose", "unsqueeze", "view", "where", "matmul", "index_put",
})


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (broadcasting), differentiable.

    >>> import pylucid
    >>> pylucid.addcmul(pylucid.ones(2), pylucid.tensor([1.0, 2.0]), pylucid.tensor([3.0, 4.0]), value=0.5)
    tensor([2.5000, 5.0000])
    """
    prod = mul(tensor1, tensor2)
    return add(input, mul(prod, value) if value != 1 else prod)


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (broadcasting), differentiable.

    >>> import pylucid
    >>> pylucid.addcdiv(pylucid.zeros(2), pylucid.tensor([1.0, 2.0]), pylucid.tensor([4.0, 4.0]), value=2)
    tensor([0.5000, 1.0000])
    """
    quot = div(tensor1, tensor2)
    return add(input, mul(quot, value) if value != 1 else quot)


def _plain_operand(self, other):
    """``other`` as something a ufunc can write into ``self`` with, or None when the general path must run."""
    data = self._data
    if other.__class__ in _TENSOR_TYPES:
        if other._device is self._device and other._data.dtype == data.dtype:
            return other._data
        return None
    if (other.__class__ is float and data.dtype in _FAST_FLOAT) or (other.__class__ is int and data.dtype in
                                                                     _FAST_INT_OK):
        return other
    return None


def _direct_inplace(name, ufunc, general):
    def method(self, other, *, alpha=1):
        if not _state.grad_enabled or not (self._requires_grad or getattr(other, "_requires_grad", False)):
            od = _plain_operand(self, other)
            if od is not None and not (ufunc == "true_divide" and self._data.dtype.kind not in "fc"):
                if alpha != 1:
                    od = od * alpha
                be = self._device.backend
                try:
                    if be._multi:
                        with be.cuda_device:
                            getattr(be.xp, ufunc)(self._data, od, out=self._data)
                    else:
                        getattr(be.xp, ufunc)(self._data, od, out=self._data)
                except (ValueError, TypeError):
                    pass  # broadcasting beyond self's shape, read-only storage, casting: the general path explains
                else:
                    self._version[0] += 1
                    return self
        return general(self, other, alpha=alpha) if alpha != 1 else general(self, other)

    method.__name__ = name
    method.__doc__ = general.__doc__
    return method


def _addc_inplace(name, ufunc, fn):
    general = inplace_variant(fn, name)

    def method(self, tensor1, tensor2, *, value=1):
        if not _state.grad_enabled or not (self._requires_grad or tensor1._requires_grad or tensor2._requires_grad):
            a, b = _plain_operand(self, tensor1), _plain_operand(self, tensor2)
            if a is not None and b is not None and self._data.dtype.kind in "fc":
                be = self._device.backend
                xp = be.xp
                try:
                    with be.device_ctx():
                        tmp = getattr(xp, ufunc)(a, b)
                        if value != 1:
                            xp.multiply(tmp, value, out=tmp)
                        xp.add(self._data, tmp, out=self._data)
                except (ValueError, TypeError):
                    pass
                else:
                    self._version[0] += 1
                    return self
        return general(self, tensor1, tensor2, value=value)

    method.__name__ = name
    method.__doc__ = f"In-place ``{fn.__name__}``: ``self += value * tensor1 {'*' if ufunc == 'multiply' else '/'} " \
                     "tensor2``."
    return method


def _install_inplace():
    pairs = {
        "add_": add, "sub_": sub, "mul_": mul, "div_": div, "pow_": pow, "neg_": neg, "abs_": abs, "exp_": exp,
        "log_": log, "sin_": sin, "cos_": cos, "sqrt_": sqrt, "square_": square, "sign_": sign,
        "remainder_": remainder, "floor_divide_": floor_divide, "subtract_": sub, "multiply_": mul,
        "true_divide_": div,
    }
    for name, fn in pairs.items():
        setattr(Tensor, name, inplace_variant(fn, name))
    # the arithmetic updates optimizers live on: computed straight into the
    # tensor's storage when no graph is recorded (no temporary, no copy)
    for name, ufunc, fn in (("add_", "add", add), ("sub_", "subtract", sub), ("mul_", "multiply", mul),
                            ("div_", "true_divide", div), ("subtract_", "subtract", sub),
                            ("multiply_", "multiply", mul)):
        setattr(Tensor, name, _direct_inplace(name, ufunc, inplace_variant(fn, name)))
    Tensor.addcmul_ = _addc_inplace("addcmul_", "multiply", addcmul)
    Tensor.addcdiv_ = _addc_inplace("addcdiv_", "true_divide", addcdiv)
    Tensor.addcmul = addcmul
    Tensor.addcdiv = addcdiv
    dunders = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
               "__ipow__": "pow_", "__imod__": "remainder_", "__ifloordiv__": "floor_divide_"}
    for d, name in dunders.items():
        setattr(Tensor, d, getattr(Tensor, name))

    def zero_(self):
        return fill_(self, 0)

    def fill_(self, value):
        from ._op import check_inplace_leaf, commit_inplace

        check_inplace_leaf(self, "fill_")
        if isinstance(value, Tensor):
            value = value.item()
        from .._state import state

        if self._requires_grad and state.grad_enabled:
            return commit_inplace(self, add(mul(self, 0), value).to(self.dtype), "fill_")
        with self._device.backend.device_ctx():
            self._data[...] = value
        self._version[0] += 1
        return self

    def copy_(self, src, non_blocking=False):
        from ._op import check_inplace_leaf, commit_inplace

        check_inplace_leaf(self, "copy_")
        if not isinstance(src, Tensor):
            from ..creation import tensor

            src = tensor(src)
        src = src.to(device=self.device, dtype=self.dtype)
        from .._state import state

        if state.grad_enabled and (src._requires_grad or self._requires_grad):
            return commit_inplace(self, broadcast_to(src, self.shape) + mul(self, 0), "copy_")
        with self._device.backend.device_ctx():
            self._data[...] = src._data
        self._version[0] += 1
        return self

    Tensor.zero_ = zero_
    Tensor.fill_ = fill_
    Tensor.copy_ = copy_


_install_inplace()
