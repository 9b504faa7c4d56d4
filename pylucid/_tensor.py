"""``Tensor``: an array on a device plus its autograd metadata.

The array lives in ``_data`` (a NumPy or CuPy array). Op methods (``x.sqrt()``,
``x + y``) are installed by the op modules next to their functions, so every
op is defined in exactly one place.
"""

from __future__ import annotations

from pylucid._interop import c_contiguous, np

from . import dtypes as _dt
from ._state import state
from .device import device as _device_cls

_FROM_NP = _dt._FROM_NP
_new = object.__new__
_engine_backward = [None]  # pylucid.autograd.engine.backward, imported on first use
#: Tensor and its subclasses (nn.Parameter): dispatch's fast type test is a set lookup
_TENSOR_TYPES: set = set()


def _new_tensor(data, dev, cls=None):
    """Wrap a backend array; the fast constructor every op output goes through."""
    t = _new(cls or Tensor)
    t._data = data
    t._device = dev
    t._requires_grad = False
    t.grad = None
    t.grad_fn = None
    t._output_nr = 0
    t._version = [0]
    t._base = None
    t._hooks = None
    t._retains_grad = False
    t._grad_acc = None
    return t


class Tensor:
    """A multi-dimensional array with autograd.

    Create tensors with :func:`pylucid.tensor`, :func:`pylucid.zeros`, ... .

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 4.0], requires_grad=True)
    >>> y = x.sqrt().sum()
    >>> y.backward()
    >>> x.grad
    tensor([0.5000, 0.2500])
    """

    __slots__ = ("_data", "_device", "_requires_grad", "grad", "grad_fn", "_output_nr", "_version", "_base",
                 "_hooks", "_retains_grad", "_grad_acc", "__weakref__")
    # NumPy must defer to our reflected operators (ndarray + Tensor -> Tensor.__radd__)
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __new__(cls, *args, **kwargs):
        # Tensor(data) behaves as pylucid.tensor(data) for convenience
        from .creation import tensor

        t = tensor(*args, **kwargs) if args else tensor([])
        if cls is not Tensor:
            t2 = _new_tensor(t._data, t._device, cls)
            t2._requires_grad = t._requires_grad
            return t2
        return t

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _TENSOR_TYPES.add(cls)

    # -- metadata ------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    @property
    def dtype(self) -> _dt.dtype:
        return _FROM_NP[self._data.dtype]

    @property
    def device(self):
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    # pylucid tensors are dense, strided, unquantized arrays on the CPU or a CUDA GPU, so every other
    # device or layout flag PyTorch has (is_xpu, is_mps, is_meta, is_sparse, is_quantized, ...) is False;
    # they are set on the class after its body, from _FLAGS_NEVER_TRUE

    def get_device(self) -> int:
        """The CUDA device index, or -1 for a CPU tensor."""
        return -1 if self._device.type == "cpu" else self._device.index

    def is_signed(self) -> bool:
        """True for signed integer, floating and complex dtypes."""
        return self.dtype.is_signed

    def is_neg(self) -> bool:
        """False: pylucid negates eagerly and has no lazy negation bit."""
        return False

    def is_pinned(self) -> bool:
        """False: pylucid does not allocate page-locked host memory for tensors."""
        return False

    def is_shared(self) -> bool:
        """False: pylucid tensors are not placed in shared memory."""
        return False

    def is_nonzero(self) -> bool:
        """``bool`` of a one-element tensor; more or fewer elements raise ``RuntimeError``."""
        if self._data.size != 1:
            raise RuntimeError(f"Tensor.is_nonzero: a tensor with {self._data.size} elements is ambiguous; it must "
                               "have exactly one")
        return bool(self.item())

    def is_same_size(self, other: "Tensor") -> bool:
        return tuple(self._data.shape) == tuple(other._data.shape)

    def is_set_to(self, tensor: "Tensor") -> bool:
        """True when both tensors view the same memory with the same shape and strides."""
        return (self.data_ptr() == tensor.data_ptr() and self._data.shape == tensor._data.shape
                and self._data.strides == tensor._data.strides and self._device is tensor._device
                and self._data.dtype == tensor._data.dtype)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def size(self, dim: int | None = None):
        if dim is None:
            return self._data.shape
        return self._data.shape[_norm_dim(dim, self._data.ndim, "size")]

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def stride(self, dim: int | None = None):
        st = tuple(s // self._data.dtype.itemsize for s in self._data.strides)
        return st if dim is None else st[_norm_dim(dim, self._data.ndim, "stride")]

    def is_contiguous(self, memory_format=None) -> bool:
        """Row-major packed (``memory_format=pylucid.channels_last``/``channels_last_3d``: packed in that
        layout; see :mod:`pylucid._memory_format`)."""
        if memory_format is None:
            return c_contiguous(self._data)
        from . import _memory_format as mf

        fmt = mf.check("is_contiguous", memory_format)
        if fmt is mf.preserve_format:
            raise RuntimeError("is_contiguous: preserve memory format is unsupported by the contiguous operator")
        if fmt.ndim is not None and self._data.ndim != fmt.ndim:
            return False
        return mf.is_dense_in(self._data, mf.axes_order(fmt, self._data.ndim, "is_contiguous"))

    def data_ptr(self) -> int:
        d = self._data
        return d.ctypes.data if isinstance(d, np.ndarray) else d.data.ptr

    @property
    def version(self) -> int:
        """How many times this tensor (or a view of its storage) was modified in place."""
        return self._version[0]

    # -- autograd ------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "requires_grad_: you can only change requires_grad of leaf tensors; this tensor was produced by "
                    f"{self.grad_fn.name()}. Use .detach() to get a tensor that does not require grad."
                )
            return self
        if requires_grad and _FROM_NP[self._data.dtype].category < _dt.FLOAT:
            raise RuntimeError(
                f"requires_grad_: only floating point and complex tensors can require gradients, got {self.dtype}"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's storage, detached from the graph."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data: expected a Tensor, got {type(value).__name__}")
        self._data = value._data
        self._device = value._device

    def detach(self) -> "Tensor":
        """A new tensor sharing storage and version counter, outside the graph."""
        t = _new_tensor(self._data, self._device, type(self) if type(self) is Tensor else Tensor)
        t._version = self._version
        t._base = self._base if self._base is not None else self
        return t

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` on a non-leaf tensor after backward."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("retain_grad: can't retain_grad on a tensor that does not require grad")
            return
        if self._retains_grad:
            return
        import weakref

        ref = weakref.ref(self)

        def _retain(grad):
            t = ref()
            if t is not None:
                g = grad.detach() if t.grad is None or not state.grad_enabled else grad
                if t.grad is None:
                    t.grad = _new_tensor(g._data.copy(), g._device) if not state.grad_enabled else g
                else:
                    from .ops.elementwise import add

                    t.grad = add(t.grad, g)
            return None

        self.grad_fn._add_pre_hook(self._output_nr, _retain)
        self._retains_grad = True

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor | None``, run when this tensor's gradient is computed.

        A returned tensor replaces the gradient that flows on (and, for a leaf,
        the one accumulated into ``.grad``). Returns a handle with ``remove()``.
        """
        if not self._requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._add_pre_hook(self._output_nr, hook)
        from .autograd.graph import RemovableHandle, _hook_ids

        if self._hooks is None:
            self._hooks = {}
        key = next(_hook_ids)
        self._hooks[key] = hook
        return RemovableHandle(self._hooks, key)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Accumulate the gradient of this tensor into the ``.grad`` of the leaves.

        ``gradient`` is required unless the tensor holds one element.
        """
        run = _engine_backward[0]
        if run is None:  # imported on first use (the engine imports this module); cached: a function-level
            from .autograd.engine import backward as run  # import costs more than the rest of this call

            _engine_backward[0] = run
        run((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs)

    # -- conversion ------------------------------------------------------------
    def numpy(self, *, force: bool = False):
        if self._device.type != "cpu":
            if not force:
                raise TypeError(
                    f"Tensor.numpy: can't convert a {self._device} tensor to NumPy; copy it to host memory first "
                    "with .cpu() (or pass force=True)"
                )
            return self._device.backend.to_numpy(self._data, "Tensor.numpy")
        if self._requires_grad and state.grad_enabled:
            raise RuntimeError(
                "Tensor.numpy: can't call numpy() on a tensor that requires grad; use tensor.detach().numpy()"
            )
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = np.asarray(self._device.backend.to_numpy(self._data))
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"Tensor.item: a tensor with {self._data.size} elements cannot be converted to a Python scalar"
            )
        v = self._device.backend.to_numpy(self._data, "Tensor.item").reshape(()).item()
        if type(v) not in (bool, int, float, complex):  # bfloat16 scalars
            v = float(v)
        return v

    def tolist(self):
        arr = self._device.backend.to_numpy(self._data, "Tensor.tolist")
        if arr.dtype == _dt.bfloat16.numpy_dtype or arr.dtype == np.float16:
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if _FROM_NP[self._data.dtype].category > _dt.INT or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of a tensor with {self._data.size} elements is ambiguous; use .any() or .all()"
            )
        return bool(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __reduce_ex__(self, protocol):
        # Tensors pickle as (numpy array, dtype name, device string, requires_grad);
        # used by DataLoader workers. pylucid.save never uses pickle.
        arr = np.ascontiguousarray(self._device.backend.to_numpy(self._data))
        # (ascontiguousarray makes a 0-d array 1-d: the shape is put back)
        return (_rebuild, (arr.reshape(self._data.shape), str(self._device), self._requires_grad))

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def to(self, *args, **kwargs) -> "Tensor":
        """Convert device and/or dtype; differentiable. PyTorch's three forms::

            to(dtype, non_blocking=False, copy=False)
            to(device=None, dtype=None, non_blocking=False, copy=False)
            to(other, non_blocking=False, copy=False)     # other's device and dtype

        ``memory_format=`` (``pylucid.channels_last``, ``contiguous_format``, ...) lays the result out in that
        format (``preserve_format``, the default, keeps the layout).

        Returns ``self`` when nothing changes, unless ``copy=True``. ``non_blocking`` is accepted;
        copies between host and GPU complete before ``to`` returns.

        >>> import pylucid
        >>> x = pylucid.tensor([1, 2])
        >>> y = x.to("cpu", pylucid.float64, False, True)
        >>> y.dtype, y is x, x.to(pylucid.int64) is x
        (pylucid.float64, False, True)
        """
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        non_blocking = kwargs.pop("non_blocking", False)
        copy = kwargs.pop("copy", False)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"Tensor.to: unexpected keyword arguments {sorted(kwargs)}")
        if args:
            first, rest = args[0], args[1:]
            if isinstance(first, Tensor):
                dev, dtype = first._device, first.dtype
                form = "to(other, non_blocking, copy)"
            elif _is_dtype_like(first):
                dtype = first
                form = "to(dtype, non_blocking, copy)"
            elif first is None or isinstance(first, (str, _device_cls)) or (
                    isinstance(first, int) and not isinstance(first, bool)):
                dev = first
                form = "to(device, dtype, non_blocking, copy)"
                if rest:
                    if rest[0] is not None and not _is_dtype_like(rest[0]):
                        raise TypeError(f"Tensor.to: expected a dtype after the device, got {rest[0]!r}")
                    dtype = rest[0] if rest[0] is not None else dtype
                    rest = rest[1:]
            else:
                raise TypeError(f"Tensor.to: expected a device, a dtype or a Tensor, got {type(first).__name__}")
            if len(rest) > 2:
                raise TypeError(f"Tensor.to: too many positional arguments for {form}: {len(args)}")
            if rest:
                non_blocking = rest[0]
            if len(rest) > 1:
                copy = rest[1]
        for name, flag in (("non_blocking", non_blocking), ("copy", copy)):
            if not isinstance(flag, bool):
                raise TypeError(f"Tensor.to: {name} must be a bool, got {flag!r}")
        from .ops.conversion import cast, to_device

        t = self
        if dev is not None:
            dev = _device_cls(dev)
            if dev is not t._device:
                t = to_device(t, dev)
        if dtype is not None:
            dtype = _dt.as_dtype(dtype)
            if dtype.numpy_dtype != t._data.dtype:
                t = cast(t, dtype)
        if memory_format is not None:
            from . import _memory_format as mf

            if mf.check("Tensor.to", memory_format) is not mf.preserve_format:
                t = t.contiguous(memory_format=memory_format)
        if copy and t is self:
            t = self.clone()
        return t

    # -- new tensors like this one -------------------------------------------------
    def _new_kwargs(self, dtype, device) -> dict:
        return {"dtype": self.dtype if dtype is None else dtype, "device": self._device if device is None else device}

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """A tensor of zeros of ``size`` with this tensor's dtype and device (unless given).

        >>> import pylucid
        >>> pylucid.tensor([1.5], dtype=pylucid.float64).new_zeros(2, 3).dtype
        pylucid.float64
        """
        from .creation import zeros

        return zeros(*size, requires_grad=requires_grad, **self._new_kwargs(dtype, device))

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """A tensor of ones of ``size`` with this tensor's dtype and device (unless given)."""
        from .creation import ones

        return ones(*size, requires_grad=requires_grad, **self._new_kwargs(dtype, device))

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """An uninitialised tensor of ``size`` with this tensor's dtype and device (unless given)."""
        from .creation import empty

        return empty(*size, requires_grad=requires_grad, **self._new_kwargs(dtype, device))

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """A tensor of ``size`` filled with ``fill_value``, with this tensor's dtype and device (unless given).

        >>> import pylucid
        >>> pylucid.zeros(1).new_full((2,), 7).tolist()
        [7.0, 7.0]
        """
        from .creation import full

        return full(size, fill_value, requires_grad=requires_grad, **self._new_kwargs(dtype, device))

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        """A new tensor holding a copy of ``data``, with this tensor's dtype and device (unless given).

        As in PyTorch the dtype is this tensor's, not inferred from ``data``; a tensor ``data`` is
        copied (detached), with a ``UserWarning`` recommending ``data.detach().clone()``.

        >>> import pylucid
        >>> pylucid.zeros(1).new_tensor([1, 2]).dtype
        pylucid.float32
        """
        from .creation import tensor

        kw = self._new_kwargs(dtype, device)
        if isinstance(data, Tensor):
            import warnings

            warnings.warn(
                "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                "sourceTensor.detach().clone().requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
                UserWarning, stacklevel=2)
            out = data.detach().to(kw["device"], kw["dtype"], copy=True)
            return out.requires_grad_(requires_grad) if requires_grad else out
        return tensor(data, requires_grad=requires_grad, **kw)

    def type(self, dtype=None):
        if dtype is None:
            return f"pylucid.{self.dtype.name.capitalize()}Tensor"
        return self.to(dtype)

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None) -> "Tensor":
        return self.to(_device_cls("cuda" if device is None else device))

    def float(self, memory_format=None) -> "Tensor":
        return self.to(_dt.float32)

    def double(self, memory_format=None) -> "Tensor":
        return self.to(_dt.float64)

    def half(self, memory_format=None) -> "Tensor":
        return self.to(_dt.float16)

    def bfloat16(self, memory_format=None) -> "Tensor":
        return self.to(_dt.bfloat16)

    def long(self, memory_format=None) -> "Tensor":
        return self.to(_dt.int64)

    def int(self, memory_format=None) -> "Tensor":
        return self.to(_dt.int32)

    def short(self, memory_format=None) -> "Tensor":
        return self.to(_dt.int16)

    def char(self, memory_format=None) -> "Tensor":
        return self.to(_dt.int8)

    def byte(self, memory_format=None) -> "Tensor":
        return self.to(_dt.uint8)

    def bool(self, memory_format=None) -> "Tensor":
        return self.to(_dt.bool_)

    def cfloat(self, memory_format=None) -> "Tensor":
        return self.to(_dt.complex64)

    def cdouble(self, memory_format=None) -> "Tensor":
        return self.to(_dt.complex128)

    # -- printing ----------------------------------------------------------------
    def __repr__(self) -> str:
        arr = self._device.backend.to_numpy(self._data, "Tensor.__repr__ (printing)")
        dt = _FROM_NP[arr.dtype]
        if dt in (_dt.bfloat16, _dt.float16):
            arr = arr.astype(np.float32)
        opts = {}
        if dt.category == _dt.FLOAT:
            fin = arr[np.isfinite(arr)]
            if fin.size and np.all(fin == np.round(fin)) and np.all(np.abs(fin) < 1e8):
                # whole numbers print as "1." like PyTorch, right-aligned to a common width
                width = max(len(f"{v:.0f}.") for v in fin.reshape(-1).tolist())  # finite values set the width
                opts = dict(formatter={"float_kind": lambda v: (f"{v:.0f}." if np.isfinite(v) else str(v)).rjust(
                    width)})
            else:
                opts = dict(precision=4, floatmode="fixed", suppress_small=True)
        body = np.array2string(arr, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3, **opts)
        if arr.ndim == 0 and dt.category == _dt.FLOAT:
            v = arr.item()
            body = (f"{v:.0f}." if v == round(v) and abs(v) < 1e8 else f"{v:.4f}") if np.isfinite(v) else str(v)
        if dt is _dt.bool_ and arr.size and arr.all():
            body = body.replace("[ True", "[True").replace("  True", " True")  # PyTorch pads only beside False
        extras = []
        if self._device.type != "cpu":
            extras.append(f"device='{self._device}'")
        if dt not in (_dt.float32, _dt.int64, _dt.bool_, _dt.complex64) or arr.size == 0:
            extras.append(f"dtype={dt!r}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)


def _rebuild(arr, dev, requires_grad):
    t = _new_tensor(arr, _device_cls("cpu"))
    if dev != "cpu":
        t = t.to(dev)
    t._requires_grad = requires_grad
    return t


def _is_dtype_like(a) -> bool:
    """A pylucid dtype, a dtype name (``"float64"``, ``"torch.int8"``), a NumPy dtype or a Python type."""
    if isinstance(a, (_dt.dtype, type, np.dtype)):
        return True
    return isinstance(a, str) and a.removeprefix("torch.").removeprefix("pylucid.") in _dt._BY_NAME


def _norm_dim(dim, ndim: int, op: str) -> int:
    """Normalise a possibly negative dim, raising IndexError naming ``op`` if out of range."""
    try:
        d = dim.__index__()
    except AttributeError:
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}") from None
    n = ndim if ndim > 0 else 1
    if d < -n or d >= n:
        raise IndexError(f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return d + n if d < 0 else d


_TENSOR_TYPES.add(Tensor)


#: device and layout flags of PyTorch's Tensor that no pylucid tensor has
_FLAGS_NEVER_TRUE = ("is_xpu is_mps is_meta is_ipu is_mtia is_maia is_xla is_vulkan is_sparse is_sparse_csr "
                     "is_quantized is_mkldnn is_nested").split()
for _flag in _FLAGS_NEVER_TRUE:
    setattr(Tensor, _flag, property(lambda self: False,
                                    doc=f"False: pylucid tensors are dense CPU or CUDA arrays ({_flag} never holds)."))
del _flag
