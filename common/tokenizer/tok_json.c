/* tok_json.c — see tok_json.h. */
#include "common/tokenizer/tok_json.h"
#include "common/tokenizer/tok_utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tj_init(tok_json *j, const char *buf, size_t len, const char *name, char *err,
             size_t err_size) {
    j->base = j->p = buf;
    j->end = buf + len;
    j->name = name ? name : "tokenizer.json";
    j->err = err;
    j->err_size = err_size;
    j->oom = 0;
}

int tj_fail(tok_json *j, const char *fmt, ...) {
    if (!j->err || j->err_size == 0) return -1;
    size_t line = 1, col = 1;
    for (const char *q = j->base; q < j->p && q < j->end; q++) {
        if (*q == '\n') { line++; col = 1; } else col++;
    }
    int n = snprintf(j->err, j->err_size, "%s: line %zu col %zu: ", j->name, line, col);
    if (n >= 0 && (size_t)n < j->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err + n, j->err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int tj_buf_add(tj_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void tj_buf_free(tj_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int tj_peek(tok_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

int tj_expect(tok_json *j, char c, const char *ctx) {
    if (tj_peek(j) != (unsigned char)c) return tj_fail(j, "expected '%c' in %s", c, ctx);
    j->p++;
    return 0;
}

int tj_next(tok_json *j, char close, const char *ctx) {
    int c = tj_peek(j);
    if (c == ',') { j->p++; return 1; }
    if (c == close) { j->p++; return 0; }
    return tj_fail(j, "expected ',' or '%c' in %s", close, ctx);
}

static int hex4(const char *p, unsigned *v) {
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decodes the escape at j->p (just after the backslash) into out. */
static int escape(tok_json *j, tj_buf *out, const char *ctx) {
    char tmp[4];
    size_t n = 1;
    if (j->p >= j->end) return tj_fail(j, "unterminated string in %s", ctx);
    switch (*j->p) {
    case '"': tmp[0] = '"'; break;
    case '\\': tmp[0] = '\\'; break;
    case '/': tmp[0] = '/'; break;
    case 'b': tmp[0] = '\b'; break;
    case 'f': tmp[0] = '\f'; break;
    case 'n': tmp[0] = '\n'; break;
    case 'r': tmp[0] = '\r'; break;
    case 't': tmp[0] = '\t'; break;
    case 'u': {
        unsigned cp, lo;
        if (j->end - j->p < 5 || hex4(j->p + 1, &cp) < 0)
            return tj_fail(j, "bad \\u escape in %s", ctx);
        j->p += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return tj_fail(j, "lone low surrogate \\u%04X in %s", cp, ctx);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (j->end - j->p < 7 || j->p[1] != '\\' || j->p[2] != 'u' ||
                hex4(j->p + 3, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                return tj_fail(j, "lone high surrogate \\u%04X in %s", cp, ctx);
            j->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        n = put_utf8(tmp, cp);
        break;
    }
    default: return tj_fail(j, "bad escape '\\%c' in %s", *j->p, ctx);
    }
    j->p++;
    if (tj_buf_add(out, tmp, n) < 0) { j->oom = 1; return tj_fail(j, "out of memory in %s", ctx); }
    return 0;
}

int tj_string(tok_json *j, tj_buf *out, const char *ctx) {
    if (tj_peek(j) != '"') return tj_fail(j, "expected a string in %s", ctx);
    j->p++;
    for (;;) {
        const char *run = j->p;
        unsigned char high = 0;
        while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20)
            high |= (unsigned char)*j->p++;
        if ((high & 0x80) && tok_utf8_valid_prefix((const uint8_t *)run, (size_t)(j->p - run)) < (size_t)(j->p - run)) {
            j->p = run + tok_utf8_valid_prefix((const uint8_t *)run, (size_t)(j->p - run));
            return tj_fail(j, "invalid UTF-8 in a string in %s", ctx);
        }
        if (j->p > run && tj_buf_add(out, run, (size_t)(j->p - run)) < 0) {
            j->oom = 1;
            return tj_fail(j, "out of memory in %s", ctx);
        }
        if (j->p >= j->end) return tj_fail(j, "unterminated string in %s", ctx);
        if (*j->p == '"') { j->p++; return 0; }
        if (*j->p != '\\') return tj_fail(j, "control character in string in %s", ctx);
        j->p++;
        if (escape(j, out, ctx) < 0) return -1;
    }
}

int tj_uint(tok_json *j, long long max, long long *v, const char *ctx) {
    int c = tj_peek(j);
    if (c < '0' || c > '9') return tj_fail(j, "expected a non-negative integer in %s", ctx);
    if (c == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return tj_fail(j, "leading zero in %s", ctx);
    long long x = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        x = x * 10 + (*j->p - '0');
        if (x > max) return tj_fail(j, "integer above the limit %lld in %s", max, ctx);
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return tj_fail(j, "expected an integer, not a fraction, in %s", ctx);
    *v = x;
    return 0;
}

/* Skips a string starting at j->p (the opening quote). */
static int skip_string(tok_json *j, const char *ctx) {
    j->p++;
    while (j->p < j->end) {
        char c = *j->p++;
        if (c == '"') return 0;
        if (c == '\\') {
            if (j->p >= j->end) break;
            j->p++;
        }
    }
    return tj_fail(j, "unterminated string in %s", ctx);
}

int tj_skip(tok_json *j, const char **start, size_t *len, const char *ctx) {
    int c = tj_peek(j);
    if (c < 0) return tj_fail(j, "expected a value in %s", ctx);
    *start = j->p;
    if (c == '"') {
        if (skip_string(j, ctx) < 0) return -1;
    } else if (c == '{' || c == '[') {
        /* Bracket matching; the bracket kinds are checked by jansson when it parses the span. */
        size_t depth = 0;
        while (j->p < j->end) {
            char d = *j->p;
            if (d == '"') { if (skip_string(j, ctx) < 0) return -1; continue; }
            j->p++;
            if (d == '{' || d == '[') depth++;
            else if ((d == '}' || d == ']') && --depth == 0) break;
        }
        if (depth != 0) return tj_fail(j, "unterminated %s in %s", c == '{' ? "object" : "array", ctx);
    } else {
        while (j->p < j->end && strchr(",}] \t\r\n", *j->p) == NULL) j->p++;
        if (j->p == *start) return tj_fail(j, "expected a value in %s", ctx);
    }
    *len = (size_t)(j->p - *start);
    return 0;
}
