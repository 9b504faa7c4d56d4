"""Statistics: counts and histograms (``bincount histc histogram histogramdd``), quantiles (``quantile nanquantile``),
covariance and correlation (``cov corrcoef``) and pairwise distances (``cdist``).

The counting ops are primitives with integer or count outputs and no
gradient. The others are composites of differentiable public ops (``sort``
and ``take_along_dim`` for the quantiles, ``matmul`` for ``cov``, ``norm``
or ``matmul`` for ``cdist``), so their gradients of every order come from
those ops' backwards.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

from .. import dtypes as _dt
from .._tensor import Tensor, _new_tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor, is_float_dtype, norm_dim
from .registry import declare
from .schema import KEEP_INPUT, OpSchema

_HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def _check_float(op, x, what="input", half=True):
    """A ``DtypeMismatch`` unless ``x`` is floating (``half=False``: float32 or float64 only, for the ops that
    PyTorch has no float16/bfloat16 kernel for: quantile, histogram, histogramdd)."""
    if not is_float_dtype(x._data.dtype) or (not half and x._data.dtype.itemsize == 2):
        accepted = "float16, bfloat16, float32, float64" if half else "float32, float64"
        raise DtypeMismatch(f"{op}: {what} must be a floating point tensor, got {x.dtype}; accepted: {accepted}")


# ------------------------------------------------------------------------------------------ bincount
class Bincount(Op):
    """Occurrences (or summed ``weights``) of each non-negative integer; not differentiable."""

    schema = OpSchema("bincount", amp_policy=KEEP_INPUT, differentiable=False, family="statistics")
    promote_args = ()  # the counts' dtype comes from the weights alone

    @staticmethod
    def forward(be, x, weights, *, minlength):
        if weights is None:
            return be.bincount(x, minlength=minlength).astype("int64")
        out_dtype = weights.dtype if weights.dtype.kind == "f" and weights.dtype.itemsize >= 4 else "float64"
        return be.bincount(x, weights=weights.astype("float64"), minlength=minlength).astype(out_dtype)


@declare(Bincount)
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Count each value of a 1-d tensor of non-negative integers: ``out[v]`` is the number of ``v`` in
    ``input`` (or the sum of their ``weights``); the length is ``max(input) + 1`` or ``minlength``.

    Counts are int64; with ``weights`` the dtype of float32/float64 weights
    (float64 otherwise), as PyTorch.

    >>> import pylucid
    >>> pylucid.bincount(pylucid.tensor([1, 1, 3])), pylucid.bincount(pylucid.tensor([0, 2]), minlength=4)
    (tensor([0, 2, 0, 1]), tensor([1, 0, 1, 0]))
    """
    check_tensor(input, "bincount")
    if input.ndim != 1 or input._data.dtype.kind not in "iu":
        raise ValueError(f"bincount: input must be a 1-d tensor of non-negative integers, got {input.ndim}-d "
                         f"{input.dtype}")
    if not isinstance(minlength, int) or minlength < 0:
        raise ValueError(f"bincount: minlength must be a non-negative int, got {minlength!r}")
    be = input._device.backend
    if input.numel() and bool(be.any(input._data < 0)):
        raise ValueError("bincount: input must contain non-negative integers only")
    if weights is not None:
        check_tensor(weights, "bincount", "weights")
        if tuple(weights.shape) != tuple(input.shape):
            raise ShapeMismatch(f"bincount: weights must have input's shape {tuple(input.shape)}, got "
                                f"{tuple(weights.shape)}")
    return apply(Bincount, (input, weights), {"minlength": minlength})


# ------------------------------------------------------------------------------------------ histc / histogram
def _data_range(be, x, op):
    """``(min, max)`` of the data (None when empty); a NaN or infinite one raises, as PyTorch."""
    if x.size == 0:
        return None
    with be.errstate():
        lo, hi = float(be.min(x)), float(be.max(x))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{op}: the data's range [{lo}, {hi}] is not finite; give the range explicitly")
    return lo, hi


class Histc(Op):
    """``bins`` equal-width bins over ``[min, max]`` (the data's range when ``min == max``); not differentiable.

    A value's bin is ``floor((x - min) * bins / (max - min))`` computed in the
    input's dtype, ``max`` itself in the last bin (PyTorch's formula); values
    outside the range and NaN are not counted.
    """

    schema = OpSchema("histc", amp_policy=KEEP_INPUT, differentiable=False, family="statistics")

    @staticmethod
    def forward(be, x, *, bins, min, max):  # noqa: A002 - torch's names
        lo, hi = (min, max) if min != max else (_data_range(be, x, "histc") or (0.0, 0.0))
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        t = x.dtype.type
        lo, hi = t(lo), t(hi)
        with be.errstate():
            inside = (x >= lo) & (x <= hi)
            pos = be.floor((x - lo) * t(bins) / (hi - lo))
        pos = be.clip(be.where(inside, pos, 0), 0, bins - 1).astype("int64")
        return be.bincount(pos[inside], minlength=bins).astype(x.dtype)


@declare(Histc)
def histc(input: Tensor, bins: int = 100, min=0, max=0) -> Tensor:  # noqa: A002 - mirrors torch.histc
    """Histogram of ``input`` with ``bins`` equal-width bins between ``min`` and ``max``.

    When ``min == max`` the data's minimum and maximum are used (widened by 1
    on each side if they are equal too). Values outside the range are
    ignored; the result has ``input``'s floating dtype.

    >>> import pylucid
    >>> pylucid.histc(pylucid.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    check_tensor(input, "histc")
    _check_float("histc", input)
    if not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"histc: bins must be a positive int, got {bins!r}")
    if not (math.isfinite(min) and math.isfinite(max)):
        raise ValueError(f"histc: range of [{min}, {max}] is not finite")
    if min > max:
        raise ValueError(f"histc: max must be larger than or equal to min, got min={min} and max={max}")
    return apply(Histc, (input,), {"bins": bins, "min": float(min), "max": float(max)})


def _even_edges(lo: float, hi: float, bins: int, like: Tensor) -> Tensor:
    """``bins + 1`` equal-width bin edges from ``lo`` to ``hi`` in ``like``'s dtype: ``linspace``, as PyTorch
    builds them (its values to the last bit, so a value lying on an edge falls in PyTorch's bin)."""
    from ..creation import linspace

    return linspace(lo, hi, bins + 1, dtype=like.dtype, device=like.device)


class Histogram(Op):
    """Counts (or summed weights) of ``input`` in the bins between consecutive ``edges``; the last bin includes
    its right edge. Optionally normalised to a density. Not differentiable."""

    schema = OpSchema("histogram", amp_policy=KEEP_INPUT, differentiable=False, family="statistics")
    promote_args = (0, 1)  # the weights' dtype does not change the input's

    @staticmethod
    def forward(be, x, edges, weight, *, density):
        x = x.reshape(-1)
        nb = edges.shape[0] - 1
        inside = (x >= edges[0]) & (x <= edges[-1])
        pos = be.searchsorted(edges, x, side="right") - 1
        pos = be.clip(pos, 0, nb - 1)
        w = None if weight is None else weight.reshape(-1)[inside].astype("float64")
        hist = be.bincount(pos[inside], weights=w, minlength=nb)[:nb].astype(x.dtype)
        if density:
            with be.errstate():
                hist = hist / (be.sum(hist) * (edges[1:] - edges[:-1]))
        return hist


@declare(Histogram)
def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False):
    """``(hist, bin_edges)``: a histogram of ``input`` (a named tuple).

    ``bins``: an int (that many equal-width bins over ``range``, default the
    data's ``(min, max)``, widened by 0.5 each side when they are equal) or a
    1-d tensor of increasing edges. Each bin holds ``edges[i] <= x < edges[i+1]``,
    the last one also its right edge. ``weight`` (``input``'s shape) sums
    weights instead of counting; ``density=True`` divides by the total and the
    bin widths.

    >>> import pylucid
    >>> h = pylucid.histogram(pylucid.tensor([1.0, 2.0, 1.0]), bins=4, range=(0.0, 4.0))
    >>> h.hist, h.bin_edges
    (tensor([0., 2., 1., 0.]), tensor([0., 1., 2., 3., 4.]))
    """
    check_tensor(input, "histogram")
    _check_float("histogram", input, half=False)
    be = input._device.backend
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.numel() < 1:
            raise ValueError(f"histogram: bins must be an int or a 1-d tensor of edges, got shape {tuple(bins.shape)}")
        if range is not None:
            raise TypeError("histogram: range cannot be given with a tensor of bin edges")
        edges = bins.to(input.dtype).detach()
        if bins.numel() > 1 and bool(be.any(edges._data[1:] < edges._data[:-1])):
            raise ValueError("histogram: bin edges must be increasing")
    else:
        if not isinstance(bins, int) or bins <= 0:
            raise ValueError(f"histogram: bins must be a positive int or a 1-d tensor, got {bins!r}")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
            if lo > hi:
                raise ValueError(f"histogram: range must be (min, max) with min <= max, got {tuple(range)}")
        else:
            lo, hi = _data_range(be, input._data, "histogram") or (0.0, 1.0)  # PyTorch's range for no data
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = _even_edges(lo, hi, bins, input)
    if weight is not None:
        check_tensor(weight, "histogram", "weight")
        if tuple(weight.shape) != tuple(input.shape):
            raise ShapeMismatch(f"histogram: weight must have input's shape {tuple(input.shape)}, got "
                                f"{tuple(weight.shape)}")
    hist = apply(Histogram, (input.detach(), edges, None if weight is None else weight.detach()),
                 {"density": bool(density)})
    return _HistogramResult(hist, edges)


_HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


class Histogramdd(Op):
    """The ``D``-dimensional histogram of the rows of ``x`` (``(N, D)``) over the bins between consecutive
    ``edges`` of each dim (the last bin of a dim includes its right edge); not differentiable."""

    schema = OpSchema("histogramdd", amp_policy=KEEP_INPUT, differentiable=False, family="statistics")
    promote_args = ()  # the edges already have the input's dtype, the weights keep theirs

    @staticmethod
    def forward(be, x, weight, *edges, density):
        n_bins = tuple(int(e.shape[0]) - 1 for e in edges)
        inside = be.ones(x.shape[0], dtype=bool)
        flat = be.zeros(x.shape[0], dtype="int64")
        for k, e in enumerate(edges):
            col = x[:, k]
            inside &= (col >= e[0]) & (col <= e[-1])
            pos = be.clip(be.searchsorted(e, col, side="right") - 1, 0, n_bins[k] - 1)
            flat = flat * n_bins[k] + pos
        total = 1
        for nb in n_bins:
            total *= nb
        w = None if weight is None else weight.reshape(-1)[inside].astype("float64")
        hist = be.bincount(flat[inside], weights=w, minlength=total)[:total].reshape(n_bins).astype(x.dtype)
        if density:
            volume = be.ones(n_bins, dtype=x.dtype)
            for k, e in enumerate(edges):
                shape = [1] * len(edges)
                shape[k] = n_bins[k]
                volume = volume * (e[1:] - e[:-1]).reshape(shape)
            with be.errstate():
                hist = hist / (be.sum(hist) * volume)
        return hist


@declare(Histogramdd, method=False)
def histogramdd(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None,  # noqa: A002
                density: bool = False):
    """``(hist, bin_edges)``: the histogram of the points in the rows of ``input`` (``(..., D)``, ``D``
    coordinates per point), with ``hist`` of shape ``(bins_0, ..., bins_{D-1})`` and one edges tensor per dim.

    ``bins``: an int (every dim), a list of ints, or a list of 1-d edge
    tensors. ``range``: ``[min_0, max_0, min_1, max_1, ...]`` for int bins
    (default: each dim's data range). ``weight`` (one per point) and
    ``density`` as in :func:`histogram`.

    >>> import pylucid
    >>> h = pylucid.histogramdd(pylucid.tensor([[0.0, 0.0], [1.0, 1.0]]), bins=2, range=[0.0, 2.0, 0.0, 4.0])
    >>> h.hist
    tensor([[1., 0.],
            [1., 0.]])
    """
    check_tensor(input, "histogramdd")
    _check_float("histogramdd", input, half=False)
    if input.ndim < 1:
        raise ValueError("histogramdd: input must have at least one dimension (..., D)")
    D = input.shape[-1]
    x = input.detach().reshape(-1, D)
    be = input._device.backend
    if isinstance(bins, int):
        bins = [bins] * D
    bins = list(bins)
    if len(bins) != D:
        raise ValueError(f"histogramdd: expected {D} bin specifications (one per dim), got {len(bins)}")
    if range is not None:
        if any(isinstance(b, Tensor) for b in bins):
            raise TypeError("histogramdd: range cannot be given with tensors of bin edges")
        if len(range) != 2 * D:
            raise ValueError(f"histogramdd: range must have 2 * {D} entries [min_0, max_0, ...], got {len(range)}")
    edges = []
    for k, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.ndim != 1 or b.numel() < 1:
                raise ValueError(f"histogramdd: the edges of dim {k} must be a non-empty 1-d tensor")
            edges.append(b.to(input.dtype).detach())
            continue
        if not isinstance(b, int) or b <= 0:
            raise ValueError(f"histogramdd: bins must be positive ints or 1-d tensors, got {b!r} for dim {k}")
        if range is not None:
            lo, hi = float(range[2 * k]), float(range[2 * k + 1])
            if lo > hi:
                raise ValueError(f"histogramdd: range of dim {k} must have min <= max, got [{lo}, {hi}]")
        else:
            lo, hi = _data_range(be, x._data[:, k], "histogramdd") or (0.0, 1.0)
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(_even_edges(lo, hi, b, input))
    if weight is not None:
        check_tensor(weight, "histogramdd", "weight")
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise ShapeMismatch(f"histogramdd: weight must have shape {tuple(input.shape[:-1])} (one per point), got "
                                f"{tuple(weight.shape)}")
        weight = weight.detach()
    hist = apply(Histogramdd, (x, weight, *edges), {"density": bool(density)})
    return _HistogramddResult(hist, tuple(edges))


# ------------------------------------------------------------------------------------------ quantile
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    from .elementwise import lerp
    from .indexing import take_along_dim
    from .shape import movedim, reshape, unsqueeze
    from .sorting import sort

    check_tensor(input, name)
    _check_float(name, input, half=False)
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {list(_INTERPOLATIONS)}, got {interpolation!r}")
    be = input._device.backend
    np_dt = input._data.dtype
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ValueError(f"{name}: q must be a number or a 0-d/1-d tensor, got shape {tuple(q.shape)}")
        if q.dtype != input.dtype:
            raise DtypeMismatch(f"{name}: q must have input's dtype {input.dtype}, got {q.dtype}")
        if q.device != input.device:
            q = q.to(input.device)
        scalar_q = q.ndim == 0
        qa = q._data.reshape(-1)
    elif isinstance(q, (int, float)) and not isinstance(q, bool):
        scalar_q = True
        qa = be.asarray([q], dtype=np_dt)
    else:
        raise TypeError(f"{name}: q must be a number or a tensor, got {type(q).__name__}")
    if qa.size and not bool(be.all((qa >= 0) & (qa <= 1))):
        raise ValueError(f"{name}: q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise ValueError(f"{name}: input tensor must be non-empty")
    if dim is None:
        x = reshape(input, (-1,))
        d = None
    else:
        d = norm_dim(dim, max(input.ndim, 1), name)
        x = movedim(input, d, -1) if input.ndim else reshape(input, (1,))
    srt = sort(x, dim=-1).values  # NaN sorts last
    sd = srt._data
    n = sd.shape[-1]
    with be.errstate():
        # the ranks, in the input's dtype as PyTorch computes them: (..., Q)
        if ignore_nan:
            rank_scale = be.sum(~be.isnan(sd), axis=-1, keepdims=True).astype(np_dt) - np_dt.type(1)
            ranks = qa * rank_scale
            fixed = ranks < 0  # an all-NaN slice: rank 0, a NaN
            ranks = be.where(fixed, np_dt.type(0), ranks)
        else:
            rank_scale = np_dt.type(n - 1)
            ranks = be.broadcast_to(qa * rank_scale, sd.shape[:-1] + qa.shape)
            fixed = be.broadcast_to(be.isnan(sd[..., -1:]), ranks.shape)  # a slice with NaN: its last value
            ranks = be.where(fixed, np_dt.type(n - 1), ranks)
    if interpolation == "lower":
        ranks = be.floor(ranks)
    elif interpolation == "higher":
        ranks = be.ceil(ranks)
    elif interpolation == "nearest":
        ranks = be.round(ranks)
    dev = input._device
    below_idx = ranks.astype("int64")
    out = take_along_dim(srt, _new_tensor(below_idx, dev), -1)
    if interpolation in ("linear", "midpoint"):
        above = take_along_dim(srt, _new_tensor(be.ceil(ranks).astype("int64"), dev), -1)
        if interpolation == "midpoint":
            w = _new_tensor(be.full(ranks.shape, 0.5, dtype=np_dt), dev)
        elif isinstance(q, Tensor) and q.requires_grad:
            w = _rank_weight(q, ranks, below_idx, rank_scale, fixed, dev)
        else:
            w = _new_tensor(ranks - below_idx.astype(np_dt), dev)
        out = lerp(out, above, w)
    out = movedim(out, -1, 0)  # (Q, ...)
    if scalar_q:
        out = reshape(out, tuple(out.shape[1:]))
    if keepdim:
        lead = () if scalar_q else (out.shape[0],)
        if d is None:
            out = reshape(out, lead + (1,) * input.ndim)
        elif input.ndim:
            out = unsqueeze(out, d + len(lead))
    return out


def _rank_weight(q, ranks, below_idx, rank_scale, fixed, dev):
    """The linear interpolation weight ``q * scale - floor(rank)`` as a graph function of ``q`` (PyTorch
    differentiates the weight with respect to ``q``); constant where the rank was fixed by NaN."""
    from .elementwise import mul, sub
    from .indexing import where
    from .shape import reshape

    np_dt = ranks.dtype
    scale = _new_tensor(rank_scale if hasattr(rank_scale, "shape") else dev.backend.asarray(rank_scale), dev)
    w = sub(mul(reshape(q, (-1,)), scale), _new_tensor(below_idx.astype(np_dt), dev))
    return where(_new_tensor(fixed, dev), _new_tensor(ranks - below_idx.astype(np_dt), dev), w)


@declare()
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles of ``input`` over ``dim`` (the flattened input when ``None``).

    With the sorted values ``v`` of a slice of ``n`` elements the rank is
    ``q (n - 1)``; ``interpolation`` picks between the values at
    ``floor(rank)`` and ``ceil(rank)``: ``'linear'`` (``lerp`` by the
    fractional part), ``'lower'``, ``'higher'``, ``'nearest'`` (the rank
    rounded half to even) or ``'midpoint'``. A slice containing NaN gives NaN
    (see :func:`nanquantile`). ``q`` is a number or a 0-d/1-d tensor of the
    input's dtype in ``[0, 1]``; a 1-d ``q`` puts the quantiles in a new first
    dimension. A composite of ``sort``, ``take_along_dim`` and ``lerp``: the
    gradient goes to the one or two order statistics each quantile uses.

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 3.0, 2.0, 4.0])
    >>> pylucid.quantile(x, 0.5), pylucid.quantile(x, pylucid.tensor([0.25, 1.0]), interpolation="lower")
    (tensor(2.5000), tensor([1., 4.]))
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


@declare()
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """:func:`quantile` ignoring NaN: the rank is ``q (m - 1)`` with ``m`` the number of non-NaN elements of the
    slice; an all-NaN slice gives NaN.

    >>> import pylucid
    >>> pylucid.nanquantile(pylucid.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# ------------------------------------------------------------------------------------------ cov / corrcoef
@declare()
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance matrix of the variables in the rows of ``input`` (observations in the columns; a 1-d input is
    one variable, giving a 0-d result).

    With weights ``w = fweights * aweights`` (either optional; ``fweights``
    integer frequencies, ``aweights`` float importances):
    ``avg = sum(x w) / sum(w)``, ``cov = (x - avg)(w (x - avg))^H / f`` with
    ``f = sum(w) - correction * sum(w aweights) / sum(w)`` (PyTorch's
    normalisation; ``N - correction`` without weights). ``f <= 0`` warns and
    gives inf/NaN. A composite of ``sum``, ``mul`` and ``matmul``.

    >>> import pylucid
    >>> pylucid.cov(pylucid.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    from .complex import conj
    from .elementwise import div, mul, sub
    from .linalg import matmul
    from .reduction import sum as _sum
    from .shape import reshape, squeeze, transpose

    check_tensor(input, "cov")
    if input.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dimensions, got {input.ndim}")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    n_obs = x.shape[1]
    w = None
    for wt, what, integral in ((fweights, "fweights", True), (aweights, "aweights", False)):
        if wt is None:
            continue
        check_tensor(wt, "cov", what)
        if wt.ndim > 1 or wt.numel() != n_obs:
            raise ShapeMismatch(f"cov: {what} must be a scalar or 1-d tensor with {n_obs} elements (the number of "
                                f"observations), got shape {tuple(wt.shape)}")
        kind = wt._data.dtype.kind
        if integral and kind not in "iu":
            raise DtypeMismatch(f"cov: fweights must be an integer tensor, got {wt.dtype}")
        if not integral and not is_float_dtype(wt._data.dtype):
            raise DtypeMismatch(f"cov: aweights must be a floating point tensor, got {wt.dtype}")
        if wt.numel() and bool(wt._device.backend.any(wt._data < 0)):
            raise ValueError(f"cov: {what} cannot be negative")
        wt = reshape(wt, (-1,))
        w = wt if w is None else mul(w, wt)
    if w is None:
        w_sum = n_obs
        avg = div(_sum(x, 1), n_obs)
        norm = n_obs - correction
    else:
        w_sum = _sum(w)
        avg = div(_sum(mul(x, w), 1), w_sum)
        if aweights is not None and correction != 0:
            norm = sub(w_sum, mul(div(_sum(mul(w, reshape(aweights, (-1,)))), w_sum), correction))
        else:
            norm = sub(w_sum, correction)
    if float(norm.item() if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn("cov: degrees of freedom <= 0 for the given correction and weights; the result is inf or NaN",
                      RuntimeWarning, stacklevel=2)
        norm = 0.0
    xc = sub(x, reshape(avg, (-1, 1)))
    c = matmul(xc, conj(transpose(mul(xc, w) if w is not None else xc, 0, 1)))
    with input._device.backend.errstate():
        return squeeze(div(c, norm))


@declare()
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in the rows of ``input``: ``cov / (s_i s_j)`` with
    ``s = sqrt(diag(cov))``, clipped to ``[-1, 1]`` (real and imaginary parts separately for complex input).

    >>> import pylucid
    >>> pylucid.corrcoef(pylucid.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    from .complex import complex as _complex
    from .complex import imag, real
    from .elementwise import clamp, div, sqrt
    from .shape import diagonal, reshape

    check_tensor(input, "corrcoef")
    if input.ndim > 2:
        raise ValueError(f"corrcoef: expected input to have two or fewer dimensions, got {input.ndim}")
    c = cov(input)
    be = input._device.backend
    with be.errstate():
        if c.ndim == 0:
            return div(c, c)
        d = diagonal(c)
        s = sqrt(real(d) if d.dtype.is_complex else d)
        c = div(div(c, reshape(s, (-1, 1))), reshape(s, (1, -1)))
    if c.dtype.is_complex:
        return _complex(clamp(real(c), -1, 1), clamp(imag(c), -1, 1))
    return clamp(c, -1, 1)


# ------------------------------------------------------------------------------------------ cdist
_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@declare(method=False)
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """Pairwise ``p``-norm distances between the rows of ``x1`` (``(..., P, M)``) and of ``x2``
    (``(..., R, M)``): a ``(..., P, R)`` tensor, the batch dims broadcasting.

    ``compute_mode`` (for ``p = 2``): ``'use_mm_for_euclid_dist'`` computes
    ``sqrt(max(|a|^2 - 2 a.b + |b|^2, 1e-30))`` with one matrix product (fast,
    less accurate for close points); ``'donot_use_mm_for_euclid_dist'`` the
    norm of the differences; the default uses the product when ``P > 25`` or
    ``R > 25`` (PyTorch's rule). Other ``p`` (``0``, ``inf``, any ``p >= 0``)
    take the norm of the differences. The gradient at coincident points is 0.
    A NaN feature makes its distances NaN for every ``p`` (``p = inf`` too,
    where PyTorch's CPU kernel drops it: ``docs/semantics/math_inputs.md``).

    >>> import pylucid
    >>> pylucid.cdist(pylucid.tensor([[0.0, 0.0], [1.0, 1.0]]), pylucid.tensor([[3.0, 4.0]]))
    tensor([[5.0000],
            [3.6056]])
    """
    from .elementwise import abs as _abs
    from .elementwise import add, ceil, clamp_max, clamp_min, mul, sqrt
    from .linalg import matmul
    from .reduction import norm
    from .reduction import sum as _sum
    from .shape import transpose, unsqueeze

    check_tensor(x1, "cdist", "x1")
    check_tensor(x2, "cdist", "x2")
    for t, what in ((x1, "x1"), (x2, "x2")):
        if t.ndim < 2:
            raise ValueError(f"cdist: {what} must have at least 2 dimensions (..., rows, features), got {t.ndim}")
        _check_float("cdist", t, what)
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeMismatch(f"cdist: x1 and x2 must have the same number of columns, got {x1.shape[-1]} and "
                            f"{x2.shape[-1]}")
    if isinstance(p, str) or not p >= 0:
        raise ValueError(f"cdist: p must be a non-negative number, got {p!r}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: compute_mode must be one of {list(_CDIST_MODES)}, got {compute_mode!r}")
    P, R = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (P > 25 or R > 25)))
    with x1._device.backend.errstate():  # inf - inf is NaN, as PyTorch
        if use_mm:
            half = x1.dtype.is_floating_point and x1.dtype.itemsize == 2
            if half:  # |a|^2 - 2 a.b + |b|^2 cancels completely in 8 bits of mantissa: float32, rounded once
                dt = x1.dtype
                x1, x2 = x1.to(_dt.float32), x2.to(_dt.float32)
            n1 = _sum(mul(x1, x1), -1, keepdim=True)
            n2 = _sum(mul(x2, x2), -1, keepdim=True)
            d2 = add(add(mul(matmul(x1, transpose(x2, -1, -2)), -2.0), n1), transpose(n2, -1, -2))
            out = sqrt(clamp_min(d2, 1e-30))
            return out.to(dt) if half else out
        diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)  # (..., P, R, M)
        if p == 0:  # the count of differing features, NaN where one is NaN (PyTorch's min(ceil(|d|), 1) summed)
            return _sum(clamp_max(ceil(_abs(diff)), 1.0), -1)
        return norm(diff, p, -1)
