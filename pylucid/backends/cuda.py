"""``pylucid.backends.cuda``: switches of the CUDA libraries other than cuDNN (see :mod:`pylucid.backends`)."""

from __future__ import annotations

__all__ = ["matmul", "is_built"]


class _MatmulFlags:
    """``allow_tf32``: float32 GEMMs may round their inputs to TF32 on tensor cores (cuBLAS's
    ``CUBLAS_COMPUTE_32F_FAST_TF32``); False keeps full float32 products."""

    __slots__ = ("allow_tf32",)

    def __init__(self) -> None:
        self.allow_tf32 = False

    def __repr__(self) -> str:
        return f"matmul(allow_tf32={self.allow_tf32})"


matmul = _MatmulFlags()


def is_built() -> bool:
    """True when CuPy (the CUDA backend's array library) is installed."""
    import importlib.util

    return importlib.util.find_spec("cupy") is not None
