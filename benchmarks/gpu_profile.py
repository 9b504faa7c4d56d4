"""Where a pylucid training step spends its time on the GPU (for tuning; not a comparison).

    python benchmarks/gpu_profile.py

Per op: device time (``profiler.profile(sync_cuda=True)``) and host-side call time
(``sync_cuda=False``), plus the Python functions with the most host time (cProfile),
for the MLP 784-512-512-10 and transformer-block steps of ``gpu_bench.py``.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import pylucid as pl  # noqa: E402


def main() -> int:
    if not pl.cuda.is_available():
        print("CUDA is not available here: nothing to profile")
        return 0
    from gpu_bench import _block_step, _mlp_step

    for name, step in (("MLP 784-512-512-10 Adam, batch 128", _mlp_step(pl, (784, 512, 512, 10), 128)),
                       ("transformer block fp32", _block_step(pl))):
        for _ in range(10):
            step()
        pl.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            step()
        pl.cuda.synchronize()
        print(f"\n== {name}: {(time.perf_counter() - t0) / 20 * 1e3:.2f} ms/step")
        for sync in (True, False):
            with pl.profiler.profile(sync_cuda=sync) as prof:
                for _ in range(5):
                    step()
            pl.cuda.synchronize()
            print(f"-- forward ops, {'device time (synchronised)' if sync else 'host time (not synchronised)'}")
            print(prof.table(row_limit=12))
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            step()
        pl.cuda.synchronize()
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue()[-6000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
