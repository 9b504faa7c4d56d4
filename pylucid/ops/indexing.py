"""Indexing: ``x[...]`` (ints, slices, ellipsis, None, bool masks, integer tensors),
``x[...] = v``, and ``where``."""

from __future__ import annotations

import numbers

from .. import dtypes as _dt
from .._state import state
from .._tensor import Tensor, _new_tensor
from ..errors import DeviceMismatch, DtypeMismatch, ScalarOverflow, ShapeMismatch
from ._op import Op, apply, check_inplace_leaf, commit_inplace, operand
from ._utils import check_tensor, norm_dim
from .registry import declare
from .schema import KEEP_INPUT, OpSchema


def _norm_index(x: Tensor, idx, op: str):
    """Turn a Python index into one the array library takes; returns (index, is_advanced)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    be = x._device.backend
    out = []
    advanced = False
    for it in idx:
        if isinstance(it, Tensor):
            if it._device is not x._device:
                it = _index_to_device(it, x, op)
            k = it._data.dtype.kind
            if k not in "biu":
                raise IndexError(f"{op}: tensors used as indices must be integer or bool tensors, got {it.dtype}")
            out.append(it._data if it._data.ndim or k == "b" else int(it.item()))
            advanced = advanced or bool(it._data.ndim) or k == "b"
        elif it is None or it is Ellipsis or isinstance(it, bool):
            out.append(it)
            advanced = advanced or isinstance(it, bool)
        elif isinstance(it, slice):
            def _i(v):
                return None if v is None else v.__index__()

            try:
                out.append(slice(_i(it.start), _i(it.stop), _i(it.step)))
            except AttributeError:
                raise TypeError(f"{op}: slice bounds must be integers or None, got {it!r}") from None
            if it.step is not None and _i(it.step) <= 0:
                raise ValueError(f"{op}: slice step must be positive, got {it.step} (use flip() to reverse)")
        elif isinstance(it, (list, tuple)):
            arr = be.asarray(it)
            if arr.dtype.kind not in "biu" and arr.size:
                raise IndexError(f"{op}: index lists must hold ints or bools, got {it!r}")
            out.append(arr.astype("int64") if arr.size == 0 else arr)
            advanced = True
        elif hasattr(it, "__index__"):
            out.append(it.__index__())
        elif hasattr(it, "dtype") and hasattr(it, "shape"):  # a NumPy/CuPy array
            out.append(be.asarray(it))
            advanced = True
        else:
            raise TypeError(
                f"{op}: unsupported index {it!r} of type {type(it).__name__}; accepted: int, slice, None, Ellipsis, "
                "bool, list and integer or bool Tensors"
            )
    return tuple(out), advanced


def _index_error(op, x, idx, exc):
    return IndexError(f"{op}: index {idx!r} is invalid for a tensor of shape {tuple(x.shape)}: {exc}")


class GetItem(Op):
    """``y = x[index]``; ``dx = zeros_like(x)`` with ``g`` added at ``index`` (repeats accumulate)."""

    schema = OpSchema("getitem", amp_policy=KEEP_INPUT, family="indexing")
    promote_args = ()

    @staticmethod
    def forward(be, x, index, advanced):
        return x[index]

    def backward(self, g):
        p = self.params
        return apply(GetItemBackward, (g,), {"index": p["index"], "advanced": p["advanced"], "shape": self.shapes[0]})

    def backward_fast(self, be, g):
        p = self.params
        return GetItemBackward.forward(be, g, p["index"], p["advanced"], self.shapes[0])


class GetItemBackward(Op):
    """Adjoint of ``getitem``: zeros of ``shape`` with ``g`` added at ``index``; its own gradient is ``gg[index]``."""

    schema = OpSchema("getitem_backward", amp_policy=KEEP_INPUT, family="indexing")
    promote_args = ()

    @staticmethod
    def forward(be, g, index, advanced, shape):
        z = be.zeros(shape, dtype=g.dtype)
        if advanced:
            be.scatter_add(z, index, g)
        else:
            z[index] = g
        return z

    def backward(self, gg):
        p = self.params
        return apply(GetItem, (gg,), {"index": p["index"], "advanced": p["advanced"]})


@declare(GetItem, method=False, dunders=("__getitem__",))
def getitem(input: Tensor, index) -> Tensor:
    """``input[index]`` with NumPy/PyTorch semantics (basic indexing gives a view).

    >>> import pylucid
    >>> x = pylucid.arange(12).reshape(3, 4)
    >>> x[1:, ::2]
    tensor([[ 4,  6],
            [ 8, 10]])
    >>> x[pylucid.tensor([0, 2]), -1]
    tensor([ 3, 11])
    """
    idx, advanced = _norm_index(input, index, "getitem")
    try:
        out = apply(GetItem, (input,), {"index": idx, "advanced": advanced})
    except IndexError as exc:
        raise _index_error("getitem", input, index, exc) from None
    if not advanced and out._data.base is not None:
        out._base = input._base if input._base is not None else input
        out._version = input._version
    return out


class IndexPut(Op):
    """``out = x`` with ``out[index] = v``; ``dx = g`` zeroed at ``index``, ``dv = sum_to_size(g[index], v.shape)``."""

    schema = OpSchema("index_put", amp_policy=KEEP_INPUT, family="indexing")
    promote_args = (0,)

    @staticmethod
    def forward(be, x, v, index, advanced):
        out = x.copy()
        out[index] = v
        return out

    def backward(self, g):
        from .elementwise import sum_to_size

        p = self.params
        ex, ev = self.next_edges
        gx = apply(IndexPut, (g, 0.0), p) if ex is not None else None
        gv = None
        if ev is not None:
            gv = apply(GetItem, (g,), {"index": p["index"], "advanced": p["advanced"]})
            gv = sum_to_size(gv, self.shapes[1])
        return gx, gv


def _put(input: Tensor, values, index) -> Tensor:
    """Out-of-place ``input[index] = values`` (differentiable in both); ``index`` is any ``x[...]`` index."""
    idx, advanced = _norm_index(input, index, "index_put")
    values = _as_value(input, values)
    try:
        return apply(IndexPut, (input, values), {"index": idx, "advanced": advanced})
    except (IndexError, ValueError) as exc:
        raise _index_error("index_put", input, index, exc) from None


def _as_value(x, v):
    if isinstance(v, Tensor):
        if v._device is not x._device:
            raise DeviceMismatch(f"setitem: value on {v._device} for a tensor on {x._device}")
        return v.to(x.dtype) if v.dtype is not x.dtype else v
    if isinstance(v, (bool, int, float, complex)):
        return v
    from ..creation import tensor

    return tensor(v, dtype=x.dtype, device=x._device)


def _index_put_accumulate(x, indices, values):
    """``index_put(..., accumulate=True)``: repeated positions add up (a getitem-backward of the values)."""
    idx, advanced = _norm_index(x, indices, "index_put")
    values = _as_value(x, values)
    if not isinstance(values, Tensor):
        from ..creation import full

        values = full(tuple(x[indices].shape), values, dtype=x.dtype, device=x._device)
    from .shape import broadcast_to

    values = broadcast_to(values, tuple(getitem(x, indices).shape))
    spread = apply(GetItemBackward, (values,), {"index": idx, "advanced": advanced, "shape": tuple(x.shape)})
    # index_put keeps its input's dtype under autocast (KeepInput), so the add does not promote
    amp, state.autocast = state.autocast, None
    try:
        return x + spread
    finally:
        state.autocast = amp


@declare(IndexPut, inplace=True)
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """``input`` with ``values`` written at ``indices`` (a tuple of index tensors, one per leading dim, as
    ``input[indices]``), or added there with ``accumulate=True`` (repeated positions add up; without it the
    last write wins). Differentiable in ``input`` and ``values``.

    >>> import pylucid
    >>> pylucid.zeros(3).index_put((pylucid.tensor([0, 0]),), pylucid.tensor([1., 2.]), accumulate=True)
    tensor([3., 0., 0.])
    """
    check_tensor(input, "index_put")
    check_tensor(values, "index_put", "values")
    if isinstance(indices, list):
        indices = tuple(indices)
    if not isinstance(indices, tuple) or not all(i is None or isinstance(i, Tensor) for i in indices):
        raise TypeError(f"index_put: indices must be a tuple of index tensors, got {type(indices).__name__}")
    if len(indices) > max(input.ndim, 1):
        raise IndexError(f"index_put: {len(indices)} index tensors for a {input.ndim}-D tensor")
    # None entries (PyTorch's "take the whole dim") are full slices
    indices = tuple(slice(None) if i is None else i for i in indices)
    if accumulate:
        return _index_put_accumulate(input, indices, values)
    return _put(input, values, indices)


def _setitem_scalar(value, np_dtype):
    """A number assigned by ``x[index] = value`` as PyTorch converts it: an int must fit in int64 (a
    ``ValueError``); it is checked against the range of ``x``'s dtype, except that a float16/bfloat16 tensor takes
    it as a float64 first (out of their range is then +-inf, as in PyTorch)."""
    if value.__class__ is int and not -(1 << 63) <= value < (1 << 63):
        raise ScalarOverflow(f"setitem: int {value} does not fit in int64; accepted: -2**63 <= value < 2**63")
    if np_dtype.itemsize == 2 and np_dtype.kind in "fV":
        np_dtype = _F64
    return _convert_scalar("setitem", value, np_dtype)


@declare(method=False, dunders=("__setitem__",))
def setitem(self: Tensor, index, value) -> None:
    """``self[index] = value`` in place (bumps the version; differentiable where PyTorch is)."""
    check_inplace_leaf(self, "setitem")
    if not isinstance(value, (Tensor, numbers.Number)):
        # as PyTorch: a list, tuple or array is not converted (tensor(value) says which dtype it takes)
        raise TypeError(f"setitem: can't assign a {type(value).__name__} to a Tensor; the value must be a Tensor "
                        "or a number")
    if not isinstance(value, Tensor):
        value = _setitem_scalar(value, self._data.dtype)
    value = _as_value(self, value)
    tracked = state.grad_enabled and (self._requires_grad or (isinstance(value, Tensor) and value._requires_grad))
    if tracked:
        commit_inplace(self, _put(self, value, index), "setitem")
        return
    idx, _ = _norm_index(self, index, "setitem")
    try:
        with self._device.backend.device_ctx():
            self._data[idx] = value._data if isinstance(value, Tensor) else value
    except (IndexError, ValueError) as exc:
        if "read-only" in str(exc):
            from ..errors import LucidError

            raise LucidError("setitem: cannot write into an expanded tensor; clone() it first") from None
        if "broadcast" in str(exc) or "shape" in str(exc):
            raise ShapeMismatch(f"setitem: value of shape {getattr(value, 'shape', ())} does not fit {index!r} "
                                f"of a tensor of shape {tuple(self.shape)}: {exc}") from None
        raise _index_error("setitem", self, index, exc) from None
    self._version[0] += 1


class Where(Op):
    """``y = cond ? a : b``; ``da = where(cond, g, 0)``, ``db = where(cond, 0, g)`` (summed to shape).

    The inactive branch gets an exact zero, so an inf/NaN in it does not leak
    into the gradient of the active one (as in PyTorch).
    """

    schema = OpSchema("where", amp_policy=KEEP_INPUT, saves_input=True, family="indexing")
    promote_args = (1, 2)

    @staticmethod
    def forward(be, cond, a, b):
        return be.where(cond, a, b)

    def backward(self, g):
        from .elementwise import sum_to_size

        cond = self.input(0)
        _, sa, sb = self.shapes
        _, ea, eb = self.next_edges
        return (None, sum_to_size(where(cond, g, 0.0), sa) if ea is not None else None,
                sum_to_size(where(cond, 0.0, g), sb) if eb is not None else None)


@declare(Where, method=False)
def where(condition: Tensor, input=None, other=None) -> Tensor:
    """Pick ``input`` where ``condition`` holds, else ``other`` (broadcasting; scalars allowed).

    >>> import pylucid
    >>> x = pylucid.tensor([-1.0, 2.0])
    >>> pylucid.where(x > 0, x, 0.0)
    tensor([0., 2.])
    """
    if input is None and other is None:
        from .. import ops as _ops

        return _ops.nonzero(condition, as_tuple=True)
    if not isinstance(condition, Tensor):
        raise TypeError(f"where: condition must be a bool Tensor, got {type(condition).__name__}")
    if condition._data.dtype != bool:
        if condition._data.dtype.kind == "u":
            condition = condition.to(_dt.bool_)
        else:
            raise TypeError(f"where: condition must be a bool tensor, got {condition.dtype}")
    if input.__class__ is int or other.__class__ is int:
        # a Python int next to an integer tensor takes its dtype: out of its range is PyTorch's overflow error
        for s, t in ((input, other), (other, input)):
            if s.__class__ is int and isinstance(t, Tensor) and t._data.dtype.kind in "iu":
                from .elementwise import _check_scalar_fits

                _check_scalar_fits("where", s, t._data.dtype)
    input = operand("where", input)
    other = operand("where", other)
    try:
        return apply(Where, (condition, input, other))
    except ValueError as exc:
        if "broadcast" in str(exc) or "shape" in str(exc):
            shapes = [tuple(getattr(t, "shape", ())) for t in (condition, input, other)]
            raise ShapeMismatch(f"where: shapes {shapes} cannot be broadcast together") from None
        raise


@declare(name="where", namespaces=())
def _where_method(self: Tensor, condition: Tensor, other) -> Tensor:
    """``Tensor.where(condition, other)``: ``where(condition, self, other)``.

    >>> import pylucid
    >>> x = pylucid.tensor([-1.0, 2.0])
    >>> x.where(x > 0, 0.0)
    tensor([0., 2.])
    """
    return where(condition, self, other)


# ---------------------------------------------------------------------------
# index_select / index_add / index_copy / index_fill
# ---------------------------------------------------------------------------

def _index_to_device(index: Tensor, x: Tensor, op: str) -> Tensor:
    """An index tensor on the CPU is copied to ``x``'s GPU (as PyTorch does for ``x[idx]``); any other
    device pair raises ``DeviceMismatch`` naming both (docs/semantics/cuda.md)."""
    if index._device.type == "cpu" and x._device.type == "cuda":
        return _new_tensor(x._device.backend.asarray(index._data), x._device)
    raise DeviceMismatch(f"{op}: index on {index._device} for a tensor on {x._device}")


def _index_tensor(x: Tensor, index, op: str, ndim: int | None = None) -> Tensor:
    """Validate an integer index tensor (device, dtype, rank)."""
    if not isinstance(index, Tensor):  # a list is refused, as in PyTorch (floats in it would be truncated)
        raise TypeError(f"{op}: index must be an integer Tensor, got {type(index).__name__}")
    if index._device is not x._device:
        index = _index_to_device(index, x, op)
    if index._data.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer tensor (int64), got {index.dtype}")
    if ndim is not None and index.ndim > ndim:
        raise ValueError(f"{op}: index must be at most {ndim}-D, got {index.ndim}-D")
    return index


def _check_bounds(index, n, op, dim, allow_negative=False):
    """PyTorch's index ops take indices in ``[0, n)`` (``take`` also ``[-n, 0)``).

    Inside a CUDA graph capture the indices cannot be read on the host (they exist only at replay), so the
    check is left out there, as PyTorch's device-side assert has no host error either (docs/semantics/cuda.md).
    """
    index_data = index._data
    if index_data.size and index._device.backend.can_sync():
        lo, hi = int(index_data.min()), int(index_data.max())
        low = -n if allow_negative else 0
        if lo < low or hi >= n:
            bad = lo if lo < low else hi
            raise IndexError(f"{op}: index {bad} is out of bounds for dim {dim} with size {n}")


def _zeros(shape, like: Tensor) -> Tensor:
    from ..creation import zeros

    return zeros(shape, dtype=like.dtype, device=like._device)


class IndexSelect(Op):
    """``y = x.take(index, dim)``; ``dx = index_add(zeros, dim, index, g)`` (repeats accumulate)."""

    schema = OpSchema("index_select", amp_policy=KEEP_INPUT, family="indexing")

    @staticmethod
    def forward(be, x, index, dim):
        return be.take(x, index, axis=dim)

    def backward(self, g):
        p = self.params
        return apply(IndexAdd, (_zeros(self.shapes[0], g), g), {"index": p["index"], "dim": p["dim"], "alpha": 1})


@declare(IndexSelect)
def index_select(input: Tensor, dim: int, index) -> Tensor:
    """The entries of ``input`` at ``index`` (1-D integer tensor) along ``dim`` (a copy).

    >>> import pylucid
    >>> pylucid.arange(6).reshape(2, 3).index_select(1, pylucid.tensor([2, 0]))
    tensor([[2, 0],
            [5, 3]])
    """
    check_tensor(input, "index_select")
    index = _index_tensor(input, index, "index_select", 1)
    nd = max(input.ndim, 1)
    d = norm_dim(dim, nd, "index_select")
    if input.ndim == 0:
        if index.numel() != 1:
            raise ShapeMismatch(f"index_select: the index into a 0-d tensor must hold exactly 1 value, got "
                                f"{index.numel()}")
        _check_bounds(index, 1, "index_select", d)
        # a 0-d input stays 0-d (PyTorch treats it as a 1-element 1-D tensor, then squeezes)
        return getitem(input.reshape(1), index.reshape(-1)).reshape(())
    _check_bounds(index, input.shape[d], "index_select", d)
    return apply(IndexSelect, (input,), {"index": index._data.reshape(-1), "dim": d})


class IndexAdd(Op):
    """``out = x`` with ``alpha * src`` added at ``index`` along ``dim`` (repeats accumulate);
    ``dx = g``, ``dsrc = alpha * index_select(g, dim, index)``."""

    schema = OpSchema("index_add", amp_policy=KEEP_INPUT, family="indexing")

    @staticmethod
    def forward(be, x, src, index, dim, alpha):
        out = x.copy()
        be.scatter_add(out, (slice(None),) * dim + (index,), src * alpha if alpha != 1 else src)
        return out

    def backward(self, g):
        p = self.params
        ex, es = self.next_edges
        gs = None
        if es is not None:
            gs = apply(IndexSelect, (g,), {"index": p["index"], "dim": p["dim"]})
            if p["alpha"] != 1:
                gs = gs * p["alpha"]
        return (g if ex is not None else None), gs


def _check_same_dtype(x, src, op):
    if isinstance(src, Tensor) and src.dtype is not x.dtype:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"{op}: self ({x.dtype}) and source ({src.dtype}) must have the same dtype")


def _check_index_src(input, dim, index, source, op):
    check_tensor(input, op)
    check_tensor(source, op, "source")
    index = _index_tensor(input, index, op, 1)
    _check_same_dtype(input, source, op)
    nd = max(input.ndim, 1)
    d = norm_dim(dim, nd, op)
    n = input.shape[d] if input.ndim else 1
    _check_bounds(index, n, op, d)
    want = input.shape[:d] + (index.numel(),) + input.shape[d + 1:] if input.ndim else (index.numel(),)
    if source.ndim and tuple(source.shape) != want or (not source.ndim and index.numel() != 1):
        raise ShapeMismatch(f"{op}: source of shape {tuple(source.shape)} does not match index of {index.numel()} "
                            f"entries along dim {d} of a tensor of shape {tuple(input.shape)} (expected {want})")
    return index, d


@declare(IndexAdd, inplace=True)
def index_add(input: Tensor, dim: int, index, source: Tensor, *, alpha=1) -> Tensor:
    """``input`` with ``alpha * source`` added at ``index`` along ``dim``; repeated indices accumulate. For an
    integer ``input`` a float ``alpha`` is truncated to an integer first, as PyTorch (``alpha=2.5`` adds twice).

    >>> import pylucid
    >>> pylucid.zeros(3).index_add(0, pylucid.tensor([0, 0, 2]), pylucid.tensor([1., 2., 3.]))
    tensor([3., 0., 3.])
    """
    index, d = _check_index_src(input, dim, index, source, "index_add")
    if isinstance(alpha, float) and input.dtype.category == _dt.INT:
        alpha = int(alpha)  # converted to the integer dtype first (truncated), as PyTorch's kernel does
    if input.ndim == 0:
        return index_add(input.reshape(1), 0, index, source.reshape(-1), alpha=alpha).reshape(())
    return apply(IndexAdd, (input, source), {"index": index._data.reshape(-1), "dim": d, "alpha": alpha})


@declare(inplace=True)
def index_copy(input: Tensor, dim: int, index, source: Tensor) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source`` (a composite of ``index_put``).

    >>> import pylucid
    >>> pylucid.zeros(3).index_copy(0, pylucid.tensor([2]), pylucid.tensor([5.]))
    tensor([0., 0., 5.])
    """
    index, d = _check_index_src(input, dim, index, source, "index_copy")
    if input.ndim == 0:
        return _put(input.reshape(1), source.reshape(-1), index.reshape(-1)).reshape(())
    return _put(input, source, (slice(None),) * d + (index.reshape(-1),))


@declare(inplace=True)
def index_fill(input: Tensor, dim: int, index, value) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or 0-d tensor).

    >>> import pylucid
    >>> pylucid.zeros(2, 2).index_fill(1, pylucid.tensor([1]), 7.0)
    tensor([[0., 7.],
            [0., 7.]])
    """
    check_tensor(input, "index_fill")
    index = _index_tensor(input, index, "index_fill", 1)
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"index_fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    d = norm_dim(dim, max(input.ndim, 1), "index_fill")
    if not isinstance(value, (Tensor, numbers.Number)):
        raise TypeError(f"index_fill: value must be a number or a 0-d Tensor, got {type(value).__name__}")
    if isinstance(value, complex) and input._data.dtype.kind != "c":
        # PyTorch's index_fill refuses any complex number for a real tensor, even one with no imaginary part
        raise DtypeMismatch(f"index_fill: a complex value ({value!r}) cannot fill a tensor of dtype "
                            f"{input.dtype.name}; accepted: a real number, or a complex tensor")
    value = _fill_value("index_fill", value, input)
    if input.ndim == 0:
        return index_fill(input.reshape(1), 0, index, value).reshape(())
    _check_bounds(index, input.shape[d], "index_fill", d)
    index = index.reshape(-1)
    if isinstance(value, Tensor) and value._requires_grad:
        # each filled position counts once in value's gradient, however often the index repeats it
        be = input._device.backend
        index = _new_tensor(be.unique(be.where(index._data < 0, index._data + input.shape[d], index._data)),
                            input._device)
    return _put(input, value, (slice(None),) * d + (index,))


# ---------------------------------------------------------------------------
# gather / scatter family
# ---------------------------------------------------------------------------

def _scatter_index(be, index, dim):
    """Full advanced index addressing ``out[i][j]..[index[i][j]..]..`` (dim ``dim`` replaced by ``index``)."""
    nd = index.ndim
    out = []
    for d in range(nd):
        if d == dim:
            out.append(index)
        else:
            shape = [1] * nd
            shape[d] = index.shape[d]
            out.append(be.arange(index.shape[d]).reshape(shape))
    return tuple(out)


def _crop(a, shape):
    """``a`` cut to ``shape`` (every dim at most as long as ``a``'s)."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, n) for n in shape)]


class Gather(Op):
    """``y[i][j] = x[i][index[i][j]]`` (along ``dim``); ``dx = scatter_add(zeros, dim, index, g)``."""

    schema = OpSchema("gather", amp_policy=KEEP_INPUT, family="indexing")

    @staticmethod
    def forward(be, x, index, dim):
        return x[_scatter_index(be, index, dim)]

    def backward(self, g):
        p = self.params
        return apply(ScatterAdd, (_zeros(self.shapes[0], g), g), {"index": p["index"], "dim": p["dim"]})


def _check_ordered(input, reduce, op):
    """``amax``/``amin`` need ordered values: complex inputs are refused (as by max/min)."""
    if reduce in ("amax", "amin") and input.dtype.is_complex:
        raise DtypeMismatch(f"{op}: reduce={reduce!r} needs ordered values; argument 'input' has dtype "
                            f"{input.dtype.name} (complex); {op} with {reduce!r} accepts float, int, bool tensors")


def _check_scatter_index(input, dim, index, op, src=None):
    check_tensor(input, op)
    index = _index_tensor(input, index, op)
    nd = max(input.ndim, 1)
    d = norm_dim(dim, nd, op)
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise ValueError(f"{op}: index tensor must have the same number of dimensions as the input "
                         f"({input.ndim}), got {index.ndim}")
    ishp = input.shape or (1,)
    xshp = index.shape or (1,)
    for k, (ni, nx) in enumerate(zip(xshp, ishp)):
        if k != d and ni > nx:
            raise ShapeMismatch(f"{op}: index of shape {tuple(index.shape)} is larger than the input of shape "
                                f"{tuple(input.shape)} in dim {k}")
    if src is not None and isinstance(src, Tensor):
        sshp = src.shape or (1,)
        if src.ndim and src.ndim != index.ndim or any(ni > ns for ni, ns in zip(xshp, sshp)):
            raise ShapeMismatch(f"{op}: index of shape {tuple(index.shape)} is larger than src of shape "
                                f"{tuple(src.shape)}")
    _check_bounds(index, ishp[d], op, d)
    return index, d


@declare(Gather)
def gather(input: Tensor, dim: int, index, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim == 1`` (index may be smaller than input).

    >>> import pylucid
    >>> pylucid.tensor([[1, 2], [3, 4]]).gather(1, pylucid.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    index, d = _check_scatter_index(input, dim, index, "gather")
    if input.ndim == 0:
        return gather(input.reshape(1), 0, index.reshape(-1)).reshape(index.shape)
    return apply(Gather, (input,), {"index": index._data, "dim": d})


class ScatterAdd(Op):
    """``out = x`` with ``src[i][j]`` added at ``out[i][index[i][j]]`` (repeats accumulate);
    ``dx = g``, ``dsrc = gather(g, dim, index)`` (zero where ``src`` is larger than ``index``)."""

    schema = OpSchema("scatter_add", amp_policy=KEEP_INPUT, family="indexing")

    @staticmethod
    def forward(be, x, src, index, dim):
        out = x.copy()
        be.scatter_add(out, _scatter_index(be, index, dim), _crop(src, index.shape))
        return out

    def backward(self, g):
        p = self.params
        ex, es = self.next_edges
        return (g if ex is not None else None), (_src_grad(apply(Gather, (g,), p), self.shapes[1]) if es else None)


def _src_grad(g_small: Tensor, src_shape) -> Tensor:
    """Zero-pad the gradient of the used part of ``src`` up to ``src``'s shape."""
    if tuple(g_small.shape) == tuple(src_shape):
        return g_small
    from .shape import pad

    widths = []
    for n_small, n in reversed(list(zip(g_small.shape, src_shape))):
        widths += [0, n - n_small]
    return pad(g_small, tuple(widths))


@declare(ScatterAdd, inplace=True)
def scatter_add(input: Tensor, dim: int, index, src: Tensor) -> Tensor:
    """``input`` with ``src`` added at the positions ``index`` names along ``dim`` (repeats accumulate).

    >>> import pylucid
    >>> pylucid.zeros(3).scatter_add(0, pylucid.tensor([0, 2, 0]), pylucid.tensor([1., 2., 3.]))
    tensor([4., 0., 2.])
    """
    check_tensor(src, "scatter_add", "src")
    index, d = _check_scatter_index(input, dim, index, "scatter_add", src)
    _check_same_dtype(input, src, "scatter_add")
    if input.ndim == 0:
        return scatter_add(input.reshape(1), 0, index.reshape(-1), src.reshape(-1)).reshape(())
    return apply(ScatterAdd, (input, src), {"index": index._data, "dim": d})


class Scatter(Op):
    """``out = x`` with ``out[i][index[i][j]] = src[i][j]`` (``src`` a tensor or a number);
    ``dx = g`` zeroed at the written positions, ``dsrc = gather(g, dim, index)``.

    With repeated indices the value written is the last one in NumPy's order (PyTorch leaves it unspecified).
    """

    schema = OpSchema("scatter", amp_policy=KEEP_INPUT, family="indexing")
    promote_args = (0,)

    @staticmethod
    def forward(be, x, src, index, dim):
        out = x.copy()
        out[_scatter_index(be, index, dim)] = _crop(src, index.shape) if getattr(src, "ndim", 0) else src
        return out

    def backward(self, g):
        p = self.params
        ex, es = self.next_edges
        gx = apply(Scatter, (g, 0.0), p) if ex is not None else None
        gs = _src_grad(apply(Gather, (g,), p), self.shapes[1]) if es is not None else None
        return gx, gs


_REDUCE_ALIASES = {"add": "sum", "multiply": "prod"}


@declare(Scatter, inplace=True)
def scatter(input: Tensor, dim: int, index, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """``input`` with ``src`` (a tensor, or ``value``) written at ``index`` along ``dim``.

    ``reduce='add'|'multiply'`` combines instead of overwriting (this routes to
    ``scatter_reduce(..., 'sum'|'prod', include_self=True)``).

    >>> import pylucid
    >>> pylucid.zeros(2, 3).scatter(1, pylucid.tensor([[2], [0]]), 1.0)
    tensor([[0., 0., 1.],
            [1., 0., 0.]])
    """
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: expected src (a Tensor) or value (a number)")
    if isinstance(src, Tensor) and src.ndim == 0 and getattr(index, "ndim", 0) > 0:
        src = src.item()  # PyTorch: a 0-d tensor src is a value
    index, d = _check_scatter_index(input, dim, index, "scatter", src)
    src = _fill_value("scatter", src, input)
    if reduce is not None:
        if reduce not in _REDUCE_ALIASES:
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
        if not isinstance(src, Tensor):
            from ..creation import full

            src = full(tuple(index.shape), src, dtype=input.dtype, device=input._device)
        return scatter_reduce(input, d, index, src, _REDUCE_ALIASES[reduce], include_self=True)
    if isinstance(src, Tensor):
        _check_same_dtype(input, src, "scatter")
    else:
        src = operand("scatter", src)
    if input.ndim == 0:
        s = src.reshape(-1) if isinstance(src, Tensor) else src
        return scatter(input.reshape(1), 0, index.reshape(-1), s).reshape(())
    return apply(Scatter, (input, src), {"index": index._data, "dim": d})


_SCATTER_PRIMITIVE = {"prod": "scatter_mul", "amax": "scatter_max", "amin": "scatter_min"}


def _reduce_identity(be, dtype, reduce):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f" or dtype.kind == "V" or str(dtype) == "bfloat16":
        return float("-inf") if reduce == "amax" else float("inf")
    info = be.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


class ScatterReduce(Op):
    """``out = x`` with ``src`` combined in at ``index`` along ``dim`` by ``sum|prod|mean|amax|amin``
    (``include_self`` decides whether ``x``'s values at written positions take part).

    The backward is PyTorch's ``scatter_reduce_backward``: ``amax/amin`` share
    the gradient equally between tied maxima (``x`` and ``src``), ``mean``
    divides by the count, ``prod`` uses the exclusive product, computed
    separately where ``x`` or ``src`` holds a zero, so zeros get exact gradients.
    """

    schema = OpSchema("scatter_reduce", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True,
                      family="indexing")

    @staticmethod
    def forward(be, x, src, index, dim, reduce, include_self):
        out = x.copy()
        full = _scatter_index(be, index, dim)
        src = _crop(src, index.shape)
        if not include_self:
            out[full] = _reduce_identity(be, out.dtype, reduce)
        if reduce in ("sum", "mean"):
            be.scatter_add(out, full, src)
        else:
            # backend primitives: NumPy's sequential ufunc.at on the CPU, repeat rounds on CUDA
            getattr(be, _SCATTER_PRIMITIVE[reduce])(out, full, src)
        if reduce == "mean":
            count = be.zeros(x.shape, dtype=out.dtype) + (1 if include_self else 0)
            be.scatter_add(count, full, be.ones(index.shape, dtype=out.dtype))
            count = be.where(count == 0, be.ones((), dtype=out.dtype), count)
            out = out // count if out.dtype.kind in "iu" else out / count
        return out

    def backward(self, g):
        from .elementwise import div, mul

        p = self.params
        dim, reduce, include_self = p["dim"], p["reduce"], p["include_self"]
        prm = {"index": p["index"], "dim": dim}
        x, src = self.input(0), self.input(1)
        ex, es = self.next_edges
        src_c = src if tuple(src.shape) == tuple(p["index"].shape) else getitem(
            src, tuple(slice(0, n) for n in p["index"].shape))
        if reduce == "sum":
            gx, gs = g, apply(Gather, (g,), prm)
        elif reduce == "mean":
            n = _zeros(tuple(g.shape), g) + (1.0 if include_self else 0.0)
            n = apply(ScatterAdd, (n, _zeros(tuple(p["index"].shape), g) + 1.0), prm)
            n = masked_fill(n, n == 0, 1.0)
            gx, gs = div(g, n), div(apply(Gather, (g,), prm), apply(Gather, (n,), prm))
        elif reduce in ("amax", "amin"):
            result = self.output()
            value = apply(Gather, (result,), prm)
            self_is = (x == result).to(g.dtype)
            src_is = (src_c == value).to(g.dtype)
            n = apply(ScatterAdd, (self_is, src_is), prm)
            share = div(g, n)
            gx = mul(self_is, share)
            gs = mul(src_is, apply(Gather, (share,), prm))
        else:  # prod
            result = self.output()
            masked_self = masked_fill(x, x == 0, 1.0)
            masked_self_result = scatter_reduce(masked_self, dim, _wrap_index(p, x), src, "prod",
                                                include_self=include_self)
            gx = div(mul(g, masked_self_result), masked_self)
            src_zero = src_c == 0
            n_zeros = apply(Gather, (apply(ScatterAdd, (_zeros(tuple(x.shape), g), src_zero.to(g.dtype)), prm),),
                            prm)
            single_zero = src_zero.logical_and(n_zeros == 1)
            masked_src = masked_fill(src_c, single_zero, 1.0)
            masked_src_result = scatter_reduce(x, dim, _wrap_index(p, x), masked_src, "prod",
                                               include_self=include_self)
            gs = where(single_zero, apply(Gather, (mul(g, masked_src_result),), prm),
                       div(apply(Gather, (mul(g, result),), prm), masked_fill(src_c, src_zero, 1.0)))
        if not include_self and ex is not None:
            gx = apply(Scatter, (gx, 0.0), prm)
        if es is not None:
            gs = _src_grad(gs, self.shapes[1])
        return (gx if ex is not None else None), (gs if es is not None else None)


def _wrap_index(p, like):
    return _new_tensor(p["index"], like._device)


@declare(ScatterReduce, inplace=True)
def scatter_reduce(input: Tensor, dim: int, index, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
    """``input`` with ``src`` reduced in at ``index`` along ``dim``: ``reduce`` is one of
    ``'sum' 'prod' 'mean' 'amax' 'amin'``; with ``include_self=False`` the written positions
    of ``input`` do not take part. Integer ``mean`` rounds down, as PyTorch.

    >>> import pylucid
    >>> x = pylucid.tensor([1., 2., 3.])
    >>> x.scatter_reduce(0, pylucid.tensor([0, 0]), pylucid.tensor([5., 7.]), "amax")
    tensor([7., 2., 3.])
    >>> x.scatter_reduce(0, pylucid.tensor([0, 0]), pylucid.tensor([5., 7.]), "mean", include_self=False)
    tensor([6., 2., 3.])
    """
    check_tensor(src, "scatter_reduce", "src")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ValueError(f"scatter_reduce: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', "
                         f"got {reduce!r}")
    index, d = _check_scatter_index(input, dim, index, "scatter_reduce", src)
    _check_same_dtype(input, src, "scatter_reduce")
    _check_ordered(input, reduce, "scatter_reduce")
    if input.ndim == 0:
        return scatter_reduce(input.reshape(1), 0, index.reshape(-1), src.reshape(-1), reduce,
                              include_self=include_self).reshape(())
    return apply(ScatterReduce, (input, src), {"index": index._data, "dim": d, "reduce": reduce,
                                               "include_self": bool(include_self)})


@declare()
def take(input: Tensor, index) -> Tensor:
    """``input`` flattened, read at ``index`` (any shape; the result has ``index``'s shape).

    >>> import pylucid
    >>> pylucid.tensor([[1, 2], [3, 4]]).take(pylucid.tensor([0, 3]))
    tensor([1, 4])
    """
    check_tensor(input, "take")
    index = _index_tensor(input, index, "take")
    _check_bounds(index, input.numel(), "take", 0, allow_negative=True)
    return getitem(input.reshape(-1), index) if index.ndim else getitem(input.reshape(-1), index.reshape(1))[0]


@declare()
def take_along_dim(input: Tensor, indices, dim: int | None = None) -> Tensor:
    """Gather along ``dim`` with ``indices`` broadcast against ``input`` (flattened when ``dim`` is None).

    >>> import pylucid
    >>> x = pylucid.tensor([[10, 30, 20]])
    >>> x.take_along_dim(pylucid.tensor([[0, 2, 1]]), dim=1)
    tensor([[10, 20, 30]])
    """
    from .shape import broadcast_shapes, broadcast_to

    check_tensor(input, "take_along_dim")
    indices = _index_tensor(input, indices, "take_along_dim")
    if dim is None:
        return gather(input.reshape(-1), 0, _wrap_negative(indices.reshape(-1), input.numel()))
    d = norm_dim(dim, max(input.ndim, 1), "take_along_dim")
    if input.ndim != indices.ndim:
        raise ValueError(f"take_along_dim: input ({input.ndim}-D) and indices ({indices.ndim}-D) must have the same "
                         "number of dimensions")
    xs, js = list(input.shape), list(indices.shape)
    xs[d] = js[d] = 1
    try:
        shp = broadcast_shapes(tuple(xs), tuple(js))
    except ShapeMismatch:
        raise ShapeMismatch(f"take_along_dim: input {tuple(input.shape)} and indices {tuple(indices.shape)} "
                            f"cannot be broadcast outside dim {d}") from None
    x = broadcast_to(input, shp[:d] + (input.shape[d],) + shp[d + 1:])
    j = broadcast_to(indices, shp[:d] + (indices.shape[d],) + shp[d + 1:])
    return gather(x, d, _wrap_negative(j, input.shape[d]))


def _wrap_negative(index: Tensor, n: int) -> Tensor:
    """``take_along_dim`` reads ``[-n, 0)`` from the end, as PyTorch does."""
    data = index._data
    if data.size and int(data.min()) < 0:
        if int(data.min()) < -n:
            raise IndexError(f"take_along_dim: index {int(data.min())} is out of bounds for a dim of size {n}")
        return _new_tensor(data + (data < 0) * n, index._device)
    return index


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------

def _check_mask(mask, op, x):
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}: mask must be a bool Tensor, got {type(mask).__name__}")
    if mask._data.dtype != bool:
        raise TypeError(f"{op}: mask must be a bool tensor, got {mask.dtype}")
    if mask._device is not x._device:
        raise DeviceMismatch(f"{op}: mask on {mask._device} for a tensor on {x._device}")


_F64 = _dt.float64.numpy_dtype
#: the largest float32; a Python float within it (or NaN, or an infinity) fits every dtype of kind "f" but the
#: 2-byte ones unchanged, which is the common case of a fill value and skips the full conversion
_F32_MAX = 3.4028234663852886e38


def _convert_scalar(op, value, np_dtype):
    """``creation._scalar_to(op, value, np_dtype)``, with the common cases answered here: a float into float32
    or float64 in range, an int into int64 in range (the same values ``_scalar_to`` gives)."""
    cls = value.__class__
    if cls is float:
        n = np_dtype.itemsize
        if np_dtype.kind == "f" and (n == 8 or n == 4 and -_F32_MAX <= value <= _F32_MAX):
            return value
    elif cls is int and np_dtype.kind == "i" and np_dtype.itemsize == 8 and -(1 << 63) <= value < (1 << 63):
        return value
    from ..creation import _scalar_to

    return _scalar_to(op, value, np_dtype)


def _fill_value(op, value, input):
    """A Python number converted to ``input``'s dtype as PyTorch converts a fill value (``creation._scalar_to``):
    out of the dtype's range is a :class:`ScalarOverflow` (NaN and infinities for an integer dtype, ``1e40`` for
    float32, a complex number with an imaginary part for a real dtype); a negative int wraps around for an
    unsigned dtype (``-1`` is 255). The result (an int for an integer dtype, a float for a floating one, a bool
    for bool) keeps ``input``'s dtype next to it in ``where``. A Tensor passes unchanged."""
    if isinstance(value, Tensor):
        return value
    if not isinstance(value, numbers.Number):
        if getattr(value, "shape", None) != () or not hasattr(value, "item"):  # a NumPy scalar (np.bool_) passes
            raise TypeError(f"{op}: value must be a number or a 0-d Tensor, got {type(value).__name__}")
        value = value.item()
    return _convert_scalar(op, value, input._data.dtype)


@declare(inplace=True)
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``input`` with ``value`` where ``mask`` is True (the two broadcast together; the in-place form needs the
    mask to broadcast to ``input``); the dtype stays ``input``'s.

    >>> import pylucid
    >>> x = pylucid.tensor([1., 2., 3.])
    >>> x.masked_fill(x > 1, 0.0)
    tensor([1., 0., 0.])
    """
    from .shape import broadcast_shapes

    check_tensor(input, "masked_fill")
    _check_mask(mask, "masked_fill", input)
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"masked_fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    try:
        broadcast_shapes(tuple(mask.shape), tuple(input.shape))
    except ShapeMismatch:
        raise ShapeMismatch(f"masked_fill: mask of shape {tuple(mask.shape)} and input of shape "
                            f"{tuple(input.shape)} cannot be broadcast together") from None
    if isinstance(value, Tensor):
        value = value.to(input.dtype)
    else:
        # converted to input's dtype first: a Python float next to an integer tensor would make ``where``
        # compute in float32 and round 2**24 + 1
        value = _fill_value("masked_fill", value, input)
    out = where(mask, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


@declare()
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The 1-D tensor of the elements of ``input`` where ``mask`` is True (both broadcast).

    >>> import pylucid
    >>> x = pylucid.tensor([[1, 2], [3, 4]])
    >>> x.masked_select(x > 2)
    tensor([3, 4])
    """
    from .shape import broadcast_tensors

    check_tensor(input, "masked_select")
    _check_mask(mask, "masked_select", input)
    x, m = broadcast_tensors(input, mask)
    return getitem(x, m)


@declare(inplace=True)
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the True positions of ``mask`` filled, in row-major order, from the first
    elements of ``source`` (which needs at least ``mask.sum()`` elements).

    >>> import pylucid
    >>> x = pylucid.zeros(4)
    >>> x.masked_scatter(pylucid.tensor([True, False, True, False]), pylucid.tensor([1., 2., 3.]))
    tensor([1., 0., 2., 0.])
    """
    from .shape import broadcast_tensors

    check_tensor(input, "masked_scatter")
    check_tensor(source, "masked_scatter", "source")
    _check_mask(mask, "masked_scatter", input)
    _check_same_dtype(input, source, "masked_scatter")
    try:
        input, m = broadcast_tensors(input, mask)
    except ShapeMismatch:
        raise ShapeMismatch(f"masked_scatter: mask of shape {tuple(mask.shape)} and input of shape "
                            f"{tuple(input.shape)} cannot be broadcast together") from None
    n = int(m._data.sum())
    if n > source.numel():
        raise ValueError(f"masked_scatter: mask has {n} True entries but source has only {source.numel()} elements")
    return _put(input, getitem(source.reshape(-1), slice(0, n)), m)


# ---------------------------------------------------------------------------
# nonzero / argwhere / one_hot (integer results, no gradient)
# ---------------------------------------------------------------------------

class Nonzero(Op):
    """The ``(n, ndim)`` int64 coordinates of the non-zero elements, in row-major order."""

    schema = OpSchema("nonzero", amp_policy=KEEP_INPUT, differentiable=False, family="indexing")
    promote_args = ()

    @staticmethod
    def forward(be, x):
        return be.argwhere(x).astype("int64")


@declare(Nonzero)
def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Coordinates of the non-zero elements: an ``(n, ndim)`` tensor, or with ``as_tuple`` one 1-D
    tensor per dim (``where(cond)`` with one argument is ``nonzero(cond, as_tuple=True)``).

    >>> import pylucid
    >>> pylucid.tensor([[0, 1], [2, 0]]).nonzero()
    tensor([[0, 1],
            [1, 0]])
    >>> pylucid.tensor([0, 3, 4]).nonzero(as_tuple=True)
    (tensor([1, 2]),)
    """
    check_tensor(input, "nonzero")
    out = apply(Nonzero, (input,))
    if not as_tuple:
        return out
    if input.ndim == 0:
        # PyTorch treats a 0-d input as 1-D here: index 0 once if the value is non-zero
        from ..creation import zeros

        return (zeros(out.shape[0], dtype=out.dtype, device=out.device),)
    return tuple(out[:, i] for i in range(input.ndim))


@declare()
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero(input)`` cut or padded with rows of ``fill_value`` to exactly ``size`` rows (a fixed shape).

    >>> import pylucid
    >>> pylucid.nonzero_static(pylucid.tensor([0, 1, 0, 2]), size=3)
    tensor([[ 1],
            [ 3],
            [-1]])
    """
    from ..creation import full
    from .shape import cat

    if not isinstance(size, int) or size < 0:
        raise ValueError(f"nonzero_static: size must be a non-negative int, got {size!r}")
    if fill_value is None or isinstance(fill_value, bool) or not hasattr(fill_value, "__index__"):
        # an int (or an integer 0-d tensor) even where no row is padded, as PyTorch
        raise TypeError(f"nonzero_static: fill_value must be an int, got {type(fill_value).__name__}")
    nz = nonzero(input)
    if nz.shape[0] >= size:
        return nz[:size]
    pad = full((size - nz.shape[0], nz.shape[1]), fill_value, dtype=nz.dtype, device=nz.device)
    return cat([nz, pad], 0)


@declare()
def argwhere(input: Tensor) -> Tensor:
    """Same as ``nonzero(input)``: an ``(n, ndim)`` int64 tensor of coordinates."""
    return nonzero(input)


class OneHot(Op):
    """``out[..., c] = (x[...] == c)`` as int64."""

    schema = OpSchema("one_hot", amp_policy=KEEP_INPUT, differentiable=False, family="indexing")
    promote_args = ()

    @staticmethod
    def forward(be, x, num_classes):
        return (x[..., None] == be.arange(num_classes)).astype("int64")


@declare(OneHot, method=False)
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encode integer class indices; ``num_classes=-1`` uses ``max + 1``.

    >>> import pylucid
    >>> pylucid.one_hot(pylucid.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    check_tensor(tensor, "one_hot", "tensor")
    if tensor._data.dtype.kind not in "iu":
        raise TypeError(f"one_hot: expects an integer (int64) index tensor, got {tensor.dtype}")
    data = tensor._data
    lo = int(data.min()) if data.size else 0
    hi = int(data.max()) if data.size else -1
    if lo < 0:
        raise ValueError(f"one_hot: class values must be non-negative, got {lo}")
    if num_classes == -1:
        if not data.size:
            raise ValueError("one_hot: can not infer the number of classes from an empty tensor")
        num_classes = hi + 1
    elif num_classes < 0 or hi >= num_classes:
        raise ValueError(f"one_hot: class values must be smaller than num_classes={num_classes}, got {hi}")
    return apply(OneHot, (tensor,), {"num_classes": int(num_classes)})


# ---------------------------------------------------------------------------
# index_reduce / put (composites of scatter_reduce and index_put)
# ---------------------------------------------------------------------------

@declare(inplace=True)
def index_reduce(input: Tensor, dim: int, index, source: Tensor, reduce: str, *, include_self: bool = True):
    """``input`` with the slices of ``source`` reduced into the slices at ``index`` along ``dim``:
    ``reduce`` is ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``; ``include_self=False`` leaves the old values
    of the indexed slices out of the reduction (slices no index names keep their values). Gradients as
    ``scatter_reduce``'s.

    >>> import pylucid
    >>> x = pylucid.ones(3)
    >>> x.index_reduce(0, pylucid.tensor([0, 0, 2]), pylucid.tensor([2., 3., 4.]), 'prod')
    tensor([6., 1., 4.])
    """
    from .shape import broadcast_to

    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce must be 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    index, d = _check_index_src(input, dim, index, source, "index_reduce")
    _check_ordered(input, reduce, "index_reduce")
    if input.ndim == 0:
        return index_reduce(input.reshape(1), 0, index, source.reshape(-1), reduce,
                            include_self=include_self).reshape(())
    shape = [1] * input.ndim
    shape[d] = index.numel()
    full_index = broadcast_to(index.reshape(shape), tuple(source.shape))
    return scatter_reduce(input, d, full_index, source, reduce, include_self=include_self)


@declare(inplace=True)
def put(input: Tensor, index, source: Tensor, accumulate: bool = False) -> Tensor:
    """``input`` with the elements of ``source`` written at the flat (row-major) positions ``index`` (negative
    ones count from the end), or added there with ``accumulate=True``; ``index`` and ``source`` have the same
    number of elements.

    >>> import pylucid
    >>> pylucid.zeros(2, 2).put(pylucid.tensor([0, 3]), pylucid.tensor([1., 2.]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    check_tensor(input, "put")
    check_tensor(source, "put", "source")
    index = _index_tensor(input, index, "put")
    _check_same_dtype(input, source, "put")
    if index.numel() != source.numel():
        raise ShapeMismatch(f"put: index ({index.numel()} elements) and source ({source.numel()} elements) must have "
                            "the same number of elements")
    _check_bounds(index, input.numel(), "put", 0, allow_negative=True)
    flat = input.reshape(-1)
    out = index_put(flat, (index.reshape(-1),), source.reshape(-1), accumulate)
    return out.reshape(input.shape)
