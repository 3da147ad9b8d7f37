/* tok_load.c — reads tokenizer.json into the layout of tok_internal.h.
 *
 * Order of work: (1) one pass over the file with tok_json: model.vocab and model.merges are read
 * into flat buffers, every other top-level or model member is parsed by jansson from its span;
 * (2) the small sections are checked against the supported shapes (anything else is
 * TOKENIZER_EUNSUPPORTED "unsupported component: …"); (3) the id tables, the bytes map and the merge
 * map are built; (4) the pre-tokenizer regex is compiled with PCRE2 (UTF, UCP, JIT). */
#include "common/tokenizer/tok_internal.h"
#include "common/errmsg.h"
#include "common/tokenizer/tok_json.h"
#include "common/tokenizer/tok_utf8.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TOK_MAX_IDS (1u << 24) /* ids above this are refused: tables are indexed by id */

/* GPT-2's split regex, used by ByteLevel(use_regex=true) (HF byte_level.rs). */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

const char TOK_O200K_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Unicode White_Space (PropList.txt), the meaning of \s in Oniguruma which HF tokenizers uses.
 * PCRE2's own \s also matches U+180E, which is no longer White_Space. */
static const char WHITE_SPACE_ITEMS[] =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

/* --- byte-level alphabet (GPT-2 bytes_to_unicode) ------------------------------------------- */

/* char_byte[cp] = byte that code point cp stands for in the byte-level alphabet, or -1. */
static int16_t char_byte[324];
static pthread_once_t alphabet_once = PTHREAD_ONCE_INIT;

static void build_alphabet(void) {
    for (int i = 0; i < 324; i++) char_byte[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        char_byte[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

/* Converts a piece (UTF-8, byte-level alphabet) to the bytes it stands for, as HF's ByteLevel
 * decoder does: if every character is in the alphabet, the mapped bytes; otherwise the piece's own
 * bytes. Returns 1 when mapped (such a piece is reachable by the encoder), 0 otherwise. out must
 * hold len bytes. */
int tok_piece_to_bytes(const char *piece, size_t len, char *out, size_t *out_len) {
    const uint8_t *p = (const uint8_t *)piece;
    size_t i = 0, o = 0;
    while (i < len) {
        unsigned cp;
        if (p[i] < 0x80) { cp = p[i]; i++; }
        else if ((p[i] & 0xE0) == 0xC0 && i + 1 < len) { cp = (unsigned)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F); i += 2; }
        else goto raw;
        if (cp >= 324 || char_byte[cp] < 0) goto raw;
        out[o++] = (char)char_byte[cp];
    }
    *out_len = o;
    return 1;
raw:
    memcpy(out, piece, len);
    *out_len = len;
    return 0;
}

/* --- pass 1: the file ----------------------------------------------------------------------- */

typedef struct raw_tok {
    tj_buf vocab_pieces;      /* NUL-separated pieces, in file order */
    int32_t *vocab_ids; size_t n_vocab, cap_vocab;
    tj_buf merge_pieces;      /* per merge: left NUL right NUL */
    size_t n_merges, max_merge_piece;
    json_t *top;              /* other top-level members */
    json_t *model;            /* other model members */
} raw_tok;

static void raw_free(raw_tok *r) {
    tj_buf_free(&r->vocab_pieces);
    tj_buf_free(&r->merge_pieces);
    free(r->vocab_ids);
    json_decref(r->top);
    json_decref(r->model);
}

static int jansson_span(tok_json *j, json_t *into, const char *key, const char *ctx) {
    const char *s;
    size_t n;
    if (tj_skip(j, &s, &n, ctx) < 0) return -1;
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
        j->p = s;
        return tj_fail(j, "%s: %s", ctx, je.text);
    }
    json_object_set_new(into, key, v);
    return 0;
}

static int read_vocab(tok_json *j, raw_tok *r) {
    const char *ctx = "model.vocab";
    if (tj_expect(j, '{', ctx) < 0) return -1;
    if (tj_peek(j) == '}') { j->p++; return 0; }
    do {
        if (tj_string(j, &r->vocab_pieces, ctx) < 0) return -1;
        if (tj_buf_add(&r->vocab_pieces, "", 1) < 0) goto oom; /* separator NUL */
        long long id;
        if (tj_expect(j, ':', ctx) < 0 || tj_uint(j, TOK_MAX_IDS - 1, &id, ctx) < 0) return -1;
        if (r->n_vocab == r->cap_vocab) {
            size_t cap = r->cap_vocab ? r->cap_vocab * 2 : 1024;
            int32_t *p = realloc(r->vocab_ids, cap * sizeof *p);
            if (!p) goto oom;
            r->vocab_ids = p;
            r->cap_vocab = cap;
        }
        r->vocab_ids[r->n_vocab++] = (int32_t)id;
    } while (tj_next(j, '}', ctx) == 1);
    return j->p[-1] == '}' ? 0 : -1;
oom:
    j->oom = 1;
    return tj_fail(j, "out of memory reading %s", ctx);
}

/* Merges are ["left", "right"] pairs (current format) or "left right" strings (legacy format). */
static int read_merges(tok_json *j, raw_tok *r) {
    const char *ctx = "model.merges";
    if (tj_expect(j, '[', ctx) < 0) return -1;
    if (tj_peek(j) == ']') { j->p++; return 0; }
    do {
        int c = tj_peek(j);
        size_t at = r->merge_pieces.len;
        if (c == '[') {
            j->p++;
            if (tj_string(j, &r->merge_pieces, ctx) < 0) return -1;
            if (tj_buf_add(&r->merge_pieces, "", 1) < 0) goto oom;
            if (tj_expect(j, ',', ctx) < 0) return -1;
            if (tj_string(j, &r->merge_pieces, ctx) < 0) return -1;
            if (tj_buf_add(&r->merge_pieces, "", 1) < 0) goto oom;
            if (tj_expect(j, ']', "model.merges (a merge is a pair)") < 0) return -1;
            size_t lb = strlen(r->merge_pieces.p + at + strlen(r->merge_pieces.p + at) + 1);
            if (lb > r->max_merge_piece) r->max_merge_piece = lb;
        } else {
            if (tj_string(j, &r->merge_pieces, ctx) < 0) return -1;
            char *sp = memchr(r->merge_pieces.p + at, ' ', r->merge_pieces.len - at);
            if (!sp) return tj_fail(j, "merge %zu \"%s\" has no space between its two pieces",
                                    r->n_merges, r->merge_pieces.p + at);
            *sp = '\0';
            if (tj_buf_add(&r->merge_pieces, "", 1) < 0) goto oom;
        }
        size_t la = strlen(r->merge_pieces.p + at);
        if (la > r->max_merge_piece) r->max_merge_piece = la;
        r->n_merges++;
    } while (tj_next(j, ']', ctx) == 1);
    return j->p[-1] == ']' ? 0 : -1;
oom:
    j->oom = 1;
    return tj_fail(j, "out of memory reading %s", ctx);
}

static int read_model(tok_json *j, raw_tok *r) {
    tj_buf key = {0};
    int rc = -1;
    if (tj_expect(j, '{', "model") < 0) goto out;
    if (tj_peek(j) == '}') { j->p++; rc = 0; goto out; }
    int more;
    do {
        key.len = 0;
        if (tj_string(j, &key, "model") < 0 || tj_expect(j, ':', "model") < 0) goto out;
        const char *k = key.p ? key.p : "";
        int ok;
        if (strcmp(k, "vocab") == 0) ok = read_vocab(j, r);
        else if (strcmp(k, "merges") == 0) ok = read_merges(j, r);
        else {
            char ctx[96];
            snprintf(ctx, sizeof ctx, "model.%.80s", k);
            ok = jansson_span(j, r->model, k, ctx);
        }
        if (ok < 0) goto out;
    } while ((more = tj_next(j, '}', "model")) == 1);
    rc = more == 0 ? 0 : -1;
out:
    tj_buf_free(&key);
    return rc;
}

static int read_file_json(tok_json *j, raw_tok *r) {
    tj_buf key = {0};
    int rc = -1, more;
    r->top = json_object();
    r->model = json_object();
    if (!r->top || !r->model) { j->oom = 1; return tj_fail(j, "out of memory"); }
    if (tj_expect(j, '{', "the top level (tokenizer.json is a JSON object)") < 0) goto out;
    if (tj_peek(j) == '}') { j->p++; rc = 0; goto out; }
    do {
        key.len = 0;
        if (tj_string(j, &key, "the top level") < 0 || tj_expect(j, ':', "the top level") < 0)
            goto out;
        const char *k = key.p ? key.p : "";
        int ok = strcmp(k, "model") == 0 ? read_model(j, r) : jansson_span(j, r->top, k, k);
        if (ok < 0) goto out;
    } while ((more = tj_next(j, '}', "the top level")) == 1);
    if (more != 0) goto out;
    if (tj_peek(j) != -1) { tj_fail(j, "trailing data after the top-level object"); goto out; }
    rc = 0;
out:
    tj_buf_free(&key);
    return rc;
}

/* --- pass 2: the small sections --------------------------------------------------------------- */

typedef struct pretok_cfg {
    const char *pattern;  /* NULL: no split */
    size_t pattern_len;
    int literal;          /* Split with {"String": …}: the pattern is literal text */
    char where[96];       /* JSON path of the pattern, for messages */
} pretok_cfg;

#define UNSUP(...) llmr_errf_status(TOKENIZER_EUNSUPPORTED, err, err_size, __VA_ARGS__)

static const char *type_of(json_t *o) {
    const char *t = json_string_value(json_object_get(o, "type"));
    return t ? t : "(no type)";
}

static int is_true(json_t *o, const char *k) { return json_is_true(json_object_get(o, k)); }

static int check_bytelevel_pretok(json_t *bl, const char *where, char *err, size_t err_size) {
    if (is_true(bl, "add_prefix_space"))
        return UNSUP("unsupported component: %s ByteLevel with add_prefix_space=true", where);
    return TOKENIZER_OK;
}

static int parse_split(json_t *s, const char *where, pretok_cfg *c, char *err, size_t err_size) {
    const char *beh = json_string_value(json_object_get(s, "behavior"));
    if (!beh || strcmp(beh, "Isolated") != 0)
        return UNSUP("unsupported component: %s Split behavior %s (only Isolated)", where,
                     beh ? beh : "(missing)");
    if (is_true(s, "invert")) return UNSUP("unsupported component: %s Split with invert=true", where);
    json_t *pat = json_object_get(s, "pattern");
    json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
    json_t *v = json_is_string(re) ? re : str;
    if (!json_is_string(v))
        return llmr_errf_status(TOKENIZER_EPARSE, err, err_size, "%s.pattern: expected {\"Regex\": …} or {\"String\": …}", where);
    c->pattern = json_string_value(v);
    c->pattern_len = json_string_length(v);
    c->literal = v == str;
    snprintf(c->where, sizeof c->where, "%s.pattern.%s", where, v == str ? "String" : "Regex");
    return TOKENIZER_OK;
}

/* Accepted: ByteLevel alone, or Sequence[(Split)?, ByteLevel(use_regex=false unless no Split)]. */
static int parse_pretokenizer(json_t *pt, pretok_cfg *c, char *err, size_t err_size) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(pt))
        return UNSUP("unsupported component: pre_tokenizer %s (byte-level BPE needs ByteLevel)",
                     json_is_null(pt) || !pt ? "null" : "of unexpected JSON type");
    const char *t = type_of(pt);
    json_t *steps = NULL;
    json_t *one[1] = {pt};
    size_t n = 1;
    if (strcmp(t, "Sequence") == 0) {
        steps = json_object_get(pt, "pretokenizers");
        if (!json_is_array(steps)) return llmr_errf_status(TOKENIZER_EPARSE, err, err_size, "pre_tokenizer.pretokenizers: expected an array");
        n = json_array_size(steps);
    }
    int seen_split = 0, seen_bl = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *s = steps ? json_array_get(steps, i) : one[0];
        char where[64];
        if (steps) snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        else snprintf(where, sizeof where, "pre_tokenizer");
        const char *st = type_of(s);
        if (seen_bl) return UNSUP("unsupported component: %s %s after ByteLevel", where, st);
        if (strcmp(st, "Split") == 0) {
            if (seen_split) return UNSUP("unsupported component: %s a second Split", where);
            int rc = parse_split(s, where, c, err, err_size);
            if (rc) return rc;
            seen_split = 1;
        } else if (strcmp(st, "ByteLevel") == 0) {
            int rc = check_bytelevel_pretok(s, where, err, err_size);
            if (rc) return rc;
            json_t *ur = json_object_get(s, "use_regex");
            int use_regex = ur ? json_is_true(ur) : 1; /* HF default: true */
            if (use_regex && seen_split)
                return UNSUP("unsupported component: %s ByteLevel(use_regex=true) after a Split", where);
            if (use_regex) {
                c->pattern = GPT2_PATTERN;
                c->pattern_len = sizeof GPT2_PATTERN - 1;
                snprintf(c->where, sizeof c->where, "%s (GPT-2 regex)", where);
            }
            seen_bl = 1;
        } else {
            return UNSUP("unsupported component: %s %s", where, st);
        }
    }
    if (!seen_bl) return UNSUP("unsupported component: pre_tokenizer without ByteLevel");
    return TOKENIZER_OK;
}

static int check_sections(raw_tok *r, char *err, size_t err_size) {
    json_t *norm = json_object_get(r->top, "normalizer");
    if (norm && !json_is_null(norm)) {
        json_t *list = json_object_get(norm, "normalizers");
        if (!(strcmp(type_of(norm), "Sequence") == 0 && json_is_array(list) && json_array_size(list) == 0))
            return UNSUP("unsupported component: normalizer %s", type_of(norm));
    }
    const char *nulls[] = {"truncation", "padding"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(r->top, nulls[i]);
        if (v && !json_is_null(v)) return UNSUP("unsupported component: %s (must be null)", nulls[i]);
    }
    json_t *dec = json_object_get(r->top, "decoder");
    if (strcmp(type_of(dec), "Sequence") == 0) {
        json_t *l = json_object_get(dec, "decoders");
        if (json_array_size(l) == 1) dec = json_array_get(l, 0);
    }
    if (!json_is_object(dec) || strcmp(type_of(dec), "ByteLevel") != 0)
        return UNSUP("unsupported component: decoder %s (only ByteLevel)",
                     json_is_object(dec) ? type_of(dec) : "null");
    json_t *m = r->model;
    const char *mt = json_string_value(json_object_get(m, "type"));
    if (mt && strcmp(mt, "BPE") != 0) return UNSUP("unsupported component: model %s (only BPE)", mt);
    json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        return UNSUP("unsupported component: model.dropout %g", json_number_value(dropout));
    const char *strs[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = json_string_value(json_object_get(m, strs[i]));
        if (v && *v) return UNSUP("unsupported component: model.%s \"%s\"", strs[i], v);
    }
    return TOKENIZER_OK;
}

/* --- pass 3: tables ------------------------------------------------------------------------ */

/* Allocation for the big hash tables: 2 MiB aligned and marked for transparent huge pages, because
 * building them is a stream of random accesses and TLB misses dominated the load time. */
static void *big_alloc(size_t size) {
    const size_t huge = (size_t)2 << 20;
    if (size < huge) return malloc(size);
    size = (size + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, size);
    if (p) madvise(p, size, MADV_HUGEPAGE);
    return p;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

static int alloc_ids(tokenizer *t, size_t n_ids) {
    t->n_ids = n_ids;
    t->flags = calloc(n_ids, 1);
    t->piece_off = calloc(n_ids, sizeof *t->piece_off);
    t->piece_len = calloc(n_ids, sizeof *t->piece_len);
    t->bytes_off = calloc(n_ids, sizeof *t->bytes_off);
    t->bytes_len = calloc(n_ids, sizeof *t->bytes_len);
    return t->flags && t->piece_off && t->piece_len && t->bytes_off && t->bytes_len ? 0 : -1;
}

/* Records the piece of an id in the blobs (piece as spelled, bytes per the ByteLevel decoder). */
static int set_piece(tokenizer *t, tj_buf *pieces, tj_buf *bytes, int32_t id, const char *piece,
                     size_t len, char *scratch) {
    size_t blen;
    int mapped = tok_piece_to_bytes(piece, len, scratch, &blen);
    if (pieces->len + len + 1 > UINT32_MAX || bytes->len + blen > UINT32_MAX) return -1;
    t->piece_off[id] = (uint32_t)pieces->len;
    t->piece_len[id] = (uint32_t)len;
    t->bytes_off[id] = (uint32_t)bytes->len;
    t->bytes_len[id] = (uint32_t)blen;
    if (tj_buf_add(pieces, piece, len) < 0 || tj_buf_add(pieces, "", 1) < 0 ||
        tj_buf_add(bytes, scratch, blen) < 0)
        return -1;
    t->flags[id] = (uint8_t)((t->flags[id] & ~TOK_F_ENCODABLE) | TOK_F_KNOWN | (mapped ? TOK_F_ENCODABLE : 0));
    return 0;
}

static void bmap_insert(tokenizer *t, int32_t id) {
    const uint8_t *p = (const uint8_t *)t->bytes_blob + t->bytes_off[id];
    uint64_t h = tok_hash_bytes(p, t->bytes_len[id]);
    size_t i = (size_t)h & t->bmap_mask;
    while (t->bmap[i].id >= 0) i = (i + 1) & t->bmap_mask;
    t->bmap[i].id = id;
    t->bmap[i].tag = (uint16_t)(h >> 48);
    t->bmap[i].head = tok_head(p, t->bytes_len[id]);
    t->bmap[i].len = (uint16_t)t->bytes_len[id];
}

static void mmap_put(tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = (size_t)tok_hash_pair(key) & t->mmap_mask;
    while (t->mmap[i].key != TOK_MERGE_EMPTY && t->mmap[i].key != key) i = (i + 1) & t->mmap_mask;
    /* A repeated pair keeps its last rank, as HF's HashMap collect does. */
    t->mmap[i].key = key;
    t->mmap[i].rank = rank;
    t->mmap[i].new_id = new_id;
}

static int cmp_added(const void *a, const void *b, void *blob) {
    const tok_added *x = a, *y = b;
    const uint8_t *px = (const uint8_t *)blob + x->off, *py = (const uint8_t *)blob + y->off;
    if (px[0] != py[0]) return px[0] < py[0] ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Reads added_tokens: ids, content, flags. Fills t->added (unsorted) and the id range. */
static int read_added(json_t *arr, tok_added **out, size_t *n_out, size_t *max_id, char *err,
                      size_t err_size) {
    if (!arr || json_is_null(arr)) { *out = NULL; *n_out = 0; return TOKENIZER_OK; }
    if (!json_is_array(arr)) return llmr_errf_status(TOKENIZER_EPARSE, err, err_size, "added_tokens: expected an array");
    size_t n = json_array_size(arr);
    tok_added *a = calloc(n ? n : 1, sizeof *a);
    if (!a) return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory reading added_tokens");
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        json_t *id = json_object_get(o, "id"), *content = json_object_get(o, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= TOK_MAX_IDS ||
            !json_is_string(content) || json_string_length(content) == 0) {
            free(a);
            return llmr_errf_status(TOKENIZER_EPARSE, err, err_size,
                            "added_tokens[%zu]: needs an integer id in [0, %u) and a non-empty string content", i, TOK_MAX_IDS);
        }
        const char *flags[] = {"single_word", "lstrip", "rstrip"};
        for (size_t f = 0; f < 3; f++) {
            if (is_true(o, flags[f])) {
                free(a);
                return UNSUP("unsupported component: added_tokens[%zu] (%s) with %s=true", i,
                             json_string_value(content), flags[f]);
            }
        }
        a[i].id = (int32_t)json_integer_value(id);
        a[i].special = is_true(o, "special");
        if ((size_t)a[i].id + 1 > *max_id) *max_id = (size_t)a[i].id + 1;
    }
    *out = a;
    *n_out = n;
    return TOKENIZER_OK;
}

/* Merge table construction is three hash lookups per merge (left, right, merged piece), all cache
 * misses on a 446k-merge file. They are done in batches: first every hash of the batch is computed
 * and its slot prefetched, then candidate slots are found and the token bytes prefetched, then the
 * candidates are confirmed, so the misses of one batch overlap instead of queueing. */
enum { MERGE_BATCH = 32 };

typedef struct merge_job {
    const char *a, *b;         /* the pieces as spelled */
    uint8_t *bytes;            /* left bytes then right bytes */
    size_t la, lb;
    int mapped;                /* both pieces in the byte-level alphabet */
    uint64_t h[3];             /* hashes of left, right, left+right */
    size_t slot[3];            /* candidate bmap slot (tag and length match), or SIZE_MAX */
} merge_job;

static size_t candidate_slot(const tokenizer *t, uint64_t h, const uint8_t *p, size_t n) {
    uint16_t tag = (uint16_t)(h >> 48);
    uint64_t head = tok_head(p, n);
    for (size_t i = (size_t)h & t->bmap_mask;; i = (i + 1) & t->bmap_mask) {
        const tok_bslot *s = &t->bmap[i];
        if (s->id < 0) return SIZE_MAX;
        if (s->tag == tag && s->len == n && s->head == head) return i;
    }
}

static int32_t confirm_slot(const tokenizer *t, size_t slot, const uint8_t *p, size_t n) {
    if (slot == SIZE_MAX) return -1;
    const tok_bslot *s = &t->bmap[slot];
    if (n <= 8 || memcmp(t->bytes_blob + t->bytes_off[s->id], p, n) == 0) return s->id;
    return tok_bytes_lookup(t, p, n); /* a collision on the first 8 bytes: do the full probe */
}

int tok_build_pair_filter(tokenizer *t) {
    t->pair_filter = calloc(TOK_FILTER_BITS / 64, sizeof *t->pair_filter);
    if (!t->pair_filter) return -1;
    for (size_t i = 0; i <= t->mmap_mask; i++) {
        if (t->mmap[i].key == TOK_MERGE_EMPTY) continue;
        size_t fb = tok_filter_bit(tok_hash_pair(t->mmap[i].key));
        t->pair_filter[fb >> 6] |= (uint64_t)1 << (fb & 63);
    }
    return 0;
}

static int build_merges(tokenizer *t, raw_tok *r, char *err, size_t err_size) {
    size_t mcap = pow2_at_least(r->n_merges * 2), stride = 2 * r->max_merge_piece + 2;
    merge_job q[MERGE_BATCH];
    t->mmap = big_alloc(mcap * sizeof *t->mmap);
    uint8_t *scratch = malloc(MERGE_BATCH * stride);
    if (!t->mmap || !scratch) {
        free(scratch);
        return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory building the merge table");
    }
    for (size_t i = 0; i < mcap; i++) t->mmap[i].key = TOK_MERGE_EMPTY;
    t->mmap_mask = mcap - 1;
    const char *mp = r->merge_pieces.p;
    for (size_t base = 0; base < r->n_merges; base += MERGE_BATCH) {
        size_t k = r->n_merges - base < MERGE_BATCH ? r->n_merges - base : MERGE_BATCH;
        for (size_t j = 0; j < k; j++) {
            merge_job *m = &q[j];
            size_t sa = strlen(mp), sb;
            m->a = mp;
            m->b = mp + sa + 1;
            sb = strlen(m->b);
            mp = m->b + sb + 1;
            m->bytes = scratch + j * stride;
            m->mapped = tok_piece_to_bytes(m->a, sa, (char *)m->bytes, &m->la) &
                        tok_piece_to_bytes(m->b, sb, (char *)m->bytes + m->la, &m->lb);
            if (!m->mapped) continue;
            m->h[0] = tok_hash_bytes(m->bytes, m->la);
            m->h[1] = tok_hash_bytes(m->bytes + m->la, m->lb);
            m->h[2] = tok_hash_bytes(m->bytes, m->la + m->lb);
            for (int x = 0; x < 3; x++) __builtin_prefetch(&t->bmap[m->h[x] & t->bmap_mask]);
        }
        for (size_t j = 0; j < k; j++) {
            merge_job *m = &q[j];
            if (!m->mapped) continue;
            size_t len[3] = {m->la, m->lb, m->la + m->lb};
            for (int x = 0; x < 3; x++) {
                const uint8_t *start = x == 1 ? m->bytes + m->la : m->bytes;
                m->slot[x] = candidate_slot(t, m->h[x], start, len[x]);
            }
        }
        for (size_t j = 0; j < k; j++) {
            merge_job *m = &q[j];
            if (!m->mapped) continue; /* a piece outside the byte-level alphabet can never be formed */
            int32_t ida = confirm_slot(t, m->slot[0], m->bytes, m->la);
            int32_t idb = confirm_slot(t, m->slot[1], m->bytes + m->la, m->lb);
            int32_t idm = confirm_slot(t, m->slot[2], m->bytes, m->la + m->lb);
            if (ida < 0 || idb < 0 || idm < 0) {
                int rc = llmr_errf_status(TOKENIZER_EPARSE, err, err_size,
                                  "model.merges[%zu] [\"%s\", \"%s\"]: %s is not in model.vocab", base + j,
                                  m->a, m->b,
                                  ida < 0 ? "the left piece" : idb < 0 ? "the right piece" : "the merged piece");
                free(scratch);
                return rc;
            }
            mmap_put(t, ida, idb, (uint32_t)(base + j), idm);
        }
    }
    free(scratch);
    if (tok_build_pair_filter(t) < 0) return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory building the merge filter");
    return TOKENIZER_OK;
}

static int build_tables(tokenizer *t, raw_tok *r, char *err, size_t err_size) {
    int rc = TOKENIZER_ENOMEM;
    tj_buf pieces = {0}, bytes = {0};
    char *scratch = NULL;
    size_t n_ids = 0, max_piece = 0;
    json_t *added_json = json_object_get(r->top, "added_tokens");
    for (size_t i = 0; i < r->n_vocab; i++)
        if ((size_t)r->vocab_ids[i] + 1 > n_ids) n_ids = (size_t)r->vocab_ids[i] + 1;
    rc = read_added(added_json, &t->added, &t->n_added, &n_ids, err, err_size);
    if (rc) return rc;
    rc = TOKENIZER_ENOMEM;
    if (r->n_vocab == 0) return llmr_errf_status(TOKENIZER_EPARSE, err, err_size, "model.vocab is missing or empty");
    if (alloc_ids(t, n_ids) < 0) goto oom;
    max_piece = r->vocab_pieces.len;
    for (size_t i = 0; i < t->n_added; i++) {
        size_t l = json_string_length(json_object_get(json_array_get(added_json, i), "content"));
        if (l > max_piece) max_piece = l;
    }
    scratch = malloc(max_piece + 1);
    if (!scratch) goto oom;

    /* Vocab entries, then added tokens (an added token's content wins for its id, as in HF). */
    const char *vp = r->vocab_pieces.p;
    for (size_t i = 0; i < r->n_vocab; i++) {
        size_t len = strlen(vp); /* pieces are NUL-separated; JSON \u0000 in a key is refused below */
        int32_t id = r->vocab_ids[i];
        if (t->flags[id] & TOK_F_KNOWN) {
            rc = llmr_errf_status(TOKENIZER_EPARSE, err, err_size, "model.vocab: id %d is used twice (\"%s\" and \"%s\")",
                          id, pieces.p + t->piece_off[id], vp);
            goto fail;
        }
        if (set_piece(t, &pieces, &bytes, id, vp, len, scratch) < 0) goto oom;
        vp += len + 1;
    }
    if (vp != r->vocab_pieces.p + r->vocab_pieces.len) {
        rc = llmr_errf_status(TOKENIZER_EUNSUPPORTED, err, err_size, "unsupported component: model.vocab key with a NUL character");
        goto fail;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        json_t *c = json_object_get(json_array_get(added_json, i), "content");
        tok_added *a = &t->added[i];
        uint8_t keep = t->flags[a->id] & TOK_F_ENCODABLE;
        if (set_piece(t, &pieces, &bytes, a->id, json_string_value(c), json_string_length(c), scratch) < 0) goto oom;
        /* An id that is also a vocab entry stays reachable by BPE only if its bytes did not change. */
        t->flags[a->id] = (uint8_t)((t->flags[a->id] & ~TOK_F_ENCODABLE) | keep | TOK_F_ADDED |
                                    (a->special ? TOK_F_SPECIAL : 0));
        a->off = t->piece_off[a->id];
        a->len = t->piece_len[a->id];
    }
    t->piece_blob = pieces.p; t->piece_blob_len = pieces.len; pieces.p = NULL;
    t->bytes_blob = bytes.p ? bytes.p : calloc(1, 1); t->bytes_blob_len = bytes.len; bytes.p = NULL;
    if (!t->piece_blob || !t->bytes_blob) goto oom;

    /* Added tokens sorted by first byte then longest first: leftmost-longest matching. */
    qsort_r(t->added, t->n_added, sizeof *t->added, cmp_added, t->piece_blob);
    for (int c = 0, k = 0; c <= 256; c++) {
        while (k < (int)t->n_added && (uint8_t)t->piece_blob[t->added[k].off] < c) k++;
        t->added_first[c] = (uint32_t)k;
    }

    /* bytes -> id over the model vocab (HF's BPE looks words up in the model vocab only). */
    size_t bcap = pow2_at_least(r->n_vocab * 2);
    t->bmap = big_alloc(bcap * sizeof *t->bmap);
    if (!t->bmap) goto oom;
    memset(t->bmap, 0xff, bcap * sizeof *t->bmap);
    t->bmap_mask = bcap - 1;
    for (size_t i = 0; i < r->n_vocab; i++) {
        int32_t id = r->vocab_ids[i];
        if ((t->flags[id] & TOK_F_ENCODABLE) && t->bytes_len[id] <= TOK_BSLOT_MAX_LEN &&
            tok_bytes_lookup(t, (const uint8_t *)t->bytes_blob + t->bytes_off[id], t->bytes_len[id]) < 0)
            bmap_insert(t, id);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_bytes_lookup(t, &c, 1);
        if (t->byte_id[b] < 0) {
            rc = UNSUP("unsupported component: model.vocab has no token for byte 0x%02X (byte-level BPE needs all 256)", b);
            goto fail;
        }
    }

    /* Merges: rank = position in the list; the merged token must be in the vocab (as in HF). */
    free(scratch);
    scratch = NULL;
    if ((rc = build_merges(t, r, err, err_size)) != 0) goto fail;
    json_t *im = json_object_get(r->model, "ignore_merges");
    t->ignore_merges = json_is_true(im);
    free(scratch);
    return TOKENIZER_OK;
oom:
    rc = llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory building the tokenizer tables");
fail:
    tj_buf_free(&pieces);
    tj_buf_free(&bytes);
    free(scratch);
    return rc;
}

/* --- pass 4: the regex ----------------------------------------------------------------------- */

/* Rewrites \s and \S to explicit White_Space classes (see WHITE_SPACE_ITEMS). Returns a malloc'd
 * pattern, or NULL with *unsup set when \S appears inside a character class. */
static char *rewrite_pattern(const char *p, size_t n, int *unsup) {
    size_t cap = n * 8 + sizeof WHITE_SPACE_ITEMS * 4 + 16, o = 0;
    size_t items = sizeof WHITE_SPACE_ITEMS - 1;
    char *out = malloc(cap);
    int in_class = 0;
    *unsup = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (o + items + 8 >= cap) {
            char *q = realloc(out, cap *= 2);
            if (!q) { free(out); return NULL; }
            out = q;
        }
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 's' || d == 'S') {
                if (in_class && d == 'S') { free(out); *unsup = 1; return NULL; }
                if (!in_class) out[o++] = '[';
                if (!in_class && d == 'S') out[o++] = '^';
                memcpy(out + o, WHITE_SPACE_ITEMS, items);
                o += items;
                if (!in_class) out[o++] = ']';
            } else {
                out[o++] = c;
                out[o++] = d;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            out[o++] = c;
            if (i + 1 < n && p[i + 1] == '^') out[o++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']') out[o++] = p[++i]; /* leading ] is literal */
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

int tok_compile_pattern(tokenizer *t, const char *where, char *err, size_t err_size) {
    int ec;
    PCRE2_SIZE eo;
    uint32_t opts = PCRE2_UTF | (t->pattern_literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    t->re = pcre2_compile((PCRE2_SPTR)t->pattern, t->pattern_len, opts, &ec, &eo, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return UNSUP("unsupported component: %s: PCRE2 cannot compile it (%s, at pattern offset %zu)",
                     where, (char *)msg, (size_t)eo);
    }
    t->re_jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
    /* The fast path knows one pattern: o200k's, after the same \s rewrite as the file's. */
    t->split_o200k = 0;
    if (!t->pattern_literal) {
        int unsup;
        char *o200k = rewrite_pattern(TOK_O200K_PATTERN, strlen(TOK_O200K_PATTERN), &unsup);
        t->split_o200k = o200k && t->pattern_len == strlen(o200k) &&
                         memcmp(t->pattern, o200k, t->pattern_len) == 0;
        free(o200k);
    }
    return TOKENIZER_OK;
}

static int compile_regex(tokenizer *t, const pretok_cfg *c, char *err, size_t err_size) {
    if (!c->pattern) return TOKENIZER_OK;
    int unsup = 0;
    if (c->literal) {
        t->pattern = malloc(c->pattern_len + 1);
        if (t->pattern) { memcpy(t->pattern, c->pattern, c->pattern_len); t->pattern[c->pattern_len] = 0; }
    } else {
        t->pattern = rewrite_pattern(c->pattern, c->pattern_len, &unsup);
    }
    if (!t->pattern)
        return unsup ? UNSUP("unsupported component: %s uses \\S inside a character class", c->where)
                     : llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory compiling the regex");
    t->pattern_len = c->literal ? c->pattern_len : strlen(t->pattern);
    t->pattern_literal = c->literal;
    return tok_compile_pattern(t, c->where, err, err_size);
}

int tok_load(const char *json, size_t len, const char *name, tokenizer **out, char *err,
             size_t err_size) {
    raw_tok r;
    tok_json j;
    pretok_cfg pc;
    memset(&r, 0, sizeof r);
    pthread_once(&alphabet_once, build_alphabet);
    tj_init(&j, json, len, name, err, err_size);
    tokenizer *t = calloc(1, sizeof *t);
    int rc = TOKENIZER_ENOMEM;
    if (!t) { rc = llmr_errf_status(rc, err, err_size, "out of memory"); goto out; }
    if (read_file_json(&j, &r) < 0) { rc = j.oom ? TOKENIZER_ENOMEM : TOKENIZER_EPARSE; goto out; }
    if ((rc = check_sections(&r, err, err_size)) != 0) goto out;
    if ((rc = parse_pretokenizer(json_object_get(r.top, "pre_tokenizer"), &pc, err, err_size)) != 0) goto out;
    if ((rc = build_tables(t, &r, err, err_size)) != 0) goto out;
    if ((rc = compile_regex(t, &pc, err, err_size)) != 0) goto out;
    *out = t;
    t = NULL;
    rc = TOKENIZER_OK;
out:
    raw_free(&r);
    tokenizer_destroy(t);
    return rc;
}
