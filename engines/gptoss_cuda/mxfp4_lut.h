/* mxfp4_lut.h — the 8 e2m1 values of one 32-bit MXFP4 word as fp32, with byte-permute table lookups
 * (the T = 1..64 decode GEMVs, moe_decode.cu and moe_decode_async.cu; LLMR_GPTOSS_MOE_LUT), and as signed
 * bytes for dp4a (mxfp4_i8x8, at the end; moe_decode_dp4a.cu).
 *
 * Why: ncu on the H200 (graph path, context 128) showed the MXFP4 gate_up GEMV issue-bound: 12.9 M warp
 * instructions for 66 M weights, ~6.2 per weight, 50% of the issue slots, with the bit-operation decode
 * (two shifts, two masks and an OR per pair of nibbles, then two fp16 -> fp32 conversions) the bulk.
 * Here one `prmt` looks up four magnitudes at once in an 8-byte table held in two registers (each
 * magnitude's fp16 high byte: 0, 0.5, 1, 1.5, 2, 3, 4, 6 are exact with 2 mantissa bits, so the low byte
 * is 0), a second `prmt` in sign-replicate mode turns the four sign bits into bytes (the selector's bit 3
 * makes prmt copy the msb of 0x7F, i.e. 0x00, instead of 0x7F) and one lop3 merges them; one more `prmt`
 * per pair places two bytes as the high bytes of a half2 (the other bytes from a zero), then the exact
 * fp16 -> fp32 conversion. ~3.8 instructions per weight including its FFMA.
 *
 * Status: ON by default (LLMR_GPTOSS_MOE_LUT=0 turns it off). The first version had a sign bug that the
 * H200 kernel checks caught (decode1 call 2); the fixed lookup was checked on the CPU with an exact
 * emulation of prmt over 2 M random words (every nibble bit-identical to the e2m1 value, -0 included),
 * then on the H200 (session 4, lead's final call: kernel checks 253/253 incl. table = bit decode bit for
 * bit, parity and gptoss_batching passing with it on; batch-1 decode 435.8 -> 448.8 tok/s). Measured speed of the (wrong-sign, same instruction mix) first version on
 * the H200: gate_up 21.7 -> 20.0 us, down 12.4 -> 11.0 us back to back, batch-1 decode 416 -> 425-431
 * tok/s at context 128 in the same call.
 *
 * Values are fp4 * 1 (the bit decode gives fp4 * 2^-14); mxfp4_lut_scale is 2^(s - 127) accordingly, so
 * part * scale is the same product and the GEMVs' results are bit-identical to the bit decode. */
#ifndef GPTOSS_CUDA_MXFP4_LUT_H
#define GPTOSS_CUDA_MXFP4_LUT_H

#include <cuda_fp16.h>
#include <stdint.h>

/* prmt.b32 in its default mode; on the host, an exact emulation (the kernel tests run mxfp4_lut_halves
 * on the host against the e2m1 table for every 16-bit pattern). */
static __host__ __device__ __forceinline__ uint32_t mxfp4_prmt(uint32_t a, uint32_t b, uint32_t sel) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned n = (sel >> (4 * i)) & 15u;
        uint32_t v = ((n & 4u) ? b : a) >> (8 * (n & 3u)) & 0xFFu;
        if (n & 8u) v = (v & 0x80u) ? 0xFFu : 0u; /* msb set: replicate the byte's sign */
        d |= v << (8 * i);
    }
    return d;
#endif
}

/* The tables of mxfp4_lut_halves: the fp16 high bytes of the e2m1 magnitudes 0, 0.5, 1, 1.5 (T0) and 2, 3, 4, 6 (T1). */
#define MXFP4_LUT_T0 0x3E3C3800u
#define MXFP4_LUT_T1 0x46444240u
/* h[i] = fp16 pair (nibble 2i, nibble 2i + 1) of w (nibble n = bits 4n..4n+3) from the magnitude tables T0 / T1 (times 1:
 * MXFP4_LUT_T0 / _T1; times 2^k: mxfp4_lut_scaled). */
static __host__ __device__ __forceinline__ void mxfp4_lut_halves_from(uint32_t w, uint32_t T0, uint32_t T1, uint32_t h[4]) {
    /* sign lookup: a + nibble copies 0x80, a - one replicates its msb: 0xFF. Bit 7 is set either way (a
     * replicated msb equals the copied byte's bit 7, so no table byte can differ there); bit 0 tells
     * them apart and `<< 7` moves it to bit 7 of the same byte. (The first version took ~(0x7F or 0x00)
     * & 0x80, which is 0x80 for both: every value came out negative; H200 kernel checks, decode1 call 2.) */
    const uint32_t K = 0x80808080u;
    const uint32_t hs = w >> 16;
    const uint32_t m0 = mxfp4_prmt(T0, T1, w & 0x7777u), m1 = mxfp4_prmt(T0, T1, hs & 0x7777u);
    const uint32_t s0 = mxfp4_prmt(K, K, w), s1 = mxfp4_prmt(K, K, hs);
    const uint32_t b0 = m0 | ((s0 << 7) & 0x80808080u), b1 = m1 | ((s1 << 7) & 0x80808080u); /* signed fp16 high bytes */
    h[0] = mxfp4_prmt(b0, 0u, 0x1404u); /* nibbles (0, 1) */
    h[1] = mxfp4_prmt(b0, 0u, 0x3424u); /* (2, 3) */
    h[2] = mxfp4_prmt(b1, 0u, 0x1404u); /* (4, 5) */
    h[3] = mxfp4_prmt(b1, 0u, 0x3424u); /* (6, 7) */
}
static __host__ __device__ __forceinline__ void mxfp4_lut_halves(uint32_t w, uint32_t h[4]) {
    mxfp4_lut_halves_from(w, MXFP4_LUT_T0, MXFP4_LUT_T1, h);
}
/* The tables of the magnitudes times 2^k, for |k| <= MXFP4_LUT_SCALED_MAX_K: k added to each nonzero byte's exponent field
 * (bits 2..6); every byte stays within 0x04 .. 0x7A, so no byte carries into the next and each value is the exact normal
 * fp16 e2m1 x 2^k, the bits mxfp4_lut_halves times an fp16 2^k gives (the F16 streaming kernel's HMUL2 by its block
 * scale). 13: 0.5 x 2^-13 is fp16's smallest normal, 6 x 2^13 below its largest. */
#define MXFP4_LUT_SCALED_MAX_K 13
static __host__ __device__ __forceinline__ void mxfp4_lut_scaled(int k, uint32_t *T0, uint32_t *T1) {
    *T0 = MXFP4_LUT_T0 + (uint32_t)k * 0x04040400u; /* byte 0 (magnitude 0) stays 0 */
    *T1 = MXFP4_LUT_T1 + (uint32_t)k * 0x04040404u;
}

/* f[i] = (value of nibble 2i, value of nibble 2i + 1) of w, times 1 (fp16 -> fp32 is exact). */
static __device__ __forceinline__ void mxfp4_lut8(uint32_t w, float2 f[4]) {
    uint32_t h[4];
    mxfp4_lut_halves(w, h);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __half2 v;
        memcpy(&v, &h[i], sizeof v);
        f[i] = __half22float2(v);
    }
}

/* 2^(s - 127), the E8M0 block scale for the table values (s = 0: the subnormal 2^-127; 255: inf, as
 * the bit decode's scale gives). */
static __device__ __forceinline__ float mxfp4_lut_scale(uint8_t s) {
    return s ? __int_as_float((int)s << 23) : __int_as_float(0x00400000);
}

/* The 8 values of w as signed bytes 2 * e2m1 (-12..12; -0 becomes 0): v[0] = nibbles 0..3 (byte i = nibble
 * i), v[1] = nibbles 4..7, for integer dot products (dp4a, moe_decode_dp4a.cu). Two lookups per 4 values in
 * the table of doubled magnitudes (0, 1, 2, 3, 4, 6, 8, 12: every byte < 0x80): with the nibbles as
 * selectors, a positive nibble (bit 3 clear) picks its magnitude and a negative one replicates the msb of a
 * byte < 0x80, i.e. gives 0; with the sign bits flipped, the other way round. Then a byte holds p (positive)
 * or n (negative), never both, and 0x100 - n is (0x80 - n) ^ 0x80 per byte (no borrow: n <= 12; bit 7 of
 * 0x80 - n is clear for n >= 1, and n = 0 gives 0). 11 instructions per 8 values. */
static __host__ __device__ __forceinline__ void mxfp4_i8x8(uint32_t w, uint32_t v[2]) {
    const uint32_t T0 = 0x03020100u, T1 = 0x0C080604u, K = 0x80808080u;
    const uint32_t wn = w ^ 0x88888888u;
    const uint32_t p0 = mxfp4_prmt(T0, T1, w), n0 = mxfp4_prmt(T0, T1, wn);
    const uint32_t p1 = mxfp4_prmt(T0, T1, w >> 16), n1 = mxfp4_prmt(T0, T1, wn >> 16);
    v[0] = p0 | ((K - n0) ^ K);
    v[1] = p1 | ((K - n1) ^ K);
}

#endif
