/* llmr-hubget — lists or downloads a model repository from a Hugging Face hub (or llmr-hub) with
 * llmr's hub client: the command-line face of common/hub_client.h, used by e2e tests and operators.
 *
 *   llmr-hubget --repo org/name [--revision main] --list
 *   llmr-hubget --repo org/name [--revision main] --out DIR [--include GLOB]
 *
 * A download pins the revision to its commit sha first (so every file comes from one snapshot),
 * resumes any DIR/path.partial, verifies sizes and LFS sha256s, and skips files already complete.
 * Exit status: 0 ok, 1 a hub or download error (the message names the file, URL and cause), 2 usage. */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/hub_client.h"
#include "common/log.h"
#include "common/options.h"
#include "common/sha256.h"

static int mkdir_parents(const char *path) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

/* A file already in place with the listed size (and sha256 for LFS files) is not fetched again. */
static int already_complete(const char *dest, const llmr_hub_file *f) {
    struct stat sb;
    if (stat(dest, &sb) != 0 || (uint64_t)sb.st_size != f->size) return 0;
    if (!f->is_lfs) return 1;
    char hex[65], err[256];
    return llmr_sha256_file(dest, hex, NULL, NULL, err, sizeof err) == 0 && strcmp(hex, f->sha256) == 0;
}

static int show_progress;

static int on_progress(void *user, uint64_t bytes, uint64_t total, double rate) {
    const char *path = user;
    if (show_progress)
        fprintf(stderr, "\r%s: %llu/%llu bytes (%.1f MB/s)   ", path, (unsigned long long)bytes,
                (unsigned long long)total, rate / 1e6);
    return 0;
}

int main(int argc, char **argv) {
    const char *endpoint = NULL, *token = NULL, *repo = NULL, *rev = NULL, *out = NULL, *include = NULL;
    int list = 0, retries = 0;
    llmr_option opts[] = {
        {"endpoint", "HF_ENDPOINT", LLMR_OPT_STRING, NULL, "hub URL (default https://huggingface.co)", &endpoint},
        {"token", "HF_TOKEN", LLMR_OPT_STRING, NULL, "bearer token", &token},
        {"repo", NULL, LLMR_OPT_STRING, NULL, "repository id org/name (required)", &repo},
        {"revision", NULL, LLMR_OPT_STRING, "main", "branch, tag or commit sha", &rev},
        {"list", NULL, LLMR_OPT_BOOL, "0", "print the files (path, size, lfs sha256) instead of downloading", &list},
        {"out", NULL, LLMR_OPT_STRING, NULL, "download into this folder", &out},
        {"include", NULL, LLMR_OPT_STRING, NULL, "only files whose path matches this glob", &include},
        {"retries", NULL, LLMR_OPT_INT, "5", "retries per request after transport errors, 429 and 5xx", &retries},
        {"progress", NULL, LLMR_OPT_BOOL, "0", "show download progress on stderr", &show_progress},
    };
    int pr = llmr_options_parse("llmr-hubget", "Lists or downloads a repository from a Hugging Face hub (or llmr-hub).",
                                opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (pr != 0) return pr > 0 ? 0 : 2;
    llmr_log_init("hubget", LLMR_LOG_INFO, 0);
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines interleave sensibly with errors on stderr */
    if (!repo || (!list && !out)) { fprintf(stderr, "error: --repo and one of --list / --out are required (see --help)\n"); return 2; }
    char err[2048];
    llmr_httpc_opts ho = {.retries = retries > 0 ? retries : -1, .backoff_ms = 100, .backoff_max_ms = 2000};
    llmr_hub_opts hopts = {.endpoint = endpoint, .token = token ? token : "", .http = &ho};
    llmr_hub *hub = llmr_hub_create(&hopts, err, sizeof err);
    if (!hub) { fprintf(stderr, "error: %s\n", err); return 2; }
    char sha[41];
    llmr_hub_file *files = NULL;
    size_t n = 0;
    int rc = 1;
    llmr_hub_status st = llmr_hub_revision(hub, repo, rev, sha, err, sizeof err);
    if (st == LLMR_HUB_OK) st = llmr_hub_list_files(hub, repo, sha, &files, &n, err, sizeof err);
    if (st != LLMR_HUB_OK) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    if (list) {
        printf("# %s@%s commit %s, %zu files\n", repo, rev, sha, n);
        for (size_t i = 0; i < n; i++)
            if (!include || fnmatch(include, files[i].path, 0) == 0)
                printf("%s\t%llu\t%s\n", files[i].path, (unsigned long long)files[i].size,
                       files[i].is_lfs ? files[i].sha256 : "-");
        rc = 0;
        goto done;
    }
    rc = 0;
    for (size_t i = 0; i < n; i++) {
        llmr_hub_file *f = &files[i];
        if (include && fnmatch(include, f->path, 0) != 0) continue;
        char dest[PATH_MAX];
        if (snprintf(dest, sizeof dest, "%s/%s", out, f->path) >= (int)sizeof dest || mkdir_parents(dest) != 0) {
            fprintf(stderr, "error: %s/%s: cannot create the folder: %s\n", out, f->path, strerror(errno));
            rc = 1;
            break;
        }
        if (already_complete(dest, f)) {
            printf("%s: already complete\n", f->path);
            continue;
        }
        llmr_httpc_download_opts dopt = {.expected_size = -1, .progress = on_progress, .progress_user = f->path};
        llmr_httpc_download_result res;
        st = llmr_hub_download(hub, repo, sha, f->path, dest, f, &dopt, &res, err, sizeof err);
        if (show_progress) fprintf(stderr, "\n");
        if (st != LLMR_HUB_OK) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
            break;
        }
        printf("%s: %llu bytes, sha256 %s, attempts %d, resumed from %llu, restarts %d\n", f->path,
               (unsigned long long)res.bytes, res.sha256, res.attempts, (unsigned long long)res.resumed_from,
               res.restarts);
    }
done:
    llmr_hub_files_free(files, n);
    llmr_hub_destroy(hub);
    return rc;
}
