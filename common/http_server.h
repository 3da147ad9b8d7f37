/* http_server.h — llmr's HTTP server layer on libevent's evhttp.
 *
 * Routing: exact paths ("/v1/models") and prefixes ending in a star (e.g. "/v0/models/" + star); the longest match
 * wins. An unknown path gets 404 and a known path with another method 405 (with Allow), both as
 * OpenAI-style JSON errors: {"error":{"message","type","code","param"}}.
 * Limits: request bodies over max_body get 413 JSON (bodies are buffered whole up to a hard cap of
 * 4 x max_body; past that evhttp itself refuses with 413); headers over max_headers are refused;
 * idle connections time out after timeout_s.
 * Handlers run on the loop thread. A handler must finish every request it receives with exactly one
 * reply (llmr_http_reply_*) or a stream (llmr_http_stream_start ... llmr_http_stream_end); it may do
 * so later (after work on another thread, posted back with llmr_loop_post).
 * Graceful shutdown stops accepting, lets in-flight requests finish up to a grace period, then stops
 * the loop. */
#ifndef LLMR_HTTP_SERVER_H
#define LLMR_HTTP_SERVER_H

#include <jansson.h>
#include <stddef.h>

#include "common/event_loop.h"

typedef struct llmr_http_server llmr_http_server;   /* opaque */
typedef struct llmr_http_request llmr_http_request; /* opaque, one per request */

typedef void (*llmr_http_handler)(llmr_http_request *req, void *user);

typedef struct llmr_http_server_opts {
    const char *listen;      /* "127.0.0.1:8080", "0.0.0.0:0" (ephemeral), "[::1]:8080" */
    size_t max_body;         /* default 1 MiB */
    size_t max_headers;      /* default 64 KiB */
    int timeout_s;           /* default 120 */
} llmr_http_server_opts;

/* Binds and starts serving on the loop. NULL with the cause (address, errno text) in err. */
llmr_http_server *llmr_http_server_create(llmr_loop *loop, const llmr_http_server_opts *opts, char *err, size_t err_size);
/* Frees the server (closes the socket). Accepts NULL. */
void llmr_http_server_destroy(llmr_http_server *srv);
/* The bound port (useful with port 0). */
int llmr_http_server_port(const llmr_http_server *srv);

/* Adds a route. method: "GET", "POST", "DELETE", ... or NULL for any. pattern: exact, or prefix with
 * a trailing '*'. Returns 0, -1 if the table is full. */
int llmr_http_server_route(llmr_http_server *srv, const char *method, const char *pattern, llmr_http_handler fn, void *user);

/* Requests in flight (replied-to requests excluded). */
int llmr_http_server_active(const llmr_http_server *srv);

/* Stops accepting; when no request is in flight, or after grace_ms, stops the loop. */
void llmr_http_server_shutdown(llmr_http_server *srv, int grace_ms);

/* --- request accessors (valid until the reply is finished) --- */
const char *llmr_http_method(const llmr_http_request *req);   /* "GET" ... */
const char *llmr_http_path(const llmr_http_request *req);     /* decoded path, no query */
/* The part of the path matched by a prefix route (the part after the prefix), e.g. "openai/gpt-oss-20b". */
const char *llmr_http_path_rest(const llmr_http_request *req);
const char *llmr_http_query(const llmr_http_request *req, const char *key); /* NULL if absent */
const char *llmr_http_header(const llmr_http_request *req, const char *name); /* NULL if absent */
const char *llmr_http_body(const llmr_http_request *req, size_t *len_out);    /* NUL-terminated */
const char *llmr_http_peer(const llmr_http_request *req);      /* client address */
/* Bearer token of the Authorization header, or NULL. */
const char *llmr_http_bearer(const llmr_http_request *req);
/* Parses the body as a JSON object. On failure replies 400 invalid_request_error itself and returns NULL. */
json_t *llmr_http_json_body(llmr_http_request *req);

/* Attaches a value to the request (e.g. the authenticated principal); freed by nobody. */
void llmr_http_set_user(llmr_http_request *req, void *p);
void *llmr_http_get_user(const llmr_http_request *req);

/* --- replies (exactly one per request) --- */
void llmr_http_add_header(llmr_http_request *req, const char *name, const char *value);
/* Sends body (stolen: decref'd here) as application/json. */
void llmr_http_reply_json(llmr_http_request *req, int status, json_t *body);
void llmr_http_reply_text(llmr_http_request *req, int status, const char *content_type, const char *body, size_t len);
/* Sends body (taken: freed here) as the reply; the caller may fill it with evbuffer_add_file
 * segments so large files stream from disk (sendfile) instead of memory. Content-Length is the
 * body's length unless the caller already added one. For HEAD only the headers go out (the caller
 * adds Content-Length itself). body may be NULL (empty). */
struct evbuffer;
void llmr_http_reply_buffer(llmr_http_request *req, int status, const char *content_type, struct evbuffer *body);
/* Sends len bytes of fd from offset (fd taken: closed here, also on failure) via
 * llmr_http_reply_buffer, with Content-Length len. */
void llmr_http_reply_file(llmr_http_request *req, int status, const char *content_type, int fd, long long offset,
                          long long len);
/* OpenAI-style error: {"error":{"message", "type", "code", "param", ...extra}}. extra (stolen, may be
 * NULL) is an object whose fields are merged into "error". code/param may be NULL (-> null). */
void llmr_http_reply_error(llmr_http_request *req, int status, const char *type, const char *code, const char *param,
                           json_t *extra, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* The error type OpenAI uses for a status: 400 invalid_request_error, 401 authentication_error,
 * 403 permission_error, 404 not_found_error, 429 rate_limit_error, 5xx server_error/api_error. */
const char *llmr_http_error_type(int status);

/* --- streaming (chunked transfer; e.g. server-sent events) --- */
void llmr_http_stream_start(llmr_http_request *req, int status, const char *content_type);
/* Sends a chunk now. Returns -1 once the client has gone (nothing is sent then), else 0. */
int llmr_http_stream_write(llmr_http_request *req, const void *data, size_t len);
/* Ends the stream and releases the request. */
void llmr_http_stream_end(llmr_http_request *req);
/* 1 once the client connection has closed. */
int llmr_http_client_gone(const llmr_http_request *req);
/* Looks at the client's socket without reading it (MSG_PEEK): evhttp notices a closed connection only
 * when it writes, so a handler that holds a request for long without writing (a buffered answer
 * being computed elsewhere) calls this from a timer. Returns 1 (and runs the client-gone callback,
 * once) when the client has closed or reset the connection, else 0. */
int llmr_http_probe_client_gone(llmr_http_request *req);
/* Calls fn(user) on the loop thread when the client disconnects before the reply is finished. */
void llmr_http_on_client_gone(llmr_http_request *req, void (*fn)(void *user), void *user);

#endif
