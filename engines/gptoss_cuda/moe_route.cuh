/* moe_route.cuh — one token's top-4 expert choice from its 32+ router logits, and the router split's finish (the
 * partial rows' sums, r, the logits), shared by the router kernels of moe_decode.cu, the routed gate_up of
 * moe_decode_dp4a.cu and o_proj's last block in linear.cu (so every path picks experts with the same comparisons and
 * adds the partial rows in the same order). Included by .cu files only. */
#ifndef LLMR_GPTOSS_MOE_ROUTE_CUH
#define LLMR_GPTOSS_MOE_ROUTE_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engines/gptoss_cuda/kernels.h"

/* The group table of one token's 4 distinct picks sel[] (pairs 0..3): one group per expert in ascending
 * expert id, as the block-wide grouping below builds it for T = 1. */
static __device__ __forceinline__ void router_groups_one(const int sel[GPTOSS_TOPK], int32_t *groups) {
    const int GM = GPTOSS_TOPK;
    groups[0] = GPTOSS_TOPK;
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        int g = 0; /* the rank of sel[k] among the 4 */
        for (int j = 0; j < GPTOSS_TOPK; j++) g += sel[j] < sel[k];
        groups[1 + g] = sel[k];
        groups[1 + GM + g] = 1;
        groups[1 + 2 * GM + 4 * g] = k;
    }
}
/* Lane 0's part of a top-4: the softmax over the 4 picked values val[] (val[0] the largest) to w[4t..4t+3], the picks
 * to ids[4t..4t+3], with one_table also the one-token group table. */
static __device__ __forceinline__ void router_write4(const int sel[GPTOSS_TOPK], const float val[GPTOSS_TOPK], int t,
                                                     int32_t *ids, float *w, bool one_table, int32_t *groups) {
    float p[GPTOSS_TOPK], sum = 0.0f;
    for (int k = 0; k < GPTOSS_TOPK; k++) { p[k] = expf(val[k] - val[0]); sum += p[k]; }
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        ids[t * GPTOSS_TOPK + k] = sel[k];
        w[t * GPTOSS_TOPK + k] = p[k] / sum;
    }
    if (one_table) router_groups_one(sel, groups);
}

/* A logit as an unsigned key ordered as router_top4 compares logits: key(a) > key(b) exactly when a > b, key(a) ==
 * key(b) when they are equal, with NaN taken as -inf and -0 as +0 (first, since the two are equal as floats and their
 * bits are not); every key is above 0 (-inf's is 0x007FFFFF). The value as compared goes to *vc. Host-checked. */
static __host__ __device__ __forceinline__ uint32_t router_key32(float v, float *vc) {
    v = v != v ? -INFINITY : v + 0.0f;
    uint32_t b;
    memcpy(&b, &v, 4);
    *vc = v;
    return b >> 31 ? ~b : b | 0x80000000u;
}

/* By one whole warp, lane e holding logit e of exactly 32: the same picks as router_top4 (ties to the lower id, NaN
 * as -inf) and the same softmax, with a warp max reduction (redux.sync) over router_key32's keys and a ballot a pick
 * instead of five shuffle pairs; a taken lane's key is 0, below every logit's. Written as router_top4 writes them
 * (token t; with one_table also the one-token group table). */
static __device__ __forceinline__ void router_top4_32_at(float v, int lane, int t, int32_t *ids, float *w,
                                                         bool one_table, int32_t *groups) {
    uint32_t key = router_key32(v, &v);
    int sel[GPTOSS_TOPK];
    float val[GPTOSS_TOPK];
#pragma unroll
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        const uint32_t top = __reduce_max_sync(0xffffffffu, key);
        const int bi = __ffs(__ballot_sync(0xffffffffu, key == top)) - 1;
        sel[k] = bi;
        val[k] = __shfl_sync(0xffffffffu, v, bi);
        if (lane == bi) key = 0;
    }
    if (lane == 0) router_write4(sel, val, t, ids, w, one_table, groups);
}

/* By one whole warp: the top-4 of the logits lg[0, E) (shared memory; ties to the lower id, as
 * gptoss_router_topk) and the softmax over the 4, written by lane 0 to token t's ids[4t..4t+3] and w[4t..4t+3];
 * with one_table also the one-token group table. A NaN logit counts as -inf (as in the sampler): every comparison with NaN is
 * false, so without this the lanes could each keep their own pick and write ids that are not a distinct top-4. */
static __device__ __forceinline__ void router_top4(const float *lg, int E, int lane, int t, int32_t *ids, float *w,
                                                   bool one_table, int32_t *groups) {
    if (E == 32) { /* gpt-oss: the reduction form, the same picks and softmax */
        router_top4_32_at(lg[lane], lane, t, ids, w, one_table, groups);
        return;
    }
    unsigned taken = 0; /* bit j: expert lane + 32 j already chosen */
    int sel[GPTOSS_TOPK];
    float val[GPTOSS_TOPK];
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        float bv = -INFINITY;
        int bi = -1;
        for (int j = 0; lane + 32 * j < E; j++) {
            const int e = lane + 32 * j;
            if (taken >> j & 1u) continue;
            const float v = lg[e] != lg[e] ? -INFINITY : lg[e];
            if (bi < 0 || v > bv) { bv = v; bi = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) { bv = ov; bi = oi; }
        }
        sel[k] = bi;
        val[k] = bv;
        if (bi >= 0 && (bi & 31) == lane) taken |= 1u << (bi >> 5);
    }
    if (lane == 0) router_write4(sel, val, t, ids, w, one_table, groups);
}


/* ------------------------------------------------------------------ the router split's finish in one block
 * gptoss_moe_router_finish's sums by a block of 8 warps, in its order exactly (so bit for bit): its 32 warps'
 * column sums ("virtual warp" vw adds partial rows vw, vw + 32, ... in order; lane 0 also their squares) are formed
 * here by warp w for vw = w, w + 8, w + 16, w + 24; then warp 0 adds the 32 in order. rpart is read past L1 (__ldcg:
 * other blocks of the same launch may have just written it). red: shared [32][33]. */
#define ROUTE_PBATCH 16 /* partial rows of a virtual warp loaded before its first add (one L2 round trip, not one per
                         * 4 rows: gptoss_gemv1_router leaves 360 rows for the 20b, 12 a virtual warp) */

/* Virtual warp vw's sums, written to red[vw]: lane e adds column e of rows vw, vw + 32, ... in that order, lane 0
 * also column 32 (the squares). */
static __device__ __forceinline__ void router_partials_vw(const float *rpart, int nparts, int vw, int lane,
                                                          float (*red)[33]) {
    float pv[ROUTE_PBATCH], qv[ROUTE_PBATCH];
#pragma unroll
    for (int k = 0; k < ROUTE_PBATCH; k++) {
        const int j = vw + 32 * k;
        pv[k] = j < nparts ? __ldcg(rpart + (size_t)j * 33 + lane) : 0.0f;
        qv[k] = j < nparts && lane == 0 ? __ldcg(rpart + (size_t)j * 33 + 32) : 0.0f;
    }
    float p = 0.0f, q = 0.0f;
#pragma unroll
    for (int k = 0; k < ROUTE_PBATCH; k++) {
        if (vw + 32 * k >= nparts) break;
        p += pv[k];
        q += qv[k];
    }
    for (int j = vw + 32 * ROUTE_PBATCH; j < nparts; j += 32) {
        p += __ldcg(rpart + (size_t)j * 33 + lane);
        if (lane == 0) q += __ldcg(rpart + (size_t)j * 33 + 32);
    }
    red[vw][lane] = p;
    if (lane == 0) red[vw][32] = q;
}

/* The same sums from a copy of the partial rows in shared memory (S[j * 33 + c], row j column c; gemv1's last block
 * brings them in with one bulk copy), written in place: virtual warp vw's sums over row vw, which only vw reads. So
 * S then holds red as above in its first 32 rows, bit for bit router_partials_vw's. */
static __device__ __forceinline__ void router_partials_smem_vw(float *S, int nparts, int vw, int lane) {
    float p = 0.0f, q = 0.0f;
    for (int j = vw; j < nparts; j += 32) {
        p += S[j * 33 + lane];
        if (lane == 0) q += S[j * 33 + 32];
    }
    S[vw * 33 + lane] = p;
    if (lane == 0) S[vw * 33 + 32] = q;
}

static __device__ __forceinline__ void router_partials_sum8(const float *rpart, int nparts, int warp, int lane,
                                                            float (*red)[33]) {
#pragma unroll 2
    for (int i = 0; i < 4; i++) router_partials_vw(rpart, nparts, warp + 8 * i, lane, red);
}

/* By warp 0 after red is complete: r = rsqrt(sum sq / H + eps), the logits r v + bias (lane e: router_b[e], loaded
 * by the caller ahead of the sums; to rl when non-NULL), the top-4 with its softmax and the one-token group table
 * (ids, w, groups); returns r (every lane). */
static __device__ __forceinline__ float router_finish_warp(const float (*red)[33], float bias, int H, float eps,
                                                           int lane, int32_t *ids, float *w, int32_t *groups,
                                                           float *rl) {
    float v = 0.0f, sq = 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) {
        v += red[k][lane];
        sq += red[k][32];
    }
    const float r = rsqrtf(sq / (float)H + eps), lv = r * v + bias;
    if (rl) rl[lane] = lv;
    router_top4_32_at(lv, lane, 0, ids, w, true, groups); /* token 0, its one-token group table */
    return r;
}

#endif
