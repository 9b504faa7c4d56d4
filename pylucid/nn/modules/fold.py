"""``Fold`` and ``Unfold``, at PyTorch's module path ``torch.nn.modules.fold``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.fold.X is pylucid.nn.X``.
"""

from ..modules_conv import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]
