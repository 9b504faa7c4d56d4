"""``pylucid.nn.utils``: gradient clipping and parameter/vector conversion.

>>> import pylucid
>>> p = pylucid.nn.Parameter(pylucid.zeros(2))
>>> p.grad = pylucid.tensor([3.0, 4.0])
>>> pylucid.nn.utils.clip_grad_norm_([p], max_norm=1.0)
tensor(5.)
>>> p.grad
tensor([0.6000, 0.8000])
"""

from __future__ import annotations

import math
from typing import Iterable

import pylucid as _pl

from ..._tensor import Tensor
from . import rnn  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "rnn"]


def _as_list(parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of the norms of ``tensors`` (as if concatenated into one vector)."""
    tensors = [t for t in _as_list(tensors) if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return _pl.tensor(0.0)
    with _pl.no_grad():
        if norm_type == math.inf:
            norms = [_pl.amax(_pl.abs(t.detach())).to(_pl.float32 if t.dtype.itemsize < 4 else t.dtype)
                     for t in tensors if t.numel()]
            total = _pl.amax(_pl.stack([n.to(norms[0].dtype) for n in norms])) if norms else _pl.tensor(0.0)
        else:
            parts = []
            for t in tensors:
                a = _pl.abs(t.detach())
                parts.append((a ** norm_type).sum() if norm_type != 2 else (a * a).sum())
            total = _pl.stack([p.to(parts[0].dtype) for p in parts]).sum() ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(float(total.item())):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot "
                "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                "`error_if_nonfinite=False`"
            )
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with _pl.no_grad():
        coef = float(max_norm) / (float(total_norm.item()) + 1e-6)
        coef = min(coef, 1.0)
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Rescale the gradients of ``parameters`` in place so their global ``norm_type``-norm is at most ``max_norm``;
    returns the norm before clipping. ``norm_type=inf`` uses the largest absolute value."""
    params = _as_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


clip_grad_norm = clip_grad_norm_


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    c = float(clip_value)
    with _pl.no_grad():
        for p in _as_list(parameters):
            g = p.grad
            if g is not None:
                g.copy_(_pl.where(g > c, c, _pl.where(g < -c, -c, g)))


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Flatten and concatenate the parameters into one 1-D tensor (differentiable)."""
    params = _as_list(parameters)
    if not params:
        return _pl.zeros(0)
    dev = params[0].device
    for p in params:
        if p.device is not dev:
            raise TypeError("parameters_to_vector: found parameters on different devices")
    return _pl.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy slices of ``vec`` into the parameters (their ``.data``, in place)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected pylucid.Tensor, but got: {type(vec).__name__}")
    params = _as_list(parameters)
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vector has {vec.numel()} elements, the parameters need {total}")
    pointer = 0
    with _pl.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(p.shape))
            pointer += n
