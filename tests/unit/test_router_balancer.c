/* Unit tests for router/balancer (+ router_nodes_acquire_ex): least outstanding with round-robin
 * ties, per-node max_concurrency, exclude (failover), 404/503 outcomes, the bounded FIFO queue
 * (429 when full, served on release in order, 504 after the wait limit, cancel), and
 * router/metrics' exposition text. */
#include <event2/event.h>

#include "common/event_loop.h"
#include "router/balancer.h"
#include "router/metrics.h"
#include "router/nodes.h"
#include "tests/unit/testutil.h"

static char *g_dir;
static router_db *g_db;
static router_nodes *g_n;
static llmr_loop *g_loop;

static void setup(void) {
    char err[512];
    g_dir = llmr_test_tmpdir();
    g_db = router_db_open(g_dir, 0, err, sizeof err);
    g_n = router_nodes_create(g_db, 15, err, sizeof err);
    g_loop = llmr_loop_create();
    ck_assert_ptr_nonnull(g_n);
    ck_assert_ptr_nonnull(g_loop);
}

static void teardown(void) {
    router_nodes_destroy(g_n);
    router_db_close(g_db);
    llmr_loop_destroy(g_loop);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

/* Registers a node with max_concurrency mc and the model m/x ready; fills id. */
static void node_with(int ip, int mc, char *id) {
    char body[1024], err[512], param[32], tok[128];
    snprintf(body, sizeof body,
             "{\"machine_name\":\"gpu-%d\",\"address\":\"10.0.0.%d\",\"port\":8081,\"max_concurrency\":%d,"
             "\"gpus\":[{\"index\":0,\"name\":\"H100\",\"memory_total_bytes\":85899345920}],"
             "\"engines\":[{\"id\":\"e\",\"version\":\"1\",\"runtimes\":[\"gptoss\"],\"formats\":[\"safetensors\"]}]}",
             ip, ip, mc);
    json_t *j = json_loads(body, 0, NULL);
    ck_assert_int_eq(router_nodes_register(g_n, j, 0, id, 64, tok, 128, param, err, sizeof err), 0);
    json_decref(j);
    snprintf(body, sizeof body, "{\"node_id\":\"%s\",\"gpus\":[],\"active_requests\":0,"
             "\"models\":[{\"id\":\"m/x\",\"state\":\"ready\"}]}", id);
    j = json_loads(body, 0, NULL);
    ck_assert_int_eq(router_nodes_heartbeat(g_n, id, tok, j, param, err, sizeof err), 0);
    json_decref(j);
}

START_TEST(round_robin_ties_and_limits) {
    char a[64], b[64];
    router_node_target t;
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", NULL, &t), ROUTER_NODES_EOFFLINE);
    node_with(1, 2, a);
    node_with(2, 2, b);
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/other", NULL, &t), ROUTER_NODES_ENOTFOUND);
    /* idle nodes take turns: acquire+release alternates */
    char first[64];
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", NULL, &t), 0);
    snprintf(first, sizeof first, "%s", t.id);
    router_nodes_release(g_n, t.id);
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", NULL, &t), 0);
    ck_assert_str_ne(t.id, first);
    router_nodes_release(g_n, t.id);
    /* four slots in all, then busy */
    int on_a = 0;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", NULL, &t), 0);
        on_a += !strcmp(t.id, a);
    }
    ck_assert_int_eq(on_a, 2);
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", NULL, &t), ROUTER_NODES_EBUSY);
    router_nodes_release(g_n, b);
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", b, &t), ROUTER_NODES_EBUSY); /* only b has room: excluded */
    ck_assert_int_eq(router_nodes_acquire_ex(g_n, "m/x", a, &t), 0);
    ck_assert_str_eq(t.id, b);
}
END_TEST

static int g_calls, g_last;
static char g_node[64];
static void cb(void *user, int outcome, const router_node_target *t) {
    (void)user;
    g_calls++;
    g_last = outcome;
    snprintf(g_node, sizeof g_node, "%s", t ? t->id : "");
}

static void stop_loop(evutil_socket_t fd, short what, void *arg) { (void)fd; (void)what; llmr_loop_stop(arg); }

START_TEST(queue_fifo_full_timeout_cancel) {
    char a[64];
    node_with(1, 1, a);
    router_balancer *b = router_balancer_create(g_loop, g_n, 2, 200);
    router_node_target t;
    router_bal_wait *w1, *w2, *w3;
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 1, &t, cb, NULL, &w1), ROUTER_BAL_OK);
    ck_assert_int_eq(router_balancer_acquire(b, "m/nope", NULL, 1, &t, cb, NULL, &w1), ROUTER_BAL_NO_MODEL);
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 1, &t, cb, NULL, &w1), ROUTER_BAL_QUEUED);
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 1, &t, cb, NULL, &w2), ROUTER_BAL_QUEUED);
    ck_assert_int_eq(router_balancer_queue_depth(b), 2);
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 1, &t, cb, NULL, &w3), ROUTER_BAL_QUEUE_FULL);
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 0, &t, cb, NULL, &w3), ROUTER_BAL_QUEUE_FULL);
    /* a release serves the oldest waiter with the freed slot */
    router_balancer_release(b, a);
    ck_assert_int_eq(g_calls, 1);
    ck_assert_int_eq(g_last, ROUTER_BAL_OK);
    ck_assert_str_eq(g_node, a);
    ck_assert_int_eq(router_balancer_queue_depth(b), 1);
    /* the second waiter times out after 200 ms */
    struct event *ev = evtimer_new(llmr_loop_base(g_loop), stop_loop, g_loop);
    struct timeval tv = {0, 600000};
    evtimer_add(ev, &tv);
    llmr_loop_run(g_loop);
    event_free(ev);
    ck_assert_int_eq(g_calls, 2);
    ck_assert_int_eq(g_last, ROUTER_BAL_TIMEOUT);
    ck_assert_int_eq(router_balancer_queue_depth(b), 0);
    /* a cancelled waiter is never called */
    ck_assert_int_eq(router_balancer_acquire(b, "m/x", NULL, 1, &t, cb, NULL, &w3), ROUTER_BAL_QUEUED);
    router_balancer_cancel(b, w3);
    ck_assert_int_eq(router_balancer_queue_depth(b), 0);
    router_balancer_release(b, a);
    ck_assert_int_eq(g_calls, 2);
    ck_assert_int_ge(router_balancer_retry_after_s(b), 1);
    router_balancer_destroy(b);
    router_balancer_destroy(NULL);
}
END_TEST

START_TEST(metrics_text) {
    router_metrics *m = router_metrics_create();
    router_metrics_request(m, "/v1/chat/completions", 200, 0.02);
    router_metrics_request(m, "/v1/chat/completions", 200, 3.0);
    router_metrics_request(m, "/v1/chat/completions", 429, 0.001);
    router_metrics_ttft(m, "/v1/chat/completions", 0.2);
    router_metrics_tokens(m, 70, 12);
    router_metrics_failover(m);
    char *t = router_metrics_render(m, 3, 2);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_requests_total{route=\"/v1/chat/completions\",status=\"429\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_request_duration_seconds_bucket{route=\"/v1/chat/completions\",le=\"0.025\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_request_duration_seconds_bucket{route=\"/v1/chat/completions\",le=\"+Inf\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_time_to_first_token_seconds_count{route=\"/v1/chat/completions\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_tokens_total{direction=\"in\"} 70\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_tokens_total{direction=\"out\"} 12\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_failovers_total 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_queue_depth 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "llmr_router_nodes_online 2\n"));
    free(t);
    router_metrics_destroy(m);
    router_metrics_destroy(NULL);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_balancer");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, round_robin_ties_and_limits);
    tcase_add_test(tc, queue_fifo_full_timeout_cancel);
    tcase_add_test(tc, metrics_text);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
