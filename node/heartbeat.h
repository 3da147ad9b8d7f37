/* heartbeat.h — the node's pulse at the router (issue 4 "Heartbeat").
 *
 * One thread: registers (router_client: retries until the router answers), then every
 * --heartbeat-interval seconds (default: the router's heartbeat_interval_s, 5) posts /v0/health
 * (schema/node-heartbeat): GPU memory, RAM, active requests, alerts, and every model's state with
 * its reason, engine, loaded flag and download progress. The router marks a node offline after three
 * missed beats, so a beat is sent on time even while downloads run (they are on other threads).
 * A 401 answer means the router forgot the token (its database was reset, or the node was removed):
 * the thread registers again and asks the sync thread for a full resync. After each registration the
 * router's allow_cpu_engines setting is applied to the engines.
 *
 * The body builder is separate so tests can check it against the schema. */
#ifndef LLMR_NODE_HEARTBEAT_H
#define LLMR_NODE_HEARTBEAT_H

#include <jansson.h>

#include "node/node.h"

/* Starts the thread. NULL with the cause in err. */
llmr_heartbeat *llmr_heartbeat_create(llmr_node *node, char *err, size_t err_size);
/* Stops and joins the thread (node->stop must be set first, or is set here). Accepts NULL. */
void llmr_heartbeat_destroy(llmr_heartbeat *hb);

/* The heartbeat body for the node now (new reference). */
json_t *llmr_heartbeat_body(llmr_node *node);

/* Sends one heartbeat now. Returns the HTTP status (200 on success), or -1 on a transport error. */
long llmr_heartbeat_send(llmr_node *node);

#endif
