"""Per-sample gradients with ``pylucid.func``: ``vmap(grad(loss))`` against ``torch.func`` and a Python loop.

An MLP 784-128-10 (tanh), cross-entropy per sample, a batch of 256, on the CPU, then a small one
(64-32-10). Prints the times and the ratios: pylucid/torch.func (target <= 1.2) and loop/vmap, the loop
being one ``autograd.grad`` per sample (target >= 10). Both frameworks run on one thread (BLAS
threads set before NumPy loads, ``torch.set_num_threads(1)``), so a shared machine does not make the
comparison a measure of thread contention.

The large model's per-sample weight gradients are 256 x 128 x 784 floats (100 MB): both frameworks are
bound by writing them, so a loop, which writes the same bytes a sample at a time, is only a few times
slower. The small model shows the per-op overhead a loop pays.

    PYTHONPATH=. python benchmarks/bench_func.py
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))

from _harness import compare, report, timeit  # noqa: E402

import pylucid  # noqa: E402
import pylucid.nn.functional as F  # noqa: E402
from pylucid.func import grad, vmap  # noqa: E402


def main() -> None:
    run(256, 784, 128, 10)
    # a small model: the per-sample gradients no longer fill memory, so the loop's per-op overhead shows
    run(256, 64, 32, 10)


def run(B, D, H, C) -> None:
    rng = np.random.default_rng(0)
    arrs = {"w1": rng.standard_normal((H, D)).astype("float32") * 0.05,
            "b1": np.zeros(H, "float32"),
            "w2": rng.standard_normal((C, H)).astype("float32") * 0.1,
            "b2": np.zeros(C, "float32")}
    x = rng.standard_normal((B, D)).astype("float32")
    y = rng.integers(0, C, B)

    p_pl = {k: pylucid.tensor(v) for k, v in arrs.items()}
    x_pl, y_pl = pylucid.tensor(x), pylucid.tensor(y)
    p_t = {k: torch.tensor(v) for k, v in arrs.items()}
    x_t, y_t = torch.tensor(x), torch.tensor(y)

    def loss_pl(p, xi, yi):
        h = F.linear(xi, p["w1"], p["b1"]).tanh()
        return F.cross_entropy(F.linear(h, p["w2"], p["b2"]).unsqueeze(0), yi.unsqueeze(0))

    def loss_t(p, xi, yi):
        h = torch.nn.functional.linear(xi, p["w1"], p["b1"]).tanh()
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(h, p["w2"], p["b2"]).unsqueeze(0),
                                                 yi.unsqueeze(0))

    psg_pl = vmap(grad(loss_pl), in_dims=(None, 0, 0))
    psg_t = torch.func.vmap(torch.func.grad(loss_t), in_dims=(None, 0, 0))

    g_pl, g_t = psg_pl(p_pl, x_pl, y_pl), psg_t(p_t, x_t, y_t)
    for k in arrs:
        np.testing.assert_allclose(g_pl[k].numpy(), g_t[k].numpy(), rtol=1e-4, atol=1e-5)

    leaves = [p_pl[k].detach().requires_grad_() for k in arrs]
    named = dict(zip(arrs, leaves))

    def loop_pl():
        # the way without transforms: one forward and one backward per sample
        return [pylucid.autograd.grad(loss_pl(named, x_pl[i], y_pl[i]), leaves) for i in range(B)]

    rows = [compare(f"per-sample grads MLP {D}-{H}-{C}, batch {B}: vmap(grad)", lambda: psg_pl(p_pl, x_pl, y_pl),
                    lambda: psg_t(p_t, x_t, y_t), rounds=5, target_s=0.2)]
    report(rows, "pylucid.func vs torch.func (CPU)")
    t_vmap = rows[0]["pylucid_s"]
    t_loop = timeit(loop_pl, 1)
    leaves_t = [p_t[k].detach().requires_grad_() for k in arrs]
    named_t = dict(zip(arrs, leaves_t))
    t_loop_t = timeit(lambda: [torch.autograd.grad(loss_t(named_t, x_t[i], y_t[i]), leaves_t) for i in range(B)], 1)
    t_vmap_t = rows[0]["torch_s"]
    gl = grad(loss_pl)
    t_loop_func = timeit(lambda: [gl(p_pl, x_pl[i], y_pl[i]) for i in range(B)], 1)
    print(f"\nPython loop over the batch, autograd.grad per sample: {t_loop * 1e3:.1f} ms "
          f"(func.grad per sample: {t_loop_func * 1e3:.1f} ms); vmap(grad): {t_vmap * 1e3:.2f} ms; "
          f"loop/vmap = {t_loop / t_vmap:.1f}x")
    print(f"PyTorch for scale: loop {t_loop_t * 1e3:.1f} ms, torch.func {t_vmap_t * 1e3:.2f} ms, "
          f"loop/vmap = {t_loop_t / t_vmap_t:.1f}x")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
