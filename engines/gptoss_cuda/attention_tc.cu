/* attention_tc.cu — prefill attention with sinks on tensor cores (flash-attention style), fp32-level.
 *
 * Same contract as gptoss_attention (kernels.h); declared in tc.h. The SIMT kernel of attention.cu is
 * its twin (and stays the decode path). Two kernels: attention_tc2_kernel further down (the default, one
 * KV head and the query heads sharing it per block), and attention_tc_kernel here (one query head per
 * block; where the heads per KV head do not divide 8, and for comparisons). The per-head kernel:
 *
 * K/V are read through the block table (gptoss_kv_k / gptoss_kv_v, table row 0) only while a tile is
 * staged, so the paged layout costs one table lookup per staged row.
 * Layout: a block of ATC_WARPS warps takes ATC_BQ = 16 * ATC_WARPS consecutive queries of one head;
 * warp w owns 16 query rows. Keys are walked in tiles of ATC_BK = 64 from the block's first visible
 * key (0, or the window's start) to its last query's position. Each tile of K and V (fp32 in the
 * cache) is split once into bf16 hi + lo parts in shared memory (V transposed, so the PV operand is a
 * 32-bit load). Per tile and warp, with mma.sync m16n8k16 (bf16 in, fp32 accumulate):
 *   S = Qh·Kh + Qh·Kl + Ql·Kh           (Q pre-scaled by 1/8, exact; the dropped Ql·Kl is ~2^-18)
 *   online softmax on the S fragments (running max and sum per row, masked keys at -inf),
 *   O += Ph·Vh + Ph·Vl + Pl·Vh          (P = exp(S - max) in [0, 1], split the same way).
 * At the end the sink joins the denominator as exp(sink - M) (no value vector), as in attention.cu.
 * Tiles a warp cannot see (past its last row's position, or before its first row's window) are
 * skipped by that warp (it still joins the block's barriers). */
#include <cuda_bf16.h>
#include <stdlib.h>
#include <string.h>

#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/tc.h"

#define ATC_WARPS 4
#define ATC_BQ (16 * ATC_WARPS)
#define ATC_BK 64
#define ATC_LD (64 + 8) /* shared row stride in bf16: 36 words, conflict-free fragment loads */

static __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* (x0, x1) -> packed bf16 hi parts (x0 in the low half) and the packed lo parts of the residuals. */
static __device__ __forceinline__ void split2(float x0, float x1, uint32_t *hi, uint32_t *lo) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - __low2float(h), x1 - __high2float(h));
    *hi = *(const uint32_t *)&h;
    *lo = *(const uint32_t *)&l;
}

/* Four consecutive values as packed bf16 hi parts and lo parts: one 8-byte store of each per row half. */
static __device__ __forceinline__ void split4(float4 f, uint2 *hi, uint2 *lo) {
    uint32_t h01, l01, h23, l23;
    split2(f.x, f.y, &h01, &l01);
    split2(f.z, f.w, &h23, &l23);
    *hi = make_uint2(h01, h23);
    *lo = make_uint2(l01, l23);
}

static __device__ __forceinline__ uint16_t bf_hi(float x, float *rest) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    *rest = x - __bfloat162float(h);
    return __bfloat16_as_ushort(h);
}

/* Stages the K and V tile of keys kt.. (rows past k_hi as zeros) as bf16 hi/lo into shared memory.
 * packed (default): K rows as 8-byte stores of 4 packed dims (16 threads cover a row's 256 bytes:
 * coalesced loads, conflict-free stores); V with a thread per key pair and 4 dims, so the transposed
 * stores are 32-bit words of two keys and a warp's 32 stores hit 32 consecutive banks: 48 shared
 * stores per thread and tile instead of 256 16-bit stores, most of them 8- to 16-way bank conflicts
 * (LLMR_GPTOSS_ATC_STAGE=0: that original staging, kept for comparison). Same values either way. */
template <bool PACKED>
static __device__ __forceinline__ void atc_stage(const gptoss_kv &kv, int kvh, int kt, int k_hi,
                                                 uint16_t (*ks)[ATC_BK][ATC_LD], uint16_t (*vt)[64][ATC_LD]) {
    const int D = GPTOSS_HEAD_DIM;
    if constexpr (!PACKED) {
        for (int i = threadIdx.x; i < ATC_BK * 16; i += ATC_WARPS * 32) {
            const int kr = i >> 4, c4 = (i & 15) * 4, j = kt + kr;
            float4 kf = make_float4(0.f, 0.f, 0.f, 0.f), vv = make_float4(0.f, 0.f, 0.f, 0.f);
            if (j <= k_hi) {
                kf = *(const float4 *)(gptoss_kv_k(kv, 0, j) + kvh * D + c4); /* through the block table */
                vv = *(const float4 *)(gptoss_kv_v(kv, 0, j) + kvh * D + c4);
            }
            const float kx[4] = {kf.x, kf.y, kf.z, kf.w}, vx[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float r;
                ks[0][kr][c4 + e] = bf_hi(kx[e], &r);
                ks[1][kr][c4 + e] = __bfloat16_as_ushort(__float2bfloat16_rn(r));
                vt[0][c4 + e][kr] = bf_hi(vx[e], &r);
                vt[1][c4 + e][kr] = __bfloat16_as_ushort(__float2bfloat16_rn(r));
            }
        }
    } else {
        for (int i = threadIdx.x; i < ATC_BK * 16; i += ATC_WARPS * 32) {
            const int kr = i >> 4, c4 = (i & 15) * 4, j = kt + kr;
            float4 kf = make_float4(0.f, 0.f, 0.f, 0.f);
            if (j <= k_hi) kf = *(const float4 *)(gptoss_kv_k(kv, 0, j) + kvh * D + c4); /* through the block table */
            uint2 hi, lo;
            split4(kf, &hi, &lo);
            *(uint2 *)&ks[0][kr][c4] = hi;
            *(uint2 *)&ks[1][kr][c4] = lo;
        }
        for (int i = threadIdx.x; i < ATC_BK / 2 * 16; i += ATC_WARPS * 32) {
            const int kp = i & 31, c4 = (i >> 5) * 4, j = kt + 2 * kp;
            float4 v0 = make_float4(0.f, 0.f, 0.f, 0.f), v1 = v0;
            if (j <= k_hi) v0 = *(const float4 *)(gptoss_kv_v(kv, 0, j) + kvh * D + c4);
            if (j + 1 <= k_hi) v1 = *(const float4 *)(gptoss_kv_v(kv, 0, j + 1) + kvh * D + c4);
            const float a[4] = {v0.x, v0.y, v0.z, v0.w}, b[4] = {v1.x, v1.y, v1.z, v1.w};
    #pragma unroll
            for (int e = 0; e < 4; e++) {
                uint32_t hi, lo;
                split2(a[e], b[e], &hi, &lo); /* key 2kp in the low half */
                *(uint32_t *)&vt[0][c4 + e][2 * kp] = hi;
                *(uint32_t *)&vt[1][c4 + e][2 * kp] = lo;
            }
        }
    }
}

/* A warp's Q fragments for rows wq0 .. wq0 + 15 of one head (q_h: the head's first column, rows qd floats
 * apart), pre-scaled by 1/8 (exact) and split into hi and lo, for the 4 k-steps of 16 dims; rows past T are
 * zeros. Fragment registers: a0 (g, c), a1 (g+8, c), a2 (g, c+8), a3 (g+8, c+8). */
static __device__ __forceinline__ void atc_load_q(const float *q_h, int qd, int wq0, int g, int t4, int T,
                                                  uint32_t qh[4][4], uint32_t ql[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int row = wq0 + g + ((r & 1) ? 8 : 0), col = 16 * kk + 2 * t4 + ((r & 2) ? 8 : 0);
            float x0 = 0.0f, x1 = 0.0f;
            if (row < T) {
                const float2 v = *(const float2 *)(q_h + (size_t)row * qd + col);
                x0 = v.x * 0.125f;
                x1 = v.y * 0.125f;
            }
            split2(x0, x1, &qh[kk][r], &ql[kk][r]);
        }
}

/* What a warp of 16 query rows from wq0 (chunk rows; the chunk starts at position pos0) can see: keys *w_lo ..
 * *w_hi (causal, and the window's start when window > 0); and the positions of this thread's two rows (g, g + 8). */
static __device__ __forceinline__ void atc_warp_rows(int wq0, int pos0, int T, int window, int g, int *w_lo, int *w_hi,
                                                     int rpos[2]) {
    *w_hi = pos0 + min(wq0 + 15, T - 1);
    *w_lo = window > 0 ? max(0, pos0 + wq0 - window + 1) : 0;
    rpos[0] = pos0 + wq0 + g;
    rpos[1] = pos0 + wq0 + g + 8;
}

/* The output accumulators and the online softmax's row maxima and sums before the first key tile. */
static __device__ __forceinline__ void atc_acc_init(float (*o)[4], float m_r[2], float l_r[2]) {
#pragma unroll
    for (int n = 0; n < 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    m_r[0] = m_r[1] = -INFINITY;
    l_r[0] = l_r[1] = 0.0f;
}

/* The A fragment of P for one k-step of 16 keys, split into hi and lo: the S / P accumulators of the n-tiles
 * of its keys 0-7 (a) and 8-15 (b), rows g and g + 8. */
static __device__ __forceinline__ void atc_p_frag(const float a[4], const float b[4], uint32_t ph[4], uint32_t pl[4]) {
    split2(a[0], a[1], &ph[0], &pl[0]);
    split2(a[2], a[3], &ph[1], &pl[1]);
    split2(b[0], b[1], &ph[2], &pl[2]);
    split2(b[2], b[3], &ph[3], &pl[3]);
}

/* exp for the softmax: expf in the per-head kernel, __expf in the GQA-block one (see its comment). */
template <bool FAST> static __device__ __forceinline__ float atc_exp(float x) { return FAST ? __expf(x) : expf(x); }

/* The online softmax over NT n-tiles of S (s[n][0..3], keys k0 + 8n + 2 t4 + e) for this thread's two rows
 * (g and g + 8 at positions rpos; a row's 4 threads share a quad): masks keys past the row or before its
 * window at -inf, updates the running max m_r and sum l_r, rescales the 8 output n-tiles o, and leaves
 * P = exp(S - max) in s (0 where masked, all 0 while a row sees nothing yet). */
template <int NT, bool FAST>
static __device__ __forceinline__ void atc_online_softmax(float (*s)[4], int k0, const int rpos[2], int window, int t4,
                                                          float m_r[2], float l_r[2], float (*o)[4]) {
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int pos = rpos[hr], lo = window > 0 ? pos - window + 1 : 0;
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = k0 + 8 * n + 2 * t4 + e;
                float &v = s[n][2 * hr + e];
                if (j > pos || j < lo) v = -INFINITY;
                mx = fmaxf(mx, v);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m_r[hr], mx);
        if (mn == -INFINITY) { /* nothing visible yet for this row */
#pragma unroll
            for (int n = 0; n < NT; n++) s[n][2 * hr] = s[n][2 * hr + 1] = 0.0f;
            continue;
        }
        const float f = atc_exp<FAST>(m_r[hr] - mn); /* 0 when m_r was -inf */
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float &v = s[n][2 * hr + e];
                v = v == -INFINITY ? 0.0f : atc_exp<FAST>(v - mn);
                sum += v;
            }
        l_r[hr] = l_r[hr] * f + sum;
        m_r[hr] = mn;
#pragma unroll
        for (int n = 0; n < 8; n++) { o[n][2 * hr] *= f; o[n][2 * hr + 1] *= f; }
    }
}

/* The end of a warp's rows: the sink joins the denominator as exp(sink - M) (no value vector), and rows
 * wq0 + g (+ 8) below T are written to out_h (the head's first column; rows qd floats apart). */
template <bool FAST>
static __device__ __forceinline__ void atc_write_out(float (*o)[4], const float m_r[2], const float l_r[2], float sink,
                                                     int wq0, int g, int t4, int T, float *out_h, int qd) {
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float l = l_r[hr];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float M = fmaxf(m_r[hr], sink);
        const float f = m_r[hr] == -INFINITY ? 0.0f : atc_exp<FAST>(m_r[hr] - M);
        const float den = l * f + atc_exp<FAST>(sink - M);
        const int row = wq0 + g + 8 * hr;
        if (row >= T) continue;
        float *orow = out_h + (size_t)row * qd;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            float2 v;
            v.x = o[n][2 * hr] * f / den;
            v.y = o[n][2 * hr + 1] * f / den;
            *(float2 *)(orow + 8 * n + 2 * t4) = v;
        }
    }
}

/* The packed-staging kernel (the default) is held to 128 registers so 4 blocks fit an SM instead of 3
 * (165 registers otherwise): it spills ~236 bytes but runs a 4k prompt's attention in 38.8 ms instead of
 * 40.5-40.8 on the H200; at 96 registers (5 blocks) the spills make it 45 ms (docs/performance.md,
 * "Session 8"). The original staging keeps its registers, for comparisons. */
#define ATC_MIN_BLOCKS 4
template <bool PACKED>
__global__ void __launch_bounds__(ATC_WARPS * 32, PACKED ? ATC_MIN_BLOCKS : 1) attention_tc_kernel(const float *q, gptoss_kv kv,
                                                                      const uint16_t *sinks, int T,
                                                                      int pos0, int n_heads, int n_kv, int window,
                                                                      float *out) {
    __shared__ __align__(16) uint16_t ks[2][ATC_BK][ATC_LD]; /* [hi/lo][key][dim] */
    __shared__ __align__(16) uint16_t vt[2][64][ATC_LD];     /* [hi/lo][dim][key] */
    const int D = GPTOSS_HEAD_DIM, qd = n_heads * D;
    const int h = blockIdx.y, kvh = h / (n_heads / n_kv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    /* packed: the last (longest, causal) query blocks of each head first, so the short ones fill the tail */
    const int q0 = (PACKED ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * ATC_BQ; /* block's first query (chunk row) */
    const int qlast = min(q0 + ATC_BQ, T) - 1;
    const int k_hi = pos0 + qlast;                            /* last key any row of the block sees */
    const int k_lo = window > 0 ? max(0, pos0 + q0 - window + 1) : 0;
    const int wq0 = q0 + 16 * warp;                           /* warp's first row */
    int w_lo, w_hi, rpos[2];
    atc_warp_rows(wq0, pos0, T, window, g, &w_lo, &w_hi, rpos);

    /* Q fragments (pre-scaled by 1/8, exact), hi and lo, for the 4 k-steps of 16 dims. */
    uint32_t qh[4][4], ql[4][4];
    atc_load_q(q + (size_t)h * D, qd, wq0, g, t4, T, qh, ql);
    float o[8][4], m_r[2], l_r[2];
    atc_acc_init(o, m_r, l_r);

    for (int kt = k_lo; kt <= k_hi; kt += ATC_BK) {
        __syncthreads(); /* the previous tile is consumed */
        atc_stage<PACKED>(kv, kvh, kt, k_hi, ks, vt); /* K and V tile: 64 keys x 64 dims, split into hi/lo */
        __syncthreads();
        if (kt > w_hi || kt + ATC_BK - 1 < w_lo) continue; /* nothing this warp can see */

        /* S = Q K^T for 8 n-tiles of 8 keys. */
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const int key = 8 * n + g;
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                const int c = 16 * kk + 2 * t4;
                const uint32_t bh0 = *(const uint32_t *)&ks[0][key][c], bh1 = *(const uint32_t *)&ks[0][key][c + 8];
                const uint32_t bl0 = *(const uint32_t *)&ks[1][key][c], bl1 = *(const uint32_t *)&ks[1][key][c + 8];
                mma16816(s[n], qh[kk], bh0, bh1);
                mma16816(s[n], qh[kk], bl0, bl1);
                mma16816(s[n], ql[kk], bh0, bh1);
            }
        }
        atc_online_softmax<8, false>(s, kt, rpos, window, t4, m_r, l_r, o);
        /* O += P V: k-steps of 16 keys; the S fragments of n-tiles 2kk, 2kk+1 are the A fragment. */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t ph[4], pl[4];
            atc_p_frag(s[2 * kk], s[2 * kk + 1], ph, pl);
            const int c = 16 * kk + 2 * t4;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int dim = 8 * n + g;
                const uint32_t bh0 = *(const uint32_t *)&vt[0][dim][c], bh1 = *(const uint32_t *)&vt[0][dim][c + 8];
                const uint32_t bl0 = *(const uint32_t *)&vt[1][dim][c], bl1 = *(const uint32_t *)&vt[1][dim][c + 8];
                mma16816(o[n], ph, bh0, bh1);
                mma16816(o[n], ph, bl0, bl1);
                mma16816(o[n], pl, bh0, bh1);
            }
        }
    }
    atc_write_out<false>(o, m_r, l_r, gptoss_bf16_to_f32(sinks[h]), wq0, g, t4, T, out + (size_t)h * GPTOSS_HEAD_DIM, qd);
}

/* ---------------------------------------------------------------- the GQA-block kernel (the default)
 *
 * Same arithmetic per query row as attention_tc_kernel (three hi/lo products for S and for PV, online
 * softmax, sink at the end), organized for where that kernel's time went: each block staged and split its
 * K/V tile for one query head, and waited for the tile's global loads between two barriers.
 * Layout: a block of WARPS warps (16, or 8) takes one KV head and the G = n_heads / n_kv query heads sharing
 * it (G divides 8): warp w owns head kvh * G + w % G and query rows q0 + 16 * (w / G) .. + 15, so a block
 * covers 16 * WARPS / G consecutive queries and each staged K/V tile serves WARPS warps (32 queries x 8
 * heads on 20b) instead of 4. Per key tile of 64:
 *   PRESPLIT (the default): the NEXT tile's hi / lo rows, split once per layer by atc_kv_split_kernel, go
 *   into a 2-stage shared ring with cp.async (zeros past the last key), so their latency hides behind this
 *   tile's work; else the next tile's raw fp32 rows go into such a ring through the block table, and this
 *   tile's rows are split into bf16 hi + lo by the block; K and V both key-major either way (V's PV operand
 *   comes from ldmatrix.trans, so no transposed stores);
 *   S and PV fragments are loaded with ldmatrix.x4 (one instruction per four 8x8 matrices).
 * exp is __expf (ex2.approx of x * log2 e: ~2 ulp plus the product's rounding, ~1e-6 relative at the
 * arguments that matter) instead of expf. */
/* Shared memory: splitting in the kernel, a 2-stage ring of raw fp32 rows and one stage of hi / lo rows;
 * from the pre-split scratch (PRESPLIT), a 2-stage ring of hi / lo rows. */
template <bool PRESPLIT> struct at2_smem {
    float raw[2][2][ATC_BK][64];        /* [ring stage][K / V][key][dim], fp32 as in the cache */
    uint16_t ks[1][2][ATC_BK][ATC_LD];  /* [stage][hi / lo][key][dim] */
    uint16_t vs[1][2][ATC_BK][ATC_LD];
};
template <> struct at2_smem<true> {
    uint16_t ks[2][2][ATC_BK][ATC_LD];  /* [ring stage][hi / lo][key][dim] */
    uint16_t vs[2][2][ATC_BK][ATC_LD];
};

static __device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros (src is not read) */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes) : "memory");
}

/* ldmatrix at shared address a (bytes). The callers pass a per-lane base laundered once per tile
 * (at2_launder) plus constants, so each address is one add the assembler folds into the instruction;
 * with plain pointers the compiler hoisted all 32 addresses out of the key loop and spilled. */
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* The same value, opaque to the compiler's loop-invariant motion. */
static __device__ __forceinline__ uint32_t at2_launder(uint32_t x) {
    uint32_t y;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* Queues the raw K and V rows of keys kt .. kt + 63 of KV head kvh into raw[K / V] (zeros past k_hi). */
template <int WARPS>
static __device__ __forceinline__ void at2_issue(const gptoss_kv &kv, int kvh, int kt, int k_hi, float (*raw)[ATC_BK][64]) {
#pragma unroll 1
    for (int r = 0; r < 2 * ATC_BK * 16 / (WARPS * 32); r++) { /* 16-byte pieces: 16 per row, K rows then V rows */
        const int i = threadIdx.x + r * WARPS * 32;
        const int which = i / (ATC_BK * 16), kr = (i >> 4) % ATC_BK, c4 = (i & 15) * 4, j = kt + kr;
        const float *src = kv.pool;
        int bytes = 0;
        if (j <= k_hi) {
            src = (which ? gptoss_kv_v(kv, 0, j) : gptoss_kv_k(kv, 0, j)) + kvh * GPTOSS_HEAD_DIM + c4;
            bytes = 16;
        }
        cp_async16(&raw[which][kr][c4], src, bytes);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* This tile's raw rows as bf16 hi + lo, K into ks and V into vs, both [part][key][dim]. */
template <int WARPS>
static __device__ __forceinline__ void at2_split(const float (*raw)[ATC_BK][64], uint16_t (*ks)[ATC_BK][ATC_LD],
                                                 uint16_t (*vs)[ATC_BK][ATC_LD]) {
#pragma unroll 1
    for (int r = 0; r < 2 * ATC_BK * 16 / (WARPS * 32); r++) {
        const int i = threadIdx.x + r * WARPS * 32;
        const int which = i / (ATC_BK * 16), kr = (i >> 4) % ATC_BK, c4 = (i & 15) * 4;
        uint2 hi, lo;
        split4(*(const float4 *)&raw[which][kr][c4], &hi, &lo);
        uint16_t(*dst)[ATC_BK][ATC_LD] = which ? vs : ks;
        *(uint2 *)&dst[0][kr][c4] = hi;
        *(uint2 *)&dst[1][kr][c4] = lo;
    }
}

/* Queues the pre-split hi / lo rows of keys kt .. kt + 63 of KV head kvh (scratch kvs: [kvh][key - key0][K hi,
 * K lo, V hi, V lo][64] bf16, kvs_keys keys per KV head) into one ring stage (zeros past k_hi). */
template <int WARPS>
static __device__ __forceinline__ void at2_issue_split(const uint16_t *kvs, int kvs_keys, int key0, int kvh, int kt,
                                                       int k_hi, uint16_t (*ks)[ATC_BK][ATC_LD],
                                                       uint16_t (*vs)[ATC_BK][ATC_LD]) {
#pragma unroll
    for (int r = 0; r < 4 * ATC_BK * 8 / (WARPS * 32); r++) { /* 16-byte pieces: 8 per row, 4 rows per key */
        const int i = threadIdx.x + r * WARPS * 32;
        const int which = i / (ATC_BK * 8), kr = (i >> 3) % ATC_BK, c8 = (i & 7) * 8, j = kt + kr;
        const uint16_t *src = kvs;
        int bytes = 0;
        if (j <= k_hi) {
            src = kvs + (((size_t)kvh * kvs_keys + (j - key0)) * 4 + which) * GPTOSS_HEAD_DIM + c8;
            bytes = 16;
        }
        cp_async16(which < 2 ? &ks[which][kr][c8] : &vs[which - 2][kr][c8], src, bytes);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* The pre-pass of the pre-split path: keys key0 + blockIdx.x of every KV head, K and V split into bf16 hi + lo
 * (split2, as at2_split) into kvs [kvh][key - key0][K hi, K lo, V hi, V lo][64]. */
__global__ void atc_kv_split_kernel(gptoss_kv kv, int key0, int n_kv, int kvs_keys, uint16_t *kvs) {
    const int kr = blockIdx.x, j = key0 + kr;
    for (int i = threadIdx.x; i < 2 * n_kv * 16; i += blockDim.x) {
        const int which = i / (n_kv * 16), g = (i >> 4) % n_kv, c4 = (i & 15) * 4;
        const float4 f = *(const float4 *)((which ? gptoss_kv_v(kv, 0, j) : gptoss_kv_k(kv, 0, j)) + g * GPTOSS_HEAD_DIM + c4);
        uint2 hi, lo;
        split4(f, &hi, &lo);
        uint16_t *dst = kvs + (((size_t)g * kvs_keys + kr) * 4 + 2 * which) * GPTOSS_HEAD_DIM + c4;
        *(uint2 *)dst = hi;
        *(uint2 *)(dst + GPTOSS_HEAD_DIM) = lo;
    }
}

/* One warp's work on one staged 64-key tile (ka / va: this lane's ldmatrix rows in the stage's ks / vs,
 * laundered): in two halves of 32 keys, each with its own softmax update (S of one half is 16 registers;
 * all 64 keys at once spilled at the 128 registers of 16 warps per SM). */
static __device__ __forceinline__ void at2_tile(uint32_t ka, uint32_t va, int kt, const uint32_t qh[4][4],
                                                const uint32_t ql[4][4], const int rpos[2], int window, int t4,
                                                float m_r[2], float l_r[2], float (*o)[4]) {
    const uint32_t PART = ATC_BK * ATC_LD * 2, ROW = ATC_LD * 2; /* bytes: hi -> lo, key -> key + 1 */
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int kb = 32 * half; /* the half's first key in the tile */
        /* S = Q K^T for 4 n-tiles of 8 keys: matrices (keys kb + 8n.., dims 32kq + 8m) give b0, b1 of
         * k-steps 2kq, 2kq+1 */
        float s[4][4];
#pragma unroll
        for (int n = 0; n < 4; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kq = 0; kq < 2; kq++) {
                uint32_t bh[4], bl[4];
                const uint32_t a = ka + (kb + 8 * n) * ROW + 64 * kq; /* ks[0][kb + 8n + lr][32kq + 8lm] */
                ldsm_x4(bh, a);
                ldsm_x4(bl, a + PART);
#pragma unroll
                for (int k2 = 0; k2 < 2; k2++) {
                    const int kk = 2 * kq + k2;
                    mma16816(s[n], qh[kk], bh[2 * k2], bh[2 * k2 + 1]);
                    mma16816(s[n], qh[kk], bl[2 * k2], bl[2 * k2 + 1]);
                    mma16816(s[n], ql[kk], bh[2 * k2], bh[2 * k2 + 1]);
                }
            }
        }
        atc_online_softmax<4, true>(s, kt + kb, rpos, window, t4, m_r, l_r, o);
        /* O += P V: k-steps of 16 keys; matrices (keys kb + 16kk + 8(m&1).., dims 16np + 8(m>>1)) transposed
         * give b0, b1 of n-tiles 2np and 2np+1 */
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t ph[4], pl[4];
            atc_p_frag(s[2 * kk], s[2 * kk + 1], ph, pl);
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t vh[4], vl[4];
                const uint32_t a = va + (kb + 16 * kk) * ROW + 32 * np; /* vs[0][kb + 16kk + 8(lm&1) + lr][16np + 8(lm>>1)] */
                ldsm_x4_trans(vh, a);
                ldsm_x4_trans(vl, a + PART);
#pragma unroll
                for (int n2 = 0; n2 < 2; n2++) {
                    float *acc = o[2 * np + n2];
                    mma16816(acc, ph, vh[2 * n2], vh[2 * n2 + 1]);
                    mma16816(acc, ph, vl[2 * n2], vl[2 * n2 + 1]);
                    mma16816(acc, pl, vh[2 * n2], vh[2 * n2 + 1]);
                }
            }
        }
    }
}

/* WARPS warps per block (16: 32 queries x 8 heads on 20b, the default; 8: 16 x 8, LLMR_GPTOSS_ATC=2), MINB
 * blocks per SM, 16 warps per SM either way: 128 registers, ~130 bytes of spills splitting in the kernel,
 * ~25 from the pre-split scratch. Splitting in the kernel it wants 191; with them
 * (8 warps, 1 block per SM) it ran 15% slower (docs/performance.md "Session 11: the prompt attention, GQA
 * blocks") */
template <int WARPS, int MINB, bool PRESPLIT>
__global__ void __launch_bounds__(WARPS * 32, MINB)
    attention_tc2_kernel(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads, int n_kv,
                         int window, float *out, const uint16_t *kvs, int kvs_keys, int key0) {
    extern __shared__ __align__(16) unsigned char at2_raw_smem[];
    at2_smem<PRESPLIT> &sm = *(at2_smem<PRESPLIT> *)at2_raw_smem;
    const int D = GPTOSS_HEAD_DIM, qd = n_heads * D, G = n_heads / n_kv, QB = 16 * WARPS / G;
    const int kvh = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int h = kvh * G + warp % G;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * QB; /* the last (longest, causal) query blocks first */
    const int qlast = min(q0 + QB, T) - 1;
    const int k_hi = pos0 + qlast;
    const int k_lo = window > 0 ? max(0, pos0 + q0 - window + 1) : 0;
    const int wq0 = q0 + 16 * (warp / G); /* warp's first row */
    int w_lo, w_hi, rpos[2];
    atc_warp_rows(wq0, pos0, T, window, g, &w_lo, &w_hi, rpos);

    /* the first tile's rows fly while Q is read */
    if constexpr (PRESPLIT) at2_issue_split<WARPS>(kvs, kvs_keys, key0, kvh, k_lo, k_hi, sm.ks[0], sm.vs[0]);
    else at2_issue<WARPS>(kv, kvh, k_lo, k_hi, sm.raw[0]);
    uint32_t qh[4][4], ql[4][4];
    atc_load_q(q + (size_t)h * D, qd, wq0, g, t4, T, qh, ql);
    float o[8][4], m_r[2], l_r[2];
    atc_acc_init(o, m_r, l_r);
    const int lr = lane & 7, lm = lane >> 3; /* ldmatrix: the row this lane addresses, and its matrix */
    /* this lane's ldmatrix row in ks (key lr, dims 8 lm..) and in vs (key 8 (lm & 1) + lr, dims 8 (lm >> 1)..) */
    const uint32_t k_lane = smem_addr(&sm.ks[0][0][lr][8 * lm]);
    const uint32_t v_lane = smem_addr(&sm.vs[0][0][8 * (lm & 1) + lr][8 * (lm >> 1)]);
    const uint32_t STAGE = 2 * ATC_BK * ATC_LD * 2; /* bytes from one ring stage's ks (vs) to the next's */

    for (int kt = k_lo, it = 0; kt <= k_hi; kt += ATC_BK, it++) {
        int st = 0; /* the stage holding this tile's hi / lo rows */
        if constexpr (PRESPLIT) {
            st = it & 1;
            if (kt + ATC_BK <= k_hi) /* the next tile into the other stage, consumed a tile ago */
                at2_issue_split<WARPS>(kvs, kvs_keys, key0, kvh, kt + ATC_BK, k_hi, sm.ks[st ^ 1], sm.vs[st ^ 1]);
            else
                asm volatile("cp.async.commit_group;\n" ::: "memory");
            asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* all but the newest group: this tile */
            __syncthreads();
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
            __syncthreads(); /* this tile's raw rows have landed; every warp is done with the previous tile */
            if (kt + ATC_BK <= k_hi) at2_issue<WARPS>(kv, kvh, kt + ATC_BK, k_hi, sm.raw[(it + 1) & 1]);
            at2_split<WARPS>(sm.raw[it & 1], sm.ks[0], sm.vs[0]);
            __syncthreads();
        }
        if (kt <= w_hi && kt + ATC_BK - 1 >= w_lo) /* else nothing this warp can see */
            at2_tile(at2_launder(k_lane + st * STAGE), at2_launder(v_lane + st * STAGE), kt, qh, ql, rpos, window, t4,
                     m_r, l_r, o);
        if constexpr (PRESPLIT) __syncthreads(); /* every warp is done with this stage before it is refilled */
    }
    atc_write_out<true>(o, m_r, l_r, gptoss_bf16_to_f32(sinks[h]), wq0, g, t4, T, out + (size_t)h * GPTOSS_HEAD_DIM, qd);
}

/* The pre-split scratch of a call: kvs_keys keys per KV head from key0 (NULL: none, split in the kernel). */
typedef struct atc_scratch {
    uint16_t *kvs;
    int kvs_keys, key0;
} atc_scratch;

template <int WARPS, int MINB, bool PRESPLIT>
static cudaError_t at2_launch(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads, int n_kv,
                              int window, float *out, atc_scratch sc, cudaStream_t s) {
    const int G = n_heads / n_kv;
    if (8 % G != 0) return cudaErrorNotSupported;
    const int QB = 16 * WARPS / G;
    /* 100 (74 pre-split) KB of shared memory per block: Hopper allows 227 KB; a card that allows less (consumer
     * parts: ~99 KB) refuses it, and then the per-head kernel runs */
    if (cudaFuncSetAttribute(attention_tc2_kernel<WARPS, MINB, PRESPLIT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)sizeof(at2_smem<PRESPLIT>)) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it: the fallback launch must not report it */
        return cudaErrorNotSupported;
    }
    if constexpr (PRESPLIT) {
        atc_kv_split_kernel<<<(unsigned)(pos0 + T - sc.key0), 128, 0, s>>>(kv, sc.key0, n_kv, sc.kvs_keys, sc.kvs);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    const dim3 grid((unsigned)((T + QB - 1) / QB), (unsigned)n_kv);
    attention_tc2_kernel<WARPS, MINB, PRESPLIT><<<grid, WARPS * 32, sizeof(at2_smem<PRESPLIT>), s>>>(
        q, kv, sinks, T, pos0, n_heads, n_kv, window, out, sc.kvs, sc.kvs_keys, sc.key0);
    return cudaGetLastError();
}

/* kind 4: the GQA-block kernel with 16 warps from the pre-split scratch (needs it, and room in it for every key
 * the chunk sees); 3 / 2: the same splitting in the kernel, 16 warps per block at 1 per SM / 8 warps at 2
 * per SM (these need n_heads / n_kv to divide 8, else cudaErrorNotSupported); 1: attention_tc_kernel with the
 * packed staging; 0: with the original staging. The kernel checks run each. */
static cudaError_t atc_launch(int kind, const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0,
                              int n_heads, int n_kv, int window, float *out, uint16_t *kvs, int kvs_keys, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    if (n_kv <= 0 || n_heads <= 0 || n_heads % n_kv != 0 || pos0 < 0 || n_heads > 65535) return cudaErrorInvalidValue;
    atc_scratch sc = {kvs, kvs_keys, window > 0 ? (pos0 - window + 1 > 0 ? pos0 - window + 1 : 0) : 0};
    if (kind == 4) {
        if (!kvs || pos0 + T - sc.key0 > kvs_keys) return cudaErrorNotSupported;
        return at2_launch<16, 1, true>(q, kv, sinks, T, pos0, n_heads, n_kv, window, out, sc, s);
    }
    if (kind == 3) return at2_launch<16, 1, false>(q, kv, sinks, T, pos0, n_heads, n_kv, window, out, sc, s);
    if (kind == 2) return at2_launch<8, 2, false>(q, kv, sinks, T, pos0, n_heads, n_kv, window, out, sc, s);
    const dim3 grid((unsigned)((T + ATC_BQ - 1) / ATC_BQ), (unsigned)n_heads);
    if (kind)
        attention_tc_kernel<true><<<grid, ATC_WARPS * 32, 0, s>>>(q, kv, sinks, T, pos0, n_heads, n_kv, window, out);
    else
        attention_tc_kernel<false><<<grid, ATC_WARPS * 32, 0, s>>>(q, kv, sinks, T, pos0, n_heads, n_kv, window, out);
    return cudaGetLastError();
}

cudaError_t gptoss_attention_tc(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads,
                                int n_kv, int window, float *out, uint16_t *kvs, int kvs_keys, cudaStream_t s) {
    static int kind = -1; /* LLMR_GPTOSS_ATC: 4 (default) the GQA-block kernel from the pre-split scratch where it
                             applies, 3 the same splitting in the kernel, 2 that with 8 warps per block, 1 the
                             per-head kernel with the packed staging, 0 its original staging (same values as 1;
                             LLMR_GPTOSS_ATC_STAGE=0 still means 0); read once. Where a kind does not apply the
                             next one down does (4 -> 3 -> 1) */
    if (kind < 0) {
        const char *v = getenv("LLMR_GPTOSS_ATC"), *st = getenv("LLMR_GPTOSS_ATC_STAGE");
        kind = v && v[0] >= '0' && v[0] <= '4' && !v[1] ? v[0] - '0' : 4;
        if (st && strcmp(st, "0") == 0) kind = 0;
    }
    cudaError_t e = atc_launch(kind, q, kv, sinks, T, pos0, n_heads, n_kv, window, out, kvs, kvs_keys, s);
    if (e == cudaErrorNotSupported && kind == 4) e = atc_launch(3, q, kv, sinks, T, pos0, n_heads, n_kv, window, out, kvs, kvs_keys, s);
    if (e == cudaErrorNotSupported) e = atc_launch(1, q, kv, sinks, T, pos0, n_heads, n_kv, window, out, kvs, kvs_keys, s);
    return e;
}
