"""Dtypes and type promotion.

A :class:`dtype` wraps the array library's dtype (NumPy's and CuPy's are the
same objects). bfloat16 comes from ``ml_dtypes``.

Promotion follows PyTorch: dtypes are ranked by category (bool < integer <
floating < complex). Operands come in three priority groups: tensors with at
least one dimension, 0-d tensors, and Python scalars. The highest category
wins; within the winning category only the operands of the highest-priority
group that carries it set the precision. Python scalars are *weak*: they set
the kind (an ``int`` tensor times ``2.5`` becomes floating) but never widen a
tensor's precision (``float16 + 1.0`` stays ``float16``).
"""

from __future__ import annotations

import ml_dtypes  # noqa: F401 - registers NumPy's "bfloat16" dtype

from pylucid._interop import np

__all__ = [
    "dtype", "bool_", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "complex64", "complex128", "get_default_dtype", "set_default_dtype",
    "promote_types", "result_type", "from_numpy_dtype",
]

BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3


class dtype:  # noqa: N801 - mirrors torch.dtype
    """A pylucid dtype: a name, a category and the NumPy/CuPy dtype of that name behind it."""

    __slots__ = ("name", "numpy_dtype", "category", "itemsize", "is_floating_point", "is_complex", "is_signed")

    def __init__(self, name: str, category: int) -> None:
        self.name = name
        self.numpy_dtype = np.dtype(name)
        self.category = category
        self.itemsize = self.numpy_dtype.itemsize
        self.is_floating_point = category == FLOAT
        self.is_complex = category == COMPLEX
        self.is_signed = name not in ("bool", "uint8")

    def __repr__(self) -> str:
        return f"pylucid.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self) -> "dtype":
        return {"complex64": float32, "complex128": float64}.get(self.name, self)

    def to_complex(self) -> "dtype":
        return {"float64": complex128}.get(self.name, complex64)


def _by_name(name: str) -> "dtype":
    return _BY_NAME[name]


# one line a category, in promotion order
bool_ = dtype("bool", BOOL)
uint8, int8, int16, int32, int64 = (dtype(name, INT) for name in ("uint8", "int8", "int16", "int32", "int64"))
float16, bfloat16, float32, float64 = (dtype(name, FLOAT) for name in ("float16", "bfloat16", "float32", "float64"))
complex64, complex128 = (dtype(name, COMPLEX) for name in ("complex64", "complex128"))

ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "long": int64, "int": int32,
                 "short": int16, "cfloat": complex64, "cdouble": complex128})
# numpy dtype -> pylucid dtype; keyed by the dtype object (hashable, and equal
# across NumPy and CuPy since CuPy uses NumPy's dtype objects).
_FROM_NP = {d.numpy_dtype: d for d in ALL_DTYPES}

_default_float = float32


def from_numpy_dtype(np_dtype) -> dtype:
    """Map a NumPy dtype to pylucid's; raises ``TypeError`` for unsupported ones."""
    try:
        return _FROM_NP[np_dtype]
    except KeyError:
        pass
    try:
        return _FROM_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        supported = ", ".join(d.name for d in ALL_DTYPES)
        raise TypeError(f"pylucid: unsupported array dtype {np_dtype!r}; supported dtypes are {supported}") from None


def as_dtype(d) -> dtype:
    """Accept a pylucid dtype, a name (``"float32"``), a NumPy dtype or a Python type (``float`` is float64,
    ``complex`` complex128, ``int`` int64, as in PyTorch)."""
    if isinstance(d, dtype):
        return d
    # Python's own types name fixed dtypes, whatever the default dtype (as torch.tensor(1, dtype=float))
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if d is complex:
        return complex128
    if isinstance(d, str):
        try:
            return _BY_NAME[d.removeprefix("pylucid.").removeprefix("torch.")]
        except KeyError:
            raise TypeError(f"pylucid: unknown dtype name {d!r}; accepted: {sorted(_BY_NAME)}") from None
    return from_numpy_dtype(d)


def get_default_dtype() -> dtype:
    return _default_float


def set_default_dtype(d) -> None:
    """Set the dtype of Python floats turned into tensors (float32 or float64)."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d}")
    _default_float = d


def _np_promote(a: dtype, b: dtype) -> dtype:
    return _FROM_NP[np.promote_types(a.numpy_dtype, b.numpy_dtype)]


def _build_table():
    table = {}
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            if a is b:
                r = a
            elif a.category != b.category:
                # the higher category wins outright (PyTorch: int64 + float16 -> float16)
                hi, lo = (a, b) if a.category > b.category else (b, a)
                r = hi
                if hi.category == COMPLEX and lo.category == FLOAT and lo.itemsize == 8:
                    r = complex128
            elif {a.name, b.name} == {"float16", "bfloat16"}:
                r = float32  # neither holds the other: PyTorch promotes to float32
            elif bfloat16 in (a, b):
                other = b if a is bfloat16 else a
                r = other if other.itemsize > 2 else float32
            else:
                r = _np_promote(a, b)
            table[a, b] = r
    return table


_PROMOTE = _build_table()


def promote_types(a, b) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to without losing kind (PyTorch's table)."""
    return _PROMOTE[as_dtype(a), as_dtype(b)]


def scalar_category(x) -> int:
    if isinstance(x, bool):
        return BOOL
    if isinstance(x, int):
        return INT
    if isinstance(x, float):
        return FLOAT
    if isinstance(x, complex):
        return COMPLEX
    raise TypeError(f"pylucid: expected a Tensor or a Python number, got {type(x).__name__}")


def default_for_category(cat: int) -> dtype:
    return (bool_, int64, _default_float, _default_float.to_complex())[cat]


def result_type(dims: list, zero_dims: list, scalars: list) -> dtype:
    """PyTorch's three-group promotion; ``dims``/``zero_dims`` hold dtypes, ``scalars`` categories."""
    best = None
    for group in (dims, zero_dims):
        if group:
            r = group[0]
            for d in group[1:]:
                r = _PROMOTE[r, d]
            if best is None:
                best = r
            elif r.category > best.category:
                # a 0-d tensor of a higher category decides the precision (PyTorch semantics)
                best = r if r.category != COMPLEX or best.category != FLOAT else _PROMOTE[best, r]
    if scalars:
        cat = max(scalars)
        if best is None:
            return default_for_category(cat)
        if cat > best.category:
            if cat == COMPLEX and best.category == FLOAT:
                return best.to_complex()
            return default_for_category(cat)
    return best
