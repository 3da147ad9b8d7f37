/* moe_decode_dp4a.cu — the T = 1 MXFP4 expert GEMVs of the decode MoE block on integer dot products
 * (LLMR_GPTOSS_MOE_DP4A=1; see kernels.h).
 *
 * Why: the fp32 kernels (moe_decode.cu) spend ~6.2 instructions per weight and lane (ncu, session 15:
 * FFMA 1.1, the table decode's PRMT 1.1 and fp16 -> fp32 HADD2 1.1, the rest addressing), and at T = 1
 * their time follows the SM clock, not HBM: the issue of that arithmetic is what they wait for. Here
 * each 32-bit word of weights becomes 8 signed bytes 2 * e2m1 (mxfp4_i8x8: 11 instructions per 8) and
 * one dp4a multiplies 4 of them by 4 bytes of the activation and adds them to an int32: ~2.4
 * instructions per weight in all.
 *
 * Numerics: each block's prologue splits the swizzled fp32 activation vector, per 32-value chunk c (one
 * MXFP4 block's worth), into three byte parts with a shared power of two: with m = max |x| of the chunk
 * = f 2^E (f in [0.5, 1)), y = x 2^(7 - E) lies in (-128, 128); q0 = floor(y) (signed), q1 = floor(256
 * (y - q0)), q2 = round(256 (256 (y - q0) - q1)) (unsigned, at most 255), so x = 2^(E - 23) (65536 q0 +
 * 256 q1 + q2) to within 2^-17 in y, i.e. 2^-23 of the chunk's largest value (about one fp32 rounding).
 * For one row and chunk, S_p = sum of W q_p (W = 2 e2m1, |W| <= 12) is exact in int32, (256 S0 + S1) is
 * below 2^24 (exact in fp32), F = 256 (256 S0 + S1) + S2 takes one fp32 rounding, and the row's sum is
 * the fp32 chain over its chunks of F * 2^(s + E - 151) (s: the block's E8M0 scale), then the warp's
 * xor-shuffle reduction, as in moe_decode.cu. So the result equals the fp32 kernels' to fp32 rounding,
 * not bit for bit (kernel check). A chunk whose largest value is below 2^-100 counts as zero; a non-finite
 * one gives a NaN row.
 *
 * Limits (else the launchers return cudaErrorNotSupported and the other kernels run): T = 1; K % 32 == 0,
 * K <= GPTOSS_DECODE_MAX_K; blocks 16-byte aligned. */
#include "engines/gptoss_cuda/kernels.h"

#include "engines/gptoss_cuda/mxfp4_lut.h"
#include "engines/gptoss_cuda/pdl.h"

#define MQ_WARPS 8
#define MQ_R 2       /* rows per warp task (gate/up pair; two output rows of down) */
#define MQ_U 3       /* chunks per row in flight per lane, as MD_U */
#define MQ_DN_ROWS 8 /* output rows per down block */
#define MQ_MINB 4    /* resident blocks per SM the register budget is set for (64 registers) */

/* Shared memory of a block: the activation's parts xq[p][h][c] (uint4: bytes of values 16h .. 16h + 15 of
 * chunk c, part p), then the chunk factors xs[c] = 2^(E - 23) (NaN for a non-finite chunk). */
static __host__ __device__ __forceinline__ size_t mq_smem_x(int NC) { return ((size_t)NC * (6 * 16 + 4) + 15) & ~(size_t)15; }

/* Splits one value y (|y| < 128) into its three byte parts: p0 signed, p1 and p2 unsigned (see the top). y - q0 can
 * round up to 1 for a tiny negative y (e.g. a SwiGLU output of -1e-9 in a chunk whose largest value is ~1), so q1 is
 * capped at 255 as q2 is: the cap costs at most one unit of q2. */
static __device__ __forceinline__ void mq_split1(float y, uint32_t &p0, uint32_t &p1, uint32_t &p2, int j) {
    const float f0 = floorf(y), r1 = (y - f0) * 256.0f, f1 = fminf(floorf(r1), 255.0f);
    const float f2 = fminf(rintf((r1 - f1) * 256.0f), 255.0f);
    p0 |= ((uint32_t)(int)f0 & 0xFFu) << (8 * j);
    p1 |= (uint32_t)f1 << (8 * j);
    p2 |= (uint32_t)f2 << (8 * j);
}

#define MQ_SPLIT_ITEMS 4 /* float4s a thread loads before it splits them */

/* Splits the swizzled K-vector x_sw (NC = K / 32 chunks; float4 f of chunk c at (f NC + c) 4) into xq / xs, by
 * threads tid = 0 .. nthreads - 1 (a multiple of 32); the caller syncs them afterwards. Item i = 8c + f, so the 8
 * float4s of a chunk sit in 8 neighbouring lanes of one warp, which take its max with 3 shuffles; a thread issues
 * the loads of up to MQ_SPLIT_ITEMS items before it uses any (one L2 round trip, not one per item). */
static __device__ __forceinline__ void mq_split_x(const float *x_sw, int NC, uint4 *xq, float *xs, int tid, int nthreads) {
    uint32_t *q = (uint32_t *)xq;
    for (int i0 = 0; i0 < NC * 8; i0 += nthreads * MQ_SPLIT_ITEMS) { /* uniform trip count: whole warps shuffle */
        float4 v[MQ_SPLIT_ITEMS];
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid;
            v[j] = i < NC * 8 ? ((const float4 *)x_sw)[(size_t)(i & 7) * NC + (i >> 3)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid, c = i >> 3, f = i & 7;
            if (i0 + j * nthreads >= NC * 8) break; /* warp-uniform: nthreads % 32 == 0 and NC * 8 % 8 == 0 */
            float m = fmaxf(fmaxf(fabsf(v[j].x), fabsf(v[j].y)), fmaxf(fabsf(v[j].z), fabsf(v[j].w)));
            if (!(m <= 3.4e38f)) m = __int_as_float(0x7f800000); /* NaN or inf: the chunk is non-finite */
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            int E = 0;
            const bool finite = m <= 3.4e38f, live = finite && m >= 7.9e-31f; /* 2^-100 */
            if (live) (void)frexpf(m, &E);
            const float up = live ? ldexpf(1.0f, 7 - E) : 0.0f; /* y = x * up: exact (a power of two), |y| < 128 */
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
                if (f == 0) xs[c] = finite ? ldexpf(1.0f, E - 23) : __int_as_float(0x7fc00000);
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
    int t0[MQ_R], t1[MQ_R], t2[MQ_R]; /* the second half's sums: dependent chains of 4 dp4a, not 8 */
#pragma unroll
    for (int r = 0; r < MQ_R; r++) s0[r] = s1[r] = s2[r] = t0[r] = t1[r] = t2[r] = 0;
#pragma unroll
    for (int h = 0; h < 2; h++) { /* values 16h .. 16h + 15: words 2h, 2h + 1 */
        int *a0 = h ? t0 : s0, *a1 = h ? t1 : s1, *a2 = h ? t2 : s2;
        const uint4 x0 = xq[(0 * 2 + h) * NC + c], x1 = xq[(1 * 2 + h) * NC + c], x2 = xq[(2 * 2 + h) * NC + c];
#pragma unroll
        for (int r = 0; r < MQ_R; r++) {
            uint32_t a[2], b[2];
            mxfp4_i8x8(h ? q[r].z : q[r].x, a);
            mxfp4_i8x8(h ? q[r].w : q[r].y, b);
            a0[r] = __dp4a((int)a[0], (int)x0.x, a0[r]);
            a0[r] = __dp4a((int)a[1], (int)x0.y, a0[r]);
            a0[r] = __dp4a((int)b[0], (int)x0.z, a0[r]);
            a0[r] = __dp4a((int)b[1], (int)x0.w, a0[r]);
            a1[r] = mq_dp4a_su(a[0], x1.x, a1[r]);
            a1[r] = mq_dp4a_su(a[1], x1.y, a1[r]);
            a1[r] = mq_dp4a_su(b[0], x1.z, a1[r]);
            a1[r] = mq_dp4a_su(b[1], x1.w, a1[r]);
            a2[r] = mq_dp4a_su(a[0], x2.x, a2[r]);
            a2[r] = mq_dp4a_su(a[1], x2.y, a2[r]);
            a2[r] = mq_dp4a_su(b[0], x2.z, a2[r]);
            a2[r] = mq_dp4a_su(b[1], x2.w, a2[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < MQ_R; r++) {
        s0[r] += t0[r];
        s1[r] += t1[r];
        s2[r] += t2[r];
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

/* One warp: rows row0, row0 + 1 of an expert matrix (nrows of them real) dotted with the split vector;
 * acc[r] are full sums in every lane on return. All loads of a pass go out before any is used. */
static __device__ __forceinline__ void mq_rows(const uint8_t *blocks, const uint8_t *scales, size_t row0, int nrows,
                                               int NC, const uint4 *xq, const float *xs, int lane, float acc[MQ_R]) {
#pragma unroll
    for (int r = 0; r < MQ_R; r++) acc[r] = 0.0f;
    for (int c0 = lane; c0 < NC; c0 += 32 * MQ_U) {
        uint4 q[MQ_U][MQ_R];
        uint32_t sc[MQ_U][MQ_R];
#pragma unroll
        for (int r = 0; r < MQ_R; r++)
#pragma unroll
            for (int u = 0; u < MQ_U; u++) {
                const int c = c0 + 32 * u;
                const bool ok = r < nrows && c < NC;
                const size_t b = (row0 + r) * (size_t)NC + c;
                q[u][r] = ok ? __ldcs((const uint4 *)(blocks + b * 16)) : make_uint4(0u, 0u, 0u, 0u);
                sc[u][r] = ok ? __ldcs(scales + b) : 0u;
            }
#pragma unroll
        for (int u = 0; u < MQ_U; u++) { /* no branch: a lane past the last chunk adds 0 */
            const int c = c0 + 32 * u, cc = c < NC ? c : NC - 1;
            mq_chunk(q[u], sc[u], xq, NC, cc, c < NC ? xs[cc] : 0.0f, acc);
        }
    }
    mq_warp_sum(acc);
}

static __device__ __forceinline__ int mq_swz(int k, int K) { return ((k & 31) >> 2) * (K / 8) + (k >> 5) * 4 + (k & 3); }

/* gate_up + SwiGLU for T = 1: block (x, g) = expert group g (one pair), warp tasks = gate/up row pairs. */
__global__ void __launch_bounds__(MQ_WARPS * 32, MQ_MINB) moe_gate_up_dp4a_kernel(const float *h_sw, const int32_t *groups,
                                                                                  const uint8_t *blocks, const uint8_t *scales,
                                                                                  const uint16_t *bias, int H, int I,
                                                                                  float alpha, float limit, float *act_sw,
                                                                                  int pdl) {
    extern __shared__ __align__(16) uint8_t mq_smem[];
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): h_sw and the groups come from the router just before */
    const int g = blockIdx.y, GM = GPTOSS_TOPK, NC = H / 32;
    if (g >= groups[0]) return;
    const int e = groups[1 + g], pair = groups[1 + 2 * GM + 4 * g];
    uint4 *xq = (uint4 *)mq_smem;
    float *xs = (float *)(mq_smem + (size_t)NC * 6 * 16);
    mq_split_x(h_sw + (size_t)(pair / GPTOSS_TOPK) * H, NC, xq, xs, threadIdx.x, blockDim.x);
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, N = 2 * I, tasks = N / MQ_R;
    for (int tk = blockIdx.x * MQ_WARPS + warp; tk < tasks; tk += gridDim.x * MQ_WARPS) {
        /* the task's biases go out with its weights, not after the sums */
        const uint32_t bw = lane == 0 ? *(const uint32_t *)(bias + (size_t)e * N + (size_t)tk * MQ_R) : 0u;
        float acc[MQ_R];
        mq_rows(blocks, scales, (size_t)e * N + (size_t)tk * MQ_R, MQ_R, NC, xq, xs, lane, acc);
        if (lane == 0)
            act_sw[(size_t)pair * I + mq_swz(tk, I)] = gptoss_swiglu_value(
                acc[0] + __uint_as_float(bw << 16), acc[1] + __uint_as_float(bw & 0xffff0000u), alpha, limit);
    }
}

/* ------------------------------------------------------------------ gate_up through a TMA ring (mode 2)
 *
 * Why: in the kernel above a warp issues its task's loads, waits for them, computes, then issues the next
 * task's: the SM alternates between waiting and computing (call 2: 2.7x fewer instructions than the fp32
 * kernel bought only 8%). Here one producer thread per CTA keeps MR_DEPTH stages of 16 expert rows (one
 * bulk copy of their contiguous packed blocks, one of their scale bytes) in flight through the mbarrier ring
 * of tma_ring.cuh while MR_CONS consumer warps compute the previous stages from shared memory, one gate/up
 * row pair each. Persistent CTAs (MR_CTAS per SM) take tiles t = blockIdx.x + k gridDim.x; tile t is rows
 * 16 (t % TPG) .. + 15 of group t / TPG's expert. The producer starts before the consumers have split the
 * activation vector, so the first stages land while they do. */
#include "engines/gptoss_cuda/tma_ring.cuh"

#define MR_CONS 8   /* consumer warps (one row pair each per stage) */
#define MR_ROWS 16  /* rows per stage */
/* stages in flight (D) and CTAs per SM (C): <4, 2> (mode 2) or <2, 3> (mode 3: more consumer warps per SM) */

static __host__ __device__ __forceinline__ size_t mr_stage_bytes(int NC) { return (size_t)MR_ROWS * NC * 17; }
static __host__ __device__ __forceinline__ size_t mr_smem(int NC, int D) {
    return 128 + D * mr_stage_bytes(NC) + mq_smem_x(NC);
}

/* Producer: expect the stage's bytes once, then its two copies (blocks, then scales), both completing on full. */
static __device__ __forceinline__ void mr_fill2(uint64_t *full, uint8_t *slot, const uint8_t *b, uint32_t nb,
                                                const uint8_t *sc, uint32_t ns) {
    const uint32_t f = ring_smem_addr(full);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(f), "r"(nb + ns) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     ring_smem_addr(slot)),
                 "l"(b), "r"(nb), "r"(f)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     ring_smem_addr(slot + nb)),
                 "l"(sc), "r"(ns), "r"(f)
                 : "memory");
}

template <int MR_DEPTH, int MR_CTAS>
__global__ void __launch_bounds__((MR_CONS + 1) * 32, MR_CTAS) moe_gate_up_ring_kernel(const float *h_sw, const int32_t *groups,
                                                                                 const uint8_t *blocks, const uint8_t *scales,
                                                                                 const uint16_t *bias, int H, int I,
                                                                                 float alpha, float limit, float *act_sw,
                                                                                 int pdl, int diag) {
    extern __shared__ __align__(128) uint8_t mr_smem_buf[];
    uint64_t *full = (uint64_t *)mr_smem_buf, *empty = full + MR_DEPTH;
    const int NC = H / 32, N = 2 * I, TPG = N / MR_ROWS, GM = GPTOSS_TOPK;
    const size_t SB = mr_stage_bytes(NC);
    uint8_t *ring = mr_smem_buf + 128;
    uint4 *xq = (uint4 *)(ring + MR_DEPTH * SB);
    float *xs = (float *)((uint8_t *)xq + (size_t)NC * 6 * 16);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __shared__ int s_e[GPTOSS_TOPK], s_pair[GPTOSS_TOPK], s_ng;
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): h_sw and the groups come from the router just before */
    if (threadIdx.x == 0) ring_init(full, empty, MR_DEPTH, MR_CONS);
    if (threadIdx.x < GPTOSS_TOPK) { /* the group table once, not two dependent global loads per tile */
        s_e[threadIdx.x] = groups[1 + threadIdx.x];
        s_pair[threadIdx.x] = groups[1 + 2 * GM + 4 * threadIdx.x];
        if (threadIdx.x == 0) s_ng = groups[0];
    }
    __syncthreads();
    const int total = s_ng * TPG;
    if (warp == MR_CONS) { /* producer */
        if (lane == 0) {
            int k = 0;
            for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
                const int slot = k % MR_DEPTH, use = k / MR_DEPTH;
                if (diag == 2 && use > 0) break; /* timing diagnostic: the first stages only, then compute alone */
                if (use > 0) ring_wait(&empty[slot], (uint32_t)(use - 1) & 1u);
                const size_t row0 = (size_t)s_e[t / TPG] * N + (size_t)(t % TPG) * MR_ROWS;
                mr_fill2(&full[slot], ring + slot * SB, blocks + row0 * NC * 16, (uint32_t)(MR_ROWS * NC * 16),
                         scales + row0 * NC, (uint32_t)(MR_ROWS * NC));
            }
        }
        return;
    }
    /* consumers: the token's activation vector split once (T = 1: every group's pair is token 0) */
    mq_split_x(h_sw, NC, xq, xs, threadIdx.x, MR_CONS * 32);
    asm volatile("bar.sync 1, %0;" ::"n"(MR_CONS * 32) : "memory");
    /* this warp's row pair of tile t: activation index tk of group t / TPG; its two biases (one 32-bit word) are
     * loaded a tile ahead */
    auto tile_bias = [&](int t) {
        return lane == 0 && t < total ? *(const uint32_t *)(bias + (size_t)s_e[t / TPG] * N +
                                                            (size_t)((t % TPG) * (MR_ROWS / 2) + warp) * 2)
                                      : 0u;
    };
    uint32_t bw_next = tile_bias(blockIdx.x);
    int k = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
        const int slot = k % MR_DEPTH, g = t / TPG, tk = (t % TPG) * (MR_ROWS / 2) + warp;
        const int pair = s_pair[g];
        const uint32_t bw = bw_next;
        bw_next = tile_bias(t + gridDim.x);
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
            act_sw[(size_t)pair * I + mq_swz(tk, I)] = gptoss_swiglu_value(
                acc[0] + __uint_as_float(bw << 16), acc[1] + __uint_as_float(bw & 0xffff0000u), alpha, limit);
    }
}

/* down + routing weights + residual for T = 1: block = output rows n0 .. n0 + 7 of every group; warp tasks
 * = (row pair, group); then x[n] += sum over slots 0..3 in order of w * y, as moe_down_decode_kernel. */
__global__ void __launch_bounds__(MQ_WARPS * 32, MQ_MINB) moe_down_dp4a_kernel(const float *act_sw, const int32_t *groups,
                                                                               const float *wts, const uint8_t *blocks,
                                                                               const uint8_t *scales, const uint16_t *bias,
                                                                               int I, int H, float *x, int pdl) {
    extern __shared__ __align__(16) uint8_t mq_smem[];
    __shared__ float ys[GPTOSS_TOPK][MQ_DN_ROWS];
    gptoss_pdl_sync(pdl); /* the activations come from gate_up just before */
    const int GM = GPTOSS_TOPK, NC = I / 32, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * MQ_DN_ROWS;
    /* the epilogue's reads (thread rr's residual element and the routing weights) go out now */
    float x_pre = 0.0f, w_pre[GPTOSS_TOPK] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool pre = threadIdx.x < MQ_DN_ROWS && n0 + (int)threadIdx.x < H;
    if (pre) {
        x_pre = x[n0 + threadIdx.x];
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) w_pre[k] = wts[k];
    }
    /* each group (expert slot) has its own activation vector: all of them split into shared memory */
    const int ngroups = groups[0], RT = MQ_DN_ROWS / MQ_R, tasks = RT * ngroups;
    uint8_t *xg = mq_smem;
    for (int g = 0; g < ngroups; g++, xg += mq_smem_x(NC))
        mq_split_x(act_sw + (size_t)groups[1 + 2 * GM + 4 * g] * I, NC, (uint4 *)xg, (float *)(xg + (size_t)NC * 6 * 16),
                   threadIdx.x, blockDim.x);
    __syncthreads();
    for (int tk = warp; tk < tasks; tk += MQ_WARPS) {
        const int g = tk / RT, r0 = n0 + (tk % RT) * MQ_R;
        if (r0 >= H) continue;
        const int e = groups[1 + g], pair = groups[1 + 2 * GM + 4 * g];
        const uint8_t *xs = mq_smem + (size_t)g * mq_smem_x(NC);
        float acc[MQ_R];
        mq_rows(blocks, scales, (size_t)e * H + r0, H - r0 < MQ_R ? H - r0 : MQ_R, NC, (const uint4 *)xs,
                (const float *)(xs + (size_t)NC * 6 * 16), lane, acc);
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < MQ_R; r++)
                if (r0 + r < H) ys[pair][r0 - n0 + r] = acc[r] + gptoss_bf16_to_f32(bias[(size_t)e * H + r0 + r]);
    }
    __syncthreads();
    if (pre) {
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) sum += w_pre[k] * ys[k][threadIdx.x];
        x[n0 + threadIdx.x] = x_pre + sum;
    }
}

static int g_dp4a = 0, g_ring_diag = 0;

void gptoss_moe_ring_diag(int d) { g_ring_diag = d == 1 || d == 2 ? d : 0; }
static const int mr_smem_max[2] = {110 * 1024, 72 * 1024}; /* modes 2 and 3 */

int gptoss_moe_decode_dp4a(int mode) {
    g_dp4a = 0;
    if (mode < 1 || mode > 3) return 0;
    /* down's split activations (4 x 9 KB for the 20b) and the ring need more than the default 48 KiB; the
     * opt-in is set here, outside any graph capture */
    const int bytes = (int)(GPTOSS_TOPK * mq_smem_x(GPTOSS_DECODE_MAX_K / 32));
    if (cudaFuncSetAttribute(moe_gate_up_dp4a_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(moe_down_dp4a_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(moe_gate_up_ring_kernel<4, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, mr_smem_max[0]) != cudaSuccess ||
        cudaFuncSetAttribute(moe_gate_up_ring_kernel<2, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, mr_smem_max[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    g_dp4a = mode;
    return mode;
}

static int mq_sms(void) {
    static int sms = 0;
    if (!sms) {
        int dev = 0, n = 0;
        sms = cudaGetDevice(&dev) == cudaSuccess &&
                      cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0
                  ? n
                  : 132;
    }
    return sms;
}

static bool mq_ok(int K, const void *blocks) {
    return g_dp4a && K > 0 && K % 32 == 0 && K <= GPTOSS_DECODE_MAX_K && !((uintptr_t)blocks & 15);
}

cudaError_t gptoss_moe_gate_up_decode_dp4a(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                           const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                           float limit, float *act_sw, cudaStream_t s) {
    if (!mq_ok(H, blocks) || I <= 0 || I % 32) return cudaErrorNotSupported;
    if (g_dp4a >= 2) { /* the ring: persistent CTAs, C per SM */
        const int m3 = g_dp4a == 3, D = m3 ? 2 : 4, C = m3 ? 3 : 2;
        if (mr_smem(H / 32, D) > (size_t)mr_smem_max[m3] || (2 * I) % MR_ROWS || ((uintptr_t)scales & 15))
            return cudaErrorNotSupported;
        const int pdl = gptoss_pdl_enabled();
        const cudaError_t e = gptoss_launch(m3 ? moe_gate_up_ring_kernel<2, 3> : moe_gate_up_ring_kernel<4, 2>,
                                            dim3((unsigned)(C * mq_sms())), dim3((MR_CONS + 1) * 32), mr_smem(H / 32, D), s,
                                            pdl, h_sw, groups, blocks, scales, bias, H, I, alpha, limit, act_sw, pdl,
                                            g_ring_diag);
        return e != cudaSuccess ? e : cudaGetLastError();
    }
    const int G = GPTOSS_TOPK, tasks = 2 * I / MQ_R, need = (tasks + MQ_WARPS - 1) / MQ_WARPS;
    int gx = (MQ_MINB * mq_sms() + G - 1) / G; /* one wave of resident blocks over the 4 groups */
    if (gx > need) gx = need;
    const int pdl = gptoss_pdl_enabled();
    const cudaError_t e = gptoss_launch(moe_gate_up_dp4a_kernel, dim3((unsigned)gx, (unsigned)G), dim3(MQ_WARPS * 32),
                                        mq_smem_x(H / 32), s, pdl, h_sw, groups, blocks, scales, bias, H, I, alpha,
                                        limit, act_sw, pdl);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_moe_down_decode_dp4a(const float *act_sw, const int32_t *groups, const float *w, const uint8_t *blocks,
                                        const uint8_t *scales, const uint16_t *bias, int I, int H, float *x,
                                        cudaStream_t s) {
    if (!mq_ok(I, blocks) || g_dp4a != 1 || H <= 0) return cudaErrorNotSupported; /* modes 2, 3: the fp32 down */
    const unsigned grid = (unsigned)((H + MQ_DN_ROWS - 1) / MQ_DN_ROWS);
    const int pdl = gptoss_pdl_enabled();
    const cudaError_t e = gptoss_launch(moe_down_dp4a_kernel, dim3(grid), dim3(MQ_WARPS * 32),
                                        GPTOSS_TOPK * mq_smem_x(I / 32), s, pdl, act_sw, groups, w, blocks, scales,
                                        bias, I, H, x, pdl);
    return e != cudaSuccess ? e : cudaGetLastError();
}
