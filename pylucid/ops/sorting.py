"""Sorting and selection: ``sort argsort msort topk kthvalue unique unique_consecutive searchsorted bucketize``.

Every value-selecting op (``sort``, ``topk``, ``kthvalue``, and ``median``,
``mode``, ``cummax``, ``max_with_indices`` ... in the reduction and scan
modules) returns ``(values, indices)`` and shares one backward: the gradient
of the values is scattered back (summed, so repeated indices accumulate) to
the positions the indices name. That scatter is the registered op
``select_along_dim_backward``; its own backward is the gather
``select_along_dim``, so both are linear in the gradient and any order of
derivative works (graph mode).
"""

from __future__ import annotations

from collections import namedtuple

from .._tensor import Tensor, _new_tensor
from ..errors import ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor, is_float_dtype, norm_dim
from .registry import declare
from .schema import KEEP_INPUT, OpSchema

#: the ``(values, indices)`` pair returned by every value-selecting op (PyTorch's ``torch.return_types``)
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def scalar_selection(be, x):
    """``(values, indices)`` of a value-selecting op on a 0-d input: the value itself at index 0."""
    return x.copy(), be.zeros((), dtype="int64")


def select_at(be, x, idx, dim, keepdim):
    """``(values, indices)``: ``x`` gathered at the int64 ``idx`` (one position along ``dim``), squeezed
    unless ``keepdim``."""
    v = be.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        return be.squeeze(v, axis=dim), be.squeeze(idx, axis=dim)
    return v, idx


# ----------------------------------------------------------- gather / scatter along one dim
def _index_tuple(be, idx, axis):
    """The advanced index that addresses ``x[..., idx, ...]`` along ``axis`` (arange grids elsewhere)."""
    nd = idx.ndim
    out = []
    for i, n in enumerate(idx.shape):
        if i == axis:
            out.append(idx)
        else:
            shape = [1] * nd
            shape[i] = n
            out.append(be.arange(n).reshape(shape))
    return tuple(out)


def scatter_along_array(be, g, idx, axis, shape):
    """Raw-array scatter-add: a zero array of ``shape`` with ``g`` summed in at ``idx`` along ``axis``."""
    if len(shape) == 0:
        return g.reshape(())
    out = be.zeros(shape, dtype=g.dtype)
    if g.size:
        be.scatter_add(out, _index_tuple(be, idx, axis), g)
    return out


class SelectAlongDim(Op):
    """``y = take_along_dim(x, idx, dim)`` (internal gather); ``dx = scatter_add(g, idx)``."""

    schema = OpSchema("select_along_dim", amp_policy=KEEP_INPUT, family="sorting")
    promote_args = (0,)

    @staticmethod
    def forward(be, x, idx, dim):
        if x.ndim == 0:
            return x.copy()
        return be.take_along_axis(x, idx, axis=dim)

    def save_extra(self, arrays, out):
        self.extra = arrays[1]

    def backward(self, g):
        idx = _new_tensor(self.extra, self.device)
        return select_along_dim_backward(g, idx, self.params["dim"], self.shapes[0]), None

    def release(self) -> None:
        super().release()
        self.extra = None


class SelectAlongDimBackward(Op):
    """``y = zeros(shape).scatter_add(dim, idx, g)`` (internal); ``dg = take_along_dim(gy, idx, dim)``."""

    schema = OpSchema("select_along_dim_backward", amp_policy=KEEP_INPUT, family="sorting")
    promote_args = (0,)

    @staticmethod
    def forward(be, g, idx, dim, shape):
        return scatter_along_array(be, g, idx, dim, shape)

    def save_extra(self, arrays, out):
        self.extra = arrays[1]

    def backward(self, gg):
        idx = _new_tensor(self.extra, self.device)
        return select_along_dim(gg, idx, self.params["dim"]), None

    def release(self) -> None:
        super().release()
        self.extra = None


def _check_along(name, x, idx, dim, shape, gather):
    """Both tensors, the same number of dims, and sizes PyTorch accepts: a gather (``take_along_dim``) broadcasts
    ``x`` and ``idx`` outside ``dim``; a scatter needs ``idx`` no larger than ``x`` (the source) and ``shape``."""
    check_tensor(x, name, "input")
    check_tensor(idx, name, "indices")
    if idx._data.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be an integer tensor, got {idx.dtype.name}")
    if x.ndim != idx.ndim or len(shape) != idx.ndim:
        raise ShapeMismatch(f"{name}: input {tuple(x.shape)} and indices {tuple(idx.shape)} must have the same "
                            "number of dims")
    d = dim % idx.ndim if idx.ndim else 0
    for i, (n, m, k) in enumerate(zip(x.shape, idx.shape, shape)):
        ok = (i == d or n == m or n == 1 or m == 1) if gather else (m <= n and (i == d or m <= k))
        if not ok:
            raise ShapeMismatch(f"{name}: indices {tuple(idx.shape)} do not fit input {tuple(x.shape)} "
                                f"(dim {dim})")


def select_along_dim(x: Tensor, idx: Tensor, dim: int) -> Tensor:
    """Internal: ``x`` gathered at the int64 indices ``idx`` along ``dim`` (PyTorch's ``take_along_dim``)."""
    _check_along("select_along_dim", x, idx, dim, tuple(x.shape) if isinstance(x, Tensor) else None, True)
    return apply(SelectAlongDim, (x, idx), {"dim": dim})


def select_along_dim_backward(g: Tensor, idx: Tensor, dim: int, shape: tuple) -> Tensor:
    """Internal: zeros of ``shape`` with ``g`` scatter-added at ``idx`` along ``dim``."""
    _check_along("select_along_dim_backward", g, idx, dim, tuple(shape), False)
    return apply(SelectAlongDimBackward, (g, idx), {"dim": dim, "shape": tuple(shape)})


class ValueSelectingOp(Op):
    """Base of the ops returning ``(values, indices)``: the values' gradient is scattered to the indices.

    The node saves its outputs (the indices are what the backward needs; they
    are integer, so they never carry a gradient). ``params`` must hold ``dim``
    and ``keepdim`` (``True`` for ops that keep the dim, like ``sort``).
    """

    n_outputs = 2
    differentiable_outputs = (True, False)

    def _idx_and_g(self, g, idx):
        from .shape import unsqueeze

        p = self.params
        if not p["keepdim"] and len(self.shapes[0]):
            g = unsqueeze(g, p["dim"])
            idx = unsqueeze(idx, p["dim"])
        return g, idx

    def backward(self, g, _g_indices=None):
        idx = _new_tensor(self.output_array(1), self.device)
        g, idx = self._idx_and_g(g, idx)
        return (select_along_dim_backward(g, idx, self.params["dim"], self.shapes[0]),) + (None,) * (
            len(self.next_edges) - 1)


# ------------------------------------------------------------------------------- sort
def _argsort_array(be, x, axis, descending):
    """Stable int64 argsort along ``axis``; NaN sorts as the largest value (PyTorch's order).

    Descending order stays stable (equal elements keep their original order)
    by sorting the reversed array ascending and reversing the result.
    """
    if x.dtype == bool:
        x = x.astype("int8")
    elif x.dtype.kind == "V":  # ml_dtypes' bfloat16 does not sort NaN last: float32 holds it exactly
        x = x.astype("float32")
    if not descending:
        return be.argsort(x, axis=axis, kind="stable").astype("int64", copy=False)
    n = x.shape[axis]
    rev = be.flip(x, axis=axis)
    idx = be.flip(be.argsort(rev, axis=axis, kind="stable"), axis=axis)
    return ((n - 1) - idx).astype("int64", copy=False)


def _sorted_selection(be, x, dim, descending, positions=None):
    """``(values, indices)`` at ``positions`` (all when None) of the stable sort of ``x`` along ``dim``."""
    if x.ndim == 0:
        return scalar_selection(be, x)
    idx = _argsort_array(be, x, dim, descending)
    if positions is not None:
        idx = be.take(idx, positions, axis=dim)
    return be.take_along_axis(x, idx, axis=dim), idx


class Sort(ValueSelectingOp):
    """``(values, indices) = sort(x, dim)``; the values' gradient is scattered back by the indices."""

    schema = OpSchema("sort", amp_policy=KEEP_INPUT, saves_output=True, family="sorting",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim, descending):
        return _sorted_selection(be, x, dim, descending)


def _dim_of(x, dim, op):
    return norm_dim(dim, x.ndim, op) if x.ndim else norm_dim(dim, 1, op)


@declare(Sort)
def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """Sort along ``dim``: returns ``(values, indices)`` with ``values == take_along_dim(input, indices, dim)``.

    The sort is always stable (``stable`` is accepted for PyTorch
    compatibility): equal elements keep their order, ascending and
    descending. NaN sorts as the largest value. The gradient of ``values``
    flows back to the positions named by ``indices``.

    >>> import pylucid
    >>> v, i = pylucid.sort(pylucid.tensor([3.0, 1.0, 2.0]))
    >>> v, i
    (tensor([1., 2., 3.]), tensor([1, 2, 0]))
    >>> pylucid.tensor([[1, 3, 2]]).sort(descending=True).values
    tensor([[3, 2, 1]])
    """
    check_tensor(input, "sort")
    d = _dim_of(input, dim, "sort")
    v, i = apply(Sort, (input,), {"dim": d, "keepdim": True, "descending": bool(descending)})
    return ValuesIndices(v, i)


class Argsort(Op):
    """Indices that sort ``x`` along ``dim`` (stable; not differentiable)."""

    schema = OpSchema("argsort", amp_policy=KEEP_INPUT, differentiable=False, family="sorting",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, descending):
        if x.ndim == 0:
            return be.zeros((), dtype="int64")
        return _argsort_array(be, x, dim, descending)


@declare(Argsort)
def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """Indices that sort ``input`` along ``dim`` (stable; NaN last ascending, first descending).

    >>> import pylucid
    >>> pylucid.argsort(pylucid.tensor([3.0, 1.0, 2.0]), descending=True)
    tensor([0, 2, 1])
    """
    check_tensor(input, "argsort")
    return apply(Argsort, (input,), {"dim": _dim_of(input, dim, "argsort"), "descending": bool(descending)})


@declare()
def msort(input: Tensor) -> Tensor:
    """Values of ``input`` sorted along dim 0 (composite: ``sort(input, 0).values``).

    >>> import pylucid
    >>> pylucid.msort(pylucid.tensor([[2, 1], [0, 5]]))
    tensor([[0, 1],
            [2, 5]])
    """
    return sort(input, 0).values


# ------------------------------------------------------------------------------ topk / kthvalue
class Topk(ValueSelectingOp):
    """``(values, indices)`` of the ``k`` largest (or smallest) entries along ``dim``."""

    schema = OpSchema("topk", amp_policy=KEEP_INPUT, saves_output=True, family="sorting",
                      accepts=("float", "int"))

    @staticmethod
    def forward(be, x, k, dim, keepdim, largest):
        return _sorted_selection(be, x, dim, largest, be.arange(k))


@declare(Topk)
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """The ``k`` largest (``largest=False``: smallest) entries along ``dim`` and their indices.

    Results are always sorted (``sorted=False`` is accepted: any order is
    allowed then). Among equal values the earlier index comes first.

    >>> import pylucid
    >>> pylucid.topk(pylucid.tensor([1.0, 5.0, 3.0, 4.0]), 2)
    ValuesIndices(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    check_tensor(input, "topk")
    d = _dim_of(input, dim, "topk")
    n = input.shape[d] if input.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
    if k < 0 or k > n:
        raise IndexError(f"topk: k={k} is out of range for dimension {dim} of size {n} (expected 0 <= k <= {n})")
    v, i = apply(Topk, (input,), {"k": k, "dim": d, "keepdim": True, "largest": bool(largest)})
    return ValuesIndices(v, i)


class Kthvalue(ValueSelectingOp):
    """``(values, indices)`` of the ``k``-th smallest entry along ``dim`` (1-based ``k``)."""

    schema = OpSchema("kthvalue", amp_policy=KEEP_INPUT, saves_output=True, family="sorting",
                      accepts=("float", "int"))

    @staticmethod
    def forward(be, x, k, dim, keepdim):
        if x.ndim == 0:
            return scalar_selection(be, x)
        return select_at(be, x, be.take(_argsort_array(be, x, dim, False), be.asarray([k - 1]), axis=dim), dim,
                         keepdim)


@declare(Kthvalue)
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The ``k``-th smallest value along ``dim`` (``k`` counts from 1) and its index.

    Among equal values the index is the one a stable sort puts at position
    ``k - 1`` (PyTorch's index for ties is unspecified).

    >>> import pylucid
    >>> pylucid.kthvalue(pylucid.tensor([4.0, 1.0, 3.0]), 2)
    ValuesIndices(values=tensor(3.), indices=tensor(2))
    """
    check_tensor(input, "kthvalue")
    d = _dim_of(input, dim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n:
        raise IndexError(f"kthvalue: k={k!r} is out of range for dimension {dim} of size {n} (expected 1 <= k <= {n})")
    v, i = apply(Kthvalue, (input,), {"k": k, "dim": d, "keepdim": bool(keepdim)})
    return ValuesIndices(v, i)


# ------------------------------------------------------------------------------ unique
class Unique(Op):
    """Sorted unique values (flattened, or of whole slices along ``dim``) with inverse and counts."""

    schema = OpSchema("unique", amp_policy=KEEP_INPUT, differentiable=False, family="sorting",
                      accepts=("float", "int", "bool"))
    n_outputs = 3

    @staticmethod
    def forward(be, x, dim):
        if dim is None:
            u, inv, cnt = be.unique(x.reshape(-1), return_inverse=True, return_counts=True)
            inv = inv.reshape(x.shape)
        else:
            u, inv, cnt = be.unique(x, return_inverse=True, return_counts=True, axis=dim)
            inv = inv.reshape(-1)
        return u, inv.astype("int64"), cnt.astype("int64")


def _maybe_tuple(out, return_inverse, return_counts):
    u, inv, cnt = out
    res = (u,) + ((inv,) if return_inverse else ()) + ((cnt,) if return_counts else ())
    return res if len(res) > 1 else u


def _unique_dim(input: Tensor, dim, name: str) -> int:
    """``dim`` of ``unique(..., dim=dim)`` normalised; an empty input must have exactly one size-0 dim, the one
    selected (PyTorch's rule: the slices of another empty dim have no elements to compare)."""
    d = norm_dim(dim, input.ndim, name)
    if input.numel() == 0:
        zeros = [i for i, n in enumerate(input.shape) if n == 0]
        if len(zeros) > 1:
            raise ShapeMismatch(f"{name}: the input of shape {tuple(input.shape)} has more than one size-0 dim; "
                                f"with dim={dim} it must have only the selected one")
        if zeros != [d]:
            raise ShapeMismatch(f"{name}: the input of shape {tuple(input.shape)} is empty along dim {zeros[0]}, "
                                f"not the selected dim {dim}; unique along dim needs the empty dim selected")
    return d


@declare(Unique)
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None):
    """Unique elements of ``input`` (of the flattened tensor, or unique slices along ``dim``), sorted.

    Returns ``output`` and, when asked, ``inverse_indices`` (the position of
    each input element in ``output``, shaped like the input; along ``dim``:
    one per slice) and ``counts``. ``sorted=False`` also returns sorted
    values (as PyTorch's CPU kernel does). Not differentiable.

    >>> import pylucid
    >>> pylucid.unique(pylucid.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    check_tensor(input, "unique")
    d = None if dim is None else _unique_dim(input, dim, "unique")
    return _maybe_tuple(apply(Unique, (input,), {"dim": d}), return_inverse, return_counts)


class UniqueConsecutive(Op):
    """Collapse runs of equal consecutive elements (or slices along ``dim``)."""

    schema = OpSchema("unique_consecutive", amp_policy=KEEP_INPUT, differentiable=False, family="sorting",
                      accepts=("float", "int", "bool"))
    n_outputs = 3

    @staticmethod
    def forward(be, x, dim):
        shape = x.shape
        if dim is None:
            x = x.reshape(-1)
            axis = 0
        else:
            axis = dim
        n = x.shape[axis]
        if n == 0:
            return x, be.zeros(shape if dim is None else (0,), dtype="int64"), be.zeros((0,), dtype="int64")
        xm = be.moveaxis(x, axis, 0).reshape(n, -1)
        change = be.concatenate([be.ones(1, dtype=bool), be.any(xm[1:] != xm[:-1], axis=1)])
        starts = be.nonzero(change)[0]
        inv = (be.cumsum(change) - 1).astype("int64")
        counts = be.diff(be.concatenate([starts, be.asarray([n])])).astype("int64")
        out = be.take(x, starts, axis=axis)
        return out, inv.reshape(shape) if dim is None else inv, counts


@declare(UniqueConsecutive)
def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Eliminate all but the first element of every run of equal consecutive elements.

    >>> import pylucid
    >>> pylucid.unique_consecutive(pylucid.tensor([1, 1, 2, 2, 3, 1, 1]))
    tensor([1, 2, 3, 1])
    """
    check_tensor(input, "unique_consecutive")
    d = None if dim is None else _unique_dim(input, dim, "unique_consecutive")
    return _maybe_tuple(apply(UniqueConsecutive, (input,), {"dim": d}), return_inverse, return_counts)


# ------------------------------------------------------------------------------ searchsorted
class Searchsorted(Op):
    """Insertion points of ``values`` in the innermost dim of the sorted ``sorted_sequence``."""

    schema = OpSchema("searchsorted", amp_policy=KEEP_INPUT, differentiable=False, family="sorting",
                      accepts=("float", "int"))

    @staticmethod
    def forward(be, seq, values, side, out_int32, sorter):
        dt = "int32" if out_int32 else "int64"
        if sorter is not None:
            seq = be.take_along_axis(seq, sorter, axis=-1)
        if seq.ndim == 1:
            return be.searchsorted(seq, values, side=side).astype(dt)
        lead = seq.shape[:-1]
        rows = 1
        for n in lead:
            rows *= n
        s2 = seq.reshape(rows, seq.shape[-1])
        v2 = values.reshape(rows, values.size // rows if rows else 0)
        out = be.stack([be.searchsorted(s2[i], v2[i], side=side) for i in range(s2.shape[0])]) if s2.shape[0] else \
            be.zeros(v2.shape, dtype=dt)
        return out.reshape(lead + values.shape[len(lead):]).astype(dt)


@declare(Searchsorted, method=False)
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """Indices where the elements of ``input`` would be inserted into ``sorted_sequence`` to keep it sorted.

    ``right=False`` (``side='left'``): the first suitable index; ``right=True``
    (``side='right'``): the last. A 1-D sequence serves every value; an N-D
    sequence is searched row by row (its leading dims must equal ``input``'s).
    ``sorter`` gives the indices that sort an unsorted sequence.

    >>> import pylucid
    >>> seq = pylucid.tensor([1, 3, 5, 7])
    >>> pylucid.searchsorted(seq, pylucid.tensor([3, 6])), pylucid.searchsorted(seq, pylucid.tensor([3, 6]), right=True)
    (tensor([1, 3]), tensor([2, 3]))
    """
    check_tensor(sorted_sequence, "searchsorted", "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar and not isinstance(input, (int, float, complex)):
        raise TypeError(f"searchsorted: input must be a Tensor or a number, got {type(input).__name__}")
    if scalar:
        from ..creation import tensor

        # a number of the sequence's kind takes its dtype; a float for an integer or bool sequence promotes both
        kind = sorted_sequence._data.dtype.kind
        same_kind = kind == "c" or is_float_dtype(sorted_sequence._data.dtype) or (
            kind in "iu" and isinstance(input, int) and not isinstance(input, bool))
        input = tensor(input, dtype=sorted_sequence.dtype if same_kind else None, device=sorted_sequence.device)
    if sorted_sequence.ndim == 0:
        raise ValueError("searchsorted: sorted_sequence must have at least one dimension, got a 0-d tensor")
    if sorted_sequence.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(input.shape[:-1]):
        raise ValueError(
            f"searchsorted: the leading dims of sorted_sequence {tuple(sorted_sequence.shape)} and input "
            f"{tuple(input.shape)} must match (all but the last)")
    if sorter is not None and tuple(sorter.shape) != tuple(sorted_sequence.shape):
        raise ValueError(f"searchsorted: sorter of shape {tuple(sorter.shape)} must match sorted_sequence's "
                         f"{tuple(sorted_sequence.shape)}")
    args = (sorted_sequence, input)
    params = {"side": "right" if right else "left", "out_int32": bool(out_int32),
              "sorter": None if sorter is None else sorter._data}
    return apply(Searchsorted, args, params)


@declare(method=False)
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """Bucket index of each element of ``input`` given the sorted 1-D ``boundaries``.

    ``right=False``: ``boundaries[i-1] < x <= boundaries[i]``; ``right=True``:
    ``boundaries[i-1] <= x < boundaries[i]`` (PyTorch's convention: this is
    ``searchsorted(boundaries, input, right=right)``).

    >>> import pylucid
    >>> pylucid.bucketize(pylucid.tensor([1, 5, 9]), pylucid.tensor([1, 3, 5, 7]))
    tensor([0, 2, 4])
    """
    check_tensor(boundaries, "bucketize", "boundaries")
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-D, got shape {tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)

