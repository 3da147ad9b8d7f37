/* json_check.c — see json_check.h. A recursive-descent recogniser; the depth limit bounds the stack. */
#include "node/json_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct cur {
    const unsigned char *p, *start, *end;
    const char *why;
} cur;

static int bad(cur *c, const char *why) { c->why = why; return -1; }

static void ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hex4(cur *c, unsigned *v) {
    if (c->end - c->p < 4) return bad(c, "truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = *c->p++;
        unsigned d = 16;
        if (h >= '0' && h <= '9') d = (unsigned)(h - '0');
        else if (h >= 'a' && h <= 'f') d = (unsigned)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') d = (unsigned)(h - 'A' + 10);
        if (d > 15) return bad(c, "bad hex digit in \\u escape");
        *v = *v * 16 + d;
    }
    return 0;
}

/* One UTF-8 sequence starting at c->p (c->p[0] >= 0x80). */
static int utf8(cur *c) {
    unsigned char b = *c->p;
    int n;
    unsigned min, cp;
    if (b >= 0xC2 && b <= 0xDF) { n = 1; cp = b & 0x1F; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 2; cp = b & 0x0F; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 3; cp = b & 0x07; min = 0x10000; }
    else return bad(c, "invalid UTF-8");
    if (c->end - c->p <= n) return bad(c, "truncated UTF-8");
    for (int i = 1; i <= n; i++) {
        if ((c->p[i] & 0xC0) != 0x80) return bad(c, "invalid UTF-8");
        cp = (cp << 6) | (c->p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad(c, "invalid UTF-8");
    c->p += n + 1;
    return 0;
}

static int string(cur *c) {
    c->p++; /* opening quote */
    while (c->p < c->end) {
        unsigned char b = *c->p;
        if (b == '"') { c->p++; return 0; }
        if (b < 0x20) return bad(c, "control character in string");
        if (b >= 0x80) { if (utf8(c)) return -1; continue; }
        c->p++;
        if (b != '\\') continue;
        if (c->p >= c->end) break;
        unsigned char e = *c->p++;
        if (e == 'u') {
            unsigned v, lo;
            if (hex4(c, &v)) return -1;
            if (v >= 0xDC00 && v <= 0xDFFF) return bad(c, "lone low surrogate in \\u escape");
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u') return bad(c, "lone high surrogate in \\u escape");
                c->p += 2;
                if (hex4(c, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return bad(c, "bad surrogate pair in \\u escape");
            }
        } else if (!strchr("\"\\/bfnrt", e) || e == 0) {
            return bad(c, "bad escape in string");
        }
    }
    return bad(c, "unterminated string");
}

static int digits(cur *c) {
    const unsigned char *s = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    return c->p > s ? 0 : bad(c, "digit expected in number");
}

static int number(cur *c) {
    if (*c->p == '-') c->p++;
    if (c->p >= c->end) return bad(c, "truncated number");
    if (*c->p == '0') c->p++;
    else if (digits(c)) return -1;
    if (c->p < c->end && *c->p == '.') { c->p++; if (digits(c)) return -1; }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (digits(c)) return -1;
    }
    return 0;
}

static int literal(cur *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return bad(c, "unexpected character");
    c->p += n;
    return 0;
}

static int value(cur *c, int depth);

static int container(cur *c, int depth, unsigned char close) {
    if (depth >= LLMR_JSON_CHECK_MAX_DEPTH) return bad(c, "nested too deeply");
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == close) { c->p++; return 0; }
    for (;;) {
        if (close == '}') {
            ws(c);
            if (c->p >= c->end || *c->p != '"') return bad(c, "object key (a string) expected");
            if (string(c)) return -1;
            ws(c);
            if (c->p >= c->end || *c->p != ':') return bad(c, "':' expected after an object key");
            c->p++;
        }
        if (value(c, depth + 1)) return -1;
        ws(c);
        if (c->p >= c->end) return bad(c, close == '}' ? "unterminated object" : "unterminated array");
        if (*c->p == close) { c->p++; return 0; }
        if (*c->p != ',') return bad(c, close == '}' ? "',' or '}' expected" : "',' or ']' expected");
        c->p++;
    }
}

static int value(cur *c, int depth) {
    ws(c);
    if (c->p >= c->end) return bad(c, "value expected");
    switch (*c->p) {
    case '{': return container(c, depth, '}');
    case '[': return container(c, depth, ']');
    case '"': return string(c);
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default:
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) return number(c);
        return bad(c, "unexpected character");
    }
}

int llmr_json_check(const char *buf, size_t len, char *err, size_t es) {
    /* no pointer arithmetic on NULL (undefined even with len 0) */
    cur c = {(const unsigned char *)buf, (const unsigned char *)buf, buf ? (const unsigned char *)buf + len : NULL, NULL};
    int rc = buf ? value(&c, 0) : bad(&c, "no input");
    if (rc == 0) {
        ws(&c);
        if (c.p != c.end) rc = bad(&c, "text after the JSON value");
    }
    if (rc != 0 && err && es) {
        size_t line = 1, col = 1;
        for (const unsigned char *q = c.start; q < c.p && q < c.end; q++) {
            if (*q == '\n') { line++; col = 1; } else col++;
        }
        snprintf(err, es, "line %zu column %zu: %s", line, col, c.why);
    }
    return rc;
}

int llmr_json_check_file(const char *path, char *err, size_t es) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(err, es, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (sb.st_size == 0) { close(fd); snprintf(err, es, "%s: empty file", path); return -1; }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { snprintf(err, es, "%s: %s", path, strerror(errno)); return -1; }
    char why[256];
    int rc = llmr_json_check(map, (size_t)sb.st_size, why, sizeof why);
    munmap(map, (size_t)sb.st_size);
    if (rc != 0) snprintf(err, es, "%s: %s", path, why);
    return rc;
}
