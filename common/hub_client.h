/* hub_client.h — a client for the Hugging Face hub HTTP API (huggingface.co, or llmr-hub, our mirror).
 *
 * Endpoint: the explicit argument, else $HF_ENDPOINT, else https://huggingface.co (a trailing '/'
 * is dropped). Token: the explicit argument, else $HF_TOKEN; sent as a bearer token when non-empty.
 *
 * Calls (repo = "org/name", rev = a branch, tag or 40-hex commit sha; NULL rev = "main"):
 *   llmr_hub_list_files   GET /api/models/{repo}/tree/{rev}?recursive=true, following the Link
 *                         header's rel="next" pages; files only, with size and LFS sha256. Every
 *                         path is checked with llmr_path_is_safe before it is returned.
 *   llmr_hub_revision     GET /api/models/{repo}/revision/{rev} -> the commit sha.
 *   llmr_hub_fetch        GET /{repo}/resolve/{rev}/{path} into memory (small files: config.json...).
 *   llmr_hub_download     the same URL into a file, resumable (see llmr_httpc_download).
 *   llmr_hub_snapshot_download  a whole repo into a folder (pinned commit, skip/resume/verify).
 *   llmr_hub_resolve_url  builds that URL (each path segment percent-encoded, rev fully encoded).
 *
 * Errors distinguish what a caller acts on: the repo, revision or file does not exist (404, or the
 * hub's X-Error-Code header: real huggingface.co answers 401 RepoNotFound for unknown repos to
 * anonymous callers), access denied (401/403), the hub is unreachable (DNS, refused, TLS, timeout:
 * the message names the hub URL and the cause), or the answer is malformed. The message in err
 * always names the URL. A hub handle is immutable and may be shared by threads. */
#ifndef LLMR_HUB_CLIENT_H
#define LLMR_HUB_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"

#define LLMR_HUB_DEFAULT_ENDPOINT "https://huggingface.co"

typedef enum llmr_hub_status {
    LLMR_HUB_OK = 0,
    LLMR_HUB_EINVAL,          /* bad argument: repo id not "org/name", unsafe file path, ... */
    LLMR_HUB_ENOMEM,
    LLMR_HUB_ENOREPO,         /* repository not found */
    LLMR_HUB_ENOREV,          /* revision not found in the repository */
    LLMR_HUB_ENOFILE,         /* file not found at that revision */
    LLMR_HUB_EAUTH,           /* 401/403: token missing, wrong, or without access (gated repo) */
    LLMR_HUB_EUNREACHABLE,    /* transport failure: DNS, refused, TLS, timeout, dropped */
    LLMR_HUB_EHTTP,           /* another unexpected HTTP status (5xx after retries, 400, ...) */
    LLMR_HUB_EPROTO,          /* the answer is not what the hub API returns (bad JSON, unsafe path) */
    LLMR_HUB_ETOOBIG,         /* a fetched file is over the caller's limit */
    LLMR_HUB_EIO,             /* local file error during a download */
    LLMR_HUB_EVERIFY,         /* downloaded size or sha256 differs from the listing */
    LLMR_HUB_EABORTED,        /* cancelled by the caller */
} llmr_hub_status;

/* A static name for a status. Never NULL. */
const char *llmr_hub_strerror(llmr_hub_status st);

typedef struct llmr_hub llmr_hub; /* opaque, immutable, thread-safe */

typedef struct llmr_hub_opts {
    const char *endpoint;              /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;                 /* NULL: $HF_TOKEN; "" = none */
    const llmr_httpc_opts *http;       /* timeouts/retries; NULL = http client defaults */
} llmr_hub_opts;

/* Creates a hub client (opts may be NULL). NULL with the cause in err (bad endpoint, no memory). */
llmr_hub *llmr_hub_create(const llmr_hub_opts *opts, char *err, size_t err_size);
/* Frees it. Accepts NULL. */
void llmr_hub_destroy(llmr_hub *hub);
/* The endpoint in use, without a trailing '/'. */
const char *llmr_hub_endpoint(const llmr_hub *hub);

/* Checks a repo id: "org/name", each part [A-Za-z0-9._-]{1,96}, not starting/ending with '.' or '-',
 * no "..". Returns 1, or 0 with the reason in err. */
int llmr_hub_repo_id_valid(const char *repo, char *err, size_t err_size);

/* A file of a repository at a revision. */
typedef struct llmr_hub_file {
    char *path;          /* relative path, checked safe */
    uint64_t size;       /* bytes of the file itself (for LFS files: the LFS object's size) */
    char oid[41];        /* git blob sha1 ("" if the hub did not give one) */
    int is_lfs;
    char sha256[65];     /* LFS object sha256 (lower-case hex) when is_lfs, else "" */
} llmr_hub_file;

/* Lists every file (not directories) of repo at rev, across all pages. *files_out is an array of
 * *n_out entries owned by the caller (llmr_hub_files_free). On error *files_out is NULL. */
llmr_hub_status llmr_hub_list_files(llmr_hub *hub, const char *repo, const char *rev, llmr_hub_file **files_out,
                                    size_t *n_out, char *err, size_t err_size);
void llmr_hub_files_free(llmr_hub_file *files, size_t n);

/* Resolves rev to its 40-hex commit sha (lower-case) in sha_out. */
llmr_hub_status llmr_hub_revision(llmr_hub *hub, const char *repo, const char *rev, char sha_out[41], char *err,
                                  size_t err_size);

/* Fetches a file into memory: *data_out (malloc'd, NUL-terminated, caller frees) of *len_out bytes.
 * Fails with ETOOBIG past max_bytes (0 = 16 MiB). */
llmr_hub_status llmr_hub_fetch(llmr_hub *hub, const char *repo, const char *rev, const char *path, size_t max_bytes,
                               char **data_out, size_t *len_out, char *err, size_t err_size);

/* Downloads a file to dest through dest.partial (resuming it), verifying against the listing's
 * entry when given as expect (or NULL): the size, and the sha256 of LFS files or the git blob sha1
 * (oid) of other files; a file that fails is removed (EVERIFY). opts: progress/cancel/extra headers (its
 * expected_* fields are overridden by expect when expect is given); may be NULL. */
llmr_hub_status llmr_hub_download(llmr_hub *hub, const char *repo, const char *rev, const char *path,
                                  const char *dest, const llmr_hub_file *expect,
                                  const llmr_httpc_download_opts *opts, llmr_httpc_download_result *result,
                                  char *err, size_t err_size);

/* Progress of a snapshot download: the file in flight (its bytes/total) and the whole snapshot's.
 * Return non-zero to abort (partials stay; a later call resumes). */
typedef int (*llmr_hub_progress_fn)(void *user, const char *path, uint64_t file_bytes, uint64_t file_total,
                                    uint64_t all_bytes, uint64_t all_total, double bytes_per_s);
/* Called once per file when it is in place: skipped = 1 if it was already complete (res is NULL then). */
typedef void (*llmr_hub_file_done_fn)(void *user, const llmr_hub_file *f, int skipped,
                                      const llmr_httpc_download_result *res);

typedef struct llmr_hub_snapshot_opts {
    const char *const *include;     /* NULL-terminated fnmatch globs over paths; NULL = every file */
    int trust_existing_size;        /* 1: a file already there with the right size counts as complete;
                                     * 0 (default): it must also match its sha256 / git sha1 */
    llmr_hub_progress_fn progress;
    llmr_hub_file_done_fn file_done;
    void *user;                     /* for both callbacks */
    const atomic_int *cancel;
} llmr_hub_snapshot_opts;

typedef struct llmr_hub_snapshot_result {
    char commit[41];                /* the commit every file came from */
    size_t files;                   /* files selected */
    size_t skipped;                 /* of which already complete */
    uint64_t bytes_total;           /* their total size */
    uint64_t bytes_downloaded;      /* bytes fetched by this call */
} llmr_hub_snapshot_result;

/* Downloads repo at rev into dir (dir/{path}, folders created), like huggingface_hub's
 * snapshot_download with local_dir: rev is pinned to its commit sha first so every file comes from
 * one snapshot; complete files are skipped, partial ones resumed; every file is verified against
 * the listing. Stops at the first failure (the message names the file). opts and out may be NULL. */
llmr_hub_status llmr_hub_snapshot_download(llmr_hub *hub, const char *repo, const char *rev, const char *dir,
                                           const llmr_hub_snapshot_opts *opts, llmr_hub_snapshot_result *out,
                                           char *err, size_t err_size);

/* 1 if the file at path is complete for entry f: its size, and unless size_only its sha256 (LFS)
 * or git blob sha1 (others) match. */
int llmr_hub_file_matches(const char *path, const llmr_hub_file *f, int size_only);

/* "{endpoint}/{repo}/resolve/{rev}/{path}" with rev and each path segment percent-encoded.
 * malloc'd; NULL on allocation failure or an invalid repo id / unsafe path. */
char *llmr_hub_resolve_url(const llmr_hub *hub, const char *repo, const char *rev, const char *path);

#endif
