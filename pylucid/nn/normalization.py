"""Normalisation layers: batch, layer, group, instance, RMS and local response norm."""

from __future__ import annotations

import pylucid as _pl

from . import _functional_core as F
from . import init
from .module import Module, _set_params

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "LocalResponseNorm"]


def _shape(n):
    return (n,) if isinstance(n, int) else tuple(n)


def _affine_tensors(shape, weight: bool, bias: bool, device, dtype) -> dict:
    """The initial affine parameters of a norm layer: ``weight`` ones and ``bias`` zeros of ``shape`` (None: off)."""
    return {"weight": _pl.ones(*shape, device=device, dtype=dtype) if weight else None,
            "bias": _pl.zeros(*shape, device=device, dtype=dtype) if bias else None}


class _NormBase(Module):
    """Running statistics and affine parameters shared by batch and instance norm."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _set_params(self, **_affine_tensors((num_features,), affine, affine, device, dtype))
        if track_running_stats:
            self.register_buffer("running_mean", _pl.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _pl.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _pl.tensor(0, dtype=_pl.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        pass

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False) -> None:
        # checkpoints written before num_batches_tracked existed load with it at 0 (as PyTorch)
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = _pl.tensor(0, dtype=_pl.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs, assign)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        # the registered buffers and parameters read from their dicts (Module.__getattr__ costs a call each,
        # five per forward); a name moved out of them (a parametrization) is looked up as usual
        d = self.__dict__
        bufs, params = d["_buffers"], d["_parameters"]
        momentum, training = self.momentum, self.training
        factor = 0.0 if momentum is None else momentum
        if training and self.track_running_stats:
            count = bufs["num_batches_tracked"] if "num_batches_tracked" in bufs else self.num_batches_tracked
            if count is not None:
                # an int64 buffer never requires grad: the in-place add records nothing (no no_grad block needed)
                count.add_(1)
                # momentum=None: cumulative moving average
                if momentum is None:
                    factor = 1.0 / float(count.item())
        mean = bufs["running_mean"] if "running_mean" in bufs else self.running_mean
        var = bufs["running_var"] if "running_var" in bufs else self.running_var
        use_batch_stats = training or (mean is None and var is None)
        if training and not self.track_running_stats:
            mean = var = None
        return F.batch_norm(input, mean, var, params["weight"] if "weight" in params else self.weight,
                            params["bias"] if "bias" in params else self.bias, use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs.

    >>> import pylucid
    >>> pylucid.nn.BatchNorm1d(4)
    BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    """

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` inputs."""

    def _check_input_dim(self, input) -> None:
        if input.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input) -> None:
        if input.ndim != 5:
            raise ValueError(f"BatchNorm3d: expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_NormBase):
    _spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        unbatched = input.ndim == self._spatial + 1
        if input.ndim not in (self._spatial + 1, self._spatial + 2):
            raise ValueError(f"{type(self).__name__}: expected {self._spatial + 1}D or {self._spatial + 2}D input "
                             f"(got {input.ndim}D input)")
        x = input.unsqueeze(0) if unbatched else input
        use_stats = self.training or not self.track_running_stats
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_stats,
                              self.momentum if self.momentum is not None else 0.1, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Normalise each channel of each sample over its spatial dims (no affine, no running stats by default)."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial = 3


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims; ``weight`` ones, ``bias`` zeros.

    >>> import pylucid
    >>> pylucid.nn.LayerNorm(8)
    LayerNorm((8,), eps=1e-05, elementwise_affine=True)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _set_params(self, **_affine_tensors(self.normalized_shape, elementwise_affine, elementwise_affine and bias,
                                            device, dtype))

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        p = self.__dict__["_parameters"]  # (as _BatchNorm.forward)
        return F.layer_norm(input, self.normalized_shape, p["weight"] if "weight" in p else self.weight,
                            p["bias"] if "bias" in p else self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims (``eps=None``: machine epsilon)."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _set_params(self, weight=_pl.ones(*self.normalized_shape, device=device, dtype=dtype) if elementwise_affine
                    else None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalise groups of channels per sample; per-channel affine (ones/zeros)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _set_params(self, **_affine_tensors((num_channels,), affine, affine, device, dtype))

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
