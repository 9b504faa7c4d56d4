"""Real model kinds on the CPU: pylucid and PyTorch training steps side by side, interleaved in one process.

    python benchmarks/bench_models.py                 # every case (a few minutes on 2 cores)
    python benchmarks/bench_models.py resnet18 lstm   # chosen cases
    python benchmarks/bench_models.py --threads 1     # one thread each (default: 2)
    python benchmarks/bench_models.py --profile lstm  # also pylucid's per-op breakdown of that case
    python benchmarks/bench_models.py --threads 1 --cpu-time   # process CPU time: steadier on a shared machine

Each model is written once against the API both frameworks share, built with ``lib = pylucid`` and
``lib = torch``, given the same initial weights (PyTorch's, copied) and the same batch, and stepped
alternately (``_harness.compare``: medians of interleaved rounds; ratio = pylucid / PyTorch). Cases:

* ``resnet18``: torchvision-style ResNet-18 at 32x32 input (3x3 stem, no max pool), batch 16, SGD momentum;
* ``lstm``: a 2-layer LSTM language model (vocab 1000, 200 units, 35 steps, batch 20), SGD;
* ``char_transformer``: a 6-layer character transformer (d 128, 4 heads, 64 tokens, batch 16), AdamW;
* ``dcgan``: a DCGAN generator + discriminator step (nz 100, 32x32, batch 16; transposed convs, BatchNorm), Adam;
* ``mnist_cnn``: the pytorch/examples MNIST CNN (conv, dropout, max-pool), batch 64, Adadelta;
* ``gpt_bf16``: a 4-layer d=256, 4-head, 128-token, batch 8 GPT step under bfloat16 autocast, AdamW;
* ``attention_bf16``: causal ``scaled_dot_product_attention`` B2 H4 T512 E64 in bfloat16, forward+backward;
* ``conv``: a 3x3 64->64 convolution, 28x28, batch 16, forward+backward.

Dropout runs in both frameworks, with each framework's own random stream (same rates, different bits).
The target is ratio <= 1.3 for every case (measure on an idle machine: other processes change the ratios).
On a machine shared with other jobs, ``--threads 1 --cpu-time`` times each step by the CPU time this
process spent (``time.process_time``): waiting for a core no longer counts, so the ratios move much less
(with several threads it sums the threads' time, which is not the wall time).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from _harness import compare, report  # noqa: E402

import pylucid as pl  # noqa: E402


# ------------------------------------------------------------------------------------------------ models
def resnet18(lib, num_classes=10):
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = nn.functional.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return nn.functional.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.layers(nn.functional.relu(self.bn1(self.conv1(x))))
            return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))

    return ResNet18()


def lstm_lm(lib, vocab=1000, hidden=200, layers=2, dropout=0.2):
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, layers, dropout=dropout)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x):
            out, _ = self.rnn(self.drop(self.encoder(x)))
            return self.decoder(self.drop(out)).reshape(-1, vocab)

    return LM()


def char_transformer(lib, vocab=65, d=128, heads=4, layers=6, ctx=64):
    nn = lib.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(lib.arange(idx.shape[1]))
            return self.head(self.ln(self.blocks(x))).reshape(-1, vocab)

    return GPT()


def dcgan(lib, nz=100, ngf=32, ndf=32, nc=3):
    nn = lib.nn
    gen = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())
    disc = nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    return nn.ModuleDict({"gen": gen, "disc": disc})


def mnist_cnn(lib):
    nn = lib.nn
    F = nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, 1), nn.Conv2d(32, 64, 3, 1)
            self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
            self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
            x = F.relu(self.fc1(lib.flatten(self.dropout1(x), 1)))
            return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)

    return Net()


def gpt_small(lib, vocab=512, d=256, heads=4, layers=4, ctx=128):
    return char_transformer(lib, vocab=vocab, d=d, heads=heads, layers=layers, ctx=ctx)


# ------------------------------------------------------------------------------------------------ steps
def _same_weights(tm, pm):
    pm.load_state_dict({k: pl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _classifier_case(build, opt, x, y, loss="ce", autocast=False):
    """(pylucid step, torch step) of ``build`` on the batch ``(x, y)`` (NumPy arrays)."""
    tm, pm = build(torch), build(pl)
    _same_weights(tm, pm)
    name, kw = opt
    topt, popt = getattr(torch.optim, name)(tm.parameters(), **kw), getattr(pl.optim, name)(pm.parameters(), **kw)

    def make(lib, model, o):
        xs, ys = lib.tensor(x), lib.tensor(y)
        F = lib.nn.functional

        def step():
            if autocast:
                ctx = lib.autocast("cpu", dtype=lib.bfloat16) if lib is torch else \
                    lib.amp.autocast("cpu", dtype=lib.bfloat16)
            else:
                import contextlib

                ctx = contextlib.nullcontext()
            with ctx:
                out = model(xs)
                los = F.nll_loss(out, ys) if loss == "nll" else F.cross_entropy(out, ys)
            o.zero_grad()
            los.backward()
            o.step()
        return step

    return make(pl, pm, popt), make(torch, tm, topt)


def case_resnet18():
    r = np.random.default_rng(0)
    return _classifier_case(resnet18, ("SGD", {"lr": 0.1, "momentum": 0.9}),
                            r.standard_normal((16, 3, 32, 32)).astype(np.float32), r.integers(0, 10, 16))


def case_lstm():
    r = np.random.default_rng(0)
    x = r.integers(0, 1000, (35, 20))
    return _classifier_case(lstm_lm, ("SGD", {"lr": 1.0}), x, r.integers(0, 1000, 35 * 20))


def case_char_transformer():
    r = np.random.default_rng(0)
    return _classifier_case(char_transformer, ("AdamW", {"lr": 3e-4}), r.integers(0, 65, (16, 64)),
                            r.integers(0, 65, 16 * 64))


def case_gpt_bf16():
    r = np.random.default_rng(0)
    return _classifier_case(gpt_small, ("AdamW", {"lr": 3e-4}), r.integers(0, 512, (8, 128)),
                            r.integers(0, 512, 8 * 128), autocast=True)


def case_mnist_cnn():
    r = np.random.default_rng(0)
    return _classifier_case(mnist_cnn, ("Adadelta", {"lr": 1.0}), r.standard_normal((64, 1, 28, 28)).astype(
        np.float32), r.integers(0, 10, 64), loss="nll")


def case_dcgan():
    r = np.random.default_rng(0)
    real = r.standard_normal((16, 3, 32, 32)).astype(np.float32)
    noise = r.standard_normal((16, 100, 1, 1)).astype(np.float32)
    tm, pm = dcgan(torch), dcgan(pl)
    _same_weights(tm, pm)

    def make(lib, m):
        F = lib.nn.functional
        og = lib.optim.Adam(m["gen"].parameters(), lr=2e-4, betas=(0.5, 0.999))
        od = lib.optim.Adam(m["disc"].parameters(), lr=2e-4, betas=(0.5, 0.999))
        x, z = lib.tensor(real), lib.tensor(noise)
        ones, zeros = lib.ones(16), lib.zeros(16)

        def step():
            fake = m["gen"](z)
            od.zero_grad()
            d_loss = F.binary_cross_entropy(m["disc"](x).reshape(-1), ones) + \
                F.binary_cross_entropy(m["disc"](fake.detach()).reshape(-1), zeros)
            d_loss.backward()
            od.step()
            og.zero_grad()
            g_loss = F.binary_cross_entropy(m["disc"](fake).reshape(-1), ones)
            g_loss.backward()
            og.step()
        return step

    return make(pl, pm), make(torch, tm)


def case_attention_bf16():
    r = np.random.default_rng(0)
    arrs = [r.standard_normal((2, 4, 512, 64)).astype(np.float32) for _ in range(4)]

    def make(lib):
        q, k, v = (lib.tensor(a).to(lib.bfloat16).requires_grad_() for a in arrs[:3])
        g = lib.tensor(arrs[3]).to(lib.bfloat16)

        def step():
            out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(g)
        return step

    return make(pl), make(torch)


def case_conv():
    r = np.random.default_rng(0)
    x = r.standard_normal((16, 64, 28, 28)).astype(np.float32)
    w = (r.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)

    def make(lib):
        xt, wt = lib.tensor(x).requires_grad_(), lib.tensor(w).requires_grad_()

        def step():
            lib.nn.functional.conv2d(xt, wt, padding=1).sum().backward()
        return step

    return make(pl), make(torch)


CASES = {
    "resnet18": ("ResNet-18 (32x32), batch 16, SGD momentum step", case_resnet18),
    "lstm": ("2-layer LSTM LM (200 units, 35 x 20 tokens), SGD step", case_lstm),
    "char_transformer": ("6-layer char transformer (d 128, 64 tokens, batch 16), AdamW", case_char_transformer),
    "dcgan": ("DCGAN generator + discriminator step, batch 16", case_dcgan),
    "mnist_cnn": ("pytorch/examples MNIST CNN, batch 64, Adadelta step", case_mnist_cnn),
    "gpt_bf16": ("GPT 4 x d256, 128 tokens, batch 8, bf16 autocast, AdamW", case_gpt_bf16),
    "attention_bf16": ("causal SDPA B2 H4 T512 E64 bf16, forward+backward", case_attention_bf16),
    "conv": ("conv 3x3 64->64, 28x28, batch 16, forward+backward", case_conv),
}


def _profile(name, step) -> None:
    """pylucid's per-op time in one step of ``name`` (the profiler's table)."""
    step()
    with pl.profiler.profile() as prof:
        for _ in range(3):
            step()
    print(f"\npylucid ops in 3 steps of {name}:")
    print(prof.table(row_limit=15))


def _cpu_timeit(fn, number: int) -> float:
    """``_harness.timeit`` by this process's CPU time."""
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help=f"cases to run (default: all): {', '.join(CASES)}")
    ap.add_argument("--threads", type=int, default=2, help="threads for both frameworks (default 2)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", action="append", default=[], choices=list(CASES), help="print pylucid's ops")
    ap.add_argument("--cpu-time", action="store_true", help="time by process CPU time (steadier on a busy machine)")
    args = ap.parse_args(argv)
    if args.cpu_time:
        import _harness

        _harness.timeit = _cpu_timeit  # compare() and calibrate() time through it
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    torch.set_num_threads(args.threads)
    if hasattr(pl, "set_num_threads"):
        pl.set_num_threads(args.threads)
    rows = []
    for key in args.cases or list(CASES):
        title, make = CASES[key]
        pl.manual_seed(0)
        torch.manual_seed(0)
        p_step, t_step = make()
        rows.append(compare(title, p_step, t_step, rounds=args.rounds, target_s=0.3))
        print(f"{title:58s} ratio {rows[-1]['ratio']:.2f}", flush=True)
        if key in args.profile:
            _profile(title, p_step)
    clock = ", CPU time" if args.cpu_time else ""
    report(rows, f"CPU model steps, {args.threads} thread(s) each{clock} (pylucid / PyTorch {torch.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
