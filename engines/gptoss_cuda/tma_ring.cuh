/* tma_ring.cuh — a ring of shared-memory stages filled by Hopper bulk copies (cp.async.bulk, the 1D form of
 * TMA) and handed between one producer thread and C consumer warps through mbarriers: the building block
 * of the next expert kernel (docs/performance.md, "Session 7: the next expert kernel"), used by the T = 1 dp4a
 * gate_up (moe_decode_dp4a.cu). Tested and timed alone by tests/gpu/gptoss_kernels/test_tma_ring.cu (also the
 * streaming floor of a kernel by size: gptoss_kernels --stream-timing).
 *
 * Protocol, for stage s of a ring of D slots (slot s % D, use k = s / D):
 *   producer: if k > 0, wait until empty[slot] completed phase k - 1 (all C consumers released it);
 *             full[slot].arrive.expect_tx(bytes); cp.async.bulk global -> slot, completing on full[slot];
 *   consumers: wait until full[slot] completed phase k (the bytes landed), read the slot, then one
 *             arrive on empty[slot] per warp.
 * full[] counts 1 arrival (the producer's) plus the transaction bytes; empty[] counts C arrivals. Only
 * sm_90+ (compiled for sm_90a); sizes and addresses multiples of 16 bytes. Included by .cu files only. */
#ifndef LLMR_GPTOSS_TMA_RING_CUH
#define LLMR_GPTOSS_TMA_RING_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t ring_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* One thread: one barrier expecting `count` arrivals a phase; no fence (the caller's fence.mbarrier_init follows
 * its inits before the async proxy uses them). */
static __device__ __forceinline__ void ring_bar_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ring_smem_addr(bar)), "r"(count));
}

/* One thread: both barrier arrays of a D-slot ring, then a fence so the async proxy sees them (the
 * caller syncs the block before use). */
static __device__ __forceinline__ void ring_init(uint64_t *full, uint64_t *empty, int D, int consumers) {
    for (int i = 0; i < D; i++) {
        ring_bar_init(&full[i], 1);
        ring_bar_init(&empty[i], consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* Blocks the calling thread until barrier bar has completed the phase of the given parity. */
static __device__ __forceinline__ void ring_wait(uint64_t *bar, uint32_t parity) {
    const uint32_t a = ring_smem_addr(bar);
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
}

/* Producer (one thread): the producer's arrival on full, expecting `bytes` of copies before the phase completes. */
static __device__ __forceinline__ void ring_expect(uint64_t *full, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ring_smem_addr(full)), "r"(bytes) : "memory");
}

/* Producer: copy `bytes` from global src to dst in shared memory, completing on full (counted against its expect). */
static __device__ __forceinline__ void ring_copy(uint64_t *full, void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     ring_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(ring_smem_addr(full))
                 : "memory");
}

/* ring_copy for data read once a step (streamed weights): the copy's L2 lines marked evict-first, so they leave L2
 * before the lines other kernels reuse (the activations, the KV cache, small tensors read every step), as the FFMA
 * expert kernels' __ldcs loads do. */
static __device__ __forceinline__ void ring_copy_stream(uint64_t *full, void *dst, const void *src, uint32_t bytes) {
    asm volatile("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                 " cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], pol;\n}"
                 ::"r"(ring_smem_addr(dst)), "l"(src), "r"(bytes), "r"(ring_smem_addr(full))
                 : "memory");
}

/* Producer (one thread): expect `bytes` on full, then copy them from global src into the slot. */
static __device__ __forceinline__ void ring_fill(uint64_t *full, void *slot, const void *src, uint32_t bytes) {
    ring_expect(full, bytes);
    ring_copy(full, slot, src, bytes);
}

/* Consumer warp (lane 0 after __syncwarp): this warp is done with the slot guarded by empty. */
static __device__ __forceinline__ void ring_release(uint64_t *empty) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ring_smem_addr(empty)) : "memory");
}

#endif
