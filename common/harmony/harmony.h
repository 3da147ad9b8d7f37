/* harmony.h — streaming parser for gpt-oss "harmony" output: token ids in, OpenAI fields out.
 *
 * The node feeds every generated token as (id, decoded piece bytes). The parser knows the harmony
 * special ids (not the tokenizer), follows the message grammar
 *     [<|start|>ROLE] [ to=RECIPIENT] <|channel|>CHANNEL [ to=RECIPIENT] [ [<|constrain|>]TYPE] <|message|>TEXT END
 *     END = <|end|> | <|return|> | <|call|>
 * and turns it into deltas:
 *     channel analysis                    -> reasoning
 *     channel final                       -> content
 *     a recipient (to=functions.NAME, or any to=X other than assistant/user), in the role part or in
 *     the channel part                    -> a tool call NAME ("functions." stripped) whose arguments
 *                                            are the message text (JSON when the type is json)
 *     channel commentary, no recipient    -> content (the user-visible "preamble")
 *     any other / no channel              -> content
 * Text outside any harmony message (a model that does not follow the format) goes verbatim to
 * content, so content is never silently dropped. Generation starts inside a header (the prompt ends
 * with `<|start|>assistant`), unless opts say otherwise.
 *
 * Stop tokens (gpt-oss): <|return|> 200002 -> finish "stop", <|call|> 200012 -> "tool_calls",
 * <|endoftext|> 199999 -> "stop". <|end|> 200007 only ends a message (the model continues with
 * the next one): it is never a stop. harmony_push returns 1 for a stop token so the node can stop.
 *
 * Deltas never split a UTF-8 character (bytes of a character cut across tokens are held back), and
 * the text they point to is valid until the next call on the parser. */
#ifndef LLMR_HARMONY_H
#define LLMR_HARMONY_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* o200k_harmony special token ids */
#define HARMONY_STARTOFTEXT 199998
#define HARMONY_ENDOFTEXT   199999
#define HARMONY_RETURN      200002
#define HARMONY_CONSTRAIN   200003
#define HARMONY_CHANNEL     200005
#define HARMONY_START       200006
#define HARMONY_END         200007
#define HARMONY_MESSAGE     200008
#define HARMONY_CALL        200012

typedef struct harmony_parser harmony_parser;

typedef struct {
    uint32_t start, end, message, channel, constrain, ret, call, endoftext;  /* special ids */
    int start_outside;        /* 1: expect <|start|> first (parsing a whole conversation); 0 (default):
                                 generation begins right after "<|start|>assistant" */
    const char *call_id_prefix; /* tool call ids are PREFIX + index (deterministic, for tests); NULL =
                                 "call_" + 24 random hex digits per call */
} harmony_opts;

/* Fills o with the gpt-oss ids and defaults. */
void harmony_opts_default(harmony_opts *o);

/* 1 if id ends generation for the assistant (<|return|>, <|call|>, <|endoftext|> with the ids of o,
 * or gpt-oss's when o is NULL), else 0. <|end|> is not a stop. */
int harmony_is_stop(const harmony_opts *o, uint32_t id);

/* NULL opts = defaults. Returns NULL only on out of memory. */
harmony_parser *harmony_create(const harmony_opts *opts);
void harmony_destroy(harmony_parser *p);   /* NULL is a no-op */

typedef enum {
    HARMONY_DELTA_NONE = 0,
    HARMONY_DELTA_REASONING,   /* text: more reasoning */
    HARMONY_DELTA_CONTENT,     /* text: more content */
    HARMONY_DELTA_TOOL_BEGIN,  /* a tool call starts: tool_index, tool_id, tool_name (text empty) */
    HARMONY_DELTA_TOOL_ARGS,   /* text: more arguments of call tool_index */
} harmony_delta_kind;

typedef struct {
    harmony_delta_kind kind;
    const char *text; size_t len;
    int tool_index;
    const char *tool_id, *tool_name;
} harmony_delta;

/* Feeds one generated token. piece = its decoded bytes (ignored for special ids). *d receives what
 * this token adds (kind NONE if nothing yet). Returns 1 if the token is a stop token (the finish
 * reason is then known), 0 otherwise, -1 on out of memory. */
int harmony_push(harmony_parser *p, uint32_t id, const char *piece, size_t len, harmony_delta *d);

/* Ends the stream: flushes held-back bytes and unfinished header text into *d (may be NONE), and
 * fixes the finish reason: "length" if hit_length, else the stop token's reason, else "tool_calls"
 * when calls were made, else "stop". Returns 0, or -1 on out of memory. */
int harmony_finish(harmony_parser *p, int hit_length, harmony_delta *d);

/* Where the text of the next plain token goes: REASONING, CONTENT or TOOL_ARGS inside a message body
 * (CONTENT outside any message, as harmony_push treats stray text), NONE inside a header. */
harmony_delta_kind harmony_text_kind(const harmony_parser *p);

/* "stop", "tool_calls", "length", or NULL while unknown. */
const char *harmony_finish_reason(const harmony_parser *p);

/* Accumulated results (valid until destroy). */
const char *harmony_content(const harmony_parser *p, size_t *len);
const char *harmony_reasoning(const harmony_parser *p, size_t *len);
size_t harmony_tool_call_count(const harmony_parser *p);
/* Returns 0 and the i-th call's fields, or -1 if i is out of range. */
int harmony_tool_call(const harmony_parser *p, size_t i, const char **id, const char **name,
                      const char **args, size_t *args_len);

/* The OpenAI assistant message: {"role":"assistant","content":...,"reasoning":...,
 * "reasoning_content":...,"tool_calls":[...]} (content null when empty and there are tool calls;
 * reasoning keys only when there is reasoning). New reference; NULL on out of memory. */
json_t *harmony_message_json(const harmony_parser *p);

/* The OpenAI streaming "delta" object for d: {"reasoning":t,"reasoning_content":t} / {"content":t} /
 * {"tool_calls":[{"index":i,"id":..,"type":"function","function":{"name":..,"arguments":""}}]} /
 * {"tool_calls":[{"index":i,"function":{"arguments":t}}]}. NULL for a NONE delta. */
json_t *harmony_delta_json(const harmony_delta *d);

#endif
