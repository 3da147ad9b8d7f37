/* models.c — see models.h. A small array kept sorted by id under one mutex: a node holds a handful
 * of models, so lookups by binary search and copies out are cheap and keep locking trivial. */
#include "node/models.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct llmr_models {
    pthread_mutex_t mu;
    llmr_model_view *v;
    size_t n, cap;
    uint64_t next_generation;
};

static const char *const state_names[LLMR_MODEL_STATE_COUNT] = {
    "pending", "downloading", "verifying", "loading", "ready", "unsupported", "failed"};

const char *llmr_model_state_name(llmr_model_state s) {
    return ((unsigned)s < LLMR_MODEL_STATE_COUNT) ? state_names[s] : "unknown";
}

int llmr_model_state_parse(const char *s) {
    for (int i = 0; s && i < LLMR_MODEL_STATE_COUNT; i++)
        if (strcmp(s, state_names[i]) == 0) return i;
    return -1;
}

int llmr_model_transition_ok(llmr_model_state from, llmr_model_state to) {
    if ((unsigned)from >= LLMR_MODEL_STATE_COUNT || (unsigned)to >= LLMR_MODEL_STATE_COUNT) return 0;
    if (from == to) return 1;
    switch (from) {
    case LLMR_MODEL_PENDING:
        return to == LLMR_MODEL_DOWNLOADING || to == LLMR_MODEL_VERIFYING || to == LLMR_MODEL_UNSUPPORTED ||
               to == LLMR_MODEL_FAILED;
    case LLMR_MODEL_DOWNLOADING:
        return to == LLMR_MODEL_VERIFYING || to == LLMR_MODEL_FAILED;
    case LLMR_MODEL_VERIFYING:
        return to == LLMR_MODEL_LOADING || to == LLMR_MODEL_DOWNLOADING || to == LLMR_MODEL_UNSUPPORTED ||
               to == LLMR_MODEL_FAILED;
    case LLMR_MODEL_LOADING:
        return to == LLMR_MODEL_READY || to == LLMR_MODEL_FAILED;
    case LLMR_MODEL_READY:
        return to == LLMR_MODEL_LOADING || to == LLMR_MODEL_FAILED;
    case LLMR_MODEL_UNSUPPORTED:
    case LLMR_MODEL_FAILED:
        return to == LLMR_MODEL_PENDING;
    }
    return 0;
}

llmr_models *llmr_models_create(void) {
    llmr_models *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->next_generation = 1;
    return m;
}

void llmr_models_destroy(llmr_models *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m->v);
    free(m);
}

/* Binary search; returns the index of id, or -(insertion point) - 1. Caller holds the lock. */
static long find(const llmr_models *m, const char *id) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(m->v[mid].id, id);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -(long)lo - 1;
}

int llmr_models_add(llmr_models *m, const char *id, uint64_t *generation_out) {
    if (!m || !id || !*id || strlen(id) >= LLMR_MODEL_ID_MAX) return -1;
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i >= 0) {
        if (generation_out) *generation_out = m->v[i].generation;
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        llmr_model_view *nv = realloc(m->v, cap * sizeof *nv);
        if (!nv) { pthread_mutex_unlock(&m->mu); return -1; }
        m->v = nv;
        m->cap = cap;
    }
    size_t at = (size_t)(-i - 1);
    memmove(&m->v[at + 1], &m->v[at], (m->n - at) * sizeof *m->v);
    memset(&m->v[at], 0, sizeof *m->v);
    snprintf(m->v[at].id, sizeof m->v[at].id, "%s", id);
    m->v[at].state = LLMR_MODEL_PENDING;
    m->v[at].generation = m->next_generation++;
    m->n++;
    if (generation_out) *generation_out = m->v[at].generation;
    pthread_mutex_unlock(&m->mu);
    return 1;
}

int llmr_models_remove(llmr_models *m, const char *id) {
    if (!m || !id) return 0;
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i >= 0) {
        memmove(&m->v[i], &m->v[i + 1], (m->n - (size_t)i - 1) * sizeof *m->v);
        m->n--;
    }
    pthread_mutex_unlock(&m->mu);
    return i >= 0;
}

int llmr_models_set_state(llmr_models *m, const char *id, llmr_model_state to, char *err, size_t err_size,
                          const char *reason_fmt, ...) {
    if (!m || !id) { if (err && err_size) snprintf(err, err_size, "no model table or id"); return -1; }
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i < 0) {
        pthread_mutex_unlock(&m->mu);
        if (err && err_size) snprintf(err, err_size, "unknown model %s", id);
        return -1;
    }
    llmr_model_view *v = &m->v[i];
    if (!llmr_model_transition_ok(v->state, to)) {
        if (err && err_size)
            snprintf(err, err_size, "model %s: illegal transition %s -> %s", id, llmr_model_state_name(v->state),
                     llmr_model_state_name(to));
        pthread_mutex_unlock(&m->mu);
        return -1;
    }
    v->state = to;
    v->reason[0] = '\0';
    if (reason_fmt) {
        va_list ap;
        va_start(ap, reason_fmt);
        vsnprintf(v->reason, sizeof v->reason, reason_fmt, ap);
        va_end(ap);
    }
    if (to != LLMR_MODEL_DOWNLOADING && to != LLMR_MODEL_VERIFYING) {
        v->has_progress = 0;
        memset(&v->progress, 0, sizeof v->progress);
    }
    if (to != LLMR_MODEL_READY) v->loaded = 0;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

void llmr_models_set_progress(llmr_models *m, const char *id, const llmr_model_progress *p) {
    if (!m || !id || !p) return;
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i >= 0) {
        m->v[i].progress = *p;
        m->v[i].progress.file[sizeof m->v[i].progress.file - 1] = '\0';
        m->v[i].has_progress = 1;
    }
    pthread_mutex_unlock(&m->mu);
}

void llmr_models_set_engine(llmr_models *m, const char *id, const char *engine, int loaded) {
    if (!m || !id) return;
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i >= 0) {
        snprintf(m->v[i].engine, sizeof m->v[i].engine, "%s", engine ? engine : "");
        m->v[i].loaded = loaded ? 1 : 0;
    }
    pthread_mutex_unlock(&m->mu);
}

int llmr_models_get(llmr_models *m, const char *id, llmr_model_view *out) {
    if (!m || !id || !out) return -1;
    pthread_mutex_lock(&m->mu);
    long i = find(m, id);
    if (i >= 0) *out = m->v[i];
    pthread_mutex_unlock(&m->mu);
    return i >= 0 ? 0 : -1;
}

long llmr_models_snapshot(llmr_models *m, llmr_model_view **out) {
    *out = NULL;
    if (!m) return 0;
    pthread_mutex_lock(&m->mu);
    long n = (long)m->n;
    if (n > 0) {
        *out = malloc((size_t)n * sizeof **out);
        if (!*out) n = -1;
        else memcpy(*out, m->v, (size_t)n * sizeof **out);
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

void llmr_models_count(llmr_models *m, size_t counts[LLMR_MODEL_STATE_COUNT]) {
    memset(counts, 0, LLMR_MODEL_STATE_COUNT * sizeof counts[0]);
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++) counts[m->v[i].state]++;
    pthread_mutex_unlock(&m->mu);
}

json_t *llmr_model_view_json(const llmr_model_view *v) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "id", json_string(v->id));
    json_object_set_new(o, "state", json_string(llmr_model_state_name(v->state)));
    if (v->reason[0]) json_object_set_new(o, "reason", json_string(v->reason));
    if (v->engine[0]) json_object_set_new(o, "engine", json_string(v->engine));
    json_object_set_new(o, "loaded", json_boolean(v->loaded));
    if (v->has_progress) {
        const llmr_model_progress *p = &v->progress;
        json_t *pj = json_object();
        double pct = p->bytes_total ? 100.0 * (double)p->bytes_done / (double)p->bytes_total : 0.0;
        json_object_set_new(pj, "bytes_done", json_integer((json_int_t)p->bytes_done));
        json_object_set_new(pj, "bytes_total", json_integer((json_int_t)p->bytes_total));
        json_object_set_new(pj, "percent", json_real(pct));
        json_object_set_new(pj, "bytes_per_second", json_real(p->bytes_per_second));
        if (p->eta_seconds >= 0) json_object_set_new(pj, "eta_seconds", json_real(p->eta_seconds));
        if (p->file[0]) json_object_set_new(pj, "file", json_string(p->file));
        json_object_set_new(o, "progress", pj);
    }
    return o;
}

json_t *llmr_models_json(llmr_models *m) {
    llmr_model_view *views;
    long n = llmr_models_snapshot(m, &views);
    if (n < 0) return NULL;
    json_t *arr = json_array();
    for (long i = 0; arr && i < n; i++) json_array_append_new(arr, llmr_model_view_json(&views[i]));
    free(views);
    return arr;
}
