/* test_util.h — what every file of the gptoss_kernels binary shares (each .cu in this folder is its own
 * translation unit linked into one binary; main() is in test_kernels.cu):
 *   CK(call)            a CUDA call that must succeed, else the run stops with file:line and the error;
 *   tu_checks/tu_failed this file's counts (its entry function adds them to main's totals);
 *   check_true, check_rel  one printed line per check ("ok"/"FAIL"), rel_L2 against a double reference;
 *   rnd64/urand/nrand   a splitmix64 stream seeded per file with TU_SEED (defined before including),
 *                       so each file's random data does not depend on the others;
 *   f2bf/bf2f           fp32 <-> bf16 (round to nearest even / exact);
 *   dev_upload/dev_poison/dev_download  device copies (poison = NaN: an unwritten output fails a check);
 *   randv/randbf        N(0, scale) vectors in fp32 / bf16;
 *   mx_w                one dequantized element of a checkpoint-layout MXFP4 tensor, in double;
 *   moe_case            a random, routed MoE block on the device and its CPU reference (below);
 *   attention_ref       attention with sinks and a window on the CPU in double;
 *   tu_time_ms          ms per call of a launch sequence on stream 0, after one warm-up call. */
#ifndef GPTOSS_TEST_UTIL_H
#define GPTOSS_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "engines/gptoss_cuda/kernels.h"
extern "C" {
#include "common/gptoss/config.h"
}

#ifndef TU_SEED
#error "define TU_SEED (this file's random seed) before including test_util.h"
#endif

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static int tu_checks = 0, tu_failed = 0;
static uint64_t tu_rng = TU_SEED;

static inline uint64_t rnd64(void) {
    uint64_t z = (tu_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double urand(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static inline float nrand(void) { /* ~N(0,1) */
    const double u1 = urand() + 1e-12, u2 = urand();
    return (float)(sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}
static inline uint16_t f2bf(float f) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t b) { return gptoss_bf16_to_f32(b); }

/* ms per call of f (launches on stream 0), averaged over reps calls after one warm-up call. */
template <typename F> static double tu_time_ms(F f, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    f();
    CK(cudaEventRecord(a, 0));
    for (int i = 0; i < reps; i++) f();
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

template <typename T> static T *dev_upload(const std::vector<T> &h) {
    T *d = NULL;
    CK(cudaMalloc((void **)&d, h.size() * sizeof(T) + 16));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
static inline float *dev_poison(size_t n) { /* NaN everywhere: unwritten outputs fail the check */
    float *d = NULL;
    CK(cudaMalloc((void **)&d, n * sizeof(float) + 16));
    CK(cudaMemset(d, 0xff, n * sizeof(float)));
    return d;
}
template <typename T> static std::vector<T> dev_download(const T *d, size_t n) {
    std::vector<T> h(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static inline void check_true(const char *what, int ok) {
    tu_checks++;
    if (!ok) tu_failed++;
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
}
/* Relative L2 error of got against ref over ref's elements: sqrt(sum (got - ref)^2 / sum ref^2), the absolute L2
 * error when ref is all zero. */
template <typename R> static double rel_l2(const std::vector<float> &got, const std::vector<R> &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const double d = (double)got[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static inline void check_rel(const char *what, const std::vector<float> &got, const std::vector<double> &ref,
                             double bound) {
    int nan = 0;
    for (size_t i = 0; i < ref.size(); i++)
        if (!isfinite(got[i])) nan = 1;
    const double rel = rel_l2(got, ref);
    const int ok = !nan && rel <= bound;
    tu_checks++;
    if (!ok) tu_failed++;
    printf("%-4s %-58s rel L2 %.2e (bound %.0e)%s\n", ok ? "ok" : "FAIL", what, rel, bound, nan ? " NaN/unwritten" : "");
}

static inline std::vector<float> randv(size_t n, float scale) {
    std::vector<float> v(n);
    for (auto &x : v) x = nrand() * scale;
    return v;
}
static inline std::vector<uint16_t> randbf(size_t n, float scale) {
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = f2bf(nrand() * scale);
    return v;
}

/* Dequantized W[e][n][k] of a checkpoint-layout MXFP4 tensor (blocks [E, N, K/32, 16], scales [E, N, K/32]). */
static inline double mx_w(const std::vector<uint8_t> &blk, const std::vector<uint8_t> &sc, int N, int K, int e, int n,
                          int k) {
    const size_t b = ((size_t)e * N + n) * (K / 32) + k / 32;
    const uint8_t byte = blk[b * 16 + (k % 32) / 2];
    const unsigned nib = (k % 2) ? (byte >> 4) : (byte & 15);
    return gptoss_fp4_value(nib) * ldexp(1.0, (int)sc[b] - 127);
}

/* A random MoE block for T tokens (H hidden, I intermediate, E experts; MXFP4 weights with scales near
 * 2^-5, bf16 biases, router logits, a residual x0), uploaded, routed on the device (gptoss_router_topk +
 * gptoss_moe_route into dids/dw/dcnt/doff/dpt/dpo) and with poisoned outputs dgu/dact/ddn; dres holds
 * x0 for the combine to add into. moe_case_ref is the whole block on the CPU in double from the device's
 * own routing: x0 + sum over each token's 4 slots of w * down(clamped SwiGLU(gate_up(x))). */
struct moe_case {
    int T, H, I, E, P;
    float alpha, limit;
    std::vector<float> x, rl, x0;
    std::vector<uint8_t> gub, gus, dnb, dns;
    std::vector<uint16_t> gbias, dbias;
    float *dx, *drl, *dres, *dw, *dgu, *dact, *ddn;
    uint8_t *dgub, *dgus, *ddnb, *ddns;
    uint16_t *dgb, *ddb;
    int32_t *dids, *dcnt, *doff, *dpt, *dpo;
};

static inline void moe_case_make(moe_case *c, int T, int H, int I, int E) {
    c->T = T; c->H = H; c->I = I; c->E = E; c->P = T * 4;
    c->alpha = 1.702f;
    c->limit = 7.0f;
    c->x = randv((size_t)T * H, 1.0f);
    c->rl = randv((size_t)T * E, 1.0f);
    c->gub.resize((size_t)E * 2 * I * (H / 32) * 16); c->gus.resize((size_t)E * 2 * I * (H / 32));
    c->dnb.resize((size_t)E * H * (I / 32) * 16); c->dns.resize((size_t)E * H * (I / 32));
    for (auto &v : c->gub) v = (uint8_t)rnd64();
    for (auto &v : c->dnb) v = (uint8_t)rnd64();
    for (auto &v : c->gus) v = (uint8_t)(120 + rnd64() % 6);
    for (auto &v : c->dns) v = (uint8_t)(120 + rnd64() % 6);
    c->gbias = randbf((size_t)E * 2 * I, 0.5f);
    c->dbias = randbf((size_t)E * H, 0.5f);
    c->x0 = randv((size_t)T * H, 1.0f); /* residual */
    c->dx = dev_upload(c->x); c->drl = dev_upload(c->rl); c->dres = dev_upload(c->x0);
    c->dgub = dev_upload(c->gub); c->dgus = dev_upload(c->gus); c->ddnb = dev_upload(c->dnb); c->ddns = dev_upload(c->dns);
    c->dgb = dev_upload(c->gbias); c->ddb = dev_upload(c->dbias);
    const int P = c->P;
    c->dw = dev_poison((size_t)P); c->dgu = dev_poison((size_t)P * 2 * I); c->dact = dev_poison((size_t)P * I);
    c->ddn = dev_poison((size_t)P * H);
    CK(cudaMalloc((void **)&c->dids, P * 4)); CK(cudaMalloc((void **)&c->dcnt, E * 4)); CK(cudaMalloc((void **)&c->doff, E * 4));
    CK(cudaMalloc((void **)&c->dpt, P * 4)); CK(cudaMalloc((void **)&c->dpo, P * 4));
    CK(gptoss_router_topk(c->drl, T, E, c->dids, c->dw, 0));
    CK(gptoss_moe_route(c->dids, T, E, c->dcnt, c->doff, c->dpt, c->dpo, 0));
}

static inline std::vector<double> moe_case_ref(const moe_case *c) {
    const int T = c->T, H = c->H, I = c->I;
    const auto ids = dev_download(c->dids, (size_t)c->P);
    const auto w = dev_download(c->dw, (size_t)c->P);
    std::vector<double> ref((size_t)T * H);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) ref[(size_t)t * H + h] = c->x0[(size_t)t * H + h];
        for (int k = 0; k < 4; k++) {
            const int e = ids[t * 4 + k];
            std::vector<double> act(I);
            for (int j = 0; j < I; j++) {
                double g = bf2f(c->gbias[(size_t)e * 2 * I + 2 * j]), u = bf2f(c->gbias[(size_t)e * 2 * I + 2 * j + 1]);
                for (int kk = 0; kk < H; kk++) {
                    g += c->x[(size_t)t * H + kk] * mx_w(c->gub, c->gus, 2 * I, H, e, 2 * j, kk);
                    u += c->x[(size_t)t * H + kk] * mx_w(c->gub, c->gus, 2 * I, H, e, 2 * j + 1, kk);
                }
                g = g < c->limit ? g : c->limit;
                u = u < -c->limit ? -c->limit : (u > c->limit ? c->limit : u);
                act[j] = g / (1.0 + exp(-c->alpha * g)) * (u + 1.0);
            }
            for (int h = 0; h < H; h++) {
                double y = bf2f(c->dbias[(size_t)e * H + h]);
                for (int j = 0; j < I; j++) y += act[j] * mx_w(c->dnb, c->dns, H, I, e, h, j);
                ref[(size_t)t * H + h] += w[t * 4 + k] * y;
            }
        }
    }
    return ref;
}

static inline void moe_case_free(moe_case *c) {
    cudaFree(c->dx); cudaFree(c->drl); cudaFree(c->dres); cudaFree(c->dgub); cudaFree(c->dgus); cudaFree(c->ddnb);
    cudaFree(c->ddns); cudaFree(c->dgb); cudaFree(c->ddb); cudaFree(c->dw); cudaFree(c->dgu); cudaFree(c->dact);
    cudaFree(c->ddn); cudaFree(c->dids); cudaFree(c->dcnt); cudaFree(c->doff); cudaFree(c->dpt); cudaFree(c->dpo);
}

/* The tiled copies (gptoss_mxfp4_tile) of E experts' gate_up [2I, H] (in its row order) and down [H, I], as the
 * engine holds them in place, in one allocation (returned; the caller frees it). */
static inline void *mxfp4_tiled_pair(const uint8_t *gub, const uint8_t *gus, const uint8_t *dnb, const uint8_t *dns, int E,
                                     int H, int I, gptoss_mxfp4_tiled *gt, gptoss_mxfp4_tiled *dt) {
    const size_t gb = (gptoss_mxfp4_tiled_bytes(E, 2 * I, H) + 255) / 256 * 256; /* down 16-byte aligned */
    void *buf = NULL;
    CK(cudaMalloc(&buf, gb + gptoss_mxfp4_tiled_bytes(E, H, I)));
    CK(gptoss_mxfp4_tile(gub, gus, E, 2 * I, H, 1, buf, gt, 0));
    CK(gptoss_mxfp4_tile(dnb, dns, E, H, I, 0, (uint8_t *)buf + gb, dt, 0));
    return buf;
}

/* The e5m2 copies (gptoss_mxfp4_tile_e5) of such a pair gt / dt with the experts' fp16 shifts gsh / dsh (device), in one
 * allocation (returned; the caller frees it), set into gt->e5 / dt->e5; *bad: the blocks outside the copy's reach (0:
 * usable). */
static inline void *mxfp4_tiled_e5_pair(gptoss_mxfp4_tiled *gt, gptoss_mxfp4_tiled *dt, const int32_t *gsh,
                                        const int32_t *dsh, int E, int H, int I, int *bad) {
    const size_t gu = gptoss_mxfp4_tiled_e5_bytes(E, 2 * I, H), dn = gptoss_mxfp4_tiled_e5_bytes(E, H, I);
    uint8_t *buf;
    int32_t *dbad;
    CK(cudaMalloc((void **)&buf, gu + dn));
    CK(cudaMalloc((void **)&dbad, 4));
    CK(cudaMemset(dbad, 0, 4));
    CK(gptoss_mxfp4_tile_e5(gt, gsh, E, 2 * I, H, buf, dbad, 0));
    CK(gptoss_mxfp4_tile_e5(dt, dsh, E, H, I, buf + gu, dbad, 0));
    CK(cudaMemcpy(bad, dbad, 4, cudaMemcpyDeviceToHost));
    cudaFree(dbad);
    gt->e5 = buf;
    dt->e5 = buf + gu;
    return buf;
}

/* A case's experts in that layout. */
struct moe_tiled {
    void *buf;
    gptoss_mxfp4_tiled gu, dn;
};

static inline void moe_tiled_make(const moe_case *c, moe_tiled *t) {
    t->buf = mxfp4_tiled_pair(c->dgub, c->dgus, c->ddnb, c->ddns, c->E, c->H, c->I, &t->gu, &t->dn);
}

static inline void moe_tiled_free(moe_tiled *t) { cudaFree(t->buf); }

/* A dense bf16 linear's case: x [T, K], W [N, K], b [N], y0 [T, ldy] (the residual when accumulating),
 * drawn in that order, and their device copies; dy holds y0 when accumulating, else NaN (poison). */
struct linear_case {
    int T, K, N, ldy, with_bias, accumulate;
    std::vector<float> x, y0;
    std::vector<uint16_t> W, b;
    float *dx, *dy;
    uint16_t *dW, *db;
};

static inline void linear_case_make(linear_case *c, int T, int K, int N, int ldy, int with_bias, int accumulate) {
    c->T = T; c->K = K; c->N = N; c->ldy = ldy; c->with_bias = with_bias; c->accumulate = accumulate;
    c->x = randv((size_t)T * K, 1.0f);
    c->W = randbf((size_t)N * K, 0.05f);
    c->b = randbf(N, 0.5f);
    c->y0 = randv((size_t)T * ldy, 1.0f);
    c->dx = dev_upload(c->x);
    c->dy = accumulate ? dev_upload(c->y0) : dev_poison((size_t)T * ldy);
    c->dW = dev_upload(c->W);
    c->db = dev_upload(c->b);
}

/* The bias pointer the case passes to the kernel: db, or NULL without bias. */
static inline const uint16_t *linear_case_bias(const linear_case *c) { return c->with_bias ? c->db : NULL; }

/* ref [T, N] = x W^T (+ b) (+ y0) in double. */
static inline std::vector<double> linear_case_ref(const linear_case *c) {
    std::vector<double> ref((size_t)c->T * c->N);
    for (int t = 0; t < c->T; t++)
        for (int n = 0; n < c->N; n++) {
            double s = c->with_bias ? bf2f(c->b[n]) : 0.0;
            for (int k = 0; k < c->K; k++) s += (double)c->x[(size_t)t * c->K + k] * bf2f(c->W[(size_t)n * c->K + k]);
            ref[(size_t)t * c->N + n] = s + (c->accumulate ? c->y0[(size_t)t * c->ldy + n] : 0.0);
        }
    return ref;
}

/* The first N columns of each of dy's T rows. */
static inline std::vector<float> linear_case_out(const linear_case *c) {
    const auto yall = dev_download(c->dy, (size_t)c->T * c->ldy);
    std::vector<float> y((size_t)c->T * c->N);
    for (int t = 0; t < c->T; t++)
        for (int n = 0; n < c->N; n++) y[(size_t)t * c->N + n] = yall[(size_t)t * c->ldy + n];
    return y;
}

static inline void linear_case_free(linear_case *c) {
    cudaFree(c->dx); cudaFree(c->dy); cudaFree(c->dW); cudaFree(c->db);
}

/* Attention with sinks on the CPU in double: T queries at positions pos0.. over keys 0..pos (or the last
 * `window`), K/V rows [ctx][n_kv * 64] contiguous, head h reading KV head h / (n_heads / n_kv), scale 1/8;
 * out [T][n_heads * 64]. */
static inline std::vector<double> attention_ref(const std::vector<float> &q, const std::vector<float> &kc,
                                                const std::vector<float> &vc, const std::vector<uint16_t> &sinks, int T,
                                                int pos0, int nh, int nkv, int window) {
    const int D = 64, kvd = nkv * D;
    std::vector<double> ref((size_t)T * nh * D);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const int pos = pos0 + t, kh = h / (nh / nkv);
            const int lo = window > 0 ? (pos - window + 1 > 0 ? pos - window + 1 : 0) : 0;
            std::vector<double> s(pos + 1);
            double mx = bf2f(sinks[h]);
            for (int j = lo; j <= pos; j++) {
                double d = 0;
                for (int i = 0; i < D; i++) d += (double)q[((size_t)t * nh + h) * D + i] * kc[(size_t)j * kvd + kh * D + i];
                s[j] = d * 0.125;
                if (s[j] > mx) mx = s[j];
            }
            double den = exp(bf2f(sinks[h]) - mx);
            for (int j = lo; j <= pos; j++) den += exp(s[j] - mx);
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int j = lo; j <= pos; j++) o += exp(s[j] - mx) / den * vc[(size_t)j * kvd + kh * D + i];
                ref[((size_t)t * nh + h) * D + i] = o;
            }
        }
    return ref;
}

#endif
