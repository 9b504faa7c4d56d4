"""Univariate continuous distributions: Normal, Uniform, Exponential, Laplace, Cauchy, StudentT, Gamma, Chi2,
Beta, Dirichlet (a simplex-valued one, with Beta built on it as in PyTorch), FisherSnedecor, ContinuousBernoulli,
VonMises and GeneralizedPareto."""

from __future__ import annotations

import math
from numbers import Number

import pylucid as _pl

from . import constraints
from .distribution import Distribution, ExponentialFamily
from .utils import (
    _standard_normal,
    _uniform,
    broadcast_all,
    clamp_probs,
    finfo,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = ["Beta", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet", "Exponential", "FisherSnedecor", "Gamma",
           "GeneralizedPareto", "Laplace", "Normal", "StudentT", "Uniform", "VonMises"]

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


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution on ``[0, 1]`` (Loaiza-Ganem & Cunningham 2019):
    density ``C(p) p^x (1 - p)^(1 - x)``. Near ``p = 1/2`` (inside ``lims``) the normaliser and the moments use
    their Taylor expansions, as in PyTorch."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(() if is_scalar else tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = tuple(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return _pl.where(self._outside_unstable_region(), self.probs, self._lims[0] * _pl.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """``log C(p)``: ``log(|log1p(-p) - log p| / |1 - 2p|)``, its Taylor expansion near ``p = 1/2``."""
        cut_probs = self._cut_probs()
        cut_probs_below_half = _pl.where(cut_probs <= 0.5, cut_probs, _pl.zeros_like(cut_probs))
        cut_probs_above_half = _pl.where(cut_probs >= 0.5, cut_probs, _pl.ones_like(cut_probs))
        log_norm = _pl.log(_pl.abs(_pl.log1p(-cut_probs) - _pl.log(cut_probs))) - _pl.where(
            cut_probs <= 0.5, _pl.log1p(-2.0 * cut_probs_below_half), _pl.log(2.0 * cut_probs_above_half - 1.0))
        x = _pl.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return _pl.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (_pl.log1p(-cut_probs) - _pl.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * _pl.pow(x, 2)) * x
        return _pl.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return _pl.sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        vars_ = (cut_probs * (cut_probs - 1.0) / _pl.pow(1.0 - 2.0 * cut_probs, 2)
                 + 1.0 / _pl.pow(_pl.log1p(-cut_probs) - _pl.log(cut_probs), 2))
        x = _pl.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return _pl.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def sample(self, sample_shape=(), generator=None):
        with _pl.no_grad():
            return self.rsample(sample_shape, generator=generator)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.probs.dtype, self.probs.device, generator)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = _pl.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = ((_pl.pow(cut_probs, value) * _pl.pow(1.0 - cut_probs, 1.0 - value) + cut_probs - 1.0)
                / (2.0 * cut_probs - 1.0))
        unbounded_cdfs = _pl.where(self._outside_unstable_region(), cdfs, value)
        return _pl.where(value <= 0.0, _pl.zeros_like(value),
                         _pl.where(value >= 1.0, _pl.ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        return _pl.where(self._outside_unstable_region(),
                         (_pl.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - _pl.log1p(-cut_probs))
                         / (_pl.log(cut_probs) - _pl.log1p(-cut_probs)), value)

    def entropy(self):
        log_probs0 = _pl.log1p(-self.probs)
        log_probs1 = _pl.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = _pl.where(out_unst_reg, x, (self._lims[0] - 0.5) * _pl.ones_like(x))
        log_norm = _pl.log(_pl.abs(_pl.expm1(cut_nat_params))) - _pl.log(_pl.abs(cut_nat_params))
        taylor = 0.5 * x + _pl.pow(x, 2) / 24.0 - _pl.pow(x, 4) / 2880.0
        return _pl.where(out_unst_reg, log_norm, taylor)


def _eval_poly(y, coef):
    coef = list(coef)
    result = coef.pop()
    while coef:
        result = coef.pop() + y * result
    return result


# Abramowitz & Stegun 9.8.1-9.8.4: polynomial approximations of I0 and I1 (small x) and of
# sqrt(x) exp(-x) I_n(x) (large x), the constants PyTorch's VonMises uses
_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813]
_I0_COEF_LARGE = [0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
                  0.00392377]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411]
_I1_COEF_LARGE = [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312,
                  0.01787654, -0.00420059]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _log_modified_bessel_fn(x, order=0):
    """``log I_order(x)`` for ``x > 0``, ``order`` 0 or 1 (the polynomial approximations above)."""
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1, got {order}")
    y = x / 3.75
    y = y * y
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    xl = _pl.where(x < 3.75, 3.75 * _pl.ones_like(x), x)  # the large-x branch only where it is taken
    y = 3.75 / xl
    large = xl - 0.5 * xl.log() + _eval_poly(y, _COEF_LARGE[order]).log()
    return _pl.where(x < 3.75, small, large)


class VonMises(Distribution):
    """The von Mises (circular normal) distribution with ``loc`` and ``concentration``; samples lie in
    ``[-pi, pi)`` (Best & Fisher's rejection sampler, in float64). Not reparameterised."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, VonMises, batch_shape, _instance, ("loc", "concentration"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * _pl.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    def _proposal_r(self, kappa):
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho ** 2) / (2 * rho)
        return _pl.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        with _pl.no_grad():
            loc = self.loc.detach().to(_pl.float64)
            kappa = self.concentration.detach().to(_pl.float64)
            proposal_r = self._proposal_r(kappa)
            x = _pl.zeros(shape, dtype=_pl.float64, device=loc.device)
            done = _pl.zeros(shape, dtype=_pl.bool, device=loc.device)
            while not bool(done.all()):
                u = _uniform((3,) + tuple(shape), _pl.float64, loc.device, generator)
                u1, u2, u3 = _pl.unbind(u, 0)
                z = _pl.cos(math.pi * u1)
                f = (1 + proposal_r * z) / (proposal_r + z)
                c = kappa * (proposal_r - f)
                accept = ((c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)) & ~done
                x = _pl.where(accept, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()


class GeneralizedPareto(Distribution):
    """The generalised Pareto distribution with ``loc``, ``scale`` and ``concentration`` (shape ``xi``): support
    ``[loc, inf)`` for ``xi >= 0``, ``[loc, loc - scale / xi]`` for ``xi < 0``; ``xi = 0`` is the exponential
    case."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(_scalar_shape((loc, scale, concentration), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, GeneralizedPareto, batch_shape, _instance, ("loc", "scale", "concentration"))

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.loc.dtype, self.loc.device, generator)
        return self.icdf(u)

    def _safe_concentration(self):
        eq_zero = _pl.isclose(self.concentration, _pl.zeros_like(self.concentration))
        return eq_zero, _pl.where(eq_zero, _pl.ones_like(self.concentration), self.concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + _pl.ones_like(z)
        where_nonzero = _pl.where(y == 0, y, y * _pl.log1p(safe_conc * z))
        return -self.scale.log() - _pl.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe_concentration()
        where_nonzero = -_pl.log1p(safe_conc * z) / safe_conc
        return _pl.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        return _pl.log1p(-_pl.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return _pl.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = _pl.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * _pl.expm1(-safe_conc * logu)
        where_zero = self.loc - self.scale * logu
        return _pl.where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = _pl.where(valid, self.concentration, 0.5)
        return _pl.where(valid, self.loc + self.scale / (1 - safe_conc), _NAN)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = _pl.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return _pl.where(valid, result, _NAN)

    def entropy(self):
        ans = _pl.log(self.scale) + self.concentration + 1
        return ans.expand(*self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        safe = _pl.where(self.concentration < 0, self.concentration, -_pl.ones_like(self.concentration))
        upper = _pl.where(self.concentration < 0, lower - self.scale / safe, _INF)
        return constraints.interval(lower, upper)
