/* A tiny scripted HTTP/1.1 server for client tests (header-only; test code only).
 *
 * One thread accepts connections on 127.0.0.1:<ephemeral> one at a time, reads one request (headers
 * plus a Content-Length body), records it, and calls the test's handler, which writes whatever bytes
 * the scenario needs (a good response, a 503, half a body, nothing at all) and returns; the server
 * then closes the connection. This lets tests produce exactly the failures a real server cannot be
 * asked for: dropped connections, stalls, ignored Range headers, wrong Content-Range. */
#ifndef LLMR_SCRIPTED_SERVER_H
#define LLMR_SCRIPTED_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define TS_MAX_REQS 64

typedef struct ts_req {
    int n;              /* 0-based index of this connection */
    char method[16];
    char path[1024];
    char *raw;          /* request line + headers */
    char *body;
    size_t body_len;
} ts_req;

typedef struct tsrv tsrv;
typedef void (*ts_handler)(tsrv *s, int fd, const ts_req *r);

struct tsrv {
    int lfd, port;
    pthread_t th;
    atomic_int stop;   /* set by ts_stop, read by the accept thread */
    ts_handler handler;
    void *ctx;                      /* for the handler */
    const char *greeting;           /* if set: written on accept, then the connection closes unread */
    pthread_mutex_t mu;
    int nreqs;
    char *reqs[TS_MAX_REQS];        /* raw request heads, in order */
};

/* Value of header name in raw request head (static buffer per call site is not needed: copies). */
static inline int ts_header(const char *raw, const char *name, char *out, size_t out_size) {
    size_t nl = strlen(name);
    for (const char *p = strstr(raw, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *l = p + 2;
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ') v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= out_size) n = out_size - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return 1;
        }
    }
    return 0;
}

static inline void ts_write(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        len -= (size_t)w;
    }
}

static inline void ts_printf(int fd, const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) ts_write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A complete response with a body and Connection: close. extra: more header lines ending in \r\n. */
static inline void ts_reply(int fd, int status, const char *extra, const char *body, size_t len) {
    ts_printf(fd, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status, len,
              extra ? extra : "");
    ts_write(fd, body, len);
}

static void *ts_main(void *arg) {
    tsrv *s = arg;
    for (int n = 0; !s->stop; n++) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) break;
        if (s->greeting) { /* e.g. plain HTTP where the client expects TLS */
            ts_write(fd, s->greeting, strlen(s->greeting));
            shutdown(fd, SHUT_WR);
            close(fd);
            continue;
        }
        char *buf = malloc(1 << 20);
        size_t len = 0;
        char *end = NULL;
        while (len < (1 << 20) - 1) {
            ssize_t r = recv(fd, buf + len, (1 << 20) - 1 - len, 0);
            if (r <= 0) break;
            len += (size_t)r;
            buf[len] = 0;
            if ((end = strstr(buf, "\r\n\r\n"))) {
                char cl[32];
                size_t head = (size_t)(end - buf) + 4;
                size_t want = 0;
                *end = 0;
                if (ts_header(buf, "Content-Length", cl, sizeof cl)) want = strtoul(cl, NULL, 10);
                *end = '\r';
                if (len >= head + want) break;
            }
        }
        if (!end) { free(buf); close(fd); continue; }
        ts_req r = {.n = n};
        *end = 0;
        r.raw = buf;
        r.body = end + 4;
        r.body_len = len - (size_t)(end + 4 - buf);
        sscanf(buf, "%15s %1023s", r.method, r.path);
        pthread_mutex_lock(&s->mu);
        if (s->nreqs < TS_MAX_REQS) s->reqs[s->nreqs++] = strdup(buf);
        pthread_mutex_unlock(&s->mu);
        if (!s->stop) s->handler(s, fd, &r);
        shutdown(fd, SHUT_WR);
        close(fd);
        free(buf);
    }
    return NULL;
}

/* Starts the server; returns NULL on failure. */
static inline tsrv *ts_start(ts_handler h, void *ctx) {
    tsrv *s = calloc(1, sizeof *s);
    s->handler = h;
    s->ctx = ctx;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 16) != 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &al) != 0) {
        close(s->lfd);
        free(s);
        return NULL;
    }
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, ts_main, s);
    return s;
}

static inline int ts_count(tsrv *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Raw head of request i (0-based) or "" if none. */
static inline const char *ts_request(tsrv *s, int i) {
    pthread_mutex_lock(&s->mu);
    const char *r = i < s->nreqs ? s->reqs[i] : "";
    pthread_mutex_unlock(&s->mu);
    return r;
}

static inline void ts_stop(tsrv *s) {
    if (!s) return;
    s->stop = 1;
    shutdown(s->lfd, SHUT_RDWR); /* wakes accept() */
    pthread_join(s->th, NULL);
    close(s->lfd);
    for (int i = 0; i < s->nreqs; i++) free(s->reqs[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* "http://127.0.0.1:PORT" + path into a static buffer. */
static inline const char *ts_url(tsrv *s, const char *path) {
    static __thread char buf[2048];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d%s", s->port, path);
    return buf;
}

#endif
