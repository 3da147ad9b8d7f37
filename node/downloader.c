/* downloader.c — see downloader.h. The byte-level work (Range resume, retries, hashing while
 * writing, atomic rename) is common/http_client.c's; this module decides what to fetch, checks space,
 * refetches once on a mismatch, aggregates progress over a model's files and names the file at fault. */
#include "node/downloader.h"

#include <errno.h>
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

/* Progress over all files of one call. */
typedef struct prog {
    const llmr_dl_opts *o;
    const llmr_manifest_file *file;
    uint64_t base, total;     /* bytes of earlier files; bytes of all files */
    double last_log;
    int oversize;             /* the server sent more than the manifest's size */
    double t0;                /* start of this call, for the average rate */
    uint64_t fetched;         /* bytes received in this call before the current file */
    uint64_t file_start;      /* bytes the current file had when its transfer began */
} prog;

static void report(prog *p, uint64_t in_file, double rate, int force_log) {
    /* Between transfers the client reports no rate: use the average of this call instead. */
    if (rate <= 0) {
        double dt = now_s() - p->t0;
        uint64_t got = p->fetched + (in_file > p->file_start ? in_file - p->file_start : 0);
        rate = dt > 0.05 ? (double)got / dt : 0;
    }
    llmr_model_progress mp;
    memset(&mp, 0, sizeof mp);
    mp.bytes_done = p->base + in_file;
    mp.bytes_total = p->total;
    mp.bytes_per_second = rate;
    mp.eta_seconds = rate > 0 && p->total >= mp.bytes_done ? (double)(p->total - mp.bytes_done) / rate : -1;
    snprintf(mp.file, sizeof mp.file, "%s", p->file ? p->file->name : "");
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

static int on_progress(void *user, uint64_t bytes, uint64_t total, double rate) {
    (void)total;
    prog *p = user;
    if (bytes > p->file->size) { p->oversize = 1; return 1; } /* never let a server fill the disk */
    report(p, bytes, rate, 0);
    return 0;
}

#define LABEL(o) ((o)->label ? (o)->label : "download")

static int cancelled(const llmr_dl_opts *o) { return o->cancel && atomic_load(o->cancel); }

/* One file: download, and once more after a mismatch. */
static llmr_dl_status fetch_one(const llmr_dl_opts *o, prog *p, const char *dest, llmr_dl_report *rep, char *err,
                                size_t es) {
    const llmr_manifest_file *f = p->file;
    char why[1024], first[1024] = "";
    for (int attempt = 0; attempt < 2; attempt++) {
        p->oversize = 0;
        llmr_httpc_download_opts dopts = {.expected_size = (int64_t)f->size, .expected_sha256 = f->sha256,
                                          .progress = on_progress, .progress_user = p, .cancel = o->cancel};
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
        if (p->oversize) {
            char partial[4200];
            snprintf(partial, sizeof partial, "%s.partial", dest);
            unlink(partial);
            snprintf(why, sizeof why, "server sent more than the manifest's %llu bytes", (unsigned long long)f->size);
            st = LLMR_HTTPC_EVERIFY;
        } else if (st == LLMR_HTTPC_EABORTED || cancelled(o)) {
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

llmr_dl_status llmr_dl_fetch(const llmr_dl_opts *o, const llmr_manifest_file *files, size_t n, llmr_dl_report *rep_out,
                             char *err, size_t es) {
    llmr_dl_report rep_local, *rep = rep_out ? rep_out : &rep_local;
    memset(rep, 0, sizeof *rep);
    if (!o || !o->client || !o->model_dir || (n && !files)) return llmr_errf_status(LLMR_DL_EINVAL, err, es, "download: missing argument");
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
    prog p = {.o = o, .last_log = now_s(), .t0 = now_s()};
    for (size_t i = 0; i < n; i++) p.total += files[i].size;
    for (size_t i = 0; i < n; i++) {
        const llmr_manifest_file *f = &files[i];
        uint64_t have;
        if (cancelled(o)) return llmr_errf_status(LLMR_DL_ECANCELLED, err, es, "download cancelled");
        snprintf(path, sizeof path, "%s/%s", o->model_dir, f->name);
        p.file = f;
        if (file_size(path, &have) == 0) {
            rep->present++;
            p.base += f->size;
            continue;
        }
        if (mkdirs_for(path) != 0) return llmr_errf_status(LLMR_DL_EIO, err, es, "cannot create the folder of %s: %s", path, strerror(errno));
        char partial[4200];
        snprintf(partial, sizeof partial, "%s.partial", path);
        p.file_start = file_size(partial, &have) == 0 ? have : 0;
        uint64_t before = rep->bytes_fetched;
        char msg[1536];
        llmr_dl_status st = fetch_one(o, &p, path, rep, msg, sizeof msg);
        if (st != LLMR_DL_OK && st != LLMR_DL_ECANCELLED && f->optional) {
            log_warn("%s: optional %s %s skipped: %s", LABEL(o), f->backend ? "artifact" : "file", f->name, msg);
            warn_add(rep, "optional %s %s skipped: %s", f->backend ? "artifact" : "file", f->name, msg);
            rep->optional_failed++;
        } else if (st != LLMR_DL_OK) {
            return llmr_errf_status(st, err, es, "%s", msg);
        }
        p.base += f->size;
        p.fetched += rep->bytes_fetched - before;
        p.file_start = 0;
        report(&p, 0, 0, 0);
    }
    report(&p, 0, 0, 1);
    return LLMR_DL_OK;
}

static int on_hash(void *user, uint64_t done, uint64_t total) {
    (void)total;
    prog *p = user;
    report(p, done, 0, 0);
    return cancelled(p->o);
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
    prog p = {.o = o, .file = f, .total = f->size, .last_log = now_s()};
    if (llmr_sha256_file(path, hex, on_hash, &p, why, sizeof why) != 0)
        return cancelled(o) ? llmr_errf_status(LLMR_DL_ECANCELLED, err, es, "%s: verification cancelled", f->name)
                            : llmr_errf_status(LLMR_DL_EIO, err, es, "%s: %s", f->name, why);
    if (strcmp(hex, f->sha256) != 0) {
        unlink(path);
        return llmr_errf_status(LLMR_DL_EVERIFY, err, es, "%s: sha256 %s on disk, manifest says %s (deleted)", f->name, hex, f->sha256);
    }
    return LLMR_DL_OK;
}
