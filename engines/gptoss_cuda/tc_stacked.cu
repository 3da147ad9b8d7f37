/* tc_stacked.cu — prefill matmuls with the activation parts stacked along K (see tc.h, "Stacked
 * experts" and "Stacked dense linears"): one GEMM straight into the output rows, bias in the GEMM; for
 * the experts (off by default) the dequantization on a second stream and the GEMMs over several. */
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
                b[j] = gptoss_tc_bf16_bits(v[j]);
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
    uint32_t out[16];
    gptoss_tc_mxfp4_block(tbl, b, scales[(size_t)e * nblocks + i], out);
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

int gptoss_tc_stacked_setup(gptoss_tc *tc, int n_streams, int ahead, char *err, size_t es) {
    if (gptoss_tc_streams_setup(tc, n_streams, err, es)) return -1; /* checks n_streams */
    tc->ahead = ahead != 0;
    for (int i = 0; i < 2; i++) {
        if (tc->ev_exp[i]) continue;
        tc->ev_exp[i] = (cudaEvent_t *)calloc(GPTOSS_MAX_EXPERTS, sizeof(cudaEvent_t));
        if (!tc->ev_exp[i]) {
            snprintf(err, es, "out of memory for %d expert events", GPTOSS_MAX_EXPERTS);
            return -1;
        }
        for (int e = 0; e < GPTOSS_MAX_EXPERTS; e++)
            if (cudaEventCreateWithFlags(&tc->ev_exp[i][e], cudaEventDisableTiming) != cudaSuccess) {
                tc->ev_exp[i][e] = NULL;
                snprintf(err, es, "cannot create the per-expert dequantization events");
                return -1;
            }
    }
    return 0;
}

cudaError_t gptoss_tc_prefetch(gptoss_tc *tc, int which, const uint8_t *blocks, const uint8_t *scales,
                               const uint16_t *b, int E, int N, int K, int used_only) {
    if (which < 0 || which > 1 || !tc->side || !tc->wst[which] || E <= 0 || E > GPTOSS_MAX_EXPERTS ||
        gptoss_tc_wst_elems(K, N, E, tc->splits) > tc->wst_elems[which] || (used_only && !tc->ev_exp[which]))
        return cudaErrorInvalidValue;
    cudaError_t r = cudaStreamWaitEvent(tc->side, tc->ev_free[which], 0); /* its last readers are done */
    tc->per_expert[which] = used_only;
    if (!used_only) {
        if (r == cudaSuccess)
            r = gptoss_mxfp4_dequant_stacked(blocks, scales, b, E, N, K, tc->splits, tc->wst[which], tc->side);
        return r == cudaSuccess ? cudaEventRecord(tc->ev_ready[which], tc->side) : r;
    }
    const size_t Ks = (size_t)gptoss_tc_kstack(K, tc->splits), bytes = (size_t)N * (K / 2), sbytes = (size_t)N * (K / 32);
    for (int e = 0; e < E && r == cudaSuccess; e++) {
        if (tc->counts_host[e] == 0) continue;
        r = gptoss_mxfp4_dequant_stacked(blocks + e * bytes, scales + e * sbytes, b ? b + (size_t)e * N : NULL, 1, N, K,
                                         tc->splits, tc->wst[which] + (size_t)e * N * Ks, tc->side);
        if (r == cudaSuccess) r = cudaEventRecord(tc->ev_exp[which][e], tc->side);
    }
    return r;
}

cudaError_t gptoss_tc_experts_stacked(gptoss_tc *tc, int which, const float *x, int ldx, const int32_t *gather, int E,
                                      int P, int K, int N, float *y) {
    const int S = tc->splits, Ks = gptoss_tc_kstack(K, S);
    if (P <= 0) return cudaSuccess;
    if (which < 0 || which > 1 || K % 8 || ldx % 4 || E <= 0 || E > GPTOSS_MAX_EXPERTS ||
        (size_t)P * Ks > tc->xs_elems || !tc->wst[which] || gptoss_tc_wst_elems(K, N, E, S) > tc->wst_elems[which])
        return cudaErrorInvalidValue;
    if (!gptoss_tc_counts_match(tc, E, P)) return cudaErrorInvalidValue;
    const int ns = gptoss_tc_gemm_streams(tc), per = tc->per_expert[which];
    cudaError_t r = gptoss_tc_split_stacked(x, ldx, gather, P, K, S, tc->xs, tc->stream);
    if (r == cudaSuccess) r = gptoss_tc_fork(tc, ns); /* after the split rows are written */
    for (int i = 0; i < ns && r == cudaSuccess && !per; i++) /* all weights written */
        r = cudaStreamWaitEvent(i ? tc->aux[i] : tc->stream, tc->ev_ready[which], 0);
    const float one = 1.0f, zero = 0.0f;
    long off = 0;
    int j = 0; /* used experts so far: expert j-th goes to GEMM stream j % ns */
    for (int e = 0; e < E && r == cudaSuccess; e++) {
        const int cnt = tc->counts_host[e];
        if (cnt > 0) {
            const int i = j++ % ns;
            if (per) r = cudaStreamWaitEvent(i ? tc->aux[i] : tc->stream, tc->ev_exp[which][e], 0);
            const cublasStatus_t bs =
                r != cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                 : cublasGemmEx(i ? tc->aux_handle[i] : tc->handle, CUBLAS_OP_T, CUBLAS_OP_N, N, cnt, Ks, &one,
                                                tc->wst[which] + (size_t)e * N * Ks, CUDA_R_16BF, Ks,
                                                tc->xs + (size_t)off * Ks, CUDA_R_16BF, Ks, &zero, y + (size_t)off * N,
                                                CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (bs != CUBLAS_STATUS_SUCCESS) r = gptoss_tc_blas_fail(tc, "GemmEx", bs);
        }
        off += cnt;
    }
    r = gptoss_tc_join(tc, ns, r);
    if (r == cudaSuccess) r = cudaEventRecord(tc->ev_free[which], tc->stream); /* wst[which] may be rewritten after */
    return r;
}

/* ---------------------------------------------------------------- dense linears */

size_t gptoss_tc_wd_elems(int H, int QD, int KVD, int E, int splits) {
    const size_t kh = (size_t)gptoss_tc_kstack(H, splits), kq = (size_t)gptoss_tc_kstack(QD, splits);
    size_t m = (size_t)QD * kh; /* q_proj */
    if ((size_t)KVD * kh > m) m = (size_t)KVD * kh;
    if ((size_t)E * kh > m) m = (size_t)E * kh; /* router */
    if ((size_t)H * kq > m) m = (size_t)H * kq; /* o_proj */
    return m;
}

/* One thread per 8 weights (a 16-byte load) of row blockIdx.y, stored S times; thread 0 writes the pad. */
__global__ void tc_stack_weight_kernel(const uint4 *W, const uint16_t *b, int K, int splits, uint16_t *wd) {
    const int n = blockIdx.y, k8 = blockIdx.x * blockDim.x + threadIdx.x, Ks = gptoss_tc_kstack(K, splits);
    uint16_t *row = wd + (size_t)n * Ks;
    if (k8 < K / 8) {
        const uint4 v = W[(size_t)n * (K / 8) + k8];
        for (int s = 0; s < splits; s++) *(uint4 *)(row + (size_t)s * K + 8 * k8) = v;
    }
    if (k8 == 0) *(uint4 *)(row + (size_t)splits * K) = make_uint4(b ? b[n] : 0u, 0, 0, 0);
}

cudaError_t gptoss_tc_stack_weight(const uint16_t *W, const uint16_t *b, int N, int K, int splits, uint16_t *wd,
                                   cudaStream_t st) {
    if (N <= 0 || N > 65535 || K <= 0 || K % 8 || splits < 2 || splits > 3 || ((uintptr_t)W & 15) || ((uintptr_t)wd & 15))
        return cudaErrorInvalidValue;
    const dim3 grid((unsigned)((K / 8 + 127) / 128), (unsigned)N);
    tc_stack_weight_kernel<<<grid, 128, 0, st>>>((const uint4 *)W, b, K, splits, wd);
    return cudaGetLastError();
}

cudaError_t gptoss_tc_linear_stacked(gptoss_tc *tc, const uint16_t *W, const uint16_t *b, const uint16_t *Wst, int T,
                                     int K, int N, float *y, int ldy, int accumulate) {
    const int Ks = gptoss_tc_kstack(K, tc->splits);
    if (T <= 0) return cudaSuccess;
    if ((size_t)T * Ks > tc->xs_elems || (!Wst && (!tc->wd || (size_t)N * Ks > tc->wd_elems))) return cudaErrorInvalidValue;
    if (!Wst) {
        const cudaError_t r = gptoss_tc_stack_weight(W, b, N, K, tc->splits, tc->wd, tc->stream);
        if (r != cudaSuccess) return r;
        Wst = tc->wd;
    }
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t bs = cublasGemmEx(tc->handle, CUBLAS_OP_T, CUBLAS_OP_N, N, T, Ks, &one, Wst, CUDA_R_16BF, Ks,
                                           tc->xs, CUDA_R_16BF, Ks, accumulate ? &one : &zero, y, CUDA_R_32F, ldy,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return bs == CUBLAS_STATUS_SUCCESS ? cudaSuccess : gptoss_tc_blas_fail(tc, "GemmEx", bs);
}
