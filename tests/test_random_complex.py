"""Random sampling into complex tensors: which calls PyTorch accepts (and refuses), and the distributions drawn.

PyTorch draws a complex tensor as its real view (``view_as_real``): ``rand`` makes real and imaginary parts each
uniform on [0, 1), ``randn`` makes each part normal with variance 1/2 (so ``E|z|^2 = 1``), ``normal_(m, s)``
gives each part mean ``m`` and standard deviation ``s / sqrt(2)``. The accept/refuse table is checked against
PyTorch; the statistics against those formulas (PyTorch's streams are not pylucid's, so values are not compared).
"""

import math
import warnings

import pytest
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch

# (name, call(lib)): each is run on torch and on pylucid; both must accept it, or both refuse it
CASES = [
    ("rand c64", lambda L: L.rand(2, 3, dtype=L.complex64)),
    ("rand c128", lambda L: L.rand(4, dtype=L.complex128)),
    ("randn c64", lambda L: L.randn(2, dtype=L.complex64)),
    ("randn c128", lambda L: L.randn(2, 2, dtype=L.complex128)),
    ("rand_like", lambda L: L.rand_like(L.zeros(3, dtype=L.complex64))),
    ("randn_like", lambda L: L.randn_like(L.zeros(3, dtype=L.complex128))),
    ("rand_like dtype", lambda L: L.rand_like(L.zeros(3), dtype=L.complex64)),
    ("uniform_", lambda L: L.zeros(3, dtype=L.complex64).uniform_()),
    ("uniform_ bounds", lambda L: L.zeros(3, dtype=L.complex64).uniform_(2, 3)),
    ("normal_", lambda L: L.zeros(3, dtype=L.complex64).normal_()),
    ("normal_ mean std", lambda L: L.zeros(3, dtype=L.complex128).normal_(1, 2)),
    ("normal complex mean", lambda L: L.normal(L.zeros(3, dtype=L.complex64), 1.0)),
    ("normal complex mean, real std", lambda L: L.normal(L.zeros(3, dtype=L.complex64), L.ones(3))),
    ("normal broadcast", lambda L: L.normal(L.zeros(2, 1, dtype=L.complex64), L.ones(3))),
    ("normal size dtype", lambda L: L.normal(0.0, 1.0, (3,), dtype=L.complex64)),
    ("normal complex std", lambda L: L.normal(L.zeros(3, dtype=L.complex64), L.ones(3, dtype=L.complex64))),
    ("normal real mean complex std", lambda L: L.normal(L.zeros(3), L.ones(3, dtype=L.complex64))),
    ("normal number mean complex std", lambda L: L.normal(0.0, L.ones(3, dtype=L.complex64))),
    ("normal int mean", lambda L: L.normal(L.zeros(2, dtype=L.int64), 1.0)),
    ("normal int std", lambda L: L.normal(0.0, L.ones(2, dtype=L.int64))),
    ("normal float mean int std", lambda L: L.normal(L.zeros(2), L.ones(2, dtype=L.int64))),
    ("exponential_", lambda L: L.zeros(3, dtype=L.complex64).exponential_()),
    ("cauchy_", lambda L: L.zeros(3, dtype=L.complex64).cauchy_()),
    ("log_normal_", lambda L: L.zeros(3, dtype=L.complex64).log_normal_()),
    ("geometric_", lambda L: L.zeros(3, dtype=L.complex64).geometric_(0.5)),
    ("bernoulli_", lambda L: L.zeros(3, dtype=L.complex64).bernoulli_(0.5)),
    ("random_", lambda L: L.zeros(3, dtype=L.complex64).random_(0, 5)),
    ("randint", lambda L: L.randint(0, 5, (3,), dtype=L.complex64)),
    ("randint_like", lambda L: L.randint_like(L.zeros(3, dtype=L.complex64), 5)),
    ("randperm complex", lambda L: L.randperm(3, dtype=L.complex64)),
    ("randperm bool", lambda L: L.randperm(3, dtype=L.bool)),
    ("randperm float16", lambda L: L.randperm(3, dtype=L.float16)),
    ("multinomial", lambda L: L.multinomial(L.ones(3, dtype=L.complex64), 2)),
    ("poisson", lambda L: L.poisson(L.ones(3, dtype=L.complex64))),
    ("rand int", lambda L: L.rand(2, dtype=L.int64)),
    ("randn bool", lambda L: L.randn(2, dtype=L.bool)),
    ("uniform_ int", lambda L: L.zeros(2, dtype=L.int64).uniform_()),
    ("uniform_ bool", lambda L: L.zeros(2, dtype=L.bool).uniform_()),
    ("normal_ int", lambda L: L.zeros(2, dtype=L.int32).normal_()),
    ("normal_ bool", lambda L: L.zeros(2, dtype=L.bool).normal_()),
]


def _outcome(lib, fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(lib)
    except Exception as exc:  # noqa: BLE001 - the table compares accept/refuse
        return exc
    return (str(r.dtype).split(".")[-1], tuple(r.shape))


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_accepts_and_refuses_as_torch(name, fn):
    want, got = _outcome(torch, fn), _outcome(pl, fn)
    if isinstance(want, Exception):
        assert isinstance(got, DtypeMismatch), f"{name}: torch refuses ({want}), pylucid gave {got!r}"
        assert isinstance(got, RuntimeError)  # what PyTorch raises (or NotImplementedError, one of its kind)
    else:
        assert not isinstance(got, Exception), f"{name}: torch accepts, pylucid raised {got!r}"
        assert got == want  # dtype and shape


def _parts(t):
    return t.real.double(), t.imag.double()


N = 40000
# sample means of N draws lie within 6 standard errors; variances within 6 of theirs (a normal's variance
# estimate has standard error ~ var * sqrt(2 / N), a uniform's ~ var * sqrt(0.8 / N))


def _close(x, want, sd):
    assert abs(float(x) - want) < 6 * sd / math.sqrt(N), (float(x), want)


@pytest.mark.parametrize("dtype", [pl.complex64, pl.complex128])
def test_rand_parts_uniform(dtype):
    pl.manual_seed(11)
    z = pl.rand(N, dtype=dtype)
    assert z.dtype is dtype and z.shape == (N,)
    for p in _parts(z):
        assert float(p.min()) >= 0.0 and float(p.max()) < 1.0
        _close(p.mean(), 0.5, math.sqrt(1 / 12))
        _close(p.var(), 1 / 12, math.sqrt(0.8) / 12)
    re, im = _parts(z)
    _close((re * im).mean() - re.mean() * im.mean(), 0.0, 1 / 12)  # independent parts


@pytest.mark.parametrize("dtype", [pl.complex64, pl.complex128])
def test_randn_parts_half_variance(dtype):
    pl.manual_seed(12)
    z = pl.randn(N, dtype=dtype)
    assert z.dtype is dtype
    for p in _parts(z):
        _close(p.mean(), 0.0, math.sqrt(0.5))
        _close(p.var(), 0.5, 0.5 * math.sqrt(2))
    _close((z.abs().double() ** 2).mean(), 1.0, 1.0)  # |z|^2 is exponential with mean 1 (sd 1)
    re, im = _parts(z)
    _close((re * im).mean(), 0.0, 0.5)


def test_uniform_bounds_each_part():
    pl.manual_seed(13)
    z = pl.zeros(N, dtype=pl.complex64).uniform_(2.0, 5.0)
    for p in _parts(z):
        assert float(p.min()) >= 2.0 and float(p.max()) < 5.0
        _close(p.mean(), 3.5, 3 / math.sqrt(12))


@pytest.mark.parametrize("make", [
    lambda: pl.zeros(N, dtype=pl.complex64).normal_(1.0, 3.0),
    lambda: pl.normal(1.0, 3.0, (N,), dtype=pl.complex64),
], ids=["normal_", "normal numbers"])
def test_normal_number_mean_on_both_parts(make):
    pl.manual_seed(14)
    z = make()
    assert z.dtype is pl.complex64
    for p in _parts(z):  # each part N(1, 9/2)
        _close(p.mean(), 1.0, 3 / math.sqrt(2))
        _close(p.var(), 4.5, 4.5 * math.sqrt(2))


@pytest.mark.parametrize("std", [3.0, "tensor"])
def test_normal_complex_mean_tensor(std):
    pl.manual_seed(15)
    mean = pl.full((N,), 1 + 2j, dtype=pl.complex128)
    z = pl.normal(mean, 3.0 if std == 3.0 else pl.full((N,), 3.0))
    assert z.dtype is pl.complex128 and z.shape == (N,)
    re, im = _parts(z)
    _close(re.mean(), 1.0, 3 / math.sqrt(2))
    _close(im.mean(), 2.0, 3 / math.sqrt(2))
    _close(re.var(), 4.5, 4.5 * math.sqrt(2))
    _close(im.var(), 4.5, 4.5 * math.sqrt(2))


@pytest.mark.parametrize("draw", [
    lambda g: pl.rand(5, dtype=pl.complex64, generator=g),
    lambda g: pl.randn(2, 3, dtype=pl.complex128, generator=g),
    lambda g: pl.randn_like(pl.zeros(4, dtype=pl.complex64), generator=g),
    lambda g: pl.zeros(4, dtype=pl.complex64).uniform_(-1, 1, generator=g),
    lambda g: pl.zeros(4, dtype=pl.complex128).normal_(0, 2, generator=g),
    lambda g: pl.normal(pl.zeros(3, dtype=pl.complex64), 1.0, generator=g),
])
def test_complex_draws_are_deterministic_per_seed(draw):
    a = draw(pl.Generator().manual_seed(5))
    b = draw(pl.Generator().manual_seed(5))
    c = draw(pl.Generator().manual_seed(6))
    assert a.device.type == "cpu"
    assert bool((a == b).all()) and not bool((a == c).all())
    assert bool((a.imag != 0).any())


def test_complex_parts_interleave_the_real_stream():
    # a complex draw is the real draw of twice the numbers, read as (real, imag) pairs: as PyTorch's view_as_real
    z = pl.rand(3, dtype=pl.complex64, generator=pl.Generator().manual_seed(9))
    r = pl.rand(3, 2, dtype=pl.float32, generator=pl.Generator().manual_seed(9))
    assert bool((z.real == r[:, 0]).all()) and bool((z.imag == r[:, 1]).all())


def test_complex_default_generator_seeded():
    pl.manual_seed(21)
    a = pl.randn(3, dtype=pl.complex64)
    pl.manual_seed(21)
    b = pl.randn(3, dtype=pl.complex64)
    assert bool((a == b).all())


def test_real_streams_unchanged_by_complex_support():
    # the real path still draws shape-many numbers in float32 (float64 for float64): the same values as a
    # float32 rand of one generator state, and no extra draws before the next call
    g1, g2 = pl.Generator().manual_seed(4), pl.Generator().manual_seed(4)
    a = pl.rand(3, dtype=pl.float16, generator=g1)
    b = pl.rand(3, dtype=pl.float32, generator=g2)
    assert bool((a == b.half()).all())
    assert bool((pl.randn(2, generator=g1) == pl.randn(2, generator=g2)).all())


def test_normal_refusals_name_the_op():
    with pytest.raises(DtypeMismatch, match="normal: std must be real"):
        pl.normal(pl.zeros(2, dtype=pl.complex64), pl.ones(2, dtype=pl.complex64))
    with pytest.raises(DtypeMismatch, match="normal: the result takes the dtype of mean"):
        pl.normal(pl.zeros(2, dtype=pl.int64), 1.0)
    with pytest.raises(DtypeMismatch, match="uniform_: not supported for int64"):
        pl.zeros(2, dtype=pl.int64).uniform_()
    with pytest.raises(TypeError, match="normal_: mean must be a float"):
        pl.zeros(2, dtype=pl.complex64).normal_(1j, 1.0)
    with pytest.raises(ValueError, match="std >= 0"):
        pl.zeros(2, dtype=pl.complex64).normal_(0.0, -1.0)
