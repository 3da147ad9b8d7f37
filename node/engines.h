/* engines.h — what the node's engine plugins can run, and loading through the EngineHost.
 *
 * At start the node reads every plugin manifest under --engines-dir (node/engine/engine_manifest.h)
 * to advertise its engines at registration (id, version, runtimes, formats, architectures,
 * gpu_backends, cpu_only) and to decide, from a model manifest alone, whether any engine can run a
 * model before a byte is downloaded (FR-005: otherwise the model is `unsupported` with the reason).
 * Loading a validated model goes through the EngineHost (node/engine/engine_host.h), which picks the
 * engine (FR-008: an official artifact present on the node first) and enforces VRAM limits.
 *
 * The backend the node runs models on is "cuda" when it has a GPU. A GPU-less node runs CPU engines
 * (backend "cpu", such as the C reference gpt-oss engine) only when the router said
 * allow_cpu_engines (it runs with --allow-cpu-nodes: tests and demos); otherwise every model is
 * unsupported there, with that reason.
 *
 * Thread-safety: all functions are thread-safe (the EngineHost is; the manifest list is immutable). */
#ifndef LLMR_NODE_ENGINES_H
#define LLMR_NODE_ENGINES_H

#include <jansson.h>
#include <stddef.h>

#include "llmr_engine.h"
#include "node/manifest.h"
#include "node/model_storage.h"
#include "node/models.h"

typedef struct llmr_node_engines llmr_node_engines; /* opaque */

typedef struct llmr_node_engines_config {
    const char *engines_dir;   /* required */
    int has_gpu;               /* 1: backend "cuda", device 0 */
    int cc_major, cc_minor;    /* of GPU 0; -1 when unknown */
    unsigned max_sessions;     /* sessions an engine plans KV memory for (the node's --max-concurrency,
                                  so concurrent requests can share a batch); 0 = the engine's default */
    unsigned max_context;      /* longest sequence a session may hold (--max-context); 0 = engine default */
} llmr_node_engines_config;

/* Scans the manifests and starts the EngineHost. A plugin that fails validation is logged and left
 * out; an unreadable folder is an error (the message names it). NULL with the cause in err. */
llmr_node_engines *llmr_node_engines_create(const llmr_node_engines_config *cfg, char *err, size_t err_size);
/* Unloads every model and closes the plugins. Accepts NULL. */
void llmr_node_engines_destroy(llmr_node_engines *e);

/* Follows the router's allow_cpu_engines setting (set after each registration). */
void llmr_node_engines_allow_cpu(llmr_node_engines *e, int allow);

/* The registration "engines" array (new reference). CPU-only engines are listed with cpu_only true;
 * the router decides. */
json_t *llmr_node_engines_json(llmr_node_engines *e);
/* Number of valid plugins found. */
size_t llmr_node_engines_count(llmr_node_engines *e);

/* Whether some engine could run the model described by a manifest (runtime, architecture when the
 * manifest names it, format or an artifact for this node's backend). 0, or -1 with the reason in
 * reason, e.g. "no engine for x/y (runtime unknown, ...): gptoss_ref: runtime unknown not in [gptoss]". */
int llmr_node_engines_precheck(llmr_node_engines *e, const llmr_manifest *m, char *reason, size_t reason_size);

/* Which engine would run a validated model (from its config.json architecture), without loading.
 * OK with the engine id, or UNSUPPORTED with the reason. Without an EngineHost in this build the
 * manifests alone decide. */
llmr_engine_status llmr_node_engines_select(llmr_node_engines *e, const llmr_storage_model *m, char *engine_out,
                                            size_t engine_size, char *err, size_t err_size);

/* Loads a validated model through the EngineHost. engine_out receives the engine id. Returns the
 * engine status; UNSUPPORTED when no engine fits (with the reason), LOAD_FAILED when no EngineHost
 * is available in this build. */
llmr_engine_status llmr_node_engines_load(llmr_node_engines *e, const llmr_storage_model *m, char *engine_out,
                                          size_t engine_size, char *err, size_t err_size);
/* Forgets a model (its files stay). */
void llmr_node_engines_unload(llmr_node_engines *e, const char *model_id);

/* Sessions open on a model (all its instances, draining ones included); 0 when the EngineHost does
 * not know it. The pruner waits for 0 before deleting a model's files. */
unsigned llmr_node_engines_sessions(llmr_node_engines *e, const char *model_id);

/* Refreshes each model's "loaded" flag in the table from the EngineHost (an LRU unload clears it;
 * the next session loads the model again, so the model stays ready). */
void llmr_node_engines_sync_loaded(llmr_node_engines *e, llmr_models *models);

/* Appends the EngineHost's current resource alerts ("vram: 93% used (threshold 90%)") to arr. */
void llmr_node_engines_alerts(llmr_node_engines *e, json_t *arr);

/* The EngineHost's Prometheus text (malloc'd; NULL when none). */
char *llmr_node_engines_metrics(llmr_node_engines *e, size_t *len_out);

/* The EngineHost itself, for the inference API (NULL when this build has none). */
struct llmr_engine_host *llmr_node_engines_host(llmr_node_engines *e);

#endif
