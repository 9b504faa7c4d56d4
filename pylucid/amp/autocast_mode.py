"""``autocast``: thread-local, nestable, a context manager and a decorator.

Under ``autocast(device_type, dtype)`` every op on a tensor of that device
type runs by its schema's policy: ``Promote`` ops compute and return in
``dtype``, ``ForceFP32`` ops in float32, ``KeepInput`` ops in their inputs'
dtype. Only floating inputs are affected; the casts are recorded in the graph,
so float32 leaves receive float32 gradients.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state
from ..autograd.grad_mode import _ModeSwitch

_DEFAULTS = {"cpu": _dt.bfloat16, "cuda": _dt.float16}


class autocast(_ModeSwitch):  # noqa: N801
    """Run ops in lower precision according to their AMP policy.

    >>> import pylucid
    >>> a = pylucid.ones(2, 2)
    >>> with pylucid.amp.autocast("cpu", dtype=pylucid.float16):
    ...     (a @ a).dtype, pylucid.sum(a).dtype, pylucid.exp(a).dtype, pylucid.max(a).dtype
    (pylucid.float16, pylucid.float16, pylucid.float32, pylucid.float32)
    """

    _field = "autocast"

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True, cache_enabled=None) -> None:
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        dt = _DEFAULTS[device_type] if dtype is None else _dt.as_dtype(dtype)
        if dt not in (_dt.float16, _dt.bfloat16, _dt.float32):
            raise ValueError(f"autocast: dtype must be float16 or bfloat16, got {dt}")
        self.device_type = device_type
        self.fast_dtype = dt
        self.enabled = bool(enabled)

    def __enter__(self):
        prev = state.autocast or {}
        if self.enabled:
            self._value = {**prev, self.device_type: self.fast_dtype}
        else:
            self._value = {k: v for k, v in prev.items() if k != self.device_type} or None
        return super().__enter__()


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return bool(state.autocast) and device_type in state.autocast


def get_autocast_dtype(device_type: str = "cuda"):
    return (state.autocast or {}).get(device_type, _DEFAULTS[device_type])
