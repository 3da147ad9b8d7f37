/* workers.c — see workers.h. */
#include "node/workers.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    void (*run)(void *), (*discard)(void *);
    void *arg;
    struct job *next;
} job;

struct llmr_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    size_t queued, running;
    int stopping, n;
    pthread_t th[64];
};

static void *worker(void *arg) {
    llmr_workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
        if (w->stopping) break;
        job *j = w->head;
        w->head = j->next;
        if (!w->head) w->tail = NULL;
        w->queued--;
        w->running++;
        pthread_mutex_unlock(&w->mu);
        j->run(j->arg);
        free(j);
        pthread_mutex_lock(&w->mu);
        w->running--;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

llmr_workers *llmr_workers_create(int n) {
    if (n < 1 || n > 64) return NULL;
    llmr_workers *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    for (; w->n < n; w->n++)
        if (pthread_create(&w->th[w->n], NULL, worker, w) != 0) break;
    if (w->n == 0) { llmr_workers_destroy(w); return NULL; }
    return w;
}

int llmr_workers_submit(llmr_workers *w, void (*run)(void *), void (*discard)(void *), void *arg) {
    job *j = calloc(1, sizeof *j);
    if (!j) return -1;
    j->run = run;
    j->discard = discard;
    j->arg = arg;
    pthread_mutex_lock(&w->mu);
    if (w->stopping) { pthread_mutex_unlock(&w->mu); free(j); return -1; }
    if (w->tail) w->tail->next = j;
    else w->head = j;
    w->tail = j;
    w->queued++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

size_t llmr_workers_pending(llmr_workers *w) {
    pthread_mutex_lock(&w->mu);
    size_t n = w->queued + w->running;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void llmr_workers_destroy(llmr_workers *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    job *j = w->head;
    w->head = w->tail = NULL;
    w->queued = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    while (j) {
        job *next = j->next;
        if (j->discard) j->discard(j->arg);
        free(j);
        j = next;
    }
    for (int i = 0; i < w->n; i++) pthread_join(w->th[i], NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
