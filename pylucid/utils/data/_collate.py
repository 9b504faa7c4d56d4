"""Turning a list of samples into a batch: ``default_collate`` and ``default_convert``.

The rules are PyTorch's (``torch.utils.data.default_collate``), element type by
element type:

========================  ====================================================
sample element            batch
========================  ====================================================
``pylucid.Tensor``        stacked along a new first axis, dtype kept
NumPy array / scalar      stacked into a tensor of the array's dtype
Python ``int``            ``int64`` tensor (``bool`` gives a ``bool`` tensor)
Python ``float``          ``float64`` tensor (exactly what PyTorch does)
``str`` / ``bytes``       the list of samples, unchanged
mapping                   same mapping type, each key collated
namedtuple                same namedtuple type, each field collated
tuple / other sequence    a list (tuples) or the same type, position by position
========================  ====================================================

The batch is built with NumPy (``np.stack``) then wrapped with
``pylucid.from_numpy``: one copy, no per-sample op dispatch, and it works
before any ``stack`` op exists. Tensors on an accelerator, or that require
grad, go through ``pylucid.stack`` instead so the device and the autograd graph
are kept, as ``torch.stack`` would.
"""

from __future__ import annotations

import collections.abc
from typing import Any, Sequence

import numpy as np

import pylucid

__all__ = ["default_collate", "default_convert"]

_ERR_FORMAT = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _rejects_numpy_dtype(dtype: np.dtype) -> bool:
    # Strings, bytes, objects and void records have no tensor counterpart:
    # PyTorch's collate refuses them with the same message.
    return dtype.kind in "USOV"


def _stack_tensors(batch: Sequence[Any]) -> Any:
    first = batch[0]
    shapes = [tuple(t.shape) for t in batch]
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise RuntimeError(
                "default_collate: stack expects each tensor to be equal size, but got "
                f"{list(shapes[0])} at entry 0 and {list(shape)} at entry {i}"
            )
    on_cpu = all(str(t.device) == "cpu" for t in batch)
    needs_graph = any(getattr(t, "requires_grad", False) for t in batch)
    if on_cpu and not needs_graph:
        dtypes = {t.dtype.name for t in batch}
        if len(dtypes) != 1:
            raise TypeError(f"default_collate: tensors in a batch must share one dtype; got {sorted(dtypes)}")
        return pylucid.from_numpy(np.stack([t.numpy() for t in batch]))
    stack = getattr(pylucid, "stack", None)
    if stack is None:  # pragma: no cover - only before the core ships stack
        raise RuntimeError(
            f"default_collate: batching tensors on {first.device} or that require grad needs pylucid.stack"
        )
    return stack(list(batch), 0)


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, following PyTorch's rules.

    Args:
        batch: the samples, all with the same structure.

    Returns:
        The batch: tensors stacked along a new first axis, numbers turned into
        1-D tensors, strings left as a list, containers collated element by
        element (tuples become lists, as in PyTorch).

    Raises:
        TypeError: an element type it cannot batch (an ``object``, a NumPy
            string array, ...).
        RuntimeError: tensors of different shapes, or sequences of different
            lengths, in one batch.

    Example:
        >>> out = default_collate([(1, 0.5, "a"), (2, 1.5, "b")])
        >>> out[0].tolist(), out[0].dtype.name, out[1].dtype.name, out[2]
        ([1, 2], 'int64', 'float64', ('a', 'b'))
    """
    if len(batch) == 0:
        raise ValueError("default_collate: got an empty batch; expected at least one sample")
    elem = batch[0]
    if isinstance(elem, pylucid.Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_)):
        if _rejects_numpy_dtype(elem.dtype):
            raise TypeError(_ERR_FORMAT.format(elem.dtype))
        arrays = [np.asarray(b) for b in batch]
        shapes = {a.shape for a in arrays}
        if len(shapes) != 1:
            raise RuntimeError(f"default_collate: stack expects each array to be equal size, but got {sorted(shapes)}")
        return pylucid.from_numpy(np.stack(arrays))
    # bool before int: bool is an int subclass, and PyTorch gives a bool tensor.
    if isinstance(elem, bool):
        return pylucid.from_numpy(np.array(batch, dtype=np.bool_))
    if isinstance(elem, int):
        return pylucid.from_numpy(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        # float64, not float32: torch.utils.data.default_collate makes Python
        # floats float64 and we keep its behaviour so ported code is unchanged.
        return pylucid.from_numpy(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:  # the mapping type cannot be built from a dict
            return collated
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        columns = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_ERR_FORMAT.format(type(elem)))


def default_convert(data: Any) -> Any:
    """Convert NumPy arrays inside ``data`` to tensors, without batching.

    Used by ``DataLoader(batch_size=None)``: each sample is already a batch.

    Example:
        >>> default_convert({"x": np.zeros(2, dtype=np.float32), "y": 3})["x"].shape
        (2,)
    """
    if isinstance(data, pylucid.Tensor):
        return data
    if isinstance(data, np.ndarray):
        if _rejects_numpy_dtype(data.dtype):
            return data
        return pylucid.from_numpy(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        if _rejects_numpy_dtype(data.dtype):
            return data
        return pylucid.from_numpy(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
