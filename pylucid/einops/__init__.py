"""``pylucid.einops``: einops' ``rearrange`` / ``reduce`` / ``repeat`` / ``einsum`` / ``pack`` / ``unpack``.

The full pattern grammar of the einops package on pylucid tensors, lowered to
reshape / permute / expand and the reductions, so gradients flow through
every pattern. The layers are in :mod:`pylucid.einops.layers`.

>>> import pylucid
>>> from pylucid.einops import rearrange, reduce, repeat
>>> x = pylucid.ones(2, 3, 4)
>>> rearrange(x, 'b h w -> b (h w)').shape
(2, 12)
>>> reduce(x, 'b h w -> b', 'sum')
tensor([12., 12.])
>>> repeat(x, 'b h w -> b h w c', c=5).shape
(2, 3, 4, 5)
"""

from __future__ import annotations

from . import layers
from ._core import EinopsError, einsum, pack, parse_shape, rearrange, reduce, repeat, unpack

__all__ = ["EinopsError", "einsum", "layers", "pack", "parse_shape", "rearrange", "reduce", "repeat", "unpack"]
