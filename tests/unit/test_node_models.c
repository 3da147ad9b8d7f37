/* Unit tests for node/models.c: the per-model state machine and the heartbeat JSON it feeds. */
#include <pthread.h>

#include "node/models.h"
#include "testutil.h"

START_TEST(test_state_names_roundtrip) {
    for (int s = 0; s < LLMR_MODEL_STATE_COUNT; s++)
        ck_assert_int_eq(llmr_model_state_parse(llmr_model_state_name((llmr_model_state)s)), s);
    ck_assert_int_eq(llmr_model_state_parse("bogus"), -1);
    ck_assert_int_eq(llmr_model_state_parse(NULL), -1);
    ck_assert_str_eq(llmr_model_state_name((llmr_model_state)99), "unknown");
}
END_TEST

START_TEST(test_happy_path) {
    llmr_models *m = llmr_models_create();
    char err[256];
    uint64_t g1 = 0, g2 = 0;
    ck_assert_int_eq(llmr_models_add(m, "openai/gpt-oss-20b", &g1), 1);
    ck_assert_int_eq(llmr_models_add(m, "openai/gpt-oss-20b", &g2), 0);
    ck_assert_uint_eq(g1, g2);
    llmr_model_state path[] = {LLMR_MODEL_DOWNLOADING, LLMR_MODEL_VERIFYING, LLMR_MODEL_LOADING, LLMR_MODEL_READY};
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(llmr_models_set_state(m, "openai/gpt-oss-20b", path[i], err, sizeof err, NULL) == 0, "%s", err);
    llmr_model_view v;
    ck_assert_int_eq(llmr_models_get(m, "openai/gpt-oss-20b", &v), 0);
    ck_assert_int_eq(v.state, LLMR_MODEL_READY);
    ck_assert_str_eq(v.reason, "");
    llmr_models_destroy(m);
}
END_TEST

START_TEST(test_illegal_transitions_refused) {
    llmr_models *m = llmr_models_create();
    char err[256];
    llmr_models_add(m, "a/b", NULL);
    /* pending -> ready skips every check: refused and named. */
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_READY, err, sizeof err, NULL), -1);
    ck_assert_ptr_nonnull(strstr(err, "pending -> ready"));
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_LOADING, err, sizeof err, NULL), -1);
    ck_assert_int_eq(llmr_models_set_state(m, "nope/x", LLMR_MODEL_DOWNLOADING, err, sizeof err, NULL), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown model nope/x"));
    /* downloading -> ready refused; failed -> pending allowed (retry), failed -> ready refused. */
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_DOWNLOADING, err, sizeof err, NULL), 0);
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_READY, err, sizeof err, NULL), -1);
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_FAILED, err, sizeof err, "sha256 mismatch for %s", "x.safetensors"), 0);
    llmr_model_view v;
    llmr_models_get(m, "a/b", &v);
    ck_assert_str_eq(v.reason, "sha256 mismatch for x.safetensors");
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_READY, err, sizeof err, NULL), -1);
    ck_assert_int_eq(llmr_models_set_state(m, "a/b", LLMR_MODEL_PENDING, err, sizeof err, NULL), 0);
    llmr_models_get(m, "a/b", &v);
    ck_assert_str_eq(v.reason, "");
    llmr_models_destroy(m);
}
END_TEST

START_TEST(test_transition_table) {
    /* Exhaustive: exactly the documented arrows (plus self-moves) are legal. */
    static const int legal[7][7] = {
        /* to:      P  D  V  L  R  U  F */
        /* P */    {1, 1, 1, 0, 0, 1, 1},
        /* D */    {0, 1, 1, 0, 0, 0, 1},
        /* V */    {0, 1, 1, 1, 0, 1, 1},
        /* L */    {0, 0, 0, 1, 1, 0, 1},
        /* R */    {0, 0, 0, 1, 1, 0, 1},
        /* U */    {1, 0, 0, 0, 0, 1, 0},
        /* F */    {1, 0, 0, 0, 0, 0, 1},
    };
    for (int f = 0; f < 7; f++)
        for (int t = 0; t < 7; t++)
            ck_assert_msg(llmr_model_transition_ok((llmr_model_state)f, (llmr_model_state)t) == legal[f][t], "%s -> %s",
                          llmr_model_state_name((llmr_model_state)f), llmr_model_state_name((llmr_model_state)t));
    ck_assert_int_eq(llmr_model_transition_ok((llmr_model_state)7, LLMR_MODEL_READY), 0);
}
END_TEST

START_TEST(test_progress_and_json) {
    llmr_models *m = llmr_models_create();
    char err[128];
    llmr_models_add(m, "z/z", NULL);
    llmr_models_add(m, "a/a", NULL);
    llmr_models_set_state(m, "z/z", LLMR_MODEL_DOWNLOADING, err, sizeof err, NULL);
    llmr_model_progress p = {.bytes_done = 50, .bytes_total = 200, .bytes_per_second = 10.0, .eta_seconds = 15};
    snprintf(p.file, sizeof p.file, "model.safetensors");
    llmr_models_set_progress(m, "z/z", &p);
    json_t *arr = llmr_models_json(m);
    ck_assert_int_eq(json_array_size(arr), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(arr, 0), "id")), "a/a"); /* sorted */
    json_t *z = json_array_get(arr, 1);
    ck_assert_str_eq(json_string_value(json_object_get(z, "state")), "downloading");
    json_t *pj = json_object_get(z, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(pj, "bytes_done")), 50);
    ck_assert(json_real_value(json_object_get(pj, "percent")) == 25.0);
    ck_assert_str_eq(json_string_value(json_object_get(pj, "file")), "model.safetensors");
    json_decref(arr);
    /* Progress disappears once the download is over. */
    llmr_models_set_state(m, "z/z", LLMR_MODEL_VERIFYING, err, sizeof err, NULL);
    llmr_models_set_state(m, "z/z", LLMR_MODEL_LOADING, err, sizeof err, NULL);
    llmr_model_view v;
    llmr_models_get(m, "z/z", &v);
    ck_assert_int_eq(v.has_progress, 0);
    size_t counts[LLMR_MODEL_STATE_COUNT];
    llmr_models_count(m, counts);
    ck_assert_uint_eq(counts[LLMR_MODEL_PENDING], 1);
    ck_assert_uint_eq(counts[LLMR_MODEL_LOADING], 1);
    ck_assert_int_eq(llmr_models_remove(m, "z/z"), 1);
    ck_assert_int_eq(llmr_models_remove(m, "z/z"), 0);
    uint64_t g;
    ck_assert_int_eq(llmr_models_add(m, "z/z", &g), 1);
    ck_assert_uint_gt(g, v.generation); /* a re-added model is a new generation */
    llmr_models_destroy(m);
}
END_TEST

START_TEST(test_bad_ids) {
    llmr_models *m = llmr_models_create();
    char big[LLMR_MODEL_ID_MAX + 10];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ck_assert_int_eq(llmr_models_add(m, "", NULL), -1);
    ck_assert_int_eq(llmr_models_add(m, NULL, NULL), -1);
    ck_assert_int_eq(llmr_models_add(m, big, NULL), -1);
    llmr_model_view *views;
    ck_assert_int_eq(llmr_models_snapshot(m, &views), 0);
    ck_assert_ptr_null(views);
    llmr_models_destroy(m);
    llmr_models_destroy(NULL);
}
END_TEST

static void *hammer(void *arg) {
    llmr_models *m = arg;
    char id[32], err[128];
    for (int i = 0; i < 2000; i++) {
        snprintf(id, sizeof id, "m/%d", i % 17);
        llmr_models_add(m, id, NULL);
        llmr_models_set_state(m, id, LLMR_MODEL_DOWNLOADING, err, sizeof err, NULL);
        json_decref(llmr_models_json(m));
        if (i % 5 == 0) llmr_models_remove(m, id);
    }
    return NULL;
}

START_TEST(test_threads) {
    llmr_models *m = llmr_models_create();
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, m);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    llmr_model_view *views;
    long n = llmr_models_snapshot(m, &views);
    ck_assert_int_le(n, 17);
    for (long i = 1; i < n; i++) ck_assert_int_lt(strcmp(views[i - 1].id, views[i].id), 0);
    free(views);
    llmr_models_destroy(m);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("node_models");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_state_names_roundtrip);
    tcase_add_test(tc, test_happy_path);
    tcase_add_test(tc, test_illegal_transitions_refused);
    tcase_add_test(tc, test_transition_table);
    tcase_add_test(tc, test_progress_and_json);
    tcase_add_test(tc, test_bad_ids);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
