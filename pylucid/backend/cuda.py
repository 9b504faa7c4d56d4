"""The CUDA backend: CuPy, imported lazily so ``import pylucid`` never needs it."""

from __future__ import annotations

from .base import ArrayBackend

_cupy = None
_reason = None


def _load():
    global _cupy, _reason
    if _cupy is not None or _reason is not None:
        return _cupy
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            _reason = "CuPy found no CUDA GPU"
            return None
        _cupy = cupy
    except ImportError:
        _reason = "CuPy is not installed"
    except Exception as exc:  # driver missing, no device, ...
        _reason = f"CuPy could not reach a GPU: {exc}"
    return _cupy


def is_available() -> bool:
    return _load() is not None


def unavailable_reason() -> str:
    _load()
    return _reason or ""


class CUDABackend(ArrayBackend):
    name = "cuda"

    def __init__(self, index: int) -> None:
        cp = _load()
        super().__init__(cp)
        self.index = index
        self.cuda_device = cp.cuda.Device(index)

    def to_numpy(self, a):
        return self.xp.asnumpy(a)

    @property
    def special(self):
        import cupyx.scipy.special

        return cupyx.scipy.special

    @property
    def scipy_linalg(self):
        import cupyx.scipy.linalg

        return cupyx.scipy.linalg

    def asarray(self, data, dtype=None):
        with self.cuda_device:
            return self.xp.asarray(data, dtype=dtype)

    def scatter_add(self, target, index, values):
        import cupyx

        cupyx.scatter_add(target, index, values)
        return target

    def errstate(self):
        import contextlib

        return contextlib.nullcontext()
