/* test_tc — the tensor-core prefill matmuls of tc.cu (split fp32 activations, cuBLAS bf16 GEMMs,
 * exact MXFP4 dequantization) against plain CPU loops in double precision. Linked into the
 * gptoss_kernels binary; its main calls gptoss_tc_checks. Bounds: S = 2 parts leave ~2^-18 of each
 * activation unrepresented, so 1e-5 relative L2; S = 3 is fp32-level, 2e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "engines/gptoss_cuda/attention_tc.cu"
#include "engines/gptoss_cuda/tc.cu"
extern "C" {
#include "common/gptoss/config.h"
}

static int t_failed = 0, t_checks = 0;

#define TCK(call)                                                                                 \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static uint64_t t_rng = 0x7e57c0deull;
static uint64_t t_rnd64(void) {
    uint64_t z = (t_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double t_urand(void) { return (double)(t_rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static float t_nrand(void) {
    double u1 = t_urand() + 1e-12, u2 = t_urand();
    return (float)(sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}
static uint16_t t_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float t_bf2f(uint16_t b) { return gptoss_bf16_to_f32(b); }
static std::vector<float> t_randv(size_t n, float sc) {
    std::vector<float> v(n);
    for (auto &x : v) x = t_nrand() * sc;
    return v;
}
static std::vector<uint16_t> t_randbf(size_t n, float sc) {
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = t_f2bf(t_nrand() * sc);
    return v;
}
template <typename T> static T *t_up(const std::vector<T> &h) {
    T *d = NULL;
    TCK(cudaMalloc((void **)&d, h.size() * sizeof(T) + 16));
    TCK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
static float *t_poison(size_t n) {
    float *d = NULL;
    TCK(cudaMalloc((void **)&d, n * sizeof(float) + 16));
    TCK(cudaMemset(d, 0xff, n * sizeof(float)));
    return d;
}
template <typename T> static std::vector<T> t_down(const T *d, size_t n) {
    std::vector<T> h(n);
    TCK(cudaDeviceSynchronize());
    TCK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
static void t_check_rel(const char *what, const std::vector<float> &got, const std::vector<double> &ref, double bound) {
    double num = 0, den = 0;
    int nan = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (!isfinite(got[i])) nan = 1;
        const double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const int ok = !nan && rel <= bound;
    t_checks++;
    if (!ok) t_failed++;
    printf("%-4s %-58s rel L2 %.2e (bound %.0e)%s\n", ok ? "ok" : "FAIL", what, rel, bound, nan ? " NaN/unwritten" : "");
}
static void t_check_true(const char *what, int ok) {
    t_checks++;
    if (!ok) t_failed++;
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
}

/* A tc context with scratch for `chunk` tokens; returns the cuBLAS workspace (tc_free frees both). */
static void *tc_make(gptoss_tc *tc, int chunk, int S, int H, int QD, int I, int E) {
    memset(tc, 0, sizeof *tc);
    void *ws = NULL;
    TCK(cudaMalloc(&ws, GPTOSS_TC_CUBLAS_WS));
    char err[256];
    if (gptoss_tc_init(tc, 0, S, ws, err, sizeof err)) {
        fprintf(stderr, "gptoss_tc_init: %s\n", err);
        exit(1);
    }
    tc->xs_elems = gptoss_tc_xs_elems(chunk, S, H, QD, I, 1);
    tc->ys_elems = gptoss_tc_ys_elems(chunk, S, H, QD, I, E);
    tc->wbf_elems = gptoss_tc_wbf_elems(H, I, E);
    TCK(cudaMalloc((void **)&tc->xs, tc->xs_elems * 2));
    TCK(cudaMalloc((void **)&tc->ys, tc->ys_elems * 4));
    TCK(cudaMalloc((void **)&tc->wbf, tc->wbf_elems * 2));
    TCK(cudaMemset(tc->ys, 0xff, tc->ys_elems * 4)); /* NaN: a row no GEMM wrote poisons the result */
    tc->why[0] = 0;
    return ws;
}
static void tc_free(gptoss_tc *tc, void *ws) {
    cudaFree(tc->xs); cudaFree(tc->ys); cudaFree(tc->wbf); cudaFree(ws);
    gptoss_tc_destroy(tc);
}

/* ------------------------------------------------------------ dense linear */
static void test_tc_linear(int T, int K, int N, int with_bias, int accumulate, int S, int ldy_pad) {
    gptoss_tc tc;
    void *ws = tc_make(&tc, T, S, K, K, 32, 32);
    if (tc.ys_elems < (size_t)S * T * N) { /* N larger than the model shapes: grow ys */
        cudaFree(tc.ys);
        tc.ys_elems = (size_t)S * T * N;
        TCK(cudaMalloc((void **)&tc.ys, tc.ys_elems * 4));
    }
    const int ldy = N + ldy_pad;
    auto x = t_randv((size_t)T * K, 1.0f);
    auto W = t_randbf((size_t)N * K, 0.05f);
    auto b = t_randbf(N, 0.5f);
    auto y0 = t_randv((size_t)T * ldy, 1.0f);
    float *dx = t_up(x), *dy = accumulate ? t_up(y0) : t_poison((size_t)T * ldy);
    uint16_t *dW = t_up(W), *db = t_up(b);
    TCK(gptoss_tc_linear(&tc, dx, K, dW, with_bias ? db : NULL, T, K, N, dy, ldy, accumulate));
    auto yall = t_down(dy, (size_t)T * ldy);
    std::vector<float> y((size_t)T * N);
    std::vector<double> ref((size_t)T * N);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = with_bias ? t_bf2f(b[n]) : 0.0;
            for (int k = 0; k < K; k++) s += (double)x[(size_t)t * K + k] * t_bf2f(W[(size_t)n * K + k]);
            ref[(size_t)t * N + n] = s + (accumulate ? y0[(size_t)t * ldy + n] : 0.0);
            y[(size_t)t * N + n] = yall[(size_t)t * ldy + n];
        }
    char what[128];
    snprintf(what, sizeof what, "tc_linear S=%d T=%d K=%d N=%d bias=%d acc=%d ldy=%d", S, T, K, N, with_bias, accumulate,
             ldy);
    t_check_rel(what, y, ref, S == 2 ? 1e-5 : 2e-6);
    cudaFree(dx); cudaFree(dy); cudaFree(dW); cudaFree(db);
    tc_free(&tc, ws);
}

/* ------------------------------------------------------------ MXFP4 */
static double t_mx_w(const std::vector<uint8_t> &blk, const std::vector<uint8_t> &sc, int N, int K, int e, int n, int k) {
    const size_t b = ((size_t)e * N + n) * (K / 32) + k / 32;
    const uint8_t byte = blk[b * 16 + (k % 32) / 2];
    const unsigned nib = (k % 2) ? (byte >> 4) : (byte & 15);
    return gptoss_fp4_value(nib) * ldexp(1.0, (int)sc[b] - 127);
}

/* The fp32 value of an MXFP4 element (fp4 x 2^(s-127) rounded as fp32 would: overflow to inf). */
static float t_mx_wf(const std::vector<uint8_t> &blk, const std::vector<uint8_t> &sc, int N, int K, int e, int n, int k) {
    const size_t b = ((size_t)e * N + n) * (K / 32) + k / 32;
    const uint8_t byte = blk[b * 16 + (k % 32) / 2];
    const unsigned nib = (k % 2) ? (byte >> 4) : (byte & 15);
    return ldexpf((float)gptoss_fp4_value(nib), (int)sc[b] - 127);
}

/* Dequantization must be exact: every bf16 equals the MXFP4 value as fp32 holds it, including tiny
 * and large scales (0: subnormal results; 253-254: 4 x 2^127 overflows to inf as in fp32; 255,
 * E8M0's NaN, which both kernels turn into fp4 x 2^128). */
static void test_dequant(int E, int N, int K, int fast) {
    std::vector<uint8_t> blk((size_t)E * N * (K / 32) * 16), sc((size_t)E * N * (K / 32));
    for (auto &v : blk) v = (uint8_t)t_rnd64();
    for (size_t i = 0; i < sc.size(); i++) sc[i] = (uint8_t)(i % 7 == 0 ? (t_rnd64() % 255) : 118 + t_rnd64() % 12);
    sc[0] = 0; sc[1] = 1; sc[2] = 254; sc[3] = 255;
    uint8_t *db = t_up(blk), *ds = t_up(sc);
    uint16_t *dw = NULL;
    TCK(cudaMalloc((void **)&dw, (size_t)N * K * 2));
    int bad = 0;
    for (int e = 0; e < E; e++) {
        TCK(gptoss_mxfp4_dequant(db, ds, e, N, K, dw, fast, 0));
        auto w = t_down(dw, (size_t)N * K);
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                if (t_bf2f(w[(size_t)n * K + k]) != t_mx_wf(blk, sc, N, K, e, n, k)) bad++;
    }
    char what[128];
    snprintf(what, sizeof what, "mxfp4_dequant%s exact, E=%d N=%d K=%d (%d mismatches)", fast ? " (fast)" : "", E, N, K,
             bad);
    t_check_true(what, bad == 0);
    /* all experts at once; expert 1 has no tokens and must be left untouched (0xffff stays) */
    std::vector<int32_t> cnt(E, 3);
    if (E > 1) cnt[1] = 0;
    int32_t *dc = t_up(cnt);
    uint16_t *dall = NULL;
    TCK(cudaMalloc((void **)&dall, (size_t)E * N * K * 2));
    TCK(cudaMemset(dall, 0xff, (size_t)E * N * K * 2));
    TCK(gptoss_mxfp4_dequant_all(db, ds, dc, E, N, K, dall, fast, 0));
    auto wa = t_down(dall, (size_t)E * N * K);
    bad = 0;
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) {
                const uint16_t v = wa[((size_t)e * N + n) * K + k];
                if (cnt[e] == 0 ? v != 0xffff : t_bf2f(v) != t_mx_wf(blk, sc, N, K, e, n, k)) bad++;
            }
    snprintf(what, sizeof what, "mxfp4_dequant_all%s exact, unused expert untouched, E=%d (%d mismatches)",
             fast ? " (fast)" : "", E, bad);
    t_check_true(what, bad == 0);
    cudaFree(dc); cudaFree(dall);
    cudaFree(db); cudaFree(ds); cudaFree(dw);
}

/* The whole MoE block through the tensor-core path: route, counts to the host, gate_up, SwiGLU, down,
 * weighted gather into a residual. */
static void test_tc_moe(int T, int H, int I, int E, int S, int no_batched, int fast = 0) {
    const float alpha = 1.702f, limit = 7.0f;
    auto x = t_randv((size_t)T * H, 1.0f);
    auto rl = t_randv((size_t)T * E, 1.0f);
    std::vector<uint8_t> gub((size_t)E * 2 * I * (H / 32) * 16), gus((size_t)E * 2 * I * (H / 32));
    std::vector<uint8_t> dnb((size_t)E * H * (I / 32) * 16), dns((size_t)E * H * (I / 32));
    for (auto &v : gub) v = (uint8_t)t_rnd64();
    for (auto &v : dnb) v = (uint8_t)t_rnd64();
    for (auto &v : gus) v = (uint8_t)(120 + t_rnd64() % 6);
    for (auto &v : dns) v = (uint8_t)(120 + t_rnd64() % 6);
    auto gbias = t_randbf((size_t)E * 2 * I, 0.5f), dbias = t_randbf((size_t)E * H, 0.5f);
    auto x0 = t_randv((size_t)T * H, 1.0f);
    gptoss_tc tc;
    /* mode (no_batched): 0 batched, scratch as for a larger chunk so the padded layout fits even at
     * small T; 1 per-expert GEMMs forced; 2 scratch for exactly T (the padding may not fit: fallback) */
    void *ws = tc_make(&tc, no_batched ? T : 4 * T + 64, S, H, H, I, E);
    tc.no_batched = no_batched == 1;
    tc.fast_dequant = fast;
    float *dx = t_up(x), *drl = t_up(rl), *dres = t_up(x0);
    uint8_t *dgub = t_up(gub), *dgus = t_up(gus), *ddnb = t_up(dnb), *ddns = t_up(dns);
    uint16_t *dgb = t_up(gbias), *ddb = t_up(dbias);
    const int P = T * 4;
    float *dw = t_poison((size_t)P), *dgu = t_poison((size_t)P * 2 * I), *dact = t_poison((size_t)P * I),
          *ddn = t_poison((size_t)P * H);
    int32_t *dids, *dcnt, *doff, *dpt, *dpo;
    TCK(cudaMalloc((void **)&dids, P * 4)); TCK(cudaMalloc((void **)&dcnt, E * 4)); TCK(cudaMalloc((void **)&doff, E * 4));
    TCK(cudaMalloc((void **)&dpt, P * 4)); TCK(cudaMalloc((void **)&dpo, P * 4));
    TCK(gptoss_router_topk(drl, T, E, dids, dw, 0));
    TCK(gptoss_moe_route(dids, T, E, dcnt, doff, dpt, dpo, 0));
    TCK(gptoss_tc_fetch_counts(&tc, dcnt, E));
    TCK(gptoss_tc_experts(&tc, dx, H, dpt, dgub, dgus, dgb, dcnt, doff, E, P, H, 2 * I, dgu));
    TCK(gptoss_swiglu(dgu, P, I, alpha, limit, dact, 0));
    TCK(gptoss_tc_experts(&tc, dact, I, NULL, ddnb, ddns, ddb, dcnt, doff, E, P, I, H, ddn));
    TCK(gptoss_moe_combine(ddn, dw, dpo, T, H, dres, 0));
    auto out = t_down(dres, (size_t)T * H);
    auto ids = t_down(dids, (size_t)P);
    auto w = t_down(dw, (size_t)P);
    /* counts that do not sum to P (not fetched for this routing) are refused */
    tc.counts_host[0] += 1;
    t_check_true("tc_experts refuses counts that do not match the routing",
                 gptoss_tc_experts(&tc, dx, H, dpt, dgub, dgus, dgb, dcnt, doff, E, P, H, 2 * I, dgu) ==
                     cudaErrorInvalidValue);

    std::vector<double> ref((size_t)T * H);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) ref[(size_t)t * H + h] = x0[(size_t)t * H + h];
        for (int k = 0; k < 4; k++) {
            const int e = ids[t * 4 + k];
            std::vector<double> act(I);
            for (int j = 0; j < I; j++) {
                double g = t_bf2f(gbias[(size_t)e * 2 * I + 2 * j]), u = t_bf2f(gbias[(size_t)e * 2 * I + 2 * j + 1]);
                for (int kk = 0; kk < H; kk++) {
                    g += x[(size_t)t * H + kk] * t_mx_w(gub, gus, 2 * I, H, e, 2 * j, kk);
                    u += x[(size_t)t * H + kk] * t_mx_w(gub, gus, 2 * I, H, e, 2 * j + 1, kk);
                }
                g = g < limit ? g : limit;
                u = u < -limit ? -limit : (u > limit ? limit : u);
                act[j] = g / (1.0 + exp(-alpha * g)) * (u + 1.0);
            }
            for (int h = 0; h < H; h++) {
                double y = t_bf2f(dbias[(size_t)e * H + h]);
                for (int j = 0; j < I; j++) y += act[j] * t_mx_w(dnb, dns, H, I, e, h, j);
                ref[(size_t)t * H + h] += w[t * 4 + k] * y;
            }
        }
    }
    char what[128];
    snprintf(what, sizeof what, "tc MoE (%s%s) S=%d T=%d H=%d I=%d E=%d",
             no_batched == 1 ? "per-expert GEMMs" : no_batched ? "tight scratch" : "batched GEMMs", fast ? ", fast dq" : "",
             S, T, H, I, E);
    t_check_rel(what, out, ref, S == 2 ? 1e-5 : 2e-6);
    cudaFree(dx); cudaFree(drl); cudaFree(dres); cudaFree(dgub); cudaFree(dgus); cudaFree(ddnb); cudaFree(ddns);
    cudaFree(dgb); cudaFree(ddb); cudaFree(dw); cudaFree(dgu); cudaFree(dact); cudaFree(ddn);
    cudaFree(dids); cudaFree(dcnt); cudaFree(doff); cudaFree(dpt); cudaFree(dpo);
    tc_free(&tc, ws);
}

/* ------------------------------------------------------------ attention on tensor cores */
static void test_attention_tc(int T, int pos0, int nh, int nkv, int window, float sink_scale) {
    const int D = 64, ctx = pos0 + T, kvd = nkv * D;
    auto q = t_randv((size_t)T * nh * D, 1.0f);
    auto kc = t_randv((size_t)ctx * kvd, 1.0f), vc = t_randv((size_t)ctx * kvd, 1.0f);
    auto sinks = t_randbf(nh, sink_scale);
    float *dq = t_up(q), *dout = t_poison((size_t)T * nh * D);
    uint16_t *ds = t_up(sinks);
    /* layer 1 of a 2-layer pool, pages in a shuffled order, a NaN spare page: only the block table
     * leads to the right rows */
    const int PG = GPTOSS_KV_PAGE, npages = (ctx + PG - 1) / PG + 1;
    const long long pf = 2LL * 2 * PG * kvd, loff = 2LL * PG * kvd;
    std::vector<int32_t> ids(npages);
    for (int i = 0; i < npages; i++) ids[i] = i;
    for (int i = npages - 1; i > 0; i--) std::swap(ids[i], ids[t_rnd64() % (uint64_t)(i + 1)]);
    std::vector<float> pool((size_t)npages * pf, NAN);
    for (int j = 0; j < ctx; j++) {
        const size_t base = (size_t)ids[j / PG] * pf + loff + (size_t)(j % PG) * kvd;
        memcpy(&pool[base], &kc[(size_t)j * kvd], kvd * sizeof(float));
        memcpy(&pool[base + (size_t)PG * kvd], &vc[(size_t)j * kvd], kvd * sizeof(float));
    }
    float *dpool = t_up(pool);
    int32_t *dtab = t_up(ids);
    gptoss_kv kv;
    kv.pool = dpool; kv.table = dtab; kv.max_pages = npages; kv.kvd = kvd; kv.page_floats = pf; kv.layer_off = loff;
    TCK(gptoss_attention_tc(dq, kv, ds, T, pos0, nh, nkv, window, dout, 0));
    auto out = t_down(dout, (size_t)T * nh * D);
    std::vector<double> ref((size_t)T * nh * D);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const int pos = pos0 + t, kh = h / (nh / nkv);
            const int lo = window > 0 ? (pos - window + 1 > 0 ? pos - window + 1 : 0) : 0;
            std::vector<double> s(pos + 1);
            double mx = t_bf2f(sinks[h]);
            for (int j = lo; j <= pos; j++) {
                double d = 0;
                for (int i = 0; i < D; i++) d += (double)q[((size_t)t * nh + h) * D + i] * kc[(size_t)j * kvd + kh * D + i];
                s[j] = d * 0.125;
                if (s[j] > mx) mx = s[j];
            }
            double den = exp(t_bf2f(sinks[h]) - mx);
            for (int j = lo; j <= pos; j++) den += exp(s[j] - mx);
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int j = lo; j <= pos; j++) o += exp(s[j] - mx) / den * vc[(size_t)j * kvd + kh * D + i];
                ref[((size_t)t * nh + h) * D + i] = o;
            }
        }
    char what[128];
    snprintf(what, sizeof what, "attention_tc T=%d pos0=%d heads=%d/%d window=%d sinks~%.0f", T, pos0, nh, nkv, window,
             sink_scale);
    t_check_rel(what, out, ref, 2e-5);
    cudaFree(dq); cudaFree(dpool); cudaFree(dtab); cudaFree(dout); cudaFree(ds);
}

/* Runs every check above; adds to the caller's counters. */
void gptoss_tc_checks(int *checks, int *failed) {
    test_dequant(3, 64, 96, 0);
    test_dequant(3, 64, 96, 1);
    test_dequant(2, 2880, 2880, 1); /* the 20b down_proj shape */
    test_tc_linear(32, 2880, 4096, 1, 0, 2, 0);  /* q_proj */
    test_tc_linear(100, 2880, 512, 1, 0, 2, 64); /* k_proj into a wider cache row */
    test_tc_linear(64, 4096, 2880, 1, 1, 2, 0);  /* o_proj into the residual */
    test_tc_linear(300, 2880, 32, 1, 0, 2, 0);   /* router */
    test_tc_linear(77, 256, 200, 0, 1, 3, 0);
    test_tc_moe(40, 64, 96, 8, 2, 0);
    test_tc_moe(40, 64, 96, 8, 2, 1);
    test_tc_moe(70, 256, 256, 16, 2, 0);
    test_tc_moe(70, 256, 256, 16, 2, 1);
    test_tc_moe(70, 256, 256, 16, 3, 0);
    test_tc_moe(70, 256, 256, 16, 3, 1);
    test_tc_moe(32, 2880, 256, 32, 2, 0); /* the 20b hidden size as K of gate_up */
    test_tc_moe(3, 64, 96, 32, 2, 2);     /* padding does not fit the scratch: falls back to per-expert GEMMs */
    test_tc_moe(9, 64, 96, 32, 2, 0);     /* batched with idle experts (skipped by the dequantization) */
    test_tc_moe(9, 64, 96, 32, 2, 0, 1);  /* the same with the fast dequantization */
    test_tc_moe(70, 256, 256, 16, 2, 1, 1);
    test_attention_tc(64, 0, 8, 2, 0, 1.0f);      /* one block of queries, from position 0 */
    test_attention_tc(70, 1000, 16, 2, 0, 1.0f);  /* a later chunk over a long cache, ragged T */
    test_attention_tc(200, 0, 64, 8, 128, 2.0f);  /* the 20b heads, sliding window */
    test_attention_tc(17, 300, 64, 8, 128, 3.0f); /* fewer queries than a block, window */
    test_attention_tc(33, 0, 4, 4, 5, 0.5f);      /* window shorter than a tile, MHA */
    test_attention_tc(40, 130, 8, 2, 64, 8.0f);   /* a dominant sink */
    *checks += t_checks;
    *failed += t_failed;
}
