"""``pylucid.cuda``: what the CUDA device offers (CuPy is imported only when asked)."""

from __future__ import annotations

from .backend import cuda as _be


def is_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    return _be.is_available()


def device_count() -> int:
    if not is_available():
        return 0
    return _be._cupy.cuda.runtime.getDeviceCount()


def _require(fn: str):
    if not is_available():
        from .errors import DeviceUnavailable

        raise DeviceUnavailable(f"pylucid.cuda.{fn}: CUDA is not available ({_be.unavailable_reason()})")
    return _be._cupy


def synchronize(device=None) -> None:
    _require("synchronize").cuda.Device(0 if device is None else _index(device)).synchronize()


def _index(device):
    from .device import device as _device

    return _device(device).index if not isinstance(device, int) else device


def manual_seed(seed: int) -> None:
    from . import random

    for i in range(device_count()):
        random._gen_for(__import__("pylucid").device("cuda", i), None).manual_seed(seed)


manual_seed_all = manual_seed


def memory_allocated(device=None) -> int:
    return _require("memory_allocated").get_default_memory_pool().used_bytes()


def max_memory_allocated(device=None) -> int:
    from .backend import cuda as be

    pool = _require("max_memory_allocated").get_default_memory_pool()
    return max(getattr(be, "_peak", 0), pool.used_bytes())


def empty_cache() -> None:
    _require("empty_cache").get_default_memory_pool().free_all_blocks()
