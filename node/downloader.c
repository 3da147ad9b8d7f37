/* downloader.c — see downloader.h. The byte-level work (Range resume, retries, hashing while
 * writing, atomic rename) is common/http_client.c's; this module decides what to fetch, checks space,
 * refetches once on a mismatch, aggregates progress over a model's files and names the file at fault. */
#include "node/downloader.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/log.h"
#include "common/path_safety.h"
#include "common/sha256.h"

const char *llmr_dl_strerror(llmr_dl_status st) {
    switch (st) {
    case LLMR_DL_OK: return "ok";
    case LLMR_DL_EINVAL: return "invalid argument";
    case LLMR_DL_ENOSPACE: return "not enough disk space";
    case LLMR_DL_EVERIFY: return "file failed verification";
    case LLMR_DL_EFETCH: return "file could not be fetched";
    case LLMR_DL_EIO: return "local file error";
    case LLMR_DL_ECANCELLED: return "cancelled";
    }
    return "unknown status";
}


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* mkdir -p for the folder part of path (everything before the last '/'). */
static int mkdirs_for(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf) return 0;
    *slash = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return (mkdir(buf, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

static int file_size(const char *path, uint64_t *size) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    *size = (uint64_t)sb.st_size;
    return 0;
}

uint64_t llmr_dl_bytes_needed(const char *model_dir, const llmr_manifest_file *files, size_t n) {
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        uint64_t have = 0;
        snprintf(path, sizeof path, "%s/%s", model_dir, files[i].name);
        if (file_size(path, &have) == 0) continue; /* complete (verified later) */
        snprintf(path, sizeof path, "%s/%s.partial", model_dir, files[i].name);
        if (file_size(path, &have) != 0 || have > files[i].size) have = 0;
        need += files[i].size - have;
    }
    return need;
}

int llmr_dl_space_check(const char *dir, uint64_t needed, const char *label, char *err, size_t es) {
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0) {
        llmr_errf_status(LLMR_DL_EIO, err, es, "%s: cannot read free space: %s", dir, strerror(errno));
        return -1;
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (needed <= avail) return 0;
    llmr_errf_status(LLMR_DL_ENOSPACE, err, es, "not enough disk space in %s: need %llu bytes (%.2f GiB) for %s, %llu bytes (%.2f GiB) free",
         dir, (unsigned long long)needed, (double)needed / (1 << 30), label ? label : "the model",
         (unsigned long long)avail, (double)avail / (1 << 30));
    return -1;
}

/* Progress over all files of one call, shared by its streams (mu guards everything below it). */
typedef struct slot slot;
typedef struct prog {
    const llmr_dl_opts *o;
    pthread_mutex_t mu;
    uint64_t done, total;     /* bytes of finished (or present) files; bytes of all files */
    uint64_t fetched;         /* bytes received in this call by finished transfers */
    double last_log;
    double t0;                /* start of this call, for the average rate */
    const char *cur_file;     /* the file that reported last, for "current file" */
    slot *slots;              /* one per stream */
    size_t n_slots;
} prog;

/* One stream's transfer in flight. */
struct slot {
    prog *p;
    const llmr_manifest_file *file; /* NULL while idle */
    uint64_t bytes;           /* bytes of the file on disk now */
    uint64_t file_start;      /* bytes the file had when its transfer began */
    double rate;              /* the transfer's recent rate (0 between transfers) */
    int oversize;             /* the server sent more than the manifest's size */
    const atomic_int *stop;   /* the run stops (cancel, or a sibling failed): abort (may be NULL) */
};

/* Sums the streams and reports; called with p->mu held. */
static void report_locked(prog *p, int force_log) {
    uint64_t in_flight = 0, got = p->fetched;
    double rate = 0;
    for (size_t i = 0; i < p->n_slots; i++) {
        const slot *sl = &p->slots[i];
        if (!sl->file) continue;
        in_flight += sl->bytes;
        got += sl->bytes > sl->file_start ? sl->bytes - sl->file_start : 0;
        rate += sl->rate;
    }
    /* Between transfers the client reports no rate: use the average of this call instead. */
    if (rate <= 0) {
        double dt = now_s() - p->t0;
        rate = dt > 0.05 ? (double)got / dt : 0;
    }
    llmr_model_progress mp;
    memset(&mp, 0, sizeof mp);
    mp.bytes_done = p->done + in_flight;
    mp.bytes_total = p->total;
    mp.bytes_per_second = rate;
    mp.eta_seconds = rate > 0 && p->total >= mp.bytes_done ? (double)(p->total - mp.bytes_done) / rate : -1;
    snprintf(mp.file, sizeof mp.file, "%s", p->cur_file ? p->cur_file : "");
    if (p->o->progress) p->o->progress(p->o->progress_user, &mp);
    int period = p->o->log_interval_ms ? p->o->log_interval_ms : 5000;
    double t = now_s();
    if (period > 0 && (force_log || (t - p->last_log) * 1000.0 >= period)) {
        p->last_log = t;
        double pct = mp.bytes_total ? 100.0 * (double)mp.bytes_done / (double)mp.bytes_total : 100.0;
        char eta[32] = "?";
        if (mp.eta_seconds >= 0) snprintf(eta, sizeof eta, "%.0fs", mp.eta_seconds);
        log_info("%s: %.1f%% (%llu of %llu bytes) %.2f MB/s ETA %s [%s]", p->o->label ? p->o->label : "download", pct,
                 (unsigned long long)mp.bytes_done, (unsigned long long)mp.bytes_total, rate / 1e6, eta, mp.file);
    }
}

static void slot_update(slot *sl, uint64_t bytes, double rate) {
    pthread_mutex_lock(&sl->p->mu);
    sl->bytes = bytes;
    sl->rate = rate;
    sl->p->cur_file = sl->file->name;
    report_locked(sl->p, 0);
    pthread_mutex_unlock(&sl->p->mu);
}

static int on_progress(void *user, uint64_t bytes, uint64_t total, double rate) {
    (void)total;
    slot *sl = user;
    if (bytes > sl->file->size) { sl->oversize = 1; return 1; } /* never let a server fill the disk */
    slot_update(sl, bytes, rate);
    return sl->stop && atomic_load(sl->stop);
}

#define LABEL(o) ((o)->label ? (o)->label : "download")

static int cancelled(const llmr_dl_opts *o) { return o->cancel && atomic_load(o->cancel); }

/* One file: download, and once more after a mismatch. Counts go to rep (the stream's own). */
static llmr_dl_status fetch_one(const llmr_dl_opts *o, slot *sl, const char *dest, llmr_dl_report *rep, char *err,
                                size_t es) {
    const llmr_manifest_file *f = sl->file;
    char why[1024], first[1024] = "";
    for (int attempt = 0; attempt < 2; attempt++) {
        sl->oversize = 0;
        /* The run's stop flag, not only the caller's cancel: a stream waiting out a retry backoff
         * wakes at once when a sibling fails or the caller cancels. */
        llmr_httpc_download_opts dopts = {.expected_size = (int64_t)f->size, .expected_sha256 = f->sha256,
                                          .progress = on_progress, .progress_user = sl,
                                          .cancel = sl->stop ? sl->stop : o->cancel};
        llmr_httpc_download_result res;
        llmr_httpc_status st = llmr_httpc_download(o->client, f->url, dest, &dopts, &res, why, sizeof why);
        if (st == LLMR_HTTPC_OK) {
            rep->fetched++;
            rep->bytes_fetched += res.bytes - res.resumed_from;
            if (res.resumed_from) log_info("%s: %s resumed at byte %llu", LABEL(o), f->name, (unsigned long long)res.resumed_from);
            if (res.attempts > 1)
                log_info("%s: %s complete after %d attempts (interrupted transfers resumed with Range)", LABEL(o), f->name,
                         res.attempts);
            return LLMR_DL_OK;
        }
        if (sl->oversize) {
            char partial[4200];
            snprintf(partial, sizeof partial, "%s.partial", dest);
            unlink(partial);
            snprintf(why, sizeof why, "server sent more than the manifest's %llu bytes", (unsigned long long)f->size);
            st = LLMR_HTTPC_EVERIFY;
        } else if (st == LLMR_HTTPC_EABORTED || cancelled(o) || (sl->stop && atomic_load(sl->stop))) {
            return llmr_errf_status(LLMR_DL_ECANCELLED, err, es, "%s: download cancelled", f->name);
        }
        if (st != LLMR_HTTPC_EVERIFY)
            return llmr_errf_status(st == LLMR_HTTPC_EIO ? LLMR_DL_EIO : LLMR_DL_EFETCH, err, es, "%s: %s", f->name, why);
        if (attempt == 0) {
            log_warn("%s: %s failed verification (%s); deleted, fetching it once more", LABEL(o), f->name, why);
            snprintf(first, sizeof first, "%s", why);
            rep->refetched++;
        }
    }
    return llmr_errf_status(LLMR_DL_EVERIFY, err, es, "%s: failed verification twice (first: %s; then: %s)", f->name, first, why);
}

static void warn_add(llmr_dl_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_add(llmr_dl_report *rep, const char *fmt, ...) {
    size_t l = strlen(rep->warnings);
    if (l && l + 2 < sizeof rep->warnings) { strcat(rep->warnings, "; "); l += 2; }
    va_list ap;
    va_start(ap, fmt);
    if (l < sizeof rep->warnings) vsnprintf(rep->warnings + l, sizeof rep->warnings - l, fmt, ap);
    va_end(ap);
}

/* The work of one llmr_dl_fetch call, shared by its streams (p.mu guards the mutable fields). */
typedef struct fetch_run {
    prog p;
    const llmr_manifest_file *files;
    size_t *todo, n_todo, next;  /* indexes of the files to fetch; the next one to take */
    llmr_dl_report *rep;
    atomic_int stop;             /* a required file failed, or the caller cancelled: every stream stops */
    llmr_dl_status st;           /* the first failure, with its message */
    char err[1536];
    int active;                  /* streams with a file in flight */
    int running;                 /* stream threads not yet finished */
    pthread_cond_t done;         /* signalled as each stream thread finishes */
} fetch_run;

/* Fetches todo files one after another until none is left or the run stops. */
static void stream_loop(fetch_run *r, slot *sl) {
    const llmr_dl_opts *o = r->p.o;
    for (;;) {
        pthread_mutex_lock(&r->p.mu);
        if (r->next >= r->n_todo || atomic_load(&r->stop)) { pthread_mutex_unlock(&r->p.mu); return; }
        const llmr_manifest_file *f = &r->files[r->todo[r->next++]];
        char path[4096], partial[4200], msg[1536];
        uint64_t have;
        snprintf(path, sizeof path, "%s/%s", o->model_dir, f->name);
        snprintf(partial, sizeof partial, "%s.partial", path);
        sl->file = f;
        sl->file_start = sl->bytes = file_size(partial, &have) == 0 ? have : 0;
        sl->rate = 0;
        if (++r->active > r->rep->peak_streams) r->rep->peak_streams = r->active;
        pthread_mutex_unlock(&r->p.mu);

        llmr_dl_report lr;
        memset(&lr, 0, sizeof lr);
        llmr_dl_status st;
        if (cancelled(o)) st = llmr_errf_status(LLMR_DL_ECANCELLED, msg, sizeof msg, "download cancelled");
        else if (mkdirs_for(path) != 0)
            st = llmr_errf_status(LLMR_DL_EIO, msg, sizeof msg, "cannot create the folder of %s: %s", path, strerror(errno));
        else st = fetch_one(o, sl, path, &lr, msg, sizeof msg);
        int skipped = st != LLMR_DL_OK && st != LLMR_DL_ECANCELLED && f->optional;
        if (skipped) log_warn("%s: optional %s %s skipped: %s", LABEL(o), f->backend ? "artifact" : "file", f->name, msg);

        pthread_mutex_lock(&r->p.mu);
        r->active--;
        r->rep->fetched += lr.fetched;
        r->rep->refetched += lr.refetched;
        r->rep->bytes_fetched += lr.bytes_fetched;
        r->p.fetched += lr.bytes_fetched;
        sl->file = NULL;
        if (skipped) {
            warn_add(r->rep, "optional %s %s skipped: %s", f->backend ? "artifact" : "file", f->name, msg);
            r->rep->optional_failed++;
        } else if (st != LLMR_DL_OK && r->st == LLMR_DL_OK) {
            r->st = st; /* the first failure names the cause; the streams it stops only say "cancelled" */
            snprintf(r->err, sizeof r->err, "%s", msg);
            atomic_store(&r->stop, 1);
        }
        if (st == LLMR_DL_OK || skipped) {
            r->p.done += f->size;
            report_locked(&r->p, 0);
        }
        pthread_mutex_unlock(&r->p.mu);
    }
}

typedef struct stream_arg { fetch_run *r; slot *sl; } stream_arg;
static void *stream_main(void *arg) {
    stream_arg *a = arg;
    stream_loop(a->r, a->sl);
    pthread_mutex_lock(&a->r->p.mu);
    a->r->running--;
    pthread_cond_signal(&a->r->done);
    pthread_mutex_unlock(&a->r->p.mu);
    return NULL;
}

/* The caller's thread supervises: it copies the caller's cancel flag into the run's stop flag
 * (which every transfer and backoff watches) every 100 ms until the streams are done. */
static void supervise(fetch_run *r) {
    pthread_mutex_lock(&r->p.mu);
    while (r->running > 0) {
        if (cancelled(r->p.o)) atomic_store(&r->stop, 1);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&r->done, &r->p.mu, &until);
    }
    pthread_mutex_unlock(&r->p.mu);
}

llmr_dl_status llmr_dl_fetch(const llmr_dl_opts *o, const llmr_manifest_file *files, size_t n, llmr_dl_report *rep_out,
                             char *err, size_t es) {
    llmr_dl_report rep_local, *rep = rep_out ? rep_out : &rep_local;
    memset(rep, 0, sizeof *rep);
    if (!o || !o->client || !o->model_dir || (n && !files)) return llmr_errf_status(LLMR_DL_EINVAL, err, es, "download: missing argument");
    int streams = o->streams ? o->streams : LLMR_DL_STREAMS_DEFAULT;
    if (streams < 1 || streams > LLMR_DL_STREAMS_MAX)
        return llmr_errf_status(LLMR_DL_EINVAL, err, es, "download streams %d out of range 1..%d", o->streams, LLMR_DL_STREAMS_MAX);
    char path[4096], why[256];
    for (size_t i = 0; i < n; i++)
        if (!llmr_path_is_safe(files[i].name, why, sizeof why))
            return llmr_errf_status(LLMR_DL_EINVAL, err, es, "unsafe file name '%s': %s", files[i].name, why);
    snprintf(path, sizeof path, "%s/.", o->model_dir);
    if (mkdirs_for(path) != 0) return llmr_errf_status(LLMR_DL_EIO, err, es, "cannot create %s: %s", o->model_dir, strerror(errno));
    uint64_t needed = llmr_dl_bytes_needed(o->model_dir, files, n);
    if (llmr_dl_space_check(o->model_dir, needed, o->label, err, es) != 0) {
        struct statvfs v;
        return statvfs(o->model_dir, &v) == 0 ? LLMR_DL_ENOSPACE : LLMR_DL_EIO;
    }
    if (cancelled(o)) return llmr_errf_status(LLMR_DL_ECANCELLED, err, es, "download cancelled");
    fetch_run r;
    memset(&r, 0, sizeof r);
    r.p.o = o;
    r.p.last_log = r.p.t0 = now_s();
    r.files = files;
    r.rep = rep;
    r.st = LLMR_DL_OK;
    atomic_init(&r.stop, 0);
    size_t n_streams = 0;
    r.todo = calloc(n ? n : 1, sizeof *r.todo);
    slot *slots = calloc((size_t)streams, sizeof *slots);
    pthread_t *th = calloc((size_t)streams, sizeof *th);
    stream_arg *args = calloc((size_t)streams, sizeof *args);
    if (!r.todo || !slots || !th || !args) {
        free(r.todo); free(slots); free(th); free(args);
        return llmr_errf_status(LLMR_DL_EIO, err, es, "download of %s: out of memory", LABEL(o));
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t have;
        r.p.total += files[i].size;
        snprintf(path, sizeof path, "%s/%s", o->model_dir, files[i].name);
        if (file_size(path, &have) == 0) { rep->present++; r.p.done += files[i].size; } /* verified later */
        else r.todo[r.n_todo++] = i;
    }
    n_streams = (size_t)streams < r.n_todo ? (size_t)streams : r.n_todo;
    r.p.slots = slots;
    r.p.n_slots = n_streams;
    pthread_mutex_init(&r.p.mu, NULL);
    pthread_cond_init(&r.done, NULL);
    /* Each stream is a thread of its own (fewer if creating one fails); the caller supervises. */
    size_t started = 0;
    for (size_t i = 0; i < n_streams; i++) {
        slots[i] = (slot){.p = &r.p, .stop = &r.stop};
        args[i] = (stream_arg){&r, &slots[i]};
    }
    pthread_mutex_lock(&r.p.mu);
    for (; started < n_streams; started++) {
        if (pthread_create(&th[started], NULL, stream_main, &args[started]) != 0) break;
        r.running++;
    }
    pthread_mutex_unlock(&r.p.mu);
    if (n_streams && !started) stream_loop(&r, &slots[0]); /* no thread at all: fetch here, in order */
    supervise(&r);
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_cond_destroy(&r.done);
    if (r.st == LLMR_DL_OK) {
        pthread_mutex_lock(&r.p.mu);
        report_locked(&r.p, 1);
        pthread_mutex_unlock(&r.p.mu);
    }
    pthread_mutex_destroy(&r.p.mu);
    free(r.todo); free(slots); free(th); free(args);
    if (r.st != LLMR_DL_OK) return llmr_errf_status(r.st, err, es, "%s", r.err);
    return LLMR_DL_OK;
}

static int on_hash(void *user, uint64_t done, uint64_t total) {
    (void)total;
    slot *sl = user;
    slot_update(sl, done, 0);
    return cancelled(sl->p->o);
}

llmr_dl_status llmr_dl_verify(const llmr_dl_opts *o, const llmr_manifest_file *f, char *err, size_t es) {
    if (!o || !o->model_dir || !f) return llmr_errf_status(LLMR_DL_EINVAL, err, es, "verify: missing argument");
    char path[4096], hex[LLMR_SHA256_HEX_LEN + 1], why[512];
    uint64_t size;
    snprintf(path, sizeof path, "%s/%s", o->model_dir, f->name);
    if (file_size(path, &size) != 0) return llmr_errf_status(LLMR_DL_EIO, err, es, "%s: %s", f->name, strerror(errno));
    if (size != f->size) {
        unlink(path);
        return llmr_errf_status(LLMR_DL_EVERIFY, err, es, "%s: size %llu on disk, manifest says %llu (deleted)", f->name,
                    (unsigned long long)size, (unsigned long long)f->size);
    }
    prog p = {.o = o, .total = f->size, .last_log = now_s(), .t0 = now_s()};
    slot sl = {.p = &p, .file = f};
    p.slots = &sl;
    p.n_slots = 1;
    pthread_mutex_init(&p.mu, NULL);
    int hashed = llmr_sha256_file(path, hex, on_hash, &sl, why, sizeof why);
    pthread_mutex_destroy(&p.mu);
    if (hashed != 0)
        return cancelled(o) ? llmr_errf_status(LLMR_DL_ECANCELLED, err, es, "%s: verification cancelled", f->name)
                            : llmr_errf_status(LLMR_DL_EIO, err, es, "%s: %s", f->name, why);
    if (strcmp(hex, f->sha256) != 0) {
        unlink(path);
        return llmr_errf_status(LLMR_DL_EVERIFY, err, es, "%s: sha256 %s on disk, manifest says %s (deleted)", f->name, hex, f->sha256);
    }
    return LLMR_DL_OK;
}
