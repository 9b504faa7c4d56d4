"""The base class, at PyTorch's module path ``torch.nn.modules.module``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.module.X is pylucid.nn.X``.
"""

from ..module import Module, _addindent, _IncompatibleKeys  # noqa: F401

__all__ = ["Module"]
