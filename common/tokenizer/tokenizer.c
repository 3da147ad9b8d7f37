/* tokenizer.c — lifecycle, lookups, one-shot and streaming decode. See tokenizer.h. */
#include "common/tokenizer/tok_internal.h"
#include "common/errmsg.h"
#include "common/tokenizer/tok_utf8.h"

#include <errno.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tokenizer_strerror(int status) {
    switch (status) {
#define TOKENIZER_X_(name, value, text) case value: return text;
        TOKENIZER_STATUS_LIST(TOKENIZER_X_)
#undef TOKENIZER_X_
    default: return "unknown status";
    }
}

/* Reads a whole file into a malloc'd buffer. */
static int read_all(const char *path, char **buf_out, size_t *len_out, char *err, size_t err_size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return llmr_errf_status(TOKENIZER_EIO, err, err_size, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return llmr_errf_status(TOKENIZER_EIO, err, err_size, "%s: %s", path, S_ISREG(st.st_mode) ? strerror(e) : "not a regular file");
    }
    size_t len = (size_t)st.st_size, got = 0;
    char *buf = malloc(len + 1);
    if (!buf) { close(fd); return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "%s: out of memory for %zu bytes", path, len); }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            close(fd);
            return llmr_errf_status(TOKENIZER_EIO, err, err_size, "%s: %s", path, r == 0 ? "file shrank while reading" : strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    *buf_out = buf;
    *len_out = len;
    return TOKENIZER_OK;
}

int tokenizer_create_from_buffer(const char *json, size_t len, const char *name, tokenizer **out,
                                 char *err, size_t err_size) {
    char msg[512] = "";
    if (!out || (!json && len)) return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_create: NULL argument");
    if (!name) name = "tokenizer.json";
    int rc = tok_load(json ? json : "", len, name, out, msg, sizeof msg);
    if (rc != TOKENIZER_OK) {
        /* Messages from the JSON reader already start with the name; others get it here. */
        size_t nl = strlen(name);
        if (strncmp(msg, name, nl) == 0 && msg[nl] == ':') llmr_errf_status(rc, err, err_size, "%s", msg);
        else llmr_errf_status(rc, err, err_size, "%s: %s", name, msg);
    }
    return rc;
}

int tokenizer_create_from_file(const char *path, tokenizer **out, char *err, size_t err_size) {
    char *buf = NULL;
    size_t len = 0;
    if (!path || !out) return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_create_from_file: NULL argument");
    int rc = read_all(path, &buf, &len, err, err_size);
    if (rc != TOKENIZER_OK) return rc;
    /* The binary cache is keyed by the content, so an edited file can never hit a stale entry. */
    uint8_t sha[32];
    unsigned int sha_len = 0;
    int have_sha = EVP_Digest(buf, len, sha, &sha_len, EVP_sha256(), NULL) == 1 && sha_len == 32;
    if (have_sha && tok_cache_load(sha, out) == 0) {
        free(buf);
        return TOKENIZER_OK;
    }
    rc = tokenizer_create_from_buffer(buf, len, path, out, err, err_size);
    free(buf);
    if (rc == TOKENIZER_OK && have_sha) tok_cache_store(*out, sha);
    return rc;
}

void tokenizer_destroy(tokenizer *t) {
    if (!t) return;
    pcre2_code_free(t->re);
    free(t->pattern);
    free(t->pair_filter);
    if (t->cache_buf) { /* every table lives in the cache image */
        free(t->cache_buf);
        free(t);
        return;
    }
    free(t->flags);
    free(t->piece_off);
    free(t->piece_len);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->piece_blob);
    free(t->bytes_blob);
    free(t->bmap);
    free(t->mmap);
    free(t->added);
    free(t);
}

int tokenizer_loaded_from_cache(const tokenizer *t) { return t ? t->from_cache : 0; }

/* --- lookups -------------------------------------------------------------------------------- */

size_t tokenizer_vocab_size(const tokenizer *t) { return t ? t->n_ids : 0; }

int tokenizer_id_known(const tokenizer *t, int32_t id) {
    return t && id >= 0 && (size_t)id < t->n_ids && (t->flags[id] & TOK_F_KNOWN);
}

int tokenizer_id_is_special(const tokenizer *t, int32_t id) {
    return tokenizer_id_known(t, id) && (t->flags[id] & TOK_F_SPECIAL);
}

const char *tokenizer_id_to_piece(const tokenizer *t, int32_t id, size_t *len_out) {
    if (!tokenizer_id_known(t, id)) return NULL;
    if (len_out) *len_out = t->piece_len[id];
    return t->piece_blob + t->piece_off[id];
}

const char *tokenizer_id_to_bytes(const tokenizer *t, int32_t id, size_t *len_out) {
    if (!tokenizer_id_known(t, id)) return NULL;
    if (len_out) *len_out = t->bytes_len[id];
    return t->bytes_blob + t->bytes_off[id];
}

static int32_t added_lookup(const tokenizer *t, const char *text, size_t len) {
    if (!t || len == 0 || !text) return -1;
    uint8_t c = (uint8_t)text[0];
    for (uint32_t k = t->added_first[c]; k < t->added_first[c + 1]; k++)
        if (t->added[k].len == len && memcmp(t->piece_blob + t->added[k].off, text, len) == 0)
            return t->added[k].id;
    return -1;
}

int32_t tokenizer_special_id(const tokenizer *t, const char *text) {
    return text ? added_lookup(t, text, strlen(text)) : -1;
}

int32_t tokenizer_piece_to_id(const tokenizer *t, const char *piece, size_t len) {
    int32_t id = added_lookup(t, piece, len);
    if (id >= 0 || !t || !piece) return id;
    /* A piece in the byte-level alphabet: look its bytes up, then confirm the spelling. */
    uint8_t *b = malloc(len + 1);
    if (!b) return -1;
    size_t n;
    int mapped = tok_piece_to_bytes(piece, len, (char *)b, &n);
    id = mapped ? tok_bytes_lookup(t, b, n) : -1;
    free(b);
    if (id >= 0 && t->piece_len[id] == len && memcmp(t->piece_blob + t->piece_off[id], piece, len) == 0)
        return id;
    if (mapped) return -1;
    /* Pieces outside the alphabet are never produced by encode; a linear scan is fine for them. */
    for (size_t i = 0; i < t->n_ids; i++)
        if ((t->flags[i] & TOK_F_KNOWN) && t->piece_len[i] == len &&
            memcmp(t->piece_blob + t->piece_off[i], piece, len) == 0)
            return (int32_t)i;
    return -1;
}

size_t tokenizer_added_count(const tokenizer *t) { return t ? t->n_added : 0; }

int32_t tokenizer_added_id(const tokenizer *t, size_t i) {
    return t && i < t->n_added ? t->added[i].id : -1;
}

/* --- decode --------------------------------------------------------------------------------- */

/* Checks an id for decoding: 1 = emit, 0 = skip, -1 = error (message written). */
static int decode_keep(const tokenizer *t, int32_t id, unsigned flags, size_t index, char *err,
                       size_t err_size) {
    if (!tokenizer_id_known(t, id)) {
        if (flags & TOKENIZER_DECODE_SKIP_UNKNOWN) return 0;
        llmr_errf_status(TOKENIZER_EBADID, err, err_size, "id %d at index %zu is unknown (vocab size %zu)",
                 id, index, t->n_ids);
        return -1;
    }
    if ((flags & TOKENIZER_DECODE_SKIP_SPECIAL) && (t->flags[id] & TOK_F_SPECIAL)) return 0;
    return 1;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                     char **text_out, size_t *len_out, char *err, size_t err_size) {
    if (!t || (!ids && n) || !text_out || !len_out)
        return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int k = decode_keep(t, ids[i], flags, i, err, err_size);
        if (k < 0) return TOKENIZER_EBADID;
        if (k) total += t->bytes_len[ids[i]];
    }
    uint8_t *raw = malloc(total + 1);
    if (!raw) return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory: %zu bytes of text", total);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (decode_keep(t, ids[i], flags, i, NULL, 0) != 1) continue;
        memcpy(raw + o, t->bytes_blob + t->bytes_off[ids[i]], t->bytes_len[ids[i]]);
        o += t->bytes_len[ids[i]];
    }
    raw[o] = '\0';
    if ((flags & TOKENIZER_DECODE_LOSSY) && tok_utf8_valid_prefix(raw, o) < o) {
        uint8_t *fixed = malloc(3 * o + 1);
        if (!fixed) { free(raw); return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory"); }
        tok_utf8_convert(raw, o, 1, 1, fixed, &o);
        fixed[o] = '\0';
        free(raw);
        raw = fixed;
    }
    *text_out = (char *)raw;
    *len_out = o;
    return TOKENIZER_OK;
}

/* --- streaming decoder ----------------------------------------------------------------------- */

struct tokenizer_decoder {
    const tokenizer *t;
    unsigned flags;
    uint8_t pending[4]; size_t n_pending; /* an unfinished UTF-8 sequence (<= 3 bytes) */
    uint8_t *in, *out; size_t cap;        /* scratch: pending + token bytes, and converted text */
    size_t count;
};

tokenizer_decoder *tokenizer_decoder_create(const tokenizer *t, unsigned flags) {
    if (!t) return NULL;
    tokenizer_decoder *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->t = t;
    d->flags = flags;
    return d;
}

void tokenizer_decoder_destroy(tokenizer_decoder *d) {
    if (!d) return;
    free(d->in);
    free(d->out);
    free(d);
}

static int ensure(tokenizer_decoder *d, size_t n) {
    if (n <= d->cap) return 0;
    size_t cap = d->cap ? d->cap : 256;
    while (cap < n) cap *= 2;
    uint8_t *in = realloc(d->in, cap);
    if (in) d->in = in;
    uint8_t *out = realloc(d->out, 3 * cap);
    if (out) d->out = out;
    if (!in || !out) return -1;
    d->cap = cap;
    return 0;
}

int tokenizer_decoder_push(tokenizer_decoder *d, int32_t id, const char **out, size_t *len_out,
                           char *err, size_t err_size) {
    if (!d || !out || !len_out) return llmr_errf_status(TOKENIZER_EINVAL, err, err_size, "tokenizer_decoder_push: NULL argument");
    int k = decode_keep(d->t, id, d->flags, d->count, err, err_size);
    if (k < 0) return TOKENIZER_EBADID;
    d->count++;
    *out = "";
    *len_out = 0;
    if (k == 0) return TOKENIZER_OK;
    size_t bl = d->t->bytes_len[id], n = d->n_pending + bl;
    if (ensure(d, n) < 0) return llmr_errf_status(TOKENIZER_ENOMEM, err, err_size, "out of memory");
    memcpy(d->in, d->pending, d->n_pending);
    memcpy(d->in + d->n_pending, d->t->bytes_blob + d->t->bytes_off[id], bl);
    size_t o, left = tok_utf8_convert(d->in, n, d->flags & TOKENIZER_DECODE_LOSSY, 0, d->out, &o);
    memcpy(d->pending, d->in + n - left, left);
    d->n_pending = left;
    *out = (const char *)d->out;
    *len_out = o;
    return TOKENIZER_OK;
}

void tokenizer_decoder_flush(tokenizer_decoder *d, const char **out, size_t *len_out) {
    static uint8_t fffd[4] = {0xEF, 0xBF, 0xBD, 0};
    *out = "";
    *len_out = 0;
    if (!d) return;
    if (d->n_pending) {
        /* An unfinished sequence at the end is one maximal invalid subpart, as in decode(). */
        if (d->flags & TOKENIZER_DECODE_LOSSY) {
            *out = (const char *)fffd;
            *len_out = 3;
        } else {
            memcpy(d->out, d->pending, d->n_pending); /* d->out exists: a push left the bytes */
            *out = (const char *)d->out;
            *len_out = d->n_pending;
        }
    }
    d->n_pending = 0;
    d->count = 0;
}

size_t tokenizer_decoder_count(const tokenizer_decoder *d) { return d ? d->count : 0; }
