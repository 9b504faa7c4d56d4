"""Indexing: ``x[...]`` (ints, slices, ellipsis, None, bool masks, integer tensors),
``x[...] = v``, and ``where``."""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state
from .._tensor import Tensor, _new_tensor
from ..errors import DeviceMismatch, ShapeMismatch
from ._op import Op, apply, check_inplace_leaf, commit_inplace, operand
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
                raise DeviceMismatch(f"{op}: index tensor on {it._device} for a tensor on {x._device}")
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

    def backward_fast(self, be, g):
        p = self.params
        ex, ev = self.next_edges
        gx = gv = None
        if ex is not None:
            gx = g.copy()
            gx[p["index"]] = 0
        if ev is not None:
            gv = be.sum_to_shape(g[p["index"]], self.shapes[1])
        return gx, gv


def index_put(input: Tensor, values, index) -> Tensor:
    """Out-of-place ``input[index] = values`` (differentiable in both)."""
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


def setitem(self: Tensor, index, value) -> None:
    """``self[index] = value`` in place (bumps the version; differentiable where PyTorch is)."""
    check_inplace_leaf(self, "setitem")
    value = _as_value(self, value)
    tracked = state.grad_enabled and (self._requires_grad or (isinstance(value, Tensor) and value._requires_grad))
    if tracked:
        commit_inplace(self, index_put(self, value, index), "setitem")
        return
    idx, _ = _norm_index(self, index, "setitem")
    try:
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

    def backward_fast(self, be, g):
        cond = self.input(0)._data
        _, sa, sb = self.shapes
        _, ea, eb = self.next_edges
        z = be.zeros((), dtype=g.dtype)
        return (None, be.sum_to_shape(be.where(cond, g, z), sa) if ea is not None else None,
                be.sum_to_shape(be.where(cond, z, g), sb) if eb is not None else None)


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
    input = operand("where", input)
    other = operand("where", other)
    try:
        return apply(Where, (condition, input, other))
    except ValueError as exc:
        if "broadcast" in str(exc) or "shape" in str(exc):
            shapes = [tuple(getattr(t, "shape", ())) for t in (condition, input, other)]
            raise ShapeMismatch(f"where: shapes {shapes} cannot be broadcast together") from None
        raise


def _install():
    Tensor.__getitem__ = getitem
    Tensor.__setitem__ = setitem
    Tensor.where = lambda self, condition, other: where(condition, self, other)
    Tensor.index_put = lambda self, indices, values, accumulate=False: index_put(self, values, indices)


_install()
_ = _new_tensor
