"""The loss layers, at PyTorch's module path ``torch.nn.modules.loss``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.loss.X is pylucid.nn.X``.
"""

from .. import loss as _loss
from ..loss import *  # noqa: F401,F403
from ..loss import _Loss, _WeightedLoss  # noqa: F401

__all__ = list(_loss.__all__)
