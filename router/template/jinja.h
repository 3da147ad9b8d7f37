/* jinja.h — a Jinja2 engine with Hugging Face `apply_chat_template` semantics.
 *
 * The router renders a model's own chat template (the Jinja text shipped in chat_template.jinja or
 * tokenizer_config.json) exactly as Python transformers does: jinja2's ImmutableSandboxedEnvironment
 * with trim_blocks + lstrip_blocks, the loopcontrols extension, a `{% generation %}` tag, the
 * transformers `tojson` (non-ASCII kept, no HTML escaping), `raise_exception(msg)` and
 * `strftime_now(fmt)`. Output must be byte-identical: one stray newline changes what the model does.
 *
 * Lifecycle:
 *     jinja_template *t = jinja_parse(src, len, NULL, err, sizeof err);   // NULL on a syntax error
 *     char *out; size_t n;
 *     int rc = jinja_render(t, ctx_json, NULL, &out, &n, err, sizeof err); // ctx: a JSON object
 *     ... free(out); jinja_destroy(t);
 *
 * A parsed template is immutable: render it from many threads at once. Each render owns a private
 * arena (every runtime value lives in it and is released in one go when the render returns), so a
 * failing template can never leak. Values printed with {{ }} follow Python's str(): lists and dicts
 * print as repr (`['a', 1]`, `{'k': True}`), None as `None`; undefined names print as "".
 *
 * Sandbox: the template cannot mutate its inputs (list.append & co. raise, as in transformers), and
 * every render is bounded by the limits in jinja_render_opts (output bytes, loop iterations + calls,
 * call depth, arena memory); exceeding one is an error naming the limit, never a crash or a hang. */
#ifndef LLMR_JINJA_H
#define LLMR_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <jansson.h>

typedef struct jinja_template jinja_template;

/* Error codes. A message naming the cause (line:column, the template's own raise_exception text,
 * the limit hit) goes to the caller's err buffer. */
typedef enum {
    JINJA_OK = 0,
    JINJA_ESYNTAX,    /* the template does not parse (position in the message and in *pos) */
    JINJA_ERENDER,    /* a runtime error: TypeError/UndefinedError/SecurityError equivalents */
    JINJA_ERAISE,     /* the template called raise_exception(msg); the message is msg verbatim */
    JINJA_ELIMIT,     /* a sandbox limit was hit (output, steps, depth, memory) */
    JINJA_EINVAL,     /* bad argument (NULL template, context not an object) */
    JINJA_ENOMEM,
} jinja_status;

/* Static English name of a status ("syntax error", ...). Never NULL. */
const char *jinja_strerror(int status);

/* Lexer options. They are parse-time because Jinja2 applies them in its lexer. */
typedef struct {
    int trim_blocks;          /* drop the first newline after a block/comment tag (HF: on) */
    int lstrip_blocks;        /* strip spaces/tabs before a block/comment tag on its line (HF: on) */
    int keep_trailing_newline;/* keep the template's final newline (HF: off, one is dropped) */
    int max_depth;            /* parser nesting limit (expressions + blocks); 0 = 256 */
} jinja_parse_opts;

/* Fills o with transformers' settings: trim_blocks=1, lstrip_blocks=1, keep_trailing_newline=0. */
void jinja_parse_opts_default(jinja_parse_opts *o);

/* Where a syntax error was found (1-based; 0 when not applicable). */
typedef struct { int line, column; size_t offset; } jinja_pos;

/* Parses src[0..len) (UTF-8; NUL bytes allowed in text). opts NULL = HF defaults. Returns the
 * template, or NULL with status in *status (if non-NULL), the position in *pos (if non-NULL) and
 * "line L, column C: what was expected" in err. */
jinja_template *jinja_parse(const char *src, size_t len, const jinja_parse_opts *opts,
                            int *status, jinja_pos *pos, char *err, size_t err_size);

/* Frees a template; NULL is a no-op. */
void jinja_destroy(jinja_template *t);

/* Render-time options and sandbox limits (0 = the default shown). */
typedef struct {
    time_t now;               /* clock for strftime_now (local time); 0 = time(NULL) */
    int now_is_utc;           /* format `now` as UTC instead of local time */
    size_t max_output;        /* bytes of output; default 16 MiB */
    uint64_t max_steps;       /* loop iterations + macro/filter calls; default 10,000,000 */
    int max_call_depth;       /* nested macro calls; default 200 */
    size_t max_memory;        /* arena bytes for runtime values; default 256 MiB */
} jinja_render_opts;

/* Renders t with the variables of ctx (a JSON object; NULL = none). Variables absent from ctx are
 * undefined, except the transformers defaults applied by the caller (see chat_prompt.h). On success
 * returns JINJA_OK with *out a malloc'd NUL-terminated string (the caller frees it) and *out_len its
 * length (the output may contain NUL bytes from the data). On error returns the status, *out = NULL,
 * and the message in err (for JINJA_ERAISE the template's message verbatim). */
int jinja_render(const jinja_template *t, json_t *ctx, const jinja_render_opts *opts,
                 char **out, size_t *out_len, char *err, size_t err_size);

#endif
