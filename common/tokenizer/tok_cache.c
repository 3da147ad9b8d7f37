/* tok_cache.c — binary cache of loaded tokenizers, keyed by the sha256 of the tokenizer.json.
 *
 * Why: reading the 27 MB gpt-oss JSON and building the hash tables takes ~250 ms on a quiet
 * machine and much more on a busy one; the built tables load from this cache in a few tens of ms
 * (one read, one checksum, one bounds check pass). The cache is an optimization only: any miss,
 * version change or damage falls back to reading the JSON, which then rewrites the cache.
 *
 * Where: $LLMR_TOKENIZER_CACHE if set ("off" or empty disables it), else
 * $LLMR_CACHE/tokenizer-bin, else $HOME/.cache/llmr/tokenizer-bin; one file per tokenizer,
 * <sha256 hex>.tokbin, written to a temporary file and renamed into place (atomic for readers,
 * safe for concurrent writers).
 *
 * Format (native endianness and sizes, checked by the header): a header, then sections each
 * 64-byte aligned: flags, piece_off, piece_len, bytes_off, bytes_len, piece_blob, bytes_blob, bmap,
 * mmap, added, pattern. A 64-bit checksum covers everything after the header, and every index is
 * bounds-checked on load, so a damaged file can never make encode read out of bounds or loop. */
#include "common/tokenizer/tok_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "LLMRTOK"
/* Bump when the table layout, the hash functions' use or the pattern rewrite in tok_load.c
 * changes; the hash functions themselves are also fingerprinted (code_signature). */
#define CACHE_VERSION 1u

/* Changes whenever tok_hash_bytes / tok_hash_pair change, which would silently break every lookup
 * in a cache built by another build of this code. */
static uint64_t code_signature(void) {
    static const uint8_t probe[] = "llmr tokenizer cache \xc4\xa0probe";
    return tok_hash_pair(tok_hash_bytes(probe, sizeof probe - 1) ^ tok_hash_pair(0x0123456789abcdefull)) ^
           ((uint64_t)TOK_FILTER_BITS << 1) ^ (uint64_t)TOK_BSLOT_MAX_LEN;
}

typedef struct cache_hdr {
    char magic[8];
    uint32_t version, hdr_size, sizeof_bslot, sizeof_mslot, sizeof_added, endian;
    uint8_t sha256[32];
    uint64_t checksum, total_size, signature;
    uint64_t n_ids, piece_blob_len, bytes_blob_len, bmap_slots, mmap_slots, n_added, pattern_len;
    uint32_t ignore_merges, pattern_literal, has_pattern, pad;
    int32_t byte_id[256];
    uint32_t added_first[257];
    uint32_t pad2;
} cache_hdr;

/* Section sizes in file order; the order of this table is the file layout. */
typedef struct layout { size_t off[11], size[11], total; } layout;

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static void make_layout(const cache_hdr *h, layout *L) {
    size_t n = (size_t)h->n_ids;
    size_t sizes[11] = {n, 4 * n, 4 * n, 4 * n, 4 * n, (size_t)h->piece_blob_len, (size_t)h->bytes_blob_len,
                        (size_t)h->bmap_slots * sizeof(tok_bslot), (size_t)h->mmap_slots * sizeof(tok_mslot),
                        (size_t)h->n_added * sizeof(tok_added), (size_t)h->pattern_len + 1};
    size_t at = align64(sizeof(cache_hdr));
    for (int i = 0; i < 11; i++) {
        L->off[i] = at;
        L->size[i] = sizes[i];
        at = align64(at + sizes[i]);
    }
    L->total = at;
}

static int cache_path(const uint8_t sha[32], char *path, size_t n, char *dir, size_t dn) {
    const char *env = getenv("LLMR_TOKENIZER_CACHE"), *c = getenv("LLMR_CACHE"), *home = getenv("HOME");
    if (env) {
        if (!*env || !strcmp(env, "off")) return -1;
        snprintf(dir, dn, "%s", env);
    } else if (c && *c) {
        snprintf(dir, dn, "%s/tokenizer-bin", c);
    } else if (home && *home) {
        snprintf(dir, dn, "%s/.cache/llmr/tokenizer-bin", home);
    } else {
        return -1;
    }
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", sha[i]);
    if ((size_t)snprintf(path, n, "%s/%s.tokbin", dir, hex) >= n) return -1;
    return 0;
}

static uint64_t checksum(const uint8_t *p, size_t n) {
    /* tok_hash_bytes over 1 MiB blocks, chained: fast (several GB/s) and order-sensitive. */
    uint64_t h = 0;
    for (size_t at = 0; at < n; at += 1u << 20) {
        size_t k = n - at < (1u << 20) ? n - at : (1u << 20);
        h = tok_hash_pair(h ^ tok_hash_bytes(p + at, k));
    }
    return h;
}

static void fill_header(cache_hdr *h, const tokenizer *t, const uint8_t sha[32]) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CACHE_MAGIC, 8);
    h->version = CACHE_VERSION;
    h->hdr_size = sizeof *h;
    h->sizeof_bslot = sizeof(tok_bslot);
    h->sizeof_mslot = sizeof(tok_mslot);
    h->sizeof_added = sizeof(tok_added);
    h->endian = 0x01020304u;
    h->signature = code_signature();
    memcpy(h->sha256, sha, 32);
    h->n_ids = t->n_ids;
    h->piece_blob_len = t->piece_blob_len;
    h->bytes_blob_len = t->bytes_blob_len;
    h->bmap_slots = t->bmap_mask + 1;
    h->mmap_slots = t->mmap_mask + 1;
    h->n_added = t->n_added;
    h->pattern_len = t->pattern ? t->pattern_len : 0;
    h->has_pattern = t->pattern != NULL;
    h->pattern_literal = (uint32_t)t->pattern_literal;
    h->ignore_merges = (uint32_t)t->ignore_merges;
    memcpy(h->byte_id, t->byte_id, sizeof h->byte_id);
    memcpy(h->added_first, t->added_first, sizeof h->added_first);
}

void tok_cache_store(const tokenizer *t, const uint8_t sha[32]) {
    char path[4200], dir[4096], tmp[4300];
    if (cache_path(sha, path, sizeof path, dir, sizeof dir) < 0) return;
    /* mkdir -p of the last two levels is enough for the default locations. */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) { *slash = 0; mkdir(parent, 0755); }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) return;
    cache_hdr h;
    fill_header(&h, t, sha);
    layout L;
    make_layout(&h, &L);
    uint8_t *buf = calloc(1, L.total);
    if (!buf) return;
    const void *src[11] = {t->flags, t->piece_off, t->piece_len, t->bytes_off, t->bytes_len, t->piece_blob,
                           t->bytes_blob, t->bmap, t->mmap, t->added, t->pattern ? t->pattern : ""};
    for (int i = 0; i < 11; i++)
        if (L.size[i] && src[i]) memcpy(buf + L.off[i], src[i], i == 10 ? L.size[i] - 1 : L.size[i]);
    size_t body = align64(sizeof h);
    h.total_size = L.total;
    h.checksum = checksum(buf + body, L.total - body);
    memcpy(buf, &h, sizeof h);
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir);
    int fd = mkstemp(tmp);
    if (fd < 0) { free(buf); return; }
    size_t done = 0;
    while (done < L.total) {
        ssize_t w = write(fd, buf + done, L.total - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int ok = done == L.total && fchmod(fd, 0644) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
    free(buf);
}

/* Every index a lookup or encode can follow must stay in bounds. */
static int validate(const tokenizer *t) {
    size_t n = t->n_ids;
    for (size_t i = 0; i < n; i++) {
        if (!(t->flags[i] & TOK_F_KNOWN)) continue;
        if ((uint64_t)t->piece_off[i] + t->piece_len[i] >= t->piece_blob_len ||
            t->piece_blob[t->piece_off[i] + t->piece_len[i]] != 0 ||
            (uint64_t)t->bytes_off[i] + t->bytes_len[i] > t->bytes_blob_len)
            return -1;
    }
    size_t empty = 0;
    for (size_t i = 0; i <= t->bmap_mask; i++) {
        const tok_bslot *s = &t->bmap[i];
        if (s->id < 0) { empty++; continue; }
        if ((size_t)s->id >= n || !(t->flags[s->id] & TOK_F_KNOWN) || s->len != t->bytes_len[s->id]) return -1;
    }
    if (!empty) return -1;
    empty = 0;
    for (size_t i = 0; i <= t->mmap_mask; i++) {
        const tok_mslot *s = &t->mmap[i];
        if (s->key == TOK_MERGE_EMPTY) { empty++; continue; }
        if ((s->key >> 32) >= n || (s->key & 0xffffffffu) >= n || s->new_id < 0 || (size_t)s->new_id >= n ||
            !(t->flags[s->new_id] & TOK_F_KNOWN))
            return -1;
    }
    if (!empty) return -1;
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0 || (size_t)t->byte_id[b] >= n || !(t->flags[t->byte_id[b]] & TOK_F_KNOWN)) return -1;
    if (t->added_first[0] != 0 || t->added_first[256] != t->n_added) return -1;
    for (int c = 0; c < 256; c++) {
        if (t->added_first[c] > t->added_first[c + 1]) return -1;
        for (uint32_t k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
            const tok_added *a = &t->added[k];
            if (a->id < 0 || (size_t)a->id >= n || a->len == 0 || (uint64_t)a->off + a->len > t->piece_blob_len ||
                (uint8_t)t->piece_blob[a->off] != c)
                return -1;
        }
    }
    return 0;
}

int tok_cache_load(const uint8_t sha[32], tokenizer **out) {
    char path[4200], dir[4096];
    if (cache_path(sha, path, sizeof path, dir, sizeof dir) < 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    cache_hdr h;
    uint8_t *buf = NULL;
    tokenizer *t = NULL;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        goto fail;
    if (memcmp(h.magic, CACHE_MAGIC, 8) || h.version != CACHE_VERSION || h.hdr_size != sizeof h ||
        h.sizeof_bslot != sizeof(tok_bslot) || h.sizeof_mslot != sizeof(tok_mslot) ||
        h.sizeof_added != sizeof(tok_added) || h.endian != 0x01020304u || h.signature != code_signature() || memcmp(h.sha256, sha, 32) ||
        h.total_size != (uint64_t)st.st_size || h.n_ids == 0 || h.n_ids > (1u << 24) ||
        h.bmap_slots < 16 || (h.bmap_slots & (h.bmap_slots - 1)) || h.bmap_slots > (1u << 28) ||
        h.mmap_slots < 16 || (h.mmap_slots & (h.mmap_slots - 1)) || h.mmap_slots > (1u << 28) ||
        h.n_added > h.n_ids || h.piece_blob_len > UINT32_MAX || h.bytes_blob_len > UINT32_MAX ||
        h.pattern_len > (1u << 20))
        goto fail;
    layout L;
    make_layout(&h, &L);
    if (L.total != h.total_size) goto fail;
    /* One 2 MiB-aligned allocation, huge pages where available: the hash tables live in it. */
    size_t huge = (size_t)2 << 20, cap = (L.total + huge - 1) / huge * huge;
    buf = aligned_alloc(huge, cap);
    if (!buf) goto fail;
    madvise(buf, cap, MADV_HUGEPAGE);
    for (size_t done = 0; done < L.total;) {
        ssize_t r = pread(fd, buf + done, L.total - done, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) goto fail;
        done += (size_t)r;
    }
    size_t body = align64(sizeof h);
    if (checksum(buf + body, L.total - body) != h.checksum) goto fail;
    t = calloc(1, sizeof *t);
    if (!t) goto fail;
    t->cache_buf = buf;
    t->from_cache = 1;
    t->n_ids = (size_t)h.n_ids;
    t->flags = buf + L.off[0];
    t->piece_off = (uint32_t *)(buf + L.off[1]);
    t->piece_len = (uint32_t *)(buf + L.off[2]);
    t->bytes_off = (uint32_t *)(buf + L.off[3]);
    t->bytes_len = (uint32_t *)(buf + L.off[4]);
    t->piece_blob = (char *)buf + L.off[5];
    t->piece_blob_len = (size_t)h.piece_blob_len;
    t->bytes_blob = (char *)buf + L.off[6];
    t->bytes_blob_len = (size_t)h.bytes_blob_len;
    t->bmap = (tok_bslot *)(buf + L.off[7]);
    t->bmap_mask = (size_t)h.bmap_slots - 1;
    t->mmap = (tok_mslot *)(buf + L.off[8]);
    t->mmap_mask = (size_t)h.mmap_slots - 1;
    t->added = (tok_added *)(buf + L.off[9]);
    t->n_added = (size_t)h.n_added;
    memcpy(t->byte_id, h.byte_id, sizeof t->byte_id);
    memcpy(t->added_first, h.added_first, sizeof t->added_first);
    t->ignore_merges = h.ignore_merges != 0;
    buf = NULL; /* owned by t from here */
    if (validate(t) < 0 || tok_build_pair_filter(t) < 0) goto fail;
    if (h.has_pattern) {
        t->pattern = malloc((size_t)h.pattern_len + 1);
        if (!t->pattern) goto fail;
        memcpy(t->pattern, (char *)t->cache_buf + L.off[10], (size_t)h.pattern_len);
        t->pattern[h.pattern_len] = 0;
        t->pattern_len = (size_t)h.pattern_len;
        t->pattern_literal = h.pattern_literal != 0;
        if (tok_compile_pattern(t, "cached pattern", NULL, 0) != TOKENIZER_OK) goto fail;
    }
    close(fd);
    *out = t;
    return 0;
fail:
    close(fd);
    free(buf);
    tokenizer_destroy(t);
    return -1;
}
