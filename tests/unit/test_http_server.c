/* Unit tests for common/http_server: routing, JSON errors, limits, streaming, client-gone detection. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/http_server.h"
#include "tests/unit/testutil.h"

static llmr_loop *g_loop;
static llmr_http_server *g_srv;
static pthread_t g_thread;
static atomic_int g_gone_seen, g_stream_done; /* written on the loop thread, read by the test */

static void h_echo(llmr_http_request *req, void *user) {
    (void)user;
    json_t *j = llmr_http_json_body(req);
    if (!j) return;
    llmr_http_reply_json(req, 200, json_pack("{s:o, s:s}", "got", j, "rest", llmr_http_path_rest(req)));
}

static void h_item(llmr_http_request *req, void *user) {
    (void)user;
    llmr_http_reply_json(req, 200, json_pack("{s:s}", "id", llmr_http_path_rest(req)));
}

typedef struct { llmr_http_request *req; struct event *ev; int n; } streamer;

static void on_gone(void *p) { (void)p; g_gone_seen = 1; }

static void stream_tick(evutil_socket_t fd, short what, void *p) {
    (void)fd;
    (void)what;
    streamer *s = p;
    char line[64];
    int len = snprintf(line, sizeof line, "data: %d\n\n", s->n++);
    if (llmr_http_stream_write(s->req, line, (size_t)len) != 0 || s->n >= 500) {
        llmr_http_stream_end(s->req);
        event_free(s->ev);
        free(s);
        g_stream_done = 1;
    }
}

static void h_stream(llmr_http_request *req, void *user) {
    (void)user;
    streamer *s = calloc(1, sizeof *s);
    s->req = req;
    llmr_http_on_client_gone(req, on_gone, NULL);
    llmr_http_stream_start(req, 200, "text/event-stream");
    s->ev = event_new(llmr_loop_base(g_loop), -1, EV_PERSIST, stream_tick, s);
    struct timeval tv = {0, 10000};
    event_add(s->ev, &tv);
}

static void *loop_main(void *p) {
    (void)p;
    llmr_loop_run(g_loop);
    return NULL;
}

static void setup(void) {
    g_loop = llmr_loop_create();
    char err[256];
    llmr_http_server_opts o = {.listen = "127.0.0.1:0", .max_body = 1024};
    g_srv = llmr_http_server_create(g_loop, &o, err, sizeof err);
    ck_assert_msg(g_srv != NULL, "%s", err);
    llmr_http_server_route(g_srv, "POST", "/echo", h_echo, NULL);
    llmr_http_server_route(g_srv, "GET", "/items/*", h_item, NULL);
    llmr_http_server_route(g_srv, "GET", "/stream", h_stream, NULL);
    pthread_create(&g_thread, NULL, loop_main, NULL);
}

static void teardown(void) {
    llmr_loop_stop(g_loop);
    pthread_join(g_thread, NULL);
    llmr_http_server_destroy(g_srv);
    llmr_loop_destroy(g_loop);
}

typedef struct { char buf[65536]; size_t n; } sink;
static size_t on_data(char *p, size_t sz, size_t nm, void *u) {
    sink *s = u;
    size_t n = sz * nm;
    if (s->n + n < sizeof s->buf) { memcpy(s->buf + s->n, p, n); s->n += n; s->buf[s->n] = 0; }
    return n;
}

static long do_req(const char *method, const char *path, const char *body, size_t body_len, sink *out, long timeout_ms) {
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", llmr_http_server_port(g_srv), path);
    memset(out, 0, sizeof *out);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK || timeout_ms < 5000) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

START_TEST(routes_and_errors) {
    sink s;
    ck_assert_int_eq(do_req("POST", "/echo", "{\"a\":1}", 7, &s, 5000), 200);
    ck_assert_ptr_nonnull(strstr(s.buf, "\"got\":{\"a\":1}"));
    ck_assert_int_eq(do_req("GET", "/items/openai/gpt-oss-20b", NULL, 0, &s, 5000), 200);
    ck_assert_ptr_nonnull(strstr(s.buf, "\"id\":\"openai/gpt-oss-20b\""));
    ck_assert_int_eq(do_req("GET", "/nope", NULL, 0, &s, 5000), 404);
    ck_assert_ptr_nonnull(strstr(s.buf, "\"type\":\"not_found_error\""));
    ck_assert_ptr_nonnull(strstr(s.buf, "\"code\":\"unknown_route\""));
    ck_assert_int_eq(do_req("GET", "/echo", NULL, 0, &s, 5000), 405);
    ck_assert_ptr_nonnull(strstr(s.buf, "allowed: POST"));
    ck_assert_int_eq(do_req("POST", "/echo", "{bad", 4, &s, 5000), 400);
    ck_assert_ptr_nonnull(strstr(s.buf, "not valid JSON"));
    ck_assert_int_eq(do_req("POST", "/echo", "[1]", 3, &s, 5000), 400);
    ck_assert_int_eq(do_req("POST", "/echo", "", 0, &s, 5000), 400);
    /* an encoded NUL must not truncate the path the handler sees */
    ck_assert_int_eq(do_req("GET", "/items/config.json%00.evil", NULL, 0, &s, 5000), 400);
    ck_assert_ptr_nonnull(strstr(s.buf, "\"code\":\"invalid_path\""));
    ck_assert_int_eq(do_req("GET", "/items/%ff%fe", NULL, 0, &s, 5000), 400);
    ck_assert_ptr_nonnull(strstr(s.buf, "not valid UTF-8"));
    ck_assert_int_eq(do_req("GET", "/nope%C3", NULL, 0, &s, 5000), 400);
    ck_assert_int_eq(do_req("GET", "/items/a%2Fb", NULL, 0, &s, 5000), 200);
    ck_assert_ptr_nonnull(strstr(s.buf, "\"id\":\"a/b\""));
}
END_TEST

START_TEST(body_limit_413_json) {
    char big[3000];
    memset(big, 'x', sizeof big);
    sink s;
    ck_assert_int_eq(do_req("POST", "/echo", big, sizeof big, &s, 5000), 413);
    ck_assert_ptr_nonnull(strstr(s.buf, "exceeds the 1024-byte limit"));
}
END_TEST

START_TEST(stream_and_client_gone) {
    sink s;
    g_gone_seen = 0;
    g_stream_done = 0;
    do_req("GET", "/stream", NULL, 0, &s, 150); /* client gives up mid-stream */
    ck_assert_ptr_nonnull(strstr(s.buf, "data: 0\n\n"));
    for (int i = 0; i < 100 && !g_gone_seen; i++) usleep(10000);
    ck_assert_msg(g_gone_seen, "client disconnect not noticed within 1 s");
    /* the handler's next write fails and it ends the stream: nothing is left behind */
    for (int i = 0; i < 100 && !g_stream_done; i++) usleep(10000);
    ck_assert_msg(g_stream_done, "the stream did not end after its client left");
}
END_TEST

static Suite *http_suite(void) {
    Suite *s = suite_create("http_server");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, routes_and_errors);
    tcase_add_test(tc, body_limit_413_json);
    tcase_add_test(tc, stream_and_client_gone);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(http_suite)
