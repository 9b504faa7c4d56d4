"""A whole training run matched step by step against PyTorch.

An MLP 20-32-32-4 (tanh, relu) starts from PyTorch's initial weights, sees the same fixed batches in
the same order and trains 50 steps with SGD+momentum and with Adam (and with an lr schedule): the
losses agree to 1e-5 at every step and the final weights agree.

The main tests use only core pylucid ops (``x @ W.T + b``, a log-softmax cross-entropy built from
exp/log/sum/max), so they do not depend on ``pylucid.nn``; a second variant runs the same training
through ``pylucid.nn.Linear`` and ``nn.functional.cross_entropy`` when those exist.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid
from pylucid import optim

SIZES = [20, 32, 32, 4]


@pytest.fixture(autouse=True, scope="module")
def _torch_single_thread():
    # tiny matrices: PyTorch's thread pool only adds contention on a loaded 2-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

N_STEPS = 50
BATCH = 16


def _tanh(x):
    fn = getattr(pylucid, "tanh", None)
    if fn is not None:
        return fn(x)
    e = pylucid.exp(x * -2.0)  # 1 - 2/(1+e^{2x}), written with core ops
    return (1.0 - e) / (1.0 + e)


def _relu(x):
    fn = getattr(pylucid, "relu", None)
    if fn is not None:
        return fn(x)
    return pylucid.where(x > 0, x, x * 0.0)


def _data(dtype):
    rng = np.random.default_rng(1234)
    xs = rng.standard_normal((N_STEPS, BATCH, SIZES[0])).astype(dtype)
    ys = rng.integers(0, SIZES[-1], size=(N_STEPS, BATCH))
    return xs, ys


def _torch_model(dtype):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(a, b).to(dtype) for a, b in zip(SIZES[:-1], SIZES[1:])]
    return layers


def _pylucid_params(torch_layers):
    """Copy PyTorch's initial weights: [W1, b1, W2, b2, W3, b3] as pylucid leaves."""
    params = []
    for layer in torch_layers:
        params.append(pylucid.tensor(layer.weight.detach().numpy().copy(), requires_grad=True))
        params.append(pylucid.tensor(layer.bias.detach().numpy().copy(), requires_grad=True))
    return params


def _pylucid_forward(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = _tanh(x @ w1.T + b1)
    h = _relu(h @ w2.T + b2)
    return h @ w3.T + b3


def _pylucid_cross_entropy(logits, onehot):
    m = pylucid.amax(logits, dim=1, keepdim=True)
    shifted = logits - m
    logp = shifted - pylucid.log(pylucid.sum(pylucid.exp(shifted), dim=1, keepdim=True))
    return -(logp * onehot).sum() / logits.shape[0]


def _torch_forward(layers, x):
    h = torch.tanh(layers[0](x))
    h = torch.relu(layers[1](h))
    return layers[2](h)


OPTIMIZERS = {
    "sgd-momentum": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
                     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4), None),
    "sgd-nesterov-cosine": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True),
                            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True),
                            ("CosineAnnealingLR", dict(T_max=N_STEPS))),
    "adam": (lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: torch.optim.Adam(ps, lr=1e-2), None),
    "adamw-onecycle": (lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.05),
                       lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.05),
                       ("OneCycleLR", dict(max_lr=0.02, total_steps=N_STEPS))),
}


def _run(opt_name, dtype, use_nn=False):
    np_dtype = np.float64 if dtype == "float64" else np.float32
    th_dtype = torch.float64 if dtype == "float64" else torch.float32
    xs, ys = _data(np_dtype)
    layers = _torch_model(th_dtype)
    make_pl, make_th, sched = OPTIMIZERS[opt_name]
    if use_nn:
        from pylucid import nn

        pl_layers = [nn.Linear(a, b, dtype=getattr(pylucid, dtype)) for a, b in zip(SIZES[:-1], SIZES[1:])]
        with pylucid.no_grad():
            for pl_l, th_l in zip(pl_layers, layers):
                pl_l.weight.copy_(pylucid.tensor(th_l.weight.detach().numpy()))
                pl_l.bias.copy_(pylucid.tensor(th_l.bias.detach().numpy()))
        params = [p for layer in pl_layers for p in (layer.weight, layer.bias)]
    else:
        params = _pylucid_params(layers)
    th_params = [p for layer in layers for p in (layer.weight, layer.bias)]
    popt, topt = make_pl(params), make_th(th_params)
    psched = tsched = None
    if sched is not None:
        psched = getattr(optim.lr_scheduler, sched[0])(popt, **sched[1])
        tsched = getattr(torch.optim.lr_scheduler, sched[0])(topt, **sched[1])
    eye = np.eye(SIZES[-1], dtype=np_dtype)
    pl_losses, th_losses = [], []
    for step in range(N_STEPS):
        x_np, y_np = xs[step], ys[step]
        # pylucid
        popt.zero_grad()
        x = pylucid.tensor(x_np)
        if use_nn:
            h = pylucid.nn.functional.tanh(pl_layers[0](x)) if hasattr(pylucid.nn.functional, "tanh") \
                else _tanh(pl_layers[0](x))
            h = pylucid.nn.functional.relu(pl_layers[1](h))
            loss = pylucid.nn.functional.cross_entropy(pl_layers[2](h), pylucid.tensor(y_np))
        else:
            loss = _pylucid_cross_entropy(_pylucid_forward(params, x), pylucid.tensor(eye[y_np]))
        loss.backward()
        popt.step()
        pl_losses.append(loss.item())
        # torch
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(_torch_forward(layers, torch.tensor(x_np)), torch.tensor(y_np))
        tloss.backward()
        topt.step()
        th_losses.append(tloss.item())
        if psched is not None:
            psched.step()
            tsched.step()
    return pl_losses, th_losses, params, th_params


def _check(pl_losses, th_losses, params, th_params, dtype):
    loss_tol = 1e-5 if dtype == "float32" else 1e-9
    for step, (a, b) in enumerate(zip(pl_losses, th_losses)):
        assert a == pytest.approx(b, rel=loss_tol, abs=loss_tol), f"loss differs at step {step + 1}: {a} vs {b}"
    assert th_losses[-1] < th_losses[0]  # it actually trains
    w_tol = 1e-4 if dtype == "float32" else 1e-8
    for p, tp in zip(params, th_params):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=w_tol, atol=w_tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_mlp_training_matches_torch(opt_name, dtype):
    _check(*_run(opt_name, dtype), dtype)


def _has_nn() -> bool:
    nn = getattr(pylucid, "nn", None)
    return nn is not None and hasattr(nn, "Linear") and hasattr(nn.functional, "cross_entropy") \
        and hasattr(nn.functional, "relu")


@pytest.mark.skipif(not _has_nn(), reason="pylucid.nn.Linear / nn.functional.cross_entropy not available yet")
@pytest.mark.parametrize("opt_name", ["sgd-momentum", "adam"])
def test_mlp_training_matches_torch_with_nn_modules(opt_name):
    _check(*_run(opt_name, "float64", use_nn=True), "float64")
