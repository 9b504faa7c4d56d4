"""Comparisons and logical/bitwise ops. Results are bool; none has a gradient."""

from __future__ import annotations

from .._tensor import Tensor
from ._op import Op, apply, operand
from .elementwise import _binary, _is_float
from .schema import KEEP_INPUT, OpSchema


def _make_op(name, doc, forward):
    """A non-differentiable compare-family op class named after ``name`` (``logical_and`` -> ``LogicalAnd``)."""

    class _Op(Op):
        schema = OpSchema(name, amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    _Op.forward = staticmethod(forward)
    _Op.__name__ = _Op.__qualname__ = "".join(p.capitalize() for p in name.split("_"))
    _Op.__doc__ = doc
    return _Op


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _binary_fn(op_cls, doc):
    """The public function of a binary op: ``fn(input, other)``, broadcasting, either may be a Python number."""
    name = op_cls.schema.name

    def fn(input, other) -> Tensor:
        return _binary(op_cls, input, other, name)

    return _named(fn, name, doc)


# ---------------------------------------------------------------- comparisons and logical ops
def _cmp_op(name, fn_name, doc):
    return _make_op(name, doc, lambda be, a, b: getattr(be, fn_name)(a, b))


Eq = _cmp_op("eq", "equal", "``a == b`` element-wise, broadcasting.")
Ne = _cmp_op("ne", "not_equal", "``a != b`` element-wise, broadcasting.")
Lt = _cmp_op("lt", "less", "``a < b`` element-wise, broadcasting.")
Le = _cmp_op("le", "less_equal", "``a <= b`` element-wise, broadcasting.")
Gt = _cmp_op("gt", "greater", "``a > b`` element-wise, broadcasting.")
Ge = _cmp_op("ge", "greater_equal", "``a >= b`` element-wise, broadcasting.")
LogicalAnd = _cmp_op("logical_and", "logical_and", "``a and b`` element-wise (non-zero is true).")
LogicalOr = _cmp_op("logical_or", "logical_or", "``a or b`` element-wise (non-zero is true).")
LogicalXor = _cmp_op("logical_xor", "logical_xor", "``a xor b`` element-wise (non-zero is true).")

eq = _binary_fn(Eq, """``input == other`` element-wise (bool).

    >>> import pylucid
    >>> pylucid.eq(pylucid.tensor([1, 2]), 2)
    tensor([False,  True])
    """)
ne = _binary_fn(Ne, """``input != other`` element-wise (bool).""")
lt = _binary_fn(Lt, """``input < other`` element-wise (bool).""")
le = _binary_fn(Le, """``input <= other`` element-wise (bool).""")
gt = _binary_fn(Gt, """``input > other`` element-wise (bool).""")
ge = _binary_fn(Ge, """``input >= other`` element-wise (bool).""")
logical_and = _binary_fn(LogicalAnd, """Element-wise logical and (bool result).""")
logical_or = _binary_fn(LogicalOr, """Element-wise logical or (bool result).""")
logical_xor = _binary_fn(LogicalXor, """Element-wise logical xor (bool result).""")


class LogicalNot(Op):
    """``not x`` element-wise (bool result)."""

    schema = OpSchema("logical_not", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, x):
        return be.logical_not(x)


def logical_not(input: Tensor) -> Tensor:
    """Element-wise logical not (bool result)."""
    return apply(LogicalNot, (input,))


# ---------------------------------------------------------------- bitwise ops and shifts
def _int_op(name, fn_name, kinds, doc):
    """An op on integer tensors (``kinds``: the accepted dtype kinds, ``"biu"`` with bool) calling ``be.<fn_name>``."""
    refused = (float,) if "b" in kinds else (float, bool)
    accepted = "integer and bool" if "b" in kinds else "integer"

    def forward(be, a, b):
        for x in (a, b):
            k = getattr(x, "dtype", None)
            if (k is not None and k.kind not in kinds) or isinstance(x, refused):
                raise TypeError(f"{name}: only {accepted} tensors are accepted, got {k or type(x).__name__}")
        return getattr(be, fn_name)(a, b)

    return _make_op(name, doc, forward)


BitwiseAnd = _int_op("bitwise_and", "bitwise_and", "biu", "``a & b`` on integer/bool tensors.")
BitwiseOr = _int_op("bitwise_or", "bitwise_or", "biu", "``a | b`` on integer/bool tensors.")
BitwiseXor = _int_op("bitwise_xor", "bitwise_xor", "biu", "``a ^ b`` on integer/bool tensors.")
BitwiseLeftShift = _int_op("bitwise_left_shift", "left_shift", "iu",
                           "``a << b`` on integer tensors (bits shifted out are lost, as in C/PyTorch).")
BitwiseRightShift = _int_op("bitwise_right_shift", "right_shift", "iu",
                            "``a >> b`` on integer tensors (arithmetic shift: the sign is kept).")

bitwise_and = _binary_fn(BitwiseAnd, """``input & other`` for integer/bool tensors.""")
bitwise_or = _binary_fn(BitwiseOr, """``input | other`` for integer/bool tensors.""")
bitwise_xor = _binary_fn(BitwiseXor, """``input ^ other`` for integer/bool tensors.""")
bitwise_left_shift = _binary_fn(BitwiseLeftShift, """``input << other`` for integer tensors.

    >>> import pylucid
    >>> pylucid.bitwise_left_shift(pylucid.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """)
bitwise_right_shift = _binary_fn(BitwiseRightShift, """``input >> other`` for integer tensors (arithmetic:
    ``-8 >> 1 == -4``).

    >>> import pylucid
    >>> pylucid.bitwise_right_shift(pylucid.tensor([16, -8]), 1)
    tensor([ 8, -4])
    """)


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


# ---------------------------------------------------------------- floating-point classification
def _classify_op(name, doc, fn):
    def forward(be, x):
        if not (_is_float(x.dtype) or x.dtype.kind == "c"):
            # integers and bools are always finite, never NaN/inf
            return be.full(x.shape, name == "isfinite", dtype=bool)
        return fn(be, x)

    return _make_op(name, doc, forward)


IsNan = _classify_op("isnan", "``x != x`` (bool).", lambda be, x: be.isnan(x))
IsInf = _classify_op("isinf", "``|x| == inf`` (bool).", lambda be, x: be.isinf(x))
IsFinite = _classify_op("isfinite", "neither NaN nor +-inf (bool).", lambda be, x: be.isfinite(x))
IsPosInf = _classify_op("isposinf", "``x == +inf`` (bool).", lambda be, x: x == x.dtype.type("inf"))
IsNegInf = _classify_op("isneginf", "``x == -inf`` (bool).", lambda be, x: x == x.dtype.type("-inf"))


def _classify_fn(op_cls, doc):
    """The public function of a classification op: ``fn(input)``, a Tensor only."""
    name = op_cls.schema.name

    def fn(input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected a Tensor, got {type(input).__name__}")
        return apply(op_cls, (input,))

    return _named(fn, name, doc)


isnan = _classify_fn(IsNan, """True where ``input`` is NaN.

    >>> import pylucid
    >>> pylucid.isnan(pylucid.tensor([1.0, float("nan")]))
    tensor([False,  True])
    """)
isinf = _classify_fn(IsInf, """True where ``input`` is +inf or -inf.

    >>> import pylucid
    >>> pylucid.isinf(pylucid.tensor([1.0, float("-inf")]))
    tensor([False,  True])
    """)
isfinite = _classify_fn(IsFinite, """True where ``input`` is neither NaN nor infinite (always True for integers).

    >>> import pylucid
    >>> pylucid.isfinite(pylucid.tensor([1.0, float("inf"), float("nan")]))
    tensor([ True, False, False])
    """)
isposinf = _classify_fn(IsPosInf, """True where ``input`` is +inf.

    >>> import pylucid
    >>> pylucid.isposinf(pylucid.tensor([float("inf"), float("-inf")]))
    tensor([ True, False])
    """)
isneginf = _classify_fn(IsNegInf, """True where ``input`` is -inf.

    >>> import pylucid
    >>> pylucid.isneginf(pylucid.tensor([float("inf"), float("-inf")]))
    tensor([False,  True])
    """)


# ---------------------------------------------------------------- closeness
class IsClose(Op):
    """``|a - b| <= atol + rtol |b|`` (infinities equal themselves; NaN equal only with ``equal_nan``)."""

    schema = OpSchema("isclose", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
        a, b = be.asarray(a), be.asarray(b)
        if a.dtype.itemsize < 4 and _is_float(a.dtype):  # no half-precision isclose kernel (bfloat16)
            a, b = a.astype("float32"), b.astype("float32")
        return be.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Element-wise ``|input - other| <= atol + rtol * |other|`` (bool), broadcasting.

    >>> import pylucid
    >>> pylucid.isclose(pylucid.tensor([1.0, 1.1, float("nan")]), pylucid.tensor([1.0 + 1e-7, 1.0, float("nan")]))
    tensor([ True, False, False])
    """
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    a, b = operand("isclose", input), operand("isclose", other)
    try:
        return apply(IsClose, (a, b), {"rtol": rtol, "atol": atol, "equal_nan": bool(equal_nan)})
    except ValueError as exc:
        if "broadcast" in str(exc):
            from .elementwise import _bshape

            _bshape("isclose", a, b)
        raise


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element of ``isclose(input, other, ...)`` holds (a Python bool; a composite).

    >>> import pylucid
    >>> pylucid.allclose(pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 2.0 + 1e-9]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan)._data.all())


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and the same values (a Python bool; NaN != NaN).

    >>> import pylucid
    >>> pylucid.equal(pylucid.tensor([1, 2]), pylucid.tensor([1.0, 2.0]))
    True
    >>> pylucid.equal(pylucid.ones(2), pylucid.ones(3))
    False
    """
    for k, v in (("input", input), ("other", other)):
        if not isinstance(v, Tensor):
            raise TypeError(f"equal: {k} must be a Tensor, got {type(v).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other)._data.all())


def _install():
    T = Tensor
    for f in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not, bitwise_and, bitwise_or,
              bitwise_xor, bitwise_not, bitwise_left_shift, bitwise_right_shift, isnan, isinf, isfinite, isposinf,
              isneginf, isclose, allclose, equal):
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
    T.__lshift__ = bitwise_left_shift
    T.__rlshift__ = lambda s, o: bitwise_left_shift(o, s)
    T.__rshift__ = bitwise_right_shift
    T.__rrshift__ = lambda s, o: bitwise_right_shift(o, s)
    T.greater, T.greater_equal, T.less, T.less_equal, T.not_equal = gt, ge, lt, le, ne
    T.__hash__ = object.__hash__


_install()
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
           "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isclose", "allclose", "equal",
           "greater", "greater_equal", "less", "less_equal", "not_equal"]
