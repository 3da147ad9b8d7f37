/* attention_decode.cu — decode attention split over keys (flash-decoding), see kernels.h.
 *
 * Why: the per-head decode kernel (attention.cu) gives each head one block whose lanes each own a key
 * and a 64-float accumulator, then merges 32 lanes x 64 dims with shuffles; at a short context that
 * merge dominates and only 64 blocks run, and at a long context one block per head walks every key.
 * Here block (row b, KV head g, split s) takes up to GPTOSS_ATT_SPLITS-th of the keys for all the query
 * heads that share KV head g (GQA: K/V are read once per block, not once per query head): warp = query
 * head; per step of 32 keys each lane scores one key (64-dim dot), the warp updates one online softmax,
 * and then lanes own value dims (lane, lane + 32), so V rows are read coalesced and only the 32
 * probabilities move by shuffle. Each split writes (max, sum, acc[64]) to a scratch slot; the last block
 * of a (row, KV head) to finish (a counter, reset by that block) merges the splits in split order with
 * the sink, so the result does not depend on which block ran first. */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/pdl.h"

#define AD_WARPS 8

__global__ void __launch_bounds__(AD_WARPS * 32) attention_decode_kernel(const float *q, gptoss_kv kv, const uint16_t *sinks,
                                                                        const int32_t *pos_dev, int n_heads, int n_kv,
                                                                        int window, float *out, float *part,
                                                                        int32_t *counters, int pdl) {
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): q and the new K/V come from the kernel before */
    const int D = GPTOSS_HEAD_DIM, NS = gridDim.y;
    const int b = blockIdx.x / n_kv, g = blockIdx.x % n_kv, s = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = n_heads / n_kv;
    const int pos = pos_dev[b];
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const int nkeys = pos - lo + 1;
    /* split s covers keys [k0, k1): whole steps of 32 keys, splits past the end are empty */
    const int steps = (nkeys + 31) / 32, per = (steps + NS - 1) / NS;
    const int k0 = lo + s * per * 32, k1 = min(pos + 1, k0 + per * 32);
    __shared__ int last;
    for (int hh = warp; hh < gq; hh += AD_WARPS) {
        const int h = g * gq + hh;
        float qv[GPTOSS_HEAD_DIM];
        gptoss_attn_load_q(q + ((size_t)b * n_heads + h) * D, qv);
        float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f;
        for (int j0 = k0; j0 < k1; j0 += 32) {
            const int j = j0 + lane;
            const float sc = j < k1 ? gptoss_attn_score(qv, (const float4 *)(gptoss_kv_k(kv, b, j) + (size_t)g * D)) : -INFINITY;
            float f;
            const float p = gptoss_attn_step(sc, j < k1, &m, &l, &f);
            a0 *= f;
            a1 *= f;
            const int nj = min(32, k1 - j0);
#pragma unroll 8
            for (int jj = 0; jj < nj; jj++) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
                const float *v = gptoss_kv_v(kv, b, j0 + jj) + (size_t)g * D;
                a0 = fmaf(pj, v[lane], a0);
                a1 = fmaf(pj, v[lane + 32], a1);
            }
        }
        float *slot = part + (((size_t)b * n_heads + h) * NS + s) * GPTOSS_ATTN_SLOT;
        if (lane == 0) { slot[0] = m; slot[1] = l; }
        slot[2 + lane] = a0;
        slot[2 + 32 + lane] = a1;
    }
    /* the last of the NS blocks of (b, g) merges */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[b * n_kv + g], 1) == NS - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x == 0) counters[b * n_kv + g] = 0;
    /* splits past the keys hold (max -inf, sum 0, acc 0) and would add exact zeros: skip them */
    const int na = min(NS, (steps + per - 1) / per);
    for (int hh = warp; hh < gq; hh += AD_WARPS) {
        const int h = g * gq + hh;
        gptoss_attn_merge_splits(part + ((size_t)b * n_heads + h) * NS * GPTOSS_ATTN_SLOT, na, gptoss_bf16_to_f32(sinks[h]),
                                 lane, out + ((size_t)b * n_heads + h) * D);
    }
}

cudaError_t gptoss_attention_decode(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                    int n_heads, int n_kv, int window, float *out, float *part, int32_t *counters,
                                    cudaStream_t s) {
    if (B <= 0 || n_heads <= 0 || n_kv <= 0 || n_heads % n_kv != 0 || !pos || !part || !counters || !kv.pool ||
        !kv.table || kv.kvd != n_kv * GPTOSS_HEAD_DIM)
        return cudaErrorInvalidValue;
    const cudaError_t e = gptoss_launch(attention_decode_kernel, dim3((unsigned)(B * n_kv), GPTOSS_ATT_SPLITS),
                                        dim3(AD_WARPS * 32), 0, s, B == 1 && gptoss_pdl_enabled(), q, kv, sinks, pos,
                                        n_heads, n_kv, window, out, part, counters, (int)(B == 1 && gptoss_pdl_enabled()));
    return e != cudaSuccess ? e : cudaGetLastError();
}
