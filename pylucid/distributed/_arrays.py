"""The one place in ``pylucid.distributed`` that touches a Tensor's backend array.

Communication libraries move raw memory: MPI wants a contiguous host buffer,
NCCL a device pointer and a stream. This module hands the communication
engines (``_mpi``, ``_nccl``) the array behind a tensor (NumPy on the CPU,
CuPy on CUDA), makes the contiguous or host copies they need, and writes
results back in place (bumping the tensor's version counter, as every
in-place write does). Everything else in ``pylucid.distributed``,
``pylucid.nn.parallel`` and the ZeRO optimizer works on Tensors.
"""

from __future__ import annotations

from pylucid._interop import np
from pylucid._tensor import Tensor, _new_tensor

__all__ = ["np", "array", "device_of", "is_cuda", "wrap", "mark_written", "host_copy", "contiguous",
           "write", "copy_scaled", "sum_of", "empty_like", "empty", "HALF_DTYPES"]

#: float16 and bfloat16: no MPI datatype, reductions run in float32
HALF_DTYPES = (np.dtype(np.float16), np.dtype("bfloat16"))


def array(t: Tensor):
    """The backend array of ``t`` (a view of its memory, not a copy)."""
    return t._data


def device_of(t: Tensor):
    return t._device


def is_cuda(t: Tensor) -> bool:
    return t._device.type == "cuda"


def wrap(arr, dev) -> Tensor:
    """A Tensor on ``dev`` over backend array ``arr`` (no copy)."""
    return _new_tensor(arr, dev)


def mark_written(t: Tensor) -> None:
    """Record an in-place write into ``t`` (its version counter, shared with its views)."""
    t._version[0] += 1


def host_copy(t: Tensor):
    """A contiguous NumPy array with ``t``'s values: ``t``'s own memory for a contiguous CPU tensor,
    else a copy (CUDA tensors are copied to the host)."""
    a = t._data
    if t._device.type == "cpu":
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)
    return np.ascontiguousarray(t._device.backend.to_numpy(a))


def contiguous(t: Tensor):
    """``t``'s array if it is contiguous, else a contiguous copy on the same device."""
    a = t._data
    if a.flags.c_contiguous:
        return a
    with t._device.backend.device_ctx():
        return t._device.backend.ascontiguousarray(a)


def write(t: Tensor, values) -> None:
    """``t[...] = values`` on the raw array (``values``: a host or same-device array of ``t``'s size),
    then a version bump. Values of another dtype are cast (the float32 staging of half reductions)."""
    a = t._data
    be = t._device.backend
    if t._device.type == "cuda" and isinstance(values, np.ndarray):
        values = be.asarray(np.ascontiguousarray(values).astype(a.dtype, copy=False))
    if values.dtype != a.dtype:
        values = values.astype(a.dtype)
    with be.device_ctx():
        a[...] = values.reshape(a.shape)
    t._version[0] += 1


def copy_scaled(dst: Tensor, src, scale=None, plus=None) -> None:
    """``dst[...] = (src + plus) * scale`` on the raw arrays, in one pass where ``plus`` is None
    (``src``, ``plus``: Tensors of ``dst``'s shape on its device; ``scale`` None: no scaling),
    then a version bump. Values of another dtype are cast to ``dst``'s."""
    d = dst._data
    a = src._data
    be = dst._device.backend
    if a.dtype != d.dtype:
        a = a.astype(d.dtype)
    with be.device_ctx():
        if plus is not None:
            be.add(a, plus._data, out=d, casting="unsafe")
            a = d
        if scale is not None:
            be.multiply(a, scale, out=d, casting="unsafe")
        elif a is not d:
            d[...] = a
    dst._version[0] += 1


def sum_of(srcs, dst=None):
    """``srcs[0] + srcs[1] + ...``, added in that order (every rank adds in rank order, so all get the same
    bits), into Tensor ``dst`` (of the sources' shape; its version bumped) or into a new Tensor, returned."""
    a = [s._data for s in srcs]
    dev = srcs[0]._device
    be = dev.backend
    with be.device_ctx():
        if dst is None:
            out = be.add(a[0], a[1]) if len(a) > 1 else a[0].copy()
        else:
            out = dst._data
            if len(a) > 1:
                be.add(a[0], a[1], out=out, casting="unsafe")
            else:
                out[...] = a[0]
        for x in a[2:]:
            be.add(out, x, out=out, casting="unsafe")
    if dst is None:
        return _new_tensor(out, dev)
    dst._version[0] += 1
    return dst


def empty_like(t: Tensor, shape=None, dtype=None, host: bool = False):
    """An uninitialised array shaped ``shape`` (default ``t``'s) of ``t``'s dtype, on ``t``'s device
    (on the host with ``host=True``)."""
    shape = t._data.shape if shape is None else shape
    dtype = t._data.dtype if dtype is None else dtype
    if host or t._device.type == "cpu":
        return np.empty(shape, dtype=dtype)
    be = t._device.backend
    with be.device_ctx():
        return be.empty(shape, dtype=dtype)


def empty(shape, dtype, dev):
    """An uninitialised backend array on device ``dev``."""
    be = dev.backend
    with be.device_ctx():
        return be.empty(shape, dtype=dtype)
