/* moe_decode_dp4a.cu — the T = 1 MXFP4 gate_up GEMV of the decode MoE block on integer dot products, its
 * weights streamed through a ring of shared-memory stages (LLMR_GPTOSS_MOE_DP4A; see kernels.h and
 * docs/performance.md, issue 10 step 18). The consumers below are the dp4a form (=1, the default); further down,
 * the same sums on integer tensor cores (=2, issue 10 step 56), and the routed forms' prologue (step 20) and
 * entry from o_proj's last block (step 57).
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
    /* m is normal here, so frexpf's E is its biased exponent - 126: both powers of two written as bits (frexpf and
     * ldexpf cost ~50 instructions a chunk, once per CTA for every chunk of the vector) */
    uint32_t b;
    memcpy(&b, &m, 4);
    const int E = (int)(b >> 23) - 126;
    const uint32_t u = (uint32_t)(7 - E + 127) << 23, w = (uint32_t)(E - 23 + 127) << 23;
    float fu, fw;
    memcpy(&fu, &u, 4);
    memcpy(&fw, &w, 4);
    *up = fu;
    return fw;
}

#define MQ_SPLIT_ITEMS 4 /* float4s a thread loads before it splits them */

/* Item i = 8c + f of the K-vector (float4 f of chunk c), or zeros past the last: from the swizzled x_sw (float4 f of
 * chunk c at (f NC + c) 4), or with PLAIN from x in its plain layout (float4 8c + f), normed here as the router finish
 * does: (x r) nw. */
template <bool PLAIN>
static __device__ __forceinline__ float4 mq_load_item(const float *x_sw, int NC, int i, const uint16_t *nw, float rn) {
    if (i >= NC * 8) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if constexpr (PLAIN) {
        const float4 a = ((const float4 *)x_sw)[i];
        const uint16_t *n4 = nw + (size_t)i * 4;
        return make_float4((a.x * rn) * gptoss_bf16_to_f32(n4[0]), (a.y * rn) * gptoss_bf16_to_f32(n4[1]),
                           (a.z * rn) * gptoss_bf16_to_f32(n4[2]), (a.w * rn) * gptoss_bf16_to_f32(n4[3]));
    } else {
        return ((const float4 *)x_sw)[(size_t)(i & 7) * NC + (i >> 3)];
    }
}

/* The largest magnitude of a chunk whose 8 float4s sit in 8 neighbouring lanes (3 shuffles); inf for a chunk with a
 * NaN or inf (fmaxf drops NaN). */
static __device__ __forceinline__ float mq_chunk_max(float4 v) {
    float m = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    if (!(m <= 3.4e38f)) m = __int_as_float(0x7f800000);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
}

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
            v[j] = mq_load_item<PLAIN>(x_sw, NC, i, nw, rn);
        }
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid, c = i >> 3, f = i & 7;
            if (i0 + j * nthreads >= NC * 8) break; /* warp-uniform: nthreads % 32 == 0 and NC * 8 % 8 == 0 */
            float up;
            const float unit = mq_chunk_scale(mq_chunk_max(v[j]), &up);
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


/* ------------------------------------------------------------------ the tensor-core consumers (LLMR_GPTOSS_MOE_DP4A=2)
 *
 * The same sums on integer tensor cores (mma.sync m16n8k32, u8 x s8 -> s32): one warp takes all 16 rows of a stage
 * over its share of the chunks, each mma one chunk (32 values = one MXFP4 block) of the 16 rows. Why: the dp4a
 * consumers spend ~3.7 instructions per weight and lane, 11 per 8 weights on the signed-byte decode and 6 on the
 * three parts' dp4a; here the multiplies go to the tensor cores and the decode stops halfway: the positive weights'
 * magnitudes (their nibbles as prmt selectors: mxfp4_i8x8's first lookup) and the negative ones' (the sign bits
 * flipped) are two u8 A operands, multiplied by the activation parts and by their negation: 7 instructions per 8
 * weights, 2 mma per 512.
 *
 * Numerics: per chunk c, m = max |x| = f 2^E (f in [0.5, 1)), y = x 2^(6 - E) lies in (-64, 64) and splits into four
 * balanced base-128 digits q0..q3 (each rint of the rest, |q| <= 64, so -q is a byte too): x = 2^(E - 27) (2^21 q0 +
 * 2^14 q1 + 2^7 q2 + q3) to within 2^-22 in y, ~2^-28 of the chunk's largest value. The B operand's columns 0..3 are
 * the four parts (4..7 zero), so an mma leaves in lane (g, t) the exact int32 sums S_p of rows g and g + 8 for parts
 * 2t, 2t + 1 (|S_p| <= 32 * 12 * 64): lane t = 0 forms hi = 128 S0 + S1, lane t = 1 lo = 128 S2 + S3 (both exact in
 * fp32), and each accumulates its chain over the chunks of hi (or lo) times 2^(E - 27) 2^(s - 128) (exact factors):
 * the row is 2^14 hi + lo, summed over the 8 warps' shares in order. Equal to the fp32 kernel to fp32 rounding, not
 * bit for bit (nor to the dp4a form). The mma's k order: lane t's A bytes are the 8 weights of the block's 32-bit word
 * t (k = 8t .. 8t + 7, low half first), and B holds the activation parts in the same order. */

#define MI_PARTS 4

/* Chunks of the split vector (tensor-core form): NC rounded up to 4 per consumer warp (8 warps); the chunks past NC
 * are zeros, so every warp's share is whole groups of 4 chunks with no bound checks (their weights, read past the
 * rows, meet zero activations and a zero chunk factor). */
static __host__ __device__ __forceinline__ int mi_chunks(int NC) { return (NC + 31) / 32 * 32; }

/* Shared memory of the split vector (tensor-core form), byte offsets from its start, the one layout the kernel and
 * its size use (session 27: a kernel that placed bn after NC chunks while the split writes mi_chunks(NC) raced its
 * own padding): bp and bn (mi_chunks(NC) x 16 uint2 each: chunk c, lane g * 4 + t of the B fragment = part g of
 * values 8t .. 8t + 7, and the same negated), the chunk factors xs[c] = 2^(E - 27), then the warps' row sums of two
 * stages (2 x 8 warps x 16 rows floats). */
struct mi_layout {
    size_t bn, xs, rsum, end;
};
static __host__ __device__ __forceinline__ mi_layout mi_layout_of(int NC) {
    const size_t NCP = (size_t)mi_chunks(NC);
    mi_layout l;
    l.bn = NCP * 16 * 8;
    l.xs = 2 * NCP * 16 * 8;
    l.rsum = (l.xs + NCP * 4 + 15) & ~(size_t)15;
    l.end = l.rsum + 2 * 8 * 16 * 4;
    return l;
}
static __host__ __device__ __forceinline__ size_t mi_smem_x(int NC) { return mi_layout_of(NC).end; }

/* The scaling of a chunk from its largest magnitude m: *up = 2^(6 - E) (|y| < 64), returns 2^(E - 27), the weight of
 * one unit of q3; a chunk below 2^-100 counts as zero (*up = 0), a non-finite m gives NaN (as mq_chunk_scale). */
static __host__ __device__ __forceinline__ float mi_chunk_scale(float m, float *up) {
    float u;
    const float unit = mq_chunk_scale(m, &u); /* u = 2^(7 - E), unit = 2^(E - 23) */
    *up = u * 0.5f;
    return unit * 0.0625f;
}

/* The low bytes of four words, in order, as one word (prmt: 3 instructions). */
static __host__ __device__ __forceinline__ uint32_t mi_pack4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return mxfp4_prmt(mxfp4_prmt(a, b, 0x0040u), mxfp4_prmt(c, d, 0x0040u), 0x5410u);
}

/* Four values y[j] (|y| < 64) as four balanced base-128 digits each: byte j of p[d] holds q_d of y[j], of n[d] -q_d.
 * Each digit is rounded by adding 1.5 2^23 (round to nearest even, as rintf), which also leaves q in the low byte of
 * the sum's bits (two's complement): no float -> int conversion. No expression below is a product plus a sum, so
 * nothing is contracted into an fma. The negations per byte: with |q| <= 64, q + 128 = (q ^ 0x80) lies in [64, 192],
 * so 256 - (q + 128) = ~(q ^ 0x80) + 1 per byte never carries into the next byte; ^ 0x80 again gives -q. */
static __host__ __device__ __forceinline__ void mi_split4(const float y[4], uint32_t p[MI_PARTS], uint32_t n[MI_PARTS]) {
    const float M = 12582912.0f;
    float r[4] = {y[0], y[1], y[2], y[3]};
    for (int d = 0; d < MI_PARTS; d++) {
        uint32_t bt[4];
        for (int j = 0; j < 4; j++) {
            const float t = r[j] + M, q = t - M;
            r[j] = (r[j] - q) * 128.0f;
            memcpy(&bt[j], &t, 4);
        }
        p[d] = mi_pack4(bt[0], bt[1], bt[2], bt[3]);
        n[d] = ((p[d] ^ 0x7F7F7F7Fu) + 0x01010101u) ^ 0x80808080u;
    }
}

/* Splits the K-vector into bp / bn / xs (layout above; the pad chunks zeroed), threads tid = 0 .. nthreads - 1 (a
 * multiple of 32), as mq_split_x; the caller syncs them afterwards. */
template <bool PLAIN = false>
static __device__ __forceinline__ void mi_split_x(const float *x_sw, int NC, uint2 *bp, uint2 *bn, float *xs, int tid,
                                                  int nthreads, const uint16_t *nw = nullptr, float rn = 0.0f) {
    const int NCP = mi_chunks(NC);
    for (int i = NC * 16 + tid; i < NCP * 16; i += nthreads) bp[i] = bn[i] = make_uint2(0u, 0u);
    for (int c = NC + tid; c < NCP; c += nthreads) xs[c] = 0.0f;
    for (int i0 = 0; i0 < NC * 8; i0 += nthreads * MQ_SPLIT_ITEMS) { /* uniform trip count: whole warps shuffle */
        float4 v[MQ_SPLIT_ITEMS];
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) v[j] = mq_load_item<PLAIN>(x_sw, NC, i0 + j * nthreads + tid, nw, rn);
#pragma unroll
        for (int j = 0; j < MQ_SPLIT_ITEMS; j++) {
            const int i = i0 + j * nthreads + tid, c = i >> 3, f = i & 7;
            if (i0 + j * nthreads >= NC * 8) break; /* warp-uniform */
            float up;
            const float unit = mi_chunk_scale(mq_chunk_max(v[j]), &up);
            const float y[4] = {v[j].x * up, v[j].y * up, v[j].z * up, v[j].w * up};
            uint32_t p[MI_PARTS], n[MI_PARTS];
            mi_split4(y, p, n);
            if (i < NC * 8) { /* values 4f .. 4f + 3: B lane (d, f / 2), register f % 2 */
#pragma unroll
                for (int d = 0; d < MI_PARTS; d++) {
                    ((uint32_t *)&bp[(size_t)c * 16 + d * 4 + (f >> 1)])[f & 1] = p[d];
                    ((uint32_t *)&bn[(size_t)c * 16 + d * 4 + (f >> 1)])[f & 1] = n[d];
                }
                if (f == 0) xs[c] = unit;
            }
        }
    }
}

/* d += A B for one m16n8k32 tile: A (16 x 32, u8) in a[4], B (32 x 8, s8) in b. */
static __device__ __forceinline__ void mi_mma(int d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint2 b) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
}

/* One chunk (32 values) of a stage's 16 rows for one warp: w0 / w1 this lane's words of fragment rows g and g + 8, b / nbj
 * its B words (the digits and their negations), m0 / m1 the chunk's row scales that lane (g, j) worked out. Two mma
 * (the positive magnitudes times the digits, the negative ones times their negations), then the exact int32 sums into
 * acc0 / acc1 (mi_stage, mi_stage_tiled). */
static __device__ __forceinline__ void mi_chunk(uint32_t w0, uint32_t w1, uint2 b, uint2 nbj, float m0, float m1, int j,
                                                int lane, float &acc0, float &acc1) {
    const uint32_t T0 = 0x03020100u, T1 = 0x0C080604u; /* doubled e2m1 magnitudes, as mxfp4_i8x8 */
    const uint32_t n0 = w0 ^ 0x88888888u, n1 = w1 ^ 0x88888888u;
    int d[4] = {0, 0, 0, 0};
    mi_mma(d, mxfp4_prmt(T0, T1, w0), mxfp4_prmt(T0, T1, w1), mxfp4_prmt(T0, T1, w0 >> 16), mxfp4_prmt(T0, T1, w1 >> 16), b);
    mi_mma(d, mxfp4_prmt(T0, T1, n0), mxfp4_prmt(T0, T1, n1), mxfp4_prmt(T0, T1, n0 >> 16), mxfp4_prmt(T0, T1, n1 >> 16),
           nbj);
    const float sc0 = __shfl_sync(0xffffffffu, m0, (lane & ~3) | j), sc1 = __shfl_sync(0xffffffffu, m1, (lane & ~3) | j);
    acc0 = fmaf((float)(d[0] * 128 + d[1]), sc0, acc0);
    acc1 = fmaf((float)(d[2] * 128 + d[3]), sc1, acc1);
}

/* Lane (g, 0)'s rows g and g + 8: its hi chain times 2^14 plus lane (g, 1)'s lo chain. */
static __device__ __forceinline__ float2 mi_rows_out(float acc0, float acc1) {
    const float lo0 = __shfl_down_sync(0xffffffffu, acc0, 1), lo1 = __shfl_down_sync(0xffffffffu, acc1, 1);
    return make_float2(fmaf(acc0, 16384.0f, lo0), fmaf(acc1, 16384.0f, lo1));
}

/* One warp's share of a stage: chunks cb .. ce - 1 (ce - cb a multiple of 4, within mi_chunks(NC)) of its 16 rows
 * (blocks st, scale bytes ss). Returns in lane (g, 0) the rows g and g + 8 summed over those chunks (2^14 hi + lo, see
 * above); other lanes return garbage. Chunks go four at a time: lane t works out the scales of chunk c0 + t for rows
 * g and g + 8 once, and each chunk's mma lanes take theirs by a shuffle. The B fragment's columns 4..7 (lanes 16..31)
 * only reach accumulator columns no lane uses, so those lanes load lane - 16's words: no predicate, no zeroing. */
static __device__ __forceinline__ float2 mi_stage(const uint8_t *st, const uint8_t *ss, const uint2 *bp, const uint2 *bn,
                                                  const float *xs, int NC, int cb, int ce, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const uint8_t *r0 = st + ((size_t)g * NC + cb) * 16 + 4 * t, *r1 = r0 + (size_t)8 * NC * 16;
    const uint8_t *s0 = ss + (size_t)g * NC + cb + t, *s1 = s0 + (size_t)8 * NC;
    const uint2 *pb = bp + (size_t)cb * 16 + (lane & 15), *nb = bn + (size_t)cb * 16 + (lane & 15);
    const float *xc = xs + cb + t;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int c0 = cb; c0 < ce; c0 += 4, r0 += 64, r1 += 64, s0 += 4, s1 += 4, pb += 64, nb += 64, xc += 4) {
        const float on = *xc; /* 0 for a pad chunk */
        const float m0 = mq_wscale(*s0) * on, m1 = mq_wscale(*s1) * on;
#pragma unroll
        for (int j = 0; j < 4; j++)
            mi_chunk(*(const uint32_t *)(r0 + 16 * j), *(const uint32_t *)(r1 + 16 * j), pb[16 * j], nb[16 * j], m0, m1, j,
                     lane, acc0, acc1);
    }
    return mi_rows_out(acc0, acc1);
}

/* mi_stage on a stage that is one tile of the experts' tiled copy (gptoss_mxfp4_tile, gate_up's row order: lane g' of
 * the tile holds rows 2g' and 2g' + 1): fragment rows g and g + 8 are the tile's rows 2g (gate) and 2g + 1 (up), so lane
 * (g, 0) returns gate/up pair g. Lane (g, t) reads word t of lane (g, j)'s units for chunk j of a super-chunk, and the
 * chunk's scales as lane (g, t)'s units hold them; gptoss_mxfp4_tiled_slot's xor puts each of these 32-bit reads of a
 * warp on its own bank. The same integer sums and the same fp32 chain per row as mi_stage: the same bits. The pad
 * chunks past the tile's super-chunks read the bytes after it (scales, the next stage or the split vector: in shared
 * memory, finite) and meet zero activations and a zero chunk factor. */
static __device__ __forceinline__ float2 mi_stage_tiled(const uint8_t *st, const uint8_t *ss, const uint2 *bp,
                                                        const uint2 *bn, const float *xs, int cb, int ce, int lane) {
    const int g = lane >> 2, t = lane & 3;
    /* the byte offset in a super-chunk of word t of lane (g, j)'s unit r, 16 gptoss_mxfp4_tiled_slot(4 g + j, r) + 4 t
     * = 128 g + 16 ((2 j + r) ^ g) + 4 t, is W ^ (32 j + 16 r) with W = 144 g + 4 t (the three terms' bits do not
     * overlap): one register and one xor an address, where offsets kept per j were recomputed in the loop, ~10
     * instructions a chunk (the PTX; the ring is bound by its consumers' instructions) */
    const int W = 144 * g + 4 * t;
    const int so = gptoss_mxfp4_tiled_slot(lane, 0); /* this lane's chunk's scale bytes: so (gate row), so ^ 1 (up) */
    const uint8_t *sb = st + (size_t)(cb / 4) * 1024, *sc = ss + (size_t)(cb / 4) * 64;
    const uint2 *pb = bp + (size_t)cb * 16 + (lane & 15), *nb = bn + (size_t)cb * 16 + (lane & 15);
    const float *xc = xs + cb + t;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int c0 = cb; c0 < ce; c0 += 4, sb += 1024, sc += 64, pb += 64, nb += 64, xc += 4) {
        const float on = *xc; /* 0 for a pad chunk */
        const float m0 = mq_wscale(sc[so]) * on, m1 = mq_wscale(sc[so ^ 1]) * on;
#pragma unroll
        for (int j = 0; j < 4; j++)
            mi_chunk(*(const uint32_t *)(sb + (W ^ (32 * j))), *(const uint32_t *)(sb + (W ^ (32 * j + 16))), pb[16 * j],
                     nb[16 * j], m0, m1, j, lane, acc0, acc1);
    }
    return mi_rows_out(acc0, acc1);
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
#define MR_CTAS 3   /* CTAs per SM: 27 warps of ~71 registers, 3 x 58 KB of shared memory (tensor-core form: 3 x 74 KB) */
#define MR_SMEM_MAX (75 * 1024) /* 3 CTAs an SM with the tensor-core form's split vector and tiled stages at the 20b's K */

/* A stage: 16 rows' blocks, then their scale bytes; tiled, one tile of the experts' tiled copy (gptoss_mxfp4_tile): its
 * ceil(K / 128) super-chunks of 1 KB, then their 64 scale bytes each (the same 16 rows, 2% pads past K at the 20b's). */
static __host__ __device__ __forceinline__ size_t mr_stage_bytes(int NC, bool tiled = false) {
    return tiled ? (size_t)(NC + 3) / 4 * 1088 : (size_t)MR_ROWS * NC * 17;
}
static __host__ __device__ __forceinline__ size_t mr_smem(int NC, bool imma = false, bool tiled = false) {
    const size_t x = imma ? mi_smem_x(NC) : mq_smem_x(NC), red = 32 * 33 * 4; /* the routed prologue's sums alias it */
    return 128 + MR_DEPTH * mr_stage_bytes(NC, tiled) + (x > red ? x : red);
}

/* Producer: expect the stage's bytes once, then its two copies (blocks, then scales), both completing on full, their
 * L2 lines evict-first (ring_copy_stream). */
static __device__ __forceinline__ void mr_fill2(uint64_t *full, uint8_t *slot, const uint8_t *b, uint32_t nb,
                                                const uint8_t *sc, uint32_t ns) {
    ring_expect(full, nb + ns);
    /* the experts' weights, read once a step (the batched step's 2-3 rows taken one by one may read an expert again:
     * from L2 while its lines stay, else from HBM) */
    ring_copy_stream(full, slot, b, nb);
    ring_copy_stream(full, slot + nb, sc, ns);
}

/* Producer: stage i (rows 16 i .. 16 i + 15) of expert e's gate_up (N rows of K = H) into slot, by mr_fill2: tiled, one
 * tile of the experts' tiled copy (ceil(H / 128) KB of blocks, then 64 scale bytes a KB); else the checkpoint's 16 rows
 * of blocks, then their scale bytes. */
template <bool TILED>
static __device__ __forceinline__ void mr_fill_stage(uint64_t *full, uint8_t *slot, const uint8_t *blocks,
                                                     const uint8_t *scales, int e, int i, int N, int H) {
    if constexpr (TILED) {
        const size_t u0 = gptoss_mxfp4_tiled_first(e, i, N, H);
        const uint32_t nsc = (uint32_t)(H + 127) / 128;
        mr_fill2(full, slot, blocks + u0 * 16, nsc * 1024, scales + u0, nsc * 64);
    } else {
        const size_t NC = (size_t)(H / 32), row0 = (size_t)e * N + (size_t)i * MR_ROWS;
        mr_fill2(full, slot, blocks + row0 * NC * 16, (uint32_t)(MR_ROWS * NC * 16), scales + row0 * NC,
                 (uint32_t)(MR_ROWS * NC));
    }
}

/* The routed forms' inputs and outputs. ROUTE 1: the residual x (plain layout) and the MLP norm, the router split's
 * partial rows (gptoss_gemv1_router) and the router bias; CTA 0 writes the token's ids, weights, group table and logits
 * as gptoss_moe_router_finish would. ROUTE 2: x and the norm, the group table (gin) and r (rin) that o_proj's last
 * block wrote (gptoss_gemv1_router_finish). ROUTE 3: ROUTE 2 for the rows of a small batched step (row y: x + y H, its
 * one-token table gin + y gptoss_moe_groups_ints(1), rin[y]; gptoss_gemv1_rows_router_finish). ROUTE 4: ROUTE 1 for
 * the rows (row y: x + y H, its partial rows at rpart + y nparts 33, its outputs at row y's; gptoss_gemv1_rows_router). */
struct mr_route {
    const float *x;
    const uint16_t *norm_w, *rb;
    const float *rpart, *rin;
    const int32_t *gin;
    float eps;
    int nparts;
    int32_t *ids, *groups;
    float *w, *rl;
};

/* The tensor-core form's named barriers between its consumers and its producer warp (MR_CONS + 1 warps each), two of each
 * kind by stage parity so that no warp's arrival for stage k + 1 can land in stage k's phase: MI_BAR_SUMS + (k & 1), the
 * consumers' row sums of stage k written; MI_BAR_FREE + (k & 1), the producer done reading them (their buffer, k & 1,
 * is stage k + 2's). Barrier 0 is __syncthreads, 1 the consumers' own. */
#define MI_BAR_SUMS 2
#define MI_BAR_FREE 4
static __device__ __forceinline__ void mi_bar_sync(int id) { /* not .aligned: callers come out of lane-divergent code */
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "n"((MR_CONS + 1) * 32) : "memory");
}
static __device__ __forceinline__ void mi_bar_arrive(int id) {
    asm volatile("barrier.arrive %0, %1;" ::"r"(id), "n"((MR_CONS + 1) * 32) : "memory");
}

/* The producer warp of the tensor-core form. Lane 0 keeps the ring full as before; after stage k + 2's copies are asked
 * for (so stage k's slot was free, and its consumers are done), lanes 0..7 add stage k's row sums over the 8 warps in
 * order and write its 8 activations (gate/up pair j: rows 2j, 2j + 1), the sums and SwiGLU the consumers' warp 0 did:
 * the same bits. So the consumers pass no barrier of their own a stage and none waits behind an epilogue (session 47:
 * the per-stage barrier held 8% of the kernel's warp samples). Each pair's biases are loaded as its stage is asked
 * for, two stages before their use (kept in bw0 / bw1 by parity). */
template <bool TILED>
static __device__ __forceinline__ void mi_producer(uint64_t *full, uint64_t *empty, uint8_t *ring, size_t SB,
                                                   const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias,
                                                   const int32_t *grp, int total, int TPG, int N, int H, int I,
                                                   float alpha, float limit, const float *rsum, float *act_sw, int lane,
                                                   int diag) {
    const int GM = GPTOSS_TOPK, n = total > (int)blockIdx.x ? (total - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    /* lane j < 8, for the stages of parity 0 and 1: pair j's biases, its activation's index and the stage's pair */
    uint32_t bw0 = 0u, bw1 = 0u;
    size_t ai0 = 0, ai1 = 0;
    for (int k = 0; k < n + 2; k++) {
        const uint32_t bw = (k & 1) ? bw1 : bw0; /* stage k - 2's, before stage k's take their place */
        const size_t ai = (k & 1) ? ai1 : ai0;
        if (k < n) {
            const int t = blockIdx.x + k * gridDim.x, g = t / TPG, e = grp[1 + g];
            const int slot = k % MR_DEPTH, use = k / MR_DEPTH;
            if (lane == 0 && !(diag == 2 && use > 0)) { /* diag 2: the first stages only, then compute alone */
                if (use > 0) ring_wait(&empty[slot], (uint32_t)(use - 1) & 1u);
                mr_fill_stage<TILED>(&full[slot], ring + slot * SB, blocks, scales, e, t % TPG, N, H);
            }
            if (lane < MR_ROWS / 2) {
                const int tk = (t % TPG) * (MR_ROWS / 2) + lane;
                const uint32_t b = *(const uint32_t *)(bias + (size_t)e * N + (size_t)tk * 2);
                const size_t a = (size_t)grp[1 + 2 * GM + 4 * g] * I + gptoss_swz(tk, I);
                if (k & 1) { bw1 = b; ai1 = a; }
                else { bw0 = b; ai0 = a; }
            }
            __syncwarp();
        }
        const int j = k - 2; /* the stage whose sums are due */
        if (j < 0) continue;
        mi_bar_sync(MI_BAR_SUMS + (j & 1));
        if (lane < MR_ROWS / 2) { /* lane j: the stage's gate/up pair (rows 2 lane, 2 lane + 1) */
            const float *rs = rsum + (j & 1) * MR_CONS * MR_ROWS;
            float gs = 0.0f, us = 0.0f;
#pragma unroll
            for (int w = 0; w < MR_CONS; w++) {
                gs += rs[w * MR_ROWS + 2 * lane];
                us += rs[w * MR_ROWS + 2 * lane + 1];
            }
            act_sw[ai] = gptoss_swiglu_value(gs + __uint_as_float(bw << 16), us + __uint_as_float(bw & 0xffff0000u),
                                             alpha, limit);
        }
        if (j + 2 < n) mi_bar_arrive(MI_BAR_FREE + (j & 1)); /* stage j + 2's consumers may write the buffer */
        __syncwarp();
    }
}

/* TILED: blocks / scales are the experts' tiled copy (gptoss_mxfp4_tile, gate_up's row order) and a stage is one tile;
 * the tensor-core consumers only (mi_stage_tiled: the same bits). */
template <int ROUTE, bool IMMA, bool TILED = false>
__global__ void __launch_bounds__((MR_CONS + 1) * 32, MR_CTAS) moe_gate_up_ring_kernel(const float *h_sw, const int32_t *groups,
                                                                                 const uint8_t *blocks, const uint8_t *scales,
                                                                                 const uint16_t *bias, int H, int I,
                                                                                 float alpha, float limit, float *act_sw,
                                                                                 int pdl, int diag, mr_route rt) {
    static_assert(!TILED || IMMA, "the tiled copy is read by the tensor-core consumers");
    extern __shared__ __align__(128) uint8_t mr_smem_buf[];
    uint64_t *full = (uint64_t *)mr_smem_buf, *empty = full + MR_DEPTH;
    const int NC = H / 32, NSC = (H + 127) / 128, N = 2 * I, TPG = N / MR_ROWS, GM = GPTOSS_TOPK;
    const size_t SB = mr_stage_bytes(NC, TILED);
    uint8_t *ring = mr_smem_buf + 128;
    uint4 *xq = (uint4 *)(ring + MR_DEPTH * SB); /* the split vector (dp4a form) */
    float *xs = (float *)((uint8_t *)xq + (size_t)NC * 6 * 16);
    const mi_layout il = mi_layout_of(NC); /* the split vector (tensor-core form) */
    uint2 *bp = (uint2 *)xq, *bn = (uint2 *)((uint8_t *)xq + il.bn);
    float *ixs = (float *)((uint8_t *)xq + il.xs), *rsum = (float *)((uint8_t *)xq + il.rsum);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    static_assert(MR_CONS == 8 && MR_ROWS == 16, "mi_smem_x and mi_stage: 8 consumer warps, 16-row stages");
    if constexpr (ROUTE == 0) { /* row y of a rows launch (gptoss_moe_gate_up_decode_rows1): its own one-token problem */
        const size_t r = blockIdx.y;
        h_sw += r * H;
        groups += r * gptoss_moe_groups_ints(1);
    }
    if (threadIdx.x == 0) ring_init(full, empty, MR_DEPTH, MR_CONS);
    __syncthreads();
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): h_sw and the groups come from the router just before */
    /* (the group table and each tile's biases read from global memory as the tile starts: keeping the table in
     * shared memory and the biases a tile ahead measured ~1 µs slower, session 17 calls 8-9) */
    const int32_t *grp = groups;
    float rn = 0.0f;
    if constexpr (ROUTE == 1 || ROUTE == 4) { /* the router finish in every CTA: its partial rows, r, the logits, the top-4 */
        /* The sums in gptoss_moe_router_finish's order exactly (moe_route.cuh), so this path is bit for bit the
         * finish + ring one. The 32 x 33 partial sums live in the split vector's space (written after the last sync
         * below). ROUTE 4: row y of a rows launch, its partial rows at rpart + y nparts 33, its outputs at row y's. */
        const size_t ry = ROUTE == 4 ? blockIdx.y : 0;
        float(*red)[33] = (float(*)[33])xq;
        __shared__ float s_w[GPTOSS_TOPK], s_r;
        __shared__ int32_t s_grp[gptoss_moe_groups_ints(1)], s_ids[GPTOSS_TOPK];
        const float bias = warp == 0 ? gptoss_bf16_to_f32(rt.rb[lane]) : 0.0f;
        if (warp < MR_CONS) router_partials_sum8(rt.rpart + ry * rt.nparts * 33, rt.nparts, warp, lane, red);
        if (threadIdx.x < gptoss_moe_groups_ints(1)) s_grp[threadIdx.x] = 0; /* entries the top-4 leaves alone */
        __syncthreads();
        if (warp == 0) {
            const float r = router_finish_warp(red, bias, H, rt.eps, lane, s_ids, s_w, s_grp,
                                               blockIdx.x == 0 ? rt.rl + ry * 32 : nullptr);
            if (lane == 0) s_r = r;
        }
        __syncthreads();
        if (blockIdx.x == 0 && threadIdx.x < gptoss_moe_groups_ints(1)) { /* for down and the host, as the finish writes them */
            rt.groups[ry * gptoss_moe_groups_ints(1) + threadIdx.x] = s_grp[threadIdx.x];
            if (threadIdx.x < GPTOSS_TOPK) {
                rt.ids[ry * GPTOSS_TOPK + threadIdx.x] = s_ids[threadIdx.x];
                rt.w[ry * GPTOSS_TOPK + threadIdx.x] = s_w[threadIdx.x];
            }
        }
        grp = s_grp;
        rn = s_r;
    }
    const float *rx = rt.x; /* the routed forms' x */
    if constexpr (ROUTE == 0 || ROUTE == 3 || ROUTE == 4) { /* row y of a rows launch: its activations, its x if routed */
        act_sw += (size_t)blockIdx.y * GPTOSS_TOPK * I;
        if constexpr (ROUTE != 0) rx += (size_t)blockIdx.y * H;
    }
    if constexpr (ROUTE == 2) { /* routed by o_proj's last block (gptoss_gemv1_router_finish): its table and r */
        grp = rt.gin;
        rn = *rt.rin;
    }
    if constexpr (ROUTE == 3) { /* row y of a rows launch, routed as ROUTE 2 (gptoss_gemv1_rows_router_finish) */
        const size_t r = blockIdx.y;
        grp = rt.gin + r * gptoss_moe_groups_ints(1);
        rn = rt.rin[r];
    }
    const int total = grp[0] * TPG;
    if (warp == MR_CONS) { /* producer */
        if constexpr (IMMA) {
            mi_producer<TILED>(full, empty, ring, SB, blocks, scales, bias, grp, total, TPG, N, H, I, alpha, limit,
                               rsum, act_sw, lane, diag);
            return;
        }
        if (lane == 0) {
            int k = 0;
            for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
                const int slot = k % MR_DEPTH, use = k / MR_DEPTH;
                if (diag == 2 && use > 0) break; /* timing diagnostic: the first stages only, then compute alone */
                if (use > 0) ring_wait(&empty[slot], (uint32_t)(use - 1) & 1u);
                mr_fill_stage<false>(&full[slot], ring + slot * SB, blocks, scales, grp[1 + t / TPG], t % TPG, N, H);
            }
        }
        return;
    }
    /* consumers: the token's activation vector split once (T = 1: every group's pair is token 0; diag 3, a timing
     * diagnostic: not split) */
    if (diag != 3) {
        if constexpr (IMMA) {
            if constexpr (ROUTE != 0) mi_split_x<true>(rx, NC, bp, bn, ixs, threadIdx.x, MR_CONS * 32, rt.norm_w, rn);
            else mi_split_x(h_sw, NC, bp, bn, ixs, threadIdx.x, MR_CONS * 32);
        } else {
            if constexpr (ROUTE != 0) mq_split_x<true>(rx, NC, xq, xs, threadIdx.x, MR_CONS * 32, rt.norm_w, rn);
            else mq_split_x(h_sw, NC, xq, xs, threadIdx.x, MR_CONS * 32);
        }
    }
    asm volatile("bar.sync 1, %0;" ::"n"(MR_CONS * 32) : "memory");
    if constexpr (IMMA) { /* warp w: chunks [cpw w, cpw (w + 1)) of every stage's 16 rows (cpw a multiple of 4) */
        const int cpw = mi_chunks(NC) / MR_CONS, cb = warp * cpw;
        const int ce = diag == 1 ? cb : cb + cpw; /* diag 1: the copies alone */
        int k = 0;
        for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
            const int slot = k % MR_DEPTH;
            if (diag != 2 || k < MR_DEPTH) ring_wait(&full[slot], (uint32_t)(k / MR_DEPTH) & 1u);
            /* mma.sync is .aligned: every lane must reach it together (the wait polls per thread) */
            __syncwarp();
            const uint8_t *st = ring + slot * SB;
            float2 v;
            if constexpr (TILED) v = mi_stage_tiled(st, st + (size_t)NSC * 1024, bp, bn, ixs, cb, ce, lane);
            else v = mi_stage(st, st + (size_t)MR_ROWS * NC * 16, bp, bn, ixs, NC, cb, ce, lane);
            __syncwarp();
            if (lane == 0) ring_release(&empty[slot]); /* this warp is done with the stage */
            /* the stage's row sums to the producer, which adds them and writes the activations (mi_producer): the
             * buffer of stage k - 2 must have been read first */
            float *rs = rsum + (k & 1) * MR_CONS * MR_ROWS;
            if (k >= 2) mi_bar_sync(MI_BAR_FREE + (k & 1));
            if ((lane & 3) == 0) { /* the stage's rows g, g + 8 (tiled: 2g, 2g + 1) */
                rs[warp * MR_ROWS + (TILED ? 2 * (lane >> 2) : lane >> 2)] = v.x;
                rs[warp * MR_ROWS + (TILED ? 2 * (lane >> 2) + 1 : (lane >> 2) + 8)] = v.y;
            }
            mi_bar_arrive(MI_BAR_SUMS + (k & 1));
        }
        return;
    }
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

static int g_dp4a = 0, g_ring_diag = 0; /* g_dp4a: 0 off, 1 the dp4a consumers, 2 the tensor-core ones */

void gptoss_moe_ring_diag(int d) { g_ring_diag = d >= 1 && d <= 3 ? d : 0; }

/* The ring kernel of the current mode (tiled: on the experts' tiled copy, the tensor-core consumers only) and its shared
 * memory for hidden size H. */
template <int ROUTE>
static decltype(&moe_gate_up_ring_kernel<ROUTE, false>) mr_kernel(bool tiled) {
    return tiled ? moe_gate_up_ring_kernel<ROUTE, true, true>
           : g_dp4a == 2 ? moe_gate_up_ring_kernel<ROUTE, true> : moe_gate_up_ring_kernel<ROUTE, false>;
}
static size_t mr_smem_now(int H, bool tiled = false) { return mr_smem(H / 32, g_dp4a == 2, tiled); }

/* The ring's shapes: K = H a whole number of MXFP4 blocks within the decode kernels' limit, its stages (tiled: a tile
 * each) and split vector within MR_SMEM_MAX, whole 16-row stages of the 2I gate_up rows. */
static bool mr_shape_ok(int H, int I, bool tiled) {
    return H > 0 && H % 32 == 0 && H <= GPTOSS_DECODE_MAX_K && mr_smem_now(H, tiled) <= MR_SMEM_MAX && I > 0 &&
           (2 * I) % MR_ROWS == 0;
}

/* Whether the ring reads a tiled copy at hidden size H: the tensor-core consumers on, the stages within MR_SMEM_MAX,
 * both arrays given and 16-byte aligned. */
static bool mr_tiled_ok(int H, const gptoss_mxfp4_tiled *tiled) {
    return g_dp4a == 2 && mr_smem_now(H, true) <= MR_SMEM_MAX && tiled->blocks && tiled->scales &&
           !((uintptr_t)tiled->blocks & 15) && !((uintptr_t)tiled->scales & 15);
}

/* The persistent CTAs of a launch for `rows` rows, each (rows > 1: ROUTE 0, 3 and 4) taking its row's stages over its
 * share: the CTAs an SM holds (MR_CTAS, the launch bounds; gptoss_moe_ring_rows_grid checks it against the occupancy)
 * times the SMs, shared among the rows and rounded down, so that the grid is one wave. Rounded up, 5 rows on 132 SMs
 * asked for 80 x 5 = 400 CTAs where 396 fit, and the 4 left over ran their share (18 stages each) alone after the
 * first wave (session 54: a 5-row step 4.61 -> 4.26 ms). Which CTA takes a stage does not change its sums. */
static int mr_ctas_per_row(int rows) {
    const int resident = MR_CTAS * gptoss_sm_count();
    return rows >= 1 && resident >= rows ? resident / rows : 1;
}

int gptoss_moe_ring_rows_grid(int H, int rows, int tiled, int *resident) {
    int per_sm = 0;
    *resident = 0;
    if (!g_dp4a || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mr_kernel<3>(tiled != 0), (MR_CONS + 1) * 32,
                                                                 mr_smem_now(H, tiled != 0)) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    *resident = per_sm * gptoss_sm_count();
    return mr_ctas_per_row(rows);
}

/* One launch of the ring kernel of the current mode with routing ROUTE (0: h_sw and groups given; rt for 1 and 2);
 * tiled (NULL: none): read it instead of blocks / scales, or cudaErrorNotSupported where the ring cannot. */
template <int ROUTE>
static cudaError_t mr_launch(const float *h_sw, const int32_t *groups, const uint8_t *blocks, const uint8_t *scales,
                             const uint16_t *bias, int H, int I, float alpha, float limit, float *act_sw, const mr_route &rt,
                             cudaStream_t s, const gptoss_mxfp4_tiled *tiled, int rows = 1) {
    const int pdl = rows == 1 && gptoss_pdl_enabled();
    if (tiled) {
        if (!mr_tiled_ok(H, tiled)) return cudaErrorNotSupported;
        blocks = tiled->blocks;
        scales = tiled->scales;
    }
    const unsigned per_row = (unsigned)mr_ctas_per_row(rows);
    const cudaError_t e = gptoss_launch(mr_kernel<ROUTE>(tiled != nullptr), dim3(per_row, (unsigned)rows),
                                        dim3((MR_CONS + 1) * 32), mr_smem_now(H, tiled != nullptr), s, pdl, h_sw, groups,
                                        blocks, scales, bias, H, I, alpha, limit, act_sw, pdl, g_ring_diag, rt);
    return e != cudaSuccess ? e : cudaGetLastError();
}

int gptoss_moe_decode_dp4a(int on) {
    g_dp4a = 0;
    if (on != 1 && on != 2) return 0;
    /* more than the default 48 KiB of dynamic shared memory needs the opt-in, set here (outside any capture) */
    const void *k[15] = {(const void *)moe_gate_up_ring_kernel<0, false>,      (const void *)moe_gate_up_ring_kernel<1, false>,
                         (const void *)moe_gate_up_ring_kernel<2, false>,      (const void *)moe_gate_up_ring_kernel<3, false>,
                         (const void *)moe_gate_up_ring_kernel<4, false>,      (const void *)moe_gate_up_ring_kernel<0, true>,
                         (const void *)moe_gate_up_ring_kernel<1, true>,       (const void *)moe_gate_up_ring_kernel<2, true>,
                         (const void *)moe_gate_up_ring_kernel<3, true>,       (const void *)moe_gate_up_ring_kernel<4, true>,
                         (const void *)moe_gate_up_ring_kernel<0, true, true>, (const void *)moe_gate_up_ring_kernel<1, true, true>,
                         (const void *)moe_gate_up_ring_kernel<2, true, true>, (const void *)moe_gate_up_ring_kernel<3, true, true>,
                         (const void *)moe_gate_up_ring_kernel<4, true, true>};
    for (int i = 0; i < 15; i++)
        if (cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
    g_dp4a = on;
    return on;
}

cudaError_t gptoss_moe_gate_up_decode_dp4a(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                           const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                           float limit, float *act_sw, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    return gptoss_moe_gate_up_decode_dp4a_rows1(h_sw, groups, 1, blocks, scales, bias, H, I, alpha, limit, act_sw, s, tiled);
}

cudaError_t gptoss_moe_gate_up_decode_dp4a_rows1(const float *h_sw, const int32_t *groups1, int n, const uint8_t *blocks,
                                                 const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                                 float limit, float *act_sw, cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (tiled) blocks = scales = NULL; /* the tiled copy only (mr_launch checks it) */
    if (n < 1 || n > GPTOSS_DECODE_MAX_T || !g_dp4a || !mr_shape_ok(H, I, false) || ((uintptr_t)blocks & 15) ||
        ((uintptr_t)scales & 15))
        return cudaErrorNotSupported;
    const mr_route none = {};
    return mr_launch<0>(h_sw, groups1, blocks, scales, bias, H, I, alpha, limit, act_sw, none, s, tiled, n);
}

int gptoss_moe_gate_up_tiled_ok(int H, int I) { return g_dp4a == 2 && mr_shape_ok(H, I, true); }

int gptoss_moe_route_gate_up_dp4a_ok(int H, int I, int E, const uint8_t *blocks, const uint8_t *scales) {
    return g_dp4a && E == 32 && mr_shape_ok(H, I, false) && !((uintptr_t)blocks & 15) && !((uintptr_t)scales & 15);
}

/* The routing of ROUTE 1 and 4 (the router finish in every CTA): x, its norm weights and eps, the partial rows and the
 * router's bias in; ids, weights, the group table(s) and the logits out. */
static mr_route mr_route_finish(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                const uint16_t *router_b, int32_t *ids, float *w, int32_t *groups, float *router_logits) {
    mr_route rt = {};
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
    return rt;
}

/* The routing of ROUTE 2 and 3 (o_proj's last block routed it): x, its norm weights, r and the group table(s) in. */
static mr_route mr_route_routed(const float *x, const uint16_t *norm_w, const float *r, const int32_t *groups) {
    mr_route rt = {};
    rt.x = x;
    rt.norm_w = norm_w;
    rt.rin = r;
    rt.gin = groups;
    return rt;
}

cudaError_t gptoss_moe_route_gate_up_dp4a(const float *x, const uint16_t *norm_w, float eps, const float *rpart, int nparts,
                                          const uint16_t *router_b, int E, const uint8_t *blocks, const uint8_t *scales,
                                          const uint16_t *bias, int H, int I, float alpha, float limit, int32_t *ids,
                                          float *w, int32_t *groups, float *router_logits, float *act_sw, cudaStream_t s,
                                          const gptoss_mxfp4_tiled *tiled) {
    if (tiled) blocks = scales = NULL; /* the tiled copy only (mr_launch checks it) */
    if (!gptoss_moe_route_gate_up_dp4a_ok(H, I, E, blocks, scales) || nparts < 1 || ((uintptr_t)x & 15))
        return cudaErrorNotSupported;
    const mr_route rt = mr_route_finish(x, norm_w, eps, rpart, nparts, router_b, ids, w, groups, router_logits);
    return mr_launch<1>(nullptr, nullptr, blocks, scales, bias, H, I, alpha, limit, act_sw, rt, s, tiled);
}

cudaError_t gptoss_moe_route_gate_up_dp4a_rows1(const float *x, const uint16_t *norm_w, float eps, const float *rpart,
                                                int nparts, const uint16_t *router_b, int n, const uint8_t *blocks,
                                                const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                                float limit, int32_t *ids, float *w, int32_t *groups1,
                                                float *router_logits, float *act_sw, cudaStream_t s,
                                                const gptoss_mxfp4_tiled *tiled) {
    if (tiled) blocks = scales = NULL; /* the tiled copy only (mr_launch checks it) */
    if (n < 1 || n > GPTOSS_DECODE_MAX_T || !gptoss_moe_route_gate_up_dp4a_ok(H, I, 32, blocks, scales) || nparts < 1 ||
        ((uintptr_t)x & 15) || (H % 4) || !router_logits)
        return cudaErrorNotSupported;
    const mr_route rt = mr_route_finish(x, norm_w, eps, rpart, nparts, router_b, ids, w, groups1, router_logits);
    return mr_launch<4>(nullptr, nullptr, blocks, scales, bias, H, I, alpha, limit, act_sw, rt, s, tiled, n);
}

cudaError_t gptoss_moe_routed_gate_up_dp4a_rows1(const float *x, const uint16_t *norm_w, const float *r,
                                                 const int32_t *groups1, int n, const uint8_t *blocks, const uint8_t *scales,
                                                 const uint16_t *bias, int H, int I, float alpha, float limit, float *act_sw,
                                                 cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (tiled) blocks = scales = NULL; /* the tiled copy only (mr_launch checks it) */
    if (n < 1 || n > GPTOSS_DECODE_MAX_T || !gptoss_moe_route_gate_up_dp4a_ok(H, I, 32, blocks, scales) ||
        ((uintptr_t)x & 15) || (H % 4))
        return cudaErrorNotSupported;
    const mr_route rt = mr_route_routed(x, norm_w, r, groups1);
    return mr_launch<3>(nullptr, nullptr, blocks, scales, bias, H, I, alpha, limit, act_sw, rt, s, tiled, n);
}

cudaError_t gptoss_moe_routed_gate_up_dp4a(const float *x, const uint16_t *norm_w, const float *r, const int32_t *groups,
                                           const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias, int H,
                                           int I, float alpha, float limit, float *act_sw, cudaStream_t s,
                                           const gptoss_mxfp4_tiled *tiled) {
    if (tiled) blocks = scales = NULL; /* the tiled copy only (mr_launch checks it) */
    if (!gptoss_moe_route_gate_up_dp4a_ok(H, I, 32, blocks, scales) || ((uintptr_t)x & 15)) return cudaErrorNotSupported;
    const mr_route rt = mr_route_routed(x, norm_w, r, groups);
    return mr_launch<2>(nullptr, nullptr, blocks, scales, bias, H, I, alpha, limit, act_sw, rt, s, tiled);
}
