/* hub.h — what the router needs from a Hugging Face-compatible hub, as a small interface.
 *
 * Registration validates a repo against the hub's listing at one revision. The validator
 * (validate.h) only sees this interface, so Check tests drive it with in-memory listings and the
 * real router plugs in router_hub_http_create (HTTP, hub.c). Every operation answers with a
 * router_hub_status that tells "no such repo/file" from "not allowed" from "hub unreachable", and a
 * message naming the URL and the cause. */
#ifndef ROUTER_HUB_H
#define ROUTER_HUB_H

#include <stddef.h>
#include <stdint.h>

typedef enum router_hub_status {
    ROUTER_HUB_OK = 0,
    ROUTER_HUB_ENOTFOUND,    /* repo, revision or file does not exist (HTTP 404) */
    ROUTER_HUB_EAUTH,        /* gated or private (HTTP 401/403) */
    ROUTER_HUB_EUNREACHABLE, /* DNS, refused, timeout, TLS, 5xx: the hub could not answer */
    ROUTER_HUB_EBADREPLY,    /* the hub answered something that is not a valid listing */
    ROUTER_HUB_ETOOBIG,      /* a fetched file is over the caller's limit */
    ROUTER_HUB_ENOMEM,
} router_hub_status;

const char *router_hub_strerror(int status);

typedef struct router_hub_file {
    char *path;       /* relative path in the repo ("model-00001-of-00002.safetensors") */
    uint64_t size;
    char sha256[65];  /* LFS oid (sha256) for LFS files; "" for small files stored in git */
} router_hub_file;

typedef struct router_hub_listing {
    char commit[41];  /* the commit sha the revision resolved to */
    router_hub_file *files;
    size_t n_files;
} router_hub_listing;

/* Frees what the listing holds and zeroes it. Accepts NULL. */
void router_hub_listing_free(router_hub_listing *l);
/* The file named path, or NULL. */
const router_hub_file *router_hub_listing_find(const router_hub_listing *l, const char *path);
/* Appends a file (copies path). 0, or -1 on allocation failure. */
int router_hub_listing_add(router_hub_listing *l, const char *path, uint64_t size, const char *sha256);

typedef struct router_hub {
    void *ctx;
    const char *endpoint; /* base URL, e.g. "https://huggingface.co" (no trailing slash) */
    /* Resolves revision to a commit and lists every file of the repo at that commit. */
    int (*list)(void *ctx, const char *repo, const char *revision, router_hub_listing *out, char *err,
                size_t err_size);
    /* Fetches one file at a commit into *body (malloc'd, NUL-terminated) and *len; ETOOBIG over max. */
    int (*fetch)(void *ctx, const char *repo, const char *commit, const char *path, size_t max, char **body,
                 size_t *len, char *err, size_t err_size);
    void (*destroy)(void *ctx);
} router_hub;

/* The hub's download URL for a file pinned to a commit: ENDPOINT/REPO/resolve/COMMIT/PATH, each
 * path segment percent-encoded. malloc'd; NULL on allocation failure. */
char *router_hub_resolve_url(const char *endpoint, const char *repo, const char *commit, const char *path);

/* The real hub over HTTP(S), through common/hub_client.h: GET ENDPOINT/api/models/REPO/revision/REV
 * (commit sha), then the tree at that commit (all pages), and resolve URLs for files. endpoint NULL:
 * $HF_ENDPOINT, else huggingface.co; token NULL or "": none. NULL with the cause in err. */
router_hub *router_hub_http_create(const char *endpoint, const char *token, char *err, size_t err_size);
/* Frees any hub made by this module (calls its destroy). Accepts NULL. */
void router_hub_destroy(router_hub *hub);

#endif
