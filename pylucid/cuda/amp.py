"""``pylucid.cuda.amp``: the older spelling of mixed precision, kept for programs written against it.

PyTorch deprecated ``torch.cuda.amp.autocast(...)`` and ``torch.cuda.amp.GradScaler(...)`` in favour of
``torch.amp.autocast("cuda", ...)`` and ``torch.amp.GradScaler("cuda", ...)``; the old names still work and
emit a ``FutureWarning`` naming the new spelling. pylucid does the same: each name here is a thin subclass
(or wrapper) of its :mod:`pylucid.amp` counterpart with the device fixed to ``"cuda"``, so its behaviour is
exactly that of :mod:`pylucid.amp` (on a machine without a GPU the scaler disables itself with a warning,
and autocast for ``"cuda"`` changes nothing because no tensor lives there).

>>> import warnings, pylucid
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     ctx = pylucid.cuda.amp.autocast(dtype=pylucid.bfloat16)
>>> ctx.device_type, ctx.fast_dtype, caught[0].category.__name__
('cuda', pylucid.bfloat16, 'FutureWarning')
"""

from __future__ import annotations

import functools
import warnings

from .. import dtypes as _dt
from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast
from ..amp import get_autocast_dtype, is_autocast_enabled

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):  # noqa: N801 - mirrors torch.cuda.amp.autocast
    """``pylucid.amp.autocast("cuda", ...)`` under its deprecated name (warns ``FutureWarning``).

    Args:
        enabled: turn autocasting on (default) or off inside the region.
        dtype: the lower precision, ``float16`` (default) or ``bfloat16``.
        cache_enabled: accepted for PyTorch compatibility; pylucid keeps no weight-cast cache.
    """

    def __init__(self, enabled: bool = True, dtype=_dt.float16, cache_enabled: bool = True) -> None:
        warnings.warn(
            "`pylucid.cuda.amp.autocast(args...)` is deprecated. Please use `pylucid.amp.autocast('cuda', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``pylucid.amp.GradScaler("cuda", ...)`` under its deprecated name (warns ``FutureWarning``).

    The arguments are :class:`pylucid.amp.GradScaler`'s without ``device``. Without a GPU the scaler
    disables itself (with a ``UserWarning``), as PyTorch's does: ``scale(loss)`` returns ``loss`` and
    ``step(optimizer)`` simply steps.
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn(
            "`pylucid.cuda.amp.GradScaler(args...)` is deprecated. Please use "
            "`pylucid.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def _cast(value, dtype):
    """Floating tensors (also inside lists, tuples and dict values) cast to ``dtype``; all else untouched."""
    from .._tensor import Tensor

    if isinstance(value, Tensor):
        return value.to(dtype) if value.dtype.is_floating_point and value.device.type == "cuda" else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Decorate a custom ``autograd.Function.forward`` so it runs under the caller's CUDA autocast state.

    With ``cast_inputs`` (a floating dtype) and an enclosing ``autocast`` for CUDA, floating CUDA tensor
    arguments are cast to ``cast_inputs`` and ``forward`` runs with autocast off; outside autocast it is
    called unchanged. Pair it with :func:`custom_bwd` on ``backward``. Deprecated spelling of PyTorch's
    ``torch.amp.custom_fwd(device_type="cuda")``: warns ``FutureWarning``.
    """
    warnings.warn(
        "`pylucid.cuda.amp.custom_fwd(args...)` is deprecated; it is the CUDA form of PyTorch's "
        "`torch.amp.custom_fwd(args..., device_type='cuda')`.",
        FutureWarning,
        stacklevel=2,
    )
    if fwd is None:
        return functools.partial(_custom_fwd, cast_inputs=cast_inputs)
    return _custom_fwd(fwd, cast_inputs=cast_inputs)


def _custom_fwd(fwd, *, cast_inputs=None):
    target = None if cast_inputs is None else _dt.as_dtype(cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(ctx, *args, **kwargs):
        enabled = is_autocast_enabled("cuda")
        ctx._dtype = get_autocast_dtype("cuda")
        if target is None:
            ctx._fwd_used_autocast = enabled
            return fwd(ctx, *args, **kwargs)
        ctx._fwd_used_autocast = False
        if not enabled:
            return fwd(ctx, *args, **kwargs)
        with _autocast("cuda", enabled=False):
            return fwd(ctx, *_cast(args, target), **_cast(kwargs, target))

    return decorate_fwd


def custom_bwd(bwd):
    """Decorate a custom ``autograd.Function.backward`` to run under the autocast state its forward saw.

    Deprecated spelling of PyTorch's ``torch.amp.custom_bwd(device_type="cuda")``: warns ``FutureWarning``.
    """
    warnings.warn(
        "`pylucid.cuda.amp.custom_bwd(args...)` is deprecated; it is the CUDA form of PyTorch's "
        "`torch.amp.custom_bwd(args..., device_type='cuda')`.",
        FutureWarning,
        stacklevel=2,
    )

    @functools.wraps(bwd)
    def decorate_bwd(ctx, *args, **kwargs):
        used = getattr(ctx, "_fwd_used_autocast", False)
        with _autocast("cuda", dtype=getattr(ctx, "_dtype", None), enabled=used):
            return bwd(ctx, *args, **kwargs)

    return decorate_bwd
