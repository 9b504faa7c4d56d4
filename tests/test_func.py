"""``pylucid.func`` against ``torch.func``: vmap (through batching rules), grad, vjp, jvp, jacrev, jacfwd,
hessian, linearize, functional_call, and the property ``vmap(f)(x) == stack([f(x_i)])`` over the op database."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
import pylucid.nn.functional as F
from pylucid.errors import LucidError
from pylucid.func import (
    _batching,
    _forward,
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stack_module_state,
    vjp,
    vmap,
)
from pylucid.ops import registry

RNG = np.random.default_rng(0)


def arr(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape)


def both(a):
    return pl.tensor(a), torch.tensor(a)


def close(x, y, atol=1e-6, rtol=1e-5):
    xs = x if isinstance(x, (tuple, list)) else (x,)
    ys = y if isinstance(y, (tuple, list)) else (y,)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        if isinstance(a, dict):
            assert set(a) == set(b)
            for k in a:
                close(a[k], b[k], atol, rtol)
            continue
        an = a.detach().numpy() if isinstance(a, pl.Tensor) else np.asarray(a)
        bn = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        assert an.shape == bn.shape, (an.shape, bn.shape)
        np.testing.assert_allclose(an, bn, atol=atol, rtol=rtol, equal_nan=True)


# ------------------------------------------------------------------ vmap vs torch.func.vmap
# (name, function on (module, x, y), shapes of the batched x and y, in_dims)
VMAP_CASES = [
    ("elementwise", lambda m, x, y: (x.exp() * y).sin() + 1.0, (4, 3), (4, 3), 0),
    ("broadcast-unbatched", lambda m, x, y: x * y + y, (4, 3), (3,), (0, None)),
    ("rank-mismatch", lambda m, x, y: x + y, (4, 2, 3), (4, 3), 0),
    ("sum-dim", lambda m, x, y: x.sum(0) + y.mean(), (5, 3, 2), (5, 2), 0),
    ("sum-all", lambda m, x, y: x.sum() * y.amax(), (5, 3, 2), (5, 2), 0),
    ("softmax", lambda m, x, y: m.softmax(x, -1) + m.log_softmax(y, 0).sum(), (4, 3, 5), (4, 5), 0),
    ("matmul-vec-mat", lambda m, x, y: x @ y, (4, 3), (4, 3, 2), 0),
    ("matmul-mat-vec", lambda m, x, y: y @ x, (4, 3), (4, 2, 3), 0),
    ("matmul-unbatched-rhs", lambda m, x, y: x @ y, (4, 2, 3), (3, 5), (0, None)),
    ("matmul-unbatched-lhs", lambda m, x, y: y @ x, (4, 3, 2), (5, 3), (0, None)),
    ("matmul-batched-stack", lambda m, x, y: x @ y, (4, 2, 2, 3), (3, 5), (0, None)),
    ("dot", lambda m, x, y: m.dot(x, y), (4, 3), (4, 3), 0),
    ("outer", lambda m, x, y: m.outer(x, y), (4, 3), (4, 2), 0),
    ("einsum", lambda m, x, y: m.einsum("ij,jk->ik", x, y), (4, 2, 3), (3, 2), (0, None)),
    ("reshape-permute", lambda m, x, y: x.reshape(3, 2).permute(1, 0) * y, (4, 6), (4, 2, 1), 0),
    ("transpose-flatten", lambda m, x, y: x.transpose(0, 1).flatten() + y, (4, 2, 3), (4, 6), 0),
    ("cat-stack", lambda m, x, y: m.cat([x, y], 0) + m.stack([x, y]).sum(0).sum(), (4, 3), (4, 3), 0),
    ("index", lambda m, x, y: x[1:, 0] + y[m.tensor([0, 2])].sum() if m is pl
     else x[1:, 0] + y[torch.tensor([0, 2])].sum(), (4, 3, 2), (4, 3), 0),
    ("where-clamp", lambda m, x, y: m.where(x > 0, x, y).clamp(-0.5, 0.5), (4, 3), (4, 3), 0),
    ("unsqueeze-expand", lambda m, x, y: x.unsqueeze(0).expand(2, 3) * y, (4, 3), (4, 2, 1), 0),
    ("cumsum-flip", lambda m, x, y: x.cumsum(1).flip(0) + y, (4, 2, 3), (4, 3), 0),
    ("max-dim", lambda m, x, y: x.max(1)[0] + x.argmax(1).to(x.dtype) + y, (4, 2, 3), (4, 2), 0),
    ("sort-topk", lambda m, x, y: x.sort(-1)[0][..., :2] + x.topk(2)[0] + y, (4, 2, 3), (4, 2), 0),
    ("tanh-linear", lambda m, x, y: m.nn.functional.linear(x, y).tanh(), (4, 5, 3), (2, 3), (0, None)),
    ("linear-batched-weight", lambda m, x, y: m.nn.functional.linear(x, y), (4, 5, 3), (4, 2, 3), 0),
    ("norm-var", lambda m, x, y: x.var(0) + m.linalg.norm(y) + x.std(), (4, 3, 2), (4, 2), 0),
    ("tril-inv", lambda m, x, y: m.linalg.inv(x + 3 * m.eye(3, dtype=x.dtype)).tril() + y,
     (4, 3, 3), (4, 3), 0),
    ("in-dim-1", lambda m, x, y: x * 2 + y, (3, 4), (3,), (1, None)),
]


@pytest.mark.parametrize("case", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_matches_torch(case):
    _, fn, sx, sy, dims = case
    xa, ya = arr(*sx), arr(*sy)
    (xp, xt), (yp, yt) = both(xa), both(ya)
    got = vmap(lambda x, y: fn(pl, x, y), in_dims=dims)(xp, yp)
    ref = torch.func.vmap(lambda x, y: fn(torch, x, y), in_dims=dims)(xt, yt)
    close(got, ref)


def test_vmap_out_dims_and_pytrees():
    xa, ya = arr(4, 3), arr(3, 4)
    (xp, xt), (yp, yt) = both(xa), both(ya)

    def f(m):
        def g(d):
            return {"s": d["x"] * d["y"][0], "t": (d["x"].sum(), d["y"][1] + 1)}
        return g

    ins_p = {"x": xp, "y": (yp, yp)}
    ins_t = {"x": xt, "y": (yt, yt)}
    dims = ({"x": 0, "y": (1, None)},)
    got = vmap(f(pl), in_dims=dims, out_dims={"s": 1, "t": (0, 0)})(ins_p)
    ref = torch.func.vmap(f(torch), in_dims=dims, out_dims={"s": 1, "t": (0, 0)})(ins_t)
    close(got["s"], ref["s"])
    close(got["t"], ref["t"])


def test_vmap_unbatched_output_is_broadcast_and_out_dims_none():
    x = pl.tensor(arr(3, 2))
    c = pl.tensor([1.0, 2.0])
    out = vmap(lambda xi: c * 2)(x)
    assert tuple(out.shape) == (3, 2)
    out2 = vmap(lambda xi: (xi + 1, c), out_dims=(0, None))(x)
    close(out2[1], c.numpy())
    with pytest.raises(ValueError, match="out_dims=None"):
        vmap(lambda xi: xi, out_dims=None)(x)


def test_vmap_errors():
    x = pl.tensor(arr(3, 2))
    with pytest.raises(ValueError, match="at least one input"):
        vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError, match="batch size"):
        vmap(lambda a, b: a + b)(x, pl.tensor(arr(4, 2)))
    with pytest.raises(ValueError, match="randomness"):
        vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(ValueError, match="out of range"):
        vmap(lambda a: a, in_dims=2)(x)


def test_vmap_no_rule_names_the_op():
    x = pl.tensor(arr(3, 4))
    with pytest.raises(NotImplementedError, match="vmap: no batching rule for op 'unique'"):
        vmap(lambda a: pl.unique(a))(x)


def test_vmap_chunk_size_equals_full_batch():
    xa = arr(7, 3)
    xp = pl.tensor(xa)

    def f(r):
        return (r.sin() * r).sum(), r * 2

    full = vmap(f)(xp)
    for cs in (1, 3, 7, 10):
        close(vmap(f, chunk_size=cs)(xp), full)


def test_vmap_of_vmap_matches_torch():
    xa, ya = arr(3, 4, 5), arr(4, 5)
    (xp, xt), (yp, yt) = both(xa), both(ya)

    def f(m):
        return lambda x, y: (x * y).sum(-1) + m.softmax(x, 0)[0]

    got = vmap(vmap(f(pl), in_dims=(0, 0)), in_dims=(0, None))(xp, yp)
    ref = torch.func.vmap(torch.func.vmap(f(torch), in_dims=(0, 0)), in_dims=(0, None))(xt, yt)
    close(got, ref)
    # the inner level batching dim 1 of the outer's samples
    got = vmap(vmap(lambda x: x.sum(0), in_dims=1), in_dims=0)(xp)
    ref = torch.func.vmap(torch.func.vmap(lambda x: x.sum(0), in_dims=1), in_dims=0)(xt)
    close(got, ref)


def test_vmap_randomness():
    x = pl.ones(6, 100)
    with pytest.raises(RuntimeError, match="randomness='error'"):
        vmap(lambda r: F.dropout(r, 0.5, training=True))(x)
    pl.manual_seed(0)
    same = vmap(lambda r: F.dropout(r, 0.5, training=True), randomness="same")(x).numpy()
    assert (same == same[0]).all()
    diff = vmap(lambda r: F.dropout(r, 0.5, training=True), randomness="different")(x).numpy()
    assert not (diff == diff[0]).all()
    assert set(np.unique(diff)) <= {0.0, 2.0}


def test_vmap_runs_each_op_once_on_the_batch():
    calls = []
    orig = pl.ops.elementwise.Exp.forward

    def counting(be, x):
        calls.append(x.shape)
        return orig(be, x)

    pl.ops.elementwise.Exp.forward = staticmethod(counting)
    try:
        vmap(lambda r: r.exp())(pl.tensor(arr(50, 3)))
    finally:
        pl.ops.elementwise.Exp.forward = staticmethod(orig)
    assert calls == [(50, 3)]


# ------------------------------------------------------------------ property: vmap(f)(x) == stack(f(x_i))
def _opdb_entries():
    from tests.opdb import all_entries

    out = []
    for e in all_entries():
        if e.name in _batching.RULES and not getattr(e, "sampler", False):
            out.append(e)
    return out


def _batch_of(a):
    if a.dtype.kind == "f":
        return np.stack([a, a * 0.5 + 0.125, a[::-1].copy() if a.ndim else a - 0.25])
    return np.stack([a, a, a])


def _to_pl(a):
    if isinstance(a, np.ndarray):
        return pl.tensor(a)
    if isinstance(a, (list, tuple)) and any(isinstance(v, (np.ndarray, list, tuple)) for v in a):
        return type(a)(_to_pl(v) for v in a)
    return a


def _leaves(out):
    from pylucid.func._core import tree_flatten

    return [o for o in tree_flatten(out)[0] if isinstance(o, pl.Tensor)]


def test_vmap_property_over_the_op_database():
    checked, refused, failed = set(), set(), []
    for e in _opdb_entries():
        for s in e.samples():
            args = list(s.args)
            pos = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size]
            if not pos:
                continue
            i0 = pos[0]
            batch = _batch_of(args[i0])

            def f(xi, i0=i0, args=args, s=s, e=e):
                a = [_to_pl(v) for v in args]
                a[i0] = xi
                return e.op(*a, **s.kwargs)

            xb = pl.tensor(batch)
            try:
                loop = [f(pl.tensor(batch[k])) for k in range(3)]
            except Exception:
                continue
            try:
                got = vmap(f, randomness="same")(xb)
            except (NotImplementedError, LucidError) as exc:
                refused.add(f"{e.name}: {str(exc)[:90]}")
                continue
            except Exception as exc:
                failed.append(f"{e.name}[{s.name}]: raised {type(exc).__name__}: {str(exc)[:150]}")
                continue
            want = [np.stack([_leaves(lp)[j].numpy() for lp in loop]) for j in range(len(_leaves(loop[0])))]
            gl = _leaves(got)
            try:
                assert len(gl) == len(want)
                for g, w in zip(gl, want):
                    np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-7, equal_nan=True)
            except AssertionError as exc:
                failed.append(f"{e.name}[{s.name}]: {str(exc)[:200]}")
                continue
            checked.add(e.name)
    print(f"\nvmap property: {len(checked)} ops checked; refused for some sample:\n  " + "\n  ".join(sorted(refused)))
    assert not failed, "\n".join(failed)
    assert len(checked) >= 150


# ------------------------------------------------------------------ grad, vjp, per-sample gradients
def test_grad_and_value_argnums_and_aux():
    (xp, xt), (yp, yt) = both(arr(3)), both(arr(3))

    def f(m):
        return lambda x, y: ((x * y).sin().sum(), {"aux": x * 2})

    g, (v, aux) = grad_and_value(f(pl), argnums=(0, 1), has_aux=True)(xp, yp)
    gt, (vt, auxt) = torch.func.grad_and_value(f(torch), argnums=(0, 1), has_aux=True)(xt, yt)
    close(g, gt)
    close(v, vt)
    close(aux["aux"], auxt["aux"])
    assert not g[0].requires_grad and not v.requires_grad


def test_grad_pytree_and_nested():
    (xp, xt) = both(arr(3))
    params_p = {"a": xp, "b": (xp * 2,)}
    params_t = {"a": xt, "b": (xt * 2,)}

    def f(p):
        return (p["a"].exp() * p["b"][0]).sum()

    got = grad(f)(params_p)
    assert isinstance(got, dict) and isinstance(got["b"], tuple)
    close(got, torch.func.grad(f)(params_t))
    with pytest.raises(RuntimeError, match="one-element"):
        grad(lambda x: x * 2)(xp)
    close(grad(lambda x: grad(lambda y: (y ** 3).sum())(x).sum())(xp),
          torch.func.grad(lambda x: torch.func.grad(lambda y: (y ** 3).sum())(x).sum())(xt))


def test_vjp_matches_torch():
    (xp, xt), (cp, ct) = both(arr(3, 2)), both(arr(2, 3))
    out, fn = vjp(lambda x: x.t().tanh(), xp)
    out_t, fn_t = torch.func.vjp(lambda x: x.t().tanh(), xt)
    close(out, out_t)
    close(fn(cp), fn_t(ct))


def _mlp_params(m, rng):
    arrs = [rng.standard_normal((8, 5)) * 0.3, rng.standard_normal(8) * 0.1, rng.standard_normal((3, 8)) * 0.3,
            rng.standard_normal(3) * 0.1]
    names = ["w1", "b1", "w2", "b2"]
    return {n: (pl.tensor(a) if m is pl else torch.tensor(a)) for n, a in zip(names, arrs)}


def _mlp_loss(m):
    Fm = pl.nn.functional if m is pl else torch.nn.functional

    def loss(p, x, y):
        h = Fm.linear(x, p["w1"], p["b1"]).tanh()
        return Fm.cross_entropy(Fm.linear(h, p["w2"], p["b2"]).unsqueeze(0), y.unsqueeze(0))

    return loss


def test_per_sample_grads_of_an_mlp_equal_the_loop_and_torch():
    rng = np.random.default_rng(1)
    pp, pt = _mlp_params(pl, rng), _mlp_params(torch, np.random.default_rng(1))
    xa, ya = rng.standard_normal((6, 5)), rng.integers(0, 3, 6)
    xp, yp, xt, yt = pl.tensor(xa), pl.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    got = vmap(grad(_mlp_loss(pl)), in_dims=(None, 0, 0))(pp, xp, yp)
    ref = torch.func.vmap(torch.func.grad(_mlp_loss(torch)), in_dims=(None, 0, 0))(pt, xt, yt)
    close(got, ref, atol=1e-10)
    for i in range(6):
        one = grad(_mlp_loss(pl))(pp, xp[i], yp[i])
        for k in one:
            np.testing.assert_allclose(got[k].numpy()[i], one[k].numpy(), atol=1e-12)


def test_per_sample_grads_with_mse_and_functional_call():
    net = pl.nn.Sequential(pl.nn.Linear(4, 6), pl.nn.Tanh(), pl.nn.Linear(6, 1))
    params = {k: v.detach() for k, v in net.named_parameters()}
    x, y = pl.tensor(arr(5, 4)), pl.tensor(arr(5, 1))

    def loss(p, xi, yi):
        return F.mse_loss(functional_call(net, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    got = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        net.zero_grad()
        F.mse_loss(net(x[i:i + 1]), y[i:i + 1]).backward()
        for k, p in net.named_parameters():
            np.testing.assert_allclose(got[k].numpy()[i], p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_grad_of_vmap():
    (wp, wt), (xp, xt) = both(arr(3)), both(arr(5, 3))

    def f(m, vm):
        return lambda w, x: vm(lambda xi: (xi * w).sin().sum())(x).sum()

    close(grad(f(pl, vmap))(wp, xp), torch.func.grad(f(torch, torch.func.vmap))(wt, xt))


def test_vmap_of_grad_nested_in_vmap():
    (xp, xt) = both(arr(2, 3, 4))

    def f(x):
        return (x.sin() ** 2).sum()

    got = vmap(vmap(grad(f)))(xp)
    ref = torch.func.vmap(torch.func.vmap(torch.func.grad(f)))(xt)
    close(got, ref)


# ------------------------------------------------------------------ forward mode
JVP_CASES = [
    ("elementwise", lambda m, x, y: (x.sin() * y.exp() / (1 + y * y)).tanh()),
    ("broadcast", lambda m, x, y: x[:, None] * y[None, :] + x.sum()),
    ("matmul", lambda m, x, y: m.outer(x, y) @ m.outer(y, x)),
    ("softmax", lambda m, x, y: m.softmax(m.outer(x, y), 1) + m.log_softmax(y, 0).sum()),
    ("reductions", lambda m, x, y: m.stack([x.max(), x.prod(), x.var(), m.logsumexp(y, 0), y.norm()])),
    ("shape-index", lambda m, x, y: m.cat([x.flip(0), y[1:]]).reshape(-1, 1).expand(-1, 2).cumsum(0)),
    ("activations", lambda m, x, y: m.nn.functional.gelu(x) + m.nn.functional.softplus(y).sum()
     + m.relu(x) * m.sigmoid(y).mean()),
    ("pow-sqrt", lambda m, x, y: (x * x + 1).sqrt() ** y.abs().mean()),
    ("linalg", lambda m, x, y: m.linalg.det(m.outer(x, x) + m.eye(3, dtype=x.dtype))
     + m.linalg.inv(m.outer(y, y) + 2 * m.eye(3, dtype=x.dtype)).sum()),
]


@pytest.mark.parametrize("case", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_matches_torch(case):
    _, fn = case
    (xp, xt), (yp, yt) = both(arr(3)), both(arr(3))
    (txp, txt), (typ, tyt) = both(arr(3)), both(arr(3))
    out, tan = jvp(lambda x, y: fn(pl, x, y), (xp, yp), (txp, typ))
    out_t, tan_t = torch.func.jvp(lambda x, y: fn(torch, x, y), (xt, yt), (txt, tyt))
    close(out, out_t)
    close(tan, tan_t)
    assert not tan.requires_grad


def test_jvp_is_forward_mode_not_a_reverse_pass():
    # the tangent is carried by the ops themselves: no backward pass runs for a linear function
    from pylucid.autograd import engine

    ran = []
    orig = engine.run_backward

    def spy(*a, **k):
        ran.append(1)
        return orig(*a, **k)

    engine.run_backward = spy
    try:
        out, t = jvp(lambda x: (x * 3 + 1).sum() * 2, (pl.tensor([1.0, 2.0]),), (pl.tensor([1.0, 1.0]),))
    finally:
        engine.run_backward = orig
    assert float(t) == 12.0 and not ran


def test_jacrev_jacfwd_match_torch():
    (xp, xt), (yp, yt) = both(arr(4)), both(arr(3, 4))

    def f(m):
        return lambda x, y: (y @ x.sin()).tanh() * x[:3]

    for ours, theirs in ((jacrev, torch.func.jacrev), (jacfwd, torch.func.jacfwd)):
        close(ours(f(pl))(xp, yp), theirs(f(torch))(xt, yt))
        close(ours(f(pl), argnums=(0, 1))(xp, yp), theirs(f(torch), argnums=(0, 1))(xt, yt))


def test_hessian_matches_torch():
    (xp, xt) = both(arr(4))

    def f(m):
        return lambda x: (x.sin() * x.exp()).sum() * x.pow(2).sum() + m.logsumexp(x, 0)

    close(hessian(f(pl))(xp), torch.func.hessian(f(torch))(xt))
    close(jacrev(jacrev(f(pl)))(xp), torch.func.hessian(f(torch))(xt))
    close(jacfwd(jacfwd(f(pl)))(xp), torch.func.hessian(f(torch))(xt))


def test_hessian_of_an_mlp_loss_matches_torch():
    rng = np.random.default_rng(3)
    wa, xa = rng.standard_normal((3, 4)) * 0.5, rng.standard_normal((5, 4))
    (wp, wt), (xp, xt) = both(wa), both(xa)

    def f(m):
        return lambda w: m.softmax(xp @ w.t() if m is pl else xt @ w.t(), 1).square().sum()

    close(hessian(f(pl))(wp), torch.func.hessian(f(torch))(wt), atol=1e-9)


def test_linearize_matches_jvp():
    (xp, xt), (tp, tt) = both(arr(3)), both(arr(3))
    out, fn = linearize(lambda x: x.sin().exp(), xp)
    out_t, fn_t = torch.func.linearize(lambda x: x.sin().exp(), xt)
    close(out, out_t)
    close(fn(tp), fn_t(tt))


# ------------------------------------------------------------------ modules
def test_functional_call_and_stack_module_state():
    nets = [pl.nn.Linear(3, 2) for _ in range(4)]
    params, buffers = stack_module_state(nets)
    assert tuple(params["weight"].shape) == (4, 2, 3)
    x = pl.tensor(arr(5, 3))
    base = nets[0]
    out = vmap(lambda p, xi: functional_call(base, p, (xi,)), in_dims=(0, None))(params, x)
    for i, n in enumerate(nets):
        np.testing.assert_allclose(out.detach().numpy()[i], n(x).detach().numpy(), rtol=1e-6)
    w_before = base.weight
    with pytest.raises(RuntimeError, match="strict"):
        functional_call(base, {"weight": params["weight"][0]}, (x,), strict=True)
    assert base.weight is w_before


# ------------------------------------------------------------------ coverage
def test_rule_coverage():
    ops = registry.list_ops()
    batched, _ = _batching.check_coverage()
    forward, _ = _forward.check_coverage()
    diff = [n for n in ops if registry.op_class(n).schema.differentiable]
    diff_fwd = [n for n in diff if n in forward]
    print(f"\n{len(ops)} registered ops ({len(registry.declarations())} declarations): {len(batched)} with a "
          f"batching rule, {len(forward)} with a forward rule ({len(diff_fwd)}/{len(diff)} differentiable)")
    print("no batching rule:", sorted(set(ops) - set(batched)))
    assert len(diff_fwd) == len(diff)
    assert len(batched) >= 235
    for name in _batching.RULES:
        registry.schema(name)  # every rule is keyed by a registered op


def _torch_arg(a):
    if isinstance(a, np.ndarray):
        return torch.tensor(a)
    if isinstance(a, (list, tuple)) and any(isinstance(v, (np.ndarray, list, tuple)) for v in a):
        return type(a)(_torch_arg(v) for v in a)
    return a


def test_jvp_property_over_the_op_database():
    """Forward mode of every differentiable op in the database against ``torch.func.jvp`` of its reference."""
    from tests.opdb import all_entries

    checked, failed = set(), []
    rng = np.random.default_rng(5)
    for e in all_entries():
        try:
            cls = registry.op_class(e.name)
        except KeyError:
            continue
        if not cls.schema.differentiable or not e.grad or getattr(e, "sampler", False):
            continue
        for s in e.samples()[:4]:  # a few samples per op keep the test fast
            # the forward rules assume real tensors (docs/semantics/func.md; angle's samples compute with complex
            # intermediates); torch's logcumsumexp tangent
            # underflows to 0 on this sample where the exact one is the input's own tangent
            # eig's outputs are complex (complex tangents are outside the forward rules, docs/semantics/func.md)
            skip_op = e.name in ("angle", "eig")
            if not s.gradcheck or (e.name, s.name) == ("logcumsumexp", "huge-rising") or skip_op or any(
                    isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in s.args):
                continue
            args = list(s.args)
            pos = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size
                   and (s.grad_args is None or i in s.grad_args)]
            if not pos:
                continue
            tans = [rng.standard_normal(args[i].shape) for i in pos]

            def call(op, conv, prims, args=args, pos=pos, s=s):
                a = [conv(v) for v in args]
                for i, p in zip(pos, prims):
                    a[i] = p
                return op(*a, **s.kwargs)

            try:
                ref = torch.func.jvp(lambda *p: call(e.ref, _torch_arg, p), tuple(torch.tensor(args[i]) for i in pos),
                                     tuple(torch.tensor(t) for t in tans))
            except Exception:
                continue
            try:
                got = jvp(lambda *p: call(e.op, _to_pl, p), tuple(pl.tensor(args[i]) for i in pos),
                          tuple(pl.tensor(t) for t in tans))
            except Exception as exc:
                failed.append(f"{e.name}[{s.name}]: raised {type(exc).__name__}: {str(exc)[:150]}")
                continue
            have = _leaves(got[1])
            try:
                _same_tangents(have, _tleaves(ref[1]))
            except AssertionError as exc:
                # torch's forward-mode formulas are separate code; its double-vjp J·t is the second opinion
                try:
                    alt = torch.autograd.functional.jvp(lambda *p: call(e.ref, _torch_arg, p),
                                                        tuple(torch.tensor(args[i]) for i in pos),
                                                        tuple(torch.tensor(t) for t in tans))
                    _same_tangents(have, _tleaves(alt[1]))
                except Exception:
                    failed.append(f"{e.name}[{s.name}]: {str(exc)[:300]}")
                    continue
            checked.add(e.name)
    print(f"\njvp property: {len(checked)} ops checked against torch.func.jvp")
    assert not failed, "\n".join(failed)
    assert len(checked) >= 120


def _same_tangents(have, want):
    assert len(want) == len(have)
    for g, w in zip(have, want):
        if w.dtype.is_floating_point:
            np.testing.assert_allclose(g.numpy(), w.numpy(force=True), rtol=1e-6, atol=1e-8, equal_nan=True)


def _tleaves(out):
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(_tleaves(o))
    return res


def test_per_sample_grads_of_a_cnn_with_layer_norm_and_losses_match_torch():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 1, 2, 6, 6)), rng.integers(0, 3, (4, 1))
    arrays = (rng.standard_normal((3, 2, 3, 3)) * 0.3, rng.standard_normal(3) * 0.1,
              rng.standard_normal(48) * 0.1 + 1, rng.standard_normal(48) * 0.1, rng.standard_normal((3, 48)) * 0.1)

    def loss(Fm):
        def f(p, xi, yi):
            h = Fm.conv2d(xi, p[0], p[1]).tanh().reshape(1, -1)
            o = Fm.linear(Fm.layer_norm(h, (48,), p[2], p[3]), p[4])
            return (Fm.cross_entropy(o, yi) + Fm.huber_loss(o, o * 0.5) + Fm.mse_loss(o, o.square())
                    + Fm.binary_cross_entropy_with_logits(o, o.sigmoid().detach()))
        return f

    got = vmap(grad(loss(F)), in_dims=(None, 0, 0))([pl.tensor(a) for a in arrays], pl.tensor(x), pl.tensor(y))
    ref = torch.func.vmap(torch.func.grad(loss(torch.nn.functional)), in_dims=(None, 0, 0))(
        [torch.tensor(a) for a in arrays], torch.tensor(x), torch.tensor(y))
    close(got, ref, atol=1e-12)


def test_grads_of_min_max_inside_vmap_share_ties_as_torch():
    a = RNG.uniform(size=(4, 3, 5))
    a[0, 1, 2] = a[0, 1, 3]

    def f(x):
        return (x.amax(1) * x.amin() + x.max(dim=0)[0].sum()).sum()

    close(vmap(grad(f))(pl.tensor(a)), torch.func.vmap(torch.func.grad(f))(torch.tensor(a)))


def test_gradient_needing_forward_arrays_inside_vmap_names_the_op():
    x = pl.tensor(arr(3, 1, 4, 4))
    with pytest.raises(NotImplementedError, match="max_pool2d"):
        vmap(grad(lambda xi: F.max_pool2d(xi, 2).sum()))(x)


def test_compositions_match_torch():
    a, b = arr(3), arr(2, 3)
    P, T = (pl.tensor(a), pl.tensor(b)), (torch.tensor(a), torch.tensor(b))

    def f(x, y):
        return ((y @ x.sin()) * x[:2]).exp().sum()

    def g(x):
        return (x.sin() * x).sum()

    tf = torch.func
    close(jacrev(jacfwd(f))(*P), tf.jacrev(tf.jacfwd(f))(*T))
    h, ht = hessian(f, argnums=(0, 1))(*P), tf.hessian(f, argnums=(0, 1))(*T)
    for i in range(2):
        close(h[i], ht[i])
    close(jvp(lambda x: jvp(g, (x,), (pl.ones_like(x),))[1], (P[0],), (pl.ones_like(P[0]),)),
          tf.jvp(lambda x: tf.jvp(g, (x,), (torch.ones_like(x),))[1], (T[0],), (torch.ones_like(T[0]),)))
    close(vmap(lambda t: jvp(g, (P[0],), (t,))[1])(pl.eye(3, dtype=pl.float64)),
          tf.vmap(lambda t: tf.jvp(g, (T[0],), (t,))[1])(torch.eye(3, dtype=torch.float64)))
    close(jvp(vmap(g), (P[1],), (pl.ones_like(P[1]),)), tf.jvp(tf.vmap(g), (T[1],), (torch.ones_like(T[1]),)))
    close(grad(lambda x: jvp(g, (x,), (pl.ones_like(x),))[1])(P[0]),
          tf.grad(lambda x: tf.jvp(g, (x,), (torch.ones_like(x),))[1])(T[0]))
    close(jacfwd(lambda d: (d["a"] * d["b"]).sum(0))({"a": P[1], "b": P[1]})["a"],
          tf.jacfwd(lambda d: (d["a"] * d["b"]).sum(0))({"a": T[1], "b": T[1]})["a"])
    close(jacrev(lambda x: (x.sin(), x.cos()), has_aux=True)(P[0]),
          tf.jacrev(lambda x: (x.sin(), x.cos()), has_aux=True)(T[0]))


def test_grad_result_is_differentiable_by_autograd_when_the_input_requires_grad():
    a = arr(3)
    x, xt = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    grad(lambda v: (v.sin() * v).sum())(x).sum().backward()
    torch.func.grad(lambda v: (v.sin() * v).sum())(xt).sum().backward()
    close(x.grad, xt.grad)


@pytest.mark.parametrize("training", [True, False])
def test_per_sample_grads_through_batch_norm_match_torch(training):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 4, 2, 5)), rng.standard_normal(2), rng.standard_normal(2)
    rm, rv = rng.standard_normal(2), rng.uniform(0.5, 1, 2)

    def f(m):
        def g(w, b, xi):
            stats = (None, None) if training else (m.tensor(rm), m.tensor(rv))
            return (m.nn.functional.batch_norm(xi, *stats, w, b, training=training) ** 2).sum()
        return g

    got = vmap(grad(f(pl), argnums=(0, 1, 2)), in_dims=(None, None, 0))(pl.tensor(w), pl.tensor(b), pl.tensor(x))
    ref = torch.func.vmap(torch.func.grad(f(torch), argnums=(0, 1, 2)), in_dims=(None, None, 0))(
        torch.tensor(w), torch.tensor(b), torch.tensor(x))
    close(got, ref, atol=1e-12)


def test_batch_norm_updating_running_stats_inside_vmap_raises():
    # the running buffers would take an in-place update from every sample at once
    rm, rv = pl.zeros(3), pl.ones(3)
    with pytest.raises(NotImplementedError, match="running statistics"):
        vmap(lambda xi: F.batch_norm(xi, rm, rv, training=True))(pl.tensor(arr(2, 4, 3)))


def test_per_sample_embedding_grads_match_torch():
    rng = np.random.default_rng(0)
    E, idx = rng.standard_normal((7, 3)), rng.integers(0, 7, (5, 4))
    got = vmap(grad(lambda e, i: (pl.ops.nn.embedding_op(e, i, padding_idx=2) ** 2).sum()), in_dims=(None, 0))(
        pl.tensor(E), pl.tensor(idx))
    ref = torch.func.vmap(torch.func.grad(lambda e, i: (torch.nn.functional.embedding(i, e, padding_idx=2) ** 2).sum()),
                          in_dims=(None, 0))(torch.tensor(E), torch.tensor(idx))
    close(got, ref)


# ------------------------------------------------------------------ recurrent layers
def _f32(*shape):
    return arr(*shape).astype(np.float32)


def _copy_to_torch(m, tm):
    with torch.no_grad():
        for p, tp in zip(m.parameters(), tm.parameters()):
            tp.copy_(torch.tensor(p.detach().numpy()))


@pytest.mark.parametrize("name, kw", [("LSTM", {}), ("GRU", {}),
                                      ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
                                      ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True})])
def test_vmap_over_recurrent_network_matches_a_loop(name, kw):
    # torch.func.vmap has no batching rule for aten::lstm / aten::gru: PyTorch's per-sample loop is the oracle
    m, tm = getattr(pl.nn, name)(3, 4, **kw), getattr(torch.nn, name)(3, 4, **kw)
    _copy_to_torch(m, tm)
    for shape in ((5, 6, 2, 3), (5, 6, 3)):  # batched and unbatched samples
        x = _f32(*shape)
        got = vmap(lambda xi: m(xi)[0])(pl.tensor(x))
        want = torch.stack([tm(torch.tensor(x[i]))[0] for i in range(shape[0])])
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-6)
        h_n = vmap(lambda xi: m(xi)[1][0] if name == "LSTM" else m(xi)[1])(pl.tensor(x))
        for i in range(shape[0]):
            ref = tm(torch.tensor(x[i]))[1]
            ref = ref[0] if name == "LSTM" else ref
            np.testing.assert_allclose(h_n.detach().numpy()[i], ref.detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_per_sample_recurrent_grads_match_torch(name):
    m, tm = getattr(pl.nn, name)(3, 4), getattr(torch.nn, name)(3, 4)
    _copy_to_torch(m, tm)
    x = _f32(4, 5, 3)
    params = {k: v.detach() for k, v in m.named_parameters()}
    got = vmap(grad(lambda p, xi: (functional_call(m, p, (xi,))[0] ** 2).sum()), in_dims=(None, 0))(
        params, pl.tensor(x))
    for i in range(4):
        tm.zero_grad()
        (tm(torch.tensor(x[i]))[0] ** 2).sum().backward()
        for k, tp in tm.named_parameters():
            np.testing.assert_allclose(got[k].numpy()[i], tp.grad.numpy(), atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_vmap_over_recurrent_cell_matches_torch(name):
    m, tm = getattr(pl.nn, name)(3, 4), getattr(torch.nn, name)(3, 4)
    _copy_to_torch(m, tm)
    x = _f32(5, 2, 3)
    h = _f32(5, 2, 4)
    if name == "LSTMCell":  # torch.func.vmap has no rule for aten::lstm_cell: a loop is the oracle
        got = vmap(lambda xi, hi: m(xi, (hi, hi))[1])(pl.tensor(x), pl.tensor(h))
        want = torch.stack([tm(torch.tensor(x[i]), (torch.tensor(h[i]),) * 2)[1] for i in range(5)])
    else:
        got = vmap(m)(pl.tensor(x), pl.tensor(h))
        with pytest.warns(UserWarning, match="performance drop"):
            want = torch.func.vmap(tm)(torch.tensor(x), torch.tensor(h))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("steps", [4, 0])
def test_vmap_over_fused_recurrent_layers(reverse, steps):
    # the whole-sequence ops under vmap, with every argument batched (per-sample weights too)
    from pylucid.ops import rnn

    V, B, H = 3, 2, 5
    x4, x3 = pl.tensor(_f32(V, steps, B, 4 * H)), pl.tensor(_f32(V, steps, B, 3 * H))
    h0, c0, w = pl.tensor(_f32(V, B, H)), pl.tensor(_f32(B, H)), pl.tensor(_f32(V, 4 * H, H))
    b = pl.tensor(_f32(3 * H))
    got = vmap(lambda x, h, w: rnn.lstm_layer(x, h, c0, w, reverse=reverse))(x4, h0, w)
    for i in range(V):
        for g, r in zip(got, rnn.lstm_layer(x4[i], h0[i], c0, w[i], reverse=reverse)):
            np.testing.assert_allclose(g.numpy()[i], r.numpy(), atol=1e-6)
    got = vmap(lambda x, h, w: rnn.gru_layer(x, h, w, b, reverse=reverse))(x3, h0, w[:, :3 * H])
    for i in range(V):
        for g, r in zip(got, rnn.gru_layer(x3[i], h0[i], w[i, :3 * H], b, reverse=reverse)):
            np.testing.assert_allclose(g.numpy()[i], r.numpy(), atol=1e-6)
