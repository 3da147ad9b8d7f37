/* Unit tests for the node's wire-format parsing: model manifests (node/manifest.c), model lists
 * (node/sync.c), sync notices (node/api.c), and the worker pool (node/workers.c). */
#include <stdatomic.h>
#include <unistd.h>

#include "node/api.h"
#include "node/manifest.h"
#include "node/sync.h"
#include "node/workers.h"
#include "testutil.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char *GOOD =
    "{\"id\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\",\"revision\":\"main\","
    "\"commit\":\"0123456789abcdef0123456789abcdef01234567\",\"runtime\":\"gptoss\",\"architecture\":\"GptOssForCausalLM\","
    "\"files\":[{\"name\":\"config.json\",\"url\":\"http://h/c\",\"size\":10,\"sha256\":\"" SHA_A "\",\"optional\":false},"
    "{\"name\":\"model.safetensors\",\"url\":\"http://h/m\",\"size\":1000,\"sha256\":\"" SHA_B "\",\"optional\":false}],"
    "\"artifacts\":[{\"name\":\"metal/model.bin\",\"url\":\"http://h/a\",\"size\":5,\"sha256\":\"" SHA_A "\","
    "\"optional\":true,\"backend\":\"metal\",\"source_repo\":\"openai/gpt-oss-20b\"}],\"extra\":1}";

START_TEST(test_manifest_good) {
    llmr_manifest *m = NULL;
    char err[256] = "";
    ck_assert_msg(llmr_manifest_parse(GOOD, strlen(GOOD), &m, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(m->id, "openai/gpt-oss-20b");
    ck_assert_str_eq(m->architecture, "GptOssForCausalLM");
    ck_assert_uint_eq(m->n_files, 2);
    ck_assert_uint_eq(m->files[1].size, 1000);
    ck_assert_str_eq(m->files[1].sha256, SHA_B);
    ck_assert_ptr_null(m->files[0].backend);
    ck_assert_uint_eq(m->n_artifacts, 1);
    ck_assert_str_eq(m->artifacts[0].backend, "metal");
    ck_assert_int_eq(m->artifacts[0].optional, 1);
    ck_assert_uint_eq(llmr_manifest_total_size(m), 1010);
    llmr_manifest_free(m);
    llmr_manifest_free(NULL);
}
END_TEST

/* Replaces the first occurrence of `from` in GOOD by `to` and expects a failure naming `field`. */
static void expect_bad(const char *from, const char *to, const char *field) {
    char doc[4096];
    const char *at = strstr(GOOD, from);
    ck_assert_ptr_nonnull(at);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    llmr_manifest *m = NULL;
    char err[256] = "";
    ck_assert_msg(llmr_manifest_parse(doc, strlen(doc), &m, err, sizeof err) == -1, "accepted: %s", doc);
    ck_assert_msg(strstr(err, field) != NULL, "error '%s' does not name %s", err, field);
    ck_assert_ptr_null(m);
}

START_TEST(test_manifest_bad) {
    expect_bad("\"id\":\"openai/gpt-oss-20b\",", "", "id: missing");
    expect_bad("\"format\":\"safetensors\"", "\"format\":3", "format: expected a string");
    expect_bad("\"name\":\"config.json\"", "\"name\":\"../../etc/passwd\"", "files[0].name");
    expect_bad("\"name\":\"config.json\"", "\"name\":\"/abs\"", "files[0].name");
    expect_bad("\"name\":\"config.json\"", "\"name\":\"\"", "files[0].name: empty");
    expect_bad("\"size\":1000", "\"size\":-1", "files[1].size");
    expect_bad("\"size\":1000", "\"size\":\"1000\"", "files[1].size");
    expect_bad("\"sha256\":\"" SHA_B "\"", "\"sha256\":\"" "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef" "\"", "files[1].sha256");
    expect_bad("\"sha256\":\"" SHA_B "\"", "\"sha256\":\"abc\"", "files[1].sha256");
    expect_bad("\"url\":\"http://h/m\"", "\"url\":\"\"", "files[1].url: empty");
    expect_bad("\"optional\":false}]", "\"optional\":\"no\"}]", "files[1].optional");
    expect_bad(",\"backend\":\"metal\"", "", "artifacts[0].backend: missing");
    expect_bad("\"name\":\"model.safetensors\"", "\"name\":\"config.json\"", "appears twice");
    expect_bad("\"files\":[", "\"files\":7,\"x\":[", "files: expected an array");
    llmr_manifest *m = NULL;
    char err[256];
    ck_assert_int_eq(llmr_manifest_parse("{", 1, &m, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not valid JSON"));
    ck_assert_int_eq(llmr_manifest_parse("[]", 2, &m, err, sizeof err), -1);
    ck_assert_int_eq(llmr_manifest_parse(NULL, 0, &m, err, sizeof err), -1);
}
END_TEST

static json_t *ids(const char *text) {
    json_t *doc = json_loads(text, 0, NULL);
    json_t *l = llmr_sync_parse_model_list(doc);
    json_decref(doc);
    return l;
}

START_TEST(test_model_list_shapes) {
    const char *shapes[] = {
        "[\"a/b\",\"c/d\"]",
        "{\"object\":\"list\",\"data\":[{\"id\":\"a/b\",\"format\":\"safetensors\"},{\"id\":\"c/d\"}]}",
        "{\"models\":[\"a/b\",\"c/d\"]}",
        "{\"ok\":true,\"models\":[{\"id\":\"a/b\"},\"c/d\"]}",
    };
    for (size_t i = 0; i < 4; i++) {
        json_t *l = ids(shapes[i]);
        ck_assert_msg(l && json_array_size(l) == 2, "shape %zu", i);
        ck_assert_str_eq(json_string_value(json_array_get(l, 1)), "c/d");
        json_decref(l);
    }
    ck_assert_ptr_null(ids("{\"nothing\":1}"));
    ck_assert_ptr_null(ids("7"));
    ck_assert_ptr_null(llmr_sync_parse_model_list(NULL));
    /* Hostile or malformed ids never reach the disk. */
    json_t *l = ids("[\"../../x\",\"/abs\",\"ok/m\",5,{\"id\":null},\"a//b\",\"\"]");
    ck_assert_int_eq(json_array_size(l), 1);
    ck_assert_str_eq(json_string_value(json_array_get(l, 0)), "ok/m");
    json_decref(l);
}
END_TEST

static int notice(const char *text, char *err, size_t es) {
    json_t *doc = json_loads(text, 0, NULL);
    int rc = llmr_node_api_check_notice(doc, err, es);
    json_decref(doc);
    return rc;
}

START_TEST(test_sync_notice_check) {
    char err[256];
    ck_assert_int_eq(notice("{\"event\":\"registered\",\"model\":\"a/b\",\"models\":[\"a/b\"]}", err, sizeof err), 0);
    ck_assert_int_eq(notice("{\"event\":\"resync\",\"models\":[]}", err, sizeof err), 0);
    ck_assert_int_eq(notice("{\"event\":\"deleted\",\"models\":[]}", err, sizeof err), 0);
    ck_assert_int_eq(notice("{\"models\":[]}", err, sizeof err), -1);
    ck_assert_str_eq(err, "event: missing");
    ck_assert_int_eq(notice("{\"event\":\"boom\",\"models\":[]}", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "boom"));
    ck_assert_int_eq(notice("{\"event\":\"resync\"}", err, sizeof err), -1);
    ck_assert_str_eq(err, "models: missing");
    ck_assert_int_eq(notice("{\"event\":\"resync\",\"models\":[1]}", err, sizeof err), -1);
    ck_assert_str_eq(err, "models[0]: expected a string");
    ck_assert_int_eq(notice("{\"event\":\"resync\",\"model\":4,\"models\":[]}", err, sizeof err), -1);
    ck_assert_int_eq(notice("[]", err, sizeof err), -1);
}
END_TEST

static atomic_int ran, discarded;
static void run_one(void *arg) { (void)arg; usleep(20000); atomic_fetch_add(&ran, 1); }
static void discard_one(void *arg) { (void)arg; atomic_fetch_add(&discarded, 1); }
static atomic_int concurrent, max_concurrent;
static void run_counted(void *arg) {
    (void)arg;
    int c = atomic_fetch_add(&concurrent, 1) + 1;
    int m = atomic_load(&max_concurrent);
    while (c > m && !atomic_compare_exchange_weak(&max_concurrent, &m, c)) {}
    usleep(20000);
    atomic_fetch_sub(&concurrent, 1);
    atomic_fetch_add(&ran, 1);
}

START_TEST(test_workers_bounded_and_drained) {
    atomic_store(&ran, 0);
    atomic_store(&max_concurrent, 0);
    llmr_workers *w = llmr_workers_create(2);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(llmr_workers_submit(w, run_counted, NULL, NULL), 0);
    while (llmr_workers_pending(w) > 0) usleep(5000);
    ck_assert_int_eq(atomic_load(&ran), 8);
    ck_assert_int_eq(atomic_load(&max_concurrent), 2); /* the bound holds, and is used */
    llmr_workers_destroy(w);
    /* Destroy with a backlog: running jobs finish, queued ones are discarded, none lost. */
    atomic_store(&ran, 0);
    atomic_store(&discarded, 0);
    w = llmr_workers_create(1);
    for (int i = 0; i < 10; i++) llmr_workers_submit(w, run_one, discard_one, NULL);
    usleep(30000);
    llmr_workers_destroy(w);
    ck_assert_int_eq(atomic_load(&ran) + atomic_load(&discarded), 10);
    ck_assert_int_gt(atomic_load(&discarded), 0);
    ck_assert_ptr_null(llmr_workers_create(0));
    ck_assert_ptr_null(llmr_workers_create(65));
    llmr_workers_destroy(NULL);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("node_sync");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_manifest_good);
    tcase_add_test(tc, test_manifest_bad);
    tcase_add_test(tc, test_model_list_shapes);
    tcase_add_test(tc, test_sync_notice_check);
    tcase_add_test(tc, test_workers_bounded_and_drained);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
