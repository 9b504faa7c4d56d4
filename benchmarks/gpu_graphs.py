"""Training steps replayed as CUDA graphs: pylucid's ``pylucid.cuda.graph`` against ``torch.cuda.graph``.

    python benchmarks/gpu_graphs.py                    # mlp, block, block_bf16, gpt2
    python benchmarks/gpu_graphs.py mlp gpt2 --torch-compile
    python benchmarks/gpu_graphs.py resnet resnet_bf16    # ResNet-18 of gpu_models.py as one graph

The same step code (``gpu_bench``'s MLP 784-512-512-10 and transformer block, ``gpu_models``' ResNet-18
and GPT-2 124M) is built once per framework (Adam ``capturable=True``), warmed up, captured into one CUDA graph and
replayed; both frameworks' replays are timed interleaved in one process (synchronised medians), with
PyTorch eager for the speed-up over eager. ``gpt2`` times ``pylucid.compile(step, mode="reduce-overhead")``
against PyTorch eager (and against ``torch.compile(mode="reduce-overhead")`` with ``--torch-compile``,
which takes about a minute per length to compile). Ratios are pylucid time / PyTorch time.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_bench import _Block, _forward, _sync_all, bench_pair, cuda_frameworks  # noqa: E402


def _mlp(lib, sizes=(784, 512, 512, 10), batch=128):
    nn = lib.nn
    layers = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1])] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    model = nn.Sequential(*layers).to("cuda")
    opt = lib.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    x = lib.randn(batch, sizes[0], device="cuda")
    y = lib.randint(0, sizes[-1], (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _block(lib, autocast_dtype=None):
    blk = _Block(lib)
    opt = lib.optim.Adam(blk.params, lr=1e-4, capturable=True)
    x = lib.randn(32, 128, 512, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = _forward(lib, blk, x, autocast_dtype).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _graphed(lib, step):
    """``step`` warmed up on a side stream, captured, and the replay callable."""
    if lib.__name__ == "pylucid":
        step()
        step()
        g = lib.cuda.CUDAGraph()
        with lib.cuda.graph(g):
            step()
        return g.replay
    s = lib.cuda.Stream()
    s.wait_stream(lib.cuda.current_stream())
    with lib.cuda.stream(s):
        for _ in range(3):
            step()
    lib.cuda.current_stream().wait_stream(s)
    g = lib.cuda.CUDAGraph()
    with lib.cuda.graph(g):
        step()
    return g.replay


def _row(name, tp, tt, te=None):
    extra = f"  torch eager {te * 1e3:8.3f} ms  speed-up over torch eager {te / tp:5.2f}x" if te else ""
    print(f"  {name:44s} pylucid {tp * 1e3:8.3f} ms  torch {tt * 1e3:8.3f} ms  ratio {tp / tt:5.2f}{extra}",
          flush=True)


def section_steps(pl, torch, which):
    from gpu_models import _resnet_step

    cases = {"mlp": ("MLP 784-512-512-10 Adam, batch 128", lambda lib: _mlp(lib)),
             "block": ("transformer block fp32 (d 512, 128 tokens, batch 32)", lambda lib: _block(lib)),
             "block_bf16": ("transformer block bf16 autocast", lambda lib: _block(lib, lib.bfloat16)),
             "resnet": ("ResNet-18 fp32 SGD momentum, batch 128", lambda lib: _resnet_step(lib)),
             "resnet_bf16": ("ResNet-18 bf16 autocast, batch 128", lambda lib: _resnet_step(lib, lib.bfloat16))}
    print("training steps replayed as one CUDA graph (Adam capturable=True)")
    for key in which:
        if key not in cases:
            continue
        name, make = cases[key]
        try:
            eager_t = make(torch)
            te = bench_pair(eager_t, eager_t, reps=5, inner=20)[0]
            tp, tt = bench_pair(_graphed(pl, make(pl)), _graphed(torch, make(torch)), reps=7, inner=50)
            _row(name, tp, tt, te)
        except Exception as exc:  # report and go on with the other cases
            print(f"  {name}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


def section_gpt2(pl, torch, torch_compile: bool):
    from gpu_models import _gpt_step

    print("GPT-2 124M, batch 8, bf16 autocast, AdamW (capturable): pylucid.compile(mode='reduce-overhead')")
    for tokens in (256, 1024):
        step_p = _gpt_step(pl, tokens, capturable=True)
        t0 = time.perf_counter()
        comp = pl.compile(step_p, mode="reduce-overhead")
        comp()
        comp()
        _sync_all()
        first = time.perf_counter() - t0
        step_t = _gpt_step(torch, tokens)
        tp, te = bench_pair(comp, step_t, reps=5, inner=5)
        line = (f"  {tokens:5d} tokens: pylucid.compile {tp * 1e3:8.3f} ms (first two calls {first:5.1f} s)  "
                f"torch eager {te * 1e3:8.3f} ms  ratio to eager {tp / te:5.2f}")
        if torch_compile:
            t0 = time.perf_counter()
            tc = torch.compile(_gpt_step(torch, tokens, capturable=True), mode="reduce-overhead")
            for _ in range(3):
                tc()
            _sync_all()
            ct = time.perf_counter() - t0
            tp2, tt2 = bench_pair(comp, tc, reps=5, inner=5)
            line += (f"  torch.compile {tt2 * 1e3:8.3f} ms (compile {ct:5.1f} s) against pylucid.compile "
                     f"{tp2 * 1e3:8.3f} ms  ratio {tp2 / tt2:5.2f}")
        print(line, flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fw = cuda_frameworks()
    if fw is None:
        return 0
    pl, torch = fw
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    pl.backends.cuda.matmul.allow_tf32 = False
    pl.backends.cudnn.allow_tf32 = False
    which = [a for a in argv if not a.startswith("--")] or ["mlp", "block", "block_bf16", "gpt2"]
    print(f"GPU {torch.cuda.get_device_name()}; torch {torch.__version__}; pylucid {pl.__version__}")
    section_steps(pl, torch, which)
    if "gpt2" in which:
        section_gpt2(pl, torch, "--torch-compile" in argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
