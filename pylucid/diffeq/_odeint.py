"""``odeint`` and ``odeint_event``: torchdiffeq's interface on pylucid tensors."""

from __future__ import annotations

import math

from .. import creation, ops
from .._tensor import Tensor
from ..autograd import enable_grad, is_grad_enabled, no_grad
from ..autograd.function import Function
from ._solvers import IMPLICIT, METHODS, Norm, check_options, solve

__all__ = ["odeint", "odeint_event"]


class Problem:
    """The user's problem in flat form: the state packed into one 1-D tensor, the grid as floats.

    ``rhs(t, y)`` takes a float or 0-d tensor time and the flat state, calls
    the user's ``func`` with the state as given (a tensor or a tuple) and
    returns the flat derivative.
    """

    def __init__(self, func, y0, t, rtol, atol, method, options, event_fn, who="odeint"):
        self.func, self.who = func, who
        self.is_tuple = not isinstance(y0, Tensor)
        if self.is_tuple:
            if not isinstance(y0, tuple) or not all(isinstance(v, Tensor) for v in y0):
                raise TypeError(f"{who}: y0 must be a Tensor or a tuple of Tensors, got {type(y0).__name__}")
            self.shapes = [tuple(v.shape) for v in y0]
            self.y0 = ops.cat([v.reshape(-1) for v in y0])
        else:
            self.shapes = None
            self.y0 = y0
        if not (self.y0.dtype.is_floating_point or self.y0.dtype.is_complex):
            raise TypeError(f"{who}: y0 must be floating point or complex, got {self.y0.dtype}")
        # times (and tolerances) are real: the real counterpart of a complex state's dtype
        self.rdtype = self.y0.dtype.to_real() if self.y0.dtype.is_complex else self.y0.dtype
        self.shape = tuple(y0.shape) if not self.is_tuple else None
        self.flat = self.y0.reshape(-1) if not self.is_tuple else self.y0
        self.n = self.flat.shape[0]
        sizes = [math.prod(s) for s in self.shapes] if self.is_tuple else [self.n]
        self.offsets = [0]
        for s in sizes:
            self.offsets.append(self.offsets[-1] + s)
        if not isinstance(t, Tensor):
            raise TypeError(f"{who}: t must be a Tensor, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{who}: t must be a floating point Tensor but is {t.dtype}")
        if t.ndim != 1:
            raise ValueError(f"{who}: t must be one dimensional, got shape {tuple(t.shape)}")
        self.t = t
        self.t_vals = [float(v) for v in t.detach().tolist()]
        if len(self.t_vals) > 1:
            inc = [b > a for a, b in zip(self.t_vals[:-1], self.t_vals[1:])]
            dec = [b < a for a, b in zip(self.t_vals[:-1], self.t_vals[1:])]
            if not (all(inc) or all(dec)):
                raise ValueError(f"{who}: t must be strictly increasing or decreasing")
        self.method = "dopri5" if method is None else method
        if self.method not in METHODS:
            raise ValueError(f'{who}: invalid method "{self.method}"; must be one of {", ".join(METHODS)}')
        self.options = dict(options or {})
        check_options(self.method, self.options)
        if self.y0.dtype.is_complex and self.method in IMPLICIT:
            raise ValueError(f"{who}: the implicit methods take real states; split a complex state into real and "
                             f"imaginary parts")
        self.rtol = self._tol(rtol, "rtol")
        self.atol = self._tol(atol, "atol")
        segments = [(a, b) for a, b in zip(self.offsets[:-1], self.offsets[1:])]
        user_norm = self.options.get("norm")
        self.norm = Norm(self.n, segments, user=user_norm, split=self.unflat_state if user_norm else None)
        self.device = self.y0.device
        self.event = None
        if event_fn is not None:
            if len(self.t_vals) != 2:
                raise ValueError(f"{who}: event handling needs len(t) == 2 (t[1] only gives the direction), "
                                 f"got len(t)={len(self.t_vals)}")
            self.event_fn = event_fn
            with no_grad():
                s0 = event_fn(self.time(self.t_vals[0]), self.unflat_state(self.flat))
                self.event_signs = ops.sign(s0 if isinstance(s0, Tensor) else creation.tensor(s0)).detach()
            self.event = self._event_float

    @no_grad()
    def _event_float(self, t, y) -> float:
        return self.event_value(t, y).item()

    def _tol(self, tol, name):
        if isinstance(tol, Tensor):
            if tol.requires_grad:
                raise ValueError(f"{self.who}: {name} cannot require gradient")
            return float(tol.item()) if tol.numel() == 1 else tol.to(self.rdtype).reshape(-1)
        if isinstance(tol, (tuple, list)):
            if not self.is_tuple or len(tol) != len(self.shapes):
                raise ValueError(f"{self.who}: a tuple {name} needs a tuple y0 of the same length")
            parts = [creation.full((math.prod(s),), float(v), dtype=self.rdtype, device=self.y0.device)
                     for v, s in zip(tol, self.shapes)]
            return ops.cat(parts)
        return float(tol)

    def time(self, t):
        return t if isinstance(t, Tensor) else creation.tensor(t, dtype=self.rdtype, device=self.device)

    def unflat_state(self, y):
        if not self.is_tuple:
            return y if self.shape == tuple(y.shape) else y.reshape(self.shape)
        return tuple(y[a:b].reshape(s) for a, b, s in zip(self.offsets[:-1], self.offsets[1:], self.shapes))

    def flatten_derivative(self, out):
        if not self.is_tuple:
            if not isinstance(out, Tensor):
                raise TypeError(f"{self.who}: func must return a Tensor, got {type(out).__name__}")
            return out.reshape(-1)
        if not isinstance(out, (tuple, list)) or len(out) != len(self.shapes):
            raise TypeError(f"{self.who}: func must return a tuple of {len(self.shapes)} tensors for a tuple state")
        return ops.cat([o.reshape(-1) for o in out])

    def rhs(self, t, y):
        return self.flatten_derivative(self.func(self.time(t), self.unflat_state(y)))

    def event_value(self, t, y):
        """The combined event function: every event function made positive at t0, then their minimum."""
        v = self.event_fn(self.time(t), self.unflat_state(y))
        return (v * self.event_signs).min()

    def solve(self, y0_flat, t_vals=None):
        out = solve(self.rhs, y0_flat, self.t_vals if t_vals is None else t_vals, method=self.method,
                    rtol=self.rtol, atol=self.atol, options=self.options, norm=self.norm, event=self.event)
        return out

    def solution(self, states):
        """Stack flat states into ``(len, *shape)`` (or a tuple of them)."""
        return self.unflat_solution(ops.stack(states))

    def unflat_solution(self, sol):
        """``(len, n)`` flat solutions as ``(len, *shape)`` (or a tuple of them)."""
        k = sol.shape[0]
        if not self.is_tuple:
            return sol.reshape((k, *self.shape))
        return tuple(sol[:, a:b].reshape((k, *s)) for a, b, s in zip(self.offsets[:-1], self.offsets[1:],
                                                                       self.shapes))


def odeint(func, y0, t, *, rtol=1e-7, atol=1e-9, method=None, options=None, event_fn=None):
    r"""Solve the initial value problem :math:`dy/dt = f(t, y),\ y(t_0) = y_0` at the times ``t``.

    As ``torchdiffeq.odeint``: ``func(t, y)`` returns ``dy/dt`` (``y`` a real
    or complex tensor of any shape or a tuple of tensors, ``t`` a 0-d real
    tensor; the implicit methods take real states only); ``t`` is a
    strictly increasing or decreasing 1-D tensor, ``t[0]`` the initial time.
    The result has shape ``(len(t), *y0.shape)`` (a tuple for a tuple state)
    and is differentiable by backpropagating through the solver's operations
    (use :func:`odeint_adjoint` for O(1) memory in the number of steps); the
    gradient with respect to ``t`` is the first-order sensitivity
    ``f(t_i, y(t_i))`` at each output time (``t[0]`` through ``y0``).

    Methods (``method=``):

    - adaptive, error-controlled: ``dopri5`` (default), ``dopri8``,
      ``tsit5``, ``bosh3``, ``adaptive_heun``, ``fehlberg2``; the error is the
      RMS of ``err / (atol + rtol max(|y0|, |y1|))`` (the largest over the
      components of a tuple), the next step ``dt * min(ifactor, max(safety /
      ratio^(1/order), dfactor))``. Options: ``first_step``, ``safety=0.9``,
      ``ifactor=10``, ``dfactor=0.2``, ``min_step``, ``max_step``,
      ``max_num_steps``, ``norm``. Between steps the solution is the quartic
      dense output (4th order for dopri5), so ``t`` can be any grid.
    - fixed grid: ``euler``, ``midpoint``, ``heun2``, ``heun3``, ``rk4`` (the
      3/8 rule) on the grid ``t`` or, with ``options=dict(step_size=h)``, a
      grid of step ``h``; ``interp='linear'`` (default) or ``'cubic'`` between
      grid points.
    - implicit (fixed grid, for stiff problems): ``implicit_euler``,
      ``radau`` (Radau IIA, order 5), ``gauss_legendre`` / ``gauss_legendre4``
      / ``gauss_legendre6``, ``sdirk2``, ``sdirk3`` (``sdirk``), ``trbdf2``;
      the stages are solved by Newton's method with the Jacobian from
      autograd (options ``newton_tol=1e-3`` in the ``atol + rtol|y|`` scaled
      norm, ``newton_max_iters=30``).

    With ``event_fn(t, y)`` (a tensor; each element an event) and ``len(t) ==
    2`` (``t[1]`` only gives the direction), the integration runs until the
    first sign change of an event, located by bisection on the dense output
    to ``atol``; the result is ``(event_t, solution at [t0, event_t])``.

    >>> import pylucid
    >>> from pylucid.diffeq import odeint
    >>> y = odeint(lambda t, y: -y, pylucid.tensor([1.0]), pylucid.tensor([0.0, 1.0]))
    >>> round(y[-1].item(), 5)
    0.36788
    """
    p = Problem(func, y0, t, rtol, atol, method, options, event_fn)
    y0f = p.flat
    # the solver's times are floats; the sensitivities to t enter here, exactly to first order: moving an output
    # time t_i moves y(t_i) by f(t_i, y(t_i)) dt_i, and starting at t0 + d is starting at t0 from y0 - f(t0, y0) d
    t_grad = event_fn is None and t.requires_grad and is_grad_enabled()
    if t_grad:
        y0f = y0f - (t[0] - t[0].detach()).to(y0f.dtype) * p.rhs(p.t_vals[0], y0f).detach()
    out = p.solve(y0f)
    if t_grad:
        out = [o + (t[i] - t[i].detach()).to(o.dtype) * p.rhs(p.t_vals[i], o).detach() for i, o in enumerate(out)]
    if event_fn is None:
        return p.solution(out)
    te, states = out
    return creation.tensor(te, dtype=t.dtype, device=t.device), p.solution(states)


class _EventGradient(Function):
    """Differentiate the event time implicitly: ``g(t_e, y(t_e)) = 0`` gives ``dt_e = -(dg/dy dy) / (dg/dt)``."""

    @staticmethod
    def forward(ctx, p, event_t, state_t):
        ctx.p = p
        ctx.save_for_backward(event_t, state_t)
        return event_t.detach().clone(), state_t.detach().clone()

    @staticmethod
    def backward(ctx, grad_t, grad_state):
        p = ctx.p
        event_t, state_t = ctx.saved_tensors
        te = event_t.detach().clone().requires_grad_(True)
        ye = state_t.detach().clone().requires_grad_(True)
        with enable_grad():
            f_val = p.rhs(te, ye).detach()
            c = p.event_value(te, ye)
            par_dt, dstate = _grads(c, (te, ye))
        dcdt = par_dt + (dstate * f_val).sum()
        if grad_t is None:
            grad_t = creation.zeros_like(event_t)
        if grad_state is None:
            grad_state = creation.zeros_like(state_t)
        grad_t = grad_t + (grad_state * f_val).sum()
        dstate = dstate * (-grad_t / (dcdt + 1e-12))
        return None, None, grad_state + dstate


def _grads(out, inputs):
    from ..autograd import grad

    gs = grad(out, inputs, allow_unused=True)
    return tuple(creation.zeros_like(x) if g is None else g for g, x in zip(gs, inputs))


def odeint_event(func, y0, t0, *, event_fn, reverse_time=False, odeint_interface=odeint, **kwargs):
    """Solve until ``event_fn(t, y)`` changes sign; the event time is differentiable (implicit function theorem).

    As ``torchdiffeq.odeint_event``: returns ``(event_t, solution)`` with the
    solution at ``[t0, event_t]``; ``reverse_time=True`` integrates backwards;
    ``odeint_interface`` is :func:`odeint` or :func:`odeint_adjoint`; the
    other keywords go to it.

    >>> import pylucid
    >>> from pylucid.diffeq import odeint_event
    >>> te, y = odeint_event(lambda t, y: pylucid.ones_like(y), pylucid.tensor([0.0]), pylucid.tensor(0.0),
    ...                      event_fn=lambda t, y: y - 0.5)
    >>> round(te.item(), 4)
    0.5
    """
    t0f = t0.reshape(-1)
    t = ops.cat([t0f, t0f.detach() + (-1.0 if reverse_time else 1.0)])
    event_t, solution = odeint_interface(func, y0, t, event_fn=event_fn, **kwargs)
    p = Problem(func, y0, t, 0.0, 0.0, None, None, event_fn, who="odeint_event")
    if p.is_tuple:
        state_t = ops.cat([s[-1].reshape(-1) for s in solution])
    else:
        state_t = solution[-1].reshape(-1)
    event_t, state_t = _EventGradient.apply(p, event_t, state_t)
    if p.is_tuple:
        parts = p.unflat_state(state_t)
        solution = tuple(ops.cat([s[:-1], st.unsqueeze(0)]) for s, st in zip(solution, parts))
    else:
        solution = ops.cat([solution[:-1], state_t.reshape(p.shape).unsqueeze(0)])
    return event_t, solution

