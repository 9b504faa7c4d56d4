"""The convolution layers, at PyTorch's module path ``torch.nn.modules.conv``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.conv.X is pylucid.nn.X``.
"""

from ..modules_conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, _ConvNd  # noqa: F401

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
