/* model.h — the gpt-oss model on one GPU: weights, sessions (KV caches) and the forward pass.
 *
 * Load path: config.json -> shape plan -> every tensor checked (name, dtype, shape) before any device
 * memory is taken -> VRAM needed vs free (OOM_VRAM names both) -> one device arena -> tensors streamed
 * from the shard mmaps through two pinned staging buffers, shard by shard in file order (no host copy
 * of a whole tensor or shard). MXFP4 expert blocks/scales are copied packed, as stored.
 *
 * KV cache: one page pool per model sized at load (max_sessions x max_context worth of pages of
 * GPTOSS_KV_PAGE positions, kernels.h); each session has a block table (host + device copy) and takes
 * pages as it grows, returning them when freed. A session that cannot get a page fails its generate
 * with OOM_VRAM naming pages needed and free.
 *
 * Forward (forward.cu): per chunk of up to GPTOSS_CHUNK tokens, embed, then per layer RMSNorm -> QKV
 * (+bias) -> RoPE -> K,V into the session's pages -> attention with sinks -> o_proj (+bias, residual) ->
 * RMSNorm -> router -> top-4 -> grouped MXFP4 gate_up -> SwiGLU -> grouped MXFP4 down -> weighted
 * gather (residual); final RMSNorm and lm_head for the rows that need logits.
 * Decode in generate: the one-token forward is captured once per session as a CUDA graph and replayed
 * per token (token and position in device memory; only the sampled id comes back, through pinned memory
 * and one event). LLMR_GPTOSS_GRAPH=0 selects the launch-per-kernel path with a full sync per token.
 *
 * Threading (continuous batching): one engine thread per model owns the stream. generate() checks its
 * request, queues it and waits; the engine thread admits queued requests between decode steps
 * (prefill in chunks of GPTOSS_CHUNK while others decode), runs one decode step over every running
 * sequence (one row: the session's batch-1 CUDA graph; several: a batched step, each row at its own
 * position through its own block table), samples each row with its own parameters and RNG, and hands
 * tokens back; on_token runs on the generate thread. The debug path takes the same model mutex as a
 * scheduler iteration (serialised with it). Session create/destroy only allocate/free the session's own
 * buffers and pages, and stats reads atomics, so none waits for a running generate. */
#ifndef GPTOSS_CUDA_MODEL_H
#define GPTOSS_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "llmr_engine.h"
#ifdef __cplusplus
extern "C" { /* the common library is C */
#endif
#include "common/gptoss/config.h"
#ifdef __cplusplus
}
#endif

#define GPTOSS_INTERLEAVE_CHUNK 1024 /* prompt tokens per slice while other rows decode (LLMR_GPTOSS_INTERLEAVE) */
#define GPTOSS_CHUNK 4096           /* default tokens per prefill step (bounds the workspace; LLMR_GPTOSS_CHUNK) */
/* T = 1 decode: from this many keys the full-attention layers take gptoss_attention_rows (session 25, step 50; H100:
 * even with the short kernel at 128 keys, +2% at 256, +8% at 1,024, +25% at 4,096 against session 24's
 * gptoss_attention_decode from 1,536) */
#define GPTOSS_SPLIT_FROM 256
#define GPTOSS_MMA_PREFILL_MAX 640  /* prompt chunks up to this run their experts on gptoss_mxfp4_mma_stream */
/* the same with the expert cache (cuBLAS without a dequantization) or where gptoss_mxfp4_prompt_gemm takes every longer
 * chunk (no dequantization either) */
#define GPTOSS_MMA_PREFILL_MAX_CACHED 208
#define GPTOSS_DEFAULT_CONTEXT 8192 /* max_context when the host passes 0 (capped by the model's) */

typedef struct gptoss_model gptoss_model;
typedef struct gptoss_session gptoss_session;

/* Reads config.json and every tensor header; fills *bytes with the device memory a load would take
 * (weights + the KV page pool for max_sessions x max_context + workspace + per-session buffers). Nothing is allocated on the GPU. */
llmr_engine_status gptoss_model_estimate(const char *model_dir, uint32_t max_context, uint32_t max_sessions,
                                         uint64_t *bytes, char *err, size_t err_size);

/* Loads onto device `device` (>= 0). vram_budget 0 = no limit. */
llmr_engine_status gptoss_model_load(const char *model_dir, int device, uint64_t vram_budget, uint32_t max_context,
                                     uint32_t max_sessions, const llmr_host_api *host, gptoss_model **out,
                                     char *err, size_t err_size);
void gptoss_model_free(gptoss_model *m);

const gptoss_config *gptoss_model_config(const gptoss_model *m);
uint32_t gptoss_model_max_context(const gptoss_model *m);
void gptoss_model_stats(gptoss_model *m, llmr_engine_stats *out);
/* The engine thread's time accounting (debug_api.h gptoss_cuda_get_sched_stats); reset = 1 zeroes it after the
 * copy. Takes the model mutex, so it waits for the current scheduler iteration. */
struct gptoss_cuda_sched_stats;
void gptoss_model_sched_stats(gptoss_model *m, struct gptoss_cuda_sched_stats *out, int reset);

/* A session of up to max_context positions (0 = the model's); its KV pages come from the model's pool
 * on demand. */
llmr_engine_status gptoss_session_new(gptoss_model *m, uint32_t max_context, gptoss_session **out, char *err,
                                      size_t err_size);
void gptoss_session_free(gptoss_session *s);

/* The engine's generate (ABI semantics). */
llmr_engine_status gptoss_session_generate(gptoss_session *s, const llmr_generate_request *req, llmr_token_cb cb,
                                           void *user, llmr_generate_result *res, char *err, size_t err_size);
void gptoss_session_cancel(gptoss_session *s);

/* Parity/debug path: appends tokens[0..n) to the session and copies to host, for every one of the n
 * positions, whichever outputs are non-NULL: logits [n, vocab], the residual stream after the embedding
 * and after each layer hidden [(layers + 1), n, hidden], router logits [layers, n, experts].
 * force_topk [layers, n, 4] (or NULL): use these expert ids instead of the router's own top-4 (the
 * weights are still the softmax of this engine's router logits at those ids); a row of four -1 keeps
 * the router's own choice at that (layer, position). */
llmr_engine_status gptoss_session_eval_debug(gptoss_session *s, const int32_t *tokens, size_t n, float *logits,
                                             float *hidden, float *router_logits, const int32_t *force_topk,
                                             char *err, size_t err_size);

/* Debug path (debug_api.h gptoss_cuda_debug_step; scheduler.cu): one batched decode step of n (2..64) distinct
 * sessions, token toks[b] at ss[b]'s next position, through the scheduler's batched path for n rows; logits
 * [n, vocab] and router logits [layers, n, experts] to the host where non-NULL, and each row's distribution to its
 * session. No generate may run on the model meanwhile. */
llmr_engine_status gptoss_sched_debug_step(gptoss_session *const *ss, const int32_t *toks, int n, float *logits,
                                           float *router_logits, char *err, size_t err_size);

#endif
