/* moe_mma_stream.cu — the MXFP4 expert matmul on tensor cores with each warp streaming its weight rows
 * over the whole K (gptoss_mxfp4_mma_stream, kernels.h). Same arguments, same decoded values and same
 * mma sequence per output element as gptoss_mxfp4_mma (moe_mma.cu), so its results are bit for bit
 * those of that kernel (the kernel checks compare them); only where the bytes come from and when differs.
 *
 * Why this shape (docs/performance.md, "The streaming expert kernel"): gptoss_mxfp4_mma walks K in 12
 * passes with a block barrier each and holds 208 registers (8 warps per SM); ncu found no eligible warp
 * 63% of its cycles and it moved ~0.6 TB/s. Here:
 *  - one CTA per (row chunk, token tile of up to 8 or 16 of one expert's pairs): the CTA stages those
 *    tokens' activations (hi/mid/lo bf16 units in the lanes' k order, ~17.8 KB per token at K = 2,880)
 *    once, for all of K with 8-token tiles (one barrier per CTA) or in two phases with 16-token tiles
 *    (to fit shared memory); no warp waits for another in between;
 *  - each warp owns one m16 tile (16 weight rows) and walks all of K in 128-value super-chunks with
 *    MS_DEPTH super-chunks of its 16-byte weight loads and scale bytes in flight in registers (a ring
 *    indexed at compile time, so no register copy waits on a load); the first ones are issued before the
 *    staging, so the staging's L2 reads overlap the first DRAM reads. The decode of a weight is the
 *    costly part (~5 instructions per bf16 pair), so a 16-token tile decodes it once for two n8 tiles;
 *  - the (expert, token tile) of a CTA comes from a warp scan over counts[] on the device: the grid has
 *    one row of CTAs per possible tile (min(P, E + P/tile) for P pairs), so few CTAs exit idle;
 *  - each output has one writer and the k order is fixed by the shapes, as in moe_mma.cu. */
#include "engines/gptoss_cuda/kernels.h"

#include "engines/gptoss_cuda/ldg_u8.cuh"
#include "engines/gptoss_cuda/moe_mma_common.cuh"

#include <stdlib.h>

#define MS_PHASE 12   /* super-chunks staged per phase with 16-token tiles (a multiple of every depth) */
#define MS_MAX_WARPS 16

/* Occupancy modes (LLMR_GPTOSS_MOE_STREAM_OCC; tests: gptoss_mxfp4_mma_stream_force_occ). The kernel is
 * bound by the latency of each warp's dependent decode chain (docs/performance.md, session 7), and mode 1
 * holds 16 warps per SM: 128 registers for a 4-deep ring of weight loads, and all of K staged for 8-token
 * tiles (142 KB, one CTA per SM). The other modes trade the ring depth and the staging's length for more
 * resident warps: 2 super-chunks in flight, shorter staging phases (MS_OCC_PHASE), and a register cap from
 * the launch bounds:
 *   1: CTAs of up to 16 warps, 1 per SM, 4 super-chunks in flight (the streaming kernel of session 7);
 *   2: CTAs of up to 16 warps, 2 per SM (64 registers): 32 warps per SM;
 *   3: CTAs of up to 8 warps, 3 per SM (85 registers): 24 warps per SM.
 * Every mode runs the same products in the same order per output: the same bits (kernel checks). */
template <int OCC> struct ms_occ;
template <> struct ms_occ<1> { enum { THREADS = 512, MINB = 1, DEPTH = 4 }; };
template <> struct ms_occ<2> { enum { THREADS = 512, MINB = 2, DEPTH = 2 }; };
template <> struct ms_occ<3> { enum { THREADS = 256, MINB = 3, DEPTH = 2 }; };
#define MS_OCC_PHASE 8 /* super-chunks per staging phase in modes 2-3 (8-token tiles; half with 16) */

/* Staged activations: per token, 32 units (4 k values each: 16 bytes hi + mid in xs, 8 bytes lo in xl)
 * per 128-value super-chunk c of the phase, unit 32c + 4j + t for lane t's k16 step j (its values
 * k = 128c + 32t + 8(j >> 1) + 2(j & 1), +1, +4, +5, in mma_stage_unit's fragment order). A lane reads
 * its step j at a fixed offset from one pointer per super-chunk; a token row of stride = 4 mod 16 units
 * puts the lanes of each shared-memory wavefront on distinct banks (16-byte reads: tokens g, g + 1 at +4
 * bank groups; 8-byte reads: tokens g..g + 3 at +4 each). */
static __host__ __device__ __forceinline__ int ms_stride(int phase_sc) { return 32 * phase_sc + 4; }

/* One super-chunk c of a lane's two weight rows: MXFP4 block 4c + t of each row, from the lane's row
 * pointers wp / sp (block t of the row; NULL for a row past N: zeros with scale byte 127, as moe_mma.cu,
 * as past K). once: evict-first, the tile is read by this CTA only. */
static __device__ __forceinline__ void ms_load(const uint4 *const wp[2], const uint8_t *const sp[2], int NC, int c,
                                               int t, bool once, uint4 q[2], uint32_t s[2]) {
    const bool in_k = 4 * c + t < NC;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const bool ok = in_k && wp[r];
        q[r] = !ok ? make_uint4(0u, 0u, 0u, 0u) : once ? __ldcs(wp[r] + 4 * c) : __ldg(wp[r] + 4 * c);
        s[r] = !ok ? 127u : gptoss_ldg_u8(sp[r] + 4 * c);
    }
}

/* The products of one super-chunk (staged at unit 32 cp of the phase) for one m16 tile and NT n8 tiles:
 * 8 k16 steps, A decoded once in registers, B (hi, mid, lo; lo only with PARTS = 3) from the staged rows
 * of the lane's tokens, each n8 tile into a fresh accumulator added to acc in fp32 (moe_mma.cu's
 * mma_pass: the same sequence per output element with PARTS = 3). */
template <bool FAST, int NT, int PARTS>
static __device__ __forceinline__ void ms_superchunk(const uint4 q[2], const uint32_t s[2], const uint4 *const xs_row[NT],
                                                     const uint2 *const xl_row[NT], int cp, float acc[NT][4]) {
    float part[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) part[n][i] = 0.0f;
    const __nv_bfloat162 sc[2] = {mma_scale2(s[0]), mma_scale2(s[1])};
#pragma unroll(FAST ? 8 : 1)
    for (int j = 0; j < 8; j++) {
        uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 v = q[r];
            const uint32_t w = (j >> 1) == 0 ? v.x : (j >> 1) == 1 ? v.y : (j >> 1) == 2 ? v.z : v.w;
            if (FAST) {
                a[r] = (j & 1) ? mma_fp4_pair<2>(w, sc[r]) : mma_fp4_pair<0>(w, sc[r]);
                a[2 + r] = (j & 1) ? mma_fp4_pair<3>(w, sc[r]) : mma_fp4_pair<1>(w, sc[r]);
            } else {
                a[r] = mma_fp4_pair_any(w, (j & 1) ? 2 : 0, s[r]);
                a[2 + r] = mma_fp4_pair_any(w, (j & 1) ? 3 : 1, s[r]);
            }
        }
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const uint4 bv = xs_row[n][32 * cp + 4 * j];
            mma_bf16(part[n], a, bv.x, bv.y); /* hi */
            mma_bf16(part[n], a, bv.z, bv.w); /* mid */
            if (PARTS == 3) {
                const uint2 bl = xl_row[n][32 * cp + 4 * j];
                mma_bf16(part[n], a, bl.x, bl.y); /* lo */
            }
        }
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] += part[n][i];
}

/* The F16 form's products of word wi's two k16 steps (j = 2 wi, 2 wi + 1) of a super-chunk, from the fp16 pairs h[r] of
 * that word of the lane's two rows, for NT n8 tiles into part: B's hi and lo parts from the staged unit. */
template <int NT>
static __device__ __forceinline__ void ms_word_products_f16(const uint32_t (&h)[2][4], int wi, const uint4 *const xs_row[NT],
                                                            int cp, float part[NT][4]) {
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        const int j = 2 * wi + jj;
        const uint32_t a[4] = {h[0][2 * jj], h[1][2 * jj], h[0][2 * jj + 1], h[1][2 * jj + 1]};
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const uint4 bv = xs_row[n][32 * cp + 4 * j];
            mma_f16(part[n], a, bv.x, bv.y); /* hi */
            mma_f16(part[n], a, bv.z, bv.w); /* lo */
        }
    }
}

/* The F16 form of ms_superchunk (PARTS = 2): each word of a lane's two rows decoded once for its two k16 steps
 * (mxfp4_lut_halves: nibbles 0..3 feed the even step, 4..7 the odd one; a[r] = nibbles 4jj, 4jj + 1 of row r, a[2 +
 * r] = 4jj + 2, 4jj + 3, which the staging matches: mma_stage_unit_f16) and scaled by 2^k, k = s - 127 - shift; B's hi
 * and lo parts from the staged unit. TAB (every k of the warp within +-MXFP4_LUT_SCALED_MAX_K): sc[r] are row r's
 * tables of the magnitudes times 2^k (mxfp4_lut_scaled), so the decode scales (no HMUL2: 32 instructions a super-chunk
 * fewer); else sc[r][0] is 2^k as an fp16 pair, multiplied in. The same fp16 bits either way (mxfp4_lut.h; host
 * check). */
template <int NT, bool TAB>
static __device__ __forceinline__ void ms_superchunk_f16(const uint4 q[2], const uint32_t sc[2][2], const uint4 *const xs_row[NT],
                                                         int cp, float acc[NT][4]) {
    float part[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) part[n][i] = 0.0f;
#pragma unroll
    for (int wi = 0; wi < 4; wi++) {
        uint32_t h[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint32_t w = wi == 0 ? q[r].x : wi == 1 ? q[r].y : wi == 2 ? q[r].z : q[r].w;
            if constexpr (TAB) {
                mxfp4_lut_halves_from(w, sc[r][0], sc[r][1], h[r]);
            } else {
                mxfp4_lut_halves(w, h[r]);
#pragma unroll
                for (int i = 0; i < 4; i++) h[r][i] = mma_hmul2_bits(h[r][i], sc[r][0]);
            }
        }
        ms_word_products_f16<NT>(h, wi, xs_row, cp, part);
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] += part[n][i];
}

/* (*i, *u) -> the token and unit of the index blockDim.x further on (di, du: blockDim.x's own), for ms_stage: the
 * walk costs 4 instructions a unit where idx / units cost a ~20-instruction integer division. */
static __device__ __forceinline__ void ms_stage_next(int *i, int *u, int di, int du, int units) {
    *u += du;
    *i += di;
    if (*u >= units) {
        *u -= units;
        (*i)++;
    }
}

/* Stages super-chunks [c0, c0 + pc) of tokens [0, tn) of the tile (rows off .. off + ntok - 1 of the
 * grouped pairs; zeros past K and past ntok). Loads batched B units per thread so their L2 round trips
 * overlap (B = 8 costs 48 registers: 4 and 2 under the register caps of modes 3 and 2, which spill
 * otherwise). Thread j takes indices j, j + blockDim.x, ... of the tile's tn x units, token i = index / units and unit
 * u = index % units, walked from one division per phase. */
template <int B, bool F16>
static __device__ __forceinline__ void ms_stage(const float *x, int ldx, int swz, const int32_t *gather, int off,
                                                int ntok, int tn, int K, int c0, int pc, int stride, uint4 *xs,
                                                uint2 *xl) {
    const int units = 32 * pc, total = tn * units;
    const int di = (int)blockDim.x / units, du = (int)blockDim.x - di * units;
    int i0 = (int)threadIdx.x / units, u0 = (int)threadIdx.x - i0 * units; /* of index base */
    for (int base = threadIdx.x; base < total; base += B * blockDim.x) {
        uint4 hv[B];
        uint2 lv[B];
        int i = i0, u = u0;
#pragma unroll
        for (int b = 0; b < B; b++, ms_stage_next(&i, &u, di, du, units)) {
            const int idx = base + b * blockDim.x;
            hv[b] = make_uint4(0u, 0u, 0u, 0u);
            lv[b] = make_uint2(0u, 0u);
            if (idx < total) {
                /* F16: the unit's 4 values are consecutive (mma_stage_unit_f16); bf16: k, k + 1, k + 4, k + 5 */
                const int k = 128 * (c0 + (u >> 5)) + 32 * (u & 3) + 8 * ((u >> 3) & 3) + (F16 ? 4 : 2) * ((u >> 2) & 1);
                if (i < ntok && k < K) {
                    const int p = off + i;
                    const int src = gather ? gather[p] : p;
                    if constexpr (F16) mma_stage_unit_f16(x + (size_t)src * ldx, swz, K, k, &hv[b]);
                    else mma_stage_unit(x + (size_t)src * ldx, swz, K, k, &hv[b], &lv[b]);
                }
            }
        }
        i = i0; /* walked again for the stores rather than kept: B more pairs of registers */
        u = u0;
#pragma unroll
        for (int b = 0; b < B; b++, ms_stage_next(&i, &u, di, du, units)) {
            const int idx = base + b * blockDim.x;
            if (idx < total) {
                xs[(size_t)i * stride + u] = hv[b];
                if constexpr (!F16) xl[(size_t)i * stride + u] = lv[b];
            }
        }
        i0 = i;
        u0 = u;
    }
}

/* PRE (the F16 form's pre-staged activations, gptoss_mxfp4_stage_f16): the tile's ntok rows of staged units are
 * copied as they are (cp.async, 16 bytes a thread, no conversion and no index division), all of K in one phase; row i
 * of the tile is staged row rows_of[i] (the launch's gather from the tile's first pair: gate_up's rows are the
 * tokens', staged once each) or i (rows_of NULL: down's rows are the pairs');
 * the rows past ntok are not written, and the lanes of those columns read row ntok - 1 instead (their products
 * land in output columns the epilogue never stores: an mma's column depends on its B column only). Reading the
 * B units straight from the staged rows in global memory instead (through L1, no copy and no barrier) measured
 * 1.7x slower at T = 64 (session 20 call 3). */
static __device__ __forceinline__ void ms_copy_staged(const uint4 *src, const int32_t *rows_of, int units, int ntok,
                                                      int stride, uint4 *xs) {
    for (int i = 0; i < ntok; i++) {
        const uint4 *row = src + (size_t)(rows_of ? rows_of[i] : i) * units;
        for (int v = threadIdx.x; v < units; v += blockDim.x)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((uint32_t)__cvta_generic_to_shared(
                             xs + (size_t)i * stride + v)),
                         "l"(row + v)
                         : "memory");
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

/* A warp's results: acc[n][0..1] row rows[0], tokens 8n + 2t, +1; acc[n][2..3] row rows[1] (gate_up: the up row), times
 * 2^sh (the F16 form's expert shift undone: a power of two, exact), plus the bias; gate_up (swiglu) stores the pair's
 * clamped SwiGLU at y[p, row / 2], down y[p, row], for the tile's pairs off + i, i < ntok. The two bias values are
 * loaded once, before the first store: a store to y may alias bias as far as the compiler knows, so it reloaded them
 * after each store, one memory round trip each. */
template <int NT>
static __device__ __forceinline__ void ms_store(float (&acc)[NT][4], int sh, const int rows[2], int t, int ntok, int off,
                                                int e, int N, int swiglu, const uint16_t *bias, float alpha, float limit,
                                                float *y) {
    if (sh) {
        const float up = ldexpf(1.0f, sh);
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[n][i] *= up;
    }
    float bv[2]; /* row r's bias (gate_up: the gate row's, then the up row's: rows[1] = rows[0] + 1) */
#pragma unroll
    for (int r = 0; r < 2; r++) bv[r] = rows[r] < N ? gptoss_bf16_to_f32(bias[(size_t)e * N + rows[r]]) : 0.0f;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {
            const int i = 8 * n + 2 * t + cc;
            if (i >= ntok) continue;
            const size_t p = (size_t)off + i;
            if (swiglu) {
                const int gr = rows[0];
                if (gr >= N) continue;
                const float gv = acc[n][cc] + bv[0];
                const float uv = acc[n][2 + cc] + bv[1];
                y[p * (size_t)(N / 2) + gr / 2] = mma_swiglu(gv, uv, alpha, limit);
            } else {
#pragma unroll
                for (int r = 0; r < 2; r++)
                    if (rows[r] < N)
                        y[p * (size_t)N + rows[r]] = acc[n][2 * r + cc] + bv[r];
            }
        }
}

/* One F16 super-chunk of a warp (ring slot q, s, staged at unit 32 cp of the phase): the block scales as the decode's
 * tables where every one of the warp's is within their reach, else fp16 scale products (ms_superchunk_f16). */
template <int NT>
static __device__ __forceinline__ void ms_step_f16(const uint4 q[2], const uint32_t s[2], int sh, int tab,
                                                   const uint4 *const xs_row[NT], int cp, float acc[NT][4]) {
    const int k0 = (int)s[0] - 127 - sh, k1 = (int)s[1] - 127 - sh;
    uint32_t sc[2][2];
    const int kk = MXFP4_LUT_SCALED_MAX_K;
    if (__all_sync(0xffffffffu, tab && k0 >= -kk && k0 <= kk && k1 >= -kk && k1 <= kk)) {
        mxfp4_lut_scaled(k0, &sc[0][0], &sc[0][1]);
        mxfp4_lut_scaled(k1, &sc[1][0], &sc[1][1]);
        ms_superchunk_f16<NT, true>(q, sc, xs_row, cp, acc);
    } else { /* a block scale past 2^-13 of its table's reach (or the tables off): fp16 scales */
        sc[0][0] = mma_f16_scale2(k0);
        sc[1][0] = mma_f16_scale2(k1);
        ms_superchunk_f16<NT, false>(q, sc, xs_row, cp, acc);
    }
}

/* Grid (row chunks of 16 x warps rows, token-tile items of 8 NT tokens); blockDim = 32 x warps; dynamic
 * shared memory tn x ms_stride(pc) x 24 bytes (tn = tokens staged per CTA, <= 8 NT; pc = super-chunks per
 * phase, ms_shape: all of K or a multiple of the depth); with PRE 16 bytes a unit and pc = all of K. */
template <int NT, int PARTS, int OCC, bool F16, bool PRE, bool TILED = false>
__global__ void __launch_bounds__(ms_occ<OCC>::THREADS, ms_occ<OCC>::MINB)
    mxfp4_mma_stream_kernel(const float *x, int ldx, int swz, const int32_t *gather, const uint8_t *blocks,
                            const uint8_t *scales, const uint16_t *bias, const int32_t *shift, const int32_t *counts,
                            const int32_t *offsets, int E, int K, int N, int swiglu, float alpha, float limit, int tn,
                            int pc, const uint4 *staged, gptoss_mxfp4_tiled tiled, float *y, int ms_f16_tab) {
    static_assert(!TILED || F16, "the tiled copy is read by the F16 launches");
    static_assert(!F16 || PARTS == 2, "the F16 form has two activation parts");
    static_assert(!PRE || F16, "only the F16 form is pre-staged");
    extern __shared__ uint4 ms_smem[];
    constexpr int TN = 8 * NT, MS_DEPTH = ms_occ<OCC>::DEPTH;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, g = lane >> 2, t = lane & 3;
    int e, tt;
    if (!mma_tile_item(counts, NULL, E, TN, blockIdx.y, lane, &e, &tt)) return; /* the same answer in every warp */
    const int cnt = counts[e], off = offsets[e] + tt * TN, ntok = min(TN, cnt - tt * TN);
    const bool once = cnt <= TN;
    const int NC = K / 32, nsc = (K + 127) / 128, stride = ms_stride(pc);
    const uint8_t *eb = blocks + (size_t)e * N * (K / 2);
    const uint8_t *es = scales + (size_t)e * N * NC;
    const int sh = F16 ? shift[e] : 0; /* F16: the expert's fp16 shift (its weights x 2^-sh, its sums x 2^sh) */
    uint4 *xs = ms_smem;
    uint2 *xl = (uint2 *)(ms_smem + (size_t)tn * stride);

    /* The weight rows this lane loads: fragment rows g and g + 8 of the warp's m16 tile (gate_up: gate row
     * 2a over its up row 2a + 1, as moe_mma.cu). */
    const int row0 = (blockIdx.x * warps + warp) * 16;
    const int rows[2] = {swiglu ? row0 + 2 * g : row0 + g, swiglu ? row0 + 2 * g + 1 : row0 + g + 8};
    const bool active = row0 < N; /* warp-uniform; idle warps still stage and meet the barriers */
    const uint4 *wp[2];
    const uint8_t *sp[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        wp[r] = rows[r] < N ? (const uint4 *)(eb + ((size_t)rows[r] * NC + t) * 16) : NULL;
        sp[r] = es + (size_t)rows[r] * NC + t;
    }
    /* TILED: this lane's units r of the warp's tile, super-chunk c at tw[r] + 64 c, their scale bytes in the 16 bits at
     * ts + 32 c (gptoss_mxfp4_tile); mma_load_tiled walks tw and ts from super-chunk 0 */
    const uint4 *tw[2];
    const uint16_t *ts;
    uint32_t ssel;
    mma_tiled_lane(tiled, e, row0 / 16, N, K, lane, tw, &ts, &ssel);
    uint4 q[MS_DEPTH][2];
    uint32_t s[MS_DEPTH][2];
    if (active) /* the first weights in flight during the staging */
#pragma unroll
        for (int d = 0; d < MS_DEPTH; d++)
            if (d < nsc) {
                if constexpr (TILED) mma_load_tiled(tw, &ts, once, q[d], &s[d][0]); /* super-chunk d */
                else ms_load(wp, sp, NC, d, t, once, q[d], s[d]);
            }

    /* this lane's staged units (token 8n + g, lane t); columns past tn read a staged row, not written */
    const uint4 *xs_row[NT];
    const uint2 *xl_row[NT];
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const int row = min(8 * n + g, (PRE ? ntok : tn) - 1);
        xs_row[n] = xs + (size_t)row * stride + t;
        xl_row[n] = xl + (size_t)row * stride + t;
    }
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
    for (int cb = 0; cb < nsc; cb += pc) { /* phases of pc super-chunks (one phase with 8-token tiles) */
        if (cb > 0) __syncthreads(); /* every warp is done with the previous phase's staging */
        if constexpr (PRE) /* one phase (pc = nsc): the rows of this tile, 32 nsc units each */
            ms_copy_staged(gather ? staged : staged + (size_t)off * (32 * nsc), gather ? gather + off : NULL, 32 * nsc, ntok,
                           stride, xs);
        else
            ms_stage<OCC == 1 ? 8 : OCC == 2 ? 2 : 4, F16>(x, ldx, swz, gather, off, ntok, tn, K, cb, min(pc, nsc - cb), stride,
                                                          xs, xl);
        __syncthreads();
        if (!active) continue;
        const int ce = min(cb + pc, nsc);
        for (int c0 = cb; c0 < ce; c0 += MS_DEPTH) {
#pragma unroll
            for (int d = 0; d < MS_DEPTH; d++) { /* ring slot d holds super-chunk c (pc is a multiple of MS_DEPTH) */
                const int c = c0 + d;
                if (c >= ce) break;
                if constexpr (F16) {
                    uint32_t sd[2]; /* the scale bytes (TILED: from the word mma_load_tiled left whole) */
                    if constexpr (TILED) mma_tiled_scales(s[d][0], ssel, sd);
                    else sd[0] = s[d][0], sd[1] = s[d][1];
                    ms_step_f16<NT>(q[d], sd, sh, ms_f16_tab, xs_row, c - cb, acc);
                    if (c + MS_DEPTH < nsc) {
                        if constexpr (TILED) mma_load_tiled(tw, &ts, once, q[d], &s[d][0]); /* c + MS_DEPTH */
                        else ms_load(wp, sp, NC, c + MS_DEPTH, t, once, q[d], s[d]);
                    }
                    continue;
                }
                const bool fast = MMA_FAST_S(s[d][0]) && MMA_FAST_S(s[d][1]);
                if (__all_sync(0xffffffffu, fast)) ms_superchunk<true, NT, PARTS>(q[d], s[d], xs_row, xl_row, c - cb, acc);
                else ms_superchunk<false, NT, PARTS>(q[d], s[d], xs_row, xl_row, c - cb, acc);
                if (c + MS_DEPTH < nsc) ms_load(wp, sp, NC, c + MS_DEPTH, t, once, q[d], s[d]);
            }
        }
    }
    if (!active) return;
    ms_store<NT>(acc, F16 ? sh : 0, rows, t, ntok, off, e, N, swiglu, bias, alpha, limit, y);
}

/* ---------------------------------------------------------------- the F16 form from the e5m2 copy */
/* One super-chunk of the pre-staged F16 form from the e5m2 copy (gptoss_mxfp4_tile_e5): q[r][h] the lane's 32 bytes of
 * row r's block (h: its MXFP4 words 0-1, 2-3), each of their words E giving the fp16 pairs (E << 8) & 0xFF00FF00 and
 * E & 0xFF00FF00, the pairs ms_superchunk_f16 decodes from the MXFP4 word (the same values, the same k order); then
 * its products, the same mma sequence as there with NT = 1. */
static __device__ __forceinline__ void ms_superchunk_e5(const uint4 q[2][2], const uint4 *xs_row, int c, float acc[4]) {
    float part[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int wi = 0; wi < 4; wi++) {
        uint32_t h[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 v = q[r][wi >> 1];
            mma_e5_halves((wi & 1) ? v.z : v.x, (wi & 1) ? v.w : v.y, h[r]);
        }
        ms_word_products_f16<1>(h, wi, &xs_row, c, part);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i] += part[0][i];
}

/* The pre-staged F16 launch (mode 2: 8-pair tiles, 16 warps, 2 CTAs an SM, all of K staged) reading the e5m2 copy
 * instead of the MXFP4 tiles: mxfp4_mma_stream_kernel<1, 2, 2, true, true, true>'s grid, staging, products and
 * epilogue, with no scale bytes, tables or vote in the loop (the copy holds the scaled values). DEPTH super-chunks of
 * a lane's 64 bytes in flight. (Letting the CTAs of experts with few pairs read the MXFP4 tiles here instead measured
 * no faster once the copy was lane-major: session 39 call 7; removed in session 41.) */
template <int DEPTH>
__global__ void __launch_bounds__(ms_occ<2>::THREADS, ms_occ<2>::MINB)
    mxfp4_mma_stream_e5_kernel(const int32_t *gather, const uint16_t *bias, const int32_t *shift, const int32_t *counts,
                               const int32_t *offsets, int E, int K, int N, int swiglu, float alpha, float limit,
                               const uint4 *staged, const uint4 *e5, float *y) {
    extern __shared__ uint4 ms_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, g = lane >> 2, t = lane & 3;
    int e, tt;
    if (!mma_tile_item(counts, NULL, E, 8, blockIdx.y, lane, &e, &tt)) return; /* the same answer in every warp */
    const int cnt = counts[e], off = offsets[e] + tt * 8, ntok = min(8, cnt - tt * 8);
    const bool once = cnt <= 8;
    const int nsc = (K + 127) / 128, stride = ms_stride(nsc), sh = shift[e];
    const int row0 = (blockIdx.x * warps + warp) * 16, tiles = (N + 15) / 16;
    const int rows[2] = {swiglu ? row0 + 2 * g : row0 + g, swiglu ? row0 + 2 * g + 1 : row0 + g + 8};
    const bool active = row0 < N; /* warp-uniform; idle warps still stage and meet the barrier */
    const uint4 *xs_row = ms_smem + (size_t)(min(g, ntok - 1)) * stride + t; /* columns past ntok: a staged row */
    const uint4 *wp = e5 + 2 * gptoss_mxfp4_tiled_first(e, min(row0 / 16, tiles - 1), N, K) + lane; /* mma_load_e5 */
    uint4 q[DEPTH][2][2];
    if (active) /* the first weights in flight during the staging (its L2 reads overlap them) */
#pragma unroll
        for (int d = 0; d < DEPTH; d++)
            if (d < nsc) mma_load_e5(wp, d, once, q[d]);
    ms_copy_staged(gather ? staged : staged + (size_t)off * (32 * nsc), gather ? gather + off : NULL, 32 * nsc, ntok,
                   stride, ms_smem);
    __syncthreads();
    if (!active) return;
    float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    for (int c0 = 0; c0 < nsc; c0 += DEPTH) {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) { /* ring slot d holds super-chunk c */
            const int c = c0 + d;
            if (c >= nsc) break;
            ms_superchunk_e5(q[d], xs_row, c, acc[0]);
            if (c + DEPTH < nsc) mma_load_e5(wp, c + DEPTH, once, q[d]);
        }
    }
    ms_store<1>(acc, sh, rows, t, ntok, off, e, N, swiglu, bias, alpha, limit, y);
}

/* The shape of a launch by its max_pairs (H200, experts of one 20b layer, 3 parts, ms; session 9 call 1):
 *  - mode 2 with 8-token tiles below 1,024 pairs: T = 8 / 32 / 64 / 128 rows 0.169 / 0.272 / 0.336 / 0.544
 *    against mode 1's best 0.196 / 0.301 / 0.409 / 0.576 (its 64 registers hold no 16-token tile: spills);
 *  - mode 1 with 16-token tiles from 1,024 pairs (prompt chunks of 256+ tokens): each weight decoded once
 *    per 16 of its expert's tokens; 2 parts at T = 256 / 512 0.889 / 1.635 against mode 2's 0.910 / 1.678;
 *  - the F16 form in mode 1 with 32-token tiles from GPTOSS_MMA_STREAM_NT4_MIN pairs: each weight decoded once per
 *    32 tokens, 4 n8 tiles of products per decode (session 21; docs/performance.md, step 38).
 * Forced by LLMR_GPTOSS_MOE_STREAM_TILES=1|2 and LLMR_GPTOSS_MOE_STREAM_OCC=1|2|3 (comparisons), or by the
 * tests' hooks. */
typedef struct {
    int occ; /* occupancy mode, 1..3 */
    int nt;  /* n8 tiles per CTA: 8 nt tokens per token tile */
    int tn;  /* tokens staged per CTA: min(8 nt, max_pairs) */
    int pc;  /* super-chunks per staging phase */
} ms_shape_t;

static int ms_force_tiles = -1; /* -1: read LLMR_GPTOSS_MOE_STREAM_TILES at the first launch; 0: automatic */
static int ms_force_occ = -1;   /* -1: read LLMR_GPTOSS_MOE_STREAM_OCC at the first launch; 0: automatic */
static int ms_force_phase;      /* tests: super-chunks per phase in modes 2-3 (0: MS_OCC_PHASE / nt) */
void gptoss_mxfp4_mma_stream_force_tiles(int nt) { ms_force_tiles = nt == 1 || nt == 2 || nt == 4 ? nt : 0; }
void gptoss_mxfp4_mma_stream_force_occ(int occ) { ms_force_occ = occ >= 1 && occ <= 3 ? occ : 0; }
void gptoss_mxfp4_mma_stream_force_phase(int pc) { ms_force_phase = pc > 0 && pc % 4 == 0 ? pc : 0; }

static int ms_env_digit(const char *name, char lo, char hi) {
    const char *v = getenv(name);
    return v && v[0] >= lo && v[0] <= hi && !v[1] ? v[0] - '0' : 0;
}

static ms_shape_t ms_shape(int K, int max_pairs, int f16) {
    if (ms_force_tiles < 0) {
        ms_force_tiles = ms_env_digit("LLMR_GPTOSS_MOE_STREAM_TILES", '1', '4');
        if (ms_force_tiles == 3) ms_force_tiles = 0;
    }
    if (ms_force_occ < 0) ms_force_occ = ms_env_digit("LLMR_GPTOSS_MOE_STREAM_OCC", '1', '3');
    ms_shape_t sh;
    sh.occ = ms_force_occ ? ms_force_occ : max_pairs >= 1024 ? 1 : 2;
    sh.nt = ms_force_tiles ? ms_force_tiles
            : sh.occ == 1 && max_pairs >= 256 ? (f16 && max_pairs >= GPTOSS_MMA_STREAM_NT4_MIN ? 4 : 2) : 1;
    if (sh.nt == 4 && (!f16 || sh.occ != 1)) sh.nt = 2; /* 32-pair tiles: the F16 form in mode 1 only */
    sh.tn = max_pairs < 8 * sh.nt ? max_pairs : 8 * sh.nt;
    if (sh.tn < 1) sh.tn = 1;
    const int nsc = (K + 127) / 128;
    int pc = sh.occ == 1 ? (sh.nt == 1 ? nsc : MS_PHASE) : ms_force_phase ? ms_force_phase : MS_OCC_PHASE / sh.nt;
    sh.pc = nsc <= pc ? nsc : pc;
    return sh;
}

/* The F16 form's decode through scaled magnitude tables (ms_superchunk_f16's TAB; the same bits): on unless
 * LLMR_GPTOSS_MOE_F16_TABLES=0 (read at the first launch) or a test turned it off. */
static int ms_f16_tables = -1;
void gptoss_mxfp4_mma_stream_f16_tables(int on) { ms_f16_tables = on ? 1 : 0; }
int gptoss_mxfp4_mma_stream_f16_tables_on(void) {
    if (ms_f16_tables < 0) {
        const char *v = getenv("LLMR_GPTOSS_MOE_F16_TABLES");
        ms_f16_tables = !(v && v[0] == '0');
    }
    return ms_f16_tables;
}

/* Launches mxfp4_mma_stream_kernel<NT, PARTS, OCC, F16, PRE>, opting it into the large staging at its first launch
 * (cudaFuncSetAttribute is not a stream operation; repeating it after a failure is harmless). */
template <int NT, int PARTS, int OCC, bool F16, bool PRE = false, bool TILED = false>
static cudaError_t ms_launch(dim3 grid, int threads, size_t smem, cudaStream_t stream, const float *x, int ldx, int swz,
                             const int32_t *gather, const uint8_t *blocks, const uint8_t *scales, const uint16_t *b,
                             const int32_t *shift, const int32_t *counts, const int32_t *offsets, int E, int K, int N,
                             int swiglu, float alpha, float limit, int tn, int pc, const uint4 *staged, float *y,
                             gptoss_mxfp4_tiled tiled = gptoss_mxfp4_tiled{nullptr, nullptr, nullptr}) {
    static int opted;
    const cudaError_t e = gptoss_smem_opt_in(mxfp4_mma_stream_kernel<NT, PARTS, OCC, F16, PRE, TILED>,
                                             (int)GPTOSS_MMA_STREAM_MAX_SMEM, &opted);
    if (e != cudaSuccess) return e;
    mxfp4_mma_stream_kernel<NT, PARTS, OCC, F16, PRE, TILED><<<grid, threads, smem, stream>>>(
        x, ldx, swz, gather, blocks, scales, b, shift, counts, offsets, E, K, N, swiglu, alpha, limit, tn, pc, staged,
        tiled, y, gptoss_mxfp4_mma_stream_f16_tables_on());
    return cudaGetLastError();
}

#define MS_E5_DEPTH 2 /* super-chunks of the e5m2 copy in flight a lane (64 bytes each) */

/* Launches mxfp4_mma_stream_e5_kernel<DEPTH> on an e5m2 copy (opting it into the large staging at its first launch, as
 * ms_launch). */
template <int DEPTH>
static cudaError_t ms_launch_e5(dim3 grid, int threads, size_t smem, cudaStream_t stream, const int32_t *gather,
                                const uint16_t *b, const int32_t *shift, const int32_t *counts, const int32_t *offsets,
                                int E, int K, int N, int swiglu, float alpha, float limit, const uint4 *staged,
                                const uint8_t *e5, float *y) {
    static int opted;
    const cudaError_t e = gptoss_smem_opt_in(mxfp4_mma_stream_e5_kernel<DEPTH>, (int)GPTOSS_MMA_STREAM_MAX_SMEM, &opted);
    if (e != cudaSuccess) return e;
    mxfp4_mma_stream_e5_kernel<DEPTH><<<grid, threads, smem, stream>>>(gather, b, shift, counts, offsets, E, K, N, swiglu,
                                                                       alpha, limit, staged, (const uint4 *)e5, y);
    return cudaGetLastError();
}

/* Dynamic shared memory of a launch of that shape: its staging (the F16 form's units have no lo part). */
static size_t ms_smem_of(const ms_shape_t *sh, int f16) {
    return (size_t)sh->tn * (size_t)ms_stride(sh->pc) * (sizeof(uint4) + (f16 ? 0 : sizeof(uint2)));
}

size_t gptoss_mxfp4_mma_stream_smem(int K, int max_pairs) {
    const ms_shape_t sh = ms_shape(K, max_pairs, 0);
    return ms_smem_of(&sh, 0);
}

/* Whether an F16 launch of that shape copies pre-staged rows (gptoss_mxfp4_mma_stream_f16_prestaged): mode 2's 8-token
 * tiles (the batched decode step's shape) from GPTOSS_MMA_STREAM_PRE_MIN pairs, with all of K for two CTAs an SM. Sets
 * *smem to its staging. */
static int ms_prestaged(const ms_shape_t *sh, int K, int max_pairs, size_t *smem) {
    const int nsc = (K + 127) / 128;
    const size_t bytes = (size_t)sh->tn * (size_t)ms_stride(nsc) * sizeof(uint4);
    if (max_pairs < GPTOSS_MMA_STREAM_PRE_MIN || sh->nt != 1 || sh->occ != 2 || bytes > GPTOSS_MMA_STREAM_MAX_SMEM / 2)
        return 0;
    *smem = bytes;
    return 1;
}

int gptoss_mxfp4_mma_stream_f16_prestaged(int K, int max_pairs) {
    if (K <= 0 || max_pairs <= 0) return 0;
    const ms_shape_t sh = ms_shape(K, max_pairs, 1);
    size_t smem;
    return ms_prestaged(&sh, K, max_pairs, &smem);
}

/* Row p of staged units (mma_stage_unit_f16, in ms_stage's unit order for one phase of all of K; zeros past K): x's row
 * gather[p] (or p) into out[p * units + u]. Grid (unit blocks, rows). */
__global__ void mxfp4_stage_f16_kernel(const float *x, int ldx, int swz, const int32_t *gather, int K, int units,
                                       uint4 *out) {
    const int p = blockIdx.y, u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= units) return;
    const int k = mma_f16_unit_k(u);
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (k < K) {
        const int src = gather ? gather[p] : p;
        mma_stage_unit_f16(x + (size_t)src * ldx, swz, K, k, &v);
    }
    out[(size_t)p * units + u] = v;
}

cudaError_t gptoss_mxfp4_stage_f16(const float *x, int ldx, int x_swz, const int32_t *gather, int P, int K, void *out,
                                   cudaStream_t stream) {
    if (!x || !out || P <= 0 || P > 65535 || K <= 0 || K % 32 || ldx < K || (x_swz && (ldx != K || ((uintptr_t)x & 15))) ||
        ((uintptr_t)x & 7) || ((uintptr_t)out & 15))
        return cudaErrorInvalidValue;
    const int units = gptoss_mxfp4_stage_f16_units(K);
    mxfp4_stage_f16_kernel<<<dim3((unsigned)((units + 255) / 256), (unsigned)P), 256, 0, stream>>>(x, ldx, x_swz, gather, K,
                                                                                                   units, (uint4 *)out);
    return cudaGetLastError();
}

/* Both forms: shift == NULL the bf16 one with `parts` activation parts, else the F16 one (parts 2). */
static cudaError_t ms_run(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                          const uint8_t *scales, const uint16_t *b, const int32_t *shift, const int32_t *counts,
                          const int32_t *offsets, int E, int K, int N, int swiglu, float alpha, float limit, int max_pairs,
                          int parts, int warps, const void *staged, const gptoss_mxfp4_tiled *tiled, float *y,
                          cudaStream_t stream) {
    /* the F16 form reads the tiled copy where one is given (blocks / scales then unused: NULL where the copy took the
     * experts' place) */
    const bool tl = shift && tiled && tiled->blocks && tiled->scales;
    if (!x || (!tl && (!blocks || !scales)) || !b || !counts || !offsets || !y || E <= 0 || K <= 0 || K % 32 || N <= 0 ||
        (swiglu && N % 2) || ldx < K || ldx % 2 || (x_swz && ldx != K) || ((uintptr_t)x & 7) ||
        (!tl && ((uintptr_t)blocks & 15)) || max_pairs <= 0 || (parts != 2 && parts != 3) || warps < 0 || warps > MS_MAX_WARPS)
        return cudaErrorInvalidValue;
    ms_shape_t sh = ms_shape(K, max_pairs, shift != NULL);
    size_t smem = ms_smem_of(&sh, shift != NULL);
    const int pre = staged && shift && ms_prestaged(&sh, K, max_pairs, &smem); /* else staged is not read */
    if (pre) sh.pc = (K + 127) / 128;
    if (shift && (parts != 2 || (x_swz && ((uintptr_t)x & 15)))) return cudaErrorInvalidValue;
    if (smem > GPTOSS_MMA_STREAM_MAX_SMEM && parts == 3) /* K too long to stage: the pass-wise kernel */
        return gptoss_mxfp4_mma(x, ldx, x_swz, gather, blocks, scales, b, counts, offsets, E, K, N, swiglu, alpha, limit,
                                y, stream);
    if (smem > GPTOSS_MMA_STREAM_MAX_SMEM) return cudaErrorInvalidValue; /* 2 parts: no pass-wise fallback */
    const int nt = sh.nt, tn = sh.tn, TN = 8 * nt, occ = sh.occ, pc = sh.pc;
    if (!warps) warps = max_pairs >= 16 ? 16 : 12; /* H200 timings: 16 from 4 rows, 12 below */
    if (occ == 3 && warps * 32 > ms_occ<3>::THREADS) warps = ms_occ<3>::THREADS / 32; /* its launch bounds */
    const long items_max = (long)E + (max_pairs + TN - 1) / TN;
    const long items = max_pairs < items_max ? max_pairs : items_max;
    if (items > 65535) return cudaErrorInvalidValue;
    const int tiles = (N + 15) / 16;
    const dim3 grid((unsigned)((tiles + warps - 1) / warps), (unsigned)items);
    const gptoss_mxfp4_tiled tv = tl ? *tiled : gptoss_mxfp4_tiled{nullptr, nullptr, nullptr};
#define MS_LAUNCH_T(NT_, P_, O_, F_, T_)                                                                              \
    ms_launch<NT_, P_, O_, F_, false, T_>(grid, warps * 32, smem, stream, x, ldx, x_swz, gather, blocks, scales, b, shift, \
                                          counts, offsets, E, K, N, swiglu, alpha, limit, tn, pc, NULL, y, tv)
#define MS_LAUNCH(NT_, P_, O_, F_) MS_LAUNCH_T(NT_, P_, O_, F_, false)
/* the F16 form: reading the tiled copy where one is given */
#define MS_LAUNCH_F(NT_, O_) (tl ? MS_LAUNCH_T(NT_, 2, O_, true, true) : MS_LAUNCH_T(NT_, 2, O_, true, false))
#define MS_LAUNCH_OCC(NT_, P_, F_) \
    (occ == 2 ? MS_LAUNCH(NT_, P_, 2, F_) : occ == 3 ? MS_LAUNCH(NT_, P_, 3, F_) : MS_LAUNCH(NT_, P_, 1, F_))
#define MS_LAUNCH_OCC_F(NT_) (occ == 2 ? MS_LAUNCH_F(NT_, 2) : occ == 3 ? MS_LAUNCH_F(NT_, 3) : MS_LAUNCH_F(NT_, 1))
#define MS_LAUNCH_PRE(T_)                                                                                              \
    ms_launch<1, 2, 2, true, true, T_>(grid, warps * 32, smem, stream, x, ldx, x_swz, gather, blocks, scales, b, shift,    \
                                       counts, offsets, E, K, N, swiglu, alpha, limit, tn, pc, (const uint4 *)staged, y, tv)
    if (pre && tl && tiled->e5) /* the e5m2 copy (gptoss_mxfp4_tile_e5): the same bits */
        return ms_launch_e5<MS_E5_DEPTH>(grid, warps * 32, smem, stream, gather, b, shift, counts, offsets, E, K, N, swiglu,
                                         alpha, limit, (const uint4 *)staged, tiled->e5, y);
    if (pre) return tl ? MS_LAUNCH_PRE(true) : MS_LAUNCH_PRE(false);
    if (shift) return nt == 4 ? MS_LAUNCH_F(4, 1) : nt == 2 ? MS_LAUNCH_OCC_F(2) : MS_LAUNCH_OCC_F(1);
    if (parts == 3) return nt == 2 ? MS_LAUNCH_OCC(2, 3, false) : MS_LAUNCH_OCC(1, 3, false);
    return nt == 2 ? MS_LAUNCH_OCC(2, 2, false) : MS_LAUNCH_OCC(1, 2, false);
#undef MS_LAUNCH_PRE
#undef MS_LAUNCH_OCC_F
#undef MS_LAUNCH_OCC
#undef MS_LAUNCH_F
#undef MS_LAUNCH
#undef MS_LAUNCH_T
}

cudaError_t gptoss_mxfp4_mma_stream(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                                    const uint8_t *scales, const uint16_t *b, const int32_t *counts,
                                    const int32_t *offsets, int E, int K, int N, int swiglu, float alpha, float limit,
                                    int max_pairs, int parts, int warps, float *y, cudaStream_t stream) {
    return ms_run(x, ldx, x_swz, gather, blocks, scales, b, NULL, counts, offsets, E, K, N, swiglu, alpha, limit, max_pairs,
                  parts, warps, NULL, NULL, y, stream);
}

cudaError_t gptoss_mxfp4_mma_stream_f16(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                                        const uint8_t *scales, const uint16_t *b, const int32_t *shift,
                                        const int32_t *counts, const int32_t *offsets, int E, int K, int N, int swiglu,
                                        float alpha, float limit, int max_pairs, int warps, const void *staged,
                                        const gptoss_mxfp4_tiled *tiled, float *y, cudaStream_t stream) {
    if (!shift || ((uintptr_t)staged & 15) ||
        (tiled && ((uintptr_t)tiled->blocks & 15 || (uintptr_t)tiled->scales & 1 || (uintptr_t)tiled->e5 & 15)))
        return cudaErrorInvalidValue;
    return ms_run(x, ldx, x_swz, gather, blocks, scales, b, shift, counts, offsets, E, K, N, swiglu, alpha, limit,
                  max_pairs, 2, warps, staged, tiled, y, stream);
}

/* ---------------------------------------------------------------- the tiled copy (gptoss_mxfp4_tile, kernels.h) */

size_t gptoss_mxfp4_tiled_bytes(int E, int N, int K) {
    return E <= 0 || N <= 0 || K <= 0 || K % 32 ? 0 : gptoss_mxfp4_tiled_first(E, 0, N, K) * 17;
}

/* One thread per unit u = (tile NSC + c) 64 + gptoss_mxfp4_tiled_slot(lane, r), tile = e tiles + i (kernels.h). */
__global__ void mxfp4_tile_kernel(const uint8_t *blocks, const uint8_t *scales, int N, int K, int swiglu, size_t units,
                                  uint4 *tb, uint8_t *ts) {
    const size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= units) return;
    int e, row, b;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    uint8_t s = 127;
    if (gptoss_mxfp4_tiled_source(u, N, K, swiglu, &e, &row, &b)) {
        const size_t at = ((size_t)e * N + row) * (K / 32) + b;
        v = ((const uint4 *)blocks)[at];
        s = scales[at];
    }
    tb[u] = v;
    ts[u] = s;
}

cudaError_t gptoss_mxfp4_tile(const uint8_t *blocks, const uint8_t *scales, int E, int N, int K, int swiglu, void *out,
                              gptoss_mxfp4_tiled *t, cudaStream_t stream) {
    if (!blocks || !scales || !out || !t || E <= 0 || N <= 0 || K <= 0 || K % 32 || (swiglu && N % 2) ||
        ((uintptr_t)blocks & 15) || ((uintptr_t)out & 15))
        return cudaErrorInvalidValue;
    const size_t units = gptoss_mxfp4_tiled_first(E, 0, N, K);
    uint4 *tb = (uint4 *)out;
    uint8_t *ts = (uint8_t *)out + units * 16;
    mxfp4_tile_kernel<<<(unsigned)((units + 255) / 256), 256, 0, stream>>>(blocks, scales, N, K, swiglu, units, tb, ts);
    t->blocks = (const uint8_t *)tb;
    t->scales = ts;
    t->e5 = NULL; /* no e5m2 copy yet (gptoss_mxfp4_tile_e5) */
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- the e5m2 copy (gptoss_mxfp4_tile_e5, kernels.h) */

size_t gptoss_mxfp4_tiled_e5_bytes(int E, int N, int K) { return gptoss_mxfp4_tiled_bytes(E, N, K) / 17 * 32; }

/* One thread per unit u of the tiled copy (expert u / per_expert): its 32 values as the F16 form's fp16 high bytes, by
 * the table decode the kernel runs (mxfp4_lut_scaled + mxfp4_lut_halves_from: the same values), in the order
 * gptoss_mxfp4_tile_e5 gives. A block whose magnitudes are all zero holds only signed zeros at any scale (the tables
 * at k = 0 give them). */
__global__ void mxfp4_tile_e5_kernel(const uint4 *tb, const uint8_t *ts, const int32_t *shift, size_t units,
                                     size_t per_expert, uint4 *out, int32_t *bad) {
    const size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= units) return;
    const uint4 v = tb[u];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    int k = (int)ts[u] - 127 - shift[u / per_expert];
    if (!((v.x | v.y | v.z | v.w) & 0x77777777u)) k = 0; /* signed zeros only */
    uint32_t o[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    if (k < -MXFP4_LUT_SCALED_MAX_K || k > MXFP4_LUT_SCALED_MAX_K) {
        atomicAdd(bad, 1);
    } else {
        uint32_t T0, T1;
        mxfp4_lut_scaled(k, &T0, &T1);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t h[4];
            mxfp4_lut_halves_from(w[i], T0, T1, h);
            o[2 * i] = __byte_perm(h[0], h[1], 0x7351);     /* high bytes of nibbles 0, 2, 1, 3 */
            o[2 * i + 1] = __byte_perm(h[2], h[3], 0x7351); /* 4, 6, 5, 7 */
        }
    }
    out[gptoss_mxfp4_e5_at(u, 0)] = make_uint4(o[0], o[1], o[2], o[3]);
    out[gptoss_mxfp4_e5_at(u, 1)] = make_uint4(o[4], o[5], o[6], o[7]);
}

cudaError_t gptoss_mxfp4_tile_e5(const gptoss_mxfp4_tiled *t, const int32_t *shift, int E, int N, int K, void *out,
                                 int32_t *bad, cudaStream_t stream) {
    if (!t || !t->blocks || !t->scales || !shift || !out || !bad || E <= 0 || N <= 0 || K <= 0 || K % 32 ||
        ((uintptr_t)t->blocks & 15) || ((uintptr_t)out & 15))
        return cudaErrorInvalidValue;
    const size_t units = gptoss_mxfp4_tiled_first(E, 0, N, K), per_expert = gptoss_mxfp4_tiled_first(1, 0, N, K);
    mxfp4_tile_e5_kernel<<<(unsigned)((units + 255) / 256), 256, 0, stream>>>(
        (const uint4 *)t->blocks, t->scales, shift, units, per_expert, (uint4 *)out, bad);
    return cudaGetLastError();
}
