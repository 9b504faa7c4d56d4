"""Convolution, pooling, resampling and folding layers, as ``torch.nn``.

Parameters are initialised as PyTorch does: ``weight ~ kaiming_uniform_(a=sqrt(5))``
(i.e. ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``) and ``bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))``.

>>> import pylucid
>>> from pylucid import nn
>>> nn.Conv2d(1, 6, 5)
Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1))
>>> nn.MaxPool2d(2)
MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
>>> nn.Conv2d(1, 6, 5)(pylucid.zeros(2, 1, 28, 28)).shape
(2, 6, 24, 24)
"""

from __future__ import annotations

import math

import pylucid as _pl

from .. import dtypes as _dt
from ..ops import conv as _C
from . import _functional_pool as _FP
from . import init
from .module import Module, Parameter, _set_params

__all__ = [
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d",
    "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "Unfold", "Fold", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d", "ChannelShuffle",
]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _factory(device, dtype):
    return {"device": device, "dtype": _dt.as_dtype(dtype) if dtype is not None else None}


# ----------------------------------------------------------------------------------------------------------
# convolutions
# ----------------------------------------------------------------------------------------------------------
class _ConvNd(Module):
    """Shared state of the convolution layers (PyTorch's attribute names and init)."""

    _nd = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", output_padding=0, device=None,
                 dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _C._tup(kernel_size, nd, "kernel_size", name, 1)
        self.stride = _C._tup(stride, nd, "stride", name, 1)
        self.dilation = _C._tup(dilation, nd, "dilation", name, 1)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}; accepted: 'same', 'valid'")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _C._tup(padding, nd, "padding", name, 0)
        self.output_padding = _C._tup(output_padding, nd, "output_padding", name, 0)
        self.groups = groups
        self.padding_mode = padding_mode
        fk = _factory(device, dtype)
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        _set_params(self, weight=_pl.empty(*shape, **fk), bias=_pl.empty(out_channels, **fk) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's default)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            if fan_in:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        nd = self._nd
        if self.padding != (0,) * nd:
            s += ", padding={padding}"
        if self.dilation != (1,) * nd:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * nd:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _explicit_pad(self, x):
        """Non-zero padding modes: pad first (``pylucid.pad``), then convolve without padding."""
        nd = self._nd
        if self.padding == "valid":
            return x
        if self.padding == "same":
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in total]
        else:
            pairs = [(p, p) for p in self.padding]
        flat = []
        for lo, hi in reversed(pairs[:nd]):  # F.pad order: last dim first
            flat += [lo, hi]
        return _pl.nn.functional.pad(x, tuple(flat), mode=self.padding_mode)


class _Conv(_ConvNd):
    _fn_names = {1: "conv1d", 2: "conv2d", 3: "conv3d"}

    def forward(self, input):
        fn = getattr(_C, self._fn_names[self._nd])
        # the parameters read from their dict (Module.__getattr__ costs a call each); a name moved out of it (a
        # parametrization) is looked up as usual
        p = self.__dict__["_parameters"]
        weight = p["weight"] if "weight" in p else self.weight
        bias = p["bias"] if "bias" in p else self.bias
        if self.padding_mode != "zeros":
            return fn(self._explicit_pad(input), weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)


class Conv1d(_Conv):
    """1-d convolution over (N, C_in, L): ``y = conv1d(x, weight, bias)``; see :func:`pylucid.conv1d`.

    ``padding_mode`` is ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.
    """

    _nd = 1


class Conv2d(_Conv):
    """2-d convolution over (N, C_in, H, W); ``weight`` (C_out, C_in/groups, kh, kw); see :func:`pylucid.conv2d`.

    >>> import pylucid
    >>> m = pylucid.nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect", bias=False)
    >>> m
    Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False, padding_mode=reflect)
    >>> m(pylucid.zeros(1, 2, 5, 5)).shape
    (1, 4, 5, 5)
    """

    _nd = 2


class Conv3d(_Conv):
    """3-d convolution over (N, C_in, D, H, W); see :func:`pylucid.conv3d`."""

    _nd = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'{type(self).__name__}: only "zeros" padding_mode is supported, got {padding_mode!r}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: string padding is not supported, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        """``output_padding`` that reaches ``output_size`` (PyTorch's ``_output_padding``)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        output_size = tuple(output_size)[-nd:]
        if len(output_size) != nd:
            raise ValueError(f"{type(self).__name__}: output_size must have {nd} or {nd + 2} entries")
        out = []
        for i in range(nd):
            n_in = input.shape[input.ndim - nd + i]
            smallest = ((n_in - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1)
                        + 1)
            extra = output_size[i] - smallest
            if extra < 0 or extra >= max(self.stride[i], self.dilation[i]):
                raise ValueError(f"{type(self).__name__}: requested output_size {tuple(output_size)} is not reachable "
                                 f"from input {tuple(input.shape)}")
            out.append(extra)
        return tuple(out)

    def forward(self, input, output_size=None):
        fn = getattr(_C, f"conv_transpose{self._nd}d")
        return fn(input, self.weight, self.bias, self.stride, self.padding, self._output_padding(input, output_size),
                  self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution; ``weight`` (C_in, C_out/groups, k); see :func:`pylucid.conv_transpose1d`."""

    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution; ``forward(x, output_size=None)`` as PyTorch.

    >>> import pylucid
    >>> pylucid.nn.ConvTranspose2d(2, 3, 3, stride=2)(pylucid.zeros(1, 2, 4, 4), output_size=(10, 10)).shape
    (1, 3, 10, 10)
    """

    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """3-d transposed convolution; see :func:`pylucid.conv_transpose3d`."""

    _nd = 3


# ----------------------------------------------------------------------------------------------------------
# pooling
# ----------------------------------------------------------------------------------------------------------
class _MaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")

    def forward(self, input):
        return getattr(_C, f"max_pool{self._nd}d")(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                                   self.ceil_mode, self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling; see :func:`pylucid.max_pool1d`."""

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling; see :func:`pylucid.max_pool2d`."""

    _nd = 2


class MaxPool3d(_MaxPoolNd):
    """3-d max pooling; see :func:`pylucid.max_pool3d`."""

    _nd = 3


class _AvgPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        nd = self._nd
        name = type(self).__name__
        if nd == 1:
            # PyTorch stores AvgPool1d's arguments as 1-tuples
            kernel_size = _C._tup(kernel_size, 1, "kernel_size", name, 1)
            stride = _C._tup(stride if stride is not None else kernel_size, 1, "stride", name, 1)
            padding = _C._tup(padding, 1, "padding", name, 0)
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return _C._avg_pool(self._nd, input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool1d(_AvgPoolNd):
    """1-d average pooling; see :func:`pylucid.avg_pool1d`."""

    _nd = 1


class AvgPool2d(_AvgPoolNd):
    """2-d average pooling; see :func:`pylucid.avg_pool2d`."""

    _nd = 2


class AvgPool3d(_AvgPoolNd):
    """3-d average pooling; see :func:`pylucid.avg_pool3d`."""

    _nd = 3


class _AdaptiveAvgPoolNd(Module):
    _nd = 2

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, input):
        return _C._adaptive_avg(self._nd, input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling to a fixed length; see :func:`pylucid.adaptive_avg_pool1d`."""

    _nd = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling to a fixed size; see :func:`pylucid.adaptive_avg_pool2d`."""

    _nd = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling over 3 spatial dims; see :func:`pylucid.adaptive_avg_pool3d`."""

    _nd = 3


class _AdaptiveMaxPoolNd(Module):
    _nd = 2

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, input):
        return _C._adaptive_max(self._nd, input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling to a fixed length; see :func:`pylucid.adaptive_max_pool1d`."""

    _nd = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling to a fixed size; see :func:`pylucid.adaptive_max_pool2d`."""

    _nd = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling over ``(D, H, W)``; see :func:`pylucid.adaptive_max_pool3d`."""

    _nd = 3


class _MaxUnpoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        # stored as tuples, as PyTorch's (_single/_pair/_triple)
        def nt(v):
            return tuple(v) if isinstance(v, (list, tuple)) else (v,) * self._nd

        self.kernel_size = nt(kernel_size)
        self.stride = nt(stride if stride is not None else kernel_size)
        self.padding = nt(padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input, indices, output_size=None):
        return getattr(_FP, f"max_unpool{self._nd}d")(input, indices, self.kernel_size, self.stride, self.padding,
                                                      output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``; see :func:`pylucid.nn.functional.max_unpool1d`."""

    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d``; see :func:`pylucid.nn.functional.max_unpool2d`."""

    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``; see :func:`pylucid.nn.functional.max_unpool3d`."""

    _nd = 3


class _LPPoolNd(Module):
    _nd = 2

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")

    def forward(self, input):
        return getattr(_FP, f"lp_pool{self._nd}d")(input, float(self.norm_type), self.kernel_size, self.stride,
                                                   self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """Power-average pooling; see :func:`pylucid.nn.functional.lp_pool1d`."""

    _nd = 1


class LPPool2d(_LPPoolNd):
    """2-D power-average pooling; see :func:`pylucid.nn.functional.lp_pool2d`."""

    _nd = 2


class LPPool3d(_LPPoolNd):
    """3-D power-average pooling; see :func:`pylucid.nn.functional.lp_pool3d`."""

    _nd = 3


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:
        super().__init__()
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError(f"{name}: only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            ratios = output_ratio if isinstance(output_ratio, (list, tuple)) else (output_ratio,) * self._nd
            if not all(0 < r < 1 for r in ratios):
                raise ValueError(f"{name}: output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return getattr(_FP, f"fractional_max_pool{self._nd}d")(
            input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
            _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling (random window starts from pylucid's generator); see
    :func:`pylucid.nn.functional.fractional_max_pool2d`."""

    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling; see :func:`pylucid.nn.functional.fractional_max_pool3d`."""

    _nd = 3


# ----------------------------------------------------------------------------------------------------------
# resampling and folding
# ----------------------------------------------------------------------------------------------------------
class Upsample(Module):
    """Resample by ``size`` or ``scale_factor`` (modes nearest, nearest-exact, linear, bilinear, trilinear).

    >>> import pylucid
    >>> pylucid.nn.Upsample(scale_factor=2, mode="nearest")
    Upsample(scale_factor=2.0, mode='nearest')
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return _C.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode='nearest')`` for 4-d input."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode='bilinear', align_corners=True)`` for 4-d input."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """``(*, C*r^2, H, W) -> (*, C, H*r, W*r)``; see :func:`pylucid.pixel_shuffle`."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"

    def forward(self, input):
        return _C.pixel_shuffle(input, self.upscale_factor)


class PixelUnshuffle(Module):
    """``(*, C, H*r, W*r) -> (*, C*r^2, H, W)``; see :func:`pylucid.pixel_unshuffle`."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"

    def forward(self, input):
        return _C.pixel_unshuffle(input, self.downscale_factor)


class ChannelShuffle(Module):
    """``(N, g*k, *) -> (N, k*g, *)``; see :func:`pylucid.channel_shuffle`."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

    def forward(self, input):
        return _C.channel_shuffle(input, self.groups)


class Unfold(Module):
    """Extract sliding blocks (im2col); see :func:`pylucid.unfold`."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")

    def forward(self, input):
        return _C.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    """Combine sliding blocks (col2im); see :func:`pylucid.fold`."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")

    def forward(self, input):
        return _C.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)
