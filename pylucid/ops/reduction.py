"""Reductions: ``sum``, the documented ``mean``, ``min`` and ``max`` (and ``amin``/``amax``).

Each takes ``dim`` (``None`` for all dims, an int, or a tuple of ints) and
``keepdim``. Backward broadcasts the gradient back over the reduced dims.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._tensor import Tensor
from ..errors import DtypeMismatch
from ._op import Op, apply
from ._utils import keepdim_shape, norm_dims
from .schema import KEEP_INPUT, PROMOTE, OpSchema


def _expand_back(g, in_shape, axes, keepdim):
    """Graph-mode: reshape the reduced gradient to keepdim form and broadcast to ``in_shape``."""
    from .shape import expand, reshape

    if not keepdim:
        g = reshape(g, keepdim_shape(in_shape, axes))
    return expand(g, in_shape)


def _expand_back_fast(be, g, in_shape, axes, keepdim):
    if not keepdim:
        g = g.reshape(keepdim_shape(in_shape, axes))
    return be.broadcast_to(g, in_shape)


class Sum(Op):
    """``y = sum_{axes} x``; ``dx = broadcast(g)``. Integer and bool inputs sum in int64."""

    schema = OpSchema("sum", amp_policy=PROMOTE, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, dtype):
        if dtype is not None:
            return be.sum(x, axis=axes, keepdims=keepdim, dtype=dtype.numpy_dtype)
        if x.dtype.kind in "biu":
            return be.sum(x, axis=axes, keepdims=keepdim, dtype="int64")
        return be.sum(x, axis=axes, keepdims=keepdim)

    def backward(self, g):
        p = self.params
        return _expand_back(g, self.shapes[0], p["axes"], p["keepdim"])

    def backward_fast(self, be, g):
        p = self.params
        return _expand_back_fast(be, g, self.shapes[0], p["axes"], p["keepdim"])


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (all dims when ``None``); bool and integer inputs give int64.

    >>> import pylucid
    >>> x = pylucid.tensor([[1, 2], [3, 4]])
    >>> pylucid.sum(x), pylucid.sum(x, dim=0), x.sum(1, keepdim=True)
    (tensor(10), tensor([4, 6]), tensor([[3],
            [7]]))
    """
    _check_tensor(input, "sum")
    axes = norm_dims(dim, input.ndim, "sum")
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    return apply(Sum, (input,), {"axes": axes, "keepdim": bool(keepdim), "dtype": dtype})


def _check_tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


class Mean(Op):
    """``y = (1/N) sum_{axes} x`` (documented op): Promote, saves nothing.

    Backward is ``g / N`` broadcast back to the input shape, ``N`` the product
    of the reduced sizes; only shapes are needed, so nothing is saved. An empty
    reduction gives NaN (0/0), not an error.
    """

    schema = OpSchema("mean", amp_policy=PROMOTE, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim):
        with be.errstate():
            return be.mean(x, axis=axes, keepdims=keepdim)

    def _n(self):
        shape = self.shapes[0]
        axes = self.params["axes"]
        n = 1
        for i, s in enumerate(shape):
            if axes is None or i in axes:
                n *= s
        return n

    def backward(self, g):
        p = self.params
        return _expand_back(g / self._n() if self._n() else g * float("nan"), self.shapes[0], p["axes"],
                            p["keepdim"])

    def backward_fast(self, be, g):
        p = self.params
        n = self._n()
        with be.errstate():
            return _expand_back_fast(be, g / n if n else g * float("nan"), self.shapes[0], p["axes"], p["keepdim"])


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over ``dim`` (all dims when ``None``).

    Floating and complex inputs only (as PyTorch); an empty reduction is NaN.

    >>> import pylucid
    >>> pylucid.mean(pylucid.tensor([[1.0, 2.0], [3.0, 5.0]]), dim=1)
    tensor([1.5000, 4.0000])
    """
    _check_tensor(input, "mean")
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.category < _dt.FLOAT:
        raise DtypeMismatch(
            f"mean: could not infer the output dtype: input dtype {input.dtype} is not floating point or complex; "
            "pass dtype=pylucid.float32 or convert the input"
        )
    axes = norm_dims(dim, input.ndim, "mean")
    return apply(Mean, (input,), {"axes": axes, "keepdim": bool(keepdim)})


def _minmax_check(x, axes, op):
    shape = x.shape
    if axes is None:
        if x.numel() == 0:
            raise IndexError(f"{op}: cannot reduce an empty tensor (shape {tuple(shape)}) over all dims; "
                             "there is no identity for min/max")
    else:
        for a in axes:
            if shape[a] == 0:
                raise IndexError(f"{op}: expected reduction dim {a} to have non-zero size, shape is {tuple(shape)}")


class _MinMax(Op):
    """Shared backward of ``min``/``max``.

    The gradient goes to every position equal to the result, ties sharing it
    equally. The mask is ``(x >= y) & (y >= x)`` — two ``>=`` instead of one
    ``==`` — as the seed specifies. As declared by the seed, the node saves
    the output only: the input itself is not kept alive. When a graph is
    recorded, the tie mask and its count are computed once right after the
    forward (``save_extra``) from the input and the output; the mask is
    piecewise constant in ``x``, so treating it as a constant in the
    graph-mode formula gives exact higher derivatives (the second derivative
    of a min/max is zero almost everywhere, as in PyTorch).
    """

    def save_extra(self, arrays, out):
        be = self.device.backend
        x = arrays[0]
        p = self.params
        y = _expand_back_fast(be, out, x.shape, p["axes"], p["keepdim"])
        mask = ((x >= y) & (y >= x)).astype(x.dtype)
        count = be.sum(mask, axis=p["axes"], keepdims=True)
        with be.errstate():
            self.extra = mask / count  # each tied position's share

    def backward(self, g):
        from .._tensor import _new_tensor
        from .elementwise import mul

        self._check_freed()
        p = self.params
        share = _new_tensor(self.extra, self.device)
        return mul(_expand_back(g, self.shapes[0], p["axes"], p["keepdim"]), share)

    def backward_fast(self, be, g):
        self._check_freed()
        p = self.params
        return _expand_back_fast(be, g, self.shapes[0], p["axes"], p["keepdim"]) * self.extra

    def release(self) -> None:
        super().release()
        self.extra = None


class Max(_MinMax):
    """``y = max_{axes} x`` (documented op, ``MaxBackward``): KeepInput, saves its output only."""

    schema = OpSchema("max", amp_policy=KEEP_INPUT, saves_output=True, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim):
        return be.max(x, axis=axes, keepdims=keepdim)


class Min(_MinMax):
    """``y = min_{axes} x`` (documented op, ``MinBackward``): KeepInput, saves its output only."""

    schema = OpSchema("min", amp_policy=KEEP_INPUT, saves_output=True, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim):
        return be.min(x, axis=axes, keepdims=keepdim)


def _minmax(cls, name, input, dim, keepdim):
    _check_tensor(input, name)
    if isinstance(dim, Tensor):
        raise TypeError(
            f"{name}: dim must be an int or a tuple of ints; for the element-wise {name} of two tensors use "
            f"pylucid.{'maximum' if name == 'max' else 'minimum'}(a, b)"
        )
    axes = norm_dims(dim, input.ndim, name)
    _minmax_check(input, axes, name)
    return apply(cls, (input,), {"axes": axes, "keepdim": bool(keepdim)})


def max(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``dim`` (all dims when ``None``, an int, or a tuple); returns values only.

    Unlike ``torch.max(x, dim)``, this never returns indices (use
    :func:`pylucid.max_with_indices` or :func:`pylucid.argmax`). Ties share the
    gradient equally (PyTorch's ``amax`` behaviour).

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0], [5.0, 2.0]], requires_grad=True)
    >>> pylucid.max(x).backward(); x.grad
    tensor([[0.0000, 0.5000],
            [0.5000, 0.0000]])
    """
    return _minmax(Max, "max", input, dim, keepdim)


def min(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Minimum over ``dim`` (all dims when ``None``, an int, or a tuple); ties share the gradient.

    >>> import pylucid
    >>> pylucid.min(pylucid.tensor([[3.0, 1.0], [0.5, 2.0]]), dim=1)
    tensor([1.0000, 0.5000])
    """
    return _minmax(Min, "min", input, dim, keepdim)


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Alias of :func:`max` (PyTorch's ``amax``; ``dim=()`` means all dims)."""
    return max(input, dim if dim != () else None, keepdim)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Alias of :func:`min` (PyTorch's ``amin``; ``dim=()`` means all dims)."""
    return min(input, dim if dim != () else None, keepdim)


Tensor.sum = sum
Tensor.mean = mean
Tensor.max = max
Tensor.min = min
Tensor.amax = amax
Tensor.amin = amin
