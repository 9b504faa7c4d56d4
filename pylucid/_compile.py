"""``pylucid.compile``: PyTorch's ``torch.compile`` entry point.

``mode="reduce-overhead"`` is implemented as CUDA-graph replay (what it means in PyTorch too, without
the code generation): on CUDA, the first call with a new input signature runs eagerly (a warm-up that
counts as a real call), the second captures the function into a CUDA graph on static copies of its tensor
arguments and replays it, and later calls copy their tensors into those buffers and replay, so one call
costs one graph launch however many ops it runs. The signature (tensor shapes, dtypes, devices and
``requires_grad``, the other arguments, grad mode and autocast state) keys a cache of graphs; a new one
is captured for a new signature. Returned tensors are the graph's own buffers, rewritten by the next
call (clone what must outlive it). A function that cannot be captured (a host read such as ``.item()``
inside it, random numbers, outputs that still need a backward, an op CUDA graphs refuse) runs eagerly
from then on, after a one-line warning. Without CUDA tensors among its arguments the function simply runs
eagerly (the CPU), with the same results and errors; a function without tensor arguments (a step that
closes over its model and data) is graphed when its first call allocated CUDA memory.

Every other mode has no compiler behind it yet: ``compile`` validates its arguments as PyTorch does and
returns the callable **unchanged**; the first such call in a process emits a ``UserWarning`` saying
compilation was not performed. ``disable=True`` asks for nothing and never warns.
"""

from __future__ import annotations

import functools
import threading
import warnings
from typing import Any, Callable

__all__ = ["compile"]

#: the ``mode`` strings ``torch.compile`` documents
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

_warned = False
_warn_lock = threading.Lock()


def _warn_once(stacklevel: int) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    warnings.warn(
        "pylucid.compile: compilation is not performed yet; the function or module runs eagerly, unchanged "
        "(this warning is shown once per process)",
        UserWarning,
        stacklevel=stacklevel,
    )


def _finish(fn: Callable, disable: bool, stacklevel: int, mode: str | None = None) -> Callable:
    if not callable(fn):
        raise RuntimeError(f"pylucid.compile: expected a function or a Module to compile, got {type(fn).__name__}")
    if disable:
        return fn
    if mode == "reduce-overhead":
        from .nn import Module

        if isinstance(fn, Module):
            fn.forward = _Replayed(fn.forward)
            return fn
        return functools.wraps(fn)(_Replayed(fn))
    _warn_once(stacklevel + 1)
    return fn


_EAGER = object()  # the cache entry of a signature that could not be captured


class _Replayed:
    """``fn`` replayed as CUDA graphs, one per input signature (see the module docstring)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self._graphs: dict = {}
        self._seen: set = set()

    @staticmethod
    def _leaves(obj, out: list):
        from ._tensor import Tensor

        if isinstance(obj, Tensor):
            out.append(obj)
            return ("T", tuple(obj.shape), obj.dtype.name, str(obj.device), obj.requires_grad)
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__,) + tuple(_Replayed._leaves(o, out) for o in obj)
        if isinstance(obj, dict):
            return ("dict",) + tuple((k, _Replayed._leaves(v, out)) for k, v in sorted(obj.items()))
        try:
            hash(obj)
            return ("v", obj)
        except TypeError:
            return ("id", id(obj))

    def __call__(self, *args, **kwargs):
        from ._state import state

        leaves: list = []
        sig = self._leaves((args, kwargs), leaves)
        on_cuda = any(t.device.type == "cuda" for t in leaves)
        if leaves and not on_cuda:
            return self.fn(*args, **kwargs)  # nothing to capture: the CPU runs the function as it is
        key = (sig, state.grad_enabled, tuple(sorted((state.autocast or {}).items())))
        entry = self._graphs.get(key)
        if entry is _EAGER:
            return self.fn(*args, **kwargs)
        if entry is None:
            if key not in self._seen:  # first call: eager, the warm-up (and a real call)
                self._seen.add(key)
                if on_cuda:
                    return self.fn(*args, **kwargs)
                # no tensor arguments (a step closing over its model and data): graphed only if it works on CUDA
                result, used = self._run_watching_cuda(args, kwargs)
                if not used:
                    self._graphs[key] = _EAGER
                return result
            entry = self._capture(key, args, kwargs, leaves)
            if entry is _EAGER:
                return self.fn(*args, **kwargs)
        graph, static, out = entry
        from .autograd import no_grad

        with no_grad():
            for s, t in zip(static, leaves):
                if s.data_ptr() != t.data_ptr():
                    s.copy_(t)
        graph.replay()
        return out

    def _run_watching_cuda(self, args, kwargs):
        """``(fn(*args, **kwargs), whether it allocated CUDA memory)``: a CUDA memory hook on this thread for
        the one call (allocations are what every CUDA op's outputs make)."""
        from . import cuda

        if not cuda.is_available():
            return self.fn(*args, **kwargs), False
        import importlib

        cp = cuda._require("compile")
        memory_hook = importlib.import_module(cp.__name__ + ".cuda.memory_hook")
        seen = [False]

        class _Watch(memory_hook.MemoryHook):
            name = "PylucidCompileWatch"

            def malloc_preprocess(self, **kwargs):
                seen[0] = True

        with _Watch():
            result = self.fn(*args, **kwargs)
        return result, seen[0]

    def _capture(self, key, args, kwargs, leaves):
        from . import cuda
        from ._tensor import Tensor
        from .autograd import no_grad

        with no_grad():
            static = [t.detach().clone() for t in leaves]
        for s, t in zip(static, leaves):
            if t.requires_grad:
                s.requires_grad_()
        it = iter(static)

        def rebuild(obj):
            if isinstance(obj, Tensor):
                return next(it)
            if isinstance(obj, (list, tuple)):
                return type(obj)(rebuild(o) for o in obj)
            if isinstance(obj, dict):
                return {k: rebuild(v) for k, v in sorted(obj.items())}
            return obj

        s_args, s_kwargs = rebuild((args, kwargs))
        from .autograd import engine

        g = cuda.CUDAGraph()
        try:
            runs = engine.RUNS[0]
            with cuda.graph(g):
                out = self.fn(*s_args, **s_kwargs)
            outs: list = []
            self._leaves(out, outs)
            if engine.RUNS[0] == runs and any(o.grad_fn is not None for o in outs):
                raise RuntimeError("its outputs still need a backward (graph the whole step, backward included, "
                                   "or use pylucid.cuda.make_graphed_callables)")
        except Exception as exc:  # capture failed: this signature runs eagerly from now on
            name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
            warnings.warn(f"pylucid.compile(mode='reduce-overhead'): {name} could not be captured as a CUDA graph "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}; "
                          f"{_where(exc)}); it runs eagerly", UserWarning, stacklevel=3)
            self._graphs[key] = _EAGER
            return _EAGER
        entry = (g, static, out)
        self._graphs[key] = entry
        return entry


def _where(exc: BaseException) -> str:
    """Where a failed capture stopped: the innermost frames of the traceback that lie in pylucid (the op
    that could not be captured, and what called it); the whole traceback with ``PYLUCID_COMPILE_DEBUG=1``."""
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if os.environ.get("PYLUCID_COMPILE_DEBUG"):
        return "traceback:\n" + "".join(traceback.format_list(frames))
    root = os.path.dirname(os.path.abspath(__file__))
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(root) and f.filename != __file__]
    shown = ours[-2:] or frames[-1:]
    return "at " + " <- ".join(f"{os.path.relpath(f.filename, os.path.dirname(root))}:{f.lineno} ({f.name})"
                               for f in reversed(shown)) + "; PYLUCID_COMPILE_DEBUG=1 shows the whole traceback"


def compile(  # noqa: A001 - mirrors torch.compile
    fn: Callable | None = None,
    *,
    mode: str | None = None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
) -> Callable:
    """Optimise ``fn`` (a function or ``pylucid.nn.Module``) for repeated calls: CUDA-graph replay for
    ``mode="reduce-overhead"`` (see the module docstring), else return it as is.

    Args:
        fn: the function or module. Omitted, ``compile(...)`` returns a decorator.
        mode: ``None``, ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` or
            ``"max-autotune-no-cudagraphs"``.
        fullgraph, dynamic: as in PyTorch (accepted; nothing is traced).
        backend: a backend name or a callable (accepted; nothing is handed to it).
        options: a dict of backend options; not together with ``mode``.
        disable: ``True`` turns ``compile`` into a plain identity that does not warn.

    Returns:
        ``fn`` itself (``mode="reduce-overhead"``: a function replaying CUDA graphs, or the module with its
        ``forward`` replaced by one), or a decorator when ``fn`` is omitted.

    Raises:
        RuntimeError: both ``mode`` and ``options`` given (PyTorch's rule), or ``fn`` not callable.
        ValueError: an unknown ``mode``.
        TypeError: ``options`` not a dict, ``backend`` neither a string nor callable.

    Warns once per process (``UserWarning``) that compilation is not performed, for every mode but
    ``"reduce-overhead"``.

    Example:
        >>> import warnings, pylucid
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     @pylucid.compile(mode="reduce-overhead")
        ...     def f(x):
        ...         return x * 2
        >>> f(pylucid.tensor([1.0, 2.0]))
        tensor([2., 4.])
    """
    if mode is not None and options is not None:
        raise RuntimeError("pylucid.compile: either mode or options can be specified, but both can't be specified "
                           "at the same time")
    if mode is not None and mode not in MODES:
        raise ValueError(f"pylucid.compile: unknown mode {mode!r}; accepted: {', '.join(MODES)} (or None)")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"pylucid.compile: options must be a dict, got {type(options).__name__}")
    if backend is not None and not (isinstance(backend, str) or callable(backend)):
        raise TypeError(f"pylucid.compile: backend must be a name or a callable, got {type(backend).__name__}")
    if fn is None:
        def decorator(target: Callable) -> Callable:
            return _finish(target, disable, 3, mode)  # the warning points at the decorated definition

        return decorator
    return _finish(fn, disable, 3, mode)
