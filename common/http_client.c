/* http_client.c — see http_client.h.
 *
 * Every request, whatever its mode, goes through one attempt function (xfer_perform) that drives a
 * fresh curl easy handle and sends body bytes to a sink: a growing buffer (do), the caller's
 * callbacks (stream) or a file with a running sha256 (download). The retry loop around it decides,
 * from the attempt's outcome, whether another attempt is safe and useful. */
#include "common/http_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sha256.h"

struct llmr_httpc {
    llmr_httpc_opts o;   /* with defaults filled in */
    char *bearer;        /* owned copies of the opts strings */
    char *user_agent;
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_OK;
static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_ALL); }

const char *llmr_httpc_strerror(llmr_httpc_status st) {
    switch (st) {
    case LLMR_HTTPC_OK: return "ok";
    case LLMR_HTTPC_EINVAL: return "invalid argument or URL";
    case LLMR_HTTPC_ENOMEM: return "out of memory";
    case LLMR_HTTPC_EDNS: return "host name not resolved (DNS)";
    case LLMR_HTTPC_EREFUSED: return "connection refused";
    case LLMR_HTTPC_ECONNECT: return "could not connect";
    case LLMR_HTTPC_ETLS: return "TLS failure";
    case LLMR_HTTPC_ETIMEOUT: return "timed out";
    case LLMR_HTTPC_ETRANSPORT: return "connection failed mid-transfer";
    case LLMR_HTTPC_EHTTP: return "HTTP error status";
    case LLMR_HTTPC_ETOOBIG: return "response body too large";
    case LLMR_HTTPC_EABORTED: return "aborted";
    case LLMR_HTTPC_EIO: return "local file error";
    case LLMR_HTTPC_EVERIFY: return "downloaded file failed verification";
    }
    return "unknown error";
}

llmr_httpc *llmr_httpc_create(const llmr_httpc_opts *opts) {
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK) return NULL;
    llmr_httpc *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (opts) c->o = *opts;
    if (c->o.connect_timeout_ms <= 0) c->o.connect_timeout_ms = 10000;
    if (c->o.timeout_ms <= 0) c->o.timeout_ms = 60000;
    if (c->o.low_speed_bytes <= 0) c->o.low_speed_bytes = 1;
    if (c->o.low_speed_time_s <= 0) c->o.low_speed_time_s = 30;
    if (c->o.retries == 0) c->o.retries = 3;
    else if (c->o.retries < 0) c->o.retries = 0;
    if (c->o.backoff_ms <= 0) c->o.backoff_ms = 200;
    if (c->o.backoff_max_ms <= 0) c->o.backoff_max_ms = 5000;
    if (c->o.max_body == 0) c->o.max_body = 64u << 20;
    c->bearer = c->o.bearer_token && *c->o.bearer_token ? strdup(c->o.bearer_token) : NULL;
    c->user_agent = strdup(c->o.user_agent ? c->o.user_agent : "llmr/0.1");
    if ((c->o.bearer_token && *c->o.bearer_token && !c->bearer) || !c->user_agent) {
        llmr_httpc_destroy(c);
        return NULL;
    }
    c->o.bearer_token = c->bearer;
    c->o.user_agent = c->user_agent;
    return c;
}

void llmr_httpc_destroy(llmr_httpc *c) {
    if (!c) return;
    free(c->bearer);
    free(c->user_agent);
    free(c);
}

/* ---- responses ------------------------------------------------------------------------------- */

static void headers_clear(llmr_httpc_resp *r) {
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    r->headers = NULL;
    r->n_headers = 0;
}

void llmr_httpc_resp_free(llmr_httpc_resp *r) {
    if (!r) return;
    headers_clear(r);
    free(r->body);
    memset(r, 0, sizeof *r);
}

const char *llmr_httpc_resp_header(const llmr_httpc_resp *r, const char *name) {
    if (!r || !name) return NULL;
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
    return NULL;
}

/* ---- one attempt ------------------------------------------------------------------------------ */

enum sink_kind { SINK_BUFFER, SINK_STREAM, SINK_FILE };

typedef struct xfer {
    llmr_httpc *c;
    const llmr_httpc_req *req;
    const char *method;
    llmr_httpc_resp *resp;        /* status + headers land here (body too for SINK_BUFFER) */
    enum sink_kind sink;
    int headers_done;             /* the final response's header block has ended */
    int oom;
    /* SINK_BUFFER */
    size_t cap;
    int too_big;
    /* SINK_STREAM */
    llmr_httpc_response_fn on_response;
    llmr_httpc_chunk_fn on_chunk;
    void *user;
    int response_delivered;
    uint64_t delivered;           /* body bytes handed to on_chunk */
    int cb_abort;                 /* a callback asked to stop */
    /* SINK_FILE */
    int fd;
    llmr_sha256 *hash;            /* covers exactly bytes [0, file_size) of the file */
    uint64_t file_size;
    uint64_t attempt_start;       /* file_size when this attempt began (the Range offset) */
    int checked;                  /* first body byte: status/Content-Range checked */
    int restarted;                /* this attempt truncated the partial (server ignored Range) */
    int range_mismatch;           /* 206 at the wrong offset */
    int64_t size_limit;           /* expected size: more bytes than this is an error (-1: none) */
    int oversize;
    int io_error;
    char io_msg[256];
    char err_body[512];           /* start of an error response's body, for the message */
    size_t err_body_len;
    llmr_httpc_progress_fn progress;
    void *progress_user;
    struct timespec t0, last_progress;
    /* cancellation */
    const atomic_int *cancel;
} xfer;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cancelled(const xfer *x) { return x->cancel && atomic_load(x->cancel) != 0; }

/* Header lines arrive one per call. A status line starts a new response (a redirect, a 1xx, or
 * the final one), so headers collected so far are dropped: resp keeps only the last response's. */
static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    llmr_httpc_resp *r = x->resp;
    size_t l = len;
    while (l > 0 && (data[l - 1] == '\r' || data[l - 1] == '\n')) l--;
    if (l >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        headers_clear(r);
        x->headers_done = 0;
        const char *sp = memchr(data, ' ', l);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return len;
    }
    if (l == 0) {
        x->headers_done = 1;
        return len;
    }
    const char *colon = memchr(data, ':', l);
    if (!colon) return len; /* obs-fold or junk: ignore */
    llmr_httpc_header *nh = realloc(r->headers, (r->n_headers + 1) * sizeof *nh);
    if (!nh) { x->oom = 1; return 0; }
    r->headers = nh;
    const char *v = colon + 1;
    while (v < data + l && (*v == ' ' || *v == '\t')) v++;
    nh[r->n_headers].name = strndup(data, (size_t)(colon - data));
    nh[r->n_headers].value = strndup(v, (size_t)(data + l - v));
    if (!nh[r->n_headers].name || !nh[r->n_headers].value) {
        free(nh[r->n_headers].name);
        free(nh[r->n_headers].value);
        x->oom = 1;
        return 0;
    }
    r->n_headers++;
    return len;
}

static void keep_err_body(xfer *x, const char *data, size_t len) {
    size_t room = sizeof x->err_body - 1 - x->err_body_len;
    if (len > room) len = room;
    memcpy(x->err_body + x->err_body_len, data, len);
    x->err_body_len += len;
    x->err_body[x->err_body_len] = 0;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Empties the partial file and its hash: the next byte written is byte 0 of the resource. */
static int file_reset(xfer *x) {
    if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0) {
        snprintf(x->io_msg, sizeof x->io_msg, "truncate: %s", strerror(errno));
        x->io_error = 1;
        return -1;
    }
    char scratch[65];
    llmr_sha256_final(x->hash, scratch); /* final() resets the context */
    x->file_size = 0;
    return 0;
}

/* First body byte of a download: is this the continuation we asked for? */
static int file_check_first(xfer *x) {
    long st = x->resp->status;
    if (st == 206) {
        const char *cr = llmr_httpc_resp_header(x->resp, "Content-Range");
        unsigned long long start = 0;
        if (!cr || sscanf(cr, "bytes %llu-", &start) != 1 || start != x->attempt_start) {
            x->range_mismatch = 1;
            return -1;
        }
        return 0;
    }
    if (st == 200) {
        if (x->file_size > 0) { /* the server ignored Range: start over from byte 0 */
            if (file_reset(x) != 0) return -1;
            x->restarted = 1;
        }
        x->attempt_start = 0;
        return 0;
    }
    return 1; /* an error status: the body is only kept for the message */
}

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    llmr_httpc_resp *r = x->resp;
    if (cancelled(x)) { x->cb_abort = 1; return 0; }
    switch (x->sink) {
    case SINK_BUFFER:
        if (r->body_len + len > x->c->o.max_body) { x->too_big = 1; return 0; }
        if (r->body_len + len + 1 > x->cap) {
            size_t nc = x->cap ? x->cap : 4096;
            while (nc < r->body_len + len + 1) nc *= 2;
            char *nb = realloc(r->body, nc);
            if (!nb) { x->oom = 1; return 0; }
            r->body = nb;
            x->cap = nc;
        }
        memcpy(r->body + r->body_len, data, len);
        r->body_len += len;
        r->body[r->body_len] = 0;
        return len;
    case SINK_STREAM:
        if (!x->response_delivered) {
            x->response_delivered = 1;
            if (x->on_response && x->on_response(x->user, r)) { x->cb_abort = 1; return 0; }
        }
        x->delivered += len;
        if (x->on_chunk && x->on_chunk(x->user, data, len)) { x->cb_abort = 1; return 0; }
        return len;
    case SINK_FILE:
        if (!x->checked) {
            int v = file_check_first(x);
            if (v < 0) return 0;
            x->checked = v == 0 ? 1 : 2;
        }
        if (x->checked == 2) { keep_err_body(x, data, len); return len; }
        if (x->size_limit >= 0 && x->file_size + len > (uint64_t)x->size_limit) {
            x->oversize = 1; /* never let a wrong or hostile server fill the disk */
            return 0;
        }
        if (write_all(x->fd, data, len) != 0) {
            snprintf(x->io_msg, sizeof x->io_msg, "write: %s", strerror(errno));
            x->io_error = 1;
            return 0;
        }
        llmr_sha256_update(x->hash, data, len);
        x->file_size += len;
        return len;
    }
    return 0;
}

static int on_xferinfo(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dlnow; (void)ultotal; (void)ulnow;
    xfer *x = ud;
    if (cancelled(x)) { x->cb_abort = 1; return 1; }
    if (x->sink != SINK_FILE || !x->progress || x->checked != 1) return 0;
    double t = now_s();
    double last = (double)x->last_progress.tv_sec + x->last_progress.tv_nsec / 1e9;
    if (t - last < 0.2) return 0;
    x->last_progress.tv_sec = (time_t)t;
    x->last_progress.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    double t0 = (double)x->t0.tv_sec + x->t0.tv_nsec / 1e9;
    double rate = t > t0 ? (double)(x->file_size - x->attempt_start) / (t - t0) : 0;
    uint64_t total = dltotal > 0 ? x->attempt_start + (uint64_t)dltotal : 0;
    if (x->progress(x->progress_user, x->file_size, total, rate)) { x->cb_abort = 1; return 1; }
    return 0;
}

/* Maps a curl failure to our status. */
static llmr_httpc_status map_curl(CURLcode rc, CURL *h) {
    switch (rc) {
    case CURLE_OK: return LLMR_HTTPC_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return LLMR_HTTPC_EDNS;
    case CURLE_COULDNT_CONNECT: {
        long os = 0;
        curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os);
        return os == ECONNREFUSED ? LLMR_HTTPC_EREFUSED : LLMR_HTTPC_ECONNECT;
    }
    case CURLE_OPERATION_TIMEDOUT: return LLMR_HTTPC_ETIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED: return LLMR_HTTPC_ETLS;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return LLMR_HTTPC_EINVAL;
    case CURLE_OUT_OF_MEMORY: return LLMR_HTTPC_ENOMEM;
    default: return LLMR_HTTPC_ETRANSPORT;
    }
}

static int method_is(const char *m, const char *want) { return strcasecmp(m, want) == 0; }

/* Performs one attempt of x->req. On a transport failure writes "cause (curl's detail)" to detail. */
static llmr_httpc_status xfer_perform(xfer *x, long total_timeout_ms, const char *range, char *detail,
                                      size_t detail_size) {
    const llmr_httpc_req *q = x->req;
    llmr_httpc *c = x->c;
    detail[0] = 0;
    CURL *h = curl_easy_init();
    if (!h) return LLMR_HTTPC_ENOMEM;
    struct curl_slist *hl = NULL, *t;
    char line[4096];
    llmr_httpc_status st = LLMR_HTTPC_OK;
    const char *body = q->body;
    size_t body_len = body ? (q->body_len ? q->body_len : strlen(body)) : 0;
    char errbuf[CURL_ERROR_SIZE] = "";

#define ADD_HEADER(s) do { t = curl_slist_append(hl, (s)); if (!t) { st = LLMR_HTTPC_ENOMEM; goto out; } hl = t; } while (0)
    if (body) {
        snprintf(line, sizeof line, "Content-Type: %s", q->content_type ? q->content_type : "application/json");
        ADD_HEADER(line);
    }
    if (c->bearer) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->bearer);
        ADD_HEADER(line);
    }
    ADD_HEADER("Expect:"); /* no 100-continue round trip for small JSON bodies */
    for (const char *const *e = q->headers; e && *e; e++) ADD_HEADER(*e);
#undef ADD_HEADER

    curl_easy_setopt(h, CURLOPT_URL, q->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
    if (total_timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, c->o.low_speed_bytes);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->o.low_speed_time_s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    if (range) curl_easy_setopt(h, CURLOPT_RANGE, range);
    if (method_is(x->method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (method_is(x->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
    } else if (!method_is(x->method, "GET")) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
    }
    if (body || method_is(x->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }

    CURLcode rc = curl_easy_perform(h);
    if (x->oom) st = LLMR_HTTPC_ENOMEM;
    else if (x->cb_abort) st = LLMR_HTTPC_EABORTED;
    else if (x->too_big) {
        st = LLMR_HTTPC_ETOOBIG;
        snprintf(detail, detail_size, "body over the %zu-byte limit", c->o.max_body);
    } else if (x->oversize) {
        st = LLMR_HTTPC_EVERIFY;
        snprintf(detail, detail_size, "server sent more than the expected %lld bytes", (long long)x->size_limit);
    } else if (x->io_error) {
        st = LLMR_HTTPC_EIO;
        snprintf(detail, detail_size, "%s", x->io_msg);
    } else if (rc != CURLE_OK && !(x->range_mismatch && rc == CURLE_WRITE_ERROR)) {
        st = map_curl(rc, h);
        /* a name lookup that times out (unreachable DNS server) is a DNS failure for the user */
        if (st == LLMR_HTTPC_ETIMEOUT && strstr(errbuf, "Resolving timed out")) st = LLMR_HTTPC_EDNS;
        snprintf(detail, detail_size, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
out:
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return st;
}

/* ---- retry policy ----------------------------------------------------------------------------- */

static int retryable_status(long status) { return status == 429 || (status >= 500 && status <= 599); }

static int never_connected(llmr_httpc_status st) {
    return st == LLMR_HTTPC_EDNS || st == LLMR_HTTPC_EREFUSED || st == LLMR_HTTPC_ECONNECT;
}

static int transport_error(llmr_httpc_status st) {
    return never_connected(st) || st == LLMR_HTTPC_ETIMEOUT || st == LLMR_HTTPC_ETRANSPORT;
}

static int idempotent(const char *m) {
    return method_is(m, "GET") || method_is(m, "HEAD") || method_is(m, "PUT") || method_is(m, "DELETE") ||
           method_is(m, "OPTIONS");
}

/* Sleeps the backoff for attempt n (1-based), honoring the server's Retry-After within the cap,
 * waking early when cancelled. Returns -1 if cancelled. */
static int backoff_sleep(const llmr_httpc *c, int n, const llmr_httpc_resp *last, const atomic_int *cancel) {
    long ms = c->o.backoff_ms;
    for (int i = 1; i < n && ms < c->o.backoff_max_ms; i++) ms *= 2;
    const char *ra = last ? llmr_httpc_resp_header(last, "Retry-After") : NULL;
    if (ra) {
        char *end;
        long s = strtol(ra, &end, 10);
        if (end != ra && s >= 0 && s < 86400) ms = s * 1000 > ms ? s * 1000 : ms;
    }
    if (ms > c->o.backoff_max_ms) ms = c->o.backoff_max_ms;
    while (ms > 0) {
        if (cancel && atomic_load(cancel)) return -1;
        long step = ms < 50 ? ms : 50;
        struct timespec ts = {0, step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return cancel && atomic_load(cancel) ? -1 : 0;
}

static void fail_msg(char *err, size_t es, const char *method, const char *url, llmr_httpc_status st,
                     const char *detail) {
    if (!err || !es) return;
    if (detail && *detail) snprintf(err, es, "%s %s: %s (%s)", method, url, llmr_httpc_strerror(st), detail);
    else snprintf(err, es, "%s %s: %s", method, url, llmr_httpc_strerror(st));
}

static llmr_httpc_status check_args(llmr_httpc *c, const llmr_httpc_req *req, char *err, size_t es) {
    if (!c || !req || !req->url || !*req->url) {
        if (err && es) snprintf(err, es, "http client: missing client or URL");
        return LLMR_HTTPC_EINVAL;
    }
    return LLMR_HTTPC_OK;
}

/* The retry loop shared by do() and stream(). */
static llmr_httpc_status run_with_retries(xfer *x, long timeout_ms, char *err, size_t es) {
    const llmr_httpc_req *q = x->req;
    llmr_httpc *c = x->c;
    int may_retry = !q->no_retry;
    int max_attempts = 1 + (may_retry ? c->o.retries : 0);
    char detail[CURL_ERROR_SIZE + 128];
    llmr_httpc_status st = LLMR_HTTPC_OK;
    for (int a = 1; a <= max_attempts; a++) {
        if (a > 1 && backoff_sleep(c, a - 1, x->resp, q->cancel) != 0) {
            st = LLMR_HTTPC_EABORTED;
            detail[0] = 0;
            break;
        }
        /* a fresh response per attempt */
        llmr_httpc_resp_free(x->resp);
        x->cap = 0;
        x->headers_done = 0;
        x->resp->attempts = a;
        st = xfer_perform(x, timeout_ms, NULL, detail, sizeof detail);
        if (x->sink == SINK_STREAM && x->delivered > 0) break; /* bytes went out: never replay */
        int again, safe = idempotent(x->method) || q->idempotent;
        if (st == LLMR_HTTPC_OK) again = retryable_status(x->resp->status) && safe;
        else again = transport_error(st) && (safe || never_connected(st));
        if (!again) break;
    }
    if (st != LLMR_HTTPC_OK) fail_msg(err, es, x->method, q->url, st, detail);
    return st;
}

llmr_httpc_status llmr_httpc_do(llmr_httpc *c, const llmr_httpc_req *req, llmr_httpc_resp *resp, char *err,
                                size_t es) {
    if (resp) memset(resp, 0, sizeof *resp);
    llmr_httpc_status st = check_args(c, req, err, es);
    if (st != LLMR_HTTPC_OK || !resp) {
        if (!resp && err && es) snprintf(err, es, "http client: missing response struct");
        return LLMR_HTTPC_EINVAL;
    }
    xfer x = {.c = c, .req = req, .method = req->method ? req->method : "GET", .resp = resp, .sink = SINK_BUFFER,
              .fd = -1, .cancel = req->cancel};
    st = run_with_retries(&x, req->timeout_ms > 0 ? req->timeout_ms : c->o.timeout_ms, err, es);
    if (st == LLMR_HTTPC_OK && !resp->body) { /* always a NUL-terminated body, even when empty */
        resp->body = calloc(1, 1);
        if (!resp->body) return LLMR_HTTPC_ENOMEM;
    }
    return st;
}

llmr_httpc_status llmr_httpc_get(llmr_httpc *c, const char *url, llmr_httpc_resp *resp, char *err, size_t es) {
    llmr_httpc_req q = {.method = "GET", .url = url};
    return llmr_httpc_do(c, &q, resp, err, es);
}

llmr_httpc_status llmr_httpc_post_json(llmr_httpc *c, const char *url, const char *json, llmr_httpc_resp *resp,
                                       char *err, size_t es) {
    llmr_httpc_req q = {.method = "POST", .url = url, .body = json};
    return llmr_httpc_do(c, &q, resp, err, es);
}

llmr_httpc_status llmr_httpc_delete(llmr_httpc *c, const char *url, llmr_httpc_resp *resp, char *err, size_t es) {
    llmr_httpc_req q = {.method = "DELETE", .url = url};
    return llmr_httpc_do(c, &q, resp, err, es);
}

llmr_httpc_status llmr_httpc_stream(llmr_httpc *c, const llmr_httpc_req *req, llmr_httpc_response_fn on_response,
                                    llmr_httpc_chunk_fn on_chunk, void *user, llmr_httpc_resp *resp, char *err,
                                    size_t es) {
    llmr_httpc_resp local;
    llmr_httpc_resp *r = resp ? resp : &local;
    memset(r, 0, sizeof *r);
    llmr_httpc_status st = check_args(c, req, err, es);
    if (st != LLMR_HTTPC_OK) return st;
    xfer x = {.c = c, .req = req, .method = req->method ? req->method : "GET", .resp = r, .sink = SINK_STREAM,
              .on_response = on_response, .on_chunk = on_chunk, .user = user, .fd = -1, .cancel = req->cancel};
    st = run_with_retries(&x, req->timeout_ms > 0 ? req->timeout_ms : 0, err, es);
    /* a response without body bytes (204, HEAD, empty error) still gets its on_response call */
    if (st == LLMR_HTTPC_OK && !x.response_delivered && r->status > 0 && on_response && on_response(user, r)) {
        st = LLMR_HTTPC_EABORTED;
        fail_msg(err, es, x.method, req->url, st, NULL);
    }
    if (!resp) llmr_httpc_resp_free(&local);
    return st;
}

/* ---- downloads -------------------------------------------------------------------------------- */

/* Hashes the bytes already in the partial so the final sha256 covers the whole file. */
static int hash_existing(int fd, llmr_sha256 *h, uint64_t size, char *msg, size_t ms) {
    char *buf = malloc(1u << 20);
    if (!buf) { snprintf(msg, ms, "out of memory"); return -1; }
    uint64_t done = 0;
    while (done < size) {
        ssize_t r = pread(fd, buf, 1u << 20, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(msg, ms, "read: %s", r < 0 ? strerror(errno) : "file shrank");
            free(buf);
            return -1;
        }
        llmr_sha256_update(h, buf, (size_t)r);
        done += (uint64_t)r;
    }
    free(buf);
    return 0;
}

/* Parses the total of a Content-Range, "bytes A-B/TOTAL" or (416) "bytes *\/TOTAL"; -1 if absent. */
static int64_t content_range_total(const llmr_httpc_resp *r) {
    const char *cr = llmr_httpc_resp_header(r, "Content-Range");
    const char *slash = cr ? strchr(cr, '/') : NULL;
    if (!slash || slash[1] == '*') return -1;
    return strtoll(slash + 1, NULL, 10);
}

llmr_httpc_status llmr_httpc_download(llmr_httpc *c, const char *url, const char *dest,
                                      const llmr_httpc_download_opts *opts, llmr_httpc_download_result *out,
                                      char *err, size_t es) {
    llmr_httpc_download_opts none = {.expected_size = -1};
    const llmr_httpc_download_opts *o = opts ? opts : &none;
    llmr_httpc_download_result res;
    memset(&res, 0, sizeof res);
    if (!c || !url || !*url || !dest || !*dest) {
        if (err && es) snprintf(err, es, "download: missing client, URL or destination");
        return LLMR_HTTPC_EINVAL;
    }
    size_t pl = strlen(dest) + sizeof ".partial";
    char *partial = malloc(pl);
    llmr_sha256 *hash = llmr_sha256_create();
    llmr_httpc_resp resp = {0};
    llmr_httpc_status st = LLMR_HTTPC_OK;
    char detail[CURL_ERROR_SIZE + 600] = "";
    int fd = -1;
    if (!partial || !hash) { st = LLMR_HTTPC_ENOMEM; goto done; }
    snprintf(partial, pl, "%s.partial", dest);
    fd = open(partial, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st = LLMR_HTTPC_EIO;
        snprintf(detail, sizeof detail, "%s: %s", partial, strerror(errno));
        goto done;
    }
    if (hash_existing(fd, hash, (uint64_t)sb.st_size, detail, sizeof detail) != 0 ||
        lseek(fd, sb.st_size, SEEK_SET) < 0) {
        st = LLMR_HTTPC_EIO;
        goto done;
    }
    res.resumed_from = (uint64_t)sb.st_size;
    llmr_httpc_req q = {.method = "GET", .url = url, .headers = o->headers, .cancel = o->cancel};
    xfer x = {.c = c, .req = &q, .method = "GET", .resp = &resp, .sink = SINK_FILE, .fd = fd, .hash = hash,
              .file_size = (uint64_t)sb.st_size, .progress = o->progress, .progress_user = o->progress_user,
              .cancel = o->cancel, .size_limit = o->expected_size >= 0 ? o->expected_size : -1};
    /* The retry budget refills whenever an attempt made progress, so a long download survives any
     * number of interruptions; a hard cap stops a server that keeps failing at the same spot. */
    int budget = c->o.retries, failures_in_row = 0, complete = 0;
    for (int a = 1; a <= 1000 && !complete; a++) {
        if (failures_in_row > 0 && backoff_sleep(c, failures_in_row, &resp, o->cancel) != 0) {
            st = LLMR_HTTPC_EABORTED;
            detail[0] = 0;
            break;
        }
        llmr_httpc_resp_free(&resp);
        x.checked = 0; x.restarted = 0; x.range_mismatch = 0; x.err_body_len = 0; x.err_body[0] = 0;
        x.attempt_start = x.file_size;
        clock_gettime(CLOCK_MONOTONIC, &x.t0);
        x.last_progress.tv_sec = 0;
        x.last_progress.tv_nsec = 0;
        char range[48];
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x.file_size);
        res.attempts = a;
        uint64_t before = x.file_size;
        st = xfer_perform(&x, 0, x.file_size > 0 ? range : NULL, detail, sizeof detail);
        res.status = resp.status;
        if (st == LLMR_HTTPC_EVERIFY) { /* oversize: the partial holds wrong bytes */
            unlink(partial);
            break;
        }
        if (x.restarted) res.restarts++;
        if (st == LLMR_HTTPC_OK && x.range_mismatch) {
            /* a 206 for bytes we did not ask for: distrust the partial and start clean */
            if (file_reset(&x) != 0) { st = LLMR_HTTPC_EIO; snprintf(detail, sizeof detail, "%s", x.io_msg); break; }
            res.restarts++;
            failures_in_row++;
            if (failures_in_row > budget) {
                st = LLMR_HTTPC_ETRANSPORT;
                snprintf(detail, sizeof detail, "server answered Range with a wrong Content-Range");
                break;
            }
            continue;
        }
        if (st == LLMR_HTTPC_OK && resp.status == 416 && before > 0) {
            int64_t total = content_range_total(&resp);
            if (total >= 0 && (uint64_t)total == before) { complete = 1; break; } /* already whole */
            if (file_reset(&x) != 0) { st = LLMR_HTTPC_EIO; snprintf(detail, sizeof detail, "%s", x.io_msg); break; }
            res.restarts++;
            continue;
        }
        if (st == LLMR_HTTPC_OK && resp.status >= 200 && resp.status < 300) {
            /* a body-less 200/206 (empty file) never ran the first-byte check */
            if (resp.status == 200 && x.checked == 0 && x.file_size > 0) {
                if (file_reset(&x) != 0) { st = LLMR_HTTPC_EIO; snprintf(detail, sizeof detail, "%s", x.io_msg); break; }
                res.restarts++;
            }
            complete = 1;
            break;
        }
        int again;
        if (st == LLMR_HTTPC_OK) { /* an HTTP error status */
            again = retryable_status(resp.status);
            st = LLMR_HTTPC_EHTTP;
            snprintf(detail, sizeof detail, "HTTP %ld%s%.400s", resp.status, x.err_body_len ? ": " : "", x.err_body);
        } else {
            again = transport_error(st);
        }
        if (x.file_size > before) failures_in_row = 0; /* progress: refill the budget */
        failures_in_row++;
        if (!again || failures_in_row > budget) break;
    }
    if (!complete) goto done;
    st = LLMR_HTTPC_OK;
    llmr_sha256_final(hash, res.sha256);
    res.bytes = x.file_size;
    if (o->progress) o->progress(o->progress_user, res.bytes, res.bytes, 0);
    if (o->expected_size >= 0 && res.bytes != (uint64_t)o->expected_size) {
        st = LLMR_HTTPC_EVERIFY;
        snprintf(detail, sizeof detail, "size %llu, expected %lld", (unsigned long long)res.bytes,
                 (long long)o->expected_size);
    } else if (o->expected_sha256 && strcasecmp(o->expected_sha256, res.sha256) != 0) {
        st = LLMR_HTTPC_EVERIFY;
        snprintf(detail, sizeof detail, "sha256 %s, expected %.64s", res.sha256, o->expected_sha256);
    }
    if (st == LLMR_HTTPC_EVERIFY) {
        unlink(partial); /* bad bytes: the next attempt must not resume from them */
        goto done;
    }
    if (fdatasync(fd) != 0 || rename(partial, dest) != 0) {
        st = LLMR_HTTPC_EIO;
        snprintf(detail, sizeof detail, "%s -> %s: %s", partial, dest, strerror(errno));
    }
done:
    if (st != LLMR_HTTPC_OK) fail_msg(err, es, "GET", url, st, detail);
    if (fd >= 0) {
        struct stat now;
        /* an empty partial holds nothing to resume: do not leave it behind */
        if (st != LLMR_HTTPC_OK && fstat(fd, &now) == 0 && now.st_size == 0) unlink(partial);
        close(fd);
    }
    llmr_httpc_resp_free(&resp);
    llmr_sha256_destroy(hash);
    free(partial);
    if (out) *out = res;
    return st;
}

char *llmr_url_encode(const char *s, int keep_slash) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        unsigned char ch = *u;
        int keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                   ch == '.' || ch == '_' || ch == '~' || (keep_slash && ch == '/');
        if (keep) *p++ = (char)ch;
        else { *p++ = '%'; *p++ = hex[ch >> 4]; *p++ = hex[ch & 15]; }
    }
    *p = 0;
    return o;
}
