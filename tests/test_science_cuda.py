"""The scientific layer on the GPU: pylucid.func, distributions, einops, diffeq and signal windows give on CUDA
what they give on the CPU (the CPU side is checked against torch.func, torch.distributions, einops, torchdiffeq
and torch.signal in their own test files). Skips cleanly without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import pylucid as pl
import pylucid.nn as nn
from pylucid import distributions as D
from pylucid.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vmap

CUDA = pl.cuda.is_available()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason="no CUDA GPU/CuPy here")]


def _np(t):
    return t.detach().cpu().numpy()


def _both(a, **kw):
    return pl.tensor(a, **kw), pl.tensor(a, device="cuda", **kw)


def test_func_transforms_on_cuda_match_cpu():
    r = np.random.default_rng(0)
    x, w = r.standard_normal((8, 5)), r.standard_normal((5, 3))

    def f(w, x):
        return ((x @ w).tanh() ** 2).sum()

    out = []
    for dev in ("cpu", "cuda"):
        wt, xt = pl.tensor(w, device=dev), pl.tensor(x, device=dev)
        per_sample = vmap(grad(f), in_dims=(None, 0))(wt, xt)
        _, tangent = jvp(lambda w: f(w, xt), (wt,), (pl.ones_like(wt),))
        h = hessian(lambda w: f(w, xt))(wt)
        jf, jr = jacfwd(lambda w: (xt @ w).sin())(wt), jacrev(lambda w: (xt @ w).sin())(wt)
        out.append([per_sample, tangent, h, jf, jr])
    for c, g in zip(*out):
        np.testing.assert_allclose(_np(g), _np(c), rtol=1e-9, atol=1e-10)


def test_per_sample_grads_of_a_module_on_cuda():
    pl.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    params_cpu = {k: v.detach() for k, v in model.named_parameters()}
    params_gpu = {k: v.detach().cuda() for k, v in params_cpu.items()}
    r = np.random.default_rng(1)
    x, y = r.standard_normal((10, 6)).astype(np.float32), r.integers(0, 3, 10)
    gpu_model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3)).cuda()

    def loss(params, m, xi, yi):
        logits = functional_call(m, params, (xi[None],))
        return nn.functional.cross_entropy(logits, yi[None])

    gc = vmap(grad(lambda p, xi, yi: loss(p, model, xi, yi)), in_dims=(None, 0, 0))(params_cpu, *map(pl.tensor, (x, y)))
    gg = vmap(grad(lambda p, xi, yi: loss(p, gpu_model, xi, yi)), in_dims=(None, 0, 0))(
        params_gpu, pl.tensor(x, device="cuda"), pl.tensor(y, device="cuda"))
    for k in gc:
        np.testing.assert_allclose(_np(gg[k]), _np(gc[k]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda d: D.Normal(pl.tensor([0.5, -1.0], device=d), pl.tensor([1.5, 0.3], device=d)),
    lambda d: D.Gamma(pl.tensor([2.0, 0.7], device=d), pl.tensor([1.0, 3.0], device=d)),
    lambda d: D.Beta(pl.tensor([2.0, 0.7], device=d), pl.tensor([1.5, 3.0], device=d)),
    lambda d: D.Dirichlet(pl.tensor([[2.0, 0.7, 1.2]], device=d)),
    lambda d: D.Categorical(logits=pl.tensor([[0.1, 0.5, -1.0]], device=d)),
    lambda d: D.Poisson(pl.tensor([3.0, 0.5], device=d)),
    lambda d: D.MultivariateNormal(pl.zeros(2, device=d), pl.tensor([[2.0, 0.5], [0.5, 1.0]], device=d)),
], ids=["normal", "gamma", "beta", "dirichlet", "categorical", "poisson", "mvn"])
def test_distributions_on_cuda_match_cpu(make):
    """log_prob / entropy / mean agree with the CPU; samples land on the GPU with the right shape and moments."""
    dc, dg = make("cpu"), make("cuda")
    pl.manual_seed(0)
    s = dg.sample((4000,))
    assert s.device.type == "cuda" and tuple(s.shape) == (4000,) + tuple(dg.batch_shape) + tuple(dg.event_shape)
    lp_g = dg.log_prob(s)
    lp_c = dc.log_prob(s.cpu())
    np.testing.assert_allclose(_np(lp_g), _np(lp_c), rtol=1e-5, atol=1e-6)
    try:
        np.testing.assert_allclose(_np(dg.entropy()), _np(dc.entropy()), rtol=1e-5, atol=1e-6)
    except NotImplementedError:
        pass
    if np.all(np.isfinite(_np(dc.mean))):  # (a Categorical's mean is NaN, as in PyTorch)
        std = _np(dc.stddev)
        np.testing.assert_allclose(_np(s.float().mean(0)), _np(dc.mean), atol=float(np.max(5 * std / np.sqrt(4000))))


def test_reparameterised_samples_carry_gradients_on_cuda():
    loc = pl.tensor([0.5, -1.0], device="cuda", requires_grad=True)
    conc = pl.tensor([2.0, 0.7], device="cuda", requires_grad=True)
    pl.manual_seed(0)
    (D.Normal(loc, 1.0).rsample((50,)).sum() + D.Gamma(conc, 1.0).rsample((50,)).sum()).backward()
    np.testing.assert_allclose(_np(loc.grad), [50.0, 50.0])
    assert np.all(np.isfinite(_np(conc.grad))) and np.all(_np(conc.grad) > 0)
    kl = D.kl_divergence(D.Normal(loc, 1.0), D.Normal(pl.zeros(2, device="cuda"), 2.0))
    assert kl.device.type == "cuda"


def test_einops_on_cuda_match_cpu():
    from pylucid.einops import pack, rearrange, reduce, repeat

    r = np.random.default_rng(2)
    a = r.standard_normal((2, 3, 4, 6))
    xc, xg = _both(a)
    cases = [lambda t: rearrange(t, "b c (h h2) w -> b (c h2) h w", h2=2),
             lambda t: reduce(t, "b c h w -> b c", "mean"),
             lambda t: repeat(t, "b c h w -> b c h w r", r=2),
             lambda t: pack([t, t], "b * w")[0]]
    for fn in cases:
        np.testing.assert_allclose(_np(fn(xg)), _np(fn(xc)), rtol=1e-12)


def test_odeint_and_adjoint_on_cuda_match_cpu():
    from pylucid.diffeq import odeint, odeint_adjoint

    class F(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, t, y):
            return self.lin(y).tanh()

    pl.manual_seed(0)
    fc = F().double()
    fg = F().double().cuda()
    fg.load_state_dict({k: v.cuda() for k, v in fc.state_dict().items()})
    y0 = np.array([[1.0, 0.5]])
    t = np.linspace(0.0, 1.0, 5)
    outs = []
    for f, dev in ((fc, "cpu"), (fg, "cuda")):
        y0t, tt = pl.tensor(y0, device=dev, requires_grad=True), pl.tensor(t, device=dev)
        ys = odeint(f, y0t, tt, method="dopri5", rtol=1e-8, atol=1e-10)
        ya = odeint_adjoint(f, y0t, tt, method="dopri5", rtol=1e-8, atol=1e-10)
        ya.sum().backward()
        outs.append((ys, ya, y0t.grad, f.lin.weight.grad))
    for c, g in zip(*outs):
        np.testing.assert_allclose(_np(g), _np(c), rtol=1e-7, atol=1e-9)


def test_signal_windows_on_cuda_match_cpu():
    from pylucid.signal import windows

    for name in ("hann", "hamming", "blackman", "bartlett", "cosine", "nuttall"):
        fn = getattr(windows, name)
        np.testing.assert_allclose(_np(fn(16, device="cuda")), _np(fn(16)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(pl.kaiser_window(12, device="cuda")), _np(pl.kaiser_window(12)), rtol=1e-6,
                               atol=1e-7)
