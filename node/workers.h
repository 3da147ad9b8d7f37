/* workers.h — a fixed pool of threads running queued jobs in FIFO order.
 *
 * The node runs each model's pipeline (download, verify, validate, load) as one job, so the pool's
 * size is the bound on models fetched at once (--max-parallel-downloads). Jobs must watch their own
 * cancel flags; destroy waits for running jobs and hands queued ones to their discard function. */
#ifndef LLMR_NODE_WORKERS_H
#define LLMR_NODE_WORKERS_H

#include <stddef.h>

typedef struct llmr_workers llmr_workers; /* opaque, thread-safe */

/* Starts n threads (1..64). NULL on failure. */
llmr_workers *llmr_workers_create(int n);

/* Queues run(arg). discard(arg) (may be NULL) is called instead if the pool is destroyed before the
 * job started. Returns 0, -1 when out of memory or the pool is shutting down. */
int llmr_workers_submit(llmr_workers *w, void (*run)(void *arg), void (*discard)(void *arg), void *arg);

/* Jobs queued and running. */
size_t llmr_workers_pending(llmr_workers *w);

/* Discards queued jobs, waits for running ones, joins the threads. Accepts NULL. */
void llmr_workers_destroy(llmr_workers *w);

#endif
