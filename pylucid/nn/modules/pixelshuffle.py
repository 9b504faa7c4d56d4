"""The pixel (un)shuffle layers, at PyTorch's module path ``torch.nn.modules.pixelshuffle``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.pixelshuffle.X is pylucid.nn.X``.
"""

from ..modules_conv import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
