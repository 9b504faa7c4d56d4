"""cuDNN for the CUDA backend, through NVIDIA's Python frontend (``nvidia-cudnn-frontend``, its graph API).

Functions on CuPy arrays; each returns ``None`` when cuDNN (or this module) does not support the
configuration, so the caller runs its own kernels instead:

* convolution: :func:`conv_forward`, :func:`conv_data_grad`, :func:`conv_weight_grad` for 1-d (run as
  2-d with a height of 1), 2-d and 3-d data, with stride, per-side padding, dilation and groups, in
  float32 / float16 / bfloat16 (float64 is declined: see ``_types``), NCHW or channels-last (NHWC) memory.
  A transposed convolution is the data gradient of a convolution (its forward), and its gradients are a
  convolution (input) and a weight gradient with the roles of the two activations swapped.
* attention: :func:`sdpa_forward` / :func:`sdpa_backward`, the flash kernels: causal (top-left aligned,
  as PyTorch's ``is_causal``), boolean or additive masks (a bias, with its gradient), scale, dropout
  from a Philox ``(seed, offset)`` pair (the backward regenerates the forward's mask from the same
  pair), grouped-query attention (fewer key/value heads). The forward keeps only the output and the
  per-row log-sum-exp of the scaled scores (``stats``); the T x T matrix never exists.

How it runs: a graph per configuration, built once and cached by (operation, device, shapes, strides,
dtypes, parameters, flags) together with the engine it chose; the variant pack holds CuPy device
pointers; the workspace comes from CuPy's memory pool; one cuDNN handle per device, bound to the
current CuPy stream before each launch. An execution whose pointers (operands, output, workspace) repeat
those of an earlier call of the same plan, as every layer's do from one training step to the next once
CuPy's pool hands out the same blocks, is recorded once as a CUDA graph and then replayed with one graph
launch (see :func:`_execute`: the same kernels on the same addresses, so the same bits, for a fraction of
cuDNN's host time per execution). That replay is off until ``GRAPH_REPLAY = True``: it has not yet been run
on a GPU. Engine choice: the first engine of cuDNN's heuristics that
builds (``benchmark=True``: the fastest of the first few, timed on the call's own arrays).
``deterministic=True`` keeps only engines without cuDNN's NONDETERMINISTIC note (and, for the attention
backward, asks for the deterministic kernel); :func:`last_plan` says which engine ran last on this thread
and whether it is deterministic, so a caller under ``use_deterministic_algorithms(True)`` can refuse
the others. ``allow_tf32=False`` keeps float32 convolutions off tensor-core (TF32) engines.

Nothing here runs at import: :func:`is_available` loads CuPy, the cuDNN library and the frontend on
first use, and never raises (:func:`unavailable_reason` says what is missing).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from typing import NamedTuple

import ml_dtypes
import numpy as np

from .base import dense_span

__all__ = [
    "is_available", "unavailable_reason", "version", "last_plan", "PlanInfo", "clear_cache", "channels_last_layout",
    "conv_forward", "conv_data_grad", "conv_weight_grad", "sdpa_forward", "sdpa_backward",
]

_F16 = np.dtype(np.float16)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
_HALF = (_F16, _BF16)

#: how many candidate engines ``benchmark=True`` builds and times (cuDNN's heuristics order them)
BENCHMARK_CANDIDATES = 8
#: engines asking for more workspace than this many bytes are skipped (None: no limit)
MAX_WORKSPACE = None
#: replay an execution as a CUDA graph when its pointers repeat an earlier call's (see :func:`_execute`). Off by
#: default: this path has not yet run on a GPU (its tests in tests/test_cudnn.py turn it on); set it True to use it
GRAPH_REPLAY = False
#: recorded graphs kept per plan (one per distinct set of pointers: a plan serves every layer of its shapes); past
#: it the oldest goes, and a plan that has dropped this many (pointers that keep changing) stops recording
GRAPHS_PER_PLAN = 64

_lock = threading.RLock()
_mod = None  # the ``cudnn`` module once loaded
_cp = None
_reason = None
_tried = False
_plans: dict = {}  # key -> _Plan or None (None: cuDNN does not support the configuration)
_devices: dict = {}  # device id -> _Handle
_tls = threading.local()
_failures: dict = {}  # key -> the message of the exception that made it unsupported (for diagnosis)
_capture_streams: dict = {}  # device id -> the side stream executions are recorded on
_capturing = [0]  # pylucid's CUDA graph captures in progress (the CUDA backend's counter, once loaded)
#: repeat convolution calls: (kind, operand shapes/strides, dtype, geometry, flags) -> (plan, layout, out shape,
#: device id), for calls whose operands went to cuDNN as they were (packed, no copy). A training loop calls each
#: layer with the same signature every step: such a call skips the geometry, layout and key work and goes from
#: here to the plan's execute.
_repeat: dict = {}


class PlanInfo(NamedTuple):
    """The engine behind a call: ``op`` (``"conv_fprop"``, ...), the engine's ``name``, whether it is
    ``deterministic``, its ``workspace`` in bytes and its ``index`` in cuDNN's heuristics list."""

    op: str
    name: str
    deterministic: bool
    workspace: int
    index: int


class _Plan:
    __slots__ = ("graph", "index", "uids", "workspace", "info", "run", "replays", "seen", "replayable", "dropped")

    def __init__(self, graph, index, uids, workspace, info):
        self.graph, self.index, self.uids, self.workspace, self.info = graph, index, uids, workspace, info
        self.replays: dict = {}  # (workspace pointer, *variant-pack pointers) -> the recorded CUDA graph
        self.seen: set = set()  # pointer sets executed once (recorded when they come again)
        self.replayable = True  # False once a recording failed or churned: this plan stays on plain executes
        self.dropped = 0  # recorded graphs dropped for newer ones
        # run(pack, workspace, index, handle): the binding's own execute where it has one. The frontend's
        # Python wrapper ``execute_plan_at_index`` rebuilds the {uid: pointer} pack entry by entry on every
        # call (a few us of host time); the pack here is built with integer uids and pointers already.
        raw = getattr(graph, "_execute_plan_at_index", None)
        self.run = ((lambda pack, ws, index, handle: raw(pack, ws, index, handle, None, None, None))
                    if raw is not None else
                    (lambda pack, ws, index, handle: graph.execute_plan_at_index(pack, ws, index, handle=handle)))


class _Handle:
    __slots__ = ("handle", "stream")

    def __init__(self, handle):
        self.handle, self.stream = handle, None


# ----------------------------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------------------------
def _dlopen_loaded(name: str) -> bool:
    """Whether a library of this soname is already in the process (then the frontend finds it by name)."""
    try:
        ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        return True
    except OSError:
        return False


def _site_dirs():
    seen = []
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")) and p not in seen:
            seen.append(p)
    return seen


def _preload(names_and_globs, extra=()) -> None:
    """Load the first library found for each (soname, globs under site-packages' ``nvidia/``; then the
    soname in the ``extra`` folders), globally, unless one of that soname is loaded already (PyTorch's,
    say): the frontend's compiled module opens ``libcudart``/``libcudnn`` by soname and finds that copy."""
    for soname, patterns in names_and_globs:
        if _dlopen_loaded(soname):
            continue
        hits = [found for root in _site_dirs() for pat in patterns
                for found in sorted(glob.glob(os.path.join(root, "nvidia", pat)))]
        hits += [os.path.join(d, soname) for d in extra if os.path.exists(os.path.join(d, soname))]
        for hit in hits:
            try:
                ctypes.CDLL(hit, mode=os.RTLD_GLOBAL)
                break
            except OSError:
                continue


def _load():
    """The ``cudnn`` module, or None (with ``_reason`` set). Never raises."""
    global _mod, _cp, _reason, _tried, _capturing
    if _tried:
        return _mod
    with _lock:
        if _tried:
            return _mod
        try:
            from . import cuda as _cuda

            if not _cuda.is_available():
                _reason = f"CUDA is unavailable ({_cuda.unavailable_reason()})"
                return None
            cp = _cuda._load()
            major = cp.cuda.runtime.runtimeGetVersion() // 1000
            cuda_path = getattr(cp.cuda, "get_cuda_path", lambda: None)()
            _preload([
                (f"libcudart.so.{major}", (f"cu{major}/lib/libcudart.so.{major}*",
                                           f"cuda_runtime/lib/libcudart.so.{major}*")),
                ("libcudnn.so.9", ("cudnn/lib/libcudnn.so.9*", f"cu{major}/lib/libcudnn.so.9*")),
            ], extra=[os.path.join(cuda_path, "lib64")] if cuda_path else [])
            try:
                import cudnn
            except ImportError as exc:
                _reason = f"the cuDNN frontend is not installed (pip install 'nvidia-cudnn-frontend'): {exc}"
                return None
            version = int(cudnn.backend_version())
            if version < 90000:
                _reason = f"cuDNN {version} is too old: the graph paths here need cuDNN 9"
                return None
            _cp, _mod, _capturing = cp, cudnn, _cuda.CAPTURING
        except Exception as exc:  # a broken library, no driver, ...
            _reason = f"cuDNN could not be loaded: {type(exc).__name__}: {exc}"
            _mod = None
        finally:
            _tried = True
    return _mod


def is_available() -> bool:
    """True when CuPy sees a GPU and the cuDNN library and its Python frontend load."""
    return _load() is not None


def unavailable_reason() -> str:
    """Why :func:`is_available` is False ("" when it is True)."""
    _load()
    return _reason or ""


def version() -> int | None:
    """cuDNN's version as an int (``91300`` for 9.13.0), or None without cuDNN."""
    mod = _load()
    return int(mod.backend_version()) if mod is not None else None


def last_plan() -> PlanInfo | None:
    """The engine of the last cuDNN call on this thread (None before any)."""
    return getattr(_tls, "info", None)


def clear_cache() -> None:
    """Forget every built graph (the next call of each configuration builds again)."""
    with _lock:
        _plans.clear()
        _failures.clear()
        _repeat.clear()


def failure(key_prefix: str = "") -> dict:
    """The messages of configurations cuDNN refused, by cache key (for diagnosis)."""
    return {k: v for k, v in _failures.items() if str(k[0]).startswith(key_prefix)}


def _handle(dev_id: int) -> _Handle:
    h = _devices.get(dev_id)
    if h is None:
        with _lock:
            h = _devices.get(dev_id)
            if h is None:
                with _cp.cuda.Device(dev_id):
                    h = _Handle(_mod.create_handle())
                _devices[dev_id] = h
    return h


# ----------------------------------------------------------------------------------------------------------
# layouts and descriptors (pure functions of shapes and strides: testable without a GPU)
# ----------------------------------------------------------------------------------------------------------
def _packed(shape, strides, itemsize, order) -> bool:
    expect = itemsize
    for ax in reversed(order):
        if shape[ax] != 1 and strides[ax] != expect:
            return False
        expect *= shape[ax]
    return True


def channels_last_layout(shape, strides, itemsize) -> str | None:
    """``"nchw"`` for a C-contiguous ``(N, C, *S)`` array, ``"nhwc"`` for a packed channels-last one
    (strides descending as N, *S, C), None for anything else. Axes of length 1 never decide."""
    nd = len(shape)
    if _packed(shape, strides, itemsize, tuple(range(nd))):
        return "nchw"
    if nd >= 3 and _packed(shape, strides, itemsize, (0,) + tuple(range(2, nd)) + (1,)):
        return "nhwc"
    return None


def _strides_for(shape, layout) -> tuple:
    """Element strides of a packed ``(N, C, *S)`` tensor in ``layout``."""
    nd = len(shape)
    order = tuple(range(nd)) if layout == "nchw" else (0,) + tuple(range(2, nd)) + (1,)
    st = [0] * nd
    acc = 1
    for ax in reversed(order):
        st[ax] = acc
        acc *= shape[ax]
    return tuple(st)


def _empty(shape, dtype, layout):
    """A new packed array of logical shape ``(N, C, *S)`` in ``layout``."""
    nd_ = _cp.ndarray  # the constructor cupy.empty calls, without its Python wrapper
    if layout == "nchw":
        return nd_(shape, dtype)
    nd = len(shape)
    phys = nd_((shape[0],) + tuple(shape[2:]) + (shape[1],), dtype)
    return phys.transpose((0, nd - 1) + tuple(range(1, nd - 1)))


def _aligned(a) -> bool:
    return a.data.ptr % 16 == 0


def _as_layout(a, layout):
    """``a`` if already packed in ``layout`` and 16-byte aligned, else a packed copy."""
    if channels_last_layout(a.shape, a.strides, a.itemsize) == layout and _aligned(a):
        return a
    out = _empty(a.shape, a.dtype, layout)
    out[...] = a
    return out


def _activation(a):
    """(array, layout): ``a`` itself when packed NCHW/NHWC and aligned, else a C-contiguous copy."""
    lay = channels_last_layout(a.shape, a.strides, a.itemsize)
    if lay is not None and _aligned(a):
        return a, lay
    return _cp.ascontiguousarray(a) if lay is None else _as_layout(a, lay), lay or "nchw"


def _types(dtype):
    """(io type, compute type) of the frontend for a NumPy dtype, or None."""
    dt = _mod.data_type
    if dtype == _F32:
        return dt.FLOAT, dt.FLOAT
    if dtype == _F16:
        return dt.HALF, dt.FLOAT
    if dtype == _BF16:
        return dt.BFLOAT16, dt.FLOAT
    # float64: with cuDNN 9.19 on an H200 a float64 convolution graph builds and runs but writes wrong
    # values (every element off), so float64 stays on the existing kernels
    return None


# ----------------------------------------------------------------------------------------------------------
# building, choosing and running plans
# ----------------------------------------------------------------------------------------------------------
def _finish(op, g, tensors, deterministic, benchmark, allow_tf32, fp32, timer_ptrs=None,
            deterministic_by_flag=None):
    """Build ``g`` and pick its engine; cache and return the _Plan (None when nothing supports it)."""
    mod = _mod
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([mod.heur_mode.A, mod.heur_mode.FALLBACK])
    note = mod.numerical_note
    # engines that convert the inputs to a narrower type are never taken (as PyTorch filters them)
    g.deselect_numeric_notes([note.DOWN_CONVERT_INPUTS])
    if deterministic:
        g.deselect_numeric_notes([note.NONDETERMINISTIC])
    if fp32 and not allow_tf32:
        g.deselect_numeric_notes([note.TENSOR_CORE])
    if MAX_WORKSPACE is not None:
        g.deselect_workspace_greater_than(int(MAX_WORKSPACE))
    built = []
    last_err = None
    for i in range(g.get_execution_plan_count()):
        try:
            g.build_plan_at_index(i)
        except Exception as exc:  # this engine does not take the graph: try the next
            last_err = exc
            continue
        built.append(i)
        if not benchmark or len(built) >= BENCHMARK_CANDIDATES:
            break
    if not built:
        raise RuntimeError(f"no engine builds: {last_err}")
    uids = tuple(t.get_uid() for t in tensors)
    index = built[0]
    if len(built) > 1 and timer_ptrs is not None:
        index = _fastest(g, built, uids, timer_ptrs)
    if deterministic_by_flag is not None:
        det = deterministic_by_flag
    elif deterministic:
        det = True
    else:
        # the engine's notes: once NONDETERMINISTIC engines are barred, building the chosen index again
        # fails exactly when it carries that note (the built plan itself stays usable)
        g.deselect_numeric_notes([note.NONDETERMINISTIC])
        try:
            g.build_plan_at_index(index)
            det = True
        except Exception:
            det = False
    ws = int(g.get_workspace_size_plan_at_index(index))
    try:
        name = g.get_plan_name_at_index(index)
    except Exception:
        name = f"engine {index}"
    return _Plan(g, index, uids, ws, PlanInfo(op, name, det, ws, index))


def _fastest(g, candidates, uids, ptrs):
    """The candidate plan index with the shortest median time of three runs on the call's own arrays."""
    cp = _cp
    h = _handle(cp.cuda.Device().id)
    _bind_stream(h)
    pack = dict(zip(uids, ptrs))
    best, best_t = candidates[0], None
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for i in candidates:
        ws = cp.empty(int(g.get_workspace_size_plan_at_index(i)), dtype=cp.uint8)
        wptr = ws.data.ptr if ws.size else 0
        try:
            g.execute_plan_at_index(pack, wptr, i, handle=h.handle)  # warm-up
            times = []
            for _ in range(3):
                start.record()
                g.execute_plan_at_index(pack, wptr, i, handle=h.handle)
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop))
        except Exception:
            continue
        t = sorted(times)[1]
        if best_t is None or t < best_t:
            best, best_t = i, t
    return best


def _bind_stream(h: _Handle) -> None:
    s = _cp.cuda.get_current_stream().ptr
    if h.stream != s:
        _mod.set_stream(h.handle, s)
        h.stream = s


def _plan_for(key, build):
    """The cached plan of ``key``; ``build()`` makes it on first use. None: unsupported (remembered)."""
    plan = _plans.get(key, _plans)
    if plan is not _plans:
        return plan
    with _lock:
        plan = _plans.get(key, _plans)
        if plan is not _plans:
            return plan
        try:
            plan = build()
        except Exception as exc:  # cuDNN refused the graph (not supported, no engine, ...)
            _failures[key] = f"{type(exc).__name__}: {exc}"
            plan = None
        _plans[key] = plan
    return plan


def _execute(plan, ptrs, dev_id) -> bool:
    """Run ``plan`` on the current stream with the device pointers ``ptrs`` (in plan.uids order).

    cuDNN's execute costs tens of microseconds of host time (it builds the variant pack, and its NCHW engines
    launch layout conversions around the convolution), which is most of a small layer's step when the GPU is
    fast. So the first call with a set of pointers executes; the second with the same set (the layer again, one
    training step later, its arrays in the same pool blocks) records the execution on a side stream as a CUDA
    graph and launches it; later ones launch that graph: one driver call, the same kernels on the same
    addresses, so results are bitwise those of an execute (the values at those addresses are read when the graph
    runs). Not while pylucid itself captures a CUDA graph (the execute is captured into the user's graph then),
    nor for an engine whose execution could not be recorded.
    """
    cp = _cp
    h = _handle(dev_id)
    # the workspace goes back to CuPy's pool when this returns; the pool hands it out again only to
    # work queued after this launch on the same stream, so the launch is done with it by then
    # (a bare pool allocation: an ndarray around it costs a few us more per call)
    ws = cp.cuda.alloc(plan.workspace) if plan.workspace else None
    wsp = ws.ptr if ws is not None else 0
    if GRAPH_REPLAY and plan.replayable and not _capturing[0]:
        key = (wsp, *ptrs)
        g = plan.replays.get(key)
        if g is not None:
            g.launch(cp.cuda.get_current_stream())
            _tls.info = plan.info
            return True
        if key in plan.seen:
            if _record_replay(plan, key, h, dev_id):
                _tls.info = plan.info
                return True
        else:
            if len(plan.seen) >= 4 * GRAPHS_PER_PLAN:  # pointers that never repeat: forget them
                plan.seen.clear()
            plan.seen.add(key)
    pack = dict(zip(plan.uids, ptrs))
    with _lock:  # the handle's stream binding and the launch, together
        _bind_stream(h)
        plan.run(pack, wsp, plan.index, h.handle)
    _tls.info = plan.info
    return True


def _record_replay(plan, key, h, dev_id) -> bool:
    """Record ``plan``'s execution on the pointers of ``key`` as a CUDA graph (kept in ``plan.replays``) and
    launch it on the current stream; False (nothing launched) when the stream is being captured by someone else
    or the engine's execution cannot be recorded (the plan then stays on plain executes)."""
    cp = _cp
    cur = cp.cuda.get_current_stream()
    if cur.is_capturing():
        return False
    s = _capture_streams.get(dev_id)
    if s is None:
        s = _capture_streams[dev_id] = cp.cuda.Stream(non_blocking=True)
    pack = dict(zip(plan.uids, key[1:]))
    with _lock:
        try:
            # relaxed: other threads may allocate while this records (nothing here does)
            s.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
            try:
                _mod.set_stream(h.handle, s.ptr)
                h.stream = s.ptr
                plan.run(pack, key[0], plan.index, h.handle)
            finally:
                g = s.end_capture()
        except Exception as exc:
            plan.replayable = False
            _failures[("replay",) + plan.info[:1] + (plan.index,)] = f"{type(exc).__name__}: {exc}"
            return False
        if len(plan.replays) >= GRAPHS_PER_PLAN:
            plan.dropped += 1
            if plan.dropped >= GRAPHS_PER_PLAN:  # more pointer sets in turn than it keeps: recording would thrash
                plan.replayable = False
                plan.replays.clear()
            else:
                del plan.replays[next(iter(plan.replays))]  # the oldest
        if plan.replayable:
            plan.replays[key] = g
        plan.seen.discard(key)
    g.launch(cur)
    return True


def _ints(v, n, what):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(i) for i in v)
    if len(v) != n:
        raise ValueError(f"cudnn: {what} needs {n} values, got {v}")
    return v


def _pads(padding, n):
    """Per-dim (lo, hi) pairs from an int, n ints, or n (lo, hi) pairs."""
    if isinstance(padding, int):
        return ((padding, padding),) * n
    padding = tuple(padding)
    if len(padding) != n:
        raise ValueError(f"cudnn: padding needs {n} entries, got {padding}")
    return tuple((int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])) for p in padding)


def _geometry(nd, stride, padding, dilation):
    return _ints(stride, nd, "stride"), _pads(padding, nd), _ints(dilation, nd, "dilation")


def _conv_out(size, k, s, lo, hi, d):
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _as2d(shape, nd):
    """1-d convolutions run as 2-d ones with a height of 1: (N, C, L) -> (N, C, 1, L)."""
    return tuple(shape[:2]) + (1,) + tuple(shape[2:]) if nd == 1 else tuple(shape)


def _geom2d(nd, stride, pads, dilation):
    if nd == 1:
        return (1,) + stride, ((0, 0),) + pads, (1,) + dilation
    return stride, pads, dilation


def _conv_graph(op, io, compute, a, b, out, stride, pads, dilation, bias_shape=None):
    """The one-node graph of ``op`` (fprop: image a, weight b; dgrad: loss a, filter b; wgrad: image a,
    loss b); ``a``/``b``/``out`` are (dims, strides). Returns (graph, [tensors in variant-pack order])."""
    mod = _mod
    h = _handle(_cp.cuda.Device().id)
    g = mod.pygraph(io_data_type=io, intermediate_data_type=compute, compute_data_type=compute, handle=h.handle)
    ta = g.tensor(name="A", dim=list(a[0]), stride=list(a[1]), data_type=io)
    tb = g.tensor(name="B", dim=list(b[0]), stride=list(b[1]), data_type=io)
    pre = [p[0] for p in pads]
    post = [p[1] for p in pads]
    kw = dict(pre_padding=pre, post_padding=post, stride=list(stride), dilation=list(dilation),
              compute_data_type=compute)
    if op == "conv_fprop":
        y = g.conv_fprop(image=ta, weight=tb, **kw)
    elif op == "conv_dgrad":
        y = g.conv_dgrad(loss=ta, filter=tb, **kw)
    else:
        y = g.conv_wgrad(image=ta, loss=tb, **kw)
    tensors = [ta, tb]
    if bias_shape is not None:
        y.set_dim(list(out[0])).set_stride(list(out[1]))
        tbias = g.tensor(name="bias", dim=list(bias_shape), stride=list(_strides_for(bias_shape, "nchw")),
                         data_type=io)
        y = g.bias(input=y, bias=tbias)
        tensors.append(tbias)
    y.set_output(True).set_dim(list(out[0])).set_stride(list(out[1])).set_data_type(io)
    tensors.append(y)
    return g, tensors


def _conv_run(op, key_tail, a, b, out, dims, stride, pads, dilation, deterministic, benchmark, allow_tf32,
              bias=None):
    """Build (once) and run one convolution graph; a, b: input arrays; out: the output array;
    dims: the cuDNN (dims, strides) triple of a, b and out. Returns False when unsupported."""
    types = _types(out.dtype)
    if types is None:
        return False
    io, compute = types
    dev = out.device.id
    key = (op, dev, dims, out.dtype.str, stride, pads, dilation, bias is not None, bool(deterministic),
           bool(benchmark), bool(allow_tf32)) + key_tail
    ptrs = [a.data.ptr, b.data.ptr] + ([bias.data.ptr] if bias is not None else []) + [out.data.ptr]
    bias_shape = (1, dims[2][0][1]) + (1,) * (len(dims[2][0]) - 2) if bias is not None else None

    def build():
        g, tensors = _conv_graph(op, io, compute, dims[0], dims[1], dims[2], stride, pads, dilation, bias_shape)
        return _finish(op, g, tensors, deterministic, benchmark, allow_tf32, out.dtype == _F32,
                       timer_ptrs=ptrs if benchmark else None)

    with _cp.cuda.Device(dev):
        plan = _plan_for(key, build)
        if plan is None:
            return False
        return _execute(plan, ptrs, dev)


def _check_conv(x_shape, w_shape, groups):
    nd = len(x_shape) - 2
    if nd not in (1, 2, 3) or len(w_shape) != nd + 2:
        return None
    c, k, cg = x_shape[1], w_shape[0], w_shape[1]
    if groups < 1 or cg * groups != c or k % groups:
        return None
    return nd


# ----------------------------------------------------------------------------------------------------------
# convolution
# ----------------------------------------------------------------------------------------------------------
def _repeat_lookup(kind, a, b, shape_arg, stride, padding, dilation, groups, flags, extra):
    """``(key, hit)``: the ``_repeat`` key of a call and its remembered entry (None: not seen yet); the key is None
    when an argument is not hashable (a list: no fast path). The lookup hashes the key once."""
    key = (kind, a.shape, a.strides, b.shape, b.strides, a.dtype.char, b.dtype.char, shape_arg, stride, padding,
           dilation, groups, flags, extra)
    try:
        return key, _repeat.get(key)
    except TypeError:
        return None, None


def _run_repeat(hit, a, b, bias=None):
    """Run a remembered call (see ``_repeat``) on operands ``a``, ``b``; None if they are not 16-byte aligned."""
    if (a.data.ptr | b.data.ptr) & 15:
        return None
    plan, lay, out_shape, dev = hit
    cp = _cp
    if cp.cuda.runtime.getDevice() != dev:
        with cp.cuda.Device(dev):
            return _run_repeat(hit, a, b, bias)
    out = _empty(out_shape, a.dtype, lay)
    ptrs = [a.data.ptr, b.data.ptr] + ([bias.data.ptr] if bias is not None else []) + [out.data.ptr]
    _execute(plan, ptrs, dev)
    return out


def _remember_call(rkey, value) -> None:
    """Remember a call for the repeat paths (``_repeat``); an unhashable argument (a list) is not remembered."""
    try:
        hash(rkey)
    except TypeError:
        return
    if len(_repeat) > 4096:  # shapes that change every call (a sweep): start again
        _repeat.clear()
    _repeat[rkey] = value


def _remember(rkey, kind, a, b, out, dims, st, pd, dl, flags, bias, key_tail=()):
    """After a call that ran on ``a`` and ``b`` unchanged: remember its plan for :func:`_run_repeat`."""
    io = _types(out.dtype)
    key = (kind, out.device.id, dims, out.dtype.str, st, pd, dl, bias is not None, bool(flags[0]), bool(flags[1]),
           bool(flags[2])) + key_tail
    plan = _plans.get(key)
    if plan is not None and io is not None and rkey is not None:
        lay = channels_last_layout(out.shape, out.strides, out.itemsize)
        if lay is not None:
            if len(_repeat) > 4096:  # shapes that change every call (a sweep): start again
                _repeat.clear()
            _repeat[rkey] = (plan, lay, out.shape, out.device.id)


def conv_forward(x, w, stride=1, padding=0, dilation=1, groups: int = 1, bias=None, *, deterministic: bool = False,
                 benchmark: bool = False, allow_tf32: bool = True):
    """``y = w * x (+ bias)``, cross-correlation, or None when cuDNN does not take the configuration.

    ``x`` (N, C, *S) with 1-3 spatial dims, ``w`` (K, C/groups, *k), same dtype; ``padding`` an int,
    one int per dim, or one ``(lo, hi)`` pair per dim. The output is (N, K, *out) in the memory layout
    of ``x`` (NCHW or channels-last; any other strides are copied to NCHW first). ``bias`` (K,) is
    fused into the graph where an engine takes it, else added afterwards.
    """
    flags = (deterministic, benchmark, allow_tf32)
    rkey, hit = _repeat_lookup("conv_fprop", x, w, None, stride, padding, dilation, groups, flags,
                               None if bias is None else (bias.strides, bias.dtype.char))
    if hit is not None and (bias is None or bias._c_contiguous):
        y = _run_repeat(hit, x, w, bias)
        if y is not None:
            return y
    if _load() is None or x.dtype != w.dtype or (bias is not None and bias.dtype != x.dtype):
        return None
    nd = _check_conv(x.shape, w.shape, groups)
    if nd is None:
        return None
    stride, pads, dilation = _geometry(nd, stride, padding, dilation)
    out_sp = _out_spatial(x.shape, w.shape, nd, stride, pads, dilation)
    if any(o < 1 for o in out_sp) or 0 in x.shape:
        return None
    with _cp.cuda.Device(x.device.id):
        x0, w0 = x, w
        x, lay = _activation(x)
        w = _as_layout(w, lay)
        y = _empty((x.shape[0], w.shape[0]) + out_sp, x.dtype, lay)
        if bias is not None:
            bias = _cp.ascontiguousarray(bias)
        dims = tuple((s2, _strides_for(s2, lay)) for s2 in (_as2d(x.shape, nd), _as2d(w.shape, nd),
                                                             _as2d(y.shape, nd)))
        st, pd, dl = _geom2d(nd, stride, pads, dilation)
        unchanged = x is x0 and w is w0
        if bias is not None and _conv_run("conv_fprop", (), x, w, y, dims, st, pd, dl, deterministic, benchmark,
                                          allow_tf32, bias=bias):
            if unchanged:
                _remember(rkey, "conv_fprop", x, w, y, dims, st, pd, dl, flags, bias)
            return y
        if not _conv_run("conv_fprop", (), x, w, y, dims, st, pd, dl, deterministic, benchmark, allow_tf32):
            return None
        if bias is not None:
            y += bias.reshape((1, -1) + (1,) * nd)
        elif unchanged:
            _remember(rkey, "conv_fprop", x, w, y, dims, st, pd, dl, flags, None)
    return y


def _attention_graph(io, device_id):
    """``(cudnn module, handle, FLOAT, a new graph)`` for an attention graph with ``io`` tensors
    (float32 intermediates and compute, as the flash kernels require)."""
    mod = _mod
    hd = _handle(device_id)
    F = mod.data_type.FLOAT
    return mod, hd, F, mod.pygraph(io_data_type=io, intermediate_data_type=F, compute_data_type=F, handle=hd.handle)


def _graph_tensor(g, name, a, data_type):
    """The cuDNN graph tensor describing the CuPy array ``a`` (its shape and element strides)."""
    return g.tensor(name=name, dim=list(a.shape), stride=list(_elem_strides(a)), data_type=data_type)


def _dropout_tensors(g, mod, dropout_p, kw, tensors):
    """Declare the dropout seed/offset scalars of an attention graph, in ``kw`` and ``tensors``."""
    ts, to = (g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=mod.data_type.INT64)
              for n in ("seed", "offset"))
    kw["dropout"] = (dropout_p, ts, to)
    tensors += [ts, to]


def _out_spatial(x_shape, w_shape, nd, stride, pads, dilation) -> tuple:
    return tuple(_conv_out(x_shape[2 + i], w_shape[2 + i], stride[i], pads[i][0], pads[i][1], dilation[i])
                 for i in range(nd))


def _grad_run(kind, lead, other, out_shape, x_shape, w_shape, dy_shape, nd, stride, padding, dilation, flags,
              contiguous_out=False):
    """The two gradients' common part: check that ``dy_shape`` is the forward's output for ``x_shape`` and
    ``w_shape``, then run ``kind`` into a new ``out_shape`` array, ``lead`` setting the memory layout
    (``other`` is brought to it). The result (C-contiguous with ``contiguous_out``), or None."""
    rkey, hit = _repeat_lookup(kind, lead, other, out_shape, stride, padding, dilation, None, flags, contiguous_out)
    if hit is not None:
        out = _run_repeat(hit, lead, other)
        if out is not None:
            return _cp.ascontiguousarray(out) if contiguous_out and hit[1] != "nchw" else out
    stride, pads, dilation = _geometry(nd, stride, padding, dilation)
    if _out_spatial(x_shape, w_shape, nd, stride, pads, dilation) != tuple(dy_shape[2:]) or 0 in lead.shape:
        return None
    with _cp.cuda.Device(lead.device.id):
        lead0, other0 = lead, other
        lead, lay = _activation(lead)
        other = _as_layout(other, lay)
        out = _empty(out_shape, lead.dtype, lay)
        dims = tuple((s2, _strides_for(s2, lay)) for s2 in (_as2d(lead.shape, nd), _as2d(other.shape, nd),
                                                             _as2d(out_shape, nd)))
        st, pd, dl = _geom2d(nd, stride, pads, dilation)
        if not _conv_run(kind, (), lead, other, out, dims, st, pd, dl, *flags):
            return None
        if lead is lead0 and other is other0:
            _remember(rkey, kind, lead, other, out, dims, st, pd, dl, flags, None)
        if contiguous_out and lay != "nchw":
            out = _cp.ascontiguousarray(out)
    return out


def conv_data_grad(dy, w, x_shape, stride=1, padding=0, dilation=1, groups: int = 1, *,
                   deterministic: bool = False, benchmark: bool = False, allow_tf32: bool = True):
    """``dx`` of :func:`conv_forward` for the output gradient ``dy`` (N, K, *out), shape ``x_shape``;
    the forward of a transposed convolution. In the layout of ``dy``; None when unsupported."""
    if _load() is None or dy.dtype != w.dtype:
        return None
    x_shape = tuple(int(s) for s in x_shape)
    nd = _check_conv(x_shape, w.shape, groups)
    if nd is None or dy.ndim != nd + 2 or dy.shape[:2] != (x_shape[0], w.shape[0]):
        return None
    return _grad_run("conv_dgrad", dy, w, x_shape, x_shape, w.shape, dy.shape, nd, stride, padding, dilation,
                     (deterministic, benchmark, allow_tf32))


def conv_weight_grad(x, dy, w_shape, stride=1, padding=0, dilation=1, groups: int = 1, *,
                     deterministic: bool = False, benchmark: bool = False, allow_tf32: bool = True,
                     contiguous: bool = True):
    """``dw`` (shape ``w_shape``) of :func:`conv_forward` for input ``x`` and output gradient ``dy``.

    Computed in the layout of ``x`` (``dy`` is brought to it); ``contiguous=True`` returns it
    C-contiguous (a copy for channels-last data), ``False`` keeps cuDNN's layout. None when unsupported.
    """
    if _load() is None or dy.dtype != x.dtype:
        return None
    w_shape = tuple(int(s) for s in w_shape)
    nd = _check_conv(x.shape, w_shape, groups)
    if nd is None or dy.ndim != nd + 2 or dy.shape[:2] != (x.shape[0], w_shape[0]):
        return None
    return _grad_run("conv_wgrad", x, dy, w_shape, x.shape, w_shape, dy.shape, nd, stride, padding, dilation,
                     (deterministic, benchmark, allow_tf32), contiguous_out=contiguous)


# ----------------------------------------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------------------------------------
def _attn_ok(a) -> bool:
    """cuDNN's attention wants unit stride on the head dim, 16-byte aligned rows and a 16-byte aligned base."""
    if a.strides[-1] != a.itemsize and a.shape[-1] != 1:
        return False
    if any(s <= 0 or s % 16 for s, n in zip(a.strides[:-1], a.shape[:-1]) if n != 1):
        return False
    return _aligned(a)


def _attn_in(a):
    return a if _attn_ok(a) else _cp.ascontiguousarray(a)


def _like_order(shape, strides, dtype):
    """A new C-ordered array of ``shape`` whose axes are laid out in the order of ``strides`` (largest first):
    q in (B, T, H, E) memory gives an output in (B, T, H, E) memory too (a later transpose(1, 2) is free)."""
    cp = _cp
    order = sorted(range(len(shape)), key=lambda i: (-strides[i], i))
    if order[-1] != len(shape) - 1:
        order = [i for i in order if i != len(shape) - 1] + [len(shape) - 1]
    phys = cp.empty(tuple(shape[i] for i in order), dtype=dtype)
    inv = [order.index(i) for i in range(len(shape))]
    # the identity order stays a base array, not a view: a gradient the engine can then keep as a leaf's .grad
    return phys if inv == sorted(inv) else phys.transpose(inv)


def _new_ordered(phys, dtype, inv):
    """:func:`_like_order`'s array from a remembered ``(physical shape, inverse permutation)``."""
    a = _cp.empty(phys, dtype=dtype)
    return a if inv == tuple(range(len(inv))) else a.transpose(inv)


def _order_of(shape, strides):
    """``(physical shape, inverse permutation)`` of the array :func:`_like_order` makes for these strides."""
    order = sorted(range(len(shape)), key=lambda i: (-strides[i], i))
    if order[-1] != len(shape) - 1:
        order = [i for i in order if i != len(shape) - 1] + [len(shape) - 1]
    return tuple(shape[i] for i in order), tuple(order.index(i) for i in range(len(shape)))


def _packed_order(q, k, v):
    """For q, k and v that are three equally strided slices of one buffer at equal steps (the (B, H, L,
    E) views of a fused qkv projection's (B, L, 3, H, E) output): :func:`_order_of` of the 5-d (3, B,
    H, L, E) array they form, so that dq, dk and dv can be written as the slices of one new buffer
    laid out the same way (an unbind backward then joins them with no copy). None otherwise, or
    where that array does not cover its memory densely."""
    if not (q.shape == k.shape == v.shape and q.strides == k.strides == v.strides):
        return None
    step = k.data.ptr - q.data.ptr
    if step <= 0 or v.data.ptr - k.data.ptr != step:
        return None
    shape, strides = (3,) + tuple(q.shape), (step,) + tuple(q.strides)
    if dense_span(shape, strides, q.itemsize) is None:
        return None
    return _order_of(shape, strides)


def _grad_arrays(lays, dtype):
    """dq, dk and dv in the layouts :func:`sdpa_backward` chose: ``("packed", physical shape,
    inverse permutation)`` (three slices of one buffer) or one ``(physical shape, inverse
    permutation)`` each."""
    if lays[0] == "packed":
        both = _new_ordered(lays[1], dtype, lays[2])
        return both[0], both[1], both[2]
    return tuple(_new_ordered(phys, dtype, inv) for phys, inv in lays)


def _aligned_all(*arrays) -> bool:
    ptr = 0
    for a in arrays:
        ptr |= a.data.ptr
    return not ptr & 15


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def _desc(a):
    return (tuple(a.shape), _elem_strides(a))


def _bias_in(bias, q, k):
    """The additive mask as a 4-d (B|1, H|1, L, S) array of q's dtype (boolean: True = attend), or None."""
    cp = _cp
    b, h, lq = q.shape[:3]
    s = k.shape[2]
    if bias.ndim > 4:
        return None
    shape = (1,) * (4 - bias.ndim) + tuple(bias.shape)
    if shape[0] not in (1, b) or shape[1] not in (1, h) or shape[2] not in (1, lq) or shape[3] not in (1, s):
        return None
    bias = bias.reshape(shape)
    if bias.dtype == np.bool_:
        bias = cp.where(bias, np.float32(0.0), np.float32(-np.inf)).astype(q.dtype)
    elif bias.dtype != q.dtype:
        bias = bias.astype(q.dtype)
    if shape[2] != lq or shape[3] != s:
        bias = cp.broadcast_to(bias, shape[:2] + (lq, s))
    return _attn_in(bias)


def _seed_arrays(seed, offset):
    cp = _cp
    return cp.full((1, 1, 1, 1), int(seed), dtype=cp.int64), cp.full((1, 1, 1, 1), int(offset), dtype=cp.int64)


def _sdpa_common(q, k, v):
    """(B, H, L, E) checks shared by both directions; True when cuDNN's flash kernels may take them."""
    if _load() is None or q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return False
    if q.dtype not in _HALF or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    b, h, _, e = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[3] != e or v.shape[2] != k.shape[2] or k.shape[1] != v.shape[1]:
        return False
    hk = k.shape[1]
    return hk >= 1 and h % hk == 0 and 0 not in q.shape and 0 not in k.shape and 0 not in v.shape


def _mask_kwargs(causal):
    if not causal:
        return {}
    return dict(diagonal_alignment=_mod.diagonal_alignment.TOP_LEFT, diagonal_band_right_bound=0)


def sdpa_forward(q, k, v, *, scale: float | None = None, causal: bool = False, bias=None, dropout_p: float = 0.0,
                 seed: int = 0, offset: int = 0, return_dropout_mask: bool = False):
    """Flash attention forward: ``(o, stats)``, or None when cuDNN does not take the configuration.

    ``q`` (B, H, L, E), ``k`` (B, Hk, S, E), ``v`` (B, Hk, S, Ev) with ``H % Hk == 0`` (grouped-query
    attention when Hk < H), float16 or bfloat16, any strides with a unit stride on the last dim (others
    are copied). ``o = softmax(q k^T * scale + mask) [dropout] v`` of shape (B, H, L, Ev), laid out like
    ``q``; ``stats`` (B, H, L, 1) float32 is the natural log-sum-exp of each row of the masked, scaled
    scores, all the backward needs besides ``o``. ``scale`` defaults to ``1/sqrt(E)``; ``causal`` masks
    keys after the query position (top-left aligned); ``bias`` is an additive float mask or a boolean
    one (True = attend) broadcastable to (B, H, L, S); ``dropout_p`` drops probabilities with cuDNN's
    Philox generator seeded by ``(seed, offset)`` (:func:`sdpa_backward` must get the same pair).
    ``return_dropout_mask=True`` adds the float32 keep mask (B, H, L, S) as a third output (for tests).
    Rows whose every key is masked give unspecified values.
    """
    plain = bias is None and not dropout_p and not return_dropout_mask
    if plain:  # a call seen before (each layer's attention, every step): the plan and layouts remembered
        rkey = ("sdpa_fwd", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, q.dtype.char, k.dtype.char,
                v.dtype.char, scale, bool(causal))
        hit = _repeat.get(rkey)
        if hit is not None and _aligned_all(q, k, v):
            plan, (phys, inv), dev = hit
            cp = _cp
            if cp.cuda.runtime.getDevice() == dev:
                o = _new_ordered(phys, q.dtype, inv)
                stats = cp.empty(q.shape[:3] + (1,), dtype=cp.float32)
                _execute(plan, [q.data.ptr, k.data.ptr, v.data.ptr, o.data.ptr, stats.data.ptr], dev)
                return o, stats
    if not _sdpa_common(q, k, v):
        return None
    cp = _cp
    b, h, lq, e = q.shape
    s, ev = k.shape[2], v.shape[3]
    scale0 = scale
    scale = float(1.0 / np.sqrt(e) if scale is None else scale)
    dropout_p = float(dropout_p)
    if not 0.0 <= dropout_p < 1.0:
        return None
    with cp.cuda.Device(q.device.id):
        q0, k0, v0 = q, k, v
        q, k, v = _attn_in(q), _attn_in(k), _attn_in(v)
        if bias is not None:
            bias = _bias_in(bias, q, k)
            if bias is None:
                return None
        o = _like_order((b, h, lq, ev), q.strides, q.dtype)
        stats = cp.empty((b, h, lq, 1), dtype=cp.float32)
        dump = cp.zeros((b, h, lq, s), dtype=cp.float32) if return_dropout_mask and dropout_p > 0 else None
        seeds = _seed_arrays(seed, offset) if dropout_p > 0 else None
        key = ("sdpa_fwd", q.device.id, q.dtype.str, _desc(q), _desc(k), _desc(v), _desc(o),
               _desc(bias) if bias is not None else None, scale, bool(causal), dropout_p, dump is not None)
        io = _types(q.dtype)[0]

        def build():
            mod, hd, F, g = _attention_graph(io, q.device.id)
            tq, tk, tv = (_graph_tensor(g, n, a, io) for n, a in (("Q", q), ("K", k), ("V", v)))
            tensors = [tq, tk, tv]
            kw = _mask_kwargs(causal)
            if bias is not None:
                kw["bias"] = _graph_tensor(g, "bias", bias, io)
                tensors.append(kw["bias"])
            if seeds is not None:
                _dropout_tensors(g, mod, dropout_p, kw, tensors)
            if dump is not None:
                kw["rng_dump"] = _graph_tensor(g, "rng_dump", dump, F)
                tensors.append(kw["rng_dump"])
            to_, tstats = g.sdpa(name="sdpa", q=tq, k=tk, v=tv, generate_stats=True, attn_scale=scale, **kw)
            to_.set_output(True).set_dim(list(o.shape)).set_stride(list(_elem_strides(o))).set_data_type(io)
            tstats.set_output(True).set_data_type(F)
            tensors += [to_, tstats]
            return _finish("sdpa_fwd", g, tensors, False, False, True, False, deterministic_by_flag=True)

        plan = _plan_for(key, build)
        if plan is None:
            return None
        ptrs = [q.data.ptr, k.data.ptr, v.data.ptr]
        if bias is not None:
            ptrs.append(bias.data.ptr)
        if seeds is not None:
            ptrs += [seeds[0].data.ptr, seeds[1].data.ptr]
        if dump is not None:
            ptrs.append(dump.data.ptr)
        ptrs += [o.data.ptr, stats.data.ptr]
        _execute(plan, ptrs, q.device.id)
        if plain and q is q0 and k is k0 and v is v0:
            _remember_call(("sdpa_fwd", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, q.dtype.char,
                            k.dtype.char, v.dtype.char, scale0, bool(causal)),
                           (plan, _order_of((b, h, lq, ev), q.strides), q.device.id))
    return (o, stats, dump) if return_dropout_mask else (o, stats)


def sdpa_backward(q, k, v, o, do, stats, *, scale: float | None = None, causal: bool = False, bias=None,
                  bias_grad: bool = False, dropout_p: float = 0.0, seed: int = 0, offset: int = 0,
                  deterministic: bool = False):
    """Flash attention backward: ``(dq, dk, dv, dbias)`` (``dbias`` None unless ``bias_grad``), or None.

    Takes the forward's inputs, its ``o`` and ``stats`` (see :func:`sdpa_forward`), the output gradient
    ``do``, and the same ``scale``/``causal``/``bias``/``dropout_p``/``seed``/``offset``. ``dk``/``dv`` have
    the key/value head count (the query heads of a group are summed). ``dbias`` has the bias's
    (broadcast) shape, summed over what it was broadcast along, where cuDNN supports that shape (None
    overall when it does not). ``deterministic=True`` asks for cuDNN's deterministic kernel (no atomic
    accumulation); otherwise the last bits of ``dq`` can change from run to run.
    """
    plain = bias is None and not dropout_p
    if plain:
        rkey = ("sdpa_bwd", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, o.shape, o.strides, do.shape,
                do.strides, stats.shape, stats.strides, q.dtype.char, k.dtype.char, v.dtype.char, o.dtype.char,
                do.dtype.char, stats.dtype.char, scale, bool(causal), bool(deterministic))
        hit = _repeat.get(rkey)
        if hit is not None and _aligned_all(q, k, v, o, do):
            plan, lays, dev = hit
            cp = _cp
            if cp.cuda.runtime.getDevice() == dev:
                dq, dk, dv = _grad_arrays(lays, q.dtype)
                _execute(plan, [q.data.ptr, k.data.ptr, v.data.ptr, o.data.ptr, do.data.ptr, stats.data.ptr,
                                dq.data.ptr, dk.data.ptr, dv.data.ptr], dev)
                return dq, dk, dv, None
    if not _sdpa_common(q, k, v) or o.dtype != q.dtype or do.dtype != q.dtype:
        return None
    cp = _cp
    b, h, lq, e = q.shape
    ev = v.shape[3]
    if o.shape != (b, h, lq, ev) or do.shape != o.shape or stats.shape != (b, h, lq, 1):
        return None
    scale0 = scale
    scale = float(1.0 / np.sqrt(e) if scale is None else scale)
    dropout_p = float(dropout_p)
    if not 0.0 <= dropout_p < 1.0 or (bias_grad and bias is None):
        return None
    with cp.cuda.Device(q.device.id):
        given = (q, k, v, o, do, stats)
        q, k, v, o, do = (_attn_in(a) for a in (q, k, v, o, do))
        stats = cp.ascontiguousarray(stats, dtype=cp.float32)
        bias_shape = None
        if bias is not None:
            if bias_grad and bias.dtype == np.bool_:
                return None  # a boolean mask has no gradient
            bias_shape = tuple(bias.shape)
            bias = _bias_in(bias, q, k)
            if bias is None:
                return None
        packed = _packed_order(q, k, v)
        if packed is not None:  # dq, dk, dv as one buffer laid out like the one q, k, v are slices of
            lays = ("packed",) + packed
        else:
            lays = tuple(_order_of(a.shape, a.strides) for a in (q, k, v))
        dq, dk, dv = _grad_arrays(lays, q.dtype)
        dbias = cp.empty(bias.shape, dtype=q.dtype) if bias_grad else None
        seeds = _seed_arrays(seed, offset) if dropout_p > 0 else None
        key = ("sdpa_bwd", q.device.id, q.dtype.str, _desc(q), _desc(k), _desc(v), _desc(o), _desc(do),
               _desc(dq), _desc(dk), _desc(dv), _desc(bias) if bias is not None else None, bool(bias_grad), scale,
               bool(causal), dropout_p, bool(deterministic))
        io = _types(q.dtype)[0]

        def build():
            mod, hd, F, g = _attention_graph(io, q.device.id)
            tq, tk, tv, to_, tdo = (_graph_tensor(g, n, a, io)
                                    for n, a in (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do)))
            tst = _graph_tensor(g, "stats", stats, F)
            tensors = [tq, tk, tv, to_, tdo, tst]
            kw = _mask_kwargs(causal)
            if bias is not None:
                kw["bias"] = _graph_tensor(g, "bias", bias, io)
                tensors.append(kw["bias"])
            if dbias is not None:
                kw["dBias"] = _graph_tensor(g, "dBias", dbias, io)
                tensors.append(kw["dBias"])
            if seeds is not None:
                _dropout_tensors(g, mod, dropout_p, kw, tensors)
            tdq, tdk, tdv = g.sdpa_backward(name="sdpa_backward", q=tq, k=tk, v=tv, o=to_, dO=tdo, stats=tst,
                                            attn_scale=scale, use_deterministic_algorithm=bool(deterministic), **kw)
            for t, a in ((tdq, dq), (tdk, dk), (tdv, dv)):
                t.set_output(True).set_dim(list(a.shape)).set_stride(list(_elem_strides(a))).set_data_type(io)
            tensors += [tdq, tdk, tdv]
            # the kernel's determinism is the graph's flag, not an engine note
            return _finish("sdpa_bwd", g, tensors, False, False, True, False,
                           deterministic_by_flag=bool(deterministic))

        plan = _plan_for(key, build)
        if plan is None:
            return None
        ptrs = [q.data.ptr, k.data.ptr, v.data.ptr, o.data.ptr, do.data.ptr, stats.data.ptr]
        if bias is not None:
            ptrs.append(bias.data.ptr)
        if dbias is not None:
            ptrs.append(dbias.data.ptr)
        if seeds is not None:
            ptrs += [seeds[0].data.ptr, seeds[1].data.ptr]
        ptrs += [dq.data.ptr, dk.data.ptr, dv.data.ptr]
        _execute(plan, ptrs, q.device.id)
        if plain and all(a is b for a, b in zip((q, k, v, o, do, stats), given)):
            g0 = given
            _remember_call(("sdpa_bwd", g0[0].shape, g0[0].strides, g0[1].shape, g0[1].strides, g0[2].shape,
                            g0[2].strides, g0[3].shape, g0[3].strides, g0[4].shape, g0[4].strides, g0[5].shape,
                            g0[5].strides, g0[0].dtype.char, g0[1].dtype.char, g0[2].dtype.char, g0[3].dtype.char,
                            g0[4].dtype.char, g0[5].dtype.char, scale0, bool(causal), bool(deterministic)),
                           (plan, lays, q.device.id))
        if dbias is not None and dbias.shape != bias_shape:
            # a mask broadcast along the query or key axis was expanded for cuDNN: sum the gradient back
            full = (1,) * (4 - len(bias_shape)) + bias_shape
            axes = tuple(i for i in (2, 3) if full[i] == 1 and dbias.shape[i] != 1)
            dbias = (dbias.astype(cp.float32).sum(axis=axes, keepdims=True).astype(q.dtype) if axes else dbias)
            dbias = dbias.reshape(bias_shape)
    return dq, dk, dv, dbias
