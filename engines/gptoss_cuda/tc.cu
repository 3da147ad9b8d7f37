/* tc.cu — tensor-core (cuBLAS bf16) matmuls with split fp32 activations for the prefill (see tc.h). */
#include "engines/gptoss_cuda/tc.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>

#include "engines/gptoss_cuda/kernels.h"

/* ---------------------------------------------------------------- sizes */

size_t gptoss_tc_xs_elems(int chunk, int splits, int H, int QD, int I, int batched) {
    const size_t P = (size_t)chunk * GPTOSS_TOPK, kmax = (size_t)(H > I ? H : I);
    /* grouped: with batched, room for the layout padded up to 2x the pairs (gptoss_tc_experts) */
    const size_t dense = (size_t)chunk * (size_t)(H > QD ? H : QD), grouped = (batched ? 2 : 1) * P * kmax;
    return (size_t)splits * (dense > grouped ? dense : grouped);
}

size_t gptoss_tc_ys_elems(int chunk, int splits, int H, int QD, int I, int E) {
    const size_t P = (size_t)chunk * GPTOSS_TOPK;
    size_t nmax = (size_t)(H > QD ? H : QD);
    if ((size_t)E > nmax) nmax = (size_t)E;
    const size_t dense = (size_t)chunk * nmax, grouped = P * (size_t)(2 * I > H ? 2 * I : H);
    return (size_t)splits * (dense > grouped ? dense : grouped);
}

size_t gptoss_tc_wbf_elems(int H, int I, int E) {
    return (size_t)E * 2 * I * H; /* every expert's gate_up [2I, H] (>= down [H, I]) */
}

/* ---------------------------------------------------------------- kernels */

/* Rows of logical row p's parts, which every layout keeps linear in the part s: part s is row *r0 + s * (return
 * value). Dense rows are stacked part by part (step rows); grouped rows part by part inside each expert's block
 * (the expert is found by binary search over the offsets; step its count), or with pad > 0 the batched layout
 * [part][expert][pad] (row p - off_e of its expert; step E * pad). */
static __device__ __forceinline__ long part_rows(int p, int rows, int splits, const int32_t *offsets,
                                                 const int32_t *counts, int E, int pad, int *e_out, long *r0) {
    if (!offsets) {
        *e_out = 0;
        *r0 = p;
        return rows;
    }
    int lo = 0, hi = E; /* first expert with offsets[e] > p, minus one */
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (offsets[mid] <= p) lo = mid + 1; else hi = mid;
    }
    const int e = lo - 1;
    *e_out = e;
    const long off = offsets[e], cnt = counts[e];
    if (pad > 0) {
        *r0 = (long)e * pad + (p - off);
        return (long)E * pad;
    }
    *r0 = (long)splits * off + (p - off);
    return cnt;
}

/* Row of part s of logical row p (part_rows). */
static __device__ __forceinline__ long part_row(int p, int s, int rows, int splits, const int32_t *offsets,
                                                const int32_t *counts, int E, int pad, int *e_out) {
    long r0;
    const long step = part_rows(p, rows, splits, offsets, counts, E, pad, e_out, &r0);
    return r0 + s * step;
}

/* The fp16 experts' rows of grouped pair p (mlp_f16; *e_out its expert): its row, and in *lo_row the row of its
 * second fp16 part, -1 where it has none. Without precise rows: row p, one part each (offsets may then be NULL).
 * With them (gptoss_moe_route_precise: counts[E + e] = lo_e, the expert's precise pairs, which come first in its
 * group, and offsets[E + e] their prefix sum) expert e's rows start at off_e + lo_off_e: its cnt_e pairs' rows,
 * then the second parts of its first lo_e pairs. */
static __device__ __forceinline__ long f16_pair_rows(int p, const int32_t *offsets, const int32_t *counts, int E,
                                                     int precise, int *e_out, long *lo_row) {
    long row;
    part_rows(p, 1, 1, offsets, counts, E, 0, e_out, &row); /* row p, and its expert */
    *lo_row = -1;
    if (!precise) return row;
    const int e = *e_out;
    row += offsets[E + e];
    if (p - offsets[e] < counts[E + e]) *lo_row = row + counts[e];
    return row;
}

__global__ void tc_split_kernel(const float *x, int ldx, const int32_t *gather, const int32_t *offsets,
                                const int32_t *counts, int E, int pad, int rows, int K, int splits, uint16_t *xs) {
    const int p = blockIdx.x;
    int e;
    long r0;
    const size_t stride = (size_t)part_rows(p, rows, splits, offsets, counts, E, pad, &e, &r0) * K;
    const long src = gather ? gather[p] : p;
    const float *xr = x + src * ldx;
    for (int k = threadIdx.x; k < K; k += blockDim.x) gptoss_tc_split_value(xr[k], xs + r0 * K + k, stride, splits);
}

/* pad > 0: the parts were already summed by the GEMMs (beta = 1) into one row per pair. */
__global__ void tc_reduce_kernel(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int pad,
                                 int rows, int N, int splits, const uint16_t *b, float *y, int ldy, int accumulate) {
    const int p = blockIdx.x;
    int e = 0;
    if (pad > 0) splits = 1;
    long r0;
    const size_t stride = (size_t)part_rows(p, rows, splits, offsets, counts, E, pad, &e, &r0) * N;
    const uint16_t *bb = b ? b + (size_t)e * N : NULL;
    float *yr = y + (size_t)p * ldy;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        const float v = gptoss_tc_part_sum(ys + r0 * N + n, stride, splits, bb ? bb + n : NULL);
        yr[n] = accumulate ? yr[n] + v : v;
    }
}

/* v += the 4 fp32 at r (a precise pair's second part's products, beside its first part's). */
static __device__ __forceinline__ void add_part4(float4 *v, const float *r) {
    const float4 l4 = *(const float4 *)r;
    v->x += l4.x; v->y += l4.y; v->z += l4.z; v->w += l4.w;
}

/* v += the 4 bf16 biases at b (gate j, up j, gate j + 1, up j + 1 of a gate_up row). */
static __device__ __forceinline__ void add_bias4(float4 *v, const uint16_t *b) {
    v->x += gptoss_bf16_to_f32(b[0]);
    v->y += gptoss_bf16_to_f32(b[1]);
    v->z += gptoss_bf16_to_f32(b[2]);
    v->w += gptoss_bf16_to_f32(b[3]);
}

/* The gate_up reduce, the SwiGLU and the down split in one pass (gptoss_tc_mlp): for pair p, the gate_up
 * partial rows of ys (per-expert layout, N = 2I columns) summed with the bias as tc_reduce_kernel does,
 * each (gate, up) pair through gptoss_swiglu_value, the activation split into the S parts as tc_split_kernel
 * writes them for the down GEMMs (K = I). The same operations in the same order as those three kernels,
 * so the same bits; the [P, 2I] and [P, I] fp32 rows in between are never written. Two activations per
 * thread and step: one 16-byte ys load per part, one 4-byte store per part. Needs I even. */
__global__ void tc_swiglu_split_kernel(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int rows,
                                       int I, int splits, const uint16_t *b, float alpha, float limit, uint16_t *xs) {
    const int p = blockIdx.x, N = 2 * I;
    int e = 0;
    long r[3];
    for (int s = 0; s < splits; s++) r[s] = part_row(p, s, rows, splits, offsets, counts, E, 0, &e);
    const uint16_t *bb = b ? b + (size_t)e * N : NULL;
    for (int j = 2 * threadIdx.x; j < I; j += 2 * blockDim.x) {
        float4 v = *(const float4 *)(ys + r[0] * N + 2 * j); /* gate j, up j, gate j+1, up j+1 */
        for (int s = 1; s < splits; s++) {
            const float4 w = *(const float4 *)(ys + r[s] * N + 2 * j);
            v.x += w.x; v.y += w.y; v.z += w.z; v.w += w.w;
        }
        if (bb) add_bias4(&v, bb + 2 * j);
        float a0 = gptoss_swiglu_value(v.x, v.y, alpha, limit), a1 = gptoss_swiglu_value(v.z, v.w, alpha, limit);
        for (int s = 0; s < splits; s++) {
            const uint32_t b0 = gptoss_tc_bf16_bits(a0), b1 = gptoss_tc_bf16_bits(a1);
            *(uint32_t *)(xs + r[s] * I + j) = b0 | (b1 << 16);
            a0 -= gptoss_bf16_to_f32((uint16_t)b0); /* exact: the rounding residuals */
            a1 -= gptoss_bf16_to_f32((uint16_t)b1);
        }
    }
}

/* The down reduce and the MoE combine in one pass (gptoss_tc_mlp; 4 columns per thread and step, N % 4 == 0,
 * x 16-byte aligned): token t's residual row gets
 * sum_k w[t, k] * (the partial rows of pair pair_of[t, k] summed with its expert's bias), the part sums in
 * tc_reduce_kernel's order and the weighted sum in gptoss_moe_combine's, so the same bits without the
 * [P, N] rows in between. */
template <bool F16>
__global__ void tc_reduce_combine_kernel(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int rows,
                                         int N, int splits, const uint16_t *b, const float *w, const int32_t *pair_of,
                                         const int32_t *shift, const int32_t *rshift, int precise, float *x) {
    const int t = blockIdx.x;
    long r[GPTOSS_TOPK][3], lo[GPTOSS_TOPK];
    const uint16_t *bb[GPTOSS_TOPK];
    float wk[GPTOSS_TOPK], unscale[GPTOSS_TOPK];
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        const int p = pair_of[(size_t)t * GPTOSS_TOPK + k];
        int e = 0;
        lo[k] = -1;
        if (F16) r[k][0] = f16_pair_rows(p, offsets, counts, E, precise, &e, &lo[k]);
        else
            for (int s = 0; s < splits; s++) r[k][s] = part_row(p, s, rows, splits, offsets, counts, E, 0, &e);
        bb[k] = b ? b + (size_t)e * N : NULL;
        wk[k] = w[(size_t)t * GPTOSS_TOPK + k];
        unscale[k] = F16 ? ldexpf(1.0f, shift[e] - rshift[p]) : 1.0f; /* fp16 experts: 2^(c_e - r_p), exact */
    }
    for (int n = 4 * threadIdx.x; n < N; n += 4 * blockDim.x) { /* 4 columns per step: N % 4 == 0 */
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) {
            float4 v0 = *(const float4 *)(ys + r[k][0] * N + n);
            if (F16 && lo[k] >= 0) add_part4(&v0, ys + lo[k] * N + n); /* a precise pair */
            if (F16) { v0.x *= unscale[k]; v0.y *= unscale[k]; v0.z *= unscale[k]; v0.w *= unscale[k]; }
            float v[4] = {v0.x, v0.y, v0.z, v0.w};
            for (int s = 1; s < splits; s++) {
                const float4 w4 = *(const float4 *)(ys + r[k][s] * N + n);
                v[0] += w4.x; v[1] += w4.y; v[2] += w4.z; v[3] += w4.w;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (bb[k]) v[i] += gptoss_bf16_to_f32(bb[k][n + i]);
                acc[i] += wk[k] * v[i];
            }
        }
        float4 *xr = (float4 *)(x + (size_t)t * N + n);
        float4 xv = *xr;
        xv.x += acc[0]; xv.y += acc[1]; xv.z += acc[2]; xv.w += acc[3];
        *xr = xv;
    }
}

/* The 16 e2m1 values (the MXFP4 dequantization kernels copy them into shared memory or index them directly). */
__constant__ float c_tc_fp4[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* ---- fp16 experts (tc.h "fp16 experts") */

/* The largest of every thread's v in the block (blockDim.x a multiple of 32, <= 1024); every thread gets it. */
static __device__ float block_max(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads(); /* part[] may still be read by a previous call */
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[0];
    for (int i = 1; i < (int)(blockDim.x >> 5); i++) v = fmaxf(v, part[i]);
    return v;
}

/* The row shift r that puts a row's largest magnitude m into [2^14, 2^15) (0 for a zero or non-finite m), at most
 * 126: 2^r stays a finite fp32 for rows whose largest value is subnormal (2^147 would be inf, and 0 x inf NaN);
 * such a row then lands below 2^14, still far inside fp16's range. */
static __device__ __forceinline__ int f16_row_shift(float m) {
    const int r = m > 0.0f && isfinite(m) ? 14 - ilogbf(m) : 0;
    return r < 126 ? r : 126;
}

/* Where value k of an fp16 experts row goes: k of a row of K, or with perm (gptoss_mxfp4_prompt_gemm's rows)
 * gptoss_prompt_pos(k) of a row of gptoss_prompt_row(K), zeros past K (f16_row_pad). */
static __device__ __forceinline__ int f16_pos(int k, int perm) { return perm ? gptoss_prompt_pos(k) : k; }
static __device__ __forceinline__ void f16_row_pad(__half *row, int K, int perm) {
    if (perm)
        for (int k = K + threadIdx.x; k < gptoss_prompt_row(K); k += blockDim.x) row[gptoss_prompt_pos(k)] = __float2half(0.0f);
}

/* Pair p's grouped activations (x[gather[p]], or x[p]) as fp16 x 2^r at its row of xs (f16_pair_rows: row p without
 * precise rows; f16_pos's order), r in rshift[p]; a precise pair also the rounding residual, fp16(x 2^r - its fp16), at
 * its second row (the difference is exact in fp32, so the two parts hold x to ~2^-22). VEC: the row read once, 16 bytes
 * a thread, kept in registers (K % 4 == 0, K <= 4 * 256 * SPLIT_F16_VEC, the rows 16-byte aligned) and written as
 * half2 pairs, which f16_pos keeps side by side; else two passes over the row, a value a thread. Same bits either way
 * (each value rounded on its own; the row's largest magnitude whatever the order). Why VEC: the scalar form moved
 * ~1.1 TB/s (4,096 tokens: 4.2 ms of a prompt's ~103, session 36 call 4). */
#define SPLIT_F16_VEC 4
template <bool VEC>
__global__ void tc_split_f16_kernel(const float *x, int ldx, const int32_t *gather, const int32_t *offsets,
                                    const int32_t *counts, int E, int precise, int K, int perm, __half *xs,
                                    int32_t *rshift) {
    const int p = blockIdx.x;
    const float *xr = x + (size_t)(gather ? gather[p] : p) * ldx;
    int e;
    long lo;
    const long row = f16_pair_rows(p, offsets, counts, E, precise, &e, &lo);
    const int ld = perm ? gptoss_prompt_row(K) : K;
    __half *hi_row = xs + (size_t)row * ld, *lo_row = lo >= 0 ? xs + (size_t)lo * ld : NULL;
    int r; /* the row's shift */
    if constexpr (VEC) {
        float4 v[SPLIT_F16_VEC];
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < SPLIT_F16_VEC; i++) {
            const int k = 4 * (threadIdx.x + i * blockDim.x);
            v[i] = k < K ? *(const float4 *)(xr + k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w))));
        }
        r = f16_row_shift(block_max(m));
        const float sc = ldexpf(1.0f, r);
#pragma unroll
        for (int i = 0; i < SPLIT_F16_VEC; i++) {
            const int k = 4 * (threadIdx.x + i * blockDim.x);
            if (k >= K) break;
            const float a[4] = {v[i].x * sc, v[i].y * sc, v[i].z * sc, v[i].w * sc};
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                const __half2 h = __floats2half2_rn(a[j], a[j + 1]);
                *(__half2 *)(hi_row + f16_pos(k + j, perm)) = h;
                if (lo_row)
                    *(__half2 *)(lo_row + f16_pos(k + j, perm)) =
                        __floats2half2_rn(a[j] - __low2float(h), a[j + 1] - __high2float(h));
            }
        }
    } else {
        float m = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, fabsf(xr[k]));
        r = f16_row_shift(block_max(m));
        const float sc = ldexpf(1.0f, r);
        for (int k = threadIdx.x; k < K; k += blockDim.x) {
            const float v = xr[k] * sc;
            const __half hv = __float2half_rn(v);
            hi_row[f16_pos(k, perm)] = hv;
            if (lo_row) lo_row[f16_pos(k, perm)] = __float2half_rn(v - __half2float(hv));
        }
    }
    f16_row_pad(hi_row, K, perm);
    if (lo_row) f16_row_pad(lo_row, K, perm);
    if (threadIdx.x == 0) rshift[p] = r;
}

/* The fp16 form of tc_swiglu_split_kernel: pair p's gate_up row (one part, or a precise pair's two parts summed,
 * times 2^(c_e - r_p)) plus the bias, through gptoss_swiglu_value into shared memory ([I] floats), then written as
 * the down GEMM's fp16 row with its own shift (rshift_out[p]), and a precise pair's residual row as
 * tc_split_f16_kernel writes it. */
__global__ void tc_swiglu_f16_kernel(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int precise, int I,
                                     const uint16_t *b, const int32_t *shift, const int32_t *rshift_in, float alpha,
                                     float limit, int perm, __half *xs, int32_t *rshift_out) {
    extern __shared__ float act[];
    const int p = blockIdx.x, N = 2 * I;
    int e = 0;
    long lo;
    const long row = f16_pair_rows(p, offsets, counts, E, precise, &e, &lo);
    const uint16_t *bb = b ? b + (size_t)e * N : NULL;
    const float unscale = ldexpf(1.0f, shift[e] - rshift_in[p]);
    float m = 0.0f;
    for (int j = 2 * threadIdx.x; j < I; j += 2 * blockDim.x) {
        float4 v = *(const float4 *)(ys + row * N + 2 * j); /* gate j, up j, gate j+1, up j+1 */
        if (lo >= 0) add_part4(&v, ys + lo * N + 2 * j); /* a precise pair */
        v.x *= unscale; v.y *= unscale; v.z *= unscale; v.w *= unscale;
        if (bb) add_bias4(&v, bb + 2 * j);
        act[j] = gptoss_swiglu_value(v.x, v.y, alpha, limit);
        act[j + 1] = gptoss_swiglu_value(v.z, v.w, alpha, limit);
        m = fmaxf(m, fmaxf(fabsf(act[j]), fabsf(act[j + 1])));
    }
    const int r = f16_row_shift(block_max(m)); /* its barriers also order act[] */
    const float sc = ldexpf(1.0f, r);
    const int ld = perm ? gptoss_prompt_row(I) : I;
    for (int j = 2 * threadIdx.x; j < I; j += 2 * blockDim.x) { /* j, j + 1 side by side in either order */
        const float a0 = act[j] * sc, a1 = act[j + 1] * sc;
        const __half2 h = __floats2half2_rn(a0, a1);
        *(__half2 *)(xs + row * ld + f16_pos(j, perm)) = h;
        if (lo >= 0)
            *(__half2 *)(xs + lo * ld + f16_pos(j, perm)) = __floats2half2_rn(a0 - __low2float(h), a1 - __high2float(h));
    }
    f16_row_pad(xs + row * ld, I, perm);
    if (lo >= 0) f16_row_pad(xs + lo * ld, I, perm);
    if (threadIdx.x == 0) rshift_out[p] = r;
}

/* shift[e] = the largest of expert e's nscales scale bytes - 127 - GPTOSS_TC_F16_TOP (one block per expert). */
__global__ void mxfp4_f16_shift_kernel(const uint8_t *scales, long nscales, int32_t *shift) {
    const uint8_t *sc = scales + (size_t)blockIdx.x * nscales;
    unsigned m = 0;
    for (long i = threadIdx.x; i < nscales; i += blockDim.x) m = max(m, (unsigned)sc[i]);
    const float mm = block_max((float)m);
    if (threadIdx.x == 0) shift[blockIdx.x] = (int)mm - 127 - GPTOSS_TC_F16_TOP;
}

/* The frame of the block-per-thread dequantization kernels (one thread per MXFP4 block of expert blockIdx.y,
 * nblocks per expert): dq_begin stages the e2m1 table in tbl (a barrier: every thread calls it) and says whether
 * the thread has a block, *g its index among all experts' (blocks, scales and the 4-uint4 groups of w): none past
 * the expert's end or for an expert without tokens (counts[e] == 0); dq_store writes its 32 16-bit values. */
static __device__ __forceinline__ bool dq_begin(float *tbl, long nblocks, const int32_t *counts, long *g) {
    if (threadIdx.x < 16) tbl[threadIdx.x] = c_tc_fp4[threadIdx.x];
    __syncthreads();
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblocks || (counts && counts[blockIdx.y] == 0)) return false;
    *g = (long)blockIdx.y * nblocks + i;
    return true;
}

static __device__ __forceinline__ void dq_store(uint4 *w, long i, const uint32_t out[16]) {
    uint4 *o = w + 4 * i;
    o[0] = make_uint4(out[0], out[1], out[2], out[3]);
    o[1] = make_uint4(out[4], out[5], out[6], out[7]);
    o[2] = make_uint4(out[8], out[9], out[10], out[11]);
    o[3] = make_uint4(out[12], out[13], out[14], out[15]);
}

/* 32 fp16 values fp4 x 2^(s-127-c_e) per MXFP4 block (as mxfp4_dequant_fast_kernel below for bf16), rounded to
 * nearest (exact where the power of two keeps fp16's range). */
__global__ void mxfp4_dequant_f16_kernel(const uint4 *blocks, const uint8_t *scales, const int32_t *shift, long nblocks,
                                         uint4 *w, const int32_t *counts) {
    __shared__ float tbl[16];
    long i;
    if (!dq_begin(tbl, nblocks, counts, &i)) return;
    const uint4 b = blocks[i];
    const int ex = (int)scales[i] - 127 - shift[blockIdx.y];
    /* 2^ex; below 2^-140 every fp4 x 2^ex rounds to an fp16 zero anyway */
    const float sc = ex < -140 ? 0.0f : ldexpf(1.0f, ex);
    const uint32_t word[4] = {b.x, b.y, b.z, b.w};
    uint32_t out[16];
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const uint32_t byte = (word[j >> 2] >> (8 * (j & 3))) & 0xffu;
        const __half2 h = __floats2half2_rn(tbl[byte & 15] * sc, tbl[byte >> 4] * sc); /* k even low, odd high */
        out[j] = *(const uint32_t *)&h;
    }
    dq_store(w, i, out);
}

/* The dense reduce for G column segments of one GEMM output (ys rows of ld columns): segment g =
 * blockIdx.y covers columns seg[g].off .. + seg[g].n and writes (or adds to) y_g[r, n] = sum_s
 * ys[s * rows + r, off + n] + b[off + n]; blockIdx.x is the row, blockIdx.z a chunk of TC_REDUCE_COLS
 * columns (one block per row alone left a decode step's lm_head, 201,088 columns, on 8..64 blocks: ~0.65
 * ms of a ~0.95 ms linear on the H200). Per output the same sums in the same order as tc_reduce_kernel. */
#define TC_REDUCE_COLS 1024
__global__ void tc_reduce_segs_kernel(const float *ys, int ld, int rows, int splits, const uint16_t *b,
                                      gptoss_tc_segs segs, int accumulate) {
    const int p = blockIdx.x, g = blockIdx.y;
    const int off = segs.off[g], N = segs.n[g];
    const int n0 = blockIdx.z * TC_REDUCE_COLS, n1 = min(N, n0 + TC_REDUCE_COLS);
    const float *yr0 = ys + (size_t)p * ld + off;
    float *yr = segs.y[g] + (size_t)p * segs.ldy[g];
    for (int n = n0 + threadIdx.x; n < n1; n += blockDim.x) {
        const float v = gptoss_tc_part_sum(yr0 + n, (size_t)rows * ld, splits, b ? b + off + n : NULL);
        yr[n] = accumulate ? yr[n] + v : v;
    }
}


/* One thread per packed byte i of the expert: its two values are elements 2i and 2i+1 of W_e [N, K]
 * (byte j of block (n, kb) holds k = kb*32 + 2j in the low nibble), scale index i / 16. */
__global__ void mxfp4_dequant_kernel(const uint8_t *blocks, const uint8_t *scales, long nbytes, uint32_t *w,
                                     const int32_t *counts) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nbytes) return;
    if (counts && counts[blockIdx.y] == 0) return; /* an expert no token uses: left as it was */
    blocks += (size_t)blockIdx.y * nbytes;
    scales += (size_t)blockIdx.y * (nbytes / 16);
    w += (size_t)blockIdx.y * nbytes;
    const uint8_t byte = blocks[i];
    const int ex = (int)scales[i >> 4] - 127;
    const uint32_t lo = __float_as_uint(ldexpf(c_tc_fp4[byte & 15], ex)) >> 16;
    const uint32_t hi = __float_as_uint(ldexpf(c_tc_fp4[byte >> 4], ex)) >> 16;
    w[i] = lo | (hi << 16);
}

/* The same result, one thread per MXFP4 block (16 bytes in, 32 bf16 = 64 bytes out, 128-bit loads and
 * stores). Why: the kernel above indexes a __constant__ table with a per-lane nibble, which serializes
 * on up to 16 addresses per warp, and calls ldexpf twice per byte; on the H200 it ran at ~0.4 TB/s,
 * ~4 ms per layer, most of a short prompt's prefill. Here the table is in shared memory (distinct
 * banks), the scale 2^(s-127) is built from its bits (s = 0: 2^-127, a subnormal), the product fp4 x
 * scale is exact (at most 3 significant bits, subnormals kept: no fast-math), and the bf16 is its upper
 * half. s = 255 (NaN in E8M0, never in a checkpoint) takes the ldexpf path, as above. */
__global__ void mxfp4_dequant_fast_kernel(const uint4 *blocks, const uint8_t *scales, long nblocks, uint4 *w,
                                          const int32_t *counts) {
    __shared__ float tbl[16];
    long i;
    if (!dq_begin(tbl, nblocks, counts, &i)) return;
    uint32_t out[16];
    gptoss_tc_mxfp4_block(tbl, blocks[i], scales[i], out);
    dq_store(w, i, out);
}

/* ---------------------------------------------------------------- launchers */

cudaError_t gptoss_tc_split(const float *x, int ldx, const int32_t *gather, const int32_t *offsets,
                            const int32_t *counts, int E, int rows, int K, int splits, uint16_t *xs, cudaStream_t st) {
    if (rows <= 0) return cudaSuccess;
    if (splits < 2 || splits > 3 || K <= 0 || (offsets && (!counts || E <= 0))) return cudaErrorInvalidValue;
    tc_split_kernel<<<(unsigned)rows, 256, 0, st>>>(x, ldx, gather, offsets, counts, E, 0, rows, K, splits, xs);
    return cudaGetLastError();
}

cudaError_t gptoss_tc_reduce(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int rows, int N,
                             int splits, const uint16_t *b, float *y, int ldy, int accumulate, cudaStream_t st) {
    if (rows <= 0) return cudaSuccess;
    if (splits < 2 || splits > 3 || N <= 0 || (offsets && (!counts || E <= 0))) return cudaErrorInvalidValue;
    tc_reduce_kernel<<<(unsigned)rows, 256, 0, st>>>(ys, offsets, counts, E, 0, rows, N, splits, b, y, ldy, accumulate);
    return cudaGetLastError();
}

/* E experts from `blocks`/`scales` (already offset to the first) into w [E, N, K]. */
static cudaError_t dequant_launch(const uint8_t *blocks, const uint8_t *scales, const int32_t *counts, int E, int N,
                                  int K, uint16_t *w, int fast, cudaStream_t st) {
    if (N <= 0 || K <= 0 || K % 32 || E <= 0 || E > 65535) return cudaErrorInvalidValue;
    const long nbytes = (long)N * (K / 2);
    if (fast) {
        const long nblocks = nbytes / 16;
        const dim3 grid((unsigned)((nblocks + 127) / 128), (unsigned)E);
        mxfp4_dequant_fast_kernel<<<grid, 128, 0, st>>>((const uint4 *)blocks, scales, nblocks, (uint4 *)w, counts);
    } else {
        const dim3 grid((unsigned)((nbytes + 255) / 256), (unsigned)E);
        mxfp4_dequant_kernel<<<grid, 256, 0, st>>>(blocks, scales, nbytes, (uint32_t *)w, counts);
    }
    return cudaGetLastError();
}

cudaError_t gptoss_mxfp4_dequant(const uint8_t *blocks, const uint8_t *scales, int e, int N, int K, uint16_t *w,
                                 int fast, cudaStream_t st) {
    if (N <= 0 || K <= 0 || K % 32) return cudaErrorInvalidValue;
    return dequant_launch(blocks + (size_t)e * N * (K / 2), scales + (size_t)e * N * (K / 32), NULL, 1, N, K, w, fast,
                          st);
}

cudaError_t gptoss_mxfp4_dequant_all(const uint8_t *blocks, const uint8_t *scales, const int32_t *counts, int E, int N,
                                     int K, uint16_t *w, int fast, cudaStream_t st) {
    return dequant_launch(blocks, scales, counts, E, N, K, w, fast, st);
}

cudaError_t gptoss_mxfp4_f16_shifts(const uint8_t *scales, int E, int N, int K, int32_t *shift, cudaStream_t st) {
    if (N <= 0 || K <= 0 || K % 32 || E <= 0) return cudaErrorInvalidValue;
    mxfp4_f16_shift_kernel<<<(unsigned)E, 256, 0, st>>>(scales, (long)N * (K / 32), shift);
    return cudaGetLastError();
}

cudaError_t gptoss_mxfp4_dequant_f16_all(const uint8_t *blocks, const uint8_t *scales, const int32_t *shift,
                                         const int32_t *counts, int E, int N, int K, uint16_t *w, cudaStream_t st) {
    if (N <= 0 || K <= 0 || K % 32 || E <= 0 || E > 65535 || !shift) return cudaErrorInvalidValue;
    const long nblocks = (long)N * (K / 32);
    const dim3 grid((unsigned)((nblocks + 127) / 128), (unsigned)E);
    mxfp4_dequant_f16_kernel<<<grid, 128, 0, st>>>((const uint4 *)blocks, scales, shift, nblocks, (uint4 *)w, counts);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- cuBLAS */

cudaError_t gptoss_tc_blas_fail(gptoss_tc *tc, const char *what, cublasStatus_t s) {
    snprintf(tc->why, sizeof tc->why, "cuBLAS %s: %s", what, cublasGetStatusString(s));
    return cudaErrorUnknown;
}

int gptoss_tc_init(gptoss_tc *tc, cudaStream_t stream, int splits, void *cublas_ws, char *err, size_t es) {
    cublasStatus_t s;
    tc->stream = stream;
    tc->splits = splits;
    tc->why[0] = 0;
    tc->counts_fetched = 0;
    if (splits < 2 || splits > 3) {
        snprintf(err, es, "LLMR_GPTOSS_TC_SPLIT must be 2 or 3 (got %d)", splits);
        return -1;
    }
    if ((s = cublasCreate(&tc->handle)) != CUBLAS_STATUS_SUCCESS) {
        tc->handle = NULL;
        snprintf(err, es, "cublasCreate failed: %s", cublasGetStatusString(s));
        return -1;
    }
    if ((s = cublasSetStream(tc->handle, stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetWorkspace(tc->handle, cublas_ws, GPTOSS_TC_CUBLAS_WS)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(tc->handle, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))) !=
            CUBLAS_STATUS_SUCCESS) {
        snprintf(err, es, "configuring the cuBLAS handle failed: %s", cublasGetStatusString(s));
        return -1;
    }
    if (cudaMallocHost((void **)&tc->counts_host, 2 * GPTOSS_MAX_EXPERTS * sizeof(int32_t)) != cudaSuccess) {
        tc->counts_host = NULL;
        snprintf(err, es, "cannot pin %zu bytes for the expert counts", 2 * GPTOSS_MAX_EXPERTS * sizeof(int32_t));
        return -1;
    }
    /* the stacked experts' dequantization stream and its events (tc_stacked.cu) */
    if (cudaStreamCreateWithFlags(&tc->side, cudaStreamNonBlocking) != cudaSuccess) {
        tc->side = NULL;
        snprintf(err, es, "cannot create the dequantization stream");
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (cudaEventCreateWithFlags(&tc->ev_ready[i], cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&tc->ev_free[i], cudaEventDisableTiming) != cudaSuccess) {
            snprintf(err, es, "cannot create the dequantization events");
            return -1;
        }
    tc->n_streams = 1;
    tc->ahead = 1;
    return 0;
}

void gptoss_tc_destroy(gptoss_tc *tc) {
    if (!tc) return;
    if (tc->handle) cublasDestroy(tc->handle);
    if (tc->counts_host) cudaFreeHost(tc->counts_host);
    if (tc->side) cudaStreamSynchronize(tc->side); /* a prefetch may still be writing the scratch */
    if (tc->side) cudaStreamDestroy(tc->side);
    for (int i = 0; i < 2; i++) {
        if (tc->ev_ready[i]) cudaEventDestroy(tc->ev_ready[i]);
        if (tc->ev_free[i]) cudaEventDestroy(tc->ev_free[i]);
        tc->ev_ready[i] = tc->ev_free[i] = NULL;
        for (int e = 0; tc->ev_exp[i] && e < GPTOSS_MAX_EXPERTS; e++)
            if (tc->ev_exp[i][e]) cudaEventDestroy(tc->ev_exp[i][e]);
        free(tc->ev_exp[i]);
        tc->ev_exp[i] = NULL;
    }
    for (int i = 1; i < GPTOSS_TC_MAX_STREAMS; i++) {
        if (tc->aux[i]) cudaStreamSynchronize(tc->aux[i]);
        if (tc->aux_handle[i]) cublasDestroy(tc->aux_handle[i]);
        if (tc->aux[i]) cudaStreamDestroy(tc->aux[i]);
        if (tc->aux_ws[i]) cudaFree(tc->aux_ws[i]);
        if (tc->ev_join[i]) cudaEventDestroy(tc->ev_join[i]);
        tc->aux[i] = NULL;
        tc->aux_handle[i] = NULL;
        tc->aux_ws[i] = NULL;
        tc->ev_join[i] = NULL;
    }
    if (tc->ev_fork) cudaEventDestroy(tc->ev_fork);
    tc->ev_fork = NULL;
    tc->side = NULL;
    tc->handle = NULL;
    tc->counts_host = NULL;
}

/* ys[M, N] = xs[M, K] · W[N, K]^T (row-major terms): column-major W^T·xs^T, the "TN" GEMM, on GEMM stream i
 * (0: tc->stream with tc->handle; see gptoss_tc_streams_setup); W and xs bf16, or fp16 with f16. */
static cudaError_t gemm_rows_on(gptoss_tc *tc, int i, int f16, const uint16_t *W, int K, int N, int M,
                                const uint16_t *xs, float *ys) {
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t in = f16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasStatus_t s = cublasGemmEx(i ? tc->aux_handle[i] : tc->handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, in,
                                    K, xs, in, K, &zero, ys, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? cudaSuccess : gptoss_tc_blas_fail(tc, "GemmEx", s);
}

static cudaError_t gemm_rows(gptoss_tc *tc, const uint16_t *W, int K, int N, int M, const uint16_t *xs, float *ys) {
    return gemm_rows_on(tc, 0, 0, W, K, N, M, xs, ys);
}

int gptoss_tc_gemm_streams(const gptoss_tc *tc) { return tc->n_streams > 1 && tc->ev_fork ? tc->n_streams : 1; }

cudaError_t gptoss_tc_fork(gptoss_tc *tc, int ns) {
    cudaError_t r = ns > 1 ? cudaEventRecord(tc->ev_fork, tc->stream) : cudaSuccess;
    for (int i = 1; i < ns && r == cudaSuccess; i++) r = cudaStreamWaitEvent(tc->aux[i], tc->ev_fork, 0);
    return r;
}

cudaError_t gptoss_tc_join(gptoss_tc *tc, int ns, cudaError_t r) {
    for (int i = 1; i < ns; i++) {
        cudaError_t r2 = cudaEventRecord(tc->ev_join[i], tc->aux[i]);
        if (r2 == cudaSuccess) r2 = cudaStreamWaitEvent(tc->stream, tc->ev_join[i], 0);
        if (r == cudaSuccess) r = r2;
    }
    return r;
}

/* split (none with x NULL: tc->xs holds it), GEMM and one reduce launch writing the segments: the dense linears'
 * common body */
static cudaError_t dense_segs(gptoss_tc *tc, int S, const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T,
                              int K, int N, const gptoss_tc_segs *segs, int accumulate) {
    if (T <= 0) return cudaSuccess;
    if (S < 1 || S > 3 || K % 8 || !gptoss_tc_fits(tc, S, T, K, N)) return cudaErrorInvalidValue;
    int nmax = 0;
    for (int g = 0; g < segs->count; g++) nmax = segs->n[g] > nmax ? segs->n[g] : nmax;
    cudaError_t e = x ? gptoss_tc_split(x, ldx, NULL, NULL, NULL, 0, T, K, S, tc->xs, tc->stream) : cudaSuccess;
    if (e == cudaSuccess) e = gemm_rows(tc, W, K, N, S * T, tc->xs, tc->ys);
    if (e != cudaSuccess) return e;
    const dim3 grid((unsigned)T, (unsigned)segs->count, (unsigned)((nmax + TC_REDUCE_COLS - 1) / TC_REDUCE_COLS));
    tc_reduce_segs_kernel<<<grid, 256, 0, tc->stream>>>(tc->ys, N, T, S, b, *segs, accumulate);
    return cudaGetLastError();
}

int gptoss_tc_fits(const gptoss_tc *tc, int splits, int T, int K, int N) {
    return (size_t)splits * T * K <= tc->xs_elems && (size_t)splits * T * N <= tc->ys_elems;
}

cudaError_t gptoss_tc_gemm_split(gptoss_tc *tc, int splits, const uint16_t *W, int K, int N, int T) {
    if (T <= 0) return cudaSuccess;
    if (splits < 1 || splits > 3 || K % 8 || N <= 0 || !gptoss_tc_fits(tc, splits, T, K, N)) return cudaErrorInvalidValue;
    return gemm_rows(tc, W, K, N, splits * T, tc->xs, tc->ys);
}

cudaError_t gptoss_tc_linear(gptoss_tc *tc, int splits, const float *x, int ldx, const uint16_t *W, const uint16_t *b,
                             int T, int K, int N, float *y, int ldy, int accumulate) {
    if (N <= 0 || ldy < N) return cudaErrorInvalidValue;
    const gptoss_tc_segs one = {1, {0, 0, 0}, {N, 0, 0}, {ldy, 0, 0}, {y, NULL, NULL}};
    return dense_segs(tc, splits, x, ldx, W, b, T, K, N, &one, accumulate);
}

cudaError_t gptoss_tc_linear_segs(gptoss_tc *tc, int splits, const float *x, int ldx, const uint16_t *W, const uint16_t *b,
                                  int T, int K, const gptoss_tc_segs *segs) {
    const int G = segs->count;
    if (T <= 0) return cudaSuccess;
    if (G < 1 || G > GPTOSS_TC_MAX_SEGS) return cudaErrorInvalidValue;
    int N = 0;
    for (int g = 0; g < G; g++) {
        if (segs->off[g] != N || segs->n[g] <= 0 || !segs->y[g] || segs->ldy[g] < segs->n[g]) return cudaErrorInvalidValue;
        N += segs->n[g];
    }
    return dense_segs(tc, splits, x, ldx, W, b, T, K, N, segs, 0);
}

int gptoss_tc_streams_setup(gptoss_tc *tc, int n_streams, char *err, size_t es) {
    if (n_streams < 1 || n_streams > GPTOSS_TC_MAX_STREAMS) {
        snprintf(err, es, "LLMR_GPTOSS_TC_STREAMS must be 1..%d (got %d)", GPTOSS_TC_MAX_STREAMS, n_streams);
        return -1;
    }
    if (!tc->ev_fork && cudaEventCreateWithFlags(&tc->ev_fork, cudaEventDisableTiming) != cudaSuccess) {
        tc->ev_fork = NULL;
        snprintf(err, es, "cannot create the GEMM streams' fork event");
        return -1;
    }
    for (int i = 1; i < n_streams; i++) {
        if (tc->aux[i]) continue;
        cublasStatus_t bs;
        if (cudaStreamCreateWithFlags(&tc->aux[i], cudaStreamNonBlocking) != cudaSuccess) {
            tc->aux[i] = NULL;
            snprintf(err, es, "cannot create GEMM stream %d", i);
            return -1;
        }
        if (cudaEventCreateWithFlags(&tc->ev_join[i], cudaEventDisableTiming) != cudaSuccess) {
            tc->ev_join[i] = NULL;
            snprintf(err, es, "cannot create GEMM stream %d's join event", i);
            return -1;
        }
        if (cudaMalloc(&tc->aux_ws[i], GPTOSS_TC_CUBLAS_WS) != cudaSuccess) {
            tc->aux_ws[i] = NULL;
            snprintf(err, es, "no GPU memory for GEMM stream %d's %zu-byte cuBLAS workspace", i, GPTOSS_TC_CUBLAS_WS);
            return -1;
        }
        if ((bs = cublasCreate(&tc->aux_handle[i])) != CUBLAS_STATUS_SUCCESS) {
            tc->aux_handle[i] = NULL;
            snprintf(err, es, "cublasCreate for GEMM stream %d failed: %s", i, cublasGetStatusString(bs));
            return -1;
        }
        if ((bs = cublasSetStream(tc->aux_handle[i], tc->aux[i])) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasSetWorkspace(tc->aux_handle[i], tc->aux_ws[i], GPTOSS_TC_CUBLAS_WS)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasSetMathMode(tc->aux_handle[i], (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                                      CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))) !=
                CUBLAS_STATUS_SUCCESS) {
            snprintf(err, es, "configuring GEMM stream %d's cuBLAS handle failed: %s", i, cublasGetStatusString(bs));
            return -1;
        }
    }
    tc->n_streams = n_streams;
    return 0;
}

/* n = E, or 2E with the precise rows' counts (tc->counts_fetched says which, for gptoss_tc_mlp's check). */
static cudaError_t fetch_counts(gptoss_tc *tc, const int32_t *counts_dev, int E, int n) {
    tc->counts_fetched = 0;
    if (E <= 0 || E > GPTOSS_MAX_EXPERTS) return cudaErrorInvalidValue;
    cudaError_t e = cudaMemcpyAsync(tc->counts_host, counts_dev, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                    tc->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(tc->stream);
    if (e == cudaSuccess) tc->counts_fetched = n;
    return e;
}

cudaError_t gptoss_tc_fetch_counts(gptoss_tc *tc, const int32_t *counts_dev, int E) {
    return fetch_counts(tc, counts_dev, E, E);
}

cudaError_t gptoss_tc_fetch_counts_precise(gptoss_tc *tc, const int32_t *counts_dev, int E) {
    return fetch_counts(tc, counts_dev, E, 2 * E);
}

static cudaError_t experts_batched(gptoss_tc *tc, const float *x, int ldx, const int32_t *gather, const uint8_t *blocks,
                                   const uint8_t *scales, const uint16_t *wbf_all, const uint16_t *b,
                                   const int32_t *counts_dev, const int32_t *offsets_dev, int E, int P, int K, int N,
                                   int pad, float *y) {
    const int S = tc->splits;
    tc_split_kernel<<<(unsigned)P, 256, 0, tc->stream>>>(x, ldx, gather, offsets_dev, counts_dev, E, pad, P, K, S,
                                                         tc->xs);
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess && !wbf_all)
        r = gptoss_mxfp4_dequant_all(blocks, scales, counts_dev, E, N, K, tc->wbf, tc->fast_dequant, tc->stream);
    const uint16_t *W = wbf_all ? wbf_all : tc->wbf;
    const float one = 1.0f, zero = 0.0f;
    for (int s = 0; s < S && r == cudaSuccess; s++) {
        cublasStatus_t bs = cublasGemmStridedBatchedEx(
            tc->handle, CUBLAS_OP_T, CUBLAS_OP_N, N, pad, K, &one, W, CUDA_R_16BF, K, (long long)N * K,
            tc->xs + (size_t)s * E * pad * K, CUDA_R_16BF, K, (long long)pad * K, s ? &one : &zero, tc->ys, CUDA_R_32F,
            N, (long long)pad * N, E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) r = gptoss_tc_blas_fail(tc, "GemmStridedBatchedEx", bs);
    }
    if (r == cudaSuccess) {
        tc_reduce_kernel<<<(unsigned)P, 256, 0, tc->stream>>>(tc->ys, offsets_dev, counts_dev, E, pad, P, N, S, b, y, N,
                                                              0);
        r = cudaGetLastError();
    }
    return r;
}

int gptoss_tc_counts_match(const gptoss_tc *tc, int E, int P) {
    long total = 0;
    for (int e = 0; e < E; e++) total += tc->counts_host[e];
    return total == P;
}

/* Whether the grouped scratch and the fetched counts fit a P-pair projection [N, K] (wbf_all: the expert cache). */
static int experts_fit(const gptoss_tc *tc, const uint16_t *wbf_all, int E, int P, int K, int N) {
    const int S = tc->splits;
    if (K % 32 || !gptoss_tc_fits(tc, S, P, K, N) || (!wbf_all && (size_t)N * K > tc->wbf_elems) ||
        E > GPTOSS_MAX_EXPERTS)
        return 0;
    return gptoss_tc_counts_match(tc, E, P);
}

/* The batched layout's rows per expert (every expert padded to the busiest one's rows), or 0 for the
 * per-expert layout: batched is used unless tc->no_batched, when the padding fits the scratch (at most ~2x
 * the pairs). */
static long experts_pad(const gptoss_tc *tc, const uint16_t *wbf_all, int E, int K, int N) {
    int most = 0;
    for (int e = 0; e < E; e++)
        if (tc->counts_host[e] > most) most = tc->counts_host[e];
    const long pad = (most + 15) & ~15L;
    const int S = tc->splits;
    return !tc->no_batched && (size_t)S * E * pad * K <= tc->xs_elems && (size_t)E * pad * N <= tc->ys_elems &&
                   (wbf_all || (size_t)E * N * K <= tc->wbf_elems)
               ? pad
               : 0;
}

/* w = the used experts' weights (counts on the device) or expert e's alone (e >= 0) in bf16, or in fp16 with
 * shift (the fp16 experts). */
static cudaError_t experts_dequant(gptoss_tc *tc, const uint8_t *blocks, const uint8_t *scales, const int32_t *shift,
                                   const int32_t *counts_dev, int e, int E, int K, int N, uint16_t *w) {
    if (e >= 0 && shift)
        return gptoss_mxfp4_dequant_f16_all(blocks + (size_t)e * N * (K / 2), scales + (size_t)e * N * (K / 32),
                                            shift + e, NULL, 1, N, K, w, tc->stream);
    if (e >= 0) return gptoss_mxfp4_dequant(blocks, scales, e, N, K, w, tc->fast_dequant, tc->stream);
    if (shift) return gptoss_mxfp4_dequant_f16_all(blocks, scales, shift, counts_dev, E, N, K, w, tc->stream);
    return gptoss_mxfp4_dequant_all(blocks, scales, counts_dev, E, N, K, w, tc->fast_dequant, tc->stream);
}

/* The per-expert layout's GEMMs, x already split into tc->xs: expert e's S * cnt_e partial rows into tc->ys
 * from row S * off_e (S = 1 and fp16 weights and rows where shift is given: the fp16 experts; with lo_host, their
 * precise rows, cnt_e + lo_e rows from off_e + lo_off_e: f16_pair_rows' layout). dq_all: one
 * launch for every used expert (experts without tokens skipped on the device); with the cache (wbf_all),
 * none. With every weight in place the GEMMs go round robin over the GEMM streams (forked after the split
 * and the dequantization, joined before the caller's reduce). */
static cudaError_t experts_gemms(gptoss_tc *tc, const uint8_t *blocks, const uint8_t *scales, const int32_t *shift,
                                 const uint16_t *wbf_all, const int32_t *counts_dev, const int32_t *lo_host, int E, int K,
                                 int N) {
    const int S = shift ? 1 : tc->splits;
    const int all = wbf_all || (tc->dq_all && (size_t)E * N * K <= tc->wbf_elems);
    const uint16_t *W = wbf_all ? wbf_all : tc->wbf;
    cudaError_t r = cudaSuccess;
    if (all && !wbf_all) r = experts_dequant(tc, blocks, scales, shift, counts_dev, -1, E, K, N, tc->wbf);
    const int ns = all ? gptoss_tc_gemm_streams(tc) : 1;
    if (r == cudaSuccess) r = gptoss_tc_fork(tc, ns);
    long row = 0; /* the expert's first row */
    int j = 0;    /* used experts so far: the j-th goes to GEMM stream j % ns */
    for (int e = 0; e < E && r == cudaSuccess; e++) {
        const int cnt = tc->counts_host[e], rows = S * cnt + (lo_host ? lo_host[e] : 0);
        if (cnt == 0) continue;
        const uint16_t *w = all ? W + (size_t)e * N * K : tc->wbf;
        if (!all) r = experts_dequant(tc, blocks, scales, shift, counts_dev, e, E, K, N, tc->wbf);
        if (r == cudaSuccess)
            r = gemm_rows_on(tc, j++ % ns, shift != NULL, w, K, N, rows, tc->xs + (size_t)row * K, tc->ys + (size_t)row * N);
        row += rows;
    }
    return gptoss_tc_join(tc, ns, r);
}

cudaError_t gptoss_tc_experts(gptoss_tc *tc, const float *x, int ldx, const int32_t *gather, const uint8_t *blocks,
                              const uint8_t *scales, const uint16_t *wbf_all, const uint16_t *b,
                              const int32_t *counts_dev, const int32_t *offsets_dev, int E, int P, int K, int N,
                              float *y) {
    if (P <= 0) return cudaSuccess;
    if (!experts_fit(tc, wbf_all, E, P, K, N)) return cudaErrorInvalidValue;
    const long pad = experts_pad(tc, wbf_all, E, K, N);
    if (pad)
        return experts_batched(tc, x, ldx, gather, blocks, scales, wbf_all, b, counts_dev, offsets_dev, E, P, K, N,
                               (int)pad, y);
    cudaError_t r = gptoss_tc_split(x, ldx, gather, offsets_dev, counts_dev, E, P, K, tc->splits, tc->xs, tc->stream);
    if (r == cudaSuccess) r = experts_gemms(tc, blocks, scales, NULL, wbf_all, counts_dev, NULL, E, K, N);
    if (r == cudaSuccess)
        r = gptoss_tc_reduce(tc->ys, offsets_dev, counts_dev, E, P, N, tc->splits, b, y, N, 0, tc->stream);
    return r;
}

/* Whether mlp_f16 runs its GEMMs on gptoss_mxfp4_prompt_gemm: up to tc->prompt_mma tokens where the tiled weights
 * exist, the device is sm_90 and the kernel's rows (P + 4 Tp of gptoss_prompt_row values) fit the scratch. */
static int mlp_f16_mma(const gptoss_tc *tc, const gptoss_tc_experts_w *gu, const gptoss_tc_experts_w *dn, int T, int Tp,
                       int H, int I) {
    const int R = T * GPTOSS_TOPK + 4 * Tp; /* rows with the precise rows' second parts */
    return tc->prompt_mma >= T && gu->tiled && dn->tiled && gptoss_mxfp4_prompt_gemm_ok() &&
           gptoss_tc_fits(tc, 1, R, gptoss_prompt_row(H), 2 * I) && gptoss_tc_fits(tc, 1, R, gptoss_prompt_row(I), H);
}

int gptoss_tc_mlp_device_counts(const gptoss_tc *tc, const gptoss_tc_experts_w *gu, const gptoss_tc_experts_w *dn, int E,
                                int T, int Tp, int H, int I) {
    return tc->f16 && tc->no_batched && T > 0 && Tp >= 0 && Tp <= T && E > 0 && E <= GPTOSS_MAX_EXPERTS && gu->shift &&
           dn->shift && I <= GPTOSS_TC_F16_MAX_I && I % 2 == 0 && H % 4 == 0 && mlp_f16_mma(tc, gu, dn, T, Tp, H, I);
}

/* gptoss_tc_mlp on the fp16 experts (tc.h): the checks gptoss_tc_mlp made, then split (fp16, row shifts into
 * rshift[0, P)), gate_up GEMMs, SwiGLU + fp16 split (shifts into rshift[P, 2P)), down GEMMs, combine; the pairs of
 * the precise rows (Tp > 0) with a second fp16 part in rows of their own (f16_pair_rows). */
static cudaError_t mlp_f16(gptoss_tc *tc, const float *h, int ldh, const int32_t *gather, const gptoss_tc_experts_w *gu,
                           const gptoss_tc_experts_w *dn, const int32_t *counts_dev, const int32_t *offsets_dev,
                           const float *rw, const int32_t *pair_of, int E, int T, int Tp, int H, int I, float alpha,
                           float limit, float *x) {
    const int P = T * GPTOSS_TOPK;
    if (!gu->shift || !dn->shift || (size_t)2 * P > tc->rshift_elems || !tc->rshift) return cudaErrorInvalidValue;
    if (I > GPTOSS_TC_F16_MAX_I) return cudaErrorNotSupported;
    const int32_t *lo_host = NULL;
    /* the GEMMs straight from the MXFP4 weights up to tc->prompt_mma tokens (the same rows in and out, in the order
     * and length gptoss_prompt_pos gives them; the counts read on the device), else cuBLAS */
    const int mma = mlp_f16_mma(tc, gu, dn, T, Tp, H, I);
    if (Tp > 0 && !mma) { /* the second parts' rows: counts fetched with them, each expert's lo_e within its pairs, 4 Tp
                           * in all */
        if (tc->counts_fetched != 2 * E) return cudaErrorInvalidValue;
        lo_host = tc->counts_host + E;
        long lo = 0;
        for (int e = 0; e < E; e++) {
            if (lo_host[e] < 0 || lo_host[e] > tc->counts_host[e]) return cudaErrorInvalidValue;
            lo += lo_host[e];
        }
        if (lo != (long)Tp * GPTOSS_TOPK || !gptoss_tc_fits(tc, 1, P + (int)lo, H, 2 * I) ||
            !gptoss_tc_fits(tc, 1, P + (int)lo, I, H))
            return cudaErrorInvalidValue;
    }
    const int precise = Tp > 0, R = P + 4 * Tp; /* rows with the precise rows' second parts */
    int32_t *rs_gu = tc->rshift, *rs_dn = tc->rshift + P;
    /* the experts tiled in their place without the expert cache (model.cu prompt_kernel_covers): nothing else can
     * read them, so a chunk the kernel cannot take fails here rather than dequantizing from no weights */
    if (!mma && (!gu->bf16 || !dn->bf16) && (!gu->blocks || !gu->scales || !dn->blocks || !dn->scales))
        return cudaErrorNotSupported;
    /* without precise rows pair p's row is p: no offsets, so no search for its expert (the split needs none) */
    const int vec = H % 4 == 0 && H <= 4 * 256 * SPLIT_F16_VEC && ldh % 4 == 0 && !((uintptr_t)h & 15);
    (vec ? tc_split_f16_kernel<true> : tc_split_f16_kernel<false>)<<<(unsigned)P, 256, 0, tc->stream>>>(
        h, ldh, gather, precise ? offsets_dev : NULL, counts_dev, E, precise, H, mma, (__half *)tc->xs, rs_gu);
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess)
        r = mma ? gptoss_mxfp4_prompt_gemm(tc->xs, gu->tiled, gu->shift, counts_dev, offsets_dev, precise, E, R, H, 2 * I, 1,
                                           tc->ys, tc->stream)
                : experts_gemms(tc, gu->blocks, gu->scales, gu->shift, gu->bf16, counts_dev, lo_host, E, H, 2 * I);
    if (r == cudaSuccess) {
        tc_swiglu_f16_kernel<<<(unsigned)P, 256, (size_t)I * sizeof(float), tc->stream>>>(
            tc->ys, offsets_dev, counts_dev, E, precise, I, gu->bias, gu->shift, rs_gu, alpha, limit, mma,
            (__half *)tc->xs, rs_dn);
        r = cudaGetLastError();
    }
    if (r == cudaSuccess)
        r = mma ? gptoss_mxfp4_prompt_gemm(tc->xs, dn->tiled, dn->shift, counts_dev, offsets_dev, precise, E, R, I, H, 0,
                                           tc->ys, tc->stream)
                : experts_gemms(tc, dn->blocks, dn->scales, dn->shift, dn->bf16, counts_dev, lo_host, E, I, H);
    if (r == cudaSuccess) {
        tc_reduce_combine_kernel<true><<<(unsigned)T, 256, 0, tc->stream>>>(tc->ys, offsets_dev, counts_dev, E, P, H, 1,
                                                                            dn->bias, rw, pair_of, dn->shift, rs_dn,
                                                                            precise, x);
        r = cudaGetLastError();
    }
    return r;
}

cudaError_t gptoss_tc_mlp(gptoss_tc *tc, const float *h, int ldh, const int32_t *gather, const gptoss_tc_experts_w *gu,
                          const gptoss_tc_experts_w *dn, const int32_t *counts_dev, const int32_t *offsets_dev,
                          const float *rw, const int32_t *pair_of, int E, int T, int Tp, int H, int I, float alpha,
                          float limit, float *x) {
    const int P = T * GPTOSS_TOPK;
    if (T <= 0) return cudaSuccess;
    if (Tp < 0 || Tp > T || (Tp > 0 && !tc->f16)) return cudaErrorInvalidValue;
    if (gptoss_tc_mlp_device_counts(tc, gu, dn, E, T, Tp, H, I)) { /* no host counts needed (nor maybe fetched) */
        if ((uintptr_t)x & 15) return cudaErrorNotSupported;
        return mlp_f16(tc, h, ldh, gather, gu, dn, counts_dev, offsets_dev, rw, pair_of, E, T, Tp, H, I, alpha, limit, x);
    }
    if (!experts_fit(tc, gu->bf16, E, P, H, 2 * I) || !experts_fit(tc, dn->bf16, E, P, I, H)) return cudaErrorInvalidValue;
    if (I % 2 || H % 4 || ((uintptr_t)x & 15) || experts_pad(tc, gu->bf16, E, H, 2 * I) || experts_pad(tc, dn->bf16, E, I, H))
        return cudaErrorNotSupported;
    if (tc->f16)
        return mlp_f16(tc, h, ldh, gather, gu, dn, counts_dev, offsets_dev, rw, pair_of, E, T, Tp, H, I, alpha, limit, x);
    const int S = tc->splits;
    cudaError_t r = gptoss_tc_split(h, ldh, gather, offsets_dev, counts_dev, E, P, H, S, tc->xs, tc->stream);
    if (r == cudaSuccess) r = experts_gemms(tc, gu->blocks, gu->scales, NULL, gu->bf16, counts_dev, NULL, E, H, 2 * I);
    if (r == cudaSuccess) {
        tc_swiglu_split_kernel<<<(unsigned)P, 256, 0, tc->stream>>>(tc->ys, offsets_dev, counts_dev, E, P, I, S, gu->bias,
                                                                    alpha, limit, tc->xs);
        r = cudaGetLastError();
    }
    if (r == cudaSuccess) r = experts_gemms(tc, dn->blocks, dn->scales, NULL, dn->bf16, counts_dev, NULL, E, I, H);
    if (r == cudaSuccess) {
        tc_reduce_combine_kernel<false><<<(unsigned)T, 256, 0, tc->stream>>>(tc->ys, offsets_dev, counts_dev, E, P, H, S,
                                                                             dn->bias, rw, pair_of, NULL, NULL, 0, x);
        r = cudaGetLastError();
    }
    return r;
}
