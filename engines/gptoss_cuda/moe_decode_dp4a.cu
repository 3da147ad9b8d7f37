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
 * multiple of 32), as mq_split_x; the caller syncs them afterwards. PADS false: bp's and bn's pad chunks are left as
 * they are (the caller's layout puts other data there; the pads' zero chunk factors, still written, make whatever
 * they hold add 0: see moe_gate_up_pairs_kernel); NEG false: no bn. */
template <bool PLAIN = false, bool PADS = true, bool NEG = true>
static __device__ __forceinline__ void mi_split_x(const float *x_sw, int NC, uint2 *bp, uint2 *bn, float *xs, int tid,
                                                  int nthreads, const uint16_t *nw = nullptr, float rn = 0.0f) {
    const int NCP = mi_chunks(NC);
    if constexpr (PADS)
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
                    if constexpr (NEG) ((uint32_t *)&bn[(size_t)c * 16 + d * 4 + (f >> 1)])[f & 1] = n[d];
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

/* ------------------------------------------------------------------ a small step's rows, each shared expert once
 *
 * gptoss_moe_route_gate_up_pairs and gptoss_moe_gate_up_pairs_rows1 (issue 10, session 55). The rows launches (ROUTE 4,
 * ROUTE 0) run every (row, expert) pair as its own problem, so an expert that two rows route to is streamed, decoded
 * and multiplied twice: with uniform routing 6% / 17.5% / 27% of the 2 / 4 / 6-row gate_up's work. Here the rows'
 * pairs are grouped by expert into passes of one or two rows, and a two-row pass's stages serve both rows with the same
 * mma count: the consumers put a row's 4 activation digits in the B operand's columns 0-3 and leave 4-7 unused, so the
 * second row's digits ride there (lanes t = 2, 3 then hold its hi / lo chains, t = 0, 1 the first row's). Each
 * column's int32 sums are exact and each row's fp32 chain is the same sequence of operations as alone, so every row
 * keeps its lone bits (kernel checks test_moe_rows, test_rows_routed). A two-row tile costs ~1.26 one-row ones (call
 * 5), so at 4-6 rows with random routing the launch takes 11-15% less (call 6).
 *
 *  - Routing (ROUTED): CTA y < n finishes row y as ROUTE 4's CTAs do (the partial rows' sums in the finish's order, r,
 *    the top-4), writes the row's ids, weights, table, logits and r, and raises flag y; every CTA waits for the n flags.
 *    The grid is what the occupancy API says the GPU holds at once, so every finisher is resident and the wait cannot
 *    block it. The last CTA past the wait puts the flags back to 0 for the next launch.
 *  - The plan (mp_plan, warp 0 of every CTA): the passes from the n tables (ascending expert id, each expert's rows in
 *    order, two a pass), grouped by their row(s) (one row's, or one pair of rows'); the groups share the grid's CTAs by
 *    cost, and a group's CTAs stride over its tiles as the rows launch's CTAs over a row's.
 *  - The split: a CTA splits its group's row(s) once. Two rows' digits take the space of one row's digits and their
 *    negations, so a two-row pass keeps no negations: its two mma go into two accumulators, subtracted (the same int32
 *    sums). Both layouts hold NC chunks an array, not NC rounded up to 8 warps x 4: the pad chunks read whatever
 *    follows, finite integers times a zero chunk factor, which adds +-0 to a chain that is never -0 (it starts at +0,
 *    and x + (-x) is +0 when rounding to nearest): the same bits.
 *  - The epilogue: the producer warp adds a stage's 8 warps' sums in order and writes each row's activations
 *    (mi_producer's arithmetic). */

#define MP_MAXP (GPTOSS_GEMV1_ROWS_MAX * GPTOSS_TOPK) /* passes at most (every pair its own expert) */

/* The split region's layout (byte offsets): one-row pass bp | bn | xs, two-row pass bpA | bpB | xsA | xsB (each bp or bn
 * NC chunks of 16 uint2, each xs mi_chunks(NC) floats, the pads 0), then the stages' row sums (2 parities x 8 warps x 2
 * rows x 16 floats), past every pad chunk's read (bn's or bpB's last pad ends at bn + mi_chunks(NC) chunks: for the
 * 20b, NC = 90, exactly where xsB ends), so that no pad reads a sum while it is written. */
struct mp_layout {
    size_t bn, xs0, xs1, rsum, end;
};
static __host__ __device__ __forceinline__ mp_layout mp_layout_of(int NC) {
    const size_t NCP = (size_t)mi_chunks(NC);
    mp_layout l;
    l.bn = (size_t)NC * 16 * 8;
    l.xs0 = 2 * l.bn;
    l.xs1 = l.xs0 + NCP * 4;
    const size_t xe = l.xs1 + NCP * 4, pe = l.bn + NCP * 16 * 8;
    l.rsum = ((xe > pe ? xe : pe) + 15) & ~(size_t)15;
    l.end = l.rsum + 2 * MR_CONS * 2 * MR_ROWS * 4;
    return l;
}
static __host__ __device__ __forceinline__ size_t mp_smem(int NC) {
    const size_t red = 32 * 33 * 4, x = mp_layout_of(NC).end; /* the finish's sums alias the split region */
    return 128 + MR_DEPTH * mr_stage_bytes(NC, true) + (x > red ? x : red);
}

/* A pass: expert e, row A and its slot (which of its 4 picks), row B + 1 (0: a one-row pass) and its slot. */
static __device__ __forceinline__ int mp_pass(int e, int ya, int sa, int yb, int sb) {
    return e | ya << 8 | sa << 12 | (yb + 1) << 16 | sb << 20;
}
static __device__ __forceinline__ int mp_e(int p) { return p & 0xFF; }
static __device__ __forceinline__ int mp_ya(int p) { return (p >> 8) & 0xF; }
static __device__ __forceinline__ int mp_sa(int p) { return (p >> 12) & 3; }
static __device__ __forceinline__ int mp_yb(int p) { return ((p >> 16) & 0xF) - 1; } /* -1: one row */
static __device__ __forceinline__ int mp_sb(int p) { return (p >> 20) & 3; }

static __device__ __forceinline__ int mp_load_acquire(const int32_t *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* By one whole warp (lane = expert, E <= 32): the passes of the n rows' picks (sel [n][4]: row y's pick k as expert | k
 * << 8, shared memory), in ascending expert id, each expert's rows in order, two a pass (one with !pairs); returns
 * their count (every lane). */
static __device__ __forceinline__ int mp_build_passes(const int32_t *sel, int n, bool pairs, int lane, int32_t *pass) {
    int m = 0;
    for (int i = 0; i < n * GPTOSS_TOPK; i++) m += (sel[i] & 0xFF) == lane;
    const int mine = pairs ? (m + 1) / 2 : m;
    int off = mine; /* inclusive scan over the lanes, then exclusive */
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, off, o);
        if (lane >= o) off += v;
    }
    const int total = __shfl_sync(0xffffffffu, off, 31);
    off -= mine;
    int pend = -1; /* a row waiting for a second: y | slot << 4 */
    for (int i = 0; i < n * GPTOSS_TOPK; i++)
        if ((sel[i] & 0xFF) == lane) {
            const int y = i / GPTOSS_TOPK, slot = sel[i] >> 8;
            if (!pairs) {
                pass[off++] = mp_pass(lane, y, slot, -1, 0);
            } else if (pend < 0) {
                pend = y | slot << 4;
            } else {
                pass[off++] = mp_pass(lane, pend & 0xF, pend >> 4, y, slot);
                pend = -1;
            }
        }
    if (pend >= 0) pass[off] = mp_pass(lane, pend & 0xF, pend >> 4, -1, 0);
    return total;
}

/* A pass's tiles' cost: TPG tiles at 8 a one-row tile, wpair a two-row one. */
static __device__ __forceinline__ int mp_cost(int p, int TPG, int wpair) { return TPG * (mp_yb(p) >= 0 ? wpair : 8); }

/* A pass's group: the passes of one row, or of one pair of rows (one split serves them all). */
static __device__ __forceinline__ int mp_group(int p) { return mp_ya(p) * (GPTOSS_GEMV1_ROWS_MAX + 1) + mp_yb(p) + 1; }

/* A CTA's share: its group's passes ord[p0 .. p0 + np), the group's CTAs G and this one's index b among them (it takes
 * the group's tiles b, b + G, ..., TPG a pass, as the rows launch gives a row's CTAs their row's tiles). */
struct mp_share {
    int p0, np, G, b;
};

/* By warp 0 alone (lane i < 4n: pick i), the whole plan of a CTA: the n rows' picks from their one-token tables (groups1
 * + y GI, by L2: another CTA or launch wrote them; one round trip), the passes (mp_build_passes, into pass), the same
 * sorted by group into ord (stable: each group's in ascending expert id), and lane 0 then this CTA's share: the groups
 * get the grid's CTAs in proportion to their cost (a one-row tile 8, a two-row one wpair), each one at least (the
 * launcher's grid makes a group's share >= 6). Each CTA thus splits one row or one pair once, and its stages stride
 * over its group's tiles as the rows launch's do over a row's (session 55 call 5: contiguous ranges of all the tiles,
 * split again at each pass change, ran the same work 19-30% slower). */
static __device__ __forceinline__ void mp_plan(const int32_t *groups1, int n, int wpair, int TPG, int lane, int32_t *sel,
                                               int32_t *pass, int32_t *ord, mp_share *share) {
    const int GI = gptoss_moe_groups_ints(1), GM = GPTOSS_TOPK;
    if (lane < n * GM) {
        const int32_t *tab = groups1 + (size_t)(lane / GM) * GI;
        const int g = lane % GM;
        sel[lane] = __ldcg(tab + 1 + g) | __ldcg(tab + 1 + 2 * GM + 4 * g) << 8;
    }
    __syncwarp();
    const int np = mp_build_passes(sel, n, wpair != 0, lane, pass);
    __syncwarp();
    const int mine = lane < np ? pass[lane] : 0, key = lane < np ? mp_group(mine) : 1 << 30;
    int rank = 0;
    for (int j = 0; j < np; j++) {
        const int kj = __shfl_sync(0xffffffffu, key, j);
        rank += kj < key || (kj == key && j < lane);
    }
    if (lane < np) ord[rank] = mine;
    __syncwarp();
    if (lane == 0) {
        const int G = gridDim.x, b = blockIdx.x;
        int C = 0; /* at most 32 passes x TPG x 16 (G C below 2^31 for the launcher's shapes) */
        for (int p = 0; p < np; p++) C += mp_cost(ord[p], TPG, wpair);
        int S = 0, p0 = 0, g0 = 0;
        for (int p = 0; p < np; p++) {
            S += mp_cost(ord[p], TPG, wpair);
            if (p + 1 < np && mp_group(ord[p + 1]) == mp_group(ord[p])) continue;
            const int g1 = (int)((long long)G * S / C); /* this group (passes p0 .. p): CTAs g0 .. g1 - 1 */
            if (b < g1) {
                *share = {p0, p + 1 - p0, g1 - g0, b - g0};
                return;
            }
            p0 = p + 1;
            g0 = g1;
        }
        *share = {0, 0, 1, 0}; /* not reached: the last group ends at CTA G */
    }
}

/* One chunk of a two-row stage for one warp: mi_chunk with b carrying row A's digits in columns 0-3 and row B's in 4-7
 * and no negated digits: the positive magnitudes' products and the negative ones' in two accumulators, subtracted
 * (the int32 sums mi_chunk's two mma leave in one). m0 / m1: this lane's row's chunk scales (rows g and g + 8). */
static __device__ __forceinline__ void mi_chunk_pair(uint32_t w0, uint32_t w1, uint2 b, float m0, float m1, float &acc0,
                                                     float &acc1) {
    const uint32_t T0 = 0x03020100u, T1 = 0x0C080604u;
    const uint32_t n0 = w0 ^ 0x88888888u, n1 = w1 ^ 0x88888888u;
    int p[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
    mi_mma(p, mxfp4_prmt(T0, T1, w0), mxfp4_prmt(T0, T1, w1), mxfp4_prmt(T0, T1, w0 >> 16), mxfp4_prmt(T0, T1, w1 >> 16), b);
    mi_mma(q, mxfp4_prmt(T0, T1, n0), mxfp4_prmt(T0, T1, n1), mxfp4_prmt(T0, T1, n0 >> 16), mxfp4_prmt(T0, T1, n1 >> 16), b);
    acc0 = fmaf((float)((p[0] - q[0]) * 128 + (p[1] - q[1])), m0, acc0);
    acc1 = fmaf((float)((p[2] - q[2]) * 128 + (p[3] - q[3])), m1, acc1);
}

/* mi_stage_tiled for two rows: lanes 0..15 load row A's digits (bpA), 16..31 row B's (bpB), so lane (g, 0) returns row
 * A's gate/up pair g and lane (g, 2) row B's. The chunk scales: lane (g, s) works out chunk c0 + s's weight scales as
 * mi_stage_tiled does, then holds in g0 / u0 the scales (gate / up) of chunk c0 + (s >> 1) for row s & 1 (A, B), in
 * g1 / u1 those of chunk c0 + 2 + (s >> 1), each the same product as mi_stage_tiled's (the weight scale times the
 * chunk factor); chunk j's mma lanes take theirs from lane (g, 2 (j & 1) + (t >> 1)) by one shuffle a row. */
static __device__ __forceinline__ float2 mi_stage_tiled_pair(const uint8_t *st, const uint8_t *ss, const uint2 *bpA,
                                                             const uint2 *bpB, const float *xsA, const float *xsB, int cb,
                                                             int ce, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const int W = 144 * g + 4 * t, so = gptoss_mxfp4_tiled_slot(lane, 0);
    const uint8_t *sb = st + (size_t)(cb / 4) * 1024, *sc = ss + (size_t)(cb / 4) * 64;
    const uint2 *pb = (lane < 16 ? bpA : bpB) + (size_t)cb * 16 + (lane & 15);
    const float *xc = (t & 1 ? xsB : xsA) + cb + (t >> 1);
    const int src0 = (lane & ~3) | (t >> 1), row = t >> 1;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int c0 = cb; c0 < ce; c0 += 4, sb += 1024, sc += 64, pb += 64, xc += 4) {
        const float wg = mq_wscale(sc[so]), wu = mq_wscale(sc[so ^ 1]); /* chunk c0 + t's */
        const float g0 = __shfl_sync(0xffffffffu, wg, src0) * xc[0], g1 = __shfl_sync(0xffffffffu, wg, src0 + 2) * xc[2];
        const float u0 = __shfl_sync(0xffffffffu, wu, src0) * xc[0], u1 = __shfl_sync(0xffffffffu, wu, src0 + 2) * xc[2];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int src = (lane & ~3) | (2 * (j & 1) + row);
            const float m0 = __shfl_sync(0xffffffffu, j < 2 ? g0 : g1, src);
            const float m1 = __shfl_sync(0xffffffffu, j < 2 ? u0 : u1, src);
            mi_chunk_pair(*(const uint32_t *)(sb + (W ^ (32 * j))), *(const uint32_t *)(sb + (W ^ (32 * j + 16))), pb[16 * j],
                          m0, m1, acc0, acc1);
        }
    }
    return mi_rows_out(acc0, acc1);
}

/* The producer warp: lane 0 keeps the ring full with the CTA's nt tiles (its share's tiles t = b + k G: pass p0 + t /
 * TPG's expert, its tile t % TPG); lanes 0..7 then add each stage's row sums over the 8 warps in order and write the
 * activations of its row(s), as mi_producer does. */
static __device__ __forceinline__ void mp_producer(uint64_t *full, uint64_t *empty, uint8_t *ring, size_t SB,
                                                   const uint8_t *blocks, const uint8_t *scales, const uint16_t *bias,
                                                   const int32_t *pass, mp_share sh, int nt, int TPG, int N, int H, int I,
                                                   float alpha, float limit, const float *rsum, float *act_sw, int lane,
                                                   int diag) {
    /* lane j < 8, for the stages of parity 0 and 1 (kept in registers by name, as mi_producer's): pair j's biases and
     * the indices of its activations in row A and row B (~0: a one-row pass) */
    uint32_t bw0 = 0u, bw1 = 0u;
    size_t aa0 = 0, aa1 = 0, ab0 = ~(size_t)0, ab1 = ~(size_t)0;
    for (int k = 0; k < nt + 2; k++) {
        const uint32_t bwj = (k & 1) ? bw1 : bw0; /* stage k - 2's, before stage k's take their place */
        const size_t aaj = (k & 1) ? aa1 : aa0, abj = (k & 1) ? ab1 : ab0;
        if (k < nt) {
            const int t = sh.b + k * sh.G, p = pass[sh.p0 + t / TPG], ti = t % TPG, e = mp_e(p);
            const int slot = k % MR_DEPTH, use = k / MR_DEPTH;
            if (lane == 0 && !(diag == 2 && use > 0)) { /* diag 2: the first stages only, then compute alone */
                if (use > 0) ring_wait(&empty[slot], (uint32_t)(use - 1) & 1u);
                mr_fill_stage<true>(&full[slot], ring + slot * SB, blocks, scales, e, ti, N, H);
            }
            if (lane < MR_ROWS / 2) {
                const int tk = ti * (MR_ROWS / 2) + lane, yb = mp_yb(p);
                const size_t sw = (size_t)gptoss_swz(tk, I);
                const uint32_t b = *(const uint32_t *)(bias + (size_t)e * N + (size_t)tk * 2);
                const size_t a = ((size_t)mp_ya(p) * GPTOSS_TOPK + mp_sa(p)) * I + sw;
                const size_t a2 = yb >= 0 ? ((size_t)yb * GPTOSS_TOPK + mp_sb(p)) * I + sw : ~(size_t)0;
                if (k & 1) { bw1 = b; aa1 = a; ab1 = a2; }
                else { bw0 = b; aa0 = a; ab0 = a2; }
            }
            __syncwarp();
        }
        const int j = k - 2; /* the stage whose sums are due */
        if (j < 0) continue;
        mi_bar_sync(MI_BAR_SUMS + (j & 1));
        if (lane < MR_ROWS / 2) {
            const float *rs = rsum + (j & 1) * MR_CONS * 2 * MR_ROWS;
            const float bg = __uint_as_float(bwj << 16), bu = __uint_as_float(bwj & 0xffff0000u);
            for (int r = 0; r < (abj != ~(size_t)0 ? 2 : 1); r++) {
                float gs = 0.0f, us = 0.0f;
#pragma unroll
                for (int w = 0; w < MR_CONS; w++) {
                    gs += rs[w * 2 * MR_ROWS + r * MR_ROWS + 2 * lane];
                    us += rs[w * 2 * MR_ROWS + r * MR_ROWS + 2 * lane + 1];
                }
                act_sw[r ? abj : aaj] = gptoss_swiglu_value(gs + bg, us + bu, alpha, limit);
            }
        }
        if (j + 2 < nt) mi_bar_arrive(MI_BAR_FREE + (j & 1));
        __syncwarp();
    }
}

/* ROUTED's start, by the whole CTA: CTA y < n finishes row y as ROUTE 4's CTAs do (moe_route.cuh: the same sums, the
 * same picks; its partial sums in red, the split region), writes the row's ids, weights, table, logits and r and raises
 * flag y; then every CTA waits for the n flags, and the last one past puts them and the count back to 0. Ends synced. */
static __device__ __forceinline__ void mp_finish_rows(const mr_route &rt, int n, int H, float *rnorm, int32_t *sync,
                                                      uint8_t *red_buf, int warp, int lane) {
    __shared__ int32_t s_grp[gptoss_moe_groups_ints(1)], s_ids[GPTOSS_TOPK];
    __shared__ float s_w[GPTOSS_TOPK];
    const int GI = gptoss_moe_groups_ints(1);
    if ((int)blockIdx.x < n) {
        const int y = blockIdx.x;
        float(*red)[33] = (float(*)[33])red_buf;
        const float rb = warp == 0 ? gptoss_bf16_to_f32(rt.rb[lane]) : 0.0f;
        if (warp < MR_CONS) router_partials_sum8(rt.rpart + (size_t)y * rt.nparts * 33, rt.nparts, warp, lane, red);
        if (threadIdx.x < GI) s_grp[threadIdx.x] = 0; /* entries the top-4 leaves alone */
        __syncthreads();
        if (warp == 0) {
            const float r = router_finish_warp(red, rb, H, rt.eps, lane, s_ids, s_w, s_grp, rt.rl + (size_t)y * 32);
            if (lane == 0) rnorm[y] = r;
        }
        __syncthreads();
        if (threadIdx.x < GI) {
            rt.groups[(size_t)y * GI + threadIdx.x] = s_grp[threadIdx.x];
            if (threadIdx.x < GPTOSS_TOPK) {
                rt.ids[y * GPTOSS_TOPK + threadIdx.x] = s_ids[threadIdx.x];
                rt.w[y * GPTOSS_TOPK + threadIdx.x] = s_w[threadIdx.x];
            }
        }
        __threadfence(); /* every writer's stores before the flag (threadFenceReduction's pattern) */
        __syncthreads();
        if (threadIdx.x == 0) atomicExch(sync + y, 1);
    }
    if ((int)threadIdx.x < n)
        while (!mp_load_acquire(sync + threadIdx.x)) {
        }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(sync + GPTOSS_GEMV1_ROWS_MAX, 1) == (int)gridDim.x - 1) { /* the last one past */
        for (int y = 0; y < n; y++) sync[y] = 0;
        sync[GPTOSS_GEMV1_ROWS_MAX] = 0;
    }
}

/* A consumer warp's stages (TWO: the two-row form; bn in bpB's place otherwise): each as the rows launch's consumers
 * do, the row sums to the producer by the named barriers (row A's in the first 16 floats of a warp's 32, row B's after). */
template <bool TWO>
static __device__ __forceinline__ void mp_consume(uint64_t *full, uint64_t *empty, const uint8_t *ring, size_t SB, int NSC,
                                                  const uint2 *bpA, const uint2 *bpB, const float *xsA, const float *xsB,
                                                  float *rsum, int nt, int cb, int ce, int warp, int lane, int diag) {
    for (int k = 0; k < nt; k++) {
        const int slot = k % MR_DEPTH;
        if (diag != 2 || k < MR_DEPTH) ring_wait(&full[slot], (uint32_t)(k / MR_DEPTH) & 1u);
        __syncwarp(); /* mma.sync is .aligned */
        const uint8_t *st = ring + slot * SB;
        float2 v;
        if constexpr (TWO) v = mi_stage_tiled_pair(st, st + (size_t)NSC * 1024, bpA, bpB, xsA, xsB, cb, ce, lane);
        else v = mi_stage_tiled(st, st + (size_t)NSC * 1024, bpA, bpB, xsA, cb, ce, lane);
        __syncwarp();
        if (lane == 0) ring_release(&empty[slot]);
        float *rs = rsum + (k & 1) * MR_CONS * 2 * MR_ROWS;
        if (k >= 2) mi_bar_sync(MI_BAR_FREE + (k & 1));
        if ((lane & 3) == 0 || (TWO && (lane & 3) == 2)) { /* row A's gate/up pair g (lane (g, 0)), row B's (lane (g, 2)) */
            const int o = warp * 2 * MR_ROWS + ((lane & 2) ? MR_ROWS : 0) + 2 * (lane >> 2);
            rs[o] = v.x;
            rs[o + 1] = v.y;
        }
        mi_bar_arrive(MI_BAR_SUMS + (k & 1));
    }
}

/* Row y's split (ROUTED: from the residual x, normed as the router finish does; else from the router's swizzled h_sw) */
template <bool ROUTED, bool NEG>
static __device__ __forceinline__ void mp_split(const float *h_sw, const mr_route &rt, const float *rn, int y, int H,
                                                uint2 *bp, uint2 *bn, float *xs) {
    if constexpr (ROUTED)
        mi_split_x<true, false, NEG>(rt.x + (size_t)y * H, H / 32, bp, bn, xs, threadIdx.x, MR_CONS * 32, rt.norm_w, rn[y]);
    else
        mi_split_x<false, false, NEG>(h_sw + (size_t)y * H, H / 32, bp, bn, xs, threadIdx.x, MR_CONS * 32);
}

/* The kernel (see the top of this section): the experts' tiled copy, the tensor-core consumers. ROUTED: x the n rows'
 * residuals (plain layout), rt ROUTE 4's inputs and outputs (mr_route_finish), rnorm [n] each row's r (written by its
 * finisher), sync [GPTOSS_GEMV1_ROWS_MAX + 1] the flags and the count of CTAs past them (0 before and after). Else
 * ROUTE 0's: h_sw (row y at h_sw + y H) and the one-token tables groups1 as the router launch left them. */
template <bool ROUTED>
__global__ void __launch_bounds__((MR_CONS + 1) * 32, MR_CTAS) moe_gate_up_pairs_kernel(const float *h_sw,
                                                                                  const int32_t *groups1,
                                                                                  const uint8_t *blocks,
                                                                                  const uint8_t *scales,
                                                                                  const uint16_t *bias, int H, int I,
                                                                                  float alpha, float limit, float *act_sw,
                                                                                  int n, int wpair, float *rnorm,
                                                                                  int32_t *sync, int diag, mr_route rt) {
    extern __shared__ __align__(128) uint8_t mr_smem_buf[];
    __shared__ int32_t s_pass[MP_MAXP], s_sel[MP_MAXP], s_ord[MP_MAXP];
    __shared__ float s_rn[GPTOSS_GEMV1_ROWS_MAX];
    __shared__ mp_share s_sh;
    uint64_t *full = (uint64_t *)mr_smem_buf, *empty = full + MR_DEPTH;
    const int NC = H / 32, NSC = (H + 127) / 128, N = 2 * I, TPG = N / MR_ROWS;
    const size_t SB = mr_stage_bytes(NC, true);
    uint8_t *ring = mr_smem_buf + 128, *S = ring + MR_DEPTH * SB;
    const mp_layout L = mp_layout_of(NC);
    uint2 *bpA = (uint2 *)S, *bpB = (uint2 *)(S + L.bn);
    float *xsA = (float *)(S + L.xs0), *xsB = (float *)(S + L.xs1), *rsum = (float *)(S + L.rsum);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) ring_init(full, empty, MR_DEPTH, MR_CONS);
    if constexpr (ROUTED) {
        mp_finish_rows(rt, n, H, rnorm, sync, (uint8_t *)S, warp, lane);
        groups1 = rt.groups;
        if ((int)threadIdx.x < n) s_rn[threadIdx.x] = __ldcg(rnorm + threadIdx.x);
    }
    if (warp == 0) mp_plan(groups1, n, wpair, TPG, lane, s_sel, s_pass, s_ord, &s_sh);
    __syncthreads(); /* the plan, and the ring's barriers initialised */
    const mp_share sh = s_sh;
    const int nt = sh.b < sh.np * TPG ? (sh.np * TPG - sh.b + sh.G - 1) / sh.G : 0;
    if (warp == MR_CONS) {
        mp_producer(full, empty, ring, SB, blocks, scales, bias, s_ord, sh, nt, TPG, N, H, I, alpha, limit, rsum, act_sw,
                    lane, diag);
        return;
    }
    /* the group's row(s) split once (diag 3, a timing diagnostic: not split) */
    const int p = s_ord[sh.p0], ya = mp_ya(p), yb = mp_yb(p);
    const bool two = sh.np > 0 && yb >= 0;
    if (diag == 3 || nt == 0) {
    } else if (two) {
        mp_split<ROUTED, false>(h_sw, rt, s_rn, ya, H, bpA, nullptr, xsA);
        mp_split<ROUTED, false>(h_sw, rt, s_rn, yb, H, bpB, nullptr, xsB);
    } else {
        mp_split<ROUTED, true>(h_sw, rt, s_rn, ya, H, bpA, bpB, xsA); /* bpB's space holds bn */
    }
    asm volatile("bar.sync 1, %0;" ::"n"(MR_CONS * 32) : "memory");
    const int cpw = mi_chunks(NC) / MR_CONS, cb = warp * cpw, ce = diag == 1 ? cb : cb + cpw; /* diag 1: copies alone */
    if (two) mp_consume<true>(full, empty, ring, SB, NSC, bpA, bpB, xsA, xsB, rsum, nt, cb, ce, warp, lane, diag);
    else mp_consume<false>(full, empty, ring, SB, NSC, bpA, bpB, xsA, xsB, rsum, nt, cb, ce, warp, lane, diag);
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
    if (cudaFuncSetAttribute(moe_gate_up_pairs_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX) !=
            cudaSuccess ||
        cudaFuncSetAttribute(moe_gate_up_pairs_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX) !=
            cudaSuccess) {
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

/* The pairs launch's grid: what the occupancy API says the GPU holds at once (all of it resident: its CTAs wait for the
 * finishers' flags), asked once for each hidden size; 0 where it cannot say. */
static int mp_grid(int H) {
    static int h_seen = 0, grid = 0;
    if (H != h_seen) {
        int per_sm = 0;
        grid = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_gate_up_pairs_kernel<true>, (MR_CONS + 1) * 32,
                                                              mp_smem(H / 32)) == cudaSuccess
                   ? per_sm * gptoss_sm_count()
                   : 0;
        (void)cudaGetLastError();
        h_seen = H;
    }
    return grid;
}

int gptoss_moe_gate_up_pairs_grid(int H) { return mp_grid(H); }

int gptoss_moe_gate_up_pairs_ok(int H, int I) {
    /* a grid of 64 gives every group of passes a CTA at least (its cost >= 8 TPG of at most 32 x 16 TPG) */
    return g_dp4a == 2 && mr_shape_ok(H, I, true) && mp_smem(H / 32) <= MR_SMEM_MAX && mp_grid(H) >= 64;
}

cudaError_t gptoss_moe_route_gate_up_pairs(const float *x, const uint16_t *norm_w, float eps, const float *rpart,
                                           int nparts, const uint16_t *router_b, int n, const uint16_t *bias, int H, int I,
                                           float alpha, float limit, int wpair, int32_t *ids, float *w, int32_t *groups1,
                                           float *router_logits, float *rnorm, int32_t *sync, float *act_sw,
                                           cudaStream_t s, const gptoss_mxfp4_tiled *tiled) {
    if (n < 1 || n > GPTOSS_GEMV1_ROWS_MAX || !tiled || !mr_tiled_ok(H, tiled) || !gptoss_moe_gate_up_pairs_ok(H, I) ||
        nparts < 1 || ((uintptr_t)x & 15) || (H % 4) || !router_logits || !rnorm || !sync || wpair < 8 || wpair > 16)
        return cudaErrorNotSupported;
    const mr_route rt = mr_route_finish(x, norm_w, eps, rpart, nparts, router_b, ids, w, groups1, router_logits);
    moe_gate_up_pairs_kernel<true><<<mp_grid(H), (MR_CONS + 1) * 32, mp_smem(H / 32), s>>>(
        nullptr, nullptr, tiled->blocks, tiled->scales, bias, H, I, alpha, limit, act_sw, n, wpair, rnorm, sync, 0, rt);
    return cudaGetLastError();
}

cudaError_t gptoss_moe_gate_up_pairs_rows1(const float *h_sw, const int32_t *groups1, int n, int E, const uint16_t *bias,
                                           int H, int I, float alpha, float limit, int wpair, float *act_sw, cudaStream_t s,
                                           const gptoss_mxfp4_tiled *tiled) {
    if (n < 1 || n > GPTOSS_GEMV1_ROWS_MAX || E < GPTOSS_TOPK || E > 32 || !tiled || !mr_tiled_ok(H, tiled) ||
        !gptoss_moe_gate_up_pairs_ok(H, I) || ((uintptr_t)h_sw & 15) || (wpair && wpair < 8) || wpair > 16)
        return cudaErrorNotSupported;
    const mr_route none = {};
    moe_gate_up_pairs_kernel<false><<<mp_grid(H), (MR_CONS + 1) * 32, mp_smem(H / 32), s>>>(
        h_sw, groups1, tiled->blocks, tiled->scales, bias, H, I, alpha, limit, act_sw, n, wpair, nullptr, nullptr,
        g_ring_diag, none);
    return cudaGetLastError();
}
