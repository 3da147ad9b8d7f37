/* router_client.h — the node's side of the router connection: registration and authenticated calls.
 *
 * Registration (POST /v0/nodes, schema/node-register.request|response) is retried with exponential
 * backoff (0.5 s doubling to 30 s) until the router answers 201: a router that is down, restarting or
 * refusing (403 for a GPU-less node without --allow-cpu-nodes: its message is logged) never makes the
 * node exit. The node id and token are persisted in STATE_DIR/node.json (mode 0600, written
 * atomically) and the id is sent again on the next registration so the router keeps the node's
 * identity across restarts. Any call answered 401 marks the token stale; the heartbeat thread then
 * registers again.
 *
 * Thread-safety: all functions may be called from any thread; the token is copied under a lock. */
#ifndef LLMR_NODE_ROUTER_CLIENT_H
#define LLMR_NODE_ROUTER_CLIENT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/http_client.h"

typedef struct llmr_router_settings {
    int allow_cpu_engines;     /* router runs with --allow-cpu-nodes */
    int heartbeat_interval_s;  /* from the router; the node's flag wins when set explicitly */
    int sync_interval_s;       /* 0 when the router did not say */
} llmr_router_settings;

typedef struct llmr_router_client llmr_router_client; /* opaque, thread-safe */

/* Builds the registration body (without node_id, which the client adds). Returns a new reference. */
typedef json_t *(*llmr_register_body_fn)(void *user);

/* router_url: "http://host:port" (a trailing '/' is dropped). state_dir is created when absent and
 * node.json read from it when present (a corrupt file is logged and ignored). NULL with the cause. */
llmr_router_client *llmr_router_client_create(const char *router_url, const char *state_dir,
                                              llmr_register_body_fn body_fn, void *body_user, char *err,
                                              size_t err_size);
/* Accepts NULL. No call may be in flight. */
void llmr_router_client_destroy(llmr_router_client *rc);

/* Registers, retrying until it succeeds or *stop becomes non-zero. Returns 0 when registered, -1
 * when stopped. Each failure is logged with the router's message. */
int llmr_router_client_register(llmr_router_client *rc, const atomic_int *stop);

/* The router's node join key (--join-key), sent as bearer on every registration; NULL or "" = none
 * (the router then must run without --node-join-key). Copied. Call before the first registration. */
void llmr_router_client_set_join_key(llmr_router_client *rc, const char *key);

/* 1 while a token is held and no call has been answered 401 since. */
int llmr_router_client_registered(llmr_router_client *rc);
/* Drops the token (after a 401): the next register call registers again. */
void llmr_router_client_invalidate(llmr_router_client *rc);

/* Copies of the node id / token ("" when none). */
void llmr_router_client_node_id(llmr_router_client *rc, char *buf, size_t size);
void llmr_router_client_settings(llmr_router_client *rc, llmr_router_settings *out);
/* Registrations done since start. */
unsigned long llmr_router_client_registrations(llmr_router_client *rc);

/* Constant-time check of a bearer token against the node token (0 when not registered). */
int llmr_router_client_check_token(llmr_router_client *rc, const char *bearer);

/* An authenticated call: method on router_url + path, body (may be NULL) as JSON, the current token as
 * bearer. A 401 answer invalidates the token. Same contract as llmr_httpc_do (free *resp). */
llmr_httpc_status llmr_router_client_call(llmr_router_client *rc, const char *method, const char *path,
                                          const char *body, long timeout_ms, llmr_httpc_resp *resp, char *err,
                                          size_t err_size);

/* The shared HTTP client (for downloads of manifest URLs: no bearer attached; hub URLs need none). */
llmr_httpc *llmr_router_client_http(llmr_router_client *rc);
const char *llmr_router_client_url(const llmr_router_client *rc);

/* Message tracing for tests and debugging (--trace-dir): when a folder is set, every message
 * exchanged with the router is written to DIR/KIND-NNNNNN-PID.json (KIND: register-request,
 * register-response, heartbeat, heartbeat-response, manifest, sync-notice, model-list). */
void llmr_router_client_set_trace_dir(llmr_router_client *rc, const char *dir);
void llmr_router_client_trace(llmr_router_client *rc, const char *kind, const char *text, size_t len);

/* The message inside an OpenAI-style error body ({"error":{"message":...}}), else the body itself
 * (truncated), into buf. */
void llmr_router_error_message(const llmr_httpc_resp *resp, char *buf, size_t size);

#endif
