/* Unit tests for router/artifacts: supported_models.json parsing (the shipped file included) and
 * allowlist globs. */
#include "router/artifacts.h"
#include "tests/unit/testutil.h"

static router_artifacts *parse(const char *text, const char *allow, char *err, size_t es) {
    return router_artifacts_parse("sm.json", text, strlen(text), allow, err, es);
}

START_TEST(shipped_file) {
    char err[512];
    router_artifacts *a = router_artifacts_load("supported_models.json", "openai/*,nvidia/*", err, sizeof err);
    ck_assert_msg(a != NULL, "%s", err);
    const router_supported_model *m = router_artifacts_find(a, "OpenAI/GPT-OSS-20B");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->n_artifacts, 1);
    ck_assert_str_eq(m->artifacts[0].backend, "metal");
    ck_assert_str_eq(m->artifacts[0].source_repo, "openai/gpt-oss-20b");
    ck_assert_str_eq(m->artifacts[0].path, "metal/model.bin");
    ck_assert_str_eq(m->artifacts[0].name, "model.metal.bin");
    ck_assert_ptr_null(router_artifacts_find(a, "meta/llama"));
    router_artifacts_destroy(a);
}
END_TEST

START_TEST(allowlist_globs) {
    char err[512];
    router_artifacts *a = parse("{\"models\":[]}", " openai/* , nvidia/*,exact/repo,,", err, sizeof err);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(router_artifacts_allowed(a, "openai/gpt-oss-20b"), 1);
    ck_assert_int_eq(router_artifacts_allowed(a, "OpenAI/gpt-oss-120b"), 1);
    ck_assert_int_eq(router_artifacts_allowed(a, "nvidia/x"), 1);
    ck_assert_int_eq(router_artifacts_allowed(a, "exact/repo"), 1);
    ck_assert_int_eq(router_artifacts_allowed(a, "exact/repo2"), 0);
    ck_assert_int_eq(router_artifacts_allowed(a, "evil/openai"), 0);
    ck_assert_int_eq(router_artifacts_allowed(a, "openaix/model"), 0);
    router_artifacts_destroy(a);
    a = parse("{\"models\":[]}", "", err, sizeof err);
    ck_assert_int_eq(router_artifacts_allowed(a, "openai/gpt-oss-20b"), 0);
    router_artifacts_destroy(a);
    ck_assert_int_eq(router_artifacts_allowed(NULL, "openai/x"), 0);
}
END_TEST

START_TEST(bad_files_named) {
    struct { const char *text, *needle; } cases[] = {
        {"{", "invalid JSON"},
        {"[]", "'models' array"},
        {"{\"models\":{}}", "'models' array"},
        {"{\"models\":[5]}", "models[0] must be an object"},
        {"{\"models\":[{\"artifacts\":[]}]}", "models[0].id"},
        {"{\"models\":[{\"id\":\"a/b\"}]}", "models[0].artifacts"},
        {"{\"models\":[{\"id\":\"a/b\",\"artifacts\":[{\"backend\":\"metal\",\"source_repo\":\"a/b\",\"path\":\"../x\",\"name\":\"n\"}]}]}",
         "models[0].artifacts[0].path"},
        {"{\"models\":[{\"id\":\"a/b\",\"artifacts\":[{\"backend\":\"metal\",\"source_repo\":\"a/b\",\"path\":\"x\",\"name\":\"d/n\"}]}]}",
         "models[0].artifacts[0].name"},
        {"{\"models\":[{\"id\":\"a/b\",\"artifacts\":[{\"backend\":\"metal\",\"source_repo\":\"ab\",\"path\":\"x\",\"name\":\"n\"}]}]}",
         "source_repo"},
        {"{\"models\":[{\"id\":\"a/b\",\"artifacts\":[{\"source_repo\":\"a/b\",\"path\":\"x\",\"name\":\"n\"}]}]}",
         "artifacts[0].backend"},
        {"{\"models\":[{\"id\":\"a/b\",\"artifacts\":[]},{\"id\":\"A/B\",\"artifacts\":[]}]}", "listed twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        router_artifacts *a = parse(cases[i].text, "openai/*", err, sizeof err);
        ck_assert_msg(a == NULL, "case %zu accepted", i);
        ck_assert_msg(strstr(err, cases[i].needle) && strstr(err, "sm.json"), "case %zu: '%s' lacks '%s'", i, err,
                      cases[i].needle);
    }
    char err[512];
    ck_assert_ptr_null(router_artifacts_load("/nonexistent/sm.json", "", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/sm.json"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_artifacts");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, shipped_file);
    tcase_add_test(tc, allowlist_globs);
    tcase_add_test(tc, bad_files_named);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
