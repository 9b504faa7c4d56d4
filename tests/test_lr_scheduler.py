"""pylucid.optim.lr_scheduler against torch.optim.lr_scheduler: the lr (and cycled momentum) of every
group over 40 steps, chained and sequential schedulers, ReduceLROnPlateau, state_dict round trips."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import pylucid
from pylucid import optim
from pylucid.optim import lr_scheduler as pl_sched

th_sched = torch.optim.lr_scheduler
N_STEPS = 40


def _optimizers(opt_name="SGD"):
    pp = [pylucid.zeros(2, requires_grad=True), pylucid.zeros(3, requires_grad=True)]
    tp = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    kw = dict(momentum=0.9) if opt_name == "SGD" else {}
    popt = getattr(optim, opt_name)([{"params": [pp[0]]}, {"params": [pp[1]], "lr": 0.05}], lr=0.1, **kw)
    topt = getattr(torch.optim, opt_name)([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.05}], lr=0.1, **kw)
    return popt, topt


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]


def _compare(make_pl, make_th, opt_name="SGD", steps=N_STEPS, metric=None, check_momentum=False):
    popt, topt = _optimizers(opt_name)
    ps, ts = make_pl(popt), make_th(topt)
    assert ps.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    for i in range(steps):
        popt.step()
        topt.step()
        if metric is None:
            ps.step()
            ts.step()
        else:
            ps.step(metric(i))
            ts.step(metric(i))
        assert ps.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=1e-15), f"step {i + 1}"
        assert [g["lr"] for g in popt.param_groups] == pytest.approx([g["lr"] for g in topt.param_groups],
                                                                     rel=1e-12, abs=1e-15)
        if check_momentum:
            assert _momenta(popt) == pytest.approx(_momenta(topt), rel=1e-12), f"momentum, step {i + 1}"
    return popt, ps


SCHEDULERS = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.95**e),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.9**e]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.97),
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingLR-long": lambda m, o: m.CosineAnnealingLR(o, T_max=50),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.002),
    "CosineAnnealingWarmRestarts-mult": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=12),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=8),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=25, power=2.0),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=N_STEPS),
    "OneCycleLR-linear-three-phase": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=N_STEPS,
                                                                anneal_strategy="linear", three_phase=True,
                                                                pct_start=0.25),
    "OneCycleLR-epochs-no-momentum": lambda m, o: m.OneCycleLR(o, max_lr=0.3, epochs=4, steps_per_epoch=10,
                                                                cycle_momentum=False, div_factor=10.0),
    "CyclicLR-triangular": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3,
                                                     step_size_down=5, mode="triangular2"),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range",
                                                   gamma=0.97),
    "CyclicLR-scale_fn": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                  scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations"),
}
CYCLING = {k for k in SCHEDULERS if k.startswith(("OneCycle", "Cyclic"))}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_lr_sequence_matches_torch(name):
    make = SCHEDULERS[name]
    _compare(lambda o: make(pl_sched, o), lambda o: make(th_sched, o), check_momentum=name in CYCLING)


@pytest.mark.parametrize("name", ["OneCycleLR-cos", "CyclicLR-triangular"])
def test_momentum_cycling_with_adam_betas(name):
    make = SCHEDULERS[name]
    _compare(lambda o: make(pl_sched, o), lambda o: make(th_sched, o), opt_name="Adam", check_momentum=True)


def test_sequential_lr_matches_torch():
    def make(m, o):
        return m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9),
                                  m.CosineAnnealingLR(o, T_max=8)], milestones=[5, 15])

    _compare(lambda o: make(pl_sched, o), lambda o: make(th_sched, o))


def test_chained_scheduler_matches_torch():
    def make(m, o):
        return m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9),
                                   m.StepLR(o, step_size=6, gamma=0.5)])

    _compare(lambda o: make(pl_sched, o), lambda o: make(th_sched, o))


def test_two_chainable_schedulers_compose_like_torch():
    popt, topt = _optimizers()
    ps = [pl_sched.ExponentialLR(popt, 0.9), pl_sched.MultiStepLR(popt, [3, 7], 0.1)]
    ts = [th_sched.ExponentialLR(topt, 0.9), th_sched.MultiStepLR(topt, [3, 7], 0.1)]
    for _ in range(12):
        popt.step()
        topt.step()
        for s in ps + ts:
            s.step()
        assert [g["lr"] for g in popt.param_groups] == pytest.approx([g["lr"] for g in topt.param_groups])


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", factor=0.5, patience=2, threshold=0.1,
                                                 threshold_mode="abs", cooldown=3, min_lr=[0.01, 0.02]),
                                    dict(patience=0, cooldown=1, min_lr=0.004, eps=1e-3)])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    def metric(i):
        return 1.0 / (1 + i) if i < 8 else 0.125 + 0.01 * math.sin(i)  # improves, then plateaus

    _compare(lambda o: pl_sched.ReduceLROnPlateau(o, **kwargs), lambda o: th_sched.ReduceLROnPlateau(o, **kwargs),
             metric=metric)


def test_closed_form_with_epoch_argument():
    popt, topt = _optimizers()
    ps, ts = pl_sched.StepLR(popt, 3, 0.5), th_sched.StepLR(topt, 3, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in [4, 9, 2, 11]:
            popt.step()
            topt.step()
            ps.step(epoch)
            ts.step(epoch)
            assert ps.get_last_lr() == pytest.approx(ts.get_last_lr())
        pw = pl_sched.CosineAnnealingWarmRestarts(popt, T_0=4, T_mult=2)
        tw = th_sched.CosineAnnealingWarmRestarts(topt, T_0=4, T_mult=2)
        for epoch in [0.5, 3.25, 7.0, 13.5]:
            pw.step(epoch)
            tw.step(epoch)
            assert pw.get_last_lr() == pytest.approx(tw.get_last_lr())


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR-cos", "CyclicLR-triangular2",
                                  "LambdaLR", "CosineAnnealingWarmRestarts-mult"])
def test_state_dict_round_trip(name):
    make = SCHEDULERS[name]
    popt, _ = _optimizers()
    sched = make(pl_sched, popt)
    for _ in range(10):
        popt.step()
        sched.step()
    sd = sched.state_dict()
    opt_sd = popt.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 10
    expected = []
    for _ in range(10):
        popt.step()
        sched.step()
        expected.append(sched.get_last_lr())
    popt2, _ = _optimizers()
    sched2 = make(pl_sched, popt2)
    popt2.load_state_dict(opt_sd)
    sched2.load_state_dict(sd)
    got = []
    for _ in range(10):
        popt2.step()
        sched2.step()
        got.append(sched2.get_last_lr())
    assert got == expected


def test_sequential_and_plateau_state_dicts():
    popt, _ = _optimizers()
    seq = pl_sched.SequentialLR(popt, [pl_sched.ConstantLR(popt, 0.5, 3), pl_sched.ExponentialLR(popt, 0.9)], [3])
    for _ in range(5):
        popt.step()
        seq.step()
    sd = seq.state_dict()
    assert len(sd["_schedulers"]) == 2 and sd["last_epoch"] == 5
    plateau = pl_sched.ReduceLROnPlateau(popt, mode="max")
    plateau.step(1.0)
    psd = plateau.state_dict()
    other = pl_sched.ReduceLROnPlateau(popt)
    other.load_state_dict(psd)
    assert other.mode == "max" and other.best == 1.0 and not other._is_better(0.5, other.best)


def test_warnings_and_errors():
    popt, _ = _optimizers()
    sched = pl_sched.StepLR(popt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        pl_sched.StepLR(object(), 2)
    with pytest.raises(KeyError, match="initial_lr"):
        pl_sched.StepLR(_optimizers()[0], 2, last_epoch=3)
    with pytest.raises(ValueError, match="total_steps"):
        pl_sched.OneCycleLR(popt, max_lr=0.1)
    with pytest.raises(ValueError, match="Factor|factor"):
        pl_sched.ReduceLROnPlateau(popt, factor=1.5)
    with pytest.raises(ValueError, match="milestones"):
        pl_sched.SequentialLR(popt, [pl_sched.ExponentialLR(popt, 0.9)], milestones=[3])
    one = pl_sched.OneCycleLR(_optimizers()[0], max_lr=0.1, total_steps=2)
    one.optimizer.step()
    one.step()
    one.step()
    with pytest.raises(ValueError, match="total steps"):
        one.step()
    opt_no_momentum = optim.Adagrad([pylucid.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="momentum"):
        pl_sched.CyclicLR(opt_no_momentum, 0.01, 0.1)
