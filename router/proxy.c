/* proxy.c — see proxy.h. The worker splits the node's SSE byte stream into events and queues them;
 * a posted drain on the loop thread delivers the queue in order. References: the worker holds one,
 * each posted drain one; the last one out frees. */
#include "router/proxy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

typedef struct item { char *text; struct item *next; } item;

struct router_proxy {
    llmr_loop *loop;
    llmr_httpc *http;
    router_node_target t;
    char *body;
    router_proxy_event_fn on_event;
    router_proxy_done_fn on_done;
    void *user;
    atomic_int cancel;
    pthread_mutex_t mu;
    int refs;
    item *head, *tail;          /* under mu */
    int ended;                  /* under mu: the worker finished (after its last item) */
    int done_delivered;         /* loop only */
    router_proxy_result res;    /* worker writes before queueing the end; loop reads after */
    /* worker-only SSE parse state */
    char *buf; size_t len, cap;
    long status;
    char errbody[512]; size_t errlen;
};

static atomic_int g_active;

int router_proxy_active(void) { return atomic_load(&g_active); }

static void unref(router_proxy *p) {
    pthread_mutex_lock(&p->mu);
    int left = --p->refs;
    pthread_mutex_unlock(&p->mu);
    if (left) return;
    for (item *i = p->head, *n; i; i = n) { n = i->next; free(i->text); free(i); }
    pthread_mutex_destroy(&p->mu);
    free(p->body);
    free(p->buf);
    free(p);
}

/* Loop thread: delivers what is queued, then the end once the worker finished. */
static void drain(void *arg) {
    router_proxy *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        item *i = p->head;
        if (i) { p->head = i->next; if (!p->head) p->tail = NULL; }
        int ended = p->ended;
        pthread_mutex_unlock(&p->mu);
        if (!i) {
            if (ended && !p->done_delivered) {
                p->done_delivered = 1;
                p->res.cancelled = atomic_load(&p->cancel) != 0;
                p->on_done(p->user, &p->res);
            }
            break;
        }
        if (!p->done_delivered) {
            json_t *ev = json_loads(i->text, 0, NULL);
            if (json_is_object(ev)) { p->res.events++; p->on_event(p->user, ev); }
            json_decref(ev);
        }
        free(i->text);
        free(i);
    }
    unref(p);
}

/* Worker: queues text (taken; NULL = the end) and posts a drain. */
static void queue(router_proxy *p, char *text) {
    item *i = text ? calloc(1, sizeof *i) : NULL;
    if (text && !i) { free(text); return; } /* out of memory: the event is lost, the stream goes on */
    pthread_mutex_lock(&p->mu);
    if (i) {
        i->text = text;
        if (p->tail) p->tail->next = i; else p->head = i;
        p->tail = i;
    } else {
        p->ended = 1;
    }
    p->refs++;
    pthread_mutex_unlock(&p->mu);
    if (llmr_loop_post(p->loop, drain, p) != 0) unref(p);
}

static int on_response(void *user, const llmr_httpc_resp *resp) {
    router_proxy *p = user;
    p->status = resp->status;
    return atomic_load(&p->cancel) ? 1 : 0;
}

/* Splits complete "data: ...\n\n" events out of the buffer. */
static void parse_events(router_proxy *p) {
    size_t start = 0;
    for (;;) {
        char *end = NULL;
        for (size_t i = start; i + 1 < p->len; i++)
            if (p->buf[i] == '\n' && p->buf[i + 1] == '\n') { end = p->buf + i; break; }
        if (!end) break;
        *end = 0;
        for (char *line = p->buf + start; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            if (!strncmp(line, "data: ", 6)) {
                char *t = strdup(line + 6);
                if (t) queue(p, t);
            }
            line = nl ? nl + 1 : NULL;
        }
        start = (size_t)(end - p->buf) + 2;
    }
    memmove(p->buf, p->buf + start, p->len - start);
    p->len -= start;
}

static int on_chunk(void *user, const char *data, size_t len) {
    router_proxy *p = user;
    if (atomic_load(&p->cancel)) return 1;
    if (p->status != 200) { /* an HTTP error: keep the start of the body for the message */
        size_t room = sizeof p->errbody - 1 - p->errlen;
        size_t k = len < room ? len : room;
        memcpy(p->errbody + p->errlen, data, k);
        p->errlen += k;
        p->errbody[p->errlen] = 0;
        return 0;
    }
    if (p->len + len + 1 > p->cap) {
        size_t nc = (p->len + len + 1) * 2;
        char *nb = realloc(p->buf, nc);
        if (!nb) return 1;
        p->buf = nb;
        p->cap = nc;
    }
    memcpy(p->buf + p->len, data, len);
    p->len += len;
    parse_events(p);
    return 0;
}

static void *worker(void *arg) {
    router_proxy *p = arg;
    char url[400], auth[200];
    snprintf(url, sizeof url, "%s/v0/generate", p->t.base_url);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", p->t.token);
    const char *headers[] = {auth, "Accept: text/event-stream", NULL};
    llmr_httpc_req rq = {.method = "POST", .url = url, .body = p->body, .headers = headers, .no_retry = 1,
                         .cancel = &p->cancel};
    char err[1024] = "";
    llmr_httpc_resp resp = {0};
    llmr_httpc_status st = llmr_httpc_stream(p->http, &rq, on_response, on_chunk, p, &resp, err, sizeof err);
    llmr_httpc_resp_free(&resp);
    p->res.st = st;
    p->res.http_status = p->status;
    if (st != LLMR_HTTPC_OK) snprintf(p->res.message, sizeof p->res.message, "node %.60s: %.900s", p->t.id, err);
    else if (p->status != 200)
        snprintf(p->res.message, sizeof p->res.message, "node %s answered %ld: %.400s", p->t.id, p->status, p->errbody);
    queue(p, NULL);
    atomic_fetch_sub(&g_active, 1);
    unref(p);
    return NULL;
}

router_proxy *router_proxy_start(llmr_loop *loop, llmr_httpc *http, const router_node_target *t, const char *body,
                                 router_proxy_event_fn on_event, router_proxy_done_fn on_done, void *user, char *err,
                                 size_t es) {
    router_proxy *p = calloc(1, sizeof *p);
    if (!p || !(p->body = strdup(body))) { free(p); snprintf(err, es, "out of memory"); return NULL; }
    p->loop = loop;
    p->http = http;
    p->t = *t;
    p->on_event = on_event;
    p->on_done = on_done;
    p->user = user;
    p->refs = 1;
    pthread_mutex_init(&p->mu, NULL);
    atomic_fetch_add(&g_active, 1);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, worker, p);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&g_active, 1);
        snprintf(err, es, "cannot start a proxy thread for node %s", t->id);
        pthread_mutex_destroy(&p->mu);
        free(p->body);
        free(p);
        return NULL;
    }
    return p;
}

void router_proxy_cancel(router_proxy *p) {
    if (p) atomic_store(&p->cancel, 1);
}
