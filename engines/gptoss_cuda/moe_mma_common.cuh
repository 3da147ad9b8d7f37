/* moe_mma_common.cuh — the device helpers the MXFP4 tensor-core expert kernels share (moe_mma.cu,
 * moe_mma_stream.cu): the exact MXFP4 -> bf16 decode into mma A fragments, the mma.sync wrapper, and the
 * staging of fp32 activations as hi/mid/lo bf16 units in the lanes' k permutation. Every kernel that
 * uses these decodes and multiplies the same values in the same order, which is what makes their
 * results bit for bit equal (docs/engine-gptoss-cuda.md). Included by .cu files only. */
#ifndef LLMR_GPTOSS_MOE_MMA_COMMON_CUH
#define LLMR_GPTOSS_MOE_MMA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/mxfp4_lut.h"

/* ------------------------------------------------------------------ MXFP4 -> bf16 */

/* The rule of tc.cu's exact dequantization for one value (fp32 product, upper half), for the scales
 * the fast path cannot take. */
static __device__ __forceinline__ uint32_t mma_fp4_slow(uint32_t nib, uint32_t s) {
    const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float v = (nib & 8u) ? -mags[nib & 7u] : mags[nib & 7u];
    const float sc = __uint_as_float(s ? s << 23 : 0x00400000u);
    const float p = s == 255 ? ldexpf(v, 128) : v * sc;
    return __float_as_uint(p) >> 16;
}

/* The fast path's scale range: 2^(s - 1) is a bf16 and every fp4 * 2^(s - 127) a normal bf16. */
#define MMA_FAST_S(s) ((s) >= 2u && (s) <= 128u)

/* 2^(s - 1) in both halves of a bf16x2 (the fast path's multiplier; any value for other s). */
static __device__ __forceinline__ __nv_bfloat162 mma_scale2(uint32_t s) {
    const uint32_t e = MMA_FAST_S(s) ? s + 126u : 127u;
    const uint32_t bits = (e << 7) | (e << 23);
    __nv_bfloat162 v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Values I and I + 4 of the 8 nibbles of w (value j in nibble j) as a bf16x2 (I low, I + 4 high),
 * times 2^(s - 127), sc2 = mma_scale2(s). Exact for MMA_FAST_S(s) only (see the header); the caller
 * takes mma_fp4_pair_any when a scale outside that range is present. */
template <int I> static __device__ __forceinline__ uint32_t mma_fp4_pair(uint32_t w, __nv_bfloat162 sc2) {
    uint32_t mag;
    if constexpr (I == 0) mag = w << 6;
    else if constexpr (I == 1) mag = w << 2;
    else if constexpr (I == 2) mag = w >> 2;
    else mag = w >> 6;
    const uint32_t sgn = (w << (12 - 4 * I)) & 0x80008000u;
    const uint32_t bits = (mag & 0x01C001C0u) | sgn;
    __nv_bfloat162 v;
    memcpy(&v, &bits, sizeof v);
    v = __hmul2(v, sc2); /* fp4 * 2^-126 * 2^(s - 1), exact */
    uint32_t out;
    memcpy(&out, &v, sizeof out);
    return out;
}

/* The same for any scale byte, out of line: the per-value rule would otherwise be inlined at every
 * one of the kernel's 128 decode sites (a 187 KB kernel that thrashed the instruction cache: measured
 * 10x slower on the H200). */
static __device__ __noinline__ uint32_t mma_fp4_pair_any(uint32_t w, int I, uint32_t s) {
    if (MMA_FAST_S(s)) {
        const __nv_bfloat162 sc2 = mma_scale2(s);
        return I == 0 ? mma_fp4_pair<0>(w, sc2) : I == 1 ? mma_fp4_pair<1>(w, sc2) : I == 2 ? mma_fp4_pair<2>(w, sc2)
                                                                                          : mma_fp4_pair<3>(w, sc2);
    }
    return mma_fp4_slow((w >> (4 * I)) & 15u, s) | (mma_fp4_slow((w >> (4 * I + 16)) & 15u, s) << 16);
}

/* ------------------------------------------------------------------ MXFP4 -> fp16 (the F16 form)
 *
 * The streaming kernel's F16 form (gptoss_mxfp4_mma_stream_f16) decodes a whole 32-bit word of 8 nibbles with the
 * byte-permute table of mxfp4_lut.h (10 instructions for 8 exact fp16 values) and scales each pair by the block's
 * 2^(s - 127 - shift_e) with one HMUL2 (shift_e: the expert's fp16 shift, tc.h gptoss_mxfp4_f16_shifts, so the
 * largest value is 6 x 2^13): 14 instructions per 8 weights where the bf16 decode takes 20. The products are exact
 * down to 2^-24 (blocks 37 binades below the expert's largest, whose values round there); the epilogue multiplies
 * by 2^shift_e again. */

/* 2^e in both halves of an fp16 pair: normal from 2^-14, subnormal down to 2^-24, 0 below, at most 2^15. */
static __device__ __forceinline__ uint32_t mma_f16_scale2(int e) {
    e = e > 15 ? 15 : e;
    const uint32_t h = e >= -14 ? (uint32_t)(e + 15) << 10 : e >= -24 ? 1u << (e + 24) : 0u;
    return h | (h << 16);
}

static __device__ __forceinline__ uint32_t mma_hmul2_bits(uint32_t a, uint32_t b) {
    __half2 x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    x = __hmul2(x, y);
    uint32_t out;
    memcpy(&out, &x, sizeof out);
    return out;
}

/* ------------------------------------------------------------------ mma and activation staging */

static __device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The F16 form's staged unit of 4 values v = x[k0 .. k0 + 3] of a token row (k0 % 4 == 0) as two fp16 parts,
 * hi = fp16(x) and lo = fp16(x - hi) (x - hi is exact in fp32; 22 significant bits together, absolute 2^-25 below
 * fp16's normal range): .x = hi (k0, k0 + 1), .y = hi (k0 + 2, k0 + 3), .z .w the same for lo, the order of the B
 * registers (b0: k0, k0 + 1; b1: k0 + 2, k0 + 3). The caller keeps |x| below 65,504 (the engine checks its bound at
 * load). */
static __device__ __forceinline__ uint4 mma_f16_unit(const float v[4]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const __half2 hi = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        const float2 hf = __half22float2(hi);
        const __half2 lo = __floats2half2_rn(v[2 * i] - hf.x, v[2 * i + 1] - hf.y);
        memcpy(&w[i], &hi, 4);
        memcpy(&w[2 + i], &lo, 4);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The unit of x[k0 .. k0 + 3] of a token row (swz: the row in gptoss_swz order) into *u. */
static __device__ __forceinline__ void mma_stage_unit_f16(const float *row, int swz, int K, int k0, uint4 *u) {
    float v[4];
    if (swz) {
        const float4 f = *(const float4 *)(row + ((k0 & 31) >> 2) * (K / 8) + (k0 >> 5) * 4);
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else {
        const float2 p = *(const float2 *)(row + k0), q = *(const float2 *)(row + k0 + 2);
        v[0] = p.x; v[1] = p.y; v[2] = q.x; v[3] = q.y;
    }
    *u = mma_f16_unit(v);
}

/* The first k of unit u of a pre-staged F16 row (gptoss_mxfp4_stage_f16; the streaming kernel's unit order: super-chunk
 * u / 32, lane u % 4, step (u / 4) % 8, whose two k16 halves take 4 consecutive values each). */
static __host__ __device__ __forceinline__ int mma_f16_unit_k(int u) {
    return 128 * (u >> 5) + 32 * (u & 3) + 8 * ((u >> 3) & 3) + 4 * ((u >> 2) & 1);
}


static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Physical 16-byte unit of logical unit u (= 32 s + 8 t + j for super-chunk s, lane t, step j) in a
 * staged token row: j ^ 2t in the low bits puts the 4 lanes t of one token on 4 distinct bank groups. */
static __device__ __forceinline__ int mma_phys(int u) { return u ^ (((u >> 3) & 3) << 1); }

static __device__ __forceinline__ uint32_t mma_pack(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    uint32_t out;
    memcpy(&out, &v, sizeof out);
    return out;
}

/* Staged unit of (token i, logical unit u): the 4 k values of step j = u & 7... in the order the A
 * fragment holds them: x[k0 + 2h], x[k0 + 2h + 4] (b0 b1) and x[k0 + 2h + 1], x[k0 + 2h + 5] (b2 b3),
 * h = u & 1, k0 = 8 (u >> 1), as hi (.x .y) then mid (.z .w) in *hm and lo (.x .y) in *lo. */
static __device__ __forceinline__ void mma_stage_unit(const float *row, int swz, int K, int k, uint4 *hm, uint2 *lo) {
    float2 p, q; /* (k, k + 1), (k + 4, k + 5) */
    if (swz) {
        const int K8 = K / 8;
        p = *(const float2 *)(row + ((k & 31) >> 2) * K8 + (k >> 5) * 4 + (k & 3));
        q = *(const float2 *)(row + (((k + 4) & 31) >> 2) * K8 + ((k + 4) >> 5) * 4 + ((k + 4) & 3));
    } else {
        p = *(const float2 *)(row + k);
        q = *(const float2 *)(row + k + 4);
    }
    const float x[4] = {p.x, q.x, p.y, q.y}; /* the order of the two B registers: (k, k+4), (k+1, k+5) */
    float h[4], m[4], l[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        h[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
        const float r = x[i] - h[i]; /* exact */
        m[i] = __bfloat162float(__float2bfloat16_rn(r));
        l[i] = r - m[i]; /* exact; rounded to bf16 by mma_pack */
    }
    hm->x = mma_pack(h[0], h[1]);
    hm->y = mma_pack(h[2], h[3]);
    hm->z = mma_pack(m[0], m[1]);
    hm->w = mma_pack(m[2], m[3]);
    lo->x = mma_pack(l[0], l[1]);
    lo->y = mma_pack(l[2], l[3]);
}

/* gpt-oss's clamped SwiGLU of one gate / up pair (gptoss_swiglu's arithmetic), for the gate_up epilogues. */
static __device__ __forceinline__ float mma_swiglu(float gv, float uv, float alpha, float limit) {
    return gptoss_swiglu_value(gv, uv, alpha, limit);
}

/* ------------------------------------------------------------------ work items and the tiled weights */

/* The (expert, token tile) of item y: walk the experts' tile counts ceil(n_e / tile) in order, n_e = counts[e] (+
 * lo[e] where lo is given: an expert's extra rows, tc.cu's precise rows) (a warp scan, 32 experts per step). Returns 0
 * when y is past the last tile. */
static __device__ __forceinline__ int mma_tile_item(const int32_t *counts, const int32_t *lo, int E, int tile, int y,
                                                    int lane, int *e_out, int *tt_out) {
    int base = 0;
    for (int e0 = 0; e0 < E; e0 += 32) {
        const int ee = e0 + lane;
        const int n = ee < E ? (counts[ee] + (lo ? lo[ee] : 0) + tile - 1) / tile : 0;
        int incl = n;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += v;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, y >= base + incl - n && y < base + incl);
        if (hit) {
            const int src = __ffs(hit) - 1;
            *e_out = e0 + src;
            *tt_out = y - base - __shfl_sync(0xffffffffu, incl - n, src);
            return 1;
        }
        base += __shfl_sync(0xffffffffu, incl, 31);
    }
    return 0;
}

/* A lane's weights of its next super-chunk from the tiled copy (gptoss_mxfp4_tile): its two units (at tw[r]; the two
 * are a 32-byte pair, gptoss_mxfp4_tiled_slot) and the 16-bit word of their two scale bytes (at *ts) as it came (*sv:
 * mma_tiled_scales takes the bytes apart when the super-chunk is used), pads included (zeros, 127), so no bound checks;
 * then tw and *ts step to the super-chunk after (64 units, 32 words). once: evict-first (no other CTA reads them).
 * Why the word stays whole: taking its bytes apart here made the warp wait for the load at once, a memory latency a
 * super-chunk (session 42: the 8-row launch's hottest stall, 15% of its samples). Why the pointers walk: a lane loads
 * its super-chunks in order, and an index c cost ~20 instructions of 64-bit address arithmetic a super-chunk. */
static __device__ __forceinline__ void mma_load_tiled(const uint4 *tw[2], const uint16_t **ts, bool once, uint4 q[2],
                                                      uint32_t *sv) {
    q[0] = once ? __ldcs(tw[0]) : __ldg(tw[0]);
    q[1] = once ? __ldcs(tw[1]) : __ldg(tw[1]);
    *sv = __ldg(*ts);
    tw[0] += 64;
    tw[1] += 64;
    *ts += 32;
}

/* The scale bytes of rows r = 0, 1 (s[r]) from mma_load_tiled's word v: the selector ssel for r = 0, ssel ^ 1 for
 * r = 1 (mma_tiled_lane). */
static __device__ __forceinline__ void mma_tiled_scales(uint32_t v, uint32_t ssel, uint32_t s[2]) {
    s[0] = __byte_perm(v, 0u, ssel);
    s[1] = __byte_perm(v, 0u, ssel ^ 1u);
}

/* The first of a lane's units of m16 tile i of expert e in a tiled copy of N x K experts (tw, *ts at super-chunk 0 and
 * *ssel, as mma_load_tiled and mma_tiled_scales take them). */
static __device__ __forceinline__ void mma_tiled_lane(gptoss_mxfp4_tiled tiled, int e, int i, int N, int K, int lane,
                                                      const uint4 *tw[2], const uint16_t **ts, uint32_t *ssel) {
    const size_t u0 = gptoss_mxfp4_tiled_first(e, i, N, K) + gptoss_mxfp4_tiled_slot(lane, 0);
    tw[0] = (const uint4 *)tiled.blocks + u0;
    tw[1] = (const uint4 *)tiled.blocks + (u0 ^ 1);
    *ts = (const uint16_t *)tiled.scales + u0 / 2;
    *ssel = (u0 & 1) ? 0x4441u : 0x4440u; /* byte r = 0 of the pair, zero-extended */
}

/* The e5m2 copy's (gptoss_mxfp4_tile_e5) two words e0, e1 of a row as the fp16 pairs h[0..3] mxfp4_lut_halves gives for
 * the MXFP4 word they copy: each byte is an fp16 value's high byte, and the copy stores each 4 as [v0, v2, v1, v3]. */
static __device__ __forceinline__ void mma_e5_halves(uint32_t e0, uint32_t e1, uint32_t h[4]) {
    constexpr uint32_t M = 0xFF00FF00u;
    h[0] = (e0 << 8) & M;
    h[1] = e0 & M;
    h[2] = (e1 << 8) & M;
    h[3] = e1 & M;
}

/* A lane's two rows' e5m2 bytes (gptoss_mxfp4_tile_e5) of super-chunk c into q (row r, half h): wp = the copy + 2 x the
 * tile's first unit + the lane (gptoss_mxfp4_e5_at: each (r, h) of the warp is 512 contiguous bytes; rows past N and
 * blocks past K hold zeros in the copy). once: evict-first. */
static __device__ __forceinline__ void mma_load_e5(const uint4 *wp, int c, bool once, uint4 q[2][2]) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 *p = wp + 128 * c + 32 * (2 * r + h);
            q[r][h] = once ? __ldcs(p) : __ldg(p);
        }
}

#endif
