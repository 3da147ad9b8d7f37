/* Unit tests for node/router_client.c against a scripted HTTP server: registration retried with
 * backoff through refusals until a 201, node id + token persisted (0600) and sent back on the next
 * registration, a malformed answer refused, 401 invalidating the token, constant-time token check. */
#include <sys/stat.h>
#include <unistd.h>

#include "node/router_client.h"
#include "scripted_server.h"
#include "testutil.h"

static int refusals; /* answers before the 201 */
static char last_body[4096];

static void handler(tsrv *s, int fd, const ts_req *r) {
    (void)s;
    if (strcmp(r->path, "/v0/nodes") == 0) {
        snprintf(last_body, sizeof last_body, "%.*s", (int)r->body_len, r->body);
        if (r->n < refusals) {
            const char *e = "{\"error\":{\"message\":\"node 'x' reports no GPU (NFR-001)\",\"code\":\"gpu_required\"}}";
            ts_reply(fd, 403, "Content-Type: application/json\r\n", e, strlen(e));
            return;
        }
        const char *ok = "{\"node_id\":\"node-1\",\"node_token\":\"llmr-node-0123456789abcdef\","
                         "\"settings\":{\"allow_cpu_engines\":true,\"heartbeat_interval_s\":2,\"sync_interval_s\":9}}";
        ts_reply(fd, 201, "Content-Type: application/json\r\n", ok, strlen(ok));
    } else if (strcmp(r->path, "/v0/health") == 0) {
        ts_reply(fd, 401, NULL, "{}", 2);
    } else if (strcmp(r->path, "/bad") == 0) {
        ts_reply(fd, 200, NULL, "{}", 2);
    } else {
        ts_reply(fd, 404, NULL, "", 0);
    }
}

static json_t *body_fn(void *user) {
    (void)user;
    return json_pack("{s:s, s:s, s:i, s:[], s:[]}", "machine_name", "m", "address", "127.0.0.1", "port", 1, "gpus",
                     "engines");
}

static char *dir;
static void setup(void) { dir = llmr_test_tmpdir(); last_body[0] = 0; }
static void teardown(void) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

START_TEST(test_register_retries_then_persists) {
    refusals = 2;
    tsrv *s = ts_start(handler, NULL);
    char err[256], url[64], state[4200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", s->port); /* trailing slash dropped */
    snprintf(state, sizeof state, "%s/state", dir);
    llmr_router_client *rc = llmr_router_client_create(url, state, body_fn, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(rc);
    ck_assert_int_eq(llmr_router_client_registered(rc), 0);
    atomic_int stop = 0;
    ck_assert_int_eq(llmr_router_client_register(rc, &stop), 0);
    ck_assert_int_eq(ts_count(s), 3); /* two 403s, then the 201 */
    ck_assert_int_eq(llmr_router_client_registered(rc), 1);
    char id[64];
    llmr_router_client_node_id(rc, id, sizeof id);
    ck_assert_str_eq(id, "node-1");
    llmr_router_settings st;
    llmr_router_client_settings(rc, &st);
    ck_assert(st.allow_cpu_engines && st.heartbeat_interval_s == 2 && st.sync_interval_s == 9);
    ck_assert(llmr_router_client_check_token(rc, "llmr-node-0123456789abcdef"));
    ck_assert(!llmr_router_client_check_token(rc, "llmr-node-0123456789abcdeX"));
    ck_assert(!llmr_router_client_check_token(rc, "llmr-node-0123456789abcde"));
    ck_assert(!llmr_router_client_check_token(rc, NULL));
    char path[4300];
    snprintf(path, sizeof path, "%s/node.json", state);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0600);
    /* 401 on a call drops the token. */
    llmr_httpc_resp resp = {0};
    ck_assert_int_eq(llmr_router_client_call(rc, "POST", "/v0/health", "{}", 0, &resp, err, sizeof err), LLMR_HTTPC_OK);
    llmr_httpc_resp_free(&resp);
    ck_assert_int_eq(llmr_router_client_registered(rc), 0);
    ck_assert_ptr_nonnull(strstr(ts_request(s, 3), "Authorization: Bearer llmr-node-0123456789abcdef"));
    llmr_router_client_destroy(rc);
    /* A new client (a restarted node) sends the persisted id back. */
    rc = llmr_router_client_create(url, state, body_fn, NULL, err, sizeof err);
    ck_assert_int_eq(llmr_router_client_register(rc, &stop), 0);
    ck_assert_ptr_nonnull(strstr(last_body, "\"node_id\":\"node-1\""));
    llmr_router_client_destroy(rc);
    /* node.json of another router is ignored. */
    rc = llmr_router_client_create("http://127.0.0.1:1", state, body_fn, NULL, err, sizeof err);
    llmr_router_client_node_id(rc, id, sizeof id);
    ck_assert_str_eq(id, "");
    llmr_router_client_destroy(rc);
    ts_stop(s);
}
END_TEST

START_TEST(test_stop_interrupts_retries) {
    refusals = 1000;
    tsrv *s = ts_start(handler, NULL);
    char err[256], url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    llmr_router_client *rc = llmr_router_client_create(url, dir, body_fn, NULL, err, sizeof err);
    atomic_int stop = 1;
    ck_assert_int_eq(llmr_router_client_register(rc, &stop), -1);
    llmr_router_client_destroy(rc);
    ts_stop(s);
}
END_TEST

START_TEST(test_bad_arguments) {
    char err[256];
    ck_assert_ptr_null(llmr_router_client_create("ftp://x", dir, body_fn, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "--router"));
    ck_assert_ptr_null(llmr_router_client_create(NULL, dir, body_fn, NULL, err, sizeof err));
    ck_assert_ptr_null(llmr_router_client_create("http://x", "", body_fn, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "--state-dir"));
    /* A corrupt node.json is ignored, not fatal. */
    char path[4200];
    snprintf(path, sizeof path, "%s/node.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    llmr_router_client *rc = llmr_router_client_create("http://127.0.0.1:1", dir, body_fn, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(rc);
    llmr_router_client_destroy(rc);
    llmr_router_client_destroy(NULL);
    llmr_httpc_resp resp = {0};
    resp.body = "{\"error\":{\"message\":\"why\"}}";
    resp.body_len = strlen(resp.body);
    llmr_router_error_message(&resp, err, sizeof err);
    ck_assert_str_eq(err, "why");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_client");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_register_retries_then_persists);
    tcase_add_test(tc, test_stop_interrupts_retries);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
