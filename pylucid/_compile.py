"""``pylucid.compile``: PyTorch's ``torch.compile`` entry point; for now it runs the model eagerly.

pylucid has no graph compiler yet. ``compile`` accepts every documented way of calling
``torch.compile`` (on a function or a ``Module``, directly or as a decorator with or without
arguments), validates its arguments as PyTorch does, and returns the callable **unchanged**: a
function is the same function, a ``Module`` is the same module and its ``forward`` runs eagerly.
So that nobody mistakes this for compilation, the first call in a process that asks for
compilation emits a ``UserWarning`` saying it was not performed; later calls stay silent.
``disable=True`` asks for no compilation and never warns.
"""

from __future__ import annotations

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


def _finish(fn: Callable, disable: bool, stacklevel: int) -> Callable:
    if not callable(fn):
        raise RuntimeError(f"pylucid.compile: expected a function or a Module to compile, got {type(fn).__name__}")
    if not disable:
        _warn_once(stacklevel + 1)
    return fn


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
    """Optimise ``fn`` (a function or ``pylucid.nn.Module``) for repeated calls — today: return it as is.

    Args:
        fn: the function or module. Omitted, ``compile(...)`` returns a decorator.
        mode: ``None``, ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` or
            ``"max-autotune-no-cudagraphs"``.
        fullgraph, dynamic: as in PyTorch (accepted; nothing is traced).
        backend: a backend name or a callable (accepted; nothing is handed to it).
        options: a dict of backend options; not together with ``mode``.
        disable: ``True`` turns ``compile`` into a plain identity that does not warn.

    Returns:
        ``fn`` itself, or a decorator when ``fn`` is omitted.

    Raises:
        RuntimeError: both ``mode`` and ``options`` given (PyTorch's rule), or ``fn`` not callable.
        ValueError: an unknown ``mode``.
        TypeError: ``options`` not a dict, ``backend`` neither a string nor callable.

    Warns once per process (``UserWarning``) that compilation is not performed yet.

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
            return _finish(target, disable, 3)  # the warning points at the decorated definition

        return decorator
    return _finish(fn, disable, 3)
