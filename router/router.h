/* router.h — llmr-router: the operator's front door (model registry, nodes, auth, OpenAI API).
 *
 * One process, one libevent loop thread (common/event_loop.h) that owns the HTTP server; blocking
 * work (hub requests during registration, pushes to nodes) runs on short-lived worker threads that
 * post their result back to the loop with llmr_loop_post. Modules, one concern each:
 *   db.h          SQLite registry (WAL, migrations, the kill -9 guarantee)
 *   auth.h        admin key, node tokens, API keys; /v0/api-keys
 *   node_join.h   who may POST /v0/nodes (--node-join-key)
 *   dashboard.c   GET /dashboard: the operator's web page over the /v0 APIs (router/dashboard/)
 *   hub.h         what the router needs from a Hugging Face-compatible hub
 *   validate.h    registration checks as pure functions over a hub listing
 *   artifacts.h   supported_models.json + the artifact allowlist
 *   registry.h    stored model records; api_models.c serves /v0/models* and /v1/models
 *   nodes.h       the live node table (heartbeats, per-model states, least-outstanding pick);
 *                 api_nodes.c serves /v0/nodes, /v0/health and pushes /v0/sync to nodes
 *   api_openai.h  /v1/chat/completions, /v1/completions, /metrics (balancer.h, proxy.h, metrics.h)
 * Each module's init below adds its routes to ctx->http. */
#ifndef ROUTER_ROUTER_H
#define ROUTER_ROUTER_H

#include <pthread.h>

#include "common/event_loop.h"
#include "common/http_server.h"
#include "router/artifacts.h"
#include "router/auth.h"
#include "router/db.h"
#include "router/hub.h"
#include "router/validate.h"

typedef struct router_nodes router_nodes;
typedef struct router_join router_join;

/* Settings from flags / environment (see router/main.c --help). Strings are borrowed. */
typedef struct router_config {
    const char *listen;
    const char *data_dir;
    const char *hub_endpoint;
    const char *hub_token;
    const char *admin_key;
    const char *supported_models;
    const char *artifact_allowlist;
    int allow_cpu_nodes;
    int insecure_no_auth;
    const char *node_join_key; /* --node-join-key: required by POST /v0/nodes when set (node_join.h) */
    int heartbeat_interval_s;  /* told to nodes at registration */
    int heartbeat_timeout_s;   /* a node silent this long is offline (default 3 intervals) */
    int sync_interval_s;       /* how often nodes poll on their own */
    int max_registrations;     /* registrations validated at once; more get 429 */
    int queue_max;             /* inference requests that may wait for a full cluster (then 429) */
    int queue_timeout_ms;      /* how long one may wait (then 504) */
    int max_request_mb;        /* --max-request-mb: largest request body, MiB (a full-context chat needs ~2) */
} router_config;

typedef struct router_ctx {
    router_config cfg;
    llmr_loop *loop;
    llmr_http_server *http;
    router_db *db;
    router_auth *auth;
    router_join *join;         /* who may POST /v0/nodes (router/node_join.h) */
    router_artifacts *artifacts;
    router_hub *hub;
    router_nodes *nodes;
    router_template_check_fn check_template; /* NULL: templates are not parse-checked */
    struct router_openai *openai;            /* api_openai.c: balancer, metrics, requests in flight */

    /* Worker threads in flight (registrations, sync pushes); shutdown waits for zero. */
    pthread_mutex_t jobs_mu;
    pthread_cond_t jobs_cv;
    int jobs;
    int registrations;
} router_ctx;

/* Adds the /v0/models*, /v1/models routes. 0, or -1 with the cause in err. */
int router_models_init(router_ctx *ctx, char *err, size_t err_size);
/* Creates ctx->nodes from the database, adds /v0/nodes and /v0/health, and starts the heartbeat
 * watchdog timer. 0, or -1 with the cause in err. */
int router_nodes_init(router_ctx *ctx, char *err, size_t err_size);
/* Adds GET /dashboard, the operator's web page (router/dashboard.c). 0, or -1 with the cause in err. */
int router_dashboard_init(router_ctx *ctx, char *err, size_t err_size);
/* Stops the watchdog and frees ctx->nodes (after the loop stopped). */
void router_nodes_fini(router_ctx *ctx);

/* Tells every online node that the model set changed (event "registered"/"deleted"; model may be
 * NULL). Runs on a worker thread; failures are logged (nodes also poll). */
void router_sync_push(router_ctx *ctx, const char *event, const char *model);

/* Worker-thread bookkeeping: router_job_begin before pthread_create (returns -1 when over the
 * limit given, 0 = no limit), router_job_end when the thread finishes; router_jobs_wait blocks
 * until none is left or timeout_ms passed, and returns how many are still running. */
int router_job_begin(router_ctx *ctx, int *counter, int limit);
void router_job_end(router_ctx *ctx, int *counter);
int router_jobs_wait(router_ctx *ctx, int timeout_ms);

#endif
