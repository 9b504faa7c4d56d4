"""Univariate continuous distributions: Normal, Uniform, Exponential, Laplace, Cauchy, StudentT, Gamma, Chi2,
Beta, Dirichlet (a simplex-valued one, with Beta built on it as in PyTorch) and FisherSnedecor."""

from __future__ import annotations

import math
from numbers import Number

import pylucid as _pl

from . import constraints
from .distribution import Distribution, ExponentialFamily
from .utils import _standard_normal, _uniform, broadcast_all, finfo

__all__ = ["Beta", "Cauchy", "Chi2", "Dirichlet", "Exponential", "FisherSnedecor", "Gamma", "Laplace", "Normal",
           "StudentT", "Uniform"]

_NAN = float("nan")
_INF = float("inf")


def _expand_params(self, cls, batch_shape, _instance, names, event_shape=()):
    """The shared body of ``expand``: a new instance whose parameters ``names`` are expanded views."""
    new = self._get_checked_instance(cls, _instance)
    batch_shape = tuple(batch_shape)
    for n in names:
        setattr(new, n, getattr(self, n).expand(*batch_shape, *getattr(self, n).shape[len(self.batch_shape):]))
    super(cls, new).__init__(batch_shape, event_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


def _scalar_shape(params, ref):
    return () if all(isinstance(p, Number) for p in params) else tuple(ref.shape)


def _standard_gamma(concentration, generator=None):
    return _pl._standard_gamma(concentration, generator=generator)


class Normal(ExponentialFamily):
    """The normal distribution ``N(loc, scale^2)``.

    >>> import pylucid
    >>> from pylucid.distributions import Normal
    >>> round(Normal(0.0, 1.0).log_prob(pylucid.tensor(0.0)).item(), 4)
    -0.9189
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_scalar_shape((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Normal, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype, self.loc.device, generator)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + _pl.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * _pl.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + _pl.log(self.scale)

    @property
    def _natural_params(self):
        return (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal())

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * _pl.log(-math.pi / y)


class Uniform(Distribution):
    """The uniform distribution on ``[low, high)``."""

    has_rsample = True

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(_scalar_shape((low, high), self.low), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Uniform, batch_shape, _instance, ("low", "high"))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return _NAN * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        rand = _uniform(shape, self.low.dtype, self.low.device, generator)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = (self.low <= value).to(self.low.dtype)
        ub = (self.high > value).to(self.low.dtype)
        return _pl.log(lb * ub) - _pl.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return _pl.log(self.high - self.low)


class Exponential(ExponentialFamily):
    """The exponential distribution with ``rate`` (density ``rate * exp(-rate * x)``)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(_scalar_shape((rate,), self.rate), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Exponential, batch_shape, _instance, ("rate",))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return _pl.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.rate.dtype, self.rate.device, generator)
        # -log1p(-u) for u in [0, 1) is a standard exponential draw, finite everywhere
        return -_pl.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - _pl.exp(-self.rate * value)

    def icdf(self, value):
        return -_pl.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - _pl.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -_pl.log(-x)


class Laplace(Distribution):
    """The Laplace distribution with ``loc`` and ``scale`` (density ``exp(-|x - loc| / scale) / (2 scale)``)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_scalar_shape((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Laplace, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        eps = finfo(self.loc.dtype).eps
        # u uniform in [eps - 1, 1): log1p(-|u|) stays finite
        u = _uniform(shape, self.loc.dtype, self.loc.device, generator) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * _pl.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -_pl.log(2 * self.scale) - _pl.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * _pl.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * _pl.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + _pl.log(2 * self.scale)


class Cauchy(Distribution):
    """The Cauchy distribution with ``loc`` (median) and ``scale`` (half width at half maximum)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_scalar_shape((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Cauchy, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return _pl.full(self._extended_shape(), _NAN, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _pl.full(self._extended_shape(), _INF, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.loc.dtype, self.loc.device, generator)
        return self.loc + self.scale * _pl.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _pl.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return _pl.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Gamma(ExponentialFamily):
    """The gamma distribution with ``concentration`` (shape) and ``rate`` (inverse scale).

    ``rsample`` is differentiable in both by implicit reparameterisation (:func:`pylucid._standard_gamma`).
    ``cdf`` needs ``pylucid.special.gammainc``.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(_scalar_shape((concentration, rate), self.concentration), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Gamma, batch_shape, _instance, ("concentration", "rate"))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(*shape), generator) / self.rate.expand(*shape)
        return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (_pl.special.xlogy(self.concentration, self.rate) + _pl.special.xlogy(self.concentration - 1, value)
                - self.rate * value - _pl.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - _pl.log(self.rate) + _pl.lgamma(self.concentration)
                + (1.0 - self.concentration) * _pl.special.digamma(self.concentration))

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return _pl.lgamma(x + 1) + (x + 1) * _pl.log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        gammainc = getattr(_pl.special, "gammainc", None)
        if gammainc is None:
            raise NotImplementedError("Gamma.cdf needs pylucid.special.gammainc, which this build does not have")
        return gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df_t,) = broadcast_all(df)
        super().__init__(0.5 * df_t if not isinstance(df, Number) else 0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, ``loc`` and ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, StudentT, batch_shape, _instance, ("df", "loc", "scale"))
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return _pl.where(self.df <= 1, _NAN, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        big = _pl.where(df > 2, df, 3.0 * _pl.ones_like(df))
        v = self.scale.pow(2) * big / (big - 2)
        return _pl.where(df > 2, v, _pl.where(df > 1, _INF, _NAN))

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, self.df.dtype, self.df.device, generator)
        z = self._chi2.rsample(sample_shape, generator=generator)
        y = x * _pl.rsqrt(z / self.df)
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + _pl.lgamma(0.5 * self.df)
             - _pl.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * _pl.log1p(y ** 2.0 / self.df) - z

    def entropy(self):
        lbeta = _pl.lgamma(0.5 * self.df) + math.lgamma(0.5) - _pl.lgamma(0.5 * (self.df + 1))
        digamma = _pl.special.digamma
        return (self.scale.log() + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution on the simplex with ``concentration`` (last dimension: the categories).

    ``rsample`` normalises independent gamma draws, each reparameterised implicitly, so its gradient is
    a valid pathwise gradient; PyTorch uses the exact Dirichlet implicit gradient instead (the two agree in
    expectation, not per draw: docs/semantics/distributions.md).
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Dirichlet, batch_shape, _instance, ("concentration",), self.event_shape)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(self.concentration.expand(*shape), generator)
        x = g / g.sum(-1, keepdim=True)
        fi = finfo(x.dtype)
        return x.clamp(min=fi.tiny, max=1 - fi.eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (_pl.special.xlogy(self.concentration - 1.0, value).sum(-1) + _pl.lgamma(self.concentration.sum(-1))
                - _pl.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, keepdim=True)
        # all concentrations below 1: the mode is the vertex of the largest one
        mask = (self.concentration < 1).all(-1, keepdim=True)
        vertex = _pl.nn.functional.one_hot(self.concentration.argmax(-1), concentrationm1.shape[-1]).to(mode.dtype)
        return _pl.where(mask, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        digamma = _pl.special.digamma
        return (_pl.lgamma(self.concentration).sum(-1) - _pl.lgamma(a0) - (k - a0) * digamma(a0)
                - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - _pl.lgamma(x.sum(-1))


class Beta(ExponentialFamily):
    """The beta distribution with ``concentration1`` (alpha) and ``concentration0`` (beta), a two-category
    Dirichlet as in PyTorch."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, Number) and isinstance(concentration0, Number):
            c10 = _pl.tensor([float(concentration1), float(concentration0)], dtype=_pl.get_default_dtype())
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            c10 = _pl.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(c10, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = tuple(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=(), generator=None):
        return self._dirichlet.rsample(sample_shape, generator=generator)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = _pl.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return _pl.lgamma(x) + _pl.lgamma(y) - _pl.lgamma(x + y)


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom (a ratio of scaled chi-squares)."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        super().__init__(_scalar_shape((df1, df2), self.df1), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, FisherSnedecor, batch_shape, _instance, ("df1", "df2"))
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = _pl.where(self.df2 > 2, self.df2, _NAN)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return _pl.where(self.df1 > 2, mode, _NAN)

    @property
    def variance(self):
        df2 = _pl.where(self.df2 > 4, self.df2, _NAN)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=(), generator=None):
        # X1 ~ Gamma(df1 / 2, 1 / df1), X2 ~ Gamma(df2 / 2, 1 / df2): Y = df2 * df1 * X1 / (df1 * df2 * X2)
        x1 = self._gamma1.rsample(sample_shape, generator=generator)
        x2 = self._gamma2.rsample(sample_shape, generator=generator)
        tiny = finfo(x2.dtype).tiny
        x2 = x2.clamp(min=tiny)
        y = x1 / x2
        return y.clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * _pl.log(value)
        t3 = (ct1 + ct2) * _pl.log1p(ct3 * value)
        return t1 + t2 - t3
