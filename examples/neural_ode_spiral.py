"""A neural ODE fitted to a spiral with the adjoint method (``pylucid.diffeq.odeint_adjoint``).

The data is the trajectory of ``dy/dt = A y^3`` (cubed element-wise) with
``A = [[-0.1, 2], [-2, -0.1]]`` from ``y0 = (2, 0)``: a spiral into the
origin. The model is ``dy/dt = MLP(y^3)``, a 2-50-2 tanh network, and knows
nothing of ``A``. Each iteration takes a batch of short windows of the true
trajectory, integrates the model from each window's first point over the
window's times with dopri5, and fits the squared distance to the true
points. ``odeint_adjoint`` computes the gradients by solving the adjoint
system backwards in time, so memory does not grow with the number of solver
steps. The run prints the loss on the whole trajectory as it falls.

    python examples/neural_ode_spiral.py
    python examples/neural_ode_spiral.py --tiny
"""

import argparse
import os
import time

import pylucid as pl
from pylucid.diffeq import odeint, odeint_adjoint

TRUE_A = pl.tensor([[-0.1, 2.0], [-2.0, -0.1]])


def true_dynamics(t, y):
    return (y ** 3) @ TRUE_A


class ODEFunc(pl.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = pl.nn.Sequential(pl.nn.Linear(2, 50), pl.nn.Tanh(), pl.nn.Linear(50, 2))
        for m in self.net:
            if isinstance(m, pl.nn.Linear):
                pl.nn.init.normal_(m.weight, std=0.1)
                pl.nn.init.zeros_(m.bias)

    def forward(self, t, y):
        return self.net(y ** 3)


def main() -> None:
    parser = argparse.ArgumentParser(description="Fit a neural ODE to a spiral with the adjoint method.")
    parser.add_argument("--iters", type=int, default=600)
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    iters, n_points, t_end, batch_time, batch_size = (30, 100, 5.0, 8, 8) if args.tiny else (args.iters, 1000, 25.0,
                                                                                         10, 20)
    pl.manual_seed(0)
    t = pl.linspace(0.0, t_end, n_points)
    y0 = pl.tensor([[2.0, 0.0]])
    with pl.no_grad():
        true_y = odeint(true_dynamics, y0, t, method="dopri5")  # (n_points, 1, 2)

    func = ODEFunc()
    opt = pl.optim.RMSprop(func.parameters(), lr=1e-3)

    def full_loss():
        with pl.no_grad():
            pred = odeint(func, y0, t, rtol=1e-5, atol=1e-7)
        return (pred - true_y).abs().mean().item()

    first = full_loss()
    print(f"iter    0  loss on the whole spiral {first:.4f}")
    start = time.perf_counter()
    for it in range(1, iters + 1):
        # a batch of windows: their first points, their times (shifted to start at 0) and the true points
        s = pl.randint(0, n_points - batch_time, (batch_size,))
        batch_y0 = true_y[s, 0]  # (B, 2)
        batch_t = t[:batch_time]
        batch_y = pl.stack([true_y[s + i, 0] for i in range(batch_time)])  # (T, B, 2)
        opt.zero_grad()
        pred = odeint_adjoint(func, batch_y0, batch_t, rtol=1e-5, atol=1e-7)
        loss = (pred - batch_y).abs().mean()
        loss.backward()
        opt.step()
        if it % max(1, iters // 6) == 0 or it == iters:
            print(f"iter {it:4d}  loss on the whole spiral {full_loss():.4f}")
    last = full_loss()
    print(f"fitted the spiral in {time.perf_counter() - start:.1f} s: loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
