"""``pylucid.special``: special functions, as ``torch.special``.

Most are the registered ops of ``pylucid.ops.special`` (and ``logsumexp``
from the reductions); ``erf``, ``erfinv``, ``expit`` (``sigmoid``) and
``logit`` are the element-wise ops of the top-level namespace, looked up
lazily so this module never depends on their import order.

>>> import pylucid
>>> pylucid.special.gammaln(pylucid.tensor([4.0]))
tensor([1.7918])
>>> pylucid.special.xlogy(pylucid.tensor([2.0]), pylucid.tensor([1.0]))
tensor([0.])
"""

from __future__ import annotations

import math

from ._tensor import Tensor
from .ops.reduction import logsumexp
from .ops.special import (
    digamma,
    entr,
    erfc,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    log_softmax,
    ndtr,
    polygamma,
    sinc,
    softmax,
    xlog1py,
    xlogy,
)
from .ops.special import lgamma as gammaln

# erf, erfinv, expit, logit, exp2, expm1, log1p, round resolve lazily (module __getattr__ below)
__all__ = ["erfc", "gammaln", "digamma", "psi", "polygamma", "multigammaln", "i0",
           "i0e", "i1", "i1e", "xlogy", "xlog1py", "log_softmax", "softmax", "logsumexp", "entr", "sinc", "ndtr",
           "log_ndtr", "ndtri"]

psi = digamma

# element-wise ops owned by the element-wise family: resolved on first use
_TOP_LEVEL = {"erf": "erf", "erfinv": "erfinv", "expit": "sigmoid", "logit": "logit", "exp2": "exp2",
              "expm1": "expm1", "log1p": "log1p", "round": "round"}


def __getattr__(name: str):
    target = _TOP_LEVEL.get(name)
    if target is None:
        raise AttributeError(f"module 'pylucid.special' has no attribute {name!r}")
    import pylucid

    try:
        return getattr(pylucid, target)
    except AttributeError:
        raise AttributeError(f"pylucid.special.{name}: pylucid.{target} is not available in this build") from None


def ndtri(input: Tensor) -> Tensor:
    """Inverse of the standard normal CDF: ``sqrt(2) * erfinv(2p - 1)`` (a composite; ``+-inf`` at 0 and 1,
    NaN outside ``[0, 1]``).

    >>> import pylucid
    >>> pylucid.special.ndtri(pylucid.tensor([0.5, 0.975]))
    tensor([0.0000, 1.9600])
    """
    import pylucid

    return pylucid.erfinv(input * 2 - 1) * math.sqrt(2.0)


def multigammaln(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma ``sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)`` (composite of ``gammaln``).

    >>> import pylucid
    >>> pylucid.special.multigammaln(pylucid.tensor([2.5]), 2)
    tensor([0.8570])
    """
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"multigammaln: p must be a positive int, got {p!r}")
    from .ops.elementwise import add

    out = gammaln(input)
    for i in range(1, p):
        out = add(out, gammaln(input - i / 2))
    return add(out, p * (p - 1) / 4 * math.log(math.pi))
