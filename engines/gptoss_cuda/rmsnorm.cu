/* rmsnorm.cu — token embedding lookup and RMSNorm (see kernels.h). */
#include "engines/gptoss_cuda/kernels.h"

/* One block per token. An id outside the vocabulary (only a sampler bug could give one: the scheduler launches a
 * step before the host has read the sampled id, see scheduler.cu) reads no memory and gives a NaN row. */
__global__ void embed_kernel(const uint16_t *embed, const int32_t *tokens, int H, int V, float *x) {
    const int t = blockIdx.x, id = tokens[t];
    float *xr = x + (size_t)t * H;
    if (id < 0 || id >= V) {
        for (int i = threadIdx.x; i < H; i += blockDim.x) xr[i] = __int_as_float(0x7fc00000);
        return;
    }
    const uint16_t *row = embed + (size_t)id * H;
    for (int i = threadIdx.x; i < H; i += blockDim.x) xr[i] = gptoss_bf16_to_f32(row[i]);
}

cudaError_t gptoss_embed(const uint16_t *embed, const int32_t *tokens, int T, int H, int V, float *x, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    embed_kernel<<<T, 256, 0, s>>>(embed, tokens, H, V, x);
    return cudaGetLastError();
}

/* One block per token: a block-wide sum of squares, then the scaled copy. */
__global__ void rmsnorm_kernel(const float *x, const uint16_t *w, int H, float eps, float *y) {
    __shared__ float part[32];
    const float *xr = x + (size_t)blockIdx.x * H;
    float *yr = y + (size_t)blockIdx.x * H;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < H; i += blockDim.x) ss += xr[i] * xr[i];
    const float r = rsqrtf(gptoss_block_sum(ss, part) / (float)H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x) yr[i] = (xr[i] * r) * gptoss_bf16_to_f32(w[i]);
}

cudaError_t gptoss_rmsnorm(const float *x, const uint16_t *w, int T, int H, float eps, float *y, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    rmsnorm_kernel<<<T, 256, 0, s>>>(x, w, H, eps, y);
    return cudaGetLastError();
}
