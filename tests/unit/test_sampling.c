/* Unit tests for common/sampling: the ABI's sampling semantics (greedy ties, penalties, temperature,
 * top_k, top_p, min_p, seed determinism) on small hand-made distributions and on the real vocab size. */
#include <math.h>

#include "common/sampling.h"
#include "tests/unit/testutil.h"

static llmr_sampling_params params(float temp, int top_k, float top_p, float min_p, uint64_t seed) {
    llmr_sampling_params p = {.struct_size = sizeof p, .temperature = temp, .top_k = top_k, .top_p = top_p, .min_p = min_p, .seed = seed};
    return p;
}

START_TEST(greedy_ties_to_lowest_id) {
    float x[5] = {1, 3, 3, NAN, 2};
    ck_assert_int_eq(llmr_argmax(x, 5), 1);
    llmr_sampling_params p = params(0, 0, 1, 0, 1);
    llmr_sampler *s = llmr_sampler_create(&p, 5);
    ck_assert_ptr_nonnull(s);
    float y[5] = {1, 3, 3, NAN, 2};
    ck_assert_int_eq(llmr_sampler_sample(s, y), 1);
    llmr_sampler_destroy(s);
    float z[3] = {NAN, NAN, 1};
    ck_assert_int_eq(llmr_argmax(z, 3), 2);
    ck_assert_ptr_null(llmr_sampler_create(&p, 0));
    llmr_sampler_destroy(NULL);
}
END_TEST

START_TEST(penalties_openai_semantics) {
    llmr_sampling_params p = params(0, 0, 1, 0, 1);
    p.frequency_penalty = 0.1f;
    llmr_sampler *s = llmr_sampler_create(&p, 2);
    float x[2] = {5.0f, 4.9f};
    ck_assert_int_eq(llmr_sampler_sample(s, x), 0);
    llmr_sampler_accept(s, 0);
    float y[2] = {5.0f, 4.85f};
    ck_assert_int_eq(llmr_sampler_sample(s, y), 0); /* 5 - 0.1 = 4.9 > 4.85 */
    llmr_sampler_accept(s, 0);
    float w[2] = {5.0f, 4.85f};
    ck_assert_int_eq(llmr_sampler_sample(s, w), 1); /* 5 - 0.2 = 4.8 < 4.85 */
    llmr_sampler_accept(s, 70000);                  /* out of range: ignored */
    llmr_sampler_destroy(s);
    p = params(0, 0, 1, 0, 1);
    p.presence_penalty = 0.5f;
    s = llmr_sampler_create(&p, 2);
    llmr_sampler_accept(s, 0);
    llmr_sampler_accept(s, 0);
    float v[2] = {5.0f, 4.6f};
    ck_assert_int_eq(llmr_sampler_sample(s, v), 1); /* presence counts once: 4.5 < 4.6 */
    llmr_sampler_destroy(s);
}
END_TEST

/* Draws n tokens from logits log(probs) and returns the frequencies. */
static void histogram(const llmr_sampling_params *p, const double *probs, int k, int n, double *freq) {
    llmr_sampler *s = llmr_sampler_create(p, k);
    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < k; i++) freq[i] = 0;
    float x[8];
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < k; i++) x[i] = (float)log(probs[i]);
        int32_t tok = llmr_sampler_sample(s, x);
        ck_assert(tok >= 0 && tok < k);
        freq[tok] += 1.0 / n;
    }
    llmr_sampler_destroy(s);
}

START_TEST(filters_and_proportions) {
    const double probs[4] = {0.5, 0.3, 0.15, 0.05};
    double f[4];
    llmr_sampling_params p = params(1, 0, 1, 0, 42);
    histogram(&p, probs, 4, 40000, f);
    for (int i = 0; i < 4; i++) ck_assert_msg(fabs(f[i] - probs[i]) < 0.01, "token %d: %.3f vs %.3f", i, f[i], probs[i]);
    p = params(1, 2, 1, 0, 42); /* top_k 2: {0, 1} renormalized */
    histogram(&p, probs, 4, 40000, f);
    ck_assert(fabs(f[0] - 0.625) < 0.01 && fabs(f[1] - 0.375) < 0.01 && f[2] == 0 && f[3] == 0);
    p = params(1, 0, 0.6f, 0, 42); /* top_p 0.6: 0.5 < 0.6, so 0.3 joins */
    histogram(&p, probs, 4, 40000, f);
    ck_assert(fabs(f[0] - 0.625) < 0.01 && f[2] == 0 && f[3] == 0);
    p = params(1, 0, 1, 0.25f, 42); /* min_p 0.25: keeps p >= 0.125 */
    histogram(&p, probs, 4, 40000, f);
    ck_assert(fabs(f[0] - 0.5 / 0.95) < 0.01 && f[3] == 0 && f[2] > 0);
    p = params(1, 3, 0.7f, 0, 42); /* top_k 3 then top_p 0.7 of {0.5,0.3,0.15}/0.95: 0.526, 0.842 -> {0, 1} */
    histogram(&p, probs, 4, 20000, f);
    ck_assert(f[2] == 0 && f[3] == 0 && f[1] > 0.3);
    p = params(0.01f, 0, 1, 0, 42); /* a very low temperature is nearly greedy */
    histogram(&p, probs, 4, 2000, f);
    ck_assert(f[1] == 0 && f[2] == 0 && f[3] == 0);
}
END_TEST

START_TEST(seed_determinism_full_vocab) {
    enum { V = 201088, N = 40 };
    float *base = malloc(V * sizeof *base), *x = malloc(V * sizeof *x);
    ck_assert(base && x);
    uint32_t r = 12345;
    for (int i = 0; i < V; i++) {
        r = r * 1664525u + 1013904223u;
        base[i] = (float)(r >> 8) / (float)(1 << 24) * 8.0f;
    }
    int32_t a[N], b[N], c[N];
    const float tps[3] = {1.0f, 0.9f, 1.0f};
    const int tks[3] = {0, 0, 50};
    for (int cfg = 0; cfg < 3; cfg++) {
        uint64_t seeds[3] = {7, 7, 8};
        int32_t *outs[3] = {a, b, c};
        for (int run = 0; run < 3; run++) {
            llmr_sampling_params p = params(0.8f, tks[cfg], tps[cfg], 0.0f, seeds[run]);
            p.frequency_penalty = 0.2f;
            llmr_sampler *s = llmr_sampler_create(&p, V);
            for (int t = 0; t < N; t++) {
                memcpy(x, base, V * sizeof *x);
                outs[run][t] = llmr_sampler_sample(s, x);
                llmr_sampler_accept(s, outs[run][t]);
            }
            llmr_sampler_destroy(s);
        }
        ck_assert_mem_eq(a, b, sizeof a);              /* same seed: same tokens */
        ck_assert(memcmp(a, c, sizeof a) != 0);        /* another seed: other tokens */
    }
    free(base);
    free(x);
}
END_TEST

/* A caller built against an older, shorter llmr_sampling_params: the missing fields are off. */
START_TEST(short_struct_size) {
    llmr_sampling_params p = params(0, 0, 1, 0, 1);
    p.frequency_penalty = 100.0f; /* beyond the reported size: must be ignored */
    p.struct_size = offsetof(llmr_sampling_params, frequency_penalty);
    llmr_sampler *s = llmr_sampler_create(&p, 2);
    llmr_sampler_accept(s, 0);
    float x[2] = {5.0f, 4.9f};
    ck_assert_int_eq(llmr_sampler_sample(s, x), 0);
    llmr_sampler_destroy(s);
}
END_TEST

/* Found by fuzz_sampling: an +inf logit made every weight NaN, no candidate survived top_p, and the
 * sampler read cand[-1]. +inf must win like any largest logit, with every filter. */
START_TEST(infinite_logits) {
    const float logits[4] = {NAN, INFINITY, -INFINITY, 3.0f};
    const struct { int top_k; float top_p, min_p; } f[] = {{0, 1, 0}, {0, 0.5f, 0}, {2, 1, 0}, {2, 0.9f, 0.1f}, {0, 1, 0.5f}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        llmr_sampling_params p = params(1.0f, f[i].top_k, f[i].top_p, f[i].min_p, 7);
        llmr_sampler *s = llmr_sampler_create(&p, 4);
        for (int step = 0; step < 3; step++) {
            float x[4];
            memcpy(x, logits, sizeof x);
            ck_assert_int_eq(llmr_sampler_sample(s, x), 1);
        }
        llmr_sampler_destroy(s);
    }
}
END_TEST

/* llmr_logprobs_fill: log_softmax of the raw logits (in double here, from the definition), the most likely
 * alternatives in order with ties to the lower id, NaN as -inf, the count capped by the vocab and by 20. */
START_TEST(logprobs_fill) {
    const float x[6] = {1.0f, 3.0f, NAN, 3.0f, -INFINITY, 0.5f};
    double z = 0;
    for (int i = 0; i < 6; i++)
        if (x[i] == x[i]) z += exp((double)x[i] - 3.0);
    const double lse = 3.0 + log(z);
    llmr_token_logprobs lp;
    llmr_logprobs_fill(x, 6, 0, 5, &lp);
    ck_assert_int_eq(lp.token, 0);
    ck_assert_double_eq_tol(lp.logprob, 1.0 - lse, 1e-6);
    ck_assert_uint_eq(lp.n_top, 5);
    const int want[5] = {1, 3, 0, 5, 2}; /* the tie 1 / 3 by id, then 1.0, 0.5, then NaN and -inf tie (as -inf) */
    for (int i = 0; i < 5; i++) ck_assert_int_eq(lp.top_ids[i], want[i]);
    ck_assert_double_eq_tol(lp.top_logprobs[0], 3.0 - lse, 1e-6);
    ck_assert_float_eq(lp.top_logprobs[0], lp.top_logprobs[1]);
    ck_assert(isinf(lp.top_logprobs[4]) && lp.top_logprobs[4] < 0);
    /* the chosen token may be one the alternatives do not list; the NaN one is -inf */
    llmr_logprobs_fill(x, 6, 2, 0, &lp);
    ck_assert_uint_eq(lp.n_top, 0);
    ck_assert(isinf(lp.logprob) && lp.logprob < 0);
    llmr_logprobs_fill(x, 6, 3, 50, &lp);
    ck_assert_uint_eq(lp.n_top, 6); /* capped by the vocab */
    ck_assert_int_eq(lp.top_ids[5], 4);
    /* probabilities sum to 1 over a large random vocab; capped at 20 alternatives */
    enum { V = 5000 };
    static float big[V];
    uint64_t r = 42;
    for (int i = 0; i < V; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        big[i] = (float)((r >> 40) % 2000) / 100.0f - 10.0f;
    }
    double sum = 0;
    for (int t = 0; t < V; t++) {
        llmr_logprobs_fill(big, V, t, t == 7 ? 100 : 0, &lp);
        sum += exp(lp.logprob);
        if (t == 7) {
            ck_assert_uint_eq(lp.n_top, LLMR_MAX_TOP_LOGPROBS);
            for (int i = 1; i < LLMR_MAX_TOP_LOGPROBS; i++) ck_assert(lp.top_logprobs[i] <= lp.top_logprobs[i - 1]);
            ck_assert_int_eq(lp.top_ids[0], llmr_argmax(big, V));
        }
    }
    ck_assert_double_eq_tol(sum, 1.0, 1e-4);
}
END_TEST

static Suite *sampling_suite(void) {
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, greedy_ties_to_lowest_id);
    tcase_add_test(tc, penalties_openai_semantics);
    tcase_add_test(tc, filters_and_proportions);
    tcase_add_test(tc, seed_determinism_full_vocab);
    tcase_add_test(tc, short_struct_size);
    tcase_add_test(tc, infinite_logits);
    tcase_add_test(tc, logprobs_fill);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(sampling_suite)
