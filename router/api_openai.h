/* api_openai.h — the OpenAI-compatible inference API of the router.
 *
 *   POST /v1/chat/completions   messages -> the model's chat template (router/chat_prompt.h) ->
 *                               a node's /v0/generate with parse "harmony"
 *   POST /v1/completions        prompt -> /v0/generate with parse "none"
 *   GET  /metrics               Prometheus text (router/metrics.h), no key needed
 * Keys: an API key or the admin key (Bearer); see router/auth.h.
 *
 * Parameters (docs/api.md): model, messages | prompt, max_tokens / max_completion_tokens,
 * temperature, top_p, stop (string or up to 4), seed, n (only 1), stream,
 * stream_options.include_usage, frequency_penalty, presence_penalty, tools, tool_choice,
 * reasoning_effort, user. Unknown fields are ignored; a field of the wrong type or out of range is
 * a 400 whose error.param names it.
 *
 * Routing (router/balancer.h): 404 model_not_found when no online node has the model ready (or it
 * is not registered), 503 no_nodes_online, 429 + Retry-After when every node is full and the wait
 * queue too, 504 queue_timeout after the wait limit. A node that fails before the client saw a byte
 * (connection refused, HTTP error, an error event first, a stream cut before its end on a
 * non-streamed request) is replaced once by another node; after the first byte, a streamed answer
 * ends with `data: {"error":{...}}`. A client that disconnects aborts the node request at once. */
#ifndef ROUTER_API_OPENAI_H
#define ROUTER_API_OPENAI_H

#include <stddef.h>

#include "router/router.h"

/* Adds the routes above, creates the balancer and metrics. 0, or -1 with the cause in err. */
int router_openai_init(router_ctx *ctx, char *err, size_t err_size);
/* Counts a request of another /v1 route (GET /v1/models) in the metrics. */
void router_openai_record(router_ctx *ctx, const char *route, int status, double seconds);
/* Cancels requests in flight and waits (up to 5 s) for their node exchanges to end. Call after the
 * loop stopped, before the loop is destroyed. */
void router_openai_fini(router_ctx *ctx);

#endif
