"""``pylucid.distributions``: probability distributions with PyTorch's ``torch.distributions`` API.

Every distribution is built from public pylucid ops, so ``log_prob``, ``entropy``, ``rsample`` and
``kl_divergence`` are differentiable (to any order where their ops are) and run on CPU and CUDA alike.
Samplers take an optional ``generator=`` (a :class:`pylucid.Generator`).

>>> import pylucid
>>> from pylucid.distributions import Normal, kl_divergence
>>> loc = pylucid.tensor([0.0, 1.0], requires_grad=True)
>>> p = Normal(loc, 1.0)
>>> x = p.rsample((4,), generator=pylucid.Generator().manual_seed(0))
>>> x.shape
(4, 2)
>>> kl_divergence(p, Normal(0.0, 1.0)).tolist()
[0.0, 0.5]

Deviations from PyTorch are listed in docs/semantics/distributions.md.
"""

from . import constraints, transforms
from .constraint_registry import ConstraintRegistry, biject_to, transform_to
from .continuous import (
    Beta, Cauchy, Chi2, ContinuousBernoulli, Dirichlet, Exponential, FisherSnedecor, Gamma, GeneralizedPareto, Laplace,
    Normal, StudentT, Uniform, VonMises,
)
from .discrete import (
    Bernoulli, Binomial, Categorical, Geometric, Multinomial, NegativeBinomial, OneHotCategorical,
    OneHotCategoricalStraightThrough, Poisson,
)
from .distribution import Distribution, ExponentialFamily
from .kl import kl_divergence, register_kl
from .multivariate import LKJCholesky, LowRankMultivariateNormal, MultivariateNormal, Wishart
from .transformed import (
    ExpRelaxedCategorical, Gumbel, HalfCauchy, HalfNormal, Independent, InverseGamma, Kumaraswamy, LogisticNormal,
    LogitRelaxedBernoulli, LogNormal, MixtureSameFamily, Pareto, RelaxedBernoulli, RelaxedOneHotCategorical,
    TransformedDistribution, Weibull,
)
from .transforms import (
    AbsTransform, AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform,
    CumulativeDistributionTransform, ExpTransform, IndependentTransform, LowerCholeskyTransform,
    PositiveDefiniteTransform, PowerTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform,
    SoftplusTransform, StackTransform, StickBreakingTransform, TanhTransform, Transform, identity_transform,
)

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform", "Categorical", "Cauchy",
    "Chi2", "ComposeTransform", "ConstraintRegistry", "ContinuousBernoulli", "CorrCholeskyTransform",
    "CumulativeDistributionTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical", "ExpTransform",
    "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel",
    "HalfCauchy", "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy", "LKJCholesky",
    "Laplace", "LogNormal", "LogisticNormal", "LogitRelaxedBernoulli", "LowRankMultivariateNormal",
    "LowerCholeskyTransform", "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
    "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform",
    "PowerTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform",
    "SoftmaxTransform", "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT", "TanhTransform",
    "Transform", "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to", "constraints",
    "identity_transform", "kl_divergence", "register_kl", "transform_to", "transforms"
]
