"""Random sampling: reproducibility for a seed, generator isolation, and distribution
checks (mean/variance within a few standard errors, chi-square for multinomial)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pylucid as pl

N = 200_000


def _z(sample_mean, mean, var, n):
    """|sample mean - mean| in standard errors."""
    return abs(sample_mean - mean) / np.sqrt(var / n)


def test_manual_seed_reproduces_every_sampler():
    def draw():
        pl.manual_seed(123)
        x = pl.empty(5)
        return [pl.rand(3).numpy(), pl.randn(3).numpy(), pl.randint(0, 9, (3,)).numpy(), pl.randperm(5).numpy(),
                pl.normal(pl.zeros(3), 2.0).numpy(), pl.bernoulli(pl.full((4,), 0.5)).numpy(),
                pl.multinomial(pl.tensor([1.0, 2.0, 3.0]), 2).numpy(), pl.poisson(pl.full((3,), 4.0)).numpy(),
                x.uniform_(-1, 1).numpy().copy(), x.normal_(1, 2).numpy().copy(), x.exponential_(3).numpy().copy(),
                x.bernoulli_(0.3).numpy().copy(), x.random_(0, 10).numpy().copy(), x.geometric_(0.4).numpy().copy(),
                x.cauchy_().numpy().copy(), x.log_normal_().numpy().copy()]

    a, b = draw(), draw()
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_generator_kwarg_is_isolated_from_default():
    g = pl.Generator().manual_seed(7)
    a = pl.normal(0.0, 1.0, size=(4,), generator=g)
    pl.manual_seed(0)
    pl.rand(10)  # the default generator moves; g does not
    g.manual_seed(7)
    b = pl.normal(0.0, 1.0, size=(4,), generator=g)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    x, y = pl.empty(3), pl.empty(3)
    x.uniform_(generator=g.manual_seed(1))
    y.uniform_(generator=g.manual_seed(1))
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_generator_state_round_trip():
    g = pl.Generator().manual_seed(3)
    st = g.get_state()
    a = pl.multinomial(pl.ones(10), 4, generator=g)
    g.set_state(st)
    assert a.tolist() == pl.multinomial(pl.ones(10), 4, generator=g).tolist()


@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (3.0, 0.5), (-2.0, 4.0)])
def test_normal_moments(mean, std):
    x = pl.normal(mean, std, size=(N,), dtype=pl.float64).numpy()
    assert _z(x.mean(), mean, std ** 2, N) < 5
    assert abs(x.var() / std ** 2 - 1) < 0.02


def test_normal_tensor_params_broadcast():
    mean = pl.tensor([[0.0], [10.0]])
    std = pl.tensor([1.0, 2.0, 3.0])
    pl.manual_seed(0)
    big = pl.normal(pl.broadcast_to(mean, (2, 3)).reshape(2, 3, 1).expand(2, 3, 20000),
                    pl.broadcast_to(std, (2, 3)).reshape(2, 3, 1).expand(2, 3, 20000))
    assert pl.normal(mean, std).shape == (2, 3)
    m = big.numpy().mean(-1)
    s = big.numpy().std(-1)
    np.testing.assert_allclose(m, np.broadcast_to(mean.numpy(), (2, 3)), atol=0.1)
    np.testing.assert_allclose(s, np.broadcast_to(std.numpy(), (2, 3)), rtol=0.05)


def test_normal_zero_gradient_like_pytorch():
    m = pl.zeros(3, requires_grad=True)
    y = pl.normal(m, 1.0)
    assert y.requires_grad
    y.sum().backward()
    assert m.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_bernoulli_mean(p):
    x = pl.bernoulli(pl.full((N,), p, dtype=pl.float64)).numpy()
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert _z(x.mean(), p, p * (1 - p), N) < 5
    y = pl.empty(N, dtype=pl.float64).bernoulli_(p).numpy()
    assert _z(y.mean(), p, p * (1 - p), N) < 5


def test_bernoulli_tensor_p_inplace():
    p = pl.tensor([0.0, 1.0, 0.0, 1.0])
    assert pl.zeros(4).bernoulli_(p).tolist() == [0.0, 1.0, 0.0, 1.0]


def test_uniform_bounds_and_moments():
    x = pl.empty(N, dtype=pl.float64).uniform_(-2.0, 3.0).numpy()
    assert x.min() >= -2.0 and x.max() < 3.0
    assert _z(x.mean(), 0.5, 25 / 12, N) < 5
    assert abs(x.var() / (25 / 12) - 1) < 0.02


def test_exponential_moments():
    lam = 2.5
    x = pl.empty(N, dtype=pl.float64).exponential_(lam).numpy()
    assert x.min() >= 0
    assert _z(x.mean(), 1 / lam, 1 / lam ** 2, N) < 5
    assert abs(x.var() * lam ** 2 - 1) < 0.03


def test_geometric_and_log_normal_moments():
    p = 0.3
    g = pl.empty(N, dtype=pl.float64).geometric_(p).numpy()
    assert g.min() >= 1 and np.all(g == np.floor(g))
    assert _z(g.mean(), 1 / p, (1 - p) / p ** 2, N) < 5
    ln = pl.empty(N, dtype=pl.float64).log_normal_(0.0, 0.5).numpy()
    assert _z(np.log(ln).mean(), 0.0, 0.25, N) < 5


def test_cauchy_median():
    c = pl.empty(N, dtype=pl.float64).cauchy_(1.5, 2.0).numpy()
    assert abs(np.median(c) - 1.5) < 0.05
    assert abs(np.quantile(c, 0.75) - 3.5) < 0.1  # median + sigma


def test_random_ranges():
    x = pl.empty(N, dtype=pl.int64).random_(3, 7).numpy()
    assert set(np.unique(x)) == {3, 4, 5, 6}
    assert set(np.unique(pl.empty(1000).random_(4).numpy())) == {0.0, 1.0, 2.0, 3.0}
    f16 = pl.empty(1000, dtype=pl.float16).random_().numpy()
    assert f16.min() >= 0 and f16.max() <= 2 ** 11
    assert set(np.unique(pl.empty(100, dtype=pl.bool).random_().numpy())) <= {False, True}


def test_poisson_moments():
    x = pl.poisson(pl.full((N,), 3.5, dtype=pl.float64)).numpy()
    assert _z(x.mean(), 3.5, 3.5, N) < 5
    assert abs(x.var() / 3.5 - 1) < 0.03


def test_multinomial_chi_square_with_replacement():
    w = np.array([1.0, 0.0, 2.0, 3.0, 4.0])
    draws = pl.multinomial(pl.tensor(w), 50_000, replacement=True).numpy()
    counts = np.bincount(draws, minlength=5)
    assert counts[1] == 0
    keep = w > 0
    res = stats.chisquare(counts[keep], counts.sum() * w[keep] / w.sum())
    assert res.pvalue > 1e-4


def test_multinomial_without_replacement_first_draw_and_distinct():
    w = np.array([1.0, 2.0, 3.0, 4.0])
    out = pl.multinomial(pl.tensor(w).expand(20_000, 4), 4).numpy()
    assert all(len(set(row)) == 4 for row in out[:200])
    counts = np.bincount(out[:, 0], minlength=4)
    res = stats.chisquare(counts, counts.sum() * w / w.sum())
    assert res.pvalue > 1e-4


def test_multinomial_2d_and_zero_weights():
    out = pl.multinomial(pl.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]), 1)
    assert out.shape == (2, 1) and out.dtype is pl.int64
    assert out[0].tolist() == [1]
    assert sorted(pl.multinomial(pl.tensor([[1.0, 0.0, 1.0]]), 2)[0].tolist()) == [0, 2]


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: pl.multinomial(pl.tensor([1.0, 0.0]), 2), ValueError, "multinomial"),
    (lambda: pl.multinomial(pl.tensor([1.0, -1.0]), 1), ValueError, "multinomial"),
    (lambda: pl.multinomial(pl.tensor([1.0]), 3, False), ValueError, "cannot sample"),
    (lambda: pl.bernoulli(pl.tensor([1.5])), ValueError, "bernoulli"),
    (lambda: pl.normal(0.0, -1.0, size=(2,)), ValueError, "normal: std"),
    (lambda: pl.normal(0.0, 1.0), TypeError, "size must be given"),
    (lambda: pl.empty(2).uniform_(2, 1), ValueError, "uniform_"),
    (lambda: pl.empty(2).exponential_(0), ValueError, "exponential_"),
    (lambda: pl.zeros(2, requires_grad=True).normal_(), RuntimeError, "leaf"),
])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_method_forms_draw_like_the_functions():
    p = pl.full((6,), 0.5)
    w = pl.tensor([1.0, 2.0, 3.0])
    rates = pl.full((4,), 2.0)
    draws = []
    for form in ("function", "method"):
        pl.manual_seed(5)
        if form == "function":
            draws.append([pl.bernoulli(p), pl.multinomial(w, 2), pl.poisson(rates)])
        else:
            draws.append([p.bernoulli(), w.multinomial(2), rates.poisson()])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name in ("uniform_", "normal_", "exponential_", "bernoulli_", "random_", "geometric_", "cauchy_",
                 "log_normal_"):
        assert not hasattr(pl, name), f"pylucid.{name} is a Tensor method only, as in PyTorch"


def test_inplace_under_no_grad_on_leaf_and_version_bump():
    w = pl.zeros(3, requires_grad=True)
    v = w._version[0]
    with pl.no_grad():
        w.uniform_(-1, 1)
    assert w._version[0] == v + 1 and w.requires_grad


# ------------------------------------------------------------------------------- argument checks and determinism
@pytest.mark.parametrize("fn, exc, match", [
    (lambda: pl.rand(-1), ValueError, r"rand: negative dimension -1"),
    (lambda: pl.randn(-1, 2), ValueError, r"randn: negative dimension -1"),
    (lambda: pl.rand(2.5), TypeError, r"rand: sizes must be ints, got float"),
    (lambda: pl.randperm(2.5), TypeError, r"randperm: sizes must be ints, got float"),
    (lambda: pl.randperm(-1), ValueError, r"randperm: negative dimension"),
    (lambda: pl.randint(0, 10, (-1,)), ValueError, r"randint: negative dimension"),
    (lambda: pl.randint(0, 10, (2.5,)), TypeError, r"randint: sizes must be ints"),
    (lambda: pl.randint(0.5, 10, (2,)), TypeError, r"randint: low must be an int, got float"),
    (lambda: pl.bernoulli(pl.ones(2, dtype=pl.complex64) * 0.5), pl.errors.DtypeMismatch, r"bernoulli: .*complex64"),
    (lambda: pl.normal(pl.zeros(2), pl.ones(2, dtype=pl.complex64)), pl.errors.DtypeMismatch, r"normal: std must"),
])
def test_bad_sizes_and_dtypes_are_typed_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_dropout_runs_under_deterministic_algorithms_and_repeats_under_a_seed():
    """Dropout's only variation is the seeded generator: allowed under use_deterministic_algorithms (PyTorch too)."""
    x = pl.ones(64)
    try:
        pl.use_deterministic_algorithms(True)
        pl.manual_seed(3)
        a = pl.nn.functional.dropout(x, 0.5)
        pl.manual_seed(3)
        b = pl.nn.Dropout(0.5)(x)
    finally:
        pl.use_deterministic_algorithms(False)
    assert a.tolist() == b.tolist() and 0 < float((a == 0).sum()) < 64


def test_deterministic_warn_only_warns_instead_of_raising():
    from pylucid.ops import Op, OpSchema, apply, registry

    class _Atomic(Op):
        schema = OpSchema("_test_atomic", deterministic=False, deterministic_note="atomic adds")

        @staticmethod
        def forward(be, x):
            return x + 0

    try:
        pl.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="_test_atomic is not deterministic"):
            out = apply(_Atomic, (pl.ones(2),))
        assert out.tolist() == [1.0, 1.0]
    finally:
        pl.use_deterministic_algorithms(False)
        registry._REGISTRY.pop("_test_atomic", None)


# ---------------------------------------------------------------- refused dtypes and non-finite parameters
@pytest.mark.parametrize("call", [
    lambda: pl.ones(2, dtype=pl.int64).exponential_(), lambda: pl.ones(2, dtype=pl.int64).cauchy_(),
    lambda: pl.ones(2, dtype=pl.int64).log_normal_(), lambda: pl.ones(2, dtype=pl.complex64).bernoulli_(0.5),
    lambda: pl.ones(2, dtype=pl.bool).geometric_(0.5), lambda: pl.ones(2, dtype=pl.bool).random_(0, 10),
    lambda: pl.binomial(pl.ones(2, dtype=pl.int64), pl.ones(2, dtype=pl.int64)),
    lambda: pl.binomial(pl.ones(2, dtype=pl.float64), pl.ones(2)),
    lambda: pl._standard_gamma_grad(pl.ones(2, dtype=pl.float64), pl.ones(2)),
    lambda: pl.multinomial(pl.tensor([0.5, 0.5]), 1, "yes"),
])
def test_refused_as_in_torch(call):
    with pytest.raises((TypeError, ValueError, pl.LucidError)):
        call()


def test_nan_parameters():
    c = pl.binomial(pl.tensor([float("nan"), 3.0]), pl.tensor([0.5, float("nan")]))
    assert bool(pl.isnan(c).all())
    g = pl._standard_gamma(pl.tensor([float("nan"), -1.0, float("inf"), 2.0]))
    tiny = float(np.finfo(np.float32).tiny)  # as torch._standard_gamma: the smallest normal number
    assert g[0].item() == g[1].item() == tiny and g[2].item() == float("inf")
