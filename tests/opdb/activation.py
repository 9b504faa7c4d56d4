"""Op-database entries for the activations (``pylucid/ops/activation.py``), the composite ones (``celu``,
``softsign``, ...) and their ``pylucid.nn.functional`` forms (a function of their own, with ``inplace=``)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import pylucid as pl
import pylucid.nn.functional as F
from tests.opdb import (
    NAN,
    C,
    ErrorInput,
    OpEntry,
    Sample,
    U,
    kinks,
    noncontig,
    not_tensor,
    unary_samples,
    with_samples,
)


def unary(name, op=None, ref=None, lo=-2.0, hi=2.0, extra=(), **kw):
    """An entry for a unary op: 2-d, 0-d, empty and non-contiguous samples in ``[lo, hi]`` plus ``extra``."""
    op = op or getattr(pl, name)
    ref = ref or getattr(torch, name)
    kw.setdefault("error_inputs", not_tensor(name))
    return OpEntry(name, op, ref, with_samples(unary_samples(lo, hi), *extra), **kw)


def functional(name, ref=None, extra=(), lo=-2.0, hi=2.0, **kw):
    """The ``pylucid.nn.functional`` form of an activation: a 2-d sample, the kinks and ``extra``; first order
    only (the op's own entry takes the second)."""
    ref = ref or getattr(TF, name)
    return OpEntry(f"nn.functional.{name}", getattr(F, name), ref,
                   lambda: [Sample((U(3, 4, lo=lo, hi=hi),), name="2d"), *extra], gradgrad=False, **kw)


ENTRIES = [
    unary("sigmoid", extra=[Sample((np.array([-1000.0, 1000.0, -50.0, 50.0]),), name="large"),
                            Sample((C(3, 2),), name="complex")]),
    unary("tanh", extra=[Sample((np.array([-50.0, 50.0]),), name="saturated"), Sample((C(3, 2),), name="complex")]),
    OpEntry("logit", pl.logit, torch.logit,
            with_samples(unary_samples(0.05, 0.95), Sample((U(3, 4, lo=0.05, hi=0.95),), {"eps": 0.1}, "eps"),
                         Sample((np.array([-0.5, 0.0, 1.0, 1.5]),), name="outside", gradcheck=False),
                         Sample((np.array([-0.5, 0.0, 1.0, 1.5]),), {"eps": 1e-6}, "outside-eps", gradcheck=False)),
            error_inputs=lambda: [ErrorInput((U(2),), {"eps": "a"}, TypeError, "logit: eps")]),
    unary("relu", extra=[kinks(0.0, -1.0, 1.0, NAN), Sample((np.array([-2, 0, 3]),), name="int")],
          error_inputs=lambda: [ErrorInput((np.array([True]),), exc=TypeError, match="relu: bool")]),
    unary("relu6", ref=TF.relu6, lo=-2.0, hi=8.0, extra=[kinks(0.0, 6.0, -1.0, 7.0, name="boundaries")]),
    OpEntry("hardtanh", pl.hardtanh, TF.hardtanh,
            with_samples(unary_samples(), kinks(-1.0, 1.0, -2.0, 2.0, name="boundaries"),
                         Sample((U(3, 4, lo=-3, hi=3), -2.0, 0.5), name="bounds"),
                         Sample((U(3, 4),), {"min_val": -0.5, "max_val": 0.7}, "keyword-bounds")),
            error_inputs=lambda: [ErrorInput((U(2), 1.0, -1.0), exc=ValueError, match="hardtanh: max_val")]),
    OpEntry("leaky_relu", pl.leaky_relu, TF.leaky_relu,
            with_samples(unary_samples(), kinks(0.0, -1.0), Sample((U(3, 4), 0.3), name="slope")),
            error_inputs=lambda: [ErrorInput((U(2), "a"), exc=TypeError, match="leaky_relu: negative_slope")]),
    OpEntry("elu", pl.elu, TF.elu,
            with_samples(unary_samples(), Sample((U(3, 4),), {"alpha": 0.5}, "alpha"), kinks(0.0, -1.0, 1.0),
                         Sample((np.array([-100.0, 100.0, 1000.0]),), name="large", gradcheck=False)),
            error_inputs=not_tensor("elu")),
    unary("selu", extra=[kinks(0.0)]),
    OpEntry("gelu", pl.gelu, TF.gelu,
            with_samples(unary_samples(-4.0, 4.0), Sample((U(3, 4, lo=-4, hi=4),), {"approximate": "tanh"}, "tanh"),
                         Sample((np.array([-30.0, 30.0]),), {"approximate": "tanh"}, "tanh-large"),
                         Sample((noncontig(3, 4),), {"approximate": "none"}, "none-noncontig")),
            error_inputs=lambda: [ErrorInput((U(2),), {"approximate": "fast"}, ValueError, "gelu: approximate")]),
    unary("silu", ref=TF.silu, extra=[Sample((np.array([-800.0, 800.0]),), name="large", gradcheck=False)]),
    OpEntry("softplus", pl.softplus, TF.softplus,
            with_samples(unary_samples(-5.0, 5.0), Sample((U(3, 4, lo=-5, hi=5), 2.0, 3.0), name="beta-threshold"),
                         Sample((U(3, 4, lo=-5, hi=5),), {"beta": 2.0, "threshold": 3.0}, "keywords"),
                         Sample((np.array([-100.0, 30.0, 100.0]),), name="large", gradcheck=False),
                         Sample((np.array([-700.0, -30.0]),), name="tiny")),
            error_inputs=lambda: [ErrorInput((U(2), "a"), exc=TypeError, match="softplus: beta")]),
    unary("mish", ref=TF.mish, lo=-4.0, hi=4.0),
    unary("hardsigmoid", ref=TF.hardsigmoid, lo=-4.0, hi=4.0, extra=[kinks(-3.0, 3.0, 0.0)]),
    unary("hardswish", ref=TF.hardswish, lo=-4.0, hi=4.0, extra=[kinks(-3.0, 3.0, 0.0)]),
    # -- composites ---------------------------------------------------------------------------
    OpEntry("celu", pl.celu, TF.celu, lambda: [Sample((U(3, 4),)), Sample((U(3, 4), 0.5), name="alpha"),
                                               kinks(0.0, -1.0)]),
    *[OpEntry(n, getattr(pl, n), getattr(TF, n),
              lambda: [Sample((U(3, 4),)), Sample((U(3, 4), 1.2), name="lambd"), kinks(0.5, -0.5, 0.0)],
              gradgrad=False) for n in ("hardshrink", "softshrink")],
    *[OpEntry(n, getattr(pl, n), getattr(TF, n), with_samples(unary_samples(), *extra))
      for n, extra in (("logsigmoid", [Sample((np.array([-800.0, 30.0]),), name="large")]),
                       ("softsign", []), ("tanhshrink", []))],
    OpEntry("threshold", pl.threshold, TF.threshold,
            lambda: [Sample((U(3, 4), 0.3, -1.0)), Sample((U(3, 4), -0.5, 2.0), name="value-above"),
                     Sample((np.array([0.3, 0.2, 1.0]), 0.3, -1.0), name="at-threshold", gradcheck=False)],
            gradgrad=False),
    # -- the nn.functional forms ----------------------------------------------------------------
    functional("relu", extra=[Sample((U(3, 4),), {"inplace": True}, "inplace", grad_args=())]),
    *[functional(n) for n in ("relu6", "selu", "silu", "mish", "hardsigmoid", "hardswish", "logsigmoid",
                              "softsign", "tanhshrink", "sigmoid", "tanh")],
    functional("gelu", extra=[Sample((U(3, 4),), {"approximate": "tanh"}, "tanh")]),
    functional("elu", extra=[Sample((U(3, 4), 0.5), name="alpha")]),
    functional("celu", extra=[Sample((U(3, 4), 0.5), name="alpha")]),
    functional("leaky_relu", extra=[Sample((U(3, 4), 0.2), name="slope")]),
    functional("hardtanh", extra=[Sample((U(3, 4, lo=-3, hi=3), -2.0, 0.5), name="bounds")]),
    functional("softplus", extra=[Sample((U(3, 4), 2.0, 3.0), name="beta-threshold")]),
    functional("hardshrink", extra=[Sample((U(3, 4), 1.2), name="lambd")]),
    functional("softshrink", extra=[Sample((U(3, 4), 1.2), name="lambd")]),
    OpEntry("nn.functional.threshold", F.threshold, TF.threshold,
            lambda: [Sample((U(3, 4), 0.3, -1.0)), Sample((U(3, 4), 0.3, -1.0), {"inplace": True}, "inplace",
                                                          grad_args=())], gradgrad=False),
    OpEntry("nn.functional.relu_", F.relu_, TF.relu_, lambda: [Sample((U(3, 4),))], grad=False, amp=False),
    *[OpEntry(f"nn.functional.{n}", getattr(F, n), getattr(TF, n),
              lambda: [Sample((U(3, 4),), {"dim": 1}), Sample((U(2, 3, 4),), {"dim": 0}, "dim0")], gradgrad=False)
      for n in ("softmax", "log_softmax", "softmin")],
    OpEntry("nn.functional.glu", F.glu, TF.glu,
            lambda: [Sample((U(3, 4),)), Sample((U(4, 3),), {"dim": 0}, "dim0")],
            error_inputs=lambda: [ErrorInput((U(3, 3),), exc=ValueError, match="glu")]),
    OpEntry("nn.functional.prelu", F.prelu, TF.prelu,
            lambda: [Sample((U(2, 3, 4), U(3, seed=1)), name="per-channel"),
                     Sample((U(2, 3), U(1, seed=1)), name="shared")]),
    # evaluation: leaky_relu with the mean slope
    OpEntry("rrelu", pl.rrelu, torch.rrelu,
            with_samples(unary_samples(), Sample((U(3, 4), 0.1, 0.5), name="bounds")),
            error_inputs=lambda: [ErrorInput((U(2), 0.5, 0.1), exc=ValueError, match="rrelu: expected numbers")]),
    # training: one slope per element from pylucid's generator (shapes, dtypes and repeatability are compared)
    OpEntry("rrelu", F.rrelu, TF.rrelu, lambda: [Sample((U(3, 4), 0.1, 0.3, True)), Sample((U(0, 2), 0.1, 0.3, True),
                                                                                          name="empty")],
            variant="train", random=True, grad=False, amp=False),
]
