/* store.c — see store.h. */
#include "tools/hub/store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sha256.h"

#define MAX_DEPTH 32
#define MAX_FILES 1000000
#define N_BUCKETS 4096

typedef struct cache_item {
    char *abspath;
    uint64_t size;
    int64_t mtime_ns;
    uint64_t ino;
    char sha256[65], sha1[41];
    struct cache_item *next;
} cache_item;

struct hub_store {
    char *root;
    char *cache_dir;
    cache_item *buckets[N_BUCKETS];
};

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int mkdir_p(const char *dir) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

hub_store *hub_store_create(const char *root, const char *cache_dir, char *err, size_t es) {
    char real[PATH_MAX];
    struct stat sb;
    if (!root || !realpath(root, real) || stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, es, "--root %s: %s", root ? root : "(none)", errno ? strerror(errno) : "not a directory");
        return NULL;
    }
    if (cache_dir && mkdir_p(cache_dir) != 0) {
        snprintf(err, es, "--cache %s: cannot create: %s", cache_dir, strerror(errno));
        return NULL;
    }
    hub_store *s = calloc(1, sizeof *s);
    if (!s || !(s->root = strdup(real)) || (cache_dir && !(s->cache_dir = strdup(cache_dir)))) {
        hub_store_destroy(s);
        snprintf(err, es, "out of memory");
        return NULL;
    }
    return s;
}

void hub_store_destroy(hub_store *s) {
    if (!s) return;
    for (int i = 0; i < N_BUCKETS; i++) {
        for (cache_item *c = s->buckets[i], *n; c; c = n) {
            n = c->next;
            free(c->abspath);
            free(c);
        }
    }
    free(s->root);
    free(s->cache_dir);
    free(s);
}

const char *hub_store_root(const hub_store *s) { return s->root; }

int hub_is_lfs(const char *path, uint64_t size) {
    if (size >= HUB_LFS_THRESHOLD) return 1;
    const char *dot = strrchr(path, '.');
    return dot && (strcmp(dot, ".safetensors") == 0 || strcmp(dot, ".bin") == 0 || strcmp(dot, ".gguf") == 0);
}

int hub_store_file_path(const hub_store *s, const char *repo, const char *path, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s/%s%s%s", s->root, repo, path && *path ? "/" : "", path ? path : "");
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* ---- hashing ------------------------------------------------------------------------------- */

static void hex(const unsigned char *md, unsigned n, char *out) {
    for (unsigned i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* git's blob id: sha1("blob <size>\0" + content) */
static void git_blob_sha1_buf(const char *data, size_t len, char out[41]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    char head[64];
    int hl = snprintf(head, sizeof head, "blob %zu", len);
    unsigned char md[20];
    unsigned n = 0;
    EVP_DigestInit_ex(c, EVP_sha1(), NULL);
    EVP_DigestUpdate(c, head, (size_t)hl + 1);
    EVP_DigestUpdate(c, data, len);
    EVP_DigestFinal_ex(c, md, &n);
    EVP_MD_CTX_free(c);
    hex(md, 20, out);
}

/* sha256 and (want_sha1) git blob sha1 of a file in one read; without want_sha1, sha1 is all zeros
 * (LFS files: their git oid comes from the pointer text, so the content's sha1 is not needed). */
static int hash_file(const char *abspath, uint64_t size, int want_sha1, char sha256[65], char sha1[41], char *err,
                     size_t es) {
    int fd = open(abspath, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { snprintf(err, es, "%s: %s", abspath, strerror(errno)); return -1; }
    EVP_MD_CTX *a = EVP_MD_CTX_new(), *b = EVP_MD_CTX_new();
    size_t cap = 4u << 20;
    char *buf = malloc(cap);
    int rc = -1;
    if (!a || !b || !buf) { snprintf(err, es, "%s: out of memory", abspath); goto out; }
    char head[64];
    int hl = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
    EVP_DigestInit_ex(a, EVP_sha256(), NULL);
    EVP_DigestInit_ex(b, EVP_sha1(), NULL);
    EVP_DigestUpdate(b, head, (size_t)hl + 1);
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t done = 0;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { snprintf(err, es, "%s: read: %s", abspath, strerror(errno)); goto out; }
        if (r == 0) break;
        EVP_DigestUpdate(a, buf, (size_t)r);
        if (want_sha1) EVP_DigestUpdate(b, buf, (size_t)r);
        done += (uint64_t)r;
    }
    if (done != size) { snprintf(err, es, "%s: changed while hashing", abspath); goto out; }
    unsigned char md[32];
    unsigned n = 0;
    EVP_DigestFinal_ex(a, md, &n);
    hex(md, 32, sha256);
    EVP_DigestFinal_ex(b, md, &n);
    if (want_sha1) hex(md, 20, sha1);
    else memset(sha1, '0', 40), sha1[40] = 0;
    rc = 0;
out:
    free(buf);
    EVP_MD_CTX_free(a);
    EVP_MD_CTX_free(b);
    close(fd);
    return rc;
}

static int is_hex_n(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return 0;
    return s[n] == 0 || isspace((unsigned char)s[n]);
}

static void sidecar_name(const hub_store *s, const char *abspath, char *out, size_t size) {
    char key[65];
    llmr_sha256_buf(abspath, strlen(abspath), key);
    snprintf(out, size, "%s/%s", s->cache_dir, key);
}

/* Looks in the sidecar for a record matching size/mtime/inode. */
static int sidecar_get(const hub_store *s, const char *abspath, const struct stat *sb, char sha256[65], char sha1[41]) {
    if (!s->cache_dir) return -1;
    char name[PATH_MAX + 80], line[512];
    sidecar_name(s, abspath, name, sizeof name);
    FILE *f = fopen(name, "r");
    if (!f) return -1;
    unsigned long long size, ino;
    long long mt;
    char a[80], b[80];
    int ok = fgets(line, sizeof line, f) && strcmp(line, "llmr-hub-cache v1\n") == 0 && fgets(line, sizeof line, f) &&
             sscanf(line, "%llu %lld %llu %79s %79s", &size, &mt, &ino, a, b) == 5 &&
             size == (unsigned long long)sb->st_size &&
             mt == (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec &&
             ino == (unsigned long long)sb->st_ino && strlen(a) == 64 && is_hex_n(a, 64) && strlen(b) == 40 &&
             is_hex_n(b, 40);
    fclose(f);
    if (!ok) return -1;
    memcpy(sha256, a, 65);
    memcpy(sha1, b, 41);
    return 0;
}

static void sidecar_put(const hub_store *s, const char *abspath, const struct stat *sb, const char *sha256,
                        const char *sha1) {
    if (!s->cache_dir) return;
    char name[PATH_MAX + 80], tmp[PATH_MAX + 100];
    sidecar_name(s, abspath, name, sizeof name);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", name, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { log_warn("hash cache %s: %s (continuing without it)", tmp, strerror(errno)); return; }
    fprintf(f, "llmr-hub-cache v1\n%llu %lld %llu %s %s\n# %s\n", (unsigned long long)sb->st_size,
            (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec, (unsigned long long)sb->st_ino, sha256,
            sha1, abspath);
    if (fclose(f) != 0 || rename(tmp, name) != 0) {
        log_warn("hash cache %s: %s", name, strerror(errno));
        unlink(tmp);
    }
}

int hub_store_hash(hub_store *s, const char *repo, hub_entry *e, char *err, size_t es) {
    char abspath[PATH_MAX];
    if (e->is_dir) return 0;
    if (hub_store_file_path(s, repo, e->path, abspath, sizeof abspath) != 0) {
        snprintf(err, es, "%s/%s: path too long", repo, e->path);
        return -1;
    }
    struct stat sb;
    if (stat(abspath, &sb) != 0) { snprintf(err, es, "%s: %s", abspath, strerror(errno)); return -1; }
    int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    uint32_t b = hash_str(abspath) % N_BUCKETS;
    cache_item *c;
    for (c = s->buckets[b]; c; c = c->next)
        if (strcmp(c->abspath, abspath) == 0) break;
    if (!c || c->size != (uint64_t)sb.st_size || c->mtime_ns != mt || c->ino != (uint64_t)sb.st_ino) {
        char sha256[65], sha1[41];
        if (sidecar_get(s, abspath, &sb, sha256, sha1) != 0) {
            if (sb.st_size >= (off_t)HUB_LFS_THRESHOLD) log_info("hashing %s/%s (%lld bytes)", repo, e->path, (long long)sb.st_size);
            int lfs = hub_is_lfs(e->path, (uint64_t)sb.st_size);
            if (hash_file(abspath, (uint64_t)sb.st_size, !lfs, sha256, sha1, err, es) != 0) return -1;
            sidecar_put(s, abspath, &sb, sha256, sha1);
        }
        if (!c) {
            c = calloc(1, sizeof *c);
            if (!c || !(c->abspath = strdup(abspath))) {
                free(c);
                snprintf(err, es, "out of memory");
                return -1;
            }
            c->next = s->buckets[b];
            s->buckets[b] = c;
        }
        c->size = (uint64_t)sb.st_size;
        c->mtime_ns = mt;
        c->ino = (uint64_t)sb.st_ino;
        memcpy(c->sha256, sha256, 65);
        memcpy(c->sha1, sha1, 41);
    }
    e->size = c->size;
    e->mtime_ns = c->mtime_ns;
    e->is_lfs = hub_is_lfs(e->path, e->size);
    memcpy(e->sha256, c->sha256, 65);
    if (e->is_lfs) { /* the git tree holds the pointer file, not the content */
        char ptr[256];
        int n = snprintf(ptr, sizeof ptr, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %llu\n",
                         c->sha256, (unsigned long long)c->size);
        e->pointer_size = (uint64_t)n;
        git_blob_sha1_buf(ptr, (size_t)n, e->oid);
    } else {
        memcpy(e->oid, c->sha1, 41);
    }
    return 0;
}

/* ---- scanning ------------------------------------------------------------------------------ */

typedef struct { hub_entry *v; size_t n, cap; } entry_vec;

static int push(entry_vec *ev, const char *rel, int is_dir, const struct stat *sb) {
    if (ev->n >= MAX_FILES) return -1;
    if (ev->n == ev->cap) {
        size_t nc = ev->cap ? ev->cap * 2 : 64;
        hub_entry *nv = realloc(ev->v, nc * sizeof *nv);
        if (!nv) return -1;
        ev->v = nv;
        ev->cap = nc;
    }
    hub_entry *e = &ev->v[ev->n];
    memset(e, 0, sizeof *e);
    e->path = strdup(rel);
    if (!e->path) return -1;
    e->is_dir = is_dir;
    e->size = is_dir ? 0 : (uint64_t)sb->st_size;
    e->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
    e->is_lfs = is_dir ? 0 : hub_is_lfs(rel, e->size);
    ev->n++;
    return 0;
}

static int walk(const char *abs, const char *rel, int depth, entry_vec *ev, char *err, size_t es) {
    if (depth > MAX_DEPTH) return 0; /* symlink loops end here */
    DIR *d = opendir(abs);
    if (!d) { snprintf(err, es, "%s: %s", abs, strerror(errno)); return -2; }
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || strcmp(nm, ".git") == 0) continue;
        if (depth == 0 && strcmp(nm, ".commit") == 0) continue;
        if (strchr(nm, '\\') || strchr(nm, '\n')) continue; /* names no hub path may carry */
        char a[PATH_MAX], r[PATH_MAX];
        if (snprintf(a, sizeof a, "%s/%s", abs, nm) >= (int)sizeof a ||
            snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", nm) >= (int)sizeof r)
            continue;
        struct stat sb;
        if (stat(a, &sb) != 0) continue; /* dangling symlink */
        if (S_ISDIR(sb.st_mode)) {
            if (push(ev, r, 1, &sb) != 0) { snprintf(err, es, "too many files (or out of memory) under %s", abs); rc = -2; break; }
            rc = walk(a, r, depth + 1, ev, err, es);
        } else if (S_ISREG(sb.st_mode)) {
            if (push(ev, r, 0, &sb) != 0) { snprintf(err, es, "too many files (or out of memory) under %s", abs); rc = -2; }
        }
    }
    closedir(d);
    return rc;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const hub_entry *)a)->path, ((const hub_entry *)b)->path);
}

void hub_repo_free(hub_repo *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) free(r->entries[i].path);
    free(r->entries);
    r->entries = NULL;
    r->n = 0;
}

/* The snapshot's commit: .commit if present, else sha1 of the file list with sizes and mtimes. */
static int repo_commit(const char *repo_abs, const hub_repo *r, char out[41], char *err, size_t es) {
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/.commit", repo_abs);
    FILE *f = fopen(p, "r");
    if (f) {
        char line[128] = "";
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
        for (int i = 0; i < 40; i++) line[i] = (char)tolower((unsigned char)line[i]);
        if (strlen(line) < 40 || !is_hex_n(line, 40)) {
            snprintf(err, es, "%s: must hold a 40-hex commit sha", p);
            return -2;
        }
        memcpy(out, line, 40);
        out[40] = 0;
        return 0;
    }
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c) { snprintf(err, es, "out of memory"); return -2; }
    EVP_DigestInit_ex(c, EVP_sha1(), NULL);
    for (size_t i = 0; i < r->n; i++) {
        const hub_entry *e = &r->entries[i];
        if (e->is_dir) continue;
        char line[64];
        EVP_DigestUpdate(c, e->path, strlen(e->path) + 1);
        int n = snprintf(line, sizeof line, "%llu", (unsigned long long)e->size);
        EVP_DigestUpdate(c, line, (size_t)n + 1);
        n = snprintf(line, sizeof line, "%lld\n", (long long)e->mtime_ns);
        EVP_DigestUpdate(c, line, (size_t)n);
    }
    unsigned char md[20];
    unsigned n = 0;
    EVP_DigestFinal_ex(c, md, &n);
    EVP_MD_CTX_free(c);
    hex(md, 20, out);
    return 0;
}

int hub_store_scan(hub_store *s, const char *repo, int with_hashes, hub_repo *out, char *err, size_t es) {
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", repo);
    char abs[PATH_MAX];
    struct stat sb;
    if (hub_store_file_path(s, repo, NULL, abs, sizeof abs) != 0 || stat(abs, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, es, "Repository %s not found", repo);
        return -1;
    }
    entry_vec ev = {0};
    int rc = walk(abs, "", 0, &ev, err, es);
    out->entries = ev.v;
    out->n = ev.n;
    if (rc != 0) { hub_repo_free(out); return rc; }
    qsort(out->entries, out->n, sizeof *out->entries, by_path);
    for (size_t i = 0; i < out->n; i++)
        if (out->entries[i].mtime_ns > out->last_modified_ns) out->last_modified_ns = out->entries[i].mtime_ns;
    if ((rc = repo_commit(abs, out, out->commit, err, es)) != 0) { hub_repo_free(out); return rc; }
    for (size_t i = 0; i < out->n; i++) {
        hub_entry *e = &out->entries[i];
        if (e->is_dir) { /* a stable id for a directory at this commit */
            char buf[PATH_MAX + 64];
            int n = snprintf(buf, sizeof buf, "tree %s %s", out->commit, e->path);
            git_blob_sha1_buf(buf, (size_t)n, e->oid);
        } else if (with_hashes && hub_store_hash(s, repo, e, err, es) != 0) {
            hub_repo_free(out);
            return -2;
        }
    }
    return 0;
}

const hub_entry *hub_repo_find(const hub_repo *r, const char *path) {
    hub_entry key = {.path = (char *)path};
    const hub_entry *e = bsearch(&key, r->entries, r->n, sizeof *r->entries, by_path);
    return e && !e->is_dir ? e : NULL;
}

int hub_store_list_repos(hub_store *s, char ***ids_out, size_t *n_out) {
    *ids_out = NULL;
    *n_out = 0;
    DIR *d = opendir(s->root);
    if (!d) return -1;
    char **ids = NULL;
    size_t n = 0;
    struct dirent *org;
    while ((org = readdir(d))) {
        if (org->d_name[0] == '.') continue;
        char a[PATH_MAX];
        snprintf(a, sizeof a, "%s/%s", s->root, org->d_name);
        DIR *d2 = opendir(a);
        if (!d2) continue;
        struct dirent *nm;
        while ((nm = readdir(d2))) {
            if (nm->d_name[0] == '.') continue;
            char b[PATH_MAX + 256];
            struct stat sb;
            snprintf(b, sizeof b, "%s/%s", a, nm->d_name);
            if (stat(b, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
            char **ni = realloc(ids, (n + 1) * sizeof *ni);
            if (!ni) break;
            ids = ni;
            size_t l = strlen(org->d_name) + strlen(nm->d_name) + 2;
            if (!(ids[n] = malloc(l))) break;
            snprintf(ids[n], l, "%s/%s", org->d_name, nm->d_name);
            n++;
        }
        closedir(d2);
    }
    closedir(d);
    *ids_out = ids;
    *n_out = n;
    return 0;
}
