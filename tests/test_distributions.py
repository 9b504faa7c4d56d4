"""pylucid.distributions against torch.distributions: values and gradients of log_prob / cdf / icdf /
entropy / moments on the same parameters, shapes, sample statistics under a fixed seed (tolerances from the
sample size), every registered KL pair, transforms and validation errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.distributions as TD

import pylucid as pl
import pylucid.distributions as D
from pylucid.distributions import constraints
from pylucid.distributions import transforms as T

R = np.random.default_rng(0)


def pos(*shape, lo=0.5, hi=3.0):
    return R.uniform(lo, hi, size=shape)


def real(*shape):
    return R.uniform(-2.0, 2.0, size=shape)


def unit(*shape):
    return R.uniform(0.1, 0.9, size=shape)


def simplex(*shape):
    x = R.uniform(0.2, 1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def spd(n, batch=()):
    a = R.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def tril(n, batch=()):
    return np.linalg.cholesky(spd(n, batch))


def _unit_rows(L):
    """Cholesky factors of correlation matrices in float64 (rows renormalised to unit length)."""
    L = L.double().numpy()
    return L / np.linalg.norm(L, axis=-1, keepdims=True)


class Case:
    """A distribution with float64 tensor parameters ``params`` (differentiated), fixed ``kwargs``, and a
    function giving support values (shape ``(4, *batch, *event)``)."""

    def __init__(self, name, params, values, kwargs=None, id=None, skip=(), stat=True, atol=1e-6):
        self.name, self.params, self.values, self.kwargs = name, params, values, kwargs or {}
        self.id = id or name
        self.skip = set(skip)
        self.stat = stat
        self.atol = atol


CASES = [
    Case("Normal", {"loc": real(3), "scale": pos(3)}, lambda: real(4, 3)),
    Case("LogNormal", {"loc": real(3), "scale": pos(3, hi=1.0)}, lambda: pos(4, 3)),
    Case("Uniform", {"low": -pos(3), "high": pos(3)}, lambda: R.uniform(-0.4, 0.4, (4, 3))),
    Case("Exponential", {"rate": pos(3)}, lambda: pos(4, 3)),
    Case("Laplace", {"loc": real(3), "scale": pos(3)}, lambda: real(4, 3)),
    Case("Cauchy", {"loc": real(3), "scale": pos(3)}, lambda: real(4, 3), stat=False),
    Case("StudentT", {"df": pos(3, lo=5.0, hi=8.0), "loc": real(3), "scale": pos(3)}, lambda: real(4, 3)),
    Case("StudentT", {"df": np.array([0.5, 1.5, 3.0])}, lambda: real(4, 3), id="StudentT-moments", stat=False),
    Case("Gamma", {"concentration": pos(3), "rate": pos(3)}, lambda: pos(4, 3), skip={"cdf"}),
    Case("Chi2", {"df": pos(3, lo=1.0, hi=5.0)}, lambda: pos(4, 3), skip={"cdf"}),
    Case("Beta", {"concentration1": pos(3), "concentration0": pos(3)}, lambda: unit(4, 3)),
    Case("Dirichlet", {"concentration": pos(3, 4)}, lambda: simplex(4, 3, 4)),
    Case("FisherSnedecor", {"df1": pos(3, lo=3.0, hi=6.0), "df2": pos(3, lo=9.0, hi=12.0)}, lambda: pos(4, 3)),
    Case("Gumbel", {"loc": real(3), "scale": pos(3)}, lambda: real(4, 3)),
    Case("HalfNormal", {"scale": pos(3)}, lambda: pos(4, 3)),
    Case("HalfCauchy", {"scale": pos(3)}, lambda: pos(4, 3), stat=False),
    Case("Pareto", {"scale": pos(3), "alpha": pos(3, lo=3.0, hi=5.0)}, lambda: pos(4, 3, lo=3.0, hi=5.0)),
    Case("Weibull", {"scale": pos(3), "concentration": pos(3, lo=1.0)}, lambda: pos(4, 3)),
    Case("Kumaraswamy", {"concentration1": pos(3, lo=1.0), "concentration0": pos(3, lo=1.0)}, lambda: unit(4, 3),
         skip={"mode"}, atol=1e-5),
    Case("LogisticNormal", {"loc": real(3, 2), "scale": pos(3, 2)}, lambda: simplex(4, 3, 3), stat=False),
    Case("Bernoulli", {"probs": unit(3)}, lambda: R.integers(0, 2, (4, 3)).astype(float)),
    Case("Bernoulli", {"logits": real(3)}, lambda: R.integers(0, 2, (4, 3)).astype(float), id="Bernoulli-logits"),
    Case("Categorical", {"probs": simplex(3, 5)}, lambda: R.integers(0, 5, (4, 3)).astype(float), stat=False),
    Case("Categorical", {"logits": real(3, 5)}, lambda: R.integers(0, 5, (4, 3)).astype(float),
         id="Categorical-logits", stat=False),
    Case("OneHotCategorical", {"probs": simplex(3, 5)}, lambda: np.eye(5)[R.integers(0, 5, (4, 3))]),
    Case("Poisson", {"rate": pos(3)}, lambda: R.integers(0, 6, (4, 3)).astype(float)),
    Case("Binomial", {"probs": unit(3)}, lambda: R.integers(0, 8, (4, 3)).astype(float),
         kwargs={"total_count": 7}),
    Case("Binomial", {"logits": real(3)}, lambda: R.integers(0, 8, (4, 3)).astype(float),
         kwargs={"total_count": 7}, id="Binomial-logits"),
    Case("Multinomial", {"probs": simplex(3, 4)}, lambda: R.multinomial(6, [0.25] * 4, (4, 3)).astype(float),
         kwargs={"total_count": 6}),
    Case("Geometric", {"probs": unit(3)}, lambda: R.integers(0, 6, (4, 3)).astype(float)),
    Case("NegativeBinomial", {"total_count": pos(3, lo=1.0, hi=5.0), "probs": unit(3)},
         lambda: R.integers(0, 6, (4, 3)).astype(float)),
    Case("MultivariateNormal", {"loc": real(3, 4), "covariance_matrix": spd(4, (3,))}, lambda: real(4, 3, 4)),
    Case("MultivariateNormal", {"loc": real(3, 4), "scale_tril": tril(4, (3,))}, lambda: real(4, 3, 4),
         id="MultivariateNormal-tril"),
    Case("MultivariateNormal", {"loc": real(4), "precision_matrix": spd(4)}, lambda: real(4, 1, 4),
         id="MultivariateNormal-precision"),
    Case("LowRankMultivariateNormal", {"loc": real(3, 4), "cov_factor": real(3, 4, 2), "cov_diag": pos(3, 4)},
         lambda: real(4, 3, 4)),
    # p = 0.4995 is inside the Taylor region, where (as in PyTorch) the icdf, hence rsample, ignores p
    Case("ContinuousBernoulli", {"probs": np.array([0.1, 0.4995, 0.8])}, lambda: unit(4, 3), stat=False),
    Case("ContinuousBernoulli", {"logits": real(3)}, lambda: unit(4, 3), id="ContinuousBernoulli-logits"),
    Case("VonMises", {"loc": real(3), "concentration": np.array([0.5, 2.0, 6.0])}, lambda: real(4, 3), stat=False),
    Case("InverseGamma", {"concentration": pos(3, lo=5.0, hi=8.0), "rate": pos(3)}, lambda: pos(4, 3), skip={"cdf"}),
    Case("GeneralizedPareto", {"loc": np.array([-1.0, 0.0, 0.5]), "scale": pos(3),
                               "concentration": np.array([-0.3, 0.0, 0.15])},
         lambda: np.array([-1.0, 0.0, 0.5]) + R.uniform(0.0, 0.5, (4, 3)), stat=False,
         skip={"log_prob", "cdf"}),  # PyTorch's log_prob / cdf fail in float64: test_generalized_pareto_float32
    Case("OneHotCategoricalStraightThrough", {"probs": simplex(3, 5)}, lambda: np.eye(5)[R.integers(0, 5, (4, 3))]),
    Case("LKJCholesky", {"concentration": pos(3)}, lambda: _unit_rows(TD.LKJCholesky(3, torch.ones(4, 3)).sample()),
         kwargs={"dim": 3}, stat=False),
    Case("Wishart", {"df": pos(3, lo=4.0, hi=6.0), "covariance_matrix": spd(3, (3,))},
         lambda: spd(3, (4, 3)) / 3),
    Case("Wishart", {"df": pos(3, lo=4.0, hi=6.0), "scale_tril": tril(3, (3,))}, lambda: spd(3, (4, 3)) / 3,
         id="Wishart-tril", stat=False),
    Case("RelaxedBernoulli", {"probs": unit(3)}, lambda: unit(4, 3), kwargs={"temperature": torch.tensor(0.7)},
         stat=False),
    Case("RelaxedOneHotCategorical", {"probs": simplex(3, 4)}, lambda: simplex(4, 3, 4),
         kwargs={"temperature": torch.tensor(0.7)}, stat=False),
]


def _kwargs_for(case, lib):
    out = {}
    for k, v in case.kwargs.items():
        out[k] = pl.tensor(v.numpy()) if (lib == "pl" and isinstance(v, torch.Tensor)) else v
    return out


def _build(case, lib, requires_grad=True):
    if lib == "torch":
        ps = {k: torch.tensor(v, dtype=torch.float64, requires_grad=requires_grad) for k, v in case.params.items()}
        return getattr(TD, case.name)(**ps, **_kwargs_for(case, lib)), ps
    ps = {k: pl.tensor(v, dtype=pl.float64, requires_grad=requires_grad) for k, v in case.params.items()}
    return getattr(D, case.name)(**ps, **_kwargs_for(case, lib)), ps


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x.detach().numpy())


def _quantities(case):
    """``(name, fn(dist, lib))`` for every quantity to compare."""
    values = case.values()
    probs = R.uniform(0.05, 0.95, size=values.shape[: values.ndim - len(_build(case, "torch", False)[0].event_shape)])

    def val(lib, v=values):
        return torch.tensor(v) if lib == "torch" else pl.tensor(v, dtype=pl.float64)

    q = [("log_prob", lambda d, lib: d.log_prob(val(lib))), ("entropy", lambda d, lib: d.entropy()),
         ("cdf", lambda d, lib: d.cdf(val(lib))), ("icdf", lambda d, lib: d.icdf(val(lib, probs)))]
    for prop in ("mean", "mode", "variance", "stddev"):
        q.append((prop, lambda d, lib, prop=prop: getattr(d, prop)))
    return [(n, f) for n, f in q if n not in case.skip]


def _torch_value(fn, d):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(d, "torch")
    except NotImplementedError:
        return None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_values_and_gradients_match_torch(case):
    td, tps = _build(case, "torch")
    pd, pps = _build(case, "pl")
    assert tuple(pd.batch_shape) == tuple(td.batch_shape)
    assert tuple(pd.event_shape) == tuple(td.event_shape)
    compared = 0
    for name, fn in _quantities(case):
        ref = _torch_value(fn, td)
        if ref is None:
            continue
        out = fn(pd, "pl")
        what = f"{case.id}.{name}"
        np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-6, atol=case.atol, err_msg=what)
        compared += 1
        finite = torch.isfinite(ref)
        if not ref.requires_grad or not bool(finite.any()):
            continue
        w = np.where(finite.numpy(), R.uniform(0.5, 1.5, size=ref.shape), 0.0)
        t_live = [v for v in tps.values()]
        tg = torch.autograd.grad((ref.where(finite, 0.0) * torch.tensor(w)).sum(), t_live, allow_unused=True,
                                 retain_graph=True)
        p_live = list(pps.values())
        pg = pl.autograd.grad((pl.where(pl.tensor(finite.numpy()), out, 0.0) * pl.tensor(w)).sum(), p_live,
                              allow_unused=True, retain_graph=True)
        for k, a, b in zip(tps, tg, pg):
            if a is None:
                assert b is None or np.allclose(_np(b), 0.0), f"{what}: d/d{k} should be zero"
                continue
            a, b = _np(a), _np(b)
            if k == "scale_tril":  # only the lower triangle is read (docs/semantics/distributions.md)
                a, b = np.tril(a), np.tril(b)
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=max(case.atol, 1e-6) * 10, err_msg=f"{what}: d/d{k}")
    assert compared >= 1


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sample_shapes_and_expand(case):
    pd, _ = _build(case, "pl", requires_grad=False)
    g = pl.Generator().manual_seed(1)
    batch, event = tuple(pd.batch_shape), tuple(pd.event_shape)
    for shape in ((), (5,), (2, 3)):
        x = pd.sample(shape, generator=g)
        assert tuple(x.shape) == shape + batch + event
        assert not x.requires_grad
        if case.name not in ("LogisticNormal",):
            assert bool(pd.support.check(x).all()), f"{case.id}: a sample outside the support"
    e = pd.expand((2,) + batch)
    assert tuple(e.batch_shape) == (2,) + batch and tuple(e.event_shape) == event
    assert tuple(e.sample(generator=g).shape) == (2,) + batch + event
    assert tuple(e.log_prob(pd.sample(generator=g)).shape) == (2,) + batch
    # the same generator seed draws the same values
    a = pd.sample((3,), generator=pl.Generator().manual_seed(5))
    b = pd.sample((3,), generator=pl.Generator().manual_seed(5))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


N_STAT = 20_000


@pytest.mark.parametrize("case", [c for c in CASES if c.stat], ids=[c.id for c in CASES if c.stat])
def test_sample_mean_and_variance(case):
    """The sample mean within 5 standard errors of ``mean``; the sample variance within 5 standard errors
    of ``variance`` (its standard error from the fourth moment estimated from the same draws)."""
    pd, _ = _build(case, "pl", requires_grad=False)
    x = pd.sample((N_STAT,), generator=pl.Generator().manual_seed(11)).numpy()
    mean, var = pd.mean.detach().numpy(), pd.variance.detach().numpy()
    se = np.sqrt(var / N_STAT)
    z = np.abs(x.mean(0) - mean) / se
    assert z.max() < 5, f"{case.id}: sample mean off by {z.max():.1f} standard errors"
    m4 = ((x - x.mean(0)) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(m4 - var ** 2, 1e-30) / N_STAT)
    zv = np.abs(x.var(0) - var) / se_var
    assert zv.max() < 5, f"{case.id}: sample variance off by {zv.max():.1f} standard errors"


RSAMPLE = [c for c in CASES if c.stat and getattr(TD, c.name).has_rsample]


@pytest.mark.parametrize("case", RSAMPLE, ids=[c.id for c in RSAMPLE])
def test_rsample_gradient_is_the_gradient_of_the_mean(case):
    """Pathwise gradients: ``d/dtheta mean(rsample)`` estimates ``d/dtheta E[x]``."""
    pd, ps = _build(case, "pl")
    assert pd.has_rsample
    x = pd.rsample((N_STAT,), generator=pl.Generator().manual_seed(3))
    assert x.requires_grad
    w = pl.tensor(R.uniform(0.5, 1.5, size=x.shape[1:]))
    est = pl.autograd.grad((x.mean(0) * w).sum(), list(ps.values()), allow_unused=True, retain_graph=True)
    exact = pl.autograd.grad((pd.mean * w).sum(), list(ps.values()), allow_unused=True, retain_graph=True)
    for k, a, b in zip(ps, est, exact):
        if b is None:  # the mean does not depend on this parameter (a scale): nothing exact to compare with
            continue
        # per-draw gradients have variance ~ var(x) / scale^2; 6 standard errors of a loose bound
        tol = 6 * np.sqrt(np.maximum(pd.variance.detach().numpy(), 1.0).max() / N_STAT) * 3
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=tol, rtol=0.05, err_msg=f"{case.id}: d/d{k}")


def test_standard_gamma_gradient_matches_torch_and_is_twice_differentiable():
    alpha = np.array([0.3, 1.0, 2.5, 9.0, 30.0])
    x = pl._standard_gamma(pl.tensor(alpha, requires_grad=True).expand(4, 5),
                           generator=pl.Generator().manual_seed(0))
    a = pl.tensor(alpha, requires_grad=True)
    x = pl._standard_gamma(a.expand(4, 5), generator=pl.Generator().manual_seed(0))
    (g,) = pl.autograd.grad(x.sum(), a, create_graph=True)
    ref = torch._standard_gamma_grad(torch.tensor(alpha).expand(4, 5), torch.tensor(x.detach().numpy())).sum(0)
    np.testing.assert_allclose(g.detach().numpy(), ref.numpy(), rtol=1e-6)
    (gg,) = pl.autograd.grad(g.sum(), a)
    assert np.isfinite(gg.numpy()).all()
    # E[x] = alpha and E[dx/dalpha] = 1 on many draws
    a = pl.tensor(np.array([0.5, 2.0, 12.0]), requires_grad=True)
    xs = pl._standard_gamma(a.expand(N_STAT, 3), generator=pl.Generator().manual_seed(1))
    (g,) = pl.autograd.grad(xs.mean(0).sum(), a)
    np.testing.assert_allclose(g.numpy(), 1.0, atol=0.05)


def test_categorical_sample_frequencies():
    probs = simplex(2, 4)
    for d in (D.Categorical(pl.tensor(probs)), D.OneHotCategorical(pl.tensor(probs))):
        s = d.sample((N_STAT,), generator=pl.Generator().manual_seed(8)).numpy()
        idx = s.argmax(-1) if s.ndim == 3 else s
        for b in range(2):
            freq = np.bincount(idx[:, b].astype(int), minlength=4) / N_STAT
            assert (np.abs(freq - probs[b]) < 5 * np.sqrt(probs[b] * (1 - probs[b]) / N_STAT)).all()


def test_binomial_sampler_statistics():
    n, p = pl.full((N_STAT,), 10.0), pl.full((N_STAT,), 0.3)
    x = pl.binomial(n, p, generator=pl.Generator().manual_seed(2)).numpy()
    assert abs(x.mean() - 3.0) < 5 * math.sqrt(2.1 / N_STAT)
    assert set(np.unique(x)) <= set(range(11))


# -- KL divergences ---------------------------------------------------------------------------------------------
def _kl_examples():
    """Two parameter sets per type, batch shape (3,), in the supports the cross-family formulas need."""
    return {
        "Bernoulli": [{"probs": unit(3)}, {"probs": unit(3)}],
        "Beta": [{"concentration1": pos(3), "concentration0": pos(3)}] * 2,
        "Binomial": [{"total_count": 8.0, "probs": unit(3)}, {"total_count": 8.0, "probs": unit(3)}],
        "Categorical": [{"probs": simplex(3, 4)}, {"probs": simplex(3, 4)}],
        "Cauchy": [{"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)}],
        "ContinuousBernoulli": [{"probs": np.array([0.2, 0.4999, 0.7])}, {"probs": unit(3)}],
        "Dirichlet": [{"concentration": pos(3, 4)}, {"concentration": pos(3, 4)}],
        "Exponential": [{"rate": pos(3)}, {"rate": pos(3)}],
        "Gamma": [{"concentration": pos(3), "rate": pos(3)}, {"concentration": pos(3), "rate": pos(3)}],
        "Geometric": [{"probs": unit(3)}, {"probs": unit(3)}],
        "Gumbel": [{"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)}],
        "HalfNormal": [{"scale": pos(3)}, {"scale": pos(3)}],
        "Laplace": [{"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)}],
        "LowRankMultivariateNormal": [{"loc": real(3, 4), "cov_factor": real(3, 4, 2), "cov_diag": pos(3, 4)},
                                      {"loc": real(4), "cov_factor": real(4, 3), "cov_diag": pos(4)}],
        "MultivariateNormal": [{"loc": real(3, 4), "scale_tril": tril(4, (3,))},
                               {"loc": real(4), "covariance_matrix": spd(4)}],
        "Normal": [{"loc": real(3), "scale": pos(3)}, {"loc": real(3), "scale": pos(3)}],
        "OneHotCategorical": [{"probs": simplex(3, 4)}, {"probs": simplex(3, 4)}],
        "Pareto": [{"scale": pos(3, lo=0.5, hi=1.0), "alpha": pos(3, lo=2.5, hi=4.0)},
                   {"scale": pos(3, lo=0.2, hi=0.4), "alpha": pos(3)}],
        "Poisson": [{"rate": pos(3)}, {"rate": pos(3)}],
        "Wishart": [{"df": pos(3, lo=4.0, hi=6.0), "covariance_matrix": spd(3, (3,))},
                    {"df": pos(3, lo=4.0, hi=6.0), "scale_tril": tril(3, (3,))}],
        "Uniform": [{"low": R.uniform(0.1, 0.3, 3), "high": R.uniform(0.6, 0.9, 3)},
                    {"low": R.uniform(0.0, 0.05, 3), "high": R.uniform(0.95, 1.0, 3)}],
    }


def _make(name, params, lib):
    ns = TD if lib == "torch" else D
    conv = {}
    for k, v in params.items():
        if isinstance(v, float):
            conv[k] = v
        elif lib == "torch":
            conv[k] = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        else:
            conv[k] = pl.tensor(v, dtype=pl.float64, requires_grad=True)
    return getattr(ns, name)(**conv), [v for v in conv.values() if not isinstance(v, float)]


def _torch_pairs():
    return sorted((p.__name__, q.__name__) for p, q in TD.kl._KL_REGISTRY)


def test_every_torch_kl_pair_is_registered():
    ours = sorted((p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY)
    assert ours == _torch_pairs()


KL_PAIRS = [pq for pq in _torch_pairs() if pq[0] in _kl_examples() and pq[1] in _kl_examples()] + [
    ("Wishart", "Wishart")]  # through the exponential-family (Bregman) registration


@pytest.mark.parametrize("pq", KL_PAIRS, ids=[f"{p}-{q}" for p, q in KL_PAIRS])
def test_kl_divergence_matches_torch(pq):
    ex = _kl_examples()
    p_name, q_name = pq
    pp, qp = ex[p_name][0], ex[q_name][1]
    tp, tpv = _make(p_name, pp, "torch")
    tq, tqv = _make(q_name, qp, "torch")
    lp, lpv = _make(p_name, pp, "pl")
    lq, lqv = _make(q_name, qp, "pl")
    ref = TD.kl_divergence(tp, tq)
    out = D.kl_divergence(lp, lq)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-6, atol=1e-8, err_msg=f"KL({p_name} || {q_name})")
    finite = torch.isfinite(ref)
    if not ref.requires_grad or not bool(finite.any()):
        return
    tg = torch.autograd.grad(ref.where(finite, 0.0).sum(), tpv + tqv, allow_unused=True)
    pg = pl.autograd.grad(pl.where(pl.tensor(finite.numpy()), out, 0.0).sum(), lpv + lqv, allow_unused=True)
    for a, b, v in zip(tg, pg, tpv + tqv):
        if a is None:
            continue
        a, b = _np(a), _np(b)
        if v.ndim >= 2 and np.array_equal(_np(v), np.tril(_np(v))):  # scale_tril: its lower triangle is read
            a, b = np.tril(a), np.tril(b)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7, err_msg=f"grad KL({p_name} || {q_name})")


def test_kl_of_composites_and_exponential_family_bregman():
    loc, scale = real(3, 2), pos(3, 2)
    p = D.Independent(D.Normal(pl.tensor(loc), pl.tensor(scale)), 1)
    q = D.Independent(D.Normal(pl.tensor(loc * 0), pl.tensor(scale * 0 + 1)), 1)
    ref = TD.kl_divergence(TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1),
                           TD.Independent(TD.Normal(torch.tensor(loc * 0), torch.tensor(scale * 0 + 1)), 1))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), ref.numpy(), rtol=1e-6)
    ln_p, ln_q = D.LogNormal(pl.tensor(loc), pl.tensor(scale)), D.LogNormal(pl.tensor(loc * 0), pl.tensor(scale))
    ref = TD.kl_divergence(TD.LogNormal(torch.tensor(loc), torch.tensor(scale)),
                           TD.LogNormal(torch.tensor(loc * 0), torch.tensor(scale)))
    np.testing.assert_allclose(D.kl_divergence(ln_p, ln_q).numpy(), ref.numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError):  # different transforms
        D.kl_divergence(ln_p, D.TransformedDistribution(D.Normal(pl.tensor(loc), 1.0), T.SigmoidTransform()))
    # the Bregman divergence of the log normaliser equals the closed form
    a, b = D.Normal(pl.tensor(loc), pl.tensor(scale)), D.Normal(pl.tensor(loc * 0.5), pl.tensor(scale + 1))
    np.testing.assert_allclose(D.kl._kl_expfamily_expfamily(a, b).detach().numpy(), D.kl_divergence(a, b).numpy(),
                               rtol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(pl.tensor([0.5, 0.5])))


def test_register_kl_most_specific_match():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return pl.zeros(p.batch_shape)

    try:
        assert D.kl_divergence(MyNormal(1.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0
        assert D.kl_divergence(D.Normal(1.0, 1.0), MyNormal(0.0, 1.0)).item() == pytest.approx(0.5)
    finally:
        del D.kl._KL_REGISTRY[MyNormal, D.Normal]
        D.kl._KL_MEMOIZE.clear()


# -- other distributions and composites -----------------------------------------------------------------------------
def test_mixture_same_family_matches_torch():
    logits, loc, scale = real(2, 3), real(2, 3), pos(2, 3)
    tm = TD.MixtureSameFamily(TD.Categorical(logits=torch.tensor(logits)),
                              TD.Normal(torch.tensor(loc, requires_grad=True), torch.tensor(scale)))
    lm = D.MixtureSameFamily(D.Categorical(logits=pl.tensor(logits)),
                             D.Normal(pl.tensor(loc, requires_grad=True), pl.tensor(scale)))
    v = real(5, 2)
    for f in (lambda d, t: d.log_prob(t(v)), lambda d, t: d.cdf(t(v)), lambda d, t: d.mean,
              lambda d, t: d.variance):
        np.testing.assert_allclose(_np(f(lm, pl.tensor)), _np(f(tm, torch.tensor)), rtol=1e-6, atol=1e-9)
    x = lm.sample((N_STAT,), generator=pl.Generator().manual_seed(4)).numpy()
    assert x.shape == (N_STAT, 2)
    se = np.sqrt(lm.variance.detach().numpy() / N_STAT)
    assert (np.abs(x.mean(0) - lm.mean.detach().numpy()) < 5 * se).all()
    # a multivariate component family
    mv = D.MixtureSameFamily(D.Categorical(probs=pl.tensor(simplex(3))),
                             D.Independent(D.Normal(pl.tensor(real(3, 2)), pl.tensor(pos(3, 2))), 1))
    assert tuple(mv.sample((4,)).shape) == (4, 2) and tuple(mv.log_prob(pl.zeros(5, 2)).shape) == (5,)


def test_independent_and_transformed_distribution():
    loc, scale = real(3, 2), pos(3, 2)
    base = D.Normal(pl.tensor(loc), pl.tensor(scale))
    ind = D.Independent(base, 1)
    v = pl.tensor(real(4, 3, 2))
    np.testing.assert_allclose(ind.log_prob(v).numpy(), base.log_prob(v).sum(-1).numpy())
    assert ind.entropy().shape == (3,)
    td = D.TransformedDistribution(D.Normal(pl.tensor(loc), pl.tensor(scale)),
                                   [T.AffineTransform(1.0, 2.0), T.ExpTransform()])
    ref = TD.TransformedDistribution(TD.Normal(torch.tensor(loc), torch.tensor(scale)),
                                     [TD.transforms.AffineTransform(1.0, 2.0), TD.transforms.ExpTransform()])
    y = pos(4, 3, 2)
    np.testing.assert_allclose(td.log_prob(pl.tensor(y)).numpy(), ref.log_prob(torch.tensor(y)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(td.cdf(pl.tensor(y)).numpy(), ref.cdf(torch.tensor(y)).numpy(), rtol=1e-6)
    u = unit(3, 2)
    np.testing.assert_allclose(td.icdf(pl.tensor(u)).numpy(), ref.icdf(torch.tensor(u)).numpy(), rtol=1e-6)
    # a decreasing transform flips the cdf
    dec = D.TransformedDistribution(D.Normal(0.0, 1.0), T.AffineTransform(0.0, -1.0))
    assert dec.cdf(pl.tensor(0.5)).item() == pytest.approx(1 - D.Normal(0.0, 1.0).cdf(pl.tensor(-0.5)).item())
    # reparameterised through the transforms
    loc_t = pl.tensor(loc, requires_grad=True)
    z = D.TransformedDistribution(D.Normal(loc_t, pl.tensor(scale)), T.ExpTransform()).rsample()
    (g,) = pl.autograd.grad(z.sum(), loc_t)
    np.testing.assert_allclose(g.numpy(), z.detach().numpy())


def test_relaxed_distributions_rsample():
    p = pl.tensor(unit(3), requires_grad=True)
    rb = D.RelaxedBernoulli(pl.tensor(0.5), probs=p)
    x = rb.rsample((2000,), generator=pl.Generator().manual_seed(0))
    assert bool(((x > 0) & (x < 1)).all())
    (g,) = pl.autograd.grad(x.mean(), p)
    assert (g.numpy() > 0).all()  # a larger probability moves the relaxed samples up
    rc = D.RelaxedOneHotCategorical(pl.tensor(0.5), probs=pl.tensor(simplex(3, 4)))
    y = rc.rsample((5,))
    np.testing.assert_allclose(y.sum(-1).numpy(), 1.0, rtol=1e-6)
    # at a low temperature the relaxed one-hot's argmax frequencies are the probabilities
    probs = np.array([0.1, 0.2, 0.7])
    cold = D.RelaxedOneHotCategorical(pl.tensor(0.05), probs=pl.tensor(probs))
    s = cold.sample((N_STAT,), generator=pl.Generator().manual_seed(6)).numpy().argmax(-1)
    freq = np.bincount(s, minlength=3) / N_STAT
    assert (np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / N_STAT)).all()


def test_enumerate_support_matches_torch():
    for name, params in (("Bernoulli", {"probs": unit(3)}), ("Categorical", {"probs": simplex(3, 4)}),
                         ("OneHotCategorical", {"probs": simplex(3, 4)}), ("Binomial", {"probs": unit(3)})):
        kw = {"total_count": 4} if name == "Binomial" else {}
        t = getattr(TD, name)(**{k: torch.tensor(v) for k, v in params.items()}, **kw)
        p = getattr(D, name)(**{k: pl.tensor(v) for k, v in params.items()}, **kw)
        for expand in (True, False):
            np.testing.assert_array_equal(p.enumerate_support(expand).numpy(), t.enumerate_support(expand).numpy())
    b = D.Binomial(4, pl.tensor(unit(3)))
    np.testing.assert_allclose(b.entropy().numpy(), TD.Binomial(4, torch.tensor(b.probs.numpy())).entropy().numpy(),
                               rtol=1e-6)


# -- transforms -------------------------------------------------------------------------------------------------
def _transform_pairs():
    sc = pos(3)
    return [
        (T.ExpTransform(), TD.transforms.ExpTransform(), real(4, 3)),
        (T.AffineTransform(pl.tensor(real(3)), pl.tensor(sc)), TD.transforms.AffineTransform(
            torch.tensor(real(3) * 0 + 0), torch.tensor(sc)), real(4, 3)),
        (T.SigmoidTransform(), TD.transforms.SigmoidTransform(), real(4, 3)),
        (T.TanhTransform(), TD.transforms.TanhTransform(), real(4, 3)),
        (T.SoftplusTransform(), TD.transforms.SoftplusTransform(), real(4, 3)),
        (T.PowerTransform(pl.tensor(2.5)), TD.transforms.PowerTransform(torch.tensor(2.5)), pos(4, 3)),
        (T.StickBreakingTransform(), TD.transforms.StickBreakingTransform(), real(4, 3)),
        (T.CorrCholeskyTransform(), TD.transforms.CorrCholeskyTransform(), real(4, 6)),
        (T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.ExpTransform()]),
         TD.transforms.ComposeTransform([TD.transforms.AffineTransform(0.5, 2.0), TD.transforms.ExpTransform()]),
         real(4, 3)),
        (T.IndependentTransform(T.ExpTransform(), 1), TD.transforms.IndependentTransform(
            TD.transforms.ExpTransform(), 1), real(4, 3)),
        (T.ReshapeTransform((6,), (2, 3)), TD.transforms.ReshapeTransform((6,), (2, 3)), real(4, 6)),
        (T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)], dim=-1, lengths=[1, 2]),
         TD.transforms.CatTransform([TD.transforms.ExpTransform(), TD.transforms.AffineTransform(1.0, 3.0)], dim=-1,
                                    lengths=[1, 2]), real(4, 3)),
        (T.StackTransform([T.ExpTransform(), T.SigmoidTransform(), T.AffineTransform(1.0, 3.0)], dim=-1),
         TD.transforms.StackTransform([TD.transforms.ExpTransform(), TD.transforms.SigmoidTransform(),
                                       TD.transforms.AffineTransform(1.0, 3.0)], dim=-1), real(4, 3)),
    ]


def test_transforms_match_torch():
    for ours, theirs, x in _transform_pairs():
        if isinstance(ours, T.AffineTransform):
            theirs = TD.transforms.AffineTransform(torch.tensor(ours.loc.numpy()), torch.tensor(ours.scale.numpy()))
        what = type(ours).__name__
        xt, xp = torch.tensor(x, requires_grad=True), pl.tensor(x, requires_grad=True)
        yt, yp = theirs(xt), ours(xp)
        np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-12, err_msg=what)
        np.testing.assert_allclose(ours.inv(pl.tensor(yt.detach().numpy())).numpy(), x, rtol=1e-5, atol=1e-8,
                                   err_msg=f"{what}.inv")
        assert ours.forward_shape(x.shape) == tuple(theirs.forward_shape(x.shape)), what
        assert ours.inverse_shape(tuple(yt.shape)) == tuple(theirs.inverse_shape(yt.shape)), what
        assert ours.bijective == theirs.bijective and ours.domain.event_dim == theirs.domain.event_dim, what
        if not theirs.bijective:
            continue
        lt, lp = theirs.log_abs_det_jacobian(xt, yt), ours.log_abs_det_jacobian(xp, yp)
        np.testing.assert_allclose(lp.detach().numpy(), lt.detach().numpy(), rtol=1e-6, atol=1e-10,
                                   err_msg=f"{what}.log_abs_det_jacobian")
        (gt,) = torch.autograd.grad(lt.sum() + yt.sum(), xt)
        (gp,) = pl.autograd.grad(lp.sum() + yp.sum(), xp)
        np.testing.assert_allclose(gp.numpy(), gt.numpy(), rtol=1e-5, atol=1e-9, err_msg=f"{what}: gradient")
    # the non-bijective ones
    x = real(3, 4)
    np.testing.assert_allclose(T.SoftmaxTransform()(pl.tensor(x)).numpy(),
                               TD.transforms.SoftmaxTransform()(torch.tensor(x)).numpy(), rtol=1e-6)
    m = real(2, 3, 3)
    np.testing.assert_allclose(T.LowerCholeskyTransform()(pl.tensor(m)).numpy(),
                               TD.transforms.LowerCholeskyTransform()(torch.tensor(m)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(T.AbsTransform()(pl.tensor(x)).numpy(), np.abs(x))


def test_transform_cache_and_inverse_identity():
    t = T.ExpTransform(cache_size=1)
    x = pl.tensor(real(3))
    y = t(x)
    assert t.inv(y) is x
    assert t.inv.inv is t
    assert T.ExpTransform() == T.ExpTransform() and T.ExpTransform() != T.SigmoidTransform()
    assert T.identity_transform(x) is x


@pytest.mark.parametrize("c", [constraints.real, constraints.positive, constraints.greater_than(1.5),
                               constraints.less_than(-1.0), constraints.interval(-2.0, 3.0),
                               constraints.unit_interval, constraints.simplex, constraints.corr_cholesky,
                               constraints.independent(constraints.positive, 1), constraints.nonnegative],
                         ids=repr)
def test_biject_to_and_transform_to_land_in_the_constraint(c):
    tc = {"Real()": TD.constraints.real, "GreaterThan(lower_bound=0.0)": TD.constraints.positive}
    for registry, ref_registry in ((D.biject_to, TD.biject_to), (D.transform_to, TD.transform_to)):
        t = registry(c)
        shape = (4, 6) if c is constraints.corr_cholesky else (4, 3)
        x = pl.tensor(real(*shape))
        y = t(x)
        assert bool(c.check(y).all()), f"{registry} {c!r}"
        if t.bijective:
            np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-5, atol=1e-7)
        if repr(c) in tc:
            rt = ref_registry(tc[repr(c)])
            np.testing.assert_allclose(y.numpy(), rt(torch.tensor(x.numpy())).numpy(), rtol=1e-6)


def test_constraints_check():
    assert constraints.positive.check(pl.tensor([1.0, -1.0, 0.0])).tolist() == [True, False, False]
    assert constraints.simplex.check(pl.tensor([[0.5, 0.5], [0.5, 0.6]])).tolist() == [True, False]
    assert constraints.integer_interval(0, 3).check(pl.tensor([0.0, 3.0, 1.5, 4.0])).tolist() == [True, True, False,
                                                                                                  False]
    assert constraints.lower_cholesky.check(pl.tensor(tril(3))).item()
    assert not constraints.lower_cholesky.check(pl.tensor(spd(3))).item()
    assert constraints.positive_definite.check(pl.tensor(spd(3, (2,)))).tolist() == [True, True]
    assert not constraints.positive_definite.check(pl.tensor(-spd(3))).item()
    assert constraints.one_hot.check(pl.tensor([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]
    assert constraints.is_dependent(constraints.dependent) and not constraints.is_dependent(constraints.real)
    assert D.Uniform(0.0, 2.0).support.check(pl.tensor([1.0, 2.5])).tolist() == [True, False]


# -- validation --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build,match", [
    (lambda: D.Normal(pl.tensor([0.0]), pl.tensor([-1.0])), r"parameter scale .* of distribution Normal"),
    (lambda: D.Gamma(pl.tensor([1.0]), pl.tensor([0.0])), r"parameter rate .* of distribution Gamma"),
    (lambda: D.Beta(pl.tensor([-1.0]), pl.tensor([1.0])), r"parameter concentration .* Dirichlet"),
    (lambda: D.Bernoulli(probs=pl.tensor([1.5])), r"parameter probs .* Bernoulli"),
    (lambda: D.Bernoulli(probs=pl.tensor([0.5]), logits=pl.tensor([0.0])), "Either `probs` or `logits`"),
    (lambda: D.Categorical(probs=pl.tensor([0.5, -0.5])), r"parameter probs .* Categorical"),
    (lambda: D.Categorical(probs=pl.tensor(0.5)), "at least one-dimensional"),
    (lambda: D.Uniform(pl.tensor([1.0]), pl.tensor([0.0])), r"parameter low .* Uniform"),
    (lambda: D.Poisson(pl.tensor([-1.0])), r"parameter rate .* Poisson"),
    (lambda: D.MultivariateNormal(pl.zeros(2)), "Exactly one of covariance_matrix"),
    (lambda: D.MultivariateNormal(pl.zeros(2), covariance_matrix=-pl.eye(2)), "covariance_matrix"),
    (lambda: D.MultivariateNormal(pl.tensor(0.0), covariance_matrix=pl.eye(2)), "loc must be at least"),
    (lambda: D.Dirichlet(pl.tensor([1.0, 0.0])), r"parameter concentration .* Dirichlet"),
    (lambda: D.Geometric(probs=pl.tensor([0.0])), "probs .* positive"),
    (lambda: D.StudentT(pl.tensor([-1.0])), "parameter df"),
    (lambda: D.Normal(0.0, 1.0).log_prob(1.0), "must be a Tensor"),
    (lambda: D.Exponential(pl.tensor([1.0])).log_prob(pl.tensor([-1.0])), "within the support"),
    (lambda: D.Normal(pl.zeros(3), 1.0).log_prob(pl.zeros(2)), "broadcastable"),
    (lambda: D.Categorical(probs=pl.tensor([0.5, 0.5])).log_prob(pl.tensor(2.0)), "within the support"),
    (lambda: D.LowRankMultivariateNormal(pl.zeros(3), pl.zeros(2, 1), pl.ones(3)), "cov_factor must be"),
])
def test_validation_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_validation_can_be_turned_off():
    d = D.Normal(pl.tensor([0.0]), pl.tensor([-1.0]), validate_args=False)
    assert math.isnan(d.log_prob(pl.tensor([0.0])).item())
    D.Distribution.set_default_validate_args(False)
    try:
        D.Exponential(pl.tensor([-1.0]))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Exponential(pl.tensor([-1.0]))


def test_gamma_cdf_needs_gammainc():
    g = D.Gamma(pl.tensor([2.0]), pl.tensor([1.0]))
    if hasattr(pl.special, "gammainc"):
        ref = TD.Gamma(torch.tensor([2.0]), torch.tensor([1.0])).cdf(torch.tensor([1.5]))
        np.testing.assert_allclose(g.cdf(pl.tensor([1.5])).numpy(), ref.numpy(), rtol=1e-5)
    else:
        with pytest.raises(NotImplementedError, match="gammainc"):
            g.cdf(pl.tensor([1.5]))


def test_scalar_parameters_and_repr():
    d = D.Normal(0.0, 1.0)
    assert d.batch_shape == () and d.sample().shape == ()
    assert d.sample((3,)).shape == (3,)
    assert repr(d) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(constraints.interval(0.0, 1.0)) == "Interval(lower_bound=0.0, upper_bound=1.0)"
    assert D.Normal(pl.zeros(2, dtype=pl.float32), 1.0).sample().dtype == pl.float32
    assert D.Beta(2.0, 3.0).mean.item() == pytest.approx(0.4)
    assert D.Chi2(4.0).df.item() == pytest.approx(4.0)


def test_higher_order_gradient_of_log_prob():
    loc = pl.tensor([0.3], dtype=pl.float64, requires_grad=True)
    scale = pl.tensor([1.7], dtype=pl.float64, requires_grad=True)
    tl, ts = (torch.tensor([0.3], dtype=torch.float64, requires_grad=True),
              torch.tensor([1.7], dtype=torch.float64, requires_grad=True))
    v = np.array([0.9])
    lp = D.StudentT(3.0, loc, scale).log_prob(pl.tensor(v))
    tlp = TD.StudentT(3.0, tl, ts).log_prob(torch.tensor(v))
    (g,) = pl.autograd.grad(lp.sum(), scale, create_graph=True)
    (tg,) = torch.autograd.grad(tlp.sum(), ts, create_graph=True)
    (gg,) = pl.autograd.grad(g.sum(), loc)
    (tgg,) = torch.autograd.grad(tg.sum(), tl)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-6)


def test_generalized_pareto_float32():
    loc, scale, conc = np.array([-1.0, 0.0, 0.5]), pos(3), np.array([-0.3, 0.0, 0.15])
    v = (loc + R.uniform(0.0, 0.5, (4, 3))).astype(np.float32)
    tp = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in (loc, scale, conc)]
    pp = [pl.tensor(a, dtype=pl.float32, requires_grad=True) for a in (loc, scale, conc)]
    t, p = TD.GeneralizedPareto(*tp), D.GeneralizedPareto(*pp)
    for f in (lambda d, x: d.log_prob(x), lambda d, x: d.cdf(x)):
        ref, out = f(t, torch.tensor(v)), f(p, pl.tensor(v))
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
        tg = torch.autograd.grad(ref.sum(), tp, allow_unused=True)
        pg = pl.autograd.grad(out.sum(), pp, allow_unused=True)
        for a, b in zip(tg, pg):
            if a is not None:
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)


def test_von_mises_samples():
    loc, kappa = np.array([0.5, -2.0, 3.0]), np.array([0.5, 2.0, 8.0])
    d = D.VonMises(pl.tensor(loc), pl.tensor(kappa))
    x = d.sample((N_STAT,), generator=pl.Generator().manual_seed(9)).numpy()
    assert ((x >= -math.pi) & (x < math.pi)).all()
    # the mean resultant vector: E[exp(i x)] = I1(kappa) / I0(kappa) exp(i loc)
    from scipy.special import i0, i1
    r = i1(kappa) / i0(kappa)
    c, s = np.cos(x).mean(0), np.sin(x).mean(0)
    np.testing.assert_allclose(c, r * np.cos(loc), atol=5 / math.sqrt(N_STAT))
    np.testing.assert_allclose(s, r * np.sin(loc), atol=5 / math.sqrt(N_STAT))


def test_straight_through_gradient_is_the_probability_gradient():
    probs = pl.tensor(simplex(2, 3), requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(probs=probs)
    x = d.rsample((4,))
    assert set(np.unique(x.detach().numpy())) <= {0.0, 1.0}
    (g,) = pl.autograd.grad((x * pl.tensor([1.0, 2.0, 3.0])).sum(), probs)
    # probs are normalised: d/dp of sum(w p / sum(p)) * 4 draws
    p = probs.detach().numpy()
    w = np.array([1.0, 2.0, 3.0])
    expected = 4 * (w / p.sum(-1, keepdims=True) - (w * p).sum(-1, keepdims=True) / p.sum(-1, keepdims=True) ** 2)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-5)


def test_kumaraswamy_mode_maximises_the_density():
    a, b = pl.tensor([2.0, 3.0, 1.5]), pl.tensor([2.5, 1.2, 4.0])
    d = D.Kumaraswamy(a, b)
    grid = pl.linspace(0.001, 0.999, 9999, dtype=pl.float64).unsqueeze(-1)
    best = grid[d.log_prob(grid.float()).argmax(0), 0]
    np.testing.assert_allclose(d.mode.numpy(), best.numpy(), atol=2e-4)
    assert math.isnan(D.Kumaraswamy(0.5, 2.0).mode.item())


def test_multivariate_normal_matrices_match_torch():
    loc, cov = real(2, 3), spd(3, (2,))
    t = TD.MultivariateNormal(torch.tensor(loc), covariance_matrix=torch.tensor(cov))
    for p in (D.MultivariateNormal(pl.tensor(loc), covariance_matrix=pl.tensor(cov)),
              D.MultivariateNormal(pl.tensor(loc), precision_matrix=pl.tensor(np.linalg.inv(cov))),
              D.MultivariateNormal(pl.tensor(loc), scale_tril=pl.tensor(np.linalg.cholesky(cov)))):
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            np.testing.assert_allclose(getattr(p, name).numpy(), getattr(t, name).numpy(), rtol=1e-6, atol=1e-10,
                                       err_msg=name)
    w, dg = real(2, 3, 2), pos(2, 3)
    t = TD.LowRankMultivariateNormal(torch.tensor(loc), torch.tensor(w), torch.tensor(dg))
    p = D.LowRankMultivariateNormal(pl.tensor(loc), pl.tensor(w), pl.tensor(dg))
    for name in ("covariance_matrix", "precision_matrix", "scale_tril", "variance"):
        np.testing.assert_allclose(getattr(p, name).numpy(), getattr(t, name).numpy(), rtol=1e-6, atol=1e-10,
                                   err_msg=name)


def test_lkj_cholesky_marginal_correlations():
    """Each correlation of an LKJ(eta) matrix in dimension d is 2 Beta(b, b) - 1 with b = eta - 1 + d / 2:
    mean 0, variance 1 / (2 b + 1). (PyTorch's sampler fails this for the correlations past the first row.)"""
    d = D.LKJCholesky(3, pl.tensor([0.5, 2.0]))
    L = d.sample((N_STAT,), generator=pl.Generator().manual_seed(10))
    assert tuple(L.shape) == (N_STAT, 2, 3, 3) and bool(constraints.corr_cholesky.check(L).all())
    C = (L @ L.mT).numpy()
    np.testing.assert_allclose(np.diagonal(C, axis1=-2, axis2=-1), 1.0, atol=1e-5)
    b = np.array([0.5, 2.0]) - 1 + 3 / 2
    var = 1 / (2 * b + 1)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        r = C[:, :, i, j]
        assert (np.abs(r.mean(0)) < 5 * np.sqrt(var / N_STAT)).all()
        m4 = (r ** 4).mean(0)
        assert (np.abs((r ** 2).mean(0) - var) < 5 * np.sqrt((m4 - var ** 2) / N_STAT)).all(), (i, j)
