"""Reference semantics of the fused backend primitives, written against an array module ``xp``.

Each function is the portable definition of one fused primitive (softmax, layer norm,
cross-entropy, the relu and embedding backwards, Adam/AdamW, bias + activation): the CPU
backend (:class:`pylucid.backend.base.ArrayBackend`) computes with them, and the GPU tests
hold every CUDA kernel (:mod:`pylucid.backend.cuda_sources`) to them. ``xp`` is NumPy or
CuPy; nothing here launches a kernel or imports CuPy at import time.
"""

from __future__ import annotations

import math

import numpy as np


def softmax_ref(xp, x, log: bool = False):
    """Softmax (or log-softmax) over the last axis, max-subtracted for stability."""
    m = xp.max(x, axis=-1, keepdims=True)
    z = x - m
    s = xp.sum(xp.exp(z), axis=-1, keepdims=True)
    return z - xp.log(s) if log else xp.exp(z) / s


def softmax_backward_ref(xp, y, g, log: bool = False):
    """Gradient of softmax/log-softmax given the saved output ``y`` and the incoming ``g``.

    softmax: ``dx = y * (g - sum(g * y))``; log-softmax: ``dx = g - exp(y) * sum(g)``.
    """
    if log:
        return g - xp.exp(y) * xp.sum(g, axis=-1, keepdims=True)
    return y * (g - xp.sum(g * y, axis=-1, keepdims=True))


def layer_norm_ref(xp, x, weight, bias, eps: float):
    """Layer norm over the last axis: ``(y, mean, rstd)`` with biased variance (as PyTorch).

    ``mean``/``rstd`` have shape ``x.shape[:-1]``; ``weight``/``bias`` may be None.
    """
    mean = xp.mean(x, axis=-1)
    xc = x - mean[..., None]
    var = xp.mean(xc * xc, axis=-1)
    rstd = 1.0 / xp.sqrt(var + eps)
    y = xc * rstd[..., None]
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


def layer_norm_backward_ref(xp, g, x, mean, rstd, weight):
    """``(dx, dweight, dbias)`` of layer norm; ``dweight``/``dbias`` are None when ``weight`` is None.

    With ``xhat = (x - mean) * rstd`` and ``dxhat = g * weight``:
    ``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``,
    ``dweight = sum_rows(g * xhat)``, ``dbias = sum_rows(g)``.
    """
    xhat = (x - mean[..., None]) * rstd[..., None]
    dxhat = g * weight if weight is not None else g
    n = x.shape[-1]
    a = xp.sum(dxhat, axis=-1, keepdims=True) / n
    b = xp.sum(dxhat * xhat, axis=-1, keepdims=True) / n
    dx = rstd[..., None] * (dxhat - a - xhat * b)
    if weight is None:
        return dx, None, None
    lead = tuple(range(x.ndim - 1))
    return dx, xp.sum(g * xhat, axis=lead), xp.sum(g, axis=lead)


def cross_entropy_ref(xp, logits, target, ignore_index: int = -100):
    """Per-row cross-entropy of ``(rows, classes)`` logits against integer targets.

    Returns ``(loss, lse)``: ``loss[r] = logsumexp(logits[r]) - logits[r, target[r]]``, 0 where
    ``target[r] == ignore_index``; ``lse`` (the row log-sum-exp) is what the backward needs.
    """
    m = xp.max(logits, axis=-1, keepdims=True)
    lse = (m + xp.log(xp.sum(xp.exp(logits - m), axis=-1, keepdims=True)))[:, 0]
    valid = target != ignore_index
    safe = xp.where(valid, target, 0).astype(np.int64)
    picked = xp.take_along_axis(logits, safe[:, None], axis=1)[:, 0]
    loss = xp.where(valid, lse - picked, xp.zeros((), dtype=logits.dtype))
    return loss.astype(logits.dtype), lse.astype(logits.dtype)


def cross_entropy_backward_ref(xp, g, logits, lse, target, ignore_index: int = -100):
    """``dlogits = g[r] * (softmax(logits[r]) - onehot(target[r]))``, zero rows where ignored."""
    p = xp.exp(logits - lse[:, None])
    valid = target != ignore_index
    safe = xp.where(valid, target, 0).astype(np.int64)
    onehot = (xp.arange(logits.shape[1])[None, :] == safe[:, None]).astype(logits.dtype)
    gr = xp.where(valid, g, xp.zeros((), dtype=g.dtype))
    return (gr[:, None] * (p - onehot)).astype(logits.dtype)


def cross_entropy_reduce_ref(xp, loss, target, ignore_index: int = -100, mean: bool = True):
    """``(sum or mean of the per-row losses, number of rows not ignored)``, both 0-d of ``loss``'s dtype.

    The mean divides by the count of rows whose target is not ``ignore_index`` (0/0 = NaN, as PyTorch).
    """
    count = xp.sum(target != ignore_index).astype(loss.dtype)
    total = xp.sum(loss)
    return (total / count if mean else total).astype(loss.dtype), count


def relu_backward_ref(xp, y, g):
    """PyTorch's ``threshold_backward``: ``g`` where ``y > 0`` or ``y`` is NaN, else 0."""
    return xp.where(y <= 0, xp.zeros((), dtype=g.dtype), g)


def embedding_backward_ref(xp, g, indices, num_weights: int, padding_idx: int | None = None):
    """``dweight[k] = sum of g rows whose index is k`` (``padding_idx`` rows get no gradient).

    ``g`` has shape ``indices.shape + (dim,)``. Deterministic (``add.at`` on NumPy is sequential).
    """
    dim = g.shape[-1]
    flat_idx = indices.reshape(-1).astype(np.int64)
    flat_g = g.reshape(-1, dim)
    out = xp.zeros((num_weights, dim), dtype=g.dtype)
    if padding_idx is not None:
        keep = flat_idx != padding_idx
        flat_idx, flat_g = flat_idx[keep], flat_g[keep]
    xp.add.at(out, flat_idx, flat_g)
    return out


def adam_step_ref(xp, params, grads, exp_avgs, exp_avg_sqs, *, step: int, lr: float, beta1: float, beta2: float,
                  eps: float, weight_decay: float = 0.0, decoupled: bool = False, maximize: bool = False) -> None:
    """One Adam (``decoupled=False``) or AdamW (``decoupled=True``) step, in place, for every tensor.

    Same arithmetic as PyTorch's single-tensor implementation (``step`` already incremented)::

        g = -g if maximize
        Adam:  g = g + wd * p            AdamW: p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1**step) * m / (sqrt(v) / sqrt(1 - b2**step) + eps)
    """
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if maximize:
            g = -g
        if weight_decay != 0:
            if decoupled:
                p *= 1.0 - lr * weight_decay
            else:
                g = g + weight_decay * p
        m *= beta1
        m += (1.0 - beta1) * g
        v *= beta2
        v += (1.0 - beta2) * g * g
        p -= (lr / bc1) * m / (xp.sqrt(v) / bc2_sqrt + eps)


# GELU's constants: 1/sqrt(2) (erf form), 1/sqrt(2 pi) (the normal density), sqrt(2/pi) and the cubic
# coefficient of the tanh form
SQRT1_2 = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327
GELU_K = 0.7978845608028654
GELU_C = 0.044715
#: the activations of :func:`bias_act_ref` (the CUDA kernel numbers them: ``cuda_sources.BIAS_ACT_CODES``)
ACTIVATIONS = ("gelu", "gelu_tanh", "none", "relu")


def _erf(xp, z):
    if xp is np:
        import scipy.special

        return scipy.special.erf(z)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(z)


def bias_act_ref(xp, x, bias, act: str = "relu"):
    """``act(x + bias)``; ``bias`` broadcasts over the last axis (or is None).

    ``act``: ``"none"``, ``"relu"``, ``"gelu"`` (exact, erf) or ``"gelu_tanh"`` (PyTorch's
    ``approximate="tanh"``).
    """
    z = x + bias if bias is not None else x
    if act == "none":
        return z
    if act == "relu":
        return xp.maximum(z, 0)  # NaN propagates, as torch.relu
    if act == "gelu":
        return 0.5 * z * (1.0 + _erf(xp, z * SQRT1_2))
    if act == "gelu_tanh":
        return 0.5 * z * (1.0 + xp.tanh(GELU_K * (z + GELU_C * z * z * z)))
    raise ValueError(f"bias_act: unknown activation {act!r}; accepted: {list(ACTIVATIONS)}")


def bias_act_backward_ref(xp, g, x, bias, act: str = "relu"):
    """``dz = g * act'(x + bias)``: the gradient for ``x``; ``dbias`` is ``dz`` summed over leading axes."""
    z = x + bias if bias is not None else x
    if act == "none":
        return g
    if act == "relu":
        return g * (z > 0)
    if act == "gelu":
        cdf = 0.5 * (1.0 + _erf(xp, z * SQRT1_2))
        pdf = xp.exp(-0.5 * z * z) * INV_SQRT_2PI
        return g * (cdf + z * pdf)
    if act == "gelu_tanh":
        u = GELU_K * (z + GELU_C * z * z * z)
        t = xp.tanh(u)
        return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_K * (1.0 + 3 * GELU_C * z * z))
    raise ValueError(f"bias_act_backward: unknown activation {act!r}; accepted: {list(ACTIVATIONS)}")

