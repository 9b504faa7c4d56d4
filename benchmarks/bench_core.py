"""Core benchmarks (CPU): per-op overhead and the four documented ops.

    python benchmarks/bench_core.py

Prints pylucid / PyTorch ratios (targets: per-op overhead <= 1.0, documented
ops on 1e6 elements <= 1.2). Both frameworks run single-threaded-comparable
workloads in one process.
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


def chain_case(m, x):
    def run():
        y = x
        for _ in range(50):
            y = y * 1.0001
            y = y + 0.0001
        y.sum().backward()
        x.grad = None
    return run


def main() -> None:
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rows = []
    a = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    xp = pl.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    r = compare("per-op overhead: 100 chained mul/add, 16 floats, fwd+bwd", chain_case(pl, xp), chain_case(torch, xt))
    r["case"] += f"  [{r['pylucid_s'] / 100 * 1e6:.1f} vs {r['torch_s'] / 100 * 1e6:.1f} us/op]"
    rows.append(r)

    n = 1_000_000
    b = np.random.default_rng(1).uniform(0.1, 2.0, n).astype(np.float32)
    bp = pl.tensor(b, requires_grad=True)
    bt = torch.tensor(b, requires_grad=True)
    b2 = b.reshape(1000, 1000)
    bp2 = pl.tensor(b2, requires_grad=True)
    bt2 = torch.tensor(b2, requires_grad=True)

    def fb(fn, x, g):
        def run():
            y = fn(x)
            y.backward(g)
            x.grad = None
        return run

    gp1, gt1 = pl.ones(n), torch.ones(n)
    gps, gts = pl.tensor(1.0), torch.tensor(1.0)
    gp_row, gt_row = pl.ones(1000), torch.ones(1000)
    cases = [
        ("sqrt", lambda m: m.sqrt, gp1, gt1, bp, bt),
        ("square", lambda m: m.square, gp1, gt1, bp, bt),
        ("mean (all)", lambda m: m.mean, gps, gts, bp, bt),
        ("mean (dim=1)", lambda m: (lambda x: m.mean(x, dim=1)), gp_row, gt_row, bp2, bt2),
        ("min (all)", lambda m: (m.min if m is pl else m.amin), gps, gts, bp, bt),
        ("max (dim=0)", lambda m: (lambda x: m.amax(x, dim=0)),
         gp_row, gt_row, bp2, bt2),
    ]
    for name, mk, gp, gt, xp_, xt_ in cases:
        rows.append(compare(f"{name} fwd+bwd, 1e6 float32", fb(mk(pl), xp_, gp), fb(mk(torch), xt_, gt)))
    report(rows, f"pylucid {pl.__version__} vs torch {torch.__version__} (CPU, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
