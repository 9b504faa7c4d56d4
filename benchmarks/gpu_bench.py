"""GPU benchmarks: pylucid (CuPy) and PyTorch eager side by side, in one process.

Each measurement interleaves the two frameworks (pylucid, torch, pylucid, torch, ...),
synchronises the device before every clock read, and reports the median; the ratio
column is pylucid time / PyTorch time (lower is better; for bandwidth and TFLOP/s the
ratio is pylucid rate / PyTorch rate, higher is better).

    python benchmarks/gpu_bench.py            # everything
    python benchmarks/gpu_bench.py overhead mul matmul   # chosen sections

Sections: overhead, mul, matmul, mlp, mlp_big, transformer. The nn/optim sections run
only when ``pylucid.nn``/``pylucid.optim`` provide what they need. Without CUDA the
script says so and exits 0.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import traceback

# run from a checkout without installing: the repository root goes first on the path
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sync_all():
    import cupy
    import torch

    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()


def bench_pair(fn_a, fn_b, reps: int = 7, inner: int = 10, warmup: int = 2):
    """Median seconds per call of ``fn_a`` and ``fn_b``, interleaved, device-synchronised."""
    for _ in range(warmup):
        fn_a()
        fn_b()
    _sync_all()
    ta, tb = [], []
    for r in range(reps):
        for fn, acc in ((fn_a, ta), (fn_b, tb)) if r % 2 == 0 else ((fn_b, tb), (fn_a, ta)):
            _sync_all()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            _sync_all()
            acc.append((time.perf_counter() - t0) / inner)
    return statistics.median(ta), statistics.median(tb)


def bench_one(fn, reps: int = 7, inner: int = 10, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    _sync_all()
    ts = []
    for _ in range(reps):
        _sync_all()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        _sync_all()
        ts.append((time.perf_counter() - t0) / inner)
    return statistics.median(ts)


def _row(name, a, b, unit, scale=1.0, higher_better=False):
    ra, rb = a * scale, b * scale
    ratio = (a / b) if b else float("nan")
    print(f"  {name:<46} pylucid {ra:10.2f} {unit:<7} torch {rb:10.2f} {unit:<7} ratio {ratio:6.3f}"
          + ("  (rate: higher is better)" if higher_better else ""), flush=True)
    return ratio


# ---------------------------------------------------------------------------- sections
def section_overhead(pl, torch):
    print("per-op overhead: 100 chained element-wise ops on 1000 floats, forward + backward")
    x = pl.randn(1000, device="cuda", requires_grad=True)
    tx = torch.randn(1000, device="cuda", requires_grad=True)

    def chain(v):
        y = v
        for _ in range(50):
            y = y * 1.0001
            y = y + 0.0001
        return y

    def run_pl():
        chain(x).sum().backward()
        x.grad = None

    def run_t():
        chain(tx).sum().backward()
        tx.grad = None

    def fwd_pl():
        chain(x)

    def fwd_t():
        chain(tx)

    a, b = bench_pair(run_pl, run_t, reps=15, inner=5)
    _row("fwd+bwd, per op", a / 100, b / 100, "us", 1e6)
    a, b = bench_pair(fwd_pl, fwd_t, reps=9, inner=5)
    _row("forward only, per op", a / 100, b / 100, "us", 1e6)
    with pl.no_grad():
        a, b = bench_pair(fwd_pl, lambda: chain(tx.detach()), reps=9, inner=5)
    _row("forward, no_grad, per op", a / 100, b / 100, "us", 1e6)
    _overhead_breakdown(x, torch, tx)


def _overhead_breakdown(x, torch, tx):
    """Host cost of one small element-wise call: fast launch vs CuPy ufunc (CUDABackend.fast_launch)."""
    import cupy

    from pylucid.backend.cuda import CUDABackend

    be = x.device.backend
    a = x._data
    saved = CUDABackend.fast_launch
    try:
        for label, fast in (("be.multiply(a, 1.0001) fast launch", True), ("be.multiply(a, 1.0001) CuPy ufunc", False)):
            CUDABackend.fast_launch = fast
            t_pl, t_t = bench_pair(lambda: [be.multiply(a, 1.0001) for _ in range(100)],
                                   lambda: [tx.detach() * 1.0001 for _ in range(100)], reps=9, inner=5)
            _row(label + ", per call", t_pl / 100, t_t / 100, "us", 1e6)
    finally:
        CUDABackend.fast_launch = saved
    t = bench_one(lambda: [cupy.multiply(a, 1.0001) for _ in range(100)], reps=9, inner=5)
    print(f"  raw cupy.multiply(a, 1.0001) per call {t / 100 * 1e6:8.2f} us; kernel build errors: "
          f"{__import__('pylucid.backend.cuda_launch', fromlist=['x']).fast_kernel_errors or 'none'}")


def section_mul(pl, torch):
    import cupy
    import numpy as np

    from pylucid.backend import cuda_launch as K

    n = 64 * 1024 * 1024  # 256 MB of float32 per array
    nbytes = 3 * 4 * n
    print(f"element-wise multiply, two {4 * n >> 20} MB float32 arrays (GB/s, counting 2 reads + 1 write)")
    a = pl.rand(n, device="cuda")
    b = pl.rand(n, device="cuda")
    ta = torch.rand(n, device="cuda")
    tb = torch.rand(n, device="cuda")
    ca, cb = a._data, b._data
    be = a.device.backend
    out = cupy.empty_like(ca)
    tout = torch.empty_like(ta)
    kern = K.get_kernel("vec_binary_f32")
    n4 = n // 4

    def vec_out():
        kern(((n4 + 255) // 256,), (256,), (ca, cb, out, np.int64(n4), np.int32(0)))

    t_torch = bench_one(lambda: ta * tb)
    rates = {}
    for name, fn in (("pylucid Tensor a * b (op path)", lambda: a * b),
                     ("cupy a * b (generic ufunc, new output)", lambda: ca * cb),
                     ("cupy multiply(out=) (generic ufunc, no alloc)", lambda: cupy.multiply(ca, cb, out=out)),
                     ("backend.multiply (16-byte vector kernel)", lambda: be.multiply(ca, cb)),
                     ("vector kernel, preallocated output", vec_out)):
        t_pl, t_t = bench_pair(fn, lambda: ta * tb, reps=7, inner=10)
        rates[name] = _row(name, nbytes / t_pl / 1e9, nbytes / t_t / 1e9, "GB/s", higher_better=True)
    t_o = bench_one(lambda: torch.mul(ta, tb, out=tout))
    print(f"  torch a*b {nbytes / t_torch / 1e9:.0f} GB/s; torch mul(out=) {nbytes / t_o / 1e9:.0f} GB/s")
    # CUDA-event timing of the generic kernel alone (no host overhead at all)
    ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()
    for label, fn in (("cupy multiply(out=)", lambda: cupy.multiply(ca, cb, out=out)), ("vector kernel", vec_out)):
        fn()
        ev0.record()
        for _ in range(20):
            fn()
        ev1.record()
        ev1.synchronize()
        ms = cupy.cuda.get_elapsed_time(ev0, ev1) / 20
        print(f"  [events] {label:<24} {ms * 1e3:8.1f} us  {nbytes / (ms * 1e-3) / 1e9:7.0f} GB/s")
    return rates


def section_matmul(pl, torch):
    n = 8192
    flop = 2.0 * n ** 3
    print(f"matmul {n}x{n} @ {n}x{n} (TFLOP/s)")
    for pdt, tdt in ((pl.float16, torch.float16), (pl.bfloat16, torch.bfloat16)):
        a = pl.randn(n, n, device="cuda").to(pdt)
        b = pl.randn(n, n, device="cuda").to(pdt)
        ta = torch.randn(n, n, device="cuda", dtype=tdt)
        tb = torch.randn(n, n, device="cuda", dtype=tdt)
        t_pl, t_t = bench_pair(lambda: a @ b, lambda: ta @ tb, reps=5, inner=10)
        _row(f"{pdt.name}", flop / t_pl / 1e12, flop / t_t / 1e12, "TFLOP/s", higher_better=True)
        # batched (attention-like) half matmul: CuPy's own matmul upcasts these to float32
        ab = pl.randn(64, 512, 512, device="cuda").to(pdt)
        tab = torch.randn(64, 512, 512, device="cuda", dtype=tdt)
        fl = 2.0 * 64 * 512 ** 3
        t_pl, t_t = bench_pair(lambda: ab @ ab, lambda: tab @ tab, reps=5, inner=10)
        _row(f"{pdt.name} batched 64x512x512", fl / t_pl / 1e12, fl / t_t / 1e12, "TFLOP/s", higher_better=True)


def _has(pl, *names):
    for n in names:
        obj = pl
        for part in n.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return False
    return True


def _mlp_step(lib, sizes, batch, dev="cuda"):
    nn = lib.nn
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers).to(dev)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x = lib.randn(batch, sizes[0], device=dev)
    y = lib.randint(0, sizes[-1], (batch,), device=dev)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def section_mlp(pl, torch, sizes=(784, 512, 512, 10), batch=128, title="MLP 784-512-512-10 Adam step, batch 128"):
    print(title)
    if not _has(pl, "nn.Linear", "nn.ReLU", "nn.Sequential", "optim.Adam", "nn.functional.cross_entropy"):
        print("  skipped: pylucid.nn / pylucid.optim do not provide Linear, ReLU, Sequential, Adam, cross_entropy yet")
        return
    sp = _mlp_step(pl, sizes, batch)
    st = _mlp_step(torch, sizes, batch)
    a, b = bench_pair(sp, st, reps=15, inner=20)  # the host's timings are noisy: many short interleaved rounds
    _row("training step", a, b, "ms", 1e3)


def section_mlp_big(pl, torch):
    section_mlp(pl, torch, (1024, 4096, 4096, 10), 1024, "MLP 1024-4096-4096-10 Adam step, batch 1024")


class _Block:
    """A pre-norm transformer block written once for both frameworks (``lib`` is pylucid or torch)."""

    def __init__(self, lib, d=512, heads=8, dev="cuda"):
        nn = lib.nn
        self.lib, self.h = lib, heads
        self.ln1, self.ln2 = nn.LayerNorm(d).to(dev), nn.LayerNorm(d).to(dev)
        self.qkv, self.proj = nn.Linear(d, 3 * d).to(dev), nn.Linear(d, d).to(dev)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d).to(dev), nn.Linear(4 * d, d).to(dev)
        self.params = [p for m in (self.ln1, self.ln2, self.qkv, self.proj, self.fc1, self.fc2)
                       for p in m.parameters()]

    def __call__(self, x):
        lib, h = self.lib, self.h
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
        att = lib.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(lib.nn.functional.gelu(self.fc1(self.ln2(x))))


def _forward(lib, blk, x, autocast_dtype=None):
    """``blk(x)``, under ``lib``'s CUDA autocast when ``autocast_dtype`` is given."""
    if autocast_dtype is None:
        return blk(x)
    ac = lib.amp.autocast("cuda", dtype=autocast_dtype) if lib.__name__ == "pylucid" else \
        lib.autocast("cuda", dtype=autocast_dtype)
    with ac:
        return blk(x)


def _block_step(lib, autocast_dtype=None):
    blk = _Block(lib)
    opt = lib.optim.Adam(blk.params, lr=1e-4)
    x = lib.randn(32, 128, 512, device="cuda")

    def step():
        opt.zero_grad()
        out = _forward(lib, blk, x, autocast_dtype)
        out.float().pow(2).mean().backward()
        opt.step()

    return step


def section_transformer(pl, torch):
    print("transformer block (d=512, 8 heads, 128 tokens, batch 32) training step")
    if not _has(pl, "nn.Linear", "nn.LayerNorm", "optim.Adam", "nn.functional.gelu", "softmax", "unbind"):
        print("  skipped: pylucid lacks one of nn.Linear, nn.LayerNorm, optim.Adam, nn.functional.gelu, softmax, "
              "unbind")
        return
    for label, pdt, tdt in (("float32", None, None), ("bf16 autocast", pl.bfloat16, torch.bfloat16)):
        sp = _block_step(pl, pdt)
        st = _block_step(torch, tdt)
        a, b = bench_pair(sp, st, reps=15, inner=10)
        _row(label, a, b, "ms", 1e3)


def section_probe(pl, torch):
    """What CuPy does natively with bfloat16, and whether the backend's routes hold."""
    import cupy
    import ml_dtypes
    import numpy as np

    print("bfloat16 probe (native CuPy calls; 'ok' means it ran and matched float32 within bf16 precision)")
    bf = np.dtype(ml_dtypes.bfloat16)
    x = cupy.asarray(np.linspace(-3, 3, 64, dtype=np.float32).astype(bf))
    y = cupy.asarray(np.linspace(0.5, 2, 64, dtype=np.float32).astype(bf))
    m = cupy.asarray(np.random.default_rng(0).standard_normal((64, 64)).astype(bf))
    calls = {
        "multiply": lambda a: a * y, "add_scalar": lambda a: a + bf.type(1.5), "exp": cupy.exp,
        "log": lambda a: cupy.log(y),
        "tanh": cupy.tanh, "sqrt": lambda a: cupy.sqrt(y), "maximum": lambda a: cupy.maximum(a, 0),
        "where": lambda a: cupy.where(a > 0, a, y), "sum": lambda a: a.sum(),
        "sum_f32": lambda a: a.sum(dtype=np.float32),
        "mean": lambda a: a.mean(), "max": lambda a: a.max(), "argmax": lambda a: a.argmax(), "cumsum": cupy.cumsum,
        "sort": cupy.sort, "floor": cupy.floor, "round": cupy.round, "remainder": lambda a: cupy.remainder(a, y),
        "clip": lambda a: cupy.clip(a, -1, 1), "power": lambda a: cupy.power(y, 2), "matmul2d": lambda a: m @ m,
        "matmul_batched": lambda a: cupy.matmul(m[None], m[None]), "astype_f32": lambda a: a.astype(np.float32),
        "erf(cupyx)": lambda a: __import__("cupyx.scipy.special").scipy.special.erf(a),
        "add.at": lambda a: cupy.add.at(cupy.zeros(4, bf), cupy.asarray([0, 1, 1]), a[:3]),
        "asnumpy": lambda a: cupy.asnumpy(a), "dlpack": lambda a: cupy.from_dlpack(a),
        "take": lambda a: a[cupy.asarray([1, 2])], "var": cupy.var, "isnan": cupy.isnan,
    }
    for name, fn in calls.items():
        try:
            out = fn(x)
            cupy.cuda.Device().synchronize()
            print(f"  {name:<16} ok   -> {getattr(out, 'dtype', type(out).__name__)}")
        except Exception as exc:
            msg = str(exc).splitlines()[0][:100] if str(exc) else ""
            print(f"  {name:<16} FAIL {type(exc).__name__}: {msg}")
    be = pl.device("cuda").backend
    print(f"  backend direct cuBLAS gemm error: {be.gemm_error}")
    print(f"  cupy compute type for float16 matmul: {cupy._core.get_compute_type(np.float16)}; "
          f"CUPY_TF32={__import__('os').environ.get('CUPY_TF32')}")


SECTIONS = {"probe": section_probe, "overhead": section_overhead, "mul": section_mul, "matmul": section_matmul,
            "mlp": section_mlp, "mlp_big": section_mlp_big, "transformer": section_transformer}


def cuda_frameworks():
    """``(pylucid, torch)`` when both see a GPU; otherwise print why and return None."""
    import pylucid

    if not pylucid.cuda.is_available():
        print(f"CUDA is unavailable ({pylucid.backend.cuda.unavailable_reason()}): nothing to benchmark.")
        return None
    import torch

    if not torch.cuda.is_available():
        print("this PyTorch build has no CUDA: the side-by-side benchmarks need it; nothing to do.")
        return None
    return pylucid, torch


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    frameworks = cuda_frameworks()
    if frameworks is None:
        return 0
    pylucid, torch = frameworks
    import cupy
    import numpy
    print(f"GPU {pylucid.cuda.get_device_name()}; CuPy {cupy.__version__} (CUDA runtime "
          f"{cupy.cuda.runtime.runtimeGetVersion()}, driver {cupy.cuda.runtime.driverGetVersion()}); "
          f"torch {torch.__version__}; numpy {numpy.__version__}; pylucid {pylucid.__version__}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # both frameworks: full-precision float32 GEMMs
    names = argv or list(SECTIONS)
    for name in names:
        try:
            SECTIONS[name](pylucid, torch)
        except Exception:
            print(f"  section {name} failed:")
            traceback.print_exc(limit=6, file=sys.stdout)
        _sync_all()
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
