/* moe_decode.cu — the MoE block of a decode step (T = 1..64 tokens) in three launches (see kernels.h):
 *
 *   gptoss_moe_router_decode   rmsnorm + router GEMV + top-4 + softmax, one block per token; the last
 *                              block to finish groups the (token, slot) pairs by expert (one token:
 *                              its block writes the table at once);
 *   gptoss_moe_gate_up_decode  MXFP4 gate_up GEMV over the selected experts only, bias and clamped
 *                              SwiGLU in the epilogue, writing the activation;
 *   gptoss_moe_down_decode     MXFP4 down GEMV, bias, routing weights, the sum over the 4 slots in
 *                              order 0..3 and the residual add.
 *
 * Why it is shaped this way (memory-bound: each step must stream the selected experts' packed weights
 * once, 4.4 MB per expert-layer for 20b, at HBM speed):
 *  - each lane owns whole MXFP4 blocks (one 16-byte load = 32 weights, one E8M0 scale), several loads
 *    in flight per lane (U chunks x R rows);
 *  - the 4-bit values are decoded with bit operations, not a table: the 3 magnitude bits of an e2m1
 *    nibble placed at fp16 bits 9..11 and its sign at bit 15 make exactly fp4 * 2^-14 (0.5 becomes the
 *    fp16 subnormal 2^-15), two nibbles per 32-bit op; the 2^14 goes into the block's scale. fp16 ->
 *    fp32 is exact, products and sums are fp32, as in gptoss_mxfp4_grouped (the numerical twin);
 *  - activation vectors are stored "chunk-swizzled" (gptoss_swz): float4 f of 32-value chunk c sits at
 *    (f * K/32 + c) * 4, so the 32 lanes of a warp, each on its own chunk, read 512 contiguous bytes per
 *    load (coalesced, served from L1/L2) instead of 32 scattered lines; no shared-memory staging, no
 *    block barriers on the weight path;
 *  - a warp computes R = 4 rows at once so every activation load serves 4 rows;
 *  - each touched expert's weights are read once per group of up to 4 of its tokens (pairs grouped by
 *    expert, ascending expert id then pair index, by the router kernel), so a batch of T tokens reads
 *    ~ceil(tokens per expert / 4) copies of each touched expert, not one per token;
 *  - nothing uses float atomics: every output element has one writer and a fixed summation order. */
#include "engines/gptoss_cuda/kernels.h"

#include <cuda_fp16.h>

#include <atomic>

#include "engines/gptoss_cuda/moe_mma_common.cuh"
#include "engines/gptoss_cuda/moe_route.cuh"
#include "engines/gptoss_cuda/mxfp4_lut.h"
#include "engines/gptoss_cuda/pdl.h"
#include "engines/gptoss_cuda/tc.h"

#define MD_U 3       /* chunks per row in flight per lane (3 * 32 * 32 = 3072 values per pass) */
/* Rows per warp task R (a template argument): 2 (default: gate_up's gate/up pair, 64 registers, 4 blocks
 * per SM) or 4 (x loads shared by 4 rows, 128 registers, 2 blocks per SM); LLMR_GPTOSS_MOE_ROWS picks. */
#define MD_MINB(G, R) ((G) == 1 && (R) == 2 ? 4 : 2) /* resident blocks per SM the register budget is set for */
/* down at T = 1 (360 blocks of 8 warps for the 20b, under 3 per SM): 3 blocks per SM still hold them all at once, and
 * the 85 registers that leaves were measured 2% faster than 64 (session 43: 13.02 -> 12.74 us). ptxas still issues a
 * lane's u = 1 and u = 2 weight loads next to their use (the SASS in s43-lead/call2), with registers to spare; forcing
 * all six out first, or staging the activations in shared memory, measured slower (session 44, s44-lead/call2-3).
 * On the tiled copy the 4-row form fits that budget too (80 registers, no spill; session 45), so it keeps 3. */
#define DN_MINB(G, R, TILED) ((G) == 1 && ((R) == 2 || (TILED)) ? 3 : MD_MINB(G, R))
#define MD_WARPS 8   /* warps per block of the expert GEMVs */
#define MD_G 4       /* tokens (pairs) per expert group */


/* Group table layout (ints), GM = 4T: [0] groups; [1 + g] expert; [1 + GM + g] pairs in it (1..4);
 * [1 + 2GM + 4g + i] pair ids (t * 4 + slot). */
static __device__ __forceinline__ const int32_t *grp_e(const int32_t *g) { return g + 1; }

/* ------------------------------------------------------------------ router (one block per token) */

#define RT_THREADS 1024
#define RT_UNROLL 8
#define RT_XREG 3 /* elements of x per thread held in registers: 3,072 (gpt-oss: 2,880) */
static_assert(RT_XREG * RT_THREADS >= GPTOSS_ROUTER_ADD_MAX_H, "the added x must fit the router's registers");
static_assert(GPTOSS_DECODE_MAX_T * GPTOSS_TOPK <= RT_THREADS && GPTOSS_DECODE_MAX_T * GPTOSS_TOPK % 32 == 0,
              "the grouping: a thread a pair, whole warps of pairs");

/* o_proj's split GEMM output that a batched router adds into x first (gptoss_moe_router_decode_add); y NULL: none. */
struct router_add {
    const float *y;     /* [splits][T][H]: part s of token t's row at y + (s * T + t) * H */
    int splits;
    const uint16_t *b;  /* o_proj's bias [H], or NULL */
    float *x_out;       /* where the new x goes (the x the router reads) */
    uint4 *staged;      /* NULL, or the F16 form's pre-staged rows: token t's h as row t */
    gptoss_moe_route_out route; /* counts NULL: none; else gptoss_moe_route's tables, by the last block */
};

/* This thread's first RT_XREG elements of x and of the norm weights (elements tid + u * RT_THREADS; 0 past H). */
static __device__ __forceinline__ void router_load_x(const float *x, const uint16_t *norm_w, int H, int tid,
                                                     float xv[RT_XREG], float nwv[RT_XREG]) {
#pragma unroll
    for (int u = 0; u < RT_XREG; u++) {
        const int i = tid + u * RT_THREADS;
        xv[u] = i < H ? x[i] : 0.0f;
        nwv[u] = i < H ? gptoss_bf16_to_f32(norm_w[i]) : 0.0f;
    }
}

/* With add.y: token t's x (this thread's xv) + o_proj's output, the same sum as tc_reduce_segs_kernel with
 * accumulate, written back; then every element of x is in these registers (H <= GPTOSS_ROUTER_ADD_MAX_H, checked
 * at launch). */
static __device__ __forceinline__ void router_add_o(const router_add &add, int H, int tid, int t, int T,
                                                    float xv[RT_XREG]) {
    if (!add.y) return;
    /* every part sum before the first store: x_out may alias what the sums read as far as the compiler knows, so
     * sum-store pairs would take one memory round trip each */
    float o[RT_XREG];
#pragma unroll
    for (int u = 0; u < RT_XREG; u++) {
        const int i = tid + u * RT_THREADS;
        o[u] = i < H ? gptoss_tc_part_sum(add.y + (size_t)t * H + i, (size_t)T * H, add.splits, add.b ? add.b + i : NULL)
                     : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < RT_XREG; u++) {
        const int i = tid + u * RT_THREADS;
        if (i >= H) break;
        xv[u] += o[u];
        add.x_out[(size_t)t * H + i] = xv[u];
    }
}

__global__ void __launch_bounds__(RT_THREADS) moe_router_decode_kernel(const float *x, const uint16_t *norm_w, float eps,
                                                                       const uint16_t *rw, const uint16_t *rb, int T,
                                                                       int H, int E, float *h_sw, int32_t *ids,
                                                                       float *wts, int32_t *groups, float *rl,
                                                                       int32_t *counter, int pdl, int one_tables,
                                                                       router_add add) {
    extern __shared__ float4 hs4[]; /* [2][H / 8]: the two float4 halves of each 8-element chunk */
    __shared__ float red[32];
    __shared__ float lg[GPTOSS_MAX_EXPERTS];
    __shared__ int last, last_t;
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int RB = gridDim.y, rbk = blockIdx.y; /* RB blocks per token share the router rows */
    const int EPB = (E + RB - 1) / RB;           /* rows [rbk * EPB, (rbk + 1) * EPB) are this block's */
    { /* this block's router rows into L2 while x and the norm come (the experts' weights streamed through L2 since
       * this layer's last read of them); with PDL (pdl.h) all of them before the wait for x, else the T blocks of the
       * rows each a slice */
        const int e0 = rbk * EPB, e1 = min(E, e0 + EPB);
        if (e1 > e0) {
            const size_t bytes = (size_t)(e1 - e0) * H * 2, per = pdl ? bytes : (bytes / T + 127) / 128 * 128,
                         at = pdl ? 0 : min(bytes, (size_t)t * per);
            gptoss_prefetch_range((const char *)(rw + (size_t)e0 * H) + at, min(per, bytes - at), tid, RT_THREADS);
        }
        gptoss_pdl_sync(pdl);
    }
    const float *xr = x + (size_t)t * H;
    /* The small reads go out together first: this thread's x and norm weights (kept in registers for both
     * passes of the norm) and lane 0's router bias of the warp's first expert row. */
    float xv[RT_XREG], nwv[RT_XREG];
    router_load_x(xr, norm_w, H, tid, xv, nwv);
    router_add_o(add, H, tid, t, T, xv);
    const int e_first = rbk * EPB + warp;
    const float rb_first = lane == 0 && e_first < E ? gptoss_bf16_to_f32(rb[e_first]) : 0.0f;
    /* 1. RMSNorm: the block's sum of squares, then h = (x * r) * w into shared memory and h_sw. */
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < RT_XREG; u++) ss += xv[u] * xv[u];
    for (int i = tid + RT_XREG * RT_THREADS; i < H; i += RT_THREADS) ss += xr[i] * xr[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float v = red[lane];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) red[0] = v;
    }
    __syncthreads();
    const float r = rsqrtf(red[0] / (float)H + eps);
    const int K8 = H / 8;
    float *hsf = (float *)hs4;
    for (int u = 0, i = tid; i < H; u++, i += RT_THREADS) { /* the first RT_XREG from registers */
        const float h = u < RT_XREG ? (xv[min(u, RT_XREG - 1)] * r) * nwv[min(u, RT_XREG - 1)]
                                    : (xr[i] * r) * gptoss_bf16_to_f32(norm_w[i]);
        const int c = i >> 3, j = i & 7;
        hsf[((j >> 2) * K8 + c) * 4 + (j & 3)] = h;
        if (rbk == 0) h_sw[(size_t)t * H + gptoss_swz(i, H)] = h;
    }
    __syncthreads();
    if (add.staged) { /* h as the F16 form's pre-staged row t (gptoss_mxfp4_stage_f16's units, from shared memory) */
        const int units = gptoss_mxfp4_stage_f16_units(H);
        for (int u = tid; u < units; u += RT_THREADS) {
            const int k0 = mma_f16_unit_k(u);
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (k0 < H) {
                const float4 f = hs4[((k0 & 7) >> 2) * K8 + (k0 >> 3)];
                v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
            }
            add.staged[(size_t)t * units + u] = mma_f16_unit(v); /* past H: the units of +0, all zero bits */
        }
    }
    /* 2. Router logits: one warp per expert row, 16-byte loads of 8 bf16; block rbk of the token takes
     * rows [rbk * EPB, (rbk + 1) * EPB). */
    const int e_end = min(E, (rbk + 1) * EPB);
    for (int e = rbk * EPB + warp; e < e_end; e += RT_THREADS / 32) {
        const uint4 *w4 = (const uint4 *)(rw + (size_t)e * H);
        float acc = 0.0f;
        for (int c0 = lane; c0 < K8; c0 += 32 * RT_UNROLL) { /* RT_UNROLL loads in flight: one SM reads it all */
            uint4 qv[RT_UNROLL];
#pragma unroll
            for (int u = 0; u < RT_UNROLL; u++)
                qv[u] = c0 + 32 * u < K8 ? __ldg(w4 + c0 + 32 * u) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int u = 0; u < RT_UNROLL; u++) {
                const int c = c0 + 32 * u;
                if (c >= K8) break;
                const uint4 q = qv[u];
                const float4 a = hs4[c], b = hs4[K8 + c];
                acc += a.x * __uint_as_float(q.x << 16) + a.y * __uint_as_float(q.x & 0xffff0000u) +
                       a.z * __uint_as_float(q.y << 16) + a.w * __uint_as_float(q.y & 0xffff0000u) +
                       b.x * __uint_as_float(q.z << 16) + b.y * __uint_as_float(q.z & 0xffff0000u) +
                       b.z * __uint_as_float(q.w << 16) + b.w * __uint_as_float(q.w & 0xffff0000u);
            }
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) {
            const float v = acc + (e == e_first ? rb_first : gptoss_bf16_to_f32(rb[e]));
            lg[e] = v;
            if (rl) rl[(size_t)t * E + e] = v;
        }
    }
    if (RB > 1) { /* the last of the token's RB blocks gathers the logits and goes on */
        if (lane == 0) __threadfence();
        __syncthreads();
        if (tid == 0) last_t = atomicAdd(&counter[1 + t], 1) == RB - 1;
        __syncthreads();
        if (!last_t) return;
        __threadfence();
        for (int e = tid; e < E; e += RT_THREADS) lg[e] = __ldcg(rl + (size_t)t * E + e);
        if (tid == 0) counter[1 + t] = 0;
    }
    __syncthreads();
    /* 3. Top-4 and the softmax over the 4, by warp 0; one_tables: each token its own one-token table at
     * groups + t * gptoss_moe_groups_ints(1) (for the one-token expert kernels run per row) */
    if (warp == 0)
        router_top4(lg, E, lane, t, ids, wts, one_tables || (T == 1 && RB == 1),
                    one_tables ? groups + (size_t)t * gptoss_moe_groups_ints(1) : groups);
    /* One token in one block (every batch-1 decode step), or every token its own table (by its last block): written
     * above, and the fence, the counter and the block-wide grouping below (a dependent chain of ~3 us) have nothing to
     * wait for. */
    if (one_tables || (T == 1 && RB == 1)) return;
    /* 4. The last block to get here groups all pairs by expert (the ids of every block are visible
     * after the fence + counter); it resets the counter for the next launch (graph replays). Only warp 0 wrote
     * what the last block reads (the ids), so only it fences. */
    if (warp == 0) __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(counter, 1) == T - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* Each pair's rank among its expert's pairs (how many pairs before it have the same expert) without a loop over
     * them: within a warp of pairs __match_any_sync finds the lanes with the same expert, and each warp's count of
     * each expert (its leader writes it) gives the warps before. An expert's count, its first group and its first
     * pair slot (the exclusive sums over the experts before it) by warp 0's scan. Integer sums: the same tables as a
     * thread per pair counting the pairs before it and one thread summing over the experts. */
    constexpr int PW = GPTOSS_DECODE_MAX_T * GPTOSS_TOPK / 32; /* warps of pairs, at most */
    __shared__ int wcnt[PW][GPTOSS_MAX_EXPERTS];
    __shared__ int cnt[GPTOSS_MAX_EXPERTS], gbase[GPTOSS_MAX_EXPERTS], poff[GPTOSS_MAX_EXPERTS];
    const int P = T * GPTOSS_TOPK, GM = P, NW = (P + 31) / 32;
    const gptoss_moe_route_out &ro = add.route;
    const int p = tid;
    const int pe = p < P ? __ldcg(ids + p) : 0; /* pair p's expert */
    for (int i = tid; i < NW * E; i += RT_THREADS) wcnt[i / E][i % E] = 0;
    __syncthreads();
    int rank = 0;
    if (warp < NW) { /* whole warps: the lanes past P take no part in the match */
        const unsigned in = __ballot_sync(0xffffffffu, p < P);
        if (p < P) {
            const unsigned same = __match_any_sync(in, pe);
            rank = __popc(same & ((1u << lane) - 1u));
            if (rank == 0) wcnt[warp][pe] = __popc(same);
        }
    }
    __syncthreads();
    for (int xe = tid; xe < E; xe += RT_THREADS) {
        int c = 0;
        for (int w = 0; w < NW; w++) c += wcnt[w][xe];
        cnt[xe] = c;
    }
    __syncthreads();
    if (warp == 0) { /* lane l: experts l * EPL .. + EPL - 1, then an exclusive scan over the lanes */
        const int EPL = (E + 31) / 32, x0 = lane * EPL;
        int ng = 0, np = 0;
        for (int xe = x0; xe < min(E, x0 + EPL); xe++) { ng += (cnt[xe] + MD_G - 1) / MD_G; np += cnt[xe]; }
        int sg = ng, sp = np; /* inclusive sums over lanes 0 .. lane */
        for (int o = 1; o < 32; o <<= 1) {
            const int ug = __shfl_up_sync(0xffffffffu, sg, o), up = __shfl_up_sync(0xffffffffu, sp, o);
            if (lane >= o) { sg += ug; sp += up; }
        }
        int g = sg - ng, off = sp - np;
        for (int xe = x0; xe < min(E, x0 + EPL); xe++) {
            gbase[xe] = g;
            g += (cnt[xe] + MD_G - 1) / MD_G;
            poff[xe] = off;
            off += cnt[xe];
        }
        if (lane == 31) {
            groups[0] = sg;
            *counter = 0;
        }
    }
    __syncthreads();
    if (ro.counts) /* gptoss_moe_route's tables (the tensor-core experts'): counts and offsets in expert order */
        for (int xe = tid; xe < E; xe += RT_THREADS) { ro.counts[xe] = cnt[xe]; ro.offsets[xe] = poff[xe]; }
    if (p < P) {
        for (int w = 0; w < warp; w++) rank += wcnt[w][pe];
        const int g = gbase[pe] + rank / MD_G, slot = rank % MD_G;
        groups[1 + 2 * GM + 4 * g + slot] = p;
        if (slot == 0) {
            groups[1 + g] = pe;
            groups[1 + GM + g] = min(MD_G, cnt[pe] - rank);
        }
        if (ro.counts) { /* an expert's pairs in ascending pair order (gptoss_moe_route's atomics: any order) */
            ro.pair_token[poff[pe] + rank] = p / GPTOSS_TOPK;
            ro.pair_of[p] = poff[pe] + rank;
        }
    }
}

static int g_router_blocks = 1, g_router_rows_blocks = 1;
void gptoss_moe_router_blocks(int n) { g_router_blocks = n < 1 ? 1 : n > 32 ? 32 : n; }
void gptoss_moe_router_rows_blocks(int n) { g_router_rows_blocks = n < 1 ? 1 : n > 32 ? 32 : n; }

static cudaError_t router_decode_launch(const float *x, const uint16_t *norm_w, float eps, const uint16_t *router_w,
                                        const uint16_t *router_b, int T, int H, int E, float *h_sw, int32_t *ids,
                                        float *w, int32_t *groups, float *router_logits, int32_t *counter,
                                        int one_tables, router_add add, cudaStream_t s) {
    if (T < 1 || T > GPTOSS_DECODE_MAX_T || H <= 0 || H % 32 || H > GPTOSS_DECODE_MAX_K || E < GPTOSS_TOPK ||
        E > GPTOSS_MAX_EXPERTS)
        return cudaErrorInvalidValue;
    const int rb = one_tables ? g_router_rows_blocks : g_router_blocks;
    int RB = rb < E ? rb : E;
    if (!router_logits || !counter) RB = 1; /* the split gathers the logits through the scratch and a counter a token */
    /* the added output: one block a token writes its row of x (no other block reads it), all of it from registers */
    if (add.y) {
        if (add.splits < 1 || add.splits > 3 || !add.x_out || H > GPTOSS_ROUTER_ADD_MAX_H || ((uintptr_t)add.staged & 15))
            return cudaErrorInvalidValue;
        RB = 1;
    }
    const int pdl = T == 1 && gptoss_pdl_enabled();
    const cudaError_t e = gptoss_launch(moe_router_decode_kernel, dim3((unsigned)T, (unsigned)RB), dim3(RT_THREADS),
                                        (size_t)H * sizeof(float), s, pdl, x, norm_w, eps, router_w, router_b, T, H, E,
                                        h_sw, ids, w, groups, router_logits, counter, pdl, one_tables, add);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_moe_router_decode(const float *x, const uint16_t *norm_w, float eps, const uint16_t *router_w,
                                     const uint16_t *router_b, int T, int H, int E, float *h_sw, int32_t *ids,
                                     float *w, int32_t *groups, float *router_logits, int32_t *counter,
                                     cudaStream_t s) {
    const router_add none = {};
    return router_decode_launch(x, norm_w, eps, router_w, router_b, T, H, E, h_sw, ids, w, groups, router_logits, counter,
                                0, none, s);
}

cudaError_t gptoss_moe_router_decode_add(float *x, const float *y, int splits, const uint16_t *o_b, const uint16_t *norm_w,
                                         float eps, const uint16_t *router_w, const uint16_t *router_b, int T, int H, int E,
                                         float *h_sw, int32_t *ids, float *w, int32_t *groups, float *router_logits,
                                         int32_t *counter, void *staged, const gptoss_moe_route_out *route,
                                         cudaStream_t s) {
    if (!y || (route && (!route->counts || !route->offsets || !route->pair_token || !route->pair_of)) ||
        (route && T == 1))
        return cudaErrorInvalidValue;
    const router_add add = {y, splits, o_b, x, (uint4 *)staged,
                            route ? *route : gptoss_moe_route_out{}};
    return router_decode_launch(x, norm_w, eps, router_w, router_b, T, H, E, h_sw, ids, w, groups, router_logits, counter,
                                0, add, s);
}

cudaError_t gptoss_moe_router_decode_rows(const float *x, const uint16_t *norm_w, float eps, const uint16_t *router_w,
                                          const uint16_t *router_b, int T, int H, int E, float *h_sw, int32_t *ids,
                                          float *w, int32_t *groups1, float *router_logits, int32_t *counter,
                                          cudaStream_t s) {
    const router_add none = {};
    return router_decode_launch(x, norm_w, eps, router_w, router_b, T, H, E, h_sw, ids, w, groups1, router_logits,
                                counter, 1, none, s);
}

/* ------------------------------------------------------------------ router from o_proj's partial sums
 * (the T = 1 default for 32 experts; LLMR_GPTOSS_ROUTER_SPLIT=0 turns it off): gptoss_gemv1_router leaves per block the router rows' products with
 * the new residual and its sum of squares; this one block adds them up (fixed order), then as the router above
 * with T = 1. E == 32: lane e of warp 0 owns expert e. */
__global__ void __launch_bounds__(RT_THREADS) moe_router_finish_kernel(const float *x, const uint16_t *norm_w, float eps,
                                                                       const float *rpart, int nparts, const uint16_t *rb,
                                                                       int H, float *h_sw, int32_t *ids, float *wts,
                                                                       int32_t *groups, float *rl) {
    __shared__ float red[32][33];
    __shared__ float r_sh;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float xv[RT_XREG], nwv[RT_XREG];
    router_load_x(x, norm_w, H, tid, xv, nwv);
    const float bias = warp == 0 ? gptoss_bf16_to_f32(rb[lane]) : 0.0f;
    /* warp w adds rows w, w + 32, ... in that order (moe_route.cuh, as every other form of the finish) */
    router_partials_vw(rpart, nparts, warp, lane, red);
    __syncthreads();
    if (warp == 0) {
        const float r = router_finish_warp(red, bias, H, eps, lane, ids, wts, groups, rl);
        if (lane == 0) r_sh = r;
    }
    __syncthreads();
    const float r = r_sh;
#pragma unroll
    for (int u = 0; u < RT_XREG; u++) {
        const int i = tid + u * RT_THREADS;
        if (i < H) h_sw[gptoss_swz(i, H)] = (xv[u] * r) * nwv[u];
    }
    for (int i = tid + RT_XREG * RT_THREADS; i < H; i += RT_THREADS)
        h_sw[gptoss_swz(i, H)] = (x[i] * r) * gptoss_bf16_to_f32(norm_w[i]);
}

cudaError_t gptoss_moe_router_finish(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                     const uint16_t *router_b, int H, int E, float *h_sw, int32_t *ids, float *w,
                                     int32_t *groups, float *router_logits, cudaStream_t s) {
    if (E != 32 || H <= 0 || H % 32 || nparts < 1) return cudaErrorInvalidValue;
    moe_router_finish_kernel<<<1, RT_THREADS, 0, s>>>(x, norm_w, eps, rpart, nparts, router_b, H, h_sw, ids, w, groups,
                                                      router_logits);
    return cudaGetLastError();
}

__global__ void router_rwt_kernel(const uint16_t *rw, const uint16_t *nw, int H, int E, float *rwt) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= H * E) return;
    const int n = i / E, e = i % E;
    rwt[i] = gptoss_bf16_to_f32(rw[(size_t)e * H + n]) * gptoss_bf16_to_f32(nw[n]);
}

cudaError_t gptoss_router_rwt(const uint16_t *router_w, const uint16_t *norm_w, int H, int E, float *rwt, cudaStream_t s) {
    router_rwt_kernel<<<(H * E + 255) / 256, 256, 0, s>>>(router_w, norm_w, H, E, rwt);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ MXFP4 chunk decode */

/* Nibbles i and i + 4 of w as fp16 (value * 2^-14) in one half2: magnitude bits to 9..11 (and
 * 25..27), sign bits to 15 (and 31). */
template <int I> static __device__ __forceinline__ __half2 fp4_pair(uint32_t w) {
    uint32_t mag;
    if constexpr (I == 3) mag = (w >> 3) & 0x0E000E00u;
    else mag = (w << (9 - 4 * I)) & 0x0E000E00u;
    const uint32_t sgn = (w << (12 - 4 * I)) & 0x80008000u;
    const uint32_t h = mag | sgn;
    __half2 v;
    memcpy(&v, &h, sizeof v);
    return v;
}

/* 2^(s - 127) * 2^14: the block scale with the decode's 2^-14 undone. */
static __device__ __forceinline__ float fp4_scale(uint8_t s) {
    return s <= 240 ? __int_as_float(((int)s + 14) << 23) : ldexpf(1.0f, (int)s - 113);
}

/* One warp: rows row0 .. row0+R-1 (R <= nrows real) of an expert matrix (blocks/scales indexed by
 * row) dotted with the ng swizzled K-vectors xv[i]; acc[r][i] are full sums in every lane on return.
 * All R * MD_U weight loads of a lane are issued before any is used; each 32-bit word is decoded right
 * where its 8 products are summed, so few registers stay live (occupancy hides the HBM latency).
 * TILED (R = 2): blocks / scales are the experts' tiled copy (gptoss_mxfp4_tile, down's row order), row0 the first unit
 * of the rows' tile and nrows the tile's lane g whose units hold the two rows (g, g + 8): the same values in the same
 * order, so the same sums bit for bit. R = 4: lanes g and g + 1, rows (g, g + 8, g + 1, g + 9). */
template <int G, int R, bool LUT, int NCC, bool TILED = false>
static __device__ __forceinline__ void md_rows(const uint8_t *blocks, const uint8_t *scales, size_t row0, int nrows,
                                               int K, const float *const xv[G], int ng, int lane, float acc[R][G]) {
    static_assert(!TILED || R == 2 || R == 4, "a tile lane's two rows, or two lanes' four");
    const int NC = NCC ? NCC : K / 32; /* NCC: K / 32 known at compile time (immediate x offsets) */
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < G; i++) acc[r][i] = 0.0f;
    for (int c0 = lane; c0 < NC; c0 += 32 * MD_U) {
        uint4 q[R][MD_U];
        uint32_t sc[R][MD_U];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int u = 0; u < MD_U; u++) {
                const int c = c0 + 32 * u;
                const bool ok = TILED ? c < NC : r < nrows && c < NC;
                const size_t b = TILED ? row0 + (size_t)(c >> 2) * 64 +
                                             gptoss_mxfp4_tiled_slot(4 * (nrows + (r >> 1)) + (c & 3), r & 1)
                                       : (row0 + r) * (size_t)NC + c;
                q[r][u] = ok ? __ldcs((const uint4 *)(blocks + b * 16)) : make_uint4(0u, 0u, 0u, 0u);
                sc[r][u] = ok ? __ldcs(scales + b) : 0u;
            }
#pragma unroll
        for (int u = 0; u < MD_U; u++) {
            const int c = c0 + 32 * u;
            if (c >= NC) break;
            float part[R][G];
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < G; i++) part[r][i] = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) { /* word k: values 8k .. 8k+3 (x float4 2k) and 8k+4 .. 8k+7 (2k+1) */
                float4 xa[G], xb[G];
#pragma unroll
                for (int i = 0; i < G; i++) {
                    if (G > 1 && i >= ng) break; /* G = 1: a group has a pair, so the loads need no predicate */
                    const float4 *x4 = (const float4 *)xv[i] + c;
                    xa[i] = x4[(size_t)(2 * k) * NC];
                    xb[i] = x4[(size_t)(2 * k + 1) * NC];
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const uint32_t w = k == 0 ? q[r][u].x : k == 1 ? q[r][u].y : k == 2 ? q[r][u].z : q[r][u].w;
                    /* v[n] = nibble n; the products go in the order 0, 4, 1, 5, 2, 6, 3, 7 either way */
                    float v[8];
                    if constexpr (LUT) {
                        float2 f[4];
                        mxfp4_lut8(w, f);
                        v[0] = f[0].x; v[1] = f[0].y; v[2] = f[1].x; v[3] = f[1].y;
                        v[4] = f[2].x; v[5] = f[2].y; v[6] = f[3].x; v[7] = f[3].y;
                    } else {
                        const float2 p0 = __half22float2(fp4_pair<0>(w)), p1 = __half22float2(fp4_pair<1>(w));
                        const float2 p2 = __half22float2(fp4_pair<2>(w)), p3 = __half22float2(fp4_pair<3>(w));
                        v[0] = p0.x; v[4] = p0.y; v[1] = p1.x; v[5] = p1.y;
                        v[2] = p2.x; v[6] = p2.y; v[3] = p3.x; v[7] = p3.y;
                    }
#pragma unroll
                    for (int i = 0; i < G; i++) {
                        if (G > 1 && i >= ng) break;
                        float t = part[r][i];
                        t = fmaf(xa[i].x, v[0], t); t = fmaf(xb[i].x, v[4], t);
                        t = fmaf(xa[i].y, v[1], t); t = fmaf(xb[i].y, v[5], t);
                        t = fmaf(xa[i].z, v[2], t); t = fmaf(xb[i].z, v[6], t);
                        t = fmaf(xa[i].w, v[3], t); t = fmaf(xb[i].w, v[7], t);
                        part[r][i] = t;
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float scale = LUT ? mxfp4_lut_scale((uint8_t)sc[r][u]) : fp4_scale((uint8_t)sc[r][u]);
#pragma unroll
                for (int i = 0; i < G; i++) acc[r][i] = fmaf(part[r][i], scale, acc[r][i]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < G; i++)
            for (int o = 16; o > 0; o >>= 1) acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], o);
}

/* ------------------------------------------------------------------ gate_up + SwiGLU */

/* Block (x, g): expert group g; warp tasks = pairs of activations (j, j+1) = gate_up rows 4j' .. 4j'+3,
 * strided over the blocks of the group. */
template <int G, int MD_R, bool LUT, int NCC>
__global__ void __launch_bounds__(MD_WARPS * 32, MD_MINB(G, MD_R)) moe_gate_up_decode_kernel(const float *h_sw, const int32_t *groups, int T,
                                                                          const uint8_t *blocks, const uint8_t *scales,
                                                                          const uint16_t *bias, int H, int I, float alpha,
                                                                          float limit, float *act_sw, int pdl) {
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): the groups come from the router just before */
    const int g = blockIdx.y, GM = T * GPTOSS_TOPK;
    if (g >= groups[0]) return;
    const int e = grp_e(groups)[g], ng = groups[1 + GM + g];
    const int32_t *pairs = groups + 1 + 2 * GM + 4 * g;
    const float *xv[G];
#pragma unroll
    for (int i = 0; i < G; i++) xv[i] = h_sw + (size_t)(pairs[i < ng ? i : 0] / GPTOSS_TOPK) * H;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int N = 2 * I, tasks = N / MD_R;
    for (int tk = blockIdx.x * MD_WARPS + warp; tk < tasks; tk += gridDim.x * MD_WARPS) {
        /* the task's biases (one 32-bit load per gate/up pair) go out with its weights, not after the sums */
        const uint32_t *b2 = (const uint32_t *)(bias + (size_t)e * N + (size_t)tk * MD_R);
        uint32_t bw[MD_R / 2];
#pragma unroll
        for (int h = 0; h < MD_R / 2; h++) bw[h] = lane < ng ? b2[h] : 0u;
        float acc[MD_R][G];
        md_rows<G, MD_R, LUT, NCC>(blocks, scales, (size_t)e * N + (size_t)tk * MD_R, MD_R, H, xv, ng, lane, acc);
        if (lane < ng) {
            float *out = act_sw + (size_t)pairs[lane] * I;
#pragma unroll
            for (int h = 0; h < MD_R / 2; h++) { /* rows 2h (gate), 2h+1 (up) -> activation 2tk + h */
                float gv = 0.0f, uv = 0.0f;
#pragma unroll
                for (int i = 0; i < G; i++)
                    if (i == lane) { gv = acc[2 * h][i]; uv = acc[2 * h + 1][i]; }
                out[gptoss_swz(tk * (MD_R / 2) + h, I)] = gptoss_swiglu_value(
                    gv + __uint_as_float(bw[h] << 16), uv + __uint_as_float(bw[h] & 0xffff0000u), alpha, limit);
            }
        }
    }
}

static int g_moe_rows = 2;
void gptoss_moe_decode_rows(int r) { g_moe_rows = r == 4 ? 4 : 2; }

static int g_moe_lut = 0; /* off until the fixed table decode passes the GPU gate (mxfp4_lut.h) */
void gptoss_moe_decode_lut(int on) { g_moe_lut = on != 0; }
/* One of the expert GEMVs' launchers LAUNCH(GG, RR, LUT, NCC) for the decode switched on: the table decode with K / 32
 * a compile-time constant for the gpt-oss shape (K = 2,880: 90 blocks a row), else with it at run time, or the
 * bit-operation decode. */
#define MD_PICK(LAUNCH, GG, RR, K)                                                                            \
    (!g_moe_lut ? LAUNCH(GG, RR, false, 0) : (K) == 2880 ? LAUNCH(GG, RR, true, 90) : LAUNCH(GG, RR, true, 0))
static int g_down_r4 = 1; /* LLMR_GPTOSS_DOWN_R4 (kernels.h) */
int gptoss_moe_down_r4(int on) { return g_down_r4 = on != 0; }

/* Multiprocessors of the current device, cached per device (132 when a query fails). A node process may hold
 * models on GPUs of different kinds: each launch sizes its grid by the device it runs on. The cache is atomic
 * because models on different devices launch from their own scheduler threads. */
#define SM_CACHE_DEVICES 64
int gptoss_sm_count(void) {
    static std::atomic<int> cache[SM_CACHE_DEVICES]; /* 0: not asked yet */
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 132;
    const bool cached = dev >= 0 && dev < SM_CACHE_DEVICES;
    if (cached && (n = cache[dev].load(std::memory_order_relaxed)) > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) return 132;
    if (cached) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

/* Upper bound of the number of groups: sum over touched experts of ceil(count / 4). */
static int max_groups(int T, int E) {
    const int P = T * GPTOSS_TOPK, touched = E < P ? E : P;
    const int b = P / MD_G + touched;
    return b < P ? b : P;
}

cudaError_t gptoss_moe_gate_up_decode(const float *h_sw, const int32_t *groups, int T, const uint8_t *blocks,
                                      const uint8_t *scales, const uint16_t *bias, int E, int H, int I, float alpha,
                                      float limit, float *act_sw, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (tiled) /* the experts' tiled copy: the tensor-core ring only (T = 1) */
        return T != 1 ? cudaErrorNotSupported
                      : gptoss_moe_gate_up_decode_dp4a(h_sw, groups, NULL, NULL, bias, H, I, alpha, limit, act_sw, s, tiled);
    if (T < 1 || T > GPTOSS_DECODE_MAX_T || H <= 0 || H % 32 || I <= 0 || I % 32 || E < GPTOSS_TOPK ||
        E > GPTOSS_MAX_EXPERTS || ((uintptr_t)h_sw & 15) || ((uintptr_t)blocks & 15))
        return cudaErrorInvalidValue;
    const int R = g_moe_rows, G = max_groups(T, E), tasks = 2 * I / R;
    if (T == 1) { /* the dp4a ring where it is on and applies (moe_decode_dp4a.cu) */
        const cudaError_t eq = gptoss_moe_gate_up_decode_dp4a(h_sw, groups, blocks, scales, bias, H, I, alpha, limit, act_sw, s);
        if (eq != cudaErrorNotSupported) return eq;
    }
    if (T == 1 && R == 2) { /* the cp.async variant where it is on and applies (moe_decode_async.cu) */
        const cudaError_t ea = gptoss_moe_gate_up_decode_async(h_sw, groups, blocks, scales, bias, H, I, alpha, limit, act_sw, s);
        if (ea != cudaErrorNotSupported) return ea;
    }
    /* T = 1: one wave of resident blocks in all (the register budget allows MD_MINB per SM; measured).
     * T > 1: one task per warp (a wave sized to SMs left ~40 tasks per warp at T = 8: 204 us for
     * gate_up, latency-bound; the grid size does not change any result). */
    const int need = (tasks + MD_WARPS - 1) / MD_WARPS;
    int gx = T == 1 ? (MD_MINB(1, R) * gptoss_sm_count() + G - 1) / G : need;
    if (gx > need) gx = need;
    if (gx < 1) gx = 1;
    const dim3 grid((unsigned)gx, (unsigned)G);
    const int pdl = T == 1 && gptoss_pdl_enabled();
    cudaError_t e;
#define GU_ONE(GG, RR, L, NCC)                                                                                      \
    gptoss_launch(moe_gate_up_decode_kernel<GG, RR, L, NCC>, grid, dim3(MD_WARPS * 32), 0, s, pdl, h_sw, groups, T, blocks, \
                  scales, bias, H, I, alpha, limit, act_sw, pdl)
    /* T == 1: one pair per group, a variant with a quarter of the accumulators */
    if (T == 1) e = R == 2 ? MD_PICK(GU_ONE, 1, 2, H) : MD_PICK(GU_ONE, 1, 4, H);
    else e = R == 2 ? MD_PICK(GU_ONE, MD_G, 2, H) : MD_PICK(GU_ONE, MD_G, 4, H);
#undef GU_ONE
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* ------------------------------------------------------------------ down + routing weights + residual */
#define DN_ROWS 8 /* rows per block: (DN_ROWS / MD_R) row tasks x groups share the block */

/* Block: rows n0 .. n0 + DN_ROWS - 1 of every group (expert); warp tasks = (row task, group). The
 * per-pair results go to shared memory; then each (token, row) output is x += sum over slots 0..3 in
 * order of w * y, one writer each.
 * TILED (blocks / scales the experts' tiled copy in down's row order; MD_R = 2): block b takes rows 16 (b / 2) + g and
 * 16 (b / 2) + g + 8 for g in 4 (b % 2) .. + 3 (the tile's lanes g, whose units hold those rows), a row task one g;
 * row slot rr = 2 (g % 4) + r is row 16 (b / 2) + g + 8 r. The same sums per row: the same bits. */
template <int G, int MD_R, bool LUT, int NCC, bool TILED = false, bool ROWS = false>
__global__ void __launch_bounds__(MD_WARPS * 32, DN_MINB(G, MD_R, TILED)) moe_down_decode_kernel(const float *act_sw, const int32_t *groups, int T,
                                                                       const float *wts, const uint8_t *blocks,
                                                                       const uint8_t *scales, const uint16_t *bias,
                                                                       int I, int H, float *x, int pdl) {
    static_assert(!TILED || ((MD_R == 2 || MD_R == 4) && DN_ROWS == 8),
                  "a block is half a tile, a row task one lane's row pair (or two lanes')");
    __shared__ float ys[GPTOSS_DECODE_MAX_T * GPTOSS_TOPK][DN_ROWS];
    if constexpr (ROWS) { /* row y of a rows launch (gptoss_moe_down_decode_rows1, T = 1): its own one-token problem
                           * (a template flag, so that the batch-1 launch's code stays as it was: these offsets behind
                           * a run-time test of blockIdx.y made the batch-1 step 0.3% slower, session 49 call 2) */
        const size_t r = blockIdx.y;
        act_sw += r * GPTOSS_TOPK * I;
        groups += r * gptoss_moe_groups_ints(1);
        wts += r * GPTOSS_TOPK;
        x += r * H;
    }
    const int GM = T * GPTOSS_TOPK;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * DN_ROWS;
    const int tile = blockIdx.x >> 1, g0 = 4 * (blockIdx.x & 1); /* TILED */
    auto row_of = [&](int rr) { return TILED ? 16 * tile + g0 + (rr >> 1) + 8 * (rr & 1) : n0 + rr; };
    if (pdl && !TILED) { /* PDL (pdl.h, rule 3): the router (two kernels back) has completed, so its groups are
                     * final; this block's rows of every group's expert go into L2 before the wait */
        const int NC = I / 32, nr = min(DN_ROWS, H - n0);
        const int ng0 = __ldcg(groups); /* L2 reads: no L1 line of an older launch can be seen */
        for (int g = 0; g < ng0; g++) {
            const size_t r0 = (size_t)__ldcg(grp_e(groups) + g) * H + n0;
            gptoss_prefetch_range(blocks + r0 * NC * 16, (size_t)nr * NC * 16, threadIdx.x, blockDim.x);
            gptoss_prefetch_range(scales + r0 * NC, (size_t)nr * NC, threadIdx.x, blockDim.x);
        }
    }
    gptoss_pdl_sync(pdl); /* the activations come from gate_up just before, x from earlier kernels */
    /* The epilogue's reads (this thread's residual element and its token's routing weights; T = 1: threads
     * 0..DN_ROWS-1) go out now, not after the barrier. */
    float x_pre = 0.0f, w_pre[GPTOSS_TOPK] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool pre = threadIdx.x < T * DN_ROWS && row_of((int)threadIdx.x % DN_ROWS) < H;
    if (pre) {
        const int t = threadIdx.x / DN_ROWS;
        x_pre = x[(size_t)t * H + row_of((int)threadIdx.x % DN_ROWS)];
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) w_pre[k] = wts[t * GPTOSS_TOPK + k];
    }
    const int ngroups = groups[0];
    const int tasks = (DN_ROWS / MD_R) * ngroups;
    for (int tk = warp; tk < tasks; tk += MD_WARPS) {
        const int rt = tk % (DN_ROWS / MD_R), g = tk / (DN_ROWS / MD_R);
        const int e = grp_e(groups)[g], ng = groups[1 + GM + g];
        const int32_t *pairs = groups + 1 + 2 * GM + 4 * g;
        const float *xv[G];
#pragma unroll
        for (int i = 0; i < G; i++) xv[i] = act_sw + (size_t)pairs[i < ng ? i : 0] * I;
        const int r0 = row_of(rt * MD_R); /* TILED: rows r0 and r0 + 8 */
        const int nrows = TILED ? (r0 < H ? MD_R : 0) : H - r0 < MD_R ? H - r0 : MD_R;
        if (nrows <= 0) continue;
        float acc[MD_R][G];
        if constexpr (TILED)
            md_rows<G, MD_R, LUT, NCC, true>(blocks, scales, gptoss_mxfp4_tiled_first(e, tile, H, I),
                                             g0 + rt * (MD_R / 2), I, xv, ng, lane, acc);
        else
            md_rows<G, MD_R, LUT, NCC>(blocks, scales, (size_t)e * H + r0, nrows, I, xv, ng, lane, acc);
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < G; i++) {
                if (i >= ng) break;
#pragma unroll
                for (int r = 0; r < MD_R; r++)
                    if (r < nrows)
                        ys[pairs[i]][rt * MD_R + r] =
                            acc[r][i] + gptoss_bf16_to_f32(bias[(size_t)e * H + row_of(rt * MD_R + r)]);
            }
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < T * DN_ROWS; idx += blockDim.x) {
        const int t = idx / DN_ROWS, rr = idx % DN_ROWS, n = row_of(rr);
        if (n >= H) continue;
        const bool mine = idx == (int)threadIdx.x; /* the element whose reads went out at the start */
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) sum += (mine ? w_pre[k] : wts[t * GPTOSS_TOPK + k]) * ys[t * GPTOSS_TOPK + k][rr];
        x[(size_t)t * H + n] = (mine ? x_pre : x[(size_t)t * H + n]) + sum;
    }
}

int gptoss_moe_decode_tiled_ok(int H, int I) { return gptoss_moe_gate_up_tiled_ok(H, I) && g_moe_rows == 2 && H % 16 == 0; }

/* gptoss_moe_down_decode, and with rows > 1 (T = 1) that many one-token problems on the grid's y (never on the cp.async
 * variant, whose results are the plain kernel's bit for bit). */
static cudaError_t down_launch(const float *act_sw, const int32_t *groups, int T, int rows, const float *w,
                               const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int E, int I, int H,
                               float *x, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (tiled) { /* the experts' tiled copy (down's row order): 2 rows a warp, whole tiles (not the cp.async kernel) */
        if (T < 1 || T > GPTOSS_DECODE_MAX_T || H <= 0 || H % 16 || I <= 0 || I % 32 || E < GPTOSS_TOPK ||
            E > GPTOSS_MAX_EXPERTS || ((uintptr_t)act_sw & 15))
            return cudaErrorInvalidValue;
        if (g_moe_rows != 2 || !tiled->blocks || !tiled->scales || ((uintptr_t)tiled->blocks & 15))
            return cudaErrorNotSupported;
        const int G = T == 1 ? 1 : MD_G, pdl = T == 1 && rows == 1 && gptoss_pdl_enabled();
        const dim3 grid((unsigned)(H / DN_ROWS), (unsigned)rows);
        cudaError_t e;
#define DN_TILED_(GG, R, L, NCC, RW)                                                                            \
    gptoss_launch(moe_down_decode_kernel<GG, R, L, NCC, true, RW>, grid, dim3(MD_WARPS * 32), 0, s, pdl, act_sw, groups, \
                  T, w, tiled->blocks, tiled->scales, bias, I, H, x, pdl)
#define DN_TILED(GG, R, L, NCC) DN_TILED_(GG, R, L, NCC, false)
#define DN_TILED_ROWS(GG, R, L, NCC) DN_TILED_(GG, R, L, NCC, true)
        if (rows > 1) e = g_down_r4 ? MD_PICK(DN_TILED_ROWS, 1, 4, I) : MD_PICK(DN_TILED_ROWS, 1, 2, I);
        else if (G == 1) /* the default: 4 rows a warp task, one task a warp (LLMR_GPTOSS_DOWN_R4=0: 2 rows) */
            e = g_down_r4 ? MD_PICK(DN_TILED, 1, 4, I) : MD_PICK(DN_TILED, 1, 2, I);
        else
            e = MD_PICK(DN_TILED, MD_G, 2, I);
#undef DN_TILED_ROWS
#undef DN_TILED
#undef DN_TILED_
        return e != cudaSuccess ? e : cudaGetLastError();
    }
    if (T < 1 || T > GPTOSS_DECODE_MAX_T || H <= 0 || H % 32 || I <= 0 || I % 32 || E < GPTOSS_TOPK ||
        E > GPTOSS_MAX_EXPERTS || ((uintptr_t)act_sw & 15) || ((uintptr_t)blocks & 15))
        return cudaErrorInvalidValue;
    if (T == 1 && rows == 1 && g_moe_rows == 2) { /* the cp.async variant where it is on and applies (the same bits) */
        const cudaError_t ea = gptoss_moe_down_decode_async(act_sw, groups, w, blocks, scales, bias, I, H, x, s);
        if (ea != cudaErrorNotSupported) return ea;
    }
    const dim3 grid((unsigned)((H + DN_ROWS - 1) / DN_ROWS), (unsigned)rows);
    /* the prefetch before the wait relies on gate_up being launched with PDL too (pdl.h, rule 3) */
    const int pdl = T == 1 && rows == 1 && gptoss_pdl_enabled();
    cudaError_t e;
#define DN_ONE_(GG, RR, L, NCC, RW)                                                                                 \
    gptoss_launch(moe_down_decode_kernel<GG, RR, L, NCC, false, RW>, grid, dim3(MD_WARPS * 32), 0, s, pdl, act_sw, groups, \
                  T, w, blocks, scales, bias, I, H, x, pdl)
#define DN_ONE(GG, RR, L, NCC) DN_ONE_(GG, RR, L, NCC, false)
#define DN_ONE_ROWS(GG, RR, L, NCC) DN_ONE_(GG, RR, L, NCC, true)
    if (rows > 1) e = g_moe_rows == 2 ? MD_PICK(DN_ONE_ROWS, 1, 2, I) : MD_PICK(DN_ONE_ROWS, 1, 4, I);
    else if (T == 1) e = g_moe_rows == 2 ? MD_PICK(DN_ONE, 1, 2, I) : MD_PICK(DN_ONE, 1, 4, I);
    else e = g_moe_rows == 2 ? MD_PICK(DN_ONE, MD_G, 2, I) : MD_PICK(DN_ONE, MD_G, 4, I);
#undef DN_ONE_ROWS
#undef DN_ONE
#undef DN_ONE_
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_moe_down_decode(const float *act_sw, const int32_t *groups, int T, const float *w,
                                   const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int E, int I,
                                   int H, float *x, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    return down_launch(act_sw, groups, T, 1, w, blocks, scales, bias, E, I, H, x, s, tiled);
}

cudaError_t gptoss_moe_down_decode_rows1(const float *act_sw, const int32_t *groups1, int n, const float *w,
                                         const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int E, int I,
                                         int H, float *x, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (n < 1 || n > GPTOSS_DECODE_MAX_T) return cudaErrorInvalidValue;
    return down_launch(act_sw, groups1, 1, n, w, blocks, scales, bias, E, I, H, x, s, tiled);
}
