/* balancer.h — which node serves an inference request, and the bounded wait when all are full.
 *
 * Pick (router_nodes_acquire_ex): among online nodes where the model is ready, the one with the
 * fewest requests outstanding through this router, ties round-robin; a node holding its stated
 * max_concurrency is full. When every candidate is full the request waits in a FIFO queue of at most
 * queue_max entries (more: 429 + Retry-After) for at most wait_ms (then 504). A release (a request
 * finished on a node) hands the freed slot to the oldest waiter that can use it.
 *
 * Everything here runs on the loop thread: no locks, and callbacks run on the loop thread too. */
#ifndef ROUTER_BALANCER_H
#define ROUTER_BALANCER_H

#include "common/event_loop.h"
#include "router/nodes.h"

typedef struct router_balancer router_balancer; /* opaque */
typedef struct router_bal_wait router_bal_wait; /* one queued request */

/* Outcomes, as the HTTP status the API answers with (0 = a node was acquired). */
enum {
    ROUTER_BAL_OK = 0,
    ROUTER_BAL_QUEUED = 1,       /* acquire only: the callback will tell */
    ROUTER_BAL_NO_MODEL = 404,   /* the model is ready on no online node */
    ROUTER_BAL_QUEUE_FULL = 429, /* all nodes full and the queue too */
    ROUTER_BAL_NO_NODE = 503,    /* no node is online */
    ROUTER_BAL_TIMEOUT = 504,    /* waited wait_ms for a free slot */
};

/* Called once per queued request with ROUTER_BAL_OK (t filled: call router_balancer_release
 * later), or ROUTER_BAL_TIMEOUT / NO_MODEL / NO_NODE (t NULL). */
typedef void (*router_bal_fn)(void *user, int outcome, const router_node_target *t);

/* queue_max >= 0 (0 = never wait), wait_ms > 0. NULL on allocation failure. */
router_balancer *router_balancer_create(llmr_loop *loop, router_nodes *nodes, int queue_max, int wait_ms);
/* Fails every waiter with ROUTER_BAL_NO_NODE, then frees. Accepts NULL. */
void router_balancer_destroy(router_balancer *b);

/* Tries to pick a node for model_id, skipping exclude (may be NULL). ROUTER_BAL_OK with *t filled;
 * ROUTER_BAL_QUEUED with *w set (fn will be called; cancel with router_balancer_cancel); or an
 * error outcome (404/429/503). When may_wait is 0, a full cluster answers ROUTER_BAL_QUEUE_FULL. */
int router_balancer_acquire(router_balancer *b, const char *model_id, const char *exclude, int may_wait,
                            router_node_target *t, router_bal_fn fn, void *user, router_bal_wait **w);
/* Drops a queued request (its client left); fn is not called. */
void router_balancer_cancel(router_balancer *b, router_bal_wait *w);
/* A request on node_id ended: frees its slot and serves waiters. */
void router_balancer_release(router_balancer *b, const char *node_id);
/* Requests waiting now (the router_queue_depth metric). */
int router_balancer_queue_depth(const router_balancer *b);
/* Seconds a client told 429 should wait (Retry-After). */
int router_balancer_retry_after_s(const router_balancer *b);

#endif
