"""Where a training step spends its time on the GPU (for tuning; not a comparison).

    python benchmarks/gpu_profile.py [mlp] [block] [block_bf16] [resnet] [resnet_bf16] [gpt2_256] [gpt2_1024]
        [gpt2_256_compiled] [gpt2_1024_compiled]

For the MLP 784-512-512-10 and transformer-block steps of ``gpu_bench.py`` and the ResNet-18 and GPT-2
steps of ``gpu_models.py`` (the default is the first three):

* the step time of pylucid and of PyTorch;
* every GPU kernel both frameworks launch in one step, with its device time, captured by
  CUPTI through ``torch.profiler`` (it sees CuPy's kernels too, since they run in the same
  process) -- the sum against the wall time tells host-bound from device-bound;
* the Python functions with the most host time in pylucid's step (cProfile).
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import pylucid as pl  # noqa: E402


def _sync():
    import torch

    pl.cuda.synchronize()
    torch.cuda.synchronize()


def _time(step, n=20):
    for _ in range(5):
        step()
    _sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    _sync()
    return (time.perf_counter() - t0) / n


def _gc_cost(step, n=50):
    """Python's cyclic garbage collector during ``n`` steps: collections per generation and ms per step,
    and the step time with the collector off (a diagnostic: the benchmarks keep it on)."""
    import gc

    spent = [0.0]
    counts = [0, 0, 0]
    t = [0.0]

    def cb(phase, info):
        if phase == "start":
            t[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - t[0]
            counts[info["generation"]] += 1

    gc.callbacks.append(cb)
    try:
        on = _time(step, n)
    finally:
        gc.callbacks.remove(cb)
    gc.disable()
    try:
        off = _time(step, n)
    finally:
        gc.enable()
    return (f"gc: {counts[0] / (n + 5):.2f}/{counts[1] / (n + 5):.2f}/{counts[2] / (n + 5):.3f} collections per step "
            f"(gen 0/1/2), {spent[0] / (n + 5) * 1e3:.3f} ms per step; step {on * 1e3:.3f} ms with the collector, "
            f"{off * 1e3:.3f} ms without")


def _kernels(step, steps=5):
    """{kernel name: (calls per step, device us per step)} from a CUPTI trace of ``steps`` steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    _sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        _sync()
    acc = defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if getattr(ev, "device_type", None) == torch.autograd.DeviceType.CUDA:
            a = acc[ev.name]
            a[0] += 1
            a[1] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
    return {k: (v[0] / steps, v[1] / steps) for k, v in acc.items()}


def _print_kernels(title, ks, wall, rows=40):
    total = sum(t for _, t in ks.values())
    calls = sum(c for c, _ in ks.values())
    print(f"-- {title}: {calls:.0f} kernels/step, device busy {total / 1e3:.3f} ms of {wall * 1e3:.3f} ms wall "
          f"({total / 1e3 / (wall * 1e3):.0%})")
    for name, (c, t) in sorted(ks.items(), key=lambda kv: -kv[1][1])[:rows]:
        print(f"   {t:9.1f} us {c:5.1f}x  {name[:110]}")


def _fallbacks(step):
    """One step with ``cupy.matmul`` watched: any call means the direct cuBLAS path was not taken."""
    import traceback

    import cupy

    seen = {}
    orig = cupy.matmul

    def watch(a, b, *args, **kwargs):
        where = [f for f in traceback.extract_stack()[:-1] if "pylucid" in f.filename][-3:]
        key = (str(a.dtype), str(b.dtype), a.shape, b.shape, tuple(f"{f.name}:{f.lineno}" for f in where))
        seen[key] = seen.get(key, 0) + 1
        return orig(a, b, *args, **kwargs)

    cupy.matmul = watch
    try:
        step()
        pl.cuda.synchronize()
    finally:
        cupy.matmul = orig
    for key, n in seen.items():
        print(f"   cupy.matmul fallback x{n}: {key}")
    print(f"   direct gemm error: {pl.device('cuda').backend.gemm_error}")


def _host_phases(lib, autocast_dtype=None, steps=40):
    """Host time of each phase of the transformer step, never synchronising: a phase whose host time
    jumps to the device's pace contains a hidden synchronisation."""
    from gpu_bench import _Block, _forward

    blk = _Block(lib)
    opt = lib.optim.Adam(blk.params, lr=1e-4)
    x = lib.randn(32, 128, 512, device="cuda")
    acc = defaultdict(list)
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        out = _forward(lib, blk, x, autocast_dtype)
        loss = out.float().pow(2).mean()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if i >= 10:
            for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("step", t3 - t2)):
                acc[k].append(v * 1e3)
    _sync()
    import statistics

    print(f"   host ms per phase ({lib.__name__}): " + ", ".join(
        f"{k} median {statistics.median(v):.3f} max {max(v):.3f}" for k, v in acc.items()))


def _compiled(lib, step):
    """``step`` compiled in reduce-overhead mode (a CUDA graph replayed per call), warmed up and captured."""
    comp = lib.compile(step, mode="reduce-overhead")
    for _ in range(3):
        comp()
    _sync()
    return comp


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not pl.cuda.is_available():
        print("CUDA is not available here: nothing to profile")
        return 0
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # both frameworks: full float32 GEMMs and convolutions
    torch.backends.cudnn.allow_tf32 = False
    pl.backends.cudnn.allow_tf32 = False
    pl.backends.cuda.matmul.allow_tf32 = False
    from gpu_bench import _block_step, _mlp_step
    from gpu_models import _gpt_step, _resnet_step

    cases = {"mlp": ("MLP 784-512-512-10 Adam, batch 128", lambda lib: _mlp_step(lib, (784, 512, 512, 10), 128)),
             "block": ("transformer block fp32", lambda lib: _block_step(lib)),
             "block_bf16": ("transformer block bf16 autocast",
                            lambda lib: _block_step(lib, lib.bfloat16)),
             "resnet": ("ResNet-18 fp32, batch 128", lambda lib: _resnet_step(lib)),
             "resnet_bf16": ("ResNet-18 bf16 autocast, batch 128", lambda lib: _resnet_step(lib, lib.bfloat16)),
             "gpt2_256": ("GPT-2 124M, 256 tokens, bf16 autocast", lambda lib: _gpt_step(lib, 256)),
             "gpt2_1024": ("GPT-2 124M, 1024 tokens, bf16 autocast", lambda lib: _gpt_step(lib, 1024))}
    for tokens in (256, 1024):  # both steps captured: pylucid.compile against torch.compile (a minute to compile)
        cases[f"gpt2_{tokens}_compiled"] = (f"GPT-2 124M, {tokens} tokens, bf16 autocast, compiled (reduce-overhead)",
                                            lambda lib, n=tokens: _compiled(lib, _gpt_step(lib, n, capturable=True)))
    for key in argv or ["mlp", "block", "block_bf16"]:
        name, make = cases[key]
        sp, st = make(pl), make(torch)
        _fallbacks(sp)
        if key.startswith("block"):
            for lib in (pl, torch):
                _host_phases(lib, None if key == "block" else lib.bfloat16)
        wp, wt = _time(sp), _time(st)
        print(f"   pylucid {_gc_cost(sp)}\n   torch   {_gc_cost(st)}", flush=True)
        print(f"\n== {name}: pylucid {wp * 1e3:.3f} ms, torch {wt * 1e3:.3f} ms, ratio {wp / wt:.3f}", flush=True)
        try:
            _print_kernels("pylucid", _kernels(sp), wp)
            _print_kernels("torch", _kernels(st), wt)
        except Exception as exc:  # profiler availability differs between builds
            print(f"   (kernel trace unavailable: {type(exc).__name__}: {exc})")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            sp()
        _sync()
        pr.disable()
        out = io.StringIO()
        stats = pstats.Stats(pr, stream=out)
        stats.sort_stats("tottime").print_stats(30)
        # who launches the copies and the CuPy fallbacks
        stats.print_callers(r"'copy' of|ascontiguousarray|_routines_linalg.matmul|'astype' of|'sum' of")
        print(out.getvalue()[-14000:], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
