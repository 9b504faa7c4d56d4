"""Device-bound GPU workloads: pylucid and PyTorch eager on the same model code, in one process.

Every model below is written once against the API the two frameworks share and built twice, with
``lib = pylucid`` and ``lib = torch``. Timing interleaves the two (``gpu_bench.bench_pair``: pylucid,
torch, torch, pylucid, ..., synchronised around every timed block, medians); peak memory is measured
afterwards, one framework at a time, as the peak of each framework's allocator over two steps (model,
optimizer state and inputs included). The ratio column is pylucid time / PyTorch time (lower is better).

    python benchmarks/gpu_models.py                 # everything (a few minutes on an H200)
    python benchmarks/gpu_models.py conv sdpa       # chosen sections
    python benchmarks/gpu_models.py resnet18 --steps 10  # model rows timed in blocks of 10 steps
    python benchmarks/gpu_models.py resnet18 --cudnn-replay  # with cuDNN executions replayed as CUDA graphs

Sections: conv (one 3x3 64->64 layer, 56x56, batch 64, forward+backward, float32 and bfloat16), sdpa
(causal attention, B4 H16 T2048 E64, bfloat16, forward+backward), resnet18 (CIFAR stem, 32x32, batch 128,
SGD momentum step, float32 and bfloat16 autocast), gpt2 (124M: 12 layers, d 768, 12 heads, vocab 50304,
batch 8 at 1024 and 256 tokens, bfloat16 autocast, AdamW step). The conv and sdpa sections add rows for
``pylucid.backend.cudnn`` called directly on CuPy arrays (what the ops reach once they route there).
float32 convolutions and GEMMs run without TF32 in both frameworks. Without CUDA the script says so and
exits 0.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_bench import _sync_all, bench_pair, cuda_frameworks  # noqa: E402

ROWS: list = []
GIB = float(1 << 30)
#: training steps per timed block of the model rows; ``--steps N`` sets every model row's block. Longer blocks
#: (10 ResNet, 6 GPT-2 steps), to weigh less the slower first step after the other framework ran, did not change
#: the ratios beyond the run-to-run spread on the H200 host (ResNet-18 bfloat16 in one run: 1.66 in blocks of 10,
#: 1.60 in blocks of 3), so the blocks stay those of the earlier figures.
MODEL_STEPS = {"resnet18": 3, "gpt2": 2}
#: timed blocks per framework of a model row (their median is the row's time). The shared H200 hosts slow down
#: in bursts of a second or more: one process measured ResNet-18 bfloat16 at 1.14, 1.49 and 1.26 in three runs of
#: 9 blocks each, back to back; 21 blocks (a few seconds more per row) keep one burst from moving the median.
MODEL_REPS = 21


# ---------------------------------------------------------------------------------------- measuring
def _is_pl(lib) -> bool:
    return lib.__name__ == "pylucid"


def _autocast(lib, dtype):
    if dtype is None:
        import contextlib

        return contextlib.nullcontext()
    return lib.amp.autocast("cuda", dtype=dtype) if _is_pl(lib) else lib.autocast("cuda", dtype=dtype)


def _peak_pl(fn, steps=2) -> float:
    """Peak bytes of CuPy's pool over ``steps`` calls of ``fn``, in GiB. The tracking hook costs a Python
    call per allocation, so it is removed again afterwards (timings never run with it)."""
    import pylucid
    import pylucid.cuda as plc

    _sync_all()
    plc.reset_peak_memory_stats()
    for _ in range(steps):
        fn()
    _sync_all()
    peak = plc.max_memory_allocated()
    if plc._hook is not None:
        plc._hook.__exit__(None, None, None)
        plc._hook = None
    del pylucid
    return peak / GIB


def _peak_torch(fn, steps=2) -> float:
    import torch

    _sync_all()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        fn()
    _sync_all()
    return torch.cuda.max_memory_allocated() / GIB


def measure(name, pl_fn, t_fn, reps=7, inner=3, warmup=2):
    """Time both interleaved, then each one's peak memory; print and keep the row."""
    t0 = time.perf_counter()
    a, b = bench_pair(pl_fn, t_fn, reps=reps, inner=inner, warmup=warmup)
    mem_pl, mem_t = _peak_pl(pl_fn), _peak_torch(t_fn)
    row = dict(case=name, pl=a, torch=b, ratio=a / b, mem_pl=mem_pl, mem_t=mem_t)
    ROWS.append(row)
    print(f"  {name:<58} pylucid {a * 1e3:9.2f} ms  torch {b * 1e3:9.2f} ms  ratio {a / b:6.2f}   "
          f"peak {mem_pl:6.2f} / {mem_t:6.2f} GiB  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def _free():
    import cupy
    import torch

    _sync_all()
    cupy.get_default_memory_pool().free_all_blocks()
    torch.cuda.empty_cache()


# ------------------------------------------------------------------------------- one conv layer
def _conv_step(lib, dtype):
    conv = lib.nn.Conv2d(64, 64, 3, padding=1, bias=False).to("cuda")
    if dtype is not None:
        conv = conv.to(dtype)
    x = lib.randn(64, 64, 56, 56, device="cuda", dtype=dtype or lib.float32).requires_grad_(True)
    gy = lib.randn(64, 64, 56, 56, device="cuda", dtype=dtype or lib.float32)

    def step():
        x.grad = None
        conv.weight.grad = None
        conv(x).backward(gy)

    return step


def _conv_cudnn_direct(dtype_name, channels_last):
    """The same layer through pylucid.backend.cudnn on CuPy arrays vs torch's conv2d + autograd."""
    import cupy
    import ml_dtypes
    import numpy as np
    import torch

    from pylucid.backend import cudnn

    np_dt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}[dtype_name]
    t_dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    rng = cupy.random.default_rng(0)

    def arr(*shape):
        a = rng.standard_normal(shape, dtype=cupy.float32).astype(np_dt)
        if channels_last:
            a = cupy.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        return a

    x, w, gy = arr(64, 64, 56, 56), arr(64, 64, 3, 3), arr(64, 64, 56, 56)
    kw = dict(stride=1, padding=1, dilation=1, groups=1, allow_tf32=False)

    def pl_fn():
        cudnn.conv_forward(x, w, **kw)
        cudnn.conv_data_grad(gy, w, x.shape, **kw)
        cudnn.conv_weight_grad(x, gy, w.shape, **kw)

    if cudnn.conv_forward(x, w, **kw) is None:
        print(f"  cuDNN refused the layer: {cudnn.failure('conv')}")
        return None
    mf = torch.channels_last if channels_last else torch.contiguous_format
    tx = torch.randn(64, 64, 56, 56, device="cuda", dtype=t_dt).contiguous(memory_format=mf).requires_grad_()
    tw = torch.randn(64, 64, 3, 3, device="cuda", dtype=t_dt).contiguous(memory_format=mf).requires_grad_()
    tgy = torch.randn(64, 64, 56, 56, device="cuda", dtype=t_dt).contiguous(memory_format=mf)

    def t_fn():
        tx.grad = tw.grad = None
        torch.nn.functional.conv2d(tx, tw, padding=1).backward(tgy)

    return pl_fn, t_fn


def section_conv(pl, torch):
    print("conv 3x3, 64->64 channels, 56x56, batch 64, forward + backward (input and weight gradients)")
    for label, pdt, tdt in (("float32", None, None), ("bfloat16", pl.bfloat16, torch.bfloat16)):
        measure(f"conv layer {label} (pylucid op)", _conv_step(pl, pdt), _conv_step(torch, tdt))
        _free()
    for label, cl in (("float32", False), ("bfloat16", False), ("bfloat16", True)):
        fns = _conv_cudnn_direct(label, cl)
        if fns is not None:
            measure(f"conv layer {label} {'NHWC' if cl else 'NCHW'} (backend.cudnn direct)", *fns)
        _free()


# ------------------------------------------------------------------------------------- attention
def _sdpa_step(lib, b=4, h=16, t=2048, e=64):
    dt = lib.bfloat16
    q, k, v = (lib.randn(b, h, t, e, device="cuda", dtype=dt).requires_grad_(True) for _ in range(3))
    g = lib.randn(b, h, t, e, device="cuda", dtype=dt)

    def step():
        q.grad = k.grad = v.grad = None
        lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

    return step


def _sdpa_cudnn_direct(b=4, h=16, t=2048, e=64):
    import cupy
    import ml_dtypes
    import torch

    from pylucid.backend import cudnn

    rng = cupy.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((b, h, t, e), dtype=cupy.float32).astype(ml_dtypes.bfloat16)
                  for _ in range(4))

    def pl_fn():
        o, stats = cudnn.sdpa_forward(q, k, v, causal=True)
        cudnn.sdpa_backward(q, k, v, o, g, stats, causal=True)

    if cudnn.sdpa_forward(q, k, v, causal=True) is None:
        print(f"  cuDNN refused the attention: {cudnn.failure('sdpa')}")
        return None
    return pl_fn, _sdpa_step(torch, b, h, t, e)


def section_sdpa(pl, torch):
    print("causal scaled_dot_product_attention, B4 H16 T2048 E64, bfloat16, forward + backward")
    measure("sdpa (pylucid op)", _sdpa_step(pl), _sdpa_step(torch))
    _free()
    fns = _sdpa_cudnn_direct()
    if fns is not None:
        measure("sdpa (backend.cudnn direct)", *fns)
    _free()


# ------------------------------------------------------------------------------------- ResNet-18
def _resnet18(lib, num_classes=10):
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
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # the CIFAR stem: no 7x7, no max pool
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


def _resnet_step(lib, autocast_dtype=None, batch=128):
    model = _resnet18(lib).to("cuda")
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = lib.randn(batch, 3, 32, 32, device="cuda")
    y = lib.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad()
        with _autocast(lib, autocast_dtype):
            loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def section_resnet18(pl, torch):
    print("ResNet-18 (CIFAR stem, 32x32), batch 128, SGD momentum step")
    for label, pdt, tdt in (("float32", None, None), ("bfloat16 autocast", pl.bfloat16, torch.bfloat16)):
        measure(f"ResNet-18 {label}", _resnet_step(pl, pdt), _resnet_step(torch, tdt), reps=MODEL_REPS,
                inner=MODEL_STEPS["resnet18"])
        _free()


# ------------------------------------------------------------------------------------------ GPT-2
def _gpt2(lib, vocab=50304, ctx=1024, d=768, heads=12, layers=12):
    nn = lib.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(lib.arange(t, device="cuda"))
            for blk in self.blocks:
                x = blk(x)
            return F.linear(self.ln(x), self.wte.weight)  # the head shares the token embedding

    return GPT()


def _gpt_step(lib, tokens, batch=8, vocab=50304, capturable=False):
    model = _gpt2(lib, vocab).to("cuda")
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, capturable=capturable)
    idx = lib.randint(0, vocab, (batch, tokens), device="cuda")
    tgt = lib.randint(0, vocab, (batch, tokens), device="cuda")
    dt = lib.bfloat16

    def step():
        opt.zero_grad()
        with _autocast(lib, dt):
            logits = model(idx)
            loss = lib.nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1))
        loss.backward()
        opt.step()

    return step


def section_gpt2(pl, torch):
    print("GPT-2 124M (12 layers, d 768, 12 heads, vocab 50304), batch 8, bfloat16 autocast, AdamW step")
    for tokens in (1024, 256):
        measure(f"GPT-2 124M, {tokens} tokens", _gpt_step(pl, tokens), _gpt_step(torch, tokens), reps=MODEL_REPS,
                inner=MODEL_STEPS["gpt2"])
        _free()


SECTIONS = {"conv": section_conv, "sdpa": section_sdpa, "resnet18": section_resnet18, "gpt2": section_gpt2}


def _versions(pl, torch):
    import cupy

    from pylucid.backend import cudnn

    fe = "absent"
    if cudnn.is_available():
        fe = getattr(cudnn._mod, "__version__", "?")
    return (f"GPU {torch.cuda.get_device_name()}; CuPy {cupy.__version__} (CUDA runtime "
            f"{cupy.cuda.runtime.runtimeGetVersion()}, driver {cupy.cuda.runtime.driverGetVersion()}); torch "
            f"{torch.__version__} (cuDNN {torch.backends.cudnn.version()}); pylucid cuDNN {cudnn.version()} "
            f"via nvidia-cudnn-frontend {fe}"
            + ("" if cudnn.is_available() else f" [{cudnn.unavailable_reason()}]"))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--steps" in argv:
        i = argv.index("--steps")
        n = int(argv[i + 1])
        del argv[i:i + 2]
        for k in MODEL_STEPS:
            MODEL_STEPS[k] = n
    replay = "--cudnn-replay" in argv
    if replay:
        argv.remove("--cudnn-replay")
    frameworks = cuda_frameworks()
    if frameworks is None:
        return 0
    pylucid, torch = frameworks
    print(_versions(pylucid, torch), flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # both frameworks: full float32 GEMMs and convolutions
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    import pylucid.backends

    pylucid.backends.cudnn.allow_tf32 = False
    pylucid.backends.cuda.matmul.allow_tf32 = False
    if replay:
        from pylucid.backend import cudnn

        cudnn.GRAPH_REPLAY = True
        print("cuDNN executions with repeated pointers replayed as CUDA graphs (GRAPH_REPLAY)")
    t0 = time.perf_counter()
    for name in argv or list(SECTIONS):
        try:
            SECTIONS[name](pylucid, torch)
        except Exception:
            print(f"  section {name} failed:")
            traceback.print_exc(limit=8, file=sys.stdout)
        _free()
    print(f"\n{'workload':<60} {'ratio':>6}  {'peak pylucid / torch':>22}")
    for r in ROWS:
        print(f"{r['case']:<60} {r['ratio']:6.2f}  {r['mem_pl']:9.2f} / {r['mem_t']:.2f} GiB")
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
