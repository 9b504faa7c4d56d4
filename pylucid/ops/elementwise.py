"""Element-wise ops: arithmetic, the documented ``square`` and ``sqrt``, and friends.

Binary ops broadcast (NumPy/PyTorch rules) and take Python scalars as weak
operands. Their backward sums the incoming gradient back to each input's
shape (``sum_to_size``), which is what makes broadcasting differentiable.
"""

from __future__ import annotations

from collections import namedtuple

from .._state import state as _state
from .._tensor import _TENSOR_TYPES, Tensor
from ..dtypes import bfloat16 as _BF16_DTYPE
from ..dtypes import bool_ as _dt_bool
from ..errors import DtypeMismatch, ShapeMismatch
from ._op import _FAST_FLOAT, _FAST_INT_OK, Op, apply, inplace_variant, operand
from ._utils import camel, check_tensor, is_float_dtype
from ._utils import conj_if_complex as _cj
from .registry import declare, op_function
from .schema import FORCE_FP32, KEEP_INPUT, PROMOTE, OpSchema


def _bshape(op, a, b):
    sa = getattr(a, "shape", ())
    sb = getattr(b, "shape", ())
    n = max(len(sa), len(sb))
    pa = (1,) * (n - len(sa)) + tuple(sa)
    pb = (1,) * (n - len(sb)) + tuple(sb)
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise ShapeMismatch(
                f"{op}: shapes {tuple(sa)} and {tuple(sb)} cannot be broadcast together "
                f"(size {x} vs {y} in a non-singleton dimension)"
            )


_PLAIN_SCALARS = frozenset((int, float, bool, complex))


def _binary(op_cls, a, b, name):
    # Tensors and Python numbers pass as they are; anything else is normalised (or refused) by operand()
    if a.__class__ not in _TENSOR_TYPES and a.__class__ not in _PLAIN_SCALARS:
        a = operand(name, a)
    if b.__class__ not in _TENSOR_TYPES and b.__class__ not in _PLAIN_SCALARS:
        b = operand(name, b)
    try:
        return apply(op_cls, (a, b))
    except ValueError as exc:
        if "broadcast" in str(exc):
            _bshape(name, a, b)
        raise


@declare()
def sum_to_size(g: Tensor, *shape) -> Tensor:
    """Sum ``g`` over the dimensions broadcasting added or stretched, to reach ``shape``.

    >>> import pylucid
    >>> pylucid.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    shape = tuple(shape)
    if g.shape == shape and (shape or g._data.dtype.kind not in "biu"):
        return g
    from .reduction import sum as _sum

    check_tensor(g, "sum_to_size", "input")
    for n in shape:
        if n.__class__ is not int and not (hasattr(n, "__index__") and not isinstance(n, (float, bool))):
            raise TypeError(f"sum_to_size: size must be a tuple of ints, got {type(n).__name__} {n!r} in {shape!r}")
    if not shape:  # PyTorch's sum_to: to size () is a full sum (bool and small integers become int64)
        return _sum(g)
    from .shape import reshape

    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:])):
        raise ShapeMismatch(f"sum_to_size: size {shape} is not expandable to the input's size {tuple(g.shape)}")
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1)
    r = _sum(g, dim=axes, keepdim=True) if axes else g
    return reshape(r, shape) if lead else r



# ---------------------------------------------------------------- in-place variants of the arithmetic
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


def _direct_inplace(ufunc: str):
    """In-place factory for ``add_``/``sub_``/``mul_``/``div_``: the updates optimizers live on.

    With no graph to record, the result is computed straight into the tensor's
    storage by the backend's ufunc (no temporary, no copy); otherwise (or when
    broadcasting, dtypes or read-only storage need the general rules) the
    generic in-place wrapper runs, which also words the errors.
    """

    def factory(fn, name):
        general = inplace_variant(fn, name)

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
                                be.inplace(ufunc, self._data, od)
                        else:
                            be.inplace(ufunc, self._data, od)
                    except (ValueError, TypeError):
                        pass  # broadcasting beyond self's shape, read-only storage, casting: the general path explains
                    else:
                        self._version[0] += 1
                        return self
            return general(self, other, alpha=alpha) if alpha != 1 else general(self, other)

        method.__name__ = name
        method.__doc__ = f"In-place ``{fn.__name__}``: writes into this tensor and bumps its version."
        return method

    return factory


def _addc_inplace(ufunc: str):
    """In-place factory for ``addcmul_``/``addcdiv_``, direct into storage when no graph is recorded."""

    def factory(fn, name):
        general = inplace_variant(fn, name)

        def method(self, tensor1, tensor2, *, value=1):
            if not _state.grad_enabled or not (self._requires_grad or tensor1._requires_grad or
                                               tensor2._requires_grad):
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
        method.__doc__ = f"In-place ``{fn.__name__}``: ``self += value * tensor1 " \
                         f"{'*' if ufunc == 'multiply' else '/'} tensor2``."
        return method

    return factory


# ---------------------------------------------------------------- arithmetic
class Add(Op):
    """``y = a + b``; ``da = g``, ``db = g`` (summed back over broadcast dims)."""

    schema = OpSchema("add", amp_policy=PROMOTE, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        return be.add(a, b)

    def backward(self, g):
        sa, sb = self.shapes
        return (sum_to_size(g, sa) if sa is not None else None, sum_to_size(g, sb) if sb is not None else None)

    def backward_fast(self, be, g):
        sa, sb = self.shapes
        ea, eb = self.next_edges
        return (be.sum_to_shape(g, sa) if ea is not None else None, be.sum_to_shape(g, sb) if eb is not None else None)


@declare(Add, inplace=_direct_inplace("add"), dunders=("__add__", "__radd__", "__iadd__"))
def add(input, other, *, alpha=1) -> Tensor:
    """``input + alpha * other``, broadcasting.

    >>> import pylucid
    >>> pylucid.add(pylucid.tensor([1, 2]), 1.5)
    tensor([2.5000, 3.5000])
    """
    if alpha != 1:
        _check_alpha("add", input, other, alpha)
        other = mul(other, alpha)
    return _binary(Add, input, other, "add")


class Sub(Op):
    """``y = a - b``; ``da = g``, ``db = -g``."""

    schema = OpSchema("sub", amp_policy=PROMOTE, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        return be.subtract(a, b)

    def backward(self, g):
        sa, sb = self.shapes
        return (sum_to_size(g, sa) if sa is not None else None, sum_to_size(neg(g), sb) if sb is not None else None)

    def backward_fast(self, be, g):
        sa, sb = self.shapes
        ea, eb = self.next_edges
        return (be.sum_to_shape(g, sa) if ea is not None else None,
                be.sum_to_shape(be.negative(g), sb) if eb is not None else None)


@declare(Sub, aliases=("subtract",), inplace=_direct_inplace("subtract"), dunders=("__sub__", "__rsub__", "__isub__"))
def sub(input, other, *, alpha=1) -> Tensor:
    """``input - alpha * other``, broadcasting. Bool tensors are refused, as in PyTorch."""
    for x in (input, other):
        if isinstance(x, Tensor) and x._data.dtype == bool:
            raise TypeError("sub: subtraction of bool tensors is not supported; use logical_xor or ~ instead")
    if alpha != 1:
        _check_alpha("sub", input, other, alpha)
        other = mul(other, alpha)
    return _binary(Sub, input, other, "sub")


def _check_alpha(name, input, other, alpha):
    """PyTorch's rule for ``alpha``: a float (or complex) ``alpha`` needs a floating (complex) result; a bool
    ``alpha`` a bool one. Checked only when ``alpha != 1``."""
    kinds = [x._data.dtype.kind if x.__class__ in _TENSOR_TYPES else
             ("b" if isinstance(x, bool) else "i" if isinstance(x, int) else "f" if isinstance(x, float) else "c")
             for x in (input, other)]
    if isinstance(alpha, bool):
        if any(k != "b" for k in kinds):
            raise TypeError(f"{name}: a bool alpha is only supported for bool results, got operands of kinds "
                            f"{kinds}")
        return
    if isinstance(alpha, float) and all(k in "biu" for k in kinds):
        raise TypeError(f"{name}: for integral input tensors, alpha must not be a floating point number, got "
                        f"alpha={alpha!r}")
    if isinstance(alpha, complex) and all(k != "c" for k in kinds):
        raise TypeError(f"{name}: a complex alpha needs a complex operand, got alpha={alpha!r}")


class Mul(Op):
    """``y = a * b``; ``da = g * conj(b)``, ``db = g * conj(a)`` (the conjugates are no-ops for real dtypes)."""

    schema = OpSchema("mul", amp_policy=PROMOTE, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        return be.multiply(a, b)

    def backward(self, g):
        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        return (sum_to_size(mul(g, _cj(b)), sa) if ea is not None else None,
                sum_to_size(mul(g, _cj(a)), sb) if eb is not None else None)

    def backward_fast(self, be, g):
        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        # ndarray.conj() returns the array itself for real dtypes and Python numbers' conjugate() is the number:
        # the complex convention costs the real hot path one method call
        # (backend primitives rather than operators, so the CUDA backend's fast launch serves backward too)
        return (be.sum_to_shape(be.multiply(g, b._data.conj() if sb is not None else b.conjugate()), sa)
                if ea is not None else None,
                be.sum_to_shape(be.multiply(g, a._data.conj() if sa is not None else a.conjugate()), sb)
                if eb is not None else None)


@declare(Mul, aliases=("multiply",), inplace=_direct_inplace("multiply"), dunders=("__mul__", "__rmul__", "__imul__"))
def mul(input, other) -> Tensor:
    """``input * other``, broadcasting.

    >>> import pylucid
    >>> pylucid.mul(pylucid.tensor([1.0, 2.0]), pylucid.tensor([[3.0], [4.0]]))
    tensor([[3., 6.],
            [4., 8.]])
    """
    return _binary(Mul, input, other, "mul")



class Div(Op):
    """``y = a / b`` (true division); ``da = g / conj(b)``, ``db = -g conj(a / b^2)``.

    Integer inputs give a floating result (``real_valued``).
    """

    schema = OpSchema("div", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        with be.errstate():
            return be.true_divide(a, b)

    def backward(self, g):
        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        return (sum_to_size(div(g, _cj(b)), sa) if ea is not None else None,
                sum_to_size(neg(div(mul(g, _cj(a)), _cj(mul(b, b)))), sb) if eb is not None else None)

    def backward_fast(self, be, g):
        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        ad = a._data.conj() if sa is not None else a.conjugate()
        bd = b._data.conj() if sb is not None else b.conjugate()
        with be.errstate():
            return (be.sum_to_shape(be.true_divide(g, bd), sa) if ea is not None else None,
                    be.sum_to_shape(be.negative(be.true_divide(be.multiply(g, ad), be.multiply(bd, bd))), sb)
                    if eb is not None else None)


class DivRounding(Op):
    """``div(a, b, rounding_mode='floor'|'trunc')``: the rounded quotient; piecewise constant, so both
    gradients are zero (recorded, as PyTorch's ``DivBackward``: the result of a floating division requires grad).

    Integer inputs stay integer (exact integer division; division by zero raises).
    """

    schema = OpSchema("div_rounding", amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, a, b, *, rounding_mode):
        return (FloorDivide if rounding_mode == "floor" else TruncDivide).forward(be, a, b)

    def backward(self, g):
        return _grads2(self, lambda: _zero_grad(g), lambda: _zero_grad(g))


def _div_inplace(fn, name):
    """``div_``: the direct in-place true division of the optimizers, or the generic variant with a rounding mode."""
    direct = _direct_inplace("true_divide")(fn, name)
    general = inplace_variant(fn, name)

    def method(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return direct(self, other)
        return general(self, other, rounding_mode=rounding_mode)

    method.__name__ = name
    method.__doc__ = direct.__doc__
    return method


@declare(Div, aliases=("divide", "true_divide"), inplace=_div_inplace,
         dunders=("__truediv__", "__rtruediv__", "__itruediv__"))
def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """``input / other``; ``rounding_mode`` ``None`` (true division), ``"trunc"`` or ``"floor"``.

    A rounded division keeps integer dtypes and has a zero gradient (its result
    still requires grad, as in PyTorch).

    >>> import pylucid
    >>> pylucid.div(pylucid.tensor([7, -7]), 2)
    tensor([ 3.5000, -3.5000])
    >>> pylucid.div(pylucid.tensor([7, -7]), 2, rounding_mode="floor")
    tensor([ 3, -4])
    """
    if rounding_mode is None:
        return _binary(Div, input, other, "div")
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    for x in (input, other):
        if isinstance(x, Tensor) and x._data.dtype.kind == "c":
            raise TypeError(f"div: rounding_mode={rounding_mode!r} is not supported for complex inputs")
    if input.__class__ not in _TENSOR_TYPES and input.__class__ not in _PLAIN_SCALARS:
        input = operand("div", input)
    if other.__class__ not in _TENSOR_TYPES and other.__class__ not in _PLAIN_SCALARS:
        other = operand("div", other)
    try:
        return apply(DivRounding, (input, other), {"rounding_mode": rounding_mode})
    except ValueError as exc:
        if "broadcast" in str(exc):
            _bshape("div", input, other)
        raise



def _check_int_zero_division(be, b, name):
    # PyTorch raises on integer division by zero on the CPU instead of
    # returning garbage; NumPy would silently give 0.
    if b.dtype.kind in "iub" and (b == 0).any():
        raise ZeroDivisionError(f"{name}: integer division by zero")


class FloorDivide(Op):
    """``floor(a / b)``; piecewise constant, so its gradient is zero."""

    schema = OpSchema("floor_divide", amp_policy=KEEP_INPUT, family="elementwise", differentiable=False,
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        bb = be.asarray(b)
        _check_int_zero_division(be, bb, "floor_divide")
        with be.errstate():
            # floats too: NumPy's floor_divide is PyTorch's div_floor_floating (fmod-based, Python's rule), which
            # floor(a / b) is not where a / b rounds up to an integer (7.0 // 0.1 = 69) or b is infinite
            # (1.0 // -inf = -1)
            return a // b


@declare(FloorDivide, inplace=True, dunders=("__floordiv__", "__rfloordiv__", "__ifloordiv__"))
def floor_divide(input, other) -> Tensor:
    """``floor(input / other)`` element-wise (``//``); integer division by zero raises."""
    return _binary(FloorDivide, input, other, "floor_divide")


class Remainder(Op):
    """``a - floor(a / b) * b`` (Python's ``%``, sign of the divisor); ``da = g``, ``db = -floor(a/b) g``."""

    schema = OpSchema("remainder", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        _check_int_zero_division(be, be.asarray(b), "remainder")
        with be.errstate():
            return be.remainder(a, b)

    def backward(self, g):
        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        return (sum_to_size(g, sa) if ea is not None else None,
                sum_to_size(neg(mul(g, floor_divide(a, b))), sb) if eb is not None else None)


@declare(Remainder, inplace=True, dunders=("__mod__", "__rmod__", "__imod__"))
def remainder(input, other) -> Tensor:
    """Python-style modulus (``%``): the result has the sign of ``other``."""
    return _binary(Remainder, input, other, "remainder")


class Neg(Op):
    """``y = -x``; ``dx = -g``."""

    schema = OpSchema("neg", amp_policy=PROMOTE, family="elementwise")

    @staticmethod
    def forward(be, x):
        return -x

    def backward(self, g):
        return neg(g)

    def backward_fast(self, be, g):
        return be.negative(g)


@declare(Neg, aliases=("negative",), inplace=True, dunders=("__neg__",))
def neg(input: Tensor) -> Tensor:
    """``-input``. Bool tensors are refused, as in PyTorch."""
    if isinstance(input, Tensor) and input._data.dtype == bool:
        raise TypeError("neg: negation of a bool tensor is not supported; use ~ or logical_not instead")
    return apply(Neg, (input,))



class Pow(Op):
    """``y = a ** b``; ``da = g conj(b a^(b-1))`` (0 where ``b == 0``), ``db = g conj(y log(a))`` (0 where
    ``a == 0, b >= 0``; for complex ``b``: ``b`` real and ``>= 0``).

    The masks follow PyTorch, so ``pow(0, 0)`` has gradient 0 with respect to both.
    """

    schema = OpSchema("pow", amp_policy=FORCE_FP32, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        bb = be.asarray(b)
        if getattr(a, "dtype", bb.dtype).kind in "iu" and bb.dtype.kind in "iu" and (bb < 0).any():
            raise ValueError("pow: integers to negative integer powers are not allowed")
        with be.errstate():
            return a ** b

    def backward(self, g):
        from .compare import eq, ge, logical_and
        from .indexing import where

        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        ga = gb = None
        if ea is not None:
            if isinstance(b, Tensor):
                # b * a^(b-1) with b == 0 replaced by 1 inside the power: at a == 0,
                # b == 0 the masked branch would be 0 * inf and warn in Mul.forward
                b_zero = eq(b, 0)
                d = mul(b, pow(a, sub(where(b_zero, 1.0, b), 1)))
                ga = sum_to_size(mul(g, where(b_zero, 0.0, _cj(d))), sa)
            else:
                ga = mul(g, _cj(mul(b, pow(a, b - 1)))) if b != 0 else mul(g, 0.0)
        if eb is not None:
            from .elementwise import log

            if isinstance(a, Tensor):
                # log(a) is taken of a with the masked zeros replaced by 1, so the
                # masked branch is 0 * 0, not 0 * -inf (a NaN and a warning in Mul)
                if b._data.dtype.kind == "c":
                    from .complex import imag, real

                    b_nonneg = logical_and(ge(real(b), 0), eq(imag(b), 0))
                else:
                    b_nonneg = ge(b, 0)
                mask = logical_and(eq(a, 0), b_nonneg)
                gb = sum_to_size(mul(g, where(mask, 0.0, _cj(mul(pow(a, b), log(where(mask, 1.0, a)))))), sb)
            elif a.__class__ is complex or b._data.dtype.kind == "c":
                import cmath

                gb = mul(g, _cj(mul(pow(a, b), cmath.log(a) if a != 0 else 0.0)))
            else:
                import math

                gb = mul(g, mul(pow(a, b), math.log(a) if a > 0 else (float("nan") if a < 0 else 0.0)))
        return ga, gb


@declare(Pow, inplace=True, dunders=("__pow__", "__rpow__", "__ipow__"))
def pow(input, exponent) -> Tensor:  # noqa: A001 - mirrors torch.pow
    """``input ** exponent`` element-wise, broadcasting; either may be a Python number.

    >>> import pylucid
    >>> pylucid.pow(pylucid.tensor([1.0, 2.0, 3.0]), 2)
    tensor([1., 4., 9.])
    """
    return _binary(Pow, input, exponent, "pow")


# ---------------------------------------------------------------- unary math
class Abs(Op):
    """``y = |x|``; ``dx = g * sign(x)`` (0 at 0, as PyTorch); complex ``x``: ``dx = g x / |x|`` (``sgn``, 0 at 0)."""

    schema = OpSchema("abs", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.abs(x)

    def backward(self, g):
        x = self.input(0)
        if x._data.dtype.kind == "c":
            from .complex import sgn

            return mul(g, sgn(x))  # sgn is differentiable for complex input (unlike sign for reals)
        return mul(g, sign(x))


@declare(Abs, aliases=("absolute",), inplace=True, dunders=("__abs__",))
def abs(input: Tensor) -> Tensor:  # noqa: A001
    """``|input|`` element-wise."""
    return apply(Abs, (input,))



class Sign(Op):
    """``sign(x)`` in {-1, 0, 1}; piecewise constant, gradient zero."""

    schema = OpSchema("sign", accepts=("float", "int", "bool"), amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x):
        if x.dtype == bool:
            return x.copy()
        s = be.sign(x)
        if is_float_dtype(x.dtype):  # PyTorch: sign(NaN) is 0 (NumPy gives NaN)
            s = be.where(s != s, s.dtype.type(0), s)
        return s

    def backward(self, g):
        return mul(g, 0.0)


@declare(Sign, inplace=True)
def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 according to the sign of each element; ``sign(NaN) = 0`` (as PyTorch). The gradient is zero.

    >>> import pylucid
    >>> pylucid.sign(pylucid.tensor([-2.0, 0.0, 3.0, float("nan")]))
    tensor([-1.,  0.,  1.,  0.])
    """
    return apply(Sign, (input,))


class Exp(Op):
    """``y = e^x``; saves its output: ``dx = g conj(y)``."""

    schema = OpSchema("exp", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.exp(x)

    def backward(self, g):
        return mul(g, _cj(self.output()))


@declare(Exp, inplace=True)
def exp(input: Tensor) -> Tensor:
    """``e ** input``; integer input gives a float result."""
    return apply(Exp, (input,))


class Log(Op):
    """``y = ln x``; ``dx = g / conj(x)``. ``log(0) = -inf``, negative input gives NaN."""

    schema = OpSchema("log", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.log(x)

    def backward(self, g):
        return div(g, _cj(self.input(0)))


@declare(Log, inplace=True)
def log(input: Tensor) -> Tensor:
    """Natural logarithm."""
    return apply(Log, (input,))


class Sin(Op):
    """``y = sin x``; ``dx = g conj(cos x)``."""

    schema = OpSchema("sin", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():  # sin(+-inf) is NaN, as PyTorch, without NumPy's warning
            return be.sin(x)

    def backward(self, g):
        return mul(g, _cj(cos(self.input(0))))


@declare(Sin, inplace=True)
def sin(input: Tensor) -> Tensor:
    """Sine (radians)."""
    return apply(Sin, (input,))


class Cos(Op):
    """``y = cos x``; ``dx = -g conj(sin x)``."""

    schema = OpSchema("cos", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():  # cos(+-inf) is NaN, as PyTorch, without NumPy's warning
            return be.cos(x)

    def backward(self, g):
        return neg(mul(g, _cj(sin(self.input(0)))))


@declare(Cos, inplace=True)
def cos(input: Tensor) -> Tensor:
    """Cosine (radians)."""
    return apply(Cos, (input,))


class Square(Op):
    """``y = x^2`` (documented op): Promote, saves its input, ``dx = 2 conj(x) g``."""

    schema = OpSchema("square", amp_policy=PROMOTE, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        return x * x

    def backward(self, g):
        return mul(g, mul(_cj(self.input(0)), 2))

    def backward_fast(self, be, g):
        return g * (2 * self.input(0)._data.conj())


@declare(Square, inplace=True)
def square(input: Tensor) -> Tensor:
    """``input * input``.

    Gradient ``2x``; integers stay integers (``square(int64) -> int64``), bool
    becomes int64 as in PyTorch.

    >>> import pylucid
    >>> x = pylucid.tensor([3.0], requires_grad=True)
    >>> pylucid.square(x).sum().backward(); x.grad
    tensor([6.])
    """
    if isinstance(input, Tensor) and input._data.dtype == bool:
        from .. import dtypes

        input = input.to(dtypes.int64)
    return apply(Square, (input,))


class Sqrt(Op):
    """``y = sqrt(x)`` (documented op): Promote, saves its output, ``dx = g / (2 conj(y))``.

    Saving the output makes the backward one division instead of recomputing
    the root. Negative inputs give NaN; the gradient at 0 is ``inf``.
    """

    schema = OpSchema("sqrt", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.sqrt(x)

    def backward(self, g):
        return div(g, mul(_cj(self.output()), 2))

    def backward_fast(self, be, g):
        with be.errstate():
            return g / (2 * self.output_array().conj())


@declare(Sqrt, inplace=True)
def sqrt(input: Tensor) -> Tensor:
    """Element-wise square root; integer input gives a float result.

    >>> import pylucid
    >>> pylucid.sqrt(pylucid.tensor([4, 9]))
    tensor([2., 3.])
    """
    return apply(Sqrt, (input,))


@declare(inplace=_addc_inplace("multiply"))
def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (broadcasting), a composite.

    >>> import pylucid
    >>> pylucid.addcmul(pylucid.ones(2), pylucid.tensor([1.0, 2.0]), pylucid.tensor([3.0, 4.0]), value=0.5)
    tensor([2.5000, 5.0000])
    """
    t = next((x for x in (input, tensor1, tensor2) if isinstance(x, Tensor)), None)
    if t is None:
        return _add_scaled(input, mul(tensor1, tensor2), value)
    with t._device.backend.errstate():  # inf + -inf is NaN, as PyTorch
        return _add_scaled(input, mul(tensor1, tensor2), _scalar_for(value, (input, tensor1, tensor2), "addcmul"))


@declare(inplace=_addc_inplace("true_divide"))
def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (broadcasting), a composite.

    >>> import pylucid
    >>> pylucid.addcdiv(pylucid.zeros(2), pylucid.tensor([1.0, 2.0]), pylucid.tensor([4.0, 4.0]), value=2)
    tensor([0.5000, 1.0000])
    """
    for t in (tensor1, tensor2):
        check_tensor(t, "addcdiv", "tensor1" if t is tensor1 else "tensor2")
    if tensor1._data.dtype.kind in "biu" and tensor2._data.dtype.kind in "biu":
        raise TypeError(f"addcdiv: integer division is not supported (tensor1 {tensor1.dtype.name}, tensor2 "
                        f"{tensor2.dtype.name}), as in PyTorch; use addcmul(input, tensor1, 1 / tensor2) for a true "
                        "division")
    return _add_scaled(input, div(tensor1, tensor2), value)


def _add_scaled(input, term, value):
    """``input + value * term``, with no multiply when ``value`` is 1."""
    return add(input, mul(term, value) if value != 1 else term)


def _check_scalar_fits(name, value, np_dtype):
    """PyTorch's overflow check of a Python number converted to an integer dtype (``creation._scalar_to``): a float
    must lie in the dtype's range; an int too, except that an unsigned dtype also takes negatives down to ``-max``
    (they wrap around). Out of range is a :class:`ScalarOverflow` (a ``ValueError``) naming ``name``."""
    if np_dtype.kind not in "iu" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    from ..creation import _scalar_to

    _scalar_to(name, value, np_dtype)


def _scalar_for(value, tensors, name="value"):
    """A scalar multiplier as PyTorch applies it to integer operands: cast to their integer type (``0.5`` becomes
    0; a negative one wraps around for unsigned operands, ``-2`` is 254 for uint8). Others pass unchanged."""
    dts = [t._data.dtype for t in tensors if isinstance(t, Tensor)]
    if not dts or isinstance(value, (bool, complex)) or not all(d.kind in "iu" for d in dts):
        return value
    for d in dts:
        _check_scalar_fits(name, value, d)
    v = int(value)
    if all(d.kind == "u" for d in dts):
        v %= 1 << (8 * max(d.itemsize for d in dts))
    return v


@declare(dunders=("__pos__",))
def positive(input: Tensor) -> Tensor:
    """``+input``: the tensor itself (a composite with nothing to compute).

    Unlike PyTorch, which refuses ``+`` on bool tensors, a bool tensor is
    returned as it is too.

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, -2.0])
    >>> +x is x
    True
    """
    check_tensor(input, "positive")
    return input


# ================================================================ the element-wise catalogue
# Conventions for what follows:
# - ops whose forward can leave the real domain (log(0), 0/0, sqrt(-1),
#   overflow) run under ``be.errstate()`` so NumPy stays silent where PyTorch
#   is; cheap arithmetic (add/mul/sub) does not pay its ~2 us.
# - ``backward`` formulas use pylucid ops only, so they serve first-order and
#   higher-order gradients alike.
# - piecewise-constant ops (floor, ceil, round, trunc) are differentiable with
#   a zero gradient, as in PyTorch.
# - a doctest that shows a transcendental result rounds it (``.round(decimals=4)``)
#   unless the value is one C99 Annex F makes exact (``cosh(0) = 1``, ``log(1) = 0``):
#   float32 kernels differ in the last bit between CPUs.


_EMPTY_PARAMS: dict = {}
_BF16_NP = _BF16_DTYPE.numpy_dtype
_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046
# the namespaces of the element-wise functions that torch.special has too
_WITH_SPECIAL = ("pylucid", "pylucid.special")


def _nan_quiet(be, fn, a, b):
    """``fn(a, b)``; ml_dtypes' bfloat16 ``maximum``/``minimum`` warn on NaN where float32 does not."""
    if getattr(a, "dtype", None) == _BF16_NP or getattr(b, "dtype", None) == _BF16_NP:
        with be.errstate():
            return fn(a, b)
    return fn(a, b)


def _unary(op_cls, x, params: dict = _EMPTY_PARAMS) -> Tensor:
    """``op_cls`` on the Tensor ``x`` (anything else raises TypeError naming the op)."""
    check_tensor(x, op_cls.schema.name)
    return apply(op_cls, (x,), params)


def _via_float32(be, fn, x):
    """Run a scipy.special-style kernel in float32 for half precision (no half kernels), cast back."""
    if x.dtype.itemsize < 4:
        return fn(x.astype("float32")).astype(x.dtype)
    return fn(x)


def _saved_as_tensors(self, g):
    """The saved inputs, Python scalars turned into 0-d tensors of ``g``'s dtype (for graph formulas)."""
    from .._tensor import _new_tensor

    return tuple(x if isinstance(x, Tensor) or x is None else _new_tensor(g._data.dtype.type(x), g._device)
                 for x in self.inputs)


def _grads2(self, ga, gb):
    """Reduce the two broadcast gradients back to the input shapes (None where not needed)."""
    sa, sb = self.shapes
    return (sum_to_size(ga(), sa) if self.next_edges[0] is not None else None,
            sum_to_size(gb(), sb) if self.next_edges[1] is not None else None)


def _zero_grad(g):
    return mul(g, 0.0)


def _check_float(name, x):
    if isinstance(x, Tensor) and not (is_float_dtype(x._data.dtype) or x._data.dtype.kind == "c"):
        raise TypeError(f"{name}: expected a floating point tensor, got {x.dtype}")


# ---------------------------------------------------------------- exponentials and logarithms
class Exp2(Op):
    """``2 ** input`` element-wise; integer input gives a float result.

    Saves its output: ``dx = g y ln 2``.

    >>> import pylucid
    >>> pylucid.exp2(pylucid.tensor([0, 3])).round(decimals=4)
    tensor([1., 8.])
    """

    schema = OpSchema("exp2", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.exp2(x)

    def backward(self, g):
        return mul(g, mul(_cj(self.output()), _LN2))


exp2 = op_function(Exp2, inplace=True, namespaces=_WITH_SPECIAL)


class Expm1(Op):
    """``exp(input) - 1``, without the cancellation of ``exp(x) - 1`` for tiny ``x``.

    Saves its output: ``dx = g (y + 1)``.

    >>> import pylucid
    >>> x = pylucid.tensor([1e-10], dtype=pylucid.float64)
    >>> f"{pylucid.expm1(x).item() * 1e10:.11f}"  # exp(x) - 1 gives 1.00000008274
    '1.00000000005'
    """

    schema = OpSchema("expm1", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.expm1(x)

    def backward(self, g):
        return mul(g, add(_cj(self.output()), 1))


expm1 = op_function(Expm1, inplace=True, namespaces=_WITH_SPECIAL)


class Log2(Op):
    """Base-2 logarithm; ``log2(0) = -inf``, negative input gives NaN (no warning).

    ``dx = g / (x ln 2)``.

    >>> import pylucid
    >>> pylucid.log2(pylucid.tensor([1.0, 8.0])).round(decimals=4)
    tensor([0., 3.])
    """

    schema = OpSchema("log2", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.log2(x)

    def backward(self, g):
        return div(g, mul(_cj(self.input(0)), _LN2))


log2 = op_function(Log2, inplace=True)


class Log10(Op):
    """Base-10 logarithm; ``log10(0) = -inf``, negative input gives NaN.

    ``dx = g / (x ln 10)``.

    >>> import pylucid
    >>> pylucid.log10(pylucid.tensor([10.0, 1000.0])).round(decimals=4)
    tensor([1., 3.])
    """

    schema = OpSchema("log10", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.log10(x)

    def backward(self, g):
        return div(g, mul(_cj(self.input(0)), _LN10))


log10 = op_function(Log10, inplace=True)


class Log1p(Op):
    """``log(1 + input)``, accurate for tiny ``input``; ``log1p(-1) = -inf``.

    ``dx = g / (1 + x)``.

    >>> import pylucid
    >>> x = pylucid.tensor([1e-10], dtype=pylucid.float64)
    >>> f"{pylucid.log1p(x).item() * 1e10:.11f}"  # log(1 + x) gives 1.00000008269
    '0.99999999995'
    """

    schema = OpSchema("log1p", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.log1p(x)

    def backward(self, g):
        return div(g, add(_cj(self.input(0)), 1))


log1p = op_function(Log1p, inplace=True, namespaces=_WITH_SPECIAL)


# ---------------------------------------------------------------- trigonometric and hyperbolic
class Tan(Op):
    """Tangent (radians). Saves its output: ``dx = g (1 + y^2)``.

    >>> import pylucid
    >>> pylucid.tan(pylucid.tensor([0.0]))
    tensor([0.])
    """

    schema = OpSchema("tan", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():  # tan(+-inf) is NaN, as PyTorch, without NumPy's warning
            return be.tan(x)

    def backward(self, g):
        y = _cj(self.output())
        return mul(g, add(mul(y, y), 1))


tan = op_function(Tan, inplace=True)


class Arcsin(Op):
    """Inverse sine; NaN outside ``[-1, 1]`` (alias ``asin``). ``dx = g / sqrt(1 - x^2)``.

    >>> import pylucid
    >>> pylucid.asin(pylucid.tensor([0.0, 1.0]))
    tensor([0.0000, 1.5708])
    """

    schema = OpSchema("arcsin", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.arcsin(x)

    def backward(self, g):
        x = self.input(0)
        return div(g, _cj(sqrt(sub(1, mul(x, x)))))


arcsin = op_function(Arcsin, aliases=("asin",), inplace=True)


class Arccos(Op):
    """Inverse cosine; NaN outside ``[-1, 1]`` (alias ``acos``). ``dx = -g / sqrt(1 - x^2)``.

    >>> import pylucid
    >>> pylucid.acos(pylucid.tensor([1.0, 0.0]))
    tensor([0.0000, 1.5708])
    """

    schema = OpSchema("arccos", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.arccos(x)

    def backward(self, g):
        x = self.input(0)
        return neg(div(g, _cj(sqrt(sub(1, mul(x, x))))))


arccos = op_function(Arccos, aliases=("acos",), inplace=True)


class Arctan(Op):
    """Inverse tangent (alias ``atan``). ``dx = g / (1 + x^2)``.

    >>> import pylucid
    >>> pylucid.atan(pylucid.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7854])
    """

    schema = OpSchema("arctan", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.arctan(x)

    def backward(self, g):
        x = _cj(self.input(0))
        return div(g, add(mul(x, x), 1))


arctan = op_function(Arctan, aliases=("atan",), inplace=True)


class Sinh(Op):
    """Hyperbolic sine; overflows to +-inf without a warning. ``dx = g cosh x``.

    >>> import pylucid
    >>> pylucid.sinh(pylucid.tensor([0.0]))
    tensor([0.])
    """

    schema = OpSchema("sinh", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.sinh(x)

    def backward(self, g):
        return mul(g, _cj(cosh(self.input(0))))


sinh = op_function(Sinh, inplace=True)


class Cosh(Op):
    """Hyperbolic cosine; overflows to inf without a warning. ``dx = g sinh x``.

    >>> import pylucid
    >>> pylucid.cosh(pylucid.tensor([0.0]))
    tensor([1.])
    """

    schema = OpSchema("cosh", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.cosh(x)

    def backward(self, g):
        return mul(g, _cj(sinh(self.input(0))))


cosh = op_function(Cosh, inplace=True)


class Arcsinh(Op):
    """Inverse hyperbolic sine (alias ``asinh``). ``dx = g / sqrt(x^2 + 1)``.

    >>> import pylucid
    >>> pylucid.asinh(pylucid.tensor([0.0]))
    tensor([0.])
    """

    schema = OpSchema("arcsinh", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.arcsinh(x)

    def backward(self, g):
        x = self.input(0)
        return div(g, _cj(sqrt(add(mul(x, x), 1))))


arcsinh = op_function(Arcsinh, aliases=("asinh",), inplace=True)


class Arccosh(Op):
    """Inverse hyperbolic cosine; NaN below 1 (alias ``acosh``).

    ``dx = g / sqrt(x^2 - 1)``; for complex ``x`` the principal branch's
    ``g / conj(sqrt(x - 1) sqrt(x + 1))``, as PyTorch.

    >>> import pylucid
    >>> pylucid.acosh(pylucid.tensor([1.0]))
    tensor([0.])
    """

    schema = OpSchema("arccosh", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.arccosh(x)

    def backward(self, g):
        x = self.input(0)
        if x._data.dtype.kind == "c":
            return div(g, _cj(mul(sqrt(sub(x, 1)), sqrt(add(x, 1)))))
        return div(g, sqrt(sub(mul(x, x), 1)))


arccosh = op_function(Arccosh, aliases=("acosh",), inplace=True)


class Arctanh(Op):
    """Inverse hyperbolic tangent; ``+-inf`` at ``+-1``, NaN outside (alias ``atanh``). ``dx = g / (1 - x^2)``.

    >>> import pylucid
    >>> pylucid.atanh(pylucid.tensor([0.0, 1.0]))
    tensor([0., inf])
    """

    schema = OpSchema("arctanh", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.arctanh(x)

    def backward(self, g):
        x = _cj(self.input(0))
        return div(g, sub(1, mul(x, x)))


arctanh = op_function(Arctanh, aliases=("atanh",), inplace=True)


# ---------------------------------------------------------------- error function, powers and roots
_TWO_OVER_SQRT_PI = 1.1283791670955126
_SQRT_PI_OVER_TWO = 0.88622692545275801


class Erf(Op):
    """Error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``.

    ``dx = g 2/sqrt(pi) exp(-x^2)``; a scipy.special kernel (float32 for half precision).

    >>> import pylucid
    >>> pylucid.erf(pylucid.tensor([0.0, 1.0]))
    tensor([0.0000, 0.8427])
    """

    schema = OpSchema("erf", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x):
        return _via_float32(be, be.special.erf, x)

    def backward(self, g):
        x = self.input(0)
        return mul(g, mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI))


erf = op_function(Erf, inplace=True, namespaces=_WITH_SPECIAL)


class Erfinv(Op):
    """Inverse error function on ``[-1, 1]``; ``+-inf`` at ``+-1``, NaN outside.

    Saves its output: ``dx = g sqrt(pi)/2 exp(y^2)`` (inf at +-1).

    >>> import pylucid
    >>> pylucid.erfinv(pylucid.tensor([0.0, 0.5]))
    tensor([0.0000, 0.4769])
    """

    schema = OpSchema("erfinv", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return _via_float32(be, be.special.erfinv, x)

    def backward(self, g):
        y = self.output()
        return mul(g, mul(exp(mul(y, y)), _SQRT_PI_OVER_TWO))


erfinv = op_function(Erfinv, inplace=True, namespaces=_WITH_SPECIAL)


class Reciprocal(Op):
    """``1 / input``; integer input gives a float result, ``1/0 = inf``.

    Saves its output: ``dx = -g y^2``.

    >>> import pylucid
    >>> pylucid.reciprocal(pylucid.tensor([2, 4]))
    tensor([0.5000, 0.2500])
    """

    schema = OpSchema("reciprocal", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.reciprocal(x)

    def backward(self, g):
        y = _cj(self.output())
        # 1/0 = inf: a zero incoming gradient there gives 0 * inf = NaN, the answer (as PyTorch), not a warning
        with self.device.backend.errstate():
            return neg(mul(g, mul(y, y)))


reciprocal = op_function(Reciprocal, inplace=True)


class Rsqrt(Op):
    """``1 / sqrt(input)``; ``rsqrt(0) = inf``, negative input gives NaN.

    Saves its output: ``dx = -g y^3 / 2``.

    >>> import pylucid
    >>> pylucid.rsqrt(pylucid.tensor([4.0, 16.0]))
    tensor([0.5000, 0.2500])
    """

    schema = OpSchema("rsqrt", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        with be.errstate():
            return be.reciprocal(be.sqrt(x))

    def backward(self, g):
        y = _cj(self.output())
        return mul(g, mul(mul(y, mul(y, y)), -0.5))


rsqrt = op_function(Rsqrt, inplace=True)


class Cube(Op):
    """``input ** 3``: Promote, saves its input, ``dx = 3 x^2 g``.

    A primitive for speed: one node instead of ``pow``'s general formula.

    >>> import pylucid
    >>> pylucid.cube(pylucid.tensor([2.0, -1.5]))
    tensor([ 8.0000, -3.3750])
    """

    schema = OpSchema("cube", amp_policy=PROMOTE, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, x):
        if x.dtype == bool:  # as pow(x, 3): bool becomes int64
            x = x.astype("int64")
        return x * x * x

    def backward(self, g):
        x = _cj(self.input(0))
        return mul(g, mul(mul(x, x), 3))


cube = op_function(Cube, method=False)


class Cbrt(Op):
    """Real cube root: ``cbrt(-8) = -2`` (``pow(x, 1/3)`` would give NaN); gradient ``inf`` at 0.

    Saves its output: ``dx = g / (3 y^2)``. The reference table calls this op
    ``cube_root`` (ForceFP32, saves output).

    >>> import pylucid
    >>> pylucid.cbrt(pylucid.tensor([-8.0, 0.5]))
    tensor([-2.0000,  0.7937])
    """

    schema = OpSchema("cbrt", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="elementwise",
                      accepts=("float", "int", "bool"))  # the real cube root has no complex form

    @staticmethod
    def forward(be, x):
        return be.cbrt(x)

    def backward(self, g):
        y = self.output()
        return div(g, mul(mul(y, y), 3))


cbrt = op_function(Cbrt, method=False)


# ---------------------------------------------------------------- rounding (zero gradients, as PyTorch)
class _Rounding(Op):
    """Piecewise constant: the gradient is zero everywhere (PyTorch's convention)."""

    def backward(self, g):
        return _zero_grad(g)


class Floor(_Rounding):
    """Largest integer ``<= input`` (same dtype; integer input is returned unchanged); zero gradient.

    >>> import pylucid
    >>> pylucid.floor(pylucid.tensor([-1.5, 1.5]))
    tensor([-2.,  1.])
    """

    schema = OpSchema("floor", accepts=("float", "int", "bool"), amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.floor(x) if is_float_dtype(x.dtype) else x.copy()


floor = op_function(Floor, inplace=True)


class Ceil(_Rounding):
    """Smallest integer ``>= input`` (same dtype; integer input is returned unchanged); zero gradient.

    >>> import pylucid
    >>> pylucid.ceil(pylucid.tensor([-1.5, 1.5]))
    tensor([-1.,  2.])
    """

    schema = OpSchema("ceil", accepts=("float", "int", "bool"), amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.ceil(x) if is_float_dtype(x.dtype) else x.copy()


ceil = op_function(Ceil, inplace=True)


class Trunc(_Rounding):
    """Round towards zero (same dtype; integer input is returned unchanged); zero gradient. Alias ``fix``.

    >>> import pylucid
    >>> pylucid.trunc(pylucid.tensor([-1.7, 1.7]))
    tensor([-1.,  1.])
    """

    schema = OpSchema("trunc", accepts=("float", "int", "bool"), amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x):
        return be.trunc(x) if is_float_dtype(x.dtype) else x.copy()


trunc = op_function(Trunc, aliases=("fix",), inplace=True)


class Round(_Rounding):
    """Round half to even (PyTorch's and NumPy's rule); ``decimals`` as ``torch.round``."""

    schema = OpSchema("round", accepts=("float", "int", "bool"), amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x, decimals=0):
        if not is_float_dtype(x.dtype):
            return x.copy()
        if decimals == 0:
            return be.rint(x)
        # PyTorch's formula: scale by 10^|decimals|, round to nearest even, undo
        with be.errstate():
            if decimals > 0:
                s = x.dtype.type(10.0 ** decimals)
                return be.rint(x * s) / s
            s = x.dtype.type(10.0 ** -decimals)
            return be.rint(x / s) * s


@declare(Round, inplace=True, namespaces=_WITH_SPECIAL)
def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001 - mirrors torch.round
    """Round to ``decimals`` places, halves to even (``round(2.5) = 2``); zero gradient.

    >>> import pylucid
    >>> pylucid.round(pylucid.tensor([0.5, 1.5, 2.5]))
    tensor([0., 2., 2.])
    >>> pylucid.round(pylucid.tensor([1.2345]), decimals=2)
    tensor([1.2300])
    """
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    return _unary(Round, input, {"decimals": decimals})


@declare(Round, namespaces=(), method=False, dunders=("__round__",))
def _builtin_round(self, ndigits=None) -> Tensor:
    """Python's ``round(tensor)`` and ``round(tensor, ndigits)``: :func:`round` with ``decimals=ndigits``."""
    return round(self) if ndigits is None else round(self, decimals=ndigits)


class Frac(Op):
    """``x - trunc(x)`` (sign of ``x``); ``dx = g``."""

    schema = OpSchema("frac", amp_policy=KEEP_INPUT, family="elementwise")

    @staticmethod
    def forward(be, x):
        if x.dtype.kind == "c":
            raise TypeError("frac: complex tensors are not supported")
        with be.errstate():  # frac(+-inf) is NaN (inf - inf), as PyTorch
            return x - be.trunc(x)

    def backward(self, g):
        return g


@declare(Frac, inplace=True)
def frac(input: Tensor) -> Tensor:
    """Fractional part ``input - trunc(input)`` (keeps the sign); gradient 1. Floating input only.

    >>> import pylucid
    >>> pylucid.frac(pylucid.tensor([-1.25, 2.5]))
    tensor([-0.2500,  0.5000])
    """
    _check_float("frac", input)
    return _unary(Frac, input)


# ---------------------------------------------------------------- clamp
class Clamp(Op):
    """``min(max(x, lo), hi)``; ``lo``/``hi`` are scalars, tensors or None.

    Gradients follow PyTorch: ``x`` gets ``g`` where ``lo <= x <= hi`` (the
    boundary passes the gradient); a tensor ``lo`` gets ``g`` where ``x < lo``
    (and ``lo < hi``), a tensor ``hi`` where ``x > hi`` (or ``hi < lo``, where
    the result is ``hi``). NaN in ``x`` propagates and gets no gradient.
    """

    schema = OpSchema("clamp", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, lo, hi):
        if lo is None:
            return be.minimum(x, hi)
        if hi is None:
            return be.maximum(x, lo)
        return be.minimum(be.maximum(x, lo), hi)

    def backward(self, g):
        from .compare import ge, gt, le, logical_and, logical_or, lt
        from .indexing import where

        x, lo, hi = self.input(0), self.input(1), self.input(2)
        (sx, slo, shi), (ex, elo, ehi) = self.shapes, self.next_edges
        gx = glo = ghi = None
        if ex is not None:
            keep = ge(x, lo) if hi is None else le(x, hi) if lo is None else logical_and(ge(x, lo), le(x, hi))
            gx = sum_to_size(where(keep, g, 0.0), sx)
        if elo is not None:
            below = lt(x, lo) if hi is None else logical_and(lt(x, lo), lt(lo, hi))
            glo = sum_to_size(where(below, g, 0.0), slo)
        if ehi is not None:
            above = gt(x, hi) if lo is None else logical_or(gt(x, hi), lt(hi, lo))
            ghi = sum_to_size(where(above, g, 0.0), shi)
        return gx, glo, ghi


@declare(Clamp, aliases=("clip",), inplace=True)
def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - mirrors torch.clamp
    """Clamp every element into ``[min, max]``; either bound may be None, a number or a tensor (broadcast).

    If ``min > max`` the result is ``max`` (PyTorch). NaN stays NaN. The
    gradient passes at the boundary (``x == min`` or ``x == max``), as in
    PyTorch; ``hardtanh`` differs there. Alias ``clip``.

    >>> import pylucid
    >>> pylucid.clamp(pylucid.tensor([-2.0, 0.5, 3.0]), min=-1.0, max=1.0)
    tensor([-1.0000,  0.5000,  1.0000])
    >>> pylucid.clamp(pylucid.tensor([1, 5]), max=3)
    tensor([1, 3])
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"clamp: expected a Tensor input, got {type(input).__name__}")
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    lo = None if min is None else operand("clamp", min)
    hi = None if max is None else operand("clamp", max)
    try:
        return apply(Clamp, (input, lo, hi))
    except ValueError as exc:
        if "broadcast" in str(exc):
            shapes = [tuple(getattr(t, "shape", ())) for t in (input, lo, hi) if t is not None]
            raise ShapeMismatch(f"clamp: shapes {shapes} cannot be broadcast together") from None
        raise


@declare(inplace=True)
def clamp_min(input: Tensor, min) -> Tensor:  # noqa: A002
    """``clamp(input, min=min)``.

    >>> import pylucid
    >>> pylucid.clamp_min(pylucid.tensor([-1.0, 2.0]), 0.0)
    tensor([0., 2.])
    """
    return clamp(input, min=min)


@declare(inplace=True)
def clamp_max(input: Tensor, max) -> Tensor:  # noqa: A002
    """``clamp(input, max=max)``.

    >>> import pylucid
    >>> pylucid.clamp_max(pylucid.tensor([-1.0, 2.0]), 0.0)
    tensor([-1.,  0.])
    """
    return clamp(input, max=max)


# ---------------------------------------------------------------- nan_to_num
class NanToNum(Op):
    """Replace NaN/+inf/-inf by finite values; ``dx = g`` where ``x`` is finite, else 0 (PyTorch)."""

    schema = OpSchema("nan_to_num", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, x, nan=0.0, posinf=None, neginf=None):
        if x.dtype.kind == "c":  # the real and imaginary parts separately (PyTorch)
            return (NanToNum.forward(be, x.real, nan, posinf, neginf)
                    + 1j * NanToNum.forward(be, x.imag, nan, posinf, neginf)).astype(x.dtype)
        if not is_float_dtype(x.dtype):
            return x.copy()
        info = be.xp.finfo(x.dtype) if x.dtype.itemsize >= 4 or x.dtype.name == "float16" else None
        hi = posinf if posinf is not None else (info.max if info is not None else _bf16_max(x))
        lo = neginf if neginf is not None else (info.min if info is not None else -_bf16_max(x))
        t = x.dtype.type
        out = be.where(be.isnan(x), t(nan), x)
        out = be.where(out == t(float("inf")), t(hi), out)
        return be.where(out == t(float("-inf")), t(lo), out)

    def backward(self, g):
        from .compare import isfinite
        from .indexing import where

        return where(isfinite(self.input(0)), g, 0.0)


def _bf16_max(x):
    import ml_dtypes

    return float(ml_dtypes.finfo(x.dtype).max)


@declare(NanToNum, inplace=True)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """Replace NaN by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (default: the dtype's largest/lowest).

    >>> import pylucid
    >>> pylucid.nan_to_num(pylucid.tensor([float("nan"), 1.5, float("-inf")]), neginf=-9.0)
    tensor([ 0.0000,  1.5000, -9.0000])
    """
    for k, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not isinstance(v, (int, float)):
            raise TypeError(f"nan_to_num: {k} must be a number or None, got {type(v).__name__}")
    return _unary(NanToNum, input, {"nan": nan, "posinf": posinf, "neginf": neginf})


# ---------------------------------------------------------------- binary ops
def _minmax_backward(self, g, kind):
    # PyTorch: a tie gives each side g/2; the side that lost gets 0. With a NaN
    # neither comparison holds, so both sides get the full gradient.
    from .compare import eq, gt, lt
    from .indexing import where

    a, b = _saved_as_tensors(self, g)
    a_loses, b_loses = (lt, gt) if kind == "maximum" else (gt, lt)
    shared = where(eq(a, b), mul(g, 0.5), g)
    return _grads2(self, lambda: where(a_loses(a, b), 0.0, shared), lambda: where(b_loses(a, b), 0.0, shared))


def _fminmax_backward(self, g, kind):
    from .compare import ge, isnan, le, logical_or
    from .indexing import where

    a, b = _saved_as_tensors(self, g)
    a_wins = logical_or((ge if kind == "fmax" else le)(a, b), isnan(b))
    return _grads2(self, lambda: where(a_wins, g, 0.0), lambda: where(a_wins, 0.0, g))


class Maximum(Op):
    """``max(a, b)`` element-wise, NaN-propagating; ties split the gradient equally (PyTorch)."""

    schema = OpSchema("maximum", amp_policy=PROMOTE, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return _nan_quiet(be, be.maximum, a, b)

    def backward(self, g):
        return _minmax_backward(self, g, "maximum")


@declare(Maximum)
def maximum(input, other) -> Tensor:
    """Element-wise maximum, broadcasting; NaN propagates. Ties split the gradient equally.

    >>> import pylucid
    >>> pylucid.maximum(pylucid.tensor([1.0, 5.0]), pylucid.tensor([3.0, 2.0]))
    tensor([3., 5.])
    """
    return _binary(Maximum, input, other, "maximum")


class Minimum(Op):
    """``min(a, b)`` element-wise, NaN-propagating; ties split the gradient equally (PyTorch)."""

    schema = OpSchema("minimum", amp_policy=PROMOTE, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return _nan_quiet(be, be.minimum, a, b)

    def backward(self, g):
        return _minmax_backward(self, g, "minimum")


@declare(Minimum)
def minimum(input, other) -> Tensor:
    """Element-wise minimum, broadcasting; NaN propagates. Ties split the gradient equally.

    >>> import pylucid
    >>> pylucid.minimum(pylucid.tensor([1.0, 5.0]), pylucid.tensor([3.0, 2.0]))
    tensor([1., 2.])
    """
    return _binary(Minimum, input, other, "minimum")


class Fmax(Op):
    """``max(a, b)`` ignoring NaN (NaN only if both are); ties give the whole gradient to ``a`` (PyTorch)."""

    schema = OpSchema("fmax", amp_policy=PROMOTE, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return _nan_quiet(be, be.fmax, a, b)

    def backward(self, g):
        return _fminmax_backward(self, g, "fmax")


@declare(Fmax)
def fmax(input, other) -> Tensor:
    """Element-wise maximum that ignores NaN (NumPy's ``fmax``).

    >>> import pylucid
    >>> pylucid.fmax(pylucid.tensor([float("nan"), 1.0]), pylucid.tensor([2.0, float("nan")]))
    tensor([2., 1.])
    """
    return _binary(Fmax, input, other, "fmax")


class Fmin(Op):
    """``min(a, b)`` ignoring NaN; ties give the whole gradient to ``a`` (PyTorch)."""

    schema = OpSchema("fmin", amp_policy=PROMOTE, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return _nan_quiet(be, be.fmin, a, b)

    def backward(self, g):
        return _fminmax_backward(self, g, "fmin")


@declare(Fmin)
def fmin(input, other) -> Tensor:
    """Element-wise minimum that ignores NaN (NumPy's ``fmin``).

    >>> import pylucid
    >>> pylucid.fmin(pylucid.tensor([float("nan"), 1.0]), pylucid.tensor([2.0, 0.5]))
    tensor([2.0000, 0.5000])
    """
    return _binary(Fmin, input, other, "fmin")


class Fmod(Op):
    """C ``fmod``: ``a - trunc(a/b) b`` (sign of the dividend); ``da = g``, ``db = -g trunc(a/b)``."""

    schema = OpSchema("fmod", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        _check_int_zero_division(be, be.asarray(b), "fmod")
        with be.errstate():
            return be.fmod(a, b)

    def backward(self, g):
        a, b = _saved_as_tensors(self, g)
        return _grads2(self, lambda: g, lambda: neg(mul(g, trunc_divide(a, b))))


@declare(Fmod, inplace=True)
def fmod(input, other) -> Tensor:
    """C-style remainder: the result has the sign of ``input`` (``remainder`` follows ``other``).

    >>> import pylucid
    >>> pylucid.fmod(pylucid.tensor([-7.0, 7.0]), 3)
    tensor([-1.,  1.])
    """
    return _binary(Fmod, input, other, "fmod")


class TruncDivide(Op):
    """``trunc(a / b)`` (``div(..., rounding_mode='trunc')``); piecewise constant, no gradient."""

    schema = OpSchema("trunc_divide", amp_policy=KEEP_INPUT, differentiable=False, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        bb = be.asarray(b)
        if bb.dtype.kind == "c" or getattr(a, "dtype", bb.dtype).kind == "c" or isinstance(a, complex):
            raise TypeError("trunc_divide: complex inputs are not supported")
        _check_int_zero_division(be, bb, "trunc_divide")
        with be.errstate():
            if is_float_dtype(getattr(a, "dtype", bb.dtype)) or is_float_dtype(bb.dtype):
                return be.trunc(a / b)
            # exact integer division rounding to zero: floor division, plus one
            # where the signs differ and the division is inexact
            q, r = be.divmod(a, b)
            return q + ((r != 0) & ((be.asarray(a) < 0) != (bb < 0)))


@declare(TruncDivide, method=False)
def trunc_divide(input, other) -> Tensor:
    """``trunc(input / other)``: integer division rounding towards zero; integer division by zero raises.

    >>> import pylucid
    >>> pylucid.trunc_divide(pylucid.tensor([7, -7]), 2)
    tensor([ 3, -3])
    """
    return _binary(TruncDivide, input, other, "trunc_divide")


class Atan2(Op):
    """``atan2(a, b)`` (angle of ``(b, a)``); ``da = g b / (a^2 + b^2)``, ``db = -g a / (a^2 + b^2)``."""

    schema = OpSchema("atan2", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return be.arctan2(a, b)

    def backward(self, g):
        a, b = _saved_as_tensors(self, g)
        r2 = add(mul(a, a), mul(b, b))
        return _grads2(self, lambda: div(mul(g, b), r2), lambda: neg(div(mul(g, a), r2)))


@declare(Atan2, aliases=("arctan2",), inplace=True)
def atan2(input, other) -> Tensor:
    """Four-quadrant arctangent of ``input / other`` in ``(-pi, pi]`` (alias ``arctan2``).

    >>> import pylucid
    >>> pylucid.atan2(pylucid.tensor([1.0, -1.0]), pylucid.tensor([0.0, -1.0]))
    tensor([ 1.5708, -2.3562])
    """
    return _binary(Atan2, input, other, "atan2")


class Hypot(Op):
    """``sqrt(a^2 + b^2)`` without overflow; saves input and output: ``da = g a / y`` (PyTorch's formula)."""

    schema = OpSchema("hypot", amp_policy=PROMOTE, saves_input=True, saves_output=True, real_valued=True,
                      family="elementwise", accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return be.hypot(a, b)

    def backward(self, g):
        (a, b), y = _saved_as_tensors(self, g), self.output()
        return _grads2(self, lambda: div(mul(g, a), y), lambda: div(mul(g, b), y))


@declare(Hypot, inplace=True)
def hypot(input, other) -> Tensor:
    """Length of the hypotenuse ``sqrt(input^2 + other^2)``, with no overflow for large values.

    >>> import pylucid
    >>> pylucid.hypot(pylucid.tensor([3.0]), pylucid.tensor([4.0])).round(decimals=4)
    tensor([5.])
    """
    return _binary(Hypot, input, other, "hypot")


class Copysign(Op):
    """``|a|`` with the sign of ``b`` (signed zeros count); ``da = g y / a`` (0 where ``a == 0``), ``db = 0``."""

    schema = OpSchema("copysign", amp_policy=PROMOTE, saves_input=True, saves_output=True, real_valued=True,
                      family="elementwise", accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        return be.copysign(a, b)

    def backward(self, g):
        from .compare import eq
        from .indexing import where

        a, y = _saved_as_tensors(self, g)[0], self.output()
        return _grads2(self, lambda: mul(g, where(eq(a, 0), 0.0, div(y, a))), lambda: _zero_grad(g))


@declare(Copysign, inplace=True)
def copysign(input, other) -> Tensor:
    """``|input|`` with the sign of ``other`` element-wise (``-0.0`` is negative).

    >>> import pylucid
    >>> pylucid.copysign(pylucid.tensor([1.0, 2.0]), pylucid.tensor([-1.0, 0.0]))
    tensor([-1.,  2.])
    """
    return _binary(Copysign, input, other, "copysign")


class Logaddexp(Op):
    """``log(e^a + e^b)`` without overflow; ``da = g / (1 + e^(b - a)) = g sigmoid(a - b)``."""

    schema = OpSchema("logaddexp", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        with be.errstate():
            return be.logaddexp(a, b)

    def backward(self, g):
        # g / (1 + e^(b - a)) written as g sigmoid(a - b): equal, and its own
        # derivative stays finite where e^(b - a) overflows
        from .activation import sigmoid

        a, b = _saved_as_tensors(self, g)
        return _grads2(self, lambda: mul(g, sigmoid(sub(a, b))), lambda: mul(g, sigmoid(sub(b, a))))


@declare(Logaddexp)
def logaddexp(input, other) -> Tensor:
    """``log(exp(input) + exp(other))``, stable for large and tiny arguments.

    >>> import pylucid
    >>> pylucid.logaddexp(pylucid.tensor([1000.0, -1000.0]), pylucid.tensor([1000.0, -1000.0])).round(decimals=2)
    tensor([1000.6900, -999.3100])
    """
    return _binary(Logaddexp, input, other, "logaddexp")


class Logaddexp2(Op):
    """``log2(2^a + 2^b)`` without overflow; ``da = g / (1 + 2^(b - a)) = g sigmoid((a - b) ln 2)``."""

    schema = OpSchema("logaddexp2", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="elementwise",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, a, b):
        with be.errstate():
            return be.logaddexp2(a, b)

    def backward(self, g):
        from .activation import sigmoid

        a, b = _saved_as_tensors(self, g)
        return _grads2(self, lambda: mul(g, sigmoid(mul(sub(a, b), _LN2))),
                       lambda: mul(g, sigmoid(mul(sub(b, a), _LN2))))


@declare(Logaddexp2)
def logaddexp2(input, other) -> Tensor:
    """``log2(2**input + 2**other)``, stable for large and tiny arguments.

    >>> import pylucid
    >>> pylucid.logaddexp2(pylucid.tensor([3.0]), pylucid.tensor([3.0])).round(decimals=4)
    tensor([4.])
    """
    return _binary(Logaddexp2, input, other, "logaddexp2")


class Lerp(Op):
    """``start + weight (end - start)``; ``dstart = g (1 - w)``, ``dend = g w``, ``dweight = g (end - start)``.

    The forward uses PyTorch's two-sided formula (``end - (end - start)(1 - w)``
    for ``w >= 0.5``), so ``lerp(a, b, 1) == b`` exactly.
    """

    schema = OpSchema("lerp", amp_policy=PROMOTE, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, start, end, weight):
        with be.errstate():  # an infinite endpoint: inf - inf is NaN, as PyTorch
            diff = end - start
            if not hasattr(weight, "dtype"):  # a weak Python scalar: keep it weak
                return start + weight * diff if -0.5 < weight < 0.5 else end - diff * (1 - weight)
            return be.where(be.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))

    def backward(self, g):
        start, end, w = _saved_as_tensors(self, g)
        s0, s1, s2 = self.shapes
        e0, e1, e2 = self.next_edges
        return (sum_to_size(mul(g, sub(1, w)), s0) if e0 is not None else None,
                sum_to_size(mul(g, w), s1) if e1 is not None else None,
                sum_to_size(mul(g, sub(end, start)), s2) if e2 is not None else None)


@declare(Lerp, inplace=True)
def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """Linear interpolation ``input + weight * (end - input)``; ``weight`` a number or a tensor (broadcast).

    >>> import pylucid
    >>> pylucid.lerp(pylucid.tensor([0.0, 10.0]), pylucid.tensor([10.0, 20.0]), 0.25)
    tensor([ 2.5000, 12.5000])
    """
    check_tensor(input, "lerp", "input")
    check_tensor(end, "lerp", "end")
    weight = operand("lerp", weight)
    _check_float("lerp", input)
    try:
        return apply(Lerp, (input, end, weight))
    except ValueError as exc:
        if "broadcast" in str(exc):
            shapes = [tuple(getattr(t, "shape", ())) for t in (input, end, weight)]
            raise ShapeMismatch(f"lerp: shapes {shapes} cannot be broadcast together") from None
        raise


def _float_power_inplace(fn, name):
    """``float_power_``: the result is double precision, so (as PyTorch) only a float64/complex128 tensor can
    receive it."""
    general = inplace_variant(fn, name)

    def method(self, exponent):
        if self._data.dtype.name not in ("float64", "complex128"):
            from ..errors import DtypeMismatch

            raise DtypeMismatch(f"float_power_: the base must be float64 or complex128 (the result type), got "
                                f"{self.dtype}; use float_power() or convert with .double()")
        return general(self, exponent)

    method.__name__ = name
    method.__doc__ = general.__doc__
    return method


@declare(inplace=_float_power_inplace)
def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` computed in float64 (complex128 for complex input), as ``torch.float_power``.

    A composite: both operands are cast to double precision, then ``pow``.

    >>> import pylucid
    >>> pylucid.float_power(pylucid.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=pylucid.float64)
    """
    from .. import dtypes as _dt

    def up(x):
        if isinstance(x, Tensor):
            return x.to(_dt.complex128 if x._data.dtype.kind == "c" else _dt.float64)
        return operand("float_power", x)

    input, exponent = up(input), up(exponent)
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power: expected at least one Tensor argument")
    if not isinstance(input, Tensor):
        from ..creation import tensor

        input = tensor(input, dtype=exponent.dtype, device=exponent.device)
    return pow(input, exponent)


# ---------------------------------------------------------------- angles, exponents and signs
_DEG = 0.017453292519943295  # pi / 180


@declare(inplace=True)
def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians: ``input * pi / 180`` (composite of ``mul``); integers become float.

    >>> import pylucid
    >>> pylucid.deg2rad(pylucid.tensor([180.0, -90.0])).round(decimals=4)
    tensor([ 3.1416, -1.5708])
    """
    check_tensor(input, "deg2rad")
    if input._data.dtype.kind == "c":
        raise DtypeMismatch(f"deg2rad: input has dtype {input.dtype.name} (complex); deg2rad accepts float, int, bool "
                            "tensors")
    return mul(input, _DEG)


@declare(inplace=True)
def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees: ``input * 180 / pi`` (composite of ``mul``); integers become float.

    >>> import pylucid
    >>> pylucid.rad2deg(pylucid.tensor([0.5, -2.0])).round(decimals=3)
    tensor([  28.6480, -114.5920])
    """
    check_tensor(input, "rad2deg")
    if input._data.dtype.kind == "c":
        raise DtypeMismatch(f"rad2deg: input has dtype {input.dtype.name} (complex); rad2deg accepts float, int, bool "
                            "tensors")
    return mul(input, 57.29577951308232)


@declare(method=False)
def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input`` (``sub`` with the operands swapped), broadcasting.

    >>> import pylucid
    >>> pylucid.rsub(pylucid.tensor([1.0, 2.0]), 10.0, alpha=2)
    tensor([8., 6.])
    """
    check_tensor(input, "rsub")
    return sub(other, input, alpha=alpha)


@declare(inplace=True)
def ldexp(input, other) -> Tensor:
    """``input * 2 ** other`` (composite of ``mul`` and ``exp2``): the result is floating.

    ``d/dinput = 2^other``, ``d/dother = input 2^other ln 2`` (PyTorch's formulas).

    >>> import pylucid
    >>> pylucid.ldexp(pylucid.tensor([1.0, 3.0]), pylucid.tensor([3, -1]))
    tensor([8.0000, 1.5000])
    """
    check_tensor(input, "ldexp")
    check_tensor(other, "ldexp", "other")
    with input._device.backend.errstate():  # inf * 0 (an infinite input, a very negative exponent) is NaN
        out = mul(input, exp2(other))
    if input.dtype.is_floating_point and other._data.dtype.kind in "biu" and out.dtype is not input.dtype:
        # an integer exponent keeps a half-precision input's dtype, as PyTorch (exp2 of it is float32)
        out = out.to(input.dtype)
    return out


_FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


class Frexp(Op):
    """``x = mantissa * 2^exponent`` with ``0.5 <= |mantissa| < 1`` (0 for 0); the exponent is int32.

    ``dx = g_mantissa / 2^exponent`` (the exponent is piecewise constant). Saves its outputs.
    """

    schema = OpSchema("frexp", amp_policy=KEEP_INPUT, saves_output=True, family="elementwise")
    n_outputs = 2
    differentiable_outputs = (True, False)

    @staticmethod
    def forward(be, x):
        if x.dtype == _BF16_NP:  # no bfloat16 loop: exact through float32
            m, e = be.frexp(x.astype("float32"))
            return m.astype(x.dtype), e.astype("int32")
        m, e = be.frexp(x)
        return m, e.astype("int32")

    def backward(self, g, _g_exponent=None):
        e = self.output(1)
        return div(g, exp2(e.to(g.dtype)))


@declare(Frexp)
def frexp(input: Tensor):
    """Split a floating tensor into ``(mantissa, exponent)`` (a named tuple), ``input = mantissa * 2**exponent``,
    ``0.5 <= |mantissa| < 1``; the exponent is int32.

    >>> import pylucid
    >>> pylucid.frexp(pylucid.tensor([8.0, -0.75, 0.0]))
    frexp(mantissa=tensor([ 0.5000, -0.7500,  0.0000]), exponent=tensor([4, 0, 0], dtype=pylucid.int32))
    """
    check_tensor(input, "frexp")
    if not is_float_dtype(input._data.dtype):
        raise TypeError(f"frexp: expected a floating point tensor, got {input.dtype}")
    return _FrexpResult(*apply(Frexp, (input,)))


class Signbit(Op):
    """True where the sign bit is set (``-0.0`` and negative NaN included); bool, not differentiable."""

    schema = OpSchema("signbit", amp_policy=KEEP_INPUT, differentiable=False, family="elementwise")

    @staticmethod
    def forward(be, x):
        if x.dtype == bool:
            return be.zeros(x.shape, dtype=bool)
        if x.dtype.kind in "iu":
            return x < 0
        if x.dtype == _BF16_NP:
            x = x.astype("float32")
        return be.signbit(x)


@declare(Signbit)
def signbit(input: Tensor) -> Tensor:
    """Whether each element's sign bit is set: ``signbit(-0.0)`` is True (unlike ``input < 0``).

    >>> import pylucid
    >>> pylucid.signbit(pylucid.tensor([-1.0, -0.0, 0.0, 2.0]))
    tensor([ True,  True, False, False])
    """
    check_tensor(input, "signbit")
    if input._data.dtype.kind == "c":
        raise TypeError("signbit: complex tensors are not supported")
    return apply(Signbit, (input,))


class Heaviside(Op):
    """Step function: 0 for ``x < 0`` (and NaN), ``values`` where ``x == 0``, 1 for ``x > 0``; not differentiable
    (PyTorch has no derivative for it)."""

    schema = OpSchema("heaviside", amp_policy=KEEP_INPUT, differentiable=False, family="elementwise")

    @staticmethod
    def forward(be, x, values):
        dt = be.result_type(x, values)
        with be.errstate():  # bfloat16 comparisons with NaN warn in ml_dtypes
            return be.where(x == 0, values, x > 0).astype(dt)


@declare(Heaviside, inplace=True)
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """Heaviside step of ``input``, taking ``values`` (broadcast) where ``input == 0``.

    Both must be tensors of the same dtype (as PyTorch).

    >>> import pylucid
    >>> pylucid.heaviside(pylucid.tensor([-1.5, 0.0, 2.0]), pylucid.tensor([0.5]))
    tensor([0.0000, 0.5000, 1.0000])
    """
    check_tensor(input, "heaviside")
    check_tensor(values, "heaviside", "values")
    if input.dtype != values.dtype:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"heaviside: input and values must have the same dtype, got {input.dtype} and "
                            f"{values.dtype}")
    if input._data.dtype.kind == "c":
        raise TypeError("heaviside: complex tensors are not supported")
    return _binary(Heaviside, input, values, "heaviside")


def _integer_binary(name, be_name, doc):
    def forward(be, a, b):
        return getattr(be, be_name)(a, b)

    op_cls = type(camel(name), (Op,), {"__doc__": doc, "forward": staticmethod(forward),
                                       "schema": OpSchema(name, amp_policy=KEEP_INPUT, differentiable=False,
                                                          family="elementwise")})

    def fn(input, other):
        check_tensor(input, name)
        check_tensor(other, name, "other")
        for x in (input, other):
            if x._data.dtype.kind not in "iu":
                raise TypeError(f"{name}: expected integer tensors, got {x.dtype}")
        return _binary(op_cls, input, other, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return op_cls, declare(op_cls, inplace=True)(fn)


Gcd, gcd = _integer_binary("gcd", "gcd", """Greatest common divisor of integer tensors (``gcd(0, 0) = 0``).

    >>> import pylucid
    >>> pylucid.gcd(pylucid.tensor([12, -9, 0]), pylucid.tensor([18, 6, 0]))
    tensor([6, 3, 0])
    """)
Lcm, lcm = _integer_binary("lcm", "lcm", """Least common multiple of integer tensors (non-negative; 0 if either is 0).

    >>> import pylucid
    >>> pylucid.lcm(pylucid.tensor([4, -4, 0]), pylucid.tensor([6, 6, 5]))
    tensor([12, 12,  0])
    """)


class Nextafter(Op):
    """The next representable floating value after ``a`` towards ``b``; ``da = g`` where ``a != b`` (0 where the
    result is ``b`` itself), ``db = 0``: PyTorch's gradients (the step is below any finite difference)."""

    schema = OpSchema("nextafter", amp_policy=KEEP_INPUT, saves_input=True, family="elementwise")

    @staticmethod
    def forward(be, a, b):
        if getattr(a, "dtype", None) == _BF16_NP:
            raise TypeError("nextafter: bfloat16 is not supported")
        return be.nextafter(a, b)

    def backward(self, g):
        from .compare import eq
        from .indexing import where

        a, b = _saved_as_tensors(self, g)
        return _grads2(self, lambda: where(eq(a, b), 0.0, g), lambda: _zero_grad(g))


@declare(Nextafter, inplace=True)
def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The floating value next to ``input`` in the direction of ``other`` (element-wise, broadcasting).

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 1.0], dtype=pylucid.float64)
    >>> (pylucid.nextafter(x, pylucid.tensor([2.0, 0.0], dtype=pylucid.float64)) - x).tolist()
    [2.220446049250313e-16, -1.1102230246251565e-16]
    """
    check_tensor(input, "nextafter")
    check_tensor(other, "nextafter", "other")
    for x in (input, other):
        if not is_float_dtype(x._data.dtype):
            raise TypeError(f"nextafter: expected floating point tensors, got {x.dtype}")
    if input.dtype != other.dtype:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"nextafter: input and other must have the same dtype, got {input.dtype} and "
                            f"{other.dtype}")
    return _binary(Nextafter, input, other, "nextafter")


# ---------------------------------------------------------------- addbmm, addr
@declare(inplace=True)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]`` (composite of ``bmm`` and ``sum``); with ``beta=0``
    ``input`` is ignored.

    >>> import pylucid
    >>> b = pylucid.ones(3, 2, 2)
    >>> pylucid.addbmm(pylucid.zeros(2, 2), b, b, alpha=0.5)
    tensor([[3., 3.],
            [3., 3.]])
    """
    from .linalg import _scaled_sum, bmm
    from .reduction import sum as _sum

    check_tensor(input, "addbmm")
    check_tensor(batch1, "addbmm", "batch1")
    check_tensor(batch2, "addbmm", "batch2")
    ops = (input, batch1, batch2)
    if all(t.dtype == _dt_bool for t in ops):
        raise TypeError("addbmm: bool tensors are not supported (the batch sum is an integer), as in PyTorch")
    prod = bmm(batch1, batch2)
    # an integer batch sum keeps the batches' dtype (PyTorch's addbmm; sum() would widen int32 to int64)
    prod = _sum(prod, 0, dtype=prod.dtype if prod._data.dtype.kind in "iu" else None)
    _check_addlike("addbmm", input, prod, beta, alpha)
    no_batches = batch1.ndim == 3 and batch1.shape[0] == 0
    if no_batches and input.dtype == _dt_bool:
        raise TypeError("addbmm: a bool input with no batches is not supported (its sum is int64), as PyTorch")
    out = _scaled_sum("addbmm", input, prod, _scalar_for(beta, ops, "beta"), _scalar_for(alpha, ops, "alpha"))
    if no_batches and out.dtype is not input.dtype:  # no batches: PyTorch's result has input's dtype
        return out.to(input.dtype)
    return _beta0_dtype(input, out, beta)


def _check_addlike(name, input, prod, beta, alpha):
    """``beta``/``alpha`` are numbers and ``input`` expands to the product's shape (also when ``beta == 0`` ignores
    its values), as PyTorch checks."""
    for n, v in (("beta", beta), ("alpha", alpha)):
        if not isinstance(v, (int, float, complex)):
            raise TypeError(f"{name}: {n} must be a number, got {type(v).__name__} {v!r}")
    shape, ishape = tuple(prod.shape), tuple(input.shape)
    if len(ishape) > len(shape) or any(a != 1 and a != b for a, b in zip(ishape[::-1], shape[::-1])):
        raise ShapeMismatch(f"{name}: input of shape {ishape} does not expand to the product's shape {shape}")


def _beta0_dtype(input, out, beta):
    """With ``beta == 0`` the values of ``input`` are ignored but its dtype still takes part in the promotion."""
    if beta == 0:
        from ..dtypes import promote_types

        dt = promote_types(input.dtype, out.dtype)
        if dt is not out.dtype:
            return out.to(dt)
    return out


@declare(inplace=True)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (composite of ``outer``); with ``beta=0`` ``input`` is ignored.

    >>> import pylucid
    >>> pylucid.addr(pylucid.ones(2, 3), pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 0.0, -1.0]))
    tensor([[ 2.,  1.,  0.],
            [ 3.,  1., -1.]])
    """
    from .linalg import _scaled_sum, outer

    check_tensor(input, "addr")
    check_tensor(vec1, "addr", "vec1")
    check_tensor(vec2, "addr", "vec2")
    if vec1.ndim != 1 or vec2.ndim != 1:
        from ..errors import ShapeMismatch

        raise ShapeMismatch(f"addr: vec1 and vec2 must be 1-d, got shapes {tuple(vec1.shape)} and "
                            f"{tuple(vec2.shape)}")
    ops = (input, vec1, vec2)
    _check_addlike("addr", input, _Shape((vec1.shape[0], vec2.shape[0])), beta, alpha)
    if all(isinstance(t, Tensor) and t._data.dtype.kind in "iub" for t in ops) and any(
            isinstance(v, float) for v in (beta, alpha)):
        raise TypeError(f"addr: for integer tensors beta and alpha must be ints, got beta={beta!r}, alpha={alpha!r}")
    if all(isinstance(t, Tensor) and t.dtype == _dt_bool for t in ops):  # bool: PyTorch's logical form
        from .compare import logical_and, logical_or

        return logical_or(logical_and(input, bool(beta)), logical_and(outer(vec1, vec2), bool(alpha)))
    return _beta0_dtype(input, _scaled_sum("addr", input, outer(vec1, vec2), _scalar_for(beta, ops, "beta"),
                                           _scalar_for(alpha, ops, "alpha")), beta)


class _Shape:
    """A shape standing in for a product not computed yet (``_check_addlike`` reads ``.shape`` only)."""

    def __init__(self, shape):
        self.shape = shape
