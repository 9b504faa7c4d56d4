"""Functional convolution, pooling and resampling layers (``pylucid.nn.functional``).

The ops live in :mod:`pylucid.ops.conv` (registered, with graph-mode and fast
backwards); this module re-exports them under PyTorch's functional names and
adds the thin wrappers PyTorch has only here (``upsample*``).
"""

from __future__ import annotations

from ..ops.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    fold,
    interpolate,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
)

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "max_pool1d",
    "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate", "upsample", "upsample_nearest",
    "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle", "unfold", "fold",
]


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (kept as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate(..., mode='nearest')``."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate(..., mode='bilinear', align_corners=True)``, as PyTorch's deprecated alias.

    >>> import pylucid
    >>> upsample_bilinear(pylucid.tensor([[[[0.0, 1.0]]]]), size=(1, 3))
    tensor([[[[0.0000, 0.5000, 1.0000]]]])
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
