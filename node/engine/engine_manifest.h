/* engine_manifest.h — parse and validate an engine plugin's manifest.json.
 *
 * A plugin is a folder holding manifest.json and the shared library it names. The rules are those of
 * schema/engine-manifest.schema.json, enforced here by hand (the node has no JSON-Schema engine):
 * required fields, types, patterns, enums, uniqueness, no unknown fields. A rejection names the file
 * and the field at fault, e.g.
 *     build/engines/x/manifest.json: field "abi_version": expected "MAJOR.MINOR" string, got 3
 *
 * The parsed manifest is a plain immutable struct owned by the caller (free with
 * llmr_engine_manifest_free). It says nothing about the library itself: engine_host checks that. */
#ifndef LLMR_ENGINE_MANIFEST_H
#define LLMR_ENGINE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define LLMR_MANIFEST_MAX_BYTES (64 * 1024) /* a larger manifest.json is refused */

typedef struct llmr_manifest_artifact {
    char *name;      /* file name inside the official artifact repository, e.g. "metal/model.bin" */
    int priority;    /* 0..1000, higher wins */
} llmr_manifest_artifact;

typedef struct llmr_engine_manifest {
    char *id;                    /* "gptoss_cuda" */
    char *version;               /* semver */
    char *description;           /* "" when absent */
    uint32_t abi_version;        /* LLMR_ENGINE_ABI_VERSION encoding of "MAJOR.MINOR" */
    char **runtimes;    size_t n_runtimes;
    char **formats;     size_t n_formats;      /* may be 0 when n_artifacts > 0 */
    char **architectures; size_t n_architectures;
    char **gpu_backends; size_t n_gpu_backends;
    char *library;               /* file name, no '/' */
    llmr_manifest_artifact *artifacts; size_t n_artifacts;
    int min_cc_major, min_cc_minor; /* -1, -1 when absent */
    int priority;                /* 0 when absent */
    char *dir;                   /* folder of the manifest (as given to _load), never NULL */
    char *library_path;          /* dir + "/" + library */
} llmr_engine_manifest;

/* Parses and validates manifest text. `dir` is the plugin folder (copied; used for library_path) and
 * `origin` names the text in messages (usually the file path). On success returns 0 and *out owns a
 * new manifest. On failure returns -1, leaves *out untouched and writes "<origin>: field "<name>":
 * <why>" (or "<origin>: <why>" for whole-document errors) into err. Never crashes on any input. */
int llmr_engine_manifest_parse(const char *text, size_t len, const char *dir, const char *origin,
                               llmr_engine_manifest **out, char *err, size_t err_size);

/* Reads DIR/manifest.json (at most LLMR_MANIFEST_MAX_BYTES) and parses it as above. */
int llmr_engine_manifest_load(const char *dir, llmr_engine_manifest **out, char *err, size_t err_size);

/* Frees a manifest. Accepts NULL. */
void llmr_engine_manifest_free(llmr_engine_manifest *m);

/* Membership helpers over the manifest's string lists (exact, case-sensitive match). */
int llmr_engine_manifest_has_runtime(const llmr_engine_manifest *m, const char *runtime);
int llmr_engine_manifest_has_format(const llmr_engine_manifest *m, const char *format);
int llmr_engine_manifest_has_architecture(const llmr_engine_manifest *m, const char *arch);
int llmr_engine_manifest_has_backend(const llmr_engine_manifest *m, const char *backend);

/* Parses "MAJOR.MINOR" (each 1 to 4 digits) into the ABI encoding. Returns 0 on success, -1 otherwise. */
int llmr_abi_version_parse(const char *s, uint32_t *out);

#endif
