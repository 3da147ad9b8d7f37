/* proxy.h — one inference request forwarded to a node: POST /v0/generate, SSE events back.
 *
 * A worker thread runs the HTTP exchange with common/http_client (node token, no retries: failover
 * is the API's decision); every "data:" event the node sends is handed to the loop thread at once
 * (on_event, in order), then on_done exactly once with how it ended. router_proxy_cancel (the client
 * left) aborts the transfer: the node sees its connection close and cancels the engine session.
 * The proxy frees itself after on_done returned. */
#ifndef ROUTER_PROXY_H
#define ROUTER_PROXY_H

#include <jansson.h>
#include <stddef.h>

#include "common/event_loop.h"
#include "common/http_client.h"
#include "router/nodes.h"

typedef struct router_proxy router_proxy; /* opaque */

typedef struct router_proxy_result {
    llmr_httpc_status st;   /* transport outcome (OK when an HTTP answer arrived) */
    long http_status;       /* the node's status, 0 if none arrived */
    int events;             /* events delivered to on_event */
    int cancelled;          /* router_proxy_cancel was called */
    char message[1024];     /* the cause when it failed (URL, transport error, or the node's body) */
} router_proxy_result;

/* Loop thread: one node event (borrowed, a JSON object). */
typedef void (*router_proxy_event_fn)(void *user, json_t *ev);
/* Loop thread: the exchange ended. */
typedef void (*router_proxy_done_fn)(void *user, const router_proxy_result *r);

/* Starts the exchange with the node t, sending body (copied). NULL with the cause in err when the
 * thread cannot start (no callback will come). */
router_proxy *router_proxy_start(llmr_loop *loop, llmr_httpc *http, const router_node_target *t, const char *body,
                                 router_proxy_event_fn on_event, router_proxy_done_fn on_done, void *user, char *err,
                                 size_t err_size);
/* Loop thread, any time before on_done: abort (on_done still comes, with cancelled set). */
void router_proxy_cancel(router_proxy *p);

/* Threads still running (shutdown waits for 0). */
int router_proxy_active(void);

#endif
