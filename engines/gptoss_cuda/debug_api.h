/* debug_api.h — the one extra symbol libgptoss_cuda.so exports for the parity harness.
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
 * separate arithmetic differences from expert flips at router near-ties.
 * Not part of the engine ABI: tools find it with dlsym(GPTOSS_CUDA_DEBUG_EVAL_SYMBOL). */
#ifndef GPTOSS_CUDA_DEBUG_API_H
#define GPTOSS_CUDA_DEBUG_API_H

#include "llmr_engine.h"

#define GPTOSS_CUDA_DEBUG_EVAL_SYMBOL "gptoss_cuda_debug_eval"
typedef llmr_engine_status (*gptoss_cuda_debug_eval_fn)(llmr_engine_session *s, const int32_t *tokens, size_t n,
                                                        float *logits, float *hidden, float *router_logits,
                                                        const int32_t *force_topk, char *err, size_t err_size);

/* Device-to-device copy bandwidth of device `device` in GB/s (bytes read + bytes written per second), the
 * median of `reps` timed copies of `bytes` bytes: the roofline for the decode benchmark. */
#define GPTOSS_CUDA_COPY_BW_SYMBOL "gptoss_cuda_copy_bandwidth"
typedef llmr_engine_status (*gptoss_cuda_copy_bandwidth_fn)(int device, uint64_t bytes, int reps, double *gbps,
                                                            char *err, size_t err_size);

#endif
