/* llmr-hub — a Hugging Face hub compatible mirror of a local folder of model snapshots.
 *
 *   llmr-hub --root DIR --listen 127.0.0.1:PORT
 *
 * serves DIR/{org}/{name}/... with the hub endpoints that huggingface_hub and llmr's hub client use:
 *   GET /api/models/{org}/{name}[/revision/{rev}]   model info {id, sha, siblings:[{rfilename}], ...}
 *                                                  (?blobs=true adds size, blobId and lfs to siblings)
 *   GET /api/models/{org}/{name}/tree/{rev}[/{dir}] [?recursive=true] [&cursor=N]
 *                                                  [{type, path, size, oid, lfs?:{oid, size, pointerSize}}]
 *                                                  paginated by --page-size with a Link rel="next" header
 *   GET|HEAD /{org}/{name}/resolve/{rev}/{path}    the bytes, straight from disk (no redirect), with
 *                                                  Range (206/416), ETag/If-None-Match (304),
 *                                                  X-Repo-Commit, and for LFS files X-Linked-Etag and
 *                                                  X-Linked-Size
 *   GET /api/models                                [{id, modelId}] of every repository
 * Errors use the hub's shape: {"error": "..."} with X-Error-Code (RepoNotFound, RevisionNotFound,
 * EntryNotFound) and X-Error-Message headers; unknown repo/revision/file -> 404, an unsafe path or
 * repo id (traversal, NUL, backslash, empty segment) -> 400. See docs/hub.md. */
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/event_loop.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "common/hub_client.h"
#include "common/log.h"
#include "common/options.h"
#include "common/path_safety.h"
#include "tools/hub/faults.h"
#include "tools/hub/store.h"

typedef struct hub_app {
    hub_store *store;
    hub_faults faults;
    int page_size;
    llmr_http_server *srv;
} hub_app;

/* ---- replies ------------------------------------------------------------------------------- */

/* The hub's error shape: {"error": msg} plus X-Error-Code / X-Error-Message (for HEAD the server
 * layer sends the headers only). */
static void hub_error(llmr_http_request *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void hub_error(llmr_http_request *req, int status, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?'; /* header-safe */
    if (code) llmr_http_add_header(req, "X-Error-Code", code);
    llmr_http_add_header(req, "X-Error-Message", msg);
    log_debug("%s %s -> %d %s", llmr_http_method(req), llmr_http_path(req), status, msg);
    json_t *o = json_pack("{s:s}", "error", msg);
    llmr_http_reply_json(req, status, o);
}

static void iso_time(int64_t ns, char *out, size_t size) {
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%03dZ", base, (int)((ns / 1000000) % 1000));
}

/* ---- request parsing ----------------------------------------------------------------------- */

/* Splits "org/name/rest..." into repo "org/name" and rest. Validates the repo id (400 on failure,
 * replied here). Returns 0, or -1 when a reply was sent. */
static int take_repo(llmr_http_request *req, const char *s, char repo[256], const char **rest) {
    const char *a = strchr(s, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    size_t n = b ? (size_t)(b - s) : strlen(s);
    char why[256];
    if (!a || n >= 256) {
        hub_error(req, 404, "RepoNotFound", "Repository not found");
        return -1;
    }
    memcpy(repo, s, n);
    repo[n] = 0;
    if (!llmr_path_is_safe(repo, why, sizeof why) || !llmr_hub_repo_id_valid(repo, why, sizeof why)) {
        hub_error(req, 400, NULL, "Invalid repo id: %s", why);
        return -1;
    }
    *rest = b ? b + 1 : "";
    return 0;
}

/* Scans repo and checks rev ("main" or the commit sha). Replies 404/500 itself and returns -1. */
static int open_revision(hub_app *app, llmr_http_request *req, const char *repo, const char *rev, hub_repo *r) {
    char err[1024];
    int rc = hub_store_scan(app->store, repo, 0, r, err, sizeof err);
    if (rc == -1) { hub_error(req, 404, "RepoNotFound", "Repository not found: %s", repo); return -1; }
    if (rc != 0) { hub_error(req, 500, NULL, "%s", err); return -1; }
    if (strcmp(rev, "main") != 0 && strcasecmp(rev, r->commit) != 0) {
        hub_error(req, 404, "RevisionNotFound", "Invalid rev id: %s", rev);
        hub_repo_free(r);
        return -1;
    }
    return 0;
}

static int query_true(llmr_http_request *req, const char *key) {
    const char *v = llmr_http_query(req, key);
    return v && (!strcasecmp(v, "true") || !strcmp(v, "1"));
}

/* ---- /api/models ----------------------------------------------------------------------------- */

static void model_info(hub_app *app, llmr_http_request *req, const char *repo, const char *rev) {
    hub_repo r;
    if (open_revision(app, req, repo, rev, &r) != 0) return;
    int blobs = query_true(req, "blobs");
    json_t *siblings = json_array();
    uint64_t used = 0;
    char err[1024];
    for (size_t i = 0; i < r.n; i++) {
        hub_entry *e = &r.entries[i];
        if (e->is_dir || hub_faults_match(&app->faults, FAULT_HIDE, repo, e->path, 1)) continue;
        used += e->size;
        json_t *s = json_pack("{s:s}", "rfilename", e->path);
        if (blobs) {
            if (hub_store_hash(app->store, repo, e, err, sizeof err) != 0) {
                json_decref(s);
                json_decref(siblings);
                hub_repo_free(&r);
                hub_error(req, 500, NULL, "%s", err);
                return;
            }
            json_object_set_new(s, "blobId", json_string(e->oid));
            json_object_set_new(s, "size", json_integer((json_int_t)e->size));
            if (e->is_lfs)
                json_object_set_new(s, "lfs", json_pack("{s:s, s:I, s:I}", "sha256", e->sha256, "size",
                                                        (json_int_t)e->size, "pointerSize", (json_int_t)e->pointer_size));
        }
        json_array_append_new(siblings, s);
    }
    char when[40], oid24[25];
    iso_time(r.last_modified_ns, when, sizeof when);
    snprintf(oid24, sizeof oid24, "%.24s", r.commit);
    const char *slash = strchr(repo, '/');
    char author[128];
    snprintf(author, sizeof author, "%.*s", (int)(slash - repo), repo);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:i, s:i, s:[], s:o, s:[], s:I}",
                          "_id", oid24, "id", repo, "modelId", repo, "author", author, "sha", r.commit,
                          "lastModified", when, "createdAt", when, "private", 0, "disabled", 0, "gated", 0,
                          "downloads", 0, "likes", 0, "tags", "siblings", siblings, "spaces", "usedStorage",
                          (json_int_t)used);
    hub_repo_free(&r);
    llmr_http_reply_json(req, 200, o);
}

static void tree(hub_app *app, llmr_http_request *req, const char *repo, const char *rev, const char *dir) {
    char why[256], err[1024];
    if (*dir && !llmr_path_is_safe(dir, why, sizeof why)) {
        hub_error(req, 400, NULL, "Invalid path '%s': %s", dir, why);
        return;
    }
    hub_repo r;
    if (open_revision(app, req, repo, rev, &r) != 0) return;
    size_t dl = strlen(dir);
    if (dl) { /* the folder must exist */
        int found = 0;
        for (size_t i = 0; i < r.n && !found; i++) found = r.entries[i].is_dir && !strcmp(r.entries[i].path, dir);
        if (!found) {
            hub_repo_free(&r);
            hub_error(req, 404, "EntryNotFound", "%s does not exist on \"%s\"", dir, rev);
            return;
        }
    }
    int recursive = query_true(req, "recursive");
    const char *cur = llmr_http_query(req, "cursor");
    long start = cur ? strtol(cur, NULL, 10) : 0;
    if (start < 0) start = 0;
    json_t *arr = json_array();
    long idx = 0, emitted = 0;
    int more = 0;
    for (size_t i = 0; i < r.n; i++) {
        hub_entry *e = &r.entries[i];
        if (dl && (strncmp(e->path, dir, dl) != 0 || e->path[dl] != '/')) continue;
        const char *sub = e->path + (dl ? dl + 1 : 0);
        if (!recursive && strchr(sub, '/')) continue;
        if (!e->is_dir && hub_faults_match(&app->faults, FAULT_HIDE, repo, e->path, 1)) continue;
        if (idx++ < start) continue;
        if (emitted == app->page_size) { more = 1; break; }
        if (!e->is_dir && hub_store_hash(app->store, repo, e, err, sizeof err) != 0) {
            json_decref(arr);
            hub_repo_free(&r);
            hub_error(req, 500, NULL, "%s", err);
            return;
        }
        json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "type", e->is_dir ? "directory" : "file", "oid", e->oid, "size",
                              (json_int_t)e->size, "path", e->path);
        if (e->is_lfs)
            json_object_set_new(o, "lfs", json_pack("{s:s, s:I, s:I}", "oid", e->sha256, "size", (json_int_t)e->size,
                                                    "pointerSize", (json_int_t)e->pointer_size));
        json_array_append_new(arr, o);
        emitted++;
    }
    if (more) { /* the hub paginates with an absolute Link: rel="next" */
        const char *host = llmr_http_header(req, "Host");
        char *erev = llmr_url_encode(rev, 0), *edir = llmr_url_encode(dir, 1);
        char link[4096];
        snprintf(link, sizeof link, "<http://%s/api/models/%s/tree/%s%s%s?%scursor=%ld>; rel=\"next\"",
                 host ? host : "127.0.0.1", repo, erev ? erev : "", dl ? "/" : "", edir ? edir : "",
                 recursive ? "recursive=true&" : "", start + emitted);
        free(erev);
        free(edir);
        llmr_http_add_header(req, "Link", link);
    }
    hub_repo_free(&r);
    llmr_http_reply_json(req, 200, arr);
}

static void list_models(hub_app *app, llmr_http_request *req) {
    char **ids;
    size_t n;
    if (hub_store_list_repos(app->store, &ids, &n) != 0) {
        hub_error(req, 500, NULL, "cannot read %s: %s", hub_store_root(app->store), strerror(errno));
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, json_pack("{s:s, s:s}", "id", ids[i], "modelId", ids[i]));
        free(ids[i]);
    }
    free(ids);
    llmr_http_reply_json(req, 200, arr);
}

static void on_api(llmr_http_request *req, void *user) {
    hub_app *app = user;
    const char *path = llmr_http_path(req);
    if (!strcmp(path, "/api/models") || !strcmp(path, "/api/models/")) { list_models(app, req); return; }
    char repo[256];
    const char *rest;
    if (take_repo(req, llmr_http_path_rest(req), repo, &rest) != 0) return;
    if (!*rest) { model_info(app, req, repo, "main"); return; }
    const char *slash = strchr(rest, '/');
    size_t kl = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *after = slash ? slash + 1 : "";
    char rev[256];
    const char *rs = strchr(after, '/');
    size_t rl = rs ? (size_t)(rs - after) : strlen(after);
    if (rl == 0 || rl >= sizeof rev) { hub_error(req, 404, NULL, "Not found: %s", path); return; }
    memcpy(rev, after, rl);
    rev[rl] = 0;
    if (kl == 8 && !strncmp(rest, "revision", 8) && !rs) model_info(app, req, repo, rev);
    else if (kl == 4 && !strncmp(rest, "tree", 4)) tree(app, req, repo, rev, rs ? rs + 1 : "");
    else hub_error(req, 404, NULL, "Not found: %s", path);
}

/* ---- resolve ------------------------------------------------------------------------------- */

/* Parses a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range against size.
 * Returns 1 with [*from, *to] inclusive, 0 to ignore the header, -1 if unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *from, uint64_t *to) {
    if (!h || strncasecmp(h, "bytes=", 6) != 0 || strchr(h, ',')) return 0;
    const char *p = h + 6;
    char *end;
    if (*p == '-') {
        unsigned long long n = strtoull(p + 1, &end, 10);
        if (end == p + 1 || *end) return 0;
        if (n == 0 || size == 0) return -1;
        *from = n >= size ? 0 : size - n;
        *to = size - 1;
        return 1;
    }
    unsigned long long a = strtoull(p, &end, 10);
    if (end == p || *end != '-') return 0;
    p = end + 1;
    unsigned long long b = size ? size - 1 : 0;
    if (*p) {
        b = strtoull(p, &end, 10);
        if (end == p || *end || b < a) return 0;
        if (size && b >= size) b = size - 1;
    }
    if (a >= size) return -1;
    *from = a;
    *to = b;
    return 1;
}

static const char *content_type(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".json")) return "application/json";
    if (dot && (!strcmp(dot, ".txt") || !strcmp(dot, ".md") || !strcmp(dot, ".jinja"))) return "text/plain; charset=utf-8";
    return "application/octet-stream";
}

/* Fills buf with [from, to] of fd, flipping the byte at flip (if inside), streaming from disk. */
static int add_corrupted(struct evbuffer *buf, int fd, uint64_t from, uint64_t to, uint64_t flip) {
    if (flip < from || flip > to) flip = from;
    unsigned char b;
    if (pread(fd, &b, 1, (off_t)flip) != 1) return -1;
    b ^= 0xff;
    if (flip > from) {
        int d = dup(fd);
        if (d < 0 || evbuffer_add_file(buf, d, (ev_off_t)from, (ev_off_t)(flip - from)) != 0) {
            if (d >= 0) close(d);
            return -1;
        }
    }
    if (evbuffer_add(buf, &b, 1) != 0) return -1;
    if (flip < to) {
        int d = dup(fd);
        if (d < 0 || evbuffer_add_file(buf, d, (ev_off_t)(flip + 1), (ev_off_t)(to - flip)) != 0) {
            if (d >= 0) close(d);
            return -1;
        }
    }
    return 0;
}

static void resolve(hub_app *app, llmr_http_request *req, const char *after_slash) {
    char repo[256], rev[256], why[256], err[1024];
    const char *rest;
    /* traversal and hostile names are refused before anything touches the disk */
    const char *res = strstr(after_slash, "/resolve/");
    if (res) {
        const char *fp = strchr(res + 9, '/');
        if (fp && !llmr_path_is_safe(fp + 1, why, sizeof why)) {
            hub_error(req, 400, NULL, "Invalid path '%s': %s", fp + 1, why);
            return;
        }
    }
    if (take_repo(req, after_slash, repo, &rest) != 0) return;
    if (strncmp(rest, "resolve/", 8) != 0) { hub_error(req, 404, NULL, "Not found: %s", llmr_http_path(req)); return; }
    rest += 8;
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest || (size_t)(slash - rest) >= sizeof rev || !slash[1]) {
        hub_error(req, 404, "EntryNotFound", "Entry not found");
        return;
    }
    memcpy(rev, rest, (size_t)(slash - rest));
    rev[slash - rest] = 0;
    const char *path = slash + 1;
    if (!llmr_path_is_safe(path, why, sizeof why)) { hub_error(req, 400, NULL, "Invalid path '%s': %s", path, why); return; }
    hub_repo r;
    if (open_revision(app, req, repo, rev, &r) != 0) return;
    const hub_entry *found = hub_repo_find(&r, path);
    if (!found) {
        llmr_http_add_header(req, "X-Repo-Commit", r.commit); /* huggingface_hub caches the miss by commit */
        hub_repo_free(&r);
        hub_error(req, 404, "EntryNotFound", "%s does not exist on \"%s\"", path, rev);
        return;
    }
    hub_entry e = *found;
    if (hub_store_hash(app->store, repo, &e, err, sizeof err) != 0) {
        hub_repo_free(&r);
        hub_error(req, 500, NULL, "%s", err);
        return;
    }
    char commit[41];
    memcpy(commit, r.commit, sizeof commit);
    char abspath[4096];
    hub_store_file_path(app->store, repo, path, abspath, sizeof abspath);
    hub_repo_free(&r);

    const hub_fault *ft = hub_faults_match(&app->faults, FAULT_STATUS, repo, path, 0);
    if (ft) { hub_error(req, ft->status, NULL, "injected fault: status %d for %s/%s", ft->status, repo, path); return; }

    char etag[80];
    snprintf(etag, sizeof etag, "\"%s\"", e.is_lfs ? e.sha256 : e.oid);
    llmr_http_add_header(req, "ETag", etag);
    llmr_http_add_header(req, "X-Repo-Commit", commit);
    llmr_http_add_header(req, "Accept-Ranges", "bytes");
    if (e.is_lfs) {
        char sz[32];
        snprintf(sz, sizeof sz, "%llu", (unsigned long long)e.size);
        llmr_http_add_header(req, "X-Linked-Etag", etag);
        llmr_http_add_header(req, "X-Linked-Size", sz);
    }
    const char *inm = llmr_http_header(req, "If-None-Match");
    if (inm && (strstr(inm, e.is_lfs ? e.sha256 : e.oid) || !strcmp(inm, "*"))) {
        llmr_http_reply_text(req, 304, NULL, NULL, 0);
        return;
    }
    int fd = open(abspath, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { hub_error(req, 500, NULL, "%s/%s: %s", repo, path, strerror(errno)); return; }
    int is_get = strcmp(llmr_http_method(req), "GET") == 0;
    uint64_t from = 0, to = e.size ? e.size - 1 : 0;
    int status = 200;
    const char *rh = llmr_http_header(req, "Range");
    if (rh && !hub_faults_match(&app->faults, FAULT_IGNORE_RANGE, repo, path, !is_get)) {
        int pr = parse_range(rh, e.size, &from, &to);
        if (pr < 0) {
            close(fd);
            char cr[64];
            snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)e.size);
            llmr_http_add_header(req, "Content-Range", cr);
            hub_error(req, 416, NULL, "Range %s not satisfiable for %llu bytes", rh, (unsigned long long)e.size);
            return;
        }
        if (pr > 0) {
            status = 206;
            char cr[96];
            snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)from, (unsigned long long)to,
                     (unsigned long long)e.size);
            llmr_http_add_header(req, "Content-Range", cr);
        } else {
            from = 0;
            to = e.size ? e.size - 1 : 0;
        }
    }
    uint64_t len = e.size ? to - from + 1 : 0;
    const char *ctype = content_type(path);
    const hub_fault *corrupt = is_get && len ? hub_faults_match(&app->faults, FAULT_CORRUPT, repo, path, 0) : NULL;
    const hub_fault *drop = is_get && len ? hub_faults_match(&app->faults, FAULT_DROP, repo, path, 0) : NULL;
    if (!corrupt && !drop) {
        llmr_http_reply_file(req, status, ctype, fd, (long long)from, (long long)len);
        return;
    }
    /* faulty bodies: still streamed from disk, never read whole */
    struct evbuffer *buf = evbuffer_new();
    char cl[32];
    snprintf(cl, sizeof cl, "%llu", (unsigned long long)len);
    llmr_http_add_header(req, "Content-Length", cl);
    uint64_t send_to = drop ? from + len / 2 - (len / 2 ? 1 : 0) : to;
    int ok = buf != NULL;
    if (ok) evbuffer_set_flags(buf, EVBUFFER_FLAG_DRAINS_TO_FD);
    if (ok && drop) {
        llmr_http_add_header(req, "Connection", "close"); /* evhttp closes after the short body */
        log_info("fault: dropping %s/%s after %llu of %llu bytes", repo, path, (unsigned long long)(len / 2),
                 (unsigned long long)len);
    }
    if (ok && (!drop || len / 2 > 0)) {
        if (corrupt) {
            log_info("fault: corrupting %s/%s", repo, path);
            ok = add_corrupted(buf, fd, from, send_to, e.size / 2) == 0;
        } else {
            int d = dup(fd);
            ok = d >= 0 && evbuffer_add_file(buf, d, (ev_off_t)from, (ev_off_t)(send_to - from + 1)) == 0;
            if (!ok && d >= 0) close(d);
        }
    }
    close(fd);
    if (!ok) {
        if (buf) evbuffer_free(buf);
        hub_error(req, 500, NULL, "cannot send %s/%s", repo, path);
        return;
    }
    llmr_http_reply_buffer(req, status, ctype, buf);
}

static void on_root(llmr_http_request *req, void *user) {
    hub_app *app = user;
    const char *p = llmr_http_path(req);
    if (!strcmp(p, "/") || !strcmp(p, "/health")) {
        llmr_http_reply_json(req, 200, json_pack("{s:s, s:s}", "status", "ok", "root", hub_store_root(app->store)));
        return;
    }
    resolve(app, req, p + 1);
}

/* ---- startup ------------------------------------------------------------------------------- */

static void prehash(hub_app *app) {
    char **ids;
    size_t n;
    if (hub_store_list_repos(app->store, &ids, &n) != 0) return;
    for (size_t i = 0; i < n; i++) {
        char err[1024], why[256];
        hub_repo r;
        if (llmr_hub_repo_id_valid(ids[i], why, sizeof why) && hub_store_scan(app->store, ids[i], 1, &r, err, sizeof err) == 0) {
            log_info("repo %s: %zu entries, commit %s", ids[i], r.n, r.commit);
            hub_repo_free(&r);
        } else if (!llmr_hub_repo_id_valid(ids[i], why, sizeof why)) {
            log_warn("skipping %s: %s", ids[i], why);
        } else {
            log_warn("repo %s: %s", ids[i], err);
        }
        free(ids[i]);
    }
    free(ids);
}

static void on_term(void *arg) {
    hub_app *app = arg;
    llmr_http_server_shutdown(app->srv, 5000);
}

/* --fault may be given several times: gather every value (the options table keeps only the last). */
static int collect_faults(hub_faults *f, int argc, char **argv, char *err, size_t es) {
    if (hub_faults_parse(f, getenv("LLMR_HUB_FAULTS"), err, es) != 0) return -1;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--fault") && i + 1 < argc) v = argv[++i];
        else if (!strncmp(argv[i], "--fault=", 8)) v = argv[i] + 8;
        if (v && hub_faults_parse(f, v, err, es) != 0) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *root = NULL, *listen = NULL, *cache = NULL, *fault = NULL, *log_level = NULL, *port_file = NULL;
    int page_size = 0, no_prehash = 0, json_logs = 0;
    char default_cache[4096];
    const char *c = getenv("LLMR_CACHE");
    snprintf(default_cache, sizeof default_cache, "%s%s/hub-cache", c && *c ? c : getenv("HOME") ? getenv("HOME") : "/tmp",
             c && *c ? "" : "/.cache/llmr");
    llmr_option opts[] = {
        {"root", "LLMR_HUB_ROOT", LLMR_OPT_STRING, NULL, "folder served: ROOT/{org}/{name}/... (required)", &root},
        {"listen", "LLMR_HUB_LISTEN", LLMR_OPT_STRING, "127.0.0.1:8090", "address to listen on (port 0: ephemeral)", &listen},
        {"cache", "LLMR_HUB_CACHE", LLMR_OPT_STRING, default_cache, "sidecar folder for cached sha256 (never inside --root)", &cache},
        {"page-size", "LLMR_HUB_PAGE_SIZE", LLMR_OPT_INT, "1000", "tree entries per page (Link rel=\"next\" for more)", &page_size},
        {"no-prehash", "LLMR_HUB_NO_PREHASH", LLMR_OPT_BOOL, "0", "do not hash every file at startup (first requests hash instead)", &no_prehash},
        {"fault", "LLMR_HUB_FAULTS", LLMR_OPT_STRING, NULL, "inject faults for tests, KIND:GLOB[@N][;...], repeatable (docs/hub.md)", &fault},
        {"port-file", NULL, LLMR_OPT_STRING, NULL, "write the bound port to this file once listening", &port_file},
        {"log-level", "LLMR_LOG_LEVEL", LLMR_OPT_STRING, "info", "debug, info, warn or error", &log_level},
        {"json-logs", "LLMR_JSON_LOGS", LLMR_OPT_BOOL, "0", "log JSON lines", &json_logs},
    };
    int pr = llmr_options_parse("llmr-hub",
                                "A Hugging Face hub compatible mirror: serves ROOT/{org}/{name}/... with the hub's\n"
                                "/api/models/{repo}/tree|revision and /{repo}/resolve/{rev}/{path} endpoints.",
                                opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (pr != 0) return pr > 0 ? 0 : 2;
    int lvl = llmr_log_level_parse(log_level);
    llmr_log_init("hub", lvl < 0 ? LLMR_LOG_INFO : lvl, json_logs);
    if (!root) { fprintf(stderr, "error: --root DIR is required (see --help)\n"); return 2; }
    if (page_size < 1) { fprintf(stderr, "error: --page-size must be at least 1\n"); return 2; }
    static hub_app app; /* static: its fault table is large */
    char err[1024];
    (void)fault;
    if (collect_faults(&app.faults, argc, argv, err, sizeof err) != 0) { fprintf(stderr, "error: %s\n", err); return 2; }
    app.page_size = page_size;
    app.store = hub_store_create(root, cache && *cache ? cache : NULL, err, sizeof err);
    if (!app.store) { fprintf(stderr, "error: %s\n", err); return 1; }
    {
        char rc_[4096];
        const char *r = hub_store_root(app.store);
        if (cache && realpath(cache, rc_) && !strncmp(rc_, r, strlen(r)) && (rc_[strlen(r)] == '/' || !rc_[strlen(r)])) {
            fprintf(stderr, "error: --cache %s is inside --root %s; it would be served\n", cache, r);
            hub_store_destroy(app.store);
            return 2;
        }
    }
    static const char *kinds[] = {"corrupt", "drop", "hide", "ignore-range", "status"};
    for (int i = 0; i < app.faults.n; i++) {
        const hub_fault *f = &app.faults.v[i];
        log_warn("fault injection active: %s%s%.0d %s (%s)", kinds[f->kind], f->kind == FAULT_STATUS ? "=" : "",
                 f->kind == FAULT_STATUS ? f->status : 0, f->glob, f->remaining < 0 ? "always" : "limited count");
    }
    if (!no_prehash) prehash(&app);
    llmr_loop *loop = llmr_loop_create();
    llmr_http_server_opts so = {.listen = listen, .max_body = 64 << 10, .timeout_s = 300};
    app.srv = loop ? llmr_http_server_create(loop, &so, err, sizeof err) : NULL;
    if (!app.srv) {
        fprintf(stderr, "error: %s\n", loop ? err : "cannot create the event loop");
        llmr_loop_destroy(loop);
        hub_store_destroy(app.store);
        return 1;
    }
    llmr_http_server_route(app.srv, "GET", "/api/models", on_api, &app);
    llmr_http_server_route(app.srv, "GET", "/api/models/*", on_api, &app);
    llmr_http_server_route(app.srv, "GET", "/*", on_root, &app);
    llmr_loop_handle_signals(loop, on_term, NULL, &app);
    int port = llmr_http_server_port(app.srv);
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
            fprintf(stderr, "error: --port-file %s: %s\n", port_file, strerror(errno));
            return 1;
        }
    }
    log_info("serving %s on port %d (listen %s), hash cache %s", hub_store_root(app.store), port, listen,
             cache ? cache : "(none)");
    int rc = llmr_loop_run(loop);
    llmr_http_server_destroy(app.srv);
    llmr_loop_destroy(loop);
    hub_store_destroy(app.store);
    log_info("stopped");
    return rc == 0 ? 0 : 1;
}
