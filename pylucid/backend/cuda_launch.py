"""Compiling and launching the CUDA backend's kernels (CuPy is imported only when a kernel is built).

* :func:`get_kernel`: a fused kernel of :mod:`pylucid.backend.cuda_sources`, compiled once per
  (name, dtype, device) and wrapped in a :func:`generic_launcher`.
* :func:`fast_kernel`, :func:`cast_kernel`, :func:`bias_add_kernel`, :func:`strided_copy_kernel`:
  the generated one-line kernels, compiled on first use; a kernel that fails to compile is
  recorded in :data:`fast_kernel_errors` and its caller keeps CuPy's generic call.
* Two launchers that call ``cuLaunchKernel`` with a preallocated parameter block instead of
  CuPy's per-call argument packing: :func:`generic_launcher` for any parsed signature
  (:func:`signature_layout`), :func:`raw_launcher` for the fixed layouts of the one-line kernels.
"""

from __future__ import annotations

import functools

import numpy as np

from .cuda_sources import (bias_add_source, cast_source, fast_source, int_scalar_inplace_source, kernel_source,
                           strided_copy_source)

_cache: dict = {}
#: set by the CUDA backend when the process sees exactly one GPU: :func:`get_kernel` then also keeps its kernels in
#: ``_cache_one``, keyed without the device, and skips the current-device lookup
one_device = False
_cache_one: dict = {}
#: get_kernel returns :func:`generic_launcher` launchers (False: CuPy's RawKernel call), read when built
_RAW_GET_KERNEL = True
#: (op, kind, dtype name) -> why the fast kernel could not be built (empty when all compiled)
fast_kernel_errors: dict = {}


def get_kernel(name: str, dtype=np.float32, io=None, out=None, grad=None):
    """The compiled kernel ``name`` of :data:`cuda_sources.KERNELS` for ``dtype`` (float32/float64) on the
    current device (``io``: the storage dtype name of an :data:`~cuda_sources.IO_KERNELS` kernel's large
    operands; ``out``/``grad``: the bias + activation kernels' result and gradient types, see
    :func:`~cuda_sources.kernel_source`): a :func:`generic_launcher`, or the ``RawKernel`` itself when its
    signature is not parsed."""
    if one_device:  # every kernel is on device 0: no runtime call to find the current one
        k = _cache_one.get((name, dtype, io, out, grad))
        if k is not None:
            return k
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (name, dtype, dev, io, out, grad)
    k = _cache.get(key)
    if k is None:
        src = kernel_source(name, dtype, io, out, grad)
        raw = cupy.RawKernel(src, name)
        k = raw
        if _RAW_GET_KERNEL:
            layout = signature_layout(src, name)
            fn = getattr(raw, "kernel", None)  # compiled for the current device
            if layout is not None and fn is not None:
                k = generic_launcher(fn, layout)
        _cache[key] = k
    if one_device:
        _cache_one[(name, dtype, io, out, grad)] = k
    return k


def signature_layout(src: str, name: str):
    """The argument layout of kernel ``name`` in ``src``, one letter per parameter (p: pointer, q: 64-bit
    integer, i: int, u: unsigned int, d: double, f: float), or None for any other parameter type."""
    head = src.split(f"void {name}(", 1)
    if len(head) != 2:
        return None
    out = []
    for param in head[1].split(")", 1)[0].split(","):
        words = param.replace("const ", " ").split()
        if "*" in param:
            out.append("p")
            continue
        typ = " ".join(words[:-1])
        kind = {"long long": "q", "unsigned long long": "q", "int": "i", "unsigned int": "u", "unsigned": "u",
                "double": "d", "float": "f"}.get(typ)
        if kind is None:
            return None
        out.append(kind)
    return "".join(out)


def generic_launcher(fn, layout: str):
    """``k(grid, block, args)`` calling ``cuLaunchKernel`` directly for a kernel of any :func:`signature_layout`.

    Each argument goes into an 8-byte slot of a preallocated parameter block in the kernel's own
    type (an array's data pointer, or an integer for a null pointer; integers and floats converted
    to the declared width), which the driver copies during the call. CuPy's ``RawKernel`` call
    resolves the device and module and converts every argument to a parameter object first (about
    0.8 us per argument on the H200 hosts). Calls from another thread than the builder's, with
    another number of arguments, or with a pointer argument that is neither a CuPy array nor an
    integer, take CuPy's call. The writes are straight-line code generated per layout
    (:func:`_generic_closure_factory`).
    """
    import threading

    import cupy
    from cupy.cuda import driver

    nslots = len(layout)
    q = np.zeros(max(nslots, 1), np.uint64)
    slots = np.array([q.ctypes.data + 8 * j for j in range(max(nslots, 1))], np.uint64)
    k = _generic_closure_factory(layout)(fn, fn.ptr, q, slots.ctypes.data, driver.launchKernel,
                                         cupy.cuda.get_current_stream, threading.get_ident(), threading.get_ident,
                                         cupy.ndarray)
    k.buffers = (q, slots)
    k.function = fn
    k.layout = layout
    return k


#: the write of argument ``j`` into its slot in :func:`generic_launcher`'s closures, per layout letter
#: (``q``/``s64``/``u32``/``i32``/``d``/``f32``: views of the block; a 32-bit value fills the low half,
#: index ``h`` = 2 j, of its 8-byte slot on these little-endian hosts)
_CHECKED_WRITE = {
    "p": ("if a{j}.__class__ is nd:\n"
          "            q[{j}] = a{j}.data.ptr\n"
          "        elif isinstance(a{j}, _INTS):  # a null (or raw) pointer\n"
          "            q[{j}] = int(a{j})\n"
          "        else:\n"
          "            return fn(grid, block, args)"),
    "q": "s64[{j}] = int(a{j})", "i": "i32[{h}] = int(a{j})", "u": "u32[{h}] = int(a{j})",
    "d": "d[{j}] = float(a{j})", "f": "f32[{h}] = float(a{j})",
}


@functools.lru_cache(maxsize=None)
def _generic_closure_factory(layout: str):
    """``make(fn, fptr, q, params, launch, current, owner, ident, nd) -> k``: :func:`generic_launcher`'s closure
    for ``layout`` (``nd``: the array class whose data pointers go into ``p`` slots).

    As in :func:`_raw_closure_factory`, the arguments are unpacked and each one written by a statement of
    its own: the loop over the layout this replaced cost about 0.3 us per argument, and these kernels
    (norms, column sums, attention helpers, Adam) take 8-17 arguments. Grids and blocks of 1-3 dims.
    """
    n = len(layout)
    writes = "".join(f"        {_CHECKED_WRITE[ch].format(j=j, h=2 * j)}\n" for j, ch in enumerate(layout))
    unpack = f"        {''.join(f'a{j}, ' for j in range(n))}= args\n" if n else ""
    src = ("def make(fn, fptr, q, params, launch, current, owner, ident, nd):\n"
           "    s64, d, f32, i32, u32 = q.view(_np.int64), q.view(_np.float64), q.view(_np.float32), "
           "q.view(_np.int32), q.view(_np.uint32)\n"
           "    def k(grid, block, args):\n"
           f"        if ident() != owner or len(args) != {n}:\n"
           "            return fn(grid, block, args)\n"
           f"{unpack}{writes}"
           "        ng, nb = len(grid), len(block)\n"
           "        launch(fptr, grid[0], grid[1] if ng > 1 else 1, grid[2] if ng > 2 else 1,\n"
           "               block[0], block[1] if nb > 1 else 1, block[2] if nb > 2 else 1, 0, current().ptr, params, 0)\n"
           "    return k\n")
    scope: dict = {"_np": np, "_INTS": (int, np.integer)}
    exec(compile(src, f"<generic launcher {layout}>", "exec"), scope)
    return scope["make"]


def _compile(got, key):
    """The compiled function of ``got = (source, name)`` on the current device; None (the reason kept in
    :data:`fast_kernel_errors` under ``key``) if NVRTC refused it."""
    src, name = got
    try:
        import cupy

        raw = cupy.RawKernel(src, name)
        fn = getattr(raw, "kernel", None)  # compiles now; errors surface here, not mid-op
        return raw if fn is None else fn
    except Exception as exc:  # pragma: no cover - depends on the NVRTC build
        fast_kernel_errors[key] = f"{type(exc).__name__}: {exc}"
        return None


def fast_kernel(op: str, kind: str, dtype):
    """The launchable function of a fast element-wise kernel on the current device, or None.

    None when the op/dtype is not covered, or when compiling failed (the caller then keeps
    CuPy's ufunc for that op and dtype; the reason is kept in ``fast_kernel_errors``).
    Returns the compiled ``cupy.cuda.Function`` (``RawKernel.kernel``), whose call skips the
    RawKernel's per-call device lookup; the RawKernel itself if that attribute is missing.
    """
    dt = np.dtype(dtype)
    got = fast_source(op, kind, dt.name)
    if got is None:
        return None
    return _compile(got, (op, kind, dt.name))


def int_scalar_inplace_kernel(op: str, dtype):
    """The launchable ``k(grid, block, (a, s, n))`` of :func:`int_scalar_inplace_source` on the current device,
    or None (not covered, or NVRTC refused it)."""
    name = np.dtype(dtype).name
    got = int_scalar_inplace_source(op, name)
    if got is None:
        return None
    return _compile(got, ("inplace_int", op, name))


def bias_add_kernel(dtype, bias_dtype=None):
    """The launchable ``k(grid, block, (y, b, ncol, n))`` of :func:`bias_add_source`, or None."""
    name = np.dtype(dtype).name
    bname = np.dtype(bias_dtype).name if bias_dtype is not None else name
    got = bias_add_source(name, bname)
    if got is None:
        return None
    fn = _compile(got, ("bias_add", name, bname))
    if fn is None or not hasattr(fn, "ptr"):
        return fn
    layout = signature_layout(got[0], got[1])  # the direct launch: CuPy's call costs several us per Linear
    return generic_launcher(fn, layout) if _RAW_GET_KERNEL and layout else fn


def cast_kernel(src, dst):
    """The launchable ``k(grid, block, (a, c, n))`` of :func:`cast_source` on the current device, or None."""
    s, d = np.dtype(src).name, np.dtype(dst).name
    got = cast_source(s, d)
    if got is None:
        return None
    return _compile(got, ("cast", s, d))


def strided_copy_kernel(itemsize: int, strided_dst: bool = False):
    """The launchable ``k(grid, block, args)`` of :func:`strided_copy_source` (a direct launch), or None."""
    got = strided_copy_source(itemsize, strided_dst)
    if got is None:
        return None
    fn = _compile(got, ("strided_copy", itemsize, strided_dst))
    if fn is None or not hasattr(fn, "ptr"):
        return fn
    layout = signature_layout(got[0], got[1])
    return generic_launcher(fn, layout) if _RAW_GET_KERNEL and layout else fn


#: argument layouts of the kernels :func:`raw_launcher` can launch (p: array pointer, d: double, q: int64)
RAW_LAYOUTS = {"aa": "pppq", "as": "pdpq", "sa": "dppq", "u": "ppq", "cast": "ppq", "int_s": "pqq"}


def raw_launcher(fn, kind: str):
    """A ``k(grid, block, args)`` for the compiled ``fn`` that calls ``cuLaunchKernel`` directly.

    ``cupy.cuda.Function.__call__`` builds a parameter object per argument and resolves the
    stream on every call (~1.5 us of host time against ~4 us for the launch itself on the H200
    hosts). Here the arguments of one fixed layout (:data:`RAW_LAYOUTS`: the fast element-wise
    and cast kernels, whose array operands are C-contiguous) are written into a preallocated
    parameter block that the driver copies during the call. The block belongs to the thread that
    built the launcher; a call from any other thread takes CuPy's call, so two threads never
    share it. The stream is CuPy's current stream, as in CuPy's call. ``fn`` without a ``ptr``
    (an uncompiled RawKernel) is returned as it is.
    """
    fptr = getattr(fn, "ptr", None)
    layout = RAW_LAYOUTS.get(kind)
    if fptr is None or layout is None:
        return fn
    import threading

    import cupy
    from cupy.cuda import driver

    # the argument values, 8 bytes each; the parameter array points at each slot
    n = len(layout)
    q = np.zeros(n, np.uint64)
    slots = np.array([q.ctypes.data + 8 * i for i in range(n)], np.uint64)
    k = _raw_closure_factory(layout)(fn, fptr, q, q.view(np.float64), slots.ctypes.data, driver.launchKernel,
                                     cupy.cuda.get_current_stream, threading.get_ident(), threading.get_ident)
    # the buffers live as long as the launcher
    k.buffers = (q, slots)
    k.function = fn
    return k


#: the write of argument ``j`` into its slot, per layout letter (``q``/``d``: the block as uint64/float64)
_SLOT_WRITE = {"p": "q[{j}] = a{j}.data.ptr", "d": "d[{j}] = a{j}", "q": "q[{j}] = a{j}"}


@functools.lru_cache(maxsize=None)
def _raw_closure_factory(layout: str):
    """``make(fn, fptr, q, d, params, launch, current, owner, ident) -> k``: the launch closure of ``layout``.

    ``k`` unpacks its arguments and writes each one into its slot with a statement of its own: a
    loop over the layout (as in :func:`generic_launcher`) costs ~1 us more per call, and these
    kernels run once per element-wise op. The closure's source is generated from the layout, so
    every layout shares this one definition and runs straight-line code.
    """
    names = ", ".join(f"a{j}" for j in range(len(layout)))
    writes = "".join(f"        {_SLOT_WRITE[ch].format(j=j)}\n" for j, ch in enumerate(layout))
    src = ("def make(fn, fptr, q, d, params, launch, current, owner, ident):\n"
           "    def k(grid, block, args):\n"
           "        if ident() != owner:\n"
           "            return fn(grid, block, args)\n"
           f"        {names} = args\n"
           f"{writes}"
           "        launch(fptr, grid[0], 1, 1, block[0], 1, 1, 0, current().ptr, params, 0)\n"
           "    return k\n")
    scope: dict = {}
    exec(compile(src, f"<raw launcher {layout}>", "exec"), scope)
    return scope["make"]
