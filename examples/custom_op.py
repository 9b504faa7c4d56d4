"""A custom differentiable op: ``pylucid.autograd.Function`` with its own gradient, checked by gradcheck.

``log(cosh(x))`` is a smooth loss that behaves like ``x**2 / 2`` near zero and
like ``|x|`` far away, so outliers pull less than with a squared error. The
direct formula overflows: ``cosh(90)`` is beyond float32's range, so
``log(cosh(90))`` gives ``inf`` although the answer is about 89.3. Written as

    log(cosh(x)) = |x| + log1p(exp(-2|x|)) - log(2)

nothing overflows (``exp`` only ever sees arguments <= 0). Its derivative is
``tanh(x)``, cheaper than differentiating the three ops of the formula, so the
op gets its own backward. The backward is written in pylucid ops, so it is
differentiable again: second derivatives (``gradgradcheck``) work too.

    python examples/custom_op.py
    python examples/custom_op.py --tiny
"""

import argparse
import math
import os

import pylucid as pl
from pylucid.autograd import Function, gradcheck, gradgradcheck


class LogCosh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)              # backward needs the input, nothing else
        a = x.abs()
        return a + pl.log1p(pl.exp(-2.0 * a)) - math.log(2.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * pl.tanh(x)              # d/dx log(cosh(x)) = tanh(x)


def log_cosh(x):
    return LogCosh.apply(x)


def main() -> None:
    parser = argparse.ArgumentParser(description="A custom autograd op with gradcheck.")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    steps = 50 if args.tiny else args.steps

    big = pl.tensor([0.5, 30.0, 90.0])
    print("naive log(cosh(x)): ", [round(v, 4) for v in pl.log(pl.cosh(big)).tolist()])  # 90 overflows: inf
    print("LogCosh:            ", [round(v, 4) for v in log_cosh(big).tolist()])

    # gradcheck compares the backward with central finite differences; float64 makes those accurate
    x = pl.linspace(-4.0, 4.0, 9, dtype=pl.float64).requires_grad_()
    print("gradcheck:    ", gradcheck(log_cosh, (x,)))
    print("gradgradcheck:", gradgradcheck(log_cosh, (x,)))

    # a use: fit y = 2x + 1 to points where a tenth are wild outliers
    pl.manual_seed(0)
    xs = pl.rand(200, 1) * 4 - 2
    ys = 2 * xs + 1 + 0.05 * pl.randn(200, 1)
    ys[::10] += 25.0                          # every tenth point is far off
    for name, loss_fn in (("squared error", lambda r: (r * r).mean()), ("log-cosh", lambda r: log_cosh(r).mean())):
        model = pl.nn.Linear(1, 1)
        opt = pl.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(steps):
            loss = loss_fn(model(xs) - ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
        slope, intercept = model.weight.item(), model.bias.item()
        print(f"{name:>13}: y = {slope:.2f} x + {intercept:.2f}   (true: y = 2.00 x + 1.00)")


if __name__ == "__main__":
    main()
