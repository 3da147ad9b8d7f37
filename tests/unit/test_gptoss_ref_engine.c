/* Unit tests of the gptoss_ref engine plugin through its ABI (dlopen of the built .so, as the node does):
 * logits and greedy tokens equal transformers' on the tiny oracle, seed determinism, stop ids, on_token
 * stop, max_tokens, continuation across calls, cancel from another thread, errors and stats. */
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "common/gptoss/synth.h"
#include "llmr_engine.h"
#include "node/engine/engine_host.h"
#include "tests/unit/testutil.h"

#define V 201088

static char g_dir[64];               /* tiny seed-1 checkpoint, made once for the whole suite */
static void *g_lib;
static const llmr_engine_api *g_api;

static void make_model(void) {
    char *d = llmr_test_tmpdir();
    if (!d) abort();
    snprintf(g_dir, sizeof g_dir, "%s", d);
    free(d);
    gptoss_synth_options o = {.preset = "tiny", .seed = 1, .out_dir = g_dir, .threads = 2};
    char err[512];
    if (gptoss_synth_write(&o, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
}

static void remove_model(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
}

/* Opens the plugin (per test: each runs in its own forked process). */
static void open_plugin(void) {
    const char *b = getenv("LLMR_BUILD");
    char path[4096];
    snprintf(path, sizeof path, "%s/engines/gptoss_ref/libgptoss_ref.so", b && *b ? b : "build");
    g_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(g_lib != NULL, "%s", dlerror());
    llmr_engine_get_api_fn get = (llmr_engine_get_api_fn)dlsym(g_lib, LLMR_ENGINE_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(get);
    ck_assert_ptr_null(get((LLMR_ENGINE_ABI_MAJOR + 1) << 16));
    g_api = get(LLMR_ENGINE_ABI_VERSION);
    ck_assert_ptr_nonnull(g_api);
}

static void close_plugin(void) {
    if (g_lib) dlclose(g_lib);
    g_lib = NULL;
}

static llmr_engine_model *load(void) {
    llmr_model_descriptor d = {.struct_size = sizeof d, .id = "test/tiny", .format = "safetensors", .runtime = "gptoss",
                               .architecture = "GptOssForCausalLM", .model_dir = g_dir};
    llmr_load_params p = {.struct_size = sizeof p, .device = -1};
    llmr_engine_model *m = NULL;
    char err[512];
    ck_assert_msg(g_api->load(&d, &p, &m, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    return m;
}

static llmr_engine_session *session(llmr_engine_model *m, uint32_t ctx) {
    llmr_session_params sp = {.struct_size = sizeof sp, .max_context = ctx};
    llmr_engine_session *s = NULL;
    char err[256];
    ck_assert_msg(g_api->session_create(m, &sp, &s, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    return s;
}

typedef struct collected {
    int32_t tok[512];
    int n;
    int stop_at;
    llmr_token_logprobs lp[16]; /* on_logprobs of the first 16 tokens */
    int n_lp, lp_order_ok;      /* lp_order_ok: each came right before its on_token */
} collected;

static int collect(void *user, int32_t t) {
    collected *c = user;
    if (c->n < 512) c->tok[c->n] = t;
    if (c->n_lp != c->n + 1 || (c->n < 16 && c->lp[c->n].token != t)) c->lp_order_ok = 0;
    c->n++;
    return c->stop_at > 0 && c->n >= c->stop_at;
}

static void collect_lp(void *user, const llmr_token_logprobs *lp) {
    collected *c = user;
    if (c->n_lp < 16) c->lp[c->n_lp] = *lp;
    c->n_lp++;
}

static llmr_engine_status gen(llmr_engine_session *s, const int32_t *toks, size_t n, uint32_t max, float temp, uint64_t seed,
                              const int32_t *stops, size_t n_stops, float *logits, collected *c, llmr_generate_result *r) {
    llmr_generate_request q = {.struct_size = sizeof q, .tokens = toks, .n_tokens = n, .max_tokens = max, .stop_ids = stops,
                               .n_stop_ids = n_stops, .logits_out = logits};
    q.sampling = (llmr_sampling_params){.struct_size = sizeof q.sampling, .temperature = temp, .seed = seed, .top_p = 1.0f};
    r->struct_size = sizeof *r;
    char err[256];
    return g_api->generate(s, &q, collect, c, r, err, sizeof err);
}

/* The p300 oracle's prompt and reference data. */
typedef struct oracle { json_t *fx; int32_t tok[300]; int n; json_t *last; json_t *greedy; } oracle;

static void oracle_load(oracle *o) {
    json_error_t je;
    o->fx = json_load_file("tests/data/gptoss/tiny-seed1-p300.json", 0, &je);
    ck_assert_msg(o->fx != NULL, "%s", je.text);
    json_t *t = json_object_get(o->fx, "tokens");
    o->n = (int)json_array_size(t);
    ck_assert_int_eq(o->n, 300);
    for (int i = 0; i < o->n; i++) o->tok[i] = (int32_t)json_integer_value(json_array_get(t, (size_t)i));
    json_t *pos = json_object_get(o->fx, "positions");
    o->last = json_array_get(pos, json_array_size(pos) - 1);
    ck_assert_int_eq((int)json_integer_value(json_object_get(o->last, "position")), 299);
    o->greedy = json_object_get(json_object_get(o->fx, "greedy"), "tokens");
}

static int32_t greedy_ref(const oracle *o, int i) { return (int32_t)json_integer_value(json_array_get(o->greedy, (size_t)i)); }

START_TEST(describe_and_estimate) {
    llmr_engine_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(g_api->describe(&info), LLMR_ENGINE_OK);
    ck_assert_str_eq(info.id, "gptoss_ref");
    ck_assert_int_eq(info.uses_gpu, 0);
    ck_assert_uint_eq(info.abi_version, LLMR_ENGINE_ABI_VERSION);
    llmr_model_descriptor d = {.struct_size = sizeof d, .format = "safetensors", .architecture = "GptOssForCausalLM", .model_dir = g_dir};
    uint64_t bytes = 1;
    char err[256];
    ck_assert_int_eq(g_api->estimate_vram(&d, NULL, &bytes, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_uint_eq(bytes, 0);
    d.architecture = "LlamaForCausalLM";
    ck_assert_int_eq(g_api->estimate_vram(&d, NULL, &bytes, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "LlamaForCausalLM"));
    d.architecture = "GptOssForCausalLM";
    d.model_dir = "/nonexistent/model";
    llmr_engine_model *m = NULL;
    ck_assert_int_eq(g_api->load(&d, NULL, &m, err, sizeof err), LLMR_ENGINE_LOAD_FAILED);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/model"));
    ck_assert_ptr_null(m);
    g_api->unload(NULL);
    g_api->session_destroy(NULL);
}
END_TEST

/* logits_out after the prompt and the greedy tokens equal transformers' (fixture tiny-seed1-p300). */
START_TEST(matches_transformers_oracle) {
    oracle o;
    oracle_load(&o);
    llmr_engine_model *m = load();
    llmr_engine_session *s = session(m, 0);
    float *logits = malloc(V * sizeof *logits);
    collected c = {0};
    llmr_generate_result r;
    ck_assert_int_eq(gen(s, o.tok, 300, 8, 0, 0, NULL, 0, logits, &c, &r), LLMR_ENGINE_OK);
    json_t *ls = json_object_get(o.last, "logits_strided");
    double num = 0, den = 0;
    for (size_t i = 0; i < json_array_size(ls); i++) {
        double ref = json_real_value(json_array_get(ls, i)), d = logits[i * 97] - ref;
        num += d * d;
        den += ref * ref;
    }
    ck_assert_msg(sqrt(num / den) <= 1e-4, "rel L2 %.3g", sqrt(num / den));
    ck_assert_int_eq(r.finish, LLMR_FINISH_LENGTH);
    ck_assert_uint_eq(r.n_prompt, 300);
    ck_assert_uint_eq(r.n_generated, 8);
    ck_assert_uint_eq(r.n_context, 308);
    ck_assert_int_eq(c.n, 8);
    json_t *margins = json_object_get(json_object_get(o.fx, "greedy"), "top2_margin");
    for (int i = 0; i < 8; i++) {
        if (json_real_value(json_array_get(margins, (size_t)i)) <= 1e-3) break;
        ck_assert_int_eq(c.tok[i], greedy_ref(&o, i));
    }
    /* continuing the same session with no new tokens picks up where it stopped */
    collected c2 = {0};
    ck_assert_int_eq(gen(s, NULL, 0, 4, 0, 0, NULL, 0, NULL, &c2, &r), LLMR_ENGINE_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(c2.tok[i], greedy_ref(&o, 8 + i));
    ck_assert_uint_eq(r.n_context, 312);
    llmr_engine_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(g_api->stats(m, &st), LLMR_ENGINE_OK);
    ck_assert_uint_eq(st.active_sessions, 1);
    ck_assert_uint_eq(st.tokens_generated, 12);
    ck_assert_uint_eq(st.vocab_size, V);
    ck_assert_uint_eq(st.vram_bytes, 0);
    ck_assert_uint_gt(st.ram_bytes, 50u << 20);
    g_api->session_destroy(s);
    g_api->stats(m, &st);
    ck_assert_uint_eq(st.active_sessions, 0);
    g_api->unload(m);
    free(logits);
    json_decref(o.fx);
}
END_TEST

START_TEST(seed_determinism_and_stops) {
    oracle o;
    oracle_load(&o);
    llmr_engine_model *m = load();
    collected a = {0}, b = {0}, c = {0};
    llmr_generate_result r;
    llmr_engine_session *s1 = session(m, 0), *s2 = session(m, 0), *s3 = session(m, 0);
    ck_assert_int_eq(gen(s1, o.tok, 40, 16, 0.9f, 5, NULL, 0, NULL, &a, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(gen(s2, o.tok, 40, 16, 0.9f, 5, NULL, 0, NULL, &b, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(gen(s3, o.tok, 40, 16, 0.9f, 6, NULL, 0, NULL, &c, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(a.n, 16);
    ck_assert_mem_eq(a.tok, b.tok, 16 * sizeof a.tok[0]);
    ck_assert(memcmp(a.tok, c.tok, 16 * sizeof a.tok[0]) != 0);
    g_api->session_destroy(s1);
    g_api->session_destroy(s2);
    g_api->session_destroy(s3);
    /* a stop id ends generation after it is reported */
    llmr_engine_session *s = session(m, 0);
    collected d = {0};
    int32_t stop = greedy_ref(&o, 2);
    ck_assert_int_eq(gen(s, o.tok, 300, 20, 0, 0, &stop, 1, NULL, &d, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(r.finish, LLMR_FINISH_STOP);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.tok[2], stop);
    g_api->session_destroy(s);
    /* on_token asking to stop */
    s = session(m, 0);
    collected e = {.stop_at = 2};
    ck_assert_int_eq(gen(s, o.tok, 10, 20, 0.7f, 1, NULL, 0, NULL, &e, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(r.finish, LLMR_FINISH_STOP);
    ck_assert_uint_eq(r.n_generated, 2);
    g_api->session_destroy(s);
    /* the session's context bounds generation: LENGTH, not an error */
    s = session(m, 16);
    collected f = {0};
    ck_assert_int_eq(gen(s, o.tok, 10, 100, 0, 0, NULL, 0, NULL, &f, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(r.finish, LLMR_FINISH_LENGTH);
    ck_assert_uint_eq(r.n_context, 16);
    ck_assert_uint_eq(r.n_generated, 6);
    /* full: another generate finishes LENGTH at once */
    collected f2 = {0};
    ck_assert_int_eq(gen(s, NULL, 0, 5, 0, 0, NULL, 0, NULL, &f2, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(r.finish, LLMR_FINISH_LENGTH);
    ck_assert_uint_eq(r.n_generated, 0);
    g_api->session_destroy(s);
    g_api->unload(m);
    json_decref(o.fx);
}
END_TEST

START_TEST(bad_requests_named) {
    llmr_engine_model *m = load();
    llmr_engine_session *s = session(m, 8);
    llmr_generate_request q = {.struct_size = sizeof q, .max_tokens = 1};
    llmr_generate_result r = {.struct_size = sizeof r};
    char err[256];
    int32_t bad[2] = {5, V};
    q.tokens = bad;
    q.n_tokens = 2;
    ck_assert_int_eq(g_api->generate(s, &q, NULL, NULL, &r, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "201088"));
    int32_t many[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    q.tokens = many;
    q.n_tokens = 9;
    ck_assert_int_eq(g_api->generate(s, &q, NULL, NULL, &r, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "context of 8"));
    q.n_tokens = 0; /* empty session, nothing to generate from */
    ck_assert_int_eq(g_api->generate(s, &q, NULL, NULL, &r, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    g_api->session_destroy(s);
    g_api->unload(m);
}
END_TEST

typedef struct cancel_arg { llmr_engine_session *s; llmr_engine_status st; llmr_generate_result r; } cancel_arg;

static int count_only(void *user, int32_t t) { (void)t; (*(int *)user)++; return 0; }

static void *run_long(void *p) {
    cancel_arg *a = p;
    int32_t toks[4] = {10, 20, 30, 40};
    llmr_generate_request q = {.struct_size = sizeof q, .tokens = toks, .n_tokens = 4, .max_tokens = 100000};
    q.sampling = (llmr_sampling_params){.struct_size = sizeof q.sampling, .temperature = 1.0f, .seed = 3};
    static int n;
    char err[256];
    a->r.struct_size = sizeof a->r;
    a->st = g_api->generate(a->s, &q, count_only, &n, &a->r, err, sizeof err);
    return NULL;
}

START_TEST(cancel_from_another_thread) {
    llmr_engine_model *m = load();
    cancel_arg a = {.s = session(m, 0)};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_long, &a), 0);
    usleep(300 * 1000);
    g_api->cancel(a.s);
    pthread_join(t, NULL);
    ck_assert_int_eq(a.st, LLMR_ENGINE_CANCELLED);
    ck_assert_int_eq(a.r.finish, LLMR_FINISH_CANCELLED);
    ck_assert_uint_lt(a.r.n_generated, 100000);
    /* the session stays valid: the next generate clears the flag */
    collected c = {0};
    llmr_generate_result r;
    int32_t one = 7;
    ck_assert_int_eq(gen(a.s, &one, 1, 2, 0, 0, NULL, 0, NULL, &c, &r), LLMR_ENGINE_OK);
    ck_assert_int_eq(c.n, 2);
    g_api->session_destroy(a.s);
    g_api->unload(m);
}
END_TEST

/* The node's EngineHost finds the plugin in build/engines, selects it for a GptOssForCausalLM
 * safetensors model on the cpu backend, loads it and generates the oracle's greedy tokens. */
START_TEST(through_the_engine_host) {
    const char *b = getenv("LLMR_BUILD");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/engines", b && *b ? b : "build");
    llmr_engine_host_config cfg = {.engines_dir = dir, .backend = "cpu", .device = -1, .no_thread = 1, .no_watch = 1};
    llmr_engine_host *h = NULL;
    char err[512];
    ck_assert_msg(llmr_engine_host_create(&cfg, &h, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_model_descriptor d = {.struct_size = sizeof d, .id = "test/tiny", .format = "safetensors", .runtime = "gptoss",
                               .architecture = "GptOssForCausalLM", .model_dir = g_dir};
    ck_assert_msg(llmr_engine_host_load(h, &d, NULL, 0, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_host_session *s = NULL;
    ck_assert_msg(llmr_engine_host_session_create(h, "test/tiny", NULL, &s, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_str_eq(llmr_host_session_engine_id(s), "gptoss_ref");
    oracle o;
    oracle_load(&o);
    llmr_generate_request q = {.struct_size = sizeof q, .tokens = o.tok, .n_tokens = 300, .max_tokens = 4};
    q.sampling.struct_size = sizeof q.sampling;
    llmr_generate_result r = {.struct_size = sizeof r};
    collected c = {0};
    ck_assert_msg(llmr_engine_host_generate(s, &q, collect, &c, &r, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(c.n, 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(c.tok[i], greedy_ref(&o, i));
    llmr_engine_host_session_destroy(s);

    /* logprobs through the host (ABI 1.1): one call right before each token's on_token; greedy picks the most
     * likely id; the gap between the two most likely equals transformers' top-2 logit margin (a difference
     * of logits survives log_softmax unchanged) */
    ck_assert_msg(llmr_engine_host_session_create(h, "test/tiny", NULL, &s, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    q.on_logprobs = collect_lp;
    q.top_logprobs = 3;
    collected l = {.lp_order_ok = 1};
    ck_assert_msg(llmr_engine_host_generate(s, &q, collect, &l, &r, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    ck_assert_int_eq(l.n, 4);
    ck_assert_int_eq(l.n_lp, 4);
    ck_assert(l.lp_order_ok);
    json_t *margins = json_object_get(json_object_get(o.fx, "greedy"), "top2_margin");
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(l.tok[i], greedy_ref(&o, i));
        ck_assert_uint_eq(l.lp[i].n_top, 3);
        ck_assert_int_eq(l.lp[i].top_ids[0], l.tok[i]);
        ck_assert_float_eq(l.lp[i].top_logprobs[0], l.lp[i].logprob);
        ck_assert(l.lp[i].logprob <= 0 && l.lp[i].top_logprobs[2] <= l.lp[i].top_logprobs[1]);
        const double m = json_real_value(json_array_get(margins, (size_t)i));
        ck_assert_msg(fabs((l.lp[i].top_logprobs[0] - l.lp[i].top_logprobs[1]) - m) <= 1e-3 * (1 + m),
                      "token %d: top-2 gap %.6f, transformers' margin %.6f", i,
                      l.lp[i].top_logprobs[0] - l.lp[i].top_logprobs[1], m);
    }
    q.top_logprobs = LLMR_MAX_TOP_LOGPROBS + 1;
    ck_assert_int_eq(llmr_engine_host_generate(s, &q, collect, &l, &r, err, sizeof err), LLMR_ENGINE_UNSUPPORTED);
    ck_assert_msg(strstr(err, "top_logprobs 21 exceeds 20"), "%s", err);
    llmr_engine_host_session_destroy(s);
    llmr_engine_host_destroy(h);
    json_decref(o.fx);
}
END_TEST

static Suite *engine_suite(void) {
    Suite *s = suite_create("gptoss_ref_engine");
    TCase *tc = tcase_create("abi");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, make_model, remove_model);
    tcase_add_checked_fixture(tc, open_plugin, close_plugin);
    tcase_add_test(tc, describe_and_estimate);
    tcase_add_test(tc, matches_transformers_oracle);
    tcase_add_test(tc, seed_determinism_and_stops);
    tcase_add_test(tc, bad_requests_named);
    tcase_add_test(tc, cancel_from_another_thread);
    tcase_add_test(tc, through_the_engine_host);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(engine_suite)
