"""``odeint_adjoint``: gradients of an ODE solution by the adjoint method (torchdiffeq's algorithm).

The forward pass solves the ODE without recording a graph. The backward pass
integrates, from each output time to the previous one, the augmented system

.. math::

    \\dot y = f(t, y),\\quad \\dot a = -a^T \\partial f / \\partial y,\\quad
    \\dot g_\\theta = -a^T \\partial f / \\partial \\theta,\\quad \\dot g_t = -a^T \\partial f / \\partial t

backwards in time, from ``y(t_N)`` and ``a(t_N) = dL/dy(t_N)``; the vector-Jacobian products come from one
backward pass through ``func`` per evaluation. At each output time the incoming gradient is added to ``a``
and the state is reset to the forward solution. Memory is that of one step of the solver, whatever the
number of steps.
"""

from __future__ import annotations

from .. import creation, ops
from .._tensor import Tensor
from ..autograd import enable_grad, grad, no_grad
from ..autograd.function import Function
from ..nn.module import Module
from ._odeint import Problem
from ._solvers import Norm, solve

__all__ = ["odeint_adjoint"]


class _Adjoint(Function):
    @staticmethod
    def forward(ctx, p, y0_flat, t, *params):
        ctx.p = p
        out = p.solve(y0_flat)
        if p.event is None:
            y = ops.stack(out)
            ctx.save_for_backward(t, y, *params)
            ctx.event_t = None
            return y
        te, states = out
        y = ops.stack(states)
        ctx.save_for_backward(t, y, *params)
        ctx.event_t = te
        event_t = creation.tensor(te, dtype=t.dtype, device=t.device)
        ctx.mark_non_differentiable(event_t)
        return event_t, y

    @staticmethod
    def backward(ctx, *grads):
        p = ctx.p
        t, y, *params = ctx.saved_tensors
        grad_y = grads[0] if ctx.event_t is None else grads[1]
        t_vals = p.t_vals if ctx.event_t is None else [p.t_vals[0], ctx.event_t]
        t_requires_grad = t.requires_grad
        with no_grad():
            n = p.n
            if grad_y is None:
                grad_y = creation.zeros_like(y)
            grad_y = grad_y.reshape(y.shape)
            sizes = [q.numel() for q in params]
            aug = ops.cat([creation.zeros(1, dtype=y.dtype, device=y.device), y[-1], grad_y[-1],
                           *[creation.zeros(s, dtype=y.dtype, device=y.device) for s in sizes]])
            rhs = _augmented_dynamics(p, params, sizes, t_requires_grad)
            segs = [(0, 1)] + [(1 + a, 1 + b) for a, b in p.norm.segments] + \
                   [(1 + n + a, 1 + n + b) for a, b in p.norm.segments]
            off = 1 + 2 * n
            for s in sizes:
                if not p.adjoint_seminorm:
                    segs.append((off, off + s))
                off += s
            norm = Norm(off, segs, user=p.adjoint_norm,
                        split=(lambda v: _split_aug(v, n, params, sizes)) if p.adjoint_norm else None)
            time_vjps = [None] * len(t_vals) if t_requires_grad else None
            for i in range(len(t_vals) - 1, 0, -1):
                if t_requires_grad:
                    f_i = p.rhs(t_vals[i], y[i])
                    dldt = (f_i * grad_y[i]).sum()
                    aug = ops.cat([aug[:1] - dldt, aug[1:]])
                    time_vjps[i] = dldt
                aug = solve(rhs, aug, [t_vals[i], t_vals[i - 1]], method=p.adjoint_method, rtol=p.adjoint_rtol,
                            atol=p.adjoint_atol, options=p.adjoint_options, norm=norm)[-1]
                aug = ops.cat([aug[:1], y[i - 1], aug[1 + n:1 + 2 * n] + grad_y[i - 1], aug[1 + 2 * n:]])
            adj_y = aug[1 + n:1 + 2 * n]
            adj_params = []
            off = 1 + 2 * n
            for q, s in zip(params, sizes):
                adj_params.append(aug[off:off + s].reshape(q.shape))
                off += s
            t_grad = None
            if t_requires_grad:
                time_vjps[0] = aug[0]
                if ctx.event_t is not None:
                    t_grad = ops.cat([aug[:1], creation.zeros(t.shape[0] - 1, dtype=t.dtype, device=t.device)])
                else:
                    t_grad = ops.stack([v.reshape(()) for v in time_vjps]).to(t.dtype)
        return (None, adj_y, t_grad, *adj_params)


def _split_aug(v, n, params, sizes):
    out = [v[0], v[1:1 + n], v[1 + n:1 + 2 * n]]
    off = 1 + 2 * n
    for q, s in zip(params, sizes):
        out.append(v[off:off + s].reshape(q.shape))
        off += s
    return tuple(out)


def _augmented_dynamics(p, params, sizes, t_requires_grad):
    n = p.n
    params = tuple(params)

    def rhs(t, a):
        y, adj = a[1:1 + n], a[1 + n:1 + 2 * n]
        create = a.requires_grad  # differentiated again (the Jacobian of an implicit method)
        with enable_grad():
            y_ = y if create else y.detach().requires_grad_(True)
            if t_requires_grad:
                t_ = p.time(t).detach().requires_grad_(True) if not isinstance(t, Tensor) or not t.requires_grad \
                    else t
                inputs = (t_, y_, *params)
            else:
                t_ = t
                inputs = (y_, *params)
            f = p.rhs(t_, y_)
            gs = grad(f, inputs, -adj, allow_unused=True, create_graph=create, retain_graph=create)
        if t_requires_grad:
            vt, vy, vps = gs[0], gs[1], gs[2:]
            vt = creation.zeros(1, dtype=a.dtype, device=a.device) if vt is None else vt.reshape(1).to(a.dtype)
        else:
            vt, vy, vps = creation.zeros(1, dtype=a.dtype, device=a.device), gs[0], gs[1:]
        vy = creation.zeros_like(y) if vy is None else vy
        vps = [creation.zeros(s, dtype=a.dtype, device=a.device) if g is None else g.reshape(-1)
               for g, s in zip(vps, sizes)]
        return ops.cat([vt, f if create else f.detach(), vy, *vps])

    return rhs


def odeint_adjoint(func, y0, t, *, rtol=1e-7, atol=1e-9, method=None, options=None, event_fn=None,
                   adjoint_rtol=None, adjoint_atol=None, adjoint_method=None, adjoint_options=None,
                   adjoint_params=None):
    """:func:`~pylucid.diffeq.odeint` with gradients from the adjoint system (torchdiffeq's ``odeint_adjoint``).

    Gradients reach ``y0``, ``t`` and ``adjoint_params`` (by default the
    parameters of ``func``, which must then be an ``nn.Module``; pass
    ``adjoint_params=()`` for a plain function). The backward pass solves
    with ``adjoint_rtol`` / ``adjoint_atol`` / ``adjoint_method`` /
    ``adjoint_options`` (defaulting to the forward ones); the default adjoint
    norm is the largest RMS over time, state, adjoint and each parameter,
    ``adjoint_options=dict(norm="seminorm")`` leaves the parameters out.

    >>> import pylucid
    >>> from pylucid.diffeq import odeint_adjoint
    >>> k = pylucid.tensor(2.0, requires_grad=True)
    >>> y0 = pylucid.tensor([1.0], requires_grad=True)
    >>> y = odeint_adjoint(lambda t, y: -k * y, y0, pylucid.tensor([0.0, 1.0]), adjoint_params=(k,))
    >>> y[-1].sum().backward()
    >>> round(y0.grad.item(), 4), round(k.grad.item(), 4)  # exp(-2) and -exp(-2)
    (0.1353, -0.1353)
    """
    if adjoint_params is None and not isinstance(func, Module):
        raise ValueError("odeint_adjoint: func must be an nn.Module to find the adjoint parameters; otherwise pass "
                         "them as adjoint_params=(...) (adjoint_params=() when there are none)")
    if adjoint_rtol is None:
        adjoint_rtol = rtol
    if adjoint_atol is None:
        adjoint_atol = atol
    if adjoint_method is None:
        adjoint_method = method
    if adjoint_method != method and options is not None and adjoint_options is None:
        raise ValueError("odeint_adjoint: with adjoint_method != method, pass adjoint_options as well (options "
                         "cannot be carried over)")
    if adjoint_options is None:
        adjoint_options = {k: v for k, v in options.items() if k != "norm"} if options is not None else {}
    else:
        adjoint_options = dict(adjoint_options)
    params = tuple(func.parameters()) if adjoint_params is None else tuple(adjoint_params)
    params = tuple(q for q in params if q.requires_grad)

    p = Problem(func, y0, t, rtol, atol, method, options, event_fn, who="odeint_adjoint")
    p.adjoint_method = "dopri5" if adjoint_method is None else adjoint_method
    p.adjoint_rtol = p._tol(adjoint_rtol, "adjoint_rtol")
    p.adjoint_atol = p._tol(adjoint_atol, "adjoint_atol")
    if not isinstance(p.adjoint_rtol, float) or not isinstance(p.adjoint_atol, float):
        # per-component tolerances of a tuple state, extended over the augmented state: the largest applies
        p.adjoint_rtol = p.adjoint_rtol if isinstance(p.adjoint_rtol, float) else float(p.adjoint_rtol.min())
        p.adjoint_atol = p.adjoint_atol if isinstance(p.adjoint_atol, float) else float(p.adjoint_atol.min())
    norm_opt = adjoint_options.pop("norm", None)
    p.adjoint_seminorm = norm_opt == "seminorm"
    p.adjoint_norm = norm_opt if callable(norm_opt) else None
    p.adjoint_options = adjoint_options

    out = _Adjoint.apply(p, p.flat, t, *params)
    if event_fn is None:
        return p.unflat_solution(out)
    event_t, y = out
    return event_t, p.unflat_solution(y)
