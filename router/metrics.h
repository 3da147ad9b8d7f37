/* metrics.h — the router's Prometheus counters, served as text by GET /metrics.
 *
 *   llmr_router_requests_total{route,status}          counter
 *   llmr_router_request_duration_seconds{route}       histogram (request start -> last byte)
 *   llmr_router_time_to_first_token_seconds{route}    histogram (streamed requests)
 *   llmr_router_tokens_total{direction="in"|"out"}    counter (prompt / completion tokens)
 *   llmr_router_queue_depth                           gauge (requests waiting for a node)
 *   llmr_router_nodes_online                          gauge
 *   llmr_router_failovers_total                       counter (retried on another node)
 * Thread-safe (one mutex); routes are a small fixed set of names (at most 16). */
#ifndef ROUTER_METRICS_H
#define ROUTER_METRICS_H

#include <stdint.h>

typedef struct router_metrics router_metrics; /* opaque */

router_metrics *router_metrics_create(void);
void router_metrics_destroy(router_metrics *m); /* accepts NULL */

/* One finished request: route ("/v1/chat/completions"), HTTP status, seconds it took. */
void router_metrics_request(router_metrics *m, const char *route, int status, double seconds);
void router_metrics_ttft(router_metrics *m, const char *route, double seconds);
void router_metrics_tokens(router_metrics *m, uint64_t in, uint64_t out);
void router_metrics_failover(router_metrics *m);

/* The exposition text (malloc'd, caller frees), with the gauges given. NULL on ENOMEM. */
char *router_metrics_render(router_metrics *m, int queue_depth, int nodes_online);

#endif
