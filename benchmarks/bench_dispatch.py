"""Per-op host cost (CPU): the dispatch and autograd path on tiny tensors, pylucid and PyTorch side by side.

    python benchmarks/bench_dispatch.py [--rounds N] [--filter TEXT]

Every case works on 4-element (or 2x2) float32 tensors, so the kernels cost next to nothing and what is
timed is the path from the Python call to the backend and back: argument checks, dtype and device
decisions, output wrapping, node creation, the backward engine. Four modes per op:

- ``no_grad``: the forward under ``no_grad()`` (entered once, around the timing);
- ``grad fwd``: the forward of inputs that require grad (the node is made, then dropped with the output);
- ``grad``: the forward of inputs that require grad, then ``backward`` of its output (with an explicit
  gradient of ones: one node, one engine pass);
- ``autocast``: the forward under ``autocast("cpu", dtype=bfloat16)`` and ``no_grad()``, entered once (the
  inputs are float32, so ops whose policy is ``Promote`` cast them).

The two frameworks run interleaved in rounds (benchmarks/_harness.py); the figures are medians of the
per-call time in microseconds, and the ratio is pylucid / PyTorch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from _harness import compare  # noqa: E402

import pylucid as pl  # noqa: E402


def _ops(m):
    """``(name, fn(env) -> output)`` of the timed calls; ``env`` holds the operands of framework ``m``."""
    F = m.nn.functional
    return [
        ("a + b", lambda e: e["a"] + e["b"]),
        ("a * 2.0", lambda e: e["a"] * 2.0),
        ("x.relu()", lambda e: e["a"].relu()),
        ("F.linear(x, w, b)", lambda e: F.linear(e["x"], e["w"], e["bias"])),
        ("x.sum()", lambda e: e["a"].sum()),
        ("x.view(2, 2)", lambda e: e["a"].view(2, 2)),
        ("x[idx] (int)", lambda e: e["a"][1]),
        ("x[idx] (slice)", lambda e: e["a"][1:3]),
    ]


def _env(m, requires_grad):
    rng = np.random.default_rng(0)
    arrs = {"a": rng.standard_normal(4), "b": rng.standard_normal(4), "x": rng.standard_normal((2, 2)),
            "w": rng.standard_normal((3, 2)), "bias": rng.standard_normal(3)}
    return {k: m.tensor(v.astype(np.float32), requires_grad=requires_grad) for k, v in arrs.items()}


def _case(m, fn, env, mode):
    if mode != "grad":
        def run():
            fn(env)
    else:
        ones = {}

        def run():
            y = fn(env)
            g = ones.get(y.shape)
            if g is None:
                g = ones[y.shape] = m.ones(y.shape)
            y.backward(g)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--target", type=float, default=0.03, help="seconds per timing batch")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for mode in ("no_grad", "grad fwd", "grad", "autocast"):
        env_pl, env_t = _env(pl, mode.startswith("grad")), _env(torch, mode.startswith("grad"))
        for (name, f_pl), (_, f_t) in zip(_ops(pl), _ops(torch)):
            label = f"{mode:8s} {name}"
            if args.filter and args.filter not in label:
                continue
            with contextlib.ExitStack() as stack:
                if not mode.startswith("grad"):  # the switches are set once, around the timing: only the op is timed
                    for m in (pl, torch):
                        stack.enter_context(m.no_grad())
                        if mode == "autocast":
                            stack.enter_context(m.amp.autocast("cpu", dtype=m.bfloat16))
                r = compare(label, _case(pl, f_pl, env_pl, mode), _case(torch, f_t, env_t, mode),
                            rounds=args.rounds, target_s=args.target)
            rows.append(r)
            print(f"{label:34s} {r['pylucid_s'] * 1e6:9.2f} {r['torch_s'] * 1e6:9.2f} {r['ratio']:7.2f}", flush=True)
    gm = float(np.exp(np.mean([np.log(r["ratio"]) for r in rows]))) if rows else float("nan")
    print(f"geometric mean ratio {gm:.2f}")


if __name__ == "__main__":
    print(f"{'case (us per call)':34s} {'pylucid':>9s} {'pytorch':>9s} {'ratio':>7s}")
    main()
