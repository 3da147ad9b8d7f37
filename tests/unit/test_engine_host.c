/* Unit tests for node/engine/engine_host with the test plugin (tests/plugins/testengine): plugin
 * scanning and rejection (manifest fields, ABI both ways), loading, streaming generate, cancel,
 * VRAM refusal and budgets (T106, T107, T115), thresholds and LRU unload (T103–T105, T114), the stall
 * watchdog (T112, T116) and hot reload with requests in flight (T101, T102, T113). */
#include "node/engine/engine_host.h"
#include "tests/unit/engine_fixture.h"

#include <dlfcn.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>

#define MiB (1024ull * 1024ull)

typedef struct fixture {
    char *root, engines[4200], models[4200];
    llmr_engine_host *h;
    llmr_resource_provider *fake; /* owned by the host once created */
} fixture;

static void fx_open(fixture *f) {
    memset(f, 0, sizeof *f);
    f->root = llmr_test_tmpdir();
    ck_assert_ptr_nonnull(f->root);
    snprintf(f->engines, sizeof f->engines, "%s/engines", f->root);
    snprintf(f->models, sizeof f->models, "%s/models", f->root);
    mkdir(f->engines, 0755);
    mkdir(f->models, 0755);
}

/* Creates the host over f->engines with a fake provider (80 GiB GPU, 1 GiB used; 64 GiB RAM). */
static void fx_host(fixture *f, llmr_engine_host_config *cfg_in) {
    llmr_engine_host_config cfg = {0};
    if (cfg_in) cfg = *cfg_in;
    cfg.engines_dir = f->engines;
    f->fake = llmr_resource_provider_fake_create();
    llmr_resource_fake_set(f->fake, 80ull << 30, 1ull << 30, 64ull << 30, 8ull << 30);
    cfg.provider = f->fake;
    if (!cfg.poll_interval_ms) cfg.poll_interval_ms = 50;
    if (!cfg_in || !cfg_in->watch_interval_ms) cfg.no_watch = 1;
    char err[1024];
    ck_assert_msg(llmr_engine_host_create(&cfg, &f->h, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
}

static void fx_close(fixture *f) {
    llmr_engine_host_destroy(f->h);
    fx_rm_rf(f->root);
    free(f->root);
}

static llmr_engine_status load(fixture *f, const char *id, const char *behaviour, char *err, size_t err_size) {
    char *dir = fx_model(f->models, id, behaviour);
    llmr_model_descriptor d = fx_desc(id, dir);
    llmr_engine_status st = llmr_engine_host_load(f->h, &d, NULL, 0, err, err_size);
    free(dir);
    return st;
}

static llmr_host_model_info model_info(fixture *f, const char *id) {
    llmr_host_model_info *v, r;
    size_t n;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(llmr_engine_host_models(f->h, &v, &n), 0);
    for (size_t i = 0; i < n; i++) if (strcmp(v[i].model_id, id) == 0) r = v[i];
    free(v);
    return r;
}

typedef struct collect { int32_t toks[1024]; int n; int stop_at; } collect;
static int collect_cb(void *u, int32_t t) {
    collect *c = u;
    if (c->n < 1024) c->toks[c->n] = t;
    c->n++;
    return c->stop_at && c->n >= c->stop_at;
}

static llmr_generate_request request(const int32_t *prompt, size_t n, uint32_t max_tokens) {
    llmr_generate_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.tokens = prompt;
    r.n_tokens = n;
    r.max_tokens = max_tokens;
    r.sampling.struct_size = sizeof r.sampling;
    return r;
}

/* --- scanning -------------------------------------------------------------------------------- */

START_TEST(scan_loads_the_test_plugin) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    llmr_host_plugin_info *p;
    size_t n;
    ck_assert_int_eq(llmr_engine_host_plugins(f.h, &p, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(p[0].id, "testengine");
    ck_assert_str_eq(p[0].version, "1.0.0");
    ck_assert_int_eq(p[0].active, 1);
    ck_assert_uint_eq(p[0].abi_version, (uint32_t)LLMR_ENGINE_ABI_MAJOR << 16); /* the test engine speaks x.0 */
    free(p);
    ck_assert_uint_eq(llmr_engine_host_rejections(f.h, 0, NULL, 0), 0);
    fx_close(&f);
}
END_TEST

/* A plugin folder with a given manifest text and, optionally, a library copied from `lib`. */
static void bad_plugin(fixture *f, const char *name, const char *manifest, const char *lib) {
    char dir[4300], path[4400];
    snprintf(dir, sizeof dir, "%s/%s", f->engines, name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    fx_write(path, manifest);
    if (lib) {
        snprintf(path, sizeof path, "%s/libtestengine.so", dir);
        fx_copy(lib, path);
    }
}

/* Finds the rejection mentioning `dir_name` and checks it contains `want`. */
static void expect_rejection(fixture *f, const char *dir_name, const char *want, const char *log) {
    size_t n = llmr_engine_host_rejections(f->h, 0, NULL, 0);
    char msg[1024], needle[256];
    snprintf(needle, sizeof needle, "/%s/manifest.json", dir_name);
    for (size_t i = 0; i < n; i++) {
        llmr_engine_host_rejections(f->h, i, msg, sizeof msg);
        if (!strstr(msg, needle)) continue;
        ck_assert_msg(strstr(msg, want) != NULL, "%s: want '%s' in: %s", dir_name, want, msg);
        ck_assert_msg(strstr(log, msg) != NULL, "rejection not logged: %s", msg);
        return;
    }
    ck_abort_msg("no rejection for %s", dir_name);
}

START_TEST(malformed_plugins_are_refused_with_the_field_named) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "good", "1.0.0");
    char text[2048], lib_path[4096] = "";
    bad_plugin(&f, "badjson", "{\"id\": ", NULL);
    bad_plugin(&f, "unknownfield", "{\"id\":\"x\",\"versoin\":\"1.0.0\"}", NULL);
    snprintf(text, sizeof text, FX_MANIFEST_FMT, "1.0.0");
    char *abi2 = strdup(text);
    memcpy(strstr(abi2, "\"1.0\""), "\"2.0\"", 5);
    bad_plugin(&f, "abi2", abi2, fx_testengine_so());
    free(abi2);
    bad_plugin(&f, "nolib", text, NULL);
    /* not an ELF file */
    bad_plugin(&f, "notelf", text, NULL);
    char p[4400];
    snprintf(p, sizeof p, "%s/notelf/libtestengine.so", f.engines);
    fx_write(p, "this is not a shared library\n");
    /* a real library without the entry point: libjansson (harmless to load twice) */
    Dl_info di;
    ck_assert(dladdr((void *)&json_object, &di) && di.dli_fname);
    snprintf(lib_path, sizeof lib_path, "%s", di.dli_fname);
    bad_plugin(&f, "nosymbol", text, lib_path);
    /* a second folder claiming the same id */
    bad_plugin(&f, "zz_duplicate", text, fx_testengine_so());

    fx_capture_begin();
    fx_host(&f, NULL);
    char *log = fx_capture_end();
    expect_rejection(&f, "badjson", "invalid JSON", log);
    expect_rejection(&f, "unknownfield", "field \"versoin\": unknown field", log);
    expect_rejection(&f, "abi2", "field \"abi_version\": plugin declares ABI 2.0, host speaks 1.1", log);
    expect_rejection(&f, "nolib", "field \"library\"", log);
    expect_rejection(&f, "notelf", "field \"library\": dlopen", log);
    expect_rejection(&f, "nosymbol", "does not export llmr_engine_get_api", log);
    expect_rejection(&f, "zz_duplicate", "field \"id\": \"testengine\" is already provided by", log);
    ck_assert_uint_eq(llmr_engine_host_rejections(f.h, 0, NULL, 0), 7);
    ck_assert_ptr_nonnull(strstr(log, "engine plugin rejected: "));
    /* the good one is loaded regardless */
    llmr_host_plugin_info *pi;
    size_t n;
    llmr_engine_host_plugins(f.h, &pi, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(pi[0].dir + strlen(pi[0].dir) - 5, "/good");
    free(pi);
    llmr_host_snapshot s;
    llmr_engine_host_snapshot(f.h, &s);
    ck_assert_uint_eq(s.plugin_rejections_total, 7);
    free(log);
    fx_close(&f);
}
END_TEST

/* ABI checks both ways, driven by the test plugin's environment switches. */
static const struct { const char *env, *val, *env2, *val2, *want; } abi_cases[] = {
    {"TESTENGINE_ABI", "2.0", NULL, NULL, "the library refused host ABI 1.1"},          /* plugin-side */
    {"TESTENGINE_ABI", "2.0", "TESTENGINE_ABI_LIE", "1", "the library reports ABI 2.0, host speaks 1.1"}, /* host-side */
    {"TESTENGINE_ABI", "0.9", "TESTENGINE_ABI_LIE", "1", "the library reports ABI 0.9, host speaks 1.1"},
    {"TESTENGINE_STRUCT_SIZE", "16", NULL, NULL, "function table is 16 bytes"},
    {"TESTENGINE_ID", "other", NULL, NULL, "field \"id\": manifest says \"testengine\", the library reports \"other\""},
};

START_TEST(abi_mismatch_is_refused_both_ways) {
    setenv(abi_cases[_i].env, abi_cases[_i].val, 1);
    if (abi_cases[_i].env2) setenv(abi_cases[_i].env2, abi_cases[_i].val2, 1);
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_capture_begin();
    fx_host(&f, NULL);
    char *log = fx_capture_end();
    expect_rejection(&f, "testengine", abi_cases[_i].want, log);
    llmr_host_plugin_info *pi;
    size_t n;
    llmr_engine_host_plugins(f.h, &pi, &n);
    ck_assert_uint_eq(n, 0);
    free(pi);
    free(log);
    fx_close(&f);
}
END_TEST

START_TEST(newer_minor_is_accepted) {
    setenv("TESTENGINE_ABI", "1.7", 1);
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    llmr_host_plugin_info *pi;
    size_t n;
    llmr_engine_host_plugins(f.h, &pi, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(pi[0].abi_version, (1u << 16) | 7);
    free(pi);
    fx_close(&f);
}
END_TEST

START_TEST(missing_engines_dir_is_an_error) {
    llmr_engine_host_config cfg = {0};
    cfg.engines_dir = "/nonexistent/llmr-engines";
    cfg.provider = llmr_resource_provider_fake_create();
    llmr_engine_host *h = NULL;
    char err[512];
    ck_assert_int_eq(llmr_engine_host_create(&cfg, &h, err, sizeof err), LLMR_ENGINE_LOAD_FAILED);
    ck_assert_ptr_null(h);
    ck_assert_msg(strstr(err, "/nonexistent/llmr-engines") && strstr(err, "No such file"), "%s", err);
    llmr_engine_host_destroy(NULL);
}
END_TEST

/* --- models and generation ------------------------------------------------------------------- */

static void no_logprobs_cb(void *user, const llmr_token_logprobs *lp) {
    (void)user;
    (void)lp;
    ck_abort_msg("a 1.0 engine was handed on_logprobs");
}

START_TEST(load_and_stream_tokens) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024];
    ck_assert_msg(load(&f, "m1", "{\"vocab\":100}", err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(load(&f, "m1", "{\"vocab\":100}", err, sizeof err), LLMR_ENGINE_OK); /* idempotent */
    llmr_host_session *s;
    ck_assert_msg(llmr_engine_host_session_create(f.h, "m1", NULL, &s, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_str_eq(llmr_host_session_engine_id(s), "testengine");
    ck_assert_uint_eq(llmr_host_session_max_context(s), 4096); /* the model's, from the engine's stats */
    {   /* a session that asks for less holds less */
        llmr_session_params sp = {.struct_size = sizeof sp, .max_context = 100};
        llmr_host_session *small;
        ck_assert_msg(llmr_engine_host_session_create(f.h, "m1", &sp, &small, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
        ck_assert_uint_eq(llmr_host_session_max_context(small), 100);
        llmr_engine_host_session_destroy(small);
        sp.max_context = 100000; /* more than the model holds: the model's */
        ck_assert_msg(llmr_engine_host_session_create(f.h, "m1", &sp, &small, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
        ck_assert_uint_eq(llmr_host_session_max_context(small), 4096);
        llmr_engine_host_session_destroy(small);
    }
    int32_t prompt[3] = {1, 2, 3};
    llmr_generate_request r = request(prompt, 3, 10);
    collect c = {.n = 0};
    llmr_generate_result res = {sizeof res, 0, 0, 0, 0};
    ck_assert_msg(llmr_engine_host_generate(s, &r, collect_cb, &c, &res, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(c.n, 10);
    ck_assert_uint_eq(res.n_generated, 10);
    ck_assert_uint_eq(res.n_prompt, 3);
    ck_assert_uint_eq(res.n_context, 13);
    ck_assert_int_eq(res.finish, LLMR_FINISH_LENGTH);
    int32_t t = 3;
    for (int i = 0; i < 10; i++) { t = (t * 31 + 7) % 100; ck_assert_int_eq(c.toks[i], t); }
    /* the callback can stop generation */
    c.n = 0;
    c.stop_at = 4;
    r = request(NULL, 0, 10);
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, collect_cb, &c, &res, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(c.n, 4);
    ck_assert_int_eq(res.finish, LLMR_FINISH_STOP);
    llmr_host_model_info mi = model_info(&f, "m1");
    ck_assert_int_eq(mi.loaded, 1);
    ck_assert_uint_eq(mi.sessions, 1);
    ck_assert_uint_eq(mi.tokens_generated, 14);
    ck_assert_uint_eq(mi.vram_bytes, MiB + 65536);
    llmr_engine_host_session_destroy(s);
    llmr_engine_host_session_destroy(NULL);
    mi = model_info(&f, "m1");
    ck_assert_uint_eq(mi.sessions, 0);
    ck_assert_uint_eq(mi.vram_bytes, MiB); /* KV returned at session_destroy (T108) */
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(f.h, &snap);
    ck_assert_uint_eq(snap.tokens_generated_total, 14);
    ck_assert_uint_eq(snap.models_loaded, 1);
    /* engine errors pass through with the engine's message */
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m1", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    int32_t bad = 1000;
    r = request(&bad, 1, 1);
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, NULL, NULL, NULL, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "outside the vocabulary"), "%s", err);
    /* logprobs need ABI 1.1: the host refuses them for this 1.0 engine, naming why */
    r = request(prompt, 3, 1);
    r.on_logprobs = no_logprobs_cb;
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, NULL, NULL, NULL, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "engine testengine speaks ABI 1.0, which cannot report logprobs"), "%s", err);
    r.on_logprobs = NULL; /* the session is still usable */
    ck_assert_msg(llmr_engine_host_generate(s, &r, NULL, NULL, NULL, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_engine_host_session_destroy(s);
    /* unload: the model is forgotten */
    ck_assert_int_eq(llmr_engine_host_unload(f.h, "m1", err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m1", NULL, &s, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "model m1 is not loaded"), "%s", err);
    ck_assert_int_eq(llmr_engine_host_unload(f.h, "nope", err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    fx_close(&f);
}
END_TEST

START_TEST(load_failures_carry_the_engine_message) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024];
    ck_assert_int_eq(load(&f, "corrupt", "{\"load_status\":\"model_corrupt\"}", err, sizeof err), LLMR_ENGINE_MODEL_CORRUPT);
    ck_assert_msg(strstr(err, "model corrupt: engine testengine 1.0.0 load failed: model_corrupt"), "%s", err);
    llmr_host_model_info mi = model_info(&f, "corrupt");
    ck_assert_int_eq(mi.loaded, 0);
    ck_assert_int_eq(mi.last_status, LLMR_ENGINE_MODEL_CORRUPT);
    ck_assert_msg(strstr(mi.last_error, "load told to fail with model_corrupt"), "%s", mi.last_error);
    json_t *hb = llmr_engine_host_heartbeat_json(f.h);
    json_t *m0 = json_array_get(json_object_get(hb, "models"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(m0, "state")), "failed");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(m0, "reason")), "model_corrupt"));
    json_decref(hb);
    ck_assert_int_eq(load(&f, "badjson", "{oops", err, sizeof err), LLMR_ENGINE_MODEL_CORRUPT);
    ck_assert_msg(strstr(err, "estimate_vram") && strstr(err, "testengine.json"), "%s", err);
    ck_assert_int_eq(load(&f, "nosession", "{\"session_status\":\"oom_vram\"}", err, sizeof err), LLMR_ENGINE_OK);
    llmr_host_session *s = NULL;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "nosession", NULL, &s, err, sizeof err), LLMR_ENGINE_OOM_VRAM);
    ck_assert_ptr_null(s);
    ck_assert_uint_eq(model_info(&f, "nosession").sessions, 0);
    fx_close(&f);
}
END_TEST

static void *load_thread(void *arg) {
    fixture *f = arg;
    char err[512];
    load(f, "slow", "{\"load_delay_ms\":400}", err, sizeof err);
    return NULL;
}

START_TEST(loading_state_is_visible_and_does_not_block_others) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024];
    ck_assert_int_eq(load(&f, "fast", "{}", err, sizeof err), LLMR_ENGINE_OK);
    pthread_t t;
    pthread_create(&t, NULL, load_thread, &f);
    double t0 = fx_now();
    while (!model_info(&f, "slow").loading && fx_now() - t0 < 5) fx_sleep_ms(5);
    ck_assert_int_eq(model_info(&f, "slow").loading, 1);
    /* sessions and generation on another model go on during the load */
    llmr_host_session *s;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "fast", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    llmr_generate_request r = request(NULL, 0, 3);
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, NULL, NULL, NULL, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(load(&f, "fast", "{}", err, sizeof err), LLMR_ENGINE_OK); /* already loaded: no wait */
    ck_assert_int_eq(model_info(&f, "slow").loading, 1);
    json_t *hb = llmr_engine_host_heartbeat_json(f.h);
    int seen = 0;
    for (size_t i = 0; i < json_array_size(json_object_get(hb, "models")); i++) {
        json_t *m = json_array_get(json_object_get(hb, "models"), i);
        if (strcmp(json_string_value(json_object_get(m, "id")), "slow") == 0)
            seen = strcmp(json_string_value(json_object_get(m, "state")), "loading") == 0;
    }
    json_decref(hb);
    ck_assert_int_eq(seen, 1);
    llmr_engine_host_session_destroy(s);
    pthread_join(t, NULL);
    ck_assert_int_eq(model_info(&f, "slow").loaded, 1);
    ck_assert_int_eq(model_info(&f, "slow").loading, 0);
    fx_close(&f);
}
END_TEST

START_TEST(unsupported_model_names_the_reason) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[2048], eid[65], ap[256];
    llmr_model_descriptor d = fx_desc("llama", f.models);
    d.architecture = "LlamaForCausalLM";
    ck_assert_int_eq(llmr_engine_host_select(f.h, &d, NULL, 0, eid, sizeof eid, ap, sizeof ap, err, sizeof err),
                     LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "model llama is unsupported: no engine for llama") &&
                  strstr(err, "testengine: architecture LlamaForCausalLM not in [TestForCausalLM]"), "%s", err);
    ck_assert_int_eq(llmr_engine_host_load(f.h, &d, NULL, 0, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    d = fx_desc("ok", f.models);
    ck_assert_int_eq(llmr_engine_host_select(f.h, &d, NULL, 0, eid, sizeof eid, ap, sizeof ap, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_str_eq(eid, "testengine");
    ck_assert_str_eq(ap, "");
    fx_close(&f);
}
END_TEST

/* --- VRAM: refusal before allocation, budgets (T106, T107, T115) ------------------------------ */

START_TEST(vram_short_load_is_refused_before_any_allocation) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    llmr_resource_fake_set(f.fake, 1000 * MiB, 990 * MiB, 64ull << 30, 1ull << 30);
    char err[1024], behaviour[4400], events[4200];
    snprintf(events, sizeof events, "%s/events.log", f.root);
    snprintf(behaviour, sizeof behaviour, "{\"weights_bytes\":%llu,\"events_log\":\"%s\"}", 100 * MiB, events);
    ck_assert_int_eq(load(&f, "big", behaviour, err, sizeof err), LLMR_ENGINE_OOM_VRAM);
    char want[256];
    snprintf(want, sizeof want, "needs %llu bytes of VRAM, %llu bytes are free", 100 * MiB + 65536, 10 * MiB);
    ck_assert_msg(strstr(err, want), "%s", err);
    ck_assert_msg(strstr(err, "model big refused: engine testengine"), "%s", err);
    char *ev = fx_read(events);
    ck_assert_msg(strstr(ev, "load") == NULL, "the engine's load was called: %s", ev); /* nothing allocated */
    free(ev);
    llmr_host_snapshot s;
    llmr_engine_host_snapshot(f.h, &s);
    ck_assert_uint_eq(s.load_refusals_total, 1);
    ck_assert_uint_eq(s.models_loaded, 0);
    /* once memory frees up the same load succeeds */
    llmr_resource_fake_set(f.fake, 1000 * MiB, 100 * MiB, 64ull << 30, 1ull << 30);
    ck_assert_msg(load(&f, "big", behaviour, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    fx_close(&f);
}
END_TEST

START_TEST(per_engine_budget_is_enforced) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_budget b = {"testengine", 3 * MiB};
    llmr_engine_host_config cfg = {0};
    cfg.budgets = &b;
    cfg.n_budgets = 1;
    fx_host(&f, &cfg);
    char err[1024], beh[256];
    snprintf(beh, sizeof beh, "{\"weights_bytes\":%llu,\"kv_bytes\":0}", 2 * MiB);
    ck_assert_msg(load(&f, "a", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(load(&f, "b", beh, err, sizeof err), LLMR_ENGINE_OOM_VRAM);
    char want[256];
    snprintf(want, sizeof want, "engine testengine needs %llu bytes of VRAM, its budget of %llu bytes has %llu free "
             "(%llu reserved by its other models)", 2 * MiB, 3 * MiB, 1 * MiB, 2 * MiB);
    ck_assert_msg(strstr(err, want), "%s", err);
    llmr_host_plugin_info *pi;
    size_t n;
    llmr_engine_host_plugins(f.h, &pi, &n);
    ck_assert_uint_eq(pi[0].vram_budget, 3 * MiB);
    ck_assert_uint_eq(pi[0].vram_reserved, 2 * MiB);
    free(pi);
    /* the engine is told its remaining budget: one whose estimate lies is stopped by the engine */
    ck_assert_int_eq(llmr_engine_host_unload(f.h, "a", err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_msg(load(&f, "b", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    fx_close(&f);
}
END_TEST

/* --- thresholds and LRU (T103–T105, T114) ---------------------------------------------------- */

/* "Device memory used" = what the host's models report (so unloading frees it). */
static uint64_t models_vram(void *user) {
    fixture *f = user;
    llmr_host_model_info *v;
    size_t n;
    uint64_t sum = 0;
    if (llmr_engine_host_models(f->h, &v, &n) != 0) return 0;
    for (size_t i = 0; i < n; i++) if (v[i].loaded) sum += v[i].vram_bytes;
    free(v);
    return sum;
}

START_TEST(threshold_alert_and_lru_unload) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_host_config cfg = {0};
    cfg.no_thread = 1; /* this test drives the polls */
    fx_host(&f, &cfg);
    llmr_resource_fake_set(f.fake, 10 * MiB, 0, 64ull << 30, 1ull << 30);
    llmr_resource_fake_set_vram_fn(f.fake, models_vram, &f);
    char err[1024], beh[256];
    snprintf(beh, sizeof beh, "{\"weights_bytes\":%llu,\"kv_bytes\":0}", 3 * MiB);
    llmr_resource_state rs;
    ck_assert_msg(load(&f, "a", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    fx_sleep_ms(2);
    ck_assert_msg(load(&f, "b", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_host_session *sb;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "b", NULL, &sb, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), 0);
    ck_assert_int_eq(rs.vram_alert, 0);
    ck_assert(rs.vram_ratio > 0.59 && rs.vram_ratio < 0.61);
    fx_sleep_ms(2);
    ck_assert_msg(load(&f, "c", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    /* 9 of 10 MiB: at the 90% threshold -> alert, and the LRU idle model (a) goes; b has a session */
    fx_capture_begin();
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), 0);
    char *log = fx_capture_end();
    ck_assert_msg(strstr(log, "resource alert: VRAM use 90.0%"), "%s", log);
    ck_assert_msg(strstr(log, "unloading model a from engine testengine 1.0.0 (LRU: VRAM use 90.0% >= 90%)"), "%s", log);
    free(log);
    ck_assert_int_eq(rs.vram_alert, 0); /* back under after the unload */
    ck_assert_uint_eq(rs.vram_alerts_total, 1);
    ck_assert_int_eq(model_info(&f, "a").loaded, 0);
    ck_assert_uint_eq(model_info(&f, "a").lru_unloads, 1);
    ck_assert_int_eq(model_info(&f, "b").loaded, 1);
    ck_assert_int_eq(model_info(&f, "c").loaded, 1);
    llmr_host_snapshot s;
    llmr_engine_host_snapshot(f.h, &s);
    ck_assert_uint_eq(s.lru_unloads_total, 1);
    /* over the threshold with only busy models: alert stays, nothing is unloaded */
    llmr_resource_fake_set(f.fake, 10 * MiB, 3 * MiB, 64ull << 30, 1ull << 30);
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), 0); /* 9 MiB: c (idle) goes */
    ck_assert_int_eq(model_info(&f, "c").loaded, 0);
    llmr_resource_fake_set(f.fake, 10 * MiB, 7 * MiB, 64ull << 30, 1ull << 30);
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), 0);
    ck_assert_int_eq(rs.vram_alert, 1);
    ck_assert_int_eq(model_info(&f, "b").loaded, 1);
    /* an LRU-unloaded model comes back on its next session */
    llmr_resource_fake_set(f.fake, 10 * MiB, 0, 64ull << 30, 1ull << 30);
    llmr_engine_host_session_destroy(sb);
    llmr_host_session *sa;
    ck_assert_msg(llmr_engine_host_session_create(f.h, "a", NULL, &sa, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(model_info(&f, "a").loaded, 1);
    llmr_engine_host_session_destroy(sa);
    /* RAM alerts too */
    llmr_resource_fake_set(f.fake, 10 * MiB, 0, 100 * MiB, 95 * MiB);
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), 0);
    ck_assert_uint_eq(rs.ram_alerts_total, 1);
    /* a failing provider is reported, not fatal */
    llmr_resource_fake_fail(f.fake, "sensor unplugged");
    ck_assert_int_eq(llmr_engine_host_poll(f.h, &rs, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "resource provider fake: sensor unplugged"), "%s", err);
    llmr_resource_fake_fail(f.fake, NULL);
    fx_close(&f);
}
END_TEST

START_TEST(load_unloads_idle_models_to_make_room) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_host_config cfg = {0};
    cfg.no_thread = 1;
    fx_host(&f, &cfg);
    llmr_resource_fake_set(f.fake, 10 * MiB, 0, 64ull << 30, 1ull << 30);
    llmr_resource_fake_set_vram_fn(f.fake, models_vram, &f);
    char err[1024], beh[256];
    snprintf(beh, sizeof beh, "{\"weights_bytes\":%llu,\"kv_bytes\":0}", 4 * MiB);
    ck_assert_int_eq(load(&f, "a", beh, err, sizeof err), LLMR_ENGINE_OK);
    fx_sleep_ms(2);
    ck_assert_int_eq(load(&f, "b", beh, err, sizeof err), LLMR_ENGINE_OK);
    fx_capture_begin();
    llmr_engine_status st = load(&f, "c", beh, err, sizeof err);
    char *log = fx_capture_end();
    ck_assert_msg(st == LLMR_ENGINE_OK, "%s", err);
    ck_assert_msg(strstr(log, "unloading model a from engine testengine 1.0.0 (LRU: making room for model c)"), "%s", log);
    free(log);
    ck_assert_int_eq(model_info(&f, "a").loaded, 0);
    ck_assert_int_eq(model_info(&f, "b").loaded, 1);
    /* busy models are never unloaded to make room: the load is refused instead */
    llmr_host_session *sb, *sc;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "b", NULL, &sb, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "c", NULL, &sc, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_int_eq(load(&f, "d", beh, err, sizeof err), LLMR_ENGINE_OOM_VRAM);
    char want[200];
    snprintf(want, sizeof want, "needs %llu bytes of VRAM, %llu bytes are free", 4 * MiB, 2 * MiB);
    ck_assert_msg(strstr(err, want) && strstr(err, "idle models cannot free enough"), "%s", err);
    ck_assert_int_eq(model_info(&f, "b").loaded, 1);
    ck_assert_int_eq(model_info(&f, "c").loaded, 1);
    llmr_engine_host_session_destroy(sb);
    llmr_engine_host_session_destroy(sc);
    fx_close(&f);
}
END_TEST

START_TEST(maintenance_thread_polls_every_interval) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL); /* poll every 50 ms */
    llmr_resource_fake_set(f.fake, 100, 95, 100, 10);
    llmr_host_snapshot s;
    double t0 = fx_now();
    do { fx_sleep_ms(10); llmr_engine_host_snapshot(f.h, &s); } while (!s.res.vram_alert && fx_now() - t0 < 5);
    ck_assert_int_eq(s.res.vram_alert, 1);
    ck_assert_uint_eq(s.res.last.vram_used, 95);
    fx_close(&f);
}
END_TEST

/* --- watchdog (T112, T116) ------------------------------------------------------------------- */

START_TEST(stall_watchdog_cancels_and_frees_the_session) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_host_config cfg = {0};
    cfg.stall_timeout_ms = 300;
    fx_host(&f, &cfg);
    char err[1024], beh[256];
    snprintf(beh, sizeof beh, "{\"weights_bytes\":%llu,\"kv_bytes\":%llu,\"stall_after\":3}", 4 * MiB, 8 * MiB);
    ck_assert_msg(load(&f, "m", beh, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_host_session *s;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_uint_eq(model_info(&f, "m").vram_bytes, 12 * MiB);
    int32_t p = 1;
    llmr_generate_request r = request(&p, 1, 100);
    collect c = {.n = 0};
    llmr_generate_result res = {sizeof res, 0, 0, 0, 0};
    double t0 = fx_now();
    fx_capture_begin();
    llmr_engine_status st = llmr_engine_host_generate(s, &r, collect_cb, &c, &res, err, sizeof err);
    char *log = fx_capture_end();
    double dt = fx_now() - t0;
    ck_assert_int_eq(st, LLMR_ENGINE_TIMEOUT);
    ck_assert_int_eq(c.n, 3);
    ck_assert_msg(strstr(err, "no token for 300 ms") && strstr(err, "freed the session after 3 token(s)"), "%s", err);
    ck_assert_msg(strstr(log, "stall watchdog: model m (engine testengine) produced no token"), "%s", log);
    free(log);
    ck_assert_msg(dt >= 0.29 && dt < 3.0, "took %.2f s", dt);
    ck_assert_int_eq(res.finish, LLMR_FINISH_CANCELLED);
    /* memory returned: the session's KV is gone at once */
    llmr_host_model_info mi = model_info(&f, "m");
    ck_assert_uint_eq(mi.vram_bytes, 4 * MiB);
    ck_assert_uint_eq(mi.sessions, 0);
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(f.h, &snap);
    ck_assert_uint_eq(snap.watchdog_timeouts_total, 1);
    ck_assert_uint_eq(snap.sessions_active, 0);
    /* the closed session keeps answering TIMEOUT until destroyed */
    ck_assert_int_eq(llmr_engine_host_generate(s, &r, NULL, NULL, NULL, err, sizeof err), LLMR_ENGINE_TIMEOUT);
    ck_assert_msg(strstr(err, "closed by the stall watchdog"), "%s", err);
    llmr_engine_host_session_destroy(s);
    fx_close(&f);
}
END_TEST

START_TEST(long_generation_that_keeps_producing_is_not_cut) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_host_config cfg = {0};
    cfg.stall_timeout_ms = 500; /* generous against a loaded test machine; tokens come every 25 ms */
    fx_host(&f, &cfg);
    char err[1024];
    ck_assert_int_eq(load(&f, "m", "{\"token_delay_ms\":25}", err, sizeof err), LLMR_ENGINE_OK);
    llmr_host_session *s;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    llmr_generate_request r = request(NULL, 0, 60); /* ~1.5 s: three times the stall timeout */
    collect c = {.n = 0};
    double t0 = fx_now();
    ck_assert_msg(llmr_engine_host_generate(s, &r, collect_cb, &c, NULL, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_msg(fx_now() - t0 > 1.0, "the generation was not longer than the stall timeout");
    ck_assert_int_eq(c.n, 60);
    llmr_engine_host_session_destroy(s);
    fx_close(&f);
}
END_TEST

/* --- cancel and concurrency ------------------------------------------------------------------ */

typedef struct gen_job {
    llmr_host_session *s;
    uint32_t max_tokens;
    llmr_engine_status st;
    collect c;
    char err[512];
    char version[65];
} gen_job;

static void *gen_thread(void *arg) {
    gen_job *j = arg;
    llmr_generate_request r = request(NULL, 0, j->max_tokens);
    j->c.n = 0;
    j->st = llmr_engine_host_generate(j->s, &r, collect_cb, &j->c, NULL, j->err, sizeof j->err);
    snprintf(j->version, sizeof j->version, "%s", llmr_host_session_engine_version(j->s));
    return NULL;
}

START_TEST(cancel_from_another_thread) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024];
    ck_assert_int_eq(load(&f, "m", "{\"stall_after\":2}", err, sizeof err), LLMR_ENGINE_OK);
    gen_job j = {.max_tokens = 100};
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &j.s, err, sizeof err), LLMR_ENGINE_OK);
    llmr_engine_host_cancel(j.s); /* idle: no effect on the next generate */
    pthread_t t;
    pthread_create(&t, NULL, gen_thread, &j);
    fx_sleep_ms(100);
    llmr_engine_host_cancel(j.s);
    pthread_join(t, NULL);
    ck_assert_int_eq(j.st, LLMR_ENGINE_CANCELLED);
    ck_assert_int_eq(j.c.n, 2);
    /* the session stays usable after a cancel */
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(f.h, &snap);
    ck_assert_uint_eq(snap.sessions_active, 1);
    ck_assert_uint_eq(snap.watchdog_timeouts_total, 0);
    llmr_engine_host_session_destroy(j.s);
    fx_close(&f);
}
END_TEST

START_TEST(concurrent_generates_on_many_sessions) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024];
    ck_assert_int_eq(load(&f, "m", "{\"token_delay_ms\":1}", err, sizeof err), LLMR_ENGINE_OK);
    enum { N = 6 };
    gen_job jobs[N];
    pthread_t th[N];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].max_tokens = 30;
        ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &jobs[i].s, err, sizeof err), LLMR_ENGINE_OK);
        pthread_create(&th[i], NULL, gen_thread, &jobs[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(jobs[i].st == LLMR_ENGINE_OK, "job %d: %s", i, jobs[i].err);
        ck_assert_int_eq(jobs[i].c.n, 30);
        llmr_engine_host_session_destroy(jobs[i].s);
    }
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(f.h, &snap);
    ck_assert_uint_eq(snap.tokens_generated_total, N * 30);
    ck_assert_uint_eq(snap.sessions_active, 0);
    fx_close(&f);
}
END_TEST

/* --- hot reload (T101, T102, T113) ----------------------------------------------------------- */

static int count_lines(const char *text, const char *prefix) {
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, pl) == 0) n++;
    return n;
}

static void plugin_versions(fixture *f, char *active, char *draining, size_t size) {
    llmr_host_plugin_info *pi;
    size_t n;
    active[0] = draining[0] = 0;
    ck_assert_int_eq(llmr_engine_host_plugins(f->h, &pi, &n), 0);
    for (size_t i = 0; i < n; i++) snprintf(pi[i].active ? active : draining, size, "%s", pi[i].version);
    free(pi);
}

/* Requests in flight on 1.0.0 while 1.1.0 is installed: none fails, none is cut, new sessions go to
 * 1.1.0, and 1.0.0 is unloaded once its sessions end. `how`: 0 explicit reload, 1 file watch, 2 SIGHUP. */
/* Distinct private library copies (the host's /tmp/llmr-engines-* snapshots) mapped in this process. */
static int mapped_copies(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], seen[16][512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "/tmp/llmr-engines-");
        if (!p) continue;
        p[strcspn(p, " \n")] = 0;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= strcmp(seen[i], p) == 0;
        if (!dup && n < 16) snprintf(seen[n++], sizeof seen[0], "%s", p);
    }
    if (f) fclose(f);
    return n;
}

static llmr_engine_host *g_sighup_host;
static void on_sighup(int sig) { (void)sig; llmr_engine_host_request_reload(g_sighup_host); }

static void hot_reload_case(int how) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    llmr_engine_host_config cfg = {0};
    if (how == 1) cfg.watch_interval_ms = 50;
    cfg.keep_libraries = how == 3;
    fx_host(&f, &cfg);
    g_sighup_host = f.h;
    char err[1024], beh[4400], events[4200];
    snprintf(events, sizeof events, "%s/events.log", f.root);
    snprintf(beh, sizeof beh, "{\"token_delay_ms\":10,\"events_log\":\"%s\"}", events);
    ck_assert_int_eq(load(&f, "m", beh, err, sizeof err), LLMR_ENGINE_OK);
    enum { N = 4 };
    gen_job jobs[N];
    pthread_t th[N];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].max_tokens = 100; /* ~1 s each: the reload lands while they run */
        ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &jobs[i].s, err, sizeof err), LLMR_ENGINE_OK);
        pthread_create(&th[i], NULL, gen_thread, &jobs[i]);
    }
    fx_sleep_ms(100);
    fx_install(f.engines, "testengine", "1.1.0");
    if (how == 0 || how == 3) ck_assert_int_eq(llmr_engine_host_reload(f.h), 1);
    if (how == 2) {
        signal(SIGHUP, on_sighup);
        raise(SIGHUP);
    }
    char active[65], draining[65];
    double t0 = fx_now();
    /* With a file watch or SIGHUP the reload runs on the maintenance thread: the new plugin turns
     * current first, and the model moves to it only once its shadow load has finished. */
    do { fx_sleep_ms(10); plugin_versions(&f, active, draining, sizeof active); }
    while ((strcmp(active, "1.1.0") != 0 || strcmp(model_info(&f, "m").engine_version, "1.1.0") != 0) &&
           fx_now() - t0 < 5);
    ck_assert_str_eq(active, "1.1.0");
    ck_assert_str_eq(draining, "1.0.0");
    ck_assert_str_eq(model_info(&f, "m").engine_version, "1.1.0");
    ck_assert_uint_eq(model_info(&f, "m").draining, 1);
    /* a new session goes to the new version while the old ones still run */
    llmr_host_session *ns;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &ns, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_str_eq(llmr_host_session_engine_version(ns), "1.1.0");
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(jobs[i].st == LLMR_ENGINE_OK, "in-flight request %d failed: %s", i, jobs[i].err);
        ck_assert_int_eq(jobs[i].c.n, 100); /* not cut */
        ck_assert_str_eq(jobs[i].version, "1.0.0");
        llmr_engine_host_session_destroy(jobs[i].s);
    }
    /* the old version is unloaded once drained (maintenance thread) */
    t0 = fx_now();
    do { fx_sleep_ms(10); plugin_versions(&f, active, draining, sizeof active); }
    while (draining[0] && fx_now() - t0 < 5);
    ck_assert_str_eq(draining, "");
    ck_assert_uint_eq(model_info(&f, "m").draining, 0);
    /* the old library is really unmapped (dlclose), unless keep_libraries asked to keep it */
    ck_assert_int_eq(mapped_copies(), how == 3 ? 2 : 1);
    char *ev = fx_read(events);
    ck_assert_int_eq(count_lines(ev, "load "), 2);
    ck_assert_int_eq(count_lines(ev, "unload "), 1);
    free(ev);
    gen_job j = {.s = ns, .max_tokens = 5};
    gen_thread(&j);
    ck_assert_int_eq(j.st, LLMR_ENGINE_OK);
    llmr_engine_host_session_destroy(ns);
    fx_close(&f);
}

START_TEST(hot_reload_explicit) { hot_reload_case(0); }
END_TEST
START_TEST(hot_reload_on_file_change) { hot_reload_case(1); }
END_TEST
START_TEST(hot_reload_on_sighup) { hot_reload_case(2); }
END_TEST
START_TEST(hot_reload_keeping_libraries) { hot_reload_case(3); }
END_TEST

START_TEST(broken_new_version_keeps_the_old_one_serving) {
    fixture f;
    fx_open(&f);
    fx_install(f.engines, "testengine", "1.0.0");
    fx_host(&f, NULL);
    char err[1024], path[4300];
    ck_assert_int_eq(load(&f, "m", "{}", err, sizeof err), LLMR_ENGINE_OK);
    snprintf(path, sizeof path, "%s/testengine/manifest.json", f.engines);
    fx_write(path, "{\"id\":\"testengine\",\"version\":\"2\"}");
    fx_capture_begin();
    ck_assert_int_eq(llmr_engine_host_reload(f.h), 0);
    char *log = fx_capture_end();
    ck_assert_msg(strstr(log, "field \"version\"") && strstr(log, "the loaded version keeps serving"), "%s", log);
    free(log);
    llmr_host_session *s;
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_str_eq(llmr_host_session_engine_version(s), "1.0.0");
    llmr_engine_host_session_destroy(s);
    /* a new version that cannot load the model: the old instance keeps serving */
    fx_install(f.engines, "testengine", "1.2.0");
    char beh[4300];
    snprintf(beh, sizeof beh, "%s/m/testengine.json", f.models);
    fx_write(beh, "{\"load_status\":\"load_failed\"}");
    ck_assert_int_eq(llmr_engine_host_reload(f.h), 1);
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &s, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_str_eq(llmr_host_session_engine_version(s), "1.0.0");
    llmr_engine_host_session_destroy(s);
    /* the plugin folder removed: its loaded model finishes, new sessions are refused with a reason */
    fx_rm_rf(f.engines);
    mkdir(f.engines, 0755);
    llmr_engine_host_reload(f.h);
    ck_assert_int_eq(llmr_engine_host_session_create(f.h, "m", NULL, &s, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "no engines are installed"), "%s", err);
    fx_close(&f);
}
END_TEST

START_TEST(default_dir_is_beside_bin) {
    char buf[4096];
    ck_assert_int_eq(llmr_engine_host_default_dir(buf, sizeof buf), 0);
    ck_assert_msg(strlen(buf) > 8 && strcmp(buf + strlen(buf) - 8, "/engines") == 0, "%s", buf);
    char tiny[4];
    ck_assert_int_eq(llmr_engine_host_default_dir(tiny, sizeof tiny), -1);
}
END_TEST

static Suite *host_suite(void) {
    Suite *s = suite_create("engine_host");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, scan_loads_the_test_plugin);
    tcase_add_test(tc, malformed_plugins_are_refused_with_the_field_named);
    tcase_add_loop_test(tc, abi_mismatch_is_refused_both_ways, 0, (int)(sizeof abi_cases / sizeof abi_cases[0]));
    tcase_add_test(tc, newer_minor_is_accepted);
    tcase_add_test(tc, missing_engines_dir_is_an_error);
    tcase_add_test(tc, load_and_stream_tokens);
    tcase_add_test(tc, load_failures_carry_the_engine_message);
    tcase_add_test(tc, loading_state_is_visible_and_does_not_block_others);
    tcase_add_test(tc, unsupported_model_names_the_reason);
    tcase_add_test(tc, vram_short_load_is_refused_before_any_allocation);
    tcase_add_test(tc, per_engine_budget_is_enforced);
    tcase_add_test(tc, threshold_alert_and_lru_unload);
    tcase_add_test(tc, load_unloads_idle_models_to_make_room);
    tcase_add_test(tc, maintenance_thread_polls_every_interval);
    tcase_add_test(tc, stall_watchdog_cancels_and_frees_the_session);
    tcase_add_test(tc, long_generation_that_keeps_producing_is_not_cut);
    tcase_add_test(tc, cancel_from_another_thread);
    tcase_add_test(tc, concurrent_generates_on_many_sessions);
    tcase_add_test(tc, hot_reload_explicit);
    tcase_add_test(tc, hot_reload_on_file_change);
    tcase_add_test(tc, hot_reload_on_sighup);
    tcase_add_test(tc, hot_reload_keeping_libraries);
    tcase_add_test(tc, broken_new_version_keeps_the_old_one_serving);
    tcase_add_test(tc, default_dir_is_beside_bin);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(host_suite)
