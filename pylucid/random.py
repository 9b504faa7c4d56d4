"""Random numbers: ``Generator``, ``manual_seed`` and the sampling functions.

Each ``Generator`` wraps a NumPy PCG64 bit generator (CPU) or a CuPy one
(CUDA). Sequences are reproducible across runs for a given seed, but are not
the same numbers PyTorch draws (documented in docs/semantics.md).
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from ._tensor import Tensor, _new_tensor
from .device import cpu, device as _device
from .ops._utils import norm_shape

_DEFAULT_SEED = 67280421310721


class Generator:
    """A seeded random source for one device.

    >>> import pylucid
    >>> g = pylucid.Generator().manual_seed(0)
    >>> a = pylucid.rand(2, generator=g); g.manual_seed(0)  # doctest: +ELLIPSIS
    <pylucid.random.Generator object at ...>
    >>> bool((a == pylucid.rand(2, generator=g)).all())
    True
    """

    def __init__(self, device="cpu") -> None:
        self.device = _device(device)
        self._seed = _DEFAULT_SEED
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        self._cp = None

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        self._seed = seed
        self._np = np.random.Generator(np.random.PCG64(seed & ((1 << 64) - 1)))
        self._cp = None
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        import json

        st = json.dumps(self._np.bit_generator.state).encode()
        return _new_tensor(np.frombuffer(st, dtype=np.uint8).copy(), cpu)

    def set_state(self, state: Tensor) -> "Generator":
        import json

        self._np.bit_generator.state = json.loads(bytes(np.asarray(state._data, dtype=np.uint8)).decode())
        return self

    def _source(self):
        """The array-module generator that draws on this generator's device."""
        if self.device.type == "cpu":
            return self._np
        if self._cp is None:
            xp = self.device.backend.xp
            with self.device.backend.cuda_device:
                self._cp = xp.random.Generator(xp.random.XORWOW(self._seed & ((1 << 63) - 1)))
        return self._cp


default_generator = Generator("cpu")
_cuda_generators: dict = {}


def _gen_for(dev, generator):
    if generator is not None:
        if generator.device.type != dev.type:
            raise ValueError(f"random: generator is on {generator.device} but the tensor is requested on {dev}")
        return generator
    if dev.type == "cpu":
        return default_generator
    g = _cuda_generators.get(dev.index)
    if g is None:
        g = _cuda_generators[dev.index] = Generator(dev).manual_seed(default_generator.initial_seed())
    return g


def manual_seed(seed: int) -> Generator:
    """Seed every default generator (CPU and CUDA)."""
    default_generator.manual_seed(seed)
    for g in _cuda_generators.values():
        g.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)


def _finish(arr, dev, dtype, requires_grad):
    t = _new_tensor(arr.astype(dtype.numpy_dtype, copy=False), dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _float_dtype(dtype, op):
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not dt.is_floating_point:
        raise TypeError(f"{op}: expected a floating dtype, got {dt}")
    return dt


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in ``[0, 1)``."""
    dt = _float_dtype(dtype, "rand")
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    return _finish(src.random(norm_shape(size, "rand"), dtype=np.float64 if dt is _dt.float64 else np.float32),
                   dev, dt, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    dt = _float_dtype(dtype, "randn")
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    return _finish(src.standard_normal(norm_shape(size, "randn"),
                                       dtype=np.float64 if dt is _dt.float64 else np.float32), dev, dt, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)``; ``randint(high, size)`` also works."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: size must be given, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    if isinstance(size, int):
        size = (size,)
    arr = src.integers(low, high, size=tuple(size), dtype=np.int64)
    return _finish(arr, dev, dt, requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0..n-1``."""
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    return _finish(src.permutation(n), dev, dt, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    return rand(input.shape, generator=generator, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    return randn(input.shape, generator=generator, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None, generator=None) -> Tensor:
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                   device=device or input.device)
