"""The recurrent layers under a function transform: they leave their one-op fused layers for the cell ops, which
the transforms have rules for, when ``pylucid.ops._op.transform_active()`` says a transform is on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid import nn
from pylucid.ops import _op


def _torch_twin(mod, tmod):
    with torch.no_grad():
        for (name, p), (tname, tp) in zip(mod.named_parameters(), tmod.named_parameters()):
            assert name == tname
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    return tmod


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_jvp_through_a_recurrent_layer_equals_torch_func(kind):
    pl.manual_seed(0)
    kw = {"num_layers": 2, "bidirectional": True}
    mod = getattr(nn, kind)(3, 4, **kw).to(pl.float64)
    tmod = _torch_twin(mod, getattr(torch.nn, kind)(3, 4, **kw).double())
    x, t = np.random.default_rng(1).standard_normal((2, 5, 3))
    seen = []

    def f(s):
        seen.append(_op.transform_active())
        return mod(s)[0]

    y, dy = pl.func.jvp(f, (pl.tensor(x),), (pl.tensor(t),))
    ty, tdy = (r.detach() for r in torch.func.jvp(lambda s: tmod(s)[0], (torch.tensor(x),), (torch.tensor(t),)))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dy.numpy(), tdy.numpy(), rtol=1e-10, atol=1e-12)
    assert seen == [True] and not _op.transform_active()
