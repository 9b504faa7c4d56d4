"""The loss layers, at PyTorch's module path ``torch.nn.modules.loss``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.loss.X is pylucid.nn.X``.
"""

from ..loss import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    TripletMarginLoss,
    _Loss,
    _WeightedLoss,
)

__all__ = [
    "L1Loss", "NLLLoss", "KLDivLoss", "MSELoss", "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss",
    "CrossEntropyLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss", "CTCLoss",
]
