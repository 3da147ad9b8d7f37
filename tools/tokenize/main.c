/* llmr-tokenize — encode stdin to a JSON array of ids, or decode a JSON array of ids to bytes.
 *
 *   llmr-tokenize --tokenizer PATH [--no-special] [--strict-utf8]          < text   > [ids]
 *   llmr-tokenize --tokenizer PATH --decode [--lossy] [--skip-special]     < [ids]  > bytes
 *   llmr-tokenize --tokenizer PATH --jsonl [--no-special]     < one JSON string per line > [ids] per line
 *
 * Encoding matches Hugging Face tokenizers' encode(text, add_special_tokens=False): added/special
 * tokens written in the text are matched unless --no-special. For conformance tests and operators. */
#include "common/tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: llmr-tokenize --tokenizer PATH [--no-special] [--strict-utf8]\n"
            "       llmr-tokenize --tokenizer PATH --decode [--lossy] [--skip-special]\n"
            "\n"
            "Encode: reads all of stdin as UTF-8 text and prints one JSON array of token ids on one\n"
            "line. Special/added tokens written in the text are matched (as Hugging Face tokenizers\n"
            "with add_special_tokens=False); --no-special treats special tokens as plain text.\n"
            "Invalid UTF-8 is replaced by U+FFFD (--strict-utf8: fail instead).\n"
            "\n"
            "Decode (--decode): reads a JSON array of ids from stdin and writes the exact bytes\n"
            "(--lossy: invalid UTF-8 becomes U+FFFD, as HF decode; --skip-special: drop special\n"
            "tokens).\n"
            "\n"
            "JSON lines (--jsonl): each stdin line is a JSON string; prints one array per line\n"
            "(one load for many texts: conformance tests).\n"
            "\n"
            "  --tokenizer PATH   tokenizer.json (Hugging Face format, byte-level BPE)\n"
            "  --time             print load and encode/decode times to stderr\n"
            "  --help             this text\n"
            "Exit status: 0 ok, 1 bad input or tokenizer error, 2 usage error.\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) break;
        if (n == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) { free(buf); return NULL; }
            buf = p;
        }
    }
    if (buf && ferror(stdin)) { free(buf); return NULL; }
    *len = n;
    return buf;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void print_ids(const int32_t *ids, size_t n) {
    putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    puts("]");
}

/* --jsonl: one JSON string per input line, one id array per output line. */
static int do_jsonl(const tokenizer *tok, char *in, size_t len, unsigned flags) {
    char err[512];
    size_t lineno = 0;
    for (char *p = in, *end = in + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lineno++;
        if (ll > 0) {
            json_error_t je;
            json_t *v = json_loadb(p, ll, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!json_is_string(v)) {
                fprintf(stderr, "llmr-tokenize: stdin line %zu: expected a JSON string (%s)\n", lineno, v ? "other JSON type" : je.text);
                json_decref(v);
                return 1;
            }
            int32_t *ids;
            size_t n;
            int rc = tokenizer_encode(tok, json_string_value(v), json_string_length(v), flags, &ids, &n, err, sizeof err);
            json_decref(v);
            if (rc) { fprintf(stderr, "llmr-tokenize: stdin line %zu: %s\n", lineno, err); return 1; }
            print_ids(ids, n);
            free(ids);
        }
        p += ll + 1;
    }
    return 0;
}

static int do_encode(const tokenizer *tok, const char *text, size_t len, unsigned flags, int timing) {
    char err[512];
    int32_t *ids;
    size_t n;
    double t0 = now_ms();
    int rc = tokenizer_encode(tok, text, len, flags, &ids, &n, err, sizeof err);
    if (rc) { fprintf(stderr, "llmr-tokenize: %s\n", err); return 1; }
    if (timing) fprintf(stderr, "encode: %zu bytes -> %zu ids in %.1f ms\n", len, n, now_ms() - t0);
    print_ids(ids, n);
    free(ids);
    return 0;
}

static int do_decode(const tokenizer *tok, const char *in, size_t len, unsigned flags) {
    json_error_t je;
    char err[512];
    json_t *arr = json_loadb(in, len, 0, &je);
    if (!json_is_array(arr)) {
        fprintf(stderr, "llmr-tokenize: stdin: expected a JSON array of ids (%s)\n", arr ? "not an array" : je.text);
        json_decref(arr);
        return 1;
    }
    size_t n = json_array_size(arr);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) { json_decref(arr); fprintf(stderr, "llmr-tokenize: out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) {
            fprintf(stderr, "llmr-tokenize: stdin: element %zu is not a 32-bit integer id\n", i);
            free(ids);
            json_decref(arr);
            return 1;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    json_decref(arr);
    char *text;
    size_t tl;
    int rc = tokenizer_decode(tok, ids, n, flags, &text, &tl, err, sizeof err);
    free(ids);
    if (rc) { fprintf(stderr, "llmr-tokenize: %s\n", err); return 1; }
    fwrite(text, 1, tl, stdout);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int decode = 0, timing = 0, jsonl = 0;
    unsigned eflags = 0, dflags = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--no-special")) eflags |= TOKENIZER_ENCODE_NO_SPECIAL;
        else if (!strcmp(argv[i], "--strict-utf8")) eflags |= TOKENIZER_ENCODE_STRICT_UTF8;
        else if (!strcmp(argv[i], "--decode")) decode = 1;
        else if (!strcmp(argv[i], "--jsonl")) jsonl = 1;
        else if (!strcmp(argv[i], "--lossy")) dflags |= TOKENIZER_DECODE_LOSSY;
        else if (!strcmp(argv[i], "--skip-special")) dflags |= TOKENIZER_DECODE_SKIP_SPECIAL;
        else if (!strcmp(argv[i], "--time")) timing = 1;
        else {
            fprintf(stderr, "llmr-tokenize: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) { fprintf(stderr, "llmr-tokenize: --tokenizer PATH is required\n"); usage(stderr); return 2; }
    char err[512];
    tokenizer *tok;
    double t0 = now_ms();
    int rc = tokenizer_create_from_file(path, &tok, err, sizeof err);
    if (rc) { fprintf(stderr, "llmr-tokenize: %s\n", err); return 1; }
    if (timing) fprintf(stderr, "load: %.1f ms\n", now_ms() - t0);
    size_t len;
    char *in = read_stdin(&len);
    if (!in) { fprintf(stderr, "llmr-tokenize: cannot read stdin\n"); tokenizer_destroy(tok); return 1; }
    int status = decode  ? do_decode(tok, in, len, dflags)
                 : jsonl ? do_jsonl(tok, in, len, eflags)
                         : do_encode(tok, in, len, eflags, timing);
    free(in);
    tokenizer_destroy(tok);
    if (fflush(stdout) != 0) { fprintf(stderr, "llmr-tokenize: cannot write stdout\n"); return 1; }
    return status;
}
