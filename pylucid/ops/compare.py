"""Comparisons and logical/bitwise ops. Results are bool; none has a gradient.

The binary ops broadcast and take Python numbers as weak operands; the
comparisons are also Python's ``==``/``!=``/``<``/``<=``/``>``/``>=`` on
tensors and the bitwise ops ``&``/``|``/``^``/``~``/``<<``/``>>``.
"""

from __future__ import annotations

from .._tensor import Tensor
from ._op import Op, apply, operand
from ._utils import camel, check_tensor, is_float_dtype
from .elementwise import _binary, _bshape
from .registry import declare, op_function
from .schema import KEEP_INPUT, OpSchema


def _op_class(name, forward, doc):
    """A non-differentiable compare-family op class named after ``name`` (``logical_and`` -> ``LogicalAnd``)."""
    schema = OpSchema(name, amp_policy=KEEP_INPUT, differentiable=False, family="compare",
                      accepts=("float", "int", "bool") if name in ("lt", "le", "gt", "ge", "isposinf", "isneginf")
                      else ())
    return type(camel(name), (Op,), {"__doc__": doc, "__module__": __name__, "__qualname__": camel(name),
                                     "schema": schema, "forward": staticmethod(forward)})


def _binary_op(name, forward, doc, **declare_kwargs):
    """The op class of a binary op and its declared function ``fn(input, other)`` (broadcasting, numbers allowed).

    The class carries the first line of ``doc``, the function all of it.
    """
    op_cls = _op_class(name, forward, doc.split("\n")[0])

    def fn(input, other) -> Tensor:
        return _binary(op_cls, input, other, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return op_cls, declare(op_cls, **declare_kwargs)(fn)


# ---------------------------------------------------------------- comparisons and logical ops
def _calls(be_name):
    """The forward ``be.<be_name>(a, b)``."""
    return lambda be, a, b: getattr(be, be_name)(a, b)


Eq, eq = _binary_op("eq", _calls("equal"), """``input == other`` element-wise (bool); the ``==`` operator.

    >>> import pylucid
    >>> pylucid.eq(pylucid.tensor([1, 2]), 2)
    tensor([False,  True])
    """, dunders=("__eq__",))
Ne, ne = _binary_op("ne", _calls("not_equal"), "``input != other`` element-wise (bool); the ``!=`` operator.",
                    aliases=("not_equal",), dunders=("__ne__",))
def _ordering(be_name):
    """The forward ``be.<be_name>(a, b)`` of an ordering: ml_dtypes' bfloat16 comparisons warn on NaN (the answer,
    False, is PyTorch's), so a bfloat16 operand runs under ``be.errstate()``."""
    def forward(be, a, b):
        fn = getattr(be, be_name)
        if getattr(getattr(a, "dtype", None), "kind", "") == "V" or \
                getattr(getattr(b, "dtype", None), "kind", "") == "V":
            with be.errstate():
                return fn(a, b)
        return fn(a, b)

    return forward


Lt, lt = _binary_op("lt", _ordering("less"), "``input < other`` element-wise (bool); the ``<`` operator.",
                    aliases=("less",), dunders=("__lt__",))
Le, le = _binary_op("le", _ordering("less_equal"), "``input <= other`` element-wise (bool); the ``<=`` operator.",
                    aliases=("less_equal",), dunders=("__le__",))
Gt, gt = _binary_op("gt", _ordering("greater"), "``input > other`` element-wise (bool); the ``>`` operator.",
                    aliases=("greater",), dunders=("__gt__",))
Ge, ge = _binary_op("ge", _ordering("greater_equal"), "``input >= other`` element-wise (bool); the ``>=`` operator.",
                    aliases=("greater_equal",), dunders=("__ge__",))
LogicalAnd, logical_and = _binary_op("logical_and", _calls("logical_and"),
                                     "``input and other`` element-wise (non-zero is true; bool result).")
LogicalOr, logical_or = _binary_op("logical_or", _calls("logical_or"),
                                   "``input or other`` element-wise (non-zero is true; bool result).")
LogicalXor, logical_xor = _binary_op("logical_xor", _calls("logical_xor"),
                                     "``input xor other`` element-wise (non-zero is true; bool result).")


class LogicalNot(Op):
    """``not input`` element-wise (non-zero is true; bool result).

    >>> import pylucid
    >>> pylucid.logical_not(pylucid.tensor([0.0, 2.0]))
    tensor([ True, False])
    """

    schema = OpSchema("logical_not", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, x):
        return be.logical_not(x)


logical_not = op_function(LogicalNot)


# ---------------------------------------------------------------- bitwise ops and shifts
def _integer_forward(name, be_name, kinds):
    """The forward ``be.<be_name>(a, b)`` on integer operands (``kinds``: the accepted dtype kinds, ``"biu"`` with
    bool); other dtypes and Python floats (and bools, without ``"b"``) raise TypeError naming ``name``."""
    refused = (float,) if "b" in kinds else (float, bool)
    accepted = "integer and bool" if "b" in kinds else "integer"

    def forward(be, a, b):
        for x in (a, b):
            k = getattr(x, "dtype", None)
            if (k is not None and k.kind not in kinds) or isinstance(x, refused):
                raise TypeError(f"{name}: only {accepted} tensors are accepted, got {k or type(x).__name__}")
        return getattr(be, be_name)(a, b)

    return forward


BitwiseAnd, bitwise_and = _binary_op("bitwise_and", _integer_forward("bitwise_and", "bitwise_and", "biu"),
                                     "``input & other`` for integer/bool tensors; the ``&`` operator.",
                                     dunders=("__and__", "__rand__"))
BitwiseOr, bitwise_or = _binary_op("bitwise_or", _integer_forward("bitwise_or", "bitwise_or", "biu"),
                                   "``input | other`` for integer/bool tensors; the ``|`` operator.",
                                   dunders=("__or__", "__ror__"))
BitwiseXor, bitwise_xor = _binary_op("bitwise_xor", _integer_forward("bitwise_xor", "bitwise_xor", "biu"),
                                     "``input ^ other`` for integer/bool tensors; the ``^`` operator.",
                                     dunders=("__xor__", "__rxor__"))
BitwiseLeftShift, bitwise_left_shift = _binary_op(
    "bitwise_left_shift", _integer_forward("bitwise_left_shift", "left_shift", "iu"),
    """``input << other`` for integer tensors (bits shifted out are lost, as in C/PyTorch); the ``<<`` operator.

    >>> import pylucid
    >>> pylucid.bitwise_left_shift(pylucid.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """, dunders=("__lshift__", "__rlshift__"))
BitwiseRightShift, bitwise_right_shift = _binary_op(
    "bitwise_right_shift", _integer_forward("bitwise_right_shift", "right_shift", "iu"),
    """``input >> other`` for integer tensors (arithmetic: the sign is kept, ``-8 >> 1 == -4``); the ``>>`` operator.

    >>> import pylucid
    >>> pylucid.bitwise_right_shift(pylucid.tensor([16, -8]), 1)
    tensor([ 8, -4])
    """, dunders=("__rshift__", "__rrshift__"))


class BitwiseNot(Op):
    """``~input``: bit inversion for integer tensors, logical not for bool ones; the ``~`` operator.

    >>> import pylucid
    >>> ~pylucid.tensor([0, 5])
    tensor([-1, -6])
    """

    schema = OpSchema("bitwise_not", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, x):
        if x.dtype.kind not in "biu":
            raise TypeError(f"bitwise_not: only integer and bool tensors are accepted, got {x.dtype}")
        return be.invert(x)


bitwise_not = op_function(BitwiseNot, dunders=("__invert__",))


# ---------------------------------------------------------------- floating-point classification
def _classification_op(name, test, doc):
    """The op class ``test(be, x)`` for floating/complex ``x`` (integers and bools are finite, never NaN/inf)
    and its declared function ``fn(input)``."""

    def forward(be, x):
        if not (is_float_dtype(x.dtype) or x.dtype.kind == "c"):
            return be.full(x.shape, name == "isfinite", dtype=bool)
        return test(be, x)

    op_cls = _op_class(name, forward, doc)
    return op_cls, op_function(op_cls)


IsNan, isnan = _classification_op("isnan", lambda be, x: be.isnan(x), """True where ``input`` is NaN.

    >>> import pylucid
    >>> pylucid.isnan(pylucid.tensor([1.0, float("nan")]))
    tensor([False,  True])
    """)
IsInf, isinf = _classification_op("isinf", lambda be, x: be.isinf(x), """True where ``input`` is +inf or -inf.

    >>> import pylucid
    >>> pylucid.isinf(pylucid.tensor([1.0, float("-inf")]))
    tensor([False,  True])
    """)
IsFinite, isfinite = _classification_op("isfinite", lambda be, x: be.isfinite(x), """True where ``input`` is
    neither NaN nor infinite (always True for integers).

    >>> import pylucid
    >>> pylucid.isfinite(pylucid.tensor([1.0, float("inf"), float("nan")]))
    tensor([ True, False, False])
    """)
IsPosInf, isposinf = _classification_op("isposinf", lambda be, x: x == x.dtype.type("inf"), """True where
    ``input`` is +inf.

    >>> import pylucid
    >>> pylucid.isposinf(pylucid.tensor([float("inf"), float("-inf")]))
    tensor([ True, False])
    """)
IsNegInf, isneginf = _classification_op("isneginf", lambda be, x: x == x.dtype.type("-inf"), """True where
    ``input`` is -inf.

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
        if a.dtype.itemsize < 4 and is_float_dtype(a.dtype):  # no half-precision isclose kernel (bfloat16)
            a, b = a.astype("float32"), b.astype("float32")
        return be.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


@declare(IsClose)
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Element-wise ``|input - other| <= atol + rtol * |other|`` (bool), broadcasting.

    >>> import pylucid
    >>> pylucid.isclose(pylucid.tensor([1.0, 1.1, float("nan")]), pylucid.tensor([1.0 + 1e-7, 1.0, float("nan")]))
    tensor([ True, False, False])
    """
    for v, what in ((rtol, "rtol"), (atol, "atol")):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"isclose: {what} must be a number, got {type(v).__name__} {v!r}")
    if not (rtol >= 0 and atol >= 0):  # (NaN fails too)
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    a, b = operand("isclose", input), operand("isclose", other)
    try:
        return apply(IsClose, (a, b), {"rtol": rtol, "atol": atol, "equal_nan": bool(equal_nan)})
    except ValueError as exc:
        if "broadcast" in str(exc):
            _bshape("isclose", a, b)
        raise


@declare()
def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element of ``isclose(input, other, ...)`` holds (a Python bool; a composite).

    >>> import pylucid
    >>> pylucid.allclose(pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 2.0 + 1e-9]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan)._data.all())


@declare()
def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and the same values (a Python bool; NaN != NaN).

    >>> import pylucid
    >>> pylucid.equal(pylucid.tensor([1, 2]), pylucid.tensor([1.0, 2.0]))
    True
    >>> pylucid.equal(pylucid.ones(2), pylucid.ones(3))
    False
    """
    check_tensor(input, "equal", "input")
    check_tensor(other, "equal", "other")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other)._data.all())


# ``==`` is element-wise, so a tensor hashes by identity (usable as a dict key, as in PyTorch)
Tensor.__hash__ = object.__hash__


# ---------------------------------------------------------------- membership
class Isin(Op):
    """``elements[i]`` in ``test_elements`` (bool, ``elements``' shape); not differentiable."""

    schema = OpSchema("isin", amp_policy=KEEP_INPUT, differentiable=False, family="compare")

    @staticmethod
    def forward(be, elements, test_elements, *, assume_unique, invert):
        return be.isin(be.asarray(elements), be.asarray(test_elements), assume_unique=assume_unique, invert=invert)


@declare(Isin, method=False)
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a number, not both);
    ``invert=True`` gives the complement.

    >>> import pylucid
    >>> pylucid.isin(pylucid.tensor([[1, 2], [3, 4]]), pylucid.tensor([2, 3]))
    tensor([[False,  True],
            [ True, False]])
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin: elements or test_elements must be a Tensor, got {type(elements).__name__} and "
                        f"{type(test_elements).__name__}")
    for x, what in ((elements, "elements"), (test_elements, "test_elements")):
        if not isinstance(x, Tensor):
            operand("isin", x)
        elif x._data.dtype.kind == "c":
            raise TypeError(f"isin: {what} must not be complex, got {x.dtype}")
    return apply(Isin, (elements, test_elements), {"assume_unique": bool(assume_unique), "invert": bool(invert)})


@declare()
def isreal(input: Tensor) -> Tensor:
    """Whether each element is real: ``imag == 0`` for complex tensors, True everywhere for the others (bool).

    >>> import pylucid
    >>> pylucid.isreal(pylucid.tensor([1 + 0j, 2j]))
    tensor([ True, False])
    """
    check_tensor(input, "isreal")
    if input._data.dtype.kind == "c":
        from .complex import imag

        return eq(imag(input), 0)
    from ..creation import ones

    return ones(tuple(input.shape), dtype=bool, device=input.device)
