"""``pylucid.nn.functional``: the margin, likelihood and embedding losses built from public ops.

Each is a composite (no op class of its own): its gradient is autograd's through the ops it runs, to any order.
The reductions follow PyTorch (``'none'``, ``'mean'``, ``'sum'``; ``size_average``/``reduce`` are its deprecated
spellings and map onto ``reduction``).

>>> import pylucid
>>> import pylucid.nn.functional as F
>>> F.soft_margin_loss(pylucid.tensor([0.0, 0.0]), pylucid.tensor([1.0, -1.0]))
tensor(0.6931)
>>> F.hinge_embedding_loss(pylucid.tensor([0.25, 2.0]), pylucid.tensor([-1.0, 1.0]), reduction="none")
tensor([0.7500, 2.0000])
"""

from __future__ import annotations

import math

import pylucid as _pl

from .._tensor import Tensor
from ..errors import ShapeMismatch
from ..ops._utils import check_tensor
from ..ops.activation import softplus
from ..ops.registry import declare
from ._functional_core import _check_kinds, _check_reduction, _reduce, pairwise_distance

_F = dict(namespaces=("pylucid.nn.functional",), method=False)


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """PyTorch's ``size_average``/``reduce`` (deprecated) override ``reduction`` when either is given."""
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    return "none" if not rd else ("mean" if sa else "sum")


def _relu(x: Tensor) -> Tensor:
    # max(x, 0) with gradient 0 at the kink, as PyTorch's clamp_min; -inf gives 0 (not 0 * -inf), NaN stays NaN
    return _pl.where(x <= 0, _pl.zeros_like(x), x)


# ---------------------------------------------------------------------------------------------------------------------
# likelihoods
# ---------------------------------------------------------------------------------------------------------------------
@declare(**_F)
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """Poisson negative log likelihood of ``target`` under rate ``exp(input)`` (``log_input``) or ``input``.

    ``log_input=True``: ``exp(x) - y x``; ``False``: ``x - y log(x + eps)``. ``full`` adds Stirling's term
    ``y log y - y + 0.5 log(2 pi y)`` where ``y > 1`` (0 elsewhere).

    >>> import pylucid
    >>> poisson_nll_loss(pylucid.tensor([0.0, 1.0]), pylucid.tensor([1.0, 0.0]), reduction="sum").round(decimals=4)
    tensor(3.7183)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("poisson_nll_loss", reduction)
    check_tensor(input, "poisson_nll_loss")
    check_tensor(target, "poisson_nll_loss", "target")
    if log_input:
        loss = _pl.exp(input) - target * input
    else:
        loss = input - target * _pl.log(input + eps)
    if full:
        big = target > 1
        safe = _pl.where(big, target, _pl.full_like(target, 2.0))  # constants, not 0 * target: target may be inf
        stirling = safe * _pl.log(safe) - safe + 0.5 * _pl.log(2 * math.pi * safe)
        loss = loss + _pl.where(big, stirling, _pl.zeros_like(stirling))
    return _reduce(loss, reduction)


@declare(**_F)
def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """Gaussian negative log likelihood: ``0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps))``.

    ``var`` has the input's shape, or one fewer trailing dim, or a 1 in one dim (homoscedastic), or is a float.
    The clamp at ``eps`` is taken outside autograd, as PyTorch does: the gradient passes to ``var`` as if
    unclamped. ``full`` adds ``0.5 log(2 pi)``.

    >>> import pylucid
    >>> gaussian_nll_loss(pylucid.tensor([1.0]), pylucid.tensor([3.0]), pylucid.tensor([2.0])).round(decimals=4)
    tensor(1.3466)
    """
    check_tensor(input, "gaussian_nll_loss")
    check_tensor(target, "gaussian_nll_loss", "target")
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("gaussian_nll_loss: var has negative entry/entries")
        # a float var for an integer input too (an integer one would round 0.7 down to 0)
        dt = input.dtype if input.is_floating_point() or input.is_complex() else _pl.get_default_dtype()
        var = _pl.full(tuple(input.shape), float(var), dtype=dt, device=input.device)
    else:
        check_tensor(var, "gaussian_nll_loss", "var")
        _check_kinds("gaussian_nll_loss", "var", var)  # PyTorch clamps var in its own dtype
        if bool((var < 0).any()):
            raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:
            var = var.unsqueeze(-1)
        elif not (len(ishape) == len(vshape) and sum(v for i, v in zip(ishape, vshape) if i != v) == 1):
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size: {list(vshape)} for input of shape "
                             f"{list(ishape)} (accepted: the input's shape, that shape without its last dim, or "
                             "one dim of size 1)")
    _check_reduction("gaussian_nll_loss", reduction)
    # value of clamp(var, eps), gradient of the identity
    var = var + (_pl.where(var > eps, var, eps + 0.0 * var) - var).detach()
    loss = 0.5 * (_pl.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------------------------------------------------------
# margin losses
# ---------------------------------------------------------------------------------------------------------------------
@declare(**_F)
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (both terms, as PyTorch, for other ``y``)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("hinge_embedding_loss", reduction)
    check_tensor(input, "hinge_embedding_loss")
    check_tensor(target, "hinge_embedding_loss", "target")
    _check_kinds("hinge_embedding_loss", "input", input)
    zero = _pl.zeros_like(input)  # not 0 * input: input may be inf
    margin_term = _relu(margin - input)
    loss = _pl.where(target != 1, margin_term, zero) + _pl.where(target != -1, input, zero)
    return _reduce(loss, reduction)


@declare(**_F)
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-y x))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("soft_margin_loss", reduction)
    check_tensor(input, "soft_margin_loss")
    check_tensor(target, "soft_margin_loss", "target")
    _check_kinds("soft_margin_loss", "input", input, ("float", "complex"))
    z = -target * input
    # log1p(exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|))
    loss = _relu(z) + _pl.log1p(_pl.exp(-_pl.abs(z)))
    return _reduce(loss, reduction)


def _positive_part(x: Tensor) -> Tensor:
    # PyTorch's multi-class margin kernels add a term only where it is > 0: NaN terms (inf - inf) drop out
    return _pl.where(x > 0, x, _pl.zeros_like(x))


def _class_batch(op, input, target):
    """True for an unbatched input: ``(C,)``, or 0-d (one class)."""
    check_tensor(input, op)
    check_tensor(target, op, "target")
    if input.ndim > 2 or input.ndim == 1 and input.shape[0] == 0:
        raise ShapeMismatch(f"{op}: expected a 0-D, non-empty 1-D or 2-D input (N, C), got shape "
                            f"{list(input.shape)}")
    return input.ndim < 2


@declare(**_F)
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge: ``sum_{i != y} w_y max(0, margin - x_y + x_i)^p / C`` per sample (``p`` is 1 or 2).

    >>> import pylucid
    >>> multi_margin_loss(pylucid.tensor([[0.1, 0.2, 0.4, 0.8]]), pylucid.tensor([3])).round(decimals=4)
    tensor(0.3250)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got p={p}")
    unbatched = _class_batch("multi_margin_loss", input, target)
    x = input.reshape(1, -1) if unbatched else input
    y = target.reshape(-1)
    N, C = x.shape
    if y.shape[0] != N:
        raise ShapeMismatch(f"multi_margin_loss: target of shape {list(target.shape)} does not match the input of "
                            f"shape {list(input.shape)}")
    if N and (bool((y < 0).any()) or bool((y >= C).any())):
        raise IndexError(f"multi_margin_loss: target out of range [0, {C})")
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != C):
        raise ShapeMismatch(f"multi_margin_loss: weight of shape {list(weight.shape)} must have one entry per class "
                            f"({C})")
    yi = y.long().unsqueeze(1)
    xy = _pl.gather(x, 1, yi)
    z = margin - xy + x
    # PyTorch's kernel adds a term only where it is > 0 (NaN terms, inf - inf, drop out) and leaves the target's
    # own out, even NaN; the weight multiplies the terms kept only (an infinite one times 0 is no NaN)
    keep = (z > 0) & (_pl.arange(C, device=x.device).unsqueeze(0) != yi)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[y.long()].unsqueeze(1)
    loss = _pl.where(keep, z, _pl.zeros_like(z)).sum(1) / C
    if unbatched and reduction == "none":
        return loss.reshape(tuple(target.shape))  # () or (1,), as the target
    return _reduce(loss, reduction)


@declare(**_F)
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge: ``sum_{j in T} sum_{i not in T} max(0, 1 - (x_j - x_i)) / C``.

    ``target`` holds class indices, read up to its first ``-1``; ``T`` is that set (a repeated index counts
    twice, as in PyTorch).

    >>> import pylucid
    >>> x = pylucid.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> multilabel_margin_loss(x, pylucid.tensor([[3, 0, -1, 1]])).round(decimals=4)
    tensor(0.8500)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_margin_loss", reduction)
    unbatched = _class_batch("multilabel_margin_loss", input, target)
    x = input.reshape(1, -1) if unbatched else input
    t = target.reshape(1, -1) if target.ndim < 2 else target
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeMismatch(f"multilabel_margin_loss: target of shape {list(target.shape)} does not match the "
                            f"input of shape {list(input.shape)}")
    N, C = x.shape
    t = t.long()
    if N and (bool((t < -1).any()) or bool((t >= C).any())):
        raise IndexError(f"multilabel_margin_loss: target out of range [-1, {C})")
    # entries up to the first -1 count; the others are padding
    valid = _pl.cumprod((t >= 0).long(), 1) > 0
    cls = _pl.arange(C, device=x.device)
    hits = (t.unsqueeze(2) == cls.reshape(1, 1, C)) & valid.unsqueeze(2)  # (N, slot, class)
    count = hits.sum(1).to(x.dtype)  # how often each class is a target
    is_target = count > 0
    # z[n, j, i] = max(0, 1 - x_j + x_i), summed over target j (with multiplicity) and non-target i
    z = _positive_part(1 - x.unsqueeze(2) + x.unsqueeze(1))
    w = count.unsqueeze(2) * (~is_target).unsqueeze(1).to(x.dtype)
    loss = _pl.where(w > 0, z * w, _pl.zeros_like(z)).sum((1, 2)) / C  # the pairs left out count 0, even inf
    if unbatched and reduction == "none":
        return loss.reshape(())
    return _reduce(loss, reduction)


@declare(**_F)
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """``-mean_c [y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c)]`` (times ``weight``) per sample."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_soft_margin_loss", reduction)
    check_tensor(input, "multilabel_soft_margin_loss")
    check_tensor(target, "multilabel_soft_margin_loss", "target")
    if input.ndim == 0:  # PyTorch sums over the class dim, which a 0-d input lacks
        raise IndexError("multilabel_soft_margin_loss: expected an input with a class dim (C,) or (N, C), got 0-d")
    # log sigmoid(x) = -softplus(-x)
    loss = target * softplus(-input) + (1 - target) * softplus(input)
    if weight is not None:
        loss = loss * weight
    dim = input.ndim - 1
    C = input.shape[dim] if input.ndim else 1
    loss = loss.sum(dim) / C if input.ndim else loss
    return _reduce(loss, reduction)


@declare(**_F)
def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any distance ``d`` (default ``pairwise_distance``).

    ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance.
    """
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    for n, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        check_tensor(t, "triplet_margin_with_distance_loss", n)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeMismatch("triplet_margin_with_distance_loss: anchor, positive and negative must have the same "
                            f"number of dims, got {anchor.ndim}, {positive.ndim} and {negative.ndim}")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_s = dist(positive, negative)
        d_neg = _pl.where(d_s < d_neg, d_s, d_neg)
    return _reduce(_relu(margin + d_pos - d_neg), reduction)


@declare(**_F)
def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``.

    ``linear_weight``: ``(C, in)``, or ``(C, d_1, ..., d_K, in)`` for a K-dimensional loss (logits
    ``(*, C, d_1, ..., d_K)``); ``ignore_index=None`` ignores no target. ``options`` (PyTorch's chunking of the
    batch, a memory optimisation) is accepted and does not change the result: the logits are materialised.
    """
    from ._functional_core import cross_entropy

    check_tensor(input, "linear_cross_entropy")
    check_tensor(linear_weight, "linear_cross_entropy", "linear_weight")
    if linear_weight.ndim < 2 or input.ndim < 1 or input.shape[-1] != linear_weight.shape[-1]:
        raise ShapeMismatch(f"linear_cross_entropy: input {list(input.shape)} and linear_weight "
                            f"{list(linear_weight.shape)} do not match (expected (*, in) and (C, *d, in))")
    out_shape = tuple(linear_weight.shape[:-1])
    w2 = linear_weight.reshape(-1, linear_weight.shape[-1])
    b2 = None if linear_bias is None else linear_bias.reshape(-1)
    logits = _pl.matmul(input, w2.transpose(0, 1))
    if b2 is not None:
        logits = logits + b2
    logits = logits.reshape(tuple(input.shape[:-1]) + out_shape)
    return cross_entropy(logits, target, weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index, label_smoothing=label_smoothing)
