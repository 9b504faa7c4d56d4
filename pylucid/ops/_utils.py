"""Helpers shared by the op families: dims and shapes, argument checks, the complex-conjugate rule, names.

Each lives here once, with op-named errors; a family module imports what it
needs instead of defining its own copy.
"""

from __future__ import annotations

from .._tensor import Tensor, _norm_dim
from ..dtypes import bfloat16 as _BF16_DTYPE

_BF16_NP = _BF16_DTYPE.numpy_dtype
norm_dim = _norm_dim


def norm_dims(dim, ndim: int, op: str):
    """``None`` (all dims) or a sorted tuple of non-negative dims; repeated dims raise ValueError."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None  # PyTorch: an empty dim list reduces over everything for sum/mean
        out = tuple(_norm_dim(d, ndim, op) for d in dim)
        if len(set(out)) != len(out):
            raise ValueError(f"{op}: dim {list(dim)} names a dimension more than once")
        return tuple(sorted(out))
    return (_norm_dim(dim, ndim, op),)


def norm_shape(shape, op: str) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and 0-d int tensors as sizes."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    if len(shape) == 1 and isinstance(shape[0], Tensor) and shape[0].ndim == 1:
        shape = shape[0].tolist()
    for s in shape:  # plain ints (the common call) need no conversion
        if s.__class__ is not int:
            break
    else:
        return tuple(shape)
    out = []
    for s in shape:
        if isinstance(s, bool):
            raise TypeError(f"{op}: sizes must be ints, got bool in {tuple(shape)}")
        try:
            out.append(s.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"{op}: sizes must be ints, got {type(s).__name__} in {tuple(shape)}") from None
    return tuple(out)


def norm_size(shape, op: str) -> tuple:
    """``norm_shape`` for the size of a new tensor: every entry >= 0 (``-1`` means "infer" only to reshapes).

    >>> norm_size((2, -1), "zeros")
    Traceback (most recent call last):
    ...
    ValueError: zeros: negative dimension -1 in size (2, -1); sizes must be >= 0
    """
    out = norm_shape(shape, op)
    for n in out:
        if n < 0:
            raise ValueError(f"{op}: negative dimension {n} in size {out}; sizes must be >= 0")
    return out


def reduced_shape(shape, axes, keepdim):
    if axes is None:
        return (1,) * len(shape) if keepdim else ()
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def keepdim_shape(shape, axes):
    """The shape a reduction over ``axes`` would have with ``keepdim=True``."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def check_tensor(x, op: str, name: str = "input") -> None:
    """Raise ``TypeError`` naming ``op`` and the argument unless ``x`` is a Tensor.

    >>> check_tensor(3, "sort")
    Traceback (most recent call last):
    ...
    TypeError: sort: input must be a Tensor, got int
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def is_float_dtype(np_dtype) -> bool:
    """Floating test on a NumPy dtype that knows ml_dtypes' bfloat16 (NumPy kind 'V', not 'f')."""
    return np_dtype.kind == "f" or np_dtype == _BF16_NP


def conj_if_complex(x):
    """Complex conjugate of a saved operand or a local derivative (Tensor or Python scalar); reals pass unchanged.

    PyTorch's complex convention: for a real loss ``L`` the gradient of ``z`` is
    ``dL/dRe z + i dL/dIm z``, so a holomorphic ``y = f(z)`` sends back
    ``g * conj(f'(z))``. Every backward formula multiplies by
    ``conj_if_complex(f'(z))``; for real dtypes this is one dtype test and no work.
    """
    if isinstance(x, Tensor):
        if x._data.dtype.kind == "c":
            from .complex import conj

            return conj(x)
        return x
    return x.conjugate() if x.__class__ is complex else x


def camel(name: str) -> str:
    """``"max_pool2d"`` -> ``"MaxPool2d"``: the class and node names made from an op's name."""
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", "_").split("_"))
