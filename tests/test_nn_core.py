"""pylucid.nn core vs PyTorch: modules and losses with the same weights and inputs (outputs and gradients),
state dicts, hooks, train/eval behaviour, higher-order gradients, dtype moves, repr, init and utils."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pylucid as pl
import pylucid.nn.functional as F
from pylucid import nn

R = np.random.default_rng(0)


def arr(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape)


def copy_weights(pm, tm):
    """Load the torch module's state into the pylucid module (float64 on both sides)."""
    tm.double()
    pm.double()
    res = pm.load_state_dict({k: pl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert not res.missing_keys and not res.unexpected_keys


def close(a, b, atol=1e-8, rtol=1e-6, what=""):
    a = a.detach().numpy() if isinstance(a, pl.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=what)


def compare_module(pm, tm, *inputs, int_inputs=(), atol=1e-8, call=None):
    """Forward + backward (sum of squares of the output) on both; compare outputs, input and parameter grads."""
    copy_weights(pm, tm)
    p_in = [pl.tensor(x) if i in int_inputs else pl.tensor(x, requires_grad=True) for i, x in enumerate(inputs)]
    t_in = [torch.tensor(x) if i in int_inputs else torch.tensor(x, requires_grad=True) for i, x in enumerate(inputs)]
    call = call or (lambda m, *a: m(*a))
    po, to = call(pm, *p_in), call(tm, *t_in)
    po = po[0] if isinstance(po, tuple) else po
    to = to[0] if isinstance(to, tuple) else to
    close(po, to, atol=atol, what="output")
    (po * po).sum().backward()
    (to * to).sum().backward()
    for i, (a, b) in enumerate(zip(p_in, t_in)):
        if i not in int_inputs:
            close(a.grad, b.grad, atol=atol * 10, what=f"grad input {i}")
    tparams = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        tg = tparams[name].grad
        if tg is None:
            assert p.grad is None or np.allclose(p.grad.numpy(), 0), name
        else:
            close(p.grad, tg, atol=atol * 10, what=f"grad {name}")


# ---------------------------------------------------------------------------------------------------------------------
# layers vs torch
# ---------------------------------------------------------------------------------------------------------------------
def test_linear_bilinear_flatten():
    compare_module(nn.Linear(4, 3), torch.nn.Linear(4, 3), arr(2, 5, 4))
    compare_module(nn.Linear(4, 3, bias=False), torch.nn.Linear(4, 3, bias=False), arr(4))
    compare_module(nn.Bilinear(3, 2, 4), torch.nn.Bilinear(3, 2, 4), arr(5, 3), arr(5, 2))
    x = pl.arange(24.0).reshape(2, 3, 4)
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Unflatten(1, (3, 1))(pl.zeros(2, 3, 4)).shape == (2, 3, 1, 4)
    assert nn.Identity(5, k=2)(x) is x


@pytest.mark.parametrize("make", [
    lambda m: m.LayerNorm(4), lambda m: m.LayerNorm((3, 4), elementwise_affine=False), lambda m: m.GroupNorm(2, 4),
    lambda m: m.GroupNorm(1, 4, affine=False), lambda m: m.InstanceNorm2d(4, affine=True),
    lambda m: m.RMSNorm(4, eps=1e-6), lambda m: m.LocalResponseNorm(3),
], ids=["layernorm", "layernorm-2d", "groupnorm", "groupnorm-1", "instancenorm", "rmsnorm", "lrn"])
def test_norm_layers(make):
    x = arr(2, 4, 3, 4)
    compare_module(make(nn), make(torch.nn), x)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_running_stats_over_steps(momentum):
    pm, tm = nn.BatchNorm2d(3, momentum=momentum), torch.nn.BatchNorm2d(3, momentum=momentum)
    copy_weights(pm, tm)
    for step in range(3):
        x = arr(4, 3, 2, 2) * (step + 1)
        px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        po, to = pm(px), tm(tx)
        close(po, to)
        (po * po).sum().backward()
        (to * to).sum().backward()
        close(px.grad, tx.grad, atol=1e-7)
    close(pm.running_mean, tm.running_mean)
    close(pm.running_var, tm.running_var)
    assert pm.num_batches_tracked.item() == 3
    close(pm.weight.grad, tm.weight.grad, atol=1e-7)
    pm.eval()
    tm.eval()
    compare_module(pm, tm, arr(2, 3, 2, 2))


def test_batchnorm1d_eval_and_no_tracking():
    compare_module(nn.BatchNorm1d(3).eval(), torch.nn.BatchNorm1d(3).eval(), arr(5, 3))
    pm = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    tm = torch.nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    compare_module(pm.eval(), tm.eval(), arr(5, 3, 2))  # no running stats: batch stats even in eval
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(pl.ones(1, 3))


def test_embedding_and_bag():
    idx = np.array([[1, 0, 3], [2, 2, 0]])
    compare_module(nn.Embedding(5, 3, padding_idx=0), torch.nn.Embedding(5, 3, padding_idx=0), idx, int_inputs=(0,))
    flat = np.array([1, 2, 4, 4, 3, 0])
    offsets = np.array([0, 2, 2, 5])
    for mode in ("sum", "mean", "max"):
        compare_module(nn.EmbeddingBag(5, 3, mode=mode), torch.nn.EmbeddingBag(5, 3, mode=mode), flat, offsets,
                       int_inputs=(0, 1))
    compare_module(nn.EmbeddingBag(5, 3, mode="mean", padding_idx=2),
                   torch.nn.EmbeddingBag(5, 3, mode="mean", padding_idx=2), idx, int_inputs=(0,))
    emb = nn.Embedding(4, 3, max_norm=1.0)
    emb(pl.tensor([0, 1]))
    norms = np.linalg.norm(emb.weight.detach().numpy()[:2], axis=1)
    assert np.all(norms <= 1.0 + 1e-5)


def test_multihead_attention():
    q, k = arr(2, 3, 8), arr(2, 4, 8)
    kpm = np.array([[False, False, True, False], [False, False, False, False]])
    am = np.triu(np.ones((3, 4), dtype=bool), 1)

    def call(m, q_, k_):
        is_pl = isinstance(q_, pl.Tensor)
        mk = pl.tensor if is_pl else torch.tensor
        return m(q_, k_, k_, key_padding_mask=mk(kpm), attn_mask=mk(am))

    compare_module(nn.MultiheadAttention(8, 2, batch_first=True), torch.nn.MultiheadAttention(8, 2, batch_first=True),
                   q, k, call=call)
    # need_weights, averaged and per head, and kdim/vdim
    pm, tm = nn.MultiheadAttention(8, 2, kdim=5, vdim=6), torch.nn.MultiheadAttention(8, 2, kdim=5, vdim=6)
    copy_weights(pm, tm)
    qq, kk, vv = arr(3, 2, 8), arr(4, 2, 5), arr(4, 2, 6)
    for avg in (True, False):
        po, pw = pm(pl.tensor(qq), pl.tensor(kk), pl.tensor(vv), average_attn_weights=avg)
        to, tw = tm(torch.tensor(qq), torch.tensor(kk), torch.tensor(vv), average_attn_weights=avg)
        close(po, to)
        close(pw, tw)


@pytest.mark.parametrize("kw", [
    {"add_bias_kv": True}, {"add_zero_attn": True, "bias": False},
    {"add_bias_kv": True, "add_zero_attn": True, "kdim": 3, "vdim": 5, "batch_first": True}])
def test_multihead_attention_bias_kv_zero_attn(kw):
    bf = kw.get("batch_first", False)
    q = arr(2, 3, 4) if bf else arr(3, 2, 4)
    k = arr(2, 5, kw.get("kdim", 4)) if bf else arr(5, 2, kw.get("kdim", 4))
    v = arr(2, 5, kw.get("vdim", 4)) if bf else arr(5, 2, kw.get("vdim", 4))
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[0, -1] = True
    am = arr(3, 5)

    def call(m, q_, k_, v_, **extra):
        mk = pl.tensor if isinstance(q_, pl.Tensor) else torch.tensor
        return m(q_, k_, v_, key_padding_mask=mk(kpm), attn_mask=mk(am), **extra)

    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(4, 2, **kw)
    pm = nn.MultiheadAttention(4, 2, **kw)
    compare_module(pm, tm, q, k, v, call=call)
    assert (pm.bias_k is not None) == kw.get("add_bias_kv", False)
    # per-head weights and the sdpa path (need_weights=False)
    po, pw = call(pm, pl.tensor(q), pl.tensor(k), pl.tensor(v), average_attn_weights=False)
    to, tw = call(tm, torch.tensor(q), torch.tensor(k), torch.tensor(v), average_attn_weights=False)
    close(po, to)
    close(pw, tw)
    po, pw = call(pm, pl.tensor(q), pl.tensor(k), pl.tensor(v), need_weights=False)
    to, _ = call(tm, torch.tensor(q), torch.tensor(k), torch.tensor(v), need_weights=False)
    close(po, to)
    assert pw is None


@pytest.mark.parametrize("norm_first,act", [(False, "relu"), (True, "gelu")])
def test_transformer_layers(norm_first, act):
    kw = dict(dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first, activation=act)
    src, tgt = arr(2, 4, 8), arr(2, 3, 8)
    compare_module(nn.TransformerEncoderLayer(8, 2, **kw), torch.nn.TransformerEncoderLayer(8, 2, **kw), src)
    compare_module(nn.TransformerDecoderLayer(8, 2, **kw), torch.nn.TransformerDecoderLayer(8, 2, **kw), tgt, src)
    pm = nn.Transformer(8, 2, 2, 1, **kw)
    tm = torch.nn.Transformer(8, 2, 2, 1, **kw)
    mask = nn.Transformer.generate_square_subsequent_mask(3).double()
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(3).double()

    def call(m, s, t):
        return m(s, t, tgt_mask=mask if isinstance(s, pl.Tensor) else tmask)

    compare_module(pm, tm, src, tgt, call=call)


ACTIVATIONS = ["ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "Softplus", "Mish", "ELU", "SELU", "CELU",
               "LeakyReLU", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "Tanhshrink",
               "Softshrink", "Hardshrink", "GLU", "PReLU"]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_modules(name):
    x = arr(3, 4) + 0.013  # keep away from kinks
    compare_module(getattr(nn, name)(), getattr(torch.nn, name)(), x)


@pytest.mark.parametrize("name,kw", [("Softmax", {"dim": 1}), ("LogSoftmax", {"dim": -1}), ("Softmin", {"dim": 0}),
                                     ("GELU", {"approximate": "tanh"}), ("LeakyReLU", {"negative_slope": 0.2}),
                                     ("Threshold", {"threshold": 0.1, "value": 20.0})])
def test_activation_modules_kwargs(name, kw):
    compare_module(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), arr(3, 4) + 0.013)


# ---------------------------------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------------------------------
def _loss_case(name, args, kw, int_pos=()):
    p_args = [pl.tensor(a) if i in int_pos or not np.issubdtype(np.asarray(a).dtype, np.floating)
              else pl.tensor(a, requires_grad=True) for i, a in enumerate(args)]
    t_args = [torch.tensor(a) if i in int_pos or not np.issubdtype(np.asarray(a).dtype, np.floating)
              else torch.tensor(a, requires_grad=True) for i, a in enumerate(args)]
    pm, tm = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    po, to = pm(*p_args), tm(*t_args)
    close(po, to, what=name)
    po.sum().backward()
    to.sum().backward()
    for i, (a, b) in enumerate(zip(p_args, t_args)):
        if b.requires_grad and b.grad is not None:
            close(a.grad, b.grad, atol=1e-8, what=f"{name} grad {i}")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_loss_modules(reduction):
    x, y = arr(4, 3), arr(4, 3)
    r = {"reduction": reduction}
    _loss_case("MSELoss", (x, y), r)
    _loss_case("L1Loss", (x, y + 0.01), r)
    _loss_case("SmoothL1Loss", (x, y), dict(r, beta=0.5))
    _loss_case("SmoothL1Loss", (x, y), dict(r, beta=0.0))
    _loss_case("HuberLoss", (x, y), dict(r, delta=0.8))
    _loss_case("CrossEntropyLoss", (x, np.array([0, 2, 1, 2])), dict(r, label_smoothing=0.1,
                                                                    weight=None), int_pos=(1,))
    _loss_case("NLLLoss", (x, np.array([0, 2, 1, 2])), r, int_pos=(1,))
    _loss_case("BCELoss", (arr(4, 3, lo=0.05, hi=0.95), arr(4, 3, lo=0, hi=1)), r)
    _loss_case("BCEWithLogitsLoss", (x, arr(4, 3, lo=0, hi=1)), r)
    lp = torch.log_softmax(torch.tensor(arr(4, 3)), 1).numpy()
    _loss_case("KLDivLoss", (lp, arr(4, 3, lo=0, hi=1)), r)
    _loss_case("KLDivLoss", (lp, lp[::-1].copy()), dict(r, log_target=True))
    sign = np.array([1.0, -1.0, 1.0, -1.0])
    _loss_case("CosineEmbeddingLoss", (x, y, sign), dict(r, margin=0.1), int_pos=(2,))
    _loss_case("MarginRankingLoss", (arr(4), arr(4), sign), dict(r, margin=0.2), int_pos=(2,))
    _loss_case("TripletMarginLoss", (x, y, arr(4, 3)), dict(r, margin=0.5))
    _loss_case("TripletMarginLoss", (x, y, arr(4, 3)), dict(r, p=1.0, swap=True))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_margin_and_likelihood_loss_modules(reduction):
    x, y = arr(4, 3), arr(4, 3)
    r = {"reduction": reduction}
    sign = np.where(arr(4, 3) > 0, 1.0, -1.0)
    _loss_case("PoissonNLLLoss", (x, np.round(arr(4, 3, lo=0, hi=4))), dict(r, full=True), int_pos=(1,))
    _loss_case("GaussianNLLLoss", (x, y, arr(4, 3, lo=0.1, hi=2)), dict(r, full=True))
    _loss_case("HingeEmbeddingLoss", (x, sign), dict(r, margin=0.5), int_pos=(1,))
    _loss_case("SoftMarginLoss", (x, sign), r, int_pos=(1,))
    _loss_case("MultiMarginLoss", (x, np.array([0, 2, 1, 2])), dict(r, p=2, margin=0.7), int_pos=(1,))
    _loss_case("MultiLabelMarginLoss", (x, np.array([[0, 2, -1], [1, -1, 0], [2, 1, 0], [-1, 0, 0]])), r,
               int_pos=(1,))
    _loss_case("MultiLabelSoftMarginLoss", (x, (y > 0).astype(float)), r, int_pos=(1,))
    _loss_case("TripletMarginWithDistanceLoss", (x, y, arr(4, 3)), dict(r, margin=0.5, swap=True))


def test_pool_shuffle_and_rrelu_modules():
    x = R.permutation(2 * 4 * 6 * 6).reshape(2, 4, 6, 6) / 10.0
    compare_module(nn.LPPool2d(2, 2), torch.nn.LPPool2d(2, 2), x + 1.0)
    compare_module(nn.LPPool1d(3, 3, stride=2), torch.nn.LPPool1d(3, 3, stride=2), x[0] + 1.0)
    compare_module(nn.ChannelShuffle(2), torch.nn.ChannelShuffle(2), x)
    compare_module(nn.AdaptiveMaxPool3d((2, 3, 2)), torch.nn.AdaptiveMaxPool3d((2, 3, 2)), x[:, None])
    u = arr(2, 4, 2, lo=0, hi=1)
    pf = nn.FractionalMaxPool2d(2, output_size=3, _random_samples=pl.tensor(u))
    tf = torch.nn.FractionalMaxPool2d(2, output_size=3, _random_samples=torch.tensor(u))
    compare_module(pf, tf, x)
    pv, pi = nn.MaxPool2d(2, return_indices=True)(pl.tensor(x))
    tv, ti = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    close(nn.MaxUnpool2d(2)(pv, pi), torch.nn.MaxUnpool2d(2)(tv, ti))
    close(nn.MaxUnpool2d(2)(pv, pi, output_size=(7, 7)), torch.nn.MaxUnpool2d(2)(tv, ti, output_size=(7, 7)))
    # RReLU: the mean slope in eval; slopes within [lower, upper] in training, repeatable under one seed
    m = nn.RReLU(0.1, 0.3)
    compare_module(m.eval(), torch.nn.RReLU(0.1, 0.3).eval(), arr(3, 4) + 0.013)
    m.train()
    xn = pl.tensor(-np.abs(arr(200)) - 0.1)
    pl.manual_seed(5)
    a = m(xn) / xn
    pl.manual_seed(5)
    b = m(xn) / xn
    assert np.array_equal(a.numpy(), b.numpy())
    assert a.numpy().min() >= 0.1 and a.numpy().max() <= 0.3 and a.numpy().std() > 0.01
    assert np.allclose(nn.Softmax2d()(pl.tensor(x)).sum(1).numpy(), 1.0)


@pytest.mark.parametrize("kind", ["ConstantPad", "ZeroPad", "ReflectionPad", "ReplicationPad", "CircularPad"])
def test_padding_and_distance_modules(kind):
    for nd in (1, 2, 3):
        args = ((1, 2, 0, 1, 2, 1)[:2 * nd],) + ((0.5,) if kind == "ConstantPad" else ())
        pm, tm = getattr(nn, f"{kind}{nd}d")(*args), getattr(torch.nn, f"{kind}{nd}d")(*args)
        assert repr(pm) == repr(tm)
        compare_module(pm, tm, arr(2, 3, 4, 5)[(0,) * (3 - nd)])
    compare_module(nn.CosineSimilarity(0), torch.nn.CosineSimilarity(0), arr(4, 3), arr(4, 1))
    compare_module(nn.PairwiseDistance(1.0, keepdim=True), torch.nn.PairwiseDistance(1.0, keepdim=True), arr(4, 3),
                   arr(4, 3))


def test_weighted_losses_and_kl_batchmean():
    x = arr(5, 4)
    t = np.array([0, 3, 1, 1, 2])
    w = arr(4, lo=0.1, hi=1.0)
    pc = F.cross_entropy(pl.tensor(x), pl.tensor(t), pl.tensor(w), label_smoothing=0.2)
    tc = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), torch.tensor(w), label_smoothing=0.2)
    close(pc, tc)
    pw = arr(4, lo=0.5, hi=2.0)
    pb = nn.BCEWithLogitsLoss(pos_weight=pl.tensor(pw))(pl.tensor(x), pl.tensor(arr(5, 4, lo=0, hi=1)))
    assert pb.ndim == 0
    lp = np.log(np.full((2, 3), 1 / 3))
    close(F.kl_div(pl.tensor(lp), pl.tensor(np.full((2, 3), 1 / 3)), reduction="batchmean"), 0.0)


@pytest.mark.parametrize("reduction,zero_inf", [("mean", False), ("sum", False), ("none", True)])
def test_ctc_loss(reduction, zero_inf):
    T, N, C = 6, 3, 4
    logits = arr(T, N, C)
    lp_t = torch.log_softmax(torch.tensor(logits, requires_grad=True), 2)
    targets = np.array([[1, 2, 2], [3, 1, 0], [1, 1, 1]])
    il, tl = np.array([6, 5, 2]), np.array([3, 2, 3])  # the last one is impossible (too short)
    t_loss = torch.nn.functional.ctc_loss(lp_t, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                                          reduction=reduction, zero_infinity=True) if zero_inf else None
    x = pl.tensor(logits, requires_grad=True)
    lp = x - pl.tensor(np.log(np.exp(logits).sum(2, keepdims=True)))
    if not zero_inf:
        # finite cases only for mean/sum (PyTorch's inf loss gives inf/nan gradients)
        il, tl, targets = il[:2], tl[:2], targets[:2]
        lp_t = torch.log_softmax(torch.tensor(logits[:, :2], requires_grad=True), 2)
        x = pl.tensor(logits[:, :2].copy(), requires_grad=True)
        lp = F.log_softmax(x, 2)
        t_loss = torch.nn.functional.ctc_loss(lp_t, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                                              reduction=reduction)
    else:
        lp = F.log_softmax(x, 2)
    p_loss = nn.CTCLoss(reduction=reduction, zero_infinity=zero_inf)(lp, pl.tensor(targets), il, tl)
    close(p_loss, t_loss, atol=1e-7, what="ctc loss")
    p_loss.sum().backward()
    t_logits = lp_t
    (g,) = torch.autograd.grad(t_loss.sum(), t_logits)
    # compare gradients w.r.t. the log-probabilities through the same log_softmax
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    lt = torch.log_softmax(xt, 2)
    lt.backward(g)
    close(x.grad, xt.grad, atol=1e-6, what="ctc grad")
    # concatenated 1-D targets give the same loss
    flat = np.concatenate([targets[i, :tl[i]] for i in range(len(tl))])
    p2 = F.ctc_loss(lp, pl.tensor(flat), il, tl, reduction=reduction, zero_infinity=zero_inf)
    close(p2, p_loss)


# ---------------------------------------------------------------------------------------------------------------------
# module API
# ---------------------------------------------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("scratch", pl.zeros(2), persistent=False)

    def forward(self, x):
        return self.bn(self.block(self.act(self.fc1(x))))


def test_registration_and_iteration():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias", "block.1.weight", "block.1.bias",
                     "bn.weight", "bn.bias"]
    assert [n for n, _ in net.named_buffers()] == ["scratch", "bn.running_mean", "bn.running_var",
                                                  "bn.num_batches_tracked"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "block", "bn"]
    assert len(list(net.modules())) == 7
    assert net.get_submodule("block.1") is net.block[1]
    assert [n for n, _ in net.named_parameters(prefix="m", recurse=False)] == []
    # shared parameters appear once unless remove_duplicate=False
    net.block[0].weight = net.fc1.weight if net.fc1.weight.shape == (4, 4) else net.block[0].weight
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    # reassigning a parameter to None and non-Parameter errors
    with pytest.raises(TypeError, match="cannot assign"):
        lin.weight = pl.zeros(2, 2)
    lin.bias = None
    assert "bias" in lin._parameters and lin.bias is None
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = lin.nope
    net.register_module("extra", nn.Identity())
    assert "extra" in dict(net.named_children())
    del net.extra
    assert "extra" not in dict(net.named_children())


def test_containers():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and [type(m).__name__ for m in seq][-1] == "Sigmoid"
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.Linear(1, 2))
    assert len(ml) == 4 and len(list(ml.parameters())) == 8
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    md["b"] = nn.ReLU()
    assert list(md.keys()) == ["a", "b"] and "a" in md
    pl_list = nn.ParameterList([pl.zeros(2), nn.Parameter(pl.ones(3))])
    assert len(pl_list) == 2 and all(isinstance(p, nn.Parameter) for p in pl_list)
    assert len(list(pl_list.parameters())) == 2
    pd = nn.ParameterDict({"w": pl.zeros(2)})
    pd["v"] = pl.ones(1)
    assert sorted(k for k, _ in pd.named_parameters()) == ["v", "w"]


def test_state_dict_round_trip_and_errors():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert "scratch" not in sd and "bn.num_batches_tracked" in sd
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
    # parameters keep their identity (loaded in place)
    w = b.fc1.weight
    b.load_state_dict(sd)
    assert b.fc1.weight is w
    bad = dict(sd)
    bad["fc1.weight"] = pl.zeros(5, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.weight.*\[5, 3\].*\[4, 3\]"):
        b.load_state_dict(bad)
    partial = {k: v for k, v in sd.items() if k != "fc1.bias"}
    partial["junk"] = pl.zeros(1)
    with pytest.raises(RuntimeError, match='(?s)Missing key\\(s\\) in state_dict: "fc1.bias".*Unexpected key\\(s\\) '
                                           'in state_dict: "junk"'):
        b.load_state_dict(partial)
    res = b.load_state_dict(partial, strict=False)
    assert res.missing_keys == ["fc1.bias"] and res.unexpected_keys == ["junk"]
    # torch can load ours and we can load torch's
    tm = torch.nn.Linear(3, 4)
    pm = nn.Linear(3, 4)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in pm.state_dict().items()})
    np.testing.assert_array_equal(tm.weight.detach().numpy(), pm.weight.detach().numpy())


def test_hooks():
    lin = nn.Linear(3, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: out + 1)
    x = pl.ones(1, 3)
    expect = F.linear(x * 2, lin.weight, lin.bias) + 1
    np.testing.assert_allclose(lin(x).detach().numpy(), expect.detach().numpy())
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(lin(x).detach().numpy(), F.linear(x, lin.weight, lin.bias).detach().numpy())

    def bw(m, gin, gout):
        calls.append((tuple(None if g is None else g.shape for g in gin), tuple(g.shape for g in gout)))
        return (gin[0] * 0,)

    h3 = lin.register_full_backward_hook(bw)
    xi = pl.ones(2, 3, requires_grad=True)
    lin(xi).sum().backward()
    assert calls == [(((2, 3),), ((2, 2),))]
    assert np.all(xi.grad.numpy() == 0)  # the hook replaced grad_input
    assert lin.weight.grad is not None
    h3.remove()
    kw_hook = lin.register_forward_pre_hook(lambda m, a, k: (a, k), with_kwargs=True)
    lin(x)
    kw_hook.remove()


def test_train_eval_dropout():
    pl.manual_seed(0)
    d = nn.Dropout(0.3)
    x = pl.ones(200, 50)
    y = d(x)
    vals = np.unique(y.numpy())
    assert len(vals) == 2 and vals[0] == 0 and np.isclose(vals[1], 1 / 0.7)
    assert abs((y.numpy() == 0).mean() - 0.3) < 0.02
    d.eval()
    assert d(x) is x
    d2 = nn.Dropout2d(0.5).train()
    z = d2(pl.ones(8, 6, 3, 3)).numpy()
    per_channel = z.reshape(8, 6, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    ad = nn.AlphaDropout(0.2)
    pl.manual_seed(1)
    big = pl.randn(400, 400)
    out = ad(big).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    net = Net().eval()
    assert not net.training and not net.block[1].training
    net.train()
    assert net.bn.training
    # gradient flows only through kept units
    xg = pl.ones(4, 5, requires_grad=True)
    pl.manual_seed(3)
    out = F.dropout(xg, 0.5)
    out.sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), out.detach().numpy())


def test_gradient_penalty_second_order():
    lin1, ln, lin2 = nn.Linear(3, 5), nn.LayerNorm(5), nn.Linear(5, 1)
    tl1, tln, tl2 = torch.nn.Linear(3, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 1)
    for pm, tm in ((lin1, tl1), (ln, tln), (lin2, tl2)):
        copy_weights(pm, tm)
    with torch.no_grad():
        tln.weight.uniform_(0.5, 1.5)
        tln.bias.uniform_(-0.5, 0.5)
    copy_weights(ln, tln)
    x = arr(4, 3)
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    py = lin2(F.gelu(ln(F.silu(lin1(px)))) if hasattr(pl, "gelu") else F.tanh(ln(lin1(px))))
    ty = tl2(torch.nn.functional.gelu(tln(torch.nn.functional.silu(tl1(tx))))) if hasattr(pl, "gelu") \
        else tl2(torch.tanh(tln(tl1(tx))))
    (pg,) = pl.autograd.grad(py.sum(), px, create_graph=True)
    (tg,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    close(pg, tg, atol=1e-9)
    ((pg * pg).sum()).backward()
    ((tg * tg).sum()).backward()
    for pm, tm in ((lin1, tl1), (ln, tln), (lin2, tl2)):
        for (n, p), (_, q) in zip(pm.named_parameters(), tm.named_parameters()):
            if q.grad is None:  # lin2.bias does not reach the input gradient
                assert p.grad is None or np.allclose(p.grad.numpy(), 0), n
                continue
            close(p.grad, q.grad, atol=1e-8, what=f"penalty grad {n}")


def test_to_dtype_and_identity():
    lin = nn.Linear(3, 2)
    bn = nn.BatchNorm1d(2)
    seq = nn.Sequential(lin, bn)
    w = lin.weight
    opt_like = [w]
    seq.double()
    assert lin.weight is w and opt_like[0].dtype == pl.float64
    assert bn.running_mean.dtype == pl.float64 and bn.num_batches_tracked.dtype == pl.int64
    seq.to(pl.float32)
    assert w.dtype == pl.float32
    seq.to("cpu", dtype=pl.float16)
    assert lin.bias.dtype == pl.float16
    seq.float()
    with pytest.raises(TypeError, match="floating point"):
        seq.to(pl.int64)
    lin.weight.grad = pl.ones(2, 3)
    seq.zero_grad(set_to_none=False)
    assert np.all(lin.weight.grad.numpy() == 0)
    seq.zero_grad()
    assert lin.weight.grad is None
    seq.requires_grad_(False)
    assert not any(p.requires_grad for p in seq.parameters())
    seq.apply(lambda m: setattr(m, "tag", type(m).__name__))
    assert lin.tag == "Linear"


def test_repr():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Dropout(0.1), nn.Sequential(nn.LayerNorm(3)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        "  (3): Sequential(\n"
        "    (0): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "  )\n"
        ")"
    )
    assert repr(nn.Parameter(pl.tensor([1.0]))).startswith("Parameter containing:\ntensor([1.], requires_grad=True)")
    assert repr(nn.MultiheadAttention(4, 2)).startswith("MultiheadAttention(\n  (out_proj): Linear(")


# ---------------------------------------------------------------------------------------------------------------------
# init and utils
# ---------------------------------------------------------------------------------------------------------------------
def test_default_init_distributions():
    pl.manual_seed(0)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = lin.weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 1e-3
    b = lin.bias.detach().numpy()
    assert b.min() >= -bound and b.max() <= bound
    emb = nn.Embedding(500, 200)
    assert abs(emb.weight.detach().numpy().std() - 1) < 0.01
    mha = nn.MultiheadAttention(64, 4)
    a = math.sqrt(6 / (64 + 192))
    assert np.abs(mha.in_proj_weight.detach().numpy()).max() <= a
    assert np.all(mha.in_proj_bias.detach().numpy() == 0)
    ln = nn.LayerNorm(3)
    assert np.all(ln.weight.numpy(force=True) == 1) if False else np.all(ln.weight.detach().numpy() == 1)


def test_init_functions():
    g = pl.Generator().manual_seed(1)
    t = pl.empty(300, 200)
    nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu", generator=g)
    assert abs(t.numpy().std() - math.sqrt(2 / 300)) < 2e-3
    nn.init.xavier_normal_(t)
    assert abs(t.numpy().std() - math.sqrt(2 / 500)) < 2e-3
    nn.init.trunc_normal_(t, std=1.0, a=-0.5, b=0.5)
    assert t.numpy().min() >= -0.5 and t.numpy().max() <= 0.5
    q = pl.empty(5, 8)
    nn.init.orthogonal_(q)
    np.testing.assert_allclose(q.numpy() @ q.numpy().T, np.eye(5), atol=1e-5)
    nn.init.eye_(q)
    assert q.numpy().trace() == 5
    c = pl.empty(2, 2, 3, 3)
    nn.init.dirac_(c)
    assert c.numpy()[0, 0, 1, 1] == 1 and c.numpy().sum() == 2
    # same generator seed, same draw
    a1 = nn.init.uniform_(pl.empty(4), generator=pl.Generator().manual_seed(7)).numpy().copy()
    a2 = nn.init.uniform_(pl.empty(4), generator=pl.Generator().manual_seed(7)).numpy()
    np.testing.assert_array_equal(a1, a2)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(torch.nn.init.calculate_gain("leaky_relu", 0.2))
    assert nn.init._calculate_fan_in_and_fan_out(pl.empty(4, 3, 2, 2)) == (12, 16)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(pl.empty(3))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm(norm_type):
    gs = [arr(3, 2), arr(4)]
    pp = [nn.Parameter(pl.zeros(*g.shape)) for g in gs]
    tp = [torch.nn.Parameter(torch.zeros(*g.shape, dtype=torch.float64)) for g in gs]
    for p, q, g in zip(pp, tp, gs):
        p.grad = pl.tensor(g)
        q.grad = torch.tensor(g)
    n1 = nn.utils.clip_grad_norm_(pp, 0.5, norm_type)
    n2 = torch.nn.utils.clip_grad_norm_(tp, 0.5, norm_type)
    close(n1, n2)
    for p, q in zip(pp, tp):
        close(p.grad, q.grad)
    pp[0].grad = pl.tensor([[float("nan"), 1.0]])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(pp, 1.0, error_if_nonfinite=True)


def test_clip_value_and_vectors_and_pad_sequence():
    p = nn.Parameter(pl.zeros(3))
    p.grad = pl.tensor([-3.0, 0.5, 2.0])
    nn.utils.clip_grad_value_([p], 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), [-1.0, 0.5, 1.0])
    lin = nn.Linear(2, 3)
    v = nn.utils.parameters_to_vector(lin.parameters())
    assert v.shape == (9,)
    nn.utils.vector_to_parameters(pl.arange(9.0), lin.parameters())
    np.testing.assert_array_equal(lin.bias.detach().numpy(), [6.0, 7.0, 8.0])
    seqs = [arr(3, 2), arr(1, 2), arr(2, 2)]
    for bf in (True, False):
        for side in ("left", "right"):
            a = nn.utils.rnn.pad_sequence([pl.tensor(s) for s in seqs], batch_first=bf, padding_value=-1.0,
                                          padding_side=side)
            b = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=bf, padding_value=-1.0,
                                                padding_side=side)
            close(a, b)


def test_functional_extras():
    x1, x2 = arr(4, 5), arr(4, 5)
    close(F.cosine_similarity(pl.tensor(x1), pl.tensor(x2)),
          torch.nn.functional.cosine_similarity(torch.tensor(x1), torch.tensor(x2)))
    close(F.pairwise_distance(pl.tensor(x1), pl.tensor(x2)),
          torch.nn.functional.pairwise_distance(torch.tensor(x1), torch.tensor(x2)))
    close(F.normalize(pl.tensor(x1), dim=0), torch.nn.functional.normalize(torch.tensor(x1), dim=0))
    oh = F.one_hot(pl.tensor([0, 2, 1]), 4)
    np.testing.assert_array_equal(oh.numpy(), np.eye(4, dtype=np.int64)[[0, 2, 1]])
    padded = F.pad(pl.tensor(x1), (1, 2))
    close(padded, torch.nn.functional.pad(torch.tensor(x1), (1, 2)))
    with pytest.raises(ValueError, match="reduction='bad'"):
        F.mse_loss(pl.tensor(x1), pl.tensor(x2), reduction="bad")


# ------------------------------------------------------------------ linear under autocast (LinearAutocast)
def _ac_linear_case(shape_x, bias, x_half, seed=0):
    g = np.random.default_rng(seed)
    xn = g.standard_normal(shape_x).astype(np.float32)
    wn = g.standard_normal((6, shape_x[-1])).astype(np.float32)
    bn = g.standard_normal(6).astype(np.float32) if bias else None
    px, pw = pl.tensor(xn, requires_grad=True), pl.tensor(wn, requires_grad=True)
    pb = pl.tensor(bn, requires_grad=True) if bias else None
    tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
    tb = torch.tensor(bn, requires_grad=True) if bias else None
    return (px, pw, pb), (tx, tw, tb), x_half


def _ac_forward(lib, x, w, b, x_half):
    if lib is pl:
        with pl.amp.autocast("cpu", dtype=pl.bfloat16):
            return F.linear(x.to(pl.bfloat16) if x_half else x, w, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.nn.functional.linear(x.to(torch.bfloat16) if x_half else x, w, b)


@pytest.mark.parametrize("shape_x,bias,x_half", [((4, 8), True, False), ((3, 5, 8), True, False),
                                                 ((3, 5, 8), False, False), ((4, 8), True, True)])
def test_linear_autocast_matches_torch_first_and_second_order(shape_x, bias, x_half):
    (px, pw, pb), (tx, tw, tb), _ = _ac_linear_case(shape_x, bias, x_half)
    y = _ac_forward(pl, px, pw, pb, x_half)
    ty = _ac_forward(torch, tx, tw, tb, x_half)
    assert y.dtype == pl.bfloat16 and y.grad_fn.name() == "LinearAutocastBackward"
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(), rtol=2e-2, atol=2e-2)
    # first order: float32 leaves get float32 gradients
    (y.float() ** 2).sum().backward()
    (ty.float() ** 2).sum().backward()
    for p, t in ((px, tx), (pw, tw), (pb, tb)):
        if p is None:
            continue
        assert p.grad.dtype == pl.float32
        ref = t.grad.numpy()
        np.testing.assert_allclose(p.grad.numpy(), ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    # second order through the graph-mode formula: d/dW of |dL/dx|^2
    for p in (px, pw, pb):
        if p is not None:
            p.grad = None
    for t in (tx, tw, tb):
        if t is not None:
            t.grad = None
    (gx,) = pl.autograd.grad((_ac_forward(pl, px, pw, pb, x_half).float() ** 2).sum(), px, create_graph=True)
    (gx ** 2).sum().backward()
    (tgx,) = torch.autograd.grad((_ac_forward(torch, tx, tw, tb, x_half).float() ** 2).sum(), tx, create_graph=True)
    (tgx ** 2).sum().backward()
    ref = tw.grad.numpy()
    np.testing.assert_allclose(pw.grad.numpy(), ref, rtol=3e-2, atol=3e-2 * np.abs(ref).max())


def test_linear_autocast_fast_path_matches_graph_formula():
    from pylucid._state import state

    (px, pw, pb), _, _ = _ac_linear_case((3, 5, 8), True, False)

    def grads(force):
        for p in (px, pw, pb):
            p.grad = None
        state.force_graph_backward = force
        try:
            (_ac_forward(pl, px, pw, pb, False).float() ** 3).sum().backward()
        finally:
            state.force_graph_backward = False
        return [p.grad.numpy().copy() for p in (px, pw, pb)]

    for a, b in zip(grads(False), grads(True)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_linear_autocast_dispatch():
    x, w = pl.ones(2, 3), pl.ones(4, 3, requires_grad=True)
    assert F.linear(x, w).grad_fn.name() == "LinearBackward"  # no autocast
    with pl.amp.autocast("cpu", dtype=pl.bfloat16):
        assert F.linear(x, w).grad_fn.name() == "LinearAutocastBackward"
        # float64 operands keep the general path (its casts and policy); so do operands already in bfloat16
        assert F.linear(x.double(), w.double()).grad_fn.name() == "LinearBackward"
        wb = w.to(pl.bfloat16)
        assert F.linear(x.to(pl.bfloat16), wb).grad_fn.name() == "LinearBackward"
    with pl.amp.autocast("cuda", dtype=pl.bfloat16):  # autocast for another device type: untouched
        assert F.linear(x, w).dtype == pl.float32


# ------------------------------------------------------------------ layer_norm_backward: the fused gradient as an op
def _torch_ln_backward(g, x, ns, w):
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, list(ns), w, None, 1e-5)
    return torch.ops.aten.native_layer_norm_backward(g, x, list(ns), mean, rstd, w, None, [True, False, False])[0]


@pytest.mark.parametrize("shape,ns,affine", [((3, 4), (4,), True), ((2, 3, 4), (3, 4), True), ((2, 5), (5,), False),
                                             ((4,), (4,), True)])
def test_layer_norm_backward_op_matches_torch_and_differentiates_again(shape, ns, affine):
    from pylucid.autograd.gradcheck import gradcheck, gradgradcheck
    from pylucid.ops import nn as N

    arrays = [arr(*shape), arr(*shape)] + ([arr(*ns)] if affine else [])
    p_in = [pl.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]

    def fn(g, x, w=None):
        return N.layer_norm_backward(g, x, ns, w)

    out = fn(*p_in)
    ref = _torch_ln_backward(*t_in[:2], ns, t_in[2] if affine else None)
    assert out.grad_fn.name() == "LayerNormBackwardBackward"
    close(out, ref, atol=1e-12)
    # the op's own backward (the second derivative of layer_norm) against torch's
    u = arr(*shape)
    pg = pl.autograd.grad(out, p_in, pl.tensor(u))
    tg = torch.autograd.grad(ref, t_in, torch.tensor(u))
    for i, (a, b) in enumerate(zip(pg, tg)):
        close(a, b, atol=1e-12, what=f"input {i}")
    # first and second derivatives of the op by finite differences (third order of layer_norm)
    assert gradcheck(fn, tuple(p_in), atol=1e-5, rtol=1e-3)
    assert gradgradcheck(fn, tuple(p_in), atol=1e-4, rtol=1e-3)


def test_layer_norm_reuses_its_forward_statistics_and_records_the_backward_op():
    x, w, b = arr(5, 6), arr(6), arr(6)
    px, pw, pb = (pl.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.layer_norm(px, (6,), pw, pb)
    _, tmean, trstd = torch.ops.aten.native_layer_norm(torch.tensor(x), [6], None, None, 1e-5)
    mean, rstd = y.grad_fn.extra  # what the fast backward reads: the forward's own statistics
    close(np.asarray(mean).reshape(-1), tmean.reshape(-1), atol=1e-12)
    close(np.asarray(rstd).reshape(-1), trstd.reshape(-1), atol=1e-9)
    (gx,) = pl.autograd.grad((y * y).sum(), px, create_graph=True)
    assert gx.grad_fn.name() == "LayerNormBackwardBackward"
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.layer_norm(tx, (6,), tw, tb)
    (tgx,) = torch.autograd.grad((ty * ty).sum(), tx, create_graph=True)
    (gx ** 3).sum().backward()
    (tgx ** 3).sum().backward()
    for p, t in ((px, tx), (pw, tw), (pb, tb)):
        close(p.grad, t.grad, atol=1e-9)


def test_batch_norm_training_gradient_goes_through_the_layer_norm_backward_op():
    x, w, b = arr(4, 3, 5), arr(3), arr(3)
    px, pw, pb = (pl.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.batch_norm(px, None, None, pw, pb, training=True)
    (gx,) = pl.autograd.grad((y * y).sum(), px, create_graph=True)
    assert gx.grad_fn.name() == "LayerNormBackwardBackward"
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True)
    (tgx,) = torch.autograd.grad((ty * ty).sum(), tx, create_graph=True)
    close(gx, tgx, atol=1e-9)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    for p, t in ((px, tx), (pw, tw), (pb, tb)):
        close(p.grad, t.grad, atol=1e-8)


def test_cross_entropy_keeps_its_row_logsumexp_for_the_backward():
    x, t = arr(6, 5), np.array([0, 4, 1, -100, 2, 2])
    px = pl.tensor(x, requires_grad=True)
    loss = F.cross_entropy(px, pl.tensor(t))
    lse, count = loss.grad_fn.extra
    close(np.asarray(lse), torch.logsumexp(torch.tensor(x), 1), atol=1e-12)
    assert float(np.asarray(count)) == 5  # targets not equal to ignore_index
    loss.backward()
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(tx, torch.tensor(t)).backward()
    close(px.grad, tx.grad, atol=1e-12)


# ------------------------------------------------------------------ functional declarations
def test_functional_namespace_is_the_declarations():
    declared = pl.ops.namespace("pylucid.nn.functional")
    assert sorted(declared) == F.__all__
    for name in F.__all__:
        fn = getattr(F, name)
        assert fn is declared[name], name
        if not name.endswith("_"):  # in-place variants are made from their function's declaration
            assert pl.ops.declaration_of(fn) is not None, name
    # one function for both namespaces, where pylucid has the name too
    for name in ("relu", "gelu", "hardtanh", "threshold", "conv2d", "max_pool2d", "interpolate", "relu_"):
        assert getattr(F, name) is getattr(pl, name), name
    assert pl.ops.declaration("relu", "pylucid.nn.functional").op.__name__ == "Relu"
    assert pl.ops.declaration("layer_norm", "pylucid.nn.functional").op.__name__ == "LayerNorm"
    assert pl.ops.declaration("softmin", "pylucid.nn.functional").op is None  # a composite


@pytest.mark.parametrize("name,args", [("relu", ()), ("hardtanh", (-0.5, 0.5)), ("leaky_relu", (0.1,)),
                                       ("elu", (1.0,)), ("selu", ()), ("celu", (1.0,)), ("threshold", (0.2, -1.0))])
def test_functional_inplace_argument_and_inplace_variants_match_torch(name, args):
    x = arr(3, 4)
    ref = getattr(torch.nn.functional, name)(torch.tensor(x), *args)
    a = pl.tensor(x)
    assert getattr(F, name)(a, *args, inplace=True) is a
    close(a, ref, atol=1e-12)
    b = pl.tensor(x)
    assert getattr(F, name + "_")(b, *args) is b
    close(b, ref, atol=1e-12)
    c = pl.tensor(x)
    out = getattr(F, name)(c, *args)
    close(out, ref, atol=1e-12)
    close(c, x, atol=0)  # untouched without inplace
    leaf = pl.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"{name}_: a leaf tensor that requires grad"):
        getattr(F, name)(leaf, *args, inplace=True)


# ------------------------------------------------------------------- bad arguments: PyTorch refuses, so does pylucid
_F32 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
_I64 = np.array([[1, -2, 3], [0, 2, -1]], dtype=np.int64)


@pytest.mark.parametrize("call, exc", [
    (lambda lib, f, x, i: f.dropout(x, 0.4, None), TypeError),  # a flag must be a bool
    (lambda lib, f, x, i: f.dropout(x, 0.4, 1), TypeError),
    (lambda lib, f, x, i: f.alpha_dropout(x, "0.4", True), TypeError),  # a number must be a number
    (lambda lib, f, x, i: f.huber_loss(x, x, delta=None), TypeError),
    (lambda lib, f, x, i: f.huber_loss(x, x, delta=float("nan")), (RuntimeError, ValueError)),
    (lambda lib, f, x, i: f.smooth_l1_loss(x, x, beta=float("nan")), (RuntimeError, ValueError)),
    (lambda lib, f, x, i: f.dropout(i, 0.4, True), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.cosine_similarity(i, i), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.normalize(i), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.kl_div(x, i, reduction="batchmean"), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.huber_loss(i, x), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.soft_margin_loss(i, x), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.hinge_embedding_loss(i, x), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.gaussian_nll_loss(x, x, i * i), (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.scaled_dot_product_attention(i[None], i[None], i[None]),
     (RuntimeError, pl.errors.DtypeMismatch)),
    (lambda lib, f, x, i: f.binary_cross_entropy(x * float("nan"), x), (RuntimeError, ValueError)),
    (lambda lib, f, x, i: f.batch_norm(x, None, lib.ones(3), training=True), ValueError),
    (lambda lib, f, x, i: f.feature_alpha_dropout(x[0, 0], 0.4, True), (RuntimeError, ValueError)),
    (lambda lib, f, x, i: f.adaptive_max_pool1d(x[None][:, :0], 2), (RuntimeError, pl.errors.ShapeMismatch)),
    (lambda lib, f, x, i: f.pad(x, {}), TypeError),
    (lambda lib, f, x, i: f.adaptive_avg_pool1d(x, (2.5,)), TypeError),
    (lambda lib, f, x, i: lib.threshold(i.to(lib.uint8), 0.3, -1.0), (RuntimeError, ValueError)),
    (lambda lib, f, x, i: f.hardtanh(i > 0), (RuntimeError, pl.errors.DtypeMismatch)),
])
def test_arguments_pytorch_refuses_are_refused(call, exc):
    from pylucid.ops.validation import is_typed

    with pytest.raises(exc):
        call(torch, torch.nn.functional, torch.tensor(_F32), torch.tensor(_I64))
    with pytest.raises(exc) as e:
        call(pl, F, pl.tensor(_F32), pl.tensor(_I64))
    assert is_typed(e.value, frozenset())  # a pylucid error whose message starts with the op's name


def test_seeded_dropout_is_allowed_under_deterministic_algorithms():
    prev = pl.are_deterministic_algorithms_enabled()
    try:
        pl.use_deterministic_algorithms(True)
        outs = []
        for _ in range(2):
            pl.manual_seed(3)
            outs.append(F.dropout(pl.ones(4, 5), 0.5, training=True).numpy())
        np.testing.assert_array_equal(outs[0], outs[1])
        pl.manual_seed(3)
        assert F.alpha_dropout(pl.ones(4, 5), 0.5, training=True).shape == (4, 5)
    finally:
        pl.use_deterministic_algorithms(prev)


def test_empty_batch_adaptive_max_pool_and_complex_silu_match_torch():
    t = torch.nn.functional.adaptive_max_pool2d(torch.ones(0, 2, 4, 4), 2, return_indices=True)
    p = F.adaptive_max_pool2d(pl.ones(0, 2, 4, 4), 2, return_indices=True)
    assert [tuple(a.shape) for a in p] == [tuple(a.shape) for a in t] and p[1].dtype == pl.int64
    z = np.array([1 + 1j, -2j, 0.5], dtype=np.complex64)
    close(F.silu(pl.tensor(z)), torch.nn.functional.silu(torch.tensor(z)), atol=1e-6)


def test_gaussian_nll_loss_float_var_of_an_integer_input_is_float():
    x, y = np.array([[1, 2], [3, 5]]), np.array([[2, 2], [1, 4]])
    ref = torch.nn.functional.gaussian_nll_loss(torch.tensor(x), torch.tensor(y), 0.7, reduction="sum")
    close(F.gaussian_nll_loss(pl.tensor(x), pl.tensor(y), 0.7, reduction="sum"), ref, atol=1e-5)


def test_gelu_at_infinity_is_the_limit_as_torch_float64():
    # PyTorch's vectorised float32 kernel answers NaN at +inf; its float64 kernel answers inf (docs/semantics)
    x = np.array([np.inf, -np.inf, np.nan, 1.0] * 4)
    for approximate in ("none", "tanh"):
        want = torch.nn.functional.gelu(torch.tensor(x), approximate=approximate).numpy()
        got = F.gelu(pl.tensor(x.astype(np.float32)), approximate=approximate).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)


_NONFINITE = np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, 2.0], np.float32)


@pytest.mark.parametrize("name, target", [
    ("hinge_embedding_loss", _NONFINITE), ("hinge_embedding_loss", np.array([1, -1, 1, -1, 1, -1], np.float32)),
    ("soft_margin_loss", _NONFINITE), ("soft_margin_loss", np.array([1, -1, 1, -1, 1, -1], np.float32)),
])
def test_margin_losses_propagate_infinities_as_torch(name, target):
    want = getattr(torch.nn.functional, name)(torch.tensor(_NONFINITE), torch.tensor(target), reduction="none")
    got = getattr(F, name)(pl.tensor(_NONFINITE), pl.tensor(target), reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("log_input", [True, False])
def test_poisson_nll_loss_full_with_infinite_values_matches_torch(log_input):
    x = np.array([np.nan, np.inf, -np.inf, 0.5, 2.0], np.float32)
    for y in (x, np.array([2, 1, 0, 3, 4], np.float32)):
        want = torch.nn.functional.poisson_nll_loss(torch.tensor(x), torch.tensor(y), log_input=log_input, full=True,
                                                    reduction="none")
        got = F.poisson_nll_loss(pl.tensor(x), pl.tensor(y), log_input=log_input, full=True, reduction="none")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


@pytest.mark.parametrize("p, weighted", [(1, False), (2, True)])
def test_multi_margin_loss_drops_nan_terms_as_torch(p, weighted):
    x = np.array([[np.nan, np.inf, -np.inf, 0.5, 1.0], [0.1, 0.2, np.inf, -1.0, 3.0], [0.3, -0.2, 0.1, 0.0, 1.0]],
                 np.float32)
    y = np.array([1, 2, 4])
    w = np.array([np.nan, np.inf, -np.inf, 1.0, 2.0], np.float32) if weighted else None
    tw, pw = (torch.tensor(w), pl.tensor(w)) if weighted else (None, None)
    want = torch.nn.functional.multi_margin_loss(torch.tensor(x), torch.tensor(y), p=p, weight=tw, reduction="none")
    got = F.multi_margin_loss(pl.tensor(x), pl.tensor(y), p=p, weight=pw, reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert F.multi_margin_loss(pl.tensor(np.float32(np.nan)), pl.tensor(0)).item() == \
        torch.nn.functional.multi_margin_loss(torch.tensor(np.float32(np.nan)), torch.tensor(0)).item() == 0.0


def test_multilabel_margin_loss_with_infinite_scores_matches_torch():
    x = np.array([[np.nan, np.inf, -np.inf, 0.5, 1.0], [-np.inf, 0.2, np.inf, -1.0, 3.0]], np.float32)
    t = np.array([[2, 1, -1, 0, 0], [0, 3, -1, 1, 1]])
    want = torch.nn.functional.multilabel_margin_loss(torch.tensor(x), torch.tensor(t), reduction="none")
    got = F.multilabel_margin_loss(pl.tensor(x), pl.tensor(t), reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_bce_with_logits_has_the_target_dtype_as_torch():
    x, y = np.random.default_rng(1).standard_normal((2, 3, 4))
    for xd, yd in ((np.float64, np.float32), (np.float32, np.float64), (np.float32, np.float16)):
        want = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(x.astype(xd)),
                                                                    torch.tensor(np.abs(y).astype(yd) / 3))
        got = F.binary_cross_entropy_with_logits(pl.tensor(x.astype(xd)), pl.tensor(np.abs(y).astype(yd) / 3))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-3)


def test_mean_cross_entropy_of_no_probability_rows_is_nan_as_torch():
    for shape in ((0, 4), (0, 4, 3)):
        want = torch.nn.functional.cross_entropy(torch.zeros(shape), torch.zeros(shape))
        got = F.cross_entropy(pl.zeros(*shape), pl.zeros(*shape))
        assert math.isnan(want.item()) and math.isnan(got.item())
    assert F.cross_entropy(pl.zeros(0, 4), pl.zeros(0, 4), reduction="sum").item() == 0.0
    for shape in ((2, 0), (0,)):  # no classes: empty sums, and a 0 / 0 mean
        for reduction in ("none", "sum", "mean"):
            want = torch.nn.functional.cross_entropy(torch.zeros(shape), torch.zeros(shape), reduction=reduction)
            got = F.cross_entropy(pl.zeros(*shape), pl.zeros(*shape), reduction=reduction)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_layer_norm_backward_has_the_input_dtype():
    from pylucid.ops.nn import layer_norm_backward

    g, x, w = np.zeros((0, 4)), np.zeros((0, 4), np.float32), np.ones(4, np.float32)
    _, mean, rstd = torch.ops.aten.native_layer_norm(torch.tensor(x), [4], torch.tensor(w), None, 1e-5)
    want = torch.ops.aten.native_layer_norm_backward(torch.tensor(g), torch.tensor(x), [4], mean, rstd,
                                                     torch.tensor(w), None, [True, False, False])[0]
    got = layer_norm_backward(pl.tensor(g), pl.tensor(x), (4,), pl.tensor(w))
    assert want.dtype == torch.float32 and got.dtype == pl.float32 and tuple(got.shape) == (0, 4)


def test_bilinear_with_opposite_infinities_is_silent_and_matches_torch():
    import warnings

    x1 = np.array([[np.inf, 1.0], [1.0, 2.0]], np.float32)
    x2 = np.array([[1.0, -1.0, 2.0], [0.5, 1.0, -1.0]], np.float32)
    w = np.ones((2, 2, 3), np.float32)
    want = torch.nn.functional.bilinear(torch.tensor(x1), torch.tensor(x2), torch.tensor(w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pl._fp_warnings.install()
        got = F.bilinear(pl.tensor(x1), pl.tensor(x2), pl.tensor(w))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    xi = np.array([[1, 2]], np.int32)
    assert F.bilinear(pl.tensor(xi), pl.tensor(np.array([[1, 0, 2]], np.int32)),
                      pl.tensor(np.ones((2, 2, 3), np.int32))).dtype == pl.int32


_EMB_DEVICES = ["cpu"] + (["cuda"] if pl.cuda.is_available() else [])


@pytest.mark.parametrize("device", _EMB_DEVICES)
def test_embedding_under_autocast_rounds_only_the_looked_up_rows(device, monkeypatch):
    """Under bfloat16 autocast (embedding is Promote) the result is the table's rows rounded to bfloat16 (the values
    of casting the table first) without converting the table; the table's float32 gradient is the rows' gradients
    summed in float32, as PyTorch's float32 embedding backward of the same incoming gradient."""
    g0 = np.random.default_rng(44)
    emb = nn.Embedding(5000, 64).to(device)
    idx = pl.tensor(g0.integers(0, 5000, (4, 300)), device=device)
    idx[0, :5] = 7  # repeated rows: their gradients add up
    be = emb.weight.device.backend
    casts = []
    real = be.astype
    monkeypatch.setattr(be, "astype", lambda a, dt, copy=True: (casts.append(a.shape), real(a, dt, copy))[1])
    with pl.autocast(device, dtype=pl.bfloat16):
        y = emb(idx)
    monkeypatch.undo()
    assert y.dtype is pl.bfloat16
    assert (5000, 64) not in casts, casts
    np.testing.assert_array_equal(y.detach().float().cpu().numpy(),
                                  emb.weight.detach().to(pl.bfloat16)[idx].float().cpu().numpy())
    gy = g0.standard_normal((4, 300, 64)).astype(np.float32)
    y.backward(pl.tensor(gy, device=device).to(pl.bfloat16))
    assert emb.weight.grad.dtype is pl.float32
    tw = torch.tensor(emb.weight.detach().cpu().numpy(), requires_grad=True)
    g_rows = torch.tensor(gy).to(torch.bfloat16).float()
    torch.nn.functional.embedding(torch.tensor(idx.cpu().numpy()), tw).backward(g_rows)
    np.testing.assert_allclose(emb.weight.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)
