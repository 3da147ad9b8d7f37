/* tok_internal.h — the tokenizer's in-memory layout, shared by its .c files (not a public API).
 *
 * After load everything here is read-only, which is what makes concurrent encode calls safe.
 * Ids index flat arrays; strings live in two blobs (pieces as spelled in tokenizer.json, and the
 * bytes each id decodes to). Two open-addressing hash tables answer the encoder's questions:
 * "which id has exactly these bytes?" and "do ids (a, b) merge, at which rank, into which id?". */
#ifndef LLMR_TOK_INTERNAL_H
#define LLMR_TOK_INTERNAL_H

#include "common/tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdarg.h>
#include <stdint.h>

#define TOK_F_KNOWN   0x1u /* id names a vocab entry or an added token */
#define TOK_F_ADDED   0x2u /* id is an added token (matched before pre-tokenization) */
#define TOK_F_SPECIAL 0x4u /* added token with "special": true */
#define TOK_F_ENCODABLE 0x8u /* its bytes are reachable by the byte-level encoder (in bytes_map) */

/* One entry of the bytes -> id table; id < 0 marks an empty slot. The first 8 bytes of the token
 * (zero padded), its length and 16 bits of its hash live in the slot, so a lookup of a token of up
 * to 8 bytes -- most of them -- touches one cache line; longer ones compare the rest in bytes_blob. */
typedef struct tok_bslot { uint64_t head; int32_t id; uint16_t len, tag; } tok_bslot;
#define TOK_BSLOT_MAX_LEN 0xFFFFu /* longer tokens are kept out of the table (never seen in practice) */

/* The first min(n, 8) bytes of p as a zero-padded little-endian word. */
static inline uint64_t tok_head(const uint8_t *p, size_t n) {
    uint64_t w = 0;
    if (n >= 8) __builtin_memcpy(&w, p, 8);
    else for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    return w;
}

/* One entry of the merge table; key = (uint64)left << 32 | right; key == TOK_MERGE_EMPTY is empty. */
typedef struct tok_mslot { uint64_t key; uint32_t rank; int32_t new_id; } tok_mslot;
#define TOK_MERGE_EMPTY UINT64_MAX

typedef struct tok_added {
    uint32_t off, len; /* content bytes in piece_blob (content is also the piece) */
    int32_t id;
    int special;
} tok_added;

struct tokenizer {
    size_t n_ids;          /* highest id + 1 */
    uint8_t *flags;        /* [n_ids] TOK_F_* */
    uint32_t *piece_off;   /* [n_ids] into piece_blob; piece_blob[off+len] == '\0' */
    uint32_t *piece_len;
    uint32_t *bytes_off;   /* [n_ids] into bytes_blob */
    uint32_t *bytes_len;
    char *piece_blob; size_t piece_blob_len;
    char *bytes_blob; size_t bytes_blob_len;

    tok_bslot *bmap; size_t bmap_mask;   /* bytes -> id (vocab entries reachable by encoding) */
    tok_mslot *mmap; size_t mmap_mask;   /* (left, right) -> (rank, new id) */
    uint64_t *pair_filter;               /* TOK_FILTER_BITS bits: 0 = the pair surely has no merge */
    int32_t byte_id[256];                /* id of each single byte */
    int ignore_merges;

    tok_added *added; size_t n_added;    /* sorted by first byte, then length descending */
    uint32_t added_first[257];           /* added[added_first[c] .. added_first[c+1]) start with c */

    char *pattern; size_t pattern_len;   /* the split regex as compiled (\s rewritten); NULL: none */
    int pattern_literal;                 /* Split with a String pattern: literal text */
    pcre2_code *re;                      /* compiled pattern; NULL = whole segment */
    int re_jit;                          /* JIT compiled */
    int split_o200k;                     /* pattern is o200k's: tok_split_o200k may answer first */

    void *cache_buf;                     /* when loaded from the binary cache: the one allocation the
                                          * arrays above point into (tok_cache.c) */
    int from_cache;
};

/* Hash used by the bytes map (also by tok_load.c when building it). */
static inline uint64_t tok_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        __builtin_memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8; n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static inline uint64_t tok_hash_pair(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

/* Id whose decoded bytes are exactly p[0..n) and that the encoder may produce, or -1; h is
 * tok_hash_bytes(p, n). */
static inline int32_t tok_bytes_lookup_h(const struct tokenizer *t, const uint8_t *p, size_t n,
                                         uint64_t h) {
    uint16_t tag = (uint16_t)(h >> 48);
    uint64_t head = tok_head(p, n);
    for (size_t i = (size_t)h & t->bmap_mask;; i = (i + 1) & t->bmap_mask) {
        const tok_bslot *s = &t->bmap[i];
        if (s->id < 0) return -1;
        if (s->head == head && s->len == n && s->tag == tag &&
            (n <= 8 || __builtin_memcmp(t->bytes_blob + t->bytes_off[s->id] + 8, p + 8, n - 8) == 0))
            return s->id;
    }
}

static inline int32_t tok_bytes_lookup(const struct tokenizer *t, const uint8_t *p, size_t n) {
    return tok_bytes_lookup_h(t, p, n, tok_hash_bytes(p, n));
}

/* A 1 MiB bit filter in front of the merge table: about half the pairs BPE asks about have no
 * merge, and the filter (which stays in L2) answers those without touching the 16 MiB table. Bit
 * index: hash bits 40.. (the table index uses the low bits). */
#define TOK_FILTER_BITS (1u << 23)
static inline size_t tok_filter_bit(uint64_t hash) { return (size_t)(hash >> 40) & (TOK_FILTER_BITS - 1); }

/* Merge of (left, right): returns 1 and sets rank/new_id, or 0 when the pair does not merge. */
static inline int tok_merge_lookup(const struct tokenizer *t, int32_t left, int32_t right,
                                   uint32_t *rank, int32_t *new_id) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right, h = tok_hash_pair(key);
    size_t fb = tok_filter_bit(h);
    if (!((t->pair_filter[fb >> 6] >> (fb & 63)) & 1)) return 0;
    for (size_t i = (size_t)h & t->mmap_mask;; i = (i + 1) & t->mmap_mask) {
        const tok_mslot *s = &t->mmap[i];
        if (s->key == TOK_MERGE_EMPTY) return 0;
        if (s->key == key) { *rank = s->rank; *new_id = s->new_id; return 1; }
    }
}

/* Starts loading the merge-table slot of (left, right) into the cache. */
static inline void tok_merge_prefetch(const struct tokenizer *t, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right, h = tok_hash_pair(key);
    size_t fb = tok_filter_bit(h);
    if ((t->pair_filter[fb >> 6] >> (fb & 63)) & 1) __builtin_prefetch(&t->mmap[h & t->mmap_mask]);
}

/* Builds t->pair_filter from t->mmap. Returns 0, or -1 on out-of-memory. */
int tok_build_pair_filter(struct tokenizer *t);

/* Converts a piece (UTF-8 in the byte-level alphabet) to the bytes it stands for, as HF's
 * ByteLevel decoder does: if every character is in the alphabet, the mapped bytes (returns 1: the
 * encoder can produce this piece); otherwise the piece's own bytes (returns 0). out holds len bytes. */
int tok_piece_to_bytes(const char *piece, size_t len, char *out, size_t *out_len);

/* The o200k split regex as tokenizer.json spells it (gpt-oss); tok_compile_pattern enables the
 * fast path when a file's pattern is exactly this. */
extern const char TOK_O200K_PATTERN[];

/* Fast path for the o200k split regex (tok_split.c): the end of the regex's match at offset i of
 * s[0..n) (i < n; the match always starts at i for this pattern), or 0 when undecided -- the
 * caller must then ask PCRE2. Decides only from ASCII bytes; a return > 0 is exactly what the
 * regex matches (checked by the split_fast_path unit test and fuzz_tok_split). */
size_t tok_split_o200k(const uint8_t *s, size_t n, size_t i);

/* Compiles t->pattern into t->re (JIT when possible) and sets t->split_o200k. */
int tok_compile_pattern(struct tokenizer *t, const char *where, char *err, size_t err_size);

/* Binary cache of loaded tokenizers, keyed by the sha256 of the tokenizer.json (tok_cache.c).
 * tok_cache_load returns 0 and a tokenizer on a valid cache hit, -1 otherwise (no message: a miss
 * or a damaged cache only means the JSON is read). tok_cache_store writes the cache atomically and
 * ignores failures (the cache is an optimization). */
int tok_cache_load(const uint8_t sha256[32], struct tokenizer **out);
void tok_cache_store(const struct tokenizer *t, const uint8_t sha256[32]);

/* Builds a tokenizer from a tokenizer.json buffer (tok_load.c). */
int tok_load(const char *json, size_t len, const char *name, struct tokenizer **out, char *err,
             size_t err_size);

#endif
