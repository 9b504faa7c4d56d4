"""Functional resampling wrappers that PyTorch has only in ``torch.nn.functional`` (``upsample*``).

The convolutions, pools, ``interpolate``, ``fold``/``unfold`` and pixel
shuffles are the registered ops of :mod:`pylucid.ops.conv`, declared there in
``pylucid`` and ``pylucid.nn.functional``.
"""

from __future__ import annotations

from ..ops.conv import interpolate
from ..ops.registry import declare

_F = dict(namespaces=("pylucid.nn.functional",), method=False)


@declare(**_F)
def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (kept as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


@declare(**_F)
def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate(..., mode='nearest')``."""
    return interpolate(input, size, scale_factor, mode="nearest")


@declare(**_F)
def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate(..., mode='bilinear', align_corners=True)``, as PyTorch's deprecated alias.

    >>> import pylucid
    >>> upsample_bilinear(pylucid.tensor([[[[0.0, 1.0]]]]), size=(1, 3))
    tensor([[[[0.0000, 0.5000, 1.0000]]]])
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
