/* jinja_value.c — arena, buffers and the Python semantics of values (truth, ==, <, str, repr,
 * json.dumps) that byte-identical rendering depends on. */
#include "router/template/jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------------------------- */
struct jarena_chunk { jarena_chunk *next; size_t used, cap; _Alignas(16) unsigned char mem[]; };

void jarena_init(jarena *a, size_t limit) { memset(a, 0, sizeof *a); a->limit = limit; }

void jarena_free(jarena *a) {
    jarena_chunk *c = a->head;
    while (c) { jarena_chunk *n = c->next; free(c); c = n; }
    a->head = NULL; a->used_total = 0;
}

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (c && c->cap * 2 > cap && c->cap < (1u << 22)) cap = c->cap * 2;
        if (a->limit && a->used_total + cap + sizeof *c > a->limit) {
            if (a->used_total + n + sizeof *c > a->limit) { a->exhausted = true; return NULL; }
            cap = n;
        }
        jarena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) { a->exhausted = true; return NULL; }
        nc->next = c; nc->used = 0; nc->cap = cap;
        a->head = c = nc;
        a->used_total += cap + sizeof *nc;
    }
    void *p = c->mem + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jarena_strndup(jarena *a, const char *s, size_t n) {
    char *p = jarena_alloc(a, n + 1);
    if (p && n) memcpy(p, s, n);
    return p;
}

/* ---- buffers -------------------------------------------------------------------------------- */
static bool jbuf_grow(jbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) {
        if (cap > SIZE_MAX / 2) { b->oom = true; return false; }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = true; return false; }
    b->p = p; b->cap = cap;
    return true;
}

void jbuf_put(jbuf *b, const void *s, size_t n) {
    if (!n || !jbuf_grow(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }
void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }

void jbuf_printf(jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { jbuf_put(b, tmp, (size_t)n); return; }
    if (!jbuf_grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void jbuf_free(jbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

/* ---- containers ----------------------------------------------------------------------------- */
jv jv_cstr(const char *s) { return jv_strn(s, strlen(s)); }

jlist *jlist_new(jarena *a, size_t cap, int kind) {
    jlist *l = jarena_alloc(a, sizeof *l);
    if (!l) return NULL;
    l->kind = kind;
    if (cap) {
        l->it = jarena_alloc(a, cap * sizeof(jv));
        if (!l->it) return NULL;
        l->cap = cap;
    }
    return l;
}

bool jlist_push(jarena *a, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *it = jarena_alloc(a, cap * sizeof(jv));
        if (!it) return false;
        if (l->n) memcpy(it, l->it, l->n * sizeof(jv));
        l->it = it; l->cap = cap;
    }
    l->it[l->n++] = v;
    return true;
}

jdict *jdict_new(jarena *a, size_t cap) {
    jdict *d = jarena_alloc(a, sizeof *d);
    if (!d) return NULL;
    d->ar = a;
    if (cap) {
        d->k = jarena_alloc(a, cap * sizeof(jv));
        d->v = jarena_alloc(a, cap * sizeof(jv));
        if (!d->k || !d->v) return NULL;
        d->cap = cap;
    }
    return d;
}

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 16777619u; }
    return h;
}

/* Brings the index up to date with d->n entries; false if it cannot (then lookups scan). */
static bool index_sync(jdict *d) {
    if (d->hn == d->n && d->hidx) return true;
    if (!d->ar) return false;
    if (!d->hidx || d->hcap < 2 * d->n) {
        size_t cap = 64;
        while (cap < 4 * d->n) cap *= 2;
        uint32_t *h = jarena_alloc(d->ar, cap * sizeof *h);   /* zeroed: 0 = empty, else index + 1 */
        if (!h) return false;
        d->hidx = h; d->hcap = cap; d->hn = 0;
    }
    for (; d->hn < d->n; d->hn++) {
        jv k = d->k[d->hn];
        if (k.t != JT_STR) continue;
        size_t slot = hash_bytes(k.u.s, k.n) & (d->hcap - 1);
        while (d->hidx[slot]) {
            jv o = d->k[d->hidx[slot] - 1];
            if (o.n == k.n && memcmp(o.u.s, k.u.s, k.n) == 0) break;   /* duplicate key: keep the first */
            slot = (slot + 1) & (d->hcap - 1);
        }
        if (!d->hidx[slot]) d->hidx[slot] = (uint32_t)d->hn + 1;
    }
    return true;
}

jv *jdict_get_str(jdict *d, const char *s, size_t n) {
    if (d->n > 16 && index_sync(d)) {
        size_t slot = hash_bytes(s, n) & (d->hcap - 1);
        while (d->hidx[slot]) {
            size_t i = d->hidx[slot] - 1;
            if (d->k[i].n == n && memcmp(d->k[i].u.s, s, n) == 0) return &d->v[i];
            slot = (slot + 1) & (d->hcap - 1);
        }
        return NULL;
    }
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].n == n && memcmp(d->k[i].u.s, s, n) == 0) return &d->v[i];
    return NULL;
}

jv *jdict_get(jdict *d, jv k) {
    if (k.t == JT_STR) return jdict_get_str(d, k.u.s, k.n);
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

bool jdict_set(jarena *a, jdict *d, jv k, jv v) {
    jv *slot = jdict_get(d, k);
    if (slot) { *slot = v; return true; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = jarena_alloc(a, cap * sizeof(jv)), *nv = jarena_alloc(a, cap * sizeof(jv));
        if (!nk || !nv) return false;
        if (d->n) { memcpy(nk, d->k, d->n * sizeof(jv)); memcpy(nv, d->v, d->n * sizeof(jv)); }
        d->k = nk; d->v = nv; d->cap = cap;
    }
    d->k[d->n] = k; d->v[d->n] = v; d->n++;
    return true;
}

/* ---- Python semantics ----------------------------------------------------------------------- */
bool jv_is_number(jv v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
double jv_num(jv v) { return v.t == JT_FLOAT ? v.u.f : (double)v.u.i; }

bool jv_truthy(jv v) {
    switch (v.t) {
    case JT_UNDEF: case JT_NONE: return false;
    case JT_BOOL: case JT_INT: return v.u.i != 0;
    case JT_FLOAT: return v.u.f != 0.0;
    case JT_STR: return v.n != 0;
    case JT_LIST: return v.u.l->kind == JL_GEN || v.u.l->n != 0;
    case JT_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

bool jv_equal(jv a, jv b) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) return a.u.i == b.u.i;
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JT_UNDEF: case JT_NONE: return true;
    case JT_STR: return a.n == b.n && memcmp(a.u.s, b.u.s, a.n) == 0;
    case JT_LIST: {
        const jlist *x = a.u.l, *y = b.u.l;
        if (x == y) return true;
        if (x->kind == JL_GEN || y->kind == JL_GEN || x->kind != y->kind || x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) if (!jv_equal(x->it[i], y->it[i])) return false;
        return true;
    }
    case JT_DICT: {
        jdict *x = a.u.d, *y = b.u.d;
        if (x == y) return true;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) {
            jv *o = jdict_get(y, x->k[i]);
            if (!o || !jv_equal(x->v[i], *o)) return false;
        }
        return true;
    }
    case JT_NS: return a.u.d == b.u.d;
    case JT_FUNC: return a.u.fn == b.u.fn;
    case JT_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool jv_order(jv a, jv b, int *cmp) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) *cmp = (a.u.i > b.u.i) - (a.u.i < b.u.i);
        else {
            double x = jv_num(a), y = jv_num(b);
            *cmp = (x > y) - (x < y);
        }
        return true;
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.n < b.n ? a.n : b.n;
        int c = n ? memcmp(a.u.s, b.u.s, n) : 0;
        if (c == 0) c = (a.n > b.n) - (a.n < b.n);
        *cmp = (c > 0) - (c < 0);
        return true;
    }
    if (a.t == JT_LIST && b.t == JT_LIST && a.u.l->kind == b.u.l->kind && a.u.l->kind != JL_GEN) {
        const jlist *x = a.u.l, *y = b.u.l;
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            if (jv_equal(x->it[i], y->it[i])) continue;
            return jv_order(x->it[i], y->it[i], cmp);
        }
        *cmp = (x->n > y->n) - (x->n < y->n);
        return true;
    }
    return false;
}

const char *jv_type_name(jv v) {
    switch (v.t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return "str";
    case JT_LIST: return v.u.l->kind == JL_TUPLE ? "tuple" : v.u.l->kind == JL_GEN ? "generator" : "list";
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_FUNC: return v.u.fn->kind == FN_MACRO || v.u.fn->kind == FN_CALLER ? "Macro" : "function";
    case JT_LOOP: return "LoopContext";
    default: return "object";
    }
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */
size_t utf8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

size_t utf8_offset(const char *s, size_t n, size_t ci) {
    size_t i = 0, c = 0;
    while (i < n) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) { if (c == ci) return i; c++; }
        i++;
    }
    return n;
}

/* Decodes one code point at s[*i] (advances *i); invalid bytes decode as themselves. */
static uint32_t utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int extra = c >= 0xF8 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (extra == 0) { (*i)++; return c; }
    uint32_t cp = c & (0x3Fu >> extra);
    for (int k = 1; k <= extra; k++) {
        if (*i + (size_t)k >= n || (u[*i + (size_t)k] & 0xC0) != 0x80) { (*i)++; return c; }
        cp = (cp << 6) | (u[*i + (size_t)k] & 0x3F);
    }
    *i += (size_t)extra + 1;
    return cp;
}

/* ---- str / repr ----------------------------------------------------------------------------- */
void jv_float_repr(jbuf *b, double f) {
    if (isnan(f)) { jbuf_puts(b, "nan"); return; }
    if (isinf(f)) { jbuf_puts(b, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { jbuf_puts(b, signbit(f) ? "-0.0" : "0.0"); return; }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX: split digits and exponent */
    char digits[32]; int nd = 0; const char *p = tmp; bool neg = false;
    if (*p == '-') { neg = true; p++; }
    for (; *p && *p != 'e'; p++) if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int e = atoi(p + 1);
    if (neg) jbuf_putc(b, '-');
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) jbuf_putc(b, i < nd ? digits[i] : '0');
            jbuf_putc(b, '.');
            if (nd > e + 1) jbuf_put(b, digits + e + 1, (size_t)(nd - e - 1));
            else jbuf_putc(b, '0');
        } else {
            jbuf_puts(b, "0.");
            for (int i = 0; i < -e - 1; i++) jbuf_putc(b, '0');
            jbuf_put(b, digits, (size_t)nd);
        }
    } else {
        jbuf_putc(b, digits[0]);
        if (nd > 1) { jbuf_putc(b, '.'); jbuf_put(b, digits + 1, (size_t)(nd - 1)); }
        jbuf_printf(b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

/* Python's str.isprintable() for the code points a chat template is likely to meet. */
static bool py_printable(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7F) return false;
    if (cp >= 0x80 && cp <= 0xA0) return false;
    if (cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
        (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
        cp == 0x061C || (cp >= 0x2066 && cp <= 0x206F) || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
        (cp >= 0xE000 && cp <= 0xF8FF) || cp > 0x10FFFF)
        return false;
    return true;
}

static void repr_str(jbuf *b, const char *s, size_t n) {
    char q = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n)) q = '"';
    jbuf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t cp = utf8_next(s, n, &i);
        if (cp == (uint32_t)q || cp == '\\') { jbuf_putc(b, '\\'); jbuf_putc(b, (char)cp); }
        else if (cp == '\n') jbuf_puts(b, "\\n");
        else if (cp == '\r') jbuf_puts(b, "\\r");
        else if (cp == '\t') jbuf_puts(b, "\\t");
        else if (cp < 0x80 && py_printable(cp)) jbuf_putc(b, (char)cp);
        else if (cp >= 0x80 && py_printable(cp)) jbuf_put(b, s + st, i - st);
        else if (cp < 0x100) jbuf_printf(b, "\\x%02x", cp);
        else if (cp < 0x10000) jbuf_printf(b, "\\u%04x", cp);
        else jbuf_printf(b, "\\U%08x", cp);
    }
    jbuf_putc(b, q);
}

void jv_repr(jbuf *b, jv v) {
    switch (v.t) {
    case JT_STR:
        if (v.flags & JS_SAFE) { jbuf_puts(b, "Markup("); repr_str(b, v.u.s, v.n); jbuf_putc(b, ')'); return; }
        repr_str(b, v.u.s, v.n);
        return;
    case JT_UNDEF: jbuf_puts(b, "Undefined"); return;
    case JT_LIST: {
        const jlist *l = v.u.l;
        if (l->kind == JL_GEN) { jbuf_puts(b, "<generator object>"); return; }
        if (l->is_range) {
            if (l->range[2] == 1) jbuf_printf(b, "range(%lld, %lld)", (long long)l->range[0], (long long)l->range[1]);
            else jbuf_printf(b, "range(%lld, %lld, %lld)", (long long)l->range[0], (long long)l->range[1], (long long)l->range[2]);
            return;
        }
        jbuf_putc(b, l->kind == JL_TUPLE ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) jbuf_puts(b, ", ");
            jv_repr(b, l->it[i]);
        }
        if (l->kind == JL_TUPLE && l->n == 1) jbuf_putc(b, ',');
        jbuf_putc(b, l->kind == JL_TUPLE ? ')' : ']');
        return;
    }
    case JT_DICT: case JT_NS: {
        const jdict *d = v.u.d;
        if (v.t == JT_NS) jbuf_puts(b, "<Namespace ");
        jbuf_putc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) jbuf_puts(b, ", ");
            jv_repr(b, d->k[i]);
            jbuf_puts(b, ": ");
            jv_repr(b, d->v[i]);
        }
        jbuf_putc(b, '}');
        if (v.t == JT_NS) jbuf_putc(b, '>');
        return;
    }
    default: jv_str(b, v); return;
    }
}

void jv_str(jbuf *b, jv v) {
    switch (v.t) {
    case JT_UNDEF: return;
    case JT_NONE: jbuf_puts(b, "None"); return;
    case JT_BOOL: jbuf_puts(b, v.u.i ? "True" : "False"); return;
    case JT_INT: jbuf_printf(b, "%lld", (long long)v.u.i); return;
    case JT_FLOAT: jv_float_repr(b, v.u.f); return;
    case JT_STR: jbuf_put(b, v.u.s, v.n); return;
    case JT_FUNC:
        if (v.u.fn->kind == FN_MACRO) jbuf_printf(b, "<Macro '%s'>", v.u.fn->name ? v.u.fn->name : "");
        else jbuf_printf(b, "<function %s>", v.u.fn->name ? v.u.fn->name : "");
        return;
    case JT_LOOP: jbuf_printf(b, "<LoopContext %lld/%zu>", (long long)v.u.loop->index0 + 1, v.u.loop->items->n); return;
    default: jv_repr(b, v); return;
    }
}

/* ---- json.dumps ----------------------------------------------------------------------------- */
static void json_str(jbuf *b, const char *s, size_t n, bool ensure_ascii) {
    jbuf_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || !ensure_ascii)) { i++; run++; continue; }
        if (run) { jbuf_put(b, s + i - run, run); run = 0; }
        if (c == '"') { jbuf_puts(b, "\\\""); i++; }
        else if (c == '\\') { jbuf_puts(b, "\\\\"); i++; }
        else if (c == '\n') { jbuf_puts(b, "\\n"); i++; }
        else if (c == '\r') { jbuf_puts(b, "\\r"); i++; }
        else if (c == '\t') { jbuf_puts(b, "\\t"); i++; }
        else if (c == '\b') { jbuf_puts(b, "\\b"); i++; }
        else if (c == '\f') { jbuf_puts(b, "\\f"); i++; }
        else if (c < 0x20) { jbuf_printf(b, "\\u%04x", c); i++; }
        else {
            uint32_t cp = utf8_next(s, n, &i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                jbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else jbuf_printf(b, "\\u%04x", cp);
        }
    }
    if (run) jbuf_put(b, s + i - run, run);
    jbuf_putc(b, '"');
}

typedef struct { bool ascii; int indent; const char *isep, *ksep; bool sort; const char **bad; } jopts;

static void json_nl(jbuf *b, const jopts *o, int level) {
    jbuf_putc(b, '\n');
    for (int i = 0; i < o->indent * level; i++) jbuf_putc(b, ' ');
}

static bool json_key(jbuf *b, jv k, const jopts *o) {
    switch (k.t) {
    case JT_STR: json_str(b, k.u.s, k.n, o->ascii); return true;
    case JT_BOOL: jbuf_puts(b, k.u.i ? "\"true\"" : "\"false\""); return true;
    case JT_NONE: jbuf_puts(b, "\"null\""); return true;
    case JT_INT: case JT_FLOAT: jbuf_putc(b, '"'); jv_str(b, k); jbuf_putc(b, '"'); return true;
    default: *o->bad = jv_type_name(k); return false;
    }
}

static int key_cmp(jv a, jv b) { int c = 0; jv_order(a, b, &c); return c; }

static bool json_val(jbuf *b, jv v, const jopts *o, int level) {
    if (level > 512) { *o->bad = "nesting too deep"; return false; }
    switch (v.t) {
    case JT_NONE: jbuf_puts(b, "null"); return true;
    case JT_BOOL: jbuf_puts(b, v.u.i ? "true" : "false"); return true;
    case JT_INT: jbuf_printf(b, "%lld", (long long)v.u.i); return true;
    case JT_FLOAT:
        if (isnan(v.u.f)) jbuf_puts(b, "NaN");
        else if (isinf(v.u.f)) jbuf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else jv_float_repr(b, v.u.f);
        return true;
    case JT_STR: json_str(b, v.u.s, v.n, o->ascii); return true;
    case JT_LIST: {
        const jlist *l = v.u.l;
        if (l->kind == JL_GEN) { *o->bad = "generator"; return false; }
        if (l->is_range) { *o->bad = "range"; return false; }
        if (!l->n) { jbuf_puts(b, "[]"); return true; }
        jbuf_putc(b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) jbuf_puts(b, o->isep);
            if (o->indent >= 0) json_nl(b, o, level + 1);
            if (!json_val(b, l->it[i], o, level + 1)) return false;
        }
        if (o->indent >= 0) json_nl(b, o, level);
        jbuf_putc(b, ']');
        return true;
    }
    case JT_DICT: {
        const jdict *d = v.u.d;
        if (!d->n) { jbuf_puts(b, "{}"); return true; }
        size_t order_small[64], *order = order_small;
        if (d->n > 64) {
            order = malloc(d->n * sizeof *order);
            if (!order) { *o->bad = "out of memory"; return false; }
        }
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort)   /* insertion sort: stable, and dicts here are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && key_cmp(d->k[order[j - 1]], d->k[order[j]]) > 0; j--) {
                    size_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
                }
        bool ok = true;
        jbuf_putc(b, '{');
        for (size_t i = 0; i < d->n && ok; i++) {
            if (i) jbuf_puts(b, o->isep);
            if (o->indent >= 0) json_nl(b, o, level + 1);
            ok = json_key(b, d->k[order[i]], o);
            if (ok) { jbuf_puts(b, o->ksep); ok = json_val(b, d->v[order[i]], o, level + 1); }
        }
        if (order != order_small) free(order);
        if (!ok) return false;
        if (o->indent >= 0) json_nl(b, o, level);
        jbuf_putc(b, '}');
        return true;
    }
    default: *o->bad = jv_type_name(v); return false;
    }
}

bool jv_tojson(jbuf *b, jv v, bool ensure_ascii, int indent, const char *item_sep, const char *key_sep,
               bool sort_keys, const char **bad) {
    jopts o = { ensure_ascii, indent, item_sep ? item_sep : (indent >= 0 ? "," : ", "),
                key_sep ? key_sep : ": ", sort_keys, bad };
    return json_val(b, v, &o, 0);
}

/* ---- conversions ---------------------------------------------------------------------------- */
jv jv_from_json(jarena *a, json_t *j) {
    if (!j) return jv_none();
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jdict *d = jdict_new(a, json_object_size(j));
        if (!d) return jv_none();
        const char *k; json_t *val;
        json_object_foreach(j, k, val) {
            d->k[d->n] = jv_cstr(k);
            d->v[d->n] = jv_from_json(a, val);
            d->n++;
        }
        return jv_dict(d);
    }
    case JSON_ARRAY: {
        jlist *l = jlist_new(a, json_array_size(j), JL_LIST);
        if (!l) return jv_none();
        size_t i; json_t *val;
        json_array_foreach(j, i, val) l->it[l->n++] = jv_from_json(a, val);
        return jv_list(l);
    }
    case JSON_STRING: return jv_strn(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    default: return jv_none();
    }
}

jv jv_from_buf(jarena *a, const jbuf *b) {
    if (!b->n) return jv_strn("", 0);
    char *p = jarena_strndup(a, b->p, b->n);
    if (!p) return jv_strn("", 0);
    return jv_strn(p, b->n);
}
