/* kv_cache.cu — writes of K/V into the paged cache (layout and addressing: gptoss_kv in kernels.h). */
#include "engines/gptoss_cuda/kernels.h"

/* One thread per (row, feature). pos_dev: row t is its own sequence (table row t) at pos_dev[t];
 * else row t is position pos0 + t of table row 0. */
__global__ void kv_store_kernel(const float *k, const float *v, int T, int pos0, const int32_t *pos_dev,
                                const gptoss_kv kv) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)T * kv.kvd) return;
    const int t = (int)(idx / kv.kvd), i = (int)(idx % kv.kvd);
    const int row = pos_dev ? t : 0, pos = pos_dev ? pos_dev[t] : pos0 + t;
    gptoss_kv_k(kv, row, pos)[i] = k[idx];
    gptoss_kv_v(kv, row, pos)[i] = v[idx];
}

static int kv_valid(const gptoss_kv &kv) { return kv.pool && kv.table && kv.max_pages > 0 && kv.kvd > 0; }

cudaError_t gptoss_kv_store(const float *k, const float *v, int B, const int32_t *pos, gptoss_kv kv, cudaStream_t s) {
    if (B <= 0 || !pos || !kv_valid(kv)) return cudaErrorInvalidValue;
    const long n = (long)B * kv.kvd;
    kv_store_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(k, v, B, 0, pos, kv);
    return cudaGetLastError();
}

cudaError_t gptoss_kv_store_range(const float *k, const float *v, int T, int pos0, gptoss_kv kv, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    if (pos0 < 0 || !kv_valid(kv)) return cudaErrorInvalidValue;
    const long n = (long)T * kv.kvd;
    kv_store_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(k, v, T, pos0, NULL, kv);
    return cudaGetLastError();
}
