"""The CPU backend's fast activation paths against PyTorch (the oracle) and against the portable
versions they replace: GELU through oneDNN's eltwise kernels (and, with oneDNN off, the NumPy
Abramowitz-Stegun kernel with either exponential), relu against a cached zero block, the in-place
leaky relu that saves its output. Values and gradients, float32 and float64, NaN and the
infinities, sizes that are not a whole number of blocks, non-contiguous inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import pylucid
import pylucid.backends
from pylucid.backend import onednn as D
from pylucid.backend.base import ArrayBackend
from pylucid.backend.cpu import CPUBackend

needs_onednn = pytest.mark.skipif(not D.is_available(), reason="no oneDNN here")
SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30, -1e-30, 5.5, -5.5, 30.0, -30.0, 1e20, -1e20]


def _inputs(n, dtype, seed=0):
    r = np.random.default_rng(seed)
    x = np.concatenate([SPECIAL, r.standard_normal(max(0, n - len(SPECIAL))) * 4])[:n].astype(dtype)
    return x, r.standard_normal(n).astype(dtype)


def _gelu_pair(x, g, approximate="none", view=None):
    """(pylucid, torch) ``(y, dx)`` of gelu on ``x`` with the seed gradient ``g`` (``view``: applied
    to both first, e.g. a transposing slice)."""
    out = []
    for lib in (pylucid, torch):
        t = lib.tensor(x).requires_grad_()
        v = t if view is None else view(t)
        y = lib.nn.functional.gelu(v, approximate=approximate)
        y.backward(lib.tensor(g).reshape(y.shape) if view is None else view(lib.tensor(g)))
        out.append((y.detach().float().numpy(), t.grad.float().numpy()))
    if approximate == "none":
        # PyTorch's vectorised float32 erf gives NaN at +inf on AVX-512 machines (+inf on AVX2); pylucid gives
        # x Phi(x) = +inf on every machine (docs/semantics.md)
        xv = x if view is None else view(torch.tensor(x)).numpy()
        out[1][0][np.isposinf(xv)] = np.inf
    return out


def _assert_close(a, b, tol):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


# ------------------------------------------------------------------------------------------ GELU
@needs_onednn
@pytest.mark.parametrize("n", [1, 7, 4099, 70001])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_through_onednn_matches_torch(n, approximate):
    x, g = _inputs(n, np.float32)
    (y, dx), (ty, tdx) = _gelu_pair(x, g, approximate)
    if approximate == "none":  # PyTorch's float32 values bit for bit on AVX2; a few ulp elsewhere
        _assert_close(y, ty, 1e-6)
        _assert_close(dx, tdx, 2e-6)
    else:
        _assert_close(y, ty, 2e-6)
        _assert_close(dx, tdx, 4e-6)


@needs_onednn
def test_gelu_through_onednn_runs_the_library_and_no_derivative_buffer():
    x, g = _inputs(CPUBackend._LIBRARY_GELU_MIN, np.float32)  # the smallest size oneDNN takes
    calls = []
    orig = D._execute

    def spy(plan, arrays):
        calls.append(next(k for k, v in D._plans.items() if v is plan))
        return orig(plan, arrays)

    D._execute = spy
    try:
        t = pylucid.tensor(x).requires_grad_()
        y = pylucid.nn.functional.gelu(t)
        y.backward(pylucid.tensor(g))
    finally:
        D._execute = orig
    assert [k[:3] for k in calls] == [("eltwise", "fwd", "gelu_erf"),
                                      ("eltwise", "bwd", "gelu_erf")]
    assert y._data.base is None  # the library writes no derivative next to the output
    calls.clear()
    D._execute = spy
    try:  # one value fewer: the NumPy kernel (a library call costs more than it saves there)
        t = pylucid.tensor(x[1:]).requires_grad_()
        pylucid.nn.functional.gelu(t).backward(pylucid.tensor(g[1:]))
    finally:
        D._execute = orig
    assert calls == []


@pytest.mark.parametrize("exp2", [False, True])
@pytest.mark.parametrize("n", [7, 70001])
def test_gelu_numpy_kernel_matches_torch(n, exp2, monkeypatch):
    # oneDNN off: the blocked Abramowitz-Stegun kernel, with exp or exp2 for the density (the
    # backend picks one by the processor's SIMD loops; both give float32's accuracy)
    monkeypatch.setattr(CPUBackend, "_gelu_exp2", exp2)
    x, g = _inputs(n, np.float32)
    with pylucid.backends.mkldnn.flags(enabled=False):
        (y, dx), _ = _gelu_pair(x, g)
        with pylucid.no_grad():
            plain = pylucid.nn.functional.gelu(pylucid.tensor(x)).numpy()
    want = _gelu_pair(x.astype(np.float64), g.astype(np.float64))[1]
    _assert_close(y, want[0], 1e-6)
    _assert_close(dx, want[1], 2e-6)
    np.testing.assert_array_equal(plain, y)  # with and without the derivative written next to it


def test_gelu_numpy_kernel_threads_and_a_short_last_block(monkeypatch):
    be = pylucid.tensor([1.0]).device.backend
    x, g = _inputs(3 * ArrayBackend._GELU_BLOCK + 5, np.float32)
    one = ArrayBackend._gelu_f32(be, x)
    monkeypatch.setattr(CPUBackend, "_PAR_MIN", 1)  # every block count split across the threads
    old = pylucid.get_num_threads()
    pylucid.set_num_threads(2)
    try:
        np.testing.assert_array_equal(ArrayBackend._gelu_f32(be, x), one)
        np.testing.assert_array_equal(ArrayBackend._gelu_f32(be, x, g),
                                      ArrayBackend.gelu_backward(be, g, x))
    finally:
        pylucid.set_num_threads(old)


@pytest.mark.parametrize("onednn", [True, False])
def test_gelu_non_contiguous_and_float64_and_half(onednn):
    if onednn and not D.is_available():
        pytest.skip("no oneDNN here")
    x, g = _inputs(60 * 70, np.float32)
    x, g = x.reshape(60, 70), g.reshape(60, 70)
    with pylucid.backends.mkldnn.flags(enabled=onednn):
        got, want = _gelu_pair(x, g, view=lambda t: t.t()[3:50:2])
        _assert_close(got[0], want[0], 2e-6)
        _assert_close(got[1], want[1], 2e-6)
        got, want = _gelu_pair(x.astype(np.float64), g.astype(np.float64))  # scipy's erf
        _assert_close(got[0], want[0], 1e-12)
        _assert_close(got[1], want[1], 1e-12)
        for half in (np.float16, ml_dtypes.bfloat16):  # computed in float32, rounded once
            xh = x[:8].astype(half)
            y = pylucid.nn.functional.gelu(pylucid.tensor(xh))
            assert y.dtype.name == np.dtype(half).name
            ref = torch.nn.functional.gelu(torch.tensor(xh.astype(np.float32))).numpy()
            ref[np.isposinf(xh.astype(np.float32))] = np.inf  # (PyTorch's NaN at +inf on AVX-512: see _gelu_pair)
            ref = ref.astype(half)
            _assert_close(y.float().numpy(), ref.astype(np.float32), 1e-2)


@pytest.mark.parametrize("onednn", [True, False])
def test_gelu_second_derivative_takes_the_graph_formula(onednn):
    if onednn and not D.is_available():
        pytest.skip("no oneDNN here")
    x = np.linspace(-4, 4, 41)
    with pylucid.backends.mkldnn.flags(enabled=onednn):
        for dtype in (np.float32, np.float64):
            t = pylucid.tensor(x.astype(dtype)).requires_grad_()
            tt = torch.tensor(x.astype(dtype)).requires_grad_()
            (d,) = pylucid.autograd.grad(pylucid.nn.functional.gelu(t).sum(), t, create_graph=True)
            (td,) = torch.autograd.grad(torch.nn.functional.gelu(tt).sum(), tt, create_graph=True)
            d.sum().backward()
            td.sum().backward()
            tol = 2e-6 if dtype == np.float32 else 1e-12
            _assert_close(d.detach().numpy(), td.detach().numpy(), tol)
            _assert_close(t.grad.numpy(), tt.grad.numpy(), tol)


@needs_onednn
def test_onednn_eltwise_declines_what_it_does_not_take():
    assert D.eltwise_forward(np.ones(4), "gelu_erf") is None  # float64
    assert D.eltwise_forward(np.ones(0, np.float32), "gelu_erf") is None
    assert D.eltwise_backward(np.ones(4, np.float32), np.ones(5, np.float32), "gelu_erf") is None
    x = np.arange(-3, 3, 0.5, dtype=np.float32)
    np.testing.assert_array_equal(D.eltwise_forward(x.reshape(3, 4), "gelu_erf").reshape(-1),
                                  D.eltwise_forward(x, "gelu_erf"))


# ------------------------------------------------------------------------------------------ relu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 13, CPUBackend._ELT_BLOCK + 3, 3 * CPUBackend._ELT_BLOCK])
def test_relu_zero_block_is_numpy_maximum_bit_for_bit(n, dtype):
    be = CPUBackend()
    x, _ = _inputs(n, dtype)
    got = be.relu(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint8), np.maximum(x, dtype(0)).view(np.uint8))
    # NaN kept; PyTorch keeps -0.0's sign, NumPy's maximum gives +0.0 (equal as values)
    want = torch.relu(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(got, want)


def test_relu_zero_block_threads(monkeypatch):
    be = CPUBackend()
    monkeypatch.setattr(CPUBackend, "_ELT_PAR_MIN", 1)
    x, _ = _inputs(7 * (CPUBackend._ELT_BLOCK + 1), np.float32)
    old = pylucid.get_num_threads()
    pylucid.set_num_threads(2)
    try:
        got = be.relu(x.reshape(-1, 7)).reshape(-1)
        np.testing.assert_array_equal(got, np.maximum(x, np.float32(0)))
    finally:
        pylucid.set_num_threads(old)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_values_and_gradients_match_torch_non_contiguous_and_in_place(dtype):
    x, g = _inputs(40 * 33, dtype)
    x, g = x.reshape(40, 33), g.reshape(40, 33)
    for view in (lambda t: t, lambda t: t.t()[1:30:3]):
        res = []
        for lib in (pylucid, torch):
            t = lib.tensor(x).requires_grad_()
            y = lib.nn.functional.relu(view(t) * 1.0, inplace=True)
            y.backward(view(lib.tensor(g)))
            res.append((y.detach().numpy(), t.grad.numpy()))
        np.testing.assert_array_equal(res[0][0], res[1][0])
        np.testing.assert_array_equal(res[0][1], res[1][1])
    xi = np.array([-3, 0, 5], dtype=np.int64)  # integers stay integers (the portable path)
    got = pylucid.relu(pylucid.tensor(xi))
    assert got.dtype == pylucid.int64 and got.tolist() == [0, 0, 5]


# ------------------------------------------------------------------------------------- leaky relu
@pytest.mark.parametrize("slope", [0.2, 1.0, 3.0, 0.0, -0.5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_place_leaky_relu_matches_torch(slope, dtype):
    # a positive slope: the op saves its output (as PyTorch's leaky_relu_), no snapshot of the input;
    # otherwise the input is saved and snapshotted before the write. The inputs hold NaN, +-0 and
    # the infinities
    x, g = _inputs(30 * 17, dtype)
    x, g = x.reshape(30, 17), g.reshape(30, 17)
    res = []
    for lib in (pylucid, torch):
        t = lib.tensor(x).requires_grad_()
        h = t * 1.0
        y = lib.nn.functional.leaky_relu(h, slope, inplace=True)
        assert y is h
        if lib is torch and slope <= 0:  # PyTorch refuses this backward: the out-of-place formula
            t = lib.tensor(x).requires_grad_()
            y = lib.nn.functional.leaky_relu(t * 1.0, slope)
        y.backward(lib.tensor(g))
        res.append((y.detach().numpy(), t.grad.numpy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])


@pytest.mark.parametrize("slope", [0.2, -0.5])
def test_in_place_leaky_relu_on_a_strided_view_writes_through_to_its_base(slope):
    # a transposed, sliced view (no autograd): only its elements change, in the base's memory
    x, _ = _inputs(30 * 17, "float32")
    bases = []
    for lib in (pylucid, torch):
        base = lib.tensor(x.reshape(30, 17))
        v = base.t()[1:15:3]
        y = lib.nn.functional.leaky_relu(v, slope, inplace=True)
        assert y is v
        bases.append(base.numpy().copy())
    np.testing.assert_array_equal(bases[0], bases[1])


def test_in_place_leaky_relu_saves_its_output_and_checks_its_version():
    from pylucid.ops.activation import LeakyRelu, LeakyReluOnOutput

    t = pylucid.tensor(np.array([-2.0, 0.0, 3.0, np.nan], np.float32)).requires_grad_()
    h = t * 1.0
    pylucid.nn.functional.leaky_relu(h, 0.1, inplace=True)
    node = h.grad_fn
    assert type(node) is LeakyReluOnOutput and node.saved is None  # no input kept, no snapshot
    assert node.output_array() is h._data
    assert type(pylucid.nn.functional.leaky_relu(t * 1.0, 0.1).grad_fn) is LeakyRelu
    assert LeakyReluOnOutput.schema is LeakyRelu.schema  # one registered op
    h.add_(1.0)  # the saved output changed: the backward refuses, as PyTorch's does
    with pytest.raises(pylucid.VersionMismatch):
        h.sum().backward()
    # second order: the graph formula reads the output, whose sign is the input's
    t = pylucid.tensor(np.array([-2.0, 0.5, 3.0], np.float64)).requires_grad_()
    y = pylucid.nn.functional.leaky_relu(t * 2.0, 0.1, inplace=True)
    (d,) = pylucid.autograd.grad(y.sum(), t, create_graph=True)
    np.testing.assert_array_equal(d.detach().numpy(), [0.2, 2.0, 2.0])
