"""Batching rules: how each registered op runs on ``BatchedTensor`` arguments (``vmap``).

A rule gets the op, the logical arguments (wrappers of the rule's level, plain tensors, scalars), the
params and the ``Level``; it calls the op (or others) once on the unwrapped values, with the batch
dimension moved where the op treats it as one more leading or batch dimension, and returns the result
wrapped at that level. Most ops fall in a few categories, listed by op name below:

- element-wise (and broadcasting): batch dims to the front, ranks aligned by inserting size-1 dims;
- *leading-dim* ops that act on trailing dims and broadcast over leading ones (``tril``, the
  ``linalg`` decompositions, ``view_as_real``): batch dim to the front;
- reductions over ``axes`` and ops with one ``dim``: batch dim to the front, the dims shifted by one
  (negative dims count from the end and stay as they are);
- shape ops: the batch size prepended to their shape argument;
- ``matmul``/``einsum``/``linear``, indexing, convolution and pooling (the batch folded into ``N``).

Rules are looked up by the op's registered name (:func:`rule_for` checks it against
``pylucid.ops.registry``); an op without one raises ``NotImplementedError`` naming it. A rule marked
``decomposes`` builds its result from other public ops on the logical tensors, so those ops record
their own autograd nodes; for any other rule, :func:`batched_apply` records one node of the op itself
on the logical values when they require grad (``grad`` inside ``vmap``).
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._tensor import Tensor
from ..ops import registry
from ..ops import shape as _shape
from ..ops._op import apply
from ._core import BatchedTensor, Meta, make_batched, needs_logical_node, record_logical

RULES: dict = {}
_F32 = _dt.float32


def rule(*names, decomposes=False):
    def deco(fn):
        fn.decomposes = decomposes
        for n in names:
            RULES[n] = fn
        return fn

    return deco


def rule_for(op):
    name = op.schema.name
    r = RULES.get(name)
    if r is None:
        registry.schema(name)  # a registered op (KeyError otherwise)
        raise NotImplementedError(f"vmap: no batching rule for op '{name}'")
    return r


def batched_apply(op, args, params, lv):
    r = rule_for(op)
    if r.decomposes:
        return r(op, args, params, lv)
    out = r(op, args, params, lv)
    if needs_logical_node(op, args):
        record_logical(op, args, params, out if out.__class__ is tuple else (out,))
    return out


# ------------------------------------------------------------------ helpers on physical values
def _sh():
    return _shape


def unwrap(a, lv):
    """``(value, bdim)`` of a logical argument at level ``lv`` (``bdim`` None: not batched here)."""
    if isinstance(a, BatchedTensor) and a._level == lv.level:
        return a._value, a._bdim
    return a, None


def front(v, d):
    """``v`` with dimension ``d`` moved to the front."""
    if d == 0:
        return v
    n = v.ndim
    return _sh().permute(v, (d,) + tuple(i for i in range(n) if i != d))


def batched_front(a, lv):
    """The physical value of ``a`` with its batch at dim 0, or None if ``a`` is not batched here."""
    v, d = unwrap(a, lv)
    return None if d is None else front(v, d)


def expand_batch(v, size):
    """An unbatched physical value given a leading batch dim of ``size`` (a broadcast view)."""
    sh = _sh()
    return sh.expand(sh.unsqueeze(v, 0), (size,) + tuple(v.shape))


def pad_rank(v, logical_ndim, target):
    """A front-batched physical value with ``target - logical_ndim`` size-1 dims after the batch dim."""
    if logical_ndim >= target:
        return v
    shp = tuple(v.shape)
    return _sh().reshape(v, shp[:1] + (1,) * (target - logical_ndim) + shp[1:])


def wrap(out, lv, bdim=0):
    if out.__class__ is tuple or out.__class__ is list:
        return tuple(wrap(o, lv, bdim) for o in out)
    if not isinstance(out, Tensor):
        return out
    return make_batched(out, bdim, lv.level)


def shift(d):
    return d + 1 if d is not None and d >= 0 else d


def all_front(args, lv):
    """Every Tensor argument front-batched; unbatched ones expanded to the batch size."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            v = batched_front(a, lv)
            out.append(v if v is not None else expand_batch(a, lv.size))
        else:
            out.append(a)
    return out


def _nd(a):
    return a.ndim if isinstance(a, Tensor) else 0


# ------------------------------------------------------------------ categories
ELEMENTWISE = (
    "abs add arccos arccosh arcsin arcsinh arctan arctanh atan2 cbrt ceil clamp copysign cos cosh cube div erf "
    "erfinv exp exp2 expm1 floor floor_divide fmax fmin fmod frac hypot lerp log log10 log1p log2 logaddexp "
    "logaddexp2 maximum minimum mul nan_to_num neg pow reciprocal remainder round rsqrt sign sin sinh sqrt square "
    "sub tan trunc trunc_divide "
    "elu gelu hardsigmoid hardswish hardtanh leaky_relu logit mish relu relu6 selu sigmoid silu softplus tanh "
    "digamma entr erfc i0 i0e i1 i1e lgamma log_ndtr ndtr polygamma sinc xlog1py xlogy "
    "bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor eq ge gt isclose "
    "isfinite isinf isnan isneginf isposinf le logical_and logical_not logical_or logical_xor lt ne "
    "where angle complex conj imag real astype clone contiguous to_device"
).split()


@rule(*ELEMENTWISE)
def elementwise(op, args, params, lv):
    R = max(_nd(a) for a in args)
    new = []
    for a in args:
        v = batched_front(a, lv)
        new.append(a if v is None else pad_rank(v, a.ndim, R))
    return wrap(apply(op, tuple(new), params), lv)


LEADING = ("tril triu cholesky det inv matrix_exp slogdet eigh qr svd lu_factor pinv view_as_real view_as_complex "
           "one_hot").split()


@rule(*LEADING)
def leading(op, args, params, lv):
    new = []
    for i, a in enumerate(args):
        v = batched_front(a, lv)
        if v is not None and i > 0:
            raise NotImplementedError(f"vmap: op '{op.schema.name}' with a batched argument {i} is not supported")
        new.append(a if v is None else v)
    return wrap(apply(op, tuple(new), params), lv)


@rule("layer_norm", decomposes=True)
def layer_norm_rule(op, args, params, lv):
    # from public ops: the op's backward reuses statistics kept as raw arrays, which a sample does not have
    from ..ops import elementwise as el
    from ..ops import reduction as rd

    x, w, b = args
    axes = tuple(range(x.ndim - params["k"], x.ndim))
    xf = x.to(_F32) if x.dtype.itemsize < 4 else x
    mu = rd.mean(xf, axes, keepdim=True)
    xc = el.sub(xf, mu)
    rstd = el.rsqrt(el.add(rd.mean(el.mul(xc, xc), axes, keepdim=True), params["eps"]))
    y = el.mul(xc, rstd)
    if w is not None:
        y = el.mul(y, w)
    if b is not None:
        y = el.add(y, b)
    return y.to(x.dtype), mu.detach(), rstd.detach()


@rule("layer_norm_backward")
def layer_norm_backward_rule(op, args, params, lv):
    # (g, x, w, mean, rstd): the weight broadcasts from the right against the batched values
    if unwrap(args[2], lv)[1] is not None:
        raise NotImplementedError("vmap: op 'layer_norm_backward' with a batched weight")
    new = [None if a is None else (a if i == 2 else _front_or_expand(a, lv)) for i, a in enumerate(args)]
    return wrap(apply(op, tuple(new), dict(params, axes=tuple(shift(d) for d in params["axes"]))), lv)


def _front_or_expand(a, lv):
    v = batched_front(a, lv)
    return v if v is not None else expand_batch(a, lv.size)


@rule("batch_norm", decomposes=True)
def batch_norm_rule(op, args, params, lv):
    from ..ops import elementwise as el
    from ..ops import reduction as rd

    x, w, b, rm, rv = args
    training, eps = params["training"], params["eps"]
    if training and (rm is not None or rv is not None):
        raise NotImplementedError(
            "vmap: op 'batch_norm' in training mode with running statistics (an in-place update per sample); "
            "use eval() or track_running_stats=False"
        )
    sh = _sh()
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    xf = x.to(_F32) if x.dtype.itemsize < 4 else x
    if training:
        mu = rd.mean(xf, axes, keepdim=True)
        xc = el.sub(xf, mu)
        var = rd.mean(el.mul(xc, xc), axes, keepdim=True)
    else:
        mu, var = sh.reshape(rm, shape), sh.reshape(rv, shape)
        xc = el.sub(xf, mu)
    y = el.mul(xc, el.rsqrt(el.add(var, eps)))
    if w is not None:
        y = el.mul(y, sh.reshape(w, shape))
    if b is not None:
        y = el.add(y, sh.reshape(b, shape))
    return y.to(x.dtype), sh.reshape(mu.detach(), (-1,)), sh.reshape(var.detach(), (-1,))


@rule("searchsorted")
def searchsorted_rule(op, args, params, lv):
    seq, values = args[0], args[1]
    if unwrap(seq, lv)[1] is None and seq.ndim == 1:
        return wrap(apply(op, (seq, batched_front(values, lv)) + tuple(args[2:]), params), lv)
    new = [_front_or_expand(a, lv) if isinstance(a, Tensor) else a for a in args]
    return wrap(apply(op, tuple(new), params), lv)


@rule("rms_norm", decomposes=True)
def rms_norm_rule(op, args, params, lv):
    from ..ops import elementwise as el
    from ..ops import reduction as rd

    x, w = args
    axes = tuple(range(x.ndim - params["k"], x.ndim))
    xf = x.to(_F32) if x.dtype.itemsize < 4 else x
    y = el.mul(xf, el.rsqrt(el.add(rd.mean(el.mul(xf, xf), axes, keepdim=True), params["eps"])))
    if w is not None:
        y = el.mul(y, w)
    return y.to(x.dtype)


def _reduce_loss(loss, reduction):
    from ..ops import reduction as rd

    if reduction == "none":
        return loss
    return rd.mean(loss) if reduction == "mean" else rd.sum(loss)


@rule("huber_loss", decomposes=True)
def huber_rule(op, args, params, lv):
    from ..ops import elementwise as el
    from ..ops.indexing import where

    d = el.abs(el.sub(args[0], args[1]))
    delta = params["delta"]
    loss = where(d < delta, el.mul(el.square(d), 0.5), el.mul(el.sub(d, 0.5 * delta), delta))
    return _reduce_loss(loss, params["reduction"])


@rule("bce_loss", decomposes=True)
def bce_rule(op, args, params, lv):
    from ..ops import elementwise as el

    x, y, w = args
    # PyTorch clamps the logs at -100 so that a saturated probability gives a finite loss
    lx = el.clamp(el.log(x), -100.0, None)
    l1x = el.clamp(el.log1p(el.neg(x)), -100.0, None)
    loss = el.neg(el.add(el.mul(y, lx), el.mul(el.sub(1.0, y), l1x)))
    if w is not None:
        loss = el.mul(loss, w)
    return _reduce_loss(loss, params["reduction"])


@rule("bce_with_logits", decomposes=True)
def bce_logits_rule(op, args, params, lv):
    from ..ops import activation as act
    from ..ops import elementwise as el

    x, y, w, pw = args
    # log(1 + exp(-|x|)) + max(-x, 0): the stable softplus(-x)
    sp = el.add(el.log1p(el.exp(el.neg(el.abs(x)))), act.relu(el.neg(x)))
    coef = el.add(el.mul(el.sub(pw, 1.0), y), 1.0) if pw is not None else None
    loss = el.add(el.mul(el.sub(1.0, y), x), el.mul(coef, sp) if coef is not None else sp)
    if w is not None:
        loss = el.mul(loss, w)
    return _reduce_loss(loss, params["reduction"])


@rule("solve", "solve_triangular")
def solve_rule(op, args, params, lv):
    a, b = args[0], args[1]
    if b.ndim < 2 and isinstance(b, BatchedTensor) and b._level == lv.level:
        raise NotImplementedError(f"vmap: op '{op.schema.name}' with a batched vector right-hand side")
    R = max(a.ndim, b.ndim)
    new = []
    for x in (a, b):
        v = batched_front(x, lv)
        new.append(x if v is None else pad_rank(v, x.ndim, R))
    return wrap(apply(op, tuple(new) + tuple(args[2:]), params), lv)


REDUCE_AXES = ("sum mean prod var std logsumexp norm all any count_nonzero").split()


@rule(*REDUCE_AXES)
def reduce_axes(op, args, params, lv):
    x = args[0]
    v = batched_front(x, lv)
    axes = params["axes"]
    axes = tuple(range(1, x.ndim + 1)) if axes is None else tuple(shift(a) for a in axes)
    return wrap(apply(op, (v,) + tuple(args[1:]), dict(params, axes=axes)), lv)


@rule("max", "min", decomposes=True)
def minmax_rule(op, args, params, lv):
    if not needs_logical_node(op, args):
        return reduce_axes(op, args, params, lv)
    # under a gradient: the value, then a differentiable expression equal to it whose gradient is the
    # op's (ties share it): sum(x * mask) / count, with the tie mask a constant
    from ..autograd.grad_mode import no_grad
    from ..ops import compare
    from ..ops import elementwise as el
    from ..ops import reduction as rd

    x = args[0]
    with no_grad():
        y = reduce_axes(op, (x.detach(),), dict(params, keepdim=True), lv)
    axes = params["axes"]
    axes = tuple(range(x.ndim)) if axes is None else axes
    mask = compare.eq(x.detach(), y).to(x.dtype)
    count = rd.sum(mask, axes, keepdim=True)
    out = el.div(rd.sum(el.mul(x, mask), axes, keepdim=True), count)
    if not params["keepdim"]:
        out = _sh().reshape(out, tuple(n for i, n in enumerate(x.shape) if i not in axes))
    return out


@rule("median", "nanmedian")
def median_rule(op, args, params, lv):
    # the median of all elements is, per sample, the median along the flattened sample
    v = batched_front(args[0], lv)
    flat = _sh().reshape(v, (lv.size, -1))
    dim_op_cls = registry.op_class(op.schema.name + "_dim")
    if flat.shape[1] == 0:
        from ..creation import full

        return wrap(full((lv.size,), float("nan"), dtype=v.dtype, device=v.device), lv)
    vals = apply(dim_op_cls, (flat,), {"dim": 1, "keepdim": False, "ignore_nan": params["ignore_nan"]})[0]
    return wrap(vals, lv)


DIM_OPS = ("max_with_indices min_with_indices median_dim nanmedian_dim mode softmax log_softmax cumsum cumprod "
           "cummax cummin logcumsumexp argsort sort topk kthvalue unbind").split()


@rule(*DIM_OPS)
def dim_op(op, args, params, lv):
    v = batched_front(args[0], lv)
    if params.get("dim") is None:
        raise NotImplementedError(f"vmap: op '{op.schema.name}' over all dims")
    if args[0].ndim == 0:
        # a 0-d sample (dim 0 or -1 names it): run on (B, 1) and give each sample its 0-d result back
        sh = _sh()
        out = apply(op, (sh.unsqueeze(v, 1),) + tuple(args[1:]), dict(params, dim=1))

        def fix(o):
            return sh.reshape(o, (o.shape[0],)) if isinstance(o, Tensor) and o.ndim > 1 else o

        return wrap(tuple(fix(o) for o in out) if out.__class__ is tuple else fix(out), lv)
    out = apply(op, (v,) + tuple(args[1:]), dict(params, dim=shift(params["dim"])))
    return wrap(out, lv)


@rule("argmax", "argmin")
def arg_reduce(op, args, params, lv):
    v = batched_front(args[0], lv)
    if params["dim"] is None:
        v = _sh().reshape(v, (v.shape[0], -1))
        out = apply(op, (v,), dict(params, dim=1))
        if params["keepdim"]:
            out = _sh().reshape(out, (v.shape[0],) + (1,) * args[0].ndim)
        return wrap(out, lv)
    return wrap(apply(op, (v,), dict(params, dim=shift(params["dim"]))), lv)


@rule("concatenate")
def cat_rule(op, args, params, lv):
    return wrap(apply(op, tuple(all_front(args, lv)), dict(params, dim=shift(params["dim"]))), lv)


@rule("select_along_dim")
def select_rule(op, args, params, lv):
    return wrap(apply(op, tuple(all_front(args, lv)), dict(params, dim=shift(params["dim"]))), lv)


@rule("select_along_dim_backward")
def select_back_rule(op, args, params, lv):
    return wrap(apply(op, tuple(all_front(args, lv)), dict(params, dim=shift(params["dim"]),
                                                           shape=(lv.size,) + tuple(params["shape"]))), lv)


@rule("reshape", "view")
def reshape_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    # a view of a moved batch dim may need a copy: reshape either way
    from ..ops.shape import Reshape

    return wrap(apply(Reshape, (v,), {"shape": (v.shape[0],) + tuple(params["shape"])}), lv)


@rule("permute")
def permute_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    n = args[0].ndim
    return wrap(apply(op, (v,), {"dims": (0,) + tuple(d % n + 1 if n else 0 for d in params["dims"])}), lv)


@rule("broadcast_to")
def broadcast_rule(op, args, params, lv):
    x = args[0]
    shape = tuple(params["shape"])
    v = pad_rank(batched_front(x, lv), x.ndim, len(shape))
    return wrap(apply(op, (v,), {"shape": (lv.size,) + shape}), lv)


@rule("diagonal")
def diagonal_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, dim1=shift(params["dim1"]), dim2=shift(params["dim2"]))), lv)


@rule("diag_embed")
def diag_embed_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, shape=(lv.size,) + tuple(params["shape"]), dim1=shift(params["dim1"]),
                                     dim2=shift(params["dim2"]))), lv)


@rule("flip")
def flip_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    dims = params["dims"]
    dims = tuple(range(1, args[0].ndim + 1)) if dims is None else tuple(shift(d) for d in dims)
    return wrap(apply(op, (v,), dict(params, dims=dims)), lv)


@rule("roll")
def roll_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    dims = params["dims"]
    if dims is None:
        shp = tuple(v.shape)
        flat = _sh().reshape(v, (shp[0], -1))
        out = apply(op, (flat,), {"shifts": (params["shifts"],) if isinstance(params["shifts"], int)
                                  else params["shifts"], "dims": (1,)})
        return wrap(_sh().reshape(out, shp), lv)
    dims = (shift(dims),) if isinstance(dims, int) else tuple(shift(d) for d in dims)
    return wrap(apply(op, (v,), dict(params, dims=dims)), lv)


@rule("pad")
def pad_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, pads=((0, 0),) + tuple(params["pads"]))), lv)


@rule("pad_backward")
def pad_backward_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, pads=((0, 0),) + tuple(params["pads"]),
                                     shape=(lv.size,) + tuple(params["shape"]))), lv)


@rule("fft_c2c", "fft_r2c", "fft_c2r")
def fft_rule(op, args, params, lv):
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, dims=tuple(shift(d) for d in params["dims"]))), lv)


# ------------------------------------------------------------------ matmul family
@rule("matmul")
def matmul_rule(op, args, params, lv):
    a, b = args
    va, vb = batched_front(a, lv), batched_front(b, lv)
    sh = _sh()
    na, nb = a.ndim, b.ndim
    pa = a if va is None else va
    pb = b if vb is None else vb
    squeeze = []
    # one-dimensional operands become matrices (PyTorch's rule), squeezed again at the end
    if na == 1:
        pa = sh.unsqueeze(pa, -2)
        na = 2
        squeeze.append(-2)
    if nb == 1:
        pb = sh.unsqueeze(pb, -1)
        nb = 2
        squeeze.append(-1)
    k = pa.shape[-1]
    if va is not None and vb is None and nb == 2 and k > 1:
        # a batch of (stacks of) rows times one matrix: one GEMM over every row
        lead = tuple(pa.shape[:-1])
        out = sh.reshape(apply(op, (sh.reshape(pa, (-1, k)), pb), params), lead + (pb.shape[-1],))
        bdim = 0
    elif va is None and vb is not None and na == 2 and nb == 2 and k > 1:
        # one matrix times a batch of matrices: the batch joins the columns of one GEMM
        B, m = pb.shape[0], pb.shape[-1]
        cols = sh.reshape(sh.permute(pb, (1, 0, 2)), (k, B * m))
        out = sh.reshape(apply(op, (pa, cols), params), (pa.shape[0], B, m))
        bdim = 1
    else:
        R = max(na, nb)
        if va is not None:
            pa = pad_rank(pa, na, R)
        if vb is not None:
            pb = pad_rank(pb, nb, R)
        if k == 1:
            # a contraction of length one is an outer product: a broadcast multiply, not a batched GEMM
            from ..ops.elementwise import mul

            out = mul(pa, pb)
        else:
            out = apply(op, (pa, pb), params)
        bdim = 0
    # the squeezed dims are logical trailing dims: negative indices reach them whatever bdim is
    if squeeze == [-2]:
        out = sh.squeeze(out, -2)
    elif squeeze == [-1]:
        out = sh.squeeze(out, -1)
    elif squeeze:
        out = sh.squeeze(sh.squeeze(out, -1), -1)
    return wrap(out, lv, bdim)


@rule("dot", decomposes=True)
def dot_rule(op, args, params, lv):
    from ..ops.elementwise import mul
    from ..ops.reduction import sum as _sum

    return _sum(mul(args[0], args[1]), -1)


@rule("outer", decomposes=True)
def outer_rule(op, args, params, lv):
    from ..ops.elementwise import mul

    sh = _sh()
    return mul(sh.unsqueeze(args[0], -1), sh.unsqueeze(args[1], -2))


@rule("linear")
def linear_rule(op, args, params, lv):
    x, w, b = args
    if unwrap(w, lv)[1] is None and unwrap(b, lv)[1] is None:
        return wrap(apply(op, (batched_front(x, lv), w, b), params), lv)
    return _linear_decomposed(x, w, b)


def _linear_decomposed(x, w, b):
    from ..ops.elementwise import add
    from ..ops.linalg import matmul

    y = matmul(x, _sh().transpose(w, -1, -2))
    return add(y, b) if b is not None else y


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@rule("einsum")
def einsum_rule(op, args, params, lv):
    terms, out = params["terms"], params["out"]
    used = set("".join(terms) + out)
    z = next(c for c in _LETTERS if c not in used)
    new_args, new_terms = [], []
    for a, t in zip(args, terms):
        v = batched_front(a, lv)
        if v is None:
            new_args.append(a)
            new_terms.append(t)
        else:
            new_args.append(v)
            new_terms.append(z + t)
    return wrap(apply(op, tuple(new_args), {"terms": tuple(new_terms), "out": z + out}), lv)


# ------------------------------------------------------------------ indexing
def _adjacent_advanced(index):
    pos = [i for i, it in enumerate(index) if hasattr(it, "shape") and hasattr(it, "dtype")]
    return not pos or pos == list(range(pos[0], pos[0] + len(pos)))


def _check_index(op, index):
    for it in index:
        if it.__class__ is Meta:
            raise NotImplementedError(f"vmap: op '{op.schema.name}' with a batched index tensor")
    if not _adjacent_advanced(index):
        raise NotImplementedError(f"vmap: op '{op.schema.name}' with advanced indices separated by slices")


@rule("getitem")
def getitem_rule(op, args, params, lv):
    index = params["index"]
    _check_index(op, index)
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, index=(slice(None),) + tuple(index))), lv)


@rule("getitem_backward")
def getitem_backward_rule(op, args, params, lv):
    index = params["index"]
    _check_index(op, index)
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, index=(slice(None),) + tuple(index),
                                     shape=(lv.size,) + tuple(params["shape"]))), lv)


@rule("index_put")
def index_put_rule(op, args, params, lv):
    index = params["index"]
    _check_index(op, index)
    x, val = args
    full = (slice(None),) + tuple(index)
    vx = batched_front(x, lv)
    vx = vx if vx is not None else expand_batch(x, lv.size).clone()
    vv = batched_front(val, lv) if isinstance(val, Tensor) else None
    if vv is not None:
        # the value broadcasts against the indexed region: line its batch dim up with that region's
        region = apply(registry.op_class("getitem"), (vx,), {"index": full, "advanced": params["advanced"]})
        val = pad_rank(vv, val.ndim, region.ndim - 1)
    return wrap(apply(op, (vx, val), dict(params, index=full)), lv)


def _index_array(params, lv):
    """The index array of ``gather``/``scatter``-style params, front-batched, or ``(array, False)``."""
    idx = params["index"]
    if idx.__class__ is Meta:
        owner = idx.owner
        if owner._level != lv.level:
            raise NotImplementedError("vmap: an index tensor batched at another level")
        v = front(owner._value, owner._bdim)
        if isinstance(v, BatchedTensor) or v._data.__class__ is Meta:
            raise NotImplementedError("vmap: a nested batched index tensor")
        return v._data, True
    return idx, False


def _batch_index(be, idx, size):
    return be.broadcast_to(idx[None], (size,) + tuple(idx.shape))


@rule("gather")
def gather_rule(op, args, params, lv):
    x = args[0]
    idx, ib = _index_array(params, lv)
    v = batched_front(x, lv)
    be = x._device.backend
    if v is None:
        v = expand_batch(x, lv.size)
    if not ib:
        idx = _batch_index(be, idx, lv.size)
    return wrap(apply(op, (v,), dict(params, index=idx, dim=shift(params["dim"]))), lv)


@rule("scatter", "scatter_add", "scatter_reduce")
def scatter_rule(op, args, params, lv):
    x = args[0]
    idx, ib = _index_array(params, lv)
    be = x._device.backend
    if not ib:
        idx = _batch_index(be, idx, lv.size)
    new = []
    for a in args:
        if isinstance(a, Tensor):
            v = batched_front(a, lv)
            v = v if v is not None else expand_batch(a, lv.size)
            new.append(v)
        else:
            new.append(a)
    new[0] = new[0].contiguous() if isinstance(new[0], Tensor) else new[0]
    return wrap(apply(op, tuple(new), dict(params, index=idx, dim=shift(params["dim"]))), lv)


@rule("index_select")
def index_select_rule(op, args, params, lv):
    if params["index"].__class__ is Meta:
        raise NotImplementedError("vmap: op 'index_select' with a batched index")
    v = batched_front(args[0], lv)
    return wrap(apply(op, (v,), dict(params, dim=shift(params["dim"]))), lv)


@rule("index_add")
def index_add_rule(op, args, params, lv):
    if params["index"].__class__ is Meta:
        raise NotImplementedError("vmap: op 'index_add' with a batched index")
    new = all_front(args, lv)
    return wrap(apply(op, tuple(new), dict(params, dim=shift(params["dim"]))), lv)


@rule("embedding")
def embedding_rule(op, args, params, lv):
    w, idx = args
    if unwrap(w, lv)[1] is not None:
        raise NotImplementedError("vmap: op 'embedding' with a batched weight")
    vi, d = unwrap(idx, lv)
    return wrap(apply(op, (w, vi), params), lv, d)


@rule("embedding_backward")
def embedding_backward_rule(op, args, params, lv):
    from .._tensor import _new_tensor
    from ..creation import arange
    from ..ops.elementwise import add, mul

    g, idx = all_front(args, lv)
    n = params["num_weights"]
    B = lv.size
    sh = _sh()
    # sample b's rows go to a block of its own: its indices offset by b * num_weights
    off = sh.reshape(arange(B, device=g.device) * n, (B,) + (1,) * (idx.ndim - 1))
    out = apply(op, (g, add(idx, off)), dict(params, num_weights=B * n, padding_idx=-1))
    out = sh.reshape(out, (B, n) + tuple(out.shape[1:]))
    pad = params["padding_idx"]
    if pad is not None and 0 <= pad < n:
        be = g._device.backend
        keep = be.ones((1, n) + (1,) * (out.ndim - 2), dtype=g._data.dtype if g._data.__class__ is not Meta
                       else "float32")
        keep[0, pad] = 0
        out = mul(out, _new_tensor(keep, g.device))
    return wrap(out, lv)


# ------------------------------------------------------------------ nn
def _fold_apply(op, x, lv, spatial, rest, params):
    """Run ``op`` with the batch folded into ``N`` (or used as ``N`` for an input without one)."""
    v = batched_front(x, lv)
    sh = _sh()
    if x.ndim == spatial + 1:
        return wrap(apply(op, (v,) + tuple(rest), params), lv)
    shp = tuple(v.shape)
    flat = sh.reshape(v, (shp[0] * shp[1],) + shp[2:])
    out = apply(op, (flat,) + tuple(rest), params)

    def unfold(o):
        return sh.reshape(o, (shp[0], shp[1]) + tuple(o.shape[1:]))

    if isinstance(out, tuple):
        return tuple(wrap(unfold(o), lv) for o in out)
    return wrap(unfold(out), lv)


POOL = ("adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d "
        "avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d interpolate_bilinear interpolate_linear "
        "interpolate_nearest_1d interpolate_nearest_2d interpolate_nearest_3d interpolate_trilinear").split()


@rule(*POOL)
def pool_rule(op, args, params, lv):
    name = op.schema.name
    sp = {"interpolate_linear": 1, "interpolate_bilinear": 2, "interpolate_trilinear": 3}.get(name) or int(
        name[-2])
    return _fold_apply(op, args[0], lv, sp, args[1:], params)


@rule("unfold")
def unfold_rule(op, args, params, lv):
    return _fold_apply(op, args[0], lv, len(params["kernel"]), (), params)


@rule("fold")
def fold_rule(op, args, params, lv):
    return _fold_apply(op, args[0], lv, 1, (), params)


@rule("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def conv_transpose_rule(op, args, params, lv):
    x, w, b = args
    if unwrap(w, lv)[1] is not None or unwrap(b, lv)[1] is not None:
        raise NotImplementedError(f"vmap: op '{op.schema.name}' with a batched weight or bias")
    return _fold_apply(op, x, lv, int(op.schema.name[-2]), (w, b), params)


@rule("conv1d", "conv2d", "conv3d")
def conv_rule(op, args, params, lv):
    x, w, b = args
    sp = int(op.schema.name[-2])
    if unwrap(w, lv)[1] is None and unwrap(b, lv)[1] is None:
        return _fold_apply(op, x, lv, sp, (w, b), params)
    # a batched weight: the samples become groups of one grouped convolution
    B = lv.size
    sh = _sh()
    vx = batched_front(x, lv)
    vx = vx if vx is not None else expand_batch(x, B)
    if x.ndim == sp + 1:
        vx = sh.unsqueeze(vx, 1)
    vw = batched_front(w, lv)
    vw = vw if vw is not None else expand_batch(w, B)
    N = vx.shape[1]
    xs = sh.reshape(sh.transpose(vx, 0, 1), (N, B * vx.shape[2]) + tuple(vx.shape[3:]))
    ws = sh.reshape(vw, (B * vw.shape[1],) + tuple(vw.shape[2:]))
    bs = None
    if b is not None:
        vb = batched_front(b, lv)
        vb = vb if vb is not None else expand_batch(b, B)
        bs = sh.reshape(vb, (-1,))
    out = apply(op, (xs, ws, bs), dict(params, groups=params["groups"] * B))
    out = sh.reshape(out, (N, B, vw.shape[1]) + tuple(out.shape[2:]))
    if x.ndim == sp + 1:
        out = sh.squeeze(out, 0)
        return wrap(out, lv, 0)
    return wrap(out, lv, 1)


@rule("dropout", "alpha_dropout")
def dropout_rule(op, args, params, lv):
    if lv.randomness == "error":
        raise RuntimeError(
            f"vmap: called random operation '{op.schema.name}' under vmap(randomness='error'); pass "
            "randomness='different' (independent draws per sample) or 'same' (one draw for the batch)"
        )
    x, mask = args[0], args[1]
    if lv.randomness == "different" and unwrap(mask, lv)[1] is None:
        from ..creation import full
        from ..random import bernoulli

        # the public function drew one mask for the logical shape: draw one per sample instead, with the
        # same keep probability (the mask's mean is not it; recover it from the scale)
        keep = _keep_probability(op, params)
        shape = (lv.size,) + tuple(mask.shape)
        mask = bernoulli(full(shape, keep, device=x.device)).to(mask.dtype)
        args = (x, make_batched(mask, 0, lv.level)) + tuple(args[2:])
    return elementwise(op, args, params, lv)


def _keep_probability(op, params):
    if op.schema.name == "dropout":
        s = params["scale"]
        return 1.0 / s if s else 0.0
    raise NotImplementedError("vmap: alpha_dropout with randomness='different'")


@rule("mse_loss", decomposes=True)
def mse_rule(op, args, params, lv):
    from ..ops.elementwise import square, sub
    from ..ops.reduction import mean
    from ..ops.reduction import sum as _sum

    d = square(sub(args[0], args[1]))
    red = params.get("reduction", "mean")
    if red == "none":
        return d
    return mean(d) if red == "mean" else _sum(d)


@rule("cross_entropy_loss", decomposes=True)
def cross_entropy_rule(op, args, params, lv):
    from ..ops.reduction import logsumexp
    from ..ops.special import log_softmax

    x, target, weight = args
    logp = log_softmax(x, 1)
    loss, count = _class_loss(logp, target, weight, params["ignore_index"], params["reduction"],
                              params["label_smoothing"], params["prob_target"])
    return loss, logsumexp(x, 1), count


@rule("nll_loss", decomposes=True)
def nll_rule(op, args, params, lv):
    x, target, weight = args
    return _class_loss(x, target, weight, params["ignore_index"], params["reduction"], 0.0, False)[0]


def _class_loss(logp, target, weight, ignore_index, reduction, eps, prob):
    """``(loss, count)`` of the negative log-likelihood of log-probabilities ``logp`` (``(N, C, ...)``),
    PyTorch's weighting, ``ignore_index`` and label smoothing, from public ops (so each sample of a
    ``vmap`` is its own loss and autograd follows the ops)."""
    from ..creation import zeros_like
    from ..ops import compare
    from ..ops import elementwise as el
    from ..ops import indexing as ix
    from ..ops import reduction as rd

    sh = _sh()
    C = logp.shape[1]
    wshape = (1, C) + (1,) * (logp.ndim - 2)
    wc = sh.reshape(weight, wshape) if weight is not None else None
    if prob:
        q = el.add(el.mul(target, 1 - eps), eps / C) if eps else target
        if wc is not None:
            q = el.mul(q, wc)
        rows = el.neg(rd.sum(el.mul(q, logp), 1))
        n = rows.numel()
        if reduction == "none":
            return rows, n
        tot = rd.sum(rows)
        return (el.div(tot, n) if reduction == "mean" else tot), n
    valid = compare.ne(target, ignore_index)
    safe = ix.where(valid, target, zeros_like(target))
    picked = sh.squeeze(ix.gather(logp, 1, sh.unsqueeze(safe, 1)), 1)
    vf = valid.to(logp.dtype)
    if weight is not None:
        w = el.mul(sh.reshape(ix.gather(weight, 0, sh.reshape(safe, (-1,))), tuple(target.shape)), vf)
    else:
        w = vf
    loss = el.neg(el.mul(picked, w))
    if eps:
        smooth = el.neg(rd.sum(el.mul(logp, wc) if wc is not None else logp, 1))
        loss = el.add(el.mul(loss, 1 - eps), el.mul(el.mul(smooth, vf), eps / C))
    count = rd.sum(valid)
    if reduction == "none":
        return loss, count
    tot = rd.sum(loss)
    return (el.div(tot, rd.sum(w)) if reduction == "mean" else tot), count


@rule("scaled_dot_product_attention")
def sdpa_rule(op, args, params, lv):
    if params.get("drop"):
        if lv.randomness == "error":
            raise RuntimeError("vmap: called random operation 'scaled_dot_product_attention' (dropout) under "
                               "vmap(randomness='error')")
    R = max(_nd(a) for a in args[:3])
    new = []
    for a in args:
        if isinstance(a, Tensor):
            v = batched_front(a, lv)
            new.append(a if v is None else pad_rank(v, a.ndim, R))
        else:
            new.append(a)
    return wrap(apply(op, tuple(new), params), lv)


# ------------------------------------------------------------------ recurrent cells and layers
@rule("lstm_cell", "gru_cell", decomposes=True)
def rnn_cell_rule(op, args, params, lv):
    # the cell ops are element-wise over every leading dim of their (..., kH) gates and (..., H) states: the
    # batch goes to the front of all of them (an unbatched state, such as a zero initial one, is expanded)
    out = wrap(apply(op, tuple(all_front(args, lv)), params), lv)
    if needs_logical_node(op, args):
        record_logical(op, args, params, out)
        # the activations a cell keeps for its raw-array backward are physical; the logical node runs the
        # graph-mode backward, which recomputes them from the saved inputs and never reads ``extra``
        out[0].grad_fn.extra = None
    return out


def _unrolled_layer(x_proj, h0, reverse, step):
    """``(out (T, B, H), h_n, c_n)`` of a recurrence over the logical steps of ``x_proj``: ``step(x_t, h)`` gives the
    next state ``(h, c)``; ``h0`` is ``(h, c)``."""
    sh = _sh()
    xs = sh.unbind(x_proj, 0)
    seq = [None] * len(xs)
    h = h0
    for t in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        h = step(xs[t], h)
        seq[t] = h[0]
    if not xs:  # an empty sequence: an empty output of the state's width
        out = x_proj[..., :h[0].shape[-1]]
    else:
        out = sh.stack(seq, 0)
    return out, h


@rule("lstm_layer", decomposes=True)
def lstm_layer_rule(op, args, params, lv):
    # the fused layer loops over raw arrays; here its steps are unrolled into the cell op (which has a rule), so
    # any argument may be batched (per-sample weights too) and grad inside vmap works through the cells
    from ..ops import linalg as la
    from ..ops import rnn

    x_proj, h0, c0, w_hh = args
    w_t = _sh().transpose(w_hh, 0, 1)
    out, (h, c) = _unrolled_layer(x_proj, (h0, c0), params["reverse"],
                                  lambda x, hc: rnn.lstm_gates(x + la.matmul(hc[0], w_t), hc[1]))
    return out, h, c, None, None  # the last two are the op's saved activations, which no caller reads


@rule("gru_layer", decomposes=True)
def gru_layer_rule(op, args, params, lv):
    from ..ops import linalg as la
    from ..ops import rnn

    x_proj, h0, w_hh, b_hh = args
    w_t = _sh().transpose(w_hh, 0, 1)

    def step(x, hs):
        hg = la.matmul(hs[0], w_t)
        return (rnn.gru_gates(x, hg if b_hh is None else hg + b_hh, hs[0]),)

    out, (h,) = _unrolled_layer(x_proj, (h0,), params["reverse"], step)
    return out, h, None, None, None  # the last three are the op's saved arrays, which no caller reads


def check_coverage():
    """``(with_rule, registered)``: the registered op names with a batching rule, and all of them."""
    names = registry.list_ops()
    return [n for n in names if n in RULES], names
