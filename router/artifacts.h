/* artifacts.h — official optimized GPU artifacts (FR-008/FR-009) and the artifact allowlist.
 *
 * supported_models.json (schema/supported-models.schema.json; the repo ships one at its root) lists,
 * per model id, files published for a GPU backend, e.g. for openai/gpt-oss-20b the Metal weights
 * metal/model.bin of openai/gpt-oss-20b, stored by nodes as model.metal.bin. At registration each
 * listed artifact enters the manifest only if its source repo matches an allowlist glob
 * (--artifact-allowlist, default "openai/ *,nvidia/ *" without the spaces) and the file exists in that
 * repo's listing; otherwise it is left out with a warning. Artifacts are an execution cache: the
 * registered format stays safetensors. */
#ifndef ROUTER_ARTIFACTS_H
#define ROUTER_ARTIFACTS_H

#include <stddef.h>

typedef struct router_artifact {
    char *backend, *source_repo, *path, *name;
} router_artifact;

typedef struct router_supported_model {
    char *id;       /* lower-cased repo */
    char *runtime;  /* hint, may be NULL */
    router_artifact *artifacts;
    size_t n_artifacts;
} router_supported_model;

typedef struct router_artifacts router_artifacts; /* opaque: the catalogue plus the allowlist */

/* Parses a supported_models document held in memory (name is used in messages) and an allowlist
 * ("glob,glob,..."; empty = nothing allowed). NULL on error with the cause (file, JSON path, rule)
 * in err. Every name in the file must pass the path-safety check. */
router_artifacts *router_artifacts_parse(const char *name, const char *json_text, size_t len, const char *allowlist,
                                         char *err, size_t err_size);
/* Reads and parses a file. */
router_artifacts *router_artifacts_load(const char *path, const char *allowlist, char *err, size_t err_size);
/* Accepts NULL. */
void router_artifacts_destroy(router_artifacts *a);

/* The catalogue entry for a model id (compared lower-cased), or NULL. */
const router_supported_model *router_artifacts_find(const router_artifacts *a, const char *model_id);
/* 1 if repo matches one allowlist glob (fnmatch, case-insensitive), else 0. */
int router_artifacts_allowed(const router_artifacts *a, const char *repo);
/* The allowlist as given (for messages). */
const char *router_artifacts_allowlist(const router_artifacts *a);

#endif
