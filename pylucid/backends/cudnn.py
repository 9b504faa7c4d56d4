"""``pylucid.backends.cudnn``: whether and how the CUDA backend uses cuDNN (see :mod:`pylucid.backends`)."""

from __future__ import annotations

import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version", "flags"]


def is_available() -> bool:
    """True when cuDNN and its Python frontend load on a visible GPU."""
    from ..backend import cudnn as _cudnn

    return _cudnn.is_available()


def version() -> int | None:
    """cuDNN's version as an int (``91900`` for 9.19.0), None without it."""
    from ..backend import cudnn as _cudnn

    return _cudnn.version()


@contextlib.contextmanager
def flags(enabled=None, benchmark=None, deterministic=None, allow_tf32=None):
    """Set some switches for a ``with`` block, restoring them after it (``None`` leaves one as it is)."""
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    g = globals()
    saved = {n: g[n] for n in names}
    for n, v in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
        if v is not None:
            g[n] = bool(v)
    try:
        yield
    finally:
        g.update(saved)
