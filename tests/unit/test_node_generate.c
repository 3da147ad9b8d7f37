/* Unit tests for node/generate.c: request parsing against schema/node-generate.request and the
 * streaming stop-string matcher (never emits a stop string, never splits UTF-8, holds back only
 * what could still begin a stop string). */
#include <pthread.h>
#include <stdint.h>

#include "node/generate.h"
#include "testutil.h"

static int parse(const char *text, llmr_gen_params *p, char *err, size_t es) {
    json_t *j = json_loads(text, 0, NULL);
    int rc = llmr_gen_params_parse(j, p, err, es);
    json_decref(j);
    return rc;
}

START_TEST(test_params_defaults_and_fields) {
    llmr_gen_params p;
    char err[256];
    ck_assert_int_eq(parse("{\"model\":\"a/b\",\"prompt\":\"hi\"}", &p, err, sizeof err), 0);
    ck_assert_str_eq(p.model, "a/b");
    ck_assert_str_eq(p.prompt, "hi");
    ck_assert_uint_eq(p.max_tokens, 256);
    ck_assert(p.temperature == 1.0f && p.top_p == 1.0f && p.harmony == 1 && !p.has_seed && p.logprobs == -1);
    llmr_gen_params_free(&p);
    ck_assert_int_eq(parse("{\"model\":\"a/b\",\"prompt_ids\":[1,2,3],\"max_tokens\":5,\"temperature\":0,\"top_p\":0.5,"
                           "\"top_k\":40,\"min_p\":0.1,\"seed\":-3,\"frequency_penalty\":-2,\"presence_penalty\":2,"
                           "\"stop\":[\"a\",\"bc\"],\"parse\":\"none\",\"request_id\":\"r1\",\"logprobs\":20}", &p, err, sizeof err), 0);
    ck_assert_int_eq(p.logprobs, 20);
    ck_assert_uint_eq(p.n_prompt_ids, 3);
    ck_assert_int_eq(p.prompt_ids[2], 3);
    ck_assert_uint_eq(p.max_tokens, 5);
    ck_assert_int_eq(p.top_k, 40);
    ck_assert(p.has_seed && p.harmony == 0);
    ck_assert_uint_eq(p.n_stop, 2);
    ck_assert_str_eq(p.stop[1], "bc");
    ck_assert_str_eq(p.request_id, "r1");
    llmr_gen_params_free(&p);
}
END_TEST

static void bad(const char *text, const char *field) {
    llmr_gen_params p;
    char err[256] = "";
    ck_assert_msg(parse(text, &p, err, sizeof err) == -1, "accepted %s", text);
    ck_assert_msg(strstr(err, field) != NULL, "'%s' does not name %s", err, field);
}

START_TEST(test_params_refused) {
    bad("{\"prompt\":\"x\"}", "model");
    bad("{\"model\":\"a\"}", "exactly one of prompt and prompt_ids");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"prompt_ids\":[1]}", "exactly one");
    bad("{\"model\":\"a\",\"prompt\":5}", "prompt: expected a string");
    bad("{\"model\":\"a\",\"prompt_ids\":[]}", "prompt_ids");
    bad("{\"model\":\"a\",\"prompt_ids\":[1,-2]}", "prompt_ids[1]");
    bad("{\"model\":\"a\",\"prompt_ids\":[1.5]}", "prompt_ids[0]");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"temperature\":2.5}", "temperature");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"top_p\":0}", "top_p");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"top_k\":-1}", "top_k");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"seed\":1.5}", "seed");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"stop\":[\"\"]}", "stop[0]");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"parse\":\"xml\"}", "parse");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"logprobs\":21}", "logprobs: expected an integer in [0, 20]");
    bad("{\"model\":\"a\",\"prompt\":\"x\",\"logprobs\":true}", "logprobs");
    llmr_gen_params p;
    char err[64];
    ck_assert_int_eq(llmr_gen_params_parse(NULL, &p, err, sizeof err), -1);
}
END_TEST

/* Feeds chunks, collects output; returns 1 if a stop hit. */
static int feed(const char *const *stops, size_t n_stops, const char *const *chunks, char *out, size_t cap) {
    llmr_stopper s;
    llmr_stopper_init(&s, stops, n_stops);
    out[0] = 0;
    int hit = 0;
    for (size_t i = 0; chunks[i] && !hit; i++) {
        const char *o;
        size_t n;
        hit = llmr_stopper_push(&s, chunks[i], strlen(chunks[i]), &o, &n);
        ck_assert_int_ge(hit, 0);
        strncat(out, o, n < cap - strlen(out) - 1 ? n : cap - strlen(out) - 1);
    }
    if (!hit) {
        const char *o;
        size_t n;
        llmr_stopper_flush(&s, &o, &n);
        strncat(out, o, n);
    }
    llmr_stopper_free(&s);
    return hit;
}

START_TEST(test_stopper) {
    char out[256];
    const char *stops[] = {"END", "\n\n"};
    const char *c1[] = {"Hello wor", "ld E", "N", "D more", NULL};
    ck_assert_int_eq(feed(stops, 2, c1, out, sizeof out), 1);
    ck_assert_str_eq(out, "Hello world ");
    const char *c2[] = {"no stop ", "here EN", NULL}; /* a tail that never completes is flushed */
    ck_assert_int_eq(feed(stops, 2, c2, out, sizeof out), 0);
    ck_assert_str_eq(out, "no stop here EN");
    const char *c3[] = {"a\n", "\nb", NULL};
    ck_assert_int_eq(feed(stops, 2, c3, out, sizeof out), 1);
    ck_assert_str_eq(out, "a");
    const char *c4[] = {"plain", " text", NULL};
    ck_assert_int_eq(feed(NULL, 0, c4, out, sizeof out), 0);
    ck_assert_str_eq(out, "plain text");
    /* The earliest of two stop strings wins. */
    const char *stops2[] = {"cd", "b"};
    const char *c5[] = {"abcd", NULL};
    ck_assert_int_eq(feed(stops2, 2, c5, out, sizeof out), 1);
    ck_assert_str_eq(out, "a");
}
END_TEST

START_TEST(test_stopper_utf8) {
    /* Emitted chunks never end inside a UTF-8 character even when held-back bytes would cut one. */
    const char *stops[] = {"zzzz"};
    llmr_stopper s;
    llmr_stopper_init(&s, stops, 1);
    const char *o;
    size_t n;
    ck_assert_int_eq(llmr_stopper_push(&s, "ab\xc3\xa9\xe2\x82\xac", 7, &o, &n), 0); /* "abé€" */
    /* holds back 3 bytes (max_len - 1); the cut must not split é or € */
    ck_assert(n == 2 || n == 4);
    char first[16];
    memcpy(first, o, n);
    first[n] = 0;
    ck_assert_int_eq(llmr_stopper_push(&s, "xyz", 3, &o, &n), 0);
    const char *tail;
    size_t tn;
    char all[64];
    snprintf(all, sizeof all, "%s%.*s", first, (int)n, o);
    llmr_stopper_flush(&s, &tail, &tn);
    strncat(all, tail, tn);
    ck_assert_str_eq(all, "ab\xc3\xa9\xe2\x82\xacxyz");
    llmr_stopper_free(&s);
}
END_TEST

/* Each stopper owns the bytes it returns: two alive in one thread do not overwrite each other's output
 * (they shared a thread-local copy once), and one used and freed on a thread that then exits leaves
 * nothing behind (that copy leaked per request thread; `make asan-test` reports such a leak). */
START_TEST(test_stopper_owns_its_output) {
    const char *stops[] = {"#"};
    llmr_stopper a, b;
    llmr_stopper_init(&a, stops, 1);
    llmr_stopper_init(&b, stops, 1);
    const char *oa, *ob;
    size_t na, nb;
    ck_assert_int_eq(llmr_stopper_push(&a, "first stream", 12, &oa, &na), 0);
    ck_assert_int_eq(llmr_stopper_push(&b, "SECOND", 6, &ob, &nb), 0);
    ck_assert_int_eq((int)na, 12); /* a one-byte stop string holds nothing back */
    ck_assert_int_eq((int)nb, 6);
    ck_assert(memcmp(oa, "first stream", 12) == 0);
    ck_assert(memcmp(ob, "SECOND", 6) == 0);
    llmr_stopper_free(&a);
    llmr_stopper_free(&b);
}
END_TEST

static void *stopper_thread(void *arg) {
    (void)arg;
    const char *stops[] = {"END"};
    const char *chunks[] = {"a request's text that is long enough to be emitted", " and more", NULL};
    char out[128];
    return (void *)(intptr_t)feed(stops, 1, chunks, out, sizeof out);
}

START_TEST(test_stopper_on_exiting_threads) {
    for (int i = 0; i < 4; i++) {
        pthread_t th;
        void *hit = NULL;
        ck_assert_int_eq(pthread_create(&th, NULL, stopper_thread, NULL), 0);
        ck_assert_int_eq(pthread_join(th, &hit), 0);
        ck_assert_int_eq((int)(intptr_t)hit, 0);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("node_generate");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_params_defaults_and_fields);
    tcase_add_test(tc, test_params_refused);
    tcase_add_test(tc, test_stopper);
    tcase_add_test(tc, test_stopper_utf8);
    tcase_add_test(tc, test_stopper_owns_its_output);
    tcase_add_test(tc, test_stopper_on_exiting_threads);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
