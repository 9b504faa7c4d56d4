"""The embedding layers, at PyTorch's module path ``torch.nn.modules.sparse``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.sparse.X is pylucid.nn.X``.
"""

from ..sparse import Embedding, EmbeddingBag  # noqa: F401

__all__ = ["Embedding", "EmbeddingBag"]
