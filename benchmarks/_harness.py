"""A tiny side-by-side timing harness: pylucid and PyTorch in one process, interleaved.

Each case gives a pylucid callable and a PyTorch callable doing the same work.
They run alternately in rounds (so drift, turbo and cache state hit both
equally); the figure kept for each is the median over rounds of the per-call
time, and the ratio is pylucid / PyTorch (below 1.0 means pylucid is faster).
"""

from __future__ import annotations

import statistics
import time


def timeit(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def calibrate(fn, target_s: float = 0.05) -> int:
    n = 1
    while True:
        t = timeit(fn, n)
        if t * n >= target_s or n >= 1 << 20:
            return max(1, int(n * target_s / max(t * n, 1e-9)))
        n *= 4


def compare(name: str, pl_fn, torch_fn, rounds: int = 11, target_s: float = 0.05, sync=None) -> dict:
    """Time both callables interleaved; returns a dict with the medians and the ratio."""
    pl_fn()
    torch_fn()  # warm-up (allocations, caches)
    n_pl = calibrate(pl_fn, target_s)
    n_t = calibrate(torch_fn, target_s)
    a, b = [], []
    for _ in range(rounds):
        a.append(timeit(pl_fn, n_pl))
        b.append(timeit(torch_fn, n_t))
    pa, pb = statistics.median(a), statistics.median(b)
    return {"case": name, "pylucid_s": pa, "torch_s": pb, "ratio": pa / pb}


def report(rows, title: str) -> None:
    print(f"\n{title}")
    print(f"{'case':58s} {'pylucid':>12s} {'pytorch':>12s} {'ratio':>7s}")
    for r in rows:
        print(f"{r['case']:58s} {_fmt(r['pylucid_s']):>12s} {_fmt(r['torch_s']):>12s} {r['ratio']:7.2f}")


def _fmt(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
