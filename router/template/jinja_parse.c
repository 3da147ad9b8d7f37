/* jinja_parse.c — Jinja2 lexer and parser.
 *
 * The lexer mirrors jinja2.lexer for the parts that decide bytes: newline normalisation and the
 * dropped trailing newline, `-`/`+` whitespace control, trim_blocks (one newline after a block or
 * comment tag) and lstrip_blocks (spaces/tabs before a block or comment tag that starts its line).
 * The parser follows jinja2.parser's grammar and precedence:
 *   condexpr: or ['if' or ['else' condexpr]]     or: and ('or' and)*     and: not ('and' not)*
 *   not: 'not' not | compare                      compare: math1 (op math1)*
 *   math1: concat (('+'|'-') concat)*             concat: math2 ('~' math2)*
 *   math2: pow (('*'|'/'|'//'|'%') pow)*          pow: unary ('**' unary)*
 *   unary: ('-'|'+') unary | primary postfix* (filter | test | call)*
 * AST node layouts are documented at each constructor below. */
#include "router/template/jinja_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
       T_FLOAT, T_OP };

typedef struct {
    int type;
    const char *s; size_t n;   /* text, name, decoded string, operator */
    int64_t i; double f;
    int line, col; size_t off;
} jtok;

typedef struct {
    jarena *ar;
    const char *src; size_t len;
    const jinja_parse_opts *o;
    jtok *toks; size_t ntok, cap;
    size_t line_off; int line_no;   /* incremental line count for token positions */
    size_t p;                  /* parser cursor */
    int depth;
    int status;
    jinja_pos pos;
    char *err; size_t err_size;
} jparser;

static bool perr_at(jparser *P, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool perr_at(jparser *P, size_t off, const char *fmt, ...) {
    if (P->status) return false;
    P->status = JINJA_ESYNTAX;
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < P->len; i++) {
        if (P->src[i] == '\n') { line++; col = 1; } else if (((unsigned char)P->src[i] & 0xC0) != 0x80) col++;
    }
    P->pos.line = line; P->pos.column = col; P->pos.offset = off;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->err && P->err_size) snprintf(P->err, P->err_size, "template syntax error at line %d, column %d: %s", line, col, msg);
    return false;
}

static jtok *tok_push(jparser *P, int type, size_t off) {
    if (P->ntok == P->cap) {   /* the token array is scratch: malloc'd, freed when parsing ends */
        size_t cap = P->cap ? P->cap * 2 : 1024;
        jtok *t = realloc(P->toks, cap * sizeof *t);
        if (!t) { perr_at(P, off, "out of memory"); return NULL; }
        P->toks = t; P->cap = cap;
    }
    jtok *t = &P->toks[P->ntok++];
    memset(t, 0, sizeof *t);
    t->type = type; t->off = off;
    /* tokens come in source order: count newlines since the previous one only */
    if (off < P->line_off) { P->line_off = 0; P->line_no = 1; }
    for (; P->line_off < off && P->line_off < P->len; P->line_off++) if (P->src[P->line_off] == '\n') P->line_no++;
    t->line = P->line_no;
    return t;
}

/* ---- lexer ---------------------------------------------------------------------------------- */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_name_start(char c) { return isalpha((unsigned char)c) || c == '_' || ((unsigned char)c >= 0x80); }
static bool is_name_char(char c) { return is_name_start(c) || isdigit((unsigned char)c); }

/* Normalises newlines like str.splitlines() + "\n".join and drops one trailing newline. */
static bool normalize_source(jparser *P, const char *src, size_t len) {
    char *d = jarena_alloc(P->ar, len + 1);
    if (!d) return perr_at(P, 0, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '\r') { d[n++] = '\n'; if (i + 1 < len && src[i + 1] == '\n') i++; }
        else if (c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e) d[n++] = '\n';
        else if (c == 0xC2 && i + 1 < len && (unsigned char)src[i + 1] == 0x85) { d[n++] = '\n'; i++; }
        else if (c == 0xE2 && i + 2 < len && (unsigned char)src[i + 1] == 0x80 &&
                 ((unsigned char)src[i + 2] == 0xA8 || (unsigned char)src[i + 2] == 0xA9)) { d[n++] = '\n'; i += 2; }
        else d[n++] = (char)c;
    }
    if (!P->o->keep_trailing_newline && n && d[n - 1] == '\n') n--;
    d[n] = 0;
    P->src = d; P->len = n;
    return true;
}

/* Decodes a Python string literal body (unicode-escape rules) into the arena. */
static bool decode_string(jparser *P, const char *s, size_t n, size_t off, jtok *t) {
    char *d = jarena_alloc(P->ar, n + 1);
    if (!d) return perr_at(P, off, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { d[o++] = s[i]; continue; }
        char c = s[++i];
        uint32_t cp; int nd = 0;
        switch (c) {
        case 'n': d[o++] = '\n'; break;
        case 't': d[o++] = '\t'; break;
        case 'r': d[o++] = '\r'; break;
        case '\\': d[o++] = '\\'; break;
        case '\'': d[o++] = '\''; break;
        case '"': d[o++] = '"'; break;
        case 'a': d[o++] = '\a'; break;
        case 'b': d[o++] = '\b'; break;
        case 'f': d[o++] = '\f'; break;
        case 'v': d[o++] = '\v'; break;
        case '\n': break;
        case 'x': nd = 2; goto hex;
        case 'u': nd = 4; goto hex;
        case 'U': nd = 8; goto hex;
        hex:
            cp = 0;
            for (int k = 0; k < nd; k++) {
                if (i + 1 >= n || !isxdigit((unsigned char)s[i + 1]))
                    return perr_at(P, off, "truncated \\%c escape in string literal", c);
                char h = s[++i];
                cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            }
            if (cp > 0x10FFFF) return perr_at(P, off, "escape out of range in string literal");
            if (cp < 0x80) d[o++] = (char)cp;
            else if (cp < 0x800) { d[o++] = (char)(0xC0 | (cp >> 6)); d[o++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                d[o++] = (char)(0xE0 | (cp >> 12)); d[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                d[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                d[o++] = (char)(0xF0 | (cp >> 18)); d[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                d[o++] = (char)(0x80 | ((cp >> 6) & 0x3F)); d[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        default:
            if (c >= '0' && c <= '7') {
                cp = (uint32_t)(c - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++) cp = cp * 8 + (uint32_t)(s[++i] - '0');
                if (cp < 0x80) d[o++] = (char)cp;
                else { d[o++] = (char)(0xC0 | (cp >> 6)); d[o++] = (char)(0x80 | (cp & 0x3F)); }
            } else { d[o++] = '\\'; d[o++] = c; }
        }
    }
    d[o] = 0;
    t->s = d; t->n = o;
    return true;
}

/* Tokenizes one tag body from *pi up to its end delimiter ("}}" or "%}"). Returns false on error. */
static bool lex_tag(jparser *P, size_t *pi, char close, int end_type) {
    const char *s = P->src; size_t n = P->len, i = *pi;
    size_t start = i;
    int balance = 0;   /* open ( [ {: like jinja2, "}}" inside brackets does not end the tag */
    for (;;) {
        while (i < n && is_ws(s[i])) i++;
        if (i >= n) return perr_at(P, start, "unexpected end of template: tag not closed");
        /* end delimiter, with optional - or + */
        char c = s[i];
        if (balance == 0 && (c == '-' || c == '+') && i + 2 < n && s[i + 1] == close && s[i + 2] == '}') {
            jtok *t = tok_push(P, end_type, i);
            if (!t) return false;
            t->s = c == '-' ? "-" : "+"; t->n = 1;
            i += 3;
            if (c == '-') while (i < n && is_ws(s[i])) i++;
            *pi = i; return true;
        }
        if (balance == 0 && c == close && i + 1 < n && s[i + 1] == '}') {
            jtok *t = tok_push(P, end_type, i);
            if (!t) return false;
            t->s = ""; t->n = 0;
            i += 2;
            if (end_type == T_BLOCK_END && P->o->trim_blocks && i < n && s[i] == '\n') i++;
            *pi = i; return true;
        }
        size_t off = i;
        if (is_name_start(c)) {
            while (i < n && is_name_char(s[i])) i++;
            jtok *t = tok_push(P, T_NAME, off);
            if (!t) return false;
            t->s = s + off; t->n = i - off;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c) { if (s[j] == '\\') j++; j++; }
            if (j >= n) return perr_at(P, off, "unterminated string literal");
            jtok *t = tok_push(P, T_STRING, off);
            if (!t || !decode_string(P, s + i + 1, j - i - 1, off, t)) return false;
            i = j + 1;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            bool after_dot = off > 0 && s[off - 1] == '.';
            size_t j = i;
            while (j < n && (isdigit((unsigned char)s[j]) || s[j] == '_')) j++;
            bool isf = false;
            if (!after_dot && j + 1 < n && s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
                isf = true; j++;
                while (j < n && (isdigit((unsigned char)s[j]) || s[j] == '_')) j++;
            }
            if (!after_dot && j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t k = j + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                if (k < n && isdigit((unsigned char)s[k])) {
                    isf = true; j = k;
                    while (j < n && (isdigit((unsigned char)s[j]) || s[j] == '_')) j++;
                }
            }
            if (!isf && s[i] == '0') {   /* jinja2: no leading zeros in a decimal integer ("0", "00" are fine) */
                for (size_t k = i; k < j; k++)
                    if (s[k] != '0' && s[k] != '_') return perr_at(P, off, "leading zeros in an integer literal");
            }
            char buf[128]; size_t bn = 0;
            for (size_t k = i; k < j && bn < sizeof buf - 1; k++) if (s[k] != '_') buf[bn++] = s[k];
            buf[bn] = 0;
            jtok *t = tok_push(P, isf ? T_FLOAT : T_INT, off);
            if (!t) return false;
            if (isf) t->f = strtod(buf, NULL);
            else {
                errno = 0;
                t->i = strtoll(buf, NULL, 10);
                if (errno == ERANGE || bn >= sizeof buf - 1) return perr_at(P, off, "integer literal does not fit in 64 bits");
            }
            i = j;
            continue;
        }
        static const char *ops2[] = { "//", "**", "==", "!=", "<=", ">=" };
        size_t oplen = 0;
        for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
            if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) { oplen = 2; break; }
        if (!oplen && strchr("+-*/%~<>=()[]{},.:|;!", c)) oplen = 1;
        if (!oplen || (oplen == 1 && c == '!')) return perr_at(P, off, "unexpected character '%c'", c);
        if (oplen == 1 && (c == '(' || c == '[' || c == '{')) balance++;
        if (oplen == 1 && (c == ')' || c == ']' || c == '}') && balance > 0) balance--;
        jtok *t = tok_push(P, T_OP, off);
        if (!t) return false;
        t->s = s + i; t->n = oplen;
        i += oplen;
    }
}

static bool lex(jparser *P) {
    const char *s = P->src; size_t n = P->len, i = 0;
    bool line_starting = true;
    while (i < n) {
        /* find the next tag opener */
        size_t j = i;
        const char *hit = NULL;
        while ((hit = memchr(s + j, '{', n - j)) != NULL) {
            size_t k = (size_t)(hit - s);
            if (k + 1 < n && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')) break;
            j = k + 1;
        }
        size_t tag = hit ? (size_t)(hit - s) : n;
        size_t text_end = tag;
        char kind = hit ? s[tag + 1] : 0;
        char ctl = hit && tag + 2 < n && (s[tag + 2] == '-' || s[tag + 2] == '+') ? s[tag + 2] : 0;
        if (hit && ctl == '-') {
            while (text_end > i && is_ws(s[text_end - 1])) text_end--;
        } else if (hit && ctl != '+' && P->o->lstrip_blocks && kind != '{') {
            size_t l = text_end;
            while (l > i && s[l - 1] != '\n') l--;
            bool has_nl = l > i;
            if (has_nl || line_starting) {
                bool ws = l < text_end;
                for (size_t k = l; k < text_end; k++) if (!is_ws(s[k])) { ws = false; break; }
                if (ws) text_end = l;
            }
        }
        if (text_end > i) {
            jtok *t = tok_push(P, T_TEXT, i);
            if (!t) return false;
            t->s = s + i; t->n = text_end - i;
        }
        if (!hit) break;
        i = tag + 2 + (ctl ? 1 : 0);
        if (kind == '#') {
            const char *e = NULL;
            size_t k = i;
            for (; k + 1 < n; k++) if (s[k] == '#' && s[k + 1] == '}') { e = s + k; break; }
            if (!e) return perr_at(P, tag, "unterminated comment");
            size_t end = k + 2;
            if (k > i && s[k - 1] == '-' && (k - 1 >= i)) { while (end < n && is_ws(s[end])) end++; }
            else if (!(k > i && s[k - 1] == '+') && P->o->trim_blocks && end < n && s[end] == '\n') end++;
            line_starting = end > 0 && s[end - 1] == '\n';
            i = end;
            continue;
        }
        jtok *t = tok_push(P, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, tag);
        if (!t) return false;
        size_t before = P->ntok;
        if (!lex_tag(P, &i, kind == '{' ? '}' : '%', kind == '{' ? T_VAR_END : T_BLOCK_END)) return false;
        line_starting = i > 0 && s[i - 1] == '\n';
        /* {% raw %} ... {% endraw %}: everything in between is text. jinja2's raw rules: the raw tag
         * ends with "%}" (no trim_blocks) or "-%}" (strips what follows) — "+%}" is not a raw tag;
         * the endraw tag takes -, + and lstrip_blocks like any block tag, and trim_blocks after it. */
        if (kind == '%' && P->ntok == before + 2 && P->toks[before].type == T_NAME &&
            P->toks[before].n == 3 && memcmp(P->toks[before].s, "raw", 3) == 0) {
            const jtok *endt = &P->toks[before + 1];
            if (endt->n == 1 && endt->s[0] == '+') return perr_at(P, tag, "unknown tag 'raw' (a raw tag cannot end with +%%})");
            if (endt->n == 0) i = endt->off + 2;   /* undo trim_blocks */
            line_starting = i > 0 && s[i - 1] == '\n' && endt->n == 1;
            P->ntok = before - 1;   /* drop BLOCK_BEGIN raw BLOCK_END */
            size_t k = i;
            for (;;) {
                const char *e = memchr(s + k, '{', n - k);
                if (!e) return perr_at(P, tag, "missing {%% endraw %%}");
                size_t q = (size_t)(e - s);
                size_t r = q + 2;
                if (q + 1 < n && s[q + 1] == '%') {
                    char ectl = r < n && (s[r] == '-' || s[r] == '+') ? s[r] : 0;
                    if (ectl) r++;
                    while (r < n && is_ws(s[r])) r++;
                    if (r + 6 <= n && memcmp(s + r, "endraw", 6) == 0) {
                        size_t te = q;
                        if (ectl == '-') while (te > i && is_ws(s[te - 1])) te--;
                        else if (ectl != '+' && P->o->lstrip_blocks) {
                            size_t l = te;
                            while (l > i && s[l - 1] != '\n') l--;
                            if (l > i || line_starting) {
                                bool ws = l < te;
                                for (size_t m = l; m < te; m++) if (!is_ws(s[m])) { ws = false; break; }
                                if (ws) te = l;
                            }
                        }
                        if (te > i) { jtok *tt = tok_push(P, T_TEXT, i); if (!tt) return false; tt->s = s + i; tt->n = te - i; }
                        r += 6;
                        size_t tagstart = P->ntok;
                        if (!lex_tag(P, &r, '%', T_BLOCK_END)) return false;
                        P->ntok = tagstart;
                        line_starting = r > 0 && s[r - 1] == '\n';
                        i = r;
                        break;
                    }
                }
                k = q + 1;
            }
        }
    }
    return tok_push(P, T_EOF, n) != NULL;
}

/* ---- parser helpers ------------------------------------------------------------------------- */
static jtok *cur(jparser *P) { return &P->toks[P->p]; }
static jtok *peek(jparser *P, size_t k) { size_t q = P->p + k; return &P->toks[q < P->ntok ? q : P->ntok - 1]; }
static void adv(jparser *P) { if (P->p + 1 < P->ntok) P->p++; }
static bool tok_is(const jtok *t, int type, const char *s) {
    if (t->type != type) return false;
    if (!s) return true;
    return t->n && t->s[0] == s[0] && t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}
static bool is_op(jparser *P, const char *s) { return tok_is(cur(P), T_OP, s); }
static bool is_name(jparser *P, const char *s) { return tok_is(cur(P), T_NAME, s); }
static bool skip_op(jparser *P, const char *s) { if (is_op(P, s)) { adv(P); return true; } return false; }
static bool skip_name(jparser *P, const char *s) { if (is_name(P, s)) { adv(P); return true; } return false; }

static const char *tok_desc(const jtok *t, char *buf, size_t n) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_VAR_END: return "end of print statement '}}'";
    case T_BLOCK_END: return "end of statement block '%}'";
    case T_TEXT: return "template data";
    default: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s ? t->s : ""); return buf;
    }
}

static bool expect_op(jparser *P, const char *s) {
    if (skip_op(P, s)) return true;
    char b[64];
    return perr_at(P, cur(P)->off, "expected '%s', got %s", s, tok_desc(cur(P), b, sizeof b));
}

static jnode *mk(jparser *P, int kind, const jtok *t) {
    jnode *n = jarena_alloc(P->ar, sizeof *n);
    if (!n) { perr_at(P, t ? t->off : 0, "out of memory"); return NULL; }
    n->kind = (uint16_t)kind;
    n->line = t ? t->line : 0;
    return n;
}

/* A growable node list built in the arena. */
typedef struct { jnode **v; size_t n, cap; } nlist;
static bool nl_push(jparser *P, nlist *l, jnode *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **v = jarena_alloc(P->ar, cap * sizeof *v);
        if (!v) return perr_at(P, cur(P)->off, "out of memory");
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v; l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}
typedef struct { jv *v; size_t n, cap; } vlist;
static bool vl_push(jparser *P, vlist *l, jv x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *v = jarena_alloc(P->ar, cap * sizeof *v);
        if (!v) return perr_at(P, cur(P)->off, "out of memory");
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v; l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static jnode *parse_expr(jparser *P);
static jnode *parse_or(jparser *P);
static jnode *parse_unary(jparser *P, bool with_filter);
static jnode *parse_tuple(jparser *P, bool simplified, bool with_condexpr, bool explicit_parens);

static bool enter(jparser *P) {
    if (++P->depth > P->o->max_depth)
        return perr_at(P, cur(P)->off, "nesting deeper than %d levels", P->o->max_depth);
    return true;
}
static void leave(jparser *P) { P->depth--; }

/* Call arguments "(...)": N_CALL/N_FILTER/N_TEST layout: v args, names+w kwargs, c *args, d **kwargs. */
static bool parse_call_args(jparser *P, jnode *n) {
    if (!expect_op(P, "(")) return false;
    nlist args = {0}, kwv = {0}; vlist kwn = {0};
    bool first = true;
    while (!is_op(P, ")")) {
        if (!first && !expect_op(P, ",")) return false;
        first = false;
        if (is_op(P, ")")) break;
        if (skip_op(P, "*")) { if (!(n->c = parse_expr(P))) return false; continue; }
        if (skip_op(P, "**")) { if (!(n->d = parse_expr(P))) return false; continue; }
        if (cur(P)->type == T_NAME && tok_is(peek(P, 1), T_OP, "=")) {
            jtok *nt = cur(P);
            adv(P); adv(P);
            jnode *v = parse_expr(P);
            if (!v || !vl_push(P, &kwn, jv_strn(nt->s, nt->n)) || !nl_push(P, &kwv, v)) return false;
            continue;
        }
        if (kwn.n) return perr_at(P, cur(P)->off, "positional argument after keyword argument");
        jnode *a = parse_expr(P);
        if (!a || !nl_push(P, &args, a)) return false;
    }
    adv(P);
    n->v = args.v; n->nv = args.n; n->w = kwv.v; n->nw = kwv.n; n->names = kwn.v; n->nnames = kwn.n;
    return true;
}

static jnode *parse_list_lit(jparser *P) {
    jtok *t = cur(P);
    adv(P);
    jnode *n = mk(P, N_LIST, t);
    nlist it = {0};
    if (!n) return NULL;
    while (!is_op(P, "]")) {
        if (it.n && !expect_op(P, ",")) return NULL;
        if (is_op(P, "]")) break;
        jnode *x = parse_expr(P);
        if (!x || !nl_push(P, &it, x)) return NULL;
    }
    adv(P);
    n->v = it.v; n->nv = it.n;
    return n;
}

static jnode *parse_dict_lit(jparser *P) {
    jtok *t = cur(P);
    adv(P);
    jnode *n = mk(P, N_DICT, t);
    nlist ks = {0}, vs = {0};
    if (!n) return NULL;
    while (!is_op(P, "}")) {
        if (ks.n && !expect_op(P, ",")) return NULL;
        if (is_op(P, "}")) break;
        jnode *k = parse_expr(P);
        if (!k || !expect_op(P, ":")) return NULL;
        jnode *v = parse_expr(P);
        if (!v || !nl_push(P, &ks, k) || !nl_push(P, &vs, v)) return NULL;
    }
    adv(P);
    n->v = ks.v; n->nv = ks.n; n->w = vs.v; n->nw = vs.n;
    return n;
}

static jnode *parse_primary(jparser *P) {
    jtok *t = cur(P);
    jnode *n;
    char b[64];
    switch (t->type) {
    case T_NAME:
        adv(P);
        if (!(n = mk(P, N_LIT, t))) return NULL;
        if (tok_is(t, T_NAME, "true") || tok_is(t, T_NAME, "True")) n->lit = jv_bool(true);
        else if (tok_is(t, T_NAME, "false") || tok_is(t, T_NAME, "False")) n->lit = jv_bool(false);
        else if (tok_is(t, T_NAME, "none") || tok_is(t, T_NAME, "None")) n->lit = jv_none();
        else { n->kind = N_NAME; n->lit = jv_strn(t->s, t->n); }
        return n;
    case T_STRING: {
        adv(P);
        if (!(n = mk(P, N_LIT, t))) return NULL;
        if (cur(P)->type != T_STRING) { n->lit = jv_strn(t->s, t->n); return n; }
        jbuf sb = {0};
        jbuf_put(&sb, t->s, t->n);
        while (cur(P)->type == T_STRING) { jbuf_put(&sb, cur(P)->s, cur(P)->n); adv(P); }
        n->lit = jv_from_buf(P->ar, &sb);
        bool oom = sb.oom;
        jbuf_free(&sb);
        if (oom) { perr_at(P, t->off, "out of memory"); return NULL; }
        return n;
    }
    case T_INT: adv(P); if ((n = mk(P, N_LIT, t))) n->lit = jv_int(t->i); return n;
    case T_FLOAT: adv(P); if ((n = mk(P, N_LIT, t))) n->lit = jv_float(t->f); return n;
    case T_OP:
        if (tok_is(t, T_OP, "(")) {
            adv(P);
            n = parse_tuple(P, false, true, true);
            if (!n || !expect_op(P, ")")) return NULL;
            return n;
        }
        if (tok_is(t, T_OP, "[")) return parse_list_lit(P);
        if (tok_is(t, T_OP, "{")) return parse_dict_lit(P);
        /* fallthrough */
    default:
        perr_at(P, t->off, "unexpected %s", tok_desc(t, b, sizeof b));
        return NULL;
    }
}

/* Subscript contents: an expression, a slice a:b:c, or a tuple. */
static jnode *parse_subscribed(jparser *P) {
    jtok *t = cur(P);
    jnode *args[3] = {0};
    if (is_op(P, ":")) { adv(P); }
    else {
        jnode *e = parse_expr(P);
        if (!e) return NULL;
        if (!is_op(P, ":")) return e;
        adv(P);
        args[0] = e;
    }
    if (!is_op(P, "]") && !is_op(P, ",") && !is_op(P, ":")) { if (!(args[1] = parse_expr(P))) return NULL; }
    if (skip_op(P, ":")) {
        if (!is_op(P, "]") && !is_op(P, ",")) { if (!(args[2] = parse_expr(P))) return NULL; }
    }
    jnode *s = mk(P, N_SLICE, t);
    if (!s) return NULL;
    s->a = args[0]; s->b = args[1]; s->c = args[2];
    return s;
}

static jnode *parse_postfix(jparser *P, jnode *node) {
    for (;;) {
        jtok *t = cur(P);
        if (tok_is(t, T_OP, ".")) {
            adv(P);
            jtok *a = cur(P);
            jnode *n = mk(P, a->type == T_INT ? N_ITEM : N_ATTR, t);
            if (!n) return NULL;
            n->a = node;
            if (a->type == T_NAME) n->lit = jv_strn(a->s, a->n);
            else if (a->type == T_INT) {
                jnode *k = mk(P, N_LIT, a);
                if (!k) return NULL;
                k->lit = jv_int(a->i);
                n->b = k;
            } else { char b[64]; perr_at(P, a->off, "expected name or number after '.', got %s", tok_desc(a, b, sizeof b)); return NULL; }
            adv(P);
            node = n;
        } else if (tok_is(t, T_OP, "[")) {
            adv(P);
            nlist items = {0};
            while (!is_op(P, "]")) {
                if (items.n && !expect_op(P, ",")) return NULL;
                if (is_op(P, "]")) break;
                jnode *x = parse_subscribed(P);
                if (!x || !nl_push(P, &items, x)) return NULL;
            }
            if (!expect_op(P, "]")) return NULL;
            if (!items.n) { perr_at(P, t->off, "expected subscript expression"); return NULL; }
            jnode *n = mk(P, N_ITEM, t);
            if (!n) return NULL;
            n->a = node;
            if (items.n == 1) n->b = items.v[0];
            else { jnode *tu = mk(P, N_TUPLE, t); if (!tu) return NULL; tu->v = items.v; tu->nv = items.n; n->b = tu; }
            node = n;
        } else if (tok_is(t, T_OP, "(")) {
            jnode *n = mk(P, N_CALL, t);
            if (!n) return NULL;
            n->a = node;
            if (!parse_call_args(P, n)) return NULL;
            node = n;
        } else return node;
    }
}

static bool parse_dotted_name(jparser *P, jnode *n, const char *what) {
    jtok *t = cur(P);
    char b[64];
    if (t->type != T_NAME) return perr_at(P, t->off, "expected %s name, got %s", what, tok_desc(t, b, sizeof b));
    const char *s = t->s; size_t len = t->n;
    adv(P);
    while (is_op(P, ".") && peek(P, 1)->type == T_NAME) {
        adv(P);
        len = (size_t)(cur(P)->s + cur(P)->n - s);
        adv(P);
    }
    n->lit = jv_strn(s, len);
    return true;
}

static jnode *parse_filter(jparser *P, jnode *node, bool start_inline) {
    while (is_op(P, "|") || start_inline) {
        if (!start_inline) adv(P);
        start_inline = false;
        jtok *t = cur(P);
        jnode *n = mk(P, N_FILTER, t);
        if (!n || !parse_dotted_name(P, n, "filter")) return NULL;
        n->a = node;
        if (is_op(P, "(") && !parse_call_args(P, n)) return NULL;
        node = n;
    }
    return node;
}

static jnode *parse_test(jparser *P, jnode *node) {
    jtok *t = cur(P);
    adv(P);   /* 'is' */
    bool neg = skip_name(P, "not");
    jnode *n = mk(P, N_TEST, t);
    if (!n || !parse_dotted_name(P, n, "test")) return NULL;
    n->a = node; n->flag = neg;
    jtok *c = cur(P);
    if (is_op(P, "(")) { if (!parse_call_args(P, n)) return NULL; }
    else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
              tok_is(c, T_OP, "[") || tok_is(c, T_OP, "{")) &&
             !tok_is(c, T_NAME, "else") && !tok_is(c, T_NAME, "or") && !tok_is(c, T_NAME, "and")) {
        if (tok_is(c, T_NAME, "is")) { perr_at(P, c->off, "you cannot chain multiple tests with is"); return NULL; }
        jnode *arg = parse_primary(P);
        if (!arg || !(arg = parse_postfix(P, arg))) return NULL;
        n->v = jarena_alloc(P->ar, sizeof(jnode *));
        if (!n->v) { perr_at(P, c->off, "out of memory"); return NULL; }
        n->v[0] = arg; n->nv = 1;
    }
    return n;
}

static jnode *parse_filter_expr(jparser *P, jnode *node) {
    for (;;) {
        if (is_op(P, "|")) { if (!(node = parse_filter(P, node, false))) return NULL; }
        else if (is_name(P, "is")) { if (!(node = parse_test(P, node))) return NULL; }
        else if (is_op(P, "(")) {
            jnode *n = mk(P, N_CALL, cur(P));
            if (!n) return NULL;
            n->a = node;
            if (!parse_call_args(P, n)) return NULL;
            node = n;
        } else return node;
    }
}

static jnode *parse_unary(jparser *P, bool with_filter) {
    if (!enter(P)) return NULL;
    jtok *t = cur(P);
    jnode *node;
    if (tok_is(t, T_OP, "-") || tok_is(t, T_OP, "+")) {
        adv(P);
        jnode *x = parse_unary(P, false);
        if (!x || !(node = mk(P, tok_is(t, T_OP, "-") ? N_NEG : N_POS, t))) return NULL;
        node->a = x;
    } else if (!(node = parse_primary(P))) return NULL;
    if (!(node = parse_postfix(P, node))) return NULL;
    if (with_filter && !(node = parse_filter_expr(P, node))) return NULL;
    leave(P);
    return node;
}

static jnode *mk_bin(jparser *P, int op, jtok *t, jnode *a, jnode *b) {
    jnode *n = mk(P, N_BIN, t);
    if (!n) return NULL;
    n->op = (uint16_t)op; n->a = a; n->b = b;
    return n;
}

static jnode *parse_pow(jparser *P) {
    jnode *l = parse_unary(P, true);
    while (l && is_op(P, "**")) {
        jtok *t = cur(P); adv(P);
        jnode *r = parse_unary(P, true);
        l = r ? mk_bin(P, OP_POW, t, l, r) : NULL;
    }
    return l;
}

static jnode *parse_math2(jparser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        if (!l) return NULL;
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FLOORDIV : is_op(P, "%") ? OP_MOD : 0;
        if (!op) return l;
        jtok *t = cur(P); adv(P);
        jnode *r = parse_pow(P);
        l = r ? mk_bin(P, op, t, l, r) : NULL;
    }
}

static jnode *parse_concat(jparser *P) {
    jtok *t = cur(P);
    jnode *first = parse_math2(P);
    if (!first || !is_op(P, "~")) return first;
    nlist it = {0};
    if (!nl_push(P, &it, first)) return NULL;
    while (skip_op(P, "~")) {
        jnode *x = parse_math2(P);
        if (!x || !nl_push(P, &it, x)) return NULL;
    }
    jnode *n = mk(P, N_CONCAT, t);
    if (n) { n->v = it.v; n->nv = it.n; }
    return n;
}

static jnode *parse_math1(jparser *P) {
    jnode *l = parse_concat(P);
    for (;;) {
        if (!l) return NULL;
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : 0;
        if (!op) return l;
        jtok *t = cur(P); adv(P);
        jnode *r = parse_concat(P);
        l = r ? mk_bin(P, op, t, l, r) : NULL;
    }
}

static jnode *parse_compare(jparser *P) {
    jtok *t = cur(P);
    jnode *e = parse_math1(P);
    if (!e) return NULL;
    nlist ops = {0}; vlist kinds = {0};
    for (;;) {
        int op = 0;
        if (is_op(P, "==")) op = OP_EQ; else if (is_op(P, "!=")) op = OP_NE;
        else if (is_op(P, "<")) op = OP_LT; else if (is_op(P, "<=")) op = OP_LE;
        else if (is_op(P, ">")) op = OP_GT; else if (is_op(P, ">=")) op = OP_GE;
        else if (is_name(P, "in")) op = OP_IN;
        else if (is_name(P, "not") && tok_is(peek(P, 1), T_NAME, "in")) { op = OP_NOTIN; adv(P); }
        if (!op) break;
        adv(P);
        jnode *r = parse_math1(P);
        if (!r || !nl_push(P, &ops, r) || !vl_push(P, &kinds, jv_int(op))) return NULL;
    }
    if (!ops.n) return e;
    jnode *n = mk(P, N_CMP, t);
    if (!n) return NULL;
    n->a = e; n->v = ops.v; n->nv = ops.n; n->names = kinds.v; n->nnames = kinds.n;
    return n;
}

static jnode *parse_not(jparser *P) {
    if (is_name(P, "not")) {
        jtok *t = cur(P); adv(P);
        if (!enter(P)) return NULL;
        jnode *x = parse_not(P);
        leave(P);
        jnode *n = x ? mk(P, N_NOT, t) : NULL;
        if (n) n->a = x;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(jparser *P) {
    jnode *l = parse_not(P);
    while (l && is_name(P, "and")) {
        jtok *t = cur(P); adv(P);
        jnode *r = parse_not(P);
        jnode *n = r ? mk(P, N_AND, t) : NULL;
        if (n) { n->a = l; n->b = r; }
        l = n;
    }
    return l;
}

static jnode *parse_or(jparser *P) {
    jnode *l = parse_and(P);
    while (l && is_name(P, "or")) {
        jtok *t = cur(P); adv(P);
        jnode *r = parse_and(P);
        jnode *n = r ? mk(P, N_OR, t) : NULL;
        if (n) { n->a = l; n->b = r; }
        l = n;
    }
    return l;
}

/* condexpr: N_COND a=cond b=then c=else (NULL = undefined) */
static jnode *parse_condexpr(jparser *P) {
    if (!enter(P)) return NULL;
    jnode *e = parse_or(P);
    while (e && is_name(P, "if")) {
        jtok *t = cur(P); adv(P);
        jnode *c = parse_or(P), *el = NULL;
        if (!c) return NULL;
        if (skip_name(P, "else") && !(el = parse_condexpr(P))) return NULL;
        jnode *n = mk(P, N_COND, t);
        if (!n) return NULL;
        n->a = c; n->b = e; n->c = el;
        e = n;
    }
    leave(P);
    return e;
}

static jnode *parse_expr(jparser *P) { return parse_condexpr(P); }

/* A tuple or single expression. simplified: only names/literals (for-targets). */
static jnode *parse_tuple(jparser *P, bool simplified, bool with_condexpr, bool explicit_parens) {
    jtok *t = cur(P);
    nlist it = {0};
    bool is_tuple = false;
    for (;;) {
        if (it.n && !skip_op(P, ",")) break;
        if (it.n) is_tuple = true;
        if (is_op(P, ")") || cur(P)->type == T_VAR_END || cur(P)->type == T_BLOCK_END ||
            (it.n && (is_name(P, "in") || is_op(P, "=")))) break;
        jnode *x;
        if (simplified) {
            jtok *nt = cur(P);
            if (nt->type == T_NAME) {
                adv(P);
                if (!(x = mk(P, N_NAME, nt))) return NULL;
                x->lit = jv_strn(nt->s, nt->n);
                if (is_op(P, ".") && peek(P, 1)->type == T_NAME) {   /* ns.attr target */
                    adv(P);
                    jnode *a = mk(P, N_ATTR, nt);
                    if (!a) return NULL;
                    a->a = x; a->lit = jv_strn(cur(P)->s, cur(P)->n);
                    adv(P);
                    x = a;
                }
            } else if (skip_op(P, "(")) {
                if (!(x = parse_tuple(P, true, false, true)) || !expect_op(P, ")")) return NULL;
            } else { char b[64]; perr_at(P, nt->off, "expected a name, got %s", tok_desc(nt, b, sizeof b)); return NULL; }
        } else x = with_condexpr ? parse_expr(P) : parse_or(P);
        if (!x || !nl_push(P, &it, x)) return NULL;
    }
    if (!is_tuple) {
        if (it.n == 1) return it.v[0];
        if (!explicit_parens) { char b[64]; perr_at(P, cur(P)->off, "expected an expression, got %s", tok_desc(cur(P), b, sizeof b)); return NULL; }
    }
    jnode *n = mk(P, N_TUPLE, t);
    if (n) { n->v = it.v; n->nv = it.n; }
    return n;
}

/* ---- statements ----------------------------------------------------------------------------- */
static jnode *parse_body(jparser *P, const char *const *ends, const char **which);

static bool expect_block_end(jparser *P) {
    if (cur(P)->type == T_BLOCK_END) { adv(P); return true; }
    char b[64];
    return perr_at(P, cur(P)->off, "expected end of statement block, got %s", tok_desc(cur(P), b, sizeof b));
}

static jnode *parse_if(jparser *P, jtok *t) {
    jnode *n = mk(P, N_IF, t);
    /* jinja2 parses the test with with_condexpr=False: `{% if a if b else c %}` is an error */
    if (!n || !(n->a = parse_tuple(P, false, false, false)) || !expect_block_end(P)) return NULL;
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    const char *which = NULL;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    if (!strcmp(which, "elif")) { jtok *et = cur(P); adv(P); if (!(n->c = parse_if(P, et))) return NULL; return n; }
    if (!strcmp(which, "else")) {
        adv(P);
        if (!expect_block_end(P)) return NULL;
        static const char *const ends2[] = { "endif", NULL };
        if (!(n->c = parse_body(P, ends2, &which))) return NULL;
    }
    adv(P);
    return expect_block_end(P) ? n : NULL;
}

/* N_FOR: a target, b iter, c filter, d body, w[0] else body, flag recursive */
static jnode *parse_for(jparser *P, jtok *t) {
    jnode *n = mk(P, N_FOR, t);
    if (!n || !(n->a = parse_tuple(P, true, false, false))) return NULL;
    if (!skip_name(P, "in")) { char b[64]; perr_at(P, cur(P)->off, "expected 'in', got %s", tok_desc(cur(P), b, sizeof b)); return NULL; }
    if (!(n->b = parse_tuple(P, false, false, false))) return NULL;
    if (skip_name(P, "if") && !(n->c = parse_expr(P))) return NULL;
    n->flag = skip_name(P, "recursive");
    if (!expect_block_end(P)) return NULL;
    static const char *const ends[] = { "endfor", "else", NULL };
    const char *which = NULL;
    if (!(n->d = parse_body(P, ends, &which))) return NULL;
    if (!strcmp(which, "else")) {
        adv(P);
        if (!expect_block_end(P)) return NULL;
        static const char *const ends2[] = { "endfor", NULL };
        n->w = jarena_alloc(P->ar, sizeof(jnode *));
        if (!n->w) { perr_at(P, t->off, "out of memory"); return NULL; }
        if (!(n->w[0] = parse_body(P, ends2, &which))) return NULL;
        n->nw = 1;
    }
    adv(P);
    return expect_block_end(P) ? n : NULL;
}

/* N_SET: a target, b value.  N_SETBLOCK: a target, b body, c filter chain (innermost a = NULL). */
static jnode *parse_set(jparser *P, jtok *t) {
    jnode *target = parse_tuple(P, true, false, false);
    if (!target) return NULL;
    if (skip_op(P, "=")) {
        jnode *n = mk(P, N_SET, t);
        if (!n || !(n->b = parse_tuple(P, false, true, false)) || !expect_block_end(P)) return NULL;
        n->a = target;
        return n;
    }
    jnode *n = mk(P, N_SETBLOCK, t);
    if (!n) return NULL;
    n->a = target;
    if (is_op(P, "|") && !(n->c = parse_filter(P, NULL, false))) return NULL;
    if (!expect_block_end(P)) return NULL;
    static const char *const ends[] = { "endset", NULL };
    const char *which;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    adv(P);
    return expect_block_end(P) ? n : NULL;
}

/* Macro/caller signature: names params, w defaults (NULL = required). */
static bool parse_signature(jparser *P, jnode *n) {
    if (!expect_op(P, "(")) return false;
    vlist names = {0}; nlist defs = {0};
    while (!is_op(P, ")")) {
        if (names.n && !expect_op(P, ",")) return false;
        if (is_op(P, ")")) break;
        jtok *nt = cur(P);
        char b[64];
        if (nt->type != T_NAME) return perr_at(P, nt->off, "expected parameter name, got %s", tok_desc(nt, b, sizeof b));
        adv(P);
        jnode *def = NULL;
        if (skip_op(P, "=") && !(def = parse_expr(P))) return false;
        if (!vl_push(P, &names, jv_strn(nt->s, nt->n)) || !nl_push(P, &defs, def)) return false;
    }
    adv(P);
    n->names = names.v; n->nnames = names.n; n->w = defs.v; n->nw = defs.n;
    return true;
}

/* N_MACRO: lit name, names/w signature, b body */
static jnode *parse_macro(jparser *P, jtok *t) {
    jnode *n = mk(P, N_MACRO, t);
    if (!n) return NULL;
    jtok *nt = cur(P);
    char b[64];
    if (nt->type != T_NAME) { perr_at(P, nt->off, "expected macro name, got %s", tok_desc(nt, b, sizeof b)); return NULL; }
    n->lit = jv_strn(nt->s, nt->n);
    adv(P);
    if (!parse_signature(P, n) || !expect_block_end(P)) return NULL;
    static const char *const ends[] = { "endmacro", NULL };
    const char *which;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    adv(P);
    if (cur(P)->type == T_NAME) adv(P);   /* {% endmacro name %} */
    return expect_block_end(P) ? n : NULL;
}

/* N_CALLBLOCK: a call expression, names/w caller signature, b body */
static jnode *parse_callblock(jparser *P, jtok *t) {
    jnode *n = mk(P, N_CALLBLOCK, t);
    if (!n) return NULL;
    if (is_op(P, "(") && !parse_signature(P, n)) return NULL;
    if (!(n->a = parse_expr(P))) return NULL;
    if (n->a->kind != N_CALL) { perr_at(P, t->off, "expected a call after {%% call %%}"); return NULL; }
    if (!expect_block_end(P)) return NULL;
    static const char *const ends[] = { "endcall", NULL };
    const char *which;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    adv(P);
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_filterblock(jparser *P, jtok *t) {
    jnode *n = mk(P, N_FILTERBLOCK, t);
    if (!n || !(n->a = parse_filter(P, NULL, true)) || !expect_block_end(P)) return NULL;
    static const char *const ends[] = { "endfilter", NULL };
    const char *which;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    adv(P);
    return expect_block_end(P) ? n : NULL;
}

/* N_WITH: v targets (N_NAME), w values, b body */
static jnode *parse_with(jparser *P, jtok *t) {
    jnode *n = mk(P, N_WITH, t);
    nlist tg = {0}, vals = {0};
    if (!n) return NULL;
    while (cur(P)->type != T_BLOCK_END) {
        if (tg.n && !expect_op(P, ",")) return NULL;
        jtok *nt = cur(P);
        char b[64];
        if (nt->type != T_NAME) { perr_at(P, nt->off, "expected a name, got %s", tok_desc(nt, b, sizeof b)); return NULL; }
        adv(P);
        jnode *x = mk(P, N_NAME, nt);
        if (!x) return NULL;
        x->lit = jv_strn(nt->s, nt->n);
        if (!expect_op(P, "=")) return NULL;
        jnode *v = parse_expr(P);
        if (!v || !nl_push(P, &tg, x) || !nl_push(P, &vals, v)) return NULL;
    }
    adv(P);
    static const char *const ends[] = { "endwith", NULL };
    const char *which;
    if (!(n->b = parse_body(P, ends, &which))) return NULL;
    adv(P);
    n->v = tg.v; n->nv = tg.n; n->w = vals.v; n->nw = vals.n;
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_statement(jparser *P) {
    jtok *bt = cur(P);   /* BLOCK_BEGIN */
    adv(P);
    jtok *t = cur(P);
    char b[64];
    if (t->type != T_NAME) { perr_at(P, t->off, "tag name expected, got %s", tok_desc(t, b, sizeof b)); return NULL; }
    adv(P);
    if (!enter(P)) return NULL;
    jnode *n = NULL;
    if (tok_is(t, T_NAME, "if")) n = parse_if(P, t);
    else if (tok_is(t, T_NAME, "for")) n = parse_for(P, t);
    else if (tok_is(t, T_NAME, "set")) n = parse_set(P, t);
    else if (tok_is(t, T_NAME, "macro")) n = parse_macro(P, t);
    else if (tok_is(t, T_NAME, "call")) n = parse_callblock(P, t);
    else if (tok_is(t, T_NAME, "filter")) n = parse_filterblock(P, t);
    else if (tok_is(t, T_NAME, "with")) n = parse_with(P, t);
    else if (tok_is(t, T_NAME, "break") || tok_is(t, T_NAME, "continue")) {
        n = mk(P, tok_is(t, T_NAME, "break") ? N_BREAK : N_CONTINUE, t);
        if (n && !expect_block_end(P)) n = NULL;
    } else if (tok_is(t, T_NAME, "generation")) {
        /* transformers' {% generation %} marks assistant spans for masks; it renders its body */
        static const char *const ends[] = { "endgeneration", NULL };
        const char *which;
        if (expect_block_end(P) && (n = parse_body(P, ends, &which))) { adv(P); if (!expect_block_end(P)) n = NULL; }
    } else {
        perr_at(P, t->off, "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
        (void)bt;
    }
    leave(P);
    return n;
}

/* Parses statements until a block tag named in ends (NULL-terminated; NULL ends = top level).
 * Leaves the cursor on that tag's name and sets *which. */
static jnode *parse_body(jparser *P, const char *const *ends, const char **which) {
    jtok *t0 = cur(P);
    jnode *body = mk(P, N_BODY, t0);
    nlist st = {0};
    if (!body) return NULL;
    for (;;) {
        jtok *t = cur(P);
        if (t->type == T_EOF) {
            if (ends) {
                perr_at(P, t->off, "unexpected end of template: expected '%s'", ends[0]);
                return NULL;
            }
            break;
        }
        if (t->type == T_TEXT) {
            jnode *n = mk(P, N_TEXT, t);
            if (!n) return NULL;
            n->lit = jv_strn(t->s, t->n);
            if (!nl_push(P, &st, n)) return NULL;
            adv(P);
        } else if (t->type == T_VAR_BEGIN) {
            adv(P);
            jnode *n = mk(P, N_OUTPUT, t);
            if (!n || !(n->a = parse_tuple(P, false, true, false))) return NULL;
            if (cur(P)->type != T_VAR_END) {
                char b[64];
                perr_at(P, cur(P)->off, "expected end of print statement, got %s", tok_desc(cur(P), b, sizeof b));
                return NULL;
            }
            adv(P);
            if (!nl_push(P, &st, n)) return NULL;
        } else if (t->type == T_BLOCK_BEGIN) {
            jtok *nt = peek(P, 1);
            if (nt->type == T_NAME && ends) {
                for (const char *const *e = ends; *e; e++)
                    if (tok_is(nt, T_NAME, *e)) { adv(P); *which = *e; goto done; }
            }
            if (nt->type == T_NAME && nt->n >= 3 && memcmp(nt->s, "end", 3) == 0 &&
                !tok_is(nt, T_NAME, "endgeneration")) {
                perr_at(P, nt->off, "unexpected '%.*s'%s%s", (int)nt->n, nt->s,
                        ends ? ", expected " : "", ends ? ends[0] : "");
                return NULL;
            }
            if (nt->type == T_NAME && (tok_is(nt, T_NAME, "elif") || tok_is(nt, T_NAME, "else"))) {
                perr_at(P, nt->off, "unexpected '%.*s'", (int)nt->n, nt->s);
                return NULL;
            }
            jnode *n = parse_statement(P);
            if (!n || !nl_push(P, &st, n)) return NULL;
        } else {
            char b[64];
            perr_at(P, t->off, "unexpected %s", tok_desc(t, b, sizeof b));
            return NULL;
        }
    }
done:
    body->v = st.v; body->nv = st.n;
    return body;
}

/* ---- public --------------------------------------------------------------------------------- */
void jinja_parse_opts_default(jinja_parse_opts *o) {
    memset(o, 0, sizeof *o);
    o->trim_blocks = 1; o->lstrip_blocks = 1; o->keep_trailing_newline = 0; o->max_depth = 256;
}

jinja_template *jinja_parse(const char *src, size_t len, const jinja_parse_opts *opts,
                            int *status, jinja_pos *pos, char *err, size_t err_size) {
    jinja_parse_opts o;
    if (opts) { o = *opts; if (o.max_depth <= 0) o.max_depth = 256; }
    else jinja_parse_opts_default(&o);
    if (err && err_size) err[0] = 0;
    if (pos) memset(pos, 0, sizeof *pos);
    if (!src && len) {
        if (status) *status = JINJA_EINVAL;
        if (err && err_size) snprintf(err, err_size, "template source is NULL");
        return NULL;
    }
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        if (status) *status = JINJA_ENOMEM;
        if (err && err_size) snprintf(err, err_size, "out of memory");
        return NULL;
    }
    jarena_init(&t->arena, 0);
    jparser P = { .ar = &t->arena, .o = &o, .err = err, .err_size = err_size, .line_no = 1 };
    bool ok = normalize_source(&P, src ? src : "", len) && lex(&P);
    if (ok) {
        t->root = parse_body(&P, NULL, NULL);
        ok = t->root && !P.status;
    }
    free(P.toks);
    if (!ok) {
        if (status) *status = P.status ? P.status : JINJA_ENOMEM;
        if (pos) *pos = P.pos;
        jinja_destroy(t);
        return NULL;
    }
    if (status) *status = JINJA_OK;
    return t;
}

void jinja_destroy(jinja_template *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t);
}

const char *jinja_strerror(int status) {
    switch (status) {
    case JINJA_OK: return "ok";
    case JINJA_ESYNTAX: return "template syntax error";
    case JINJA_ERENDER: return "template render error";
    case JINJA_ERAISE: return "template raised an exception";
    case JINJA_ELIMIT: return "template sandbox limit exceeded";
    case JINJA_EINVAL: return "invalid argument";
    case JINJA_ENOMEM: return "out of memory";
    default: return "unknown error";
    }
}
