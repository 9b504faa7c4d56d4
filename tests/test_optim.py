"""pylucid.optim against torch.optim: every optimizer and its main options over 20 steps on the same
parameters and the same gradients; state_dict round trips; the Optimizer base (groups, zero_grad,
hooks, errors)."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch

import pylucid
from pylucid import optim

SHAPES = [(3, 4), (5,), ()]
STEPS = 20


@contextlib.contextmanager
def torch_default_dtype(dtype):
    # PyTorch keeps scalar state (NAdam's mu_product) in the default dtype: match pylucid's double precision
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _grad_np(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    # a non-linear, parameter-dependent gradient: trajectories diverge if an update formula is off
    return 0.3 * x**3 - 0.5 * x + c


def _problem(steps=STEPS, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s) for s in SHAPES]
    consts = [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]
    return init, consts


def run_pair(pl_cls, th_cls, kwargs, *, dtype="float64", steps=STEPS, groups=None, skip_grad=None):
    """Run both optimizers on identical parameters, feeding each the same gradient function of its own
    parameters; return the two parameter trajectories (lists of numpy arrays per step)."""
    np_dtype = np.dtype(dtype)
    init, consts = _problem(steps)
    sign = -1.0 if kwargs.get("maximize") else 1.0  # ascend on the negated objective: stays bounded
    pl_params = [pylucid.tensor(x.astype(np_dtype), requires_grad=True) for x in init]
    th_params = [torch.tensor(x.astype(np_dtype), requires_grad=True) for x in init]

    def make(cls, params):
        if groups is None:
            return cls(params, **kwargs)
        return cls([{"params": [params[i] for i in idx], **extra} for idx, extra in groups], **kwargs)

    with torch_default_dtype(torch.float64 if dtype == "float64" else torch.float32):
        popt, topt = make(pl_cls, pl_params), make(th_cls, th_params)
        pl_traj, th_traj = [], []
        for t in range(steps):
            for i, (pp, tp, c) in enumerate(zip(pl_params, th_params, consts[t])):
                if skip_grad is not None and skip_grad(t, i):
                    pp.grad = None
                    tp.grad = None
                    continue
                pp.grad = pylucid.tensor(sign * _grad_np(pp.detach().numpy().astype(np.float64), c).astype(np_dtype))
                tp.grad = torch.tensor(sign * _grad_np(tp.detach().numpy().astype(np.float64), c).astype(np_dtype))
            popt.step()
            topt.step()
            pl_traj.append([p.detach().numpy().copy() for p in pl_params])
            th_traj.append([p.detach().numpy().copy() for p in th_params])
    return pl_traj, th_traj, popt, topt


def assert_traj_close(pl_traj, th_traj, dtype="float64"):
    rtol, atol = (1e-9, 1e-11) if dtype == "float64" else (2e-5, 2e-6)
    for t, (a_list, b_list) in enumerate(zip(pl_traj, th_traj)):
        for i, (a, b) in enumerate(zip(a_list, b_list)):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {t + 1}, parameter {i}")


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True, maximize=True, weight_decay=0.05)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.2, amsgrad=True)),
    ("AdamW", dict(lr=0.05, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1, eps=1e-4)),
    ("RMSprop", dict(lr=0.01, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1, weight_decay=0.05)),
    ("Adagrad", dict(lr=0.1, maximize=True, eps=1e-6)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.5, maximize=True, eps=1e-4)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.05, maximize=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.9), maximize=True)),
]


def _case_id(case):
    name, kw = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_torch_float64(case):
    name, kwargs = case
    pl_traj, th_traj, _, _ = run_pair(getattr(optim, name), getattr(torch.optim, name), kwargs)
    assert_traj_close(pl_traj, th_traj)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                                  "RAdam"])
def test_matches_torch_float32(name):
    kwargs = {"SGD": dict(lr=0.05, momentum=0.9, nesterov=True), "Adadelta": dict(lr=0.5)}.get(name, dict(lr=0.01))
    pl_traj, th_traj, _, _ = run_pair(getattr(optim, name), getattr(torch.optim, name), kwargs, dtype="float32")
    assert_traj_close(pl_traj, th_traj, dtype="float32")


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_param_groups_and_missing_grads(name):
    # two groups with their own lr / weight decay; parameter 1 gets no gradient on odd steps (skipped)
    kwargs = dict(lr=0.05)
    if name == "SGD":
        kwargs["momentum"] = 0.9
    groups = [([0, 2], dict(lr=0.02)), ([1], dict(weight_decay=0.1))]
    pl_traj, th_traj, popt, topt = run_pair(getattr(optim, name), getattr(torch.optim, name), kwargs, groups=groups,
                                            skip_grad=lambda t, i: i == 1 and t % 2 == 1)
    assert_traj_close(pl_traj, th_traj)
    assert [g["lr"] for g in popt.param_groups] == [g["lr"] for g in topt.param_groups]
    assert popt.param_groups[1]["weight_decay"] == 0.1 and popt.param_groups[0]["weight_decay"] == 0


def test_state_layout_matches_torch():
    for name, kwargs in [("Adam", dict(amsgrad=True)), ("SGD", dict(momentum=0.9)), ("RMSprop", dict(centered=True,
                                                                                                     momentum=0.1)),
                         ("Adagrad", {}), ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {})]:
        _, _, popt, topt = run_pair(getattr(optim, name), getattr(torch.optim, name), dict(lr=0.01, **kwargs),
                                    steps=2)
        psd, tsd = popt.state_dict(), topt.state_dict()
        assert sorted(psd["state"]) == sorted(tsd["state"]), name
        for k in tsd["state"]:
            assert sorted(psd["state"][k]) == sorted(tsd["state"][k]), name
            for key, tv in tsd["state"][k].items():
                pv = psd["state"][k][key]
                if isinstance(tv, torch.Tensor) and tv.ndim:
                    np.testing.assert_allclose(pv.numpy(), tv.numpy(), rtol=1e-9, atol=1e-12)
                else:
                    assert float(pv) == pytest.approx(float(tv), rel=1e-6), (name, key)
        assert [g["params"] for g in psd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
        shared = set(psd["param_groups"][0]) & set(tsd["param_groups"][0])
        assert {"lr", "params"} <= shared


# ---------------------------------------------------------------------------------------------- LBFGS
def _rosenbrock_closure(opt, params, lib):
    def closure():
        opt.zero_grad()
        x, y = params
        loss = ((1 - x) ** 2).sum() + (((y - x * x) ** 2) * 100).sum()
        loss.backward()
        return loss

    return closure


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("history_size", [3, 100])
def test_lbfgs_matches_torch(line_search_fn, history_size):
    init = [np.array([-1.2, 0.5, 1.5]), np.array([1.0, -0.3, 2.0])]
    pp = [pylucid.tensor(x, requires_grad=True) for x in init]
    tp = [torch.tensor(x, requires_grad=True) for x in init]
    kwargs = dict(lr=1 if line_search_fn else 0.05, max_iter=8, history_size=history_size,
                  line_search_fn=line_search_fn)
    popt, topt = optim.LBFGS(pp, **kwargs), torch.optim.LBFGS(tp, **kwargs)
    pc, tc = _rosenbrock_closure(popt, pp, pylucid), _rosenbrock_closure(topt, tp, torch)
    for _ in range(4):
        pl_loss, th_loss = popt.step(pc), topt.step(tc)
        assert pl_loss.item() == pytest.approx(th_loss.item(), rel=1e-7, abs=1e-10)
        for a, b in zip(pp, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7, atol=1e-9)
    ps, ts = popt.state[pp[0]], topt.state[tp[0]]
    assert ps["func_evals"] == ts["func_evals"] and ps["n_iter"] == ts["n_iter"]


def test_lbfgs_converges_and_needs_closure():
    w = pylucid.tensor([3.0, -1.0, 0.5], dtype=pylucid.float64, requires_grad=True)
    opt = optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - 2.0) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), [2.0, 2.0, 2.0], atol=1e-6)
    with pytest.raises(RuntimeError, match="closure"):
        opt.step()
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [w]}, {"params": [pylucid.zeros(1, requires_grad=True)]}])


# ---------------------------------------------------------------------------------------- closures
def test_step_closure_returns_loss_and_runs_with_grad():
    w = pylucid.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    seen = {}

    def closure():
        opt.zero_grad()
        seen["grad_mode"] = pylucid.is_grad_enabled()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with pylucid.no_grad():
        loss = opt.step(closure)
    assert seen["grad_mode"] is True
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.6], rtol=1e-6)


# ------------------------------------------------------------------------------------- state dicts
OPTIMIZERS_FOR_RESUME = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("Adadelta", dict(lr=0.5)),
    ("Adamax", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05)),
]


def _train(opt_factory, params, consts, start, stop, opt=None):
    opt = opt or opt_factory(params)
    for t in range(start, stop):
        for p, c in zip(params, consts[t]):
            p.grad = pylucid.tensor(_grad_np(p.detach().numpy(), c).astype(np.float32))
        opt.step()
    return opt


@pytest.mark.parametrize("case", OPTIMIZERS_FOR_RESUME, ids=[c[0] for c in OPTIMIZERS_FOR_RESUME])
def test_state_dict_resume_is_bit_exact(case):
    name, kwargs = case
    init, consts = _problem()
    factory = lambda ps: getattr(optim, name)(ps, **kwargs)  # noqa: E731

    ref = [pylucid.tensor(x.astype(np.float32), requires_grad=True) for x in init]
    _train(factory, ref, consts, 0, STEPS)

    first = [pylucid.tensor(x.astype(np.float32), requires_grad=True) for x in init]
    opt1 = _train(factory, first, consts, 0, STEPS // 2)
    saved_opt = copy.deepcopy(opt1.state_dict())
    saved_params = [p.detach().numpy().copy() for p in first]
    _train(factory, first, consts, STEPS // 2, STEPS, opt=opt1)  # keeps training: the saved copy must not change

    fresh = [pylucid.tensor(x, requires_grad=True) for x in saved_params]
    opt2 = factory([pylucid.tensor(np.zeros_like(x), requires_grad=True) for x in saved_params])
    opt2 = factory(fresh)
    opt2.load_state_dict(saved_opt)
    _train(factory, fresh, consts, STEPS // 2, STEPS, opt=opt2)
    for a, b, c in zip(ref, fresh, first):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
        assert np.array_equal(a.detach().numpy(), c.detach().numpy())


def test_state_dict_format_and_load_validation():
    a = pylucid.zeros(2, requires_grad=True)
    b = pylucid.zeros(3, requires_grad=True)
    c = pylucid.zeros(1, requires_grad=True)
    opt = optim.Adam([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1)
    for p in (a, b, c):
        p.grad = pylucid.ones_like(p)
    opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["param_groups"][1]["params"] == [2]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert set(sd["state"]) == {0, 1, 2} and sd["state"][0]["step"] == 1
    assert isinstance(sd["state"][1]["exp_avg"], pylucid.Tensor)

    # a torch-style step (a 0-d tensor) is accepted and becomes a number; tensors are copied, not aliased
    sd2 = copy.deepcopy(sd)
    sd2["state"][0]["step"] = pylucid.tensor(1.0)
    opt2 = optim.Adam([{"params": [a, b]}, {"params": [c]}], lr=0.1)
    opt2.load_state_dict(sd2)
    assert opt2.state[a]["step"] == 1.0
    assert opt2.state[b]["exp_avg"] is not sd2["state"][1]["exp_avg"]
    assert opt2.param_groups[1]["lr"] == 0.5 and opt2.param_groups[1]["params"][0] is c

    with pytest.raises(ValueError, match="parameter groups"):
        optim.Adam([a, b, c]).load_state_dict(sd)
    with pytest.raises(ValueError, match="group 0"):
        optim.Adam([{"params": [a]}, {"params": [b, c]}]).load_state_dict(sd)


def test_load_state_dict_casts_to_param_dtype():
    p = pylucid.zeros(3, dtype=pylucid.float64, requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    sd = {"state": {0: {"momentum_buffer": pylucid.ones(3, dtype=pylucid.float32)}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
    opt.load_state_dict(sd)
    assert opt.state[p]["momentum_buffer"].dtype == pylucid.float64


# ------------------------------------------------------------------------------ the Optimizer base
def test_zero_grad_modes():
    w = pylucid.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_add_param_group_and_defaults():
    a = pylucid.zeros(2, requires_grad=True)
    b = pylucid.zeros(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["lr"] == 0.01
    with pytest.raises(ValueError, match="more than one"):
        opt.add_param_group({"params": [a]})
    named = optim.Adam([("weight", a), ("bias", b)])
    assert named.param_groups[0]["param_names"] == ["weight", "bias"]
    assert "Parameter Group 0" in repr(opt) and "momentum: 0.9" in repr(opt)


def test_constructor_errors():
    w = pylucid.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="sets"):
        optim.SGD({w}, lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        optim.SGD([np.zeros(2)], lr=0.1)
    nonleaf = w * 2
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([nonleaf], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([w], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="epsilon"):
        optim.RMSprop([w], eps=-1.0)
    with pytest.raises(ValueError, match="rho"):
        optim.Adadelta([w], rho=1.5)
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS([w], line_search_fn="armijo")


def test_step_hooks_and_foreach_flags_accepted():
    w = pylucid.tensor([1.0], requires_grad=True)
    opt = optim.Adam([w], lr=0.1, foreach=True, fused=False, capturable=False, differentiable=False)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    h2 = opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    g1 = optim.register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append("global-pre"))
    w.grad = pylucid.ones(1)
    opt.step()
    assert calls == ["global-pre", "pre", "post"]
    for h in (h1, h2, g1):
        h.remove()
    opt.step()
    assert calls == ["global-pre", "pre", "post"]


class _HeavyBall(optim.Optimizer):
    """An optimizer written against the base's step template only: ``b = momentum * b + g``, ``p -= lr * b``;
    with ``b`` starting at zero this is PyTorch's SGD with momentum (whose buffer starts as the first gradient)."""

    _state_names = ("momentum_buffer",)

    def __init__(self, params, lr, momentum, weight_decay=0, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, g, state, step, lr, group):
        buf = state["momentum_buffer"]
        buf[...] = buf * group["momentum"] + g
        p[...] = p - buf * lr


@pytest.mark.parametrize("kwargs", [dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.5, weight_decay=0.1),
                                    dict(lr=0.05, momentum=0.8, maximize=True)])
def test_step_template_serves_a_new_optimizer(kwargs):
    # the base step: closure, groups, parameters without a gradient skipped, L2 weight decay and maximize
    # applied, state created from _state_names, step counted
    groups = [([0, 2], dict(lr=0.02)), ([1], {})]
    pl_traj, th_traj, popt, _ = run_pair(_HeavyBall, torch.optim.SGD, kwargs, groups=groups,
                                         skip_grad=lambda t, i: i == 1 and t % 2 == 1)
    assert_traj_close(pl_traj, th_traj)
    state = popt.state_dict()["state"]
    assert [list(state[i]) for i in range(3)] == [["step", "momentum_buffer"]] * 3
    # state dict indices follow the groups: parameters 0 and 2, then parameter 1 (half its steps skipped)
    assert [state[i]["step"] for i in range(3)] == [STEPS, STEPS, STEPS // 2]
    w = pylucid.tensor([1.0], requires_grad=True)
    opt = _HeavyBall([w], lr=0.1, momentum=0.0)
    assert opt.step(lambda: pylucid.is_grad_enabled()) is True  # the closure runs with grad mode on
    assert len(opt.state) == 0  # no gradient yet: nothing stepped, no state


def test_optimizer_without_update_says_so():
    w = pylucid.tensor([1.0], requires_grad=True)
    opt = optim.Optimizer([w], dict(lr=0.1))
    w.grad = pylucid.ones(1)
    with pytest.raises(NotImplementedError, match="Optimizer: an optimizer implements step"):
        opt.step()


def test_update_is_in_place_and_bumps_version():
    w = pylucid.tensor([1.0, 2.0], requires_grad=True)
    alias = w.detach()
    v0 = w._version[0]
    opt = optim.SGD([w], lr=0.5, momentum=0.9)
    w.grad = pylucid.ones(2)
    opt.step()
    assert alias.tolist() == [0.5, 1.5]
    assert w._version[0] > v0
    assert w.grad_fn is None and w.requires_grad


def test_lr_as_tensor():
    w = pylucid.tensor([1.0], requires_grad=True)
    opt = optim.SGD([w], lr=pylucid.tensor(0.5))
    w.grad = pylucid.ones(1)
    opt.step()
    assert w.tolist() == [0.5]


# ----------------------------------------------------------------- the fused multi-tensor SGD op
# ``pylucid._fused_sgd_`` is what SGD's step calls for contiguous float32/float64 parameters (every device).
@pytest.mark.parametrize("kwargs", [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
                                    dict(momentum=0.8, nesterov=True, weight_decay=0.1),
                                    dict(momentum=0.5, maximize=True, weight_decay=0.05), dict(weight_decay=0.2)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sgd_fused_step_matches_torch(kwargs, dtype):
    calls = []
    real = pylucid.ops._fused_sgd_
    init, consts = _problem(steps=6)
    np_dtype = np.dtype(dtype)
    ps = [pylucid.tensor(x.astype(np_dtype), requires_grad=True) for x in init]
    tps = [torch.tensor(x.astype(np_dtype), requires_grad=True) for x in init]
    opt, topt = pylucid.optim.SGD(ps, lr=0.05, **kwargs), torch.optim.SGD(tps, lr=0.05, **kwargs)
    pylucid.ops._fused_sgd_ = lambda *a, **k: (calls.append(len(a[0])), real(*a, **k))
    try:
        for t in range(6):
            for p, tp, c in zip(ps, tps, consts[t]):
                g = _grad_np(p.detach().numpy().astype(np.float64), c).astype(np_dtype)
                p.grad, tp.grad = pylucid.tensor(g), torch.tensor(g)
            opt.step()
            topt.step()
            # PyTorch's ``add(alpha=)`` may round a product and its sum once (an FMA); NumPy rounds twice
            tol = dict(rtol=1e-12, atol=1e-14) if dtype == "float64" else dict(rtol=2e-6, atol=2e-7)
            for i, (p, tp) in enumerate(zip(ps, tps)):
                np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), err_msg=f"step {t}, {i}", **tol)
                if kwargs.get("momentum"):
                    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(),
                                               topt.state[tp]["momentum_buffer"].numpy(), **tol)
    finally:
        pylucid.ops._fused_sgd_ = real
    assert calls == [len(ps)] * 6


def test_sgd_fused_step_first_step_of_a_late_parameter_and_fallbacks():
    # a parameter whose gradient appears only at step 2 gets its buffer then (= its gradient, PyTorch's clone);
    # a float16 parameter keeps the loop
    a, b = pylucid.tensor([1.0, 2.0], requires_grad=True), pylucid.tensor([3.0], requires_grad=True)
    ta, tb = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0], requires_grad=True)
    opt, topt = pylucid.optim.SGD([a, b], lr=0.1, momentum=0.9), torch.optim.SGD([ta, tb], lr=0.1, momentum=0.9)
    a.grad, ta.grad = pylucid.tensor([0.5, -1.0]), torch.tensor([0.5, -1.0])
    opt.step(), topt.step()
    b.grad, tb.grad = pylucid.tensor([2.0]), torch.tensor([2.0])
    opt.step(), topt.step()
    assert a.tolist() == pytest.approx(ta.tolist()) and b.tolist() == pytest.approx(tb.tolist())
    h = pylucid.tensor([1.0, 2.0], dtype=pylucid.float16, requires_grad=True)
    h.grad = pylucid.tensor([1.0, 1.0], dtype=pylucid.float16)
    pylucid.optim.SGD([h], lr=0.5, momentum=0.9).step()
    assert h.dtype is pylucid.float16 and h.tolist() == [0.5, 1.5]


def test_fused_sgd_op_errors():
    p, g, b = (pylucid.zeros(3) for _ in range(3))
    with pytest.raises(ValueError, match="_fused_sgd_: params has 1 tensors but momentum_buffers has 0"):
        pylucid._fused_sgd_([p], [g], [], lr=0.1, momentum=0.9)
    with pytest.raises(pylucid.ShapeMismatch, match=r"grads\[0\] has shape \(2,\)"):
        pylucid._fused_sgd_([p], [pylucid.zeros(2)], [], lr=0.1)
    leaf = pylucid.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        pylucid._fused_sgd_([leaf], [g], [b], lr=0.1, momentum=0.9)
    pylucid._fused_sgd_([], [], [], lr=0.1)  # nothing to update


# ----------------------------------------------------------------- the fused multi-tensor Adam op
# ``pylucid._fused_adam_`` is the op Adam/AdamW's fused step calls (one backend call for a whole group;
# on CUDA one kernel launch per dtype). It runs on every device; these tests hold its CPU path to PyTorch.
fused_adam_op = pytest.mark.skipif(not hasattr(pylucid.ops, "_fused_adam_"),
                                   reason="pylucid.ops._fused_adam_ is not declared in this checkout")


@fused_adam_op
@pytest.mark.parametrize("kwargs", [dict(), dict(weight_decay=0.1), dict(weight_decay=0.1, decoupled=True),
                                    dict(maximize=True, weight_decay=0.05)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_adam_op_matches_torch(kwargs, dtype):
    hp = dict(lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6)
    th_cls = torch.optim.AdamW if kwargs.get("decoupled") else torch.optim.Adam
    th_kw = dict(lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                 weight_decay=kwargs.get("weight_decay", 0.0), maximize=kwargs.get("maximize", False))
    init, consts = _problem()
    np_dtype = np.dtype(dtype)
    ps = [pylucid.tensor(x.astype(np_dtype)) for x in init]
    ms, vs = [pylucid.zeros_like(p) for p in ps], [pylucid.zeros_like(p) for p in ps]
    tps = [torch.tensor(x.astype(np_dtype), requires_grad=True) for x in init]
    topt = th_cls(tps, **th_kw)
    rtol, atol = (1e-9, 1e-11) if dtype == "float64" else (2e-5, 2e-6)
    for t in range(STEPS):
        grads = [_grad_np(p.numpy().astype(np.float64), c).astype(np_dtype) for p, c in zip(ps, consts[t])]
        versions = [p._version[0] for p in ps]
        pylucid._fused_adam_(ps, [pylucid.tensor(g) for g in grads], ms, vs, step=t + 1, **hp, **kwargs)
        assert [p._version[0] for p in ps] == [v + 1 for v in versions]
        for tp, g in zip(tps, grads):
            tp.grad = torch.tensor(g)
        topt.step()
        for i, (p, m, tp) in enumerate(zip(ps, ms, tps)):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"step {t + 1}, parameter {i}")
            np.testing.assert_allclose(m.numpy(), topt.state[tp]["exp_avg"].numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"step {t + 1}, exp_avg {i}")


@fused_adam_op
def test_fused_adam_op_half_precision_computes_in_float32():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    g = np.array([0.25, -1.0, 3.0], np.float32)
    for dtype in (pylucid.float16, pylucid.bfloat16):
        p, m, v = pylucid.tensor(x).to(dtype), pylucid.zeros(3, dtype=dtype), pylucid.zeros(3, dtype=dtype)
        pylucid._fused_adam_([p], [pylucid.tensor(g).to(dtype)], [m], [v], step=1, lr=0.1, beta1=0.9, beta2=0.999,
                             eps=1e-8)
        tp = torch.tensor(pylucid.tensor(x).to(dtype).float().numpy(), requires_grad=True)
        tp.grad = torch.tensor(pylucid.tensor(g).to(dtype).float().numpy())
        torch.optim.Adam([tp], lr=0.1).step()
        assert p.dtype is dtype and m.dtype is dtype
        np.testing.assert_array_equal(p.float().numpy(), tp.detach().to(getattr(torch, dtype.name)).float().numpy())


@fused_adam_op
def test_fused_adam_op_errors():
    p, g, m, v = (pylucid.zeros(3) for _ in range(4))
    hp = dict(step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    with pytest.raises(ValueError, match="_fused_adam_: params has 1 tensors but grads has 0"):
        pylucid._fused_adam_([p], [], [m], [v], **hp)
    with pytest.raises(TypeError, match=r"grads\[0\] must be a Tensor, got ndarray"):
        pylucid._fused_adam_([p], [np.zeros(3)], [m], [v], **hp)
    with pytest.raises(pylucid.ShapeMismatch, match=r"exp_avgs\[0\] has shape \(2,\), params\[0\] has \(3,\)"):
        pylucid._fused_adam_([p], [g], [pylucid.zeros(2)], [v], **hp)
    with pytest.raises(pylucid.DtypeMismatch, match=r"grads\[0\] is pylucid.float64"):
        pylucid._fused_adam_([p], [pylucid.zeros(3, dtype=pylucid.float64)], [m], [v], **hp)
    with pytest.raises(pylucid.DtypeMismatch, match="a floating dtype is expected"):
        ints = [pylucid.zeros(3, dtype=pylucid.int64) for _ in range(4)]
        pylucid._fused_adam_(*([t] for t in ints), **hp)
    leaf = pylucid.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        pylucid._fused_adam_([leaf], [g], [m], [v], **hp)
    with pylucid.no_grad():
        pylucid._fused_adam_([leaf], [pylucid.ones(3)], [m], [v], **hp)
    assert leaf.tolist() == pytest.approx([-0.1] * 3)
    pylucid._fused_adam_([], [], [], [], **hp)  # nothing to update


# ----------------------------------------------------------------- the fused CPU Adam (blocked in-place passes)
# shapes that cross the CPU kernel's block boundary (2**14 elements), a transposed (strided) parameter and a
# 0-d one, float32 and float64, every option of Adam/AdamW
_BLOCK_SHAPES = [(130, 300), (7,), ()]


@pytest.mark.parametrize("name,kwargs", [
    ("Adam", dict()), ("Adam", dict(amsgrad=True)), ("Adam", dict(weight_decay=0.1, maximize=True)),
    ("Adam", dict(amsgrad=True, maximize=True, weight_decay=0.05, betas=(0.3, 0.9))),
    ("AdamW", dict()), ("AdamW", dict(weight_decay=0.2, amsgrad=True)), ("AdamW", dict(maximize=True, eps=1e-3)),
    ("Adam", dict(foreach=True, fused=False, capturable=True)), ("AdamW", dict(fused=True, differentiable=False)),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cpu_fused_adam_matches_torch_over_steps(name, kwargs, dtype):
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(s).astype(dtype) for s in _BLOCK_SHAPES]
    pl_ps = [pylucid.tensor(x, requires_grad=True) for x in init]
    th_ps = [torch.tensor(x, requires_grad=True) for x in init]
    # a strided parameter: the transpose of a contiguous leaf's storage
    base = rng.standard_normal((40, 60)).astype(dtype)
    pl_t, th_t = pylucid.tensor(base).t().detach().requires_grad_(), torch.tensor(base).t().detach().requires_grad_()
    assert not pl_t.is_contiguous()
    pl_ps.append(pl_t)
    th_ps.append(th_t)
    popt = getattr(optim, name)(pl_ps, lr=0.05, **kwargs)
    # the flags are accepted and change nothing; PyTorch's own fused CPU step disagrees with its single-tensor
    # step on a transposed parameter (torch 2.13), so the oracle runs the single-tensor step
    topt = getattr(torch.optim, name)(th_ps, lr=0.05, **{k: v for k, v in kwargs.items()
                                                       if k not in ("capturable", "fused")})
    rtol, atol = (1e-9, 1e-11) if dtype == "float64" else (2e-5, 2e-6)
    for t in range(12):
        for pp, tp in zip(pl_ps, th_ps):
            c = rng.standard_normal(pp.shape).astype(dtype)
            g = _grad_np(tp.detach().numpy().astype(np.float64), c).astype(dtype)
            pp.grad, tp.grad = pylucid.tensor(g), torch.tensor(g)
        versions = [p._version[0] for p in pl_ps]
        popt.step()
        topt.step()
        assert [p._version[0] for p in pl_ps] == [v + 1 for v in versions]
        for i, (pp, tp) in enumerate(zip(pl_ps, th_ps)):
            np.testing.assert_allclose(pp.detach().numpy(), tp.detach().numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"step {t + 1}, parameter {i}")
            for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if kwargs.get("amsgrad") else ()):
                np.testing.assert_allclose(popt.state[pp][key].numpy(), topt.state[tp][key].numpy(), rtol=rtol,
                                           atol=atol, err_msg=f"step {t + 1}, {key} {i}")
        assert popt.state[pl_ps[0]]["step"] == t + 1


def test_cpu_fused_adam_gradscaler_flag_skips_the_step():
    w = pylucid.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([w], lr=0.1, capturable=True)
    w.grad = pylucid.tensor([1.0, 1.0])
    opt.found_inf = pylucid.tensor([1.0])
    opt.step()
    assert w.tolist() == [1.0, 2.0] and len(opt.state[w]) == 0
    opt.found_inf = pylucid.tensor([0.0])
    opt.step()
    assert w.tolist() == pytest.approx([0.9, 1.9])


def test_cpu_fused_adam_op_amsgrad_and_half_precision():
    # the op itself: AMSGrad's running maximum, and float16 computed in float32 and rounded once
    x, g = np.array([1.0, -2.0, 0.5], np.float32), np.array([0.25, -1.0, 3.0], np.float32)
    hp = dict(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    p, m, v, vmax = pylucid.tensor(x), pylucid.zeros(3), pylucid.zeros(3), pylucid.full((3,), 5.0)
    pylucid._fused_adam_([p], [pylucid.tensor(g)], [m], [v], step=1, max_exp_avg_sqs=[vmax], **hp)
    assert vmax.tolist() == [5.0, 5.0, 5.0] and vmax._version[0] == 1
    tp = torch.tensor(x, requires_grad=True)
    tp.grad = torch.tensor(g)
    topt = torch.optim.Adam([tp], lr=0.1, amsgrad=True)
    topt.state[tp].update(step=torch.tensor(0.0), exp_avg=torch.zeros(3), exp_avg_sq=torch.zeros(3),
                          max_exp_avg_sq=torch.full((3,), 5.0))
    topt.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6)
    h = pylucid.tensor(x).to(pylucid.float16)
    mh, vh = pylucid.zeros(3, dtype=pylucid.float16), pylucid.zeros(3, dtype=pylucid.float16)
    pylucid._fused_adam_([h], [pylucid.tensor(g).to(pylucid.float16)], [mh], [vh], step=1, **hp)
    assert h.dtype is pylucid.float16
    np.testing.assert_array_equal(h.numpy(), (x - np.float32(0.1) * np.sign(g)).astype(np.float16))
