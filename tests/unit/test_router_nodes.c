/* Unit tests for router/nodes: registration checks (schema, NFR-001), heartbeats, offline after the
 * timeout and back online, per-model states, least-outstanding pick, persistence across restarts. */
#include "router/auth.h"
#include "router/nodes.h"
#include "tests/unit/testutil.h"

static char *g_dir;
static router_db *g_db;
static router_nodes *g_n;

static void setup(void) {
    char err[512];
    g_dir = llmr_test_tmpdir();
    g_db = router_db_open(g_dir, 0, err, sizeof err);
    g_n = router_nodes_create(g_db, 15, err, sizeof err);
    ck_assert_ptr_nonnull(g_n);
}

static void teardown(void) {
    router_nodes_destroy(g_n);
    router_db_close(g_db);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

#define GPU_NODE "{\"machine_name\":\"%s\",\"address\":\"10.0.0.%d\",\"port\":8081,\"version\":\"0.1\"," \
                 "\"gpus\":[{\"index\":0,\"name\":\"H100\",\"memory_total_bytes\":85899345920}]," \
                 "\"engines\":[{\"id\":\"gptoss-cuda\",\"version\":\"1\",\"runtimes\":[\"gptoss\"],\"formats\":[\"safetensors\"]}]}"

static int reg(const char *name, int ip, char *id, char *token) {
    char body[1024], err[512], param[32];
    snprintf(body, sizeof body, GPU_NODE, name, ip);
    json_t *j = json_loads(body, 0, NULL);
    int rc = router_nodes_register(g_n, j, 0, id, 64, token, 128, param, err, sizeof err);
    json_decref(j);
    return rc;
}

static int beat(const char *id, const char *tok, const char *models_json, int active) {
    char body[2048], err[512], param[32];
    snprintf(body, sizeof body, "{\"node_id\":\"%s\",\"gpus\":[{\"index\":0,\"memory_free_bytes\":1}],"
             "\"active_requests\":%d,\"models\":%s}", id, active, models_json);
    json_t *j = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    int rc = router_nodes_heartbeat(g_n, id, tok, j, param, err, sizeof err);
    json_decref(j);
    return rc;
}

START_TEST(register_and_token) {
    char id[64], tok[128];
    ck_assert_int_eq(reg("gpu-1", 1, id, tok), 0);
    ck_assert_int_eq(strncmp(tok, ROUTER_NODE_TOKEN_PREFIX, strlen(ROUTER_NODE_TOKEN_PREFIX)), 0);
    char h[65], found[64];
    router_auth_hash(tok, h);
    ck_assert_int_eq(router_db_node_find_token(g_db, h, found, sizeof found), 0);
    ck_assert_str_eq(found, id);
    ck_assert_int_eq(router_nodes_online(g_n, id), 1);
    json_t *l = router_nodes_list_json(g_n);
    json_t *n0 = json_array_get(json_object_get(l, "data"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(n0, "machine_name")), "gpu-1");
    ck_assert_str_eq(json_string_value(json_object_get(n0, "status")), "online");
    ck_assert_int_eq(json_array_size(json_object_get(n0, "gpus")), 1);
    json_decref(l);
}
END_TEST

START_TEST(no_gpu_refused_unless_allowed) {
    const char *cpu = "{\"machine_name\":\"laptop\",\"address\":\"127.0.0.1\",\"port\":9000,\"gpus\":[],"
                      "\"engines\":[{\"id\":\"gptoss-ref\",\"version\":\"1\",\"runtimes\":[\"gptoss\"],\"formats\":[\"safetensors\"],\"cpu_only\":true}]}";
    json_t *j = json_loads(cpu, 0, NULL);
    char id[64], tok[128], err[512], param[32];
    ck_assert_int_eq(router_nodes_register(g_n, j, 0, id, 64, tok, 128, param, err, sizeof err), ROUTER_NODES_ENOGPU);
    ck_assert_ptr_nonnull(strstr(err, "NFR-001"));
    ck_assert_ptr_nonnull(strstr(err, "--allow-cpu-nodes"));
    ck_assert_int_eq(router_nodes_register(g_n, j, 1, id, 64, tok, 128, param, err, sizeof err), 0);
    json_decref(j);
}
END_TEST

START_TEST(bad_registrations) {
    struct { const char *body, *param; } cases[] = {
        {"[]", ""},
        {"{}", "machine_name"},
        {"{\"machine_name\":\"\",\"address\":\"a\",\"port\":1,\"gpus\":[],\"engines\":[]}", "machine_name"},
        {"{\"machine_name\":\"m\",\"address\":\"a b\",\"port\":1,\"gpus\":[],\"engines\":[]}", "address"},
        {"{\"machine_name\":\"m\",\"address\":\"a/b\",\"port\":1,\"gpus\":[],\"engines\":[]}", "address"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":0,\"gpus\":[],\"engines\":[]}", "port"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":70000,\"gpus\":[],\"engines\":[]}", "port"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":\"80\",\"gpus\":[],\"engines\":[]}", "port"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":80,\"gpus\":{},\"engines\":[]}", "gpus"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":80,\"gpus\":[{\"index\":0}],\"engines\":[]}", "gpus"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":80,\"gpus\":[],\"engines\":[{\"id\":\"e\"}]}", "engines"},
        {"{\"machine_name\":\"m\",\"address\":\"a\",\"port\":80,\"gpus\":[],\"engines\":[{\"id\":\"e\",\"version\":\"1\",\"runtimes\":[1],\"formats\":[]}]}", "engines"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = json_loads(cases[i].body, JSON_DECODE_ANY, NULL);
        char id[64], tok[128], err[512], param[32];
        ck_assert_msg(router_nodes_register(g_n, j, 1, id, 64, tok, 128, param, err, sizeof err) == ROUTER_NODES_EINVAL,
                      "case %zu accepted", i);
        ck_assert_msg(!strcmp(param, cases[i].param), "case %zu: param '%s' want '%s' (%s)", i, param, cases[i].param, err);
        json_decref(j);
    }
}
END_TEST

START_TEST(offline_after_timeout_and_back) {
    char id[64], tok[128];
    reg("gpu-1", 1, id, tok);
    int64_t now = router_nodes_now_ms();
    router_nodes_check(g_n, now + 14000);
    ck_assert_int_eq(router_nodes_online(g_n, id), 1);
    router_nodes_check(g_n, now + 16000); /* 3 missed 5 s heartbeats */
    ck_assert_int_eq(router_nodes_online(g_n, id), 0);
    router_node_target *t;
    ck_assert_int_eq(router_nodes_targets(g_n, &t), 0);
    free(t);
    ck_assert_int_eq(beat(id, tok, "[]", 0), 0);
    ck_assert_int_eq(router_nodes_online(g_n, id), 1);
    ck_assert_int_eq(router_nodes_targets(g_n, &t), 1);
    ck_assert_str_eq(t[0].base_url, "http://10.0.0.1:8081");
    ck_assert_str_eq(t[0].token, tok);
    free(t);
}
END_TEST

START_TEST(heartbeat_checks) {
    char id[64], tok[128], id2[64], tok2[128], err[512], param[32];
    reg("gpu-1", 1, id, tok);
    reg("gpu-2", 2, id2, tok2);
    ck_assert_int_eq(beat(id, tok, "[{\"id\":\"a/b\",\"state\":\"sleeping\"}]", 0), ROUTER_NODES_EINVAL);
    ck_assert_int_eq(beat(id, tok, "{}", 0), ROUTER_NODES_EINVAL);
    ck_assert_int_eq(beat(id, tok, "[{\"state\":\"ready\"}]", 0), ROUTER_NODES_EINVAL);
    /* node 2's token cannot speak for node 1 */
    json_t *j = json_pack("{s:s, s:[], s:i, s:[]}", "node_id", id, "gpus", "active_requests", 0, "models");
    ck_assert_int_eq(router_nodes_heartbeat(g_n, id2, tok2, j, param, err, sizeof err), ROUTER_NODES_EFORBIDDEN);
    json_decref(j);
}
END_TEST

START_TEST(model_states_and_ready) {
    char id1[64], tok1[128], id2[64], tok2[128];
    reg("gpu-1", 1, id1, tok1);
    reg("gpu-2", 2, id2, tok2);
    ck_assert_int_eq(router_nodes_model_ready(g_n, "openai/gpt-oss-20b"), 0);
    beat(id1, tok1, "[{\"id\":\"openai/gpt-oss-20b\",\"state\":\"downloading\",\"progress\":{\"percent\":42.5}}]", 0);
    beat(id2, tok2, "[{\"id\":\"openai/gpt-oss-20b\",\"state\":\"unsupported\",\"reason\":\"no engine for runtime gptoss\"}]", 0);
    json_t *s = router_nodes_model_states(g_n, "openai/gpt-oss-20b");
    ck_assert_int_eq(json_array_size(s), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(s, 0), "state")), "downloading");
    ck_assert(json_real_value(json_object_get(json_object_get(json_array_get(s, 0), "progress"), "percent")) == 42.5);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(s, 1), "reason")), "no engine for runtime gptoss");
    json_decref(s);
    ck_assert_int_eq(router_nodes_model_ready(g_n, "openai/gpt-oss-20b"), 0);
    beat(id1, tok1, "[{\"id\":\"openai/gpt-oss-20b\",\"state\":\"ready\"}]", 0);
    ck_assert_int_eq(router_nodes_model_ready(g_n, "OpenAI/gpt-oss-20b"), 1);
    /* ready but offline does not count */
    router_nodes_check(g_n, router_nodes_now_ms() + 60000);
    ck_assert_int_eq(router_nodes_model_ready(g_n, "openai/gpt-oss-20b"), 0);
}
END_TEST

START_TEST(least_outstanding_pick) {
    char id1[64], tok1[128], id2[64], tok2[128];
    reg("gpu-1", 1, id1, tok1);
    reg("gpu-2", 2, id2, tok2);
    router_node_target t;
    ck_assert_int_eq(router_nodes_acquire(g_n, "m/x", &t), ROUTER_NODES_ENOTFOUND);
    beat(id1, tok1, "[{\"id\":\"m/x\",\"state\":\"ready\"}]", 0);
    beat(id2, tok2, "[{\"id\":\"m/x\",\"state\":\"ready\"}]", 0);
    int on1 = 0, on2 = 0;
    char held[4][64];
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(router_nodes_acquire(g_n, "m/x", &t), 0);
        snprintf(held[i], 64, "%s", t.id);
        on1 += !strcmp(t.id, id1), on2 += !strcmp(t.id, id2);
    }
    ck_assert_int_eq(on1, 2);
    ck_assert_int_eq(on2, 2);
    router_nodes_release(g_n, id2);
    router_nodes_release(g_n, id2);
    ck_assert_int_eq(router_nodes_acquire(g_n, "m/x", &t), 0);
    ck_assert_str_eq(t.id, id2);
    router_nodes_release(g_n, "unknown-node"); /* harmless */
}
END_TEST

START_TEST(known_after_restart) {
    char id[64], tok[128], id2[64], tok2[128], err[512];
    reg("gpu-1", 1, id, tok);
    router_nodes_destroy(g_n);
    g_n = router_nodes_create(g_db, 15, err, sizeof err);
    ck_assert_int_eq(router_nodes_online(g_n, id), 0); /* offline until it speaks */
    ck_assert_int_eq(beat(id, tok, "[]", 0), 0);
    ck_assert_int_eq(router_nodes_online(g_n, id), 1);
    /* re-registering with its id keeps the id, and only the new token is valid */
    char body[1024], param[32];
    snprintf(body, sizeof body, GPU_NODE, "gpu-1", 1);
    json_t *j = json_loads(body, 0, NULL);
    json_object_set_new(j, "node_id", json_string(id));
    ck_assert_int_eq(router_nodes_register(g_n, j, 0, id2, 64, tok2, 128, param, err, sizeof err), 0);
    json_decref(j);
    ck_assert_str_eq(id, id2);
    char h[65], found[64];
    router_auth_hash(tok, h);
    ck_assert_int_eq(router_db_node_find_token(g_db, h, found, sizeof found), ROUTER_DB_ENOTFOUND);
    json_t *l = router_nodes_list_json(g_n);
    ck_assert_int_eq(json_array_size(json_object_get(l, "data")), 1);
    json_decref(l);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_nodes");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, register_and_token);
    tcase_add_test(tc, no_gpu_refused_unless_allowed);
    tcase_add_test(tc, bad_registrations);
    tcase_add_test(tc, offline_after_timeout_and_back);
    tcase_add_test(tc, heartbeat_checks);
    tcase_add_test(tc, model_states_and_ready);
    tcase_add_test(tc, least_outstanding_pick);
    tcase_add_test(tc, known_after_restart);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
