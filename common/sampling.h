/* sampling.h — next-token sampling on the CPU with the engine ABI's semantics (llmr_sampling_params).
 *
 * One sampler serves one generate call: it owns a seeded PRNG and the counts of the tokens generated so
 * far (for the penalties). Per step, in this order:
 *   1. penalties (OpenAI semantics, over the tokens accepted so far):
 *        logit[t] -= count[t] * frequency_penalty + (count[t] > 0) * presence_penalty
 *   2. temperature <= 0: greedy — the largest logit, ties to the lowest id. Nothing below applies and
 *      no random number is drawn.
 *   3. logits / temperature, then probabilities p = softmax;
 *   4. top_k > 0: keep the k most probable tokens (ties to the lower id);
 *   5. 0 < top_p < 1: keep the smallest most-probable prefix whose mass (renormalized after top_k)
 *      reaches top_p;
 *   6. min_p > 0: drop tokens with p < min_p * p_max;
 *   7. draw one token from what is left, proportionally to p, with one 53-bit uniform number from a
 *      splitmix64 stream seeded by `seed`: same seed and same logits, same tokens, on any machine.
 * Cost: O(vocab) per step plus a sort of only the candidates that can survive top_k / top_p.
 * Non-finite logits: NaN counts as -inf; if every logit is -inf the lowest id is returned. */
#ifndef LLMR_SAMPLING_H
#define LLMR_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "llmr_engine.h"

typedef struct llmr_sampler llmr_sampler; /* opaque */

/* A sampler over a vocabulary of n_vocab ids with params p (copied; fields beyond p->struct_size take
 * their "off" defaults). NULL when out of memory or n_vocab <= 0. */
llmr_sampler *llmr_sampler_create(const llmr_sampling_params *p, int n_vocab);
void llmr_sampler_destroy(llmr_sampler *s); /* accepts NULL */

/* Picks the next token from logits[n_vocab]. The logits are used as scratch (modified). */
int32_t llmr_sampler_sample(llmr_sampler *s, float *logits);

/* Records a generated token for the penalties (ids outside the vocabulary are ignored). */
void llmr_sampler_accept(llmr_sampler *s, int32_t token);

/* Greedy argmax of x[n], ties to the lowest id (NaN never wins). */
int32_t llmr_argmax(const float *x, int n);

/* The log-probabilities of `token` under logits[n] (llmr_token_logprobs: log_softmax of the raw logits,
 * NaN as -inf) and its n_top (capped at LLMR_MAX_TOP_LOGPROBS and n) most likely alternatives, most
 * likely first, ties to the lower id. logits are only read. O(n * (2 + n_top)). */
void llmr_logprobs_fill(const float *logits, int n, int32_t token, uint32_t n_top, llmr_token_logprobs *out);

#endif
