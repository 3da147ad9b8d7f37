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

/* One entry of the bytes -> id table; id < 0 marks an empty slot. tag: high bits of the hash. The
 * token's bytes (off, len into bytes_blob) are kept in the slot so a probe touches one cache line
 * before the final comparison. */
typedef struct tok_bslot { uint32_t tag; int32_t id; uint32_t off, len; } tok_bslot;

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
    int32_t byte_id[256];                /* id of each single byte */
    int ignore_merges;

    tok_added *added; size_t n_added;    /* sorted by first byte, then length descending */
    uint32_t added_first[257];           /* added[added_first[c] .. added_first[c+1]) start with c */

    pcre2_code *re;                      /* pre-tokenizer split regex; NULL = whole segment */
    int re_jit;                          /* JIT compiled */
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

/* Id whose decoded bytes are exactly p[0..n) and that the encoder may produce, or -1. */
static inline int32_t tok_bytes_lookup(const struct tokenizer *t, const uint8_t *p, size_t n) {
    uint64_t h = tok_hash_bytes(p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & t->bmap_mask;; i = (i + 1) & t->bmap_mask) {
        const tok_bslot *s = &t->bmap[i];
        if (s->id < 0) return -1;
        if (s->tag == tag && s->len == n && __builtin_memcmp(t->bytes_blob + s->off, p, n) == 0)
            return s->id;
    }
}

/* Merge of (left, right): returns 1 and sets rank/new_id, or 0 when the pair does not merge. */
static inline int tok_merge_lookup(const struct tokenizer *t, int32_t left, int32_t right,
                                   uint32_t *rank, int32_t *new_id) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = (size_t)tok_hash_pair(key) & t->mmap_mask;; i = (i + 1) & t->mmap_mask) {
        const tok_mslot *s = &t->mmap[i];
        if (s->key == TOK_MERGE_EMPTY) return 0;
        if (s->key == key) { *rank = s->rank; *new_id = s->new_id; return 1; }
    }
}

/* Writes a formatted message into err (if err_size > 0) and returns status. */
int tok_fail(char *err, size_t err_size, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Converts a piece (UTF-8 in the byte-level alphabet) to the bytes it stands for, as HF's
 * ByteLevel decoder does: if every character is in the alphabet, the mapped bytes (returns 1: the
 * encoder can produce this piece); otherwise the piece's own bytes (returns 0). out holds len bytes. */
int tok_piece_to_bytes(const char *piece, size_t len, char *out, size_t *out_len);

/* Builds a tokenizer from a tokenizer.json buffer (tok_load.c). */
int tok_load(const char *json, size_t len, const char *name, struct tokenizer **out, char *err,
             size_t err_size);

#endif
