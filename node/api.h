/* api.h — the node's HTTP API (on common/http_server.h, served by the event loop thread).
 *
 *   POST /v0/sync    the router's push (schema/sync-notice: {event, model?, models}); requires
 *                    "Authorization: Bearer <node token>" (401 otherwise, 503 before the node has
 *                    registered); 400 naming the field for a malformed notice; 202 {"accepted":true}.
 *   GET  /metrics    Prometheus text (0.0.4): the node's own counters and states, then the
 *                    EngineHost's (VRAM/RAM, plugins, sessions, watchdog, LRU unloads).
 *   GET  /v0/status  the node's view of itself as JSON: id, registration, GPUs (or why none),
 *                    engines, every model's state with reason and progress. Read-only, no secrets.
 * Unknown paths get 404 JSON, wrong methods 405 JSON (http_server.h). */
#ifndef LLMR_NODE_API_H
#define LLMR_NODE_API_H

#include "node/node.h"

/* Adds the routes to node->http. Returns 0, -1 when the route table is full. */
int llmr_node_api_init(llmr_node *node);

/* Validates a sync notice against schema/sync-notice (event enum, model string, models array of
 * strings). Returns 0, or -1 with the field at fault in err. */
int llmr_node_api_check_notice(json_t *body, char *err, size_t err_size);

/* The node's Prometheus text (malloc'd, NUL-terminated); NULL when out of memory. */
char *llmr_node_metrics_text(llmr_node *node, size_t *len_out);

#endif
