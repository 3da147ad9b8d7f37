/* Unit tests for router/api_openai (+ balancer, proxy): the router's OpenAI shapes checked against a
 * node stand-in. The stand-in is an llmr_http_server on the same loop answering POST /v0/generate
 * with a scripted SSE stream of schema/node-generate.event objects, so the cases a tiny random model
 * never produces (tool calls, reasoning, an error event first, a busy node) are exercised. The real
 * node is tested end to end in e2e/test_serving_openai.sh. */
#include <pthread.h>

#include "common/http_client.h"
#include "router/api_openai.h"
#include "router/nodes.h"
#include "router/registry.h"
#include "tests/unit/testutil.h"

static char *g_dir;
static router_ctx g_ctx;
static llmr_http_server *g_node;
static pthread_t g_thread;
static llmr_httpc *g_c;
static char g_url[128];
static const char *g_script; /* the node's SSE body, or "429" */
static int g_node_calls;

static void h_generate(llmr_http_request *req, void *user) {
    (void)user;
    g_node_calls++;
    if (!strcmp(g_script, "429")) {
        llmr_http_reply_error(req, 429, NULL, "busy", NULL, NULL, "this node serves 2 requests at once");
        return;
    }
    llmr_http_stream_start(req, 200, "text/event-stream");
    llmr_http_stream_write(req, g_script, strlen(g_script));
    llmr_http_stream_end(req);
}

static void *loop_main(void *p) {
    (void)p;
    llmr_loop_run(g_ctx.loop);
    return NULL;
}

static void setup(void) {
    char err[1024];
    memset(&g_ctx, 0, sizeof g_ctx);
    g_dir = llmr_test_tmpdir();
    g_ctx.cfg.queue_max = 2;
    g_ctx.cfg.queue_timeout_ms = 500;
    pthread_mutex_init(&g_ctx.jobs_mu, NULL);
    pthread_cond_init(&g_ctx.jobs_cv, NULL);
    ck_assert_ptr_nonnull(g_ctx.db = router_db_open(g_dir, 0, err, sizeof err));
    ck_assert_ptr_nonnull(g_ctx.auth = router_auth_create(g_ctx.db, NULL, 1, err, sizeof err));
    ck_assert_ptr_nonnull(g_ctx.nodes = router_nodes_create(g_ctx.db, 60, err, sizeof err));
    ck_assert_ptr_nonnull(g_ctx.loop = llmr_loop_create());
    llmr_http_server_opts o = {.listen = "127.0.0.1:0"};
    ck_assert_ptr_nonnull(g_ctx.http = llmr_http_server_create(g_ctx.loop, &o, err, sizeof err));
    ck_assert_ptr_nonnull(g_node = llmr_http_server_create(g_ctx.loop, &o, err, sizeof err));
    llmr_http_server_route(g_node, "POST", "/v0/generate", h_generate, NULL);
    ck_assert_int_eq(router_openai_init(&g_ctx, err, sizeof err), 0);
    /* one node serving t/m, one registered model with a trivial template */
    char body[1024], id[64], tok[128], param[32];
    snprintf(body, sizeof body,
             "{\"machine_name\":\"stand-in\",\"address\":\"127.0.0.1\",\"port\":%d,\"max_concurrency\":2,\"gpus\":[],"
             "\"engines\":[{\"id\":\"e\",\"version\":\"1\",\"runtimes\":[\"gptoss\"],\"formats\":[\"safetensors\"]}]}",
             llmr_http_server_port(g_node));
    json_t *j = json_loads(body, 0, NULL);
    ck_assert_int_eq(router_nodes_register(g_ctx.nodes, j, 1, id, 64, tok, 128, param, err, sizeof err), 0);
    json_decref(j);
    snprintf(body, sizeof body, "{\"node_id\":\"%s\",\"gpus\":[],\"active_requests\":0,\"models\":[{\"id\":\"t/m\",\"state\":\"ready\"}]}", id);
    j = json_loads(body, 0, NULL);
    ck_assert_int_eq(router_nodes_heartbeat(g_ctx.nodes, id, tok, j, param, err, sizeof err), 0);
    json_decref(j);
    json_t *rec = json_pack("{s:s, s:s}", "id", "t/m", "format", "safetensors");
    ck_assert_int_eq(router_registry_add(g_ctx.db, rec, "{% for m in messages %}{{ m.content }}{% endfor %}", err, sizeof err), 0);
    json_decref(rec);
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%d", llmr_http_server_port(g_ctx.http));
    llmr_httpc_opts co = {.retries = -1};
    g_c = llmr_httpc_create(&co);
    g_node_calls = 0;
    pthread_create(&g_thread, NULL, loop_main, NULL);
}

static void teardown(void) {
    llmr_loop_stop(g_ctx.loop);
    pthread_join(g_thread, NULL);
    router_openai_fini(&g_ctx);
    llmr_httpc_destroy(g_c);
    llmr_http_server_destroy(g_node);
    llmr_http_server_destroy(g_ctx.http);
    llmr_loop_destroy(g_ctx.loop);
    router_nodes_destroy(g_ctx.nodes);
    router_auth_destroy(g_ctx.auth);
    router_db_close(g_ctx.db);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

/* POSTs body to path; returns the status, *out the parsed JSON (non-stream) or NULL, *text the raw body. */
static long post(const char *path, const char *body, json_t **out, char **text) {
    char url[256], err[512];
    snprintf(url, sizeof url, "%s%s", g_url, path);
    llmr_httpc_resp r = {0};
    llmr_httpc_status st = llmr_httpc_post_json(g_c, url, body, &r, err, sizeof err);
    ck_assert_msg(st == LLMR_HTTPC_OK, "%s", err);
    long status = r.status;
    if (out) *out = json_loads(r.body ? r.body : "", 0, NULL);
    if (text) *text = strdup(r.body ? r.body : "");
    llmr_httpc_resp_free(&r);
    return status;
}

#define TOOL_SCRIPT                                                                                                     \
    "data: {\"type\":\"delta\",\"reasoning\":\"Need the \"}\n\n"                                                        \
    "data: {\"type\":\"delta\",\"reasoning\":\"weather.\"}\n\n"                                                         \
    "data: {\"type\":\"delta\",\"tool_calls\":[{\"index\":0,\"name\":\"get_weather\",\"arguments\":\"\"}]}\n\n"         \
    "data: {\"type\":\"delta\",\"tool_calls\":[{\"index\":0,\"arguments\":\"{\\\"city\\\":\"}]}\n\n"                    \
    "data: {\"type\":\"delta\",\"tool_calls\":[{\"index\":0,\"arguments\":\"\\\"Paris\\\"}\"}]}\n\n"                    \
    "data: {\"type\":\"done\",\"finish_reason\":\"tool_calls\",\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":7,\"reasoning_tokens\":3}}\n\n"

START_TEST(chat_tool_calls_and_reasoning) {
    g_script = TOOL_SCRIPT;
    json_t *j;
    long st = post("/v1/chat/completions", "{\"model\":\"T/M\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}],\"some_unknown_field\":1}", &j, NULL);
    ck_assert_int_eq(st, 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "object")), "chat.completion");
    ck_assert_str_eq(json_string_value(json_object_get(j, "model")), "T/M");
    ck_assert_int_eq(strncmp(json_string_value(json_object_get(j, "id")), "chatcmpl-", 9), 0);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
    json_t *m = json_object_get(c, "message");
    ck_assert(json_is_null(json_object_get(m, "content")));
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning")), "Need the weather.");
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "Need the weather.");
    json_t *tc = json_array_get(json_object_get(m, "tool_calls"), 0);
    ck_assert_int_eq(strncmp(json_string_value(json_object_get(tc, "id")), "call_", 5), 0);
    ck_assert_str_eq(json_string_value(json_object_get(tc, "type")), "function");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(tc, "function"), "name")), "get_weather");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")), "{\"city\":\"Paris\"}");
    ck_assert_ptr_null(json_object_get(tc, "index"));
    json_t *u = json_object_get(j, "usage");
    ck_assert_int_eq(json_integer_value(json_object_get(u, "total_tokens")), 16);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(u, "completion_tokens_details"), "reasoning_tokens")), 3);
    json_decref(j);
}
END_TEST

START_TEST(chat_stream_shapes) {
    g_script = TOOL_SCRIPT;
    char *t;
    long st = post("/v1/chat/completions", "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", NULL, &t);
    ck_assert_int_eq(st, 200);
    /* role first, reasoning under both names, the tool call's id/type/name once then argument pieces */
    ck_assert_ptr_nonnull(strstr(t, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"));
    ck_assert_ptr_nonnull(strstr(t, "\"reasoning\":\"Need the \",\"reasoning_content\":\"Need the \""));
    ck_assert_ptr_nonnull(strstr(t, "\"tool_calls\":[{\"index\":0,\"id\":\"call_"));
    ck_assert_ptr_nonnull(strstr(t, "\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]"));
    ck_assert_ptr_nonnull(strstr(t, "\"finish_reason\":\"tool_calls\""));
    ck_assert_ptr_nonnull(strstr(t, "\"choices\":[],\"usage\":{\"prompt_tokens\":9"));
    ck_assert_ptr_nonnull(strstr(t, "\"usage\":null"));
    size_t n = strlen(t);
    ck_assert(n > 14 && !strcmp(t + n - 14, "data: [DONE]\n\n"));
    free(t);
}
END_TEST

START_TEST(completions_and_stop_shape) {
    g_script = "data: {\"type\":\"delta\",\"content\":\"Hel\"}\n\ndata: {\"type\":\"delta\",\"content\":\"lo\"}\n\n"
               "data: {\"type\":\"done\",\"finish_reason\":\"length\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n";
    json_t *j;
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":[\"x\"],\"stop\":\"\\n\"}", &j, NULL), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "object")), "text_completion");
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "text")), "Hello");
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    json_decref(j);
    char *t;
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":[1,2,3],\"stream\":true}", NULL, &t), 200);
    ck_assert_ptr_nonnull(strstr(t, "\"object\":\"text_completion\""));
    ck_assert_ptr_nonnull(strstr(t, "\"text\":\"Hel\""));
    ck_assert_ptr_nonnull(strstr(t, "data: [DONE]"));
    free(t);
}
END_TEST

static void expect_400(const char *path, const char *body, const char *param) {
    json_t *j;
    ck_assert_int_eq(post(path, body, &j, NULL), 400);
    json_t *e = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "type")), "invalid_request_error");
    ck_assert_msg(json_string_value(json_object_get(e, "param")) && !strcmp(json_string_value(json_object_get(e, "param")), param),
                  "%s: param %s", body, json_string_value(json_object_get(e, "param")));
    json_decref(j);
}

START_TEST(validation_names_the_param) {
    g_script = "data: {\"type\":\"done\",\"finish_reason\":\"stop\",\"usage\":{}}\n\n";
    const char *chat = "/v1/chat/completions";
    expect_400(chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "model");
    expect_400(chat, "{\"model\":\"t/m\"}", "messages");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", "messages[0]");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":3}", "temperature");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_p\":\"1\"}", "top_p");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2}", "n");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}", "max_tokens");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":1.5}", "max_completion_tokens");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":\"yes\"}", "stream");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"seed\":\"1\"}", "seed");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":{}}", "tools");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"reasoning_effort\":\"max\"}", "reasoning_effort");
    expect_400(chat, "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage");
    expect_400("/v1/completions", "{\"model\":\"t/m\",\"prompt\":{}}", "prompt");
    ck_assert_int_eq(g_node_calls, 0);
    json_t *j;
    ck_assert_int_eq(post(chat, "{\"model\":\"x/none\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &j, NULL), 404);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "model_not_found");
    json_decref(j);
}
END_TEST

START_TEST(node_errors_before_the_first_byte) {
    json_t *j;
    /* an error event first, no other node: the client gets the node's message as an HTTP error */
    g_script = "data: {\"type\":\"error\",\"code\":\"oom_vram\",\"message\":\"KV cache does not fit\"}\n\n";
    ck_assert_int_eq(post("/v1/chat/completions", "{\"model\":\"t/m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}", &j, NULL), 502);
    json_t *e = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "oom_vram");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(e, "message")), "KV cache does not fit"));
    json_decref(j);
    /* the node's stall watchdog: 504 naming it */
    g_script = "data: {\"type\":\"error\",\"code\":\"timeout\",\"message\":\"no token within the stall watchdog's limit\"}\n\n";
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":\"x\"}", &j, NULL), 504);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "timeout");
    json_decref(j);
    /* a busy node: 429 with Retry-After */
    g_script = "429";
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":\"x\"}", &j, NULL), 429);
    json_decref(j);
    /* a stream cut before its done event (non-streamed request): 502 node_failed */
    g_script = "data: {\"type\":\"delta\",\"content\":\"Hel\"}\n\n";
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":\"x\"}", &j, NULL), 502);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "node_failed");
    json_decref(j);
    /* the same cut after the first byte of a stream: an error event, no [DONE] */
    char *t;
    ck_assert_int_eq(post("/v1/completions", "{\"model\":\"t/m\",\"prompt\":\"x\",\"stream\":true}", NULL, &t), 200);
    ck_assert_ptr_nonnull(strstr(t, "\"text\":\"Hel\""));
    ck_assert_ptr_nonnull(strstr(t, "data: {\"error\":{"));
    ck_assert_ptr_null(strstr(t, "[DONE]"));
    free(t);
    /* metrics saw them */
    char url[256], err[256];
    snprintf(url, sizeof url, "%s/metrics", g_url);
    llmr_httpc_resp r = {0};
    ck_assert_int_eq(llmr_httpc_get(g_c, url, &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_ptr_nonnull(strstr(r.body, "llmr_router_requests_total{route=\"/v1/completions\",status=\"429\"} 1"));
    ck_assert_ptr_nonnull(strstr(r.body, "llmr_router_nodes_online 1"));
    llmr_httpc_resp_free(&r);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_openai");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, chat_tool_calls_and_reasoning);
    tcase_add_test(tc, chat_stream_shapes);
    tcase_add_test(tc, completions_and_stop_shape);
    tcase_add_test(tc, validation_names_the_param);
    tcase_add_test(tc, node_errors_before_the_first_byte);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
