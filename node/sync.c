/* sync.c — see sync.h. One thread reconciles the router's list with the model table; each model's
 * pipeline runs as one job on the download workers (so --max-parallel-downloads bounds the models
 * fetched at once). Jobs are listed here so a deletion or shutdown can cancel them. */
#include "node/sync.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/path_safety.h"
#include "node/downloader.h"
#include "node/generate.h"
#include "node/manifest.h"
#include "node/model_storage.h"
#include "node/prune.h"
#include "node/workers.h"

typedef struct job {
    llmr_sync *s;
    char id[LLMR_MODEL_ID_MAX];
    llmr_manifest *mf;
    atomic_int cancel;
    struct job *next;
} job;

struct llmr_sync {
    llmr_node *n;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake, after_reg, stopping, retry_failed;
    json_t *pushed;        /* latest pushed list, owned; NULL when none waiting */
    json_t *retry;         /* ids named by "registered" notices: retried when failed */
    json_t *deleted;       /* ids named by "deleted" notices: their files go without a grace period */
    job *jobs;
    llmr_workers *workers;
    llmr_pruner *pruner;   /* deletions of deleted models' folders, and the ledger of folders we made */
    int keep;              /* --keep-deleted-models: nothing is ever queued for deletion */
    int orphans_checked;   /* the first list after start was compared with the ledger */
    int poll_refused_logged;
};

/* ---- model lists ---------------------------------------------------------------------------- */

static void add_id(json_t *out, json_t *v) {
    const char *id = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "id"));
    char why[128];
    if (!id || strlen(id) >= LLMR_MODEL_ID_MAX || !llmr_path_is_safe(id, why, sizeof why)) return;
    json_array_append_new(out, json_string(id));
}

json_t *llmr_sync_parse_model_list(json_t *doc) {
    json_t *arr = json_is_array(doc) ? doc : NULL;
    if (!arr && json_is_object(doc)) {
        arr = json_object_get(doc, "models");
        if (!json_is_array(arr)) arr = json_object_get(doc, "data");
    }
    if (!json_is_array(arr)) return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) add_id(out, v);
    return out;
}

static int list_has(json_t *list, const char *id) {
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (strcmp(json_string_value(v), id) == 0) return 1;
    return 0;
}

/* ---- pipeline job --------------------------------------------------------------------------- */

static void job_unlist(job *j) {
    llmr_sync *s = j->s;
    pthread_mutex_lock(&s->mu);
    for (job **p = &s->jobs; *p; p = &(*p)->next)
        if (*p == j) { *p = j->next; break; }
    pthread_mutex_unlock(&s->mu);
    llmr_manifest_free(j->mf);
    free(j);
}

static int has_job(llmr_sync *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    int found = 0;
    for (job *j = s->jobs; j && !found; j = j->next) found = strcmp(j->id, id) == 0;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static void cancel_job(llmr_sync *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    for (job *j = s->jobs; j; j = j->next)
        if (strcmp(j->id, id) == 0) atomic_store(&j->cancel, 1);
    pthread_mutex_unlock(&s->mu);
}

static void on_progress(void *user, const llmr_model_progress *p) {
    job *j = user;
    llmr_models_set_progress(j->s->n->models, j->id, p);
}

static const char *node_backend(llmr_node *n) { return llmr_gpu_inventory_backend(n->gpus); }

/* Moves the job's model to a state; logs when the move is refused (a bug, or the model was deleted). */
#define SET(j, st, ...) set_state((j), (st), __VA_ARGS__)
static int set_state(job *j, llmr_model_state st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_state(job *j, llmr_model_state st, const char *fmt, ...) {
    char reason[LLMR_MODEL_REASON_MAX] = "", err[512];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(reason, sizeof reason, fmt, ap);
        va_end(ap);
    }
    if (atomic_load(&j->cancel)) return -1;
    if (llmr_models_set_state(j->s->n->models, j->id, st, err, sizeof err, fmt ? "%s" : NULL, reason) != 0) {
        log_debug("%s", err);
        return -1;
    }
    if (st == LLMR_MODEL_FAILED) log_error("model %s failed: %s", j->id, reason);
    else if (st == LLMR_MODEL_UNSUPPORTED) log_warn("model %s unsupported: %s", j->id, reason);
    else log_info("model %s: %s", j->id, llmr_model_state_name(st));
    return 0;
}

static void run_job(void *arg) {
    job *j = arg;
    llmr_node *n = j->s->n;
    llmr_manifest *mf = j->mf;
    char dir[4096], err[2048], path[4200];
    llmr_node_model_dir(n, j->id, dir, sizeof dir);
    /* The snapshot's files plus the official artifacts for this node's backend. */
    size_t nf = 0, cap = mf->n_files + mf->n_artifacts;
    llmr_manifest_file *files = calloc(cap ? cap : 1, sizeof *files);
    int *present = calloc(cap ? cap : 1, sizeof *present);
    llmr_storage_artifact_in *arts = calloc(mf->n_artifacts ? mf->n_artifacts : 1, sizeof *arts);
    char (*art_paths)[4200] = calloc(mf->n_artifacts ? mf->n_artifacts : 1, sizeof *art_paths);
    llmr_storage_model *sm = NULL;
    if (!files || !present || !arts || !art_paths) { SET(j, LLMR_MODEL_FAILED, "out of memory"); goto out; }
    for (size_t i = 0; i < mf->n_files; i++) files[nf++] = mf->files[i];
    for (size_t i = 0; i < mf->n_artifacts; i++)
        if (strcmp(mf->artifacts[i].backend, node_backend(n)) == 0) files[nf++] = mf->artifacts[i];
    int missing = 0;
    struct stat sb;
    for (size_t i = 0; i < nf; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        present[i] = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        missing |= !present[i];
    }
    llmr_httpc_opts co = {.connect_timeout_ms = 10000, .retries = 5, .backoff_ms = 500, .backoff_max_ms = 10000,
                          .low_speed_time_s = 60, .user_agent = "llmr-node/0.1"};
    llmr_httpc *http = llmr_httpc_create(&co);
    llmr_dl_opts o = {.client = http, .model_dir = dir, .label = j->id, .cancel = &j->cancel,
                      .progress = on_progress, .progress_user = j, .streams = n->cfg.download_streams};
    llmr_dl_report rep;
    llmr_dl_status st;
    if (!http) { SET(j, LLMR_MODEL_FAILED, "out of memory"); goto out; }
    for (int round = 0; round < 2; round++) {
        if (missing) {
            if (SET(j, LLMR_MODEL_DOWNLOADING, NULL)) goto out_http;
            st = llmr_dl_fetch(&o, files, nf, &rep, err, sizeof err);
            atomic_fetch_add(&n->downloads_bytes, rep.bytes_fetched);
            atomic_fetch_add(&n->verify_failures, rep.refetched); /* each refetch followed a mismatch */
            if (st == LLMR_DL_ECANCELLED) goto out_http;
            if (st != LLMR_DL_OK) {
                atomic_fetch_add(&n->downloads_failed, 1);
                if (st == LLMR_DL_EVERIFY) atomic_fetch_add(&n->verify_failures, 1);
                SET(j, LLMR_MODEL_FAILED, "%s", err);
                goto out_http;
            }
            log_info("model %s: %zu file(s) fetched (%llu bytes), %zu already present%s%s", j->id, rep.fetched,
                     (unsigned long long)rep.bytes_fetched, rep.present, rep.warnings[0] ? "; " : "", rep.warnings);
        }
        if (SET(j, LLMR_MODEL_VERIFYING, NULL)) goto out_http;
        /* Files that were on disk before this run have not been hashed yet. */
        missing = 0;
        for (size_t i = 0; i < nf; i++) {
            if (!present[i]) continue;
            present[i] = 0;
            st = llmr_dl_verify(&o, &files[i], err, sizeof err);
            if (st == LLMR_DL_ECANCELLED) goto out_http;
            if (st == LLMR_DL_OK) continue;
            atomic_fetch_add(&n->verify_failures, 1);
            if (st != LLMR_DL_EVERIFY && !files[i].optional) { SET(j, LLMR_MODEL_FAILED, "%s", err); goto out_http; }
            log_warn("model %s: %s; fetching it again", j->id, err);
            missing = 1;
        }
        if (!missing) break;
    }
    /* Artifacts that made it (optional ones may have failed). */
    size_t na = 0;
    for (size_t i = mf->n_files; i < nf; i++) {
        snprintf(art_paths[na], sizeof art_paths[na], "%s/%s", dir, files[i].name);
        if (stat(art_paths[na], &sb) != 0) continue;
        arts[na] = (llmr_storage_artifact_in){files[i].name, art_paths[na], files[i].backend};
        na++;
    }
    llmr_storage_status vs = llmr_storage_validate(dir, j->id, mf->format, arts, na, &sm, err, sizeof err);
    if (vs != LLMR_STORAGE_OK) { SET(j, LLMR_MODEL_FAILED, "validation: %s", err); goto out_http; }
    char engine[128];
    llmr_engine_status es = llmr_node_engines_select(n->engines, sm, engine, sizeof engine, err, sizeof err);
    if (es == LLMR_ENGINE_UNSUPPORTED) { SET(j, LLMR_MODEL_UNSUPPORTED, "%s", err); goto out_http; }
    if (es != LLMR_ENGINE_OK) { SET(j, LLMR_MODEL_FAILED, "engine selection: %s", err); goto out_http; }
    llmr_models_set_engine(n->models, j->id, engine, 0);
    if (SET(j, LLMR_MODEL_LOADING, NULL)) goto out_http;
    es = llmr_node_engines_load(n->engines, sm, engine, sizeof engine, err, sizeof err);
    if (es != LLMR_ENGINE_OK) {
        SET(j, LLMR_MODEL_FAILED, "load with %s: %s: %s", engine[0] ? engine : "engine", llmr_engine_status_name(es), err);
        goto out_http;
    }
    if (SET(j, LLMR_MODEL_READY, NULL) == 0) llmr_models_set_engine(n->models, j->id, engine, 1);
out_http:
    llmr_httpc_destroy(http);
out:
    llmr_storage_model_free(sm);
    free(files);
    free(present);
    free(arts);
    free(art_paths);
    job_unlist(j);
}

static void discard_job(void *arg) { job_unlist(arg); }

/* ---- per model decisions (sync thread) -------------------------------------------------------- */

static llmr_manifest *fetch_manifest(llmr_sync *s, const char *id, int *transient, char *err, size_t es) {
    llmr_node *n = s->n;
    char *enc = llmr_url_encode(id, 1), path[1200], why[1024];
    *transient = 0;
    if (!enc) { snprintf(err, es, "out of memory"); *transient = 1; return NULL; }
    snprintf(path, sizeof path, "/v0/models/registry/%s/manifest.json", enc);
    free(enc);
    llmr_httpc_resp resp = {0};
    llmr_manifest *mf = NULL;
    llmr_httpc_status st = llmr_router_client_call(n->router, "GET", path, NULL, 0, &resp, why, sizeof why);
    if (st != LLMR_HTTPC_OK) {
        snprintf(err, es, "manifest: %s", why);
        *transient = 1;
    } else if (resp.status != 200) {
        llmr_router_error_message(&resp, why, sizeof why);
        snprintf(err, es, "manifest: GET %.400s: HTTP %ld: %.1000s", path, resp.status, why);
        *transient = resp.status == 401 || resp.status >= 500;
    } else if (llmr_router_client_trace(n->router, "manifest", resp.body, resp.body_len),
               llmr_manifest_parse(resp.body, resp.body_len, &mf, why, sizeof why) != 0) {
        snprintf(err, es, "manifest of %s: %s", id, why);
    } else if (strcmp(mf->id, id) != 0) {
        snprintf(err, es, "manifest of %s names another model (%s)", id, mf->id);
        llmr_manifest_free(mf);
        mf = NULL;
    } else {
        atomic_fetch_add(&n->manifests_fetched, 1);
    }
    llmr_httpc_resp_free(&resp);
    return mf;
}

/* Takes a pending model further: manifest, engine pre-check, then a pipeline job. */
static void start_model(llmr_sync *s, const char *id) {
    llmr_node *n = s->n;
    char err[2048];
    int transient;
    if (has_job(s, id)) return;
    llmr_manifest *mf = fetch_manifest(s, id, &transient, err, sizeof err);
    if (!mf) {
        if (transient) { log_warn("model %s: %s (retried at the next sync)", id, err); return; }
        llmr_models_set_state(n->models, id, LLMR_MODEL_FAILED, NULL, 0, "%s", err);
        log_error("model %s failed: %s", id, err);
        return;
    }
    if (llmr_node_engines_precheck(n->engines, mf, err, sizeof err) != 0) {
        llmr_models_set_state(n->models, id, LLMR_MODEL_UNSUPPORTED, NULL, 0, "%s", err);
        log_warn("model %s unsupported: %s", id, err);
        llmr_manifest_free(mf);
        return;
    }
    job *j = calloc(1, sizeof *j);
    if (!j) { llmr_manifest_free(mf); return; }
    j->s = s;
    j->mf = mf;
    snprintf(j->id, sizeof j->id, "%s", id);
    llmr_pruner_own(s->pruner, id); /* before the first byte: a crash mid-download still leaves it listed */
    pthread_mutex_lock(&s->mu);
    j->next = s->jobs;
    s->jobs = j;
    pthread_mutex_unlock(&s->mu);
    if (llmr_workers_submit(s->workers, run_job, discard_job, j) != 0) job_unlist(j);
}

/* A model merely missing from a list (a poll, a heartbeat answer, another model's notice) waits
 * --prune-grace seconds before its files go: a router answering with a short list by mistake (a
 * registry read that failed) must not cost every node its downloads. A "deleted" notice naming it is
 * acted on at once. */
static double prune_grace(const llmr_sync *s) { return s->n->cfg.prune_grace_s; }

static void reconcile(llmr_sync *s, json_t *list, json_t *retry, json_t *deleted, int retry_failed, int after_reg) {
    llmr_node *n = s->n;
    llmr_model_view *views;
    long nv = llmr_models_snapshot(n->models, &views);
    for (long i = 0; i < nv; i++) {
        if (list_has(list, views[i].id)) continue;
        cancel_job(s, views[i].id);
        llmr_node_engines_unload(n->engines, views[i].id); /* open sessions drain first */
        llmr_generate_forget(n->generate, views[i].id);
        llmr_models_remove(n->models, views[i].id);
        double grace = deleted && list_has(deleted, views[i].id) ? 0 : prune_grace(s);
        if (!s->keep && llmr_pruner_add(s->pruner, views[i].id, grace) == 0)
            log_info("model %s is no longer registered at the router: forgotten, its files in %s/%s will be removed",
                     views[i].id, n->cfg.models_dir, views[i].id);
        else
            log_info("model %s is no longer registered at the router: forgotten (its files stay in %s/%s%s)", views[i].id,
                     n->cfg.models_dir, views[i].id, s->keep ? ", --keep-deleted-models" : ": out of memory");
    }
    free(views);
    /* A model that went missing from an earlier list (a heartbeat answer can beat the push) and is
     * now named by a "deleted" notice: no grace any more. */
    size_t di;
    json_t *dv;
    json_array_foreach(deleted, di, dv)
        if (!list_has(list, json_string_value(dv))) llmr_pruner_expedite(s->pruner, json_string_value(dv));
    /* Once per start: folders this node made for models the router dropped while it was down. */
    if (!s->orphans_checked) {
        s->orphans_checked = 1;
        if (!s->keep) llmr_pruner_queue_orphans(s->pruner, list, prune_grace(s));
    }
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        const char *id = json_string_value(v);
        llmr_model_view mv;
        llmr_pruner_cancel(s->pruner, id); /* registered again before its files went: kept */
        if (llmr_models_add(n->models, id, NULL) == 1) log_info("model %s: new at the router", id);
        if (llmr_models_get(n->models, id, &mv) != 0) continue;
        int again = (mv.state == LLMR_MODEL_FAILED && (retry_failed || (retry && list_has(retry, id)))) ||
                    (mv.state == LLMR_MODEL_UNSUPPORTED && after_reg);
        if (again && !has_job(s, id)) {
            llmr_models_set_state(n->models, id, LLMR_MODEL_PENDING, NULL, 0, NULL);
            mv.state = LLMR_MODEL_PENDING;
        }
        if (mv.state == LLMR_MODEL_PENDING) start_model(s, id);
    }
}

/* GET /v0/models with the node token. NULL when unavailable (logged). */
static json_t *poll_list(llmr_sync *s) {
    llmr_httpc_resp resp = {0};
    char why[1024];
    json_t *list = NULL;
    if (llmr_router_client_call(s->n->router, "GET", "/v0/models", NULL, 0, &resp, why, sizeof why) != LLMR_HTTPC_OK) {
        log_warn("model poll: %s", why);
    } else if (resp.status != 200) {
        llmr_router_error_message(&resp, why, sizeof why);
        if (resp.status == 401 || !s->poll_refused_logged)
            log_warn("model poll: GET /v0/models: HTTP %ld: %s%s", resp.status, why,
                     resp.status == 403 ? " (relying on the router's pushes)" : "");
        s->poll_refused_logged = 1;
    } else {
        llmr_router_client_trace(s->n->router, "model-list", resp.body, resp.body_len);
        json_t *doc = json_loadb(resp.body, resp.body_len, 0, NULL);
        list = llmr_sync_parse_model_list(doc);
        json_decref(doc);
        if (!list) log_warn("model poll: GET /v0/models: no model list in the answer");
    }
    llmr_httpc_resp_free(&resp);
    return list;
}

static int interval_s(llmr_sync *s) {
    if (s->n->cfg.sync_interval_s > 0) return s->n->cfg.sync_interval_s;
    llmr_router_settings rs;
    llmr_router_client_settings(s->n->router, &rs);
    return rs.sync_interval_s > 0 ? rs.sync_interval_s : 30;
}

static void *sync_main(void *arg) {
    llmr_sync *s = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        /* While deletions wait (for a cancelled download to stop, for sessions to end) the thread
         * looks at them every 200 ms; the poll keeps its own schedule. */
        int pruning = llmr_pruner_pending(s->pruner) > 0;
        struct timespec until = next;
        if (pruning) {
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_nsec += 200 * 1000000L;
            if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
            if (until.tv_sec > next.tv_sec || (until.tv_sec == next.tv_sec && until.tv_nsec > next.tv_nsec)) until = next;
        }
        while (!s->wake && !s->stopping) {
            if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT) break;
        }
        if (s->stopping) break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!s->wake && (now.tv_sec < next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec < next.tv_nsec))) {
            pthread_mutex_unlock(&s->mu);
            llmr_pruner_run(s->pruner); /* only a prune tick: the poll is not due */
            pthread_mutex_lock(&s->mu);
            continue;
        }
        json_t *pushed = s->pushed, *retry = s->retry, *deleted = s->deleted;
        int retry_failed = s->retry_failed, after_reg = s->after_reg;
        s->pushed = NULL;
        s->retry = NULL;
        s->deleted = NULL;
        s->wake = s->retry_failed = s->after_reg = 0;
        pthread_mutex_unlock(&s->mu);
        if (llmr_router_client_registered(s->n->router)) {
            json_t *list = pushed ? json_incref(pushed) : poll_list(s);
            if (list) reconcile(s, list, retry, deleted, retry_failed, after_reg);
            json_decref(list);
        }
        llmr_pruner_run(s->pruner);
        json_decref(pushed);
        json_decref(retry);
        json_decref(deleted);
        clock_gettime(CLOCK_MONOTONIC, &next);
        next.tv_sec += interval_s(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- pruning hooks ------------------------------------------------------------------------------ */

static int prune_is_registered(void *user, const char *id) {
    llmr_sync *s = user;
    llmr_model_view mv;
    return llmr_models_get(s->n->models, id, &mv) == 0;
}

static int prune_busy(void *user, const char *id, char *why, size_t ws) {
    llmr_sync *s = user;
    if (has_job(s, id)) { snprintf(why, ws, "its cancelled download or load has stopped"); return 1; }
    unsigned sessions = llmr_node_engines_sessions(s->n->engines, id);
    if (sessions) { snprintf(why, ws, "its %u in-flight request(s) finish", sessions); return 1; }
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------------- */

llmr_sync *llmr_sync_create(llmr_node *n, char *err, size_t es) {
    llmr_sync *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, es, "out of memory"); return NULL; }
    s->n = n;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    llmr_prune_hooks hooks = {.is_registered = prune_is_registered, .busy = prune_busy, .user = s};
    s->keep = n->cfg.keep_deleted_models;
    if (!(s->pruner = llmr_pruner_create(n->cfg.models_dir, &hooks))) {
        snprintf(err, es, "out of memory");
        llmr_sync_destroy(s);
        return NULL;
    }
    char ledger[4200], why[4400];
    snprintf(ledger, sizeof ledger, "%s/owned-models.json", n->cfg.state_dir ? n->cfg.state_dir : ".");
    if (llmr_pruner_open_ledger(s->pruner, ledger, why, sizeof why) != 0)
        log_warn("%s: folders of models deleted while this node is down will not be removed", why);
    int nw = n->cfg.max_parallel_downloads > 0 ? n->cfg.max_parallel_downloads : 2;
    if (!(s->workers = llmr_workers_create(nw > 64 ? 64 : nw))) {
        snprintf(err, es, "cannot start %d download worker(s)", nw);
        llmr_sync_destroy(s);
        return NULL;
    }
    if (pthread_create(&s->th, NULL, sync_main, s) != 0) {
        snprintf(err, es, "cannot start the sync thread");
        llmr_sync_destroy(s);
        return NULL;
    }
    s->started = 1;
    return s;
}

void llmr_sync_destroy(llmr_sync *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    for (job *j = s->jobs; j; j = j->next) atomic_store(&j->cancel, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started) pthread_join(s->th, NULL);
    /* The sync thread may have queued jobs while stopping: cancel those too. */
    pthread_mutex_lock(&s->mu);
    for (job *j = s->jobs; j; j = j->next) atomic_store(&j->cancel, 1);
    pthread_mutex_unlock(&s->mu);
    llmr_workers_destroy(s->workers);
    llmr_pruner_destroy(s->pruner);
    json_decref(s->pushed);
    json_decref(s->retry);
    json_decref(s->deleted);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void llmr_sync_notice(llmr_sync *s, const char *event, const char *model, json_t *models) {
    json_t *list = llmr_sync_parse_model_list(models);
    pthread_mutex_lock(&s->mu);
    if (list) { json_decref(s->pushed); s->pushed = list; }
    if (event && strcmp(event, "resync") == 0) s->retry_failed = 1;
    if (event && strcmp(event, "registered") == 0 && model) {
        if (!s->retry) s->retry = json_array();
        json_array_append_new(s->retry, json_string(model));
    }
    if (event && strcmp(event, "deleted") == 0 && model) {
        if (!s->deleted) s->deleted = json_array();
        json_array_append_new(s->deleted, json_string(model));
    }
    s->wake = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

json_t *llmr_sync_deleting_json(llmr_sync *s) {
    return s && s->pruner ? llmr_pruner_pending_json(s->pruner) : json_array();
}


void llmr_sync_prune_stats(llmr_sync *s, llmr_prune_stats *out) {
    memset(out, 0, sizeof *out);
    if (s && s->pruner) llmr_pruner_stats(s->pruner, out);
}

void llmr_sync_wake(llmr_sync *s, int after_registration) {
    pthread_mutex_lock(&s->mu);
    s->wake = 1;
    if (after_registration) s->after_reg = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
