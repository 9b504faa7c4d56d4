"""Op-database entries for random sampling (``pylucid/random.py``, ``pylucid/ops/random_ops.py``).

A draw has nothing to compare with PyTorch value for value: these entries are
samplers (``random=True``), checked for the shape and dtype PyTorch gives and
for repeating their draws from one generator seed and from one global seed.
Their distributions are tested in tests/test_random.py. The creation samplers
(``rand``, ``randn``, ...) are non-op API for the coverage test; their entries
are here all the same, as the table of what PyTorch users call.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.optest_utils import TORCH_DTYPE


def sampler(name, op, ref, samples, **kw):
    kw.setdefault("dtypes", ("float32",))
    return OpEntry(name, op, ref, samples, random=True, grad=False, gradgrad=False, amp=False, **kw)


def _p(*shape, value=0.5):
    return np.full(shape, value)


ENTRIES = [
    # -- fresh tensors ------------------------------------------------------------------------
    sampler("rand", pl.rand, torch.rand, lambda: [Sample((2, 3)), Sample(((4,),), name="tuple")]),
    sampler("randn", pl.randn, lambda *s, dtype=None: torch.randn(*s, dtype=dtype and TORCH_DTYPE[dtype.name]),
            lambda: [Sample((2, 3)), Sample((2, 3), {"dtype": pl.float64}, "float64")]),
    sampler("randint", pl.randint, torch.randint,
            lambda: [Sample((0, 10, (2, 3))), Sample((10, (2, 3)), name="high-only")],
            postprocess=lambda o: (o >= 0) & (o < 10)),
    sampler("randperm", pl.randperm, torch.randperm, lambda: [Sample((6,))], postprocess=np.sort),
    sampler("normal", pl.normal, torch.normal,
            lambda: [Sample((0.0, 2.0, (2, 3)), name="scalars"), Sample((np.zeros((2, 3)), np.ones((2, 3))),
                                                                        name="tensors"),
                     Sample((np.zeros(3), 2.0), name="tensor-mean")], dtypes=("float32", "float64")),
    # -- draws from tensors of parameters --------------------------------------------------------
    sampler("bernoulli", pl.bernoulli, torch.bernoulli, lambda: [Sample((_p(2, 3),)), Sample((_p(3, value=0.2),),
                                                                                            name="1d")],
            dtypes=("float32", "float64"),
            error_inputs=lambda: [ErrorInput((_p(2, value=1.5),), exc=ValueError, match="bernoulli")]),
    sampler("multinomial", pl.multinomial, torch.multinomial,
            lambda: [Sample((np.array([0.2, 0.3, 0.5]), 2)), Sample((np.array([[0.2, 0.8], [0.5, 0.5]]), 4, True),
                                                                   name="replacement")]),
    sampler("poisson", pl.poisson, torch.poisson, lambda: [Sample((_p(2, 3, value=3.0),))],
            dtypes=("float32", "float64")),
    sampler("bernoulli", pl.Tensor.bernoulli, torch.Tensor.bernoulli, lambda: [Sample((_p(2, 3),))], variant="method"),
    sampler("multinomial", pl.Tensor.multinomial, torch.Tensor.multinomial,
            lambda: [Sample((np.array([0.2, 0.3, 0.5]), 2))], variant="method"),
    sampler("poisson", pl.Tensor.poisson, lambda x: torch.poisson(x), lambda: [Sample((_p(3, value=2.0),))],
            variant="method"),
    # -- in-place fills ---------------------------------------------------------------------------
    *[sampler(n, getattr(pl.Tensor, n), getattr(torch.Tensor, n), lambda args=args: [Sample((np.zeros((2, 3)), *args))],
              dtypes=("float32", "float64"))
      for n, args in (("uniform_", (-1.0, 1.0)), ("normal_", (0.0, 1.0)), ("exponential_", (2.0,)),
                      ("bernoulli_", (0.5,)), ("random_", (0, 10)), ("geometric_", (0.3,)), ("cauchy_", ()),
                      ("log_normal_", ()))],
]
