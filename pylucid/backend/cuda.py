"""The CUDA backend: CuPy, imported lazily so ``import pylucid`` never needs it.

What differs from the shared :class:`ArrayBackend` (see docs/semantics/cuda.md):

* arrays of ``cuda:N`` are allocated on device N (``asarray`` and the kernels
  run under ``cupy.cuda.Device(N)`` whenever more than one GPU is visible);
* float16/bfloat16 matmul stays in half precision and goes to cuBLAS with
  float32 accumulation (tensor cores), instead of the CPU's float32 detour;
  batched half products use ``cublasGemmStridedBatchedEx`` directly, because
  CuPy 14's ``matmul`` upcasts batched half inputs to float32;
* bfloat16 support in CuPy 14 is young: functions listed in ``_BF16_VIA_F32``
  and the sub-libraries (``special``, ``linalg``, ``fft``, ``scipy_linalg``)
  compute half inputs in float32 and round back once;
* ``scatter_add`` is atomic: the summation order of repeated indices, so the
  last bits of a float result, can change from run to run;
* fused kernels (softmax, layer norm, cross-entropy, embedding backward,
  multi-tensor Adam, bias+activation, 16-byte vectorised binary ops): their CUDA sources are in
  :mod:`pylucid.backend.cuda_sources`, compiled and launched by :mod:`pylucid.backend.cuda_launch`,
  and each computes what its function in :mod:`pylucid.backend.reference` computes;
* convolutions and attention go through cuDNN (:mod:`pylucid.backend.cudnn`) where it takes the
  configuration (``conv_nd``, ``conv_transpose_nd``, ``sdpa`` and their backwards return None
  otherwise, and the ops run their own kernels); ``pylucid.backends.cudnn`` holds the switches.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from threading import get_ident as _get_ident

import ml_dtypes
import numpy as np

from .._state import flags as _global_flags
from ..backends import cuda as _cuda_flags
from ..backends import cudnn as _cudnn_flags
from .base import _HALF, _NULL_CTX, ArrayBackend
from . import cuda_launch
from .cuda_launch import (bias_add_kernel, cast_kernel, fast_kernel, get_kernel, int_scalar_inplace_kernel, raw_launcher,
                          strided_copy_kernel)
from .cuda_sources import BIAS_ACT_CODES, CAST_VEC, COPY_MAX_NDIM, FAST_UNARY, OPS_VEC

_cupy = None
_reason = None

_F16 = np.dtype(np.float16)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_HALF_DT = frozenset((_F16, _BF16))
_NULL_PTR = np.uint64(0)  # a kernel's unused pointer argument
_FLAG32 = (np.int32(0), np.int32(1))  # a kernel's int32 flag argument, _FLAG32[bool] (NumPy scalars cost ~1 us to make)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_KERNEL_DTYPES = (_F32, _F64)
#: dtype -> its name: NumPy builds ``dtype.name`` in Python on every read (about 3 us on the H200's host),
#: and the kernel calls name their storage dtypes on every launch
_DTYPE_NAMES: dict = {}


def _dt_name(dt) -> str:
    """``dt.name`` (a NumPy dtype), from :data:`_DTYPE_NAMES`."""
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = dt.name
    return name


_ONE_F32 = np.array(1.0, dtype=np.float32)  # cuBLAS alpha/beta (host pointers, float32 compute type)
_ZERO_F32 = np.array(0.0, dtype=np.float32)
_ONE_F64 = np.array(1.0, dtype=np.float64)
_ZERO_F64 = np.array(0.0, dtype=np.float64)
#: dtype -> (cudaDataType, cublasComputeType, alpha, beta host pointers) of the direct cuBLAS path
#: (CUDA_R_32F 0, CUDA_R_64F 1, CUDA_R_16F 2, CUDA_R_16BF 14; CUBLAS_COMPUTE_32F 68, _64F 70)
_GEMM = {
    _F32: (0, 68, _ONE_F32.ctypes.data, _ZERO_F32.ctypes.data),
    _F64: (1, 70, _ONE_F64.ctypes.data, _ZERO_F64.ctypes.data),
    _F16: (2, 68, _ONE_F32.ctypes.data, _ZERO_F32.ctypes.data),
    _BF16: (14, 68, _ONE_F32.ctypes.data, _ZERO_F32.ctypes.data),
}
_INT32 = 1 << 31
_GEMM_ALGO = -1  # CUBLAS_GEMM_DEFAULT (tensor cores are used for half types whenever possible)
# below this many elements the generic CuPy ufunc is as fast as the vectorised kernel
_VEC_MIN = 1 << 16

#: functions whose bfloat16 inputs are computed in float32 and rounded back. Measured on CuPy 14.2
#: (``benchmarks/gpu_bench.py probe``): ``cumsum`` fails to compile, ``sort`` is refused, and
#: ``where``/``clip``/``round`` return float32 and ``var`` float64 for bfloat16 inputs; the rest of
#: the list are rarely used functions of the same families, routed for safety. Element-wise
#: arithmetic, exp/log/tanh/sqrt, maximum, sum/mean/max/argmax, floor and remainder work natively.
_BF16_VIA_F32 = frozenset({
    "where", "clip", "round", "around", "rint", "fix", "divmod", "fmod", "modf", "frexp", "ldexp", "nextafter",
    "spacing", "copysign", "logaddexp", "logaddexp2", "hypot", "arctan2", "sinc", "i0", "nan_to_num", "sort",
    "argsort", "partition", "argpartition", "cumsum", "cumprod", "nancumsum", "nancumprod", "median", "percentile",
    "quantile", "var", "std", "nansum", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanargmax", "nanargmin",
    "histogram", "bincount", "searchsorted", "unique", "diff", "interp", "convolve", "correlate", "isclose",
    "allclose", "heaviside", "float_power", "fmax", "fmin", "lexsort", "trapezoid",
})
#: ufuncs whose ``accumulate`` CuPy 14 does not implement: a log-step scan stands in (cummax, logcumsumexp)
_SCAN_FALLBACK = frozenset({"maximum", "minimum", "logaddexp", "logaddexp2", "fmax", "fmin"})


def _load():
    global _cupy, _reason
    if _cupy is not None or _reason is not None:
        return _cupy
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            _reason = "CuPy found no CUDA GPU"
            return None
        _cupy = cupy
    except ImportError:
        _reason = "CuPy is not installed"
    except Exception as exc:  # driver missing, no device, ...
        _reason = f"CuPy could not reach a GPU: {exc}"
    return _cupy


def is_available() -> bool:
    return _load() is not None


def unavailable_reason() -> str:
    _load()
    return _reason or ""


def _is_half(a) -> bool:
    return getattr(a, "dtype", None) in _HALF


def _via_f32(fn, restore_dtype=True):
    """Wrap ``fn`` so half-precision array arguments are computed in float32.

    Floating outputs are rounded back to the input's half dtype; complex, integer
    and boolean outputs (``fft``, ``argsort``) keep the dtype the float32 call gave.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        half = None
        for a in args:
            dt = getattr(a, "dtype", None)
            if dt in _HALF:
                half = dt
                break
        if half is None:
            return fn(*args, **kwargs)
        args = tuple(a.astype(_F32) if getattr(a, "dtype", None) in _HALF and hasattr(a, "astype") else a
                     for a in args)
        if half is _BF16 or half == _BF16:
            args = tuple(np.float32(a) if isinstance(a, ml_dtypes.bfloat16) else a for a in args)
        out = fn(*args, **kwargs)
        if not restore_dtype:
            return out
        return _restore(out, half)

    return wrapper


def _restore(out, half):
    if isinstance(out, tuple):
        return tuple(_restore(o, half) for o in out)
    dt = getattr(out, "dtype", None)
    if dt is not None and dt.kind == "f" and dt != half:
        return out.astype(half)
    return out


def _contig(ascontiguousarray, a):
    """``a`` if already C-contiguous (skips CuPy's call, a few microseconds of host time), else a copy."""
    return a if a._c_contiguous and a.ndim else ascontiguousarray(a)


def _contig_shaped(ascontiguousarray, a):
    """:func:`_contig` in ``a``'s own shape: ascontiguousarray makes a 0-d array 1-d, as NumPy's does (a view of
    the copy gets the shape back; an array that was contiguous already is returned as it is)."""
    c = _contig(ascontiguousarray, a)
    return c if c is a or c.shape == a.shape else c.reshape(a.shape)


def _merge_axes(shape, *strides):
    """``(shape, strides...)`` of the same strided walk(s) with length-1 axes dropped and neighbouring axes that
    step as one (in every strides tuple) merged: the copy kernels then divide by fewer dims per element."""
    out = []
    for d, *st in zip(shape, *strides):
        if d == 1:
            continue
        if out and all(p == q * d for p, q in zip(out[-1][1], st)):
            out[-1] = (out[-1][0] * d, st)
        else:
            out.append((d, st))
    if not out:
        return ((1,),) + tuple((0,) for _ in strides)
    return (tuple(d for d, _ in out),) + tuple(tuple(st[i] for _, st in out) for i in range(len(strides)))


def _reshape_is_view(old_shape, old_strides, new_shape) -> bool:
    """Whether ``reshape`` to ``new_shape`` (no -1) can be a view: every run of old axes that one group of new
    axes spans must step as one axis (NumPy's rule; length-1 axes do not count)."""
    old = [(d, st) for d, st in zip(old_shape, old_strides) if d != 1]
    new = [d for d in new_shape if d != 1]
    i = j = 0
    while i < len(old) and j < len(new):
        i0 = i
        po, pn = old[i][0], new[j]
        i += 1
        j += 1
        while po != pn:
            if po < pn:
                po *= old[i][0]
                i += 1
            else:
                pn *= new[j]
                j += 1
        for k in range(i0, i - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return False
    return True


def _mat_layout(x, r, c):
    """How cuBLAS reads the last two axes ``(r, c)`` of ``x``: ``(transpose flag, leading dim)`` or None.

    Row-major (unit column stride, row stride >= c): flag 0 (CUBLAS_OP_N on the column-major
    view, which is the transpose we want); column-major (unit row stride): flag 1. Strides of
    axes of length 1 never matter. Anything else (both strides > 1, negative, unaligned): None.
    """
    e = x.itemsize
    sr, sc = x.strides[-2], x.strides[-1]
    if c == 1:
        sc = e
    if r == 1:
        sr = c * e if sc == e else e
    if sc == e and sr >= c * e and sr % e == 0:
        return 0, sr // e
    if sr == e and sc >= r * e and sc % e == 0:
        return 1, sc // e
    return None


def _batch_stride(x, batch):
    """The single element stride that walks the (broadcast) batch of ``x``, 0 if broadcast, or None."""
    if x.ndim == 2:
        return 0
    xb = x.shape[:-2]
    if math.prod(xb) == 1:
        return 0
    if len(xb) != len(batch) or xb != batch:
        return None  # partly broadcast: the caller materialises it
    stride = None
    expect = None
    for size, st in zip(reversed(xb), reversed(x.strides[:-2])):
        if size == 1:
            continue
        if stride is None:
            stride = st
        elif st != expect:
            return None
        expect = st * size
    if stride is None or stride <= 0 or stride % x.itemsize:
        return None
    return stride // x.itemsize


def _fold_rows(a, m, row_bytes):
    """Rows of ``a`` (batch..., m, k) as one matrix: the row count if every batch axis steps whole rows."""
    expect = m * row_bytes
    for size, st in zip(reversed(a.shape[:-2]), reversed(a.strides[:-2])):
        if size != 1 and st != expect:
            return None
        expect *= size
    return math.prod(a.shape[:-1])


def _log_step_scan(xp, uf, a, axis):
    """Inclusive scan of the associative binary ufunc ``uf`` along ``axis`` (Hillis-Steele, log2(n) passes)."""
    x = xp.moveaxis(a, axis, -1).copy()
    n = x.shape[-1]
    k = 1
    while k < n:
        x[..., k:] = uf(x[..., k:], x[..., :-k])  # the right side is evaluated from the old values first
        k *= 2
    return xp.moveaxis(x, -1, axis)


class _Ufunc:
    """A CuPy ufunc with the bfloat16 route on calls and a scan fallback for ``accumulate``."""

    def __init__(self, xp, uf, name: str) -> None:
        self._xp, self._uf, self.__name__ = xp, uf, name
        self._call = _via_f32(uf) if name in _BF16_VIA_F32 else uf

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def accumulate(self, a, axis=0, dtype=None, out=None):
        kw = {} if out is None else {"out": out}
        try:
            return self._uf.accumulate(a, axis=axis, dtype=dtype, **kw)
        except NotImplementedError:
            half = a.dtype in _HALF
            r = _log_step_scan(self._xp, self._uf, a.astype(_F32) if half else a, axis)
            r = r.astype(dtype or a.dtype, copy=False)
            if out is not None:
                out[...] = r
                return out
            return r

    def __getattr__(self, name: str):
        return getattr(self._uf, name)


class _HalfViaF32:
    """A sub-library (``cupyx.scipy.special``, ``cupy.linalg``, ...) whose functions take half inputs in float32."""

    def __init__(self, mod) -> None:
        self._mod = mod

    def __getattr__(self, name: str):
        fn = getattr(self._mod, name)
        if callable(fn) and not isinstance(fn, type):
            fn = _via_f32(fn)
        setattr(self, name, fn)
        return fn


class _CudaLinalg(_HalfViaF32):
    """``cupy.linalg`` with NumPy's behaviour where CuPy 14 differs.

    * ``solve`` broadcasts the batch dims of ``a`` and ``b`` (NumPy 2 does, CuPy requires equal ones);
    * ``inv``/``solve`` raise ``numpy.linalg.LinAlgError`` for a singular matrix: cuSOLVER returns
      inf/NaN instead, so a non-finite result triggers an exact check (``slogdet`` sign 0).
    """

    def __init__(self, mod, xp) -> None:
        super().__init__(mod)
        self._xp = xp
        self._inv = _via_f32(mod.inv)
        self._solve = _via_f32(mod.solve)
        self._slogdet = _via_f32(mod.slogdet)

    def _check(self, a, out, op):
        xp = self._xp
        if a.size and not bool(xp.isfinite(out).all()) and bool(xp.isfinite(a).all()):
            sign, _ = self._slogdet(a)
            if bool((sign == 0).any()):
                raise np.linalg.LinAlgError(f"{op}: singular matrix")
        return out

    def inv(self, a):
        return self._check(a, self._inv(a), "inv")

    def solve(self, a, b):
        if b.ndim >= 2 and a.shape[:-2] != b.shape[:-2]:
            xp = self._xp
            batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))  # ValueError if they don't broadcast
            a = xp.ascontiguousarray(xp.broadcast_to(a, batch + a.shape[-2:]))
            b = xp.ascontiguousarray(xp.broadcast_to(b, batch + b.shape[-2:]))
        return self._check(a, self._solve(a, b), "solve")


class _VecUfunc:
    """``be.multiply`` & co.: the vectorised binary path on call; ``.outer``, ``.reduce``, ``.at`` from CuPy."""

    def __init__(self, backend, name: str) -> None:
        self._be, self._name = backend, name
        self._uf = getattr(backend.xp, name)
        self.__name__ = name

    def __call__(self, a, b, **kwargs):
        if kwargs:
            return self._uf(a, b, **kwargs)
        return self._be._vec_binary(self._name, a, b)

    def __getattr__(self, name: str):
        return getattr(self._uf, name)


_MISS = object()
_FAST_BLOCK = 256


class _FastLaunch:
    """Low-overhead launches of the small element-wise calls the ops make (``CUDABackend.fast_launch``).

    ``be.add(a, b)`` & co. normally cost a CuPy ufunc dispatch (argument parsing, dtype and
    broadcast resolution, kernel-cache lookup: ~10 us of host time). When the operands are
    plain C-contiguous CuPy arrays of one float dtype and one shape, or an array and a scalar
    (a Python float/int for float32/float64 arrays, a NumPy scalar of the array's own dtype for
    any float dtype), this launches a precompiled one-line kernel on a fresh output instead
    (:func:`cuda_launch.fast_kernel`: same arithmetic as the ufunc). Everything else (keyword
    arguments, broadcasting, strided views, other dtypes, empty arrays, several GPUs, float32
    arrays large enough for the 16-byte vector kernel) takes the ``generic`` callable: exactly
    the previous behaviour. ``.reduce``/``.outer``/``.at``/``.accumulate`` come from ``generic``.

    Pure Python over three injected pieces, so the decisions are testable without a GPU:
    ``nd`` (the array class), ``alloc(shape, dtype)`` and ``build(op, kind, dtype)`` (a kernel
    callable ``k(grid, block, args)`` or None).
    """

    def __init__(self, backend, name: str, generic, nd, alloc, build, unary: bool = False,
                 vec_min=None) -> None:
        self._be, self._name, self._generic = backend, name, generic
        self._nd, self._alloc, self._build = nd, alloc, build
        self._unary = unary
        # float32 arrays from this size on keep the 16-byte vector kernel (bandwidth: see _vec_binary)
        self._vec_min = vec_min
        self.__name__ = name
        # dtype -> kernel (or None: not covered); one table per operand kind, filled on first use
        self._aa: dict = {}
        self._as: dict = {}
        self._sa: dict = {}
        #: dtypes whose Python float/int scalars the kernel takes (weak-scalar rule: the array's dtype wins).
        #: bfloat16 arrays compute in float32 with the scalar as a float32 and round once, as PyTorch's
        #: kernels do (CuPy's ufunc would return float32 for a bfloat16 array times a Python float).
        #: float16 keeps CuPy's ufunc, whose weak-scalar result is already float16.
        self._py_scalar_ok = frozenset((_F32, _F64, _BF16))

    def _kernel(self, table, kind, dt):
        k = table.get(dt, _MISS)
        if k is _MISS:
            k = table[dt] = self._build(self._name, kind, dt)
        return k

    def _scalar(self, s, dt):
        """The scalar as a Python float if it may take the fast path with an array of ``dt``, else None."""
        c = s.__class__
        if c is float:
            return s if dt in self._py_scalar_ok else None
        if c is int:
            # exact in double, so the kernel's single rounding to float32 is the ufunc's
            return float(s) if dt in self._py_scalar_ok and -9007199254740992 <= s <= 9007199254740992 else None
        if c is dt.type:  # a NumPy scalar of the array's own dtype: exact in double
            return float(s)
        return None

    def __call__(self, a, b=_MISS, **kwargs):
        if kwargs or not self._be.fast_launch:
            return self._generic(a, **kwargs) if b is _MISS else self._generic(a, b, **kwargs)
        nd = self._nd
        if self._unary:
            if b is _MISS and a.__class__ is nd and a._c_contiguous:
                n = a.size
                if n:
                    dt = a.dtype
                    k = self._kernel(self._aa, "u", dt)
                    if k is not None:
                        c = self._alloc(a.shape, dt)
                        k(((n + _FAST_BLOCK - 1) // _FAST_BLOCK,), (_FAST_BLOCK,), (a, c, n))
                        return c
            return self._generic(a) if b is _MISS else self._generic(a, b)
        if a.__class__ is nd:
            if b.__class__ is nd:
                # array-array: one dtype, one shape, both C-contiguous, not empty
                dt = a.dtype
                if a._c_contiguous and b._c_contiguous and b.dtype == dt:
                    shape = a.shape
                    n = a.size
                    if n and b.shape == shape and (self._vec_min is None or n < self._vec_min or dt != _F32):
                        k = self._aa.get(dt, _MISS)
                        if k is _MISS:
                            k = self._kernel(self._aa, "aa", dt)
                        if k is not None:
                            c = self._alloc(shape, dt)
                            per = _FAST_BLOCK * 8 if dt in _HALF_DT else _FAST_BLOCK  # FAST_VEC_AA: 8 per thread
                            k(((n + per - 1) // per,), (_FAST_BLOCK,), (a, b, c, n))
                            return c
            elif a._c_contiguous:
                n = a.size
                if n:
                    dt = a.dtype
                    # the commonest call (array times a Python float): the checks of _scalar and
                    # _kernel inlined, as this runs once per element-wise op
                    if b.__class__ is float and dt in self._py_scalar_ok:
                        s = b
                    else:
                        s = self._scalar(b, dt)
                    if s is not None:
                        k = self._as.get(dt, _MISS)
                        if k is _MISS:
                            k = self._kernel(self._as, "as", dt)
                        if k is not None:
                            c = self._alloc(a.shape, dt)
                            k(((n + _FAST_BLOCK - 1) // _FAST_BLOCK,), (_FAST_BLOCK,), (a, s, c, n))
                            return c
        elif b.__class__ is nd and b._c_contiguous:
            n = b.size
            if n:
                dt = b.dtype
                s = self._scalar(a, dt)
                if s is not None:
                    k = self._kernel(self._sa, "sa", dt)
                    if k is not None:
                        c = self._alloc(b.shape, dt)
                        k(((n + _FAST_BLOCK - 1) // _FAST_BLOCK,), (_FAST_BLOCK,), (s, b, c, n))
                        return c
        if b is _MISS:
            return self._generic(a)
        # strided bfloat16 with a Python scalar: give the scalar the array's dtype, so the result stays
        # bfloat16 (NumPy's weak-scalar rule does not reach ml_dtypes' type in CuPy)
        if a.__class__ is nd and a.dtype == _BF16 and b.__class__ in (float, int):
            b = _BF16.type(b)
        elif b.__class__ is nd and b.dtype == _BF16 and a.__class__ in (float, int):
            a = _BF16.type(a)
        return self._generic(a, b)

    def __getattr__(self, name: str):
        return getattr(self._generic, name)



_CUBLAS_DIRECT = None


def _cublas_direct():
    """libcublas itself through ctypes (the library CuPy loaded: found in the process's mappings), with the
    three entry points a captured GEMM needs."""
    global _CUBLAS_DIRECT
    if _CUBLAS_DIRECT is None:
        import ctypes

        path = None
        try:
            with open("/proc/self/maps") as maps:
                for line in maps:
                    name = line.rsplit("/", 1)[-1]
                    if name.startswith("libcublas.so"):
                        path = line.split(None, 5)[-1].strip()
                        break
        except OSError:
            pass
        lib = None
        for candidate in ([path] if path else []) + ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]:
            try:
                lib = ctypes.CDLL(candidate)
                break
            except OSError:
                continue
        if lib is None:
            raise RuntimeError("CUDA graph capture: libcublas could not be loaded for captured GEMMs")
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
        lib.cublasGemmStridedBatchedEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, ll, vp, i, i, ll, vp, vp, i, i,
                                                   ll, i, i, i]
        for fn in (lib.cublasSetStream_v2, lib.cublasGemmEx, lib.cublasGemmStridedBatchedEx):
            fn.restype = i
        _CUBLAS_DIRECT = lib
    return _CUBLAS_DIRECT


def _caller() -> str:
    """``file:line (function)`` of the nearest frame outside the tensor and backend modules."""
    import sys

    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.endswith("_tensor.py") or "/backend/" in f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return "?"
    path = f.f_code.co_filename
    short = path[path.rfind("pylucid/"):] if "pylucid/" in path else path
    return f"{short}:{f.f_lineno} ({f.f_code.co_name})"


class CaptureSyncError(RuntimeError):
    """A host read of device memory (``.item()``, ``.tolist()``, ...) inside a CUDA graph capture."""


#: the number of CUDA graph captures in progress in this process (host reads refuse while it is not 0)
CAPTURING = [0]
#: every CUDA backend made (one per device): ``pylucid.cuda.synchronize`` raises their deferred index errors
_BACKENDS: list = []

class CUDABackend(ArrayBackend):
    """CuPy on one GPU (``cuda:N``)."""

    name = "cuda"
    folds_matmul = True  # _gemm folds a row-major (..., m, k) @ (k, n) into one GEMM (else a strided batch)
    #: kill-switch for every low-overhead path of this class (``_FastLaunch`` element-wise launches,
    #: the reused no-op device context). ``CUDABackend.fast_launch = False`` restores the generic
    #: CuPy calls exactly, at once, for existing backends too (checked per call).
    fast_launch = True
    #: Linear's bias added inside the GEMM through cuBLASLt's bias epilogue (:mod:`.cublaslt`); False: the GEMM
    #: and a separate bias kernel (``PYLUCID_CUBLASLT=0`` at import)
    use_cublaslt = os.environ.get("PYLUCID_CUBLASLT", "1") != "0"
    #: the fast element-wise and cast kernels call ``cuLaunchKernel`` directly with a preallocated
    #: parameter block (``cuda_launch.raw_launcher``) instead of CuPy's ``Function.__call__``.
    #: Read when a kernel is first built; False keeps CuPy's call for kernels built afterwards.
    raw_launch = True

    def __init__(self, index: int) -> None:
        cp = _load()
        super().__init__(cp)
        self.index = index
        n = cp.cuda.runtime.getDeviceCount()
        if index >= n:
            from ..errors import DeviceUnavailable

            raise DeviceUnavailable(f"device cuda:{index}: only {n} CUDA device(s) visible (cuda:0 .. cuda:{n - 1})")
        self.cuda_device = cp.cuda.Device(index)
        # with one visible GPU every allocation lands on it anyway: skip the context switch per call
        self._multi = n > 1
        cuda_launch.one_device = n == 1
        self.ndarray = cp.ndarray
        self._sm_count = None
        self._adam_tables: dict = {}
        self._bias_add: dict = {}
        self._col_counters: dict = {}  # (device, stream) -> the col_sum kernel's arrival counters
        self._copy: dict = {}
        #: ascontiguousarray's launches per layout (see there); reshape's view-or-copy answers per layout
        self._copy_plans: dict = {}
        self._reshape_views: dict = {}
        self._assign: dict = {}
        self._pinned_inflight: list = []  # (event, pinned buffer) of asynchronous uploads not yet known done
        # deferred index checks (check_index_range): [event, slot, low, high, error] not yet read, oldest first
        self._checks: list = []
        self._check_bufs = None  # (device (SLOTS, 2) int64, pinned host memory, its (SLOTS, 2) view, free slots)
        _BACKENDS.append(self)
        #: while a CUDA graph captures: the list that keeps host buffers its copy nodes read alive with the graph
        self.graph_keep: list | None = None
        self.gemm_error = None  # set (with the reason) if the direct cuBLAS path ever failed
        self._cublas_mod = None
        self._lt = None  # the process's cuBLASLt (pylucid.backend.cublaslt) once looked up; False without it
        self._handle = None  # (thread id, cuBLAS handle of this device for that thread)
        self._casts: dict = {}  # (source dtype, target dtype) -> fast cast kernel or None
        self._int_inplace: dict = {}  # (op, integer dtype) -> in-place scalar kernel or None
        self._bn_geo: dict = {}  # (input shape, training) -> batch-norm launch geometry (see _bn_geometry)
        self._col_geo: dict = {}  # column-sum geometry -> its launch arguments (see _col_sum_geometry)
        self._gemm_geo: dict = {}  # operand shapes/strides/dtypes -> the cuBLAS call of _gemm (see there)
        self._bn_hp: dict = {}  # (compute dtype, eps, momentum) -> their kernel scalars
        self._ln_hp: dict = {}  # (rows, cols, compute dtype, eps) -> the layer-norm forward's kernel scalars
        self._cudnn_mod = None  # pylucid.backend.cudnn once looked up; False when it is unavailable
        fast_ok = hasattr(cp.ndarray, "_c_contiguous")  # CuPy's C-level flag; without it: generic calls only
        nd = cp.ndarray  # the array class, and its constructor as the allocator (what cupy.empty calls)
        for op in OPS_VEC:
            generic = _VecUfunc(self, op)
            setattr(self, op, _FastLaunch(self, op, generic, nd, nd, self._fast_kernel, vec_min=_VEC_MIN)
                    if fast_ok else generic)
        for op in FAST_UNARY:
            if fast_ok:
                setattr(self, op, _FastLaunch(self, op, self._resolve(op), nd, nd, self._fast_kernel, unary=True))
        self.divide = self.true_divide

    # -- device context ----------------------------------------------------------
    def device_ctx(self):
        """``cupy.cuda.Device(N)`` as a context, or a no-op with a single visible GPU."""
        if self._multi:
            return self.cuda_device
        return _NULL_CTX if self.fast_launch else contextlib.nullcontext()  # nullcontext is stateless: reuse one

    def _fast_kernel(self, op: str, kind: str, dt):
        """The fast element-wise kernel for ``_FastLaunch`` (None: keep the generic call).

        Only with one visible GPU: the kernel function is bound to the device it was loaded on,
        and ``_FastLaunch`` keeps one per dtype.
        """
        if self._multi:
            return None
        with self.cuda_device:
            k = fast_kernel(op, kind, dt)
        return None if k is None else raw_launcher(k, kind) if self.raw_launch else k

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        fn = self._resolve(name)
        setattr(self, name, fn)
        return fn

    def _resolve(self, name: str):
        """What ``be.<name>`` is without a fast path: the CuPy function, with the bfloat16/scan fixes."""
        xp = self.xp
        fn = getattr(xp, name)
        if isinstance(fn, xp.ufunc) and (name in _BF16_VIA_F32 or name in _SCAN_FALLBACK):
            fn = _Ufunc(xp, fn, name)  # keeps .reduce/.at/.outer; fixes .accumulate
        elif name in _BF16_VIA_F32 and callable(fn):
            fn = _via_f32(fn)
        return fn

    def tril(self, a, k=0):
        if a.dtype == _BF16:  # CuPy returns float32 for bfloat16; zero bits are +0.0, so mask the raw words
            return self.xp.tril(a.view(np.uint16), k).view(_BF16)
        return self.xp.tril(a, k)

    def triu(self, a, k=0):
        if a.dtype == _BF16:
            return self.xp.triu(a.view(np.uint16), k).view(_BF16)
        return self.xp.triu(a, k)

    # -- sub-libraries (built on first use, then plain instance attributes) ---------------
    @functools.cached_property
    def special(self):
        import cupyx.scipy.special

        return _HalfViaF32(cupyx.scipy.special)

    @functools.cached_property
    def scipy_linalg(self):
        import cupyx.scipy.linalg

        return _HalfViaF32(cupyx.scipy.linalg)

    @functools.cached_property
    def linalg(self):
        return _CudaLinalg(self.xp.linalg, self.xp)

    @functools.cached_property
    def fft(self):
        return _HalfViaF32(self.xp.fft)

    # -- conversion ------------------------------------------------------------------
    def can_sync(self) -> bool:
        """False while a CUDA graph captures: an op must not branch on device values read on the host then."""
        return not CAPTURING[0]

    #: deferred index checks in flight at once; one more waits for the oldest (each lookup queues three kernels or
    #: more, so 256 lookups ahead of the GPU is deeper than CUDA's own launch queue lets the host run ahead)
    CHECK_SLOTS = 256

    def check_index_range(self, idx, low: int, high: int, error) -> None:
        """Raise ``error(lo, hi)`` when an index of ``idx`` lies outside ``[low, high)`` (see the base class), without
        waiting for the GPU.

        Reading the indices on the host would stall the host until every queued kernel has run, once per lookup
        (twice per GPT-2 step, ~0.6 ms each and the overlap of host and device lost). Instead one kernel writes the
        indices' smallest and largest value, an asynchronous copy on the current stream brings the pair to pinned
        host memory, and the pair is compared once the copy has run: at the next check that finds it done, at
        ``pylucid.cuda.synchronize()`` and before every copy to the host (``.item()``, ``.tolist()``, ``.numpy()``,
        printing), where the IndexError is raised, as PyTorch's device-side assert surfaces at a later call. Until
        then the lookup has read wrapped-around rows (CuPy's indexing rule) and the embedding backward kernels skip
        out-of-range indices: nothing is read or written out of bounds. No check inside a CUDA graph capture.
        """
        if not idx.size or CAPTURING[0]:
            return
        cp = self.xp
        with self.device_ctx():
            if self._checks:
                self._poll_checks(wait_oldest=len(self._checks) >= self.CHECK_SLOTS)
            if self._check_bufs is None:
                mem = cp.cuda.alloc_pinned_memory(self.CHECK_SLOTS * 16)
                host = np.frombuffer(mem, np.int64, 2 * self.CHECK_SLOTS).reshape(self.CHECK_SLOTS, 2)
                self._check_bufs = (self.ndarray((self.CHECK_SLOTS, 2), np.int64), mem, host,
                                    list(range(self.CHECK_SLOTS)))
            dev, mem, _, free = self._check_bufs
            if idx.dtype != np.int64 and idx.dtype != np.int32:
                idx = idx.astype(np.int64)
            elif not idx._c_contiguous:
                idx = cp.ascontiguousarray(idx)
            n = idx.size
            slot = free.pop()
            threads = min(1024, max(32, 1 << (n - 1).bit_length()))  # a power of two (the tree's halving)
            get_kernel("index_range", idx.dtype)((1,), (threads,), (idx, n, dev[slot]))
            stream = cp.cuda.get_current_stream()
            cp.cuda.runtime.memcpyAsync(mem.ptr + 16 * slot, dev[slot].data.ptr, 16,
                                        cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            self._checks.append((stream.record(), slot, low, high, error))

    def _poll_checks(self, wait_all: bool = False, wait_oldest: bool = False) -> None:
        """Compare the deferred index checks whose copies have run (``wait_all``: wait for every one;
        ``wait_oldest``: for the oldest) and raise the first failure's IndexError; the other pending checks are
        dropped with it (they would mostly repeat it)."""
        pend = self._checks
        _, _, host, free = self._check_bufs
        while pend:
            ev, slot, low, high, error = pend[0]
            if wait_all or wait_oldest:
                ev.synchronize()
                wait_oldest = False
            elif not ev.done:
                return
            pend.pop(0)
            lo, hi = int(host[slot, 0]), int(host[slot, 1])
            free.append(slot)
            if lo < low or hi >= high:
                for rest in pend:
                    free.append(rest[1])
                pend.clear()
                exc = error(lo, hi)
                if hasattr(exc, "add_note"):
                    exc.add_note("(found on the GPU after the call returned; CUDA reports a bad index at the next "
                                 "synchronisation or copy to the host, here)")
                raise exc

    def raise_index_errors(self) -> None:
        """Wait for the deferred index checks of this device and raise the first failure (see
        :meth:`check_index_range`); no-op inside a CUDA graph capture."""
        if self._checks and not CAPTURING[0]:
            with self.device_ctx():
                self._poll_checks(wait_all=True)

    def to_numpy(self, a, what: str = "a copy to the host"):
        if self._checks and not CAPTURING[0]:
            self.raise_index_errors()
        if CAPTURING[0] and isinstance(a, self.xp.ndarray):
            raise CaptureSyncError(
                f"{what} (called at {_caller()}): reads device memory on the host, which a CUDA graph capture "
                "cannot contain (the values do not exist until the graph is replayed); keep host reads (.item(), "
                ".tolist(), .numpy(), printing, data-dependent shapes) outside the captured region")
        if isinstance(a, self.xp.ndarray):
            if a.dtype == _BF16:
                # move the raw 16-bit words: independent of CuPy's bfloat16 export support
                return self.xp.asnumpy(a.view(np.uint16)).view(_BF16)
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def asarray(self, data, dtype=None):
        cp = self.xp
        with self.device_ctx():
            if isinstance(data, cp.ndarray):
                if self._multi and data.device.id != self.index:
                    data = data.copy()  # peer copy onto this device
                return data if dtype is None or data.dtype == dtype else data.astype(dtype)
            if self.graph_keep is not None:
                return self._upload_captured(np.asarray(data, dtype=dtype))
            if dtype is not None and np.dtype(dtype) == _BF16 or getattr(data, "dtype", None) == _BF16:
                host = np.asarray(data, dtype=_BF16)
                # (ascontiguousarray makes a 0-d array 1-d: the reshape keeps 0-d tensors 0-d)
                return cp.asarray(np.ascontiguousarray(host).view(np.uint16)).view(_BF16).reshape(host.shape)
            return cp.asarray(data, dtype=dtype)

    def inplace(self, op: str, a, b):
        """``a = a <op> b`` in ``a``'s storage (see the base class) through the fast element-wise kernels, written
        straight back into ``a`` (each element is read and written by one thread, so the output may be the input),
        where :class:`_FastLaunch` would take the call out of place: C-contiguous ``a`` and ``b`` of one dtype and
        shape, or ``a`` with a scalar it takes; an int32/int64 ``a`` plus, minus or times a Python int in its range
        (a step counter) by an integer kernel. Everything else: CuPy's ufunc with ``out=a``, as before (~20 us of
        host time a call against ~5 us here)."""
        fl = self.__dict__.get(op)
        if fl.__class__ is _FastLaunch and self.fast_launch and a.__class__ is self.ndarray and a._c_contiguous:
            n = a.size
            dt = a.dtype
            if n and b.__class__ is self.ndarray:
                if b._c_contiguous and b.dtype == dt and b.shape == a.shape and (
                        fl._vec_min is None or n < fl._vec_min or dt != _F32):
                    k = fl._kernel(fl._aa, "aa", dt)
                    if k is not None:
                        per = _FAST_BLOCK * 8 if dt in _HALF_DT else _FAST_BLOCK  # FAST_VEC_AA: 8 per thread
                        k(((n + per - 1) // per,), (_FAST_BLOCK,), (a, b, a, n))
                        return a
            elif n and dt.kind == "i":
                if b.__class__ is int and -(1 << (8 * dt.itemsize - 1)) <= b < (1 << (8 * dt.itemsize - 1)):
                    k = self._int_inplace.get((op, dt), _MISS)
                    if k is _MISS:
                        k = self._int_inplace[(op, dt)] = self._int_inplace_kernel(op, dt)
                    if k is not None:
                        # the scalar's two's-complement bits in the 64-bit slot (the kernel reads a long long)
                        k(((n + _FAST_BLOCK - 1) // _FAST_BLOCK,), (_FAST_BLOCK,), (a, b & 0xFFFFFFFFFFFFFFFF, n))
                        return a
            elif n:
                s = fl._scalar(b, dt)
                if s is not None:
                    k = fl._kernel(fl._as, "as", dt)
                    if k is not None:
                        k(((n + _FAST_BLOCK - 1) // _FAST_BLOCK,), (_FAST_BLOCK,), (a, s, a, n))
                        return a
        getattr(self.xp, op)(a, b, out=a)
        return a

    def _int_inplace_kernel(self, op: str, dt):
        """The integer in-place scalar kernel of ``op`` for ``dt`` (None: not covered, several GPUs, or NVRTC
        refused it: CuPy's ufunc runs)."""
        if self._multi:
            return None
        with self.cuda_device:
            k = int_scalar_inplace_kernel(op, dt)
        return None if k is None else raw_launcher(k, "int_s") if self.raw_launch else k

    def astype(self, a, np_dtype, copy=True):
        """``a.astype``; contiguous float conversions (autocast's casts) launch one precompiled kernel."""
        if not copy and a.__class__ is self.ndarray and a.dtype == np_dtype:
            return a  # what CuPy's astype returns here, without its call
        if a.__class__ is self.ndarray and a._c_contiguous and self.fast_launch and not self._multi and a.size:
            src = a.dtype
            dst = np_dtype if np_dtype.__class__ is src.__class__ else np.dtype(np_dtype)
            if src != dst:
                k = self._casts.get((src, dst), _MISS)
                if k is _MISS:
                    k = cast_kernel(src, dst)
                    if k is not None and self.raw_launch:
                        k = raw_launcher(k, "cast")
                    self._casts[(src, dst)] = k
                if k is not None:
                    n = a.size
                    c = self.ndarray(a.shape, dst)
                    per_block = _FAST_BLOCK * CAST_VEC
                    k(((n + per_block - 1) // per_block,), (_FAST_BLOCK,), (a, c, n))
                    return c
        return a.astype(np_dtype, copy=copy)

    # -- GELU: one kernel each way (the bias_act kernels without a bias) ---------------------
    def gelu(self, x, approximate: str = "none", float_out: bool = False):
        if self.fast_launch and x.dtype in _GEMM:
            return self._bias_act("bias_act_fwd", None, x, None, "gelu_tanh" if approximate == "tanh" else "gelu",
                                  float_out)
        return super().gelu(x, approximate, float_out)

    def gelu_backward(self, g, x, approximate: str = "none"):
        if self.fast_launch and x.dtype in _GEMM and g.shape == x.shape and (
                g.dtype == x.dtype or (x.dtype in _HALF and g.dtype == _F32)):
            return self._bias_act("bias_act_bwd", g, x, None, "gelu_tanh" if approximate == "tanh" else "gelu")
        return super().gelu_backward(g, x, approximate)

    # -- numerics that need care -------------------------------------------------------
    def matmul(self, a, b):
        """``a @ b``: straight to cuBLAS for float16/bfloat16/float32/float64 (see :meth:`_gemm`).

        Half precision stays half (float32 accumulation, tensor cores); 1-D operands are
        promoted to matrices as NumPy does; other dtypes (complex, integer) use CuPy's matmul.
        """
        cp = self.xp
        dt = a.dtype
        if dt in _GEMM and b.dtype == dt and self.fast_launch:
            if a.ndim >= 2 and b.ndim >= 2:
                out = self._gemm(a, b)
                if out is not None:
                    return out
            elif a.ndim >= 1 and b.ndim >= 1:
                a2 = a[None, :] if a.ndim == 1 else a
                b2 = b[:, None] if b.ndim == 1 else b
                out = self._gemm(a2, b2)
                if out is not None:
                    if a.ndim == 1 and b.ndim == 1:
                        return out.reshape(())
                    if b.ndim == 1:
                        return out[..., 0]
                    return out[..., 0, :]
        if dt not in _HALF or b.dtype != dt:
            return cp.matmul(a, b)
        # half precision without the direct path (fast_launch off, or a shape cuBLAS refused)
        a32, b32 = a.astype(_F32), b.astype(_F32)
        return cp.matmul(a32, b32).astype(dt)

    def ascontiguousarray(self, a):
        """``a`` as a C-contiguous array: ``a`` itself if it already is, else one strided-copy kernel
        (:func:`cuda_sources.strided_copy_source`, up to six axes, 2/4/8-byte items) launched directly;
        other cases take CuPy's ``ascontiguousarray``, whose elementwise launch costs ~20 us of host time."""
        nd = a.ndim
        if nd and a._c_contiguous:
            return a
        n = a.size
        if (self.fast_launch and not self._multi and 0 < nd and n and a.__class__ is self.ndarray
                and a.itemsize in (2, 4, 8)):
            ptr = a.data.ptr
            # the launch of a layout met before (shape, strides, item size, 16-byte alignment): remembered, it skips
            # the axis merging below (attention's head transposes repeat a few layouts every step)
            key = (a.shape, a.strides, a.itemsize, not ptr % 16)
            got = self._copy_plans.get(key)
            if got is None:
                got = self._copy_plan(a, n, not ptr % 16)
                if got is None:
                    return self.xp.ascontiguousarray(a)
                if len(self._copy_plans) > 1024:  # layouts that change every call: start again
                    self._copy_plans.clear()
                self._copy_plans[key] = got
            k, grid, tail = got
            out = self.ndarray(a.shape, a.dtype)
            k((grid,), (256,), (a, out) + tail)
            return out
        return self.xp.ascontiguousarray(a)

    def _copy_plan(self, a, n, aligned):
        """``(kernel, grid, arguments after the two pointers)`` of :meth:`ascontiguousarray`'s strided copy of
        ``a``'s layout, or None (more merged axes than the kernel takes, or no kernel)."""
        size = a.itemsize
        shape, strides = _merge_axes(a.shape, a.strides)
        nd = len(shape)
        if nd > COPY_MAX_NDIM:
            return None
        last = shape[-1]
        vec = 16 // size
        if strides[-1] == size and last % vec == 0 and aligned and all(not st % 16 for st in strides[:-1]):
            # a contiguous last axis: 16-byte words (vec elements a thread)
            shape = shape[:-1] + (last // vec,)
            strides = strides[:-1] + (16,)
            size = 16
        k = self._copy.get(size, _MISS)
        if k is _MISS:
            k = self._copy[size] = strided_copy_kernel(size)
        if k is None:
            return None
        pad = COPY_MAX_NDIM - nd
        words = n * a.itemsize // size
        return k, self._grid(words), (words, nd) + (1,) * pad + shape + (0,) * pad + strides

    @staticmethod
    def address(a) -> int:
        return a.data.ptr

    def copy_into(self, dst, src):
        """``dst[...] = src`` for arrays of one shape and dtype (``dst`` a strided view not overlapping ``src``)
        in one strided-assign kernel (16-byte words where both last axes are contiguous), else CuPy's copy."""
        if (self.fast_launch and not self._multi and dst.__class__ is self.ndarray and src.__class__ is self.ndarray
                and dst.dtype == src.dtype and dst.shape == src.shape and dst.size and dst.itemsize in (2, 4, 8)):
            size = dst.itemsize
            shape, sst, dstr = _merge_axes(dst.shape, src.strides, dst.strides)
            nd = len(shape)
            if nd <= COPY_MAX_NDIM:
                last, vec = shape[-1], 16 // size
                if (sst[-1] == size and dstr[-1] == size and last % vec == 0 and not (src.data.ptr | dst.data.ptr) % 16
                        and all(not (p % 16 or q % 16) for p, q in zip(sst[:-1], dstr[:-1]))):
                    shape, sst, dstr = shape[:-1] + (last // vec,), sst[:-1] + (16,), dstr[:-1] + (16,)
                    size = 16
                k = self._assign.get(size, _MISS)
                if k is _MISS:
                    k = self._assign[size] = strided_copy_kernel(size, True)
                if k is not None:
                    words = dst.size * dst.itemsize // size
                    pad = COPY_MAX_NDIM - nd
                    k((self._grid(words),), (256,), (src, dst, words, nd) + (1,) * pad + shape + (0,) * pad + sst +
                      (0,) * pad + dstr)
                    return dst
        dst[...] = src
        return dst

    def reshape(self, a, shape):
        """``a.reshape(shape)``; when that needs a copy, the copy is :meth:`ascontiguousarray`'s kernel (CuPy's own
        copy inside ``reshape`` is its generic element-wise kernel, about half as fast on attention's
        head transposes)."""
        if not a._c_contiguous and self.fast_launch and a.__class__ is self.ndarray and a.size:
            if shape.__class__ is tuple:
                key = (a.shape, a.strides, shape)
                view = self._reshape_views.get(key)
                if view is None:
                    view = _reshape_is_view(a.shape, a.strides, shape)
                    if len(self._reshape_views) > 1024:  # layouts that change every call: start again
                        self._reshape_views.clear()
                    self._reshape_views[key] = view
            else:
                view = _reshape_is_view(a.shape, a.strides, shape)
            if not view:
                a = self.ascontiguousarray(a)
        return a.reshape(shape)

    def matmul_to(self, a, b, dtype):
        """``a @ b`` as float32 from half operands in one cuBLAS call (C written as float32), else the base."""
        if (dtype == _F32 and a.dtype in _HALF and b.dtype == a.dtype and a.ndim >= 2 and b.ndim >= 2
                and self.fast_launch):
            out = self._gemm(a, b, _F32)
            if out is not None:
                return out
        return super().matmul_to(a, b, dtype)

    def sum_to_shape_as(self, g, shape, dtype):
        """A bias gradient in float32 from a half ``g``: :meth:`_sum_leading` accumulates and writes float32."""
        if dtype == _F32 and g.dtype in _HALF and self.fast_launch and g.__class__ is self.ndarray:
            lead = g.ndim - len(shape)
            if lead > 0 and tuple(g.shape[lead:]) == tuple(shape):
                out = self._sum_leading(g, tuple(range(lead)), False, _F32)
                if out is not None:
                    return out
        return super().sum_to_shape_as(g, shape, dtype)

    def _gemm(self, a, b, out_dtype=None, epilogue=1, bias=None):
        """``a @ b`` for operands of >= 2 dims through one cuBLAS call, or None (caller falls back).

        No copies for the layouts the ops produce: each operand's last two axes may be
        row-major with any row stride (a slice of a wider matrix, ``qkv[..., :d]``) or
        column-major (a ``.T``/``transpose(-2, -1)`` view); cuBLAS reads them with the
        matching transpose flag and leading dimension. The batch axes must collapse to one
        stride (or be broadcast: stride 0) for ``cublasGemmStridedBatchedEx``; anything else
        is copied to a contiguous operand first. A 2-D right operand folds a row-major
        left operand's batch into the rows: one GEMM (the Linear-layer case).
        Row-major ``C = A @ B`` is column-major ``C^T = B^T A^T``, so B is passed first.
        Float32 uses ``CUBLAS_COMPUTE_32F`` (no TF32, as PyTorch's default; TF32 when
        ``pylucid.backends.cuda.matmul.allow_tf32``); half types
        accumulate in float32 and round once. ``epilogue``/``bias``: a cuBLASLt epilogue (see
        :meth:`_cublas`); products that are not one GEMM then return None.
        """
        # A product with the shapes, strides and dtypes of an earlier one that went to cuBLAS without a copy makes
        # the same call (the layouts depend on nothing else): remembered, it skips the layout work below, a few us
        # per call (a GPT-2 step makes ~150 of them)
        key = (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype, out_dtype, epilogue)
        geo = self._gemm_geo.get(key)
        if geo is not None:
            c_shape, lb, la, n, m, k, sb, sa, nb = geo
            with self.device_ctx():
                c = self.ndarray(c_shape, out_dtype or a.dtype)
                return c if self._cublas(lb, la, n, m, k, b, a, sb, sa, c, nb, epilogue, bias) else None
        cp = self.xp
        m, k = a.shape[-2], a.shape[-1]
        n = b.shape[-1]
        if b.shape[-2] != k or not (m and n and k) or max(m, n, k) >= _INT32 or a.size >= _INT32 or b.size >= _INT32:
            return None  # empty products and 32-bit cuBLAS dimensions: CuPy's matmul
        dt = a.dtype
        batch_a, batch_b = a.shape[:-2], b.shape[:-2]
        if batch_a == batch_b or not batch_b:
            batch = batch_a
        elif not batch_a:
            batch = batch_b
        else:
            try:
                batch = tuple(np.broadcast_shapes(batch_a, batch_b))
            except ValueError:
                return None  # CuPy raises the shape error
        nb = math.prod(batch)
        if nb == 0:
            return None
        copied = False
        la = _mat_layout(a, m, k)
        if la is None:
            a = self.ascontiguousarray(a)
            la, copied = (0, k), True
        lb = _mat_layout(b, k, n)
        if lb is None:
            b = self.ascontiguousarray(b)
            lb, copied = (0, n), True
        e = dt.itemsize
        with self.device_ctx():
            if nb > 1 and not batch_b and la[0] == 0:
                rows = _fold_rows(a, m, la[1] * e)
                if rows is not None:  # (batch..., m, k) rows of one row-major matrix: a single GEMM
                    c = self.ndarray(batch + (m, n), out_dtype or dt)
                    if not self._cublas(lb, la, n, rows, k, b, a, 0, 0, c, 1, epilogue, bias):
                        return None
                    if not copied:
                        self._remember_gemm(key, (c.shape, lb, la, n, rows, k, 0, 0, 1))
                    return c
            if nb > 1 and epilogue != 1:
                return None
            sa = _batch_stride(a, batch)
            if sa is None:
                a = self.ascontiguousarray(cp.broadcast_to(a, batch + (m, k)))
                la, sa, copied = (0, k), m * k, True
            sb = _batch_stride(b, batch)
            if sb is None:
                b = self.ascontiguousarray(cp.broadcast_to(b, batch + (k, n)))
                lb, sb, copied = (0, n), k * n, True
            c = self.ndarray(batch + (m, n), out_dtype or dt)
            if not self._cublas(lb, la, n, m, k, b, a, sb, sa, c, nb, epilogue, bias):
                return None
            if not copied:
                self._remember_gemm(key, (c.shape, lb, la, n, m, k, sb, sa, nb))
            return c

    def _remember_gemm(self, key, geo) -> None:
        """Keep the cuBLAS call of a product made without copies (see :meth:`_gemm`)."""
        if len(self._gemm_geo) > 1024:  # shapes that change every call: start again
            self._gemm_geo.clear()
        self._gemm_geo[key] = geo

    def prepare_capture(self, stream_ptr: int) -> None:
        """Allocate what the ops need per stream before ``stream_ptr`` starts a CUDA graph capture (nothing may be
        allocated outside the graph's pool during it): the cuBLASLt workspace of that stream and the column
        sums' arrival counters."""
        cp = self.xp
        key = (cp.cuda.runtime.getDevice(), stream_ptr)
        if key not in self._col_counters:
            self._col_counters[key] = cp.zeros(4096, dtype=np.uint32)
        if not self.use_cublaslt:
            return
        lt = self._lt
        if lt is None:
            from .cublaslt import cublaslt

            lt = self._lt = cublaslt() or False
        if lt:
            lt.workspace(self.xp, self.xp.cuda.runtime.getDevice(), stream_ptr)

    def _cublas(self, lb, la, n, m, k, b, a, sb, sa, c, nb, epilogue=1, bias=None):
        """``C(col-major n x m) = op(B) op(A)``: with an epilogue (``bias`` added over C's rows), cuBLASLt
        (:mod:`.cublaslt`); else cublasGemmEx, or its strided-batched form for ``nb > 1``.

        False (and ``gemm_error`` set) if cuBLAS refused the call, or if an epilogue was asked for and
        cuBLASLt cannot run it: the caller falls back.
        """
        cp = self.xp
        cublas = self._cublas_mod
        if cublas is None:
            from cupy_backends.cuda.libs import cublas

            self._cublas_mod = cublas
        cuda_dt, compute, one, zero = _GEMM[a.dtype]
        if a.dtype == _F32 and _cuda_flags.matmul.allow_tf32:
            compute = 77  # CUBLAS_COMPUTE_32F_FAST_TF32: float32 data, TF32 tensor-core products
        c_dt = cuda_dt if c.dtype == a.dtype else _GEMM[c.dtype][0]  # float32 C from half A, B (matmul_to)
        try:
            # CuPy's handle is per thread and device (looked up through a runtime call): cached per thread.
            # CuPy's wrappers bind it to the current stream themselves (cublasSetStream per call).
            tid = _get_ident()
            cached = self._handle
            if cached is not None and cached[0] == tid:
                handle = cached[1]
            else:
                with self.device_ctx():
                    handle = cp.cuda.device.get_cublas_handle()
                self._handle = (tid, handle)
            # cuBLASLt only for an epilogue: for plain products its call costs more host time than cublasGemmEx's
            # (about 2-3 us more per call on the H200's host, measured at GPT-2's shapes)
            if epilogue != 1 and nb == 1 and self.use_cublaslt:
                lt = self._lt
                if lt is None:
                    from .cublaslt import cublaslt

                    lt = self._lt = cublaslt() or False
                if lt and lt.matmul(cp, handle, cp.cuda.get_current_stream().ptr, lb[0], la[0], n, m, k, b.data.ptr,
                                    lb[1], a.data.ptr, la[1], c.data.ptr, n, cuda_dt, c_dt, compute,
                                    1 if compute == 70 else 0, one, zero, epilogue,
                                    0 if bias is None else bias.data.ptr,
                                    None if bias is None else _GEMM[bias.dtype][0]):
                    return True
            if epilogue != 1:
                return False
            if CAPTURING[0]:
                # CuPy's cuBLAS wrappers refuse to run while a stream captures (although cuBLAS captures fine):
                # the same two calls go to libcublas directly, on the capturing stream
                lib = _cublas_direct()
                status = lib.cublasSetStream_v2(handle, cp.cuda.get_current_stream().ptr)
                if not status and nb == 1:
                    status = lib.cublasGemmEx(handle, lb[0], la[0], n, m, k, one, b.data.ptr, cuda_dt, lb[1],
                                              a.data.ptr, cuda_dt, la[1], zero, c.data.ptr, c_dt, n, compute,
                                              _GEMM_ALGO)
                elif not status:
                    status = lib.cublasGemmStridedBatchedEx(handle, lb[0], la[0], n, m, k, one, b.data.ptr, cuda_dt,
                                                            lb[1], sb, a.data.ptr, cuda_dt, la[1], sa, zero,
                                                            c.data.ptr, c_dt, n, m * n, nb, compute, _GEMM_ALGO)
                if status:
                    self.gemm_error = f"cuBLAS status {status} during a CUDA graph capture"
                    return False
                return True
            if nb == 1:
                cublas.gemmEx(handle, lb[0], la[0], n, m, k, one, b.data.ptr, cuda_dt, lb[1], a.data.ptr, cuda_dt,
                              la[1], zero, c.data.ptr, c_dt, n, compute, _GEMM_ALGO)
            else:
                cublas.gemmStridedBatchedEx(handle, lb[0], la[0], n, m, k, one, b.data.ptr, cuda_dt, lb[1], sb,
                                            a.data.ptr, cuda_dt, la[1], sa, zero, c.data.ptr, c_dt, n, m * n, nb,
                                            compute, _GEMM_ALGO)
        except Exception as exc:  # pragma: no cover - depends on the CuPy/cuBLAS build
            self.gemm_error = f"{type(exc).__name__}: {exc}"
            return False
        return True

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        if dtype is None and axis is not None and a.dtype in _GEMM and self.fast_launch:
            out = self._sum_leading(a, axis, keepdims)
            if out is not None:
                return out
        if dtype is None and a.dtype in _HALF:
            # accumulate half precision in float32 (as PyTorch does), round once
            return self.astype(self.xp.sum(self.astype(a, _F32), axis=axis, keepdims=keepdims), a.dtype)
        return self.xp.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)

    def _sum_leading(self, a, axis, keepdims, out_dtype=None):
        """Sum of a C-contiguous float array over its leading axes, or None.

        The bias and norm-weight gradients (sum over batch and tokens) are column sums of an ``(M, N)``
        view, which CuPy's generic reduction runs slowly (one thread per output column walking a strided
        column). The ``col_sum`` kernel sums row chunks of it, enough chunks to fill the GPU, with 16-byte
        loads and float32 accumulation for the half types (float64 for float64); the last block of each
        column group adds the chunks' partial sums in a fixed order, in the same launch, so the result is
        deterministic and rounded once. (It replaced a ones-GEMV through cuBLAS for the half types: ~30 us of
        host time per call, and 2.6x the memory-bound time at GPT-2's bias-gradient shapes on the H200.)
        ``out_dtype``: float32 from half input (a bias gradient under autocast), else ``a``'s dtype.
        """
        nd = a.ndim
        axes = (axis,) if axis.__class__ is int else tuple(axis)
        j = len(axes)
        if not j or j >= nd or not a._c_contiguous:
            return None
        for i, ax in enumerate(sorted(ax + nd if ax < 0 else ax for ax in axes)):
            if ax != i:
                return None
        shape = a.shape
        m = math.prod(shape[:j])
        n = a.size // m if m else 0
        if m < 2 or not n or m >= _INT32 or n >= _INT32:
            return None
        dt = a.dtype
        acc = _F64 if dt == _F64 else _F32
        out_dt = out_dtype or dt
        if out_dt not in (dt, acc):
            return None
        out_shape = (1,) * j + shape[j:] if keepdims else shape[j:]
        with self.device_ctx():
            return self._col_sum(a, m, n, n, out_dt, out_shape)

    _COL_BLOCKS_PER_SM, _COL_CHUNK_ROWS, _COL_MAX_CHUNKS = 2, 16, 64

    def _col_sum(self, a, m: int, n: int, ld: int, out_dt, shape=None, split: int | None = None):
        """Column sums of the ``(m, n)`` matrix at ``a``'s data pointer with row stride ``ld`` elements (a
        contiguous array, or a block of columns of one): a new array of ``out_dt`` and ``shape`` (``(n,)`` by
        default; its own buffer, not a view), by the ``col_sum`` kernel (see :meth:`_sum_leading`). With
        ``split``: two new arrays from the one launch, the sums of the first ``split`` columns and of the rest."""
        dt = a.dtype
        aligned = not a.data.ptr % 16
        key = (m, n, ld, dt, out_dt, split, aligned)
        geo = self._col_geo.get(key)
        if geo is None:
            geo = self._col_geo[key] = self._col_sum_geometry(m, n, ld, dt, out_dt, split, aligned)
        acc, gx, chunks, scalars, kernel = geo
        c = self.ndarray(shape or (n,), out_dt) if split is None else self.ndarray((split,), out_dt)
        c2 = c if split is None else self.ndarray((n - split,), out_dt)
        counters = self._col_sum_counters(gx) if chunks > 1 else None
        if counters is None and chunks > 1:  # (inside a capture that did not prepare them): one chunk
            geo = self._col_sum_geometry(m, n, ld, dt, out_dt, split, aligned, one_chunk=True)
            acc, gx, chunks, scalars, kernel = geo
        part = self.ndarray((chunks, n), acc) if chunks > 1 else None
        (kernel or get_kernel("col_sum", acc, _dt_name(dt), _dt_name(out_dt)))(
            (gx, chunks), (32, 8),
            (a, c, c2, _NULL_PTR if part is None else part, _NULL_PTR if part is None else counters) + scalars)
        return c if split is None else (c, c2)

    def _col_sum_geometry(self, m, n, ld, dt, out_dt, split, aligned, one_chunk=False):
        """``(accumulator dtype, column groups, row chunks, the kernel's scalar arguments, the kernel)`` of a
        :meth:`_col_sum` call (cached per geometry by the caller: the NumPy scalars cost ~1 us each)."""
        if len(self._col_geo) > 1024:  # shapes that change every call: start again
            self._col_geo.clear()
        acc = _F64 if dt == _F64 else _F32
        vec = 16 // dt.itemsize
        vec = vec if n % vec == 0 and ld % vec == 0 and aligned else 1
        gx = -(-n // (32 * vec))
        # row chunks: about _COL_BLOCKS_PER_SM blocks per SM in all, each chunk at least _COL_CHUNK_ROWS rows,
        # at most _COL_MAX_CHUNKS chunks (the last block of a column group reads that many partials per column)
        chunks = 1 if one_chunk else max(1, min(-(-self._COL_BLOCKS_PER_SM * self._sms() // gx),
                                                -(-m // self._COL_CHUNK_ROWS), self._COL_MAX_CHUNKS))
        per = -(-m // chunks)
        chunks = -(-m // per)
        scalars = (np.int64(m), np.int64(n), np.int64(ld), np.int64(per), np.int64(n if split is None else split),
                   np.int32(vec > 1))
        # the kernel is bound to the device it was loaded on: kept only with one visible GPU
        return acc, gx, chunks, scalars, None if self._multi else get_kernel("col_sum", acc, _dt_name(dt),
                                                                             _dt_name(out_dt))

    def _col_sum_counters(self, size: int):
        """The current stream's arrival counters of the ``col_sum`` kernel (zeros between calls: its last block
        resets them), at least ``size`` long; None inside a capture that did not prepare them."""
        cp = self.xp
        key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr)
        cnt = self._col_counters.get(key)
        if cnt is None or cnt.size < size:
            if CAPTURING[0]:
                return None
            cnt = self._col_counters[key] = cp.zeros(max(size, 4096), dtype=np.uint32)
        return cnt

    def mean(self, a, axis=None, keepdims=False):
        if a.size == 0 or (axis is not None and any(a.shape[i] == 0 for i in
                                                    ((axis,) if isinstance(axis, int) else axis))):
            s = self.xp.sum(a.astype(_F32) if a.dtype in _HALF else a, axis=axis, keepdims=keepdims)
            return self.xp.full(s.shape, float("nan"), dtype=a.dtype)
        if a.dtype in _HALF:
            return self.astype(self.xp.mean(self.astype(a, _F32), axis=axis, keepdims=keepdims), a.dtype)
        return self.xp.mean(a, axis=axis, keepdims=keepdims)

    def scatter_add(self, target, index, values):
        """``target[index] += values`` with repeated indices accumulated, in place.

        Default: atomic adds (``cupy.add.at``), fast, but the order in which repeated
        indices are summed is not fixed, so float results may differ in the last bits
        between runs. Under ``pylucid.use_deterministic_algorithms(True)`` a sort-based
        path runs instead: repeats are applied in index order, one round per repeat
        (bitwise reproducible, and equal to NumPy's sequential ``add.at``).
        """
        from .._state import flags

        if flags.deterministic:
            return self._scatter_rounds(target, index, values, self.xp.add)
        cp = self.xp
        if target.dtype in _HALF or target.dtype.kind == "b":
            acc = target.astype(_F32)
            vals = values.astype(_F32) if hasattr(values, "astype") else values
            cp.add.at(acc, index, vals)
            target[...] = acc.astype(target.dtype)
            return target
        if target.dtype.kind == "c":
            # cupy.add.at has no complex kernels: the real and imaginary parts are scattered as two float arrays
            vals = self.asarray(values, dtype=target.dtype)
            vals = cp.broadcast_to(vals, target[index].shape) if vals.ndim else vals
            for part in ("real", "imag"):
                acc = cp.ascontiguousarray(getattr(target, part))
                cp.add.at(acc, index, cp.ascontiguousarray(getattr(vals, part)))
                setattr(target, part, acc)
            return target
        cp.add.at(target, index, values)
        return target

    def scatter_max(self, target, index, values):
        # cupyx.scatter_max is atomic and NaN-blind: the round-based path keeps PyTorch's NaN propagation
        return self._scatter_rounds(target, index, values, self.xp.maximum)

    def scatter_min(self, target, index, values):
        return self._scatter_rounds(target, index, values, self.xp.minimum)

    def scatter_mul(self, target, index, values):
        # there is no atomic multiply: rounds of repeat-free fancy-index updates
        return self._scatter_rounds(target, index, values, self.xp.multiply)

    def _scatter_rounds(self, target, index, values, uf):
        """``target[index] = uf(target[index], values)`` with repeats combined in index order, in place.

        The flat target position of every value is ``arange(size).reshape(shape)[index]``; a stable
        sort ranks the repeats of each position, and round ``r`` applies every value of rank ``r``
        with one repeat-free fancy-index update. Rounds = the largest repeat count; deterministic.
        """
        cp = self.xp
        with self.device_ctx():
            pos = cp.arange(target.size, dtype=np.int64).reshape(target.shape)[index]
            if pos.size == 0:
                return target
            vals = values if hasattr(values, "shape") else self.asarray(values, dtype=target.dtype)
            vals = cp.broadcast_to(vals.astype(target.dtype, copy=False), pos.shape).reshape(-1)
            pos = pos.reshape(-1)
            flat = target.reshape(-1) if target.flags.c_contiguous else cp.ascontiguousarray(target).reshape(-1)
            order = cp.argsort(pos)  # CuPy's argsort is stable (radix sort)
            sp = pos[order]
            new = self.ndarray(sp.shape, bool)
            new[0] = True
            cp.not_equal(sp[1:], sp[:-1], out=new[1:])
            seg = cp.cumsum(new) - 1
            starts = cp.flatnonzero(new)
            rank_sorted = cp.arange(sp.size, dtype=np.int64) - starts[seg]
            rounds = int(rank_sorted.max()) + 1
            if rounds == 1:
                flat[pos] = uf(flat[pos], vals)
            else:
                rank = cp.empty_like(rank_sorted)
                rank[order] = rank_sorted
                for r in range(rounds):
                    m = cp.flatnonzero(rank == r)
                    p = pos[m]
                    flat[p] = uf(flat[p], vals[m])
            if not target.flags.c_contiguous:
                target[...] = flat.reshape(target.shape)
        return target

    def raise_if_singular(self, a, op: str) -> None:
        """cuSOLVER's ``inv``/``solve`` return inf/NaN for singular input: raise LinAlgError as NumPy does."""
        if a.size == 0:
            return
        sign, _ = self.linalg.slogdet(a)
        if bool((sign == 0).any()):
            raise np.linalg.LinAlgError(f"{op}: singular matrix")

    def errstate(self):
        # CuPy never warns on inf/NaN arithmetic: nothing to silence
        return contextlib.nullcontext()

    # -- vectorised element-wise binary ops (16-byte loads: full memory bandwidth) ---------
    def _vec_binary(self, op: str, a, b):
        cp = self.xp
        nd = cp.ndarray
        if (a.__class__ is nd and b.__class__ is nd and a.dtype == _F32 and b.dtype == _F32
                and a.shape == b.shape and a.size >= _VEC_MIN and a._c_contiguous and b._c_contiguous
                and a.data.ptr % 16 == 0 and b.data.ptr % 16 == 0):
            n = a.size
            n4 = n // 4
            with self.device_ctx():
                c = self.ndarray(a.shape, _F32)
                kern = get_kernel("vec_binary_f32")
                threads = 256
                kern(((n4 + threads - 1) // threads,), (threads,),
                     (a, b, c, np.int64(n4), np.int32(OPS_VEC[op])))
                if n4 * 4 != n:  # the < 4 trailing elements
                    fa, fb, fc = a.reshape(-1), b.reshape(-1), c.reshape(-1)
                    getattr(cp, op)(fa[n4 * 4:], fb[n4 * 4:], out=fc[n4 * 4:])
            return c
        return getattr(cp, op)(a, b)

    # -- fused kernels -------------------------------------------------------------------
    def _compute(self, *arrays):
        """Contiguous copies in the kernel dtype (float32 for half inputs) and the dtype to return."""
        dt = arrays[0].dtype
        cdt = _F32 if dt in _HALF else dt
        if cdt not in _KERNEL_DTYPES:
            raise TypeError(f"cuda kernels: floating input expected, got {dt}")
        contig = self.ascontiguousarray
        out = [None if a is None else _contig(contig, self.astype(a, cdt, copy=False)) for a in arrays]
        # ascontiguousarray makes 0-d arrays 1-d (as NumPy's does): give them back their shape
        return [c if c is None or c.ndim == a.ndim else c.reshape(a.shape) for c, a in zip(out, arrays)], dt, cdt

    @staticmethod
    def _row_threads(cols: int) -> int:
        t = 32
        while t < cols and t < 512:
            t *= 2
        return t

    def _sms(self) -> int:
        if self._sm_count is None:
            self._sm_count = self.xp.cuda.Device(self.index).attributes["MultiProcessorCount"]
        return self._sm_count

    def _grid(self, n: int, threads: int = 256) -> int:
        return max(1, min((n + threads - 1) // threads, self._sms() * 32))

    #: rows up to this long take the warp-per-row layer-norm kernels (longer ones a block per row), from
    #: _LN_WARP_ROWS rows (fewer leave the GPU emptier than a block per row). Measured on the H200, float32, CUDA
    #: graph replay: 2048 x 768 forward 10.4 -> 5.4 us, backward with the weight and bias gradients 17.7 -> 11.3 us;
    #: 8192 x 768 42.6 -> 13.2 and 83.8 -> 45.1 us; 512 x 512 3.0 -> 3.7 and 6.9 -> 8.2 us (hence the bound)
    _LN_WARP_COLS = 2048
    _LN_WARP_ROWS = 1024
    #: blocks per SM of the layer-norm backward (each block's partial sums cost a row of the final column sum)
    _LN_BWD_BLOCKS_PER_SM = 4

    def softmax(self, x, log: bool = False):
        """Softmax (``log=True``: log-softmax) over the last axis: one fused kernel, one block per row."""
        (xc,), dt, cdt = self._compute(x)
        cols = x.shape[-1] if x.ndim else 1
        rows = xc.size // cols if cols else 0
        with self.device_ctx():
            y = self.ndarray(xc.shape, cdt)
            if rows and cols:
                get_kernel("softmax_fwd", cdt)((rows,), (self._row_threads(cols),),
                                               (xc, y, np.int64(cols), np.int32(bool(log))))
        return self.astype(y, dt, copy=False)

    def softmax_backward(self, y, g, log: bool = False):
        """Gradient of :meth:`softmax` from its output ``y`` and the incoming gradient ``g``."""
        (yc, gc), dt, cdt = self._compute(y, g)
        cols = y.shape[-1] if y.ndim else 1
        rows = yc.size // cols if cols else 0
        with self.device_ctx():
            dx = self.ndarray(yc.shape, cdt)
            if rows and cols:
                get_kernel("softmax_bwd", cdt)((rows,), (self._row_threads(cols),),
                                               (yc, gc, dx, np.int64(cols), np.int32(bool(log))))
        return self.astype(dx, dt, copy=False)

    def _ln_operands(self, x, g, *params):
        """``(x, g, params, io, grad, dtype, kernel dtype)`` for the layer-norm kernels. A half ``x`` (with a ``g``
        of its dtype or float32) is read in place (``io`` its dtype name, ``grad`` g's when it differs; the
        weight and bias in float32): no float32 copies; other inputs as :meth:`_compute` gives them."""
        dt = x.dtype
        if dt in _HALF and (g is None or g.dtype == dt or g.dtype == _F32):
            contig = self.ascontiguousarray
            pc = []
            for p in params:
                if p is None or (p.dtype == _F32 and p._c_contiguous and p.ndim):  # (as it is: no calls)
                    pc.append(p)
                elif p.dtype == dt or p.dtype == _F32:
                    pc.append(_contig(contig, self.astype(p, _F32, copy=False)))
                else:
                    break
            else:
                xc = x if x._c_contiguous and x.ndim else _contig_shaped(contig, x)
                gc = None if g is None else g if g._c_contiguous and g.ndim else _contig_shaped(contig, g)
                return (xc, gc, pc, _dt_name(dt), (None if gc is None or gc.dtype == dt else _dt_name(gc.dtype)), dt,
                        _F32)
        if g is None:
            (xc, *pc), dt, cdt = self._compute(x, *params)
            gc = None
        else:
            (gc, xc, *pc), dt, cdt = self._compute(g, x, *params)
        return xc, gc, pc, None, None, dt, cdt

    def layer_norm(self, x, weight, bias, eps: float, float_out: bool = False):
        """Layer norm over the last axis: ``(y, mean, rstd)``; ``mean``/``rstd`` of shape ``x.shape[:-1]``.

        ``mean`` and ``rstd`` are float32 for half inputs (the statistics the backward needs). Half ``x`` is read
        in place (computed in float32); ``float_out`` writes ``y`` in float32 (autocast's float32 policy), else in
        ``x``'s dtype, rounded once.
        """
        xc, _, (wc, bc), io, _, dt, cdt = self._ln_operands(x, None, weight, bias)
        # a half x: float32 with float_out, or with a float32 weight or bias (the dtypes' promotion), else x's dtype
        odt = _F32 if io is not None and (float_out or any(p is not None and p.dtype != dt for p in (weight, bias))) \
            else dt
        out_name = _dt_name(odt) if io is not None and odt != dt else None
        cols = x.shape[-1]
        rows = xc.size // cols if cols else 0
        with self.device_ctx():
            y = self.ndarray(xc.shape, odt if io is not None else cdt)
            # a float32 result of a half x: its half rounding too, for autocast's cast of it (amp_rounded)
            y2 = self.ndarray(xc.shape, xc.dtype) if out_name and rows and cols else None
            z2 = _NULL_PTR if y2 is None else y2
            mean = self.ndarray(x.shape[:-1], cdt)
            rstd = self.ndarray(x.shape[:-1], cdt)
            if rows and cols:
                key = (rows, cols, cdt, eps)
                hp = self._ln_hp.get(key)
                if hp is None:  # the launch's scalars, made once per (shape, eps): NumPy scalars cost ~1 us each
                    if len(self._ln_hp) > 1024:
                        self._ln_hp.clear()
                    hp = self._ln_hp[key] = (np.int64(rows), np.int64(cols), cdt.type(eps))
            if rows >= self._LN_WARP_ROWS and 0 < cols <= self._LN_WARP_COLS:
                get_kernel("layer_norm_fwd_rows", cdt, io, out_name)(
                    (-(-rows // 8),), (256,),
                    (xc, xc if wc is None else wc, xc if bc is None else bc, y, z2, mean, rstd, hp[0],
                     hp[1], hp[2], _FLAG32[wc is not None], _FLAG32[bc is not None]))
            elif rows and cols:
                get_kernel("layer_norm_fwd", cdt, io, out_name)(
                    (rows,), (self._row_threads(cols),),
                    (xc, xc if wc is None else wc, xc if bc is None else bc, y, z2, mean, rstd, hp[1],
                     hp[2], _FLAG32[wc is not None], _FLAG32[bc is not None]))
            elif rows:
                mean.fill(float("nan"))
                rstd.fill(float("nan"))
        if y2 is not None:
            self.amp_rounded = (y, y2)
        return self.astype(y, odt, copy=False), mean, rstd

    def layer_norm_backward(self, g, x, mean, rstd, weight, residual=None):
        """``(dx, dweight, dbias)`` of :meth:`layer_norm` (``dweight``/``dbias`` None without ``weight``).

        A half ``x`` is read in place with ``g`` of its dtype or float32 (the gradient of a ``float_out`` result):
        ``dx`` is written in ``x``'s dtype, rounded once. ``residual`` (``x``'s shape and dtype): added to
        ``dx``, by the kernel as it writes it (the float32 sum rounded once) where the one-warp-per-row kernels
        run, else by an add after."""
        xc, gc, (wc,), io, grad_name, dt, cdt = self._ln_operands(x, g, weight)
        res = None
        if residual is not None:
            res = residual if residual.dtype == xc.dtype else residual.astype(xc.dtype)
            res = _contig(self.xp.ascontiguousarray, res)
        mc = _contig(self.xp.ascontiguousarray, mean.astype(cdt, copy=False))
        rc = _contig(self.xp.ascontiguousarray, rstd.astype(cdt, copy=False))
        cols = x.shape[-1]
        rows = xc.size // cols if cols else 0
        with self.device_ctx():
            dx = self.ndarray(xc.shape, xc.dtype)
            warp = rows >= self._LN_WARP_ROWS and 0 < cols <= self._LN_WARP_COLS
            if warp and cols * 8 * cdt.itemsize <= 32768:  # the kernel's shared accumulators: 32 KiB
                # a warp per row, dweight and dbias as per-block partial sums in the same pass (one small
                # column sum after), instead of a g * xhat array and two column sums over every row
                nblk = min(rows, self._LN_BWD_BLOCKS_PER_SM * self._sms())
                per = -(-rows // nblk)
                nblk = -(-rows // per)
                part = None if wc is None else self.ndarray((nblk, 2 * cols), cdt)
                # rows of whole aligned 16-byte words of x, up to 32 values per lane: the register-cached kernel
                vec = 16 // xc.dtype.itemsize
                words = (cols % vec == 0 and cols <= 32 * vec * min(32 // vec, 8)
                         and not any(a.data.ptr % 16 for a in (gc, xc, dx) + tuple(
                             a for a in (wc, res) if a is not None)))
                get_kernel("layer_norm_bwd_words" if words else "layer_norm_bwd_rows", cdt, io, None, grad_name)(
                    (nblk,), (128,),
                    (gc, xc, xc if wc is None else wc, mc, rc, dx, _NULL_PTR if res is None else res,
                     _NULL_PTR if part is None else part,
                     np.int64(rows), np.int64(cols), np.int64(per), _FLAG32[wc is not None]))
                res = None  # added by the kernel
                if wc is None:
                    return self.astype(dx, dt, copy=False), None, None
                # dweight and dbias as two arrays of their own (not views of one: the engine would copy views
                # before keeping them as .grad), both from one column-sum launch
                dw, db = self._col_sum(part, nblk, 2 * cols, 2 * cols, cdt, split=cols)
                wdt = weight.dtype
                return self.astype(dx, dt, copy=False), dw.astype(wdt, copy=False), db.astype(wdt, copy=False)
            gxhat = None if wc is None else self.ndarray(xc.shape, cdt)
            if rows and cols:
                get_kernel("layer_norm_bwd", cdt, io, None, grad_name)(
                    (rows,), (self._row_threads(cols),),
                    (gc, xc, xc if wc is None else wc, mc, rc, dx, _NULL_PTR if gxhat is None else gxhat,
                     np.int64(cols), _FLAG32[wc is not None]))
            if res is not None:
                dx = self.add(dx, res)
            if wc is None:
                return self.astype(dx, dt, copy=False), None, None
            # dweight = sum over rows of g * xhat (written by the kernel), dbias = sum over rows of g
            nrows = math.prod(x.shape[:-1])
            dw = self.sum(gxhat.reshape(nrows, cols), axis=0)
            db = self.sum(self.astype(gc, cdt, copy=False).reshape(nrows, cols), axis=0)
        wdt = weight.dtype
        return self.astype(dx, dt, copy=False), dw.astype(wdt, copy=False), db.astype(wdt, copy=False)

    def _bn_geometry(self, shape, training: bool):
        """The launch geometry of the batch-norm kernels for an input of ``shape``: ``(c, parts, threads, grid,
        int32 n, int32 c, int32 s, uint32 n*s)`` over the contiguous ``(n, c, s)`` view, or None when a kernel's
        32-bit per-channel count would overflow or a dim is empty (the array path then runs). Cached per
        (shape, training): a training loop calls each layer with one shape every step, and the NumPy scalars
        cost ~1 us each to make."""
        key = (shape, training)
        geo = self._bn_geo.get(key, _MISS)
        if geo is not _MISS:
            return geo
        n, c = shape[0], shape[1]
        s = math.prod(shape[2:])
        if n * c * s == 0 or n * s >= 2 ** 31 or s >= 2 ** 31:
            geo = None
        else:
            parts = self._bn_parts(c, n * s) if training else 1
            # many blocks per channel (one per channel leaves most of the GPU idle for few channels)
            threads = self._row_threads(-(-(n * s) // parts)) if parts > 1 else self._row_threads(n * s)
            geo = (c, parts, threads, (c, parts) if parts > 1 else (c,), np.int32(n), np.int32(c), np.int32(s),
                   np.uint32(n * s))
        if len(self._bn_geo) > 1024:  # shapes that change every call: start again
            self._bn_geo.clear()
        self._bn_geo[key] = geo
        return geo

    def _bn_scalars(self, cdt, eps: float, momentum):
        """``(eps, momentum or 0)`` as scalars of the kernels' compute dtype (cached: one pair per layer)."""
        key = (cdt, eps, momentum)
        got = self._bn_hp.get(key)
        if got is None:
            if len(self._bn_hp) > 1024:
                self._bn_hp.clear()
            got = self._bn_hp[key] = (cdt.type(eps), cdt.type(momentum or 0.0))
        return got

    def batch_norm(self, x, weight, bias, running_mean, running_var, training: bool, eps: float,
                   momentum: float | None = None):
        """Batch norm over every axis but 1 (see the base class): one kernel, one block per channel, or in
        training two kernels over several blocks per channel (partial statistics, then their combination and
        the normalisation) where one block per channel would leave the GPU idle; the running buffers are
        updated by the same kernels when they are contiguous in the compute dtype."""
        geo = self._bn_geometry(x.shape, training)
        if geo is None:
            return super().batch_norm(x, weight, bias, running_mean, running_var, training, eps, momentum)
        c, parts, threads, grid, n32, c32, s32, total = geo
        (xc,), io, cdt = self._bn_io(x)
        wc, bc = self._bn_param(weight, cdt), self._bn_param(bias, cdt)
        e, m = self._bn_scalars(cdt, eps, momentum)
        nd = self.ndarray
        with self.device_ctx():
            if training:
                mean, var = nd((c,), cdt), nd((c,), cdt)
            else:
                mean, var = self._bn_param(running_mean, cdt), self._bn_param(running_var, cdt)
            y = nd(xc.shape, xc.dtype)
            upd = training and momentum is not None
            direct = [upd and r is not None and r.dtype == cdt and r._c_contiguous and r.size == c
                      for r in (running_mean, running_var)]
            rm = running_mean if direct[0] else _NULL_PTR
            rv = running_var if direct[1] else _NULL_PTR
            wk, bk = xc if wc is None else wc, xc if bc is None else bc
            hw, hb = _FLAG32[wc is not None], _FLAG32[bc is not None]
            if parts > 1:
                # two allocations (unpacking one (2, n) array builds a view per row: more host time than a pool hit)
                pm, pm2 = nd((c * parts,), cdt), nd((c * parts,), cdt)
                get_kernel("bn_part_stats", cdt, io)(grid, (threads,), (xc, pm, pm2, c32, s32, total))
                get_kernel("bn_part_apply", cdt, io)(
                    grid, (threads,), (xc, wk, bk, pm, pm2, mean, var, y, rm, rv, c32, s32, total, e, m, hw, hb))
            else:
                get_kernel("batch_norm_fwd", cdt, io)(
                    grid, (threads,),
                    (xc, wk, bk, mean, var, y, rm, rv, n32, c32, s32, e, m, _FLAG32[bool(training)], hw, hb))
            if upd and not (direct[0] and direct[1]):  # buffers of another dtype or layout: the array update
                self.batch_norm_update_(None if direct[0] else running_mean, None if direct[1] else running_var,
                                        mean, var, int(total), momentum)
        return y, mean, var

    def batch_norm_backward(self, g, x, weight, mean, var, training: bool, eps: float, need_dx: bool = True):
        """``(dx, dweight, dbias)`` of :meth:`batch_norm` (see the base class): one kernel per call, or two over
        several blocks per channel (as the forward)."""
        geo = self._bn_geometry(x.shape, training)
        if geo is None:
            return super().batch_norm_backward(g, x, weight, mean, var, training, eps, need_dx)
        c, parts, threads, grid, n32, c32, s32, total = geo
        (gc, xc), io, cdt = self._bn_io(g, x)
        wc, mc, vc = self._bn_param(weight, cdt), self._bn_param(mean, cdt), self._bn_param(var, cdt)
        e, _ = self._bn_scalars(cdt, eps, None)
        nd = self.ndarray
        with self.device_ctx():
            dx = nd(xc.shape, xc.dtype) if need_dx else None
            dw, db = nd((c,), cdt), nd((c,), cdt)
            wk = xc if wc is None else wc
            dxk = _NULL_PTR if dx is None else dx
            if parts > 1:
                psg, psgx = nd((c * parts,), cdt), nd((c * parts,), cdt)  # (as the forward's partial sums)
                get_kernel("bn_part_grad_sums", cdt, io)(grid, (threads,), (gc, xc, mc, psg, psgx, c32, s32, total))
                get_kernel("bn_part_grad_apply", cdt, io)(
                    grid, (threads,),
                    (gc, xc, wk, mc, vc, psg, psgx, dxk, dw, db, c32, s32, total, e, _FLAG32[wc is not None]))
            else:
                get_kernel("batch_norm_bwd", cdt, io)(
                    grid, (threads,),
                    (gc, xc, wk, mc, vc, dxk, dw, db, n32, c32, s32, e, _FLAG32[bool(training)],
                     _FLAG32[wc is not None]))
        if dx is not None and dx.dtype != x.dtype:
            dx = self.astype(dx, x.dtype, copy=False)
        return dx, dw, db

    def _bn_parts(self, c: int, total: int) -> int:
        """Blocks per channel for the batch-norm kernels: enough blocks to fill the GPU a few times over, each
        with at least 4096 values (1: the one-block-per-channel kernels)."""
        if self._sm_count is None:
            self._sm_count = self.xp.cuda.Device(self.index).attributes["MultiProcessorCount"]
        return max(1, min(64, -(-4 * self._sm_count // c), total // 4096))

    def _bn_param(self, a, cdt):
        """A per-channel operand (weight, bias, statistics) as a contiguous ``cdt`` array, or None."""
        if a is None or (a.dtype == cdt and a._c_contiguous and a.ndim):  # (the common case, without the calls)
            return a
        return _contig(self.xp.ascontiguousarray, self.astype(a, cdt, copy=False))

    def _bn_io(self, *arrays):
        """Contiguous operands of the batch-norm kernels in one storage dtype (half inputs stay half: the
        kernels load and store them directly), that dtype's name for ``io`` and the compute dtype."""
        dt = arrays[0].dtype
        if dt in _HALF:
            out = []
            for a in arrays:
                if a.dtype != dt:
                    break
                out.append(a if a._c_contiguous and a.ndim else _contig(self.ascontiguousarray, a))
            else:
                return out, _dt_name(dt), _F32
        out, _, cdt = self._compute(*arrays)
        return out, None, cdt

    def _ce_logits(self, logits):
        """``(array, storage dtype name or None, kernel dtype, input dtype)`` for the cross-entropy kernels: half
        logits are read in place (the kernels load them and compute in float32: no float32 copy of a
        (rows, vocabulary) matrix), others as :meth:`_compute` gives them."""
        dt = logits.dtype
        if dt in _HALF_DT:
            return _contig(self.ascontiguousarray, logits), _dt_name(dt), _F32, dt
        (xc,), dt, cdt = self._compute(logits)
        return xc, None, cdt, dt

    def cross_entropy(self, logits, target, ignore_index: int = -100, float_out: bool = False):
        """Per-row cross-entropy of 2-D ``logits`` against int targets: ``(loss, lse)`` (see the reference);
        ``float_out`` keeps the float32 of the computation for half logits (autocast's float32 loss)."""
        xc, io, cdt, dt = self._ce_logits(logits)
        cp = self.xp
        rows, cols = logits.shape
        with self.device_ctx():
            t = _contig(cp.ascontiguousarray, target.astype(np.int64, copy=False))
            loss = self.ndarray((rows,), cdt)
            lse = self.ndarray((rows,), cdt)
            if rows:
                get_kernel("cross_entropy_fwd", cdt, io)((rows,), (self._row_threads(cols),),
                                                         (xc, t, loss, lse, np.int64(cols), np.int64(ignore_index)))
        # the row log-sum-exps stay in the kernel dtype (float32 for half logits): the backward's softmax is
        # exp(x - lse), which a half lse would put off by its rounding
        return (loss if float_out else loss.astype(dt, copy=False)), lse

    def cross_entropy_backward(self, g, logits, lse, target, ignore_index: int = -100):
        """``dlogits`` of :meth:`cross_entropy` given the per-row incoming gradient ``g``.

        ``g`` may be 0-d or a stride-0 broadcast (a reduced loss): the kernel reads it in place.
        """
        g_stride = 1
        if g.ndim == 0 or (g.ndim == 1 and g.strides[0] == 0 and g.size):
            g = g.reshape(()) if g.ndim == 0 else g[:1].reshape(())
            g_stride = 0
        xc, io, cdt, dt = self._ce_logits(logits)
        (gc, lc), _, _ = self._compute(g.astype(cdt, copy=False), lse.astype(cdt, copy=False))
        cp = self.xp
        rows, cols = logits.shape
        with self.device_ctx():
            t = _contig(cp.ascontiguousarray, target.astype(np.int64, copy=False))
            dx = self.ndarray((rows, cols), dt if io else cdt)  # half logits: dx written in their dtype
            if rows and cols:
                get_kernel("cross_entropy_bwd", cdt, io)((self._grid(rows, 1),), (self._row_threads(cols),),
                                                         (gc, xc, lc, t, dx, np.int64(cols), np.int64(ignore_index),
                                                          np.int64(rows), np.int64(g_stride)))
        return self.astype(dx, dt, copy=False)

    def cross_entropy_reduce(self, loss, target, ignore_index: int = -100, mean: bool = True):
        """``(sum or mean of per-row losses, non-ignored row count)``: one single-block kernel (see the reference)."""
        (lc,), dt, cdt = self._compute(loss)
        cp = self.xp
        with self.device_ctx():
            t = _contig(cp.ascontiguousarray, target.astype(np.int64, copy=False))
            out = self.ndarray((), cdt)
            count = self.ndarray((), cdt)
            get_kernel("cross_entropy_reduce", cdt)((1,), (1024,), (lc, t, out, count, np.int64(lc.size),
                                                                    np.int64(ignore_index), np.int32(bool(mean))))
        return self.astype(out, dt, copy=False), count

    def _relu_kernel_dtype(self, *arrays):
        """``(compute dtype, io)`` of the relu kernels for these contiguous same-dtype float arrays, else None."""
        a = arrays[0]
        dt = a.dtype
        if not (self.fast_launch and a.size and (dt in _KERNEL_DTYPES or dt in _HALF)):
            return None
        for b in arrays:
            if b.dtype != dt or b.shape != a.shape or not b._c_contiguous:
                return None
        return (_F32, _dt_name(dt)) if dt in _HALF else (dt, None)

    def relu(self, x):
        """``max(x, 0)``, NaN kept: one kernel for float16/bfloat16/float32/float64, else the array path."""
        kd = self._relu_kernel_dtype(x)
        if kd is None:
            return super().relu(x)
        n = x.size
        with self.device_ctx():
            y = self.ndarray(x.shape, x.dtype)
            get_kernel("relu_fwd", kd[0], kd[1])((self._vec_blocks(n, x.itemsize),), (256,), (x, y, np.int64(n)))
        return y

    def relu_backward(self, y, g):
        """``threshold_backward``: ``g`` where ``y > 0`` (or NaN), else 0; one kernel for the float dtypes."""
        kd = self._relu_kernel_dtype(y, g)
        if kd is None:
            return super().relu_backward(y, g)
        n = y.size
        with self.device_ctx():
            dx = self.ndarray(y.shape, y.dtype)
            get_kernel("relu_bwd", kd[0], kd[1])((self._vec_blocks(n, y.itemsize),), (256,), (y, g, dx, np.int64(n)))
        return dx

    @staticmethod
    def _vec_blocks(n: int, itemsize: int) -> int:
        """Blocks of 256 threads for a kernel that takes one 16-byte word (``16 // itemsize`` elements) per thread
        and loops over the rest (the relu kernels): one thread per word, as the vectorised path of an aligned
        operand needs."""
        return max(1, -(-n // (256 * (16 // itemsize))))

    def embedding_backward(self, g, indices, num_weights: int, padding_idx: int | None = None,
                           deterministic: bool = False):
        """``dweight`` of an embedding lookup: rows of ``g`` summed per index.

        ``deterministic=False``: one atomic add per element (fast; summation order of repeated
        indices varies between runs). ``deterministic=True``: indices are stable-sorted and each
        distinct index sums its rows in that fixed order (bitwise reproducible).
        """
        (gc,), dt, cdt = self._compute(g)
        cp = self.xp
        dim = g.shape[-1]
        with self.device_ctx():
            idx = cp.ascontiguousarray(indices.reshape(-1).astype(np.int64, copy=False))
            g2 = gc.reshape(-1, dim)
            dw = cp.zeros((num_weights, dim), dtype=cdt)
            nrows = idx.size
            pad = np.int64(-1 if padding_idx is None else padding_idx)
            if nrows and dim:
                if not deterministic:
                    n = nrows * dim
                    get_kernel("embedding_bwd_atomic", cdt)((self._grid(n),), (256,),
                                                            (g2, idx, dw, np.int64(dim), np.int64(n), pad,
                                                             np.int64(num_weights)))
                else:
                    order = cp.argsort(idx)  # CuPy's argsort is always stable
                    sidx = idx[order]
                    starts = cp.flatnonzero(cp.concatenate([cp.ones(1, dtype=bool), sidx[1:] != sidx[:-1]]))
                    nseg = int(starts.size)
                    n = nseg * dim
                    get_kernel("embedding_bwd_sorted", cdt)(
                        (self._grid(n),), (256,),
                        (g2, order.astype(np.int64), starts.astype(np.int64), sidx, dw, np.int64(nseg),
                         np.int64(dim), np.int64(nrows), pad, np.int64(num_weights)))
        return dw.astype(dt, copy=False)

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, *, step: int, lr: float, beta1: float, beta2: float,
                  eps: float, weight_decay: float = 0.0, decoupled: bool = False, maximize: bool = False,
                  found_inf=None) -> None:
        """Adam/AdamW for every array of a group in one kernel launch per dtype, in place.

        Quadruples of C-contiguous float32/float64 arrays of one dtype are fused; the others (half
        precision, strided) take the base method, one array at a time (half computed in float32).
        """
        groups: dict = {}
        for quad in zip(params, grads, exp_avgs, exp_avg_sqs):
            p = quad[0]
            fused = (p.dtype in _KERNEL_DTYPES and all(a.dtype == p.dtype and a._c_contiguous for a in quad)
                     and p.size > 0)
            groups.setdefault(p.dtype if fused else None, []).append(quad)
        hp = dict(step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                  decoupled=decoupled, maximize=maximize)
        if found_inf is not None:
            hp["found_inf"] = found_inf
        if found_inf is not None and not isinstance(step, self.xp.ndarray):
            raise ValueError("adam_step: found_inf needs a capturable (device) step")
        if isinstance(step, self.xp.ndarray) and len(groups) > 1:
            raise ValueError("adam_step: a capturable (device) step needs the parameters of one float dtype")
        for dt, quads in groups.items():
            if dt is None:
                rest = [q for q in quads if q[0].size]
                if rest and isinstance(step, self.xp.ndarray):
                    raise ValueError("adam_step: a capturable (device) step needs C-contiguous float32/float64 "
                                     "parameters, gradients and state of one dtype")
                if rest:
                    super().adam_step(*map(list, zip(*rest)), **hp)
                continue
            self._adam_fused(dt, quads, hp)

    # The multi-tensor optimizer kernels (adam_multi, sgd_multi): one block of _MULTI_THREADS threads per chunk of
    # _ADAM_CHUNK values. Small chunks so that a group of a few million values still gives every SM several blocks:
    # the kernels are bandwidth-bound and need many loads in flight (with 65536-value chunks of 512 threads, the
    # 3.2M values of a d=512 transformer block made 60 blocks for 132 SMs, and the step ran at a quarter of the
    # bandwidth).
    _ADAM_CHUNK = 4096
    _MULTI_THREADS = 256

    def _upload_captured(self, host):
        """A device copy of the host array ``host`` made inside a CUDA graph capture.

        CuPy refuses host-to-device copies on a capturing stream (a copy from pageable memory cannot be
        captured). A copy from pinned memory can: the values go to a pinned buffer that lives as long as
        the graph (``graph_keep``), and the captured copy node re-reads it on every replay, so the array
        holds the values it had at capture time, as a constant of the graph.
        """
        cp = self.xp
        host = np.ascontiguousarray(host)
        bf16 = host.dtype == _BF16
        dev = self.ndarray(host.shape, np.uint16 if bf16 else host.dtype)
        if host.nbytes:
            mem = cp.cuda.alloc_pinned_memory(host.nbytes)
            np.frombuffer(mem, dtype=np.uint8, count=host.nbytes)[:] = host.reshape(-1).view(np.uint8)
            cp.cuda.runtime.memcpyAsync(dev.data.ptr, mem.ptr, host.nbytes, cp.cuda.runtime.memcpyHostToDevice,
                                        cp.cuda.get_current_stream().ptr)
            self.graph_keep.append(mem)
        return dev.view(_BF16) if bf16 else dev

    def _upload_async(self, values):
        """A uint64 device array of ``values`` copied from pinned memory without waiting for the GPU.

        ``cupy.asarray`` of a NumPy array is a synchronous copy from pageable memory: it waits for every
        kernel queued before it, which stalls the host once per optimizer step (the gradient pointers
        change whenever ``zero_grad`` freed the gradients). A pinned buffer and an asynchronous copy on
        the current stream keep the host running ahead; each buffer is held until its copy has run.
        """
        cp = self.xp
        n = len(values)
        if self.graph_keep is not None:
            return self._upload_captured(np.array(values, dtype=np.uint64))
        mem = cp.cuda.alloc_pinned_memory(max(n, 1) * 8)
        host = np.frombuffer(mem, dtype=np.uint64, count=n)
        host[:] = values
        dev = self.ndarray((n,), np.uint64)
        stream = cp.cuda.get_current_stream()
        dev.set(host, stream=stream)
        inflight = self._pinned_inflight
        inflight.append((stream.record(), mem))
        while len(inflight) > 1 and inflight[0][0].done:
            inflight.pop(0)
        return dev

    def _multi_tables(self, rows, volatile: int):
        """``(pointer tables, sizes, chunk tensors, chunk starts, chunk count)`` on the device for a multi-tensor
        kernel over ``rows`` (one tuple of arrays per tensor, the first giving the size).

        Parameters and their state keep their storage from step to step, gradients (role ``volatile``) do not
        (``zero_grad`` with ``set_to_none`` frees them): the long-lived tables are cached under the other roles'
        pointers, and only the gradient-pointer table is uploaded again when the gradients moved (one small
        host-to-device copy, no sync).
        """
        nroles = len(rows[0])
        key = (nroles, volatile) + tuple(a.data.ptr for row in rows for j, a in enumerate(row) if j != volatile) \
            + tuple(r[0].size for r in rows)
        vol_ptrs = tuple(r[volatile].data.ptr for r in rows)
        tables = self._adam_tables.get(key)
        if tables is None:
            ptrs = [np.array([r[j].data.ptr for r in rows], dtype=np.uint64) for j in range(nroles)]
            sizes = np.array([r[0].size for r in rows], dtype=np.int64)
            ct, cs = [], []
            for t, n in enumerate(sizes):
                for start in range(0, int(n), self._ADAM_CHUNK):
                    ct.append(t)
                    cs.append(start)
            with self.device_ctx():
                up = self.asarray  # (inside a capture: copies the graph keeps)
                tables = ([up(p) for p in ptrs], up(sizes), up(np.array(ct, np.int32)), up(np.array(cs, np.int64)),
                          len(ct), vol_ptrs)
            if len(self._adam_tables) > 64:  # parameters re-allocated: forget stale tables
                self._adam_tables.clear()
            self._adam_tables[key] = tables
        ptr_tables, sizes, ct, cs, nchunks, cached = tables
        if vol_ptrs != cached:
            ptr_tables = list(ptr_tables)
            with self.device_ctx():
                ptr_tables[volatile] = self._upload_async(vol_ptrs)
            self._adam_tables[key] = (ptr_tables, sizes, ct, cs, nchunks, vol_ptrs)
        return ptr_tables, sizes, ct, cs, nchunks

    def sgd_step(self, params, grads, bufs, *, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 init: bool = False) -> None:
        """SGD for every array of a group in one kernel launch per dtype (C-contiguous float32/float64; the
        others take the base method, one array at a time)."""
        has_m = momentum != 0
        groups: dict = {}
        for i, (p, g) in enumerate(zip(params, grads)):
            row = (p, g, bufs[i]) if has_m else (p, g)
            fused = p.dtype in _KERNEL_DTYPES and p.size > 0 and all(
                a.dtype == p.dtype and a._c_contiguous for a in row)
            groups.setdefault(p.dtype if fused else None, []).append(row)
        hp = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                  maximize=maximize, init=init)
        for dt, rows in groups.items():
            if dt is None:
                super().sgd_step([r[0] for r in rows], [r[1] for r in rows], [r[-1] for r in rows], **hp)
                continue
            ptrs, sizes, ct, cs, nchunks = self._multi_tables(rows, 1)
            s = dt.type
            with self.device_ctx():
                get_kernel("sgd_multi", dt)(
                    (nchunks,), (self._MULTI_THREADS,),
                    (ptrs[0], ptrs[1], ptrs[2] if has_m else ptrs[0], sizes, ct, cs, np.int64(self._ADAM_CHUNK),
                     s(lr), s(momentum), s(dampening), s(weight_decay), np.int32(bool(nesterov)),
                     np.int32(bool(maximize)), np.int32(bool(init)), np.int32(has_m)))

    def _adam_fused(self, dt, quads, hp) -> None:
        cp = self.xp
        (pp, gp, mp, vp), sizes, ct, cs, nchunks = self._multi_tables(quads, 1)
        step = hp["step"]
        s = dt.type
        dev_hp = None
        if isinstance(step, cp.ndarray):
            # capturable: step, lr and betas live in device memory, so a replayed graph advances and reads them
            with self.device_ctx():
                dev_hp = self.ndarray((6,), dt)
                get_kernel("adam_count", dt)((1,), (1,), (step, hp["lr"], hp["beta1"], hp["beta2"], dev_hp,
                                                          hp.get("found_inf", _NULL_PTR)))
            lr = bc1 = bc2_sqrt = b1 = b2 = 1.0
        else:
            b1, b2 = hp["beta1"], hp["beta2"]
            lr = hp["lr"]
            bc1 = 1.0 - hp["beta1"] ** step
            bc2_sqrt = math.sqrt(1.0 - hp["beta2"] ** step)
        with self.device_ctx():
            get_kernel("adam_multi", dt)(
                (nchunks,), (self._MULTI_THREADS,),
                (pp, gp, mp, vp, sizes, ct, cs, np.int64(self._ADAM_CHUNK), s(lr), s(b1), s(b2), s(hp["eps"]),
                 s(hp["weight_decay"]), s(bc1), s(bc2_sqrt),
                 np.int32(bool(hp["decoupled"])), np.int32(bool(hp["maximize"])),
                 _NULL_PTR if dev_hp is None else dev_hp))

    def matmul_bias(self, a, b, bias):
        """``a @ b + bias`` (``bias`` over the last axis) with the bias added inside the GEMM (cuBLASLt's bias
        epilogue: float32 accumulation, the bias added before the one rounding), else the GEMM and
        :meth:`add_bias_`.

        cuBLASLt refuses a float32 bias on a half product (measured on the H200): autocast's float32 bias is
        rounded to the half dtype first, as PyTorch's autocast does for ``addmm``.
        """
        if (self.use_cublaslt and self.fast_launch and a.dtype in _GEMM and b.dtype == a.dtype and a.ndim >= 2
                and b.ndim == 2 and bias.__class__ is self.ndarray and bias.ndim == 1 and bias._c_contiguous
                and bias.size == b.shape[1] and (bias.dtype == a.dtype or (a.dtype in _HALF and bias.dtype == _F32))):
            if bias.dtype != a.dtype:
                # autocast's float32 bias on a half product: cuBLASLt takes a bias of the output's dtype only, so
                # it is rounded to the half dtype first, as PyTorch's autocast casts addmm's bias
                bias = self.astype(bias, a.dtype)
            out = self._gemm(a, b, None, 4, bias)  # CUBLASLT_EPILOGUE_BIAS
            if out is not None:
                return out
        return super().matmul_bias(a, b, bias)

    def add_bias_(self, y, b):
        """``y += b`` over the last axis in one kernel (CuPy's broadcasting add indexes both operands
        generically, at about a third of the bandwidth, and allocates a new output)."""
        if (self.fast_launch and y.__class__ is self.ndarray and b.__class__ is self.ndarray and y._c_contiguous
                and b._c_contiguous and (y.dtype == b.dtype or (y.dtype in _HALF and b.dtype == _F32))
                and b.ndim == 1 and y.ndim >= 1 and y.shape[-1] == b.size and y.size and not self._multi):
            key = (y.dtype, b.dtype)
            k = self._bias_add.get(key, _MISS)
            if k is _MISS:
                k = self._bias_add[key] = bias_add_kernel(*key)
            if k is not None:
                n = y.size
                k((self._grid(n),), (256,), (y, b, np.int64(b.size), np.int64(n)))
                return y
        return super().add_bias_(y, b)

    def bias_act(self, x, bias, act: str = "relu"):
        """``act(x + bias)`` in one pass (``act``: none, relu, gelu, gelu_tanh; ``bias`` over the last axis)."""
        return self._bias_act("bias_act_fwd", None, x, bias, act)

    def bias_act_backward(self, g, x, bias, act: str = "relu"):
        """``dz = g * act'(x + bias)`` (the gradient for ``x``; sum it over leading axes for ``bias``)."""
        return self._bias_act("bias_act_bwd", g, x, bias, act)

    def _bias_act(self, name, g, x, bias, act, float_out=False):
        """The bias + activation kernels. Half ``x`` (and ``g``) are read in place: with ``float_out`` the
        forward writes float32 (autocast's float32 result, no float32 copy of ``x``); a float32 ``g`` for a half
        ``x`` (the gradient of that result) gives ``dz`` in ``x``'s dtype, rounded once."""
        if act not in BIAS_ACT_CODES:
            raise ValueError(f"bias_act: unknown activation {act!r}; accepted: {sorted(BIAS_ACT_CODES)}")
        if bias is not None and (x.ndim == 0 or bias.size != x.shape[-1]):
            raise ValueError(f"bias_act: bias of shape {bias.shape} does not match the last axis of {x.shape}")
        dt = x.dtype
        odt = _F32 if float_out and dt in _HALF else dt  # the result's dtype
        out_name = grad_name = None
        if dt in _HALF and (g is None or g.dtype == dt or g.dtype == _F32):
            # half x and g read in place (the kernel widens on load, rounds once on store): no float32 copies
            contig = self.ascontiguousarray
            xc = _contig_shaped(contig, x)
            gc = None if g is None else _contig_shaped(contig, g)
            cdt, io = _F32, _dt_name(dt)
            if odt != dt:
                out_name = _dt_name(odt)
            if gc is not None and gc.dtype != dt:
                grad_name = _dt_name(gc.dtype)
            bc = None if bias is None else _contig(contig, self.astype(bias, _F32, copy=False))
        else:
            io = None
            if g is None:
                (xc, bc), dt, cdt = self._compute(x, bias)
                gc = None
            else:
                (gc, xc, bc), dt, cdt = self._compute(g, x, bias)
            odt = dt
        n = xc.size
        ncol = bc.size if bc is not None else 1
        with self.device_ctx():
            out = self.ndarray(xc.shape, odt if out_name else xc.dtype)
            # a float32 result of a half x: its half rounding too, for autocast's cast of it (amp_rounded)
            y2 = self.ndarray(xc.shape, xc.dtype) if out_name and gc is None else None
            if n:
                b = xc if bc is None else bc
                head = (xc, b, out, _NULL_PTR if y2 is None else y2) if gc is None else (gc, xc, b, out)
                # one thread per 16-byte word of x (the kernel's IO_VEC elements)
                words = -(-n // (16 // xc.dtype.itemsize))
                get_kernel(name, cdt, io, out_name, grad_name)(
                    (self._grid(words),), (256,),
                    head + (np.int64(ncol), np.int64(n), _FLAG32[bc is not None], np.int32(BIAS_ACT_CODES[act])))
        if y2 is not None:
            self.amp_rounded = (out, y2)
        return out if y2 is not None else self.astype(out, odt, copy=False)

    # -- cuDNN: each method returns None wherever cuDNN is switched off, absent or declines the case, and
    # -- the op then runs its own kernels (pylucid.backends.cudnn holds the switches, read per call) -------
    def _cudnn(self):
        """``(pylucid.backend.cudnn, its algorithm keywords)``, or None when cuDNN is off or absent."""
        if not _cudnn_flags.enabled:
            return None
        mod = self._cudnn_mod
        if mod is None:
            from . import cudnn as mod

            if not mod.is_available():
                mod = False
            self._cudnn_mod = mod
        if mod is False:
            return None
        return mod, {"deterministic": _cudnn_flags.deterministic or _global_flags.deterministic,
                     "benchmark": _cudnn_flags.benchmark, "allow_tf32": _cudnn_flags.allow_tf32}

    def _conv_library(self):
        return self._cudnn()

    def sdpa(self, q, k, v, bias, scale, causal=False):
        """Flash attention forward ``(o, lse)`` through cuDNN for (B, H, L, E) half inputs, or None."""
        c = self._cudnn()
        if c is None:
            return None
        return c[0].sdpa_forward(q, k, v, scale=scale, causal=causal, bias=bias)

    def sdpa_backward(self, q, k, v, o, g, lse, bias, scale, causal=False):
        """``(dq, dk, dv)`` of :meth:`sdpa` through cuDNN, or None (deterministic kernel when asked for)."""
        c = self._cudnn()
        if c is None:
            return None
        r = c[0].sdpa_backward(q, k, v, o, g, lse, scale=scale, causal=causal, bias=bias,
                               deterministic=c[1]["deterministic"])
        return None if r is None else r[:3]
