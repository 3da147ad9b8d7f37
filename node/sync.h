/* sync.h — keeps the node's models in step with the router's registry (issue 4 "Model sync").
 *
 * The router's model list arrives two ways: pushed (POST /v0/sync on the node, schema/sync-notice:
 * {event, model?, models}), and polled every --sync-interval seconds (default 30) with
 * GET /v0/models using the node token (any of these answer shapes is understood: an array of ids or
 * of objects with "id", or an object holding such an array under "data" or "models"). A heartbeat
 * answer that carries "models" counts as a poll too.
 *
 * For each model id the node has not seen: it fetches GET /v0/models/registry/{id}/manifest.json;
 * when no engine of this node could run it (runtime, architecture, format, backend: FR-005) the
 * model becomes `unsupported` with the reason and nothing is downloaded; otherwise a pipeline job is
 * queued on the download workers:
 *     downloading (files not yet on disk; artifacts of this node's backend too)
 *  -> verifying (sha256 of files that were already on disk; a mismatch deletes the file and fetches
 *     it once more; then ModelStorage validation; then the engine choice from config.json)
 *  -> loading (EngineHost) -> ready,  or failed(reason) / unsupported(reason) at any step.
 * Models no longer in the list are cancelled, unloaded (open sessions drain first) and forgotten;
 * then node/prune.h deletes their folder under --models-dir (partial downloads included) once their
 * job has stopped and no session is open on them: at once when a "deleted" notice named the model,
 * after --prune-grace seconds when it merely went missing from a list (it may come back). The folders the node creates are recorded in
 * STATE_DIR/owned-models.json: the first list after a start also queues owned models the router
 * dropped while the node was down. With --keep-deleted-models the files stay on disk, so a
 * re-registration does not download them again (the ledger is still kept up to date). A failed model is retried when the router
 * registers it again or sends a "resync"; unsupported models are re-examined after every
 * registration (the router's allow_cpu_engines may have changed).
 *
 * Thread-safety: notice/wake may be called from any thread (the HTTP handler calls notice). */
#ifndef LLMR_NODE_SYNC_H
#define LLMR_NODE_SYNC_H

#include <jansson.h>
#include <stddef.h>

#include "node/node.h"
#include "node/prune.h"

/* Starts the sync thread and the download workers. NULL with the cause in err. */
llmr_sync *llmr_sync_create(llmr_node *node, char *err, size_t err_size);
/* Stops the thread, cancels running jobs and waits for them. Accepts NULL. */
void llmr_sync_destroy(llmr_sync *s);

/* A push from the router (already authenticated and schema-checked by the API): event is
 * "registered", "deleted" or "resync"; model may be NULL; models (borrowed) is the full list. */
void llmr_sync_notice(llmr_sync *s, const char *event, const char *model, json_t *models);

/* Models whose files wait for deletion, as a JSON array of ids (new reference; [] with
 * --keep-deleted-models). */
json_t *llmr_sync_deleting_json(llmr_sync *s);
/* What pruning did so far (all zero with --keep-deleted-models or a NULL s). */
void llmr_sync_prune_stats(llmr_sync *s, llmr_prune_stats *out);

/* Asks for a poll now; after_registration also re-examines unsupported models. */
void llmr_sync_wake(llmr_sync *s, int after_registration);

/* Parses a model list in any of the shapes above into a JSON array of id strings (new reference),
 * or NULL when the document holds no list. Ids that are not safe relative paths are dropped. */
json_t *llmr_sync_parse_model_list(json_t *doc);

#endif
