/* http_server.c — see http_server.h. */
#include "common/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

#define MAX_ROUTES 128

typedef struct {
    char *method;   /* NULL = any */
    char *pattern;  /* without the trailing '*' */
    int prefix;
    llmr_http_handler fn;
    void *user;
} route;

struct llmr_http_server {
    llmr_loop *loop;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    llmr_http_server_opts opts;
    route routes[MAX_ROUTES];
    int n_routes;
    int active;
    int port;
    int shutting_down;
    struct event *shutdown_timer;
};

struct llmr_http_request {
    llmr_http_server *srv;
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    char method[16];
    char *path;
    const char *rest;
    struct evkeyvalq query;
    char *body;
    size_t body_len;
    int gone;
    int streaming;
    void (*gone_fn)(void *);
    void *gone_user;
    void *user;
};

/* ------------------------------------------------------------------------ */

const char *llmr_http_error_type(int status) {
    switch (status) {
    case 400: case 405: case 409: case 413: case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    case 504: return "timeout_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static const char *method_name(enum evhttp_cmd_type t) {
    switch (t) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "OTHER";
}

static void maybe_finish_shutdown(llmr_http_server *srv) {
    if (srv->shutting_down && srv->active == 0) llmr_loop_stop(srv->loop);
}

static void on_conn_close(struct evhttp_connection *conn, void *arg) {
    (void)conn;
    llmr_http_request *r = arg;
    r->gone = 1;
    r->conn = NULL;
    if (r->gone_fn) {
        void (*fn)(void *) = r->gone_fn;
        r->gone_fn = NULL;
        fn(r->gone_user);
    }
}

/* Releases our wrapper once the reply has been handed to evhttp. */
static void request_done(llmr_http_request *r) {
    if (r->conn) evhttp_connection_set_closecb(r->conn, NULL, NULL);
    evhttp_clear_headers(&r->query);
    free(r->path);
    free(r->body);
    llmr_http_server *srv = r->srv;
    srv->active--;
    free(r);
    maybe_finish_shutdown(srv);
}

/* ------------------------------------------------------------------------ */

void llmr_http_add_header(llmr_http_request *r, const char *name, const char *value) {
    evhttp_add_header(evhttp_request_get_output_headers(r->req), name, value);
}

static void send_reply(llmr_http_request *r, int status, const char *ctype, const char *body, size_t len) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    if (ctype && !evhttp_find_header(h, "Content-Type")) evhttp_add_header(h, "Content-Type", ctype);
    if (evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD) {
        /* HEAD: the headers a GET would get, never the body (evhttp would send it and break keep-alive) */
        char cl[32];
        snprintf(cl, sizeof cl, "%zu", len);
        if (!evhttp_find_header(h, "Content-Length")) evhttp_add_header(h, "Content-Length", cl);
        len = 0;
    }
    struct evbuffer *buf = evbuffer_new();
    if (buf && len) evbuffer_add(buf, body, len);
    evhttp_send_reply(r->req, status, NULL, buf);
    if (buf) evbuffer_free(buf);
    request_done(r);
}

void llmr_http_reply_text(llmr_http_request *r, int status, const char *ctype, const char *body, size_t len) {
    send_reply(r, status, ctype, body, len);
}

void llmr_http_reply_buffer(llmr_http_request *r, int status, const char *ctype, struct evbuffer *body) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    if (ctype && !evhttp_find_header(h, "Content-Type")) evhttp_add_header(h, "Content-Type", ctype);
    if (body && evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD) { /* headers only */
        evbuffer_free(body);
        body = NULL;
    }
    evhttp_send_reply(r->req, status, NULL, body);
    if (body) evbuffer_free(body);
    request_done(r);
}

void llmr_http_reply_file(llmr_http_request *r, int status, const char *ctype, int fd, long long offset,
                          long long len) {
    char cl[32];
    snprintf(cl, sizeof cl, "%lld", len);
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    evhttp_remove_header(h, "Content-Length");
    evhttp_add_header(h, "Content-Length", cl);
    struct evbuffer *buf = evbuffer_new();
    if (!buf) { close(fd); llmr_http_reply_error(r, 500, NULL, NULL, NULL, NULL, "out of memory"); return; }
    /* a buffer that drains to a socket gets sendfile segments: the file is never read into memory */
    evbuffer_set_flags(buf, EVBUFFER_FLAG_DRAINS_TO_FD);
    if (evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD || len == 0) close(fd);
    else if (evbuffer_add_file(buf, fd, offset, len) != 0) { /* closes fd itself only on success */
        close(fd);
        evbuffer_free(buf);
        evhttp_remove_header(h, "Content-Length");
        llmr_http_reply_error(r, 500, NULL, NULL, NULL, NULL, "cannot send file");
        return;
    }
    llmr_http_reply_buffer(r, status, ctype, buf);
}

void llmr_http_reply_json(llmr_http_request *r, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        send_reply(r, 500, "application/json",
                   "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":null,\"param\":null}}", 84);
        return;
    }
    size_t n = strlen(text);
    text[n] = 0;
    send_reply(r, status, "application/json", text, n);
    free(text);
}

void llmr_http_reply_error(llmr_http_request *r, int status, const char *type, const char *code, const char *param,
                           json_t *extra, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s, s:s, s:o, s:o}", "message", msg, "type", type ? type : llmr_http_error_type(status),
                          "code", code ? json_string(code) : json_null(), "param", param ? json_string(param) : json_null());
    if (extra && e) json_object_update(e, extra);
    json_decref(extra);
    if (status >= 500) log_warn("%s %s -> %d %s", r->method, r->path, status, msg);
    else log_debug("%s %s -> %d %s", r->method, r->path, status, msg);
    llmr_http_reply_json(r, status, json_pack("{s:o}", "error", e));
}

void llmr_http_stream_start(llmr_http_request *r, int status, const char *ctype) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    if (ctype) evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-cache");
    r->streaming = 1;
    evhttp_send_reply_start(r->req, status, NULL);
}

int llmr_http_stream_write(llmr_http_request *r, const void *data, size_t len) {
    if (r->gone) return -1;
    struct evbuffer *buf = evbuffer_new();
    if (!buf) return -1;
    evbuffer_add(buf, data, len);
    evhttp_send_reply_chunk(r->req, buf);
    evbuffer_free(buf);
    return 0;
}

void llmr_http_stream_end(llmr_http_request *r) {
    evhttp_send_reply_end(r->req); /* frees a request whose connection is gone */
    request_done(r);
}

int llmr_http_client_gone(const llmr_http_request *r) { return r->gone; }

int llmr_http_probe_client_gone(llmr_http_request *r) {
    if (r->gone) return 1;
    struct bufferevent *bev = r->conn ? evhttp_connection_get_bufferevent(r->conn) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0) return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return 0;
    r->gone = 1; /* EOF or a reset: the client is gone */
    if (r->gone_fn) {
        void (*fn)(void *) = r->gone_fn;
        r->gone_fn = NULL;
        fn(r->gone_user);
    }
    return 1;
}

void llmr_http_on_client_gone(llmr_http_request *r, void (*fn)(void *), void *user) {
    r->gone_fn = fn;
    r->gone_user = user;
    if (r->gone && fn) {
        r->gone_fn = NULL;
        fn(user);
    }
}

/* ------------------------------------------------------------------------ */

const char *llmr_http_method(const llmr_http_request *r) { return r->method; }
const char *llmr_http_path(const llmr_http_request *r) { return r->path; }
const char *llmr_http_path_rest(const llmr_http_request *r) { return r->rest ? r->rest : ""; }
const char *llmr_http_query(const llmr_http_request *r, const char *key) { return evhttp_find_header(&r->query, key); }
const char *llmr_http_header(const llmr_http_request *r, const char *name) {
    return evhttp_find_header(evhttp_request_get_input_headers(r->req), name);
}
const char *llmr_http_body(const llmr_http_request *r, size_t *len) {
    if (len) *len = r->body_len;
    return r->body;
}
void llmr_http_set_user(llmr_http_request *r, void *p) { r->user = p; }
void *llmr_http_get_user(const llmr_http_request *r) { return r->user; }

const char *llmr_http_peer(const llmr_http_request *r) {
    char *addr = NULL;
    ev_uint16_t port = 0;
    struct evhttp_connection *c = evhttp_request_get_connection(r->req);
    if (c) evhttp_connection_get_peer(c, &addr, &port);
    return addr ? addr : "?";
}

const char *llmr_http_bearer(const llmr_http_request *r) {
    const char *a = llmr_http_header(r, "Authorization");
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) return NULL;
    a += 7;
    while (*a == ' ') a++;
    return *a ? a : NULL;
}

json_t *llmr_http_json_body(llmr_http_request *r) {
    if (r->body_len == 0) {
        llmr_http_reply_error(r, 400, NULL, "invalid_json", NULL, NULL, "request body is empty; expected a JSON object");
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        llmr_http_reply_error(r, 400, NULL, "invalid_json", NULL, NULL, "request body is not valid JSON: %s (line %d, column %d)",
                              je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        llmr_http_reply_error(r, 400, NULL, "invalid_json", NULL, NULL, "request body must be a JSON object");
        return NULL;
    }
    return j;
}

/* ------------------------------------------------------------------------ */

/* Finds the best route for path; *path_known tells whether any method matched the path. */
static route *match(llmr_http_server *srv, const char *method, const char *path, int *path_known, char *allow, size_t allow_len) {
    route *best = NULL;
    size_t best_len = 0;
    *path_known = 0;
    allow[0] = 0;
    for (int i = 0; i < srv->n_routes; i++) {
        route *rt = &srv->routes[i];
        size_t pl = strlen(rt->pattern);
        int hit = rt->prefix ? strncmp(path, rt->pattern, pl) == 0 : strcmp(path, rt->pattern) == 0;
        if (!hit) continue;
        *path_known = 1;
        if (rt->method && strlen(allow) + strlen(rt->method) + 3 < allow_len && !strstr(allow, rt->method)) {
            if (allow[0]) strcat(allow, ", ");
            strcat(allow, rt->method);
        }
        if (rt->method && strcmp(rt->method, method) != 0 && !(strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0))
            continue;
        size_t score = pl + (rt->prefix ? 0 : 1) + (rt->method ? 0 : 0);
        if (!best || score > best_len) { best = rt; best_len = score; }
    }
    return best;
}

static void dispatch(struct evhttp_request *req, void *arg) {
    llmr_http_server *srv = arg;
    llmr_http_request *r = calloc(1, sizeof *r);
    if (!r) { evhttp_send_error(req, 500, "out of memory"); return; }
    r->srv = srv;
    r->req = req;
    TAILQ_INIT(&r->query);
    srv->active++;
    snprintf(r->method, sizeof r->method, "%s", method_name(evhttp_request_get_command(req)));
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw_path = uri ? evhttp_uri_get_path(uri) : NULL;
    size_t path_len = 0;
    r->path = evhttp_uridecode(raw_path && *raw_path ? raw_path : "/", 0, &path_len);
    /* "%00" decodes to a NUL that would cut the path short: "/f.json%00x" must not reach /f.json. */
    int nul_in_path = r->path && strlen(r->path) != path_len;
    if (!r->path) r->path = strdup("/");
    const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
    if (q) evhttp_parse_query_str(q, &r->query);
    r->conn = evhttp_request_get_connection(req);
    if (r->conn) evhttp_connection_set_closecb(r->conn, on_conn_close, r);

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    r->body_len = evbuffer_get_length(in);
    if (r->body_len > srv->opts.max_body) {
        llmr_http_reply_error(r, 413, NULL, "request_too_large", NULL, NULL, "request body of %zu bytes exceeds the %zu-byte limit",
                              r->body_len, srv->opts.max_body);
        return;
    }
    if (nul_in_path) {
        llmr_http_reply_error(r, 400, NULL, "invalid_path", NULL, NULL, "request path contains an encoded NUL byte (%%00)");
        return;
    }
    /* Handlers echo the path in JSON (which must be UTF-8): "%ff" would otherwise end in a 500. */
    json_t *probe = json_string(r->path);
    if (!probe) {
        llmr_http_reply_error(r, 400, NULL, "invalid_path", NULL, NULL, "request path is not valid UTF-8 once %%-decoded");
        return;
    }
    json_decref(probe);
    r->body = malloc(r->body_len + 1);
    if (!r->body) { llmr_http_reply_error(r, 500, NULL, NULL, NULL, NULL, "out of memory"); return; }
    evbuffer_copyout(in, r->body, r->body_len);
    r->body[r->body_len] = 0;

    int known;
    char allow[128];
    route *rt = match(srv, r->method, r->path, &known, allow, sizeof allow);
    if (!rt) {
        if (known) {
            llmr_http_add_header(r, "Allow", allow);
            llmr_http_reply_error(r, 405, NULL, "method_not_allowed", NULL, NULL, "method %s is not allowed on %s (allowed: %s)",
                                  r->method, r->path, allow);
        } else {
            llmr_http_reply_error(r, 404, NULL, "unknown_route", NULL, NULL, "no route for %s %s", r->method, r->path);
        }
        return;
    }
    r->rest = rt->prefix ? r->path + strlen(rt->pattern) : NULL;
    rt->fn(r, rt->user);
}

/* ------------------------------------------------------------------------ */

static int parse_listen(const char *listen, char *host, size_t hl, int *port) {
    const char *colon = strrchr(listen, ':');
    if (!colon) return -1;
    size_t n = (size_t)(colon - listen);
    if (listen[0] == '[' && n >= 2 && listen[n - 1] == ']') { listen++; n -= 2; }
    if (n == 0 || n >= hl) return -1;
    memcpy(host, listen, n);
    host[n] = 0;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535) return -1;
    *port = (int)p;
    return 0;
}

llmr_http_server *llmr_http_server_create(llmr_loop *loop, const llmr_http_server_opts *opts, char *err, size_t es) {
    char host[256];
    int port;
    if (!opts || !opts->listen || parse_listen(opts->listen, host, sizeof host, &port) != 0) {
        snprintf(err, es, "invalid listen address '%s' (expected HOST:PORT)", opts && opts->listen ? opts->listen : "");
        return NULL;
    }
    llmr_http_server *srv = calloc(1, sizeof *srv);
    if (!srv) { snprintf(err, es, "out of memory"); return NULL; }
    srv->loop = loop;
    srv->opts = *opts;
    if (!srv->opts.max_body) srv->opts.max_body = 1u << 20;
    if (!srv->opts.max_headers) srv->opts.max_headers = 64u << 10;
    if (!srv->opts.timeout_s) srv->opts.timeout_s = 120;
    srv->http = evhttp_new(llmr_loop_base(loop));
    if (!srv->http) { snprintf(err, es, "evhttp_new failed"); free(srv); return NULL; }
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                              EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(srv->http, (ev_ssize_t)(4 * srv->opts.max_body + 1));
    evhttp_set_max_headers_size(srv->http, (ev_ssize_t)srv->opts.max_headers);
    evhttp_set_timeout(srv->http, srv->opts.timeout_s);
    evhttp_set_gencb(srv->http, dispatch, srv);
    errno = 0;
    srv->sock = evhttp_bind_socket_with_handle(srv->http, host, (ev_uint16_t)port);
    if (!srv->sock) {
        snprintf(err, es, "cannot listen on %s: %s", opts->listen, errno ? strerror(errno) : "bind failed");
        evhttp_free(srv->http);
        free(srv);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    evutil_socket_t fd = evhttp_bound_socket_get_fd(srv->sock);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return srv;
}

void llmr_http_server_destroy(llmr_http_server *srv) {
    if (!srv) return;
    if (srv->shutdown_timer) event_free(srv->shutdown_timer);
    evhttp_free(srv->http);
    for (int i = 0; i < srv->n_routes; i++) {
        free(srv->routes[i].method);
        free(srv->routes[i].pattern);
    }
    free(srv);
}

int llmr_http_server_port(const llmr_http_server *srv) { return srv->port; }
int llmr_http_server_active(const llmr_http_server *srv) { return srv->active; }

int llmr_http_server_route(llmr_http_server *srv, const char *method, const char *pattern, llmr_http_handler fn, void *user) {
    if (srv->n_routes >= MAX_ROUTES) return -1;
    route *rt = &srv->routes[srv->n_routes];
    size_t n = strlen(pattern);
    rt->prefix = n > 0 && pattern[n - 1] == '*';
    rt->pattern = strndup(pattern, rt->prefix ? n - 1 : n);
    rt->method = method ? strdup(method) : NULL;
    if (!rt->pattern || (method && !rt->method)) return -1;
    rt->fn = fn;
    rt->user = user;
    srv->n_routes++;
    return 0;
}

static void on_grace_over(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    llmr_http_server *srv = arg;
    log_warn("shutdown grace period over with %d request(s) still in flight", srv->active);
    llmr_loop_stop(srv->loop);
}

void llmr_http_server_shutdown(llmr_http_server *srv, int grace_ms) {
    if (srv->shutting_down) return;
    srv->shutting_down = 1;
    if (srv->sock) {
        evhttp_del_accept_socket(srv->http, srv->sock);
        srv->sock = NULL;
    }
    log_info("no longer accepting connections; %d request(s) in flight", srv->active);
    if (srv->active == 0) { llmr_loop_stop(srv->loop); return; }
    srv->shutdown_timer = evtimer_new(llmr_loop_base(srv->loop), on_grace_over, srv);
    struct timeval tv = {grace_ms / 1000, (grace_ms % 1000) * 1000};
    if (srv->shutdown_timer) evtimer_add(srv->shutdown_timer, &tv);
}
