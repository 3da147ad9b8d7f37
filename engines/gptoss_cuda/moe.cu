/* moe.cu — router top-4 + softmax, grouping tokens by expert, the MXFP4 expert matmuls, the clamped
 * SwiGLU and the weighted gather of the 4 expert outputs (see kernels.h). */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/tile.h"

/* The top-4 of one token's E logits: 4 passes of argmax with strict '>' (ties go to the lower id). */
__device__ static void router_top4(const float *l, int E, int sel[GPTOSS_TOPK], float val[GPTOSS_TOPK]) {
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= sel[j] == e;
            if (taken) continue;
            if (best < 0 || l[e] > bv) { best = e; bv = l[e]; }
        }
        sel[k] = best;
        val[k] = bv;
    }
}

/* One thread per token: the top-4, then a softmax over the 4 chosen logits only. */
__global__ void router_topk_kernel(const float *logits, int T, int E, int32_t *ids, float *w) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    int sel[GPTOSS_TOPK];
    float val[GPTOSS_TOPK];
    router_top4(logits + (size_t)t * E, E, sel, val);
    float sum = 0.0f, p[GPTOSS_TOPK];
    for (int k = 0; k < GPTOSS_TOPK; k++) { p[k] = expf(val[k] - val[0]); sum += p[k]; }
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        ids[(size_t)t * GPTOSS_TOPK + k] = sel[k];
        w[(size_t)t * GPTOSS_TOPK + k] = p[k] / sum;
    }
}

cudaError_t gptoss_router_topk(const float *logits, int T, int E, int32_t *ids, float *w, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    if (E < GPTOSS_TOPK) return cudaErrorInvalidValue;
    router_topk_kernel<<<(T + 127) / 128, 128, 0, s>>>(logits, T, E, ids, w);
    return cudaGetLastError();
}

/* A row whose first id is negative takes the router's own top-4 (written back to ids): its weights are
 * then those of router_topk_kernel bit for bit (mx is val[0], the same sum in the same order). */
__global__ void router_weights_kernel(const float *logits, int T, int E, int32_t *ids, float *w) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    if (ids[(size_t)t * GPTOSS_TOPK] < 0) {
        int sel[GPTOSS_TOPK];
        float val[GPTOSS_TOPK];
        router_top4(logits + (size_t)t * E, E, sel, val);
        for (int k = 0; k < GPTOSS_TOPK; k++) ids[(size_t)t * GPTOSS_TOPK + k] = sel[k];
    }
    float v[GPTOSS_TOPK], mx = -INFINITY, sum = 0.0f;
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        const int e = ids[(size_t)t * GPTOSS_TOPK + k];
        v[k] = (e >= 0 && e < E) ? logits[(size_t)t * E + e] : -INFINITY;
        mx = fmaxf(mx, v[k]);
    }
    for (int k = 0; k < GPTOSS_TOPK; k++) { v[k] = expf(v[k] - mx); sum += v[k]; }
    for (int k = 0; k < GPTOSS_TOPK; k++) w[(size_t)t * GPTOSS_TOPK + k] = v[k] / sum;
}

cudaError_t gptoss_router_weights(const float *logits, int T, int E, int32_t *ids, float *w, cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    if (E < GPTOSS_TOPK) return cudaErrorInvalidValue;
    router_weights_kernel<<<(T + 127) / 128, 128, 0, s>>>(logits, T, E, ids, w);
    return cudaGetLastError();
}

/* One block: counts and offsets by expert, then each pair's slot by an atomic cursor per expert. With Tp > 0 each
 * expert has two cursors, so the pairs of tokens t < Tp (the precise rows) take the first slots of their expert's
 * group and the rest follow; their count and its prefix sum go to counts[E + e], offsets[E + e]. */
__global__ void moe_route_kernel(const int32_t *ids, int T, int Tp, int E, int32_t *counts, int32_t *offsets,
                                 int32_t *pair_token, int32_t *pair_of) {
    __shared__ int cnt[GPTOSS_MAX_EXPERTS], cur[GPTOSS_MAX_EXPERTS], lo[GPTOSS_MAX_EXPERTS], lo_cur[GPTOSS_MAX_EXPERTS];
    const int P = T * GPTOSS_TOPK, Pp = Tp * GPTOSS_TOPK;
    for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = lo[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < P; p += blockDim.x) {
        atomicAdd(&cnt[ids[p]], 1);
        if (p < Pp) atomicAdd(&lo[ids[p]], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int off = 0, lo_off = 0;
        for (int e = 0; e < E; e++) {
            counts[e] = cnt[e];
            offsets[e] = off;
            lo_cur[e] = off;
            cur[e] = off + lo[e];
            if (Tp > 0) {
                counts[E + e] = lo[e];
                offsets[E + e] = lo_off;
            }
            off += cnt[e];
            lo_off += lo[e];
        }
    }
    __syncthreads();
    for (int p = threadIdx.x; p < P; p += blockDim.x) {
        const int slot = atomicAdd(p < Pp ? &lo_cur[ids[p]] : &cur[ids[p]], 1);
        pair_token[slot] = p / GPTOSS_TOPK;
        pair_of[p] = slot;
    }
}

cudaError_t gptoss_moe_route_precise(const int32_t *ids, int T, int Tp, int E, int32_t *counts, int32_t *offsets,
                                     int32_t *pair_token, int32_t *pair_of, cudaStream_t s) {
    if (E <= 0 || E > GPTOSS_MAX_EXPERTS || Tp < 0 || Tp > T) return cudaErrorInvalidValue;
    moe_route_kernel<<<1, 1024, 0, s>>>(ids, T, Tp, E, counts, offsets, pair_token, pair_of);
    return cudaGetLastError();
}

cudaError_t gptoss_moe_route(const int32_t *ids, int T, int E, int32_t *counts, int32_t *offsets,
                             int32_t *pair_token, int32_t *pair_of, cudaStream_t s) {
    return gptoss_moe_route_precise(ids, T, 0, E, counts, offsets, pair_token, pair_of, s);
}

/* Grouped MXFP4 tile matmul, the same 64x64 tiling as linear.cu with K slices of exactly one MXFP4
 * block (32 values). blockIdx.z = expert; blocks past the expert's row count exit at once. The weight
 * tile is decoded exactly (fp4 value times a power of two) into shared memory. */
#define MX_BM GPTOSS_TILE
#define MX_BN GPTOSS_TILE

__constant__ float c_fp4[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

__global__ void __launch_bounds__(256) mxfp4_grouped_kernel(const float *x, int ldx, const int32_t *gather,
                                                            const uint8_t *blocks, const uint8_t *scales,
                                                            const uint16_t *bias, const int32_t *counts,
                                                            const int32_t *offsets, int K, int N, float *y) {
    __shared__ float xs[32][MX_BM + 1];
    __shared__ float ws[32][MX_BN + 1];
    __shared__ int rows[MX_BM];
    const int e = blockIdx.z;
    const int cnt = counts[e], base = offsets[e];
    const int r0 = blockIdx.y * MX_BM, n0 = blockIdx.x * MX_BN;
    if (r0 >= cnt) return;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    if (tid < MX_BM) {
        const int r = r0 + tid;
        rows[tid] = r < cnt ? (gather ? gather[base + r] : base + r) : -1;
    }
    __syncthreads();
    const int KB = K / 32;
    const size_t ebase = (size_t)e * N;
    float acc[4][4] = {};
    for (int kb = 0; kb < KB; kb++) {
        for (int i = tid; i < MX_BM * 32; i += 256) {
            const int r = i / 32, kk = i % 32, row = rows[r];
            xs[kk][r] = row >= 0 ? x[(size_t)row * ldx + (size_t)kb * 32 + kk] : 0.0f;
        }
        { /* 64 rows x 16 bytes: thread = (row, 4-byte quarter) */
            const int r = tid >> 2, qtr = tid & 3, n = n0 + r;
            if (n < N) {
                const size_t blk = (ebase + n) * KB + kb;
                const float sc = ldexpf(1.0f, (int)scales[blk] - 127);
                const uint32_t packed = *(const uint32_t *)(blocks + blk * 16 + qtr * 4);
#pragma unroll
                for (int bj = 0; bj < 4; bj++) {
                    const uint32_t byte = (packed >> (8 * bj)) & 0xffu;
                    ws[qtr * 8 + 2 * bj][r] = c_fp4[byte & 15u] * sc;
                    ws[qtr * 8 + 2 * bj + 1][r] = c_fp4[byte >> 4] * sc;
                }
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++) ws[qtr * 8 + j][r] = 0.0f;
            }
        }
        __syncthreads();
        gptoss_tile_fma(xs, ws, tx, ty, acc);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + ty + 16 * i;
        if (r >= cnt) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = n0 + tx + 16 * j;
            if (n < N) y[(size_t)(base + r) * N + n] = acc[i][j] + gptoss_bf16_to_f32(bias[ebase + n]);
        }
    }
}

/* Decode path (few pairs): one warp per (pair, output row); each lane takes whole MXFP4 blocks (16
 * bytes + scale, one 16-byte load) and the 32 matching activations, then the warp reduces. The expert of
 * grouped pair p is the one whose [offset, offset + count) holds p. */
#define MXV_WARPS 8
__global__ void __launch_bounds__(MXV_WARPS * 32) mxfp4_gemv_kernel(const float *x, int ldx, const int32_t *gather,
                                                                    const uint8_t *blocks, const uint8_t *scales,
                                                                    const uint16_t *bias, const int32_t *counts,
                                                                    const int32_t *offsets, int E, int K, int N,
                                                                    float *y) {
    __shared__ float lut[16]; /* divergent lookups: shared memory serves 16 distinct words at once */
    if (threadIdx.x < 16) lut[threadIdx.x] = c_fp4[threadIdx.x];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * MXV_WARPS + (threadIdx.x >> 5), p = blockIdx.y;
    if (n >= N) return;
    int e = 0;
    while (e < E && !(p >= offsets[e] && p < offsets[e] + counts[e])) e++;
    if (e == E) return; /* unreachable: every pair belongs to one expert */
    const int row = gather ? gather[p] : p;
    const int KB = K / 32;
    const size_t rb = ((size_t)e * N + n) * KB;
    const float *xr = x + (size_t)row * ldx;
    float acc = 0.0f;
    for (int g = lane; g < KB; g += 32) {
        const uint4 q = __ldg((const uint4 *)(blocks + (rb + g) * 16));
        const float sc = ldexpf(1.0f, (int)scales[rb + g] - 127);
        const uint32_t u[4] = {q.x, q.y, q.z, q.w};
        const float4 *x4 = (const float4 *)(xr + (size_t)g * 32);
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) { /* 4 bytes = 8 values = 2 float4 of x */
            const float4 a = x4[2 * i], c = x4[2 * i + 1];
            const uint32_t w = u[i];
            part += a.x * lut[w & 15u] + a.y * lut[(w >> 4) & 15u] + a.z * lut[(w >> 8) & 15u] +
                    a.w * lut[(w >> 12) & 15u] + c.x * lut[(w >> 16) & 15u] + c.y * lut[(w >> 20) & 15u] +
                    c.z * lut[(w >> 24) & 15u] + c.w * lut[w >> 28];
        }
        acc += part * sc;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[(size_t)p * N + n] = acc + gptoss_bf16_to_f32(bias[(size_t)e * N + n]);
}

cudaError_t gptoss_mxfp4_grouped(const float *x, int ldx, const int32_t *gather, const uint8_t *blocks,
                                 const uint8_t *scales, const uint16_t *b, const int32_t *counts,
                                 const int32_t *offsets, int E, int max_rows, int K, int N, float *y,
                                 cudaStream_t s) {
    if (max_rows <= 0) return cudaSuccess;
    if (K % 32 != 0 || E <= 0 || E > 65535) return cudaErrorInvalidValue;
    if (max_rows <= 4 && ldx % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)blocks & 15) == 0) {
        dim3 grid((unsigned)((N + MXV_WARPS - 1) / MXV_WARPS), (unsigned)(max_rows * GPTOSS_TOPK));
        mxfp4_gemv_kernel<<<grid, MXV_WARPS * 32, 0, s>>>(x, ldx, gather, blocks, scales, b, counts, offsets, E, K, N, y);
        return cudaGetLastError();
    }
    dim3 grid((unsigned)((N + MX_BN - 1) / MX_BN), (unsigned)((max_rows + MX_BM - 1) / MX_BM), (unsigned)E);
    if (grid.y > 65535) return cudaErrorInvalidValue;
    mxfp4_grouped_kernel<<<grid, 256, 0, s>>>(x, ldx, gather, blocks, scales, b, counts, offsets, K, N, y);
    return cudaGetLastError();
}

__global__ void swiglu_kernel(const float *gu, long n, int I, float alpha, float limit, float *a) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    const long p = idx / I;
    const int j = (int)(idx % I);
    a[idx] = gptoss_swiglu_value(gu[p * 2 * I + 2 * j], gu[p * 2 * I + 2 * j + 1], alpha, limit);
}

cudaError_t gptoss_swiglu(const float *gu, int P, int I, float alpha, float limit, float *a, cudaStream_t s) {
    const long n = (long)P * I;
    if (n <= 0) return cudaSuccess;
    swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(gu, n, I, alpha, limit, a);
    return cudaGetLastError();
}

__global__ void moe_combine_kernel(const float *y, const float *w, const int32_t *pair_of, int H, float *x) {
    const int t = blockIdx.x;
    const float *w4 = w + (size_t)t * GPTOSS_TOPK;
    const int32_t *p4 = pair_of + (size_t)t * GPTOSS_TOPK;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < GPTOSS_TOPK; k++) s += w4[k] * y[(size_t)p4[k] * H + i];
        x[(size_t)t * H + i] += s;
    }
}

cudaError_t gptoss_moe_combine(const float *y, const float *w, const int32_t *pair_of, int T, int H, float *x,
                               cudaStream_t s) {
    if (T <= 0) return cudaSuccess;
    moe_combine_kernel<<<T, 256, 0, s>>>(y, w, pair_of, H, x);
    return cudaGetLastError();
}
