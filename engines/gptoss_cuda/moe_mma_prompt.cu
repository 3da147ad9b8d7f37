/* moe_mma_prompt.cu — a prompt chunk's expert GEMMs on Hopper's warpgroup MMA straight from the MXFP4 weights
 * (gptoss_mxfp4_prompt_gemm, kernels.h): ys[rows of e] = xs[rows of e] . W_e^T for every expert e, with xs the fp16
 * rows tc.cu's fp16 experts path splits (each row times its own power of two) and W_e the expert's MXFP4 values times
 * 2^-shift_e, the values the fp16 expert cache holds. It stands for that path's per-expert cuBLAS GEMMs on the cache:
 * the same products, summed in another order.
 *
 * Why: from ~200 tokens a chunk's experts went to cuBLAS on the fp16 cache, whose 38 GB (1.6 GB a layer) are read
 * once per chunk whatever its length: a 512-token chunk spent ~16 ms of its ~22 on the experts, about the cache's
 * read time (H200, session 34). The MXFP4 weights are a quarter of those bytes, and with 64 rows of an expert per CTA
 * each decoded weight feeds 64 products, so the tensor cores, not the reads, bound the kernel. (A first form on
 * mma.sync, two m16 tiles and 64 rows a warp, B fragments by 16-byte shared loads: correct, but 141 TFLOP/s at 4,096
 * tokens where cuBLAS reaches ~440: docs/performance.md, session 34.)
 *
 * Shape: one CTA per (192 weight rows, 64 or 128 rows of one expert), three warpgroups:
 *  - each warp decodes its m16 tile's A fragments from the experts' tiled layout (gptoss_mxfp4_tile: a warp's
 *    super-chunk of a tile is 1 KB in one piece, each lane's two units its fragment rows' blocks) as the streaming
 *    kernel's F16 form does (mxfp4_lut.h, the block scale in the tables), two super-chunks ahead in registers and a
 *    few more prefetched into L2, and hands them to `wgmma` from registers;
 *  - B, the tile's rows, is read by the tensor cores from shared memory (K-major, 128-byte swizzle), copied there by
 *    the tensor copy engine 64 KB a phase (one thread issues the boxes of a 2D tensor map, an mbarrier a buffer), the
 *    next phase landing while one is read and a third still read by the products in flight; xs comes in
 *    gptoss_prompt_pos's order, the k slots of the decoded A fragments, so the boxes are rows as they are (every
 *    thread's cp.async with its address arithmetic cost ~40% of the kernel: session 35);
 *  - the products go straight into the fp32 sums, two half super-chunks in flight; where a launch has precise rows,
 *    each half's products go to a fresh accumulator added to the sums instead (the streaming kernel's per-super-chunk
 *    parts): the tensor cores' long accumulations drop low bits, and the precise rows' second fp16 parts need fp32's
 *    accuracy;
 *  - (expert, row tile) of a CTA come from a warp scan of the counts on the device (mma_tile_item): no host sync; CTAs
 *    are rastered in groups of items (mp_raster) so a group's rows of xs stay in L2 across the row blocks.
 * Needs the sm_90a target: built as PTX for compute_90 the kernel body is empty, and gptoss_mxfp4_prompt_gemm_ok says
 * no on any device other than compute capability 9.0. */
#include "engines/gptoss_cuda/kernels.h"

#include "engines/gptoss_cuda/env.h"
#include "engines/gptoss_cuda/moe_mma_common.cuh"
#include "engines/gptoss_cuda/tma_ring.cuh"

#include <cuda.h> /* CUtensorMap (types only: the encoder comes from the runtime's driver entry point) */
#include <cudaTypedefs.h>

#define MP_WG 3                            /* warpgroups a CTA (192 rows: 2,880 and 5,760 are multiples) */
#define MP_THREADS (128 * MP_WG)
#define MP_ROWS (64 * MP_WG)               /* weight rows a CTA */
#define MP_STAGE_BYTES (64 * 1024)         /* one staging phase of the tile's rows */
#define MP_STAGES 3                        /* phase buffers: the one read, the one landing, the one still read by
                                            * the products in flight (so no phase waits for the tensor cores) */
#define MP_SMEM (MP_STAGES * MP_STAGE_BYTES + 1024) /* 193 KB: one CTA an SM (+ 1 KB to align the atoms) */
#define MP_DEPTH 2                         /* super-chunks of weights in registers a lane */
#define MP_AHEAD 6                         /* super-chunks of a warp's weights prefetched into L2 ahead */

/* A tile of NT n8 tiles: 8 NT rows of xs (wgmma's n), a k16 step of them in shared memory (8 NT / 8 row groups x 2 k
 * cores x 128 B), the super-chunks a staging phase holds. */
template <int NT> struct mp_tile {
    /* B in wgmma's 128-byte swizzle: each super-chunk's rows as two atoms of 64 k (128 bytes a row, 8-row groups of
     * 1 KB, a row's 16-byte chunks xor its row within the group), ATOM_BYTES each */
    static constexpr int TOK = 8 * NT, ATOM_BYTES = TOK * 128, PH = MP_STAGE_BYTES / (2 * ATOM_BYTES);
    static_assert(PH % MP_DEPTH == 0, "a phase holds whole rounds of the weights' ring");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MP_HAS_WGMMA 1
#else
#define MP_HAS_WGMMA 0
#endif

/* wgmma's shared-memory matrix descriptor, K-major without swizzle: 8-row x 16-byte core matrices of 128 contiguous
 * bytes, the next core matrix along K at lbo bytes, the next 8 rows at sbo bytes. */
[[maybe_unused]] static __device__ __forceinline__ uint64_t mp_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((smem_addr >> 4) & 0x3FFFu) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32);
}
/* The same, K-major in the 128-byte swizzle (mode 1 in bits 62-63; the leading offset unused, the next 8 rows 1 KB on):
 * smem_addr is the atom's 1 KB-aligned start plus 32 bytes a k16 step into it, the hardware applying the xor. */
[[maybe_unused]] static __device__ __forceinline__ uint64_t mp_desc_sw128(uint32_t smem_addr) {
    return mp_desc(smem_addr, 16, 1024) | (1ull << 62);
}

/* d (+)= a b: a the warpgroup's 64 x 16 fp16 slice in registers (each warp its 16 rows in mma.m16n8k16's A layout), b
 * 16 x 8 NT from the descriptor, fp32 d in mma.m16n8's C layout per n8 tile. accumulate 0: d = a b. */
template <int NT>
[[maybe_unused]] static __device__ __forceinline__ void mp_wgmma(float (&d)[NT][4], const uint32_t a[4], uint64_t desc,
                                                                 int accumulate) {
#if MP_HAS_WGMMA
    static_assert(NT == 8 || NT == 16, "n64 or n128");
    if constexpr (NT == 8)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                     "}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
                       "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
                       "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                       "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
                       "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                       "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
                       "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
                       "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                     "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                     "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                     "}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
                       "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
                       "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                       "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
                       "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                       "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
                       "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
                       "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
                       "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
                       "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                       "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]),
                       "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
                       "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
                       "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
                       "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
                       "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#else
    (void)d; (void)a; (void)desc; (void)accumulate;
#endif
}

[[maybe_unused]] static __device__ __forceinline__ void mp_fence() {
#if MP_HAS_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
[[maybe_unused]] static __device__ __forceinline__ void mp_commit() {
#if MP_HAS_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/* Waits for all but the latest N committed groups; the registers named (the accumulators, the A fragments a group read)
 * are then marked as used, so the compiler neither reads the first early nor gives the second, which the tensor cores
 * may still be reading, to other values before it. */
template <int N> [[maybe_unused]] static __device__ __forceinline__ void mp_wait_group() {
#if MP_HAS_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
template <int NT> [[maybe_unused]] static __device__ __forceinline__ void mp_touch(float (&d)[NT][4]) {
#pragma unroll
    for (int n = 0; n < NT; n++) asm volatile("" : "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])::"memory");
}
[[maybe_unused]] static __device__ __forceinline__ void mp_touch(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int j = 0; j < 4; j++) asm volatile("" : "+r"(a[j][0]), "+r"(a[j][1]), "+r"(a[j][2]), "+r"(a[j][3])::"memory");
}

/* One thread: stages phase ph (super-chunks PH ph ..) of the tile's rows (xs rows row0 .. row0 + TOK - 1, values in
 * gptoss_prompt_pos's order) at shared address buf with the tensor copy engine, completing on bar: super-chunk cl of
 * the phase as two atoms of 64 k (2 cl, 2 cl + 1; ATOM_BYTES each), TOK rows of 128 bytes in the 128-byte swizzle,
 * which the copy applies (tmap, mp_tensor_map). Rows past the tile's are the next expert's, or zeros past xs: their
 * products land in columns never stored. */
template <int NT>
[[maybe_unused]] static __device__ __forceinline__ void mp_stage(const CUtensorMap *tmap, int row0, int ph, int nsc,
                                                                 uint32_t buf, uint64_t *bar) {
    using T = mp_tile<NT>;
    const int c0 = T::PH * ph, ncs = min(T::PH, nsc - c0);
    ring_expect(bar, (uint32_t)(2 * ncs * T::ATOM_BYTES));
    for (int a = 0; a < 2 * ncs; a++)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     ::"r"(buf + (uint32_t)(a * T::ATOM_BYTES)), "l"((uint64_t)tmap), "r"(64 * (2 * c0 + a)), "r"(row0),
                     "r"(ring_smem_addr(bar))
                     : "memory");
}

/* Steps 2 ww, 2 ww + 1's A fragments of a half super-chunk from the fp16 pairs hv[r] of word ww of each row r. */
[[maybe_unused]] static __device__ __forceinline__ void mp_frags_of_word(const uint32_t (&hv)[2][4], int ww,
                                                                         uint32_t (&a)[4][4]) {
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        a[2 * ww + jj][0] = hv[0][2 * jj];
        a[2 * ww + jj][1] = hv[1][2 * jj];
        a[2 * ww + jj][2] = hv[0][2 * jj + 1];
        a[2 * ww + jj][3] = hv[1][2 * jj + 1];
    }
}

/* The A fragments of steps 4h .. 4h + 3 of a super-chunk (words 2h, 2h + 1 of each row's block; ms_superchunk_f16's
 * order: step j = 2 wi + jj takes nibbles 4jj, 4jj + 1 and 4jj + 2, 4jj + 3 of word wi) from the lane's units q, with
 * its rows' tables and fp16 multipliers (mp_scales). No branch: a branch between the wgmma of two halves makes ptxas
 * serialize them (C7515), and the tables' form cannot be chosen per warpgroup. */
[[maybe_unused]] static __device__ __forceinline__ void mp_decode_half(const uint4 q[2], const uint32_t tb[2][3], int h,
                                                                       uint32_t (&a)[4][4]) {
#pragma unroll
    for (int ww = 0; ww < 2; ww++) {
        const int wi = 2 * h + ww;
        uint32_t hv[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint32_t w = wi == 0 ? q[r].x : wi == 1 ? q[r].y : wi == 2 ? q[r].z : q[r].w;
            mxfp4_lut_halves_from(w, tb[r][0], tb[r][1], hv[r]);
#pragma unroll
            for (int i = 0; i < 4; i++) hv[r][i] = mma_hmul2_bits(hv[r][i], tb[r][2]);
        }
        mp_frags_of_word(hv, ww, a);
    }
}

/* A lane's decode of its two rows' blocks of one super-chunk, k = s - 127 - shift: the magnitude tables times 2^k and
 * a multiplier of 1 (exact) where every block of the warp lies within MXFP4_LUT_SCALED_MAX_K binades of its expert's
 * shift and the tables are on, else the plain tables and the fp16 2^k: the F16 form's two decodes, the same bits. */
[[maybe_unused]] static __device__ __forceinline__ void mp_scales(const uint32_t s[2], int sh, int tab_on, uint32_t tb[2][3]) {
    const int k0 = (int)s[0] - 127 - sh, k1 = (int)s[1] - 127 - sh, kk = MXFP4_LUT_SCALED_MAX_K;
    const bool tab = __all_sync(0xffffffffu, tab_on && k0 >= -kk && k0 <= kk && k1 >= -kk && k1 <= kk);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int k = r ? k1 : k0;
        uint32_t t0, t1;
        mxfp4_lut_scaled(tab ? k : 0, &t0, &t1);
        tb[r][0] = t0;
        tb[r][1] = t1;
        tb[r][2] = tab ? 0x3C003C00u : mma_f16_scale2(k); /* fp16 1.0 pair, or 2^k */
    }
}

/* Super-chunk c of a warp's m16 tile into L2 (its 1 KB of units and 64 scale bytes from the tile's first unit u0 of
 * the tiled copy), for the lane that issues it: a lane's registers hold only MP_DEPTH super-chunks. */
[[maybe_unused]] static __device__ __forceinline__ void mp_prefetch(gptoss_mxfp4_tiled tiled, size_t u0, int c) {
    const size_t u = u0 + 64 * (size_t)c;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], 1024;\n" ::"l"(tiled.blocks + 16 * u) : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], 64;\n" ::"l"(tiled.scales + u) : "memory");
}

/* E5 (the e5m2 copy, kernels.h gptoss_mxfp4_tile_e5): a lane's two rows' 64 bytes of super-chunk c by mma_load_e5; the
 * half of mp_decode_half from them (the same fp16 values, already scaled: no tables, no multiply); the warp's 2 KB of
 * super-chunk c into L2 (from the tile's first unit u0). */
[[maybe_unused]] static __device__ __forceinline__ void mp_decode_half_e5(uint4 (&q)[2][2], int h, uint32_t (&a)[4][4]) {
    /* the bytes pinned here, after the caller's wait: else ptxas computes the fp16 pairs early, in registers the wgmma
     * in flight still reads, and serializes the wgmma (C7519 / C7520) */
#pragma unroll
    for (int r = 0; r < 2; r++)
        asm volatile("" : "+r"(q[r][h].x), "+r"(q[r][h].y), "+r"(q[r][h].z), "+r"(q[r][h].w)::"memory");
#pragma unroll
    for (int ww = 0; ww < 2; ww++) { /* word wi = 2 h + ww of each row's block: its bytes in q[r][h], words 2 ww, + 1 */
        uint32_t hv[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 v = q[r][h];
            mma_e5_halves(ww ? v.z : v.x, ww ? v.w : v.y, hv[r]);
        }
        mp_frags_of_word(hv, ww, a);
    }
}
[[maybe_unused]] static __device__ __forceinline__ void mp_prefetch_e5(const uint8_t *e5, size_t u0, int c) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], 2048;\n" ::"l"(e5 + 32 * (u0 + 64 * (size_t)c)) : "memory");
}

/* The (tile item, row block) of this CTA. The grid is (items, row blocks), launched in linear order, x fastest. group
 * 0: the CTA's own (item, row block), so a wave holds the same row block of every item: each expert's rows of weights
 * are read from HBM about once, but every item's rows of xs once per row block, which no longer stays in L2 from a few
 * thousand rows (4,096 tokens: 94 MB of xs read 30 times by gate_up). group g: items in groups of g, each group's row
 * blocks in turn (the group's items fastest), so a group's rows of xs (g x 737 KB at 128 rows of 2,880) stay in L2
 * while every row block reads them, and an expert's weights are still read about once. */
[[maybe_unused]] static __device__ __forceinline__ void mp_raster(int group, int *item, int *rb) {
    if (group <= 0) {
        *item = (int)blockIdx.x;
        *rb = (int)blockIdx.y;
        return;
    }
    const long nrb = gridDim.y, lin = blockIdx.x + (long)blockIdx.y * gridDim.x, span = (long)group * nrb;
    const long g = lin / span, r = lin % span;
    const int size = (int)min((long)group, (long)gridDim.x - g * group); /* the last group may be smaller */
    *item = (int)(g * group + r % size);
    *rb = (int)(r / size);
}

/* One CTA's tile: rows row0 .. row0 + ntok - 1 of expert e (rows_e in all) times the weight rows of row block rb, into
 * ys (see the kernel below); NT n8 tiles of those rows staged through tmap (boxes of 8 NT rows), buffers at smem, their
 * barriers full. */
template <int NT, bool PART, bool E5>
static __device__ __forceinline__ void mp_tile_gemm(const CUtensorMap *tmap, const gptoss_mxfp4_tiled &tiled, int e,
                                                    int rows_e, long row0, int ntok, int rb, int sh, int K, int N,
                                                    int swiglu, float *ys, int tab_on, uint8_t *smem, uint64_t *full) {
#if MP_HAS_WGMMA
    using T = mp_tile<NT>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int nsc = (K + 127) / 128, nph = (nsc + T::PH - 1) / T::PH;
    const bool once = rows_e <= T::TOK; /* no other CTA of this row block reads these weights */
    const uint32_t sbase = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u; /* the swizzle's atoms */

    /* the warp's m16 tile; a tile past N reads the last one (every warp runs every wgmma; its stores are skipped) */
    const int ntiles = (N + 15) / 16, tile = rb * (MP_ROWS / 16) + warp, tl = min(tile, ntiles - 1);
    const uint4 *tw[2];
    const uint16_t *ts;
    uint32_t ssel;
    mma_tiled_lane(tiled, e, tl, N, K, lane, tw, &ts, &ssel);
    const size_t u0 = gptoss_mxfp4_tiled_first(e, tl, N, K);
    /* E5: the e5m2 copy's 64 bytes a lane and super-chunk, one super-chunk in registers (the same bytes in flight as
     * two of the MXFP4 tiles, within the 168 registers) */
    constexpr int D = E5 ? 1 : MP_DEPTH;
    uint4 q[MP_DEPTH][2], q5[1][2][2];
    uint32_t s[MP_DEPTH][2];
    const uint4 *wp = E5 ? (const uint4 *)tiled.e5 + 2 * u0 + lane : NULL; /* mma_load_e5 */
#pragma unroll
    for (int d = 0; d < D; d++)
        if (d < nsc) {
            if constexpr (E5) mma_load_e5(wp, d, once, q5[d]);
            else mma_load_tiled(tw, &ts, once, q[d], &s[d][0]); /* super-chunk d; its scale word whole */
        }
    if (lane == 0) /* the next super-chunks of the tile into L2 */
        for (int c = D; c < D + MP_AHEAD && c < nsc; c++) {
            if constexpr (E5) mp_prefetch_e5(tiled.e5, u0, c);
            else mp_prefetch(tiled, u0, c);
        }

    float acc[NT][4], part[PART ? NT : 1][4];
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
#pragma unroll
    for (int n = 0; n < (PART ? NT : 1); n++)
#pragma unroll
        for (int i = 0; i < 4; i++) part[n][i] = 0.0f;
    uint32_t a[2][4][4]; /* PART: a[0] only */
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) a[h][j][i] = 0u;
    if (threadIdx.x == 0) {
        for (int b = 0; b < MP_STAGES; b++) ring_bar_init(&full[b], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        mp_stage<NT>(tmap, (int)row0, 0, nsc, sbase, &full[0]);
    }
    /* Per half super-chunk h: PART waits for the previous half's products (none the first time), adds them to the sums
     * (part is zero before the first), decodes into a[0] and starts 4 products into part; else it waits for the
     * products of two halves ago (which read a[h]), decodes into a[h] and starts 4 products into acc. Every wait
     * unconditional and no accumulator written in between: ptxas keeps the wgmma pipeline (C7515 otherwise).
     * Phase ph + 1 is staged while phase ph's products run, into the buffer phase ph - 2 was read from: every warp has
     * waited for those products (a phase has at least two halves, and each half waits for all but the last group)
     * before the barrier that starts phase ph, so no phase waits for the tensor cores to drain. */
    for (int ph = 0; ph < nph; ph++) {
        __syncthreads(); /* every warp is past the products that read the buffer phase ph + 1 lands in */
        if (threadIdx.x == 0 && ph + 1 < nph)
            mp_stage<NT>(tmap, (int)row0, ph + 1, nsc, sbase + (uint32_t)(((ph + 1) % MP_STAGES) * MP_STAGE_BYTES),
                         &full[(ph + 1) % MP_STAGES]);
        ring_wait(&full[ph % MP_STAGES], (uint32_t)((ph / MP_STAGES) & 1));
        const uint32_t buf = sbase + (uint32_t)((ph % MP_STAGES) * MP_STAGE_BYTES);
        const int cb = T::PH * ph, ce = min(cb + T::PH, nsc);
        for (int c0 = cb; c0 < ce; c0 += D) {
#pragma unroll
            for (int d = 0; d < D; d++) { /* ring slot d holds super-chunk c (PH is a multiple of it) */
                const int c = c0 + d;
                if (c >= ce) break;
                uint32_t tb[2][3];
                if constexpr (!E5) {
                    uint32_t sd[2];
                    mma_tiled_scales(s[d][0], ssel, sd);
                    mp_scales(sd, sh, tab_on, tb);
                }
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint32_t(&ah)[4][4] = a[PART ? 0 : h];
                    if constexpr (PART) {
                        mp_wait_group<0>();
                        mp_touch<NT>(part);
                        mp_touch(ah);
#pragma unroll
                        for (int n = 0; n < NT; n++)
#pragma unroll
                            for (int i = 0; i < 4; i++) acc[n][i] += part[n][i];
                    } else {
                        mp_wait_group<1>();
                        mp_touch(ah);
                    }
                    if constexpr (E5) mp_decode_half_e5(q5[d], h, ah);
                    else mp_decode_half(q[d], tb, h, ah);
                    mp_fence();
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const uint64_t desc =
                            mp_desc_sw128(buf + (uint32_t)((2 * (c - cb) + h) * T::ATOM_BYTES + 32 * j)); /* step 4 h + j */
                        if constexpr (PART) mp_wgmma<NT>(part, ah[j], desc, j > 0);
                        else mp_wgmma<NT>(acc, ah[j], desc, 1);
                    }
                    mp_commit();
                }
                if (c + D < nsc) {
                    if constexpr (E5) mma_load_e5(wp, c + D, once, q5[d]);
                    else mma_load_tiled(tw, &ts, once, q[d], &s[d][0]); /* c + D */
                }
                if (lane == 0 && c + D + MP_AHEAD < nsc) {
                    if constexpr (E5) mp_prefetch_e5(tiled.e5, u0, c + D + MP_AHEAD);
                    else mp_prefetch(tiled, u0, c + D + MP_AHEAD);
                }
            }
        }
    }
    mp_wait_group<0>();
    mp_touch(a[0]);
    mp_touch(a[1]);
    if constexpr (PART) {
        mp_touch<NT>(part);
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[n][i] += part[n][i];
    } else {
        mp_touch<NT>(acc);
    }
    if (tile >= ntiles) return;
    /* acc[n][0..1]: fragment row g, rows 8 n + 2 t, + 1 of the tile; [2..3]: fragment row g + 8. Their weight rows:
     * 16 tile + 2 g + r with swiglu (gate, up side by side), else 16 tile + g + 8 r. */
    const int w0 = swiglu ? 16 * tile + 2 * g : 16 * tile + g, w1 = swiglu ? w0 + 1 : w0 + 8;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {
            const int j = 8 * n + 2 * t + cc;
            if (j >= ntok) continue;
            float *y = ys + (size_t)(row0 + j) * N;
            if (swiglu && w1 < N) {
                *(float2 *)(y + w0) = make_float2(acc[n][cc], acc[n][2 + cc]);
            } else {
                if (w0 < N) y[w0] = acc[n][cc];
                if (w1 < N) y[w1] = acc[n][2 + cc];
            }
        }
#else
    (void)tmap; (void)tiled; (void)e; (void)rows_e; (void)row0; (void)ntok; (void)rb; (void)sh; (void)K; (void)N;
    (void)swiglu; (void)ys; (void)tab_on; (void)smem; (void)full;
#endif
}

/* Grid (tile items, ceil(N / MP_ROWS)), mapped to (item, row block) by mp_raster; MP_THREADS threads; MP_SMEM bytes
 * of dynamic shared memory. NT n8 tiles (64 or 128 rows of xs a CTA; tmap's boxes); with 128, an item of 64 rows or
 * fewer (an expert's last rows) takes the 64-row tile (tmap64's boxes): it decodes as many weights but runs half the
 * products. PART: each half super-chunk's products into a fresh accumulator added to the fp32 sums (the precise rows'
 * launches: the tensor cores' long accumulations drop low bits); else straight into the sums, two halves' products in
 * flight (a's two buffers). */
template <int NT, bool PART, bool E5>
__global__ void __launch_bounds__(MP_THREADS, 1)
    mxfp4_prompt_gemm_kernel(const __grid_constant__ CUtensorMap tmap, const __grid_constant__ CUtensorMap tmap64,
                             gptoss_mxfp4_tiled tiled, const int32_t *shift, const int32_t *counts, const int32_t *offsets,
                             int precise, int E, int K, int N, int swiglu, float *ys, int tab_on, int group) {
#if MP_HAS_WGMMA
    extern __shared__ __align__(1024) uint8_t mp_smem[];
    __shared__ uint64_t full[MP_STAGES]; /* phase ph's rows landed in buffer ph % MP_STAGES: its use ph / MP_STAGES */
    const int lane = threadIdx.x & 31;
    int item, rb;
    mp_raster(group, &item, &rb);
    int e, tt;
    const int tok = 8 * NT;
    if (!mma_tile_item(counts, precise ? counts + E : NULL, E, tok, item, lane, &e, &tt)) return;
    const int rows_e = counts[e] + (precise ? counts[E + e] : 0);
    const long row0 = (long)offsets[e] + (precise ? offsets[E + e] : 0) + (long)tt * tok;
    const int ntok = min(tok, rows_e - tt * tok), sh = shift[e];
    if constexpr (NT == 16) {
        if (ntok <= 64) {
            mp_tile_gemm<8, PART, E5>(&tmap64, tiled, e, rows_e, row0, ntok, rb, sh, K, N, swiglu, ys, tab_on, mp_smem, full);
            return;
        }
    }
    mp_tile_gemm<NT, PART, E5>(&tmap, tiled, e, rows_e, row0, ntok, rb, sh, K, N, swiglu, ys, tab_on, mp_smem, full);
#else
    (void)tmap; (void)tmap64; (void)tiled; (void)shift; (void)counts; (void)offsets; (void)precise; (void)E; (void)K;
    (void)N; (void)swiglu; (void)ys; (void)tab_on; (void)group;
#endif
}

/* The driver's tensor-map encoder, through the runtime (no link to libcuda); NULL where the driver has none. */
static PFN_cuTensorMapEncodeTiled_v12000 mp_encoder(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = NULL;
        return (PFN_cuTensorMapEncodeTiled_v12000)f;
    }();
    return fn;
}

/* The tensor map mp_stage copies xs through: rows of gptoss_prompt_row(K) fp16 values, boxes of 64 values x tok rows
 * in the 128-byte swizzle, zeros past the last row. */
static cudaError_t mp_tensor_map(CUtensorMap *m, const uint16_t *xs, long rows, int K, int tok) {
    const PFN_cuTensorMapEncodeTiled_v12000 enc = mp_encoder();
    if (!enc) return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {(cuuint64_t)gptoss_prompt_row(K), (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)gptoss_prompt_row(K) * sizeof(uint16_t)};
    const cuuint32_t box[2] = {64, (cuuint32_t)tok}, elem[2] = {1, 1};
    const CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)xs, dims, strides, box, elem,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* mp_raster's group: LLMR_GPTOSS_PROMPT_MMA_GROUP (read once; 0 = the grid's own order), default 8. */
static int mp_group(void) {
    static const int group = gptoss_env_int("LLMR_GPTOSS_PROMPT_MMA_GROUP", 8, 0, 1 << 16);
    return group;
}

/* Launches mxfp4_prompt_gemm_kernel<NT, PART, E5>, opting it into its shared memory at its first launch. */
template <int NT, bool PART, bool E5>
static cudaError_t mp_launch(long items, const uint16_t *xs, long rows, const gptoss_mxfp4_tiled *tiled,
                             const int32_t *shift, const int32_t *counts, const int32_t *offsets, int precise, int E,
                             int K, int N, int swiglu, float *ys, cudaStream_t stream) {
    static int opted;
    cudaError_t e = gptoss_smem_opt_in(mxfp4_prompt_gemm_kernel<NT, PART, E5>, MP_SMEM, &opted);
    if (e != cudaSuccess) return e;
    CUtensorMap tmap, tmap64;
    e = mp_tensor_map(&tmap, xs, rows, K, mp_tile<NT>::TOK);
    if (e == cudaSuccess) e = NT == 8 ? cudaSuccess : mp_tensor_map(&tmap64, xs, rows, K, 64);
    if (e != cudaSuccess) return e;
    if (NT == 8) tmap64 = tmap;
    const dim3 grid((unsigned)items, (unsigned)((N + MP_ROWS - 1) / MP_ROWS));
    mxfp4_prompt_gemm_kernel<NT, PART, E5><<<grid, MP_THREADS, MP_SMEM, stream>>>(
        tmap, tmap64, *tiled, shift, counts, offsets, precise, E, K, N, swiglu, ys, gptoss_mxfp4_mma_stream_f16_tables_on(),
        mp_group());
    return cudaGetLastError();
}

/* Asked per launch (the runtime keeps the attributes; a few calls a layer): on any other device than compute
 * capability 9.0 the kernel's body is empty (the compute_90 PTX has no wgmma), and a process may hold models on
 * several cards. A driver without the tensor-map encoder (before CUDA 12) cannot stage its rows: no either, so
 * that the engine keeps the checkpoint's layout and cuBLAS there instead of failing every prompt. */
int gptoss_mxfp4_prompt_gemm_ok(void) {
    int dev = 0, major = 0, minor = 0;
    return mp_encoder() && cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 && minor == 0;
}

cudaError_t gptoss_mxfp4_prompt_gemm(const uint16_t *xs, const gptoss_mxfp4_tiled *tiled, const int32_t *shift,
                                     const int32_t *counts, const int32_t *offsets, int precise, int E, int rows, int K,
                                     int N, int swiglu, float *ys, cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (!xs || !tiled || !tiled->blocks || !tiled->scales || !shift || !counts || !offsets || !ys || E <= 0 ||
        K <= 0 || K % 32 || N <= 0 || (swiglu && N % 2) || ((uintptr_t)xs & 15))
        return cudaErrorInvalidValue;
    if (!gptoss_mxfp4_prompt_gemm_ok()) return cudaErrorNotSupported;
    /* 128 rows of xs a CTA where the experts average LLMR_GPTOSS_PROMPT_MMA_WIDE (64) or more, else 64; the precise
     * rows' launches on 64 with parts. 64: H200, 640 tokens (80 rows an expert) 25.2 ms on 64-row tiles, 21.5-21.7 on
     * 128; 40 no better (session 35, call 7) */
    static const int wide_min = gptoss_env_int("LLMR_GPTOSS_PROMPT_MMA_WIDE", 64, 0, 1 << 20);
    const int wide = !precise && rows >= (long)wide_min * E;
    const int tok = wide ? 128 : 64;
    long items = ((long)rows + tok - 1) / tok + E; /* >= the sum of ceil(rows_e / tok) */
    if (items > rows) items = rows;
    /* the e5m2 copy where the load made one (LLMR_GPTOSS_MOE_E5) and LLMR_GPTOSS_PROMPT_E5 is not 0: the same bits */
    static const int e5_on = gptoss_env_int("LLMR_GPTOSS_PROMPT_E5", 1, 0, 1);
    const bool e5 = e5_on && tiled->e5 && !((uintptr_t)tiled->e5 & 15);
#define MP_GO(NT_, PART_)                                                                                                  \
    (e5 ? mp_launch<NT_, PART_, true>(items, xs, rows, tiled, shift, counts, offsets, precise, E, K, N, swiglu, ys, stream) \
        : mp_launch<NT_, PART_, false>(items, xs, rows, tiled, shift, counts, offsets, precise, E, K, N, swiglu, ys, stream))
    const cudaError_t r = precise ? MP_GO(8, true) : wide ? MP_GO(16, false) : MP_GO(8, false);
#undef MP_GO
    return r;
}
