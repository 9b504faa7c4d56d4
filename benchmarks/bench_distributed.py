"""Distributed benchmarks (CPU, 2 ranks): pylucid DDP on MPI against PyTorch DDP on gloo.

    python benchmarks/bench_distributed.py            # starts the 2-rank job through pylucid's launcher

Both frameworks run in the same two processes (pylucid's process group on MPI,
PyTorch's on gloo over TCP loopback), alternately in rounds as in
``_harness.compare``, with the same global batch and one BLAS thread per rank:

- DDP training step (forward, backward with the gradient all-reduce, optimizer
  step) of the MLP 784-512-512-10 (global batch 128, SGD) and the pre-norm
  transformer block (global batch 16 x 64 tokens x 128, Adam) of
  ``bench_train.py``; ratio pylucid / PyTorch time (target <= 1.0); then the
  same step without DDP (what the communication adds is the difference) and
  pylucid's step with its gradients averaged through MPI instead of shared
  memory (``PYLUCID_DDP_SHM=0``);
- ``all_reduce`` of 1, 16 and 64 MB of float32: bus bandwidth (bytes / time)
  and its ratio pylucid / PyTorch (target >= 1.0);
- the ZeRO optimizer's memory saving: Adam state bytes per rank for the
  transformer block, plain and sharded, and the step time with ZeRO.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def _rounds(fns, target_s=0.4, rounds=7, barrier=None):
    """Seconds per call of each callable in each round, alternating them round by round (every rank
    runs the same calls: the collectives inside keep the ranks in step)."""
    for fn in fns:
        fn()
        fn()
    counts = []
    for fn in fns:
        barrier()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        counts.append(max(1, int(target_s / max(dt, 1e-6))))
    # every rank must run the same number of calls: take rank 0's
    counts = barrier(counts)
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            barrier()
            t0 = time.perf_counter()
            for _ in range(counts[k]):
                fn()
            times[k].append((time.perf_counter() - t0) / counts[k])
    return times


def _row(case, p_times, t_times, bandwidth_bytes=None, **extra):
    """A result row: medians over the rounds, their ratio, and the spread of the per-round ratios
    (pylucid and PyTorch ran side by side in each round, so a round's ratio compares like with like)."""
    p, t = statistics.median(p_times), statistics.median(t_times)
    if bandwidth_bytes is None:
        per_round = [a / b for a, b in zip(p_times, t_times)]
        row = {"case": case, "pylucid_s": p, "torch_s": t, "ratio": p / t}
    else:
        per_round = [b / a for a, b in zip(p_times, t_times)]
        row = {"case": case, "pylucid_s": p, "torch_s": t, "pylucid_GBps": bandwidth_bytes / p / 1e9,
               "torch_GBps": bandwidth_bytes / t / 1e9, "ratio": t / p}
    row["ratio_min"], row["ratio_max"] = min(per_round), max(per_round)
    row.update(extra)
    return row


def job() -> None:
    import torch
    import torch.distributed as tdist
    from bench_train import block, copy_weights, mlp, step_fn

    import pylucid as pl
    import pylucid.distributed as dist
    from pylucid.distributed.optim import ZeroRedundancyOptimizer
    from pylucid.distributed.optim.zero_redundancy_optimizer import state_bytes
    from pylucid.nn.parallel import DistributedDataParallel as PDDP

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    # the same intra-op threads per rank for both (the launcher's share of the cores: one each here)
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    pl.set_num_threads(threads)

    def barrier(value=None):
        dist.barrier()
        tdist.barrier()
        if value is not None:
            box = [value]
            dist.broadcast_object_list(box, src=0)
            return box[0]
        return None

    rows = []

    def ddp_case(name, build, opt_cls, opt_kw, x_shape, classes, loss):
        rng = np.random.default_rng(rank)
        per = (x_shape[0] // world,) + x_shape[1:]
        xs = rng.standard_normal(per).astype(np.float32)
        ys = rng.integers(0, classes, per[0]) if loss == "ce" else None
        torch.manual_seed(0)
        tm = build(torch)
        pm = build(pl)
        copy_weights(tm, pm)
        tddp = torch.nn.parallel.DistributedDataParallel(tm)
        pddp = PDDP(pm)
        os.environ["PYLUCID_DDP_SHM"] = "0"
        pm_mpi = build(pl)
        copy_weights(tm, pm_mpi)
        pddp_mpi = PDDP(pm_mpi)
        del os.environ["PYLUCID_DDP_SHM"]
        topt = getattr(torch.optim, opt_cls)(tddp.parameters(), **opt_kw)
        popt = getattr(pl.optim, opt_cls)(pddp.parameters(), **opt_kw)
        prun = step_fn(pl, pddp, popt, pl.tensor(xs), None if ys is None else pl.tensor(ys), loss)
        trun = step_fn(torch, tddp, topt, torch.from_numpy(xs), None if ys is None else torch.from_numpy(ys), loss)
        # the same step without DDP (each rank on its own share): what the communication adds
        tm1, pm1 = build(torch), build(pl)
        copy_weights(tm, pm1)
        tm1.load_state_dict(tm.state_dict())
        prun1 = step_fn(pl, pm1, getattr(pl.optim, opt_cls)(pm1.parameters(), **opt_kw), pl.tensor(xs),
                        None if ys is None else pl.tensor(ys), loss)
        trun1 = step_fn(torch, tm1, getattr(torch.optim, opt_cls)(tm1.parameters(), **opt_kw),
                        torch.from_numpy(xs), None if ys is None else torch.from_numpy(ys), loss)
        prun_mpi = step_fn(pl, pddp_mpi, getattr(pl.optim, opt_cls)(pddp_mpi.parameters(), **opt_kw), pl.tensor(xs),
                           None if ys is None else pl.tensor(ys), loss)
        fns = [prun, trun, prun1, trun1, prun_mpi]
        zero = None
        if opt_cls == "Adam":
            pz = build(pl)
            copy_weights(tm, pz)
            zddp = PDDP(pz)
            zopt = ZeroRedundancyOptimizer(zddp.parameters(), pl.optim.Adam, **opt_kw)
            zero = (step_fn(pl, zddp, zopt, pl.tensor(xs), None, loss), zopt, popt)
            fns.append(zero[0])
        times = _rounds(fns, barrier=barrier)
        mpi_times = times.pop(4)
        rows.append(_row(f"DDP step: {name}", times[0], times[1]))
        rows.append(_row("  same step without DDP (one rank's share)", times[2], times[3]))
        added = [[a - b for a, b in zip(times[0], times[2])], [a - b for a, b in zip(times[1], times[3])]]
        p_add, t_add = statistics.median(added[0]), statistics.median(added[1])
        rows.append({"case": "  time DDP adds (communication, hooks)", "pylucid_s": p_add, "torch_s": t_add,
                     "ratio": p_add / t_add if t_add > 0 else float("nan")})
        rows.append(_row("  DDP step, gradients through MPI (PYLUCID_DDP_SHM=0)", mpi_times, times[1]))
        if zero is not None:
            rows.append(_row(f"DDP step + ZeRO(Adam): {name}", times[4], times[1],
                             zero_state_bytes=state_bytes(zero[1]), plain_state_bytes=state_bytes(zero[2])))

    ddp_case("MLP 784-512-512-10 SGD, global batch 128", mlp, "SGD", {"lr": 0.01}, (128, 784), 10, "ce")
    ddp_case("transformer block Adam, global batch 16x64x128", block, "Adam", {"lr": 1e-3}, (16, 64, 128), 0, "mse")

    for mb in (1, 16, 64):
        n = mb * 2**20 // 4
        src = np.random.default_rng(rank).standard_normal(n).astype(np.float32)
        pt, tt = pl.tensor(src), torch.from_numpy(src.copy())

        def p_ar():
            dist.all_reduce(pt)

        def t_ar():
            tdist.all_reduce(tt)
        p_s, t_s = _rounds([p_ar, t_ar], target_s=0.3, rounds=7, barrier=barrier)
        rows.append(_row(f"all_reduce {mb} MB float32", p_s, t_s, bandwidth_bytes=n * 4))
    if rank == 0:
        print("BENCH_JSON " + json.dumps({"rows": rows, "world": world, "torch": torch.__version__,
                                          "pylucid": pl.__version__, "threads": torch.get_num_threads()}))
    tdist.destroy_process_group()
    dist.destroy_process_group()


def _fmt(s: float) -> str:
    return f"{s * 1e6:.1f} us" if abs(s) < 1e-3 else f"{s * 1e3:.2f} ms"


def main() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "pylucid.distributed.run", "-n", "2", "--timeout", "300", __file__, "--job"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        print(proc.stdout[-4000:], proc.stderr[-8000:], sep="\n")
        return 1
    res = json.loads(line[len("BENCH_JSON "):])
    print(f"\npylucid {res['pylucid']} (MPI) vs torch {res['torch']} (gloo): {res['world']} ranks, "
          f"{res['threads']} thread(s) per rank")
    print("medians over the rounds; in brackets the lowest and highest ratio of a single round")
    print(f"{'case':58s} {'pylucid':>12s} {'pytorch':>12s} {'ratio':>7s}")
    for r in res["rows"]:
        spread = f" [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]" if "ratio_min" in r else " " * 12
        if "pylucid_GBps" in r:
            print(f"{r['case']:58s} {r['pylucid_GBps']:9.2f} GB/s {r['torch_GBps']:9.2f} GB/s {r['ratio']:7.2f}"
                  f"{spread}   (bandwidth pylucid/torch)")
        else:
            print(f"{r['case']:58s} {_fmt(r['pylucid_s']):>12s} {_fmt(r['torch_s']):>12s} {r['ratio']:7.2f}"
                  f"{spread}   (time pylucid/torch)")
        if "zero_state_bytes" in r:
            print(f"{'':4s}Adam state per rank: plain {r['plain_state_bytes'] / 2**20:.2f} MiB, "
                  f"ZeRO {r['zero_state_bytes'] / 2**20:.2f} MiB "
                  f"({r['zero_state_bytes'] / r['plain_state_bytes']:.2f} of it)")
    return 0


if __name__ == "__main__":
    if "--job" in sys.argv:
        job()
    else:
        raise SystemExit(main())
