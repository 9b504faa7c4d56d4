"""Creating tensors: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros``, ``arange``, ...

Dtype inference follows PyTorch: Python floats (and lists of them) become the
default float dtype (float32), Python ints int64, bools bool, complex numbers
complex64; NumPy arrays keep their dtype (a float64 array stays float64).
"""

from __future__ import annotations

import math

from pylucid._interop import np

from . import _memory_format as _mf
from . import dtypes as _dt
from ._tensor import Tensor, _new_tensor
from .device import cpu
from .device import device as _device
from .errors import LucidError
from .ops._utils import norm_shape


def _dev(device):
    return cpu if device is None else _device(device)


def _infer_np(data):
    """Host NumPy array for Python data, with PyTorch's dtype inference."""
    if isinstance(data, Tensor):
        return data._device.backend.to_numpy(data._data)
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, np.generic):
        return np.asarray(data)
    if isinstance(data, (list, tuple)):
        flat_kinds = set()
        try:
            arr = np.asarray(_unwrap_nested(data, flat_kinds))
        except ValueError:  # NumPy: "inhomogeneous shape"
            raise ValueError("tensor: nested sequences must be rectangular (every row of a dim the same length), "
                             f"got {_short(data)}") from None
        if arr.dtype == object:
            raise TypeError("tensor: nested sequences must be rectangular and hold only numbers")
        if arr.dtype.kind == "f" and not any(k is np.ndarray for k in flat_kinds):
            arr = arr.astype(_dt.get_default_dtype().numpy_dtype)
        elif arr.dtype.kind == "c" and not any(k is np.ndarray for k in flat_kinds):
            arr = arr.astype(_dt.get_default_dtype().to_complex().numpy_dtype)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(_dt.get_default_dtype().numpy_dtype)
        return arr
    if isinstance(data, bool):
        return np.asarray(data, dtype=np.bool_)
    if isinstance(data, int):
        return np.asarray(data, dtype=np.int64)
    if isinstance(data, float):
        return np.asarray(data, dtype=_dt.get_default_dtype().numpy_dtype)
    if isinstance(data, complex):
        return np.asarray(data, dtype=_dt.get_default_dtype().to_complex().numpy_dtype)
    if hasattr(data, "__array__") or hasattr(data, "__dlpack__"):
        return np.asarray(data)
    raise TypeError(
        f"tensor: can't build a tensor from {type(data).__name__}; accepted: numbers, (nested) lists/tuples, "
        "NumPy arrays and Tensors"
    )


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _number(op, name, v):
    """``v`` if it is a real number (a Python or NumPy number, a one-element tensor's item), else a TypeError."""
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"{op}: {name} must be a number or a one-element tensor, got shape {tuple(v.shape)}")
        v = v.item()
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (int, float)) or isinstance(v, complex):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__} {_short(v)}")
    return v


def _int_arg(op, name, v):
    if isinstance(v, bool) or not hasattr(v, "__index__") or isinstance(v, float):
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__} {_short(v)}")
    return v.__index__()


def _allocate(op, shape, dt, fn):
    """``fn()`` (the backend's allocation), with NumPy's size errors and MemoryError typed and naming the op."""
    try:
        return fn()
    except (ValueError, MemoryError, OverflowError) as exc:
        n = 1
        for d in shape:
            n *= d
        raise LucidError(f"{op}: cannot allocate a tensor of size {shape} ({n} elements of {dt.name}): "
                         f"{type(exc).__name__}: {exc}") from None


def _unwrap_nested(data, kinds):
    if isinstance(data, (list, tuple)):
        return [_unwrap_nested(d, kinds) for d in data]
    if isinstance(data, Tensor):
        kinds.add(Tensor)
        return data._device.backend.to_numpy(data._data).tolist() if data._data.dtype.kind in "fcbiu" \
            else np.asarray(data).tolist()
    if isinstance(data, np.ndarray):
        kinds.add(np.ndarray)
        return data
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``.

    >>> import pylucid
    >>> pylucid.tensor([1, 2]).dtype, pylucid.tensor([1.0, 2]).dtype, pylucid.tensor(True).dtype
    (pylucid.int64, pylucid.float32, pylucid.bool)
    """
    if dtype is not None and isinstance(data, (list, tuple, float, int, complex)) and not isinstance(data, bool):
        # convert Python numbers straight to the requested dtype (no detour through float32)
        want = _dt.as_dtype(dtype).numpy_dtype
        try:
            arr = np.asarray(_unwrap_nested(data, set()) if isinstance(data, (list, tuple)) else data,
                             dtype=want if want.kind in "fc" else None)
        except (TypeError, ValueError):
            raise TypeError(f"tensor: can't build a {dtype} tensor from {type(data).__name__}") from None
        arr = arr.astype(want)
    else:
        arr = _infer_np(data)
    if dtype is not None:
        arr = arr.astype(_dt.as_dtype(dtype).numpy_dtype)
    elif arr.dtype not in _dt._FROM_NP:
        raise TypeError(
            f"tensor: can't build a tensor of NumPy dtype {arr.dtype}; accepted: bool, integer, floating and complex "
            "numbers"
        )
    dev = _dev(device)
    be = dev.backend
    out = be.asarray(arr) if dev is not cpu else np.array(arr, copy=True)
    if dev is not cpu and out is arr:
        out = out.copy()
    t = _new_tensor(out, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor` but shares memory with ``data`` when no conversion is needed."""
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device, dtype=dtype)
    if isinstance(data, np.ndarray) and (device is None or _dev(device) is cpu):
        if dtype is None or data.dtype == _dt.as_dtype(dtype).numpy_dtype:
            return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(array) -> Tensor:
    """A CPU tensor sharing memory with the NumPy array ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    _dt.from_numpy_dtype(array.dtype)
    return _new_tensor(array, cpu)


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with any DLPack-capable array (NumPy, CuPy, PyTorch)."""
    dev_type, dev_id = ext.__dlpack_device__()
    if int(dev_type) == 1:  # kDLCPU
        return _new_tensor(np.from_dlpack(ext), cpu)
    dev = _device("cuda", int(dev_id))
    return _new_tensor(dev.backend.xp.from_dlpack(ext), dev)


def _filled(op, shape, value, dtype, device, requires_grad, default=None):
    shape = norm_shape(shape, op)
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: negative dimension in size {shape}")
    dt = _dt.as_dtype(dtype) if dtype is not None else (default or _dt.get_default_dtype())
    if value is not None and not isinstance(value, (int, float, complex)):
        value = _fill_value(op, value)
    dev = _dev(device)
    be = dev.backend
    with be.device_ctx():  # allocate on cuda:N, not on the current device
        if value == 0:
            arr = _allocate(op, shape, dt, lambda: be.zeros(shape, dtype=dt.numpy_dtype))
        elif value is None:
            arr = _allocate(op, shape, dt, lambda: be.empty(shape, dtype=dt.numpy_dtype))
        else:
            arr = _allocate(op, shape, dt, lambda: be.full(shape, value, dtype=dt.numpy_dtype))
    t = _new_tensor(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _fill_value(op, v):
    """A fill value: a Python number, a NumPy scalar or a one-element tensor (its item)."""
    if isinstance(v, Tensor) and v.numel() == 1:
        return v.item()
    if isinstance(v, np.generic) and v.dtype.kind in "biufc":
        return v.item()
    raise TypeError(f"{op}: fill_value must be a number, got {type(v).__name__} {_short(v)}")


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    """A tensor of zeros. ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    return _filled("zeros", size, 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return _filled("ones", size, 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """An uninitialised tensor (``memory_format=pylucid.channels_last``: laid out channels-last)."""
    fmt = _mf.check("empty", memory_format)
    if fmt is _mf.preserve_format and memory_format is not None:
        raise RuntimeError("empty: preserve memory format is unsupported here (there is no input to preserve)")
    return _in_format(_filled("empty", size, None, dtype, device, requires_grad), fmt, "empty")


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype follows the value's kind (``full((2,), 7)`` is int64)."""
    default = None
    if dtype is None:
        if isinstance(fill_value, bool):
            default = _dt.bool_
        elif isinstance(fill_value, int):
            default = _dt.int64
        elif isinstance(fill_value, complex):
            default = _dt.get_default_dtype().to_complex()
    if isinstance(size, int):
        size = (size,)
    if not isinstance(size, (tuple, list)) and not (isinstance(size, Tensor) and size.ndim == 1):
        raise TypeError(f"full: size must be a tuple of ints, got {type(size).__name__} {_short(size)}")
    return _filled("full", (tuple(size),), fill_value, dtype, device, requires_grad, default)


def _like(op, x, value, dtype, device, requires_grad, memory_format=None):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    out = _filled(op, (x.shape,), value, dtype if dtype is not None else x.dtype,
                  device if device is not None else x.device, requires_grad)
    fmt = _mf.check(op, memory_format)
    if fmt is _mf.preserve_format:  # PyTorch's default: a channels-last input gives a channels-last result
        fmt = _mf.format_of(x._data) if x.ndim in (4, 5) else _mf.contiguous_format
    return _in_format(out, fmt, op)


def _in_format(t, fmt, op):
    """``t`` (fresh, row-major) laid out in memory format ``fmt``: the same values, the format's strides."""
    if fmt is None or fmt is _mf.contiguous_format or fmt is _mf.preserve_format:
        return t
    order = _mf.axes_order(fmt, t.ndim, op)
    data = _mf.in_layout(t._data, order)
    out = _new_tensor(data, t._device)
    if t.requires_grad:
        out.requires_grad_()
    return out


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like("zeros_like", input, 0, dtype, device, requires_grad, memory_format)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like("ones_like", input, 1, dtype, device, requires_grad, memory_format)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like("empty_like", input, None, dtype, device, requires_grad, memory_format)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None) -> Tensor:
    return _like("full_like", input, fill_value, dtype, device, requires_grad, memory_format)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity matrix."""
    n = _int_arg("eye", "n", n)
    m = None if m is None else _int_arg("eye", "m", m)
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    dev = _dev(device)
    with dev.backend.device_ctx():
        t = _new_tensor(dev.backend.eye(n, m, dtype=dt.numpy_dtype), dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def arange(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values ``start, start+step, ...`` below ``end``; int64 when all bounds are ints.

    >>> import pylucid
    >>> pylucid.arange(5), pylucid.arange(0, 1, 0.25)
    (tensor([0, 1, 2, 3, 4]), tensor([0.0000, 0.2500, 0.5000, 0.7500]))
    """
    if end is None:
        start, end = 0, start
    vals = [_number("arange", n, v) for n, v in (("start", start), ("end", end), ("step", step))]
    for n, v in zip(("start", "end", "step"), vals):
        if not math.isfinite(v):
            raise ValueError(f"arange: unsupported range: {n}={v} must be finite")
    if dtype is None:
        dtype = _dt.int64 if all(isinstance(v, int) for v in vals) else _dt.get_default_dtype()
    dt = _dt.as_dtype(dtype)
    if dt.category in (_dt.INT, _dt.BOOL):
        # PyTorch computes an integer range in integers: the bounds and step are truncated first
        # (``arange(0., -8.000001, -4., dtype=int64)`` is ``[0, -4]``)
        vals = [int(v) for v in vals]
    start, end, step = vals
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"arange: upper bound and step sign are inconsistent (start={start}, end={end}, step={step})")
    dev = _dev(device)
    if dt.category in (_dt.INT, _dt.BOOL):
        arr = np.arange(start, end, step, dtype=np.int64).astype(dt.numpy_dtype)
    else:
        # compute in float64 like PyTorch, then cast
        n = int(np.ceil((end - start) / step))
        arr = (start + np.arange(n, dtype=np.float64) * step).astype(dt.numpy_dtype)
    t = _new_tensor(dev.backend.asarray(arr) if dev is not cpu else arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    steps = _int_arg("linspace", "steps", steps)
    start, end = _number("linspace", "start", start), _number("linspace", "end", end)
    if steps < 0:
        raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    dev = _dev(device)
    arr = np.linspace(start, end, steps, dtype=np.float64)
    if dt.category == _dt.INT:
        arr = np.trunc(arr)
    arr = arr.astype(dt.numpy_dtype)
    t = _new_tensor(dev.backend.asarray(arr) if dev is not cpu else arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None) -> Tensor:
    """``steps`` values ``base ** linspace(start, end, steps)``."""
    steps = _int_arg("logspace", "steps", steps)
    start, end = _number("logspace", "start", start), _number("logspace", "end", end)
    base = _number("logspace", "base", base)
    if steps < 0:
        raise ValueError(f"logspace: number of steps must be non-negative, got {steps}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    dev = _dev(device)
    if not (dt.is_floating_point or dt.is_complex or dt == _dt.bool_):
        start, end = int(start), int(end)  # an integer dtype truncates the exponent range first, as PyTorch
    arr = np.logspace(start, end, steps, base=base).astype(dt.numpy_dtype)
    return _new_tensor(dev.backend.asarray(arr) if dev is not cpu else arr, dev)


# ---------------------------------------------------------------- PyTorch's layout-explicit creation functions
def _declare(**kw):
    from .ops.registry import declare

    return declare(**kw)


@_declare(method=False)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """A 0-d tensor holding the real number ``s`` (``torch.scalar_tensor``): of the default float dtype unless
    ``dtype`` is given, also for an int or a bool (unlike :func:`tensor`).

    >>> import pylucid
    >>> pylucid.scalar_tensor(3), pylucid.scalar_tensor(3, dtype=pylucid.int64)
    (tensor(3.), tensor(3))
    """
    if isinstance(s, complex) or not isinstance(s, (int, float)) and not hasattr(s, "__float__"):
        raise TypeError(f"scalar_tensor: s must be a real number, got {type(s).__name__}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return tensor(s, dtype=dt, device=device, requires_grad=requires_grad)


def _int_tuple(op, name, value):
    """``value`` (an int or a sequence of ints) as a tuple of ints; a TypeError naming ``op`` otherwise."""
    seq = (value,) if isinstance(value, int) else value
    if not isinstance(seq, (tuple, list)) or not all(isinstance(v, int) for v in seq):
        raise TypeError(f"{op}: {name} must be a tuple of ints, got {value!r}")
    return tuple(int(v) for v in seq)


@_declare(method=False)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` (``torch.empty_strided``). pylucid tensors are row-major
    arrays, so ``stride`` is checked (one entry per dim) but does not change the layout.

    >>> import pylucid
    >>> pylucid.empty_strided((2, 3), (1, 2)).shape
    (2, 3)
    """
    size, stride = norm_shape((size,), "empty_strided"), _int_tuple("empty_strided", "stride", stride)
    if len(stride) != len(size):
        raise ValueError(f"empty_strided: {len(size)} sizes and {len(stride)} strides given; accepted: one stride "
                         "per dim")
    return _filled("empty_strided", (size,), None, dtype, device, requires_grad)


@_declare(method=False)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` (``torch.empty_permuted``). pylucid tensors are row-major
    arrays, so ``physical_layout`` is checked (a permutation of the dims) but does not change the layout.

    >>> import pylucid
    >>> pylucid.empty_permuted((2, 3, 4), (0, 2, 1)).shape
    (2, 3, 4)
    """
    size = norm_shape((size,), "empty_permuted")
    perm = _int_tuple("empty_permuted", "physical_layout", physical_layout)
    if sorted(perm) != list(range(len(size))):
        raise ValueError(f"empty_permuted: physical_layout {perm} is not a permutation of the {len(size)} dims")
    return _filled("empty_permuted", (size,), None, dtype, device, requires_grad)


@_declare(method="new_empty_strided", namespaces=())
def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                      pin_memory: bool = False) -> Tensor:
    """``empty_strided(size, stride)`` with this tensor's dtype and device unless given.

    >>> import pylucid
    >>> pylucid.ones(2, dtype=pylucid.float64).new_empty_strided((2, 3), (3, 1)).dtype
    pylucid.float64
    """
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device, requires_grad=requires_grad)
