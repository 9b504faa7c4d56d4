"""Devices: ``pylucid.device("cpu")``, ``"cuda"``, ``"cuda:N"``.

Device objects are interned, so ``a.device is b.device`` is the fast equality
check dispatch uses. Each device owns its backend object (created on first
use, so a machine without CuPy never imports it).
"""

from __future__ import annotations

from .errors import DeviceUnavailable

_CACHE: dict = {}


class device:  # noqa: N801 - mirrors torch.device
    __slots__ = ("type", "index", "backend")

    def __new__(cls, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            return spec
        if not isinstance(spec, str):
            if isinstance(spec, int):  # torch accepts a bare ordinal for cuda
                spec, index = "cuda", spec
            else:
                raise TypeError(f"pylucid.device: expected a string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
        key = (spec, index)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        kind, _, num = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"pylucid.device: unknown device type {kind!r}; accepted: 'cpu', 'cuda', 'cuda:N'")
        if num:
            if index is not None:
                raise ValueError(f"pylucid.device: index given twice in {spec!r} and index={index}")
            if not num.isdigit():
                raise ValueError(f"pylucid.device: bad device index in {spec!r}")
            index = int(num)
        if kind == "cpu":
            index = None
        elif index is None:
            index = 0
        canon = _CACHE.get((kind, index, "canon"))
        if canon is None:
            canon = object.__new__(cls)
            canon.type = kind
            canon.index = index
            _CACHE[(kind, index, "canon")] = canon
        _CACHE[key] = canon
        return canon

    def __getattr__(self, name: str):
        # ``backend``, the device's backend object, is made on first read (a machine without CuPy never
        # imports it); from then on it is a plain slot, which dispatch reads once per op
        if name == "backend":
            be = self.backend = _make_backend(self)
            return be
        raise AttributeError(f"'device' object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))


def _make_backend(dev: device):
    if dev.type == "cpu":
        from .backend.cpu import CPUBackend

        return CPUBackend()
    from .backend import cuda as cuda_backend

    if not cuda_backend.is_available():
        raise DeviceUnavailable(
            f"device {dev}: CUDA is not available here ({cuda_backend.unavailable_reason()}). "
            "Install CuPy for your CUDA version (pip install 'pylucid[cuda]') on a machine with an NVIDIA GPU, "
            "or use device='cpu'."
        )
    return cuda_backend.CUDABackend(dev.index)


cpu = device("cpu")
