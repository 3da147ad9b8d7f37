/* Unit tests for the file-serving part of common/http_server (llmr_http_reply_file / _buffer) and its
 * HEAD handling, driven through common/http_client: bytes stream from disk intact (whole files and
 * slices), HEAD answers carry Content-Length and no body, and a keep-alive connection survives a HEAD. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/http_server.h"
#include "tests/unit/testutil.h"

#define FILE_SIZE (3 * 1024 * 1024 + 17)

static llmr_loop *g_loop;
static llmr_http_server *g_srv;
static pthread_t g_thread;
static char g_path[256];
static unsigned char *g_data;

static void h_file(llmr_http_request *req, void *user) {
    (void)user;
    int fd = open(g_path, O_RDONLY);
    llmr_http_reply_file(req, 200, "application/octet-stream", fd, 0, FILE_SIZE);
}

static void h_slice(llmr_http_request *req, void *user) {
    (void)user;
    int fd = open(g_path, O_RDONLY);
    llmr_http_add_header(req, "Content-Range", "bytes 1000-5999/3145745");
    llmr_http_reply_file(req, 206, "application/octet-stream", fd, 1000, 5000);
}

static void h_empty(llmr_http_request *req, void *user) {
    (void)user;
    int fd = open(g_path, O_RDONLY);
    llmr_http_reply_file(req, 200, "text/plain", fd, 0, 0);
}

static void h_buf(llmr_http_request *req, void *user) {
    (void)user;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, "hello buffer", 12);
    llmr_http_reply_buffer(req, 200, "text/plain", b);
}

static void h_json(llmr_http_request *req, void *user) {
    (void)user;
    llmr_http_reply_json(req, 200, json_pack("{s:s}", "k", "value"));
}

static void *loop_main(void *p) {
    (void)p;
    llmr_loop_run(g_loop);
    return NULL;
}

static void setup(void) {
    snprintf(g_path, sizeof g_path, "/tmp/llmr-srvfile-%d", (int)getpid());
    g_data = malloc(FILE_SIZE);
    for (size_t i = 0; i < FILE_SIZE; i++) g_data[i] = (unsigned char)(i * 131 + (i >> 9));
    FILE *f = fopen(g_path, "wb");
    fwrite(g_data, 1, FILE_SIZE, f);
    fclose(f);
    g_loop = llmr_loop_create();
    char err[256];
    llmr_http_server_opts o = {.listen = "127.0.0.1:0"};
    g_srv = llmr_http_server_create(g_loop, &o, err, sizeof err);
    ck_assert_msg(g_srv != NULL, "%s", err);
    llmr_http_server_route(g_srv, "GET", "/file", h_file, NULL);
    llmr_http_server_route(g_srv, "GET", "/slice", h_slice, NULL);
    llmr_http_server_route(g_srv, "GET", "/empty", h_empty, NULL);
    llmr_http_server_route(g_srv, "GET", "/buf", h_buf, NULL);
    llmr_http_server_route(g_srv, "GET", "/json", h_json, NULL);
    pthread_create(&g_thread, NULL, loop_main, NULL);
}

static void teardown(void) {
    llmr_loop_stop(g_loop);
    pthread_join(g_thread, NULL);
    llmr_http_server_destroy(g_srv);
    llmr_loop_destroy(g_loop);
    unlink(g_path);
    free(g_data);
}

static const char *url(const char *path) {
    static char buf[256];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d%s", llmr_http_server_port(g_srv), path);
    return buf;
}

START_TEST(file_whole_and_slice) {
    llmr_httpc *c = llmr_httpc_create(NULL);
    llmr_httpc_resp r;
    char err[512];
    ck_assert_int_eq(llmr_httpc_get(c, url("/file"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.body_len, FILE_SIZE);
    ck_assert(memcmp(r.body, g_data, FILE_SIZE) == 0);
    llmr_httpc_resp_free(&r);
    ck_assert_int_eq(llmr_httpc_get(c, url("/slice"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 206);
    ck_assert_int_eq(r.body_len, 5000);
    ck_assert(memcmp(r.body, g_data + 1000, 5000) == 0);
    ck_assert_str_eq(llmr_httpc_resp_header(&r, "Content-Length"), "5000");
    llmr_httpc_resp_free(&r);
    ck_assert_int_eq(llmr_httpc_get(c, url("/empty"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.body_len, 0);
    llmr_httpc_resp_free(&r);
    ck_assert_int_eq(llmr_httpc_get(c, url("/buf"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_str_eq(r.body, "hello buffer");
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
}
END_TEST

START_TEST(head_has_length_no_body) {
    llmr_httpc *c = llmr_httpc_create(NULL);
    llmr_httpc_resp r;
    char err[512];
    llmr_httpc_req q = {.method = "HEAD", .url = url("/file")};
    ck_assert_int_eq(llmr_httpc_do(c, &q, &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(llmr_httpc_resp_header(&r, "Content-Length"), "3145745");
    ck_assert_int_eq(r.body_len, 0);
    llmr_httpc_resp_free(&r);
    q.url = url("/json");
    ck_assert_int_eq(llmr_httpc_do(c, &q, &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_str_eq(llmr_httpc_resp_header(&r, "Content-Length"), "13"); /* {"k":"value"} */
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
}
END_TEST

/* HEAD then GET on one connection: the GET's answer must start right after the HEAD's headers. */
START_TEST(head_keeps_connection_in_sync) {
    const char *paths[] = {"/json", "/file", "/buf"};
    for (int i = 0; i < 3; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)llmr_http_server_port(g_srv)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        char req[256];
        int n = snprintf(req, sizeof req,
                         "HEAD %s HTTP/1.1\r\nHost: x\r\n\r\nGET /buf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         paths[i]);
        ck_assert_int_eq(write(fd, req, (size_t)n), n);
        static char buf[65536];
        size_t got = 0;
        ssize_t k;
        while (got < sizeof buf - 1 && (k = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
        buf[got] = 0;
        close(fd);
        char *end = strstr(buf, "\r\n\r\n");
        ck_assert_ptr_nonnull(end);
        ck_assert_msg(strncmp(end + 4, "HTTP/1.1 200", 12) == 0, "HEAD %s sent a body: %.40s", paths[i], end + 4);
        ck_assert_ptr_nonnull(strstr(end, "hello buffer"));
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("http_server_files");
    TCase *t = tcase_create("core");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, file_whole_and_slice);
    tcase_add_test(t, head_has_length_no_body);
    tcase_add_test(t, head_keeps_connection_in_sync);
    suite_add_tcase(s, t);
    return s;
}

LLMR_TEST_MAIN(suite)
