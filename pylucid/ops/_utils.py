"""Argument normalisation shared by the op modules (dims, shapes), with op-named errors."""

from __future__ import annotations

from .._tensor import Tensor, _norm_dim

norm_dim = _norm_dim


def norm_dims(dim, ndim: int, op: str):
    """``None`` (all dims) or a sorted tuple of non-negative dims; repeated dims raise ValueError."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None  # PyTorch: an empty dim list reduces over everything for sum/mean
        out = tuple(_norm_dim(d, ndim, op) for d in dim)
        if len(set(out)) != len(out):
            raise ValueError(f"{op}: dim {list(dim)} names a dimension more than once")
        return tuple(sorted(out))
    return (_norm_dim(dim, ndim, op),)


def norm_shape(shape, op: str) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and 0-d int tensors as sizes."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    if len(shape) == 1 and isinstance(shape[0], Tensor) and shape[0].ndim == 1:
        shape = shape[0].tolist()
    out = []
    for s in shape:
        try:
            out.append(s.__index__())
        except AttributeError:
            raise TypeError(f"{op}: sizes must be ints, got {type(s).__name__} in {tuple(shape)}") from None
    return tuple(out)


def reduced_shape(shape, axes, keepdim):
    if axes is None:
        return (1,) * len(shape) if keepdim else ()
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def keepdim_shape(shape, axes):
    """The shape a reduction over ``axes`` would have with ``keepdim=True``."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))
