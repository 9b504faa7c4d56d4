"""``pylucid.special``: special functions, as ``torch.special``.

The functions are declared beside their ops, in ``pylucid.ops.special`` and
the element-wise family (``erf``, ``erfinv``, ``exp2``, ``expm1``, ``log1p``,
``round``); this module is the namespace those declarations build.
``expit`` (``sigmoid``), ``logit`` and ``logsumexp`` come from the activation
and reduction families.

>>> import pylucid
>>> pylucid.special.gammaln(pylucid.tensor([4.0]))
tensor([1.7918])
>>> pylucid.special.xlogy(pylucid.tensor([2.0]), pylucid.tensor([1.0]))
tensor([0.])
"""

from __future__ import annotations

from . import ops as _ops
from .ops.registry import namespace as _namespace

expit = _ops.sigmoid
logit = _ops.logit
logsumexp = _ops.logsumexp
globals().update(_namespace("pylucid.special"))

__all__ = sorted({*_namespace("pylucid.special"), "expit", "logit", "logsumexp"})
