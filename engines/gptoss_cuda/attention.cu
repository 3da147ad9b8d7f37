/* attention.cu — causal attention with per-head sinks, full or sliding window, GQA (see kernels.h).
 *
 * One warp per (query, head). Each lane walks keys lane, lane+32, ... keeping its own online softmax
 * (running max m, sum l, weighted value sum acc[64]); the lanes are then merged together with the sink,
 * which joins the denominator as exp(sink - m) and has no value vector. Math matches
 * softmax([scores, sink]) with the sink column dropped.
 * Decode (few queries): one block of ATT_SPLIT warps per (query, head) splits the keys among its warps
 * (so a long context is read by 8x more threads), each warp one online softmax with its lanes owning
 * value dims; the warps' states are merged through shared memory with the same rule.
 * K/V rows are read through the paged layout (gptoss_kv_k / gptoss_kv_v in kernels.h). */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/pdl.h"

#define ATT_WARPS 4

/* One lane's online softmax over keys first, first + stride, ... <= last of table row `row` for query
 * row q (64 floats) against KV head kvh: running max *m, sum *l and weighted value sum acc[64], scores
 * scaled by 1/8. Shared by both kernels so their arithmetic is one piece of code. */
static __device__ __forceinline__ void attend_keys(const float *q, const gptoss_kv &kv, int row, int kvh, int first,
                                                   int last, int stride, float *m, float *l, float *acc) {
    const int D = GPTOSS_HEAD_DIM;
    float qv[GPTOSS_HEAD_DIM];
    gptoss_attn_load_q(q, qv);
    float mm = -INFINITY, ll = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    for (int j = first; j <= last; j += stride) {
        const float sc = gptoss_attn_score(qv, (const float4 *)(gptoss_kv_k(kv, row, j) + (size_t)kvh * D));
        const float mn = fmaxf(mm, sc);
        const float f = expf(mm - mn), p = expf(sc - mn);
        ll = ll * f + p;
        const float4 *v4 = (const float4 *)(gptoss_kv_v(kv, row, j) + (size_t)kvh * D);
#pragma unroll
        for (int i = 0; i < D / 4; i++) {
            float4 vv = v4[i];
            acc[4 * i] = acc[4 * i] * f + p * vv.x; acc[4 * i + 1] = acc[4 * i + 1] * f + p * vv.y;
            acc[4 * i + 2] = acc[4 * i + 2] * f + p * vv.z; acc[4 * i + 3] = acc[4 * i + 3] * f + p * vv.w;
        }
        mm = mn;
    }
    *m = mm;
    *l = ll;
}

/* The warp's lanes merged to a common max M (at least `floor`, e.g. the sink): returns the lane's rescale
 * factor f = exp(m - M) (0 for a lane that saw no key) and sets *M and *L = sum over lanes of l * f. */
static __device__ __forceinline__ float warp_merge(float m, float l, float floor, float *M, float *L) {
    float mx = fmaxf(m, floor);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float f = m == -INFINITY ? 0.0f : expf(m - mx);
    float sum = l * f;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *M = mx;
    *L = sum;
    return f;
}

__global__ void __launch_bounds__(ATT_WARPS * 32) attention_kernel(const float *q, const gptoss_kv kv,
                                                                   const uint16_t *sinks, int T, int pos0,
                                                                   int n_heads, int n_kv, int window, float *out) {
    const int D = GPTOSS_HEAD_DIM;
    const int lane = threadIdx.x & 31;
    const long wid = (long)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    if (wid >= (long)T * n_heads) return;
    const int h = (int)(wid % n_heads), t = (int)(wid / n_heads);
    const int kvh = h / (n_heads / n_kv);
    const int pos = pos0 + t;
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    float m, l, acc[GPTOSS_HEAD_DIM];
    attend_keys(q + (size_t)t * n_heads * D + (size_t)h * D, kv, 0, kvh, lo + lane, pos, 32, &m, &l, acc);
    /* Merge the lanes: common max including the sink, then rescale and sum. */
    const float sink = gptoss_bf16_to_f32(sinks[h]);
    float M, L;
    const float f = warp_merge(m, l, sink, &M, &L);
    L += expf(sink - M);
    float mine0 = 0.0f, mine1 = 0.0f; /* this lane writes dims lane and lane+32 */
#pragma unroll
    for (int d = 0; d < D; d++) {
        float v = acc[d] * f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (d == lane) mine0 = v;
        if (d == lane + 32) mine1 = v;
    }
    float *o = out + (size_t)t * n_heads * D + (size_t)h * D;
    o[lane] = mine0 / L;
    o[lane + 32] = mine1 / L;
}

#define ATT_SPLIT 8

/* Decode attention (few queries): block = one (query, head), warp w takes the keys lo + 32 w + 256 i.
 * Per step of 32 keys, lane j scores key j (a 64-dim dot), the warp updates one online softmax, and then
 * lanes own value dims (lane, lane + 32): the 32 V rows are read coalesced (issued before the scores, so
 * their round trip overlaps the K rows') and only the probabilities and row pointers move by shuffle.
 * The 8 warps' states are then merged through shared memory with the sink. (The first version kept a
 * 64-float accumulator per lane and merged the lanes with 64 x 5 shuffles: at short contexts that merge
 * was most of the kernel.) */
__global__ void __launch_bounds__(ATT_SPLIT * 32) attention_split_kernel(const float *q, const gptoss_kv kv,
                                                                         const uint16_t *sinks,
                                                                         int pos0, const int32_t *pos_dev,
                                                                         int n_heads, int n_kv, int window,
                                                                         float *out, int pdl) {
    const int D = GPTOSS_HEAD_DIM;
    __shared__ float sm[ATT_SPLIT], sl[ATT_SPLIT], sacc[ATT_SPLIT][GPTOSS_HEAD_DIM];
    __shared__ float4 qs[ATT_SPLIT][GPTOSS_HEAD_DIM / 4]; /* each warp's copy of q: 64 registers fewer a lane */
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): q and the new K/V come from the kernel before */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.x % n_heads, t = blockIdx.x / n_heads;
    const int kvh = h / (n_heads / n_kv);
    /* pos_dev: row t is its own sequence (table row t) at pos_dev[t] (graph replay, batched decode);
     * else query t of one sequence (table row 0) at pos0 + t. */
    const int trow = pos_dev ? t : 0;
    const uint32_t zero = (uint32_t)n_heads >> 31; /* 0; the compiler cannot know it */
    const int pos = pos_dev ? pos_dev[t] : pos0 + t;
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    if (lane < D / 4) qs[warp][lane] = ((const float4 *)(q + (size_t)t * n_heads * D + (size_t)h * D))[lane];
    __syncwarp();
    float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f; /* the warp's softmax state; dims lane, lane + 32 */
    for (int j0 = lo + warp * 32; j0 <= pos; j0 += ATT_SPLIT * 32) {
        const int j = j0 + lane, nj = min(32, pos - j0 + 1);
        const float *kr = gptoss_kv_k(kv, trow, j < j0 + nj ? j : j0) + (size_t)kvh * D;
        const float *vr = kr + (size_t)GPTOSS_KV_PAGE * kv.kvd; /* V row of the same key */
        /* Every lane's row pointer is a key's (past nj, key j0's), so the 64 loads need no predicate; keys past nj
         * get v = 0 where they are used. (Selected at the load, v ? : 0 gave ptxas a move after each predicated load
         * that waited for it, and the V loads went out in waves of 10-16, a round trip each: the SASS of session 45
         * call 3.) */
        float v0[32], v1[32];
#pragma unroll
        for (int jj = 0; jj < 32; jj++) {
            const float *v = (const float *)__shfl_sync(0xffffffffu, (unsigned long long)vr, jj);
            v0[jj] = v[lane];
            v1[jj] = v[lane + 32];
        }
        /* The K row's 16 loads all issued before its first product: the first word depends on all of them through
         * dep & zero (zero is 0 at run time, which the compiler cannot know). ptxas otherwise sends them in waves
         * into 3-5 rotating registers, each wave behind the last one's products (the SASS of session 45 call 3).
         * The same bits. */
        float4 kk[GPTOSS_HEAD_DIM / 4];
        uint32_t dep = 0;
#pragma unroll
        for (int i = 0; i < GPTOSS_HEAD_DIM / 4; i++) {
            kk[i] = ((const float4 *)kr)[i];
            dep |= __float_as_uint(kk[i].x);
        }
        kk[0].x = __uint_as_float(__float_as_uint(kk[0].x) | (dep & zero));
        const float sc = gptoss_attn_score_kk(qs[warp], kk);
        float f;
        const float p = gptoss_attn_step(lane < nj ? sc : -INFINITY, lane < nj, &m, &l, &f);
        a0 *= f;
        a1 *= f;
#pragma unroll
        for (int jj = 0; jj < 32; jj++) { /* keys past nj: p = 0 and v = 0 add exact zeros */
            const float pj = __shfl_sync(0xffffffffu, p, jj);
            a0 = fmaf(pj, jj < nj ? v0[jj] : 0.0f, a0);
            a1 = fmaf(pj, jj < nj ? v1[jj] : 0.0f, a1);
        }
    }
    sacc[warp][lane] = a0;
    sacc[warp][lane + 32] = a1;
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    __syncthreads();
    if (warp != 0) return;
    /* Block merge with the sink (warp 0): lanes own dims lane and lane + 32. */
    const float sink = gptoss_bf16_to_f32(sinks[h]);
    float G = sink;
    for (int w = 0; w < ATT_SPLIT; w++) G = fmaxf(G, sm[w]);
    float den = expf(sink - G), o0 = 0.0f, o1 = 0.0f;
    for (int w = 0; w < ATT_SPLIT; w++) {
        const float fw = sm[w] == -INFINITY ? 0.0f : expf(sm[w] - G);
        den += sl[w] * fw;
        o0 += sacc[w][lane] * fw;
        o1 += sacc[w][lane + 32] * fw;
    }
    float *o = out + (size_t)t * n_heads * D + (size_t)h * D;
    o[lane] = o0 / den;
    o[lane + 32] = o1 / den;
}

static int kv_ok(const gptoss_kv &kv, int n_kv) {
    return kv.pool && kv.table && kv.max_pages > 0 && kv.kvd == n_kv * GPTOSS_HEAD_DIM;
}

cudaError_t gptoss_attention(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads,
                             int n_kv, int window, float *out, cudaStream_t s) {
    const long warps = (long)T * n_heads;
    if (warps <= 0) return cudaSuccess;
    if (n_kv <= 0 || n_heads % n_kv != 0 || !kv_ok(kv, n_kv)) return cudaErrorInvalidValue;
    if (warps <= 512) { /* decode: too few (query, head) pairs to fill the GPU with one warp each */
        attention_split_kernel<<<(unsigned)warps, ATT_SPLIT * 32, 0, s>>>(q, kv, sinks, pos0, NULL, n_heads, n_kv,
                                                                          window, out, 0);
        return cudaGetLastError();
    }
    attention_kernel<<<(unsigned)((warps + ATT_WARPS - 1) / ATT_WARPS), ATT_WARPS * 32, 0, s>>>(
        q, kv, sinks, T, pos0, n_heads, n_kv, window, out);
    return cudaGetLastError();
}

cudaError_t gptoss_attention_at(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                int n_heads, int n_kv, int window, float *out, cudaStream_t s) {
    if (B <= 0 || n_heads <= 0 || n_kv <= 0 || n_heads % n_kv != 0 || !pos || !kv_ok(kv, n_kv))
        return cudaErrorInvalidValue;
    const cudaError_t e = gptoss_launch(attention_split_kernel, dim3((unsigned)(B * n_heads)), dim3(ATT_SPLIT * 32), 0, s,
                                        B == 1 && gptoss_pdl_enabled(), q, kv, sinks, 0, pos, n_heads, n_kv, window, out,
                                        (int)(B == 1 && gptoss_pdl_enabled()));
    return e != cudaSuccess ? e : cudaGetLastError();
}
