// fuzz-sources: common/tokenizer/tokenizer.c common/tokenizer/tok_cache.c common/tokenizer/tok_encode.c common/tokenizer/tok_split.c common/tokenizer/tok_load.c common/tokenizer/tok_json.c common/tokenizer/tok_utf8.c common/errmsg.c
/* libFuzzer differential target: the o200k split fast path (tok_split.c) against the regex.
 *
 * The input, made valid UTF-8 the way encode does it (invalid bytes become U+FFFD), is searched
 * at every character boundary; wherever tok_split_o200k decides, its match end must equal the
 * end of the compiled regex's match, which must start at that offset. The regex is the one a
 * tokenizer.json with the o200k pattern compiles to (same \s rewrite as a real load).
 *   make fuzz && build/fuzz/fuzz_tok_split -max_total_time=60 */
#include "common/tokenizer/tok_internal.h"
#include "common/tokenizer/tok_utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tokenizer *tok;
static pcre2_match_data *md;

/* A byte-level tokenizer.json whose Split pattern is TOK_O200K_PATTERN. */
static char *o200k_json(void) {
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    if (!b) abort();
    len += (size_t)snprintf(b + len, cap - len,
        "{\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":"
        "[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"");
    for (const char *p = TOK_O200K_PATTERN; *p; p++) {
        if (*p == '\\' || *p == '"') b[len++] = '\\';
        b[len++] = *p;
    }
    len += (size_t)snprintf(b + len, cap - len,
        "\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{");
    for (int i = 0; i < 256; i++) { /* GPT-2's byte alphabet: printable bytes map to themselves */
        int pr = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255), cp = i, k = 0;
        if (!pr) { for (int x = 0; x < i; x++) k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)); cp = 256 + k; }
        len += (size_t)snprintf(b + len, cap - len, "%s\"\\u%04x\":%d", i ? "," : "", cp, i);
    }
    snprintf(b + len, cap - len, "},\"merges\":[]}}");
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char err[512], *j = o200k_json();
    if (tokenizer_create_from_buffer(j, strlen(j), "o200k-split", &tok, err, sizeof err) != 0 ||
        !tok->split_o200k || !tok->re || !(md = pcre2_match_data_create(1, NULL))) {
        fprintf(stderr, "fuzz_tok_split: setup failed: %s\n", err);
        abort();
    }
    free(j);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    uint8_t *s = malloc(3 * size + 4);
    size_t n;
    if (!s) return 0;
    tok_utf8_convert(data, size, 1, 1, s, &n);
    for (size_t i = 0; i < n; i++) {
        if ((s[i] & 0xC0) == 0x80) continue;
        size_t fe = tok_split_o200k(s, n, i);
        if (!fe) continue;
        int rc = pcre2_match(tok->re, s, n, i, 0, md, NULL);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (rc <= 0 || ov[0] != i || ov[1] != fe) {
            fprintf(stderr, "fuzz_tok_split: offset %zu: fast path ends at %zu, regex rc %d [%zu, %zu)\n",
                    i, fe, rc, rc > 0 ? (size_t)ov[0] : 0, rc > 0 ? (size_t)ov[1] : 0);
            abort();
        }
    }
    free(s);
    return 0;
}
