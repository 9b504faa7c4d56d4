"""Fused kernels for the CUDA backend, and the portable array-module versions they must match.

Two halves, kept side by side so the semantics live in one place:

* **Reference implementations** (``*_ref`` functions) written against an array
  module ``xp`` (NumPy or CuPy). They are the portable fallback the base
  backend uses on the CPU, and the oracle the GPU tests compare each kernel to.
* **CUDA kernels** (CuPy ``RawKernel``/``ElementwiseKernel``), compiled lazily on
  first use and cached per dtype and device. This module never imports CuPy at
  import time.

Kernels compute in the array's own precision for float32/float64. float16 and
bfloat16 inputs are converted to float32 by the backend methods, computed, and
rounded back once (PyTorch's CUDA kernels also accumulate half types in
float32); a native half path is a later optimisation, not a semantic change.

Every row-wise kernel (softmax, layer norm, cross-entropy) runs one thread
block per row over a C-contiguous ``(rows, cols)`` view, with warp-shuffle
block reductions; the reduction order is fixed, so they are deterministic.
The atomic embedding backward is not (see ``embedding_backward``).
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------------------
# reference implementations (xp = numpy or cupy)
# ---------------------------------------------------------------------------


def softmax_ref(xp, x, log: bool = False):
    """Softmax (or log-softmax) over the last axis, max-subtracted for stability."""
    m = xp.max(x, axis=-1, keepdims=True)
    z = x - m
    s = xp.sum(xp.exp(z), axis=-1, keepdims=True)
    return z - xp.log(s) if log else xp.exp(z) / s


def softmax_backward_ref(xp, y, g, log: bool = False):
    """Gradient of softmax/log-softmax given the saved output ``y`` and the incoming ``g``.

    softmax: ``dx = y * (g - sum(g * y))``; log-softmax: ``dx = g - exp(y) * sum(g)``.
    """
    if log:
        return g - xp.exp(y) * xp.sum(g, axis=-1, keepdims=True)
    return y * (g - xp.sum(g * y, axis=-1, keepdims=True))


def layer_norm_ref(xp, x, weight, bias, eps: float):
    """Layer norm over the last axis: ``(y, mean, rstd)`` with biased variance (as PyTorch).

    ``mean``/``rstd`` have shape ``x.shape[:-1]``; ``weight``/``bias`` may be None.
    """
    mean = xp.mean(x, axis=-1)
    xc = x - mean[..., None]
    var = xp.mean(xc * xc, axis=-1)
    rstd = 1.0 / xp.sqrt(var + eps)
    y = xc * rstd[..., None]
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


def layer_norm_backward_ref(xp, g, x, mean, rstd, weight):
    """``(dx, dweight, dbias)`` of layer norm; ``dweight``/``dbias`` are None when ``weight`` is None.

    With ``xhat = (x - mean) * rstd`` and ``dxhat = g * weight``:
    ``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``,
    ``dweight = sum_rows(g * xhat)``, ``dbias = sum_rows(g)``.
    """
    xhat = (x - mean[..., None]) * rstd[..., None]
    dxhat = g * weight if weight is not None else g
    n = x.shape[-1]
    a = xp.sum(dxhat, axis=-1, keepdims=True) / n
    b = xp.sum(dxhat * xhat, axis=-1, keepdims=True) / n
    dx = rstd[..., None] * (dxhat - a - xhat * b)
    if weight is None:
        return dx, None, None
    lead = tuple(range(x.ndim - 1))
    return dx, xp.sum(g * xhat, axis=lead), xp.sum(g, axis=lead)


def cross_entropy_ref(xp, logits, target, ignore_index: int = -100):
    """Per-row cross-entropy of ``(rows, classes)`` logits against integer targets.

    Returns ``(loss, lse)``: ``loss[r] = logsumexp(logits[r]) - logits[r, target[r]]``, 0 where
    ``target[r] == ignore_index``; ``lse`` (the row log-sum-exp) is what the backward needs.
    """
    m = xp.max(logits, axis=-1, keepdims=True)
    lse = (m + xp.log(xp.sum(xp.exp(logits - m), axis=-1, keepdims=True)))[:, 0]
    valid = target != ignore_index
    safe = xp.where(valid, target, 0).astype(np.int64)
    picked = xp.take_along_axis(logits, safe[:, None], axis=1)[:, 0]
    loss = xp.where(valid, lse - picked, xp.zeros((), dtype=logits.dtype))
    return loss.astype(logits.dtype), lse.astype(logits.dtype)


def cross_entropy_backward_ref(xp, g, logits, lse, target, ignore_index: int = -100):
    """``dlogits = g[r] * (softmax(logits[r]) - onehot(target[r]))``, zero rows where ignored."""
    p = xp.exp(logits - lse[:, None])
    valid = target != ignore_index
    safe = xp.where(valid, target, 0).astype(np.int64)
    onehot = (xp.arange(logits.shape[1])[None, :] == safe[:, None]).astype(logits.dtype)
    gr = xp.where(valid, g, xp.zeros((), dtype=g.dtype))
    return (gr[:, None] * (p - onehot)).astype(logits.dtype)


def cross_entropy_reduce_ref(xp, loss, target, ignore_index: int = -100, mean: bool = True):
    """``(sum or mean of the per-row losses, number of rows not ignored)``, both 0-d of ``loss``'s dtype.

    The mean divides by the count of rows whose target is not ``ignore_index`` (0/0 = NaN, as PyTorch).
    """
    count = xp.sum(target != ignore_index).astype(loss.dtype)
    total = xp.sum(loss)
    return (total / count if mean else total).astype(loss.dtype), count


def relu_backward_ref(xp, y, g):
    """PyTorch's ``threshold_backward``: ``g`` where ``y > 0`` or ``y`` is NaN, else 0."""
    return xp.where(y <= 0, xp.zeros((), dtype=g.dtype), g)


def embedding_backward_ref(xp, g, indices, num_weights: int, padding_idx: int | None = None):
    """``dweight[k] = sum of g rows whose index is k`` (``padding_idx`` rows get no gradient).

    ``g`` has shape ``indices.shape + (dim,)``. Deterministic (``add.at`` on NumPy is sequential).
    """
    dim = g.shape[-1]
    flat_idx = indices.reshape(-1).astype(np.int64)
    flat_g = g.reshape(-1, dim)
    out = xp.zeros((num_weights, dim), dtype=g.dtype)
    if padding_idx is not None:
        keep = flat_idx != padding_idx
        flat_idx, flat_g = flat_idx[keep], flat_g[keep]
    xp.add.at(out, flat_idx, flat_g)
    return out


def adam_step_ref(xp, params, grads, exp_avgs, exp_avg_sqs, *, step: int, lr: float, beta1: float, beta2: float,
                  eps: float, weight_decay: float = 0.0, decoupled: bool = False, maximize: bool = False) -> None:
    """One Adam (``decoupled=False``) or AdamW (``decoupled=True``) step, in place, for every tensor.

    Same arithmetic as PyTorch's single-tensor implementation (``step`` already incremented)::

        g = -g if maximize
        Adam:  g = g + wd * p            AdamW: p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1**step) * m / (sqrt(v) / sqrt(1 - b2**step) + eps)
    """
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if maximize:
            g = -g
        if weight_decay != 0:
            if decoupled:
                p *= 1.0 - lr * weight_decay
            else:
                g = g + weight_decay * p
        m *= beta1
        m += (1.0 - beta1) * g
        v *= beta2
        v += (1.0 - beta2) * g * g
        p -= (lr / bc1) * m / (xp.sqrt(v) / bc2_sqrt + eps)


_SQRT1_2 = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654
_ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}


def _erf(xp, z):
    if xp is np:
        import scipy.special

        return scipy.special.erf(z)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(z)


def bias_act_ref(xp, x, bias, act: str = "relu"):
    """``act(x + bias)``; ``bias`` broadcasts over the last axis (or is None).

    ``act``: ``"none"``, ``"relu"``, ``"gelu"`` (exact, erf) or ``"gelu_tanh"`` (PyTorch's
    ``approximate="tanh"``).
    """
    z = x + bias if bias is not None else x
    if act == "none":
        return z
    if act == "relu":
        return xp.maximum(z, 0)  # NaN propagates, as torch.relu
    if act == "gelu":
        return 0.5 * z * (1.0 + _erf(xp, z * _SQRT1_2))
    if act == "gelu_tanh":
        return 0.5 * z * (1.0 + xp.tanh(_SQRT_2_OVER_PI * (z + 0.044715 * z * z * z)))
    raise ValueError(f"bias_act: unknown activation {act!r}; accepted: {sorted(_ACTS)}")


def bias_act_backward_ref(xp, g, x, bias, act: str = "relu"):
    """``dz = g * act'(x + bias)``: the gradient for ``x``; ``dbias`` is ``dz`` summed over leading axes."""
    z = x + bias if bias is not None else x
    if act == "none":
        return g
    if act == "relu":
        return g * (z > 0)
    if act == "gelu":
        cdf = 0.5 * (1.0 + _erf(xp, z * _SQRT1_2))
        pdf = xp.exp(-0.5 * z * z) * 0.3989422804014327
        return g * (cdf + z * pdf)
    if act == "gelu_tanh":
        u = _SQRT_2_OVER_PI * (z + 0.044715 * z * z * z)
        t = xp.tanh(u)
        return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * z * z))
    raise ValueError(f"bias_act_backward: unknown activation {act!r}; accepted: {sorted(_ACTS)}")


# ---------------------------------------------------------------------------
# CUDA sources (``scalar_t`` is replaced by float or double at compile time)
# ---------------------------------------------------------------------------

_COMMON = r"""
#define NEG_INF ((scalar_t)__int_as_float(0xff800000))
__device__ __forceinline__ scalar_t warp_sum(scalar_t v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ __forceinline__ scalar_t warp_max(scalar_t v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
// block-wide reductions; blockDim.x is a multiple of 32, result broadcast to all threads
__device__ scalar_t block_sum(scalar_t v, scalar_t* sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = (lane < nw) ? sh[lane] : (scalar_t)0;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
__device__ scalar_t block_max(scalar_t v, scalar_t* sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = (lane < nw) ? sh[lane] : NEG_INF;
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
"""

_SOURCES = {
    "softmax_fwd": r"""
extern "C" __global__ void softmax_fwd(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                       long long cols, int log_mode) {
    __shared__ scalar_t sh[32];
    const scalar_t* xr = x + (long long)blockIdx.x * cols;
    scalar_t* yr = y + (long long)blockIdx.x * cols;
    scalar_t m = NEG_INF;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) m = fmax(m, xr[j]);
    m = block_max(m, sh);
    // a NaN anywhere in the row makes the sum NaN, so the whole row is NaN (as PyTorch)
    scalar_t s = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += exp(xr[j] - m);
    s = block_sum(s, sh);
    if (log_mode) {
        scalar_t ls = log(s);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = (xr[j] - m) - ls;
    } else {
        scalar_t inv = (scalar_t)1 / s;
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = exp(xr[j] - m) * inv;
    }
}
""",
    "softmax_bwd": r"""
extern "C" __global__ void softmax_bwd(const scalar_t* __restrict__ y, const scalar_t* __restrict__ g,
                                       scalar_t* __restrict__ dx, long long cols, int log_mode) {
    __shared__ scalar_t sh[32];
    long long off = (long long)blockIdx.x * cols;
    const scalar_t* yr = y + off; const scalar_t* gr = g + off; scalar_t* dr = dx + off;
    scalar_t s = 0;
    if (log_mode) {
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += gr[j];
        s = block_sum(s, sh);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) dr[j] = gr[j] - exp(yr[j]) * s;
    } else {
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += gr[j] * yr[j];
        s = block_sum(s, sh);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) dr[j] = yr[j] * (gr[j] - s);
    }
}
""",
    "layer_norm_fwd": r"""
extern "C" __global__ void layer_norm_fwd(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                                          const scalar_t* __restrict__ b, scalar_t* __restrict__ y,
                                          scalar_t* __restrict__ mean_out, scalar_t* __restrict__ rstd_out,
                                          long long cols, scalar_t eps, int has_w, int has_b) {
    __shared__ scalar_t sh[32];
    const scalar_t* xr = x + (long long)blockIdx.x * cols;
    scalar_t* yr = y + (long long)blockIdx.x * cols;
    // two passes over the row (mean, then centred second moment): no cancellation
    scalar_t s = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    scalar_t mean = block_sum(s, sh) / (scalar_t)cols;
    scalar_t q = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) { scalar_t d = xr[j] - mean; q += d * d; }
    scalar_t var = block_sum(q, sh) / (scalar_t)cols;
    scalar_t rstd = (scalar_t)1 / sqrt(var + eps);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t v = (xr[j] - mean) * rstd;
        if (has_w) v *= w[j];
        if (has_b) v += b[j];
        yr[j] = v;
    }
    if (threadIdx.x == 0) { mean_out[blockIdx.x] = mean; rstd_out[blockIdx.x] = rstd; }
}
""",
    "layer_norm_bwd": r"""
extern "C" __global__ void layer_norm_bwd(const scalar_t* __restrict__ g, const scalar_t* __restrict__ x,
                                          const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                          const scalar_t* __restrict__ rstd, scalar_t* __restrict__ dx,
                                          scalar_t* __restrict__ gxhat, long long cols, int has_w) {
    // gxhat (when not null): g * xhat per element, the summands of dweight (summed over rows by cuBLAS)
    __shared__ scalar_t sh[32];
    long long off = (long long)blockIdx.x * cols;
    const scalar_t* gr = g + off; const scalar_t* xr = x + off; scalar_t* dr = dx + off;
    scalar_t mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    scalar_t a = 0, b = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t dxh = has_w ? gr[j] * w[j] : gr[j];
        a += dxh;
        b += dxh * (xr[j] - mu) * rs;
    }
    a = block_sum(a, sh) / (scalar_t)cols;
    b = block_sum(b, sh) / (scalar_t)cols;
    scalar_t* gh = gxhat ? gxhat + off : gxhat;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t dxh = has_w ? gr[j] * w[j] : gr[j];
        scalar_t xh = (xr[j] - mu) * rs;
        dr[j] = rs * (dxh - a - xh * b);
        if (gh) gh[j] = gr[j] * xh;
    }
}
""",
    "cross_entropy_fwd": r"""
extern "C" __global__ void cross_entropy_fwd(const scalar_t* __restrict__ logits, const long long* __restrict__ target,
                                             scalar_t* __restrict__ loss, scalar_t* __restrict__ lse_out,
                                             long long cols, long long ignore_index) {
    __shared__ scalar_t sh[32];
    const scalar_t* xr = logits + (long long)blockIdx.x * cols;
    scalar_t m = NEG_INF;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) m = fmax(m, xr[j]);
    m = block_max(m, sh);
    scalar_t s = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += exp(xr[j] - m);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        scalar_t lse = m + log(s);
        long long t = target[blockIdx.x];
        scalar_t l;
        if (t == ignore_index) l = 0;
        else if (t < 0 || t >= cols) l = (scalar_t)__int_as_float(0x7fc00000);  // NaN, never read out of bounds
        else l = lse - xr[t];
        loss[blockIdx.x] = l;
        lse_out[blockIdx.x] = lse;
    }
}
""",
    "cross_entropy_bwd": r"""
extern "C" __global__ void cross_entropy_bwd(const scalar_t* __restrict__ g, const scalar_t* __restrict__ logits,
                                             const scalar_t* __restrict__ lse, const long long* __restrict__ target,
                                             scalar_t* __restrict__ dx, long long cols, long long ignore_index,
                                             long long n, long long g_stride) {
    // g_stride 0: one gradient for every row (the mean/sum reductions), read without a broadcast copy
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols, c = i - r * cols;
        long long t = target[r];
        if (t == ignore_index) { dx[i] = 0; continue; }
        scalar_t p = exp(logits[i] - lse[r]);
        dx[i] = g[r * g_stride] * (p - (c == t ? (scalar_t)1 : (scalar_t)0));
    }
}
""",
    "cross_entropy_reduce": r"""
// one block: the sum (or mean over non-ignored rows) of the per-row losses, and the row count
extern "C" __global__ void cross_entropy_reduce(const scalar_t* __restrict__ loss, const long long* __restrict__ target,
                                                scalar_t* __restrict__ out, scalar_t* __restrict__ count,
                                                long long rows, long long ignore_index, int mean) {
    __shared__ scalar_t sh[32];
    scalar_t s = 0, c = 0;
    for (long long i = threadIdx.x; i < rows; i += blockDim.x) {
        s += loss[i];
        c += (target[i] != ignore_index) ? (scalar_t)1 : (scalar_t)0;
    }
    s = block_sum(s, sh);
    c = block_sum(c, sh);
    if (threadIdx.x == 0) { out[0] = mean ? s / c : s; count[0] = c; }
}
""",
    "col_sum": r"""
// column sums of a C-contiguous (rows, cols) matrix: a block of 32 x 32 threads owns 32 columns; each
// thread row walks every 32nd row (coalesced 128-byte loads per warp), then the 32 partial sums of a
// column are added in shared memory in a fixed order (deterministic)
extern "C" __global__ void col_sum(const scalar_t* __restrict__ a, scalar_t* __restrict__ out,
                                   long long rows, long long cols) {
    __shared__ scalar_t sh[32][33];
    long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    scalar_t s = 0;
    if (c < cols)
        for (long long r = threadIdx.y; r < rows; r += 32) s += a[r * cols + c];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        scalar_t t = 0;
        for (int k = 0; k < 32; ++k) t += sh[k][threadIdx.x];
        out[c] = t;
    }
}
""",
    "relu_bwd": r"""
extern "C" __global__ void relu_bwd(const scalar_t* __restrict__ y, const scalar_t* __restrict__ g,
                                    scalar_t* __restrict__ dx, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dx[i] = (y[i] <= (scalar_t)0) ? (scalar_t)0 : g[i];
}
""",
    "embedding_bwd_atomic": r"""
extern "C" __global__ void embedding_bwd_atomic(const scalar_t* __restrict__ g, const long long* __restrict__ idx,
                                                scalar_t* __restrict__ dw, long long dim, long long n,
                                                long long padding_idx) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i / dim, c = i - r * dim;
        long long k = idx[r];
        if (k != padding_idx) atomicAdd(&dw[k * dim + c], g[i]);
    }
}
""",
    "embedding_bwd_sorted": r"""
// one thread per (distinct index, column): sums that index's rows in a fixed (stable-sorted) order
extern "C" __global__ void embedding_bwd_sorted(const scalar_t* __restrict__ g, const long long* __restrict__ order,
                                                const long long* __restrict__ seg_start,
                                                const long long* __restrict__ sorted_idx, scalar_t* __restrict__ dw,
                                                long long nseg, long long dim, long long nrows,
                                                long long padding_idx) {
    long long n = nseg * dim;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long s = i / dim, c = i - s * dim;
        long long start = seg_start[s], end = (s + 1 < nseg) ? seg_start[s + 1] : nrows;
        long long k = sorted_idx[start];
        if (k == padding_idx) continue;
        scalar_t acc = 0;
        for (long long p = start; p < end; ++p) acc += g[order[p] * dim + c];
        dw[k * dim + c] = acc;
    }
}
""",
    "adam_multi": r"""
// multi-tensor Adam/AdamW: one launch for a whole parameter group. Each block owns one
// (tensor, chunk) pair of the chunk table; pointers travel as 64-bit integers.
extern "C" __global__ void adam_multi(const unsigned long long* __restrict__ p_ptr,
                                      const unsigned long long* __restrict__ g_ptr,
                                      const unsigned long long* __restrict__ m_ptr,
                                      const unsigned long long* __restrict__ v_ptr,
                                      const long long* __restrict__ sizes, const int* __restrict__ chunk_tensor,
                                      const long long* __restrict__ chunk_start, long long chunk,
                                      scalar_t lr, scalar_t b1, scalar_t b2, scalar_t eps, scalar_t wd,
                                      scalar_t bc1, scalar_t bc2_sqrt, int decoupled, int maximize) {
    int t = chunk_tensor[blockIdx.x];
    long long start = chunk_start[blockIdx.x];
    long long end = start + chunk;
    if (end > sizes[t]) end = sizes[t];
    scalar_t* p = (scalar_t*)p_ptr[t];
    const scalar_t* g = (const scalar_t*)g_ptr[t];
    scalar_t* m = (scalar_t*)m_ptr[t];
    scalar_t* v = (scalar_t*)v_ptr[t];
    scalar_t step_size = lr / bc1;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        scalar_t gi = maximize ? -g[i] : g[i];
        scalar_t pi = p[i];
        if (wd != (scalar_t)0) {
            if (decoupled) pi *= (scalar_t)1 - lr * wd;
            else gi += wd * pi;
        }
        scalar_t mi = b1 * m[i] + ((scalar_t)1 - b1) * gi;
        scalar_t vi = b2 * v[i] + ((scalar_t)1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrt(vi) / bc2_sqrt + eps);
    }
}
""",
    "bias_act_fwd": r"""
extern "C" __global__ void bias_act_fwd(const scalar_t* __restrict__ x, const scalar_t* __restrict__ bias,
                                        scalar_t* __restrict__ y, long long ncol, long long n, int has_bias,
                                        int act) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        scalar_t z = has_bias ? x[i] + bias[i % ncol] : x[i];
        scalar_t r;
        if (act == 1) r = (z != z) ? z : (z > (scalar_t)0 ? z : (scalar_t)0);
        else if (act == 2) r = (scalar_t)0.5 * z * ((scalar_t)1 + erf(z * (scalar_t)0.7071067811865476));
        else if (act == 3) r = (scalar_t)0.5 * z * ((scalar_t)1 + tanh((scalar_t)0.7978845608028654
                                                         * (z + (scalar_t)0.044715 * z * z * z)));
        else r = z;
        y[i] = r;
    }
}
""",
    "bias_act_bwd": r"""
extern "C" __global__ void bias_act_bwd(const scalar_t* __restrict__ g, const scalar_t* __restrict__ x,
                                        const scalar_t* __restrict__ bias, scalar_t* __restrict__ dz,
                                        long long ncol, long long n, int has_bias, int act) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        scalar_t z = has_bias ? x[i] + bias[i % ncol] : x[i];
        scalar_t d;
        if (act == 1) d = z > (scalar_t)0 ? (scalar_t)1 : (scalar_t)0;
        else if (act == 2) {
            scalar_t cdf = (scalar_t)0.5 * ((scalar_t)1 + erf(z * (scalar_t)0.7071067811865476));
            d = cdf + z * exp((scalar_t)-0.5 * z * z) * (scalar_t)0.3989422804014327;
        } else if (act == 3) {
            scalar_t k = (scalar_t)0.7978845608028654;
            scalar_t t = tanh(k * (z + (scalar_t)0.044715 * z * z * z));
            d = (scalar_t)0.5 * ((scalar_t)1 + t)
                + (scalar_t)0.5 * z * ((scalar_t)1 - t * t) * k * ((scalar_t)1 + (scalar_t)0.134145 * z * z);
        } else d = (scalar_t)1;
        dz[i] = g[i] * d;
    }
}
""",
    # element-wise binary op on 16-byte vectors: float4 loads/stores, one vector per thread.
    # CuPy's generic ufunc loop moves 4 bytes per load; this is the bandwidth fix (see docs).
    "vec_binary_f32": r"""
extern "C" __global__ void vec_binary_f32(const float4* __restrict__ a, const float4* __restrict__ b,
                                          float4* __restrict__ c, long long n4, int op) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 x = a[i], y = b[i], r;
    if (op == 0) { r.x = x.x * y.x; r.y = x.y * y.y; r.z = x.z * y.z; r.w = x.w * y.w; }
    else if (op == 1) { r.x = x.x + y.x; r.y = x.y + y.y; r.z = x.z + y.z; r.w = x.w + y.w; }
    else if (op == 2) { r.x = x.x - y.x; r.y = x.y - y.y; r.z = x.z - y.z; r.w = x.w - y.w; }
    else { r.x = x.x / y.x; r.y = x.y / y.y; r.z = x.z / y.z; r.w = x.w / y.w; }
    c[i] = r;
}
""",
}

_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_cache: dict = {}


def get_kernel(name: str, dtype=np.float32):
    """The compiled ``RawKernel`` ``name`` for ``dtype`` (float32/float64) on the current device."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (name, dtype, dev)
    k = _cache.get(key)
    if k is None:
        dt = np.dtype(dtype)
        if name == "vec_binary_f32":
            src = _SOURCES[name]
        else:
            src = (_COMMON + _SOURCES[name]).replace("scalar_t", _CTYPE[dt])
        raw = cupy.RawKernel(src, name)
        k = raw
        if _RAW_GET_KERNEL:
            layout = signature_layout(src, name)
            fn = getattr(raw, "kernel", None)  # compiled for the current device
            if layout is not None and fn is not None:
                k = generic_launcher(fn, layout)
        _cache[key] = k
    return k


#: get_kernel returns :func:`generic_launcher` launchers (False: CuPy's RawKernel call), read when built
_RAW_GET_KERNEL = True


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
    0.8 us per argument on the H200 hosts). Calls from another thread than the builder's, or with
    another number of arguments, take CuPy's call.
    """
    import threading

    import cupy
    from cupy.cuda import driver

    nslots = len(layout)
    q = np.zeros(max(nslots, 1), np.uint64)
    s64, d, f32 = q.view(np.int64), q.view(np.float64), q.view(np.float32)
    i32, u32 = q.view(np.int32), q.view(np.uint32)
    base = q.ctypes.data
    slots = np.array([base + 8 * j for j in range(max(nslots, 1))], np.uint64)
    params = slots.ctypes.data
    fptr = fn.ptr
    launch = driver.launchKernel
    current = cupy.cuda.get_current_stream
    nd = cupy.ndarray
    owner = threading.get_ident()
    ident = threading.get_ident
    plan = tuple(enumerate(layout))

    def k(grid, block, args):
        if ident() != owner or len(args) != nslots:
            return fn(grid, block, args)
        for j, ch in plan:
            v = args[j]
            if ch == "p":
                if v.__class__ is nd:
                    q[j] = v.data.ptr
                elif isinstance(v, (int, np.integer)):  # a null (or raw) pointer
                    q[j] = int(v)
                else:
                    return fn(grid, block, args)
            elif ch == "q":
                s64[j] = int(v)
            elif ch == "i":
                i32[2 * j] = int(v)
            elif ch == "d":
                d[j] = float(v)
            elif ch == "f":
                f32[2 * j] = float(v)
            else:
                u32[2 * j] = int(v)
        ng, nb = len(grid), len(block)
        launch(fptr, grid[0], grid[1] if ng > 1 else 1, grid[2] if ng > 2 else 1,
               block[0], block[1] if nb > 1 else 1, block[2] if nb > 2 else 1, 0, current().ptr, params, 0)

    k.buffers = (q, slots)
    k.function = fn
    k.layout = layout
    return k


OPS_VEC = {"multiply": 0, "add": 1, "subtract": 2, "true_divide": 3}


# ---------------------------------------------------------------------------
# low-overhead element-wise launches (``CUDABackend.fast_launch``)
# ---------------------------------------------------------------------------
# One tiny RawKernel per (op, operand kind, dtype): the launch takes only pointers, the scalar
# and ``n``, so the per-call host cost is CuPy's argument packing, not a ufunc's dispatch
# (type resolution, broadcasting, kernel cache lookup). Results must equal CuPy's ufuncs
# bit for bit, so each kernel does what CuPy's loop does:
#
# * float32/float64 compute in their own precision (no fast-math, IEEE division, as NVRTC's
#   defaults for CuPy's own kernels);
# * float16/bfloat16 widen to float32, compute, round once to nearest-even: for + - * / the
#   float32 result rounded once is the correctly rounded half result (24 >= 2*11 + 2 bits),
#   which is also what CuPy's float16 type and PyTorch's half kernels produce;
# * a scalar operand arrives as a double and is rounded to the array's precision in the kernel
#   (the weak-scalar rule: ``float32_array * 0.1`` multiplies by ``float32(0.1)``). Half arrays
#   only take scalars that already have their dtype (exact in double); Python scalars with
#   half arrays go to CuPy (its weak-scalar rounding for half is not re-derived here).
#
# Storage of half types is ``unsigned short``; conversions use PTX ``cvt`` (float16) and bit
# arithmetic (bfloat16), so no CUDA header has to be found by NVRTC.

FAST_BINARY = {"add": "x + y", "subtract": "x - y", "multiply": "x * y", "true_divide": "x / y"}
#: unary functions; transcendental ones only for float32/float64 (see FAST_UNARY_HALF)
FAST_UNARY = {"negative": "-x", "exp": "exp(x)", "log": "log(x)", "tanh": "tanh(x)", "sqrt": "sqrt(x)"}
#: unary functions whose half result is exact from float32 (sign flip): the rest stay on CuPy for half
FAST_UNARY_HALF = frozenset({"negative"})

_FAST_PRELUDE = r"""
__device__ __forceinline__ float h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays (quiet) NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                  // round to nearest even
}
"""

# dtype -> (storage type, compute type, load(v), store(v), scalar(s) from the double argument)
_FAST_TYPES = {
    "float32": ("float", "float", "{}", "{}", "(float)({})"),
    "float64": ("double", "double", "{}", "{}", "{}"),
    "float16": ("unsigned short", "float", "h2f({})", "f2h({})", "(float)({})"),
    "bfloat16": ("unsigned short", "float", "bf2f({})", "f2bf({})", "(float)({})"),
}

#: operand kinds: "aa" array-array, "as" array-scalar, "sa" scalar-array, "u" unary -> (parameters, loads)
_FAST_SIGS = {
    "aa": ("const ST* __restrict__ a, const ST* __restrict__ b", "CT x = {a}; CT y = {b};"),
    "as": ("const ST* __restrict__ a, double s", "CT x = {a}; CT y = {s};"),
    "sa": ("double s, const ST* __restrict__ b", "CT x = {s}; CT y = {b};"),
    "u": ("const ST* __restrict__ a", "CT x = {a};"),
}


def fast_source(op: str, kind: str, dtype_name: str):
    """CUDA source and kernel name of the fast launch ``op`` for ``kind`` and ``dtype_name``; None if not covered."""
    expr = FAST_BINARY.get(op) if kind != "u" else FAST_UNARY.get(op)
    spec = _FAST_TYPES.get(dtype_name)
    if expr is None or spec is None or kind not in _FAST_SIGS:
        return None
    if kind == "u" and dtype_name in ("float16", "bfloat16") and op not in FAST_UNARY_HALF:
        return None
    st, ct, load, store, scal = spec
    params, loads = _FAST_SIGS[kind]
    name = f"pl_fast_{op}_{kind}_{dtype_name}"
    body = loads.replace("CT", ct).format(a=load.format("a[i]"), b=load.format("b[i]"), s=scal.format("s"))
    src = (_FAST_PRELUDE
           + f'extern "C" __global__ void {name}({params.replace("ST", st)}, {st}* __restrict__ c, long long n) {{\n'
           + "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           + f"    if (i < n) {{ {body} c[i] = {store.format(f'({ct})({expr})')}; }}\n}}\n")
    return src, name


def bias_add_source(dtype_name: str, bias_name: str | None = None):
    """CUDA source and kernel name of ``y[i] += b[i % ncol]`` in place: a Linear's bias on its fresh GEMM
    output. ``b`` has ``y``'s dtype or (``bias_name``) float32 under a half ``y``, as autocast's float32
    bias; half types add in float32 and round once. None if not covered."""
    bias_name = bias_name or dtype_name
    spec, bspec = _FAST_TYPES.get(dtype_name), _FAST_TYPES.get(bias_name)
    if spec is None or bspec is None or (bias_name != dtype_name and bias_name != "float32"):
        return None
    st, ct, load, store, _ = spec
    bst, _, bload, _, _ = bspec
    name = f"pl_bias_add_{dtype_name}_{bias_name}"
    src = (_FAST_PRELUDE
           + f'extern "C" __global__ void {name}({st}* __restrict__ y, const {bst}* __restrict__ b, '
           + "long long ncol, long long n) {\n"
           + "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
           + "         i += (long long)gridDim.x * blockDim.x) {\n"
           + f"        {ct} v = ({ct}){load.format('y[i]')} + ({ct}){bload.format('b[i % ncol]')};\n"
           + f"        y[i] = {store.format(f'({ct})v')};\n    }}\n}}\n")
    return src, name


def bias_add_kernel(dtype, bias_dtype=None):
    """The launchable ``k(grid, block, (y, b, ncol, n))`` of :func:`bias_add_source`, or None."""
    name = np.dtype(dtype).name
    bname = np.dtype(bias_dtype).name if bias_dtype is not None else name
    got = bias_add_source(name, bname)
    return None if got is None else _compile(got, ("bias_add", name, bname))


#: the most axes :func:`strided_copy_source` takes
COPY_MAX_NDIM = 6


def strided_copy_source(itemsize: int):
    """CUDA source and name of a copy of any strided array of up to six axes into a C-contiguous one.

    Elements are moved as raw ``itemsize``-byte words (any dtype of that size); the source offset of
    element ``i`` is found from its C-order index, the shape and the byte strides, padded in front
    with length-1 axes of stride 0. The index arithmetic is unrolled over the six axes (so the shape
    stays in registers) and 32-bit when ``n < 2**31`` (64-bit division is several times slower).
    None for other item sizes.
    """
    word = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}.get(itemsize)
    if word is None:
        return None
    nmax = COPY_MAX_NDIM
    name = f"pl_strided_copy_{itemsize}"
    dims = ", ".join(f"long long d{j}" for j in range(nmax))
    strides = ", ".join(f"long long s{j}" for j in range(nmax))

    def body(ix):  # the offset loop for index type ix
        return ("        {ix} rem = ({ix})i; long long off = 0;\n"
                "        #pragma unroll\n"
                f"        for (int d = {nmax - 1}; d >= 0; --d) {{\n"
                f"            if (d < {nmax} - nd) break;\n"
                "            {ix} k = rem % ({ix})dim[d]; rem /= ({ix})dim[d]; off += (long long)k * st[d];\n"
                "        }\n"
                f"        dst[i] = *(const {word}*)(src + off);\n").replace("{ix}", ix)

    src = (f'extern "C" __global__ void {name}(const char* __restrict__ src, {word}* __restrict__ dst, '
           f"long long n, int nd, {dims}, {strides}) {{\n"
           f"    const long long dim[{nmax}] = {{{', '.join(f'd{j}' for j in range(nmax))}}};\n"
           f"    const long long st[{nmax}] = {{{', '.join(f's{j}' for j in range(nmax))}}};\n"
           "    long long step = (long long)gridDim.x * blockDim.x;\n"
           "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (n < 2147483648LL) {\n"
           "        for (; i < n; i += step) {\n" + body("unsigned int") + "        }\n"
           "    } else {\n"
           "        for (; i < n; i += step) {\n" + body("long long") + "        }\n"
           "    }\n}\n")
    return src, name


def strided_copy_kernel(itemsize: int):
    """The launchable ``k(grid, block, args)`` of :func:`strided_copy_source` (a direct launch), or None."""
    got = strided_copy_source(itemsize)
    if got is None:
        return None
    fn = _compile(got, ("strided_copy", itemsize))
    if fn is None or not hasattr(fn, "ptr"):
        return fn
    layout = signature_layout(got[0], got[1])
    return generic_launcher(fn, layout) if _RAW_GET_KERNEL and layout else fn


#: dtype conversions the fast cast covers (source, target). Each is one correctly rounded step:
#: half <-> float32 and half -> float64 are exact or one rounding through float; float64 -> half
#: would round twice through float, so it keeps CuPy's conversion.
CAST_PAIRS = frozenset({("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"),
                        ("bfloat16", "float32"), ("float16", "bfloat16"), ("bfloat16", "float16"),
                        ("float32", "float64"), ("float64", "float32"), ("float16", "float64"),
                        ("bfloat16", "float64")})


def cast_source(src: str, dst: str):
    """CUDA source and kernel name converting a contiguous ``src`` array to ``dst``; None if not covered."""
    if (src, dst) not in CAST_PAIRS:
        return None
    s_st, s_ct, load, _, _ = _FAST_TYPES[src]
    d_st, d_ct, _, store, _ = _FAST_TYPES[dst]
    ct = "double" if "double" in (s_ct, d_ct) else "float"
    name = f"pl_cast_{src}_{dst}"
    src_code = (_FAST_PRELUDE
                + f'extern "C" __global__ void {name}(const {s_st}* __restrict__ a, {d_st}* __restrict__ c, '
                + "long long n) {\n    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                + f"    if (i < n) {{ {ct} x = ({ct}){load.format('a[i]')}; "
                + f"c[i] = {store.format(f'({d_ct})x')}; }}\n}}\n")
    return src_code, name


def cast_kernel(src, dst):
    """The launchable ``k(grid, block, (a, c, n))`` of :func:`cast_source` on the current device, or None."""
    s, d = np.dtype(src).name, np.dtype(dst).name
    got = cast_source(s, d)
    if got is None:
        return None
    return _compile(got, ("cast", s, d))


def _compile(got, key):
    src, name = got
    try:
        import cupy

        raw = cupy.RawKernel(src, name)
        fn = getattr(raw, "kernel", None)  # compiles now; errors surface here, not mid-op
        return raw if fn is None else fn
    except Exception as exc:  # pragma: no cover - depends on the NVRTC build
        fast_kernel_errors[key] = f"{type(exc).__name__}: {exc}"
        return None


#: argument layouts of the kernels :func:`raw_launcher` can launch (p: array pointer, d: double, q: int64)
RAW_LAYOUTS = {"aa": "pppq", "as": "pdpq", "sa": "dppq", "u": "ppq", "cast": "ppq"}


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

    # the argument values, 8 bytes each; the parameter array points at each slot. One closure per
    # layout with its writes spelled out: generic_launcher's loop over the layout costs ~1 us more
    # per call, and these kernels run once per element-wise op
    q = np.zeros(4, np.uint64)
    d = q.view(np.float64)
    base = q.ctypes.data
    slots = np.array([base + 8 * i for i in range(4)], np.uint64)
    params = slots.ctypes.data
    launch = driver.launchKernel
    current = cupy.cuda.get_current_stream
    owner = threading.get_ident()
    ident = threading.get_ident

    if layout == "pdpq":
        def k(grid, block, args):
            if ident() != owner:
                return fn(grid, block, args)
            a, s, c, n = args
            q[0] = a.data.ptr
            d[1] = s
            q[2] = c.data.ptr
            q[3] = n
            launch(fptr, grid[0], 1, 1, block[0], 1, 1, 0, current().ptr, params, 0)
    elif layout == "dppq":
        def k(grid, block, args):
            if ident() != owner:
                return fn(grid, block, args)
            s, b, c, n = args
            d[0] = s
            q[1] = b.data.ptr
            q[2] = c.data.ptr
            q[3] = n
            launch(fptr, grid[0], 1, 1, block[0], 1, 1, 0, current().ptr, params, 0)
    elif layout == "pppq":
        def k(grid, block, args):
            if ident() != owner:
                return fn(grid, block, args)
            a, b, c, n = args
            q[0] = a.data.ptr
            q[1] = b.data.ptr
            q[2] = c.data.ptr
            q[3] = n
            launch(fptr, grid[0], 1, 1, block[0], 1, 1, 0, current().ptr, params, 0)
    else:  # "ppq": (a, c, n)
        def k(grid, block, args):
            if ident() != owner:
                return fn(grid, block, args)
            a, c, n = args
            q[0] = a.data.ptr
            q[1] = c.data.ptr
            q[2] = n
            launch(fptr, grid[0], 1, 1, block[0], 1, 1, 0, current().ptr, params, 0)
    # the buffers live as long as the launcher
    k.buffers = (q, slots)
    k.function = fn
    return k


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


#: (op, kind, dtype name) -> why the fast kernel could not be built (empty when all compiled)
fast_kernel_errors: dict = {}
