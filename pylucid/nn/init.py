"""``pylucid.nn.init``: in-place parameter initialisers (all under ``no_grad``), as ``torch.nn.init``.

Every function takes ``generator=`` (a ``pylucid.Generator``) for reproducible
draws and returns the tensor it filled.

>>> import pylucid
>>> w = pylucid.empty(3, 4)
>>> pylucid.nn.init.constant_(w, 0.5).sum()
tensor(6.)
>>> round(pylucid.nn.init.calculate_gain("relu"), 4)
1.4142
"""

from __future__ import annotations

import math

import pylucid as _pl

from .._tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "trunc_normal_", "sparse_", "_calculate_fan_in_and_fan_out", "_calculate_correct_fan"]


def _write(tensor: Tensor, values: Tensor) -> Tensor:
    with _pl.no_grad():
        tensor.copy_(values.to(device=tensor.device, dtype=tensor.dtype))
    return tensor


def _check(op, tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{op}: expected a Tensor, got {type(tensor).__name__}")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; accepted: linear, conv*, sigmoid, "
                     "tanh, relu, leaky_relu, selu")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    dim = tensor.ndim
    if dim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return num_input_fmaps * receptive, num_output_fmaps * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _rand(tensor, generator):
    return _pl.rand(*tensor.shape, generator=generator, dtype=_pl.float64, device=tensor.device)


def _randn(tensor, generator):
    return _pl.randn(*tensor.shape, generator=generator, dtype=_pl.float64, device=tensor.device)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with ``U(a, b)``."""
    _check("uniform_", tensor)
    return _write(tensor, _rand(tensor, generator) * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with ``N(mean, std^2)``."""
    _check("normal_", tensor)
    return _write(tensor, _randn(tensor, generator) * std + mean)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Fill with ``N(mean, std^2)`` truncated to ``[a, b]`` (rejection sampling: out-of-range draws are redrawn)."""
    _check("trunc_normal_", tensor)
    with _pl.no_grad():
        vals = _randn(tensor, generator) * std + mean
        for _ in range(1000):
            bad = (vals < a) | (vals > b)
            if not bool((bad.sum() > 0).item()):
                break
            vals = _pl.where(bad, _randn(tensor, generator) * std + mean, vals)
        vals = _pl.where(vals < a, a, _pl.where(vals > b, b, vals))
    return _write(tensor, vals)


def constant_(tensor: Tensor, val: float) -> Tensor:
    _check("constant_", tensor)
    with _pl.no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("nn.init.eye_: only tensors with 2 dimensions are supported")
    return _write(tensor, _pl.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D conv weight with the Dirac delta (identity convolution), per group."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("nn.init.dirac_: only tensors with 3, 4, or 5 dimensions are supported")
    out_per = tensor.shape[0] // groups
    min_dim = min(out_per, tensor.shape[1])
    delta = _pl.zeros(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    with _pl.no_grad():
        for g in range(groups):
            for d in range(min_dim):
                delta[(g * out_per + d, d) + centre] = 1
    return _write(tensor, delta)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """``N(0, std^2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """``U(-bound, bound)`` with ``bound = gain * sqrt(3 / fan)`` (He et al.)."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """``N(0, std^2)`` with ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one (signs fixed by ``diag(R)``)."""
    if tensor.ndim < 2:
        raise ValueError("nn.init.orthogonal_: only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with _pl.no_grad():
        a = _pl.randn(rows, cols, generator=generator, dtype=_pl.float64, device=tensor.device)
        if rows < cols:
            a = a.T
        q, r = _pl.linalg.qr(a)
        q = q * _pl.sign(_pl.diagonal(r))  # make the decomposition unique, as PyTorch does
        if rows < cols:
            q = q.T
        return _write(tensor, (q.reshape(tensor.shape) * gain).to(tensor.dtype))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """2-D tensor: ``N(0, std^2)`` with a fraction ``sparsity`` of each column set to zero."""
    if tensor.ndim != 2:
        raise ValueError("nn.init.sparse_: only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with _pl.no_grad():
        vals = _randn(tensor, generator) * std
        for c in range(cols):
            vals[_pl.randperm(rows, generator=generator, device=tensor.device)[:num_zeros], c] = 0
        return _write(tensor, vals.to(tensor.dtype))
