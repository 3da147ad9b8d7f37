/* prune.h — deleting the files of models the router no longer lists (the node's disk-leak guard).
 *
 * When a model leaves the router's list, sync cancels its pipeline job, asks the EngineHost to
 * unload it (instances with open sessions drain first) and forgets it; then it queues the model
 * here. The pruner deletes the snapshot folder (ModelStorage's llmr_storage_remove: only inside
 * --models-dir, never through a symbolic link) once nothing can still touch it:
 *   - registered again meanwhile (is_registered): the files are kept, the entry dropped (a
 *     re-registration re-verifies them instead of downloading them again);
 *   - its grace period not over yet (see llmr_pruner_add): it waits;
 *   - busy (a pipeline job still winding down after its cancel, so a download's .partial files are
 *     not written to while removed; or sessions still open on the model, so weights are never pulled
 *     from under a running generate): it waits, and is looked at again at the next run;
 *   - otherwise the folder (complete files and .partial ones alike) and the parents it leaves empty
 *     are removed, and one log line says what and how many bytes were freed.
 * A removal that fails is logged with the path and cause and not retried (the files stay for the
 * operator).
 *
 * The ledger (STATE_DIR/owned-models.json, {"models": [ids]}) lists the folders this node created:
 * an id is added when its download starts and dropped when its folder is removed. At the first model
 * list after a start, owned ids the router no longer lists are queued (llmr_pruner_queue_orphans):
 * a model deleted while the node was down, or whose deletion was still waiting when it stopped, is
 * removed then. Folders the node did not create are never looked at.
 *
 * Thread-safety: every function locks the queue; the hooks are called without the lock held. */
#ifndef LLMR_NODE_PRUNE_H
#define LLMR_NODE_PRUNE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct llmr_prune_hooks {
    /* 1 when id is back in the node's model table (its files must stay). */
    int (*is_registered)(void *user, const char *id);
    /* 1 when something still uses id's files (why names it, e.g. "2 session(s) open"), else 0. */
    int (*busy)(void *user, const char *id, char *why, size_t why_size);
    void *user;
} llmr_prune_hooks;

/* What the pruner did since it was created. */
typedef struct llmr_prune_stats {
    uint64_t models_removed;   /* snapshot folders deleted */
    uint64_t bytes_freed;      /* bytes of the files deleted */
    uint64_t kept;             /* queued, then registered again before deletion */
    uint64_t failures;         /* removals that failed (logged) */
} llmr_prune_stats;

typedef struct llmr_pruner llmr_pruner; /* opaque, thread-safe */

/* A pruner for the snapshots under models_dir (copied). hooks is copied; both hooks are required.
 * NULL when out of memory or an argument is missing. */
llmr_pruner *llmr_pruner_create(const char *models_dir, const llmr_prune_hooks *hooks);
/* Frees the queue; queued deletions are dropped (their files stay). Accepts NULL. */
void llmr_pruner_destroy(llmr_pruner *p);

/* Loads the ledger at path (a missing file is an empty ledger) and keeps it there from now on.
 * 0, or -1 with the file and cause in err (the pruner then works without one). */
int llmr_pruner_open_ledger(llmr_pruner *p, const char *path, char *err, size_t err_size);
/* Records that this node creates id's folder (written at once when new). 0, or -1 when it could not
 * be written (logged). Without a ledger: 0, nothing done. */
int llmr_pruner_own(llmr_pruner *p, const char *id);
/* 1 when the ledger lists id. */
int llmr_pruner_owns(llmr_pruner *p, const char *id);
/* Queues (with delay_s, as llmr_pruner_add) every owned id that `listed` (a JSON array of id strings,
 * borrowed) lacks. Returns how many. */
size_t llmr_pruner_queue_orphans(llmr_pruner *p, json_t *listed, double delay_s);

/* Queues id's folder for deletion, not before delay_s seconds from now (a grace period for a model
 * that merely went missing from a list: it may come back at the next one). Queuing an id already
 * queued keeps the earlier of the two deadlines. 0, or -1 when out of memory. */
int llmr_pruner_add(llmr_pruner *p, const char *id, double delay_s);
/* Ends id's grace period now when it is queued (a "deleted" notice named it after it had gone
 * missing from a list). 1 when it was queued, else 0 (nothing is queued). */
int llmr_pruner_expedite(llmr_pruner *p, const char *id);
/* Drops id from the queue (it was registered again). 1 when it was queued, else 0. */
int llmr_pruner_cancel(llmr_pruner *p, const char *id);
/* Ids waiting for deletion. */
size_t llmr_pruner_pending(llmr_pruner *p);
/* The waiting ids as a JSON array of strings (new reference; NULL when out of memory). */
json_t *llmr_pruner_pending_json(llmr_pruner *p);

/* One pass over the queue (see above). Returns how many ids still wait. */
size_t llmr_pruner_run(llmr_pruner *p);

/* Totals so far. */
void llmr_pruner_stats(llmr_pruner *p, llmr_prune_stats *out);

#endif
