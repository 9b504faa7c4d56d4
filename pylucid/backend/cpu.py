"""The CPU backend: NumPy (and, for GEMMs that accumulate into a view, the CBLAS of NumPy's own OpenBLAS)."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from .base import ArrayBackend

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _find_cblas():
    """``{dtype: cblas_?gemm}`` from the OpenBLAS NumPy loaded (its ``scipy_openblas64_`` build exports
    ``scipy_cblas_sgemm64_``, a plain OpenBLAS ``cblas_sgemm``), else ``{}`` (NumPy then does the work)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return {}
    paths = sorted(paths, key=lambda p: "numpy" not in os.path.dirname(p))  # NumPy's own library first
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # the ILP64 build's symbols end in 64_ and take 64-bit sizes; the plain ones take C ints
        for prefix, suffix, int_t in (("scipy_cblas_", "64_", ctypes.c_int64), ("scipy_cblas_", "", ctypes.c_int),
                                      ("cblas_", "", ctypes.c_int)):
            fns = {}
            for dt, letter, real in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
                fn = getattr(lib, f"{prefix}{letter}gemm{suffix}", None)
                if fn is None:
                    break
                p = ctypes.c_void_p
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, real, p, int_t, p,
                               int_t, real, p, int_t]
                fn.restype = None
                fns[np.dtype(dt)] = fn
            if len(fns) == 2:
                return fns
    return {}


def _operand(m):
    """``(trans flag, leading dimension)`` of the 2-D factor ``m`` for row-major CBLAS, or None when neither
    of its axes has unit stride (a copy is then needed)."""
    it = m.itemsize
    s0, s1 = m.strides
    r, c = m.shape
    if s1 == it and s0 % it == 0 and s0 >= it * max(c, 1):
        return _NO_TRANS, s0 // it
    if s0 == it and s1 % it == 0 and s1 >= it * max(r, 1):
        return _TRANS, s1 // it
    return None


class CPUBackend(ArrayBackend):
    name = "cpu"

    def __init__(self) -> None:
        super().__init__(np)
        self._cblas = None

    def to_numpy(self, a, what: str = "a copy to the host"):
        return a

    def matmul(self, a, b):
        # A few rows times a transposed (F-ordered) matrix, e.g. ``h @ W^T`` of a recurrent step or a
        # small-batch linear layer: OpenBLAS repacks the whole transposed matrix on every call, which costs
        # more than the product; ``(W a^T)^T`` reads W in its own order (measured up to 2x faster).
        if a.ndim == 2 and b.ndim == 2 and a.shape[0] <= 64 and b.size >= 16384 and a.dtype == b.dtype and \
                a.dtype in _GEMM_DTYPES and b.strides[0] == b.itemsize and b.strides[1] == b.itemsize * b.shape[0]:
            return np.ascontiguousarray(np.matmul(b.T, a.T).T)
        return super().matmul(a, b)

    def _gemm_into(self, a, b, out, accumulate: bool) -> None:
        # ``out (+)= a @ b`` as one ``gemm`` writing the view in place (strided rows allowed; beta = 1
        # accumulates). Measured against NumPy's matmul(out=) on the convolution shapes: faster for a
        # row-major ``a`` (tall-skinny products), slower for a transposed one, which NumPy keeps.
        fns = self._cblas
        if fns is None:
            fns = self._cblas = _find_cblas()
        fn = fns.get(out.dtype)
        if fn is not None and a.dtype == out.dtype and b.dtype == out.dtype and a.ndim == b.ndim == out.ndim == 2:
            m, k = a.shape
            n = b.shape[1]
            oa, ob = _operand(a), _operand(b)
            it = out.itemsize
            if oa is not None and ob is not None and (accumulate or oa[0] == _NO_TRANS) and out.strides[1] == it \
                    and out.strides[0] % it == 0 and out.strides[0] >= it * max(n, 1) and m and n and k and \
                    out.shape == (m, n):
                fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, a.ctypes.data, oa[1], b.ctypes.data, ob[1],
                   1.0 if accumulate else 0.0, out.ctypes.data, out.strides[0] // it)
                return
        super()._gemm_into(a, b, out, accumulate)

    # -- cross-entropy of (rows, classes) logits against class indices: the picked logit gathered, never a
    #    dense one-hot; half logits computed in float32 (the loss, the lse and the gradient are rounded by
    #    the op once)
    def cross_entropy(self, logits, target, ignore_index: int = -100):
        """``(loss, lse)`` per row: ``lse - logits[r, target[r]]`` (0 where ignored), ``lse`` the row log-sum-exp."""
        x = logits.astype(np.float32) if logits.dtype.kind == "V" or logits.dtype.itemsize < 4 else logits
        with self.errstate():
            m = np.max(x, axis=1, keepdims=True)
            e = np.subtract(x, m)
            np.exp(e, out=e)
            lse = np.log(np.sum(e, axis=1))
            lse += m[:, 0]
            valid = target != ignore_index
            safe = np.where(valid, target, 0)
            picked = np.take_along_axis(x, safe[:, None].astype(np.intp, copy=False), axis=1)[:, 0]
            loss = np.where(valid, lse - picked, x.dtype.type(0))
        return loss, lse

    def cross_entropy_backward(self, g, logits, lse, target, ignore_index: int = -100):
        """``g[r] * (softmax(logits[r]) - onehot(target[r]))``, zero rows where ignored (one pass over the logits
        for the softmax, then an in-place subtraction at the picked positions only)."""
        x = logits.astype(np.float32) if logits.dtype.kind == "V" or logits.dtype.itemsize < 4 else logits
        with self.errstate():
            p = np.subtract(x, lse.astype(x.dtype, copy=False)[:, None])
            np.exp(p, out=p)
            valid = target != ignore_index
            rows = np.arange(x.shape[0])
            p[rows, np.where(valid, target, 0)] -= 1
            gr = np.where(valid, g.astype(x.dtype, copy=False), x.dtype.type(0))
            p *= gr[:, None]
        return p
