"""The one table: op registry name -> emitter.

An emitter ``f(s)`` gets a ``Site`` (inputs, params, output dtypes and shapes of one traced call) and
returns the ONNX names of the call's outputs, in order; it may return fewer names than the op has
outputs when the rest (``layer_norm``'s saved statistics, ``lstm_cell``'s activations) are internal,
and then a later use of one of those raises ``UnsupportedOperatorError``.
"""

from __future__ import annotations

import math

from .. import dtypes as _dt
from ._graph import INT64_MAX, INT64_MIN

TABLE: dict = {}


def emits(*names):
    def deco(fn):
        for n in names:
            TABLE[n] = fn
        return fn

    return deco


def _unary(onnx_op: str):
    # real-valued ops (exp of an int tensor) compute in the output's float dtype: the input is cast to it
    return lambda s: [s.node1(onnx_op, [s.x(0)])]


for _name, _onnx_op in (("neg", "Neg"), ("exp", "Exp"), ("log", "Log"), ("sqrt", "Sqrt"), ("tanh", "Tanh"),
                        ("sigmoid", "Sigmoid"), ("relu", "Relu"), ("abs", "Abs"), ("erf", "Erf"), ("sin", "Sin"),
                        ("cos", "Cos"), ("tan", "Tan"), ("floor", "Floor"), ("ceil", "Ceil"), ("sign", "Sign"),
                        ("reciprocal", "Reciprocal"), ("arctan", "Atan"), ("arcsin", "Asin"),
                        ("arccos", "Acos"), ("sinh", "Sinh"), ("cosh", "Cosh"), ("hardswish", "HardSwish"),
                        ("clone", "Identity"), ("contiguous", "Identity")):
    TABLE[_name] = _unary(_onnx_op)


def _binary(onnx_op: str):
    # arithmetic computes in the output dtype (pylucid's promotion already chose it; int / int is float)
    return lambda s: [s.node1(onnx_op, [s.x(0), s.x(1)])]


for _name, _onnx_op in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div"), ("pow", "Pow"),
                        ("maximum", "Max"), ("minimum", "Min"), ("matmul", "MatMul")):
    TABLE[_name] = _binary(_onnx_op)


def _compare(onnx_op: str, negate: bool = False):
    def emit(s):
        dt = s.common_dtype()
        out = s.node1(onnx_op, [s.x(0, dt), s.x(1, dt)])
        return [s.node1("Not", [out]) if negate else out]

    return emit


for _name, _onnx_op in (("eq", "Equal"), ("lt", "Less"), ("le", "LessOrEqual"), ("gt", "Greater"),
                        ("ge", "GreaterOrEqual")):
    TABLE[_name] = _compare(_onnx_op)
TABLE["ne"] = _compare("Equal", negate=True)


@emits("logical_not")
def _logical_not(s):
    return [s.node1("Not", [s.x(0, _dt.bool_)])]


def _logical(onnx_op: str):
    return lambda s: [s.node1(onnx_op, [s.x(0, _dt.bool_), s.x(1, _dt.bool_)])]


for _name, _onnx_op in (("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor")):
    TABLE[_name] = _logical(_onnx_op)


@emits("square")
def _square(s):
    x = s.x(0)
    return [s.node1("Mul", [x, x])]


@emits("round")
def _round(s):
    # half to even, as NumPy and PyTorch; decimals d: round(x 10^d) / 10^d, NumPy's own recipe
    d = int(s.param("decimals"))
    if d == 0:
        return [s.node1("Round", [s.x(0)])]
    f = s.g.scalar(10.0 ** d, s.out_dtype())
    return [s.node1("Div", [s.node1("Round", [s.node1("Mul", [s.x(0), f])]), f])]


@emits("rsqrt")
def _rsqrt(s):
    return [s.node1("Reciprocal", [s.node1("Sqrt", [s.x(0)])])]


@emits("log1p")
def _log1p(s):
    return [s.node1("Log", [s.node1("Add", [s.x(0), s.g.scalar(1, s.out_dtype())])])]


@emits("expm1")
def _expm1(s):
    return [s.node1("Sub", [s.node1("Exp", [s.x(0)]), s.g.scalar(1, s.out_dtype())])]


@emits("astype")
def _astype(s):
    return [s.g.cast(s.x(0, s.dtype(0)), s.dtype(0), s.params["dtype"])]


@emits("where")
def _where(s):
    return [s.node1("Where", [s.x(0, _dt.bool_), s.x(1), s.x(2)])]


@emits("clamp")
def _clamp(s):
    y = s.x(0)
    if s.ins[1] is not None:
        y = s.node1("Max", [y, s.x(1)])
    if s.ins[2] is not None:
        y = s.node1("Min", [y, s.x(2)])
    return [y]


# ---------------------------------------------------------------- activations
@emits("gelu")
def _gelu(s):
    dt, g, x = s.out_dtype(), s.g, s.x(0)
    if s.params.get("approximate", "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = s.node1("Mul", [s.node1("Mul", [x, x]), x])
        inner = s.node1("Add", [x, s.node1("Mul", [x3, g.scalar(0.044715, dt)])])
        t = s.node1("Tanh", [s.node1("Mul", [inner, g.scalar(math.sqrt(2.0 / math.pi), dt)])])
    else:
        # 0.5 x (1 + erf(x / sqrt(2)))
        t = s.node1("Erf", [s.node1("Mul", [x, g.scalar(1.0 / math.sqrt(2.0), dt)])])
    half_x = s.node1("Mul", [x, g.scalar(0.5, dt)])
    return [s.node1("Mul", [half_x, s.node1("Add", [t, g.scalar(1.0, dt)])])]


@emits("silu")
def _silu(s):
    x = s.x(0)
    return [s.node1("Mul", [x, s.node1("Sigmoid", [x])])]


@emits("leaky_relu")
def _leaky_relu(s):
    return [s.node1("LeakyRelu", [s.x(0)], alpha=float(s.params["negative_slope"]))]


@emits("hardtanh", "relu6")
def _hardtanh(s):
    dt = s.out_dtype()
    lo, hi = (0.0, 6.0) if s.name == "relu6" else (s.params["min_val"], s.params["max_val"])
    return [s.node1("Clip", [s.x(0), s.g.scalar(lo, dt), s.g.scalar(hi, dt)])]


@emits("hardsigmoid")
def _hardsigmoid(s):
    return [s.node1("HardSigmoid", [s.x(0)], alpha=1.0 / 6.0, beta=0.5)]


@emits("elu", "selu")
def _elu(s):
    # scale * elu(input_scale * x, alpha): elu and selu (and celu's spelling) share the op
    dt, g = s.out_dtype(), s.g
    x = s.x(0)
    if s.params.get("input_scale", 1.0) != 1.0:
        x = s.node1("Mul", [x, g.scalar(s.params["input_scale"], dt)])
    y = s.node1("Elu", [x], alpha=float(s.params.get("alpha", 1.0)))
    if s.params.get("scale", 1.0) != 1.0:
        y = s.node1("Mul", [y, g.scalar(s.params["scale"], dt)])
    return [y]


@emits("softplus")
def _softplus(s):
    # log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's linear regime)
    dt, g, x = s.out_dtype(), s.g, s.x(0)
    beta, threshold = float(s.params["beta"]), float(s.params["threshold"])
    bx = s.node1("Mul", [x, g.scalar(beta, dt)])
    sp = s.node1("Div", [s.node1("Softplus", [bx]), g.scalar(beta, dt)])
    return [s.node1("Where", [s.node1("Greater", [bx, g.scalar(threshold, dt)]), x, sp])]


@emits("mish")
def _mish(s):
    x = s.x(0)
    return [s.node1("Mul", [x, s.node1("Tanh", [s.node1("Softplus", [x])])])]


@emits("softmax")
def _softmax(s):
    return [s.node1("Softmax", [s.x(0)], axis=int(s.params["dim"]))]


@emits("log_softmax")
def _log_softmax(s):
    return [s.node1("LogSoftmax", [s.x(0)], axis=int(s.params["dim"]))]


# ---------------------------------------------------------------- linear algebra and nn
@emits("linear")
def _linear(s):
    x, w = s.value(0), s.value(1)
    if x.rank == 2 and w.rank == 2:
        ins = [s.x(0), s.x(1)] + ([s.x(2)] if s.ins[2] is not None else [])
        return [s.node1("Gemm", ins, transB=1)]
    wt = s.node1("Transpose", [s.x(1)], perm=list(range(w.rank - 2)) + [w.rank - 1, w.rank - 2]) \
        if w.rank >= 2 else s.x(1)
    y = s.node1("MatMul", [s.x(0), wt])
    return [s.node1("Add", [y, s.x(2)]) if s.ins[2] is not None else y]


def _conv_attrs(s, w):
    pads = s.param("pads")
    return dict(kernel_shape=list(w.shape[2:]), strides=list(s.param("stride")), dilations=list(s.param("dilation")),
                pads=[p[0] for p in pads] + [p[1] for p in pads], group=int(s.param("groups")))


@emits("conv1d", "conv2d", "conv3d")
def _conv(s):
    ins = [s.x(0), s.x(1)] + ([s.x(2)] if s.ins[2] is not None else [])
    return [s.node1("Conv", ins, **_conv_attrs(s, s.value(1)))]


@emits("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_transpose(s):
    x, w = s.value(0), s.value(1)
    attrs = _conv_attrs(s, w)
    nd = w.rank - 2
    pads, st, dil = s.params["pads"], attrs["strides"], attrs["dilations"]

    def out_pad(in_shape, out_shape):
        # ONNX: out = stride (in - 1) + output_padding + dilation (k - 1) + 1 - pad_begin - pad_end
        return [out_shape[2 + i] - (st[i] * (in_shape[2 + i] - 1) + dil[i] * (w.shape[2 + i] - 1) + 1
                                    - pads[i][0] - pads[i][1]) for i in range(nd)]

    op1 = out_pad(x.shape, s.out_shape())
    if out_pad(x.shape2, s.out_shape2()) != op1:
        raise s.unsupported("its output size does not follow its input size along a dynamic axis")
    ins = [s.x(0), s.x(1)] + ([s.x(2)] if s.ins[2] is not None else [])
    return [s.node1("ConvTranspose", ins, output_padding=op1, **attrs)]


@emits("batch_norm")
def _batch_norm(s):
    if s.params["training"] or s.ins[3] is None:
        raise s.unsupported("batch norm with batch statistics (training mode, or track_running_stats=False) has "
                            "no ONNX export; export the model in eval mode with running statistics")
    x = s.value(0)
    c = x.shape[1]
    dt, g = s.out_dtype(), s.g
    scale = s.x(1) if s.ins[1] is not None else g.const(_full((c,), 1.0, dt))
    bias = s.x(2) if s.ins[2] is not None else g.const(_full((c,), 0.0, dt))
    return [s.node1("BatchNormalization", [s.x(0), scale, bias, s.x(3), s.x(4)], epsilon=float(s.params["eps"]))]


def _full(shape, value, dt):
    from .._interop import np

    return np.full(shape, value, dtype=dt.numpy_dtype)


@emits("layer_norm")
def _layer_norm(s):
    x = s.value(0)
    k, eps, dt, g = int(s.params["k"]), float(s.params["eps"]), s.out_dtype(), s.g
    norm_shape = x.shape[x.rank - k:]
    w = s.x(1) if s.ins[1] is not None else None
    b = s.x(2) if s.ins[2] is not None else None
    if g.opset >= 17:
        w = w if w is not None else g.const(_full(norm_shape, 1.0, dt))
        ins = [s.x(0), w] + ([b] if b is not None else [])
        return [s.node1("LayerNormalization", ins, axis=-k, epsilon=eps)]
    axes = list(range(-k, 0))
    xx = s.x(0)
    d = s.node1("Sub", [xx, g.reduce(s, "ReduceMean", xx, axes, True)])
    var = g.reduce(s, "ReduceMean", s.node1("Mul", [d, d]), axes, True)
    y = s.node1("Div", [d, s.node1("Sqrt", [s.node1("Add", [var, g.scalar(eps, dt)])])])
    if w is not None:
        y = s.node1("Mul", [y, w])
    if b is not None:
        y = s.node1("Add", [y, b])
    return [y]


@emits("rms_norm")
def _rms_norm(s):
    k, dt, g = int(s.params["k"]), s.out_dtype(), s.g
    eps = s.params["eps"]
    if eps is None:  # PyTorch's default: the dtype's machine epsilon
        from .._interop import np

        eps = float(np.finfo(dt.numpy_dtype).eps)
    xx = s.x(0)
    ms = g.reduce(s, "ReduceMean", s.node1("Mul", [xx, xx]), list(range(-k, 0)), True)
    y = s.node1("Mul", [xx, s.node1("Reciprocal", [s.node1("Sqrt", [s.node1("Add", [ms, g.scalar(eps, dt)])])])])
    return [s.node1("Mul", [y, s.x(1)]) if s.ins[1] is not None else y]


@emits("embedding")
def _embedding(s):
    return [s.node1("Gather", [s.x(0), s.x(1, s.dtype(1))], axis=0)]


@emits("scaled_dot_product_attention")
def _sdpa(s):
    if s.ins[4] is not None:
        raise s.unsupported("attention dropout has no ONNX export; export the model in eval mode (dropout_p=0)")
    k = s.value(1)
    dt, g = s.out_dtype(), s.g
    kt = s.node1("Transpose", [s.x(1)], perm=list(range(k.rank - 2)) + [k.rank - 1, k.rank - 2])
    scores = s.node1("Mul", [s.node1("MatMul", [s.x(0), kt]), g.scalar(float(s.params["scale"]), dt)])
    if s.ins[3] is not None:
        scores = s.node1("Add", [scores, s.x(3)])
    if s.params.get("causal"):
        # -inf strictly above the diagonal (top-left aligned, as PyTorch), built from the scores' own (L, S) so
        # that a dynamic sequence length stays dynamic
        ls = s.node1("Slice", [s.node1("Shape", [scores]), g.int64s([-2]), g.int64s([INT64_MAX])])
        from .._interop import np

        fill = _onnx_tensor(np.asarray([-np.inf], dtype=dt.numpy_dtype))
        neg = s.node1("ConstantOfShape", [ls], value=fill)
        scores = s.node1("Add", [scores, s.node1("Trilu", [neg, g.int64s([1])], upper=1)])
    p = s.node1("Softmax", [scores], axis=-1)
    return [s.node1("MatMul", [p, s.x(2)])]


def _onnx_tensor(arr):
    import onnx

    return onnx.numpy_helper.from_array(arr)


@emits("lstm_cell")
def _lstm_cell(s):
    # gates (..., 4H) in PyTorch's order i, f, g, o; c' = f c + i g, h = o tanh(c')
    i, f, gg, o = s.node("Split", [s.x(0), s.g.int64s([s.value(1).shape[-1]] * 4)], 4, axis=-1)
    i, f, o = (s.node1("Sigmoid", [t]) for t in (i, f, o))
    c2 = s.node1("Add", [s.node1("Mul", [f, s.x(1)]), s.node1("Mul", [i, s.node1("Tanh", [gg])])])
    return [s.node1("Mul", [o, s.node1("Tanh", [c2])]), c2]


@emits("gru_cell")
def _gru_cell(s):
    # r, z = sigmoid(xg + hg) on the first 2H; n = tanh(xg_n + r hg_n); h' = n + z (h - n)
    hid = s.value(2).shape[-1]
    split = s.g.int64s([hid] * 3)
    xr, xz, xn = s.node("Split", [s.x(0), split], 3, axis=-1)
    hr, hz, hn = s.node("Split", [s.x(1), split], 3, axis=-1)
    r = s.node1("Sigmoid", [s.node1("Add", [xr, hr])])
    z = s.node1("Sigmoid", [s.node1("Add", [xz, hz])])
    n = s.node1("Tanh", [s.node1("Add", [xn, s.node1("Mul", [r, hn])])])
    return [s.node1("Add", [n, s.node1("Mul", [z, s.node1("Sub", [s.x(2), n])])])]


# ---------------------------------------------------------------- pooling
def _pool_attrs(s, with_dilation=True):
    pads = s.param("pads")
    attrs = dict(kernel_shape=list(s.param("kernel")), strides=list(s.param("stride")),
                 pads=[p[0] for p in pads] + [p[1] for p in pads])
    if with_dilation:
        attrs["dilations"] = list(s.param("dilation"))
    return attrs, pads


@emits("max_pool1d", "max_pool2d", "max_pool3d")
def _max_pool(s):
    attrs, _ = _pool_attrs(s)
    return [s.node1("MaxPool", [s.x(0)], **attrs)]


@emits("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(s):
    if s.params["divisor_override"] is not None:
        raise s.unsupported("avg_pool with divisor_override has no ONNX export")
    attrs, pads = _pool_attrs(s, with_dilation=False)
    cip = bool(s.params["count_include_pad"])
    if cip and any(p[0] != p[1] for p in pads):
        # ceil_mode's extra right padding is not counted by PyTorch, and would be by ONNX's count_include_pad
        raise s.unsupported("avg_pool with ceil_mode and count_include_pad=True has no exact ONNX export")
    return [s.node1("AveragePool", [s.x(0)], count_include_pad=int(cip), **attrs)]


@emits("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
def _adaptive_avg_pool(s):
    axes = s.param("axes")
    if any(a[0] != "adaptive" for a in axes):
        raise s.unsupported(f"this pooling geometry {axes} has no ONNX export")
    ins, outs = [a[1] for a in axes], [a[2] for a in axes]
    if all(o == 1 for o in outs):
        return [s.node1("GlobalAveragePool", [s.x(0)])]
    if all(i % o == 0 for i, o in zip(ins, outs)):
        k = [i // o for i, o in zip(ins, outs)]
        return [s.node1("AveragePool", [s.x(0)], kernel_shape=k, strides=k)]
    raise s.unsupported(f"adaptive pooling from {tuple(ins)} to {tuple(outs)} (not a divisor) has no ONNX export")


# ---------------------------------------------------------------- reductions
def _reduction(onnx_op: str):
    def emit(s):
        # in the output's dtype: sum of a bool tensor counts in int64, a dtype= argument casts first
        x = s.x(0)
        return [s.g.reduce(s, onnx_op, x, s.param("axes"), s.param("keepdim"))]

    return emit


for _name, _onnx_op in (("sum", "ReduceSum"), ("mean", "ReduceMean"), ("max", "ReduceMax"), ("min", "ReduceMin"),
                        ("prod", "ReduceProd"), ("logsumexp", "ReduceLogSumExp")):
    TABLE[_name] = _reduction(_onnx_op)


def _arg_reduction(onnx_op: str):
    def emit(s):
        dim, keep = s.param("dim"), bool(s.param("keepdim"))
        x = s.x(0, s.dtype(0))
        if dim is None:
            x, dim = s.node1("Reshape", [x, s.g.int64s([-1])]), 0
        y = s.node1(onnx_op, [x], axis=int(dim), keepdims=int(keep))
        if s.params["dim"] is None and keep:
            y = s.node1("Reshape", [y, s.g.int64s([1] * s.value(0).rank)])
        return [y]

    return emit


TABLE["argmax"] = _arg_reduction("ArgMax")
TABLE["argmin"] = _arg_reduction("ArgMin")


@emits("cumsum")
def _cumsum(s):
    axis = s.g.scalar(int(s.param("dim")), _dt.int64)
    return [s.node1("CumSum", [s.x(0), axis], reverse=int(bool(s.param("reverse"))))]


# ---------------------------------------------------------------- shapes and indexing
@emits("reshape", "view")
def _reshape(s):
    src = s.value(0)
    shape = s.g.shape_input(s, s.out_shape(), s.out_shape2(), ref=src, infer=True)
    return [s.node1("Reshape", [s.x(0, src.dtype), shape])]


@emits("broadcast_to")
def _broadcast_to(s):
    src = s.value(0)
    shape = s.g.shape_input(s, s.out_shape(), s.out_shape2(), ref=src, expand=src)
    return [s.node1("Expand", [s.x(0, src.dtype), shape])]


@emits("permute")
def _permute(s):
    return [s.node1("Transpose", [s.x(0, s.dtype(0))], perm=[int(d) for d in s.param("dims")])]


@emits("concatenate")
def _concatenate(s):
    return [s.node1("Concat", [s.x(i) for i in range(len(s.ins))], axis=int(s.param("dim")))]


@emits("unbind")
def _unbind(s):
    dim, n = int(s.param("dim")), len(s.outs)
    parts = s.node("Split", [s.x(0), s.g.int64s([1] * n)], n, axis=dim)
    return [s.node1("Squeeze", [p, s.g.int64s([dim])]) for p in parts]


@emits("tril", "triu")
def _trilu(s):
    return [s.node1("Trilu", [s.x(0), s.g.int64s([int(s.param("diagonal"))])], upper=int(s.name == "triu"))]


@emits("pad")
def _pad(s):
    mode = s.param("mode")
    pads = s.param("pads")
    onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    if onnx_mode is None or (onnx_mode == "wrap" and s.g.opset < 19):
        raise s.unsupported(f"pad mode {mode!r} has no ONNX export at opset {s.g.opset}")
    x = s.value(0)
    pp = [tuple(p) for p in pads]
    # pylucid's pads: one (before, after) pair per dimension, first to last
    if len(pp) != x.rank:
        pp = [(0, 0)] * (x.rank - len(pp)) + pp
    if any(a < 0 or b < 0 for a, b in pp):
        raise s.unsupported("negative padding (cropping) has no ONNX export here")
    ins = [s.x(0), s.g.int64s([a for a, _ in pp] + [b for _, b in pp])]
    if onnx_mode == "constant":
        ins.append(s.g.scalar(s.params["value"] or 0, s.out_dtype()))
    return [s.node1("Pad", ins, mode=onnx_mode)]


def _slice_bound(s, v, ax, a1, a2, default):
    """One slice bound as an int, equal in both traces; a bound that is the axis' full (dynamic) size is open."""
    if a1 is None:
        return default
    if a1 == a2:
        return int(a1)
    if (a1, a2) == (v.shape[ax], v.shape2[ax]):
        return INT64_MAX
    raise s.unsupported(f"the slice bound {a1} follows a dynamic axis ({a2} with the axes grown)")


@emits("getitem")
def _getitem(s):
    if s.params["advanced"]:
        return _advanced_getitem(s)
    v = s.value(0)
    idx = s.params["index"]
    idx2 = s.params2["index"] if s.params2 is not None else idx
    idx = idx if isinstance(idx, tuple) else (idx,)
    idx2 = idx2 if isinstance(idx2, tuple) else (idx2,)
    n_real = sum(1 for e in idx if e is not None and e is not Ellipsis)
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    ax = out = 0
    for e, e2 in zip(idx, idx2):
        if e is Ellipsis:
            skip = v.rank - n_real
            ax += skip
            out += skip
        elif e is None:
            unsqueeze.append(out)
            out += 1
        elif isinstance(e, slice):
            step = 1 if e.step is None else int(e.step)
            if step != (1 if e2.step is None else int(e2.step)):
                raise s.unsupported("a slice step follows a dynamic axis")
            lo = _slice_bound(s, v, ax, e.start, e2.start, 0 if step > 0 else INT64_MAX)
            hi = _slice_bound(s, v, ax, e.stop, e2.stop, INT64_MAX if step > 0 else INT64_MIN)
            if (lo, hi, step) != (0, INT64_MAX, 1):
                starts.append(lo)
                ends.append(hi)
                axes.append(ax)
                steps.append(step)
            ax += 1
            out += 1
        elif isinstance(e, int) and not isinstance(e, bool):
            if e != e2:
                raise s.unsupported("an integer index follows a dynamic axis")
            starts.append(e)
            ends.append(e + 1 if e != -1 else INT64_MAX)
            axes.append(ax)
            steps.append(1)
            squeeze.append(ax)
            ax += 1
        else:
            raise s.unsupported(f"index entry {e!r} has no ONNX export")
    y = s.x(0, v.dtype)
    g = s.g
    if axes:
        y = s.node1("Slice", [y, g.int64s(starts), g.int64s(ends), g.int64s(axes), g.int64s(steps)])
    if squeeze:
        y = s.node1("Squeeze", [y, g.int64s(squeeze)])
    if unsqueeze:
        y = s.node1("Unsqueeze", [y, g.int64s(unsqueeze)])
    if not (axes or squeeze or unsqueeze):
        y = s.node1("Identity", [y])
    return [y]


def _advanced_getitem(s):
    # one integer index tensor, every other entry a full slice or the ellipsis: a Gather along that axis
    v = s.value(0)
    idx = s.params["index"]
    idx = idx if isinstance(idx, tuple) else (idx,)
    idx2 = s.params2["index"] if s.params2 is not None else idx
    idx2 = idx2 if isinstance(idx2, tuple) else (idx2,)
    arrays = [k for k, e in enumerate(idx) if hasattr(e, "dtype") and hasattr(e, "shape")]
    full = slice(None)
    if len(arrays) != 1 or idx[arrays[0]].dtype.kind not in "iu" or any(
            e != full and e is not Ellipsis for k, e in enumerate(idx) if k != arrays[0]):
        raise s.unsupported("only indexing with one integer tensor (the other entries ':' or '...') has an ONNX "
                            "export; boolean masks give data-dependent shapes")
    k = arrays[0]
    axis = k if Ellipsis not in idx[:k] else v.rank - (len(idx) - k)
    ix = s.index_array(idx[k], idx2[k] if len(idx2) > k else None)
    return [s.node1("Gather", [s.x(0, v.dtype), ix], axis=axis)]


@emits("index_select")
def _index_select(s):
    return [s.node1("Gather", [s.x(0, s.dtype(0)), s.index_param("index")], axis=int(s.param("dim")))]


@emits("gather")
def _gather(s):
    return [s.node1("GatherElements", [s.x(0, s.dtype(0)), s.index_param("index")], axis=int(s.param("dim")))]


@emits("floor_divide")
def _floor_divide(s):
    a, b = s.x(0), s.x(1)
    dt = s.out_dtype()
    if dt.is_floating_point:
        return [s.node1("Floor", [s.node1("Div", [a, b])])]
    # integer Div truncates toward zero: step down by one where the signs differ and the division is inexact
    g = s.g
    zero = g.scalar(0, dt)
    q = s.node1("Div", [a, b])
    inexact = s.node1("Not", [s.node1("Equal", [s.node1("Sub", [a, s.node1("Mul", [q, b])]), zero])])
    signs = s.node1("Xor", [s.node1("Less", [a, zero]), s.node1("Less", [b, zero])])
    return [s.node1("Sub", [q, s.g.cast(s.node1("And", [inexact, signs]), _dt.bool_, dt)])]


def _bitwise(onnx_logical: str, onnx_bitwise: str):
    def emit(s):
        dt = s.out_dtype()
        ins = [s.x(i) for i in range(len(s.ins))]
        if dt == _dt.bool_:
            return [s.node1(onnx_logical, ins)]
        if s.g.opset < 18:
            raise s.unsupported(f"bitwise ops on integers need opset 18 or newer (got {s.g.opset})")
        return [s.node1(onnx_bitwise, ins)]

    return emit


for _name, _ops in (("bitwise_and", ("And", "BitwiseAnd")), ("bitwise_or", ("Or", "BitwiseOr")),
                    ("bitwise_xor", ("Xor", "BitwiseXor")), ("bitwise_not", ("Not", "BitwiseNot"))):
    TABLE[_name] = _bitwise(*_ops)


@emits("remainder")
def _remainder(s):
    # Python's modulo (the result takes the divisor's sign); ONNX's integer Mod with fmod=0 is that, a float one
    # must be fmod: a - floor(a / b) b
    a, b = s.x(0), s.x(1)
    if s.out_dtype().is_floating_point:
        return [s.node1("Sub", [a, s.node1("Mul", [s.node1("Floor", [s.node1("Div", [a, b])]), b])])]
    return [s.node1("Mod", [a, b], fmod=0)]


@emits("isnan")
def _isnan(s):
    return [s.node1("IsNaN", [s.x(0, s.dtype(0))])]


@emits("isinf", "isposinf", "isneginf")
def _isinf(s):
    pos, neg = {"isinf": (1, 1), "isposinf": (1, 0), "isneginf": (0, 1)}[s.name]
    return [s.node1("IsInf", [s.x(0, s.dtype(0))], detect_positive=pos, detect_negative=neg)]


@emits("isfinite")
def _isfinite(s):
    x = s.x(0, s.dtype(0))
    return [s.node1("Not", [s.node1("Or", [s.node1("IsNaN", [x]), s.node1("IsInf", [x])])])]


@emits("var", "std")
def _var(s):
    # sum((x - mean)^2) / (n - correction) over the reduced axes (their sizes fixed: n is a constant)
    v = s.value(0)
    axes = s.param("axes")
    axes = tuple(range(v.rank)) if axes is None else tuple(axes)
    if any(v.shape[a] != v.shape2[a] for a in axes):
        raise s.unsupported("var/std over a dynamic axis has no ONNX export here")
    n = 1
    for a in axes:
        n *= v.shape[a]
    dt, g, x = s.out_dtype(), s.g, s.x(0)
    d = s.node1("Sub", [x, g.reduce(s, "ReduceMean", x, axes, True)])
    ss = g.reduce(s, "ReduceSum", s.node1("Mul", [d, d]), axes, s.param("keepdim"))
    y = s.node1("Div", [ss, g.scalar(float(n - s.param("correction")), dt)])
    return [s.node1("Sqrt", [y]) if s.name == "std" else y]


_RESIZE_MODES = {"nearest": ("nearest", "asymmetric", "floor"), "nearest-exact": ("nearest", "half_pixel",
                                                                                   "round_prefer_ceil"),
                 "linear": ("linear", "pytorch_half_pixel", None), "cubic": ("cubic", "pytorch_half_pixel", None)}


@emits("interpolate_nearest_1d", "interpolate_nearest_2d", "interpolate_nearest_3d", "interpolate_linear",
       "interpolate_bilinear", "interpolate_trilinear", "interpolate_bicubic")
def _interpolate(s):
    # PyTorch maps output index o to input coordinate o * scale (nearest), (o + 0.5) * scale - 0.5 (linear,
    # cubic) or o (in - 1) / (out - 1) (align_corners): ONNX Resize's asymmetric, pytorch_half_pixel and
    # align_corners coordinate modes, with ONNX's scale = 1 / PyTorch's
    from .._interop import np

    axes = s.param("axes")
    kinds = {a[0] for a in axes}
    kind = "cubic" if s.name == "interpolate_bicubic" else kinds.pop() if len(kinds) == 1 else None
    if kind not in _RESIZE_MODES:
        raise s.unsupported(f"interpolation geometry {axes} has no ONNX export")
    mode, coord, nearest = _RESIZE_MODES[kind]
    align = any(a[4] for a in axes)
    if align:
        coord = "align_corners"
    v = s.value(0)
    lead = v.rank - len(axes)
    g = s.g
    attrs = dict(mode=mode, coordinate_transformation_mode=coord)
    if nearest:
        attrs["nearest_mode"] = nearest
    if mode == "cubic":
        attrs["cubic_coeff_a"] = -0.75
    scales = [1.0 / a[3] if a[3] else 0.0 for a in axes]
    exact = not align and all(sc > 0 and math.floor(a[1] * float(np.float32(sc))) == a[2]
                              for a, sc in zip(axes, scales))
    if exact:
        # the output size ONNX computes from float32 scales is PyTorch's: pass the scales themselves
        sc = g.const(np.asarray([1.0] * lead + scales, dtype=np.float32))
        return [s.node1("Resize", [s.x(0), "", sc], **attrs)]
    if not align and any(abs(a[2] / a[1] - sc) > 1e-12 for a, sc in zip(axes, scales)):
        raise s.unsupported("a scale_factor whose output size is rounded has no exact ONNX Resize")
    sizes = g.shape_input(s, s.out_shape(), s.out_shape2(), ref=v)
    return [s.node1("Resize", [s.x(0), "", "", sizes], **attrs)]
