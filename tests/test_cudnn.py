"""The cuDNN paths of the CUDA backend (``pylucid.backend.cudnn``): convolution forward / data gradient /
weight gradient and flash attention forward / backward, against PyTorch on the GPU (a float64 or float32
reference computed from the same input values, and PyTorch's own kernels) and against pylucid's own
kernels. GPU tests skip cleanly without CuPy, a GPU, cuDNN or a CUDA build of PyTorch; the layout
helpers and the availability contract are checked everywhere.
"""

from __future__ import annotations

import subprocess
import sys
import types

import ml_dtypes
import numpy as np
import pytest
import torch

import pylucid
import pylucid.backends  # the switches: pylucid.backends.cudnn, pylucid.backends.cuda
from pylucid.backend import cudnn as C
from pylucid.ops import nn as nn_ops

GPU = C.is_available() and torch.cuda.is_available()
gpu_only = pytest.mark.skipif(not GPU, reason=f"no cuDNN GPU here ({C.unavailable_reason() or 'PyTorch has no CUDA'})")
F = torch.nn.functional
BF16 = np.dtype(ml_dtypes.bfloat16)

#: relative tolerance per dtype; the absolute one is this times the reference's largest magnitude
TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}


# ----------------------------------------------------------------------------------------------- everywhere
def test_availability_never_raises():
    ok = C.is_available()
    assert isinstance(ok, bool)
    reason = C.unavailable_reason()
    assert isinstance(reason, str)
    assert (reason == "") == ok
    assert (C.version() is None) == (not ok)


def test_import_loads_neither_cupy_nor_cudnn():
    code = "import sys, pylucid.backend.cudnn; print('cupy' in sys.modules, 'cudnn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_unavailable_functions_return_none_without_gpu():
    if C.is_available():
        pytest.skip("cuDNN is available here")
    x = np.zeros((1, 1, 4, 4), np.float32)
    assert C.conv_forward(x, np.zeros((1, 1, 3, 3), np.float32)) is None
    assert C.sdpa_forward(x, x, x) is None


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 7), (2, 3, 4, 5, 6), (1, 1, 4, 5), (2, 3, 1, 1)])
def test_channels_last_layout(shape):
    a = np.empty(shape, np.float32)
    assert C.channels_last_layout(a.shape, a.strides, 4) == "nchw"
    assert C._strides_for(shape, "nchw") == tuple(s // 4 for s in a.strides)
    nd = len(shape)
    phys = np.empty((shape[0],) + shape[2:] + (shape[1],), np.float32)
    cl = phys.transpose((0, nd - 1) + tuple(range(1, nd - 1)))
    assert cl.shape == shape
    want = "nchw" if cl.flags.c_contiguous else "nhwc"  # with C == 1 or one pixel the two layouts coincide
    assert C.channels_last_layout(cl.shape, cl.strides, 4) == want
    assert C._strides_for(shape, "nhwc") == tuple(s // 4 for s in cl.strides)
    if shape[-1] > 2:
        sl = a[..., ::2]
        assert C.channels_last_layout(sl.shape, sl.strides, 4) is None


class _FakeStream:
    """A stand-in CuPy stream that logs captures (the replay bookkeeping runs without a GPU)."""

    def __init__(self, log, ptr):
        self.log, self.ptr, self.capturing = log, ptr, False

    def is_capturing(self):
        return self.capturing

    def begin_capture(self, mode):
        self.log.append("begin")

    def end_capture(self):
        self.log.append("end")
        log = self.log
        return types.SimpleNamespace(launch=lambda stream: log.append(f"launch@{stream.ptr}"))


def _fake_replay_setup(monkeypatch, fail_capture=False):
    """``(log, plan, current stream)``: a plan whose executes log ``exec``, with CuPy, the frontend and the handle
    faked."""
    log = []
    cur, side = _FakeStream(log, 0), _FakeStream(log, 7)
    cuda = types.SimpleNamespace(alloc=lambda n: types.SimpleNamespace(ptr=4096), get_current_stream=lambda: cur,
                                 Stream=lambda non_blocking: side,
                                 runtime=types.SimpleNamespace(streamCaptureModeRelaxed=2))
    monkeypatch.setattr(C, "_cp", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(C, "_mod", types.SimpleNamespace(set_stream=lambda h, s: None))
    monkeypatch.setattr(C, "_handle", lambda dev: C._Handle("handle"))
    monkeypatch.setattr(C, "_bind_stream", lambda h: None)
    monkeypatch.setattr(C, "_capturing", [0])
    monkeypatch.setattr(C, "_capture_streams", {})
    monkeypatch.setattr(C, "_failures", {})
    monkeypatch.setattr(C, "GRAPH_REPLAY", True)

    def execute(pack, ws, index, handle, *rest):
        if fail_capture and log and log[-1] == "begin":
            raise RuntimeError("not capturable")
        log.append(("exec", tuple(sorted(pack.items())), ws))

    plan = C._Plan(types.SimpleNamespace(_execute_plan_at_index=execute), 0, (1, 2), 16,
                   C.PlanInfo("conv_fprop", "engine", True, 16, 0))
    return log, plan, cur


def test_replay_bookkeeping_records_at_the_second_call_and_replays_after(monkeypatch):
    log, plan, _ = _fake_replay_setup(monkeypatch)
    run = ("exec", ((1, 10), (2, 20)), 4096)
    C._execute(plan, [10, 20], 0)
    assert log == [run]  # first sight: a plain execute
    C._execute(plan, [10, 20], 0)
    assert log[1:] == ["begin", run, "end", "launch@0"]  # the repeat: recorded, then launched on the current stream
    del log[:]
    C._execute(plan, [10, 20], 0)
    assert log == ["launch@0"]  # later: the graph alone
    C._execute(plan, [10, 30], 0)
    assert log[1:] == [("exec", ((1, 10), (2, 30)), 4096)]  # other pointers: executed
    assert C.last_plan() is plan.info


def test_replay_bookkeeping_stays_out_of_captures_and_failures(monkeypatch):
    log, plan, cur = _fake_replay_setup(monkeypatch)
    C._capturing[0] = 1  # pylucid is capturing a CUDA graph: the execute goes into the user's graph
    for _ in range(3):
        C._execute(plan, [10, 20], 0)
    assert [e[0] for e in log] == ["exec"] * 3 and not plan.replays
    C._capturing[0] = 0
    del log[:]
    cur.capturing = True  # someone else captures the current stream: nothing recorded either
    for _ in range(3):
        C._execute(plan, [10, 20], 0)
    assert [e[0] for e in log] == ["exec"] * 3 and not plan.replays

    log, plan, _ = _fake_replay_setup(monkeypatch, fail_capture=True)
    for _ in range(3):
        C._execute(plan, [10, 20], 0)
    assert plan.replayable is False and not plan.replays
    assert [e if isinstance(e, str) else e[0] for e in log] == ["exec", "begin", "end", "exec", "exec"]
    assert any(k[0] == "replay" for k in C._failures)


def test_replay_bookkeeping_gives_up_when_pointers_churn(monkeypatch):
    log, plan, _ = _fake_replay_setup(monkeypatch)
    monkeypatch.setattr(C, "GRAPHS_PER_PLAN", 2)
    for _ in range(2):  # three pointer sets in turn, two kept: the first to come back would evict ...
        for p in (10, 11, 12):
            C._execute(plan, [p, 20], 0)
    assert len(plan.replays) == 2 and plan.dropped == 1
    for _ in range(2):  # the evicted set comes back twice: recorded again, evicting another
        for p in (10, 11, 12):
            C._execute(plan, [p, 20], 0)
    assert plan.replayable is False and not plan.replays  # ... and churning through its whole store stops it
    del log[:]
    C._execute(plan, [10, 20], 0)
    assert [e[0] for e in log] == ["exec"]


# --------------------------------------------------------------------------------------------------- helpers
def _cp():
    import cupy

    return cupy


def t2c(t):
    """A CuPy view of a CUDA torch tensor (bfloat16 through its 16-bit words)."""
    cp = _cp()
    if t.dtype == torch.bfloat16:
        return cp.from_dlpack(t.view(torch.int16)).view(BF16)
    return cp.from_dlpack(t)


def c2t(a):
    """A torch view of a CuPy array."""
    if a.dtype == BF16:
        return torch.from_dlpack(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_dlpack(a)


def _pl(t, requires_grad=False):
    """A pylucid CUDA tensor over the same memory as the torch tensor ``t``."""
    from pylucid._tensor import _new_tensor

    p = _new_tensor(t2c(t.detach()), pylucid.device("cuda"))
    if requires_grad:
        p.requires_grad_(True)
    return p


def _rand(shape, dtype, seed, layout="nchw", scale=1.0):
    """A CUDA tensor of ``shape`` in ``layout``: nchw, nhwc (channels last) or strided (every other pixel)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    nd = len(shape)
    if layout == "strided":
        big = shape[:-1] + (2 * shape[-1],)
        return (torch.randn(big, generator=g, device="cuda") * scale).to(dtype)[..., ::2]
    t = (torch.randn(shape, generator=g, device="cuda") * scale).to(dtype)
    if layout == "nhwc":
        perm = (0,) + tuple(range(2, nd)) + (1,)
        inv = [perm.index(i) for i in range(nd)]
        t = t.permute(perm).contiguous().permute(inv)
    return t


def _close(actual, ref, dtype, what):
    tol = TOL[dtype]
    scale = float(ref.abs().max()) or 1.0
    torch.testing.assert_close(actual.double(), ref.double(), rtol=tol, atol=tol * scale, msg=lambda m: f"{what}: {m}")


def _ref_conv(nd, x, w, stride, pads, dilation, groups):
    flat = []
    for lo, hi in reversed(pads):
        flat += [lo, hi]
    return getattr(F, f"conv{nd}d")(F.pad(x, flat), w, None, stride, 0, dilation, groups)


# nd, N, C, K, spatial, kernel, stride, pads ((lo, hi) per dim), dilation, groups
CONVS = [
    (2, 2, 8, 16, (9, 11), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    (2, 3, 8, 12, (10, 9), (3, 2), (2, 1), ((1, 2), (0, 1)), (1, 2), 4),
    (2, 2, 16, 16, (8, 8), (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2), 16),  # depthwise, dilated
    (1, 3, 6, 10, (37,), (5,), (2,), ((2, 2),), (1,), 2),
    (3, 2, 4, 6, (5, 6, 7), (3, 3, 2), (1, 2, 1), ((1, 1), (1, 0), (0, 1)), (1, 1, 2), 2),
]


def _conv_case(case, dtype, layout, seed=0):
    nd, n, c, k, sp, ker, stride, pads, dil, groups = case
    x = _rand((n, c) + sp, dtype, seed, layout)
    w = _rand((k, c // groups) + ker, dtype, seed + 1, "nchw", 0.3)
    y_ref = _ref_conv(nd, x.double(), w.double(), stride, pads, dil, groups)
    gy = _rand(tuple(y_ref.shape), dtype, seed + 2, layout)
    return x, w, gy


# ------------------------------------------------------------------------------------------------ convolution
@gpu_only
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{c[0]}d-g{c[-1]}-s{c[6]}")
def test_conv_matches_torch(case, dtype, layout):
    nd, _, _, _, _, _, stride, pads, dil, groups = case
    x, w, gy = _conv_case(case, dtype, layout)
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_()
    yd = _ref_conv(nd, xd, wd, stride, pads, dil, groups)
    gx_ref, gw_ref = torch.autograd.grad(yd, (xd, wd), gy.double())
    kw = dict(stride=stride, padding=pads, dilation=dil, groups=groups, allow_tf32=False)
    y = C.conv_forward(t2c(x), t2c(w), **kw)
    assert y is not None, C.failure("conv_fprop")
    assert y.dtype == t2c(x).dtype and y.shape == tuple(yd.shape)
    if layout == "nhwc" and y.shape[1] > 1:
        assert C.channels_last_layout(y.shape, y.strides, y.itemsize) == "nhwc"
    _close(c2t(y), yd.detach(), dtype, "forward")
    gx = C.conv_data_grad(t2c(gy), t2c(w), x.shape, **kw)
    assert gx is not None, C.failure("conv_dgrad")
    _close(c2t(gx), gx_ref, dtype, "input gradient")
    gw = C.conv_weight_grad(t2c(x), t2c(gy), w.shape, **kw)
    assert gw is not None, C.failure("conv_wgrad")
    assert gw.flags.c_contiguous
    _close(c2t(gw), gw_ref, dtype, "weight gradient")


@gpu_only
def test_conv_bias_fused_or_added():
    x, w, _ = _conv_case(CONVS[0], torch.bfloat16, "nhwc")
    b = _rand((16,), torch.bfloat16, 5)
    ref = _ref_conv(2, x.double(), w.double(), (1, 1), ((1, 1), (1, 1)), (1, 1), 1) + b.double().view(1, -1, 1, 1)
    y = C.conv_forward(t2c(x), t2c(w), 1, 1, 1, 1, bias=t2c(b))
    assert y is not None
    _close(c2t(y), ref, torch.bfloat16, "conv + bias")


@gpu_only
def test_conv_float64_is_declined():
    """cuDNN 9.19's float64 convolution graphs run but give wrong values here: float64 is left to the
    existing kernels (None), never answered wrongly."""
    x, w, gy = _conv_case(CONVS[0], torch.float64, "nchw")
    assert C.conv_forward(t2c(x), t2c(w), 1, 1, 1, 1) is None
    assert C.conv_data_grad(t2c(gy), t2c(w), x.shape, 1, 1, 1, 1) is None
    assert C.conv_weight_grad(t2c(x), t2c(gy), w.shape, 1, 1, 1, 1) is None


@gpu_only
def test_conv_tf32_is_a_choice():
    """``allow_tf32=False`` must hold float32 accuracy (the test above); allowed, TF32 stays within its precision."""
    x, w, _ = _conv_case(CONVS[0], torch.float32, "nchw")
    y = C.conv_forward(t2c(x), t2c(w), 1, 1, 1, 1, allow_tf32=True)
    assert y is not None
    ref = _ref_conv(2, x.double(), w.double(), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    torch.testing.assert_close(c2t(y).double(), ref, rtol=3e-3, atol=3e-3 * float(ref.abs().max()))


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("nd", [1, 2])
def test_conv_transpose_from_the_three_kernels(nd, dtype):
    """A transposed convolution is the data gradient of a convolution; its gradients are a convolution
    (input) and a weight gradient with the activations' roles swapped."""
    n, cin, cout, groups = 2, 8, 6, 2
    sp, ker, stride, pad, opad = ((7,), (4,), (3,), (1,), (2,)) if nd == 1 else ((5, 6), (3, 3), (2, 2), (1, 1), (1, 0))
    x = _rand((n, cin) + sp, dtype, 10)
    w = _rand((cin, cout // groups) + ker, dtype, 11, scale=0.3)
    fn = getattr(F, f"conv_transpose{nd}d")
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    yd = fn(xd, wd, None, stride, pad, opad, groups)
    gy = _rand(tuple(yd.shape), dtype, 12)
    gx_ref, gw_ref = torch.autograd.grad(yd, (xd, wd), gy.double())
    kw = dict(stride=stride, padding=pad, dilation=1, groups=groups, allow_tf32=False)
    y = C.conv_data_grad(t2c(x), t2c(w), tuple(yd.shape), **kw)
    assert y is not None, C.failure("conv_dgrad")
    _close(c2t(y), yd.detach(), dtype, "conv_transpose forward")
    gx = C.conv_forward(t2c(gy), t2c(w), **kw)
    _close(c2t(gx), gx_ref, dtype, "conv_transpose input gradient")
    gw = C.conv_weight_grad(t2c(gy), t2c(x), w.shape, **kw)
    _close(c2t(gw), gw_ref, dtype, "conv_transpose weight gradient")


@gpu_only
@pytest.mark.parametrize("dtype", [pylucid.float32, pylucid.bfloat16])
def test_conv_matches_pylucid_kernels(dtype):
    tdt = torch.float32 if dtype is pylucid.float32 else torch.bfloat16
    x = _rand((4, 12, 15, 13), tdt, 20)
    w = _rand((8, 6, 3, 3), tdt, 21, scale=0.3)
    gy_shape = (4, 8, 8, 7)
    gy = _rand(gy_shape, tdt, 22)
    px, pw = _pl(x, True), _pl(w, True)
    with pylucid.backends.cudnn.flags(enabled=False):  # the op's own (im2col) kernels
        py = pylucid.nn.functional.conv2d(px, pw, None, 2, 1, 1, 2)
        assert tuple(py.shape) == gy_shape
        py.backward(_pl(gy))
    kw = dict(stride=2, padding=1, dilation=1, groups=2, allow_tf32=False)
    y = C.conv_forward(t2c(x), t2c(w), **kw)
    gx = C.conv_data_grad(t2c(gy), t2c(w), x.shape, **kw)
    gw = C.conv_weight_grad(t2c(x), t2c(gy), w.shape, **kw)
    for name, mine, theirs in (("forward", y, py), ("input grad", gx, px.grad), ("weight grad", gw, pw.grad)):
        ref = c2t(theirs._data).double()
        _close(c2t(mine), ref, tdt, f"{name} vs pylucid")


@gpu_only
def test_conv_deterministic_choice_and_cache():
    x, w, gy = _conv_case(CONVS[1], torch.float32, "nchw")
    case = CONVS[1]
    kw = dict(stride=case[6], padding=case[7], dilation=case[8], groups=case[9])
    a = C.conv_weight_grad(t2c(x), t2c(gy), w.shape, deterministic=True, **kw)
    info = C.last_plan()
    assert a is not None and info.op == "conv_wgrad" and info.deterministic is True
    n_plans = len(C._plans)
    b = C.conv_weight_grad(t2c(x), t2c(gy), w.shape, deterministic=True, **kw)
    assert len(C._plans) == n_plans  # the second call reuses the built plan
    assert bool((a == b).all())  # bitwise: a deterministic engine
    C.conv_weight_grad(t2c(x), t2c(gy), w.shape, **kw)
    assert isinstance(C.last_plan().deterministic, bool)


@gpu_only
def test_conv_benchmark_picks_a_correct_engine():
    x, w, _ = _conv_case(CONVS[0], torch.bfloat16, "nhwc")
    y = C.conv_forward(t2c(x), t2c(w), 1, 1, 1, 1, benchmark=True)
    assert y is not None
    _close(c2t(y), _ref_conv(2, x.double(), w.double(), (1, 1), ((1, 1), (1, 1)), (1, 1), 1), torch.bfloat16,
           "benchmarked conv")


@gpu_only
def test_handle_follows_the_current_stream(monkeypatch):
    monkeypatch.setattr(C, "GRAPH_REPLAY", False)  # the binding is the plain execute's (a replay needs none)
    cp = _cp()
    x, w, _ = _conv_case(CONVS[0], torch.float32, "nchw")
    xc, wc = t2c(x), t2c(w)
    torch.cuda.synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        y = C.conv_forward(xc, wc, 1, 1, 1, 1, allow_tf32=False)
        assert C._mod.get_stream(C._handle(xc.device.id).handle) == stream.ptr
    stream.synchronize()
    _close(c2t(y), _ref_conv(2, x.double(), w.double(), (1, 1), ((1, 1), (1, 1)), (1, 1), 1), torch.float32,
           "conv on a side stream")


def _bits(a):
    return a.view(_cp().uint16 if a.itemsize == 2 else _cp().uint32)


@gpu_only
@pytest.mark.parametrize("on_side_stream", [False, True])
def test_repeated_executions_replay_a_recorded_graph(on_side_stream, monkeypatch):
    """The third execution with the same pointers launches the graph recorded at the second, not cuDNN's execute;
    the graph reads the arrays' memory when it runs (new values in the same arrays give new results) and gives the
    execute's bits."""
    import contextlib

    monkeypatch.setattr(C, "GRAPH_REPLAY", True)
    cp = _cp()
    x, w, gy = _conv_case(CONVS[0], torch.bfloat16, "nchw")
    xc, wc, gc = t2c(x), t2c(w), t2c(gy)
    kw = dict(stride=1, padding=1, dilation=1, groups=1, deterministic=True)
    C.clear_cache()
    stream = cp.cuda.Stream(non_blocking=True) if on_side_stream else contextlib.nullcontext()
    with stream:
        outs = {"conv_fprop": C.conv_forward(xc, wc, **kw), "conv_dgrad": C.conv_data_grad(gc, wc, xc.shape, **kw),
                "conv_wgrad": C.conv_weight_grad(xc, gc, wc.shape, **kw)}
        refs = {op: _bits(o).copy() for op, o in outs.items()}
        operands = {"conv_fprop": (xc, wc), "conv_dgrad": (gc, wc), "conv_wgrad": (xc, gc)}
        plans = {p.info.op: p for p in C._plans.values() if p is not None}
        assert sorted(plans) == sorted(outs)
        executes = []
        for op, plan in plans.items():  # count cuDNN's executes (a recording runs one too, inside the capture)
            plan.run = lambda *a, run=plan.run, op=op: (executes.append(op), run(*a))[1]

        def round_():
            # the same output arrays every time; the workspace is the same pool block (freed after each call)
            for op, (a, b) in operands.items():
                _bits(outs[op]).fill(0)  # (so a result is this round's)
                C._execute(plans[op], [a.data.ptr, b.data.ptr, outs[op].data.ptr], xc.device.id)

        round_()
        round_()  # seen before: recorded, then launched
        assert all(p.replays for p in plans.values())
        del executes[:]
        round_()
        assert executes == [], "the third round launches the recorded graphs alone"
        for op in outs:
            assert bool((_bits(outs[op]) == refs[op]).all()), op
        cp.cuda.get_current_stream().synchronize()
        x.mul_(2)  # new values at the same addresses (doubling is exact: so are the results' bits)
        gy.mul_(2)
        torch.cuda.synchronize()
        round_()
        assert executes == []
        cp.cuda.get_current_stream().synchronize()  # (torch reads the results on its own stream)
        for op in outs:
            want = c2t(refs[op].view(BF16)).float() * (4 if op == "conv_wgrad" else 2)
            assert torch.equal(c2t(outs[op]).float(), want), op


@gpu_only
def test_replay_switched_off_executes_every_call(monkeypatch):
    cp = _cp()
    x, w, _ = _conv_case(CONVS[0], torch.float32, "nchw")
    xc, wc = t2c(x), t2c(w)
    C.clear_cache()
    monkeypatch.setattr(C, "GRAPH_REPLAY", False)
    ref = C.conv_forward(xc, wc, 1, 1, 1, 1, allow_tf32=False).copy()
    for _ in range(3):
        out = C.conv_forward(xc, wc, 1, 1, 1, 1, allow_tf32=False)
        assert bool((out == ref).all())
        del out
    assert not any(p.replays for p in C._plans.values() if p is not None)
    cp.cuda.Device().synchronize()


@gpu_only
def test_conv_unsupported_gives_none():
    cp = _cp()
    x = cp.zeros((2, 4, 8, 8), cp.float32)
    assert C.conv_forward(x, cp.zeros((3, 3, 3, 3), cp.float32)) is None  # 4 channels vs 3 per group
    assert C.conv_forward(x.astype(cp.int32), cp.zeros((3, 4, 3, 3), cp.int32)) is None
    assert C.conv_forward(x, cp.zeros((3, 4, 9, 9), cp.float32)) is None  # kernel larger than the input


# -------------------------------------------------------------------------------------------------- attention
def _ref_attn(q, k, v, scale, causal=False, bias=None, keep=None, p=0.0):
    """float32 attention with the same inputs: (o, logsumexp of the scaled, masked scores)."""
    h, hk = q.shape[1], k.shape[1]
    if hk != h:
        k = k.repeat_interleave(h // hk, 1)
        v = v.repeat_interleave(h // hk, 1)
    s = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        s = s.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else s + bias
    if causal:
        lq, sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(lq, sk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1, keepdim=True)
    pr = torch.softmax(s, -1)
    if keep is not None:
        pr = pr * keep / (1.0 - p)
    return pr @ v, lse


def _qkv(b, h, hk, lq, s, e, dtype, seed, packed=False):
    if packed:  # q, k, v as views of one (B, T, 3, H, E) projection, as a GPT block makes them
        t = _rand((b, lq, 3, h, e), dtype, seed)
        q, k, v = t.permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v
    q = _rand((b, h, lq, e), dtype, seed)
    return q, _rand((b, hk, s, e), dtype, seed + 1), _rand((b, hk, s, e), dtype, seed + 2)


def _attn_close(actual, ref, dtype, what, tol=None):
    tol = tol or (4e-2 if dtype == torch.bfloat16 else 1e-2)
    scale = float(ref.abs().max()) or 1.0
    torch.testing.assert_close(actual.float(), ref.float(), rtol=tol, atol=tol * scale, msg=lambda m: f"{what}: {m}")


ATTN = [  # b, h, hk, L, S, E, causal, mask, packed
    (2, 4, 4, 128, 128, 64, True, None, False),
    (2, 4, 4, 100, 100, 64, True, None, True),  # T not a multiple of 64, q/k/v strided views of one buffer
    (2, 4, 2, 100, 77, 64, False, None, False),  # grouped-query, L != S
    (2, 4, 1, 64, 96, 128, True, None, False),  # multi-query, head dim 128
    (2, 4, 4, 70, 70, 64, False, "bool_b1ls", False),  # boolean mask broadcast over heads
    (2, 4, 4, 80, 48, 32, False, "bias_1hls", False),  # additive mask (with a gradient) broadcast over batch
    (1, 2, 2, 64, 64, 64, True, "bias_11ls", False),  # additive mask broadcast over batch and heads, + causal
]


def _mask(kind, b, h, lq, s, dtype, seed):
    if kind is None:
        return None
    g = torch.Generator(device="cuda").manual_seed(seed)
    if kind == "bool_b1ls":
        m = torch.rand((b, 1, lq, s), generator=g, device="cuda") > 0.3
        m[..., 0] = True  # no row fully masked
        return m
    shape = (1, h, lq, s) if kind == "bias_1hls" else (1, 1, lq, s)
    return (torch.randn(shape, generator=g, device="cuda") * 0.5).to(dtype)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ATTN, ids=lambda c: f"h{c[1]}k{c[2]}-L{c[3]}S{c[4]}E{c[5]}-c{int(c[6])}-{c[7]}")
def test_sdpa_matches_torch(case, dtype):
    b, h, hk, lq, s, e, causal, mkind, packed = case
    q, k, v = _qkv(b, h, hk, lq, s, e, dtype, 30, packed)
    mask = _mask(mkind, b, h, lq, s, dtype, 33)
    scale = 1.0 / e ** 0.5
    bias_grad = mask is not None and mask.dtype != torch.bool
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    mref = mask.detach().float().requires_grad_() if bias_grad else mask
    o_ref, lse_ref = _ref_attn(*leaves, scale, causal, mref)
    do = _rand(tuple(o_ref.shape), dtype, 34)
    refs = torch.autograd.grad(o_ref, leaves + ([mref] if bias_grad else []), do.float())
    cm = t2c(mask) if mask is not None else None
    out = C.sdpa_forward(t2c(q), t2c(k), t2c(v), scale=scale, causal=causal, bias=cm)
    assert out is not None, C.failure("sdpa_fwd")
    o, stats = out
    assert o.shape == (b, h, lq, e) and stats.shape == (b, h, lq, 1) and stats.dtype == np.float32
    _attn_close(c2t(o), o_ref, dtype, "output")
    torch.testing.assert_close(c2t(stats), lse_ref.detach(), rtol=1e-2, atol=1e-2)
    # PyTorch's own kernel on the same inputs
    tmask, tcausal = mask, causal
    if causal and mask is not None:  # PyTorch takes a mask or is_causal, not both: fold the causal part in
        tri = torch.ones(lq, s, dtype=torch.bool, device="cuda").triu(1)
        tmask, tcausal = mask.masked_fill(tri, float("-inf")), False
    o_torch = F.scaled_dot_product_attention(q, k, v, attn_mask=tmask, is_causal=tcausal, scale=scale,
                                             enable_gqa=hk != h)
    _attn_close(c2t(o), o_torch, dtype, "output vs torch sdpa")
    grads = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), stats, scale=scale, causal=causal, bias=cm,
                            bias_grad=bias_grad)
    assert grads is not None, C.failure("sdpa_bwd")
    dq, dk, dv, dbias = grads
    assert dk.shape == tuple(k.shape) and dv.shape == tuple(v.shape)
    for name, mine, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), refs):
        _attn_close(c2t(mine), ref, dtype, name)
    if bias_grad:
        assert dbias.shape == tuple(mask.shape)
        _attn_close(c2t(dbias), refs[3], dtype, "dbias")
    else:
        assert dbias is None


@gpu_only
def test_sdpa_matches_pylucid_kernels():
    q, k, v = _qkv(2, 4, 4, 96, 96, 64, torch.bfloat16, 40)
    do = _rand((2, 4, 96, 64), torch.bfloat16, 41)
    pq, pk, pv = (_pl(t, True) for t in (q, k, v))
    with pylucid.backends.cudnn.flags(enabled=False):  # the op's own kernels (the scores materialised)
        po = pylucid.nn.functional.scaled_dot_product_attention(pq, pk, pv, is_causal=True)
        po.backward(_pl(do))
    o, stats = C.sdpa_forward(t2c(q), t2c(k), t2c(v), causal=True)
    dq, dk, dv, _ = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), stats, causal=True)
    for name, mine, theirs in (("o", o, po), ("dq", dq, pq.grad), ("dk", dk, pk.grad), ("dv", dv, pv.grad)):
        _attn_close(c2t(mine), c2t(theirs._data), torch.bfloat16, f"{name} vs pylucid")


@gpu_only
def test_sdpa_dropout_is_seeded_and_replayed_by_the_backward():
    b, h, lq, e, p = 2, 4, 128, 64, 0.2
    q, k, v = _qkv(b, h, h, lq, lq, e, torch.bfloat16, 50)
    do = _rand((b, h, lq, e), torch.bfloat16, 51)
    scale = 1.0 / 8
    o1, st1, keep = C.sdpa_forward(t2c(q), t2c(k), t2c(v), scale=scale, causal=True, dropout_p=p, seed=7, offset=3,
                                   return_dropout_mask=True)
    o2, _ = C.sdpa_forward(t2c(q), t2c(k), t2c(v), scale=scale, causal=True, dropout_p=p, seed=7, offset=3)
    o3, _ = C.sdpa_forward(t2c(q), t2c(k), t2c(v), scale=scale, causal=True, dropout_p=p, seed=8, offset=3)
    assert bool((o1 == o2).all())  # same (seed, offset): the same mask
    assert not bool((o1 == o3).all())
    keep_t = c2t(keep)
    assert set(torch.unique(keep_t).tolist()) <= {0.0, 1.0}
    lower = torch.ones(lq, lq, dtype=torch.bool, device="cuda").tril()  # the positions attention reaches
    assert abs(float(keep_t[..., lower].mean()) - (1 - p)) < 0.02
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    o_ref, _ = _ref_attn(*leaves, scale, True, keep=keep_t, p=p)
    _attn_close(c2t(o1), o_ref, torch.bfloat16, "dropout output")
    refs = torch.autograd.grad(o_ref, leaves, do.float())
    grads = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o1, t2c(do), st1, scale=scale, causal=True, dropout_p=p, seed=7,
                            offset=3)
    assert grads is not None, C.failure("sdpa_bwd")
    for name, mine, ref in zip(("dq", "dk", "dv"), grads[:3], refs):
        _attn_close(c2t(mine), ref, torch.bfloat16, f"dropout {name}")


@gpu_only
def test_sdpa_deterministic_backward():
    q, k, v = _qkv(2, 4, 4, 256, 256, 64, torch.bfloat16, 60)
    do = _rand((2, 4, 256, 64), torch.bfloat16, 61)
    o, st = C.sdpa_forward(t2c(q), t2c(k), t2c(v), causal=True)
    first = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), st, causal=True, deterministic=True)
    assert first is not None, C.failure("sdpa_bwd")
    assert C.last_plan().op == "sdpa_bwd" and C.last_plan().deterministic is True
    again = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), st, causal=True, deterministic=True)
    for a, b in zip(first[:3], again[:3]):
        assert bool((a == b).all())
    C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), st, causal=True)
    assert C.last_plan().deterministic is False


@gpu_only
def test_sdpa_backward_writes_packed_gradients_as_one_buffer():
    """q, k, v as slices of one (B, T, 3, H, E) projection: dq, dk, dv come back as the slices of one
    new buffer laid out the same way (the same values as for separate copies of q, k, v), on the first
    call and on the remembered one; a GPT block's qkv gradient then needs no stacking copy."""
    cp = _cp()
    q, k, v = _qkv(2, 4, 4, 100, 100, 64, torch.bfloat16, 130, packed=True)
    do = _rand((2, 4, 100, 64), torch.bfloat16, 131)
    o, st = C.sdpa_forward(t2c(q), t2c(k), t2c(v), causal=True)
    for _ in range(2):  # built, then the remembered plan and layout
        dq, dk, dv = C.sdpa_backward(t2c(q), t2c(k), t2c(v), o, t2c(do), st, causal=True, deterministic=True)[:3]
        assert dq.strides == t2c(q).strides and dk.strides == dq.strides and dv.strides == dq.strides
        assert dk.data.ptr - dq.data.ptr == 4 * 64 * 2 and dv.data.ptr - dk.data.ptr == 4 * 64 * 2
    sep = [cp.ascontiguousarray(t2c(a)) for a in (q, k, v)]
    want = C.sdpa_backward(*sep, o, t2c(do), st, causal=True, deterministic=True)[:3]
    for a, b in zip((dq, dk, dv), want):
        _attn_close(c2t(a), c2t(b), torch.bfloat16, "packed against separate", tol=1e-2)
    x = _rand((2, 100, 3 * 256), torch.bfloat16, 132)
    xp = _pl(x, True)
    qp, kp, vp = xp.reshape(2, 100, 3, 4, 64).permute(2, 0, 3, 1, 4).unbind(0)
    y = pylucid.nn.functional.scaled_dot_product_attention(qp, kp, vp, is_causal=True)
    y.backward(_pl(do))
    xt = x.detach().float().requires_grad_()
    qt, kt, vt = xt.reshape(2, 100, 3, 4, 64).permute(2, 0, 3, 1, 4).unbind(0)
    o_ref, _ = _ref_attn(qt, kt, vt, 1 / 8, True)
    o_ref.backward(do.float())
    _attn_close(c2t(xp.grad._data), xt.grad, torch.bfloat16, "qkv gradient through unbind")


@gpu_only
def test_sdpa_unsupported_gives_none():
    cp = _cp()
    x = cp.zeros((1, 2, 16, 64), cp.float32)
    assert C.sdpa_forward(x, x, x) is None  # float32: no flash kernel
    y = cp.zeros((1, 3, 16, 64), cp.float16)
    z = cp.zeros((1, 2, 16, 64), cp.float16)
    assert C.sdpa_forward(z, y, y) is None  # 2 query heads over 3 key heads
    odd = cp.zeros((1, 2, 16, 3), cp.float16)
    assert C.sdpa_forward(odd, odd, odd) is None  # a head dim cuDNN refuses


# ------------------------------------------------------------------------------------- through the pylucid ops

def test_backend_switches_defaults_and_flags():
    cd = pylucid.backends.cudnn
    assert (cd.enabled, cd.benchmark, cd.deterministic, cd.allow_tf32) == (True, False, False, True)
    assert pylucid.backends.cuda.matmul.allow_tf32 is False
    with cd.flags(enabled=False, deterministic=True):
        assert cd.enabled is False and cd.deterministic is True and cd.benchmark is False
    assert cd.enabled is True and cd.deterministic is False
    assert cd.is_available() == C.is_available()


def _op_run(fn, inputs, gy):
    """fn(*inputs) and the gradients of every input, as float64 torch tensors."""
    ts = [_pl(t, True) for t in inputs]
    y = fn(*ts)
    y.backward(_pl(gy))
    return [c2t(y._data).double()] + [c2t(t.grad._data).double() for t in ts]


def _both_paths(fn, inputs, gy, op):
    """Run through cuDNN and through pylucid's own kernels; assert cuDNN ran (an ``op``... engine) the first
    time and never the second."""
    C._tls.info = None
    with pylucid.backends.cudnn.flags(allow_tf32=False):
        on = _op_run(fn, inputs, gy)
    assert C.last_plan() is not None and C.last_plan().op.startswith(op)
    C._tls.info = None
    with pylucid.backends.cudnn.flags(enabled=False):
        off = _op_run(fn, inputs, gy)
    assert C.last_plan() is None
    return on, off


CONV_OPS = [  # functional, x shape, w shape, kwargs
    ("conv1d", (3, 6, 37), (4, 3, 5), dict(stride=2, padding=2, groups=2)),
    ("conv2d", (2, 8, 11, 9), (6, 4, 3, 3), dict(stride=1, padding="same", dilation=2, groups=2)),
    ("conv3d", (2, 4, 5, 6, 7), (6, 4, 3, 3, 2), dict(stride=(1, 2, 1), padding=1)),
    ("conv_transpose2d", (2, 8, 5, 6), (8, 3, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose1d", (2, 6, 9), (6, 4, 4), dict(stride=3, padding=1)),
]


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name,xs,ws,kw", CONV_OPS, ids=[c[0] for c in CONV_OPS])
def test_conv_ops_with_cudnn_on_and_off(name, xs, ws, kw, dtype):
    fn = getattr(pylucid.nn.functional, name)
    x, w = _rand(xs, dtype, 70), _rand(ws, dtype, 71, scale=0.3)
    cout = ws[0] if not name.startswith("conv_transpose") else ws[1] * kw.get("groups", 1)
    b = _rand((cout,), dtype, 72)
    ref_y = getattr(F, name)(x.double(), w.double(), b.double(), **kw)
    gy = _rand(tuple(ref_y.shape), dtype, 73)
    on, off = _both_paths(lambda a, c, d: fn(a, c, d, **kw), (x, w, b), gy, "conv")
    xd, wd, bd = (t.double().requires_grad_() for t in (x, w, b))
    yd = getattr(F, name)(xd, wd, bd, **kw)
    refs = [yd.detach()] + list(torch.autograd.grad(yd, (xd, wd, bd), gy.double()))
    for what, a, r, o in zip(("output", "dx", "dw", "db"), on, refs, off):
        _close(a, r, dtype, f"{name} cuDNN {what} vs torch")
        _close(o, r, dtype, f"{name} pylucid kernels {what} vs torch")


@gpu_only
def test_conv_channels_last_input_keeps_its_layout():
    x = _rand((4, 8, 12, 12), torch.bfloat16, 80, "nhwc")
    w = _rand((16, 8, 3, 3), torch.bfloat16, 81, scale=0.3)
    y = pylucid.nn.functional.conv2d(_pl(x), _pl(w), None, 1, 1)
    assert C.channels_last_layout(y._data.shape, y._data.strides, 2) == "nhwc"
    _close(c2t(y._data), F.conv2d(x.double(), w.double(), padding=1), torch.bfloat16, "channels-last conv2d")


@gpu_only
def test_conv_double_backward_runs_the_graph_formula():
    """create_graph=True: cuDNN's forward, then the graph formula, so the second derivative is exact."""
    x, w = _rand((2, 3, 9, 9), torch.float32, 90), _rand((4, 3, 3, 3), torch.float32, 91, scale=0.3)
    px, pw = _pl(x, True), _pl(w, True)
    with pylucid.backends.cudnn.flags(allow_tf32=False):
        y = pylucid.nn.functional.conv2d(px, pw, None, 1, 1)
        assert C.last_plan().op == "conv_fprop"
        (gx,) = pylucid.autograd.grad((y * y).sum(), px, create_graph=True)
        (gx * gx).sum().backward()
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    yd = F.conv2d(xd, wd, padding=1)
    (gxd,) = torch.autograd.grad((yd * yd).sum(), xd, create_graph=True)
    (gxd * gxd).sum().backward()
    _close(c2t(gx._data), gxd.detach(), torch.float32, "first derivative")
    _close(c2t(pw.grad._data), wd.grad, torch.float32, "second derivative (weight)")
    _close(c2t(px.grad._data), xd.grad, torch.float32, "second derivative (input)")


@gpu_only
def test_deterministic_algorithms_choose_deterministic_engines():
    x, w, gy = _conv_case(CONVS[0], torch.bfloat16, "nhwc")
    px, pw = _pl(x, True), _pl(w, True)
    pylucid.use_deterministic_algorithms(True)
    try:
        y = pylucid.nn.functional.conv2d(px, pw, None, 1, 1)
        y.backward(_pl(gy))
        assert C.last_plan().deterministic is True
        q, k, v = (_pl(t, True) for t in _qkv(2, 4, 4, 128, 128, 64, torch.bfloat16, 95))
        nn_ops.sdpa_op(q, k, v, causal=True).backward(_pl(_rand((2, 4, 128, 64), torch.bfloat16, 96)))
        assert C.last_plan().op == "sdpa_bwd" and C.last_plan().deterministic is True
    finally:
        pylucid.use_deterministic_algorithms(False)


def _sdpa_paths(q, k, v, do, **kw):
    """pylucid's scaled_dot_product_attention with cuDNN on and off: [o, dq, dk, dv] of each."""
    fn = pylucid.nn.functional.scaled_dot_product_attention
    return _both_paths(lambda a, b, c: fn(a, b, c, **kw), (q, k, v), do, "sdpa")


@gpu_only
@pytest.mark.parametrize("kw", [dict(is_causal=True), dict(), dict(scale=0.3)], ids=["causal", "plain", "scale"])
def test_sdpa_op_with_cudnn_on_and_off(kw):
    q, k, v = _qkv(2, 4, 4, 100, 100, 64, torch.bfloat16, 100, packed=True)
    do = _rand((2, 4, 100, 64), torch.bfloat16, 101)
    on, off = _sdpa_paths(q, k, v, do, **kw)
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    o_ref, _ = _ref_attn(*leaves, kw.get("scale", 1 / 8), kw.get("is_causal", False))
    refs = [o_ref.detach()] + list(torch.autograd.grad(o_ref, leaves, do.float()))
    for what, a, r, o in zip(("o", "dq", "dk", "dv"), on, refs, off):
        _attn_close(a, r, torch.bfloat16, f"cuDNN {what}")
        _attn_close(o, r, torch.bfloat16, f"pylucid kernels {what}")


@gpu_only
def test_sdpa_op_native_causal_flag():
    """The op's own ``causal`` (no materialised mask) gives what the functional's masked path gives."""
    q, k, v = _qkv(1, 2, 2, 96, 96, 64, torch.bfloat16, 110)
    do = _rand((1, 2, 96, 64), torch.bfloat16, 111)
    on, off = _both_paths(lambda a, b, c: nn_ops.sdpa_op(a, b, c, scale=0.125, causal=True), (q, k, v), do, "sdpa")
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    o_ref, _ = _ref_attn(*leaves, 0.125, True)
    refs = [o_ref.detach()] + list(torch.autograd.grad(o_ref, leaves, do.float()))
    for what, a, r, o in zip(("o", "dq", "dk", "dv"), on, refs, off):
        _attn_close(a, r, torch.bfloat16, f"cuDNN {what}")
        _attn_close(o, r, torch.bfloat16, f"pylucid kernels {what}")


@gpu_only
def test_matmul_allow_tf32_is_honoured():
    a, b = _rand((256, 512), torch.float32, 120), _rand((512, 256), torch.float32, 121)
    ref = a.double() @ b.double()
    pa, pb = _pl(a), _pl(b)
    exact = c2t((pa @ pb)._data).double()
    pylucid.backends.cuda.matmul.allow_tf32 = True
    try:
        fast = c2t((pa @ pb)._data).double()
    finally:
        pylucid.backends.cuda.matmul.allow_tf32 = False
    scale = float(ref.abs().max())
    assert float((exact - ref).abs().max()) < 1e-5 * scale
    assert float((fast - ref).abs().max()) > 3e-5 * scale  # inputs rounded to TF32's 10-bit mantissa
    assert float((fast - ref).abs().max()) < 1e-2 * scale
