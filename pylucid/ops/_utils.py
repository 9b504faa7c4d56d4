"""Helpers shared by the op families: argument checks, the complex-conjugate rule, names.

Each lives here once; a family module imports what it needs instead of
defining its own copy.
"""

from __future__ import annotations

from .._tensor import Tensor
from ..dtypes import bfloat16 as _BF16_DTYPE

_BF16_NP = _BF16_DTYPE.numpy_dtype


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
