/* attention_rows.cu — gptoss_attention_rows: the attention of a batched decode step (kernels.h).
 *
 * Why: gptoss_attention_at gives each (row, query head) a block of 8 warps whose lanes each walk their
 * own keys with a 64-float accumulator per lane (~170 registers, one block per SM at a time): at 64
 * rows 7.4 ms of a 28.6 ms step for ~1-2 GB of K/V, ~10x from bandwidth (docs/performance.md). A first
 * try here (one block per (row, KV head), 1,024 threads, keys interleaved over warps) was slower still:
 * registers capped at 64 by the block size made it spill, and a few rows left most SMs idle.
 * How (flash-decoding, as attention_decode.cu, with the G = n_heads / n_kv query heads of one KV head
 * sharing every K/V load): block (row, KV head, split) of 256 threads takes chunks of ARW_C = 64 keys.
 * Per chunk: the 64 K and V rows (256 bytes each, contiguous in a page) go to shared memory with
 * cp.async, zeros past the row's last key; the G x 64 scores are computed from shared memory (thread =
 * one key and G/4 heads: each K float4 is read once for its heads), warp h turns head h's scores into
 * probabilities (online softmax in fp32, expf, running max and sum in its registers), then thread = 2
 * value dims x up to 4 heads x a group of keys accumulates P V (each V float2 read once for 4 heads).
 * After the split's last chunk the key groups are summed in group order; one split writes the output
 * with the sink, several write (max, sum, acc[64]) per head to `part` and the last block of the
 * (row, KV head) to finish (a counter it resets) merges them in split order with the sink.
 * Splits depend only on the row's own number of keys n: ceil(n / 64) chunks, one per split up to
 * ARW_SPLITS splits, then ceil(chunks / ARW_SPLITS) chunks per split; so a row's result is the same
 * whichever rows share the launch (checked bit for bit in tests/gpu/gptoss_kernels/test_rows.cu).
 * Sliding layers launch only their window's 2 splits (the host passes the largest position, which sizes
 * the grid; blocks past a row's own splits return at once).
 * Outcome (H200, docs/performance.md): 64 rows at contexts 128..2,000 130 us per full layer (2.1 TB/s of
 * K/V; gptoss_attention_at 763 us), 20 us per sliding layer (213); in the engine 7.33 -> 1.04-1.08 ms of
 * a 64-row step, 64 streams +15% out tok/s. Still latency-bound (ncu: DRAM 49% of peak, issue 64%):
 * each block loads its chunk, then computes; only other resident blocks overlap the two. */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/pdl.h"
#include "engines/gptoss_cuda/tc.h"

#define ARW_C 64        /* keys per chunk */
#define ARW_THREADS 256 /* 8 warps */
#define ARW_SPLITS GPTOSS_ATTN_ROWS_SPLITS
#define ARW_KPAD 68 /* floats per K row in shared memory: 16-byte rows, float4 reads of 8 keys hit 32 banks */

/* Splits of a row with n >= 1 keys, and chunks per split (host and device: the grid is sized by it). */
static inline __host__ __device__ int arw_chunks(int n) { return (n + ARW_C - 1) / ARW_C; }
static inline __host__ __device__ int arw_per(int n) { return (arw_chunks(n) + ARW_SPLITS - 1) / ARW_SPLITS; }
static inline __host__ __device__ int arw_splits(int n) { return (arw_chunks(n) + arw_per(n) - 1) / arw_per(n); }

static inline __device__ void arw_cp16(void *dst, const void *src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

template <int G, int MINB>
__global__ void __launch_bounds__(ARW_THREADS, MINB)
    attention_rows_kernel(const float *q, const gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int n_heads,
                          int n_kv, int window, float *out, float *part, int32_t *counters, int rows, int parts,
                          uint16_t *xs, int pdl) {
    constexpr int D = GPTOSS_HEAD_DIM;
    constexpr int HS = G < 4 ? G : 4;      /* score phase: head slots per key (threads 64 * HS busy) */
    constexpr int HQ = G < 4 ? G : 4;      /* P V phase: heads per thread */
    constexpr int NHG = G / HQ;            /* head groups (1 or 2) */
    constexpr int NKG = 8 / NHG;           /* key groups: warps / head groups */
    constexpr int KPG = ARW_C / NKG;       /* keys per group (8 or 16) */
    __shared__ __align__(16) float sK[ARW_C * ARW_KPAD]; /* K rows; after the last chunk: key-group sums */
    __shared__ __align__(16) float sV[ARW_C * D];
    __shared__ __align__(16) float sQ[G * D];
    __shared__ __align__(16) float sP[G * ARW_C]; /* scores, then probabilities */
    __shared__ float sF[G], sM[G], sL[G];
    __shared__ int last;
    static_assert(NKG * G * D <= ARW_C * ARW_KPAD, "key-group sums must fit where K was");

    gptoss_pdl_sync(pdl); /* PDL (pdl.h, the batch-1 decode graph): q, the new K/V and pos come from before */
    const int row = blockIdx.x / n_kv, g = blockIdx.x % n_kv, s = blockIdx.y;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int p = pos[row];
    const int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int n = p - lo + 1, nch = arw_chunks(n);
    int per = arw_per(n), ns = arw_splits(n);
    if (ns > (int)gridDim.y) { /* a position past the caller's max_pos (contract broken): still cover every key */
        per = (nch + gridDim.y - 1) / gridDim.y;
        ns = (nch + per - 1) / per;
    }
    if (s >= ns) return;
    const int c0 = s * per, c1 = min(nch, c0 + per);

    /* P V roles: dims 2dp, 2dp + 1 of heads hg*HQ .. +HQ-1 over keys kg*KPG .. +KPG-1 */
    const int dp = lane, hg = warp % NHG, kg = warp / NHG;
    float acc[HQ][2];
#pragma unroll
    for (int i = 0; i < HQ; i++) acc[i][0] = acc[i][1] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* softmax state of head `warp` (warp < G), the same in every lane */

    for (int c = c0; c < c1; c++) {
        const int j0 = lo + c * ARW_C, kn = min(ARW_C, p + 1 - j0);
        if (c > c0) __syncthreads(); /* the previous chunk's readers are done with sK, sV, sP */
#pragma unroll
        for (int i = 0; i < ARW_C * D / 4 / ARW_THREADS; i++) {
            const int idx = t + i * ARW_THREADS, key = idx >> 4, c4 = idx & 15;
            float *dk = sK + key * ARW_KPAD + 4 * c4, *dv = sV + key * D + 4 * c4;
            if (key < kn) {
                const float *kp = gptoss_kv_k(kv, row, j0 + key) + (size_t)g * D + 4 * c4;
                arw_cp16(dk, kp);
                arw_cp16(dv, kp + (size_t)GPTOSS_KV_PAGE * kv.kvd); /* gptoss_kv_v */
            } else { /* zeros: a 0 probability times a zero value, never times stale data */
                *(float4 *)dk = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                *(float4 *)dv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        if (c == c0 && t < G * D / 4) /* the queries, while the first chunk is in flight */
            ((float4 *)sQ)[t] = ((const float4 *)(q + ((size_t)row * n_heads + (size_t)g * G) * D))[t];
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();
        /* scores: thread = key t % 64, heads t / 64, + 4, ... (64-dim dot in dimension order) */
        if (t < ARW_C * HS) {
            const int key = t % ARW_C, h0 = t / ARW_C;
            constexpr int HT = G / HS; /* heads per thread */
            float d[HT];
#pragma unroll
            for (int i = 0; i < HT; i++) d[i] = 0.0f;
            const float4 *k4 = (const float4 *)(sK + key * ARW_KPAD);
#pragma unroll 2
            for (int c4 = 0; c4 < D / 4; c4++) {
                const float4 kk = k4[c4];
#pragma unroll
                for (int i = 0; i < HT; i++) {
                    const float4 qq = ((const float4 *)(sQ + (h0 + i * HS) * D))[c4];
                    d[i] = fmaf(qq.x, kk.x, d[i]);
                    d[i] = fmaf(qq.y, kk.y, d[i]);
                    d[i] = fmaf(qq.z, kk.z, d[i]);
                    d[i] = fmaf(qq.w, kk.w, d[i]);
                }
            }
#pragma unroll
            for (int i = 0; i < HT; i++) sP[(h0 + i * HS) * ARW_C + key] = key < kn ? d[i] * 0.125f : -INFINITY;
        }
        __syncthreads();
        /* softmax: warp h owns head h's running max and sum */
        if (warp < G) {
            float *ph = sP + warp * ARW_C;
            const float s0 = ph[lane], s1 = ph[lane + 32];
            float mx = fmaxf(s0, s1);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mn = fmaxf(m, mx); /* finite: the chunk's first key exists */
            const float f = expf(m - mn), e0 = expf(s0 - mn), e1 = expf(s1 - mn);
            float sum = e0 + e1;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            l = l * f + sum;
            m = mn;
            ph[lane] = e0;
            ph[lane + 32] = e1;
            if (lane == 0) sF[warp] = f;
        }
        __syncthreads();
        /* P V over this thread's keys */
#pragma unroll
        for (int i = 0; i < HQ; i++) {
            const float f = sF[hg * HQ + i];
            acc[i][0] *= f;
            acc[i][1] *= f;
        }
#pragma unroll
        for (int k4 = 0; k4 < KPG / 4; k4++) {
            const int k = kg * KPG + 4 * k4;
            float4 pp[HQ];
#pragma unroll
            for (int i = 0; i < HQ; i++) pp[i] = *(const float4 *)(sP + (hg * HQ + i) * ARW_C + k);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                const float2 vv = ((const float2 *)(sV + (k + kk) * D))[dp];
#pragma unroll
                for (int i = 0; i < HQ; i++) {
                    const float pk = kk == 0 ? pp[i].x : kk == 1 ? pp[i].y : kk == 2 ? pp[i].z : pp[i].w;
                    acc[i][0] = fmaf(pk, vv.x, acc[i][0]);
                    acc[i][1] = fmaf(pk, vv.y, acc[i][1]);
                }
            }
        }
    }
    /* key groups summed in group order into sK[0 .. G*64): head h, dim d */
    __syncthreads();
    float *sR = sK;
#pragma unroll
    for (int i = 0; i < HQ; i++)
        ((float2 *)(sR + ((size_t)kg * G + hg * HQ + i) * D))[dp] = make_float2(acc[i][0], acc[i][1]);
    if (warp < G && lane == 0) { sM[warp] = m; sL[warp] = l; }
    __syncthreads();
    for (int o = t; o < G * D; o += ARW_THREADS) {
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < NKG; k++) a += sR[k * G * D + o];
        const int hh = o / D, h = g * G + hh;
        if (ns == 1) { /* the only split: finish here with the sink */
            const float sink = gptoss_bf16_to_f32(sinks[h]), M = fmaxf(sM[hh], sink);
            const float fm = expf(sM[hh] - M);
            const float v = a * fm / (sL[hh] * fm + expf(sink - M));
            out[((size_t)row * n_heads + h) * D + o % D] = v;
            if (xs) /* o_proj's parts (gptoss_attention_rows_split) */
                gptoss_tc_split_value(v, xs + ((size_t)row * n_heads + h) * D + o % D, (size_t)rows * n_heads * D, parts);
        } else {
            float *slot = part + (((size_t)row * n_heads + h) * ARW_SPLITS + s) * GPTOSS_ATTN_SLOT;
            slot[2 + o % D] = a;
            if (o % D == 0) { slot[0] = sM[hh]; slot[1] = sL[hh]; }
        }
    }
    if (ns == 1) return;
    /* the last of the ns blocks of (row, g) merges, in split order */
    __threadfence();
    __syncthreads();
    if (t == 0) last = atomicAdd(&counters[row * n_kv + g], 1) == ns - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (t == 0) counters[row * n_kv + g] = 0;
    for (int hh = warp; hh < G; hh += ARW_THREADS / 32) {
        const int h = g * G + hh;
        float *oh = out + ((size_t)row * n_heads + h) * D;
        gptoss_attn_merge_splits(part + ((size_t)row * n_heads + h) * ARW_SPLITS * GPTOSS_ATTN_SLOT, ns,
                                 gptoss_bf16_to_f32(sinks[h]), lane, oh);
        if (xs) { /* o_proj's parts of the head the warp just wrote */
            __syncwarp();
            for (int d = lane; d < D; d += 32)
                gptoss_tc_split_value(oh[d], xs + ((size_t)row * n_heads + h) * D + d, (size_t)rows * n_heads * D, parts);
        }
    }
}

/* Blocks per SM the kernel is built for: its register cap, 4 -> 64 registers, 5 -> 48 (shared memory
 * allows 5 blocks of ~38 KB). The arithmetic is the same, so the results are too (checked bit for bit).
 * Measured on the H200 (kernel check, 20b heads, contexts 128..2,000): 5 is faster on large grids (64
 * rows, full layer, 16,384 blocks: 130 vs 136 us; 32 rows 73 vs 75), 4 on small ones (2 rows 14.1 vs
 * 16.3 us, 8 rows 25.3 vs 26.2, 64 rows sliding 19.7 vs 20.3): fewer registers cost latency per block,
 * which only more resident blocks repay. So 5 from ARW_MINB5_BLOCKS blocks. */
#define ARW_MINB5_BLOCKS 4096

template <int G, int MINB>
static cudaError_t arw_launch_g(dim3 grid, const float *q, const gptoss_kv &kv, const uint16_t *sinks, const int32_t *pos,
                                int n_heads, int n_kv, int window, float *out, float *part, int32_t *counters, int rows,
                                int parts, uint16_t *xs, int pdl, cudaStream_t s) {
    return gptoss_launch(attention_rows_kernel<G, MINB>, grid, dim3(ARW_THREADS), 0, s, pdl, q, kv, sinks, pos, n_heads,
                         n_kv, window, out, part, counters, rows, parts, xs, pdl);
}

template <int MINB>
static cudaError_t arw_launch(dim3 grid, int G, const float *q, const gptoss_kv &kv, const uint16_t *sinks,
                              const int32_t *pos, int n_heads, int n_kv, int window, float *out, float *part,
                              int32_t *counters, int rows, int parts, uint16_t *xs, int pdl, cudaStream_t s) {
    switch (G) {
    case 1: return arw_launch_g<1, MINB>(grid, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters, rows, parts, xs, pdl, s);
    case 2: return arw_launch_g<2, MINB>(grid, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters, rows, parts, xs, pdl, s);
    case 4: return arw_launch_g<4, MINB>(grid, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters, rows, parts, xs, pdl, s);
    default: return arw_launch_g<8, MINB>(grid, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters, rows, parts, xs, pdl, s);
    }
}

/* gptoss_attention_rows with the register cap of minb blocks per SM (4 or 5; 0: by the grid's size, as
 * gptoss_attention_rows; the tests time both). */
static cudaError_t arw_attention(int minb, const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos,
                                 int B, int max_pos, int n_heads, int n_kv, int window, float *out, float *part,
                                 int32_t *counters, int parts, uint16_t *xs, cudaStream_t s) {
    if (B <= 0) return cudaSuccess;
    if (n_kv <= 0 || n_heads <= 0 || n_heads % n_kv || max_pos < 0 || !q || !sinks || !pos || !out || !part ||
        !counters || !kv.pool || !kv.table || kv.max_pages <= 0 || kv.kvd != n_kv * GPTOSS_HEAD_DIM)
        return cudaErrorInvalidValue;
    const int G = n_heads / n_kv;
    if (G != 1 && G != 2 && G != 4 && G != 8) return cudaErrorInvalidValue;
    const int keys = window > 0 && window < max_pos + 1 ? window : max_pos + 1;
    const int splits = arw_chunks(keys) < ARW_SPLITS ? arw_chunks(keys) : ARW_SPLITS;
    const dim3 grid((unsigned)(B * n_kv), (unsigned)splits);
    if (minb == 0) minb = grid.x * grid.y >= ARW_MINB5_BLOCKS ? 5 : 4;
    if (xs && (parts < 1 || parts > 3)) return cudaErrorInvalidValue;
    /* one row (the batch-1 decode graph): launched with PDL as that graph's other kernels (pdl.h) */
    const int pdl = B == 1 && gptoss_pdl_enabled();
    const cudaError_t e = minb == 4 ? arw_launch<4>(grid, G, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters,
                                                   B, parts, xs, pdl, s)
                                    : arw_launch<5>(grid, G, q, kv, sinks, pos, n_heads, n_kv, window, out, part, counters,
                                                   B, parts, xs, pdl, s);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_attention_rows(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                  int max_pos, int n_heads, int n_kv, int window, float *out, float *part,
                                  int32_t *counters, cudaStream_t s) {
    return arw_attention(0, q, kv, sinks, pos, B, max_pos, n_heads, n_kv, window, out, part, counters, 0, NULL, s);
}

cudaError_t gptoss_attention_rows_split(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                        int max_pos, int n_heads, int n_kv, int window, float *out, float *part,
                                        int32_t *counters, int splits, uint16_t *xs, cudaStream_t s) {
    if (!xs) return cudaErrorInvalidValue;
    return arw_attention(0, q, kv, sinks, pos, B, max_pos, n_heads, n_kv, window, out, part, counters, splits, xs, s);
}
