"""Data-parallel training: an MLP on the digits, one replica per process, gradients averaged by DDP.

    python examples/data_parallel.py                 # starts 2 ranks itself through `pylucid launch`
    pylucid launch -n 4 examples/data_parallel.py    # or start the ranks yourself
    python examples/data_parallel.py --tiny          # a few seconds (CI)

Each rank builds the same model (DistributedDataParallel broadcasts rank 0's weights anyway), reads its own
shard of every epoch through DistributedSampler, and steps on its local batch; DDP all-reduces the gradients
in buckets while backward runs, so every replica takes the same step. Only rank 0 prints. Without mpi4py
(`pip install 'pylucid[distributed]'`) it says so and runs as one process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pylucid as pl
import pylucid.distributed as dist
import pylucid.nn as nn
import pylucid.nn.functional as F
from pylucid.datasets import load_digits
from pylucid.nn.parallel import DistributedDataParallel as DDP
from pylucid.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a few seconds on a sliver of the data (CI)")
    ap.add_argument("--nproc", type=int, default=2, help="ranks to start when not launched (default 2)")
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    tiny = args.tiny or os.environ.get("PYLUCID_EXAMPLES_TINY") == "1"
    if "WORLD_SIZE" not in os.environ and args.nproc > 1:
        # not started by a launcher: start the ranks through it (each rank runs this same file)
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            print("mpi4py is not installed (pip install 'pylucid[distributed]'): training as one process")
        else:
            cmd = [sys.executable, "-m", "pylucid.distributed.run", "-n", str(args.nproc), __file__] + sys.argv[1:]
            return subprocess.call(cmd)

    dist.init_process_group()  # MPI under the launcher; a world of one otherwise
    rank, world = dist.get_rank(), dist.get_world_size()
    pl.manual_seed(0)
    x, y = load_digits("train")
    if tiny:
        x, y = x[:256], y[:256]
    x = x.reshape(x.shape[0], -1).float()
    train = TensorDataset(x, y)
    sampler = DistributedSampler(train, shuffle=True, seed=0)  # this rank's shard of every epoch
    loader = DataLoader(train, batch_size=64 // world, sampler=sampler)  # the global batch stays 64

    net = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 10))
    model = DDP(net)
    opt = pl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epochs = 2 if tiny else args.epochs
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new shuffle per epoch, the same on every rank
        total = pl.zeros(2, dtype=pl.float64)
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients across the ranks here
            opt.step()
            total += pl.tensor([loss.item() * len(yb), len(yb)], dtype=pl.float64)
        dist.all_reduce(total)  # the epoch's loss over every rank's samples
        if rank == 0:
            print(f"epoch {epoch + 1}: train loss {(total[0] / total[1]).item():.4f} over {world} rank(s)")

    # every replica holds the same weights: check it, then evaluate on rank 0
    w = net[0].weight.detach().clone()
    ref = w.clone()
    dist.broadcast(ref, src=0)
    same = bool((w == ref).all())
    xt, yt = load_digits("test")
    with pl.no_grad():
        acc = (net(xt.reshape(xt.shape[0], -1).float()).argmax(1) == yt).float().mean().item()
    if rank == 0:
        print(f"replicas equal: {same}; test accuracy {acc:.3f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
