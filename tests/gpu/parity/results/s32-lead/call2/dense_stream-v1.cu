/* dense_stream.cu — gptoss_dense_stream: ys[M, N] = xs[M, K] · W[N, K]^T in fp32 for the few split rows of a
 * batched decode step (M = S x T <= 128: two bf16 parts of up to 64 tokens), each bf16 weight read once from
 * memory at close to its streaming rate, on tensor cores.
 *
 * Why: the batched step's dense linears (q/k/v, o_proj, lm_head) go to cuBLAS from 8 rows (tc.h), whose
 * algorithms for so few rows read W at ~1.3-1.5 TB/s on the H100 (a 64-row step's q/k/v 22 us a layer for 29.5 MB,
 * o_proj 16 us for 23.6 MB; session 25 step 51 timed every cublasLt heuristic algorithm: none faster). At M = 128
 * the product is 128 FLOP a weight byte, below the tensor cores' ridge, so the read is the floor.
 *
 * How: a CTA owns 128 rows of W over a range of K (split-K where N gives too few row blocks to fill the GPU).
 * Its 8 warps are 4 row groups of 32 rows x 2 halves of each staging phase's 32-k chunks. Each lane loads 16 bytes
 * (8 k) of each of its 4 rows (g, g + 8 of two 16-row tiles) per chunk straight from global memory, a chunk ahead;
 * those 8 k serve two m16n8k16 steps under one k order that A and B share: lane (g, t)'s physical k 8t + 4s + {0,1}
 * is step s's logical k {2t, 2t + 1}, and 8t + 4s + {2,3} its {2t + 8, 2t + 9}. So the B fragment of a token-part
 * row is also one 16-byte load, from the activations, which the CTA stages per phase of 4 chunks in shared memory
 * (cp.async, double-buffered, rows padded so the 8 lanes of a 16-byte access phase hit distinct banks). The two
 * k halves meet in shared memory (half 0 + half 1); with split-K each CTA writes its partial rows and the last CTA
 * of a row block (an atomic count) sums the splits in their order: deterministic, no extra launch.
 * The products of bf16 values are exact in fp32; only the fp32 summation order differs from cuBLAS's. */
#include "engines/gptoss_cuda/kernels.h"

#define DS_WARPS 8
#define DS_ROWS 128        /* rows of W per CTA: 4 row groups of 32 */
#define DS_PC 4            /* 32-k chunks per staging phase */
#define DS_XS (DS_PC * 32 + 32) /* a staged row's stride in bf16: 320 bytes, 64 mod 128 (conflict-free 16-byte reads) */
#define DS_MAX_SPLITS 16

static __device__ __forceinline__ void ds_mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                              uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void ds_cp16(uint16_t *dst, const uint16_t *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

/* Stages chunks [c, min(c + DS_PC, c1)) of the M rows of xs into buf (row m at m * DS_XS). */
static __device__ __forceinline__ void ds_stage(uint16_t *buf, const uint16_t *xs, int K, int M, int c, int c1) {
    const int units = M * DS_PC * 4;
    for (int u = threadIdx.x; u < units; u += DS_WARPS * 32) {
        const int m = u / (DS_PC * 4), q = u - m * (DS_PC * 4);
        const int ch = c + (q >> 2);
        if (ch < c1) ds_cp16(buf + m * DS_XS + q * 8, xs + (size_t)m * K + (size_t)ch * 32 + (q & 3) * 8);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* The 4 weight words of a lane for chunk ch: rows g, g + 8 of tile 0, then of tile 1 (r: row g of tile 0 at the
 * lane's 8 k, K8 = 8 K: the stride of 8 rows). */
static __device__ __forceinline__ void ds_load(uint4 w[4], const uint16_t *r, size_t K8, int ch, int ok) {
#pragma unroll
    for (int i = 0; i < 4; i++)
        w[i] = ok ? __ldcs((const uint4 *)(r + i * K8 + (size_t)ch * 32)) : make_uint4(0u, 0u, 0u, 0u);
}

/* One chunk: both tiles, both k16 steps, every token-part tile of 8 rows. */
template <int MT>
static __device__ __forceinline__ void ds_chunk(const uint4 w[4], const uint16_t *xrow, float acc[2][MT][4]) {
#pragma unroll
    for (int j = 0; j < MT; j++) {
        const uint4 b = *(const uint4 *)(xrow + j * 8 * DS_XS);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint4 lo = w[2 * i], hi = w[2 * i + 1];
            ds_mma(acc[i][j], lo.x, hi.x, lo.y, hi.y, b.x, b.y); /* step 0 */
            ds_mma(acc[i][j], lo.z, hi.z, lo.w, hi.w, b.z, b.w); /* step 1 */
        }
    }
}

template <int MT>
__global__ void __launch_bounds__(DS_WARPS * 32, MT > 8 ? 1 : 2)
    dense_stream_kernel(const uint16_t *__restrict__ W, const uint16_t *__restrict__ xs, int K, int N, int M, int splits,
                        float *part, int32_t *ctr, float *ys) {
    extern __shared__ __align__(16) uint16_t ds_smem[]; /* [2][8 MT][DS_XS] staged rows; then the halves' sums */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int rg = warp & 3, kw = warp >> 2;
    const int rb = blockIdx.x, ks = blockIdx.y;
    const int C = K / 32, c0 = (int)((long)ks * C / splits), c1 = (int)((long)(ks + 1) * C / splits);
    const int phases = (c1 - c0 + DS_PC - 1) / DS_PC;
    /* token-part rows past M read zeros: both buffers' rows M.. cleared once */
    for (int i = threadIdx.x; i < (8 * MT - M) * DS_XS; i += DS_WARPS * 32) {
        ds_smem[M * DS_XS + i] = 0;
        ds_smem[(8 * MT + M) * DS_XS + i] = 0;
    }
    /* N % 32 == 0: a row group lies wholly inside W or wholly past it (then it loads and stores nothing) */
    const int row0 = rb * DS_ROWS + rg * 32, live = row0 < N;
    const size_t K8 = (size_t)8 * K;
    const uint16_t *r = W + (size_t)(live ? row0 + g : 0) * K + 8 * t;
    float acc[2][MT][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < MT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
    /* the warp's chunks of phase p: c0 + p DS_PC + kw and + kw + 2 */
    uint4 wa[4], wb[4];
    ds_load(wa, r, K8, c0 + kw, live && c0 + kw < c1);
    ds_load(wb, r, K8, c0 + kw + 2, live && c0 + kw + 2 < c1);
    ds_stage(ds_smem, xs, K, M, c0, c1);
    for (int p = 0; p < phases; p++) {
        const int c = c0 + p * DS_PC;
        if (p + 1 < phases) {
            ds_stage(ds_smem + ((p + 1) & 1) * 8 * MT * DS_XS, xs, K, M, c + DS_PC, c1);
            asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        }
        __syncthreads();
        const uint16_t *xrow = ds_smem + ((p & 1) * 8 * MT + g) * DS_XS + 8 * t;
        if (c + kw < c1) ds_chunk<MT>(wa, xrow + kw * 32, acc);
        ds_load(wa, r, K8, c + DS_PC + kw, live && c + DS_PC + kw < c1);
        if (c + kw + 2 < c1) ds_chunk<MT>(wb, xrow + (kw + 2) * 32, acc);
        ds_load(wb, r, K8, c + DS_PC + kw + 2, live && c + DS_PC + kw + 2 < c1);
        __syncthreads(); /* every warp is done with this buffer before phase p + 2 is staged there */
    }
    /* half 1 hands its sums to half 0 (the staging buffers are free now) */
    float *red = (float *)ds_smem + (size_t)rg * (2 * MT * 4) * 32;
    if (kw == 1) {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < MT; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) red[((i * MT + j) * 4 + v) * 32 + lane] = acc[i][j][v];
    }
    __syncthreads();
    float *out = splits > 1 ? part + (size_t)ks * M * N : ys;
    if (kw == 0) {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < MT; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const int n = row0 + i * 16 + g + (v >> 1) * 8, m = 8 * j + 2 * t + (v & 1);
                    const float s = acc[i][j][v] + red[((i * MT + j) * 4 + v) * 32 + lane];
                    if (n < N && m < M) out[(size_t)m * N + n] = s;
                }
    }
    if (splits == 1) return;
    /* split-K: the last CTA of this row block sums the splits in order */
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(&ctr[rb], 1) == splits - 1;
        if (last) ctr[rb] = 0; /* every split has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int n0 = rb * DS_ROWS, nr = N - n0 < DS_ROWS ? N - n0 : DS_ROWS;
    for (int e = threadIdx.x; e < M * DS_ROWS; e += DS_WARPS * 32) {
        const int m = e / DS_ROWS, nn = e - m * DS_ROWS;
        if (nn >= nr) continue;
        const size_t o = (size_t)m * N + n0 + nn;
        float s = __ldcg(part + o);
        for (int k = 1; k < splits; k++) s += __ldcg(part + (size_t)k * M * N + o);
        ys[o] = s;
    }
}

static size_t ds_smem_bytes(int MT) {
    const size_t stage = (size_t)2 * 8 * MT * DS_XS * sizeof(uint16_t);
    const size_t red = (size_t)4 * 2 * MT * 4 * 32 * sizeof(float);
    return stage > red ? stage : red;
}

template <int MT>
static cudaError_t ds_launch(const uint16_t *W, const uint16_t *xs, int K, int N, int M, float *ys,
                             const gptoss_dense_stream_ws *ws, cudaStream_t stream) {
    static int opted;
    const size_t smem = ds_smem_bytes(MT);
    if (!opted) {
        cudaError_t e = cudaFuncSetAttribute(dense_stream_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        opted = 1;
    }
    const int blocks = (N + DS_ROWS - 1) / DS_ROWS, per_sm = MT > 8 ? 1 : 2;
    const int C = K / 32;
    int splits = ws->sms * per_sm / blocks;
    if (splits > DS_MAX_SPLITS) splits = DS_MAX_SPLITS;
    if (splits > C / DS_PC) splits = C / DS_PC; /* at least a phase each */
    while (splits > 1 && ((size_t)splits * M * N > ws->part_elems || blocks > ws->ctr_elems)) splits--;
    if (splits < 1) splits = 1;
    dense_stream_kernel<MT><<<dim3((unsigned)blocks, (unsigned)splits), DS_WARPS * 32, smem, stream>>>(
        W, xs, K, N, M, splits, ws->part, ws->ctr, ys);
    return cudaGetLastError();
}

int gptoss_dense_stream_ok(int K, int N, int M) {
    return M >= 1 && M <= GPTOSS_DENSE_STREAM_MAX_M && K >= 32 && K % 32 == 0 && N >= 32 && N % 32 == 0;
}

cudaError_t gptoss_dense_stream(const uint16_t *W, const uint16_t *xs, int K, int N, int M, float *ys,
                                const gptoss_dense_stream_ws *ws, cudaStream_t stream) {
    if (!gptoss_dense_stream_ok(K, N, M) || !ws || ws->sms < 1) return cudaErrorNotSupported;
    if (!W || !xs || !ys || ((uintptr_t)W & 15) || ((uintptr_t)xs & 15)) return cudaErrorInvalidValue;
    if (M <= 16) return ds_launch<2>(W, xs, K, N, M, ys, ws, stream);
    if (M <= 32) return ds_launch<4>(W, xs, K, N, M, ys, ws, stream);
    if (M <= 64) return ds_launch<8>(W, xs, K, N, M, ys, ws, stream);
    return ds_launch<16>(W, xs, K, N, M, ys, ws, stream);
}

int gptoss_dense_stream_ws_init(gptoss_dense_stream_ws *ws, int device) {
    memset(ws, 0, sizeof *ws);
    if (cudaDeviceGetAttribute(&ws->sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return -1;
    ws->part_elems = GPTOSS_DENSE_STREAM_PART_ELEMS;
    ws->ctr_elems = GPTOSS_DENSE_STREAM_CTRS;
    if (cudaMalloc((void **)&ws->part, ws->part_elems * sizeof(float)) != cudaSuccess) {
        ws->part = NULL;
        return -1;
    }
    if (cudaMalloc((void **)&ws->ctr, ws->ctr_elems * sizeof(int32_t)) != cudaSuccess ||
        cudaMemset(ws->ctr, 0, ws->ctr_elems * sizeof(int32_t)) != cudaSuccess) {
        gptoss_dense_stream_ws_free(ws);
        return -1;
    }
    return 0;
}

void gptoss_dense_stream_ws_free(gptoss_dense_stream_ws *ws) {
    if (!ws) return;
    if (ws->part) cudaFree(ws->part);
    if (ws->ctr) cudaFree(ws->ctr);
    ws->part = NULL;
    ws->ctr = NULL;
}
