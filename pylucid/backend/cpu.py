"""The CPU backend: NumPy, and for the convolutions' GEMMs into views a CBLAS ``gemm`` called by ctypes: Intel's MKL
when the optional ``mkl`` wheel is installed (``pip install pylucid[mkl]``; then for large products of ``matmul``
too), else NumPy's own OpenBLAS."""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import ml_dtypes
import numpy as np

from .. import _threads
from ..backends import mkldnn as _mkldnn_flags
from .base import ArrayBackend

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_F32 = np.dtype(np.float32)
_U16, _U32 = np.dtype(np.uint16), np.dtype(np.uint32)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_INT32 = 2 ** 31
# below this many multiply-adds per matrix NumPy's own matmul (OpenBLAS) runs a product even with MKL present:
# a ctypes call costs a few microseconds
_MKL_MIN_MACS = 1 << 20


def _gemm_fns(lib, names, int_t):
    """``{dtype: fn}`` of the row-major ``cblas_sgemm`` / ``cblas_dgemm`` named ``names`` in ``lib`` (with
    ``int_t`` sizes), or None when either is missing."""
    fns = {}
    p = ctypes.c_void_p
    for dt, name, real in zip((np.float32, np.float64), names, (ctypes.c_float, ctypes.c_double)):
        fn = getattr(lib, name, None)
        if fn is None:
            return None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, real, p, int_t, p, int_t, real,
                       p, int_t]
        fn.restype = None
        fns[np.dtype(dt)] = fn
    return fns


def _find_mkl():
    """``{dtype: cblas_?gemm}`` of Intel's MKL when the optional ``mkl`` wheel is installed (``libmkl_rt`` in
    ``sys.prefix/lib``, or found by the loader), else ``{}``. ``PYLUCID_CPU_BLAS=openblas`` skips it.

    MKL runs the skinny convolution GEMMs (64 to 128 columns, or a reduction over all N*L pixels) 1.2 to 1.6
    times faster than OpenBLAS (the library PyTorch's own GEMMs and oneDNN's kernels come close to); on
    square products the two agree. Its LP64 interface is requested (32-bit sizes: callers check the bound)."""
    if os.environ.get("PYLUCID_CPU_BLAS", "").lower() == "openblas":
        return {}
    cands = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")), reverse=True)
    for path in cands + ["libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"]:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        layer = getattr(lib, "MKL_Set_Interface_Layer", None)
        if layer is None:
            continue
        layer.argtypes, layer.restype = [ctypes.c_int], ctypes.c_int
        if layer(0) != 0:  # MKL_INTERFACE_LP64 (fixed before any other MKL call; an earlier ILP64 choice wins)
            continue
        fns = _gemm_fns(lib, ("cblas_sgemm", "cblas_dgemm"), ctypes.c_int)
        if fns is not None:
            from .. import _threads

            _threads.blas_loaded()  # a set_num_threads made before MKL loaded applies to it too
            return fns
    return {}


def _find_cblas():
    """``{dtype: cblas_?gemm}``: MKL's when installed (:func:`_find_mkl`), else the OpenBLAS NumPy loaded (its
    ``scipy_openblas64_`` build exports ``scipy_cblas_sgemm64_``, a plain OpenBLAS ``cblas_sgemm``), else ``{}``
    (NumPy then does the work). The second item says whether the functions are MKL's."""
    fns = _find_mkl()
    if fns:
        return fns, True
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return {}, False
    paths = sorted(paths, key=lambda p: "numpy" not in os.path.dirname(p))  # NumPy's own library first
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # the ILP64 build's symbols end in 64_ and take 64-bit sizes; the plain ones take C ints
        for prefix, suffix, int_t in (("scipy_cblas_", "64_", ctypes.c_int64), ("scipy_cblas_", "", ctypes.c_int),
                                      ("cblas_", "", ctypes.c_int)):
            fns = _gemm_fns(lib, (f"{prefix}sgemm{suffix}", f"{prefix}dgemm{suffix}"), int_t)
            if fns is not None:
                return fns, False
    return {}, False


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


#: glibc's ``mallopt`` parameters (malloc.h) and the values set by :func:`_reuse_freed_memory`
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20  # the largest glibc takes (HEAP_MAX_SIZE / 2 on 64-bit)
_TRIM_THRESHOLD = 128 << 20


def _numpy_has_avx512() -> bool:
    """Whether NumPy runs its AVX-512 loops on this processor (its dispatcher's CPU features; False
    where the private table is not found)."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    features = getattr(getattr(core, "_multiarray_umath", None), "__cpu_features__", None) or {}
    return bool(features.get("AVX512F"))


def _reuse_freed_memory() -> bool:
    """Have glibc's malloc keep freed blocks of up to 32 MiB for the next allocations instead of handing them back
    to the kernel. By default a block above its (adaptive) mmap threshold is mapped fresh on every allocation and
    unmapped when freed, and the top of the heap is trimmed past twice that threshold: each new array of a few
    MiB then costs a page fault per 4 KiB on first touch (the kernel zeroing the page). A causal attention step
    (B8 H4 T128 E64, bfloat16) took about 1100 faults per call, and 4.7 ms where it takes 2.0 ms without them;
    its backward 9.9 ms against 3.3 ms. Up to 128 MiB of freed memory stays with the process (what a caching
    allocator keeps); larger arrays are mapped as before. Left as it is where the user set glibc's own variables
    (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``) or ``PYLUCID_CPU_MALLOC=default``,
    and off glibc. Returns whether the settings were made."""
    if sys.platform != "linux" or os.environ.get("PYLUCID_CPU_MALLOC", "").lower() == "default" or any(
            v in os.environ for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # setting either fixes both (glibc's adaptive thresholds stop moving)
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


class CPUBackend(ArrayBackend):
    name = "cpu"
    # NumPy's float32 exp2 has a SIMD loop only with AVX-512 (see ArrayBackend's GELU)
    _gelu_exp2 = _numpy_has_avx512()

    def __init__(self) -> None:
        super().__init__(np)
        _reuse_freed_memory()
        self._cblas = None
        self._mkl = False
        self._ones: dict = {}  # (length, dtype) -> a read-only ones vector for the row sums
        self._consts: dict = {}  # (value, sign, dtype) -> a read-only block of it (_const_block)

    def to_numpy(self, a, what: str = "a copy to the host"):
        return a

    # -- sums and means over the last axis as a matrix-vector product -------------------------------------
    # NumPy's reduction along a contiguous last axis runs row by row (pairwise, scalar tails): on (1000, 1000)
    # float32 it measures 5x slower than BLAS's GEMV with a ones vector. The GEMV sums each row with several
    # vector accumulators, so its rounding error grows like a blocked sum's; rows are limited to 16384.
    _ROWS_MIN, _ROW_MAX = 1 << 16, 1 << 14

    def _row_sums(self, a, axis, keepdims):
        """Sums of ``a`` over its last axis through GEMV, or None (the reduction's own path)."""
        if a.__class__ is not np.ndarray or a.dtype not in _GEMM_DTYPES or a.ndim < 2 or a.size < self._ROWS_MIN \
                or not a.flags.c_contiguous:
            return None
        if axis.__class__ is tuple:
            if len(axis) != 1:
                return None
            axis = axis[0]
        n = a.shape[-1]
        if axis.__class__ is not int or axis not in (-1, a.ndim - 1) or not 1 < n <= self._ROW_MAX:
            return None
        key = (n, a.dtype)
        ones = self._ones.get(key)
        if ones is None:
            ones = self._ones[key] = np.ones(n, dtype=a.dtype)
        r = np.matmul(a.reshape(-1, n), ones)
        return r.reshape(a.shape[:-1] + ((1,) if keepdims else ()))

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        if axis is not None and (dtype is None or dtype == a.dtype):
            r = self._row_sums(a, axis, keepdims)
            if r is not None:
                return r
        return super().sum(a, axis, keepdims, dtype)

    def mean(self, a, axis=None, keepdims=False):
        if axis is not None:
            r = self._row_sums(a, axis, keepdims)
            if r is not None:
                r /= a.shape[-1]
                return r
        return super().mean(a, axis, keepdims)

    # below this many elements of work a split across threads costs more than it saves (a pool hand-off is
    # some tens of microseconds)
    _PAR_MIN = 1 << 17

    def _par(self, fn, n: int, size: int) -> None:
        if n > 1 and size >= self._PAR_MIN:
            _threads.parallel_chunks(fn, n)
        else:
            fn(0, n)

    # -- float32 <-> bfloat16 casts ---------------------------------------------------------------------------
    # ml_dtypes converts value by value (measured here about 0.9 ns per value float32 -> bfloat16, 0.45 back);
    # as whole-block integer passes the same conversions run 1.5x and 2.5x faster. A bfloat16 is the top half
    # of a float32: widening moves its 16 bits up; narrowing rounds to nearest even by adding 0x7FFF plus the
    # lowest kept bit before the shift (a carry into the exponent gives the next binade, or infinity past the
    # largest value, as the rounding should). NaN would round into infinity that way: NaNs take ml_dtypes' answer.
    _CAST_MIN = 1 << 15
    _CAST_BLOCK = 1 << 16  # values per pass: a block's temporaries stay in the L2 cache

    def astype(self, a, np_dtype, copy=True):
        if a.__class__ is np.ndarray and a.size >= self._CAST_MIN and a.flags.c_contiguous:
            dt = np.dtype(np_dtype)
            if a.dtype == _F32 and dt == _BF16:
                return self._to_bf16(a)
            if a.dtype == _BF16 and dt == _F32:
                out = np.empty(a.shape, _F32)
                src, dst = a.reshape(-1).view(_U16), out.reshape(-1).view(_U32)
                step = self._CAST_BLOCK

                def widen(b0, b1):
                    lo, hi = b0 * step, min(src.size, b1 * step)
                    np.left_shift(src[lo:hi], 16, out=dst[lo:hi], dtype=_U32)
                self._par(widen, -(-src.size // step), src.size)
                return out
        return a.astype(np_dtype, copy=copy)

    def _to_bf16(self, x):
        out = np.empty(x.shape, _BF16)
        f, o = x.reshape(-1), out.reshape(-1).view(_U16)
        u = f.view(_U32)
        step = self._CAST_BLOCK

        def narrow(b0, b1):
            t = np.empty(min(step, u.size), _U32)
            with np.errstate(over="ignore", invalid="ignore"):
                for lo in range(b0 * step, min(u.size, b1 * step), step):
                    hi = min(u.size, lo + step)
                    ub, tb = u[lo:hi], t[:hi - lo]
                    np.right_shift(ub, 16, out=tb)
                    tb &= 1
                    tb += 0x7FFF
                    tb += ub
                    np.right_shift(tb, 16, out=o[lo:hi], casting="unsafe")
                    # a NaN makes the block's sum NaN (so does an infinity or an overflow of the sum: then the
                    # values are looked at one by one); one read-only pass where isnan + any took two
                    fb = f[lo:hi]
                    if not np.isfinite(np.add.reduce(fb)):
                        nan = np.isnan(fb)
                        if nan.any():
                            o[lo:hi][nan] = fb[nan].astype(_BF16).view(_U16)
        self._par(narrow, -(-u.size // step), u.size)
        return out

    # -- GELU through oneDNN's eltwise kernels where installed (pylucid.backends.mkldnn.enabled):
    #    one pass each way, against ~20 NumPy passes for ArrayBackend's (524288 float32 values, 2
    #    threads: forward 0.27 ms against 2.6 ms, backward 0.34 ms; PyTorch 0.31 and 0.38 ms, whose
    #    values the erf form gives bit for bit here). Half inputs are computed in float32 and
    #    rounded once, as ArrayBackend's; float64 keeps scipy's erf.
    #: smaller arrays keep the NumPy kernel: a oneDNN call costs some 90 us here (its OpenMP team started and
    #: stopped, see onednn._eltwise_run), which made the forward and backward of 16384 values 1.7 times slower
    _LIBRARY_GELU_MIN = 1 << 16

    def _library_gelu(self, x, g, approximate: str):
        """``gelu(x)`` or (``g`` given) its gradient through oneDNN, or None where it is off, absent
        or declines."""
        floats = (_F32, _BF16, np.float16)
        if x.size < self._LIBRARY_GELU_MIN or x.dtype not in floats or not _mkldnn_flags.enabled or \
                (g is not None and (g.shape != x.shape or g.dtype not in floats)):
            return None
        from . import onednn

        alg = "gelu_tanh" if approximate == "tanh" else "gelu_erf"
        xf = x.astype(_F32, copy=False)
        if g is None:
            return onednn.eltwise_forward(xf, alg)
        return onednn.eltwise_backward(g.astype(_F32, copy=False), xf, alg)

    def gelu(self, x, approximate: str = "none", float_out: bool = False,
             derivative: bool = False):
        # with oneDNN the forward writes no derivative: its backward kernel recomputes it from x in
        # one pass
        y = self._library_gelu(x, None, approximate)
        if y is None:
            return super().gelu(x, approximate, float_out, derivative)
        if approximate != "tanh" and y.size and not np.isfinite(x.max()):
            # oneDNN's vectorised erf gives NaN at +inf on AVX-512 machines (+inf on AVX2): the value of x Phi(x)
            # there is +inf, as the NumPy kernel gives it (one max over x to find out; NaN inputs stay NaN)
            y[x == np.inf] = np.inf
        return y if float_out or x.dtype == _F32 else y.astype(x.dtype)

    def gelu_backward(self, g, x, approximate: str = "none"):
        dx = self._library_gelu(x, g, approximate)
        if dx is None:
            return super().gelu_backward(g, x, approximate)
        return dx.astype(g.dtype, copy=False)

    def native_half_gemm(self, dtype) -> bool:
        return dtype == _BF16 and _mkldnn_flags.enabled and _mkldnn_flags.is_available()

    def _blas(self) -> dict:
        """``{dtype: cblas_?gemm}`` (found on first use; ``self._mkl`` then says whether they are MKL's)."""
        if self._cblas is None:
            self._cblas, self._mkl = _find_cblas()
        return self._cblas

    # bfloat16 products through oneDNN's GEMM where it is installed (pylucid.backends.mkldnn.enabled), from 2^18
    # multiply-adds: AVX-512 BF16 multiplies the pairs directly, at twice the float32 rate (float32 accumulation,
    # as the float32 copies' GEMM otherwise); below, the call's fixed cost of some tens of microseconds counts.
    # float32 products stay on OpenBLAS: through oneDNN (with OpenBLAS then single-threaded, so that the two
    # libraries' idle threads do not compete) the MLP, LeNet and LSTM steps measured slower at 2 threads.
    _DNNL_GEMM_MIN = {_BF16: 1 << 18}

    def _dnnl_gemm(self, a, b, out_dtype, bias=None):
        least = self._DNNL_GEMM_MIN.get(a.dtype)
        if least is None or b.dtype != a.dtype or a.ndim < 2 or b.ndim < 2 or not _mkldnn_flags.enabled or \
                a.size * b.shape[-1] < least:
            return None
        from . import onednn

        return onednn.matmul(a, b, out_dtype, bias)

    def matmul_bias(self, a, b, bias):
        # bfloat16: the bias added inside oneDNN's GEMM, before its one rounding; a float32 bias (autocast) is first
        # rounded to bfloat16, as PyTorch's autocast casts it (and the CUDA backend does): then the results are
        # PyTorch's bit for bit
        half = bias.astype(_BF16) if a.dtype == _BF16 and bias is not None and bias.dtype == _F32 else bias
        r = self._dnnl_gemm(a, b, a.dtype, half) if bias is None or bias.dtype in (a.dtype, _F32) else None
        if r is not None:
            return r
        return super().matmul_bias(a, b, bias)

    def matmul_to(self, a, b, dtype):
        if dtype == _F32:
            r = self._dnnl_gemm(a, b, dtype)
            if r is not None:
                return r
        return super().matmul_to(a, b, dtype)

    def matmul(self, a, b):
        r = self._dnnl_gemm(a, b, a.dtype)
        if r is not None:
            return r
        if self._cblas is None:
            self._blas()
        if self._mkl and a.ndim >= 2 and b.ndim >= 2 and a.dtype == b.dtype and a.dtype in _GEMM_DTYPES and \
                a.shape[-2] * a.shape[-1] * b.shape[-1] >= _MKL_MIN_MACS:
            out = self._gemm_stack(a, b)
            if out is not None:
                return out
        # A few rows times a transposed (F-ordered) matrix, e.g. ``h @ W^T`` of a recurrent step or a
        # small-batch linear layer: OpenBLAS repacks the whole transposed matrix on every call, which costs
        # more than the product; ``(W a^T)^T`` reads W in its own order (measured up to 2x faster).
        if a.ndim == 2 and b.ndim == 2 and a.shape[0] <= 64 and b.size >= 16384 and a.dtype == b.dtype and \
                a.dtype in _GEMM_DTYPES and b.strides[0] == b.itemsize and b.strides[1] == b.itemsize * b.shape[0]:
            return np.ascontiguousarray(np.matmul(b.T, a.T).T)
        return super().matmul(a, b)

    def _gemm_stack(self, a, b):
        """``a @ b`` (NumPy's broadcasting over the leading axes) as one MKL ``gemm`` per matrix of the
        result, or None where an operand has no unit-stride axis or the sizes pass MKL's 32-bit bound."""
        m, k = a.shape[-2:]
        n = b.shape[-1]
        if b.shape[-2] != k or max(m, n, k) >= _INT32 or not (m and n and k):
            return None
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
        out = np.empty(batch + (m, n), dtype=a.dtype)
        if not batch:
            return out if self._gemm_into_blas(a, b, out, False) else None
        a = np.broadcast_to(a, batch + (m, k))
        b = np.broadcast_to(b, batch + (k, n))
        for i in np.ndindex(batch):
            if not self._gemm_into_blas(a[i], b[i], out[i], False):
                return None
        return out

    def _gemm_into_blas(self, a, b, out, accumulate: bool) -> bool:
        """``out (+)= a @ b`` as one CBLAS ``gemm`` writing the view ``out`` in place (strided rows allowed;
        ``beta = 1`` accumulates); False (nothing done) where the operands do not fit a ``gemm`` call."""
        fn = self._blas().get(out.dtype)
        if fn is None or a.dtype != out.dtype or b.dtype != out.dtype:
            return False
        m, k = a.shape
        n = b.shape[1]
        oa, ob = _operand(a), _operand(b)
        it = out.itemsize
        if oa is None or ob is None or out.strides[1] != it or out.strides[0] % it or \
                out.strides[0] < it * max(n, 1) or not (m and n and k) or out.shape != (m, n):
            return False
        ldc = out.strides[0] // it
        if self._mkl and max(m, n, k, oa[1], ob[1], ldc) >= _INT32:
            return False
        fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, a.ctypes.data, oa[1], b.ctypes.data, ob[1],
           1.0 if accumulate else 0.0, out.ctypes.data, ldc)
        return True

    def _gemm_into(self, a, b, out, accumulate: bool) -> None:
        # Measured against NumPy's matmul(out=) on the convolution shapes: OpenBLAS's gemm is faster for a
        # row-major ``a`` (tall-skinny products) and slower for a transposed one, which NumPy keeps; MKL takes both.
        if self._cblas is None:
            self._blas()
        if a.ndim == b.ndim == out.ndim == 2 and (accumulate or self._mkl or a.strides[1] == a.itemsize) and \
                self._gemm_into_blas(a, b, out, accumulate):
            return
        super()._gemm_into(a, b, out, accumulate)

    def _conv_library(self):
        # oneDNN's direct convolutions where the library is installed (pylucid.backends.mkldnn.enabled,
        # read per call, switches them off); each call declines what it does not take (float64, ...)
        if not _mkldnn_flags.enabled:
            return None
        from . import onednn

        return (onednn, {}) if onednn.is_available() else None

    # -- recurrent layers: oneDNN's LSTM primitive, as PyTorch's CPU LSTM (``mkldnn_rnn_layer``) ---------------
    # A 200-unit LSTM layer at batch 20, 35 steps: forward and backward 2.1 and 3.9 ms against 4.8 and 8.2 ms for
    # one OpenBLAS GEMM of the input projection and a NumPy loop over the steps (2-core AMD EPYC, 2 threads):
    # the library runs the per-step (20 x 200) x (200 x 800) products in its own JIT kernels, on weights it
    # reorders once per call, and the gate arithmetic in the same pass.
    def library_lstm_forward(self, x, h0, c0, w_ih, w_hh, bias, reverse=False):
        """``(states, workspace)`` of one LSTM layer direction through oneDNN (``bias``: ``b_ih + b_hh`` or None;
        ``states`` (T + 2, B, H): the output sequence, ``h_n``, ``c_n``), or None where the library is off,
        absent or declines (anything but float32)."""
        if not _mkldnn_flags.enabled or x.dtype != _F32 or any(a.dtype != _F32 for a in (h0, c0, w_ih, w_hh)) or \
                (bias is not None and bias.dtype != _F32):
            return None
        from . import onednn

        if not onednn.is_available():
            return None
        if bias is None:
            bias = np.zeros(w_hh.shape[0], dtype=_F32)
        c = np.ascontiguousarray
        return onednn.lstm_forward(c(x), c(h0), c(c0), c(w_ih), c(w_hh), c(bias), reverse)

    def library_lstm_backward(self, x, h0, c0, w_ih, w_hh, bias, states, workspace, g_y, g_h, g_c, reverse=False):
        """``(dx, dh0, dc0, dw_ih, dw_hh, dbias)`` of :meth:`library_lstm_forward` (its inputs, states and
        workspace given back; ``dbias`` None for a None ``bias``)."""
        from . import onednn

        c = np.ascontiguousarray
        b = np.zeros(w_hh.shape[0], dtype=_F32) if bias is None else c(bias)
        got = onednn.lstm_backward(c(x), c(h0), c(c0), c(w_ih), c(w_hh), b, states, workspace,
                                   g_y.astype(_F32, copy=False), g_h.astype(_F32, copy=False),
                                   g_c.astype(_F32, copy=False), reverse)
        if got is None:  # the forward's plan was built with its backward's: a refusal here is a bug
            raise RuntimeError("lstm_input_layer: oneDNN declined the backward of a forward it ran")
        dx, dh, dc, dw_ih, dw_hh, db = got
        return dx, dh, dc, dw_ih, dw_hh, None if bias is None else db

    def _tap_tile(self, c: int, o: int, reduce: bool = False) -> int | None:
        # about 1 MiB of float32 per operand block and result block (2 for the weight gradient's reduction):
        # on 64 channels at 28x28, batch 64, blocks of 4096 positions ran the forward and the data gradient
        # 1.4 times and the weight gradient 2 times faster than one GEMM per tap over all positions, whose
        # 13 MB result leaves the cache between taps
        t = (1 << 18) // max(c, o, 1)
        return max(512, min(8192, 2 * t if reduce else t))

    def _conv_gemm(self, a, b):
        if self._cblas is None:
            self._blas()
        if self._mkl:
            out = self._gemm_stack(a, b)
            if out is not None:
                return out
        return super()._conv_gemm(a, b)

    # -- batch norm of float32/float64 inputs with a spatial extent, training statistics: the same
    #    arithmetic as ArrayBackend's in fewer passes over memory, no squared or centred temporary
    #    of the whole input; other cases take the portable version. Two layouts of the work:
    #
    #    * Groups of images (up to _BN_ROWS_MIN values, and short rows at any size; on the calling
    #      thread). The (N, C, L) input is seen as (N, C*L), one row per image, cut into groups of
    #      whole images of about _BN_GROUP values (the grouping depends on the shape alone). A
    #      statistic is summed over a group's images first (NumPy's reduction down axis 0 of a
    #      C-contiguous block: one vector add per image, in row order), then over each channel's L
    #      positions (pairwise): one partial sum per group and channel, the partials then added in
    #      group order. Every pass is one contiguous ufunc call over a group whose inner loop runs
    #      over all C*L values, the per-channel vectors repeated over L: a (C, 1) vector broadcast
    #      against (C, L) runs one inner loop per channel, and NumPy's per-row reductions, vecdot
    #      and einsum pay a per-row cost (a strided 2-D ufunc call over a block of channels measured
    #      up to 4 times slower than a contiguous one). A group (256 KiB of float32) stays in the L2
    #      cache between the passes of one sweep. On DCGAN's maps (batch 16, 128x4x4 to 32x16x16)
    #      forward and backward ran 1.2 to 1.7 times faster than the per-row passes and einsum loops
    #      before; split across threads (several sweeps of small calls, each thread waiting for the
    #      GIL between them) they ran up to 2.5 times slower than on one thread.
    #    * Per-image rows (rows of _BN_ROW positions and longer, from _BN_ROWS_MIN values):
    #      per-channel row sums and dot products on the (N, C, L) view, a few whole-chunk passes per
    #      thread, each writing its own images' partial sums (reduced in a fixed order: the bits do
    #      not depend on the thread count either).
    #
    #    The variance is that of the centred values in both (no cancellation whatever the mean).
    _BN_GROUP = 1 << 16  # values per group of images
    _BN_ROW = 64  # positions per image and channel from which the per-image rows may run
    _BN_ROWS_MIN = 1 << 18  # values from which they do

    def _bn_fast(self, x, g=None) -> bool:
        return x.dtype in _GEMM_DTYPES and x.ndim >= 3 and x.flags.c_contiguous and x.size >= 4096 and \
            x.size // (x.shape[0] * x.shape[1]) >= 4 and (g is None or (g.dtype == x.dtype and g.shape == x.shape))

    def _bn_groups(self, x):
        """``(x2, n, c, l, images per group, groups)`` of :meth:`batch_norm`'s ``(N, C * L)`` view
        of ``x``."""
        n, c = x.shape[:2]
        ln = x.size // (n * c)
        per = max(1, self._BN_GROUP // (c * ln))
        return x.reshape(n, c * ln), n, c, ln, per, -(-n // per)

    @staticmethod
    def _bn_partial(block, out, c: int, ln: int) -> None:
        """``out`` (C,) = the per-channel sums of ``block`` (images, C * L): over the images, then
        over L."""
        acc = np.add.reduce(block, axis=0) if block.shape[0] > 1 else block[0]
        np.add.reduce(acc.reshape(c, ln), axis=1, out=out)

    @staticmethod
    def _bn_buffer_at_most(row: int) -> None:
        """NumPy's ufunc buffer size set to at most ``row`` values, for the ``errstate`` context it
        is called in (which restores it). A broadcast operation whose rows are shorter than the
        buffer (8192 values) may be run through the buffers, every operand copied in and out to make
        its inner loop longer: on a (16, 2048) float32 block minus a (2048,) vector that measured 6
        to 7 times slower (52 against 8 us), for about one in four of the vector's addresses."""
        if row < np.getbufsize():
            np.setbufsize(max(16, row))

    def _bn_by_rows(self, x) -> bool:
        """Whether :meth:`batch_norm` takes the per-image row passes (else the groups of images)."""
        return x.size >= self._BN_ROWS_MIN and x.size // (x.shape[0] * x.shape[1]) >= self._BN_ROW

    def batch_norm(self, x, weight, bias, running_mean, running_var, training: bool, eps: float,
                   momentum: float | None = None):
        if not (training and self._bn_fast(x)):
            return super().batch_norm(x, weight, bias, running_mean, running_var, training, eps, momentum)
        run = self._bn_rows if self._bn_by_rows(x) else self._bn_grouped
        return run(x, weight, bias, running_mean, running_var, eps, momentum)

    def batch_norm_backward(self, g, x, weight, mean, var, training: bool, eps: float, need_dx: bool = True):
        if not (training and self._bn_fast(x, g) and mean.dtype == x.dtype and var.dtype == x.dtype):
            return super().batch_norm_backward(g, x, weight, mean, var, training, eps, need_dx)
        g = g if g.flags.c_contiguous else np.ascontiguousarray(g)
        run = self._bn_rows_backward if self._bn_by_rows(x) else self._bn_grouped_backward
        return run(g, x, weight, mean, var, eps, need_dx)

    def _bn_grouped(self, x, weight, bias, running_mean, running_var, eps, momentum):
        x2, n, c, ln, per, groups = self._bn_groups(x)
        m = x.dtype.type(n * ln)
        y = np.empty_like(x2)
        scratch = np.empty((min(per, n), c * ln), dtype=x.dtype)
        sums = np.empty((2, groups, c), dtype=x.dtype)  # per group: sum(x), then sum((x - mean)^2)
        starts = range(0, n, per)
        with self.errstate():
            self._bn_buffer_at_most(c * ln)
            for gi, i0 in enumerate(starts):
                self._bn_partial(x2[i0:i0 + per], sums[0, gi], c, ln)
            mean = np.add.reduce(sums[0], axis=0)
            mean /= m
            mean_r = np.repeat(mean, ln)
            for gi, i0 in enumerate(starts):
                # y holds x - mean until the last sweep
                yc = np.subtract(x2[i0:i0 + per], mean_r, out=y[i0:i0 + per])
                self._bn_partial(np.multiply(yc, yc, out=scratch[:yc.shape[0]]), sums[1, gi], c, ln)
            var = np.add.reduce(sums[1], axis=0)
            var /= m
            scale = np.sqrt(var + x.dtype.type(eps))
            np.reciprocal(scale, out=scale)
            if weight is not None:
                scale *= weight.astype(x.dtype, copy=False)
            scale_r = np.repeat(scale, ln)
            shift_r = None if bias is None else np.repeat(bias.astype(x.dtype, copy=False), ln)
            for i0 in starts:
                yb = y[i0:i0 + per]
                yb *= scale_r
                if shift_r is not None:
                    yb += shift_r
        if momentum is not None:
            self.batch_norm_update_(running_mean, running_var, mean, var, n * ln, momentum)
        return y.reshape(x.shape), mean, var

    def _bn_grouped_backward(self, g, x, weight, mean, var, eps, need_dx):
        x2, n, c, ln, per, groups = self._bn_groups(x)
        g2 = g.reshape(x2.shape)
        t = x.dtype.type
        scratch = np.empty((min(per, n), c * ln), dtype=x.dtype)
        sums = np.empty((2, groups, c), dtype=x.dtype)  # per group: sum(g), then sum(g (x - mean))
        dx = np.empty_like(x2) if need_dx else None
        starts = range(0, n, per)
        with self.errstate():
            self._bn_buffer_at_most(c * ln)
            mean_r = np.repeat(mean, ln)
            for gi, i0 in enumerate(starts):
                gb = g2[i0:i0 + per]
                self._bn_partial(gb, sums[0, gi], c, ln)
                s = scratch[:gb.shape[0]]
                if need_dx:  # x - mean kept in dx's block for the second sweep
                    xc = np.subtract(x2[i0:i0 + per], mean_r, out=dx[i0:i0 + per])
                    np.multiply(gb, xc, out=s)
                else:
                    np.subtract(x2[i0:i0 + per], mean_r, out=s)
                    s *= gb
                self._bn_partial(s, sums[1, gi], c, ln)
            db = np.add.reduce(sums[0], axis=0)
            dw = np.add.reduce(sums[1], axis=0)
            rstd = np.sqrt(var + t(eps))
            np.reciprocal(rstd, out=rstd)
            dw *= rstd
            if need_dx:
                # dx = k (g - db/m - xhat dw/m) with k = weight rstd and xhat = (x - mean) rstd,
                # written k g + b (x - mean) + c per channel
                k = rstd if weight is None else rstd * weight.astype(x.dtype, copy=False)
                neg_k_m = k * t(-1.0 / (n * ln))
                k_r = np.repeat(k, ln)
                b_r = np.repeat(neg_k_m * rstd * dw, ln)
                c_r = np.repeat(neg_k_m * db, ln)
                for i0 in starts:
                    d = dx[i0:i0 + per]
                    d *= b_r
                    s = np.multiply(g2[i0:i0 + per], k_r, out=scratch[:d.shape[0]])
                    s += c_r
                    d += s
                dx = dx.reshape(x.shape)
        return dx, dw, db

    def _bn_rows(self, x, weight, bias, running_mean, running_var, eps, momentum):
        n, c = x.shape[:2]
        m = x.size // c
        x3 = x.reshape(n, c, -1)
        part = np.empty((n, c), dtype=x.dtype)  # per-image partial sums (each thread writes its own rows)
        y = np.empty_like(x3)
        with self.errstate():
            def sums(lo, hi):
                np.sum(x3[lo:hi], axis=2, out=part[lo:hi])
            self._par(sums, n, x.size)
            mu = np.sum(part, axis=0) / m

            # two passes for the variance (mean first, then the centred squares), as ArrayBackend: y holds
            # x - mean, then becomes the output in place
            def centred(lo, hi):
                np.subtract(x3[lo:hi], mu[:, None], out=y[lo:hi])
                part[lo:hi] = np.vecdot(y[lo:hi], y[lo:hi])
            self._par(centred, n, x.size)
            var = np.sum(part, axis=0) / m
            scale = 1.0 / np.sqrt(var + eps)
            if weight is not None:
                scale = scale * weight.astype(x.dtype, copy=False)
            shift = None if bias is None else bias.astype(x.dtype, copy=False)[:, None]

            def affine(lo, hi):
                y[lo:hi] *= scale[:, None]
                if shift is not None:
                    y[lo:hi] += shift
            self._par(affine, n, x.size)
        if momentum is not None:
            self.batch_norm_update_(running_mean, running_var, mu, var, m, momentum)
        return y.reshape(x.shape), mu, var

    @staticmethod
    def _bn_grad_coefs(psum, pdot, mean, rstd, weight, m, folded, dtype):
        """``(db, dw, k, b, c)`` of batch norm's backward from the per-image partial sums of ``g`` (``psum``)
        and of ``g (x - mean)`` or, ``folded``, ``g x`` (``pdot``): ``dx = k (g - db/m - xhat dw/m)`` is written
        ``k g + b (x - mean) + c`` per channel (``k = weight rstd``; ``b x`` and ``c`` absorb the mean when folded)."""
        db = np.sum(psum, axis=0)
        gxc = np.sum(pdot, axis=0) - (mean * db if folded else 0)
        dw = gxc * rstd
        k = rstd if weight is None else rstd * weight.astype(dtype, copy=False)
        b = -k * rstd * dw / m
        cc = -k * db / m - (b * mean if folded else 0)
        return db, dw, k, b, cc

    @staticmethod
    def _bn_dx_blocks(g3, x3, dx, lo, hi, step, coefs, folded):
        """``dx = k g + b (x - mean) + c`` (``b x + c`` when ``folded``) over images ``[lo, hi)``, ``step`` images
        at a time; ``coefs`` = ``(k, b, c, mean)`` shaped to broadcast against a block."""
        k, b, cc, mean = coefs
        tmp = np.empty((min(step, hi - lo),) + x3.shape[1:], dtype=x3.dtype)
        for i in range(lo, hi, step):
            j = min(i + step, hi)
            t = tmp[:j - i]
            d = dx[i:j]
            np.multiply(g3[i:j], k, out=d)
            if folded:
                np.multiply(x3[i:j], b, out=t)
            else:
                np.subtract(x3[i:j], mean, out=t)
                t *= b
            t += cc  # in the cache-sized block, not another pass over dx
            d += t

    def _bn_rows_backward(self, g, x, weight, mean, var, eps, need_dx):
        n, c = x.shape[:2]
        m = x.size // c
        g3 = g.reshape(n, c, -1)
        x3 = x.reshape(n, c, -1)
        with self.errstate():
            rstd = 1.0 / np.sqrt(var + eps)
            # sum(g (x - mean)) and (x - mean) below: where every channel's mean is within 4 standard deviations
            # of 0, as sum(g x) - mean sum(g) and x - mean folded into a per-channel constant (one dot-product
            # pass, rounding at most 5 times that of the centred form); else centred one block of images at a
            # time (a cache-sized temporary), which no large mean can cancel. Each chunk of images (one per
            # thread) writes its own rows of the per-image partial sums and its own blocks of dx.
            folded = bool(np.all(np.abs(mean) * rstd <= 4))
            step = max(1, 65536 // max(1, x3[0].size))
            psum = np.empty((n, c), dtype=x.dtype)
            pdot = np.empty((n, c), dtype=x.dtype)

            def sums(lo, hi):
                np.sum(g3[lo:hi], axis=2, out=psum[lo:hi])
                if folded:
                    pdot[lo:hi] = np.vecdot(g3[lo:hi], x3[lo:hi])
                    return
                tmp = np.empty((min(step, hi - lo),) + x3.shape[1:], dtype=x.dtype)
                for i in range(lo, hi, step):
                    j = min(i + step, hi)
                    t = np.subtract(x3[i:j], mean[:, None], out=tmp[:j - i])
                    pdot[i:j] = np.vecdot(g3[i:j], t)
            self._par(sums, n, 2 * x.size)
            db, dw, k, b, cc = self._bn_grad_coefs(psum, pdot, mean, rstd, weight, m, folded, x.dtype)
            dx = None
            if need_dx:
                dx = np.empty_like(g3)
                coefs = (k[:, None], b[:, None], cc[:, None], mean[:, None])
                self._par(lambda lo, hi: self._bn_dx_blocks(g3, x3, dx, lo, hi, step, coefs, folded), n, 2 * x.size)
                dx = dx.reshape(x.shape)
        return dx, dw, db

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

    # -- relu of float32/float64 arrays: NumPy's maximum and minimum against a scalar run a loop 2
    #    to 3 times slower than against an array of the same length (131072 float32 values: 65
    #    against 24 us on a 2-core AMD EPYC; its comparisons and products with a scalar have no such
    #    cost), so the zero is read from a cached constant block, one cache-sized block of the input
    #    at a time (relu measured 1.4 to 2.4 times faster from 32768 values). NaN propagates as
    #    through the maximum with the scalar (either operand NaN gives NaN; relu(-0.0) is +0.0 as
    #    before). (leaky relu's max(x, s x) of two arrays has no such cost: in blocks, through a
    #    scratch block, it measured slower than the whole-array passes.) The threads split only
    #    arrays from _ELT_PAR_MIN values: a hand-off to the pool costs some 30 to 50 us here, the
    #    time of a pass over several hundred thousand values.
    _ELT_BLOCK = 1 << 15
    _ELT_PAR_MIN = 1 << 20

    def _const_block(self, value: float, dtype):
        """A read-only block of ``_ELT_BLOCK`` copies of ``value`` in ``dtype`` (cached)."""
        key = (float(value), np.signbit(value), dtype)
        block = self._consts.get(key)
        if block is None:
            block = self._consts[key] = np.full(self._ELT_BLOCK, value, dtype=dtype)
            block.flags.writeable = False
        return block

    def _elementwise_blocks(self, fn, x, scratch: bool = False):
        """A new array ``y`` like the C-contiguous ``x``, ``fn(x_block, y_block, scratch_block)``
        writing each flat block (``scratch_block`` a block-sized temporary, or None)."""
        y = np.empty_like(x)
        xf, yf = x.reshape(-1), y.reshape(-1)
        n, blk = xf.size, self._ELT_BLOCK

        def run(b0, b1):
            t = np.empty(min(n, blk), dtype=x.dtype) if scratch else None
            for s in range(b0 * blk, min(n, b1 * blk), blk):
                m = min(blk, n - s)
                fn(xf[s:s + m], yf[s:s + m], None if t is None else t[:m])
        blocks = -(-n // blk)
        if blocks > 1 and n >= self._ELT_PAR_MIN:
            _threads.parallel_chunks(run, blocks)
        else:
            run(0, blocks)
        return y

    def relu(self, x):
        # below one block the plain maximum: the blocked call's own cost (some 4 us) would double a small relu's
        if x.size < self._ELT_BLOCK or x.__class__ is not np.ndarray or x.dtype not in _GEMM_DTYPES or \
                not x.flags.c_contiguous:
            return super().relu(x)
        zero = self._const_block(0.0, x.dtype)
        return self._elementwise_blocks(lambda xb, yb, _: np.maximum(xb, zero[:xb.size], out=yb), x)

    # -- 2x2 max pooling (the MNIST CNN's): the column pairs of each row are the even and odd elements of the
    #    flat planes (1-d strided passes), then the row pairs; cache-sized blocks of planes, split across threads
    _POOL_BLOCK = 1 << 18  # input elements per block

    def max_pool2d_2x2(self, x):
        if x.__class__ is not np.ndarray or x.dtype not in _GEMM_DTYPES or x.ndim != 4 or not x.flags.c_contiguous \
                or x.shape[2] % 2 or x.shape[3] % 2 or not x.size:
            return None
        n, c, h, w = x.shape
        ho, wo = h // 2, w // 2
        planes = n * c
        x2 = x.reshape(planes, h * w)
        best = np.empty((planes, ho * wo), dtype=x.dtype)
        idx = np.empty((planes, ho * wo), dtype=np.int64)
        # flat index of each window's top-left input position
        base = (np.arange(ho, dtype=np.int64)[:, None] * (2 * w) + np.arange(0, w, 2, dtype=np.int64)).reshape(-1)
        step = max(1, self._POOL_BLOCK // (h * w))

        def run(lo, hi):
            for s in range(lo, hi, step):
                e = min(s + step, hi)
                k = (e - s) * ho
                xf = x2[s:e].reshape(-1)
                c0, c1 = xf[0::2], xf[1::2]
                # within a row: the right element wins only when strictly greater (the first maximum is kept)
                mc = np.maximum(c0, c1).reshape(k, 2, wo)
                jc = np.greater(c1, c0).reshape(k, 2, wo)
                b = best[s:e].reshape(k, wo)
                np.maximum(mc[:, 0], mc[:, 1], out=b)
                ir = np.greater(mc[:, 1], mc[:, 0])  # the lower row wins only when strictly greater
                # the winning row's column: jc[:, 1] where ir else jc[:, 0], as bit operations on the masks
                jj = np.bitwise_xor(jc[:, 0], jc[:, 1])
                jj &= ir
                jj ^= jc[:, 0]
                ib = idx[s:e]
                np.multiply(ir.reshape(e - s, -1), w, out=ib, casting="unsafe")
                ib += jj.reshape(e - s, -1)
                ib += base
        self._par(run, planes, x.size)
        if np.isnan(best).any():
            return None  # NaN's rule (the last NaN of a window wins): the general path
        return best.reshape(n, c, ho, wo), idx.reshape(n, c, ho, wo)

    def max_pool_scatter(self, g, idx, plane: int):
        rows = idx.shape[0]
        if g.__class__ is not np.ndarray or not g.flags.c_contiguous or not idx.flags.c_contiguous:
            return super().max_pool_scatter(g, idx, plane)
        gx = np.empty((rows, plane), dtype=g.dtype)
        k = idx.shape[1]

        def run(lo, hi):
            d = gx[lo:hi]
            d[...] = 0
            # one flat index per value (a 1-d assignment runs faster than the (rows, idx) pair)
            flat = idx[lo:hi] + np.arange(0, (hi - lo) * plane, plane, dtype=idx.dtype)[:, None]
            d.reshape(-1)[flat.reshape(-1)] = g[lo:hi].reshape(-1)
        self._par(run, rows, rows * (plane + k))
        return gx

