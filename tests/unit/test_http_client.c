/* Unit tests for common/http_client against the scripted in-process server (scripted_server.h):
 * JSON requests, bearer token, retries and their limits, error causes, timeouts and stalls,
 * streaming with abort and cancel, and downloads that resume, restart and verify. */
#include "common/http_client.h"
#include "common/sha256.h"
#include "tests/unit/scripted_server.h"
#include "tests/unit/testutil.h"

#include <sys/stat.h>
#include <time.h>

static void msleep(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static llmr_httpc *fast_client(int retries) {
    llmr_httpc_opts o = {.connect_timeout_ms = 2000, .timeout_ms = 5000, .retries = retries, .backoff_ms = 5,
                         .backoff_max_ms = 20, .low_speed_time_s = 1, .bearer_token = "tok123"};
    return llmr_httpc_create(&o);
}

/* ---- plain requests ---- */

static void h_echo(tsrv *s, int fd, const ts_req *r) {
    (void)s;
    char body[2048];
    int n = snprintf(body, sizeof body, "{\"method\":\"%s\",\"path\":\"%s\",\"len\":%zu}", r->method, r->path,
                     r->body_len);
    ts_reply(fd, 200, "Content-Type: application/json\r\nX-Test: yes\r\n", body, (size_t)n);
}

START_TEST(get_post_delete) {
    tsrv *s = ts_start(h_echo, NULL);
    llmr_httpc *c = fast_client(1);
    llmr_httpc_resp r;
    char err[512];
    ck_assert_int_eq(llmr_httpc_get(c, ts_url(s, "/a?b=1"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"method\":\"GET\",\"path\":\"/a?b=1\",\"len\":0}");
    ck_assert_str_eq(llmr_httpc_resp_header(&r, "x-test"), "yes");
    ck_assert_ptr_null(llmr_httpc_resp_header(&r, "X-None"));
    ck_assert_int_eq(r.attempts, 1);
    llmr_httpc_resp_free(&r);
    ck_assert_ptr_nonnull(strstr(ts_request(s, 0), "Authorization: Bearer tok123"));

    ck_assert_int_eq(llmr_httpc_post_json(c, ts_url(s, "/p"), "{\"x\":1}", &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_str_eq(r.body, "{\"method\":\"POST\",\"path\":\"/p\",\"len\":7}");
    ck_assert_ptr_nonnull(strstr(ts_request(s, 1), "Content-Type: application/json"));
    llmr_httpc_resp_free(&r);

    ck_assert_int_eq(llmr_httpc_delete(c, ts_url(s, "/d"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_str_eq(r.body, "{\"method\":\"DELETE\",\"path\":\"/d\",\"len\":0}");
    llmr_httpc_resp_free(&r);
    llmr_httpc_resp_free(&r); /* double free of a zeroed struct is harmless */
    llmr_httpc_destroy(c);
    llmr_httpc_destroy(NULL);
    ts_stop(s);
}
END_TEST

/* 503, then 429 with Retry-After: 0, then 200. */
static void h_flaky(tsrv *s, int fd, const ts_req *r) {
    (void)s;
    if (r->n == 0) ts_reply(fd, 503, NULL, "busy", 4);
    else if (r->n == 1) ts_reply(fd, 429, "Retry-After: 0\r\n", "slow down", 9);
    else ts_reply(fd, 200, NULL, "ok", 2);
}

START_TEST(retries_5xx_429_for_get) {
    tsrv *s = ts_start(h_flaky, NULL);
    llmr_httpc *c = fast_client(3);
    llmr_httpc_resp r;
    char err[512];
    ck_assert_int_eq(llmr_httpc_get(c, ts_url(s, "/x"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.attempts, 3);
    ck_assert_str_eq(r.body, "ok");
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

START_TEST(retry_budget_is_bounded) {
    tsrv *s = ts_start(h_flaky, NULL);
    llmr_httpc *c = fast_client(-1); /* no retries */
    llmr_httpc_resp r;
    char err[512];
    ck_assert_int_eq(llmr_httpc_get(c, ts_url(s, "/x"), &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_eq(r.attempts, 1);
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

START_TEST(post_not_retried_on_5xx) {
    tsrv *s = ts_start(h_flaky, NULL);
    llmr_httpc *c = fast_client(3);
    llmr_httpc_resp r;
    char err[512];
    ck_assert_int_eq(llmr_httpc_post_json(c, ts_url(s, "/x"), "{}", &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_eq(r.attempts, 1);
    ck_assert_int_eq(ts_count(s), 1);
    llmr_httpc_resp_free(&r);
    /* unless the caller declares it idempotent: then 503 and 429 are retried as for GET */
    llmr_httpc_req q = {.method = "POST", .url = ts_url(s, "/register"), .body = "{}", .idempotent = 1};
    ck_assert_int_eq(llmr_httpc_do(c, &q, &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.attempts, 2); /* the server's 2nd answer is a 429, its 3rd a 200 */
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

/* ---- error causes ---- */

static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd); /* bound, never listened: connecting is refused */
    return ntohs(a.sin_port);
}

START_TEST(refused_names_url_and_cause) {
    llmr_httpc *c = fast_client(2);
    char url[128], err[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models", closed_port());
    llmr_httpc_resp r;
    ck_assert_int_eq(llmr_httpc_post_json(c, url, "{}", &r, err, sizeof err), LLMR_HTTPC_EREFUSED);
    ck_assert_int_eq(r.attempts, 3); /* a POST that never connected is safe to retry */
    ck_assert_ptr_nonnull(strstr(err, url));
    ck_assert_ptr_nonnull(strstr(err, "connection refused"));
    ck_assert_ptr_nonnull(strstr(err, "POST"));
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
}
END_TEST

START_TEST(dns_failure) {
    llmr_httpc *c = fast_client(-1);
    char err[512];
    llmr_httpc_resp r;
    llmr_httpc_status st = llmr_httpc_get(c, "http://no-such-host.invalid/x", &r, err, sizeof err);
    ck_assert_int_eq(st, LLMR_HTTPC_EDNS);
    ck_assert_ptr_nonnull(strstr(err, "no-such-host.invalid"));
    ck_assert_ptr_nonnull(strstr(err, "DNS"));
    llmr_httpc_resp_free(&r);
    ck_assert_int_eq(llmr_httpc_get(c, "notascheme://x", &r, err, sizeof err), LLMR_HTTPC_EINVAL);
    llmr_httpc_resp_free(&r);
    ck_assert_int_eq(llmr_httpc_get(c, NULL, &r, err, sizeof err), LLMR_HTTPC_EINVAL);
    llmr_httpc_destroy(c);
}
END_TEST

START_TEST(tls_failure_is_named) {
    tsrv *s = ts_start(h_echo, NULL);
    s->greeting = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"; /* not a TLS server */
    llmr_httpc *c = fast_client(-1);
    char url[128], err[512];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/secure", s->port);
    llmr_httpc_resp r;
    ck_assert_int_eq(llmr_httpc_get(c, url, &r, err, sizeof err), LLMR_HTTPC_ETLS);
    ck_assert_ptr_nonnull(strstr(err, "TLS"));
    ck_assert_ptr_nonnull(strstr(err, url));
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

static void h_silent(tsrv *s, int fd, const ts_req *r) {
    (void)s; (void)fd; (void)r;
    msleep(1500);
}

static void h_stall(tsrv *s, int fd, const ts_req *r) {
    (void)s; (void)r;
    ts_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
    msleep(2500);
}

START_TEST(total_timeout_and_stall) {
    tsrv *s = ts_start(h_silent, NULL);
    llmr_httpc *c = fast_client(-1);
    char err[512];
    llmr_httpc_resp r;
    llmr_httpc_req q = {.url = ts_url(s, "/slow"), .timeout_ms = 300};
    ck_assert_int_eq(llmr_httpc_do(c, &q, &r, err, sizeof err), LLMR_HTTPC_ETIMEOUT);
    ck_assert_ptr_nonnull(strstr(err, "timed out"));
    llmr_httpc_resp_free(&r);
    ts_stop(s);

    /* under 1000 bytes/s for 1 s is a stall, whatever the total timeout */
    llmr_httpc_destroy(c);
    llmr_httpc_opts o = {.retries = -1, .low_speed_bytes = 1000, .low_speed_time_s = 1};
    c = llmr_httpc_create(&o);
    s = ts_start(h_stall, NULL);
    q.url = ts_url(s, "/stall");
    q.timeout_ms = 0;
    llmr_httpc_status st = llmr_httpc_do(c, &q, &r, err, sizeof err);
    ck_assert_msg(st == LLMR_HTTPC_ETIMEOUT, "%s", err);
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

static void h_big(tsrv *s, int fd, const ts_req *r) {
    (void)s; (void)r;
    char body[1000];
    memset(body, 'x', sizeof body);
    ts_reply(fd, 200, NULL, body, sizeof body);
}

START_TEST(body_limit) {
    tsrv *s = ts_start(h_big, NULL);
    llmr_httpc_opts o = {.max_body = 100, .retries = -1};
    llmr_httpc *c = llmr_httpc_create(&o);
    char err[512];
    llmr_httpc_resp r;
    ck_assert_int_eq(llmr_httpc_get(c, ts_url(s, "/"), &r, err, sizeof err), LLMR_HTTPC_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(err, "100-byte limit"));
    llmr_httpc_resp_free(&r);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

/* ---- streaming ---- */

static void h_sse(tsrv *s, int fd, const ts_req *r) {
    (void)s; (void)r;
    ts_printf(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        char ev[64];
        int n = snprintf(ev, sizeof ev, "data: {\"i\":%d}\n\n", i);
        ts_printf(fd, "%x\r\n%s\r\n", n, ev);
        msleep(30);
    }
    ts_printf(fd, "0\r\n\r\n");
}

typedef struct { char got[512]; int chunks, responses, abort_after; long status; atomic_int *cancel; } sse_ctx;

static int on_resp(void *u, const llmr_httpc_resp *r) {
    sse_ctx *x = u;
    x->responses++;
    x->status = r->status;
    return 0;
}

static int on_chunk(void *u, const char *d, size_t n) {
    sse_ctx *x = u;
    strncat(x->got, d, n < sizeof x->got - strlen(x->got) - 1 ? n : sizeof x->got - strlen(x->got) - 1);
    x->chunks++;
    if (x->cancel && x->chunks == 1) atomic_store(x->cancel, 1);
    return x->abort_after && x->chunks >= x->abort_after;
}

START_TEST(stream_chunks_and_abort) {
    tsrv *s = ts_start(h_sse, NULL);
    llmr_httpc *c = fast_client(2);
    char err[512];
    sse_ctx x = {0};
    llmr_httpc_resp r;
    llmr_httpc_req q = {.url = ts_url(s, "/v1/chat/completions"), .method = "POST", .body = "{\"stream\":true}"};
    ck_assert_int_eq(llmr_httpc_stream(c, &q, on_resp, on_chunk, &x, &r, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(x.responses, 1);
    ck_assert_int_eq(x.status, 200);
    ck_assert_str_eq(x.got, "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"i\":2}\n\n");
    ck_assert_str_eq(llmr_httpc_resp_header(&r, "Content-Type"), "text/event-stream");
    llmr_httpc_resp_free(&r);

    sse_ctx y = {.abort_after = 1};
    ck_assert_int_eq(llmr_httpc_stream(c, &q, on_resp, on_chunk, &y, NULL, err, sizeof err), LLMR_HTTPC_EABORTED);
    ck_assert_int_eq(y.chunks, 1);

    atomic_int cancel = 0;
    sse_ctx z = {.cancel = &cancel};
    q.cancel = &cancel;
    ck_assert_int_eq(llmr_httpc_stream(c, &q, NULL, on_chunk, &z, NULL, err, sizeof err), LLMR_HTTPC_EABORTED);
    ck_assert_int_eq(z.chunks, 1);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

/* ---- downloads ---- */

#define BLOB_SIZE (300 * 1000)
static unsigned char g_blob[BLOB_SIZE];

static void fill_blob(void) {
    for (size_t i = 0; i < BLOB_SIZE; i++) g_blob[i] = (unsigned char)((i * 2654435761u) >> 13);
}

typedef struct {
    int drop_first_at;      /* first connection: send this many body bytes then drop (0 = no) */
    int ignore_range;       /* always answer 200 with the whole file */
    int wrong_range_once;   /* first ranged request gets a 206 starting at 0 */
    int slow;               /* pause midway */
    int status;             /* answer this status instead (e.g. 404) */
} dl_ctx;

static void h_file(tsrv *s, int fd, const ts_req *r) {
    dl_ctx *d = s->ctx;
    char range[64];
    if (d->status) { ts_reply(fd, d->status, NULL, "{\"error\":\"nope\"}", 16); return; }
    unsigned long long start = 0;
    int ranged = ts_header(r->raw, "Range", range, sizeof range) && sscanf(range, "bytes=%llu-", &start) == 1;
    if (ranged && d->wrong_range_once) { d->wrong_range_once = 0; start = 0; ranged = 2; }
    if (ranged && start >= BLOB_SIZE) {
        ts_printf(fd, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%d\r\nContent-Length: 0\r\n\r\n",
                  BLOB_SIZE);
        return;
    }
    if (!ranged || d->ignore_range) {
        start = 0;
        ts_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BLOB_SIZE);
    } else {
        ts_printf(fd, "HTTP/1.1 206 Partial\r\nContent-Range: bytes %llu-%d/%d\r\nContent-Length: %llu\r\n\r\n",
                  start, BLOB_SIZE - 1, BLOB_SIZE, BLOB_SIZE - start);
    }
    size_t n = BLOB_SIZE - start;
    if (r->n == 0 && d->drop_first_at) n = (size_t)d->drop_first_at - start;
    if (d->slow) {
        ts_write(fd, g_blob + start, n / 2);
        msleep(400);
        ts_write(fd, g_blob + start + n / 2, n - n / 2);
    } else {
        ts_write(fd, g_blob + start, n);
    }
}

static int same_as_blob(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static unsigned char buf[BLOB_SIZE + 1];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n == BLOB_SIZE && memcmp(buf, g_blob, BLOB_SIZE) == 0;
}

static void write_partial(const char *path, size_t n, int corrupt) {
    FILE *f = fopen(path, "wb");
    fwrite(g_blob, 1, n, f);
    if (corrupt) { fseek(f, 10, SEEK_SET); fputc(g_blob[10] ^ 0xff, f); }
    fclose(f);
}

static char *tmp_path(const char *dir, const char *name) {
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

START_TEST(download_resumes_after_drop) {
    fill_blob();
    char blob_sha[65];
    llmr_sha256_buf(g_blob, BLOB_SIZE, blob_sha);
    dl_ctx d = {.drop_first_at = 120000};
    tsrv *s = ts_start(h_file, &d);
    llmr_httpc *c = fast_client(3);
    char *dir = llmr_test_tmpdir(), err[512];
    const char *dest = tmp_path(dir, "model.safetensors");
    llmr_httpc_download_opts o = {.expected_size = BLOB_SIZE, .expected_sha256 = blob_sha};
    llmr_httpc_download_result res;
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert(same_as_blob(dest));
    ck_assert_int_eq(res.attempts, 2);
    ck_assert_int_eq(res.restarts, 0);
    ck_assert_int_eq(res.status, 206);
    ck_assert_str_eq(res.sha256, blob_sha);
    ck_assert_ptr_nonnull(strstr(ts_request(s, 1), "Range: bytes=120000-"));
    struct stat sb;
    ck_assert_int_ne(stat(tmp_path(dir, "model.safetensors.partial"), &sb), 0);
    llmr_httpc_destroy(c);
    ts_stop(s);
    unlink(dest);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(download_existing_partial_and_ignored_range) {
    fill_blob();
    char blob_sha[65];
    llmr_sha256_buf(g_blob, BLOB_SIZE, blob_sha);
    char *dir = llmr_test_tmpdir(), err[512];
    const char *dest = tmp_path(dir, "w.bin");
    const char *partial = tmp_path(dir, "w.bin.partial");
    llmr_httpc *c = fast_client(3);
    llmr_httpc_download_result res;
    llmr_httpc_download_opts o = {.expected_size = -1, .expected_sha256 = blob_sha};

    /* resume from an existing partial: the sha256 still covers the whole file */
    dl_ctx d1 = {0};
    tsrv *s = ts_start(h_file, &d1);
    write_partial(partial, 50000, 0);
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(res.resumed_from, 50000);
    ck_assert_int_eq(res.attempts, 1);
    ck_assert(same_as_blob(dest));
    ts_stop(s);

    /* a server that ignores Range: the partial is reset and refilled from 0 */
    dl_ctx d2 = {.ignore_range = 1};
    s = ts_start(h_file, &d2);
    unlink(dest);
    write_partial(partial, 70000, 1); /* even corrupt bytes vanish with the restart */
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(res.restarts, 1);
    ck_assert_int_eq(res.status, 200);
    ck_assert(same_as_blob(dest));
    ts_stop(s);

    /* a 206 at the wrong offset: the partial is distrusted and refilled */
    dl_ctx d3 = {.wrong_range_once = 1};
    s = ts_start(h_file, &d3);
    unlink(dest);
    write_partial(partial, 1000, 0);
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(res.restarts, 1);
    ck_assert(same_as_blob(dest));
    ts_stop(s);

    /* a partial already complete: 416 with the same total finishes it */
    dl_ctx d4 = {0};
    s = ts_start(h_file, &d4);
    unlink(dest);
    write_partial(partial, BLOB_SIZE, 0);
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(res.status, 416);
    ck_assert(same_as_blob(dest));
    ts_stop(s);

    llmr_httpc_destroy(c);
    unlink(dest);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(download_errors) {
    fill_blob();
    char *dir = llmr_test_tmpdir(), err[512];
    const char *dest = tmp_path(dir, "x.bin");
    const char *partial = tmp_path(dir, "x.bin.partial");
    llmr_httpc *c = fast_client(2);
    llmr_httpc_download_result res;
    struct stat sb;

    dl_ctx d404 = {.status = 404};
    tsrv *s = ts_start(h_file, &d404);
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/missing"), dest, NULL, &res, err, sizeof err),
                     LLMR_HTTPC_EHTTP);
    ck_assert_ptr_nonnull(strstr(err, "HTTP 404"));
    ck_assert_ptr_nonnull(strstr(err, "/missing"));
    ck_assert_int_eq(res.attempts, 1); /* 404 is not retried */
    ck_assert_int_ne(stat(dest, &sb), 0);
    ck_assert_int_ne(stat(partial, &sb), 0); /* nothing was received: no empty partial left */
    ts_stop(s);

    dl_ctx d503 = {.status = 503};
    s = ts_start(h_file, &d503);
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/busy"), dest, NULL, &res, err, sizeof err), LLMR_HTTPC_EHTTP);
    ck_assert_int_eq(res.attempts, 3);
    ts_stop(s);

    /* wrong expected sha256: EVERIFY, and no partial left to resume from */
    dl_ctx ok = {0};
    s = ts_start(h_file, &ok);
    llmr_httpc_download_opts o = {.expected_size = -1,
                                  .expected_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"};
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_EVERIFY);
    ck_assert_ptr_nonnull(strstr(err, "expected 0000"));
    ck_assert_int_ne(stat(partial, &sb), 0);
    ck_assert_int_ne(stat(dest, &sb), 0);
    /* a server sending more than expected is cut off early and its bytes dropped */
    llmr_httpc_download_opts o2 = {.expected_size = 5};
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o2, &res, err, sizeof err), LLMR_HTTPC_EVERIFY);
    ck_assert_ptr_nonnull(strstr(err, "more than the expected 5 bytes"));
    ck_assert_int_eq(res.attempts, 1);
    ck_assert_int_ne(stat(partial, &sb), 0);
    /* fewer bytes than expected: the size check names both */
    llmr_httpc_download_opts o3 = {.expected_size = BLOB_SIZE + 1};
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o3, &res, err, sizeof err), LLMR_HTTPC_EVERIFY);
    ck_assert_ptr_nonnull(strstr(err, "expected 300001"));
    ck_assert_int_ne(stat(partial, &sb), 0);
    ts_stop(s);

    /* an unwritable destination names the file */
    ck_assert_int_eq(llmr_httpc_download(c, "http://127.0.0.1:1/x", "/nonexistent-dir/x", NULL, &res, err, sizeof err),
                     LLMR_HTTPC_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x.partial"));
    llmr_httpc_destroy(c);
    rmdir(dir);
    free(dir);
}
END_TEST

typedef struct { int calls; uint64_t last_bytes, last_total; int abort; } prog_ctx;

static int on_progress(void *u, uint64_t bytes, uint64_t total, double rate) {
    prog_ctx *p = u;
    (void)rate;
    p->calls++;
    p->last_bytes = bytes;
    p->last_total = total;
    return p->abort && bytes > 0;
}

START_TEST(download_abort_then_resume) {
    fill_blob();
    dl_ctx d = {.slow = 1};
    tsrv *s = ts_start(h_file, &d);
    char *dir = llmr_test_tmpdir(), err[512];
    const char *dest = tmp_path(dir, "a.bin");
    const char *partial = tmp_path(dir, "a.bin.partial");
    llmr_httpc *c = fast_client(2);
    llmr_httpc_download_result res;
    prog_ctx p = {.abort = 1};
    llmr_httpc_download_opts o = {.expected_size = BLOB_SIZE, .progress = on_progress, .progress_user = &p};
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_EABORTED);
    ck_assert_int_eq(res.attempts, 1);
    struct stat sb;
    ck_assert_int_eq(stat(partial, &sb), 0);
    ck_assert_int_gt(sb.st_size, 0);
    ck_assert_int_lt(sb.st_size, BLOB_SIZE);

    prog_ctx p2 = {0};
    o.progress_user = &p2;
    ck_assert_int_eq(llmr_httpc_download(c, ts_url(s, "/f"), dest, &o, &res, err, sizeof err), LLMR_HTTPC_OK);
    ck_assert_int_eq(res.resumed_from, (uint64_t)sb.st_size);
    ck_assert_int_ge(p2.calls, 1);
    ck_assert_int_eq(p2.last_bytes, BLOB_SIZE);
    ck_assert_int_eq(p2.last_total, BLOB_SIZE);
    ck_assert(same_as_blob(dest));
    llmr_httpc_destroy(c);
    ts_stop(s);
    unlink(dest);
    rmdir(dir);
    free(dir);
}
END_TEST

/* ---- threads ---- */

typedef struct { llmr_httpc *c; const char *url; int ok; } thr_arg;

static void *thr_get(void *a) {
    thr_arg *t = a;
    char err[256];
    for (int i = 0; i < 5; i++) {
        llmr_httpc_resp r;
        if (llmr_httpc_get(t->c, t->url, &r, err, sizeof err) == LLMR_HTTPC_OK && r.status == 200) t->ok++;
        llmr_httpc_resp_free(&r);
    }
    return NULL;
}

START_TEST(threads_share_one_client) {
    tsrv *s = ts_start(h_echo, NULL);
    llmr_httpc *c = fast_client(1);
    char *url = strdup(ts_url(s, "/t")); /* ts_url's buffer is per thread */
    pthread_t th[4];
    thr_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (thr_arg){.c = c, .url = url};
        pthread_create(&th[i], NULL, thr_get, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].ok, 5);
    }
    free(url);
    llmr_httpc_destroy(c);
    ts_stop(s);
}
END_TEST

START_TEST(url_encoding) {
    char *e = llmr_url_encode("a b/c?d#e%f~_.-", 0);
    ck_assert_str_eq(e, "a%20b%2Fc%3Fd%23e%25f~_.-");
    free(e);
    e = llmr_url_encode("dir/file name.json", 1);
    ck_assert_str_eq(e, "dir/file%20name.json");
    free(e);
    ck_assert_ptr_null(llmr_url_encode(NULL, 0));
    ck_assert_str_eq(llmr_httpc_strerror(LLMR_HTTPC_EREFUSED), "connection refused");
    ck_assert_str_eq(llmr_httpc_strerror((llmr_httpc_status)999), "unknown error");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("http_client");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, get_post_delete);
    tcase_add_test(t, retries_5xx_429_for_get);
    tcase_add_test(t, retry_budget_is_bounded);
    tcase_add_test(t, post_not_retried_on_5xx);
    tcase_add_test(t, refused_names_url_and_cause);
    tcase_add_test(t, dns_failure);
    tcase_add_test(t, tls_failure_is_named);
    tcase_add_test(t, total_timeout_and_stall);
    tcase_add_test(t, body_limit);
    tcase_add_test(t, stream_chunks_and_abort);
    tcase_add_test(t, download_resumes_after_drop);
    tcase_add_test(t, download_existing_partial_and_ignored_range);
    tcase_add_test(t, download_errors);
    tcase_add_test(t, download_abort_then_resume);
    tcase_add_test(t, threads_share_one_client);
    tcase_add_test(t, url_encoding);
    suite_add_tcase(s, t);
    return s;
}

LLMR_TEST_MAIN(suite)
