/* Unit tests for the Prometheus text renderer of the engine host (node/engine/engine_metrics.c):
 * the exposition is well-formed (format 0.0.4: HELP/TYPE before samples, one TYPE per family,
 * escaped label values, numeric values) and reports what the host saw. */
#include "node/engine/engine_host.h"
#include "tests/unit/engine_fixture.h"

#include <jansson.h>
#include <regex.h>

/* Checks the whole text; returns NULL when valid, else a static message naming the bad line. */
static const char *validate(const char *text) {
    static char why[2300];
    regex_t sample, type, help;
    regcomp(&sample, "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\[\\\\\"n])*\",?)*\\})? "
                     "(-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?|NaN|[-+]Inf)$", REG_EXTENDED);
    regcomp(&type, "^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$", REG_EXTENDED);
    regcomp(&help, "^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$", REG_EXTENDED);
    char typed[128][96];
    int n_typed = 0;
    const char *bad = NULL;
    char line[2048];
    for (const char *p = text; *p && !bad;) {
        const char *nl = strchr(p, '\n');
        if (!nl) { bad = "last line lacks a newline"; break; }
        size_t len = (size_t)(nl - p) < sizeof line - 1 ? (size_t)(nl - p) : sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        p = nl + 1;
        regmatch_t m[2];
        if (regexec(&type, line, 2, m, 0) == 0) {
            char name[96];
            snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
            for (int i = 0; i < n_typed; i++)
                if (strcmp(typed[i], name) == 0) { snprintf(why, sizeof why, "second TYPE for %s", name); bad = why; }
            if (n_typed < 128) snprintf(typed[n_typed++], sizeof typed[0], "%s", name);
            continue;
        }
        if (regexec(&help, line, 0, NULL, 0) == 0) continue;
        if (regexec(&sample, line, 2, m, 0) != 0) { snprintf(why, sizeof why, "malformed line: %.400s", line); bad = why; break; }
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
        int found = n_typed > 0 && strcmp(typed[n_typed - 1], name) == 0;
        if (!found) { snprintf(why, sizeof why, "sample outside its family (no TYPE just before): %.400s", line); bad = why; }
    }
    regfree(&sample);
    regfree(&type);
    regfree(&help);
    return bad;
}

START_TEST(validator_rejects_bad_text) {
    ck_assert_ptr_null(validate("# HELP a x\n# TYPE a gauge\na 1\na{l=\"q\\\"\"} 2.5\n"));
    ck_assert_ptr_nonnull(validate("a 1\n"));                                  /* no TYPE */
    ck_assert_ptr_nonnull(validate("# TYPE a gauge\na{l=\"un\"escaped\"} 1\n"));
    ck_assert_ptr_nonnull(validate("# TYPE a gauge\na one\n"));
    ck_assert_ptr_nonnull(validate("# TYPE a gauge\n# TYPE a gauge\n"));
    ck_assert_ptr_nonnull(validate("# TYPE a gauge\na 1"));
}
END_TEST

static int count_cb(void *u, int32_t t) { (void)t; (*(int *)u)++; return 0; }

START_TEST(metrics_report_the_host_state) {
    char *root = llmr_test_tmpdir(), engines[2048], models[2048];
    snprintf(engines, sizeof engines, "%s/engines", root);
    snprintf(models, sizeof models, "%s/models", root);
    mkdir(engines, 0755);
    mkdir(models, 0755);
    fx_install(engines, "testengine", "1.0.0");
    llmr_resource_provider *fake = llmr_resource_provider_fake_create();
    llmr_resource_fake_set(fake, 1000, 950, 2000, 100);
    llmr_engine_budget b = {"testengine", 5ull << 20};
    llmr_engine_host_config cfg = {0};
    cfg.engines_dir = engines;
    cfg.provider = fake;
    cfg.no_thread = 1;
    cfg.budgets = &b;
    cfg.n_budgets = 1;
    llmr_engine_host *h;
    char err[1024];
    ck_assert_int_eq(llmr_engine_host_create(&cfg, &h, err, sizeof err), LLMR_ENGINE_OK);
    char *dir = fx_model(models, "m", "{}");
    const char *weird = "org/we\"ird\\id";
    llmr_model_descriptor d = fx_desc(weird, dir);
    llmr_resource_fake_set(fake, 100ull << 20, 0, 2000, 100);
    ck_assert_msg(llmr_engine_host_load(h, &d, NULL, 0, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_host_session *s;
    ck_assert_int_eq(llmr_engine_host_session_create(h, weird, NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    llmr_generate_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.max_tokens = 5;
    int n = 0;
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, count_cb, &n, NULL, err, sizeof err), LLMR_ENGINE_OK);
    llmr_resource_fake_set(fake, 1000, 950, 2000, 100); /* alert; the only model is busy: stays */
    ck_assert_int_eq(llmr_engine_host_poll(h, NULL, err, sizeof err), 0);
    size_t len = 0;
    char *text = llmr_engine_host_metrics_text(h, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, strlen(text));
    const char *bad = validate(text);
    ck_assert_msg(bad == NULL, "%s\n---\n%s", bad, text);
    const char *want[] = {
        "llmr_node_vram_total_bytes 1000\n", "llmr_node_vram_used_bytes 950\n", "llmr_node_ram_total_bytes 2000\n",
        "llmr_node_memory_usage_ratio{resource=\"vram\"} 0.950000\n", "llmr_node_memory_alert{resource=\"vram\"} 1\n",
        "llmr_node_memory_alert{resource=\"ram\"} 0\n", "llmr_node_memory_alerts_total{resource=\"vram\"} 1\n",
        "llmr_engine_plugin_info{engine=\"testengine\",version=\"1.0.0\",abi=\"1.0\",state=\"active\"} 1\n",
        "llmr_engine_vram_budget_bytes{engine=\"testengine\"} 5242880\n",
        "llmr_models_loaded 1\n",
        "llmr_model_loaded{model=\"org/we\\\"ird\\\\id\",engine=\"testengine\",version=\"1.0.0\"} 1\n",
        "llmr_model_sessions{model=\"org/we\\\"ird\\\\id\"} 1\n",
        "llmr_model_tokens_generated_total{model=\"org/we\\\"ird\\\\id\"} 5\n",
        "llmr_sessions_active 1\n", "llmr_tokens_generated_total 5\n", "llmr_watchdog_timeouts_total 0\n",
        "llmr_lru_unloads_total 0\n", "llmr_load_refusals_total 0\n", "llmr_engine_reloads_total 1\n",
        "# TYPE llmr_tokens_generated_total counter\n", "# TYPE llmr_sessions_active gauge\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]) != NULL, "missing: %s\n---\n%s", want[i], text);
    free(text);
    /* the heartbeat part */
    json_t *hb = llmr_engine_host_heartbeat_json(h);
    ck_assert_ptr_nonnull(hb);
    char *dump = json_dumps(hb, JSON_SORT_KEYS | JSON_COMPACT);
    const char *want_hb = "{\"alerts\":[\"vram_high: VRAM use 95.0% >= 90%\"],"
                          "\"gpus\":[{\"index\":0,\"memory_free_bytes\":50,\"memory_total_bytes\":1000}],"
                          "\"models\":[{\"engine\":\"testengine\",\"id\":\"org/we\\\"ird\\\\id\",\"loaded\":true,\"state\":\"ready\"}],"
                          "\"ram_free_bytes\":1900,\"ram_total_bytes\":2000}";
    ck_assert_str_eq(dump, want_hb);
    free(dump);
    json_decref(hb);
    /* FILE variant writes the same */
    FILE *f = tmpfile();
    ck_assert_int_eq(llmr_engine_host_write_metrics(h, f), 0);
    ck_assert_int_gt(ftell(f), 100);
    fclose(f);
    llmr_engine_host_session_destroy(s);
    llmr_engine_host_destroy(h);
    free(dir);
    fx_rm_rf(root);
    free(root);
}
END_TEST

START_TEST(no_vram_means_no_vram_samples) {
    char *root = llmr_test_tmpdir();
    llmr_resource_provider *fake = llmr_resource_provider_fake_create();
    llmr_engine_host_config cfg = {0};
    cfg.engines_dir = root;
    cfg.provider = fake;
    cfg.no_thread = 1;
    llmr_engine_host *h;
    char err[256];
    ck_assert_int_eq(llmr_engine_host_create(&cfg, &h, err, sizeof err), LLMR_ENGINE_OK);
    char *text = llmr_engine_host_metrics_text(h, NULL); /* never polled: no memory samples yet */
    ck_assert_ptr_null(validate(text));
    ck_assert_ptr_null(strstr(text, "llmr_node_vram_total_bytes"));
    ck_assert_ptr_nonnull(strstr(text, "llmr_models_loaded 0\n"));
    free(text);
    llmr_engine_host_destroy(h);
    fx_rm_rf(root);
    free(root);
}
END_TEST

static Suite *metrics_suite(void) {
    Suite *s = suite_create("engine_metrics");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, validator_rejects_bad_text);
    tcase_add_test(tc, metrics_report_the_host_state);
    tcase_add_test(tc, no_vram_means_no_vram_samples);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(metrics_suite)
