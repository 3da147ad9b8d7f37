/* tok_encode.c — text -> ids: UTF-8 sanitizing, added tokens, regex split, byte-level BPE.
 *
 * All state of one call lives in an enc_ctx on the caller's stack plus heap scratch it owns, so
 * concurrent calls on one tokenizer never share mutable memory. */
#include "common/tokenizer/tok_internal.h"
#include "common/errmsg.h"
#include "common/tokenizer/tok_utf8.h"

#include <stdlib.h>
#include <string.h>

typedef struct sym { int32_t id, prev, next; } sym;        /* a BPE symbol; id < 0 = merged away */
typedef struct hent { uint32_t rank; int32_t pos, new_id, left, right; } hent; /* a candidate merge */

typedef struct enc_ctx {
    const tokenizer *t;
    int32_t *ids; size_t n, cap;  /* output (ids == NULL when only counting) */
    int count_only;
    sym *syms; size_t syms_cap;   /* BPE scratch, grown to the longest piece */
    hent *heap; size_t heap_cap;
    pcre2_match_data *md;
    char *err; size_t err_size;
    struct pcache *cache;         /* piece -> ids memo for this call (NULL until first needed) */
    size_t cache_slots;           /* its size, chosen from the text length (pcache_slots_for) */
} enc_ctx;

/* Memo of BPE results for the pieces of one call: text repeats words, and a short piece costs a
 * dozen merge-table lookups that miss the cache (even a whole-word vocab hit is a miss in an 8 MiB
 * table). Keys point into the text being encoded, so the memo cannot outlive the call (and no
 * state is shared between calls or threads). Its size follows the text: a memo that fills up
 * stops memoizing, and on the bench corpus a 4096-slot memo for 100 KB chunks left encode at
 * 19 MB/s of CPU time where one sized to the text gives about 28 (docs/tokenizer.md). */
#define PCACHE_MIN_SLOTS 256
#define PCACHE_MAX_SLOTS 65536
#define PCACHE_MAX_PIECE 4096 /* longer pieces (huge whitespace runs) are not memoized */
typedef struct pcache_slot { const uint8_t *key; uint32_t len, tag, off, n; } pcache_slot;
typedef struct pcache {
    size_t mask, fill, max_fill;
    int32_t *pool; size_t pool_len, pool_cap;
    pcache_slot slot[];           /* mask + 1 slots */
} pcache;

/* Slots for a text of len bytes: one per 8 bytes, a power of two in [MIN, MAX] (a piece averages
 * 3 bytes and most repeat; on the bench's 100 KB chunks one per 4 bytes was slower: the memo
 * outgrew L2 and the calloc cost more). */
static size_t pcache_slots_for(size_t len) {
    size_t slots = PCACHE_MIN_SLOTS;
    while (slots < PCACHE_MAX_SLOTS && slots < len / 8) slots *= 2;
    return slots;
}

static pcache *pcache_create(size_t slots) {
    pcache *pc = calloc(1, sizeof *pc + slots * sizeof(pcache_slot));
    if (!pc) return NULL;
    pc->mask = slots - 1;
    pc->max_fill = slots / 4 * 3;
    return pc;
}

static const pcache_slot *pcache_find(const pcache *pc, const uint8_t *p, size_t n, uint64_t h) {
    for (size_t i = (size_t)h & pc->mask;; i = (i + 1) & pc->mask) {
        const pcache_slot *s = &pc->slot[i];
        if (!s->key) return NULL;
        if (s->tag == (uint32_t)(h >> 32) && s->len == n && memcmp(s->key, p, n) == 0) return s;
    }
}

static void pcache_add(pcache *pc, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids, size_t k) {
    if (pc->fill >= pc->max_fill) return;
    if (pc->pool_len + k > pc->pool_cap) {
        size_t cap = pc->pool_cap ? pc->pool_cap * 2 : 4096;
        while (cap < pc->pool_len + k) cap *= 2;
        int32_t *np = realloc(pc->pool, cap * sizeof *np);
        if (!np) return; /* a memo is optional */
        pc->pool = np;
        pc->pool_cap = cap;
    }
    size_t i = (size_t)h & pc->mask;
    while (pc->slot[i].key) i = (i + 1) & pc->mask;
    memcpy(pc->pool + pc->pool_len, ids, k * sizeof *ids);
    pc->slot[i] = (pcache_slot){p, (uint32_t)n, (uint32_t)(h >> 32), (uint32_t)pc->pool_len, (uint32_t)k};
    pc->pool_len += k;
    pc->fill++;
}

static int emit(enc_ctx *c, int32_t id) {
    if (c->count_only) { c->n++; return 0; }
    if (c->n == c->cap) {
        size_t cap = c->cap * 2;
        int32_t *p = realloc(c->ids, cap * sizeof *p);
        if (!p) return llmr_errf_status(TOKENIZER_ENOMEM, c->err, c->err_size, "out of memory: %zu ids", c->n);
        c->ids = p;
        c->cap = cap;
    }
    c->ids[c->n++] = id;
    return 0;
}

/* Min-heap on (rank, pos): the lowest-rank merge first, the leftmost among equals (HF word.rs). */
static int hless(const hent *a, const hent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void hpush(hent *h, size_t *n, hent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hless(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static hent hpop(hent *h, size_t *n) {
    hent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const hent *best = &last;
        if (l < *n && hless(&h[l], best)) { m = l; best = &h[l]; }
        if (l + 1 < *n && hless(&h[l + 1], best)) { m = l + 1; best = &h[l + 1]; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int grow_scratch(enc_ctx *c, size_t n) {
    if (n <= c->syms_cap) return 0;
    size_t cap = c->syms_cap ? c->syms_cap : 64;
    while (cap < n) cap *= 2;
    sym *s = realloc(c->syms, cap * sizeof *s);
    if (s) c->syms = s;
    /* Each merge pushes at most two entries and removes one symbol: 3n bounds the heap. */
    hent *h = realloc(c->heap, 3 * cap * sizeof *h);
    if (h) c->heap = h;
    if (!s || !h) return llmr_errf_status(TOKENIZER_ENOMEM, c->err, c->err_size, "out of memory: BPE piece of %zu bytes", n);
    c->syms_cap = cap;
    c->heap_cap = 3 * cap;
    return 0;
}

#define BPE_SMALL 128 /* pieces up to this many bytes use the array method */
#define NO_MERGE UINT32_MAX

/* BPE of a short piece with plain arrays: ids[] are the current symbols, rank[i]/nid[i] the merge
 * of (ids[i], ids[i+1]). Each step merges the lowest rank, leftmost on ties -- the same order as
 * HF's heap of (rank, position), since positions keep their order -- then refreshes the two pairs
 * that changed. Everything stays in L1; the only cache misses are the merge-table lookups, and
 * the first round of those is prefetched together. */
static size_t bpe_small(const tokenizer *t, const uint8_t *p, size_t n, int32_t ids[BPE_SMALL]) {
    int32_t nid[BPE_SMALL];
    uint32_t rank[BPE_SMALL];
    size_t m = n;
    for (size_t i = 0; i < n; i++) ids[i] = t->byte_id[p[i]];
    for (size_t i = 0; i + 1 < n; i++) tok_merge_prefetch(t, ids[i], ids[i + 1]);
    for (size_t i = 0; i + 1 < n; i++)
        if (!tok_merge_lookup(t, ids[i], ids[i + 1], &rank[i], &nid[i])) rank[i] = NO_MERGE;
    while (m > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < m; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == NO_MERGE) break;
        ids[best] = nid[best];
        m--;
        /* Drop symbol best+1: pairs after it shift left by one. */
        memmove(&ids[best + 1], &ids[best + 2], (m - best - 1) * sizeof ids[0]);
        memmove(&rank[best + 1], &rank[best + 2], (m > best + 2 ? m - best - 2 : 0) * sizeof rank[0]);
        memmove(&nid[best + 1], &nid[best + 2], (m > best + 2 ? m - best - 2 : 0) * sizeof nid[0]);
        /* Both new pairs' slots are fetched at once: two overlapping misses, not two in a row. */
        if (best > 0) tok_merge_prefetch(t, ids[best - 1], ids[best]);
        if (best + 1 < m) tok_merge_prefetch(t, ids[best], ids[best + 1]);
        if (best > 0 && !tok_merge_lookup(t, ids[best - 1], ids[best], &rank[best - 1], &nid[best - 1]))
            rank[best - 1] = NO_MERGE;
        if (best + 1 < m && !tok_merge_lookup(t, ids[best], ids[best + 1], &rank[best], &nid[best]))
            rank[best] = NO_MERGE;
    }
    return m;
}

/* Emits the ids of a piece of 2..BPE_SMALL bytes: from the per-call memo when the piece was seen
 * before in this call, else the whole piece if it is a vocab entry (ignore_merges), else BPE. The
 * memo comes first because repeated words are the common case and it sits in L1/L2, while the
 * vocab table is megabytes away. One hash serves both tables. */
static int bpe_short(enc_ctx *c, const uint8_t *p, size_t n) {
    const tokenizer *t = c->t;
    uint64_t h = tok_hash_bytes(p, n);
    if (!c->cache) c->cache = pcache_create(c->cache_slots); /* NULL: work without a memo */
    const pcache_slot *hit = c->cache ? pcache_find(c->cache, p, n, h) : NULL;
    if (hit) {
        for (uint32_t i = 0; i < hit->n; i++)
            if (emit(c, c->cache->pool[hit->off + i]) < 0) return TOKENIZER_ENOMEM;
        return 0;
    }
    size_t m;
    int32_t ids[BPE_SMALL];
    ids[0] = t->ignore_merges ? tok_bytes_lookup_h(t, p, n, h) : -1;
    m = ids[0] >= 0 ? 1 : bpe_small(t, p, n, ids);
    if (c->cache) pcache_add(c->cache, p, n, h, ids, m);
    for (size_t i = 0; i < m; i++)
        if (emit(c, ids[i]) < 0) return TOKENIZER_ENOMEM;
    return 0;
}

/* Byte-level BPE of one pre-tokenized piece p[0..n), n >= 1. */
static int bpe(enc_ctx *c, const uint8_t *p, size_t n) {
    const tokenizer *t = c->t;
    if (n == 1) return emit(c, t->byte_id[p[0]]);
    if (n <= BPE_SMALL) return bpe_short(c, p, n);
    if (n > (size_t)INT32_MAX / 4) /* symbol links are int32 */
        return llmr_errf_status(TOKENIZER_EINVAL, c->err, c->err_size, "a single pre-token of %zu bytes is over the limit of %d", n, INT32_MAX / 4);
    uint64_t ph = tok_hash_bytes(p, n);
    int memo = n <= PCACHE_MAX_PIECE;
    if (memo && !c->cache) c->cache = pcache_create(c->cache_slots);
    const pcache_slot *hit = memo && c->cache ? pcache_find(c->cache, p, n, ph) : NULL;
    if (hit) {
        for (uint32_t i = 0; i < hit->n; i++)
            if (emit(c, c->cache->pool[hit->off + i]) < 0) return TOKENIZER_ENOMEM;
        return 0;
    }
    if (t->ignore_merges) {
        int32_t whole = tok_bytes_lookup_h(t, p, n, ph);
        if (whole >= 0) return emit(c, whole);
    }
    /* Long pieces (whitespace runs, unspaced CJK paragraphs): HF's algorithm, a heap of candidate
     * merges ordered by (rank, position) over a linked list of symbols: O(n log n). */
    if (grow_scratch(c, n) < 0) return TOKENIZER_ENOMEM;
    sym *s = c->syms;
    hent *h = c->heap;
    size_t hn = 0;
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i < n; i++) {
        s[i].id = t->byte_id[p[i]];
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (tok_merge_lookup(t, s[i].id, s[i + 1].id, &rank, &nid))
            hpush(h, &hn, (hent){rank, (int32_t)i, nid, s[i].id, s[i + 1].id});
    while (hn > 0) {
        hent top = hpop(h, &hn);
        sym *l = &s[top.pos];
        if (l->id < 0 || l->next < 0) continue;
        sym *r = &s[l->next];
        /* Stale entry: the pair at this position is no longer the one this merge was for. (HF
         * compares the merged id instead; since symbols only grow, the two tests agree.) */
        if (l->id != top.left || r->id != top.right) continue;
        l->id = top.new_id;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = top.pos;
        r->id = -1;
        if (l->prev >= 0 && tok_merge_lookup(t, s[l->prev].id, l->id, &rank, &nid))
            hpush(h, &hn, (hent){rank, l->prev, nid, s[l->prev].id, l->id});
        if (l->next >= 0 && tok_merge_lookup(t, l->id, s[l->next].id, &rank, &nid))
            hpush(h, &hn, (hent){rank, top.pos, nid, l->id, s[l->next].id});
    }
    /* The heap is spent: its memory holds the result for the memo (3n entries >= n ids). */
    int32_t *out = (int32_t *)c->heap;
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s[i].next) out[k++] = s[i].id;
    if (memo && c->cache) pcache_add(c->cache, p, n, ph, out, k);
    for (size_t i = 0; i < k; i++)
        if (emit(c, out[i]) < 0) return TOKENIZER_ENOMEM;
    return 0;
}

static size_t char_len_at(const uint8_t *p, size_t n) {
    int st;
    return tok_utf8_next(p, n, &st);
}

/* Splits one segment (text between added tokens) with the regex (Isolated: matches and the gaps
 * between them are pieces) and BPE-encodes every piece. `base` is the segment's offset in the
 * text, for messages. */
static int encode_segment(enc_ctx *c, const uint8_t *seg, size_t n, size_t base) {
    const tokenizer *t = c->t;
    if (n == 0) return 0;
    if (!t->re) return bpe(c, seg, n);
    size_t last = 0, off = 0;
    int rc;
    while (off < n) {
        /* o200k's common ASCII pre-tokens without PCRE2 (0: not decided, ask the regex). */
        size_t fe = t->split_o200k ? tok_split_o200k(seg, n, off) : 0;
        if (fe) {
            if (off > last && (rc = bpe(c, seg + last, off - last)) != 0) return rc;
            if ((rc = bpe(c, seg + off, fe - off)) != 0) return rc;
            last = off = fe;
            continue;
        }
        rc = t->re_jit ? pcre2_jit_match(t->re, seg, n, off, 0, c->md, NULL)
                       : pcre2_match(t->re, seg, n, off, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its backtracking on the heap */
            rc = pcre2_match(t->re, seg, n, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return llmr_errf_status(TOKENIZER_EREGEX, c->err, c->err_size,
                            "pre-tokenizer regex failed at byte %zu: %s", base + off, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t s = ov[0], e = ov[1];
        if (s > last && (rc = bpe(c, seg + last, s - last)) != 0) return rc;
        if (e > s) {
            if ((rc = bpe(c, seg + s, e - s)) != 0) return rc;
            last = off = e;
        } else { /* empty match: not a piece; step over one character */
            if (s > last) last = s;
            off = s + (s < n ? char_len_at(seg + s, n - s) : 1);
        }
    }
    if (last < n) return bpe(c, seg + last, n - last);
    return 0;
}

/* Cuts added tokens out of the text (leftmost, longest first) and encodes what lies between. A
 * special token is plain text when !allow_special: like HF's split_special_tokens, the matcher then
 * steps over that match instead of looking for a shorter one inside it. */
static int encode_text(enc_ctx *c, const uint8_t *p, size_t n, int allow_special) {
    const tokenizer *t = c->t;
    size_t seg = 0, i = 0;
    int rc;
    if (t->n_added == 0) return encode_segment(c, p, n, 0);
    /* When every added token starts with the same byte (gpt-oss: '<'), memchr finds the next
     * candidate instead of a table look-up per byte. -1: several first bytes. */
    int first = -1;
    for (int b = 0; b < 256; b++) {
        if (t->added_first[b] == t->added_first[b + 1]) continue;
        if (first >= 0) { first = -1; break; }
        first = b;
    }
    while (i < n) {
        if (first >= 0) {
            const uint8_t *q = memchr(p + i, first, n - i);
            if (!q) break;
            i = (size_t)(q - p);
        }
        uint32_t k = t->added_first[p[i]], kend = t->added_first[p[i] + 1];
        const tok_added *hit = NULL;
        for (; k < kend; k++) {
            const tok_added *a = &t->added[k];
            if (a->len <= n - i && memcmp(p + i, t->piece_blob + a->off, a->len) == 0) { hit = a; break; }
        }
        if (!hit) { i++; continue; }
        if (hit->special && !allow_special) { i += hit->len; continue; }
        if ((rc = encode_segment(c, p + seg, i - seg, seg)) != 0) return rc;
        if ((rc = emit(c, hit->id)) != 0) return rc;
        i += hit->len;
        seg = i;
    }
    return encode_segment(c, p + seg, n - seg, seg);
}

/* Runs the whole pipeline; ids go to c (or are only counted). */
static int run_encode(enc_ctx *c, const char *text, size_t len, unsigned flags) {
    const uint8_t *p = (const uint8_t *)text;
    uint8_t *fixed = NULL;
    int rc;
    if (!text && len > 0) return llmr_errf_status(TOKENIZER_EINVAL, c->err, c->err_size, "text is NULL");
    size_t bad = tok_utf8_valid_prefix(p, len);
    if (bad < len) {
        if (flags & TOKENIZER_ENCODE_STRICT_UTF8)
            return llmr_errf_status(TOKENIZER_EUTF8, c->err, c->err_size,
                            "invalid UTF-8 at byte %zu (0x%02X)", bad, p[bad]);
        if (len > (SIZE_MAX - 4) / 3 || !(fixed = malloc(3 * len + 4)))
            return llmr_errf_status(TOKENIZER_ENOMEM, c->err, c->err_size, "out of memory: %zu bytes of text", len);
        size_t n;
        tok_utf8_convert(p, len, 1, 1, fixed, &n);
        p = fixed;
        len = n;
    }
    c->cache_slots = pcache_slots_for(len);
    c->md = pcre2_match_data_create(1, NULL);
    if (!c->md) { free(fixed); return llmr_errf_status(TOKENIZER_ENOMEM, c->err, c->err_size, "out of memory"); }
    rc = encode_text(c, p, len, !(flags & TOKENIZER_ENCODE_NO_SPECIAL));
    pcre2_match_data_free(c->md);
    free(c->syms);
    free(c->heap);
    if (c->cache) free(c->cache->pool);
    free(c->cache);
    free(fixed);
    return rc;
}

int tokenizer_encode(const tokenizer *tok, const char *text, size_t len, unsigned flags,
                     int32_t **ids_out, size_t *n_out, char *err, size_t err_size) {
    if (!tok || !ids_out || !n_out) return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_encode: NULL argument");
    enc_ctx c = {.t = tok, .err = err, .err_size = err_size};
    c.cap = len / 4 + 16;
    c.ids = malloc(c.cap * sizeof *c.ids);
    if (!c.ids) return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory: %zu bytes of text", len);
    int rc = run_encode(&c, text, len, flags);
    if (rc != 0) { free(c.ids); return rc; }
    *ids_out = c.ids;
    *n_out = c.n;
    return TOKENIZER_OK;
}

int tokenizer_count(const tokenizer *tok, const char *text, size_t len, unsigned flags,
                    size_t *n_out, char *err, size_t err_size) {
    if (!tok || !n_out) return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_count: NULL argument");
    enc_ctx c = {.t = tok, .count_only = 1, .err = err, .err_size = err_size};
    int rc = run_encode(&c, text, len, flags);
    if (rc == 0) *n_out = c.n;
    return rc;
}
