"""Op-database entries for the registered nn ops (``pylucid/ops/nn.py``), run through the functional API."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import pylucid
import pylucid.nn.functional as F
from pylucid.errors import ShapeMismatch
from pylucid.ops import nn as N
from tests.opdb import ErrorInput, OpEntry, Sample, rng


def U(*shape, lo=-2.0, hi=2.0, seed=0):
    return rng(seed).uniform(lo, hi, size=shape)


def I(*shape, hi=4, seed=0):  # noqa: E743 - integer indices
    return rng(seed).integers(0, hi, size=shape).astype(np.int64)


def _nc(*shape, seed=0):
    return U(*reversed(shape), seed=seed).T


def linear_samples():
    return [
        Sample((U(4, 3), U(5, 3, seed=1), U(5, seed=2)), name="2d"),
        Sample((U(2, 3, 3), U(2, 3, seed=1), None), name="3d-nobias"),
        Sample((U(3), U(4, 3, seed=1), U(4, seed=2)), name="1d-input"),
        Sample((U(0, 3), U(2, 3, seed=1), U(2, seed=2)), name="empty"),
        Sample((_nc(3, 4), _nc(2, 4, seed=1), U(2, seed=2)), name="noncontig"),
    ]


def linear_bf16(x, w, b=None):
    """``linear`` under bfloat16 autocast (the ``linear_autocast`` op), read back as float32."""
    with pylucid.amp.autocast(x.device.type, dtype=pylucid.bfloat16):
        return F.linear(x, w, b).float()


def linear_bf16_ref(x, w, b=None):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return TF.linear(x, w, b).float()


def layer_norm_samples():
    return [
        Sample((U(3, 4), (4,), U(4, seed=1), U(4, seed=2)), name="last"),
        Sample((U(2, 3, 4), (3, 4), U(3, 4, seed=1), None), name="two-dims"),
        Sample((U(2, 5), (5,), None, None), name="no-affine"),
        Sample((_nc(3, 4), (4,), U(4, seed=1), U(4, seed=2)), name="noncontig"),
        Sample((U(0, 4), (4,), U(4, seed=1), U(4, seed=2)), name="empty", gradcheck=False),
    ]


def batch_norm_train(x, w, b, eps=1e-5):
    return N.batch_norm_stats(x, None, None, w, b, True, eps)[0]


def batch_norm_train_ref(x, w, b, eps=1e-5):
    return TF.batch_norm(x, None, None, w, b, True, 0.0, eps)


def batch_norm_samples():
    return [
        Sample((U(4, 3), U(3, seed=1), U(3, seed=2)), name="2d"),
        Sample((U(2, 3, 5), U(3, seed=1), None), name="3d"),
        Sample((U(2, 2, 2, 3), None, None), name="4d-no-affine"),
        Sample((_nc(5, 3), U(3, seed=1), U(3, seed=2)), name="noncontig"),
    ]


def bn_eval_samples():
    rv = U(3, lo=0.5, hi=2.0, seed=4)
    return [Sample((U(4, 3), U(3, seed=3), rv, U(3, seed=1), U(3, seed=2)), name="eval", grad_args=(0, 3, 4))]


def rms_samples():
    return [
        Sample((U(3, 4), (4,), U(4, seed=1)), {"eps": 1e-6}, name="last"),
        Sample((U(2, 3, 4), (3, 4), None), {"eps": 1e-5}, name="two-dims"),
        Sample((_nc(3, 4), (4,), U(4, seed=1)), {"eps": 1e-6}, name="noncontig"),
    ]


def ce_samples():
    p = rng(5).dirichlet(np.ones(4), size=3)
    return [
        Sample((U(3, 4), I(3)), name="indices"),
        Sample((U(3, 4), I(3)), {"reduction": "none"}, name="none"),
        Sample((U(3, 4), I(3)), {"reduction": "sum", "label_smoothing": 0.2}, name="sum-smooth"),
        Sample((U(3, 4), np.array([1, -100, 2])), {"label_smoothing": 0.1}, name="ignore-smooth"),
        Sample((U(3, 4), np.array([1, 0, 2]), U(4, lo=0.1, hi=1.0, seed=3)), {"ignore_index": 0},
               name="weight-ignore", grad_args=(0,)),
        Sample((U(3, 4), I(3), U(4, lo=0.1, hi=1.0, seed=3)), {"label_smoothing": 0.3, "reduction": "none"},
               name="weight-smooth-none", grad_args=(0,)),
        Sample((U(2, 4, 3), I(2, 3)), name="k-dim"),
        Sample((U(4), np.array(2)), name="unbatched"),
        Sample((U(3, 4), p), name="probs"),
        Sample((U(3, 4), p, U(4, lo=0.1, hi=1.0, seed=3)), {"label_smoothing": 0.2, "reduction": "sum"},
               name="probs-weight-smooth", grad_args=(0, 1)),
        Sample((_nc(3, 4), I(3)), name="noncontig"),
        Sample((U(0, 4), I(0)), {"reduction": "sum"}, name="empty", gradcheck=False),
    ]


def ce_errors():
    return [
        ErrorInput((U(3, 4), I(2)), exc=ShapeMismatch, match="cross_entropy: expected target"),
        ErrorInput((U(3, 4), np.array([0, 1, 7])), exc=IndexError, match="Target 7 is out of bounds"),
        ErrorInput((U(3, 4), I(3)), {"reduction": "avg"}, exc=ValueError, match="reduction='avg'"),
    ]


def nll_samples():
    return [
        Sample((U(3, 4), I(3)), name="indices"),
        Sample((U(3, 4), I(3)), {"reduction": "none"}, name="none"),
        Sample((U(3, 4), np.array([1, 0, 2]), U(4, lo=0.1, hi=1.0, seed=3)), {"ignore_index": 0},
               name="weight-ignore", grad_args=(0,)),
        Sample((U(2, 4, 3), I(2, 3)), {"reduction": "sum"}, name="k-dim"),
        Sample((_nc(3, 4), I(3)), name="noncontig"),
    ]


def regression_samples(extra=None):
    extra = extra or {}

    def f():
        return [
            Sample((U(3, 4), U(3, 4, seed=1)), dict(extra), name="mean"),
            Sample((U(3, 4), U(3, 4, seed=1)), dict(extra, reduction="none"), name="none"),
            Sample((U(3, 4), U(3, 4, seed=1)), dict(extra, reduction="sum"), name="sum"),
            Sample((np.array(0.5), np.array(-1.0)), dict(extra), name="0d"),
            Sample((_nc(3, 4), U(3, 4, seed=1)), dict(extra), name="noncontig"),
            Sample((U(0, 2), U(0, 2, seed=1)), dict(extra, reduction="sum"), name="empty", gradcheck=False),
        ]
    return f


def bce_samples():
    x = U(3, 4, lo=0.05, hi=0.95)
    y = U(3, 4, lo=0.0, hi=1.0, seed=1)
    return [
        Sample((x, y), name="mean"),
        Sample((x, y, U(3, 4, lo=0.1, hi=1.0, seed=2)), {"reduction": "none"}, name="weight", grad_args=(0, 1)),
        Sample((x, y), {"reduction": "sum"}, name="sum"),
        Sample((np.array(0.3), np.array(1.0)), name="0d"),
        Sample((U(0, 2, lo=0.1, hi=0.9), U(0, 2, lo=0.1, hi=0.9)), name="empty", gradcheck=False),
    ]


def bce_logits_samples():
    y = U(3, 4, lo=0.0, hi=1.0, seed=1)
    return [
        Sample((U(3, 4, lo=-4, hi=4), y), name="mean"),
        Sample((U(3, 4, lo=-4, hi=4), y, U(3, 4, lo=0.1, hi=1.0, seed=2)), {"reduction": "none"}, name="weight",
               grad_args=(0, 1)),
        Sample((U(3, 4, lo=-4, hi=4), y, None, U(4, lo=0.5, hi=3.0, seed=3)), {"reduction": "sum"},
               name="pos_weight", grad_args=(0, 1)),
        Sample((np.array([-40.0, 40.0]), np.array([1.0, 0.0])), name="extreme"),
        Sample((U(0, 2), U(0, 2)), {"reduction": "sum"}, name="empty", gradcheck=False),
    ]


def bce_logits_ref(x, y, weight=None, pos_weight=None, reduction="mean"):
    return TF.binary_cross_entropy_with_logits(x, y, weight, reduction=reduction, pos_weight=pos_weight)


def bce_logits_op(x, y, weight=None, pos_weight=None, reduction="mean"):
    return F.binary_cross_entropy_with_logits(x, y, weight, reduction=reduction, pos_weight=pos_weight)


def embedding_samples():
    return [
        Sample((I(3, 2, hi=5), U(5, 3)), name="2d-idx"),
        Sample((np.array([1, 1, 4, 1]), U(5, 3)), name="repeats"),
        Sample((np.array([0, 2, 0]), U(4, 2)), {"padding_idx": 0}, name="padding",
               gradcheck=False),  # the padding row's gradient is zero by definition
        Sample((np.array(3), U(5, 3)), name="0d-idx"),
        Sample((np.zeros((0,), dtype=np.int64), U(5, 3)), name="empty"),
        Sample((np.array([2, 0]), _nc(4, 3)), name="noncontig"),
    ]


def _mask(shape, p=0.4, seed=0):
    return rng(seed).uniform(size=shape) >= p


def dropout_samples():
    return [
        Sample((U(3, 4), _mask((3, 4)), 1 / 0.6), name="elementwise"),
        Sample((U(2, 3, 2), _mask((2, 3, 1)), 2.0), name="channel"),
        Sample((np.array(1.5), np.array(True), 2.0), name="0d"),
        Sample((U(0, 3), _mask((0, 3)), 2.0), name="empty"),
        Sample((_nc(3, 4), _mask((3, 4)), 1.25), name="noncontig"),
    ]


def _alpha_consts(p):
    ap = -1.7580993408473766
    a = ((1 - p) * (1 + p * ap ** 2)) ** -0.5
    return a, -a * ap * p, ap


def alpha_dropout_op(x, m, p):
    return N.alpha_dropout_mask_op(x, m, *_alpha_consts(p))


def alpha_dropout_ref(x, m, p):
    a, b, ap = _alpha_consts(p)
    mf = m.to(x.dtype)
    return a * (x * mf + ap * (1 - mf)) + b


def sdpa_samples():
    causal = np.tril(np.ones((3, 4), dtype=bool))
    return [
        Sample((U(2, 3, 4), U(2, 4, 4, seed=1), U(2, 4, 2, seed=2)), name="basic"),
        Sample((U(1, 2, 3, 2), U(1, 2, 4, 2, seed=1), U(1, 2, 4, 3, seed=2), causal), name="bool-mask"),
        Sample((U(2, 3, 2), U(2, 3, 2, seed=1), U(2, 3, 2, seed=2)), {"is_causal": True}, name="causal"),
        Sample((U(2, 3, 2), U(2, 4, 2, seed=1), U(2, 4, 2, seed=2), U(3, 4, seed=3)), {"scale": 0.3},
               name="float-mask-scale", grad_args=(0, 1, 2)),
        Sample((U(2, 3, 2), U(1, 4, 2, seed=1), U(1, 4, 2, seed=2)), name="broadcast-batch"),
        Sample((_nc(3, 2), _nc(4, 2, seed=1), U(4, 2, seed=2)), name="noncontig"),
    ]


def layer_norm_backward_samples():
    return [Sample((U(3, 4, seed=3), U(3, 4), (4,), U(4, seed=1)), name="last"),
            Sample((U(2, 3, 4, seed=3), U(2, 3, 4), (3, 4), U(3, 4, seed=1)), name="two-dims"),
            Sample((U(2, 5, seed=3), U(2, 5), (5,), None), name="no-weight"),
            Sample((_nc(3, 4, seed=3), _nc(3, 4), (4,), U(4, seed=1)), name="noncontig"),
            Sample((U(0, 4, seed=3), U(0, 4), (4,), U(4, seed=1)), name="empty", gradcheck=False)]


def layer_norm_backward_ref(grad_output, input, normalized_shape, weight=None, eps=1e-5):
    _, mean, rstd = torch.ops.aten.native_layer_norm(input, list(normalized_shape), weight, None, eps)
    return torch.ops.aten.native_layer_norm_backward(grad_output, input, list(normalized_shape), mean, rstd,
                                                     weight, None, [True, False, False])[0]


ENTRIES = [
    OpEntry("linear", F.linear, TF.linear, linear_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4, 5)), exc=ShapeMismatch, match="linear: input of shape")]),
    # float32 operands only (autocast's case); gradients, fast path and second order: tests/test_nn_core.py
    OpEntry("linear_autocast", linear_bf16, linear_bf16_ref, lambda: linear_samples()[:3], dtypes=("float32",),
            grad=False, gradgrad=False, amp=False, atol=3e-2, rtol=2e-2),
    OpEntry("layer_norm", F.layer_norm, TF.layer_norm, layer_norm_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3), (4,)), exc=ShapeMismatch, match="layer_norm: normalized")]),
    OpEntry("layer_norm_backward", N.layer_norm_backward, layer_norm_backward_ref, layer_norm_backward_samples),
    OpEntry("batch_norm", batch_norm_train, batch_norm_train_ref, batch_norm_samples),
    OpEntry("rms_norm", F.rms_norm, TF.rms_norm, rms_samples),
    OpEntry("cross_entropy_loss", F.cross_entropy, TF.cross_entropy, ce_samples, error_inputs=ce_errors,
            dtypes=("float32", "float64")),
    OpEntry("nll_loss", F.nll_loss, TF.nll_loss, nll_samples),
    OpEntry("mse_loss", F.mse_loss, TF.mse_loss, regression_samples(),
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4)), exc=ShapeMismatch, match="mse_loss: target")]),
    OpEntry("huber_loss", F.huber_loss, TF.huber_loss, regression_samples({"delta": 0.7})),
    OpEntry("bce_loss", F.binary_cross_entropy, TF.binary_cross_entropy, bce_samples,
            error_inputs=lambda: [ErrorInput((U(2, 2, lo=1.5, hi=2.0), U(2, 2, lo=0, hi=1)), exc=ValueError,
                                             match="between 0 and 1")]),
    OpEntry("bce_with_logits", bce_logits_op, bce_logits_ref, bce_logits_samples),
    OpEntry("embedding", F.embedding, TF.embedding, embedding_samples, covers=("embedding_backward",),
            error_inputs=lambda: [ErrorInput((np.array([5]), U(5, 3)), exc=IndexError, match="index out of range")]),
    OpEntry("dropout", N.dropout_mask_op, lambda x, m, s: x * m.to(x.dtype) * s, dropout_samples),
    OpEntry("alpha_dropout", alpha_dropout_op, alpha_dropout_ref,
            lambda: [Sample((U(3, 4), _mask((3, 4)), 0.4), name="elementwise"),
                     Sample((U(2, 3, 2), _mask((2, 3, 1)), 0.2), name="channel")]),
    OpEntry("scaled_dot_product_attention", F.scaled_dot_product_attention, TF.scaled_dot_product_attention,
            sdpa_samples, atol=1e-5, rtol=1e-5,
            error_inputs=lambda: [ErrorInput((U(2, 3), U(2, 4), U(2, 4)), exc=ShapeMismatch,
                                             match="scaled_dot_product_attention")]),
]

# eval-mode batch norm (running statistics as inputs) is the same registered op: an extra entry would trip the
# one-entry-per-name coverage, so it is checked in tests/test_nn_core.py
_ = bn_eval_samples
