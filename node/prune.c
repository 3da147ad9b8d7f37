/* prune.c — see prune.h. The queue is a short list of ids; a run copies it, decides for each id
 * without the lock (the hooks take other locks: the model table, the sync jobs, the EngineHost),
 * then takes the decided ids off the queue. */
#include "node/prune.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path_safety.h"
#include "node/model_storage.h"

typedef struct item {
    char *id;
    int waiting_logged;          /* bits: GRACE_LOGGED, BUSY_LOGGED (each said once, not every run) */
    double not_before;           /* monotonic seconds: the grace period ends */
    struct item *next;
} item;

struct llmr_pruner {
    pthread_mutex_t mu;
    char *models_dir;
    llmr_prune_hooks hooks;
    item *queue;
    llmr_prune_stats stats;
    char *ledger_path;           /* NULL: no ledger */
    json_t *owned;               /* array of ids (the ledger's content) */
};

static long owned_index(json_t *owned, const char *id);

llmr_pruner *llmr_pruner_create(const char *models_dir, const llmr_prune_hooks *hooks) {
    if (!models_dir || !hooks || !hooks->is_registered || !hooks->busy) return NULL;
    llmr_pruner *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (!(p->models_dir = strdup(models_dir))) { free(p); return NULL; }
    p->hooks = *hooks;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void llmr_pruner_destroy(llmr_pruner *p) {
    if (!p) return;
    for (item *it = p->queue, *next; it; it = next) {
        next = it->next;
        int owned = p->ledger_path && owned_index(p->owned, it->id) >= 0;
        log_warn("model %s: node stopping before its files were removed: %s/%s %s", it->id, p->models_dir, it->id,
                 owned ? "is removed after the next start" : "stays");
        free(it->id);
        free(it);
    }
    pthread_mutex_destroy(&p->mu);
    free(p->models_dir);
    free(p->ledger_path);
    json_decref(p->owned);
    free(p);
}

/* ---- the ledger ----------------------------------------------------------------------------------- */

static long owned_index(json_t *owned, const char *id) {
    size_t i;
    json_t *v;
    json_array_foreach(owned, i, v) if (strcmp(json_string_value(v), id) == 0) return (long)i;
    return -1;
}

/* Writes the ledger atomically (temporary file, then rename). Lock held. */
static int ledger_write_locked(llmr_pruner *p) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", p->ledger_path);
    json_t *doc = json_pack("{sO}", "models", p->owned);
    int rc = doc && json_dump_file(doc, tmp, JSON_INDENT(1)) == 0 && rename(tmp, p->ledger_path) == 0 ? 0 : -1;
    if (rc != 0) {
        log_error("cannot write %s: %s (folders of deleted models may be left behind after a restart)", p->ledger_path,
                  strerror(errno));
        unlink(tmp);
    }
    json_decref(doc);
    return rc;
}

int llmr_pruner_open_ledger(llmr_pruner *p, const char *path, char *err, size_t es) {
    json_t *owned = json_array();
    char *copy = strdup(path);
    if (!owned || !copy) { json_decref(owned); free(copy); snprintf(err, es, "out of memory"); return -1; }
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc && access(path, F_OK) == 0) {
        snprintf(err, es, "%s: not valid JSON: %s (line %d)", path, je.text, je.line);
        json_decref(owned); free(copy);
        return -1;
    }
    json_t *models = json_object_get(doc, "models");
    if (doc && !json_is_array(models)) {
        snprintf(err, es, "%s: no \"models\" array", path);
        json_decref(doc); json_decref(owned); free(copy);
        return -1;
    }
    size_t i;
    json_t *v;
    char why[256];
    json_array_foreach(models, i, v) /* only ids that could name a folder under models_dir */
        if (json_is_string(v) && llmr_path_is_safe(json_string_value(v), why, sizeof why) &&
            owned_index(owned, json_string_value(v)) < 0)
            json_array_append(owned, v);
    json_decref(doc);
    pthread_mutex_lock(&p->mu);
    free(p->ledger_path);
    json_decref(p->owned);
    p->ledger_path = copy;
    p->owned = owned;
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int llmr_pruner_own(llmr_pruner *p, const char *id) {
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (p->ledger_path && owned_index(p->owned, id) < 0) {
        json_array_append_new(p->owned, json_string(id));
        rc = ledger_write_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int llmr_pruner_owns(llmr_pruner *p, const char *id) {
    pthread_mutex_lock(&p->mu);
    int owns = p->ledger_path && owned_index(p->owned, id) >= 0;
    pthread_mutex_unlock(&p->mu);
    return owns;
}

/* Drops id from the ledger once its folder is gone. Lock held. */
static void disown_locked(llmr_pruner *p, const char *id) {
    long i = p->ledger_path ? owned_index(p->owned, id) : -1;
    if (i < 0) return;
    json_array_remove(p->owned, (size_t)i);
    ledger_write_locked(p);
}

size_t llmr_pruner_queue_orphans(llmr_pruner *p, json_t *listed, double delay_s) {
    json_t *ids = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->owned) ids = json_deep_copy(p->owned);
    pthread_mutex_unlock(&p->mu);
    size_t i, n = 0;
    json_t *v;
    json_array_foreach(ids, i, v) {
        const char *id = json_string_value(v);
        size_t k;
        json_t *w;
        int found = 0;
        json_array_foreach(listed, k, w) if (json_is_string(w) && strcmp(json_string_value(w), id) == 0) found = 1;
        if (found) continue;
        log_info("model %s is no longer registered at the router (deleted while this node was down?): its files in "
                 "%s/%s will be removed", id, p->models_dir, id);
        if (llmr_pruner_add(p, id, delay_s) == 0) n++;
    }
    json_decref(ids);
    return n;
}

static item **find_locked(llmr_pruner *p, const char *id) {
    item **pp = &p->queue;
    while (*pp && strcmp((*pp)->id, id) != 0) pp = &(*pp)->next;
    return pp;
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int llmr_pruner_add(llmr_pruner *p, const char *id, double delay_s) {
    double at = mono_now() + (delay_s > 0 ? delay_s : 0);
    pthread_mutex_lock(&p->mu);
    item **pp = find_locked(p, id);
    int rc = 0;
    if (!*pp) {
        item *it = calloc(1, sizeof *it);
        if (it && (it->id = strdup(id))) { it->not_before = at; *pp = it; } /* appended: run in the order asked */
        else { free(it); rc = -1; }
    } else if (at < (*pp)->not_before) {
        (*pp)->not_before = at;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* Unlinks and frees id's item; 1 when it was there. Lock held. */
static int drop_locked(llmr_pruner *p, const char *id) {
    item **pp = find_locked(p, id), *it = *pp;
    if (!it) return 0;
    *pp = it->next;
    free(it->id);
    free(it);
    return 1;
}

int llmr_pruner_expedite(llmr_pruner *p, const char *id) {
    pthread_mutex_lock(&p->mu);
    item *it = *find_locked(p, id);
    if (it) it->not_before = 0;
    pthread_mutex_unlock(&p->mu);
    return it != NULL;
}

int llmr_pruner_cancel(llmr_pruner *p, const char *id) {
    pthread_mutex_lock(&p->mu);
    int was = drop_locked(p, id);
    pthread_mutex_unlock(&p->mu);
    return was;
}

size_t llmr_pruner_pending(llmr_pruner *p) {
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (item *it = p->queue; it; it = it->next) n++;
    pthread_mutex_unlock(&p->mu);
    return n;
}

json_t *llmr_pruner_pending_json(llmr_pruner *p) {
    json_t *a = json_array();
    if (!a) return NULL;
    pthread_mutex_lock(&p->mu);
    for (item *it = p->queue; it; it = it->next) json_array_append_new(a, json_string(it->id));
    pthread_mutex_unlock(&p->mu);
    return a;
}

void llmr_pruner_stats(llmr_pruner *p, llmr_prune_stats *out) {
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    pthread_mutex_unlock(&p->mu);
}

typedef enum { WAIT, KEEP, REMOVED, FAILED } verdict;
#define GRACE_LOGGED 1
#define BUSY_LOGGED 2

/* Decides and acts for one id, without the lock. */
static verdict prune_one(llmr_pruner *p, const char *id, int *logged, double not_before, llmr_storage_removal *rm) {
    char why[512] = "", err[1024];
    if (p->hooks.is_registered(p->hooks.user, id)) {
        log_info("model %s is registered again: its files in %s/%s are kept", id, p->models_dir, id);
        return KEEP;
    }
    double left = not_before - mono_now();
    if (left > 0) {
        if (!(*logged & GRACE_LOGGED))
            log_info("model %s: removing its files in %.0f s unless the router lists it again", id, left);
        *logged |= GRACE_LOGGED;
        return WAIT;
    }
    if (p->hooks.busy(p->hooks.user, id, why, sizeof why)) {
        if (!(*logged & BUSY_LOGGED)) log_info("model %s: deleting its files once %s", id, why);
        *logged |= BUSY_LOGGED;
        return WAIT;
    }
    llmr_storage_status st = llmr_storage_remove(p->models_dir, id, rm, err, sizeof err);
    if (st != LLMR_STORAGE_OK) {
        log_error("model %s: files not fully removed (%llu bytes in %zu file(s) freed): %s", id,
                  (unsigned long long)rm->bytes, rm->files, err);
        return FAILED;
    }
    if (rm->files || rm->dirs)
        log_info("model %s deleted at the router: removed %s/%s (%zu file(s), %zu folder(s)), %llu bytes (%.2f GiB) freed", id,
                 p->models_dir, id, rm->files, rm->dirs, (unsigned long long)rm->bytes, (double)rm->bytes / (1 << 30));
    else log_info("model %s deleted at the router: no files in %s/%s to remove", id, p->models_dir, id);
    return REMOVED;
}

size_t llmr_pruner_run(llmr_pruner *p) {
    /* A copy of the queue's ids, so the hooks run without our lock. */
    pthread_mutex_lock(&p->mu);
    size_t n = 0;
    for (item *it = p->queue; it; it = it->next) n++;
    char **ids = calloc(n ? n : 1, sizeof *ids);
    int *logged = calloc(n ? n : 1, sizeof *logged);
    double *not_before = calloc(n ? n : 1, sizeof *not_before);
    size_t k = 0;
    for (item *it = p->queue; ids && logged && not_before && it; it = it->next, k++) {
        ids[k] = strdup(it->id);
        logged[k] = it->waiting_logged;
        not_before[k] = it->not_before;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; ids && logged && not_before && i < n; i++) {
        if (!ids[i]) continue;
        llmr_storage_removal rm = {0, 0, 0};
        verdict v = prune_one(p, ids[i], &logged[i], not_before[i], &rm);
        pthread_mutex_lock(&p->mu);
        item *it = *find_locked(p, ids[i]);
        if (v == WAIT) {
            if (it) it->waiting_logged = logged[i];
        } else if (it) {
            drop_locked(p, ids[i]);
            if (v == REMOVED) disown_locked(p, ids[i]);
            p->stats.bytes_freed += rm.bytes;
            if (v == KEEP) p->stats.kept++;
            else if (v == REMOVED) p->stats.models_removed++;
            else p->stats.failures++;
        }
        pthread_mutex_unlock(&p->mu);
    }
    for (size_t i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
    free(logged);
    free(not_before);
    return llmr_pruner_pending(p);
}
