/* test_rows.cu — the batched decode step's own kernels:
 *  - gptoss_linear_rows (linear_rows.cu), the one-pass linear for 2..16 rows, against a CPU loop in double
 *    precision: every row, every output, bias, accumulate into y, row strides wider than K, N not a
 *    multiple of the rows per warp, and the largest T each K takes; a shape it cannot take must be
 *    refused, not run. Timed at the 20b shapes (q_proj, lm_head);
 *  - gptoss_attention_rows (attention_rows.cu) against a CPU loop in double precision over B rows, each
 *    its own sequence in a shuffled page pool, full and sliding layers, 1 to 32 splits of 1 to 3 chunks,
 *    1, 2, 4 and 8 heads per KV head; each row alone = the batched row bit for bit; timed against
 *    gptoss_attention_at at 2, 8, 32 and 64 rows of the 20b's heads, contexts 128..2,000;
 *  - gptoss_sample_rows (sampling.cu), every row of a step in three launches, against one gptoss_sample
 *    (+ gptoss_count_token) per row: the same tokens and counts, greedy and sampled, ties and NaN;
 *  - gptoss_logprobs_rows (sampling.cu) against llmr_logprobs_fill (common/sampling.c, the CPU engine's).
 * Linked into the gptoss_kernels binary; main() in test_kernels.cu calls gptoss_test_rows_kernels(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "engines/gptoss_cuda/attention_rows.cu"
#include "engines/gptoss_cuda/linear_rows.cu"
extern "C" {
#include "common/sampling.h"
}

#define TU_SEED 0x7065a1ull
#include "tests/gpu/gptoss_kernels/test_util.h"

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

static void test_rows(int T, int K, int N, int ldx, int ldy, int bias, int accumulate, int timed) {
    std::vector<float> x((size_t)T * ldx), y0((size_t)T * ldy);
    std::vector<uint16_t> W((size_t)N * K), b((size_t)N);
    for (auto &v : x) v = rrand();
    for (auto &v : y0) v = rrand();
    for (auto &v : W) v = r_bf16(rrand() * 0.05f);
    for (auto &v : b) v = r_bf16(rrand());
    float *dx, *dy;
    uint16_t *dW, *db;
    CK(cudaMalloc((void **)&dx, x.size() * 4));
    CK(cudaMalloc((void **)&dy, y0.size() * 4));
    CK(cudaMalloc((void **)&dW, W.size() * 2));
    CK(cudaMalloc((void **)&db, b.size() * 2));
    CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, W.data(), W.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    CK(gptoss_linear_rows(dx, ldx, dW, bias ? db : NULL, T, K, N, dy, ldy, accumulate, 0));
    std::vector<float> y(y0.size());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    int ok = 1;
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)x[(size_t)t * ldx + k] * bf2f(W[(size_t)n * K + k]);
                s += p;
                mag += fabs(p);
            }
            if (bias) s += bf2f(b[n]);
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
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0, 0));
        for (int i = 0; i < 20; i++) CK(gptoss_linear_rows(dx, ldx, dW, db, T, K, N, dy, ldy, 0, 0));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = 1000.0 * ms / 20;
        snprintf(what, sizeof what, "linear_rows T=%d K=%d N=%d: rel err %.1e (%.1f us, %.2f TB/s of W)", T, K, N, worst,
                 us, (double)N * K * 2 / (us * 1e-6) / 1e12);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    } else {
        snprintf(what, sizeof what, "linear_rows T=%d K=%d N=%d ldx=%d ldy=%d bias=%d acc=%d: rel err %.1e", T, K, N,
                 ldx, ldy, bias, accumulate, worst);
    }
    check_true(what, ok);
    cudaFree(dx); cudaFree(dy); cudaFree(dW); cudaFree(db);
}

/* B rows, each its own sequence in one shuffled page pool (2 layers, layer 1 used; 1 layer for the timed
 * 20b-sized cases, so the pool stays near the real K/V size), against a double loop. pos_of: row b's
 * position. Also: each row alone (B = 1, its own table, max_pos = its position) gives the batched row
 * bit for bit (a row does not depend on the others), a repeat is bit for bit and leaves the counters 0,
 * and max_pos below a position (the contract broken) still covers every key. timed: gptoss_attention_rows
 * vs gptoss_attention_at on the same rows, with the K/V bytes the step reads. */
static void test_attention_rows_pos(int B, int nh, int nkv, int window, const std::vector<int32_t> &pos,
                                    const char *label, int timed) {
    const int D = GPTOSS_HEAD_DIM, kvd = nkv * D, P = GPTOSS_KV_PAGE, layers = timed ? 1 : 2;
    int max_pages = 0, max_pos = 0, npages = 0;
    for (int b = 0; b < B; b++) {
        max_pages = std::max(max_pages, pos[b] / P + 1);
        max_pos = std::max(max_pos, (int)pos[b]);
        npages += pos[b] / P + 1;
    }
    std::vector<int32_t> perm(npages), ids((size_t)B * max_pages, 0);
    for (int i = 0; i < npages; i++) perm[i] = i;
    for (int i = npages - 1; i > 0; i--) {
        r_rng ^= r_rng << 13; r_rng ^= r_rng >> 7; r_rng ^= r_rng << 17;
        std::swap(perm[i], perm[(size_t)((r_rng >> 11) % (uint64_t)(i + 1))]);
    }
    for (int b = 0, k = 0; b < B; b++)
        for (int i = 0; i <= pos[b] / P; i++) ids[(size_t)b * max_pages + i] = perm[k++];
    const long long pf = (long long)layers * 2 * P * kvd, loff = (long long)(layers - 1) * 2 * P * kvd;
    std::vector<float> pool((size_t)npages * pf), q((size_t)B * nh * D);
    for (auto &v : pool) v = rrand() * 2.0f;
    for (auto &v : q) v = rrand() * 2.0f;
    std::vector<uint16_t> sinks(nh);
    for (auto &v : sinks) v = r_bf16(rrand() * 3.0f);
    const size_t npart = (size_t)B * nh * GPTOSS_ATTN_ROWS_SPLITS * 66;
    float *dpool, *dq, *dout, *dout1, *dout2, *dpart;
    int32_t *dtab, *dpos, *dctr;
    uint16_t *ds;
    CK(cudaMalloc((void **)&dpool, pool.size() * 4));
    CK(cudaMalloc((void **)&dq, q.size() * 4));
    CK(cudaMalloc((void **)&dout, q.size() * 4));
    CK(cudaMalloc((void **)&dout1, q.size() * 4));
    CK(cudaMalloc((void **)&dout2, q.size() * 4));
    CK(cudaMalloc((void **)&dpart, npart * 4));
    CK(cudaMalloc((void **)&dtab, ids.size() * 4));
    CK(cudaMalloc((void **)&dpos, pos.size() * 4));
    CK(cudaMalloc((void **)&dctr, (size_t)B * nkv * 4));
    CK(cudaMalloc((void **)&ds, sinks.size() * 2));
    CK(cudaMemcpy(dpool, pool.data(), pool.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtab, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ds, sinks.data(), sinks.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dctr, 0, (size_t)B * nkv * 4));
    CK(cudaMemset(dpart, 0xff, npart * 4));
    CK(cudaMemset(dout, 0xff, q.size() * 4)); /* NaN: an unwritten output fails */
    CK(cudaMemset(dout1, 0xff, q.size() * 4));
    CK(cudaMemset(dout2, 0xff, q.size() * 4));
    gptoss_kv kv;
    kv.pool = dpool; kv.table = dtab; kv.max_pages = max_pages; kv.kvd = kvd; kv.page_floats = pf; kv.layer_off = loff;
    CK(gptoss_attention_rows(dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout, dpart, dctr, 0));
    std::vector<float> out(q.size()), again(q.size()), alone(q.size()), small(q.size());
    std::vector<int32_t> ctr((size_t)B * nkv);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    CK(gptoss_attention_rows(dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout, dpart, dctr, 0));
    for (int b = 0; b < B; b++) { /* each row alone, through its own table row seen as row 0 */
        gptoss_kv one = kv;
        one.table = dtab + (size_t)b * max_pages;
        CK(gptoss_attention_rows(dq + (size_t)b * nh * D, one, ds, dpos + b, 1, pos[b], nh, nkv, window,
                                 dout1 + (size_t)b * nh * D, dpart, dctr, 0));
    }
    CK(gptoss_attention_rows(dq, kv, ds, dpos, B, 0, nh, nkv, window, dout2, dpart, dctr, 0)); /* max_pos too small */
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(again.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(alone.data(), dout1, out.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(small.data(), dout2, out.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ctr.data(), dctr, ctr.size() * 4, cudaMemcpyDeviceToHost));
    /* with o_proj's 2 bf16 parts written beside the output (gptoss_attention_rows_split): the same output, and parts
     * that are the split of it (RNE bf16, then bf16 of the residual) */
    int split_ok = 1;
    {
        float *dout3;
        uint16_t *dxs;
        CK(cudaMalloc((void **)&dout3, q.size() * 4));
        CK(cudaMalloc((void **)&dxs, q.size() * 2 * 2));
        CK(gptoss_attention_rows_split(dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout3, dpart, dctr, 2, dxs, 0));
        std::vector<float> o3(q.size());
        std::vector<uint16_t> xsh(q.size() * 2);
        CK(cudaMemcpy(o3.data(), dout3, o3.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(xsh.data(), dxs, xsh.size() * 2, cudaMemcpyDeviceToHost));
        split_ok = !memcmp(o3.data(), out.data(), out.size() * 4);
        for (size_t i = 0; i < out.size() && split_ok; i++) {
            const uint16_t h0 = f2bf(out[i]), h1 = f2bf(out[i] - bf2f(h0));
            split_ok = xsh[i] == h0 && xsh[out.size() + i] == h1;
        }
        cudaFree(dout3); cudaFree(dxs);
    }
    double worst = 0, worst_small = 0, keys = 0;
    int ok = 1, ok_small = 1;
    std::vector<double> sc;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            const int kvh = h / (nh / nkv), p = pos[b], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
            if (h == 0) keys += p - lo + 1;
            const float *qq = &q[((size_t)b * nh + h) * D];
            sc.assign((size_t)(p - lo + 1), 0.0);
            double mx = bf2f(sinks[h]);
            for (int j = lo; j <= p; j++) {
                const float *k = &pool[(size_t)ids[(size_t)b * max_pages + j / P] * pf + loff + (size_t)(j % P) * kvd + (size_t)kvh * D];
                double d = 0;
                for (int i = 0; i < D; i++) d += (double)qq[i] * k[i];
                sc[j - lo] = d / 8.0;
                mx = std::max(mx, sc[j - lo]);
            }
            double den = exp((double)bf2f(sinks[h]) - mx);
            for (double &x : sc) { x = exp(x - mx); den += x; }
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int j = lo; j <= p; j++)
                    o += sc[j - lo] * pool[(size_t)ids[(size_t)b * max_pages + j / P] * pf + loff + (size_t)(j % P) * kvd +
                                           (size_t)P * kvd + (size_t)kvh * D + i];
                o /= den;
                const size_t at = ((size_t)b * nh + h) * D + i;
                const double err = fabs(out[at] - o), err2 = fabs(small[at] - o);
                if (!(err <= 2e-5)) ok = 0;
                if (!(err2 <= 2e-5)) ok_small = 0;
                if (err > worst) worst = err;
                if (err2 > worst_small) worst_small = err2;
            }
        }
    int zero = 1;
    for (int c : ctr) zero &= c == 0;
    char what[300];
    snprintf(what, sizeof what, "attention_rows B=%d heads %d/%d window %d %s: max abs err %.1e", B, nh, nkv, window, label,
             worst);
    check_true(what, ok);
    snprintf(what, sizeof what, "attention_rows B=%d heads %d/%d window %d %s: each row alone bit for bit, repeat bit for bit, counters 0",
             B, nh, nkv, window, label);
    check_true(what, zero && !memcmp(out.data(), again.data(), out.size() * 4) &&
                         !memcmp(out.data(), alone.data(), out.size() * 4));
    snprintf(what, sizeof what, "attention_rows B=%d heads %d/%d window %d %s: with o_proj's parts beside it, the same output and its split",
             B, nh, nkv, window, label);
    check_true(what, split_ok);
    snprintf(what, sizeof what, "attention_rows B=%d heads %d/%d window %d %s: max_pos 0 (too small) still covers every key: %.1e",
             B, nh, nkv, window, label, worst_small);
    check_true(what, ok_small);
    if (timed) { /* the launcher's pick, the 64-register build (4), the 48-register build (5), gptoss_attention_at */
        int same = 1;
        for (int minb = 4; minb <= 5; minb++) {
            CK(arw_attention(minb, dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout1, dpart, dctr, 0, NULL, 0));
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(alone.data(), dout1, out.size() * 4, cudaMemcpyDeviceToHost));
            same &= !memcmp(out.data(), alone.data(), out.size() * 4);
        }
        snprintf(what, sizeof what, "attention_rows B=%d heads %d/%d window %d %s: the 4- and 5-blocks-per-SM builds bit for bit",
                 B, nh, nkv, window, label);
        check_true(what, same);
        cudaEvent_t e[5];
        for (auto &x : e) CK(cudaEventCreate(&x));
        const int R = 20;
        CK(gptoss_attention_at(dq, kv, ds, dpos, B, nh, nkv, window, dout2, 0)); /* warm */
        CK(cudaEventRecord(e[0], 0));
        for (int i = 0; i < R; i++) CK(gptoss_attention_rows(dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout, dpart, dctr, 0));
        CK(cudaEventRecord(e[1], 0));
        for (int i = 0; i < R; i++) CK(arw_attention(4, dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout, dpart, dctr, 0, NULL, 0));
        CK(cudaEventRecord(e[2], 0));
        for (int i = 0; i < R; i++) CK(arw_attention(5, dq, kv, ds, dpos, B, max_pos, nh, nkv, window, dout, dpart, dctr, 0, NULL, 0));
        CK(cudaEventRecord(e[3], 0));
        for (int i = 0; i < R; i++) CK(gptoss_attention_at(dq, kv, ds, dpos, B, nh, nkv, window, dout2, 0));
        CK(cudaEventRecord(e[4], 0));
        CK(cudaEventSynchronize(e[4]));
        float ms[4] = {0, 0, 0, 0};
        for (int i = 0; i < 4; i++) CK(cudaEventElapsedTime(&ms[i], e[i], e[i + 1]));
        const double us1 = 1000.0 * ms[0] / R, us4 = 1000.0 * ms[1] / R, us5 = 1000.0 * ms[2] / R, us2 = 1000.0 * ms[3] / R;
        const double bytes = keys * 2.0 * kvd * 4.0;
        printf("     timing attention_rows B=%2d heads %d/%d window %3d %s: %7.1f us (%6.0f GB/s of K/V; built for 4 / 5 blocks per SM %.1f / %.1f us); attention_at %7.1f us (%.1fx)\n",
               B, nh, nkv, window, label, us1, bytes / us1 / 1e3, us4, us5, us2, us2 / us1);
        for (auto &x : e) cudaEventDestroy(x);
    }
    cudaFree(dpool); cudaFree(dq); cudaFree(dout); cudaFree(dout1); cudaFree(dout2); cudaFree(dpart); cudaFree(dtab);
    cudaFree(dpos); cudaFree(dctr); cudaFree(ds);
}

/* Positions: row 0 at 0 (one key), the others spread up to past the window (ctx + 200). */
static void test_attention_rows(int B, int nh, int nkv, int window, int ctx) {
    std::vector<int32_t> pos(B);
    for (int b = 0; b < B; b++) pos[b] = b == 0 ? 0 : (int32_t)((ctx + b * 37 + (b % 3) * 101) % (ctx + 200));
    char label[40];
    snprintf(label, sizeof label, "ctx ~%d", ctx);
    test_attention_rows_pos(B, nh, nkv, window, pos, label, 0);
}

/* The 20b's heads at B rows with positions spread over 127..1999 (contexts 128..2,000), timed. */
static void test_attention_rows_timed(int B, int window) {
    std::vector<int32_t> pos(B);
    for (int b = 0; b < B; b++) pos[b] = (int32_t)(127 + (B > 1 ? (long)((b * 7) % B) * 1872 / (B - 1) : 0));
    test_attention_rows_pos(B, 64, 8, window, pos, "ctx 128..2000", 1);
}

/* gptoss_sample_rows over B rows of mixed parameters = B gptoss_sample (+ gptoss_count_token) launches:
 * same tokens, same counts afterwards. Logits with ties and a NaN so the tie rules are exercised. */
static void test_sample_rows(int B, int V) {
    std::vector<float> logits((size_t)B * V);
    for (auto &v : logits) v = rrand() * 4.0f;
    for (int b = 0; b < B; b++) {
        logits[(size_t)b * V + (b * 7919) % V] = 9.0f; /* a tie at the top for some rows */
        if (b % 2) logits[(size_t)b * V + (b * 104729 + 13) % V] = 9.0f;
        if (b % 5 == 1) logits[(size_t)b * V + 3] = NAN;
    }
    std::vector<int32_t> counts((size_t)B * V, 0);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < 20; k++) counts[(size_t)b * V + (size_t)((b * 31 + k * 977) % V)] = 1 + k % 3;
    std::vector<gptoss_sample_row> rows(B);
    float *dl, *w1, *w2;
    int32_t *c1, *c2, *o1, *o2;
    gptoss_sample_row *drows;
    CK(cudaMalloc((void **)&dl, logits.size() * 4));
    CK(cudaMalloc((void **)&c1, counts.size() * 4));
    CK(cudaMalloc((void **)&c2, counts.size() * 4));
    CK(cudaMalloc((void **)&o1, (size_t)B * 4));
    CK(cudaMalloc((void **)&o2, (size_t)B * 4));
    CK(cudaMalloc((void **)&w1, gptoss_sample_work(V) * 4));
    CK(cudaMalloc((void **)&w2, gptoss_sample_rows_work(B, V) * 4));
    CK(cudaMalloc((void **)&drows, (size_t)B * sizeof(gptoss_sample_row)));
    CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c1, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c2, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice));
    for (int b = 0; b < B; b++) {
        gptoss_sample_args a;
        memset(&a, 0, sizeof a);
        const int kind = b % 6;
        a.temperature = kind == 0 || kind == 3 ? 0.0f : 0.5f + 0.25f * (float)(b % 4);
        a.top_k = kind == 2 ? 40 : kind == 4 ? 1 : 0;
        a.top_p = kind == 1 || kind == 4 ? 0.9f : 1.0f;
        a.min_p = kind == 5 ? 0.05f : 0.0f;
        const int pen = b % 3 == 0;
        a.frequency_penalty = pen ? 0.5f : 0.0f;
        a.presence_penalty = pen ? 0.25f : 0.0f;
        a.u = (float)((b * 0.618034) - floor(b * 0.618034));
        rows[b].logits = dl + (size_t)b * V;
        rows[b].counts = pen ? c2 + (size_t)b * V : NULL;
        rows[b].a = a;
        rows[b].count_token = pen;
        CK(gptoss_sample(dl + (size_t)b * V, V, pen ? c1 + (size_t)b * V : NULL, a, w1, o1 + b, 0));
        if (pen) CK(gptoss_count_token(c1 + (size_t)b * V, o1 + b, 0));
    }
    CK(cudaMemcpy(drows, rows.data(), (size_t)B * sizeof(gptoss_sample_row), cudaMemcpyHostToDevice));
    unsigned need = 0;
    for (int b = 0; b < B; b++) need |= gptoss_sample_need(&rows[b].a);
    CK(gptoss_sample_rows(drows, B, V, need, w2, o2, 0));
    std::vector<int32_t> t1(B), t2(B), k1(counts.size()), k2(counts.size());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(t1.data(), o1, (size_t)B * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(t2.data(), o2, (size_t)B * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(k1.data(), c1, k1.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(k2.data(), c2, k2.size() * 4, cudaMemcpyDeviceToHost));
    int valid = 1;
    for (int b = 0; b < B; b++) valid &= t2[b] >= 0 && t2[b] < V;
    char what[200];
    snprintf(what, sizeof what, "sample_rows B=%d V=%d (greedy, top-k/p, min-p, penalties, ties, NaN) = %d gptoss_sample launches, counts too",
             B, V, B);
    check_true(what, valid && t1 == t2 && k1 == k2);
    cudaFree(dl); cudaFree(c1); cudaFree(c2); cudaFree(o1); cudaFree(o2); cudaFree(w1); cudaFree(w2); cudaFree(drows);
}

/* gptoss_logprobs_rows against common/sampling.c's llmr_logprobs_fill (the CPU engine's, in double): the same
 * alternatives in the same order (ties to the lower id, NaN as -inf: both compare the raw floats), log-probabilities
 * within 1e-4; rows without logits left as they were. */
static void test_logprobs_rows(int B, int V) {
    std::vector<float> logits((size_t)B * V);
    for (auto &v : logits) v = rrand() * 6.0f;
    std::vector<gptoss_logprob_row> rows(B);
    std::vector<int32_t> tok(B);
    const int tops[6] = {-1, 0, 1, 5, 20, 3};
    float *dl;
    int32_t *dt;
    gptoss_logprob_row *drows;
    llmr_token_logprobs *dout;
    CK(cudaMalloc((void **)&dl, logits.size() * 4));
    CK(cudaMalloc((void **)&dt, (size_t)B * 4));
    CK(cudaMalloc((void **)&drows, (size_t)B * sizeof(gptoss_logprob_row)));
    CK(cudaMalloc((void **)&dout, (size_t)B * sizeof(llmr_token_logprobs)));
    CK(cudaMemset(dout, 0xA5, (size_t)B * sizeof(llmr_token_logprobs)));
    for (int b = 0; b < B; b++) {
        float *l = &logits[(size_t)b * V];
        l[(b * 7919) % V] = 30.0f; /* a tie at the top */
        l[(b * 104729 + 13) % V] = 30.0f;
        if (b % 3 == 1) l[5] = NAN;
        if (b % 4 == 2) l[7] = -INFINITY;
        if (b % 5 == 3) for (int i = 0; i < V; i += 2) l[i] = -1.0f; /* many ties below the top */
        tok[b] = b % 7 == 4 ? 5 : (int32_t)((b * 2654435761u) % (uint32_t)V);
        rows[b].n_top = tops[b % 6];
        rows[b].logits = rows[b].n_top < 0 ? NULL : dl + (size_t)b * V;
    }
    CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dt, tok.data(), (size_t)B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(drows, rows.data(), (size_t)B * sizeof(gptoss_logprob_row), cudaMemcpyHostToDevice));
    CK(gptoss_logprobs_rows(drows, B, V, dt, dout, 0));
    std::vector<llmr_token_logprobs> got(B);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got.data(), dout, (size_t)B * sizeof(llmr_token_logprobs), cudaMemcpyDeviceToHost));
    int ok = 1;
    double worst = 0;
    for (int b = 0; b < B && ok; b++) {
        llmr_token_logprobs want;
        if (rows[b].n_top < 0) {
            memset(&want, 0xA5, sizeof want);
            ok = !memcmp(&want, &got[b], sizeof want);
            continue;
        }
        llmr_logprobs_fill(&logits[(size_t)b * V], V, tok[b], (uint32_t)rows[b].n_top, &want);
        ok = got[b].token == want.token && got[b].n_top == want.n_top;
        const auto close = [&](float g, float w) {
            if (isinf(w)) return g == w;
            worst = std::max(worst, (double)fabsf(g - w));
            return fabsf(g - w) <= 1e-4f;
        };
        ok = ok && close(got[b].logprob, want.logprob);
        for (uint32_t i = 0; ok && i < want.n_top; i++)
            ok = got[b].top_ids[i] == want.top_ids[i] && close(got[b].top_logprobs[i], want.top_logprobs[i]);
        if (!ok) fprintf(stderr, "logprobs row %d (n_top %d, token %d): GPU %d %.6f top0 %d, CPU %d %.6f top0 %d\n", b,
                         rows[b].n_top, tok[b], got[b].token, got[b].logprob, got[b].top_ids[0], want.token, want.logprob,
                         want.top_ids[0]);
    }
    char what[200];
    snprintf(what, sizeof what, "logprobs_rows B=%d V=%d (0..20 alternatives, ties, NaN, -inf, skipped rows) = llmr_logprobs_fill, "
             "worst |d logprob| %.2e", B, V, worst);
    check_true(what, ok);
    if (V == 201088) { /* what a 64-row step pays when every row asks: none, the chosen token's only, 20 alternatives */
        double ms[3];
        const int nt[3] = {-1, 0, 20};
        for (int i = 0; i < 3; i++) {
            for (int b = 0; b < B; b++) {
                rows[b].n_top = nt[i];
                rows[b].logits = nt[i] < 0 ? NULL : dl + (size_t)b * V;
            }
            CK(cudaMemcpy(drows, rows.data(), (size_t)B * sizeof(gptoss_logprob_row), cudaMemcpyHostToDevice));
            ms[i] = tu_time_ms([&]() { CK(gptoss_logprobs_rows(drows, B, V, dt, dout, 0)); }, 20);
        }
        printf("time logprobs_rows B=%d V=%d: no row asking %.3f ms, every row the token only %.3f ms, with 20 alternatives "
               "%.3f ms\n", B, V, ms[0], ms[1], ms[2]);
    }
    cudaFree(dl); cudaFree(dt); cudaFree(drows); cudaFree(dout);
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
        check_true("linear_rows refuses shapes it cannot take", ok);
    }
    test_rows(4, 2880, 4096, 2880, 4096, 1, 0, 1);  /* q_proj, timed */
    test_rows(16, 2880, 4096, 2880, 4096, 1, 0, 1);
    test_rows(8, 2880, 201088 / 8, 2880, 201088 / 8, 0, 0, 1); /* an eighth of lm_head, timed */
    test_sample_rows(2, 1000);
    test_sample_rows(13, 1000);
    test_sample_rows(5, 10001); /* a vocabulary past one row's radix scratch, odd: each row's region stays aligned */
    test_sample_rows(64, 201088); /* the 64-stream step */
    test_logprobs_rows(6, 1000);
    test_logprobs_rows(13, 3000);
    test_logprobs_rows(64, 201088);
    test_attention_rows(1, 8, 2, 0, 5);       /* one row, one key */
    test_attention_rows(3, 64, 8, 0, 300);
    test_attention_rows(7, 64, 8, 128, 400);  /* sliding window */
    test_attention_rows(20, 12, 3, 5, 70);    /* 4 heads per KV head, a tiny window */
    test_attention_rows(40, 64, 8, 0, 150);
    test_attention_rows(64, 4, 4, 0, 33);     /* one head per KV head */
    test_attention_rows(9, 8, 4, 0, 700);     /* 2 heads per KV head */
    test_attention_rows(3, 64, 8, 0, 5000);   /* past 32 chunks: 3 chunks per split */
    test_attention_rows(5, 64, 8, 128, 3000); /* sliding, long positions: 2 splits each */
    for (int B = 2; B <= 64; B *= 4) { /* 2, 8, 32 */
        test_attention_rows_timed(B, 0);
        test_attention_rows_timed(B, 128);
    }
    test_attention_rows_timed(64, 0);   /* the 64-stream step's full layers */
    test_attention_rows_timed(64, 128); /* and its sliding layers */
    {
        gptoss_kv kv;
        memset(&kv, 0, sizeof kv);
        kv.pool = (float *)256; kv.table = (const int32_t *)256; kv.max_pages = 1; kv.kvd = 8 * 64;
        float *f = (float *)256;
        const int32_t *ip = (const int32_t *)256;
        const uint16_t *sp = (const uint16_t *)256;
        int32_t *ctr = (int32_t *)256;
        const int ok = gptoss_attention_rows(f, kv, sp, ip, 2, 5, 64, 7, 0, f, f, ctr, 0) ==
                           cudaErrorInvalidValue && /* heads not a multiple of the KV heads */
                       gptoss_attention_rows(f, kv, sp, ip, 2, 5, 64, 4, 0, f, f, ctr, 0) ==
                           cudaErrorInvalidValue && /* kvd does not match */
                       gptoss_attention_rows(f, kv, sp, ip, 2, 5, 24, 8, 0, f, f, ctr, 0) ==
                           cudaErrorInvalidValue && /* 3 heads per KV head */
                       gptoss_attention_rows(f, kv, sp, ip, 2, -1, 64, 8, 0, f, f, ctr, 0) ==
                           cudaErrorInvalidValue && /* no max_pos */
                       gptoss_attention_rows(f, kv, sp, ip, 2, 5, 64, 8, 0, f, NULL, ctr, 0) ==
                           cudaErrorInvalidValue; /* no scratch */
        check_true("attention_rows refuses shapes it cannot take", ok);
    }
    *checks += tu_checks;
    *failed += tu_failed;
}
