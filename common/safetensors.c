/* safetensors.c — see safetensors.h for the rules enforced. */
#include "common/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"

struct llmr_safetensors {
    llmr_st_tensor *tensors; /* sorted by begin */
    size_t count;
    char **meta_keys, **meta_vals;
    size_t meta_count;
    uint64_t header_len, file_size;
    char *path;              /* set by llmr_st_open */
    void *map;               /* set by llmr_st_map_data */
};

static const struct { const char *name; unsigned bits; } dtypes[LLMR_ST_DTYPE_COUNT] = {
    [LLMR_ST_BOOL] = {"BOOL", 8},       [LLMR_ST_U8] = {"U8", 8},         [LLMR_ST_I8] = {"I8", 8},
    [LLMR_ST_F8_E5M2] = {"F8_E5M2", 8}, [LLMR_ST_F8_E4M3] = {"F8_E4M3", 8}, [LLMR_ST_F8_E8M0] = {"F8_E8M0", 8},
    [LLMR_ST_I16] = {"I16", 16},        [LLMR_ST_U16] = {"U16", 16},      [LLMR_ST_F16] = {"F16", 16},
    [LLMR_ST_BF16] = {"BF16", 16},      [LLMR_ST_I32] = {"I32", 32},      [LLMR_ST_U32] = {"U32", 32},
    [LLMR_ST_F32] = {"F32", 32},        [LLMR_ST_F64] = {"F64", 64},      [LLMR_ST_I64] = {"I64", 64},
    [LLMR_ST_U64] = {"U64", 64},        [LLMR_ST_F4] = {"F4", 4},         [LLMR_ST_F6_E2M3] = {"F6_E2M3", 6},
    [LLMR_ST_F6_E3M2] = {"F6_E3M2", 6},
};

const char *llmr_st_dtype_name(llmr_st_dtype d) {
    return (unsigned)d < LLMR_ST_DTYPE_COUNT ? dtypes[d].name : "?";
}

int llmr_st_dtype_from_name(const char *name) {
    for (int i = 0; i < LLMR_ST_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

unsigned llmr_st_dtype_bits(llmr_st_dtype d) { return (unsigned)d < LLMR_ST_DTYPE_COUNT ? dtypes[d].bits : 0; }

uint64_t llmr_st_numel(const llmr_st_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *llmr_st_strerror(llmr_st_status s) {
    switch (s) {
    case LLMR_ST_OK: return "ok";
    case LLMR_ST_ERR_IO: return "cannot read file";
    case LLMR_ST_ERR_HEADER_TOO_SMALL: return "header too small";
    case LLMR_ST_ERR_HEADER_TOO_LARGE: return "header length over the 100 MB bound";
    case LLMR_ST_ERR_HEADER_LENGTH: return "header length past the end of the file";
    case LLMR_ST_ERR_HEADER_UTF8: return "header is not valid UTF-8";
    case LLMR_ST_ERR_HEADER_JSON: return "header is not a valid safetensors JSON header";
    case LLMR_ST_ERR_TENSOR_INFO: return "tensor shape and dtype do not match its byte range";
    case LLMR_ST_ERR_OFFSET: return "tensor byte ranges overlap, leave gaps or do not start at 0";
    case LLMR_ST_ERR_INCOMPLETE: return "data section size does not match the tensors";
    case LLMR_ST_ERR_OVERFLOW: return "tensor size overflows";
    case LLMR_ST_ERR_MISALIGNED: return "sub-byte tensor is not a whole number of bytes";
    case LLMR_ST_ERR_NOMEM: return "out of memory";
    }
    return "unknown safetensors error";
}

void llmr_st_destroy(llmr_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->meta_count; i++) { free(st->meta_keys[i]); free(st->meta_vals[i]); }
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_vals);
    if (st->map) munmap(st->map, st->file_size);
    free(st->path);
    free(st);
}

/* Strict UTF-8 validation (no overlongs, no surrogates, max U+10FFFF). */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static int json_u64(json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

/* Parses one tensor entry into t (name already set). */
static llmr_st_status parse_tensor(const char *name, json_t *info, llmr_st_tensor *t, char *err, size_t es) {
    if (!json_is_object(info)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': entry is not an object", name);
    json_t *dt = json_object_get(info, "dtype"), *shape = json_object_get(info, "shape"),
           *offs = json_object_get(info, "data_offsets");
    if (!json_is_string(dt)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': missing string field 'dtype'", name);
    int d = llmr_st_dtype_from_name(json_string_value(dt));
    if (d < 0) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': unknown dtype '%s'", name, json_string_value(dt));
    t->dtype = (llmr_st_dtype)d;
    if (!json_is_array(shape)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': missing array field 'shape'", name);
    if (json_array_size(shape) > LLMR_ST_MAX_DIMS)
        return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': %zu dimensions (at most %d)", name, json_array_size(shape), LLMR_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    for (int i = 0; i < t->ndim; i++)
        if (!json_u64(json_array_get(shape, (size_t)i), &t->shape[i]))
            return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': shape[%d] is not a non-negative integer", name, i);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_u64(json_array_get(offs, 0), &t->begin) ||
        !json_u64(json_array_get(offs, 1), &t->end))
        return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "tensor '%s': data_offsets must be two non-negative integers", name);
    if (t->end < t->begin)
        return llmr_errf_status(LLMR_ST_ERR_OFFSET, err, es, "tensor '%s': data_offsets end %llu before begin %llu", name,
                    (unsigned long long)t->end, (unsigned long long)t->begin);
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(n, t->shape[i], &n))
            return llmr_errf_status(LLMR_ST_ERR_OVERFLOW, err, es, "tensor '%s': element count overflows 64 bits", name);
    uint64_t bits;
    if (__builtin_mul_overflow(n, (uint64_t)dtypes[t->dtype].bits, &bits))
        return llmr_errf_status(LLMR_ST_ERR_OVERFLOW, err, es, "tensor '%s': size in bits overflows 64 bits", name);
    if (bits % 8)
        return llmr_errf_status(LLMR_ST_ERR_MISALIGNED, err, es, "tensor '%s': %llu elements of %s are not a whole number of bytes",
                    name, (unsigned long long)n, dtypes[t->dtype].name);
    if (bits / 8 != t->end - t->begin)
        return llmr_errf_status(LLMR_ST_ERR_TENSOR_INFO, err, es, "tensor '%s': shape x %s needs %llu bytes but data_offsets span %llu",
                    name, dtypes[t->dtype].name, (unsigned long long)(bits / 8), (unsigned long long)(t->end - t->begin));
    return LLMR_ST_OK;
}

static int by_begin(const void *a, const void *b) {
    const llmr_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

static llmr_st_status parse_metadata(llmr_safetensors *st, json_t *meta, char *err, size_t es) {
    if (!json_is_object(meta)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "__metadata__ is not an object");
    size_t n = json_object_size(meta);
    st->meta_keys = calloc(n ? n : 1, sizeof(char *));
    st->meta_vals = calloc(n ? n : 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_vals) return llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "__metadata__ value of '%s' is not a string", k);
        st->meta_keys[st->meta_count] = strdup(k);
        st->meta_vals[st->meta_count] = strdup(json_string_value(v));
        st->meta_count++;
        if (!st->meta_keys[st->meta_count - 1] || !st->meta_vals[st->meta_count - 1])
            return llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory");
    }
    return LLMR_ST_OK;
}

static llmr_st_status parse_json(llmr_safetensors *st, const char *text, size_t len, char *err, size_t es) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        /* jansson stops at integers beyond int64: for sizes that is an overflow, not bad JSON. */
        return llmr_errf_status(strstr(je.text, "too big integer") ? LLMR_ST_ERR_OVERFLOW : LLMR_ST_ERR_HEADER_JSON, err, es,
                    "header JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    llmr_st_status s = LLMR_ST_OK;
    if (!json_is_object(root)) { s = llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "header JSON is not an object"); goto out; }
    st->tensors = calloc(json_object_size(root) + 1, sizeof *st->tensors);
    if (!st->tensors) { s = llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory"); goto out; }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((s = parse_metadata(st, val, err, es)) != LLMR_ST_OK) goto out;
            continue;
        }
        llmr_st_tensor *t = &st->tensors[st->count];
        t->name = strdup(key);
        if (!t->name) { s = llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory"); goto out; }
        st->count++;
        if ((s = parse_tensor(key, val, t, err, es)) != LLMR_ST_OK) goto out;
    }
out:
    json_decref(root);
    return s;
}

/* The sorted ranges must tile [0, data_size) exactly. */
static llmr_st_status check_layout(llmr_safetensors *st, char *err, size_t es) {
    qsort(st->tensors, st->count, sizeof *st->tensors, by_begin);
    uint64_t data_size = st->file_size - 8 - st->header_len, pos = 0;
    for (size_t i = 0; i < st->count; i++) {
        const llmr_st_tensor *t = &st->tensors[i];
        if (t->begin != pos)
            return llmr_errf_status(LLMR_ST_ERR_OFFSET, err, es, "tensor '%s' starts at data offset %llu, expected %llu (%s)", t->name,
                        (unsigned long long)t->begin, (unsigned long long)pos, t->begin < pos ? "overlap" : "gap");
        pos = t->end;
    }
    if (pos != data_size)
        return llmr_errf_status(LLMR_ST_ERR_INCOMPLETE, err, es, "tensors need %llu data bytes but the file holds %llu (%s)",
                    (unsigned long long)pos, (unsigned long long)data_size, pos > data_size ? "truncated" : "trailing bytes");
    return LLMR_ST_OK;
}

llmr_st_status llmr_st_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size, llmr_safetensors **out,
                             char *err, size_t es) {
    if (err && es) err[0] = 0;
    if (buf_len < 8 || file_size < 8)
        return llmr_errf_status(LLMR_ST_ERR_HEADER_TOO_SMALL, err, es, "file is %llu bytes, shorter than the 8-byte header length",
                    (unsigned long long)file_size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > LLMR_ST_MAX_HEADER)
        return llmr_errf_status(LLMR_ST_ERR_HEADER_TOO_LARGE, err, es, "header length %llu exceeds the %u-byte bound",
                    (unsigned long long)n, LLMR_ST_MAX_HEADER);
    if (8 + n > file_size)
        return llmr_errf_status(LLMR_ST_ERR_HEADER_LENGTH, err, es, "header length %llu runs past the end of the %llu-byte file",
                    (unsigned long long)n, (unsigned long long)file_size);
    if (8 + n > buf_len) return llmr_errf_status(LLMR_ST_ERR_IO, err, es, "buffer holds %zu bytes, header needs %llu", buf_len, (unsigned long long)(8 + n));
    if (!utf8_valid(buf + 8, n)) return llmr_errf_status(LLMR_ST_ERR_HEADER_UTF8, err, es, "header is not valid UTF-8");
    if (memchr(buf + 8, 0, n)) return llmr_errf_status(LLMR_ST_ERR_HEADER_JSON, err, es, "header contains a NUL byte");
    llmr_safetensors *st = calloc(1, sizeof *st);
    if (!st) return llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory");
    st->header_len = n;
    st->file_size = file_size;
    llmr_st_status s = parse_json(st, (const char *)buf + 8, n, err, es);
    if (s == LLMR_ST_OK) s = check_layout(st, err, es);
    if (s != LLMR_ST_OK) { llmr_st_destroy(st); return s; }
    *out = st;
    return LLMR_ST_OK;
}

llmr_st_status llmr_st_open(const char *path, llmr_safetensors **out, char *err, size_t es) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: %s", path, strerror(errno));
    struct stat sb;
    uint8_t lenbuf[8];
    uint8_t *buf = NULL;
    llmr_st_status s;
    if (fstat(fd, &sb) != 0) { s = llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: %s", path, strerror(errno)); goto done; }
    ssize_t r = pread(fd, lenbuf, 8, 0);
    if (r < 8) {
        s = llmr_errf_status(LLMR_ST_ERR_HEADER_TOO_SMALL, err, es, "%s: file is %lld bytes, shorter than the 8-byte header length",
                 path, (long long)sb.st_size);
        goto done;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i];
    size_t want = 8 + (size_t)(n > LLMR_ST_MAX_HEADER || 8 + n > (uint64_t)sb.st_size ? 0 : n);
    buf = malloc(want);
    if (!buf) { s = llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory"); goto done; }
    if (pread(fd, buf, want, 0) != (ssize_t)want) { s = llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: short read", path); goto done; }
    s = llmr_st_parse(buf, want, (uint64_t)sb.st_size, out, err, es);
    if (s != LLMR_ST_OK) {
        /* Prefix the path so the user knows which shard is bad. */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err ? err : "");
        llmr_errf_status(s, err, es, "%s: %s", path, tmp);
    } else if (!((*out)->path = strdup(path))) {
        llmr_st_destroy(*out);
        s = llmr_errf_status(LLMR_ST_ERR_NOMEM, err, es, "out of memory");
    }
done:
    free(buf);
    close(fd);
    return s;
}

size_t llmr_st_count(const llmr_safetensors *st) { return st->count; }
const llmr_st_tensor *llmr_st_at(const llmr_safetensors *st, size_t i) { return i < st->count ? &st->tensors[i] : NULL; }
uint64_t llmr_st_data_offset(const llmr_safetensors *st) { return 8 + st->header_len; }
uint64_t llmr_st_file_size(const llmr_safetensors *st) { return st->file_size; }

const llmr_st_tensor *llmr_st_find(const llmr_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *llmr_st_metadata(const llmr_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_vals[i];
    return NULL;
}

const uint8_t *llmr_st_map_data(llmr_safetensors *st, char *err, size_t es) {
    if (st->map) return (const uint8_t *)st->map + 8 + st->header_len;
    if (!st->path) { llmr_errf_status(LLMR_ST_ERR_IO, err, es, "not opened from a file"); return NULL; }
    int fd = open(st->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: %s", st->path, strerror(errno)); return NULL; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != st->file_size) {
        close(fd);
        llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: file changed size since its header was read", st->path);
        return NULL;
    }
    void *m = mmap(NULL, st->file_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { llmr_errf_status(LLMR_ST_ERR_IO, err, es, "%s: mmap: %s", st->path, strerror(errno)); return NULL; }
    st->map = m;
    return (const uint8_t *)m + 8 + st->header_len;
}
