"""Recurrent layers against torch.nn with copied state dicts: outputs, final states and
the gradients of the input, the initial states and every parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid import nn


def _copy(pm, tm):
    tsd = tm.state_dict()
    assert list(pm.state_dict()) == list(tsd)
    pm.load_state_dict({k: pl.tensor(v.detach().numpy().copy()) for k, v in tsd.items()})


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [t for v in o for t in _flat(v)]
    return [o]


def _run_compare(pm, tm, inputs, atol=1e-5):
    p_in = [pl.tensor(a, requires_grad=True) for a in inputs]
    t_in = [torch.tensor(a, requires_grad=True) for a in inputs]

    def pack(xs):
        if len(xs) == 1:
            return (xs[0],)
        if len(xs) == 2:
            return (xs[0], xs[1])
        return (xs[0], (xs[1], xs[2]))

    p_out, t_out = _flat(pm(*pack(p_in))), _flat(tm(*pack(t_in)))
    assert len(p_out) == len(t_out)
    rng = np.random.default_rng(7)
    p_loss, t_loss = 0, 0
    for po, to in zip(p_out, t_out):
        assert tuple(po.shape) == tuple(to.shape)
        np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), atol=atol, rtol=1e-4)
        g = rng.standard_normal(to.shape)
        p_loss = p_loss + (po * pl.tensor(g, dtype=po.dtype)).sum()
        t_loss = t_loss + (to * torch.tensor(g, dtype=to.dtype)).sum()
    p_loss.backward()
    t_loss.backward()
    for i, (a, b) in enumerate(zip(p_in, t_in)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol, rtol=1e-4, err_msg=f"input {i}")
    tp = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), atol=atol, rtol=1e-4, err_msg=name)


def _inputs(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = [
    ("RNN", {"nonlinearity": "tanh"}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bias": False}),
    ("RNN", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": 2}),
    ("GRU", {"num_layers": 2}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True, "bias": False}),
]


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_matches_torch(name, kw, with_state):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, **kw).double()
    pm = getattr(nn, name)(3, 4, **kw).double()
    _copy(pm, tm)
    assert repr(pm) == repr(tm)
    batch_first = kw.get("batch_first", False)
    x = _inputs((2, 5, 3) if batch_first else (5, 2, 3))
    inputs = [x]
    if with_state:
        dirs = 2 if kw.get("bidirectional") else 1
        layers = kw.get("num_layers", 1)
        h_size = kw.get("proj_size") or 4
        inputs.append(_inputs((dirs * layers, 2, h_size), 1))
        if name == "LSTM":
            inputs.append(_inputs((dirs * layers, 2, 4), 2))
    _run_compare(pm, tm, inputs, atol=1e-10)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(name):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, num_layers=2).double()
    pm = getattr(nn, name)(3, 4, num_layers=2).double()
    _copy(pm, tm)
    _run_compare(pm, tm, [_inputs((5, 3))], atol=1e-10)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("with_state", [False, True])
def test_cells_match_torch(name, with_state):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4).double()
    pm = getattr(nn, name)(3, 4).double()
    _copy(pm, tm)
    assert repr(pm) == repr(tm)
    inputs = [_inputs((2, 3))]
    if with_state:
        inputs.append(_inputs((2, 4), 1))
        if name == "LSTMCell":
            inputs.append(_inputs((2, 4), 2))
    if name == "LSTMCell" and with_state:
        p_in = [pl.tensor(a, requires_grad=True) for a in inputs]
        t_in = [torch.tensor(a, requires_grad=True) for a in inputs]
        ph, pc = pm(p_in[0], (p_in[1], p_in[2]))
        th, tc = tm(t_in[0], (t_in[1], t_in[2]))
        (ph.sum() + (pc * pc).sum()).backward()
        (th.sum() + (tc * tc).sum()).backward()
        for a, b in zip(p_in, t_in):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
        return
    _run_compare(pm, tm, inputs, atol=1e-10)


def test_relu_cell_and_unbatched_cell():
    torch.manual_seed(0)
    tm = torch.nn.RNNCell(3, 4, nonlinearity="relu", bias=False).double()
    pm = nn.RNNCell(3, 4, nonlinearity="relu", bias=False).double()
    _copy(pm, tm)
    assert repr(pm) == repr(tm)
    _run_compare(pm, tm, [_inputs((3,))], atol=1e-10)


def test_parameter_names_shapes_and_init():
    m = nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=5)
    t = torch.nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=5)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    bound = 1 / np.sqrt(8)
    for _, p in m.named_parameters():
        assert np.abs(p.detach().numpy()).max() <= bound


def test_dropout_between_layers_only_in_training():
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = pl.randn(5, 2, 3)
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    pl.manual_seed(0)
    c, _ = m(x)
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())


def test_errors():
    with pytest.raises(pl.ShapeMismatch, match="LSTM: input has 2 features"):
        nn.LSTM(3, 4)(pl.zeros(5, 1, 2))
    with pytest.raises(pl.ShapeMismatch, match="GRU: expected hidden state h_0 of shape"):
        nn.GRU(3, 4)(pl.zeros(5, 1, 3), pl.zeros(2, 1, 4))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)


# ------------------------------------------------------------- the whole-sequence LSTM op (pylucid.ops.rnn.LstmLayer)
def _lstm_pair(dtype=torch.float64, **kw):
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 4, **kw).double()
    pm = nn.LSTM(3, 4, **kw).double()
    _copy(pm, tm)
    return pm.to(getattr(pl, str(dtype).split(".")[1])), tm.to(dtype)


def _graph_names(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        stack.extend(e[0] for e in n.next_edges if e is not None)
    return [n.name() for n in seen]


def test_lstm_runs_one_op_per_layer_and_direction():
    """On the CPU each layer direction, its input projection included, is one ``lstm_input_layer`` node."""
    pm, _ = _lstm_pair(num_layers=2, bidirectional=True)
    out, _ = pm(pl.tensor(_inputs((5, 2, 3)), requires_grad=True))
    names = _graph_names(out)
    assert names.count("LstmInputLayerBackward") == 4 and "LstmCellBackward" not in names
    assert "LinearBackward" not in names


@pytest.mark.parametrize("library", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_float32_library_and_loop_match_torch(library, bias, monkeypatch):
    """float32 through oneDNN's LSTM primitive (where installed) and through the NumPy loop (the library off):
    outputs and every gradient as PyTorch's, both directions, batch_first, initial states given."""
    monkeypatch.setattr(pl.backends.mkldnn, "enabled", library)
    torch.manual_seed(0)
    tm = torch.nn.LSTM(5, 6, 2, bias=bias, bidirectional=True, batch_first=True)
    pm = nn.LSTM(5, 6, 2, bias=bias, bidirectional=True, batch_first=True)
    _copy(pm, tm)
    x, h0, c0 = (_inputs(s, k).astype(np.float32) for k, s in enumerate([(3, 7, 5), (4, 3, 6), (4, 3, 6)]))
    _run_compare(pm, tm, [x, h0, c0], atol=2e-5)


def test_lstm_float32_second_order_through_the_library_forward():
    """create_graph on a float32 layer whose forward ran in oneDNN: the graph-mode formula gives PyTorch's
    double backward."""
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 4, 1)
    pm = nn.LSTM(3, 4, 1)
    _copy(pm, tm)
    x = _inputs((4, 2, 3)).astype(np.float32)
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (gp,) = pl.autograd.grad((pm(px)[0] ** 2).sum(), px, create_graph=True)
    (gt,) = torch.autograd.grad((tm(tx)[0] ** 2).sum(), tx, create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), atol=1e-5)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-4, rtol=1e-4)
    tp = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)


def test_lstm_float32_output_modified_in_place_keeps_the_backward():
    """The library path hands out copies of its states too: writing into the output leaves the gradients."""
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 4, 1)
    pm = nn.LSTM(3, 4, 1)
    _copy(pm, tm)
    x = _inputs((5, 2, 3)).astype(np.float32)
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po, (ph, pc) = pm(px)
    (th_sum := tm(tx)[1][0].sum()).backward()
    loss = ph.sum()
    with pl.no_grad():
        po.mul_(0)
        pc.mul_(0)
    loss.backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-6)
    assert th_sum is not None


def test_lstm_second_order_matches_torch():
    """create_graph: the graph formula (the unrolled cells) gives the same double backward as PyTorch."""
    pm, tm = _lstm_pair(num_layers=2)
    x = _inputs((4, 2, 3))
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (gp,) = pl.autograd.grad((pm(px)[0] ** 2).sum(), px, create_graph=True)
    (gt,) = torch.autograd.grad((tm(tx)[0] ** 2).sum(), tx, create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), atol=1e-10)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    tp = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), atol=1e-10, err_msg=name)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-5), (torch.bfloat16, 6e-2)])
def test_lstm_float32_and_bfloat16_match_torch(dtype, atol):
    """float32 to PyTorch's rounding; bfloat16 (computed in float32 here, in bfloat16 steps by PyTorch) within a few
    bfloat16 ulps."""
    pm, tm = _lstm_pair(dtype, num_layers=2, bidirectional=True)
    x = _inputs((6, 3, 3)).astype(np.float32)
    px = pl.tensor(x).to(getattr(pl, str(dtype).split(".")[1])).requires_grad_()
    tx = torch.tensor(x).to(dtype).requires_grad_()
    po, (ph, pc) = pm(px)
    to, (th, tc) = tm(tx)
    assert po.dtype == px.dtype and ph.dtype == px.dtype and pc.dtype == px.dtype
    for a, b in ((po, to), (ph, th), (pc, tc)):
        np.testing.assert_allclose(a.detach().float().numpy(), b.detach().float().numpy(), atol=atol)
    (po.float().sum() + pc.float().sum()).backward()
    (to.float().sum() + tc.float().sum()).backward()
    np.testing.assert_allclose(px.grad.float().numpy(), tx.grad.float().numpy(), atol=atol * 4)
    tp = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.float().numpy(), tp[name].grad.float().numpy(), atol=atol * 8, rtol=5e-2,
                                   err_msg=name)


def test_lstm_output_modified_in_place_keeps_the_backward():
    """The op keeps its own copy of the hidden states: writing into the returned output (as PyTorch allows, its
    output is a fresh stack) does not change the gradients."""
    pm, tm = _lstm_pair()
    x = _inputs((5, 2, 3))
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po, (ph, _) = pm(px)
    to, (th, _) = tm(tx)
    lp, lt = ph.sum(), th.sum()
    with pl.no_grad():
        po.mul_(0)
    with torch.no_grad():
        to.mul_(0)
    lp.backward()
    lt.backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-10)


def test_lstm_empty_sequence():
    """A sequence of no steps (PyTorch refuses it): an empty output and the initial state as the final one."""
    pm, _ = _lstm_pair(num_layers=2)
    h0, c0 = _inputs((2, 2, 4), 1), _inputs((2, 2, 4), 2)
    po, (ph, pc) = pm(pl.zeros(0, 2, 3, dtype=pl.float64), (pl.tensor(h0), pl.tensor(c0)))
    assert tuple(po.shape) == (0, 2, 4)
    np.testing.assert_array_equal(ph.detach().numpy(), h0)
    np.testing.assert_array_equal(pc.detach().numpy(), c0)


def test_gru_runs_one_op_per_layer_and_direction_and_matches_torch_to_second_order():
    torch.manual_seed(0)
    tm = torch.nn.GRU(3, 4, num_layers=2, bidirectional=True).double()
    pm = nn.GRU(3, 4, num_layers=2, bidirectional=True).double()
    _copy(pm, tm)
    x = _inputs((4, 2, 3))
    px, tx = pl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po, _ = pm(px)
    names = _graph_names(po)
    assert names.count("GruLayerBackward") == 4 and "GruCellBackward" not in names
    (gp,) = pl.autograd.grad((po ** 2).sum(), px, create_graph=True)
    (gt,) = torch.autograd.grad((tm(tx)[0] ** 2).sum(), tx, create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), atol=1e-10)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    tp = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), atol=1e-10, err_msg=name)


def test_gru_float32_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.GRU(3, 4, num_layers=2, batch_first=True)
    pm = nn.GRU(3, 4, num_layers=2, batch_first=True)
    _copy(pm, tm)
    _run_compare(pm, tm, [_inputs((3, 6, 3)).astype(np.float32), _inputs((2, 3, 4), 1).astype(np.float32)],
                 atol=2e-5)
