"""``pylucid.signal``: signal-processing helpers, as ``torch.signal``.

:mod:`pylucid.signal.windows` holds the window functions of
``torch.signal.windows``; the creation functions ``pylucid.hann_window``,
``hamming_window``, ``blackman_window``, ``bartlett_window`` and
``kaiser_window`` (periodic by default, as PyTorch's) are declared here too.

>>> import pylucid
>>> pylucid.hann_window(4)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""

from __future__ import annotations

from . import windows
from ._creation import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window", "windows"]
