/* Unit tests for node/downloader.c against a scripted HTTP server (tests/unit/scripted_server.h)
 * that serves files with Range support and injects the faults a hub can show: corrupted bytes (once
 * or always), a connection dropped mid-file, 404s, a body longer than announced. */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sha256.h"
#include "node/downloader.h"
#include "scripted_server.h"
#include "testutil.h"

#define FILE_LEN 300000

static char content_a[FILE_LEN], content_b[1000];
static int corrupt_served; /* times /corrupt-once served bad bytes */
static char *dir;
static tsrv *srv;
static llmr_httpc *client;

/* Serves body honoring "Range: bytes=N-"; corrupt flips one byte; drop_at > 0 closes after that many
 * bytes of this response. */
static void serve(int fd, const ts_req *r, const char *body, size_t len, int corrupt, size_t drop_at) {
    char range[64];
    size_t from = 0;
    if (ts_header(r->raw, "Range", range, sizeof range)) from = strtoul(range + 6, NULL, 10);
    if (from > len) { ts_reply(fd, 416, NULL, "", 0); return; }
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    if (corrupt) copy[len / 2] ^= 0x5a;
    size_t n = len - from;
    if (from) ts_printf(fd, "HTTP/1.1 206 P\r\nContent-Length: %zu\r\nContent-Range: bytes %zu-%zu/%zu\r\nConnection: close\r\n\r\n",
                        n, from, len - 1, len);
    else ts_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", n);
    ts_write(fd, copy + from, drop_at && drop_at < n ? drop_at : n);
    free(copy);
}

static void handler(tsrv *s, int fd, const ts_req *r) {
    (void)s;
    if (strcmp(r->path, "/a") == 0) serve(fd, r, content_a, FILE_LEN, 0, 0);
    else if (strcmp(r->path, "/b") == 0) serve(fd, r, content_b, sizeof content_b, 0, 0);
    else if (strcmp(r->path, "/corrupt-once") == 0) serve(fd, r, content_a, FILE_LEN, corrupt_served++ == 0, 0);
    else if (strcmp(r->path, "/corrupt") == 0) serve(fd, r, content_a, FILE_LEN, 1, 0);
    else if (strcmp(r->path, "/drop") == 0) {
        char range[64];
        serve(fd, r, content_a, FILE_LEN, 0, ts_header(r->raw, "Range", range, sizeof range) ? 0 : FILE_LEN / 3);
    } else if (strcmp(r->path, "/long") == 0) {
        ts_printf(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"); /* no length: read to close */
        ts_write(fd, content_a, FILE_LEN);
    } else if (strncmp(r->path, "/slow", 5) == 0) {
        usleep(30000); /* keeps a transfer in flight while the other streams start theirs */
        serve(fd, r, content_a, FILE_LEN, 0, 0);
    } else if (strcmp(r->path, "/busy") == 0) {
        ts_reply(fd, 503, NULL, "busy", 4); /* retried with backoff */
    } else ts_reply(fd, 404, NULL, "not found", 9);
}

static llmr_manifest_file mf(const char *name, const char *path, const void *bytes, size_t len, int optional) {
    llmr_manifest_file f;
    memset(&f, 0, sizeof f);
    f.name = (char *)name;
    f.url = strdup(ts_url(srv, path));
    f.size = len;
    llmr_sha256_buf(bytes, len, f.sha256);
    f.optional = optional;
    return f;
}

static int same_as(const char *name, const void *bytes, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = malloc(len + 1);
    size_t n = fread(buf, 1, len + 1, f);
    fclose(f);
    int ok = n == len && memcmp(buf, bytes, len) == 0;
    free(buf);
    return ok;
}

static int exists(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static llmr_model_progress last;
static int progress_calls;
static void on_progress(void *user, const llmr_model_progress *p) {
    (void)user;
    last = *p;
    progress_calls++;
}

static llmr_dl_opts opts(void) {
    llmr_dl_opts o = {.client = client, .model_dir = dir, .label = "test/model", .progress = on_progress,
                      .log_interval_ms = -1};
    return o;
}

static void setup(void) {
    for (size_t i = 0; i < FILE_LEN; i++) content_a[i] = (char)(i * 7 + i / 251);
    for (size_t i = 0; i < sizeof content_b; i++) content_b[i] = (char)('a' + i % 26);
    corrupt_served = 0;
    progress_calls = 0;
    char *base = llmr_test_tmpdir();
    dir = malloc(strlen(base) + 32);
    sprintf(dir, "%s/org/model", base); /* created by the fetch */
    free(base);
    srv = ts_start(handler, NULL);
    llmr_httpc_opts co = {.retries = 3, .backoff_ms = 5, .backoff_max_ms = 20, .low_speed_time_s = 5};
    client = llmr_httpc_create(&co);
}

static void teardown(void) {
    ts_stop(srv);
    llmr_httpc_destroy(client);
    char cmd[4200];
    *strrchr(dir, '/') = 0;
    *strrchr(dir, '/') = 0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

START_TEST(test_fetch_two_files) {
    llmr_manifest_file f[2] = {mf("model.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("sub/dir/tokenizer.json", "/b", content_b, sizeof content_b, 0)};
    llmr_dl_opts o = opts();
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, f, 2, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert(same_as("model.safetensors", content_a, FILE_LEN));
    ck_assert(same_as("sub/dir/tokenizer.json", content_b, sizeof content_b));
    ck_assert(!exists("model.safetensors.partial"));
    ck_assert_uint_eq(rep.fetched, 2);
    ck_assert_uint_eq(rep.bytes_fetched, FILE_LEN + sizeof content_b);
    ck_assert_uint_eq(last.bytes_done, FILE_LEN + sizeof content_b);
    ck_assert_uint_eq(last.bytes_total, FILE_LEN + sizeof content_b);
    ck_assert_int_gt(progress_calls, 1);
    /* A second fetch finds both complete and leaves them for verification. */
    ck_assert_int_eq(llmr_dl_fetch(&o, f, 2, &rep, err, sizeof err), LLMR_DL_OK);
    ck_assert_uint_eq(rep.fetched, 0);
    ck_assert_uint_eq(rep.present, 2);
    ck_assert_int_eq(llmr_dl_verify(&o, &f[0], err, sizeof err), LLMR_DL_OK);
    free(f[0].url); free(f[1].url);
}
END_TEST

START_TEST(test_mismatch_once_refetched) {
    llmr_manifest_file f = mf("model.safetensors", "/corrupt-once", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, &f, 1, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert_uint_eq(rep.refetched, 1);
    ck_assert(same_as("model.safetensors", content_a, FILE_LEN));
    free(f.url);
}
END_TEST

START_TEST(test_mismatch_twice_fails_naming_file) {
    llmr_manifest_file f = mf("model-00002-of-00003.safetensors", "/corrupt", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    char err[1024] = "";
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_EVERIFY);
    ck_assert_ptr_nonnull(strstr(err, "model-00002-of-00003.safetensors"));
    ck_assert_ptr_nonnull(strstr(err, "twice"));
    ck_assert_ptr_nonnull(strstr(err, f.sha256));
    ck_assert(!exists("model-00002-of-00003.safetensors"));
    ck_assert(!exists("model-00002-of-00003.safetensors.partial"));
    ck_assert_int_eq(ts_count(srv), 2);
    free(f.url);
}
END_TEST

START_TEST(test_drop_midway_resumes) {
    llmr_manifest_file f = mf("model.safetensors", "/drop", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert(same_as("model.safetensors", content_a, FILE_LEN));
    ck_assert_int_ge(ts_count(srv), 2);
    char range[64];
    ck_assert(ts_header(ts_request(srv, 1), "Range", range, sizeof range));
    ck_assert_str_eq(range, "bytes=100000-");
    free(f.url);
}
END_TEST

START_TEST(test_resume_from_partial_on_disk) {
    /* What a killed node leaves behind: resumed with Range, byte-identical at the end. */
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/model.safetensors.partial", dir);
    FILE *p = fopen(path, "wb");
    fwrite(content_a, 1, 12345, p);
    fclose(p);
    llmr_manifest_file f = mf("model.safetensors", "/a", content_a, FILE_LEN, 0);
    ck_assert_uint_eq(llmr_dl_bytes_needed(dir, &f, 1), FILE_LEN - 12345);
    llmr_dl_opts o = opts();
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, &f, 1, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert(same_as("model.safetensors", content_a, FILE_LEN));
    ck_assert_uint_eq(rep.bytes_fetched, FILE_LEN - 12345);
    char range[64];
    ck_assert(ts_header(ts_request(srv, 0), "Range", range, sizeof range));
    ck_assert_str_eq(range, "bytes=12345-");
    free(f.url);
}
END_TEST

START_TEST(test_optional_and_required_404) {
    llmr_manifest_file f[2] = {mf("model.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("model.metal.bin", "/missing", content_b, sizeof content_b, 1)};
    f[1].backend = "metal";
    llmr_dl_opts o = opts();
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, f, 2, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert_uint_eq(rep.optional_failed, 1);
    ck_assert_ptr_nonnull(strstr(rep.warnings, "optional artifact model.metal.bin skipped"));
    ck_assert_ptr_nonnull(strstr(rep.warnings, "404"));
    f[1].optional = 0;
    f[1].backend = NULL;
    ck_assert_int_eq(llmr_dl_fetch(&o, &f[1], 1, &rep, err, sizeof err), LLMR_DL_EFETCH);
    ck_assert_ptr_nonnull(strstr(err, "model.metal.bin"));
    ck_assert_ptr_nonnull(strstr(err, "404"));
    free(f[0].url); free(f[1].url);
}
END_TEST

START_TEST(test_server_sends_too_much) {
    llmr_manifest_file f = mf("model.safetensors", "/long", content_a, 1000, 0);
    llmr_dl_opts o = opts();
    char err[1024] = "";
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_EVERIFY);
    ck_assert_msg(strstr(err, "more than the") && strstr(err, "1000 bytes"), "%s", err); /* cut off by the client or by us */
    ck_assert(!exists("model.safetensors.partial"));
    free(f.url);
}
END_TEST

START_TEST(test_space_check_names_bytes) {
    char err[1024];
    ck_assert_int_eq(llmr_dl_space_check("/tmp", 1, "x", err, sizeof err), 0);
    ck_assert_int_eq(llmr_dl_space_check("/tmp", UINT64_MAX / 2, "openai/gpt-oss-20b", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not enough disk space in /tmp: need 9223372036854775807 bytes"));
    ck_assert_ptr_nonnull(strstr(err, "openai/gpt-oss-20b"));
    ck_assert_ptr_nonnull(strstr(err, "free"));
    /* A manifest too large for the disk fails before any request. */
    llmr_manifest_file f = mf("model.safetensors", "/a", content_a, FILE_LEN, 0);
    f.size = UINT64_MAX / 4;
    llmr_dl_opts o = opts();
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_ENOSPACE);
    ck_assert_int_eq(ts_count(srv), 0);
    free(f.url);
}
END_TEST

START_TEST(test_verify_on_disk) {
    llmr_manifest_file f = mf("model.safetensors", "/a", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    char err[1024] = "";
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *p = fopen(path, "r+b");
    fseek(p, 5000, SEEK_SET);
    fputc('X', p);
    fclose(p);
    ck_assert_int_eq(llmr_dl_verify(&o, &f, err, sizeof err), LLMR_DL_EVERIFY);
    ck_assert_ptr_nonnull(strstr(err, "model.safetensors: sha256"));
    ck_assert(!exists("model.safetensors"));
    ck_assert_int_eq(llmr_dl_verify(&o, &f, err, sizeof err), LLMR_DL_EIO);
    free(f.url);
}
END_TEST

START_TEST(test_bad_input) {
    llmr_manifest_file f = mf("../escape", "/a", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    char err[1024];
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "unsafe file name"));
    ck_assert_int_eq(llmr_dl_fetch(NULL, &f, 1, NULL, err, sizeof err), LLMR_DL_EINVAL);
    atomic_int cancel = 1;
    f.name = "ok.bin";
    o.cancel = &cancel;
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_ECANCELLED);
    ck_assert_str_eq(llmr_dl_strerror(LLMR_DL_ENOSPACE), "not enough disk space");
    free(f.url);
}
END_TEST


/* --- several files at once (--download-streams) ---------------------------------------------- */

START_TEST(test_streams_fetch_all) {
    llmr_manifest_file f[5] = {mf("model-00001-of-00004.safetensors", "/slow1", content_a, FILE_LEN, 0),
                               mf("model-00002-of-00004.safetensors", "/slow2", content_a, FILE_LEN, 0),
                               mf("model-00003-of-00004.safetensors", "/slow3", content_a, FILE_LEN, 0),
                               mf("model-00004-of-00004.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("sub/tokenizer.json", "/b", content_b, sizeof content_b, 0)};
    llmr_dl_opts o = opts();
    o.streams = 4;
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, f, 5, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    for (int i = 0; i < 4; i++) ck_assert(same_as(f[i].name, content_a, FILE_LEN));
    ck_assert(same_as("sub/tokenizer.json", content_b, sizeof content_b));
    ck_assert_uint_eq(rep.fetched, 5);
    ck_assert_uint_eq(rep.bytes_fetched, 4 * FILE_LEN + sizeof content_b);
    ck_assert_int_ge(rep.peak_streams, 2); /* the slow files were in flight together */
    ck_assert_int_le(rep.peak_streams, 4);
    ck_assert_uint_eq(last.bytes_done, 4 * FILE_LEN + sizeof content_b); /* summed over the streams */
    ck_assert_uint_eq(last.bytes_total, 4 * FILE_LEN + sizeof content_b);
    ck_assert_int_eq(ts_count(srv), 5);
    for (int i = 0; i < 5; i++) free(f[i].url);
}
END_TEST

START_TEST(test_streams_one_at_a_time) {
    llmr_manifest_file f[3] = {mf("s1.safetensors", "/slow1", content_a, FILE_LEN, 0),
                               mf("s2.safetensors", "/slow2", content_a, FILE_LEN, 0),
                               mf("s3.safetensors", "/slow3", content_a, FILE_LEN, 0)};
    llmr_dl_opts o = opts();
    o.streams = 1;
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, f, 3, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    ck_assert_int_eq(rep.peak_streams, 1);
    ck_assert_uint_eq(rep.fetched, 3);
    for (int i = 0; i < 3; i++) free(f[i].url);
}
END_TEST

static void write_partial(const char *name, size_t n) {
    char path[4096], cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/%s.partial", dir, name);
    FILE *p = fopen(path, "wb");
    ck_assert_ptr_nonnull(p);
    fwrite(content_a, 1, n, p);
    fclose(p);
}

START_TEST(test_streams_resume_partials) {
    /* What a node killed during a parallel download leaves: several .partial files at once. Each
     * resumes with its own Range; a transfer dropped midway resumes too; all end byte-identical. */
    write_partial("p1.safetensors", 1000);
    write_partial("p2.safetensors", 200000);
    llmr_manifest_file f[4] = {mf("p1.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("p2.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("p3.safetensors", "/drop", content_a, FILE_LEN, 0),
                               mf("p4.json", "/b", content_b, sizeof content_b, 0)};
    ck_assert_uint_eq(llmr_dl_bytes_needed(dir, f, 4), 3 * (uint64_t)FILE_LEN - 201000 + sizeof content_b);
    llmr_dl_opts o = opts();
    o.streams = 3;
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_msg(llmr_dl_fetch(&o, f, 4, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    for (int i = 0; i < 3; i++) ck_assert(same_as(f[i].name, content_a, FILE_LEN));
    ck_assert(same_as("p4.json", content_b, sizeof content_b));
    ck_assert_uint_eq(rep.bytes_fetched, 3 * (uint64_t)FILE_LEN - 201000 + sizeof content_b);
    int r1000 = 0, r200000 = 0, r100000 = 0;
    for (int i = 0; i < ts_count(srv); i++) {
        char range[64];
        if (!ts_header(ts_request(srv, i), "Range", range, sizeof range)) continue;
        r1000 += strcmp(range, "bytes=1000-") == 0;
        r200000 += strcmp(range, "bytes=200000-") == 0;
        r100000 += strcmp(range, "bytes=100000-") == 0; /* /drop cut at a third */
    }
    ck_assert_int_eq(r1000, 1);
    ck_assert_int_eq(r200000, 1);
    ck_assert_int_eq(r100000, 1);
    ck_assert(!exists("p1.safetensors.partial") && !exists("p2.safetensors.partial") && !exists("p3.safetensors.partial"));
    for (int i = 0; i < 4; i++) free(f[i].url);
}
END_TEST

START_TEST(test_streams_refetch_and_failure_named) {
    /* A mismatch is refetched on its own stream; a file bad twice fails the call, named, while the
     * other streams stop (a later call resumes them). */
    llmr_manifest_file f[3] = {mf("good.safetensors", "/a", content_a, FILE_LEN, 0),
                               mf("once.safetensors", "/corrupt-once", content_a, FILE_LEN, 0),
                               mf("bad.safetensors", "/corrupt", content_a, FILE_LEN, 0)};
    llmr_dl_opts o = opts();
    o.streams = 3;
    llmr_dl_report rep;
    char err[1024] = "";
    ck_assert_int_eq(llmr_dl_fetch(&o, f, 3, &rep, err, sizeof err), LLMR_DL_EVERIFY);
    ck_assert_msg(strstr(err, "bad.safetensors") && strstr(err, "twice"), "%s", err);
    ck_assert(!exists("bad.safetensors"));
    f[2].url = (free(f[2].url), strdup(ts_url(srv, "/a")));
    ck_assert_msg(llmr_dl_fetch(&o, f, 3, &rep, err, sizeof err) == LLMR_DL_OK, "%s", err);
    for (int i = 0; i < 3; i++) ck_assert(same_as(f[i].name, content_a, FILE_LEN));
    ck_assert_int_ge(corrupt_served, 1);
    for (int i = 0; i < 3; i++) free(f[i].url);
}
END_TEST

START_TEST(test_streams_bounds_and_cancel) {
    llmr_manifest_file f = mf("model.safetensors", "/a", content_a, FILE_LEN, 0);
    llmr_dl_opts o = opts();
    char err[1024] = "";
    o.streams = LLMR_DL_STREAMS_MAX + 1;
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "out of range 1..16"));
    o.streams = -1;
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_EINVAL);
    atomic_int cancel = 1;
    o.streams = 8;
    o.cancel = &cancel;
    ck_assert_int_eq(llmr_dl_fetch(&o, &f, 1, NULL, err, sizeof err), LLMR_DL_ECANCELLED);
    ck_assert_int_eq(ts_count(srv), 0);
    free(f.url);
}
END_TEST

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *raise_later(void *arg) {
    usleep(300000);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

START_TEST(test_streams_stop_wakes_backoff) {
    /* A stream sleeping out a 5 s retry backoff (503) wakes at once when a sibling's required file
     * fails, and when the caller cancels: neither waits for the backoff. */
    llmr_httpc_opts co = {.retries = 3, .backoff_ms = 5000, .backoff_max_ms = 5000, .low_speed_time_s = 5};
    llmr_httpc *slow_retry = llmr_httpc_create(&co);
    llmr_manifest_file f[2] = {mf("busy.safetensors", "/busy", content_a, FILE_LEN, 0),
                               mf("missing.json", "/missing", content_b, sizeof content_b, 0)};
    llmr_dl_opts o = opts();
    o.client = slow_retry;
    o.streams = 2;
    char err[1024] = "";
    double t0 = mono_s();
    ck_assert_int_eq(llmr_dl_fetch(&o, f, 2, NULL, err, sizeof err), LLMR_DL_EFETCH);
    ck_assert_msg(strstr(err, "missing.json") && strstr(err, "404"), "%s", err);
    ck_assert_msg(mono_s() - t0 < 2.0, "took %.1f s", mono_s() - t0);
    atomic_int cancel = 0;
    pthread_t th;
    o.cancel = &cancel;
    t0 = mono_s();
    pthread_create(&th, NULL, raise_later, &cancel);
    ck_assert_int_eq(llmr_dl_fetch(&o, f, 1, NULL, err, sizeof err), LLMR_DL_ECANCELLED);
    pthread_join(th, NULL);
    ck_assert_msg(mono_s() - t0 < 2.0, "cancel took %.1f s", mono_s() - t0);
    llmr_httpc_destroy(slow_retry);
    free(f[0].url); free(f[1].url);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("downloader");
    TCase *tc = tcase_create("fetch");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fetch_two_files);
    tcase_add_test(tc, test_mismatch_once_refetched);
    tcase_add_test(tc, test_mismatch_twice_fails_naming_file);
    tcase_add_test(tc, test_drop_midway_resumes);
    tcase_add_test(tc, test_resume_from_partial_on_disk);
    tcase_add_test(tc, test_optional_and_required_404);
    tcase_add_test(tc, test_server_sends_too_much);
    tcase_add_test(tc, test_space_check_names_bytes);
    tcase_add_test(tc, test_verify_on_disk);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_streams_fetch_all);
    tcase_add_test(tc, test_streams_one_at_a_time);
    tcase_add_test(tc, test_streams_resume_partials);
    tcase_add_test(tc, test_streams_refetch_and_failure_named);
    tcase_add_test(tc, test_streams_bounds_and_cancel);
    tcase_add_test(tc, test_streams_stop_wakes_backoff);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
