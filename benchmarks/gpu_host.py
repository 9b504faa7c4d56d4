"""Host time per call on the GPU: what one op costs the CPU before its kernel is queued (for tuning).

    python benchmarks/gpu_host.py [--profile]

Eager models of a realistic size are host-bound on a fast GPU when the framework spends more host time per
kernel than the kernel runs. For a set of single calls (small tensors, so the GPU never holds the host back:
the queue never fills), each framework is called ``N`` times back to back without synchronising, and the host
time per call is reported, pylucid beside PyTorch, with the ratio. A last section splits pylucid's cuDNN
convolution call into its parts (the variant-pack execute of ``cudnn-frontend``, the stream binding, the
workspace, the device context), to show what is cuDNN's and what is ours.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_bench import cuda_frameworks  # noqa: E402

N = 400


def per_call_us(fn, sync, n=N) -> float:
    for _ in range(20):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = (time.perf_counter() - t0) / n
        sync()
        best = min(best, t)
    return best * 1e6


def cases(lib, dev):
    F = lib.nn.functional
    x = lib.randn(8, 64, device=dev)
    w = lib.randn(64, 64, device=dev)
    b = lib.randn(64, device=dev)
    img = lib.randn(4, 16, 8, 8, device=dev)
    cw = lib.randn(16, 16, 3, 3, device=dev)
    img_h, cw_h = img.to(lib.bfloat16), cw.to(lib.bfloat16)
    bn_w, bn_b = lib.ones(16, device=dev), lib.zeros(16, device=dev)
    rm, rv = lib.zeros(16, device=dev), lib.ones(16, device=dev)
    q = lib.randn(2, 4, 16, 32, device=dev).to(lib.bfloat16)
    xg = lib.randn(8, 64, device=dev, requires_grad=True)
    return {
        "add (8x64)": lambda: x + x,
        "mul by a Python float": lambda: x * 0.5,
        "relu": lambda: F.relu(x),
        "linear + bias": lambda: F.linear(x, w, b),
        "sum": lambda: x.sum(),
        "view": lambda: x.view(64, 8),
        "to(bfloat16)": lambda: x.to(lib.bfloat16),
        "conv2d 3x3 fp32 (cuDNN)": lambda: F.conv2d(img, cw, padding=1),
        "conv2d 3x3 bf16 (cuDNN)": lambda: F.conv2d(img_h, cw_h, padding=1),
        "batch_norm (training)": lambda: F.batch_norm(img, rm, rv, bn_w, bn_b, training=True),
        "sdpa causal bf16": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
        "linear fwd+bwd (requires_grad)": lambda: F.linear(xg, w, b).sum().backward(),
    }


def _enter_device(cp):
    with cp.cuda.Device(0):
        pass


def cudnn_parts(pl):
    """The cuDNN convolution call of pylucid, taken apart."""
    import cupy as cp

    from pylucid.backend import cudnn

    img = pl.randn(4, 16, 8, 8, device="cuda").to(pl.bfloat16)
    cw = pl.randn(16, 16, 3, 3, device="cuda").to(pl.bfloat16)
    pl.nn.functional.conv2d(img, cw, padding=1)  # builds the plan
    pl.cuda.synchronize()
    plan = [p for k, p in cudnn._plans.items() if p is not None and k[0] == "conv_fprop"][-1]
    out = cp.empty(4 * 16 * 8 * 8, dtype=cp.uint16)
    ptrs = [img._data.data.ptr, cw._data.data.ptr, out.data.ptr][:len(plan.uids)]
    h = cudnn._handle(0)
    pack = dict(zip(plan.uids, ptrs))
    ws = cp.empty(max(plan.workspace, 1), dtype=cp.uint8)
    sync = cp.cuda.Device().synchronize
    parts = {
        "execute_plan_at_index (prebuilt pack)": lambda: plan.graph.execute_plan_at_index(
            pack, ws.data.ptr, plan.index, handle=h.handle),
        "dict(zip(uids, ptrs))": lambda: dict(zip(plan.uids, ptrs)),
        "_bind_stream": lambda: cudnn._bind_stream(h),
        "cp.empty(workspace)": lambda: cp.empty(max(plan.workspace, 1), dtype=cp.uint8),
        "with cp.cuda.Device(0)": lambda: _enter_device(cp),
        "cudnn._execute (all of it)": lambda: cudnn._execute(plan, ptrs, 0),
    }
    print(f"\npylucid's cuDNN call, taken apart (plan workspace {plan.workspace} bytes, {len(plan.uids)} tensors)")
    for name, fn in parts.items():
        print(f"  {name:42s} {per_call_us(fn, sync):8.1f} us")


def profile_calls(pl, pl_cases, n=300):
    """cProfile of ``n`` calls of the slowest cases: where pylucid's host time goes."""
    import cProfile
    import io
    import pstats

    for name in ("linear + bias", "relu", "view", "batch_norm (training)", "sdpa causal bf16"):
        fn = pl_cases[name]
        with pl.no_grad():
            fn()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(n):
                fn()
            pr.disable()
        pl.cuda.synchronize()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(18)
        print(f"\n== cProfile of {n} calls: {name}")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:4000])


def main() -> int:
    fw = cuda_frameworks()
    if fw is None:
        return 0
    pl, torch = fw
    pl_cases, th_cases = cases(pl, "cuda"), cases(torch, "cuda")
    print(f"host time per call, {N} calls back to back, best of 3 (us)")
    print(f"  {'call':34s} {'pylucid':>9s} {'torch':>9s} {'ratio':>7s}")
    with torch.no_grad(), pl.no_grad():
        for name in pl_cases:
            if "requires_grad" in name:
                continue
            a = per_call_us(pl_cases[name], pl.cuda.synchronize)
            b = per_call_us(th_cases[name], torch.cuda.synchronize)
            print(f"  {name:34s} {a:9.1f} {b:9.1f} {a / b:7.2f}")
    name = "linear fwd+bwd (requires_grad)"
    a = per_call_us(pl_cases[name], pl.cuda.synchronize)
    b = per_call_us(th_cases[name], torch.cuda.synchronize)
    print(f"  {name:34s} {a:9.1f} {b:9.1f} {a / b:7.2f}")
    cudnn_parts(pl)
    if "--profile" in sys.argv:
        profile_calls(pl, pl_cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
