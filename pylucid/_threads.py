"""CPU thread settings, as PyTorch's ``torch.set_num_threads`` / ``get_num_threads`` /
``set_num_interop_threads`` / ``get_num_interop_threads``.

pylucid's CPU arithmetic runs in NumPy, whose only multi-threaded kernels are the BLAS ones (GEMMs,
and so convolutions, linear layers, attention); the CPU backend also splits its convolution layout copies
and batch-norm passes over the batch across that many threads (:func:`parallel_chunks`: NumPy releases
the GIL in those loops). ``set_num_threads(n)`` therefore sets the thread count
of the BLAS libraries loaded in the process, at run time: through ``threadpoolctl`` when it is
installed, else by calling the libraries' own ``*_set_num_threads`` entry point (OpenBLAS, including
the ``scipy_openblas`` builds NumPy and SciPy ship, MKL, BLIS) found among the loaded shared objects.
The ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` environment variables are read once when a BLAS
library loads, so setting them after ``import pylucid`` would do nothing.

pylucid has no inter-op thread pool (ops run one after another on the calling thread), so the
inter-op setting is recorded and reported back only.

>>> import pylucid
>>> n = pylucid.get_num_threads()
>>> pylucid.set_num_threads(1)
>>> pylucid.get_num_threads()
1
>>> pylucid.set_num_threads(n)
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads"]

#: (library name fragment, setter symbols, getter symbols), first match wins within a library
_BLAS_SYMBOLS = (
    ("openblas", ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
                  "openblas_set_num_threads"),
     ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
      "openblas_get_num_threads")),
    ("mkl_rt", ("MKL_Set_Num_Threads",), ("MKL_Get_Max_Threads",)),
    ("blis", ("bli_thread_set_num_threads",), ("bli_thread_get_num_threads",)),
)

_state = {"threads": None, "interop": None, "libs": None, "pool": None, "pool_key": None}


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _loaded_paths() -> list:
    """The shared objects mapped into this process (Linux: /proc/self/maps; elsewhere none)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


def _blas_libs() -> list:
    """``[(setter, getter)]`` ctypes functions of the BLAS libraries loaded now (NumPy's at least: the
    CPU backend imported it with pylucid)."""
    out = []
    for path in _loaded_paths():
        base = os.path.basename(path).lower()
        for frag, setters, getters in _BLAS_SYMBOLS:
            if frag not in base:
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            setter = next((getattr(lib, s) for s in setters if hasattr(lib, s)), None)
            getter = next((getattr(lib, s) for s in getters if hasattr(lib, s)), None)
            if setter is not None:
                setter.restype = None
                setter.argtypes = [ctypes.c_int]
                if getter is not None:
                    getter.restype = ctypes.c_int
                    getter.argtypes = []
                out.append((setter, getter))
            break
    return out


def _check(n, fn: str) -> int:
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"{fn}: expected an int number of threads, got {type(n).__name__}")
    n = n.__index__()
    if n <= 0:
        raise RuntimeError(f"{fn}: number of threads must be positive, got {n}")
    return n


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for pylucid's intra-op CPU parallelism (the BLAS kernels), as
    ``torch.set_num_threads``. Applies to every BLAS library loaded in the process."""
    n = _check(n, "set_num_threads")
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(limits=n, user_api="blas")
    else:
        _state["libs"] = _blas_libs()  # scanned again: SciPy's own BLAS may have loaded since
        for setter, _ in _state["libs"]:
            setter(n)
    _state["threads"] = n


def blas_loaded() -> None:
    """Apply the last :func:`set_num_threads` value to the BLAS libraries loaded now (called when pylucid
    loads one itself, as the CPU backend does with MKL on its first GEMM)."""
    _state["libs"] = None
    if _state["threads"] is not None:
        set_num_threads(_state["threads"])


#: OpenBLAS's idle wait, as its THREAD_TIMEOUT setting: a worker spins 2^n cycles after its part of a call before
#: it sleeps (OpenBLAS's default is n = 28, about 0.1 s)
_SHORT_BLAS_WAIT = 4


def short_blas_wait() -> bool:
    """Make the idle threads of the OpenBLAS libraries loaded now sleep at once after their work instead of
    spinning for about 0.1 s, so that another thread pool running right after a BLAS call -- oneDNN's OpenMP
    team, PyTorch's -- gets the cores. With 2 cores, oneDNN's bfloat16 GEMM ran 5x slower right after a NumPy
    float32 GEMM (measured), its second thread sharing a core with a spinning OpenBLAS worker. Called before the
    first oneDNN primitive runs; processes that never run one keep OpenBLAS's default, which suits a run of
    small back-to-back BLAS calls (a recurrent layer's steps).

    OpenBLAS reads its wait (``OPENBLAS_THREAD_TIMEOUT``) once, when it loads: the variable is set for the
    moment OpenBLAS re-reads its environment (``openblas_read_env``), and its worker threads are stopped
    (``blas_thread_shutdown_``); the next threaded call starts them again with the new wait. A wait the user set
    in the environment is left as it is. Returns whether any library was changed."""
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ or "GOTO_THREAD_TIMEOUT" in os.environ:
        return False
    changed = False
    for path in _loaded_paths():
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)
            read_env, shutdown, timeout = lib.openblas_read_env, lib.blas_thread_shutdown_, lib.openblas_thread_timeout
        except (OSError, AttributeError):  # an OpenBLAS without these entry points: left as it is
            continue
        read_env.restype, shutdown.restype, timeout.restype = None, ctypes.c_int, ctypes.c_int
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(_SHORT_BLAS_WAIT)
        try:
            read_env()
        finally:
            del os.environ["OPENBLAS_THREAD_TIMEOUT"]
        if timeout() == _SHORT_BLAS_WAIT:
            shutdown()
            changed = True
    return changed


def get_num_threads() -> int:
    """The number of threads of pylucid's intra-op CPU parallelism, as ``torch.get_num_threads``: the
    last :func:`set_num_threads` value, else the BLAS library's own count (else the usable cores)."""
    if _state["threads"] is not None:
        return _state["threads"]
    if _state["libs"] is None:
        _state["libs"] = _blas_libs()
    for _, getter in _state["libs"]:
        if getter is not None:
            return max(1, int(getter()))
    return _default_threads()


def set_num_interop_threads(n: int) -> None:
    """Record ``n`` as the inter-op thread count, as ``torch.set_num_interop_threads``. pylucid runs
    ops one after another on the calling thread, so the value is reported back and changes nothing."""
    _state["interop"] = _check(n, "set_num_interop_threads")


def get_num_interop_threads() -> int:
    """The inter-op thread count, as ``torch.get_num_interop_threads`` (default: the usable cores)."""
    return _state["interop"] if _state["interop"] is not None else _default_threads()


def _pool(workers: int):
    """A thread pool of ``workers`` threads, made again after a fork (a child inherits no threads) or when
    the thread count changed."""
    key = (os.getpid(), workers)
    if _state["pool_key"] != key:
        from concurrent.futures import ThreadPoolExecutor

        old = _state["pool"]
        if old is not None and _state["pool_key"][0] == key[0]:
            old.shutdown(wait=False)  # its idle threads exit (a forked child's copy has none to stop)
        _state["pool"] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pylucid-cpu")
        _state["pool_key"] = key
    return _state["pool"]


#: ``busy`` is set on a thread while it runs a chunk of :func:`parallel_chunks`
_chunk_state = threading.local()


def _run_chunk(fn, lo: int, hi: int) -> None:
    _chunk_state.busy = True
    try:
        fn(lo, hi)
    finally:
        _chunk_state.busy = False


def parallel_chunks(fn, n: int, threads: int | None = None) -> None:
    """Call ``fn(lo, hi)`` over ``[0, n)`` cut into at most ``threads`` (default :func:`get_num_threads`)
    contiguous chunks, one per thread, the calling thread taking the first; returns when all are done, and
    raises the first chunk's exception. ``fn`` must write disjoint outputs per chunk, and does useful work in
    parallel only where it runs GIL-free NumPy loops (copies, ufuncs, reductions on large arrays). Called from
    inside a chunk it runs ``fn(0, n)`` on that thread (a worker waiting on the pool it belongs to could wait
    for itself)."""
    t = min(get_num_threads() if threads is None else threads, n)
    if t <= 1 or getattr(_chunk_state, "busy", False):
        fn(0, n)
        return
    bounds = [n * i // t for i in range(t + 1)]
    futs = [_pool(t - 1).submit(_run_chunk, fn, bounds[i], bounds[i + 1]) for i in range(1, t)]
    try:
        _run_chunk(fn, bounds[0], bounds[1])
    finally:
        for f in futs:
            f.result()
