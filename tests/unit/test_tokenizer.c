/* Unit tests for common/tokenizer: the real gpt-oss tokenizer.json against published o200k vectors
 * (tests/data/o200k-test-vectors.json, see tests/data/README.md for its origin), round trips on the
 * conformance corpus, special tokens, invalid UTF-8, the streaming decoder, concurrent encoding;
 * and small synthetic tokenizer.json files for BPE merge semantics and load errors (these need no
 * fixture). Tests that need the cached real tokenizer skip when it is absent. */
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tok_internal.h" /* split_fast_path checks tok_split_o200k against t->re */
#include "tests/unit/testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

static tokenizer *g_tok;        /* the real gpt-oss tokenizer, loaded once before the tests fork */
static char g_skip[600];        /* why g_tok is NULL */
static double g_load_ms;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void load_real(void) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/tokenizer-gptoss/tokenizer.json", llmr_test_cache_dir());
    setenv("LLMR_TOKENIZER_CACHE", "off", 1); /* these tests exercise the JSON reader; binary_cache the cache */
    double t0 = now_ms();
    int rc = tokenizer_create_from_file(path, &g_tok, err, sizeof err);
    g_load_ms = now_ms() - t0;
    if (rc) snprintf(g_skip, sizeof g_skip, "real tokenizer not loadable (%s); run make deps", err);
    else printf("loaded %s in %.1f ms\n", path, g_load_ms);
}

static void free_real(void) { tokenizer_destroy(g_tok); }

#define NEED_REAL() do { if (!g_tok) LLMR_SKIP("%s", g_skip); } while (0)

/* Reads a whole file (NUL-terminated); NULL if absent. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = (size_t)n; }
    return buf;
}

static int32_t *enc(const tokenizer *t, const char *s, size_t len, unsigned flags, size_t *n) {
    int32_t *ids;
    char err[256];
    int rc = tokenizer_encode(t, s, len, flags, &ids, n, err, sizeof err);
    ck_assert_msg(rc == 0, "encode failed: %s", err);
    return ids;
}

static char *dec(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
    char *s, err[256];
    int rc = tokenizer_decode(t, ids, n, flags, &s, len, err, sizeof err);
    ck_assert_msg(rc == 0, "decode failed: %s", err);
    return s;
}

/* --- published / generated o200k vectors ------------------------------------------------------ */

static json_t *load_vectors(void) {
    json_error_t je;
    json_t *v = json_load_file("tests/data/o200k-test-vectors.json", 0, &je);
    ck_assert_msg(v != NULL, "tests/data/o200k-test-vectors.json: %s", je.text);
    return v;
}

/* A vector applies to the HF file unless it needs a special token only tiktoken/harmony know. */
static int vector_applies(const json_t *c) {
    json_t *ids = json_object_get(c, "ids");
    for (size_t i = 0; i < json_array_size(ids); i++)
        if (!tokenizer_id_known(g_tok, (int32_t)json_integer_value(json_array_get(ids, i)))) return 0;
    const char *enc_name = json_string_value(json_object_get(c, "encoding"));
    if (json_is_true(json_object_get(c, "allow_special")) && !strcmp(enc_name, "o200k_harmony") &&
        strstr(json_string_value(json_object_get(c, "text")), "<|endofprompt|>"))
        return 0;
    return 1;
}

START_TEST(vectors_encode) {
    NEED_REAL();
    json_t *v = load_vectors();
    const char *groups[] = {"published", "generated"};
    size_t checked = 0, skipped = 0;
    for (int g = 0; g < 2; g++) {
        json_t *arr = json_object_get(v, groups[g]);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *c = json_array_get(arr, i);
            if (!vector_applies(c)) { skipped++; continue; }
            json_t *want = json_object_get(c, "ids"), *text = json_object_get(c, "text");
            unsigned flags = json_is_true(json_object_get(c, "allow_special")) ? 0 : TOKENIZER_ENCODE_NO_SPECIAL;
            size_t n;
            int32_t *ids = enc(g_tok, json_string_value(text), json_string_length(text), flags, &n);
            int same = n == json_array_size(want);
            for (size_t k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(want, k));
            ck_assert_msg(same, "%s[%zu] (%s): ids differ for %.60s (got %zu ids, want %zu)", groups[g], i,
                          json_string_value(json_object_get(c, "source")), json_string_value(text), n,
                          json_array_size(want));
            free(ids);
            checked++;
        }
    }
    printf("vectors: %zu checked, %zu skipped (need specials the HF file lacks)\n", checked, skipped);
    ck_assert_uint_ge(checked, 190);
    ck_assert_uint_le(skipped, 5);
    json_decref(v);
}
END_TEST

START_TEST(vectors_decode) {
    NEED_REAL();
    json_t *v = load_vectors();
    json_t *arr = json_object_get(v, "decode_vectors");
    ck_assert_uint_gt(json_array_size(arr), 0);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *c = json_array_get(arr, i), *ids = json_object_get(c, "ids");
        size_t n = json_array_size(ids), len;
        int32_t *buf = malloc(n * sizeof *buf);
        for (size_t k = 0; k < n; k++) buf[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        char *s = dec(g_tok, buf, n, 0, &len);
        ck_assert_uint_eq(len, json_string_length(json_object_get(c, "text")));
        ck_assert_mem_eq(s, json_string_value(json_object_get(c, "text")), len);
        free(s);
        free(buf);
    }
    /* decode(encode(x)) == x for every vector text. */
    const char *groups[] = {"published", "generated"};
    for (int g = 0; g < 2; g++) {
        json_t *a = json_object_get(v, groups[g]);
        for (size_t i = 0; i < json_array_size(a); i++) {
            json_t *text = json_object_get(json_array_get(a, i), "text");
            size_t n, len;
            int32_t *ids = enc(g_tok, json_string_value(text), json_string_length(text), 0, &n);
            char *s = dec(g_tok, ids, n, 0, &len);
            ck_assert_uint_eq(len, json_string_length(text));
            ck_assert_mem_eq(s, json_string_value(text), len);
            free(s);
            free(ids);
        }
    }
    json_decref(v);
}
END_TEST

/* --- corpus round trips ---------------------------------------------------------------------- */

/* Calls fn on every committed corpus text (files, then cases.jsonl lines). */
static size_t for_each_corpus_text(void (*fn)(const char *, size_t, const char *)) {
    size_t count = 0;
    DIR *d = opendir("tests/data/tokenizer");
    ck_assert_msg(d != NULL, "tests/data/tokenizer missing (run from the repository root)");
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".txt")) continue;
        char path[600];
        snprintf(path, sizeof path, "tests/data/tokenizer/%s", e->d_name);
        size_t len;
        char *s = slurp(path, &len);
        ck_assert_ptr_nonnull(s);
        fn(s, len, path);
        free(s);
        count++;
    }
    closedir(d);
    char *lines = slurp("tests/data/tokenizer/cases.jsonl", NULL);
    ck_assert_ptr_nonnull(lines);
    for (char *line = strtok(lines, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        ck_assert(json_is_string(j));
        fn(json_string_value(j), json_string_length(j), line);
        json_decref(j);
        count++;
    }
    free(lines);
    return count;
}

static void roundtrip_one(const char *s, size_t len, const char *what) {
    for (unsigned flags = 0; flags <= TOKENIZER_ENCODE_NO_SPECIAL; flags++) {
        size_t n, out_len, counted;
        int32_t *ids = enc(g_tok, s, len, flags, &n);
        char *back = dec(g_tok, ids, n, 0, &out_len);
        ck_assert_msg(out_len == len && memcmp(back, s, len) == 0, "round trip differs for %s", what);
        ck_assert_int_eq(tokenizer_count(g_tok, s, len, flags, &counted, NULL, 0), 0);
        ck_assert_uint_eq(counted, n);
        free(back);
        free(ids);
    }
}

START_TEST(corpus_roundtrip) {
    NEED_REAL();
    ck_assert_uint_ge(for_each_corpus_text(roundtrip_one), 100);
}
END_TEST

/* --- special tokens and lookups -------------------------------------------------------------- */

START_TEST(special_tokens) {
    NEED_REAL();
    ck_assert_uint_eq(tokenizer_vocab_size(g_tok), 200019);
    ck_assert_uint_eq(tokenizer_added_count(g_tok), 21);
    static const struct { const char *text; int32_t id; } sp[] = {
        {"<|startoftext|>", 199998}, {"<|endoftext|>", 199999}, {"<|return|>", 200002},
        {"<|constrain|>", 200003}, {"<|channel|>", 200005}, {"<|start|>", 200006}, {"<|end|>", 200007},
        {"<|message|>", 200008}, {"<|call|>", 200012}, {"<|reserved_200017|>", 200017},
        {"<|endofprompt|>", 200018}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        ck_assert_int_eq(tokenizer_special_id(g_tok, sp[i].text), sp[i].id);
        ck_assert(tokenizer_id_is_special(g_tok, sp[i].id));
        size_t n, pl;
        int32_t *ids = enc(g_tok, sp[i].text, strlen(sp[i].text), 0, &n);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(ids[0], sp[i].id);
        free(ids);
        ids = enc(g_tok, sp[i].text, strlen(sp[i].text), TOKENIZER_ENCODE_NO_SPECIAL, &n);
        ck_assert_uint_gt(n, 1); /* plain text */
        free(ids);
        const char *piece = tokenizer_id_to_piece(g_tok, sp[i].id, &pl);
        ck_assert_str_eq(piece, sp[i].text);
        ck_assert_int_eq(tokenizer_piece_to_id(g_tok, sp[i].text, strlen(sp[i].text)), sp[i].id);
    }
    ck_assert_int_eq(tokenizer_special_id(g_tok, "<|reserved_201087|>"), -1);
    ck_assert_int_eq(tokenizer_special_id(g_tok, "<|START|>"), -1);
    ck_assert(!tokenizer_id_is_special(g_tok, 24912));
    ck_assert(!tokenizer_id_known(g_tok, 200019));
    ck_assert(!tokenizer_id_known(g_tok, -1));
    ck_assert_ptr_null(tokenizer_id_to_piece(g_tok, 300000, NULL));
    size_t len;
    ck_assert_str_eq(tokenizer_id_to_piece(g_tok, 24912, &len), "hello");
    const char *b = tokenizer_id_to_bytes(g_tok, 2375, &len); /* "Ġworld" */
    ck_assert_uint_eq(len, 6);
    ck_assert_mem_eq(b, " world", 6);
    ck_assert_str_eq(tokenizer_id_to_piece(g_tok, 2375, NULL), "\xc4\xa0world");
    ck_assert_int_eq(tokenizer_piece_to_id(g_tok, "\xc4\xa0world", 7), 2375);
    ck_assert_int_eq(tokenizer_piece_to_id(g_tok, " world", 6), -1); /* bytes are not a piece */
    /* Every id's piece maps back to the id. */
    for (int32_t id = 0; id < (int32_t)tokenizer_vocab_size(g_tok); id++) {
        if (!tokenizer_id_known(g_tok, id)) continue;
        const char *p = tokenizer_id_to_piece(g_tok, id, &len);
        ck_assert_int_eq(tokenizer_piece_to_id(g_tok, p, len), id);
    }
    /* Look-alikes stay text; a special inside text is cut out exactly. */
    size_t n;
    int32_t *ids = enc(g_tok, "a<|end|>b<|START|>", 18, 0, &n);
    ck_assert_int_eq(ids[1], 200007);
    for (size_t i = 2; i < n; i++) ck_assert_int_lt(ids[i], 199998);
    free(ids);
}
END_TEST

/* --- invalid UTF-8 ---------------------------------------------------------------------------- */

static void assert_same_ids(const char *a, size_t al, const char *b, size_t bl) {
    size_t na, nb;
    int32_t *x = enc(g_tok, a, al, 0, &na), *y = enc(g_tok, b, bl, 0, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(x, y, na * sizeof *x);
    free(x);
    free(y);
}

START_TEST(invalid_utf8) {
    NEED_REAL();
    /* Each maximal invalid subpart becomes one U+FFFD (as from_utf8_lossy). */
    assert_same_ids("a\xff" "b", 3, "a\xef\xbf\xbd" "b", 5);
    assert_same_ids("x\xe2\x82", 3, "x\xef\xbf\xbd", 4);                      /* truncated */
    assert_same_ids("\xe0\x80z", 3, "\xef\xbf\xbd\xef\xbf\xbdz", 7);          /* E0 80: two parts */
    assert_same_ids("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 9); /* surrogate */
    assert_same_ids("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 12);
    assert_same_ids("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", 6);          /* overlong */
    assert_same_ids("a\0b", 3, "a\0b", 3);                                     /* NUL is text */
    int32_t *ids = NULL;
    size_t n;
    char err[256] = "";
    ck_assert_int_eq(tokenizer_encode(g_tok, "ok\xfe", 3, TOKENIZER_ENCODE_STRICT_UTF8, &ids, &n, err, sizeof err),
                     TOKENIZER_EUTF8);
    ck_assert_ptr_nonnull(strstr(err, "byte 2"));
    ck_assert_ptr_null(ids);
    /* Empty text. */
    ids = enc(g_tok, "", 0, 0, &n);
    ck_assert_uint_eq(n, 0);
    free(ids);
}
END_TEST

/* --- decode options and the streaming decoder --------------------------------------------------- */

START_TEST(decode_options) {
    NEED_REAL();
    int32_t ids[] = {200006, 1428, 200008, 12194, 200007};
    size_t len;
    char *s = dec(g_tok, ids, 5, 0, &len);
    ck_assert_str_eq(s, "<|start|>user<|message|>Hi<|end|>");
    free(s);
    s = dec(g_tok, ids, 5, TOKENIZER_DECODE_SKIP_SPECIAL, &len);
    ck_assert_str_eq(s, "userHi");
    free(s);
    int32_t bad[] = {12194, 250000, 12194};
    char *out = NULL, err[256] = "";
    ck_assert_int_eq(tokenizer_decode(g_tok, bad, 3, 0, &out, &len, err, sizeof err), TOKENIZER_EBADID);
    ck_assert_ptr_nonnull(strstr(err, "250000"));
    ck_assert_ptr_nonnull(strstr(err, "index 1"));
    ck_assert_ptr_null(out);
    s = dec(g_tok, bad, 3, TOKENIZER_DECODE_SKIP_UNKNOWN, &len);
    ck_assert_str_eq(s, "HiHi");
    free(s);
    /* Byte tokens of a truncated character: raw keeps the bytes, lossy gives U+FFFD. */
    int32_t euro2[] = {tokenizer_piece_to_id(g_tok, "\xc3\xa2", 2), tokenizer_piece_to_id(g_tok, "\xc4\xa4", 2)};
    ck_assert_int_ge(euro2[0], 0);
    ck_assert_int_ge(euro2[1], 0);
    s = dec(g_tok, euro2, 2, 0, &len);
    ck_assert_uint_eq(len, 2);
    ck_assert_mem_eq(s, "\xe2\x82", 2);
    free(s);
    s = dec(g_tok, euro2, 2, TOKENIZER_DECODE_LOSSY, &len);
    ck_assert_str_eq(s, "\xef\xbf\xbd");
    free(s);
}
END_TEST

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++) if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* Streams ids through a decoder and checks: lossy chunks are valid UTF-8; concatenation + flush
 * equals tokenizer_decode with the same flags. */
static void stream_check(const int32_t *ids, size_t n, unsigned flags) {
    tokenizer_decoder *d = tokenizer_decoder_create(g_tok, flags);
    ck_assert_ptr_nonnull(d);
    size_t cap = 1024, len = 0;
    char *acc = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        const char *out;
        size_t ol;
        char err[128];
        ck_assert_int_eq(tokenizer_decoder_push(d, ids[i], &out, &ol, err, sizeof err), 0);
        if (flags & TOKENIZER_DECODE_LOSSY) ck_assert(valid_utf8(out, ol));
        while (len + ol + 8 > cap) acc = realloc(acc, cap *= 2);
        memcpy(acc + len, out, ol);
        len += ol;
    }
    ck_assert_uint_eq(tokenizer_decoder_count(d), n);
    const char *out;
    size_t ol;
    tokenizer_decoder_flush(d, &out, &ol);
    while (len + ol + 8 > cap) acc = realloc(acc, cap *= 2);
    memcpy(acc + len, out, ol);
    len += ol;
    size_t want_len;
    char *want = dec(g_tok, ids, n, flags, &want_len);
    ck_assert_uint_eq(len, want_len);
    ck_assert_mem_eq(acc, want, len);
    ck_assert_uint_eq(tokenizer_decoder_count(d), 0);
    free(want);
    free(acc);
    tokenizer_decoder_destroy(d);
}

static void stream_text(const char *s, size_t len, const char *what) {
    (void)what;
    size_t n;
    int32_t *ids = enc(g_tok, s, len, 0, &n);
    stream_check(ids, n, TOKENIZER_DECODE_LOSSY);
    stream_check(ids, n, 0);
    free(ids);
}

START_TEST(stream_decoder) {
    NEED_REAL();
    for_each_corpus_text(stream_text);
    /* Random ids, weighted towards single-byte tokens that split characters. */
    unsigned seed = 12345;
    int32_t ids[64];
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rand_r(&seed) % 64);
        for (size_t i = 0; i < n; i++) {
            int r = rand_r(&seed) % 3;
            ids[i] = r == 0 ? rand_r(&seed) % 256 : r == 1 ? tokenizer_piece_to_id(g_tok, "\xc3\xa2", 2)
                                                           : rand_r(&seed) % 199998;
        }
        stream_check(ids, n, TOKENIZER_DECODE_LOSSY);
        stream_check(ids, n, 0);
        stream_check(ids, n, TOKENIZER_DECODE_LOSSY | TOKENIZER_DECODE_SKIP_SPECIAL);
    }
    /* An unknown id is an error that leaves the stream usable. */
    tokenizer_decoder *d = tokenizer_decoder_create(g_tok, TOKENIZER_DECODE_LOSSY);
    const char *out;
    size_t ol;
    char err[128];
    ck_assert_int_eq(tokenizer_decoder_push(d, 999999, &out, &ol, err, sizeof err), TOKENIZER_EBADID);
    ck_assert_int_eq(tokenizer_decoder_push(d, 24912, &out, &ol, err, sizeof err), 0);
    ck_assert_uint_eq(ol, 5);
    ck_assert_mem_eq(out, "hello", 5);
    /* Half a character is held back, then flushed as U+FFFD. */
    ck_assert_int_eq(tokenizer_decoder_push(d, tokenizer_piece_to_id(g_tok, "\xc3\xa2", 2), &out, &ol, err, sizeof err), 0);
    ck_assert_uint_eq(ol, 0);
    tokenizer_decoder_flush(d, &out, &ol);
    ck_assert_uint_eq(ol, 3);
    ck_assert_mem_eq(out, "\xef\xbf\xbd", 3);
    tokenizer_decoder_destroy(d);
    tokenizer_decoder_destroy(NULL);
}
END_TEST

/* --- concurrency ----------------------------------------------------------------------------- */

typedef struct job { const char *text; size_t len; int32_t *ids; size_t n; int ok; } job;

static void *encode_thread(void *arg) {
    job *j = arg;
    j->ok = 1;
    for (int r = 0; r < 3 && j->ok; r++) {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(g_tok, j->text, j->len, 0, &ids, &n, NULL, 0) != 0) { j->ok = 0; break; }
        j->ok = n == j->n && memcmp(ids, j->ids, n * sizeof *ids) == 0;
        free(ids);
    }
    return NULL;
}

START_TEST(concurrent_encode) {
    NEED_REAL();
    size_t len;
    char *text = slurp("tests/data/tokenizer/prose_en.txt", &len);
    char *big = malloc(len * 20 + 1);
    for (int i = 0; i < 20; i++) memcpy(big + i * len, text, len);
    job jobs[4];
    pthread_t th[4];
    size_t n;
    int32_t *ref = enc(g_tok, big, len * 20, 0, &n);
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){big, len * 20, ref, n, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, encode_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(jobs[i].ok, "thread %d got different ids", i);
    }
    free(ref);
    free(big);
    free(text);
}
END_TEST

/* --- synthetic tokenizer.json files (no fixture needed) --------------------------------------- */

/* GPT-2's bytes_to_unicode, written independently of the library: the piece for byte b. */
static void byte_piece(int b, char out[3]) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int cp = b;
    if (!printable) {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

typedef struct synth {
    const char *added, *normalizer, *pretok, *decoder, *ignore_merges, *vocab_extra, *merges, *model_extra;
} synth;

static const char *SPLIT_PRETOK =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\" ?\\\\p{L}+|\\\\s+|[^\\\\s\\\\p{L}]+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}";

/* Builds a tokenizer.json: ids 0..255 are the bytes (byte order), extras follow. */
static char *synth_json(const synth *s) {
    size_t cap = 65536, len = 0;
    char *b = malloc(cap);
    len += (size_t)snprintf(b + len, cap - len,
        "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[%s],"
        "\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":null,\"decoder\":%s,"
        "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,%s\"ignore_merges\":%s,\"vocab\":{",
        s->added ? s->added : "", s->normalizer ? s->normalizer : "null", s->pretok ? s->pretok : SPLIT_PRETOK,
        s->decoder ? s->decoder : "{\"type\":\"ByteLevel\"}", s->model_extra ? s->model_extra : "",
        s->ignore_merges ? s->ignore_merges : "false");
    for (int i = 0; i < 256; i++) {
        char p[3];
        byte_piece(i, p);
        len += (size_t)snprintf(b + len, cap - len, "%s\"%s%s\":%d", i ? "," : "",
                                (p[0] == '"' || p[0] == '\\') ? "\\" : "", p, i);
    }
    len += (size_t)snprintf(b + len, cap - len, "%s},\"merges\":[%s]}}", s->vocab_extra ? s->vocab_extra : "",
                            s->merges ? s->merges : "");
    return b;
}

static tokenizer *synth_load(const synth *s, int want_rc, const char *want_msg) {
    char *j = synth_json(s), err[512] = "";
    tokenizer *t = NULL;
    int rc = tokenizer_create_from_buffer(j, strlen(j), "synth.json", &t, err, sizeof err);
    ck_assert_msg(rc == want_rc, "rc %d (%s), want %d", rc, err, want_rc);
    if (want_msg) ck_assert_msg(strstr(err, want_msg) != NULL, "message '%s' lacks '%s'", err, want_msg);
    free(j);
    return t;
}

static void expect_ids(const tokenizer *t, const char *text, const int32_t *want, size_t nwant) {
    size_t n;
    int32_t *ids = enc(t, text, strlen(text), 0, &n);
    ck_assert_msg(n == nwant, "'%s': %zu ids, want %zu", text, n, nwant);
    for (size_t i = 0; i < n; i++) ck_assert_msg(ids[i] == want[i], "'%s': id[%zu]=%d, want %d", text, i, ids[i], want[i]);
    free(ids);
}

START_TEST(bpe_merge_order) {
    /* 256 "bc", 257 "ab", 258 "abc"(a+bc), 259 "aa". Merges: bc (rank 0) before ab (rank 1). */
    synth s = {.vocab_extra = ",\"bc\":256,\"ab\":257,\"abc\":258,\"aa\":259,\"xyz\":260",
               .merges = "[\"b\",\"c\"],[\"a\",\"b\"],[\"a\",\"bc\"],[\"a\",\"a\"]"};
    tokenizer *t = synth_load(&s, 0, NULL);
    expect_ids(t, "abc", (int32_t[]){258}, 1);          /* b+c first, then a+bc */
    expect_ids(t, "ab", (int32_t[]){257}, 1);
    expect_ids(t, "abab", (int32_t[]){257, 257}, 2);
    expect_ids(t, "aaa", (int32_t[]){259, 'a'}, 2);     /* equal ranks: leftmost first */
    expect_ids(t, "aaaaa", (int32_t[]){259, 259, 'a'}, 3);
    expect_ids(t, "xyz", (int32_t[]){'x', 'y', 'z'}, 3); /* ignore_merges=false: merges only */
    expect_ids(t, " ab", (int32_t[]){' ', 257}, 2);
    ck_assert_uint_eq(tokenizer_vocab_size(t), 261);
    tokenizer_destroy(t);
    /* ignore_merges=true: a whole-word vocab entry wins; legacy "a b" merge strings. */
    synth s2 = {.ignore_merges = "true", .vocab_extra = ",\"bc\":256,\"xyz\":257",
                .merges = "\"b c\""};
    t = synth_load(&s2, 0, NULL);
    expect_ids(t, "xyz", (int32_t[]){257}, 1);
    expect_ids(t, "xbc", (int32_t[]){'x', 256}, 2);
    tokenizer_destroy(t);
}
END_TEST

START_TEST(synthetic_specials_and_gpt2) {
    synth s = {.added = "{\"id\":300,\"content\":\"<s>\",\"special\":true},"
                        "{\"id\":301,\"content\":\"<sep>\",\"special\":false},"
                        "{\"id\":302,\"content\":\"<s\",\"special\":false}",
               .pretok = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"};
    tokenizer *t = synth_load(&s, 0, NULL);
    expect_ids(t, "<s>", (int32_t[]){300}, 1);
    expect_ids(t, "<sep>", (int32_t[]){301}, 1);  /* longest match at the leftmost position */
    expect_ids(t, "<s", (int32_t[]){302}, 1);
    size_t n;
    /* NO_SPECIAL: the special match "<s>" is stepped over as text (HF split_special_tokens). */
    int32_t *ids = enc(t, "<s><sep>", 8, TOKENIZER_ENCODE_NO_SPECIAL, &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[0], '<');
    ck_assert_int_eq(ids[3], 301);
    free(ids);
    ck_assert_uint_eq(tokenizer_vocab_size(t), 303);
    ck_assert(!tokenizer_id_known(t, 299));
    ck_assert(tokenizer_id_is_special(t, 300));
    ck_assert(!tokenizer_id_is_special(t, 301));
    /* GPT-2 regex: "'s" is its own piece, so no merge can cross it. */
    expect_ids(t, "it's", (int32_t[]){'i', 't', '\'', 's'}, 4);
    tokenizer_destroy(t);
}
END_TEST

START_TEST(load_errors) {
    char err[512] = "";
    tokenizer *t = NULL;
    ck_assert_int_eq(tokenizer_create_from_file("/nonexistent/tokenizer.json", &t, err, sizeof err), TOKENIZER_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/tokenizer.json"));
    ck_assert_ptr_null(t);
    ck_assert_int_eq(tokenizer_create_from_buffer("{\"model\": {\"vocab\": {\"a\": 1,}}}", 31, "bad.json", &t, err, sizeof err),
                     TOKENIZER_EPARSE);
    ck_assert_ptr_nonnull(strstr(err, "bad.json: line 1"));
    ck_assert_ptr_nonnull(strstr(err, "model.vocab"));
    ck_assert_int_eq(tokenizer_create_from_buffer("{\"model\": {\"vocab\": {\"\xff\": 1}}}", 29, "u.json", &t, err, sizeof err),
                     TOKENIZER_EPARSE);
    ck_assert_ptr_nonnull(strstr(err, "UTF-8"));
    ck_assert_int_eq(tokenizer_create_from_buffer("", 0, "empty.json", &t, err, sizeof err), TOKENIZER_EPARSE);
    ck_assert_str_eq(tokenizer_strerror(TOKENIZER_EUNSUPPORTED), "unsupported tokenizer component");
    ck_assert_str_eq(tokenizer_strerror(12345), "unknown status");

    /* Shapes that would tokenize differently from HF are refused, naming the component. */
    synth nfc = {.normalizer = "{\"type\":\"NFC\"}"};
    synth_load(&nfc, TOKENIZER_EUNSUPPORTED, "unsupported component: normalizer NFC");
    synth lstrip = {.added = "{\"id\":300,\"content\":\"<m>\",\"lstrip\":true,\"special\":true}"};
    synth_load(&lstrip, TOKENIZER_EUNSUPPORTED, "added_tokens[0] (<m>) with lstrip=true");
    synth meta = {.pretok = "{\"type\":\"Metaspace\",\"replacement\":\"_\"}"};
    synth_load(&meta, TOKENIZER_EUNSUPPORTED, "unsupported component: pre_tokenizer Metaspace");
    synth removed = {.pretok = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}"};
    synth_load(&removed, TOKENIZER_EUNSUPPORTED, "Split behavior Removed");
    synth wp = {.decoder = "{\"type\":\"WordPiece\"}"};
    synth_load(&wp, TOKENIZER_EUNSUPPORTED, "unsupported component: decoder WordPiece");
    synth prefix = {.model_extra = "\"continuing_subword_prefix\":\"##\","};
    synth_load(&prefix, TOKENIZER_EUNSUPPORTED, "continuing_subword_prefix");
    synth badre = {.pretok = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}"};
    synth_load(&badre, TOKENIZER_EUNSUPPORTED, "PCRE2 cannot compile");
    synth badmerge = {.merges = "[\"a\",\"b\"]"};
    synth_load(&badmerge, TOKENIZER_EPARSE, "model.merges[0]");
    synth dupid = {.vocab_extra = ",\"zz\":5"};
    synth_load(&dupid, TOKENIZER_EPARSE, "id 5 is used twice");
    synth bigid = {.vocab_extra = ",\"zz\":99999999999"};
    synth_load(&bigid, TOKENIZER_EPARSE, "limit");
    tokenizer_destroy(NULL);
}
END_TEST

START_TEST(literal_split_and_no_split) {
    /* Split with a String pattern is literal text ("." is not "any character"). */
    synth lit = {.pretok = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\".\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                 .vocab_extra = ",\"ab\":256", .merges = "[\"a\",\"b\"]"};
    tokenizer *t = synth_load(&lit, 0, NULL);
    expect_ids(t, "ab.ab", (int32_t[]){256, '.', 256}, 3);
    expect_ids(t, "a.b", (int32_t[]){'a', '.', 'b'}, 3);
    tokenizer_destroy(t);
}
END_TEST

/* Encodes and decodes the corpus with two tokenizers and requires identical results. */
static const tokenizer *g_other;
static void same_as_other(const char *s, size_t len, const char *what) {
    size_t n1, n2;
    int32_t *a = enc(g_tok, s, len, 0, &n1), *b = enc(g_other, s, len, 0, &n2);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1 * sizeof *a) == 0, "cached tokenizer differs on %s", what);
    free(a);
    free(b);
}

static tokenizer *load_with_cache(const char *dir, int want_from_cache) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/tokenizer-gptoss/tokenizer.json", llmr_test_cache_dir());
    setenv("LLMR_TOKENIZER_CACHE", dir, 1);
    tokenizer *t = NULL;
    ck_assert_msg(tokenizer_create_from_file(path, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(tokenizer_loaded_from_cache(t), want_from_cache);
    return t;
}

START_TEST(binary_cache) {
    NEED_REAL();
    char *dir = llmr_test_tmpdir(), file[600] = "";
    ck_assert_ptr_nonnull(dir);
    tokenizer *t1 = load_with_cache(dir, 0);                   /* parses, writes the cache */
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tokbin")) snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
    closedir(d);
    ck_assert_msg(file[0], "no .tokbin written in %s", dir);
    double t0 = now_ms();
    tokenizer *t2 = load_with_cache(dir, 1);                   /* from the cache */
    printf("cached load: %.1f ms (JSON: %.1f ms)\n", now_ms() - t0, g_load_ms);
    g_other = t2;
    for_each_corpus_text(same_as_other);
    ck_assert_uint_eq(tokenizer_vocab_size(t2), tokenizer_vocab_size(g_tok));
    ck_assert_int_eq(tokenizer_special_id(t2, "<|call|>"), 200012);
    size_t l1, l2;
    const char *p1 = tokenizer_id_to_piece(t2, 2375, &l1), *p2 = tokenizer_id_to_piece(g_tok, 2375, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_mem_eq(p1, p2, l1);
    tokenizer_destroy(t1);
    tokenizer_destroy(t2);

    /* A damaged cache is ignored (and rewritten): flip one byte in the middle, then truncate. */
    size_t len;
    char *img = slurp(file, &len);
    ck_assert_ptr_nonnull(img);
    img[len / 2] ^= 0x5a;
    FILE *f = fopen(file, "wb");
    fwrite(img, 1, len, f);
    fclose(f);
    tokenizer *t3 = load_with_cache(dir, 0);
    tokenizer_destroy(t3);
    tokenizer *t4 = load_with_cache(dir, 1);                   /* rewritten by t3's load */
    tokenizer_destroy(t4);
    f = fopen(file, "wb");
    fwrite(img, 1, len / 3, f);
    fclose(f);
    tokenizer *t5 = load_with_cache(dir, 0);
    tokenizer_destroy(t5);
    tokenizer *t6 = load_with_cache("off", 0);                 /* disabled */
    tokenizer_destroy(t6);
    free(img);
    unlink(file);
    rmdir(dir);
    free(dir);
    setenv("LLMR_TOKENIZER_CACHE", "off", 1);
}
END_TEST

START_TEST(load_time_report) {
    NEED_REAL();
    /* The bench (build/bench/tokenizer) measures this properly; here a loose bound catches a
     * regression to a DOM parse (about a second) without failing on a busy machine. */
    printf("real tokenizer load: %.1f ms\n", g_load_ms);
    ck_assert_double_lt(g_load_ms, 3000.0);
}
END_TEST


/* --- the o200k split fast path (tok_split.c) against the regex ----------------------------- */

static const tokenizer *g_split_tok;   /* tokenizer whose regex judges tok_split_o200k */
static size_t g_split_total, g_split_decided;

/* At every character boundary of s, a decided fast-path answer must be exactly the regex's match
 * (which, for this pattern, starts where the search starts). */
static void split_diff(const char *text, size_t n, const char *what) {
    const uint8_t *s = (const uint8_t *)text;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    ck_assert_ptr_nonnull(md);
    for (size_t i = 0; i < n; i++) {
        if ((s[i] & 0xC0) == 0x80) continue;
        g_split_total++;
        size_t fe = tok_split_o200k(s, n, i);
        if (!fe) continue;
        g_split_decided++;
        int rc = pcre2_match(g_split_tok->re, s, n, i, 0, md, NULL);
        ck_assert_msg(rc > 0, "%s: offset %zu: fast path says %zu, regex rc %d", what, i, fe, rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        ck_assert_msg(ov[0] == i && ov[1] == fe, "%s: offset %zu: fast path match ends at %zu, regex [%zu, %zu) "
                      "(text %.*s)", what, i, fe, (size_t)ov[0], (size_t)ov[1], (int)(n - i < 40 ? n - i : 40), text + i);
    }
    pcre2_match_data_free(md);
}

/* Random valid UTF-8 from pieces that sit on every boundary the fast path reasons about:
 * contractions in both cases, every ASCII class, and non-ASCII letters, marks, digits, spaces
 * and punctuation right after them (U+017F and U+212A fold to 's' and 'k' caselessly). */
static void split_random(unsigned rounds) {
    static const char *const P[] = {
        "a", "z", "A", "Z", "b", "Q", "s", "S", "t", "T", "r", "e", "E", "v", "m", "M", "l", "L", "d", "k",
        "'", "'", "'s", "'T", "'re", "'Ve", "'LL", "'d", "'m", "'x", "'l", "'r",
        "0", "7", "9", "12", "345", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f",
        ".", ",", "/", "//", "-", "_", "(", ")", "\"", "#", "@", "[", "`", "{", "~", "\x01", "\x1f", "\x7f", "<|",
        "\xc3\xa9" /* é */, "\xc5\xbf" /* ſ */, "\xe2\x84\xaa" /* Kelvin */, "\xc2\xa0" /* NBSP */,
        "\xc2\x85" /* NEL */, "\xe3\x80\x80" /* ideographic space */, "\xc2\xb2" /* ² */,
        "\xd9\xa3" /* Arabic-Indic 3 */, "\xcc\x81" /* combining acute */, "\xe4\xb8\xad" /* 中 */,
        "\xca\xb0" /* ʰ Lm */, "\xc7\x85" /* ǅ Lt */, "\xe2\x80\x94" /* em dash */,
        "\xf0\x9f\x98\x80" /* emoji */, "\xe1\xa0\x8e" /* U+180E */, "\xef\xbb\xbf" /* U+FEFF */,
        "\xc3\x89" /* É */, "\xce\xa9" /* Ω */};
    uint64_t x = 0x2545F4914F6CDD1Dull;
    char buf[512];
    for (unsigned r = 0; r < rounds; r++) {
        size_t len = 0;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned pieces = (unsigned)(x >> 59) + 1; /* 1..32 */
        for (unsigned k = 0; k < pieces; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = P[(x >> 33) % (sizeof P / sizeof P[0])];
            size_t pl = strlen(p);
            memcpy(buf + len, p, pl);
            len += pl;
        }
        char what[32];
        snprintf(what, sizeof what, "random string %u", r);
        split_diff(buf, len, what);
    }
}

/* The o200k pattern written into a tokenizer.json Split step. */
static char *o200k_pretok(void) {
    size_t cap = 2 * strlen(TOK_O200K_PATTERN) + 512, o = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    o += (size_t)snprintf(b, cap, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"");
    for (const char *p = TOK_O200K_PATTERN; *p; p++) {
        if (*p == '\\' || *p == '"') b[o++] = '\\';
        b[o++] = *p;
    }
    snprintf(b + o, cap - o, "\"},\"behavior\":\"Isolated\",\"invert\":false},"
             "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}");
    return b;
}

START_TEST(split_fast_path) {
    char *pretok = o200k_pretok();
    synth s = {.pretok = pretok, .ignore_merges = "true"};
    tokenizer *t = synth_load(&s, 0, NULL);
    free(pretok);
    ck_assert_msg(t->split_o200k, "the o200k pattern did not enable the fast path");
    /* A few answers spelled out (the differential below checks them all against the regex). */
    static const struct { const char *s; size_t at, end; } known[] = {
        {"don't", 0, 5}, {"DON'T", 0, 5}, {"they'll go", 0, 7}, {"Hello world", 5, 11},
        {"HTTPServer", 0, 10}, {"aB", 0, 1}, {"12345", 0, 3}, {"12345", 3, 5}, {"   x", 0, 2},
        {"a,\n\nb", 1, 4}, {" ...", 0, 4}, {"x  \n  ", 1, 4}, {"\t\tx", 0, 1},
        {"caf\xc3\xa9", 0, 0} /* é may continue the word */, {"it'\xc5\xbf", 0, 0} /* 'ſ = 's caselessly */,
        {"1\xd9\xa3", 0, 0} /* Arabic-Indic digit */, {"  \xc2\xa0", 0, 0} /* NBSP is \s */};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        ck_assert_msg(tok_split_o200k((const uint8_t *)known[k].s, strlen(known[k].s), known[k].at) == known[k].end,
                      "known case %zu: '%s' at %zu", k, known[k].s, known[k].at);
    ck_assert_ptr_nonnull(t->re);
    g_split_tok = t;
    g_split_total = g_split_decided = 0;
    ck_assert_uint_ge(for_each_corpus_text(split_diff), 100);
    printf("split fast path: decided %zu of %zu corpus offsets\n", g_split_decided, g_split_total);
    /* Most of the corpus is ASCII: a fast path that decided little would be checked on little. */
    ck_assert_uint_gt(g_split_decided, g_split_total / 2);
    g_split_total = g_split_decided = 0;
    split_random(15000);
    printf("split fast path: decided %zu of %zu random offsets\n", g_split_decided, g_split_total);
    ck_assert_uint_gt(g_split_decided, g_split_total / 4);
    /* Other patterns keep the regex alone. */
    tokenizer_destroy(t);
    t = synth_load(&(synth){0}, 0, NULL);
    ck_assert(!t->split_o200k);
    tokenizer_destroy(t);
}
END_TEST

START_TEST(split_fast_path_real) {
    NEED_REAL();
    ck_assert_msg(g_tok->split_o200k, "gpt-oss's tokenizer.json pattern no longer matches TOK_O200K_PATTERN");
}
END_TEST

static Suite *tokenizer_suite(void) {
    Suite *s = suite_create("tokenizer");
    TCase *real = tcase_create("gpt-oss");
    tcase_add_unchecked_fixture(real, load_real, free_real);
    tcase_set_timeout(real, 120);
    tcase_add_test(real, vectors_encode);
    tcase_add_test(real, vectors_decode);
    tcase_add_test(real, corpus_roundtrip);
    tcase_add_test(real, special_tokens);
    tcase_add_test(real, invalid_utf8);
    tcase_add_test(real, decode_options);
    tcase_add_test(real, stream_decoder);
    tcase_add_test(real, concurrent_encode);
    tcase_add_test(real, load_time_report);
    tcase_add_test(real, binary_cache);
    tcase_add_test(real, split_fast_path_real);
    suite_add_tcase(s, real);
    TCase *syn = tcase_create("synthetic");
    tcase_add_test(syn, bpe_merge_order);
    tcase_add_test(syn, synthetic_specials_and_gpt2);
    tcase_add_test(syn, load_errors);
    tcase_add_test(syn, literal_split_and_no_split);
    tcase_add_test(syn, split_fast_path);
    suite_add_tcase(s, syn);
    return s;
}

LLMR_TEST_MAIN(tokenizer_suite)
