/* downloader.h — fetches a model's files into its folder, verified, resumable (issue 4 "Downloads").
 *
 * For each file of a manifest (node/manifest.h):
 *   - the bytes go to NAME.partial through common/http_client.h, which resumes with Range after any
 *     interruption (a dropped connection, a killed node: the .partial stays on disk and the next run
 *     continues from its end) and checks size and sha256 before an atomic rename to NAME;
 *   - a hash (or size) mismatch deletes the file and fetches it once more; a second mismatch fails
 *     the model with a message naming the file and both digests;
 *   - a server that sends more bytes than the manifest's size is cut off (counts as a mismatch);
 *   - an optional file that cannot be fetched is skipped with a warning; it never fails the model.
 * Before anything is fetched, the free space of the model folder's file system is compared with the
 * bytes still to fetch; the error names both numbers.
 * Progress (bytes done/total over all files, recent rate, ETA, current file) goes to a callback and,
 * every few seconds, to the log as "percent, MB/s, ETA".
 *
 * Up to opts->streams files of one call are fetched at once (the node's --download-streams, default
 * 4), each on a thread of its own with its own transfer: every guarantee above holds per file (its
 * own .partial, Range resume, hash, refetch). Progress sums the bytes of every file in flight. The
 * first required file that fails stops the others (their .partial files stay, so a later call
 * resumes them) and its message is the one returned; optional failures never stop anything.
 *
 * Files already complete on disk (NAME exists) are not fetched: llmr_dl_verify hashes them later (the
 * node's "verifying" state). Thread-safety: independent calls may run on different threads (the node
 * runs one model per worker thread, --max-parallel-downloads workers). */
#ifndef LLMR_NODE_DOWNLOADER_H
#define LLMR_NODE_DOWNLOADER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "node/manifest.h"
#include "node/models.h"

typedef enum llmr_dl_status {
    LLMR_DL_OK = 0,
    LLMR_DL_EINVAL,     /* bad argument, unsafe file name */
    LLMR_DL_ENOSPACE,   /* not enough free disk space */
    LLMR_DL_EVERIFY,    /* sha256/size mismatch, twice (download) or once (verify of a file on disk) */
    LLMR_DL_EFETCH,     /* the file could not be fetched (HTTP error, network), retries exhausted */
    LLMR_DL_EIO,        /* local file error */
    LLMR_DL_ECANCELLED, /* the cancel flag was raised */
} llmr_dl_status;

/* A static description ("not enough disk space", ...). Never NULL. */
const char *llmr_dl_strerror(llmr_dl_status st);

typedef void (*llmr_dl_progress_fn)(void *user, const llmr_model_progress *p);

typedef struct llmr_dl_opts {
    llmr_httpc *client;            /* required */
    const char *model_dir;         /* required: created (with parents) when absent */
    const char *label;             /* for log lines, e.g. the model id */
    const atomic_int *cancel;      /* optional */
    llmr_dl_progress_fn progress;  /* optional */
    void *progress_user;
    int log_interval_ms;           /* progress log period; 0 = 5000, < 0 = never */
    int streams;                   /* files fetched at once, 1..LLMR_DL_STREAMS_MAX; 0 = LLMR_DL_STREAMS_DEFAULT */
} llmr_dl_opts;

#define LLMR_DL_STREAMS_DEFAULT 4
#define LLMR_DL_STREAMS_MAX 16

/* What a fetch did. */
typedef struct llmr_dl_report {
    size_t fetched;             /* files downloaded now */
    size_t present;             /* files already complete on disk (left for llmr_dl_verify) */
    size_t optional_failed;     /* optional files skipped after a failure */
    size_t refetched;           /* files fetched a second time after a mismatch */
    uint64_t bytes_fetched;
    int peak_streams;           /* most files that were in flight at the same time */
    char warnings[1024];        /* "; "-separated, e.g. "optional artifact metal/model.bin skipped: HTTP 404" */
} llmr_dl_report;

/* Bytes still to fetch for files (size minus what NAME.partial already holds; 0 for complete files). */
uint64_t llmr_dl_bytes_needed(const char *model_dir, const llmr_manifest_file *files, size_t n);

/* Compares needed with the free space of dir's file system. 0, or -1 with
 * "not enough disk space in DIR: need N bytes (X GiB) for LABEL, F bytes (Y GiB) free" in err. */
int llmr_dl_space_check(const char *dir, uint64_t needed, const char *label, char *err, size_t err_size);

/* Fetches the files that are not yet complete in opts->model_dir (see above), up to opts->streams at
 * once. Returns OK, or the cause with a message naming the file (and for ENOSPACE both byte counts);
 * EINVAL when streams is out of range. rep may be NULL. */
llmr_dl_status llmr_dl_fetch(const llmr_dl_opts *opts, const llmr_manifest_file *files, size_t n, llmr_dl_report *rep,
                             char *err, size_t err_size);

/* Hashes model_dir/file->name and compares size and sha256. OK; EVERIFY (the file is deleted, the
 * message names it and both digests); EIO when it cannot be read. Progress is reported like a fetch. */
llmr_dl_status llmr_dl_verify(const llmr_dl_opts *opts, const llmr_manifest_file *file, char *err, size_t err_size);

#endif
