"""Random sampling ops: ``normal``, ``bernoulli``, ``multinomial``, ``poisson`` and the
in-place fillers (``Tensor.uniform_``, ``normal_``, ``exponential_``, ``bernoulli_``,
``random_``, ``geometric_``, ``cauchy_``, ``log_normal_``).

They live in :mod:`pylucid.random` beside the ``Generator`` they draw from, and
are declared there; importing that module here puts them in the ``pylucid``
namespace and on ``Tensor``. They are not registered ops: a random draw has no
backward of its own and never goes through autocast (samples are drawn in the
target dtype's precision, float32 for half types). Every function takes
``generator=``; without it the device's default generator is used, so a
``pylucid.manual_seed(s)`` makes a run reproducible.
"""

from __future__ import annotations

from ..random import (  # noqa: F401 - declared in pylucid.random, kept reachable from this family module
    bernoulli,
    bernoulli_,
    cauchy_,
    exponential_,
    geometric_,
    log_normal_,
    multinomial,
    normal,
    normal_,
    poisson,
    random_,
    uniform_,
)
