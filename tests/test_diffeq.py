"""pylucid.diffeq against torchdiffeq (same functions in torch and pylucid), closed forms and scipy's stiff solvers."""

import math
import warnings

import numpy as np
import pytest

torchdiffeq = pytest.importorskip("torchdiffeq")  # the reference (a test dependency)
import scipy.integrate
import scipy.linalg
import torch

import pylucid as pl
from pylucid.diffeq import ADAPTIVE, FIXED, IMPLICIT, odeint, odeint_adjoint

A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
Y0 = np.array([2.0, 0.0])
T = np.linspace(0.0, 2.0, 6)


def _linear(lib, M):
    return lambda t, y: M @ y


def _exact(t, y0=Y0, M=A):
    return np.stack([scipy.linalg.expm(M * s) @ y0 for s in t])


def _fixed_opts(method):
    return dict(step_size=0.01) if method in FIXED else None


@pytest.mark.parametrize("method", [m for m in ADAPTIVE if m != "tsit5"] + list(FIXED))
@pytest.mark.parametrize("reverse", [False, True])
def test_linear_matches_torchdiffeq(method, reverse):
    t = T[::-1].copy() if reverse else T
    y0 = _exact(t[:1])[0]
    low = method in ("adaptive_heun", "fehlberg2", "bosh3")
    rtol = {"adaptive_heun": 1e-4, "bosh3": 1e-5}.get(method, 1e-6)
    kw = dict(rtol=rtol, atol=rtol * 1e-2, method=method, options=_fixed_opts(method))
    got = odeint(_linear(pl, pl.tensor(A)), pl.tensor(y0), pl.tensor(t), **kw)
    want = torchdiffeq.odeint(_linear(torch, torch.tensor(A)), torch.tensor(y0), torch.tensor(t), **kw)
    assert tuple(got.shape) == tuple(want.shape) == (len(t), 2)
    # the same steps (same tableaus and controller): equal to rounding; dopri8's large coefficients amplify the
    # different summation order of the stages to ~1e-8 over a solve, up to 1.6e-7 (reversed, NumPy 2.4 on an
    # AVX-512 machine, whose matrix-vector products add in another order)
    same = 5e-7 if method == "dopri8" else 1e-9
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=same, atol=same)
    exact = np.stack([scipy.linalg.expm(A * (s - t[0])) @ y0 for s in t])
    err = {"euler": 1e-1, "midpoint": 1e-3, "heun2": 1e-3, "dopri8": 3e-3}.get(method, 3e-2 if low else 1e-4)
    np.testing.assert_allclose(got.numpy(), exact, atol=err)


@pytest.mark.parametrize("method", ["dopri5", "tsit5", "dopri8", "bosh3"])
def test_adaptive_accuracy_and_dense_output(method):
    """A dense grid comes from the interpolant between steps (torchdiffeq's quartic); for the 5th-order pairs it
    stays near the closed form at every point."""
    t = np.linspace(0.0, 3.0, 31)
    got = odeint(_linear(pl, pl.tensor(A)), pl.tensor(Y0), pl.tensor(t), rtol=1e-7, atol=1e-9, method=method)
    if method in ("dopri5", "tsit5"):
        np.testing.assert_allclose(got.numpy(), _exact(t), atol=2e-5)
    if method != "tsit5":
        want = torchdiffeq.odeint(_linear(torch, torch.tensor(A)), torch.tensor(Y0), torch.tensor(t), rtol=1e-7,
                                  atol=1e-9, method=method)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7, atol=1e-8)


def test_tsit5_and_dopri8_orders():
    """Halving a fixed first step sequence: each error falls by about 2^order (controller off: huge tolerances)."""
    def err(method, h):
        opts = dict(first_step=h, ifactor=1.0, dfactor=1.0, safety=1.0)
        y = odeint(_linear(pl, pl.tensor(A)), pl.tensor(Y0), pl.tensor([0.0, 1.0]), rtol=1e3, atol=1e3,
                   method=method, options=opts)
        return np.abs(y[-1].numpy() - _exact([1.0])[0]).max()

    for method, order in (("tsit5", 5), ("dopri5", 5), ("bosh3", 3)):
        rate = math.log2(err(method, 0.1) / err(method, 0.05))
        assert order - 0.6 < rate < order + 1.2, (method, rate)


def test_float32_and_decreasing_grid_of_a_nonlinear_system():
    def f(lib):
        def rhs(t, y):
            return lib.stack([y[1], -lib.sin(y[0]) - 0.1 * y[1] + 0.2 * lib.cos(t)])
        return rhs

    t = np.linspace(3.0, 0.0, 7).astype(np.float32)
    y0 = np.array([1.0, -0.5], np.float32)
    got = odeint(f(pl), pl.tensor(y0), pl.tensor(t), rtol=1e-5, atol=1e-7)
    want = torchdiffeq.odeint(f(torch), torch.tensor(y0), torch.tensor(t), rtol=1e-5, atol=1e-7)
    assert got.dtype == pl.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_tuple_state_matches_torchdiffeq():
    def f(lib):
        def rhs(t, state):
            x, v = state
            return v, -x - 0.3 * v
        return rhs

    x0, v0 = np.ones((2, 2)), np.zeros((2, 2))
    for rtol in (1e-6, (1e-6, 1e-4)):
        got = odeint(f(pl), (pl.tensor(x0), pl.tensor(v0)), pl.tensor(T), rtol=rtol, atol=1e-8)
        want = torchdiffeq.odeint(f(torch), (torch.tensor(x0), torch.tensor(v0)), torch.tensor(T), rtol=rtol,
                                  atol=1e-8)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            assert tuple(g.shape) == (len(T), 2, 2)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-10)


class _MLP:
    """The same 2-16-2 tanh MLP vector field in both frameworks."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.w = [rng.standard_normal((16, 2)) * 0.5, rng.standard_normal(16) * 0.1, rng.standard_normal((2, 16)) * 0.5,
                  rng.standard_normal(2) * 0.1]

    def pl_module(self):
        m = pl.nn.Sequential(pl.nn.Linear(2, 16), pl.nn.Tanh(), pl.nn.Linear(16, 2)).double()
        with pl.no_grad():
            for p, v in zip(m.parameters(), self.w):
                p.copy_(pl.tensor(v))

        class F(pl.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = m

            def forward(self, t, y):
                return self.net(y) * (1.0 + 0.1 * t)

        return F()

    def torch_module(self):
        m = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double()
        with torch.no_grad():
            for p, v in zip(m.parameters(), self.w):
                p.copy_(torch.tensor(v))

        class F(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = m

            def forward(self, t, y):
                return self.net(y) * (1.0 + 0.1 * t)

        return F()


def _grads_pl(fn, f, y0, t, **kw):
    y0 = pl.tensor(y0, requires_grad=True)
    t = pl.tensor(t, requires_grad=True)
    out = fn(f, y0, t, **kw)
    loss = (out ** 2).sum() + out[-1, 0, 0] * 3.0
    loss.backward()
    return out.detach().numpy(), y0.grad.numpy(), t.grad.numpy(), [p.grad.numpy() for p in f.parameters()]


def _grads_torch(fn, f, y0, t, **kw):
    y0 = torch.tensor(y0, requires_grad=True)
    t = torch.tensor(t, requires_grad=True)
    out = fn(f, y0, t, **kw)
    loss = (out ** 2).sum() + out[-1, 0, 0] * 3.0
    loss.backward()
    return out.detach().numpy(), y0.grad.numpy(), t.grad.numpy(), [p.grad.numpy() for p in f.parameters()]


def _close_all(a, b, rtol, atol):
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
    for x, y in zip(a[3], b[3]):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


Y0B = np.random.default_rng(5).standard_normal((3, 2))
TB = np.array([0.0, 0.5, 1.2])


def test_adjoint_matches_torchdiffeq_adjoint():
    mlp = _MLP()
    kw = dict(rtol=1e-7, atol=1e-9, method="dopri5")
    got = _grads_pl(odeint_adjoint, mlp.pl_module(), Y0B, TB, **kw)
    want = _grads_torch(torchdiffeq.odeint_adjoint, mlp.torch_module(), Y0B, TB, **kw)
    _close_all(got, want, rtol=1e-6, atol=1e-8)


def test_adjoint_matches_direct_backprop():
    """Adjoint gradients (y0, t, parameters) equal backpropagation through the solver, to the tolerance."""
    mlp = _MLP(1)
    kw = dict(rtol=1e-9, atol=1e-11, method="dopri5")
    adj = _grads_pl(odeint_adjoint, mlp.pl_module(), Y0B, TB, **kw)
    f = mlp.pl_module()
    y0 = pl.tensor(Y0B, requires_grad=True)
    out = odeint(f, y0, pl.tensor(TB), **kw)
    ((out ** 2).sum() + out[-1, 0, 0] * 3.0).backward()
    np.testing.assert_allclose(adj[1], y0.grad.numpy(), rtol=1e-6, atol=1e-8)
    for a, p in zip(adj[3], f.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6, atol=1e-8)
    # direct backprop against torchdiffeq's direct backprop, through every stage
    want = _grads_torch(torchdiffeq.odeint, mlp.torch_module(), Y0B, TB, **kw)
    np.testing.assert_allclose(y0.grad.numpy(), want[1], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("method", ["rk4", "bosh3"])
def test_adjoint_other_methods_and_decreasing_time(method):
    mlp = _MLP(2)
    t = TB[::-1].copy()
    kw = dict(rtol=1e-5, atol=1e-7, method=method, options=dict(step_size=0.05) if method == "rk4" else None)
    got = _grads_pl(odeint_adjoint, mlp.pl_module(), Y0B, t, **kw)
    want = _grads_torch(torchdiffeq.odeint_adjoint, mlp.torch_module(), Y0B, t, **kw)
    _close_all(got, want, rtol=1e-5, atol=1e-7)


def test_adjoint_tuple_state_and_seminorm():
    k = pl.tensor(0.7, requires_grad=True)
    kt = torch.tensor(0.7, requires_grad=True)

    def f(lib, kk):
        return lambda t, s: (s[1], -kk * s[0])

    x0, v0 = np.array([1.0, 0.5]), np.array([0.0, 0.2])
    for opts in (None, dict(norm="seminorm")):
        xs = (pl.tensor(x0, requires_grad=True), pl.tensor(v0, requires_grad=True))
        xt = (torch.tensor(x0, requires_grad=True), torch.tensor(v0, requires_grad=True))
        a = odeint_adjoint(f(pl, k), xs, pl.tensor(T), adjoint_params=(k,), adjoint_options=opts)
        b = torchdiffeq.odeint_adjoint(f(torch, kt), xt, torch.tensor(T), adjoint_params=(kt,), adjoint_options=opts)
        (a[0][-1].sum() + a[1].square().sum()).backward()
        (b[0][-1].sum() + b[1].square().sum()).backward()
        np.testing.assert_allclose(k.grad.numpy(), kt.grad.numpy(), rtol=1e-6)
        for g, w in zip(xs, xt):
            np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), rtol=1e-6, atol=1e-9)
        k.grad, kt.grad = None, None


# ---------------------------------------------------------------- implicit methods and stiffness
STIFF = np.array([[-1000.0, 0.0], [999.0, -1.0]])  # eigenvalues -1000 and -1


@pytest.mark.parametrize("method", [m for m in IMPLICIT if m not in ("gauss_legendre", "sdirk")])
def test_implicit_methods_on_a_stiff_linear_system(method):
    t = np.linspace(0.0, 1.0, 5)
    y0 = np.array([1.0, 0.0])
    got = odeint(_linear(pl, pl.tensor(STIFF)), pl.tensor(y0), pl.tensor(t), method=method,
                 options=dict(step_size=0.05))
    exact = _exact(t, y0, STIFF)
    assert np.isfinite(got.numpy()).all()
    # stable at dt * 1000 = 50 (an explicit method diverges); the gauss methods are A- but not L-stable, so the
    # fast mode decays slowly, and only the slow component is compared for them
    tol = {"implicit_euler": 3e-2, "sdirk2": 3e-3, "trbdf2": 3e-3, "sdirk3": 1e-3, "radau": 1e-5}.get(method)
    if tol is None:
        np.testing.assert_allclose(got.numpy()[1:, 1] + got.numpy()[1:, 0], exact[1:, 1] + exact[1:, 0], atol=1e-2)
    else:
        np.testing.assert_allclose(got.numpy(), exact, atol=tol)
    explicit = odeint(_linear(pl, pl.tensor(STIFF)), pl.tensor(y0), pl.tensor(t), method="rk4",
                      options=dict(step_size=0.05))
    assert not np.abs(explicit.numpy()).max() < 10


@pytest.mark.parametrize("method,order", [("implicit_euler", 1), ("sdirk2", 2), ("trbdf2", 2), ("sdirk3", 3),
                                          ("gauss_legendre4", 4), ("radau", 5), ("gauss_legendre6", 6)])
def test_implicit_orders_on_a_nonlinear_problem(method, order):
    """y' = -y^2 + sin t: halving the step divides the error by about 2^order (reference: scipy, tight)."""
    f = lambda t, y: -y * y + pl.sin(t).to(y.dtype)  # noqa: E731
    ref = scipy.integrate.solve_ivp(lambda t, y: -y * y + np.sin(t), (0, 1), [1.0], method="Radau", rtol=1e-13,
                                    atol=1e-13).y[0, -1]
    errs = []
    for h in (0.1, 0.05):
        y = odeint(f, pl.tensor([1.0], dtype=pl.float64), pl.tensor([0.0, 1.0]), method=method, rtol=1e-12, atol=1e-14,
                   options=dict(step_size=h, newton_tol=1e-2))
        errs.append(abs(y[-1, 0].item() - ref))
    rate = math.log2(errs[0] / errs[1])
    assert order - 0.5 < rate < order + 1.5, rate


def test_van_der_pol_mu_100_with_radau_and_sdirk():
    mu = 100.0

    def f(t, y):
        return pl.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    ref = scipy.integrate.solve_ivp(lambda t, y: [y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]], (0, 0.6), [2.0, 0.0],
                                    method="Radau", rtol=1e-11, atol=1e-12, t_eval=[0.3, 0.6]).y.T
    for method, h, tol in (("radau", 0.01, 1e-6), ("sdirk3", 0.005, 1e-4), ("trbdf2", 0.005, 1e-4)):
        y = odeint(f, pl.tensor([2.0, 0.0], dtype=pl.float64), pl.tensor([0.0, 0.3, 0.6]), method=method, rtol=1e-8,
                   atol=1e-10,
                   options=dict(step_size=h))
        np.testing.assert_allclose(y.numpy()[1:], ref, atol=tol, rtol=tol)


def test_gradients_through_implicit_steps():
    """Backprop through Newton's iterations: d y(T) / d y0 is exp(A T) for a linear system."""
    y0 = pl.tensor([1.0, 0.5], requires_grad=True)
    M = pl.tensor(STIFF / 100.0)
    y = odeint(lambda t, y: M @ y, y0, pl.tensor([0.0, 1.0]), method="radau", options=dict(step_size=0.1))
    (g,) = pl.autograd.grad(y[-1, 1], y0)
    np.testing.assert_allclose(g.numpy(), scipy.linalg.expm(STIFF / 100.0)[1], rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- events
def _ball(lib):
    def f(t, s):
        return lib.stack([s[1], -9.81 * lib.ones_like(s[1])])
    return f


def test_event_time_matches_closed_form_and_torchdiffeq():
    y0 = pl.tensor([10.0, 0.0], dtype=pl.float64)
    te, sol = odeint(_ball(pl), y0, pl.tensor([0.0, 1.0], dtype=pl.float64), event_fn=lambda t, s: s[0])
    assert abs(te.item() - math.sqrt(2 * 10.0 / 9.81)) < 1e-6
    assert tuple(sol.shape) == (2, 2) and abs(sol[-1, 0].item()) < 1e-5
    tt, st = torchdiffeq.odeint(_ball(torch), torch.tensor([10.0, 0.0], dtype=torch.float64),
                                torch.tensor([0.0, 1.0], dtype=torch.float64), event_fn=lambda t, s: s[0])
    assert abs(te.item() - tt.item()) < 1e-7
    # fixed-step solvers need a step size; several events: the first one wins
    te2, _ = odeint(_ball(pl), y0, pl.tensor([0.0, 1.0], dtype=pl.float64), method="rk4",
                    options=dict(step_size=0.01), event_fn=lambda t, s: pl.stack([s[0], s[0] - 5.0]))
    assert abs(te2.item() - math.sqrt(2 * 5.0 / 9.81)) < 1e-4  # linear interpolation between steps of 0.01
    tt2, _ = torchdiffeq.odeint(_ball(torch), torch.tensor([10.0, 0.0], dtype=torch.float64),
                                torch.tensor([0.0, 1.0], dtype=torch.float64), method="rk4",
                                options=dict(step_size=0.01), event_fn=lambda t, s: torch.stack([s[0], s[0] - 5.0]))
    assert abs(te2.item() - tt2.item()) < 1e-8
    with pytest.raises(ValueError, match="step_size"):
        odeint(_ball(pl), pl.tensor([10.0, 0.0]), pl.tensor([0.0, 1.0]), method="euler", event_fn=lambda t, s: s[0])


@pytest.mark.parametrize("adjoint", [False, True])
def test_odeint_event_gradients_match_torchdiffeq(adjoint):
    def run(lib, mod, interface, **kw):
        h0 = lib.tensor([10.0, 1.0], dtype=getattr(lib, "float64"), requires_grad=True)
        t0 = lib.tensor(0.0, dtype=getattr(lib, "float64"), requires_grad=True)
        te, sol = mod.odeint_event(_ball(lib), h0, t0, event_fn=lambda t, s: s[0], odeint_interface=interface,
                                   **kw)
        (te * 2.0 + sol[-1, 1]).backward()
        return te.item(), sol.detach().numpy(), h0.grad.numpy()

    import pylucid.diffeq as pdq

    extra = dict(adjoint_params=()) if adjoint else {}
    got = run(pl, pdq, pdq.odeint_adjoint if adjoint else pdq.odeint, **extra)
    want = run(torch, torchdiffeq, torchdiffeq.odeint_adjoint if adjoint else torchdiffeq.odeint, **extra)
    assert abs(got[0] - want[0]) < 1e-7
    np.testing.assert_allclose(got[1], want[1], atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)
    # the event time of a ball thrown up at v from h: (v + sqrt(v^2 + 2 g h)) / g; d/dh = 1 / sqrt(v^2 + 2 g h)
    assert abs(got[0] - (1 + math.sqrt(1 + 2 * 9.81 * 10)) / 9.81) < 1e-6


# ---------------------------------------------------------------- errors and options
def test_errors():
    f = lambda t, y: -y  # noqa: E731
    y0 = pl.tensor([1.0])
    with pytest.raises(ValueError, match="invalid method"):
        odeint(f, y0, pl.tensor([0.0, 1.0]), method="nope")
    with pytest.raises(ValueError, match="strictly"):
        odeint(f, y0, pl.tensor([0.0, 1.0, 0.5]))
    with pytest.raises(TypeError, match="floating"):
        odeint(f, y0, pl.tensor([0, 1]))
    with pytest.raises(TypeError, match="Tensor"):
        odeint(f, [y0], pl.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="nn.Module"):
        odeint_adjoint(f, y0, pl.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="len"):
        odeint(f, y0, pl.tensor([0.0, 1.0, 2.0]), event_fn=lambda t, y: y)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        odeint(f, y0, pl.tensor([0.0, 1.0]), options=dict(bogus=1))
    assert any("bogus" in str(x.message) for x in w)
    with pytest.raises(RuntimeError, match="max_num_steps"):
        odeint(f, y0, pl.tensor([0.0, 1.0]), options=dict(max_num_steps=2))


def test_grid_options_and_cubic_interp():
    f = _linear(pl, pl.tensor(A))
    t = np.linspace(0.0, 1.0, 4)
    pl_grid = dict(grid_constructor=lambda f, y0, t: pl.linspace(0.0, 1.0, 41, dtype=pl.float64))
    torch_grid = dict(grid_constructor=lambda f, y0, t: torch.linspace(0.0, 1.0, 41, dtype=torch.float64))
    for opts, topts in ((dict(step_size=0.03), None), (dict(step_size=0.03, interp="cubic"), None),
                        (pl_grid, torch_grid)):
        got = odeint(f, pl.tensor(Y0), pl.tensor(t), method="midpoint", options=opts)
        want = torchdiffeq.odeint(_linear(torch, torch.tensor(A)), torch.tensor(Y0), torch.tensor(t),
                                  method="midpoint", options=topts or opts)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_adjoint_with_an_implicit_method():
    """The adjoint solved by Radau IIA: its Newton Jacobian differentiates the vector-Jacobian products again."""
    M = np.array([[-10.0, 0.0], [9.0, -1.0]])
    k = pl.tensor(1.0, dtype=pl.float64, requires_grad=True)
    Mp = pl.tensor(M)
    y0 = pl.tensor([1.0, 0.5], dtype=pl.float64, requires_grad=True)
    y = odeint_adjoint(lambda t, y: (Mp @ y) * k, y0, pl.tensor([0.0, 0.5, 1.0], dtype=pl.float64), method="radau",
                       options=dict(step_size=0.05), adjoint_params=(k,))
    y[-1, 1].backward()
    E = scipy.linalg.expm(M)
    np.testing.assert_allclose(y0.grad.numpy(), E[1], rtol=1e-6)
    np.testing.assert_allclose(k.grad.item(), (M @ E)[1] @ np.array([1.0, 0.5]), rtol=1e-6)


@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_gradient_with_respect_to_the_times(method):
    """odeint's t-gradient is the sensitivity f(t_i, y(t_i)) (t0 through y0): torchdiffeq's adjoint gives the same;
    for dopri5 so does torchdiffeq's backpropagation through the solver."""
    def f(lib):
        return lambda t, y: lib.stack([y[1], -lib.sin(y[0]) + 0.3 * lib.cos(2 * t)])

    y0, t = np.array([1.0, 0.0]), np.array([0.2, 0.7, 1.5, 2.0])
    kw = dict(method=method, options=dict(step_size=0.05) if method == "rk4" else None, rtol=1e-8, atol=1e-10)
    tp = pl.tensor(t, requires_grad=True)
    (odeint(f(pl), pl.tensor(y0), tp, **kw) ** 2).sum().backward()
    tt = torch.tensor(t, requires_grad=True)
    (torchdiffeq.odeint_adjoint(f(torch), torch.tensor(y0), tt, adjoint_params=(), **kw) ** 2).sum().backward()
    np.testing.assert_allclose(tp.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-7)
    if method == "dopri5":
        td = torch.tensor(t, requires_grad=True)
        (torchdiffeq.odeint(f(torch), torch.tensor(y0), td, **kw) ** 2).sum().backward()
        # torchdiffeq differentiates its interpolation arithmetic: the same up to the solver's error
        np.testing.assert_allclose(tp.grad.numpy(), td.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_complex_state_matches_torchdiffeq(method):
    M = np.array([[-0.1 + 1j, 0.5], [0.0, -0.2 - 2j]])
    y0, t = np.array([1.0 + 0.5j, -0.3j]), np.linspace(0.0, 2.0, 5)
    opts = dict(step_size=0.05) if method == "rk4" else None
    got = odeint(lambda t, y: pl.tensor(M) @ y, pl.tensor(y0), pl.tensor(t), method=method, options=opts)
    want = torchdiffeq.odeint(lambda t, y: torch.tensor(M) @ y, torch.tensor(y0), torch.tensor(t), method=method,
                              options=opts)
    assert got.dtype == pl.complex128
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="real"):
        odeint(lambda t, y: y, pl.tensor(y0), pl.tensor(t), method="radau", options=dict(step_size=0.1))
