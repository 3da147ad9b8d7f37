/* linear.cu — fp32 activations times bf16 weights (nn.Linear layout), fp32 accumulation.
 *
 * Prefill (T > 4): a tiled kernel; a block computes a 64-token x 64-output tile, staging 32-wide K
 * slices of x and W in shared memory (W converted exactly from bf16); each output element is owned by
 * one thread, which sums k in ascending order.
 * Decode, one token (T == 1): gptoss_gemv1, x in shared memory, several 16-byte loads in flight per lane.
 * Decode (T <= 4, or T == 1 when gemv1 is switched off): a GEMV; one warp per output row streams the row once with 16-byte loads (8 bf16) and
 * serves all T tokens from it, then reduces across the warp. The two paths sum in different orders, so
 * they agree to fp32 rounding, not bit for bit. */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/moe_route.cuh"
#include "engines/gptoss_cuda/tma_ring.cuh"
#include "engines/gptoss_cuda/tile.h"
#include "engines/gptoss_cuda/pdl.h"

#define LIN_BM GPTOSS_TILE /* tokens per tile */
#define LIN_BN GPTOSS_TILE /* outputs per tile */
#define LIN_BK GPTOSS_TILE_K

__global__ void __launch_bounds__(256) linear_kernel(const float *x, int ldx, const uint16_t *W, const uint16_t *b,
                                                     int T, int K, int N, float *y, int ldy, int accumulate) {
    __shared__ float xs[LIN_BK][LIN_BM + 1];
    __shared__ float ws[LIN_BK][LIN_BN + 1];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int t0 = blockIdx.y * LIN_BM, n0 = blockIdx.x * LIN_BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += LIN_BK) {
        /* 64 rows x 32 k of each operand: 8 elements per thread, k fastest for coalescing. */
        for (int e = tid; e < LIN_BM * LIN_BK; e += 256) {
            const int r = e / LIN_BK, kk = e % LIN_BK, k = k0 + kk;
            const int t = t0 + r, n = n0 + r;
            xs[kk][r] = (t < T && k < K) ? x[(size_t)t * ldx + k] : 0.0f;
            ws[kk][r] = (n < N && k < K) ? gptoss_bf16_to_f32(W[(size_t)n * K + k]) : 0.0f;
        }
        __syncthreads();
        gptoss_tile_fma(xs, ws, tx, ty, acc);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = t0 + ty + 16 * i;
        if (t >= T) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = n0 + tx + 16 * j;
            if (n >= N) continue;
            float v = acc[i][j] + (b ? gptoss_bf16_to_f32(b[n]) : 0.0f);
            float *dst = y + (size_t)t * ldy + n;
            *dst = accumulate ? *dst + v : v;
        }
    }
}

#define GEMV_WARPS 8

template <int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(const float *x, int ldx, const uint16_t *W,
                                                               const uint16_t *b, int K, int N, float *y, int ldy,
                                                               int accumulate) {
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    const uint4 *w4 = (const uint4 *)(W + (size_t)n * K);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int i = lane; i < K / 8; i += 32) {
        float w[8];
        gptoss_bf16x8(__ldg(w4 + i), w);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float4 *x4 = (const float4 *)(x + (size_t)t * ldx + (size_t)i * 8);
            const float4 a = x4[0], c = x4[1];
            acc[t] += a.x * w[0] + a.y * w[1] + a.z * w[2] + a.w * w[3] + c.x * w[4] + c.y * w[5] + c.z * w[6] + c.w * w[7];
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) {
            v += b ? gptoss_bf16_to_f32(b[n]) : 0.0f;
            float *dst = y + (size_t)t * ldy + n;
            *dst = accumulate ? *dst + v : v;
        }
    }
}

/* ------------------------------------------------------------ T = 1 decode GEMV (gptoss_gemv1)
 * Why a separate kernel: the warp-per-row GEMV above keeps one 16-byte weight load in flight per lane
 * and re-reads x from global memory for every weight chunk. Here x is staged once per block in shared
 * memory, split into the two float4 halves of each 8-element chunk (xs[0][c], xs[1][c]) so consecutive
 * lanes read consecutive 16-byte words (no bank conflicts), and each lane issues GEMV1_UNROLL weight loads
 * before using any. Blocks loop over rows (grid ~ resident blocks), so x is staged once per block. */
#define GEMV1_WARPS 8
#define GEMV1_XS (GPTOSS_GEMV1_MAX_K / 4 / (GEMV1_WARPS * 32)) /* x's float4s a thread stages, at most */

/* The router finish by the launch's last block (gptoss_gemv1_router_finish; ctr NULL: none). smem_rows: the last
 * block brings every block's partial row into its dynamic shared memory (over x, no longer needed) with one bulk
 * copy and adds them there; else it adds them from L2. */
struct gemv1_fin {
    const uint16_t *rb;
    float eps;
    int32_t *ctr, *ids, *groups;
    float *w, *rl, *r;
    int smem_rows;
};

/* The finish's outputs and inputs in one value (gptoss_gemv1_router_finish, gptoss_gemv1_rows_router_finish). */
static gemv1_fin gemv1_fin_make(const uint16_t *router_b, float eps, int32_t *ctr, int32_t *ids, int32_t *groups, float *w,
                                float *router_logits, float *r, int smem_rows) {
    return gemv1_fin{router_b, eps, ctr, ids, groups, w, router_logits, r, smem_rows}; /* the struct's field order */
}

/* The block's router partial row (gemv1_kernel<true> and gemv1_rows_kernel<R, true>): its 8 warps' products rp (lane
 * e: expert e's) and squares rs (lane 0's) summed in warp order 0..7 into partial row `row` of rpart (33 floats). Passes
 * one barrier after red's writes; red may be written again only after another one. */
static __device__ __forceinline__ void gemv1_partial_row(float (*red)[33], float rp, float rs, int warp, int lane,
                                                         float *rpart, size_t row) {
    red[warp][lane] = rp;
    if (lane == 0) red[warp][32] = rs;
    __syncthreads();
    if (threadIdx.x < 33) {
        float v = 0.0f;
        for (int w = 0; w < GEMV1_WARPS; w++) v += red[w][threadIdx.x];
        rpart[row * 33 + threadIdx.x] = v;
    }
}

template <bool ROUTER>
__global__ void __launch_bounds__(GEMV1_WARPS * 32) gemv1_kernel(const float *x, const uint16_t *W, const uint16_t *b,
                                                                 int K, int N, float *y, int accumulate, int pdl,
                                                                 const float *rwt, float *rpart, gemv1_fin fin) {
    extern __shared__ float4 xs4[]; /* [2][K / 8] */
    const int K8 = K / 8;
    const float4 *x4 = (const float4 *)x;
    { /* PDL (pdl.h): this warp's first row into L2 while the previous kernel finishes, then wait */
        const int n = blockIdx.x * GEMV1_WARPS + (threadIdx.x >> 5);
        if (pdl && n < N) gptoss_prefetch_range(W + (size_t)n * K, (size_t)K * 2, threadIdx.x & 31, 32);
        gptoss_pdl_sync(pdl);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n0 = blockIdx.x * GEMV1_WARPS + warp;
    /* Every small read of the warp's first row goes out with the x loads, none of it used before the sums: lane 0's
     * bias (raw bf16 bits, converted where it is added) and residual, and each lane's router weight. (Converted at
     * the load, the bias made the warp wait one round trip before x's loads were even issued: the SASS of session 46
     * call 1.) */
    uint32_t b0 = 0u;
    float y0 = 0.0f, rw0 = 0.0f;
    if (n0 < N) {
        if (lane == 0) {
            if (b) b0 = b[n0];
            if (accumulate) y0 = y[n0];
        }
        if (ROUTER) rw0 = rwt[(size_t)n0 * 32 + lane];
    }
    /* x staged before any weight load: issuing the warp's first weights ahead of it measured 6% slower here and 4% in
     * lm_head (session 43; most likely x's reads then queue behind them), though the first weight use after the barrier
     * is where this kernel's warps wait most. All of a thread's x loads before its first store: as a loop, each store
     * waited for its load, one round trip per pass (4 for o_proj). */
    {
        float4 xr[GEMV1_XS];
#pragma unroll
        for (int u = 0; u < GEMV1_XS; u++) {
            const int j = threadIdx.x + u * GEMV1_WARPS * 32;
            if (j < 2 * K8) xr[u] = x4[j];
        }
#pragma unroll
        for (int u = 0; u < GEMV1_XS; u++) {
            const int j = threadIdx.x + u * GEMV1_WARPS * 32;
            if (j < 2 * K8) xs4[(j & 1) * K8 + (j >> 1)] = xr[u];
        }
    }
    __syncthreads();
    float rp = 0.0f, rs = 0.0f; /* router partials (rwt != NULL) */
    for (int n = n0; n < N; n += gridDim.x * GEMV1_WARPS) {
        const uint4 *w4 = (const uint4 *)(W + (size_t)n * K);
        float acc = 0.0f;
        for (int c0 = lane; c0 < K8; c0 += 32 * GPTOSS_GEMV1_UNROLL) {
            uint4 v[GPTOSS_GEMV1_UNROLL];
#pragma unroll
            for (int u = 0; u < GPTOSS_GEMV1_UNROLL; u++) {
                const int c = c0 + 32 * u;
                v[u] = c < K8 ? __ldcs(w4 + c) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int u = 0; u < GPTOSS_GEMV1_UNROLL; u++) {
                const int c = c0 + 32 * u;
                if (c < K8) {
                    float w[8];
                    gptoss_bf16x8(v[u], w);
                    const float4 a = xs4[c], d = xs4[K8 + c];
                    acc += a.x * w[0] + a.y * w[1] + a.z * w[2] + a.w * w[3] + d.x * w[4] + d.y * w[5] + d.z * w[6] +
                           d.w * w[7];
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        float yn = 0.0f;
        if (lane == 0) {
            acc += n == n0 ? __uint_as_float(b0 << 16) : b ? gptoss_bf16_to_f32(b[n]) : 0.0f;
            yn = accumulate ? (n == n0 ? y0 : y[n]) + acc : acc;
            y[n] = yn;
        }
        if (ROUTER) { /* router partials (gptoss_gemv1_router): lane e takes expert e's product, lane 0 the square */
            yn = __shfl_sync(0xffffffffu, yn, 0);
            rp = fmaf(n == n0 ? rw0 : rwt[(size_t)n * 32 + lane], yn, rp);
            rs = fmaf(yn, yn, rs);
        }
    }
    if (ROUTER) { /* the block's 8 warps summed in order 0..7 into its partial row [33] */
        __shared__ float red[GEMV1_WARPS][33];
        gemv1_partial_row(red, rp, rs, warp, lane, rpart, blockIdx.x);
        if (fin.ctr) { /* the last block to get here adds every block's partial row (moe_route.cuh) */
            __shared__ int last;
            __shared__ alignas(8) uint64_t landed; /* the bulk copy's barrier */
            float *S = (float *)xs4;               /* the rows (smem_rows) or the 32 x 33 sums, over x */
            const uint32_t bytes = (uint32_t)gridDim.x * 33u * (uint32_t)sizeof(float);
            __syncthreads(); /* the block's partial row written, every warp done with x */
            if (threadIdx.x == 0) {
                /* the grid-sync pattern: the barrier above orders the row's writes before this thread's fence */
                __threadfence();
                last = atomicAdd(fin.ctr, 1) == (int)gridDim.x - 1;
                if (last) {
                    __threadfence(); /* every block's row, counted before ours, is visible from here on */
                    if (fin.smem_rows) {
                        ring_bar_init(&landed, 1);
                        /* the init, the other blocks' rows (generic writes) and this block's reads of x ordered
                         * before the copy engine's accesses */
                        asm volatile("fence.mbarrier_init.release.cluster;\n fence.proxy.async;" ::: "memory");
                        ring_fill(&landed, S, rpart, bytes);
                    }
                }
            }
            __syncthreads();
            if (!last) return;
            /* in flight with the sums' loads, raw bf16 bits until it is added: converted here, the warp waited for it
             * before its first sum (the SASS of session 46) */
            const uint32_t braw = warp == 0 ? fin.rb[lane] : 0u;
            if (fin.smem_rows) {
                ring_wait(&landed, 0);
#pragma unroll
                for (int i = 0; i < 4; i++) router_partials_smem_vw(S, gridDim.x, warp + 8 * i, lane);
            } else
                router_partials_sum8(rpart, gridDim.x, warp, lane, (float(*)[33])S);
            __syncthreads();
            if (warp == 0) {
                const float r = router_finish_warp((const float(*)[33])S, __uint_as_float(braw << 16), N, fin.eps, lane,
                                                   fin.ids, fin.w, fin.groups, fin.rl);
                if (lane == 0) {
                    *fin.r = r;
                    *fin.ctr = 0; /* for the next launch */
                }
            }
        }
    }
}

static bool gemv1_ok(const float *x, const uint16_t *W, int K) {
    return K > 0 && K % 8 == 0 && K <= GPTOSS_GEMV1_MAX_K && ((uintptr_t)x & 15) == 0 && ((uintptr_t)W & 15) == 0;
}

/* Enough blocks to fill every SM (up to 8 resident blocks of 256 threads, ~200 KiB of shared memory for x), never
 * more than there are rows to give them: x is then staged about once per block. */
static cudaError_t gemv1_grid(int K, int N, int *blocks) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    long per_sm = (long)(200 * 1024) / (long)((size_t)K * sizeof(float) + 1024);
    if (per_sm > 8) per_sm = 8;
    if (per_sm < 1) per_sm = 1;
    const long have = (long)sms * per_sm, need = ((long)N + GEMV1_WARPS - 1) / GEMV1_WARPS;
    *blocks = (int)(have > need ? need : have);
    return cudaSuccess;
}

int gptoss_gemv1_blocks(int K, int N) {
    int blocks = 0;
    return gemv1_grid(K, N, &blocks) == cudaSuccess ? blocks : -1;
}

cudaError_t gptoss_gemv1(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y, int accumulate,
                         cudaStream_t s) {
    if (N <= 0) return cudaSuccess;
    if (!gemv1_ok(x, W, K)) return cudaErrorInvalidValue;
    /* K <= 8192 keeps x within the default 48 KiB of dynamic shared memory (no attribute opt-in, which
     * would be one more API call inside a graph capture). */
    const size_t smem = (size_t)K * sizeof(float);
    int blocks = 0;
    cudaError_t e = gemv1_grid(K, N, &blocks);
    if (e != cudaSuccess) return e;
    const int pdl = gptoss_pdl_enabled(); /* the prefetch only where it can overlap: measured a cost otherwise */
    const gemv1_fin none = {};
    e = gptoss_launch(gemv1_kernel<false>, dim3((unsigned)blocks), dim3(GEMV1_WARPS * 32), smem, s, pdl, x, W, b, K, N, y,
                      accumulate, pdl, (const float *)NULL, (float *)NULL, none);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gptoss_gemv1_router(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y,
                                const float *rwt, float *rpart, cudaStream_t s) {
    if (N <= 0 || !gemv1_ok(x, W, K) || !rwt || !rpart) return cudaErrorInvalidValue;
    int blocks = 0;
    cudaError_t e = gemv1_grid(K, N, &blocks);
    if (e != cudaSuccess) return e;
    const int pdl = gptoss_pdl_enabled();
    const gemv1_fin none = {};
    e = gptoss_launch(gemv1_kernel<true>, dim3((unsigned)blocks), dim3(GEMV1_WARPS * 32), (size_t)K * sizeof(float), s,
                      pdl, x, W, b, K, N, y, 1, pdl, rwt, rpart, none);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* The last block's partial rows by one bulk copy (gptoss_gemv1_fin_rows); the router kernel's static shared bytes,
 * queried once (the same for every device). */
static int g_fin_rows = 1;
static size_t g_fin_static = (size_t)-1;

static cudaError_t gemv1_fin_query(void) {
    if (g_fin_static != (size_t)-1) return cudaSuccess;
    cudaFuncAttributes a;
    const cudaError_t e = cudaFuncGetAttributes(&a, gemv1_kernel<true>);
    if (e == cudaSuccess) g_fin_static = a.sharedSizeBytes;
    return e;
}

/* Whether `rows` bytes of partial rows fit the router kernel's dynamic shared memory beside its static arrays within
 * the default 48 KiB a block (no opt-in attribute: these launches are captured into graphs) and are a whole number
 * of 16-byte units, as the bulk copy needs. */
static cudaError_t gemv1_fin_room(size_t rows, int *fits) {
    const cudaError_t e = gemv1_fin_query();
    if (e != cudaSuccess) return e;
    *fits = g_fin_rows && rows % 16 == 0 && rows + g_fin_static <= 48 * 1024;
    return cudaSuccess;
}

int gptoss_gemv1_fin_rows(int on) {
    g_fin_rows = on != 0;
    return gemv1_fin_query() == cudaSuccess ? g_fin_rows : 0; /* the query outside any capture */
}

cudaError_t gptoss_gemv1_router_finish(const float *x, const uint16_t *W, const uint16_t *b, int K, int N, float *y,
                                       const float *rwt, float *rpart, const uint16_t *router_b, float eps, int32_t *ctr,
                                       int32_t *ids, float *w, int32_t *groups, float *router_logits, float *r,
                                       cudaStream_t s) {
    if (N <= 0 || N % 32 || !gemv1_ok(x, W, K) || !rwt || !rpart || !router_b || !ctr || !ids || !w || !groups || !r)
        return cudaErrorInvalidValue;
    int blocks = 0;
    cudaError_t e = gemv1_grid(K, N, &blocks);
    if (e != cudaSuccess) return e;
    /* x's space holds the last block's sums (32 x 33) or, where they fit beside the static arrays within the default
     * 48 KiB (360 rows for the 20b: 47,520 bytes), all the partial rows for one bulk copy (16-byte multiple) */
    const size_t rows = (size_t)blocks * 33 * sizeof(float);
    size_t smem = (size_t)K * sizeof(float);
    int smem_rows = 0;
    e = gemv1_fin_room(rows, &smem_rows);
    if (e != cudaSuccess) return e;
    if (smem_rows && rows > smem) smem = rows;
    if (smem < 32 * 33 * sizeof(float)) smem = 32 * 33 * sizeof(float);
    const gemv1_fin fin = gemv1_fin_make(router_b, eps, ctr, ids, groups, w, router_logits, r, smem_rows);
    /* no PDL: the next kernel reads what the last block writes at its very end */
    e = gptoss_launch(gemv1_kernel<true>, dim3((unsigned)blocks), dim3(GEMV1_WARPS * 32), smem, s, 0, x, W, b, K, N, y, 1,
                      0, rwt, rpart, fin);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* ------------------------------------------------------------ gptoss_gemv1_rows: the same for a few rows
 * (session 19): each block stages the n <= 8 rows of x in shared memory, each weight load serves every row, and each
 * row's sum is gptoss_gemv1's (the same lane and chunk order, the same expression, the same shuffle, bias and residual
 * add), so a row of a small batched step gets the bits it would get alone. Fewer loads in flight per lane as the
 * rows grow (more arithmetic per load); the chunk order per lane does not depend on that. */
template <int R> struct gemv1_rows_cfg { enum { UNROLL = R <= 2 ? GPTOSS_GEMV1_UNROLL : 4, MINB = R <= 4 ? 3 : 2 }; };

/* ROUTER (gptoss_gemv1_rows_router_finish): gemv1_kernel<true>'s router partial rows and last-block finish, for each
 * of the rows (row r's partial rows at rpart + r gridDim.x 33; its outputs at fin's pointers + r times their size) */
template <int R, bool ROUTER = false>
__global__ void __launch_bounds__(GEMV1_WARPS * 32, gemv1_rows_cfg<R>::MINB)
    gemv1_rows_kernel(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int K, int N, int nrows, float *y,
                      int ldy, int accumulate, const float *rwt, float *rpart, gemv1_fin fin) {
    extern __shared__ float4 xs4[]; /* row r: [2][K / 8] at 2 r (K / 8) */
    const int K8 = K / 8, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n0 = blockIdx.x * GEMV1_WARPS + warp;
    /* lane 0's bias and residuals of the warp's first row go out first, as in gemv1_kernel (after the sums each was a
     * round trip of its own) */
    uint32_t b0 = 0u;
    float y0[R];
#pragma unroll
    for (int r = 0; r < R; r++) y0[r] = 0.0f;
    if (lane == 0 && n0 < N) {
        if (b) b0 = b[n0];
        if (accumulate)
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < nrows) y0[r] = y[(size_t)r * ldy + n0];
    }
    float rw0 = 0.0f, rp[R], rs[R]; /* ROUTER: each lane's router weight of the first row; the rows' partial sums */
#pragma unroll
    for (int r = 0; r < R; r++) rp[r] = rs[r] = 0.0f;
    if (ROUTER && n0 < N) rw0 = rwt[(size_t)n0 * 32 + lane];
    /* x staged GEMV1_XS float4s a thread at a time, all of them loaded before the first is stored (as a loop each store
     * waited for its load: a round trip per 256 float4s, 8 for two rows of o_proj; session 50) */
    const int per = 2 * K8, total = nrows * per;
    for (int base = threadIdx.x; base < total; base += GEMV1_XS * GEMV1_WARPS * 32) {
        float4 xr[GEMV1_XS];
#pragma unroll
        for (int u = 0; u < GEMV1_XS; u++) {
            const int it = base + u * GEMV1_WARPS * 32, r = it / per, j = it - r * per;
            if (it < total) xr[u] = ((const float4 *)(x + (size_t)r * ldx))[j];
        }
#pragma unroll
        for (int u = 0; u < GEMV1_XS; u++) {
            const int it = base + u * GEMV1_WARPS * 32, r = it / per, j = it - r * per;
            if (it < total) xs4[(size_t)2 * r * K8 + (j & 1) * K8 + (j >> 1)] = xr[u];
        }
    }
    __syncthreads();
    constexpr int U = gemv1_rows_cfg<R>::UNROLL;
    for (int n = n0; n < N; n += gridDim.x * GEMV1_WARPS) {
        const uint4 *w4 = (const uint4 *)(W + (size_t)n * K);
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        for (int c0 = lane; c0 < K8; c0 += 32 * U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + 32 * u;
                v[u] = c < K8 ? __ldcs(w4 + c) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + 32 * u;
                if (c < K8) {
                    float w[8];
                    gptoss_bf16x8(v[u], w);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        if (r >= nrows) break;
                        const float4 a = xs4[(size_t)2 * r * K8 + c], d = xs4[(size_t)(2 * r + 1) * K8 + c];
                        acc[r] += a.x * w[0] + a.y * w[1] + a.z * w[2] + a.w * w[3] + d.x * w[4] + d.y * w[5] + d.z * w[6] +
                                  d.w * w[7];
                    }
                }
            }
        }
        const float rwn = ROUTER ? (n == n0 ? rw0 : rwt[(size_t)n * 32 + lane]) : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= nrows) break;
            float a = acc[r], yn = 0.0f;
            for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0) {
                /* (b0 is 0 without b, but dropping the inner `b ?` grew these kernels' code by 0.1-9 KB: session 52) */
                a += n == n0 ? (b ? __uint_as_float(b0 << 16) : 0.0f) : b ? gptoss_bf16_to_f32(b[n]) : 0.0f;
                float *dst = y + (size_t)r * ldy + n;
                yn = accumulate ? (n == n0 ? y0[r] : *dst) + a : a;
                *dst = yn;
            }
            if (ROUTER) { /* as gemv1_kernel<true>: lane e takes expert e's product, every lane the square */
                yn = __shfl_sync(0xffffffffu, yn, 0);
                rp[r] = fmaf(rwn, yn, rp[r]);
                rs[r] = fmaf(yn, yn, rs[r]);
            }
        }
    }
    if (ROUTER) {
        __shared__ float red[GEMV1_WARPS][33];
        __shared__ int last;
#pragma unroll
        for (int r = 0; r < R; r++) { /* row r's partial row: the block's 8 warps in order 0..7, as gemv1_kernel<true> */
            if (r >= nrows) break;
            gemv1_partial_row(red, rp[r], rs[r], warp, lane, rpart, (size_t)r * gridDim.x + blockIdx.x);
            __syncthreads();
        }
        if (!fin.ctr) return; /* the partial rows only (gptoss_gemv1_rows_router: the gate_up finishes each row) */
        if (threadIdx.x == 0) { /* the grid-sync pattern of gemv1_kernel<true>'s finish */
            __threadfence();
            last = atomicAdd(fin.ctr, 1) == (int)gridDim.x - 1;
            if (last) __threadfence();
        }
        __syncthreads();
        if (!last) return;
        const uint32_t braw = warp == 0 ? fin.rb[lane] : 0u;
        float(*S)[33] = (float(*)[33])xs4; /* over x: every warp is done with it (the barriers above) */
        for (int r = 0; r < nrows; r++) { /* each row as gemv1_kernel<true>'s last block finishes its one row */
            router_partials_sum8(rpart + (size_t)r * gridDim.x * 33, gridDim.x, warp, lane, S);
            __syncthreads();
            if (warp == 0) {
                const float rr = router_finish_warp((const float(*)[33])S, __uint_as_float(braw << 16), N, fin.eps, lane,
                                                    fin.ids + GPTOSS_TOPK * r, fin.w + GPTOSS_TOPK * r,
                                                    fin.groups + (size_t)r * gptoss_moe_groups_ints(1),
                                                    fin.rl ? fin.rl + 32 * r : nullptr);
                if (lane == 0) fin.r[r] = rr;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) *fin.ctr = 0; /* for the next launch */
    }
}

/* router: gemv1_rows_kernel<R, true> with fin, refused (cudaErrorNotSupported, before any launch) unless its grid is
 * gptoss_gemv1's, so that every row's partial rows are that kernel's */
template <int R>
static cudaError_t gemv1_rows_launch(int sms, const float *x, int ldx, const uint16_t *W, const uint16_t *b, int K, int N,
                                     int n, float *y, int ldy, int accumulate, cudaStream_t s, const float *rwt = nullptr,
                                     float *rpart = nullptr, const gemv1_fin *fin = nullptr) {
    const size_t smem = (size_t)R * K * sizeof(float);
    if (smem > 200 * 1024) return cudaErrorNotSupported; /* R rows of x must fit */
    /* one wave of resident blocks (the registers' cap and the staged rows), never more than the rows of W need */
    const long per_sm_smem = (long)(200 * 1024) / (long)(smem + 1024);
    const long minb = gemv1_rows_cfg<R>::MINB, per_sm = per_sm_smem < minb ? (per_sm_smem < 1 ? 1 : per_sm_smem) : minb;
    const long need = ((long)N + GEMV1_WARPS - 1) / GEMV1_WARPS;
    const long blocks = (long)sms * per_sm < need ? (long)sms * per_sm : need;
    if (fin && blocks != gptoss_gemv1_blocks(K, N)) return cudaErrorNotSupported;
    static size_t opted[2]; /* the largest size opted in so far, by form */
    if (smem > 48 * 1024 && smem > opted[fin != nullptr]) {
        const cudaError_t e = cudaFuncSetAttribute(fin ? gemv1_rows_kernel<R, true> : gemv1_rows_kernel<R, false>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        opted[fin != nullptr] = smem;
    }
    if (fin)
        gemv1_rows_kernel<R, true><<<(unsigned)blocks, GEMV1_WARPS * 32, smem, s>>>(x, ldx, W, b, K, N, n, y, ldy, 1, rwt,
                                                                                   rpart, *fin);
    else
        gemv1_rows_kernel<R, false><<<(unsigned)blocks, GEMV1_WARPS * 32, smem, s>>>(x, ldx, W, b, K, N, n, y, ldy,
                                                                                    accumulate, nullptr, nullptr, {});
    return cudaGetLastError();
}

/* gemv1_rows_launch's instance for n rows (n <= GPTOSS_GEMV1_ROWS_MAX, checked by the callers) */
static cudaError_t gemv1_rows_pick(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int K, int N, int n,
                                   float *y, int ldy, int accumulate, cudaStream_t s, const float *rwt = nullptr,
                                   float *rpart = nullptr, const gemv1_fin *fin = nullptr) {
    const int sms = gptoss_sm_count();
    if (n <= 2) return gemv1_rows_launch<2>(sms, x, ldx, W, b, K, N, n, y, ldy, accumulate, s, rwt, rpart, fin);
    if (n <= 4) return gemv1_rows_launch<4>(sms, x, ldx, W, b, K, N, n, y, ldy, accumulate, s, rwt, rpart, fin);
    return gemv1_rows_launch<8>(sms, x, ldx, W, b, K, N, n, y, ldy, accumulate, s, rwt, rpart, fin);
}

cudaError_t gptoss_gemv1_rows(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K, int N, float *y,
                              int ldy, int accumulate, cudaStream_t s) {
    if (n < 1 || n > GPTOSS_GEMV1_ROWS_MAX) return cudaErrorNotSupported;
    if (N <= 0) return cudaSuccess;
    if (!gemv1_ok(x, W, K) || ldx % 4) return cudaErrorInvalidValue;
    return gemv1_rows_pick(x, ldx, W, b, K, N, n, y, ldy, accumulate, s);
}

cudaError_t gptoss_gemv1_rows_router(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K, int N,
                                     float *y, int ldy, const float *rwt, float *rpart, cudaStream_t s) {
    if (n < 1 || n > GPTOSS_GEMV1_ROWS_MAX) return cudaErrorNotSupported;
    if (N <= 0 || N % 32 || !gemv1_ok(x, W, K) || ldx % 4 || !rwt || !rpart) return cudaErrorInvalidValue;
    const gemv1_fin fin = {}; /* no counter: no finish */
    return gemv1_rows_pick(x, ldx, W, b, K, N, n, y, ldy, 1, s, rwt, rpart, &fin);
}

cudaError_t gptoss_gemv1_rows_router_finish(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n, int K,
                                            int N, float *y, int ldy, const float *rwt, float *rpart,
                                            const uint16_t *router_b, float eps, int32_t *ctr, int32_t *ids, float *w,
                                            int32_t *groups1, float *router_logits, float *r, cudaStream_t s) {
    if (n < 1 || n > GPTOSS_GEMV1_ROWS_MAX) return cudaErrorNotSupported;
    if (N <= 0 || N % 32 || !gemv1_ok(x, W, K) || ldx % 4 || !rwt || !rpart || !router_b || !ctr || !ids || !w ||
        !groups1 || !r)
        return cudaErrorInvalidValue;
    const gemv1_fin fin = gemv1_fin_make(router_b, eps, ctr, ids, groups1, w, router_logits, r, 0);
    return gemv1_rows_pick(x, ldx, W, b, K, N, n, y, ldy, 1, s, rwt, rpart, &fin);
}

static int g_use_gemv1 = 1;
void gptoss_linear_use_gemv1(int on) { g_use_gemv1 = on != 0; }

/* The GEMV needs 16-byte aligned rows of x and W. */
static bool gemv_ok(const float *x, int ldx, const uint16_t *W, int T, int K) {
    return T <= 4 && K % 8 == 0 && ldx % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)W & 15) == 0;
}

cudaError_t gptoss_linear(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                          float *y, int ldy, int accumulate, cudaStream_t s) {
    if (T <= 0 || N <= 0) return cudaSuccess;
    if (T == 1 && g_use_gemv1 && gemv1_ok(x, W, K)) return gptoss_gemv1(x, W, b, K, N, y, accumulate, s);
    if (gemv_ok(x, ldx, W, T, K)) {
        const unsigned blocks = (unsigned)((N + GEMV_WARPS - 1) / GEMV_WARPS);
        switch (T) {
        case 1: gemv_kernel<1><<<blocks, GEMV_WARPS * 32, 0, s>>>(x, ldx, W, b, K, N, y, ldy, accumulate); break;
        case 2: gemv_kernel<2><<<blocks, GEMV_WARPS * 32, 0, s>>>(x, ldx, W, b, K, N, y, ldy, accumulate); break;
        case 3: gemv_kernel<3><<<blocks, GEMV_WARPS * 32, 0, s>>>(x, ldx, W, b, K, N, y, ldy, accumulate); break;
        default: gemv_kernel<4><<<blocks, GEMV_WARPS * 32, 0, s>>>(x, ldx, W, b, K, N, y, ldy, accumulate); break;
        }
        return cudaGetLastError();
    }
    dim3 grid((unsigned)((N + LIN_BN - 1) / LIN_BN), (unsigned)((T + LIN_BM - 1) / LIN_BM));
    linear_kernel<<<grid, 256, 0, s>>>(x, ldx, W, b, T, K, N, y, ldy, accumulate);
    return cudaGetLastError();
}
