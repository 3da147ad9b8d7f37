/* node.h — llmr-node: the context every module of the node agent shares.
 *
 * A node joins the router, fetches what is registered there, proves every byte is right, and reports
 * honestly what it can and cannot run (issue 4). Its parts, one module each:
 *   gpu_inventory   GPUs through dlopen'd NVML (none on a GPU-less host: it still runs);
 *   engines         the engine plugins' manifests and the EngineHost that loads models;
 *   router_client   registration with retry/backoff, node id + token persisted in --state-dir;
 *   heartbeat       POST /v0/health every --heartbeat-interval seconds; re-registers on 401;
 *   sync            the router's model list (push POST /v0/sync + poll every --sync-interval s),
 *                   manifests, and one pipeline job per model on the download workers;
 *   prune           deletes the files of models the router no longer lists (unless
 *                   --keep-deleted-models), once their jobs and sessions are gone;
 *   downloader      verified resumable downloads (.partial + Range, sha256 before rename);
 *   model_storage   snapshot validation and the ModelDescriptor;
 *   models          the per-model state machine the heartbeat reports;
 *   api             the node's HTTP API: POST /v0/sync, GET /metrics, GET /v0/status;
 *   generate        the inference API: POST /v0/generate, tokens streamed back as SSE.
 * Threads: the event loop (HTTP API), the heartbeat thread (registration too), the sync thread, and
 * --max-parallel-downloads workers. Shutdown (SIGTERM) stops the loop, then each module in reverse. */
#ifndef LLMR_NODE_NODE_H
#define LLMR_NODE_NODE_H

#include <jansson.h>
#include <stdatomic.h>
#include <time.h>

#include "common/event_loop.h"
#include "common/http_server.h"
#include "node/engines.h"
#include "node/gpu_inventory.h"
#include "node/models.h"
#include "node/router_client.h"

typedef struct llmr_node_config {
    const char *router_url;        /* --router */
    const char *listen;            /* --listen, "0.0.0.0:8081" */
    const char *advertise_address; /* --advertise-address: host the router uses to reach us */
    const char *models_dir;        /* --models-dir */
    const char *engines_dir;       /* --engines-dir */
    const char *state_dir;         /* --state-dir */
    const char *gpu;               /* --gpu auto|none */
    int heartbeat_interval_s;      /* --heartbeat-interval; 0 = the router's setting (default 5) */
    int sync_interval_s;           /* --sync-interval; 0 = the router's setting, else 30 */
    int max_concurrency;           /* --max-concurrency (also the sessions engines plan KV memory for) */
    int max_context;               /* --max-context: 0 = the engine's default */
    int max_request_mb;            /* --max-request-mb: largest request body (a rendered prompt), MiB */
    int max_parallel_downloads;    /* --max-parallel-downloads */
    int download_streams;          /* --download-streams: files of one model fetched at once (1..16) */
    int keep_deleted_models;       /* --keep-deleted-models: never delete the files of deleted models */
    int prune_grace_s;             /* --prune-grace: seconds a model missing from a list waits before its
                                      files go (a "deleted" notice naming it: at once) */
} llmr_node_config;

typedef struct llmr_sync llmr_sync;
typedef struct llmr_heartbeat llmr_heartbeat;
typedef struct llmr_generate llmr_generate;

typedef struct llmr_node {
    llmr_node_config cfg;
    char machine_name[256];
    char address[256];             /* advertised host */
    int port;                      /* bound port of the HTTP API */
    time_t started_at;
    llmr_loop *loop;
    llmr_http_server *http;
    llmr_gpu_inventory *gpus;
    llmr_node_engines *engines;
    llmr_models *models;
    llmr_router_client *router;
    llmr_sync *sync;
    llmr_heartbeat *heartbeat;
    llmr_generate *generate;       /* POST /v0/generate (node/generate.h) */
    atomic_int stop;               /* set once at shutdown; every thread watches it */
    atomic_int active_requests;    /* inference requests in flight */
    atomic_ulong heartbeats_ok, heartbeats_failed, sync_notices, manifests_fetched;
    atomic_ulong downloads_bytes, downloads_failed, verify_failures;
} llmr_node;

/* The registration body (schema/node-register.request) for this node, without node_id. */
json_t *llmr_node_register_body(void *node);

/* The status document served at GET /v0/status (new reference). */
json_t *llmr_node_status_json(llmr_node *node);

/* models_dir/<id>: the folder of a model's snapshot (id is path-checked by the caller). */
void llmr_node_model_dir(const llmr_node *node, const char *id, char *buf, size_t size);

#endif
