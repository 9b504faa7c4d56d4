"""Op-database entries for the reparameterised samplers (``pylucid/ops/sampling.py``).

``standard_gamma`` and ``binomial`` are samplers (``random=True``: shape, dtype and seeding are checked here;
their distributions and the gamma draw's gradient in tests/test_distributions.py). ``_standard_gamma_grad``
is deterministic and compared value for value with ``torch._standard_gamma_grad`` over its three branches
(``x < 0.8``, ``alpha > 8``, the rational approximation); PyTorch gives it no derivative, so no gradient check.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from tests.opdb import ErrorInput, OpEntry, Sample


def _gamma_grad_samples():
    alpha = np.array([0.3, 1.0, 2.5, 5.0, 7.9, 8.1, 20.0, 50.0])
    return [Sample((alpha, alpha * f), name=f"x={f}alpha") for f in (0.1, 0.5, 0.95, 1.0, 1.05, 1.5, 3.0)] + [
        Sample((np.full((2, 1), 3.0), np.array([0.2, 1.0, 4.0])), name="broadcast")]


ENTRIES = [
    OpEntry("standard_gamma", pl._standard_gamma, torch._standard_gamma,
            lambda: [Sample((np.full((2, 3), 2.0),)), Sample((np.array([0.1, 1.0, 30.0]),), name="spread")],
            random=True, grad=False, gradgrad=False, amp=False,
            error_inputs=lambda: [ErrorInput((np.array([1, 2]),), exc=TypeError, match="_standard_gamma")]),
    OpEntry("_standard_gamma_grad", pl._standard_gamma_grad, torch._standard_gamma_grad, _gamma_grad_samples,
            grad=False, gradgrad=False, amp=False, rtol=1e-5, atol=1e-6),
    OpEntry("binomial", pl.binomial, torch.binomial,
            lambda: [Sample((np.full((2, 3), 10.0), np.full((2, 3), 0.3))),
                     Sample((np.array([0.0, 4.0]), np.array([0.5, 1.0])), name="edges")],
            random=True, grad=False, gradgrad=False, amp=False,
            error_inputs=lambda: [ErrorInput((np.array([2.0]), np.array([1.5])), exc=ValueError, match="binomial")]),
]
