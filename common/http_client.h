/* http_client.h — llmr's HTTP client on libcurl: JSON requests, streaming, resumable downloads.
 *
 * A client (llmr_httpc) holds defaults — timeouts, retry policy, bearer token, user agent — and is
 * immutable after creation, so one client may be used from many threads at once: every call uses its
 * own curl easy handle. curl_global_init runs once per process (pthread_once) on the first create.
 *
 * Three ways to make a request:
 *   llmr_httpc_do        buffered: status, headers and the whole body (bounded by max_body);
 *   llmr_httpc_stream    body delivered chunk by chunk to a callback, abortable (the router proxies
 *                        server-sent events through it);
 *   llmr_httpc_download  a URL into a file, through NAME.partial, resuming with Range after any
 *                        interruption, with progress, abort, and optional size/sha256 verification.
 *
 * Retries (exponential backoff from backoff_ms doubling up to backoff_max_ms, honoring Retry-After
 * within that bound): transport errors, 429 and 5xx are retried for idempotent requests (GET, HEAD,
 * PUT, DELETE, OPTIONS, or any request marked req.idempotent); a POST is otherwise retried only when
 * the connection was never made (DNS, refused), since then the server cannot have seen it. A stream is never retried once body bytes were delivered.
 *
 * Errors: every call returns an llmr_httpc_status; the human message in err names the method, the URL
 * and the cause ("GET http://h:1/x: connection refused (...)"). An HTTP status >= 400 is not an error
 * for llmr_httpc_do/stream (the caller reads resp->status); it is for llmr_httpc_download. */
#ifndef LLMR_HTTP_CLIENT_H
#define LLMR_HTTP_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum llmr_httpc_status {
    LLMR_HTTPC_OK = 0,
    LLMR_HTTPC_EINVAL,      /* bad argument or malformed URL */
    LLMR_HTTPC_ENOMEM,      /* allocation failed */
    LLMR_HTTPC_EDNS,        /* host name could not be resolved */
    LLMR_HTTPC_EREFUSED,    /* connection refused */
    LLMR_HTTPC_ECONNECT,    /* other failure to connect (unreachable network, ...) */
    LLMR_HTTPC_ETLS,        /* TLS handshake or certificate failure */
    LLMR_HTTPC_ETIMEOUT,    /* connect timeout, total timeout, or the transfer stalled */
    LLMR_HTTPC_ETRANSPORT,  /* connection dropped or protocol error mid-transfer */
    LLMR_HTTPC_EHTTP,       /* HTTP status >= 400 where success was required (downloads) */
    LLMR_HTTPC_ETOOBIG,     /* response body over max_body */
    LLMR_HTTPC_EABORTED,    /* a callback or the cancel flag asked to stop */
    LLMR_HTTPC_EIO,         /* local file error (download target) */
    LLMR_HTTPC_EVERIFY,     /* downloaded size or sha256 differs from what was expected */
} llmr_httpc_status;

/* A static name for a status, e.g. "connection refused". Never NULL. */
const char *llmr_httpc_strerror(llmr_httpc_status st);

/* Client defaults. Zero fields take the default shown. */
typedef struct llmr_httpc_opts {
    long connect_timeout_ms;  /* 10000 */
    long timeout_ms;          /* total per attempt for do(); 60000. Streams and downloads: 0 = none */
    long low_speed_bytes;     /* a transfer slower than this ... (1) */
    long low_speed_time_s;    /* ... for this long is a stall (ETIMEOUT); 30 */
    int retries;              /* extra attempts after the first; 3. Negative = 0 */
    long backoff_ms;          /* first backoff; 200 */
    long backoff_max_ms;      /* backoff cap; 5000 */
    size_t max_body;          /* largest buffered body for do(); 64 MiB */
    const char *bearer_token; /* "Authorization: Bearer ..." on every request; copied; NULL = none */
    const char *user_agent;   /* copied; default "llmr/0.1" */
} llmr_httpc_opts;

typedef struct llmr_httpc llmr_httpc; /* opaque, immutable, thread-safe */

/* Creates a client (opts may be NULL for all defaults). NULL on allocation failure. */
llmr_httpc *llmr_httpc_create(const llmr_httpc_opts *opts);
/* Frees the client. Accepts NULL. No call may be in flight on it. */
void llmr_httpc_destroy(llmr_httpc *c);

/* One request. Only url is required. */
typedef struct llmr_httpc_req {
    const char *method;              /* "GET" (default), "POST", "PUT", "DELETE", "HEAD" */
    const char *url;
    const char *body;                /* request body or NULL; sent as-is */
    size_t body_len;                 /* bytes of body; if 0 and body != NULL, strlen(body) */
    const char *content_type;        /* default "application/json" when there is a body */
    const char *const *headers;      /* extra "Name: value" lines, NULL-terminated; may be NULL */
    long timeout_ms;                 /* overrides the client's total timeout when > 0 */
    int no_retry;                    /* 1: a single attempt whatever the method */
    const atomic_int *cancel;        /* when non-NULL and set non-zero (any thread): abort (EABORTED) */
    int idempotent;                  /* 1: retry like GET even for POST (the caller knows a replay is
                                      * harmless, e.g. a registration keyed by node id) */
} llmr_httpc_req;

/* A response header (name as the server spelled it). */
typedef struct llmr_httpc_header { char *name, *value; } llmr_httpc_header;

/* A response. All memory is owned by the struct; release with llmr_httpc_resp_free. */
typedef struct llmr_httpc_resp {
    long status;                 /* HTTP status of the final response (0 if none arrived) */
    char *body;                  /* NUL-terminated (binary bodies may hold NULs); NULL for stream() */
    size_t body_len;
    llmr_httpc_header *headers;  /* of the final response only (not of earlier 1xx/retried ones) */
    size_t n_headers;
    int attempts;                /* how many attempts were made */
} llmr_httpc_resp;

/* Frees what resp holds and zeroes it. Accepts NULL and a zeroed struct. */
void llmr_httpc_resp_free(llmr_httpc_resp *resp);
/* The first header named name (case-insensitive), or NULL. */
const char *llmr_httpc_resp_header(const llmr_httpc_resp *resp, const char *name);

/* Performs req and buffers the response into *resp (zeroed first; free it even on error: it may
 * hold the last status and headers). Returns OK whenever a response arrived, whatever its status. */
llmr_httpc_status llmr_httpc_do(llmr_httpc *c, const llmr_httpc_req *req, llmr_httpc_resp *resp, char *err,
                                size_t err_size);

/* Shorthands for llmr_httpc_do. json may be NULL (no body). */
llmr_httpc_status llmr_httpc_get(llmr_httpc *c, const char *url, llmr_httpc_resp *resp, char *err, size_t err_size);
llmr_httpc_status llmr_httpc_post_json(llmr_httpc *c, const char *url, const char *json, llmr_httpc_resp *resp,
                                       char *err, size_t err_size);
llmr_httpc_status llmr_httpc_delete(llmr_httpc *c, const char *url, llmr_httpc_resp *resp, char *err,
                                    size_t err_size);

/* Streaming callbacks. on_response runs once, after the final response's headers and before the
 * first chunk (resp->body is NULL); on_chunk runs per received piece of body. Either returning
 * non-zero aborts the transfer (EABORTED). */
typedef int (*llmr_httpc_response_fn)(void *user, const llmr_httpc_resp *resp);
typedef int (*llmr_httpc_chunk_fn)(void *user, const char *data, size_t len);

/* Performs req, delivering the body to on_chunk as it arrives (any status: the caller decides from
 * on_response). *resp (may be NULL) receives status and headers. Retried like do() only until the
 * first body byte was delivered. No total timeout unless req->timeout_ms > 0; stalls still count. */
llmr_httpc_status llmr_httpc_stream(llmr_httpc *c, const llmr_httpc_req *req, llmr_httpc_response_fn on_response,
                                    llmr_httpc_chunk_fn on_chunk, void *user, llmr_httpc_resp *resp, char *err,
                                    size_t err_size);

/* Download progress: bytes now in the file, total expected (0 if unknown), recent rate in bytes/s.
 * Called at most every ~200 ms and once at the end. Return non-zero to abort (the .partial stays,
 * so a later call resumes). */
typedef int (*llmr_httpc_progress_fn)(void *user, uint64_t bytes, uint64_t total, double bytes_per_s);

typedef struct llmr_httpc_download_opts {
    const char *const *headers;     /* extra request headers, NULL-terminated; may be NULL */
    int64_t expected_size;          /* when >= 0: the final size, and a bound: a server sending more is
                                     * cut off (EVERIFY, partial removed). -1 = unknown; 0 = empty file */
    const char *expected_sha256;    /* verify the sha256 (64 lower-case hex) when non-NULL */
    llmr_httpc_progress_fn progress;
    void *progress_user;
    const atomic_int *cancel;       /* as in llmr_httpc_req */
} llmr_httpc_download_opts;

typedef struct llmr_httpc_download_result {
    uint64_t bytes;                 /* final size of the file */
    uint64_t resumed_from;          /* bytes already in NAME.partial when the first attempt began */
    int attempts;                   /* HTTP attempts made */
    int restarts;                   /* times the server ignored Range (200) and the partial was reset */
    long status;                    /* status of the last response */
    char sha256[65];                /* sha256 of the whole file (always computed) */
} llmr_httpc_download_result;

/* Downloads url into dest. Bytes go to "dest.partial"; an existing partial is resumed with
 * "Range: bytes=N-" and kept on any failure, so the next call resumes again. A 206 must start at N
 * (Content-Range), a 200 means the server ignored Range: the partial is truncated and refilled
 * from byte 0; a 416 with a partial means it is stale: it is removed and the download restarts.
 * On success the file is verified (expected_size / expected_sha256; on mismatch the partial is
 * removed and EVERIFY returned), then renamed to dest. opts and out may be NULL.
 * Returns OK, or the cause with the URL (and for EHTTP the status) in err. */
llmr_httpc_status llmr_httpc_download(llmr_httpc *c, const char *url, const char *dest,
                                      const llmr_httpc_download_opts *opts, llmr_httpc_download_result *out,
                                      char *err, size_t err_size);

/* Percent-encodes s for use inside one URL path segment (RFC 3986 unreserved kept; '/' encoded
 * unless keep_slash). Returns a malloc'd string or NULL on allocation failure. */
char *llmr_url_encode(const char *s, int keep_slash);

#endif
