"""Per-sample gradients with ``pylucid.func``: ``vmap(grad(loss))`` instead of a loop over the batch.

Differentially private training (DP-SGD), influence functions and gradient-norm diagnostics need each
sample's own gradient, not their mean. The direct way runs one backward per sample. ``grad`` turns the
loss of *one* sample into a function returning its gradient, and ``vmap`` runs that function on the whole
batch at once: every op executes once on batched arrays through its batching rule, so the cost is close to
one ordinary backward.

This program trains a small MLP on the bundled 8x8 digits with DP-SGD-style clipping: each sample's
gradient is clipped to norm ``C`` before the batch average. It first checks that the per-sample
gradients equal those of a loop, and times both.

    python examples/per_sample_grads.py
    python examples/per_sample_grads.py --tiny
"""

import argparse
import os
import time

import pylucid as pl
import pylucid.nn.functional as F
from pylucid.datasets import load_digits
from pylucid.func import functional_call, grad, vmap


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a few seconds on a sliver of the data (CI)")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--clip", type=float, default=1.0, help="per-sample gradient norm bound C")
    args = ap.parse_args()
    tiny = args.tiny or os.environ.get("PYLUCID_EXAMPLES_TINY") == "1"
    pl.manual_seed(0)

    x, y = load_digits()
    x = x.reshape(x.shape[0], -1)
    n_train = 256 if tiny else 1500
    xtr, ytr, xte, yte = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    model = pl.nn.Sequential(pl.nn.Linear(64, 64), pl.nn.Tanh(), pl.nn.Linear(64, 10))

    def sample_loss(params, xi, yi):
        # the loss of ONE sample: the model sees a batch of one
        out = functional_call(model, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))

    # per-sample gradients equal a loop of ordinary backwards
    params = {k: v.detach() for k, v in model.named_parameters()}
    xb, yb = xtr[:32], ytr[:32]
    t0 = time.perf_counter()
    g = per_sample(params, xb, yb)
    t_vmap = time.perf_counter() - t0
    t0 = time.perf_counter()
    worst = 0.0
    for i in range(32):
        model.zero_grad()
        F.cross_entropy(model(xb[i:i + 1]), yb[i:i + 1]).backward()
        for k, p in model.named_parameters():
            worst = max(worst, float((g[k][i] - p.grad).abs().max()))
    t_loop = time.perf_counter() - t0
    print(f"per-sample gradients of 32 samples: vmap(grad) {t_vmap * 1e3:.1f} ms, loop {t_loop * 1e3:.1f} ms; "
          f"largest difference {worst:.1e}")
    assert worst < 1e-5

    # DP-SGD-style training: clip each sample's gradient, then average (the noise of real DP-SGD is left out)
    opt = pl.optim.SGD(model.parameters(), lr=0.5)
    batch = 64
    epochs = 1 if tiny else args.epochs
    for epoch in range(epochs):
        perm = pl.randperm(n_train)
        for s in range(0, n_train, batch):
            idx = perm[s:s + batch]
            params = {k: v.detach() for k, v in model.named_parameters()}
            g = per_sample(params, xtr[idx], ytr[idx])
            norms = pl.stack([g[k].flatten(1).square().sum(1) for k in g]).sum(0).sqrt()
            scale = (args.clip / (norms + 1e-6)).clamp(max=1.0)
            for k, p in model.named_parameters():
                p.grad = (g[k] * scale.reshape((-1,) + (1,) * (g[k].ndim - 1))).mean(0)
            opt.step()
        with pl.no_grad():
            acc = float((model(xte).argmax(1) == yte).float().mean())
        print(f"epoch {epoch + 1}: mean per-sample gradient norm {float(norms.mean()):.3f}, test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
