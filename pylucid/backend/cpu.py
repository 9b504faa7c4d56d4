"""The CPU backend: NumPy (and SciPy's BLAS where NumPy has no in-place accumulating GEMM)."""

from __future__ import annotations

import numpy as np

from .base import ArrayBackend

_GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _blas_operand(m):
    """``(array, trans)`` handing the row-major factor ``m`` to column-major BLAS without a copy (None if
    neither ``m`` nor its transpose is column-major): C-contiguous ``m`` is the F-contiguous ``m.T``."""
    if m.strides[-1] == m.itemsize and m.strides[0] >= m.itemsize * max(m.shape[1], 1):
        return m.T, 0
    if m.strides[0] == m.itemsize and m.strides[1] >= m.itemsize * max(m.shape[0], 1):
        return m, 1
    return None


class CPUBackend(ArrayBackend):
    name = "cpu"

    def __init__(self) -> None:
        super().__init__(np)
        self._gemms = {}

    def to_numpy(self, a, what: str = "a copy to the host"):
        return a

    def _blas_gemm(self, dt):
        fn = self._gemms.get(dt)
        if fn is None:
            from scipy.linalg import blas

            fn = self._gemms[dt] = blas.sgemm if dt == np.float32 else blas.dgemm
        return fn

    def _gemm_into(self, a, b, out, accumulate: bool) -> None:
        # Row-major out = a @ b is column-major out^T = b^T a^T: one ``gemm`` writing out^T (F-contiguous when
        # out is a C-ordered row block) in place, with beta = 1 to accumulate. Anything else: NumPy.
        dt = out.dtype
        if dt in _GEMM_DTYPES and a.dtype == dt and b.dtype == dt and out.strides[-1] == out.itemsize \
                and out.strides[0] >= out.itemsize * out.shape[1] and a.size and b.size:
            bb, ab = _blas_operand(b), _blas_operand(a)
            if bb is not None and ab is not None:
                c = out.T
                r = self._blas_gemm(dt)(1.0, bb[0], ab[0], beta=1.0 if accumulate else 0.0, c=c,
                                        trans_a=bb[1], trans_b=ab[1], overwrite_c=1)
                if r.ctypes.data != c.ctypes.data:  # the wrapper copied (it should not): keep the result
                    c[...] = r
                return
        super()._gemm_into(a, b, out, accumulate)
