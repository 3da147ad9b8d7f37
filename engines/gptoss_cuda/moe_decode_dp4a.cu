/* moe_decode_dp4a.cu — the T = 1 MXFP4 gate_up GEMV of the decode MoE block on integer dot products, its
 * weights streamed through a ring of shared-memory stages (LLMR_GPTOSS_MOE_DP4A; see kernels.h and
 * docs/performance.md, issue 10 step 18).
 *
 * Why: the fp32 kernel (moe_decode.cu) spends ~6.2 instructions per weight and lane (ncu, session 15: FFMA,
 * the table decode's PRMT and fp16 -> fp32 conversions, addressing), and each of its warps alternates
 * between waiting for its task's weights and computing them. Here
 *  - each 32-bit word of weights becomes 8 signed bytes 2 * e2m1 (mxfp4_i8x8: 11 instructions per 8) and
 *    one dp4a multiplies 4 of them by 4 bytes of the activation into an int32 (~3.7 instructions per
 *    weight in the SASS of the whole loop, session 17 call 5);
 *  - one producer thread per CTA keeps MR_DEPTH stages of 16 expert rows (one bulk copy of their
 *    contiguous packed blocks, one of their scale bytes) in flight through the mbarrier ring of
 *    tma_ring.cuh while MR_CONS consumer warps compute the earlier stages from shared memory, one gate/up
 *    row pair each (the copies alone stream the 20b's gate_up at 4.0-4.2 TB/s: 8.3-8.8 µs; the arithmetic
 *    alone takes ~17.5 µs, which is what the kernel takes: gptoss_moe_ring_diag times each alone).
 *
 * Numerics: the consumers first split the swizzled fp32 activation vector, per 32-value chunk c (one MXFP4
 * block's worth), into three byte parts with a shared power of two: with m = max |x| of the chunk = f 2^E
 * (f in [0.5, 1)), y = x 2^(7 - E) lies in (-128, 128); q0 = floor(y) (signed), q1 = floor(256 (y - q0)),
 * q2 = round(256 (256 (y - q0) - q1)) (unsigned; q1 and q2 capped at 255), so x = 2^(E - 23) (65536 q0 +
 * 256 q1 + q2) to within 2^-16 in y, i.e. ~2^-23 of the chunk's largest value (about one fp32 rounding). For
 * one row and chunk, S_p = sum of W q_p (W = 2 e2m1, |W| <= 12) is exact in int32, (256 S0 + S1) is below
 * 2^24 (exact in fp32), F = 256 (256 S0 + S1) + S2 takes one fp32 rounding, and the row's sum is the fp32
 * chain over its chunks of F 2^(E - 23) 2^(s - 128) (s: the block's E8M0 scale; both factors exact), then
 * the warp's xor-shuffle reduction, as in moe_decode.cu. So the result equals the fp32 kernel's to fp32
 * rounding, not bit for bit (kernel check: 3.7e-7 of the block's contribution from the CPU's double sums,
 * the fp32 kernels 2.9e-7; the split itself is checked without a GPU by gptoss_kernels --host-checks). A chunk whose
 * largest value is below 2^-100 counts as zero; a non-finite one gives NaN rows.
 *
 * Limits (else the launcher returns cudaErrorNotSupported and moe_decode.cu's kernels run): T = 1; K % 32
 * == 0 with the ring and the split vector within MR_SMEM_MAX (K <= 3,648); 2I % 16 == 0; blocks and
 * scales 16-byte aligned. */
#include "engines/gptoss_cuda/kernels.h"

#include "engines/gptoss_cuda/moe_route.cuh"
#include "engines/gptoss_cuda/mxfp4_lut.h"
#include "engines/gptoss_cuda/pdl.h"
#include "engines/gptoss_cuda/tma_ring.cuh"

#define MQ_R 2 /* rows per consumer warp and stage: a gate/up pair */
#define MQ_U 3 /* chunks per row in flight per lane, as MD_U */

/* Shared memory of the split vector: the activation's parts xq[p][h][c] (uint4: bytes of values 16h .. 16h + 15 of
 * chunk c, part p), then the chunk factors xs[c] = 2^(E - 23) (NaN for a non-finite chunk). */
static __host__ __device__ __forceinline__ size_t mq_smem_x(int NC) { return ((size_t)NC * (6 * 16 + 4) + 15) & ~(size_t)15; }

/* Splits one value y (|y| < 128) into its three byte parts: p0 signed, p1 and p2 unsigned (see the top). y - q0 can
 * round up to 1 for a tiny negative y (e.g. a SwiGLU output of -1e-9 in a chunk whose largest value is ~1), so q1 is
 * capped at 255 as q2 is: the cap costs at most one unit of q2. */
static __host__ __device__ __forceinline__ void mq_split1(float y, uint32_t &p0, uint32_t &p1, uint32_t &p2, int j) {
    const float f0 = floorf(y), r1 = (y - f0) * 256.0f, f1 = fminf(floorf(r1), 255.0f);
    const float f2 = fminf(rintf((r1 - f1) * 256.0f), 255.0f);
    p0 |= ((uint32_t)(int)f0 & 0xFFu) << (8 * j);
    p1 |= (uint32_t)f1 << (8 * j);
    p2 |= (uint32_t)f2 << (8 * j);
}

/* A chunk's scaling from its largest magnitude m: *up = 2^(7 - E) with m = f 2^E, f in [0.5, 1), so y = x up is exact
 * and lies in (-128, 128); returns 2^(E - 23), the weight of one unit of q2. A chunk whose m is below 2^-100 counts as
 * zero (*up = 0); a non-finite m (NaN or inf) gives NaN, so the rows that use the chunk come out NaN. Host and device
 * (the host kernel checks run it without a GPU). */
static __host__ __device__ __forceinline__ float mq_chunk_scale(float m, float *up) {
    if (!(m <= 3.4e38f)) {
        *up = 0.0f;
        return nanf("");
    }
    if (!(m >= 7.9e-31f)) {
        *up = 0.0f;
        return 0.0f;
    }
    int E = 0;
    (void)frexpf(m, &E);
    *up = ldexpf(1.0f, 7 - E);
    return ldexpf(1.0f, E - 23);
}

#define MQ_SPLIT_ITEMS 4 /* float4s a thread loads before it splits them */

/* Splits the swizzled K-vector x_sw (NC = K / 32 chunks; float4 f of chunk c at (f NC + c) 4) into xq / xs, by
 * threads tid = 0 .. nthreads - 1 (a multiple of 32); the caller syncs them afterwards. Item i = 8c + f, so the 8
 * float4s of a chunk sit in 8 neighbouring lanes of one warp, which take its max with 3 shuffles; a thread issues
 * the loads of up to MQ_SPLIT_ITEMS items before it uses any (one L2 round trip, not one per item). */
template <bool PLAIN = false>
static __device__ __forceinline__ void mq_split_x(const float *x_sw, int NC, uint4 *xq, float *xs, int tid, int nthreads,
                                                  const uint16_t *nw = nullptr, float rn = 0.0f) {
    uint32_t *q = (uint32_t *)xq;
    for (int i0 = 0; i0 < NC * 8; i0 += nthreads * MQ_SPLIT_ITEMS) { /* uniform trip count: whole warps shuffle */
        float4 v[MQ_SPLIT_ITEMS];
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid;
            if constexpr (PLAIN) { /* x in its plain layout (float4 8c + f), normed here: (x r) nw as the router finish */
                if (i < NC * 8) {
                    const float4 a = ((const float4 *)x_sw)[i];
                    const uint16_t *n4 = nw + (size_t)i * 4;
                    v[j] = make_float4((a.x * rn) * gptoss_bf16_to_f32(n4[0]), (a.y * rn) * gptoss_bf16_to_f32(n4[1]),
                                       (a.z * rn) * gptoss_bf16_to_f32(n4[2]), (a.w * rn) * gptoss_bf16_to_f32(n4[3]));
                } else {
                    v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                }
            } else {
                v[j] = i < NC * 8 ? ((const float4 *)x_sw)[(size_t)(i & 7) * NC + (i >> 3)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid, c = i >> 3, f = i & 7;
            if (i0 + j * nthreads >= NC * 8) break; /* warp-uniform: nthreads % 32 == 0 and NC * 8 % 8 == 0 */
            float m = fmaxf(fmaxf(fabsf(v[j].x), fabsf(v[j].y)), fmaxf(fabsf(v[j].z), fabsf(v[j].w)));
            if (!(m <= 3.4e38f)) m = __int_as_float(0x7f800000); /* NaN or inf (fmaxf drops NaN): non-finite */
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            float up;
            const float unit = mq_chunk_scale(m, &up);
            uint32_t p0 = 0, p1 = 0, p2 = 0;
            mq_split1(v[j].x * up, p0, p1, p2, 0);
            mq_split1(v[j].y * up, p0, p1, p2, 1);
            mq_split1(v[j].z * up, p0, p1, p2, 2);
            mq_split1(v[j].w * up, p0, p1, p2, 3);
            if (i < NC * 8) {
                const int h = f >> 2, comp = f & 3;
                q[((0 * 2 + h) * NC + c) * 4 + comp] = p0;
                q[((1 * 2 + h) * NC + c) * 4 + comp] = p1;
                q[((2 * 2 + h) * NC + c) * 4 + comp] = p2;
                if (f == 0) xs[c] = unit;
            }
        }
    }
}

static __device__ __forceinline__ int mq_dp4a_su(uint32_t a, uint32_t b, int c) { /* signed a, unsigned b */
    int d;
    asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* 2^(s - 128): the E8M0 block scale of weights read as 2 * e2m1 (s = 0, 1: the subnormals; no branch). */
static __device__ __forceinline__ float mq_wscale(uint32_t s) {
    return __int_as_float(s >= 2 ? (int)(s - 1) << 23 : 0x00200000 << s);
}

/* Chunk c of MQ_R rows (their words q[r] and scale bytes sc[r]) dotted with the split vector: acc[r] += the chunk's
 * sum F (one fp32 rounding) times xsc (the chunk's 2^(E - 23), exact; 0 for a lane past the last chunk, whose c
 * the caller clamps to a real one) times 2^(s - 128) (exact), in one fma. */
static __device__ __forceinline__ void mq_chunk(const uint4 q[MQ_R], const uint32_t sc[MQ_R], const uint4 *xq, int NC,
                                                int c, float xsc, float acc[MQ_R]) {
    int s0[MQ_R], s1[MQ_R], s2[MQ_R];
#pragma unroll
    for (int r = 0; r < MQ_R; r++) s0[r] = s1[r] = s2[r] = 0;
#pragma unroll
    for (int h = 0; h < 2; h++) { /* values 16h .. 16h + 15: words 2h, 2h + 1 */
        const uint4 x0 = xq[(0 * 2 + h) * NC + c], x1 = xq[(1 * 2 + h) * NC + c], x2 = xq[(2 * 2 + h) * NC + c];
#pragma unroll
        for (int r = 0; r < MQ_R; r++) {
            uint32_t a[2], b[2];
            mxfp4_i8x8(h ? q[r].z : q[r].x, a);
            mxfp4_i8x8(h ? q[r].w : q[r].y, b);
            s0[r] = __dp4a((int)a[0], (int)x0.x, s0[r]);
            s0[r] = __dp4a((int)a[1], (int)x0.y, s0[r]);
            s0[r] = __dp4a((int)b[0], (int)x0.z, s0[r]);
            s0[r] = __dp4a((int)b[1], (int)x0.w, s0[r]);
            s1[r] = mq_dp4a_su(a[0], x1.x, s1[r]);
            s1[r] = mq_dp4a_su(a[1], x1.y, s1[r]);
            s1[r] = mq_dp4a_su(b[0], x1.z, s1[r]);
            s1[r] = mq_dp4a_su(b[1], x1.w, s1[r]);
            s2[r] = mq_dp4a_su(a[0], x2.x, s2[r]);
            s2[r] = mq_dp4a_su(a[1], x2.y, s2[r]);
            s2[r] = mq_dp4a_su(b[0], x2.z, s2[r]);
            s2[r] = mq_dp4a_su(b[1], x2.w, s2[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < MQ_R; r++) {
        const float F = fmaf((float)(s0[r] * 256 + s1[r]), 256.0f, (float)s2[r]);
        acc[r] = fmaf(F * xsc, mq_wscale(sc[r] & 0xFFu), acc[r]);
    }
}

/* The lanes' partial sums acc[r] reduced over the warp (xor shuffles: every lane ends with the sum). */
static __device__ __forceinline__ void mq_warp_sum(float acc[MQ_R]) {
#pragma unroll
    for (int r = 0; r < MQ_R; r++)
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}


/* ------------------------------------------------------------------ gate_up through the ring
 *
 * Persistent CTAs (MR_CTAS per SM) take tiles t = blockIdx.x + k gridDim.x; tile t is rows 16 (t % TPG) ..
 * + 15 of group t / TPG's expert. The producer starts before the consumers have split the activation vector,
 * so the first stages land while they do. */

#define MR_CONS 8   /* consumer warps (one row pair each per stage) */
#define MR_ROWS 16  /* rows per stage */
#define MR_DEPTH 2  /* stages in flight per CTA (4 stages x 2 CTAs per SM: the same back to back, ~1% slower end
                     * to end; session 17 calls 7-8) */
#define MR_CTAS 3   /* CTAs per SM: 27 warps of ~71 registers, 3 x 57 KB of shared memory */
#define MR_SMEM_MAX (72 * 1024)

static __host__ __device__ __forceinline__ size_t mr_stage_bytes(int NC) { return (size_t)MR_ROWS * NC * 17; }
static __host__ __device__ __forceinline__ size_t mr_smem(int NC) {
    return 128 + MR_DEPTH * mr_stage_bytes(NC) + mq_smem_x(NC);
}

/* Producer: expect the stage's bytes once, then its two copies (blocks, then scales), both completing on full. */
static __device__ __forceinline__ void mr_fill2(uint64_t *full, uint8_t *slot, const uint8_t *b, uint32_t nb,
                                                const uint8_t *sc, uint32_t ns) {
    ring_expect(full, nb + ns);
    ring_copy(full, slot, b, nb);
    ring_copy(full, slot + nb, sc, ns);
}

/* The routed form's inputs and outputs (ROUTE): the residual x (plain layout) and the MLP norm, the router split's
 * partial rows (gptoss_gemv1_router) and the router bias; CTA 0 writes the token's ids, weights, group table and logits
 * as gptoss_moe_router_finish would. */
struct mr_route {
    const float *x;
    const uint16_t *norm_w, *rb;
    const float *rpart;
    float eps;
    int nparts;
    int32_t *ids, *groups;
    float *w, *rl;
};
#define MR_PBATCH 16 /* partial rows of a virtual warp loaded at once in the routed prologue (the finish's RT_PROWS) */

template <bool ROUTE>
__global__ void __launch_bounds__((MR_CONS + 1) * 32, MR_CTAS) moe_gate_up_ring_kernel(const float *h_sw, const int32_t *groups,
                                                                                 const uint8_t *blocks, const uint8_t *scales,
                                                                                 const uint16_t *bias, int H, int I,
                                                                                 float alpha, float limit, float *act_sw,
                                                                                 int pdl, int diag, mr_route rt) {
    extern __shared__ __align__(128) uint8_t mr_smem_buf[];
    uint64_t *full = (uint64_t *)mr_smem_buf, *empty = full + MR_DEPTH;
    const int NC = H / 32, N = 2 * I, TPG = N / MR_ROWS, GM = GPTOSS_TOPK;
    const size_t SB = mr_stage_bytes(NC);
    uint8_t *ring = mr_smem_buf + 128;
    uint4 *xq = (uint4 *)(ring + MR_DEPTH * SB);
    float *xs = (float *)((uint8_t *)xq + (size_t)NC * 6 * 16);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) ring_init(full, empty, MR_DEPTH, MR_CONS);
    __syncthreads();
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): h_sw and the groups come from the router just before */
    /* (the group table and each tile's biases read from global memory as the tile starts: keeping the table in
     * shared memory and the biases a tile ahead measured ~1 µs slower, session 17 calls 8-9) */
    const int32_t *grp = groups;
    float rn = 0.0f;
    if constexpr (ROUTE) { /* the router finish in every CTA: its partial rows, r, the logits, the top-4 */
        /* The sums in gptoss_moe_router_finish's order exactly, so this path is bit for bit the finish + ring one:
         * the finish's warp vw (of 32) adds rows vw, vw + 32, ... in order into its column sums and, on lane 0, its
         * sum of squares; warp 0 then adds the 32 warps' sums in order. Here warps 0..7 form the column sums of
         * virtual warps warp + 8i (i < 4, two at a time), and warp 8 the 32 sums of squares, lane vw that of virtual
         * warp vw; then warp 0 adds them as the finish does. */
        __shared__ float red[32][33], s_lg[32], s_w[GPTOSS_TOPK], s_r;
        __shared__ int32_t s_grp[gptoss_moe_groups_ints(1)], s_ids[GPTOSS_TOPK];
        static_assert(MR_CONS == 8, "the routed prologue gives 4 virtual warps to each of 8 warps");
        if (warp < MR_CONS) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float pv[2][MR_PBATCH];
#pragma unroll
                for (int a = 0; a < 2; a++)
#pragma unroll
                    for (int k = 0; k < MR_PBATCH; k++) {
                        const int j = warp + 8 * (2 * h + a) + 32 * k;
                        pv[a][k] = j < rt.nparts ? rt.rpart[(size_t)j * 33 + lane] : 0.0f;
                    }
#pragma unroll
                for (int a = 0; a < 2; a++) {
                    const int vw = warp + 8 * (2 * h + a);
                    float p = 0.0f;
#pragma unroll
                    for (int k = 0; k < MR_PBATCH; k++) {
                        if (vw + 32 * k >= rt.nparts) break;
                        p += pv[a][k];
                    }
                    for (int j = vw + 32 * MR_PBATCH; j < rt.nparts; j += 32) p += rt.rpart[(size_t)j * 33 + lane];
                    red[vw][lane] = p;
                }
            }
        } else {
            float qv[MR_PBATCH];
#pragma unroll
            for (int k = 0; k < MR_PBATCH; k++) {
                const int j = lane + 32 * k;
                qv[k] = j < rt.nparts ? rt.rpart[(size_t)j * 33 + 32] : 0.0f;
            }
            float q = 0.0f;
#pragma unroll
            for (int k = 0; k < MR_PBATCH; k++) {
                if (lane + 32 * k >= rt.nparts) break;
                q += qv[k];
            }
            for (int j = lane + 32 * MR_PBATCH; j < rt.nparts; j += 32) q += rt.rpart[(size_t)j * 33 + 32];
            red[lane][32] = q;
        }
        if (threadIdx.x < gptoss_moe_groups_ints(1)) s_grp[threadIdx.x] = 0; /* entries the top-4 leaves alone */
        __syncthreads();
        if (warp == 0) {
            float v = 0.0f, sq = 0.0f;
#pragma unroll
            for (int w = 0; w < 32; w++) {
                v += red[w][lane];
                sq += red[w][32];
            }
            const float r = rsqrtf(sq / (float)H + rt.eps), lv = r * v + gptoss_bf16_to_f32(rt.rb[lane]);
            s_lg[lane] = lv;
            if (blockIdx.x == 0 && rt.rl) rt.rl[lane] = lv;
            __syncwarp();
            router_top4(s_lg, 32, lane, 0, s_ids, s_w, true, s_grp);
            if (lane == 0) s_r = r;
        }
        __syncthreads();
        if (blockIdx.x == 0 && threadIdx.x < gptoss_moe_groups_ints(1)) { /* for down and the host, as the finish writes them */
            rt.groups[threadIdx.x] = s_grp[threadIdx.x];
            if (threadIdx.x < GPTOSS_TOPK) {
                rt.ids[threadIdx.x] = s_ids[threadIdx.x];
                rt.w[threadIdx.x] = s_w[threadIdx.x];
            }
        }
        grp = s_grp;
        rn = s_r;
    }
    const int total = grp[0] * TPG;
    if (warp == MR_CONS) { /* producer */
        if (lane == 0) {
            int k = 0;
            for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
                const int slot = k % MR_DEPTH, use = k / MR_DEPTH;
                if (diag == 2 && use > 0) break; /* timing diagnostic: the first stages only, then compute alone */
                if (use > 0) ring_wait(&empty[slot], (uint32_t)(use - 1) & 1u);
                const size_t row0 = (size_t)grp[1 + t / TPG] * N + (size_t)(t % TPG) * MR_ROWS;
                mr_fill2(&full[slot], ring + slot * SB, blocks + row0 * NC * 16, (uint32_t)(MR_ROWS * NC * 16),
                         scales + row0 * NC, (uint32_t)(MR_ROWS * NC));
            }
        }
        return;
    }
    /* consumers: the token's activation vector split once (T = 1: every group's pair is token 0) */
    if constexpr (ROUTE) mq_split_x<true>(rt.x, NC, xq, xs, threadIdx.x, MR_CONS * 32, rt.norm_w, rn);
    else mq_split_x(h_sw, NC, xq, xs, threadIdx.x, MR_CONS * 32);
    asm volatile("bar.sync 1, %0;" ::"n"(MR_CONS * 32) : "memory");
    int k = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
        const int slot = k % MR_DEPTH, g = t / TPG, tk = (t % TPG) * (MR_ROWS / 2) + warp; /* this warp's row pair */
        const int e = grp[1 + g], pair = grp[1 + 2 * GM + 4 * g];
        const uint32_t bw = lane == 0 ? *(const uint32_t *)(bias + (size_t)e * N + (size_t)tk * 2) : 0u;
        if (diag != 2 || k < MR_DEPTH) ring_wait(&full[slot], (uint32_t)(k / MR_DEPTH) & 1u);
        const uint8_t *st = ring + slot * SB, *ss = st + (size_t)MR_ROWS * NC * 16;
        float acc[MQ_R] = {0.0f, 0.0f};
        for (int c0 = lane; c0 < (diag == 1 ? 0 : NC); c0 += 32 * MQ_U) { /* diag 1: the copies alone */
            /* no branch and no predicated load: a lane past the last chunk reads the last one and adds 0 */
            uint4 q[MQ_U][MQ_R];
            uint32_t sc[MQ_U][MQ_R];
#pragma unroll
            for (int u = 0; u < MQ_U; u++)
#pragma unroll
                for (int r = 0; r < MQ_R; r++) {
                    const int c = min(c0 + 32 * u, NC - 1), row = 2 * warp + r;
                    q[u][r] = *(const uint4 *)(st + ((size_t)row * NC + c) * 16);
                    sc[u][r] = ss[(size_t)row * NC + c];
                }
#pragma unroll
            for (int u = 0; u < MQ_U; u++) {
                const int c = c0 + 32 * u, cc = min(c, NC - 1);
                mq_chunk(q[u], sc[u], xq, NC, cc, c < NC ? xs[cc] : 0.0f, acc);
            }
        }
        __syncwarp();
        if (lane == 0) ring_release(&empty[slot]); /* this warp is done with the stage */
        mq_warp_sum(acc);
        if (lane == 0)
            act_sw[(size_t)pair * I + gptoss_swz(tk, I)] = gptoss_swiglu_value(
                acc[0] + __uint_as_float(bw << 16), acc[1] + __uint_as_float(bw & 0xffff0000u), alpha, limit);
    }
}

static int g_dp4a = 0, g_ring_diag = 0;

void gptoss_moe_ring_diag(int d) { g_ring_diag = d == 1 || d == 2 ? d : 0; }

int gptoss_moe_decode_dp4a(int on) {
    g_dp4a = 0;
    if (!on) return 0;
    /* more than the default 48 KiB of dynamic shared memory needs the opt-in, set here (outside any capture) */
    if (cudaFuncSetAttribute(moe_gate_up_ring_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX) != cudaSuccess ||
        cudaFuncSetAttribute(moe_gate_up_ring_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    g_dp4a = 1;
    return 1;
}

cudaError_t gptoss_moe_gate_up_decode_dp4a(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                           const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                           float limit, float *act_sw, cudaStream_t s) {
    if (!g_dp4a || H <= 0 || H % 32 || H > GPTOSS_DECODE_MAX_K || mr_smem(H / 32) > MR_SMEM_MAX || I <= 0 ||
        (2 * I) % MR_ROWS || ((uintptr_t)blocks & 15) || ((uintptr_t)scales & 15))
        return cudaErrorNotSupported;
    const int pdl = gptoss_pdl_enabled();
    const mr_route none = {};
    const cudaError_t e = gptoss_launch(moe_gate_up_ring_kernel<false>, dim3((unsigned)(MR_CTAS * gptoss_sm_count())),
                                        dim3((MR_CONS + 1) * 32), mr_smem(H / 32), s, pdl, h_sw, groups, blocks, scales,
                                        bias, H, I, alpha, limit, act_sw, pdl, g_ring_diag, none);
    return e != cudaSuccess ? e : cudaGetLastError();
}

int gptoss_moe_route_gate_up_dp4a_ok(int H, int I, int E, const uint8_t *blocks, const uint8_t *scales) {
    return g_dp4a && E == 32 && H > 0 && H % 32 == 0 && H <= GPTOSS_DECODE_MAX_K && mr_smem(H / 32) <= MR_SMEM_MAX &&
           I > 0 && (2 * I) % MR_ROWS == 0 && !((uintptr_t)blocks & 15) && !((uintptr_t)scales & 15);
}

cudaError_t gptoss_moe_route_gate_up_dp4a(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                          const uint16_t *router_b, int E, const uint8_t *blocks, const uint8_t *scales,
                                          const uint16_t *bias, int H, int I, float alpha, float limit, int32_t *ids,
                                          float *w, int32_t *groups, float *router_logits, float *act_sw, cudaStream_t s) {
    if (!gptoss_moe_route_gate_up_dp4a_ok(H, I, E, blocks, scales) || nparts < 1 || ((uintptr_t)x & 15))
        return cudaErrorNotSupported;
    mr_route rt;
    rt.x = x;
    rt.norm_w = norm_w;
    rt.rb = router_b;
    rt.rpart = rpart;
    rt.eps = eps;
    rt.nparts = nparts;
    rt.ids = ids;
    rt.groups = groups;
    rt.w = w;
    rt.rl = router_logits;
    const int pdl = gptoss_pdl_enabled();
    const cudaError_t e = gptoss_launch(moe_gate_up_ring_kernel<true>, dim3((unsigned)(MR_CTAS * gptoss_sm_count())),
                                        dim3((MR_CONS + 1) * 32), mr_smem(H / 32), s, pdl, (const float *)nullptr,
                                        (const int32_t *)nullptr, blocks, scales, bias, H, I, alpha, limit, act_sw, pdl,
                                        g_ring_diag, rt);
    return e != cudaSuccess ? e : cudaGetLastError();
}
