"""Helpers shared by the distributions (``torch.distributions.utils``): broadcasting of parameters,
probabilities <-> logits, cached properties, the dtype limits used for clamping and the samplers' draws."""

from __future__ import annotations

import math
from functools import update_wrapper
from numbers import Number

import pylucid as _pl
from pylucid import Tensor

__all__ = ["broadcast_all", "clamp_probs", "euler_constant", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix", "finfo"]

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant


class _FInfo:
    """``eps`` and ``tiny`` of a floating dtype (what ``torch.finfo`` gives, for clamping)."""

    __slots__ = ("eps", "tiny", "max")

    def __init__(self, eps, tiny, max_):
        self.eps, self.tiny, self.max = eps, tiny, max_


_FINFO = {
    "float16": _FInfo(0.0009765625, 6.103515625e-05, 65504.0),
    "bfloat16": _FInfo(0.0078125, 1.1754943508222875e-38, 3.3895313892515355e38),
    "float32": _FInfo(1.1920928955078125e-07, 1.1754943508222875e-38, 3.4028234663852886e38),
    "float64": _FInfo(2.220446049250313e-16, 2.2250738585072014e-308, 1.7976931348623157e308),
}


def finfo(dtype) -> _FInfo:
    """The ``eps`` / ``tiny`` / ``max`` of ``dtype`` (a floating pylucid dtype)."""
    return _FINFO[dtype.name]


def broadcast_all(*values):
    """Broadcast tensors and numbers together; numbers become tensors of the tensors' dtype and device
    (the default dtype when every value is a number).

    >>> import pylucid
    >>> a, b = broadcast_all(pylucid.zeros(2, 1), 1.0)
    >>> a.shape, b.shape
    ((2, 1), (2, 1))
    """
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers or pylucid tensors.")
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors:
        dt = _pl.get_default_dtype()
        return tuple(_pl.tensor(float(v), dtype=dt) for v in values)
    ref = next((t for t in tensors if t.dtype.is_floating_point), tensors[0])
    dt = ref.dtype if ref.dtype.is_floating_point else _pl.get_default_dtype()
    vals = [v if isinstance(v, Tensor) else _pl.tensor(float(v), dtype=dt, device=ref.device) for v in values]
    return tuple(_pl.broadcast_tensors(*vals))


def _standard_normal(shape, dtype, device, generator=None):
    return _pl.randn(tuple(shape), dtype=dtype, device=device, generator=generator)


def _uniform(shape, dtype, device, generator=None):
    return _pl.rand(tuple(shape), dtype=dtype, device=device, generator=generator)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[:value.ndim - dim], -1).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: ``sigmoid`` for binary ones, ``softmax`` over the last dimension otherwise."""
    if is_binary:
        return _pl.sigmoid(logits)
    return _pl.softmax(logits, dim=-1)


def clamp_probs(probs):
    """Clamp probabilities into ``[eps, 1 - eps]`` of their dtype."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities: ``log(p) - log1p(-p)`` for binary ones, ``log(p)`` otherwise (clamped)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return _pl.log(ps_clamped) - _pl.log1p(-ps_clamped)
    return _pl.log(ps_clamped)


class lazy_property:  # noqa: N801 - mirrors torch.distributions.utils.lazy_property
    """A property computed once per instance and cached in the instance's ``__dict__``."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _LazyPropertyAndProperty(self.wrapped)
        with _pl.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


class _LazyPropertyAndProperty(lazy_property, property):
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat, diag=0):
    """The entries of the lower triangle (offset ``diag``) of ``mat``, row by row, in the last dimension."""
    n = mat.shape[-1]
    if not (-n <= diag < n):
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = _tril_indices(n, diag)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of :func:`tril_matrix_to_vec`: an ``(n, n)`` lower-triangular matrix per vector."""
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    eps = 1e-7
    if not (round(n) - n < eps):
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
                         "the lower triangular part of a square D x D matrix.")
    n = round(n.item()) if isinstance(n, Tensor) else round(n)
    rows, cols = _tril_indices(n, diag)
    flat = _pl.zeros((*vec.shape[:-1], n * n), dtype=vec.dtype, device=vec.device)
    idx = _pl.tensor([r * n + c for r, c in zip(rows, cols)], device=vec.device)
    idx = idx.expand(*vec.shape[:-1], len(rows))
    return flat.scatter(-1, idx, vec).reshape(*vec.shape[:-1], n, n)


def _tril_indices(n, diag):
    rows, cols = [], []
    for r in range(n):
        for c in range(n):
            if c - r <= diag:
                rows.append(r)
                cols.append(c)
    return rows, cols


def _log_beta(a, b):
    return _pl.lgamma(a) + _pl.lgamma(b) - _pl.lgamma(a + b)


LOG_2PI = math.log(2 * math.pi)
