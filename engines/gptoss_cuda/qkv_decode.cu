/* qkv_decode.cu — the attention prologue of a decode step in one launch (see kernels.h):
 * RMSNorm of the residual, the q, k and v projections (three bf16 matrices, with bias), YaRN RoPE on q
 * and k, and the new token's K/V stored into this layer's cache row *pos.
 *
 * Why one kernel: the prologue was 7 launches (norm, 3 GEMVs, 2 RoPEs, the store), each a GEMV-sized
 * ramp-up and drain; the norm is cheap to recompute per block (2880 floats from L2), so every block
 * normalizes x into shared memory and then streams weight rows like gptoss_gemv1 (16-byte loads, several
 * in flight per lane). A warp owns the rotate-half pair of rows (i, i + 32) of one head, so RoPE is
 * applied in the epilogue with both halves in registers: the angle float(pos) * inv_freq[i], cos/sin
 * times attn_factor, exactly as gptoss_rope. */
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
    /* Every small read of the block goes out first, in parallel: x and the norm weights of this thread's
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
            const float ang = (float)pos * cc.z;
            const float cs = cosf(ang) * af, sn = sinf(ang) * af;
            const float x1 = a1, x2 = a2;
            a1 = x1 * cs - x2 * sn;
            a2 = x2 * cs + x1 * sn;
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
