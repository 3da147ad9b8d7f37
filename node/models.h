/* models.h — the node's table of models and each model's state machine (issue 4 "States").
 *
 *     pending -> downloading -> verifying -> loading -> ready
 *         \            \             \           \
 *          +-> unsupported(reason)    +-----------+--> failed(reason)
 *
 * pending      known from the router's model list, nothing done yet;
 * downloading  files are being fetched (progress: bytes, percent, MB/s, ETA, current file);
 * verifying    sha256 of files already on disk, then ModelStorage validation;
 * loading      the engine host is loading the model;
 * ready        loaded and serving;
 * unsupported  no engine of this node can run it (the reason names why each engine was passed over);
 * failed       something went wrong (the reason names the file, the shard or the limit).
 *
 * Legal moves are the arrows above plus: verifying -> downloading (a file on disk failed its hash and
 * is fetched again), ready -> loading (reload), failed/unsupported -> pending (retry after a resync
 * or an engine change), and any state -> the same state (progress updates). Anything else is refused,
 * so a bug that skips a step is caught rather than reported to the router.
 *
 * Thread-safety: every function locks the table; views are copies, so callers never hold pointers
 * into it. The table is shared by the sync thread, the download workers, the heartbeat thread and the
 * HTTP handlers. */
#ifndef LLMR_NODE_MODELS_H
#define LLMR_NODE_MODELS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef enum llmr_model_state {
    LLMR_MODEL_PENDING = 0,
    LLMR_MODEL_DOWNLOADING,
    LLMR_MODEL_VERIFYING,
    LLMR_MODEL_LOADING,
    LLMR_MODEL_READY,
    LLMR_MODEL_UNSUPPORTED,
    LLMR_MODEL_FAILED,
} llmr_model_state;
#define LLMR_MODEL_STATE_COUNT 7

#define LLMR_MODEL_ID_MAX 256
#define LLMR_MODEL_REASON_MAX 1024

/* "pending", "downloading", ... (the names of schema/node-heartbeat.schema.json). Never NULL. */
const char *llmr_model_state_name(llmr_model_state s);
/* The state named s, or -1. */
int llmr_model_state_parse(const char *s);
/* 1 when from -> to is a legal move (see above), else 0. */
int llmr_model_transition_ok(llmr_model_state from, llmr_model_state to);

/* Download progress of one model (all files together). */
typedef struct llmr_model_progress {
    uint64_t bytes_done, bytes_total;
    double bytes_per_second;   /* recent rate */
    double eta_seconds;        /* -1 when unknown */
    char file[256];            /* file being fetched or hashed now */
} llmr_model_progress;

/* A copy of one model's entry. */
typedef struct llmr_model_view {
    char id[LLMR_MODEL_ID_MAX];
    llmr_model_state state;
    char reason[LLMR_MODEL_REASON_MAX]; /* unsupported/failed: why; else "" */
    char engine[64];                    /* chosen engine id, "" before loading */
    int loaded;                         /* 1 while the engine holds it */
    int has_progress;
    llmr_model_progress progress;
    uint64_t generation;                /* bumps at every add; lets a worker notice a delete+re-add */
} llmr_model_view;

typedef struct llmr_models llmr_models; /* opaque, thread-safe */

/* An empty table. NULL when out of memory. */
llmr_models *llmr_models_create(void);
/* Frees the table. Accepts NULL. */
void llmr_models_destroy(llmr_models *m);

/* Adds id in state pending. Returns 1 if added, 0 if it was already there (untouched), -1 when the
 * id is empty/too long or memory ran out. *generation_out (may be NULL) receives the entry's
 * generation either way. */
int llmr_models_add(llmr_models *m, const char *id, uint64_t *generation_out);

/* Removes id. Returns 1 if it was there, 0 otherwise. */
int llmr_models_remove(llmr_models *m, const char *id);

/* Moves id to `to` with a reason (printf format; may be NULL for none; kept for unsupported/failed,
 * cleared otherwise). Progress is kept while downloading/verifying and cleared on other states.
 * Returns 0, or -1 with the cause in err ("unknown model X", "illegal transition ready -> pending"). */
int llmr_models_set_state(llmr_models *m, const char *id, llmr_model_state to, char *err, size_t err_size,
                          const char *reason_fmt, ...) __attribute__((format(printf, 6, 7)));

/* Records progress (copied). Ignored for an unknown id. */
void llmr_models_set_progress(llmr_models *m, const char *id, const llmr_model_progress *p);
/* Records the engine and whether it holds the model loaded. Ignored for an unknown id. */
void llmr_models_set_engine(llmr_models *m, const char *id, const char *engine, int loaded);

/* Copies id's entry into *out. Returns 0, or -1 when unknown. */
int llmr_models_get(llmr_models *m, const char *id, llmr_model_view *out);

/* Copies every entry (sorted by id) into a malloc'd array the caller frees. Returns the count, 0
 * with *out = NULL for an empty table, or -1 when out of memory. */
long llmr_models_snapshot(llmr_models *m, llmr_model_view **out);

/* Number of models in each state; counts[LLMR_MODEL_STATE_COUNT]. */
void llmr_models_count(llmr_models *m, size_t counts[LLMR_MODEL_STATE_COUNT]);

/* One view as the heartbeat's model object: {id, state, reason?, engine?, loaded, progress?}. */
json_t *llmr_model_view_json(const llmr_model_view *v);
/* The heartbeat's "models" array (new reference), NULL when out of memory. */
json_t *llmr_models_json(llmr_models *m);

#endif
