// Session 38 call 3: which pipe and what rate Hopper gives the instructions a weight decode could use
// (throughput per SM per clock, many warps, 8 independent chains a thread). A mixed kernel runs N of two kinds:
// if its time is about the sum of theirs they share a pipe, about the larger of them they do not.
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdint>

#define CH 8
#define ITERS 4096

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
    uint32_t d; asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s)); return d;
}
__device__ __forceinline__ uint32_t lop(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d; asm volatile("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
__device__ __forceinline__ uint32_t cvt8(uint32_t a) { /* 2 e4m3 (low 16 bits) -> f16x2 */
    uint32_t d; asm volatile("{.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, l;}" : "=r"(d) : "r"(a)); return d;
}
__device__ __forceinline__ uint32_t cvt8h(uint32_t a) { /* the high 16 bits */
    uint32_t d; asm volatile("{.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;}" : "=r"(d) : "r"(a)); return d;
}
__device__ __forceinline__ uint32_t hmul(uint32_t a, uint32_t b) {
    uint32_t d; asm volatile("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d;
}
__device__ __forceinline__ uint32_t shf(uint32_t a, uint32_t n) {
    uint32_t d; asm volatile("shf.r.clamp.b32 %0, %1, %1, %2;" : "=r"(d) : "r"(a), "r"(n)); return d;
}

template <int KIND>
__global__ void pipe_kernel(uint32_t *out, uint32_t seed) {
    uint32_t x[CH];
    for (int i = 0; i < CH; i++) x[i] = seed * (threadIdx.x + 1) + i * 0x9E3779B9u;
    const uint32_t k1 = seed ^ 0x1234567u, k2 = seed + 77u;
    for (int it = 0; it < ITERS; it++) {
#pragma unroll
        for (int i = 0; i < CH; i++) {
            if (KIND == 0) x[i] = prmt(x[i], k1, 0x3210u ^ (uint32_t)i);
            if (KIND == 1) x[i] = lop(x[i], k1, k2);
            if (KIND == 2) x[i] = cvt8(x[i]) ^ (uint32_t)i;  /* the xor keeps chains from folding */
            if (KIND == 3) x[i] = hmul(x[i], k1);
            if (KIND == 4) x[i] = shf(x[i], k2);
            if (KIND == 5) { x[i] = lop(x[i], k1, k2); x[i] = cvt8(x[i]); }       /* lop + cvt */
            if (KIND == 6) { x[i] = prmt(x[i], k1, 0x3210u ^ (uint32_t)i); x[i] = hmul(x[i], k1); } /* prmt + hmul */
            if (KIND == 7) { x[i] = lop(x[i], k1, k2); x[i] = lop(x[i], k2, k1); } /* 2 lop */
            if (KIND == 8) { x[i] = cvt8(x[i]); x[i] = cvt8h(x[i]); }              /* 2 cvt */
        }
    }
    uint32_t r = 0;
    for (int i = 0; i < CH; i++) r ^= x[i];
    if (r == 0x12345678u) out[threadIdx.x] = r;
}

int main() {
    int dev = 0, sms = 0, clk = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev); /* kHz */
    uint32_t *out; cudaMalloc(&out, 4096);
    const char *names[] = {"prmt", "lop3", "cvt e4m3x2->f16x2", "hmul2", "shf", "lop3 + cvt", "prmt + hmul2", "2 lop3", "2 cvt"};
    const int per[] = {1, 1, 1, 1, 1, 2, 2, 2, 2};
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    const int blocks = sms * 4, threads = 512;
    printf("device: %d SMs, %d MHz; %d blocks x %d threads, %d chains x %d iterations\n", sms, clk / 1000, blocks, threads, CH, ITERS);
    printf("| instructions (a chain step) | ms | warp instructions / SM / clock (all kinds) |\n|---|---|---|\n");
    for (int k = 0; k < 9; k++) {
        float best = 1e9f;
        for (int rep = 0; rep < 3; rep++) {
            cudaEventRecord(a);
            switch (k) {
            case 0: pipe_kernel<0><<<blocks, threads>>>(out, 3); break;
            case 1: pipe_kernel<1><<<blocks, threads>>>(out, 3); break;
            case 2: pipe_kernel<2><<<blocks, threads>>>(out, 3); break;
            case 3: pipe_kernel<3><<<blocks, threads>>>(out, 3); break;
            case 4: pipe_kernel<4><<<blocks, threads>>>(out, 3); break;
            case 5: pipe_kernel<5><<<blocks, threads>>>(out, 3); break;
            case 6: pipe_kernel<6><<<blocks, threads>>>(out, 3); break;
            case 7: pipe_kernel<7><<<blocks, threads>>>(out, 3); break;
            case 8: pipe_kernel<8><<<blocks, threads>>>(out, 3); break;
            }
            cudaEventRecord(b); cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
        }
        const double warp_inst = (double)blocks * threads / 32 * ITERS * CH * per[k];
        const double clocks = best * 1e-3 * clk * 1e3;
        printf("| %s | %.3f | %.2f |\n", names[k], best, warp_inst / sms / clocks);
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
