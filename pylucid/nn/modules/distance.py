"""The distance layers, at PyTorch's module path ``torch.nn.modules.distance``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.distance.X is pylucid.nn.X``.
"""

from ..padding import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["PairwiseDistance", "CosineSimilarity"]
