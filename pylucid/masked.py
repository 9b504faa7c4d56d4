"""``pylucid.masked``: reductions and normalizations that ignore masked-out elements, as ``torch.masked``.

Every function takes a boolean ``mask`` (``True`` = the element takes part) that broadcasts to the input's shape
(it may have fewer dimensions, never more). ``mask=None`` takes every element. A masked-out element is replaced
by the *identity* of the operation before the ordinary op runs, so it cannot change the result:

======================================  ========================================================
operation                               value a masked-out element takes
======================================  ========================================================
``sum``, ``cumsum``, ``normalize``      0
``prod``, ``cumprod``                   1
``amax``, ``argmax``, ``logsumexp``,    ``-inf`` (the smallest value of an integer dtype)
``softmax``, ``log_softmax``,
``logaddexp``
``amin``, ``argmin``, ``softmin``       ``+inf`` (the largest value of an integer dtype)
``norm``                                0 (``+inf`` for ``ord=-inf``)
``median``                              NaN (the median ignores NaN)
======================================  ========================================================

``mean``, ``var`` and ``std`` divide by the number of elements taken (minus the ``correction``); where every
element of a reduced slice is masked out the result is NaN (0/0), as ``torch.masked``. A fully masked-out
``amax`` slice gives ``-inf``, ``sum`` 0, a softmax row NaN.

The functions are composites of public ops (``where`` and the plain reductions), so gradients of every order
flow; a masked-out element's gradient is zero. ``dtype`` casts the result (``sum``/``prod`` of integer or bool
input default to int64; ``argmax``/``argmin`` return the input dtype unless ``dtype`` is given, as in PyTorch).

>>> import pylucid
>>> x = pylucid.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> m = pylucid.tensor([[True, False, True], [False, False, False]])
>>> pylucid.masked.sum(x, 1, mask=m)
tensor([4., 0.])
>>> pylucid.masked.amax(x, 1, mask=m)
tensor([3., -inf])
>>> pylucid.masked.mean(x, 1, mask=m)
tensor([2., nan])
"""

from __future__ import annotations

from . import creation as _creation
from . import dtypes as _dt
from . import linalg as _linalg
from . import ops as _ops
from ._tensor import Tensor as _Tensor
from .nn import functional as _F
from .ops.registry import declare as _declare
from .ops.registry import namespace as _namespace

_NS = ("pylucid.masked",)
_SMALL_INTS = frozenset((_dt.bool_, _dt.uint8, _dt.int8, _dt.int16, _dt.int32))


def _input_mask(name, input, mask):
    """``mask`` as a bool tensor of ``input``'s shape (broadcast; never more dimensions than ``input``)."""
    if not isinstance(mask, _Tensor):
        raise TypeError(f"masked.{name}: mask must be a bool Tensor or None, got {type(mask).__name__}")
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError(f"masked.{name}: mask has {mask.ndim} dimensions, more than input's {input.ndim}; "
                             "the mask must broadcast to the input's shape")
        mask = _ops.broadcast_to(mask, tuple(input.shape))
    if mask.dtype != _dt.bool_:
        mask = mask.to(_dt.bool_)
    return mask


def _int_bounds(dtype):
    bits = 8 * dtype.itemsize
    if dtype.is_signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _identity(name, input, ord=2.0):
    """The value that leaves the reduction ``name`` unchanged, as a Python scalar for ``input``'s dtype."""
    d = input.dtype
    if name in ("sum", "cumsum"):
        return 0
    if name in ("prod", "cumprod"):
        return 1
    if name == "norm":
        return float("inf") if ord == float("-inf") else 0
    if name == "median":
        return float("nan")
    low = name in ("amax", "argmax", "logaddexp", "logsumexp")
    if d.is_floating_point or d.is_complex:
        return float("-inf") if low else float("inf")
    if d == _dt.bool_:
        raise NotImplementedError(f"masked.{name}: the identity of {name} on bool input is not defined; "
                                  "accepted: integer, floating and complex inputs")
    lo, hi = _int_bounds(d)
    return lo if low else hi


def _combine(name, input, mask, ord=2.0):
    """``input`` with its masked-out elements replaced by the identity of ``name`` (``input`` itself without a
    mask)."""
    if mask is None:
        return input
    return _ops.where(_input_mask(name, input, mask), input, _identity(name, input, ord))


def _canonical_dims(name, dim, ndim):
    """``dim`` (None, ``()``, an int or a sequence) as a sorted tuple of non-negative dims; None and ``()`` reduce
    every dim."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    n = max(ndim, 1)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"masked.{name}: dim {d} is out of range for a {ndim}-d input "
                             f"(accepted: [{-n}, {n - 1}])")
        if d % n in out:
            raise RuntimeError(f"masked.{name}: dim {d} appears multiple times in the list of dims")
        out.append(d % n)
    return tuple(sorted(out))


def _cast(t, dtype):
    return t if dtype is None or t.dtype == dtype else t.to(dtype)


def _int64_default(input, dtype):
    if dtype is None:
        return _dt.int64 if input.dtype in _SMALL_INTS else input.dtype
    return dtype


def _reduce_dims(t, dims):
    """The reduction over ``dims`` of a 0-d tensor is the tensor itself (dims ``(0,)`` of a scalar)."""
    return () if t.ndim == 0 else dims


# ---------------------------------------------------------------- reductions
@_declare(namespaces=_NS, method=False)
def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001 - torch.masked's name
    """Sum of the elements where ``mask`` is True: :math:`\\sum_i x_i m_i` over ``dim`` (all dims for None).

    Masked-out elements count as 0; a fully masked-out slice sums to 0. Integer and bool inputs sum in int64
    unless ``dtype`` is given.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> pylucid.masked.sum(x, 0, mask=pylucid.tensor([True, False]))
    tensor([4., 0.])
    """
    dtype = _int64_default(input, dtype)
    dims = _canonical_dims("sum", dim, input.ndim)
    x = _combine("sum", input, mask)
    return _ops.sum(x, _reduce_dims(x, dims), keepdim=bool(keepdim), dtype=dtype)


@_declare(namespaces=_NS, method=False)
def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the elements where ``mask`` is True over ``dim`` (all dims for None); masked-out elements count
    as 1. Integer and bool inputs multiply in int64 unless ``dtype`` is given.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> pylucid.masked.prod(x, 1, mask=pylucid.tensor([[True, True], [False, True]]))
    tensor([2., 4.])
    """
    dtype = _int64_default(input, dtype)
    dims = _canonical_dims("prod", dim, input.ndim)
    x = _cast(_combine("prod", input, mask), dtype)
    if x.ndim == 0:
        return x
    for d in reversed(dims):
        x = _ops.prod(x, d, keepdim=bool(keepdim))
    return x


@_declare(namespaces=_NS, method=False)
def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest element where ``mask`` is True over ``dim`` (all dims for None); a fully masked-out slice gives
    ``-inf`` (the smallest value of an integer dtype). The gradient is shared among equal maxima, as ``amax``.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0], [3.0, 4.0]])
    >>> pylucid.masked.amax(x, 1, mask=pylucid.tensor([True, False]))
    tensor([1., 3.])
    """
    x = _combine("amax", input, mask)
    dims = _canonical_dims("amax", dim, x.ndim)
    return _cast(_ops.amax(x, _reduce_dims(x, dims), keepdim=bool(keepdim)), dtype)


@_declare(namespaces=_NS, method=False)
def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest element where ``mask`` is True over ``dim`` (all dims for None); a fully masked-out slice gives
    ``+inf`` (the largest value of an integer dtype).

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0], [3.0, 4.0]])
    >>> pylucid.masked.amin(x, 1, mask=pylucid.tensor([False, True]))
    tensor([5., 4.])
    """
    x = _combine("amin", input, mask)
    dims = _canonical_dims("amin", dim, x.ndim)
    return _cast(_ops.amin(x, _reduce_dims(x, dims), keepdim=bool(keepdim)), dtype)


@_declare(namespaces=_NS, method=False)
def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest element where ``mask`` is True, along ``dim`` (of the flattened input for None).

    As ``torch.masked.argmax``, the indices are cast to ``dtype``, which defaults to the *input's* dtype.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0, 2.0]])
    >>> pylucid.masked.argmax(x, 1, mask=pylucid.tensor([True, False, True]), dtype=pylucid.int64)
    tensor([2])
    """
    dtype = input.dtype if dtype is None else dtype
    x = _combine("argmax", input, mask)
    return _cast(_ops.argmax(x, dim, keepdim=bool(keepdim)), dtype)


@_declare(namespaces=_NS, method=False)
def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest element where ``mask`` is True, along ``dim`` (of the flattened input for None);
    cast to ``dtype``, which defaults to the input's dtype, as ``torch.masked.argmin``.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 5.0, 2.0]])
    >>> pylucid.masked.argmin(x, 1, mask=pylucid.tensor([False, True, True]), dtype=pylucid.int64)
    tensor([2])
    """
    dtype = input.dtype if dtype is None else dtype
    x = _combine("argmin", input, mask)
    return _cast(_ops.argmin(x, dim, keepdim=bool(keepdim)), dtype)


def _count(name, input, dim, keepdim, mask):
    """Number of elements taken per reduced slice (int64)."""
    dims = _canonical_dims(name, dim, input.ndim)
    if mask is None:
        ones = _creation.ones(tuple(input.shape), dtype=_dt.int64, device=input.device)
    else:
        ones = _input_mask(name, input, mask).to(_dt.int64)
    return _ops.sum(ones, _reduce_dims(ones, dims), keepdim=bool(keepdim))


@_declare(namespaces=_NS, method=False)
def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the elements where ``mask`` is True: :math:`\\sum_i x_i m_i / \\sum_i m_i` over ``dim``; NaN
    where a slice is fully masked out. The result dtype (``dtype`` or the input's) must be floating or complex.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 2.0, 6.0]])
    >>> pylucid.masked.mean(x, 1, mask=pylucid.tensor([True, False, True]))
    tensor([3.5000])
    """
    out = input.dtype if dtype is None else dtype
    if not (out.is_floating_point or out.is_complex):
        raise ValueError(f"masked.mean: could not infer the output dtype: {'dtype' if dtype else 'input'} dtype "
                         f"{out} given; accepted: a floating point or complex dtype")
    total = sum(input, dim, keepdim=keepdim, dtype=out, mask=mask)
    return total / _count("mean", input, dim, keepdim, mask)


@_declare(namespaces=_NS, method=False)
def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of the elements where ``mask`` is True along the one dim ``dim`` (the lower of the two middle
    values for an even count, as ``torch.median``); NaN where a slice is fully masked out. Integer input is
    reduced in float32 and cast back, which needs every slice to keep an element.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 9.0, 2.0, 3.0]])
    >>> pylucid.masked.median(x, 1, mask=pylucid.tensor([True, False, True, True]))
    tensor([2.])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dims("median", dim, input.ndim)[0]
    is_float = input.dtype.is_floating_point
    if not is_float:
        input = input.to(_dt.float32)
    x = _combine("median", input, mask)
    out = _ops.nanmedian(x, d, keepdim=bool(keepdim)).values
    if is_float:
        return out
    if bool(_ops.isnan(out).any()):
        raise ValueError("masked.median: a fully masked-out slice has no median for a non-floating dtype "
                         f"({dtype}); accepted: every slice keeps an element, or a floating input")
    return out.to(dtype)


@_declare(namespaces=_NS, method=False)
def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """:math:`\\log \\sum_i m_i e^{x_i}` over ``dim``: masked-out elements count as ``-inf``; a fully masked-out
    slice gives ``-inf``.

    >>> import pylucid
    >>> x = pylucid.tensor([[0.0, 5.0, 0.0]])
    >>> pylucid.masked.logsumexp(x, 1, mask=pylucid.tensor([True, False, True])).round(decimals=4)
    tensor([0.6931])
    """
    dtype = input.dtype if dtype is None else dtype
    x = _combine("logsumexp", input, mask)
    dims = _canonical_dims("logsumexp", dim, x.ndim)
    return _cast(_ops.logsumexp(x, _reduce_dims(x, dims), keepdim=bool(keepdim)), dtype)


@_declare(namespaces=_NS, method=False)
def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Vector ``ord``-norm (as ``linalg.vector_norm``) of the elements where ``mask`` is True over ``dim``;
    masked-out elements count as 0 (``+inf`` for ``ord=-inf``).

    >>> import pylucid
    >>> x = pylucid.tensor([[3.0, 7.0, 4.0]])
    >>> pylucid.masked.norm(x, 2.0, 1, mask=pylucid.tensor([True, False, True]))
    tensor([5.])
    """
    dtype = input.dtype if dtype is None else dtype
    x = _combine("norm", input, mask, ord)
    dims = _canonical_dims("norm", dim, input.ndim)
    return _linalg.vector_norm(x, ord, _reduce_dims(x, dims) or None, bool(keepdim), dtype=dtype)


def _std_var(name, input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction is not None:
        raise ValueError(f"masked.{name}: give unbiased or correction, not both")
    corr = 1.0
    if unbiased is not None:
        corr = 1.0 if unbiased else 0.0
    if correction is not None:
        corr = float(correction)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex else _dt.float32
    compute = dtype if dtype.is_floating_point or dtype.is_complex else _dt.float32
    inmask = None if mask is None else _input_mask(name, input, mask)
    count = _count(name, input, dim, True, inmask)
    sample_mean = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask) / count
    x = input - sample_mean
    sq = x * x.conj() if x.is_complex() else x * x
    total = sum(sq, dim, keepdim=keepdim, dtype=compute, mask=inmask)
    if not keepdim:
        count = count.reshape(tuple(total.shape))
    if corr != 0:
        real = compute.to_real() if compute.is_complex else compute
        count = _ops.clamp(count.to(real) - corr, min=0)
    out = _cast(total / count, dtype)
    return _ops.sqrt(out) if take_sqrt else out


@_declare(namespaces=_NS, method=False)
def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Variance of the elements where ``mask`` is True: :math:`\\sum_i m_i |x_i - \\bar x|^2 / (N - c)` with
    :math:`N = \\sum_i m_i` and ``c`` the ``correction`` (1 by default; ``unbiased=False`` is 0); the divisor is
    clamped at 0, so a slice with ``N <= c`` gives inf or NaN. Integer input is reduced in float32.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 9.0, 3.0]])
    >>> pylucid.masked.var(x, 1, mask=pylucid.tensor([True, False, True]))
    tensor([2.])
    """
    return _std_var("var", input, dim, unbiased, correction, keepdim, dtype, mask, False)


@_declare(namespaces=_NS, method=False)
def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Standard deviation of the elements where ``mask`` is True: the square root of :func:`var`.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 9.0, 5.0]])
    >>> pylucid.masked.std(x, 1, mask=pylucid.tensor([True, False, True]), correction=0)
    tensor([2.])
    """
    return _std_var("std", input, dim, unbiased, correction, keepdim, dtype, mask, True)


# ---------------------------------------------------------------- scans and normalizations
def _one_dim(name, dim, ndim):
    return _canonical_dims(name, dim, ndim)[0]


@_declare(namespaces=_NS, method=False)
def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum along ``dim`` where masked-out elements count as 0 (they repeat the running sum).

    >>> import pylucid
    >>> pylucid.masked.cumsum(pylucid.tensor([1.0, 2.0, 3.0]), 0, mask=pylucid.tensor([True, False, True]))
    tensor([1., 1., 4.])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _one_dim("cumsum", dim, input.ndim)
    return _cast(_ops.cumsum(_combine("cumsum", input, mask), d, dtype=dtype), dtype)


@_declare(namespaces=_NS, method=False)
def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product along ``dim`` where masked-out elements count as 1.

    >>> import pylucid
    >>> pylucid.masked.cumprod(pylucid.tensor([2.0, 5.0, 3.0]), 0, mask=pylucid.tensor([True, False, True]))
    tensor([2., 2., 6.])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _one_dim("cumprod", dim, input.ndim)
    return _cast(_ops.cumprod(_combine("cumprod", input, mask), d, dtype=dtype), dtype)


@_declare(namespaces=_NS, method=False)
def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along ``dim`` over the elements where ``mask`` is True (masked-out ones count as ``-inf`` and
    get 0); a fully masked-out row is NaN.

    >>> import pylucid
    >>> pylucid.masked.softmax(pylucid.tensor([1.0, 7.0, 1.0]), 0, mask=pylucid.tensor([True, False, True]))
    tensor([0.5000, 0.0000, 0.5000])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _one_dim("softmax", dim, input.ndim)
    return _F.softmax(_combine("amax", input, mask), d, dtype=dtype)


@_declare(namespaces=_NS, method=False)
def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax along ``dim`` over the elements where ``mask`` is True (masked-out ones give ``-inf``).

    >>> import pylucid
    >>> y = pylucid.masked.log_softmax(pylucid.tensor([1.0, 7.0, 1.0]), 0, mask=pylucid.tensor([True, False, True]))
    >>> y.exp()
    tensor([0.5000, 0.0000, 0.5000])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _one_dim("log_softmax", dim, input.ndim)
    return _F.log_softmax(_combine("amax", input, mask), d, dtype=dtype)


@_declare(namespaces=_NS, method=False)
def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin (the softmax of ``-input``) along ``dim`` over the elements where ``mask`` is True (masked-out
    ones count as ``+inf`` and get 0).

    >>> import pylucid
    >>> pylucid.masked.softmin(pylucid.tensor([1.0, -7.0, 1.0]), 0, mask=pylucid.tensor([True, False, True]))
    tensor([0.5000, 0.0000, 0.5000])
    """
    dtype = input.dtype if dtype is None else dtype
    d = _one_dim("softmin", dim, input.ndim)
    return _F.softmin(_combine("amin", input, mask), d, dtype=dtype)


@_declare(namespaces=_NS, method=False)
def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """``input / max(norm(input, ord, dim, mask=mask), eps)`` with the masked-out elements set to 0.

    >>> import pylucid
    >>> x = pylucid.tensor([3.0, 9.0, 4.0])
    >>> pylucid.masked.normalize(x, 2.0, 0, mask=pylucid.tensor([True, False, True]))
    tensor([0.6000, 0.0000, 0.8000])
    """
    dtype = input.dtype if dtype is None else dtype
    x = _combine("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return x / _ops.clamp(nrm, min=eps)


@_declare(namespaces=_NS, method=False)
def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """:math:`\\log(e^{x} + e^{y})` element-wise, where masked-out elements of ``input`` (``input_mask``) and of
    ``other`` (``other_mask``) count as ``-inf``.

    >>> import pylucid
    >>> x, y = pylucid.tensor([-100.0, -200.0]), pylucid.tensor([-1.0, -2.0])
    >>> m = pylucid.tensor([True, False])
    >>> pylucid.masked.logaddexp(x, y, input_mask=m, other_mask=m)
    tensor([-1., -inf])
    """
    dtype = input.dtype if dtype is None else dtype
    a = _combine("logaddexp", input, input_mask)
    b = _combine("logaddexp", other, other_mask)
    return _cast(_ops.logaddexp(a, b), dtype)


__all__ = sorted(_namespace("pylucid.masked"))
