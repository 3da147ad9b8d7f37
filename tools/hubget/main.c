/* llmr-hubget — lists or downloads a model repository from a Hugging Face hub (or llmr-hub) with
 * llmr's hub client: the command-line face of common/hub_client.h, used by e2e tests and operators.
 *
 *   llmr-hubget --repo org/name [--revision main] --list
 *   llmr-hubget --repo org/name [--revision main] --out DIR [--include GLOB]
 *
 * A download is llmr_hub_snapshot_download: the revision is pinned to its commit sha first (so every
 * file comes from one snapshot), any DIR/path.partial is resumed, every file is verified (size, and
 * sha256 for LFS files or git blob sha1 for the others), and files already complete are skipped.
 * Exit status: 0 ok, 1 a hub or download error (the message names the file, URL and cause), 2 usage. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hub_client.h"
#include "common/log.h"
#include "common/options.h"

static int on_progress(void *user, const char *path, uint64_t fb, uint64_t ft, uint64_t ab, uint64_t at,
                       double rate) {
    (void)user;
    fprintf(stderr, "\r%s: %llu/%llu bytes; all: %llu/%llu (%.1f MB/s)   ", path, (unsigned long long)fb,
            (unsigned long long)ft, (unsigned long long)ab, (unsigned long long)at, rate / 1e6);
    return 0;
}

static void on_file_done(void *user, const llmr_hub_file *f, int skipped, const llmr_httpc_download_result *r) {
    int *progress = user;
    if (*progress) fprintf(stderr, "\n");
    if (skipped) printf("%s: already complete\n", f->path);
    else
        printf("%s: %llu bytes, sha256 %s, attempts %d, resumed from %llu, restarts %d\n", f->path,
               (unsigned long long)r->bytes, r->sha256, r->attempts, (unsigned long long)r->resumed_from, r->restarts);
}

int main(int argc, char **argv) {
    const char *endpoint = NULL, *token = NULL, *repo = NULL, *rev = NULL, *out = NULL, *include = NULL;
    int list = 0, retries = 0, progress = 0, size_only = 0;
    llmr_option opts[] = {
        {"endpoint", "HF_ENDPOINT", LLMR_OPT_STRING, NULL, "hub URL (default https://huggingface.co)", &endpoint},
        {"token", "HF_TOKEN", LLMR_OPT_STRING, NULL, "bearer token", &token},
        {"repo", NULL, LLMR_OPT_STRING, NULL, "repository id org/name (required)", &repo},
        {"revision", NULL, LLMR_OPT_STRING, "main", "branch, tag or commit sha", &rev},
        {"list", NULL, LLMR_OPT_BOOL, "0", "print the files (path, size, lfs sha256) instead of downloading", &list},
        {"out", NULL, LLMR_OPT_STRING, NULL, "download into this folder", &out},
        {"include", NULL, LLMR_OPT_STRING, NULL, "only files whose path matches this glob", &include},
        {"trust-size", NULL, LLMR_OPT_BOOL, "0", "a file already there with the right size is complete (no re-hash)", &size_only},
        {"retries", NULL, LLMR_OPT_INT, "5", "retries per request after transport errors, 429 and 5xx", &retries},
        {"progress", NULL, LLMR_OPT_BOOL, "0", "show download progress on stderr", &progress},
    };
    int pr = llmr_options_parse("llmr-hubget", "Lists or downloads a repository from a Hugging Face hub (or llmr-hub).",
                                opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (pr != 0) return pr > 0 ? 0 : 2;
    llmr_log_init("hubget", LLMR_LOG_INFO, 0);
    setvbuf(stdout, NULL, _IOLBF, 0); /* result lines interleave sensibly with errors on stderr */
    if (!repo || (!list && !out)) {
        fprintf(stderr, "error: --repo and one of --list / --out are required (see --help)\n");
        return 2;
    }
    char err[2048];
    llmr_httpc_opts ho = {.retries = retries > 0 ? retries : -1, .backoff_ms = 100, .backoff_max_ms = 2000};
    llmr_hub_opts hopts = {.endpoint = endpoint, .token = token ? token : "", .http = &ho};
    llmr_hub *hub = llmr_hub_create(&hopts, err, sizeof err);
    if (!hub) { fprintf(stderr, "error: %s\n", err); return 2; }
    int rc = 0;
    if (list) {
        char sha[41];
        llmr_hub_file *files = NULL;
        size_t n = 0;
        llmr_hub_status st = llmr_hub_revision(hub, repo, rev, sha, err, sizeof err);
        if (st == LLMR_HUB_OK) st = llmr_hub_list_files(hub, repo, sha, &files, &n, err, sizeof err);
        if (st != LLMR_HUB_OK) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
        } else {
            printf("# %s@%s commit %s, %zu files\n", repo, rev, sha, n);
            for (size_t i = 0; i < n; i++)
                if (!include || fnmatch(include, files[i].path, 0) == 0)
                    printf("%s\t%llu\t%s\n", files[i].path, (unsigned long long)files[i].size,
                           files[i].is_lfs ? files[i].sha256 : "-");
        }
        llmr_hub_files_free(files, n);
    } else {
        const char *globs[2] = {include, NULL};
        llmr_hub_snapshot_opts so = {.include = include ? globs : NULL, .trust_existing_size = size_only,
                                     .progress = progress ? on_progress : NULL, .file_done = on_file_done,
                                     .user = &progress};
        llmr_hub_snapshot_result res;
        if (llmr_hub_snapshot_download(hub, repo, rev, out, &so, &res, err, sizeof err) != LLMR_HUB_OK) {
            if (progress) fprintf(stderr, "\n");
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
        } else {
            printf("# %s@%s commit %s: %zu files (%zu already complete), %llu bytes downloaded\n", repo, rev,
                   res.commit, res.files, res.skipped, (unsigned long long)res.bytes_downloaded);
        }
    }
    llmr_hub_destroy(hub);
    return rc;
}
