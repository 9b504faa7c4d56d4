"""The other normalisation layers, at PyTorch's module path ``torch.nn.modules.normalization``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.normalization.X is pylucid.nn.X``.
"""

from ..normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm"]
