"""The public transforms of ``pylucid.func``, spelled as ``torch.func`` spells them."""

from __future__ import annotations

import functools
from typing import Any, Callable

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad
from ._core import (
    BatchedTensor,
    DualTensor,
    Wrapper,
    broadcast_prefix,
    current_levels,
    has_outer,
    make_batched,
    make_dual,
    push_level,
    tree_flatten,
    tree_unflatten,
)

_RANDOMNESS = ("error", "different", "same")


# ------------------------------------------------------------------ vmap
def vmap(func: Callable[..., Any], in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable[..., Any]:
    """Vectorise ``func`` over a batch dimension of its inputs.

    ``vmap(f)(x)`` equals ``stack([f(x[i]) for i in range(x.shape[0])])``, computed in one pass: each op
    runs once on the whole batch through its batching rule (``pylucid.func._batching``), not in a loop.

    Args:
        func: the function; its inputs and outputs are Tensors or nested tuples/lists/dicts of them.
        in_dims: per input (a prefix of the inputs' structure), the batch dim, or ``None`` for an input
            that is the same for every sample. An int applies to every input.
        out_dims: the dim of each output that holds the batch (a prefix of the outputs' structure).
        randomness: ``"error"`` (a random op inside raises), ``"different"`` (independent draws per
            sample) or ``"same"`` (one draw shared by the batch).
        chunk_size: run the batch in chunks of this many samples (less memory), concatenated.

    Composes with itself and with ``grad``/``jvp``: ``vmap(grad(f), in_dims=(None, 0, 0))`` gives
    per-sample gradients.

    >>> import pylucid
    >>> from pylucid.func import vmap
    >>> x = pylucid.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> vmap(lambda r: (r * r).sum())(x)
    tensor([ 5., 25.])
    """
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        flat, spec = tree_flatten(args)
        if isinstance(in_dims, (tuple, list)):
            if len(in_dims) != len(args):
                raise ValueError(f"vmap: in_dims has {len(in_dims)} entries for {len(args)} positional inputs")
            dims = broadcast_prefix(tuple(in_dims), args, "in_dims")
        else:
            dims = [in_dims] * len(flat)
        size = None
        norm = []
        for x, d in zip(flat, dims):
            if d is None:
                norm.append(None)
                continue
            if not isinstance(d, int):
                raise ValueError(f"vmap: in_dims entries must be ints or None, got {d!r}")
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap: in_dim {d} was given for a non-Tensor input of type {type(x).__name__}")
            n = x.ndim
            if not -n <= d < n:
                raise ValueError(f"vmap: in_dim {d} is out of range for an input of {n} dims")
            d = d % n
            if size is None:
                size = x.shape[d]
            elif x.shape[d] != size:
                raise ValueError(f"vmap: expected one batch size, got inputs with sizes {size} and {x.shape[d]} "
                                 "in their batch dims")
            norm.append(d)
        if size is None:
            raise ValueError("vmap: at least one input must be batched (in_dims all None)")
        if chunk_size is not None and chunk_size < size:
            return _chunked(func, flat, spec, norm, size, kwargs)
        return _vmap_call(func, flat, spec, norm, size, kwargs)

    def _vmap_call(f, flat, spec, norm, size, kwargs):
        with push_level("vmap", size, randomness) as lv:
            wrapped_in = [make_batched(x, d, lv.level) if d is not None else x for x, d in zip(flat, norm)]
            out = f(*tree_unflatten(wrapped_in, spec), **kwargs)
            return _unwrap_outputs(out, lv, size)

    def _chunked(f, flat, spec, norm, size, kwargs):
        from ..ops.shape import cat

        parts = []
        for s in range(0, size, chunk_size):
            e = min(s + chunk_size, size)
            sub = [x if d is None else _slice(x, d, s, e) for x, d in zip(flat, norm)]
            parts.append(_vmap_call(f, sub, spec, norm, e - s, kwargs))
        leaves0, ospec = tree_flatten(parts[0])
        odims = _out_dims_list(parts[0])
        cols = [tree_flatten(p)[0] for p in parts]
        res = []
        for k in range(len(leaves0)):
            d = odims[k]
            res.append(cols[0][k] if d is None else cat([c[k] for c in cols], d))
        return tree_unflatten(res, ospec)

    def _out_dims_list(out):
        if out_dims is None or isinstance(out_dims, int):
            return [out_dims] * len(tree_flatten(out)[0])
        if isinstance(out_dims, (tuple, list)) and not isinstance(out, (tuple, list)):
            return broadcast_prefix(tuple(out_dims), (out,), "out_dims")
        return broadcast_prefix(out_dims, out, "out_dims")

    def _unwrap_outputs(out, lv, size):
        from ..ops.shape import movedim

        leaves, ospec = tree_flatten(out)
        odims = _out_dims_list(out)
        res = []
        for o, d in zip(leaves, odims):
            if not isinstance(o, Tensor):
                raise ValueError(f"vmap: the function must return Tensors, got {type(o).__name__}")
            if isinstance(o, BatchedTensor) and o._level == lv.level:
                v, b = o._value, o._bdim
                if d is None:
                    raise ValueError("vmap: out_dims=None for an output that depends on the batched inputs")
                d = d % (v.ndim)
                res.append(v if b == d else movedim(v, b, d))
            else:
                if d is None:
                    res.append(o)
                    continue
                from ..ops.shape import expand, unsqueeze

                d = d % (o.ndim + 1)
                e = expand(unsqueeze(o, 0), (size,) + tuple(o.shape))
                res.append(e if d == 0 else movedim(e, 0, d))
        return tree_unflatten(res, ospec)

    return wrapped


def _slice(x, d, s, e):
    from ..ops.indexing import getitem

    return getitem(x, (slice(None),) * d + (slice(s, e),))


# ------------------------------------------------------------------ reverse mode
def _as_leaf(x):
    """``x`` as a tensor whose gradient can be asked for: a differentiable alias when ``x`` already
    records a graph (outer transforms differentiate through), else a fresh leaf."""
    if not isinstance(x, Tensor):
        return x
    if x._requires_grad:
        from ..ops.shape import reshape

        return reshape(x, tuple(x.shape))
    return x.detach().requires_grad_()


def _keep_graph(leaves) -> bool:
    if has_outer(("grad",), skip_innermost=True):
        return True
    return any(isinstance(x, Tensor) and x._requires_grad for x in leaves)


def _detach(t, keep):
    """``t`` cut from every graph (its own level's and the wrapped values'), unless ``keep``: the inputs
    record a graph an outer transform or the caller differentiates through."""
    if keep or not isinstance(t, Tensor):
        return t
    return _deep_detach(t)


def _deep_detach(t):
    if isinstance(t, BatchedTensor):
        return make_batched(_deep_detach(t._value), t._bdim, t._level)
    if isinstance(t, DualTensor):
        return make_dual(_deep_detach(t._primal), None if t._tangent is None else _deep_detach(t._tangent),
                         t._level)
    return t.detach() if t._requires_grad else t


def _argnums_tuple(argnums, n):
    if isinstance(argnums, int):
        if not -n <= argnums < n:
            raise ValueError(f"grad: argnums {argnums} is out of range for {n} positional arguments")
        return (argnums % n,), True
    if not argnums:
        raise ValueError("grad: argnums must be an int or a non-empty tuple of ints")
    out = []
    for a in argnums:
        if not isinstance(a, int) or not -n <= a < n:
            raise ValueError(f"grad: argnums {argnums!r} is out of range for {n} positional arguments")
        out.append(a % n)
    return tuple(out), False


def _vjp_core(func, args, argnums, has_aux, kwargs):
    """``(out, aux, leaves_spec, leaves, keep, diff_args)`` with ``func`` run on fresh leaves."""
    nums, single = _argnums_tuple(argnums, len(args))
    args = list(args)
    specs, all_leaves = [], []
    keep = False
    for i in nums:
        leaves, spec = tree_flatten(args[i])
        keep = keep or _keep_graph(leaves)
        new = [_as_leaf(x) for x in leaves]
        specs.append(spec)
        all_leaves.append(new)
        args[i] = tree_unflatten(new, spec)
    out = func(*args, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError("grad/vjp: has_aux=True needs the function to return a (output, aux) pair")
        out, aux = out
    return out, aux, specs, all_leaves, keep, single


def _grads(outs, leaves, grad_outputs, keep, retain):
    """Gradients of ``outs`` (with ``grad_outputs``) for each group of ``leaves`` (zeros where unused).

    The backward records its own graph (``create_graph``) when someone differentiates it again (``keep``),
    or when another transform is open or a wrapper takes part: the formulas must then run as ops on
    Tensors. A plain ``grad`` takes the engine's first-order path."""
    from ..autograd.engine import grad as _grad
    from ..creation import zeros_like

    flat = [x for group in leaves for x in group]
    tensors = [x for x in flat if isinstance(x, Tensor)]
    live = [(o, g) for o, g in zip(outs, grad_outputs) if isinstance(o, Tensor) and o._requires_grad]
    if live and tensors:
        graph = keep or len(current_levels()) > 1 or any(
            isinstance(t, Wrapper) for t in tensors + [o for o, _ in live] + [g for _, g in live])
        gs = _grad([o for o, _ in live], tensors, [g for _, g in live], retain_graph=retain or graph,
                   create_graph=graph, allow_unused=True)
    else:
        gs = (None,) * len(tensors)
    it = iter(gs)
    res = []
    for group in leaves:
        row = []
        for x in group:
            if isinstance(x, Tensor):
                g = next(it)
                row.append(zeros_like(x) if g is None else g)
            else:
                row.append(None)
        res.append(row)
    return res


def grad_and_value(func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """``(gradient, value)`` of a function returning one element: ``torch.func.grad_and_value``.

    ``argnums`` (an int or a tuple) picks the positional arguments to differentiate; each may be a
    pytree of Tensors, and the gradient has its structure. With ``has_aux`` the function returns
    ``(output, aux)`` and the result is ``(gradient, (value, aux))``.

    >>> import pylucid
    >>> from pylucid.func import grad_and_value
    >>> g, v = grad_and_value(lambda x: (x ** 3).sum())(pylucid.tensor([1.0, 2.0]))
    >>> g, v
    (tensor([ 3., 12.]), tensor(9.))
    """

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        from ..creation import ones_like

        with push_level("grad"), enable_grad():
            out, aux, specs, leaves, keep, single = _vjp_core(func, args, argnums, has_aux, kwargs)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad: the function must return a Tensor, got {type(out).__name__}")
            if out.numel() != 1:
                raise RuntimeError(
                    f"grad: the function must return a one-element tensor, got shape {tuple(out.shape)}; use "
                    "vjp or jacrev for other outputs"
                )
            rows = _grads([out], leaves, [ones_like(out)], keep, False)
        gs = [tree_unflatten([_detach(g, keep) for g in row], spec) for row, spec in zip(rows, specs)]
        g = gs[0] if single else tuple(gs)
        value = _detach(out, keep)
        if has_aux:
            return g, (value, _tree_detach(aux, keep))
        return g, value

    return wrapped


def _tree_detach(tree, keep):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([_detach(x, keep) for x in leaves], spec)


def grad(func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a function returning one element: ``torch.func.grad``.

    ``grad(f)(x)`` equals ``pylucid.autograd.grad(f(x), x)`` but is itself a function, so it nests
    (``grad(grad(f))``) and vectorises (``vmap(grad(f))``: per-sample gradients). With ``has_aux`` the
    result is ``(gradient, aux)``.

    >>> import pylucid
    >>> from pylucid.func import grad
    >>> grad(lambda x: (x ** 3).sum())(pylucid.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    >>> grad(grad(lambda x: x ** 3))(pylucid.tensor(2.0))
    tensor(12.)
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    return wrapped


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(output, vjp_fn)``: ``vjp_fn(cotangents)`` returns the vector-Jacobian products, one per primal.

    >>> import pylucid
    >>> from pylucid.func import vjp
    >>> out, fn = vjp(lambda x: x * x, pylucid.tensor([1.0, 3.0]))
    >>> fn(pylucid.tensor([1.0, 1.0]))
    (tensor([2., 6.]),)
    """
    with push_level("grad"), enable_grad():
        out, aux, specs, leaves, keep, _ = _vjp_core(lambda *a: func(*a), primals, tuple(range(len(primals))),
                                                     has_aux, {})
    out_leaves, ospec = tree_flatten(out)

    def vjp_fn(*cotangents):
        cts = cotangents[0] if len(cotangents) == 1 and not isinstance(out, Tensor) else cotangents
        if isinstance(out, Tensor):
            cts = cts[0] if isinstance(cts, tuple) else cts
        ct_leaves, _ = tree_flatten(cts)
        if len(ct_leaves) != len(out_leaves):
            raise ValueError(f"vjp: expected {len(out_leaves)} cotangents, got {len(ct_leaves)}")
        for o, c in zip(out_leaves, ct_leaves):
            if tuple(o.shape) != tuple(c.shape):
                raise ValueError(f"vjp: cotangent of shape {tuple(c.shape)} for an output of shape {tuple(o.shape)}")
        k = keep or any(isinstance(c, Tensor) and c._requires_grad for c in ct_leaves)
        with push_level("grad"), enable_grad():
            rows = _grads(out_leaves, leaves, ct_leaves, k, True)
        return tuple(tree_unflatten([_detach(g, k) for g in row], spec) for row, spec in zip(rows, specs))

    out_d = tree_unflatten([_detach(o, keep) for o in out_leaves], ospec)
    if has_aux:
        return out_d, vjp_fn, _tree_detach(aux, keep)
    return out_d, vjp_fn


def jacrev(func: Callable[..., Any], argnums: Any = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one ``vjp`` vectorised (``vmap``) over the rows of the identity.

    The result has shape ``output.shape + input.shape`` (tuples for several ``argnums``).

    >>> import pylucid
    >>> from pylucid.func import jacrev
    >>> jacrev(lambda x: x ** 2)(pylucid.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        nums, single = _argnums_tuple(argnums, len(args))

        def f_of(*diff):
            a = list(args)
            for i, d in zip(nums, diff):
                a[i] = d
            return func(*a, **kwargs)

        res = vjp(f_of, *[args[i] for i in nums], has_aux=has_aux)
        out, fn = res[0], res[1]
        out_leaves, ospec = tree_flatten(out)
        in_leaves = [tree_flatten(args[i]) for i in nums]
        per_out = []
        for k, o in enumerate(out_leaves):
            n = o.numel()
            basis = _basis(o, n)

            def one(ct, k=k):
                cts = [ct if j == k else _zeros(ol) for j, ol in enumerate(out_leaves)]
                return fn(tree_unflatten(cts, ospec) if not isinstance(out, Tensor) else cts[0])

            rows = vmap(one, chunk_size=chunk_size)(basis)
            jac_k = []
            for r, (lv_, sp) in zip(rows, in_leaves):
                r_leaves, _ = tree_flatten(r)
                jac_k.append(tree_unflatten([_reshape(j, tuple(o.shape) + tuple(x.shape)) for j, x in
                                             zip(r_leaves, lv_)], sp))
            per_out.append(jac_k[0] if single else tuple(jac_k))
        jac = tree_unflatten(per_out, ospec)
        if has_aux:
            return jac, res[2]
        return jac

    return wrapped


def _basis(o, n):
    from ..creation import eye
    from ..ops.shape import reshape

    return reshape(eye(n, dtype=o.dtype, device=o.device), (n,) + tuple(o.shape))


def _zeros(t):
    from ..creation import zeros_like

    return zeros_like(t)


def _reshape(t, shape):
    from ..ops.shape import reshape

    return reshape(t, shape)


# ------------------------------------------------------------------ forward mode
def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> Any:
    """``(func(*primals), J·tangents)`` by forward mode: a tangent carried through every op.

    ``primals`` and ``tangents`` are tuples of matching (pytrees of) Tensors.

    >>> import pylucid
    >>> from pylucid.func import jvp
    >>> out, t = jvp(lambda x: x.sin() * 2, (pylucid.tensor([0.0]),), (pylucid.tensor([1.0]),))
    >>> out, t
    (tensor([0.]), tensor([2.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise ValueError("jvp: primals and tangents must be tuples (use (x,) for one input)")
    p_leaves, pspec = tree_flatten(primals)
    t_leaves, tspec = tree_flatten(tangents)
    if len(p_leaves) != len(t_leaves):
        raise ValueError(f"jvp: {len(p_leaves)} primals but {len(t_leaves)} tangents")
    for p, t in zip(p_leaves, t_leaves):
        if isinstance(p, Tensor) and tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"jvp: tangent of shape {tuple(t.shape)} for a primal of shape {tuple(p.shape)}")
    with push_level("jvp") as lv:
        duals = [make_dual(p, t, lv.level) if isinstance(p, Tensor) else p for p, t in zip(p_leaves, t_leaves)]
        out = func(*tree_unflatten(duals, pspec))
        aux = None
        if has_aux:
            out, aux = out
        o_leaves, ospec = tree_flatten(out)
        prim, tans = [], []
        for o in o_leaves:
            if isinstance(o, DualTensor) and o._level == lv.level:
                prim.append(o._primal)
                tans.append(o._tangent if o._tangent is not None else _zeros(o._primal))
            else:
                prim.append(o)
                tans.append(_zeros(o))
        if has_aux:
            aux = _undual(aux, lv)
    keep = has_outer(("grad",)) or any(isinstance(x, Tensor) and x._requires_grad for x in p_leaves + t_leaves)
    res = (tree_unflatten([_detach(x, keep) for x in prim], ospec),
           tree_unflatten([_detach(x, keep) for x in tans], ospec))
    return res + (aux,) if has_aux else res


def _undual(tree, lv):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([x._primal if isinstance(x, DualTensor) and x._level == lv.level else x
                           for x in leaves], spec)


def jacfwd(func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable[..., Any]:
    """The Jacobian by forward mode: one ``jvp`` vectorised (``vmap``) over the identity's columns.

    Shape ``output.shape + input.shape``. ``hessian(f) = jacfwd(jacrev(f))``.

    >>> import pylucid
    >>> from pylucid.func import jacfwd
    >>> jacfwd(lambda x: x ** 2)(pylucid.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        nums, single = _argnums_tuple(argnums, len(args))
        from ..ops.shape import movedim

        aux_out = [None]
        per_in = []  # per argnum: (per input leaf, the Jacobian of every output leaf), the input's spec
        ospec = None
        for i in nums:
            leaves, spec = tree_flatten(args[i])
            rows = []
            for li, xl in enumerate(leaves):
                basis = _basis(xl, xl.numel())

                def push(t, i=i, li=li, leaves=leaves, spec=spec):
                    tl = [t if j == li else _zeros(v) for j, v in enumerate(leaves)]
                    prim = [args[j] for j in nums]
                    tans = [tree_unflatten(tl, spec) if j == i else _tree_zeros(args[j]) for j in nums]

                    def f_of(*diff):
                        a = list(args)
                        for j, d in zip(nums, diff):
                            a[j] = d
                        return func(*a, **kwargs)

                    res = jvp(f_of, tuple(prim), tuple(tans), has_aux=has_aux)
                    if has_aux:
                        aux_out[0] = res[2]
                    return res[1]

                outs = vmap(push, randomness=randomness)(basis)
                o_leaves, ospec = tree_flatten(outs)
                # a batch of n tangents -> output.shape + input.shape
                rows.append([_reshape(movedim(o, 0, -1), tuple(o.shape[1:]) + tuple(xl.shape)) for o in o_leaves])
            per_in.append((rows, spec))
        n_out = len(per_in[0][0][0])
        jac_out = []
        for k in range(n_out):
            per_arg = [tree_unflatten([r[k] for r in rows], spec) for rows, spec in per_in]
            jac_out.append(per_arg[0] if single else tuple(per_arg))
        jac = tree_unflatten(jac_out, ospec)
        return (jac, aux_out[0]) if has_aux else jac

    return wrapped


def _tree_zeros(tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([_zeros(x) if isinstance(x, Tensor) else x for x in leaves], spec)


def hessian(func: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function: ``jacfwd(jacrev(func, argnums), argnums)``.

    >>> import pylucid
    >>> from pylucid.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(pylucid.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


def linearize(func: Callable[..., Any], *primals: Any) -> Any:
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product at ``primals``.

    Each call of ``jvp_fn`` runs forward mode at the fixed primals (PyTorch traces the linearised
    graph once; here the primal computation is repeated per call).

    >>> import pylucid
    >>> from pylucid.func import linearize
    >>> out, fn = linearize(lambda x: x.exp(), pylucid.tensor([0.0]))
    >>> fn(pylucid.tensor([2.0]))
    tensor([2.])
    """
    out, _ = jvp(func, tuple(primals), tuple(_tree_zeros(p) for p in primals))

    def jvp_fn(*tangents):
        return jvp(func, tuple(primals), tuple(tangents))[1]

    return out, jvp_fn


