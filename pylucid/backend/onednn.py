"""oneDNN for the CPU backend: Intel's convolution kernels, called through its C API with ``ctypes``.

The CPU backend's own convolutions are GEMMs through NumPy's BLAS (:class:`~pylucid.backend.base.ArrayBackend`);
oneDNN's are direct convolutions with just-in-time generated AVX2 / AVX-512 code, on the blocked layouts
(``nChw16c``) those kernels read. On a 2-core AMD EPYC they ran a 3x3 64->64 convolution (32x32, batch 16)
in the time PyTorch takes, which uses the same library, against 1.7 to 2.9 times for the GEMM path. It is
an optional extra (``pip install pylucid[onednn]``: the ``onednn-cpu-gomp`` wheel, oneDNN built with GNU
OpenMP and no other dependency); without it, or with ``pylucid.backends.mkldnn.enabled = False``, the GEMM
path runs, with the same results up to float rounding.

Functions on NumPy arrays, each returning None where oneDNN (or this module) does not take the
configuration, so the caller runs its own kernels instead:

* :func:`conv_forward` (``y = w * x + b``), :func:`conv_data_grad` (``dx``, also a transposed convolution's
  forward) and :func:`conv_weight_grad` (``dw``) for 1-d, 2-d and 3-d data with stride, per-side padding,
  dilation and groups, in float32 and (where the processor has the instructions) bfloat16. float64 and
  float16 are declined.
* :func:`matmul` of float32 or bfloat16 matrices (NumPy has no bfloat16 GEMM: the CPU backend otherwise
  multiplies float32 copies), float32 accumulation, the result in bfloat16 or float32; processors with
  AVX-512 BF16 multiply bfloat16 pairs directly, at twice the float32 rate. (The CPU backend keeps its float32 products on
  NumPy's BLAS: routed here with the BLAS single-threaded, the MLP, LeNet and LSTM steps ran slower.)
* :func:`eltwise_forward` and :func:`eltwise_backward`: GELU (erf or tanh form) of float32 arrays
  and its gradient, oneDNN's vectorised kernels (the erf form gave PyTorch's float32 values bit for
  bit on AVX2; NumPy has no fused kernel: the CPU backend's own GELU is some 20 passes over
  cache-sized blocks).

How it runs: one CPU engine and stream per process; per configuration (operation, shapes, dtype,
parameters) a primitive descriptor with the layouts oneDNN prefers, the primitive, and the reorders between
those layouts and the plain (C-contiguous) arrays pylucid holds, built once and cached. Every call then
wraps the arrays (no copy), reorders into the preferred layouts, executes, and reorders the result back.
Threads: oneDNN's OpenMP team is set to :func:`pylucid.get_num_threads` for each call. The math is
float32 throughout (oneDNN's strict float mode: no reduced-precision shortcuts); bfloat16 data is
accumulated in float32 and rounded once, as PyTorch's CPU convolution.

Nothing loads at import: :func:`is_available` finds the library on first use (``PYLUCID_ONEDNN_LIBRARY``, a
path, is tried first) and never raises (:func:`unavailable_reason` says why it is absent).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

import numpy as np

__all__ = ["is_available", "unavailable_reason", "version", "conv_forward", "conv_data_grad", "conv_weight_grad",
           "matmul", "eltwise_forward", "eltwise_backward"]

# -- the C API's constants (oneDNN 3.x, include/oneapi/dnnl/dnnl_types.h) ---------------------------------
_CPU = 1
_STREAM_IN_ORDER = 1
_TAG_ANY = 1
_F16, _BF16, _F32 = 1, 2, 3
_FORWARD_TRAINING = 64
_CONVOLUTION_DIRECT = 1
_Q_SRC, _Q_DIFF_SRC, _Q_WEIGHTS, _Q_DIFF_WEIGHTS, _Q_DST, _Q_DIFF_DST = 129, 130, 131, 132, 133, 134
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS = 1, 17, 33, 41
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 129, 145, 161
_Q_IMPL_INFO_STR = 8
_MAX_NDIMS = 12

# Fewer input channels per group than this (an image's first layer) in a forward or a weight
# gradient: taken only by the implementations in _FEW_CHANNEL_IMPLS, else declined. oneDNN pads the
# channels to its blocks: an implementation with 16-channel blocks ran a 3->64 3x3 convolution 15
# times slower than the CPU backend's channels-first im2col (and PyTorch), which is left to take it.
# AVX2's "jit:avx2" (8-channel blocks, a first-layer kernel reading the plain layout) ran the
# forwards of 1 to 8 input channels 1.3 to 2.6 times faster than the im2col path, as fast as PyTorch
# (2-core AMD EPYC: DCGAN's 3->32 4x4 stride-2 layer 197 against 431 us, ResNet's 3->64 3x3 stem 574
# against 1059 us), and the weight gradients of 2 to 8 channels 1.4 to 5 times faster; with one
# channel (MNIST's first layer) its weight gradient measured 1.2 to 1.35 times slower than the GEMM
# path: declined (_MIN_WGRAD_CHANNELS). (A data gradient with few channels, a generator's last
# transposed convolution, measured faster in oneDNN: taken.)
_MIN_CHANNELS = 16
_FEW_CHANNEL_IMPLS = ("jit:avx2",)
_MIN_WGRAD_CHANNELS = 2

_P = ctypes.c_void_p
_PP = ctypes.POINTER(_P)
_I = ctypes.c_int
_Dims = ctypes.c_int64 * _MAX_NDIMS

_DTYPES = {np.dtype(np.float32): _F32}
try:
    import ml_dtypes

    _DTYPES[np.dtype(ml_dtypes.bfloat16)] = _BF16
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of pylucid
    pass


class _Arg(ctypes.Structure):
    _fields_ = [("arg", _I), ("memory", _P)]


_state: dict = {"lib": None, "reason": None, "engine": None, "stream": None, "omp": None, "threads": None}
_lock = threading.Lock()
_plans: dict = {}


def _candidates():
    env = os.environ.get("PYLUCID_ONEDNN_LIBRARY")
    if env:
        yield env
    # the wheels install the library as data files: <prefix>/lib/libdnnl.so.3 (a venv, the user base)
    prefixes = [sys.prefix, getattr(sys, "base_prefix", sys.prefix)]
    try:
        import site

        prefixes.append(site.getuserbase())
    except Exception:  # pragma: no cover
        pass
    for pre in prefixes:
        for name in ("libdnnl.so.3", "libdnnl.so"):
            p = os.path.join(pre, "lib", name)
            if os.path.exists(p):
                yield p
    found = ctypes.util.find_library("dnnl")
    if found:
        yield found


def _bind(lib):
    sig = {
        "dnnl_engine_create": (_I, [_PP, _I, ctypes.c_size_t]),
        "dnnl_stream_create": (_I, [_PP, _P, ctypes.c_uint]),
        "dnnl_memory_desc_create_with_tag": (_I, [_PP, _I, _Dims, _I, _I]),
        "dnnl_memory_desc_create_with_strides": (_I, [_PP, _I, _Dims, _I, _Dims]),
        "dnnl_memory_desc_destroy": (_I, [_P]),
        "dnnl_memory_desc_equal": (_I, [_P, _P]),
        "dnnl_memory_desc_get_size": (ctypes.c_size_t, [_P]),
        "dnnl_convolution_forward_primitive_desc_create": (
            _I, [_PP, _P, _I, _I, _P, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P]),
        "dnnl_convolution_backward_data_primitive_desc_create": (
            _I, [_PP, _P, _I, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P, _P]),
        "dnnl_convolution_backward_weights_primitive_desc_create": (
            _I, [_PP, _P, _I, _P, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P, _P]),
        "dnnl_matmul_primitive_desc_create": (_I, [_PP, _P, _P, _P, _P, _P, _P]),
        "dnnl_eltwise_forward_primitive_desc_create": (
            _I, [_PP, _P, _I, _I, _P, _P, ctypes.c_float, ctypes.c_float, _P]),
        "dnnl_eltwise_backward_primitive_desc_create": (
            _I, [_PP, _P, _I, _P, _P, _P, ctypes.c_float, ctypes.c_float, _P, _P]),
        "dnnl_lstm_forward_primitive_desc_create": (_I, [_PP, _P, _I, _I] + [_P] * 11 + [ctypes.c_uint, _P]),
        "dnnl_lstm_backward_primitive_desc_create": (_I, [_PP, _P, _I, _I] + [_P] * 22 + [ctypes.c_uint, _P, _P]),
        "dnnl_reorder_primitive_desc_create": (_I, [_PP, _P, _P, _P, _P, _P]),
        "dnnl_primitive_desc_query_md": (_P, [_P, _I, _I]),
        "dnnl_primitive_desc_query": (_I, [_P, _I, _I, _P]),
        "dnnl_primitive_desc_destroy": (_I, [_P]),
        "dnnl_primitive_create": (_I, [_PP, _P]),
        "dnnl_memory_create": (_I, [_PP, _P, _P, _P]),
        "dnnl_memory_destroy": (_I, [_P]),
        "dnnl_primitive_execute": (_I, [_P, _P, _I, _P]),
        "dnnl_stream_wait": (_I, [_P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _load():
    """The bound library with its engine and stream, or None (``_state["reason"]`` says why)."""
    if _state["lib"] is not None or _state["reason"] is not None:
        return _state["lib"]
    with _lock:
        if _state["lib"] is not None or _state["reason"] is not None:
            return _state["lib"]
        reason = "oneDNN not found (pip install pylucid[onednn] installs it)"
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                _bind(lib)
                eng, strm = _P(), _P()
                if lib.dnnl_engine_create(ctypes.byref(eng), _CPU, 0) != 0:
                    raise OSError("dnnl_engine_create failed")
                if lib.dnnl_stream_create(ctypes.byref(strm), eng, _STREAM_IN_ORDER) != 0:
                    raise OSError("dnnl_stream_create failed")
            except (OSError, AttributeError) as exc:
                reason = f"{path}: {exc}"
                continue
            _state.update(engine=eng, stream=strm, omp=_omp_setter(), omp_pause=_omp_pauser())
            _state["lib"] = lib
            return lib
        _state["reason"] = reason
        return None


def _omp_pauser():
    """``omp_pause_resource_all`` of the OpenMP runtime oneDNN runs on, or None."""
    try:
        fn = ctypes.CDLL("libgomp.so.1").omp_pause_resource_all
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = _I, [_I]
    return fn


def _omp_setter():
    """``(omp_set_num_threads, omp_get_max_threads)`` of the OpenMP runtime oneDNN runs on (GNU's, loaded with
    it; PyTorch's when PyTorch loaded it first: the same soname), or None."""
    try:
        lib = ctypes.CDLL("libgomp.so.1")
        set_, get = lib.omp_set_num_threads, lib.omp_get_max_threads
    except (OSError, AttributeError):
        return None
    set_.restype, set_.argtypes = None, [_I]
    get.restype, get.argtypes = _I, []
    return set_, get


def is_available() -> bool:
    """True when the oneDNN library loads and gives a CPU engine (never raises)."""
    return _load() is not None


def unavailable_reason() -> str:
    """Why :func:`is_available` is False ("" when it is True), as ``pylucid.backend.cudnn``'s."""
    return "" if _load() is not None else _state["reason"]


def version() -> str | None:
    """oneDNN's version, ``"3.2.0"``, or None without it."""
    lib = _load()
    if lib is None:
        return None

    class _Version(ctypes.Structure):
        _fields_ = [("major", _I), ("minor", _I), ("patch", _I), ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                    ("gpu_runtime", ctypes.c_uint)]

    lib.dnnl_version.restype = ctypes.POINTER(_Version)
    v = lib.dnnl_version().contents
    return f"{v.major}.{v.minor}.{v.patch}"


# -- memory descriptors, primitives, execution -------------------------------------------------------------
def _dims(v) -> _Dims:
    d = _Dims()
    for i, x in enumerate(v):
        d[i] = int(x)
    return d


def _ok(status: int, what: str) -> None:
    if status != 0:
        raise _Declined(f"{what}: oneDNN status {status}")


class _Declined(Exception):
    """oneDNN refused a configuration (no implementation, bad sizes): the caller's kernels run instead."""


def _md_plain(shape, dt):
    """The C-contiguous layout of ``shape``."""
    lib = _state["lib"]
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    md = _P()
    _ok(lib.dnnl_memory_desc_create_with_strides(ctypes.byref(md), len(shape), _dims(shape), dt,
                                                 _dims(reversed(strides))), "memory descriptor")
    return md


def _md_any(shape, dt):
    md = _P()
    _ok(_state["lib"].dnnl_memory_desc_create_with_tag(ctypes.byref(md), len(shape), _dims(shape), dt, _TAG_ANY),
        "memory descriptor")
    return md


def _primitive(pd):
    p = _P()
    _ok(_state["lib"].dnnl_primitive_create(ctypes.byref(p), pd), "primitive")
    return p


class _Port:
    """One operand of a primitive: its plain layout, the layout the primitive chose and, when they differ, the
    reorder between them (into the primitive for an input, out of it for the output) and the buffer size."""

    __slots__ = ("plain", "chosen", "reorder", "nbytes")

    def __init__(self, plain, pd, query, is_output, index=0):
        lib = _state["lib"]
        self.plain = plain
        self.chosen = lib.dnnl_primitive_desc_query_md(pd, query, index)
        self.reorder = None
        self.nbytes = 0
        if not lib.dnnl_memory_desc_equal(plain, self.chosen):
            src, dst = (self.chosen, plain) if is_output else (plain, self.chosen)
            rpd = _P()
            _ok(lib.dnnl_reorder_primitive_desc_create(ctypes.byref(rpd), src, _state["engine"], dst,
                                                       _state["engine"], None), "reorder")
            self.reorder = _primitive(rpd)
            self.nbytes = lib.dnnl_memory_desc_get_size(self.chosen)


def _impl(pd) -> str:
    """The name of the implementation oneDNN chose (``"brg:avx512_core"``, ``"jit:avx2"``, ``"ref:any"``)."""
    out = ctypes.c_char_p()
    if _state["lib"].dnnl_primitive_desc_query(pd, _Q_IMPL_INFO_STR, 0, ctypes.byref(out)) != 0 or not out.value:
        return ""
    return out.value.decode()


class _Plan:
    __slots__ = ("pd", "prim", "ports", "hint", "impl")

    def __init__(self, pd, ports, hint=None, any_impl=False):
        self.impl = _impl(pd)
        # oneDNN's reference implementations (plain loops: the configurations no optimised kernel takes) are
        # far slower than the GEMM path: declined (``any_impl``: the RNN primitives, whose one implementation is
        # named "ref" but runs its cells on oneDNN's GEMM kernels)
        if self.impl.startswith("ref") and not any_impl:
            raise _Declined(f"only oneDNN's reference implementation ({self.impl})")
        self.pd, self.prim, self.ports, self.hint = pd, _primitive(pd), ports, hint  # hint: kept alive with pd


def _memory(md, ptr):
    m = _P()
    _ok(_state["lib"].dnnl_memory_create(ctypes.byref(m), md, _state["engine"], _P(ptr)), "memory")
    return m


def _run(prim, args) -> None:
    lib = _state["lib"]
    arr = (_Arg * len(args))(*[_Arg(a, m) for a, m in args])
    _ok(lib.dnnl_primitive_execute(prim, _state["stream"], len(args), arr), "execute")
    _ok(lib.dnnl_stream_wait(_state["stream"]), "stream wait")


class _Team:
    """``with _Team():`` oneDNN's OpenMP team at :func:`pylucid.get_num_threads` for the call, the runtime's
    previous count restored after it (the runtime may be PyTorch's too; OpenMP keeps the count per calling
    thread, so it is set on every call: a few hundred nanoseconds)."""

    __slots__ = ("old",)

    def __enter__(self):
        fns = _state["omp"]
        self.old = None
        if fns is not None:
            from .._threads import get_num_threads

            n = get_num_threads()
            old = fns[1]()
            if old != n:
                fns[0](n)
                self.old = old
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            _state["omp"][0](self.old)


def _execute(plan: _Plan, arrays) -> None:
    """Run ``plan`` on ``arrays`` (in the order of ``plan.ports``: (arg, port) pairs; the last is the output;
    each in the strides its port was made for, C-contiguous for the convolutions), reordering into and out of
    the primitive's layouts."""
    _run_ports(plan, arrays, (_ARG_DST, _ARG_DIFF_SRC, _ARG_DIFF_WEIGHTS))


# -- convolution -------------------------------------------------------------------------------------------
def _geometry(nd, stride, pads, dilation):
    """oneDNN's stride, dilation (0: none), left and right padding arrays."""
    return (_dims(stride), _dims(d - 1 for d in dilation), _dims(lo for lo, _ in pads), _dims(hi for _, hi in pads))


def _wshape(w_shape, groups):
    """The weight's dims as oneDNN reads them: (G, O/G, C/G, *k) for a grouped convolution."""
    w_shape = tuple(int(s) for s in w_shape)
    if groups == 1:
        return w_shape
    return (groups, w_shape[0] // groups) + w_shape[1:]


def _conv_key(kind, x_shape, w_shape, y_shape, dt, stride, pads, dilation, groups, bias):
    return (kind, tuple(x_shape), tuple(w_shape), tuple(y_shape), dt, tuple(stride), tuple(pads), tuple(dilation),
            groups, bias)


def _fwd_pd(xs, ws, ys, dt, geo, bias_dt, tag):
    """A forward primitive descriptor (``tag``: any layouts, or the plain ones for a hint)."""
    lib = _state["lib"]
    mk = _md_any if tag == "any" else _md_plain
    x_md, w_md, y_md = mk(xs, dt), mk(ws, dt), mk(ys, dt)
    b_md = _md_plain((ws[0] * ws[1] if len(ws) > len(xs) else ws[0],), bias_dt) if bias_dt else None
    pd = _P()
    _ok(lib.dnnl_convolution_forward_primitive_desc_create(ctypes.byref(pd), _state["engine"], _FORWARD_TRAINING,
                                                          _CONVOLUTION_DIRECT, x_md, w_md, b_md, y_md, *geo, None),
        "convolution forward")
    return pd, b_md


def _plan(key, build):
    plan = _plans.get(key, _plans)
    if plan is not _plans:
        return plan
    with _lock:
        plan = _plans.get(key, _plans)
        if plan is _plans:
            try:
                plan = build()
            except _Declined:
                plan = None
            _plans[key] = plan
    return plan


def _few_channels_checked(plan, few: bool):
    """``plan``, or (``few`` input channels per group) a refusal where its implementation is not one
    of _FEW_CHANNEL_IMPLS."""
    if few and plan.impl not in _FEW_CHANNEL_IMPLS:
        raise _Declined(f"{plan.impl} with fewer than {_MIN_CHANNELS} input channels")
    return plan


def _args_ok(arrays, dt) -> bool:
    return all(a.dtype == dt and a.size > 0 for a in arrays)


def conv_forward(x, w, stride, pads, dilation, groups, bias=None, **_flags):
    """``y = w * x (+ bias)`` for ``x`` (N, C, *S), ``w`` (O, C/G, *k), ``pads`` ((lo, hi), ...) per dim: a new
    C-contiguous (N, O, *out) array, or None where oneDNN does not take the configuration."""
    if _load() is None or x.dtype not in _DTYPES or not _args_ok((x, w), x.dtype) or not 1 <= x.ndim - 2 <= 3:
        return None
    few = w.shape[1] < _MIN_CHANNELS
    dt = _DTYPES[x.dtype]
    nd = x.ndim - 2
    out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                for s, (lo, hi), k, st, d in zip(x.shape[2:], pads, w.shape[2:], stride, dilation))
    if min(out) <= 0:
        return None
    ys = (x.shape[0], w.shape[0]) + out
    b = bias
    bias_dt = None if b is None else _DTYPES.get(b.dtype)
    if b is not None and bias_dt is None:
        return None
    ws = _wshape(w.shape, groups)
    key = _conv_key("fwd", x.shape, ws, ys, dt, stride, pads, dilation, groups, bias_dt)

    def build():
        pd, b_md = _fwd_pd(x.shape, ws, ys, dt, _geometry(nd, stride, pads, dilation), bias_dt, "any")
        ports = [(_ARG_SRC, _Port(_md_plain(x.shape, dt), pd, _Q_SRC, False)),
                 (_ARG_WEIGHTS, _Port(_md_plain(ws, dt), pd, _Q_WEIGHTS, False))]
        if b_md is not None:
            ports.append((_ARG_BIAS, _FixedPort(b_md)))
        ports.append((_ARG_DST, _Port(_md_plain(ys, dt), pd, _Q_DST, True)))
        return _few_channels_checked(_Plan(pd, ports), few)

    plan = _plan(key, build)
    if plan is None:
        return None
    y = np.empty(ys, dtype=x.dtype)
    arrays = [np.ascontiguousarray(x), np.ascontiguousarray(w)] + \
        ([np.ascontiguousarray(b)] if b is not None else []) + [y]
    with _lock, _Team():
        _execute(plan, arrays)
    return y


class _FixedPort:
    """An operand the primitive takes in the layout it is given (a bias; a matmul's strided operands)."""

    __slots__ = ("plain", "chosen", "reorder", "nbytes")

    def __init__(self, md):
        self.plain = self.chosen = md
        self.reorder = None
        self.nbytes = 0


def conv_data_grad(g, w, x_shape, stride, pads, dilation, groups, **_flags):
    """``dx`` (shape ``x_shape``) of :func:`conv_forward` for the output gradient ``g`` (N, O, *out); the forward
    of a transposed convolution. A new C-contiguous array, or None where oneDNN declines."""
    if _load() is None or g.dtype not in _DTYPES or not _args_ok((g, w), g.dtype) or not 1 <= g.ndim - 2 <= 3:
        return None
    x_shape = tuple(int(s) for s in x_shape)
    if 0 in x_shape:
        return None
    dt = _DTYPES[g.dtype]
    nd = g.ndim - 2
    ws = _wshape(w.shape, groups)
    key = _conv_key("bwd_data", x_shape, ws, g.shape, dt, stride, pads, dilation, groups, None)

    def build():
        geo = _geometry(nd, stride, pads, dilation)
        hint, _ = _fwd_pd(x_shape, ws, g.shape, dt, geo, None, "any")
        pd = _P()
        _ok(_state["lib"].dnnl_convolution_backward_data_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _CONVOLUTION_DIRECT, _md_any(x_shape, dt), _md_any(ws, dt),
            _md_any(g.shape, dt), *geo, hint, None), "convolution backward data")
        ports = [(_ARG_DIFF_DST, _Port(_md_plain(g.shape, dt), pd, _Q_DIFF_DST, False)),
                 (_ARG_WEIGHTS, _Port(_md_plain(ws, dt), pd, _Q_WEIGHTS, False)),
                 (_ARG_DIFF_SRC, _Port(_md_plain(x_shape, dt), pd, _Q_DIFF_SRC, True))]
        return _Plan(pd, ports, hint)

    plan = _plan(key, build)
    if plan is None:
        return None
    dx = np.empty(x_shape, dtype=g.dtype)
    with _lock, _Team():
        _execute(plan, [np.ascontiguousarray(g), np.ascontiguousarray(w), dx])
    return dx


def conv_weight_grad(x, g, w_shape, stride, pads, dilation, groups, **_flags):
    """``dw`` (shape ``w_shape``) of :func:`conv_forward` for input ``x`` and output gradient ``g``: a new
    C-contiguous array, or None where oneDNN declines."""
    if _load() is None or x.dtype not in _DTYPES or not _args_ok((x, g), x.dtype) or not 1 <= x.ndim - 2 <= 3:
        return None
    if w_shape[1] < _MIN_WGRAD_CHANNELS:
        return None
    few = w_shape[1] < _MIN_CHANNELS
    dt = _DTYPES[x.dtype]
    nd = x.ndim - 2
    ws = _wshape(w_shape, groups)
    key = _conv_key("bwd_weights", x.shape, ws, g.shape, dt, stride, pads, dilation, groups, None)

    def build():
        geo = _geometry(nd, stride, pads, dilation)
        hint, _ = _fwd_pd(x.shape, ws, g.shape, dt, geo, None, "any")
        pd = _P()
        _ok(_state["lib"].dnnl_convolution_backward_weights_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _CONVOLUTION_DIRECT, _md_any(x.shape, dt), _md_any(ws, dt), None,
            _md_any(g.shape, dt), *geo, hint, None), "convolution backward weights")
        ports = [(_ARG_SRC, _Port(_md_plain(x.shape, dt), pd, _Q_SRC, False)),
                 (_ARG_DIFF_DST, _Port(_md_plain(g.shape, dt), pd, _Q_DIFF_DST, False)),
                 (_ARG_DIFF_WEIGHTS, _Port(_md_plain(ws, dt), pd, _Q_DIFF_WEIGHTS, True))]
        return _few_channels_checked(_Plan(pd, ports, hint), few)

    plan = _plan(key, build)
    if plan is None:
        return None
    dw = np.empty(tuple(int(s) for s in w_shape), dtype=x.dtype)
    with _lock, _Team():
        _execute(plan, [np.ascontiguousarray(x), np.ascontiguousarray(g), dw])
    return dw


# -- matrix product ----------------------------------------------------------------------------------------
_MATMUL_DTYPES = {np.dtype(np.float32): _F32}
if _BF16 in _DTYPES.values():
    _MATMUL_DTYPES[next(d for d, v in _DTYPES.items() if v == _BF16)] = _BF16


def _md_strided(shape, strides_bytes, itemsize, dt):
    md = _P()
    _ok(_state["lib"].dnnl_memory_desc_create_with_strides(
        ctypes.byref(md), len(shape), _dims(shape), dt, _dims(s // itemsize for s in strides_bytes)), "memory descriptor")
    return md


def _batch_ok(a) -> bool:
    """An operand oneDNN reads in place: non-negative element strides, the last or second-to-last dim unit
    (row- or column-major matrices), any strides for the batch dims."""
    it = a.itemsize
    st = a.strides
    return all(v >= 0 and v % it == 0 for v in st) and (st[-1] == it or st[-2] == it)


def matmul(a, b, out_dtype, bias=None):
    """``a @ b (+ bias)`` of float32 or bfloat16 matrices (both the same dtype): ``a`` (..., M, K) and ``b``
    (..., K, N) with equal batch dims, or a 2-d ``b`` (then ``a``'s leading dims are merged into M where they
    are contiguous), as a new C-contiguous array of ``out_dtype`` (bfloat16 or float32); ``bias`` (N,), float32
    or bfloat16, is added before the one rounding. None where oneDNN (or this function) does not take it."""
    dt_in = _MATMUL_DTYPES.get(a.dtype)
    if dt_in is None or b.dtype != a.dtype or a.ndim < 2 or b.ndim < 2 or np.dtype(out_dtype) not in _MATMUL_DTYPES \
            or a.ndim > _MAX_NDIMS or _load() is None:
        return None
    if b.ndim == 2 and a.ndim > 2:
        if not a.flags.c_contiguous:
            return None
        lead, m = a.shape[:-2], a.shape[-2]
        a2 = a.reshape(-1, a.shape[-1])
    elif a.ndim == b.ndim and a.shape[:-2] == b.shape[:-2]:
        lead, m, a2 = (), None, a
    else:
        return None
    if a2.shape[-1] != b.shape[-2] or 0 in a2.shape or 0 in b.shape or not (_batch_ok(a2) and _batch_ok(b)):
        return None
    out_dtype = np.dtype(out_dtype)
    dt_out = _MATMUL_DTYPES[out_dtype]
    dt_bias = None
    if bias is not None:
        dt_bias = _MATMUL_DTYPES.get(bias.dtype)
        if dt_bias is None or bias.shape != (b.shape[-1],) or a2.ndim != 2:
            return None
        bias = np.ascontiguousarray(bias)
    y_shape = a2.shape[:-1] + (b.shape[-1],)
    key = ("matmul", a2.shape, a2.strides, b.shape, b.strides, dt_in, dt_out, dt_bias)

    def build():
        a_md = _md_strided(a2.shape, a2.strides, a2.itemsize, dt_in)
        b_md = _md_strided(b.shape, b.strides, b.itemsize, dt_in)
        y_md = _md_plain(y_shape, dt_out)
        bias_md = _md_plain((1, b.shape[1]), dt_bias) if dt_bias is not None else None
        pd = _P()
        _ok(_state["lib"].dnnl_matmul_primitive_desc_create(ctypes.byref(pd), _state["engine"], a_md, b_md, bias_md,
                                                            y_md, None), "matmul")
        ports = [(_ARG_SRC, _FixedPort(a_md)), (_ARG_WEIGHTS, _FixedPort(b_md))]
        if bias_md is not None:
            ports.append((_ARG_BIAS, _FixedPort(bias_md)))
        return _Plan(pd, ports + [(_ARG_DST, _FixedPort(y_md))])

    plan = _plan(key, build)
    if plan is None:
        return None
    y = np.empty(y_shape, dtype=out_dtype)
    with _lock, _Team():
        _execute(plan, [a2, b] + ([bias] if bias is not None else []) + [y])
    return y.reshape(lead + (m, b.shape[-1])) if lead else y


# -- element-wise functions -----------------------------------------------------------------------
#: oneDNN's algorithm numbers (dnnl_alg_kind_t) of the functions taken here
_ELTWISE_ALGORITHMS = {"gelu_erf": 0x31, "gelu_tanh": 0x2b}


def _eltwise_plan(kind: str, algorithm: str, n: int):
    """The forward (``kind`` "fwd") or backward plan of ``algorithm`` on ``n`` float32 values (the
    functions act value by value: every C-contiguous array is read as one flat vector), or None
    where oneDNN declines."""
    alg = _ELTWISE_ALGORITHMS[algorithm]

    def build():
        lib, engine = _state["lib"], _state["engine"]
        md = _md_plain((n,), _F32)
        fwd = _P()
        _ok(lib.dnnl_eltwise_forward_primitive_desc_create(
            ctypes.byref(fwd), engine, _FORWARD_TRAINING, alg, md, md, 0.0, 0.0, None),
            "eltwise forward")
        if kind == "fwd":
            return _Plan(fwd, [(_ARG_SRC, _FixedPort(md)), (_ARG_DST, _FixedPort(md))])
        pd = _P()
        _ok(lib.dnnl_eltwise_backward_primitive_desc_create(
            ctypes.byref(pd), engine, alg, md, md, md, 0.0, 0.0, fwd, None), "eltwise backward")
        return _Plan(pd, [(_ARG_SRC, _FixedPort(md)), (_ARG_DIFF_DST, _FixedPort(md)),
                          (_ARG_DIFF_SRC, _FixedPort(md))], hint=fwd)

    return _plan(("eltwise", kind, algorithm, n), build)


def _eltwise_run(plan, arrays) -> None:
    """Run an eltwise ``plan``, then stop oneDNN's OpenMP workers (:func:`_rest_team`): a GELU sits
    between two matrix products, and its workers, spinning after the call, took a core from the
    OpenBLAS GEMMs that follow (the character transformer's linear layers ran about 2 times slower,
    the step 1.6 instead of 1.2 times PyTorch's). The restart costs some tens of microseconds, about
    a fifth of a 524288-value GELU."""
    with _lock, _Team():
        _execute(plan, arrays)
        _rest_team()


def eltwise_forward(x, algorithm: str):
    """``f(x)`` for a float32 array ``x`` (``algorithm``: "gelu_erf", ``x Phi(x)``; "gelu_tanh", its
    tanh form), a new C-contiguous array of ``x``'s shape; None where oneDNN declines (or is
    absent)."""
    if _load() is None or x.dtype != np.float32 or not x.size:
        return None
    plan = _eltwise_plan("fwd", algorithm, x.size)
    if plan is None:
        return None
    y = np.empty(x.shape, dtype=np.float32)
    _eltwise_run(plan, [np.ascontiguousarray(x), y])
    return y


def eltwise_backward(g, x, algorithm: str):
    """``g f'(x)`` of :func:`eltwise_forward` (``g`` and ``x`` float32 of one shape), a new
    C-contiguous array, or None where oneDNN declines."""
    if _load() is None or x.dtype != np.float32 or g.dtype != np.float32 or g.shape != x.shape or \
            not x.size:
        return None
    plan = _eltwise_plan("bwd", algorithm, x.size)
    if plan is None:
        return None
    dx = np.empty(x.shape, dtype=np.float32)
    _eltwise_run(plan, [np.ascontiguousarray(x), np.ascontiguousarray(g), dx])
    return dx


# -- LSTM --------------------------------------------------------------------------------------------------
# the RNN primitives' argument numbers (dnnl_types.h: DNNL_ARG_SRC_LAYER = DNNL_ARG_SRC_0, ...)
_ARG_SRC_ITER, _ARG_SRC_ITER_C = 2, 3
_ARG_DST_ITER, _ARG_DST_ITER_C = 18, 19
_ARG_WEIGHTS_ITER, _ARG_WORKSPACE = 34, 64
_ARG_DIFF_SRC_ITER, _ARG_DIFF_SRC_ITER_C = 130, 131
_ARG_DIFF_DST_ITER, _ARG_DIFF_DST_ITER_C = 146, 147
_ARG_DIFF_WEIGHTS_ITER, _ARG_DIFF_BIAS = 162, 169
_Q_EXEC_ARG = 255
_BACKWARD = 128
_LEFT2RIGHT, _RIGHT2LEFT = 1, 2
_DIFF_WEIGHTS_OVERWRITE = 1  # dnnl_rnn_flags_diff_weights_overwrite: the weight gradients written, not added to


def _arg_port(plain, pd, arg, is_output):
    """One operand of an RNN primitive, found by its argument number: a :class:`_Port` (the layout pylucid's array
    has, the one the primitive chose, ``any`` asked for, and the reorder between them where they differ)."""
    return _Port(plain, pd, _Q_EXEC_ARG, is_output, arg)


def _run_ports(plan, arrays, outputs) -> None:
    """Run ``plan`` (its ``ports``: (arg, port) pairs, ``arrays`` in their order), reordering the inputs into the
    primitive's layouts and the ``outputs`` (argument numbers) back out of them."""
    lib = _state["lib"]
    if not _state.get("ran"):
        # the first primitive this process runs: OpenBLAS's idle workers, spinning for 0.1 s after each of its
        # calls, would take the cores oneDNN's team needs from now on (a process whose every case oneDNN
        # declines keeps OpenBLAS's default wait)
        from .._threads import short_blas_wait

        short_blas_wait()
        _state["ran"] = True
    made, args, outs, keep = [], [], [], []
    try:
        for (arg, port), a in zip(plan.ports, arrays):
            m = _memory(port.plain, a.ctypes.data)
            made.append(m)
            if port.reorder is None:
                args.append((arg, m))
                continue
            buf = np.empty(port.nbytes, dtype=np.uint8)
            keep.append(buf)
            inner = _memory(port.chosen, buf.ctypes.data)
            made.append(inner)
            args.append((arg, inner))
            if arg in outputs:
                outs.append((port.reorder, inner, m))
            else:
                _run(port.reorder, [(_ARG_SRC, m), (_ARG_DST, inner)])
        _run(plan.prim, args)
        for reorder, inner, m in outs:
            _run(reorder, [(_ARG_SRC, inner), (_ARG_DST, m)])
    finally:
        for m in made:
            lib.dnnl_memory_destroy(m)


def _lstm_mds(steps, bsz, n_in, hid):
    """The plain layouts of one LSTM layer direction's operands, keyed by argument: the sequence (T, N, C),
    the states (1, 1, N, H), the weights as PyTorch keeps them ((4H, C): oneDNN's (1, 1, C, 4, H) with the
    strides of ``ldgoi``) and the bias (1, 1, 4, H)."""
    f = _F32
    it = 4  # float32

    def weights(c):
        return _md_strided((1, 1, c, 4, hid), (4 * hid * c * it, 4 * hid * c * it, it, hid * c * it, c * it), it, f)

    state = (1, 1, bsz, hid)
    return {"x": _md_plain((steps, bsz, n_in), f), "y": _md_plain((steps, bsz, hid), f),
            "h": _md_plain(state, f), "c": _md_plain(state, f), "w_ih": weights(n_in), "w_hh": weights(hid),
            "b": _md_plain((1, 1, 4, hid), f)}


def _lstm_pd(kind, steps, bsz, n_in, hid, reverse, hint=None):
    """The forward-training (``kind`` "fwd") or backward primitive descriptor of one LSTM layer direction, the
    weights in the layouts oneDNN prefers (``any``), every other operand plain."""
    lib = _state["lib"]
    md = _lstm_mds(steps, bsz, n_in, hid)
    w_ih, w_hh = _md_any((1, 1, n_in, 4, hid), _F32), _md_any((1, 1, hid, 4, hid), _F32)
    direction = _RIGHT2LEFT if reverse else _LEFT2RIGHT
    pd = _P()
    fwd = (md["x"], md["h"], md["c"], w_ih, w_hh, None, None, md["b"], md["y"], md["h"], md["c"])
    if kind == "fwd":
        _ok(lib.dnnl_lstm_forward_primitive_desc_create(ctypes.byref(pd), _state["engine"], _FORWARD_TRAINING,
                                                        direction, *fwd, 0, None), "lstm forward")
    else:
        dw_ih, dw_hh = _md_any((1, 1, n_in, 4, hid), _F32), _md_any((1, 1, hid, 4, hid), _F32)
        diff = (md["x"], md["h"], md["c"], dw_ih, dw_hh, None, None, md["b"], md["y"], md["h"], md["c"])
        _ok(lib.dnnl_lstm_backward_primitive_desc_create(ctypes.byref(pd), _state["engine"], _BACKWARD, direction,
                                                         *fwd, *diff, _DIFF_WEIGHTS_OVERWRITE, hint, None),
            "lstm backward")
    return pd, md


def _lstm_plans(steps, bsz, n_in, hid, reverse):
    """(forward plan, backward plan) of one LSTM layer direction, built together (the backward's descriptor
    takes the forward's as its hint), or None where oneDNN declines."""
    key = ("lstm", steps, bsz, n_in, hid, reverse)

    def build():
        fpd, md = _lstm_pd("fwd", steps, bsz, n_in, hid, reverse)
        ws = _state["lib"].dnnl_primitive_desc_query_md(fpd, _Q_EXEC_ARG, _ARG_WORKSPACE)
        ws_bytes = _state["lib"].dnnl_memory_desc_get_size(ws)

        def inputs(pd):
            # the sequence, states and bias plain; the weights reordered into the layouts ``pd`` chose
            return [(_ARG_SRC, _FixedPort(md["x"])), (_ARG_SRC_ITER, _FixedPort(md["h"])),
                    (_ARG_SRC_ITER_C, _FixedPort(md["c"])),
                    (_ARG_WEIGHTS, _arg_port(md["w_ih"], pd, _ARG_WEIGHTS, False)),
                    (_ARG_WEIGHTS_ITER, _arg_port(md["w_hh"], pd, _ARG_WEIGHTS_ITER, False)),
                    (_ARG_BIAS, _FixedPort(md["b"]))]

        results = [(_ARG_DST, _FixedPort(md["y"])), (_ARG_DST_ITER, _FixedPort(md["h"])),
                   (_ARG_DST_ITER_C, _FixedPort(md["c"])), (_ARG_WORKSPACE, _FixedPort(ws))]
        fwd = _Plan(fpd, inputs(fpd) + results, any_impl=True)
        bpd, md = _lstm_pd("bwd", steps, bsz, n_in, hid, reverse, hint=fpd)
        grads = [(_ARG_DIFF_DST, _FixedPort(md["y"])), (_ARG_DIFF_DST_ITER, _FixedPort(md["h"])),
                 (_ARG_DIFF_DST_ITER_C, _FixedPort(md["c"])), (_ARG_DIFF_SRC, _FixedPort(md["x"])),
                 (_ARG_DIFF_SRC_ITER, _FixedPort(md["h"])), (_ARG_DIFF_SRC_ITER_C, _FixedPort(md["c"])),
                 (_ARG_DIFF_WEIGHTS, _arg_port(md["w_ih"], bpd, _ARG_DIFF_WEIGHTS, True)),
                 (_ARG_DIFF_WEIGHTS_ITER, _arg_port(md["w_hh"], bpd, _ARG_DIFF_WEIGHTS_ITER, True)),
                 (_ARG_DIFF_BIAS, _FixedPort(md["b"]))]
        bports = inputs(bpd) + results + grads
        return fwd, _Plan(bpd, bports, hint=fpd, any_impl=True), ws_bytes

    return _plan(key, build)


def _rest_team() -> None:
    """Stop oneDNN's OpenMP workers now (``omp_pause_resource_all(omp_pause_soft)``; the next primitive starts
    them again), called after each LSTM primitive: GNU OpenMP's idle workers spin for some milliseconds after a
    parallel region (GOMP_SPINCOUNT, read once when the runtime loads), and with 2 cores a spinning worker took
    half the machine from the OpenBLAS GEMMs that follow (an LSTM language model's decoder: its weight gradient
    ran 2 to 3 times slower). Restarting a worker costs some tens of microseconds; the step measured 10 to 20%
    faster. An LSTM primitive's own regions follow each other within microseconds: its workers spin through
    them as before."""
    pause = _state.get("omp_pause")
    if pause is not None:
        pause(1)


def _lstm_plans_of(x, h0, reverse):
    """:func:`_lstm_plans` for the sequence ``x`` (T, N, C) and the states ``h0`` (N, H)."""
    steps, bsz, n_in = x.shape
    return _lstm_plans(steps, bsz, n_in, h0.shape[-1], bool(reverse))


def lstm_forward(x, h0, c0, w_ih, w_hh, bias, reverse=False):
    """One LSTM layer direction over a whole sequence, as PyTorch's ``mkldnn_rnn_layer``: ``x`` (T, N, C),
    ``h0``/``c0`` (N, H), ``w_ih`` (4H, C), ``w_hh`` (4H, H) and ``bias`` (4H,) (``b_ih + b_hh``), all float32
    and C-contiguous; gates ``i, f, g, o``. Returns ``(states, workspace)``: ``states`` (T + 2, N, H) holds the
    output sequence, then ``h_n``, then ``c_n``; both are what :func:`lstm_backward` reads. None where oneDNN
    (or this function) does not take it."""
    arrays = (x, h0, c0, w_ih, w_hh, bias)
    if _load() is None or any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays) or 0 in x.shape:
        return None
    plans = _lstm_plans_of(x, h0, reverse)
    if plans is None:
        return None
    fwd, _, ws_bytes = plans
    steps, bsz, hid = x.shape[0], x.shape[1], h0.shape[-1]
    states = np.empty((steps + 2, bsz, hid), dtype=np.float32)
    ws = np.empty(ws_bytes, dtype=np.uint8)
    with _lock, _Team():
        _run_ports(fwd, arrays + (states[:steps], states[steps], states[steps + 1], ws), ())
        _rest_team()
    return states, ws


def lstm_backward(x, h0, c0, w_ih, w_hh, bias, states, ws, g_y, g_h, g_c, reverse=False):
    """The gradients ``(dx, dh0, dc0, dw_ih, dw_hh, dbias)`` of :func:`lstm_forward` (its inputs, states and
    workspace given back) for the output gradients ``g_y`` (T, N, H), ``g_h`` and ``g_c`` (N, H), or None."""
    if _load() is None or any(a.dtype != np.float32 for a in (g_y, g_h, g_c)):
        return None
    plans = _lstm_plans_of(x, h0, reverse)
    if plans is None:
        return None
    bwd = plans[1]
    steps = x.shape[0]
    g_y, g_h, g_c = (np.ascontiguousarray(a) for a in (g_y, g_h, g_c))
    dx, dh, dc = np.empty_like(x), np.empty_like(h0), np.empty_like(c0)
    dw_ih, dw_hh, db = np.empty_like(w_ih), np.empty_like(w_hh), np.empty_like(bias)
    with _lock, _Team():
        _run_ports(bwd, (x, h0, c0, w_ih, w_hh, bias, states[:steps], states[steps], states[steps + 1], ws, g_y, g_h,
                         g_c, dx, dh, dc, dw_ih, dw_hh, db), (_ARG_DIFF_WEIGHTS, _ARG_DIFF_WEIGHTS_ITER))
        _rest_team()
    return dx, dh, dc, dw_ih, dw_hh, db
