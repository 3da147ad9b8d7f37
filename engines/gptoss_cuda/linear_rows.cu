/* linear_rows.cu — gptoss_linear_rows: the bf16 linears of a batched decode step with 2..16 rows, one
 * pass over W for all rows (kernels.h).
 *
 * Why: the warp-per-row GEMV of linear.cu serves at most 4 rows per pass, so a 16-row step read every
 * q/k/v/o weight and the 1.16 GB lm_head four times (gemv_kernel<4>, ~13% of GPU time in a 64-stream
 * run); cuBLAS on tensor cores (tc.h) needs 32+ rows to pay for its split and reduce launches.
 * How: one persistent block per SM stages all T rows of x in shared memory once (each row split into the
 * two float4 halves of each 8-element chunk, as gemv1 does, so lanes read consecutive 16-byte words);
 * each warp owns ROWS_NR consecutive output rows at a time and each lane keeps ROWS_NR x ROWS_U 16-byte
 * weight loads in flight, then multiplies every loaded chunk with the T staged rows (acc[T][NR] in
 * registers). Each lane sums its chunks in ascending order, then the warp reduces with a fixed xor tree:
 * deterministic, equal to the other GEMVs up to fp32 summation order. */
#include "engines/gptoss_cuda/kernels.h"

#define ROWS_WARPS 8
#define ROWS_NR 4 /* output rows per warp pass */
#define ROWS_U 2  /* chunks per lane per row in flight */
#define ROWS_SMEM_MAX (200 * 1024)

template <int NT>
__global__ void __launch_bounds__(ROWS_WARPS * 32, 1)
    rows_kernel(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N, float *y, int ldy,
                int accumulate) {
    extern __shared__ float4 xs4[]; /* [NT][2][K / 8], rows >= T zero */
    const int K8 = K / 8;
    for (int j = threadIdx.x; j < NT * 2 * K8; j += blockDim.x) {
        const int t = j / (2 * K8), r = j - t * 2 * K8;
        const float4 v = t < T ? ((const float4 *)(x + (size_t)t * ldx))[r] : make_float4(0.f, 0.f, 0.f, 0.f);
        xs4[(size_t)t * 2 * K8 + (r & 1) * K8 + (r >> 1)] = v;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int groups = (N + ROWS_NR - 1) / ROWS_NR;
    for (int g = blockIdx.x * ROWS_WARPS + warp; g < groups; g += gridDim.x * ROWS_WARPS) {
        const int n0 = g * ROWS_NR;
        const uint4 *w4[ROWS_NR];
#pragma unroll
        for (int r = 0; r < ROWS_NR; r++) w4[r] = (const uint4 *)(W + (size_t)(n0 + r < N ? n0 + r : N - 1) * K);
        float acc[NT][ROWS_NR];
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int r = 0; r < ROWS_NR; r++) acc[t][r] = 0.0f;
        for (int c0 = lane; c0 < K8; c0 += 32 * ROWS_U) {
            uint4 v[ROWS_U][ROWS_NR];
#pragma unroll
            for (int u = 0; u < ROWS_U; u++)
#pragma unroll
                for (int r = 0; r < ROWS_NR; r++)
                    v[u][r] = c0 + 32 * u < K8 ? __ldcs(w4[r] + c0 + 32 * u) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int u = 0; u < ROWS_U; u++) {
                const int c = c0 + 32 * u;
                if (c >= K8) break;
                float w[ROWS_NR][8];
#pragma unroll
                for (int r = 0; r < ROWS_NR; r++) gptoss_bf16x8(v[u][r], w[r]);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const float4 a = xs4[(size_t)t * 2 * K8 + c], d = xs4[(size_t)t * 2 * K8 + K8 + c];
#pragma unroll
                    for (int r = 0; r < ROWS_NR; r++)
                        acc[t][r] += a.x * w[r][0] + a.y * w[r][1] + a.z * w[r][2] + a.w * w[r][3] + d.x * w[r][4] +
                                     d.y * w[r][5] + d.z * w[r][6] + d.w * w[r][7];
                }
            }
        }
        /* Warp sums; the lane (t * NR + r) % 32 writes (t, n0 + r). */
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int r = 0; r < ROWS_NR; r++) {
                float s = acc[t][r];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                const int n = n0 + r;
                if (lane == ((t * ROWS_NR + r) & 31) && t < T && n < N) {
                    s += b ? gptoss_bf16_to_f32(b[n]) : 0.0f;
                    float *dst = y + (size_t)t * ldy + n;
                    *dst = accumulate ? *dst + s : s;
                }
            }
    }
}

int gptoss_linear_rows_max(int K) {
    if (K <= 0 || K % 8) return 0;
    /* the largest instance (2, 4, 8, 12, 16 rows) whose staged x fits the shared memory */
    const long fit = ROWS_SMEM_MAX / ((long)K * (long)sizeof(float));
    static const int inst[] = {16, 12, 8, 4, 2};
    for (int i = 0; i < 5; i++)
        if (inst[i] <= fit) return inst[i];
    return 0;
}

/* Launches NT's instance; the shared-memory opt-in is made once per instance (a host attribute call). */
template <int NT>
static cudaError_t rows_launch(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                               float *y, int ldy, int accumulate, cudaStream_t s) {
    static int opted = 0;
    const cudaError_t oe = gptoss_smem_opt_in(rows_kernel<NT>, ROWS_SMEM_MAX, &opted);
    if (oe != cudaSuccess) return oe;
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e != cudaSuccess) return e;
    }
    const int groups = (N + ROWS_NR - 1) / ROWS_NR;
    const int blocks = groups < sms ? groups : sms;
    const size_t smem = (size_t)NT * K * sizeof(float);
    rows_kernel<NT><<<blocks, ROWS_WARPS * 32, smem, s>>>(x, ldx, W, b, T, K, N, y, ldy, accumulate);
    return cudaGetLastError();
}

cudaError_t gptoss_linear_rows(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                               float *y, int ldy, int accumulate, cudaStream_t s) {
    if (T <= 0 || N <= 0) return cudaSuccess;
    if (T > gptoss_linear_rows_max(K) || ldx % 4 || ((uintptr_t)x & 15) || ((uintptr_t)W & 15))
        return cudaErrorInvalidValue;
    /* Rows padded to the next instance (zeros in shared memory, never written). */
    if (T <= 2) return rows_launch<2>(x, ldx, W, b, T, K, N, y, ldy, accumulate, s);
    if (T <= 4) return rows_launch<4>(x, ldx, W, b, T, K, N, y, ldy, accumulate, s);
    if (T <= 8) return rows_launch<8>(x, ldx, W, b, T, K, N, y, ldy, accumulate, s);
    if (T <= 12) return rows_launch<12>(x, ldx, W, b, T, K, N, y, ldy, accumulate, s);
    return rows_launch<16>(x, ldx, W, b, T, K, N, y, ldy, accumulate, s);
}
