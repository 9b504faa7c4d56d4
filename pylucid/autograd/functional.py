"""``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp``, ``vhp`` (PyTorch's ``autograd.functional``)."""

from __future__ import annotations

from .._tensor import Tensor
from .engine import grad as _grad


def _tup(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _prep(inputs, create_graph):
    out = []
    for x in _tup(inputs):
        x2 = x.detach() if not create_graph else x
        if not x2._requires_grad:
            x2 = x.detach().requires_grad_(True)
        out.append(x2)
    return tuple(out)


def _zeros_like_or(g, x):
    from ..creation import zeros_like

    return zeros_like(x) if g is None else g


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), v^T J)``."""
    from ..autograd.grad_mode import enable_grad

    single = isinstance(inputs, Tensor)
    xs = _prep(inputs, create_graph)
    with enable_grad():
        out = func(*xs)
        outs = _tup(out)
        if v is None:
            if any(o.numel() != 1 for o in outs):
                raise RuntimeError("vjp: v can be omitted only when the function returns scalar tensors")
            from ..creation import ones_like

            vs = tuple(ones_like(o) for o in outs)
        else:
            vs = _tup(v)
        live = [(o, w) for o, w in zip(outs, vs) if o._requires_grad]
        if live:
            gs = _grad([o for o, _ in live], xs, [w for _, w in live], create_graph=create_graph, allow_unused=True)
        else:
            gs = (None,) * len(xs)
    gs = tuple(_zeros_like_or(g, x) for g, x in zip(gs, xs))
    if not create_graph:
        out = out.detach() if isinstance(out, Tensor) else tuple(o.detach() for o in outs)
        gs = tuple(g.detach() for g in gs)
    return out, (gs[0] if single else gs)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), J v)`` via the double-vjp trick (two reverse passes)."""
    from ..autograd.grad_mode import enable_grad
    from ..creation import ones_like, zeros_like

    xs = _prep(inputs, create_graph)
    vs = _tup(v) if v is not None else tuple(ones_like(x) for x in xs)
    with enable_grad():
        out = func(*xs)
        outs = _tup(out)
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        live = [(o, u) for o, u in zip(outs, us) if o._requires_grad]
        if not live:
            res = tuple(zeros_like(o) for o in outs)
        else:
            gs = _grad([o for o, _ in live], xs, [u for _, u in live], create_graph=True, allow_unused=True)
            pairs = [(g, w) for g, w in zip(gs, vs) if g is not None and g._requires_grad]
            if pairs:
                res = _grad([g for g, _ in pairs], us, [w for _, w in pairs], create_graph=create_graph,
                            allow_unused=True)
                res = tuple(_zeros_like_or(r, o) for r, o in zip(res, outs))
            else:
                res = tuple(zeros_like(o) for o in outs)
    if not create_graph:
        res = tuple(r.detach() for r in res)
        out = out.detach() if isinstance(out, Tensor) else tuple(o.detach() for o in outs)
    return out, (res[0] if isinstance(out, Tensor) else res)


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``; shape ``out.shape + in.shape`` (nested tuples for several)."""
    from ..autograd.grad_mode import enable_grad
    from ..creation import zeros_like
    from ..ops.shape import reshape, stack

    single_in = isinstance(inputs, Tensor)
    xs = _prep(inputs, create_graph)
    with enable_grad():
        out = func(*xs)
        single_out = isinstance(out, Tensor)
        outs = _tup(out)
        jac = []
        for o in outs:
            rows = [[] for _ in xs]
            n = o.numel()
            for j in range(n):
                go = zeros_like(o)
                go._data.reshape(-1)[j] = 1
                if o._requires_grad:
                    gs = _grad(o, xs, go, retain_graph=True, create_graph=create_graph, allow_unused=True)
                else:
                    gs = (None,) * len(xs)
                for k, (g, x) in enumerate(zip(gs, xs)):
                    rows[k].append(_zeros_like_or(g, x))
            per_in = []
            for k, x in enumerate(xs):
                if n:
                    j_k = reshape(stack(rows[k]), tuple(o.shape) + tuple(x.shape))
                else:
                    from ..creation import zeros

                    j_k = zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype, device=x.device)
                per_in.append(j_k if create_graph else j_k.detach())
            jac.append(per_in[0] if single_in else tuple(per_in))
    return jac[0] if single_out else tuple(jac)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``."""
    single = isinstance(inputs, Tensor)

    def grad_fn(*xs):
        from ..autograd.grad_mode import enable_grad

        with enable_grad():
            out = func(*xs)
            if out.numel() != 1:
                raise RuntimeError("hessian: func must return a single-element tensor")
            gs = _grad(out, xs, create_graph=True, allow_unused=True)
            gs = tuple(_zeros_like_or(g, x) for g, x in zip(gs, xs))
        return gs[0] if single else gs

    return jacobian(grad_fn, inputs, create_graph=create_graph)


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """Return ``(func(inputs), v^T H)``."""
    from ..autograd.grad_mode import enable_grad

    single = isinstance(inputs, Tensor)
    xs = _prep(inputs, create_graph)
    vs = _tup(v)
    with enable_grad():
        out = func(*xs)
        gs = _grad(out, xs, create_graph=True, allow_unused=True)
        gs = tuple(_zeros_like_or(g, x) for g, x in zip(gs, xs))
        pairs = [(g, w) for g, w in zip(gs, vs) if g._requires_grad]
        res = _grad([g for g, _ in pairs], xs, [w for _, w in pairs], create_graph=create_graph, allow_unused=True)
        res = tuple(_zeros_like_or(r, x) for r, x in zip(res, xs))
    if not create_graph:
        res = tuple(r.detach() for r in res)
        out = out.detach()
    return out, (res[0] if single else res)


hvp = vhp  # the Hessian is symmetric for the twice-differentiable functions these are meant for
