"""The dropout layers, at PyTorch's module path ``torch.nn.modules.dropout``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.dropout.X is pylucid.nn.X``.
"""

from ..dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout, _DropoutNd  # noqa: F401

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
