"""CUDA graphs: record a stretch of GPU work once, replay it with one launch (PyTorch's API).

>>> import pylucid
>>> callable(pylucid.cuda.CUDAGraph) and callable(pylucid.cuda.graph)
True

Usage, as with ``torch.cuda.graph``::

    g = pylucid.cuda.CUDAGraph()
    static_x = pylucid.randn(128, 784, device="cuda")
    for _ in range(3):                      # warm up: kernels compiled, plans built, state allocated
        step(static_x)
    with pylucid.cuda.graph(g):             # capture: nothing runs, the work is recorded
        static_loss = step(static_x)
    for x in batches:
        static_x.copy_(x)                   # new data into the captured input buffer
        g.replay()                          # the whole step, one launch; static_loss holds its result

How it works here:

* **Capture** is CuPy's stream capture of the capturing stream (``graph`` makes a side stream; a capture
  on the default stream is refused). Every pylucid CUDA op launches on the current stream — its own
  kernels, cuBLAS through the backend's direct handle, cuDNN with the handle bound to the stream — so a
  step made of pylucid ops is captured whole.
* **Memory**: while a graph captures, every CUDA allocation comes from the graph's **private pool** (a
  CuPy ``MemoryPool`` of its own, or one shared through :func:`graph_pool_handle`), so the addresses the
  graph reads and writes are never handed to other work; arrays made during the capture (the outputs,
  gradients created by a captured ``backward``) live in that pool and are rewritten by every replay. The
  pool's memory goes back to the driver when the graph (and every handle and tensor of the pool) is
  dropped. Graphs that share a pool must be replayed in the order they were captured.
* **No host synchronisation inside a capture**: ``.item()``, ``.tolist()``, ``.numpy()``, printing, or a
  data-dependent shape raise :class:`CaptureSyncError` naming the call; the capture is abandoned, and the
  stream, the pool and the graph object stay usable (``reset()`` is not needed).
* The capture mode is CUDA's *relaxed* mode whatever ``capture_error_mode`` says: the private pool grows
  with ``cudaMalloc`` during the first capture, which the ``global`` and ``thread_local`` modes forbid;
  pylucid's own check above is what refuses host reads.
* Random numbers drawn inside a capture are frozen into the graph (each replay repeats them); optimizers
  must be ``capturable`` for step-dependent scalars (Adam's bias corrections) to advance per replay.
"""

from __future__ import annotations

import gc

from ..backend import cuda as _cuda_backend
from ..backend.cuda import CaptureSyncError
from .streams import Stream

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "CaptureSyncError"]


def _cp(fn: str):
    from . import _require

    return _require(fn)


class _GraphPool:
    """A private memory pool for CUDA graphs (what :func:`graph_pool_handle` returns)."""

    def __init__(self) -> None:
        self._pool = _cp("graph_pool_handle").cuda.MemoryPool()

    def used_bytes(self) -> int:
        return int(self._pool.used_bytes())

    def total_bytes(self) -> int:
        return int(self._pool.total_bytes())

    def __repr__(self) -> str:
        return f"<pylucid.cuda graph pool: {self.used_bytes()} bytes used, {self.total_bytes()} held>"


def graph_pool_handle() -> _GraphPool:
    """A new private memory pool that several graphs may share (``pool=`` of :class:`CUDAGraph` / :class:`graph`)."""
    return _GraphPool()


def is_current_stream_capturing() -> bool:
    """True while the current CUDA stream is capturing a graph."""
    cp = _cp("is_current_stream_capturing")
    return bool(cp.cuda.get_current_stream().is_capturing())


_MODES = ("global", "thread_local", "relaxed")


def _backend():
    from ..device import device

    return device("cuda").backend


class CUDAGraph:
    """A CUDA graph: :meth:`capture_begin` / :meth:`capture_end` record the work of the current stream,
    :meth:`replay` launches it again. ``keep_graph`` is accepted (the executable graph is always kept)."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._graph = None
        self._pool: _GraphPool | None = None
        self._stream = None
        self._alloc = None
        self._keep: list = []  # host buffers the captured copy nodes read

    # -- capture ------------------------------------------------------------------------------------------
    def capture_begin(self, pool: _GraphPool | None = None, capture_error_mode: str = "global") -> None:
        """Start recording the current stream's work (see the module docstring for the rules)."""
        cp = _cp("CUDAGraph.capture_begin")
        if capture_error_mode not in _MODES:
            raise ValueError(f"CUDAGraph.capture_begin: capture_error_mode must be one of {_MODES}, "
                             f"got {capture_error_mode!r}")
        if pool is not None and not isinstance(pool, _GraphPool):
            raise TypeError("CUDAGraph.capture_begin: pool must come from pylucid.cuda.graph_pool_handle() or "
                            f"another graph's pool(), got {type(pool).__name__}")
        if self._graph is not None or self._stream is not None:
            raise RuntimeError("CUDAGraph.capture_begin: this graph already holds a capture; call reset() first")
        s = cp.cuda.get_current_stream()
        if s.ptr == 0:
            raise RuntimeError("CUDAGraph.capture_begin: a capture cannot run on the default stream; capture with "
                               "`with pylucid.cuda.graph(g):` (it makes a side stream) or under "
                               "`with pylucid.cuda.stream(pylucid.cuda.Stream()):`")
        be = _backend()
        be.prepare_capture(s.ptr)  # per-stream buffers, from the ordinary pool, before the capture begins
        self._pool = pool if pool is not None else (self._pool or graph_pool_handle())
        self._alloc = cp.cuda.using_allocator(self._pool._pool.malloc)
        self._alloc.__enter__()
        be.graph_keep = self._keep
        _cuda_backend.CAPTURING[0] += 1
        try:
            s.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
        except Exception:
            self._restore()
            raise
        self._stream = s

    def _restore(self) -> None:
        _cuda_backend.CAPTURING[0] -= 1
        _backend().graph_keep = None
        if self._alloc is not None:
            self._alloc.__exit__(None, None, None)
            self._alloc = None

    def capture_end(self) -> None:
        """Finish the capture and instantiate the graph."""
        if self._stream is None:
            raise RuntimeError("CUDAGraph.capture_end: no capture in progress (call capture_begin first)")
        s, self._stream = self._stream, None
        try:
            self._graph = s.end_capture()
        finally:
            self._restore()

    def _abandon(self) -> None:
        """End a failed capture: the stream leaves capture mode, the partial graph and its buffers are dropped."""
        if self._stream is None:
            return
        s, self._stream = self._stream, None
        try:
            s.end_capture()
        except Exception:  # an invalidated capture reports its error when it ends; it is over either way
            pass
        finally:
            self._restore()
            self._keep.clear()

    # -- use ------------------------------------------------------------------------------------------------
    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        if self._graph is None:
            raise RuntimeError("CUDAGraph.replay: nothing was captured (capture_begin/capture_end, or "
                               "`with pylucid.cuda.graph(g):`, first)")
        self._graph.launch(_cp("CUDAGraph.replay").cuda.get_current_stream())

    def reset(self) -> None:
        """Drop the captured graph (its pool goes too unless another graph or handle shares it)."""
        if self._stream is not None:
            self._abandon()
        self._graph = None
        self._keep = []
        self._pool = None

    def pool(self) -> _GraphPool | None:
        """This graph's memory pool, to share with another capture (``pool=g.pool()``)."""
        return self._pool

    def debug_dump(self, path: str) -> None:
        raise NotImplementedError("CUDAGraph.debug_dump: not available (CuPy exposes no graph dump)")

    def __repr__(self) -> str:
        state = "captured" if self._graph is not None else "capturing" if self._stream is not None else "empty"
        return f"<pylucid.cuda.CUDAGraph {state}>"


_side_streams: dict = {}


class graph:  # noqa: N801 - PyTorch's spelling
    """Context manager capturing its body into ``cuda_graph`` on a side stream (``stream``, or one kept per
    device), as ``torch.cuda.graph``. The device is synchronised and Python's garbage collected first, so
    no earlier work or pending frees reach the capture. An exception inside the body abandons the capture
    and propagates; the graph stays empty and usable."""

    def __init__(self, cuda_graph: CUDAGraph, pool: _GraphPool | None = None, stream: Stream | None = None,
                 capture_error_mode: str = "global") -> None:
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"pylucid.cuda.graph: expected a pylucid.cuda.CUDAGraph, got {type(cuda_graph).__name__}")
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.stream = stream

    def __enter__(self):
        cp = _cp("graph")
        if self.stream is None:
            dev = cp.cuda.runtime.getDevice()
            if dev not in _side_streams:
                _side_streams[dev] = Stream()
            self.stream = _side_streams[dev]
        cp.cuda.Device().synchronize()
        gc.collect()
        self.stream.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)
        except Exception:
            self.stream.__exit__(None, None, None)
            raise
        return self.cuda_graph

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is not None:
                self.cuda_graph._abandon()
            else:
                self.cuda_graph.capture_end()
        finally:
            self.stream.__exit__(None, None, None)
        return False


# ------------------------------------------------------------------------------------------------------------
# make_graphed_callables: a module's forward and backward as two graphs behind one autograd Function
# ------------------------------------------------------------------------------------------------------------
def _warm_up(fn, n: int = 3) -> None:
    """Run ``fn`` ``n`` times on the side stream (kernels compiled, plans built, lazily made state allocated)."""
    cp = _cp("make_graphed_callables")
    dev = cp.cuda.runtime.getDevice()
    if dev not in _side_streams:
        _side_streams[dev] = Stream()
    cp.cuda.Device().synchronize()
    with _side_streams[dev]:
        for _ in range(n):
            fn()
    cp.cuda.Device().synchronize()


def _graph_one(fn, sample_args: tuple, pool):
    """Capture ``fn(*sample_args)`` forward and its backward; the replaying autograd Function's ``apply``."""
    from .. import autograd
    from .._tensor import Tensor
    from ..autograd.function import Function
    from ..nn import Module

    params = tuple(p for p in fn.parameters() if p.requires_grad) if isinstance(fn, Module) else ()
    for a in sample_args:
        if not isinstance(a, Tensor):
            raise TypeError(f"make_graphed_callables: sample_args must be tensors, got {type(a).__name__}")
    static_in = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in sample_args)
    diff_in = tuple(a for a in static_in if a.requires_grad) + params

    def fwd_bwd():
        outs = fn(*static_in)
        outs = outs if isinstance(outs, tuple) else (outs,)
        live = [o for o in outs if o.requires_grad]
        if live and diff_in:
            autograd.grad(live, diff_in, grad_outputs=[o.detach() * 0 + 1 for o in live], allow_unused=True)

    _warm_up(fwd_bwd)
    fwd_graph, bwd_graph = CUDAGraph(), CUDAGraph()
    with graph(fwd_graph, pool=pool):
        outs = fn(*static_in)
    single = not isinstance(outs, tuple)
    static_out = (outs,) if single else outs
    grad_outs = tuple(o.detach().clone() if o.requires_grad else None for o in static_out)
    with graph(bwd_graph, pool=fwd_graph.pool()):
        live = [o for o in static_out if o.requires_grad]
        grads = autograd.grad(live, diff_in, grad_outputs=[g for g in grad_outs if g is not None],
                              allow_unused=True) if live and diff_in else ()
    static_grads = tuple(grads)
    n_in = len(static_in)

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for s, a in zip(static_in, inputs[:n_in]):
                if s.data_ptr() != a.data_ptr():
                    s.detach().copy_(a.detach())
            fwd_graph.replay()
            return tuple(o.detach() for o in static_out)

        @staticmethod
        def backward(ctx, *gs):
            for s, g in zip(grad_outs, gs):
                if s is not None:
                    if g is None:
                        s.zero_()
                    else:
                        s.copy_(g)
            bwd_graph.replay()
            it = iter(static_grads)
            out = [next(it) if a.requires_grad else None for a in static_in] + [next(it) for _ in params]
            # clones: the next replay rewrites the graph's buffers, the engine may keep these
            return tuple(None if g is None else g.detach().clone() for g in out)

    def replayed(*args):
        res = Graphed.apply(*(tuple(args) + params))
        return res[0] if single else res

    return replayed, fwd_graph.pool()


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    """Graph each callable's forward and backward (PyTorch's ``make_graphed_callables``).

    ``callables`` is a function or ``Module`` (or a tuple of them, with a tuple of sample-argument tuples);
    each is warmed up, its forward captured into one graph and its backward (gradients of its outputs with
    respect to its tensor inputs that require grad and the module's parameters) into a second. The returned
    callable (or ``Module`` whose ``forward`` is replaced) copies new inputs into the captured buffers,
    replays the forward, and on ``backward`` replays the backward graph; its outputs are differentiable like
    the original's and the parameters' ``.grad`` accumulate as usual. Inputs must have the sample shapes and
    dtypes; the callables share one memory pool and must be called in the order given.
    """
    from ..nn import Module

    just_one = not isinstance(callables, tuple)
    fns = (callables,) if just_one else callables
    samples = (sample_args,) if just_one else sample_args
    if len(fns) != len(samples):
        raise ValueError(f"make_graphed_callables: {len(fns)} callables but {len(samples)} sample-argument tuples")
    shared = pool
    out = []
    for fn, args in zip(fns, samples):
        args = args if isinstance(args, tuple) else (args,)
        replayed, shared = _graph_one(fn, args, shared)
        if isinstance(fn, Module):
            fn.forward = replayed
            out.append(fn)
        else:
            out.append(replayed)
    return out[0] if just_one else tuple(out)
