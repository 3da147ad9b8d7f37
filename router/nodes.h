/* nodes.h — the live node table: registration, heartbeats, online/offline, per-model states, and
 * the pick a balancer makes (least outstanding requests).
 *
 * Nodes and their token hashes persist in the database; everything live (last heartbeat, GPU
 * memory, model states, the plaintext token the router uses to call the node back) is in memory.
 * After a router restart known nodes start offline and come back with their next heartbeat, whose
 * bearer token the router keeps for its pushes (only hashes are ever stored).
 *
 * A node is online while heartbeats arrive; one silent for heartbeat_timeout_s (3 intervals by
 * default) goes offline, and the next heartbeat brings it back. Thread-safe (one mutex). */
#ifndef ROUTER_NODES_H
#define ROUTER_NODES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "router/db.h"

typedef struct router_nodes router_nodes;

typedef enum router_nodes_status {
    ROUTER_NODES_OK = 0,
    ROUTER_NODES_EINVAL,   /* the message breaks its schema (message names the field) */
    ROUTER_NODES_ENOGPU,   /* a node without a GPU while CPU nodes are not allowed (NFR-001) */
    ROUTER_NODES_ENOTFOUND,/* unknown node id */
    ROUTER_NODES_EFORBIDDEN, /* the token belongs to another node */
    ROUTER_NODES_EDB,      /* database failure */
    ROUTER_NODES_ENOMEM,
    ROUTER_NODES_EBUSY,    /* acquire: the model is ready on some node but every such node is full */
    ROUTER_NODES_EOFFLINE, /* acquire: no node is online at all */
} router_nodes_status;

const char *router_nodes_strerror(int status);

/* Loads known nodes (offline) from db. NULL with err on failure. */
router_nodes *router_nodes_create(router_db *db, int heartbeat_timeout_s, char *err, size_t err_size);
/* Accepts NULL. */
void router_nodes_destroy(router_nodes *n);

/* Validates a registration body (schema/node-register.request.schema.json) and, unless it fails,
 * registers the node: a new id (or the body's node_id when known), a fresh token (returned in
 * token_out, only its hash is stored), online now. allow_cpu: accept nodes without GPUs.
 * param_out (may be NULL, 32 bytes) names the offending field on EINVAL. */
int router_nodes_register(router_nodes *n, json_t *body, int allow_cpu, char *id_out, size_t id_size, char *token_out,
                          size_t token_size, char *param_out, char *err, size_t err_size);

/* Applies a heartbeat (schema/node-heartbeat.schema.json) from the node authenticated as node_id
 * with token (kept for callbacks). EFORBIDDEN if the body's node_id is another node's. */
int router_nodes_heartbeat(router_nodes *n, const char *node_id, const char *token, json_t *body, char *param_out,
                           char *err, size_t err_size);

/* Marks nodes silent for longer than the timeout offline (logging each change). now_ms: monotonic. */
void router_nodes_check(router_nodes *n, int64_t now_ms);
/* Monotonic milliseconds (CLOCK_MONOTONIC). */
int64_t router_nodes_now_ms(void);
/* For tests: pretend the node's last heartbeat was at t_ms. */
void router_nodes_set_last_seen(router_nodes *n, const char *node_id, int64_t t_ms);

/* GET /v0/nodes: {"object":"list","data":[node...]} (new ref). */
json_t *router_nodes_list_json(router_nodes *n);
/* Per-node state of one model: [{node_id, machine_name, online, state, reason?, progress?}] (new ref). */
json_t *router_nodes_model_states(router_nodes *n, const char *model_id);
/* 1 if the model is ready on at least one online node. */
int router_nodes_model_ready(router_nodes *n, const char *model_id);
/* 1 if node_id is known and online. */
int router_nodes_online(router_nodes *n, const char *node_id);

/* Callback targets for pushes: every online node with a known token. */
typedef struct router_node_target {
    char id[64];
    char base_url[300];   /* http://ADDRESS:PORT */
    char token[128];
} router_node_target;
/* *out (malloc'd, caller frees) receives the online nodes; returns their count (0 on none/failure). */
size_t router_nodes_targets(router_nodes *n, router_node_target **out);

/* Balancer: picks, among online nodes where model_id is ready, the one with the fewest requests
 * outstanding through this router (ties: fewest active_requests reported, then registration order),
 * counts one more outstanding on it and fills *out. ENOTFOUND when no node can serve the model.
 * Every successful acquire must be paired with a router_nodes_release. */
int router_nodes_acquire(router_nodes *n, const char *model_id, router_node_target *out);
/* The balancer's pick (router/balancer.h): like router_nodes_acquire, but a node already holding
 * its stated max_concurrency (registration; 4 when absent) requests from this router is full, the
 * node named exclude (may be NULL: the one that just failed) is skipped, and ties on outstanding
 * requests go round-robin. OK, EBUSY (ready somewhere, all full), ENOTFOUND (ready nowhere) or
 * EOFFLINE (no node online). */
int router_nodes_acquire_ex(router_nodes *n, const char *model_id, const char *exclude, router_node_target *out);
/* The router could not even connect to the node (its process is gone): offline now rather than after
 * the heartbeat timeout, so no further request is sent there; its next heartbeat brings it back.
 * cause is logged. */
void router_nodes_mark_unreachable(router_nodes *n, const char *node_id, const char *cause);
/* Online nodes (for /metrics). */
int router_nodes_online_count(router_nodes *n);
void router_nodes_release(router_nodes *n, const char *node_id);

#endif
