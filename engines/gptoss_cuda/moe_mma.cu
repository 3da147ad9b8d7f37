/* moe_mma.cu — the MXFP4 expert matmul on tensor cores (gptoss_mxfp4_mma, kernels.h), for any number
 * of tokens per expert: the batched decode step's MoE (LLMR_GPTOSS_MOE_MMA_STREAM=0; by default the same
 * products run on gptoss_mxfp4_mma_stream, moe_mma_stream.cu), the T = 1 decode experts (LLMR_GPTOSS_MOE_MMA_T1=1) and the prefill experts
 * (LLMR_GPTOSS_MOE_MMA_PREFILL=1). Measured on the H200 (docs/performance.md): 64 streams 1,099 -> 1,285
 * out tok/s; slower than the fused decode kernels below ~32 rows, at T = 1 and at prefill sizes; it is
 * latency-bound (12 serial K passes per CTA, a barrier each).
 *
 * Why this shape:
 *  - one CTA per (expert, tile of MMA_BM weight rows); the grid covers all E experts and the CTA reads
 *    counts[e] / offsets[e] on the device (empty experts exit at once), so no count goes to the host;
 *  - the weight tile is read from global memory once per tile of MMA_BN of the expert's tokens (once
 *    per launch whenever an expert has <= MMA_BN tokens: every expert of a 64-row decode step but the
 *    rare busy one) and decoded in registers, never written out as bf16;
 *  - mma.sync m16n8k16 bf16 x bf16 -> fp32: A = 16 weight rows x 16 k, B = 16 k x 8 tokens. An MXFP4
 *    value fp4 * 2^(s-127) is a bf16 exactly (bf16 has fp32's exponent) for 2 <= s <= 252: the e2m1
 *    bits placed at bf16 bits 6..8 (+ sign at 15) read as fp4 * 2^-126 (0.5 becomes a bf16 subnormal),
 *    and one bf16 multiply by 2^(s-1) makes the value exactly for 2 <= s <= 128 (2^(s-1) must be a
 *    bf16; checkpoint scales sit far below 128); other scales
 *    take the per-value rule of tc.cu's dequantization (fp32 product, upper 16 bits), so the weights
 *    used are bit for bit those of gptoss_mxfp4_dequant;
 *  - activations are fp32 and stay so: each is split x = hi + mid + lo (hi = bf16(x), mid = bf16(x - hi),
 *    lo = bf16(x - hi - mid), as tc.h with S = 3; each difference is exact in fp32) and the three parts
 *    are multiplied into the same fp32 accumulator: ~2^-25 of x unrepresented, fp32 level. With two parts
 *    (~2^-17) a batched row on the full-size 20b ended ~1e-2 away from the same request alone in the
 *    logits (a greedy flip at a top-2 margin of 0.0164, H200); the third mma per step costs little, the
 *    kernel is bound by its weight passes, not by tensor work;
 *  - the dot product is order-free inside an mma, so lane (g, t) of a warp loads 16 contiguous bytes
 *    (one whole 32-value MXFP4 block, block 4c + t of a 128-value super-chunk c) per row and the
 *    activations are staged in shared memory in the matching k permutation: no shuffles; one E8M0
 *    scale per lane and row;
 *  - gate_up (swiglu = 1): the 16 rows of an m16 tile are 8 gate rows (2a) over their 8 up rows
 *    (2a + 1), so a lane holds gate and up of the same activation and token and applies the clamped
 *    SwiGLU in registers; the result is written per pair (y [P, N/2]);
 *  - each output element has one writer and a k order fixed by the shapes (not by the token count or
 *    by the other tokens), so results are deterministic and a token's value does not depend on which
 *    tokens share its expert. */
#include "engines/gptoss_cuda/kernels.h"

#include <cuda_bf16.h>

#define MMA_BM 128    /* weight rows per CTA: 4 warps x 32 rows (two m16 tiles) */
#define MMA_WARPS 4
#define MMA_BN 32     /* tokens per pass: four n8 tiles */
#define MMA_KC 256    /* k values staged per pass (8 MXFP4 blocks, two super-chunks) */
#define MMA_UNITS (MMA_KC / 4) /* units per token and pass: 4 k values (16 bytes hi + mid, 8 bytes lo) */
#define MMA_STRIDE (MMA_UNITS + 1) /* units per staged token row (odd: tokens fall on other banks) */
#define MMA_SMEM ((size_t)MMA_BN * MMA_STRIDE * (sizeof(uint4) + sizeof(uint2))) /* > 48 KB: dynamic */

#include "engines/gptoss_cuda/moe_mma_common.cuh"

/* The bf16 (as bits) of MXFP4 nibble nib with scale byte s, as the kernels use it (for the tests). */
__global__ void mma_fp4_table_kernel(uint16_t *out) {
    const uint32_t s = blockIdx.x, nib = threadIdx.x; /* 256 scales x 16 nibbles */
    const uint32_t w = nib | (nib << 16);             /* nibble 0 and nibble 4 */
    const uint32_t v = mma_fp4_pair_any(w, 0, s);
    out[s * 16 + nib] = (uint16_t)(v & 0xffffu);
    if ((v >> 16) != (v & 0xffffu)) out[s * 16 + nib] ^= 0x5a5a; /* both halves must agree */
}

cudaError_t gptoss_mxfp4_mma_table(uint16_t *out, cudaStream_t s) {
    mma_fp4_table_kernel<<<256, 16, 0, s>>>(out);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ the kernel */
/* A lane's weights of pass kc: block kc*8 + 4s + t of its rows rows[mt][r] (zeros past K or N; their
 * scale byte 127 keeps the fast path). once: the tile is read by one token pass only, so the loads are
 * marked evict-first (it must not push reusable lines out of L2); else plain cached loads, since the
 * next pass over the expert's tokens reads the same lines again. */
static __device__ __forceinline__ void mma_load_w(const uint8_t *eb, const uint8_t *es, const int rows[2][2], int N,
                                                  int NC, int kc, int t, bool once, uint4 wq[2][2][2],
                                                  uint32_t ws[2][2][2]) {
#pragma unroll
    for (int s = 0; s < 2; s++) {
        const int b = kc * 8 + 4 * s + t;
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = rows[mt][r];
                const bool ok = b < NC && row < N;
                const size_t idx = (size_t)row * NC + b;
                const uint4 *src = (const uint4 *)(eb + idx * 16);
                wq[s][mt][r] = !ok ? make_uint4(0u, 0u, 0u, 0u) : once ? __ldcs(src) : __ldg(src);
                ws[s][mt][r] = !ok ? 127u : once ? (uint32_t)__ldcs(es + idx) : (uint32_t)__ldg(es + idx);
            }
    }
}

/* A warp's accumulators (2 m16 tiles x 4 n8 tiles x 4 fp32) set to zero. */
static __device__ __forceinline__ void mma_zero(float a[2][4][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) a[mt][nt][i] = 0.0f;
}

/* The products of one staged pass: 2 super-chunks x 8 k16 steps; A decoded per step in registers, B
 * (hi and lo) from shared memory, both into acc. FAST: every scale of the warp is in the exact bf16
 * range, so the decode is branch-free; else each value goes through mma_fp4_pair_any. */
template <bool FAST>
static __device__ __forceinline__ void mma_pass(const uint4 wq[2][2][2], const uint32_t ws[2][2][2], const uint4 *xs,
                                                const uint2 *xl, int g, int t, int ntl, float acc[2][4][4]) {
#pragma unroll
    for (int s = 0; s < 2; s++) {
        /* This super-chunk's 128 k values go into a fresh accumulator, added to acc in fp32 afterwards: the
         * tensor core's own fp32 accumulation truncates, so a chain over all K = 2,880 drifted to ~1e-5
         * relative (H200, 20b shapes) where ~24 products per chain stay near fp32's rounding. */
        float part[2][4][4];
        mma_zero(part);
        __nv_bfloat162 sc[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) sc[mt][r] = mma_scale2(ws[s][mt][r]);
#pragma unroll(FAST ? 8 : 1) /* the slow variant stays small: it must not crowd the instruction cache */
        for (int j = 0; j < 8; j++) {
            uint32_t a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const uint4 q = wq[s][mt][r];
                    const uint32_t w = (j >> 1) == 0 ? q.x : (j >> 1) == 1 ? q.y : (j >> 1) == 2 ? q.z : q.w;
                    /* a0a1 / a2a3: rows g / g+8 at logical k 2t, 2t+1; a4a5 / a6a7: 2t+8, 2t+9 */
                    if (FAST) {
                        a[mt][r] = (j & 1) ? mma_fp4_pair<2>(w, sc[mt][r]) : mma_fp4_pair<0>(w, sc[mt][r]);
                        a[mt][2 + r] = (j & 1) ? mma_fp4_pair<3>(w, sc[mt][r]) : mma_fp4_pair<1>(w, sc[mt][r]);
                    } else {
                        a[mt][r] = mma_fp4_pair_any(w, (j & 1) ? 2 : 0, ws[s][mt][r]);
                        a[mt][2 + r] = mma_fp4_pair_any(w, (j & 1) ? 3 : 1, ws[s][mt][r]);
                    }
                }
            const int pu = mma_phys(32 * s + 8 * t + j);
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                if (nt >= ntl) break;
                const uint4 bv = xs[(nt * 8 + g) * MMA_STRIDE + pu];
                const uint2 bl = xl[(nt * 8 + g) * MMA_STRIDE + pu];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    mma_bf16(part[mt][nt], a[mt], bv.x, bv.y); /* hi */
                    mma_bf16(part[mt][nt], a[mt], bv.z, bv.w); /* mid */
                    mma_bf16(part[mt][nt], a[mt], bl.x, bl.y); /* lo */
                }
            }
        }
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[mt][nt][i] += part[mt][nt][i];
    }
}

/* Grid (row tiles, E). See gptoss_mxfp4_mma in kernels.h for the arguments. Per tile of MMA_BN tokens:
 * for each pass of MMA_KC k values, stage the tokens' activations (hi/mid/lo bf16), then multiply while the
 * next pass's weights are already in flight (loaded into registers before this pass's products). */
__global__ void __launch_bounds__(MMA_WARPS * 32, 2)
    mxfp4_mma_kernel(const float *x, int ldx, int swz, const int32_t *gather, const uint8_t *blocks,
                     const uint8_t *scales, const uint16_t *bias, const int32_t *counts, const int32_t *offsets, int K,
                     int N, int swiglu, float alpha, float limit, float *y) {
    extern __shared__ uint4 mma_smem[]; /* MMA_SMEM bytes: xs (hi, mid) then xl (lo) */
    uint4 *xs = mma_smem;
    uint2 *xl = (uint2 *)(mma_smem + MMA_BN * MMA_STRIDE);
    const int e = blockIdx.y, cnt = counts[e];
    if (cnt <= 0) return;
    const int off = offsets[e];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int NC = K / 32; /* MXFP4 blocks per row */
    const int wrow0 = blockIdx.x * MMA_BM + warp * 32;
    /* The weight rows this lane loads: m16 tile mt, fragment row g (r = 0) or g + 8 (r = 1). */
    int rows[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++)
            rows[mt][r] = swiglu ? 2 * (wrow0 / 2 + mt * 8 + g) + r : wrow0 + mt * 16 + g + 8 * r;
    const uint8_t *eb = blocks + (size_t)e * N * (K / 2);
    const uint8_t *es = scales + (size_t)e * N * NC;
    const int nk = (K + MMA_KC - 1) / MMA_KC;

    for (int tile0 = 0; tile0 < cnt; tile0 += MMA_BN) {
        const int ntok = min(MMA_BN, cnt - tile0), ntl = (ntok + 7) / 8;
        float acc[2][4][4];
        mma_zero(acc);
        uint4 wq[2][2][2];
        uint32_t ws[2][2][2];
        mma_load_w(eb, es, rows, N, NC, 0, t, cnt <= MMA_BN, wq, ws);
        for (int kc = 0; kc < nk; kc++) {
            /* 1. stage the tokens' activations of this pass, split into hi/mid/lo bf16 */
            for (int idx = threadIdx.x; idx < ntok * MMA_UNITS; idx += MMA_WARPS * 32) {
                const int i = idx / MMA_UNITS, u = idx % MMA_UNITS;
                const int k = kc * MMA_KC + 8 * (u >> 1) + 2 * (u & 1);
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                uint2 vl = make_uint2(0u, 0u);
                if (k < K) {
                    const int p = off + tile0 + i;
                    const int src = gather ? gather[p] : p;
                    mma_stage_unit(x + (size_t)src * ldx, swz, K, k, &v, &vl);
                }
                xs[i * MMA_STRIDE + mma_phys(u)] = v;
                xl[i * MMA_STRIDE + mma_phys(u)] = vl;
            }
            for (int idx = ntok * MMA_UNITS + threadIdx.x; idx < ntl * 8 * MMA_UNITS; idx += MMA_WARPS * 32) {
                xs[(idx / MMA_UNITS) * MMA_STRIDE + mma_phys(idx % MMA_UNITS)] = make_uint4(0u, 0u, 0u, 0u);
                xl[(idx / MMA_UNITS) * MMA_STRIDE + mma_phys(idx % MMA_UNITS)] = make_uint2(0u, 0u);
            }
            __syncthreads();
            /* 2. the next pass's weights in flight, then this pass's products */
            uint4 wn[2][2][2];
            uint32_t wsn[2][2][2];
            if (kc + 1 < nk) mma_load_w(eb, es, rows, N, NC, kc + 1, t, cnt <= MMA_BN, wn, wsn);
            bool fast = true;
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) fast = fast && MMA_FAST_S(ws[s][mt][r]);
            if (__all_sync(0xffffffffu, fast)) mma_pass<true>(wq, ws, xs, xl, g, t, ntl, acc);
            else mma_pass<false>(wq, ws, xs, xl, g, t, ntl, acc);
            __syncthreads();
            if (kc + 1 < nk) {
#pragma unroll
                for (int s = 0; s < 2; s++)
#pragma unroll
                    for (int mt = 0; mt < 2; mt++)
#pragma unroll
                        for (int r = 0; r < 2; r++) { wq[s][mt][r] = wn[s][mt][r]; ws[s][mt][r] = wsn[s][mt][r]; }
            }
        }
        /* 3. epilogue: lane holds rows g, g+8 of each m16 tile for tokens 2t, 2t+1 of each n8 tile */
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            if (nt >= ntl) break;
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int i = nt * 8 + 2 * t + c;
                if (i >= ntok) continue;
                const size_t p = (size_t)off + tile0 + i;
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    if (swiglu) {
                        const int gr = rows[mt][0];
                        if (gr >= N) continue;
                        const float gv = acc[mt][nt][c] + gptoss_bf16_to_f32(bias[(size_t)e * N + gr]);
                        const float uv = acc[mt][nt][2 + c] + gptoss_bf16_to_f32(bias[(size_t)e * N + gr + 1]);
                        y[p * (size_t)(N / 2) + gr / 2] = mma_swiglu(gv, uv, alpha, limit);
                    } else {
#pragma unroll
                        for (int r = 0; r < 2; r++) {
                            const int row = rows[mt][r];
                            if (row < N)
                                y[p * (size_t)N + row] = acc[mt][nt][2 * r + c] + gptoss_bf16_to_f32(bias[(size_t)e * N + row]);
                        }
                    }
                }
            }
        }
    }
}

cudaError_t gptoss_mxfp4_mma(const float *x, int ldx, int x_swz, const int32_t *gather, const uint8_t *blocks,
                             const uint8_t *scales, const uint16_t *b, const int32_t *counts, const int32_t *offsets,
                             int E, int K, int N, int swiglu, float alpha, float limit, float *y, cudaStream_t stream) {
    if (!x || !blocks || !scales || !b || !counts || !offsets || !y || E <= 0 || E > 65535 || K <= 0 || K % 32 ||
        N <= 0 || (swiglu && N % 2) || ldx < K || ldx % 2 || (x_swz && ldx != K) || ((uintptr_t)x & 7) ||
        ((uintptr_t)blocks & 15))
        return cudaErrorInvalidValue;
    static int smem_set; /* the > 48 KB dynamic shared memory opt-in, once per process (not a stream operation) */
    if (!smem_set) {
        const cudaError_t e = cudaFuncSetAttribute(mxfp4_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MMA_SMEM);
        if (e != cudaSuccess) return e;
        smem_set = 1;
    }
    const dim3 grid((unsigned)((N + MMA_BM - 1) / MMA_BM), (unsigned)E);
    mxfp4_mma_kernel<<<grid, MMA_WARPS * 32, MMA_SMEM, stream>>>(x, ldx, x_swz, gather, blocks, scales, b, counts, offsets, K,
                                                          N, swiglu, alpha, limit, y);
    return cudaGetLastError();
}
