"""Forward-mode rules: how each registered op carries a tangent (``jvp``, ``jacfwd``).

``J t`` for the tangents ``t`` of an op's inputs, by the cheapest rule that is exact for it:

- ``linear`` ops (jointly linear in their floating tensor arguments: ``add``, ``sum``, ``reshape``,
  indexing, ``cat``, ``fft`` ...): ``J t = op(t)``, with zeros for missing tangents and 0 for Python
  scalars (``add(x, 2)`` is affine; its tangent is ``add(t, 0)``);
- ``multilinear`` ops (``mul``, ``matmul``, ``einsum``, ``linear``/convolutions with their bias):
  ``J t = sum_i op(p_1, .., t_i, .., p_n)``;
- ``elementwise`` ops: the Jacobian is diagonal once the inputs are broadcast to the output's shape, so
  ``J_i t_i = vjp_i(t_i)``, computed with the op's own graph-mode ``backward`` on the broadcast inputs;
- every other differentiable op (``generic``): the double-vjp (transpose) trick, exact because a vjp
  is linear in its cotangent ``u``: ``J t = d/du <vjp(u), t>``, with ``vjp`` the op's own
  differentiable ``backward`` and the derivative taken by the reverse-mode engine.

Non-differentiable ops (comparisons, ``argmax``) give no tangent. All of these run with recording on,
so tangents are themselves differentiable (``jacrev`` of ``jacfwd``). The rules assume real tensors:
for complex ones the backward formulas return conjugated products (PyTorch's convention), which is
not ``J t``.
"""

from __future__ import annotations

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad
from ..ops import registry
from ..ops._op import apply
from ._core import DualTensor, Meta, make_dual, needs_logical_node, record_logical

LINEAR = set((
    "add sub neg sum mean reshape view permute broadcast_to diagonal diag_embed flip roll tril triu unbind "
    "concatenate real imag conj view_as_real view_as_complex complex clone contiguous cumsum getitem "
    "getitem_backward index_select gather scatter scatter_add index_add index_put select_along_dim "
    "select_along_dim_backward fft_c2c fft_r2c fft_c2r pad pad_backward avg_pool1d avg_pool2d avg_pool3d "
    "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d interpolate_bilinear interpolate_linear "
    "interpolate_nearest_1d interpolate_nearest_2d interpolate_nearest_3d interpolate_trilinear unfold fold "
    "embedding embedding_backward astype to_device where"
).split())
MULTILINEAR = set("mul matmul dot outer einsum".split())
AFFINE_BIAS = set("linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d".split())
ELEMENTWISE = set((
    "abs arccos arccosh arcsin arcsinh arctan arctanh atan2 cbrt ceil clamp copysign cos cosh cube div erf "
    "erfinv exp exp2 expm1 floor fmax fmin fmod frac hypot lerp log log10 log1p log2 logaddexp logaddexp2 "
    "maximum minimum nan_to_num pow reciprocal remainder round rsqrt sign sin sinh sqrt square tan trunc "
    "elu gelu hardsigmoid hardswish hardtanh leaky_relu logit mish relu relu6 selu sigmoid silu softplus tanh "
    "digamma entr erfc i0 i0e i1 i1e lgamma log_ndtr ndtr polygamma sinc xlog1py xlogy dropout alpha_dropout"
).split())


def rule_kind(op) -> str:
    """The forward rule an op gets: ``linear``, ``multilinear``, ``affine``, ``elementwise``, ``generic``
    or ``none`` (non-differentiable: no tangent)."""
    name = op.schema.name
    if not op.schema.differentiable:
        return "none"
    if name in LINEAR:
        return "linear"
    if name in MULTILINEAR:
        return "multilinear"
    if name in AFFINE_BIAS:
        return "affine"
    if name in ELEMENTWISE:
        return "elementwise"
    if getattr(op, "backward", None) is None:
        raise NotImplementedError(f"jvp: no forward rule for op '{name}'")
    return "generic"


def check_coverage():
    """``(with_rule, registered)``: registered op names with a forward rule, and all of them."""
    names = registry.list_ops()
    ok = []
    for n in names:
        try:
            rule_kind(registry.op_class(n))
        except NotImplementedError:
            continue
        ok.append(n)
    return ok, names


def _is_float(t) -> bool:
    return isinstance(t, Tensor) and t._data.dtype.kind in "fcV"


def _zeros_like(t):
    from ..creation import zeros_like

    return zeros_like(t)


def _ones_like(t):
    from ..creation import ones_like

    return ones_like(t)


def _unwrap_params(params, lv):
    if not params:
        return params
    out = None
    for k, v in params.items():
        if v.__class__ is Meta and isinstance(v.owner, DualTensor) and v.owner._level == lv.level:
            if out is None:
                out = dict(params)
            out[k] = v.owner._primal._data
    return params if out is None else out


def dual_apply(op, args, params, lv):
    primals, tangents = [], []
    has_t = False
    for a in args:
        if isinstance(a, DualTensor) and a._level == lv.level:
            primals.append(a._primal)
            tangents.append(a._tangent)
            has_t = has_t or a._tangent is not None
        else:
            primals.append(a)
            tangents.append(None)
    params = _unwrap_params(params, lv)
    kind = rule_kind(op)
    if kind == "none" or not has_t:
        out = apply(op, tuple(primals), params)
        tan = None
    elif kind == "linear":
        out, tan = _linear(op, primals, tangents, params)
    elif kind == "multilinear":
        out, tan = _multilinear(op, primals, tangents, params)
    elif kind == "affine":
        out, tan = _affine(op, primals, tangents, params)
    elif kind == "elementwise":
        out, tan = _elementwise(op, primals, tangents, params)
    else:
        out, tan = _generic(op, primals, tangents, params)
    multi = out.__class__ is tuple
    outs = out if multi else (out,)
    if multi:
        tans = tuple(tan) if tan is not None else (None,) * len(outs)
    else:
        tans = (tan,)
    res = tuple(make_dual(o, t, lv.level) if _is_float(o) else o for o, t in zip(outs, tans))
    if needs_logical_node(op, args):
        record_logical(op, args, params, res)
    return res if multi else res[0]


def _tangent_args(primals, tangents):
    out = []
    for p, t in zip(primals, tangents):
        if _is_float(p):
            out.append(t if t is not None else _zeros_like(p))
        elif isinstance(p, (bool, int, float, complex)) and not isinstance(p, bool):
            out.append(type(p)(0))
        else:
            out.append(p)
    return tuple(out)


def _linear(op, primals, tangents, params):
    out = apply(op, tuple(primals), params)
    tp = params
    if op.schema.name == "pad" and params.get("value"):
        tp = dict(params, value=0)
    if op.schema.name == "astype" and not _is_float(out if out.__class__ is not tuple else out[0]):
        return out, None
    return out, apply(op, _tangent_args(primals, tangents), tp)


def _add(a, b):
    from ..ops.elementwise import add

    if a is None:
        return b
    if b is None:
        return a
    if a.__class__ is tuple:
        return tuple(_add(x, y) for x, y in zip(a, b))
    return add(a, b)


def _multilinear(op, primals, tangents, params):
    out = apply(op, tuple(primals), params)
    tan = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        args = list(primals)
        args[i] = t
        tan = _add(tan, apply(op, tuple(args), params))
    return out, tan


def _affine(op, primals, tangents, params):
    out = apply(op, tuple(primals), params)
    x, w = primals[0], primals[1]
    tx, tw = tangents[0], tangents[1]
    tb = tangents[2] if len(tangents) > 2 else None
    rest = tuple(primals[3:])
    tan = None
    if tx is not None or tb is not None:
        tan = apply(op, (tx if tx is not None else _zeros_like(x), w, tb) + rest, params)
    if tw is not None:
        tan = _add(tan, apply(op, (x, tw, None) + rest, params))
    return out, tan


def _leaves(primals):
    """Primals as tensors that record a graph: those that already require grad stay (so the tangent stays
    differentiable for outer reverse-mode transforms), the others become fresh leaves."""
    ins, real = [], False
    for p in primals:
        if _is_float(p):
            if p._requires_grad:
                real = True
                ins.append(p)
            else:
                ins.append(p.detach().requires_grad_())
        else:
            ins.append(p)
    return ins, real


def _finish_out(out, real):
    if real:
        return out
    if out.__class__ is tuple:
        return tuple(o.detach() if isinstance(o, Tensor) else o for o in out)
    return out.detach()


def _elementwise(op, primals, tangents, params):
    from ..ops.shape import broadcast_shapes, expand

    shapes = [tuple(p.shape) for p in primals if isinstance(p, Tensor)]
    oshape = tuple(broadcast_shapes(*shapes))
    with enable_grad():
        ins, real = _leaves(primals)
        ins = [expand(p, oshape) if isinstance(p, Tensor) and tuple(p.shape) != oshape and t is not None else p
               for p, t in zip(ins, tangents)]
        out = apply(op, tuple(ins), params)
        node = out.grad_fn
        tan = None
        for i, t in enumerate(tangents):
            if t is None or node is None:
                continue
            if tuple(t.shape) != oshape:
                t = expand(t, oshape)
            gs = node.backward(t)
            gs = gs if gs.__class__ is tuple else (gs,)
            if gs[i] is not None:
                tan = _add(tan, gs[i])
    return _finish_out(out, real), tan


def _generic(op, primals, tangents, params):
    from ..autograd.engine import grad as _grad
    from ..creation import ones_like
    from ..ops.elementwise import mul
    from ..ops.reduction import sum as _sum

    with enable_grad():
        ins, real = _leaves(primals)
        out = apply(op, tuple(ins), params)
        outs = out if out.__class__ is tuple else (out,)
        node = next((o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None), None)
        if node is None:
            return _finish_out(out, real), None
        diff = op.differentiable_outputs
        # the cotangent's value does not matter (a vjp is linear in it); ones rather than zeros, so that
        # formulas that skip a zero incoming gradient (eigh's, svd's) keep the term
        us = [_ones_like(o).requires_grad_() if _is_float(o) and (diff is None or diff[k]) else None
              for k, o in enumerate(outs)]
        gs = node.backward(*us)
        gs = gs if gs.__class__ is tuple else (gs,)
        s = None
        for g, t in zip(gs, tangents):
            if g is not None and t is not None:
                s = _add(s, _sum(mul(g, t)))
        live = [u for u in us if u is not None]
        jt = None
        if s is not None and s._requires_grad:
            jt = _grad(s, live, grad_outputs=ones_like(s), create_graph=True, allow_unused=True)
    if jt is None:
        tans = tuple(None for _ in outs)
    else:
        it = iter(jt)
        tans = tuple(next(it) if u is not None else None for u in us)
    o = _finish_out(out, real)
    return o, (tans if out.__class__ is tuple else tans[0])
