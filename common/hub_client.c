/* hub_client.c — see hub_client.h. */
#include "common/hub_client.h"

#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <errno.h>
#include <openssl/evp.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path_safety.h"
#include "common/sha256.h"

#define MAX_PAGES 100000
#define MAX_LISTING_BYTES (256u << 20)

struct llmr_hub {
    char *endpoint;  /* no trailing '/' */
    char *origin;    /* scheme://host[:port] of the endpoint: pagination links must stay on it */
    llmr_httpc *http;
};

const char *llmr_hub_strerror(llmr_hub_status st) {
    switch (st) {
    case LLMR_HUB_OK: return "ok";
    case LLMR_HUB_EINVAL: return "invalid argument";
    case LLMR_HUB_ENOMEM: return "out of memory";
    case LLMR_HUB_ENOREPO: return "repository not found";
    case LLMR_HUB_ENOREV: return "revision not found";
    case LLMR_HUB_ENOFILE: return "file not found";
    case LLMR_HUB_EAUTH: return "unauthorized";
    case LLMR_HUB_EUNREACHABLE: return "hub unreachable";
    case LLMR_HUB_EHTTP: return "unexpected HTTP status";
    case LLMR_HUB_EPROTO: return "malformed hub answer";
    case LLMR_HUB_ETOOBIG: return "file too large";
    case LLMR_HUB_EIO: return "local file error";
    case LLMR_HUB_EVERIFY: return "downloaded file failed verification";
    case LLMR_HUB_EABORTED: return "aborted";
    }
    return "unknown error";
}

llmr_hub *llmr_hub_create(const llmr_hub_opts *opts, char *err, size_t es) {
    const char *ep = opts && opts->endpoint && *opts->endpoint ? opts->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep) ep = LLMR_HUB_DEFAULT_ENDPOINT;
    const char *tok = opts && opts->token ? opts->token : getenv("HF_TOKEN");
    const char *after = strstr(ep, "://");
    if (!after || after == ep || !after[3] || after[3] == '/' ||
        (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8) != 0)) {
        snprintf(err, es, "hub endpoint '%s' is not an http(s) URL", ep);
        return NULL;
    }
    llmr_hub *h = calloc(1, sizeof *h);
    if (!h) goto oom;
    h->endpoint = strdup(ep);
    if (!h->endpoint) goto oom;
    size_t n = strlen(h->endpoint);
    while (n > 0 && h->endpoint[n - 1] == '/') h->endpoint[--n] = 0;
    const char *host = strstr(h->endpoint, "://") + 3;
    size_t olen = (size_t)(host - h->endpoint) + strcspn(host, "/");
    h->origin = strndup(h->endpoint, olen);
    llmr_httpc_opts ho = {0};
    if (opts && opts->http) ho = *opts->http;
    ho.bearer_token = tok && *tok ? tok : NULL;
    h->http = llmr_httpc_create(&ho);
    if (!h->origin || !h->http) goto oom;
    return h;
oom:
    snprintf(err, es, "hub client: out of memory");
    llmr_hub_destroy(h);
    return NULL;
}

void llmr_hub_destroy(llmr_hub *h) {
    if (!h) return;
    llmr_httpc_destroy(h->http);
    free(h->endpoint);
    free(h->origin);
    free(h);
}

const char *llmr_hub_endpoint(const llmr_hub *h) { return h ? h->endpoint : NULL; }

static int name_part_ok(const char *s, size_t n) {
    if (n == 0 || n > 96 || s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || c == '.' || c == '_' || c == '-')) return 0;
        if (c == '.' && i + 1 < n && s[i + 1] == '.') return 0;
    }
    return 1;
}

int llmr_hub_repo_id_valid(const char *repo, char *err, size_t es) {
    const char *slash = repo ? strchr(repo, '/') : NULL;
    if (!repo || !slash || strchr(slash + 1, '/')) {
        snprintf(err, es, "repo id '%s' is not of the form org/name", repo ? repo : "(null)");
        return 0;
    }
    if (!name_part_ok(repo, (size_t)(slash - repo)) || !name_part_ok(slash + 1, strlen(slash + 1))) {
        snprintf(err, es, "repo id '%s': each part must be 1-96 of [A-Za-z0-9._-], not starting or ending in '.' or '-', without '..'",
                 repo);
        return 0;
    }
    return 1;
}

/* "{endpoint}/api/models/{repo}/{kind}/{rev}{suffix}" */
static char *api_url(const llmr_hub *h, const char *repo, const char *kind, const char *rev, const char *suffix) {
    char *erev = llmr_url_encode(rev, 0);
    if (!erev) return NULL;
    size_t n = strlen(h->endpoint) + strlen(repo) + strlen(kind) + strlen(erev) + strlen(suffix) + 32;
    char *u = malloc(n);
    if (u) snprintf(u, n, "%s/api/models/%s/%s/%s%s", h->endpoint, repo, kind, erev, suffix);
    free(erev);
    return u;
}

char *llmr_hub_resolve_url(const llmr_hub *h, const char *repo, const char *rev, const char *path) {
    char tmp[256];
    if (!h || !llmr_hub_repo_id_valid(repo, tmp, sizeof tmp) || !llmr_path_is_safe(path, tmp, sizeof tmp)) return NULL;
    char *erev = llmr_url_encode(rev ? rev : "main", 0);
    char *epath = llmr_url_encode(path, 1); /* '/' kept between segments, every segment encoded */
    char *u = NULL;
    if (erev && epath) {
        size_t n = strlen(h->endpoint) + strlen(repo) + strlen(erev) + strlen(epath) + 16;
        u = malloc(n);
        if (u) snprintf(u, n, "%s/%s/resolve/%s/%s", h->endpoint, repo, erev, epath);
    }
    free(erev);
    free(epath);
    return u;
}

/* Maps a transport failure or an HTTP error status to a hub status and message.
 * default_404: what a plain 404 means for this call (repo for the API, file for resolve). */
static llmr_hub_status classify(const llmr_hub *h, llmr_httpc_status hs, const char *http_err,
                                const llmr_httpc_resp *r, const char *what, const char *url,
                                llmr_hub_status default_404, char *err, size_t es) {
    switch (hs) {
    case LLMR_HTTPC_OK: break;
    case LLMR_HTTPC_ENOMEM: snprintf(err, es, "%s: out of memory", what); return LLMR_HUB_ENOMEM;
    case LLMR_HTTPC_ETOOBIG: snprintf(err, es, "%s: %s", what, http_err); return LLMR_HUB_ETOOBIG;
    case LLMR_HTTPC_EABORTED: snprintf(err, es, "%s: %s", what, http_err); return LLMR_HUB_EABORTED;
    case LLMR_HTTPC_EIO: snprintf(err, es, "%s: %s", what, http_err); return LLMR_HUB_EIO;
    case LLMR_HTTPC_EVERIFY: snprintf(err, es, "%s: %s", what, http_err); return LLMR_HUB_EVERIFY;
    case LLMR_HTTPC_EINVAL: snprintf(err, es, "%s: %s", what, http_err); return LLMR_HUB_EINVAL;
    case LLMR_HTTPC_EHTTP: break; /* download: status in r */
    default:
        snprintf(err, es, "%s: hub %s unreachable: %s", what, h->endpoint, http_err);
        return LLMR_HUB_EUNREACHABLE;
    }
    long status = r ? r->status : 0;
    const char *code = r ? llmr_httpc_resp_header(r, "X-Error-Code") : NULL;
    const char *msg = r ? llmr_httpc_resp_header(r, "X-Error-Message") : NULL;
    llmr_hub_status st;
    if (code && strcmp(code, "RepoNotFound") == 0) st = LLMR_HUB_ENOREPO;
    else if (code && strcmp(code, "RevisionNotFound") == 0) st = LLMR_HUB_ENOREV;
    else if (code && strcmp(code, "EntryNotFound") == 0) st = LLMR_HUB_ENOFILE;
    else if (code && strcmp(code, "GatedRepo") == 0) st = LLMR_HUB_EAUTH;
    else if (status == 401 || status == 403) st = LLMR_HUB_EAUTH;
    else if (status == 404) st = default_404;
    else st = LLMR_HUB_EHTTP;
    if (hs == LLMR_HTTPC_EHTTP) { /* the download's message already names URL, status and body */
        snprintf(err, es, "%s: %s: %s", what, llmr_hub_strerror(st), http_err);
        return st;
    }
    const char *body = r && r->body ? r->body : "";
    snprintf(err, es, "%s: %s: GET %s: HTTP %ld%s%.300s", what, llmr_hub_strerror(st), url, status,
             msg || *body ? ": " : "", msg ? msg : body);
    return st;
}

/* GET url into *r; OK only for a 2xx. */
static llmr_hub_status get_ok(llmr_hub *h, const char *url, const char *what, llmr_hub_status d404,
                              llmr_httpc_resp *r, char *err, size_t es) {
    char herr[1024] = "";
    llmr_httpc_req q = {.method = "GET", .url = url};
    llmr_httpc_status hs = llmr_httpc_do(h->http, &q, r, herr, sizeof herr);
    if (hs == LLMR_HTTPC_OK && r->status >= 200 && r->status < 300) return LLMR_HUB_OK;
    return classify(h, hs, herr, r, what, url, d404, err, es);
}

static int is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

static void lower_copy(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[n] = 0;
}

void llmr_hub_files_free(llmr_hub_file *f, size_t n) {
    if (!f) return;
    for (size_t i = 0; i < n; i++) free(f[i].path);
    free(f);
}

/* Appends the file entries of one tree page (a JSON array) to *files. */
static llmr_hub_status parse_tree_page(const char *body, const char *url, llmr_hub_file **files, size_t *n,
                                       size_t *cap, char *err, size_t es) {
    json_error_t je;
    json_t *arr = json_loads(body, JSON_REJECT_DUPLICATES, &je);
    llmr_hub_status st = LLMR_HUB_EPROTO;
    if (!arr || !json_is_array(arr)) {
        snprintf(err, es, "tree listing %s: not a JSON array (%s)", url, arr ? "another JSON value" : je.text);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!type || !path) {
            snprintf(err, es, "tree listing %s: entry %zu lacks a string 'type' or 'path'", url, i);
            goto out;
        }
        if (strcmp(type, "file") != 0) continue; /* directories (and anything newer) are not files */
        char why[256];
        if (!llmr_path_is_safe(path, why, sizeof why)) {
            snprintf(err, es, "tree listing %s: unsafe file name '%.200s': %s", url, path, why);
            goto out;
        }
        json_t *size = json_object_get(e, "size");
        if (!json_is_integer(size) || json_integer_value(size) < 0) {
            snprintf(err, es, "tree listing %s: '%.200s' has no valid 'size'", url, path);
            goto out;
        }
        llmr_hub_file f = {.size = (uint64_t)json_integer_value(size)};
        const char *oid = json_string_value(json_object_get(e, "oid"));
        if (oid && is_hex(oid, 40)) lower_copy(f.oid, oid, 40);
        json_t *lfs = json_object_get(e, "lfs");
        if (lfs && !json_is_null(lfs)) {
            const char *lo = json_string_value(json_object_get(lfs, "oid"));
            json_t *ls = json_object_get(lfs, "size");
            if (lo && strncmp(lo, "sha256:", 7) == 0) lo += 7;
            if (!lo || !is_hex(lo, 64) || (ls && (!json_is_integer(ls) || json_integer_value(ls) < 0))) {
                snprintf(err, es, "tree listing %s: '%.200s' has a malformed 'lfs' object (oid must be 64 hex)", url,
                         path);
                goto out;
            }
            f.is_lfs = 1;
            lower_copy(f.sha256, lo, 64);
            if (ls) f.size = (uint64_t)json_integer_value(ls);
        }
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            llmr_hub_file *nf = realloc(*files, nc * sizeof *nf);
            if (!nf) { st = LLMR_HUB_ENOMEM; snprintf(err, es, "tree listing %s: out of memory", url); goto out; }
            *files = nf;
            *cap = nc;
        }
        f.path = strdup(path);
        if (!f.path) { st = LLMR_HUB_ENOMEM; snprintf(err, es, "tree listing %s: out of memory", url); goto out; }
        (*files)[(*n)++] = f;
    }
    st = LLMR_HUB_OK;
out:
    json_decref(arr);
    return st;
}

/* The rel="next" URL of a Link header, made absolute; NULL if none. *bad set if it leaves the hub. */
static char *next_link(const llmr_hub *h, const char *link, int *bad) {
    *bad = 0;
    if (!link) return NULL;
    for (const char *p = link; (p = strchr(p, '<'));) {
        const char *close = strchr(p, '>');
        if (!close) return NULL;
        const char *end = strchr(close, ',');
        size_t seg = end ? (size_t)(end - close) : strlen(close);
        char params[512];
        snprintf(params, sizeof params, "%.*s", (int)(seg < sizeof params ? seg : sizeof params - 1), close);
        for (char *c = params; *c; c++) *c = (char)tolower((unsigned char)*c);
        if (strstr(params, "rel=\"next\"") || strstr(params, "rel=next")) {
            size_t ul = (size_t)(close - p - 1);
            char *u;
            if (ul > 0 && p[1] == '/') { /* relative to the hub's origin */
                size_t n = strlen(h->origin) + ul + 1;
                u = malloc(n);
                if (u) snprintf(u, n, "%s%.*s", h->origin, (int)ul, p + 1);
            } else {
                u = strndup(p + 1, ul);
                size_t ol = strlen(h->origin);
                if (u && (strncasecmp(u, h->origin, ol) != 0 || (u[ol] != '/' && u[ol] != 0))) *bad = 1;
            }
            return u;
        }
        p = close;
    }
    return NULL;
}

llmr_hub_status llmr_hub_list_files(llmr_hub *h, const char *repo, const char *rev, llmr_hub_file **files_out,
                                    size_t *n_out, char *err, size_t es) {
    if (files_out) *files_out = NULL;
    if (n_out) *n_out = 0;
    if (!h || !files_out || !n_out) { snprintf(err, es, "list files: missing argument"); return LLMR_HUB_EINVAL; }
    if (!llmr_hub_repo_id_valid(repo, err, es)) return LLMR_HUB_EINVAL;
    if (!rev || !*rev) rev = "main";
    llmr_hub_file *files = NULL;
    size_t n = 0, cap = 0, total_bytes = 0;
    char *url = api_url(h, repo, "tree", rev, "?recursive=true");
    char what[512];
    snprintf(what, sizeof what, "list %s@%s", repo, rev);
    llmr_hub_status st = url ? LLMR_HUB_OK : LLMR_HUB_ENOMEM;
    if (!url) snprintf(err, es, "%s: out of memory", what);
    for (int page = 0; st == LLMR_HUB_OK && url; page++) {
        if (page >= MAX_PAGES) {
            st = LLMR_HUB_EPROTO;
            snprintf(err, es, "%s: more than %d pages (a pagination loop?) at %s", what, MAX_PAGES, url);
            break;
        }
        llmr_httpc_resp r;
        st = get_ok(h, url, what, LLMR_HUB_ENOREPO, &r, err, es);
        if (st == LLMR_HUB_OK) {
            total_bytes += r.body_len;
            if (total_bytes > MAX_LISTING_BYTES) {
                st = LLMR_HUB_ETOOBIG;
                snprintf(err, es, "%s: listing over %u bytes", what, MAX_LISTING_BYTES);
            }
        }
        if (st == LLMR_HUB_OK) st = parse_tree_page(r.body, url, &files, &n, &cap, err, es);
        char *next = NULL;
        if (st == LLMR_HUB_OK) {
            int bad;
            next = next_link(h, llmr_httpc_resp_header(&r, "Link"), &bad);
            if (bad) {
                st = LLMR_HUB_EPROTO;
                snprintf(err, es, "%s: pagination link '%.300s' leaves the hub %s", what, next, h->origin);
                free(next);
                next = NULL;
            } else if (next && strcmp(next, url) == 0) {
                st = LLMR_HUB_EPROTO;
                snprintf(err, es, "%s: pagination link points to the same page %s", what, url);
                free(next);
                next = NULL;
            }
        }
        llmr_httpc_resp_free(&r);
        free(url);
        url = next;
    }
    free(url);
    if (st != LLMR_HUB_OK) {
        llmr_hub_files_free(files, n);
        return st;
    }
    *files_out = files;
    *n_out = n;
    return LLMR_HUB_OK;
}

llmr_hub_status llmr_hub_revision(llmr_hub *h, const char *repo, const char *rev, char sha_out[41], char *err,
                                  size_t es) {
    if (sha_out) sha_out[0] = 0;
    if (!h || !sha_out) { snprintf(err, es, "revision: missing argument"); return LLMR_HUB_EINVAL; }
    if (!llmr_hub_repo_id_valid(repo, err, es)) return LLMR_HUB_EINVAL;
    if (!rev || !*rev) rev = "main";
    char *url = api_url(h, repo, "revision", rev, "");
    if (!url) { snprintf(err, es, "revision: out of memory"); return LLMR_HUB_ENOMEM; }
    char what[512];
    snprintf(what, sizeof what, "revision %s@%s", repo, rev);
    llmr_httpc_resp r;
    llmr_hub_status st = get_ok(h, url, what, LLMR_HUB_ENOREPO, &r, err, es);
    if (st == LLMR_HUB_OK) {
        json_error_t je;
        json_t *o = json_loads(r.body, 0, &je);
        const char *sha = json_string_value(json_object_get(o, "sha"));
        if (!sha || !is_hex(sha, 40)) {
            st = LLMR_HUB_EPROTO;
            snprintf(err, es, "%s: GET %s: %s", what, url,
                     !o ? "not JSON" : "no 40-hex 'sha' field in the answer");
        } else {
            lower_copy(sha_out, sha, 40);
        }
        json_decref(o);
    }
    llmr_httpc_resp_free(&r);
    free(url);
    return st;
}

llmr_hub_status llmr_hub_fetch(llmr_hub *h, const char *repo, const char *rev, const char *path, size_t max_bytes,
                               char **data_out, size_t *len_out, char *err, size_t es) {
    if (data_out) *data_out = NULL;
    if (len_out) *len_out = 0;
    if (!h || !data_out || !path) { snprintf(err, es, "fetch: missing argument"); return LLMR_HUB_EINVAL; }
    char why[256];
    if (!llmr_hub_repo_id_valid(repo, err, es)) return LLMR_HUB_EINVAL;
    if (!llmr_path_is_safe(path, why, sizeof why)) {
        snprintf(err, es, "fetch %s: unsafe path '%.200s': %s", repo, path, why);
        return LLMR_HUB_EINVAL;
    }
    if (!rev || !*rev) rev = "main";
    char *url = llmr_hub_resolve_url(h, repo, rev, path);
    if (!url) { snprintf(err, es, "fetch: out of memory"); return LLMR_HUB_ENOMEM; }
    char what[1400];
    snprintf(what, sizeof what, "fetch %s@%s:%s", repo, rev, path);
    /* the http client's own max_body (64 MiB by default) bounds memory; the caller's limit is
     * checked on what arrived */
    llmr_httpc_resp r;
    llmr_hub_status st = get_ok(h, url, what, LLMR_HUB_ENOFILE, &r, err, es);
    size_t limit = max_bytes ? max_bytes : (16u << 20);
    if (st == LLMR_HUB_OK && r.body_len > limit) {
        st = LLMR_HUB_ETOOBIG;
        snprintf(err, es, "%s: %zu bytes, over the %zu-byte limit (GET %s)", what, r.body_len, limit, url);
    }
    if (st == LLMR_HUB_OK) {
        *data_out = r.body;
        if (len_out) *len_out = r.body_len;
        r.body = NULL;
    }
    llmr_httpc_resp_free(&r);
    free(url);
    return st;
}

/* git's blob sha1 of a file ("blob <size>\0" + content) into hex. 0, or -1 with errno set. */
static int git_blob_sha1_file(const char *path, char hex[41]) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    struct stat sb;
    int rc = -1;
    if (!c || fstat(fileno(fp), &sb) != 0) goto out;
    char head[48], buf[65536];
    int hl = snprintf(head, sizeof head, "blob %llu", (unsigned long long)sb.st_size);
    EVP_DigestInit_ex(c, EVP_sha1(), NULL);
    EVP_DigestUpdate(c, head, (size_t)hl + 1);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) EVP_DigestUpdate(c, buf, n);
    if (ferror(fp)) goto out;
    unsigned char md[20];
    unsigned ml = 0;
    EVP_DigestFinal_ex(c, md, &ml);
    for (int i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    rc = 0;
out:
    fclose(fp);
    EVP_MD_CTX_free(c);
    return rc;
}

/* A regular (non-LFS) file's listing oid is git's blob sha1 of its content: check it after the
 * download, since only LFS files carry a sha256. On mismatch the file is removed. */
static llmr_hub_status verify_git_oid(const char *dest, const llmr_hub_file *f, const char *what, char *err, size_t es) {
    char hex[41];
    if (git_blob_sha1_file(dest, hex) != 0) {
        snprintf(err, es, "%s: verify %s: %s", what, dest, strerror(errno));
        return LLMR_HUB_EIO;
    }
    if (strcmp(hex, f->oid) != 0) {
        snprintf(err, es, "%s: git blob sha1 %s, the listing says %s (file removed)", what, hex, f->oid);
        unlink(dest);
        return LLMR_HUB_EVERIFY;
    }
    return LLMR_HUB_OK;
}

int llmr_hub_file_matches(const char *path, const llmr_hub_file *f, int size_only) {
    struct stat sb;
    if (!path || !f || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size) return 0;
    if (size_only) return 1;
    char hex[65], err[256];
    if (f->is_lfs) return llmr_sha256_file(path, hex, NULL, NULL, err, sizeof err) == 0 && strcmp(hex, f->sha256) == 0;
    if (!f->oid[0]) return 1; /* nothing to compare with */
    return git_blob_sha1_file(path, hex) == 0 && strcmp(hex, f->oid) == 0;
}

llmr_hub_status llmr_hub_download(llmr_hub *h, const char *repo, const char *rev, const char *path,
                                  const char *dest, const llmr_hub_file *expect,
                                  const llmr_httpc_download_opts *opts, llmr_httpc_download_result *result,
                                  char *err, size_t es) {
    if (!h || !path || !dest) { snprintf(err, es, "download: missing argument"); return LLMR_HUB_EINVAL; }
    char why[256];
    if (!llmr_hub_repo_id_valid(repo, err, es)) return LLMR_HUB_EINVAL;
    if (!llmr_path_is_safe(path, why, sizeof why)) {
        snprintf(err, es, "download %s: unsafe path '%.200s': %s", repo, path, why);
        return LLMR_HUB_EINVAL;
    }
    if (!rev || !*rev) rev = "main";
    char *url = llmr_hub_resolve_url(h, repo, rev, path);
    if (!url) { snprintf(err, es, "download: out of memory"); return LLMR_HUB_ENOMEM; }
    llmr_httpc_download_opts o = {.expected_size = -1};
    if (opts) o = *opts;
    if (expect) {
        o.expected_size = (int64_t)expect->size;
        o.expected_sha256 = expect->is_lfs ? expect->sha256 : NULL;
    }
    char herr[1024] = "", what[1400];
    snprintf(what, sizeof what, "download %s@%s:%s", repo, rev, path);
    llmr_httpc_download_result res;
    llmr_httpc_status hs = llmr_httpc_download(h->http, url, dest, &o, &res, herr, sizeof herr);
    llmr_hub_status st = LLMR_HUB_OK;
    if (hs != LLMR_HTTPC_OK) {
        llmr_httpc_resp fake = {.status = res.status};
        st = classify(h, hs, herr, &fake, what, url, LLMR_HUB_ENOFILE, err, es);
    }
    if (st == LLMR_HUB_OK && expect && !expect->is_lfs && expect->oid[0]) st = verify_git_oid(dest, expect, what, err, es);
    if (result) *result = res;
    free(url);
    return st;
}

/* ---- whole snapshots -------------------------------------------------------------------------- */

typedef struct snap_progress {
    const llmr_hub_snapshot_opts *o;
    const char *path;
    uint64_t before;      /* bytes of the snapshot already in place before this file */
    uint64_t all_total;
} snap_progress;

static int snap_on_progress(void *user, uint64_t bytes, uint64_t total, double rate) {
    snap_progress *p = user;
    return p->o->progress(p->o->user, p->path, bytes, total, p->before + bytes, p->all_total, rate);
}

static int selected(const llmr_hub_snapshot_opts *o, const char *path) {
    if (!o->include) return 1;
    for (const char *const *g = o->include; *g; g++)
        if (fnmatch(*g, path, 0) == 0) return 1;
    return 0;
}

/* mkdir -p of the folders leading to path (not path itself). */
static int make_parents(const char *path) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) { errno = ENAMETOOLONG; return -1; }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

llmr_hub_status llmr_hub_snapshot_download(llmr_hub *h, const char *repo, const char *rev, const char *dir,
                                           const llmr_hub_snapshot_opts *opts, llmr_hub_snapshot_result *out,
                                           char *err, size_t es) {
    llmr_hub_snapshot_opts none = {0};
    const llmr_hub_snapshot_opts *o = opts ? opts : &none;
    llmr_hub_snapshot_result res;
    memset(&res, 0, sizeof res);
    if (out) *out = res;
    if (!h || !dir || !*dir) { snprintf(err, es, "snapshot download: missing hub or folder"); return LLMR_HUB_EINVAL; }
    llmr_hub_status st = llmr_hub_revision(h, repo, rev, res.commit, err, es);
    llmr_hub_file *files = NULL;
    size_t n = 0;
    if (st == LLMR_HUB_OK) st = llmr_hub_list_files(h, repo, res.commit, &files, &n, err, es);
    for (size_t i = 0; st == LLMR_HUB_OK && i < n; i++)
        if (selected(o, files[i].path)) { res.files++; res.bytes_total += files[i].size; }
    uint64_t done = 0;
    for (size_t i = 0; st == LLMR_HUB_OK && i < n; i++) {
        llmr_hub_file *f = &files[i];
        if (!selected(o, f->path)) continue;
        if (o->cancel && atomic_load(o->cancel)) {
            st = LLMR_HUB_EABORTED;
            snprintf(err, es, "snapshot %s: cancelled before %s", repo, f->path);
            break;
        }
        char dest[PATH_MAX];
        errno = ENAMETOOLONG;
        if (snprintf(dest, sizeof dest, "%s/%s", dir, f->path) >= (int)sizeof dest || make_parents(dest) != 0) {
            st = LLMR_HUB_EIO;
            snprintf(err, es, "snapshot %s: %s/%s: cannot create its folder: %s", repo, dir, f->path,
                     strerror(errno));
            break;
        }
        if (llmr_hub_file_matches(dest, f, o->trust_existing_size)) {
            res.skipped++;
            done += f->size;
            if (o->file_done) o->file_done(o->user, f, 1, NULL);
            continue;
        }
        snap_progress sp = {.o = o, .path = f->path, .before = done, .all_total = res.bytes_total};
        llmr_httpc_download_opts d = {.expected_size = -1, .cancel = o->cancel,
                                      .progress = o->progress ? snap_on_progress : NULL, .progress_user = &sp};
        llmr_httpc_download_result r;
        st = llmr_hub_download(h, repo, res.commit, f->path, dest, f, &d, &r, err, es);
        if (st != LLMR_HUB_OK) break;
        res.bytes_downloaded += r.bytes - r.resumed_from;
        done += f->size;
        if (o->file_done) o->file_done(o->user, f, 0, &r);
    }
    llmr_hub_files_free(files, n);
    if (out) *out = res;
    return st;
}
