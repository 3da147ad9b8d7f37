/* ldg_u8.cuh — a byte from global memory (read-only path) into a 32-bit register, zero-extended by the
 * load itself. The CUDA intrinsics' u8 loads (__ldg / __ldcs on uint8_t) end with a mask instruction that
 * the compiler scheduled right behind the load, so a warp waited there for the byte before issuing its
 * next loads: every prefetched MXFP4 scale serialized the weight stream behind it (ncu, H200, session 7:
 * the top stall of the streaming expert kernel). Included by .cu files only. */
#ifndef LLMR_GPTOSS_LDG_U8_CUH
#define LLMR_GPTOSS_LDG_U8_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t gptoss_ldg_u8(const uint8_t *p) {
    uint32_t v;
    asm("ld.global.nc.u8 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

#endif
