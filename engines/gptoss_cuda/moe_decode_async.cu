/* moe_decode_async.cu — the T = 1 MXFP4 expert GEMVs of the decode MoE block with the weights streamed
 * through shared memory by cp.async, one warp task ahead (LLMR_GPTOSS_MOE_ASYNC=1; see kernels.h).
 *
 * Why: in moe_decode.cu a warp issues all loads of its task (2 rows, ~3 KB), waits a full HBM round trip,
 * then decodes and multiplies (~4 instructions per weight) with nothing in flight, then starts the next
 * task. With ~3 tasks per warp and all warps starting together, an SM alternates between "all waiting"
 * and "all computing", so the time is about the sum of the memory time and the issue time, not the
 * larger of the two. Here each warp copies task i + 1 into its second shared-memory buffer with cp.async
 * (no registers held) before it computes task i from the first, so the copy engine keeps ~3 KB per warp
 * (~96 KB per SM) in flight during the arithmetic.
 *
 * Numerics: the exact same operations in the same order as md_rows<1, 2, true> (moe_decode.cu): per lane,
 * chunks c = lane + 32u in ascending u, per chunk the 32 products summed in the same fmaf chain, times
 * the block scale into the lane's accumulator, then the same xor-shuffle reduction; the epilogues are
 * copies of the plain kernels'. So the results are bit-identical to the plain kernels (kernel checks).
 *
 * Limits (else the launchers return cudaErrorNotSupported and the plain kernels run): T = 1; K % 64 == 0
 * (an even number of 32-value blocks per row, so a row pair's scales are 4-byte aligned) and two
 * buffers of 8 warps within 48 KiB of shared memory (K <= 2,880 + a little: 20b's K is 2,880). */
#include "engines/gptoss_cuda/kernels.h"

#include <cuda_fp16.h>

#include "engines/gptoss_cuda/mxfp4_lut.h"
#include "engines/gptoss_cuda/pdl.h"

#define MA_WARPS 8
#define MA_R 2  /* rows per warp task (gate/up pair; two output rows of down) */
#define MA_U 3  /* chunks of 32 values per lane per pass, as MD_U */
#define MA_DN_ROWS 8
#define MA_SMEM_MAX (48 * 1024)

static __device__ __forceinline__ void ma_cp16(void *dst, const void *src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}
static __device__ __forceinline__ void ma_cp4(void *dst, const void *src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(src) : "memory");
}
static __device__ __forceinline__ void ma_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
static __device__ __forceinline__ void ma_wait_prev(void) { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
static __device__ __forceinline__ void ma_wait_all(void) { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

/* Bytes of one warp buffer: MA_R rows of NC 16-byte blocks, then their MA_R * NC scale bytes, padded to 16. */
static __host__ __device__ __forceinline__ int ma_buf_bytes(int NC) { return (MA_R * NC * 17 + 15) & ~15; }

/* Starts the copy of rows row0, row0 + 1 (blocks and scales) into dst; one commit group per call. */
static __device__ __forceinline__ void ma_issue(uint8_t *dst, const uint8_t *blocks, const uint8_t *scales, size_t row0,
                                                int NC, int lane) {
    const int nb = MA_R * NC * 16, ns = MA_R * NC;
    const uint8_t *b = blocks + row0 * NC * 16, *s = scales + row0 * NC;
    for (int o = lane * 16; o < nb; o += 32 * 16) ma_cp16(dst + o, b + o);
    for (int o = lane * 4; o < ns; o += 32 * 4) ma_cp4(dst + nb + o, s + o);
    ma_commit();
}

/* md_rows<1, MA_R, true> (table decode, mxfp4_lut.h) with the weights read from the shared-memory buffer src. */
static __device__ __forceinline__ void ma_rows(const uint8_t *src, int NC, const float *xv, int lane, float acc[MA_R]) {
    const uint8_t *sc = src + MA_R * NC * 16;
#pragma unroll
    for (int r = 0; r < MA_R; r++) acc[r] = 0.0f;
    for (int c0 = lane; c0 < NC; c0 += 32 * MA_U) {
#pragma unroll
        for (int u = 0; u < MA_U; u++) {
            const int c = c0 + 32 * u;
            if (c >= NC) break;
            uint4 q[MA_R];
#pragma unroll
            for (int r = 0; r < MA_R; r++) q[r] = *(const uint4 *)(src + ((size_t)r * NC + c) * 16);
            float part[MA_R];
#pragma unroll
            for (int r = 0; r < MA_R; r++) part[r] = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float4 *x4 = (const float4 *)xv + c;
                const float4 xa = x4[(size_t)(2 * k) * NC], xb = x4[(size_t)(2 * k + 1) * NC];
#pragma unroll
                for (int r = 0; r < MA_R; r++) {
                    const uint32_t w = k == 0 ? q[r].x : k == 1 ? q[r].y : k == 2 ? q[r].z : q[r].w;
                    float2 f[4]; /* nibbles (0,1), (2,3), (4,5), (6,7); products in the order 0,4,1,5,2,6,3,7 */
                    mxfp4_lut8(w, f);
                    float t = part[r];
                    t = fmaf(xa.x, f[0].x, t); t = fmaf(xb.x, f[2].x, t);
                    t = fmaf(xa.y, f[0].y, t); t = fmaf(xb.y, f[2].y, t);
                    t = fmaf(xa.z, f[1].x, t); t = fmaf(xb.z, f[3].x, t);
                    t = fmaf(xa.w, f[1].y, t); t = fmaf(xb.w, f[3].y, t);
                    part[r] = t;
                }
            }
#pragma unroll
            for (int r = 0; r < MA_R; r++) acc[r] = fmaf(part[r], mxfp4_lut_scale(sc[(size_t)r * NC + c]), acc[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < MA_R; r++)
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}

/* gate_up + SwiGLU for T = 1: block (x, g) = expert group g (one pair), warp tasks = gate/up row pairs. */
__global__ void __launch_bounds__(MA_WARPS * 32, 4) moe_gate_up_async_kernel(const float *h_sw, const int32_t *groups,
                                                                             const uint8_t *blocks, const uint8_t *scales,
                                                                             const uint16_t *bias, int H, int I,
                                                                             float alpha, float limit, float *act_sw, int pdl) {
    extern __shared__ __align__(16) uint8_t ma_smem[];
    gptoss_pdl_sync(pdl); /* PDL (pdl.h): the groups come from the router just before */
    const int g = blockIdx.y, GM = GPTOSS_TOPK;
    if (g >= groups[0]) return;
    const int e = groups[1 + g], pair = groups[1 + 2 * GM + 4 * g];
    const float *xv = h_sw + (size_t)(pair / GPTOSS_TOPK) * H;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, NC = H / 32, N = 2 * I, tasks = N / MA_R;
    const int bb = ma_buf_bytes(NC);
    uint8_t *buf0 = ma_smem + (size_t)warp * 2 * bb;
    const int stride = gridDim.x * MA_WARPS;
    int tk = blockIdx.x * MA_WARPS + warp, cur = 0;
    if (tk < tasks) ma_issue(buf0, blocks, scales, (size_t)e * N + (size_t)tk * MA_R, NC, lane);
    for (; tk < tasks; tk += stride, cur ^= 1) {
        const int nx = tk + stride;
        if (nx < tasks) ma_issue(buf0 + (cur ^ 1) * bb, blocks, scales, (size_t)e * N + (size_t)nx * MA_R, NC, lane);
        else ma_commit(); /* an empty group keeps "all but the newest" meaning "the current task" */
        ma_wait_prev();
        __syncwarp();
        float acc[MA_R];
        ma_rows(buf0 + cur * bb, NC, xv, lane, acc);
        __syncwarp(); /* every lane is done with this buffer before it is refilled */
        if (lane == 0) {
            const uint16_t *b = bias + (size_t)e * N + (size_t)tk * MA_R;
            act_sw[(size_t)pair * I + gptoss_swz(tk, I)] =
                gptoss_swiglu_value(acc[0] + gptoss_bf16_to_f32(b[0]), acc[1] + gptoss_bf16_to_f32(b[1]), alpha, limit);
        }
    }
    ma_wait_all();
}

/* down + routing weights + residual for T = 1: block = output rows n0 .. n0 + 7 of every group; warp tasks
 * = (row pair, group); then x[n] += sum over slots 0..3 in order of w * y, as moe_down_decode_kernel. */
__global__ void __launch_bounds__(MA_WARPS * 32, 4) moe_down_async_kernel(const float *act_sw, const int32_t *groups,
                                                                          const float *wts, const uint8_t *blocks,
                                                                          const uint8_t *scales, const uint16_t *bias,
                                                                          int I, int H, float *x, int pdl) {
    extern __shared__ __align__(16) uint8_t ma_smem[];
    const int GM = GPTOSS_TOPK, NC = I / 32, bb = ma_buf_bytes(NC);
    float *ys = (float *)(ma_smem + (size_t)MA_WARPS * 2 * bb); /* [4 slots][MA_DN_ROWS] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * MA_DN_ROWS;
    if (pdl) { /* PDL (pdl.h, rule 3): the router's groups are final (two kernels back): this block's rows into L2 */
        const int ng0 = __ldcg(groups), nr = min(MA_DN_ROWS, H - n0);
        for (int g = 0; g < ng0; g++) {
            const size_t r0 = (size_t)__ldcg(groups + 1 + g) * H + n0;
            gptoss_prefetch_range(blocks + r0 * NC * 16, (size_t)nr * NC * 16, threadIdx.x, blockDim.x);
            gptoss_prefetch_range(scales + r0 * NC, (size_t)nr * NC, threadIdx.x, blockDim.x);
        }
    }
    gptoss_pdl_sync(pdl); /* the activations come from gate_up just before */
    const int ngroups = groups[0], RT = MA_DN_ROWS / MA_R, tasks = RT * ngroups;
    uint8_t *buf0 = ma_smem + (size_t)warp * 2 * bb;
    /* task t -> group t / RT, first row n0 + (t % RT) * 2; rows past H are skipped (H % 2 == 0, so a
     * pair is whole or absent); an empty commit group keeps the wait counting uniform */
    auto issue = [&](int t, uint8_t *dst) {
        const int r = n0 + (t % RT) * MA_R;
        if (t < tasks && r < H) ma_issue(dst, blocks, scales, (size_t)groups[1 + t / RT] * H + r, NC, lane);
        else ma_commit();
    };
    int cur = 0;
    issue(warp, buf0);
    for (int tk = warp; tk < tasks; tk += MA_WARPS, cur ^= 1) {
        issue(tk + MA_WARPS, buf0 + (cur ^ 1) * bb);
        ma_wait_prev();
        __syncwarp();
        const int g = tk / RT, r0 = n0 + (tk % RT) * MA_R;
        if (r0 < H) {
            const int pair = groups[1 + 2 * GM + 4 * g];
            float acc[MA_R];
            ma_rows(buf0 + cur * bb, NC, act_sw + (size_t)pair * I, lane, acc);
            if (lane == 0) {
                const int e = groups[1 + g];
#pragma unroll
                for (int r = 0; r < MA_R; r++)
                    ys[pair * MA_DN_ROWS + (r0 - n0) + r] = acc[r] + gptoss_bf16_to_f32(bias[(size_t)e * H + r0 + r]);
            }
        }
        __syncwarp();
    }
    ma_wait_all();
    __syncthreads();
    for (int rr = threadIdx.x; rr < MA_DN_ROWS; rr += blockDim.x) {
        const int n = n0 + rr;
        if (n >= H) continue;
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) sum += wts[k] * ys[k * MA_DN_ROWS + rr];
        x[n] += sum;
    }
}

static size_t ma_smem_bytes(int K, int down) {
    return (size_t)MA_WARPS * 2 * ma_buf_bytes(K / 32) + (down ? GPTOSS_TOPK * MA_DN_ROWS * sizeof(float) : 0);
}

static bool ma_ok(int K) { return K > 0 && K % 64 == 0 && ma_smem_bytes(K, 1) <= MA_SMEM_MAX + 1024; }

static int g_async = 0;

int gptoss_moe_decode_async(int on) {
    g_async = 0;
    if (!on) return 0;
    /* more than 48 KiB of dynamic shared memory needs the opt-in, set here (outside any graph capture) */
    const int bytes = MA_SMEM_MAX + 1024;
    if (cudaFuncSetAttribute(moe_gate_up_async_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(moe_down_async_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    g_async = 1;
    return 1;
}

cudaError_t gptoss_moe_gate_up_decode_async(const float *h_sw, const int32_t *groups, const uint8_t *blocks,
                                            const uint8_t *scales, const uint16_t *bias, int H, int I, float alpha,
                                            float limit, float *act_sw, cudaStream_t s) {
    if (!g_async || !ma_ok(H) || I <= 0 || I % 32 || ((uintptr_t)blocks & 15) || ((uintptr_t)scales & 3))
        return cudaErrorNotSupported;
    const int G = GPTOSS_TOPK, tasks = 2 * I / MA_R, need = (tasks + MA_WARPS - 1) / MA_WARPS;
    int gx = (4 * gptoss_sm_count() + G - 1) / G; /* one wave: 4 blocks per SM (registers and shared memory) */
    if (gx > need) gx = need;
    const cudaError_t e = gptoss_launch(moe_gate_up_async_kernel, dim3((unsigned)gx, (unsigned)G), dim3(MA_WARPS * 32),
                                        ma_smem_bytes(H, 0), s, gptoss_pdl_enabled(), h_sw, groups, blocks, scales, bias,
                                        H, I, alpha, limit, act_sw, gptoss_pdl_enabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_moe_down_decode_async(const float *act_sw, const int32_t *groups, const float *w, const uint8_t *blocks,
                                         const uint8_t *scales, const uint16_t *bias, int I, int H, float *x,
                                         cudaStream_t s) {
    if (!g_async || !ma_ok(I) || H <= 0 || H % 2 || ((uintptr_t)blocks & 15) || ((uintptr_t)scales & 3))
        return cudaErrorNotSupported;
    const unsigned grid = (unsigned)((H + MA_DN_ROWS - 1) / MA_DN_ROWS);
    const cudaError_t e = gptoss_launch(moe_down_async_kernel, dim3(grid), dim3(MA_WARPS * 32), ma_smem_bytes(I, 1), s,
                                        gptoss_pdl_enabled(), act_sw, groups, w, blocks, scales, bias, I, H, x,
                                        gptoss_pdl_enabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}
