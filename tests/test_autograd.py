"""The autograd engine against PyTorch: higher orders, hooks, in-place rules,
freeing, long chains, custom functions, anomaly mode, functional API."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid.errors import LucidError, VersionMismatch


def both(values, dtype="float64"):
    a = np.asarray(values, dtype=dtype)
    return pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(p, t, tol=1e-10):
    np.testing.assert_allclose(np.asarray(p.detach()), t.detach().numpy(), rtol=tol, atol=tol)


# ------------------------------------------------------------- higher order
@pytest.mark.parametrize("fn", [
    lambda m, x: (m.sqrt(x) * m.sin(x) + x ** 3 / m.exp(x)).sum(),
    lambda m, x: m.mean(m.square(x) * m.cos(x)),
    lambda m, x: (m.amax(x * x, dim=0) + m.amin(m.log(x), dim=1).sum()).sum(),
    lambda m, x: ((x @ x.T) ** 2).sum() / (1 + x.abs().sum()),
])
def test_first_to_third_derivative_match_torch(fn):
    xp, xt = both([[0.5, 1.5, 2.0], [1.2, 0.7, 3.1]])
    gp, = pl.autograd.grad(fn(pl, xp), xp, create_graph=True)
    gt, = torch.autograd.grad(fn(torch, xt), xt, create_graph=True)
    close(gp, gt)
    hp, = pl.autograd.grad(gp.sum(), xp, create_graph=True)
    ht, = torch.autograd.grad(gt.sum(), xt, create_graph=True)
    close(hp, ht, 1e-9)
    tp, = pl.autograd.grad((hp * hp).sum(), xp)
    tt, = torch.autograd.grad((ht * ht).sum(), xt)
    close(tp, tt, 1e-8)


def test_documented_ops_second_derivatives():
    # sqrt: d2/dx2 = -1/(4 x^1.5); square: 2; mean: 0; min: 0
    x = pl.tensor([4.0, 9.0], dtype=pl.float64, requires_grad=True)
    g, = pl.autograd.grad(pl.sqrt(x).sum(), x, create_graph=True)
    h, = pl.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), -0.25 * np.array([4.0, 9.0]) ** -1.5)
    g, = pl.autograd.grad(pl.square(x).sum(), x, create_graph=True)
    h, = pl.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [2.0, 2.0])
    g, = pl.autograd.grad(pl.min(x * x), x, create_graph=True)
    h, = pl.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [2.0, 0.0])  # d/dx (2x * onehot)
    x0 = pl.tensor(0.0, requires_grad=True)
    g, = pl.autograd.grad(pl.sqrt(x0), x0)
    assert np.isinf(g.item()) and g.item() > 0


def test_hessian_vector_product_matches_torch():
    xp, xt = both([0.3, -1.2, 2.0, 0.5])
    vp, vt = both([1.0, 0.5, -2.0, 0.1])

    def f(m, x):
        return (m.exp(x[:2]).sum() * m.sin(x[2:]).sum() + (x ** 4).sum())

    gp, = pl.autograd.grad(f(pl, xp), xp, create_graph=True)
    hvp_p, = pl.autograd.grad((gp * vp.detach()).sum(), xp)
    gt, = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    hvp_t, = torch.autograd.grad((gt * vt.detach()).sum(), xt)
    close(hvp_p, hvp_t)
    _, fp = pl.autograd.functional.hvp(lambda x: f(pl, x), xp.detach(), vp.detach())
    close(fp, hvp_t)


def test_functional_api_matches_torch():
    xp, xt = both([[0.3, 1.2], [2.0, 0.5]])

    def f(m, x):
        return m.sin(x) * x.sum()

    close(pl.autograd.functional.jacobian(lambda x: f(pl, x), xp),
          torch.autograd.functional.jacobian(lambda x: f(torch, x), xt))
    close(pl.autograd.functional.hessian(lambda x: (f(pl, x) ** 2).sum(), xp),
          torch.autograd.functional.hessian(lambda x: (f(torch, x) ** 2).sum(), xt))
    v = np.ones((2, 2))
    op, vjp_p = pl.autograd.functional.vjp(lambda x: f(pl, x), xp, pl.tensor(v))
    ot, vjp_t = torch.autograd.functional.vjp(lambda x: f(torch, x), xt, torch.tensor(v))
    close(vjp_p, vjp_t)
    _, jvp_p = pl.autograd.functional.jvp(lambda x: f(pl, x), xp, pl.tensor(v))
    _, jvp_t = torch.autograd.functional.jvp(lambda x: f(torch, x), xt, torch.tensor(v))
    close(jvp_p, jvp_t)


# ------------------------------------------------------------- API behaviour
def test_backward_non_scalar_needs_gradient():
    x = pl.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(pl.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_grad_accumulates_and_grad_does_not_touch_dot_grad():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    g, = pl.autograd.grad((x * x).sum(), x)
    assert g.tolist() == [2.0, 4.0] and x.grad.tolist() == [5.0, 7.0]
    assert x.grad.dtype == pl.float32


def test_allow_unused_and_errors():
    x = pl.tensor(1.0, requires_grad=True)
    y = pl.tensor(2.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        pl.autograd.grad(x * 2, (x, y))
    gx, gy = pl.autograd.grad(x * 2, (x, y), allow_unused=True)
    assert gx.item() == 2.0 and gy is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        pl.tensor(1.0).backward()


def test_grad_fn_name_and_next_functions():
    x = pl.tensor([4.0], requires_grad=True)
    y = pl.sqrt(x * 2)
    assert y.grad_fn.name() == "SqrtBackward"
    (nxt, nr), = y.grad_fn.next_functions
    assert nxt.name() == "MulBackward" and nr == 0
    assert nxt.next_functions[0][0].name() == "AccumulateGrad"
    assert x.is_leaf and not y.is_leaf


def test_grad_modes_context_and_decorator():
    x = pl.ones(2, requires_grad=True)
    with pl.no_grad():
        assert not (x * 2).requires_grad
        with pl.enable_grad():
            assert (x * 2).requires_grad
    with pl.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert pl.is_grad_enabled()

    @pl.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with pl.inference_mode():
        assert not (x * 2).requires_grad

    @pl.inference_mode()
    def g(t):
        return t * 2

    assert not g(x).requires_grad and pl.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = {}

    def worker():
        seen["worker"] = pl.is_grad_enabled()

    with pl.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen["worker"] is True


def test_hooks_replace_gradient_like_torch():
    xp, xt = both([1.0, 2.0])
    for x, m in ((xp, pl), (xt, torch)):
        y = x * 3
        y.register_hook(lambda g: g * 10)
        h = x.register_hook(lambda g: g + 1)
        (y * y).sum().backward()
        h.remove()
    close(xp.grad, xt.grad)
    # a removed hook no longer runs
    xp.grad = None
    (xp * 1).sum().backward()
    assert xp.grad.tolist() == [1.0, 1.0]


def test_retain_grad():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]
    z = x * 2
    (z * z).sum().backward()
    assert z.grad is None


def test_inplace_on_leaf_requiring_grad_refused():
    x = pl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x += 1
    with pl.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0, 2.0] and x.version == 1


def test_version_mismatch_names_op_and_versions():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y  # saves y
    y.add_(1)
    with pytest.raises(VersionMismatch, match=r"MulBackward.*version 0.*version 1"):
        z.sum().backward()
    # an output saved by sqrt and changed in place
    y2 = pl.sqrt(x * 1)
    w = y2 + 0  # add saves nothing
    y2.mul_(2)
    with pytest.raises(VersionMismatch, match="SqrtBackward"):
        (w + y2).sum().backward()


def test_inplace_on_nonleaf_is_differentiable_like_torch():
    xp, xt = both([1.0, 2.0, 3.0])
    for x in (xp, xt):
        y = x * 2
        y.mul_(y.detach() + 1)
        y.add_(x)
        y[1] = x[0] * 5
        (y ** 2).sum().backward()
    close(xp.grad, xt.grad)


def test_second_backward_through_freed_graph():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = (pl.sqrt(x) * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    x.grad = None
    y = (pl.sqrt(x) * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 1.5 * np.sqrt([1.0, 2.0]), rtol=1e-6)


def test_saved_tensors_freed_by_backward_while_outputs_live():
    x = pl.ones(1000, requires_grad=True)
    h = x * 2
    ref = weakref.ref(h)
    y = (h * h).sum()  # MulBackward saves h
    del h
    gc.collect()
    assert ref() is not None
    y.backward()
    gc.collect()
    assert ref() is None, "backward must free saved tensors"
    assert y.grad_fn is not None  # the output and its node stay alive


def test_long_chain_no_recursion():
    x = pl.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.tolist() == [1.0]
    del y
    gc.collect()


def test_custom_function_with_double_backward():
    class Cube(pl.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * x * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return g * 3 * x * x * ctx.k, None

    x = pl.tensor([2.0], dtype=pl.float64, requires_grad=True)
    y = Cube.apply(x, 2.0)
    g, = pl.autograd.grad(y.sum(), x, create_graph=True)
    h, = pl.autograd.grad(g.sum(), x)
    assert g.item() == 24.0 and h.item() == 24.0
    assert pl.autograd.gradcheck(lambda t: Cube.apply(t, 1.5), (x,))


def test_custom_function_mark_non_differentiable_and_freed():
    class SortLike(pl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = pl.tensor([1, 0])
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x)
            return x * 1, idx

        @staticmethod
        def backward(ctx, g, gi):
            ctx.saved_tensors
            return g

    x = pl.tensor([1.0, 2.0], requires_grad=True)
    v, i = SortLike.apply(x)
    assert v.requires_grad and not i.requires_grad
    v.sum().backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        v.sum().backward()


def test_detect_anomaly_names_op_and_origin():
    x = pl.tensor([0.0, 1.0], requires_grad=True)
    with pl.autograd.detect_anomaly():
        y = pl.sqrt(x)  # gradient inf at 0
        with pytest.raises(LucidError, match=r"SqrtBackward.*inf(.|\n)*test_autograd.py"):
            y.sum().backward()
    y = pl.sqrt(x)
    y.sum().backward()  # without anomaly mode: inf flows, no error
    assert np.isinf(x.grad.numpy()[0])


def test_gradcheck_detects_a_wrong_gradient():
    class Wrong(pl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g  # wrong: should be 2x g

    x = pl.tensor([1.0, 2.0], dtype=pl.float64, requires_grad=True)
    with pytest.raises(pl.autograd.GradcheckError):
        pl.autograd.gradcheck(Wrong.apply, (x,))
    assert not pl.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_backward_inputs_argument():
    x = pl.tensor(1.0, requires_grad=True)
    y = pl.tensor(2.0, requires_grad=True)
    (x * y).backward(inputs=[x])
    assert x.grad.item() == 2.0 and y.grad is None


def test_node_hooks():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((gi[0].tolist(), go[0].tolist())))
    y.sum().backward()
    assert seen == [([2.0, 2.0], [1.0, 1.0])]


def test_leaf_grads_never_alias_each_other_or_user_tensors():
    """Leaves keep fresh gradient arrays without a copy, but never one another's or the caller's."""
    a = pl.tensor([1.0, 2.0], requires_grad=True)
    b = pl.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()  # add hands the same array to both inputs
    a.grad.mul_(10.0)
    assert b.grad.tolist() == [1.0, 1.0]
    # a leaf used twice: the second contribution accumulates into its own array
    c = pl.tensor([1.0, 2.0], requires_grad=True)
    d = pl.tensor([5.0, 6.0], requires_grad=True)
    (c * d + c).sum().backward()
    d.grad.zero_()
    assert c.grad.tolist() == [6.0, 7.0]
    # the caller's gradient tensor reaching a leaf unchanged is not adopted
    e = pl.tensor([1.0, 2.0], requires_grad=True)
    seed = pl.tensor([0.5, 0.25])
    e.backward(seed)
    e.grad.mul_(4.0)
    assert seed.tolist() == [0.5, 0.25]
    # a hook's returned tensor is not adopted either
    keep = pl.tensor([7.0, 7.0])
    f = pl.tensor([1.0, 2.0], requires_grad=True)
    f.register_hook(lambda g: keep)
    (f * 2).sum().backward()
    f.grad.add_(1.0)
    assert keep.tolist() == [7.0, 7.0]
    # a fresh array is adopted, and a second backward accumulates into it correctly
    w = pl.tensor([1.0, 2.0], requires_grad=True)
    (w * 3).sum().backward()
    (w * 3).sum().backward()
    assert w.grad.tolist() == [6.0, 6.0]


def test_autocast_short_path_matches_general_dispatch():
    """Under autocast, calls whose operands already have the policy's dtype skip the general dispatch
    (ops/_op.py: _autocast_plain); results, dtypes and gradients equal the general path's (anomaly
    mode always takes the general path)."""
    import numpy as np

    import pylucid as pl

    rng = np.random.default_rng(0)
    data = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]

    def run(anomaly):
        a = pl.tensor(data[0]).to(pl.bfloat16).requires_grad_()
        b = pl.tensor(data[1], requires_grad=True)
        with pl.amp.autocast("cpu", dtype=pl.bfloat16):
            if anomaly:
                with pl.autograd.detect_anomaly():
                    outs = _ops(pl, a, b)
            else:
                outs = _ops(pl, a, b)
        total = sum(o.float().sum() for o in outs)
        total.backward()
        return [(o.dtype, o.float().detach().numpy()) for o in outs], a.grad.float().numpy(), b.grad.numpy()

    fast, gen = run(False), run(True)
    for (dt1, v1), (dt2, v2) in zip(fast[0], gen[0]):
        assert dt1 == dt2
        np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(fast[1], gen[1])
    np.testing.assert_array_equal(fast[2], gen[2])


def _ops(pl, a, b):
    # a: bfloat16 (already the autocast dtype), b: float32 (needs casts for Promote ops)
    return [a * 0.5, a + a, 3 * a, a @ a.T, pl.exp(b), pl.softmax(b, dim=-1), b * 2.0, a - 1,
            pl.nn.functional.layer_norm(b, (4,)), pl.sum(a), a / 3]


def _promoted_ops(pl, x, q, qf, w, rm, rv, idx):
    F = pl.nn.functional
    return [F.batch_norm(x, rm, rv, w, w, training=True),  # KeepInput: bfloat16 x, float32 weight and buffers
            F.scaled_dot_product_attention(q, q, q, is_causal=True),  # Promote, already the autocast dtype
            F.scaled_dot_product_attention(qf, qf, qf),  # Promote from float32: cast by the general path
            F.embedding(idx, w.reshape(2, 2)),  # Promote, float32 weight: cast
            pl.sort(q.reshape(-1))[0], pl.gather(q.reshape(2, -1), 1, idx.reshape(2, 2) % 2)]


@pytest.mark.parametrize("amp", [False, True])
def test_promoted_args_short_path_matches_general_dispatch(amp, general_dispatch_calls):
    """Ops that promote only some arguments (batch norm, attention, embedding, sort, gather) skip the general
    dispatch where it would cast nothing (ops/_op.py: _promoted_plain): results, dtypes, gradients and the
    running buffers equal the general path's (anomaly mode always takes it), with and without autocast."""
    import contextlib

    import numpy as np

    import pylucid as pl

    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, 4, 2)).astype(np.float32)
    qs = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    ws = rng.standard_normal(4).astype(np.float32)
    general = general_dispatch_calls

    def run(anomaly):
        x = pl.tensor(xs).to(pl.bfloat16).requires_grad_()
        q = pl.tensor(qs).to(pl.bfloat16).requires_grad_()
        qf = pl.tensor(qs, requires_grad=True)
        w = pl.tensor(ws, requires_grad=True)
        rm, rv = pl.zeros(4), pl.ones(4)
        idx = pl.tensor([[0, 1], [1, 0]])
        ctx = pl.amp.autocast("cpu", dtype=pl.bfloat16) if amp else contextlib.nullcontext()
        general[0] = 0
        with ctx, (pl.autograd.detect_anomaly() if anomaly else contextlib.nullcontext()):
            outs = _promoted_ops(pl, x, q, qf, w, rm, rv, idx)
        taken = general[0]
        sum(o.float().sum() for o in outs if o.dtype.is_floating_point).backward()
        grads = [t.grad.float().numpy() for t in (x, q, qf, w)]
        return [(o.dtype, o.float().detach().numpy()) for o in outs], grads, (rm.numpy(), rv.numpy()), taken

    fast, gen = run(False), run(True)
    for (dt1, v1), (dt2, v2) in zip(fast[0], gen[0]):
        assert dt1 == dt2
        np.testing.assert_array_equal(v1, v2)
    for g1, g2 in zip(fast[1] + list(fast[2]), gen[1] + list(gen[2])):
        np.testing.assert_array_equal(g1, g2)
    assert gen[3] >= 6
    # with autocast the float32 attention and the embedding cast (general path, their casts recorded): 2 calls;
    # without it every call takes the short path
    assert fast[3] == (2 if amp else 0), fast[3]


def _mixed_ops(pl, xb, xf, wf, cf, h, zf):
    F = pl.nn.functional
    return [F.conv2d(xb, wf, padding=1),  # Promote: bfloat16 input, float32 weight (recorded cast)
            F.conv2d(xf, wf),  # Promote from float32 only: both cast, both recorded
            xb.reshape(2, -1) @ cf,  # Promote: a float32 operand that needs no gradient (cast, not recorded)
            pl.exp(xb),  # ForceFP32: the bfloat16 input cast up (recorded)
            xf + xb,  # KeepInput: promoted to float32, the bfloat16 operand cast (recorded)
            h * xb,  # float16 with bfloat16: float32
            zf + xb,  # a 0-d float32 with a bfloat16 tensor: stays bfloat16 without autocast (the general path)
            xb - xf.detach()]


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("grad", [True, False])
def test_mixed_dtype_short_path_matches_general_dispatch(amp, grad, general_dispatch_calls):
    """Calls whose Tensors differ in float dtype (an autocast op on a bfloat16 input and a float32 weight; a
    float32 + bfloat16 sum) cast the others to the computing dtype without the general dispatch (ops/_op.py:
    _autocast_plain, _float_promoted): results, dtypes, graph and gradients equal the general path's (anomaly
    mode always takes it), recorded or not."""
    import contextlib

    import numpy as np

    import pylucid as pl

    rng = np.random.default_rng(2)
    xs = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    ws = rng.standard_normal((3, 3, 3, 3)).astype(np.float32)
    cs = rng.standard_normal((48, 5)).astype(np.float32)
    general = general_dispatch_calls

    def run(anomaly):
        xb = pl.tensor(xs).to(pl.bfloat16).requires_grad_(grad)
        xf = pl.tensor(xs, requires_grad=grad)
        wf = pl.tensor(ws, requires_grad=grad)
        cf = pl.tensor(cs)
        h = pl.tensor(xs).to(pl.float16).requires_grad_(grad)
        zf = pl.tensor(1.5, requires_grad=grad)
        ctx = pl.amp.autocast("cpu", dtype=pl.bfloat16) if amp else contextlib.nullcontext()
        general[0] = 0
        with ctx, (pl.autograd.detect_anomaly() if anomaly else contextlib.nullcontext()):
            outs = _mixed_ops(pl, xb, xf, wf, cf, h, zf)
        taken = general[0]
        names = [None if o.grad_fn is None else o.grad_fn.name() for o in outs]
        grads = None
        if grad:
            sum(o.float().sum() for o in outs).backward()
            grads = [t.grad.float().numpy() for t in (xb, xf, wf, h, zf)]
            assert [t.grad.dtype for t in (xb, xf, wf, h, zf)] == [pl.bfloat16, pl.float32, pl.float32, pl.float16,
                                                                   pl.float32]
        return [(o.dtype, o.float().detach().numpy()) for o in outs], grads, names, taken

    fast, gen = run(False), run(True)
    for (dt1, v1), (dt2, v2) in zip(fast[0], gen[0]):
        assert dt1 == dt2
        np.testing.assert_array_equal(v1, v2)
    if grad:
        for g1, g2 in zip(fast[1], gen[1]):
            np.testing.assert_array_equal(g1, g2)
    assert fast[2] == gen[2]
    assert gen[3] >= 8
    bf, f32 = pl.bfloat16, pl.float32
    if amp:  # every call short; the policies' dtypes (add and mul are Promote ops in pylucid)
        assert fast[3] == 0, fast[3]
        assert [o[0] for o in fast[0]] == [bf, bf, bf, f32, bf, bf, bf, bf]
    else:  # promotion; the general path takes the three-argument conv of two dtypes and the 0-d operand's sum
        assert fast[3] == 2, fast[3]
        assert [o[0] for o in fast[0]] == [f32, f32, f32, bf, f32, f32, bf, f32]


def test_hidden_outputs_ops_return_their_first_output_alone():
    """An op with ``hidden_outputs`` (a norm's statistics, attention's log-sum-exp, the autocast linear's half
    copies) gives one Tensor and None in the other places; its node still has what the backward reads, so the
    gradients equal PyTorch's."""
    import numpy as np
    import torch

    import pylucid as pl
    from pylucid.ops import _op, registry
    from pylucid.ops import nn as nn_ops

    hidden = [c for c in map(registry.op_class, registry.list_ops()) if c.hidden_outputs]
    assert {op.__name__ for op in hidden} >= {"LayerNorm", "CrossEntropyLoss", "ScaledDotProductAttention",
                                               "LinearAutocast"}
    for op in hidden:  # only the first output carries a gradient
        assert op.n_outputs > 1 and op.differentiable_outputs == (True,) + (False,) * (op.n_outputs - 1)
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = pl.tensor(xs, requires_grad=True)
    w = pl.ones(4, requires_grad=True)
    outs = _op.apply(nn_ops.LayerNorm, (x, w, None), {"k": 1, "eps": 1e-5})
    assert len(outs) == 3 and outs[1] is None and outs[2] is None and outs[0].grad_fn.name() == "LayerNormBackward"
    (outs[0] * outs[0]).sum().backward()
    tx = torch.tensor(xs, requires_grad=True)
    tw = torch.ones(4, requires_grad=True)
    ty = torch.nn.functional.layer_norm(tx, (4,), tw)
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    q = pl.tensor(rng.standard_normal((1, 2, 3, 4)).astype(np.float32), requires_grad=True)
    o = _op.apply(nn_ops.ScaledDotProductAttention, (q, q, q, None, None),
                  {"scale": 0.5, "drop_scale": 1.0, "causal": True})
    assert len(o) == 2 and o[1] is None
    o[0].sum().backward()
    assert q.grad is not None and q.grad.shape == q.shape


def test_set_grad_enabled_as_a_decorator_restores_grad_mode():
    import pylucid as pl

    @pl.set_grad_enabled(False)
    def f(x):
        return x * 2

    assert pl.is_grad_enabled()
    x = pl.ones(2, requires_grad=True)
    assert not f(x).requires_grad
    assert pl.is_grad_enabled()


# ------------------------------------------------------------------------------- hooks that return the wrong thing
@pytest.mark.parametrize("bad", ["abc", 5, [1.0, 2.0, 3.0]])
def test_tensor_hook_returning_a_non_tensor_is_a_type_error(bad):
    x = pl.ones(3, requires_grad=True)
    x.register_hook(lambda g: bad)
    with pytest.raises(TypeError, match=r"tensor hook .* returned .*must return None .* or a Tensor"):
        (x * 2).sum().backward()
    y = pl.ones(3, requires_grad=True)
    z = y * 2
    z.register_hook(lambda g: bad)
    with pytest.raises(TypeError, match=r"tensor hook .* returned"):
        z.sum().backward()


def test_hook_changing_the_gradient_size_is_a_shape_mismatch():
    from pylucid.errors import ShapeMismatch

    y = pl.ones(3, requires_grad=True)
    z = y * 2
    z.register_hook(lambda g: pl.ones(2))
    with pytest.raises(ShapeMismatch, match=r"changed the size of the gradient: .*\(2,\).*\(3,\)"):
        z.sum().backward()


def test_node_hook_returning_a_non_tuple_is_a_type_error():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    y.grad_fn.register_hook(lambda gi, go: "abc")
    with pytest.raises(TypeError, match=r"MulBackward hook .* returned str"):
        y.sum().backward()
