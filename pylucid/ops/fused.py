"""Fused multi-tensor updates: one backend call updates a list of tensors in place (the optimizers' fused steps).

These are not differentiable ops and do not go through ``apply``: like the direct in-place paths of
``elementwise.py`` they write into the tensors' storage, bump the version counter of every tensor
they write (as an in-place op does) and record no graph. Optimizers call them under ``no_grad``.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state
from .._tensor import _TENSOR_TYPES
from ..errors import DeviceMismatch, DtypeMismatch, ShapeMismatch
from ._op import check_inplace_leaf
from .registry import declare

#: the NumPy/CuPy dtypes of pylucid's floating dtypes
_FLOAT_ARRAY_DTYPES = frozenset(d.numpy_dtype for d in _dt.ALL_DTYPES if d.is_floating_point)


def _arrays_of(op: str, names: tuple, lists: tuple):
    """``(device, arrays)`` of the tensor lists ``lists``: equal lengths, one device, and at every index
    one shape and one floating dtype (checked in whole-list passes; the loop below only words the error)."""
    n = len(lists[0])
    if not n and not any(lists):
        return None, [[] for _ in lists]
    try:
        arrays = [[t._data for t in seq] for seq in lists]
        dev = lists[0][0]._device
        one_device = all(t._device is dev for seq in lists for t in seq)  # devices are canonical objects
    except (AttributeError, IndexError):
        one_device = False
    if one_device and all(len(seq) == n for seq in lists):
        shapes = [a.shape for a in arrays[0]]
        dtypes = [a.dtype for a in arrays[0]]
        if (all([a.shape for a in arr] == shapes and [a.dtype for a in arr] == dtypes for arr in arrays[1:])
                and _FLOAT_ARRAY_DTYPES.issuperset(dtypes)):
            return dev, arrays
    for name, seq in zip(names, lists):
        if len(seq) != n:
            raise ValueError(f"{op}: {names[0]} has {n} tensors but {name} has {len(seq)}; pass one of each per "
                             "parameter")
    dev = None
    for i, row in enumerate(zip(*lists)):
        first = row[0]
        for name, t in zip(names, row):
            if t.__class__ not in _TENSOR_TYPES:
                raise TypeError(f"{op}: {name}[{i}] must be a Tensor, got {type(t).__name__}")
            if dev is None:
                dev = t._device
            elif t._device is not dev:
                raise DeviceMismatch(f"{op}: expected all tensors on one device, got {dev} and {t._device} "
                                     f"({name}[{i}])")
            if t._data.shape != first._data.shape:
                raise ShapeMismatch(f"{op}: {name}[{i}] has shape {tuple(t.shape)}, {names[0]}[{i}] has "
                                    f"{tuple(first.shape)}; they must be equal")
            if t._data.dtype != first._data.dtype:
                raise DtypeMismatch(f"{op}: {name}[{i}] is {t.dtype}, {names[0]}[{i}] is {first.dtype}; they must "
                                    "have one dtype")
        if not first.dtype.is_floating_point:
            raise DtypeMismatch(f"{op}: {names[0]}[{i}] is {first.dtype}; a floating dtype is expected")
    raise AssertionError(f"{op}: inconsistent tensor lists")  # pragma: no cover - the checks above cover the passes


def _check_leaves(op: str, params) -> None:
    """An update in place of a leaf that requires grad is refused while grad mode is on (as any in-place op)."""
    if state.grad_enabled:
        for p in params:
            check_inplace_leaf(p, op)


def _bump_versions(*written) -> None:
    """Every written tensor's version goes up by one, as after an in-place op."""
    for seq in written:
        for t in seq:
            t._version[0] += 1


@declare(method=False)
def _fused_adam_(params, grads, exp_avgs, exp_avg_sqs, *, step: int, lr: float, beta1: float, beta2: float,
                 eps: float, weight_decay: float = 0.0, decoupled: bool = False, maximize: bool = False,
                 found_inf=None, max_exp_avg_sqs=None) -> None:
    r"""One Adam step (AdamW with ``decoupled=True``) for lists of tensors, in place, in one backend call.

    For every ``p, g, m, v`` of ``params, grads, exp_avgs, exp_avg_sqs``, with ``step`` the step
    number already counted (PyTorch's single-tensor arithmetic)::

        g = -g if maximize
        Adam:  g = g + weight_decay * p            AdamW:  p = p * (1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**step) * m / (sqrt(v) / sqrt(1 - beta2**step) + eps)

    ``params``, ``exp_avgs`` and ``exp_avg_sqs`` are written and their versions bumped; ``grads``
    are only read. All tensors are on one device, and the four tensors of one index share a shape
    and a floating dtype. On CUDA the contiguous float32/float64 tensors are updated by one
    multi-tensor kernel launch per dtype; half-precision (and strided) tensors, and every tensor on
    the CPU, are updated one by one, half precision computed in float32 and rounded once. On the CPU each
    tensor is updated in cache-sized blocks by in-place passes into two reused scratch buffers, PyTorch's
    single-tensor order of operations (``lerp`` for ``m``, ``addcmul`` for ``v``, ``addcdiv`` for ``p``).
    ``max_exp_avg_sqs`` (CPU only) turns on AMSGrad: ``vmax = max(vmax, v)`` replaces ``v`` in the
    denominator, and those tensors are written too. Unlike ``torch._fused_adam_`` one ``step`` serves the whole
    list, and there is no ``grad_scale``. ``step`` may be a one-element CUDA tensor (capturable: the kernel counts it
    up and computes the bias corrections on the device, so a replayed CUDA graph advances them), and ``lr``,
    ``beta1`` and ``beta2`` with it one-element tensors (a scheduler's ``fill_`` reaches a replayed graph).
    With a capturable ``step``, ``found_inf`` may be a one-element float32 tensor on the same device
    (``GradScaler``'s inf flag): when it is nonzero the kernel changes nothing, the step count included.

    Raises ValueError for lists of different lengths, TypeError for a non-Tensor,
    DeviceMismatch, ShapeMismatch or DtypeMismatch naming the index, and RuntimeError for a
    parameter that requires grad while grad mode is on (call it under ``pylucid.no_grad()``).

    >>> import pylucid
    >>> p, g = pylucid.tensor([1.0, -2.0]), pylucid.tensor([2.0, -4.0])
    >>> m, v = pylucid.zeros(2), pylucid.zeros(2)
    >>> pylucid._fused_adam_([p], [g], [m], [v], step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    >>> p, p._version[0]
    (tensor([ 0.9000, -1.9000]), 1)
    """
    op = "_fused_adam_"
    names, lists = ("params", "grads", "exp_avgs", "exp_avg_sqs"), (params, grads, exp_avgs, exp_avg_sqs)
    if max_exp_avg_sqs is not None:
        names, lists = names + ("max_exp_avg_sqs",), lists + (max_exp_avg_sqs,)
    dev, arrays = _arrays_of(op, names, lists)
    if dev is None:
        return None
    p_arrays, g_arrays, m_arrays, v_arrays = arrays[:4]
    _check_leaves(op, params)
    be = dev.backend
    capturable = step.__class__ in _TENSOR_TYPES
    if dev.type == "cpu" and not capturable:
        if found_inf is not None:
            raise ValueError(f"{op}: found_inf needs a capturable (tensor) step; with a Python step the caller "
                             "skips the call instead")
        _adam_cpu(be, *arrays[:4], arrays[4] if max_exp_avg_sqs is not None else None, step=int(step),
                  lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                  weight_decay=float(weight_decay), decoupled=bool(decoupled), maximize=bool(maximize))
        _bump_versions(params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs or ())
        return None
    if max_exp_avg_sqs is not None:
        raise ValueError(f"{op}: AMSGrad (max_exp_avg_sqs) runs on the CPU only, got tensors on {dev}")
    if capturable:
        # capturable (CUDA graphs): ``step`` is a 0-d tensor of the parameters' dtype on their device, counted up
        # on the device by this call, and ``lr`` a Python number or such a tensor; the scalars never visit the host
        for name, t in (("step", step), ("lr", lr), ("beta1", beta1), ("beta2", beta2)):
            if t.__class__ in _TENSOR_TYPES and (t._device is not dev or t.numel() != 1
                                                 or t._data.dtype != p_arrays[0].dtype):
                raise ValueError(f"{op}: a capturable {name} must be a one-element tensor of the parameters' dtype "
                                 f"on {dev}, got {t.dtype} on {t.device} with {t.numel()} elements")
        if dev.type != "cuda":
            raise ValueError(f"{op}: a tensor step (capturable) needs CUDA parameters, got {dev}")
        step_arg = step._data.reshape(1)
        if found_inf is not None:
            if (found_inf.__class__ not in _TENSOR_TYPES or found_inf._device is not dev or found_inf.numel() != 1
                    or found_inf.dtype != _dt.float32):
                got = (f"{found_inf.dtype} on {found_inf.device} with {found_inf.numel()} elements"
                       if found_inf.__class__ in _TENSOR_TYPES else type(found_inf).__name__)
                raise ValueError(f"{op}: found_inf must be a one-element float32 tensor on {dev}, got {got}")
        lr_arg, b1_arg, b2_arg = (v._data.reshape(1) if v.__class__ in _TENSOR_TYPES
                                  else be.full((1,), float(v), p_arrays[0].dtype) for v in (lr, beta1, beta2))
    else:
        if found_inf is not None:
            raise ValueError(f"{op}: found_inf needs a capturable (tensor) step; with a Python step the caller "
                             "skips the call instead")
        step_arg, lr_arg, b1_arg, b2_arg = int(step), float(lr), float(beta1), float(beta2)
    extra = {} if found_inf is None else {"found_inf": found_inf._data.reshape(1)}
    with be.device_ctx():
        be.adam_step(p_arrays, g_arrays, m_arrays, v_arrays, step=step_arg, lr=lr_arg, beta1=b1_arg,
                     beta2=b2_arg, eps=float(eps), weight_decay=float(weight_decay), decoupled=bool(decoupled),
                     maximize=bool(maximize), **extra)
    if capturable:
        step._version[0] += 1
    _bump_versions(params, exp_avgs, exp_avg_sqs)
    return None


#: elements per block of the CPU Adam: the five arrays of a block and the two scratch buffers (float32:
#: 7 x 64 KiB) stay in the L2 cache through the ~14 passes of the update
_ADAM_BLOCK = 1 << 14


def _adam_cpu(be, ps, gs, ms, vs, vmaxs, *, step: int, lr: float, beta1: float, beta2: float, eps: float,
              weight_decay: float, decoupled: bool, maximize: bool) -> None:
    """``_fused_adam_`` on CPU arrays, in place: per tensor, per block, PyTorch's single-tensor arithmetic
    (``_single_tensor_adam``) as in-place ufunc passes with ``out=``, into two scratch buffers shared by the
    whole list (no temporaries per tensor). Half-precision tensors are computed in float32 and rounded once."""
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = (1.0 - beta2 ** step) ** 0.5
    step_size = lr / bc1
    w1 = 1.0 - beta1
    blk = _ADAM_BLOCK
    scratch: dict = {}
    for i, p in enumerate(ps):
        g, m, v = gs[i], ms[i], vs[i]
        vmax = vmaxs[i] if vmaxs is not None else None
        if not p.size:
            continue
        dt = p.dtype
        half = dt.itemsize == 2
        if half:  # float16/bfloat16: float32 copies, written back rounded once
            f32 = be.float32
            p0, m0, v0, x0 = p, m, v, vmax
            p, g, m, v = (a.astype(f32) for a in (p, g, m, v))
            vmax = None if vmax is None else vmax.astype(f32)
            dt = p.dtype
        arrs = (p, g, m, v) if vmax is None else (p, g, m, v, vmax)
        if all(a.flags.c_contiguous for a in arrs):
            arrs = tuple(a.reshape(-1) for a in arrs)
            n = arrs[0].size
            spans = [(s, min(s + blk, n)) for s in range(0, n, blk)]
        else:  # strided: whole-array passes (the ufuncs write through the views)
            spans = [None]
        bufs = scratch.get(dt)
        if bufs is None:
            bufs = scratch[dt] = (be.empty(blk, dtype=dt), be.empty(blk, dtype=dt))
        c_w1, c_b2, c_w2 = dt.type(w1), dt.type(beta2), dt.type(1.0 - beta2)
        c_bc2, c_eps, c_ss = dt.type(bc2_sqrt), dt.type(eps), dt.type(-step_size)
        c_wd, c_dec = dt.type(weight_decay), dt.type(1.0 - lr * weight_decay)
        for span in spans:
            if span is None:
                pb, gb, mb, vb = arrs[:4]
                xb = arrs[4] if vmax is not None else None
                t1, t2 = be.empty(pb.shape, dtype=dt), be.empty(pb.shape, dtype=dt)
            else:
                s, e = span
                pb, gb, mb, vb = (a[s:e] for a in arrs[:4])
                xb = arrs[4][s:e] if vmax is not None else None
                t1, t2 = bufs[0][:e - s], bufs[1][:e - s]
            if maximize:
                be.negative(gb, out=t1)
                gb = t1
            if weight_decay != 0:
                if decoupled:
                    pb *= c_dec
                else:  # grad + weight_decay * param
                    be.multiply(pb, c_wd, out=t2)
                    be.add(gb, t2, out=t1)
                    gb = t1
            # m.lerp_(g, 1 - beta1): PyTorch's two-sided formula
            be.subtract(gb, mb, out=t2)
            if w1 < 0.5:
                t2 *= c_w1
                mb += t2
            else:
                t2 *= dt.type(beta1)
                be.subtract(gb, t2, out=mb)
            # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            vb *= c_b2
            be.multiply(gb, c_w2, out=t2)
            t2 *= gb
            vb += t2
            if xb is not None:
                be.maximum(xb, vb, out=xb)
            # p.addcdiv_(m, sqrt(v) / sqrt(bc2) + eps, value=-step_size); t1 (the gradient) is free now
            be.sqrt(vb if xb is None else xb, out=t1)
            t1 /= c_bc2
            t1 += c_eps
            be.multiply(mb, c_ss, out=t2)
            t2 /= t1
            pb += t2
        if half:
            for dst, src in ((p0, p), (m0, m), (v0, v), (x0, vmax)):
                if dst is not None:
                    dst[...] = src.astype(dst.dtype)


@declare(method=False)
def _fused_sgd_(params, grads, momentum_buffers, *, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                first_step: bool = False) -> None:
    r"""One SGD step for lists of tensors, in place, in one backend call (PyTorch's single-tensor arithmetic)::

        g = -g if maximize;   g = g + weight_decay * p
        b = g if first_step else momentum * b + (1 - dampening) * g      (with momentum != 0)
        g = g + momentum * b if nesterov else b                           (with momentum != 0)
        p = p - lr * g

    ``params`` (and ``momentum_buffers`` with a nonzero ``momentum``; pass ``[]`` without) are written and their
    versions bumped; ``grads`` are only read. All tensors are on one device, and the tensors of one index share a
    shape and a floating dtype. On CUDA the contiguous float32/float64 tensors are updated by one multi-tensor
    kernel launch per dtype, the others one by one.

    Raises ValueError for lists of different lengths, TypeError for a non-Tensor, DeviceMismatch, ShapeMismatch
    or DtypeMismatch naming the index, and RuntimeError for a parameter that requires grad while grad mode is on.

    >>> import pylucid
    >>> p, g, b = pylucid.tensor([1.0, -2.0]), pylucid.tensor([2.0, -4.0]), pylucid.zeros(2)
    >>> pylucid._fused_sgd_([p], [g], [b], lr=0.1, momentum=0.9, first_step=True)
    >>> p, b
    (tensor([ 0.8000, -1.6000]), tensor([ 2., -4.]))
    """
    op = "_fused_sgd_"
    has_m = momentum != 0
    names = ("params", "grads", "momentum_buffers") if has_m else ("params", "grads")
    lists = (params, grads, momentum_buffers) if has_m else (params, grads)
    dev, arrays = _arrays_of(op, names, lists)
    if dev is None:
        return None
    _check_leaves(op, params)
    be = dev.backend
    with be.device_ctx():
        be.sgd_step(arrays[0], arrays[1], arrays[2] if has_m else [], lr=float(lr), momentum=float(momentum),
                    dampening=float(dampening), weight_decay=float(weight_decay), nesterov=bool(nesterov),
                    maximize=bool(maximize), init=bool(first_step))
    _bump_versions(params, momentum_buffers if has_m else ())
    return None
