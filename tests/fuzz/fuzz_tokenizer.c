// fuzz-sources: common/tokenizer/tokenizer.c common/tokenizer/tok_cache.c common/tokenizer/tok_encode.c common/tokenizer/tok_split.c common/tokenizer/tok_load.c common/tokenizer/tok_json.c common/tokenizer/tok_utf8.c common/errmsg.c
/* libFuzzer target for common/tokenizer.
 *
 * The first input byte picks what the rest is:
 *   0..127   text for tokenizer_encode (flags from the byte); checks decode(encode(x)) equals x
 *            with invalid UTF-8 replaced, and that tokenizer_count agrees;
 *   128..191 little-endian int32 ids for the streaming decoder; checks that its output equals
 *            tokenizer_decode and that lossy chunks are valid UTF-8;
 *   192..255 a tokenizer.json to load (must fail cleanly or load; if it loads, encode a sample).
 * The tokenizer is the real gpt-oss one from $LLMR_CACHE when present, else a small built-in one.
 *   make fuzz && build/fuzz/fuzz_tokenizer -max_total_time=60 */
#include "common/tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tokenizer *tok;

/* A byte-level tokenizer with a few merges and added tokens (no file needed). */
static char *builtin_json(void) {
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    len += (size_t)snprintf(b + len, cap - len,
        "{\"added_tokens\":[{\"id\":300,\"content\":\"<|end|>\",\"special\":true},"
        "{\"id\":301,\"content\":\"<x>\",\"special\":false}],\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
        "{\"Regex\":\"[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{");
    for (int i = 0; i < 256; i++) {
        int pr = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255), cp = i, k = 0;
        if (!pr) { for (int x = 0; x < i; x++) k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)); cp = 256 + k; }
        len += (size_t)snprintf(b + len, cap - len, "%s\"\\u%04x\":%d", i ? "," : "", cp, i);
    }
    len += (size_t)snprintf(b + len, cap - len,
        ",\"\\u0120t\":256,\"he\":257,\"\\u0120the\":258,\"in\":259,\"\\u0120\\u0120\":260},"
        "\"merges\":[[\"\\u0120\",\"t\"],[\"h\",\"e\"],[\"\\u0120t\",\"he\"],[\"i\",\"n\"],[\"\\u0120\",\"\\u0120\"]]}}");
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char path[4096], err[512];
    const char *cache = getenv("LLMR_CACHE"), *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/tokenizer-gptoss/tokenizer.json",
             cache && *cache ? cache : home ? home : "/tmp");
    if (!(cache && *cache)) snprintf(path, sizeof path, "%s/.cache/llmr/tokenizer-gptoss/tokenizer.json", home ? home : "/tmp");
    if (tokenizer_create_from_file(path, &tok, err, sizeof err) != 0) {
        char *j = builtin_json();
        if (tokenizer_create_from_buffer(j, strlen(j), "builtin", &tok, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_tokenizer: builtin tokenizer failed: %s\n", err);
            abort();
        }
        free(j);
    }
    return 0;
}

/* The lossy form of s: each maximal invalid subpart becomes U+FFFD (reference implementation,
 * independent of the library's). */
static size_t lossy(const uint8_t *s, size_t n, uint8_t *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t need = 0; uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) { out[o++] = c; i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        size_t k = 1;
        if (need) {
            while (k <= need && i + k < n && s[i + k] >= lo && s[i + k] <= hi) { k++; lo = 0x80; hi = 0xBF; }
        }
        if (need && k == need + 1) { memcpy(out + o, s + i, k); o += k; }
        else { out[o++] = 0xEF; out[o++] = 0xBF; out[o++] = 0xBD; }
        i += k;
    }
    return o;
}

static void fuzz_encode(const uint8_t *d, size_t n, unsigned flags) {
    int32_t *ids;
    size_t nids, count, len;
    char *back;
    if (tokenizer_encode(tok, (const char *)d, n, flags, &ids, &nids, NULL, 0) != 0) {
        if (flags & TOKENIZER_ENCODE_STRICT_UTF8) return; /* invalid UTF-8 refused: fine */
        abort();
    }
    if (tokenizer_count(tok, (const char *)d, n, flags & ~TOKENIZER_ENCODE_STRICT_UTF8, &count, NULL, 0) != 0 || count != nids) abort();
    if (tokenizer_decode(tok, ids, nids, 0, &back, &len, NULL, 0) != 0) abort();
    uint8_t *want = malloc(3 * n + 1);
    size_t wl = lossy(d, n, want);
    if (wl != len || memcmp(want, back, len) != 0) abort();
    free(want);
    free(back);
    free(ids);
}

static void fuzz_decoder(const uint8_t *d, size_t n, unsigned flags) {
    size_t nids = n / 4, vs = tokenizer_vocab_size(tok);
    int32_t *ids = malloc((nids + 1) * sizeof *ids);
    for (size_t i = 0; i < nids; i++) {
        uint32_t v;
        memcpy(&v, d + 4 * i, 4);
        ids[i] = (int32_t)(v % (vs + 16)); /* mostly valid, some unknown */
    }
    flags |= TOKENIZER_DECODE_SKIP_UNKNOWN;
    tokenizer_decoder *dec = tokenizer_decoder_create(tok, flags);
    if (!dec) abort();
    size_t cap = 64, len = 0;
    char *acc = malloc(cap);
    for (size_t i = 0; i <= nids; i++) {
        const char *out;
        size_t ol;
        if (i < nids) { if (tokenizer_decoder_push(dec, ids[i], &out, &ol, NULL, 0) != 0) abort(); }
        else tokenizer_decoder_flush(dec, &out, &ol);
        if (flags & TOKENIZER_DECODE_LOSSY) {
            uint8_t *chk = malloc(3 * ol + 1);
            if (lossy((const uint8_t *)out, ol, chk) != ol || memcmp(chk, out, ol) != 0) abort();
            free(chk);
        }
        while (len + ol > cap) acc = realloc(acc, cap *= 2);
        memcpy(acc + len, out, ol);
        len += ol;
    }
    char *want;
    size_t wl;
    if (tokenizer_decode(tok, ids, nids, flags, &want, &wl, NULL, 0) != 0) abort();
    if (wl != len || memcmp(want, acc, len) != 0) abort();
    free(want);
    free(acc);
    free(ids);
    tokenizer_decoder_destroy(dec);
}

static void fuzz_load(const uint8_t *d, size_t n) {
    tokenizer *t = NULL;
    char err[256];
    int rc = tokenizer_create_from_buffer((const char *)d, n, "fuzz.json", &t, err, sizeof err);
    if (rc == 0) {
        int32_t *ids;
        size_t k;
        if (tokenizer_encode(t, "Hello, world! 123 \xe3\x81\x82", 20, 0, &ids, &k, NULL, 0) == 0) free(ids);
        tokenizer_destroy(t);
    } else if (t != NULL || err[0] == 0) {
        abort(); /* failures leave *out untouched and always explain themselves */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t sel = data[0];
    if (sel < 128) fuzz_encode(data + 1, size - 1, sel & 3u);
    else if (sel < 192) fuzz_decoder(data + 1, size - 1, sel & 3u);
    else fuzz_load(data + 1, size - 1);
    return 0;
}
