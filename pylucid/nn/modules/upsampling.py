"""The upsampling layers, at PyTorch's module path ``torch.nn.modules.upsampling``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.upsampling.X is pylucid.nn.X``.
"""

from ..modules_conv import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]
