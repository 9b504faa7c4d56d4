"""The array backend shared by the CPU (NumPy) and CUDA (CuPy) devices."""

from __future__ import annotations

import contextlib
import itertools
from math import prod as _prod

import ml_dtypes
import numpy as np

from . import reference
from .reference import GELU_C, GELU_K, INV_SQRT_2PI, SQRT1_2

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_NULL_CTX = contextlib.nullcontext()
#: the float32 GELU's Abramowitz-Stegun constants (see ArrayBackend's GELU section): ``c = 1/p``
#: with p scaled by 1/sqrt(2), and the coefficients ``-a_k c^k / 2``
_AS_C = 1.0 / (0.3275911 * SQRT1_2)
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_AS_S = tuple(-0.5 * a * _AS_C ** (k + 1) for k, a in enumerate(_AS_A))
def dense_span(shape, strides, itemsize: int) -> int | None:
    """The bytes an array of ``shape`` and (positive byte) ``strides`` covers when it covers them densely
    (its strides, sorted, are those of a C-ordered array of its extents in some order of the axes: no two
    elements share an address, no gap between them); None otherwise."""
    span = itemsize
    for stride, extent in sorted((s, e) for s, e in zip(strides, shape) if e != 1):
        if stride != span:
            return None
        span *= extent
    return span


#: what NumPy hands back from 0-d arithmetic instead of a 0-d array
SCALAR_TYPES = (np.generic, bool, int, float, complex)


class ArrayBackend:
    """Primitive set over an array module ``xp``.

    Attribute lookups that are not defined here fall through to ``xp`` (so
    ``be.exp`` is ``xp.exp``) and are cached on the instance, which keeps the
    per-call cost of a primitive to one attribute read.
    """

    name = "array"
    #: True when ops must enter a device context before allocating (several GPUs)
    _multi = False
    #: True when ``matmul((..., m, k), (k, n))`` already runs as one 2-D GEMM over the folded rows
    folds_matmul = False
    #: ``(float32 result, its rounding to a half dtype)`` of the last ``float_out`` kernel that wrote both (autocast's
    #: cast of that result to the half dtype takes the rounding instead of converting again), or None
    amp_rounded = None

    def __init__(self, xp) -> None:
        self.xp = xp

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        fn = getattr(self.xp, name)
        setattr(self, name, fn)  # cache: next lookup is a plain instance attribute
        return fn

    def device_ctx(self):
        """The context that makes this backend's device current (a shared no-op on the CPU)."""
        return _NULL_CTX

    # -- sub-libraries (scipy on the CPU, cupyx.scipy on CUDA) ---------------
    @property
    def linalg(self):
        return self.xp.linalg

    @property
    def fft(self):
        return self.xp.fft

    @property
    def special(self):
        import scipy.special

        return scipy.special

    @property
    def scipy_linalg(self):
        import scipy.linalg

        return scipy.linalg

    def airy_ai(self, x):
        """The Airy function ``Ai(x)`` (``scipy.special.airy``'s first output). CuPy's special library has no Airy
        function, so the CUDA backend inherits this host round trip."""
        import scipy.special

        return self.asarray(scipy.special.airy(self.to_numpy(x))[0], dtype=x.dtype)

    def eig(self, a):
        """Eigenvalues and right eigenvectors of a batch of general square matrices, always complex
        (``numpy.linalg.eig``, which returns real arrays when every eigenvalue is real). CuPy has no general
        eigen-solver, so the CUDA backend inherits this host round trip."""
        w, v = np.linalg.eig(self.to_numpy(a))
        ct = np.result_type(w.dtype, np.complex64)
        return self.asarray(w.astype(ct, copy=False)), self.asarray(v.astype(ct, copy=False))

    def ldl_factor(self, a, hermitian: bool):
        """Bunch-Kaufman ``A = L D L^T`` (``L D L^H`` with ``hermitian``) of a batch of matrices read from the
        lower triangle: LAPACK's ``sytrf``/``hetrf`` (scipy) on the host, as ``(LD, pivots, info)`` with
        LAPACK's 1-based int32 pivots (negative for 2x2 blocks). CuPy exposes no ``sytrf``: the CUDA backend
        inherits this host round trip."""
        from scipy.linalg import lapack

        x = np.asarray(self.to_numpy(a))
        n = x.shape[-1]
        flat = x.reshape((int(np.prod(x.shape[:-2])), n, n))
        ld = np.zeros_like(flat)
        piv = np.zeros(flat.shape[:2], dtype=np.int32)
        info = np.zeros(flat.shape[0], dtype=np.int32)
        if flat.size:
            fn = lapack.get_lapack_funcs("hetrf" if hermitian and x.dtype.kind == "c" else "sytrf", (flat[0],))
            for i, m in enumerate(flat):
                out, p, inf = fn(m, lower=1)
                ld[i], piv[i], info[i] = np.tril(out), p, inf
        return (self.asarray(ld.reshape(x.shape)), self.asarray(piv.reshape(x.shape[:-1])),
                self.asarray(info.reshape(x.shape[:-2])))

    def ldl_solve(self, ld, pivots, b, hermitian: bool):
        """``A X = B`` from :meth:`ldl_factor`'s ``(LD, pivots)`` (LAPACK's ``sytrs``/``hetrs`` on the host,
        batch dims broadcast)."""
        from scipy.linalg import lapack

        ld, pivots, b = (np.asarray(self.to_numpy(t)) for t in (ld, pivots, b))
        batch = np.broadcast_shapes(ld.shape[:-2], pivots.shape[:-1], b.shape[:-2])
        n, k = b.shape[-2:]
        nb = int(np.prod(batch))
        ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((nb, n, n))
        pivots = np.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape((nb, n))
        b = np.broadcast_to(b, batch + (n, k)).reshape((nb, n, k))
        out = np.zeros(b.shape, dtype=np.result_type(ld.dtype, b.dtype))
        if out.size:
            fn = lapack.get_lapack_funcs("hetrs" if hermitian and ld.dtype.kind == "c" else "sytrs", (ld[0], b[0]))
            for i in range(out.shape[0]):
                out[i] = fn(ld[i], pivots[i], b[i], lower=1)[0]
        return self.asarray(out.reshape(batch + (n, k)))

    # -- conversion -------------------------------------------------------
    def asarray(self, data, dtype=None):
        return self.xp.asarray(data, dtype=dtype)

    def can_sync(self) -> bool:
        """Whether an op may read device values on the host now (False while a CUDA graph captures)."""
        return True

    def check_index_range(self, idx, low: int, high: int, error) -> None:
        """Raise ``error(lo, hi)``, the exception for the smallest and largest index found, when an index of ``idx``
        lies outside ``[low, high)``; here at once (the CUDA backend defers it without waiting for the GPU)."""
        if idx.size:
            lo, hi = int(idx.min()), int(idx.max())
            if lo < low or hi >= high:
                raise error(lo, hi)

    def to_numpy(self, a, what: str = "a copy to the host"):
        return np.asarray(a)

    def astype(self, a, np_dtype, copy=True):
        return a.astype(np_dtype, copy=copy)

    def inplace(self, op: str, a, b):
        """``a = a <op> b`` into ``a``'s storage, for the ufunc names ``add``, ``subtract``, ``multiply`` and
        ``true_divide`` (the in-place arithmetic of tensors: ``x.add_(y)``, ``x *= 0.5``); ``b`` an array or a
        scalar. Raises the ufunc's ValueError/TypeError where ``b`` does not broadcast to ``a`` or the result does
        not cast to ``a``'s dtype; returns ``a``."""
        getattr(self.xp, op)(a, b, out=a)
        return a

    # -- numerics that need care -----------------------------------------
    def matmul(self, a, b):
        # NumPy has no half-precision BLAS: compute float16/bfloat16 products in
        # float32 and round once, which is also what PyTorch's CPU kernels do.
        if a.dtype in _HALF:
            dt = a.dtype
            return self.xp.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dt)
        return self.xp.matmul(a, b)

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        # ``add.reduce`` called from here, not through ``np.sum``: NumPy's floating-point warnings (inf - inf) are
        # then attributed to this module, which pylucid's warning filter covers (pylucid/_fp_warnings.py)
        red = self.xp.add.reduce
        if dtype is None and a.dtype in _HALF:
            # accumulate half precision in float32 (as PyTorch does), round once
            return red(a, axis=axis, keepdims=keepdims, dtype=np.float32).astype(a.dtype)
        if dtype is None and a.dtype.kind in "biu":  # np.sum's integer promotion (bool and small ints sum as int64)
            return self.xp.sum(a, axis=axis, keepdims=keepdims)
        return red(a, axis=axis, keepdims=keepdims, dtype=dtype)

    def mean(self, a, axis=None, keepdims=False):
        if a.size == 0 or (axis is not None and any(a.shape[i] == 0 for i in axis)):
            # 0/0: NaN without NumPy's "Mean of empty slice" warning
            s = self.xp.sum(a, axis=axis, keepdims=keepdims)
            return self.xp.full(s.shape, float("nan"), dtype=a.dtype)
        if a.dtype in _HALF:
            return self.xp.mean(a, axis=axis, keepdims=keepdims, dtype=np.float32).astype(a.dtype)
        return self.xp.mean(a, axis=axis, keepdims=keepdims)

    def sum_to_shape(self, g, shape):
        """Sum ``g`` over the axes that broadcasting added or stretched to reach ``shape``."""
        if g.shape == shape:
            return g
        lead = g.ndim - len(shape)
        stretched = tuple(i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1)
        if not stretched and 0 < lead < g.ndim:
            return self.sum(g, axis=tuple(range(lead)))  # already ``shape``: no keepdims-and-reshape view
        axes = tuple(range(lead)) + stretched
        if axes:
            g = self.sum(g, axis=axes, keepdims=True)
        if lead:
            g = g.reshape(shape)
        return g

    # scatter with a combining op (scatter_add, scatter_reduce): NumPy's ufunc.at is sequential, so
    # repeated indices combine in index order (deterministic)
    @staticmethod
    def _scatter_at(ufunc, target, index, values):
        ufunc.at(target, index, values)
        return target

    def scatter_add(self, target, index, values):
        """``target[index] += values`` with repeated indices accumulated (in place)."""
        return self._scatter_at(self.xp.add, target, index, values)

    def scatter_max(self, target, index, values):
        """``target[index] = max(target[index], values)`` with repeats combined (in place; NaN propagates)."""
        return self._scatter_at(self.xp.maximum, target, index, values)

    def scatter_min(self, target, index, values):
        """``target[index] = min(target[index], values)`` with repeats combined (in place; NaN propagates)."""
        return self._scatter_at(self.xp.minimum, target, index, values)

    def scatter_mul(self, target, index, values):
        """``target[index] *= values`` with repeats combined (in place)."""
        return self._scatter_at(self.xp.multiply, target, index, values)

    def raise_if_singular(self, a, op: str) -> None:
        """Raise ``numpy.linalg.LinAlgError`` when a batch of square matrices holds a singular one.

        NumPy's ``inv``/``solve`` already raise; on the CPU this is a no-op. CUDA (cuSOLVER) returns
        inf/NaN instead, so :class:`CUDABackend` checks the LU pivots there.
        """
        return None

    # -- fused kernels: portable versions (CUDABackend overrides them with its kernels) ---------
    # The semantics are pylucid.backend.reference's functions; all over the last axis.
    def softmax(self, x, log: bool = False):
        """Softmax (``log=True``: log-softmax) over the last axis, max-shifted; half inputs computed in float32."""
        if x.size == 0:
            return x.copy()
        xf = x.astype(np.float32) if x.dtype in _HALF else x
        with self.errstate():
            z = xf - self.xp.max(xf, axis=-1, keepdims=True)
            if log:
                y = z - self.xp.log(self.sum(self.xp.exp(z), axis=-1, keepdims=True))
            else:
                e = self.xp.exp(z)
                y = e / self.sum(e, axis=-1, keepdims=True)
        return y.astype(x.dtype, copy=False)

    def softmax_backward(self, y, g, log: bool = False):
        """Gradient of :meth:`softmax` (over the last axis) from its output ``y`` and the incoming ``g``."""
        if log:
            return g - self.xp.exp(y) * self.sum(g, axis=-1, keepdims=True)
        return y * (g - self.sum(g * y, axis=-1, keepdims=True))

    def layer_norm(self, x, weight, bias, eps: float, float_out: bool = False):
        """Layer norm over the last axis: ``(y, mean, rstd)`` (biased variance; stats in float32 for half x; ``y``
        in float32 for half x with ``float_out``, autocast's float32 policy)."""
        xf = x.astype(np.float32) if x.dtype in _HALF else x
        if float_out:
            x = xf
        mean = self.mean(xf, axis=(-1,), keepdims=True)
        xc = xf - mean
        rstd = 1.0 / self.xp.sqrt(self.mean(xc * xc, axis=(-1,), keepdims=True) + eps)
        y = xc * rstd
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y.astype(x.dtype, copy=False), mean[..., 0], rstd[..., 0]

    def layer_norm_backward(self, g, x, mean, rstd, weight):
        """``(dx, dweight, dbias)`` of :meth:`layer_norm` (``dweight``/``dbias`` None without ``weight``)."""
        dt = x.dtype
        up = (lambda a: a.astype(np.float32)) if dt in _HALF else (lambda a: a)
        dx, dw, db = reference.layer_norm_backward_ref(self.xp, up(g), up(x), mean, rstd,
                                                       None if weight is None else up(weight))
        if dw is None:
            return dx.astype(dt, copy=False), None, None
        return dx.astype(dt, copy=False), dw.astype(weight.dtype, copy=False), db.astype(weight.dtype, copy=False)

    def batch_norm(self, x, weight, bias, running_mean, running_var, training: bool, eps: float,
                   momentum: float | None = None):
        """Batch norm over every axis but 1: ``(y, mean, var)`` with ``mean``/``var`` of shape ``(C,)``.

        Training: the batch mean and biased variance (returned); with ``momentum`` the running buffers given
        are updated in place (``(1 - momentum) running + momentum batch``, the variance unbiased by
        ``m / (m - 1)`` over the ``m`` values per channel). Eval: the running statistics. ``y = (x - mean) /
        sqrt(var + eps) * weight + bias`` in ``x``'s dtype; the statistics in the compute dtype (float32 for
        half ``x``).
        """
        xf = x.astype(np.float32) if x.dtype in _HALF else x
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        with self.errstate():
            if training:
                mu = self.mean(xf, axis=axes, keepdims=True)
                xc = xf - mu
                sq = xc * xc
                var = self.mean(sq, axis=axes, keepdims=True)
                del sq
            else:
                mu = running_mean.astype(xf.dtype, copy=False).reshape(shape)
                var = running_var.astype(xf.dtype, copy=False).reshape(shape)
                xc = xf - mu
            # y = xc * (weight / sqrt(var + eps)) + bias, written into xc (fresh here): two passes over x
            # where dividing, scaling and shifting separately made three new arrays
            scale = 1.0 / self.xp.sqrt(var + eps)
            if weight is not None:
                scale = scale * weight.astype(xf.dtype, copy=False).reshape(shape)
            xc *= scale
            if bias is not None:
                xc += bias.astype(xf.dtype, copy=False).reshape(shape)
            y = xc
        mu, var = mu.reshape(-1), var.reshape(-1)
        if training and momentum is not None:
            self.batch_norm_update_(running_mean, running_var, mu, var, x.size // max(x.shape[1], 1), momentum)
        return y.astype(x.dtype, copy=False), mu, var

    def batch_norm_update_(self, running_mean, running_var, mean, var, m: int, momentum: float):
        """The running-statistics update of :meth:`batch_norm`, in place (either buffer may be None)."""
        if running_mean is not None:
            running_mean[...] = running_mean * (1 - momentum) + mean.astype(running_mean.dtype) * momentum
        if running_var is not None:
            unbiased = var.astype(running_var.dtype) * (m / (m - 1))
            running_var[...] = running_var * (1 - momentum) + unbiased * momentum

    def batch_norm_backward(self, g, x, weight, mean, var, training: bool, eps: float, need_dx: bool = True):
        """``(dx, dweight, dbias)`` of :meth:`batch_norm` from its statistics ``mean``/``var`` (shape ``(C,)``).

        With ``xhat = (x - mean) rstd``: ``dbias = sum(g)``, ``dweight = sum(g xhat)`` over every axis but 1;
        training ``dx = w rstd (g - mean(g) - xhat mean(g xhat))``, eval ``dx = w rstd g`` (``dx`` None
        without ``need_dx``). ``dweight``/``dbias`` are in the compute dtype.
        """
        up = (lambda a: a.astype(np.float32)) if x.dtype in _HALF else (lambda a: a)
        gf, xf = up(g), up(x)
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        with self.errstate():
            rstd = (1.0 / self.xp.sqrt(var.astype(xf.dtype, copy=False) + eps)).reshape(shape)
            xc = xf - mean.astype(xf.dtype, copy=False).reshape(shape)  # x - mean; xhat = xc rstd
            db = self.xp.sum(gf, axis=axes)
            gx = gf * xc
            dw = self.xp.sum(gx, axis=axes) * rstd.reshape(-1)
            del gx
            dx = None
            if need_dx:
                k = rstd if weight is None else rstd * up(weight).reshape(shape)
                if training:
                    # dx = k (g - db/m - xhat dw/m) = k g - (k rstd dw / m) xc - k db / m: one new array and
                    # the in-place scaling of xc
                    m = gf.size // max(x.shape[1], 1)
                    dx = gf * k
                    xc *= k * rstd * (dw / m).reshape(shape)
                    dx -= xc
                    dx -= k * (db / m).reshape(shape)
                else:
                    dx = k * gf
                dx = dx.astype(x.dtype, copy=False)
        return dx, dw, db

    # -- max pooling helpers (the CPU backend overrides them with blocked, threaded versions) -------------
    def max_pool2d_2x2(self, x):
        """``(values, flat h*W + w indices)`` of a 2x2, stride-2 max pool of the C-contiguous ``(N, C, H, W)``
        ``x`` with even ``H`` and ``W``, or None (the general pooling path runs): here always None."""
        return None

    def max_pool_scatter(self, g, idx, plane: int):
        """The gradient of a max pool whose windows do not overlap: ``g`` ``(rows, k)`` written at the flat
        indices ``idx`` ``(rows, k)`` of zero ``(rows, plane)`` rows (every position is hit at most once)."""
        rows = idx.shape[0]
        gx = self.zeros((rows, plane), dtype=g.dtype)
        gx[self.arange(rows).reshape(rows, 1), idx] = g
        return gx

    def cross_entropy(self, logits, target, ignore_index: int = -100):
        """Per-row cross-entropy of 2-D ``logits`` against int targets: ``(loss, lse)``; ignored rows 0."""
        with self.errstate():
            return reference.cross_entropy_ref(self.xp, logits, target, ignore_index)

    def cross_entropy_reduce(self, loss, target, ignore_index: int = -100, mean: bool = True):
        """``(sum or mean of the per-row losses, non-ignored row count)`` (the fused forward's reduction)."""
        with self.errstate():
            return reference.cross_entropy_reduce_ref(self.xp, loss, target, ignore_index, mean)

    def relu(self, x):
        """``max(x, 0)`` with NaN kept; integer arrays stay integer."""
        if x.dtype in _HALF:
            with self.errstate():  # ml_dtypes' bfloat16 maximum warns on NaN where float32 does not
                return self.maximum(x, x.dtype.type(0))
        return self.maximum(x, x.dtype.type(0))  # (NumPy's own dtypes: a NaN propagates without a warning)

    _INT_OF = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64)}

    def relu_backward(self, y, g):
        """PyTorch's ``threshold_backward`` from relu's output: ``g`` where ``y > 0`` or NaN, else 0."""
        it = self._INT_OF.get(g.dtype)
        if it is not None and g.ndim and y.shape == g.shape and g.flags.c_contiguous and y.dtype == g.dtype:
            # g's bits AND-ed with an all-ones / all-zeros mask (+0.0 where y <= 0): exactly the select,
            # whatever g holds (inf, NaN), in cheap passes (NumPy's where with a scalar measures several
            # times slower)
            mask = self.less_equal(y, 0).view(np.int8).astype(it)
            mask -= 1
            return self.bitwise_and(g.view(it), mask, out=mask).view(g.dtype)
        return self.where(y <= 0, g.dtype.type(0), g)  # ``self.where``: CUDA's bfloat16 route keeps the dtype

    def cross_entropy_backward(self, g, logits, lse, target, ignore_index: int = -100):
        """``dlogits`` of :meth:`cross_entropy` given the per-row incoming gradient ``g``."""
        with self.errstate():
            return reference.cross_entropy_backward_ref(self.xp, g, logits, lse, target, ignore_index)

    def embedding_backward(self, g, indices, num_weights: int, padding_idx: int | None = None,
                           deterministic: bool = False):
        """``dweight`` of an embedding lookup (rows of ``g`` summed per index; NumPy's add.at is sequential)."""
        return reference.embedding_backward_ref(self.xp, g, indices, num_weights, padding_idx)

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, *, step: int, lr: float, beta1: float,
                  beta2: float, eps: float, weight_decay: float = 0.0, decoupled: bool = False,
                  maximize: bool = False) -> None:
        """Adam/AdamW for a list of arrays, in place (PyTorch's single-tensor arithmetic, one array at a time).

        float16/bfloat16 arrays are computed in float32 and rounded once, as the CUDA kernels do.
        """
        hp = dict(step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                  decoupled=decoupled, maximize=maximize)
        xp = self.xp
        for quad in zip(params, grads, exp_avgs, exp_avg_sqs):
            if quad[0].dtype not in _HALF:
                reference.adam_step_ref(xp, *([a] for a in quad), **hp)
                continue
            p32, g32, m32, v32 = (a.astype(np.float32) for a in quad)
            reference.adam_step_ref(xp, [p32], [g32], [m32], [v32], **hp)
            for a, a32 in ((quad[0], p32), (quad[2], m32), (quad[3], v32)):
                a[...] = a32.astype(a.dtype)

    def sgd_step(self, params, grads, bufs, *, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 init: bool = False) -> None:
        """SGD for a list of float32/float64 arrays, in place, one array at a time (PyTorch's single-tensor
        arithmetic: every product rounded before its sum). ``bufs`` are the momentum buffers (ignored without
        momentum); ``init`` marks the first step, whose buffer becomes the gradient."""
        xp = self.xp
        for i, (p, g) in enumerate(zip(params, grads)):
            if maximize:
                g = xp.negative(g)
            if weight_decay != 0:
                g = g + p * p.dtype.type(weight_decay)
            if momentum != 0:
                buf = bufs[i]
                if init:
                    buf[...] = g
                else:
                    buf *= buf.dtype.type(momentum)
                    buf += g if dampening == 0 else g * g.dtype.type(1 - dampening)
                g = g + buf * buf.dtype.type(momentum) if nesterov else buf
            p += g * p.dtype.type(-lr)

    # -- GELU (CUDA: one kernel each way; the CPU backend: oneDNN's where installed) ---------------
    # float32 (and half, computed in float32): Phi(x) from the Abramowitz-Stegun 7.1.26 erf,
    # ``erfc(z) = t (a1 + t (a2 + ... + t a5)) exp(-z^2)``, ``t = 1 / (1 + p z)`` (absolute error <
    # 1.5e-7, about float32's rounding; the result is as close to PyTorch's float32 GELU as scipy's
    # exact erf, a few 1e-7 relative), as ~20 in-place passes over blocks that stay in cache;
    # scipy's erf runs the double-precision routine element by element, several times slower. The
    # ``exp(-x^2 / 2)`` it needs is the normal density's, so the derivative ``Phi(x) + x phi(x)``
    # costs 3 more passes. float64 keeps scipy's erf. The coefficients (_AS_S) carry the -1/2 of
    # ``Phi(-|x|) = erfc(|x| / sqrt(2)) / 2`` and p the 1/sqrt(2) of z;
    # ``t = 1 / (1 + p |x|) = c s`` with ``s = 1 / (c + |x|)``, ``c = 1/p``: the polynomial is
    # evaluated in s, its coefficients ``a_k c^k`` (one pass fewer than scaling |x| by p).
    _GELU_BLOCK = 1 << 15
    #: ``exp(-x^2 / 2)`` as ``exp2(-x^2 log2(e) / 2)``: NumPy's float32 exp2 loop took about half
    #: the time of its exp on AVX-512 processors, and twice as long on AVX2 ones (no SIMD exp2 loop
    #: there: 2.5 against 1.3 ns a value on an AMD EPYC); the CPU backend sets this from NumPy's CPU
    #: features
    _gelu_exp2 = False

    def _erf(self, z):
        if z.dtype in _HALF:  # scipy.special has no half kernels: float32, rounded back once
            return self.special.erf(z.astype(np.float32)).astype(z.dtype)
        return self.special.erf(z)

    def _gelu_f32(self, x, g=None, derivative: bool = False):
        """For a float32 ``x``: ``x Phi(x)``; with ``g`` (float32, ``x``'s shape) the gradient
        ``g (Phi(x) + x phi(x))`` instead. With ``derivative`` the output is row 0 of a
        ``(2, x.size)`` buffer and ``Phi(x) + x phi(x)`` row 1 (the op's ``save_extra`` finds it
        through the output's ``base``). One sweep over cache-sized blocks, which the CPU backend's
        threads share (each with its own scratch)."""
        xf = x.reshape(-1)
        n, blk = xf.size, self._GELU_BLOCK
        both = self.xp.empty((2, n), dtype=np.float32) if derivative else None
        out = both[0] if derivative else self.xp.empty(n, dtype=np.float32)
        gf = None if g is None else g.reshape(-1)
        self._par(lambda b0, b1: self._gelu_blocks(xf, gf, out, both, b0 * blk, min(n, b1 * blk)),
                  -(-n // blk), n)
        return out.reshape(x.shape)

    def _gelu_blocks(self, xf, gf, out, both, lo: int, hi: int) -> None:
        """The blocks of :meth:`_gelu_f32` in ``[lo, hi)``. With ``u = Phi(-|x|)``,
        ``Phi(x) = 1/2 + sign(x) (1/2 - u)`` (the sign moved over as a bit); the ``exp(-x^2 / 2)``
        of ``u`` is also the density's."""
        xp, f = self.xp, np.float32
        a1, a2, a3, a4, a5 = (f(a) for a in _AS_S)
        sign_bit = np.int32(-2 ** 31)
        m0 = min(hi - lo, self._GELU_BLOCK)
        t, e, r = (xp.empty(m0, dtype=f) for _ in range(3))
        # x^2 overflows to inf for |x| > 1e19: exp(-inf) = 0 is the right limit
        with self.errstate():
            for s in range(lo, hi, self._GELU_BLOCK):
                xb = xf[s:s + self._GELU_BLOCK]
                m = xb.size
                if m != m0:  # the last, shorter block
                    t, e, r = t[:m], e[:m], r[:m]
                rb = both[1, s:s + m] if both is not None else r
                xp.abs(xb, out=t)
                t += f(_AS_C)
                xp.reciprocal(t, out=t)  # t / c
                xp.multiply(t, a5, out=rb)
                for a in (a4, a3, a2, a1):
                    rb += a
                    rb *= t
                xp.square(xb, out=e)
                if self._gelu_exp2:
                    e *= f(-0.5 * 1.4426950408889634)
                    xp.exp2(e, out=e)  # exp(-x^2 / 2)
                else:
                    e *= f(-0.5)
                    xp.exp(e, out=e)
                rb *= e  # -u
                rb += f(0.5)  # 1/2 - u >= 0
                ti = t.view(np.int32)
                xp.bitwise_and(xb.view(np.int32), sign_bit, out=ti)
                ri = rb.view(np.int32)
                ri ^= ti  # copysign(1/2 - u, x), without NumPy's scalar copysign loop
                rb += f(0.5)  # Phi(x)
                # for x < 0 the rounding of 1/2 - u adds ~3e-8 to Phi's absolute error (A-S's own is
                # 7.5e-8), and Phi(x) rounds to 0 below x = -5.5, as in PyTorch's float32 kernel;
                # x = +inf gives inf (Phi = 1)
                if gf is None:
                    xp.multiply(xb, rb, out=out[s:s + m])
                    if both is None:
                        continue
                e *= xb
                e *= f(INV_SQRT_2PI)
                rb += e  # Phi(x) + x phi(x)
                if gf is not None:
                    xp.multiply(gf[s:s + m], rb, out=out[s:s + m])

    def gelu(self, x, approximate: str = "none", float_out: bool = False,
             derivative: bool = False):
        """``x Phi(x)`` (``'none'``) or ``x/2 (1 + tanh(k (x + c x^3)))`` (``'tanh'``), in ``x``'s
        dtype (float32 for a half ``x`` with ``float_out``: autocast's float32 policy).
        ``derivative``: a float32 ``x``'s erf form is written with its derivative
        (:meth:`_gelu_f32`), for the op's first-order backward."""
        if float_out and x.dtype in _HALF:
            x = x.astype(np.float32)
        t = x.dtype.type
        if approximate == "tanh":
            return x * t(0.5) * (1 + self.tanh((x + x * x * x * t(GELU_C)) * t(GELU_K)))
        if x.dtype == np.float32 and x.size:
            return self._gelu_f32(x, derivative=derivative)
        if x.dtype in _HALF:
            return self._gelu_f32(x.astype(np.float32)).astype(x.dtype)
        return x * t(0.5) * (1 + self._erf(x * t(SQRT1_2)))

    def gelu_backward(self, g, x, approximate: str = "none"):
        """``g * gelu'(x)``: ``Phi(x) + x phi(x)``, or the derivative of the tanh form."""
        t = x.dtype.type
        if approximate == "tanh":
            th = self.tanh((x + x * x * x * t(GELU_C)) * t(GELU_K))
            d_inner = (x * x * t(3 * GELU_C) + 1) * t(GELU_K)
            return g * ((th + 1) * t(0.5) + x * t(0.5) * (1 - th * th) * d_inner)
        if (x.dtype == np.float32 or x.dtype in _HALF) and g.shape == x.shape and x.size:
            f32 = np.float32
            d = self._gelu_f32(x.astype(f32, copy=False), g.astype(f32, copy=False))
            return d.astype(g.dtype, copy=False)
        cdf = (self._erf(x * t(SQRT1_2)) + 1) * t(0.5)
        pdf = self.exp(x * x * t(-0.5)) * t(INV_SQRT_2PI)
        return g * (cdf + x * pdf)

    def matmul_to(self, a, b, dtype):
        """``a @ b`` as ``dtype`` (float32 from half operands: exact products, float32 accumulation)."""
        if a.dtype != dtype:
            a = self.astype(a, dtype)
        if b.dtype != dtype:
            b = self.astype(b, dtype)
        return self.matmul(a, b)

    def sum_to_shape_as(self, g, shape, dtype):
        """:meth:`sum_to_shape` of ``g`` accumulated and returned as ``dtype``."""
        return self.sum_to_shape(self.astype(g, dtype) if g.dtype != dtype else g, shape)

    def copy_into(self, dst, src):
        """``dst[...] = src`` (``dst`` a view of the same shape and dtype, not overlapping ``src``); returns ``dst``."""
        dst[...] = src
        return dst

    @staticmethod
    def address(a) -> int:
        """The address of ``a``'s first element."""
        return a.__array_interface__["data"][0]

    def joined_view(self, parts, dim: int):
        """``stack(parts, dim)`` as a view, without a copy, where the equally shaped and strided
        ``parts`` already lie in one buffer at equal steps (a kernel wrote the gradients of a fused
        projection's q, k and v slices straight into one array laid out like it); None otherwise.

        The joined array must cover its memory densely (its strides, sorted, those of a C-ordered array
        of its extents, in some order of the axes): then no two of its elements share an address, and
        it lies inside the parts' common buffer."""
        first = parts[0]
        n = len(parts)
        base = first.base
        if n < 2 or base is None or not first.ndim:
            return None
        contiguous = getattr(base, "_c_contiguous", None)  # CuPy's flag: its ``.flags`` builds an object per read
        if not (base.flags.c_contiguous if contiguous is None else contiguous):
            return None
        for p in parts:
            if p.base is not base or p.shape != first.shape or p.strides != first.strides or \
                    p.dtype != first.dtype:
                return None
        addr = self.address
        start = addr(first)
        step = addr(parts[1]) - start
        if step <= 0 or any(addr(p) != start + i * step for i, p in enumerate(parts)):
            return None
        shape = first.shape[:dim] + (n,) + first.shape[dim:]
        strides = first.strides[:dim] + (step,) + first.strides[dim:]
        span = dense_span(shape, strides, first.itemsize)
        if span is None:
            return None
        lo = addr(base)
        if start < lo or start + span > lo + base.nbytes:
            return None
        return self.xp.lib.stride_tricks.as_strided(first, shape, strides)

    def reshape(self, a, shape):
        """``a`` with the (resolved) ``shape``: a view when the strides allow, else a copy."""
        return a.reshape(shape)

    def matmul_bias(self, a, b, bias):
        """``a @ b + bias`` (``bias`` broadcast over the product; Linear's forward)."""
        return self.add_bias_(self.matmul(a, b), bias)

    def add_bias_(self, y, b):
        """``y + b``, written into ``y`` (a fresh array the caller owns) when ``b`` broadcasts to ``y``'s shape."""
        ys, bs = y.shape, b.shape
        # the Linear case (b over the trailing axes) without broadcast_shapes' cost on every call
        if not (len(bs) <= len(ys) and bs == ys[len(ys) - len(bs):]) and np.broadcast_shapes(ys, bs) != ys:
            return y + b
        y += b
        return y

    def bias_act(self, x, bias, act: str = "relu"):
        """``act(x + bias)`` (``act``: none, relu, gelu, gelu_tanh; ``bias`` over the last axis or None)."""
        return reference.bias_act_ref(self.xp, x, bias, act)

    def bias_act_backward(self, g, x, bias, act: str = "relu"):
        """``g * act'(x + bias)``."""
        return reference.bias_act_backward_ref(self.xp, g, x, bias, act)

    def errstate(self):
        return np.errstate(all="ignore")

    # -- convolution as GEMMs over a channels-last im2col (the CPU path; CUDA prefers cuDNN) ----------------
    # Layout: the padded input is copied once into channels-last (N, *S, C); its im2col is the strided view
    # (G, N, *out, *kernel, C/G), copied once into a contiguous (G, N*L, K*C/G) matrix with contiguous C runs.
    # Each of forward, data and weight gradient is then ONE GEMM per group with N*L rows (the shapes
    # OpenBLAS runs at full speed: the small (O, K*C) side is never the long reduction's output).
    # Half precision is computed in float32 and rounded once at the end, as PyTorch's CPU kernels.
    def _conv_cdt(self, dt):
        return np.dtype(np.float32) if dt in _HALF else dt

    def _par(self, fn, n: int, size: int) -> None:
        """``fn(lo, hi)`` over the batch ``[0, n)`` (``size`` elements of work in all): one call here; the CPU
        backend splits large work across its threads. ``fn`` writes disjoint slices per chunk."""
        fn(0, n)

    def _copy_n(self, dst, src, axis: int = 0, tile_axis: int | None = None) -> None:
        """``dst[...] = src`` (same shape; cast as an assignment), split along the batch ``axis`` by :meth:`_par`.

        ``tile_axis``: a channels-last ``src`` into a channels-first ``dst`` whose channels are that axis (the
        next one spatial): copied 32 channels by a few rows at a time, a tile that stays in the L1 cache while
        the transposition's strided side is written (up to 2 times faster than one whole-array assignment)."""
        pre = (slice(None),) * axis
        tiles = [()]
        # (from 16x16 pixels: on smaller images the tiles' own overhead measures larger than the saving)
        if tile_axis is not None and dst.ndim > tile_axis + 1 and dst.shape[tile_axis] > 32 and \
                _prod(dst.shape[tile_axis + 1:]) >= 256:
            ca = tile_axis
            rows = max(1, 2048 // (32 * _prod(dst.shape[ca + 2:])))
            lead = (slice(None),) * (ca - axis - 1)
            tiles = [lead + (slice(c0, c0 + 32), slice(r0, r0 + rows))
                     for c0 in range(0, dst.shape[ca], 32) for r0 in range(0, dst.shape[ca + 1], rows)]

        def cp(lo, hi):
            for t in tiles:
                sl = pre + (slice(lo, hi),) + t
                dst[sl] = src[sl]
        self._par(cp, dst.shape[axis], dst.size)

    def _conv_cols(self, x, kernel, stride, pads, dilation, groups, cdt, out_sp=None):
        """(cols (G, N*L, K*C/G) contiguous, out spatial size) of ``x`` (N, C, *S) padded by ``pads``
        (``out_sp``: only the first window positions, for a transposed convolution's output_padding)."""
        xp = self.xp
        nd = len(kernel)
        n, c = x.shape[:2]
        size = x.shape[2:]
        padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
        if out_sp is None:
            out_sp = tuple((p - d * (k - 1) - 1) // st + 1 for p, k, st, d in zip(padded, kernel, stride, dilation))
        buf = xp.zeros((n,) + padded + (c,), dtype=cdt) if any(lo or hi for lo, hi in pads) else \
            xp.empty((n,) + padded + (c,), dtype=cdt)
        inner = (slice(None),) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads)) + (slice(None),)
        self._copy_n(buf[inner], xp.moveaxis(x, 1, -1))  # the one layout copy (and cast) of the input
        st = buf.strides
        cg = c // groups
        shape = (groups, n) + out_sp + tuple(kernel) + (cg,)
        strides = (cg * st[-1], st[0]) + tuple(st[1 + i] * stride[i] for i in range(nd)) + tuple(
            st[1 + i] * dilation[i] for i in range(nd)) + (st[-1],)
        view = xp.lib.stride_tricks.as_strided(buf, shape, strides)
        cols = xp.empty(shape, dtype=cdt)
        self._copy_n(cols, view, axis=1)
        return cols.reshape(groups, n * _prod(out_sp), _prod(kernel) * cg), out_sp

    def _conv_gmat(self, g, groups, cdt):
        """The output gradient (N, O, *out) as (G, N*L, O/G), contiguous in ``cdt``."""
        n, o = g.shape[:2]
        nd = g.ndim - 2
        g5 = g.reshape((n, groups, o // groups) + g.shape[2:])
        g5 = g5.transpose((1, 0) + tuple(range(3, 3 + nd)) + (2,))
        m = self.xp.empty(g5.shape, dtype=cdt)
        self._copy_n(m, g5, axis=1)
        return m.reshape(groups, n * _prod(g.shape[2:]), o // groups)

    def _conv_wmat(self, w, groups, cdt):
        """The weight (O, C/G, *k) as (G, O/G, K*C/G) with taps major and channels minor (the cols' order)."""
        o, cg = w.shape[:2]
        nd = w.ndim - 2
        w5 = w.reshape((groups, o // groups, cg) + w.shape[2:]).transpose((0, 1) + tuple(range(3, 3 + nd)) + (2,))
        return self.xp.ascontiguousarray(w5, dtype=cdt).reshape(groups, o // groups, cg * _prod(w.shape[2:]))

    @staticmethod
    def _conv_gemm(a, b):
        # one 2-D GEMM when there is one group (NumPy's stacked matmul adds a loop and a copy otherwise)
        return (a[0] @ b[0])[None] if a.shape[0] == 1 else a @ b

    # Stride 1, one group, >= _TAP_MIN_C input channels: no im2col at all. On the padded grid of the whole
    # batch, flattened channels-first as (C, N*P), the input positions a kernel tap reads are the output
    # positions shifted by a constant offset, so each tap is ONE GEMM W_t (O, C) @ buf[:, off_t:] on a
    # zero-copy slice and the taps' products are summed. Channels-first keeps every image row a contiguous
    # run, so the copies into and out of the grid move whole rows (a channels-last grid transposes element
    # by element: 10 times slower on 64 channels at 32x32, more than a third of the convolution's time).
    # The grid shares its padding between neighbours: each dim holds its S pixels then max(lo, hi) zeros,
    # and the whole buffer starts with the flat offset of the low pads, so a read past a row's left edge
    # lands in the previous row's trailing zeros (and past an image's top in the previous image's). A 3x3
    # "same" convolution on 32x32 thus computes 33x33 grid positions per image, not 34x34.
    # Outputs are computed on the whole grid (the positions past each spatial edge are discarded, or zero
    # in a gradient): a few percent more flops than im2col, none of its K-times-larger copy. On small grids
    # the border positions are a large share (a 3x3 kernel on 4x4 computes 5x5 = 1.56 times the outputs):
    # there, above _TAP_MAX_WASTE, im2col's one GEMM with a K-times longer reduction measures faster.
    _TAP_MIN_C = 16
    _TAP_MAX_WASTE = 1.4

    def _conv_taps_ok(self, c, stride, groups, n, padded, out_sp, pads=()):
        return groups == 1 and c >= self._TAP_MIN_C and n > 0 and all(v == 1 for v in stride) and \
            all(lo >= 0 and hi >= 0 for lo, hi in pads) and _prod(padded) <= self._TAP_MAX_WASTE * _prod(out_sp)

    @staticmethod
    def _coarse_grid(size, pads, g_sp, kernel, stride, dilation):
        """(coarse grid per dim, largest tap shift per dim) of :meth:`_conv_classes_dx`."""
        cmax = tuple((k - 1) * d // st for k, d, st in zip(kernel, dilation, stride))
        coarse = tuple(max(-(-(s + lo + hi) // st), gs + cm)
                       for s, (lo, hi), st, gs, cm in zip(size, pads, stride, g_sp, cmax))
        return coarse, cmax

    def _conv_classes_ok(self, w, size, pads, g_sp, stride, dilation, groups, n):
        # the coarse grid's extra rows are wasted flops (a 4x4 kernel, stride 2, on a 4x4 gradient computes
        # 5x5 rows: 1.56 times): past _TAP_MAX_WASTE col2im measures faster
        if groups != 1 or n == 0 or 0 in w.shape[:2] or 0 in g_sp:
            return False
        coarse, _ = self._coarse_grid(size, pads, g_sp, w.shape[2:], stride, dilation)
        return _prod(coarse) <= self._TAP_MAX_WASTE * _prod(g_sp)

    @staticmethod
    def _tap_geom(n, grid, pads, out_sp, kernel, dilation):
        """(tap offsets, output rows to compute, lead offset, buffer rows) of the shared-padding grid
        ``grid`` (:meth:`_tap_padded`): pixel ``x`` of image ``i`` sits at row ``lead + i*P + flat(x)``, output
        ``o`` at ``i*P + flat(o)``, and tap ``k`` reads ``flat(k*dilation)`` rows further (``P = prod(grid)``)."""
        st = [1] * len(grid)
        for i in range(len(grid) - 2, -1, -1):
            st[i] = st[i + 1] * grid[i + 1]
        offs = [sum(kp * d * t for kp, d, t in zip(kpos, dilation, st))
                for kpos in itertools.product(*(range(k) for k in kernel))]
        lead = sum(lo * t for (lo, _), t in zip(pads, st))
        per = _prod(grid)
        rows = (n - 1) * per + sum((o - 1) * t for o, t in zip(out_sp, st)) + 1
        return offs, rows, lead, max(rows + max(offs), lead + n * per)

    def _tap_buf(self, a, grid, lead, length, cdt):
        """``a`` (N, C, *S) channels-first on the shared-padding grid of the whole batch: (C, length) in ``cdt``,
        zero but at the pixels (column ``lead + i*prod(grid) + flat(x)``). Each channel's rows of pixels are
        contiguous runs in both layouts, so the copy moves whole rows (no element-wise transposition)."""
        xp = self.xp
        n, c = a.shape[:2]
        buf = xp.zeros((c, length), dtype=cdt)
        view = buf[:, lead:lead + n * _prod(grid)].reshape((c, n) + tuple(grid))
        self._copy_n(view[(slice(None), slice(None)) + tuple(slice(0, s) for s in a.shape[2:])],
                     xp.swapaxes(a, 0, 1))
        return buf

    def _tap_unbuf(self, out, m, grid, lead, sizes, b=None, cdt=None):
        """``out`` (N, C, *sizes) = the pixels of the channels-first grid matrix ``m`` (C, >= lead + N*P) (+ ``b``
        per channel), rounded once to ``out``'s dtype: the inverse of :meth:`_tap_buf`, again by whole rows."""
        n, c = out.shape[:2]
        v = m[:, lead:lead + n * _prod(grid)].reshape((c, n) + tuple(grid))
        v = self.xp.swapaxes(v[(slice(None), slice(None)) + tuple(slice(0, s) for s in sizes)], 0, 1)
        self._bias_out(out, v, b, cdt or m.dtype, tile_axis=None)

    def _tap_tile(self, c: int, o: int, reduce: bool = False) -> int | None:
        """Positions per block of the tap GEMMs (None: all positions in one GEMM per tap). The CPU backend
        blocks them so that a tap's operand and result blocks stay in cache across the taps."""
        return None

    def _tap_blocks(self, rows: int, tile: int | None):
        return [(0, rows)] if tile is None else [(r0, min(rows, r0 + tile)) for r0 in range(0, rows, tile)]

    def _conv_taps(self, x, w, b, pads, dilation, dt, cdt):
        n, c = x.shape[:2]
        o = w.shape[0]
        kernel = w.shape[2:]
        size = x.shape[2:]
        out_sp = tuple(s + lo + hi - d * (k - 1) for s, (lo, hi), d, k in zip(size, pads, dilation, kernel))
        grid = self._tap_padded(size, pads, out_sp, kernel, dilation)
        offs, rows, lead, length = self._tap_geom(n, grid, pads, out_sp, kernel, dilation)
        buf = self._tap_buf(x, grid, lead, length, cdt)
        wt = self._tap_w(w, cdt)  # (K, O, C)
        y = self.xp.empty((o, n * _prod(grid)), dtype=cdt)
        # y[:, p] = sum_t W_t @ buf[:, p + off_t], block by block of positions (the rows past ``rows`` are the
        # last image's trailing grid positions: never read)
        for r0, r1 in self._tap_blocks(rows, self._tap_tile(c, o)):
            for t, off in enumerate(offs):
                self._gemm_into(wt[t], buf[:, off + r0:off + r1], y[:, r0:r1], t > 0)
        out = self.xp.empty((n, o) + out_sp, dtype=dt)
        self._tap_unbuf(out, y, grid, 0, out_sp, b, cdt)
        return out

    def _conv_grid(self, a, pads, cdt, padded=None):
        """``a`` (N, C, *S) as its channels-last zero-padded grid (N, *padded, C) in ``cdt``."""
        size = a.shape[2:]
        if padded is None:
            padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
        buf = self.xp.zeros((a.shape[0],) + tuple(padded) + (a.shape[1],), dtype=cdt)
        self._copy_n(buf[(slice(None),) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads)) + (slice(None),)],
                     self.xp.moveaxis(a, 1, -1))
        return buf

    def _tap_w(self, w, cdt):
        """The weight (O, C, *k) as (K, O, C) per-tap matrices (the data gradient multiplies by their transposed
        views)."""
        nd = w.ndim - 2
        wt = self.xp.ascontiguousarray(w.transpose(tuple(range(2, 2 + nd)) + (0, 1)), dtype=cdt)
        return wt.reshape((_prod(w.shape[2:]),) + wt.shape[nd:])

    def _gemm_into(self, a, b, out, accumulate: bool) -> None:
        """``out = a @ b`` or, with ``accumulate``, ``out += a @ b`` (2-D arrays; ``out`` a view the caller owns).

        Portable version: a temporary product added in. The CPU backend runs both as one BLAS ``gemm``
        (``beta = 1`` accumulates in place), which saves the temporary's write and read per call."""
        if accumulate:
            out += self.xp.matmul(a, b)
        else:
            out[...] = self.xp.matmul(a, b)  # ``out`` may be a strided view (CuPy's matmul writes only whole arrays)

    def _bias_out(self, out, y, b, cdt, tile_axis=1):
        """``out[...] = y (+ b, shaped to broadcast, or per channel on axis 1)``, rounded to ``out``'s dtype,
        split over the batch (``tile_axis``: ``out``'s channel axis, for :meth:`_copy_n`)."""
        if b is not None:
            b = (b.reshape((1, -1) + (1,) * (out.ndim - 2)) if b.ndim == 1 else b).astype(cdt, copy=False)
        if b is None or out.dtype == b.dtype:
            # the transposing copy, then the bias on the contiguous result: a ufunc reading the transposed
            # view directly measures 1.3 times slower than the two passes
            self._copy_n(out, y, tile_axis=tile_axis)
            if b is not None:
                self._par(lambda lo, hi: self.xp.add(out[lo:hi], b, out=out[lo:hi]), out.shape[0], out.size)
            return

        def add(lo, hi):  # fused where the output rounds, to round once
            self.xp.add(y[lo:hi], b, out=out[lo:hi], casting="unsafe")
        self._par(add, out.shape[0], out.size)

    def _tap_g(self, g, padded, cdt):
        """The output gradient channels-first on the grid (O, N*P), zero past the output's extent."""
        return self._tap_buf(g, padded, 0, g.shape[0] * _prod(padded), cdt)

    def _conv_taps_dx(self, gf, g_sp, w, size, pads, dilation, padded, dt, cdt):
        xp = self.xp
        n = gf.shape[1] // _prod(padded)
        o, c = w.shape[:2]
        offs, rows, lead, length = self._tap_geom(n, padded, pads, g_sp, w.shape[2:], dilation)
        wt = self._tap_w(w, cdt)  # (K, O, C): the products take its transposed (C, O) views
        acc = xp.zeros((c, length), dtype=cdt)
        # the adjoint of the forward: each tap's product added at its offset (the gradient's columns past
        # ``rows`` are zero: the last image's trailing positions), block by block of gradient positions
        for r0, r1 in self._tap_blocks(rows, self._tap_tile(c, o)):
            for t, off in enumerate(offs):
                self._gemm_into(xp.swapaxes(wt[t], 0, 1), gf[:, r0:r1], acc[:, off + r0:off + r1], True)
        out = xp.empty((n, c) + tuple(size), dtype=dt)
        self._tap_unbuf(out, acc, padded, lead, size)
        return out

    def _conv_taps_dw(self, x, gf, g_sp, w_shape, pads, dilation, padded, cdt):
        xp = self.xp
        kernel = tuple(w_shape[2:])
        o, c = w_shape[:2]
        n = x.shape[0]
        offs, rows, lead, length = self._tap_geom(n, padded, pads, g_sp, kernel, dilation)
        a = self._tap_buf(x, padded, lead, length, cdt)
        # per tap dW_t (O, C) = sum_p g[:, p] a[:, p + off_t]^T, the reduction over positions split in blocks
        # (accumulated in place: beta = 1 after the first)
        dw = xp.empty((len(offs), o, c), dtype=cdt)
        for i, (r0, r1) in enumerate(self._tap_blocks(rows, self._tap_tile(c, o, reduce=True))):
            for t, off in enumerate(offs):
                self._gemm_into(gf[:, r0:r1], xp.swapaxes(a[:, off + r0:off + r1], 0, 1), dw[t], i > 0)
        dw = dw.reshape(kernel + (o, c))
        out = xp.empty(tuple(w_shape), dtype=x.dtype)
        out[...] = dw.transpose((len(kernel), len(kernel) + 1) + tuple(range(len(kernel))))
        return out

    def _dw_gemms(self, gt, a, offs, rows, cdt):
        """The weight gradient's long-reduction GEMMs: (T, O, C) with ``[t] = gt @ a[off_t : off_t + rows]``
        (``gt`` (O, rows), a transposed view; one offset 0 for im2col's and a 1x1 convolution's single GEMM)."""
        dw = self.xp.empty((len(offs), gt.shape[0], a.shape[1]), dtype=cdt)
        for t, off in enumerate(offs):
            self._gemm_into(gt, a[off:off + rows], dw[t], False)
        return dw

    @staticmethod
    def _tap_padded(size, pads, g_sp, kernel, dilation):
        """The shared-padding grid of a stride-1 convolution from input ``size`` to output ``g_sp``: per dim
        the pixels, then as many zeros as the larger side's padding (the far side's reach past the input
        included), at least the output's extent."""
        return tuple(max(s + max(lo, hi, o + d * (k - 1) - lo - s), o)
                     for s, (lo, hi), o, d, k in zip(size, pads, g_sp, dilation, kernel))

    def _narrow_cols(self, x, kernel, stride, pads, dilation, cdt, out_sp=None):
        """Channels-first im2col (N, C*K, L) for few input channels (the first layer): contiguous runs along
        the output's last dim, where the channels-last layout would copy element by element."""
        xp = self.xp
        nd = len(kernel)
        n, c = x.shape[:2]
        buf = self._conv_grid(x, pads, cdt)
        buf = xp.moveaxis(buf, -1, 1)  # (N, C, *padded) view of the padded copy
        if out_sp is None:
            out_sp = tuple(p - d * (k - 1) - 1 for p, d, k in zip(buf.shape[2:], dilation, kernel))
            out_sp = tuple(v // st + 1 for v, st in zip(out_sp, stride))
        st = buf.strides
        strides = st[:2] + tuple(st[2 + i] * dilation[i] for i in range(nd)) + tuple(
            st[2 + i] * stride[i] for i in range(nd))
        view = xp.lib.stride_tricks.as_strided(buf, (n, c) + tuple(kernel) + tuple(out_sp), strides)
        return xp.ascontiguousarray(view).reshape(n, c * _prod(kernel), _prod(out_sp)), out_sp

    def _conv_narrow(self, x, w, b, stride, pads, dilation, dt, cdt):
        n, o = x.shape[0], w.shape[0]
        cols, out_sp = self._narrow_cols(x, w.shape[2:], stride, pads, dilation, cdt)
        y = self.xp.matmul(w.reshape(o, -1).astype(cdt, copy=False), cols)  # (N, O, L): channels-first already
        if b is not None:
            y += b.reshape(o, 1).astype(cdt, copy=False)
        return y.astype(dt, copy=False).reshape((n, o) + out_sp)

    # 1x1 convolutions (no padding, one group, any stride; dilation then changes nothing): one GEMM per image
    # on the channels-first layout, y_i (O, L) = W (O, C) @ x_i (C, L), so no layout copy at all at stride 1
    # (a strided one copies x's sampled positions once, 1/s^2 of it); dx_i = W^T @ g_i, written into the
    # sampled positions of a zero dx; dw = g' (O, N*L) @ x'^T from the block copies g' (O, N, L) and
    # x' (C, N, L) (contiguous L runs, no element-wise transposition), through the same GEMMs as the taps'.
    @staticmethod
    def _conv1x1_ok(kernel, pads, groups):
        return groups == 1 and all(k == 1 for k in kernel) and all(lo == 0 and hi == 0 for lo, hi in pads)

    def _conv1x1_sub(self, a, stride, cdt):
        """(``a`` (N, C, *S) at a 1x1 convolution's sampled positions as a contiguous (N, C, L) in ``cdt`` (``a``
        itself where it is one), their spatial shape)."""
        v = a[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
        if v.dtype != cdt or not v.flags.c_contiguous:
            m = self.xp.empty(v.shape, dtype=cdt)
            self._copy_n(m, v)
            v = m
        return v.reshape(v.shape[:2] + (_prod(v.shape[2:]),)), tuple(v.shape[2:])

    def _img_gemms(self, a, b, out):
        """``out[i] = a @ b[i]`` per image (``a`` 2-D, shared): NumPy's stacked matmul, one BLAS gemm per image."""
        self.xp.matmul(a, b, out=out)

    def _conv1x1(self, x, w, b, stride, dt, cdt):
        n, o = x.shape[0], w.shape[0]
        x3, out_sp = self._conv1x1_sub(x, stride, cdt)
        y = self.xp.empty((n, o, x3.shape[2]), dtype=cdt)
        self._img_gemms(w.reshape(o, -1).astype(cdt, copy=False), x3, y)
        if dt == cdt:
            if b is not None:
                self.xp.add(y, b.reshape(o, 1).astype(cdt, copy=False), out=y)
            return y.reshape((n, o) + out_sp)
        out = self.xp.empty((n, o) + out_sp, dtype=dt)
        self._bias_out(out, y.reshape(out.shape), b, cdt, tile_axis=None)  # rounded once
        return out

    def _conv1x1_dx(self, g, w, size, stride, cdt):
        xp = self.xp
        n, o = g.shape[:2]
        c = w.shape[1]
        dt = g.dtype
        g3, g_sp = self._conv1x1_sub(g, (1,) * (g.ndim - 2), cdt)
        full = tuple(g_sp) == tuple(size)  # stride 1 (or a sampled grid covering every position)
        d = xp.empty((n, c, g3.shape[2]), dtype=cdt)
        self._img_gemms(xp.swapaxes(w.reshape(o, c).astype(cdt, copy=False), 0, 1), g3, d)
        if full and dt == cdt:
            return d.reshape((n, c) + tuple(size))
        out = (xp.empty if full else xp.zeros)((n, c) + tuple(size), dtype=dt)
        sl = (slice(None), slice(None)) + tuple(slice(0, (v - 1) * s + 1, s) for v, s in zip(g_sp, stride))
        self._copy_n(out[sl], d.reshape((n, c) + g_sp))
        return out

    def _conv1x1_dw(self, x, g, w_shape, stride, cdt):
        xp = self.xp
        n, o = g.shape[:2]
        c = x.shape[1]
        xs = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
        xt = xp.empty((c,) + xs.shape[:1] + xs.shape[2:], dtype=cdt)
        self._copy_n(xt, xp.swapaxes(xs, 0, 1), axis=1)
        gt = xp.empty((o,) + g.shape[:1] + g.shape[2:], dtype=cdt)
        self._copy_n(gt, xp.swapaxes(g, 0, 1), axis=1)
        rows = xt.size // max(c, 1)
        dw = self._dw_gemms(gt.reshape(o, rows), xp.swapaxes(xt.reshape(c, rows), 0, 1), (0,), rows, cdt)[0]
        return dw.astype(x.dtype, copy=False).reshape(w_shape)

    # -- a convolution library (cuDNN on CUDA, oneDNN on the CPU): each method returns None wherever the library
    # -- is switched off, absent or declines the case, and the op then runs the GEMM kernels below ---------------
    def _conv_library(self):
        """``(module, keywords)``: the library's module (``conv_forward``, ``conv_data_grad``,
        ``conv_weight_grad``) and the keywords its calls take, or None (none here: the portable kernels)."""
        return None

    @staticmethod
    def _both_grads(need_x, need_w, grad_x, grad_w):
        """``(dx, dw)`` from the two gradient calls (each skipped when not needed), or None when a needed
        one is declined (the caller then runs the existing kernels for both). The weight gradient is asked
        first: the libraries decline it more often (oneDNN below 16 input channels per group), and a data
        gradient computed before a refusal would be thrown away."""
        gx = gw = None
        if need_w:
            gw = grad_w()
            if gw is None:
                return None
        if need_x:
            gx = grad_x()
            if gx is None:
                return None
        return gx, gw

    def conv_nd(self, x, w, b, stride, pads, dilation, groups):
        """A convolution's forward through the backend's library (output in the layout of ``x``), or None."""
        c = self._conv_library()
        if c is None:
            return None
        mod, kw = c
        return mod.conv_forward(x, w, stride, pads, dilation, groups, bias=b, **kw)

    def conv_nd_backward(self, g, x, w, stride, pads, dilation, groups, need_x=True, need_w=True):
        """``(dx, dw)`` of a convolution through the library (each None when not needed), or None if it
        declines a needed one."""
        c = self._conv_library()
        if c is None:
            return None
        mod, kw = c
        return self._both_grads(
            need_x, need_w,
            lambda: mod.conv_data_grad(g, w, x.shape, stride, pads, dilation, groups, **kw),
            lambda: mod.conv_weight_grad(x, g, w.shape, stride, pads, dilation, groups, **kw))

    def conv_transpose_nd(self, x, w, b, stride, pads, dilation, groups, size):
        """A transposed convolution's forward (the data gradient of a convolution), or None."""
        c = self._conv_library()
        if c is None:
            return None
        mod, kw = c
        shape = (x.shape[0], w.shape[1] * groups) + tuple(size)
        y = mod.conv_data_grad(x, w, shape, stride, pads, dilation, groups, **kw)
        if y is not None and b is not None:
            y += b.reshape((1, -1) + (1,) * len(size))
        return y

    def conv_transpose_nd_backward(self, g, x, w, stride, pads, dilation, groups, need_x=True, need_w=True):
        """``(dx, dw)`` of a transposed convolution: a convolution of ``g`` and a weight gradient with the
        activations' roles swapped; None if the library declines a needed one."""
        c = self._conv_library()
        if c is None:
            return None
        mod, kw = c

        def grad_x():
            gx = mod.conv_forward(g, w, stride, pads, dilation, groups, **kw)
            # an output_padding >= stride gives the convolution another output size: decline
            return None if gx is None or gx.shape != x.shape else gx

        return self._both_grads(need_x, need_w, grad_x,
                                lambda: mod.conv_weight_grad(g, x, w.shape, stride, pads, dilation, groups, **kw))

    def conv_nd_gemm(self, x, w, b, stride, pads, dilation, groups):
        """Cross-correlation ``y = w * x + b`` of ``x`` (N, C, *S), ``w`` (O, C/G, *k), per-dim ``pads``
        ((lo, hi), ...): im2col + one GEMM per group; returns (N, O, *out) contiguous in x's dtype."""
        xp = self.xp
        dt = x.dtype
        cdt = self._conv_cdt(dt)
        n, o = x.shape[0], w.shape[0]
        nd = x.ndim - 2
        if self._conv1x1_ok(w.shape[2:], pads, groups):
            return self._conv1x1(x, w, b, stride, dt, cdt)
        padded = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
        out_sp = tuple(p - d * (k - 1) for p, d, k in zip(padded, dilation, w.shape[2:]))
        grid = self._tap_padded(x.shape[2:], pads, out_sp, w.shape[2:], dilation)
        if self._conv_taps_ok(x.shape[1], stride, groups, x.shape[0], grid, out_sp, pads):
            return self._conv_taps(x, w, b, pads, dilation, dt, cdt)
        if groups == 1 and x.shape[1] < self._TAP_MIN_C:
            return self._conv_narrow(x, w, b, stride, pads, dilation, dt, cdt)
        cols, out_sp = self._conv_cols(x, w.shape[2:], stride, pads, dilation, groups, cdt)
        y = self._conv_gemm(cols, xp.swapaxes(self._conv_wmat(w, groups, cdt), -1, -2))  # (G, N*L, O/G)
        y = y.reshape((groups, n) + out_sp + (o // groups,)).transpose((1, 0, nd + 2) + tuple(range(2, nd + 2)))
        out = xp.empty((n, groups, o // groups) + out_sp, dtype=dt)
        # the back-to-channels-first copy, fused with the rounding
        self._bias_out(out, y, None if b is None else b.reshape((1, groups, o // groups) + (1,) * nd), cdt,
                       tile_axis=2)
        return out.reshape((n, o) + out_sp)

    def _col2im_cl(self, dcols, n, size, kernel, stride, pads, dilation, groups, out_sp, dt):
        """Adjoint of :meth:`_conv_cols`: (G, N*L, K*C/G) summed back into (N, C, *size) in ``dt``:
        one strided add per kernel tap over all pixels (channels-last, contiguous C runs)."""
        xp = self.xp
        nd = len(kernel)
        cg = dcols.shape[-1] // _prod(kernel)
        d = dcols.reshape((groups, n) + tuple(out_sp) + tuple(kernel) + (cg,))
        d = xp.moveaxis(d, 0, -2)  # (N, *out, *kernel, G, C/G)
        padded = tuple(max(s + lo + hi, (o - 1) * st + dl * (k - 1) + 1)
                       for s, (lo, hi), o, st, dl, k in zip(size, pads, out_sp, stride, dilation, kernel))
        acc = xp.zeros((n,) + padded + (groups, cg), dtype=dcols.dtype)
        outs = (slice(None),) * nd
        taps = [(kpos, tuple(slice(kp * dl, kp * dl + st * (o - 1) + 1, st)
                             for kp, dl, st, o in zip(kpos, dilation, stride, out_sp)))
                for kpos in itertools.product(*(range(k) for k in kernel))]
        inner = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))
        out = xp.empty((n, groups * cg) + tuple(size), dtype=dt)

        def fold(lo, hi):
            rows = (slice(lo, hi),)
            for kpos, sl in taps:
                acc[rows + sl] += d[rows + outs + kpos]
            a = acc[rows + inner].reshape((hi - lo,) + tuple(size) + (groups * cg,))
            out[lo:hi] = xp.moveaxis(a, -1, 1)
        self._par(fold, n, acc.size * len(taps))
        return out

    # The data gradient of a strided convolution (and so a transposed convolution's forward) without col2im:
    # along each dim, the padded input position q = o s + k d a tap k sends window o to is (o + c_k) s + r_k
    # (r_k = k d mod s, c_k = k d // s). The positions of one residue class r form a coarse grid on which
    # every tap of that class is a constant shift, so, as in _conv_taps_dx, each tap is ONE GEMM of the
    # gradient (on a zero-padded coarse grid) accumulated in place at its row offset; the s^nd classes are
    # interleaved back into (N, C, *size) by one strided copy each. col2im's K strided adds, whose contiguous
    # runs are only C long, become K GEMMs with beta = 1.
    def _conv_classes_dx(self, g, w, size, stride, pads, dilation, cdt):
        xp = self.xp
        n, o = g.shape[:2]
        c = w.shape[1]
        kernel = w.shape[2:]
        nd = len(kernel)
        g_sp = g.shape[2:]
        coarse, cmax = self._coarse_grid(size, pads, g_sp, kernel, stride, dilation)
        gf = self._conv_grid(g, ((0, 0),) * nd, cdt, coarse).reshape(-1, o)  # (N * prod(coarse), O)
        rows_all = gf.shape[0]
        st_flat = [1] * nd
        for i in range(nd - 2, -1, -1):
            st_flat[i] = st_flat[i + 1] * coarse[i + 1]
        wt = self._tap_w(w, cdt)  # (K, O, C)
        classes = list(itertools.product(*(range(st) for st in stride)))
        acc = xp.zeros((len(classes), rows_all, c), dtype=cdt)
        top = sum(cm * sf for cm, sf in zip(cmax, st_flat))
        rows = rows_all - top
        g_rows = gf[:rows]
        cls_index = {r: i for i, r in enumerate(classes)}
        for t, kpos in enumerate(itertools.product(*(range(k) for k in kernel))):
            r = tuple(kp * d % st for kp, d, st in zip(kpos, dilation, stride))
            off = sum((kp * d // st) * sf for kp, d, st, sf in zip(kpos, dilation, stride, st_flat))
            self._gemm_into(g_rows, wt[t], acc[cls_index[r], off:off + rows], True)
        acc = acc.reshape((len(classes), n) + coarse + (c,))
        out = xp.empty((n, c) + tuple(size), dtype=g.dtype)
        perm = (0, nd + 1) + tuple(range(1, nd + 1))
        moves = []
        for i, r in enumerate(classes):
            # output positions i0, i0 + s, ... (padded q = i + lo of residue r) sit at coarse u = (i + lo - r) / s
            dst, src = [], []
            for rr, st, sz, (lo, _) in zip(r, stride, size, pads):
                i0 = (rr - lo) % st
                cnt = len(range(i0, sz, st))
                u0 = (i0 + lo - rr) // st
                dst.append(slice(i0, sz, st))
                src.append(slice(u0, u0 + cnt))
            if all(sl.start < sz for sl, sz in zip(dst, size)):
                moves.append((i, tuple(dst), tuple(src)))

        def interleave(lo, hi):
            for i, dst, src in moves:
                out[(slice(lo, hi), slice(None)) + dst] = acc[i][(slice(lo, hi),) + src].transpose(perm)
        self._par(interleave, n, out.size)
        return out

    def conv_nd_gemm_backward_data(self, g, w, size, stride, pads, dilation, groups):
        """The input gradient (N, C, *size) of :meth:`conv_nd_gemm` from ``g`` (N, O, *out): one GEMM
        ``g @ w`` per group, then col2im. It is also the forward of the transposed convolution."""
        cdt = self._conv_cdt(g.dtype)
        if self._conv1x1_ok(w.shape[2:], pads, groups):
            return self._conv1x1_dx(g, w, size, stride, cdt)
        padded = self._tap_padded(size, pads, g.shape[2:], w.shape[2:], dilation)
        if self._conv_taps_ok(w.shape[1], stride, groups, g.shape[0], padded, g.shape[2:], pads):
            return self._conv_taps_dx(self._tap_g(g, padded, cdt), g.shape[2:], w, size, pads, dilation, padded,
                                      g.dtype, cdt)
        if self._conv_classes_ok(w, size, pads, g.shape[2:], stride, dilation, groups, g.shape[0]):
            return self._conv_classes_dx(g, w, size, stride, pads, dilation, cdt)
        dcols = self._conv_gemm(self._conv_gmat(g, groups, cdt), self._conv_wmat(w, groups, cdt))
        return self._col2im_cl(dcols, g.shape[0], size, w.shape[2:], stride, pads, dilation, groups,
                               g.shape[2:], g.dtype)

    def conv_nd_gemm_backward_weight(self, x, g, w_shape, stride, pads, dilation, groups, gm=None):
        """The weight gradient (O, C/G, *k) of :meth:`conv_nd_gemm`: one GEMM ``g^T @ cols`` per group."""
        xp = self.xp
        cdt = self._conv_cdt(x.dtype)
        kernel = tuple(w_shape[2:])
        nd = len(kernel)
        o, cg = w_shape[:2]
        if self._conv1x1_ok(kernel, pads, groups):
            return self._conv1x1_dw(x, g, w_shape, stride, cdt)
        padded = self._tap_padded(x.shape[2:], pads, g.shape[2:], kernel, dilation)
        if self._conv_taps_ok(cg, stride, groups, x.shape[0], padded, g.shape[2:], pads):
            return self._conv_taps_dw(x, self._tap_g(g, padded, cdt), g.shape[2:], w_shape, pads, dilation, padded, cdt)
        if groups == 1 and cg < self._TAP_MIN_C and x.shape[0] > 0:
            cols, _ = self._narrow_cols(x, kernel, stride, pads, dilation, cdt, tuple(g.shape[2:]))
            g3 = g.reshape(g.shape[0], o, -1).astype(cdt, copy=False)
            # per-image GEMMs summed over the batch (the (O, C*K) result is small)
            return xp.sum(xp.matmul(g3, xp.swapaxes(cols, -1, -2)), axis=0).astype(x.dtype, copy=False).reshape(w_shape)
        cols, _ = self._conv_cols(x, kernel, stride, pads, dilation, groups, cdt, tuple(g.shape[2:]))
        if gm is None:
            gm = self._conv_gmat(g, groups, cdt)
        # (G, O/G, K*C/G): back to (O, C, *k) is a small (K, C) -> (C, K) transposition per output channel
        # (the (K*C, O) orientation would scatter every element across the whole weight)
        if groups == 1:
            dw = self._dw_gemms(xp.swapaxes(gm[0], 0, 1), cols[0], (0,), cols.shape[1], cdt)
        else:
            dw = self._conv_gemm(xp.swapaxes(gm, -1, -2), cols)
        dw = dw.reshape((groups, o // groups) + kernel + (cg,))
        dw = dw.transpose((0, 1, nd + 2) + tuple(range(2, nd + 2)))
        out = xp.empty((groups, o // groups, cg) + kernel, dtype=x.dtype)
        out[...] = dw
        return out.reshape(w_shape)

    def conv_nd_gemm_backward(self, g, x, w, stride, pads, dilation, groups, need_x=True, need_w=True):
        """``(dx, dw)`` of :meth:`conv_nd_gemm` (None where not needed), sharing the gradient's layout copy."""
        cdt = self._conv_cdt(g.dtype)
        if self._conv1x1_ok(w.shape[2:], pads, groups):
            return (self._conv1x1_dx(g, w, x.shape[2:], stride, cdt) if need_x else None,
                    self._conv1x1_dw(x, g, w.shape, stride, cdt) if need_w else None)
        padded = self._tap_padded(x.shape[2:], pads, g.shape[2:], w.shape[2:], dilation)
        if self._conv_taps_ok(x.shape[1], stride, groups, x.shape[0], padded, g.shape[2:], pads):
            gf = self._tap_g(g, padded, cdt)  # shared by both gradients
            g_sp = g.shape[2:]
            return (self._conv_taps_dx(gf, g_sp, w, x.shape[2:], pads, dilation, padded, x.dtype, cdt)
                    if need_x else None,
                    self._conv_taps_dw(x, gf, g_sp, w.shape, pads, dilation, padded, cdt) if need_w else None)
        classes = need_x and self._conv_classes_ok(w, x.shape[2:], pads, g.shape[2:], stride, dilation, groups,
                                                   g.shape[0])
        gm = self._conv_gmat(g, groups, cdt) if need_w or (need_x and not classes) else None
        dx = dw = None
        if classes:
            dx = self._conv_classes_dx(g, w, x.shape[2:], stride, pads, dilation, cdt)
        elif need_x:
            dcols = self._conv_gemm(gm, self._conv_wmat(w, groups, cdt))
            dx = self._col2im_cl(dcols, g.shape[0], x.shape[2:], w.shape[2:], stride, pads, dilation, groups,
                                 g.shape[2:], x.dtype)
        if need_w:
            dw = self.conv_nd_gemm_backward_weight(x, g, w.shape, stride, pads, dilation, groups, gm=gm)
        return dx, dw

    # -- attention on the CPU: float32 GEMMs for half inputs, tiled over query blocks --------------------
    # The scores of a block of queries are one GEMM with float32 results, the softmax runs on them in float32,
    # and the probabilities (in the backward also the scores' gradient) are rounded to the input dtype for the
    # products that take them, as PyTorch's CPU flash kernel does. Where the backend multiplies half operands
    # itself (:meth:`native_half_gemm`: oneDNN's bfloat16 GEMM on the CPU) the operands stay half; elsewhere they
    # are cast to float32 once and the GEMMs are float32 ones -- the same products (a half times a half is exact
    # in float32), summed in another order. Memory is O(block * S) per (batch, head), and a causal call skips
    # the key blocks after each query block's last position (half the work).
    def native_half_gemm(self, dtype) -> bool:
        """Whether :meth:`matmul_to` multiplies ``dtype`` operands without float32 copies of them (the
        portable backend does not)."""
        return False

    def _sdpa_mm(self, a, b):
        """``a @ b`` with float32 results for half operands (float32 or float64 ones: their own dtype)."""
        return self.matmul_to(a, b, np.dtype(np.float32)) if a.dtype in _HALF else self.xp.matmul(a, b)

    def _sdpa_operands(self, dt, *arrays):
        """The attention operands as the GEMMs take them: half ones unchanged where the backend multiplies
        them natively, else in the compute dtype."""
        cdt = self._conv_cdt(dt)
        if cdt != dt and self.native_half_gemm(dt):
            return arrays
        return tuple(self.astype(a, cdt, copy=False) for a in arrays)

    _SDPA_BLOCK = 128
    #: score elements per pass of the softmax below: a sub-block's float32 scores stay in the L2 cache
    _SDPA_PASS = 1 << 16

    @staticmethod
    def _sdpa_rows(mask, r0, r1, kend):
        if mask is None:
            return None
        rs = slice(None) if mask.shape[-2] == 1 else slice(r0, r1)
        cs = slice(None) if mask.shape[-1] == 1 else slice(0, kend)
        return mask[..., rs, cs]

    def _sdpa_mask_scores_(self, s, m, scale, causal, r0, kend):
        """``s = s * scale + m``, causally masked, in place: the scores of query rows ``r0:`` over keys ``:kend``."""
        s *= scale
        if m is not None:
            s += m.astype(s.dtype, copy=False)
        if causal and kend > r0:
            # key j is masked for query i when j > i (top-left aligned): only keys from r0 on can be
            xp = self.xp
            xp.copyto(s[..., r0:], -xp.inf, where=self._sdpa_upper(s.shape[-2], kend - r0))

    def _sdpa_upper(self, rows: int, cols: int):
        """The read-only boolean ``(rows, cols)`` mask above the diagonal, kept per shape (a few per model)."""
        cache = self.__dict__.setdefault("_sdpa_upper_masks", {})
        m = cache.get((rows, cols))
        if m is None:
            if len(cache) > 64:
                cache.clear()
            m = cache[(rows, cols)] = self.xp.triu(self.xp.ones((rows, cols), dtype=bool), 1)
            m.flags.writeable = False
        return m

    def _sdpa_batched(self, fn, s, mask, r0, r1, kend):
        """``fn(part, m)`` over the score block ``s`` (batch..., rows, kend), a C-contiguous GEMM result: ``part``
        a slice of its batch flattened, ``(B, rows, kend)``, or None for the whole block in its own shape (a mask
        with batch dims of its own); ``m`` the mask rows that apply. The batch goes in sub-blocks of about
        ``_SDPA_PASS`` elements, on this thread: split across 2 threads (:meth:`_par`) the step measured no faster
        (passes of this size are too short for the pool hand-offs)."""
        m = self._sdpa_rows(mask, r0, r1, kend)
        if m is not None and any(d != 1 for d in m.shape[:-2]):
            with self.errstate():
                fn(None, m)
            return
        if m is not None:
            m = m.reshape(m.shape[-2:])
        nb = s.size // max(s.shape[-2] * kend, 1)
        step = max(1, self._SDPA_PASS // max(s.shape[-2] * kend, 1))

        def run(lo, hi):
            with self.errstate():
                for b in range(lo, hi, step):
                    fn(slice(b, min(hi, b + step)), m)
        run(0, nb)

    def _sdpa_round(self, a, dt, gemm_dt):
        """A float32 factor as the GEMMs take it: rounded to the half dtype ``dt``, widened again to
        ``gemm_dt`` where the GEMMs are float32 ones."""
        r = self.astype(a, dt)
        return r if gemm_dt == dt else self.astype(r, gemm_dt)

    def sdpa_cpu(self, q, k, v, mask, scale, causal):
        """``(o, lse)`` of ``softmax(q k^T scale + mask [+ causal]) v``; ``lse`` (..., L, 1) in float32
        for half inputs (the compute dtype), ``o`` in q's dtype. Fully masked rows give NaN probabilities,
        as PyTorch's math kernel."""
        xp = self.xp
        dt = q.dtype
        cdt = self._conv_cdt(dt)
        lq, s_len = q.shape[-2], k.shape[-2]
        qc, kc, vc = self._sdpa_operands(dt, q, k, v)
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                    mask.shape[:-2] if mask is not None else ())
        o = xp.empty(batch + (lq, v.shape[-1]), dtype=dt)
        lse = xp.empty(batch + (lq, 1), dtype=cdt)
        half = cdt != dt
        bs = self._SDPA_BLOCK
        for r0 in range(0, lq, bs):
            r1 = min(lq, r0 + bs)
            kend = min(s_len, r1) if causal else s_len
            s = xp.ascontiguousarray(self._sdpa_mm(qc[..., r0:r1, :], xp.swapaxes(kc[..., :kend, :], -1, -2)))
            ls = xp.empty(s.shape[:-1] + (1,), dtype=s.dtype)
            pr = xp.empty(s.shape, dtype=vc.dtype) if half else s
            flat = [a.reshape(-1, r1 - r0, a.shape[-1]) for a in (s, ls, pr)]

            def softmax_(part, m, r0=r0, kend=kend, whole=(s, ls, pr), flat=flat):
                # the rows' softmax in place, their log-sum-exp into ls; half inputs: p rounded once to the input
                # dtype for the GEMM with v
                sb, lsb, prb = whole if part is None else (a[part] for a in flat)
                self._sdpa_mask_scores_(sb, m, scale, causal, r0, kend)
                mx = xp.max(sb, axis=-1, keepdims=True)
                mx = xp.where(xp.isfinite(mx), mx, 0)
                sb -= mx
                xp.exp(sb, out=sb)
                den = xp.log(xp.sum(sb, axis=-1, keepdims=True))
                sb /= xp.exp(den)
                xp.add(mx, den, out=lsb)
                if half:
                    prb[...] = self._sdpa_round(sb, dt, vc.dtype)

            self._sdpa_batched(softmax_, s, mask, r0, r1, kend)
            lse[..., r0:r1, :] = ls
            if half:  # o rounded once
                o[..., r0:r1, :] = self.astype(self._sdpa_mm(pr, vc[..., :kend, :]), dt, copy=False)
            else:
                o[..., r0:r1, :] = xp.matmul(s, vc[..., :kend, :])
        return o, lse

    def sdpa_cpu_backward(self, q, k, v, o, g, lse, mask, scale, causal):
        """``(dq, dk, dv)`` of :meth:`sdpa_cpu` from the saved ``o`` and ``lse``: per query block,
        ``P = exp(S - lse)``, ``dv += P^T g``, ``dS = P (g v^T - rowsum(g o)) scale``, ``dq = dS k``,
        ``dk += dS^T q``; for half inputs ``P`` and ``dS`` rounded to the input dtype for the GEMMs (as
        PyTorch's CPU flash kernel), float32 results, each gradient rounded once."""
        xp = self.xp
        dt = q.dtype
        cdt = self._conv_cdt(dt)
        lq, s_len = q.shape[-2], k.shape[-2]
        qc, kc, vc, gc = self._sdpa_operands(dt, q, k, v, g)
        delta = xp.sum(self.astype(g, cdt, copy=False) * self.astype(o, cdt, copy=False), axis=-1, keepdims=True)
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], g.shape[:-2])
        dq = xp.empty(batch + q.shape[-2:], dtype=cdt)
        dk = xp.zeros(batch + k.shape[-2:], dtype=cdt)
        dv = xp.zeros(batch + v.shape[-2:], dtype=cdt)
        half = cdt != dt
        gemm_dt = qc.dtype
        bs = self._SDPA_BLOCK
        for r0 in range(0, lq, bs):
            r1 = min(lq, r0 + bs)
            kend = min(s_len, r1) if causal else s_len
            qb, gb = qc[..., r0:r1, :], gc[..., r0:r1, :]
            s = self._sdpa_mm(qb, xp.swapaxes(kc[..., :kend, :], -1, -2))
            dp = self._sdpa_mm(gb, xp.swapaxes(vc[..., :kend, :], -1, -2))
            # the block's scores, their gradient and the row statistics in one (contiguous) shape
            shape = np.broadcast_shapes(s.shape, dp.shape, lse.shape[:-2] + (r1 - r0, 1),
                                        delta.shape[:-2] + (r1 - r0, 1))
            s, dp = (a if a.shape == shape and a.flags.c_contiguous else xp.ascontiguousarray(xp.broadcast_to(a, shape))
                     for a in (s, dp))
            lse_b = xp.broadcast_to(lse[..., r0:r1, :], shape[:-1] + (1,))
            delta_b = xp.broadcast_to(delta[..., r0:r1, :], shape[:-1] + (1,))
            pr = xp.empty(shape, dtype=gemm_dt) if half else s
            dsr = xp.empty(shape, dtype=gemm_dt) if half else dp
            flat = [a.reshape(-1, r1 - r0, a.shape[-1]) for a in (s, dp, lse_b, delta_b, pr, dsr)]

            def grads_(part, m, r0=r0, kend=kend, whole=(s, dp, lse_b, delta_b, pr, dsr), flat=flat):
                # P = exp(S - lse) and dS = P (dP - delta) scale of the rows, in place; half inputs: both rounded
                # once to the input dtype for the GEMMs
                sb, db, lb, eb, prb, dsb = whole if part is None else (a[part] for a in flat)
                self._sdpa_mask_scores_(sb, m, scale, causal, r0, kend)
                sb -= lb
                xp.exp(sb, out=sb)
                db -= eb
                db *= sb
                db *= scale
                if half:
                    prb[...] = self._sdpa_round(sb, dt, gemm_dt)
                    dsb[...] = self._sdpa_round(db, dt, gemm_dt)

            self._sdpa_batched(grads_, s, mask, r0, r1, kend)
            dv[..., :kend, :] += self._sdpa_mm(xp.swapaxes(pr, -1, -2), gb)
            dq[..., r0:r1, :] = self._sdpa_mm(dsr, kc[..., :kend, :])
            dk[..., :kend, :] += self._sdpa_mm(xp.swapaxes(dsr, -1, -2), qb)
        return tuple(self.astype(self.sum_to_shape(a, ref.shape), ref.dtype, copy=False)
                     for a, ref in ((dq, q), (dk, k), (dv, v)))
