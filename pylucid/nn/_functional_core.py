"""``pylucid.nn.functional``: normalisation, dropout, embeddings, attention and losses.

Built from public pylucid ops; the heavy layers (linear, layer/batch/RMS
norm, cross-entropy, NLL, MSE, BCE, Huber, embedding, dropout, attention) are
registered ops of ``pylucid.ops.nn``. Every function is declared in the
``pylucid.nn.functional`` namespace; the activations (``pylucid.ops.activation``)
and convolutions and pools (``pylucid.ops.conv``) are declared there too, and
imported here for the layer modules that use this module.

>>> import pylucid
>>> import pylucid.nn.functional as F
>>> F.mse_loss(pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 4.0]))
tensor(2.)
>>> F.cross_entropy(pylucid.tensor([[0.0, 0.0]]), pylucid.tensor([1]))
tensor(0.6931)
"""

from __future__ import annotations

import math

import pylucid as _pl

from .. import dtypes as _dt
from .._tensor import _TENSOR_TYPES as _TT
from .._tensor import Tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ..ops import nn as _nn_ops
from ..ops._utils import check_tensor
from ..ops.activation import (  # noqa: F401 - the layer modules call these as ``F.<name>``
    celu,
    elu,
    gelu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
)
from ..ops.registry import declare
from ..ops.special import LogSoftmax, Softmax

#: every function here is exported in ``pylucid.nn.functional`` only, none is a Tensor method
_F = dict(namespaces=("pylucid.nn.functional",), method=False)
#: the floating NumPy dtypes (batch norm's accepted inputs)
_FLOAT_NP = frozenset(d.numpy_dtype for d in _dt.ALL_DTYPES if d.is_floating_point)


def _check_kinds(op: str, name: str, t, kinds=("float",)) -> None:
    """Raise ``DtypeMismatch`` when the tensor ``t`` (argument ``name`` of ``op``) has a dtype kind outside ``kinds``
    (PyTorch's losses and norms refuse integer inputs it cannot write a float result into)."""
    if not isinstance(t, Tensor):
        return
    dt = t.dtype
    kind = "float" if dt.is_floating_point else "complex" if dt.is_complex else "bool" if dt == _dt.bool_ else "int"
    if kind not in kinds:
        raise DtypeMismatch(f"{op}: argument '{name}' has dtype {dt.name} ({kind}); {op} accepts "
                            f"{', '.join(kinds)} tensors")
_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction={reduction!r} is not valid; accepted: 'none', 'mean', 'sum'")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _maximum(a, b):
    return _pl.where(a > b, a, b)


def _clamp_min(x: Tensor, v: float) -> Tensor:
    # max(x, v) keeping NaN, as PyTorch's clamp_min (a bare ``where(x > v, x, v)`` would turn NaN into v)
    return _pl.where((x > v) | _pl.isnan(x), x, v)


# ---------------------------------------------------------------------------------------------------------------------
# linear
# ---------------------------------------------------------------------------------------------------------------------
@declare(_nn_ops.Linear, **_F)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y = x W^T + b`` (registered op, AMP ``Promote``), ``x``: ``(*, in)``, ``W``: ``(out, in)``.

    >>> import pylucid
    >>> linear(pylucid.ones(2, 3), pylucid.ones(4, 3), pylucid.zeros(4)).shape
    (2, 4)
    """
    check_tensor(input, "linear")
    check_tensor(weight, "linear", "weight")
    xd, wd = input._data, weight._data  # (the checks read the arrays' shapes: a layer runs them on every call)
    if wd.ndim not in (1, 2) or xd.ndim == 0 or xd.shape[-1] != wd.shape[-1]:
        raise ShapeMismatch(
            f"linear: input of shape {list(input.shape)} and weight of shape {list(weight.shape)} do not match "
            "(expected input (*, in_features) and weight (out_features, in_features))"
        )
    if weight.ndim == 1:
        out = _pl.matmul(input, weight)
        return out + bias if bias is not None else out
    if bias is not None and (bias._data.shape if bias.__class__ in _TT else tuple(bias.shape)) not in (
            (wd.shape[0],), (), (1,)):
        raise ShapeMismatch(f"linear: bias of shape {list(bias.shape)} does not match out_features {weight.shape[0]}")
    return _nn_ops.linear(input, weight, bias)


@declare(**_F)
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y_k = x1^T A_k x2 + b_k`` (composite: one matmul and a product-sum); ``A``: ``(out, in1, in2)``."""
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise ShapeMismatch(
            f"bilinear: inputs {list(input1.shape)}, {list(input2.shape)} and weight {list(weight.shape)} do not "
            "match (expected (*, in1), (*, in2), (out, in1, in2))"
        )
    out_f, in1, in2 = weight.shape
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    # (N, in1) @ (in1, out*in2) -> (N, out, in2), then contract with x2
    tmp = _pl.matmul(x1, weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    # the contraction with x2 as a batched matrix product: (N, out, in2) @ (N, in2, 1), which keeps an integer
    # dtype as PyTorch's bilinear does
    y = _pl.matmul(tmp, x2.unsqueeze(-1)).squeeze(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (out_f,))


# ---------------------------------------------------------------------------------------------------------------------
# activations: the element-wise ones are ``pylucid.ops.activation``'s; glu, prelu and the softmax family here
# ---------------------------------------------------------------------------------------------------------------------
@declare(**_F)
def glu(input: Tensor, dim: int = -1) -> Tensor:
    check_tensor(input, "glu")
    _check_kinds("glu", "input", input, ("float", "int", "bool"))  # PyTorch has no complex glu
    n = input.shape[dim]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {dim} is size {n}")
    idx_a = [slice(None)] * input.ndim
    idx_b = [slice(None)] * input.ndim
    idx_a[dim] = slice(0, n // 2)
    idx_b[dim] = slice(n // 2, n)
    return input[tuple(idx_a)] * sigmoid(input[tuple(idx_b)])


@declare(**_F)
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    w = weight
    if weight.numel() > 1 and input.ndim >= 2:
        w = weight.reshape((1, -1) + (1,) * (input.ndim - 2))
    return _pl.where(input > 0, input, input * w)


def _softmax_dim(op, dim, ndim):
    if dim is None:
        return 0 if ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit dim
    return dim


@declare(Softmax, **_F)
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``pylucid.softmax`` with PyTorch's functional signature (``dim=None``: the legacy implicit dim)."""
    dim = _softmax_dim("softmax", dim, input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _pl.softmax(input, dim)


@declare(LogSoftmax, **_F)
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``pylucid.log_softmax`` with PyTorch's functional signature (``dim=None``: the legacy implicit dim)."""
    dim = _softmax_dim("log_softmax", dim, input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _pl.log_softmax(input, dim)


@declare(**_F)
def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1, *,
                   generator=None) -> Tensor:
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)``, ``g = -log(E)``, ``E ~ Exp(1)``.

    ``hard=True`` returns the one-hot of the sample's argmax, with the soft sample's gradient (straight-through).
    The noise comes from pylucid's generator (``generator=``, or ``pylucid.manual_seed``); ``eps`` is unused, as
    in PyTorch.
    """
    check_tensor(logits, "gumbel_softmax", "logits")
    u = _pl.rand(*logits.shape, generator=generator, dtype=logits.dtype, device=logits.device)
    gumbels = -_pl.log(-_pl.log1p(-u))  # u in [0, 1): -log1p(-u) ~ Exp(1), finite
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = _pl.argmax(y_soft.detach(), dim, keepdim=True)
    y_hard = _pl.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


@declare(**_F)
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return softmax(-input, dim, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------------
# dropout: masks drawn from pylucid's generators (pylucid.manual_seed / generator=)
# ---------------------------------------------------------------------------------------------------------------------
def _check_p(op, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input: Tensor, shape, p: float, generator=None) -> Tensor:
    u = _pl.rand(*shape, generator=generator, device=input.device)
    return u >= p


def _finish_inplace(input, out, inplace, op):
    if inplace:
        from ..ops._op import check_inplace_leaf, commit_inplace

        check_inplace_leaf(input, op)
        return commit_inplace(input, out, op)
    return out


@declare(_nn_ops.Dropout, **_F)
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            generator=None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (identity unless training).

    >>> import pylucid
    >>> dropout(pylucid.ones(3), 0.5, training=False)
    tensor([1., 1., 1.])
    """
    _check_p("dropout", p)
    if not training or p == 0.0:
        return input
    mask = _keep_mask(input, input.shape, p, generator)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return _finish_inplace(input, _nn_ops.dropout_mask_op(input, mask, scale), inplace, "dropout")


def _feature_dropout(op, input, p, training, inplace, min_dim, generator=None):
    _check_p(op, p)
    if input.ndim not in (min_dim, min_dim + 1):
        raise ValueError(f"{op}: expected a {min_dim}-D (unbatched) or {min_dim + 1}-D input, got {input.ndim}-D")
    if not training or p == 0.0:
        return input
    batched = input.ndim == min_dim + 1
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    mask = _keep_mask(input, shape, p, generator)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return _finish_inplace(input, _nn_ops.dropout_mask_op(input, mask, scale), inplace, op)


@declare(_nn_ops.Dropout, **_F)
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    return _feature_dropout("dropout1d", input, p, training, inplace, 2)


@declare(_nn_ops.Dropout, **_F)
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels (``input[n, c]``) with probability ``p``; input ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _feature_dropout("dropout2d", input, p, training, inplace, 3)


@declare(_nn_ops.Dropout, **_F)
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    return _feature_dropout("dropout3d", input, p, training, inplace, 4)


_SELU_ALPHA_P = -1.7580993408473766  # -scale * alpha of SELU


def _alpha_dropout(op, input, p, training, feature):
    _check_p(op, p)
    if not training or p == 0.0:
        return input
    if feature and input.ndim < 2:
        raise ValueError(f"{op}: feature dropout needs an input of at least 2 dims (N, C, ...), got {input.ndim}-D")
    if p == 1.0:
        return input * 0.0
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else input.shape
    mask = _keep_mask(input, shape, p)
    a = ((1 - p) * (1 + p * _SELU_ALPHA_P ** 2)) ** -0.5
    b = -a * _SELU_ALPHA_P * p
    return _nn_ops.alpha_dropout_mask_op(input, mask, a, b, _SELU_ALPHA_P)


@declare(_nn_ops.AlphaDropout, **_F)
def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped units take SELU's negative saturation, then an affine map keeps
    mean and variance."""
    return _finish_inplace(input, _alpha_dropout("alpha_dropout", input, p, training, False), inplace and training,
                           "alpha_dropout")


@declare(_nn_ops.AlphaDropout, **_F)
def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    return _finish_inplace(input, _alpha_dropout("feature_alpha_dropout", input, p, training, True),
                           inplace and training, "feature_alpha_dropout")


# ---------------------------------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------------------------------
@declare(_nn_ops.LayerNorm, **_F)
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then ``* weight + bias``.

    >>> import pylucid
    >>> layer_norm(pylucid.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    check_tensor(input, "layer_norm")
    return _nn_ops.layer_norm(input, normalized_shape, weight, bias, eps)


@declare(_nn_ops.RMSNorm, **_F)
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims (``eps=None``: the dtype's machine epsilon)."""
    check_tensor(input, "rms_norm")
    return _nn_ops.rms_norm(input, normalized_shape, weight, eps)


@declare(_nn_ops.BatchNorm, **_F)
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) over the batch and spatial dims.

    ``training=True``: batch statistics (biased variance to normalise); the
    running buffers, if given, are updated in place:
    ``running = (1 - momentum) * running + momentum * batch`` with the
    unbiased batch variance. ``training=False``: the running statistics.
    """
    check_tensor(input, "batch_norm")
    # the checks read the arrays (shape, dtype, size): a module's forward runs them on every call
    x = input._data
    if x.dtype not in _FLOAT_NP:  # as PyTorch: no integer, bool or complex kernel
        raise DtypeMismatch(f"batch_norm: input has dtype {input.dtype.name}; batch_norm accepts float16, bfloat16, "
                            "float32, float64 tensors")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of at least 2 dims (N, C, ...), got {x.ndim}-D")
    C = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != C:
            raise ShapeMismatch(f"batch_norm: {name} has {t.numel()} elements but the input has {C} channels")
    if running_mean is None or running_var is None:
        if not training:
            raise ValueError("batch_norm: running_mean and running_var are required when training=False")
        if running_mean is not running_var:
            raise ValueError("batch_norm: running_mean and running_var must both be None or both be Tensors")
    if training and (x.size // C if C else 0) <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input size "
                         f"{list(input.shape)}")
    # the op updates the running buffers in place in training (one backend call with the statistics)
    update = training and running_mean is not None
    y = _nn_ops.batch_norm_apply(input, running_mean, running_var, weight, bias, training, eps,
                                 momentum if update else None)[0]
    return y


@declare(**_F)
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise each group of ``C/num_groups`` channels (with their spatial dims) per sample; composite over the
    ``layer_norm`` op (so it is ``ForceFP32`` as well)."""
    check_tensor(input, "group_norm")
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected an input of at least 2 dims (N, C, ...), got {input.ndim}-D")
    N, C = input.shape[:2]
    if num_groups <= 0 or C % num_groups:
        raise ValueError(f"group_norm: expected the number of channels ({C}) to be divisible by num_groups "
                         f"({num_groups})")
    x = input.reshape(N, num_groups, -1)
    y = _nn_ops.layer_norm(x, (x.shape[-1],), None, None, eps).reshape(input.shape)
    return _channel_affine(y, weight, bias)


def _channel_affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """``y * weight + bias`` with per-channel (dim 1) ``weight`` and ``bias`` (either may be None)."""
    shape = (1, y.shape[1]) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


@declare(**_F)
def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each ``input[n, c]`` over its spatial dims (batch norm of the ``(1, N*C, ...)`` reshape)."""
    check_tensor(input, "instance_norm")
    N, C = input.shape[:2]
    shape = (1, N * C) + tuple(input.shape[2:])
    rm = running_mean.repeat(N) if running_mean is not None and hasattr(running_mean, "repeat") else None
    if running_mean is not None and rm is None:
        rm = _pl.cat([running_mean] * N)
    rv = None
    if running_var is not None:
        rv = _pl.cat([running_var] * N)
    if use_input_stats:
        x = input.reshape(N, C, -1)
        y = _nn_ops.layer_norm(x, (x.shape[-1],), None, None, eps).reshape(input.shape)
        if running_mean is not None or running_var is not None:
            with _pl.no_grad():
                n = x.shape[-1]
                mean = x.mean(-1).mean(0)
                var = ((x - x.mean(-1, keepdim=True)) ** 2).sum(-1).mean(0) / max(n - 1, 1)
                if running_mean is not None:
                    running_mean.copy_(running_mean * (1 - momentum) + mean.to(running_mean.dtype) * momentum)
                if running_var is not None:
                    running_var.copy_(running_var * (1 - momentum) + var.to(running_var.dtype) * momentum)
    else:
        y, _, _ = _nn_ops.batch_norm_stats(input.reshape(shape), rm, rv, None, None, False, eps)
        y = y.reshape(input.shape)
    return _channel_affine(y, weight, bias)


@declare(**_F)
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """``x / (k + alpha/size * sum_{window} x^2)^beta`` over a window of ``size`` neighbouring channels
    (zero padded: ``size//2`` before, ``(size-1)//2`` after), as PyTorch."""
    check_tensor(input, "local_response_norm")
    _check_kinds("local_response_norm", "input", input, ("float", "int", "bool"))  # no complex pooling (PyTorch)
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher input, got {input.ndim}-D")
    C = input.shape[1]
    sq = input * input
    before, after = size // 2, (size - 1) // 2
    zshape = list(sq.shape)
    parts = []
    if before:
        zshape[1] = before
        parts.append(_pl.zeros(tuple(zshape), dtype=sq.dtype, device=sq.device))
    parts.append(sq)
    if after:
        zshape[1] = after
        parts.append(_pl.zeros(tuple(zshape), dtype=sq.dtype, device=sq.device))
    padded = _pl.cat(parts, 1) if len(parts) > 1 else sq
    acc = None
    for i in range(size):
        piece = padded[:, i:i + C]
        acc = piece if acc is None else acc + piece
    if acc.dtype.category < _dt.FLOAT:  # PyTorch averages integer squares with an int64 avg_pool: truncated
        div = ((acc // size) * alpha + k) ** beta
    else:
        div = (acc * (alpha / size) + k) ** beta
    return input / div


@declare(**_F)
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim`` (``p = 0``: the count of non-zeros, which has no gradient)."""
    check_tensor(input, "normalize")
    _check_kinds("normalize", "input", input, ("float", "complex"))
    nrm = _vector_norm(input, p, dim, keepdim=True)
    return input / _clamp_min(nrm, eps)


def _safe_root(s: Tensor, p: float) -> Tensor:
    # s^(1/p) with gradient 0 (not 0 * inf) where s = 0: PyTorch's norm backward at the zero vector
    pos = s > 0
    return _pl.where(pos, _pl.where(pos, s, 1.0 + 0.0 * s) ** (1.0 / p), 0.0 * s)


def _vector_norm(x: Tensor, p: float, dim, keepdim: bool = False) -> Tensor:
    if p == 2:
        return _safe_root((x * x).sum(dim, keepdim=keepdim), 2.0)
    if p == 1:
        return _pl.abs(x).sum(dim, keepdim=keepdim)
    if p == 0:
        return (x != 0).sum(dim, keepdim=keepdim).to(x.dtype)
    if p == math.inf:
        return _pl.amax(_pl.abs(x), dim, keepdim=keepdim)
    if p == -math.inf:
        return _pl.amin(_pl.abs(x), dim, keepdim=keepdim)
    return _safe_root((_pl.abs(x) ** p).sum(dim, keepdim=keepdim), p)


# ---------------------------------------------------------------------------------------------------------------------
# embeddings, one-hot, padding, distances
# ---------------------------------------------------------------------------------------------------------------------
def _norm_padding_idx(padding_idx, num):
    if padding_idx is None:
        return -1
    if not -num <= padding_idx < num:
        raise ValueError(f"embedding: padding_idx {padding_idx} must be within the number of embeddings ({num})")
    return padding_idx % num


def _check_indices(op, indices, num):
    if indices.dtype.is_floating_point or indices.dtype.is_complex:
        raise TypeError(f"{op}: expected integer indices, got {indices.dtype}")
    # on CUDA the check does not wait for the GPU: the IndexError comes at the next synchronisation or copy to
    # the host (CUDABackend.check_index_range); inside a CUDA graph capture there is none, and an out-of-range
    # index wraps around as CuPy's indexing does instead of faulting (docs/semantics/cuda.md)
    indices._device.backend.check_index_range(indices._data, 0, num, lambda lo, hi: IndexError(
        f"{op}: index out of range in self (indices must be in [0, {num}), got min {lo}, max {hi})"))


def _embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale, in place, the rows of ``weight`` looked up by ``indices`` whose norm exceeds ``max_norm``."""
    from pylucid._interop import np
    rows = np.unique(np.asarray(indices).reshape(-1))
    if rows.size == 0:
        return
    with _pl.no_grad():
        idx = _pl.tensor(rows, device=weight.device)
        sel = weight.detach()[idx]
        nrm = _vector_norm(sel, norm_type, 1, keepdim=True)
        scale = _pl.where(nrm > max_norm, max_norm / (nrm + 1e-7), 1.0)
        weight.data[idx] = (sel * scale).to(weight.dtype)  # in place, through the public setitem


@declare(_nn_ops.Embedding, **_F)
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Look up rows of ``weight`` (``(num_embeddings, dim)``) at integer ``input``; the ``padding_idx`` row gets
    no gradient; ``max_norm`` renormalises the looked-up rows in place first. ``scale_grad_by_freq`` divides each
    row's gradient by how often its index occurs in ``input``; ``sparse=True`` gives a dense gradient (pylucid has
    no sparse tensors).

    >>> import pylucid
    >>> embedding(pylucid.tensor([2, 0]), pylucid.arange(6.0).reshape(3, 2))
    tensor([[4., 5.],
            [0., 1.]])
    """
    check_tensor(input, "embedding")
    check_tensor(weight, "embedding", "weight")
    if weight.ndim != 2:
        raise ShapeMismatch(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {list(weight.shape)}")
    _check_indices("embedding", input, weight.shape[0])
    pidx = _norm_padding_idx(padding_idx, weight.shape[0])
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    out = _nn_ops.embedding_op(weight, input, pidx)
    if scale_grad_by_freq and weight.requires_grad and input.numel():
        flat = input.reshape(-1).long()
        counts = _pl.zeros(weight.shape[0], dtype=_pl.int64, device=weight.device)
        counts = counts.scatter_add(0, flat, _pl.ones_like(flat))
        scale = (1.0 / counts[flat].to(out.dtype)).reshape(tuple(input.shape) + (1,))
        # the value of ``out``, the gradient of ``out * scale``
        scaled = out * scale
        out = scaled + (out - scaled).detach()
    return out


@declare(**_F)
def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                  sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """Sum / mean / max of the embeddings of each bag.

    Bags are the rows of a 2-D ``input``, or the slices of a 1-D ``input``
    that start at ``offsets``. Sum and mean are a matmul of a constant
    ``(bags, n)`` membership matrix with the looked-up rows (composite);
    ``padding_idx`` entries are skipped (not counted in the mean).
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode={mode!r} is not valid; accepted: 'sum', 'mean', 'max'")
    check_tensor(input, "embedding_bag")
    check_tensor(weight, "embedding_bag", "weight")
    _check_kinds("embedding_bag", "input", input, ("int",))
    _check_kinds("embedding_bag", "weight", weight)
    if offsets is not None:
        check_tensor(offsets, "embedding_bag", "offsets")
        _check_kinds("embedding_bag", "offsets", offsets, ("int",))
    from pylucid._interop import np
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None when input is 2-D")
        B, L = input.shape
        flat = input.reshape(-1)
        starts = np.arange(B) * L
        n = B * L
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets are required when input is 1-D")
        flat = input
        n = input.shape[0]
        starts = np.asarray(offsets).reshape(-1).astype(np.int64)
        if include_last_offset:
            starts = starts[:-1]
        B = starts.shape[0]
    else:
        raise ValueError(f"embedding_bag: input must be 1-D or 2-D, got {input.ndim}-D")
    ends = np.append(starts[1:], n) if B else starts
    if include_last_offset and input.ndim == 1:
        ends = np.asarray(offsets).reshape(-1)[1:].astype(np.int64)
    pidx = _norm_padding_idx(padding_idx, weight.shape[0])
    rows = embedding(flat, weight, max_norm=max_norm, norm_type=norm_type)
    flat_np = np.asarray(flat)
    member = np.zeros((B, n), dtype=np.float64)
    for b in range(B):
        member[b, starts[b]:ends[b]] = 1.0
    if pidx >= 0:
        member[:, flat_np == pidx] = 0.0
    if mode == "max":
        if per_sample_weights is not None:
            raise ValueError("embedding_bag: per_sample_weights are only supported for mode='sum'")
        outs = []
        for b in range(B):
            sel = np.nonzero(member[b])[0]
            if sel.size == 0:
                outs.append(_pl.zeros(weight.shape[1], dtype=weight.dtype, device=weight.device))
            else:
                outs.append(_pl.amax(rows[_pl.tensor(sel, device=weight.device)], 0))
        return _pl.stack(outs) if outs else _pl.zeros(0, weight.shape[1], dtype=weight.dtype, device=weight.device)
    if mode == "mean":
        counts = member.sum(1, keepdims=True)
        member = np.divide(member, counts, out=np.zeros_like(member), where=counts > 0)
    m = _pl.tensor(member, dtype=weight.dtype, device=weight.device)
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError("embedding_bag: per_sample_weights are only supported for mode='sum'")
        rows = rows * per_sample_weights.reshape(-1, 1)
    return _pl.matmul(m, rows)


@declare(**_F)
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``(..., num_classes)`` int64 tensor with a 1 at each index (``num_classes=-1``: ``max + 1``);
    ``pylucid.one_hot``."""
    return _pl.one_hot(tensor, num_classes)


@declare(**_F)
def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad)//2`` dims (``pad = (left_last, right_last, left_prev, ...)``); ``pylucid.pad``.

    Negative pads crop, in every mode, as PyTorch: ``reflect``/``replicate`` map each output position
    ``-left .. n + right - 1`` to its source by the mode's rule; ``circular`` crops first, then wraps around
    what is left.

    >>> import pylucid
    >>> pad(pylucid.arange(6.0).reshape(1, 1, 6), (-1, 2), mode="reflect")
    tensor([[[1., 2., 3., 4., 5., 4., 3.]]])
    """
    check_tensor(input, "pad")
    pads = tuple(int(p) for p in pad) if isinstance(pad, (list, tuple)) else pad
    if mode == "constant" or not isinstance(pads, tuple) or min(pads, default=0) >= 0 or len(pads) % 2 \
            or len(pads) // 2 > input.ndim:
        return _pl.pad(input, pad, mode=mode, value=value)
    if mode not in ("reflect", "replicate", "circular"):
        return _pl.pad(input, pad, mode=mode, value=value)
    if value not in (None, 0):
        raise ValueError(f"pad: value is only used in constant mode, got mode={mode!r} and value={value}")
    x = input
    for i in range(len(pads) // 2):
        d = input.ndim - 1 - i
        left, right = pads[2 * i], pads[2 * i + 1]
        n = input.shape[d]
        if n + left + right <= 0 or n == 0:
            raise ValueError(f"pad: padding {pads} leaves no element in dim {d} of size {n}")
        if mode == "reflect" and (left >= n or right >= n):
            raise ValueError(f"pad: reflect padding {(left, right)} must be smaller than the size {n} of dim {d}")
        if mode == "circular":
            lo, hi = max(-left, 0), n - max(-right, 0)
            x = x.narrow(d, lo, hi - lo)
            continue
        src = _pl.arange(-left, n + right, device=input.device)
        if mode == "reflect":
            src = _pl.abs(src)
            src = _pl.where(src >= n, 2 * (n - 1) - src, src)
        else:
            src = _pl.clamp(src, 0, n - 1)
        x = _pl.index_select(x, d, src)
    if mode == "circular":
        return _pl.pad(x, tuple(max(p, 0) for p in pads), mode="circular")
    return x


@declare(**_F)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum((x1 / max(||x1||, eps)) (x2 / max(||x2||, eps)))`` along ``dim``, after broadcasting ``x1`` with
    ``x2`` (the norms are taken over the broadcast shape). As PyTorch, each norm is clamped outside autograd:
    the gradient sees the clamped value but flows through the norm as if unclamped.

    >>> import pylucid
    >>> cosine_similarity(pylucid.tensor([[1.0], [2.0]]), pylucid.tensor([[3.0, 4.0]])).round(decimals=4)
    tensor([0.9899, 0.9899])
    """
    check_tensor(x1, "cosine_similarity", "x1")
    check_tensor(x2, "cosine_similarity", "x2")
    # the common dtype must be a float one (PyTorch): one float argument is enough, complex is refused
    if dim is None:
        raise TypeError("cosine_similarity: dim must be an int, got None")
    for name, t in (("x1", x1), ("x2", x2)):
        _check_kinds("cosine_similarity", name, t, ("float", "int", "bool"))
    if not x1.is_floating_point() and not x2.is_floating_point():
        _check_kinds("cosine_similarity", "x1", x1)
    if not x1.is_floating_point() and not x1.is_complex():
        x1 = x1.to(_pl.get_default_dtype())
    if not x2.is_floating_point() and not x2.is_complex():
        x2 = x2.to(_pl.get_default_dtype())
    x1, x2 = _pl.broadcast_tensors(x1, x2)
    n1 = _vector_norm(x1, 2, dim, keepdim=True)
    n2 = _vector_norm(x2, 2, dim, keepdim=True)
    n1 = n1 + (_clamp_min(n1, eps) - n1).detach()
    n2 = n2 + (_clamp_min(n2, eps) - n2).detach()
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@declare(**_F)
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return _vector_norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


# ---------------------------------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------------------------------
def _additive_mask(attn_mask, is_causal, L, S, query):
    neg_inf = float("-inf")
    mask = None
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        rows = _pl.arange(L, device=query.device).reshape(L, 1)
        cols = _pl.arange(S, device=query.device).reshape(1, S)
        mask = _pl.where(cols <= rows, 0.0, neg_inf).to(query.dtype)
    elif attn_mask is not None:
        check_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
        ms = tuple(attn_mask.shape)
        if len(ms) >= 1 and ms[-1] not in (1, S) or len(ms) >= 2 and ms[-2] not in (1, L):
            raise ShapeMismatch(f"scaled_dot_product_attention: attn_mask of shape {list(ms)} does not broadcast to "
                                f"the (L, S) = ({L}, {S}) scores")
        if attn_mask.dtype is _pl.bool:
            mask = _pl.where(attn_mask, 0.0, neg_inf).to(query.dtype)
        else:
            mask = attn_mask
    return mask


@declare(_nn_ops.ScaledDotProductAttention, **_F)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q k^T * scale + mask) @ v`` (registered op, ``ForceFP32``).

    ``attn_mask``: boolean (True = attend) or additive float, broadcast to
    ``(..., L, S)``; ``is_causal`` masks keys after the query position;
    ``scale`` defaults to ``1/sqrt(E)``; ``dropout_p`` drops attention weights.
    Rows with every key masked give NaN, as PyTorch's math kernel.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(t, "scaled_dot_product_attention", name)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeMismatch(
            f"scaled_dot_product_attention: query {list(query.shape)}, key {list(key.shape)} and value "
            f"{list(value.shape)} do not match (expected (..., L, E), (..., S, E), (..., S, Ev))"
        )
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = _repeat_heads(key, rep)
        value = _repeat_heads(value, rep)
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # a plain causal call passes the flag, not a (L, S) mask: the op (and cuDNN's flash kernel) applies it
    # without materialising the mask
    causal = is_causal and attn_mask is None
    mask = None if causal else _additive_mask(attn_mask, is_causal, L, S, query)
    drop = None
    ds = 1.0
    if dropout_p > 0.0:
        shape = tuple(query.shape[:-1]) + (S,)
        drop = _keep_mask(query, shape, dropout_p)
        ds = 0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p)
    return _nn_ops.sdpa_op(query, key, value, mask, drop, sc, ds, causal=causal)


def _repeat_heads(x, rep):
    shp = tuple(x.shape)
    x = _pl.stack([x] * rep, x.ndim - 2)  # (..., Hk, rep, S, E): kv head i serves query heads i*rep..
    return x.reshape(shp[:-3] + (shp[-3] * rep,) + shp[-2:])


def _canonical_mask(mask, name, dtype):
    # PyTorch's MHA convention: a bool mask is True where attention is NOT allowed; float masks are additive
    if mask is None:
        return None
    if mask.dtype is _pl.bool:
        return _pl.where(mask, float("-inf"), 0.0).to(dtype)
    if not mask.is_floating_point():
        raise TypeError(f"multi_head_attention_forward: only bool and floating types of {name} are supported, "
                        f"got {mask.dtype}")
    return mask


def _pad_last(mask):
    # one more key position (bias_k / the zero attention), not masked
    return None if mask is None else pad(mask, (0, 1))


@declare(**_F)
def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's functional multi-head attention on sequence-first ``(L, N, E)`` inputs (or unbatched ``(L, E)``).

    As PyTorch: ``bias_k``/``bias_v`` ``(1, 1, E)`` append one key/value position, ``add_zero_attn`` one of
    zeros (after the heads are split); ``static_k``/``static_v`` ``(N*H, S, E/H)`` replace the projected keys/
    values; bool masks are True where attention is NOT allowed, float masks are added; ``attn_mask`` is
    ``(L, S)`` or ``(N*H, L, S)``; ``is_causal`` is only a hint that ``attn_mask`` is the causal mask.
    Returns ``(output, weights)``, the weights ``(N, L, S)`` averaged over the heads
    (``average_attn_weights``) or ``(N, H, L, S)``, None unless ``need_weights``.
    """
    op = "multi_head_attention_forward"
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(t, op, name)
        _check_kinds(op, name, t)  # PyTorch's attention refuses integer inputs
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise ValueError(f"{op}: need attn_mask if specifying the is_causal hint (e.g. "
                         "Transformer.generate_square_subsequent_mask)")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint: sdpa applies the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if E != embed_dim_to_check:
        raise ShapeMismatch(f"{op}: expected embed_dim {embed_dim_to_check}, got {E}")
    hd = E // num_heads
    if hd * num_heads != E:
        raise ValueError(f"{op}: embed_dim {E} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise ShapeMismatch(f"{op}: key's sequence and batch dims {list(key.shape[:2])} do not match value's "
                                f"{list(value.shape[:2])}")
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
        q = linear(query, q_proj_weight, bq)
        k = linear(key, k_proj_weight, bk)
        v = linear(value, v_proj_weight, bv)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise ShapeMismatch(f"{op}: key shape {list(key.shape)} does not match value shape {list(value.shape)}")
        w = in_proj_weight
        b = in_proj_bias
        q = linear(query, w[:E], None if b is None else b[:E])
        k = linear(key, w[E:2 * E], None if b is None else b[E:2 * E])
        v = linear(value, w[2 * E:], None if b is None else b[2 * E:])
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise ShapeMismatch(f"{op}: the 2-D attn_mask has shape {list(attn_mask.shape)}, expected {[L, S]}")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (N * num_heads, L, S):
                raise ShapeMismatch(f"{op}: the 3-D attn_mask has shape {list(attn_mask.shape)}, expected "
                                    f"{[N * num_heads, L, S]}")
        else:
            raise ShapeMismatch(f"{op}: attn_mask must be 2-D or 3-D, got {attn_mask.ndim}-D")
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{op}: bias_k and bias_v must be given together")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{op}: bias_k/bias_v cannot be added to static_k/static_v")
        k = _pl.cat([k, bias_k.reshape(1, 1, E).expand(1, N, E)])
        v = _pl.cat([v, bias_v.reshape(1, 1, E).expand(1, N, E)])
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    # (L, N, E) -> (N*H, L, hd), PyTorch's head layout (static_k/static_v come in it)
    q = q.reshape(L, N * num_heads, hd).transpose(0, 1)
    k = k.reshape(k.shape[0], N * num_heads, hd).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], N * num_heads, hd).transpose(0, 1) if static_v is None else static_v
    for name, t in (("static_k", static_k), ("static_v", static_v)):
        if t is not None and (t.ndim != 3 or t.shape[0] != N * num_heads or t.shape[2] != hd):
            raise ShapeMismatch(f"{op}: expected {name} of shape ({N * num_heads}, S, {hd}), got {list(t.shape)}")
    if add_zero_attn:
        zeros = _pl.zeros(N * num_heads, 1, hd, dtype=k.dtype, device=k.device)
        k = _pl.cat([k, zeros], 1)
        v = _pl.cat([v, zeros.to(v.dtype)], 1)
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    src = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, src):
            raise ShapeMismatch(f"{op}: expected key_padding_mask of shape {[N, src]}, got "
                                f"{list(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(N, 1, 1, src).expand(N, num_heads, 1, src).reshape(N * num_heads, 1, src)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        s = _pl.matmul(q * math.sqrt(1.0 / hd), k.transpose(-1, -2))
        if attn_mask is not None:
            s = s + attn_mask
        attn = softmax(s, -1)
        attn_d = dropout(attn, dropout_p) if dropout_p > 0 else attn
        out = _pl.matmul(attn_d, v)  # (N*H, L, hd)
        out = out.transpose(0, 1).reshape(L, N, E)
        attn = attn.reshape(N, num_heads, L, src)
        if average_attn_weights:
            attn = attn.mean(1)
    else:
        if attn_mask is not None:
            attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else attn_mask.reshape(N, num_heads, -1, src)
        out = scaled_dot_product_attention(q.reshape(N, num_heads, L, hd), k.reshape(N, num_heads, src, hd),
                                           v.reshape(N, num_heads, src, hd), attn_mask, dropout_p, is_causal)
        out = out.permute(2, 0, 1, 3).reshape(L, N, E)
        attn = None
    out = linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = out.squeeze(1)
        if attn is not None:
            attn = attn.squeeze(0)
    return out, attn


# ---------------------------------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------------------------------
def _check_same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        try:
            _pl.broadcast_to(target, input.shape)
        except Exception:  # noqa: BLE001
            raise ShapeMismatch(f"{op}: target of shape {list(target.shape)} cannot be broadcast to the input of "
                                f"shape {list(input.shape)}") from None


@declare(_nn_ops.MSELoss, **_F)
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """``(input - target)^2`` reduced (registered op, ``ForceFP32``)."""
    _check_reduction("mse_loss", reduction)
    _check_same_shape("mse_loss", input, target)
    if weight is not None:
        return _reduce(weight * (input - target) ** 2, reduction)
    return _nn_ops.mse_loss_op(input, target, reduction)


@declare(**_F)
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``|input - target|`` reduced (composite)."""
    _check_reduction("l1_loss", reduction)
    _check_same_shape("l1_loss", input, target)
    return _reduce(_pl.abs(input - target), reduction)


@declare(_nn_ops.HuberLoss, **_F)
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 d^2`` if ``|d| <= delta`` else ``delta (|d| - delta/2)`` (registered op, ``ForceFP32``)."""
    _check_reduction("huber_loss", reduction)
    if not delta > 0:  # NaN included
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    check_tensor(input, "huber_loss")
    _check_kinds("huber_loss", "input", input)  # PyTorch cannot write the float loss into an integer input
    _check_same_shape("huber_loss", input, target)
    return _nn_ops.huber_loss_op(input, target, reduction, delta)


@declare(**_F)
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` if ``|d| < beta`` else ``|d| - beta/2``: Huber with ``delta=beta`` divided by ``beta``
    (``beta=0``: L1)."""
    _check_reduction("smooth_l1_loss", reduction)
    if not beta >= 0:  # NaN included
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    check_tensor(input, "smooth_l1_loss")
    check_tensor(target, "smooth_l1_loss", "target")
    _check_same_shape("smooth_l1_loss", input, target)
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    _check_kinds("smooth_l1_loss", "input", input)  # PyTorch cannot write the float loss into an integer input
    return huber_loss(input, target, reduction, beta) / beta


def _class_input(op, input, target):
    """Validate ``(N, C, d...)`` / ``(C,)`` inputs against targets; returns (input, target, unbatched)."""
    check_tensor(input, op)
    check_tensor(target, op, "target")
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dim (C,) or (N, C, ...), got a 0-d tensor")
    prob = target.is_floating_point()
    unbatched = input.ndim == 1
    if unbatched:
        input = input.unsqueeze(0)
        target = target.unsqueeze(0)
    if prob:
        if tuple(target.shape) != tuple(input.shape):
            raise ShapeMismatch(f"{op}: probability targets must have the input's shape {list(input.shape)}, got "
                                f"{list(target.shape)}")
    else:
        exp_shape = (input.shape[0],) + tuple(input.shape[2:])
        if tuple(target.shape) != exp_shape:
            raise ShapeMismatch(f"{op}: expected target of shape {list(exp_shape)} for input of shape "
                                f"{list(input.shape)}, got {list(target.shape)}")
    return input, target, unbatched


def _check_targets(op, target, C, ignore_index):
    if target.numel() == 0:
        return
    from pylucid._interop import np
    t = np.asarray(target)
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"{op}: Target {int(t[bad].reshape(-1)[0])} is out of bounds (expected class indices in "
                         f"[0, {C}) or ignore_index={ignore_index})")


@declare(_nn_ops.CrossEntropyLoss, **_F)
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits ``(N, C, d1, ...)`` or ``(C,)`` against class indices or class probabilities.

    One fused registered op (stable log-softmax + NLL, ``ForceFP32``, fast
    first-order backward). ``weight`` rescales classes; ``ignore_index``
    targets contribute nothing (indices only); ``label_smoothing`` mixes the
    target with the uniform distribution. ``reduction='mean'`` divides by the
    summed weight of the non-ignored targets (indices) or by ``N*d1*...``
    (probabilities).

    >>> import pylucid
    >>> cross_entropy(pylucid.tensor([[2.0, 0.0], [0.0, 2.0]]), pylucid.tensor([0, 0]))
    tensor(1.1269)
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    input, target, unbatched = _class_input("cross_entropy", input, target)
    C = input.shape[1]
    if weight is not None and tuple(weight.shape) != (C,):
        raise ShapeMismatch(f"cross_entropy: weight must have shape [{C}], got {list(weight.shape)}")
    if target.is_floating_point():
        if ignore_index != -100:
            raise ValueError("cross_entropy: ignore_index is not supported for floating point (probability) targets")
    elif not (input.device.type == "cuda" and input.ndim == 2 and weight is None and not label_smoothing):
        # On the fused CUDA path the check is left to the kernel, which gives a NaN loss for an out-of-range
        # class (never an out-of-bounds read): checking here would copy the targets to the host and
        # synchronise the device on every step (PyTorch raises an asynchronous device-side assert there).
        _check_targets("cross_entropy", target, C, ignore_index)
    if C == 0 and target.is_floating_point():
        # no classes: each row's loss is an empty sum, 0; the mean divides by numel / C = 0 / 0 (NaN), as PyTorch
        rows = -(input * target).sum(1)
        out = rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.sum() + float("nan")
    else:
        out = _nn_ops.cross_entropy_loss(input, target, weight, ignore_index, reduction, label_smoothing)
    if unbatched and reduction == "none":
        out = out.squeeze(0)
    if reduction == "mean" and target.is_floating_point() and input.numel() == 0:
        out = out + float("nan")  # the mean of no probability rows is 0 / 0, as PyTorch
    return out


@declare(_nn_ops.NLLLoss, **_F)
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities ``(N, C, d1, ...)`` at class indices (registered op)."""
    _check_reduction("nll_loss", reduction)
    input, target, unbatched = _class_input("nll_loss", input, target)
    if target.is_floating_point():
        raise TypeError("nll_loss: expected integer class-index targets, got floating point")
    C = input.shape[1]
    if weight is not None and tuple(weight.shape) != (C,):
        raise ShapeMismatch(f"nll_loss: weight must have shape [{C}], got {list(weight.shape)}")
    _check_targets("nll_loss", target, C, ignore_index)
    out = _nn_ops.nll_loss_op(input, target, weight, ignore_index, reduction)
    if unbatched and reduction == "none":
        out = out.squeeze(0)
    return out


@declare(_nn_ops.BCELoss, **_F)
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """``-w (y log x + (1 - y) log(1 - x))`` on probabilities, logs clamped at -100 (registered op)."""
    _check_reduction("binary_cross_entropy", reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeMismatch(f"binary_cross_entropy: target size {list(target.shape)} must be the same as the input "
                            f"size {list(input.shape)}")
    if input.numel():
        lo, hi = float(_pl.amin(input.detach()).item()), float(_pl.amax(input.detach()).item())
        if not (lo >= 0 and hi <= 1):  # NaN is outside [0, 1] too
            raise ValueError("binary_cross_entropy: all elements of input should be between 0 and 1")
    return _nn_ops.bce_loss_op(input, target, weight, reduction)


@declare(_nn_ops.BCEWithLogits, **_F)
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``sigmoid`` + binary cross-entropy in one stable op; ``pos_weight`` weights the positive term."""
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeMismatch(f"binary_cross_entropy_with_logits: target size {list(target.shape)} must be the same "
                            f"as the input size {list(input.shape)}")
    out = _nn_ops.bce_with_logits_op(input, target, weight, pos_weight, reduction)
    # PyTorch's loss has the target's dtype (its kernel computes (1 - target).mul_(input) in place), outside autocast
    if out.dtype != target.dtype and target.dtype.is_floating_point and input.dtype.is_floating_point:
        from .._state import state

        if not state.autocast:
            out = out.to(target.dtype)
    return out


@declare(**_F)
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """``target (log target - input)`` (``input`` holds log-probabilities); ``reduction='batchmean'`` divides the
    sum by the batch size (the mathematically correct KL), ``'mean'`` by the element count (PyTorch's default)."""
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"kl_div: reduction={reduction!r} is not valid; accepted: 'none', 'mean', 'sum', "
                         "'batchmean'")
    check_tensor(input, "kl_div")
    check_tensor(target, "kl_div", "target")
    _check_kinds("kl_div", "input", input)
    _check_kinds("kl_div", "target", target)
    if log_target:
        loss = _pl.exp(target) * (target - input)
    else:
        # 0 * log 0 := 0
        safe = _pl.where(target > 0, target, 1.0)
        loss = _pl.where(target > 0, target * (_pl.log(safe) - input), 0.0 * input)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)


@declare(**_F)
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` for ``y = 1``, ``max(0, cos(x1, x2) - margin)`` for ``y = -1``."""
    _check_reduction("cosine_embedding_loss", reduction)
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        check_tensor(t, "cosine_embedding_loss", name)
    if input1.ndim not in (1, 2) or target.ndim != input1.ndim - 1:
        raise ShapeMismatch(f"cosine_embedding_loss: expected (N, D) or (D,) inputs with an (N,) or 0-d target, "
                            f"got {list(input1.shape)} and target {list(target.shape)}")
    eps = 1e-12  # PyTorch's EPSILON inside the loss
    dim = input1.ndim - 1
    prod = (input1 * input2).sum(dim)
    m1 = (input1 * input1).sum(dim) + eps
    m2 = (input2 * input2).sum(dim) + eps
    cos = prod / _pl.sqrt(m1 * m2)
    pos = 1 - cos
    neg = _clamp_min(cos - margin, 0.0)
    loss = _pl.where(target == 1, pos, 0.0 * pos) + _pl.where(target == -1, neg, 0.0 * neg)
    return _reduce(loss, reduction)


@declare(**_F)
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -y (x1 - x2) + margin)``."""
    _check_reduction("margin_ranking_loss", reduction)
    return _reduce(_clamp_min(-target * (input1 - input2) + margin, 0.0), reduction)


@declare(**_F)
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the pairwise ``p``-distance (``swap``: use
    ``min(d(a, n), d(p, n))``)."""
    _check_reduction("triplet_margin_loss", reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_s = pairwise_distance(positive, negative, p, eps)
        d_neg = _pl.where(d_s < d_neg, d_s, d_neg)
    return _reduce(_clamp_min(margin + d_pos - d_neg, 0.0), reduction)


_CTC_NEG = -1e30  # finite stand-in for log(0): keeps every exp/log (and their gradients) finite


@declare(**_F)
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss.

    ``log_probs``: ``(T, N, C)`` log-softmax outputs (or ``(T, C)``);
    ``targets``: ``(N, S)`` padded or 1-D concatenated; lengths as tensors or
    sequences. Forward is the alpha recursion in log space over the
    blank-extended labels, vectorised over the batch; the gradient comes from
    autograd through these ops. ``reduction='mean'`` divides each loss by its
    target length, then averages. Impossible alignments give ``inf`` (or 0
    with ``zero_infinity``).
    """
    from pylucid._interop import np
    _check_reduction("ctc_loss", reduction)
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        seq = v.tolist() if hasattr(v, "tolist") else v
        if not isinstance(seq, (list, tuple)) or not all(hasattr(n, "__index__") for n in seq):
            raise TypeError(f"ctc_loss: {name} must be an integer Tensor or a sequence of ints, got {seq!r}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if targets.ndim == 1:
            targets = targets.unsqueeze(0)
    T, N, C = log_probs.shape
    il = np.asarray(input_lengths).reshape(-1).astype(np.int64)
    tl = np.asarray(target_lengths).reshape(-1).astype(np.int64)
    if il.shape[0] != N or tl.shape[0] != N:
        raise ShapeMismatch(f"ctc_loss: expected {N} input and target lengths, got {il.shape[0]} and {tl.shape[0]}")
    tg = np.asarray(targets).astype(np.int64)
    Smax = int(tl.max()) if N else 0
    padded = np.full((N, max(Smax, 1)), blank, dtype=np.int64)
    if tg.ndim == 1:
        off = 0
        for n in range(N):
            padded[n, :tl[n]] = tg[off:off + tl[n]]
            off += tl[n]
    else:
        for n in range(N):
            padded[n, :tl[n]] = tg[n, :tl[n]]
    Lx = 2 * max(Smax, 0) + 1
    ext = np.full((N, Lx), blank, dtype=np.int64)
    ext[:, 1::2] = padded[:, :Smax] if Smax else ext[:, 1::2]
    # transitions from s-2 are allowed onto a non-blank label that differs from the label two back
    skip = np.zeros((N, Lx), dtype=bool)
    if Lx > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    dev = log_probs.device
    dt = log_probs.dtype
    batch_idx = _pl.tensor(np.arange(N)[:, None], device=dev)
    ext_t = _pl.tensor(ext, device=dev)
    skip_t = _pl.tensor(skip, device=dev)
    neg = _pl.full((N, 1), _CTC_NEG, dtype=dt, device=dev)
    neg2 = _pl.full((N, 2), _CTC_NEG, dtype=dt, device=dev)
    first = np.full((N, Lx), _CTC_NEG)
    first_mask = np.zeros((N, Lx), dtype=bool)
    first_mask[:, 0] = True
    first_mask[:, 1] = Lx > 1
    lp0 = log_probs[0][batch_idx, ext_t]
    alpha = _pl.where(_pl.tensor(first_mask, device=dev), lp0, _pl.tensor(first, dtype=dt, device=dev))
    alphas = [alpha]
    for t in range(1, T):
        a1 = _pl.cat([neg, alpha[:, :-1]], 1)
        a2 = _pl.cat([neg2, alpha[:, :-2]], 1) if Lx > 2 else _pl.full((N, Lx), _CTC_NEG, dtype=dt, device=dev)
        a2 = _pl.where(skip_t, a2, _CTC_NEG)
        m = _maximum(_maximum(alpha, a1), a2).detach()
        lse = m + _pl.log(_pl.exp(alpha - m) + _pl.exp(a1 - m) + _pl.exp(a2 - m))
        new = lse + log_probs[t][batch_idx, ext_t]
        # sequences already finished keep their alpha (their last step is read below)
        alpha = new
        alphas.append(alpha)
    stacked = _pl.stack(alphas)  # (T, N, Lx)
    last_t = _pl.tensor(np.maximum(il - 1, 0), device=dev)
    nidx = _pl.tensor(np.arange(N), device=dev)
    end1 = _pl.tensor(2 * tl, device=dev)
    end2 = _pl.tensor(np.maximum(2 * tl - 1, 0), device=dev)
    f1 = stacked[last_t, nidx, end1]
    f2 = stacked[last_t, nidx, end2]
    f2 = _pl.where(_pl.tensor(tl > 0, device=dev), f2, _CTC_NEG)
    m = _maximum(f1, f2).detach()
    loss = -(m + _pl.log(_pl.exp(f1 - m) + _pl.exp(f2 - m)))
    impossible = loss > 1e29
    if zero_infinity:
        loss = _pl.where(impossible, 0.0 * loss, loss)
    else:
        loss = _pl.where(impossible, float("inf"), loss)
    if reduction == "mean":
        denom = _pl.tensor(np.maximum(tl, 1), dtype=dt, device=dev)
        return (loss / denom).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss
