"""Convolution, pooling and resampling ops.

Everything here is built on two primitives on backend arrays:

- *im2col*: the padded input seen through a strided view of shape
  ``(N, C, *kernel, *out)`` (``as_strided``: no copy, no loop over pixels);
  one contiguous copy of that view and one batched BLAS ``matmul`` make a
  convolution.
- *col2im*: the adjoint, a scatter-add of the kernel taps into the padded
  input (a loop over the ``prod(kernel)`` kernel positions, never over pixels).

The registered ``unfold`` (im2col) and ``fold`` (col2im) ops are each other's
gradient, so every graph-mode backward here is written with ``unfold``,
``fold``, ``matmul``, ``sum`` and reshapes: the backward of a convolution is
itself differentiable (gradient penalties, double backward). ``conv2d`` and
``max_pool2d``, the layers of the benchmarked models, also have a first-order
``backward_fast`` on raw arrays; the other ops run their graph formula for
first order too.

Convolutions and transposed convolutions go through the backend's library wherever
it takes the configuration, cuDNN on CUDA and oneDNN on the CPU where installed
(``be.conv_nd`` / ``be.conv_transpose_nd`` and their backwards; None means "not
here" and the GEMM path runs): the forward, and
the first-order backward (``backward_fast``). Under ``create_graph=True`` the
graph formula above runs, so higher derivatives stay exact.

Internally every op works on N-d spatial data with per-dim ``(lo, hi)``
padding pairs (``ceil_mode`` pooling and ``padding='same'`` need asymmetric
padding); the public functions validate and normalise their arguments. They
are declared in ``pylucid`` and ``pylucid.nn.functional``.
"""

from __future__ import annotations

import itertools
import math

from .. import dtypes as _dt
from .._tensor import _TENSOR_TYPES as _TT
from .._tensor import Tensor, _new_tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ._op import Op, apply
from ._utils import camel, check_tensor
from .registry import declare
from .schema import KEEP_INPUT, PROMOTE, OpSchema

#: every function here is exported in both namespaces, none is a Tensor method
_DECLARE = dict(namespaces=("pylucid", "pylucid.nn.functional"), method=False)


# ----------------------------------------------------------------------------------------------------------
# argument helpers
# ----------------------------------------------------------------------------------------------------------
def _tup(v, n: int, what: str, op: str, minimum: int | None = None) -> tuple:
    """An int or a sequence of ``n`` ints as an ``n``-tuple (PyTorch's ``_single/_pair/_triple``)."""
    # the common calls (a layer's own int or n-tuple of ints, every forward): no generator expressions
    if v.__class__ is int:
        if minimum is None or v >= minimum:
            return (v,) * n
    elif v.__class__ is tuple and len(v) == n and all(i.__class__ is int for i in v) and (
            minimum is None or min(v, default=minimum) >= minimum):
        return v
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{op}: {what} must be an int or a tuple of {n} ints, got {tuple(v)}")
        out = tuple(v)
    else:
        out = (v,) * n
    try:
        out = tuple(i.__index__() for i in out)
    except AttributeError:
        raise TypeError(f"{op}: {what} must hold ints, got {v!r}") from None
    if minimum is not None and any(i < minimum for i in out):
        raise ValueError(f"{op}: {what} must be >= {minimum}, got {out}")
    return out


def _nd_ops(base, name: str, dims=(1, 2, 3), fast_dims=(), **schema) -> dict:
    """One registered subclass of ``base`` per spatial rank, ``{nd: cls}``: op ``name.format(nd)``
    (``"conv{}d"`` -> ``conv2d``, class ``Conv2d``) with an ``OpSchema`` of family ``nn`` and ``schema``.

    The ranks in ``fast_dims`` get ``base._backward_fast`` as their first-order fast path (only the
    benchmarked 2-d layers, where it measurably pays); the others run the graph formula.
    """
    ops = {}
    for nd in dims:
        op_name = name.format(nd)
        body = {"schema": OpSchema(op_name, family="nn", **schema), "__module__": __name__}
        if nd in fast_dims:
            body["backward_fast"] = base._backward_fast
        ops[nd] = type(camel(op_name), (base,), body)
    return ops


def _conv_out(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _prod(xs) -> int:
    n = 1
    for v in xs:
        n *= v
    return n


def _batched(x: Tensor, nd: int, op: str, what: str = "input"):
    """(x with a batch dim, whether one was added): ops take ``(N, C, *S)`` or unbatched ``(C, *S)``."""
    if x.ndim == nd + 2:
        return x, False
    if x.ndim == nd + 1:
        from .shape import unsqueeze

        return unsqueeze(x, 0), True
    raise ShapeMismatch(
        f"{op}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) {what}, got shape {tuple(x.shape)}"
    )


def _check_nonempty(op: str, x: Tensor, added: bool, what: str = "input") -> None:
    """PyTorch's rule for the pools, ``unfold`` and ``fold``: only the batch dim may be empty (an unbatched
    input has none)."""
    if 0 in x.shape[1:] or (added and x.shape[0] == 0):
        shape = tuple(x.shape[1:]) if added else tuple(x.shape)
        raise ShapeMismatch(f"{op}: expected {what} with non-zero sizes in every dim but the batch dim, got shape "
                            f"{shape}{' (unbatched)' if added else ''}")


def _unbatch(y, added: bool):
    if not added:
        return y
    from .shape import squeeze

    return squeeze(y, 0)


# ----------------------------------------------------------------------------------------------------------
# im2col / col2im on backend arrays
# ----------------------------------------------------------------------------------------------------------
def _pad_arr(be, x, pads, value=0):
    """Pad the spatial dims of ``x`` (N, C, *S) by ``pads`` = ((lo, hi), ...) with ``value``."""
    if not any(lo or hi for lo, hi in pads):
        return x
    shape = x.shape[:2] + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
    out = be.full(shape, value, dtype=x.dtype) if value != 0 else be.zeros(shape, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], pads))] = x
    return out


def _windows(be, xp, kernel, dilation, stride, out_sp):
    """The strided view (N, C, *kernel, *out) of the padded input ``xp``: im2col without a copy."""
    st = xp.strides
    nd = len(kernel)
    shape = xp.shape[:2] + tuple(kernel) + tuple(out_sp)
    strides = st[:2] + tuple(st[2 + i] * dilation[i] for i in range(nd)) + tuple(
        st[2 + i] * stride[i] for i in range(nd))
    return be.lib.stride_tricks.as_strided(xp, shape, strides)


def _im2col(be, x, kernel, dilation, pads, stride, value=0):
    """(view (N, C, *kernel, *out), out_sp) of ``x`` padded by ``pads``."""
    out_sp = tuple(_conv_out(s, k, st, lo, hi, d)
                   for s, k, st, (lo, hi), d in zip(x.shape[2:], kernel, stride, pads, dilation))
    return _windows(be, _pad_arr(be, x, pads, value), kernel, dilation, stride, out_sp), out_sp


def _col2im(be, cols, size, kernel, dilation, pads, stride):
    """Adjoint of ``_im2col``: scatter-add ``cols`` (N, C, *kernel, *out) into (N, C, *size).

    One strided add per kernel position (``prod(kernel)`` iterations), each
    over all pixels at once.
    """
    nd = len(kernel)
    out_sp = cols.shape[2 + nd:]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    # windows of a ceil_mode pool may reach past the padded input: make room, crop below
    padded = tuple(max(p, (o - 1) * st + d * (k - 1) + 1)
                   for p, o, st, d, k in zip(padded, out_sp, stride, dilation, kernel))
    out = be.zeros(cols.shape[:2] + padded, dtype=cols.dtype)
    head = (slice(None), slice(None))
    for kpos in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(kp * d, kp * d + st * (o - 1) + 1, st)
                   for kp, d, st, o in zip(kpos, dilation, stride, out_sp))
        out[head + sl] += cols[head + kpos]
    return out[head + tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))]


# ----------------------------------------------------------------------------------------------------------
# unfold / fold (im2col / col2im as ops)
# ----------------------------------------------------------------------------------------------------------
class Unfold(Op):
    """im2col: ``(N, C, *S) -> (N, C*prod(kernel), L)`` (sliding blocks as columns).

    Linear; its gradient is ``fold`` with the same geometry (and vice versa),
    so any formula built from the two is differentiable to every order.
    """

    schema = OpSchema("unfold", amp_policy=KEEP_INPUT, family="nn")

    @staticmethod
    def forward(be, x, kernel, dilation, pads, stride):
        cols, out_sp = _im2col(be, x, kernel, dilation, pads, stride)
        n, c = x.shape[:2]
        return be.ascontiguousarray(cols).reshape(n, c * _prod(kernel), _prod(out_sp))

    def backward(self, g):
        p = self.params
        return _fold_t(g, self.shapes[0][2:], p["kernel"], p["dilation"], p["pads"], p["stride"])


class Fold(Op):
    """col2im: ``(N, C*prod(kernel), L) -> (N, C, *size)``, summing overlapping blocks."""

    schema = OpSchema("fold", amp_policy=KEEP_INPUT, family="nn")

    @staticmethod
    def forward(be, cols, size, kernel, dilation, pads, stride):
        n, ck = cols.shape[:2]
        out_sp = tuple(_conv_out(s, k, st, lo, hi, d)
                       for s, k, st, (lo, hi), d in zip(size, kernel, stride, pads, dilation))
        c = ck // _prod(kernel)
        return _col2im(be, cols.reshape((n, c) + tuple(kernel) + out_sp), size, kernel, dilation, pads, stride)

    def backward(self, g):
        p = self.params
        return _unfold_t(g, p["kernel"], p["dilation"], p["pads"], p["stride"])


def _unfold_t(x, kernel, dilation, pads, stride):
    return apply(Unfold, (x,), {"kernel": tuple(kernel), "dilation": tuple(dilation), "pads": tuple(pads),
                                "stride": tuple(stride)})


def _fold_t(cols, size, kernel, dilation, pads, stride):
    return apply(Fold, (cols,), {"size": tuple(size), "kernel": tuple(kernel), "dilation": tuple(dilation),
                                 "pads": tuple(pads), "stride": tuple(stride)})


@declare(**_DECLARE)
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Extract sliding local blocks (im2col), as ``torch.nn.functional.unfold``.

    ``(N, C, H, W) -> (N, C*kh*kw, L)`` with ``L`` the number of block
    positions; column ``l`` holds the (zero-padded) block at position ``l``,
    channel-major then kernel row-major. Unbatched ``(C, H, W)`` input gives
    ``(C*kh*kw, L)``. Its gradient is :func:`fold`.

    >>> import pylucid
    >>> x = pylucid.arange(9.0).reshape(1, 1, 3, 3)
    >>> pylucid.unfold(x, 2)
    tensor([[[0., 1., 3., 4.],
             [1., 2., 4., 5.],
             [3., 4., 6., 7.],
             [4., 5., 7., 8.]]])
    """
    check_tensor(input, "unfold")
    x, added = _batched(input, 2, "unfold")
    _check_nonempty("unfold", x, added)
    k = _tup(kernel_size, 2, "kernel_size", "unfold", 1)
    d = _tup(dilation, 2, "dilation", "unfold", 1)
    p = _tup(padding, 2, "padding", "unfold", 0)
    s = _tup(stride, 2, "stride", "unfold", 1)
    pads = tuple((v, v) for v in p)
    for i in range(2):
        if _conv_out(x.shape[2 + i], k[i], s[i], p[i], p[i], d[i]) < 1:
            raise ShapeMismatch(f"unfold: input of spatial size {tuple(x.shape[2:])} (padding {p}) is smaller than "
                                f"the dilated kernel {k} (dilation {d})")
    return _unbatch(_unfold_t(x, k, d, pads, s), added)


@declare(**_DECLARE)
def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Combine sliding local blocks into a tensor (col2im), as ``torch.nn.functional.fold``.

    ``(N, C*kh*kw, L) -> (N, C, *output_size)``; overlapping values are
    summed. ``fold(unfold(x))`` multiplies each pixel by the number of blocks
    covering it. Its gradient is :func:`unfold`.

    >>> import pylucid
    >>> pylucid.fold(pylucid.ones(1, 4, 4), (3, 3), 2)
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    check_tensor(input, "fold")
    if input.ndim not in (2, 3):
        raise ShapeMismatch(f"fold: expected a 2-d (unbatched) or 3-d (batched) input, got shape {tuple(input.shape)}")
    from .shape import unsqueeze

    added = input.ndim == 2
    x = unsqueeze(input, 0) if added else input
    _check_nonempty("fold", x, added)
    size = _tup(output_size, 2, "output_size", "fold", 1)
    k = _tup(kernel_size, 2, "kernel_size", "fold", 1)
    d = _tup(dilation, 2, "dilation", "fold", 1)
    p = _tup(padding, 2, "padding", "fold", 0)
    s = _tup(stride, 2, "stride", "fold", 1)
    kk = _prod(k)
    if x.shape[1] % kk:
        raise ShapeMismatch(f"fold: expected size of input's dim 1 ({x.shape[1]}) to be divisible by the product of "
                            f"kernel_size {k} ({kk})")
    blocks = _prod(_conv_out(size[i], k[i], s[i], p[i], p[i], d[i]) for i in range(2))
    if x.shape[2] != blocks:
        raise ShapeMismatch(f"fold: given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, "
                            f"expected size of input's dim 2 to be {blocks}, got {x.shape[2]}")
    return _unbatch(_fold_t(x, size, k, d, tuple((v, v) for v in p), s), added)


# ----------------------------------------------------------------------------------------------------------
# convolution
# ----------------------------------------------------------------------------------------------------------
def _conv_cols(be, x, kernel, dilation, pads, stride, groups):
    """Contiguous im2col of ``x`` as (N, G, C/G*K, L), and the output spatial size."""
    cols, out_sp = _im2col(be, x, kernel, dilation, pads, stride)
    n, c = x.shape[:2]
    return be.ascontiguousarray(cols).reshape(n, groups, c // groups * _prod(kernel), _prod(out_sp)), out_sp


def _narrow(x, w, groups) -> bool:
    """Few input channels per group (a first layer, LeNet-sized nets): the batched im2col GEMMs measure
    faster there (benchmarks/bench_train.py LeNet-5) than the backend's channels-last paths for wide layers."""
    return x.shape[1] // groups < 16 and x.dtype.kind == "f" and x.dtype.itemsize >= 4


def _bias_shape(nd):
    return (1, -1) + (1,) * nd


def _bias_grad(be, node, g):
    """``sum(g)`` over the batch and spatial dims when the bias needs a gradient, else None."""
    if len(node.next_edges) > 2 and node.next_edges[2] is not None:
        return be.sum(g, axis=(0,) + tuple(range(2, g.ndim)))
    return None


def _library_grads(be, node, g, method):
    """``(dx, dw, db)`` from the backend's convolution library (cuDNN, oneDNN) ``method`` (None: it is off,
    absent or declines)."""
    p = node.params
    e = node.next_edges
    r = getattr(be, method)(g, node.input(0)._data, node.input(1)._data, p["stride"], p["pads"], p["dilation"],
                            p["groups"], e[0] is not None, e[1] is not None)
    return None if r is None else r + (_bias_grad(be, node, g),)


class _ConvNd(Op):
    """``y = w * x + b`` (cross-correlation) with stride, per-side padding, dilation and groups.

    Forward: the backend's library (cuDNN, oneDNN) where it takes the case, else im2col view, one contiguous copy, one batched
    GEMM ``(G, O/G, C/G*K) @ (N, G, C/G*K, L)``. Backward (graph mode, so it is differentiable again):
    ``dx = fold(w^T @ g)``, ``dw = sum_n g @ unfold(x)^T``, ``db = sum(g)``; first order: cuDNN's data
    and weight gradients, else the im2col path (2-d) or the graph formula.
    """

    @staticmethod
    def forward(be, x, w, b, stride, pads, dilation, groups):
        if x.dtype.kind not in "iu":  # the libraries have no integer convolution
            y = be.conv_nd(x, w, b, stride, pads, dilation, groups)
            if y is not None:
                return y
        if be.name == "cpu" and _narrow(x, w, groups):
            nd = x.ndim - 2
            n, o = x.shape[0], w.shape[0]
            cols, out_sp = _conv_cols(be, x, w.shape[2:], dilation, pads, stride, groups)
            y = be.matmul(w.reshape(groups, o // groups, -1), cols).reshape((n, o) + out_sp)
            if b is not None:
                y += b.reshape(_bias_shape(nd))
            return y
        return be.conv_nd_gemm(x, w, b, stride, pads, dilation, groups)

    def backward(self, g):
        from .linalg import matmul
        from .reduction import sum as _sum
        from .shape import reshape, transpose

        p = self.params
        x, w = self.input(0), self.input(1)
        gr = p["groups"]
        n, c = x.shape[:2]
        o = w.shape[0]
        kernel = w.shape[2:]
        nd = len(kernel)
        length = _prod(g.shape[2:])
        g2 = reshape(g, (n, gr, o // gr, length))
        gx = gw = gb = None
        if self.next_edges[0] is not None:
            w2 = reshape(w, (gr, o // gr, -1))
            cols = reshape(matmul(transpose(w2, -1, -2), g2), (n, c * _prod(kernel), length))
            gx = _fold_t(cols, x.shape[2:], kernel, p["dilation"], p["pads"], p["stride"])
        if self.next_edges[1] is not None:
            cols = reshape(_unfold_t(x, kernel, p["dilation"], p["pads"], p["stride"]),
                           (n, gr, c // gr * _prod(kernel), length))
            gw = reshape(_sum(matmul(g2, transpose(cols, -1, -2)), 0), w.shape)
        if len(self.next_edges) > 2 and self.next_edges[2] is not None:
            gb = _sum(g, (0,) + tuple(range(2, 2 + nd)))
        return gx, gw, gb

    def backward_fast(self, be, g):
        r = _library_grads(be, self, g, "conv_nd_backward")
        if r is not None:
            return r
        p = self.params
        e = self.next_edges
        x, w = self.input(0)._data, self.input(1)._data
        need_x, need_w = e[0] is not None, e[1] is not None
        lib_dx = None
        if need_x and need_w:
            # the library declined the weight gradient (oneDNN below 16 input channels per group): its data
            # gradient still, the weight gradient from the kernels below
            part = be.conv_nd_backward(g, x, w, p["stride"], p["pads"], p["dilation"], p["groups"], True, False)
            if part is not None:
                lib_dx, need_x = part[0], False
        if be.name == "cpu" and _narrow(x, w, p["groups"]):
            dx, dw, db = self._narrow_backward(be, g, x, w, need_x, need_w)
        else:
            dx, dw = be.conv_nd_gemm_backward(g, x, w, p["stride"], p["pads"], p["dilation"], p["groups"],
                                              need_x, need_w)
            db = _bias_grad(be, self, g)
        return (dx if lib_dx is None else lib_dx), dw, db

    def _narrow_backward(self, be, g, x, w, need_x=True, need_w=True):
        p = self.params
        gr = p["groups"]
        n, c = x.shape[:2]
        o = w.shape[0]
        kernel = w.shape[2:]
        # the incoming gradient may be a broadcast (stride-0) view: BLAS wants real strides
        g = be.ascontiguousarray(g)
        g2 = g.reshape(n, gr, o // gr, _prod(g.shape[2:]))
        gx = gw = None
        if need_x:
            cols = be.matmul(be.swapaxes(w.reshape(gr, o // gr, -1), -1, -2), g2)
            cols = cols.reshape((n, c) + tuple(kernel) + g.shape[2:])
            gx = _col2im(be, cols, x.shape[2:], kernel, p["dilation"], p["pads"], p["stride"])
        if need_w:
            cols, _ = _conv_cols(be, x, kernel, p["dilation"], p["pads"], p["stride"], gr)
            # batched GEMMs then a sum over N: faster here than one tensordot, which copies both operands
            gw = be.sum(be.matmul(g2, be.swapaxes(cols, -1, -2)), axis=0).reshape(w.shape)
        return gx, gw, _bias_grad(be, self, g)


_CONV = _nd_ops(_ConvNd, "conv{}d", amp_policy=PROMOTE, saves_input=True)
Conv1d, Conv2d, Conv3d = _CONV.values()


def _check_float(x, op):
    if x.dtype.category < _dt.FLOAT:
        raise DtypeMismatch(f"{op}: expected a floating point input, got {x.dtype}")


def _check_conv_dtypes(op, input, weight, bias, transposed):
    """PyTorch's CPU kernels: float inputs as before; integer convolutions are exact in their own dtype (any
    integer dtype; transposed ones int64 only), with input, weight and bias of one dtype; bool is not
    implemented."""
    cat = input.dtype.category
    if cat >= _dt.FLOAT and weight.dtype.category >= _dt.FLOAT:
        return
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if t is not None and t.dtype == _dt.bool_:
            raise NotImplementedError(f"{op}: not implemented for bool {name}")
    if input.dtype.category >= _dt.COMPLEX or weight.dtype.category >= _dt.COMPLEX:
        raise DtypeMismatch(f"{op}: input ({input.dtype}) and weight ({weight.dtype}) must have the same dtype")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise DtypeMismatch(f"{op}: input ({input.dtype}) and {name} ({t.dtype}) must have the same dtype")
    if transposed and input.dtype != _dt.int64:
        raise NotImplementedError(f"{op}: integer transposed convolution is implemented for int64 only, got "
                                  f"{input.dtype}")


def _conv_inputs(op, nd, input, weight, bias, groups, layout, transposed=False):
    """The checks convolutions and transposed convolutions share; ``layout`` names the weight's dims.
    Returns (input with a batch dim, whether one was added)."""
    check_tensor(input, op)
    check_tensor(weight, op, "weight")
    if bias is not None:
        check_tensor(bias, op, "bias")
    _check_conv_dtypes(op, input, weight, bias, transposed)
    x, added = _batched(input, nd, op)
    if weight.ndim != nd + 2:
        raise ShapeMismatch(f"{op}: expected a {nd + 2}-d weight ({layout}, *kernel), got shape {tuple(weight.shape)}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    return x, added


#: convolution calls already checked: (rank, shapes, dtypes, stride, padding, dilation, groups) -> the op's
#: (stride, pads, dilation). A layer calls with the same arguments every step, and every check of ``_conv`` is a
#: function of exactly these, so a repeat skips them (batched Tensor calls with hashable arguments only).
_checked: dict = {}


def _plain_arg(v) -> bool:
    """An int, a tuple of ints or a string: a geometry argument whose hash tells it apart (1.0 and True hash
    as 1, and must still meet their own checks)."""
    c = v.__class__
    if c is int or c is str:
        return True
    if c is tuple:
        for e in v:
            if e.__class__ is not int:
                return False
        return True
    return False


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    if (input.__class__ in _TT and weight.__class__ in _TT and (bias is None or bias.__class__ in _TT)
            and groups.__class__ is int and _plain_arg(stride) and _plain_arg(padding) and _plain_arg(dilation)):
        xd, wd = input._data, weight._data
        key = (nd, xd.shape, wd.shape, None if bias is None else bias._data.shape, xd.dtype, wd.dtype,
               None if bias is None else bias._data.dtype, stride, padding, dilation, groups)
        geo = _checked.get(key)
        if geo is not None:
            return apply(_CONV[nd], (input, weight, bias),
                         {"stride": geo[0], "pads": geo[1], "dilation": geo[2], "groups": groups})
    else:
        key = None
    op = f"conv{nd}d"
    x, added = _conv_inputs(op, nd, input, weight, bias, groups, "out_channels, in_channels/groups")
    o, cg = weight.shape[:2]
    c = x.shape[1]
    if c != cg * groups:
        raise ShapeMismatch(f"{op}: expected input with {cg * groups} channels (weight {tuple(weight.shape)}, "
                            f"groups={groups}), got input of shape {tuple(input.shape)}")
    if o % groups:
        raise ValueError(f"{op}: out_channels ({o}) must be divisible by groups ({groups})")
    if bias is not None and tuple(bias.shape) != (o,):
        raise ShapeMismatch(f"{op}: expected bias of shape ({o},), got {tuple(bias.shape)}")
    s = _tup(stride, nd, "stride", op, 1)
    d = _tup(dilation, nd, "dilation", op, 1)
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(v != 1 for v in s):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={s})")
            # total padding d*(k-1); the odd extra goes to the end, as PyTorch
            pads = tuple((d[i] * (kernel[i] - 1) // 2, d[i] * (kernel[i] - 1) - d[i] * (kernel[i] - 1) // 2)
                         for i in range(nd))
        else:
            raise ValueError(f"{op}: invalid padding string {padding!r}; accepted: 'same', 'valid'")
    else:
        pads = tuple((v, v) for v in _tup(padding, nd, "padding", op, 0))
    for i in range(nd):
        if x.shape[2 + i] + sum(pads[i]) < d[i] * (kernel[i] - 1) + 1:
            raise ShapeMismatch(f"{op}: input spatial size {tuple(x.shape[2:])} (padded by {pads}) is smaller than "
                                f"the dilated kernel {tuple(kernel)} (dilation {d})")
    if key is not None and not added:
        if len(_checked) > 4096:  # shapes that change every call: start again
            _checked.clear()
        _checked[key] = (s, pads, d)
    y = apply(_CONV[nd], (x, weight, bias), {"stride": s, "pads": pads, "dilation": d, "groups": groups})
    return _unbatch(y, added)


@declare(**_DECLARE)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """1-d convolution (cross-correlation): ``y[n, o, l] = b[o] + sum_{c,k} w[o, c, k] x[n, c, l*s + k*d - p]``.

    ``input`` (N, C, L) or unbatched (C, L); ``weight`` (O, C/groups, k);
    ``padding`` an int, a tuple, ``'valid'`` or ``'same'`` (stride 1 only).
    Implemented as im2col + one GEMM; differentiable twice.

    >>> import pylucid
    >>> pylucid.conv1d(pylucid.tensor([[[1.0, 2.0, 3.0, 4.0]]]), pylucid.tensor([[[1.0, -1.0]]]))
    tensor([[[-1., -1., -1.]]])
    """
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


@declare(**_DECLARE)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation) over (N, C, H, W) or unbatched (C, H, W) input.

    ``y[n, o, i, j] = b[o] + sum_{c, p, q} w[o, c, p, q] x[n, c, i*sh + p*dh - ph, j*sw + q*dw - pw]``
    with zero padding; ``weight`` is (O, C/groups, kh, kw); ``padding`` an
    int, a pair, ``'valid'`` or ``'same'`` (stride 1; odd extra padding at the
    end, as PyTorch). Implemented as im2col (a strided view) + one batched
    GEMM; the backward is built from ``fold``/``unfold``/``matmul`` so it is
    differentiable again (gradient penalties).

    >>> import pylucid
    >>> x = pylucid.ones(1, 1, 3, 3)
    >>> pylucid.conv2d(x, pylucid.ones(1, 1, 2, 2), padding=1)[0, 0]
    tensor([[1., 2., 2., 1.],
            [2., 4., 4., 2.],
            [2., 4., 4., 2.],
            [1., 2., 2., 1.]])
    """
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


@declare(**_DECLARE)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3-d convolution over (N, C, D, H, W) or unbatched (C, D, H, W) input; see :func:`conv2d`.

    >>> import pylucid
    >>> pylucid.conv3d(pylucid.ones(1, 1, 2, 2, 2), pylucid.ones(1, 1, 2, 2, 2)).flatten()
    tensor([8.])
    """
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


# ----------------------------------------------------------------------------------------------------------
# transposed convolution
# ----------------------------------------------------------------------------------------------------------
class _ConvTransposeNd(Op):
    """The adjoint of a convolution in its input: ``y = fold(w^T @ x) + b``.

    ``x`` (N, Cin, *S), ``w`` (Cin, Cout/G, *k). Forward: the library's data gradient of a convolution
    (cuDNN, oneDNN) where it takes the case, else one GEMM + col2im. Backward (graph mode):
    ``dx = w @ unfold(g)`` (a convolution of ``g``), ``dw = sum_n x @ unfold(g)^T``; first order: cuDNN's
    convolution and weight gradient (oneDNN's on the CPU), else the graph formula.
    """

    @staticmethod
    def forward(be, x, w, b, stride, pads, dilation, groups, size):
        if x.dtype.kind not in "iu":
            y = be.conv_transpose_nd(x, w, b, stride, pads, dilation, groups, size)
            if y is not None:
                return y
        y = be.conv_nd_gemm_backward_data(x, w, size, stride, pads, dilation, groups)
        if b is not None:
            y += b.reshape(_bias_shape(len(w.shape) - 2))
        return y

    def backward(self, g):
        from .linalg import matmul
        from .reduction import sum as _sum
        from .shape import reshape, transpose

        p = self.params
        x, w = self.input(0), self.input(1)
        gr = p["groups"]
        n, cin = x.shape[:2]
        kernel = w.shape[2:]
        nd = len(kernel)
        length = _prod(x.shape[2:])
        cout = w.shape[1] * gr
        cols = _unfold_t(g, kernel, p["dilation"], p["pads"], p["stride"])
        in_sp = tuple(x.shape[2:])
        win_sp = tuple(_conv_out(g.shape[2 + i], kernel[i], p["stride"][i], *p["pads"][i], p["dilation"][i])
                       for i in range(nd))
        if win_sp != in_sp:
            # output_padding >= stride (allowed when it is below the dilation) adds windows past the input's
            # last position: they met no input in the forward, drop them
            cols = reshape(cols, (n, cols.shape[1]) + win_sp)[(slice(None), slice(None))
                                                               + tuple(slice(0, v) for v in in_sp)]
        cols = reshape(cols, (n, gr, cout // gr * _prod(kernel), length))
        gx = gw = gb = None
        if self.next_edges[0] is not None:
            gx = reshape(matmul(reshape(w, (gr, cin // gr, -1)), cols), x.shape)
        if self.next_edges[1] is not None:
            x2 = reshape(x, (n, gr, cin // gr, length))
            gw = reshape(_sum(matmul(x2, transpose(cols, -1, -2)), 0), w.shape)
        if len(self.next_edges) > 2 and self.next_edges[2] is not None:
            gb = _sum(g, (0,) + tuple(range(2, 2 + nd)))
        return gx, gw, gb

    def backward_fast(self, be, g):
        r = _library_grads(be, self, g, "conv_transpose_nd_backward")
        if r is not None:
            return r
        # the convolution of g with w (cropped: an output_padding past the stride can add a position)
        p = self.params
        x, w = self.input(0)._data, self.input(1)._data
        gx = gw = None
        if self.next_edges[0] is not None:
            gx = be.conv_nd_gemm(g, w, None, p["stride"], p["pads"], p["dilation"], p["groups"])
            gx = gx[(slice(None), slice(None)) + tuple(slice(0, s) for s in x.shape[2:])]
        if self.next_edges[1] is not None:
            gw = be.conv_nd_gemm_backward_weight(g, x, w.shape, p["stride"], p["pads"], p["dilation"], p["groups"])
        return gx, gw, _bias_grad(be, self, g)


_CONV_T = _nd_ops(_ConvTransposeNd, "conv_transpose{}d", amp_policy=PROMOTE, saves_input=True)
ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = _CONV_T.values()


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    op = f"conv_transpose{nd}d"
    x, added = _conv_inputs(op, nd, input, weight, bias, groups, "in_channels, out_channels/groups", True)
    cin = x.shape[1]
    if weight.shape[0] < groups:
        raise ShapeMismatch(f"{op}: expected weight to have at least groups={groups} input channels (dim 0), got "
                            f"weight of shape {tuple(weight.shape)}")
    if weight.shape[0] != cin or cin % groups:
        raise ShapeMismatch(f"{op}: weight {tuple(weight.shape)} expects {weight.shape[0]} input channels "
                            f"(divisible by groups={groups}), got input of shape {tuple(input.shape)}")
    cout = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise ShapeMismatch(f"{op}: expected bias of shape ({cout},), got {tuple(bias.shape)}")
    s = _tup(stride, nd, "stride", op, 1)
    d = _tup(dilation, nd, "dilation", op, 1)
    p = _tup(padding, nd, "padding", op, 0)
    op_ = _tup(output_padding, nd, "output_padding", op, 0)
    for i in range(nd):
        if op_[i] >= s[i] and op_[i] >= d[i]:
            raise ValueError(f"{op}: output_padding {op_} must be smaller than either stride {s} or dilation {d}")
    kernel = weight.shape[2:]
    size = tuple((x.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (kernel[i] - 1) + op_[i] + 1 for i in range(nd))
    if any(v < 1 for v in size):
        raise ShapeMismatch(f"{op}: the output size {size} would be empty (input {tuple(input.shape)}, padding {p})")
    y = apply(_CONV_T[nd], (x, weight, bias), {"stride": s, "pads": tuple((v, v) for v in p), "dilation": d,
                                               "groups": groups, "size": size})
    return _unbatch(y, added)


@declare(**_DECLARE)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-d transposed convolution (the gradient of :func:`conv1d` in its input).

    ``weight`` (C_in, C_out/groups, k); output length
    ``(L-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1``.

    >>> import pylucid
    >>> pylucid.conv_transpose1d(pylucid.ones(1, 1, 3), pylucid.ones(1, 1, 2))
    tensor([[[1., 2., 2., 1.]]])
    """
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@declare(**_DECLARE)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-d transposed convolution ("deconvolution"), the adjoint of :func:`conv2d` in its input.

    ``weight`` (C_in, C_out/groups, kh, kw); output size per dim
    ``(S-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1``.
    Implemented as one batched GEMM + col2im.

    >>> import pylucid
    >>> pylucid.conv_transpose2d(pylucid.ones(1, 1, 2, 2), pylucid.ones(1, 1, 2, 2), stride=2).shape
    (1, 1, 4, 4)
    """
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@declare(**_DECLARE)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-d transposed convolution; see :func:`conv_transpose2d`.

    >>> import pylucid
    >>> pylucid.conv_transpose3d(pylucid.ones(1, 1, 1, 1, 1), pylucid.ones(1, 2, 2, 2, 2)).shape
    (1, 2, 2, 2, 2)
    """
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ----------------------------------------------------------------------------------------------------------
# pooling
# ----------------------------------------------------------------------------------------------------------
def _pool_geometry(op, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    """kernel, stride, dilation, per-side pads (with the ceil_mode extra) and the output size."""
    k = _tup(kernel_size, nd, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tup(
        stride, nd, "stride", op, 1)
    p = _tup(padding, nd, "padding", op, 0)
    d = _tup(dilation, nd, "dilation", op, 1)
    pads, out = [], []
    for i in range(nd):
        if p[i] > k[i] // 2:
            raise ValueError(f"{op}: padding should be at most half of the kernel size, got padding={p} and "
                             f"kernel_size={k}")
        size = x.shape[2 + i]
        span = size + 2 * p[i] - d[i] * (k[i] - 1) - 1
        if span < 0:
            raise ShapeMismatch(f"{op}: input spatial size {tuple(x.shape[2:])} (padding {p}) is smaller than the "
                                f"kernel {k} (dilation {d})")
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= size + p[i]:
            o -= 1  # the last window must start inside the input or its left padding
        out.append(o)
        pads.append((p[i], max(p[i], (o - 1) * s[i] + d[i] * (k[i] - 1) + 1 - size - p[i])))
    return k, s, d, tuple(pads), tuple(out)


class _MaxPoolBase(Op):
    """Shared backward of the max pools: outputs (values, flat input indices).

    The gradient goes to the argmax of each window (the first maximum, NaN
    wins, as PyTorch's CPU kernel). The indices are saved (``saves_output``)
    and the backward scatters ``g`` to them: ``getitem_backward`` in graph
    mode (whose own gradient is a gather, so double backward works), a plain
    assignment or a scatter-add on arrays.
    """

    n_outputs = 2
    differentiable_outputs = (True, False)

    def _rows_idx(self, be):
        idx = self.output_array(1)
        nc = _prod(idx.shape[:2])
        return be.arange(nc).reshape(nc, 1), idx.reshape(nc, _prod(idx.shape[2:]))

    def backward(self, g, g_idx=None):
        from .indexing import GetItemBackward
        from .shape import reshape

        be = self.device.backend
        rows, idx = self._rows_idx(be)
        shape = self.shapes[0]
        flat = (rows.shape[0], _prod(shape[2:]))
        gx = apply(GetItemBackward, (reshape(g, (flat[0], idx.shape[1])),),
                   {"index": (rows, idx), "advanced": True, "shape": flat})
        return reshape(gx, shape)

    def _backward_fast(self, be, g, g_idx=None):
        shape = self.shapes[0]
        if not self.params.get("overlap", True):
            # windows do not overlap: every input position is hit at most once
            idx = self.output_array(1)
            nc = _prod(idx.shape[:2])
            g2 = g.reshape(nc, -1)
            return be.max_pool_scatter(g2, idx.reshape(nc, g2.shape[1]), _prod(shape[2:])).reshape(shape)
        rows, idx = self._rows_idx(be)
        gx = be.zeros((rows.shape[0], _prod(shape[2:])), dtype=g.dtype)
        be.scatter_add(gx, (rows, idx), g.reshape(rows.shape[0], idx.shape[1]))
        return gx.reshape(shape)


def _ravel(be, coords, sizes):
    flat = coords[0]
    for c, s in zip(coords[1:], sizes[1:]):
        flat = flat * s + c
    return flat


class _MaxPoolNd(_MaxPoolBase):
    @staticmethod
    def forward(be, x, kernel, stride, pads, dilation, overlap):
        nd = len(kernel)
        if kernel == stride == (2, 2) and dilation == (1, 1) and pads == ((0, 0), (0, 0)):
            r = be.max_pool2d_2x2(x)  # the backend's blocked 2x2 pool (None: not this input, or a NaN in it)
            if r is not None:
                return r
        n, c = x.shape[:2]
        fill = -float("inf") if x.dtype.kind == "f" or x.dtype == _dt.bfloat16.numpy_dtype else be.iinfo(x.dtype).min
        win, out_sp = _im2col(be, x, kernel, dilation, pads, stride, fill)
        # running max over the kernel positions (a loop over prod(kernel) taps, each over all pixels):
        # PyTorch's CPU rule, ``val > best or isnan(val)``, so ties keep the first maximum
        head = (slice(None), slice(None))
        size = x.shape[2:]
        # flat input index of tap ``kpos`` in window ``o`` = base(o) + offset(kpos): linear in both
        strides_flat = [_prod(size[i + 1:]) for i in range(nd)]
        base = 0
        for i in range(nd):
            o = be.arange(out_sp[i]).reshape((out_sp[i],) + (1,) * (nd - 1 - i))
            base = base + (o * stride[i] - pads[i][0]) * strides_flat[i]
        taps = list(itertools.product(*(range(k) for k in kernel)))
        offsets = [sum(kpos[i] * dilation[i] * strides_flat[i] for i in range(nd)) for kpos in taps]
        best = win[head + taps[0]].copy()
        off = be.zeros(best.shape, dtype="int32" if _prod(size) < 2 ** 31 else "int64")
        # fast path: ``maximum`` and a strict ``>`` keep the first maximum; a NaN anywhere propagates into
        # ``best``, and only then is the pass redone with PyTorch's NaN rule (the last NaN of a window wins)
        for kpos, koff in zip(taps[1:], offsets[1:]):
            v = win[head + kpos]
            # where(v > best, koff, off) as integer arithmetic, in place: a select with a scalar measures
            # several times slower than these passes on the CPU
            off += (v > best) * (koff - off)
            be.maximum(best, v, out=best)
        # (no host read while a CUDA graph captures: the NaN-rule pass then always runs; it gives the same result)
        if x.dtype.kind not in "iub" and (not be.can_sync() or bool(be.isnan(best).any())):
            best = win[head + taps[0]].copy()
            off[...] = 0
            for kpos, koff in zip(taps[1:], offsets[1:]):
                v = win[head + kpos]
                upd = (v > best) | be.isnan(v)
                best = be.where(upd, v, best)
                off = be.where(upd, koff, off)
        return best, off + base


_MAXPOOL = _nd_ops(_MaxPoolNd, "max_pool{}d", fast_dims=(2,), amp_policy=KEEP_INPUT, saves_output=True,
                   accepts=("float", "int"))
MaxPool1d, MaxPool2d, MaxPool3d = _MAXPOOL.values()


def _pool_result(vals, idx, added, return_indices):
    """A max pool's result: the values, with their indices when ``return_indices``; unbatched where needed."""
    if return_indices:
        return _unbatch(vals, added), _unbatch(idx, added)
    return _unbatch(vals, added)


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    op = f"max_pool{nd}d"
    check_tensor(input, op)
    x, added = _batched(input, nd, op)
    _check_nonempty(op, x, added)
    k, s, d, pads, _ = _pool_geometry(op, x, nd, kernel_size, stride, padding, dilation, ceil_mode)
    overlap = any(s[i] < d[i] * (k[i] - 1) + 1 for i in range(nd))
    vals, idx = apply(_MAXPOOL[nd], (x,), {"kernel": k, "stride": s, "pads": pads, "dilation": d,
                                            "overlap": overlap})
    return _pool_result(vals, idx, added, return_indices)


@declare(**_DECLARE)
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """1-d max pooling over (N, C, L) or (C, L); ``stride`` defaults to ``kernel_size``.

    Padding is implicit ``-inf``; ``return_indices`` also returns the flat
    input index of each maximum (as PyTorch). The gradient goes to the first
    maximum of each window.

    >>> import pylucid
    >>> pylucid.max_pool1d(pylucid.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2)
    tensor([[[3., 5.]]])
    """
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@declare(**_DECLARE)
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """2-d max pooling over (N, C, H, W) or (C, H, W); ``stride`` defaults to ``kernel_size``.

    ``y[n, c, i, j] = max_{p, q} x[n, c, i*sh + p*dh - ph, j*sw + q*dw - pw]`` with
    ``-inf`` padding (``padding <= kernel_size/2``). ``ceil_mode`` rounds the
    output size up (a last window must start inside the input or the left
    padding). ``return_indices`` also returns the flat ``h*W + w`` index of
    each maximum. The gradient goes to the first maximum of each window.

    >>> import pylucid
    >>> pylucid.max_pool2d(pylucid.arange(16.0).reshape(1, 1, 4, 4), 2).flatten().tolist()
    [5.0, 7.0, 13.0, 15.0]
    """
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@declare(**_DECLARE)
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """3-d max pooling over (N, C, D, H, W) or (C, D, H, W); see :func:`max_pool2d`.

    >>> import pylucid
    >>> pylucid.max_pool3d(pylucid.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten()
    tensor([7.])
    """
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_divisor(be, dtype, size, kernel, stride, pads, out_sp, count_include_pad, divisor_override):
    """The per-output divisor (broadcastable to (*out)), PyTorch's rule per dim."""
    if divisor_override is not None:
        return None
    nd = len(kernel)
    div = None
    for i in range(nd):
        start = be.arange(out_sp[i]) * stride[i] - pads[i][0]
        end = be.minimum(start + kernel[i], size[i] + pads[i][0])
        if count_include_pad:
            cnt = end - start
        else:
            cnt = be.minimum(end, size[i]) - be.maximum(start, 0)
        cnt = cnt.reshape((out_sp[i],) + (1,) * (nd - 1 - i))
        div = cnt if div is None else div * cnt
    return div.astype(dtype)


class _AvgPoolNd(Op):
    """``y = sum(window) / divisor``; linear, so ``dx = fold(g / divisor)`` broadcast over the window."""

    @staticmethod
    def forward(be, x, kernel, stride, pads, count_include_pad, divisor_override):
        nd = len(kernel)
        win, out_sp = _im2col(be, x, kernel, (1,) * nd, pads, stride)
        with be.errstate():  # inf + -inf in a window is NaN, as in PyTorch, without a warning
            y = be.sum(win, axis=tuple(range(2, 2 + nd)))
        div = _avg_divisor(be, y.dtype, x.shape[2:], kernel, stride, pads, out_sp, count_include_pad,
                           divisor_override)
        if x.dtype.kind == "i":  # int64 (PyTorch's CPU kernel): the quotient truncated toward zero
            d = div if div is not None else int(divisor_override)
            return (be.abs(y) // d * be.sign(y)).astype(y.dtype)
        return y / (div if div is not None else divisor_override)

    def _scaled(self, be):
        p = self.params
        nd = len(p["kernel"])
        size = self.shapes[0][2:]
        out_sp = tuple(_conv_out(size[i], p["kernel"][i], p["stride"][i], *p["pads"][i], 1) for i in range(nd))
        return _avg_divisor(be, "float64", size, p["kernel"], p["stride"], p["pads"], out_sp,
                            p["count_include_pad"], p["divisor_override"]), out_sp

    def backward(self, g):
        from .shape import expand, reshape

        p = self.params
        kernel = p["kernel"]
        nd = len(kernel)
        div, out_sp = self._scaled(self.device.backend)
        g = g / (_new_tensor(div.astype(g._data.dtype), self.device) if div is not None else p["divisor_override"])
        n, c = g.shape[:2]
        kk = _prod(kernel)
        length = _prod(out_sp)
        cols = reshape(expand(reshape(g, (n, c, 1, length)), (n, c, kk, length)), (n, c * kk, length))
        return _fold_t(cols, self.shapes[0][2:], kernel, (1,) * nd, p["pads"], p["stride"])


_AVGPOOL = _nd_ops(_AvgPoolNd, "avg_pool{}d", amp_policy=KEEP_INPUT, accepts=("float", "int", "bool"))
AvgPool1d, AvgPool2d, AvgPool3d = _AVGPOOL.values()


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    op = f"avg_pool{nd}d"
    check_tensor(input, op)
    if input.dtype.category < _dt.FLOAT and input.dtype != _dt.int64:
        raise NotImplementedError(f"{op}: not implemented for {input.dtype} (integer input: int64 only)")
    x, added = _batched(input, nd, op)
    _check_nonempty(op, x, added)
    k, s, _, pads, _ = _pool_geometry(op, x, nd, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override == 0):
        raise ValueError(f"{op}: divisor_override must be a non-zero int, got {divisor_override!r}")
    y = apply(_AVGPOOL[nd], (x,), {"kernel": k, "stride": s, "pads": pads,
                                   "count_include_pad": bool(count_include_pad), "divisor_override": divisor_override})
    return _unbatch(y, added)


@declare(**_DECLARE)
def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-d average pooling over (N, C, L) or (C, L); see :func:`avg_pool2d`.

    >>> import pylucid
    >>> pylucid.avg_pool1d(pylucid.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@declare(**_DECLARE)
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-d average pooling: the window sum divided by the window size.

    With ``count_include_pad`` the zero padding counts in the divisor (but
    the part of a ``ceil_mode`` window past the padding does not, as
    PyTorch); without it only real input elements count;
    ``divisor_override`` replaces the divisor.

    >>> import pylucid
    >>> pylucid.avg_pool2d(pylucid.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@declare(**_DECLARE)
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-d average pooling over (N, C, D, H, W) or (C, D, H, W); see :func:`avg_pool2d`.

    >>> import pylucid
    >>> pylucid.avg_pool3d(pylucid.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten()
    tensor([3.5000])
    """
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# ----------------------------------------------------------------------------------------------------------
# separable linear resampling: interpolation and adaptive average pooling
# ----------------------------------------------------------------------------------------------------------
def _axis_taps(be, kind, n_in, n_out, scale, align_corners):
    """The taps of one spatial dim of a separable linear resampling: ``(idx, w, valid)``, each (n_out, T),
    output ``i`` = ``sum_t w[i, t] x[idx[i, t]]`` over the taps where ``valid`` (None: all are).

    ``kind``: 'nearest' / 'nearest-exact' (one tap), 'linear' (two taps, PyTorch's source-index rule; a tap of
    weight 0 is still a tap, as in its kernel), 'cubic' (four), 'adaptive' (the input window
    ``[floor(i*n_in/n_out), ceil((i+1)*n_in/n_out))``, padded to the longest window).
    """
    dst = be.arange(n_out, dtype="float64")
    if kind == "adaptive":
        start = (be.arange(n_out) * n_in) // n_out
        end = -((-(be.arange(n_out) + 1) * n_in) // n_out)
        # the longest window, on the host (no device sync)
        k = max([-((-(i + 1) * n_in) // n_out) - (i * n_in) // n_out for i in range(n_out)], default=1)
        pos = start[:, None] + be.arange(k)[None, :]
        valid = pos < end[:, None]
        return be.minimum(pos, end[:, None] - 1), valid / (end - start)[:, None], valid
    if kind in ("nearest", "nearest-exact"):
        src = be.floor((dst + 0.5) * scale) if kind == "nearest-exact" else be.floor(dst * scale)
        return be.minimum(src.astype("int64"), n_in - 1)[:, None], be.ones((n_out, 1)), None
    if kind == "cubic":
        # PyTorch's upsample_bicubic2d: the source index is not clamped at 0; the 4 taps at floor(src) - 1 .. + 2
        # are clamped into the input (edge replication), weighted by the cubic convolution kernel (a = -0.75)
        if align_corners:
            src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        else:
            src = (dst + 0.5) * scale - 0.5
        f = be.floor(src)
        t = src - f
        a = -0.75
        near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731 - |x| <= 1
        far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731 - 1 < |x| < 2
        idx = be.stack([be.minimum(be.maximum(f.astype("int64") + (k - 1), 0), n_in - 1) for k in range(4)], 1)
        return idx, be.stack((far(t + 1), near(t), near(1 - t), far(2 - t)), 1), None
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = be.maximum((dst + 0.5) * scale - 0.5, 0.0)
    i0 = be.minimum(be.floor(src).astype("int64"), n_in - 1)
    i1 = be.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    return be.stack((i0, i1), 1), be.stack((1.0 - lam, lam), 1), None


#: (backend, kind, n_in, n_out, scale, align_corners, dtype, transposed) -> the matrix of :func:`_axis_matrix`
_AXIS_MATRICES: dict = {}


def _axis_matrix(be, kind, n_in, n_out, scale, align_corners, dtype, transposed=False):
    """The (n_out, n_in) matrix of one spatial dim of a separable linear resampling (its taps, scattered), in
    ``dtype``, C-contiguous; its transpose with ``transposed``.

    Kept per backend and signature (a few dozen entries at most; read-only): building it costs a dozen small
    launches and a scatter, which a model calling ``adaptive_avg_pool2d`` every step would pay each time.
    """
    key = (be, kind, n_in, n_out, scale, align_corners, dtype, transposed)
    m = _AXIS_MATRICES.get(key)
    if m is None:
        idx, w, _ = _axis_taps(be, kind, n_in, n_out, scale, align_corners)
        m = be.zeros((n_out, n_in), dtype="float64")
        rows = be.arange(n_out)
        for t in range(idx.shape[1]):
            be.scatter_add(m, (rows, idx[:, t]), w[:, t])
        m = be.ascontiguousarray((m.T if transposed else m).astype(dtype))
        if be.can_sync():  # not while a CUDA graph captures: the array would live in the graph's private pool
            if len(_AXIS_MATRICES) >= 256:
                _AXIS_MATRICES.clear()
            _AXIS_MATRICES[key] = m
    return m


def _resample_taps(be, y, taps, ax):
    """The resampling of one dim applied tap by tap (not as a GEMM): an inf or NaN input then reaches only the
    outputs that read it (a GEMM spreads ``0 * inf = NaN`` over every output), as PyTorch's per-pixel kernels."""
    idx, w, valid = taps
    shape = [1] * y.ndim
    shape[ax] = idx.shape[0]
    out = None
    with be.errstate():
        for t in range(idx.shape[1]):
            term = be.take(y, idx[:, t], axis=ax) * w[:, t].reshape(shape).astype(y.dtype)
            if valid is not None:
                term = be.where(valid[:, t].reshape(shape), term, 0)
            out = term if out is None else out + term
    return out.astype(y.dtype, copy=False)


class _SeparableResample(Op):
    """``y = x`` with a matrix ``A_i`` applied along each spatial dim (nearest/linear/cubic interpolation,
    adaptive average pooling): linear, so ``dx`` applies ``A_i^T`` to ``g`` (graph mode via ``matmul``).

    ``axes``: per spatial dim ``(kind, n_in, n_out, scale, align_corners)``.
    Nearest forward is a gather (exact in every dtype); linear and cubic add their 2 or 4 weighted taps
    (so an inf or NaN reaches only the outputs that read it); adaptive pooling is one GEMM per dim.
    """

    @staticmethod
    def forward(be, x, axes):
        y = x
        nd = len(axes)
        finite = None
        for i, (kind, n_in, n_out, scale, align) in enumerate(axes):
            ax = x.ndim - nd + i
            if kind in ("nearest", "nearest-exact"):
                dst = be.arange(n_out, dtype="float64")
                src = be.floor((dst + 0.5) * scale) if kind == "nearest-exact" else be.floor(dst * scale)
                y = be.take(y, be.minimum(src.astype("int64"), n_in - 1), axis=ax)
                continue
            if kind == "adaptive":
                # windows may be long: a GEMM, unless a non-finite input must stay local (checked on the CPU only:
                # on CUDA the check would cost a device sync per call)
                if finite is None:
                    finite = be.name == "cuda" or bool(be.isfinite(x).all())
                if finite:
                    m = _axis_matrix(be, kind, n_in, n_out, scale, align, x.dtype)
                    y = be.moveaxis(be.matmul(m, be.moveaxis(y, ax, -2)), -2, ax)
                    continue
            # interpolation: 2 (linear) or 4 (cubic) taps per output, as PyTorch's kernels
            y = _resample_taps(be, y, _axis_taps(be, kind, n_in, n_out, scale, align), ax)
        return y

    def backward(self, g):
        from .linalg import matmul
        from .shape import transpose

        be = self.device.backend
        axes = self.params["axes"]
        nd = len(axes)
        for i, (kind, n_in, n_out, scale, align) in enumerate(axes):
            ax = g.ndim - nd + i
            mt = _new_tensor(_axis_matrix(be, kind, n_in, n_out, scale, align, g._data.dtype, True), self.device)
            g = transpose(matmul(mt, transpose(g, ax, -2)), -2, ax)
        return g


def _register_resample(name, policy):
    # interpolation turns integer input into the default float dtype (reference table: real_valued)
    real_valued = name.startswith("interpolate")
    cls = type(camel(name), (_SeparableResample,),
               {"schema": OpSchema(name, amp_policy=policy, real_valued=real_valued, family="nn",
                                   accepts=("float", "int", "bool")),
                "__module__": __name__,
                "__doc__": f"``{name}``: a separable linear resampling (see ``_SeparableResample``)."})
    return cls


_RESAMPLE = {
    ("nearest", 1): _register_resample("interpolate_nearest_1d", KEEP_INPUT),
    ("nearest", 2): _register_resample("interpolate_nearest_2d", KEEP_INPUT),
    ("nearest", 3): _register_resample("interpolate_nearest_3d", KEEP_INPUT),
    ("linear", 1): _register_resample("interpolate_linear", PROMOTE),
    ("linear", 2): _register_resample("interpolate_bilinear", PROMOTE),
    ("linear", 3): _register_resample("interpolate_trilinear", PROMOTE),
    ("cubic", 2): _register_resample("interpolate_bicubic", PROMOTE),
    ("adaptive", 1): _register_resample("adaptive_avg_pool1d", KEEP_INPUT),
    ("adaptive", 2): _register_resample("adaptive_avg_pool2d", KEEP_INPUT),
    ("adaptive", 3): _register_resample("adaptive_avg_pool3d", KEEP_INPUT),
}
_MODE_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}


@declare(**_DECLARE)
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resample (N, C, *S) to ``size`` or ``S * scale_factor`` (floored), as ``torch.nn.functional.interpolate``.

    Modes: ``'nearest'`` (source index ``floor(dst * scale)``),
    ``'nearest-exact'`` (``floor((dst + 0.5) * scale)``), ``'linear'`` (3-d
    input), ``'bilinear'`` (4-d), ``'trilinear'`` (5-d), ``'bicubic'`` (4-d:
    cubic convolution with ``a = -0.75``, taps clamped at the edges), with
    ``align_corners``; ``'area'`` is adaptive average pooling to the output
    size. As PyTorch, when ``scale_factor`` is given and not recomputed
    (``recompute_scale_factor``) the scale used is ``1/scale_factor``, not
    ``in/out``. ``antialias=True`` is not supported (NotImplementedError).
    Separable: each spatial dim is a gather (nearest) or a small GEMM with
    its interpolation matrix; the backward applies the transposed matrices.

    >>> import pylucid
    >>> x = pylucid.tensor([[[1.0, 2.0]]])
    >>> pylucid.nn.functional.interpolate(x, scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    >>> pylucid.nn.functional.interpolate(x, size=4, mode="linear", align_corners=True)
    tensor([[[1.0000, 1.3333, 1.6667, 2.0000]]])
    """
    op = "interpolate"
    check_tensor(input, op)
    if input.dtype == _dt.uint8:
        # PyTorch resamples uint8 images in uint8 (rounding the interpolated values); pylucid computes in float
        raise NotImplementedError(f"{op}: uint8 inputs are not supported; convert to a float dtype first")
    nd = input.ndim - 2
    if nd < 1 or nd > 3:
        raise ShapeMismatch(f"{op}: expected a 3-d, 4-d or 5-d (N, C, *spatial) input, got shape {tuple(input.shape)}")
    if antialias:
        if mode not in ("bilinear", "bicubic") or nd != 2:
            raise ValueError(f"{op}: anti-alias option is restricted to bilinear and bicubic modes and requires a "
                             f"4-D tensor as input, got mode={mode!r} and shape {tuple(input.shape)}")
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    if mode in ("nearest", "nearest-exact", "area"):
        kind = mode
        if align_corners is not None:
            raise ValueError(f"{op}: align_corners option can only be set with the interpolating modes: linear | "
                             f"bilinear | bicubic | trilinear, got mode={mode!r}")
    elif mode in _MODE_DIMS or mode == "bicubic":
        want = _MODE_DIMS.get(mode, 2)
        if want != nd:
            raise ShapeMismatch(f"{op}: mode {mode!r} expects a {want + 2}-d input, got shape {tuple(input.shape)}")
        kind = "cubic" if mode == "bicubic" else "linear"
    else:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; accepted: 'nearest', 'nearest-exact', "
                                  "'linear', 'bilinear', 'bicubic', 'trilinear', 'area'")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size or scale_factor must be given")
    if size is not None and recompute_scale_factor:
        raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size")
    in_sp = input.shape[2:]
    if size is not None:
        out_sp = _tup(size, nd, "size", op, 1)
        scales = tuple(in_sp[i] / out_sp[i] for i in range(nd))
    else:
        sf = scale_factor if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * nd
        if len(sf) != nd:
            raise ValueError(f"{op}: scale_factor must be a number or a tuple of {nd} numbers, got {scale_factor}")
        sf = tuple(float(v) for v in sf)
        if any(v <= 0 for v in sf):
            raise ValueError(f"{op}: scale_factor must be positive, got {scale_factor}")
        out_sp = tuple(int(math.floor(in_sp[i] * sf[i])) for i in range(nd))
        scales = (tuple(in_sp[i] / out_sp[i] for i in range(nd)) if recompute_scale_factor
                  else tuple(1.0 / v for v in sf))
    if kind == "area":  # PyTorch's 'area' is adaptive average pooling to the output size
        return _adaptive_avg(nd, input, out_sp)
    if kind in ("linear", "cubic") and align_corners:
        scales = (0.0,) * nd  # unused: align_corners maps corners to corners
    axes = tuple((kind, in_sp[i], out_sp[i], scales[i], bool(align_corners)) for i in range(nd))
    key = ("nearest" if kind.startswith("nearest") else kind, nd)
    return apply(_RESAMPLE[key], (input,), {"axes": axes})


def _adaptive_sizes(op, input, x, nd, output_size):
    """The output size of an adaptive pool of ``input`` (``x``: with its batch dim); ``None`` keeps a size."""
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nd:
            raise ValueError(f"{op}: output_size must have {nd} entries, got {tuple(output_size)}")
        out = tuple(x.shape[2 + i] if v is None else int(v) for i, v in enumerate(output_size))
    else:
        out = _tup(output_size, nd, "output_size", op, 0)
    if any(v < 1 for v in out) or any(s == 0 for s in x.shape[2:]):
        raise ShapeMismatch(f"{op}: expected a non-empty input and output size, got input {tuple(input.shape)} and "
                            f"output_size {out}")
    return out


def _adaptive_avg(nd, input, output_size):
    op = f"adaptive_avg_pool{nd}d"
    check_tensor(input, op)
    _check_float(input, op)
    x, added = _batched(input, nd, op)
    out = _adaptive_sizes(op, input, x, nd, output_size)
    axes = tuple(("adaptive", x.shape[2 + i], out[i], 1.0, False) for i in range(nd))
    return _unbatch(apply(_RESAMPLE[("adaptive", nd)], (x,), {"axes": axes}), added)


@declare(**_DECLARE)
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Adaptive average pooling to length ``output_size``: window ``i`` is
    ``[floor(i*L/out), ceil((i+1)*L/out))``; a separable averaging matrix (one GEMM).

    >>> import pylucid
    >>> pylucid.adaptive_avg_pool1d(pylucid.tensor([[[1.0, 2.0, 3.0, 4.0, 6.0]]]), 2)
    tensor([[[2.0000, 4.3333]]])
    """
    return _adaptive_avg(1, input, output_size)


@declare(**_DECLARE)
def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Adaptive average pooling to ``output_size`` (an int, a pair; ``None`` keeps a size).

    >>> import pylucid
    >>> pylucid.adaptive_avg_pool2d(pylucid.arange(16.0).reshape(1, 1, 4, 4), 1)
    tensor([[[[7.5000]]]])
    """
    return _adaptive_avg(2, input, output_size)


@declare(**_DECLARE)
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Adaptive average pooling over (N, C, D, H, W); see :func:`adaptive_avg_pool2d`.

    >>> import pylucid
    >>> pylucid.adaptive_avg_pool3d(pylucid.ones(1, 1, 2, 2, 2), 1).flatten()
    tensor([1.])
    """
    return _adaptive_avg(3, input, output_size)


class _AdaptiveMaxPoolNd(_MaxPoolBase):
    """Adaptive max pooling: windows ``[floor(i*S/out), ceil((i+1)*S/out))`` gathered
    with index tables (short windows repeat their last element), then argmax."""

    @staticmethod
    def forward(be, x, out_sp, overlap):
        nd = len(out_sp)
        n, c = x.shape[:2]
        tables, kmax = [], []
        for i in range(nd):
            size, o = x.shape[2 + i], out_sp[i]
            start = (be.arange(o) * size) // o
            end = -((-(be.arange(o) + 1) * size) // o)
            k = int((end - start).max())
            tables.append(be.minimum(start[:, None] + be.arange(k)[None, :], end[:, None] - 1))
            kmax.append(k)
        # index arrays broadcasting to (*out, *k)
        index = []
        for i in range(nd):
            shape = [1] * (2 * nd)
            shape[i], shape[nd + i] = out_sp[i], kmax[i]
            index.append(tables[i].reshape(shape))
        win = x[(slice(None), slice(None)) + tuple(index)].reshape((n, c) + tuple(out_sp) + (-1,))
        am = be.argmax(win, axis=-1)
        vals = be.take_along_axis(win, am[..., None], axis=-1)[..., 0]
        kc = be.unravel_index(am, tuple(kmax))
        coords = []
        for i in range(nd):
            o = be.arange(out_sp[i]).reshape((out_sp[i],) + (1,) * (nd - 1 - i))
            coords.append(tables[i][o, kc[i]])
        return vals, _ravel(be, coords, x.shape[2:]).astype("int64")


_ADAPTIVE_MAX = _nd_ops(_AdaptiveMaxPoolNd, "adaptive_max_pool{}d", accepts=("float", "int"), amp_policy=KEEP_INPUT,
                       saves_output=True)
AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d = _ADAPTIVE_MAX.values()


def _adaptive_max(nd, input, output_size, return_indices):
    op = f"adaptive_max_pool{nd}d"
    check_tensor(input, op)
    x, added = _batched(input, nd, op)
    out = _adaptive_sizes(op, input, x, nd, output_size)
    if x.shape[1] == 0 and not added:  # (N, 0, L): PyTorch refuses; an unbatched (0, L) is an empty batch
        raise ShapeMismatch(f"{op}: expected input to have non-zero size for non-batch dimensions, got shape "
                            f"{tuple(input.shape)}")
    if x.numel() == 0:  # an empty batch: empty values and indices, as PyTorch
        from ..creation import zeros

        shape = tuple(x.shape[:2]) + out
        vals = zeros(shape, dtype=x.dtype, device=x.device) + 0 * x.sum()
        return _pool_result(vals, zeros(shape, dtype=_dt.int64, device=x.device), added, return_indices)
    overlap = any(x.shape[2 + i] % out[i] for i in range(nd))
    vals, idx = apply(_ADAPTIVE_MAX[nd], (x,), {"out_sp": out, "overlap": overlap})
    return _pool_result(vals, idx, added, return_indices)


@declare(**_DECLARE)
def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Adaptive max pooling to length ``output_size``; see :func:`adaptive_max_pool2d`.

    >>> import pylucid
    >>> pylucid.adaptive_max_pool1d(pylucid.tensor([[[1.0, 5.0, 3.0, 4.0, 2.0]]]), 2)
    tensor([[[5., 4.]]])
    """
    return _adaptive_max(1, input, output_size, return_indices)


@declare(**_DECLARE)
def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Adaptive max pooling to ``output_size``: window ``i`` of a dim of size ``S`` is
    ``[floor(i*S/out), ceil((i+1)*S/out))``; the gradient goes to each window's first maximum.

    >>> import pylucid
    >>> pylucid.adaptive_max_pool2d(pylucid.arange(9.0).reshape(1, 1, 3, 3), 2).flatten().tolist()
    [4.0, 5.0, 7.0, 8.0]
    """
    return _adaptive_max(2, input, output_size, return_indices)


@declare(**_DECLARE)
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Adaptive max pooling over ``(D, H, W)`` to ``output_size``; see :func:`adaptive_max_pool2d`.

    >>> import pylucid
    >>> pylucid.adaptive_max_pool3d(pylucid.arange(8.0).reshape(1, 1, 2, 2, 2), 1).flatten()
    tensor([7.])
    """
    return _adaptive_max(3, input, output_size, return_indices)


# ----------------------------------------------------------------------------------------------------------
# pixel shuffle (composites of reshape + permute)
# ----------------------------------------------------------------------------------------------------------
@declare(**_DECLARE)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C*r^2, H, W) -> (*, C, H*r, W*r)``: a composite of reshape and permute.

    >>> import pylucid
    >>> pylucid.pixel_shuffle(pylucid.arange(4.0).reshape(1, 4, 1, 1), 2)
    tensor([[[[0., 1.],
              [2., 3.]]]])
    """
    from .shape import permute, reshape

    check_tensor(input, "pixel_shuffle")
    r = int(upscale_factor)
    if input.ndim < 3:
        raise ShapeMismatch(f"pixel_shuffle: expected at least 3 dims (*, C, H, W), got shape {tuple(input.shape)}")
    if r < 1:
        raise ValueError(f"pixel_shuffle: upscale_factor must be positive, got {upscale_factor}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeMismatch(f"pixel_shuffle: channels ({c}) must be divisible by upscale_factor^2 ({r * r})")
    nl = len(lead)
    y = reshape(input, (*lead, c // (r * r), r, r, h, w))
    y = permute(y, tuple(range(nl)) + tuple(nl + i for i in (0, 3, 1, 4, 2)))
    return reshape(y, (*lead, c // (r * r), h * r, w * r))


@declare(**_DECLARE)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H*r, W*r) -> (*, C*r^2, H, W)``, the inverse of :func:`pixel_shuffle`.

    >>> import pylucid
    >>> pylucid.pixel_unshuffle(pylucid.arange(4.0).reshape(1, 1, 2, 2), 2).flatten()
    tensor([0., 1., 2., 3.])
    """
    from .shape import permute, reshape

    check_tensor(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if input.ndim < 3:
        raise ShapeMismatch(f"pixel_unshuffle: expected at least 3 dims (*, C, H, W), got shape {tuple(input.shape)}")
    if r < 1:
        raise ValueError(f"pixel_unshuffle: downscale_factor must be positive, got {downscale_factor}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeMismatch(f"pixel_unshuffle: spatial size ({h}, {w}) must be divisible by downscale_factor ({r})")
    nl = len(lead)
    y = reshape(input, (*lead, c, h // r, r, w // r, r))
    y = permute(y, tuple(range(nl)) + tuple(nl + i for i in (0, 2, 4, 1, 3)))
    return reshape(y, (*lead, c * r * r, h // r, w // r))


@declare(namespaces=("pylucid", "pylucid.nn.functional"), aliases=("native_channel_shuffle",), method=False)
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """``(N, g*k, *) -> (N, k*g, *)``: channel ``i*k + j`` moves to ``j*g + i`` (ShuffleNet's shuffle), a
    composite of reshape and transpose.

    >>> import pylucid
    >>> pylucid.channel_shuffle(pylucid.arange(6.0).reshape(1, 6, 1), 2).flatten()
    tensor([0., 3., 1., 4., 2., 5.])
    """
    from .shape import reshape, transpose

    check_tensor(input, "channel_shuffle")
    g = int(groups)
    if input.ndim < 3:
        raise ShapeMismatch(f"channel_shuffle: expected at least 3 dims (N, C, *), got shape {tuple(input.shape)}")
    if g <= 0:
        raise ValueError(f"channel_shuffle: number of groups to divide channels in must be positive, got {groups}")
    n, c, *sp = input.shape
    if c % g:
        raise ShapeMismatch(f"channel_shuffle: number of channels ({c}) must be divisible by groups ({g})")
    y = transpose(reshape(input, (n, g, c // g, *sp)), 1, 2)
    return reshape(y, (n, c, *sp))
