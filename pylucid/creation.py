"""Creating tensors: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros``, ``arange``, ...

Dtype inference follows PyTorch: Python floats (and lists of them) become the
default float dtype (float32), Python ints int64, bools bool, complex numbers
complex64; NumPy arrays keep their dtype (a float64 array stays float64).
"""

from __future__ import annotations

import itertools
import math

from pylucid._interop import np

from . import _memory_format as _mf
from . import dtypes as _dt
from ._tensor import Tensor, _new_tensor
from .device import cpu
from .device import device as _device
from .errors import DtypeMismatch, LucidError, ScalarOverflow
from .ops._utils import norm_shape, norm_size


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


def _number(op, name, v, complex_ok: bool = False):
    """``v`` if it is a real number (a Python or NumPy number, a one-element tensor's item; with ``complex_ok`` a
    complex one too), else a TypeError."""
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"{op}: {name} must be a number or a one-element tensor, got shape {tuple(v.shape)}")
        v = v.item()
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (int, float, complex)) or (isinstance(v, complex) and not complex_ok):
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


# ---------------------------------------------------------------- Python numbers converted to a dtype
#: the largest finite value of each floating dtype (of its components, for complex), for the overflow check
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
              "float64": 1.7976931348623157e308, "complex64": 3.4028234663852886e38,
              "complex128": 1.7976931348623157e308}


def _overflow(op, value, np_dtype):
    return ScalarOverflow(f"{op}: value {value!r} cannot be converted to {np_dtype.name} without overflow")


def _py_number(v):
    """The Python number a NumPy scalar holds (``np.float32(2.5)`` -> 2.5), or None for anything else."""
    return v.item() if isinstance(v, np.generic) and v.dtype.kind in "biufc" else None


def _scalar_to(op, value, np_dtype):
    """The Python number ``value`` converted to NumPy dtype ``np_dtype`` as PyTorch converts a fill value
    (c10's checked conversion of a Scalar), ready for the backend's ``full``.

    - bool: any number; nonzero is True (NaN too).
    - integer dtypes: a float must lie in the dtype's range (NaN and infinities never do) and is truncated; an
      int too, except that an unsigned dtype also takes negative ints down to ``-max``, which wrap around
      (``-1`` is 255 for uint8; ``-1.0`` is refused).
    - floating dtypes: a finite value beyond the dtype's largest one is refused (``70000.0`` for float16),
      infinities and NaN pass; a float16/bfloat16 value is rounded to float32 first, as c10 does.
    - a complex number needs a complex dtype unless its imaginary part is 0; a complex dtype checks both parts.
    - an int outside ``[-2**63, 2**64)`` is an ``OverflowError`` (PyTorch's scalars hold no more).

    Out of range is a :class:`ScalarOverflow` naming ``op`` (a ``RuntimeError`` as PyTorch's "value cannot be
    converted to type ... without overflow", and a ``ValueError``).
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return bool(value) if np_dtype.kind == "b" else int(value)
    is_int, is_complex = isinstance(value, int), isinstance(value, complex)
    if is_int and not -(1 << 63) <= value < (1 << 64):
        raise OverflowError(f"{op}: int {value} is too large to convert; accepted: -2**63 <= value < 2**64")
    kind = np_dtype.kind
    if kind == "b":
        return bool(value)
    if is_complex and kind != "c":
        if value.imag != 0:
            raise _overflow(op, value, np_dtype)
        value, is_complex = value.real, False
    if kind in "iu":
        bits = 8 * np_dtype.itemsize
        hi = (1 << (bits - (kind == "i"))) - 1
        lo = -hi - 1 if kind == "i" else (-hi if is_int else 0)
        if not lo <= value <= hi:  # NaN fails both comparisons
            raise _overflow(op, value, np_dtype)
        v = int(value)
        return v % (1 << bits) if v < 0 and kind == "u" else v
    big = _FLOAT_MAX[np_dtype.name]
    for part in ((value.real, value.imag) if is_complex else (value,)):
        if abs(part) > big and part not in (math.inf, -math.inf):
            raise _overflow(op, value, np_dtype)
    if kind == "c":
        return complex(value)
    if np_dtype.itemsize == 2:  # c10 builds a float16/bfloat16 from a float32: the double is rounded twice
        return float(np.float32(value))
    return float(value)


# ---------------------------------------------------------------- linspace as PyTorch's kernels compute it
def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e = a + b`` exactly (Knuth)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def _round_odd(s, e):
    """``s + e`` (``s = fl(s + e)``, float64 arrays) rounded to odd: ``s`` where the sum is exact, else the one of
    ``s`` and its neighbour towards ``e`` whose last significand bit is 1. Rounding that once more to a format
    at least two bits narrower gives the correctly rounded sum (Boldo and Melquiond)."""
    even = (s.view(np.int64) & 1) == 0
    return np.where((e != 0) & even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _fma64(a, b, c):
    """``a * b + c`` rounded once (a fused multiply-add) for float64 arrays: Dekker's exact product, then the
    correctly rounded sum of its two parts and ``c`` (the odd-rounded tail keeps the sticky bit). Where a
    part overflows (``|a|`` or ``|b|`` near 1e300) it falls back to the unfused value."""
    p = a * b
    with np.errstate(all="ignore"):
        ca, cb = a * 134217729.0, b * 134217729.0  # 2**27 + 1: Veltkamp's split into 26-bit halves
        ah, bh = ca - (ca - a), cb - (cb - b)
        al, bl = a - ah, b - bh
        pl = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        uh, ul = _two_sum(c, pl)
        th, tl = _two_sum(p, uh)
        r = th + _round_odd(*_two_sum(tl, ul))
        return np.where(np.isfinite(r), r, p + c)


#: elements per block of the error-free transformations below: a dozen array operations each, kept in cache
_BLOCK = 1 << 15


def _linspace_real(s, e, n, np_dtype):
    """``n >= 2`` values from ``s`` to ``e`` (already of ``np_dtype``'s values) as PyTorch's CPU kernel: ``step =
    (e - s) / (n - 1)`` in the dtype, the first ``n // 2`` values ``s + step * i``, the rest
    ``e - step * (n - 1 - i)``. Its compiler contracts each into a fused multiply-add for float32/float64 and
    integers (whose step is a double, truncated at the end); float16/bfloat16 round every operation."""
    name = np_dtype.name
    if name in ("float16", "bfloat16"):
        def rnd(x):  # one float16/bfloat16 operation: computed in float32, rounded to the dtype
            return np.asarray(x, dtype=np.float32).astype(np_dtype).astype(np.float32)

        s, e = rnd(s), rnd(e)
        step = rnd(rnd(e - s) / rnd(np.float32(n - 1)))

        def value(a, k, c):  # the exact float32 product of two float16 values, rounded; then the sum, rounded
            return c + rnd(a * rnd(k.astype(np.float32)))
    elif name == "float32":
        s, e = np.float32(s), np.float32(e)
        step = float((e - s) / np.float32(n - 1))
        s, e = float(s), float(e)

        def value(a, k, c):  # the index becomes a float32; the product is exact in float64, the sum rounded
            return _round_odd(*_two_sum(a * k.astype(np.float32).astype(np.float64), c))  # to odd, then to float32
    else:
        s, e = float(s), float(e)
        step = (e - s) / float(n - 1)

        def value(a, k, c):
            return _fma64(a, k.astype(np.float64), c)
    out = np.empty(n, dtype=np_dtype)
    half = n // 2
    with np.errstate(all="ignore"):
        for lo in range(0, n, _BLOCK):
            hi = min(lo + _BLOCK, n)
            if lo < half:
                m = min(hi, half)
                out[lo:m] = _cast(value(step, np.arange(lo, m), s), np_dtype)
            if hi > half:
                m = max(lo, half)
                out[m:hi] = _cast(value(-step, np.arange(n - 1 - m, n - 1 - hi, -1), e), np_dtype)
    return out


def _cast(x, np_dtype):
    """``x`` in ``np_dtype``; an integer dtype truncates (the values lie between the converted bounds)."""
    return np.trunc(x).astype(np_dtype) if np_dtype.kind in "iu" else x.astype(np_dtype)


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


def _filled(op, shape, value, dtype, device, requires_grad, default=None, convert=False):
    shape = norm_size(shape, op)
    dt = _dt.as_dtype(dtype) if dtype is not None else (default or _dt.get_default_dtype())
    if value is not None and not isinstance(value, (int, float, complex)):
        value = _fill_value(op, value)
    if convert:  # a caller's fill value: PyTorch's overflow check and wrap-around (zeros/ones need neither)
        value = _scalar_to(op, value, dt.numpy_dtype)
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
    """A tensor filled with ``fill_value``; the dtype follows the value's kind (``full((2,), 7)`` is int64).

    The value is converted to the dtype as PyTorch converts a fill value: out of the dtype's range is a
    ``ScalarOverflow`` (a ``RuntimeError`` and a ``ValueError``), for an integer dtype NaN and infinities too,
    for float16 ``70000.0``; a negative int wraps around for uint8 (``-1`` is 255, ``-1.0`` is refused); bool
    takes any number.

    >>> import pylucid
    >>> pylucid.full((2,), -1, dtype=pylucid.uint8), pylucid.full((2,), 2.7, dtype=pylucid.int8)
    (tensor([255, 255], dtype=pylucid.uint8), tensor([2, 2], dtype=pylucid.int8))
    """
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
    return _filled("full", (tuple(size),), fill_value, dtype, device, requires_grad, default, convert=True)


def _like(op, x, value, dtype, device, requires_grad, memory_format=None, convert=False):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    out = _filled(op, (x.shape,), value, dtype if dtype is not None else x.dtype,
                  device if device is not None else x.device, requires_grad, convert=convert)
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
    return _like("full_like", input, fill_value, dtype, device, requires_grad, memory_format, convert=True)


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
    # the integer and single/double precision ranges of a GPU are made there by kernels (as PyTorch's): no host
    # array whose upload would queue behind the device's work (a position index built each forward) or become
    # a constant of a CUDA graph capture; the same arithmetic as on the host
    if dev is not cpu and (dt.category == _dt.INT or dt in (_dt.float32, _dt.float64)):
        be = dev.backend
        with be.device_ctx():
            arr = _range_values(be, dt, start, end, step)
    else:
        arr = _range_values(np, dt, start, end, step)
        if dev is not cpu:
            arr = dev.backend.asarray(arr)
    t = _new_tensor(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _range_values(xp, dt, start, end, step):
    """``arange``'s values as an array of ``xp`` (NumPy, or a backend): integer ranges in int64, then cast;
    float ranges as ``start + i * step`` in float64 (as PyTorch), then cast."""
    if dt.category in (_dt.INT, _dt.BOOL):
        return xp.arange(start, end, step, dtype=np.int64).astype(dt.numpy_dtype, copy=False)
    n = int(np.ceil((end - start) / step))
    return (start + xp.arange(n, dtype=np.float64) * step).astype(dt.numpy_dtype, copy=False)


def _range_dtype(op, start, end, dtype):
    """The result dtype of linspace/logspace: ``dtype``, else the default float dtype (its complex counterpart
    for a complex bound). A complex bound with a real ``dtype`` is refused, as PyTorch."""
    cplx = isinstance(start, complex) or isinstance(end, complex)
    if dtype is None:
        return _dt.get_default_dtype().to_complex() if cplx else _dt.get_default_dtype()
    dt = _dt.as_dtype(dtype)
    if cplx and not dt.is_complex:
        raise DtypeMismatch(f"{op}: a complex start or end can't be cast to dtype {dt.name}; accepted: a complex "
                            "dtype")
    if dt == _dt.bool_:
        raise DtypeMismatch(f"{op}: dtype bool is not supported; accepted: integer, floating and complex dtypes")
    return dt


def _host_to(arr, dev):
    return _new_tensor(dev.backend.asarray(arr) if dev is not cpu else arr, dev)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, bit for bit PyTorch's CPU values.

    ``step = (end - start) / (steps - 1)`` is computed in the result dtype (in float64 for an integer dtype,
    whose values are then truncated); the first ``steps // 2`` values are ``start + step * i``, the rest
    ``end - step * (steps - 1 - i)``, so both ends are exact. Each of these is one fused multiply-add for
    float32/float64 (as PyTorch's compiled kernel), while float16/bfloat16 round every operation. ``start`` and
    ``end`` are first converted to the dtype with the overflow check of :func:`full` (``-1`` wraps around for
    uint8); ``steps=1`` gives ``[start]``. Complex bounds give the default complex dtype and are spaced part
    by part; bool is refused.

    >>> import pylucid
    >>> pylucid.linspace(0, 1, 5), pylucid.linspace(-1, 5, 3, dtype=pylucid.uint8)
    (tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000]), tensor([255, 130,   5], dtype=pylucid.uint8))
    """
    steps = _int_arg("linspace", "steps", steps)
    start, end = _number("linspace", "start", start, True), _number("linspace", "end", end, True)
    if steps < 0:
        raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = _range_dtype("linspace", start, end, dtype)
    npd = dt.numpy_dtype
    if steps == 0:
        arr = np.empty(0, dtype=npd)
    elif steps == 1:
        arr = np.full(1, _scalar_to("linspace", start, npd), dtype=npd)
    else:
        s, e = _scalar_to("linspace", start, npd), _scalar_to("linspace", end, npd)
        with np.errstate(all="ignore"):
            if dt.is_complex:
                part = np.float32 if npd == np.complex64 else np.float64
                arr = (_linspace_real(s.real, e.real, steps, np.dtype(part))
                       + 1j * _linspace_real(s.imag, e.imag, steps, np.dtype(part))).astype(npd)
            else:
                arr = _linspace_real(s, e, steps, npd)
    t = _host_to(arr, _dev(device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None) -> Tensor:
    """``steps`` values ``base ** x`` for ``x`` running evenly from ``start`` to ``end``, as PyTorch's CPU kernel.

    ``start`` and ``end`` are first converted to the dtype (an integer dtype truncates them), the exponents are
    ``start + step * i`` / ``end - step * (steps - 1 - i)`` with a float64 ``step`` (fused multiply-adds), and
    ``base ** x`` is computed in float64 and rounded to the dtype (truncated for an integer dtype). Complex
    bounds give a complex result, computed in complex128 (not bit for bit PyTorch's complex ``pow``).

    >>> import pylucid
    >>> pylucid.logspace(0, 2, 3), pylucid.logspace(0, 3, 4, base=2, dtype=pylucid.int64)
    (tensor([  1.,  10., 100.]), tensor([1, 2, 4, 8]))
    """
    steps = _int_arg("logspace", "steps", steps)
    start, end = _number("logspace", "start", start, True), _number("logspace", "end", end, True)
    base = _number("logspace", "base", base)
    if steps < 0:
        raise ValueError(f"logspace: number of steps must be non-negative, got {steps}")
    dt = _range_dtype("logspace", start, end, dtype)
    npd = dt.numpy_dtype
    with np.errstate(all="ignore"):
        if steps == 0:
            arr = np.empty(0, dtype=npd)
        elif dt.is_complex:
            x = np.linspace(complex(start), complex(end), steps, dtype=np.complex128)
            arr = np.power(np.complex128(base), x).astype(npd)
        elif steps == 1:  # PyTorch fills with the float64 power of the unconverted start
            arr = np.full(1, _scalar_to("logspace", math.pow(float(base), float(start)), npd), dtype=npd)
        else:
            s, e = _scalar_to("logspace", start, npd), _scalar_to("logspace", end, npd)
            if npd.itemsize == 2 and npd.kind not in "iu":
                s, e = float(np.asarray(s, np.float32).astype(npd)), float(np.asarray(e, np.float32).astype(npd))
            elif npd == np.float32:
                s, e = float(np.float32(s)), float(np.float32(e))
            # the step is the bounds' difference in the dtype (an int for integer dtypes), divided in float64
            diff = e - s if npd.kind in "iu" else np.asarray(np.asarray(e, npd) - np.asarray(s, npd)).astype(np.float64)
            i = np.arange(steps)
            first = i < steps // 2
            step = float(diff) / (steps - 1)
            # not fused: PyTorch's logspace is not among the kernels it builds per instruction set
            x = np.where(first, float(s) + step * i, float(e) - step * (steps - 1 - i))
            # the C library's pow, as PyTorch calls it (NumPy's vectorised power differs in the last bit)
            y = np.fromiter(map(math.pow, itertools.repeat(float(base)), x.tolist()), np.float64, count=steps)
            if npd.kind in "iu":
                arr = np.trunc(y).astype(npd)
            elif npd.itemsize == 2:  # a double stored into float16/bfloat16 goes through float32
                arr = y.astype(np.float32).astype(npd)
            else:
                arr = y.astype(npd)
    return _host_to(arr, _dev(device))


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
