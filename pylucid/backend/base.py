"""The array backend shared by the CPU (NumPy) and CUDA (CuPy) devices."""

from __future__ import annotations

import ml_dtypes
import numpy as np

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
#: what NumPy hands back from 0-d arithmetic instead of a 0-d array
SCALAR_TYPES = (np.generic, bool, int, float, complex)


class ArrayBackend:
    """Primitive set over an array module ``xp``.

    Attribute lookups that are not defined here fall through to ``xp`` (so
    ``be.exp`` is ``xp.exp``) and are cached on the instance, which keeps the
    per-call cost of a primitive to one attribute read.
    """

    name = "array"
    #: True when ops must enter a device context before allocating (several GPUs)
    _multi = False

    def __init__(self, xp) -> None:
        self.xp = xp

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        fn = getattr(self.xp, name)
        setattr(self, name, fn)  # cache: next lookup is a plain instance attribute
        return fn

    # -- sub-libraries (scipy on the CPU, cupyx.scipy on CUDA) ---------------
    @property
    def linalg(self):
        return self.xp.linalg

    @property
    def fft(self):
        return self.xp.fft

    @property
    def special(self):
        import scipy.special

        return scipy.special

    @property
    def scipy_linalg(self):
        import scipy.linalg

        return scipy.linalg

    # -- conversion -------------------------------------------------------
    def asarray(self, data, dtype=None):
        return self.xp.asarray(data, dtype=dtype)

    def to_numpy(self, a):
        return np.asarray(a)

    def astype(self, a, np_dtype, copy=True):
        return a.astype(np_dtype, copy=copy)

    # -- numerics that need care -----------------------------------------
    def matmul(self, a, b):
        # NumPy has no half-precision BLAS: compute float16/bfloat16 products in
        # float32 and round once, which is also what PyTorch's CPU kernels do.
        if a.dtype in _HALF:
            dt = a.dtype
            return self.xp.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dt)
        return self.xp.matmul(a, b)

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        if dtype is None and a.dtype in _HALF:
            # accumulate half precision in float32 (as PyTorch does), round once
            return self.xp.sum(a, axis=axis, keepdims=keepdims, dtype=np.float32).astype(a.dtype)
        return self.xp.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)

    def mean(self, a, axis=None, keepdims=False):
        if a.size == 0 or (axis is not None and any(a.shape[i] == 0 for i in axis)):
            # 0/0: NaN without NumPy's "Mean of empty slice" warning
            s = self.xp.sum(a, axis=axis, keepdims=keepdims)
            return self.xp.full(s.shape, float("nan"), dtype=a.dtype)
        if a.dtype in _HALF:
            return self.xp.mean(a, axis=axis, keepdims=keepdims, dtype=np.float32).astype(a.dtype)
        return self.xp.mean(a, axis=axis, keepdims=keepdims)

    def sum_to_shape(self, g, shape):
        """Sum ``g`` over the axes that broadcasting added or stretched to reach ``shape``."""
        if g.shape == shape:
            return g
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1)
        if axes:
            g = self.sum(g, axis=axes, keepdims=True)
        if lead:
            g = g.reshape(shape)
        return g

    def scatter_add(self, target, index, values):
        """``target[index] += values`` with repeated indices accumulated (in place)."""
        self.xp.add.at(target, index, values)
        return target

    def errstate(self):
        return np.errstate(all="ignore")
