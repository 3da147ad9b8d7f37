/* qkv_decode.cu — the attention prologue of a decode step in one launch (see kernels.h):
 * RMSNorm of the residual, the q, k and v projections (three bf16 matrices, with bias), YaRN RoPE on q
 * and k, and the new token's K/V stored into this layer's cache row *pos.
 *
 * Why one kernel: the prologue was 7 launches (norm, 3 GEMVs, 2 RoPEs, the store), each a GEMV-sized
 * ramp-up and drain; the norm is cheap to recompute per block (2880 floats from L2), so every block
 * normalizes x into shared memory and then streams weight rows like gptoss_gemv1 (16-byte loads, several
 * in flight per lane). A warp owns the rotate-half pair of rows (i, i + 32) of one head, so RoPE is
 * applied in the epilogue with both halves in registers: the angle float(pos) * inv_freq[i], cos/sin
 * times attn_factor, exactly as gptoss_rope.
 *
 * gptoss_qkv_rows (session 19): the same prologue for the n <= 8 rows of a small batched step, each weight load
 * serving every row. Each row's arithmetic is the one-token kernel's (its sum of squares in the same order, its dot
 * products in the same expression and lane order, the same RoPE), so a row of a batched step gets the bits it would
 * get alone; where the step took cuBLAS with the activations split in two bf16 parts (~1e-5) and 6 launches. */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/pdl.h"

#define QKV_WARPS 8
#define QKV_UNROLL 6
#define QKV_XREG 12 /* elements of x per thread held in registers: 3,072 with 256 threads (gpt-oss: 2,880) */

/* Row pair tp of the stacked heads (NH of q, NKV of k, NKV of v; 32 pairs a head): the matrix (or bias)
 * it lies in, of qm, km and vm, and its first row n1 there; the second row is n1 + 32. */
static __device__ __forceinline__ const uint16_t *qkv_pair_rows(int tp, int NH, int NKV, const uint16_t *qm,
                                                                const uint16_t *km, const uint16_t *vm, int *n1) {
    const int half = GPTOSS_HEAD_DIM / 2, head = tp / half, i = tp % half;
    const uint16_t *M = head < NH ? qm : head < NH + NKV ? km : vm;
    const int hl = head < NH ? head : head < NH + NKV ? head - NH : head - NH - NKV;
    *n1 = hl * GPTOSS_HEAD_DIM + i;
    return M;
}

/* The bias pair (rows i, i + 32 of its head) and the RoPE frequency of row pair tp. */
static __device__ __forceinline__ float3 qkv_row_pair_consts(int tp, int NH, int NKV, const uint16_t *qb,
                                                             const uint16_t *kb, const uint16_t *vb,
                                                             const float *inv_freq) {
    const int half = GPTOSS_HEAD_DIM / 2;
    int n1;
    const uint16_t *B = qkv_pair_rows(tp, NH, NKV, qb, kb, vb, &n1);
    return make_float3(gptoss_bf16_to_f32(B[n1]), gptoss_bf16_to_f32(B[n1 + half]), inv_freq[tp % half]);
}

static __device__ __forceinline__ float bf16x8_dot(uint4 v, float4 a, float4 d) {
    return a.x * __uint_as_float(v.x << 16) + a.y * __uint_as_float(v.x & 0xffff0000u) + a.z * __uint_as_float(v.y << 16) +
           a.w * __uint_as_float(v.y & 0xffff0000u) + d.x * __uint_as_float(v.z << 16) +
           d.y * __uint_as_float(v.z & 0xffff0000u) + d.z * __uint_as_float(v.w << 16) + d.w * __uint_as_float(v.w & 0xffff0000u);
}

__global__ void __launch_bounds__(QKV_WARPS * 32) qkv_decode_kernel(const float *x, const uint16_t *norm_w, float eps,
                                                                   const uint16_t *qw, const uint16_t *qb,
                                                                   const uint16_t *kw, const uint16_t *kb,
                                                                   const uint16_t *vw, const uint16_t *vb, int H, int NH,
                                                                   int NKV, const int32_t *pos_dev, const float *inv_freq,
                                                                   float af, float *q, gptoss_kv kv, int pdl) {
    extern __shared__ float4 xs4[]; /* [2][H / 8]: the two float4 halves of each 8-element chunk */
    __shared__ float red[QKV_WARPS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, K8 = H / 8;
    const int half = GPTOSS_HEAD_DIM / 2, pairs = (NH + 2 * NKV) * half;
    { /* PDL (pdl.h): this warp's first row pair into L2 (static weights), then wait for x */
        const int tp = blockIdx.x * QKV_WARPS + warp;
        if (pdl && tp < pairs) {
            int n1;
            const uint16_t *W = qkv_pair_rows(tp, NH, NKV, qw, kw, vw, &n1);
            gptoss_prefetch_range(W + (size_t)n1 * H, (size_t)H * 2, lane, 32);
            gptoss_prefetch_range(W + (size_t)(n1 + half) * H, (size_t)H * 2, lane, 32);
        }
        gptoss_pdl_sync(pdl);
    }
    /* (The weights wait for the norm: the warp's first pass issued before it measured 12% slower, session 43, with the
     * spills that keeping 3 blocks per SM then forced.)
     * Every small read of the block goes out first, in parallel: x and the norm weights of this thread's
     * elements (kept in registers for both passes), the position, and lane 0's bias pair and RoPE
     * frequency of the warp's first row pair (so none of them is a round trip of its own later on). */
    float xr[QKV_XREG], nw[QKV_XREG];
#pragma unroll
    for (int u = 0; u < QKV_XREG; u++) {
        const int i = tid + u * QKV_WARPS * 32;
        xr[u] = i < H ? x[i] : 0.0f;
        nw[u] = i < H ? gptoss_bf16_to_f32(norm_w[i]) : 0.0f;
    }
    const int pos = *pos_dev;
    const int tp0 = blockIdx.x * QKV_WARPS + warp;
    float3 cst0 = make_float3(0.0f, 0.0f, 0.0f); /* bias pair and frequency of row pair tp0 */
    if (lane == 0 && tp0 < pairs) cst0 = qkv_row_pair_consts(tp0, NH, NKV, qb, kb, vb, inv_freq);
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < QKV_XREG; u++) ss += xr[u] * xr[u];
    for (int i = tid + QKV_XREG * QKV_WARPS * 32; i < H; i += blockDim.x) ss += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    float tot = 0.0f;
    for (int w = 0; w < QKV_WARPS; w++) tot += red[w];
    const float r = rsqrtf(tot / (float)H + eps);
    float *xsf = (float *)xs4;
#pragma unroll
    for (int u = 0; u < QKV_XREG; u++) {
        const int i = tid + u * QKV_WARPS * 32, c = i >> 3, j = i & 7;
        if (i < H) xsf[((j >> 2) * K8 + c) * 4 + (j & 3)] = (xr[u] * r) * nw[u];
    }
    for (int i = tid + QKV_XREG * QKV_WARPS * 32; i < H; i += blockDim.x) {
        const int c = i >> 3, j = i & 7;
        xsf[((j >> 2) * K8 + c) * 4 + (j & 3)] = (x[i] * r) * gptoss_bf16_to_f32(norm_w[i]);
    }
    __syncthreads();
    const uint32_t zero = (uint32_t)H >> 31;
    for (int tp = tp0; tp < pairs; tp += gridDim.x * QKV_WARPS) {
        const int head = tp / half, i = tp % half;
        /* qkv_pair_rows's mapping, spelled out: through the helper the loop compiles to other code
         * (different PTX), which would need a GPU timing before it lands */
        const uint16_t *W;
        int hl; /* head index inside its matrix */
        if (head < NH) { W = qw; hl = head; }
        else if (head < NH + NKV) { W = kw; hl = head - NH; }
        else { W = vw; hl = head - NH - NKV; }
        const int n1 = hl * GPTOSS_HEAD_DIM + i, n2 = n1 + half;
        const uint4 *w1 = (const uint4 *)(W + (size_t)n1 * H), *w2 = (const uint4 *)(W + (size_t)n2 * H);
        float a1 = 0.0f, a2 = 0.0f;
        for (int c0 = lane; c0 < K8; c0 += 32 * QKV_UNROLL) {
            uint4 v1[QKV_UNROLL], v2[QKV_UNROLL];
#pragma unroll
            for (int u = 0; u < QKV_UNROLL; u++) {
                const int c = c0 + 32 * u;
                v1[u] = c < K8 ? __ldcs(w1 + c) : make_uint4(0u, 0u, 0u, 0u);
                v2[u] = c < K8 ? __ldcs(w2 + c) : make_uint4(0u, 0u, 0u, 0u);
            }
            { /* The pass's first product waits for all 12 of its loads: dep & zero is 0 at run time but not known to
               * the compiler (H > 0). ptxas already issued the 12 together; what this changes is that the products
               * start once, after the last one lands, instead of following each load in. Measured (session 44, ncu
               * at real clocks, 3 calls): this kernel 13.0 -> 12.75-12.82 us, batch-1 +0.1-0.2%. The same trick made
               * the T = 1 down 9% slower and o_proj 1.6% slower (s44-lead/call2), so it is not a general rule. */
                uint32_t dep = 0u;
#pragma unroll
                for (int u = 0; u < QKV_UNROLL; u++) dep |= v1[u].x | v2[u].x;
                v1[0].x |= dep & zero;
            }
#pragma unroll
            for (int u = 0; u < QKV_UNROLL; u++) {
                const int c = c0 + 32 * u;
                if (c < K8) {
                    const float4 a = xs4[c], d = xs4[K8 + c];
                    a1 += bf16x8_dot(v1[u], a, d);
                    a2 += bf16x8_dot(v2[u], a, d);
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            a1 += __shfl_xor_sync(0xffffffffu, a1, o);
            a2 += __shfl_xor_sync(0xffffffffu, a2, o);
        }
        if (lane != 0) continue;
        const float3 cc = tp == tp0 ? cst0 : qkv_row_pair_consts(tp, NH, NKV, qb, kb, vb, inv_freq);
        a1 += cc.x;
        a2 += cc.y;
        if (head < NH + NKV) { /* RoPE, as rope_kernel */
            const float x1 = a1, x2 = a2;
            gptoss_rope_pair(x1, x2, pos, cc.z, af, &a1, &a2);
        }
        if (head < NH) { q[n1] = a1; q[n2] = a2; }
        else { /* the new token's K/V into its page (block table row 0) */
            float *dst = head < NH + NKV ? gptoss_kv_k(kv, 0, pos) : gptoss_kv_v(kv, 0, pos);
            dst[n1] = a1;
            dst[n2] = a2;
        }
    }
}

cudaError_t gptoss_qkv_decode(const float *x, const uint16_t *norm_w, float eps, const uint16_t *q_w, const uint16_t *q_b,
                              const uint16_t *k_w, const uint16_t *k_b, const uint16_t *v_w, const uint16_t *v_b, int H,
                              int n_heads, int n_kv, const int32_t *pos, const float *inv_freq, float attn_factor,
                              float *q, gptoss_kv kv, cudaStream_t s) {
    if (H <= 0 || H % 8 || H > GPTOSS_DECODE_MAX_K || n_heads <= 0 || n_kv <= 0 || !pos ||
        (((uintptr_t)q_w | (uintptr_t)k_w | (uintptr_t)v_w) & 15) || kv.kvd != n_kv * GPTOSS_HEAD_DIM)
        return cudaErrorInvalidValue;
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    /* 4 blocks per SM: every block normalizes x once and then loops over row pairs */
    const long pairs = (long)(n_heads + 2 * n_kv) * (GPTOSS_HEAD_DIM / 2);
    long blocks = (long)sms * 4;
    const long need = (pairs + QKV_WARPS - 1) / QKV_WARPS;
    if (blocks > need) blocks = need;
    e = gptoss_launch(qkv_decode_kernel, dim3((unsigned)blocks), dim3(QKV_WARPS * 32), (size_t)H * sizeof(float), s,
                      gptoss_pdl_enabled(), x, norm_w, eps, q_w, q_b, k_w, k_b, v_w, v_b, H, n_heads, n_kv, pos, inv_freq,
                      attn_factor, q, kv, gptoss_pdl_enabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* ------------------------------------------------------------------ several rows: gptoss_qkv_rows */


/* Rows r < nrows of x normalized into xs4 (row r at xs4 + 2 r K8, the one-token kernel's layout): for each row its
 * sum of squares in that kernel's order (each thread its elements tid, tid + 256, ..., then the xor shuffles, then
 * the 8 warps' partial sums in order), so each row's h is bit for bit what that kernel computes alone. x is read once:
 * the first pass leaves it in place in shared memory, the second normalizes it there.
 * The loads go out as the one-token kernel's do, all at once: two rows' QKV_XREG elements a thread and the norm weights
 * in registers before any is used. (As a loop over i each store waited for its load: a round trip per 256 elements,
 * ~24 for two rows of the 20b, and the norm weights' 12 more after the barrier; ncu put the 2-row kernel at 19.7 µs
 * against the one-token kernel's 12.6 for the same weights, session 50.) */
static __device__ __forceinline__ int qkv_xs_index(int i, int K8) { return ((i & 7) >> 2) * K8 * 4 + (i >> 3) * 4 + (i & 3); }

template <int R>
static __device__ __forceinline__ void qkv_rows_norm(const float *x, const uint16_t *norm_w, float eps, int H, int nrows,
                                                     float4 *xs4, float (*red)[QKV_WARPS]) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, K8 = H / 8;
    float *xsf = (float *)xs4;
    float ss[R], nw[QKV_XREG];
#pragma unroll
    for (int r = 0; r < R; r++) ss[r] = 0.0f;
#pragma unroll
    for (int u = 0; u < QKV_XREG; u++) {
        const int i = tid + u * QKV_WARPS * 32;
        nw[u] = i < H ? gptoss_bf16_to_f32(norm_w[i]) : 0.0f;
    }
#pragma unroll
    for (int r0 = 0; r0 < R; r0 += 2) { /* two rows at a time: 24 loads in flight, 24 registers */
        if (r0 >= nrows) break;
        float xr[2][QKV_XREG];
#pragma unroll
        for (int g = 0; g < 2; g++)
#pragma unroll
            for (int u = 0; u < QKV_XREG; u++) {
                const int i = tid + u * QKV_WARPS * 32;
                xr[g][u] = r0 + g < nrows && i < H ? x[(size_t)(r0 + g) * H + i] : 0.0f;
            }
#pragma unroll
        for (int g = 0; g < 2; g++) {
            if (r0 + g >= nrows) break;
#pragma unroll
            for (int u = 0; u < QKV_XREG; u++) {
                const int i = tid + u * QKV_WARPS * 32;
                if (i < H) {
                    ss[r0 + g] += xr[g][u] * xr[g][u];
                    xsf[(size_t)(r0 + g) * H + qkv_xs_index(i, K8)] = xr[g][u];
                }
            }
            for (int i = tid + QKV_XREG * QKV_WARPS * 32; i < H; i += blockDim.x) { /* H > 3,072: the rest, in order */
                const float v = x[(size_t)(r0 + g) * H + i];
                ss[r0 + g] += v * v;
                xsf[(size_t)(r0 + g) * H + qkv_xs_index(i, K8)] = v;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        for (int o = 16; o > 0; o >>= 1) ss[r] += __shfl_xor_sync(0xffffffffu, ss[r], o);
        if (lane == 0) red[r][warp] = ss[r];
    }
    __syncthreads();
    float rs[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        float tot = 0.0f;
        for (int w = 0; w < QKV_WARPS; w++) tot += red[r][w];
        rs[r] = rsqrtf(tot / (float)H + eps);
    }
#pragma unroll
    for (int u = 0; u < QKV_XREG; u++) {
        const int i = tid + u * QKV_WARPS * 32;
        if (i < H) {
            const int xi = qkv_xs_index(i, K8);
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < nrows) xsf[(size_t)r * H + xi] = (xsf[(size_t)r * H + xi] * rs[r]) * nw[u];
        }
    }
    for (int i = tid + QKV_XREG * QKV_WARPS * 32; i < H; i += blockDim.x) {
        const int xi = qkv_xs_index(i, K8);
        const float w = gptoss_bf16_to_f32(norm_w[i]);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < nrows) xsf[(size_t)r * H + xi] = (xsf[(size_t)r * H + xi] * rs[r]) * w;
    }
    __syncthreads();
}

/* Weight loads in flight per lane and the blocks per SM the registers are capped for, by rows: more rows, more
 * arithmetic per load, fewer loads needed in flight (the chunk order per lane is the same at any unroll) */
template <int R> struct qkv_rows_cfg { enum { UNROLL = R <= 2 ? QKV_UNROLL : 4, MINB = R <= 4 ? 3 : 2 }; };

template <int R>
__global__ void __launch_bounds__(QKV_WARPS * 32, qkv_rows_cfg<R>::MINB) qkv_rows_kernel(const float *x, const uint16_t *norm_w, float eps,
                                                                  const uint16_t *qw, const uint16_t *qb,
                                                                  const uint16_t *kw, const uint16_t *kb,
                                                                  const uint16_t *vw, const uint16_t *vb, int H, int NH,
                                                                  int NKV, int nrows, const int32_t *pos_dev,
                                                                  const float *inv_freq, float af, float *q, gptoss_kv kv) {
    extern __shared__ float4 xs4[]; /* row r: [2][H / 8] at 2 r (H / 8) */
    __shared__ float red[R][QKV_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, K8 = H / 8, QD = NH * GPTOSS_HEAD_DIM;
    const int half = GPTOSS_HEAD_DIM / 2, pairs = (NH + 2 * NKV) * half;
    /* lane 0's small reads of the warp's first row pair (bias pair, RoPE frequency) and the rows' positions go out
     * before the norm's, as in the one-token kernel: after the sums each was a round trip of its own */
    const int tp0 = blockIdx.x * QKV_WARPS + warp;
    float3 cst0 = make_float3(0.0f, 0.0f, 0.0f);
    int posr[R];
#pragma unroll
    for (int r = 0; r < R; r++) posr[r] = 0;
    if (lane == 0) {
        if (tp0 < pairs) cst0 = qkv_row_pair_consts(tp0, NH, NKV, qb, kb, vb, inv_freq);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < nrows) posr[r] = pos_dev[r];
    }
    qkv_rows_norm<R>(x, norm_w, eps, H, nrows, xs4, red);
    /* parked in shared memory for the epilogue: held in registers through the weight loop they cost spills */
    __shared__ float4 wcst[QKV_WARPS];
    __shared__ int wpos[QKV_WARPS][R];
    if (lane == 0) {
        wcst[warp] = make_float4(cst0.x, cst0.y, cst0.z, 0.0f);
#pragma unroll
        for (int r = 0; r < R; r++) wpos[warp][r] = posr[r];
    }
    __syncwarp();
    for (int tp = tp0; tp < pairs; tp += gridDim.x * QKV_WARPS) {
        const int head = tp / half;
        int n1;
        const uint16_t *W = qkv_pair_rows(tp, NH, NKV, qw, kw, vw, &n1);
        const int n2 = n1 + half;
        const uint4 *w1 = (const uint4 *)(W + (size_t)n1 * H), *w2 = (const uint4 *)(W + (size_t)n2 * H);
        float a1[R], a2[R];
#pragma unroll
        for (int r = 0; r < R; r++) a1[r] = a2[r] = 0.0f;
        constexpr int U = qkv_rows_cfg<R>::UNROLL;
        for (int c0 = lane; c0 < K8; c0 += 32 * U) {
            uint4 v1[U], v2[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + 32 * u;
                v1[u] = c < K8 ? __ldcs(w1 + c) : make_uint4(0u, 0u, 0u, 0u);
                v2[u] = c < K8 ? __ldcs(w2 + c) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + 32 * u;
                if (c < K8)
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        if (r >= nrows) break;
                        const float4 a = xs4[(size_t)2 * r * K8 + c], d = xs4[(size_t)(2 * r + 1) * K8 + c];
                        a1[r] += bf16x8_dot(v1[u], a, d);
                        a2[r] += bf16x8_dot(v2[u], a, d);
                    }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
            for (int o = 16; o > 0; o >>= 1) {
                a1[r] += __shfl_xor_sync(0xffffffffu, a1[r], o);
                a2[r] += __shfl_xor_sync(0xffffffffu, a2[r], o);
            }
        if (lane != 0) continue;
        const float3 cc = tp == tp0 ? make_float3(wcst[warp].x, wcst[warp].y, wcst[warp].z)
                                    : qkv_row_pair_consts(tp, NH, NKV, qb, kb, vb, inv_freq);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= nrows) break;
            const int pos = wpos[warp][r];
            float b1 = a1[r] + cc.x, b2 = a2[r] + cc.y;
            if (head < NH + NKV) { /* RoPE, as rope_kernel and the one-token kernel */
                const float x1 = b1, x2 = b2;
                gptoss_rope_pair(x1, x2, pos, cc.z, af, &b1, &b2);
            }
            if (head < NH) {
                q[(size_t)r * QD + n1] = b1;
                q[(size_t)r * QD + n2] = b2;
            } else { /* row r's new K/V into its page (block table row r) */
                float *dst = head < NH + NKV ? gptoss_kv_k(kv, r, pos) : gptoss_kv_v(kv, r, pos);
                dst[n1] = b1;
                dst[n2] = b2;
            }
        }
    }
}

/* Launches qkv_rows_kernel<R>, opting it into its shared memory at the first launch (not a stream operation). */
template <int R>
static cudaError_t qkv_rows_launch(int blocks, const float *x, const uint16_t *norm_w, float eps, const uint16_t *q_w,
                                   const uint16_t *q_b, const uint16_t *k_w, const uint16_t *k_b, const uint16_t *v_w,
                                   const uint16_t *v_b, int H, int NH, int NKV, int n, const int32_t *pos,
                                   const float *inv_freq, float af, float *q, gptoss_kv kv, cudaStream_t s) {
    const size_t smem = (size_t)R * H * sizeof(float);
    static size_t opted; /* the largest size opted in so far */
    if (smem > 48 * 1024 && smem > opted) {
        const cudaError_t e = cudaFuncSetAttribute(qkv_rows_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        opted = smem;
    }
    qkv_rows_kernel<R><<<blocks, QKV_WARPS * 32, smem, s>>>(x, norm_w, eps, q_w, q_b, k_w, k_b, v_w, v_b, H, NH, NKV, n,
                                                           pos, inv_freq, af, q, kv);
    return cudaGetLastError();
}

cudaError_t gptoss_qkv_rows(const float *x, const uint16_t *norm_w, float eps, const uint16_t *q_w, const uint16_t *q_b,
                            const uint16_t *k_w, const uint16_t *k_b, const uint16_t *v_w, const uint16_t *v_b, int H,
                            int n_heads, int n_kv, int n, const int32_t *pos, const float *inv_freq, float attn_factor,
                            float *q, gptoss_kv kv, cudaStream_t s) {
    if (n < 1 || n > GPTOSS_QKV_ROWS_MAX) return cudaErrorNotSupported;
    if (H <= 0 || H % 8 || H > GPTOSS_DECODE_MAX_K || n_heads <= 0 || n_kv <= 0 || !pos ||
        (((uintptr_t)q_w | (uintptr_t)k_w | (uintptr_t)v_w) & 15) || kv.kvd != n_kv * GPTOSS_HEAD_DIM)
        return cudaErrorInvalidValue;
    const int R = n <= 2 ? 2 : n <= 4 ? 4 : 8;
    /* one wave of blocks: as many as are resident at once (the registers' cap, qkv_rows_cfg, and each block's R
     * normalized rows in shared memory): every block normalizes the rows once, then loops over row pairs */
    if ((size_t)R * H * sizeof(float) > 200 * 1024) return cudaErrorNotSupported; /* R rows of x must fit */
    const long per_sm_smem = (long)(200 * 1024) / (long)((size_t)R * H * sizeof(float) + 1024);
    const long minb = R == 2 ? (long)qkv_rows_cfg<2>::MINB : R == 4 ? (long)qkv_rows_cfg<4>::MINB : (long)qkv_rows_cfg<8>::MINB;
    const long per_sm = per_sm_smem < minb ? (per_sm_smem < 1 ? 1 : per_sm_smem) : minb;
    const long pairs = (long)(n_heads + 2 * n_kv) * (GPTOSS_HEAD_DIM / 2), need = (pairs + QKV_WARPS - 1) / QKV_WARPS;
    long blocks = (long)gptoss_sm_count() * per_sm;
    if (blocks > need) blocks = need;
    if (R == 2)
        return qkv_rows_launch<2>((int)blocks, x, norm_w, eps, q_w, q_b, k_w, k_b, v_w, v_b, H, n_heads, n_kv, n, pos,
                                  inv_freq, attn_factor, q, kv, s);
    if (R == 4)
        return qkv_rows_launch<4>((int)blocks, x, norm_w, eps, q_w, q_b, k_w, k_b, v_w, v_b, H, n_heads, n_kv, n, pos,
                                  inv_freq, attn_factor, q, kv, s);
    return qkv_rows_launch<8>((int)blocks, x, norm_w, eps, q_w, q_b, k_w, k_b, v_w, v_b, H, n_heads, n_kv, n, pos,
                              inv_freq, attn_factor, q, kv, s);
}
