/* pdl.h — programmatic dependent launch (PDL) for the batch-1 decode kernels (Hopper, LLMR_GPTOSS_PDL).
 *
 * Why: a decode step is ~150 short kernels in one CUDA graph; between two of them the GPU drains the
 * first grid, then launches and ramps up the next, whose first weight loads then wait a full HBM
 * latency. With PDL the next grid is launched while the previous one is still running: its blocks
 * take the SM slots freed by the previous grid's finished blocks, start streaming the weights they will
 * need (a prefetch into L2, which depends on nothing the previous kernel writes), and only then wait.
 *
 * The rules every kernel launched through gptoss_launch with pdl = 1 follows (correctness):
 *  1. before gptoss_pdl_wait() it reads nothing that the previous kernel writes, and writes nothing;
 *  2. it calls gptoss_pdl_wait() in every block, before its first dependent read (griddepcontrol.wait
 *     returns once the previous grid has completed and its writes are visible);
 *  3. it calls gptoss_pdl_trigger() only after its wait, so when a kernel starts, the kernel two back has
 *     completed: its outputs (e.g. the router's expert groups, read by the down GEMV's prefetch) are
 *     safe to read before the wait.
 * A kernel launched without the attribute (pdl = 0, or any plain <<<>>> launch) runs exactly as before:
 * griddepcontrol.wait and .launch_dependents are no-ops then, and the kernels skip their prefetch (a
 * kernel argument says whether it was launched with PDL): with the prefetch always on, the default decode
 * measured ~6% slower on the H200 (416 vs 441-443 tok/s at context 128 in other calls of the same base),
 * the likely cause being the extra L2 requests racing the loads they were meant to precede. Summation orders do not change, so PDL on
 * or off gives bit-identical results. */
#ifndef GPTOSS_CUDA_PDL_H
#define GPTOSS_CUDA_PDL_H

#include <cuda_runtime.h>

static __device__ __forceinline__ void gptoss_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void gptoss_pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* wait + trigger (rules 2 and 3) when the kernel was launched with PDL (its `pdl` argument); nothing
 * otherwise, so a plain launch runs the kernel's original instruction stream. */
static __device__ __forceinline__ void gptoss_pdl_sync(int pdl) {
    if (pdl) {
        gptoss_pdl_wait();
        gptoss_pdl_trigger();
    }
}

/* Asks L2 to fetch the 128-byte line holding p (no register, no wait). */
static __device__ __forceinline__ void gptoss_prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* The bytes [p, p + n) into L2, lines spread over `nthreads` threads (this one is `tid`). */
static __device__ __forceinline__ void gptoss_prefetch_range(const void *p, size_t n, int tid, int nthreads) {
    const char *c = (const char *)p;
    for (size_t off = (size_t)tid * 128; off < n; off += (size_t)nthreads * 128) gptoss_prefetch_l2(c + off);
}

/* Launches kernel k like k<<<grid, block, smem, s>>>(args...) (exactly that when pdl == 0), with the
 * programmatic-serialization attribute when pdl != 0 (captured into a graph as a programmatic edge).
 * Returns the launch status. */
template <typename... KA, typename... A>
static cudaError_t gptoss_launch(void (*k)(KA...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, int pdl,
                                 A... args) {
    if (!pdl) {
        k<<<grid, block, smem, s>>>((KA)args...);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k, (KA)args...);
}

/* Process-wide switch (LLMR_GPTOSS_PDL, read at model load): the T = 1 decode launchers launch with
 * the attribute when on. */
int gptoss_pdl_enabled(void);

#endif
