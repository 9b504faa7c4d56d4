"""Host-side interop: where NumPy enters pylucid outside ``pylucid.backend``.

Ops never compute with NumPy (they call the backend). What remains on the host
goes through here (``from pylucid._interop import np`` or the helpers below), so
it stays in one visible place:

- turning Python data and NumPy arrays into tensors, and tensors back into
  NumPy (``tensor``, ``.numpy()``, ``__array__``, printing);
- dtype objects (pylucid dtypes wrap NumPy's, which CuPy shares);
- the CPU random bit generators (NumPy's PCG64) and their state, which the
  data samplers draw from (:func:`numpy_rng`), and the seeding of NumPy's global
  generator in DataLoader workers (:func:`seed_numpy_global`);
- argument checks that accept NumPy scalars where PyTorch does
  (:data:`INTEGER_TYPES`, :data:`BOOL_TYPES`);
- small integer bookkeeping of a few nn functions (bag offsets, CTC lengths),
  which PyTorch also keeps on the host;
- file formats (datasets) and the finite differences of ``gradcheck``.

Besides this module, only host-side I/O may import NumPy itself, because arrays
are what it reads and writes: checkpoint files (``pylucid/serialization.py``),
DataLoader collation (``pylucid/utils/data/_collate.py``) and dataset file formats
(``pylucid/datasets/``). ``tests/test_layering.py`` holds that list.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["np", "to_host", "numpy_rng", "seed_numpy_global", "c_contiguous", "INTEGER_TYPES", "BOOL_TYPES"]

#: what an integer argument may be: a Python int or a NumPy integer scalar (PyTorch accepts both)
INTEGER_TYPES = (int, np.integer)
#: what a flag argument may be: a Python bool or a NumPy bool scalar
BOOL_TYPES = (bool, np.bool_)


def c_contiguous(a) -> bool:
    """Whether a backend array (NumPy or CuPy) is C-contiguous: CuPy's C-level flag where it has one (its
    ``.flags`` builds an object on every read, ~2 us of host time; hot paths ask this per array per step)."""
    f = getattr(a, "_c_contiguous", None)
    return bool(a.flags.c_contiguous) if f is None else f


def to_host(t):
    """A NumPy view or copy of tensor ``t`` (CUDA tensors are copied to the host)."""
    return np.asarray(t._device.backend.to_numpy(t._data))


def numpy_rng(generator: Any, where: str) -> np.random.Generator:
    """The ``numpy.random.Generator`` behind a ``pylucid.Generator`` (its CPU stream).

    ``None`` means the global ``pylucid.default_generator``, so ``pylucid.manual_seed``
    makes shuffling reproducible, as in PyTorch. Anything else raises TypeError naming ``where``.

    >>> import pylucid
    >>> numpy_rng(pylucid.Generator().manual_seed(0), "example").permutation(3).tolist()
    [2, 0, 1]
    """
    if generator is None:
        import pylucid

        generator = pylucid.default_generator
    rng = getattr(generator, "_np", None)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{where}: generator must be a pylucid.Generator or None, got {type(generator).__name__}")
    return rng


def seed_numpy_global(seed: int) -> None:
    """Seed NumPy's legacy global generator (``numpy.random.seed``) with ``seed`` modulo 2**32."""
    np.random.seed(seed % 2**32)
