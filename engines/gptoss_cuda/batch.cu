/* batch.cu — kernels of the batched decode step (continuous batching) that the single-sequence
 * launchers do not cover: RoPE with one position per row (see kernels.h). */
#include "engines/gptoss_cuda/kernels.h"

/* One thread per (row, head, i < 32); the angle is formed exactly as rope_kernel does (rope.cu), so a
 * row gives the bits a one-token gptoss_rope at the same position gives. */
__global__ void rope_rows_kernel(float *x, int ld, int B, int n_heads, const int32_t *pos, const float *inv_freq,
                                 float af) {
    const int half = GPTOSS_HEAD_DIM / 2;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * n_heads * half) return;
    const int i = (int)(idx % half);
    const int h = (int)((idx / half) % n_heads);
    const int b = (int)(idx / ((long)half * n_heads));
    const float ang = (float)pos[b] * inv_freq[i];
    const float c = cosf(ang) * af, sn = sinf(ang) * af;
    float *v = x + (size_t)b * ld + (size_t)h * GPTOSS_HEAD_DIM;
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c - x2 * sn;
    v[i + half] = x2 * c + x1 * sn;
}

cudaError_t gptoss_rope_rows(float *x, int ld, int B, int n_heads, const int32_t *pos, const float *inv_freq, float af,
                             cudaStream_t s) {
    const long n = (long)B * n_heads * (GPTOSS_HEAD_DIM / 2);
    if (n <= 0 || !pos) return cudaErrorInvalidValue;
    rope_rows_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, ld, B, n_heads, pos, inv_freq, af);
    return cudaGetLastError();
}
