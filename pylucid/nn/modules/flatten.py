"""``Flatten`` and ``Unflatten``, at PyTorch's module path ``torch.nn.modules.flatten``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.flatten.X is pylucid.nn.X``.
"""

from ..linear import Flatten, Unflatten  # noqa: F401

__all__ = ["Flatten", "Unflatten"]
