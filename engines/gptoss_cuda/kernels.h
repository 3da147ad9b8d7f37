/* kernels.h — the CUDA kernels of the gpt-oss engine, one launcher per computation.
 *
 * Conventions shared by every launcher:
 *  - activations are fp32, row-major [tokens, features]; weights are bf16 stored as raw uint16_t
 *    (the checkpoint's bytes, converted exactly by a 16-bit shift) or packed MXFP4 (uint8 blocks +
 *    E8M0 scales, exactly the checkpoint layout); every sum accumulates in fp32;
 *  - launchers only enqueue work on `stream` and return the launch status (cudaGetLastError), so the
 *    caller checks every step; nothing synchronizes;
 *  - shapes are arguments, never compile-time constants, except head_dim which must be 64
 *    (GPTOSS_HEAD_DIM): the model loader refuses other values.
 * Each kernel has a plain CPU loop twin in tests/gpu/gptoss_kernels that it is checked against. */
#ifndef GPTOSS_CUDA_KERNELS_H
#define GPTOSS_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "llmr_engine.h" /* llmr_token_logprobs */

#define GPTOSS_HEAD_DIM 64
#define GPTOSS_TOPK 4
#define GPTOSS_MAX_EXPERTS 256

/* Exact bf16 -> fp32 (bf16 is the upper half of an fp32). */
static inline __host__ __device__ float gptoss_bf16_to_f32(uint16_t v) {
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)v << 16);
#else
    union { uint32_t u; float f; } c;
    c.u = (uint32_t)v << 16;
    return c.f;
#endif
}

#ifdef __CUDACC__
/* The YaRN rotation of one RoPE pair (x1 = x[i], x2 = x[i + 32]) at position pos: the angle formed as transformers
 * forms it (fp32 pos * inv_freq[i], cos and sin, times the attention factor af), then the four products and two sums
 * each rounded on its own (no FMA contraction, which the compiler otherwise applies differently per kernel). The one
 * rotation of every kernel that rotates (rope_kernel, rope_rows_kernel, the q/k/v decode kernels,
 * rows_qkv_finish_kernel), so each gives the bits of the others. */
static __device__ __forceinline__ void gptoss_rope_pair(float x1, float x2, int pos, float inv_freq, float af, float *o1,
                                                        float *o2) {
    const float ang = __fmul_rn((float)pos, inv_freq);
    const float c = __fmul_rn(cosf(ang), af), sn = __fmul_rn(sinf(ang), af);
    *o1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn));
    *o2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, sn));
}

/* The sum of v over a block of up to 1,024 threads (a multiple of 32), for every thread: warp xor-shuffles, then
 * warp 0 over the warps' sums in red[32] (shared). One fixed order, so every kernel that sums this way (rmsnorm_kernel,
 * rows_norm_split_kernel) gets the same bits. Contains two __syncthreads: call it from every thread. */
static __device__ __forceinline__ float gptoss_block_sum(float v, float *red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (threadIdx.x == 0) red[0] = w;
    }
    __syncthreads();
    return red[0];
}
#endif

#ifdef __CUDACC__
/* Opts a kernel into `bytes` of dynamic shared memory before its first launch; *opted is the launcher's static flag
 * (cudaFuncSetAttribute is not a stream operation, and repeating it after a failure is harmless). */
template <typename F> static inline cudaError_t gptoss_smem_opt_in(F *kernel, int bytes, int *opted) {
    if (*opted) return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess) *opted = 1;
    return e;
}

/* gpt-oss's clamped SwiGLU of one gate / up pair: every kernel that computes it calls this, so the prompt
 * and step paths give the same bits for the same inputs. */
static __device__ __forceinline__ float gptoss_swiglu_value(float g, float u, float alpha, float limit) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    const float glu = g * (1.0f / (1.0f + expf(-alpha * g)));
    return glu * (u + 1.0f);
}

/* The 8 bf16 of one 16-byte load as fp32 (element 2i from the low half of word i), for the bf16 GEMVs. */
static __device__ __forceinline__ void gptoss_bf16x8(uint4 v, float w[8]) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        w[2 * i] = __uint_as_float(u[i] << 16);
        w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
}
#endif

/* x[t, :] = embed[tokens[t], :] for t < T (bf16 rows to fp32); a row of NaN for an id outside [0, V). */
cudaError_t gptoss_embed(const uint16_t *embed, const int32_t *tokens, int T, int H, int V, float *x, cudaStream_t stream);

/* y[t, :] = x[t, :] * rsqrt(mean(x[t, :]^2) + eps) * w  (fp32 math, as transformers with fp32 norm weights). */
cudaError_t gptoss_rmsnorm(const float *x, const uint16_t *w, int T, int H, float eps, float *y, cudaStream_t stream);

/* y[t, n] (+)= sum_k x[t, k] * W[n, k] + b[n] for t < T, n < N; W bf16 [N, K] (nn.Linear layout),
 * b bf16 [N] or NULL; x has row stride ldx, y row stride ldy. accumulate = 1 adds into y (residual). */
cudaError_t gptoss_linear(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                          float *y, int ldy, int accumulate, cudaStream_t stream);

/* The T = 1 (decode) GEMV that gptoss_linear uses for one token when x and W are 16-byte aligned and
 * K % 8 == 0, K <= GPTOSS_GEMV1_MAX_K: y[n] (+)= sum_k x[k] * W[n, k] + b[n]. Memory-bound design: x is
 * staged once per block in shared memory (fp32), each warp streams whole rows of W with
 * GPTOSS_GEMV1_UNROLL 16-byte loads in flight per lane, blocks loop over rows so the grid fills every SM
 * once; fp32 accumulation, warp-shuffle reduction (summation order differs from the tiled kernel, so the
 * two agree to fp32 rounding). Returns cudaErrorInvalidValue when the shape or alignment is unsupported. */
#define GPTOSS_GEMV1_MAX_K 8192
#define GPTOSS_GEMV1_UNROLL 8
cudaError_t gptoss_gemv1(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y, int accumulate,
                         cudaStream_t stream);
/* gptoss_gemv1 for n <= GPTOSS_GEMV1_ROWS_MAX rows of x (row r at x + r ldx, ldx % 4 == 0) into rows of y (ldy): each
 * weight load serves every row, each row bit for bit gptoss_gemv1's alone (linear.cu, session 19). n above the
 * maximum, or n rows of K floats beyond 200 KiB: cudaErrorNotSupported; other limits as gptoss_gemv1. Sets its
 * shared-memory opt-in at its first launch of a size (call it outside a graph capture first). */
#define GPTOSS_GEMV1_ROWS_MAX 8
cudaError_t gptoss_gemv1_rows(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K, int N, float *y,
                              int ldy, int accumulate, cudaStream_t stream);

/* gptoss_gemv1 with accumulate = 1 (o_proj into the residual, y = x_new) that also writes the router's partial
 * sums (the T = 1 default for 32 experts; LLMR_GPTOSS_ROUTER_SPLIT=0 turns it off): block j of the launch writes rpart[j][e] = sum over its rows n of
 * rwt[n][e] * y[n] (e < 32) and rpart[j][32] = sum of y[n]^2, rwt = router_w * mlp_norm transposed, fp32 [N][32]
 * (gptoss_router_rwt). gptoss_gemv1_blocks(K, N) partial rows (< 0 on a device error). */
int gptoss_gemv1_blocks(int K, int N);
cudaError_t gptoss_gemv1_router(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y,
                                const float *rwt, float *rpart, cudaStream_t stream);
/* The same, and the launch's last block to finish its partial row (a counter: *ctr is 0 between launches, and the
 * last block sets it back) then runs gptoss_moe_router_finish's sums in its order (bit for bit) with N as H: r to *r,
 * the logits to router_logits (may be NULL), the top-4's ids, weights and group table; h_sw is not written (the
 * routed gate_up, gptoss_moe_routed_gate_up_dp4a, normalises x itself). E == 32. */
cudaError_t gptoss_gemv1_router_finish(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y,
                                       const float *rwt, float *rpart, const uint16_t *router_b, float eps, int32_t *ctr,
                                       int32_t *ids, float *w, int32_t *groups, float *router_logits, float *r,
                                       cudaStream_t stream);
/* gptoss_gemv1_router_finish for the n <= GPTOSS_GEMV1_ROWS_MAX rows of a small batched step (o_proj as
 * gptoss_gemv1_rows, x rows at x + r ldx, y rows at y + r ldy), each row bit for bit its one-token call: the launch
 * takes gptoss_gemv1_blocks(K, N) blocks (else cudaErrorNotSupported, before any launch), row r's partial rows at
 * rpart + r blocks 33, and the last block finishes every row: r[r], router_logits + 32 r (may be NULL), ids + 4 r,
 * w + 4 r and the one-token group table at groups1 + r gptoss_moe_groups_ints(1). Sets its shared-memory opt-in at
 * its first launch of a size (call it outside a graph capture first). */
/* The same without the finish: each row's partial rows only (at rpart + r blocks 33), for
 * gptoss_moe_route_gate_up_dp4a_rows1, whose CTAs finish their own row. */
cudaError_t gptoss_gemv1_rows_router(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K, int N,
                                     float *y, int ldy, const float *rwt, float *rpart, cudaStream_t stream);
cudaError_t gptoss_gemv1_rows_router_finish(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K,
                                            int N, float *y, int ldy, const float *rwt, float *rpart,
                                            const uint16_t *router_b, float eps, int32_t *ctr, int32_t *ids, float *w,
                                            int32_t *groups1, float *router_logits, float *r, cudaStream_t stream);
/* How that last block reads the partial rows: on (the default since session 28) one bulk copy of all of them into its
 * shared memory, then the sums from there, where they fit beside the kernel's static arrays in 48 KiB and are a
 * 16-byte multiple (360 rows for the 20b); off, or where they do not fit, the sums from L2. Bit for bit the same.
 * Queries the kernel's attributes, so call it outside any graph capture. Returns whether on. */
int gptoss_gemv1_fin_rows(int on);
/* rwt[n][e] = bf16 router_w[e][n] * bf16 norm_w[n] (exact in fp32), E == 32. */
cudaError_t gptoss_router_rwt(const uint16_t *router_w, const uint16_t *norm_w, int H, int E, float *rwt,
                              cudaStream_t stream);
/* The router of one token from gptoss_gemv1_router's nparts partial rows: r = rsqrt(sum sq / H + eps), logits =
 * r * partial + router_b, then as gptoss_moe_router_decode with T = 1 (h_sw from x, ids, w, groups, logits). */
cudaError_t gptoss_moe_router_finish(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                     const uint16_t *router_b, int H, int E, float *h_sw, int32_t *ids, float *w,
                                     int32_t *groups, float *router_logits, cudaStream_t stream);

/* Selects whether gptoss_linear routes T = 1 to gptoss_gemv1 (on, the default) or to the older
 * warp-per-row GEMV (off: LLMR_GPTOSS_GEMV1=0, for before/after comparisons). Process-wide; set it
 * before launching. */
void gptoss_linear_use_gemv1(int on);

/* Selects programmatic dependent launch for the batch-1 decode kernels (gptoss_gemv1, gptoss_qkv_decode,
 * gptoss_attention_at / gptoss_attention_decode with B = 1, the three gptoss_moe_*_decode with T = 1):
 * on, each is launched with cudaLaunchAttributeProgrammaticStreamSerialization, prefetches its static
 * weights into L2 and then waits for the previous kernel (engines/gptoss_cuda/pdl.h states the rules).
 * Results are bit-identical on or off. Off by default; LLMR_GPTOSS_PDL=1 at model load turns it on.
 * Process-wide; set it before launching. */
void gptoss_use_pdl(int on);

/* ---- batched-step linears (linear_rows.cu): gptoss_linear for 2..GPTOSS_ROWS_MAX_T rows with ONE pass
 * over W for all rows (the T <= 4 GEMV re-reads W per group of 4 rows). y[t, n] (+)= sum_k x[t, k] W[n, k]
 * + b[n] for t < T. x rows are staged in shared memory (T * K floats, at most ~200 KiB), so
 * T <= gptoss_linear_rows_max(K); x 16-byte aligned with ldx % 4 == 0, W 16-byte aligned, K % 8 == 0.
 * fp32 accumulation: each lane sums its 8-element chunks in ascending order, then a fixed warp xor tree
 * (deterministic; equal to gptoss_linear to fp32 summation order). cudaErrorInvalidValue otherwise. */
#define GPTOSS_ROWS_MAX_T 16
int gptoss_linear_rows_max(int K); /* rows one launch takes for this K (0: unsupported K) */
cudaError_t gptoss_linear_rows(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                               float *y, int ldy, int accumulate, cudaStream_t stream);

/* In-place YaRN RoPE, NeoX rotate-half, on x [T, n_heads, 64] (row stride ld floats) at positions
 * pos0 + t: angle = float(pos) * inv_freq[i]; cos/sin multiplied by attn_factor; inv_freq [32] on device. */
cudaError_t gptoss_rope(float *x, int ld, int T, int n_heads, int pos0, const float *inv_freq, float attn_factor,
                        cudaStream_t stream);

/* ---- paged KV cache (model.cu owns the pool; see docs/engine-gptoss-cuda.md)
 * K/V live in one pool of fixed-size pages per model. A page holds GPTOSS_KV_PAGE consecutive
 * positions of one sequence for every layer: [layers][2 (K, V)][GPTOSS_KV_PAGE][kvd] floats, fp32.
 * A sequence's block table maps its logical block pos / GPTOSS_KV_PAGE to a page id; pages are taken
 * as the sequence grows and returned when it ends. Why 32 positions per page: a decode-attention warp
 * walks 32 consecutive keys per iteration, so a 32-aligned warp never straddles two pages (one table
 * lookup per key and lane, all lanes hitting the same page); the sliding window (128) is 4 whole pages;
 * and the waste per sequence is at most 31 positions (<= 1.5 MiB on 20b) where 64 would double it.
 * 16 would double the table size and lookups for nothing.
 * gptoss_kv names one layer of the pool seen through one or more block tables (row b's table is at
 * table + b * max_pages). Every kernel that touches K/V goes through gptoss_kv_k / gptoss_kv_v, so a
 * layout change is made here once. All fields are plain values: a gptoss_kv can be a launch argument
 * of a captured CUDA graph as long as the table's device address stays fixed (new pages are written
 * into the table outside the graph). */
#define GPTOSS_KV_PAGE 32
typedef struct gptoss_kv {
    float *pool;          /* device: page 0 of the pool */
    const int32_t *table; /* device: block tables, [rows][max_pages] int32 page ids */
    int max_pages;        /* entries per table row (ceil(max_context / GPTOSS_KV_PAGE)) */
    int kvd;              /* floats per position of K (or V) in one layer: n_kv * 64 */
    long long page_floats; /* floats per page: layers * 2 * GPTOSS_KV_PAGE * kvd */
    long long layer_off;   /* floats from a page's start to this layer's K block (V follows it) */
} gptoss_kv;

/* This layer's K row (kvd floats) of position pos in table row `row`. pos must be below the pages
 * the table holds (the caller reserved them). */
static inline __device__ float *gptoss_kv_k(const gptoss_kv &kv, int row, int pos) {
    const long long page = kv.table[(long long)row * kv.max_pages + pos / GPTOSS_KV_PAGE];
    return kv.pool + page * kv.page_floats + kv.layer_off + (long long)(pos % GPTOSS_KV_PAGE) * kv.kvd;
}
/* The matching V row. */
static inline __device__ float *gptoss_kv_v(const gptoss_kv &kv, int row, int pos) {
    return gptoss_kv_k(kv, row, pos) + (long long)GPTOSS_KV_PAGE * kv.kvd;
}

/* Floats per (row, head, key split) of a split decode attention's partials: max, sum, acc[64]. */
#define GPTOSS_ATTN_SLOT (2 + GPTOSS_HEAD_DIM)

/* The flash-decoding merge of one head, by one warp: the n split slots at base (GPTOSS_ATTN_SLOT
 * floats apart, read with __ldcg: other blocks wrote them) rescaled to their common max with the sink,
 * summed in split order, o[0..63] = acc / den (lane writes o[lane] and o[lane + 32]). A split with no
 * key (max -inf) adds exact zeros. Shared by attention_decode.cu and attention_rows.cu so both merge
 * in the same order. */
static __device__ __forceinline__ void gptoss_attn_merge_splits(const float *base, int n, float sink, int lane,
                                                                float *o) {
    float G = sink;
    for (int t = 0; t < n; t++) G = fmaxf(G, __ldcg(base + (size_t)t * GPTOSS_ATTN_SLOT));
    float den = expf(sink - G), o0 = 0.0f, o1 = 0.0f;
#pragma unroll 4
    for (int t = 0; t < n; t++) {
        const float *sl = base + (size_t)t * GPTOSS_ATTN_SLOT;
        const float mt = __ldcg(sl);
        const float ft = mt == -INFINITY ? 0.0f : expf(mt - G);
        den += __ldcg(sl + 1) * ft;
        o0 += __ldcg(sl + 2 + lane) * ft;
        o1 += __ldcg(sl + 2 + 32 + lane) * ft;
    }
    o[lane] = o0 / den;
    o[lane + 32] = o1 / den;
}

/* The attentions' pieces (attention.cu, attention_decode.cu): one query row (64 floats) into registers. */
static __device__ __forceinline__ void gptoss_attn_load_q(const float *q, float qv[GPTOSS_HEAD_DIM]) {
    const float4 *q4 = (const float4 *)q;
#pragma unroll
    for (int i = 0; i < GPTOSS_HEAD_DIM / 4; i++) {
        const float4 v = q4[i];
        qv[4 * i] = v.x; qv[4 * i + 1] = v.y; qv[4 * i + 2] = v.z; qv[4 * i + 3] = v.w;
    }
}

/* Four dims of a score, d + q.x k.x + q.y k.y + q.z k.z + q.w k.w in that order: the one sum every score form
 * below shares, so they agree bit for bit. */
static __device__ __forceinline__ float gptoss_attn_dot4(float d, float4 q, float4 k) {
    d = fmaf(q.x, k.x, d); d = fmaf(q.y, k.y, d);
    d = fmaf(q.z, k.z, d); d = fmaf(q.w, k.w, d);
    return d;
}

/* A lane's score of one key: q (64 floats in registers) against its K row k4 (16 float4), summed in dim
 * order and scaled by 1/8. */
static __device__ __forceinline__ float gptoss_attn_score(const float qv[GPTOSS_HEAD_DIM], const float4 *k4) {
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < GPTOSS_HEAD_DIM / 4; i++)
        d = gptoss_attn_dot4(d, make_float4(qv[4 * i], qv[4 * i + 1], qv[4 * i + 2], qv[4 * i + 3]), k4[i]);
    return d * 0.125f; /* 1/sqrt(64) */
}

/* The same score with the key's K row already in registers (kk) and q as 16 float4 anywhere: a warp's copy of q in
 * shared memory, read as a broadcast, spares each lane the 64 registers qv takes. The same sum in the same order. */
static __device__ __forceinline__ float gptoss_attn_score_kk(const float4 *q4, const float4 kk[GPTOSS_HEAD_DIM / 4]) {
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < GPTOSS_HEAD_DIM / 4; i++) d = gptoss_attn_dot4(d, q4[i], kk[i]);
    return d * 0.125f; /* 1/sqrt(64) */
}

/* One 32-key step of a warp's online softmax: the lane's score sc (-inf for a lane past the keys, `valid`
 * false), the warp's running max *m and sum *l (the same in every lane; the step's first key exists, so
 * the new max is finite). Returns the lane's probability; *f is the factor the accumulators are scaled by. */
static __device__ __forceinline__ float gptoss_attn_step(float sc, bool valid, float *m, float *l, float *f) {
    float mx = sc;
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float mn = fmaxf(*m, mx);
    *f = expf(*m - mn);
    const float p = valid ? expf(sc - mn) : 0.0f;
    float ps = p;
    for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
    *l = *l * *f + ps;
    *m = mn;
    return p;
}

/* Attention with sinks for T queries at positions pos0..pos0+T-1 of one sequence (table row 0) over
 * its cached keys 0..pos. q [T, n_heads*64]; kv: this layer (kvd = n_kv*64); head h uses KV head
 * h / (n_heads/n_kv). window > 0: a query at i sees keys i-window+1 .. i. sinks bf16 [n_heads].
 * Scores scaled by 1/8. out [T, n_heads*64]. */
cudaError_t gptoss_attention(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads,
                             int n_kv, int window, float *out, cudaStream_t stream);

/* Writes k, v [T, kvd] (contiguous) as positions pos0..pos0+T-1 of table row 0 (prefill). */
cudaError_t gptoss_kv_store_range(const float *k, const float *v, int T, int pos0, gptoss_kv kv,
                                  cudaStream_t stream);

/* Router: for each token, the top-4 of logits [T, E] (ties to the lower expert id), softmax over those 4.
 * ids [T, 4] int32 in descending logit order, w [T, 4] fp32. */
cudaError_t gptoss_router_topk(const float *logits, int T, int E, int32_t *ids, float *w, cudaStream_t stream);

/* Router weights for given expert ids (parity runs that force the reference's choices):
 * w[t, k] = softmax over k of logits[t, ids[t, k]]. A row whose ids[t, 0] is negative is not forced: it
 * gets the router's own top-4 written into ids and the weights gptoss_router_topk gives, bit for bit
 * (replays that force one decision and leave the rest to the router). */
cudaError_t gptoss_router_weights(const float *logits, int T, int E, int32_t *ids, float *w, cudaStream_t stream);

/* Groups the T*4 (token, slot) pairs by expert: counts[E], offsets[E] (exclusive prefix sum),
 * pair_token[T*4] (token of each grouped pair) and pair_of[T*4] (grouped position of pair t*4+k).
 * One block; order inside an expert's group is arbitrary (results do not depend on it). */
cudaError_t gptoss_moe_route(const int32_t *ids, int T, int E, int32_t *counts, int32_t *offsets,
                             int32_t *pair_token, int32_t *pair_of, cudaStream_t stream);
/* gptoss_moe_route with the pairs of tokens t < Tp (the precise rows, gptoss_tc_mlp) first in each expert's group,
 * their count per expert in counts[E + e] and its exclusive prefix sum in offsets[E + e] (so counts and offsets
 * hold 2E entries when Tp > 0; entries E.. are not written when Tp == 0, which is gptoss_moe_route). */
cudaError_t gptoss_moe_route_precise(const int32_t *ids, int T, int Tp, int E, int32_t *counts, int32_t *offsets,
                                     int32_t *pair_token, int32_t *pair_of, cudaStream_t stream);

/* Grouped MXFP4 matmul: for expert e and each grouped pair p in [offsets[e], offsets[e]+counts[e]):
 *   y[p, n] = sum_k x[row(p), k] * W_e[n, k] + b[e, n],  row(p) = gather ? gather[p] : p,
 * W_e[n, k] = fp4(nibble) * 2^(scale - 127) read from blocks [E, N, K/32, 16] (element 2j in the low
 * nibble of byte j) and scales [E, N, K/32]; b bf16 [E, N]. K must be a multiple of 32.
 * max_rows bounds counts[e] (T for top-k routing). */
cudaError_t gptoss_mxfp4_grouped(const float *x, int ldx, const int32_t *gather, const uint8_t *blocks,
                                 const uint8_t *scales, const uint16_t *b, const int32_t *counts,
                                 const int32_t *offsets, int E, int max_rows, int K, int N, float *y,
                                 cudaStream_t stream);

/* Clamped SwiGLU on interleaved gate/up rows: gu [P, 2I] -> a [P, I]:
 * g = min(gu[2j], limit), u = clamp(gu[2j+1], -limit, limit), a = g * sigmoid(alpha*g) * (u + 1). */
cudaError_t gptoss_swiglu(const float *gu, int P, int I, float alpha, float limit, float *a, cudaStream_t stream);

/* x[t, :] += sum_k w[t, k] * y[pair_of[t*4+k], :] (k summed in slot order 0..3). */
cudaError_t gptoss_moe_combine(const float *y, const float *w, const int32_t *pair_of, int T, int H, float *x,
                               cudaStream_t stream);

/* Sampling on the GPU, one token from logits [V]. Steps, in order:
 *  1. penalties (when counts != NULL): l -= counts[i]*frequency + (counts[i] > 0)*presence;
 *  2. temperature <= 0: argmax, ties to the lowest id; done;
 *  3. p_i = exp((l_i - max) / temperature) (so the top token has p = 1);
 *  4. top_k > 0: keep p_i >= the k-th largest p (tokens tied with it are kept too);
 *  5. 0 < top_p < 1: keep the largest p's whose sum reaches top_p of the kept mass (ties kept);
 *  6. min_p > 0: keep p_i >= min_p (relative to the top token);
 *  7. u in [0, 1): the first id (ascending) whose running kept mass exceeds u * total.
 * work: gptoss_sample_work(V) floats of scratch. out: the chosen id (device int32). Deterministic for a given u.
 * Greedy (temperature <= 0, V >= 256) runs as a 128-block argmax + a one-block merge; the rest as a multi-block
 * radix select with exact 64-bit masses (sampling.cu; 2 + 3 per top_k or top_p + 2 launches), or in one block with
 * gptoss_sample_use_radix(0). */
typedef struct gptoss_sample_args {
    float temperature, top_p, min_p, frequency_penalty, presence_penalty, u;
    int top_k;
} gptoss_sample_args;
cudaError_t gptoss_sample(const float *logits, int V, const int32_t *counts, gptoss_sample_args a, float *work,
                          int32_t *out, cudaStream_t stream);

/* gptoss_sample, the id also into out_host (the device's view of pinned host memory, cudaHostGetDevicePointer; NULL:
 * none). ctr: a device int32, 0 before the first call and left 0 by each. A greedy row (the multi-block argmax) takes
 * one launch, whose last block merges the parts and writes both ids, so a lone row's token needs no copy (session 49:
 * the token -0.5%); the other forms are gptoss_sample and a copy. */
cudaError_t gptoss_sample_host(const float *logits, int V, const int32_t *counts, gptoss_sample_args a, float *work,
                               int32_t *ctr, int32_t *out, int32_t *out_host, cudaStream_t stream);

/* Selects the multi-block greedy argmax (on, the default) or the one-block kernel for temperature <= 0
 * too (off: LLMR_GPTOSS_FAST_GREEDY=0, for before/after comparisons). Process-wide. */
void gptoss_sample_use_fast_greedy(int on);

/* Selects the multi-block radix sampler for temperature > 0 (on, the default) or the one-block kernel (off:
 * LLMR_GPTOSS_SAMPLER=0, for before/after comparisons). Process-wide: lone and batched rows sample alike. */
void gptoss_sample_use_radix(int on);

/* Floats of scratch one row's sampling needs (gptoss_sample's work). */
size_t gptoss_sample_work(int V);

/* Which of the non-greedy steps a row's parameters take (0 for a greedy row): the radix sampler launches only the
 * steps some row of the call needs. */
#define GPTOSS_SAMPLE_NEED_DRAW 1u
#define GPTOSS_SAMPLE_NEED_TOPK 2u
#define GPTOSS_SAMPLE_NEED_TOPP 4u
unsigned gptoss_sample_need(const gptoss_sample_args *a);

/* All rows of a batched decode step in one call (greedy rows only: three launches; with sampled rows the radix
 * sampler's 3 + 3 per top_k or top_p launches + the count): row b samples from rows[b].logits (V floats) with
 * rows[b].counts (penalties; NULL = none) and rows[b].a (its own u), exactly as gptoss_sample would
 * (greedy rows: the same argmax rule; other rows: the same radix sampler, or the one-row kernel's code), into out[b]; then
 * rows[b].counts[out[b]] += 1 where count_token is set (gptoss_count_token). rows is a device array; need: the OR
 * of gptoss_sample_need over the rows (a step no row needs is not launched; 0: every row greedy).
 * work: gptoss_sample_rows_work(B, V) floats (gptoss_sample_work(V) per row, then ARG_BLOCKS parts per row). */
typedef struct gptoss_sample_row {
    const float *logits;
    int32_t *counts;
    gptoss_sample_args a;
    int count_token;
} gptoss_sample_row;
size_t gptoss_sample_rows_work(int B, int V);
cudaError_t gptoss_sample_rows(const gptoss_sample_row *rows, int B, int V, unsigned need, float *work, int32_t *out,
                               cudaStream_t stream);

/* Log-probabilities of the tokens just sampled (OpenAI `logprobs`; llmr_engine.h llmr_token_logprobs): block b
 * takes rows[b] (skipped when its logits are NULL): log_softmax of its raw logits (NaN as -inf; the sampling
 * kernels never write them), the log-probability of tok[b] and the n_top most likely ids (value descending, ties
 * to the lower id, n_top <= LLMR_MAX_TOP_LOGPROBS) into out[b]. rows, tok and out are device arrays. One
 * 1024-thread block a row: one pass over V (an online log-sum-exp and each thread's best candidates; sampling.cu). */
typedef struct gptoss_logprob_row {
    const float *logits;
    int n_top;
} gptoss_logprob_row;
cudaError_t gptoss_logprobs_rows(const gptoss_logprob_row *rows, int B, int V, const int32_t *tok,
                                 llmr_token_logprobs *out, cudaStream_t stream);

/* counts[token] += 1 (penalty bookkeeping, stays on the device). */
cudaError_t gptoss_count_token(int32_t *counts, const int32_t *token, cudaStream_t stream);

/* ---- decode-step variants for CUDA graph replay (forward.cu captures one decode step per session).
 * What changes from step to step must not be a launch argument of a captured kernel, so the position
 * of the single new token is read from device memory (*pos, int32) at run time. Same numerics as the
 * T = 1 launchers above. The KV launchers take B rows (continuous batching): row b is its own
 * sequence at position pos[b] with block table row b; B = 1 is the single-sequence decode step. */

/* gptoss_rope for one token (row stride n_heads*64) at position *pos. */
cudaError_t gptoss_rope_at(float *x, int n_heads, const int32_t *pos, const float *inv_freq, float attn_factor,
                           cudaStream_t stream);

/* For each row b < B: position pos[b] of table row b gets K = k[b, :], V = v[b, :] (kvd floats each). */
cudaError_t gptoss_kv_store(const float *k, const float *v, int B, const int32_t *pos, gptoss_kv kv,
                            cudaStream_t stream);

/* gptoss_attention for B rows, one query each: row b's query q[b, :] at position pos[b] over keys
 * 0..pos[b] (or the last `window`) of table row b; out [B, n_heads*64]. */
cudaError_t gptoss_attention_at(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                int n_heads, int n_kv, int window, float *out, cudaStream_t stream);

/* gptoss_rope for B rows of x (row stride ld), row b at position pos[b] (device): the batched decode
 * step, where every row is its own sequence. Same math as gptoss_rope at each row's position. */
cudaError_t gptoss_rope_rows(float *x, int ld, int B, int n_heads, const int32_t *pos, const float *inv_freq,
                             float attn_factor, cudaStream_t stream);

/* The batched step's rows around its tensor-core q/k/v (tc.h gptoss_tc_gemm_split), in two launches instead of seven
 * (docs/performance.md, step 41): gptoss_rows_norm_split ends a layer's MoE block (y != NULL: x[b] += sum_k w[b, k]
 * y[pair_of[b, k]], as gptoss_moe_combine) and starts the next layer's attention: h = rmsnorm(x) * norm_w (as
 * gptoss_rmsnorm, into h [B, H]) and its `splits` bf16 parts into xs (part s of row b at xs[(s B + b) H], as
 * gptoss_tc_split). y == NULL: the norm and the split alone (the first layer). H <= GPTOSS_ROWS_NORM_MAX_H.
 * gptoss_rows_qkv_finish takes that GEMM's parts ys [splits B, ld] (columns q | k | v, QD + 2 KVD <= ld): each value
 * their sum plus the bias b (as the tensor-core reduce), RoPE on q and k at pos[b] (as gptoss_rope_rows), q into
 * q [B, QD], k and v into the cache at pos[b] of table row b (as gptoss_kv_store). The norm and split have the bits of
 * the kernels they replace; the finish too (the one rotation, gptoss_rope_pair). */
#define GPTOSS_ROWS_NORM_MAX_H 4096
cudaError_t gptoss_rows_norm_split(const float *y, const float *w, const int32_t *pair_of, float *x, const uint16_t *norm_w,
                                   int B, int H, float eps, int splits, float *h, uint16_t *xs, cudaStream_t stream);
cudaError_t gptoss_rows_qkv_finish(const float *ys, int ld, int B, int splits, const uint16_t *b, int n_heads, int n_kv,
                                   const int32_t *pos, const float *inv_freq, float attn_factor, float *q, gptoss_kv kv,
                                   cudaStream_t stream);

/* *dst = v, ordered on the stream (sets the step's position before a graph replay). */
cudaError_t gptoss_set_i32(int32_t *dst, int32_t v, cudaStream_t stream);

/* ---- decode MoE in three launches (moe_decode.cu), for T = 1..GPTOSS_DECODE_MAX_T tokens (one per
 * running sequence). Numerically the twin of rmsnorm + linear(router) + router_topk + mxfp4_grouped +
 * swiglu + mxfp4_grouped + moe_combine (fp32 sums in another order: equal to fp32 rounding). Deterministic:
 * no float atomics, fixed summation order (the 4 slots summed in order 0..3).
 * Activation vectors between the three are "chunk-swizzled": element k of a K-vector (K % 32 == 0)
 * lives at gptoss_swz(k, K), so that a warp whose lanes each own one 32-value MXFP4 block reads x with
 * coalesced 16-byte loads.
 * Workspace (device): h_sw [T, H] and act_sw [4T, I] floats (16-byte aligned), ids [4T], w [4T],
 * groups [gptoss_moe_groups_ints(T)] ints, router_logits [T, E] floats, counter [1 + T] ints that
 * must be 0 before the first launch (the router kernel leaves them 0 again). */
#define GPTOSS_DECODE_MAX_T 64
#define GPTOSS_DECODE_MAX_K 8192
static __host__ __device__ constexpr int gptoss_moe_groups_ints(int T) { return 1 + 6 * T * GPTOSS_TOPK; }

/* Position of element k of a K-vector in the chunk-swizzled layout (K % 32 == 0): float4 f of 32-value chunk c
 * at (f * K/32 + c) * 4. Host and device: the kernels that write activations swizzled and the tests use it. */
static __host__ __device__ __forceinline__ int gptoss_swz(int k, int K) {
    return ((k & 31) >> 2) * (K / 8) + (k >> 5) * 4 + (k & 3);
}

/* Per token t: h = rmsnorm(x[t]) * norm_w (fp32, eps) written swizzled to h_sw[t];
 * router logits = router_w h + router_b (also stored in router_logits [T, E] when non-NULL);
 * ids[t, 0..3] = top-4 (ties to the lower id, descending),
 * w[t, 0..3] = softmax over those 4. The last block groups the 4T pairs (t * 4 + slot) by expert (one
 * token in one block: its warp 0 writes the 4 groups directly, without the counter's fence and atomic):
 * groups[0] = number of groups; group g (ascending expert id, then pair id; at most 4 pairs each) has
 * expert groups[1 + g], pair count groups[1 + 4T + g] and pair ids groups[1 + 8T + 4g + i].
 * H % 32 == 0, H <= GPTOSS_DECODE_MAX_K, 4 <= E <= GPTOSS_MAX_EXPERTS. */
cudaError_t gptoss_moe_router_decode(const float *x, const uint16_t *norm_w, float eps, const uint16_t *router_w,
                                     const uint16_t *router_b, int T, int H, int E, float *h_sw, int32_t *ids,
                                     float *w, int32_t *groups, float *router_logits, int32_t *counter,
                                     cudaStream_t stream);
/* The same after o_proj's split GEMM (the batched step from 9 rows, session 24; LLMR_GPTOSS_BATCH_FUSE=2 turns it off):
 * x[t] first gets o_proj's output added, the `splits` parts of row t in y (part s at y + (s * T + t) * H, as
 * gptoss_tc_gemm_split leaves them) summed with the bias o_b as the dense reduce sums them (gptoss_tc_part_sum), and
 * the new x is written back. The same bits as gptoss_tc_linear with accumulate = 1 and then gptoss_moe_router_decode,
 * in one launch fewer. One block a token (LLMR_GPTOSS_ROUTER_BLOCKS does not apply); H <= GPTOSS_ROUTER_ADD_MAX_H. */
#define GPTOSS_ROUTER_ADD_MAX_H 3072
/* gptoss_moe_route's tables (device, sizes as there), written by the router's last block instead of its launch. */
typedef struct {
    int32_t *counts, *offsets, *pair_token, *pair_of;
} gptoss_moe_route_out;
cudaError_t gptoss_moe_router_decode_add(float *x, const float *y, int splits, const uint16_t *o_b, const uint16_t *norm_w,
                                         float eps, const uint16_t *router_w, const uint16_t *router_b, int T, int H, int E,
                                         float *h_sw, int32_t *ids, float *w, int32_t *groups, float *router_logits,
                                         int32_t *counter, void *staged, const gptoss_moe_route_out *route,
                                         cudaStream_t stream);
/* staged (NULL: none; 16-byte aligned): token t's h also as the F16 form's pre-staged row t (gptoss_mxfp4_stage_f16 of
 * h_sw with x_swz 1, gather NULL: the same units, so the same bits), which the gate_up launch then copies (session 24,
 * LLMR_GPTOSS_BATCH_FUSE=4: the staging launch gone). route (NULL: none; T >= 2): gptoss_moe_route's counts, offsets,
 * pair_token and pair_of for these ids, by the block that groups the pairs (each expert's pairs in ascending pair
 * order, one of the orders gptoss_moe_route's atomics give): its launch gone (LLMR_GPTOSS_BATCH_FUSE=5, the default since
 * session 25: a 64-row step -1%). */
/* The same for T tokens that the one-token expert kernels then take row by row (the small batched steps, session 19):
 * token t's one-token group table at groups1 + t * gptoss_moe_groups_ints(1) (pairs 0..3 are its own slots; groups1
 * holds T * gptoss_moe_groups_ints(1) ints), no table of all the pairs; gptoss_moe_router_rows_blocks blocks a token
 * (counter and router_logits as said there). */
cudaError_t gptoss_moe_router_decode_rows(const float *x, const uint16_t *norm_w, float eps, const uint16_t *router_w,
                                          const uint16_t *router_b, int T, int H, int E, float *h_sw, int32_t *ids,
                                          float *w, int32_t *groups1, float *router_logits, int32_t *counter,
                                          cudaStream_t stream);
/* Blocks per token of gptoss_moe_router_decode_rows (1 until set, or up to 32: the router rows split over that many
 * SMs, the token's last block, by counter[1 + t] (T + 1 ints, zero, left zero; NULL: one block a token), gathering the
 * logits from router_logits; the same results bit for bit: each logit is one warp's sum either way). The engine sets
 * it at load (LLMR_GPTOSS_ROUTER_ROWS_BLOCKS, default 8). Process-wide; set it before launching. */
void gptoss_moe_router_rows_blocks(int n);

/* Blocks per token of gptoss_moe_router_decode (1, the default, measured; or up to 32 through
 * LLMR_GPTOSS_ROUTER_BLOCKS, which splits the router rows over that many SMs and needs router_logits:
 * one SM pulls the 184 KB of the 20b router at ~17 GB/s, 10.8 us per layer on the H200; not yet
 * measured split). Same results bit for bit. Process-wide; set it before launching. */
void gptoss_moe_router_blocks(int n);

/* The experts' tiled copy (gptoss_mxfp4_tile; the struct and its layout further down, with the streaming kernel). */
typedef struct gptoss_mxfp4_tiled gptoss_mxfp4_tiled;

/* For every pair p in the groups: gu = W_e h_sw[p / 4] + b_e (MXFP4 gate_up of expert e, rows 2j = gate,
 * 2j+1 = up, checkpoint layout [E, 2I, H/32, 16] + scales [E, 2I, H/32]), then the clamped SwiGLU
 * (as gptoss_swiglu) written swizzled to act_sw[p, :] (I values). Only the selected experts' rows are
 * read, once per group of up to 4 pairs. */
cudaError_t gptoss_moe_gate_up_decode(const float *h_sw, const int32_t *groups, int T, const uint8_t *blocks,
                                      const uint8_t *scales, const uint16_t *bias, int E, int H, int I, float alpha,
                                      float limit, float *act_sw, cudaStream_t stream,
                                      const gptoss_mxfp4_tiled *tiled = nullptr);

/* n one-token problems in one launch (the batched steps of up to m->batch_moe_per_row rows, 2-6 by default, whose rows
 * took the T = 1 kernels one launch each until session 49): row r's h_sw + r H, its one-token group table groups1 + r gptoss_moe_groups_ints(1) (as
 * gptoss_moe_router_decode_rows writes them) and its activations act_sw + r 4 I; the rows on the grid's y, each row's
 * results bit for bit its own T = 1 launch (the same kernel and stages, the resident CTAs shared among the rows).
 * The gate_up takes the dp4a ring only (cudaErrorNotSupported where T = 1 would take another kernel: then one launch
 * a row); down adds row r's x + r H with its weights w + r 4. */
cudaError_t gptoss_moe_gate_up_decode_dp4a_rows1(const float *h_sw, const int32_t *groups1, int n, const uint8_t *blocks,
                                                 const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                                 float limit, float *act_sw, cudaStream_t stream,
                                                 const gptoss_mxfp4_tiled *tiled = nullptr);
/* The grid of such a launch of n rows (the ring on, hidden size H, tiled: on the experts' tiled copy): returns its CTAs
 * per row (n of them share the CTAs the GPU holds at once, one wave) and sets *resident to that number by the occupancy
 * API, so a check can hold the two together (0 and 0 where the ring is off or the query fails). */
int gptoss_moe_ring_rows_grid(int H, int n, int tiled, int *resident);
cudaError_t gptoss_moe_down_decode_rows1(const float *act_sw, const int32_t *groups1, int n, const float *w,
                                         const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int E, int I,
                                         int H, float *x, cudaStream_t stream, const gptoss_mxfp4_tiled *tiled = nullptr);

/* The T = 1 MXFP4 GEMVs with the weights streamed through shared memory by cp.async, one warp task
 * ahead (moe_decode_async.cu; LLMR_GPTOSS_MOE_ASYNC=1): on, gptoss_moe_gate_up_decode and
 * gptoss_moe_down_decode with T = 1 and 2 rows per warp use them where they apply (K % 64 == 0, K <=
 * ~2,900, blocks 16-byte and scales 4-byte aligned), bit-identical to the plain kernels. Sets the
 * kernels' shared-memory opt-in, so call it outside any graph capture. Returns whether it is on. */
int gptoss_moe_decode_async(int on);
cudaError_t gptoss_moe_gate_up_decode_async(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                            const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                            float limit, float *act_sw, cudaStream_t stream);
cudaError_t gptoss_moe_down_decode_async(const float *act_sw, const int32_t *groups, const float *w, const uint8_t *blocks,
                                         const uint8_t *scales, const uint16_t *bias, int I, int H, float *x,
                                         cudaStream_t stream);

/* The T = 1 gate_up GEMV on integer dot products through a TMA ring (moe_decode_dp4a.cu; on by default,
 * LLMR_GPTOSS_MOE_DP4A=0 turns it off). on = 1: the activation vector split per 32-value chunk into three byte parts
 * with a shared power of two (x to ~2^-23 of the chunk's largest value), the weights as bytes 2 * e2m1,
 * exact int32 dp4a sums; on = 2 (the engine's default since session 28): four signed digits (~2^-28), the weights'
 * positive and negative magnitudes as two u8 operands of integer tensor-core mma (m16n8k32), exact int32 sums.
 * Either equals the fp32 kernel to fp32 rounding, not bit for bit. On,
 * gptoss_moe_gate_up_decode with T = 1 uses it where it applies (K % 32 == 0, K <= 3,648, 2I % 16 == 0,
 * blocks and scales 16-byte aligned; else cudaErrorNotSupported and the other kernels run); it takes
 * precedence over the cp.async variant. Sets the kernel's shared-memory opt-in, so call it outside any
 * graph capture. Returns whether it is on. */
int gptoss_moe_decode_dp4a(int on);
cudaError_t gptoss_moe_gate_up_decode_dp4a(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                           const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                           float limit, float *act_sw, cudaStream_t stream,
                                           const gptoss_mxfp4_tiled *tiled = nullptr);
/* The router finish folded into that kernel (the default with the router split; LLMR_GPTOSS_ROUTE_RING=0 turns it
 * off): every CTA adds the router split's nparts partial rows (gptoss_gemv1_router), forms r, the logits and the
 * top-4 as gptoss_moe_router_finish does (its sums in the same order: bit for bit), normalises x itself and runs
 * the dp4a gate_up; CTA 0 writes ids, w, groups and router_logits for down and the host. h_sw is not written.
 * _ok says whether it applies (the dp4a ring on, E == 32, the ring's shapes and alignment). */
int gptoss_moe_route_gate_up_dp4a_ok(int H, int I, int E, const uint8_t *blocks, const uint8_t *scales);
cudaError_t gptoss_moe_route_gate_up_dp4a(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                          const uint16_t *router_b, int E, const uint8_t *blocks, const uint8_t *scales,
                                          const uint16_t *bias, int H, int I, float alpha, float limit, int32_t *ids,
                                          float *w, int32_t *groups, float *router_logits, float *act_sw,
                                          cudaStream_t stream, const gptoss_mxfp4_tiled *tiled = nullptr);
/* The same gate_up routed upstream (LLMR_GPTOSS_ROUTE_RING=2): the group table and r (rsqrt of the mean square plus
 * eps) as o_proj's last block left them (gptoss_gemv1_router_finish); normalises x itself as the routed form does.
 * Applies where gptoss_moe_route_gate_up_dp4a_ok(H, I, 32, ...) does. */
cudaError_t gptoss_moe_routed_gate_up_dp4a(const float *x, const uint16_t *norm_w, const float *r, const int32_t *groups,
                                           const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int H,
                                           int I, float alpha, float limit, float *act_sw, cudaStream_t stream,
                                           const gptoss_mxfp4_tiled *tiled = nullptr);
/* The same for the n rows of a small batched step as gptoss_gemv1_rows_router_finish left them (row r: x + r H, r[r],
 * its one-token table at groups1 + r gptoss_moe_groups_ints(1), its activations at act_sw + r 4 I), in one launch as
 * gptoss_moe_gate_up_decode_dp4a_rows1 (row r the grid's y): each row bit for bit its one-token call. */
cudaError_t gptoss_moe_routed_gate_up_dp4a_rows1(const float *x, const uint16_t *norm_w, const float *r,
                                                 const int32_t *groups1, int n, const uint8_t *blocks, const uint8_t *scales,
                                                 const uint16_t *bias, int H, int I, float alpha, float limit, float *act_sw,
                                                 cudaStream_t stream, const gptoss_mxfp4_tiled *tiled = nullptr);
/* The same with each row's router finish in every CTA of its row (as gptoss_moe_route_gate_up_dp4a at T = 1: the rows
 * run in parallel, none waits for another's), from gptoss_gemv1_rows_router's partial rows (row r at rpart + r nparts
 * 33); CTA 0 of row r writes ids + 4 r, w + 4 r, the one-token table at groups1 + r gptoss_moe_groups_ints(1) and
 * router_logits + 32 r (not NULL). Each row bit for bit its one-token call. */
cudaError_t gptoss_moe_route_gate_up_dp4a_rows1(const float *x, const uint16_t *norm_w, float eps, const float *rpart,
                                                int nparts, const uint16_t *router_b, int n, const uint8_t *blocks,
                                                const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                                float limit, int32_t *ids, float *w, int32_t *groups1,
                                                float *router_logits, float *act_sw, cudaStream_t stream,
                                                const gptoss_mxfp4_tiled *tiled = nullptr);
/* gptoss_moe_route_gate_up_dp4a_rows1 with every expert that two rows route to streamed and multiplied once for both
 * (moe_decode_dp4a.cu, "each shared expert once"): the same inputs and outputs, each row bit for bit its one-token call,
 * plus r of each row to rnorm [n]; sync: GPTOSS_GEMV1_ROWS_MAX + 1 ints, 0 before the first launch (each launch leaves
 * them 0); wpair: the cost of a two-row tile in eighths of a one-row one (8..16), by which the CTAs share the work. The
 * tiled copy and the tensor-core consumers only, n <= GPTOSS_GEMV1_ROWS_MAX; elsewhere cudaErrorNotSupported.
 * gptoss_moe_gate_up_pairs_ok says whether it applies at H, I (asks the occupancy API: call it outside any capture). */
int gptoss_moe_gate_up_pairs_ok(int H, int I);
int gptoss_moe_gate_up_pairs_grid(int H); /* its CTAs (what the GPU holds at once; 0: unknown) */
cudaError_t gptoss_moe_route_gate_up_pairs(const float *x, const uint16_t *norm_w, float eps, const float *rpart,
                                           int nparts, const uint16_t *router_b, int n, const uint16_t *bias, int H, int I,
                                           float alpha, float limit, int wpair, int32_t *ids, float *w, int32_t *groups1,
                                           float *router_logits, float *rnorm, int32_t *sync, float *act_sw,
                                           cudaStream_t stream, const gptoss_mxfp4_tiled *tiled);
/* The same after the router launch (as gptoss_moe_gate_up_decode_dp4a_rows1: row r's h_sw + r H and one-token table
 * groups1 + r gptoss_moe_groups_ints(1) in, its activations at act_sw + r 4 I out; E <= 32 experts), each row bit for
 * bit its one-token call. wpair 0 (a diagnostic): no two-row passes, each (row, expert) its own, in this kernel's order. */
cudaError_t gptoss_moe_gate_up_pairs_rows1(const float *h_sw, const int32_t *groups1, int n, int E, const uint16_t *bias,
                                           int H, int I, float alpha, float limit, int wpair, float *act_sw,
                                           cudaStream_t stream, const gptoss_mxfp4_tiled *tiled);
/* The experts' tiled copy (gptoss_mxfp4_tile) at T = 1: the tiled argument of gptoss_moe_gate_up_decode,
 * gptoss_moe_route_gate_up_dp4a and gptoss_moe_routed_gate_up_dp4a (blocks / scales then unused, may be NULL) is read by
 * the tensor-core ring only (a stage one tile; the same bits as from the checkpoint's layout);
 * gptoss_moe_gate_up_tiled_ok says whether it applies (that ring on, the shapes within its shared memory).
 * gptoss_moe_down_decode's tiled argument is read by the 2-rows-a-warp kernel at any T (H % 16 == 0; the same bits),
 * never by the cp.async one. Elsewhere cudaErrorNotSupported, never a fall back to the checkpoint's layout.
 * gptoss_moe_decode_tiled_ok: both T = 1 readers apply (moe_decode.cu). */
int gptoss_moe_gate_up_tiled_ok(int H, int I);
int gptoss_moe_decode_tiled_ok(int H, int I);
/* Timing diagnostics of that kernel, for gptoss_kernels only (wrong results): 1 = its copies alone (no
 * arithmetic), 2 = its arithmetic alone (the first stages copied, then reused), 3 = all but the activation split
 * (the split vector left as it is); 0 = off. */
void gptoss_moe_ring_diag(int d);

/* Multiprocessors of the current device, cached per device (132 when the query fails): the T = 1 MoE
 * kernels size their grids by it. Thread-safe. */
int gptoss_sm_count(void);

/* How the two MXFP4 decode GEMVs turn 4-bit values into floats: on (the default), byte-permute table
 * lookups (engines/gptoss_cuda/mxfp4_lut.h: fewer instructions per weight); off (LLMR_GPTOSS_MOE_LUT=0),
 * the bit operations of moe_decode.cu. Bit-identical (kernel check, H200 session 4: 253/253 with parity
 * and gptoss_batching passing on it; batch-1 decode 435.8 -> 448.8 tok/s at context 128 in the same
 * call). The cp.async variant (gptoss_moe_decode_async) always uses the table decode.
 * Process-wide; set it before launching. */
void gptoss_moe_decode_lut(int on);
/* The T = 1 down on the experts' tiled copy with 4 rows a warp task (two tile lanes' row pairs; the default), so that
 * each of a block's 8 warps has one task and each activation read serves 4 rows instead of 2; 0 gives 2 rows a task
 * (LLMR_GPTOSS_DOWN_R4=0). The same sums per row in the same order: the same bits. Measured on the H200 (session 45):
 * the kernel 12.68 -> 12.40 us, the batch-1 step -0.2%. Process-wide; returns the new setting. */
int gptoss_moe_down_r4(int on);

/* Rows per warp of the two MXFP4 kernels: 2 (default) or 4 (LLMR_GPTOSS_MOE_ROWS=4, for comparisons;
 * same numerics). Process-wide; set it before launching. */
void gptoss_moe_decode_rows(int r);

/* x[t, n] += sum over k = 0..3 in order of w[t, k] * (W_e act_sw[t*4+k] + b_e)[n] with e = the expert
 * of pair t*4+k (MXFP4 down, layout [E, H, I/32, 16]); the residual add of the MoE block. */
cudaError_t gptoss_moe_down_decode(const float *act_sw, const int32_t *groups, int T, const float *w,
                                   const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int E, int I,
                                   int H, float *x, cudaStream_t stream, const gptoss_mxfp4_tiled *tiled = nullptr);

/* ---- decode attention prologue in one launch (qkv_decode.cu), one token at position *pos:
 * h = rmsnorm(x) * norm_w (as gptoss_rmsnorm); q = Wq h + bq, k = Wk h + bk, v = Wv h + bv (bf16 [rows, H],
 * rows n_heads*64 / n_kv*64); YaRN RoPE on q and k (as gptoss_rope at *pos); q -> q[n_heads*64],
 * k and v -> position *pos of block table row 0 of kv (this layer), as gptoss_kv_store with B = 1.
 * Replaces rmsnorm + 3 x gptoss_linear + 2 x gptoss_rope_at + gptoss_kv_store. One sequence (B = 1);
 * H % 8 == 0, H <= GPTOSS_DECODE_MAX_K, weights 16-byte aligned, kv.kvd == n_kv * 64. */
cudaError_t gptoss_qkv_decode(const float *x, const uint16_t *norm_w, float eps, const uint16_t *q_w, const uint16_t *q_b,
                              const uint16_t *k_w, const uint16_t *k_b, const uint16_t *v_w, const uint16_t *v_b, int H,
                              int n_heads, int n_kv, const int32_t *pos, const float *inv_freq, float attn_factor,
                              float *q, gptoss_kv kv, cudaStream_t stream);
/* The same prologue for the n <= 8 rows of a batched step (qkv_decode.cu, session 19): row r of x (rows of H) at
 * position pos[r] (device) through block table row r of kv; q -> q + r * n_heads * 64. Each weight load serves every
 * row, and each row's result is bit for bit gptoss_qkv_decode's for that row alone. n > 8: cudaErrorNotSupported;
 * other limits as gptoss_qkv_decode. Sets its shared-memory opt-in at its first launch (call it outside a graph
 * capture first; the batched steps run without graphs). */
#define GPTOSS_QKV_ROWS_MAX 8
cudaError_t gptoss_qkv_rows(const float *x, const uint16_t *norm_w, float eps, const uint16_t *q_w, const uint16_t *q_b,
                            const uint16_t *k_w, const uint16_t *k_b, const uint16_t *v_w, const uint16_t *v_b, int H,
                            int n_heads, int n_kv, int n, const int32_t *pos, const float *inv_freq, float attn_factor,
                            float *q, gptoss_kv kv, cudaStream_t stream);

/* ---- decode attention split over keys (attention_decode.cu), the flash-decoding form of
 * gptoss_attention_at (same arguments and semantics): for each row b < B, the query q[b, :] at
 * position pos[b] over keys 0..pos[b] (or the last `window`) of table row b. Block (b, KV head,
 * split) reads its K/V once for all n_heads/n_kv query heads of that KV head; the keys are cut into
 * GPTOSS_ATT_SPLITS splits of whole 32-key steps (sliding layers touch only their window). Scratch:
 * part [B * n_heads * GPTOSS_ATT_SPLITS * 66] floats; counters [B * n_kv] ints, 0 before the first
 * launch (left 0). Deterministic: splits are merged in split order. Checked for B = 1. Measured on the
 * H200 it beats gptoss_attention_at only at long contexts (13.7 vs 7.1 us at 128 keys, 49.8 vs 86.7 us
 * at 5,000; H100 after attention_at's lanes-own-dims rewrite: 11.8 vs 5.9 us, 51.8 vs 75.7 us), so the
 * decode step uses it only with LLMR_GPTOSS_SPLIT_ATTN=1. */
#define GPTOSS_ATT_SPLITS 32
cudaError_t gptoss_attention_decode(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                    int n_heads, int n_kv, int window, float *out, float *part, int32_t *counters,
                                    cudaStream_t stream);


/* ---- batched-step attention (attention_rows.cu): gptoss_attention_at's semantics for B rows (row b's
 * query q[b, :] at position pos[b] over keys 0..pos[b], or the last `window`, of table row b; out
 * [B, n_heads*64]), for batched decode steps: block (row, KV head, split of 64-key chunks) reads each K/V
 * row once for the n_heads / n_kv query heads of its KV head (1, 2, 4 or 8; others are refused), and the
 * splits of a row are merged in split order. max_pos (host) >= every pos[b]: it sizes the grid (a
 * sliding layer launches only its window's splits). Splits depend only on the row's own number of keys,
 * so a row's result does not depend on the other rows (bit for bit). Scratch: part [B * n_heads *
 * GPTOSS_ATTN_ROWS_SPLITS * 66] floats; counters [B * n_kv] ints, 0 before the first launch (left 0).
 * Equal to the CPU loop up to fp32 summation order. The batched step's default (LLMR_GPTOSS_BATCH_ATTN=2,
 * scheduler.cu): on the H200 6-10x faster than gptoss_attention_at from 32 rows, 2.6x on 2 rows' full layers. At
 * B = 1 it is launched with PDL (pdl.h): the batch-1 decode graph's full layers from GPTOSS_SPLIT_FROM keys (step 50:
 * on the H100 +8% batch-1 decode at 1,024 keys, +25% at 4,096 against gptoss_attention_decode). */
#define GPTOSS_ATTN_ROWS_SPLITS 32
cudaError_t gptoss_attention_rows(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                  int max_pos, int n_heads, int n_kv, int window, float *out, float *part,
                                  int32_t *counters, cudaStream_t stream);
/* The same, also writing each output value's `splits` bf16 parts for o_proj's tensor-core GEMM (part s of row b at
 * xs[(s B + b) n_heads 64], as gptoss_tc_split; tc.h gptoss_tc_linear with x NULL reads them): the batched step's
 * split of the attention output without its own launch (docs/performance.md, step 43). */
cudaError_t gptoss_attention_rows_split(const float *q, gptoss_kv kv, const uint16_t *sinks, const int32_t *pos, int B,
                                        int max_pos, int n_heads, int n_kv, int window, float *out, float *part,
                                        int32_t *counters, int splits, uint16_t *xs, cudaStream_t stream);

/* ---- MXFP4 experts on tensor cores (moe_mma.cu): one kernel for any number of tokens per expert.
 * For expert e and each grouped pair p in [offsets[e], offsets[e] + counts[e]) (counts and offsets on
 * the device, as gptoss_moe_route writes them; nothing goes to the host), with row(p) = gather ?
 * gather[p] : p and x_row = x + row(p) * ldx:
 *   swiglu = 0: y[p, n] = sum_k x_row[k] * W_e[n, k] + b[e, n]             (y [P, N]);
 *   swiglu = 1: gu = the same with N = 2I rows (gate 2j, up 2j + 1), then the clamped SwiGLU of
 *               gptoss_swiglu: y[p, j] = min(g, limit) * sigmoid(alpha * min(g, limit)) *
 *               (clamp(u, -limit, limit) + 1)                                (y [P, N / 2]).
 * W_e as gptoss_mxfp4_grouped (blocks [E, N, K/32, 16], scales [E, N, K/32]; the values exactly those of
 * gptoss_mxfp4_dequant). x_swz = 1: each x row is chunk-swizzled (gptoss_swz; needs ldx == K), as the
 * decode router writes h_sw. Numerics: x = hi + mid + lo in bf16 (as tc.h with S = 3), mma.sync bf16 with
 * fp32 accumulation, fp32 level (~1e-7 relative); deterministic, and a pair's result does not depend on the other pairs.
 * Each expert's packed weights are read once per 32 of its pairs (once per launch at decode sizes).
 * Needs K % 32 == 0, ldx >= K even, x 8-byte and blocks 16-byte aligned, E <= 65535. Rows of y of
 * pairs outside every expert's range are not written. */
cudaError_t gptoss_mxfp4_mma(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                             const uint8_t *scales, const uint16_t *b, const int32_t *counts, const int32_t *offsets,
                             int E, int K, int N, int swiglu, float alpha, float limit, float *y, cudaStream_t stream);

/* The same products with each warp streaming one 16-row weight tile over the whole K (moe_mma_stream.cu):
 * a CTA stages the activations of up to 8 (16 from max_pairs 256) pairs of one expert, then its warps
 * run with no further barrier (one more per staging phase with 16-pair tiles).
 * parts 3: results bit for bit those of gptoss_mxfp4_mma (same decoded values, same mma sequence per
 * output). parts 2: the activations as hi + mid only (tc.h's S = 2, ~1e-5 relative; the prompt path's
 * level), a third fewer products. max_pairs: an upper bound on the pairs of the launch (sum of counts,
 * e.g. 4 x the rows of a decode step); it sizes the grid, the tiles and the staging (shared memory, see
 * _smem). warps: 1..16 per CTA, 0 = by max_pairs. When the staging would need more than
 * GPTOSS_MMA_STREAM_MAX_SMEM bytes it runs gptoss_mxfp4_mma instead (parts 3) or returns
 * cudaErrorInvalidValue (parts 2). LLMR_GPTOSS_MOE_STREAM_TILES=1|2|4 forces 8-, 16- or 32-pair tiles and
 * LLMR_GPTOSS_MOE_STREAM_OCC=1|2|3 an occupancy mode (for comparisons). */
#define GPTOSS_MMA_STREAM_MAX_SMEM (227 * 1024)
cudaError_t gptoss_mxfp4_mma_stream(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                                    const uint8_t *scales, const uint16_t *b, const int32_t *counts,
                                    const int32_t *offsets, int E, int K, int N, int swiglu, float alpha, float limit,
                                    int max_pairs, int parts, int warps, float *y, cudaStream_t stream);
/* The tiled copy of a matrix of experts (gptoss_mxfp4_tile): the bytes each warp of the streaming kernel loads for one
 * 128-value super-chunk lie together, so a warp's load is 1 KB in one piece instead of 64 bytes from each of 16 rows
 * (loads alone, 398 MB: 3.0 against 2.1 TB/s on an H100, session 30). For tile i (rows 16i .. 16i + 15), super-chunk c
 * (NSC = ceil(K / 128) of them), lane (g, t) and r in {0, 1}: unit (i NSC + c) 64 + gptoss_mxfp4_tiled_slot(lane, r)
 * (16 bytes) holds MXFP4 block 4c + t of row 16i + (swiglu ? 2g + r : g + 8r), the lane's fragment rows; scales[] the
 * block's scale byte at the same index. Blocks past K and rows past N hold zeros and scale 127 (what the kernel reads
 * there). Expert e's tiles start at unit e ceil(N / 16) NSC 64. */
struct gptoss_mxfp4_tiled {
    const uint8_t *blocks, *scales;
    /* NULL, or the same weights one byte each (gptoss_mxfp4_tile_e5): unit u's 32 values, half h (16 bytes) at
     * e5 + 16 gptoss_mxfp4_e5_at(u, h) */
    const uint8_t *e5;
};
/* The first unit of tile i (rows 16i .. 16i + 15) of expert e in a tiled copy of N x K experts; super-chunk c's 64 units
 * follow at + 64 c. With e = E, i = 0: the copy's units. Host and device. */
static __host__ __device__ inline size_t gptoss_mxfp4_tiled_first(int e, int i, int N, int K) {
    return ((size_t)e * ((N + 15) / 16) + i) * ((K + 127) / 128) * 64;
}
/* Where lane (g, t)'s unit r lies among its super-chunk's 64: 8 g + ((2 t + r) ^ g). Its two units are a 32-byte pair in
 * either order (r = 0 second where g is odd). Why the xor (session 31): the T = 1 kernels copy a tile into shared
 * memory and read it there 4 or 16 bytes a lane; in 8 g + 2 t + r, the lanes of a quarter-warp that read one word of
 * 8 rows' units met 8 ways on one bank; with it, every row of 128 bytes puts a given (t, r) on another bank group.
 * Host and device. */
static __host__ __device__ inline int gptoss_mxfp4_tiled_slot(int lane, int r) {
    const int g = lane >> 2;
    return 8 * g + ((2 * (lane & 3) + r) ^ g);
}
/* Where unit u of a tiled copy of N x K experts comes from: expert *e, row *row and block *blk of the checkpoint's
 * layout; returns 0 for a pad (zeros, scale 127). Host and device (the tiling kernel, and the host checks that every
 * block lands once). */
static __host__ __device__ inline int gptoss_mxfp4_tiled_source(size_t u, int N, int K, int swiglu, int *e, int *row,
                                                                int *blk) {
    const int NC = K / 32, NSC = (K + 127) / 128, tiles = (N + 15) / 16;
    const int slot = (int)(u & 63), g = slot >> 3, tr = (slot & 7) ^ g, r = tr & 1, t = tr >> 1; /* tiled_slot's inverse */
    const size_t tc = u >> 6; /* tile * NSC + super-chunk */
    const size_t tile = tc / (size_t)NSC;
    *e = (int)(tile / (size_t)tiles);
    *row = 16 * (int)(tile % (size_t)tiles) + (swiglu ? 2 * g + r : g + 8 * r);
    *blk = 4 * (int)(tc % (size_t)NSC) + t;
    return *row < N && *blk < NC;
}
/* Bytes of the tiled copy of E experts of N x K (blocks, then scales: 17 bytes a unit). */
size_t gptoss_mxfp4_tiled_bytes(int E, int N, int K);
/* Writes the tiled copy of blocks / scales (E experts of N x K, the checkpoint's layout) into out
 * (gptoss_mxfp4_tiled_bytes, 16-byte aligned) and points *t into it (t->e5 NULL). swiglu: gate_up's row order (as the
 * kernel's). */
cudaError_t gptoss_mxfp4_tile(const uint8_t *blocks, const uint8_t *scales, int E, int N, int K, int swiglu, void *out,
                              gptoss_mxfp4_tiled *t, cudaStream_t stream);
/* The e5m2 copy of a tiled copy t (gptoss_mxfp4_tiled_bytes(E, N, K) / 17 * 32 bytes at out, 16-byte aligned): each
 * weight as the F16 form's fp16 value's high byte, e2m1 x 2^(s - 127 - shift[e]) (shift: gptoss_mxfp4_f16_shifts), which
 * holds it exactly wherever s - 127 - shift[e] lies within +-MXFP4_LUT_SCALED_MAX_K (a normal fp16 with two significant
 * bits has a zero low byte: fp8 e5m2). Unit u of t becomes 32 bytes, its halves h = 0, 1 (MXFP4 words 0-1, 2-3) at out +
 * 16 gptoss_mxfp4_e5_at(u, h): for each of its 4 MXFP4 words (nibbles 0..7), the bytes of nibbles 0, 2, 1, 3 and then
 * 4, 6, 5, 7, so that (E << 8) & 0xFF00FF00 and E & 0xFF00FF00 are the fp16 pairs (0, 1) and (2, 3) the table decode
 * gives (mxfp4_lut_halves). A block with a nonzero magnitude outside that reach adds 1 to *bad (device, zeroed by the
 * caller): the copy must not be used then. The batched step's F16 launches read it where t.e5 is set and they take the
 * pre-staged shape (gptoss_mxfp4_mma_stream_f16_prestaged): the same fp16 values in the same k order, so the same bits,
 * with ~4 ALU operations a word of 8 weights instead of ~13, for twice the bytes read. */
size_t gptoss_mxfp4_tiled_e5_bytes(int E, int N, int K);
/* Where half h of unit u lies in the e5m2 copy, in 16-byte steps: each super-chunk's 64 units (2 KB) lane-major, half h
 * of lane L's row-r unit (u mod 64 = gptoss_mxfp4_tiled_slot(L, r)) at 32 (2 r + h) + L, so that a warp's load of one
 * (r, h) is 512 contiguous bytes: 4 of the L1's 128-byte wavefronts where the units in slot order (32 bytes a lane, a
 * half of each 32-byte sector per load) took 16 (session 39: the e5m2 launch's L1 data pipe 84% busy). Host and device. */
static __host__ __device__ inline size_t gptoss_mxfp4_e5_at(size_t u, int h) {
    const int slot = (int)(u & 63), g = slot >> 3, tr = (slot & 7) ^ g; /* gptoss_mxfp4_tiled_slot's inverse */
    return 2 * (u & ~(size_t)63) + (size_t)(32 * (2 * (tr & 1) + h) + 4 * g + (tr >> 1));
}
cudaError_t gptoss_mxfp4_tile_e5(const gptoss_mxfp4_tiled *t, const int32_t *shift, int E, int N, int K, void *out,
                                 int32_t *bad, cudaStream_t stream);
/* The F16 form (the batched decode step's default, LLMR_GPTOSS_BATCH_MOE_F16): the weights decoded to fp16 by
 * byte-permute table lookups (mxfp4_lut.h) scaled by 2^(s - 127 - shift[e]) (shift: the experts' fp16 shifts, tc.h
 * gptoss_mxfp4_f16_shifts; exact down to 2^-24), the activations as two fp16 parts (hi = fp16(x), lo = fp16(x - hi):
 * 22 significant bits, where the bf16 form's 2 parts keep 16), fp32 sums scaled back by 2^shift[e]: ~14 instead of
 * ~20 instructions to decode 8 weights. The caller keeps |x| < 65,504 (fp16's range: the engine checks a bound at
 * load). Not bit for bit the bf16 form (another rounding of x, another k order in the mma); the same bits at any
 * tile size and occupancy. x 16-byte aligned when x_swz. Other arguments and limits as above with parts 2. */
/* tiled (NULL, or NULL pointers in it: the checkpoint's layout only): the same weights in gptoss_mxfp4_tile's layout,
 * read instead of blocks / scales by every launch of the F16 form; the same bits either way. */
cudaError_t gptoss_mxfp4_mma_stream_f16(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                                        const uint8_t *scales, const uint16_t *b, const int32_t *shift,
                                        const int32_t *counts, const int32_t *offsets, int E, int K, int N, int swiglu,
                                        float alpha, float limit, int max_pairs, int warps, const void *staged,
                                        const gptoss_mxfp4_tiled *tiled, float *y, cudaStream_t stream);
/* Pre-staged activations for the F16 form (the batched decode step's experts). Every CTA of a launch stages its tile's
 * activations into shared memory, converting each value to its two fp16 parts in the mma's k order; the same rows are
 * staged again by every row chunk (23 CTAs per tile at the 20b's shapes), and at 64 rows that staging (its index
 * arithmetic, conversions, loads and barrier waits) was ~26% of the kernel's stall samples (ncu, session 20 call 1).
 * gptoss_mxfp4_stage_f16 converts P rows once into out (P x gptoss_mxfp4_stage_f16_units(K) units of 16 bytes, zeros
 * past K; row p is x's row gather[p], or p with gather NULL), and an F16 launch given staged = out copies its tile's
 * rows from there as they are: the same staged values, so the same bits. A launch with a gather (gate_up: pair ->
 * token) copies pair p's row from staged row gather[p], so its rows are staged once per token (the T rows of x, gather
 * NULL: a quarter of the pairs' rows, session 24); a launch without one (down) copies staged row p.
 * Only shapes where gptoss_mxfp4_mma_stream_f16_prestaged(K, max_pairs) is 1 read staged (mode 2's 8-pair tiles
 * with all of K in shared memory, from GPTOSS_MMA_STREAM_PRE_MIN pairs); others ignore it. staged == NULL: the CTAs
 * stage as before. H100, one 20b layer's experts: T = 64 0.331 -> 0.311 ms, T = 128 0.535 -> 0.473; at T = 4..8 even or
 * slower (0.140 -> 0.143, 0.147 -> 0.150), hence the minimum (session 20 calls 2-3, docs/performance.md step 31). */
cudaError_t gptoss_mxfp4_stage_f16(const float *x, int ldx, int x_swz, const int32_t *gather, int P, int K, void *out,
                                   cudaStream_t stream);
static __host__ __device__ inline int gptoss_mxfp4_stage_f16_units(int K) { return 32 * ((K + 127) / 128); }
int gptoss_mxfp4_mma_stream_f16_prestaged(int K, int max_pairs);
#define GPTOSS_MMA_STREAM_PRE_MIN 64 /* pairs (16 rows): below, the two staging launches cost what they save (H100) */
size_t gptoss_mxfp4_mma_stream_smem(int K, int max_pairs);
void gptoss_mxfp4_mma_stream_force_tiles(int nt); /* tests: 1, 2 or 4 forces 8-, 16- or 32-pair tiles (4: the F16
                                                   * form in mode 1 only, else 2), 0 = automatic */
/* From this many pairs the F16 form takes 32-pair tiles in mode 1 (prompt chunks; 16 below). */
#define GPTOSS_MMA_STREAM_NT4_MIN 1024
/* Tests: the occupancy mode (1: 1 CTA per SM, 2: 2 CTAs of 16 warps, 3: 3 CTAs of 8 warps, 0 = automatic:
 * 2 below 1,024 pairs, else 1; the same bits in every mode), and the super-chunks per staging phase in
 * modes 2-3 (a multiple of 4; 0 = automatic). The engine reads LLMR_GPTOSS_MOE_STREAM_OCC. */
void gptoss_mxfp4_mma_stream_force_occ(int occ);
/* The F16 form's decode: 1 (default) through magnitude tables scaled per block where every block scale of a warp's
 * super-chunk lies within 2^+-13 of its expert's shift, else fp16 scale products; 0 the products everywhere (tests,
 * LLMR_GPTOSS_MOE_F16_TABLES=0). The same bits either way. Process-wide; set it before launching. */
void gptoss_mxfp4_mma_stream_f16_tables(int on);
/* Whether that decode is on (reads LLMR_GPTOSS_MOE_F16_TABLES at the first call); gptoss_mxfp4_prompt_gemm follows it. */
int gptoss_mxfp4_mma_stream_f16_tables_on(void);
void gptoss_mxfp4_mma_stream_force_phase(int pc);

/* A prompt chunk's expert GEMMs on warpgroup MMA straight from the MXFP4 weights (moe_mma_prompt.cu): for every expert
 * e, ys[r] = xs[r] . (W_e 2^-shift[e])^T over its rows r (fp32 sums, no bias), the products tc.cu's fp16 experts path
 * takes from cuBLAS on the fp16 expert cache, summed in another order. xs: fp16 (bits) rows of gptoss_prompt_row(K)
 * values, value k of a row at gptoss_prompt_pos(k) and zeros past K (16-byte aligned), grouped by expert: expert e's
 * are rows offsets[e] .. + counts[e] - 1, or with precise its counts[e] + counts[E + e] rows from offsets[e] +
 * offsets[E + e] (tc.cu's precise rows; counts / offsets of 2E, gptoss_moe_route_precise); rows in all (the grid is
 * sized by it; the counts stay on the device). tiled: the experts [E, N, K] in gptoss_mxfp4_tile's layout (swiglu:
 * gate_up's row order, N even), shift: their fp16 shifts (tc.h gptoss_mxfp4_f16_shifts). ys: rows x N fp32, row r at
 * ys + r N. K % 32 == 0, else cudaErrorInvalidValue; cudaErrorNotSupported where gptoss_mxfp4_prompt_gemm_ok is 0. */
cudaError_t gptoss_mxfp4_prompt_gemm(const uint16_t *xs, const gptoss_mxfp4_tiled *tiled, const int32_t *shift,
                                     const int32_t *counts, const int32_t *offsets, int precise, int E, int rows, int K,
                                     int N, int swiglu, float *ys, cudaStream_t stream);
/* Whether the current device runs it (compute capability 9.0: wgmma, built for sm_90a). */
int gptoss_mxfp4_prompt_gemm_ok(void);
/* Its rows' layout: K rounded up to 128 values, each 128-value super-chunk in the k slots of the decoded weights'
 * fragments (lane t of a warp holds MXFP4 block t of the super-chunk, k16 step j = 2 a + b its values 8 a + 4 b + 0..3:
 * value 32 t + 8 a + 4 b + 2 kc + i of the super-chunk at (2 j + kc) 8 + 2 t + i). Pairs k, k + 1 (k even) stay side by
 * side. Host and device. */
static __host__ __device__ inline int gptoss_prompt_row(int K) { return (K + 127) / 128 * 128; }
static __host__ __device__ inline int gptoss_prompt_pos(int k) {
    const int w = k & 127, t = w >> 5, a = (w >> 3) & 3, b = (w >> 2) & 1, kc = (w >> 1) & 1;
    return (k & ~127) + ((4 * a + 2 * b + kc) << 3) + 2 * t + (w & 1);
}

/* For the tests: out[s * 16 + nib] = the bf16 bits gptoss_mxfp4_mma uses for MXFP4 nibble nib with
 * E8M0 scale byte s (all 256 x 16; out is device memory of 4096 uint16). */
cudaError_t gptoss_mxfp4_mma_table(uint16_t *out, cudaStream_t stream);

#endif
