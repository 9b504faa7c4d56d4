"""Op-database entries for the nn ops (``pylucid/ops/nn.py``), run through the functional API, and the
``pylucid.nn.functional`` composites (losses, normalisations, distances, attention, dropout).

``RNN``/``LSTM``/``GRU`` and their cells are modules built from these ops and have no function of their own;
they are tested against torch.nn with copied state dicts in ``tests/test_nn_rnn.py``."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import pylucid
import pylucid.nn.functional as F
from pylucid.errors import ShapeMismatch
from pylucid.ops import nn as N
from tests.opdb import ErrorInput, OpEntry, Sample, U, optional, rng


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
    return [Sample((U(4, 3), U(3, seed=3), rv, U(3, seed=1), U(3, seed=2)), name="eval", grad_args=(0, 3, 4)),
            Sample((U(2, 3, 5), U(3, seed=3), rv, None, None), {"eps": 1e-3}, "3d-no-affine", grad_args=(0,))]


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
        # the gradient is scaled on purpose: compared with PyTorch's, not with finite differences
        Sample((np.array([[1, 1, 4], [1, 2, 4]]), U(5, 3)), {"scale_grad_by_freq": True},
               name="scale-grad-by-freq", gradcheck=False),
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
               name="float-mask-scale"),
        Sample((U(2, 3, 2), U(2, 4, 2, seed=1), U(2, 4, 2, seed=2), U(2, 3, 4, seed=3)), name="float-mask-full"),
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


def ctc(logits, *args, **kw):
    return F.ctc_loss(F.log_softmax(logits, 2), *args, **kw)


def ctc_ref(logits, *args, **kw):
    return TF.ctc_loss(TF.log_softmax(logits, 2), *args, **kw)


def mha(q, k, v, w_in, b_in, w_out, b_out):
    """``multi_head_attention_forward`` with 2 heads, packed projections, no masks, averaged weights."""
    return F.multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, None, None, False, 0.0, w_out, b_out,
                                          training=False)


def mha_ref(q, k, v, w_in, b_in, w_out, b_out):
    return TF.multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, None, None, False, 0.0, w_out, b_out,
                                           training=False)



def _sign(*shape, seed=0):
    return np.where(rng(seed).uniform(size=shape) > 0.5, 1.0, -1.0)


def loss_samples():
    """The margin and likelihood losses: ``{name: [Sample, ...]}`` (2-d, 1-d/0-d, empty and reductions)."""
    t = np.array([0, 3, 4, 1])
    ml = np.array([[3, 0, -1, 1, 1], [1, 1, 2, -1, 0], [0, 1, 2, 3, 4], [-1, 0, 0, 0, 0]])
    pos = U(4, 5, lo=0.2, hi=3.0, seed=3)
    counts = np.round(U(4, 5, lo=0.0, hi=4.0, seed=4))
    return {
        "poisson_nll_loss": [
            Sample((U(4, 5), counts)), Sample((U(4, 5), counts), {"full": True, "reduction": "none"}, "full",
                                             grad_args=(0,)),
            # Stirling's term: PyTorch's target gradient is NaN at y = 0 (the masked log 0), pylucid's finite
            Sample((pos, counts), {"log_input": False, "full": True, "reduction": "sum"}, "rate", grad_args=(0,)),
            Sample((np.array(0.3), np.array(2.0)), name="0d"), Sample((U(0, 3), U(0, 3)), name="empty"),
            Sample((U(3, 4), U(4, lo=0, hi=3, seed=1)), {"reduction": "none"}, "broadcast")],
        "gaussian_nll_loss": [
            Sample((U(4, 5), U(4, 5, seed=1), pos)), Sample((U(4, 5), U(4, 5, seed=1), pos[:, 0]), {"full": True},
                                                              "homoscedastic"),
            Sample((U(4, 5), U(4, 5, seed=1), pos[:, :1]), {"reduction": "none"}, "one-dim"),
            Sample((U(3, 5), U(3, 5, seed=1), 0.7), {"reduction": "sum"}, "float-var"),
            Sample((U(3, 2), U(3, 2, seed=1), np.array([[1e-8, 0.5]] * 3)), name="clamped", gradcheck=False)],
        "hinge_embedding_loss": [
            Sample((U(4, 5), _sign(4, 5)), {"margin": 0.5}), Sample((U(6), _sign(6)), {"reduction": "none"}, "none"),
            Sample((np.array(0.3), np.array(-1.0)), name="0d"), Sample((U(0, 2), U(0, 2)), name="empty")],
        "soft_margin_loss": [
            Sample((U(4, 5), _sign(4, 5))), Sample((U(6) * 30, _sign(6)), {"reduction": "none"}, "large"),
            Sample((np.array(0.3), np.array(-1.0)), name="0d"), Sample((U(0, 2), U(0, 2)), name="empty")],
        "multi_margin_loss": [
            Sample((U(4, 5), t)), Sample((U(4, 5), t, 2, 0.5, U(5, lo=0.1, hi=1.0, seed=2)), {"reduction": "none"},
                                         "p2-weight", grad_args=(0,)),
            Sample((U(5), np.array([2])), {"reduction": "none"}, "1d"),
            Sample((U(5), np.array(2)), {"reduction": "none"}, "1d-0d-target"),
            Sample((np.array(0.7), np.array(0)), name="0d"),
            Sample((U(0, 5), np.zeros(0, dtype=np.int64)), {"reduction": "none"}, "empty")],
        "multilabel_margin_loss": [
            Sample((U(4, 5), ml)), Sample((U(4, 5), ml), {"reduction": "none"}, "none"),
            Sample((U(5), ml[0]), {"reduction": "none"}, "1d"),
            Sample((np.array(0.7), np.array(0)), {"reduction": "none"}, "0d")],
        "multilabel_soft_margin_loss": [
            Sample((U(4, 5), (U(4, 5, seed=1) > 0).astype(float))),
            Sample((U(4, 5), U(4, 5, lo=0, hi=1, seed=1), U(5, lo=0.1, hi=1, seed=2)), {"reduction": "none"},
                   "weight-soft"),
            Sample((U(0, 3), U(0, 3)), {"reduction": "sum"}, "empty")],
        "triplet_margin_with_distance_loss": [
            Sample((U(4, 3), U(4, 3, seed=1), U(4, 3, seed=2))),
            Sample((U(4, 3), U(4, 3, seed=1), U(4, 3, seed=2)), {"swap": True, "margin": 0.5, "reduction": "none"},
                   "swap"),
            Sample((U(4, 3), U(4, 3, seed=1), U(4, 3, seed=2)),
                   {"distance_function": lambda a, b: ((a - b) ** 2).sum(-1)}, "custom-distance")],
    }


def loss_errors(name):
    bad = {
        "poisson_nll_loss": [ErrorInput((U(2), U(2)), {"reduction": "avg"}, ValueError, "poisson_nll_loss")],
        "gaussian_nll_loss": [ErrorInput((U(2, 3), U(2, 3), U(3, 2, lo=0.1, hi=1)), exc=ValueError,
                                         match="var is of incorrect size"),
                              ErrorInput((U(2), U(2), np.array([-1.0, 1.0])), exc=ValueError, match="negative")],
        "multi_margin_loss": [ErrorInput((U(2, 3), np.array([0, 1])), {"p": 3}, ValueError, "p == 1 and p == 2")],
        "multilabel_margin_loss": [ErrorInput((U(2, 3), np.array([[0, 1, -1]])), exc=ShapeMismatch,
                                              match="multilabel_margin_loss: target")],
        "triplet_margin_with_distance_loss": [ErrorInput((U(2, 3), U(2, 3), U(2, 3)), {"margin": 0.0}, ValueError,
                                                         "margin must be greater than 0")],
    }
    return lambda: bad.get(name, [ErrorInput(([1.0], U(2)), exc=TypeError, match=name)])


def _input_grad_only(samples):
    # PyTorch's kernels for these take no gradient for the target
    for smp in samples:
        smp.grad_args = (0,) if smp.grad_args is None else smp.grad_args
    return samples


def _loss_entries():
    out = []
    for name in loss_samples():
        gg = name not in ("multi_margin_loss", "multilabel_margin_loss", "hinge_embedding_loss")
        wrap = _input_grad_only if name in ("soft_margin_loss", "hinge_embedding_loss") else list
        out.append(OpEntry(f"nn.functional.{name}", getattr(F, name), getattr(TF, name),
                           lambda name=name, wrap=wrap: wrap(loss_samples()[name]), error_inputs=loss_errors(name),
                           gradgrad=gg))
    return out


def grid_sample_samples():
    g2 = U(2, 2, 3, 2, lo=-1.3, hi=1.3, seed=1)
    g3 = U(1, 2, 1, 2, 3, lo=-1.2, hi=1.2, seed=1)
    out = [Sample((U(2, 2, 3, 4), g2), {"mode": m, "padding_mode": p, "align_corners": a}, f"{m}-{p}-{int(a)}",
                  grad_args=(0,) if m == "nearest" else None)
           for m in ("bilinear", "nearest", "bicubic") for p, a in (("zeros", False), ("border", True),
                                                                     ("reflection", False), ("reflection", True))]
    out += [Sample((U(1, 2, 2, 3, 3), g3), {"mode": m, "padding_mode": p, "align_corners": True}, f"3d-{m}-{p}",
                   grad_args=(0,) if m == "nearest" else None)
            for m, p in (("bilinear", "zeros"), ("bilinear", "reflection"), ("nearest", "border"))]
    out += [Sample((U(1, 1, 3, 3), U(1, 0, 2, 2, seed=1)), {"align_corners": False}, "empty-grid")]
    return out


def affine_grid_samples():
    return [Sample((U(2, 2, 3), (2, 1, 3, 4)), {"align_corners": False}),
            Sample((U(1, 2, 3), (1, 3, 1, 5)), {"align_corners": True}, "unit-height"),
            Sample((U(2, 3, 4), (2, 1, 2, 3, 2)), {"align_corners": False}, "3d")]


def _distinct(*shape, seed=0):
    return rng(seed).permutation(int(np.prod(shape))).reshape(shape).astype(float) / 8 - 1


def unpool_samples(nd):
    def f():
        out = []
        for name, shape, kw in (("basic", (2, 2) + (4, 6, 4)[:nd], {}),
                                ("stride-pad", (1, 2) + (5, 4, 5)[:nd], {"stride": 2, "padding": 1}),  # no overlap
                                ("unbatched", (2,) + (4, 4, 2)[:nd], {})):
            x = torch.tensor(_distinct(*shape))
            y, idx = getattr(TF, f"max_pool{nd}d")(x, 2, return_indices=True, **kw)
            ukw = dict(kw, output_size=shape[-nd:]) if kw else kw
            out.append(Sample((y.numpy(), idx.numpy(), 2), ukw, name, grad_args=(0,)))
        x = torch.tensor(_distinct(1, 1, *(5,) * nd))
        y, idx = getattr(TF, f"max_pool{nd}d")(x, 2, return_indices=True)
        out.append(Sample((y.numpy(), idx.numpy(), 2), {"output_size": (5,) * nd}, "output-size", grad_args=(0,)))
        return out
    return f


def lp_pool_samples(nd):
    def f():
        sp = (5, 4, 4)[:nd]
        return [Sample((U(2, 2, *sp, lo=0.1, hi=2.0), 2, 2)),
                Sample((U(1, 2, *sp, lo=0.1, hi=2.0, seed=1), 1.5, 3), {"stride": 1}, "p1.5-stride"),
                Sample((U(2, *sp, lo=0.1, hi=2.0, seed=2), 3, 2), {"ceil_mode": True}, "unbatched-ceil")]
    return f


def fractional_samples(nd):
    def f():
        sp = (7, 6, 5)[:nd]
        u = rng(5).uniform(size=(2, 2, nd))
        return [Sample((_distinct(2, 2, *sp), 2, 3, None, False, u), name="size", grad_args=(0,)),
                Sample((_distinct(2, 2, *sp, seed=1), 2, None, (0.5,) * nd, True, u), name="ratio-indices",
                       grad_args=(0,)),
                Sample((_distinct(2, *sp, seed=2), 2, 1, None, False, u[:1]), name="unbatched-global",
                       grad_args=(0,)),
                Sample((U(0, 2, *sp), 2, 3, None, True, u[:0]), name="empty-batch", grad_args=(0,))]
    return f

def mha_kv(q, k, v, w_in, b_in, w_out, b_out, bias_k, bias_v):
    """``multi_head_attention_forward`` with ``bias_k``/``bias_v``, a zero attention position, per-head weights."""
    return F.multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, bias_k, bias_v, True, 0.0, w_out, b_out,
                                          training=False, average_attn_weights=False)


def mha_kv_ref(q, k, v, w_in, b_in, w_out, b_out, bias_k, bias_v):
    return TF.multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, bias_k, bias_v, True, 0.0, w_out, b_out,
                                           training=False, average_attn_weights=False)


def _gumbel_rows(o):
    """The sums along the sampled dim (-1 for the 2-d samples, 1 for the 3-d one): 1 in both frameworks."""
    o = np.asarray(o)
    return np.round(o.sum(-1 if o.ndim < 3 else 1), 5)


ENTRIES = [
    OpEntry("linear", F.linear, TF.linear, linear_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3), U(4, 5)), exc=ShapeMismatch, match="linear: input of shape")]),
    # float32 operands only (autocast's case); gradients, fast path and second order: tests/test_nn_core.py
    OpEntry("linear_autocast", linear_bf16, linear_bf16_ref, lambda: linear_samples()[:3], dtypes=("float32",),
            grad=False, gradgrad=False, amp=False, atol=3e-2, rtol=2e-2),
    OpEntry("layer_norm", F.layer_norm, TF.layer_norm, layer_norm_samples,
            error_inputs=lambda: [ErrorInput((U(2, 3), (4,)), exc=ShapeMismatch, match="layer_norm: normalized")]),
    *optional(lambda: OpEntry("layer_norm_backward", N.layer_norm_backward, layer_norm_backward_ref,
                              layer_norm_backward_samples)),
    OpEntry("batch_norm", batch_norm_train, batch_norm_train_ref, batch_norm_samples),
    # eval mode: the running statistics are inputs (no gradient flows to them)
    OpEntry("batch_norm", F.batch_norm, TF.batch_norm, bn_eval_samples, variant="eval"),
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
    OpEntry("bce_with_logits", bce_logits_op, bce_logits_ref, bce_logits_samples,
            covers=("nn.functional.binary_cross_entropy_with_logits",)),
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
    # -- the functional forms with a function of their own ---------------------------------------------
    OpEntry("nn.functional.batch_norm", F.batch_norm, TF.batch_norm,
            lambda: [Sample((U(4, 3), None, None, U(3, seed=1), U(3, seed=2), True), name="train"),
                     Sample((U(4, 3), U(3, seed=3), U(3, lo=0.5, hi=2.0, seed=4), U(3, seed=1), U(3, seed=2), True,
                             0.3),
                            name="train-running", grad_args=(0, 3, 4))], gradgrad=False),
    OpEntry("nn.functional.one_hot", F.one_hot, TF.one_hot,
            lambda: [Sample((np.array([0, 2, 1]),), {"num_classes": 4}), Sample((np.array([[0], [2]]),), name="auto")],
            grad=False, amp=False),
    OpEntry("nn.functional.pad", F.pad, TF.pad,
            lambda: [Sample((U(1, 2, 5), (2, 1)), {"mode": "reflect"}), Sample((U(3, 4), (1, 1, 2, 0)), {"value": 0.5},
                                                                                  "value"),
                     # negative pads crop, in every mode
                     *[Sample((U(1, 2, 4, 5), (-1, 2, 1, -2)), {"mode": m}, f"negative-{m}")
                       for m in ("constant", "reflect", "replicate", "circular")],
                     Sample((U(1, 2, 6), (2, -3)), {"mode": "circular"}, "negative-circular-1d")]),
    OpEntry("nn.functional.bilinear", F.bilinear, TF.bilinear,
            lambda: [Sample((U(3, 2), U(3, 4, seed=1), U(5, 2, 4, seed=2), U(5, seed=3))),
                     Sample((U(3, 2), U(3, 4, seed=1), U(5, 2, 4, seed=2)), name="no-bias")]),
    OpEntry("nn.functional.cosine_similarity", F.cosine_similarity, TF.cosine_similarity,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1))), Sample((U(3, 4), U(4, seed=1)), {"dim": -1}, "broadcast"),
                     # the norms are taken over the broadcast shape
                     Sample((U(3, 1), U(1, 4, seed=1)), {"dim": 1}, "broadcast-along-dim"),
                     Sample((U(3, 1, 2), U(1, 4, 2, seed=1)), {"dim": 0}, "broadcast-3d"),
                     Sample((np.zeros((2, 3)), U(2, 3, seed=1)), name="zero-norm", gradcheck=False)]),
    OpEntry("nn.functional.pairwise_distance", F.pairwise_distance, TF.pairwise_distance,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1))), Sample((U(3, 4), U(3, 4, seed=1)), {"p": 1.0, "keepdim": True},
                                                                 "p1-keep")]),
    OpEntry("nn.functional.normalize", F.normalize, TF.normalize,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"p": 1.0, "dim": 0}, "p1-dim0"),
                     Sample((U(3, 4) * (U(3, 4, seed=1) > 0),), {"p": 0}, "p0", gradcheck=False),
                     Sample((U(3, 4),), {"p": 3.0, "dim": -1}, "p3")]),
    OpEntry("pdist", pylucid.pdist, torch.pdist,
            lambda: [Sample((U(5, 3),)), Sample((U(4, 2),), {"p": 1.0}, "p1"), Sample((U(4, 3),), {"p": 0}, "p0"),
                     Sample((U(4, 3),), {"p": 3.0}, "p3"), Sample((U(4, 3),), {"p": float("inf")}, "inf"),
                     Sample((U(1, 3),), name="one-row"),  # (0, M): PyTorch 2.13 CPU segfaults in its backward
                     Sample((np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]]),), name="zero-distance", gradcheck=False)],
            error_inputs=lambda: [ErrorInput((U(2, 3, 4),), exc=ShapeMismatch, match="pdist: expected a 2-D")]),
    *[OpEntry(f"nn.functional.{n}", getattr(F, n), getattr(TF, n), regression_samples(extra), gradgrad=gg)
      for n, extra, gg in (("l1_loss", None, False), ("smooth_l1_loss", {"beta": 0.7}, False))],
    OpEntry("nn.functional.kl_div", F.kl_div, TF.kl_div,
            lambda: [Sample((np.log(rng(1).dirichlet(np.ones(4), size=3)), rng(2).dirichlet(np.ones(4), size=3)),
                            {"reduction": "batchmean"}),
                     Sample((U(3, 4), U(3, 4, seed=1)), {"reduction": "sum", "log_target": True}, "log-target"),
                     Sample((U(3, 4), U(3, 4, lo=0.1, hi=1.0, seed=1)), {"reduction": "none"}, "none")]),
    OpEntry("nn.functional.margin_ranking_loss", F.margin_ranking_loss, TF.margin_ranking_loss,
            lambda: [Sample((U(5), U(5, seed=1), np.sign(U(5, seed=2))), {"margin": 0.3}, grad_args=(0, 1)),
                     Sample((U(5), U(5, seed=1), np.sign(U(5, seed=2))), {"reduction": "none"}, "none",
                            grad_args=(0, 1))]),
    OpEntry("nn.functional.cosine_embedding_loss", F.cosine_embedding_loss, TF.cosine_embedding_loss,
            lambda: [Sample((U(4, 3), U(4, 3, seed=1), np.array([1, -1, 1, -1])), {"margin": 0.2}),
                     Sample((U(4, 3), U(4, 3, seed=1), np.array([1, -1, -1, 1])), {"reduction": "sum"}, "sum")]),
    OpEntry("nn.functional.triplet_margin_loss", F.triplet_margin_loss, TF.triplet_margin_loss,
            lambda: [Sample((U(4, 3), U(4, 3, seed=1), U(4, 3, seed=2))),
                     Sample((U(4, 3), U(4, 3, seed=1), U(4, 3, seed=2)), {"swap": True, "p": 1.0}, "swap-p1")],
            gradgrad=False),
    # through log_softmax: PyTorch's ctc_loss gradient is the one of the logits (it assumes normalised inputs)
    OpEntry("nn.functional.ctc_loss", ctc, ctc_ref,
            lambda: [Sample((U(6, 2, 4), np.array([[1, 2, 2], [3, 1, 0]]), np.array([6, 5]), np.array([3, 2]))),
                     Sample((U(6, 2, 4), np.array([[1, 2, 2], [3, 1, 0]]), np.array([6, 5]), np.array([3, 2])),
                            {"reduction": "sum"}, "sum")],
            gradgrad=False, atol=1e-5, rtol=1e-5),
    OpEntry("nn.functional.group_norm", F.group_norm, TF.group_norm,
            lambda: [Sample((U(2, 4, 3), 2, U(4, seed=1), U(4, seed=2))), Sample((U(2, 4, 2, 2), 4),
                                                                                 name="no-affine")]),
    OpEntry("nn.functional.instance_norm", F.instance_norm, TF.instance_norm,
            lambda: [Sample((U(2, 3, 4),)), Sample((U(2, 3, 4), None, None, U(3, seed=1), U(3, seed=2)),
                                                   name="affine")]),
    OpEntry("nn.functional.local_response_norm", F.local_response_norm, TF.local_response_norm,
            lambda: [Sample((U(2, 5, 3), 3)), Sample((U(1, 4, 2, 2), 2), {"alpha": 0.1, "beta": 0.5, "k": 2.0},
                                                     "args")],
            gradgrad=False),
    OpEntry("nn.functional.embedding_bag", F.embedding_bag, TF.embedding_bag,
            lambda: [Sample((np.array([1, 2, 4, 5, 4, 3]), U(6, 3), np.array([0, 2, 4])), grad_args=(1,)),
                     Sample((np.array([[1, 2], [4, 5]]), U(6, 3)), {"mode": "sum"}, "2d-sum", grad_args=(1,)),
                     Sample((np.array([1, 2, 4, 5]), U(6, 3), np.array([0, 1])), {"mode": "max"}, "max",
                            grad_args=(1,), gradcheck=False)], gradgrad=False),
    OpEntry("nn.functional.multi_head_attention_forward", mha, mha_ref,
            lambda: [Sample((U(3, 2, 4), U(3, 2, 4, seed=1), U(3, 2, 4, seed=2), U(12, 4, seed=3) * 0.5,
                             U(12, seed=4), U(4, 4, seed=5) * 0.5, U(4, seed=6)), name="self-shapes")],
            gradgrad=False, atol=1e-5, rtol=1e-5, gradcheck_max_numel=48),
    OpEntry("nn.functional.multi_head_attention_forward", mha_kv, mha_kv_ref,
            lambda: [Sample((U(3, 2, 4), U(2, 2, 4, seed=1), U(2, 2, 4, seed=2), U(12, 4, seed=3) * 0.5,
                             U(12, seed=4), U(4, 4, seed=5) * 0.5, U(4, seed=6), U(1, 1, 4, seed=7),
                             U(1, 1, 4, seed=8)), name="bias-kv-zero-attn")],
            variant="bias-kv", gradgrad=False, atol=1e-5, rtol=1e-5, gradcheck_max_numel=40),
    *[OpEntry(f"nn.functional.{n}", getattr(F, n), getattr(TF, n), lambda: [Sample((U(1, 2, 3, 3),),
                                                                                   {"scale_factor": 2})])
      for n in ("upsample_nearest", "upsample_bilinear")],
    OpEntry("nn.functional.upsample", F.upsample, TF.upsample,
            lambda: [Sample((U(1, 2, 4),), {"size": 6}), Sample((U(1, 2, 3, 3),), {"scale_factor": 2,
                                                                                   "mode": "bilinear"},
                                                                 "bilinear")]),
    # -- dropout: samplers (the masks differ from PyTorch's; shapes, dtypes and repeatability are compared) ---------
    *[OpEntry(f"nn.functional.{n}", getattr(F, n), getattr(TF, n), lambda shape=shape: [Sample((U(*shape), 0.4, True))],
              random=True, grad=False, amp=False)
      for n, shape in (("dropout", (3, 4)), ("dropout1d", (2, 3, 4)), ("dropout2d", (2, 3, 2, 2)),
                       ("dropout3d", (1, 2, 2, 2, 2)), ("alpha_dropout", (3, 4)), ("feature_alpha_dropout", (2, 3,
                                                                                                             4)))],
    # outside training they are the identity
    *[OpEntry(f"nn.functional.{n}", getattr(F, n), getattr(TF, n), lambda shape=shape: [Sample((U(*shape), 0.4,
                                                                                                False))],
              variant="eval", amp=False)
      for n, shape in (("dropout", (3, 4)), ("dropout1d", (2, 3, 4)), ("dropout2d", (2, 3, 2, 2)),
                       ("dropout3d", (1, 2, 2, 2, 2)), ("alpha_dropout", (3, 4)), ("feature_alpha_dropout", (2, 3,
                                                                                                             4)))],
    *_loss_entries(),
    OpEntry("nn.functional.grid_sample", F.grid_sample, TF.grid_sample, grid_sample_samples, gradcheck_max_numel=48,
            error_inputs=lambda: [ErrorInput((U(1, 1, 2, 2), U(1, 2, 2, 2)), {"mode": "area"}, ValueError,
                                             "grid_sample: mode='area'"),
                                  ErrorInput((U(1, 1, 2, 2), U(1, 2, 2, 3)), exc=ShapeMismatch,
                                             match="grid_sample: grid of shape")]),
    OpEntry("nn.functional.affine_grid", F.affine_grid, TF.affine_grid, affine_grid_samples,
            error_inputs=lambda: [ErrorInput((U(2, 2, 3), (2, 1, 2, 2, 2)), exc=ShapeMismatch,
                                             match="affine_grid: expected theta")]),
    *[OpEntry(f"nn.functional.max_unpool{nd}d", getattr(F, f"max_unpool{nd}d"), getattr(TF, f"max_unpool{nd}d"),
              unpool_samples(nd), gradgrad=nd < 3,
              error_inputs=lambda nd=nd: [ErrorInput((U(1, 1, *(2,) * nd), np.full((1, 1) + (2,) * nd, 99), 2),
                                                     exc=IndexError, match=f"max_unpool{nd}d: found an invalid")])
      for nd in (1, 2, 3)],
    *[OpEntry(f"nn.functional.lp_pool{nd}d", getattr(F, f"lp_pool{nd}d"), getattr(TF, f"lp_pool{nd}d"),
              lp_pool_samples(nd), gradgrad=nd < 3) for nd in (1, 2, 3)],
    *[OpEntry(f"nn.functional.fractional_max_pool{nd}d", getattr(F, f"fractional_max_pool{nd}d"),
              getattr(TF, f"fractional_max_pool{nd}d"), fractional_samples(nd),
              error_inputs=lambda nd=nd: [ErrorInput((U(1, 1, *(4,) * nd), 3), {"output_size": 3}, ValueError,
                                                     "too large")])
      for nd in (2, 3)],
    # the ``*_with_indices`` forms (values and indices; the indices carry no gradient)
    *[OpEntry(f"nn.functional.max_pool{nd}d_with_indices", getattr(F, f"max_pool{nd}d_with_indices"),
              getattr(TF, f"max_pool{nd}d_with_indices"),
              lambda nd=nd: [Sample((_distinct(2, 2, *(5, 4, 4)[:nd]), 2)),
                             Sample((_distinct(1, 2, *(6, 5, 4)[:nd], seed=1), 3, 2, 1), name="stride-pad")])
      for nd in (1, 2, 3)],
    *[OpEntry(f"nn.functional.adaptive_max_pool{nd}d_with_indices", getattr(F, f"adaptive_max_pool{nd}d_with_indices"),
              getattr(TF, f"adaptive_max_pool{nd}d_with_indices"),
              lambda nd=nd: [Sample((_distinct(2, 2, *(5, 4, 4)[:nd]), 3))]) for nd in (1, 2, 3)],
    *[OpEntry(f"nn.functional.fractional_max_pool{nd}d_with_indices",
              getattr(F, f"fractional_max_pool{nd}d_with_indices"),
              getattr(TF, f"fractional_max_pool{nd}d_with_indices"),
              lambda nd=nd: [Sample((_distinct(2, 2, *(7, 6, 5)[:nd]), 2, 3, None, False,
                                     rng(5).uniform(size=(2, 2, nd))), grad_args=(0,))])
      for nd in (2, 3)],
    # a sampler: shapes, dtypes, repeatability; the rows of a soft sample sum to 1, a hard one is one-hot
    OpEntry("nn.functional.gumbel_softmax", F.gumbel_softmax, TF.gumbel_softmax,
            lambda: [Sample((U(3, 4),), {"tau": 0.5}), Sample((U(2, 3, 4),), {"hard": True, "dim": 1}, "hard"),
                     Sample((U(0, 3),), name="empty")],
            random=True, grad=False, amp=False, postprocess=_gumbel_rows),
    # (torch.nn.functional.linear_cross_entropy is new in PyTorch 2.13: older installs, the GPU machine's, skip it)
    *([] if not hasattr(TF, "linear_cross_entropy") else [
    OpEntry("nn.functional.linear_cross_entropy", F.linear_cross_entropy, TF.linear_cross_entropy,
            lambda: [Sample((U(8, 3), U(4, 3, seed=1), I(8, hi=4, seed=2))),
                     Sample((U(3), U(4, 3, seed=1), np.array(2)), name="unbatched"),
                     Sample((U(4, 3), U(2, 3, 3, seed=1), I(4, 3, hi=2, seed=2)), {"reduction": "sum"}, "k-dim"),
                     Sample((U(5, 3), U(4, 3, seed=1), I(5, hi=4, seed=2)), {"label_smoothing": 0.1,
                                                                             "ignore_index": 1}, "smoothing")])]),
    # PyTorch's native normalization entry points: the output and the statistics (PyTorch differentiates the
    # statistics of group_norm only; the layer and batch forms are differentiated through their output)
    *[e for name, samples in (
        ("native_layer_norm", lambda: [Sample((U(2, 3, 4), (4,), U(4, seed=1), U(4, seed=2), 1e-5)),
                                       Sample((U(2, 3, 4), (3, 4), None, None, 0.5), name="no-affine")]),
        ("native_batch_norm", lambda: [
            Sample((U(4, 3, 2), U(3, seed=1), U(3, seed=2), None, None, True, 0.1, 1e-5)),
            Sample((U(4, 3), None, None, U(3, seed=3), U(3, lo=0.5, hi=2.0, seed=4), False, 0.1, 1e-5), name="eval",
                   grad_args=(0,))]))
       for e in (OpEntry(name, getattr(pylucid, name), getattr(torch, name), samples, grad=False, gradgrad=False),
                 OpEntry(name, lambda *a, _f=getattr(pylucid, name): _f(*a)[0],
                         lambda *a, _f=getattr(torch, name): _f(*a)[0], samples, variant="output"))],
    OpEntry("native_group_norm", pylucid.native_group_norm, torch.native_group_norm,
            lambda: [Sample((U(2, 4, 3), U(4, seed=1), U(4, seed=2), 2, 4, 3, 2, 1e-5)),
                     Sample((U(1, 6, 2, 2), None, None, 1, 6, 4, 3, 0.5), name="no-affine")]),
    OpEntry("grid_sampler_2d", pylucid.grid_sampler_2d, torch.grid_sampler_2d,
            lambda: [Sample((U(1, 2, 3, 4), U(1, 2, 3, 2, lo=-1.3, hi=1.3, seed=1), 0, 0, False)),
                     Sample((U(1, 2, 3, 4), U(1, 2, 2, 2, lo=-1.3, hi=1.3, seed=1), 2, 2, True), name="bicubic"),
                     Sample((U(1, 1, 3, 3), U(1, 2, 2, 2, lo=-1.3, hi=1.3, seed=1), 1, 1, False), name="nearest",
                            grad_args=(0,))],
            error_inputs=lambda: [ErrorInput((U(1, 1, 2, 2), U(1, 2, 2, 2), 3, 0, False), exc=ValueError,
                                             match="grid_sampler_2d: interpolation_mode")]),
    OpEntry("grid_sampler_3d", pylucid.grid_sampler_3d, torch.grid_sampler_3d,
            lambda: [Sample((U(1, 2, 2, 3, 3), U(1, 2, 1, 2, 3, lo=-1.2, hi=1.2, seed=1), 0, 1, True))],
            gradcheck_max_numel=48),
]
