/* llmr-render — renders a chat template with a JSON context, exactly as transformers would.
 *
 *   llmr-render --template FILE --context FILE.json [--now 2025-07-10T12:00:00]
 *               [--no-trim-blocks] [--no-lstrip-blocks]
 *
 * Writes the rendered prompt to stdout byte for byte (nothing appended) and exits 0. On a template
 * error it exits 1 with the template's message on stderr; bad usage or unreadable files exit 2.
 * Variables missing from the context get transformers' defaults (add_generation_prompt=false,
 * tools=None, documents=None). --now pins strftime_now's clock (read and printed as UTC). */
#include "router/chat_prompt.h"
#include "router/template/jinja.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: llmr-render --template FILE --context FILE.json [--now YYYY-MM-DDTHH:MM:SS]\n"
            "                   [--no-trim-blocks] [--no-lstrip-blocks]\n"
            "Renders a Hugging Face chat template (Jinja) with the variables in the context file and\n"
            "writes the result to stdout byte for byte. Exit: 0 ok, 1 template error, 2 usage/IO error.\n");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb; cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); return NULL; }
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    const char *tpath = NULL, *cpath = NULL, *now = NULL;
    jinja_parse_opts po;
    jinja_parse_opts_default(&po);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--template") && i + 1 < argc) tpath = argv[++i];
        else if (!strcmp(argv[i], "--context") && i + 1 < argc) cpath = argv[++i];
        else if (!strcmp(argv[i], "--now") && i + 1 < argc) now = argv[++i];
        else if (!strcmp(argv[i], "--no-trim-blocks")) po.trim_blocks = 0;
        else if (!strcmp(argv[i], "--no-lstrip-blocks")) po.lstrip_blocks = 0;
        else { fprintf(stderr, "llmr-render: unknown or incomplete argument '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    if (!tpath || !cpath) { fprintf(stderr, "llmr-render: --template and --context are required\n"); usage(stderr); return 2; }

    jinja_render_opts ro = {0};
    if (now) {
        struct tm tm = {0};
        const char *end = strptime(now, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end) end = strptime(now, "%Y-%m-%d", &tm);
        if (!end || *end) { fprintf(stderr, "llmr-render: --now '%s' is not YYYY-MM-DDTHH:MM:SS\n", now); return 2; }
        ro.now = timegm(&tm);
        ro.now_is_utc = 1;
    }

    size_t tlen = 0;
    char *src = read_file(tpath, &tlen);
    if (!src) { fprintf(stderr, "llmr-render: cannot read template %s: %s\n", tpath, strerror(errno)); return 2; }
    json_error_t jerr;
    json_t *ctx = json_load_file(cpath, JSON_DECODE_ANY, &jerr);
    if (!ctx || !json_is_object(ctx)) {
        fprintf(stderr, "llmr-render: context %s: %s\n", cpath, ctx ? "not a JSON object" : jerr.text);
        json_decref(ctx); free(src);
        return 2;
    }
    chat_prompt_context_defaults(ctx);

    char err[1024];
    int st = 0;
    jinja_pos pos;
    jinja_template *t = jinja_parse(src, tlen, &po, &st, &pos, err, sizeof err);
    free(src);
    if (!t) {
        fprintf(stderr, "llmr-render: %s: %s\n", tpath, err);
        json_decref(ctx);
        return 1;
    }
    char *out = NULL;
    size_t n = 0;
    st = jinja_render(t, ctx, &ro, &out, &n, err, sizeof err);
    jinja_destroy(t);
    json_decref(ctx);
    if (st != JINJA_OK) {
        fprintf(stderr, "llmr-render: %s: %s\n", jinja_strerror(st), err);
        return 1;
    }
    int rc = fwrite(out, 1, n, stdout) == n && fflush(stdout) == 0 ? 0 : 2;
    free(out);
    return rc;
}
