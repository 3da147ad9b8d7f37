/* attention_rows.cu — gptoss_attention_rows: the attention of a batched decode step (kernels.h).
 *
 * Why: gptoss_attention_at gives each (row, query head) a block of 8 warps whose lanes each walk their
 * own keys with a 64-float accumulator per lane. At 64 rows that is 4,096 short blocks with ~170
 * registers per thread (one block per SM at a time): ~31 waves of a latency-bound block, 7.4 ms of a
 * 42 ms 64-row step (bench/throughput with LLMR_GPTOSS_BATCH_PROFILE=1, H200), for ~2 GB of K/V.
 * How: one block per (row, KV head) with one group of W warps per query head of that KV head, so the
 * G = n_heads / n_kv heads reading the same K/V rows hit the same SM's L1. In a warp, lane i owns
 * dimensions 2i and 2i + 1: a key's K row is one coalesced 256-byte load, its score a warp xor-sum,
 * and ATR_KEYS keys are loaded before any is used (latency hidden by independent loads, not by
 * occupancy: ~40 registers per thread). The W warps of a head take interleaved groups of ATR_KEYS keys
 * (W = 4, 2 or 1 as the grid grows, so a few rows still cover the SMs) and are merged through shared
 * memory in warp order, then the sink joins the denominator. Online softmax in fp32, scores scaled by
 * 1/8; deterministic for a given W. Equal to gptoss_attention_at up to fp32 summation order.
 * Outcome (H200, kernel checks): 64 rows at ~500 keys 444 us (gptoss_attention_at 340 us), sliding layers
 * 96.5 us (202 us); in the engine slower at every row count (2-3 rows: 3.1 vs 0.46 ms per step), so it is
 * not the default (LLMR_GPTOSS_BATCH_ATTN=2). Suspected, not yet measured: __launch_bounds__(1024) caps
 * registers at 64, so the 16 keys' scores and V pairs spill; with few rows 16 blocks leave most SMs idle.
 * Next: 256-thread blocks and keys split over blocks (the flash-decoding merge of attention_decode.cu). */
#include "engines/gptoss_cuda/kernels.h"

#define ATR_KEYS 16   /* keys in flight per warp */
#define ATR_MAX_WARPS 32

__global__ void __launch_bounds__(ATR_MAX_WARPS * 32)
    attention_rows_kernel(const float *q, const gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int n_heads,
                          int n_kv, int W, int window, float *out) {
    __shared__ float sm_m[ATR_MAX_WARPS], sm_l[ATR_MAX_WARPS];
    __shared__ float2 sm_acc[ATR_MAX_WARPS][32];
    const int D = GPTOSS_HEAD_DIM;
    const int G = n_heads / n_kv;
    const int row = blockIdx.x / n_kv, kvh = blockIdx.x % n_kv;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int hw = warp / W, sw = warp % W; /* head within the group, split of that head's keys */
    const int h = kvh * G + hw;
    const int p = pos[row];
    const int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const float2 qv = ((const float2 *)(q + ((size_t)row * n_heads + h) * D))[lane];
    float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f;
    for (int j0 = lo + sw * ATR_KEYS; j0 <= p; j0 += W * ATR_KEYS) {
        float s[ATR_KEYS];
        float2 vv[ATR_KEYS];
#pragma unroll
        for (int i = 0; i < ATR_KEYS; i++) {
            const int j = j0 + i;
            if (j <= p) {
                const float *kp = gptoss_kv_k(kv, row, j) + (size_t)kvh * D;
                const float2 kk = ((const float2 *)kp)[lane];
                vv[i] = ((const float2 *)(kp + (size_t)GPTOSS_KV_PAGE * kv.kvd))[lane]; /* gptoss_kv_v */
                s[i] = qv.x * kk.x + qv.y * kk.y;
            } else {
                vv[i] = make_float2(0.0f, 0.0f);
                s[i] = 0.0f;
            }
        }
#pragma unroll
        for (int i = 0; i < ATR_KEYS; i++)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
        float mx = m;
#pragma unroll
        for (int i = 0; i < ATR_KEYS; i++) {
            s[i] *= 0.125f; /* 1/sqrt(64) */
            if (j0 + i <= p) mx = fmaxf(mx, s[i]);
        }
        const float f = expf(m - mx); /* 0 while m is -inf */
        l *= f;
        a0 *= f;
        a1 *= f;
#pragma unroll
        for (int i = 0; i < ATR_KEYS; i++)
            if (j0 + i <= p) {
                const float e = expf(s[i] - mx);
                l += e;
                a0 += e * vv[i].x;
                a1 += e * vv[i].y;
            }
        m = mx;
    }
    if (W > 1) { /* the W splits of each head merged in split order by its first warp */
        if (lane == 0) { sm_m[warp] = m; sm_l[warp] = l; }
        sm_acc[warp][lane] = make_float2(a0, a1);
        __syncthreads();
        if (sw != 0) return;
        float M = -INFINITY;
        for (int w = 0; w < W; w++) M = fmaxf(M, sm_m[warp + w]);
        l = 0.0f;
        a0 = 0.0f;
        a1 = 0.0f;
        for (int w = 0; w < W; w++) {
            const float mw = sm_m[warp + w], fw = mw == -INFINITY ? 0.0f : expf(mw - M);
            l += sm_l[warp + w] * fw;
            a0 += sm_acc[warp + w][lane].x * fw;
            a1 += sm_acc[warp + w][lane].y * fw;
        }
        m = M;
    }
    const float sink = gptoss_bf16_to_f32(sinks[h]);
    const float M = fmaxf(m, sink);
    const float fm = m == -INFINITY ? 0.0f : expf(m - M);
    const float den = l * fm + expf(sink - M);
    float2 *o = (float2 *)(out + ((size_t)row * n_heads + h) * D);
    o[lane] = make_float2(a0 * fm / den, a1 * fm / den);
}

static int g_atr_sms = 0;

cudaError_t gptoss_attention_rows(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                  int n_heads, int n_kv, int window, float *out, cudaStream_t s) {
    if (B <= 0) return cudaSuccess;
    if (n_kv <= 0 || n_heads % n_kv || n_heads / n_kv > ATR_MAX_WARPS || !pos || !kv.pool || !kv.table ||
        kv.max_pages <= 0 || kv.kvd != n_kv * GPTOSS_HEAD_DIM)
        return cudaErrorInvalidValue;
    if (!g_atr_sms) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&g_atr_sms, cudaDevAttrMultiProcessorCount, dev);
        if (e != cudaSuccess) return e;
    }
    const int G = n_heads / n_kv, blocks = B * n_kv;
    /* Splits per head: enough warps to cover the SMs a few times over when there are few rows. */
    int W = blocks >= 2 * g_atr_sms ? 1 : blocks >= g_atr_sms ? 2 : 4;
    while (W > 1 && G * W > ATR_MAX_WARPS) W /= 2;
    attention_rows_kernel<<<(unsigned)blocks, (unsigned)(G * W * 32), 0, s>>>(q, kv, sinks, pos, n_heads, n_kv, W,
                                                                             window, out);
    return cudaGetLastError();
}
