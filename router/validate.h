/* validate.h — model registration, decided by pure functions over a hub listing.
 *
 * router_register_parse checks the request body (types, repo name, revision); router_validate_register
 * then checks the repo at that revision through a router_hub (see hub.h) and either builds the
 * registration record or names exactly what is wrong. Neither touches the database or the network
 * except through the router_hub it is given, so Check tests drive them with in-memory listings.
 *
 * Failure verdicts (status, code):
 *   400 invalid_request / invalid_type / invalid_repo / invalid_revision   the body itself
 *   400 format_required        no format, and the repo holds both top-level .safetensors (or an
 *                              index) and .gguf files (at any depth)
 *   400 invalid_format         format other than safetensors / gguf
 *   400 missing_required_file  config.json / tokenizer.json / any weights absent; "missing":[names]
 *   400 invalid_config         config.json is not a JSON object naming architectures or model_type
 *   400 invalid_index          model.safetensors.index.json unreadable or without a weight_map
 *   400 unsafe_file_name       a weight_map shard name fails the path-safety check; "files":[names]
 *   400 missing_shard          weight_map names shards absent from the listing; "missing":[names]
 *   400 ambiguous_artifacts    several top-level .safetensors and no index, or several .gguf and no
 *                              filename; "files":[names]
 *   400 invalid_chat_template  the template does not parse; "line", "column", "source"
 *   404 repo_not_found         repo or revision absent on the hub
 *   403 repo_access_denied     gated/private repo the router's hub token cannot read
 *   502 hub_unreachable / hub_error   the hub could not answer / answered nonsense (URL + cause)
 * Success: 201 with the record (see docs/router.md). Unknown architectures, a VRAM estimate that
 * cannot be computed, and artifacts left out are warnings in the record, never errors. */
#ifndef ROUTER_VALIDATE_H
#define ROUTER_VALIDATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "router/artifacts.h"
#include "router/hub.h"

#define ROUTER_REPO_PART_MAX 96
#define ROUTER_REVISION_MAX 255

typedef struct router_register_req {
    char *repo;          /* as given ("openai/gpt-oss-20b") */
    char *id;            /* lower-cased repo */
    char *format;        /* "safetensors", "gguf", or NULL when not given */
    char *revision;      /* default "main" */
    char *chat_template; /* NULL when not given */
    char *display_name;  /* NULL when not given */
    char *filename;      /* gguf: which .gguf; NULL when not given */
} router_register_req;

typedef struct router_verdict {
    int status;          /* 201 on success, else the HTTP error status */
    char code[48];       /* error code ("" on success) */
    char param[32];      /* offending request field, or "" */
    char message[2048];  /* human message naming the cause */
    json_t *extra;       /* fields merged into "error" (missing, files, line...), or NULL */
    json_t *record;      /* the registration record on success (created_at left for the caller) */
    char *chat_template; /* the template text chosen on success; NULL when the default applies */
} router_verdict;

/* Frees what the verdict / request hold and zeroes them. Accept NULL. */
void router_verdict_free(router_verdict *v);
void router_register_req_free(router_register_req *r);

/* Checks a repo name: OWNER/NAME, each part 1..96 of [A-Za-z0-9._-], not starting or ending with
 * '.' or '-', no "..". 1 if valid, else 0 with the rule broken in err. */
int router_repo_name_valid(const char *repo, char *err, size_t err_size);

/* Parses a registration body. 0 with *out filled, or -1 with a 400 verdict in *v. */
int router_register_parse(json_t *body, router_register_req *out, router_verdict *v);

/* Parses a chat template. Returns 0 if it parses, else -1 with the 1-based position in *line /
 * *column (0 when unknown) and the parser's message in err. */
typedef int (*router_template_check_fn)(const char *src, size_t len, int *line, int *column, char *err,
                                        size_t err_size);

typedef struct router_validate_env {
    const router_hub *hub;
    const router_artifacts *artifacts;  /* may be NULL: no official artifacts */
    router_template_check_fn check_template; /* NULL: templates are not parsed (a warning says so) */
    size_t max_small_file;              /* largest non-LFS file fetched for hashing; 0 = 64 MiB */
} router_validate_env;

/* Validates req against the hub and fills *v (zeroed first). Returns v->status. */
int router_validate_register(const router_validate_env *env, const router_register_req *req, router_verdict *v);

/* The manifest nodes download (schema/model-manifest.schema.json) from a stored record. New ref. */
json_t *router_manifest_from_record(json_t *record);

/* Runtime hint for a config.json architecture ("GptOssForCausalLM" -> "gptoss"), or NULL if unknown. */
const char *router_runtime_for_architecture(const char *arch, const char *model_type);

#endif
