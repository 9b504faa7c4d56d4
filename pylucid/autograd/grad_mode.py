"""``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``: context managers and decorators."""

from __future__ import annotations

import functools

from .._state import state


class _GradModeContext:
    _target: bool = True

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__._clone(self):
                return fn(*args, **kwargs)

        return wrapper

    def _clone(self):
        return self.__class__()

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self._target
        return self

    def __exit__(self, *exc) -> None:
        state.grad_enabled = self._prev


class no_grad(_GradModeContext):  # noqa: N801
    """Disable graph recording inside the block (or the decorated function)."""

    _target = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Enable graph recording inside the block, even within ``no_grad``."""

    _target = True


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set grad mode to ``mode``; takes effect immediately, as in PyTorch, and undoes itself on exit."""

    def __init__(self, mode: bool) -> None:
        self._target = bool(mode)
        self._prev = state.grad_enabled
        state.grad_enabled = self._target

    def _clone(self):
        state.grad_enabled = self._prev
        return set_grad_enabled(self._target)

    def __enter__(self):
        return self


class inference_mode(_GradModeContext):  # noqa: N801
    """Like ``no_grad``; tensors made inside are marked as inference tensors in PyTorch.

    pylucid has no separate inference tensor kind: inside the block no graph
    is recorded, which is where the speed of inference mode comes from.
    """

    def __init__(self, mode: bool = True) -> None:
        self._target = not mode
        self._mode = mode

    def _clone(self):
        return inference_mode(self._mode)

    def __enter__(self):
        self._prev_inf = state.inference_mode
        state.inference_mode = self._mode
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        state.inference_mode = self._prev_inf
        super().__exit__(*exc)


def is_grad_enabled() -> bool:
    return state.grad_enabled


def is_inference_mode_enabled() -> bool:
    return state.inference_mode
