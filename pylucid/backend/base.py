"""The array backend shared by the CPU (NumPy) and CUDA (CuPy) devices."""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np

from . import reference
from .reference import GELU_C, GELU_K, INV_SQRT_2PI, SQRT1_2

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_NULL_CTX = contextlib.nullcontext()
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

    def to_numpy(self, a, what: str = "a copy to the host"):
        return np.asarray(a)

    def astype(self, a, np_dtype, copy=True):
        return a.astype(np_dtype, copy=copy)

    # -- numerics that need care -----------------------------------------
    def matmul(self, a, b):
        # NumPy has no half-precision BLAS: compute float16/bfloat16 products in
        # float32 and round once, which is also what PyTorch's CPU kernels do.
        if a.dtype in _HALF:
            dt = a.dtype
            return self.xp.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dt)
        return self.xp.matmul(a, b)

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        if dtype is None and a.dtype in _HALF:
            # accumulate half precision in float32 (as PyTorch does), round once
            return self.xp.sum(a, axis=axis, keepdims=keepdims, dtype=np.float32).astype(a.dtype)
        return self.xp.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)

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

    def layer_norm(self, x, weight, bias, eps: float):
        """Layer norm over the last axis: ``(y, mean, rstd)`` (biased variance; stats in float32 for half x)."""
        xf = x.astype(np.float32) if x.dtype in _HALF else x
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
                var = self.mean(xc * xc, axis=axes, keepdims=True)
            else:
                mu = running_mean.astype(xf.dtype, copy=False).reshape(shape)
                var = running_var.astype(xf.dtype, copy=False).reshape(shape)
                xc = xf - mu
            y = xc / self.xp.sqrt(var + eps)
            if weight is not None:
                y = y * weight.reshape(shape)
            if bias is not None:
                y = y + bias.reshape(shape)
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
            xhat = (xf - mean.astype(xf.dtype, copy=False).reshape(shape)) * rstd
            db = self.xp.sum(gf, axis=axes)
            dw = self.xp.sum(gf * xhat, axis=axes)
            dx = None
            if need_dx:
                k = rstd if weight is None else rstd * up(weight).reshape(shape)
                if training:
                    m = gf.size // max(x.shape[1], 1)
                    dx = k * (gf - (db / m).reshape(shape) - xhat * (dw / m).reshape(shape))
                else:
                    dx = k * gf
                dx = dx.astype(x.dtype, copy=False)
        return dx, dw, db

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
        with self.errstate():  # ml_dtypes' bfloat16 maximum warns on NaN where float32 does not
            return self.maximum(x, x.dtype.type(0))

    def relu_backward(self, y, g):
        """PyTorch's ``threshold_backward`` from relu's output: ``g`` where ``y > 0`` or NaN, else 0."""
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

    # -- GELU (the CUDA backend runs each direction as one kernel) -----------------------
    def _erf(self, z):
        if z.dtype in _HALF:  # scipy.special has no half kernels: float32, rounded back once
            return self.special.erf(z.astype(np.float32)).astype(z.dtype)
        return self.special.erf(z)

    def gelu(self, x, approximate: str = "none"):
        """``x Phi(x)`` (``'none'``) or ``x/2 (1 + tanh(k (x + c x^3)))`` (``'tanh'``), in ``x``'s dtype."""
        t = x.dtype.type
        if approximate == "tanh":
            return x * t(0.5) * (1 + self.tanh((x + x * x * x * t(GELU_C)) * t(GELU_K)))
        return x * t(0.5) * (1 + self._erf(x * t(SQRT1_2)))

    def gelu_backward(self, g, x, approximate: str = "none"):
        """``g * gelu'(x)``: ``Phi(x) + x phi(x)``, or the derivative of the tanh form."""
        t = x.dtype.type
        if approximate == "tanh":
            th = self.tanh((x + x * x * x * t(GELU_C)) * t(GELU_K))
            d_inner = (x * x * t(3 * GELU_C) + 1) * t(GELU_K)
            return g * ((th + 1) * t(0.5) + x * t(0.5) * (1 - th * th) * d_inner)
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
