/* tc_stacked.cu — the prefill's MXFP4 experts with the activation parts stacked along K (see tc.h,
 * "Stacked experts"): one GEMM per expert straight into the output rows, bias in the GEMM, the
 * dequantization one layer ahead on a second stream. */
#include "engines/gptoss_cuda/tc.h"

#include <cuda_bf16.h>
#include <stdio.h>

#include "engines/gptoss_cuda/kernels.h"

/* ---------------------------------------------------------------- sizes */

size_t gptoss_tc_wst_elems(int K, int N, int E, int splits) {
    return (size_t)E * (size_t)N * (size_t)gptoss_tc_kstack(K, splits);
}

size_t gptoss_tc_xst_elems(int chunk, int splits, int H, int I) {
    return (size_t)chunk * GPTOSS_TOPK * (size_t)gptoss_tc_kstack(H > I ? H : I, splits);
}

/* ---------------------------------------------------------------- kernels */

#define ST_BF16_ONE 0x3F80u

static __device__ __forceinline__ uint32_t st_bf16_bits(float v) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* One block per row p: float4 loads, S parts of 4 bf16 (8-byte stores), thread 0 writes the pad
 * [1, 0 x 7]. The parts are those of tc_split_kernel (x_s = bf16 of what the earlier parts left). */
__global__ void tc_split_stacked_kernel(const float *x, int ldx, const int32_t *gather, int K, int splits,
                                        uint16_t *xs) {
    const int p = blockIdx.x, Ks = gptoss_tc_kstack(K, splits);
    const long src = gather ? gather[p] : p;
    const float4 *xr = (const float4 *)(x + src * ldx);
    uint16_t *row = xs + (size_t)p * Ks;
    for (int k4 = threadIdx.x; k4 < K / 4; k4 += blockDim.x) {
        const float4 f = xr[k4];
        float v[4] = {f.x, f.y, f.z, f.w};
        for (int s = 0; s < splits; s++) {
            uint32_t b[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                b[j] = st_bf16_bits(v[j]);
                v[j] -= __uint_as_float(b[j] << 16); /* exact: the rounding residual */
            }
            *(uint2 *)(row + (size_t)s * K + 4 * k4) = make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
        }
    }
    if (threadIdx.x == 0) *(uint4 *)(row + (size_t)splits * K) = make_uint4(ST_BF16_ONE, 0, 0, 0);
}

/* One thread per MXFP4 block (row n, 32 values kb*32..) of expert blockIdx.y: the 32 bf16 by the rule
 * of mxfp4_dequant_fast_kernel (tc.cu: fp32 product fp4 x 2^(s-127), its upper half; s = 255 through
 * ldexpf), stored S times at n*Ks + s*K + kb*32; the thread of kb = 0 also writes [b[n], 0 x 7]. */
__global__ void mxfp4_dequant_stacked_kernel(const uint4 *blocks, const uint8_t *scales, const uint16_t *bias, int N,
                                             int K, int splits, uint16_t *w) {
    __shared__ float tbl[16];
    if (threadIdx.x < 16) {
        const float v[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
        tbl[threadIdx.x] = threadIdx.x < 8 ? v[threadIdx.x] : -v[threadIdx.x - 8];
    }
    __syncthreads();
    const int kblocks = K / 32, Ks = gptoss_tc_kstack(K, splits);
    const long nblocks = (long)N * kblocks, i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblocks) return;
    const int e = blockIdx.y, n = (int)(i / kblocks), kb = (int)(i % kblocks);
    const uint4 b = blocks[(size_t)e * nblocks + i];
    const uint32_t s = scales[(size_t)e * nblocks + i], word[4] = {b.x, b.y, b.z, b.w};
    const float sc = __uint_as_float(s ? s << 23 : 0x00400000u);
    uint32_t out[16];
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const uint32_t byte = (word[j >> 2] >> (8 * (j & 3))) & 0xffu;
        float lo = tbl[byte & 15] * sc, hi = tbl[byte >> 4] * sc;
        if (s == 255) {
            lo = ldexpf(tbl[byte & 15], 128);
            hi = ldexpf(tbl[byte >> 4], 128);
        }
        out[j] = (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
    }
    uint16_t *row = w + ((size_t)e * N + n) * Ks;
    for (int p = 0; p < splits; p++) {
        uint4 *o = (uint4 *)(row + (size_t)p * K + (size_t)kb * 32);
        o[0] = make_uint4(out[0], out[1], out[2], out[3]);
        o[1] = make_uint4(out[4], out[5], out[6], out[7]);
        o[2] = make_uint4(out[8], out[9], out[10], out[11]);
        o[3] = make_uint4(out[12], out[13], out[14], out[15]);
    }
    if (kb == 0)
        *(uint4 *)(row + (size_t)splits * K) = make_uint4(bias ? bias[(size_t)e * N + n] : 0u, 0, 0, 0);
}

/* ---------------------------------------------------------------- launchers */

cudaError_t gptoss_tc_split_stacked(const float *x, int ldx, const int32_t *gather, int rows, int K, int splits,
                                    uint16_t *xs, cudaStream_t st) {
    if (rows <= 0) return cudaSuccess;
    if (splits < 2 || splits > 3 || K <= 0 || K % 8 || ldx % 4 || ((uintptr_t)x & 15)) return cudaErrorInvalidValue;
    tc_split_stacked_kernel<<<(unsigned)rows, 256, 0, st>>>(x, ldx, gather, K, splits, xs);
    return cudaGetLastError();
}

cudaError_t gptoss_mxfp4_dequant_stacked(const uint8_t *blocks, const uint8_t *scales, const uint16_t *b, int E,
                                         int N, int K, int splits, uint16_t *w, cudaStream_t st) {
    if (N <= 0 || K <= 0 || K % 32 || E <= 0 || E > 65535 || splits < 2 || splits > 3) return cudaErrorInvalidValue;
    const long nblocks = (long)N * (K / 32);
    const dim3 grid((unsigned)((nblocks + 127) / 128), (unsigned)E);
    mxfp4_dequant_stacked_kernel<<<grid, 128, 0, st>>>((const uint4 *)blocks, scales, b, N, K, splits, w);
    return cudaGetLastError();
}

cudaError_t gptoss_tc_prefetch(gptoss_tc *tc, int which, const uint8_t *blocks, const uint8_t *scales,
                               const uint16_t *b, int E, int N, int K) {
    if (which < 0 || which > 1 || !tc->side || !tc->wst[which] ||
        gptoss_tc_wst_elems(K, N, E, tc->splits) > tc->wst_elems[which])
        return cudaErrorInvalidValue;
    cudaError_t r = cudaStreamWaitEvent(tc->side, tc->ev_free[which], 0); /* its last readers are done */
    if (r == cudaSuccess) r = gptoss_mxfp4_dequant_stacked(blocks, scales, b, E, N, K, tc->splits, tc->wst[which], tc->side);
    if (r == cudaSuccess) r = cudaEventRecord(tc->ev_ready[which], tc->side);
    return r;
}

static cudaError_t st_blas_fail(gptoss_tc *tc, const char *what, cublasStatus_t s) {
    snprintf(tc->why, sizeof tc->why, "cuBLAS %s: %s", what, cublasGetStatusString(s));
    return cudaErrorUnknown;
}

/* One cublasGemmGroupedBatchedEx over the used experts (a group of one problem each, since their row
 * counts differ). Returns CUBLAS_STATUS_NOT_SUPPORTED etc. untouched so the caller can fall back. */
static cublasStatus_t grouped_gemm(gptoss_tc *tc, int which, int E, int K, int N, float *y, int *enqueue_fail) {
    const int Ks = gptoss_tc_kstack(K, tc->splits);
    cublasOperation_t ta[GPTOSS_MAX_EXPERTS], tb[GPTOSS_MAX_EXPERTS];
    int mm[GPTOSS_MAX_EXPERTS], nn[GPTOSS_MAX_EXPERTS], kk[GPTOSS_MAX_EXPERTS], lda[GPTOSS_MAX_EXPERTS],
        ldc[GPTOSS_MAX_EXPERTS], gs[GPTOSS_MAX_EXPERTS];
    float alpha[GPTOSS_MAX_EXPERTS], beta[GPTOSS_MAX_EXPERTS];
    void **A = tc->gptr_host + (size_t)which * 3 * GPTOSS_MAX_EXPERTS, **B = A + GPTOSS_MAX_EXPERTS,
         **C = B + GPTOSS_MAX_EXPERTS;
    int g = 0;
    long off = 0;
    for (int e = 0; e < E; e++) {
        const int cnt = tc->counts_host[e];
        if (cnt > 0) {
            ta[g] = CUBLAS_OP_T; tb[g] = CUBLAS_OP_N;
            mm[g] = N; nn[g] = cnt; kk[g] = Ks; lda[g] = Ks; ldc[g] = N; gs[g] = 1;
            alpha[g] = 1.0f; beta[g] = 0.0f;
            A[g] = tc->wst[which] + (size_t)e * N * Ks;
            B[g] = tc->xs + (size_t)off * Ks;
            C[g] = y + (size_t)off * N;
            g++;
        }
        off += cnt;
    }
    void **dA = tc->gptr_dev + (size_t)which * 3 * GPTOSS_MAX_EXPERTS, **dB = dA + GPTOSS_MAX_EXPERTS,
         **dC = dB + GPTOSS_MAX_EXPERTS;
    /* the pinned staging is rewritten next layer only after the host's count sync: this copy is done */
    if (cudaMemcpyAsync(dA, A, (size_t)3 * GPTOSS_MAX_EXPERTS * sizeof(void *), cudaMemcpyHostToDevice, tc->stream) !=
        cudaSuccess) {
        *enqueue_fail = 1;
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return cublasGemmGroupedBatchedEx(tc->handle, ta, tb, mm, nn, kk, alpha, (const void *const *)dA, CUDA_R_16BF, lda,
                                      (const void *const *)dB, CUDA_R_16BF, lda, beta, dC, CUDA_R_32F, ldc, g, gs,
                                      CUBLAS_COMPUTE_32F);
}

cudaError_t gptoss_tc_experts_stacked(gptoss_tc *tc, int which, const float *x, int ldx, const int32_t *gather, int E,
                                      int P, int K, int N, float *y) {
    const int S = tc->splits, Ks = gptoss_tc_kstack(K, S);
    if (P <= 0) return cudaSuccess;
    if (which < 0 || which > 1 || K % 8 || ldx % 4 || E <= 0 || E > GPTOSS_MAX_EXPERTS ||
        (size_t)P * Ks > tc->xs_elems || !tc->wst[which] || gptoss_tc_wst_elems(K, N, E, S) > tc->wst_elems[which])
        return cudaErrorInvalidValue;
    long total = 0;
    for (int e = 0; e < E; e++) total += tc->counts_host[e];
    if (total != P) return cudaErrorInvalidValue; /* counts not fetched for this routing */
    cudaError_t r = gptoss_tc_split_stacked(x, ldx, gather, P, K, S, tc->xs, tc->stream);
    if (r == cudaSuccess) r = cudaStreamWaitEvent(tc->stream, tc->ev_ready[which], 0); /* the weights are written */
    int done = 0;
    if (r == cudaSuccess && tc->grouped) {
        int enqueue_fail = 0;
        const cublasStatus_t bs = grouped_gemm(tc, which, E, K, N, y, &enqueue_fail);
        if (enqueue_fail) return cudaErrorUnknown;
        if (bs == CUBLAS_STATUS_SUCCESS) {
            done = 1;
        } else if (bs == CUBLAS_STATUS_NOT_SUPPORTED || bs == CUBLAS_STATUS_INVALID_VALUE) {
            fprintf(stderr, "gptoss_cuda: grouped GEMM refused (%s); one GEMM per expert from now on\n",
                    cublasGetStatusString(bs));
            tc->grouped = 0;
        } else {
            return st_blas_fail(tc, "GemmGroupedBatchedEx", bs);
        }
    }
    const float one = 1.0f, zero = 0.0f;
    long off = 0;
    for (int e = 0; e < E && r == cudaSuccess && !done; e++) {
        const int cnt = tc->counts_host[e];
        if (cnt > 0) {
            const cublasStatus_t bs =
                cublasGemmEx(tc->handle, CUBLAS_OP_T, CUBLAS_OP_N, N, cnt, Ks, &one, tc->wst[which] + (size_t)e * N * Ks,
                             CUDA_R_16BF, Ks, tc->xs + (size_t)off * Ks, CUDA_R_16BF, Ks, &zero, y + (size_t)off * N,
                             CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (bs != CUBLAS_STATUS_SUCCESS) r = st_blas_fail(tc, "GemmEx", bs);
        }
        off += cnt;
    }
    if (r == cudaSuccess) r = cudaEventRecord(tc->ev_free[which], tc->stream); /* wst[which] may be rewritten after */
    return r;
}
