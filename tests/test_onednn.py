"""The oneDNN path of the CPU backend (``pylucid.backend.onednn``): convolutions, transposed convolutions and
their gradients through oneDNN, against PyTorch (values and gradients from the same inputs) and against
pylucid's own GEMM kernels (``pylucid.backends.mkldnn.enabled = False``). The library is the ``onednn``
extra; without it the library tests skip and the availability contract is still checked.
"""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

import pylucid
import pylucid.backends
from pylucid.backend import onednn as D

HAVE = D.is_available()
needs_onednn = pytest.mark.skipif(not HAVE, reason=f"no oneDNN here ({D.unavailable_reason()})")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bf16_taken() -> bool:
    """Whether oneDNN has optimised bfloat16 kernels on this processor (it declines its reference ones)."""
    a = np.ones((64, 64), BF16)
    x, w = np.ones((1, 16, 4, 4), BF16), np.ones((16, 16, 3, 3), BF16)
    return HAVE and D.matmul(a, a, np.float32) is not None and \
        D.conv_forward(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 1) is not None


def _skip_without_bf16(dtype):
    if dtype == "bfloat16" and not _bf16_taken():
        pytest.skip("oneDNN has no optimised bfloat16 kernels on this processor (the GEMM path runs)")
TOL = {"float32": 2e-5, "bfloat16": 2e-2}


def test_availability_never_raises():
    ok = D.is_available()
    assert isinstance(ok, bool) and ok == pylucid.backends.mkldnn.is_available()
    assert (D.unavailable_reason() == "") == ok
    assert (D.version() is None) == (not ok)


def test_import_loads_no_library():
    code = ("import pylucid, pylucid.backend.onednn as d; x = pylucid.ones(2, 2) + 1; "
            "print(d._state['lib'] is None, d._state['reason'] is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_switch_restores():
    m = pylucid.backends.mkldnn
    assert m.enabled is True
    with m.flags(enabled=False):
        assert m.enabled is False
    assert m.enabled is True


# (dims, N, C, O, size, kernel, stride, padding, dilation, groups, bias)
CONVS = [
    (2, 2, 16, 32, 9, 3, 1, 1, 1, 1, True),
    (2, 3, 32, 16, 10, 3, 2, 1, 1, 1, False),
    (2, 2, 32, 32, 11, 3, 1, 2, 2, 2, True),
    (2, 2, 64, 64, 6, 1, 2, 0, 1, 1, False),
    (2, 2, 16, 48, 7, 3, 1, "same", 1, 1, True),
    (2, 2, 16, 16, 8, 4, 1, "same", 1, 1, False),  # an even kernel: uneven padding
    (1, 3, 16, 24, 13, 5, 2, 2, 1, 1, True),
    (1, 2, 32, 32, 12, 3, 1, 2, 2, 4, False),
    (3, 2, 16, 16, 5, 3, 1, 1, 1, 1, True),
    (3, 1, 32, 16, 6, 2, 2, 0, 1, 2, False),
    (2, 4, 3, 32, 16, 4, 2, 1, 1, 1, False),  # an image's first layer (DCGAN's discriminator)
    (2, 3, 1, 8, 12, 3, 1, 0, 1, 1, False),  # one channel (MNIST): weight gradient on the GEMM path
]


def _data(cfg, transposed=False, seed=0):
    nd, n, c, o, size, k, stride, pad, dil, groups, bias = cfg
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + (size,) * nd).astype(np.float32)
    wshape = (c, o // groups) if transposed else (o, c // groups)
    w = (rng.standard_normal(wshape + (k,) * nd) / np.sqrt(c * k ** nd)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    return x, w, b


def _run(lib, fn_name, x, w, b, dtype, **kw):
    """(output, dx, dw, db) of one convolution call with a fixed output gradient, as float64 NumPy arrays."""
    if lib is torch:
        dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
        mk = lambda a: torch.tensor(a).to(dt).requires_grad_()  # noqa: E731
        out_np = lambda t: t.detach().float().numpy().astype(np.float64)  # noqa: E731
    else:
        dt = {"float32": pylucid.float32, "bfloat16": pylucid.bfloat16}[dtype]
        mk = lambda a: pylucid.tensor(a).to(dt).requires_grad_()  # noqa: E731
        out_np = lambda t: t.detach().float().numpy().astype(np.float64)  # noqa: E731
    tx, tw = mk(x), mk(w)
    tb = mk(b) if b is not None else None
    y = getattr(lib.nn.functional, fn_name)(tx, tw, tb, **kw)
    gy = np.cos(np.arange(int(np.prod(y.shape)))).reshape(tuple(y.shape)).astype(np.float32)
    y.backward(mk(gy).detach())
    return [out_np(y), out_np(tx.grad), out_np(tw.grad)] + ([out_np(tb.grad)] if b is not None else [])


def _compare(got, want, tol, what):
    for i, (a, r) in enumerate(zip(got, want)):
        scale = max(np.abs(r).max(), 1e-6)
        err = np.abs(a - r).max() / scale
        assert err <= tol, f"{what} output {i}: relative error {err:.2e} > {tol:.0e}"


def _kw(cfg, transposed=False, output_padding=0):
    nd, n, c, o, size, k, stride, pad, dil, groups, bias = cfg
    kw = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups}
    if transposed:
        kw["output_padding"] = output_padding
    return kw


def _plans_ran(fn):
    """``fn()`` and the oneDNN plans it ran (new or cached hits: plans made or found, not
    declined)."""
    calls = []
    orig = D._execute

    def spy(plan, arrays):
        calls.append(plan)
        return orig(plan, arrays)

    D._execute = spy
    try:
        out = fn()
    finally:
        D._execute = orig
    return out, calls


def _plans_used(fn):
    """How many oneDNN primitives ``fn`` ran that were new or cached hits (plans made or found, not declined)."""
    out, calls = _plans_ran(fn)
    return out, len(calls)


def _plan_kind(plan) -> str:
    """The kind of a cached plan: its key's first item ("fwd", "bwd_data", "bwd_weights", ...)."""
    return next(k[0] for k, v in D._plans.items() if v is plan)


@needs_onednn
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cfg", CONVS, ids=lambda c: "-".join(map(str, c)))
def test_convolution_against_torch_and_gemm_path(cfg, dtype):
    _skip_without_bf16(dtype)
    nd = cfg[0]
    x, w, b = _data(cfg)
    name = f"conv{nd}d"
    got, plans = _plans_ran(lambda: _run(pylucid, name, x, w, b, dtype, **_kw(cfg)))
    kinds = sorted(_plan_kind(p) for p in plans)
    per_group = cfg[2] // cfg[9]
    if per_group >= D._MIN_CHANNELS:  # forward, data and weight gradient
        assert kinds == ["bwd_data", "bwd_weights", "fwd"], kinds
    else:
        # fewer than 16 channels per group: the data gradient always; the forward and the weight
        # gradient only through the implementations measured faster than the GEMM path (which runs
        # them otherwise), and the weight gradient from 2 channels
        assert "bwd_data" in kinds, kinds
        for p in plans:
            if _plan_kind(p) != "bwd_data":
                assert p.impl in D._FEW_CHANNEL_IMPLS, p.impl
        if per_group < D._MIN_WGRAD_CHANNELS:
            assert "bwd_weights" not in kinds, kinds
    want = _run(torch, name, x, w, b, dtype, **_kw(cfg))
    _compare(got, want, TOL[dtype], f"{name} {dtype} vs torch")
    with pylucid.backends.mkldnn.flags(enabled=False):
        gemm, used = _plans_used(lambda: _run(pylucid, name, x, w, b, dtype, **_kw(cfg)))
    assert used == 0
    _compare(got, gemm, TOL[dtype], f"{name} {dtype} vs the GEMM path")


TRANSPOSED = [
    ((2, 2, 32, 16, 7, 4, 2, 1, 1, 1, True), 0),
    ((2, 2, 32, 32, 6, 3, 2, 1, 1, 2, False), 1),
    ((2, 2, 64, 3, 8, 4, 2, 1, 1, 1, True), 0),  # a generator's last layer: 3 output channels
    ((1, 2, 16, 32, 9, 5, 3, 2, 1, 1, True), 2),
    ((3, 1, 16, 16, 4, 3, 2, 1, 1, 1, False), 1),
]


@needs_onednn
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cfg,opad", TRANSPOSED, ids=lambda c: "-".join(map(str, c)) if isinstance(c, tuple) else str(c))
def test_transposed_convolution(cfg, opad, dtype):
    _skip_without_bf16(dtype)
    nd = cfg[0]
    x, w, b = _data(cfg, transposed=True)
    name = f"conv_transpose{nd}d"
    kw = _kw(cfg, True, opad)
    got, used = _plans_used(lambda: _run(pylucid, name, x, w, b, dtype, **kw))
    assert used >= 1
    _compare(got, _run(torch, name, x, w, b, dtype, **kw), TOL[dtype], f"{name} {dtype} vs torch")
    with pylucid.backends.mkldnn.flags(enabled=False):
        gemm = _run(pylucid, name, x, w, b, dtype, **kw)
    _compare(got, gemm, TOL[dtype], f"{name} {dtype} vs the GEMM path")


@needs_onednn
def test_declined_cases_run_the_gemm_path():
    rng = np.random.default_rng(3)
    # float64: no oneDNN convolution
    x64 = rng.standard_normal((2, 16, 5, 5))
    w64 = rng.standard_normal((8, 16, 3, 3))
    assert D.conv_forward(x64, w64, (1, 1), ((1, 1), (1, 1)), (1, 1), 1) is None
    # an image's first layer (3 input channels): taken only by the implementations measured faster
    # than the channels-first im2col (AVX2's); with one channel the weight gradient is always the
    # GEMM path's
    x3 = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w3 = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    y3 = D.conv_forward(x3, w3, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    key = next(k for k in D._plans if k[0] == "fwd" and k[1] == x3.shape and k[2] == w3.shape)
    plan = D._plans[key]
    assert (y3 is None) == (plan is None)
    assert plan is None or plan.impl in D._FEW_CHANNEL_IMPLS
    x1, g1 = x3[:, :1].copy(), rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    assert D.conv_weight_grad(x1, g1, (16, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1) is None
    with pytest.MonkeyPatch.context() as mp:  # an implementation outside the list: declined
        mp.setattr(D, "_FEW_CHANNEL_IMPLS", ())
        x5 = rng.standard_normal((2, 5, 8, 8)).astype(np.float32)
        w5 = w3[:, :1].repeat(5, 1)
        assert D.conv_forward(x5, w5, (1, 1), ((1, 1), (1, 1)), (1, 1), 1) is None
    # and the ops still agree with torch there
    for x, w in ((x64, w64), (x3, w3)):
        got = pylucid.nn.functional.conv2d(pylucid.tensor(x), pylucid.tensor(w), padding=1).numpy()
        want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_second_order_gradients_through_a_onednn_convolution():
    # the first-order backward runs oneDNN; create_graph=True takes the graph formula, differentiable again
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 6, 6)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    res = []
    for lib in (pylucid, torch):
        tx, tw = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(tx, tw, padding=1)
        (gx,) = lib.autograd.grad((y * y).sum(), tx, create_graph=True)
        (gw,) = lib.autograd.grad((gx * gx).sum(), tw)
        res.append((gx.detach().numpy(), gw.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


@needs_onednn
def test_thread_count_follows_set_num_threads():
    rng = np.random.default_rng(5)
    x = pylucid.tensor(rng.standard_normal((4, 32, 12, 12)).astype(np.float32))
    w = pylucid.tensor(rng.standard_normal((32, 32, 3, 3)).astype(np.float32))
    n = pylucid.get_num_threads()
    try:
        pylucid.set_num_threads(1)
        one = pylucid.nn.functional.conv2d(x, w, padding=1).numpy()
    finally:
        pylucid.set_num_threads(n)
    many = pylucid.nn.functional.conv2d(x, w, padding=1).numpy()
    np.testing.assert_allclose(one, many, rtol=1e-5, atol=1e-4)


@needs_onednn
def test_non_contiguous_inputs():
    rng = np.random.default_rng(6)
    xs = rng.standard_normal((2, 9, 32, 40)).astype(np.float32)
    ws = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    x = pylucid.tensor(xs).permute(0, 2, 1, 3)[:, :, :, ::2]  # (2, 32, 9, 20), strided
    w = pylucid.tensor(ws)
    got = pylucid.nn.functional.conv2d(x, w, padding=1).numpy()
    tx = torch.tensor(xs).permute(0, 2, 1, 3)[:, :, :, ::2]
    want = torch.nn.functional.conv2d(tx, torch.tensor(ws), padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@needs_onednn
def test_bfloat16_inputs_are_bfloat16_outputs():
    x = pylucid.randn(2, 16, 6, 6, dtype=pylucid.bfloat16)
    w = pylucid.randn(8, 16, 3, 3, dtype=pylucid.bfloat16)
    y = pylucid.nn.functional.conv2d(x, w)
    assert y.dtype == pylucid.bfloat16 and y._data.dtype == BF16


# ------------------------------------------------------------------------------------------ bfloat16 GEMMs
def _bf16(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


@needs_onednn
@pytest.mark.parametrize("case", ["2d", "3d-lead", "a-transposed", "b-transposed"])
def test_bfloat16_matmul_against_torch(case):
    _skip_without_bf16("bfloat16")
    rng = np.random.default_rng(7)
    a, b = _bf16(rng, 96, 80), _bf16(rng, 80, 72)
    if case == "3d-lead":
        a = _bf16(rng, 4, 24, 80)
    pa, pb = pylucid.tensor(a.astype(np.float32)).to(pylucid.bfloat16), pylucid.tensor(b.astype(np.float32)).to(pylucid.bfloat16)
    ta, tb = torch.tensor(a.astype(np.float32)).bfloat16(), torch.tensor(b.astype(np.float32)).bfloat16()
    if case == "a-transposed":
        pa, ta = pa.T.contiguous().T, ta.T.contiguous().T  # column-major a
    if case == "b-transposed":
        pb, tb = pb.T.contiguous().T, tb.T.contiguous().T
    got, used = _plans_used(lambda: pa @ pb)
    assert used == 1 and got.dtype == pylucid.bfloat16
    want = (ta @ tb).float().numpy()
    ref = (ta.double() @ tb.double()).numpy()
    g = got.float().numpy()
    # exact products, float32 accumulation, one rounding: within one bfloat16 step of the exact value
    assert np.all(np.abs(g - ref) <= np.abs(ref) * 2 ** -8 + 1e-3)
    assert np.mean(g == want) > 0.99


@needs_onednn
@pytest.mark.parametrize("bias_dtype", ["float32", "bfloat16", None])
def test_linear_under_bfloat16_autocast(bias_dtype):
    _skip_without_bf16("bfloat16")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 32, 64)).astype(np.float32)
    w = (rng.standard_normal((96, 64)) / 8).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    res = []
    for lib in (pylucid, torch):
        tx, tw = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        tb = lib.tensor(b).to(getattr(lib, bias_dtype)).requires_grad_() if bias_dtype else None
        ac = pylucid.amp.autocast("cpu", dtype=pylucid.bfloat16) if lib is pylucid else \
            torch.autocast("cpu", dtype=torch.bfloat16)
        with ac:
            y = lib.nn.functional.linear(tx, tw, tb)
        y.float().pow(2).sum().backward()
        res.append([y.detach().float().numpy(), tx.grad.numpy(), tw.grad.numpy()])
    (y, gx, gw), (ty, tgx, tgw) = res
    np.testing.assert_array_equal(y, ty)  # the bias rounded to bfloat16 and added inside the GEMM, as PyTorch
    # the gradients are float32 GEMM outputs here, PyTorch's are first rounded to bfloat16 (docs/semantics.md)
    for a, r in ((gx, tgx), (gw, tgw)):
        np.testing.assert_allclose(a, r, rtol=2e-2, atol=2e-2 * np.abs(r).max())


@needs_onednn
def test_small_bfloat16_products_stay_on_the_float32_gemm():
    a = pylucid.ones(4, 8, dtype=pylucid.bfloat16)
    out, used = _plans_used(lambda: a @ a.T)
    assert used == 0 and out.dtype == pylucid.bfloat16 and float(out[0, 0]) == 8.0
    with pylucid.backends.mkldnn.flags(enabled=False):
        big = pylucid.ones(128, 128, dtype=pylucid.bfloat16)
        out, used = _plans_used(lambda: big @ big)
    assert used == 0 and float(out[0, 0]) == 128.0


def _attention(lib, q, k, v, causal, dtype):
    ts = [lib.tensor(a).to(getattr(lib, dtype)).requires_grad_() for a in (q, k, v)]
    o = lib.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
    g = np.cos(np.arange(o.numel())).reshape(tuple(o.shape))
    o.backward(lib.tensor(g).to(o.dtype))
    return [o.detach().float().numpy()] + [t.grad.float().numpy() for t in ts]


@needs_onednn
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("lengths", [(200, 200), (130, 70)])
def test_bfloat16_attention_through_onednn(causal, lengths):
    """bfloat16 attention on the CPU with oneDNN's bfloat16 GEMMs (query blocks of 128, so several blocks and a
    ragged last one): PyTorch's values and gradients, and the float32-GEMM path's to summation order."""
    _skip_without_bf16("bfloat16")
    lq, ls = lengths
    r = np.random.default_rng(lq + ls)
    q, k, v = (r.standard_normal((2, 3, n, 64)) for n in (lq, ls, ls))
    got, used = _plans_used(lambda: _attention(pylucid, q, k, v, causal, "bfloat16"))
    assert used > 0  # the products went through oneDNN
    with pylucid.backends.mkldnn.flags(enabled=False):
        portable, used_off = _plans_used(lambda: _attention(pylucid, q, k, v, causal, "bfloat16"))
    assert used_off == 0
    want = _attention(torch, q, k, v, causal, "bfloat16")
    for a, p, w in zip(got, portable, want):
        scale = np.abs(w).max()
        np.testing.assert_allclose(a, w, rtol=0, atol=3e-2 * scale)
        np.testing.assert_allclose(a, p, rtol=0, atol=1e-2 * scale)
