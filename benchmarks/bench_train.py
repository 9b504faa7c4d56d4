"""Training-step benchmarks (CPU): training steps side by side with PyTorch, ratios pylucid/PyTorch.

    python benchmarks/bench_train.py
    python benchmarks/bench_train.py --threads 1 --cpu-time   # one thread each (as a DDP rank), process CPU time

- MLP 784-512-512-10, batch 128, SGD step (target <= 1.0)
- LeNet-5 (conv5x5 -> pool -> conv5x5 -> pool -> 3 linear), batch 64, 28x28 (target <= 1.5)
- pre-norm transformer block (LayerNorm, QKV linear, softmax attention, GELU MLP),
  batch 16, 64 tokens, width 128, Adam (target <= 1.3)
- peak memory of the MLP step (target <= PyTorch's): measured in a fresh
  subprocess per framework (the two allocators cannot be told apart inside one
  process) as the peak RSS over the first 5 steps (gradients and optimizer
  state included) above the RSS once model, optimizer and batch exist (Linux:
  the high-water mark is reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from _harness import compare, report  # noqa: E402

import pylucid as pl  # noqa: E402


def mlp(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def lenet(m):
    nn = m.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )


def block(m, d=128, heads=4):
    nn = m.nn
    F = m.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = F.softmax(q @ k.transpose(-2, -1) * (1.0 / (d // heads) ** 0.5), dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


def copy_weights(src_torch, dst_pl):
    state = {k: pl.tensor(v.detach().numpy()) for k, v in src_torch.state_dict().items()}
    dst_pl.load_state_dict(state)


def step_fn(m, model, opt, x, y, loss="ce"):
    F = m.nn.functional

    def run():
        out = model(x)
        los = F.cross_entropy(out, y) if loss == "ce" else (out * out).mean()
        opt.zero_grad()
        los.backward()
        opt.step()
    return run


def pair(build, opt_cls, opt_kw, x_shape, y_classes, loss="ce", batch=128):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal(x_shape).astype(np.float32)
    ys = rng.integers(0, y_classes, x_shape[0]) if loss == "ce" else None
    tm = build(torch)
    pm = build(pl)
    copy_weights(tm, pm)
    topt = getattr(torch.optim, opt_cls)(tm.parameters(), **opt_kw)
    popt = getattr(pl.optim, opt_cls)(pm.parameters(), **opt_kw)
    tx, px = torch.from_numpy(xs), pl.tensor(xs)
    ty = torch.from_numpy(ys) if ys is not None else None
    py = pl.tensor(ys) if ys is not None else None
    return step_fn(pl, pm, popt, px, py, loss), step_fn(torch, tm, topt, tx, ty, loss)


def peak_memory(framework: str) -> int:
    """Peak RSS growth (bytes) of 5 MLP SGD steps, in a fresh interpreter."""
    code = f"""
import resource, sys, numpy as np
sys.path.insert(0, {os.path.join(HERE, '..')!r}); sys.path.insert(0, {HERE!r})
import torch, pylucid as pl
from bench_train import mlp, step_fn
m = {'pl' if framework == 'pylucid' else 'torch'}
model = mlp(m)
opt = m.optim.SGD(model.parameters(), lr=0.01)
x = m.tensor(np.random.default_rng(0).standard_normal((128, 784)).astype(np.float32))
y = m.tensor(np.random.default_rng(1).integers(0, 10, 128))
run = step_fn(m, model, opt, x, y)
import gc; gc.collect()
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak-RSS high-water mark (VmHWM) to the current RSS
for _ in range(5): run()
print(status("VmHWM:") - base)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def _cpu_timeit(fn, number: int) -> float:
    """``_harness.timeit`` by this process's CPU time (steadier on a shared machine; with one thread)."""
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="threads for both frameworks (default: theirs)")
    ap.add_argument("--cpu-time", action="store_true", help="time by process CPU time (steadier on a busy machine)")
    ap.add_argument("--only", choices=("mlp", "lenet", "block"), action="append", default=[],
                    help="run only these cases (repeatable); skips the memory measurement")
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        pl.set_num_threads(args.threads)
    if args.cpu_time:
        import _harness

        _harness.timeit = _cpu_timeit  # compare() and calibrate() time through it
    only = set(args.only) or {"mlp", "lenet", "block"}
    rows = []
    if "mlp" in only:
        rows.append(compare("MLP 784-512-512-10 SGD step, batch 128",
                            *pair(mlp, "SGD", {"lr": 0.01}, (128, 784), 10)))
    if "lenet" in only:
        rows.append(compare("LeNet-5 SGD step, batch 64, 28x28",
                            *pair(lenet, "SGD", {"lr": 0.01}, (64, 1, 28, 28), 10)))
    if "block" in only:
        rows.append(compare("pre-norm transformer block Adam step, 16x64x128",
                            *pair(block, "Adam", {"lr": 1e-3}, (16, 64, 128), 0, loss="mse")))
    clock = ", CPU time" if args.cpu_time else ""
    report(rows, f"pylucid {pl.__version__} vs torch {torch.__version__} (CPU, {torch.get_num_threads()} "
                 f"threads{clock})")
    if args.only:
        return
    try:
        mp, mt = peak_memory("pylucid"), peak_memory("torch")
        print(f"\nMLP step peak memory growth: pylucid {mp / 2**20:.1f} MiB, torch {mt / 2**20:.1f} MiB, "
              f"ratio {mp / max(mt, 1):.2f}")
    except subprocess.CalledProcessError as exc:  # pragma: no cover - reported, not hidden
        print("peak memory measurement failed:", exc.stderr[-2000:])


if __name__ == "__main__":
    main()
