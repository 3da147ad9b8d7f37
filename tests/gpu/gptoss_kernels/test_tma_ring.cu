/* test_tma_ring — the bulk-copy stage ring of tma_ring.cuh, alone (the building block of the next expert
 * kernel; no engine kernel uses it yet):
 *  - every byte of a buffer streamed through the ring reaches the consumers exactly once: the XOR of a
 *    per-word function over all words equals a plain kernel's, for ring depths 2..8, 1..8 consumer warps,
 *    stage sizes 4..32 KB, 1 or 2 CTAs per SM and a stage count that leaves CTAs unequal work;
 *  - --ring-timing: TB/s through the ring against a plain 16-byte-load kernel over 512 MB (past L2),
 *    with no consumer work and with ~20 dependent integer operations per 4-byte word (the MXFP4 decode's
 *    cost per word is about that). Linked into gptoss_kernels; main() calls gptoss_tma_ring_checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "engines/gptoss_cuda/tma_ring.cuh"

#define TU_SEED 0x7217a9ull
#include "tests/gpu/gptoss_kernels/test_util.h"

#define RING_MAX_D 8

/* The per-word function the consumers apply: `work` dependent multiply-adds (a stand-in for a decode). */
static __device__ __forceinline__ uint32_t ring_f(uint32_t x, int work) {
    for (int r = 0; r < work; r++) x = x * 1664525u + 1013904223u;
    return x;
}

/* Warp 0 lane 0 produces, warps 1..C consume; CTA b takes stages b, b + grid, ...; XOR of ring_f over the
 * words it consumed into *out. Dynamic shared memory: D slots of stage_bytes. */
__global__ void ring_stream_kernel(const uint4 *src, long n_stages, int stage_bytes, int D, int work, uint32_t *out) {
    extern __shared__ __align__(128) uint4 ring_slots[];
    __shared__ uint64_t full[RING_MAX_D], empty[RING_MAX_D];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C = (blockDim.x >> 5) - 1;
    if (threadIdx.x == 0) ring_init(full, empty, D, C);
    __syncthreads();
    const int words4 = stage_bytes / 16;
    if (warp == 0) {
        if (lane == 0)
            for (long s = blockIdx.x, it = 0; s < n_stages; s += gridDim.x, it++) {
                const int slot = (int)(it % D);
                const long k = it / D;
                if (k > 0) ring_wait(&empty[slot], (uint32_t)((k - 1) & 1));
                ring_fill(&full[slot], ring_slots + (size_t)slot * words4, src + (size_t)s * words4, (uint32_t)stage_bytes);
            }
        return;
    }
    uint32_t acc = 0;
    const int w = warp - 1, per = words4 / C;
    for (long s = blockIdx.x, it = 0; s < n_stages; s += gridDim.x, it++) {
        const int slot = (int)(it % D);
        ring_wait(&full[slot], (uint32_t)((it / D) & 1));
        const uint4 *st = ring_slots + (size_t)slot * words4 + (size_t)w * per;
        for (int i = lane; i < per; i += 32) {
            const uint4 v = st[i];
            acc ^= ring_f(v.x, work) ^ ring_f(v.y, work) ^ ring_f(v.z, work) ^ ring_f(v.w, work);
        }
        __syncwarp();
        if (lane == 0) ring_release(&empty[slot]);
    }
    for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicXor(out, acc);
}

/* The same XOR with plain 16-byte loads (grid-stride), the reference and the bandwidth baseline. */
__global__ void ring_plain_kernel(const uint4 *src, long n4, int work, uint32_t *out) {
    uint32_t acc = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(src + i);
        acc ^= ring_f(v.x, work) ^ ring_f(v.y, work) ^ ring_f(v.z, work) ^ ring_f(v.w, work);
    }
    for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicXor(out, acc);
}

__global__ void ring_fill_kernel(uint32_t *p, long n, uint32_t seed) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 15;
        x *= 2246822519u;
        p[i] = x ^ (x >> 13);
    }
}

static int ring_sms(void) {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return sms;
}

/* Runs launch (which zeroes *dout, then XORs into it) once, or with reps > 0 timed over reps launches after
 * a warm-up (ms per launch into *ms); returns the XOR of the last launch. */
template <typename F> static uint32_t xor_run(F launch, uint32_t *dout, int reps, float *ms) {
    if (reps > 0) *ms = (float)tu_time_ms(launch, reps);
    else launch();
    uint32_t h = 0;
    CK(cudaMemcpy(&h, dout, 4, cudaMemcpyDeviceToHost));
    return h;
}

static uint32_t ring_run(const uint4 *src, long n_stages, int stage_bytes, int D, int C, int ctas, int work,
                         uint32_t *dout, int reps, float *ms) {
    const size_t smem = (size_t)D * stage_bytes;
    CK(cudaFuncSetAttribute(ring_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return xor_run([&]() {
        CK(cudaMemset(dout, 0, 4));
        ring_stream_kernel<<<ctas, 32 * (1 + C), smem>>>(src, n_stages, stage_bytes, D, work, dout);
        CK(cudaGetLastError());
    }, dout, reps, ms);
}

/* The same XOR over n4 16-byte words with the plain kernel. */
static uint32_t plain_run(const uint4 *src, long n4, int work, uint32_t *dout, int reps, float *ms) {
    const int sms = ring_sms();
    return xor_run([&]() {
        CK(cudaMemset(dout, 0, 4));
        ring_plain_kernel<<<sms * 4, 512>>>(src, n4, work, dout);
        CK(cudaGetLastError());
    }, dout, reps, ms);
}

/* A device buffer of `bytes` pseudo-random bytes (its words from seed) and a 4-byte result word. */
static void ring_buffers(long bytes, uint32_t seed, uint32_t **buf, uint32_t **dout) {
    CK(cudaMalloc((void **)buf, bytes));
    CK(cudaMalloc((void **)dout, 4));
    ring_fill_kernel<<<1024, 256>>>(*buf, bytes / 4, seed);
    CK(cudaGetLastError());
}

void gptoss_tma_ring_checks(int *checks, int *failed) {
    const long bytes = 24l << 20; /* 24 MB */
    uint32_t *buf = NULL, *dout = NULL;
    ring_buffers(bytes, 0x1234567u, &buf, &dout);
    const int sms = ring_sms();
    /* depth, consumer warps, stage KB, CTAs per SM, work */
    const int cases[][5] = {{2, 1, 4, 1, 0}, {4, 8, 16, 1, 0}, {8, 4, 16, 2, 3}, {3, 8, 32, 1, 1}, {4, 2, 8, 2, 0}};
    for (const auto &c : cases) {
        const int D = c[0], C = c[1], sb = c[2] << 10, ctas = sms * c[3], work = c[4];
        const long n_stages = bytes / sb - 1; /* not a multiple of the grid: CTAs do unequal work */
        const uint32_t want = plain_run((const uint4 *)buf, n_stages * sb / 16, work, dout, 0, NULL);
        const uint32_t got = ring_run((const uint4 *)buf, n_stages, sb, D, C, ctas, work, dout, 0, NULL);
        char what[160];
        snprintf(what, sizeof what, "tma ring depth %d, %d consumer warps, %d KB stages, %d CTAs, %ld stages: every word once",
                 D, C, c[2], ctas, n_stages);
        check_true(what, got == want);
    }
    cudaFree(buf);
    cudaFree(dout);
    *checks += tu_checks;
    *failed += tu_failed;
}

/* gptoss_kernels --ring-timing: TB/s of the ring over 512 MB against plain loads. */
void gptoss_tma_ring_timing(void) {
    const long bytes = 512l << 20;
    uint32_t *buf = NULL, *dout = NULL;
    ring_buffers(bytes, 0x9e3779b9u, &buf, &dout);
    const int sms = ring_sms();
    for (int work = 0; work <= 20; work += 20) {
        float ms = 0;
        plain_run((const uint4 *)buf, bytes / 16, work, dout, 5, &ms);
        printf("time ring work=%2d: plain 16-byte loads %.2f TB/s\n", work, bytes / (ms * 1e-3) / 1e12);
        const int cfg[][4] = {{4, 8, 16, 1}, {8, 8, 16, 1}, {4, 8, 32, 1}, {6, 8, 32, 1}, {4, 4, 16, 2},
                              {4, 8, 16, 2}, {6, 8, 16, 2}, {3, 8, 32, 2}};
        for (const auto &c : cfg) {
            const int D = c[0], C = c[1], sb = c[2] << 10, ctas = sms * c[3];
            ring_run((const uint4 *)buf, bytes / sb, sb, D, C, ctas, work, dout, 5, &ms);
            printf("time ring work=%2d: depth %d, %d consumer warps, %2d KB stages, %d CTA/SM: %.2f TB/s\n", work, D, C,
                   c[2], c[3], bytes / (ms * 1e-3) / 1e12);
        }
    }
    cudaFree(buf);
    cudaFree(dout);
}

/* gptoss_kernels --stream-timing: how fast one launch reads S bytes from HBM, for the S of a decode step's kernels
 * (8 .. 128 MB) and a long one (512 MB), with plain 16-byte loads and with the ring. Each launch reads another S-byte
 * region of a 1 GiB buffer (never the one the previous launch read; a region is read again only after 1 GiB of
 * others), so L2 (50 MB) does not serve it; launches go back to back on one stream. Prints µs per launch and the
 * share of the largest size's rate: what a kernel of that size loses to its ramp and tail alone. */
void gptoss_stream_size_timing(void) {
    const long pool = 1l << 30;
    uint32_t *buf = NULL, *dout = NULL;
    ring_buffers(pool, 0x51f15eedu, &buf, &dout);
    const int sms = ring_sms();
    const long sizes_mb[] = {8, 16, 24, 32, 64, 128, 512};
    const int ring_cfg[][4] = {{4, 8, 16, 1}, {2, 8, 32, 3}}; /* depth, consumer warps, stage KB, CTAs per SM */
    for (int v = 0; v < 3; v++) {
        if (v > 0) {
            const int *c = ring_cfg[v - 1];
            CK(cudaFuncSetAttribute(ring_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, c[0] * (c[2] << 10)));
        }
        double big_rate = 0;
        for (int si = (int)(sizeof sizes_mb / sizeof sizes_mb[0]) - 1; si >= 0; si--) {
            const long bytes = sizes_mb[si] << 20, regions = pool / bytes;
            long next = 0;
            auto launch = [&]() {
                const uint4 *src = (const uint4 *)((const uint8_t *)buf + (next++ % regions) * bytes);
                if (v == 0) {
                    ring_plain_kernel<<<sms * 4, 512>>>(src, bytes / 16, 0, dout);
                } else {
                    const int *c = ring_cfg[v - 1];
                    const int sb = c[2] << 10;
                    ring_stream_kernel<<<sms * c[3], 32 * (1 + c[1]), (size_t)c[0] * sb>>>(src, bytes / sb, sb, c[0], 0, dout);
                }
                CK(cudaGetLastError());
            };
            const int reps = bytes >= (256l << 20) ? 8 : 64;
            const double ms = fmin(tu_time_ms(launch, reps), tu_time_ms(launch, reps));
            const double rate = bytes / (ms * 1e-3) / 1e12;
            if (si == (int)(sizeof sizes_mb / sizeof sizes_mb[0]) - 1) big_rate = rate;
            if (v == 0)
                printf("time stream %4ld MB, plain 16-byte loads (%d x 512 threads): %8.1f us, %.2f TB/s, %3.0f%% of the 512 MB rate\n",
                       sizes_mb[si], sms * 4, ms * 1000.0, rate, 100.0 * rate / big_rate);
            else
                printf("time stream %4ld MB, ring depth %d, %d consumer warps, %d KB stages, %d CTA/SM: %8.1f us, %.2f TB/s, %3.0f%% "
                       "of the 512 MB rate\n", sizes_mb[si], ring_cfg[v - 1][0], ring_cfg[v - 1][1], ring_cfg[v - 1][2],
                       ring_cfg[v - 1][3], ms * 1000.0, rate, 100.0 * rate / big_rate);
        }
    }
    cudaFree(buf);
    cudaFree(dout);
}
