"""``pylucid.cuda``: what the CUDA device offers (CuPy is imported only when asked).

>>> import pylucid
>>> isinstance(pylucid.cuda.is_available(), bool)
True

Memory figures come from CuPy's default memory pool (the caching allocator every
pylucid CUDA array goes through): ``memory_allocated`` is the bytes held by live
arrays, ``memory_reserved`` what the pool holds from the driver. The peak
(``max_memory_allocated``) is tracked exactly from the first call to
``reset_peak_memory_stats()`` or ``max_memory_allocated()`` on (a pool hook,
installed lazily so ordinary runs pay nothing); before that it falls back to the
pool's reserved bytes, an upper bound. CuPy's memory hooks are per thread: the
peak counts allocations made by the thread that turned tracking on.
"""

from __future__ import annotations

from ..backend import cuda as _be

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "get_device_name", "synchronize",
    "manual_seed", "manual_seed_all", "seed", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "reset_peak_memory_stats", "empty_cache", "is_initialized", "is_bf16_supported", "get_device_capability",
    "get_device_properties", "device", "amp", "Stream", "Event", "current_stream", "default_stream", "stream",
    "set_stream", "CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "CaptureSyncError",
    "make_graphed_callables",
]


def is_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    return _be.is_available()


def device_count() -> int:
    """Number of visible GPUs (0 without CuPy or a GPU)."""
    if not is_available():
        return 0
    return _be._cupy.cuda.runtime.getDeviceCount()


def _require(fn: str):
    if not is_available():
        from ..errors import DeviceUnavailable

        raise DeviceUnavailable(f"pylucid.cuda.{fn}: CUDA is not available ({_be.unavailable_reason()})")
    return _be._cupy


def _index(device, fn: str) -> int:
    """Device index of ``None`` (the current device), an int, ``"cuda:N"`` or a ``pylucid.device``."""
    cp = _require(fn)
    if device is None:
        return cp.cuda.runtime.getDevice()
    if isinstance(device, int):
        idx = device
    else:
        from ..device import device as _device

        d = _device(device)
        if d.type != "cuda":
            raise ValueError(f"pylucid.cuda.{fn}: expected a CUDA device, got {d}")
        idx = d.index
    n = cp.cuda.runtime.getDeviceCount()
    if not 0 <= idx < n:
        raise ValueError(f"pylucid.cuda.{fn}: device index {idx} out of range (0 .. {n - 1})")
    return idx


def current_device() -> int:
    """Index of the current CUDA device."""
    return _require("current_device").cuda.runtime.getDevice()


def set_device(device) -> None:
    """Make ``device`` the current CUDA device (where CuPy allocates outside pylucid)."""
    _require("set_device").cuda.Device(_index(device, "set_device")).use()


def get_device_name(device=None) -> str:
    """The GPU's marketing name, e.g. ``'NVIDIA H200'``."""
    cp = _require("get_device_name")
    name = cp.cuda.runtime.getDeviceProperties(_index(device, "get_device_name"))["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def is_initialized() -> bool:
    """True once CuPy has been loaded and sees a GPU (pylucid initialises CUDA lazily, on first use)."""
    return _be._cupy is not None and is_available()


def get_device_capability(device=None) -> tuple[int, int]:
    """The compute capability ``(major, minor)`` of ``device`` (default: the current one), e.g. ``(9, 0)``."""
    cp = _require("get_device_capability")
    props = cp.cuda.runtime.getDeviceProperties(_index(device, "get_device_capability"))
    return int(props["major"]), int(props["minor"])


class _DeviceProperties:
    """What ``get_device_properties`` reports: ``name``, ``major``, ``minor``, ``total_memory`` (bytes),
    ``multi_processor_count``."""

    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count")

    def __init__(self, props: dict) -> None:
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.major = int(props["major"])
        self.minor = int(props["minor"])
        self.total_memory = int(props["totalGlobalMem"])
        self.multi_processor_count = int(props["multiProcessorCount"])

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None) -> _DeviceProperties:
    """Name, compute capability, memory and SM count of ``device`` (default: the current one)."""
    cp = _require("get_device_properties")
    return _DeviceProperties(cp.cuda.runtime.getDeviceProperties(_index(device, "get_device_properties")))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True when the current GPU computes in bfloat16 natively (compute capability 8.0 or newer).

    ``False`` without CUDA, as in PyTorch. Older GPUs have no bfloat16 arithmetic that pylucid's kernels
    can use, so ``including_emulation`` does not change the answer.
    """
    if not is_available():
        return False
    return get_device_capability()[0] >= 8


class device:  # noqa: N801 - mirrors torch.cuda.device
    """Context manager that makes ``device`` current inside the block and restores the previous one after.

    ``None`` or a negative index leaves the current device alone, as in PyTorch.
    """

    def __init__(self, device) -> None:
        self.idx = -1 if device is None or (isinstance(device, int) and device < 0) else _index(device, "device")
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc) -> None:
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)


def synchronize(device=None) -> None:
    """Wait until every kernel queued on ``device`` (default: the current one) has finished; then raise the
    IndexError of a bad index an embedding lookup met there since the last synchronisation (CUDA checks indices
    without waiting for the GPU: ``CUDABackend.check_index_range``)."""
    cp = _require("synchronize")
    idx = _index(device, "synchronize")
    with cp.cuda.Device(idx):
        cp.cuda.Device().synchronize()
    from ..backend import cuda as _backend

    for be in _backend._BACKENDS:
        if be.index == idx:
            be.raise_index_errors()


def manual_seed(seed: int) -> None:
    """Seed the default generator of every CUDA device (CPU generator untouched, as in PyTorch)."""
    from .. import random
    from ..device import device as _device

    for i in range(device_count()):
        random._gen_for(_device("cuda", i), None).manual_seed(seed)


manual_seed_all = manual_seed


def seed() -> None:
    """Seed every CUDA default generator with fresh entropy."""
    from pylucid._interop import np
    manual_seed(int(np.random.SeedSequence().entropy) & ((1 << 63) - 1))


# -- memory -------------------------------------------------------------------------------
_peak: dict = {}
_hook = None


def _pool():
    return _require("memory").get_default_memory_pool()


def _install_peak_hook() -> None:
    """Track the pool's used bytes after every allocation (exact peak from now on)."""
    global _hook
    if _hook is not None:
        return
    cp = _require("max_memory_allocated")
    import importlib

    memory_hook = importlib.import_module(cp.__name__ + ".cuda.memory_hook")  # of the CuPy the backend loaded

    pool = cp.get_default_memory_pool()

    class _PeakHook(memory_hook.MemoryHook):
        name = "PylucidPeakHook"

        def malloc_postprocess(self, **kwargs):
            dev = kwargs.get("device_id", 0)
            used = pool.used_bytes()  # the current device is device_id while allocating
            if used > _peak.get(dev, 0):
                _peak[dev] = used

    _hook = _PeakHook()
    _hook.__enter__()
    for i in range(device_count()):
        with cp.cuda.Device(i):
            _peak[i] = max(_peak.get(i, 0), pool.used_bytes())


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA arrays on ``device``."""
    cp = _require("memory_allocated")
    with cp.cuda.Device(_index(device, "memory_allocated")):
        return int(_pool().used_bytes())


def memory_reserved(device=None) -> int:
    """Bytes the caching pool holds from the driver on ``device`` (allocated + cached)."""
    cp = _require("memory_reserved")
    with cp.cuda.Device(_index(device, "memory_reserved")):
        return int(_pool().total_bytes())


def max_memory_allocated(device=None) -> int:
    """Peak of :func:`memory_allocated` since the last :func:`reset_peak_memory_stats`.

    Exact once tracking is on (the first call of this function or of the reset turns it on);
    before that the pool's reserved bytes stand in as an upper bound.
    """
    idx = _index(device, "max_memory_allocated")
    first = _hook is None
    cp = _require("max_memory_allocated")
    if first:
        with cp.cuda.Device(idx):
            reserved = int(_pool().total_bytes())
        _install_peak_hook()
        _peak[idx] = max(_peak.get(idx, 0), reserved)
    with cp.cuda.Device(idx):
        used = int(_pool().used_bytes())
    return max(_peak.get(idx, 0), used)


def reset_peak_memory_stats(device=None) -> None:
    """Restart peak tracking on ``device`` from the bytes allocated now."""
    idx = _index(device, "reset_peak_memory_stats")
    _install_peak_hook()
    _peak[idx] = memory_allocated(idx)


def empty_cache() -> None:
    """Give the pool's cached (unused) blocks back to the driver; live arrays are untouched."""
    cp = _require("empty_cache")
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


from . import amp  # noqa: E402 - the submodule reads pylucid.amp, imported after this package's functions
from .graphs import (  # noqa: E402
    CaptureSyncError, CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables,
)
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: E402
