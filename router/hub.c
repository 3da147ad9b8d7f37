/* hub.c — see hub.h. Listing helpers, resolve URLs, and the HTTP hub on libcurl.
 *
 * Note: the shared HTTP client (common/http_client.h, branch hub) had not landed when this was
 * written; this module makes its few GET requests with libcurl directly. Only this file needs to
 * change to move onto the shared client. */
#include "router/hub.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *router_hub_strerror(int st) {
    switch (st) {
    case ROUTER_HUB_OK: return "ok";
    case ROUTER_HUB_ENOTFOUND: return "not found";
    case ROUTER_HUB_EAUTH: return "not authorized (gated or private repo)";
    case ROUTER_HUB_EUNREACHABLE: return "hub unreachable";
    case ROUTER_HUB_EBADREPLY: return "malformed hub reply";
    case ROUTER_HUB_ETOOBIG: return "file too large";
    case ROUTER_HUB_ENOMEM: return "out of memory";
    }
    return "unknown hub status";
}

void router_hub_listing_free(router_hub_listing *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n_files; i++) free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}

const router_hub_file *router_hub_listing_find(const router_hub_listing *l, const char *path) {
    for (size_t i = 0; i < l->n_files; i++)
        if (!strcmp(l->files[i].path, path)) return &l->files[i];
    return NULL;
}

int router_hub_listing_add(router_hub_listing *l, const char *path, uint64_t size, const char *sha256) {
    router_hub_file *f = realloc(l->files, (l->n_files + 1) * sizeof *f);
    if (!f) return -1;
    l->files = f;
    f = &l->files[l->n_files];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path))) return -1;
    f->size = size;
    if (sha256) snprintf(f->sha256, sizeof f->sha256, "%s", sha256);
    l->n_files++;
    return 0;
}

/* Appends s percent-encoded (RFC 3986 unreserved kept; '/' kept when keep_slash). */
static void append_enc(char **out, size_t *len, size_t *cap, const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s && *out; s++) {
        unsigned char c = (unsigned char)*s;
        if (*len + 4 > *cap) {
            char *n = realloc(*out, *cap * 2);
            if (!n) { free(*out); *out = NULL; return; }
            *out = n;
            *cap *= 2;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) ||
            (keep_slash && c == '/'))
            (*out)[(*len)++] = (char)c;
        else {
            (*out)[(*len)++] = '%';
            (*out)[(*len)++] = hex[c >> 4];
            (*out)[(*len)++] = hex[c & 15];
        }
        (*out)[*len] = 0;
    }
}

/* Joins literal and encoded parts: parts alternate (literal, encoded, literal, ...). */
static char *build_url(const char *const *parts, const int *keep_slash, int n) {
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    for (int i = 0; i < n && out; i++) {
        if (i % 2 == 0) {
            size_t pl = strlen(parts[i]);
            while (out && len + pl + 1 > cap) {
                char *m = realloc(out, cap * 2);
                if (!m) { free(out); return NULL; }
                out = m;
                cap *= 2;
            }
            memcpy(out + len, parts[i], pl + 1);
            len += pl;
        } else {
            append_enc(&out, &len, &cap, parts[i], keep_slash[i]);
        }
    }
    return out;
}

char *router_hub_resolve_url(const char *endpoint, const char *repo, const char *commit, const char *path) {
    const char *parts[] = {endpoint, "", "/", repo, "/resolve/", commit, "/", path};
    const int keep[] = {0, 0, 0, 1, 0, 0, 0, 1};
    return build_url(parts, keep, 8);
}

/* --- the HTTP hub -------------------------------------------------------------- */

typedef struct http_hub {
    router_hub hub;
    char *endpoint;
    char *token;
} http_hub;

typedef struct buf {
    char *data;
    size_t len, max;
    int too_big;
    char link_next[2048];
    char error_code[64];
} buf;

static size_t on_body(char *p, size_t sz, size_t n, void *u) {
    buf *b = u;
    size_t k = sz * n;
    if (b->len + k > b->max) { b->too_big = 1; return 0; }
    char *d = realloc(b->data, b->len + k + 1);
    if (!d) return 0;
    memcpy(d + b->len, p, k);
    b->data = d;
    b->len += k;
    d[b->len] = 0;
    return k;
}

/* Picks the rel="next" URL out of a Link header, and HF's X-Error-Code. */
static size_t on_header(char *p, size_t sz, size_t n, void *u) {
    buf *b = u;
    size_t k = sz * n;
    char line[4096];
    size_t l = k < sizeof line - 1 ? k : sizeof line - 1;
    memcpy(line, p, l);
    line[l] = 0;
    if (!strncasecmp(line, "link:", 5) && strstr(line, "rel=\"next\"")) {
        char *lt = strchr(line, '<'), *gt = lt ? strchr(lt, '>') : NULL;
        if (lt && gt && (size_t)(gt - lt - 1) < sizeof b->link_next) {
            memcpy(b->link_next, lt + 1, (size_t)(gt - lt - 1));
            b->link_next[gt - lt - 1] = 0;
        }
    } else if (!strncasecmp(line, "x-error-code:", 13)) {
        sscanf(line + 13, " %63[^\r\n]", b->error_code);
    }
    return k;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* GET url into b (bounded by b->max). Maps transport errors and statuses onto router_hub_status. */
static int http_get(http_hub *h, const char *url, buf *b, char *err, size_t es) {
    pthread_once(&curl_once, curl_init);
    CURL *c = curl_easy_init();
    if (!c) { snprintf(err, es, "GET %s: cannot create a curl handle", url); return ROUTER_HUB_ENOMEM; }
    struct curl_slist *hdrs = NULL;
    char auth[600];
    if (h->token && *h->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", h->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "llmr-router/0.1");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    if (b->too_big) {
        snprintf(err, es, "GET %s: body over the %zu-byte limit", url, b->max);
        return ROUTER_HUB_ETOOBIG;
    }
    if (cc != CURLE_OK) {
        snprintf(err, es, "GET %s: %s", url, cerr[0] ? cerr : curl_easy_strerror(cc));
        return ROUTER_HUB_EUNREACHABLE;
    }
    if (status == 200) return ROUTER_HUB_OK;
    /* huggingface.co answers 401 for a repo that does not exist when the caller is anonymous, and
     * says which in X-Error-Code. */
    if (status == 404 || !strcmp(b->error_code, "RepoNotFound") || !strcmp(b->error_code, "RevisionNotFound") ||
        !strcmp(b->error_code, "EntryNotFound")) {
        snprintf(err, es, "GET %s: HTTP %ld%s%s", url, status, b->error_code[0] ? " " : "", b->error_code);
        return ROUTER_HUB_ENOTFOUND;
    }
    if (status == 401 || status == 403) {
        snprintf(err, es, "GET %s: HTTP %ld (gated or private repo; set a hub token)", url, status);
        return ROUTER_HUB_EAUTH;
    }
    snprintf(err, es, "GET %s: HTTP %ld", url, status);
    return status >= 500 || status == 429 ? ROUTER_HUB_EUNREACHABLE : ROUTER_HUB_EBADREPLY;
}

static int is_hex40(const char *s) {
    if (!s || strlen(s) != 40) return 0;
    for (; *s; s++)
        if (!strchr("0123456789abcdef", *s)) return 0;
    return 1;
}

/* Adds the file entries of one tree page. */
static int add_tree_page(router_hub_listing *out, json_t *arr, const char *url, char *err, size_t es) {
    if (!json_is_array(arr)) { snprintf(err, es, "GET %s: expected a JSON array of tree entries", url); return ROUTER_HUB_EBADREPLY; }
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (type && strcmp(type, "file")) continue;
        json_t *sz = json_object_get(e, "size");
        if (!path || !json_is_integer(sz) || json_integer_value(sz) < 0) {
            snprintf(err, es, "GET %s: tree entry %zu has no path or size", url, i);
            return ROUTER_HUB_EBADREPLY;
        }
        const char *oid = json_string_value(json_object_get(json_object_get(e, "lfs"), "oid"));
        char sha[65] = "";
        if (oid) {
            if (!strncmp(oid, "sha256:", 7)) oid += 7;
            if (strlen(oid) == 64) snprintf(sha, sizeof sha, "%s", oid);
        }
        if (router_hub_listing_add(out, path, (uint64_t)json_integer_value(sz), sha)) {
            snprintf(err, es, "out of memory");
            return ROUTER_HUB_ENOMEM;
        }
    }
    return ROUTER_HUB_OK;
}

static int hub_list(void *ctx, const char *repo, const char *revision, router_hub_listing *out, char *err, size_t es) {
    http_hub *h = ctx;
    memset(out, 0, sizeof *out);
    const char *p1[] = {h->endpoint, "", "/api/models/", repo, "/revision/", revision};
    const int k1[] = {0, 0, 0, 1, 0, 0};
    char *url = build_url(p1, k1, 6);
    if (!url) { snprintf(err, es, "out of memory"); return ROUTER_HUB_ENOMEM; }
    buf b = {.max = 64u << 20};
    int rc = http_get(h, url, &b, err, es);
    if (rc == ROUTER_HUB_OK) {
        json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
        const char *sha = json_string_value(json_object_get(j, "sha"));
        if (!is_hex40(sha)) {
            snprintf(err, es, "GET %s: the reply has no 40-hex commit 'sha'", url);
            rc = ROUTER_HUB_EBADREPLY;
        } else {
            snprintf(out->commit, sizeof out->commit, "%s", sha);
        }
        json_decref(j);
    }
    free(b.data);
    free(url);
    if (rc) return rc;
    /* The tree at the commit itself: what was validated is what nodes will download. */
    const char *p2[] = {h->endpoint, "", "/api/models/", repo, "/tree/", out->commit, "?recursive=true&expand=false", ""};
    const int k2[] = {0, 0, 0, 1, 0, 0, 0, 0};
    char *next = build_url(p2, k2, 8);
    for (int page = 0; next && rc == ROUTER_HUB_OK; page++) {
        if (page >= 1000) { snprintf(err, es, "GET %s: more than 1000 pages", next); rc = ROUTER_HUB_EBADREPLY; break; }
        buf t = {.max = 64u << 20};
        rc = http_get(h, next, &t, err, es);
        if (rc == ROUTER_HUB_OK) {
            json_error_t je;
            json_t *arr = json_loadb(t.data ? t.data : "", t.len, 0, &je);
            rc = add_tree_page(out, arr, next, err, es);
            json_decref(arr);
        }
        free(next);
        next = rc == ROUTER_HUB_OK && t.link_next[0] ? strdup(t.link_next) : NULL;
        free(t.data);
    }
    free(next);
    if (rc) router_hub_listing_free(out);
    return rc;
}

static int hub_fetch(void *ctx, const char *repo, const char *commit, const char *path, size_t max, char **body,
                     size_t *len, char *err, size_t es) {
    http_hub *h = ctx;
    *body = NULL;
    *len = 0;
    char *url = router_hub_resolve_url(h->endpoint, repo, commit, path);
    if (!url) { snprintf(err, es, "out of memory"); return ROUTER_HUB_ENOMEM; }
    buf b = {.max = max};
    int rc = http_get(h, url, &b, err, es);
    free(url);
    if (rc) { free(b.data); return rc; }
    if (!b.data && !(b.data = calloc(1, 1))) { snprintf(err, es, "out of memory"); return ROUTER_HUB_ENOMEM; }
    *body = b.data;
    *len = b.len;
    return ROUTER_HUB_OK;
}

static void hub_destroy(void *ctx) {
    http_hub *h = ctx;
    free(h->endpoint);
    free(h->token);
    free(h);
}

router_hub *router_hub_http_create(const char *endpoint, const char *token) {
    http_hub *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->endpoint = strdup(endpoint);
    h->token = token && *token ? strdup(token) : NULL;
    if (!h->endpoint || (token && *token && !h->token)) { hub_destroy(h); return NULL; }
    size_t n = strlen(h->endpoint);
    while (n > 0 && h->endpoint[n - 1] == '/') h->endpoint[--n] = 0;
    h->hub.ctx = h;
    h->hub.endpoint = h->endpoint;
    h->hub.list = hub_list;
    h->hub.fetch = hub_fetch;
    h->hub.destroy = hub_destroy;
    return &h->hub;
}

void router_hub_destroy(router_hub *hub) {
    if (hub && hub->destroy) hub->destroy(hub->ctx);
}
