/* engines.c — see engines.h. */
#include "node/engines.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "node/engine/engine_manifest.h"
#include "node/engine/engine_registry.h"

#if defined(__has_include)
#if __has_include("node/engine/engine_host.h")
#include "node/engine/engine_host.h"
#define HAVE_ENGINE_HOST 1
#endif
#endif
#ifndef HAVE_ENGINE_HOST
#define HAVE_ENGINE_HOST 0
#endif

#define MAX_PLUGINS 64

struct llmr_node_engines {
    llmr_engine_manifest *m[MAX_PLUGINS];
    size_t n;
    int has_gpu, cc_major, cc_minor;
    pthread_mutex_t mu;
    int allow_cpu;
    int no_dir;                  /* --engines-dir is absent: no plugins, no EngineHost */
#if HAVE_ENGINE_HOST
    llmr_engine_host *host;
#endif
};

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads every DIR/x/manifest.json, sorted by folder name so the order is stable. */
static int scan(llmr_node_engines *e, const char *dir, char *err, size_t es) {
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) {
        log_warn("--engines-dir %s does not exist: no engine plugins (every model will be unsupported)", dir);
        e->no_dir = 1;
        return 0;
    }
    if (!d) { snprintf(err, es, "--engines-dir %s: %s", dir, strerror(errno)); return -1; }
    char *names[256];
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 256) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, de->d_name);
        if (stat(path, &sb) == 0 && (names[nn] = strdup(de->d_name))) nn++;
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_names);
    for (size_t i = 0; i < nn; i++) {
        char sub[4096], why[1024];
        snprintf(sub, sizeof sub, "%s/%s", dir, names[i]);
        llmr_engine_manifest *m = NULL;
        if (llmr_engine_manifest_load(sub, &m, why, sizeof why) != 0) log_warn("engine plugin skipped: %s", why);
        else if (e->n < MAX_PLUGINS) e->m[e->n++] = m;
        else llmr_engine_manifest_free(m);
        free(names[i]);
    }
    return 0;
}

llmr_node_engines *llmr_node_engines_create(const llmr_node_engines_config *cfg, char *err, size_t es) {
    if (!cfg || !cfg->engines_dir) { snprintf(err, es, "--engines-dir is required"); return NULL; }
    llmr_node_engines *e = calloc(1, sizeof *e);
    if (!e) { snprintf(err, es, "out of memory"); return NULL; }
    pthread_mutex_init(&e->mu, NULL);
    e->has_gpu = cfg->has_gpu;
    e->cc_major = cfg->cc_major;
    e->cc_minor = cfg->cc_minor;
    if (scan(e, cfg->engines_dir, err, es) != 0) { llmr_node_engines_destroy(e); return NULL; }
#if HAVE_ENGINE_HOST
    if (e->no_dir) return e;
    llmr_engine_host_config hc = {.engines_dir = cfg->engines_dir, .backend = cfg->has_gpu ? "cuda" : "cpu",
                                  .device = cfg->has_gpu ? 0 : -1, .cc_major = cfg->cc_major, .cc_minor = cfg->cc_minor,
                                  .max_sessions = cfg->max_sessions, .max_context = cfg->max_context};
    char why[1024];
    if (llmr_engine_host_create(&hc, &e->host, why, sizeof why) != LLMR_ENGINE_OK) {
        snprintf(err, es, "engine host: %s", why);
        llmr_node_engines_destroy(e);
        return NULL;
    }
#else
    log_warn("this build has no EngineHost (node/engine/engine_host.h): models can be fetched and verified, not loaded");
#endif
    log_info("%zu engine plugin(s) in %s", e->n, cfg->engines_dir);
    return e;
}

void llmr_node_engines_destroy(llmr_node_engines *e) {
    if (!e) return;
#if HAVE_ENGINE_HOST
    if (e->host) llmr_engine_host_destroy(e->host);
#endif
    for (size_t i = 0; i < e->n; i++) llmr_engine_manifest_free(e->m[i]);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void llmr_node_engines_allow_cpu(llmr_node_engines *e, int allow) {
    pthread_mutex_lock(&e->mu);
    e->allow_cpu = allow ? 1 : 0;
    pthread_mutex_unlock(&e->mu);
}

size_t llmr_node_engines_count(llmr_node_engines *e) { return e->n; }

static json_t *str_array(char **v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

static int cpu_only(const llmr_engine_manifest *m) {
    return m->n_gpu_backends == 1 && strcmp(m->gpu_backends[0], "cpu") == 0;
}

json_t *llmr_node_engines_json(llmr_node_engines *e) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < e->n; i++) {
        const llmr_engine_manifest *m = e->m[i];
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(m->id));
        json_object_set_new(o, "version", json_string(m->version));
        json_object_set_new(o, "runtimes", str_array(m->runtimes, m->n_runtimes));
        json_object_set_new(o, "formats", str_array(m->formats, m->n_formats));
        json_object_set_new(o, "architectures", str_array(m->architectures, m->n_architectures));
        json_object_set_new(o, "gpu_backends", str_array(m->gpu_backends, m->n_gpu_backends));
        json_object_set_new(o, "cpu_only", json_boolean(cpu_only(m)));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* The backend models run on here, or NULL (with the reason) when none. */
static const char *backend(llmr_node_engines *e, char *reason, size_t rs) {
    if (e->has_gpu) return "cuda";
    pthread_mutex_lock(&e->mu);
    int allow = e->allow_cpu;
    pthread_mutex_unlock(&e->mu);
    if (allow) return "cpu";
    snprintf(reason, rs, "this node has no GPU and the router does not allow CPU engines (it runs without --allow-cpu-nodes)");
    return NULL;
}

static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

int llmr_node_engines_precheck(llmr_node_engines *e, const llmr_manifest *mf, char *reason, size_t rs) {
    const char *be = backend(e, reason, rs);
    if (!be) return -1;
    if (e->n == 0) {
        snprintf(reason, rs, "no engine plugin is installed on this node");
        return -1;
    }
    /* Artifacts this node would fetch (its backend's). */
    llmr_artifact arts[32];
    size_t na = 0;
    for (size_t i = 0; i < mf->n_artifacts && na < 32; i++)
        if (strcmp(mf->artifacts[i].backend, be) == 0) arts[na++] = (llmr_artifact){mf->artifacts[i].name, ""};
    if (mf->architecture) {
        llmr_model_descriptor d = {.struct_size = sizeof d, .id = mf->id, .format = mf->format, .runtime = mf->runtime,
                                   .architecture = mf->architecture, .model_dir = ""};
        llmr_node_backend nb = {.backend = be, .cc_major = e->cc_major, .cc_minor = e->cc_minor};
        llmr_engine_choice ch;
        return llmr_engine_registry_select((const llmr_engine_manifest *const *)e->m, e->n, &d, arts, na, &nb, &ch,
                                           reason, rs);
    }
    /* The manifest names no architecture: decide on runtime, backend and format (the architecture is
     * checked again from config.json before loading). */
    size_t len = 0;
    appendf(reason, rs, &len, "no engine for %s (runtime %s, format %s, backend %s):", mf->id, mf->runtime, mf->format, be);
    if (strcmp(mf->runtime, "unknown") == 0 || !*mf->runtime) {
        appendf(reason, rs, &len, " the runtime is unknown (the router found no known architecture in config.json)");
        return -1;
    }
    for (size_t i = 0; i < e->n; i++) {
        const llmr_engine_manifest *m = e->m[i];
        int art = 0;
        for (size_t k = 0; k < m->n_artifacts && !art; k++)
            for (size_t j = 0; j < na; j++) if (strcmp(m->artifacts[k].name, arts[j].name) == 0) art = 1;
        if (!llmr_engine_manifest_has_runtime(m, mf->runtime))
            appendf(reason, rs, &len, " %s: runtime %s not supported;", m->id, mf->runtime);
        else if (!llmr_engine_manifest_has_backend(m, be))
            appendf(reason, rs, &len, " %s: backend %s not supported;", m->id, be);
        else if (!art && !llmr_engine_manifest_has_format(m, mf->format))
            appendf(reason, rs, &len, " %s: format %s not supported;", m->id, mf->format);
        else return 0;
    }
    if (len && len < rs && reason[len - 1] == ';') reason[len - 1] = '\0';
    return -1;
}

llmr_engine_status llmr_node_engines_select(llmr_node_engines *e, const llmr_storage_model *m, char *engine_out,
                                            size_t engine_size, char *err, size_t es) {
    if (engine_size) engine_out[0] = '\0';
    const char *be = backend(e, err, es);
    if (!be) return LLMR_ENGINE_UNSUPPORTED;
    llmr_artifact arts[32];
    size_t na = 0;
    for (size_t i = 0; i < m->n_artifacts && na < 32; i++) arts[na++] = (llmr_artifact){m->artifacts[i].name, m->artifacts[i].path};
#if HAVE_ENGINE_HOST
    char art_path[4096];
    if (e->host)
        return llmr_engine_host_select(e->host, &m->desc, arts, na, engine_out, engine_size, art_path, sizeof art_path, err, es);
#endif
    llmr_node_backend nb = {.backend = be, .cc_major = e->cc_major, .cc_minor = e->cc_minor};
    llmr_engine_choice ch;
    if (llmr_engine_registry_select((const llmr_engine_manifest *const *)e->m, e->n, &m->desc, arts, na, &nb, &ch, err, es) != 0)
        return LLMR_ENGINE_UNSUPPORTED;
    snprintf(engine_out, engine_size, "%s", ch.manifest->id);
    return LLMR_ENGINE_OK;
}

llmr_engine_status llmr_node_engines_load(llmr_node_engines *e, const llmr_storage_model *m, char *engine_out,
                                          size_t engine_size, char *err, size_t es) {
    if (engine_size) engine_out[0] = '\0';
    if (!backend(e, err, es)) return LLMR_ENGINE_UNSUPPORTED;
#if HAVE_ENGINE_HOST
    if (!e->host) {
        snprintf(err, es, "no engine plugins on this node");
        return LLMR_ENGINE_UNSUPPORTED;
    }
    llmr_artifact arts[32];
    size_t na = 0;
    for (size_t i = 0; i < m->n_artifacts && na < 32; i++) arts[na++] = (llmr_artifact){m->artifacts[i].name, m->artifacts[i].path};
    char art_path[4096];
    llmr_engine_status st = llmr_engine_host_select(e->host, &m->desc, arts, na, engine_out, engine_size, art_path,
                                                    sizeof art_path, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    return llmr_engine_host_load(e->host, &m->desc, arts, na, err, es);
#else
    (void)m;
    snprintf(err, es, "this node was built without the EngineHost: models cannot be loaded");
    return LLMR_ENGINE_LOAD_FAILED;
#endif
}

void llmr_node_engines_unload(llmr_node_engines *e, const char *model_id) {
#if HAVE_ENGINE_HOST
    char why[512];
    if (e->host) llmr_engine_host_unload(e->host, model_id, why, sizeof why);
#else
    (void)e;
    (void)model_id;
#endif
}

unsigned llmr_node_engines_sessions(llmr_node_engines *e, const char *model_id) {
#if HAVE_ENGINE_HOST
    if (!e->host) return 0;
    llmr_host_model_info *info = NULL;
    size_t n = 0;
    unsigned sessions = 0;
    if (llmr_engine_host_models(e->host, &info, &n) != 0) return 1; /* unknown: assume busy, ask again later */
    for (size_t i = 0; i < n; i++)
        if (strcmp(info[i].model_id, model_id) == 0) sessions += info[i].sessions;
    free(info);
    return sessions;
#else
    (void)e;
    (void)model_id;
    return 0;
#endif
}

void llmr_node_engines_sync_loaded(llmr_node_engines *e, llmr_models *models) {
#if HAVE_ENGINE_HOST
    if (!e->host) return;
    llmr_host_model_info *info = NULL;
    size_t n = 0;
    if (llmr_engine_host_models(e->host, &info, &n) != 0) return;
    for (size_t i = 0; i < n; i++) {
        llmr_model_view v;
        if (llmr_models_get(models, info[i].model_id, &v) == 0 && v.state == LLMR_MODEL_READY && v.loaded != info[i].loaded)
            llmr_models_set_engine(models, info[i].model_id, info[i].engine_id, info[i].loaded);
    }
    free(info);
#else
    (void)e;
    (void)models;
#endif
}

void llmr_node_engines_alerts(llmr_node_engines *e, json_t *arr) {
#if HAVE_ENGINE_HOST
    if (!e->host || !arr) return;
    llmr_host_snapshot snap;
    llmr_engine_host_snapshot(e->host, &snap);
    char a[160];
    if (snap.res.valid && snap.res.vram_alert) {
        snprintf(a, sizeof a, "vram: %.0f%% used (threshold %.0f%%)", snap.res.vram_ratio * 100, snap.res.threshold * 100);
        json_array_append_new(arr, json_string(a));
    }
    if (snap.res.valid && snap.res.ram_alert) {
        snprintf(a, sizeof a, "ram: %.0f%% used (threshold %.0f%%)", snap.res.ram_ratio * 100, snap.res.threshold * 100);
        json_array_append_new(arr, json_string(a));
    }
#else
    (void)e;
    (void)arr;
#endif
}

char *llmr_node_engines_metrics(llmr_node_engines *e, size_t *len_out) {
#if HAVE_ENGINE_HOST
    if (e->host) return llmr_engine_host_metrics_text(e->host, len_out);
    if (len_out) *len_out = 0;
    return NULL;
#else
    (void)e;
    if (len_out) *len_out = 0;
    return NULL;
#endif
}

struct llmr_engine_host *llmr_node_engines_host(llmr_node_engines *e) {
#if HAVE_ENGINE_HOST
    return e->host;
#else
    (void)e;
    return NULL;
#endif
}
