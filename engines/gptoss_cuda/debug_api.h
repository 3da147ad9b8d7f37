/* debug_api.h — the extra symbols libgptoss_cuda.so exports for its test harnesses and benchmarks.
 *
 *     llmr_engine_status gptoss_cuda_debug_eval(llmr_engine_session *s, const int32_t *tokens, size_t n,
 *                                               float *logits, float *hidden, float *router_logits,
 *                                               const int32_t *force_topk, char *err, size_t err_size);
 *
 * Appends tokens[0..n) to a session made by the engine's session_create and copies out, for each of
 * the n positions, whichever of these are non-NULL:
 *   logits        [n, vocab]                    final logits,
 *   hidden        [layers + 1, n, hidden_size]  residual stream after the embedding, then after each layer,
 *   router_logits [layers, n, experts]          router logits (before top-4) of each layer.
 * force_topk [layers, n, 4], when non-NULL, replaces the router's top-4 choice by these expert ids (the
 * weights stay the softmax of this engine's logits at them): parity runs use the reference's choices to
 * separate arithmetic differences from expert flips at router near-ties. A row of four -1 leaves that
 * (layer, position) to the router (bit for bit its own choice and weights), so a replay can force one
 * decision and let everything downstream of it follow.
 * The forward is the engine's prompt path as it serves (what the parity driver measures), unless the model
 * was loaded with LLMR_GPTOSS_DEBUG_PRECISE=1: then every chunk's experts run at fp32 level (the tensor-core
 * kernel with 3 activation parts) instead of one fp16 part from 209 tokens, for tools that use the replay to
 * judge fp32-level differences between two other paths (gptoss_batching's near-tie checks).
 * Not part of the engine ABI: tools find it with dlsym(GPTOSS_CUDA_DEBUG_EVAL_SYMBOL). */
#ifndef GPTOSS_CUDA_DEBUG_API_H
#define GPTOSS_CUDA_DEBUG_API_H

#include "llmr_engine.h"

#define GPTOSS_CUDA_DEBUG_EVAL_SYMBOL "gptoss_cuda_debug_eval"
typedef llmr_engine_status (*gptoss_cuda_debug_eval_fn)(llmr_engine_session *s, const int32_t *tokens, size_t n,
                                                        float *logits, float *hidden, float *router_logits,
                                                        const int32_t *force_topk, char *err, size_t err_size);

/* One batched decode step, as the engine's scheduler runs it for n rows (2..64): token tokens[b] appended to
 * session s[b] (n distinct sessions of one model) at its next position, all rows in one forward through each
 * session's own block table. Where non-NULL, logits [n, vocab] gets each row's final logits and router_logits
 * [layers, n, experts] each layer's router logits; each session keeps its row's distribution as its own (a
 * generate with no new tokens samples from it). No generate may run on the model meanwhile. Tools use it to
 * check a chosen composition of rows against each row alone. */
#define GPTOSS_CUDA_DEBUG_STEP_SYMBOL "gptoss_cuda_debug_step"
typedef llmr_engine_status (*gptoss_cuda_debug_step_fn)(llmr_engine_session *const *s, const int32_t *tokens, int n,
                                                        float *logits, float *router_logits, char *err,
                                                        size_t err_size);
/* Device-to-device copy bandwidth of device `device` in GB/s (bytes read + bytes written per second), the
 * median of `reps` timed copies of `bytes` bytes: the roofline for the decode benchmark. */
#define GPTOSS_CUDA_COPY_BW_SYMBOL "gptoss_cuda_copy_bandwidth"
typedef llmr_engine_status (*gptoss_cuda_copy_bandwidth_fn)(int device, uint64_t bytes, int reps, double *gbps,
                                                            char *err, size_t err_size);

/* What the engine thread has done since load (or the last reset): GPU time of prefill slices and of
 * decode steps by batch size, sampling, and the host's waits, so a benchmark can say where its wall
 * time went. GPU times come from CUDA events around each piece of work (an event pair per prefill slice,
 * step and sampling; on unless LLMR_GPTOSS_SCHED_STATS=0, ~µs of host time each; all zero when off).
 * With LLMR_GPTOSS_BATCH_PROFILE=1 the batched
 * steps also get an event after each part of every layer (cat_ms; costs host time per step).
 * Buckets of rows per step: 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64. */
#define GPTOSS_CUDA_SCHED_STATS_SYMBOL "gptoss_cuda_get_sched_stats"
#define GPTOSS_CUDA_STAT_BUCKETS 7
#define GPTOSS_CUDA_STAT_CATS 6 /* embed+norms, q/k/v+rope+kv store, attention, o_proj, MoE, final norm+lm_head */
typedef struct gptoss_cuda_sched_stats {
    uint64_t prefill_slices, prefill_tokens;
    double prefill_ms;                                 /* GPU time of the prefill forwards */
    uint64_t steps[GPTOSS_CUDA_STAT_BUCKETS];          /* decode steps (forward of the handed-out tokens) */
    uint64_t step_rows[GPTOSS_CUDA_STAT_BUCKETS];      /* rows summed over those steps */
    double step_ms[GPTOSS_CUDA_STAT_BUCKETS];          /* their GPU time */
    uint64_t samplings;
    double sample_ms;                                  /* GPU time of the sampling launches */
    double ack_wait_ms;                                /* engine thread waiting for callers to take tokens */
    double token_wait_ms;                              /* engine thread waiting for sampled tokens */
    uint64_t iterations;
    double busy_ms;                                    /* wall time of scheduler iterations with work */
    double cat_ms[GPTOSS_CUDA_STAT_BUCKETS][GPTOSS_CUDA_STAT_CATS]; /* LLMR_GPTOSS_BATCH_PROFILE=1 only */
} gptoss_cuda_sched_stats;
/* Copies the counters into *out (reset = 1 then zeroes them). The model must be loaded. */
typedef llmr_engine_status (*gptoss_cuda_sched_stats_fn)(llmr_engine_model *m, gptoss_cuda_sched_stats *out, int reset);

#endif
