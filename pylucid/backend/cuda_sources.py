"""CUDA C sources of the CUDA backend's kernels (strings only: nothing here compiles or imports CuPy).

Two families:

* **Fused kernels** (:data:`KERNELS`): row-wise softmax, layer norm and cross-entropy, per-channel
  batch norm (forward and backward), column
  sums, the relu and embedding backwards, multi-tensor Adam and SGD, bias + activation and the 16-byte
  vectorised binary op. Each is written once over ``scalar_t``; :func:`kernel_source` puts the
  shared block reductions in front and makes it float or double. Their semantics are the
  functions of :mod:`pylucid.backend.reference`.
* **Generated one-line kernels** for the low-overhead paths: element-wise arithmetic
  (:func:`fast_source`), Linear's bias (:func:`bias_add_source`), strided-to-contiguous copies
  (:func:`strided_copy_source`) and dtype casts (:func:`cast_source`), each built per dtype.

:mod:`pylucid.backend.cuda_launch` compiles them and launches them.

Every row-wise kernel runs one thread block per row over a C-contiguous ``(rows, cols)`` view,
with warp-shuffle block reductions; the reduction order is fixed, so they are deterministic. The
atomic embedding backward is not (``embedding_bwd_sorted`` is its deterministic form).
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------
# fused kernels (``scalar_t`` is replaced by float or double at compile time)
# ---------------------------------------------------------------------------

#: warp and block reductions every fused kernel may use (``blockDim.x`` a multiple of 32)
REDUCTIONS = r"""
#define NEG_INF ((scalar_t)__int_as_float(0xff800000))
struct SumOp { __device__ __forceinline__ scalar_t operator()(scalar_t a, scalar_t b) const { return a + b; } };
struct MaxOp { __device__ __forceinline__ scalar_t operator()(scalar_t a, scalar_t b) const { return fmax(a, b); } };
template <class Op> __device__ __forceinline__ scalar_t warp_reduce(scalar_t v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
// block-wide reduction in a fixed order; blockDim.x is a multiple of 32, result broadcast to all threads
template <class Op> __device__ scalar_t block_reduce(scalar_t v, scalar_t* sh, scalar_t identity, Op op) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_reduce(v, op);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = (lane < nw) ? sh[lane] : identity;
        v = warp_reduce(v, op);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
__device__ scalar_t block_sum(scalar_t v, scalar_t* sh) { return block_reduce(v, sh, (scalar_t)0, SumOp()); }
__device__ scalar_t block_max(scalar_t v, scalar_t* sh) { return block_reduce(v, sh, NEG_INF, MaxOp()); }
"""

#: fused kernels by name, written over ``scalar_t`` (see :func:`kernel_source`)
KERNELS = {
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
// x in io_t, y in ot_t (io_t, or float32 for a half x under autocast's float32 policy); statistics in scalar_t;
// y2 (not null): y rounded to io_t as well (as bias_act_fwd's)
extern "C" __global__ void layer_norm_fwd(const io_t* __restrict__ x, const scalar_t* __restrict__ w,
                                          const scalar_t* __restrict__ b, ot_t* __restrict__ y,
                                          io_t* __restrict__ y2,
                                          scalar_t* __restrict__ mean_out, scalar_t* __restrict__ rstd_out,
                                          long long cols, scalar_t eps, int has_w, int has_b) {
    __shared__ scalar_t sh[32];
    const io_t* xr = x + (long long)blockIdx.x * cols;
    ot_t* yr = y + (long long)blockIdx.x * cols;
    io_t* y2r = y2 ? y2 + (long long)blockIdx.x * cols : y2;
    // two passes over the row (mean, then centred second moment): no cancellation
    scalar_t s = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += LD(xr[j]);
    scalar_t mean = block_sum(s, sh) / (scalar_t)cols;
    scalar_t q = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) { scalar_t d = LD(xr[j]) - mean; q += d * d; }
    scalar_t var = block_sum(q, sh) / (scalar_t)cols;
    scalar_t rstd = (scalar_t)1 / sqrt(var + eps);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t v = (LD(xr[j]) - mean) * rstd;
        if (has_w) v *= w[j];
        if (has_b) v += b[j];
        yr[j] = STO(v);
        if (y2r) y2r[j] = ST(v);
    }
    if (threadIdx.x == 0) { mean_out[blockIdx.x] = mean; rstd_out[blockIdx.x] = rstd; }
}
""",
    "layer_norm_bwd": r"""
// g in gt_t (io_t, or the float32 gradient of autocast's float32 result), x and dx in io_t
extern "C" __global__ void layer_norm_bwd(const gt_t* __restrict__ g, const io_t* __restrict__ x,
                                          const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                          const scalar_t* __restrict__ rstd, io_t* __restrict__ dx,
                                          scalar_t* __restrict__ gxhat, long long cols, int has_w) {
    // gxhat (when not null): g * xhat per element, the summands of dweight (summed over rows by cuBLAS)
    __shared__ scalar_t sh[32];
    long long off = (long long)blockIdx.x * cols;
    const gt_t* gr = g + off; const io_t* xr = x + off; io_t* dr = dx + off;
    scalar_t mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    scalar_t a = 0, b = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t dxh = has_w ? LDG(gr[j]) * w[j] : LDG(gr[j]);
        a += dxh;
        b += dxh * (LD(xr[j]) - mu) * rs;
    }
    a = block_sum(a, sh) / (scalar_t)cols;
    b = block_sum(b, sh) / (scalar_t)cols;
    scalar_t* gh = gxhat ? gxhat + off : gxhat;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        scalar_t gj = LDG(gr[j]);
        scalar_t dxh = has_w ? gj * w[j] : gj;
        scalar_t xh = (LD(xr[j]) - mu) * rs;
        dr[j] = ST(rs * (dxh - a - xh * b));
        if (gh) gh[j] = gj * xh;
    }
}
""",
    "layer_norm_fwd_rows": r"""
// layer norm of rows of at most a few thousand values: one warp per row (8 rows per block of 256 threads), the
// two reductions (mean, then the centred second moment: no cancellation) as warp shuffles, no block barriers;
// x in io_t, y in ot_t, y2 (as layer_norm_fwd)
extern "C" __global__ void layer_norm_fwd_rows(const io_t* __restrict__ x, const scalar_t* __restrict__ w,
                                               const scalar_t* __restrict__ b, ot_t* __restrict__ y,
                                               io_t* __restrict__ y2,
                                               scalar_t* __restrict__ mean_out, scalar_t* __restrict__ rstd_out,
                                               long long rows, long long cols, scalar_t eps, int has_w,
                                               int has_b) {
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;  // the whole warp: the shuffles below see all 32 lanes
    const io_t* xr = x + row * cols;
    ot_t* yr = y + row * cols;
    io_t* y2r = y2 ? y2 + row * cols : y2;
    scalar_t s = 0;
    for (long long j = lane; j < cols; j += 32) s += LD(xr[j]);
    scalar_t mean = warp_reduce(s, SumOp()) / (scalar_t)cols;
    scalar_t q = 0;
    for (long long j = lane; j < cols; j += 32) { scalar_t d = LD(xr[j]) - mean; q += d * d; }
    scalar_t rstd = (scalar_t)1 / sqrt(warp_reduce(q, SumOp()) / (scalar_t)cols + eps);
    for (long long j = lane; j < cols; j += 32) {
        scalar_t v = (LD(xr[j]) - mean) * rstd;
        if (has_w) v *= w[j];
        if (has_b) v += b[j];
        yr[j] = STO(v);
        if (y2r) y2r[j] = ST(v);
    }
    if (lane == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }
}
""",
    "layer_norm_bwd_rows": r"""
// dx of layer norm, one warp per row (4 warps per block, each block owning rows r0 .. r0 + rows_per_block), and
// (part not null) the block's partial sums of g * xhat (dweight) and g (dbias) over its rows: part is
// (gridDim.x, 2, cols); every warp accumulates its rows in its own shared slice (a lane owns fixed columns: no
// atomics), the slices are added in a fixed order, so the sums are deterministic. cols <= LN_ACC / 8.
// g in gt_t, x and dx in io_t (as layer_norm_bwd); res (when not null, io_t): a gradient x already has, added
// to dx in float32 before the one rounding (a residual stream's, instead of a separate add kernel)
#define LN_ACC (32768 / sizeof(scalar_t))
extern "C" __global__ void layer_norm_bwd_rows(const gt_t* __restrict__ g, const io_t* __restrict__ x,
                                               const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                               const scalar_t* __restrict__ rstd, io_t* __restrict__ dx,
                                               const io_t* __restrict__ res, scalar_t* __restrict__ part, long long rows, long long cols,
                                               long long rows_per_block, int has_w) {
    __shared__ scalar_t acc[LN_ACC];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    scalar_t* mine = acc + (long long)wid * 2 * cols;
    if (part)
        for (long long j = lane; j < 2 * cols; j += 32) mine[j] = 0;
    long long r0 = (long long)blockIdx.x * rows_per_block;
    long long r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
    for (long long row = r0 + wid; row < r1; row += nw) {
        long long off = row * cols;
        const gt_t* gr = g + off; const io_t* xr = x + off; io_t* dr = dx + off;
        scalar_t mu = mean[row], rs = rstd[row];
        scalar_t a = 0, bb = 0;
        for (long long j = lane; j < cols; j += 32) {
            scalar_t dxh = has_w ? LDG(gr[j]) * w[j] : LDG(gr[j]);
            a += dxh;
            bb += dxh * (LD(xr[j]) - mu) * rs;
        }
        a = warp_reduce(a, SumOp()) / (scalar_t)cols;
        bb = warp_reduce(bb, SumOp()) / (scalar_t)cols;
        for (long long j = lane; j < cols; j += 32) {
            scalar_t gj = LDG(gr[j]);
            scalar_t dxh = has_w ? gj * w[j] : gj;
            scalar_t xh = (LD(xr[j]) - mu) * rs;
            scalar_t d = rs * (dxh - a - xh * bb);
            if (res) d += LD(res[off + j]);
            dr[j] = ST(d);
            if (part) { mine[j] += gj * xh; mine[cols + j] += gj; }
        }
    }
    if (!part) return;
    __syncthreads();
    for (long long j = threadIdx.x; j < 2 * cols; j += blockDim.x) {
        scalar_t t = 0;
        for (int k = 0; k < nw; ++k) t += acc[(long long)k * 2 * cols + j];
        part[(long long)blockIdx.x * 2 * cols + j] = t;
    }
}
""",
    "layer_norm_bwd_words": r"""
// layer_norm_bwd_rows for rows of whole 16-byte words of x (cols % IO_VEC == 0, cols <= 32 * IO_VEC * LN_WORDS, all
// pointers 16-byte aligned): a lane owns the same LN_WORDS words of every row, so it loads a row's g and x once
// into registers (16-byte loads), keeps its columns of w, and adds g * xhat and g of its rows into register
// accumulators; the block's warps then add theirs in a fixed order (deterministic, no atomics). A lane holds at
// most 32 values of each (LN_WORDS words of IO_VEC). g in gt_t, x and dx in io_t, res (as layer_norm_bwd_rows)
#define LN_WORDS (32 / IO_VEC < 8 ? 32 / IO_VEC : 8)
#define LN_ACC_W (32768 / sizeof(scalar_t))
#define W_WORDS (IO_VEC * sizeof(scalar_t) / 16)
union LnWWord { uint4 u[W_WORDS]; scalar_t e[IO_VEC]; };
extern "C" __global__ void layer_norm_bwd_words(const gt_t* __restrict__ g, const io_t* __restrict__ x,
                                                const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                                const scalar_t* __restrict__ rstd, io_t* __restrict__ dx,
                                                const io_t* __restrict__ res, scalar_t* __restrict__ part, long long rows, long long cols,
                                                long long rows_per_block, int has_w) {
    __shared__ scalar_t acc[LN_ACC_W];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    long long nwords = cols / IO_VEC;
    scalar_t wv[LN_WORDS][IO_VEC], aw[LN_WORDS][IO_VEC], ab[LN_WORDS][IO_VEC];
    #pragma unroll
    for (int k = 0; k < LN_WORDS; ++k) {
        long long j = (long long)k * 32 + lane;
        LnWWord t;
        if (has_w && j < nwords) {
            #pragma unroll
            for (int q = 0; q < W_WORDS; ++q) t.u[q] = ((const uint4*)w)[j * W_WORDS + q];
        }
        #pragma unroll
        for (int e = 0; e < IO_VEC; ++e) {
            wv[k][e] = has_w && j < nwords ? t.e[e] : (scalar_t)1;
            aw[k][e] = 0;
            ab[k][e] = 0;
        }
    }
    long long r0 = (long long)blockIdx.x * rows_per_block;
    long long r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
    for (long long row = r0 + wid; row < r1; row += nw) {
        const uint4* gr = (const uint4*)(g + row * cols);
        const uint4* xr = (const uint4*)(x + row * cols);
        uint4* dr = (uint4*)(dx + row * cols);
        const uint4* rr = res ? (const uint4*)(res + row * cols) : nullptr;
        scalar_t mu = mean[row], rs = rstd[row];
        GtWord gw[LN_WORDS];
        IoWord xw[LN_WORDS];
        scalar_t a = 0, bb = 0;
        #pragma unroll
        for (int k = 0; k < LN_WORDS; ++k) {
            long long j = (long long)k * 32 + lane;
            if (j < nwords) {
                #pragma unroll
                for (int q = 0; q < GT_WORDS; ++q) gw[k].u[q] = gr[j * GT_WORDS + q];
                xw[k].u = xr[j];
                #pragma unroll
                for (int e = 0; e < IO_VEC; ++e) {
                    scalar_t dxh = LDG(gw[k].e[e]) * wv[k][e];
                    a += dxh;
                    bb += dxh * (LD(xw[k].e[e]) - mu) * rs;
                }
            }
        }
        a = warp_reduce(a, SumOp()) / (scalar_t)cols;
        bb = warp_reduce(bb, SumOp()) / (scalar_t)cols;
        #pragma unroll
        for (int k = 0; k < LN_WORDS; ++k) {
            long long j = (long long)k * 32 + lane;
            if (j < nwords) {
                IoWord o, r;
                if (rr) r.u = rr[j];
                #pragma unroll
                for (int e = 0; e < IO_VEC; ++e) {
                    scalar_t gj = LDG(gw[k].e[e]);
                    scalar_t xh = (LD(xw[k].e[e]) - mu) * rs;
                    scalar_t d = rs * (gj * wv[k][e] - a - xh * bb);
                    if (rr) d += LD(r.e[e]);
                    o.e[e] = ST(d);
                    aw[k][e] += gj * xh;
                    ab[k][e] += gj;
                }
                dr[j] = o.u;
            }
        }
    }
    if (!part) return;
    scalar_t* mine = acc + (long long)wid * 2 * cols;
    #pragma unroll
    for (int k = 0; k < LN_WORDS; ++k) {
        long long j = (long long)k * 32 + lane;
        if (j < nwords) {
            #pragma unroll
            for (int e = 0; e < IO_VEC; ++e) {
                mine[j * IO_VEC + e] = aw[k][e];
                mine[cols + j * IO_VEC + e] = ab[k][e];
            }
        }
    }
    __syncthreads();
    for (long long j = threadIdx.x; j < 2 * cols; j += blockDim.x) {
        scalar_t t = 0;
        for (int k = 0; k < nw; ++k) t += acc[(long long)k * 2 * cols + j];
        part[(long long)blockIdx.x * 2 * cols + j] = t;
    }
}
""",
    "batch_norm_fwd": r"""
extern "C" __global__ void batch_norm_fwd(const io_t* __restrict__ x, const scalar_t* __restrict__ w,
                                          const scalar_t* __restrict__ b, scalar_t* __restrict__ mean_io,
                                          scalar_t* __restrict__ var_io, io_t* __restrict__ y,
                                          scalar_t* __restrict__ run_mean, scalar_t* __restrict__ run_var,
                                          int n, int c, int s, scalar_t eps, scalar_t momentum, int training,
                                          int has_w, int has_b) {
    // one block per channel of a contiguous (n, c, s) view; x and y in the storage type io_t (LD/ST convert
    // to and from scalar_t: half inputs are read and written directly, computed in float). training: two
    // passes (mean, then the centred second moment: no cancellation) write the batch mean and biased
    // variance to mean_io / var_io; else those hold the running statistics. Then (when y is not null)
    // y = (x - mean) * rstd * w + b.
    __shared__ scalar_t sh[32];
    const int ch = blockIdx.x;
    const unsigned int total = (unsigned int)n * (unsigned int)s;
    scalar_t mean, var;
    if (training) {
        scalar_t acc = 0;
        for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
            unsigned int k = i / s;
            acc += LD(x[((long long)k * c + ch) * s + (i - k * s)]);
        }
        mean = block_sum(acc, sh) / (scalar_t)total;
        acc = 0;
        for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
            unsigned int k = i / s;
            scalar_t d = LD(x[((long long)k * c + ch) * s + (i - k * s)]) - mean;
            acc += d * d;
        }
        var = block_sum(acc, sh) / (scalar_t)total;
        if (threadIdx.x == 0) {
            mean_io[ch] = mean;
            var_io[ch] = var;
            // the running statistics (when given): the unbiased variance, as the array update
            if (run_mean) run_mean[ch] = run_mean[ch] * ((scalar_t)1 - momentum) + mean * momentum;
            if (run_var) run_var[ch] = run_var[ch] * ((scalar_t)1 - momentum)
                                       + var * ((scalar_t)total / (scalar_t)(total - 1)) * momentum;
        }
    } else {
        mean = mean_io[ch];
        var = var_io[ch];
    }
    if (!y) return;
    scalar_t scale = (scalar_t)1 / sqrt(var + eps);
    if (has_w) scale *= w[ch];
    scalar_t shift = has_b ? b[ch] : (scalar_t)0;
    for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        y[at] = ST((LD(x[at]) - mean) * scale + shift);
    }
}
""",
    "batch_norm_bwd": r"""
extern "C" __global__ void batch_norm_bwd(const io_t* __restrict__ g, const io_t* __restrict__ x,
                                          const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                          const scalar_t* __restrict__ var, io_t* __restrict__ dx,
                                          scalar_t* __restrict__ dw, scalar_t* __restrict__ db,
                                          int n, int c, int s, scalar_t eps, int training, int has_w) {
    // one block per channel: db = sum(g), dw = sum(g xhat) with xhat = (x - mean) rstd; then (dx not null)
    // training: dx = w rstd (g - db / m - xhat dw / m) over the m = n s values of the channel; eval: w rstd g
    __shared__ scalar_t sh[32];
    const int ch = blockIdx.x;
    const unsigned int total = (unsigned int)n * (unsigned int)s;
    const scalar_t mu = mean[ch], rs = (scalar_t)1 / sqrt(var[ch] + eps);
    scalar_t sg = 0, sgx = 0;
    for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        scalar_t gi = LD(g[at]);
        sg += gi;
        sgx += gi * (LD(x[at]) - mu);
    }
    sg = block_sum(sg, sh);
    sgx = block_sum(sgx, sh) * rs;
    if (threadIdx.x == 0) { db[ch] = sg; dw[ch] = sgx; }
    if (!dx) return;
    const scalar_t k1 = (has_w ? w[ch] : (scalar_t)1) * rs;
    const scalar_t m1 = training ? sg / (scalar_t)total : (scalar_t)0;
    const scalar_t m2 = training ? sgx / (scalar_t)total : (scalar_t)0;
    for (unsigned int i = threadIdx.x; i < total; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        dx[at] = ST(k1 * (LD(g[at]) - m1 - (LD(x[at]) - mu) * rs * m2));
    }
}
""",
    "bn_part_stats": r"""
// batch norm over many blocks per channel, step 1 (training forward): block (ch, p) of a (c, P) grid takes the
// p-th of P equal ranges of channel ch's m = n s values of a contiguous (n, c, s) view and writes its mean and
// centred second moment (two passes over its range, which the second reads from cache) to pmean/pm2[ch P + p]
extern "C" __global__ void bn_part_stats(const io_t* __restrict__ x, scalar_t* __restrict__ pmean,
                                         scalar_t* __restrict__ pm2, int c, int s, unsigned int total) {
    __shared__ scalar_t sh[32];
    const int ch = blockIdx.x, p = blockIdx.y, P = gridDim.y;
    const unsigned int chunk = (total + P - 1) / P, lo = p * chunk, hi = min(total, lo + chunk);
    scalar_t acc = 0;
    for (unsigned int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        unsigned int k = i / s;
        acc += LD(x[((long long)k * c + ch) * s + (i - k * s)]);
    }
    const scalar_t cnt = (scalar_t)(hi > lo ? hi - lo : 0);
    const scalar_t tot = block_sum(acc, sh);
    const scalar_t mean = cnt > 0 ? tot / cnt : (scalar_t)0;
    acc = 0;
    for (unsigned int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        unsigned int k = i / s;
        scalar_t d = LD(x[((long long)k * c + ch) * s + (i - k * s)]) - mean;
        acc += d * d;
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) { pmean[ch * P + p] = mean; pm2[ch * P + p] = acc; }
}
""",
    "bn_part_apply": r"""
// step 2: every block of channel ch combines the P partials of step 1 in the same fixed order (Chan et al.:
// exact and deterministic), block 0 writes the batch mean and biased variance (and updates the running
// statistics, unbiased variance), and each block normalises its own range: y = (x - mean) rstd w + b
extern "C" __global__ void bn_part_apply(const io_t* __restrict__ x, const scalar_t* __restrict__ w,
                                         const scalar_t* __restrict__ b, const scalar_t* __restrict__ pmean,
                                         const scalar_t* __restrict__ pm2, scalar_t* __restrict__ mean_out,
                                         scalar_t* __restrict__ var_out, io_t* __restrict__ y,
                                         scalar_t* __restrict__ run_mean, scalar_t* __restrict__ run_var,
                                         int c, int s, unsigned int total, scalar_t eps, scalar_t momentum,
                                         int has_w, int has_b) {
    const int ch = blockIdx.x, p = blockIdx.y, P = gridDim.y;
    const unsigned int chunk = (total + P - 1) / P;
    scalar_t n_a = 0, mean = 0, m2 = 0;
    for (int q = 0; q < P; ++q) {
        unsigned int qlo = q * chunk, qhi = min(total, qlo + chunk);
        if (qhi <= qlo) break;
        scalar_t n_b = (scalar_t)(qhi - qlo), mb = pmean[ch * P + q];
        scalar_t n_ab = n_a + n_b, d = mb - mean;
        mean += d * (n_b / n_ab);
        m2 += pm2[ch * P + q] + d * d * (n_a * n_b / n_ab);
        n_a = n_ab;
    }
    const scalar_t var = m2 / (scalar_t)total;
    if (p == 0 && threadIdx.x == 0) {
        mean_out[ch] = mean;
        var_out[ch] = var;
        if (run_mean) run_mean[ch] = run_mean[ch] * ((scalar_t)1 - momentum) + mean * momentum;
        if (run_var) run_var[ch] = run_var[ch] * ((scalar_t)1 - momentum)
                                   + var * ((scalar_t)total / (scalar_t)(total - 1)) * momentum;
    }
    scalar_t scale = (scalar_t)1 / sqrt(var + eps);
    if (has_w) scale *= w[ch];
    const scalar_t shift = has_b ? b[ch] : (scalar_t)0;
    const unsigned int lo = p * chunk, hi = min(total, lo + chunk);
    for (unsigned int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        y[at] = ST((LD(x[at]) - mean) * scale + shift);
    }
}
""",
    "bn_part_grad_sums": r"""
// batch norm backward over many blocks per channel, step 1: block (ch, p) writes the partial sums of g and of
// g (x - mean) over its range
extern "C" __global__ void bn_part_grad_sums(const io_t* __restrict__ g, const io_t* __restrict__ x,
                                             const scalar_t* __restrict__ mean, scalar_t* __restrict__ psg,
                                             scalar_t* __restrict__ psgx, int c, int s, unsigned int total) {
    __shared__ scalar_t sh[32];
    const int ch = blockIdx.x, p = blockIdx.y, P = gridDim.y;
    const unsigned int chunk = (total + P - 1) / P, lo = p * chunk, hi = min(total, lo + chunk);
    const scalar_t mu = mean[ch];
    scalar_t sg = 0, sgx = 0;
    for (unsigned int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        scalar_t gi = LD(g[at]);
        sg += gi;
        sgx += gi * (LD(x[at]) - mu);
    }
    sg = block_sum(sg, sh);
    sgx = block_sum(sgx, sh);
    if (threadIdx.x == 0) { psg[ch * P + p] = sg; psgx[ch * P + p] = sgx; }
}
""",
    "bn_part_grad_apply": r"""
// step 2 (training): the partial sums added in a fixed order; block 0 writes db = sum g and dw = rstd sum g (x -
// mean); each block writes dx = w rstd (g - db / m - xhat dw / m) over its range (dx null: the sums only)
extern "C" __global__ void bn_part_grad_apply(const io_t* __restrict__ g, const io_t* __restrict__ x,
                                              const scalar_t* __restrict__ w, const scalar_t* __restrict__ mean,
                                              const scalar_t* __restrict__ var, const scalar_t* __restrict__ psg,
                                              const scalar_t* __restrict__ psgx, io_t* __restrict__ dx,
                                              scalar_t* __restrict__ dw, scalar_t* __restrict__ db, int c, int s,
                                              unsigned int total, scalar_t eps, int has_w) {
    const int ch = blockIdx.x, p = blockIdx.y, P = gridDim.y;
    const scalar_t mu = mean[ch], rs = (scalar_t)1 / sqrt(var[ch] + eps);
    scalar_t sg = 0, sgx = 0;
    for (int q = 0; q < P; ++q) { sg += psg[ch * P + q]; sgx += psgx[ch * P + q]; }
    sgx *= rs;
    if (p == 0 && threadIdx.x == 0) { db[ch] = sg; dw[ch] = sgx; }
    if (!dx) return;
    const scalar_t k1 = (has_w ? w[ch] : (scalar_t)1) * rs;
    const scalar_t m1 = sg / (scalar_t)total, m2 = sgx / (scalar_t)total;
    const unsigned int chunk = (total + P - 1) / P, lo = p * chunk, hi = min(total, lo + chunk);
    for (unsigned int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        unsigned int k = i / s;
        long long at = ((long long)k * c + ch) * s + (i - k * s);
        dx[at] = ST(k1 * (LD(g[at]) - m1 - (LD(x[at]) - mu) * rs * m2));
    }
}
""",
    "cross_entropy_fwd": r"""
// (m, s) -> the pair for max(m, mm): s rescaled by exp(m - mm); m == mm (also both -inf) keeps s as it is
__device__ __forceinline__ scalar_t lse_rescale(scalar_t s, scalar_t m, scalar_t mm) {
    return m == mm ? s : s * exp(m - mm);
}
extern "C" __global__ void cross_entropy_fwd(const io_t* __restrict__ logits, const long long* __restrict__ target,
                                             scalar_t* __restrict__ loss, scalar_t* __restrict__ lse_out,
                                             long long cols, long long ignore_index) {
    // one block per row, ONE pass over the logits (read in their storage type io_t, computed in scalar_t):
    // each thread keeps a running maximum m and the sum s of exp(x - m), rescaled when m grows; the block
    // then combines the (m, s) pairs. An empty partial (m = -inf) contributes nothing. Rows of whole 16-byte
    // words (cols % IO_VEC == 0, aligned) are read a word at a time: the word's maximum first, so s is
    // rescaled at most once per word; a NaN logit makes its exp term, s and the row's loss NaN.
    __shared__ scalar_t shm[32];
    __shared__ scalar_t shs[32];
    const io_t* xr = logits + (long long)blockIdx.x * cols;
    scalar_t m = NEG_INF, s = 0;
    if (cols % IO_VEC == 0 && !((unsigned long long)logits & 15ull)) {
        const uint4* xv = (const uint4*)xr;
        for (long long j = threadIdx.x; j < cols / IO_VEC; j += blockDim.x) {
            IoWord w;
            w.u = xv[j];
            scalar_t v[IO_VEC], mm = m;
            #pragma unroll
            for (int k = 0; k < IO_VEC; ++k) { v[k] = LD(w.e[k]); mm = fmax(mm, v[k]); }
            s = lse_rescale(s, m, mm);
            #pragma unroll
            for (int k = 0; k < IO_VEC; ++k) s += v[k] == mm ? (scalar_t)1 : exp(v[k] - mm);
            m = mm;
        }
    } else {
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            scalar_t x = LD(xr[j]);
            if (x > m) { s = s * exp(m - x) + (scalar_t)1; m = x; }
            else s += exp(x - m);  // x = NaN: s becomes NaN, and so does the row's loss
        }
    }
    // (m, s) combine: m = max, s = s1 exp(m1 - m) + s2 exp(m2 - m)
    for (int o = 16; o > 0; o >>= 1) {
        scalar_t m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
        scalar_t mm = fmax(m, m2);
        s = (m == NEG_INF ? (scalar_t)0 : s * exp(m - mm)) + (m2 == NEG_INF ? (scalar_t)0 : s2 * exp(m2 - mm));
        m = mm;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { shm[wid] = m; shs[wid] = s; }
    __syncthreads();
    if (wid == 0) {
        m = lane < nw ? shm[lane] : NEG_INF;
        s = lane < nw ? shs[lane] : (scalar_t)0;
        for (int o = 16; o > 0; o >>= 1) {
            scalar_t m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
            scalar_t mm = fmax(m, m2);
            s = (m == NEG_INF ? (scalar_t)0 : s * exp(m - mm)) + (m2 == NEG_INF ? (scalar_t)0 : s2 * exp(m2 - mm));
            m = mm;
        }
        if (lane == 0) {
            scalar_t lse = m + log(s);
            long long t = target[blockIdx.x];
            scalar_t l;
            if (t == ignore_index) l = 0;
            else if (t < 0 || t >= cols) l = (scalar_t)__int_as_float(0x7fc00000);  // NaN, never read out of bounds
            else l = lse - LD(xr[t]);
            loss[blockIdx.x] = l;
            lse_out[blockIdx.x] = lse;
        }
    }
}
""",
    "cross_entropy_bwd": r"""
extern "C" __global__ void cross_entropy_bwd(const scalar_t* __restrict__ g, const io_t* __restrict__ logits,
                                             const scalar_t* __restrict__ lse, const long long* __restrict__ target,
                                             io_t* __restrict__ dx, long long cols, long long ignore_index,
                                             long long rows, long long g_stride) {
    // one block per row (grid-stride over rows): no division per element; logits and dx in their storage type,
    // a 16-byte word at a time where rows are whole aligned words (as cross_entropy_fwd).
    // g_stride 0: one gradient for every row (the mean/sum reductions), read without a broadcast copy
    bool words = cols % IO_VEC == 0 && !(((unsigned long long)logits | (unsigned long long)dx) & 15ull);
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const io_t* xr = logits + r * cols;
        io_t* dr = dx + r * cols;
        long long t = target[r];
        scalar_t gr = g[r * g_stride], lr = lse[r];
        bool skip = t == ignore_index;
        if (words) {
            const uint4* xv = (const uint4*)xr;
            uint4* dv = (uint4*)dr;
            for (long long j = threadIdx.x; j < cols / IO_VEC; j += blockDim.x) {
                IoWord w, o;
                if (skip) { o.u = make_uint4(0u, 0u, 0u, 0u); dv[j] = o.u; continue; }  // +0.0 in every type
                w.u = xv[j];
                long long c0 = j * IO_VEC;
                #pragma unroll
                for (int k = 0; k < IO_VEC; ++k) {
                    scalar_t p = exp(LD(w.e[k]) - lr);
                    o.e[k] = ST(gr * (p - (c0 + k == t ? (scalar_t)1 : (scalar_t)0)));
                }
                dv[j] = o.u;
            }
            continue;
        }
        if (skip) {
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) dr[c] = ST((scalar_t)0);
            continue;
        }
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
            scalar_t p = exp(LD(xr[c]) - lr);
            dr[c] = ST(gr * (p - (c == t ? (scalar_t)1 : (scalar_t)0)));
        }
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
// column sums of a (rows, cols) matrix of io_t with row stride ld (elements), accumulated in scalar_t and rounded
// once to ot_t.
// Block (bx, by) of 32 x 8 threads sums rows [by * rows_per, +rows_per) of 32 words of columns (IO_VEC columns per
// lane from 16-byte loads when vec: cols and ld % IO_VEC == 0, 16-byte aligned; one column per lane otherwise): each
// thread row walks every 8th row of the chunk, then the 8 partial sums of a column are added in shared memory in a
// fixed order. With one chunk (gridDim.y == 1) that is the result. With several, each block writes its partials to
// part[by][cols], and the last block of its column group to finish (counted in counters[bx], which it resets to
// 0 for the next call on the stream) adds the chunks' partials in chunk order: enough blocks to fill the GPU however
// few the columns (a bias gradient has 768), one launch, and the same bits on every call (no float atomics).
// The sums of columns from split on go to out2 (column c to out2[c - split]): two results of one launch in
// buffers of their own (a layer norm's weight and bias gradients); split = cols otherwise.
extern "C" __global__ void col_sum(const io_t* __restrict__ a, ot_t* __restrict__ out, ot_t* __restrict__ out2,
                                   scalar_t* part, unsigned int* counters, long long rows, long long cols,
                                   long long ld, long long rows_per, long long split, int vec) {
    __shared__ scalar_t sh[8][32 * IO_VEC + 1];
    __shared__ int last;
    int tx = threadIdx.x, ty = threadIdx.y, width = vec ? IO_VEC : 1;
    long long r0 = (long long)blockIdx.y * rows_per;
    long long r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
    long long c0 = ((long long)blockIdx.x * 32 + tx) * width;
    scalar_t s[IO_VEC];
    #pragma unroll
    for (int e = 0; e < IO_VEC; ++e) s[e] = 0;
    if (c0 < cols) {
        if (vec) {
            #pragma unroll 4
            for (long long r = r0 + ty; r < r1; r += 8) {
                IoWord w;
                w.u = *(const uint4*)(a + r * ld + c0);
                #pragma unroll
                for (int e = 0; e < IO_VEC; ++e) s[e] += LD(w.e[e]);
            }
        } else {
            #pragma unroll 4
            for (long long r = r0 + ty; r < r1; r += 8) s[0] += LD(a[r * ld + c0]);
        }
    }
    for (int e = 0; e < width; ++e) sh[ty][tx * width + e] = s[e];
    __syncthreads();
    int nchunks = gridDim.y;
    if (ty == 0) {
        for (int e = 0; e < width; ++e) {
            if (c0 + e < cols) {
                scalar_t t = 0;
                #pragma unroll
                for (int k = 0; k < 8; ++k) t += sh[k][tx * width + e];
                long long c = c0 + e;
                if (nchunks == 1) (c < split ? out + c : out2 + (c - split))[0] = STO(t);
                else part[(long long)blockIdx.y * cols + c0 + e] = t;
            }
        }
    }
    if (nchunks == 1) return;
    __threadfence();  // this block's partials are visible device-wide before it is counted
    __syncthreads();
    if (tx == 0 && ty == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == (unsigned int)(nchunks - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    int t = ty * 32 + tx;
    long long c = (long long)blockIdx.x * 32 * width + t;
    if (t < 32 * width && c < cols) {
        scalar_t acc = 0;
        #pragma unroll 8
        for (int k = 0; k < nchunks; ++k) acc += __ldcg(part + (long long)k * cols + c);  // L2: other blocks wrote it
        (c < split ? out + c : out2 + (c - split))[0] = STO(acc);
    }
    if (tx == 0 && ty == 0) counters[blockIdx.x] = 0u;
}
""",
    "relu_fwd": r"""
extern "C" __global__ void relu_fwd(const io_t* __restrict__ x, io_t* __restrict__ y, long long n) {
    // max(x, 0) with NaN kept (as NumPy's maximum); the stored bits are copied, never converted back.
    // IO_VEC elements per thread through 16-byte words when both bases are 16-byte aligned (one 2-byte access
    // per thread reaches a fraction of the bandwidth); grid-stride loops, so any grid covers n.
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
    long long nv = (((unsigned long long)x | (unsigned long long)y) & 15ull) ? 0 : n / IO_VEC;
    for (long long w = t; w < nv; w += step) {
        IoWord a, b;
        a.u = ((const uint4*)x)[w];
        #pragma unroll
        for (int k = 0; k < IO_VEC; ++k) {
            scalar_t v = LD(a.e[k]);
            b.e[k] = (v > (scalar_t)0 || v != v) ? a.e[k] : (io_t)0;
        }
        ((uint4*)y)[w] = b.u;
    }
    for (long long i = nv * IO_VEC + t; i < n; i += step) {
        scalar_t v = LD(x[i]);
        y[i] = (v > (scalar_t)0 || v != v) ? x[i] : (io_t)0;
    }
}
""",
    "relu_bwd": r"""
extern "C" __global__ void relu_bwd(const io_t* __restrict__ y, const io_t* __restrict__ g,
                                    io_t* __restrict__ dx, long long n) {
    // g where y > 0 (or NaN), else 0; vectorised as relu_fwd
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
    long long nv = (((unsigned long long)y | (unsigned long long)g | (unsigned long long)dx) & 15ull) ? 0 : n / IO_VEC;
    for (long long w = t; w < nv; w += step) {
        IoWord a, b, c;
        a.u = ((const uint4*)y)[w];
        b.u = ((const uint4*)g)[w];
        #pragma unroll
        for (int k = 0; k < IO_VEC; ++k) c.e[k] = (LD(a.e[k]) <= (scalar_t)0) ? (io_t)0 : b.e[k];
        ((uint4*)dx)[w] = c.u;
    }
    for (long long i = nv * IO_VEC + t; i < n; i += step) dx[i] = (LD(y[i]) <= (scalar_t)0) ? (io_t)0 : g[i];
}
""",
    "index_range": r"""
// the smallest and largest of n indices (int or long long index_t) into out[0], out[1]: one block of 1024 threads,
// a strided pass each, then a shared-memory tree (index tensors are small: the check runs beside the lookup)
extern "C" __global__ void index_range(const index_t* __restrict__ idx, long long n, long long* __restrict__ out) {
    __shared__ long long lo_s[1024], hi_s[1024];
    long long lo = 0x7fffffffffffffffLL, hi = -0x7fffffffffffffffLL - 1;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        long long v = (long long)idx[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    lo_s[threadIdx.x] = lo;
    hi_s[threadIdx.x] = hi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            long long a = lo_s[threadIdx.x + s], b = hi_s[threadIdx.x + s];
            if (a < lo_s[threadIdx.x]) lo_s[threadIdx.x] = a;
            if (b > hi_s[threadIdx.x]) hi_s[threadIdx.x] = b;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = lo_s[0];
        out[1] = hi_s[0];
    }
}
""",
    "embedding_bwd_atomic": r"""
extern "C" __global__ void embedding_bwd_atomic(const scalar_t* __restrict__ g, const long long* __restrict__ idx,
                                                scalar_t* __restrict__ dw, long long dim, long long n,
                                                long long padding_idx, long long num_weights) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i / dim, c = i - r * dim;
        long long k = idx[r];
        // an index outside [0, num_weights) is skipped, never written out of bounds: the op's deferred range
        // check (CUDABackend.check_index_range) reports it as an IndexError at the next synchronisation
        if (k != padding_idx && k >= 0 && k < num_weights) atomicAdd(&dw[k * dim + c], g[i]);
    }
}
""",
    "embedding_bwd_sorted": r"""
// one thread per (distinct index, column): sums that index's rows in a fixed (stable-sorted) order
extern "C" __global__ void embedding_bwd_sorted(const scalar_t* __restrict__ g, const long long* __restrict__ order,
                                                const long long* __restrict__ seg_start,
                                                const long long* __restrict__ sorted_idx, scalar_t* __restrict__ dw,
                                                long long nseg, long long dim, long long nrows,
                                                long long padding_idx, long long num_weights) {
    long long n = nseg * dim;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long s = i / dim, c = i - s * dim;
        long long start = seg_start[s], end = (s + 1 < nseg) ? seg_start[s + 1] : nrows;
        long long k = sorted_idx[start];
        if (k == padding_idx || k < 0 || k >= num_weights) continue;  // out of range: skipped (see the atomic kernel)
        scalar_t acc = 0;
        for (long long p = start; p < end; ++p) acc += g[order[p] * dim + c];
        dw[k * dim + c] = acc;
    }
}
""",
    "adam_multi": r"""
// multi-tensor Adam/AdamW: one launch for a whole parameter group. Each block owns one
// (tensor, chunk) pair of the chunk table; pointers travel as 64-bit integers. A tensor whose four arrays
// are 16-byte aligned is walked in 16-byte words (float4 / double2: a quarter of the load instructions, and
// the step is bandwidth-bound: 28 bytes per float32 value); the same arithmetic per value either way.
#define ADAM_VEC (16 / sizeof(scalar_t))
__device__ __forceinline__ void adam_one(scalar_t& pi, scalar_t gi, scalar_t& mi, scalar_t& vi, scalar_t lr,
                                         scalar_t b1, scalar_t b2, scalar_t eps, scalar_t wd, scalar_t step_size,
                                         scalar_t bc2_sqrt, int decoupled, int maximize) {
    if (maximize) gi = -gi;
    if (wd != (scalar_t)0) {
        if (decoupled) pi *= (scalar_t)1 - lr * wd;
        else gi += wd * pi;
    }
    mi = b1 * mi + ((scalar_t)1 - b1) * gi;
    vi = b2 * vi + ((scalar_t)1 - b2) * gi * gi;
    pi = pi - step_size * mi / (sqrt(vi) / bc2_sqrt + eps);
}
extern "C" __global__ void adam_multi(const unsigned long long* __restrict__ p_ptr,
                                      const unsigned long long* __restrict__ g_ptr,
                                      const unsigned long long* __restrict__ m_ptr,
                                      const unsigned long long* __restrict__ v_ptr,
                                      const long long* __restrict__ sizes, const int* __restrict__ chunk_tensor,
                                      const long long* __restrict__ chunk_start, long long chunk,
                                      scalar_t lr, scalar_t b1, scalar_t b2, scalar_t eps, scalar_t wd,
                                      scalar_t bc1, scalar_t bc2_sqrt, int decoupled, int maximize,
                                      const scalar_t* __restrict__ dev_hp) {
    // dev_hp (capturable steps): lr, bc1, bc2_sqrt, b1, b2 read from device memory (written by adam_count);
    // dev_hp[5] != 0: GradScaler found an inf/NaN gradient, the step is skipped
    if (dev_hp) {
        if (dev_hp[5] != (scalar_t)0) return;
        lr = dev_hp[0]; bc1 = dev_hp[1]; bc2_sqrt = dev_hp[2]; b1 = dev_hp[3]; b2 = dev_hp[4];
    }
    int t = chunk_tensor[blockIdx.x];
    long long start = chunk_start[blockIdx.x];
    long long end = start + chunk;
    if (end > sizes[t]) end = sizes[t];
    scalar_t* p = (scalar_t*)p_ptr[t];
    const scalar_t* g = (const scalar_t*)g_ptr[t];
    scalar_t* m = (scalar_t*)m_ptr[t];
    scalar_t* v = (scalar_t*)v_ptr[t];
    scalar_t step_size = lr / bc1;
    long long i = start + threadIdx.x;
    if (!((p_ptr[t] | g_ptr[t] | m_ptr[t] | v_ptr[t]) & 15ull) && start % ADAM_VEC == 0) {
        union W { uint4 u; scalar_t e[ADAM_VEC]; };
        long long wend = end / ADAM_VEC;
        for (long long w = start / ADAM_VEC + threadIdx.x; w < wend; w += blockDim.x) {
            W pw, gw, mw, vw;
            pw.u = ((const uint4*)p)[w]; gw.u = ((const uint4*)g)[w];
            mw.u = ((const uint4*)m)[w]; vw.u = ((const uint4*)v)[w];
            #pragma unroll
            for (int e = 0; e < ADAM_VEC; ++e)
                adam_one(pw.e[e], gw.e[e], mw.e[e], vw.e[e], lr, b1, b2, eps, wd, step_size, bc2_sqrt,
                         decoupled, maximize);
            ((uint4*)p)[w] = pw.u; ((uint4*)m)[w] = mw.u; ((uint4*)v)[w] = vw.u;
        }
        i = wend * ADAM_VEC + threadIdx.x;  // the tensor's last values, past its last whole word
    }
    for (; i < end; i += blockDim.x) {
        scalar_t pi = p[i], mi = m[i], vi = v[i];
        adam_one(pi, g[i], mi, vi, lr, b1, b2, eps, wd, step_size, bc2_sqrt, decoupled, maximize);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}
""",
    "sgd_multi": r"""
// multi-tensor SGD (momentum, dampening, Nesterov, L2 weight decay, maximize): one launch for a whole group,
// the chunk tables of adam_multi; init != 0 is the first step, whose momentum buffer is the gradient itself
extern "C" __global__ void sgd_multi(const unsigned long long* __restrict__ p_ptr,
                                     const unsigned long long* __restrict__ g_ptr,
                                     const unsigned long long* __restrict__ b_ptr,
                                     const long long* __restrict__ sizes, const int* __restrict__ chunk_tensor,
                                     const long long* __restrict__ chunk_start, long long chunk,
                                     scalar_t lr, scalar_t momentum, scalar_t dampening, scalar_t wd,
                                     int nesterov, int maximize, int init, int has_momentum) {
    int t = chunk_tensor[blockIdx.x];
    long long start = chunk_start[blockIdx.x];
    long long end = start + chunk;
    if (end > sizes[t]) end = sizes[t];
    scalar_t* p = (scalar_t*)p_ptr[t];
    const scalar_t* g = (const scalar_t*)g_ptr[t];
    scalar_t* b = has_momentum ? (scalar_t*)b_ptr[t] : (scalar_t*)0;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        scalar_t gi = maximize ? -g[i] : g[i];
        scalar_t pi = p[i];
        if (wd != (scalar_t)0) gi += wd * pi;
        if (has_momentum) {
            scalar_t gd = dampening != (scalar_t)0 ? ((scalar_t)1 - dampening) * gi : gi;
            scalar_t bi = init ? gi : momentum * b[i] + gd;
            b[i] = bi;
            gi = nesterov ? gi + momentum * bi : bi;
        }
        p[i] = pi - lr * gi;
    }
}
""",
    "adam_count": r"""
// a capturable Adam step's scalars on the device: step += 1, then lr, 1 - b1^step, sqrt(1 - b2^step);
// with GradScaler's inf flag set (found_inf[0] != 0) nothing is counted and hp[5] tells adam_multi to skip
extern "C" __global__ void adam_count(scalar_t* __restrict__ step, const scalar_t* __restrict__ lr,
                                      const scalar_t* __restrict__ b1, const scalar_t* __restrict__ b2,
                                      scalar_t* __restrict__ hp, const float* __restrict__ found_inf) {
    // hp = lr, 1 - b1^step, sqrt(1 - b2^step), b1, b2, skip; the powers in double, rounded once
    if (found_inf && found_inf[0] != 0.0f) { hp[5] = (scalar_t)1; return; }
    hp[5] = (scalar_t)0;
    scalar_t k = step[0] + (scalar_t)1;
    step[0] = k;
    hp[0] = lr[0];
    hp[1] = (scalar_t)(1.0 - pow((double)b1[0], (double)k));
    hp[2] = (scalar_t)sqrt(1.0 - pow((double)b2[0], (double)k));
    hp[3] = b1[0];
    hp[4] = b2[0];
}
""",
    "bias_act_fwd": r"""
// y = act(x + bias) over a C-contiguous array, bias (ncol,) broadcast over the last axis; x in the storage type io_t,
// y in ot_t (io_t, or float32 for half x under autocast's float32 policy): half inputs are read as they are,
// computed in float32 and rounded once on store. Each thread takes whole 16-byte words of IO_VEC elements of x
// (the half types' 2-byte accesses one by one reach a fraction of the bandwidth) and finds the bias column once per
// word; pointers not 16-byte aligned, or a bias row that words would straddle (ncol % IO_VEC), take one element at
// a time. Launch ceil(n / IO_VEC) threads. y2 (not null, with a float32 y): the result rounded to io_t as well, the
// rounding autocast's cast of y to the half dtype would make (pylucid reuses it instead of a cast kernel).
__device__ __forceinline__ scalar_t act_value(scalar_t z, int act) {
    if (act == 1) return (z != z) ? z : (z > (scalar_t)0 ? z : (scalar_t)0);
    if (act == 2) return (scalar_t)0.5 * z * ((scalar_t)1 + erf(z * (scalar_t)0.7071067811865476));
    if (act == 3) return (scalar_t)0.5 * z * ((scalar_t)1 + tanh((scalar_t)0.7978845608028654
                                                                * (z + (scalar_t)0.044715 * z * z * z)));
    return z;
}
extern "C" __global__ void bias_act_fwd(const io_t* __restrict__ x, const scalar_t* __restrict__ bias,
                                        ot_t* __restrict__ y, io_t* __restrict__ y2, long long ncol, long long n,
                                        int has_bias, int act) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
    long long done = 0;
    if (!((((unsigned long long)x | (unsigned long long)y | (unsigned long long)y2) & 15ull)
          || (has_bias && ncol % IO_VEC))) {
        long long nv = n / IO_VEC;
        for (long long v = t; v < nv; v += step) {
            IoWord in, out2;
            OtWord out;
            in.u = ((const uint4*)x)[v];
            const scalar_t* br = bias + (has_bias ? (v * IO_VEC) % ncol : 0);
            #pragma unroll
            for (int k = 0; k < IO_VEC; ++k) {
                scalar_t z = has_bias ? LD(in.e[k]) + br[k] : LD(in.e[k]);
                scalar_t r = act_value(z, act);
                out.e[k] = STO(r);
                out2.e[k] = ST(r);
            }
            #pragma unroll
            for (int k = 0; k < OT_WORDS; ++k) ((uint4*)y)[v * OT_WORDS + k] = out.u[k];
            if (y2) ((uint4*)y2)[v] = out2.u;
        }
        done = nv * IO_VEC;
    }
    for (long long i = done + t; i < n; i += step) {
        scalar_t z = has_bias ? LD(x[i]) + bias[i % ncol] : LD(x[i]);
        scalar_t r = act_value(z, act);
        y[i] = STO(r);
        if (y2) y2[i] = ST(r);
    }
}
""",
    "bias_act_bwd": r"""
// dz = g * act'(x + bias); x in io_t, g in gt_t (io_t, or float32: the gradient of autocast's float32 result for a
// half x), dz in ot_t (io_t: rounded once, as the cast's backward rounds a float32 gradient); 16-byte words of x
// as bias_act_fwd
__device__ __forceinline__ scalar_t act_slope(scalar_t z, int act) {
    if (act == 1) return z > (scalar_t)0 ? (scalar_t)1 : (scalar_t)0;
    if (act == 2) {
        scalar_t cdf = (scalar_t)0.5 * ((scalar_t)1 + erf(z * (scalar_t)0.7071067811865476));
        return cdf + z * exp((scalar_t)-0.5 * z * z) * (scalar_t)0.3989422804014327;
    }
    if (act == 3) {
        scalar_t k = (scalar_t)0.7978845608028654;
        scalar_t t = tanh(k * (z + (scalar_t)0.044715 * z * z * z));
        return (scalar_t)0.5 * ((scalar_t)1 + t)
               + (scalar_t)0.5 * z * ((scalar_t)1 - t * t) * k * ((scalar_t)1 + (scalar_t)0.134145 * z * z);
    }
    return (scalar_t)1;
}
extern "C" __global__ void bias_act_bwd(const gt_t* __restrict__ g, const io_t* __restrict__ x,
                                        const scalar_t* __restrict__ bias, ot_t* __restrict__ dz,
                                        long long ncol, long long n, int has_bias, int act) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
    long long done = 0;
    if (!((((unsigned long long)g | (unsigned long long)x | (unsigned long long)dz) & 15ull)
          || (has_bias && ncol % IO_VEC))) {
        long long nv = n / IO_VEC;
        for (long long v = t; v < nv; v += step) {
            IoWord xi;
            GtWord gi;
            OtWord out;
            xi.u = ((const uint4*)x)[v];
            #pragma unroll
            for (int k = 0; k < GT_WORDS; ++k) gi.u[k] = ((const uint4*)g)[v * GT_WORDS + k];
            const scalar_t* br = bias + (has_bias ? (v * IO_VEC) % ncol : 0);
            #pragma unroll
            for (int k = 0; k < IO_VEC; ++k) {
                scalar_t z = has_bias ? LD(xi.e[k]) + br[k] : LD(xi.e[k]);
                out.e[k] = STO(LDG(gi.e[k]) * act_slope(z, act));
            }
            #pragma unroll
            for (int k = 0; k < OT_WORDS; ++k) ((uint4*)dz)[v * OT_WORDS + k] = out.u[k];
        }
        done = nv * IO_VEC;
    }
    for (long long i = done + t; i < n; i += step) {
        scalar_t z = has_bias ? LD(x[i]) + bias[i % ncol] : LD(x[i]);
        dz[i] = STO(LDG(g[i]) * act_slope(z, act));
    }
}
""",
    # element-wise binary op on 16-byte vectors: float4 loads/stores, one vector per thread.
    # CuPy's generic ufunc loop moves 4 bytes per load and reaches ~60% of the bandwidth.
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

#: the C type of ``scalar_t`` per kernel dtype
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
#: kernels written for one type only (no ``scalar_t``)
_FIXED_TYPE = frozenset({"vec_binary_f32"})
#: kernels over an index type ``index_t`` (their ``dtype`` is int32 or int64)
_INDEX_KERNELS = frozenset({"index_range"})
_INDEX_CTYPE = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
#: the operation codes of ``vec_binary_f32``
OPS_VEC = {"multiply": 0, "add": 1, "subtract": 2, "true_divide": 3}
#: the activation codes of ``bias_act_fwd``/``bias_act_bwd`` (names as in ``reference.ACTIVATIONS``)
BIAS_ACT_CODES = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}


#: kernels whose large operands have a storage type ``io_t`` of their own (read by ``LD``, written by ``ST``)
IO_KERNELS = frozenset({"col_sum", "layer_norm_fwd", "layer_norm_bwd", "layer_norm_fwd_rows", "layer_norm_bwd_rows",
                        "layer_norm_bwd_words", "batch_norm_fwd", "batch_norm_bwd", "relu_fwd", "relu_bwd",
                        "cross_entropy_fwd", "cross_entropy_bwd", "bn_part_stats", "bn_part_apply",
                        "bn_part_grad_sums", "bn_part_grad_apply", "bias_act_fwd", "bias_act_bwd"})


def kernel_source(name: str, dtype, io=None, out=None, grad=None) -> str:
    """The full CUDA source of fused kernel ``name`` for ``dtype`` (float32 or float64).

    For :data:`IO_KERNELS`, ``io`` (a dtype name: float16, bfloat16, or None for ``dtype`` itself) is the
    storage type of their large operands, converted to ``dtype`` on load and rounded once on store. The bias +
    activation and layer-norm kernels also take ``out`` (their result's storage type ``ot_t``) and ``grad`` (the
    incoming gradient's, ``gt_t``), each ``io``'s by default and otherwise at least as wide (float32 for half
    ``io``).
    """
    if name in _FIXED_TYPE:
        return KERNELS[name]
    if name in _INDEX_KERNELS:  # over an index type (int32 or int64) instead of a float scalar_t
        return f"#define index_t {_INDEX_CTYPE[np.dtype(dtype)]}\n" + KERNELS[name]
    ctype = _CTYPE[np.dtype(dtype)]
    head = REDUCTIONS
    if name in IO_KERNELS:
        io = io or np.dtype(dtype).name
        st, _, load, store, _ = _FAST_TYPES[io]
        ot, _, _, store_o, _ = _FAST_TYPES[out or io]
        gt, _, load_g, _, _ = _FAST_TYPES[grad or io]
        if _SIZES[ot] % _SIZES[st] or _SIZES[gt] % _SIZES[st]:
            raise ValueError(f"kernel_source: {name} takes out/grad types at least as wide as io ({io}); "
                             f"got out={out}, grad={grad}")
        # IO_VEC elements of io_t make one 16-byte word (IoWord), the unit of the vectorised loads and stores; the
        # same elements of gt_t / ot_t take GT_WORDS / OT_WORDS words
        vec = 16 // _SIZES[st]
        head = (_FAST_PRELUDE + f"#define io_t {st}\n#define ot_t {ot}\n#define gt_t {gt}\n"
                f"#define LD(v) ((scalar_t){load.format('(v)')})\n#define ST(v) ({store.format('(v)')})\n"
                f"#define LDG(v) ((scalar_t){load_g.format('(v)')})\n#define STO(v) ({store_o.format('(v)')})\n"
                f"#define IO_VEC {vec}\n#define OT_WORDS {vec * _SIZES[ot] // 16}\n"
                f"#define GT_WORDS {vec * _SIZES[gt] // 16}\n"
                "union IoWord { uint4 u; io_t e[IO_VEC]; };\n"
                "union OtWord { uint4 u[OT_WORDS]; ot_t e[IO_VEC]; };\n"
                "union GtWord { uint4 u[GT_WORDS]; gt_t e[IO_VEC]; };\n" + head)
    return (head + KERNELS[name]).replace("scalar_t", ctype)


# ---------------------------------------------------------------------------
# generated one-line kernels (``CUDABackend.fast_launch``)
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
#: dtypes whose array-array fast kernels take 8 elements per thread (launch ceil(n / 8) threads)
FAST_VEC_AA = frozenset({"float16", "bfloat16"})

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
    if kind == "aa" and dtype_name in FAST_VEC_AA:
        # half types, array-array: 8 elements per thread through 16-byte words (2-byte accesses one per thread
        # reach a fraction of the bandwidth); unaligned bases (views at an odd offset) one element per thread.
        # Launch ceil(n / 8) threads.
        vbody = loads.replace("CT", ct).format(a=load.format("ra.e[k]"), b=load.format("rb.e[k]"), s="")
        one = f"{{ {body} c[i] = {store.format(f'({ct})({expr})')}; }}"
        src = (_FAST_PRELUDE + f"""
extern "C" __global__ void {name}({params.replace("ST", st)}, {st}* __restrict__ c, long long n) {{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (((unsigned long long)a | (unsigned long long)b | (unsigned long long)c) & 15ull) {{
        for (long long i = t; i < n; i += (long long)gridDim.x * blockDim.x) {one}
        return;
    }}
    long long nv = n / 8;
    if (t < nv) {{
        union {{ uint4 q; {st} e[8]; }} ra, rb, rc;
        ra.q = ((const uint4*)a)[t];
        rb.q = ((const uint4*)b)[t];
        #pragma unroll
        for (int k = 0; k < 8; ++k) {{ {vbody} rc.e[k] = {store.format(f'({ct})({expr})')}; }}
        ((uint4*)c)[t] = rc.q;
    }}
    long long i = nv * 8 + t;
    if (i < n) {one}
}}
""")
        return src, name
    src = (_FAST_PRELUDE
           + f'extern "C" __global__ void {name}({params.replace("ST", st)}, {st}* __restrict__ c, long long n) {{\n'
           + "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           + f"    if (i < n) {{ {body} c[i] = {store.format(f'({ct})({expr})')}; }}\n}}\n")
    return src, name


#: integer in-place updates by a scalar (``counter += 1``: batch norm's ``num_batches_tracked`` every step)
INPLACE_INT_OPS = {"add": "+", "subtract": "-", "multiply": "*"}
_INPLACE_INT_TYPES = {"int64": "long long", "int32": "int"}


def int_scalar_inplace_source(op: str, dtype_name: str):
    """CUDA source and kernel name of ``a[i] = a[i] <op> s`` in place for a C-contiguous int32/int64 ``a`` and a
    64-bit integer ``s`` (add, subtract, multiply); None if not covered.

    The arithmetic is done on unsigned 64-bit values and truncated to the storage type: two's complement
    wrap-around on overflow, as NumPy's and PyTorch's integer kernels (signed overflow is undefined in C++).
    """
    sym = INPLACE_INT_OPS.get(op)
    st = _INPLACE_INT_TYPES.get(dtype_name)
    if sym is None or st is None:
        return None
    name = f"pl_inplace_{op}_s_{dtype_name}"
    src = (f'extern "C" __global__ void {name}({st}* __restrict__ a, long long s, long long n) {{\n'
           "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           f"    if (i < n) a[i] = ({st})((unsigned long long)(long long)a[i] {sym} (unsigned long long)s);\n}}\n")
    return src, name


def bias_add_source(dtype_name: str, bias_name: str | None = None):
    """CUDA source and kernel name of ``y[i] += b[i % ncol]`` in place: a Linear's bias on its fresh GEMM
    output. ``b`` has ``y``'s dtype or (``bias_name``) float32 under a half ``y``, as autocast's float32
    bias; half types add in float32 and round once. None if not covered.

    With ``ncol`` a multiple of 8 and ``y`` 16-byte aligned, a thread takes 8 consecutive elements of one row
    (16-byte loads and stores for the half types; one column index per 8 elements, 32-bit when the array is
    small enough: 64-bit division is several times slower); otherwise one element per thread. Grid-stride loops.
    """
    bias_name = bias_name or dtype_name
    spec, bspec = _FAST_TYPES.get(dtype_name), _FAST_TYPES.get(bias_name)
    if spec is None or bspec is None or (bias_name != dtype_name and bias_name != "float32"):
        return None
    st, ct, load, store, _ = spec
    bst, _, bload, _, _ = bspec
    name = f"pl_bias_add_{dtype_name}_{bias_name}"
    nvec = 8 * _SIZES[st] // 16
    src = (_FAST_PRELUDE + f"""
template <class I> __device__ __forceinline__ void {name}_vec({st}* __restrict__ y, const {bst}* __restrict__ b,
                                                         I ncol, I nv) {{
    for (I v = (I)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += (I)gridDim.x * blockDim.x) {{
        I col = (v * 8) % ncol;
        union {{ uint4 q[{nvec}]; {st} e[8]; }} r;
        uint4* p = (uint4*)(y + v * 8);
        #pragma unroll
        for (int k = 0; k < {nvec}; ++k) r.q[k] = p[k];
        #pragma unroll
        for (int k = 0; k < 8; ++k) {{
            {ct} t = ({ct}){load.format('r.e[k]')} + ({ct}){bload.format('b[col + k]')};
            r.e[k] = {store.format(f'({ct})t')};
        }}
        #pragma unroll
        for (int k = 0; k < {nvec}; ++k) p[k] = r.q[k];
    }}
}}

extern "C" __global__ void {name}({st}* __restrict__ y, const {bst}* __restrict__ b, long long ncol, long long n) {{
    if (ncol % 8 == 0 && ((unsigned long long)y & 15ull) == 0) {{
        if (n < 2147483647ll) {name}_vec<unsigned int>(y, b, (unsigned int)ncol, (unsigned int)(n / 8));
        else {name}_vec<long long>(y, b, ncol, n / 8);
        return;
    }}
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {{
        {ct} v = ({ct}){load.format('y[i]')} + ({ct}){bload.format('b[i % ncol]')};
        y[i] = {store.format(f'({ct})v')};
    }}
}}
""")
    return src, name


#: the most axes :func:`strided_copy_source` takes
COPY_MAX_NDIM = 6


def strided_copy_source(itemsize: int, strided_dst: bool = False):
    """CUDA source and name of a copy of any strided array of up to six axes into a C-contiguous one
    (``strided_dst``: into a strided destination of the same shape, ``pl_strided_assign_*``).

    Elements are moved as raw ``itemsize``-byte words (any dtype of that size); the source offset of
    element ``i`` is found from its C-order index, the shape and the byte strides, padded in front
    with length-1 axes of stride 0. The index arithmetic is unrolled over the six axes (so the shape
    stays in registers) and 32-bit when ``n < 2**31`` (64-bit division is several times slower).
    ``itemsize`` 16 moves ``uint4`` words: the caller views a last axis that is contiguous in the
    source (and destination) as runs of 16 bytes (8 half or 4 single elements per thread: one index
    computation and one 16-byte load and store for all of them). None for other item sizes.
    """
    word = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long", 16: "uint4"}.get(itemsize)
    if word is None:
        return None
    nmax = COPY_MAX_NDIM
    name = f"pl_strided_{'assign' if strided_dst else 'copy'}_{itemsize}"
    dims = ", ".join(f"long long d{j}" for j in range(nmax))
    strides = ", ".join(f"long long s{j}" for j in range(nmax))
    dst_strides = ", ".join(f"long long t{j}" for j in range(nmax))
    dst_off = " doff += (long long)k * dt[d];" if strided_dst else ""

    def body(ix):  # the offset loop for index type ix
        return ("        {ix} rem = ({ix})i; long long off = 0;" + (" long long doff = 0;" if strided_dst else "") +
                "\n        #pragma unroll\n"
                f"        for (int d = {nmax - 1}; d >= 0; --d) {{\n"
                f"            if (d < {nmax} - nd) break;\n"
                "            {ix} k = rem % ({ix})dim[d]; rem /= ({ix})dim[d]; off += (long long)k * st[d];" + dst_off +
                "\n        }\n" +
                (f"        *({word}*)(dst + doff) = *(const {word}*)(src + off);\n" if strided_dst else
                 f"        dst[i] = *(const {word}*)(src + off);\n")).replace("{ix}", ix)

    dst_decl = "char* __restrict__ dst" if strided_dst else f"{word}* __restrict__ dst"
    src = (f'extern "C" __global__ void {name}(const char* __restrict__ src, {dst_decl}, '
           f"long long n, int nd, {dims}, {strides}" + (f", {dst_strides}" if strided_dst else "") + ") {\n"
           f"    const long long dim[{nmax}] = {{{', '.join(f'd{j}' for j in range(nmax))}}};\n"
           f"    const long long st[{nmax}] = {{{', '.join(f's{j}' for j in range(nmax))}}};\n" +
           (f"    const long long dt[{nmax}] = {{{', '.join(f't{j}' for j in range(nmax))}}};\n" if strided_dst
            else "") +
           "    long long step = (long long)gridDim.x * blockDim.x;\n"
           "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (n < 2147483648LL) {\n"
           "        for (; i < n; i += step) {\n" + body("unsigned int") + "        }\n"
           "    } else {\n"
           "        for (; i < n; i += step) {\n" + body("long long") + "        }\n"
           "    }\n}\n")
    return src, name


#: dtype conversions the fast cast covers (source, target). Each is one correctly rounded step:
#: half <-> float32 and half -> float64 are exact or one rounding through float; float64 -> half
#: would round twice through float, so it keeps CuPy's conversion.
CAST_PAIRS = frozenset({("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"),
                        ("bfloat16", "float32"), ("float16", "bfloat16"), ("bfloat16", "float16"),
                        ("float32", "float64"), ("float64", "float32"), ("float16", "float64"),
                        ("bfloat16", "float64")})


#: elements per thread of the cast kernel: 8 (16-byte loads or stores of the half types, two or four of float32/64)
CAST_VEC = 8
_SIZES = {"unsigned short": 2, "float": 4, "double": 8}


def cast_source(src: str, dst: str):
    """CUDA source and kernel name converting a contiguous ``src`` array to ``dst``; None if not covered.

    Each thread converts ``CAST_VEC`` consecutive elements, loaded and stored as 16-byte words (memory
    bandwidth: one element per thread leaves the half types' 2-byte accesses at a fraction of it); the last
    ``n % CAST_VEC`` elements go one per thread. Base pointers that are not 16-byte aligned (views at an odd
    offset) take a grid-stride loop of single elements. Launch ``ceil(n / CAST_VEC)`` threads.
    """
    if (src, dst) not in CAST_PAIRS:
        return None
    s_st, s_ct, load, _, _ = _FAST_TYPES[src]
    d_st, d_ct, _, store, _ = _FAST_TYPES[dst]
    ct = "double" if "double" in (s_ct, d_ct) else "float"
    name = f"pl_cast_{src}_{dst}"
    vs, vd = CAST_VEC * _SIZES[s_st] // 16, CAST_VEC * _SIZES[d_st] // 16
    one = f"{{ {ct} x = ({ct}){load.format('a[j]')}; c[j] = {store.format(f'({d_ct})x')}; }}"
    src_code = (_FAST_PRELUDE + f"""
extern "C" __global__ void {name}(const {s_st}* __restrict__ a, {d_st}* __restrict__ c, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (((unsigned long long)a | (unsigned long long)c) & 15ull) {{
        for (long long j = i; j < n; j += (long long)gridDim.x * blockDim.x) {one}
        return;
    }}
    long long nv = n / {CAST_VEC};
    if (i < nv) {{
        union {{ uint4 v[{vs}]; {s_st} e[{CAST_VEC}]; }} in;
        union {{ uint4 v[{vd}]; {d_st} e[{CAST_VEC}]; }} out;
        const uint4* ap = (const uint4*)(a + i * {CAST_VEC});
        #pragma unroll
        for (int k = 0; k < {vs}; ++k) in.v[k] = ap[k];
        #pragma unroll
        for (int k = 0; k < {CAST_VEC}; ++k) {{
            {ct} x = ({ct}){load.format('in.e[k]')};
            out.e[k] = {store.format(f'({d_ct})x')};
        }}
        uint4* cp = (uint4*)(c + i * {CAST_VEC});
        #pragma unroll
        for (int k = 0; k < {vd}; ++k) cp[k] = out.v[k];
    }}
    long long j = nv * {CAST_VEC} + i;
    if (j < n) {one}
}}
""")
    return src_code, name
