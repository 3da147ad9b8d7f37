/* balancer.c — see balancer.h. The queue is a doubly linked FIFO; each waiter has its own timer. */
#include "router/balancer.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct router_bal_wait {
    router_balancer *b;
    char model[256];
    router_bal_fn fn;
    void *user;
    struct event *timer;
    router_bal_wait *prev, *next;
};

struct router_balancer {
    llmr_loop *loop;
    router_nodes *nodes;
    int queue_max, wait_ms, depth;
    router_bal_wait *head, *tail;
};

router_balancer *router_balancer_create(llmr_loop *loop, router_nodes *nodes, int queue_max, int wait_ms) {
    router_balancer *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->loop = loop;
    b->nodes = nodes;
    b->queue_max = queue_max < 0 ? 0 : queue_max;
    b->wait_ms = wait_ms > 0 ? wait_ms : 30000;
    return b;
}

static void unlink_wait(router_balancer *b, router_bal_wait *w) {
    if (w->prev) w->prev->next = w->next; else b->head = w->next;
    if (w->next) w->next->prev = w->prev; else b->tail = w->prev;
    b->depth--;
    if (w->timer) event_free(w->timer);
    free(w);
}

void router_balancer_destroy(router_balancer *b) {
    if (!b) return;
    while (b->head) {
        router_bal_wait *w = b->head;
        router_bal_fn fn = w->fn;
        void *user = w->user;
        unlink_wait(b, w);
        fn(user, ROUTER_BAL_NO_NODE, NULL);
    }
    free(b);
}

static int outcome_of(int st) {
    switch (st) {
    case ROUTER_NODES_OK: return ROUTER_BAL_OK;
    case ROUTER_NODES_EBUSY: return ROUTER_BAL_QUEUE_FULL;
    case ROUTER_NODES_EOFFLINE: return ROUTER_BAL_NO_NODE;
    default: return ROUTER_BAL_NO_MODEL;
    }
}

static void on_wait_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    router_bal_wait *w = arg;
    router_bal_fn fn = w->fn;
    void *user = w->user;
    log_info("balancer: %s waited %d ms for a free node: giving up (504)", w->model, w->b->wait_ms);
    unlink_wait(w->b, w);
    fn(user, ROUTER_BAL_TIMEOUT, NULL);
}

int router_balancer_acquire(router_balancer *b, const char *model_id, const char *exclude, int may_wait,
                            router_node_target *t, router_bal_fn fn, void *user, router_bal_wait **wout) {
    if (wout) *wout = NULL;
    /* Waiters go first: a newcomer may not overtake the queue. */
    int st = b->head ? ROUTER_NODES_EBUSY : router_nodes_acquire_ex(b->nodes, model_id, exclude, t);
    if (st == ROUTER_NODES_EBUSY && b->head && !router_nodes_model_ready(b->nodes, model_id))
        st = ROUTER_NODES_ENOTFOUND;
    int out = outcome_of(st);
    if (out != ROUTER_BAL_QUEUE_FULL) return out;
    if (!may_wait || b->depth >= b->queue_max || !fn) return ROUTER_BAL_QUEUE_FULL;
    router_bal_wait *w = calloc(1, sizeof *w);
    if (!w) return ROUTER_BAL_QUEUE_FULL;
    w->b = b;
    snprintf(w->model, sizeof w->model, "%s", model_id);
    w->fn = fn;
    w->user = user;
    w->timer = evtimer_new(llmr_loop_base(b->loop), on_wait_timeout, w);
    struct timeval tv = {b->wait_ms / 1000, (b->wait_ms % 1000) * 1000};
    if (!w->timer || evtimer_add(w->timer, &tv) != 0) {
        if (w->timer) event_free(w->timer);
        free(w);
        return ROUTER_BAL_QUEUE_FULL;
    }
    w->prev = b->tail;
    if (b->tail) b->tail->next = w; else b->head = w;
    b->tail = w;
    b->depth++;
    if (wout) *wout = w;
    return ROUTER_BAL_QUEUED;
}

void router_balancer_cancel(router_balancer *b, router_bal_wait *w) {
    if (b && w) unlink_wait(b, w);
}

/* Hands free slots to waiters, oldest first; a waiter whose model vanished is failed. A callback
 * may re-enter the balancer (release, acquire), so the scan restarts after each one. */
static void serve_waiters(router_balancer *b) {
    for (int again = 1; again;) {
        again = 0;
        for (router_bal_wait *w = b->head; w; w = w->next) {
            router_node_target t;
            int st = router_nodes_acquire_ex(b->nodes, w->model, NULL, &t);
            if (st == ROUTER_NODES_EBUSY) continue;
            router_bal_fn fn = w->fn;
            void *user = w->user;
            unlink_wait(b, w);
            fn(user, outcome_of(st), st == ROUTER_NODES_OK ? &t : NULL);
            again = 1;
            break;
        }
    }
}

void router_balancer_release(router_balancer *b, const char *node_id) {
    router_nodes_release(b->nodes, node_id);
    serve_waiters(b);
}

int router_balancer_queue_depth(const router_balancer *b) { return b ? b->depth : 0; }

int router_balancer_retry_after_s(const router_balancer *b) {
    int s = b->wait_ms / 1000 / 4;
    return s < 1 ? 1 : s;
}
