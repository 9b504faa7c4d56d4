"""The backward engine's loop against PyTorch: roots, pruning for ``inputs=``, hooks, leaf gradients
that must not alias anyone else's tensor, and the lean and general branches of the one loop agreeing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid._state import state
from pylucid.errors import LucidError


def both(values):
    a = np.asarray(values, dtype=np.float64)
    return pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(p, t):
    assert p is not None and t is not None
    np.testing.assert_allclose(np.asarray(p.detach()), t.detach().numpy(), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------ roots
def test_several_roots_one_reachable_from_another_and_a_root_given_twice():
    for values in ([1.0, 2.0], [0.5, -3.0]):
        (xp, xt) = both(values)
        grads = []
        for x, m in ((xp, pl), (xt, torch)):
            z = x * 3
            m.autograd.backward([z.sum(), (z * z).sum()])  # the first root lies below the second
            g1 = x.grad.clone()
            x.grad = None
            z = x * 3
            m.autograd.backward([z, z], [m.ones(2, dtype=m.float64), m.ones(2, dtype=m.float64) * 2])
            g2 = x.grad.clone()
            x.grad = None
            m.autograd.backward([x, x * 2], [m.ones(2, dtype=m.float64), m.ones(2, dtype=m.float64)])
            grads.append((g1, g2, x.grad))
        for p, t in zip(*grads):
            close(p, t)


# --------------------------------------------------------------------------------------- inputs= pruning
def test_grad_wrt_intermediate_stops_there_like_torch():
    """autograd.grad(loss, h) takes h's gradient as it arrives: nothing below h runs."""
    seen = {}
    for m in (pl, torch):
        calls = seen[m.__name__] = []
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([3.0, 4.0], dtype=m.float64, requires_grad=True)
        x.register_hook(lambda g, calls=calls: calls.append("leaf x"))
        h = x * 2
        h.grad_fn.register_hook(lambda gi, go, calls=calls: calls.append("node below h"))
        h.register_hook(lambda g, calls=calls: calls.append("hook on h"))
        (gh,) = m.autograd.grad((h * y).sum(), h)
        assert gh.tolist() == [3.0, 4.0]
        # asked for h and x: h's node runs now, since x lies below it
        gh, gx = m.autograd.grad((h * y).sum(), [h, x])
        assert gh.tolist() == [3.0, 4.0] and gx.tolist() == [6.0, 8.0]
    assert seen["pylucid"] == seen["torch"]


def test_grad_prunes_branches_that_lead_to_no_input():
    (ap, at), (bp, bt) = both([1.0, 2.0]), both([0.5, 1.5])
    res = []
    for a, b, m in ((ap, bp, pl), (at, bt, torch)):
        calls = []
        u = a * b
        v = m.sin(b)
        v.grad_fn.register_hook(lambda gi, go, calls=calls: calls.append("sin"))
        out = (u * u + v * u + m.exp(a)).sum()
        (ga,) = m.autograd.grad(out, a, retain_graph=True)
        res.append((ga, list(calls), a.grad, b.grad))
        # a diamond: two paths to a, one through b's branch
        gb, ga2 = m.autograd.grad(out, [b, a])
        res[-1] += (gb, ga2)
    p, t = res
    close(p[0], t[0])
    assert p[1] == t[1] == []  # sin(b) leads to no input: it never ran
    assert p[2] is None and p[3] is None and t[2] is None and t[3] is None
    close(p[4], t[4])
    close(p[5], t[5])


def test_backward_inputs_runs_leaf_hooks_once_and_fills_nonleaf_grad_like_torch():
    seen = {}
    for m in (pl, torch):
        calls = seen[m.__name__] = []
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([3.0, 4.0], dtype=m.float64, requires_grad=True)
        x.register_hook(lambda g, calls=calls: calls.append("x") or g * 2)
        (x * y).sum().backward(inputs=[x])
        assert x.grad.tolist() == [6.0, 8.0] and y.grad is None
        h = y * 2
        h.grad_fn.register_hook(lambda gi, go, calls=calls: calls.append("h node"))
        (h * x).sum().backward(inputs=[h])
        assert h.grad.tolist() == [1.0, 2.0] and y.grad is None and x.grad.tolist() == [6.0, 8.0]
    assert seen["pylucid"] == seen["torch"]


def test_allow_unused_and_materialize_with_a_pruned_input():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = pl.tensor([1.0, 2.0], requires_grad=True)
    z = (y * 2).detach().requires_grad_()
    out = (x * 3).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        pl.autograd.grad(out, [x, z], retain_graph=True)
    gx, gz = pl.autograd.grad(out, [x, z], allow_unused=True, retain_graph=True)
    assert gx.tolist() == [3.0, 3.0] and gz is None
    gx, gz = pl.autograd.grad(out, [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------- leaf gradients and aliasing
def test_hook_results_reaching_a_leaf_are_copied_like_torch():
    """A hook's or a custom Function's returned tensor is the caller's: the leaf's .grad must not share it."""

    def run(m, case):
        keep = m.tensor([7.0, 7.0], dtype=m.float64)
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        if case == "tensor hook":
            y = x + 0.0  # add passes the incoming gradient through
            y.register_hook(lambda g: keep)
        elif case == "node hook":
            y = x * 2.0
            y.grad_fn.register_hook(lambda gi, go: (keep, None))  # one entry per forward argument
        else:
            class Keep(m.autograd.Function):
                @staticmethod
                def forward(ctx, t):
                    return t * 1.0

                @staticmethod
                def backward(ctx, g):
                    return keep

            y = Keep.apply(x)
        y.sum().backward()
        x.grad.add_(1.0)
        return keep.tolist(), x.grad.tolist()

    for case in ("tensor hook", "node hook", "function"):
        assert run(pl, case) == run(torch, case) == ([7.0, 7.0], [8.0, 8.0]), case


def test_leaf_grad_keeps_its_dtype_and_accumulates():
    x = pl.tensor([1.0, 2.0], dtype=pl.float32, requires_grad=True)
    (x.to(pl.float64) * 3).sum().backward()
    (x.to(pl.float64) * 3).sum().backward()
    assert x.grad.dtype == pl.float32 and x.grad.tolist() == [6.0, 6.0]
    (g,) = pl.autograd.grad((x.to(pl.float64) ** 2).sum(), x, create_graph=True)
    assert g.dtype == pl.float32 and g.requires_grad


def test_wrong_gradient_count_names_the_node():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    y.grad_fn.register_hook(lambda gi, go: (gi[0],))
    with pytest.raises(LucidError, match="MulBackward: backward returned 1 gradients for 2 inputs"):
        y.sum().backward()


# ----------------------------------------------------------------- the lean and general branches agree
def _mixed_graph(m, a, b):
    u = a * b + a.exp()
    q, r = m.split(u * b, 1)  # a multi-output node; q's gradient is missing below
    s = (r.sum() * 2 + m.tanh(u).sum() + (a * a).sum()) * 0.5
    return s + (q * 0).sum() if m is torch else s


@pytest.mark.parametrize("mode", ["lean", "anomaly", "graph formulas", "create_graph"])
def test_branches_of_the_loop_match_torch(mode):
    (ap, at), (bp, bt) = both([0.3, -1.2]), both([0.7, 2.0])
    _mixed_graph(torch, at, bt).backward()
    if mode == "anomaly":
        with pl.autograd.detect_anomaly():
            _mixed_graph(pl, ap, bp).backward()
    elif mode == "graph formulas":
        state.force_graph_backward = True
        try:
            _mixed_graph(pl, ap, bp).backward()
        finally:
            state.force_graph_backward = False
    elif mode == "create_graph":
        _mixed_graph(pl, ap, bp).backward(create_graph=True)
        assert ap.grad.requires_grad
    else:
        _mixed_graph(pl, ap, bp).backward()
    close(ap.grad, at.grad)
    close(bp.grad, bt.grad)


def test_create_graph_sums_leaf_contributions_into_a_differentiable_grad():
    (xp, xt) = both([0.5, 1.5])
    for x, m in ((xp, pl), (xt, torch)):
        (x * x * x + m.sin(x) * x).sum().backward(create_graph=True)
        x.grad.sum().backward(inputs=[x])  # x.grad already exists: the second derivative accumulates into it
    close(xp.grad, xt.grad)


def test_a_pending_gradient_added_by_the_node_that_accepts_it(monkeypatch):
    """The engine's accumulating call (``Op.accumulates_into``): a layer norm in a pre-norm residual
    block is handed the residual gradient already buffered for its input, and the buffer is emptied
    when the node takes it, so it is counted once. Here a CPU stand-in (the CUDA kernel is the real
    taker) adds it after the plain fast path; it declines once in three calls, as a kernel may. With a
    post hook the node is never asked. Gradients are torch's in every case."""
    from pylucid.ops.nn import LayerNorm

    asked = []

    def take(self, be, pending, *grads):
        asked.append(len(asked) % 3 != 2)
        if not asked[-1]:
            return None
        gx, gw, gb = self.backward_fast(be, *grads)
        return gx + pending, gw, gb

    monkeypatch.setattr(LayerNorm, "backward_fast_accumulate", take)
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((6, 16))
    w0 = rng.standard_normal((16, 16)) / 4

    def run(lib, hook=False):
        x = lib.tensor(x0).requires_grad_()
        w = lib.tensor(w0).requires_grad_()
        ln = lib.nn.LayerNorm(16).double() if lib is torch else lib.nn.LayerNorm(16, dtype=lib.float64)
        h = x
        for _ in range(3):
            y = ln(h)
            if hook:
                y.grad_fn.register_hook(lambda gi, go: None)
            h = h + (y @ w).tanh()
        (h ** 2).sum().backward()
        return [t.grad.detach().numpy() for t in (x, w, ln.weight, ln.bias)]

    want = run(torch)
    for a, b in zip(run(pl), want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert asked == [True, True, False]  # three norms asked, the third declined
    asked.clear()
    for a, b in zip(run(pl, hook=True), want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert asked == []
