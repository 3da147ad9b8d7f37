/* event_loop.h — the libevent loop every llmr daemon runs, with thread hand-off and signals.
 *
 * One loop thread owns all sockets (HTTP server and client connections served by libevent).
 * Worker threads (inference, downloads) never touch libevent objects directly: they post a function
 * to run on the loop thread with llmr_loop_post. SIGTERM/SIGINT call the daemon's shutdown hook on
 * the loop thread; SIGHUP calls its reload hook. */
#ifndef LLMR_EVENT_LOOP_H
#define LLMR_EVENT_LOOP_H

#include <event2/event.h>

typedef struct llmr_loop llmr_loop; /* opaque */

/* Creates the loop (enables libevent's pthread locking first). NULL on failure. */
llmr_loop *llmr_loop_create(void);
/* Frees the loop; all servers/timers on it must be gone. Accepts NULL. */
void llmr_loop_destroy(llmr_loop *loop);
struct event_base *llmr_loop_base(llmr_loop *loop);

/* Runs until llmr_loop_stop. Returns 0 on a clean stop. */
int llmr_loop_run(llmr_loop *loop);
/* Makes llmr_loop_run return after the current callbacks. Thread-safe. */
void llmr_loop_stop(llmr_loop *loop);

/* Runs fn(arg) on the loop thread as soon as possible. Thread-safe; returns 0, -1 on failure. */
int llmr_loop_post(llmr_loop *loop, void (*fn)(void *arg), void *arg);

/* After llmr_loop_run has returned: runs the callbacks posted but not yet run (workers that finished
 * after the loop stopped), so what they carry is handed over and freed instead of leaked. Call it on
 * the thread that ran the loop, once the posting threads are done, while the objects the callbacks
 * touch are still alive. Returns how many ran. */
int llmr_loop_drain(llmr_loop *loop);

/* Calls on_term(arg) on the loop thread at SIGTERM/SIGINT (a second signal stops at once), and
 * on_hup(arg) at SIGHUP. Either may be NULL (on_term NULL = stop the loop). SIGPIPE is ignored. */
int llmr_loop_handle_signals(llmr_loop *loop, void (*on_term)(void *), void (*on_hup)(void *), void *arg);

/* A repeating timer on the loop thread every interval_ms. Returns a handle for llmr_loop_timer_free. */
struct event *llmr_loop_every(llmr_loop *loop, int interval_ms, void (*fn)(void *arg), void *arg);
void llmr_loop_timer_free(struct event *timer);

#endif
