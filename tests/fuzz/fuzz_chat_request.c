/* libFuzzer target: an OpenAI /v1/chat/completions body through the router's prompt path, as
 * api_openai.c runs it — chat_prompt_render (request -> template context -> render) with the real
 * gpt-oss chat template and the router's default sandbox limits. The input is the request body
 * (any bytes; JSON or not). Any crash, leak, hang or sanitizer report is a bug, and so is a verdict
 * that breaks the contract the handler relies on: JINJA_OK with a NUL-terminated output of the
 * reported length, otherwise no output, a message in err, and an HTTP status of 400 (500 only for
 * out of memory).
 *   make fuzz && cp -r tests/fuzz/corpus/chat_request /tmp/corpus &&
 *   build/fuzz/fuzz_chat_request -max_total_time=60 /tmp/corpus
 * The template is read once from $LLMR_FUZZ_CHAT_TEMPLATE, else from the repo's copy below (run from
 * the repository root); without it the target aborts at start, it never fuzzes nothing. */
// fuzz-sources: router/chat_prompt.c router/template/*.c
#include "router/chat_prompt.h"
#include "router/template/jinja.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TEMPLATE "tests/data/templates/llama.cpp/openai-gpt-oss-120b.jinja"

static jinja_template *g_tmpl;
static json_t *g_tok_config;

static void load_template(void) {
    const char *path = getenv("LLMR_FUZZ_CHAT_TEMPLATE");
    if (!path || !*path) path = DEFAULT_TEMPLATE;
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "fuzz_chat_request: cannot open the chat template %s (run from the repo root)\n", path); abort(); }
    char *src = NULL;
    size_t len = 0, cap = 0, n;
    char buf[8192];
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *p = realloc(src, cap);
            if (!p) abort();
            src = p;
        }
        memcpy(src + len, buf, n);
        len += n;
    }
    fclose(f);
    int st;
    char err[512];
    g_tmpl = jinja_parse(src ? src : "", len, NULL, &st, NULL, err, sizeof err);
    free(src);
    if (!g_tmpl) { fprintf(stderr, "fuzz_chat_request: %s does not parse: %s\n", path, err); abort(); }
    g_tok_config = json_pack("{s:s, s:s}", "bos_token", "<|startoftext|>", "eos_token", "<|return|>");
    if (!g_tok_config) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_tmpl) load_template();
    json_t *req = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!req) return 0; /* not JSON: the HTTP layer answers 400 before this path */
    char *out = NULL, err[1024] = "";
    size_t n = 0;
    jinja_render_opts ro = {0}; /* the router's defaults (api_openai.c render_chat) */
    const int st = chat_prompt_render(g_tmpl, req, g_tok_config, &ro, &out, &n, err, sizeof err);
    if (st == JINJA_OK) {
        if (!out || strlen(out) > n || out[n] != 0) abort();
        if (!json_is_object(req)) abort(); /* only an object can be a chat request */
    } else {
        if (out) abort();
        if (!err[0]) abort(); /* the 400's message would be empty */
        const int http = chat_prompt_http_status(st);
        if (http != 400 && !(http == 500 && st == JINJA_ENOMEM)) abort();
    }
    free(out);
    json_decref(req);
    return 0;
}
