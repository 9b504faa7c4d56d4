"""Linear layers: ``Identity``, ``Linear``, ``Bilinear``, and the reshaping layers ``Flatten``/``Unflatten``."""

from __future__ import annotations

import math

import pylucid as _pl

from .. import dtypes as _dt
from . import _functional_core as F
from . import init
from .module import Module, _set_params

__all__ = ["Identity", "Linear", "LazyLinear", "Bilinear", "Flatten", "Unflatten"]


def _factory(device, dtype):
    return {"device": device, "dtype": _dt.as_dtype(dtype) if dtype is not None else None}


def _empty(*shape, device=None, dtype=None):
    return _pl.empty(*shape, device=device, dtype=dtype)


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x W^T + b`` with ``W``: ``(out_features, in_features)``.

    Initialisation as PyTorch: ``W ~ kaiming_uniform_(a=sqrt(5))`` i.e.
    ``U(-1/sqrt(in), 1/sqrt(in))``, and ``b ~ U(-1/sqrt(in), 1/sqrt(in))``.

    >>> import pylucid
    >>> m = pylucid.nn.Linear(3, 2)
    >>> m
    Linear(in_features=3, out_features=2, bias=True)
    >>> m(pylucid.ones(4, 3)).shape
    (4, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _set_params(self, weight=_empty(out_features, in_features, device=device, dtype=dtype),
                    bias=_empty(out_features, device=device, dtype=dtype) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        # the parameters read from their dict (Module.__getattr__ costs a call each); a name moved out of it (a
        # parametrization) is looked up as usual
        p = self.__dict__["_parameters"]
        return F.linear(input, p["weight"] if "weight" in p else self.weight, p["bias"] if "bias" in p else self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(Linear):
    """``Linear`` whose ``in_features`` is inferred from the first input."""

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        self._factory = (device, dtype)
        _set_params(self, weight=_empty(0, device=device, dtype=dtype),
                    bias=_empty(0, device=device, dtype=dtype) if bias else None)

    def forward(self, input):
        if self.in_features == 0:
            self.in_features = input.shape[-1]
            with _pl.no_grad():
                w = _empty(self.out_features, self.in_features, device=input.device, dtype=self.weight.dtype)
                self.weight._data = w._data
                self.weight._device = w._device
                if self.bias is not None:
                    b = _empty(self.out_features, device=input.device, dtype=self.bias.dtype)
                    self.bias._data = b._data
                    self.bias._device = b._device
            self.reset_parameters()
        return super().forward(input)


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with ``A``: ``(out, in1, in2)``; init ``U(-1/sqrt(in1), 1/sqrt(in1))`` for both."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _set_params(self, weight=_empty(out_features, in1_features, in2_features, device=device, dtype=dtype),
                    bias=_empty(out_features, device=device, dtype=dtype) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return _pl.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.ndim
        shape = tuple(input.shape[:d]) + self.unflattened_size + tuple(input.shape[d + 1:])
        return input.reshape(shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
