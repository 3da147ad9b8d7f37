/* jinja_builtins.c — filters, tests, globals and the Python methods templates call on strings,
 * dicts and lists, with the results Python jinja2 (as configured by transformers) gives.
 *
 * Attribute rules (jinja2 Environment.getattr/getitem): `obj.name` prefers the Python attribute
 * (so `d.items` is the method even if d has a key "items"), `obj[name]` prefers the item and falls
 * back to the attribute. Mutating methods (list.append, dict.update, ...) are refused like the
 * ImmutableSandboxedEnvironment does: reading them gives an "unsafe" undefined, calling it fails
 * with SecurityError. Filters that return generators in Python (map, select*, reject*, unique,
 * items, reverse) return a generator value: iterable, but with no len(), no subscript and not
 * JSON-serialisable, exactly as the reference behaves. */
#include "router/template/jinja_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMEQ(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), (n)) == 0)


static bool nomem(jrender *r, int line) {
    jr_fail(r, r->ar->exhausted ? JINJA_ELIMIT : JINJA_ENOMEM, line, "template exceeded the memory limit (%zu bytes)", r->opts->max_memory);
    return false;
}

/* Argument `name` (keyword) or position pos; *found tells whether it was given. */
static jv arg(const jargs *a, size_t pos, const char *name, jv def, bool *found) {
    if (found) *found = true;
    if (name) {
        size_t nl = strlen(name);
        for (size_t i = 0; i < a->nkw; i++)
            if (a->kwnames[i].t == JT_STR && a->kwnames[i].n == nl && memcmp(a->kwnames[i].u.s, name, nl) == 0) return a->kwargs[i];
    }
    if (pos != (size_t)-1 && pos < a->nargs) return a->args[pos];
    if (found) *found = false;
    return def;
}
#define NOPOS ((size_t)-1)

static jv mkstr(jrender *r, jbuf *b, int line) {
    if (b->oom) { jbuf_free(b); nomem(r, line); return jv_undef(); }
    jv v = jv_from_buf(r->ar, b);
    jbuf_free(b);
    if (r->ar->exhausted) { nomem(r, line); return jv_undef(); }
    return v;
}

static jv to_str(jrender *r, jv v, int line) {
    if (v.t == JT_STR) return v;
    jbuf b = {0};
    jv_str(&b, v);
    return mkstr(r, &b, line);
}

static jv str_concat_simple(jrender *r, jv a, jv b, int line) {
    jbuf x = {0};
    jbuf_put(&x, a.u.s, a.n);
    jbuf_put(&x, b.u.s, b.n);
    return mkstr(r, &x, line);
}

static jv mk_gen(jlist *l) { l->kind = JL_GEN; return jv_list(l); }

/* ---- iteration ------------------------------------------------------------------------------ */
jlist *jb_iter(jrender *r, jv v, int line) {
    switch (v.t) {
    case JT_LIST:
        if (v.u.l->kind == JL_LIST) return v.u.l;
        if (v.u.l->gen_err) { jr_type_error(r, line, "%s", v.u.l->gen_err); return NULL; }
        { jlist *l = jlist_new(r->ar, v.u.l->n, JL_LIST);
          if (!l) { nomem(r, line); return NULL; }
          if (v.u.l->n) memcpy(l->it, v.u.l->it, v.u.l->n * sizeof(jv));
          l->n = v.u.l->n;
          return l; }
    case JT_UNDEF: { jlist *l = jlist_new(r->ar, 0, JL_LIST); if (!l) nomem(r, line); return l; }
    case JT_DICT: {
        jlist *l = jlist_new(r->ar, v.u.d->n, JL_LIST);
        if (!l) { nomem(r, line); return NULL; }
        for (size_t i = 0; i < v.u.d->n; i++) l->it[l->n++] = v.u.d->k[i];
        return l;
    }
    case JT_STR: {
        jlist *l = jlist_new(r->ar, v.n, JL_LIST);
        if (!l) { nomem(r, line); return NULL; }
        for (size_t i = 0; i < v.n;) {
            size_t j = i + 1;
            while (j < v.n && ((unsigned char)v.u.s[j] & 0xC0) == 0x80) j++;
            l->it[l->n++] = jv_strn(v.u.s + i, j - i);
            i = j;
        }
        return l;
    }
    default:
        jr_type_error(r, line, "'%s' object is not iterable", jv_type_name(v));
        return NULL;
    }
}

/* ---- attribute / item access ---------------------------------------------------------------- */
static const char *const STR_METHODS[] = {
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "upper", "lower", "replace",
    "title", "capitalize", "format", "count", "find", "rfind", "index", "rindex", "join", "splitlines",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "zfill",
    "removeprefix", "removesuffix", "partition", "rpartition", "center", "ljust", "rjust", "swapcase",
    "casefold", "encode", "expandtabs", "istitle", "isidentifier", "isprintable", "isascii", NULL };
static const char *const DICT_METHODS[] = { "items", "keys", "values", "get", "copy", NULL };
static const char *const DICT_UNSAFE[] = { "pop", "popitem", "update", "setdefault", "clear", "fromkeys", NULL };
static const char *const LIST_METHODS[] = { "count", "index", "copy", NULL };
static const char *const LIST_UNSAFE[] = { "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL };

static bool in_names(const char *const *names, const char *s, size_t n) {
    for (; *names; names++) if ((*names)[0] == s[0] && strlen(*names) == n && memcmp(*names, s, n) == 0) return true;
    return false;
}

static jv bound(jrender *r, jv self, const char *const *names, const char *s, size_t n, int line) {
    for (; *names; names++)
        if ((*names)[0] == s[0] && strlen(*names) == n && memcmp(*names, s, n) == 0) {
            jfunc *fn = jarena_alloc(r->ar, sizeof *fn);
            if (!fn) { nomem(r, line); return jv_undef(); }
            fn->kind = FN_METHOD; fn->self = self; fn->name = *names;
            jv v = {0};
            v.t = JT_FUNC; v.u.fn = fn;
            return v;
        }
    return jv_undef();
}

static jv unsafe(jrender *r, jv obj, const char *s, size_t n) {
    jv u = jr_undef(r, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, s, jv_type_name(obj));
    u.flags |= JU_UNSAFE;
    return u;
}

static const char *obj_repr(jv o) {
    switch (o.t) {
    case JT_NONE: return "None";
    case JT_DICT: return "dict object";
    case JT_LIST: return o.u.l->kind == JL_TUPLE ? "tuple object" : o.u.l->kind == JL_GEN ? "generator object" : "list object";
    case JT_STR: return "str object";
    case JT_INT: return "int object";
    case JT_FLOAT: return "float object";
    case JT_BOOL: return "bool object";
    case JT_NS: return "Namespace object";
    case JT_FUNC: return "function object";
    case JT_LOOP: return "LoopContext object";
    default: return "object";
    }
}

static jv no_attr(jrender *r, jv obj, const char *s, size_t n) {
    (void)r;
    return jr_undef_attr(obj, s, n);
}

static jv loop_attr(jrender *r, jv lv, const char *s, size_t n, int line) {
    const jloop *l = lv.u.loop;
    int64_t len = (int64_t)l->items->n, i = l->index0;
    if (NAMEQ(s, n, "index")) return jv_int(i + 1);
    if (NAMEQ(s, n, "index0")) return jv_int(i);
    if (NAMEQ(s, n, "revindex")) return jv_int(len - i);
    if (NAMEQ(s, n, "revindex0")) return jv_int(len - i - 1);
    if (NAMEQ(s, n, "first")) return jv_bool(i == 0);
    if (NAMEQ(s, n, "last")) return jv_bool(i == len - 1);
    if (NAMEQ(s, n, "length")) return jv_int(len);
    if (NAMEQ(s, n, "depth")) return jv_int(l->depth0 + 1);
    if (NAMEQ(s, n, "depth0")) return jv_int(l->depth0);
    if (NAMEQ(s, n, "previtem")) return i > 0 ? l->items->it[i - 1] : jr_undef(r, "there is no previous item");
    if (NAMEQ(s, n, "nextitem")) return i + 1 < len ? l->items->it[i + 1] : jr_undef(r, "there is no next item");
    static const char *const LOOP_METHODS[] = { "cycle", "changed", NULL };
    jv m = bound(r, lv, LOOP_METHODS, s, n, line);
    return m.t == JT_FUNC ? m : no_attr(r, lv, s, n);
}

jv jb_getattr(jrender *r, jv obj, const char *s, size_t n, int line) {
    if (n == 0 || s[0] == '_') return no_attr(r, obj, s, n);   /* sandbox: no private/dunder attributes */
    switch (obj.t) {
    case JT_UNDEF: return jr_undef_error(r, obj, line);
    case JT_DICT: {
        if (in_names(DICT_METHODS, s, n)) return bound(r, obj, DICT_METHODS, s, n, line);
        if (in_names(DICT_UNSAFE, s, n)) return unsafe(r, obj, s, n);
        jv *v = jdict_get_str(obj.u.d, s, n);
        return v ? *v : no_attr(r, obj, s, n);
    }
    case JT_NS: { jv *v = jdict_get_str(obj.u.d, s, n); return v ? *v : no_attr(r, obj, s, n); }
    case JT_STR:
        if (in_names(STR_METHODS, s, n)) return bound(r, obj, STR_METHODS, s, n, line);
        return no_attr(r, obj, s, n);
    case JT_LIST:
        if (obj.u.l->kind != JL_GEN && in_names(LIST_METHODS, s, n)) return bound(r, obj, LIST_METHODS, s, n, line);
        if (obj.u.l->kind == JL_LIST && in_names(LIST_UNSAFE, s, n)) return unsafe(r, obj, s, n);
        return no_attr(r, obj, s, n);
    case JT_LOOP: return loop_attr(r, obj, s, n, line);
    default: return no_attr(r, obj, s, n);
    }
}

jv jb_getitem(jrender *r, jv obj, jv key, int line) {
    switch (obj.t) {
    case JT_UNDEF: return jr_undef_error(r, obj, line);
    case JT_DICT: {
        jv *v = jdict_get(obj.u.d, key);
        if (v) return *v;
        break;
    }
    case JT_NS: {
        jv *v = key.t == JT_STR ? jdict_get_str(obj.u.d, key.u.s, key.n) : NULL;
        if (v) return *v;
        break;
    }
    case JT_LIST:
        if (obj.u.l->kind != JL_GEN && (key.t == JT_INT || key.t == JT_BOOL)) {
            int64_t i = key.u.i, n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.u.l->it[i];
            return jr_undef(r, "%s has no element %lld", obj_repr(obj), (long long)key.u.i);
        }
        break;
    case JT_STR:
        if (key.t == JT_INT || key.t == JT_BOOL) {
            int64_t cps = (int64_t)utf8_count(obj.u.s, obj.n), i = key.u.i;
            if (i < 0) i += cps;
            if (i >= 0 && i < cps) {
                size_t a = utf8_offset(obj.u.s, obj.n, (size_t)i), b = utf8_offset(obj.u.s, obj.n, (size_t)i + 1);
                return jv_strn(obj.u.s + a, b - a);
            }
            return jr_undef(r, "str object has no element %lld", (long long)key.u.i);
        }
        break;
    case JT_LOOP:
        if (key.t == JT_STR) return loop_attr(r, obj, key.u.s, key.n, line);
        break;
    default: break;
    }
    if (key.t == JT_STR) return jb_getattr(r, obj, key.u.s, key.n, line);
    jbuf b = {0};
    jv_repr(&b, key);
    jv u = jr_undef(r, "%s has no element %s", obj_repr(obj), b.p ? b.p : "");
    jbuf_free(&b);
    return u;
}

/* ---- string helpers ------------------------------------------------------------------------- */
static bool py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace. */
static jv strip(jv s, int which, jv chars) {
    size_t a = 0, b = s.n;
    bool ws = chars.t != JT_STR;
    #define STRIPPABLE(c) (ws ? py_space((unsigned char)(c)) : memchr(chars.u.s, (c), chars.n) != NULL)
    if (which & 1) while (a < b && STRIPPABLE(s.u.s[a])) a++;
    if (which & 2) while (b > a && STRIPPABLE(s.u.s[b - 1])) b--;
    #undef STRIPPABLE
    return jv_strn(s.u.s + a, b - a);
}

/* Simple case mapping of the scripts chat text commonly uses (Latin-1, Latin Extended-A, Greek,
 * Cyrillic); other code points are left unchanged. */
static uint32_t cp_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x1C4 && c <= 0x1CC) return c - (c - 0x1C4) % 3;   /* DŽ Dž dž LJ Lj lj NJ Nj nj */
    if (c >= 0x3AC && c <= 0x3AF) return c == 0x3AC ? 0x386 : c - 37;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static uint32_t cp_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x1C4 && c <= 0x1CC) return c + 2 - (c - 0x1C4) % 3;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static bool cp_cased(uint32_t c) { return cp_upper(c) != c || cp_lower(c) != c; }

static size_t utf8_put(char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) { o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F)); return 3; }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F)); o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* One code point at s[*i] (advances *i); a stray byte decodes as itself with *raw set. */
static uint32_t cp_next(const char *s, size_t n, size_t *i, bool *raw) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int k = c >= 0xF0 && c < 0xF8 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    *raw = false;
    if (c < 0x80) { (*i)++; return c; }
    if (!k || *i + (size_t)k >= n) { *raw = true; (*i)++; return c; }
    uint32_t cp = c & (0x3Fu >> k);
    for (int j = 1; j <= k; j++) {
        if ((u[*i + (size_t)j] & 0xC0) != 0x80) { *raw = true; (*i)++; return c; }
        cp = (cp << 6) | (u[*i + (size_t)j] & 0x3F);
    }
    *i += (size_t)k + 1;
    return cp;
}

/* mode: 0 lower, 1 upper, 2 str.title(), 3 capitalize, 4 swapcase, 5 jinja2's title filter
 * (capitalise each chunk after whitespace or one of - ( { [ <, lower the rest). */
static jv case_map(jrender *r, jv s, int mode, int line) {
    char *p = jarena_alloc(r->ar, (size_t)s.n * 2 + 4);
    if (!p) { nomem(r, line); return jv_undef(); }
    size_t o = 0, i = 0, idx = 0;
    bool prev_cased = false, word_start = true;
    while (i < s.n) {
        bool raw;
        size_t st = i;
        uint32_t c = cp_next(s.u.s, s.n, &i, &raw);
        if (raw) { p[o++] = s.u.s[st]; prev_cased = false; idx++; continue; }
        uint32_t m = c;
        if (c == 0xDF && (mode == 1 || (mode == 4))) { p[o++] = 'S'; p[o++] = 'S'; prev_cased = true; idx++; continue; }
        switch (mode) {
        case 0:
            m = cp_lower(c);
            if (c == 0x3A3 && prev_cased) {   /* Python's final sigma: Σ after a cased letter, not before one */
                size_t k = i;
                bool raw2 = false;
                bool next_cased = k < s.n && cp_cased(cp_next(s.u.s, s.n, &k, &raw2)) && !raw2;
                if (!next_cased) m = 0x3C2;
            }
            break;
        case 1: m = cp_upper(c); break;
        case 2: m = prev_cased ? cp_lower(c) : cp_upper(c); break;
        case 3: m = idx == 0 ? cp_upper(c) : cp_lower(c); break;
        case 4: m = cp_upper(c) != c ? cp_upper(c) : cp_lower(c); break;
        case 5: {
            bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
                       c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            m = sep ? c : word_start ? cp_upper(c) : cp_lower(c);
            word_start = sep;
            break;
        }
        }
        prev_cased = cp_cased(c);
        o += utf8_put(p + o, m);
        idx++;
    }
    p[o] = 0;
    return jv_strn(p, o);
}

static jv str_replace(jrender *r, jv s, jv old, jv rep, int64_t count, int line) {
    jbuf b = {0};
    if (old.n == 0) {   /* Python inserts rep between every character (and at both ends) */
        int64_t done = 0;
        size_t i = 0;
        if (count != 0) { jbuf_put(&b, rep.u.s, rep.n); done++; }
        while (i < s.n) {
            size_t j = i + 1;
            while (j < s.n && ((unsigned char)s.u.s[j] & 0xC0) == 0x80) j++;
            jbuf_put(&b, s.u.s + i, j - i);
            i = j;
            if (count < 0 || done < count) { jbuf_put(&b, rep.u.s, rep.n); done++; }
        }
        if (b.n > r->opts->max_output) { jbuf_free(&b); return jr_fail(r, JINJA_ELIMIT, line, "string longer than the output limit"); }
        return mkstr(r, &b, line);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s.n) {
        const char *hit = (count < 0 || done < count) ? memmem(s.u.s + i, s.n - i, old.u.s, old.n) : NULL;
        if (!hit) { jbuf_put(&b, s.u.s + i, s.n - i); break; }
        size_t k = (size_t)(hit - s.u.s);
        jbuf_put(&b, s.u.s + i, k - i);
        jbuf_put(&b, rep.u.s, rep.n);
        i = k + old.n;
        done++;
        if (b.n > r->opts->max_output) { jbuf_free(&b); return jr_fail(r, JINJA_ELIMIT, line, "string longer than the output limit"); }
    }
    return mkstr(r, &b, line);
}

static jv str_split(jrender *r, jv s, jv sep, int64_t maxsplit, bool from_right, int line) {
    jlist *l = jlist_new(r->ar, 0, JL_LIST);
    if (!l) { nomem(r, line); return jv_undef(); }
    if (sep.t == JT_STR && sep.n == 0) return jr_fail(r, JINJA_ERENDER, line, "ValueError: empty separator");
    if (sep.t != JT_STR) {   /* whitespace runs, no empty strings */
        if (from_right) {
            jlist *tmp = jlist_new(r->ar, 0, JL_LIST);
            size_t e = s.n;
            int64_t done = 0;
            if (!tmp) { nomem(r, line); return jv_undef(); }
            for (;;) {
                while (e > 0 && py_space((unsigned char)s.u.s[e - 1])) e--;
                if (e == 0) break;
                if (maxsplit >= 0 && done >= maxsplit) { jlist_push(r->ar, tmp, jv_strn(s.u.s, e)); break; }
                size_t b = e;
                while (b > 0 && !py_space((unsigned char)s.u.s[b - 1])) b--;
                jlist_push(r->ar, tmp, jv_strn(s.u.s + b, e - b));
                done++;
                e = b;
            }
            for (size_t i = tmp->n; i-- > 0;) jlist_push(r->ar, l, tmp->it[i]);
            return jv_list(l);
        }
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            while (i < s.n && py_space((unsigned char)s.u.s[i])) i++;
            if (i >= s.n) break;
            if (maxsplit >= 0 && done >= maxsplit) { jlist_push(r->ar, l, jv_strn(s.u.s + i, s.n - i)); break; }
            size_t j = i;
            while (j < s.n && !py_space((unsigned char)s.u.s[j])) j++;
            if (!jlist_push(r->ar, l, jv_strn(s.u.s + i, j - i))) { nomem(r, line); return jv_undef(); }
            done++;
            i = j;
        }
        return jv_list(l);
    }
    if (from_right) {
        jlist *tmp = jlist_new(r->ar, 0, JL_LIST);
        if (!tmp) { nomem(r, line); return jv_undef(); }
        size_t e = s.n;
        int64_t done = 0;
        for (;;) {
            const char *hit = NULL;
            if ((maxsplit < 0 || done < maxsplit) && e >= sep.n)
                for (size_t k = e - sep.n + 1; k-- > 0;) if (memcmp(s.u.s + k, sep.u.s, sep.n) == 0) { hit = s.u.s + k; break; }
            if (!hit) { jlist_push(r->ar, tmp, jv_strn(s.u.s, e)); break; }
            size_t k = (size_t)(hit - s.u.s);
            jlist_push(r->ar, tmp, jv_strn(s.u.s + k + sep.n, e - k - sep.n));
            e = k;
            done++;
        }
        for (size_t i = tmp->n; i-- > 0;) jlist_push(r->ar, l, tmp->it[i]);
        return jv_list(l);
    }
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s.u.s + i, s.n - i, sep.u.s, sep.n) : NULL;
        if (!hit) { if (!jlist_push(r->ar, l, jv_strn(s.u.s + i, s.n - i))) { nomem(r, line); return jv_undef(); } break; }
        size_t k = (size_t)(hit - s.u.s);
        if (!jlist_push(r->ar, l, jv_strn(s.u.s + i, k - i))) { nomem(r, line); return jv_undef(); }
        i = k + sep.n;
        done++;
    }
    return jv_list(l);
}

static int64_t str_find(jv s, jv sub, bool rev) {
    if (sub.n > s.n) return -1;
    if (!rev) {
        if (!sub.n) return 0;
        const char *hit = memmem(s.u.s, s.n, sub.u.s, sub.n);
        return hit ? (int64_t)utf8_count(s.u.s, (size_t)(hit - s.u.s)) : -1;
    }
    for (size_t k = s.n - sub.n + 1; k-- > 0;)
        if (memcmp(s.u.s + k, sub.u.s, sub.n) == 0) return (int64_t)utf8_count(s.u.s, k);
    return -1;
}

static bool prefix_match(jrender *r, jv s, jv p, bool suffix, int line, int *res) {
    if (p.t == JT_LIST && p.u.l->kind == JL_TUPLE) {
        for (size_t i = 0; i < p.u.l->n; i++) {
            int x;
            if (!prefix_match(r, s, p.u.l->it[i], suffix, line, &x)) return false;
            if (x) { *res = 1; return true; }
        }
        *res = 0;
        return true;
    }
    if (p.t != JT_STR) {
        jr_type_error(r, line, "%s first arg must be str or a tuple of str, not %s", suffix ? "endswith" : "startswith", jv_type_name(p));
        return false;
    }
    *res = p.n <= s.n && memcmp(suffix ? s.u.s + s.n - p.n : s.u.s, p.u.s, p.n) == 0;
    return true;
}

/* Python str.format with {} / {0} / {name} fields and an optional :spec (fill/align/width/.prec). */
static jv str_format(jrender *r, jv fmt, const jargs *a, int line) {
    jbuf b = {0};
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char c = fmt.u.s[i];
        if (c == '{' && i + 1 < fmt.n && fmt.u.s[i + 1] == '{') { jbuf_putc(&b, '{'); i++; continue; }
        if (c == '}' && i + 1 < fmt.n && fmt.u.s[i + 1] == '}') { jbuf_putc(&b, '}'); i++; continue; }
        if (c != '{') { jbuf_putc(&b, c); continue; }
        size_t j = i + 1;
        while (j < fmt.n && fmt.u.s[j] != '}') j++;
        if (j >= fmt.n) { jbuf_free(&b); return jr_fail(r, JINJA_ERENDER, line, "ValueError: Single '{' encountered in format string"); }
        const char *f = fmt.u.s + i + 1;
        size_t fl = j - i - 1, nl = 0;
        while (nl < fl && f[nl] != ':' && f[nl] != '!') nl++;
        jv v;
        if (nl == 0) v = arg(a, auto_idx++, NULL, jv_undef(), NULL);
        else if (isdigit((unsigned char)f[0])) v = arg(a, (size_t)strtoul(f, NULL, 10), NULL, jv_undef(), NULL);
        else {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(nl < 127 ? nl : 127), f);
            v = arg(a, NOPOS, name, jv_undef(), NULL);
        }
        if (v.t == JT_UNDEF && !v.u.s) { jbuf_free(&b); return jr_fail(r, JINJA_ERENDER, line, "IndexError: Replacement index out of range for positional args tuple"); }
        jbuf tmp = {0};
        if (nl < fl && f[nl] == '!' && nl + 1 < fl && f[nl + 1] == 'r') jv_repr(&tmp, v); else jv_str(&tmp, v);
        const char *spec = memchr(f, ':', fl);
        size_t width = 0;
        char align = (v.t == JT_INT || v.t == JT_FLOAT) ? '>' : '<', fill = ' ';
        if (spec) {
            const char *sp = spec + 1, *e = f + fl;
            if (e - sp >= 2 && strchr("<>^", sp[1])) { fill = sp[0]; align = sp[1]; sp += 2; }
            else if (sp < e && strchr("<>^", sp[0])) { align = sp[0]; sp++; }
            while (sp < e && isdigit((unsigned char)*sp)) width = width * 10 + (size_t)(*sp++ - '0');
            if (sp < e && *sp == '.' && v.t == JT_FLOAT) {
                int prec = atoi(sp + 1);
                jbuf_free(&tmp);
                jbuf_printf(&tmp, "%.*f", prec, v.u.f);
            }
        }
        size_t cps = utf8_count(tmp.p ? tmp.p : "", tmp.n), pad = width > cps ? width - cps : 0;
        size_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
        for (size_t k = 0; k < left; k++) jbuf_putc(&b, fill);
        jbuf_put(&b, tmp.p ? tmp.p : "", tmp.n);
        for (size_t k = 0; k < pad - left; k++) jbuf_putc(&b, fill);
        jbuf_free(&tmp);
        i = j;
    }
    return mkstr(r, &b, line);
}

/* printf-style "%s %d" % args (the `format` filter). */
jv jb_percent_format(jrender *r, jv fmt, const jargs *a, bool strict, int line) {
    jbuf b = {0};
    size_t ai = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char c = fmt.u.s[i];
        if (c != '%') { jbuf_putc(&b, c); continue; }
        if (++i >= fmt.n) { jbuf_free(&b); return jr_fail(r, JINJA_ERENDER, line, "ValueError: incomplete format"); }
        char spec[32]; size_t sn = 0;
        spec[sn++] = '%';
        while (i < fmt.n && strchr("-+ #0123456789.", fmt.u.s[i]) && sn < 20) spec[sn++] = fmt.u.s[i++];
        if (i >= fmt.n) { jbuf_free(&b); return jr_fail(r, JINJA_ERENDER, line, "ValueError: incomplete format"); }
        char conv = fmt.u.s[i];
        if (conv == '%') { jbuf_putc(&b, '%'); continue; }
        if (ai >= a->nargs) { jbuf_free(&b); return jr_type_error(r, line, "not enough arguments for format string"); }
        jv v = a->args[ai++];
        if (conv == 's' || conv == 'r') {
            jbuf t = {0};
            if (conv == 's') jv_str(&t, v); else jv_repr(&t, v);
            spec[sn++] = 's'; spec[sn] = 0;
            jbuf_printf(&b, spec, t.p ? t.p : "");
            jbuf_free(&t);
        } else if (strchr("di", conv) && jv_is_number(v)) {
            spec[sn++] = 'l'; spec[sn++] = 'l'; spec[sn++] = 'd'; spec[sn] = 0;
            jbuf_printf(&b, spec, (long long)(v.t == JT_FLOAT ? (int64_t)v.u.f : v.u.i));
        } else if (strchr("feEgGxXo", conv) && jv_is_number(v)) {
            if (strchr("xXo", conv)) { spec[sn++] = 'l'; spec[sn++] = 'l'; spec[sn++] = conv; spec[sn] = 0; jbuf_printf(&b, spec, (long long)v.u.i); }
            else { spec[sn++] = conv; spec[sn] = 0; jbuf_printf(&b, spec, jv_num(v)); }
        } else { jbuf_free(&b); return jr_type_error(r, line, "%%%c format: a number is required, not %s", conv, jv_type_name(v)); }
    }
    if (strict && ai < a->nargs) { jbuf_free(&b); return jr_type_error(r, line, "not all arguments converted during string formatting"); }
    return mkstr(r, &b, line);
}

/* markupsafe.escape: & < > " ' as HTML entities. */
jv jb_escape(jrender *r, jv s, int line) {
    if (!memchr(s.u.s, '&', s.n) && !memchr(s.u.s, '<', s.n) && !memchr(s.u.s, '>', s.n) &&
        !memchr(s.u.s, '"', s.n) && !memchr(s.u.s, '\'', s.n)) return s;
    jbuf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        char c = s.u.s[i];
        if (c == '&') jbuf_puts(&b, "&amp;");
        else if (c == '<') jbuf_puts(&b, "&lt;");
        else if (c == '>') jbuf_puts(&b, "&gt;");
        else if (c == '"') jbuf_puts(&b, "&#34;");
        else if (c == '\'') jbuf_puts(&b, "&#39;");
        else jbuf_putc(&b, c);
    }
    return mkstr(r, &b, line);
}

/* ---- method calls --------------------------------------------------------------------------- */
static jv str_method(jrender *r, jv s, const char *m, const jargs *a, int line) {
    jv a0 = arg(a, 0, NULL, jv_none(), NULL);
    if (!strcmp(m, "upper")) return case_map(r, s, 1, line);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return case_map(r, s, 0, line);
    if (!strcmp(m, "title")) return case_map(r, s, 2, line);
    if (!strcmp(m, "capitalize")) return case_map(r, s, 3, line);
    if (!strcmp(m, "swapcase")) return case_map(r, s, 4, line);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        if (a0.t != JT_NONE && a0.t != JT_STR) return jr_type_error(r, line, "%s arg must be None or str", m);
        return strip(s, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3, a0);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        int res;
        if (!prefix_match(r, s, a0, m[0] == 'e', line, &res)) return jv_undef();
        return jv_bool(res);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = arg(a, 0, "sep", jv_none(), NULL), mx = arg(a, 1, "maxsplit", jv_int(-1), NULL);
        if (sep.t != JT_NONE && sep.t != JT_STR) return jr_type_error(r, line, "must be str or None, not %s", jv_type_name(sep));
        if (mx.t != JT_INT && mx.t != JT_BOOL) return jr_type_error(r, line, "'%s' object cannot be interpreted as an integer", jv_type_name(mx));
        return str_split(r, s, sep, mx.u.i, m[0] == 'r', line);
    }
    if (!strcmp(m, "splitlines")) {
        jlist *l = jlist_new(r->ar, 0, JL_LIST);
        if (!l) { nomem(r, line); return jv_undef(); }
        size_t i = 0;
        while (i < s.n) {
            size_t j = i;
            while (j < s.n && s.u.s[j] != '\n' && s.u.s[j] != '\r') j++;
            jlist_push(r->ar, l, jv_strn(s.u.s + i, j - i));
            if (j < s.n && s.u.s[j] == '\r' && j + 1 < s.n && s.u.s[j + 1] == '\n') j++;
            i = j + 1;
        }
        return jv_list(l);
    }
    if (a->nkw && strcmp(m, "split") != 0 && strcmp(m, "rsplit") != 0 && strcmp(m, "format") != 0)
        return jr_type_error(r, line, "str.%s() takes no keyword arguments", m);
    if (!strcmp(m, "replace")) {
        jv old = arg(a, 0, NULL, jv_none(), NULL), rep = arg(a, 1, NULL, jv_none(), NULL);
        jv cnt = arg(a, 2, "count", jv_int(-1), NULL);
        if (old.t != JT_STR || rep.t != JT_STR) return jr_type_error(r, line, "replace() arguments must be str");
        return str_replace(r, s, old, rep, cnt.t == JT_INT ? cnt.u.i : -1, line);
    }
    if (!strcmp(m, "format")) return str_format(r, s, a, line);
    if (!strcmp(m, "count")) {
        if (a0.t != JT_STR) return jr_type_error(r, line, "must be str, not %s", jv_type_name(a0));
        if (!a0.n) return jv_int((int64_t)utf8_count(s.u.s, s.n) + 1);
        int64_t c = 0;
        for (size_t i = 0; i + a0.n <= s.n;) {
            const char *hit = memmem(s.u.s + i, s.n - i, a0.u.s, a0.n);
            if (!hit) break;
            c++;
            i = (size_t)(hit - s.u.s) + a0.n;
        }
        return jv_int(c);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
        if (a0.t != JT_STR) return jr_type_error(r, line, "must be str, not %s", jv_type_name(a0));
        int64_t k = str_find(s, a0, m[0] == 'r');
        if (k < 0 && strstr(m, "index")) return jr_fail(r, JINJA_ERENDER, line, "ValueError: substring not found");
        return jv_int(k);
    }
    if (!strcmp(m, "join")) {
        jlist *l = jb_iter(r, a0, line);
        if (!l) return jv_undef();
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->it[i].t != JT_STR) { jbuf_free(&b); return jr_type_error(r, line, "sequence item %zu: expected str instance, %s found", i, jv_type_name(l->it[i])); }
            if (i) jbuf_put(&b, s.u.s, s.n);
            jbuf_put(&b, l->it[i].u.s, l->it[i].n);
        }
        return mkstr(r, &b, line);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (a0.t != JT_STR) return jr_type_error(r, line, "must be str, not %s", jv_type_name(a0));
        bool suf = m[6] == 's';
        if (a0.n <= s.n && memcmp(suf ? s.u.s + s.n - a0.n : s.u.s, a0.u.s, a0.n) == 0)
            return suf ? jv_strn(s.u.s, s.n - a0.n) : jv_strn(s.u.s + a0.n, s.n - a0.n);
        return s;
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        if (a0.t != JT_STR || !a0.n) return jr_type_error(r, line, "partition() needs a non-empty str");
        jlist *l = jlist_new(r->ar, 3, JL_TUPLE);
        if (!l) { nomem(r, line); return jv_undef(); }
        const char *hit = NULL;
        if (m[0] == 'r') { for (size_t k = s.n >= a0.n ? s.n - a0.n + 1 : 0; k-- > 0;) if (memcmp(s.u.s + k, a0.u.s, a0.n) == 0) { hit = s.u.s + k; break; } }
        else hit = memmem(s.u.s, s.n, a0.u.s, a0.n);
        if (!hit) {
            if (m[0] == 'r') { l->it[0] = jv_strn("", 0); l->it[1] = jv_strn("", 0); l->it[2] = s; }
            else { l->it[0] = s; l->it[1] = jv_strn("", 0); l->it[2] = jv_strn("", 0); }
        } else {
            size_t k = (size_t)(hit - s.u.s);
            l->it[0] = jv_strn(s.u.s, k); l->it[1] = a0; l->it[2] = jv_strn(s.u.s + k + a0.n, s.n - k - a0.n);
        }
        l->n = 3;
        return jv_list(l);
    }
    if (!strncmp(m, "is", 2)) {
        if (!s.n) return jv_bool(false);
        bool all = true, any_cased = false, upper_seen = false, lower_seen = false;
        for (size_t i = 0; i < s.n; i++) {
            unsigned char c = (unsigned char)s.u.s[i];
            if (isupper(c)) upper_seen = true;
            if (islower(c)) lower_seen = true;
            if (isalpha(c)) any_cased = true;
            bool ok = !strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal") ? isdigit(c)
                    : !strcmp(m, "isalpha") ? (isalpha(c) || c >= 0x80)
                    : !strcmp(m, "isalnum") ? (isalnum(c) || c >= 0x80)
                    : !strcmp(m, "isspace") ? py_space(c)
                    : !strcmp(m, "isascii") ? c < 0x80
                    : !strcmp(m, "isprintable") ? (c >= 0x20 && c != 0x7f)
                    : !strcmp(m, "isidentifier") ? (isalnum(c) || c == '_' || c >= 0x80) && !(i == 0 && isdigit(c))
                    : true;
            if (!ok) all = false;
        }
        if (!strcmp(m, "isupper")) return jv_bool(upper_seen && !lower_seen && any_cased);
        if (!strcmp(m, "islower")) return jv_bool(lower_seen && !upper_seen && any_cased);
        if (!strcmp(m, "istitle")) return jv_bool(any_cased);
        return jv_bool(all);
    }
    if (!strcmp(m, "zfill") || !strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        if (a0.t != JT_INT) return jr_type_error(r, line, "integer argument expected");
        size_t cps = utf8_count(s.u.s, s.n), w = a0.u.i > 0 ? (size_t)a0.u.i : 0;
        if (w > r->opts->max_output) return jr_fail(r, JINJA_ELIMIT, line, "width over the output limit");
        if (w <= cps) return s;
        size_t pad = w - cps, left = m[0] == 'r' || m[0] == 'z' ? pad : m[0] == 'c' ? pad / 2 + (pad & w & 1) : 0;
        jv fillv = arg(a, 1, NULL, jv_strn(" ", 1), NULL);
        char fill = m[0] == 'z' ? '0' : (fillv.t == JT_STR && fillv.n ? fillv.u.s[0] : ' ');
        jbuf b = {0};
        size_t start = 0;
        if (m[0] == 'z' && s.n && (s.u.s[0] == '-' || s.u.s[0] == '+')) { jbuf_putc(&b, s.u.s[0]); start = 1; }
        for (size_t k = 0; k < left; k++) jbuf_putc(&b, fill);
        jbuf_put(&b, s.u.s + start, s.n - start);
        for (size_t k = 0; k < pad - left; k++) jbuf_putc(&b, fill);
        return mkstr(r, &b, line);
    }
    if (!strcmp(m, "expandtabs") || !strcmp(m, "encode")) return s;
    return jr_type_error(r, line, "str.%s() is not supported", m);
}

static jv call_method(jrender *r, jfunc *fn, const jargs *a, int line) {
    jv self = fn->self;
    const char *m = fn->name;
    if (self.t == JT_STR) return str_method(r, self, m, a, line);
    if (self.t == JT_DICT) {
        jdict *d = self.u.d;
        if (!strcmp(m, "get")) {
            if (a->nargs < 1 || a->nargs > 2 || a->nkw) return jr_type_error(r, line, "get expected 1 or 2 positional arguments, got %zu", a->nargs);
            jv k = arg(a, 0, NULL, jv_none(), NULL);
            jv *v = jdict_get(d, k);
            return v ? *v : arg(a, 1, NULL, jv_none(), NULL);
        }
        if (!strcmp(m, "copy")) return self;
        jlist *l = jlist_new(r->ar, d->n, JL_LIST);
        if (!l) { nomem(r, line); return jv_undef(); }
        for (size_t i = 0; i < d->n; i++) {
            if (!strcmp(m, "keys")) l->it[l->n++] = d->k[i];
            else if (!strcmp(m, "values")) l->it[l->n++] = d->v[i];
            else {
                jlist *p = jlist_new(r->ar, 2, JL_TUPLE);
                if (!p) { nomem(r, line); return jv_undef(); }
                p->it[0] = d->k[i]; p->it[1] = d->v[i]; p->n = 2;
                l->it[l->n++] = jv_list(p);
            }
        }
        return jv_list(l);
    }
    if (self.t == JT_LIST) {
        const jlist *l = self.u.l;
        jv x = arg(a, 0, NULL, jv_none(), NULL);
        if (!strcmp(m, "copy")) return self;
        int64_t c = 0;
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(l->it[i], x)) { if (!strcmp(m, "index")) return jv_int((int64_t)i); c++; }
        if (!strcmp(m, "index")) return jr_fail(r, JINJA_ERENDER, line, "ValueError: value is not in list");
        return jv_int(c);
    }
    if (self.t == JT_LOOP) {
        jloop *lp = self.u.loop;
        if (!strcmp(m, "cycle")) {
            if (!a->nargs) return jr_type_error(r, line, "no items for cycling given");
            return a->args[(size_t)lp->index0 % a->nargs];
        }
        /* changed(*values) */
        jlist *cur = jlist_new(r->ar, a->nargs, JL_LIST);
        if (!cur) { nomem(r, line); return jv_undef(); }
        if (a->nargs) memcpy(cur->it, a->args, a->nargs * sizeof(jv));
        cur->n = a->nargs;
        jv cv = jv_list(cur);
        bool changed = !lp->changed_set || !jv_equal(lp->changed_last, cv);
        lp->changed_last = cv; lp->changed_set = true;
        return jv_bool(changed);
    }
    return jr_type_error(r, line, "method %s is not callable here", m);
}

/* ---- globals -------------------------------------------------------------------------------- */
enum { G_RANGE = 1, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_JOINER, G_CYCLER };

jv jb_global(jrender *r, const char *s, size_t n) {
    int id = NAMEQ(s, n, "range") ? G_RANGE : NAMEQ(s, n, "namespace") ? G_NAMESPACE : NAMEQ(s, n, "dict") ? G_DICT
           : NAMEQ(s, n, "raise_exception") ? G_RAISE : NAMEQ(s, n, "strftime_now") ? G_STRFTIME
           : NAMEQ(s, n, "joiner") ? G_JOINER : NAMEQ(s, n, "cycler") ? G_CYCLER : 0;
    if (!id) return jv_undef();
    jfunc *fn = jarena_alloc(r->ar, sizeof *fn);
    if (!fn) { nomem(r, 0); return jv_undef(); }
    fn->kind = FN_GLOBAL; fn->id = id; fn->name = jarena_strndup(r->ar, s, n);
    jv v = {0};
    v.t = JT_FUNC; v.u.fn = fn;
    return v;
}

static jv call_global(jrender *r, jfunc *fn, const jargs *a, int line) {
    switch (fn->id) {
    case G_RANGE: {
        int64_t v[3] = { 0, 0, 1 };
        if (a->nargs < 1 || a->nargs > 3) return jr_type_error(r, line, "range expected 1 to 3 arguments, got %zu", a->nargs);
        for (size_t i = 0; i < a->nargs; i++) {
            if (a->args[i].t != JT_INT && a->args[i].t != JT_BOOL) return jr_type_error(r, line, "'%s' object cannot be interpreted as an integer", jv_type_name(a->args[i]));
        }
        if (a->nargs == 1) v[1] = a->args[0].u.i;
        else { v[0] = a->args[0].u.i; v[1] = a->args[1].u.i; if (a->nargs == 3) v[2] = a->args[2].u.i; }
        if (v[2] == 0) return jr_fail(r, JINJA_ERENDER, line, "ValueError: range() arg 3 must not be zero");
        double cnt = v[2] > 0 ? ceil(((double)v[1] - (double)v[0]) / (double)v[2]) : ceil(((double)v[0] - (double)v[1]) / (double)-v[2]);
        if (cnt < 0) cnt = 0;
        if (cnt > (double)r->opts->max_steps || cnt > 1e8)
            return jr_fail(r, JINJA_ELIMIT, line, "range of %.0f items exceeds the sandbox limit", cnt);
        jlist *l = jlist_new(r->ar, (size_t)cnt, JL_LIST);
        if (!l) { nomem(r, line); return jv_undef(); }
        for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) l->it[l->n++] = jv_int(x);
        l->is_range = true;
        memcpy(l->range, v, sizeof v);
        return jv_list(l);
    }
    case G_NAMESPACE: case G_DICT: {
        jdict *d = jdict_new(r->ar, a->nkw);
        if (!d) { nomem(r, line); return jv_undef(); }
        for (size_t i = 0; i < a->nargs; i++) {
            jv x = a->args[i];
            if (x.t == JT_DICT || x.t == JT_NS) {
                for (size_t k = 0; k < x.u.d->n; k++) jdict_set(r->ar, d, x.u.d->k[k], x.u.d->v[k]);
            } else if (x.t == JT_LIST) {
                for (size_t k = 0; k < x.u.l->n; k++) {
                    jv p = x.u.l->it[k];
                    if (p.t != JT_LIST || p.u.l->n != 2) return jr_type_error(r, line, "cannot convert dictionary update sequence element #%zu to a sequence", k);
                    jdict_set(r->ar, d, p.u.l->it[0], p.u.l->it[1]);
                }
            } else return jr_type_error(r, line, "'%s' object is not iterable", jv_type_name(x));
        }
        for (size_t i = 0; i < a->nkw; i++) if (!jdict_set(r->ar, d, a->kwnames[i], a->kwargs[i])) { nomem(r, line); return jv_undef(); }
        jv v = jv_dict(d);
        if (fn->id == G_NAMESPACE) v.t = JT_NS;
        return v;
    }
    case G_RAISE: {
        jv m = arg(a, 0, NULL, jv_strn("", 0), NULL);
        jbuf b = {0};
        jv_str(&b, m);
        jr_fail(r, JINJA_ERAISE, line, "%s", b.p ? b.p : "");
        jbuf_free(&b);
        return jv_undef();
    }
    case G_STRFTIME: {
        jv f = arg(a, 0, NULL, jv_none(), NULL);
        if (f.t != JT_STR) return jr_type_error(r, line, "strftime() argument 1 must be str, not %s", jv_type_name(f));
        char fmt[512], out[1024];
        if (f.n >= sizeof fmt) return jr_fail(r, JINJA_ERENDER, line, "strftime_now format longer than %zu bytes", sizeof fmt - 1);
        memcpy(fmt, f.u.s, f.n); fmt[f.n] = 0;
        size_t n = f.n ? strftime(out, sizeof out, fmt, &r->now_tm) : 0;
        char *p = jarena_strndup(r->ar, out, n);
        if (!p) { nomem(r, line); return jv_undef(); }
        return jv_strn(p, n);
    }
    default:
        return jr_type_error(r, line, "%s() is not supported by this engine", fn->name);
    }
}

jv jb_call(jrender *r, jv fnv, const jargs *a, int line) {
    jfunc *fn = fnv.u.fn;
    if (fn->kind == FN_GLOBAL) return call_global(r, fn, a, line);
    if (fn->kind == FN_METHOD) return call_method(r, fn, a, line);
    return jr_type_error(r, line, "object is not callable");
}

/* ---- tests ---------------------------------------------------------------------------------- */
static bool test_named(jrender *r, const char *name, size_t n, jv self, jv a0, bool has_a0, int line, int *res) {
    (void)has_a0;
    #define T(lit) NAMEQ(name, n, lit)
    if (T("defined")) *res = self.t != JT_UNDEF;
    else if (T("undefined")) *res = self.t == JT_UNDEF;
    else if (T("none")) *res = self.t == JT_NONE;
    else if (T("boolean")) *res = self.t == JT_BOOL;
    else if (T("true")) *res = self.t == JT_BOOL && self.u.i;
    else if (T("false")) *res = self.t == JT_BOOL && !self.u.i;
    else if (T("integer")) *res = self.t == JT_INT;
    else if (T("float")) *res = self.t == JT_FLOAT;
    else if (T("number")) *res = jv_is_number(self);
    else if (T("string")) *res = self.t == JT_STR;
    else if (T("mapping")) *res = self.t == JT_DICT;
    else if (T("iterable")) *res = self.t == JT_STR || self.t == JT_LIST || self.t == JT_DICT || self.t == JT_UNDEF || self.t == JT_LOOP;
    else if (T("sequence")) *res = self.t == JT_STR || (self.t == JT_LIST && self.u.l->kind != JL_GEN) || self.t == JT_DICT || self.t == JT_UNDEF;
    else if (T("callable")) *res = self.t == JT_FUNC || self.t == JT_LOOP;
    else if (T("escaped")) *res = 0;
    else if (T("lower") || T("upper")) {   /* jinja2: str(value).islower() / .isupper() */
        jbuf b = {0};
        jv_str(&b, self);
        jv sv = jv_strn(b.p ? b.p : "", b.n);
        bool up = false, low = false;
        for (size_t i = 0; i < sv.n; i++) {
            unsigned char c = (unsigned char)sv.u.s[i];
            if (isupper(c)) up = true;
            if (islower(c)) low = true;
        }
        if (sv.n && !up && !low) {   /* non-ASCII letters: compare with the case-mapped string */
            jv l2 = case_map(r, sv, 0, line), u2 = case_map(r, sv, 1, line);
            up = !jv_equal(l2, sv); low = !jv_equal(u2, sv);
        }
        jbuf_free(&b);
        *res = T("lower") ? (low && !up) : (up && !low);
    } else if (T("odd") || T("even") || T("divisibleby")) {
        jv d = T("divisibleby") ? a0 : jv_int(2);
        if (!jv_is_number(self) || !jv_is_number(d)) { jr_type_error(r, line, "unsupported operand type(s) for %%: '%s' and '%s'", jv_type_name(self), jv_type_name(d)); return false; }
        if (jv_num(d) == 0) { jr_fail(r, JINJA_ERENDER, line, "ZeroDivisionError: integer division or modulo by zero"); return false; }
        double m;
        if (self.t != JT_FLOAT && d.t != JT_FLOAT) { int64_t q = self.u.i % d.u.i; if (q && ((q < 0) != (d.u.i < 0))) q += d.u.i; m = (double)q; }
        else { m = fmod(jv_num(self), jv_num(d)); if (m != 0 && ((m < 0) != (jv_num(d) < 0))) m += jv_num(d); }
        *res = T("odd") ? m == 1 : m == 0;
    } else if (T("sameas")) *res = jv_equal(self, a0) && self.t == a0.t && (self.t > JT_FLOAT ? self.u.s == a0.u.s : true);
    else if (T("eq") || T("equalto") || T("==")) *res = jv_equal(self, a0);
    else if (T("ne") || T("!=")) *res = !jv_equal(self, a0);
    else if (T("in")) {
        jv hay = a0;
        if (hay.t == JT_STR) {
            if (self.t != JT_STR) { jr_type_error(r, line, "'in <string>' requires string as left operand, not %s", jv_type_name(self)); return false; }
            *res = self.n == 0 || memmem(hay.u.s, hay.n, self.u.s, self.n) != NULL;
        } else if (hay.t == JT_LIST) {
            *res = 0;
            for (size_t i = 0; i < hay.u.l->n; i++) if (jv_equal(hay.u.l->it[i], self)) { *res = 1; break; }
        } else if (hay.t == JT_DICT) *res = jdict_get(hay.u.d, self) != NULL;
        else if (hay.t == JT_UNDEF) *res = 0;
        else { jr_type_error(r, line, "argument of type '%s' is not iterable", jv_type_name(hay)); return false; }
    } else if (T("lt") || T("lessthan") || T("<") || T("le") || T("<=") || T("gt") || T("greaterthan") || T(">") || T("ge") || T(">=")) {
        int c;
        if (self.t == JT_UNDEF || a0.t == JT_UNDEF) { jr_undef_error(r, self.t == JT_UNDEF ? self : a0, line); return false; }
        if (!jv_order(self, a0, &c)) { jr_type_error(r, line, "comparison not supported between instances of '%s' and '%s'", jv_type_name(self), jv_type_name(a0)); return false; }
        *res = T("lt") || T("lessthan") || T("<") ? c < 0 : T("le") || T("<=") ? c <= 0 : T("gt") || T("greaterthan") || T(">") ? c > 0 : c >= 0;
    } else if (T("filter") || T("test")) {
        *res = 0;
    } else {
        jr_fail(r, JINJA_ERENDER, line, "TemplateRuntimeError: no test named '%.*s'", (int)n, name);
        return false;
    }
    #undef T
    return true;
}

int jb_test(jrender *r, const char *name, size_t name_len, jv self, const jargs *a, int line) {
    static const char *const NOARG[] = { "defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
        "number", "string", "mapping", "iterable", "sequence", "callable", "escaped", "lower", "upper", "odd", "even", NULL };
    if (a->nargs + a->nkw > 0 && in_names(NOARG, name, name_len)) {
        jr_type_error(r, line, "test_%.*s() takes 1 positional argument but %zu were given", (int)name_len, name, a->nargs + a->nkw + 1);
        return -1;
    }
    bool has;
    jv a0 = arg(a, 0, NULL, jv_undef(), &has);
    int res = 0;
    if (!test_named(r, name, name_len, self, a0, has, line, &res)) return -1;
    return res;
}

/* ---- filters -------------------------------------------------------------------------------- */
/* Follows a dotted attribute path ("a.b.0") the way jinja2's make_attrgetter does. */
static jv attr_path(jrender *r, jv obj, jv path, int line) {
    if (path.t == JT_INT) return jb_getitem(r, obj, path, line);
    if (path.t != JT_STR) return jb_getitem(r, obj, path, line);
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.u.s[j] != '.') j++;
        jv key = jv_strn(path.u.s + i, j - i);
        bool digits = j > i;
        for (size_t k = i; k < j; k++) if (!isdigit((unsigned char)path.u.s[k])) digits = false;
        if (digits) key = jv_int(strtoll(path.u.s + i, NULL, 10));
        obj = jb_getitem(r, obj, key, line);
        if (jr_failed(r)) return jv_undef();
        i = j + 1;
        if (j >= path.n) break;
    }
    return obj;
}

static jv lower_key(jrender *r, jv v, bool case_sensitive, int line) {
    return (!case_sensitive && v.t == JT_STR) ? case_map(r, v, 0, line) : v;
}

/* Stable merge sort of items by keys (Python order; equal-first like list comparison). */
static bool sort_items(jrender *r, jv *items, jv *keys, size_t n, bool reverse, int line) {
    if (n < 2) return true;
    jv *ti = jarena_alloc(r->ar, n * sizeof(jv)), *tk = jarena_alloc(r->ar, n * sizeof(jv));
    if (!ti || !tk) return nomem(r, line);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int c = 0;
                if (!jv_equal(keys[i], keys[j]) && !jv_order(keys[j], keys[i], &c)) {
                    jr_type_error(r, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(keys[j]), jv_type_name(keys[i]));
                    return false;
                }
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) { ti[o] = items[j]; tk[o++] = keys[j++]; }
                else { ti[o] = items[i]; tk[o++] = keys[i++]; }
            }
            while (i < mid) { ti[o] = items[i]; tk[o++] = keys[i++]; }
            while (j < hi) { ti[o] = items[j]; tk[o++] = keys[j++]; }
        }
        memcpy(items, ti, n * sizeof(jv));
        memcpy(keys, tk, n * sizeof(jv));
    }
    return true;
}

static jlist *copy_list(jrender *r, const jlist *src, int line) {
    jlist *l = jlist_new(r->ar, src->n, JL_LIST);
    if (!l) { nomem(r, line); return NULL; }
    if (src->n) memcpy(l->it, src->it, src->n * sizeof(jv));
    l->n = src->n;
    return l;
}

/* select/reject/selectattr/rejectattr */
static jv empty_gen(jrender *r, int line) {
    jlist *l = jlist_new(r->ar, 0, JL_GEN);
    if (!l) { nomem(r, line); return jv_undef(); }
    return jv_list(l);
}

static jv filter_select(jrender *r, jv self, const jargs *a, bool want, bool by_attr, int line) {
    if (!jv_truthy(self)) return empty_gen(r, line);   /* jinja2: `if value:` before iterating */
    jlist *src = jb_iter(r, self, line);
    if (!src) return jv_undef();
    size_t base = by_attr ? 1 : 0;
    jv attr = by_attr ? arg(a, 0, NULL, jv_none(), NULL) : jv_none();
    bool has_test;
    jv test = arg(a, base, NULL, jv_none(), &has_test);
    jargs rest = { a->args ? a->args + (a->nargs > base + 1 ? base + 1 : a->nargs) : NULL, a->nargs > base + 1 ? a->nargs - base - 1 : 0, a->kwnames, a->kwargs, a->nkw };
    jlist *out = jlist_new(r->ar, src->n, JL_LIST);
    if (!out) { nomem(r, line); return jv_undef(); }
    for (size_t i = 0; i < src->n; i++) {
        jv x = src->it[i], v = by_attr ? attr_path(r, x, attr, line) : x;
        if (jr_failed(r)) return jv_undef();
        int ok;
        if (!has_test) ok = jv_truthy(v);
        else {
            if (test.t != JT_STR) return jr_type_error(r, line, "test name must be a string");
            ok = jb_test(r, test.u.s, test.n, v, &rest, line);
            if (ok < 0) return jv_undef();
        }
        if ((ok != 0) == want) out->it[out->n++] = x;
    }
    return mk_gen(out);
}

static jv filter_tojson(jrender *r, jv self, const jargs *a, int line) {
    jv ea = arg(a, 0, "ensure_ascii", jv_bool(false), NULL);
    jv ind = arg(a, 1, "indent", jv_none(), NULL);
    jv sep = arg(a, 2, "separators", jv_none(), NULL);
    jv sk = arg(a, 3, "sort_keys", jv_bool(false), NULL);
    int indent = -1;
    if (ind.t == JT_INT || ind.t == JT_BOOL) indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int)ind.u.i;
    else if (ind.t != JT_NONE) return jr_type_error(r, line, "tojson indent must be an integer");
    char isep[16] = "", ksep[16] = "";
    const char *is = NULL, *ks = NULL;
    if (sep.t == JT_LIST && sep.u.l->n == 2 && sep.u.l->it[0].t == JT_STR && sep.u.l->it[1].t == JT_STR &&
        sep.u.l->it[0].n < sizeof isep && sep.u.l->it[1].n < sizeof ksep) {
        memcpy(isep, sep.u.l->it[0].u.s, sep.u.l->it[0].n);
        memcpy(ksep, sep.u.l->it[1].u.s, sep.u.l->it[1].n);
        is = isep; ks = ksep;
    } else if (sep.t != JT_NONE) return jr_type_error(r, line, "tojson separators must be a pair of short strings");
    jbuf b = {0};
    const char *bad = NULL;
    if (!jv_tojson(&b, self, jv_truthy(ea), indent, is, ks, jv_truthy(sk), &bad)) {
        jbuf_free(&b);
        return jr_type_error(r, line, "Object of type %s is not JSON serializable", bad ? bad : "object");
    }
    return mkstr(r, &b, line);
}

static jv filter_indent(jrender *r, jv s, const jargs *a, int line) {
    jv w = arg(a, 0, "width", jv_int(4), NULL);
    bool first = jv_truthy(arg(a, 1, "first", jv_bool(false), NULL));
    bool blank = jv_truthy(arg(a, 2, "blank", jv_bool(false), NULL));
    jbuf ind = {0};
    if (w.t == JT_STR) jbuf_put(&ind, w.u.s, w.n);
    else if (w.t == JT_INT && w.u.i > 0 && w.u.i < 1024) for (int64_t i = 0; i < w.u.i; i++) jbuf_putc(&ind, ' ');
    jbuf b = {0};
    /* s + "\n" split into lines (splitlines drops the final empty piece) */
    size_t i = 0;
    bool firstline = true;
    jbuf src = {0};
    jbuf_put(&src, s.u.s, s.n);
    jbuf_putc(&src, '\n');
    while (i < src.n) {
        size_t j = i;
        while (j < src.n && src.p[j] != '\n' && src.p[j] != '\r') j++;
        size_t len = j - i;
        if (!firstline) {
            jbuf_putc(&b, '\n');
            if (blank || len) jbuf_put(&b, ind.p, ind.n);
        }
        jbuf_put(&b, src.p + i, len);
        firstline = false;
        if (j < src.n && src.p[j] == '\r' && j + 1 < src.n && src.p[j + 1] == '\n') j++;
        i = j + 1;
    }
    jbuf_free(&src);
    if (first) {
        jbuf t = {0};
        jbuf_put(&t, ind.p, ind.n);
        jbuf_put(&t, b.p, b.n);
        jbuf_free(&b);
        b = t;
    }
    jbuf_free(&ind);
    return mkstr(r, &b, line);
}

static jv to_int(jrender *r, jv v, jv def, int line) {
    (void)r; (void)line;
    switch (v.t) {
    case JT_INT: return v;
    case JT_BOOL: return jv_int(v.u.i);
    case JT_FLOAT: return isfinite(v.u.f) ? jv_int((int64_t)v.u.f) : def;
    case JT_STR: {
        char buf[64];
        if (v.n >= sizeof buf) return def;
        size_t k = 0;
        for (size_t i = 0; i < v.n; i++) if (v.u.s[i] != '_') buf[k++] = v.u.s[i];
        buf[k] = 0;
        char *end;
        errno = 0;
        long long x = strtoll(buf, &end, 10);
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != buf && !*end && !errno) return jv_int(x);
        double d = strtod(buf, &end);
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != buf && !*end && isfinite(d)) return jv_int((int64_t)d);
        return def;
    }
    default: return def;
    }
}

static jv to_float(jv v, jv def) {
    switch (v.t) {
    case JT_INT: case JT_BOOL: return jv_float((double)v.u.i);
    case JT_FLOAT: return v;
    case JT_STR: {
        char buf[64];
        if (v.n >= sizeof buf) return def;
        memcpy(buf, v.u.s, v.n); buf[v.n] = 0;
        char *end;
        double d = strtod(buf, &end);
        while (*end && py_space((unsigned char)*end)) end++;
        return end != buf && !*end ? jv_float(d) : def;
    }
    default: return def;
    }
}

static jv filter_sort(jrender *r, jv self, const jargs *a, int line) {
    bool reverse = jv_truthy(arg(a, 0, "reverse", jv_bool(false), NULL));
    bool cs = jv_truthy(arg(a, 1, "case_sensitive", jv_bool(false), NULL));
    jv attr = arg(a, 2, "attribute", jv_none(), NULL);
    jlist *src = jb_iter(r, self, line);
    if (!src) return jv_undef();
    jlist *l = copy_list(r, src, line);
    jv *keys = l && l->n ? jarena_alloc(r->ar, l->n * sizeof(jv)) : NULL;
    if (!l || (l->n && !keys)) { nomem(r, line); return jv_undef(); }
    for (size_t i = 0; i < l->n; i++) {
        jv k = l->it[i];
        if (attr.t == JT_STR && memchr(attr.u.s, ',', attr.n)) {   /* "a,b": a tuple key */
            jlist *tk = jlist_new(r->ar, 0, JL_TUPLE);
            if (!tk) { nomem(r, line); return jv_undef(); }
            size_t p = 0;
            while (p <= attr.n) {
                size_t q = p;
                while (q < attr.n && attr.u.s[q] != ',') q++;
                jv part = strip(jv_strn(attr.u.s + p, q - p), 3, jv_none());
                jv kv = lower_key(r, attr_path(r, k, part, line), cs, line);
                jlist_push(r->ar, tk, kv);
                p = q + 1;
                if (q >= attr.n) break;
            }
            k = jv_list(tk);
        } else if (attr.t != JT_NONE) k = attr_path(r, k, attr, line);
        if (jr_failed(r)) return jv_undef();
        keys[i] = lower_key(r, k, cs, line);
    }
    if (!sort_items(r, l->it, keys, l->n, reverse, line)) return jv_undef();
    return jv_list(l);
}

static jv filter_dictsort(jrender *r, jv self, const jargs *a, int line) {
    if (self.t != JT_DICT) return jr_type_error(r, line, "dictsort expects a mapping, got %s", jv_type_name(self));
    bool cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false), NULL));
    jv by = arg(a, 1, "by", jv_strn("key", 3), NULL);
    bool reverse = jv_truthy(arg(a, 2, "reverse", jv_bool(false), NULL));
    bool by_value = by.t == JT_STR && by.n == 5 && !memcmp(by.u.s, "value", 5);
    const jdict *d = self.u.d;
    jlist *l = jlist_new(r->ar, d->n, JL_LIST);
    jv *keys = d->n ? jarena_alloc(r->ar, d->n * sizeof(jv)) : NULL;
    if (!l || (d->n && !keys)) { nomem(r, line); return jv_undef(); }
    for (size_t i = 0; i < d->n; i++) {
        jlist *p = jlist_new(r->ar, 2, JL_TUPLE);
        if (!p) { nomem(r, line); return jv_undef(); }
        p->it[0] = d->k[i]; p->it[1] = d->v[i]; p->n = 2;
        l->it[l->n++] = jv_list(p);
        keys[i] = lower_key(r, by_value ? d->v[i] : d->k[i], cs, line);
    }
    if (!sort_items(r, l->it, keys, l->n, reverse, line)) return jv_undef();
    return jv_list(l);
}

static jv filter_minmax(jrender *r, jv self, const jargs *a, bool want_max, int line) {
    bool cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false), NULL));
    jv attr = arg(a, 1, "attribute", jv_none(), NULL);
    jlist *l = jb_iter(r, self, line);
    if (!l) return jv_undef();
    if (!l->n) return jr_undef(r, "No aggregated item, sequence was empty.");
    size_t best = 0;
    jv bk = jv_none();
    for (size_t i = 0; i < l->n; i++) {
        jv k = attr.t != JT_NONE ? attr_path(r, l->it[i], attr, line) : l->it[i];
        k = lower_key(r, k, cs, line);
        if (jr_failed(r)) return jv_undef();
        if (i == 0) { bk = k; continue; }
        int c;
        if (!jv_order(k, bk, &c)) return jr_type_error(r, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(k), jv_type_name(bk));
        if (want_max ? c > 0 : c < 0) { best = i; bk = k; }
    }
    return l->it[best];
}

jv jb_filter(jrender *r, const char *name, size_t n, jv self, const jargs *a, int line) {
    #define F(lit) NAMEQ(name, n, lit)
    if (F("default") || F("d")) {
        jv def = arg(a, 0, "default_value", jv_strn("", 0), NULL);
        bool boolean = jv_truthy(arg(a, 1, "boolean", jv_bool(false), NULL));
        if (self.t == JT_UNDEF || (boolean && !jv_truthy(self))) return def;
        return self;
    }
    if (F("safe")) { if (self.t == JT_STR) { self.flags |= JS_SAFE; return self; } jv s = to_str(r, self, line); s.flags |= JS_SAFE; return s; }
    if (F("string")) return to_str(r, self, line);
    if (F("tojson")) return filter_tojson(r, self, a, line);
    if (F("pprint")) { jbuf b = {0}; jv_repr(&b, self); return mkstr(r, &b, line); }
    if (F("list")) { jlist *l = jb_iter(r, self, line); return l ? jv_list(l == self.u.l && self.t == JT_LIST ? copy_list(r, l, line) : l) : jv_undef(); }
    if (F("length") || F("count")) {
        switch (self.t) {
        case JT_STR: return jv_int((int64_t)utf8_count(self.u.s, self.n));
        case JT_LIST:
            if (self.u.l->kind == JL_GEN) return jr_type_error(r, line, "object of type 'generator' has no len()");
            return jv_int((int64_t)self.u.l->n);
        case JT_DICT: return jv_int((int64_t)self.u.d->n);
        case JT_UNDEF: return jv_int(0);
        case JT_LOOP: return jv_int((int64_t)self.u.loop->items->n);
        default: return jr_type_error(r, line, "object of type '%s' has no len()", jv_type_name(self));
        }
    }
    if (F("first")) {
        jlist *l = jb_iter(r, self, line);
        if (!l) return jv_undef();
        return l->n ? l->it[0] : jr_undef(r, "No first item, sequence was empty.");
    }
    if (F("last")) {
        if (self.t == JT_LIST && self.u.l->kind == JL_GEN) return jr_type_error(r, line, "'generator' object is not reversible");
        jlist *l = jb_iter(r, self, line);
        if (!l) return jv_undef();
        return l->n ? l->it[l->n - 1] : jr_undef(r, "No last item, sequence was empty.");
    }
    if (F("join")) {
        jv sep = arg(a, 0, "d", jv_strn("", 0), NULL);
        jv attr = arg(a, 1, "attribute", jv_none(), NULL);
        jlist *l = jb_iter(r, self, line);
        if (!l) return jv_undef();
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) jv_str(&b, sep);
            jv x = attr.t != JT_NONE ? attr_path(r, l->it[i], attr, line) : l->it[i];
            if (jr_failed(r)) { jbuf_free(&b); return jv_undef(); }
            jv_str(&b, x);
            if (b.n > r->opts->max_output) { jbuf_free(&b); return jr_fail(r, JINJA_ELIMIT, line, "string longer than the output limit"); }
        }
        return mkstr(r, &b, line);
    }
    if (F("items")) {
        if (self.t == JT_UNDEF) { jlist *l = jlist_new(r->ar, 0, JL_GEN); if (!l) nomem(r, line); return l ? jv_list(l) : jv_undef(); }
        if (self.t != JT_DICT) {   /* jinja2's do_items is a generator: it fails when iterated */
            jlist *l = jlist_new(r->ar, 0, JL_GEN);
            if (!l) { nomem(r, line); return jv_undef(); }
            l->gen_err = "Can only get item pairs from a mapping.";
            return jv_list(l);
        }
        jfunc fn = { .kind = FN_METHOD, .self = self, .name = "items" };
        jargs none = {0};
        jv l = call_method(r, &fn, &none, line);
        if (l.t == JT_LIST) l.u.l->kind = JL_GEN;
        return l;
    }
    if (F("map")) {
        if (!jv_truthy(self)) return empty_gen(r, line);
        jlist *src = jb_iter(r, self, line);
        if (!src) return jv_undef();
        bool has_attr;
        jv attr = arg(a, NOPOS, "attribute", jv_none(), &has_attr);
        jv def = arg(a, NOPOS, "default", jv_undef(), NULL);
        jlist *out = jlist_new(r->ar, src->n, JL_LIST);
        if (!out) { nomem(r, line); return jv_undef(); }
        if (has_attr) {
            for (size_t i = 0; i < src->n; i++) {
                jv v = attr_path(r, src->it[i], attr, line);
                if (jr_failed(r)) return jv_undef();
                out->it[out->n++] = v.t == JT_UNDEF && (def.t != JT_UNDEF || def.u.s) ? def : v;
            }
            return mk_gen(out);
        }
        jv fname = arg(a, 0, NULL, jv_none(), NULL);
        if (fname.t != JT_STR) return jr_type_error(r, line, "map() needs a filter name or attribute=");
        jargs rest = { a->args + 1, a->nargs ? a->nargs - 1 : 0, a->kwnames, a->kwargs, a->nkw };
        for (size_t i = 0; i < src->n; i++) {
            if (!jr_step(r, line)) return jv_undef();
            jv v = jb_filter(r, fname.u.s, fname.n, src->it[i], &rest, line);
            if (jr_failed(r)) return jv_undef();
            out->it[out->n++] = v;
        }
        return mk_gen(out);
    }
    if (F("select")) return filter_select(r, self, a, true, false, line);
    if (F("reject")) return filter_select(r, self, a, false, false, line);
    if (F("selectattr")) return filter_select(r, self, a, true, true, line);
    if (F("rejectattr")) return filter_select(r, self, a, false, true, line);
    if (F("unique")) {
        bool cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false), NULL));
        jv attr = arg(a, 1, "attribute", jv_none(), NULL);
        jlist *src = jb_iter(r, self, line);
        if (!src) return jv_undef();
        jlist *out = jlist_new(r->ar, src->n, JL_LIST), *seen = jlist_new(r->ar, src->n, JL_LIST);
        if (!out || !seen) { nomem(r, line); return jv_undef(); }
        for (size_t i = 0; i < src->n; i++) {
            jv k = attr.t != JT_NONE ? attr_path(r, src->it[i], attr, line) : src->it[i];
            k = lower_key(r, k, cs, line);
            if (jr_failed(r)) return jv_undef();
            if ((k.t == JT_LIST && k.u.l->kind != JL_TUPLE) || k.t == JT_DICT || k.t == JT_NS)
                return jr_type_error(r, line, "unhashable type: '%s'", jv_type_name(k));
            bool dup = false;
            if (seen->n > 64 && !jr_scan(r, seen->n, line)) return jv_undef();
            for (size_t j = 0; j < seen->n; j++) if (jv_equal(seen->it[j], k)) { dup = true; break; }
            if (dup) continue;
            seen->it[seen->n++] = k;
            out->it[out->n++] = src->it[i];
        }
        return mk_gen(out);
    }
    if (F("sort")) return filter_sort(r, self, a, line);
    if (F("dictsort")) return filter_dictsort(r, self, a, line);
    if (F("reverse")) {
        if (self.t == JT_STR) {
            jbuf b = {0};
            size_t i = self.n;
            while (i > 0) {
                size_t j = i - 1;
                while (j > 0 && ((unsigned char)self.u.s[j] & 0xC0) == 0x80) j--;
                jbuf_put(&b, self.u.s + j, i - j);
                i = j;
            }
            return mkstr(r, &b, line);
        }
        jlist *src = jb_iter(r, self, line);
        if (!src) return jv_undef();
        jlist *out = jlist_new(r->ar, src->n, JL_LIST);
        if (!out) { nomem(r, line); return jv_undef(); }
        for (size_t i = src->n; i-- > 0;) out->it[out->n++] = src->it[i];
        return mk_gen(out);
    }
    if (F("min")) return filter_minmax(r, self, a, false, line);
    if (F("max")) return filter_minmax(r, self, a, true, line);
    if (F("sum")) {
        jv attr = arg(a, 0, "attribute", jv_none(), NULL);
        jv acc = arg(a, 1, "start", jv_int(0), NULL);
        jlist *l = jb_iter(r, self, line);
        if (!l) return jv_undef();
        for (size_t i = 0; i < l->n; i++) {
            jv x = attr.t != JT_NONE ? attr_path(r, l->it[i], attr, line) : l->it[i];
            if (jr_failed(r)) return jv_undef();
            if (!jv_is_number(acc) || !jv_is_number(x)) return jr_type_error(r, line, "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
            if (acc.t == JT_FLOAT || x.t == JT_FLOAT) acc = jv_float(jv_num(acc) + jv_num(x));
            else {
                int64_t t;
                if (__builtin_add_overflow(acc.u.i, x.u.i, &t)) return jr_fail(r, JINJA_ELIMIT, line, "integer result does not fit in 64 bits");
                acc = jv_int(t);
            }
        }
        return acc;
    }
    if (F("abs")) {
        if (self.t == JT_FLOAT) return jv_float(fabs(self.u.f));
        if (self.t == JT_INT && self.u.i == INT64_MIN) return jr_fail(r, JINJA_ELIMIT, line, "integer result does not fit in 64 bits");
        if (self.t == JT_INT || self.t == JT_BOOL) return jv_int(self.u.i < 0 ? -self.u.i : self.u.i);
        return jr_type_error(r, line, "bad operand type for abs(): '%s'", jv_type_name(self));
    }
    if ((F("int") || F("float")) && self.t == JT_UNDEF) return jr_undef_error(r, self, line);   /* int(Undefined) raises */
    if (F("int")) {
        jv def = arg(a, 0, "default", jv_int(0), NULL);
        return to_int(r, self, def, line);
    }
    if (F("float")) return to_float(self, arg(a, 0, "default", jv_float(0.0), NULL));
    if (F("round")) {
        jv prec = arg(a, 0, "precision", jv_int(0), NULL);
        jv method = arg(a, 1, "method", jv_strn("common", 6), NULL);
        if (!jv_is_number(self)) return jr_type_error(r, line, "round() needs a number, got %s", jv_type_name(self));
        bool common = !(method.t == JT_STR && ((method.n == 4 && !memcmp(method.u.s, "ceil", 4)) || (method.n == 5 && !memcmp(method.u.s, "floor", 5))));
        if (common && self.t != JT_FLOAT && (prec.t == JT_INT && prec.u.i >= 0)) return jv_int(self.u.i);   /* round(int) is an int */
        double x = jv_num(self), m = pow(10.0, (double)(prec.t == JT_INT ? prec.u.i : 0));
        double v = x * m;
        if (method.t == JT_STR && method.n == 4 && !memcmp(method.u.s, "ceil", 4)) v = ceil(v);
        else if (method.t == JT_STR && method.n == 5 && !memcmp(method.u.s, "floor", 5)) v = floor(v);
        else v = nearbyint(v);   /* Python's round(): half to even */
        return jv_float(v / m);
    }
    if (F("attr")) {
        jv nm = arg(a, 0, NULL, jv_none(), NULL);
        if (nm.t != JT_STR) return jr_type_error(r, line, "attribute name must be a string");
        return jb_getattr(r, self, nm.u.s, nm.n, line);
    }
    if (F("format")) {
        if (self.t != JT_STR) return jr_type_error(r, line, "format filter needs a string");
        return jb_percent_format(r, self, a, true, line);
    }
    if (F("batch")) {
        jv cnt = arg(a, 0, "linecount", jv_int(1), NULL);
        bool has_fill;
        jv fill = arg(a, 1, "fill_with", jv_none(), &has_fill);
        if (cnt.t != JT_INT || cnt.u.i <= 0) return jr_type_error(r, line, "batch() needs a positive integer");
        jlist *src = jb_iter(r, self, line);
        if (!src) return jv_undef();
        jlist *out = jlist_new(r->ar, 0, JL_GEN), *cur = NULL;
        if (!out) { nomem(r, line); return jv_undef(); }
        for (size_t i = 0; i < src->n; i++) {
            if (!cur) { cur = jlist_new(r->ar, 0, JL_LIST); if (!cur || !jlist_push(r->ar, out, jv_list(cur))) { nomem(r, line); return jv_undef(); } }
            if (!jlist_push(r->ar, cur, src->it[i])) { nomem(r, line); return jv_undef(); }
            if ((int64_t)cur->n == cnt.u.i) cur = NULL;
        }
        if (cur && has_fill) while ((int64_t)cur->n < cnt.u.i) if (!jlist_push(r->ar, cur, fill)) { nomem(r, line); return jv_undef(); }
        return jv_list(out);
    }
    if (F("slice")) return jr_type_error(r, line, "filter 'slice' is not supported by this engine");
    /* string filters: the value is converted with str() first, like jinja2's soft_str */
    jv s = to_str(r, self, line);
    if (jr_failed(r)) return jv_undef();
    if (F("trim")) return strip(s, 3, arg(a, 0, "chars", jv_none(), NULL));
    if (F("upper")) return case_map(r, s, 1, line);
    if (F("lower")) return case_map(r, s, 0, line);
    if (F("capitalize")) return case_map(r, s, 3, line);
    if (F("title")) return case_map(r, s, 5, line);
    if (F("truncate")) {
        if (self.t == JT_UNDEF) return self;   /* len(Undefined) == 0 */
        if (self.t != JT_STR) {   /* jinja2 calls len() first: short sequences come back unchanged */
            jv lenv = arg(a, 0, "length", jv_int(255), NULL), lw = arg(a, 3, "leeway", jv_int(5), NULL);
            int64_t len = self.t == JT_LIST && self.u.l->kind != JL_GEN ? (int64_t)self.u.l->n : self.t == JT_DICT ? (int64_t)self.u.d->n : -1;
            if (len < 0) return jr_type_error(r, line, "object of type '%s' has no len()", jv_type_name(self));
            if (lenv.t == JT_INT && lw.t == JT_INT && len <= lenv.u.i + lw.u.i) return self;
            return jr_type_error(r, line, "truncate needs a string, got %s", jv_type_name(self));
        }
        jv lenv = arg(a, 0, "length", jv_int(255), NULL);
        bool killwords = jv_truthy(arg(a, 1, "killwords", jv_bool(false), NULL));
        jv end = arg(a, 2, "end", jv_strn("...", 3), NULL);
        jv leeway = arg(a, 3, "leeway", jv_int(5), NULL);
        if (lenv.t != JT_INT || end.t != JT_STR || leeway.t != JT_INT) return jr_type_error(r, line, "truncate(length, killwords, end, leeway) has wrong argument types");
        int64_t cps = (int64_t)utf8_count(s.u.s, s.n), endn = (int64_t)utf8_count(end.u.s, end.n);
        if (lenv.u.i < endn) return jr_fail(r, JINJA_ERENDER, line, "AssertionError: expected length >= %lld, got %lld", (long long)endn, (long long)lenv.u.i);
        if (leeway.u.i < 0) return jr_fail(r, JINJA_ERENDER, line, "AssertionError: expected leeway >= 0, got %lld", (long long)leeway.u.i);
        if (cps <= lenv.u.i + leeway.u.i) return s;
        size_t cut = utf8_offset(s.u.s, s.n, (size_t)(lenv.u.i - endn));
        jv head = jv_strn(s.u.s, cut);
        if (!killwords) {
            const char *sp = NULL;
            for (size_t k = cut; k-- > 0;) if (s.u.s[k] == ' ') { sp = s.u.s + k; break; }
            if (sp) head = jv_strn(s.u.s, (size_t)(sp - s.u.s));
        }
        return str_concat_simple(r, head, end, line);
    }
    if (F("replace")) {
        jv old = arg(a, 0, "old", jv_none(), NULL), rep = arg(a, 1, "new", jv_none(), NULL);
        jv cnt = arg(a, 2, "count", jv_none(), NULL);
        old = to_str(r, old, line); rep = to_str(r, rep, line);
        if (jr_failed(r)) return jv_undef();
        return str_replace(r, s, old, rep, cnt.t == JT_INT ? cnt.u.i : -1, line);
    }
    if (F("indent")) {
        if (self.t != JT_STR) return jr_type_error(r, line, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(self));
        return filter_indent(r, s, a, line);
    }
    if (F("wordcount")) {
        int64_t c = 0;
        bool in = false;
        for (size_t i = 0; i < s.n; i++) {
            bool w = isalnum((unsigned char)s.u.s[i]) || s.u.s[i] == '_' || (unsigned char)s.u.s[i] >= 0x80;
            if (w && !in) c++;
            in = w;
        }
        return jv_int(c);
    }
    if (F("e") || F("escape") || F("forceescape")) {
        if ((s.flags & JS_SAFE) && !F("forceescape")) return s;
        jv e = jb_escape(r, s, line);
        e.flags |= JS_SAFE;
        return e;
    }
    if (F("center")) {
        jv eighty = jv_int(80);
        jargs ca = { a->args, a->nargs, a->kwnames, a->kwargs, a->nkw };
        if (!a->nargs) { ca.args = &eighty; ca.nargs = 1; }
        return str_method(r, s, "center", &ca, line);
    }
    return jr_fail(r, JINJA_ERENDER, line, "TemplateAssertionError: no filter named '%.*s'", (int)n, name);
    #undef F
}
