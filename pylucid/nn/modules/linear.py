"""The linear layers, at PyTorch's module path ``torch.nn.modules.linear``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.linear.X is pylucid.nn.X``.
"""

from ..linear import Bilinear, Identity, LazyLinear, Linear  # noqa: F401

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]
