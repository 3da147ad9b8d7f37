/* chat_prompt.h — from an OpenAI chat request to the model's prompt: which template, which variables.
 *
 * Pure functions over jansson values and file contents: no HTTP, no file I/O. The router reads the
 * model's files, calls these, and maps errors to HTTP 400 (bad template / bad request).
 *
 * Template selection order (FR-007), first present wins:
 *   1. a per-request/per-model override registered by the operator,
 *   2. the model's chat_template.jinja,
 *   3. "chat_template" in tokenizer_config.json (a string, or a list of {name, template}: the entry
 *      named "tool_use" when the request has tools and one exists, else the one named "default"),
 *   4. the built-in default: ChatML (transformers' historical default; see docs/templates.md).
 *
 * Request -> template context (what transformers' apply_chat_template receives):
 *   messages     copied; content that is an array of parts is flattened to the concatenation of its
 *                text parts joined by "\n"; content null -> ""; assistant "reasoning" or
 *                "reasoning_content" is also exposed as "thinking" (what the gpt-oss template reads);
 *                tool_calls[].function.arguments given as a JSON string is parsed into an object (so
 *                `|tojson` does not double-encode it; a string that is not JSON stays a string).
 *   tools        the request's tools, or none.
 *   add_generation_prompt  true (a boolean "add_generation_prompt" in the request overrides it).
 *   reasoning_effort       from "reasoning_effort" or "reasoning": {"effort": ...}; absent = absent.
 *   bos_token, eos_token   from tokenizer_config.json (string or {"content": ...}); absent = absent.
 *   chat_template_kwargs   (vLLM extension) an object whose members are added as variables.
 *   documents    none.
 */
#ifndef LLMR_CHAT_PROMPT_H
#define LLMR_CHAT_PROMPT_H

#include <stddef.h>
#include <jansson.h>

#include "router/template/jinja.h"

typedef enum {
    CHAT_TEMPLATE_OVERRIDE = 1,
    CHAT_TEMPLATE_JINJA_FILE,
    CHAT_TEMPLATE_TOKENIZER_CONFIG,
    CHAT_TEMPLATE_DEFAULT,
} chat_template_source;

/* Static name of a source ("override", "chat_template.jinja", ...). */
const char *chat_template_source_name(chat_template_source s);

/* The built-in default template (ChatML). Static string. */
const char *chat_prompt_default_template(void);

/* Picks the template text by the order above. override / jinja_file may be NULL or empty (= absent);
 * tokenizer_config may be NULL. want_tool_use selects a "tool_use" named template when there is one.
 * Returns a pointer borrowed from the arguments (or the static default); *src (if non-NULL) says which. */
const char *chat_prompt_select_template(const char *override, const char *jinja_file, json_t *tokenizer_config,
                                        int want_tool_use, chat_template_source *src);

/* Adds transformers' defaults for variables absent from ctx: add_generation_prompt=false,
 * tools=null, documents=null. ctx must be an object. Returns 0, or -1 if ctx is not an object. */
int chat_prompt_context_defaults(json_t *ctx);

/* Builds the template context for an OpenAI /v1/chat/completions request (see the mapping above).
 * tokenizer_config may be NULL. Returns a new object (the caller decrefs it), or NULL with a message
 * naming the offending field in err (e.g. "messages[2].content: expected a string or an array of parts"). */
json_t *chat_prompt_build_context(json_t *request, json_t *tokenizer_config, char *err, size_t err_size);

/* Validates a template at registration: 0 if it parses, else the jinja status with "line L, column C:
 * ..." in err and the position in *pos (if non-NULL). The router answers 400 with that message. */
int chat_prompt_check_template(const char *src, size_t len, jinja_pos *pos, char *err, size_t err_size);

/* The HTTP status for a jinja status: 400 for a bad template / request / template error / sandbox
 * limit (the body carries the message), 500 for JINJA_ENOMEM, 200 for JINJA_OK. */
int chat_prompt_http_status(int jinja_status);

/* Convenience: build the context from the request and render t with HF lexer settings already used
 * at parse time. Returns JINJA_OK with *out malloc'd, or a jinja status / JINJA_EINVAL for a bad
 * request, with the message in err. */
int chat_prompt_render(const jinja_template *t, json_t *request, json_t *tokenizer_config,
                       const jinja_render_opts *opts, char **out, size_t *out_len, char *err, size_t err_size);

#endif
