"""Host-side interop: the one module outside ``pylucid.backend`` that touches NumPy.

Ops never compute with NumPy (they call the backend). What remains on the host
goes through here, so it stays in one visible place:

- turning Python data and NumPy arrays into tensors, and tensors back into
  NumPy (``tensor``, ``.numpy()``, ``__array__``, printing, DataLoader collation);
- dtype objects (pylucid dtypes wrap NumPy's, which CuPy shares);
- the CPU random bit generators (NumPy's PCG64) and their state;
- small integer bookkeeping of a few nn functions (bag offsets, CTC lengths),
  which PyTorch also keeps on the host;
- file formats (datasets) and the finite differences of ``gradcheck``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["np", "to_host"]


def to_host(t):
    """A NumPy view or copy of tensor ``t`` (CUDA tensors are copied to the host)."""
    return np.asarray(t._device.backend.to_numpy(t._data))
