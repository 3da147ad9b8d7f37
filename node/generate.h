/* generate.h — the node's inference API (issue 9, node side): POST /v0/generate.
 *
 * Request (schema/node-generate.request, node token): {model, prompt | prompt_ids, max_tokens,
 * temperature, top_p, top_k, min_p, seed, frequency_penalty, presence_penalty, stop[<=4], parse,
 * logprobs (0..20 alternatives)}.
 * The answer is always an SSE stream (text/event-stream) of schema/node-generate.event objects, one
 * per "data:" line:
 *   {"type":"delta","content":…} / {"type":"delta","reasoning":…} / {"type":"delta","tool_calls":[…]}
 *     sent as tokens are produced (complete UTF-8 only: incremental detokenization holds back bytes
 *     of a character split across tokens);
 *     with logprobs asked, each token's {"id","token","bytes","logprob","top_logprobs":[…],"channel"} rides
 *     in the "logprobs" array of the delta its text produced (a delta of only logprobs when it produced
 *     none yet); channel: content, reasoning, tool or none (harmony's own tokens);
 *   exactly one {"type":"done","finish_reason":…,"usage":{…}} or {"type":"error","code","message"}
 *     ends the stream.
 * Refused at the HTTP level: a missing or wrong token (401, and 503 before registration) and a node
 * already serving --max-concurrency generations (429 code busy, Retry-After: 1, so the router can
 * pick another node); every other problem — bad field (code invalid_request), unknown or not-ready
 * model (model_not_found, model_not_ready), engine statuses (oom_vram,
 * timeout, ...) — is an error event.
 *
 * Pipeline, on a thread of its own per request: prompt text is tokenized with the model's
 * tokenizer.json (common/tokenizer, special tokens matched, loaded once per model) or prompt_ids are
 * checked against it; an EngineHost session runs generate; each token is detokenized incrementally
 * and, with parse "harmony" (the default), split by common/harmony into reasoning / content / tool
 * calls (stop tokens <|return|>, <|call|>, <|endoftext|>); with parse "none" the raw text is content.
 * Stop strings end generation when they appear in the content (the stop string is not sent; text
 * that could still begin one is held back until decided). When the router disconnects, the
 * generation is cancelled at the next token and the session freed.
 *
 * Threading: handlers run on the loop thread; generation threads hand their output back with
 * llmr_loop_post. */
#ifndef LLMR_NODE_GENERATE_H
#define LLMR_NODE_GENERATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "node/node.h"

typedef struct llmr_generate llmr_generate; /* opaque */

/* Adds POST /v0/generate to node->http. NULL with the cause in err. */
llmr_generate *llmr_generate_create(llmr_node *node, char *err, size_t err_size);
/* Cancels every generation, waits for their threads, frees cached tokenizers. Call after the loop
 * stopped and before the HTTP server is destroyed. Accepts NULL. */
void llmr_generate_destroy(llmr_generate *g);
/* Drops the cached tokenizer of a model (it was deleted or reloaded). */
void llmr_generate_forget(llmr_generate *g, const char *model_id);

/* A parsed request. */
typedef struct llmr_gen_params {
    char model[256];
    char *prompt;          size_t prompt_len;  /* owned; NULL when prompt_ids are given */
    int32_t *prompt_ids;   size_t n_prompt_ids; /* owned */
    uint32_t max_tokens;
    float temperature, top_p, min_p, frequency_penalty, presence_penalty;
    int32_t top_k;
    uint64_t seed;
    int has_seed;
    char *stop[4];         size_t n_stop;       /* owned */
    int harmony;           /* parse "harmony" (default) vs "none" */
    int logprobs;          /* alternatives per token with each token's log-probability; -1: none asked */
    char request_id[128];
} llmr_gen_params;

/* Parses and checks a request body against schema/node-generate.request. 0, or -1 with the field at
 * fault in err ("temperature: expected a number in [0, 2]"). Free with llmr_gen_params_free. */
int llmr_gen_params_parse(json_t *body, llmr_gen_params *out, char *err, size_t err_size);
void llmr_gen_params_free(llmr_gen_params *p);

/* Stop-string matcher over streamed text: feed text, get what can be emitted now. */
typedef struct llmr_stopper {
    const char *const *stops; size_t n_stops;
    size_t max_len;         /* longest stop string */
    char *held; size_t held_len, held_cap;
    char *out; size_t out_cap; /* the bytes last returned by push (owned; freed by llmr_stopper_free) */
    int hit;                /* 1 once a stop string was seen */
} llmr_stopper;

void llmr_stopper_init(llmr_stopper *s, const char *const *stops, size_t n_stops);
void llmr_stopper_free(llmr_stopper *s);
/* Appends text; *out and *out_len receive the bytes safe to emit now (valid until the next call; never
 * cut inside a UTF-8 character; never containing a stop string). Returns 1 when a stop string was
 * found (everything before it has been returned; the rest is dropped), 0 otherwise, -1 on ENOMEM. */
int llmr_stopper_push(llmr_stopper *s, const char *text, size_t len, const char **out, size_t *out_len);
/* The held-back tail at the end of the stream (no stop string completed). */
void llmr_stopper_flush(llmr_stopper *s, const char **out, size_t *out_len);

#endif
