"""Comparisons and logical/bitwise ops. Results are bool; none has a gradient."""

from __future__ import annotations

from .._tensor import Tensor
from ._op import Op, apply, operand
from .elementwise import _binary
from .schema import KEEP_INPUT, OpSchema


def _cmp_op(name, fn_name, doc):
    class _Cmp(Op):
        schema = OpSchema(name, amp_policy=KEEP_INPUT, differentiable=False, family="compare")

        @staticmethod
        def forward(be, a, b, _f=fn_name):
            return getattr(be, _f)(a, b)

    _Cmp.__name__ = _Cmp.__qualname__ = "".join(p.capitalize() for p in name.split("_"))
    _Cmp.__doc__ = doc
    return _Cmp


Eq = _cmp_op("eq", "equal", "``a == b`` element-wise, broadcasting.")
Ne = _cmp_op("ne", "not_equal", "``a != b`` element-wise, broadcasting.")
Lt = _cmp_op("lt", "less", "``a < b`` element-wise, broadcasting.")
Le = _cmp_op("le", "less_equal", "``a <= b`` element-wise, broadcasting.")
Gt = _cmp_op("gt", "greater", "``a > b`` element-wise, broadcasting.")
Ge = _cmp_op("ge", "greater_equal", "``a >= b`` element-wise, broadcasting.")
LogicalAnd = _cmp_op("logical_and", "logical_and", "``a and b`` element-wise (non-zero is true).")
LogicalOr = _cmp_op("logical_or", "logical_or", "``a or b`` element-wise (non-zero is true).")
LogicalXor = _cmp_op("logical_xor", "logical_xor", "``a xor b`` element-wise (non-zero is true).")


def eq(input, other) -> Tensor:
    """``input == other`` element-wise (bool).

    >>> import pylucid
    >>> pylucid.eq(pylucid.tensor([1, 2]), 2)
    tensor([False,  True])
    """
    return _binary(Eq, input, other, "eq")


def ne(input, other) -> Tensor:
    """``input != other`` element-wise (bool)."""
    return _binary(Ne, input, other, "ne")


def lt(input, other) -> Tensor:
    """``input < other`` element-wise (bool)."""
    return _binary(Lt, input, other, "lt")


def le(input, other) -> Tensor:
    """``input <= other`` element-wise (bool)."""
    return _binary(Le, input, other, "le")


def gt(input, other) -> Tensor:
    """``input > other`` element-wise (bool)."""
    return _binary(Gt, input, other, "gt")


def ge(input, other) -> Tensor:
    """``input >= other`` element-wise (bool)."""
    return _binary(Ge, input, other, "ge")


def logical_and(input, other) -> Tensor:
    """Element-wise logical and (bool result)."""
    return _binary(LogicalAnd, input, other, "logical_and")


def logical_or(input, other) -> Tensor:
    """Element-wise logical or (bool result)."""
    return _binary(LogicalOr, input, other, "logical_or")


def logical_xor(input, other) -> Tensor:
    """Element-wise logical xor (bool result)."""
    return _binary(LogicalXor, input, other, "logical_xor")


class LogicalNot(Op):
    """``not x`` element-wise (bool result)."""

    schema = OpSchema("logical_not", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, x):
        return be.logical_not(x)


def logical_not(input: Tensor) -> Tensor:
    """Element-wise logical not (bool result)."""
    return apply(LogicalNot, (input,))


def _bitwise(name, fn_name, doc):
    class _Bit(Op):
        schema = OpSchema(name, amp_policy=KEEP_INPUT, differentiable=False, family="compare")

        @staticmethod
        def forward(be, a, b, _f=fn_name, _n=name):
            for x in (a, b):
                k = getattr(x, "dtype", None)
                if (k is not None and k.kind not in "biu") or isinstance(x, float):
                    raise TypeError(f"{_n}: only integer and bool tensors are accepted, got {k or type(x).__name__}")
            return getattr(be, _f)(a, b)

    _Bit.__name__ = _Bit.__qualname__ = "".join(p.capitalize() for p in name.split("_"))
    _Bit.__doc__ = doc
    return _Bit


BitwiseAnd = _bitwise("bitwise_and", "bitwise_and", "``a & b`` on integer/bool tensors.")
BitwiseOr = _bitwise("bitwise_or", "bitwise_or", "``a | b`` on integer/bool tensors.")
BitwiseXor = _bitwise("bitwise_xor", "bitwise_xor", "``a ^ b`` on integer/bool tensors.")


def bitwise_and(input, other) -> Tensor:
    """``input & other`` for integer/bool tensors."""
    return _binary(BitwiseAnd, input, other, "bitwise_and")


def bitwise_or(input, other) -> Tensor:
    """``input | other`` for integer/bool tensors."""
    return _binary(BitwiseOr, input, other, "bitwise_or")


def bitwise_xor(input, other) -> Tensor:
    """``input ^ other`` for integer/bool tensors."""
    return _binary(BitwiseXor, input, other, "bitwise_xor")


class BitwiseNot(Op):
    """``~x``: bit inversion for integers, logical not for bool."""

    schema = OpSchema("bitwise_not", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, x):
        if x.dtype.kind not in "biu":
            raise TypeError(f"bitwise_not: only integer and bool tensors are accepted, got {x.dtype}")
        return be.invert(x)


def bitwise_not(input: Tensor) -> Tensor:
    """``~input`` for integer/bool tensors."""
    return apply(BitwiseNot, (input,))


def _install():
    T = Tensor
    for f in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not, bitwise_and, bitwise_or,
              bitwise_xor, bitwise_not):
        setattr(T, f.__name__, f)
    T.__eq__ = eq
    T.__ne__ = ne
    T.__lt__ = lt
    T.__le__ = le
    T.__gt__ = gt
    T.__ge__ = ge
    T.__and__ = bitwise_and
    T.__rand__ = lambda s, o: bitwise_and(o, s)
    T.__or__ = bitwise_or
    T.__ror__ = lambda s, o: bitwise_or(o, s)
    T.__xor__ = bitwise_xor
    T.__rxor__ = lambda s, o: bitwise_xor(o, s)
    T.__invert__ = bitwise_not
    T.__hash__ = object.__hash__


_install()
__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"]
_ = operand
