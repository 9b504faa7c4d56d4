"""``pylucid.accelerator``: the device-agnostic view of the machine's accelerator, as ``torch.accelerator``.

pylucid's one accelerator kind is CUDA (through CuPy), so every function here answers from
:mod:`pylucid.cuda`. On a machine without a usable GPU, ``is_available()`` is ``False``,
``current_accelerator()`` is ``None`` and ``device_count()`` is ``0``; the functions that need a device
(``current_device_index``, ``set_device_index``, ``synchronize``, the memory figures) raise
:class:`pylucid.errors.DeviceUnavailable` (a ``RuntimeError``), as PyTorch raises ``RuntimeError``.

The idiom of the PyTorch examples works unchanged:

>>> import pylucid
>>> acc = pylucid.accelerator.current_accelerator()
>>> device = acc if pylucid.accelerator.is_available() else pylucid.device("cpu")
>>> pylucid.zeros(2, device=device).device.type in ("cpu", "cuda")
True
"""

from __future__ import annotations

from . import cuda as _cuda
from .device import device as _device_cls
from .errors import DeviceUnavailable

__all__ = [
    "is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
    "set_device_index", "set_device_idx", "synchronize", "device_index", "empty_cache", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats",
]


def is_available() -> bool:
    """True when an accelerator (a CUDA GPU that CuPy sees) can be used."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False):
    """The accelerator as a ``pylucid.device`` (``device(type='cuda', index=0)``), or ``None`` without one.

    ``check_available`` is accepted for PyTorch compatibility: pylucid reports an accelerator only when it
    is usable, so the answer is the same either way.
    """
    return _device_cls("cuda") if _cuda.is_available() else None


def device_count() -> int:
    """Number of accelerator devices (0 without one)."""
    return _cuda.device_count() if _cuda.is_available() else 0


def _require(fn: str) -> None:
    if not _cuda.is_available():
        raise DeviceUnavailable(f"pylucid.accelerator.{fn}: cannot access an accelerator device when none is "
                                "available (pylucid.accelerator.is_available() is False)")


def _index(device, fn: str) -> int | None:
    """``None`` (the current device), an int, ``"cuda:N"`` or a ``pylucid.device`` of the accelerator's type."""
    if device is None or isinstance(device, int):
        return device
    d = _device_cls(device)
    if d.type != "cuda":
        raise ValueError(f"pylucid.accelerator.{fn}: {d} is not the current accelerator (cuda)")
    return d.index


def current_device_index() -> int:
    """Index of the current accelerator device."""
    _require("current_device_index")
    return _cuda.current_device()


def set_device_index(device, /) -> None:
    """Make ``device`` (an index, ``"cuda:N"`` or a ``pylucid.device``) the current accelerator device."""
    _require("set_device_index")
    idx = _index(device, "set_device_index")
    if idx is not None:
        _cuda.set_device(idx)


#: PyTorch's earlier names of the two functions above
current_device_idx = current_device_index
set_device_idx = set_device_index


def synchronize(device=None, /) -> None:
    """Wait until all work queued on ``device`` (default: the current accelerator device) has finished."""
    _require("synchronize")
    _cuda.synchronize(_index(device, "synchronize"))


class device_index:  # noqa: N801 - mirrors torch.accelerator.device_index
    """Context manager: ``device`` (an index, or ``None`` for no change) is current inside the block.

    ``device_index(None)`` does nothing, also without an accelerator, as in PyTorch.
    """

    def __init__(self, device, /) -> None:
        self.idx = device
        self.prev_idx = None

    def __enter__(self):
        if self.idx is not None:
            self.prev_idx = current_device_index()
            if self.prev_idx != self.idx:
                set_device_index(self.idx)
        return self

    def __exit__(self, *exc) -> None:
        if self.idx is not None and self.prev_idx != self.idx:
            set_device_index(self.prev_idx)


def empty_cache() -> None:
    """Give the accelerator's cached, unused memory back to the driver (see :func:`pylucid.cuda.empty_cache`)."""
    _require("empty_cache")
    _cuda.empty_cache()


def memory_allocated(device=None, /) -> int:
    """Bytes held by live tensors on ``device`` (see :func:`pylucid.cuda.memory_allocated`)."""
    _require("memory_allocated")
    return _cuda.memory_allocated(_index(device, "memory_allocated"))


def max_memory_allocated(device=None, /) -> int:
    """Peak of :func:`memory_allocated` (see :func:`pylucid.cuda.max_memory_allocated`)."""
    _require("max_memory_allocated")
    return _cuda.max_memory_allocated(_index(device, "max_memory_allocated"))


def memory_reserved(device=None, /) -> int:
    """Bytes the caching allocator holds on ``device`` (see :func:`pylucid.cuda.memory_reserved`)."""
    _require("memory_reserved")
    return _cuda.memory_reserved(_index(device, "memory_reserved"))


def reset_peak_memory_stats(device=None, /) -> None:
    """Restart peak tracking on ``device`` (see :func:`pylucid.cuda.reset_peak_memory_stats`)."""
    _require("reset_peak_memory_stats")
    _cuda.reset_peak_memory_stats(_index(device, "reset_peak_memory_stats"))
