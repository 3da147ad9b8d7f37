/* linear.cu — fp32 activations times bf16 weights (nn.Linear layout), fp32 accumulation.
 *
 * One tiled kernel serves prefill and decode: a block computes a 64-token x 64-output tile, staging
 * 32-wide K slices of x and W in shared memory (W converted exactly from bf16). Every output element
 * is owned by one thread, which sums k in ascending order: results do not depend on T or tiling. */
#include "engines/gptoss_cuda/kernels.h"

#define LIN_BM 64 /* tokens per tile */
#define LIN_BN 64 /* outputs per tile */
#define LIN_BK 32

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
#pragma unroll 8
        for (int kk = 0; kk < LIN_BK; kk++) {
            float xv[4], wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; j++) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
        }
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

cudaError_t gptoss_linear(const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T, int K, int N,
                          float *y, int ldy, int accumulate, cudaStream_t s) {
    if (T <= 0 || N <= 0) return cudaSuccess;
    dim3 grid((unsigned)((N + LIN_BN - 1) / LIN_BN), (unsigned)((T + LIN_BM - 1) / LIN_BM));
    linear_kernel<<<grid, 256, 0, s>>>(x, ldx, W, b, T, K, N, y, ldy, accumulate);
    return cudaGetLastError();
}
