/* manifest.h — a model manifest as the router serves it (schema/model-manifest.schema.json):
 * GET /v0/models/registry/{repo}/manifest.json, what a node downloads for a model.
 *
 * Parsing checks what the node relies on before it touches the disk: required fields and types,
 * sha256 as 64 lower-case hex digits, sizes non-negative, and every file name safe to join to the
 * model folder (common/path_safety.h) and unique. Unknown fields are ignored (the router may extend
 * the format compatibly). */
#ifndef LLMR_NODE_MANIFEST_H
#define LLMR_NODE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct llmr_manifest_file {
    char *name;        /* relative path inside the model folder, e.g. "model-00001-of-00003.safetensors" */
    char *url;         /* where to fetch it (the hub's resolve URL pinned to the commit) */
    uint64_t size;
    char sha256[65];
    int optional;      /* 1: a failure to fetch it never fails the model */
    char *backend;     /* artifacts only: "metal", "cuda", ...; NULL for snapshot files */
    char *source_repo; /* artifacts only */
} llmr_manifest_file;

typedef struct llmr_manifest {
    char *id, *format, *revision, *commit, *runtime;
    char *architecture;            /* NULL when the router did not say */
    llmr_manifest_file *files;     size_t n_files;
    llmr_manifest_file *artifacts; size_t n_artifacts;
} llmr_manifest;

/* Parses manifest JSON text. Returns 0 and *out (caller frees with llmr_manifest_free), or -1 with
 * the field at fault in err ("files[2].sha256: expected 64 lower-case hex digits"). */
int llmr_manifest_parse(const char *text, size_t len, llmr_manifest **out, char *err, size_t err_size);

/* Frees a manifest. Accepts NULL. */
void llmr_manifest_free(llmr_manifest *m);

/* Total bytes of the snapshot files (artifacts excluded). */
uint64_t llmr_manifest_total_size(const llmr_manifest *m);

#endif
