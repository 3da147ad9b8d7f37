/* engine_host.h — EngineHost: engine plugins, loaded models, sessions, and their safety nets.
 *
 * The node's one owner of engines. It
 *   - scans --engines-dir: each sub-folder with a manifest.json is a plugin. The manifest is validated
 *     (engine_manifest.h), the library is copied to a private file and dlopened (so the original may be
 *     replaced while loaded), llmr_engine_get_api is called with the host's ABI version and the table
 *     it returns is checked in turn (ABI major, table size, every entry, the id). A rejected plugin is
 *     logged with the field at fault and listed by llmr_engine_host_rejections;
 *   - chooses an engine per model (engine_registry.h) and loads it: estimate_vram first, then the
 *     per-engine VRAM budget and the device's free VRAM (idle models are unloaded, LRU first, when
 *     that makes it fit); a model that does not fit is refused with OOM_VRAM naming bytes needed and
 *     free before the engine allocates anything (T106, T107);
 *   - creates sessions on the model's current instance, runs generate with a stall watchdog: a
 *     generation that yields no token for stall_timeout_ms (default 30 s, prompt evaluation included)
 *     is cancelled, its session freed (VRAM returned) and TIMEOUT returned (T112). Tokens keep the
 *     watchdog quiet, so long generations are never cut;
 *   - polls VRAM/RAM every poll_interval_ms (resource.h) and, at or above the threshold, unloads the
 *     least-recently-used idle models (no sessions) until back under it (T103–T105);
 *   - hot-reloads (T101, T102): when a plugin's files change (watched) or on llmr_engine_host_reload /
 *     request_reload (SIGHUP), the new version is loaded beside the old and every model on the old one
 *     is shadow-loaded on the new; new sessions go to the new instance, sessions already open finish
 *     on the old one, which is unloaded (and the old library closed) when its last session ends. If
 *     the new version is rejected or cannot load a model, the old one keeps serving.
 * Plugins run inside the node's process: a crashing plugin crashes the node (no sandbox, by design).
 *
 * Threading: every function is thread-safe. generate may run concurrently on different sessions from
 * different threads; cancel may be called from any thread while generate runs. Loads, unloads and
 * reloads are serialised host-wide; they never block generate or cancel. A maintenance thread runs the
 * watchdog, the resource poll, the file watch and the unloading of drained instances.
 * Errors: functions return llmr_engine_status (llmr_engine_strerror names it) and write a message that
 * names the cause (model, engine, field, bytes) into (err, err_size). */
#ifndef LLMR_ENGINE_HOST_H
#define LLMR_ENGINE_HOST_H

#include "llmr_engine.h"
#include "node/engine/engine_registry.h"
#include "node/engine/resource.h"

#include <stdint.h>
#include <stdio.h>

typedef struct llmr_engine_host llmr_engine_host;
typedef struct llmr_host_session llmr_host_session;

/* A VRAM budget for one engine id (T107): the sum of its models' estimates may not exceed it. */
typedef struct llmr_engine_budget {
    const char *engine_id;
    uint64_t bytes;
} llmr_engine_budget;

typedef struct llmr_engine_host_config {
    const char *engines_dir;          /* required; see llmr_engine_host_default_dir */
    const char *backend;              /* "cuda" (default), "metal", "rocm", "cpu" */
    int device;                       /* GPU ordinal given to engines and the system provider; -1 = CPU */
    int cc_major, cc_minor;           /* GPU compute capability; 0,0 or -1 = unknown */
    llmr_resource_provider *provider; /* taken over (even on failure); NULL = system provider */
    double alert_threshold;           /* 0 = 0.9 */
    uint32_t poll_interval_ms;        /* 0 = 1000 */
    uint32_t stall_timeout_ms;        /* 0 = 30000 */
    uint32_t watch_interval_ms;       /* plugin file watch; 0 = 2000 */
    int no_watch;                     /* 1: never reload on file changes (reload/request_reload still work) */
    int no_thread;                    /* 1: no maintenance thread; the caller runs llmr_engine_host_tick */
    uint64_t default_vram_budget;     /* per engine, for engines without an entry below; 0 = unlimited */
    const llmr_engine_budget *budgets;
    size_t n_budgets;
    uint32_t max_context;             /* passed to engines in llmr_load_params; 0 = engine default */
    uint32_t max_sessions;            /* idem */
    int keep_libraries;               /* 1: dlopen with RTLD_NODELETE, so a replaced version's library
                                         stays mapped after its models are unloaded (for runtimes
                                         that cannot be unloaded safely); 0: dlclose it */
} llmr_engine_host_config;

/* Creates the host and scans cfg->engines_dir (plugins that fail are logged and skipped; zero plugins
 * is not an error). Fails (LOAD_FAILED) only when the folder cannot be read or on resource exhaustion. */
llmr_engine_status llmr_engine_host_create(const llmr_engine_host_config *cfg, llmr_engine_host **out,
                                           char *err, size_t err_size);

/* Stops the maintenance thread, unloads every model and closes every plugin. Sessions still open are
 * destroyed first (their handles become invalid). Must not run concurrently with other calls on h.
 * Accepts NULL. */
void llmr_engine_host_destroy(llmr_engine_host *h);

/* "build/engines" beside the running binary's bin/ folder (../engines relative to /proc/self/exe's
 * folder): the default --engines-dir when the node runs from the source tree. Returns 0 or -1. */
int llmr_engine_host_default_dir(char *buf, size_t buf_size);

/* --- plugins --------------------------------------------------------------------------------- */

/* Rescans the engines folder now and applies changes (hot reload). Returns the number of plugins
 * added or replaced. */
int llmr_engine_host_reload(llmr_engine_host *h);

/* Asks the maintenance thread to reload at its next tick. Async-signal-safe (call it from SIGHUP). */
void llmr_engine_host_request_reload(llmr_engine_host *h);

typedef struct llmr_host_plugin_info {
    char id[65], version[65], dir[1024], description[256];
    uint32_t abi_version;             /* from the library's table */
    int active;                       /* 0: an older version still serving open sessions */
    uint32_t instances;               /* loaded models on this version */
    uint64_t vram_budget;             /* 0 = unlimited */
    uint64_t vram_reserved;           /* sum of estimates of its current models */
    uint64_t vram_bytes;              /* what its models report through stats */
    int over_budget;
} llmr_host_plugin_info;

/* A malloc'd snapshot of all plugins (active first); *n_out entries. Caller frees *out. 0 or -1 (OOM). */
int llmr_engine_host_plugins(llmr_engine_host *h, llmr_host_plugin_info **out, size_t *n_out);

/* Rejections of the latest scan, one message each ("<dir>/manifest.json: field "x": why"). Returns how
 * many; copies message i into buf when i is in range. */
size_t llmr_engine_host_rejections(llmr_engine_host *h, size_t i, char *buf, size_t buf_size);

/* --- models ---------------------------------------------------------------------------------- */

/* Which engine would run desc (no loading). On success writes the engine id (and the artifact path
 * chosen, "" when none) and returns OK; else UNSUPPORTED with the reason. */
llmr_engine_status llmr_engine_host_select(llmr_engine_host *h, const llmr_model_descriptor *desc,
                                           const llmr_artifact *artifacts, size_t n_artifacts,
                                           char *engine_id, size_t engine_id_size,
                                           char *artifact_path, size_t artifact_path_size,
                                           char *err, size_t err_size);

/* Loads desc->id (a no-op returning OK when already loaded). The descriptor and artifacts are copied:
 * after an LRU unload the next session_create loads the model again by itself. Errors: UNSUPPORTED
 * (no engine: the reason), OOM_VRAM (budget or free VRAM: bytes needed and available), or whatever
 * estimate_vram/load return, with the engine's message. */
llmr_engine_status llmr_engine_host_load(llmr_engine_host *h, const llmr_model_descriptor *desc,
                                         const llmr_artifact *artifacts, size_t n_artifacts,
                                         char *err, size_t err_size);

/* Forgets a model: instances without sessions are unloaded now, others when their last session ends.
 * UNSUPPORTED when the model is unknown. */
llmr_engine_status llmr_engine_host_unload(llmr_engine_host *h, const char *model_id, char *err, size_t err_size);

typedef struct llmr_host_model_info {
    char model_id[256], engine_id[65], engine_version[65];
    int loaded;                       /* 1: a current instance exists (0 after an LRU unload) */
    uint32_t draining;                /* older instances still finishing sessions */
    uint32_t sessions;                /* open sessions, all instances */
    uint64_t vram_estimate;           /* of the current instance */
    uint64_t vram_bytes, ram_bytes;   /* from the engine's stats, current instance */
    uint64_t tokens_generated;        /* through this host, since the model was first loaded */
    double idle_seconds;              /* since the last session ended or started */
    uint64_t lru_unloads;
    int loading;                      /* a load is in progress */
    llmr_engine_status last_status;   /* of the latest load attempt */
    char last_error[512];             /* its message when it failed, else "" */
} llmr_host_model_info;

/* A malloc'd snapshot of every known model; caller frees *out. 0 or -1 (OOM). */
int llmr_engine_host_models(llmr_engine_host *h, llmr_host_model_info **out, size_t *n_out);

/* --- sessions -------------------------------------------------------------------------------- */

/* A session on the model's current instance (loading the model again if it was LRU-unloaded).
 * UNSUPPORTED when the model was never loaded or was unloaded by llmr_engine_host_unload. */
llmr_engine_status llmr_engine_host_session_create(llmr_engine_host *h, const char *model_id,
                                                   const llmr_session_params *params, llmr_host_session **out,
                                                   char *err, size_t err_size);

/* Frees the session (and its KV memory). Not while generate runs on it. Accepts NULL. */
void llmr_engine_host_session_destroy(llmr_host_session *s);

/* Runs the engine's generate with the stall watchdog. Returns the engine's status, except:
 * CANCELLED after llmr_engine_host_cancel (finish CANCELLED), TIMEOUT when the watchdog fired (the
 * session is then closed: later generates return TIMEOUT; destroy it), INTERNAL when another generate
 * runs on this session. on_token may be NULL. */
llmr_engine_status llmr_engine_host_generate(llmr_host_session *s, const llmr_generate_request *req,
                                             llmr_token_cb on_token, void *user, llmr_generate_result *result_out,
                                             char *err, size_t err_size);

/* Asks a running generate to stop soon with CANCELLED. Any thread; no-op when idle (a cancel that
 * arrives before generate starts is dropped when it starts, as in the engine ABI). */
void llmr_engine_host_cancel(llmr_host_session *s);

/* Engine id and version serving the session (strings valid while the session lives). */
const char *llmr_host_session_engine_id(const llmr_host_session *s);
const char *llmr_host_session_engine_version(const llmr_host_session *s);
/* The longest sequence (prompt + output tokens) the session may hold: the model's as the engine's stats
 * report it, or the session params' max_context when smaller; 0 when neither is known. */
uint32_t llmr_host_session_max_context(const llmr_host_session *s);

/* --- monitoring ------------------------------------------------------------------------------ */

typedef struct llmr_host_snapshot {
    llmr_resource_state res;
    const char *provider;                 /* static name of the resource provider */
    uint32_t plugins_active, plugins_draining;
    uint32_t models_loaded, instances_draining;
    uint32_t sessions_active, generations_running;
    uint64_t tokens_generated_total;
    uint64_t watchdog_timeouts_total, lru_unloads_total, load_refusals_total;
    uint64_t plugin_rejections_total, reloads_total, budget_overruns_total;
    int device;                           /* GPU ordinal the VRAM figures are for; -1 = CPU */
} llmr_host_snapshot;

/* Counters and the last resource state (for heartbeats). */
void llmr_engine_host_snapshot(llmr_engine_host *h, llmr_host_snapshot *out);

/* Samples resources now, alerts, and unloads LRU idle models while at or above the threshold; also
 * checks per-engine budgets. The maintenance thread calls it every poll_interval_ms. 0, or -1 with err
 * set when the provider failed. */
int llmr_engine_host_poll(llmr_engine_host *h, llmr_resource_state *out, char *err, size_t err_size);

/* One maintenance step (watchdog, pending reload, file watch when due, unloading drained instances).
 * Only needed with cfg.no_thread; harmless otherwise. */
void llmr_engine_host_tick(llmr_engine_host *h);

/* Writes the Prometheus text exposition (format 0.0.4) of the host's state to out: VRAM/RAM use and
 * alerts, plugins, loaded models, active sessions, tokens generated, watchdog timeouts, LRU unloads,
 * refusals (see docs/engine-abi.md for the metric list). The node serves it at GET /metrics with
 * Content-Type "text/plain; version=0.0.4". Returns 0, or -1 on a write error. */
int llmr_engine_host_write_metrics(llmr_engine_host *h, FILE *out);

/* Same as a malloc'd NUL-terminated string (caller frees); NULL when out of memory. */
char *llmr_engine_host_metrics_text(llmr_engine_host *h, size_t *len_out);

/* The engine host's part of the node heartbeat (schema/node-heartbeat.schema.json), as a new jansson
 * object (caller json_decref's it; NULL when out of memory): "gpus" [{index, memory_total_bytes,
 * memory_free_bytes}] (empty when VRAM is unknown), "ram_total_bytes", "ram_free_bytes", "alerts"
 * (strings such as "vram_high: VRAM use 93.0% >= 90%", "ram_high: …", "engine_over_budget: <id>"),
 * and "models" [{id, state, engine, loaded, reason}]: state "ready" (loaded), "loading", "unsupported"
 * or "failed" (the latest load failed; reason says why), else "pending" (e.g. LRU-unloaded). The node
 * adds node_id and active_requests and merges model states it owns (downloads, unsupported). */
struct json_t;
struct json_t *llmr_engine_host_heartbeat_json(llmr_engine_host *h);

#endif
