"""The containers, at PyTorch's module path ``torch.nn.modules.container``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.container.X is pylucid.nn.X``.
"""

from ..module import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
