/* model_storage.h — ModelStorage: validates a downloaded snapshot and describes it for the engines.
 *
 * A snapshot is one folder (models_dir/<model id>/) holding what the router's manifest listed.
 * Validation, for format "safetensors":
 *   - config.json and tokenizer.json present and parseable JSON (config.json an object naming
 *     `architectures` or `model_type`);
 *   - with model.safetensors.index.json: every shard of weight_map present (all missing shards are
 *     named at once), and each shard's safetensors header consistent with the index: every tensor of
 *     weight_map found in the shard it names, no tensor of a shard left out (common/checkpoint.h);
 *   - without an index: exactly one *.safetensors file.
 * For format "gguf": config-free; exactly one *.gguf file.
 *
 * The result is a ModelDescriptor built only from the registered format and config.json:
 * architecture = config.json architectures[0] (else model_type), runtime from the architecture
 * ("GptOssForCausalLM" -> "gptoss", anything else "unknown"). It never reads or writes a
 * metadata.json: nothing but the registered facts and the checkpoint itself decide what runs. */
#ifndef LLMR_NODE_MODEL_STORAGE_H
#define LLMR_NODE_MODEL_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "llmr_engine.h"

typedef enum llmr_storage_status {
    LLMR_STORAGE_OK = 0,
    LLMR_STORAGE_EINVAL,          /* bad argument (NULL, unknown format) */
    LLMR_STORAGE_ENOMEM,
    LLMR_STORAGE_EMISSING_FILE,   /* config.json / tokenizer.json / the weights file absent */
    LLMR_STORAGE_EBAD_JSON,       /* config.json, tokenizer.json or the index is not valid JSON */
    LLMR_STORAGE_EBAD_CONFIG,     /* config.json names neither architectures nor model_type */
    LLMR_STORAGE_EMISSING_SHARD,  /* shards named by the index are absent */
    LLMR_STORAGE_EINCONSISTENT,   /* a shard's header disagrees with the index, or is malformed */
    LLMR_STORAGE_EAMBIGUOUS,      /* several weight files and no index */
    LLMR_STORAGE_EIO,             /* a file or folder could not be removed, or a link was refused */
} llmr_storage_status;

/* A static description of a status ("shard missing", ...). Never NULL. */
const char *llmr_storage_strerror(llmr_storage_status st);

/* An official artifact present on the node (from the manifest, downloaded and verified). */
typedef struct llmr_storage_artifact {
    char *name;     /* as the manifest names it, e.g. "metal/model.bin" */
    char *path;     /* absolute path */
    char *backend;  /* "metal", "cuda", ... */
} llmr_storage_artifact;

/* The validated snapshot. Owned by the caller; free with llmr_storage_model_free. */
typedef struct llmr_storage_model {
    char *id, *format, *runtime, *architecture, *model_dir;
    char **files;                  /* relative names of the snapshot's checked files */
    size_t n_files;
    llmr_storage_artifact *artifacts;
    size_t n_artifacts;
    llmr_model_descriptor desc;    /* the engine ABI view; its strings point into this struct */
} llmr_storage_model;

/* An artifact the caller says is present (copied). */
typedef struct llmr_storage_artifact_in {
    const char *name, *path, *backend;
} llmr_storage_artifact_in;

/* Validates model_dir as a snapshot of model `id` registered with `format`. On success returns OK
 * and *out owns the description (desc.artifact_path stays NULL: the engine registry picks one). On
 * failure returns the status with a message naming the file, shard or tensor at fault, e.g.
 *   "missing shard(s) model-00002-of-00003.safetensors (named by model.safetensors.index.json)". */
llmr_storage_status llmr_storage_validate(const char *model_dir, const char *id, const char *format,
                                          const llmr_storage_artifact_in *artifacts, size_t n_artifacts,
                                          llmr_storage_model **out, char *err, size_t err_size);

/* Frees a description. Accepts NULL. */
void llmr_storage_model_free(llmr_storage_model *m);

/* What llmr_storage_remove deleted. */
typedef struct llmr_storage_removal {
    uint64_t bytes;   /* sizes of the regular files removed (.partial files included) */
    size_t files;     /* entries other than folders removed (symbolic links count, as links) */
    size_t dirs;      /* folders removed (the snapshot's, and parents id left empty) */
} llmr_storage_removal;

/* Deletes models_dir/<id>: a model's snapshot, complete or partly downloaded, and then the parent
 * folders of id that it leaves empty (models_dir/org for "org/name"), never models_dir itself.
 * Safe by construction, for a folder the node owns but an operator may have touched:
 *   - id must be a safe relative path (common/path_safety.h: no "..", no absolute path);
 *   - each folder is opened relative to its parent with O_NOFOLLOW, so a symbolic link anywhere
 *     (the snapshot folder itself, a file or folder inside it) is removed as a link, never followed;
 *     a link among id's parents ("org" -> elsewhere) is refused and nothing is removed;
 *   - a folder on another file system than models_dir (a mount point inside) is refused.
 * Nothing outside models_dir is ever touched. Returns OK (also when the folder does not exist:
 * *out all zero), EINVAL for a bad argument or id, EIO naming the path and the cause when something
 * could not be removed (what could be is removed; *out counts it). out may be NULL. */
llmr_storage_status llmr_storage_remove(const char *models_dir, const char *id, llmr_storage_removal *out, char *err,
                                        size_t err_size);

/* The runtime id for a config.json architecture: "gptoss" for GptOssForCausalLM, else "unknown". */
const char *llmr_storage_runtime_for(const char *architecture);

#endif
