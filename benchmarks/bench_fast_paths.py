"""What a first-order fast path buys: the per-op cost of ``backward_fast`` against the graph formula.

    python benchmarks/bench_fast_paths.py

The chain of the per-op benchmark (50 x mul + 50 x add, fwd+bwd) runs with
``Mul``/``Add``'s fast paths and with them switched off (the engine then runs
the graph-mode formula under no-grad), interleaved in one process. This is
the measurement behind keeping ``backward_fast`` only on the benchmarked hot
ops (docs/fast_paths.md).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from bench_core import chain_case  # noqa: E402

import pylucid as pl  # noqa: E402
from pylucid.ops import elementwise as E  # noqa: E402

saved = {c: c.__dict__["backward_fast"] for c in (E.Mul, E.Add)}


def run(n, fast, reps=30):
    for c, f in saved.items():
        c.backward_fast = f if fast else None
    x = pl.tensor(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True)
    chain = chain_case(pl, x)
    chain()
    t0 = time.perf_counter()
    for _ in range(reps):
        chain()
    return (time.perf_counter() - t0) / reps / 100


def main() -> None:
    for n in (16, 100_000):
        a, b = [], []
        for _ in range(9):
            a.append(run(n, True))
            b.append(run(n, False))
        fa, fb = statistics.median(a), statistics.median(b)
        print(f"n={n}: fast path {fa * 1e6:.1f} us/op, graph formula {fb * 1e6:.1f} us/op, ratio {fb / fa:.2f}")
    for c, f in saved.items():
        c.backward_fast = f


if __name__ == "__main__":
    main()
