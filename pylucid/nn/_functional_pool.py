"""``pylucid.nn.functional``: the pools PyTorch has only as functional forms of layers: max unpooling,
power-average (``lp_pool``) and fractional max pooling, composites of public ops.

>>> import pylucid
>>> import pylucid.nn.functional as F
>>> x = pylucid.tensor([[[1.0, 4.0, 2.0, 3.0]]])
>>> y, idx = F.max_pool1d(x, 2, return_indices=True)
>>> F.max_unpool1d(y, idx, 2)
tensor([[[0., 4., 0., 3.]]])
"""

from __future__ import annotations

import inspect

import pylucid as _pl

from .._tensor import Tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ..ops._utils import check_tensor
from ..ops.conv import avg_pool1d, avg_pool2d, avg_pool3d
from ..ops.registry import declare

_F = dict(namespaces=("pylucid.nn.functional",), method=False)


def _ntuple(v, n: int, what: str, op: str) -> tuple:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{op}: {what} must be an int or a sequence of {n} ints, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


# ---------------------------------------------------------------------------------------------------------------------
# max unpooling
# ---------------------------------------------------------------------------------------------------------------------
def _unpool_size(op, in_sp, kernel, stride, padding, output_size):
    nd = len(in_sp)
    default = tuple((in_sp[i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(nd))
    if output_size is None:
        return default
    out = tuple(int(s) for s in output_size)
    if len(out) == nd + 2 or len(out) == nd + 1:
        out = out[-nd:]
    if len(out) != nd:
        raise ValueError(f"{op}: output_size must have {nd} or {nd + 2} elements, got {len(output_size)}")
    for i in range(nd):
        lo, hi = default[i] - stride[i], default[i] + stride[i]
        if not lo < out[i] < hi:
            raise ValueError(f"{op}: invalid output_size {list(output_size)} (dim {i} must be between {lo + 1} and "
                             f"{hi - 1})")
    return out


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    op = f"max_unpool{nd}d"
    check_tensor(input, op)
    check_tensor(indices, op, "indices")
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeMismatch(f"{op}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeMismatch(f"{op}: indices of shape {list(indices.shape)} must have the input's shape "
                            f"{list(input.shape)}")
    if indices.dtype != _pl.int64:
        raise TypeError(f"{op}: expected int64 indices, got {indices.dtype}")
    if input.is_complex():  # the values of a max pool, which refuses complex inputs (as PyTorch)
        raise DtypeMismatch(f"{op}: argument 'input' has dtype {input.dtype.name} (complex); {op} accepts float, "
                            "int tensors")
    kernel = _ntuple(kernel_size, nd, "kernel_size", op)
    stride = _ntuple(stride if stride is not None else kernel, nd, "stride", op)
    padding = _ntuple(padding, nd, "padding", op)
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    idx = indices.unsqueeze(0) if unbatched else indices
    N, C = x.shape[:2]
    out_sp = _unpool_size(op, tuple(x.shape[2:]), kernel, stride, padding, output_size)
    total = 1
    for s in out_sp:
        total *= s
    n_src = 1
    for v in x.shape[2:]:
        n_src *= v
    flat_idx = idx.reshape(N, C, n_src)  # explicit sizes: an empty batch has no -1 to infer
    if flat_idx.numel() and (bool((flat_idx < 0).any()) or bool((flat_idx >= total).any())):
        raise IndexError(f"{op}: found an invalid max index (expected indices in [0, {total}) for output size "
                         f"{list(out_sp)})")
    out = _pl.zeros(N, C, total, dtype=x.dtype, device=x.device)
    out = _pl.scatter(out, 2, flat_idx, x.reshape(N, C, n_src))
    out = out.reshape((N, C) + out_sp)
    return out.squeeze(0) if unbatched else out


@declare(**_F)
def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool1d`: each value goes to its index, zeros elsewhere.

    The output length is ``(L - 1) stride - 2 padding + kernel_size`` unless ``output_size`` picks another one
    within ``stride`` of it.
    """
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


@declare(**_F)
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool2d`; see :func:`max_unpool1d`.

    >>> import pylucid
    >>> x = pylucid.arange(16.0).reshape(1, 1, 4, 4)
    >>> y, i = pylucid.nn.functional.max_pool2d(x, 2, return_indices=True)
    >>> max_unpool2d(y, i, 2)[0, 0, :2]
    tensor([[0., 0., 0., 0.],
            [0., 5., 0., 7.]])
    """
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


@declare(**_F)
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool3d`; see :func:`max_unpool1d`."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# ---------------------------------------------------------------------------------------------------------------------
# power-average pooling
# ---------------------------------------------------------------------------------------------------------------------
def _lp_pool(nd, pool, input, norm_type, kernel_size, stride, ceil_mode):
    op = f"lp_pool{nd}d"
    check_tensor(input, op)
    kernel = _ntuple(kernel_size, nd, "kernel_size", op)
    count = 1
    for k in kernel:
        count *= k
    p = float(norm_type)
    if p == 0:
        raise ValueError(f"{op}: norm_type must be non-zero, got {norm_type}")
    out = pool(input ** norm_type, kernel_size, stride, 0, ceil_mode)
    # PyTorch's sign(out) * relu(|out|): the window sum of x^p, clamped at 0 for odd p, then its 1/p power
    return (_pl.sign(out) * _pl.relu(_pl.abs(out)) * count) ** (1.0 / p)


@declare(**_F)
def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling: ``(sum_window x^p)^(1/p)`` (``p = inf`` is max pooling, ``p = 1`` sum pooling).

    >>> import pylucid
    >>> lp_pool1d(pylucid.tensor([[[3.0, 4.0]]]), 2, 2)
    tensor([[[5.]]])
    """
    return _lp_pool(1, avg_pool1d, input, norm_type, kernel_size, stride, ceil_mode)


@declare(**_F)
def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """2-D power-average pooling; see :func:`lp_pool1d`."""
    return _lp_pool(2, avg_pool2d, input, norm_type, kernel_size, stride, ceil_mode)


@declare(**_F)
def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """3-D power-average pooling; see :func:`lp_pool1d`."""
    return _lp_pool(3, avg_pool3d, input, norm_type, kernel_size, stride, ceil_mode)


# ---------------------------------------------------------------------------------------------------------------------
# fractional max pooling
# ---------------------------------------------------------------------------------------------------------------------
def _fractional_max_pool(nd, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    op = f"fractional_max_pool{nd}d"
    check_tensor(input, op)
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeMismatch(f"{op}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {list(input.shape)}")
    kernel = _ntuple(kernel_size, nd, "kernel_size", op)
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    N, C = x.shape[:2]
    in_sp = tuple(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
        ratio = output_ratio if isinstance(output_ratio, (list, tuple)) else (output_ratio,) * nd
        if len(ratio) == 1:
            ratio = tuple(ratio) * nd
        out_sp = tuple(int(in_sp[i] * float(ratio[i])) for i in range(nd))
    else:
        out_sp = _ntuple(output_size, nd, "output_size", op)
    # PyTorch's bound: the windows fit (2-D), and leave at least one spare position (3-D)
    strict = nd == 3
    for i in range(nd):
        if out_sp[i] + kernel[i] - 1 > in_sp[i] - strict:
            raise ValueError(f"{op}: kernel_size {kernel[i]} is too large relative to the input size {in_sp[i]} "
                             f"for output size {out_sp[i]} (dim {i})")
        if out_sp[i] <= 0 or kernel[i] <= 0:
            raise ValueError(f"{op}: output_size and kernel_size must be positive, got {list(out_sp)} and "
                             f"{list(kernel)}")
    if _random_samples is None:
        u = _pl.rand(N, C, nd, dtype=x.dtype, device=x.device)
    else:
        check_tensor(_random_samples, op, "_random_samples")
        u = _random_samples.to(x.dtype)
        if tuple(u.shape) != (N, C, nd):
            raise ShapeMismatch(f"{op}: expected _random_samples of shape {[N, C, nd]}, got {list(u.shape)}")
    u = u.detach()
    # window starts per dim, PyTorch's sequence: int((i + u) alpha) - int(u alpha), the last one at S - k;
    # computed in the input's dtype, as its kernel does. The samples go to (W, H) in 2-D, to (T, H, W) in 3-D.
    lin = None
    for i in range(nd):
        s, k, o = in_sp[i], kernel[i], out_sp[i]
        ui = u[:, :, nd - 1 - i if nd == 2 else i].unsqueeze(-1)  # (N, C, 1)
        if o > 1:
            alpha = (s - k) / (o - 1)
            steps = _pl.arange(o, dtype=x.dtype, device=x.device)
            starts = _pl.floor((steps + ui) * alpha) - _pl.floor(ui * alpha)
            last = _pl.arange(o, device=x.device) == o - 1
            starts = _pl.where(last, float(s - k), starts).long()
        else:
            starts = _pl.full((N, C, 1), s - k, dtype=_pl.int64, device=x.device)
        pos = starts.unsqueeze(-1) + _pl.arange(k, device=x.device)  # (N, C, o, k)
        # broadcast into (N, C, o_0, ..., o_{nd-1}, k_0, ..., k_{nd-1})
        shape = [N, C] + [1] * (2 * nd)
        shape[2 + i], shape[2 + nd + i] = o, k
        pos = pos.reshape(shape)
        lin = pos if lin is None else lin * s + pos
    n_win = 1
    for k in kernel:
        n_win *= k
    n_out = 1
    for o in out_sp:
        n_out *= o
    lin = lin.expand(*([N, C] + list(out_sp) + list(kernel))).reshape(N, C, n_out, n_win)
    n_in = 1
    for v in in_sp:
        n_in *= v
    # explicit sizes: an empty batch has no -1 to infer
    win = _pl.gather(x.reshape(N, C, n_in), 2, lin.reshape(N, C, n_out * n_win)).reshape(N, C, n_out, n_win)
    am = _pl.argmax(win.detach(), -1, keepdim=True)
    vals = _pl.gather(win, 3, am).reshape((N, C) + out_sp)
    idx = _pl.gather(lin, 3, am).reshape((N, C) + out_sp)
    if unbatched:
        vals, idx = vals.squeeze(0), idx.squeeze(0)
    return (vals, idx) if return_indices else vals


@declare(**_F)
def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling (Graham, 2014): ``kernel_size`` windows at pseudo-random, increasing starts.

    Along a dim of size ``S`` to ``o`` outputs, window ``i`` starts at ``int((i + u) a) - int(u a)`` with
    ``a = (S - k) / (o - 1)`` and one ``u ~ U[0, 1)`` per sample, channel and dim (``_random_samples``:
    ``(N, C, 2)``, the width's first); the last window ends at ``S``; ``o + k - 1 <= S``. ``output_ratio`` gives
    ``o = int(S * ratio)``. The gradient goes to each window's first maximum.

    >>> import pylucid
    >>> x = pylucid.arange(16.0).reshape(1, 1, 4, 4)
    >>> fractional_max_pool2d(x, 2, output_size=2, _random_samples=pylucid.tensor([[[0.5, 0.5]]]))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


@declare(**_F)
def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """3-D fractional max pooling; see :func:`fractional_max_pool2d`.

    ``_random_samples``: ``(N, C, 3)``, for ``(T, H, W)`` in that order (PyTorch's kernels); each dim needs
    ``o + k - 1 < S``.
    """
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)



# ---------------------------------------------------------------------------------------------------------------------
# the ``*_with_indices`` forms: the pool with ``return_indices=True``
# ---------------------------------------------------------------------------------------------------------------------
def _with_indices(pool, nd: int):
    name = f"{pool.__name__}_with_indices"
    sig = inspect.signature(pool)

    def fn(input: Tensor, *args, **kwargs):
        bound = sig.bind(input, *args, **kwargs)
        bound.arguments["return_indices"] = True
        return pool(*bound.args, **bound.kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = sig
    fn.__doc__ = f"``{pool.__name__}(..., return_indices=True)``: the pooled values and their flat input indices."
    return declare(name=name, **_F)(fn)


def _declare_with_indices():
    from ..ops import conv as _C

    out = {}
    for nd in (1, 2, 3):
        out[f"max_pool{nd}d"] = _with_indices(getattr(_C, f"max_pool{nd}d"), nd)
        out[f"adaptive_max_pool{nd}d"] = _with_indices(getattr(_C, f"adaptive_max_pool{nd}d"), nd)
    out["fractional_max_pool2d"] = _with_indices(fractional_max_pool2d, 2)
    out["fractional_max_pool3d"] = _with_indices(fractional_max_pool3d, 3)
    return out


_WITH_INDICES = _declare_with_indices()
