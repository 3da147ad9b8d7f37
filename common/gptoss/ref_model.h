/* gptoss/ref_model.h — the C reference forward pass of gpt-oss: fp32, plain loops, one token at a time.
 *
 * It is the oracle for CI (where there is no GPU) and the core of the `gptoss_ref` engine plugin
 * (engines/gptoss_ref). It is never a production CPU path: every weight becomes fp32 in RAM (the MXFP4
 * experts dequantized once at load), so only small checkpoints fit (llmr-mkmodel tiny/small).
 *
 * The math, top to bottom (shared reference gpt-oss.md §1.4–1.8), for a token at position p:
 *   x = embed[token]
 *   per layer: h = RMSNorm(x)·w_in; q,k,v = h·Wᵀ + b; YaRN NeoX RoPE on q and k (cos/sin × attention
 *     factor); attention over keys 0..p (sliding layers: p-127..p) with scale 1/sqrt(head_dim) and one
 *     sink logit per head in the softmax denominator; GQA (query head h reads KV head h / (heads/kv));
 *     x += o_proj(attn) + b_o;
 *     h = RMSNorm(x)·w_post; router logits = h·Wrᵀ + br; top-k experts, softmax over those k only;
 *     per expert: gu = W_gu·h + b_gu (gate = even rows, up = odd rows), a = clamped SwiGLU, y = W_d·a + b_d;
 *     x += Σ w_k y_k
 *   logits = lm_head · RMSNorm(x)·w_final
 *
 * Threading: a model is read-only after load and may be shared by states used on different threads;
 * one state is used by one thread at a time. */
#ifndef LLMR_GPTOSS_REF_MODEL_H
#define LLMR_GPTOSS_REF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/gptoss/config.h"

typedef struct gptoss_ref_model gptoss_ref_model; /* opaque: fp32 weights */
typedef struct gptoss_ref_state gptoss_ref_state; /* opaque: one sequence's KV cache and scratch */

/* Host RAM the fp32 weights of this config need (bytes; the bf16 embedding table stays mmapped). */
uint64_t gptoss_ref_weight_bytes(const gptoss_config *c);

/* Loads the checkpoint in dir (config.json + safetensors through common/checkpoint.h). threads: workers
 * for the large matrix-vector products (<= 0: 1). ram_limit: refuse with OOM_RAM when the fp32 weights
 * need more bytes than this (0: the MemAvailable of /proc/meminfo).
 * Returns an llmr_engine_status: OK; LOAD_FAILED (no config.json / no shards, unreadable folder);
 * UNSUPPORTED (a config this reference does not implement); MODEL_CORRUPT (a tensor missing or of the
 * wrong dtype/shape, named with its shard); OOM_RAM (bytes needed vs available in err).
 * *out is set only on OK. */
int gptoss_ref_load(const char *dir, int threads, uint64_t ram_limit, gptoss_ref_model **out, char *err, size_t err_size);
void gptoss_ref_free(gptoss_ref_model *m); /* accepts NULL */

const gptoss_config *gptoss_ref_config(const gptoss_ref_model *m);
uint64_t gptoss_ref_ram_bytes(const gptoss_ref_model *m); /* bytes of fp32 weights held */

/* A new empty sequence that may grow to max_context tokens (memory is allocated as it grows).
 * NULL when out of memory. */
gptoss_ref_state *gptoss_ref_state_create(const gptoss_ref_model *m, int max_context);
void gptoss_ref_state_destroy(gptoss_ref_state *s); /* accepts NULL */
int gptoss_ref_state_len(const gptoss_ref_state *s);         /* tokens held */
int gptoss_ref_state_capacity(const gptoss_ref_state *s);    /* max_context */
uint64_t gptoss_ref_state_bytes(const gptoss_ref_state *s);  /* KV + scratch bytes held */

/* Optional per-token trace of the internals, for parity harnesses (each pointer may be NULL). */
typedef struct gptoss_ref_trace {
    float *layer_out;     /* [num_layers, hidden]: residual stream after each layer (before the final norm) */
    float *router_logits; /* [num_layers, num_experts] */
    int *experts;         /* [num_layers, experts_per_token]: chosen experts, by logit descending */
    float *attn_sink_mass;/* [num_layers, num_heads]: probability the softmax gave to the sink */
} gptoss_ref_trace;

/* Appends token at the next position and runs the layers. logits_out (vocab floats) receives the
 * next-token logits when not NULL (the lm_head is skipped otherwise: it dominates the cost).
 * Returns 0, or -1 with the cause in err (token id out of range, context full, out of memory); the
 * state is unchanged on failure. */
int gptoss_ref_forward(const gptoss_ref_model *m, gptoss_ref_state *s, int32_t token, float *logits_out,
                       gptoss_ref_trace *trace, char *err, size_t err_size);

#endif
