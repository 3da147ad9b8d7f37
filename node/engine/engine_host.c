/* engine_host.c — see engine_host.h.
 *
 * Objects and owners:
 *   plugin   one dlopened version of an engine. Referenced by the host's plugin list while it is the
 *            current version of its id, and by each instance loaded on it; closed at refs == 0.
 *   entry    one model the node asked for (descriptor copy, counters). Lives until host destroy.
 *   instance one engine model (llmr_engine_model) of an entry on one plugin. The entry's current
 *            instance takes new sessions; draining ones only finish theirs and are unloaded at 0.
 *   session  the caller's handle; counts on its instance (inst->sessions) while its engine session
 *            lives.
 * Locks (ordering: load_mu -> monitor's lock -> mu; wd_mu and inst->mu are leaves):
 *   load_mu  serialises loads, unloads and reloads (engines see one loader at a time);
 *   mu       every list and counter above;
 *   wd_mu    the list of running generations the watchdog scans;
 *   inst->mu serialises session_create/session_destroy on one engine model (ABI rule). */
#include "node/engine/engine_host.h"
#include "common/errmsg.h"
#include "common/log.h"
#include "node/engine/engine_manifest.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API_V1_0_SIZE LLMR_ENGINE_API_V1_0_SIZE

typedef struct fingerprint {
    dev_t mdev, ldev;
    ino_t mino, lino;
    off_t msize, lsize;
    struct timespec mmtime, lmtime;
} fingerprint;

typedef struct plugin {
    llmr_engine_manifest *m;
    void *dl;
    const llmr_engine_api *api;
    llmr_engine_info info;
    llmr_host_api host_api;
    fingerprint fp;
    int refs;                 /* under mu */
    int current;              /* the version new models and sessions use */
    int over_budget;          /* last poll found stats above the budget */
    struct plugin *next;
} plugin;

typedef struct instance instance;
typedef struct entry {
    char *id, *format, *runtime, *architecture, *model_dir;
    llmr_artifact *artifacts;
    size_t n_artifacts;
    int wanted;               /* 0 after llmr_engine_host_unload */
    int loading;              /* a load is in progress (under mu) */
    llmr_engine_status last_status; /* of the latest load attempt (under mu) */
    char last_error[512];
    instance *insts;          /* current (if any) first, then draining */
    uint64_t last_used_ns;
    atomic_ullong tokens;
    uint64_t lru_unloads;
    struct entry *next;
} entry;

struct instance {
    entry *e;
    plugin *pl;
    llmr_engine_model *em;
    pthread_mutex_t mu;
    uint32_t sessions;        /* under mu (host) */
    int draining;
    uint64_t estimate;
    instance *next;
};

struct llmr_host_session {
    llmr_engine_host *h;
    instance *inst;
    llmr_engine_session *es;  /* NULL once the watchdog freed it */
    atomic_int generating, cancel_req, timed_out;
    atomic_ullong last_progress_ns;
    llmr_token_cb cb;
    llmr_logprobs_cb lp_cb;
    void *user;
    uint32_t tokens;          /* this generate */
    char engine_id[65], engine_version[65]; /* copies: the instance may be gone after a timeout */
    uint32_t max_context;     /* longest sequence the session holds; 0 = the engine did not say */
    llmr_host_session *wd_prev, *wd_next;
};

struct llmr_engine_host {
    char *engines_dir, *backend, *tmpdir;
    int device, cc_major, cc_minor;
    uint32_t poll_ms, stall_ms, watch_ms, max_context, max_sessions;
    int watch, keep_libraries;
    uint64_t default_budget;
    llmr_engine_budget *budgets;
    size_t n_budgets;
    llmr_resource_monitor *monitor;
    const char *provider_name;

    pthread_mutex_t load_mu, mu, wd_mu;
    plugin *plugins;
    entry *entries;
    char **rejections;
    size_t n_rejections;
    unsigned generation;      /* private library copies are numbered */
    uint64_t watched_hash, seen_hash;

    llmr_host_session *running; /* generations, under wd_mu */
    uint32_t n_running;

    uint64_t tokens_total, timeouts, lru_unloads, refusals, rejections_total, reloads, overruns; /* under mu */
    uint32_t sessions_active;

    atomic_int reload_requested;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t tmu;
    pthread_cond_t tcond;
    int stop;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

/* Copies src into dst, truncating; dst is always NUL-terminated (size > 0). */
static void copy_str(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* --- plugins --------------------------------------------------------------------------------- */

/* Logs a line from a plugin through the node's log, prefixed by the engine id. */
static void plugin_log(void *host, int level, const char *msg) {
    plugin *p = host;
    llmr_log(level, "engine %s: %s", p->m->id, msg ? msg : "");
}

static int fingerprint_of(const char *dir, const char *library, fingerprint *fp) {
    char path[4096];
    struct stat st;
    memset(fp, 0, sizeof *fp);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (stat(path, &st) != 0) return -1;
    fp->mdev = st.st_dev; fp->mino = st.st_ino; fp->msize = st.st_size; fp->mmtime = st.st_mtim;
    if (library) {
        snprintf(path, sizeof path, "%s/%s", dir, library);
        if (stat(path, &st) == 0) {
            fp->ldev = st.st_dev; fp->lino = st.st_ino; fp->lsize = st.st_size; fp->lmtime = st.st_mtim;
        }
    }
    return 0;
}

static int fingerprint_eq(const fingerprint *a, const fingerprint *b) {
    return a->mdev == b->mdev && a->mino == b->mino && a->msize == b->msize && a->mmtime.tv_sec == b->mmtime.tv_sec &&
           a->mmtime.tv_nsec == b->mmtime.tv_nsec && a->ldev == b->ldev && a->lino == b->lino &&
           a->lsize == b->lsize && a->lmtime.tv_sec == b->lmtime.tv_sec && a->lmtime.tv_nsec == b->lmtime.tv_nsec;
}

/* Copies src to dst (a private snapshot, so the plugin's files may be replaced while it is loaded). */
static int copy_file(const char *src, const char *dst, char *err, size_t err_size) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) { llmr_errf(err, err_size, "%s: %s", src, strerror(errno)); return -1; }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (out < 0) { llmr_errf(err, err_size, "%s: %s", dst, strerror(errno)); close(in); return -1; }
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) { if (errno == EINTR) continue; llmr_errf(err, err_size, "reading %s: %s", src, strerror(errno)); rc = -1; break; }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0) { if (errno == EINTR) continue; llmr_errf(err, err_size, "writing %s: %s", dst, strerror(errno)); rc = -1; break; }
            off += w;
        }
        if (rc) break;
    }
    close(in);
    if (close(out) != 0 && rc == 0) { llmr_errf(err, err_size, "writing %s: %s", dst, strerror(errno)); rc = -1; }
    return rc;
}

static void plugin_free(plugin *p) {
    if (!p) return;
    if (p->dl) dlclose(p->dl);
    llmr_engine_manifest_free(p->m);
    free(p);
}

static const char *abi_str(uint32_t v, char *buf, size_t size) {
    snprintf(buf, size, "%u.%u", LLMR_ENGINE_ABI_MAJOR_OF(v), LLMR_ENGINE_ABI_MINOR_OF(v));
    return buf;
}

/* Opens the plugin in `dir`: manifest, private copy, dlopen, both ABI checks, table, id. On failure
 * returns NULL with a message naming the field or the check at fault. */
static plugin *plugin_open(llmr_engine_host *h, const char *dir, char *err, size_t err_size) {
    char a[16], b[16], mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    plugin *p = calloc(1, sizeof *p);
    if (!p) { llmr_errf(err, err_size, "%s: out of memory", mpath); return NULL; }
    if (llmr_engine_manifest_load(dir, &p->m, err, err_size) != 0) goto fail;
    llmr_engine_manifest *m = p->m;
    fingerprint_of(dir, m->library, &p->fp);
    if (LLMR_ENGINE_ABI_MAJOR_OF(m->abi_version) != LLMR_ENGINE_ABI_MAJOR) {
        llmr_errf(err, err_size, "%s: field \"abi_version\": plugin declares ABI %s, host speaks %s (majors must match)",
                mpath, abi_str(m->abi_version, a, sizeof a), abi_str(LLMR_ENGINE_ABI_VERSION, b, sizeof b));
        goto fail;
    }
    struct stat st;
    if (stat(m->library_path, &st) != 0) {
        llmr_errf(err, err_size, "%s: field \"library\": %s: %s", mpath, m->library_path, strerror(errno));
        goto fail;
    }
    char copy[4096], cerr[512];
    pthread_mutex_lock(&h->mu);
    unsigned gen = ++h->generation;
    pthread_mutex_unlock(&h->mu);
    snprintf(copy, sizeof copy, "%s/%s-%u.so", h->tmpdir, m->id, gen);
    if (copy_file(m->library_path, copy, cerr, sizeof cerr) != 0) {
        unlink(copy);
        llmr_errf(err, err_size, "%s: field \"library\": cannot snapshot the library: %s", mpath, cerr);
        goto fail;
    }
    dlerror();
    p->dl = dlopen(copy, RTLD_NOW | RTLD_LOCAL | (h->keep_libraries ? RTLD_NODELETE : 0));
    unlink(copy); /* the mapping stays; nothing is left behind */
    if (!p->dl) {
        const char *de = dlerror();
        llmr_errf(err, err_size, "%s: field \"library\": dlopen %s failed: %s", mpath, m->library_path, de ? de : "?");
        goto fail;
    }
    llmr_engine_get_api_fn get = NULL;
    *(void **)&get = dlsym(p->dl, LLMR_ENGINE_ENTRY_SYMBOL);
    if (!get) {
        llmr_errf(err, err_size, "%s: field \"library\": %s does not export %s", mpath, m->library_path,
                LLMR_ENGINE_ENTRY_SYMBOL);
        goto fail;
    }
    const llmr_engine_api *api = get(LLMR_ENGINE_ABI_VERSION);
    if (!api) {
        llmr_errf(err, err_size, "%s: ABI mismatch: the library refused host ABI %s (%s returned NULL)", mpath,
                abi_str(LLMR_ENGINE_ABI_VERSION, a, sizeof a), LLMR_ENGINE_ENTRY_SYMBOL);
        goto fail;
    }
    if (LLMR_ENGINE_ABI_MAJOR_OF(api->abi_version) != LLMR_ENGINE_ABI_MAJOR) {
        llmr_errf(err, err_size, "%s: ABI mismatch: the library reports ABI %s, host speaks %s", mpath,
                abi_str(api->abi_version, a, sizeof a), abi_str(LLMR_ENGINE_ABI_VERSION, b, sizeof b));
        goto fail;
    }
    if (api->struct_size < API_V1_0_SIZE) {
        llmr_errf(err, err_size, "%s: ABI mismatch: function table is %u bytes, ABI %u.0 needs at least %zu", mpath,
                api->struct_size, LLMR_ENGINE_ABI_MAJOR, (size_t)API_V1_0_SIZE);
        goto fail;
    }
    struct { const void *fn; const char *name; } fns[] = {
        {(const void *)api->describe, "describe"}, {(const void *)api->estimate_vram, "estimate_vram"},
        {(const void *)api->load, "load"}, {(const void *)api->unload, "unload"},
        {(const void *)api->session_create, "session_create"}, {(const void *)api->session_destroy, "session_destroy"},
        {(const void *)api->generate, "generate"}, {(const void *)api->cancel, "cancel"},
        {(const void *)api->stats, "stats"}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!fns[i].fn) {
            llmr_errf(err, err_size, "%s: function table entry %s is NULL", mpath, fns[i].name);
            goto fail;
        }
    p->info.struct_size = sizeof p->info;
    if (api->describe(&p->info) != LLMR_ENGINE_OK || !p->info.id) {
        llmr_errf(err, err_size, "%s: describe() failed", mpath);
        goto fail;
    }
    if (strcmp(p->info.id, m->id) != 0) {
        llmr_errf(err, err_size, "%s: field \"id\": manifest says \"%s\", the library reports \"%.64s\"", mpath, m->id,
                p->info.id);
        goto fail;
    }
    if (api->abi_version != m->abi_version)
        log_warn("engine %s: manifest declares ABI %s, library reports %s (same major: loaded)", m->id,
                 abi_str(m->abi_version, a, sizeof a), abi_str(api->abi_version, b, sizeof b));
    if (p->info.version && strcmp(p->info.version, m->version) != 0)
        log_info("engine %s: manifest version %s, library reports %s", m->id, m->version, p->info.version);
    p->api = api;
    p->host_api.struct_size = sizeof p->host_api;
    p->host_api.host = p;
    p->host_api.log = plugin_log;
    return p;
fail:
    plugin_free(p);
    return NULL;
}

/* Drops one reference; the caller holds mu. Returns the plugin when it must now be closed (outside mu). */
static plugin *plugin_unref_locked(llmr_engine_host *h, plugin *p) {
    if (--p->refs > 0) return NULL;
    for (plugin **pp = &h->plugins; *pp; pp = &(*pp)->next)
        if (*pp == p) { *pp = p->next; break; }
    return p;
}

static plugin *current_plugin_locked(llmr_engine_host *h, const char *id) {
    for (plugin *p = h->plugins; p; p = p->next)
        if (p->current && strcmp(p->m->id, id) == 0) return p;
    return NULL;
}

static uint64_t budget_of(const llmr_engine_host *h, const char *id) {
    for (size_t i = 0; i < h->n_budgets; i++)
        if (strcmp(h->budgets[i].engine_id, id) == 0) return h->budgets[i].bytes;
    return h->default_budget;
}

/* --- entries and instances ------------------------------------------------------------------- */

static entry *find_entry_locked(llmr_engine_host *h, const char *id) {
    for (entry *e = h->entries; e; e = e->next)
        if (strcmp(e->id, id) == 0) return e;
    return NULL;
}

static instance *current_instance(const entry *e) {
    return e->insts && !e->insts->draining ? e->insts : NULL;
}

static void entry_free(entry *e) {
    if (!e) return;
    free(e->id); free(e->format); free(e->runtime); free(e->architecture); free(e->model_dir);
    for (size_t i = 0; i < e->n_artifacts; i++) { free((char *)e->artifacts[i].name); free((char *)e->artifacts[i].path); }
    free(e->artifacts);
    free(e);
}

static entry *entry_new(const llmr_model_descriptor *d, const llmr_artifact *a, size_t na) {
    entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->id = xstrdup(d->id); e->format = xstrdup(d->format); e->runtime = xstrdup(d->runtime);
    e->architecture = xstrdup(d->architecture); e->model_dir = xstrdup(d->model_dir);
    e->artifacts = calloc(na ? na : 1, sizeof *e->artifacts);
    int bad = !e->id || !e->artifacts || (d->format && !e->format) || (d->runtime && !e->runtime) ||
              (d->architecture && !e->architecture) || (d->model_dir && !e->model_dir);
    for (size_t i = 0; i < na && !bad; i++) {
        e->artifacts[i].name = xstrdup(a[i].name);
        e->artifacts[i].path = xstrdup(a[i].path);
        e->n_artifacts = i + 1;
        bad = (a[i].name && !e->artifacts[i].name) || (a[i].path && !e->artifacts[i].path);
    }
    if (bad) { entry_free(e); return NULL; }
    return e;
}

static llmr_model_descriptor entry_descriptor(const entry *e, const char *artifact_path) {
    llmr_model_descriptor d = {sizeof d, e->id, e->format, e->runtime, e->architecture, e->model_dir, artifact_path};
    return d;
}

static void unlink_instance_locked(instance *in) {
    for (instance **pp = &in->e->insts; *pp; pp = &(*pp)->next)
        if (*pp == in) { *pp = in->next; break; }
    in->next = NULL;
}

/* Unloads an instance already unlinked from its entry (sessions == 0). Caller holds load_mu, not mu. */
static void instance_unload(llmr_engine_host *h, instance *in, const char *why) {
    log_info("unloading model %s from engine %s %s (%s)", in->e->id, in->pl->m->id, in->pl->m->version, why);
    in->pl->api->unload(in->em);
    pthread_mutex_lock(&h->mu);
    plugin *dead = plugin_unref_locked(h, in->pl);
    pthread_mutex_unlock(&h->mu);
    if (dead) log_info("engine %s %s closed", dead->m->id, dead->m->version);
    plugin_free(dead);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

/* Unloads every draining instance whose sessions have ended. Caller holds load_mu. */
static void reap_drained(llmr_engine_host *h) {
    for (;;) {
        instance *victim = NULL;
        pthread_mutex_lock(&h->mu);
        for (entry *e = h->entries; e && !victim; e = e->next)
            for (instance *in = e->insts; in; in = in->next)
                if (in->draining && in->sessions == 0) { victim = in; break; }
        if (victim) unlink_instance_locked(victim);
        pthread_mutex_unlock(&h->mu);
        if (!victim) return;
        instance_unload(h, victim, "drained");
    }
}

/* Chooses an engine among current plugins for entry e (caller holds mu). On success pins the plugin
 * (refs++) and returns it, with the artifact path (borrowed from e) in *artifact_path. */
static plugin *choose_locked(llmr_engine_host *h, const entry *e, const char **artifact_path, char *err, size_t err_size) {
    size_t n = 0;
    for (plugin *p = h->plugins; p; p = p->next) n += p->current;
    const llmr_engine_manifest **ms = calloc(n ? n : 1, sizeof *ms);
    plugin **ps = calloc(n ? n : 1, sizeof *ps);
    if (!ms || !ps) { free(ms); free(ps); llmr_errf(err, err_size, "out of memory"); return NULL; }
    size_t i = 0;
    for (plugin *p = h->plugins; p; p = p->next)
        if (p->current) { ms[i] = p->m; ps[i++] = p; }
    llmr_model_descriptor d = entry_descriptor(e, NULL);
    llmr_node_backend b = {h->backend, h->cc_major, h->cc_minor};
    llmr_engine_choice c;
    plugin *chosen = NULL;
    if (llmr_engine_registry_select(ms, n, &d, e->artifacts, e->n_artifacts, &b, &c, err, err_size) == 0) {
        chosen = ps[c.index];
        chosen->refs++;
        *artifact_path = c.artifact ? c.artifact->path : NULL;
    }
    free(ms);
    free(ps);
    return chosen;
}

/* The least-recently-used current instance without sessions, other than `except`'s (caller holds mu). */
static instance *lru_idle_locked(llmr_engine_host *h, const entry *except) {
    instance *victim = NULL;
    for (entry *x = h->entries; x; x = x->next) {
        instance *in = current_instance(x);
        if (in && x != except && in->sessions == 0 && (!victim || x->last_used_ns < victim->e->last_used_ns)) victim = in;
    }
    return victim;
}

/* When `need` bytes do not fit in `free_b` but unloading idle models would free enough (by their
 * estimates), unloads them least-recently-used first until the model fits. Returns the free VRAM
 * after that (re-sampled; unchanged when nothing could help). Caller holds load_mu, not mu. */
static uint64_t make_room(llmr_engine_host *h, entry *e, uint64_t need, uint64_t free_b, llmr_resource_state *rs) {
    uint64_t idle = 0;
    pthread_mutex_lock(&h->mu);
    for (entry *x = h->entries; x; x = x->next) {
        instance *in = current_instance(x);
        if (in && x != e && in->sessions == 0) idle += in->estimate;
    }
    pthread_mutex_unlock(&h->mu);
    if (free_b + idle < need) return free_b;
    while (need > free_b) {
        pthread_mutex_lock(&h->mu);
        instance *victim = lru_idle_locked(h, e);
        if (victim) {
            unlink_instance_locked(victim);
            victim->e->lru_unloads++;
            h->lru_unloads++;
        }
        pthread_mutex_unlock(&h->mu);
        if (!victim) break;
        char why[320];
        snprintf(why, sizeof why, "LRU: making room for model %.200s", e->id);
        instance_unload(h, victim, why);
        if (llmr_resource_monitor_poll(h->monitor, rs, NULL, 0) != 0) break;
        free_b = rs->last.vram_total > rs->last.vram_used ? rs->last.vram_total - rs->last.vram_used : 0;
    }
    return free_b;
}

/* Loads entry e on a freshly chosen engine and makes the result its current instance (the previous
 * current one, if any, starts draining). Caller holds load_mu, not mu. */
static llmr_engine_status load_instance_impl(llmr_engine_host *h, entry *e, char *err, size_t err_size) {
    const char *artifact_path = NULL;
    char why[2048];
    pthread_mutex_lock(&h->mu);
    plugin *p = choose_locked(h, e, &artifact_path, why, sizeof why);
    pthread_mutex_unlock(&h->mu);
    if (!p) {
        llmr_errf(err, err_size, "model %s is unsupported: %s", e->id, why);
        return LLMR_ENGINE_UNSUPPORTED;
    }
    const char *eid = p->m->id;
    llmr_model_descriptor d = entry_descriptor(e, artifact_path);
    uint64_t budget = budget_of(h, eid);
    llmr_load_params lp = {sizeof lp, h->device, 0, h->max_context, h->max_sessions, &p->host_api};
    uint64_t need = 0;
    char eerr[1024] = "";
    llmr_engine_status st = p->api->estimate_vram(&d, &lp, &need, eerr, sizeof eerr);
    if (st != LLMR_ENGINE_OK) {
        llmr_errf(err, err_size, "model %s: engine %s estimate_vram: %s: %s", e->id, eid, llmr_engine_status_name(st), eerr);
        goto unpin;
    }
    /* T107: the engine's budget covers the estimates of its current models (draining ones excluded,
     * so a hot reload may briefly hold two copies). */
    uint64_t reserved = 0;
    pthread_mutex_lock(&h->mu);
    for (entry *x = h->entries; x; x = x->next) {
        instance *ci = current_instance(x);
        if (ci && x != e && strcmp(ci->pl->m->id, eid) == 0) reserved += ci->estimate;
    }
    pthread_mutex_unlock(&h->mu);
    if (budget && need + reserved > budget) {
        st = LLMR_ENGINE_OOM_VRAM;
        llmr_errf(err, err_size, "model %s refused: engine %s needs %llu bytes of VRAM, its budget of %llu bytes has "
                "%llu free (%llu reserved by its other models)", e->id, eid, (unsigned long long)need,
                (unsigned long long)budget, (unsigned long long)(reserved < budget ? budget - reserved : 0),
                (unsigned long long)reserved);
        goto refuse;
    }
    /* T106: free device memory, sampled now, before the engine allocates anything. */
    llmr_resource_state rs;
    char perr[512] = "";
    int polled = llmr_resource_monitor_poll(h->monitor, &rs, perr, sizeof perr) == 0;
    if (polled && rs.last.has_vram && p->info.uses_gpu != 0 && strcmp(h->backend, "cpu") != 0) {
        uint64_t free_b = rs.last.vram_total > rs.last.vram_used ? rs.last.vram_total - rs.last.vram_used : 0;
        if (need > free_b) free_b = make_room(h, e, need, free_b, &rs);
        if (need > free_b) {
            st = LLMR_ENGINE_OOM_VRAM;
            llmr_errf(err, err_size, "model %s refused: engine %s needs %llu bytes of VRAM, %llu bytes are free "
                    "(GPU %d: %llu used of %llu; idle models cannot free enough)", e->id, eid, (unsigned long long)need, (unsigned long long)free_b,
                    h->device, (unsigned long long)rs.last.vram_used, (unsigned long long)rs.last.vram_total);
            goto refuse;
        }
    } else if (!polled) {
        log_warn("model %s: cannot check free VRAM before loading: %s", e->id, perr);
    }
    lp.vram_budget_bytes = budget ? budget - reserved : 0;
    llmr_engine_model *em = NULL;
    uint64_t t0 = now_ns();
    st = p->api->load(&d, &lp, &em, eerr, sizeof eerr);
    if (st != LLMR_ENGINE_OK || !em) {
        if (st == LLMR_ENGINE_OK) st = LLMR_ENGINE_INTERNAL;
        llmr_errf(err, err_size, "model %s: engine %s %s load failed: %s: %s", e->id, eid, p->m->version,
                llmr_engine_status_name(st), eerr);
        goto unpin;
    }
    instance *in = calloc(1, sizeof *in);
    if (!in) {
        p->api->unload(em);
        st = LLMR_ENGINE_OOM_RAM;
        llmr_errf(err, err_size, "model %s: out of memory", e->id);
        goto unpin;
    }
    pthread_mutex_init(&in->mu, NULL);
    in->e = e; in->pl = p; in->em = em; in->estimate = need;
    pthread_mutex_lock(&h->mu);
    instance *old = current_instance(e);
    if (old) old->draining = 1;
    in->next = e->insts;
    e->insts = in;
    e->last_used_ns = now_ns();
    pthread_mutex_unlock(&h->mu);
    log_info("loaded model %s on engine %s %s in %.1f s (estimate %llu bytes%s%s)", e->id, eid, p->m->version,
             (double)(now_ns() - t0) / 1e9, (unsigned long long)need, artifact_path ? ", artifact " : "",
             artifact_path ? artifact_path : "");
    return LLMR_ENGINE_OK;
refuse:
    pthread_mutex_lock(&h->mu);
    h->refusals++;
    pthread_mutex_unlock(&h->mu);
    log_warn("%s", err ? err : "load refused");
unpin:
    pthread_mutex_lock(&h->mu);
    plugin *dead = plugin_unref_locked(h, p);
    pthread_mutex_unlock(&h->mu);
    plugin_free(dead);
    return st;
}

/* load_instance_impl, recording the attempt in the entry (for heartbeats: loading, failed + why). */
static llmr_engine_status load_instance(llmr_engine_host *h, entry *e, char *err, size_t err_size) {
    char msg[2048] = "";
    pthread_mutex_lock(&h->mu);
    e->loading = 1;
    pthread_mutex_unlock(&h->mu);
    llmr_engine_status st = load_instance_impl(h, e, msg, sizeof msg);
    pthread_mutex_lock(&h->mu);
    e->loading = 0;
    e->last_status = st;
    copy_str(e->last_error, sizeof e->last_error, st == LLMR_ENGINE_OK ? "" : msg);
    pthread_mutex_unlock(&h->mu);
    if (err && err_size) snprintf(err, err_size, "%s", msg);
    return st;
}

/* --- scanning and hot reload ----------------------------------------------------------------- */

static void clear_rejections_locked(llmr_engine_host *h) {
    for (size_t i = 0; i < h->n_rejections; i++) free(h->rejections[i]);
    free(h->rejections);
    h->rejections = NULL;
    h->n_rejections = 0;
}

static void add_rejection_locked(llmr_engine_host *h, const char *msg) {
    char **v = realloc(h->rejections, (h->n_rejections + 1) * sizeof *v);
    if (!v) return;
    h->rejections = v;
    if ((v[h->n_rejections] = strdup(msg))) h->n_rejections++;
    h->rejections_total++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted plugin folders (sub-folders holding a manifest.json). Caller frees each and the array. */
static char **list_plugin_dirs(const char *root, size_t *n_out, int *err_out) {
    *n_out = 0;
    *err_out = 0;
    DIR *d = opendir(root);
    if (!d) { *err_out = errno; return NULL; }
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096], mpath[4200];
        snprintf(path, sizeof path, "%s/%s", root, de->d_name);
        snprintf(mpath, sizeof mpath, "%s/manifest.json", path);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || stat(mpath, &st) != 0) continue;
        char **nv = realloc(v, (n + 1) * sizeof *nv);
        if (!nv) break;
        v = nv;
        if ((v[n] = strdup(path))) n++;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, cmp_str);
    *n_out = n;
    return v;
}

/* A hash of every plugin folder's fingerprint: changes when any file is added, replaced or touched. */
static uint64_t tree_hash(llmr_engine_host *h) {
    size_t n;
    int e;
    char **dirs = list_plugin_dirs(h->engines_dir, &n, &e);
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        fingerprint fp;
        llmr_engine_manifest *m = NULL;
        char err[8];
        const char *lib = llmr_engine_manifest_load(dirs[i], &m, err, sizeof err) == 0 ? m->library : NULL;
        fingerprint_of(dirs[i], lib, &fp);
        llmr_engine_manifest_free(m);
        const unsigned char *b = (const unsigned char *)&fp;
        for (size_t k = 0; k < sizeof fp; k++) x = (x ^ b[k]) * 1099511628211ull;
        for (const char *s = dirs[i]; *s; s++) x = (x ^ (unsigned char)*s) * 1099511628211ull;
        free(dirs[i]);
    }
    free(dirs);
    return x;
}

/* Rescans the engines folder (caller holds load_mu): new or changed plugins are opened and become
 * current; plugins whose folder vanished stop being current; models on a replaced version are
 * shadow-loaded on the new one. Returns the number of plugins added or replaced. */
static int rescan(llmr_engine_host *h) {
    size_t n;
    int derr;
    char **dirs = list_plugin_dirs(h->engines_dir, &n, &derr);
    if (derr) log_error("engines dir %s: %s", h->engines_dir, strerror(derr));
    pthread_mutex_lock(&h->mu);
    clear_rejections_locked(h);
    pthread_mutex_unlock(&h->mu);
    int changed = 0;
    plugin **seen = calloc(n ? n : 1, sizeof *seen);
    for (size_t i = 0; i < n && seen; i++) {
        /* unchanged current plugin from this folder: keep it */
        plugin *same = NULL;
        pthread_mutex_lock(&h->mu);
        for (plugin *p = h->plugins; p; p = p->next) {
            if (!p->current || strcmp(p->m->dir, dirs[i]) != 0) continue;
            fingerprint fp;
            fingerprint_of(dirs[i], p->m->library, &fp);
            if (fingerprint_eq(&fp, &p->fp)) same = p;
        }
        pthread_mutex_unlock(&h->mu);
        if (same) { seen[i] = same; continue; }
        char err[1024];
        plugin *np = plugin_open(h, dirs[i], err, sizeof err);
        pthread_mutex_lock(&h->mu);
        if (np) {
            /* two folders may not claim one id in the same scan */
            for (size_t j = 0; j < i; j++)
                if (seen[j] && strcmp(seen[j]->m->id, np->m->id) == 0) {
                    snprintf(err, sizeof err, "%s/manifest.json: field \"id\": \"%s\" is already provided by %s",
                             dirs[i], np->m->id, seen[j]->m->dir);
                    plugin_free(np);
                    np = NULL;
                    break;
                }
        }
        if (!np) {
            add_rejection_locked(h, err);
            /* keep serving with the old version of this folder, if any */
            for (plugin *p = h->plugins; p; p = p->next)
                if (p->current && strcmp(p->m->dir, dirs[i]) == 0) seen[i] = p;
            pthread_mutex_unlock(&h->mu);
            log_warn("engine plugin rejected: %s%s", err, seen[i] ? " (the loaded version keeps serving)" : "");
            continue;
        }
        plugin *old = current_plugin_locked(h, np->m->id);
        if (old) old->current = 0;
        np->current = 1;
        np->refs = 1;
        np->next = h->plugins;
        h->plugins = np;
        seen[i] = np;
        changed++;
        plugin *dead = old ? plugin_unref_locked(h, old) : NULL;
        pthread_mutex_unlock(&h->mu);
        log_info("engine %s %s loaded from %s (ABI %u.%u)%s%s", np->m->id, np->m->version, dirs[i],
                 LLMR_ENGINE_ABI_MAJOR_OF(np->api->abi_version), LLMR_ENGINE_ABI_MINOR_OF(np->api->abi_version),
                 old ? ", replacing " : "", old ? old->m->version : "");
        plugin_free(dead);
    }
    /* plugins whose folder is gone (or lost its manifest) stop taking new models */
    pthread_mutex_lock(&h->mu);
    plugin *gone[64];
    size_t n_gone = 0;
    for (plugin *p = h->plugins; p; p = p->next) {
        if (!p->current) continue;
        int found = 0;
        for (size_t i = 0; i < n && seen && !found; i++) found = seen[i] == p;
        if (!found && n_gone < 64) { p->current = 0; gone[n_gone++] = p; log_info("engine %s %s removed from %s", p->m->id, p->m->version, h->engines_dir); }
    }
    plugin *dead[64];
    size_t n_dead = 0;
    for (size_t i = 0; i < n_gone; i++) {
        plugin *d = plugin_unref_locked(h, gone[i]);
        if (d) dead[n_dead++] = d;
    }
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < n_dead; i++) plugin_free(dead[i]);
    free(seen);
    for (size_t i = 0; i < n; i++) free(dirs[i]);
    free(dirs);

    /* models whose current instance runs on a plugin that is no longer current: shadow-load */
    for (;;) {
        entry *todo = NULL;
        pthread_mutex_lock(&h->mu);
        for (entry *e = h->entries; e && !todo; e = e->next) {
            instance *ci = current_instance(e);
            if (ci && !ci->pl->current && e->wanted == 1) todo = e;
        }
        pthread_mutex_unlock(&h->mu);
        if (!todo) break;
        char err[2048];
        llmr_engine_status st = load_instance(h, todo, err, sizeof err);
        if (st == LLMR_ENGINE_OK) {
            log_info("hot reload: model %s now runs on the new engine version; open sessions finish on the old", todo->id);
        } else {
            /* the instance keeps serving when its engine was replaced (retried at the next reload);
             * when its engine is gone it only finishes its open sessions */
            pthread_mutex_lock(&h->mu);
            instance *ci = current_instance(todo);
            int replaced = 0;
            for (plugin *p = h->plugins; p && ci; p = p->next)
                if (p->current && strcmp(p->m->id, ci->pl->m->id) == 0) replaced = 1;
            if (!replaced && ci) ci->draining = 1;
            else todo->wanted = 2;
            pthread_mutex_unlock(&h->mu);
            if (replaced) log_error("hot reload: %s; the old engine version keeps serving model %s", err, todo->id);
            else log_warn("hot reload: %s; open sessions of model %s finish on the removed engine", err, todo->id);
        }
    }
    pthread_mutex_lock(&h->mu);
    for (entry *e = h->entries; e; e = e->next) if (e->wanted == 2) e->wanted = 1;
    h->reloads++;
    pthread_mutex_unlock(&h->mu);
    reap_drained(h);
    return changed;
}

int llmr_engine_host_reload(llmr_engine_host *h) {
    pthread_mutex_lock(&h->load_mu);
    int n = rescan(h);
    h->watched_hash = h->seen_hash = tree_hash(h);
    pthread_mutex_unlock(&h->load_mu);
    return n;
}

void llmr_engine_host_request_reload(llmr_engine_host *h) { atomic_store(&h->reload_requested, 1); }

size_t llmr_engine_host_rejections(llmr_engine_host *h, size_t i, char *buf, size_t buf_size) {
    pthread_mutex_lock(&h->mu);
    size_t n = h->n_rejections;
    if (i < n && buf && buf_size) snprintf(buf, buf_size, "%s", h->rejections[i]);
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* --- models ---------------------------------------------------------------------------------- */

llmr_engine_status llmr_engine_host_select(llmr_engine_host *h, const llmr_model_descriptor *desc,
                                           const llmr_artifact *artifacts, size_t n_artifacts, char *engine_id,
                                           size_t engine_id_size, char *artifact_path, size_t artifact_path_size,
                                           char *err, size_t err_size) {
    if (!h || !desc || !desc->id) { llmr_errf(err, err_size, "invalid arguments"); return LLMR_ENGINE_INTERNAL; }
    entry *e = entry_new(desc, artifacts, n_artifacts);
    if (!e) { llmr_errf(err, err_size, "out of memory"); return LLMR_ENGINE_OOM_RAM; }
    const char *ap = NULL;
    char why[2048];
    pthread_mutex_lock(&h->mu);
    plugin *p = choose_locked(h, e, &ap, why, sizeof why);
    if (p) {
        if (engine_id && engine_id_size) snprintf(engine_id, engine_id_size, "%s", p->m->id);
        if (artifact_path && artifact_path_size) snprintf(artifact_path, artifact_path_size, "%s", ap ? ap : "");
        p->refs--; /* still listed (it is current), so never the last reference */
    }
    pthread_mutex_unlock(&h->mu);
    entry_free(e);
    if (!p) { llmr_errf(err, err_size, "model %s is unsupported: %s", desc->id, why); return LLMR_ENGINE_UNSUPPORTED; }
    return LLMR_ENGINE_OK;
}

llmr_engine_status llmr_engine_host_load(llmr_engine_host *h, const llmr_model_descriptor *desc,
                                         const llmr_artifact *artifacts, size_t n_artifacts, char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!h || !desc || !desc->id || !*desc->id) { llmr_errf(err, err_size, "invalid arguments: no model id"); return LLMR_ENGINE_INTERNAL; }
    /* fast path: already loaded (does not wait behind another model's load) */
    pthread_mutex_lock(&h->mu);
    entry *e = find_entry_locked(h, desc->id);
    if (e && current_instance(e) && e->wanted) {
        e->last_used_ns = now_ns();
        pthread_mutex_unlock(&h->mu);
        return LLMR_ENGINE_OK;
    }
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_lock(&h->load_mu);
    pthread_mutex_lock(&h->mu);
    e = find_entry_locked(h, desc->id);
    if (e && current_instance(e)) {
        e->wanted = 1;
        e->last_used_ns = now_ns();
        pthread_mutex_unlock(&h->mu);
        pthread_mutex_unlock(&h->load_mu);
        return LLMR_ENGINE_OK;
    }
    pthread_mutex_unlock(&h->mu);
    llmr_engine_status st;
    pthread_mutex_lock(&h->mu);
    int busy = e && e->insts; /* draining instances still point at e: keep its descriptor */
    pthread_mutex_unlock(&h->mu);
    if (busy) {
        e->wanted = 1;
        st = load_instance(h, e, err, err_size);
        goto done;
    }
    entry *fresh = entry_new(desc, artifacts, n_artifacts);
    if (!fresh) { llmr_errf(err, err_size, "out of memory"); st = LLMR_ENGINE_OOM_RAM; goto done; }
    pthread_mutex_lock(&h->mu);
    if (e) {
        /* known model without instances: adopt the new descriptor, keep the counters */
        fresh->lru_unloads = e->lru_unloads;
        atomic_store(&fresh->tokens, atomic_load(&e->tokens));
        for (entry **pp = &h->entries; *pp; pp = &(*pp)->next)
            if (*pp == e) { *pp = fresh; fresh->next = e->next; break; }
    } else {
        fresh->next = h->entries;
        h->entries = fresh;
    }
    pthread_mutex_unlock(&h->mu);
    entry_free(e);
    fresh->wanted = 1;
    st = load_instance(h, fresh, err, err_size);
done:
    pthread_mutex_unlock(&h->load_mu);
    return st;
}

llmr_engine_status llmr_engine_host_unload(llmr_engine_host *h, const char *model_id, char *err, size_t err_size) {
    pthread_mutex_lock(&h->load_mu);
    pthread_mutex_lock(&h->mu);
    entry *e = model_id ? find_entry_locked(h, model_id) : NULL;
    if (e) {
        e->wanted = 0;
        for (instance *in = e->insts; in; in = in->next) in->draining = 1;
    }
    pthread_mutex_unlock(&h->mu);
    if (e) reap_drained(h);
    pthread_mutex_unlock(&h->load_mu);
    if (!e) { llmr_errf(err, err_size, "model %s is not known to this node", model_id ? model_id : "(null)"); return LLMR_ENGINE_UNSUPPORTED; }
    return LLMR_ENGINE_OK;
}

/* --- sessions -------------------------------------------------------------------------------- */

/* The context a new session of in holds: the model's (the engine's stats), or less when the session
 * asked for less; 0 when neither is known. */
static uint32_t session_context(instance *in, const llmr_session_params *params) {
    llmr_engine_stats st = {sizeof st, 0, 0, 0, 0, 0, 0};
    const uint32_t model = in->pl->api->stats(in->em, &st) == LLMR_ENGINE_OK ? st.max_context : 0;
    const uint32_t asked = params && LLMR_HAS_FIELD(params, llmr_session_params, max_context) ? params->max_context : 0;
    return asked && (!model || asked < model) ? asked : model;
}

llmr_engine_status llmr_engine_host_session_create(llmr_engine_host *h, const char *model_id,
                                                   const llmr_session_params *params, llmr_host_session **out,
                                                   char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!h || !model_id || !out) { llmr_errf(err, err_size, "invalid arguments"); return LLMR_ENGINE_INTERNAL; }
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&h->mu);
        entry *e = find_entry_locked(h, model_id);
        instance *in = e ? current_instance(e) : NULL;
        if (in) {
            in->sessions++;
            h->sessions_active++;
            e->last_used_ns = now_ns();
            pthread_mutex_unlock(&h->mu);
            llmr_host_session *s = calloc(1, sizeof *s);
            llmr_engine_status st = LLMR_ENGINE_OOM_RAM;
            char eerr[1024] = "";
            if (s) {
                s->h = h;
                s->inst = in;
                snprintf(s->engine_id, sizeof s->engine_id, "%s", in->pl->m->id);
                snprintf(s->engine_version, sizeof s->engine_version, "%s", in->pl->m->version);
                pthread_mutex_lock(&in->mu);
                st = in->pl->api->session_create(in->em, params, &s->es, eerr, sizeof eerr);
                pthread_mutex_unlock(&in->mu);
                if (st == LLMR_ENGINE_OK && !s->es) st = LLMR_ENGINE_INTERNAL;
                if (st == LLMR_ENGINE_OK) s->max_context = session_context(in, params);
            } else snprintf(eerr, sizeof eerr, "out of memory");
            if (st == LLMR_ENGINE_OK) { *out = s; return st; }
            free(s);
            pthread_mutex_lock(&h->mu);
            in->sessions--;
            h->sessions_active--;
            pthread_mutex_unlock(&h->mu);
            llmr_errf(err, err_size, "model %s: engine %s session_create: %s: %s", model_id, in->pl->m->id,
                    llmr_engine_status_name(st), eerr);
            return st;
        }
        int wanted = e && e->wanted;
        pthread_mutex_unlock(&h->mu);
        if (!wanted || attempt > 0) {
            llmr_errf(err, err_size, "model %s is not loaded on this node", model_id);
            return LLMR_ENGINE_UNSUPPORTED;
        }
        /* LRU-unloaded (or its engine went away): load it again, then retry once */
        pthread_mutex_lock(&h->load_mu);
        pthread_mutex_lock(&h->mu);
        e = find_entry_locked(h, model_id);
        int need = e && e->wanted && !current_instance(e);
        pthread_mutex_unlock(&h->mu);
        llmr_engine_status st = need ? load_instance(h, e, err, err_size) : LLMR_ENGINE_OK;
        pthread_mutex_unlock(&h->load_mu);
        if (st != LLMR_ENGINE_OK) return st;
    }
}

/* Wakes the maintenance thread (e.g. so a drained instance is unloaded promptly). */
static void wake(llmr_engine_host *h) {
    pthread_mutex_lock(&h->tmu);
    pthread_cond_signal(&h->tcond);
    pthread_mutex_unlock(&h->tmu);
}

/* Destroys the engine session (returning its KV memory) and releases the instance. */
static void release_engine_session(llmr_host_session *s) {
    llmr_engine_host *h = s->h;
    instance *in = s->inst;
    pthread_mutex_lock(&in->mu);
    in->pl->api->session_destroy(s->es);
    pthread_mutex_unlock(&in->mu);
    s->es = NULL;
    pthread_mutex_lock(&h->mu);
    in->sessions--;
    h->sessions_active--;
    in->e->last_used_ns = now_ns();
    int drained = in->draining && in->sessions == 0;
    pthread_mutex_unlock(&h->mu);
    if (drained) wake(h);
}

void llmr_engine_host_session_destroy(llmr_host_session *s) {
    if (!s) return;
    if (s->es) release_engine_session(s);
    free(s);
}

const char *llmr_host_session_engine_id(const llmr_host_session *s) { return s->engine_id; }
const char *llmr_host_session_engine_version(const llmr_host_session *s) { return s->engine_version; }
uint32_t llmr_host_session_max_context(const llmr_host_session *s) { return s->max_context; }

/* Forwards each token to the caller, feeding the watchdog. Returns non-zero to stop after a cancel. */
static int on_token_trampoline(void *user, int32_t token) {
    llmr_host_session *s = user;
    atomic_store(&s->last_progress_ns, now_ns());
    s->tokens++;
    if (atomic_load(&s->cancel_req) || atomic_load(&s->timed_out)) return 1;
    return s->cb ? s->cb(s->user, token) : 0;
}

/* Forwards a token's log-probabilities to the caller (the engine calls it with the trampoline's user). */
static void on_logprobs_trampoline(void *user, const llmr_token_logprobs *lp) {
    llmr_host_session *s = user;
    if (s->lp_cb) s->lp_cb(s->user, lp);
}

llmr_engine_status llmr_engine_host_generate(llmr_host_session *s, const llmr_generate_request *req,
                                             llmr_token_cb on_token, void *user, llmr_generate_result *result_out,
                                             char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!s || !req) { llmr_errf(err, err_size, "invalid arguments"); return LLMR_ENGINE_INTERNAL; }
    const int want_lp = LLMR_HAS_FIELD(req, llmr_generate_request, top_logprobs) && req->on_logprobs;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&s->generating, &idle, 1)) {
        llmr_errf(err, err_size, "session busy: another generate is running on it");
        return LLMR_ENGINE_INTERNAL;
    }
    llmr_engine_host *h = s->h;
    if (!s->es) {
        atomic_store(&s->generating, 0);
        llmr_errf(err, err_size, "session was closed by the stall watchdog; create a new one");
        return LLMR_ENGINE_TIMEOUT;
    }
    if (want_lp && LLMR_ENGINE_ABI_MINOR_OF(s->inst->pl->api->abi_version) < 1) {
        char a[16];
        llmr_errf(err, err_size, "engine %s speaks ABI %s, which cannot report logprobs (ABI 1.1 and later can)",
                  s->inst->pl->m->id, abi_str(s->inst->pl->api->abi_version, a, sizeof a));
        atomic_store(&s->generating, 0);
        return LLMR_ENGINE_UNSUPPORTED;
    }
    if (want_lp && req->top_logprobs > LLMR_MAX_TOP_LOGPROBS) {
        llmr_errf(err, err_size, "top_logprobs %u exceeds %d", req->top_logprobs, LLMR_MAX_TOP_LOGPROBS);
        atomic_store(&s->generating, 0);
        return LLMR_ENGINE_UNSUPPORTED;
    }
    s->cb = on_token;
    s->lp_cb = want_lp ? req->on_logprobs : NULL;
    s->user = user;
    s->tokens = 0;
    atomic_store(&s->cancel_req, 0);
    atomic_store(&s->timed_out, 0);
    atomic_store(&s->last_progress_ns, now_ns());
    pthread_mutex_lock(&h->wd_mu);
    s->wd_prev = NULL;
    s->wd_next = h->running;
    if (h->running) h->running->wd_prev = s;
    h->running = s;
    h->n_running++;
    pthread_mutex_unlock(&h->wd_mu);

    llmr_generate_result res = {sizeof res, LLMR_FINISH_NONE, 0, 0, 0};
    char eerr[1024] = "";
    instance *in = s->inst;
    /* the engine's callbacks get this session as user; a copy of the request routes on_logprobs through it */
    llmr_generate_request rq;
    if (want_lp) {
        memcpy(&rq, req, sizeof rq);
        rq.on_logprobs = on_logprobs_trampoline;
        req = &rq;
    }
    llmr_engine_status st = in->pl->api->generate(s->es, req, on_token_trampoline, s, &res, eerr, sizeof eerr);

    pthread_mutex_lock(&h->wd_mu);
    if (s->wd_prev) s->wd_prev->wd_next = s->wd_next; else h->running = s->wd_next;
    if (s->wd_next) s->wd_next->wd_prev = s->wd_prev;
    h->n_running--;
    pthread_mutex_unlock(&h->wd_mu);

    atomic_fetch_add(&in->e->tokens, s->tokens);
    pthread_mutex_lock(&h->mu);
    h->tokens_total += s->tokens;
    pthread_mutex_unlock(&h->mu);

    if (atomic_load(&s->timed_out)) {
        /* T112: free the session (its KV memory) now; the client gets a timeout. The message is
         * written first: once released, the instance may be unloaded by another thread. */
        llmr_errf(err, err_size, "generation on model %s (engine %s) stalled: no token for %u ms; the stall watchdog "
                "cancelled it and freed the session after %u token(s)", in->e->id, in->pl->m->id, h->stall_ms, s->tokens);
        release_engine_session(s);
        pthread_mutex_lock(&h->mu);
        h->timeouts++;
        pthread_mutex_unlock(&h->mu);
        st = LLMR_ENGINE_TIMEOUT;
        res.finish = LLMR_FINISH_CANCELLED;
    } else if (atomic_load(&s->cancel_req) && (st == LLMR_ENGINE_OK || st == LLMR_ENGINE_CANCELLED)) {
        st = LLMR_ENGINE_CANCELLED;
        res.finish = LLMR_FINISH_CANCELLED;
        llmr_errf(err, err_size, "cancelled after %u token(s)", s->tokens);
    } else if (st != LLMR_ENGINE_OK) {
        llmr_errf(err, err_size, "model %s: engine %s generate: %s: %s", in->e->id, in->pl->m->id,
                llmr_engine_status_name(st), eerr);
    }
    if (result_out) {
        uint32_t n = result_out->struct_size && result_out->struct_size < sizeof res ? result_out->struct_size : sizeof res;
        memcpy(result_out, &res, n);
        result_out->struct_size = n;
    }
    atomic_store(&s->generating, 0);
    return st;
}

void llmr_engine_host_cancel(llmr_host_session *s) {
    if (!s) return;
    atomic_store(&s->cancel_req, 1);
    llmr_engine_host *h = s->h;
    pthread_mutex_lock(&h->wd_mu);
    for (llmr_host_session *r = h->running; r; r = r->wd_next)
        if (r == s) { s->inst->pl->api->cancel(s->es); break; }
    pthread_mutex_unlock(&h->wd_mu);
}

/* Cancels generations that produced no token for stall_ms; re-issued every tick while they run. */
static void watchdog_check(llmr_engine_host *h) {
    uint64_t now = now_ns(), limit = (uint64_t)h->stall_ms * 1000000ull;
    pthread_mutex_lock(&h->wd_mu);
    for (llmr_host_session *s = h->running; s; s = s->wd_next) {
        uint64_t last = atomic_load(&s->last_progress_ns);
        if (now <= last || now - last < limit) continue;
        if (!atomic_exchange(&s->timed_out, 1))
            log_warn("stall watchdog: model %s (engine %s) produced no token for %.1f s; cancelling the generation",
                     s->inst->e->id, s->inst->pl->m->id, (double)(now - last) / 1e9);
        s->inst->pl->api->cancel(s->es);
    }
    pthread_mutex_unlock(&h->wd_mu);
}

/* --- resources, LRU, budgets ----------------------------------------------------------------- */

/* Sums stats per engine id and logs budget overruns (T107). */
static void check_budgets(llmr_engine_host *h) {
    pthread_mutex_lock(&h->mu);
    for (plugin *p = h->plugins; p; p = p->next) {
        if (!p->current) continue;
        uint64_t budget = budget_of(h, p->m->id), used = 0;
        if (!budget) { p->over_budget = 0; continue; }
        for (entry *e = h->entries; e; e = e->next)
            for (instance *in = e->insts; in; in = in->next)
                if (strcmp(in->pl->m->id, p->m->id) == 0) {
                    llmr_engine_stats st = {sizeof st, 0, 0, 0, 0, 0, 0};
                    if (in->pl->api->stats(in->em, &st) == LLMR_ENGINE_OK) used += st.vram_bytes;
                }
        int over = used > budget;
        if (over && !p->over_budget) {
            h->overruns++;
            log_warn("engine %s uses %llu bytes of VRAM, over its budget of %llu", p->m->id, (unsigned long long)used,
                     (unsigned long long)budget);
        }
        p->over_budget = over;
    }
    pthread_mutex_unlock(&h->mu);
}

/* One poll; with `wait` 0 it returns 1 at once when a load/unload holds load_mu. */
static int poll_impl(llmr_engine_host *h, int wait, llmr_resource_state *out, char *err, size_t err_size) {
    llmr_resource_state rs;
    if (wait) pthread_mutex_lock(&h->load_mu);
    else if (pthread_mutex_trylock(&h->load_mu) != 0) return 1;
    int rc = llmr_resource_monitor_poll(h->monitor, &rs, err, err_size);
    int stuck_logged = 0;
    /* T105: while at or above the threshold, unload the least-recently-used idle model */
    while (rc == 0 && (rs.vram_alert || rs.ram_alert)) {
        pthread_mutex_lock(&h->mu);
        instance *victim = lru_idle_locked(h, NULL);
        if (victim) {
            unlink_instance_locked(victim);
            victim->e->lru_unloads++;
            h->lru_unloads++;
        }
        pthread_mutex_unlock(&h->mu);
        if (!victim) {
            if (!stuck_logged) log_debug("resource alert persists: no idle model left to unload");
            stuck_logged = 1;
            break;
        }
        char why[160];
        snprintf(why, sizeof why, "LRU: %s use %.1f%% >= %.0f%%", rs.vram_alert ? "VRAM" : "RAM",
                 (rs.vram_alert ? rs.vram_ratio : rs.ram_ratio) * 100, rs.threshold * 100);
        instance_unload(h, victim, why);
        rc = llmr_resource_monitor_poll(h->monitor, &rs, err, err_size);
    }
    pthread_mutex_unlock(&h->load_mu);
    check_budgets(h);
    if (out) *out = rs;
    return rc;
}

int llmr_engine_host_poll(llmr_engine_host *h, llmr_resource_state *out, char *err, size_t err_size) {
    return poll_impl(h, 1, out, err, err_size);
}

/* The maintenance thread never waits for load_mu (a model load may hold it for minutes): work that
 * needs it is skipped and retried at the next tick, so the watchdog keeps running meanwhile. */
void llmr_engine_host_tick(llmr_engine_host *h) {
    watchdog_check(h);
    if (pthread_mutex_trylock(&h->load_mu) != 0) return;
    if (atomic_exchange(&h->reload_requested, 0)) {
        log_info("reload requested: rescanning %s", h->engines_dir);
        rescan(h);
        h->watched_hash = h->seen_hash = tree_hash(h);
    }
    reap_drained(h);
    pthread_mutex_unlock(&h->load_mu);
}

/* Reloads when the plugin files changed and then stayed unchanged for one interval (so a copy in
 * progress is not loaded half-written). */
static void watch_files(llmr_engine_host *h) {
    if (pthread_mutex_trylock(&h->load_mu) != 0) return; /* busy loading: next interval */
    uint64_t x = tree_hash(h);
    if (x != h->watched_hash && x == h->seen_hash) {
        log_info("engine plugin files changed in %s: reloading", h->engines_dir);
        rescan(h);
        x = tree_hash(h);
        h->watched_hash = x;
    }
    h->seen_hash = x;
    pthread_mutex_unlock(&h->load_mu);
}

static void *maintenance_main(void *arg) {
    llmr_engine_host *h = arg;
    uint32_t tick_ms = h->stall_ms / 4 < 50 ? (h->stall_ms / 4 ? h->stall_ms / 4 : 1) : 50;
    uint64_t next_poll = now_ns(), next_watch = now_ns() + (uint64_t)h->watch_ms * 1000000ull;
    pthread_mutex_lock(&h->tmu);
    while (!h->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)tick_ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&h->tcond, &h->tmu, &ts);
        if (h->stop) break;
        pthread_mutex_unlock(&h->tmu);
        llmr_engine_host_tick(h);
        uint64_t now = now_ns();
        if (now >= next_poll) {
            char err[512];
            if (poll_impl(h, 0, NULL, err, sizeof err) < 0) log_debug("resource poll: %s", err);
            next_poll = now + (uint64_t)h->poll_ms * 1000000ull;
        }
        if (h->watch && now >= next_watch) {
            watch_files(h);
            next_watch = now + (uint64_t)h->watch_ms * 1000000ull;
        }
        pthread_mutex_lock(&h->tmu);
    }
    pthread_mutex_unlock(&h->tmu);
    return NULL;
}

/* --- lifecycle ------------------------------------------------------------------------------- */

int llmr_engine_host_default_dir(char *buf, size_t buf_size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0; /* .../build/bin */
    slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0; /* .../build */
    int w = snprintf(buf, buf_size, "%s/engines", exe);
    return w > 0 && (size_t)w < buf_size ? 0 : -1;
}

llmr_engine_status llmr_engine_host_create(const llmr_engine_host_config *cfg, llmr_engine_host **out, char *err,
                                           size_t err_size) {
    if (err && err_size) err[0] = 0;
    llmr_resource_provider *prov = cfg ? cfg->provider : NULL;
    if (!cfg || !cfg->engines_dir || !out) {
        llmr_resource_provider_destroy(prov);
        llmr_errf(err, err_size, "invalid arguments: engines_dir is required");
        return LLMR_ENGINE_INTERNAL;
    }
    struct stat st;
    if (stat(cfg->engines_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        llmr_errf(err, err_size, "engines dir %s: %s", cfg->engines_dir, errno && stat(cfg->engines_dir, &st) != 0 ? strerror(errno) : "not a directory");
        llmr_resource_provider_destroy(prov);
        return LLMR_ENGINE_LOAD_FAILED;
    }
    llmr_engine_host *h = calloc(1, sizeof *h);
    if (!h) { llmr_resource_provider_destroy(prov); llmr_errf(err, err_size, "out of memory"); return LLMR_ENGINE_OOM_RAM; }
    pthread_mutex_init(&h->load_mu, NULL);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->wd_mu, NULL);
    pthread_mutex_init(&h->tmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->tcond, &ca);
    pthread_condattr_destroy(&ca);
    h->engines_dir = strdup(cfg->engines_dir);
    h->backend = strdup(cfg->backend && *cfg->backend ? cfg->backend : "cuda");
    h->device = cfg->device;
    h->cc_major = cfg->cc_major > 0 ? cfg->cc_major : -1;
    h->cc_minor = cfg->cc_major > 0 ? cfg->cc_minor : -1;
    h->poll_ms = cfg->poll_interval_ms ? cfg->poll_interval_ms : 1000;
    h->stall_ms = cfg->stall_timeout_ms ? cfg->stall_timeout_ms : 30000;
    h->watch_ms = cfg->watch_interval_ms ? cfg->watch_interval_ms : 2000;
    h->watch = !cfg->no_watch;
    h->keep_libraries = cfg->keep_libraries;
    h->max_context = cfg->max_context;
    h->max_sessions = cfg->max_sessions;
    h->default_budget = cfg->default_vram_budget;
    char tmpl[] = "/tmp/llmr-engines-XXXXXX";
    const char *tmpdir = mkdtemp(tmpl);
    h->tmpdir = tmpdir ? strdup(tmpdir) : NULL;
    if (cfg->n_budgets) {
        h->budgets = calloc(cfg->n_budgets, sizeof *h->budgets);
        for (size_t i = 0; h->budgets && i < cfg->n_budgets; i++) {
            h->budgets[i].engine_id = xstrdup(cfg->budgets[i].engine_id ? cfg->budgets[i].engine_id : "");
            h->budgets[i].bytes = cfg->budgets[i].bytes;
            h->n_budgets = i + 1;
            if (!h->budgets[i].engine_id) break;
        }
    }
    if (!prov) {
        char note[512] = "";
        prov = llmr_resource_provider_system_create(cfg->device >= 0 ? (unsigned)cfg->device : 0, note, sizeof note);
        if (note[0] && strcmp(h->backend, "cpu") != 0) log_warn("resource manager: VRAM unknown: %s", note);
    }
    h->monitor = prov ? llmr_resource_monitor_create(prov, cfg->alert_threshold) : NULL;
    if (!h->monitor) llmr_resource_provider_destroy(prov);
    else h->provider_name = prov->name;
    if (!h->engines_dir || !h->backend || !h->tmpdir || !h->monitor || (cfg->n_budgets && h->n_budgets != cfg->n_budgets)) {
        llmr_errf(err, err_size, "cannot create the engine host: %s", !h->tmpdir ? "mkdtemp in /tmp failed" : "out of memory");
        llmr_engine_host_destroy(h);
        return LLMR_ENGINE_OOM_RAM;
    }
    llmr_engine_host_reload(h);
    size_t np = 0;
    for (plugin *p = h->plugins; p; p = p->next) np++;
    log_info("engine host: %zu plugin(s) from %s, %zu rejected; backend %s, resources via %s", np, h->engines_dir,
             h->n_rejections, h->backend, h->provider_name);
    if (!cfg->no_thread) {
        if (pthread_create(&h->thread, NULL, maintenance_main, h) != 0) {
            llmr_errf(err, err_size, "cannot start the maintenance thread: %s", strerror(errno));
            llmr_engine_host_destroy(h);
            return LLMR_ENGINE_INTERNAL;
        }
        h->thread_started = 1;
    }
    *out = h;
    return LLMR_ENGINE_OK;
}

void llmr_engine_host_destroy(llmr_engine_host *h) {
    if (!h) return;
    if (h->thread_started) {
        pthread_mutex_lock(&h->tmu);
        h->stop = 1;
        pthread_cond_signal(&h->tcond);
        pthread_mutex_unlock(&h->tmu);
        pthread_join(h->thread, NULL);
    }
    /* unload everything: sessions left open are the caller's bug; their engine sessions go first */
    while (h->entries) {
        entry *e = h->entries;
        h->entries = e->next;
        while (e->insts) {
            instance *in = e->insts;
            e->insts = in->next;
            if (in->sessions) log_warn("engine host destroyed with %u open session(s) on model %s", in->sessions, e->id);
            in->sessions = 0;
            in->next = NULL;
            instance_unload(h, in, "shutdown");
        }
        entry_free(e);
    }
    while (h->plugins) {
        plugin *p = h->plugins;
        h->plugins = p->next;
        plugin_free(p);
    }
    clear_rejections_locked(h);
    for (size_t i = 0; i < h->n_budgets; i++) free((char *)h->budgets[i].engine_id);
    free(h->budgets);
    llmr_resource_monitor_destroy(h->monitor);
    if (h->tmpdir) rmdir(h->tmpdir);
    free(h->tmpdir);
    free(h->engines_dir);
    free(h->backend);
    pthread_mutex_destroy(&h->load_mu);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->wd_mu);
    pthread_mutex_destroy(&h->tmu);
    pthread_cond_destroy(&h->tcond);
    free(h);
}

/* --- introspection --------------------------------------------------------------------------- */

int llmr_engine_host_plugins(llmr_engine_host *h, llmr_host_plugin_info **out, size_t *n_out) {
    pthread_mutex_lock(&h->mu);
    size_t n = 0;
    for (plugin *p = h->plugins; p; p = p->next) n++;
    llmr_host_plugin_info *v = calloc(n ? n : 1, sizeof *v);
    if (!v) { pthread_mutex_unlock(&h->mu); return -1; }
    size_t k = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (plugin *p = h->plugins; p; p = p->next) {
            if (p->current != pass) continue;
            llmr_host_plugin_info *i = &v[k++];
            snprintf(i->id, sizeof i->id, "%s", p->m->id);
            snprintf(i->version, sizeof i->version, "%s", p->m->version);
            snprintf(i->dir, sizeof i->dir, "%s", p->m->dir);
            snprintf(i->description, sizeof i->description, "%s", p->m->description);
            i->abi_version = p->api->abi_version;
            i->active = p->current;
            i->vram_budget = budget_of(h, p->m->id);
            i->over_budget = p->over_budget;
            for (entry *e = h->entries; e; e = e->next)
                for (instance *in = e->insts; in; in = in->next) {
                    if (in->pl != p) continue;
                    i->instances++;
                    if (!in->draining) i->vram_reserved += in->estimate;
                    llmr_engine_stats st = {sizeof st, 0, 0, 0, 0, 0, 0};
                    if (p->api->stats(in->em, &st) == LLMR_ENGINE_OK) i->vram_bytes += st.vram_bytes;
                }
        }
    pthread_mutex_unlock(&h->mu);
    *out = v;
    *n_out = n;
    return 0;
}

int llmr_engine_host_models(llmr_engine_host *h, llmr_host_model_info **out, size_t *n_out) {
    pthread_mutex_lock(&h->mu);
    size_t n = 0;
    for (entry *e = h->entries; e; e = e->next) n++;
    llmr_host_model_info *v = calloc(n ? n : 1, sizeof *v);
    if (!v) { pthread_mutex_unlock(&h->mu); return -1; }
    uint64_t now = now_ns();
    size_t k = 0;
    for (entry *e = h->entries; e; e = e->next, k++) {
        llmr_host_model_info *i = &v[k];
        snprintf(i->model_id, sizeof i->model_id, "%s", e->id);
        instance *ci = current_instance(e);
        i->loaded = ci != NULL;
        for (instance *in = e->insts; in; in = in->next) {
            i->sessions += in->sessions;
            if (in->draining) i->draining++;
        }
        if (ci) {
            snprintf(i->engine_id, sizeof i->engine_id, "%s", ci->pl->m->id);
            snprintf(i->engine_version, sizeof i->engine_version, "%s", ci->pl->m->version);
            i->vram_estimate = ci->estimate;
            llmr_engine_stats st = {sizeof st, 0, 0, 0, 0, 0, 0};
            if (ci->pl->api->stats(ci->em, &st) == LLMR_ENGINE_OK) { i->vram_bytes = st.vram_bytes; i->ram_bytes = st.ram_bytes; }
        }
        i->tokens_generated = atomic_load(&e->tokens);
        i->idle_seconds = now > e->last_used_ns ? (double)(now - e->last_used_ns) / 1e9 : 0;
        i->lru_unloads = e->lru_unloads;
        i->loading = e->loading;
        i->last_status = e->last_status;
        snprintf(i->last_error, sizeof i->last_error, "%s", e->last_error);
    }
    pthread_mutex_unlock(&h->mu);
    *out = v;
    *n_out = n;
    return 0;
}

void llmr_engine_host_snapshot(llmr_engine_host *h, llmr_host_snapshot *out) {
    memset(out, 0, sizeof *out);
    llmr_resource_monitor_state(h->monitor, &out->res);
    out->provider = h->provider_name;
    out->device = h->device;
    pthread_mutex_lock(&h->mu);
    for (plugin *p = h->plugins; p; p = p->next) {
        if (p->current) out->plugins_active++;
        else out->plugins_draining++;
    }
    for (entry *e = h->entries; e; e = e->next)
        for (instance *in = e->insts; in; in = in->next) {
            if (in->draining) out->instances_draining++;
            else out->models_loaded++;
        }
    out->sessions_active = h->sessions_active;
    out->tokens_generated_total = h->tokens_total;
    out->watchdog_timeouts_total = h->timeouts;
    out->lru_unloads_total = h->lru_unloads;
    out->load_refusals_total = h->refusals;
    out->plugin_rejections_total = h->rejections_total;
    out->reloads_total = h->reloads;
    out->budget_overruns_total = h->overruns;
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_lock(&h->wd_mu);
    out->generations_running = h->n_running;
    pthread_mutex_unlock(&h->wd_mu);
}
