"""Reductions: ``sum``, the documented ``mean``, ``min`` and ``max`` (and ``amin``/``amax``), and
``prod argmin argmax var std var_mean std_mean logsumexp norm all any count_nonzero median nanmedian mode
nansum nanmean max_with_indices min_with_indices``.

Each takes ``dim`` (``None`` for all dims, an int, or a tuple of ints) and
``keepdim``. Backward broadcasts the gradient back over the reduced dims.
``max``/``min`` with one int ``dim`` return PyTorch's ``(values, indices)``
(the values' gradient still shared among ties), with a Tensor the
element-wise ``maximum``/``minimum``.

Value-selecting reductions (``median(x, dim)``, ``mode``, ``max_with_indices``
...) return ``(values, indices)`` and scatter the gradient to the indices
(``sorting.ValueSelectingOp``).
"""

from __future__ import annotations

import builtins as _builtins
from collections import namedtuple

from .. import dtypes as _dt
from .._tensor import Tensor
from ..errors import DtypeMismatch
from ._op import Op, apply
from ._utils import check_tensor, conj_if_complex, is_float_dtype, keepdim_shape, norm_dims, reduced_shape
from .registry import declare
from .schema import FORCE_FP32, KEEP_INPUT, PROMOTE, OpSchema
from .sorting import ValueSelectingOp, ValuesIndices, scalar_selection, select_at


def _expand_back(g, in_shape, axes, keepdim):
    """Graph-mode: reshape the reduced gradient to keepdim form and broadcast to ``in_shape``."""
    from .shape import expand, reshape

    if not keepdim:
        g = reshape(g, keepdim_shape(in_shape, axes))
    return expand(g, in_shape)


def _expand_keepdim(g, in_shape, axes):
    """Graph-mode: the reduced gradient reshaped to its keepdim form (no broadcast)."""
    from .shape import reshape

    return reshape(g, keepdim_shape(in_shape, axes))


def _expand_back_fast(be, g, in_shape, axes, keepdim):
    if not keepdim:
        g = g.reshape(keepdim_shape(in_shape, axes))
    return be.broadcast_to(g, in_shape)


def _n_reduced(shape, axes):
    """``N``, the number of elements each result of a reduction over ``axes`` combines."""
    n = 1
    for i, s in enumerate(shape):
        if axes is None or i in axes:
            n *= s
    return n


def _const(be_array, dev):
    from .._tensor import _new_tensor

    return _new_tensor(be_array, dev)


def _accumulator(x, dtype):
    """The accumulation dtype of ``sum``/``prod``: ``dtype`` if given, int64 for bool and integer inputs, else
    None (the input's own)."""
    if dtype is not None:
        return dtype.numpy_dtype
    return "int64" if x.dtype.kind in "biu" else None


class Sum(Op):
    """``y = sum_{axes} x``; ``dx = broadcast(g)``. Integer and bool inputs sum in int64."""

    schema = OpSchema("sum", amp_policy=PROMOTE, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, dtype):
        return be.sum(x, axis=axes, keepdims=keepdim, dtype=_accumulator(x, dtype))

    def backward(self, g):
        p = self.params
        return _expand_back(g, self.shapes[0], p["axes"], p["keepdim"])

    def backward_fast(self, be, g):
        p = self.params
        return _expand_back_fast(be, g, self.shapes[0], p["axes"], p["keepdim"])


@declare(Sum)
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (all dims when ``None``); bool and integer inputs give int64.

    >>> import pylucid
    >>> x = pylucid.tensor([[1, 2], [3, 4]])
    >>> pylucid.sum(x), pylucid.sum(x, dim=0), x.sum(1, keepdim=True)
    (tensor(10), tensor([4, 6]), tensor([[3],
            [7]]))
    """
    check_tensor(input, "sum")
    axes = _axes(dim, input, "sum")
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    return apply(Sum, (input,), {"axes": axes, "keepdim": bool(keepdim), "dtype": dtype})


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

    def backward(self, g):
        p = self.params
        n = _n_reduced(self.shapes[0], p["axes"])
        return _expand_back(g / n if n else g * float("nan"), self.shapes[0], p["axes"], p["keepdim"])

    def backward_fast(self, be, g):
        p = self.params
        n = _n_reduced(self.shapes[0], p["axes"])
        with be.errstate():
            return _expand_back_fast(be, g / n if n else g * float("nan"), self.shapes[0], p["axes"], p["keepdim"])


@declare(Mean)
def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over ``dim`` (all dims when ``None``).

    Floating and complex inputs only (as PyTorch); an empty reduction is NaN.

    >>> import pylucid
    >>> pylucid.mean(pylucid.tensor([[1.0, 2.0], [3.0, 5.0]]), dim=1)
    tensor([1.5000, 4.0000])
    """
    check_tensor(input, "mean")
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.category < _dt.FLOAT:
        raise DtypeMismatch(
            f"mean: could not infer the output dtype: input dtype {input.dtype} is not floating point or complex; "
            "pass dtype=pylucid.float32 or convert the input"
        )
    axes = _axes(dim, input, "mean")
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
        mask = x >= y
        mask &= y >= x  # the seed's two >=: tied positions are exactly those where both hold
        # kept compactly: a bool mask (a quarter of a float32 input) and the tie count per result
        self.extra = (mask, be.sum(mask, axis=p["axes"], keepdims=True))

    def _share(self):
        """``(mask, count)`` or, for subclasses that store it directly, the per-position share."""
        self._check_freed()
        return self.extra

    def backward(self, g):
        from .._tensor import _new_tensor
        from .elementwise import div, mul

        p = self.params
        extra = self._share()
        if isinstance(extra, tuple):
            mask, count = extra
            # divide at the reduced size, then one broadcast multiply by the mask
            gk = g if p["keepdim"] else _expand_keepdim(g, self.shapes[0], p["axes"])
            share = div(gk, _new_tensor(count, self.device).to(g.dtype))
            return mul(_expand_back(share, self.shapes[0], p["axes"], True), _new_tensor(mask, self.device))
        return mul(_expand_back(g, self.shapes[0], p["axes"], p["keepdim"]), _new_tensor(extra, self.device))

    def backward_fast(self, be, g):
        p = self.params
        extra = self._share()
        if isinstance(extra, tuple):
            mask, count = extra
            gk = g if p["keepdim"] else g.reshape(keepdim_shape(self.shapes[0], p["axes"]))
            with be.errstate():
                share = gk / count.astype(g.dtype)
            return be.multiply(share, mask)
        return _expand_back_fast(be, g, self.shapes[0], p["axes"], p["keepdim"]) * extra

    def release(self) -> None:
        super().release()
        self.extra = None


class Max(_MinMax):
    """``y = max_{axes} x`` (documented op, ``MaxBackward``): KeepInput, saves its output only."""

    schema = OpSchema("max", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, axes, keepdim):
        if x.dtype.kind == "V":  # ml_dtypes' bfloat16 reduce warns on NaN where float32 is silent
            with be.errstate():
                return be.max(x, axis=axes, keepdims=keepdim)
        return be.max(x, axis=axes, keepdims=keepdim)


class Min(_MinMax):
    """``y = min_{axes} x`` (documented op, ``MinBackward``): KeepInput, saves its output only."""

    schema = OpSchema("min", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, axes, keepdim):
        if x.dtype.kind == "V":
            with be.errstate():
                return be.min(x, axis=axes, keepdims=keepdim)
        return be.min(x, axis=axes, keepdims=keepdim)


def _minmax(cls, name, input, dim, keepdim):
    """The values-only reduction: ``dim`` None, an int or a tuple of ints; ties share the gradient."""
    check_tensor(input, name)
    if isinstance(dim, Tensor):
        kind = "max" if cls is Max else "min"
        raise TypeError(f"{name}: dim must be an int or a tuple of ints, got a Tensor; for the element-wise "
                        f"{kind} of two tensors use pylucid.{kind}imum(a, b)")
    axes = _axes(dim, input, name)
    _minmax_check(input, axes, name)
    return apply(cls, (input,), {"axes": axes, "keepdim": bool(keepdim)})


def _max_or_min(cls, name, input, dim, keepdim, other):
    """``max``/``min``'s three forms: element-wise with a Tensor, ``(values, indices)`` for one int dim, values
    otherwise."""
    from .elementwise import maximum, minimum

    if isinstance(dim, Tensor) or other is not None:
        if other is not None and dim is not None:
            raise TypeError(f"{name}: pass either a dim or other=, not both")
        if keepdim:
            raise TypeError(f"{name}: keepdim applies to a reduction, not to the element-wise {name}(input, other)")
        return (maximum if name == "max" else minimum)(input, dim if other is None else other)
    if dim is None or isinstance(dim, (tuple, list)):
        return _minmax(cls, name, input, dim, keepdim)
    values = _minmax(cls, name, input, dim, keepdim)
    # torch.max(x, dim) takes bool (argmax alone does not): its indices are those of the 0/1 values
    src = input.to(_dt.uint8) if input.dtype is _dt.bool_ else input
    return ValuesIndices(values, _arg(Argmax if name == "max" else Argmin, name, src, dim, keepdim))


@declare(Max)
def max(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None):  # noqa: A001
    """Maximum of ``input``: a reduction, or the element-wise maximum of two tensors.

    - ``max(x)``, ``max(x, (0, 2))``: the maximum over all dims, or over a
      tuple of dims (values only, as :func:`amax`).
    - ``max(x, dim)`` with one int: PyTorch's ``(values, indices)`` named
      tuple; ``indices`` is the first position of the maximum (NaN counts
      as the maximum).
    - ``max(a, b)`` (or ``other=b``) with a Tensor: :func:`maximum`.

    ``keepdim`` keeps the reduced dims with size 1. The values' gradient goes
    to every position equal to the maximum, tied positions sharing it equally
    (the seeds' rule, PyTorch's ``amax`` behaviour; PyTorch's ``max(x, dim)``
    sends it to the one index instead). An empty reduced dim raises
    ``IndexError``.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0], [5.0, 2.0]], requires_grad=True)
    >>> pylucid.max(x).backward(); x.grad
    tensor([[0.0000, 0.5000],
            [0.5000, 0.0000]])
    >>> v, i = pylucid.max(x.detach(), dim=1); v, i
    (tensor([5., 5.]), tensor([1, 0]))
    >>> pylucid.max(pylucid.tensor([1.0, 4.0]), pylucid.tensor([3.0, 2.0]))
    tensor([3., 4.])
    """
    return _max_or_min(Max, "max", input, dim, keepdim, other)


@declare(Min)
def min(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None):  # noqa: A001
    """Minimum of ``input``: the forms of :func:`max` (all dims or a tuple: values; one int dim:
    ``(values, indices)``; a Tensor: :func:`minimum`). Ties share the values' gradient.

    >>> import pylucid
    >>> pylucid.min(pylucid.tensor([[3.0, 1.0], [0.5, 2.0]]), dim=1)
    ValuesIndices(values=tensor([1.0000, 0.5000]), indices=tensor([1, 0]))
    >>> pylucid.min(pylucid.tensor([[3.0, 1.0], [0.5, 2.0]]), (0, 1))
    tensor(0.5000)
    """
    return _max_or_min(Min, "min", input, dim, keepdim, other)


@declare(Max)
def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (an int or a tuple; ``dim=()`` means all dims), values only; ties share the gradient.

    >>> import pylucid
    >>> pylucid.amax(pylucid.tensor([[1.0, 5.0], [7.0, 2.0]]), 1)
    tensor([5., 7.])
    """
    return _minmax(Max, "amax", input, dim, keepdim)


@declare(Min)
def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (an int or a tuple; ``dim=()`` means all dims), values only; ties share the gradient."""
    return _minmax(Min, "amin", input, dim, keepdim)


# ------------------------------------------------------------------------------------------ dim arguments
def _axes(dim, input, op):
    """``norm_dims`` that also accepts dim 0/-1 on a 0-d tensor (reducing it over nothing, as PyTorch)."""
    if input.ndim == 0:
        norm_dims(dim, 1, op)
        return None
    return norm_dims(dim, input.ndim, op)


def _int_dim(dim, ndim, op):
    """``None`` or one normalised int dim (ops whose PyTorch signature takes a single dim)."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be an int or None, got {type(dim).__name__} {dim!r}")
    return norm_dims(dim, ndim if ndim else 1, op)


# ------------------------------------------------------------------------------------------ prod
class Prod(Op):
    """``y = prod_{axes} x``: Promote, saves input and output (reference table).

    Backward: ``dx_k = g * prod_{j != k} x_j``. Without zeros that is
    ``g * y / x``. With zeros in the input division fails, so the product of
    the others is built from exclusive cumulative products taken from both
    ends (``O(n)``; exact for any number of zeros, and differentiable again,
    so gradgrad is exact too).
    """

    schema = OpSchema("prod", amp_policy=PROMOTE, saves_input=True, saves_output=True, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, dtype):
        acc = _accumulator(x, dtype)
        if acc is not None:
            return be.prod(x, axis=axes, keepdims=keepdim, dtype=acc)
        if x.dtype.itemsize == 2:  # half precision: accumulate in float32, round once
            return be.prod(x, axis=axes, keepdims=keepdim, dtype="float32").astype(x.dtype)
        return be.prod(x, axis=axes, keepdims=keepdim)

    def backward(self, g):
        from .elementwise import div, mul
        from .scan import cumprod
        from .shape import cat, flip, reshape

        x = self.input(0)
        p = self.params
        shape, axes = self.shapes[0], p["axes"]
        ge = _expand_back(g, shape, axes, p["keepdim"])
        be = self.device.backend
        if not bool(be.any(x._data == 0)):
            return mul(ge, conj_if_complex(div(_expand_back(self.output(), shape, axes, p["keepdim"]), x)))
        # prod_{j<k} x_j * prod_{j>k} x_j from exclusive cumulative products taken from both ends: O(n), and a
        # polynomial in x, so its derivatives (cumprod's backward, exact with zeros) are exact too
        xm, ax = (reshape(x, (-1,)), 0) if axes is None else (x, axes[0])
        head = (slice(None),) * ax
        ones = _const(be.ones(xm.shape[:ax] + (1,) + xm.shape[ax + 1:], dtype=x._data.dtype), self.device)
        left = cumprod(cat([ones, xm[head + (slice(None, -1),)]], ax), ax)
        right = flip(cumprod(flip(cat([xm[head + (slice(1, None),)], ones], ax), ax), ax), ax)
        return mul(ge, conj_if_complex(reshape(mul(left, right), shape)))


@declare(Prod)
def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product of the elements over ``dim`` (one int, or all dims when ``None``).

    Bool and integer inputs give int64 (as PyTorch); ``dtype`` casts first.
    The gradient is exact with zeros in the input (one or several).

    >>> import pylucid
    >>> x = pylucid.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> pylucid.prod(x).backward(); x.grad
    tensor([0., 6., 0.])
    >>> pylucid.tensor([[1, 2], [3, 4]]).prod(1)
    tensor([ 2, 12])
    """
    check_tensor(input, "prod")
    axes = _int_dim(dim, input.ndim, "prod")
    if input.ndim == 0:
        axes = None
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
        input = input.to(dtype)
        dtype = dtype if dtype is _dt.bool_ else None  # a bool product is a logical and, as PyTorch
    return apply(Prod, (input,), {"axes": axes, "keepdim": bool(keepdim), "dtype": dtype})


# ------------------------------------------------------------------------------------- argmin / argmax
class _ArgReduce(Op):
    """Base of ``argmax``/``argmin``: the backend function of the op's name, int64 indices."""

    @classmethod
    def forward(cls, be, x, dim, keepdim):
        fn = getattr(be, cls.schema.name)
        if x.ndim == 0:
            return fn(x.reshape(1)).astype("int64").reshape(())
        return fn(x, axis=dim, keepdims=keepdim).astype("int64")


class Argmax(_ArgReduce):
    """Index of the (first) maximum; NaN counts as the maximum. Not differentiable."""

    schema = OpSchema("argmax", amp_policy=KEEP_INPUT, differentiable=False, family="reduction",
                      accepts=("float", "int"))  # PyTorch refuses bool


class Argmin(_ArgReduce):
    """Index of the (first) minimum; NaN counts as the minimum. Not differentiable."""

    schema = OpSchema("argmin", amp_policy=KEEP_INPUT, differentiable=False, family="reduction",
                      accepts=("float", "int"))  # PyTorch refuses bool


def _arg(cls, name, input, dim, keepdim):
    check_tensor(input, name)
    if dim is not None and (isinstance(dim, (tuple, list))):
        raise TypeError(f"{name}: dim must be an int or None, got {dim!r}")
    d = None if dim is None else norm_dims(dim, input.ndim if input.ndim else 1, name)[0]
    if input.ndim == 0:
        d = None
    if (d is None and input.numel() == 0) or (d is not None and input.shape[d] == 0):
        raise IndexError(f"{name}: cannot compute {name} of an empty dimension (input shape {tuple(input.shape)})")
    return apply(cls, (input,), {"dim": d, "keepdim": bool(keepdim)})


@declare(Argmax)
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the maximum over ``dim`` (of the flattened input when ``None``); ties give the first index.

    >>> import pylucid
    >>> pylucid.argmax(pylucid.tensor([[1.0, 7.0], [9.0, 3.0]])), pylucid.argmax(pylucid.tensor([1, 3, 3]), dim=0)
    (tensor(2), tensor(1))
    """
    return _arg(Argmax, "argmax", input, dim, keepdim)


@declare(Argmin)
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the minimum over ``dim`` (of the flattened input when ``None``); ties give the first index.

    >>> import pylucid
    >>> pylucid.argmin(pylucid.tensor([[1.0, 7.0], [0.0, 3.0]]), dim=1)
    tensor([0, 0])
    """
    return _arg(Argmin, "argmin", input, dim, keepdim)


# ------------------------------------------------------------------------------------------ var / std
def _correction(op, correction, unbiased):
    if correction is not None and (isinstance(correction, bool) or not isinstance(correction, (int, float))):
        raise TypeError(f"{op}: correction must be a number, got {type(correction).__name__} {correction!r}")
    if unbiased is not None:
        if correction is not None:
            raise ValueError(f"{op}: pass either correction= or unbiased=, not both")
        return 1 if unbiased else 0
    return 1 if correction is None else correction


class Var(Op):
    """``y = sum (x - mean)^2 / max(N - correction, 0)``: KeepInput, real_valued (reference table).

    Backward ``dx = g * 2 (x - mean) / (N - correction)``; ``N - correction <= 0``
    gives inf/NaN as in PyTorch.
    """

    schema = OpSchema("var", amp_policy=KEEP_INPUT, saves_input=True, real_valued=True, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, correction):
        n = _n_reduced(x.shape, axes)
        xf = x.astype("float32") if x.dtype.itemsize == 2 and x.dtype.kind != "c" else x
        with be.errstate():
            m = be.mean(xf, axis=axes, keepdims=True)
            d = be.abs(xf - m) ** 2
            out = be.sum(d, axis=axes, keepdims=keepdim) / _builtins.max(n - correction, 0)
        return out.astype(x.real.dtype if x.dtype.kind == "c" else x.dtype)  # complex input: a real variance

    def _scale(self):
        n = _n_reduced(self.shapes[0], self.params["axes"]) - self.params["correction"]
        return 2.0 / n if n != 0 else float("inf")

    def backward(self, g):
        from .elementwise import mul, sub

        x = self.input(0)
        p = self.params
        centred = sub(x, mean(x, dim=p["axes"], keepdim=True))
        return mul(_expand_back(g, self.shapes[0], p["axes"], p["keepdim"]), mul(centred, self._scale()))


class Std(Op):
    """``y = sqrt(var(x))``: a primitive for its gradient at constant inputs.

    ``d std = d var / (2 std)``, which is ``0/0`` where ``std == 0``; PyTorch
    masks those positions to a zero gradient and so does this op (a NaN
    gradient remains where ``N - correction <= 0``, as in PyTorch).
    """

    schema = OpSchema("std", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, real_valued=True,
                      family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, correction):
        with be.errstate():
            return be.sqrt(Var.forward(be, x, axes, keepdim, correction))

    _scale = Var._scale

    def backward(self, g):
        from .elementwise import div, mul, sub
        from .indexing import where

        x = self.input(0)
        y = self.output()
        p = self.params
        zero = _const(y._data == 0, self.device)
        gv = where(zero, 0.0, div(g, mul(where(zero, 1.0, y), 2.0)))
        centred = sub(x, mean(x, dim=p["axes"], keepdim=True))
        return mul(_expand_back(gv, self.shapes[0], p["axes"], p["keepdim"]), mul(centred, self._scale()))


def _var_args(op, input, dim, correction, unbiased):
    check_tensor(input, op)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeMismatch(f"{op}: std and var only support floating point and complex dtypes, got {input.dtype}")
    if isinstance(dim, bool):  # torch.var(x, True) is the old "unbiased" positional form
        unbiased, dim = dim, None
    return _axes(dim, input, op), _correction(op, correction, unbiased)


@declare(Var)
def var(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance over ``dim``: ``sum (x - mean)^2 / max(N - correction, 0)`` (``correction=1`` by default).

    ``unbiased=False`` is ``correction=0``. ``correction >= N`` gives inf
    (or NaN for ``0/0``), as PyTorch.

    >>> import pylucid
    >>> pylucid.var(pylucid.tensor([1.0, 2.0, 4.0])), pylucid.var(pylucid.tensor([1.0, 3.0]), correction=0)
    (tensor(2.3333), tensor(1.))
    """
    axes, c = _var_args("var", input, dim, correction, unbiased)
    return apply(Var, (input,), {"axes": axes, "keepdim": bool(keepdim), "correction": c})


@declare(Std)
def std(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation over ``dim``: ``sqrt(var)``; a constant input has a zero gradient (as PyTorch).

    >>> import pylucid
    >>> x = pylucid.tensor([2.0, 2.0, 2.0], requires_grad=True)
    >>> s = pylucid.std(x); s.backward(); s, x.grad
    (tensor(0., grad_fn=<StdBackward>), tensor([0., 0., 0.]))
    """
    axes, c = _var_args("std", input, dim, correction, unbiased)
    return apply(Std, (input,), {"axes": axes, "keepdim": bool(keepdim), "correction": c})


@declare(method=False)
def var_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None):
    """``(var(input, dim), mean(input, dim))`` (composite).

    >>> import pylucid
    >>> pylucid.var_mean(pylucid.tensor([1.0, 3.0]))
    (tensor(2.), tensor(2.))
    """
    v = var(input, dim, unbiased, keepdim, correction=correction)
    return v, mean(input, dim=dim if not isinstance(dim, bool) else None, keepdim=keepdim)


@declare(method=False)
def std_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None):
    """``(std(input, dim), mean(input, dim))`` (composite).

    >>> import pylucid
    >>> pylucid.std_mean(pylucid.tensor([1.0, 3.0]), correction=0)
    (tensor(1.), tensor(2.))
    """
    s = std(input, dim, unbiased, keepdim, correction=correction)
    return s, mean(input, dim=dim if not isinstance(dim, bool) else None, keepdim=keepdim)


# ------------------------------------------------------------------------------------------ logsumexp
class Logsumexp(Op):
    """``y = log sum exp(x)`` computed as ``m + log sum exp(x - m)``, ``m`` the max (a primitive for stability).

    ``m`` is replaced by 0 where it is infinite, so all ``-inf`` inputs give
    ``-inf`` and a ``+inf`` gives ``+inf`` (no ``inf - inf``). Backward:
    ``dx = g * exp(x - y)`` (the softmax), from the saved input and output.
    ForceFP32 under autocast (numerically sensitive, like softmax).
    """

    schema = OpSchema("logsumexp", amp_policy=FORCE_FP32, saves_input=True, saves_output=True, real_valued=True,
                      family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim):
        if x.size == 0:
            return be.full(reduced_shape(x.shape, axes, keepdim), -float("inf"), dtype=x.dtype)
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            # complex: shift by the largest real part, so the imaginary part is the principal log's (PyTorch)
            m = be.max(xf.real if xf.dtype.kind == "c" else xf, axis=axes, keepdims=True)
            m = be.where(be.isfinite(m), m, 0)
            out = be.log(be.sum(be.exp(xf - m), axis=axes, keepdims=True)) + m
        if not keepdim:
            out = out.reshape(reduced_shape(x.shape, axes, False))
        return out.astype(x.dtype)

    def backward(self, g):
        from .elementwise import exp, mul, sub

        p = self.params
        shape = self.shapes[0]
        y = _expand_back(self.output(), shape, p["axes"], p["keepdim"])
        with self.device.backend.errstate():  # infinite slices: inf - inf is NaN, as PyTorch's gradient
            return mul(_expand_back(g, shape, p["axes"], p["keepdim"]), conj_if_complex(exp(sub(self.input(0), y))))


@declare(Logsumexp, namespaces=("pylucid", "pylucid.special"))
def logsumexp(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))``, stable for huge and ``-inf`` entries (integer inputs become float).

    >>> import pylucid
    >>> pylucid.logsumexp(pylucid.tensor([1e4, 1e4]), dim=0)
    tensor(10000.6934)
    """
    check_tensor(input, "logsumexp")
    return apply(Logsumexp, (input,), {"axes": _axes(dim, input, "logsumexp"), "keepdim": bool(keepdim)})


# ------------------------------------------------------------------------------------------ norm
class Norm(Op):
    """Vector p-norm over ``axes``: ``(sum |x|^p)^(1/p)``; ``inf``/``-inf`` give max/min ``|x|``, ``0`` counts nonzeros.

    The one vector-norm primitive: ``pylucid.norm``, ``Tensor.norm``,
    ``pylucid.linalg.vector_norm``, ``linalg.norm`` and ``matrix_norm('fro')``
    all reach it. A primitive (not ``sqrt(sum(x^2))``) so the gradient at the
    zero vector is 0, as PyTorch, instead of ``0/0``. Complex input gives a
    real norm; half precision accumulates in float32 and rounds once.
    Backward (PyTorch's ``norm_backward``; ``y`` the norm, ``sgn(x) = x/|x|``,
    which is ``sign(x)`` for real input): ``p=2: g x / y``; ``p=1: g sgn(x)``;
    ``inf: g sgn(x)`` shared by the tied maxima; general ``p: g sgn(x)
    |x|^(p-1) / y^(p-1)`` (0 where ``x == 0`` for ``p < 1``); zero where
    ``y == 0``.
    """

    schema = OpSchema("norm", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="reduction")

    @staticmethod
    def forward(be, x, p, axes, keepdim):
        if p in (float("inf"), -float("inf")) and _n_reduced(x.shape, axes) == 0:
            raise IndexError(f"norm: cannot compute the {p} norm over an empty reduction (shape {tuple(x.shape)}): "
                             "max/min have no identity")
        out_dtype = x.real.dtype if x.dtype.kind == "c" else x.dtype
        a = be.abs(x)
        if a.dtype.itemsize == 2:  # float16/bfloat16: accumulate in float32, round once
            a = a.astype("float32")
        with be.errstate():
            if p == 2:
                out = be.sqrt(be.sum(a * a, axis=axes, keepdims=keepdim))
            elif p == 1:
                out = be.sum(a, axis=axes, keepdims=keepdim)
            elif p == float("inf"):
                out = be.max(a, axis=axes, keepdims=keepdim)
            elif p == -float("inf"):
                out = be.min(a, axis=axes, keepdims=keepdim)
            elif p == 0:
                out = be.sum((a != 0).astype(a.dtype), axis=axes, keepdims=keepdim)
            else:
                out = be.sum(a ** p, axis=axes, keepdims=keepdim) ** (1.0 / p)
        return be.asarray(out).astype(out_dtype, copy=False)

    def backward(self, g):
        from .complex import sgn
        from .elementwise import abs as _abs
        from .elementwise import div, mul
        from .elementwise import pow as _pow
        from .indexing import where

        x = self.input(0)
        y = self.output()
        p = self.params
        axes, keep, shape, order = p["axes"], p["keepdim"], self.shapes[0], p["p"]
        ge = _expand_back(g, shape, axes, keep)
        sgn_x = sgn(x)  # sign(x) for real input; x/|x| (differentiable, 0 at 0) for complex
        if order == 0:
            return mul(ge, 0.0) if not x.dtype.is_complex else mul(sgn_x, mul(ge, 0.0))
        if order == 1:
            return mul(ge, sgn_x)
        ye = _expand_back(y, shape, axes, keep)
        if order in (float("inf"), -float("inf")):
            share = _const(self._tie_share(self.device.backend, x._data, ye._data), self.device)
            return mul(mul(ge, sgn_x), share)
        zero = _const(ye._data == 0, self.device)
        ysafe = where(zero, 1.0, ye)
        if order == 2:
            return where(zero, 0.0, div(mul(ge, x), ysafe))
        ax = _abs(x)
        if order < 1:  # |x|^(p-1) is inf at x == 0, where PyTorch gives 0: sgn(0) = 0 times a safe 1^(p-1)
            ax = where(_const(x._data == 0, self.device), 1.0, ax)
        num = mul(sgn_x, _pow(ax, order - 1))
        return where(zero, 0.0, div(mul(ge, num), _pow(ysafe, order - 1)))

    def _tie_share(self, be, x, ye):
        axes = self.params["axes"]
        a = be.abs(x)
        mask = ((a >= ye) & (ye >= a)).astype(a.dtype)
        with be.errstate():
            return mask / be.sum(mask, axis=axes, keepdims=True)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector norm of ``input`` over ``dim`` (all elements when ``None``).

    ``p``: a number (``1``, ``2``, ``3.5``, ...), ``inf``/``-inf`` (max/min of
    ``|x|``), ``0`` (number of nonzeros) or ``'fro'`` (= 2 over the given
    dims). ``'nuc'`` and matrix norms live in ``pylucid.linalg``. The
    gradient at the zero vector is 0 (as PyTorch).

    >>> import pylucid
    >>> from pylucid.ops.reduction import norm
    >>> norm(pylucid.tensor([3.0, 4.0])), norm(pylucid.tensor([3.0, -4.0]), p=1)
    (tensor(5.), tensor(7.))
    """
    check_tensor(input, "norm")
    if p is None or p == "fro":
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported here (accepted: a number, inf, -inf, 'fro'); "
                         "use pylucid.linalg.matrix_norm for 'nuc'")
    if dtype is not None:
        input = input.to(dtype)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeMismatch(f"norm: expected a floating point or complex input, got {input.dtype}")
    axes = _axes(dim, input, "norm")
    return apply(Norm, (input,), {"p": float(p), "axes": axes, "keepdim": bool(keepdim)})


# ------------------------------------------------------------------------------------------ all / any / count_nonzero
class _Logical(Op):
    """Base of ``all``/``any``: the backend function of the op's name on ``x != 0``."""

    @classmethod
    def forward(cls, be, x, axes, keepdim):
        out = getattr(be, cls.schema.name)(x != 0, axis=axes, keepdims=keepdim)
        return out.astype("uint8") if x.dtype.name == "uint8" else out


class All(_Logical):
    """True where every element over ``dim`` is nonzero (uint8 inputs give uint8, as PyTorch)."""

    schema = OpSchema("all", amp_policy=KEEP_INPUT, differentiable=False, family="reduction")


class Any(_Logical):
    """True where any element over ``dim`` is nonzero (uint8 inputs give uint8, as PyTorch)."""

    schema = OpSchema("any", amp_policy=KEEP_INPUT, differentiable=False, family="reduction")


class CountNonzero(Op):
    """Number of nonzero elements over ``dim`` (int64)."""

    schema = OpSchema("count_nonzero", amp_policy=KEEP_INPUT, differentiable=False, family="reduction")

    @staticmethod
    def forward(be, x, axes):
        return be.sum(x != 0, axis=axes, dtype="int64")


@declare(All)
def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether all elements (over ``dim``) are nonzero.

    >>> import pylucid
    >>> pylucid.all(pylucid.tensor([[1, 0], [2, 3]]), dim=1)
    tensor([False,  True])
    """
    check_tensor(input, "all")
    return apply(All, (input,), {"axes": _axes(dim, input, "all"), "keepdim": bool(keepdim)})


@declare(Any)
def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether any element (over ``dim``) is nonzero.

    >>> import pylucid
    >>> pylucid.any(pylucid.tensor([0.0, 0.5])), pylucid.tensor([[0, 0], [0, 1]]).any(0)
    (tensor(True), tensor([False,  True]))
    """
    check_tensor(input, "any")
    return apply(Any, (input,), {"axes": _axes(dim, input, "any"), "keepdim": bool(keepdim)})


@declare(CountNonzero)
def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """Number of nonzero elements over ``dim`` (all when ``None``), as int64.

    >>> import pylucid
    >>> pylucid.count_nonzero(pylucid.tensor([[1, 0], [2, 3]]), dim=0)
    tensor([2, 1])
    """
    check_tensor(input, "count_nonzero")
    return apply(CountNonzero, (input,), {"axes": _axes(dim, input, "count_nonzero")})


# ------------------------------------------------------------------------------------------ nansum / nanmean
def _isnan(x):
    from .compare import ne

    return ne(x, x)


class Nansum(Op):
    """``y = sum_{axes} x`` with NaN counted as zero; ``dx = broadcast(g) * (x == x)``.

    The mask multiplies (PyTorch's formula), so an infinite incoming gradient
    gives NaN at NaN positions: ``nanmean`` of an all-NaN slice has a NaN
    gradient, as in PyTorch. Saves its input (for the mask).
    """

    schema = OpSchema("nansum", amp_policy=PROMOTE, saves_input=True, family="reduction")

    @staticmethod
    def forward(be, x, axes, keepdim, dtype):
        if x.dtype.kind in "fc" or is_float_dtype(x.dtype):
            x = be.where(x != x, x.dtype.type(0), x)
        with be.errstate():  # inf + -inf is NaN without a warning, as PyTorch
            return be.sum(x, axis=axes, keepdims=keepdim, dtype=_accumulator(x, dtype))

    def backward(self, g):
        from .elementwise import mul

        x, p = self.input(0), self.params
        keep = _const(x._data == x._data, self.device)
        with self.device.backend.errstate():  # inf * 0 is the intended NaN
            return mul(_expand_back(g, self.shapes[0], p["axes"], p["keepdim"]), keep.to(g.dtype))


@declare(Nansum)
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum treating NaN as zero; NaN positions get a zero gradient (``g * 0``: NaN where ``g`` is infinite).

    >>> import pylucid
    >>> pylucid.nansum(pylucid.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    check_tensor(input, "nansum")
    axes = _axes(dim, input, "nansum")
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    return apply(Nansum, (input,), {"axes": axes, "keepdim": bool(keepdim), "dtype": dtype})


@declare()
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean of the non-NaN elements (composite: ``nansum / count``); all-NaN slices give NaN, and NaN
    gradients (``g / 0 * 0``), as PyTorch.

    >>> import pylucid
    >>> pylucid.nanmean(pylucid.tensor([[1.0, float("nan")], [2.0, 4.0]]), dim=1)
    tensor([1., 3.])
    """
    from .compare import logical_not
    from .elementwise import div

    check_tensor(input, "nanmean")
    if dtype is not None:
        input = input.to(dtype)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeMismatch(f"nanmean: expected input to have floating point or complex dtype but got {input.dtype}")
    count = sum(logical_not(_isnan(input)), dim, keepdim)
    return div(nansum(input, dim, keepdim), count.to(input.dtype))


# ------------------------------------------------------------------------------------------ value-selecting
def _single_dim(op, input, dim):
    if dim is None or isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    d = norm_dims(dim, input.ndim if input.ndim else 1, op)[0]
    n = input.shape[d] if input.ndim else 1
    if n == 0:
        raise IndexError(f"{op}: expected reduction dim {d} to have non-zero size, input shape {tuple(input.shape)}")
    return d


class _ArgSelect(ValueSelectingOp):
    @staticmethod
    def _run(be, fn, x, dim, keepdim):
        if x.ndim == 0:
            return scalar_selection(be, x)
        return select_at(be, x, be.expand_dims(fn(x, axis=dim), dim).astype("int64"), dim, keepdim)


class MaxWithIndices(_ArgSelect):
    """``torch.max(x, dim)``: ``(values, indices)`` of the first maximum; the gradient goes to that index."""

    schema = OpSchema("max_with_indices", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim):
        return _ArgSelect._run(be, be.argmax, x, dim, keepdim)


class MinWithIndices(_ArgSelect):
    """``torch.min(x, dim)``: ``(values, indices)`` of the first minimum; the gradient goes to that index."""

    schema = OpSchema("min_with_indices", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim):
        return _ArgSelect._run(be, be.argmin, x, dim, keepdim)


@declare(MaxWithIndices, method=False)
def max_with_indices(input: Tensor, dim: int, keepdim: bool = False) -> ValuesIndices:
    """PyTorch's ``torch.max(input, dim)``: ``(values, indices)`` along one dim.

    ``pylucid.max(input, dim)`` returns the same pair but shares the values'
    gradient among tied positions (the documented op); here the first index
    of a tie gets the whole gradient (PyTorch's rule for the indexed form).
    NaN counts as the maximum.

    >>> import pylucid
    >>> pylucid.max_with_indices(pylucid.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    ValuesIndices(values=tensor([5., 7.]), indices=tensor([1, 0]))
    """
    check_tensor(input, "max_with_indices")
    d = _single_dim("max_with_indices", input, dim)
    return ValuesIndices(*apply(MaxWithIndices, (input,), {"dim": d, "keepdim": bool(keepdim)}))


@declare(MinWithIndices, method=False)
def min_with_indices(input: Tensor, dim: int, keepdim: bool = False) -> ValuesIndices:
    """PyTorch's ``torch.min(input, dim)``: ``(values, indices)`` along one dim (first minimum wins ties).

    >>> import pylucid
    >>> pylucid.min_with_indices(pylucid.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=0).indices
    tensor([0, 1])
    """
    check_tensor(input, "min_with_indices")
    d = _single_dim("min_with_indices", input, dim)
    return ValuesIndices(*apply(MinWithIndices, (input,), {"dim": d, "keepdim": bool(keepdim)}))


# ------------------------------------------------------------------------------------------ median / mode
def _sorted_with_nan_count(be, x, dim):
    # NaN last, equal values keep their order (bfloat16 through float32, where NaN sorts last)
    idx = be.argsort(x.astype("float32") if x.dtype.kind == "V" else x, axis=dim, kind="stable")
    nan_count = be.sum(be.isnan(x), axis=dim, keepdims=True) if x.dtype.kind == "c" or is_float_dtype(x.dtype) \
        else None
    return idx, nan_count


class Median(_MinMax):
    """Median of all elements (the lower of the two middle values); NaN if any element is NaN.

    Ties share the gradient equally (PyTorch's ``evenly_distribute_backward``),
    the ``min``/``max`` backward.
    """

    schema = OpSchema("median", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int"))
    backward_fast = None  # not a hot op: the graph formula serves first order too

    def save_extra(self, arrays, out):
        super().save_extra(arrays, out)
        be = self.device.backend
        x = arrays[0]
        if x.dtype.kind in "fc" and bool(be.isnan(out)):
            # a NaN median: PyTorch shares the gradient among the NaN elements
            mask = be.isnan(x).astype(x.dtype)
            self.extra = mask / be.sum(mask)

    @staticmethod
    def forward(be, x, axes, keepdim, ignore_nan):
        flat = x.reshape(-1)
        if flat.size == 0:
            # PyTorch: NaN, which an integer dtype holds as its minimum (the value of NaN cast to it)
            return be.full((), be.xp.iinfo(x.dtype).min if x.dtype.kind in "iu" else float("nan"), dtype=x.dtype)
        s = be.sort(flat.astype("float32") if flat.dtype.kind == "V" else flat).astype(x.dtype)  # bfloat16: NaN last
        if x.dtype.kind in "fc" or is_float_dtype(x.dtype):
            nans = int(be.isnan(flat).sum())
            if nans and not ignore_nan:
                return s[-1].reshape(())
            n = flat.size - nans
            if n == 0:
                return s[0].reshape(())
        else:
            n = flat.size
        return s[(n - 1) // 2].reshape(())


class NanMedian(Median):
    """Median of all non-NaN elements (lower middle value); NaN when all are NaN."""

    schema = OpSchema("nanmedian", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int"))


class MedianDim(ValueSelectingOp):
    """``(values, indices)`` of the lower median along ``dim``; the index is the one a stable sort puts in
    the middle (NaN anywhere in the slice gives NaN and the index of its first NaN)."""

    schema = OpSchema("median_dim", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int"))

    @staticmethod
    def forward(be, x, dim, keepdim, ignore_nan):
        if x.ndim == 0:
            return scalar_selection(be, x)
        n = x.shape[dim]
        idx, nans = _sorted_with_nan_count(be, x, dim)
        if nans is None:
            pos = be.full(x.shape[:dim] + (1,) + x.shape[dim + 1:], (n - 1) // 2, dtype="int64")
        elif ignore_nan:
            m = n - nans
            pos = be.where(m > 0, (m - 1) // 2, 0).astype("int64")
        else:
            pos = be.where(nans > 0, n - nans, (n - 1) // 2).astype("int64")
        return select_at(be, x, be.take_along_axis(idx, pos, axis=dim).astype("int64"), dim, keepdim)


class NanMedianDim(MedianDim):
    """``(values, indices)`` of the lower median of the non-NaN elements along ``dim``."""

    schema = OpSchema("nanmedian_dim", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int"))


def _median(name, cls_all, cls_dim, input, dim, keepdim, ignore_nan):
    check_tensor(input, name)
    if input.dtype.is_complex or input.dtype is _dt.bool_:  # checked here: the error names the function called
        why = "complex numbers have no order" if input.dtype.is_complex else "PyTorch has no bool median kernel"
        raise DtypeMismatch(f"{name}: input has dtype {input.dtype.name}; {name} accepts float and int tensors "
                            f"({why})")
    if dim is None:
        return apply(cls_all, (input,), {"axes": None, "keepdim": False, "ignore_nan": ignore_nan})
    d = _single_dim(name, input, dim)
    return ValuesIndices(*apply(cls_dim, (input,), {"dim": d, "keepdim": bool(keepdim), "ignore_nan": ignore_nan}))


@declare(Median)
def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """Median: without ``dim``, the lower of the two middle values of all elements (a Tensor);
    with ``dim``, ``(values, indices)`` along it. NaN propagates (see :func:`nanmedian`).

    >>> import pylucid
    >>> pylucid.median(pylucid.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    >>> pylucid.median(pylucid.tensor([[4.0, 1.0, 3.0]]), dim=1)
    ValuesIndices(values=tensor([3.]), indices=tensor([2]))
    """
    return _median("median", Median, MedianDim, input, dim, keepdim, False)


@declare(NanMedian)
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """:func:`median` ignoring NaN (a slice of NaN only gives NaN).

    >>> import pylucid
    >>> pylucid.nanmedian(pylucid.tensor([4.0, float("nan"), 1.0]))
    tensor(1.)
    """
    return _median("nanmedian", NanMedian, NanMedianDim, input, dim, keepdim, True)


class Mode(ValueSelectingOp):
    """Most frequent value along ``dim`` (the smallest among equally frequent ones) and its last index."""

    schema = OpSchema("mode", amp_policy=KEEP_INPUT, saves_output=True, family="reduction",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim):
        if x.ndim == 0:
            return scalar_selection(be, x)
        xl = be.moveaxis(x, dim, -1)
        lead = xl.shape[:-1]
        n = xl.shape[-1]
        rows = xl.reshape(-1, n)
        order = be.argsort(rows, axis=1, kind="stable")
        s = be.take_along_axis(rows, order, axis=1)
        pos = be.broadcast_to(be.arange(n), s.shape)
        differs = s[:, 1:] != s[:, :-1]
        is_start = be.concatenate([be.ones((s.shape[0], 1), dtype=bool), differs], axis=1)
        is_end = be.concatenate([differs, be.ones((s.shape[0], 1), dtype=bool)], axis=1)
        start = be.maximum.accumulate(be.where(is_start, pos, 0), axis=1)
        end = be.flip(be.minimum.accumulate(be.flip(be.where(is_end, pos, n), axis=1), axis=1), axis=1)
        best = be.argmax(end - start, axis=1)  # first longest run: the smallest value among ties
        r = be.arange(s.shape[0])
        values = s[r, best].reshape(lead)
        # the last occurrence of the value: a stable sort puts it at the end of its run
        indices = order[r, end[r, best]].astype("int64").reshape(lead)
        if keepdim:
            values, indices = be.expand_dims(values, dim), be.expand_dims(indices, dim)
        return values, indices


@declare(Mode)
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of equally frequent ones)
    and the index of its last occurrence (PyTorch's CPU rule).

    >>> import pylucid
    >>> pylucid.mode(pylucid.tensor([3.0, 1.0, 3.0, 1.0, 2.0]))
    ValuesIndices(values=tensor(1.), indices=tensor(3))
    """
    check_tensor(input, "mode")
    d = _single_dim("mode", input, dim)
    return ValuesIndices(*apply(Mode, (input,), {"dim": d, "keepdim": bool(keepdim)}))



# ------------------------------------------------------------------------------------------ aminmax / dist / renorm
_MinMaxResult = namedtuple("aminmax", ["min", "max"])


@declare()
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """``(min, max)`` over ``dim`` (all dims when ``None``), a named tuple; composite of :func:`amin` and
    :func:`amax`, so tied positions share each gradient.

    >>> import pylucid
    >>> pylucid.aminmax(pylucid.tensor([[1.0, 2.0], [3.0, 0.0]]), dim=1)
    aminmax(min=tensor([1., 0.]), max=tensor([2., 3.]))
    """
    check_tensor(input, "aminmax")
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"aminmax: dim must be an int or None, got {type(dim).__name__} {dim!r}")
    d = () if dim is None else dim
    return _MinMaxResult(_minmax(Min, "aminmax", input, d, keepdim), _minmax(Max, "aminmax", input, d, keepdim))


@declare()
def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcasting), a 0-d tensor: composite of ``sub`` and ``norm``.

    The gradient where ``input == other`` is 0 (the norm's subgradient at zero, as PyTorch).

    >>> import pylucid
    >>> pylucid.dist(pylucid.tensor([1.0, 2.0]), pylucid.tensor([4.0, 6.0])), pylucid.dist(
    ...     pylucid.tensor([1.0, 2.0]), pylucid.tensor([4.0, 6.0]), p=1)
    (tensor(5.), tensor(7.))
    """
    from .elementwise import sub

    check_tensor(input, "dist")
    check_tensor(other, "dist", "other")
    if isinstance(p, str) or p is None:
        raise TypeError(f"dist: p must be a number, got {p!r}")
    with input._device.backend.errstate():  # inf - inf is NaN, as PyTorch
        return norm(sub(input, other), p)


@declare(inplace=True)
def renorm(input: Tensor, p, dim: int, maxnorm) -> Tensor:
    """Each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` is scaled to norm ``maxnorm``:
    ``x * maxnorm / (norm + 1e-7)`` where ``norm > maxnorm`` (PyTorch's formula), else unchanged.

    A composite of ``norm`` and ``where``; the gradient includes the norm's dependence on ``x``.

    >>> import pylucid
    >>> pylucid.renorm(pylucid.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0).round(decimals=4)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    from .elementwise import add, div, mul
    from .indexing import where

    check_tensor(input, "renorm")
    if isinstance(p, str) or not p > 0:
        raise ValueError(f"renorm: p must be a positive number, got {p!r}")
    if not maxnorm >= 0:
        raise ValueError(f"renorm: maxnorm must be non-negative, got {maxnorm!r}")
    if input.ndim <= 1:
        raise ValueError(f"renorm: input needs at least 2 dimensions, got {input.ndim}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeMismatch(f"renorm: expected a floating point or complex input, got {input.dtype}")
    d = norm_dims(dim, input.ndim, "renorm")[0]
    others = tuple(i for i in range(input.ndim) if i != d)
    with input._device.backend.errstate():  # an infinite slice: inf * 0 is NaN, as PyTorch
        n = norm(input, p, others, keepdim=True)
        factor = where(n > maxnorm, div(maxnorm, add(n, 1e-7)), 1.0)
        return mul(input, factor.to(input.dtype) if input.dtype.is_complex else factor)


# the statistics family (histograms, quantiles, cov, cdist) builds on the reductions above
from . import statistics  # noqa: E402,F401
