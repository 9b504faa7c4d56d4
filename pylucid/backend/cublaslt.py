"""cuBLASLt through ctypes: GEMMs with an epilogue, the algorithm chosen once per signature.

:class:`CUDABackend` adds Linear's bias inside the GEMM here (``CUBLASLT_EPILOGUE_BIAS``: one kernel and
one pass over the output less, as PyTorch does for ``addmm``). The heuristic
(``cublasLtMatmulAlgoGetHeuristic``) runs once per signature -- operation, shapes, leading dimensions,
dtypes, epilogue, pointer alignment -- and each later call is one ``cublasLtMatmul`` with the cached
descriptors and algorithm.

Measured on the H200 and not used (``benchmarks``-style probe, GPT-2's shapes): plain products through
this path cost 2-3 us more host time per call than ``cublasGemmEx``; the bias-gradient epilogue
(``CUBLASLT_EPILOGUE_BGRADB``) runs a separate reduction kernel that is slower than the backend's column
sum for large outputs; and cuBLASLt refuses a float32 bias on a bfloat16 output (autocast's Linear).

Everything is column-major, as in cuBLAS: ``D (m x n) = op(A) (m x k) @ op(B) (k x n)``; the backend maps
its row-major products onto that (``C = A B`` is ``C^T = B^T A^T``). The cuBLAS handle of CuPy serves as
the cuBLASLt handle (cuBLAS documents the two as interchangeable). The workspace is one buffer per
stream, allocated eagerly (never inside a CUDA graph capture: a stream without one falls back to
``cublasGemmEx``). A signature cuBLASLt refuses (no algorithm) is remembered and falls back the same way.
"""

from __future__ import annotations

import ctypes
import os

# cublasLt enums (cublasLt.h)
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_PREF_MAX_WORKSPACE_BYTES = 1
_PREF_MIN_ALIGNMENT = (5, 6, 7, 8)  # A, B, C, D
EPILOGUE_DEFAULT, EPILOGUE_BIAS = 1, 4

#: bytes of workspace per stream (cuBLAS's recommendation for Hopper)
WORKSPACE_BYTES = 32 << 20
_SHARE_HANDLE = os.environ.get("PYLUCID_CUBLASLT_HANDLE") == "cublas"


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def _load():
    """libcublasLt: the one already mapped into the process (CuPy's libcublas pulls it in), else by name."""
    path = None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if line.rsplit("/", 1)[-1].startswith("libcublasLt.so"):
                    path = line.split(None, 5)[-1].strip()
                    break
    except OSError:
        pass
    for candidate in ([path] if path else []) + ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"]:
        try:
            lib = ctypes.CDLL(candidate)
            break
        except OSError:
            continue
    else:
        return None
    vp, i, u64, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
    sigs = {
        "cublasLtCreate": [vp],
        "cublasLtMatmulDescCreate": [vp, i, i],
        "cublasLtMatmulDescSetAttribute": [vp, i, vp, sz],
        "cublasLtMatrixLayoutCreate": [vp, i, u64, u64, i64],
        "cublasLtMatmulPreferenceCreate": [vp],
        "cublasLtMatmulPreferenceSetAttribute": [vp, i, vp, sz],
        "cublasLtMatmulAlgoGetHeuristic": [vp, vp, vp, vp, vp, vp, vp, i, vp, vp],
        "cublasLtMatmul": [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, sz, vp],
    }
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = i
    return lib


class _Plan:
    """The descriptors and algorithm of one GEMM signature, plus the bias-pointer slot its calls fill."""

    __slots__ = ("desc", "a", "b", "c", "algo", "ws", "bias", "bias_ref")

    def __init__(self, desc, a, b, c, algo, ws):
        self.desc, self.a, self.b, self.c, self.algo, self.ws = desc, a, b, c, algo, ws
        self.bias = ctypes.c_void_p(0)
        self.bias_ref = ctypes.byref(self.bias)


class CublasLt:
    """One per process: the library, the plan cache and the per-stream workspaces."""

    def __init__(self, lib):
        self.lib = lib
        self.plans: dict = {}
        self.workspaces: dict = {}  # (device id, stream pointer) -> CuPy array
        self._prefs: dict = {}
        self._handles: dict = {}  # device id -> cuBLASLt handle
        self.error = None  # the first failure, with its reason (for diagnostics)

    def handle(self, dev: int, cublas_handle):
        """This device's own cuBLASLt handle (``cublasLtCreate``), else ``cublas_handle`` (cuBLAS documents a
        cuBLAS handle as usable in its place; ``PYLUCID_CUBLASLT_HANDLE=cublas`` asks for that)."""
        h = self._handles.get(dev)
        if h is None:
            h = ctypes.c_void_p()
            if _SHARE_HANDLE or self.lib.cublasLtCreate(ctypes.byref(h)):
                h = ctypes.c_void_p(cublas_handle)
            h = self._handles[dev] = h.value
        return h

    def _i32(self, fn, obj, attr, value):
        v = ctypes.c_int32(value)
        return fn(obj, attr, ctypes.byref(v), 4)

    def _pref(self, align):
        p = self._prefs.get(align)
        if p is None:
            lib = self.lib
            p = ctypes.c_void_p()
            if lib.cublasLtMatmulPreferenceCreate(ctypes.byref(p)):
                return None
            ws = ctypes.c_uint64(WORKSPACE_BYTES)
            lib.cublasLtMatmulPreferenceSetAttribute(p, _PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws), 8)
            for attr in _PREF_MIN_ALIGNMENT:
                self._i32(lib.cublasLtMatmulPreferenceSetAttribute, p, attr, align)
            self._prefs[align] = p
        return p

    def _layout(self, dt, rows, cols, ld):
        h = ctypes.c_void_p()
        if self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(h), dt, rows, cols, ld):
            return None
        return h

    def _make(self, handle, key):
        ta, tb, m, n, k, lda, ldb, ldc, ab_dt, c_dt, compute, scale_dt, epilogue, bias_dt, align = key
        lib = self.lib
        desc = ctypes.c_void_p()
        if lib.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, scale_dt):
            return None
        set_attr = lib.cublasLtMatmulDescSetAttribute
        self._i32(set_attr, desc, _DESC_TRANSA, ta)
        self._i32(set_attr, desc, _DESC_TRANSB, tb)
        if epilogue != EPILOGUE_DEFAULT:
            ep = ctypes.c_uint32(epilogue)
            set_attr(desc, _DESC_EPILOGUE, ctypes.byref(ep), 4)
        a = self._layout(ab_dt, m if ta == 0 else k, k if ta == 0 else m, lda)
        b = self._layout(ab_dt, k if tb == 0 else n, n if tb == 0 else k, ldb)
        c = self._layout(c_dt, m, n, ldc)
        pref = self._pref(align)
        if a is None or b is None or c is None or pref is None:
            return None
        res = _Heuristic()
        count = ctypes.c_int(0)
        status = lib.cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 1, ctypes.byref(res),
                                                    ctypes.byref(count))
        if status or count.value < 1 or res.state:
            return None
        algo = _Algo()
        ctypes.memmove(ctypes.byref(algo), ctypes.byref(res.algo), ctypes.sizeof(_Algo))
        return _Plan(desc, a, b, c, algo, res.workspace_size)

    def workspace(self, cp, dev: int, stream: int):
        """The workspace of ``stream`` on device ``dev``, allocated on first use (from CuPy's current pool).

        A CUDA graph capture calls this before it starts (:meth:`CUDAGraph.capture_begin`), so the capturing
        stream has one: the algorithms cuBLASLt picks for large products need workspace, and without it the
        captured Linear fell back to a GEMM and a separate bias kernel (GPT-2 at 1024 tokens)."""
        buf = self.workspaces.get((dev, stream))
        if buf is None:
            with cp.cuda.Device(dev):
                buf = self.workspaces[(dev, stream)] = cp.empty((WORKSPACE_BYTES,), dtype=cp.uint8)
        return buf

    def matmul(self, cp, handle, stream, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ab_dt, c_dt, compute, scale_dt,
               alpha, beta, epilogue=EPILOGUE_DEFAULT, bias=0, bias_dt=None) -> bool:
        """``D = C = op(A) op(B)`` (+ the epilogue) on ``stream``; False if cuBLASLt cannot take it here
        (the caller then runs its own path). ``a``, ``b``, ``c``, ``bias``: device pointers; ``alpha``,
        ``beta``: host pointers of the scale type."""
        bits = a | b | c | bias
        align = 256 if not bits & 255 else bits & -bits
        if align < 16:
            return False
        key = (ta, tb, m, n, k, lda, ldb, ldc, ab_dt, c_dt, compute, scale_dt, epilogue, bias_dt, align)
        plan = self.plans.get(key, False)
        dev = cp.cuda.runtime.getDevice()
        handle = self.handle(dev, handle)
        if plan is False:
            plan = self.plans[key] = self._make(handle, key)
        if plan is None:
            return False
        ws = 0
        if plan.ws:
            buf = self.workspaces.get((dev, stream))
            if buf is None:
                from .cuda import CAPTURING

                if CAPTURING[0]:
                    return False  # no allocation inside a capture: cuBLAS's own path serves this stream
                buf = self.workspace(cp, dev, stream)
            ws = buf.data.ptr
        if bias:
            plan.bias.value = bias
            self.lib.cublasLtMatmulDescSetAttribute(plan.desc, _DESC_BIAS_POINTER, plan.bias_ref, 8)
        status = self.lib.cublasLtMatmul(handle, plan.desc, alpha, a, plan.a, b, plan.b, beta, c, plan.c, c, plan.c,
                                         ctypes.byref(plan.algo), ws, plan.ws, stream)
        if status:
            self.error = f"cublasLtMatmul status {status} for {key}"
            self.plans[key] = None
            return False
        return True


_LT: list = []


def cublaslt():
    """The process's :class:`CublasLt`, or None when libcublasLt cannot be loaded."""
    if not _LT:
        lib = _load()
        _LT.append(CublasLt(lib) if lib is not None else None)
    return _LT[0]
