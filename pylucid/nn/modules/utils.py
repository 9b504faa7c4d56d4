"""Argument helpers at PyTorch's module path ``torch.nn.modules.utils``.

``_single``/``_pair``/``_triple``/``_quadruple`` turn an int into a tuple of that length (an iterable
is returned as a tuple unchanged), as layer constructors written for PyTorch expect.

>>> from pylucid.nn.modules.utils import _pair, _reverse_repeat_tuple
>>> _pair(3), _pair((1, 2)), _reverse_repeat_tuple((1, 2), 2)
((3, 3), (1, 2), (2, 2, 1, 1))
"""

from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """Reverse ``t`` and repeat each element ``n`` times (conv padding to ``F.pad`` order)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """``out_size`` with each ``None`` replaced by the matching trailing entry of ``defaults``."""
    if isinstance(out_size, (int, float)):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict[str, Any], prefix: str) -> None:
    """Strip ``prefix`` from every key of ``state_dict`` that has it, in place (also in ``_metadata``).

    This is how a checkpoint saved from a wrapped model (``module.`` from ``DataParallel`` or
    ``DistributedDataParallel``) is loaded into the bare model.

    >>> from collections import OrderedDict
    >>> sd = OrderedDict([("module.w", 1), ("b", 2)])
    >>> consume_prefix_in_state_dict_if_present(sd, "module.")
    >>> list(sd)  # a renamed key moves to the end, as in PyTorch
    ['b', 'w']
    """
    keys = list(state_dict.keys())
    for key in keys:
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)
