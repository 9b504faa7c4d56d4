"""Op-database entries for the window creation functions (``pylucid/signal/_creation.py``).

A window takes a length and scalars, no tensors: each sample is compared
with PyTorch's window value for value; there is nothing to differentiate.
``tests/test_signal.py`` covers ``pylucid.signal.windows`` and the edge cases.
"""

from __future__ import annotations

import torch

import pylucid as pl
from tests.opdb import ErrorInput, OpEntry, Sample


def window(name, samples):
    return OpEntry(name, getattr(pl, name), getattr(torch, name), samples, dtypes=("float32",), grad=False,
                   gradgrad=False, amp=False,
                   error_inputs=lambda: [ErrorInput((-1,), exc=ValueError, match="non-negative")])


def _lengths(*extra):
    return lambda: [Sample((7,), name="periodic"), Sample((6, False, *extra), name="symmetric"),
                    Sample((1,), name="one")]


ENTRIES = [
    window("hann_window", _lengths()),
    window("hamming_window", _lengths(0.5, 0.3)),
    window("blackman_window", _lengths()),
    window("bartlett_window", _lengths()),
    window("kaiser_window", _lengths(4.0)),
]
