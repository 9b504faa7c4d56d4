"""ODE benchmark: ``odeint_adjoint`` on a small neural ODE, pylucid.diffeq against torchdiffeq.

    python benchmarks/bench_diffeq.py [--quick] [--device cuda]

The model is a 2-50-2 tanh MLP ``dy/dt = W2 tanh(W1 y + b1) + b2`` on a
batch of 16 states, solved with dopri5 over t in [0, 1] (5 output times,
rtol 1e-5, atol 1e-7); one call is a forward solve and the backward adjoint
solve with the gradients of the parameters. Both frameworks get the same
weights and run interleaved (benchmarks/_harness.py); the target ratio is
<= 1.3. The number of function evaluations of each is printed too: the two
solvers take the same steps, so the ratio is the per-step cost. With
``--device cuda`` both run on the GPU (each call ends with a synchronisation);
a problem this small is bound by the host work per solver step there.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from _harness import compare, report  # noqa: E402

import pylucid as pl  # noqa: E402
from pylucid.diffeq import odeint_adjoint  # noqa: E402


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((50, 2)) * 0.5).astype(np.float32), np.zeros(50, np.float32),
            (rng.standard_normal((2, 50)) * 0.5).astype(np.float32), np.zeros(2, np.float32)]


class PlODE(pl.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.l1, self.l2 = pl.nn.Linear(2, 50), pl.nn.Linear(50, 2)
        with pl.no_grad():
            self.l1.weight.copy_(pl.tensor(w[0]))
            self.l1.bias.copy_(pl.tensor(w[1]))
            self.l2.weight.copy_(pl.tensor(w[2]))
            self.l2.bias.copy_(pl.tensor(w[3]))
        self.nfe = 0

    def forward(self, t, y):
        self.nfe += 1
        return self.l2(self.l1(y).tanh())


class TorchODE(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(2, 50), torch.nn.Linear(50, 2)
        with torch.no_grad():
            for p, v in zip((self.l1.weight, self.l1.bias, self.l2.weight, self.l2.bias), w):
                p.copy_(torch.tensor(v))
        self.nfe = 0

    def forward(self, t, y):
        self.nfe += 1
        return self.l2(torch.tanh(self.l1(y)))


def main() -> None:
    from torchdiffeq import odeint_adjoint as t_odeint_adjoint

    quick = "--quick" in sys.argv
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    torch.set_num_threads(1)
    w = _weights()
    y0 = np.random.default_rng(1).standard_normal((16, 2)).astype(np.float32)
    t = np.linspace(0.0, 1.0, 5).astype(np.float32)
    fp, ft = PlODE(w).to(device), TorchODE(w).to(device)
    yp, tp = pl.tensor(y0, device=device, requires_grad=True), pl.tensor(t, device=device)
    yt, tt = torch.tensor(y0, device=device, requires_grad=True), torch.tensor(t, device=device)
    kw = dict(rtol=1e-5, atol=1e-7, method="dopri5")
    on_gpu = device != "cpu"

    def run_pl():
        out = odeint_adjoint(fp, yp, tp, **kw)
        out[-1].square().sum().backward()
        fp.zero_grad()
        yp.grad = None
        if on_gpu:
            pl.cuda.synchronize()

    def run_torch():
        out = t_odeint_adjoint(ft, yt, tt, **kw)
        out[-1].square().sum().backward()
        ft.zero_grad()
        yt.grad = None
        if on_gpu:
            torch.cuda.synchronize()

    fp.nfe = ft.nfe = 0
    run_pl()
    run_torch()
    print(f"function evaluations per call: pylucid {fp.nfe}, torchdiffeq {ft.nfe}")
    rows = [compare(f"odeint_adjoint 2-50-2 tanh MLP, dopri5, batch 16 (fwd+bwd), {device}", run_pl, run_torch,
                    rounds=3 if quick else 7, target_s=0.2 if quick else 0.5)]
    where = "CPU, one thread" if device == "cpu" else device
    report(rows, f"pylucid.diffeq vs torchdiffeq ({where}), target ratio <= 1.3")


if __name__ == "__main__":
    main()
