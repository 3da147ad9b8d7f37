/* hub.c — see hub.h. Listing helpers, resolve URLs, and the HTTP hub on common/hub_client.h. */
#include "router/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/hub_client.h"

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

/* --- the HTTP hub, on common/hub_client.h ------------------------------------------------ */

typedef struct http_hub {
    router_hub hub;
    llmr_hub *client;
    char *endpoint;
} http_hub;

static int map_status(llmr_hub_status st) {
    switch (st) {
    case LLMR_HUB_OK: return ROUTER_HUB_OK;
    case LLMR_HUB_ENOREPO: case LLMR_HUB_ENOREV: case LLMR_HUB_ENOFILE: return ROUTER_HUB_ENOTFOUND;
    case LLMR_HUB_EAUTH: return ROUTER_HUB_EAUTH;
    case LLMR_HUB_EUNREACHABLE: return ROUTER_HUB_EUNREACHABLE;
    case LLMR_HUB_ETOOBIG: return ROUTER_HUB_ETOOBIG;
    case LLMR_HUB_ENOMEM: return ROUTER_HUB_ENOMEM;
    default: return ROUTER_HUB_EBADREPLY;
    }
}

static int hub_list(void *ctx, const char *repo, const char *revision, router_hub_listing *out, char *err, size_t es) {
    http_hub *h = ctx;
    memset(out, 0, sizeof *out);
    /* Resolve first, then list at the commit itself: what was validated is what nodes download. */
    llmr_hub_status st = llmr_hub_revision(h->client, repo, revision, out->commit, err, es);
    if (st) return map_status(st);
    llmr_hub_file *files = NULL;
    size_t n = 0;
    if ((st = llmr_hub_list_files(h->client, repo, out->commit, &files, &n, err, es))) return map_status(st);
    for (size_t i = 0; i < n; i++)
        if (router_hub_listing_add(out, files[i].path, files[i].size, files[i].is_lfs ? files[i].sha256 : "")) {
            llmr_hub_files_free(files, n);
            router_hub_listing_free(out);
            snprintf(err, es, "out of memory");
            return ROUTER_HUB_ENOMEM;
        }
    llmr_hub_files_free(files, n);
    return ROUTER_HUB_OK;
}

static int hub_fetch(void *ctx, const char *repo, const char *commit, const char *path, size_t max, char **body,
                     size_t *len, char *err, size_t es) {
    http_hub *h = ctx;
    return map_status(llmr_hub_fetch(h->client, repo, commit, path, max, body, len, err, es));
}

static void hub_destroy(void *ctx) {
    http_hub *h = ctx;
    llmr_hub_destroy(h->client);
    free(h->endpoint);
    free(h);
}

router_hub *router_hub_http_create(const char *endpoint, const char *token, char *err, size_t es) {
    http_hub *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, es, "out of memory"); return NULL; }
    /* One quick retry: an operator waiting on a registration wants "unreachable" in seconds. */
    llmr_httpc_opts ho = {.connect_timeout_ms = 5000, .timeout_ms = 60000, .retries = 1, .backoff_ms = 200};
    llmr_hub_opts o = {.endpoint = endpoint, .token = token ? token : "", .http = &ho};
    if (!(h->client = llmr_hub_create(&o, err, es)) || !(h->endpoint = strdup(llmr_hub_endpoint(h->client)))) {
        if (h->client && !h->endpoint) snprintf(err, es, "out of memory");
        hub_destroy(h);
        return NULL;
    }
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
