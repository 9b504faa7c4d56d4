"""NCCL through CuPy: the library handle ``pylucid.distributed``'s NCCL engine drives.

The engine moves CUDA buffers between ranks; it needs CuPy's device, stream
and event API and ``cupy.cuda.nccl``'s communicators. Both are imported here,
on first use, so that nothing above the backend imports CuPy itself and a
machine without a GPU never loads it.
"""

from __future__ import annotations


def modules():
    """``(cupy, cupy.cuda.nccl)``, imported on first use (ImportError without CuPy)."""
    import cupy
    from cupy.cuda import nccl

    return cupy, nccl


def available() -> bool:
    """Whether CuPy is installed and was built with NCCL."""
    try:
        _, nccl = modules()
    except Exception:
        return False
    return bool(getattr(nccl, "available", False))
