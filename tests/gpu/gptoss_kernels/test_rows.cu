/* test_rows.cu — gptoss_linear_rows (linear_rows.cu), the batched step's one-pass linear for 2..16 rows,
 * against a CPU loop in double precision: every row, every output, bias, accumulate into y, row strides
 * wider than K, N not a multiple of the rows per warp, and the largest T each K takes; a shape it cannot
 * take must be refused, not run. Timed at the 20b shapes (q_proj, lm_head) to compare with gemv<4>.
 * Linked into the gptoss_kernels binary; main() in test_kernels.cu calls gptoss_test_rows_kernels(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "engines/gptoss_cuda/linear_rows.cu"

static int r_checks, r_failed;

#define RCK(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void rcheck(const char *what, int ok) {
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
    r_checks++;
    if (!ok) r_failed++;
}

static uint64_t r_rng = 0x7065a1ull;
static float rrand(void) {
    r_rng ^= r_rng << 13; r_rng ^= r_rng >> 7; r_rng ^= r_rng << 17;
    return (float)((double)(r_rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static uint16_t r_bf16(float f) { /* truncation is fine: any bf16 value is a valid weight */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float r_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_rows(int T, int K, int N, int ldx, int ldy, int bias, int accumulate, int timed) {
    std::vector<float> x((size_t)T * ldx), y0((size_t)T * ldy);
    std::vector<uint16_t> W((size_t)N * K), b((size_t)N);
    for (auto &v : x) v = rrand();
    for (auto &v : y0) v = rrand();
    for (auto &v : W) v = r_bf16(rrand() * 0.05f);
    for (auto &v : b) v = r_bf16(rrand());
    float *dx, *dy;
    uint16_t *dW, *db;
    RCK(cudaMalloc((void **)&dx, x.size() * 4));
    RCK(cudaMalloc((void **)&dy, y0.size() * 4));
    RCK(cudaMalloc((void **)&dW, W.size() * 2));
    RCK(cudaMalloc((void **)&db, b.size() * 2));
    RCK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    RCK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    RCK(cudaMemcpy(dW, W.data(), W.size() * 2, cudaMemcpyHostToDevice));
    RCK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    RCK(gptoss_linear_rows(dx, ldx, dW, bias ? db : NULL, T, K, N, dy, ldy, accumulate, 0));
    std::vector<float> y(y0.size());
    RCK(cudaDeviceSynchronize());
    RCK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    int ok = 1;
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)x[(size_t)t * ldx + k] * r_f32(W[(size_t)n * K + k]);
                s += p;
                mag += fabs(p);
            }
            if (bias) s += r_f32(b[n]);
            if (accumulate) s += y0[(size_t)t * ldy + n];
            const double got = y[(size_t)t * ldy + n], err = fabs(got - s) / (mag + 1.0);
            if (!(err <= 2e-6)) ok = 0; /* NaN fails too */
            if (err > worst) worst = err;
        }
        for (int n = N; n < ldy; n++) /* the gap between rows is never written */
            if (y[(size_t)t * ldy + n] != y0[(size_t)t * ldy + n]) ok = 0;
    }
    char what[200];
    if (timed) {
        cudaEvent_t e0, e1;
        RCK(cudaEventCreate(&e0));
        RCK(cudaEventCreate(&e1));
        RCK(cudaEventRecord(e0, 0));
        for (int i = 0; i < 20; i++) RCK(gptoss_linear_rows(dx, ldx, dW, db, T, K, N, dy, ldy, 0, 0));
        RCK(cudaEventRecord(e1, 0));
        RCK(cudaEventSynchronize(e1));
        float ms = 0;
        RCK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = 1000.0 * ms / 20;
        snprintf(what, sizeof what, "linear_rows T=%d K=%d N=%d: rel err %.1e (%.1f us, %.2f TB/s of W)", T, K, N, worst,
                 us, (double)N * K * 2 / (us * 1e-6) / 1e12);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    } else {
        snprintf(what, sizeof what, "linear_rows T=%d K=%d N=%d ldx=%d ldy=%d bias=%d acc=%d: rel err %.1e", T, K, N,
                 ldx, ldy, bias, accumulate, worst);
    }
    rcheck(what, ok);
    cudaFree(dx); cudaFree(dy); cudaFree(dW); cudaFree(db);
}

void gptoss_test_rows_kernels(int *checks, int *failed) {
    test_rows(2, 64, 8, 64, 8, 1, 0, 0);
    test_rows(3, 2880, 517, 2884, 520, 1, 1, 0); /* strides wider than K / N, N % 4 != 0 */
    test_rows(5, 256, 1001, 256, 1001, 0, 0, 0);
    test_rows(8, 2880, 512, 2880, 512, 1, 0, 0);   /* k/v_proj */
    test_rows(11, 4096, 300, 4096, 300, 1, 1, 0);  /* o_proj into the residual */
    test_rows(12, 4096, 64, 4096, 64, 0, 0, 0);    /* the largest T at K = 4096 */
    test_rows(16, 2880, 999, 2880, 999, 1, 0, 0);  /* the largest T */
    test_rows(13, 8, 3, 8, 3, 1, 0, 0);            /* one chunk of K */
    {
        /* refused: more rows than the shared memory holds, a misaligned row stride */
        const int ok = gptoss_linear_rows((const float *)256, 4096, (const uint16_t *)256, NULL, 13, 4096, 8,
                                          (float *)256, 8, 0, 0) == cudaErrorInvalidValue &&
                       gptoss_linear_rows((const float *)256, 2882, (const uint16_t *)256, NULL, 2, 2880, 8,
                                          (float *)256, 8, 0, 0) == cudaErrorInvalidValue &&
                       gptoss_linear_rows_max(4096) == 12 && gptoss_linear_rows_max(2880) == 16 &&
                       gptoss_linear_rows_max(7) == 0;
        rcheck("linear_rows refuses shapes it cannot take", ok);
    }
    test_rows(4, 2880, 4096, 2880, 4096, 1, 0, 1);  /* q_proj, timed */
    test_rows(16, 2880, 4096, 2880, 4096, 1, 0, 1);
    test_rows(8, 2880, 201088 / 8, 2880, 201088 / 8, 0, 0, 1); /* an eighth of lm_head, timed */
    *checks += r_checks;
    *failed += r_failed;
}
