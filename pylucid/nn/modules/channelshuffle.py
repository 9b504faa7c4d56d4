"""The channel shuffle layer, at PyTorch's module path ``torch.nn.modules.channelshuffle``.

The class is :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.channelshuffle.ChannelShuffle is
pylucid.nn.ChannelShuffle``.
"""

from ..modules_conv import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
