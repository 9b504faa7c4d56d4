"""The batch normalisation layers, at PyTorch's module path ``torch.nn.modules.batchnorm``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.batchnorm.X is pylucid.nn.X``.
"""

from ..normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
