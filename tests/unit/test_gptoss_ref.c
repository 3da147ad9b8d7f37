/* Unit tests for the C reference of gpt-oss (common/gptoss/ref_math.h, ref_model.h):
 *  - one test per bug other implementations shipped (shared reference gpt-oss.md §5): attention sinks,
 *    the sliding window, NeoX rotate-half YaRN RoPE, top-4-then-softmax routing, clamped SwiGLU with +1,
 *    interleaved gate/up, MXFP4 nibble order;
 *  - the CI oracle: a tiny checkpoint regenerated with llmr-mkmodel's generator (seed 1) must match the
 *    logits transformers produced for it (tests/data/gptoss/tiny-seed1-*.json, recipe in README.md)
 *    to <= 1e-4 relative L2, over prompts crossing the 128-token window and position 4096. */
#include <jansson.h>
#include <math.h>

#include "common/gptoss/config.h"
#include "common/gptoss/ref_math.h"
#include "common/gptoss/ref_model.h"
#include "common/gptoss/synth.h"
#include "tests/unit/testutil.h"

#define CLOSE(a, b, tol) ck_assert_msg(fabs((double)(a) - (double)(b)) <= (tol), "%s = %.9g, expected %.9g", #a, (double)(a), (double)(b))

/* Zero scores, V = 1, sink S: every key gets 1/(n + e^S), so the output is n/(n + e^S) (the unit test
 * that caught a generic flash path dropping the sink: it gave 1.0). */
START_TEST(sink_zero_logits) {
    enum { n = 3, d = 64 };
    float q[d] = {0}, K[n * d], V[n * d], out[d], scratch[n];
    for (int i = 0; i < n * d; i++) { K[i] = 0.5f * (float)(i % 7); V[i] = 1.0f; }
    const float S = 2.0f;
    float sink_mass = gptoss_attend_head(out, q, K, V, n, 0, d, d, 0.125f, S, scratch);
    double want = n / (n + exp(S)); /* 0.3013 */
    for (int i = 0; i < d; i++) CLOSE(out[i], want, 1e-6);
    CLOSE(sink_mass, exp(S) / (n + exp(S)), 1e-6);
}
END_TEST

/* The window is the caller's choice of `first`: keys before it must not count at all. */
START_TEST(sliding_window_excludes_old_keys) {
    enum { n = 200, d = 64, W = 128 };
    static float K[n * d], V[n * d];
    float q[d], out_w[d], out_ref[d], scratch[n];
    for (int i = 0; i < d; i++) q[i] = 0.1f * (float)(i % 5);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < d; i++) {
            K[j * d + i] = sinf((float)(j * d + i));
            V[j * d + i] = j < n - W ? 1000.0f : cosf((float)(j + i)); /* poison the keys outside the window */
        }
    gptoss_attend_head(out_w, q, K, V, n, n - W, d, d, 0.125f, 0.5f, scratch);
    /* the same keys copied to the front of a fresh buffer */
    gptoss_attend_head(out_ref, q, K + (n - W) * d, V + (n - W) * d, W, 0, d, d, 0.125f, 0.5f, scratch);
    for (int i = 0; i < d; i++) CLOSE(out_w[i], out_ref[i], 1e-6);
    for (int i = 0; i < d; i++) ck_assert(fabsf(out_w[i]) < 2.0f);
}
END_TEST

/* NeoX rotate-half: pairs are (i, i + d/2), not adjacent; cos and sin both scaled by the attention factor. */
START_TEST(rope_rotate_half_pairs) {
    gptoss_config c;
    char err[256];
    ck_assert_msg(gptoss_config_load("tests/data/gptoss/20b", &c, err, sizeof err) == 0, "%s", err);
    float inv[32], f;
    gptoss_yarn_inv_freq(&c, inv, &f);
    float x[64] = {0};
    x[0] = 1.0f;
    x[1] = 2.0f;
    gptoss_rope(x, 64, 5, inv, f);
    CLOSE(x[0], cosf(5 * inv[0]) * f, 1e-5);
    CLOSE(x[32], sinf(5 * inv[0]) * f, 1e-5);
    CLOSE(x[1], 2 * cosf(5 * inv[1]) * f, 1e-5);
    CLOSE(x[33], 2 * sinf(5 * inv[1]) * f, 1e-5);
    CLOSE(x[2], 0, 0); /* nothing leaks into the adjacent element (the GPT-J pairing bug) */
    float y[64];
    for (int i = 0; i < 64; i++) y[i] = (float)i;
    gptoss_rope(y, 64, 0, inv, f); /* position 0: identity times the attention factor */
    for (int i = 0; i < 64; i++) CLOSE(y[i], i * f, 1e-4);
}
END_TEST

/* Softmax over the top 4 logits only (not over all experts), ties to the lower index, sorted. */
START_TEST(router_softmax_over_top4_only) {
    float logits[8] = {1, 5, 3, 2, 4, 0, 2, -1};
    int idx[4];
    float w[4];
    gptoss_route_topk(logits, 8, 4, idx, w);
    ck_assert_int_eq(idx[0], 1);
    ck_assert_int_eq(idx[1], 4);
    ck_assert_int_eq(idx[2], 2);
    ck_assert_int_eq(idx[3], 3); /* logits[3] == logits[6]: the lower index wins */
    double z = exp(5) + exp(4) + exp(3) + exp(2);
    CLOSE(w[0], exp(5) / z, 1e-6);
    CLOSE(w[3], exp(2) / z, 1e-6);
    CLOSE(w[0] + w[1] + w[2] + w[3], 1.0, 1e-6);
}
END_TEST

/* Clamped SwiGLU: gate clamped above only, up clamped both ways, +1 on up; gate/up interleaved. */
START_TEST(swiglu_saturation_and_interleave) {
    const float a = 1.702f, lim = 7.0f;
    float gu[8] = {10.0f, 9.0f,    /* gate 10 -> 7, up 9 -> 7 */
                   -10.0f, 0.5f,   /* gate -10 stays (no lower clamp) */
                   1.0f, -9.0f,    /* up -9 -> -7: (u + 1) = -6 */
                   0.0f, 3.0f};    /* gate 0 -> 0 whatever up is */
    float out[4];
    gptoss_swiglu(out, gu, 4, a, lim);
    double sig7 = 1.0 / (1.0 + exp(-a * 7.0));
    CLOSE(out[0], 7.0 * sig7 * 8.0, 1e-4);
    CLOSE(out[1], -10.0 / (1.0 + exp(a * 10.0)) * 1.5, 1e-9);
    CLOSE(out[2], 1.0 / (1.0 + exp(-a)) * -6.0, 1e-5);
    CLOSE(out[3], 0.0, 0);
}
END_TEST

/* MXFP4: element 2j in the low nibble, 2j+1 in the high nibble, E8M0 scale 2^(s-127). */
START_TEST(mxfp4_nibble_order) {
    uint8_t blocks[16] = {0x21, 0xF8, 0x7A};
    uint8_t scale = 128;
    float out[32];
    gptoss_mxfp4_dequant(out, blocks, &scale, 1, 32);
    CLOSE(out[0], 0.5 * 2, 0);   /* low nibble 1 -> +0.5 */
    CLOSE(out[1], 1.0 * 2, 0);   /* high nibble 2 -> +1 */
    CLOSE(out[2], -0.0, 0);      /* 8 -> -0 */
    CLOSE(out[3], -6.0 * 2, 0);  /* F -> -6 */
    CLOSE(out[4], -1.0 * 2, 0);  /* A -> -1 */
    CLOSE(out[5], 6.0 * 2, 0);   /* 7 -> +6 */
    CLOSE(out[31], 0, 0);
}
END_TEST

/* ---- the transformers oracle ---------------------------------------------------------------- */

static double rel_l2(const float *a, const float *ref, size_t n, size_t stride_a) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i * stride_a] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static float *json_floats(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    float *f = malloc(*n * sizeof *f + 1);
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < *n; i++) f[i] = (float)json_number_value(json_array_get(arr, i));
    return f;
}

/* Regenerates the tiny seed-1 checkpoint, runs the fixture's prompt and checks every saved position. */
static void check_fixture(const char *fixture) {
    json_error_t je;
    json_t *fx = json_load_file(fixture, 0, &je);
    ck_assert_msg(fx != NULL, "%s: %s", fixture, je.text);
    char *dir = llmr_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    gptoss_synth_options o = {.preset = "tiny", .seed = 1, .out_dir = dir, .threads = 2};
    char err[512];
    ck_assert_msg(gptoss_synth_write(&o, NULL, err, sizeof err) == 0, "%s", err);
    gptoss_ref_model *m = NULL;
    ck_assert_msg(gptoss_ref_load(dir, 2, 0, &m, err, sizeof err) == 0, "%s", err);
    const gptoss_config *c = gptoss_ref_config(m);
    const int V = c->vocab_size, H = c->hidden_size, L = c->num_layers;
    json_t *tokens = json_object_get(fx, "tokens"), *positions = json_object_get(fx, "positions");
    const size_t T = json_array_size(tokens), stride = (size_t)json_integer_value(json_object_get(fx, "stride"));
    ck_assert_int_eq((int)json_integer_value(json_object_get(fx, "vocab_size")), V);
    json_t *greedy = json_object_get(fx, "greedy");
    json_t *g_tokens = json_object_get(greedy, "tokens"), *g_margin = json_object_get(greedy, "top2_margin");
    const size_t G = json_array_size(g_tokens);
    gptoss_ref_state *s = gptoss_ref_state_create(m, (int)(T + G));
    float *logits = malloc((size_t)V * sizeof *logits), *layers = malloc((size_t)L * H * sizeof *layers);
    ck_assert(s && logits && layers);
    gptoss_ref_trace tr = {.layer_out = layers};
    size_t pi = 0;
    double worst = 0;
    for (size_t t = 0; t < T; t++) {
        json_t *pe = json_array_get(positions, pi);
        int saved = pe && (size_t)json_integer_value(json_object_get(pe, "position")) == t;
        int want = saved || t + 1 == T;
        ck_assert_msg(gptoss_ref_forward(m, s, (int32_t)json_integer_value(json_array_get(tokens, t)), want ? logits : NULL,
                                         saved ? &tr : NULL, err, sizeof err) == 0, "%s", err);
        if (!saved) continue;
        size_t n;
        float *hid = json_floats(json_object_get(pe, "hidden_last"), &n);
        ck_assert_uint_eq(n, (size_t)H);
        double e_hidden = rel_l2(layers + (size_t)(L - 1) * H, hid, n, 1);
        float *ls = json_floats(json_object_get(pe, "logits_strided"), &n);
        ck_assert_uint_eq(n, ((size_t)V + stride - 1) / stride);
        double e_logits = rel_l2(logits, ls, n, stride);
        double l2 = 0, sum = 0;
        for (int i = 0; i < V; i++) { l2 += (double)logits[i] * logits[i]; sum += logits[i]; }
        double ref_l2 = json_real_value(json_object_get(pe, "l2"));
        ck_assert_msg(e_hidden <= 1e-4 && e_logits <= 1e-4 && fabs(sqrt(l2) - ref_l2) <= 1e-4 * ref_l2,
                      "%s position %zu: hidden rel L2 %.3g, strided logits rel L2 %.3g, norm %.7g vs %.7g", fixture, t,
                      e_hidden, e_logits, sqrt(l2), ref_l2);
        /* top-1 agrees where the reference's top-2 margin is clear */
        json_t *top_l = json_object_get(pe, "top_logits");
        int top1 = (int)json_integer_value(json_array_get(json_object_get(pe, "top_ids"), 0));
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        if (json_real_value(json_array_get(top_l, 0)) - json_real_value(json_array_get(top_l, 1)) > 1e-3)
            ck_assert_msg(best == top1, "%s position %zu: top-1 %d, transformers %d", fixture, t, best, top1);
        if (e_logits > worst) worst = e_logits;
        free(hid);
        free(ls);
        pi++;
    }
    ck_assert_uint_eq(pi, json_array_size(positions));
    /* greedy continuation: identical up to the first step whose reference margin is <= 1e-3 */
    for (size_t g = 0; g < G; g++) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        if (json_real_value(json_array_get(g_margin, g)) <= 1e-3) break;
        ck_assert_msg(best == json_integer_value(json_array_get(g_tokens, g)), "%s greedy step %zu: %d, transformers %lld", fixture,
                      g, best, (long long)json_integer_value(json_array_get(g_tokens, g)));
        ck_assert_msg(gptoss_ref_forward(m, s, best, logits, NULL, err, sizeof err) == 0, "%s", err);
    }
    printf("%s: %zu positions, worst strided-logits rel L2 %.2e\n", fixture, pi, worst);
    free(logits);
    free(layers);
    gptoss_ref_state_destroy(s);
    gptoss_ref_free(m);
    json_decref(fx);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

START_TEST(oracle_tiny_p300) { check_fixture("tests/data/gptoss/tiny-seed1-p300.json"); }
END_TEST

START_TEST(oracle_tiny_p4200) { check_fixture("tests/data/gptoss/tiny-seed1-p4200.json"); }
END_TEST

/* Errors name their cause; the state is unchanged on failure. */
START_TEST(load_and_forward_errors) {
    gptoss_ref_model *m = NULL;
    char err[512];
    ck_assert_int_ne(gptoss_ref_load("/nonexistent", 1, 0, &m, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent"));
    ck_assert_ptr_null(m);
    char *dir = llmr_test_tmpdir();
    gptoss_synth_options o = {.preset = "tiny", .seed = 3, .out_dir = dir, .threads = 2};
    ck_assert_msg(gptoss_synth_write(&o, NULL, err, sizeof err) == 0, "%s", err);
    /* a RAM limit below what the fp32 weights need: OOM_RAM naming both numbers */
    ck_assert_int_eq(gptoss_ref_load(dir, 1, 1000, &m, err, sizeof err), 2 /* LLMR_ENGINE_OOM_RAM */);
    ck_assert_ptr_nonnull(strstr(err, "1000 available"));
    ck_assert_int_eq(gptoss_ref_load(dir, 1, 0, &m, err, sizeof err), 0);
    /* the RAM check before loading predicts exactly what the load holds */
    ck_assert_uint_eq(gptoss_ref_ram_bytes(m), gptoss_ref_weight_bytes(gptoss_ref_config(m)));
    gptoss_ref_state *s = gptoss_ref_state_create(m, 2);
    ck_assert_int_eq(gptoss_ref_forward(m, s, 201088, NULL, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "201088"));
    ck_assert_int_eq(gptoss_ref_state_len(s), 0);
    ck_assert_int_eq(gptoss_ref_forward(m, s, 1, NULL, NULL, err, sizeof err), 0);
    ck_assert_int_eq(gptoss_ref_forward(m, s, 2, NULL, NULL, err, sizeof err), 0);
    ck_assert_int_eq(gptoss_ref_forward(m, s, 3, NULL, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "context full"));
    gptoss_ref_state_destroy(s);
    gptoss_ref_free(m);
    /* a missing tensor: MODEL_CORRUPT naming it */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cd '%s' && sed -i 's/model.layers.2.self_attn.sinks/model.layers.2.self_attn.sinkz/' model.safetensors.index.json model-0000*.safetensors", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(gptoss_ref_load(dir, 1, 0, &m, err, sizeof err), 3 /* LLMR_ENGINE_MODEL_CORRUPT */);
    ck_assert_msg(strstr(err, "model.layers.2.self_attn.sinks") != NULL, "%s", err);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}
END_TEST

static Suite *ref_suite(void) {
    Suite *s = suite_create("gptoss_ref");
    TCase *tc = tcase_create("math");
    tcase_add_test(tc, sink_zero_logits);
    tcase_add_test(tc, sliding_window_excludes_old_keys);
    tcase_add_test(tc, rope_rotate_half_pairs);
    tcase_add_test(tc, router_softmax_over_top4_only);
    tcase_add_test(tc, swiglu_saturation_and_interleave);
    tcase_add_test(tc, mxfp4_nibble_order);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("model");
    tcase_set_timeout(tm, 120);
    tcase_add_test(tm, oracle_tiny_p300);
    tcase_add_test(tm, oracle_tiny_p4200);
    tcase_add_test(tm, load_and_forward_errors);
    suite_add_tcase(s, tm);
    return s;
}

LLMR_TEST_MAIN(ref_suite)
