/* event_loop.c — see event_loop.h. */
#include "common/event_loop.h"

#include <event2/thread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"

struct llmr_loop {
    struct event_base *base;
    struct event *sig_term, *sig_int, *sig_hup;
    void (*on_term)(void *);
    void (*on_hup)(void *);
    void *arg;
    int terms;
    atomic_int pending;      /* posted callbacks not yet run */
};

llmr_loop *llmr_loop_create(void) {
    static int threads_on;
    if (!threads_on) {
        if (evthread_use_pthreads() != 0) return NULL;
        threads_on = 1;
    }
    llmr_loop *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->base = event_base_new();
    if (!l->base) { free(l); return NULL; }
    return l;
}

void llmr_loop_destroy(llmr_loop *l) {
    if (!l) return;
    if (l->sig_term) event_free(l->sig_term);
    if (l->sig_int) event_free(l->sig_int);
    if (l->sig_hup) event_free(l->sig_hup);
    event_base_free(l->base);
    free(l);
}

struct event_base *llmr_loop_base(llmr_loop *l) { return l->base; }

int llmr_loop_run(llmr_loop *l) { return event_base_dispatch(l->base) < 0 ? -1 : 0; }
void llmr_loop_stop(llmr_loop *l) { event_base_loopexit(l->base, NULL); }

typedef struct { void (*fn)(void *); void *arg; llmr_loop *loop; } posted;

static void run_posted(evutil_socket_t fd, short what, void *p) {
    (void)fd;
    (void)what;
    posted *x = p;
    x->fn(x->arg);
    atomic_fetch_sub(&x->loop->pending, 1);
    free(x);
}

int llmr_loop_post(llmr_loop *l, void (*fn)(void *), void *arg) {
    posted *x = malloc(sizeof *x);
    if (!x) return -1;
    x->fn = fn;
    x->arg = arg;
    x->loop = l;
    atomic_fetch_add(&l->pending, 1);
    struct timeval now = {0, 0};
    if (event_base_once(l->base, -1, EV_TIMEOUT, run_posted, x, &now) != 0) {
        atomic_fetch_sub(&l->pending, 1);
        free(x);
        return -1;
    }
    return 0;
}

int llmr_loop_drain(llmr_loop *l) {
    int ran = 0;
    /* A posted callback may post again (a drain re-arming itself): bounded rounds, not forever. */
    for (int round = 0; round < 1000 && atomic_load(&l->pending) > 0; round++) {
        int before = atomic_load(&l->pending);
        event_base_loop(l->base, EVLOOP_NONBLOCK);
        ran += before - atomic_load(&l->pending) > 0 ? before - atomic_load(&l->pending) : 0;
    }
    return ran;
}

static void on_signal(evutil_socket_t sig, short what, void *p) {
    (void)what;
    llmr_loop *l = p;
    if (sig == SIGHUP) {
        log_info("SIGHUP received");
        if (l->on_hup) l->on_hup(l->arg);
        return;
    }
    if (++l->terms > 1 || !l->on_term) {
        log_warn("signal %d: stopping now", (int)sig);
        event_base_loopexit(l->base, NULL);
        return;
    }
    log_info("signal %d: shutting down gracefully (send again to stop at once)", (int)sig);
    l->on_term(l->arg);
}

int llmr_loop_handle_signals(llmr_loop *l, void (*on_term)(void *), void (*on_hup)(void *), void *arg) {
    signal(SIGPIPE, SIG_IGN);
    l->on_term = on_term;
    l->on_hup = on_hup;
    l->arg = arg;
    l->sig_term = evsignal_new(l->base, SIGTERM, on_signal, l);
    l->sig_int = evsignal_new(l->base, SIGINT, on_signal, l);
    l->sig_hup = evsignal_new(l->base, SIGHUP, on_signal, l);
    if (!l->sig_term || !l->sig_int || !l->sig_hup) return -1;
    return (evsignal_add(l->sig_term, NULL) || evsignal_add(l->sig_int, NULL) || evsignal_add(l->sig_hup, NULL)) ? -1 : 0;
}

typedef struct { void (*fn)(void *); void *arg; struct event *ev; } timer_ctx;

static void on_timer(evutil_socket_t fd, short what, void *p) {
    (void)fd;
    (void)what;
    timer_ctx *t = p;
    t->fn(t->arg);
}

struct event *llmr_loop_every(llmr_loop *l, int interval_ms, void (*fn)(void *), void *arg) {
    timer_ctx *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    t->ev = event_new(l->base, -1, EV_PERSIST, on_timer, t);
    struct timeval tv = {interval_ms / 1000, (interval_ms % 1000) * 1000};
    if (!t->ev || event_add(t->ev, &tv) != 0) {
        if (t->ev) event_free(t->ev);
        free(t);
        return NULL;
    }
    return t->ev;
}

void llmr_loop_timer_free(struct event *ev) {
    if (!ev) return;
    timer_ctx *t = event_get_callback_arg(ev);
    event_free(ev);
    free(t);
}
