"""``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``: context managers and decorators.

They, ``detect_anomaly`` and ``amp.autocast`` are switches of one field of the
thread state (``pylucid._state.state``), built on :class:`_ModeSwitch`.
"""

from __future__ import annotations

import contextlib

from .._state import state


class _ModeSwitch(contextlib.ContextDecorator):
    """Set ``state.<_field>`` to ``_value`` inside the block, put the previous value back on exit.

    Also a decorator (``contextlib.ContextDecorator``): every call of the
    decorated function runs under a fresh copy, so recursive and nested calls
    each restore what they found.
    """

    _field = "grad_enabled"
    _value = True

    def __enter__(self):
        self._prev = getattr(state, self._field)
        setattr(state, self._field, self._value)
        return self

    def __exit__(self, *exc) -> None:
        setattr(state, self._field, self._prev)

    def _recreate_cm(self):
        # a shallow copy (copy.copy is several times slower: this runs at every call of a decorated function)
        switch = object.__new__(type(self))
        switch.__dict__.update(self.__dict__)
        return switch


class _SetMode(_ModeSwitch):
    """The ``set_*`` form of a switch: it takes effect when constructed (PyTorch's behaviour), so entering it only
    returns it and leaving it undoes it. As a decorator it undoes its effect at once and switches at each call."""

    def __init__(self, value) -> None:
        self._value = value
        _ModeSwitch.__enter__(self)

    def __enter__(self):
        return self

    def __call__(self, fn):
        self.__exit__()
        return super().__call__(fn)

    def _recreate_cm(self):
        switch = super()._recreate_cm()
        _ModeSwitch.__enter__(switch)  # switched at the call, as constructing it would
        return switch


class no_grad(_ModeSwitch):  # noqa: N801
    """Disable graph recording inside the block (or the decorated function)."""

    _value = False


class enable_grad(_ModeSwitch):  # noqa: N801
    """Enable graph recording inside the block, even within ``no_grad``."""

    _value = True


class set_grad_enabled(_SetMode):  # noqa: N801
    """Set grad mode to ``mode``; takes effect immediately, as in PyTorch, and undoes itself on exit."""

    def __init__(self, mode: bool) -> None:
        super().__init__(bool(mode))


class inference_mode(_ModeSwitch):  # noqa: N801
    """Like ``no_grad``; tensors made inside are marked as inference tensors in PyTorch.

    pylucid has no separate inference tensor kind: inside the block no graph
    is recorded, which is where the speed of inference mode comes from.
    """

    def __init__(self, mode: bool = True) -> None:
        self._value = not mode
        self._mode = mode

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
