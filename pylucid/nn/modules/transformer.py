"""The transformer layers, at PyTorch's module path ``torch.nn.modules.transformer``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.transformer.X is pylucid.nn.X``.
"""

from ..transformer import (  # noqa: F401
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]
