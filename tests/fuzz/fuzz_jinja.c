/* libFuzzer target for the Jinja engine: parse + render arbitrary templates with a small context.
 * Input: TEMPLATE [\0 CONTEXT_JSON]; without a valid JSON object after the NUL a fixed chat context
 * (messages, tools, add_generation_prompt) is used. Sandbox limits are small so every input ends
 * quickly; any crash, leak, hang or sanitizer report is a bug.
 *   make fuzz && build/fuzz/fuzz_jinja -max_total_time=60 tests/data/templates/llama.cpp
 */
// fuzz-sources: router/template/jinja_value.c router/template/jinja_parse.c router/template/jinja_render.c router/template/jinja_builtins.c router/chat_prompt.c
#include "router/chat_prompt.h"
#include "router/template/jinja.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char DEFAULT_CTX[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"t\", \"tool_calls\": [{\"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"r\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"array\", \"items\": {\"type\": \"number\"}}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    size_t tlen = size;
    const char *nul = memchr(data, 0, size);
    json_t *ctx = NULL;
    if (nul) {
        tlen = (size_t)(nul - src);
        ctx = json_loadb(nul + 1, size - tlen - 1, 0, NULL);
        if (ctx && !json_is_object(ctx)) { json_decref(ctx); ctx = NULL; }
    }
    if (!ctx) ctx = json_loads(DEFAULT_CTX, 0, NULL);
    if (!ctx) return 0;
    chat_prompt_context_defaults(ctx);
    int st;
    jinja_pos pos;
    char err[256];
    jinja_parse_opts po;
    jinja_parse_opts_default(&po);
    if (size && (data[0] & 1)) po.trim_blocks = 0;
    if (size && (data[0] & 2)) po.lstrip_blocks = 0;
    jinja_template *t = jinja_parse(src, tlen, &po, &st, &pos, err, sizeof err);
    if (t) {
        jinja_render_opts ro = { .now = 1752148800, .now_is_utc = 1, .max_output = 1 << 16, .max_steps = 20000,
                                 .max_call_depth = 50, .max_memory = 16 << 20 };
        char *out = NULL;
        size_t n = 0;
        st = jinja_render(t, ctx, &ro, &out, &n, err, sizeof err);
        if (st == JINJA_OK && (!out || strlen(out) > n)) abort();   /* output must be NUL-terminated at n */
        if (st != JINJA_OK && out) abort();
        free(out);
        jinja_destroy(t);
    } else if (st == JINJA_OK) abort();
    json_decref(ctx);
    return 0;
}
