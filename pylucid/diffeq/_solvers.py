"""The integrators behind ``odeint``: one explicit Runge-Kutta stepper, one implicit one, two drivers.

Everything here works on *flat* states (one 1-D tensor; tuples are packed by
the caller) and Python-float times in the direction of integration being
increasing (``solve`` flips a decreasing grid by ``t -> -t``, ``f -> -f``).
Times and step sizes are Python floats (float64), the state keeps its dtype
(torchdiffeq's mixed precision): the controller's bookkeeping costs no tensor
ops, and a step is the stage evaluations plus a handful of vector updates.

- ``_explicit_step``: any explicit tableau (``_tableaus.Explicit``);
- ``_ImplicitStep``: any implicit tableau, stages solved by Newton's method
  with the Jacobian of ``f`` from ``pylucid.autograd.functional.jacobian``
  (diagonally implicit tableaus stage by stage, fully implicit ones as one
  coupled system);
- ``_Adaptive``: error-controlled stepping with torchdiffeq's controller and
  its quartic dense output;
- ``_fixed``: a fixed grid (``t`` itself or ``step_size``), linear or cubic
  Hermite interpolation between grid points.
"""

from __future__ import annotations

import math
import warnings

from .. import creation, ops
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..autograd.functional import jacobian
from . import _tableaus as tab

ADAPTIVE = tuple(tab.EXPLICIT_ADAPTIVE)
FIXED = tuple(tab.EXPLICIT_FIXED)
IMPLICIT = tuple(tab.IMPLICIT)
METHODS = (*ADAPTIVE, *FIXED, *IMPLICIT)

_ADAPTIVE_OPTIONS = {"first_step", "safety", "ifactor", "dfactor", "min_step", "max_step", "max_num_steps", "norm"}
_FIXED_OPTIONS = {"step_size", "grid_constructor", "interp", "perturb", "norm"}
_IMPLICIT_OPTIONS = _FIXED_OPTIONS | {"newton_tol", "newton_max_iters"}


def _lincomb(base, dt, coeffs, ks):
    """``base + dt * sum(c_j k_j)`` skipping zero weights (``base`` may be None: just the sum)."""
    acc = None
    for c, k in zip(coeffs, ks):
        if c != 0.0:
            term = k * c
            acc = term if acc is None else acc + term
    if acc is None:
        return base if base is not None else ks[0] * 0.0
    acc = acc * dt
    return acc if base is None else base + acc


# ---------------------------------------------------------------- norms
class Norm:
    """The step controller's norm: the largest RMS over the state's segments (torchdiffeq's mixed norm).

    ``segments`` are ``(start, stop)`` slices of the flat state (one for a
    tensor state, one per component of a tuple); ``user`` is a callable given
    the state as the user sees it (``split`` unpacks it), returning a number.
    """

    def __init__(self, n: int, segments=None, user=None, split=None):
        self.user, self.split = user, split
        self.segments = segments if segments else [(0, n)]
        self.n = n
        self._proj = None

    def __call__(self, x: Tensor) -> float:
        if self.user is not None:
            v = self.user(self.split(x) if self.split is not None else x)
            return float(v.item() if isinstance(v, Tensor) else v)
        sq = x * x if not x.dtype.is_complex else x.abs().square()
        if len(self.segments) == 1:
            a, b = self.segments[0]
            s = sq if (a, b) == (0, self.n) else sq[a:b]
            return math.sqrt(s.mean().item()) if b > a else 0.0
        if len(self.segments) * self.n <= 1 << 20:
            if self._proj is None or self._proj.device != sq.device or self._proj.dtype != sq.dtype:
                # one matmul gives every segment's mean square
                rows = []
                for a, b in self.segments:
                    r = [0.0] * self.n
                    for i in range(a, b):
                        r[i] = 1.0 / (b - a)
                    rows.append(r)
                self._proj = creation.tensor(rows, dtype=sq.dtype, device=sq.device)
            return math.sqrt(max((self._proj @ sq).max().item(), 0.0))
        return math.sqrt(max(sq[a:b].mean().item() for a, b in self.segments if b > a))


# ---------------------------------------------------------------- explicit stepping
def _explicit_step(f, t0, y0, f0, dt, t1, tb):
    """One step of tableau ``tb``: ``(y1, f1, error, ks)``; ``f1`` is the last stage (the next step's ``f0``)."""
    ks = [f0]
    yi = y0
    n = len(tb.c)
    for i in range(1, n):
        ci = tb.c[i]
        ti = t1 if ci == 1.0 else t0 + ci * dt
        yi = _lincomb(y0, dt, tb.a[i], ks)
        ks.append(f(ti, yi))
    y1 = yi if tb.fsal else _lincomb(y0, dt, tb.b, ks)
    err = _lincomb(None, dt, tb.e, ks) if tb.e is not None else None
    return y1, ks[-1], err, ks


def _fixed_explicit(tb):
    def step(f, t0, dt, t1, y0):
        f0 = f(t0, y0)
        if len(tb.c) == 1:
            return y0 + f0 * dt, f0
        ks = [f0]
        for i in range(1, len(tb.c)):
            ci = tb.c[i]
            ks.append(f(t1 if ci == 1.0 else t0 + ci * dt, _lincomb(y0, dt, tb.a[i], ks)))
        return _lincomb(y0, dt, tb.b, ks), f0

    return step


# ---------------------------------------------------------------- implicit stepping
def _solve_small(A, b):
    """Solve the small dense system ``A x = b`` of a tableau's constants (Gaussian elimination, partial pivoting)."""
    n = len(b)
    M = [list(map(float, A[i])) + [float(b[i])] for i in range(n)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(M[r][col]))
        M[col], M[piv] = M[piv], M[col]
        for r in range(n):
            if r != col:
                factor = M[r][col] / M[col][col]
                M[r] = [x - factor * y for x, y in zip(M[r], M[col])]
    return tuple(M[i][n] / M[i][i] for i in range(n))


class _ImplicitStep:
    """Newton's method on the stage equations of an implicit tableau.

    Diagonally implicit tableaus solve ``Y_i = y0 + dt sum_{j<i} a_ij K_j + dt a_ii f(t_i, Y_i)`` stage by
    stage (``M = I - dt a_ii J``); fully implicit ones solve for all stage increments ``Z = dt (A kron I) F(Z)``
    at once (``M = I - dt A kron J``) and take ``y1 = y0 + (b^T A^-1) Z``. ``J`` is ``df/dy`` at the step's
    start, refreshed at the current iterate every 5 iterations that have not converged (simplified Newton).
    An iteration has converged when its update is below ``newton_tol`` in the norm scaled by
    ``atol + rtol |y|``. The iterations are ordinary pylucid ops, so the step is differentiable.
    """

    def __init__(self, tb, rtol, atol, norm, newton_tol=1e-3, newton_max_iters=30):
        self.tb, self.rtol, self.atol, self.norm = tb, rtol, atol, norm
        self.tol, self.max_iters = float(newton_tol), int(newton_max_iters)
        s = len(tb.c)
        if not tb.diagonal:
            # d = b^T A^{-1}: the combination of the stage increments that is y1 - y0
            self.d = _solve_small([list(r) for r in zip(*tb.a)], list(tb.b))
        self.s = s

    def _jac(self, f, t, y):
        with enable_grad():
            J = jacobian(lambda v: f(t, v), y.detach())
        return J.detach()

    def _converged(self, dy, y) -> bool:
        # the update's bound (newton_tol * rtol |y|) never goes below ten ulps of the dtype: iterations stall there
        rtol = self.rtol
        floor = 10 * {2: 9.8e-4, 4: 1.2e-7, 8: 2.2e-16}.get(y.dtype.itemsize, 2.2e-16) / self.tol
        if isinstance(rtol, Tensor):
            rtol = rtol.clamp(min=floor)
        else:
            rtol = max(rtol, floor)
        scale = self.atol + rtol * y.detach().abs()
        return self.norm(dy.detach() / scale) <= self.tol

    def __call__(self, f, t0, dt, t1, y0):
        f0 = None
        if self.tb.diagonal:
            return self._diagonal(f, t0, dt, t1, y0)
        return self._full(f, t0, dt, t1, y0), f0

    def _solve(self, M, r):
        return ops.linalg.solve(M, r.unsqueeze(-1)).squeeze(-1)

    def _diagonal(self, f, t0, dt, t1, y0):
        tb = self.tb
        n = y0.shape[0]
        eye = creation.eye(n, dtype=y0.dtype, device=y0.device)
        ks = []
        J = None
        f0 = None
        for i in range(self.s):
            ci = tb.c[i]
            ti = t1 if ci == 1.0 else t0 + ci * dt
            known = _lincomb(y0, dt, tb.a[i][:i], ks) if i else y0
            aii = tb.a[i][i]
            if aii == 0.0:
                k = f(ti, known)
                ks.append(k)
                if i == 0:
                    f0 = k
                continue
            if J is None:
                J = self._jac(f, t0, y0)
            M = eye - J * (dt * aii)
            Y = known
            for it in range(self.max_iters):
                if it and it % 5 == 0:
                    M = eye - self._jac(f, ti, Y) * (dt * aii)
                G = Y - known - f(ti, Y) * (dt * aii)
                dY = self._solve(M, -G)
                Y = Y + dY
                if self._converged(dY, Y):
                    break
            else:
                raise RuntimeError(f"odeint({tb.name}): Newton's method did not converge in {self.max_iters} "
                                   f"iterations at t={t0!r} with step {dt!r}; use a smaller step_size")
            ks.append((Y - known) * (1.0 / (dt * aii)))
        return _lincomb(y0, dt, tb.b, ks), f0

    def _full(self, f, t0, dt, t1, y0):
        tb = self.tb
        s, n = self.s, y0.shape[0]
        A = creation.tensor(tb.a, dtype=y0.dtype, device=y0.device)
        eye = creation.eye(s * n, dtype=y0.dtype, device=y0.device)
        M = eye - ops.kron(A * dt, self._jac(f, t0, y0))
        ts = [t1 if c == 1.0 else t0 + c * dt for c in tb.c]
        Z = None
        for it in range(self.max_iters):
            Ys = [y0] * s if Z is None else [y0 + Z[i] for i in range(s)]
            if it and it % 5 == 0:
                M = eye - ops.kron(A * dt, self._jac(f, ts[-1], Ys[-1]))
            F = ops.stack([f(ti, yi) for ti, yi in zip(ts, Ys)])
            G = (-(A @ F) * dt) if Z is None else Z - (A @ F) * dt
            dZ = self._solve(M, -G.reshape(-1)).reshape(s, n)
            Z = dZ if Z is None else Z + dZ
            if all(self._converged(dZ[i], y0 + Z[i]) for i in range(s)):
                break
        else:
            raise RuntimeError(f"odeint({tb.name}): Newton's method did not converge in {self.max_iters} "
                               f"iterations at t={t0!r} with step {dt!r}; use a smaller step_size")
        return _lincomb(y0, 1.0, self.d, [Z[i] for i in range(s)])


# ---------------------------------------------------------------- events
def find_event(interp, sign0: float, t0: float, t1: float, event, tol: float):
    """Bisection on the dense output for the time the event function changes sign from ``sign0``."""
    n = max(0, math.ceil(math.log(max((t1 - t0) / max(tol, 1e-300), 1.0)) / math.log(2.0)))
    with no_grad():
        for _ in range(n):
            tm = (t0 + t1) / 2.0
            if _sign(event(tm, interp(tm))) == sign0:
                t0 = tm
            else:
                t1 = tm
    te = (t0 + t1) / 2.0
    return te, interp(te)


def _sign(v) -> float:
    if isinstance(v, Tensor):
        v = v.detach().item()
    return (v > 0) - (v < 0)


# ---------------------------------------------------------------- adaptive driver
class _Adaptive:
    def __init__(self, f, y0, tb, rtol, atol, norm, first_step=None, safety=0.9, ifactor=10.0, dfactor=0.2,
                 min_step=0.0, max_step=math.inf, max_num_steps=2 ** 31 - 1, **unused):
        self.f, self.y0, self.tb = f, y0, tb
        self.rtol, self.atol, self.norm = rtol, atol, norm
        self.first_step = None if first_step is None else float(first_step)
        self.safety, self.ifactor, self.dfactor = float(safety), float(ifactor), float(dfactor)
        self.min_step, self.max_step, self.max_num_steps = float(min_step), float(max_step), int(max_num_steps)

    @no_grad()
    def _initial_step(self, t0, y0, f0):
        """Hairer, Norsett & Wanner's starting step (Solving ODEs I, II.4), as torchdiffeq."""
        order = self.tb.order - 1
        scale = self.atol + y0.abs() * self.rtol
        d0, d1 = self.norm(y0 / scale), self.norm(f0 / scale)
        h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        f1 = self.f(t0 + h0, y0 + f0 * h0)
        d2 = abs(self.norm((f1 - f0) / scale) / h0)
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = max(1e-6, h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** (1.0 / float(order + 1))
        return min(100 * h0, h1)

    def start(self, t0: float):
        self.t0 = self.t1 = t0
        self.y1 = self.y0
        self.f1 = self.f(t0, self.y0)
        self.dt = self.first_step if self.first_step is not None else self._initial_step(t0, self.y0, self.f1)
        self.seg = None  # (t0, t1, y0, y1, ks) of the last accepted step, for the dense output
        return self

    def _error_ratio(self, err, y0, y1):
        with no_grad():  # a float for the controller: nothing to record
            tol = self.atol + self.rtol * ops.maximum(y0.abs(), y1.abs())
            return self.norm(err / tol)

    def step(self):
        t0, y0, f0, dt = self.t1, self.y1, self.f1, self.dt
        if not math.isfinite(dt):
            dt = self.min_step
        dt = min(max(dt, self.min_step), self.max_step)
        t1 = t0 + dt
        if not t1 > t0:
            raise RuntimeError(f"odeint({self.tb.name}): underflow in dt {dt!r} at t={t0!r}")
        y1, f1, err, ks = _explicit_step(self.f, t0, y0, f0, dt, t1, self.tb)
        ratio = self._error_ratio(err, y0, y1)
        if not math.isfinite(ratio):
            if not all(math.isfinite(v) for v in (y0.detach().abs().max().item(),)):
                raise RuntimeError(f"odeint({self.tb.name}): non-finite values in the state at t={t0!r}")
        accept = ratio <= 1
        if dt > self.max_step:
            accept = False
        if dt <= self.min_step:
            accept = True
        if accept:
            self.seg = (t0, t1, y0, y1, ks, dt)
            self.t0, self.t1, self.y1, self.f1 = t0, t1, y1, f1
        # torchdiffeq's controller: grow by at most ifactor, shrink by at most dfactor (only after a rejection)
        if ratio == 0:
            dt_next = dt * self.ifactor
        else:
            dfactor = 1.0 if ratio < 1 else self.dfactor
            factor = min(self.ifactor, max(self.safety / ratio ** (1.0 / self.tb.order), dfactor)) \
                if math.isfinite(ratio) else self.dfactor
            dt_next = dt * factor
        self.dt = min(max(dt_next, self.min_step), self.max_step)

    def interp(self, t: float):
        """The quartic through y0, y1, y(t0 + dt/2) with slopes f0, f1 (torchdiffeq's dense output)."""
        if self.seg is None or t == self.t1:
            return self.y1
        t0, t1, y0, y1, ks, dt = self.seg
        x = (t - t0) / (t1 - t0)
        if x == 0.0:
            return y0
        ymid = _lincomb(y0, dt, self.tb.mid, ks)
        x2, x3, x4 = x * x, x ** 3, x ** 4
        w0 = -8 * x4 + 18 * x3 - 11 * x2 + 1
        w1 = -8 * x4 + 14 * x3 - 5 * x2
        wm = 16 * x4 - 32 * x3 + 16 * x2
        v0 = (-2 * x4 + 5 * x3 - 4 * x2 + x) * dt
        v1 = (2 * x4 - 3 * x3 + x2) * dt
        return y0 * w0 + y1 * w1 + ymid * wm + ks[0] * v0 + ks[-1] * v1

    def advance(self, t: float):
        n = 0
        while t > self.t1:
            if n >= self.max_num_steps:
                raise RuntimeError(f"odeint({self.tb.name}): max_num_steps exceeded ({n} >= {self.max_num_steps})")
            self.step()
            n += 1
        return self.interp(t)

    def until_event(self, event):
        if _sign(event(self.t1, self.y1)) == 0:
            return self.t1, self.y1
        sign0 = _sign(event(self.t1, self.y1))
        n = 0
        while sign0 == _sign(event(self.t1, self.y1)):
            if n >= self.max_num_steps:
                raise RuntimeError(f"odeint({self.tb.name}): max_num_steps exceeded ({n} >= {self.max_num_steps})")
            self.step()
            n += 1
        return find_event(self.interp, sign0, self.t0, self.t1, event, self._event_tol())

    def _event_tol(self):
        a = self.atol
        return float(a.max().item()) if isinstance(a, Tensor) else float(a)


# ---------------------------------------------------------------- fixed-grid driver
def _grid(t, step_size, grid_constructor, f, y0):
    if step_size is not None and grid_constructor is not None:
        raise ValueError("odeint: step_size and grid_constructor are mutually exclusive options")
    if grid_constructor is not None:
        g = grid_constructor(f, y0, creation.tensor(t, dtype=y0.dtype, device=y0.device))
        g = g.tolist() if isinstance(g, Tensor) else [float(v) for v in g]
        if g[0] != t[0] or g[-1] != t[-1]:
            raise ValueError("odeint: grid_constructor must return a grid from t[0] to t[-1]")
        return g
    if step_size is None:
        return list(t)
    step = float(step_size)
    if not step > 0:
        raise ValueError(f"odeint: step_size must be positive, got {step_size!r}")
    n = int(math.ceil((t[-1] - t[0]) / step + 1))
    g = [t[0] + i * step for i in range(n)]
    g[-1] = t[-1]
    return g


def _interp_linear(t0, t1, y0, y1, t):
    if t == t0:
        return y0
    if t == t1:
        return y1
    return y0 + (y1 - y0) * ((t - t0) / (t1 - t0))


def _interp_cubic(t0, y0, f0, t1, y1, f1, t):
    h = (t - t0) / (t1 - t0)
    dt = t1 - t0
    return (y0 * ((1 + 2 * h) * (1 - h) * (1 - h)) + f0 * (h * (1 - h) * (1 - h) * dt) + y1 * (h * h * (3 - 2 * h))
            + f1 * (h * h * (h - 1) * dt))


class _Fixed:
    def __init__(self, f, y0, stepper, name, step_size=None, grid_constructor=None, interp="linear", perturb=False,
                 atol=0.0, **unused):
        if interp not in ("linear", "cubic"):
            raise ValueError(f"odeint({name}): interp must be 'linear' or 'cubic', got {interp!r}")
        self.f, self.y0, self.stepper, self.name = f, y0, stepper, name
        self.step_size, self.grid_constructor, self.interp, self.atol = step_size, grid_constructor, interp, atol

    def _dense(self, t0, y0, f0, t1, y1):
        if self.interp == "linear":
            return lambda t: _interp_linear(t0, t1, y0, y1, t)
        f0 = f0 if f0 is not None else self.f(t0, y0)
        f1 = self.f(t1, y1)
        return lambda t: _interp_cubic(t0, y0, f0, t1, y1, f1, t)

    def integrate(self, t):
        grid = _grid(t, self.step_size, self.grid_constructor, self.f, self.y0)
        out = [self.y0]
        j = 1
        y0 = self.y0
        for t0, t1 in zip(grid[:-1], grid[1:]):
            y1, f0 = self.stepper(self.f, t0, t1 - t0, t1, y0)
            if j < len(t) and t1 >= t[j]:
                dense = self._dense(t0, y0, f0, t1, y1)
                while j < len(t) and t1 >= t[j]:
                    out.append(dense(t[j]))
                    j += 1
            y0 = y1
        return out

    def until_event(self, t0, event):
        if self.step_size is None:
            raise ValueError(f"odeint({self.name}): event handling with a fixed-step method needs options="
                             f"dict(step_size=...)")
        dt = float(self.step_size)
        y0 = self.y0
        sign0 = _sign(event(t0, y0))
        for _ in range(20000):
            t1 = t0 + dt
            y1, f0 = self.stepper(self.f, t0, dt, t1, y0)
            if _sign(event(t1, y1)) != sign0:
                tol = float(self.atol.max().item()) if isinstance(self.atol, Tensor) else float(self.atol)
                return find_event(self._dense(t0, y0, f0, t1, y1), sign0, t0, t1, event, tol)
            t0, y0 = t1, y1
        raise RuntimeError(f"odeint({self.name}): no event in 20000 steps")


# ---------------------------------------------------------------- entry point
def check_options(method: str, options: dict) -> None:
    allowed = _ADAPTIVE_OPTIONS if method in ADAPTIVE else _IMPLICIT_OPTIONS if method in IMPLICIT else _FIXED_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        warnings.warn(f"odeint({method}): unexpected options {unknown}; accepted: {sorted(allowed)}", stacklevel=3)


def solve(f, y0: Tensor, t: list, *, method: str, rtol, atol, options: dict, norm: Norm, event=None):
    """Integrate ``y' = f(t, y)`` over the strictly monotone float grid ``t``.

    Returns the list of states at ``t`` or, with ``event`` (a float function of ``(t, y)``), ``(t_event,
    [y0, y_event])``. A decreasing grid is integrated as the increasing one of ``-t``.
    """
    reverse = len(t) > 1 and t[1] < t[0]
    if reverse:
        f_fwd, ev_fwd = f, event
        t = [-v for v in t]

        def f(s, y):
            return -f_fwd(-s, y)

        if event is not None:
            def event(s, y):
                return ev_fwd(-s, y)
    if any(b <= a for a, b in zip(t[:-1], t[1:])):
        raise ValueError("odeint: t must be strictly increasing or strictly decreasing")
    options = {k: v for k, v in options.items() if k != "norm"}
    if method in ADAPTIVE:
        solver = _Adaptive(f, y0, tab.EXPLICIT_ADAPTIVE[method], rtol, atol, norm, **options)
        solver.start(t[0])
        if event is not None:
            te, ye = solver.until_event(event)
            return (-te if reverse else te), [y0, ye]
        return [y0] + [solver.advance(v) for v in t[1:]]
    if method in FIXED:
        stepper = _fixed_explicit(tab.EXPLICIT_FIXED[method])
    else:
        newton = {k: options.pop(k) for k in ("newton_tol", "newton_max_iters") if k in options}
        stepper = _ImplicitStep(tab.IMPLICIT[method], rtol, atol, norm, **newton)
    solver = _Fixed(f, y0, stepper, method, atol=atol, **options)
    if event is not None:
        te, ye = solver.until_event(t[0], event)
        return (-te if reverse else te), [y0, ye]
    return solver.integrate(t)
