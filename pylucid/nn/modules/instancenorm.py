"""The instance normalisation layers, at PyTorch's module path ``torch.nn.modules.instancenorm``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.instancenorm.X is pylucid.nn.X``.
"""

from ..normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
