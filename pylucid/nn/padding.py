"""Padding layers (``ConstantPad*``, ``ZeroPad*``, ``ReflectionPad*``, ``ReplicationPad*``, ``CircularPad*``) and the
distance layers (``PairwiseDistance``, ``CosineSimilarity``), thin wrappers over ``nn.functional``.

>>> import pylucid
>>> pylucid.nn.ReflectionPad1d(2)(pylucid.tensor([[[1.0, 2.0, 3.0]]]))
tensor([[[3., 2., 1., 2., 3., 2., 1.]]])
>>> pylucid.nn.ZeroPad2d((1, 0, 0, 1))
ZeroPad2d((1, 0, 0, 1))
"""

from __future__ import annotations

from . import _functional_core as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "PairwiseDistance",
           "CosineSimilarity"]


def _padding(padding, nd: int, name: str) -> tuple:
    if isinstance(padding, int):
        return (padding,) * (2 * nd)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * nd:
        raise ValueError(f"{name}: padding must be an int or a tuple of {2 * nd} ints, got {padding}")
    return padding


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _padding(padding, self._nd, type(self).__name__)

    def forward(self, input):
        nd = self._nd
        if self._mode != "constant" and input.ndim not in (nd + 1, nd + 2):
            raise NotImplementedError(f"{type(self).__name__}: expected a {nd + 1}-D or {nd + 2}-D input, got "
                                      f"{input.ndim}-D")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``."""

    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with ``value``."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with ``value``."""

    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros."""

    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last 2 dims with zeros."""

    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last 3 dims with zeros."""

    _nd = 3


class ReflectionPad1d(_PadNd):
    """Reflect at the edges of the last dim (the edge itself is not repeated)."""

    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Reflect at the edges of the last 2 dims."""

    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Reflect at the edges of the last 3 dims."""

    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Repeat the edge values of the last dim."""

    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Repeat the edge values of the last 2 dims."""

    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Repeat the edge values of the last 3 dims."""

    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Wrap the last dim around."""

    _nd, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Wrap the last 2 dims around."""

    _nd, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Wrap the last 3 dims around."""

    _nd, _mode = 3, "circular"


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` over the last dim; see :func:`pylucid.nn.functional.pairwise_distance`."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """Cosine similarity along ``dim``; see :func:`pylucid.nn.functional.cosine_similarity`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
