"""``pylucid.nn.functional``: sampling by coordinates (``grid_sample``, ``affine_grid``).

Both are composites of public ops: ``grid_sample`` gathers the corner values of each sampling point from the
flattened input and mixes them with weights computed from the grid, so its gradient flows to the input (through
the gather) and to the grid (through the weights and the padding's coordinate map), to any order.

>>> import pylucid
>>> import pylucid.nn.functional as F
>>> img = pylucid.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
>>> F.grid_sample(img, pylucid.tensor([[[[0.0, 0.0]]]]), align_corners=True)
tensor([[[[1.5000]]]])
"""

from __future__ import annotations

import itertools

import pylucid as _pl

from .._tensor import Tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ..ops._utils import check_tensor
from ..ops.registry import declare

_F = dict(namespaces=("pylucid.nn.functional",), method=False)
_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient


def _unnormalize(g: Tensor, size: int, align_corners: bool) -> Tensor:
    # [-1, 1] -> pixel coordinates: the corner pixels' centres (align_corners) or their outer edges
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return ((g + 1) * size - 1) / 2


def _clip(x: Tensor, size: int) -> Tensor:
    # constants, not 0 * x, on the clipped side: an infinite coordinate clips to the edge (0 * inf is NaN); NaN stays
    hi = float(size - 1)
    return _pl.where(x < 0, _pl.zeros_like(x), _pl.where(x > hi, _pl.full_like(x, hi), x))


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    # fold x into [low, high] by reflecting at the borders, as PyTorch's reflect_coordinates
    if twice_low == twice_high:
        return _pl.where(_pl.isnan(x), x, _pl.zeros_like(x))
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = _pl.abs(x - lo)
    flips = _pl.floor(x / span).detach()
    extra = x - flips * span
    even = _pl.remainder(flips, 2) == 0
    return _pl.where(even, extra + lo, span - extra + lo)


def _pad_coordinates(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    if padding_mode == "border":
        return _clip(x, size)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return _clip(x, size)
    return x


def _gather(flat: Tensor, coords, sizes, C: int) -> Tensor:
    """``flat``: ``(N, C, prod(sizes))``; ``coords``: integer tensors ``(N, P)`` per dim (outermost first).
    The values at those points, 0 where a coordinate lies outside the input: ``(N, C, P)``."""
    valid = None
    lin = None
    for c, s in zip(coords, sizes):
        ok = (c >= 0) & (c < s)
        valid = ok if valid is None else valid & ok
        lin = c if lin is None else lin * s + c
    lin = _pl.where(valid, lin, 0 * lin)
    N, P = lin.shape
    vals = _pl.gather(flat, 2, lin.unsqueeze(1).expand(N, C, P))
    return _pl.where(valid.unsqueeze(1), vals, _pl.zeros_like(vals))  # not 0 * vals: the value at 0 may be inf


def _cubic_weights(t: Tensor) -> list:
    # the 4 taps at offsets -1, 0, 1, 2 of the cubic convolution kernel (a = -0.75)
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@declare(**_F)
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` at the normalised coordinates of ``grid``.

    ``input``: ``(N, C, H, W)`` (or ``(N, C, D, H, W)``); ``grid``: ``(N, H_out, W_out, 2)`` (or
    ``(N, D_out, H_out, W_out, 3)``) holding ``(x, y[, z])`` in ``[-1, 1]``, ``-1`` the left/top edge. A
    coordinate becomes the pixel position ``(g + 1)(size - 1)/2`` with ``align_corners`` (the corner pixels'
    centres at ``+-1``), else ``((g + 1) size - 1)/2`` (their outer edges). ``mode``: ``'bilinear'``
    (trilinear for 5-D), ``'nearest'`` (round half to even) or ``'bicubic'`` (4-D only, cubic convolution with
    ``a = -0.75``). ``padding_mode``: ``'zeros'`` (0 outside), ``'border'`` (clamp to the edge) or
    ``'reflection'`` (reflect at the edges, then clamp). Output: ``(N, C, H_out, W_out[, ...])``.

    >>> import pylucid
    >>> x = pylucid.arange(4.0).reshape(1, 1, 1, 4)
    >>> grid_sample(x, pylucid.tensor([[[[-1.0, 0.0], [1.0, 0.0]]]]), align_corners=False)
    tensor([[[[0.0000, 1.5000]]]])
    >>> grid_sample(x, pylucid.tensor([[[[-1.0, 0.0], [1.0, 0.0]]]]), padding_mode="border", align_corners=False)
    tensor([[[[0., 3.]]]])
    """
    check_tensor(input, "grid_sample")
    check_tensor(grid, "grid_sample", "grid")
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode={mode!r} is not valid; accepted: 'bilinear', 'nearest', 'bicubic'")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"grid_sample: padding_mode={padding_mode!r} is not valid; accepted: 'zeros', 'border', "
                         "'reflection'")
    if input.ndim not in (4, 5):
        raise ShapeMismatch(f"grid_sample: expected a 4-D or 5-D input, got shape {list(input.shape)}")
    nd = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise ShapeMismatch(f"grid_sample: grid of shape {list(grid.shape)} does not match the input of shape "
                            f"{list(input.shape)} (expected (N, *out, {nd}) with N = {input.shape[0]})")
    if mode == "bicubic" and nd == 3:
        raise ValueError("grid_sample: mode='bicubic' needs a 4-D input, got a 5-D one")
    if not input.is_floating_point() or grid.dtype != input.dtype:
        raise DtypeMismatch(f"grid_sample: expected floating input and grid of the same dtype, got {input.dtype} "
                            f"and {grid.dtype}")
    if align_corners is not None and not isinstance(align_corners, bool):
        raise TypeError(f"grid_sample: align_corners must be a bool or None, got {type(align_corners).__name__}")
    align_corners = bool(align_corners)
    N, C = input.shape[:2]
    sizes = tuple(input.shape[2:])
    out_sp = tuple(grid.shape[1:-1])
    n_in = n_pts = 1
    for v in sizes:
        n_in *= v
    for v in out_sp:
        n_pts *= v
    # explicit sizes: an empty batch or grid has no -1 to infer
    flat = input.reshape(N, C, n_in)
    g = grid.reshape(N, n_pts, nd)
    # grid's last dim is (x, y[, z]): innermost dim first; pos[i] goes with sizes[i] (outermost first)
    pos = [_unnormalize(g[..., nd - 1 - i], sizes[i], align_corners) for i in range(nd)]
    if mode == "bicubic":
        out = _bicubic(flat, pos, sizes, C, padding_mode, align_corners)
    else:
        pos = [_pad_coordinates(p, s, padding_mode, align_corners) for p, s in zip(pos, sizes)]
        # a non-finite coordinate lies off the input: 0 with zeros padding; with border or reflection padding a
        # NaN one (a reflected infinity is NaN) has no value to clamp to and samples NaN. Such points move to -2,
        # off the input, so that no inf - inf enters the weights
        lost = None
        if padding_mode != "zeros":
            for p in pos:
                lost = _pl.isnan(p) if lost is None else lost | _pl.isnan(p)
        pos = [_pl.where(_pl.isfinite(p), p, _pl.full_like(p, -2.0)) for p in pos]
        if mode == "nearest":
            out = _gather(flat, [_pl.round(p).detach().long() for p in pos], sizes, C)
        else:
            lo = [_pl.floor(p).detach() for p in pos]
            frac = [p - f for p, f in zip(pos, lo)]
            lo = [f.long() for f in lo]
            out = None
            for corner in itertools.product((0, 1), repeat=nd):
                w = None
                for c, f in zip(corner, frac):
                    wi = f if c else 1 - f
                    w = wi if w is None else w * wi
                term = _gather(flat, [b + c for b, c in zip(lo, corner)], sizes, C) * w.unsqueeze(1)
                out = term if out is None else out + term
        if lost is not None:
            out = _pl.where(lost.unsqueeze(1), _pl.full_like(out, float("nan")), out)
    return out.reshape((N, C) + out_sp)


def _bicubic(flat, pos, sizes, C, padding_mode, align_corners):
    py, px = pos
    fy, fx = _pl.floor(py).detach(), _pl.floor(px).detach()
    wy, wx = _cubic_weights(py - fy), _cubic_weights(px - fx)
    fy, fx = fy.long(), fx.long()
    out = None
    for i in range(4):
        ty = fy + (i - 1)
        for j in range(4):
            tx = fx + (j - 1)
            coords = [ty, tx]
            if padding_mode != "zeros":
                # each tap is mapped into the input by the padding rule (PyTorch's get_value_bounded)
                coords = [_pad_coordinates(c.to(flat.dtype), s, padding_mode, align_corners).long()
                          for c, s in zip(coords, sizes)]
            term = _gather(flat, coords, sizes, C) * (wy[i] * wx[j]).unsqueeze(1)
            out = term if out is None else out + term
    return out


def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    # the normalised centres of n pixels: -1..1 (align_corners) or shrunk by (n - 1) / n; a single pixel at 0
    if n <= 1:
        return _pl.zeros(n, dtype=like.dtype, device=like.device)
    c = _pl.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return c if align_corners else c * ((n - 1) / n)


@declare(**_F)
def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of the affine maps ``theta`` for :func:`grid_sample`.

    ``theta``: ``(N, 2, 3)`` for ``size = (N, C, H, W)`` (grid ``(N, H, W, 2)``) or ``(N, 3, 4)`` for
    ``size = (N, C, D, H, W)`` (grid ``(N, D, H, W, 3)``). Each output point is ``theta @ (x, y[, z], 1)`` with
    ``(x, y[, z])`` the normalised pixel centre (see :func:`grid_sample` for ``align_corners``).

    >>> import pylucid
    >>> theta = pylucid.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> affine_grid(theta, (1, 1, 1, 2), align_corners=True)
    tensor([[[[-1.,  0.],
              [ 1.,  0.]]]])
    """
    check_tensor(theta, "affine_grid", "theta")
    size = tuple(int(s) for s in size)
    if not theta.is_floating_point():
        raise DtypeMismatch(f"affine_grid: expected a floating theta, got {theta.dtype}")
    if len(size) not in (4, 5):
        raise ValueError(f"affine_grid: size must have 4 or 5 entries (N, C, [D,] H, W), got {list(size)}")
    nd = len(size) - 2
    if tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ShapeMismatch(f"affine_grid: expected theta of shape {[size[0], nd, nd + 1]} for size {list(size)}, "
                            f"got {list(theta.shape)}")
    if min(size) <= 0:
        raise ValueError(f"affine_grid: expected a non-zero, positive size, got {list(size)}")
    align_corners = bool(align_corners)
    sp = size[2:]
    # base[..., k] for k < nd is the coordinate along the innermost-first axis k (x, y, z), then a 1
    axes = [_base_coords(sp[nd - 1 - k], align_corners, theta) for k in range(nd)]
    cols = []
    for k in range(nd):
        shape = [1] * nd
        shape[nd - 1 - k] = sp[nd - 1 - k]
        cols.append(axes[k].reshape(shape).expand(*sp))
    cols.append(_pl.ones(*sp, dtype=theta.dtype, device=theta.device))
    base = _pl.stack(cols, -1).reshape(1, -1, nd + 1)
    grid = _pl.matmul(base, theta.transpose(1, 2))
    return grid.reshape((size[0],) + tuple(sp) + (nd,))
