/* The engine host driving a real engine: gptoss_ref (build/engines/gptoss_ref, the C reference) on a
 * synthetic tiny gpt-oss checkpoint. Checks that the registry picks it from the registered format and
 * config.json architecture on a cpu backend, tokens stream through the host, sessions on one model
 * run concurrently and independently, host cancel reaches the engine, and the stall watchdog cancels a
 * real generation (a consumer that stops reading) and frees the session's KV memory. */
#include "common/gptoss/synth.h"
#include "node/engine/engine_host.h"
#include "tests/unit/engine_fixture.h"

#include <pthread.h>

static char g_model[64];

static void make_model(void) {
    char *d = llmr_test_tmpdir();
    if (!d) abort();
    snprintf(g_model, sizeof g_model, "%s", d);
    free(d);
    gptoss_synth_options o = {.preset = "tiny", .seed = 3, .out_dir = g_model, .threads = 2};
    char err[512];
    if (gptoss_synth_write(&o, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
}

static void remove_model(void) { fx_rm_rf(g_model); }

/* A host over $LLMR_BUILD/engines (the real build output) on the cpu backend, or NULL when
 * gptoss_ref was not built. */
static llmr_engine_host *open_host(uint32_t stall_ms) {
    char dir[4096], so[4200];
    snprintf(dir, sizeof dir, "%s/engines", fx_build());
    snprintf(so, sizeof so, "%s/gptoss_ref/libgptoss_ref.so", dir);
    if (access(so, R_OK) != 0) return NULL;
    llmr_engine_host_config cfg = {0};
    cfg.engines_dir = dir;
    cfg.backend = "cpu";
    cfg.device = -1;
    cfg.no_watch = 1;
    cfg.stall_timeout_ms = stall_ms;
    cfg.provider = llmr_resource_provider_fake_create();
    llmr_resource_fake_set(cfg.provider, 0, 0, 64ull << 30, 1ull << 30);
    llmr_engine_host *h = NULL;
    char err[1024];
    ck_assert_msg(llmr_engine_host_create(&cfg, &h, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    llmr_model_descriptor d = {sizeof d, "test/tiny", "safetensors", "gptoss", "GptOssForCausalLM", g_model, NULL};
    ck_assert_msg(llmr_engine_host_load(h, &d, NULL, 0, err, sizeof err) == LLMR_ENGINE_OK, "%s", err);
    return h;
}

typedef struct run {
    llmr_host_session *s;
    int32_t toks[64];
    int n;
    int stall_at, stall_ms;  /* the consumer stops reading after this many tokens */
    llmr_engine_status st;
    char err[1024];
} run;

static int on_token(void *u, int32_t t) {
    run *r = u;
    if (r->n < 64) r->toks[r->n] = t;
    r->n++;
    if (r->stall_at && r->n == r->stall_at) fx_sleep_ms(r->stall_ms);
    return 0;
}

static const int32_t prompt[] = {200006, 17360, 200008, 3575, 553, 261, 10297, 200007, 200006, 1428, 200008};

static void *generate(void *arg) {
    run *r = arg;
    llmr_generate_request q;
    memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    q.tokens = prompt;
    q.n_tokens = sizeof prompt / sizeof prompt[0];
    q.max_tokens = 12;
    q.sampling.struct_size = sizeof q.sampling; /* temperature 0: greedy */
    r->n = 0;
    r->st = llmr_engine_host_generate(r->s, &q, on_token, r, NULL, r->err, sizeof r->err);
    return NULL;
}

START_TEST(registry_picks_gptoss_ref_and_tokens_stream) {
    llmr_engine_host *h = open_host(0);
    if (!h) LLMR_SKIP("gptoss_ref not built");
    char err[1024];
    run a = {0}, b = {0};
    ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &a.s, err, sizeof err), LLMR_ENGINE_OK);
    ck_assert_str_eq(llmr_host_session_engine_id(a.s), "gptoss_ref");
    generate(&a);
    ck_assert_msg(a.st == LLMR_ENGINE_OK, "%s", a.err);
    ck_assert_int_eq(a.n, 12);
    /* a fresh session is independent: same prompt, same greedy tokens */
    ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &b.s, err, sizeof err), LLMR_ENGINE_OK);
    generate(&b);
    ck_assert_int_eq(b.n, 12);
    ck_assert_mem_eq(a.toks, b.toks, sizeof(int32_t) * 12);
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(h, &snap);
    ck_assert_uint_eq(snap.tokens_generated_total, 24);
    ck_assert_uint_eq(snap.sessions_active, 2);
    llmr_engine_host_session_destroy(a.s);
    llmr_engine_host_session_destroy(b.s);
    llmr_engine_host_destroy(h);
}
END_TEST

START_TEST(concurrent_sessions_match_serial) {
    llmr_engine_host *h = open_host(0);
    if (!h) LLMR_SKIP("gptoss_ref not built");
    char err[1024];
    run ref = {0};
    ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &ref.s, err, sizeof err), LLMR_ENGINE_OK);
    generate(&ref);
    ck_assert_int_eq(ref.st, LLMR_ENGINE_OK);
    enum { N = 3 };
    run rs[N];
    pthread_t th[N];
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &rs[i].s, err, sizeof err), LLMR_ENGINE_OK);
        pthread_create(&th[i], NULL, generate, &rs[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(rs[i].st == LLMR_ENGINE_OK, "%s", rs[i].err);
        ck_assert_int_eq(rs[i].n, 12);
        ck_assert_mem_eq(rs[i].toks, ref.toks, sizeof(int32_t) * 12);
        llmr_engine_host_session_destroy(rs[i].s);
    }
    llmr_engine_host_session_destroy(ref.s);
    llmr_engine_host_destroy(h);
}
END_TEST

START_TEST(watchdog_cancels_a_real_generation_and_frees_its_memory) {
    llmr_engine_host *h = open_host(1000); /* well above a tiny model's token time, even on a loaded machine */
    if (!h) LLMR_SKIP("gptoss_ref not built");
    char err[1024];
    llmr_host_model_info *mi;
    size_t n;
    llmr_engine_host_models(h, &mi, &n);
    uint64_t idle_ram = mi[0].ram_bytes + mi[0].vram_bytes;
    free(mi);
    run r = {.stall_at = 3, .stall_ms = 2000};
    ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &r.s, err, sizeof err), LLMR_ENGINE_OK);
    llmr_engine_host_models(h, &mi, &n);
    ck_assert_uint_gt(mi[0].ram_bytes + mi[0].vram_bytes, idle_ram); /* the session holds KV memory */
    free(mi);
    generate(&r);
    ck_assert_msg(r.st == LLMR_ENGINE_TIMEOUT, "status %s: %s", llmr_engine_status_name(r.st), r.err);
    ck_assert_msg(strstr(r.err, "no token for 1000 ms") && strstr(r.err, "engine gptoss_ref"), "%s", r.err);
    ck_assert_int_le(r.n, 3); /* 3, or fewer on a very slow machine (sanitizers): then the prompt stalled */
    llmr_engine_host_models(h, &mi, &n);
    ck_assert_uint_eq(mi[0].sessions, 0);
    ck_assert_uint_eq(mi[0].ram_bytes + mi[0].vram_bytes, idle_ram); /* the session's KV is gone */
    free(mi);
    llmr_engine_host_session_destroy(r.s);
    llmr_engine_host_destroy(h);
}
END_TEST

static void *cancel_later(void *arg) {
    fx_sleep_ms(100);
    llmr_engine_host_cancel(arg);
    return NULL;
}

START_TEST(host_cancel_reaches_the_engine) {
    llmr_engine_host *h = open_host(0);
    if (!h) LLMR_SKIP("gptoss_ref not built");
    char err[1024];
    run r = {.stall_at = 2, .stall_ms = 300}; /* slow consumer: the cancel lands mid-generation */
    ck_assert_int_eq(llmr_engine_host_session_create(h, "test/tiny", NULL, &r.s, err, sizeof err), LLMR_ENGINE_OK);
    pthread_t t;
    pthread_create(&t, NULL, cancel_later, r.s);
    generate(&r);
    pthread_join(t, NULL);
    ck_assert_msg(r.st == LLMR_ENGINE_CANCELLED, "status %s: %s", llmr_engine_status_name(r.st), r.err);
    ck_assert_int_lt(r.n, 12);
    llmr_engine_host_session_destroy(r.s);
    llmr_engine_host_destroy(h);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("engine_host_gptoss");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, make_model, remove_model);
    tcase_add_test(tc, registry_picks_gptoss_ref_and_tokens_stream);
    tcase_add_test(tc, concurrent_sessions_match_serial);
    tcase_add_test(tc, watchdog_cancels_a_real_generation_and_frees_its_memory);
    tcase_add_test(tc, host_cancel_reaches_the_engine);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
