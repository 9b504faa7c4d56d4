"""``Rearrange`` and ``Reduce`` as ``nn.Module`` layers, as ``einops.layers.torch``.

>>> import pylucid
>>> from pylucid.einops.layers import Rearrange, Reduce
>>> net = pylucid.nn.Sequential(Reduce('b c (h 2) (w 2) -> b c h w', 'max'), Rearrange('b c h w -> b (c h w)'))
>>> net(pylucid.zeros(3, 2, 4, 4)).shape
(3, 8)
"""

from __future__ import annotations

from ..nn.module import Module
from ._core import _recipe, rearrange, reduce

__all__ = ["Rearrange", "Reduce"]


class Rearrange(Module):
    """``rearrange(x, pattern, **axes_lengths)`` as a layer."""

    def __init__(self, pattern: str, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = axes_lengths
        _check_pattern(pattern, "rearrange", axes_lengths)

    def forward(self, x):
        return rearrange(x, self.pattern, **self.axes_lengths)

    def extra_repr(self) -> str:
        return _repr(self.pattern, None, self.axes_lengths)


class Reduce(Module):
    """``reduce(x, pattern, reduction, **axes_lengths)`` as a layer."""

    def __init__(self, pattern: str, reduction, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = axes_lengths
        _check_pattern(pattern, reduction, axes_lengths)

    def forward(self, x):
        return reduce(x, self.pattern, self.reduction, **self.axes_lengths)

    def extra_repr(self) -> str:
        return _repr(self.pattern, self.reduction, self.axes_lengths)


def _check_pattern(pattern, operation, axes_lengths):
    """Parse the pattern when the layer is built, so a bad one fails there (without ``...`` its rank is known)."""
    from ._core import _Side

    left = pattern.split("->")[0]
    side = _Side(left)
    if not side.has_ellipsis:
        _recipe(pattern, operation, tuple(axes_lengths), len(side.composition))


def _repr(pattern, reduction, axes_lengths) -> str:
    params = repr(pattern)
    if reduction is not None:
        params += f", {reduction!r}"
    for k, v in axes_lengths.items():
        params += f", {k}={v}"
    return params
