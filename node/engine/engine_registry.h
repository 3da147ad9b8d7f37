/* engine_registry.h — which engine runs a model (FR-004, FR-005, FR-008).
 *
 * Input: the ModelDescriptor (registered format + config.json architecture + runtime), the official
 * artifacts present on this node, and the node's backend. Output: one engine, plus the artifact it
 * should use, or "unsupported" with a reason an operator can act on.
 *
 * Rules, in order:
 *  1. An engine is a candidate when its manifest lists the model's architecture, its runtime (unless the
 *     descriptor's runtime is NULL, "" or "unknown"), and the node's backend, and the GPU meets its
 *     min_compute_capability (cuda only; unknown capability passes).
 *  2. Among candidates, one that can use an official artifact present on the node wins (FR-008):
 *     highest artifact priority, then engine priority, then smallest id (deterministic).
 *  3. Otherwise a candidate whose formats include the registered format: highest engine priority, then
 *     smallest id.
 *  4. Otherwise: unsupported; the reason lists why each engine was passed over.
 * Pure functions: no I/O, no locks; safe from any thread. */
#ifndef LLMR_ENGINE_REGISTRY_H
#define LLMR_ENGINE_REGISTRY_H

#include "llmr_engine.h"
#include "node/engine/engine_manifest.h"

#include <stddef.h>

/* An official artifact available on the node: its name as manifests list it, and where it is. */
typedef struct llmr_artifact {
    const char *name;   /* "metal/model.bin" */
    const char *path;   /* absolute path on this node */
} llmr_artifact;

/* What the node runs on. */
typedef struct llmr_node_backend {
    const char *backend;     /* "cuda", "metal", "rocm" or "cpu" */
    int cc_major, cc_minor;  /* compute capability of the GPU used; -1 when unknown */
} llmr_node_backend;

typedef struct llmr_engine_choice {
    size_t index;                 /* position of the chosen manifest in the input array */
    const llmr_engine_manifest *manifest; /* borrowed from the input array */
    const llmr_artifact *artifact; /* borrowed from the input; NULL when running from the model folder */
} llmr_engine_choice;

/* Chooses an engine. Returns 0 and fills *out, or -1 with the reason in `reason` (never empty), e.g.
 *   no engine for openai/gpt-oss-20b (runtime gptoss, architecture GptOssForCausalLM, format gguf,
 *   backend cuda): gptoss_cuda: format gguf not in [safetensors]; gptoss_ref: ...
 * Manifests may contain NULL entries (skipped). */
int llmr_engine_registry_select(const llmr_engine_manifest *const *manifests, size_t n,
                                const llmr_model_descriptor *desc, const llmr_artifact *artifacts, size_t n_artifacts,
                                const llmr_node_backend *backend, llmr_engine_choice *out,
                                char *reason, size_t reason_size);

#endif
