/* test_moe_mma — gptoss_mxfp4_mma (moe_mma.cu), the MXFP4 experts on tensor cores, against plain CPU
 * loops in double precision. Linked into the gptoss_kernels binary; its main calls gptoss_moe_mma_checks.
 *  - the bf16 value of every nibble x E8M0 scale equals tc.cu's exact dequantization rule bit for bit;
 *  - gate_up (+ clamped SwiGLU) and down (+ bias) at T = 1, 5, 64, 512 tokens with random top-4
 *    routing in which some experts get no token and one expert gets many; bound 2e-6 relative L2 (the
 *    hi/mid/lo split leaves ~2^-25 of each activation, as tc.h with S = 3: fp32 level);
 *  - a token's result is bit for bit the same alone (T = 1) as in a batch, and with the activations
 *    chunk-swizzled (the decode router's h_sw) as plain;
 *  - gptoss_mxfp4_mma_stream (moe_mma_stream.cu) gives the same bits as gptoss_mxfp4_mma at every size,
 *    with its automatic shape and with several warps / tiles per warp;
 *  - timings at the 20b shapes (T = 1, 8, 64, 512, 4096) beside the path each replaces: the fused decode
 *    kernels (T <= 64) or the dequantize + cuBLAS experts of tc.cu (T > 64). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "engines/gptoss_cuda/moe_mma.cu"
#include "engines/gptoss_cuda/moe_mma_stream.cu"
#include "engines/gptoss_cuda/tc.h"

#define TU_SEED 0x6d6d61ull
#include "tests/gpu/gptoss_kernels/test_util.h"

static void mm_check(const char *what, int ok, const char *detail) {
    tu_checks++;
    if (!ok) tu_failed++;
    printf("%-4s %s%s\n", ok ? "ok" : "FAIL", what, detail ? detail : "");
}
static void mm_check_rel(const char *what, double num, double den, int nan, double bound) {
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    char d[96];
    snprintf(d, sizeof d, ": rel L2 %.2e (bound %.0e)%s", rel, bound, nan ? " NaN/unwritten" : "");
    mm_check(what, !nan && rel <= bound, d);
}

/* The CPU rule of tc.cu's dequantization: fp32 product of the e2m1 value and 2^(s-127) (s = 0: 2^-127,
 * s = 255: ldexp by 128), bf16 = its upper 16 bits. */
static const float mm_fp4[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
static uint16_t mm_rule(int nib, int s) {
    uint32_t scb = s ? (uint32_t)s << 23 : 0x00400000u;
    float sc;
    memcpy(&sc, &scb, 4);
    const float p = s == 255 ? ldexpf(mm_fp4[nib], 128) : mm_fp4[nib] * sc;
    uint32_t u;
    memcpy(&u, &p, 4);
    return (uint16_t)(u >> 16);
}

static void test_mma_table(void) {
    uint16_t *d = NULL;
    CK(cudaMalloc((void **)&d, 4096 * 2));
    CK(gptoss_mxfp4_mma_table(d, 0));
    auto h = dev_download(d, 4096);
    int bad = 0, first = -1;
    for (int s = 0; s < 256; s++)
        for (int n = 0; n < 16; n++)
            if (h[s * 16 + n] != mm_rule(n, s)) { bad++; if (first < 0) first = s * 16 + n; }
    char det[96];
    snprintf(det, sizeof det, ": %d of 4096 differ%s", bad, bad ? " (first: scale/nibble below)" : "");
    mm_check("mxfp4_mma: bf16 of every nibble x scale == tc.cu's dequantization rule", bad == 0, det);
    if (first >= 0) printf("     scale %d nibble %d: got %04x want %04x\n", first / 16, first % 16, h[first], mm_rule(first % 16, first / 16));
    cudaFree(d);
}

/* One expert layer's weights (host + device). */
typedef struct {
    int E, H, I;
    std::vector<uint8_t> gub, gus, dnb, dns;
    std::vector<uint16_t> gbias, dbias;
    uint8_t *d_gub, *d_gus, *d_dnb, *d_dns;
    uint16_t *d_gbias, *d_dbias;
} mm_layer;

/* Random experts; scale bytes uniform in s_lo .. s_lo + s_span - 1. */
static void mm_layer_make(mm_layer *L, int E, int H, int I, int s_lo = 118, int s_span = 6) {
    L->E = E; L->H = H; L->I = I;
    L->gub.resize((size_t)E * 2 * I * (H / 32) * 16);
    L->gus.resize((size_t)E * 2 * I * (H / 32));
    L->dnb.resize((size_t)E * H * (I / 32) * 16);
    L->dns.resize((size_t)E * H * (I / 32));
    for (size_t i = 0; i < L->gub.size(); i += 8) { uint64_t r = rnd64(); memcpy(&L->gub[i], &r, 8); }
    for (size_t i = 0; i < L->dnb.size(); i += 8) { uint64_t r = rnd64(); memcpy(&L->dnb[i], &r, 8); }
    for (auto &v : L->gus) v = (uint8_t)(s_lo + rnd64() % s_span);
    for (auto &v : L->dns) v = (uint8_t)(s_lo + rnd64() % s_span);
    L->gbias.resize((size_t)E * 2 * I);
    L->dbias.resize((size_t)E * H);
    for (auto &v : L->gbias) v = f2bf(nrand() * 0.5f);
    for (auto &v : L->dbias) v = f2bf(nrand() * 0.5f);
    L->d_gub = dev_upload(L->gub); L->d_gus = dev_upload(L->gus); L->d_dnb = dev_upload(L->dnb); L->d_dns = dev_upload(L->dns);
    L->d_gbias = dev_upload(L->gbias); L->d_dbias = dev_upload(L->dbias);
}
static void mm_layer_free(mm_layer *L) {
    cudaFree(L->d_gub); cudaFree(L->d_gus); cudaFree(L->d_dnb); cudaFree(L->d_dns);
    cudaFree(L->d_gbias); cudaFree(L->d_dbias);
}

/* Row n of expert e (N rows, K columns) decoded in double. */
static void mm_row(const std::vector<uint8_t> &blk, const std::vector<uint8_t> &sc, int N, int K, int e, int n,
                   double *out) {
    for (int b = 0; b < K / 32; b++) {
        const size_t bi = ((size_t)e * N + n) * (K / 32) + b;
        const double s = ldexp(1.0, (int)sc[bi] - 127);
        for (int j = 0; j < 16; j++) {
            const uint8_t byte = blk[bi * 16 + j];
            out[b * 32 + 2 * j] = mm_fp4[byte & 15] * s;
            out[b * 32 + 2 * j + 1] = mm_fp4[byte >> 4] * s;
        }
    }
}

/* Random top-4 routing: experts E-2 and E-1 never chosen; with skew, every token takes expert 0. */
static std::vector<int32_t> mm_ids(int T, int E, int skew) {
    std::vector<int32_t> ids((size_t)T * 4);
    for (int t = 0; t < T; t++) {
        int k = 0;
        if (skew) ids[(size_t)t * 4 + k++] = 0;
        while (k < 4) {
            const int e = (int)(rnd64() % (uint64_t)(E - 2));
            int dup = 0;
            for (int j = 0; j < k; j++) dup |= ids[(size_t)t * 4 + j] == e;
            if (!dup) ids[(size_t)t * 4 + k++] = e;
        }
    }
    return ids;
}

/* Routing tables on the device (gptoss_moe_route). */
typedef struct {
    int32_t *ids, *counts, *offsets, *pair_token, *pair_of;
} mm_route;
static void mm_route_make(mm_route *r, const std::vector<int32_t> &ids, int T, int E) {
    r->ids = dev_upload(ids);
    CK(cudaMalloc((void **)&r->counts, GPTOSS_MAX_EXPERTS * 4));
    CK(cudaMalloc((void **)&r->offsets, GPTOSS_MAX_EXPERTS * 4));
    CK(cudaMalloc((void **)&r->pair_token, (size_t)T * 16));
    CK(cudaMalloc((void **)&r->pair_of, (size_t)T * 16));
    CK(gptoss_moe_route(r->ids, T, E, r->counts, r->offsets, r->pair_token, r->pair_of, 0));
}
static void mm_route_free(mm_route *r) {
    cudaFree(r->ids); cudaFree(r->counts); cudaFree(r->offsets); cudaFree(r->pair_token); cudaFree(r->pair_of);
}

/* Forces the streaming kernel's tiles (1: 8 pairs, 2: 16 pairs, 0: by max_pairs) through its test hook. */
static void mm_stream_tiles(int nt) { gptoss_mxfp4_mma_stream_force_tiles(nt); }

/* gate_up + SwiGLU into act [P, I], down + bias into dn [P, H]: gptoss_mxfp4_mma, or with P > 0
 * gptoss_mxfp4_mma_stream for P pairs with the given warps per CTA (0 = automatic) and activation parts. */
static void mm_run_with(const mm_layer *L, const mm_route *r, const float *dx, int swz, float *dact, float *ddn, int P,
                        int warps, int parts = 3) {
    const float alpha = 1.702f, limit = 7.0f;
    if (P > 0) {
        CK(gptoss_mxfp4_mma_stream(dx, L->H, swz, r->pair_token, L->d_gub, L->d_gus, L->d_gbias, r->counts, r->offsets,
                                    L->E, L->H, 2 * L->I, 1, alpha, limit, P, parts, warps, dact, 0));
        CK(gptoss_mxfp4_mma_stream(dact, L->I, 0, NULL, L->d_dnb, L->d_dns, L->d_dbias, r->counts, r->offsets, L->E,
                                    L->I, L->H, 0, 0.0f, 0.0f, P, parts, warps, ddn, 0));
        return;
    }
    CK(gptoss_mxfp4_mma(dx, L->H, swz, r->pair_token, L->d_gub, L->d_gus, L->d_gbias, r->counts, r->offsets, L->E,
                         L->H, 2 * L->I, 1, alpha, limit, dact, 0));
    CK(gptoss_mxfp4_mma(dact, L->I, 0, NULL, L->d_dnb, L->d_dns, L->d_dbias, r->counts, r->offsets, L->E, L->I, L->H,
                         0, 0.0f, 0.0f, ddn, 0));
}
static void mm_run(const mm_layer *L, const mm_route *r, const float *dx, int swz, float *dact, float *ddn) {
    mm_run_with(L, r, dx, swz, dact, ddn, 0, 0);
}

/* The experts' fp16 shifts of the F16 form (gate_up's into *gsh, down's into *dsh; device memory the caller frees). */
static void mm_f16_shifts(const mm_layer *L, int32_t **gsh, int32_t **dsh) {
    CK(cudaMalloc((void **)gsh, (size_t)L->E * 4));
    CK(cudaMalloc((void **)dsh, (size_t)L->E * 4));
    CK(gptoss_mxfp4_f16_shifts(L->d_gus, L->E, 2 * L->I, L->H, *gsh, 0));
    CK(gptoss_mxfp4_f16_shifts(L->d_dns, L->E, L->H, L->I, *dsh, 0));
}

/* The F16 form's gate_up + SwiGLU into act [P, I] and down + bias into dn [P, H] at the automatic shape, in the
 * engine's order (gptoss_moe_mma_experts): with staged (mm_stage_bytes: P pair rows, then P / 4 token rows, of
 * gptoss_mxfp4_stage_f16_units(max(H, I)) units) each input is first converted into it (gate_up's token rows, down's
 * pair rows), which the shapes that read pre-staged rows copy; NULL: the CTAs stage. */
static size_t mm_stage_bytes(int P, int H, int I) { return (size_t)(P + P / GPTOSS_TOPK) * gptoss_mxfp4_stage_f16_units(H > I ? H : I) * 16; }
/* mm_run_f16's halves, each one launch: gate_up + SwiGLU from x (its tokens' rows pre-staged at tok, or NULL) into act;
 * down from act (pre-staged at staged, or NULL) into dn. mm_f16_tokens: where the tokens' rows go in the staging. */
static void *mm_f16_tokens(const mm_layer *L, int P, void *staged) {
    return staged ? (uint8_t *)staged + (size_t)P * gptoss_mxfp4_stage_f16_units(L->H > L->I ? L->H : L->I) * 16 : NULL;
}
static void mm_f16_gate_up(const mm_layer *L, const mm_route *r, const float *dx, int swz, const int32_t *gsh, int P,
                           const void *tok, const gptoss_mxfp4_tiled *gt, float *dact) {
    CK(gptoss_mxfp4_mma_stream_f16(dx, L->H, swz, r->pair_token, L->d_gub, L->d_gus, L->d_gbias, gsh, r->counts,
                                   r->offsets, L->E, L->H, 2 * L->I, 1, 1.702f, 7.0f, P, 0, tok, gt, dact, 0));
}
static void mm_f16_down(const mm_layer *L, const mm_route *r, const float *dact, const int32_t *dsh, int P,
                        const void *staged, const gptoss_mxfp4_tiled *dt, float *ddn) {
    CK(gptoss_mxfp4_mma_stream_f16(dact, L->I, 0, NULL, L->d_dnb, L->d_dns, L->d_dbias, dsh, r->counts, r->offsets, L->E,
                                   L->I, L->H, 0, 0.0f, 0.0f, P, 0, staged, dt, ddn, 0));
}

static void mm_run_f16(const mm_layer *L, const mm_route *r, const float *dx, int swz, const int32_t *gsh,
                       const int32_t *dsh, int P, void *staged, float *dact, float *ddn,
                       const gptoss_mxfp4_tiled *gt = NULL, const gptoss_mxfp4_tiled *dt = NULL) {
    void *tok = mm_f16_tokens(L, P, staged);
    if (staged) CK(gptoss_mxfp4_stage_f16(dx, L->H, swz, NULL, P / GPTOSS_TOPK, L->H, tok, 0)); /* the tokens' rows */
    mm_f16_gate_up(L, r, dx, swz, gsh, P, tok, gt, dact);
    if (staged) CK(gptoss_mxfp4_stage_f16(dact, L->I, 0, NULL, P, L->I, staged, 0));
    mm_f16_down(L, r, dact, dsh, P, staged, dt, ddn);
}

/* mm_run_f16's two expert launches timed apart on pre-staged rows (gate_up's from x, down's from the act gate_up left),
 * with the grid each asks for: its CTAs (8-pair tiles, 16 warps of 16 rows a CTA: the launch's shape from 16 pairs) and
 * how many waves of 2 CTAs an SM (the pre-staged launches' bounds) that is. A launch whose waves end just past a whole
 * number leaves a tail of few CTAs (session 54: the per-row gate_up's 400 CTAs where 396 fit cost 8% of a 5-row step). */
static void mm_time_f16_launches(const char *what, const mm_layer *L, const mm_route *r, const float *dx,
                                 const int32_t *gsh, const int32_t *dsh, int P, void *staged, float *dact, float *ddn,
                                 const gptoss_mxfp4_tiled *gt, const gptoss_mxfp4_tiled *dt, double gu_bytes,
                                 double dn_bytes, int reps) {
    void *tok = mm_f16_tokens(L, P, staged);
    CK(gptoss_mxfp4_stage_f16(dx, L->H, 0, NULL, P / GPTOSS_TOPK, L->H, tok, 0));
    auto gu = [&]() { mm_f16_gate_up(L, r, dx, 0, gsh, P, tok, gt, dact); };
    gu();
    CK(gptoss_mxfp4_stage_f16(dact, L->I, 0, NULL, P, L->I, staged, 0));
    auto dn = [&]() { mm_f16_down(L, r, dact, dsh, P, staged, dt, ddn); };
    const double g1 = tu_time_ms(gu, reps), d1 = tu_time_ms(dn, reps), d2 = tu_time_ms(dn, reps), g2 = tu_time_ms(gu, reps);
    auto counts = dev_download(r->counts, (size_t)L->E);
    int items = 0;
    for (int e = 0; e < L->E; e++) items += (counts[e] + 7) / 8;
    const int gu_ctas = items * ((2 * L->I / 16 + 15) / 16), dn_ctas = items * ((L->H / 16 + 15) / 16);
    const double slots = 2.0 * gptoss_sm_count();
    printf("; %s by launch: gate_up %.3f / %.3f ms (%.2f TB/s of its bytes; %d CTAs, %.2f waves), down %.3f / %.3f ms "
           "(%.2f TB/s; %d CTAs, %.2f waves)", what, g1, g2, gu_bytes / (fmin(g1, g2) * 1e-3) / 1e12, gu_ctas,
           gu_ctas / slots, d1, d2, dn_bytes / (fmin(d1, d2) * 1e-3) / 1e12, dn_ctas, dn_ctas / slots);
}

/* The tiled copies (gptoss_mxfp4_tile) of L's gate_up and down in one allocation (*buf, the caller frees it). */
static void mm_tiled(const mm_layer *L, void **buf, gptoss_mxfp4_tiled *gt, gptoss_mxfp4_tiled *dt) {
    *buf = mxfp4_tiled_pair(L->d_gub, L->d_gus, L->d_dnb, L->d_dns, L->E, L->H, L->I, gt, dt);
}

/* One pair's down_proj against the CPU (double): got[n] vs b[e, n] + sum_j act[j] W_e[n, j], into the
 * error sums (wr: scratch of I doubles); the input is the GPU's own act, so down is checked on its own. */
static void mm_down_err(const mm_layer *L, int e, const float *act, const float *got, double *wr, double *num,
                        double *den, int *nan) {
    const int H = L->H, I = L->I;
    for (int n = 0; n < H; n++) {
        double y = gptoss_bf16_to_f32(L->dbias[(size_t)e * H + n]);
        mm_row(L->dnb, L->dns, H, I, e, n, wr);
        for (int j = 0; j < I; j++) y += (double)act[j] * wr[j];
        if (!isfinite(got[n])) *nan = 1;
        *num += (got[n] - y) * (got[n] - y);
        *den += y * y;
    }
}

/* A variant's act and dn against the CPU for the checked pairs (every step-th): act against ref_act (from x), dn
 * against the variant's own act (mm_down_err); two checks, "<what> gate_up+swiglu" and "<what> down+bias". */
static void mm_check_against(const char *what, const mm_layer *L, const std::vector<int32_t> &ids,
                             const std::vector<int32_t> &pair_of, int step, const std::vector<double> &ref_act,
                             const std::vector<float> &act, const std::vector<float> &dn, double *wr, double bound) {
    const int I = L->I, H = L->H, P = (int)ids.size();
    double an = 0, ad = 0, dnum = 0, dden = 0;
    int nan = 0;
    for (int q = 0; q < P; q += step) {
        const int e = ids[q], p = pair_of[q];
        for (int j = 0; j < I; j++) {
            const double got = act[(size_t)p * I + j], a = ref_act[(size_t)p * I + j];
            if (!isfinite(got)) nan = 1;
            an += (got - a) * (got - a);
            ad += a * a;
        }
        mm_down_err(L, e, &act[(size_t)p * I], &dn[(size_t)p * H], wr, &dnum, &dden, &nan);
    }
    char w[200];
    snprintf(w, sizeof w, "%s gate_up+swiglu", what);
    mm_check_rel(w, an, ad, nan, bound);
    snprintf(w, sizeof w, "%s down+bias", what);
    mm_check_rel(w, dnum, dden, nan, bound);
}

/* Correctness at T tokens: CPU reference for up to max_pairs (token, slot) pairs (all when fewer). */
/* loose: a factor on the bounds against the CPU (scales over many binades sum with more cancellation) */
static void test_mma(int T, const mm_layer *L, int skew, int max_pairs, double loose = 1.0) {
    const int E = L->E, H = L->H, I = L->I, P = T * 4;
    const float alpha = 1.702f, limit = 7.0f;
    std::vector<float> x((size_t)T * H);
    for (auto &v : x) v = nrand();
    auto ids = mm_ids(T, E, skew);
    mm_route r;
    mm_route_make(&r, ids, T, E);
    float *dx = dev_upload(x), *dact = dev_poison((size_t)P * I), *ddn = dev_poison((size_t)P * H);
    mm_run(L, &r, dx, 0, dact, ddn);
    auto act = dev_download(dact, (size_t)P * I);
    auto dn = dev_download(ddn, (size_t)P * H);
    auto pair_of = dev_download(r.pair_of, (size_t)P);
    auto counts = dev_download(r.counts, (size_t)E);
    /* the CPU: act from x (double), dn from the GPU's act (so each matmul is checked on its own) */
    const int step = P <= max_pairs ? 1 : P / max_pairs;
    double an = 0, ad = 0, dnum = 0, dden = 0;
    int nan = 0;
    std::vector<double> wr(H > 2 * I ? H : 2 * I), wu(H);
    std::vector<double> ref_act((size_t)P * I, 0.0); /* the reference act of the checked pairs (for 2 parts) */
    for (int q = 0; q < P; q += step) {
        const int t = q / 4, e = ids[q], p = pair_of[q];
        for (int j = 0; j < I; j++) {
            double g = gptoss_bf16_to_f32(L->gbias[(size_t)e * 2 * I + 2 * j]);
            double u = gptoss_bf16_to_f32(L->gbias[(size_t)e * 2 * I + 2 * j + 1]);
            mm_row(L->gub, L->gus, 2 * I, H, e, 2 * j, wr.data());
            mm_row(L->gub, L->gus, 2 * I, H, e, 2 * j + 1, wu.data());
            for (int k = 0; k < H; k++) {
                g += (double)x[(size_t)t * H + k] * wr[k];
                u += (double)x[(size_t)t * H + k] * wu[k];
            }
            g = g < limit ? g : limit;
            u = u < -limit ? -limit : (u > limit ? limit : u);
            const double a = g / (1.0 + exp(-alpha * g)) * (u + 1.0);
            ref_act[(size_t)p * I + j] = a;
            const double got = act[(size_t)p * I + j];
            if (!isfinite(got)) nan = 1;
            an += (got - a) * (got - a);
            ad += a * a;
        }
        mm_down_err(L, e, &act[(size_t)p * I], &dn[(size_t)p * H], wr.data(), &dnum, &dden, &nan);
    }
    int empty = 0, busiest = 0;
    for (int e = 0; e < E; e++) { empty += counts[e] == 0; busiest = counts[e] > busiest ? counts[e] : busiest; }
    char what[160];
    snprintf(what, sizeof what, "mxfp4_mma gate_up+swiglu T=%d H=%d I=%d E=%d (%d empty experts, busiest %d, %d pairs checked)",
             T, H, I, E, empty, busiest, (P + step - 1) / step);
    mm_check_rel(what, an, ad, nan, 2e-6 * loose);
    snprintf(what, sizeof what, "mxfp4_mma down+bias T=%d H=%d I=%d E=%d", T, H, I, E);
    mm_check_rel(what, dnum, dden, nan, 2e-6 * loose);
    /* the same activations chunk-swizzled (the decode router's h_sw layout): bit for bit */
    {
        std::vector<float> xs(x.size());
        for (int t = 0; t < T; t++)
            for (int k = 0; k < H; k++) xs[(size_t)t * H + gptoss_swz(k, H)] = x[(size_t)t * H + k];
        float *dxs = dev_upload(xs), *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
        mm_run(L, &r, dxs, 1, dact2, ddn2);
        auto act2 = dev_download(dact2, (size_t)P * I);
        auto dn2 = dev_download(ddn2, (size_t)P * H);
        snprintf(what, sizeof what, "mxfp4_mma T=%d: swizzled activations give the same bits", T);
        mm_check(what, !memcmp(act2.data(), act.data(), act.size() * 4) && !memcmp(dn2.data(), dn.data(), dn.size() * 4), NULL);
        cudaFree(dxs); cudaFree(dact2); cudaFree(ddn2);
    }
    /* the streaming kernel: the same bits with 8- and 16-pair tiles (forced and automatic), automatic and
     * forced warps per CTA, plain and swizzled activations */
    {
        std::vector<float> xs(x.size());
        for (int t = 0; t < T; t++)
            for (int k = 0; k < H; k++) xs[(size_t)t * H + gptoss_swz(k, H)] = x[(size_t)t * H + k];
        float *dxs = dev_upload(xs);
        /* tiles (0 = automatic), warps, occupancy mode (0 = automatic), super-chunks per phase (0 = automatic) */
        const int shapes[11][4] = {{0, 0, 0, 0},  {0, 0, 1, 0}, {1, 12, 1, 0}, {2, 16, 1, 0}, {1, 4, 1, 0}, {2, 7, 1, 0},
                                   {1, 16, 2, 0}, {2, 16, 2, 0}, {1, 8, 3, 0},  {2, 5, 3, 0},  {1, 16, 2, 16}};
        for (int sh = 0; sh < 11; sh++)
            for (int swz = 0; swz < 2; swz++) {
                float *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
                mm_stream_tiles(shapes[sh][0]);
                gptoss_mxfp4_mma_stream_force_occ(shapes[sh][2]);
                gptoss_mxfp4_mma_stream_force_phase(shapes[sh][3]);
                mm_run_with(L, &r, swz ? dxs : dx, swz, dact2, ddn2, P, shapes[sh][1]);
                gptoss_mxfp4_mma_stream_force_phase(0);
                gptoss_mxfp4_mma_stream_force_occ(0);
                mm_stream_tiles(0);
                auto act2 = dev_download(dact2, (size_t)P * I);
                auto dn2 = dev_download(ddn2, (size_t)P * H);
                snprintf(what, sizeof what, "mxfp4_mma_stream T=%d tiles %d warps %d occupancy %d phase %d%s: the same bits as gptoss_mxfp4_mma",
                         T, shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3], swz ? " (swizzled)" : "");
                mm_check(what, !memcmp(act2.data(), act.data(), act.size() * 4) && !memcmp(dn2.data(), dn.data(), dn.size() * 4), NULL);
                cudaFree(dact2); cudaFree(ddn2);
            }
        cudaFree(dxs);
    }
    /* 2 activation parts (the prompt path's): against the CPU at tc.h's S = 2 level (act; dn from the GPU's
     * own act), and the same bits whatever the tiles (a pair's products do not depend on its tile) */
    {
        std::vector<float> act_t[2], dn_t[2];
        const int tiles[2] = {1, 2};
        for (int i = 0; i < 2; i++) {
            float *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
            mm_stream_tiles(tiles[i]);
            mm_run_with(L, &r, dx, 0, dact2, ddn2, P, 0, 2);
            mm_stream_tiles(0);
            act_t[i] = dev_download(dact2, (size_t)P * I);
            dn_t[i] = dev_download(ddn2, (size_t)P * H);
            cudaFree(dact2); cudaFree(ddn2);
        }
        snprintf(what, sizeof what, "mxfp4_mma_stream 2 parts T=%d", T);
        mm_check_against(what, L, ids, pair_of, step, ref_act, act_t[0], dn_t[0], wr.data(), 3e-5 * loose);
        snprintf(what, sizeof what, "mxfp4_mma_stream 2 parts T=%d: the same bits with 8- and 16-pair tiles", T);
        mm_check(what, !memcmp(act_t[1].data(), act_t[0].data(), act_t[0].size() * 4) &&
                           !memcmp(dn_t[1].data(), dn_t[0].data(), dn_t[0].size() * 4), NULL);
        for (int occ = 2; occ <= 3; occ++) { /* and in the other occupancy modes */
            float *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
            gptoss_mxfp4_mma_stream_force_occ(occ);
            mm_run_with(L, &r, dx, 0, dact2, ddn2, P, 0, 2);
            gptoss_mxfp4_mma_stream_force_occ(0);
            auto a2 = dev_download(dact2, (size_t)P * I);
            auto d2 = dev_download(ddn2, (size_t)P * H);
            snprintf(what, sizeof what, "mxfp4_mma_stream 2 parts T=%d: the same bits in occupancy mode %d", T, occ);
            mm_check(what, !memcmp(a2.data(), act_t[0].data(), a2.size() * 4) && !memcmp(d2.data(), dn_t[0].data(), d2.size() * 4),
                     NULL);
            cudaFree(dact2); cudaFree(ddn2);
        }
    }
    /* the F16 form (the batched decode step's default): against the CPU (act from x; dn from the GPU's own act),
     * 22-bit activations, so near the 3-part level; the same bits with 8-, 16- and 32-pair tiles, swizzled
     * activations and in every occupancy mode */
    {
        int32_t *dgsh, *ddsh;
        mm_f16_shifts(L, &dgsh, &ddsh);
        std::vector<float> xs(x.size());
        for (int t = 0; t < T; t++)
            for (int k = 0; k < H; k++) xs[(size_t)t * H + gptoss_swz(k, H)] = x[(size_t)t * H + k];
        float *dxs = dev_upload(xs);
        /* tiles (0 = automatic), occupancy (0 = automatic), swizzled, pre-staged (gptoss_mxfp4_stage_f16; read only where
         * gptoss_mxfp4_mma_stream_f16_prestaged, else ignored), the tiled weights (gptoss_mxfp4_tile); the last two rows
         * again with the decode's scale tables off (fp16 scale products: gptoss_mxfp4_mma_stream_f16_tables) */
        const int forms[21][5] = {{0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {2, 0, 1, 0, 0}, {1, 2, 1, 0, 0}, {1, 3, 0, 0, 0},
                                  {2, 1, 0, 0, 0}, {2, 2, 0, 0, 0}, {4, 1, 0, 0, 0}, {4, 1, 1, 0, 0}, {0, 0, 0, 1, 0},
                                  {0, 0, 1, 1, 0}, {1, 2, 0, 1, 0}, {0, 0, 0, 1, 1}, {0, 0, 1, 1, 1}, {0, 0, 0, 0, 1},
                                  {1, 2, 1, 0, 1}, {1, 3, 0, 0, 1}, {2, 1, 0, 0, 1}, {4, 1, 1, 0, 1}, {0, 0, 0, 0, 0},
                                  {0, 0, 0, 1, 1}};
        void *tbuf;
        gptoss_mxfp4_tiled gt, dt;
        mm_tiled(L, &tbuf, &gt, &dt);
        uint8_t *dstage;
        CK(cudaMalloc((void **)&dstage, mm_stage_bytes(P, H, I)));
        CK(cudaMemset(dstage, 0xFF, mm_stage_bytes(P, H, I))); /* NaN halves wherever nothing is staged */
        std::vector<float> a0, d0;
        int same = 1, same_pre = 1;
        for (int f = 0; f < 21; f++) {
            float *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
            mm_stream_tiles(forms[f][0]);
            gptoss_mxfp4_mma_stream_force_occ(forms[f][1]);
            gptoss_mxfp4_mma_stream_f16_tables(f < 19);
            mm_run_f16(L, &r, forms[f][2] ? dxs : dx, forms[f][2], dgsh, ddsh, P, forms[f][3] ? dstage : NULL, dact2, ddn2,
                       forms[f][4] ? &gt : NULL, forms[f][4] ? &dt : NULL);
            gptoss_mxfp4_mma_stream_f16_tables(1);
            gptoss_mxfp4_mma_stream_force_occ(0);
            mm_stream_tiles(0);
            auto a2 = dev_download(dact2, (size_t)P * I);
            auto d2 = dev_download(ddn2, (size_t)P * H);
            if (f == 0) {
                a0 = a2;
                d0 = d2;
            } else {
                const int eq = !memcmp(a2.data(), a0.data(), a0.size() * 4) && !memcmp(d2.data(), d0.data(), d0.size() * 4);
                if (forms[f][3]) same_pre &= eq;
                else same &= eq;
            }
            cudaFree(dact2); cudaFree(ddn2);
        }
        { /* the e5m2 copy of the tiled weights, read by the pre-staged launches: the same bits */
            int bad = -1;
            gptoss_mxfp4_tiled ge = gt, de = dt;
            void *ebuf = mxfp4_tiled_e5_pair(&ge, &de, dgsh, ddsh, L->E, L->H, L->I, &bad);
            float *dact2 = dev_poison((size_t)P * I), *ddn2 = dev_poison((size_t)P * H);
            mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, dstage, dact2, ddn2, &ge, &de);
            const auto a2 = dev_download(dact2, (size_t)P * I);
            const auto d2 = dev_download(ddn2, (size_t)P * H);
            const int eq = !memcmp(a2.data(), a0.data(), a0.size() * 4) && !memcmp(d2.data(), d0.data(), d0.size() * 4);
            /* where blocks lie out of its reach (the layer of scales over 41 binades) the copy is not to be used: the
             * count must say so; else the bits must be the tiled launches' */
            snprintf(what, sizeof what,
                     "mxfp4_mma_stream F16 T=%d: the e5m2 copy (%d blocks out of reach; %s) gives the same bits",
                     T, bad, gptoss_mxfp4_mma_stream_f16_prestaged(H, P) ? "read" : "not read at this shape");
            mm_check(what, bad == 0 ? eq : bad > 0 && loose > 1.0, NULL);
            cudaFree(dact2); cudaFree(ddn2); cudaFree(ebuf);
        }
        cudaFree(dstage);
        cudaFree(tbuf);
        snprintf(what, sizeof what, "mxfp4_mma_stream F16 T=%d: pre-staged rows (%s; and the tiled weights) give the same bits", T,
                 gptoss_mxfp4_mma_stream_f16_prestaged(H, P) ? "read" : "not read at this shape");
        mm_check(what, same_pre, NULL);
        snprintf(what, sizeof what, "mxfp4_mma_stream F16 T=%d", T);
        mm_check_against(what, L, ids, pair_of, step, ref_act, a0, d0, wr.data(), 5e-6 * loose);
        snprintf(what, sizeof what, "mxfp4_mma_stream F16 T=%d: the same bits with 8-, 16- and 32-pair tiles, swizzled x, every occupancy mode, the tiled weights, the decode's scale tables off", T);
        mm_check(what, same, NULL);
        cudaFree(dxs); cudaFree(dgsh); cudaFree(ddsh);
    }
    /* token T-1 alone (its 4 pairs, same experts): bit for bit the batched result */
    if (T > 1) {
        std::vector<int32_t> ids1(ids.end() - 4, ids.end());
        mm_route r1;
        mm_route_make(&r1, ids1, 1, E);
        float *dx1 = dev_upload(std::vector<float>(x.end() - H, x.end()));
        float *dact1 = dev_poison((size_t)4 * I), *ddn1 = dev_poison((size_t)4 * H);
        mm_run(L, &r1, dx1, 0, dact1, ddn1);
        auto act1 = dev_download(dact1, (size_t)4 * I);
        auto dn1 = dev_download(ddn1, (size_t)4 * H);
        auto pof1 = dev_download(r1.pair_of, 4);
        int same = 1;
        for (int k = 0; k < 4; k++) {
            const int pb = pair_of[(size_t)(T - 1) * 4 + k], pa = pof1[k];
            same &= !memcmp(&act[(size_t)pb * I], &act1[(size_t)pa * I], (size_t)I * 4);
            same &= !memcmp(&dn[(size_t)pb * H], &dn1[(size_t)pa * H], (size_t)H * 4);
        }
        snprintf(what, sizeof what, "mxfp4_mma T=%d: the last token alone gives the same bits as in the batch", T);
        mm_check(what, same, NULL);
        mm_route_free(&r1);
        cudaFree(dx1); cudaFree(dact1); cudaFree(ddn1);
    }
    mm_route_free(&r);
    cudaFree(dx); cudaFree(dact); cudaFree(ddn);
}


/* The MoE experts of one layer at T tokens, new kernel beside the path it replaces. T <= 64: the
 * batched decode step's MoE (router + experts + combine; old = the fused decode kernels, new = the
 * streaming tensor-core kernel the scheduler runs from LLMR_GPTOSS_MOE_MMA_MIN_ROWS rows); T > 64: the
 * prefill experts after routing (new = gptoss_mxfp4_mma, old = tc.cu: count copy, dequantize + cuBLAS
 * per expert, swiglu). */
static void time_mma(int T, const mm_layer *L) {
    const int E = L->E, H = L->H, I = L->I, P = T * 4;
    const float alpha = 1.702f, limit = 7.0f, eps = 1e-5f;
    std::vector<float> x((size_t)T * H);
    for (auto &v : x) v = nrand();
    float *dx = dev_upload(x), *dact = dev_poison((size_t)P * I), *ddn = dev_poison((size_t)P * H);
    auto ids = mm_ids(T, E, 0);
    mm_route r;
    mm_route_make(&r, ids, T, E);
    double t_new = 0, t_old = 0;
    const int reps = T >= 512 ? 5 : 20;
    if (T <= GPTOSS_DECODE_MAX_T) {
        std::vector<uint16_t> nw(H), rw((size_t)E * H), rb(E);
        for (auto &v : nw) v = f2bf(1.0f + 0.1f * nrand());
        for (auto &v : rw) v = f2bf(0.05f * nrand());
        for (auto &v : rb) v = f2bf(0.5f * nrand());
        uint16_t *dnw = dev_upload(nw), *drw = dev_upload(rw), *drb = dev_upload(rb);
        float *dhs = dev_poison((size_t)T * H), *dw = dev_poison((size_t)P), *drl = dev_poison((size_t)T * E);
        int32_t *dgrp, *dctr;
        CK(cudaMalloc((void **)&dgrp, gptoss_moe_groups_ints(T) * 4));
        CK(cudaMalloc((void **)&dctr, (1 + T) * 4));
        CK(cudaMemset(dctr, 0, (1 + T) * 4));
        t_old = tu_time_ms([&]() {
            CK(gptoss_moe_router_decode(dx, dnw, eps, drw, drb, T, H, E, dhs, r.ids, dw, dgrp, drl, dctr, 0));
            CK(gptoss_moe_gate_up_decode(dhs, dgrp, T, L->d_gub, L->d_gus, L->d_gbias, E, H, I, alpha, limit, dact, 0));
            CK(gptoss_moe_down_decode(dact, dgrp, T, dw, L->d_dnb, L->d_dns, L->d_dbias, E, I, H, dx, 0));
        }, reps);
        /* the batched step's tensor-core MoE as the engine runs it (scheduler.cu: the streaming kernel, 3 parts,
         * automatic shape), and its experts alone, so the router + route + combine share shows */
        auto experts = [&]() {
            CK(gptoss_mxfp4_mma_stream(dhs, H, 1, r.pair_token, L->d_gub, L->d_gus, L->d_gbias, r.counts, r.offsets, E, H,
                                        2 * I, 1, alpha, limit, P, 3, 0, dact, 0));
            CK(gptoss_mxfp4_mma_stream(dact, I, 0, NULL, L->d_dnb, L->d_dns, L->d_dbias, r.counts, r.offsets, E, I, H, 0,
                                        0.0f, 0.0f, P, 3, 0, ddn, 0));
        };
        t_new = tu_time_ms([&]() {
            CK(gptoss_moe_router_decode(dx, dnw, eps, drw, drb, T, H, E, dhs, r.ids, dw, dgrp, drl, dctr, 0));
            CK(gptoss_moe_route(r.ids, T, E, r.counts, r.offsets, r.pair_token, r.pair_of, 0));
            experts();
            CK(gptoss_moe_combine(ddn, dw, r.pair_of, T, H, dx, 0));
        }, reps);
        const double t_exp = tu_time_ms(experts, reps);
        printf("     T=%d: tensor-core MoE block %.3f ms = experts %.3f + router, route, combine %.3f\n", T, t_new, t_exp,
               t_new - t_exp);
        cudaFree(dnw); cudaFree(drw); cudaFree(drb); cudaFree(dhs); cudaFree(dw); cudaFree(drl);
        cudaFree(dgrp); cudaFree(dctr);
    } else {
        gptoss_tc tc;
        memset(&tc, 0, sizeof tc);
        void *ws = NULL;
        CK(cudaMalloc(&ws, GPTOSS_TC_CUBLAS_WS));
        char err[256];
        if (gptoss_tc_init(&tc, 0, 2, ws, err, sizeof err)) { fprintf(stderr, "gptoss_tc_init: %s\n", err); exit(1); }
        tc.no_batched = 1;
        tc.fast_dequant = 1;
        tc.xs_elems = gptoss_tc_xs_elems(T, 2, H, H, I, 0);
        tc.ys_elems = gptoss_tc_ys_elems(T, 2, H, H, I, E);
        tc.wbf_elems = gptoss_tc_wbf_elems(H, I, 1);
        CK(cudaMalloc((void **)&tc.xs, tc.xs_elems * 2));
        CK(cudaMalloc((void **)&tc.ys, tc.ys_elems * 4));
        CK(cudaMalloc((void **)&tc.wbf, tc.wbf_elems * 2));
        float *dgu = dev_poison((size_t)P * 2 * I);
        t_old = tu_time_ms([&]() {
            CK(gptoss_tc_fetch_counts(&tc, r.counts, E));
            CK(gptoss_tc_experts(&tc, dx, H, r.pair_token, L->d_gub, L->d_gus, NULL, L->d_gbias, r.counts, r.offsets, E, P, H,
                                  2 * I, dgu));
            CK(gptoss_swiglu(dgu, P, I, alpha, limit, dact, 0));
            CK(gptoss_tc_experts(&tc, dact, I, NULL, L->d_dnb, L->d_dns, NULL, L->d_dbias, r.counts, r.offsets, E, P, I, H,
                                  ddn));
        }, reps);
        t_new = tu_time_ms([&]() { mm_run(L, &r, dx, 0, dact, ddn); }, reps);
        const double t_gu = tu_time_ms([&]() {
            CK(gptoss_mxfp4_mma(dx, H, 0, r.pair_token, L->d_gub, L->d_gus, L->d_gbias, r.counts, r.offsets, E, H, 2 * I,
                                 1, alpha, limit, dact, 0));
        }, reps);
        const double flop = 2.0 * 2.0 * (double)P * ((double)2 * I * H + (double)H * I); /* x2: hi and lo */
        printf("     T=%d: gate_up alone %.3f ms; both %.1f TFLOP/s of tensor work (hi + lo)\n", T, t_gu,
               flop / (t_new * 1e-3) / 1e12);
        cudaFree(dgu); cudaFree(tc.xs); cudaFree(tc.ys); cudaFree(tc.wbf); cudaFree(ws);
        gptoss_tc_destroy(&tc);
    }
    auto counts = dev_download(r.counts, (size_t)E);
    int touched = 0;
    for (int e = 0; e < E; e++) touched += counts[e] > 0;
    const double bytes = (double)touched * ((double)2 * I * H + (double)H * I) * (17.0 / 32.0);
    printf("time MoE T=%-4d E=%d H=%d I=%d: new %.3f ms (%.2f TB/s of touched experts), old %s %.3f ms, x%.2f\n",
           T, E, H, I, t_new, bytes / (t_new * 1e-3) / 1e12, T <= GPTOSS_DECODE_MAX_T ? "fused decode" : "tc dequant+cuBLAS",
           t_old, t_old / t_new);
    mm_route_free(&r);
    cudaFree(dx); cudaFree(dact); cudaFree(ddn);
}

/* The prompt kernel (gptoss_mxfp4_prompt_gemm, warpgroup MMA, B from shared memory) on a batched step's pairs: every
 * pair a precise row (its activation's two fp16 parts, as the step's experts take them), so an expert's rows are 2 x its
 * pairs; gate_up then down, on the MXFP4 tiles and on the e5m2 copy. Products only (no SwiGLU or parts' sum between):
 * what the step's expert GEMMs would cost on that kernel. */
static void time_prompt_kernel(const mm_layer *L, const mm_route &r, int P, const int32_t *dgsh, const int32_t *ddsh,
                               const gptoss_mxfp4_tiled *gt, const gptoss_mxfp4_tiled *dt, const gptoss_mxfp4_tiled *ge,
                               const gptoss_mxfp4_tiled *de, int reps) {
    const int E = L->E, H = L->H, I = L->I, rows = 2 * P, kr = gptoss_prompt_row(H > I ? H : I);
    auto c = dev_download(r.counts, (size_t)E), o = dev_download(r.offsets, (size_t)E);
    std::vector<int32_t> c2(2 * (size_t)E), o2(2 * (size_t)E);
    for (int e = 0; e < E; e++) c2[e] = c2[E + e] = c[e], o2[e] = o2[E + e] = o[e];
    std::vector<uint16_t> xs((size_t)rows * kr);
    for (auto &v : xs) v = (uint16_t)(0x3000u + (rand() & 0x3FFu)); /* fp16 in [0.125, 0.25) */
    uint16_t *dxs = dev_upload(xs);
    int32_t *dc2 = dev_upload(c2), *do2 = dev_upload(o2);
    float *ys = dev_poison((size_t)rows * 2 * I), *yd = dev_poison((size_t)rows * H);
    cudaError_t err = cudaSuccess;
    auto run = [&](const gptoss_mxfp4_tiled *g, const gptoss_mxfp4_tiled *d) {
        return [&, g, d]() {
            cudaError_t e1 = gptoss_mxfp4_prompt_gemm(dxs, g, dgsh, dc2, do2, 1, E, rows, H, 2 * I, 1, ys, 0);
            cudaError_t e2 = gptoss_mxfp4_prompt_gemm(dxs, d, ddsh, dc2, do2, 1, E, rows, I, H, 0, yd, 0);
            if (err == cudaSuccess) err = e1 != cudaSuccess ? e1 : e2;
        };
    };
    const double t1 = tu_time_ms(run(gt, dt), reps), u1 = tu_time_ms(run(ge, de), reps), u2 = tu_time_ms(run(ge, de), reps),
                 t2 = tu_time_ms(run(gt, dt), reps);
    printf("; the prompt kernel on the step's pairs (precise rows, products only) %.3f / %.3f ms, on the e5m2 copy %.3f / "
           "%.3f ms (%s)", t1, t2, u1, u2, cudaGetErrorString(err));
    cudaFree(dxs); cudaFree(dc2); cudaFree(do2); cudaFree(ys); cudaFree(yd);
}

/* The experts alone (gate_up + down after routing) at T tokens: gptoss_mxfp4_mma beside
 * gptoss_mxfp4_mma_stream in several shapes, as ms and TB/s of the touched experts' bytes. */
static void time_stream(int T, const mm_layer *L) {
    const int E = L->E, H = L->H, I = L->I, P = T * 4;
    std::vector<float> x((size_t)T * H);
    for (auto &v : x) v = nrand();
    float *dx = dev_upload(x), *dact = dev_poison((size_t)P * I), *ddn = dev_poison((size_t)P * H);
    auto ids = mm_ids(T, E, 0);
    mm_route r;
    mm_route_make(&r, ids, T, E);
    auto counts = dev_download(r.counts, (size_t)E);
    int touched = 0;
    for (int e = 0; e < E; e++) touched += counts[e] > 0;
    const double bytes = (double)touched * ((double)2 * I * H + (double)H * I) * (17.0 / 32.0);
    const int reps = T >= 512 ? 5 : 50;
    const double t_old = tu_time_ms([&]() { mm_run(L, &r, dx, 0, dact, ddn); }, reps);
    printf("time experts T=%-4d (%d experts touched): mxfp4_mma %.3f ms (%.2f TB/s)", T, touched, t_old,
           bytes / (t_old * 1e-3) / 1e12);
    { /* the automatic shape, bf16 with 2 parts against the F16 form, in the order A B B A (a later slot runs faster) */
        int32_t *dgsh, *ddsh;
        mm_f16_shifts(L, &dgsh, &ddsh);
        uint8_t *dstage;
        CK(cudaMalloc((void **)&dstage, mm_stage_bytes(P, H, I)));
        auto f16 = [&]() { mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, NULL, dact, ddn); };
        void *tbuf0;
        gptoss_mxfp4_tiled gt0, dt0;
        mm_tiled(L, &tbuf0, &gt0, &dt0);
        auto f16_t = [&]() { mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, NULL, dact, ddn, &gt0, &dt0); };
        const double e1 = tu_time_ms(f16_t, reps), e2 = tu_time_ms(f16_t, reps);
        cudaFree(tbuf0);
        printf("; F16 (not pre-staged) with the tiled weights %.3f / %.3f ms (%.2f TB/s)", e1, e2, bytes / (fmin(e1, e2) * 1e-3) / 1e12);
        auto f16_pre = [&]() { mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, dstage, dact, ddn); };
        void *tbuf;
        gptoss_mxfp4_tiled gt, dt;
        mm_tiled(L, &tbuf, &gt, &dt);
        auto f16_tiled = [&]() { mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, dstage, dact, ddn, &gt, &dt); };
        int e5_bad = -1;
        gptoss_mxfp4_tiled ge = gt, de = dt;
        void *ebuf = mxfp4_tiled_e5_pair(&ge, &de, dgsh, ddsh, L->E, L->H, L->I, &e5_bad);
        auto f16_e5 = [&]() { mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, dstage, dact, ddn, &ge, &de); };
        auto bf16 = [&]() { mm_run_with(L, &r, dx, 0, dact, ddn, P, 0, 2); };
        const double a1 = tu_time_ms(bf16, reps), b1 = tu_time_ms(f16, reps), c1 = tu_time_ms(f16_pre, reps),
                     d1 = tu_time_ms(f16_tiled, reps), g1 = tu_time_ms(f16_e5, reps), g2 = tu_time_ms(f16_e5, reps),
                     d2 = tu_time_ms(f16_tiled, reps), c2 = tu_time_ms(f16_pre, reps), b2 = tu_time_ms(f16, reps),
                     a2 = tu_time_ms(bf16, reps);
        if (gptoss_mxfp4_prompt_gemm_ok()) time_prompt_kernel(L, r, P, dgsh, ddsh, &gt, &dt, &ge, &de, reps);
        if (gptoss_mxfp4_mma_stream_f16_prestaged(H, P)) { /* the batched steps' forms, each launch alone */
            const double gub = (double)touched * 2 * I * H, dnb = (double)touched * H * I; /* weights */
            mm_time_f16_launches("the e5m2 copy", L, &r, dx, dgsh, ddsh, P, dstage, dact, ddn, &ge, &de, gub, dnb, reps);
            mm_time_f16_launches("the MXFP4 tiles", L, &r, dx, dgsh, ddsh, P, dstage, dact, ddn, &gt, &dt,
                                 gub * 17.0 / 32.0, dnb * 17.0 / 32.0, reps);
        }
        cudaFree(ebuf);
        cudaFree(tbuf);
        printf("; the e5m2 copy (%d blocks out of reach) %.3f / %.3f ms (%.2f TB/s of its bytes)", e5_bad, g1, g2,
               32.0 / 17.0 * bytes / (fmin(g1, g2) * 1e-3) / 1e12);
        printf("; auto bf16 p2 %.3f / %.3f ms, F16 %.3f / %.3f ms (%.2f TB/s), F16 pre-staged%s %.3f / %.3f ms (%.2f TB/s), "
               "the same with the tiled weights %.3f / %.3f ms (%.2f TB/s)",
               a1, a2, b1, b2, bytes / (fmin(b1, b2) * 1e-3) / 1e12, gptoss_mxfp4_mma_stream_f16_prestaged(H, P) ? "" : " (not read)",
               c1, c2, bytes / (fmin(c1, c2) * 1e-3) / 1e12, d1, d2, bytes / (fmin(d1, d2) * 1e-3) / 1e12);
        /* the F16 form in mode 1 with 16- against 32-pair tiles (prompt chunks), A B B A */
        auto f16_tiles = [&](int nt) {
            return [&, nt]() {
                mm_stream_tiles(nt);
                gptoss_mxfp4_mma_stream_force_occ(1);
                mm_run_f16(L, &r, dx, 0, dgsh, ddsh, P, NULL, dact, ddn);
                gptoss_mxfp4_mma_stream_force_occ(0);
                mm_stream_tiles(0);
            };
        };
        const double t2a = tu_time_ms(f16_tiles(2), reps), t4a = tu_time_ms(f16_tiles(4), reps),
                     t4b = tu_time_ms(f16_tiles(4), reps), t2b = tu_time_ms(f16_tiles(2), reps);
        printf("; F16 occ1 tiles 2 %.3f / %.3f ms, tiles 4 %.3f / %.3f ms", t2a, t2b, t4a, t4b);
        cudaFree(dstage);
        cudaFree(dgsh);
        cudaFree(ddsh);
    }
    /* tiles (0 = auto), warps, parts, occupancy mode */
    const int shapes[15][4] = {{0, 0, 3, 1}, {1, 16, 3, 1}, {2, 16, 3, 1}, {0, 0, 2, 1}, {1, 16, 2, 1}, {2, 16, 2, 1},
                               {1, 16, 3, 2}, {2, 16, 3, 2}, {1, 8, 3, 3}, {2, 8, 3, 3}, {1, 16, 2, 2}, {1, 8, 2, 3},
                               {2, 8, 2, 3}, {1, 8, 3, 2}, {1, 12, 3, 2}};
    for (int sh = 0; sh < 15; sh++) {
        mm_stream_tiles(shapes[sh][0]);
        gptoss_mxfp4_mma_stream_force_occ(shapes[sh][3]);
        const double t = tu_time_ms([&]() { mm_run_with(L, &r, dx, 0, dact, ddn, P, shapes[sh][1], shapes[sh][2]); }, reps);
        gptoss_mxfp4_mma_stream_force_occ(0);
        mm_stream_tiles(0);
        printf("; stream tiles %d w%d p%d occ%d %.3f ms (%.2f TB/s)", shapes[sh][0], shapes[sh][1], shapes[sh][2],
               shapes[sh][3], t, bytes / (t * 1e-3) / 1e12);
    }
    for (int pc = 12; pc <= 16; pc += 4) /* longer staging phases in mode 2 (fewer barriers, 75 / 99 KB) */
        for (int parts = 3; parts >= 2; parts--) {
            mm_stream_tiles(1);
            gptoss_mxfp4_mma_stream_force_occ(2);
            gptoss_mxfp4_mma_stream_force_phase(pc);
            const double t = tu_time_ms([&]() { mm_run_with(L, &r, dx, 0, dact, ddn, P, 16, parts); }, reps);
            gptoss_mxfp4_mma_stream_force_phase(0);
            gptoss_mxfp4_mma_stream_force_occ(0);
            mm_stream_tiles(0);
            printf("; stream tiles 1 w16 p%d occ2 phase %d %.3f ms (%.2f TB/s)", parts, pc, t, bytes / (t * 1e-3) / 1e12);
        }
    printf("\n");
    mm_route_free(&r);
    cudaFree(dx); cudaFree(dact); cudaFree(ddn);
}

/* gptoss_kernels --moe-timing T...: only the expert timings at the 20b's shapes (for profilers). */
void gptoss_moe_mma_timing(int n, char **Ts) {
    mm_layer b;
    mm_layer_make(&b, 32, 2880, 2880);
    for (int i = 0; i < n; i++) {
        const int T = atoi(Ts[i]);
        if (T >= 1 && T <= GPTOSS_DECODE_MAX_T) time_mma(T, &b); /* the whole MoE block, fused decode vs tensor cores */
        time_stream(T, &b);
    }
    mm_layer_free(&b);
}

void gptoss_moe_mma_checks(int *checks, int *failed) {
    test_mma_table();
    mm_layer s;
    mm_layer_make(&s, 16, 96, 64);
    test_mma(1, &s, 0, 1 << 30);
    test_mma(5, &s, 0, 1 << 30);
    test_mma(64, &s, 1, 1 << 30); /* expert 0 takes all 64 tokens: two passes of 32 */
    test_mma(512, &s, 0, 1 << 30);
    mm_layer_free(&s);
    mm_layer o; /* odd sizes: N not a multiple of the 128-row tile, K not of the 256-value pass */
    mm_layer_make(&o, 6, 160, 96);
    test_mma(37, &o, 1, 1 << 30);
    mm_layer_free(&o);
    mm_layer w; /* scales over 41 binades: the bf16 form's slow decode, the F16 form's subnormal and flushed blocks */
    mm_layer_make(&w, 6, 160, 96, 96, 41);
    test_mma(21, &w, 0, 1 << 30, 4.0); /* both forms ~2.5e-6 on the H100 (session 19 call 3) */
    mm_layer_free(&w);
    mm_layer b; /* gpt-oss-20b's shapes */
    mm_layer_make(&b, 32, 2880, 2880);
    test_mma(1, &b, 0, 4);
    test_mma(64, &b, 0, 12);
    test_mma(512, &b, 1, 12);
    const int Ts[] = {1, 8, 64, 512, 4096};
    for (int i = 0; i < 5; i++) time_mma(Ts[i], &b);
    const int Ts2[] = {1, 2, 4, 8, 16, 32, 64, 128, 512};
    for (int i = 0; i < 9; i++) time_stream(Ts2[i], &b);
    mm_layer_free(&b);
    *checks += tu_checks;
    *failed += tu_failed;
}
