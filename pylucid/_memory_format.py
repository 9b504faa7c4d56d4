"""Memory formats: the order in which a tensor's axes are laid out in its storage (PyTorch's ``torch.memory_format``).

A 4-d ``(N, C, H, W)`` tensor in ``channels_last`` keeps its logical shape and indexing; only its strides change,
to those of an ``(N, H, W, C)`` array (``channels_last_3d``: ``(N, D, H, W, C)`` for 5-d tensors). cuDNN's
convolutions run fastest in that layout for half precision, and pylucid's CUDA convolutions take and return it
without a copy. ``contiguous_format`` is the row-major layout; ``preserve_format`` (the default of ``clone`` and
the ``*_like`` creation functions) keeps the input's layout when it is one of these two.

>>> import pylucid
>>> x = pylucid.zeros(2, 3, 4, 5).to(memory_format=pylucid.channels_last)
>>> x.shape, x.stride(), x.is_contiguous(), x.is_contiguous(memory_format=pylucid.channels_last)
((2, 3, 4, 5), (60, 1, 15, 3), False, True)
"""

from __future__ import annotations

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


class memory_format:  # noqa: N801 - torch.memory_format
    """A memory format; the four instances are ``pylucid.contiguous_format``, ``channels_last``,
    ``channels_last_3d`` and ``preserve_format``."""

    __slots__ = ("name", "ndim")

    def __init__(self, name: str, ndim: int | None) -> None:
        self.name, self.ndim = name, ndim

    def __repr__(self) -> str:
        return f"pylucid.{self.name}"

    def __reduce__(self):  # pickles as the module-level instance (identity comparisons keep working)
        return self.name


contiguous_format = memory_format("contiguous_format", None)
channels_last = memory_format("channels_last", 4)
channels_last_3d = memory_format("channels_last_3d", 5)
preserve_format = memory_format("preserve_format", None)


def check(op: str, fmt) -> memory_format:
    """``fmt`` itself (None: ``preserve_format``), or TypeError naming ``op``."""
    if fmt is None:
        return preserve_format
    if fmt.__class__ is not memory_format:
        raise TypeError(f"{op}: memory_format must be a pylucid.memory_format (pylucid.channels_last, "
                        f"pylucid.contiguous_format, ...), got {type(fmt).__name__}")
    return fmt


def axes_order(fmt: memory_format, ndim: int, op: str) -> tuple:
    """The physical order of the axes of an ``ndim``-d tensor in ``fmt`` (outermost first); an error naming
    ``op`` for a channels-last format of the wrong rank (RuntimeError, as PyTorch)."""
    if fmt.ndim is None:
        return tuple(range(ndim))
    if ndim != fmt.ndim:
        raise RuntimeError(f"{op}: required rank {fmt.ndim} tensor to use {fmt.name} format, got a {ndim}-d tensor")
    return (0,) + tuple(range(2, ndim)) + (1,)


def is_dense_in(array, order) -> bool:
    """Whether ``array`` is packed with its axes laid out in ``order`` (axes of length 1 never decide)."""
    shape, strides = array.shape, array.strides
    expect = array.itemsize
    for ax in reversed(order):
        if shape[ax] != 1 and strides[ax] != expect:
            return False
        expect *= shape[ax]
    return True


def format_of(array):
    """``channels_last``/``channels_last_3d`` for a packed channels-last 4-d/5-d array that is not also
    row-major, else ``contiguous_format``: what ``preserve_format`` keeps."""
    nd = array.ndim
    if nd in (4, 5) and not array.flags.c_contiguous:
        fmt = channels_last if nd == 4 else channels_last_3d
        if is_dense_in(array, axes_order(fmt, nd, "")):
            return fmt
    return contiguous_format


def in_layout(array, order):
    """A packed copy of ``array`` (always a new array) with its axes laid out in ``order``; the logical shape
    is unchanged."""
    inv = [0] * len(order)
    for i, ax in enumerate(order):
        inv[ax] = i
    return array.transpose(order).copy().transpose(inv)
