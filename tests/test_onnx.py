"""pylucid.onnx.export: traced models run by onnxruntime (CPU) agree with pylucid."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

import pylucid as pl
import pylucid.nn as nn
import pylucid.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _session(data: bytes):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _run(sess, inputs):
    return sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)})


def _check(model, args, *, more=(), rtol=1e-4, atol=1e-5, **kw):
    """Export ``model`` on ``args``, then compare onnxruntime with pylucid on ``args`` and each of ``more``."""
    if isinstance(model, nn.Module):
        model.eval()
    buf = io.BytesIO()
    proto = pl.onnx.export(model, args, buf, **kw)
    sess = _session(buf.getvalue())
    for a in (args, *more):
        a = a if isinstance(a, tuple) else (a,)
        with pl.no_grad():
            ref = pl.onnx._export._flatten(model(*a), [])
        got = _run(sess, a)
        assert len(got) == len(ref)
        for r, o in zip(ref, got):
            assert o.shape == tuple(r.shape)
            np.testing.assert_allclose(o, r.numpy(), rtol=rtol, atol=atol)
    return proto


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.fixture(autouse=True)
def _seed():
    pl.manual_seed(0)


# ---------------------------------------------------------------- models
def test_mlp_parameters_are_named_initializers():
    mlp = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 3))
    proto = _check(mlp, pl.randn(2, 4), input_names=["x"], output_names=["y"])
    names = {t.name for t in proto.graph.initializer}
    assert {"0.weight", "0.bias", "2.weight", "4.bias"} <= names
    assert [i.name for i in proto.graph.input] == ["x"] and [o.name for o in proto.graph.output] == ["y"]
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(
        next(t for t in proto.graph.initializer if t.name == "0.weight")), mlp[0].weight.detach().numpy())


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, dilation=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def test_cnn_with_eval_batch_norm_and_dynamic_batch():
    cnn = SmallCNN()
    with pl.no_grad():  # non-trivial running statistics
        for bn in (cnn.bn1, cnn.bn2):
            bn.running_mean.copy_(pl.randn(8) * 0.1)
            bn.running_var.copy_(pl.rand(8) + 0.5)
    cnn.train()
    pl.onnx.export(cnn, pl.randn(2, 3, 16, 16), io.BytesIO())
    assert cnn.training and cnn.bn1.training  # exported in eval mode, the training flags restored
    proto = _check(cnn, pl.randn(2, 3, 16, 16), more=[pl.randn(5, 3, 16, 16)], dynamic_axes={"input": {0: "batch"}})
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"


class Block(nn.Module):
    """Pre-norm causal self-attention + GELU MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


def test_transformer_block_causal_dynamic_batch_and_sequence():
    _check(Block(), pl.randn(2, 5, 16), more=[pl.randn(3, 7, 16), pl.randn(1, 1, 16)],
           dynamic_axes={"input": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}})


def test_gpt_style_model_with_embeddings_and_position_constant():
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(11, 16)
            self.pos = nn.Embedding(8, 16)
            self.block = Block()
            self.ln = nn.LayerNorm(16)
            self.head = nn.Linear(16, 11, bias=False)

        def forward(self, idx):
            pos = pl.arange(idx.shape[1])  # made inside forward: a constant of the graph
            return F.log_softmax(self.head(self.ln(self.block(self.tok(idx) + self.pos(pos)))), -1)

    idx = pl.randint(0, 11, (2, 6))
    _check(LM(), idx, more=[pl.randint(0, 11, (4, 6))], dynamic_axes={"input": [0]})


def test_manual_attention_with_a_mask_made_in_forward_on_a_dynamic_sequence():
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)

        def forward(self, x):
            T = x.shape[1]
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            mask = pl.ones(T, T).tril().bool()  # one value, sized by the dynamic axis: ConstantOfShape + Trilu
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            return att @ v

    _check(Attn(), pl.randn(2, 4, 8), more=[pl.randn(3, 9, 8)], dynamic_axes={"input": {0: "b", 1: "t"}})


def test_constant_folding():
    f = Fn(lambda x: x + pl.ones(3).cumsum(0) * 2)
    folded = _check(f, pl.randn(2, 3))
    kept = _check(f, pl.randn(2, 3), do_constant_folding=False)
    assert [n.op_type for n in folded.graph.node] == ["Add", "Identity"]
    assert [n.op_type for n in kept.graph.node] == ["CumSum", "Mul", "Add", "Identity"]


def test_torch_transformer_encoder_layer_and_multihead_attention():
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True, norm_first=True)
    _check(layer, pl.randn(2, 5, 16), more=[pl.randn(3, 5, 16)], dynamic_axes={"input": {0: "b"}})
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    mask = pl.ones(5, 5).triu(1).bool()
    _check(Fn(lambda x: mha(x, x, x, attn_mask=mask, need_weights=False)[0]), pl.randn(2, 5, 16))


def test_lstm_and_gru_unrolled_with_dynamic_batch():
    lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)
    proto = _check(lstm, pl.randn(2, 5, 4), more=[pl.randn(3, 5, 4)], dynamic_axes={"input": {0: "batch"}},
                   output_names=["out", "h", "c"])
    assert [o.name for o in proto.graph.output] == ["out", "h", "c"]
    _check(nn.GRU(4, 6, batch_first=True), pl.randn(2, 5, 4), more=[pl.randn(4, 5, 4)],
           dynamic_axes={"input": {0: "batch"}})


def test_a_loop_over_a_dynamic_axis_is_refused():
    with pytest.raises(pl.LucidError, match="different ops when the dynamic axes change"):
        pl.onnx.export(nn.LSTM(4, 6, batch_first=True), pl.randn(2, 5, 4), io.BytesIO(),
                       dynamic_axes={"input": {1: "seq"}})


# ---------------------------------------------------------------- op coverage
_X = pl.randn(2, 3, 4)

_FUNCS = {
    "arith": lambda x: (x + 1.5) * x - x / 3.0 + 2 ** x.abs().neg() - pl.exp(x) / pl.log(x.abs() + 1),
    "pow_sqrt_rsqrt": lambda x: x.abs().sqrt() + (x.abs() + 1).rsqrt() + x ** 2 + x.abs() ** 0.5 + x.square(),
    "activations": lambda x: (F.relu(x), pl.sigmoid(x), pl.tanh(x), F.gelu(x), F.gelu(x, approximate="tanh"),
                              F.silu(x), F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x), F.hardtanh(x), F.relu6(x)),
    "softmax": lambda x: (F.softmax(x, dim=-1), F.log_softmax(x, dim=1), x.softmax(0)),
    "reductions": lambda x: (x.mean(-1, keepdim=True), x.sum((0, 1)), x.amax(-1), x.mean(), x.sum(), x.amin(1),
                             x.argmax(-1), pl.logsumexp(x, 1)),
    "shapes": lambda x: (x.flatten(1), x.reshape(-1, 4), x.view(6, 4), x.permute(2, 0, 1), x.transpose(0, 2),
                         x.unsqueeze(1), x.unsqueeze(-1).squeeze(-1), x[:, :1].squeeze(1), x.mT),
    "cat_stack_split": lambda x: (pl.cat([x, x * 2], 1), pl.stack([x, -x], 0), pl.stack([x, x], -1),
                                  *x.split(2, dim=-1), *x.chunk(3, dim=1), *x.unbind(1)),
    "getitem": lambda x: (x[:, 1:3], x[:, -1], x[..., ::2], x[None, 0], x[1, :, 2:], x[:, -2:, None], x[0, 1, 2],
                          x[..., 1], x[:, ::2, 1:-1], x[pl.tensor([1, 0, 1])], x[:, pl.tensor([[2, 0], [1, -1]])],
                          x[..., pl.tensor([3, 0])], x[:, x[0, :, 0].argmax(0, keepdim=True)]),
    "where_masked_fill": lambda x: (pl.where(x > 0, x, 0.0), x.masked_fill(x < 0, float("-inf")),
                                    pl.where(x >= x.mean(), x, -x), (x == x.amax(-1, keepdim=True)).float(),
                                    x.clamp(-0.5, 0.5), x.clamp(min=0.0), pl.maximum(x, -x)),
    "compare_logic": lambda x: ((x > 0) & (x < 1), ~(x <= 0), (x != 0) | (x == 1)),
    "casts_and_ints": lambda x: ((x * 10).long() // 1 + 3, x.double().sum(), (x > 0).sum(-1), x.int().float()),
    "constants": lambda x: x + pl.tensor([1.0, 2.0, 3.0, 4.0]) * pl.ones(3, 1) + pl.full((4,), 0.5),
    "more_elementwise": lambda x: (F.hardsigmoid(x), F.hardswish(x), F.mish(x), F.selu(x), pl.erf(x), x.sign(),
                                   x.floor(), x.ceil(), pl.log1p(x.abs()), pl.expm1(x), x.reciprocal(),
                                   (x * 4).round(), x.round(decimals=1)),
    "cumsum_pad_select": lambda x: (x.cumsum(1), F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=3.0),
                                    F.pad(x, (2, 1), mode="reflect"), F.pad(x, (1, 1), mode="replicate"),
                                    x.index_select(2, pl.tensor([3, 0, 0])),
                                    x.index_select(1, x[0, :, 0].argmax(0, keepdim=True)),
                                    x.gather(2, x.abs().argmax(-1, keepdim=True))),
    "floor_divide": lambda x: ((x * 10).long() // 3, (x * 10).long() // -3, x // 0.3, (x * 7).long() % 1),
    "statistics": lambda x: (x.var(-1), x.std(0, correction=0), x.var(), F.normalize(x, dim=1), x.isnan(),
                             x.isfinite(), (x / 0).isinf(), (x / 0).isposinf()),
    "matmul_addmm": lambda x: (x @ x.transpose(1, 2), pl.addmm(x[0, 0, :3], x[0], x[1].mT), pl.matmul(x, x[0, 0])),
}


@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_op_coverage(name):
    _check(Fn(_FUNCS[name]), _X, more=[pl.randn(2, 3, 4)])  # new values: nothing input-dependent is frozen


def test_sdpa_masks():
    q, k, v = pl.randn(2, 2, 5, 4), pl.randn(2, 2, 6, 4), pl.randn(2, 2, 6, 4)
    bool_mask = pl.rand(5, 6) > 0.3
    bool_mask[:, 0] = True  # no fully masked rows
    add_mask = pl.randn(2, 1, 5, 6)
    _check(Fn(lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=add_mask, scale=0.3),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True))), (q, k, v))


def test_conv_family_and_pools():
    conv1 = nn.Conv1d(3, 4, 3, stride=2, padding=2, dilation=2)
    convt = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
    convt_g = nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1, groups=2)

    def f(x1, x2):
        y = convt(x2)
        return (conv1(x1), y, convt_g(y), F.adaptive_avg_pool2d(x2, 1), F.adaptive_avg_pool2d(x2, (2, 4)),
                F.avg_pool2d(x2, 3, stride=2, padding=1), F.avg_pool2d(x2, 2, count_include_pad=False, padding=1),
                F.max_pool2d(x2, 3, stride=2, padding=1, ceil_mode=True), F.max_pool2d(x2, 2, dilation=2))

    _check(Fn(f), (pl.randn(2, 3, 9), pl.randn(2, 3, 8, 8)), rtol=1e-4, atol=1e-4)


def test_interpolation_modes():
    def f(x):
        return (F.interpolate(x, scale_factor=2), F.interpolate(x, size=(6, 7)), F.interpolate(x, size=(3, 2)),
                F.interpolate(x, scale_factor=1.5, mode="nearest-exact"), F.interpolate(x, scale_factor=1.7),
                F.interpolate(x, scale_factor=2, mode="bilinear"), F.interpolate(x, size=(9, 11), mode="bilinear"),
                F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=2, mode="bicubic"), F.interpolate(x[:, :, 0], scale_factor=2,
                                                                                 mode="linear"))

    _check(Fn(f), pl.randn(2, 2, 4, 5), more=[pl.randn(3, 2, 4, 5)], dynamic_axes={"input": [0]}, atol=1e-4)


@pytest.mark.parametrize("make", [
    lambda: (nn.Transformer(8, 2, 1, 1, 16, batch_first=True), (pl.randn(2, 5, 8), pl.randn(2, 6, 8))),
    lambda: (nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.PixelShuffle(2), nn.Upsample(
        scale_factor=2), nn.InstanceNorm2d(2)), pl.randn(2, 4, 3, 3)),
    lambda: (nn.LSTM(3, 4, batch_first=True, bidirectional=True), pl.randn(2, 5, 3)),
    lambda: (nn.Sequential(nn.Embedding(7, 4, padding_idx=0), nn.Flatten(), nn.Linear(12, 3)).double(),
             pl.tensor([[0, 3, 6], [1, 1, 2]])),
], ids=["transformer", "norms_and_upsampling", "bidirectional_lstm", "embedding_float64"])
def test_more_modules(make):
    model, args = make()
    _check(model, args)


def test_tracing_leaves_nothing_behind():
    from pylucid.ops import _op, activation

    add_, iadd, commit = pl.Tensor.add_, pl.Tensor.__iadd__, activation.commit_inplace
    with pytest.raises(pl.onnx.UnsupportedOperatorError):
        pl.onnx.export(Fn(lambda x: pl.linalg.det(x + 1)), pl.randn(2, 2), io.BytesIO())
    with pytest.raises(ZeroDivisionError):
        pl.onnx.export(Fn(lambda x: x + 1 / 0), pl.randn(2, 2), io.BytesIO())
    with pytest.raises(pl.LucidError, match="function transform"):
        pl.onnx.export(Fn(lambda x: pl.func.vmap(pl.sin)(x) + 1), pl.randn(2, 2), io.BytesIO())
    assert _op._transform_hook is None
    assert pl.Tensor.add_ is add_ and pl.Tensor.__iadd__ is iadd and activation.commit_inplace is commit


def test_layer_norm_without_affine_and_older_opset_spellings():
    ln = nn.LayerNorm((3, 4), elementwise_affine=False)
    for opset in (14, 17, 18):
        _check(Fn(lambda x: (ln(x), x.mean((1, 2)), x.amax(0))), _X, opset_version=opset)


def test_in_place_updates_are_followed():
    def f(x):
        y = x * 2
        y.add_(1.0)
        y.masked_fill_(y < 0, 0.0)
        F.relu(y, inplace=True)
        return y * 3

    _check(Fn(f), _X)


def test_write_outside_an_op_is_refused():
    def f(x):
        y = x * 2
        y[0] = 0.0
        return y + 1

    with pytest.raises(pl.LucidError, match="changed in place"):
        pl.onnx.export(Fn(f), _X, io.BytesIO())


# ---------------------------------------------------------------- the interface
def test_unsupported_op_names_the_op_and_the_module_path():
    class Inner(nn.Module):
        def forward(self, x):
            return pl.linalg.det(x)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.inner = Inner()

        def forward(self, x):
            return self.inner(self.lin(x))

    with pytest.raises(pl.onnx.UnsupportedOperatorError, match=r"op 'det' in module 'inner'") as exc:
        pl.onnx.export(Outer(), pl.randn(3, 3), io.BytesIO())
    assert isinstance(exc.value, pl.LucidError)
    assert "det" not in pl.onnx.supported_ops() and "conv2d" in pl.onnx.supported_ops()


def test_path_export_params_false_and_list_dynamic_axes(tmp_path):
    mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    path = tmp_path / "mlp.onnx"
    x = pl.randn(2, 4)
    pl.onnx.export(mlp, (x,), str(path), export_params=False, dynamic_axes={"input": [0], "output": [0]})
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["input", "0.weight", "0.bias"]
    assert not model.graph.initializer
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "input_dynamic_axes_1"
    sess = _session(path.read_bytes())
    for xb in (x, pl.randn(6, 4)):
        (got,) = sess.run(None, {"input": xb.numpy(), "0.weight": mlp[0].weight.detach().numpy(),
                                 "0.bias": mlp[0].bias.detach().numpy()})
        np.testing.assert_allclose(got, mlp(xb).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_keyword_tensor_arguments_are_inputs():
    class Masked(nn.Module):
        def forward(self, x, *, mask=None, scale=1.0):
            return x.masked_fill(mask, 0.0) * scale

    x, mask = pl.randn(2, 3), pl.rand(2, 3) > 0.5
    buf = io.BytesIO()
    with pytest.raises(pl.LucidError, match="the same name"):  # the two axes grow apart
        pl.onnx.export(Masked(), (x, {"mask": mask}), io.BytesIO(), dynamic_axes={"input_0": [0], "mask": [0]})
    proto = pl.onnx.export(Masked(), (x, {"mask": mask, "scale": 2.0}), buf, input_names=["x"],
                           dynamic_axes={"x": {0: "batch"}, "mask": {0: "batch"}})
    assert [i.name for i in proto.graph.input] == ["x", "mask"]
    sess = _session(buf.getvalue())
    for xb, mb in ((x, mask), (pl.randn(4, 3), pl.rand(4, 3) > 0.5)):
        (got,) = sess.run(None, {"x": xb.numpy(), "mask": mb.numpy()})
        np.testing.assert_allclose(got, Masked()(xb, mask=mb, scale=2.0).numpy())


def test_argument_errors():
    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="opset_version"):
        pl.onnx.export(lin, pl.randn(1, 2), io.BytesIO(), opset_version=9)
    with pytest.raises(ValueError, match="dynamic_axes names 'x'"):
        pl.onnx.export(lin, pl.randn(1, 2), io.BytesIO(), dynamic_axes={"x": [0]})
    with pytest.raises(ValueError, match="input_names"):
        pl.onnx.export(lin, pl.randn(1, 2), io.BytesIO(), input_names=["a", "b"])
    with pytest.raises(ValueError, match="has 2 dimensions"):
        pl.onnx.export(lin, pl.randn(1, 2), io.BytesIO(), dynamic_axes={"input": [2]})


def test_size_dependent_python_number_is_refused_on_a_dynamic_axis():
    f = Fn(lambda x: x / math.sqrt(x.shape[0]))
    _check(f, pl.randn(3, 2))  # a fixed size is fine
    with pytest.raises(pl.LucidError, match="Python number"):
        pl.onnx.export(f, pl.randn(3, 2), io.BytesIO(), dynamic_axes={"input": [0]})


def test_importing_pylucid_does_not_import_onnx():
    import subprocess
    import sys

    code = "import sys, pylucid; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
