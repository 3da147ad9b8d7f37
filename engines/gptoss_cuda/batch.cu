/* batch.cu — kernels of the batched decode step (continuous batching) that the single-sequence
 * launchers do not cover: RoPE with one position per row, and the row kernels around the tensor-core q/k/v
 * (see kernels.h). */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/tc.h"

/* One thread per (row, head, i < 32); the rotation of rope_kernel (gptoss_rope_pair), so a row gives the bits a
 * one-token gptoss_rope at the same position gives. */
__global__ void rope_rows_kernel(float *x, int ld, int B, int n_heads, const int32_t *pos, const float *inv_freq,
                                 float af) {
    const int half = GPTOSS_HEAD_DIM / 2;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * n_heads * half) return;
    const int i = (int)(idx % half);
    const int h = (int)((idx / half) % n_heads);
    const int b = (int)(idx / ((long)half * n_heads));
    float *v = x + (size_t)b * ld + (size_t)h * GPTOSS_HEAD_DIM;
    gptoss_rope_pair(v[i], v[i + half], pos[b], inv_freq[i], af, &v[i], &v[i + half]);
}

cudaError_t gptoss_rope_rows(float *x, int ld, int B, int n_heads, const int32_t *pos, const float *inv_freq, float af,
                             cudaStream_t s) {
    const long n = (long)B * n_heads * (GPTOSS_HEAD_DIM / 2);
    if (n <= 0 || !pos) return cudaErrorInvalidValue;
    rope_rows_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, ld, B, n_heads, pos, inv_freq, af);
    return cudaGetLastError();
}

/* ---- the row kernels around the batched step's tensor-core q/k/v (kernels.h gptoss_rows_norm_split,
 * gptoss_rows_qkv_finish), with the same expressions in the same order per value as the kernels they replace
 * (moe_combine_kernel, rmsnorm_kernel, tc_split_kernel; tc_reduce_segs_kernel, rope_rows_kernel, kv_store_kernel).
 * Each gives their bits (checked): the finish through the same rotation (gptoss_rope_pair). */

#define RNS_THREADS 256
#define RNS_PER_THREAD 16 /* values of a row each thread keeps in registers */
static_assert(RNS_THREADS * RNS_PER_THREAD == GPTOSS_ROWS_NORM_MAX_H, "a row's values fit the block's registers");

/* One block per row t: the MoE's weighted sum added to x (when y), the row's sum of squares, then h = (x r) w and
 * its bf16 parts. Every load of the row (x, y's rows and the norm's weights) comes before the first store: the stores
 * may alias what is read as far as the compiler knows, so a load after a store waited for the store's inputs, one
 * memory round trip per element (~12 a row for x, 16 more for the weights behind the stores of h). */
__global__ void __launch_bounds__(RNS_THREADS)
    rows_norm_split_kernel(const float *y, const float *cw, const int32_t *pair_of, float *x, const uint16_t *nw, int H,
                           float eps, int rows, int splits, float *h, uint16_t *xs) {
    __shared__ float part[32];
    const int t = blockIdx.x;
    float *xr = x + (size_t)t * H;
    float xv[RNS_PER_THREAD];
    float ss = 0.0f;
    float nv[RNS_PER_THREAD]; /* the norm's weights, loaded before the stores too */
    float w4[GPTOSS_TOPK]; /* the row's routing weights and the rows of y its pairs landed in */
    const float *y4[GPTOSS_TOPK];
#pragma unroll
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        w4[k] = y ? cw[(size_t)t * GPTOSS_TOPK + k] : 0.0f;
        y4[k] = y ? y + (size_t)pair_of[(size_t)t * GPTOSS_TOPK + k] * H : NULL;
    }
#pragma unroll
    for (int j = 0; j < RNS_PER_THREAD; j++) {
        const int i = threadIdx.x + j * RNS_THREADS;
        xv[j] = nv[j] = 0.0f;
        if (i >= H) continue;
        nv[j] = gptoss_bf16_to_f32(nw[i]);
        float v = xr[i];
        if (y) { /* moe_combine_kernel's sum */
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < GPTOSS_TOPK; k++) s += w4[k] * y4[k][i];
            v += s;
        }
        xv[j] = v;
        ss += v * v;
    }
    if (y)
#pragma unroll
        for (int j = 0; j < RNS_PER_THREAD; j++) {
            const int i = threadIdx.x + j * RNS_THREADS;
            if (i < H) xr[i] = xv[j];
        }
    const float r = rsqrtf(gptoss_block_sum(ss, part) / (float)H + eps);
#pragma unroll
    for (int j = 0; j < RNS_PER_THREAD; j++) {
        const int i = threadIdx.x + j * RNS_THREADS;
        if (i >= H) continue;
        const float hv = (xv[j] * r) * nv[j];
        h[(size_t)t * H + i] = hv;
        gptoss_tc_split_value(hv, xs + (size_t)t * H + i, (size_t)rows * H, splits); /* tc_split_kernel's parts */
    }
}

cudaError_t gptoss_rows_norm_split(const float *y, const float *w, const int32_t *pair_of, float *x, const uint16_t *norm_w,
                                   int B, int H, float eps, int splits, float *h, uint16_t *xs, cudaStream_t s) {
    if (B <= 0 || H <= 0 || H > GPTOSS_ROWS_NORM_MAX_H || splits < 1 || splits > 3 || !x || !norm_w || !h || !xs ||
        (y && (!w || !pair_of)))
        return cudaErrorInvalidValue;
    rows_norm_split_kernel<<<B, RNS_THREADS, 0, s>>>(y, w, pair_of, x, norm_w, H, eps, B, splits, h, xs);
    return cudaGetLastError();
}

/* Column col of row t: its parts summed with the bias as tc_reduce_segs_kernel does (gptoss_tc_part_sum). */
static __device__ __forceinline__ float rqf_value(const float *ys, int ld, int rows, int splits, const uint16_t *b, int t,
                                                  int col) {
    return gptoss_tc_part_sum(ys + (size_t)t * ld + col, (size_t)rows * ld, splits, b ? b + col : NULL);
}

/* Grid (items / 256, rows): item j of row t is a RoPE pair of a query head (j < NH 32), of a key head (then written to
 * the cache), or a value feature. */
__global__ void rows_qkv_finish_kernel(const float *ys, int ld, int rows, int splits, const uint16_t *b, int NH, int NKV,
                                       const int32_t *pos, const float *inv_freq, float af, float *q, const gptoss_kv kv) {
    const int half = GPTOSS_HEAD_DIM / 2, QD = NH * GPTOSS_HEAD_DIM, KVD = NKV * GPTOSS_HEAD_DIM;
    const int t = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    const int nq = NH * half, nk = NKV * half;
    if (j >= nq + nk + KVD) return;
    const int p = pos[t];
    if (j >= nq + nk) { /* a value feature */
        const int f = j - nq - nk;
        gptoss_kv_v(kv, t, p)[f] = rqf_value(ys, ld, rows, splits, b, t, QD + KVD + f);
        return;
    }
    const bool is_q = j < nq;
    const int jj = is_q ? j : j - nq, i = jj % half, col = (is_q ? 0 : QD) + (jj / half) * GPTOSS_HEAD_DIM + i;
    const float x1 = rqf_value(ys, ld, rows, splits, b, t, col), x2 = rqf_value(ys, ld, rows, splits, b, t, col + half);
    float *v = is_q ? q + (size_t)t * QD + (col - i) : gptoss_kv_k(kv, t, p) + (col - QD - i);
    gptoss_rope_pair(x1, x2, p, inv_freq[i], af, &v[i], &v[i + half]);
}

cudaError_t gptoss_rows_qkv_finish(const float *ys, int ld, int B, int splits, const uint16_t *b, int n_heads, int n_kv,
                                   const int32_t *pos, const float *inv_freq, float attn_factor, float *q, gptoss_kv kv,
                                   cudaStream_t s) {
    const int items = (n_heads + n_kv) * (GPTOSS_HEAD_DIM / 2) + n_kv * GPTOSS_HEAD_DIM;
    if (B <= 0 || B > 65535 || splits < 1 || splits > 3 || !ys || !pos || !q || ld < (n_heads + 2 * n_kv) * GPTOSS_HEAD_DIM ||
        kv.kvd != n_kv * GPTOSS_HEAD_DIM || !kv.pool || !kv.table)
        return cudaErrorInvalidValue;
    rows_qkv_finish_kernel<<<dim3((unsigned)((items + 255) / 256), (unsigned)B), 256, 0, s>>>(
        ys, ld, B, splits, b, n_heads, n_kv, pos, inv_freq, attn_factor, q, kv);
    return cudaGetLastError();
}
