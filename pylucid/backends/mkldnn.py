"""``pylucid.backends.mkldnn``: whether the CPU backend uses oneDNN (formerly MKL-DNN, PyTorch's name for it).

* ``enabled``: convolutions (forward, data and weight gradient, transposed ones too) go through oneDNN's
  direct kernels where the library is installed (``pip install pylucid[onednn]``) and takes the
  configuration; False: the GEMM kernels everywhere. Read at every call, so a change takes effect at once.

>>> import pylucid.backends.mkldnn as mkldnn
>>> mkldnn.enabled
True
>>> with mkldnn.flags(enabled=False):
...     mkldnn.enabled
False
"""

from __future__ import annotations

import contextlib

enabled = True

__all__ = ["enabled", "is_available", "version", "flags"]


def is_available() -> bool:
    """True when the oneDNN library loads (``pylucid.backend.onednn.unavailable_reason()`` says why not)."""
    from ..backend import onednn

    return onednn.is_available()


def version() -> str | None:
    """oneDNN's version (``"3.2.0"``), None without it."""
    from ..backend import onednn

    return onednn.version()


@contextlib.contextmanager
def flags(enabled=None):
    """Set ``enabled`` for a ``with`` block, restoring it after (``None`` leaves it as it is)."""
    g = globals()
    saved = g["enabled"]
    if enabled is not None:
        g["enabled"] = bool(enabled)
    try:
        yield
    finally:
        g["enabled"] = saved
