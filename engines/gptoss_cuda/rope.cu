/* rope.cu — YaRN rotary embedding, NeoX rotate-half pairing (i with i+32), see kernels.h. */
#include "engines/gptoss_cuda/kernels.h"

/* One thread per (token, head, i < 32): gptoss_rope_pair (kernels.h), the angle formed in fp32 as transformers does. */
__global__ void rope_kernel(float *x, int ld, int T, int n_heads, int pos0, const int32_t *pos_dev,
                            const float *inv_freq, float af) {
    const int half = GPTOSS_HEAD_DIM / 2;
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)T * n_heads * half) return;
    const int i = (int)(idx % half);
    const int h = (int)((idx / half) % n_heads);
    const int t = (int)(idx / ((long)half * n_heads));
    if (pos_dev) pos0 = *pos_dev; /* graph replay: the position lives on the device */
    float *v = x + (size_t)t * ld + (size_t)h * GPTOSS_HEAD_DIM;
    gptoss_rope_pair(v[i], v[i + half], pos0 + t, inv_freq[i], af, &v[i], &v[i + half]);
}

cudaError_t gptoss_rope(float *x, int ld, int T, int n_heads, int pos0, const float *inv_freq, float af,
                        cudaStream_t s) {
    const long n = (long)T * n_heads * (GPTOSS_HEAD_DIM / 2);
    if (n <= 0) return cudaSuccess;
    rope_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, ld, T, n_heads, pos0, NULL, inv_freq, af);
    return cudaGetLastError();
}

cudaError_t gptoss_rope_at(float *x, int n_heads, const int32_t *pos, const float *inv_freq, float af,
                           cudaStream_t s) {
    const long n = (long)n_heads * (GPTOSS_HEAD_DIM / 2);
    if (n <= 0 || !pos) return cudaErrorInvalidValue;
    rope_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, n_heads * GPTOSS_HEAD_DIM, 1, n_heads, 0, pos,
                                                             inv_freq, af);
    return cudaGetLastError();
}

__global__ void set_i32_kernel(int32_t *dst, int32_t v) { *dst = v; }

cudaError_t gptoss_set_i32(int32_t *dst, int32_t v, cudaStream_t s) {
    set_i32_kernel<<<1, 1, 0, s>>>(dst, v);
    return cudaGetLastError();
}
