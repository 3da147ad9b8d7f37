/* jinja_render.c — the tree-walking evaluator: scoping, statements, expressions, macros.
 *
 * Scoping follows Jinja2 (not a naive global table): a for-loop body and a macro body get their own
 * frame, so `{% set %}` inside them does not leak out (the gpt-oss template depends on this: its
 * `has_object_variants` flag set in a loop stays false after it); a loop's frame is reset at every
 * iteration, as Jinja2's generated code does; `if` opens no scope; namespace() objects are the way
 * to carry state out, and their attributes are assigned in place. Name lookup walks from the current
 * frame to the frame the macro was defined in and up to the root (the context variables), then the
 * globals (range, namespace, raise_exception, strftime_now, ...). */
#include "router/template/jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and limits ---------------------------------------------------------------------- */
jv jr_fail(jrender *r, int status, int line, const char *fmt, ...) {
    if (r->status) return jv_undef();
    r->status = status;
    if (r->err && r->err_size) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (status == JINJA_ERAISE || line <= 0) snprintf(r->err, r->err_size, "%s", msg);
        else snprintf(r->err, r->err_size, "%s (template line %d)", msg, line);
    }
    return jv_undef();
}

bool jr_step(jrender *r, int line) {
    if (++r->steps > r->opts->max_steps) {
        jr_fail(r, JINJA_ELIMIT, line, "template exceeded the step limit (%llu loop iterations and calls)",
                (unsigned long long)r->opts->max_steps);
        return false;
    }
    return true;
}

bool jr_scan(jrender *r, size_t n, int line) {
    r->steps += n >> 4;
    return jr_step(r, line);
}

jv jr_undef(jrender *r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    jv u = jv_undef();
    u.u.s = jarena_strndup(r->ar, msg, (size_t)n);
    u.n = u.u.s ? (uint32_t)n : 0;
    return u;
}

jv jr_undef_name(const char *s, size_t n) {
    jv u = jv_undef();
    u.flags = JU_NAME; u.u.s = s; u.n = (uint32_t)n;
    return u;
}

jv jr_undef_attr(jv obj, const char *s, size_t n) {
    jv u = jv_undef();
    u.flags = JU_ATTR; u.u.s = s; u.n = (uint32_t)n;
    u.aux = (uint16_t)(obj.t | (obj.t == JT_LIST ? obj.u.l->kind << 8 : 0));
    return u;
}

static const char *type_repr(uint16_t aux) {
    int t = aux & 0xFF, kind = aux >> 8;
    switch (t) {
    case JT_NONE: return "None";
    case JT_DICT: return "dict object";
    case JT_LIST: return kind == JL_TUPLE ? "tuple object" : kind == JL_GEN ? "generator object" : "list object";
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

const char *jr_undef_message(jv u, char *buf, size_t size) {
    const char *s = u.u.s ? u.u.s : "";
    if (u.flags & JU_NAME) snprintf(buf, size, "'%.*s' is undefined", (int)u.n, s);
    else if (u.flags & JU_ATTR) snprintf(buf, size, "'%s' has no attribute '%.*s'", type_repr(u.aux), (int)u.n, s);
    else if (u.u.s) snprintf(buf, size, "%.*s", (int)u.n, s);
    else snprintf(buf, size, "value is undefined");
    return buf;
}

jv jr_undef_error(jrender *r, jv u, int line) {
    char msg[600];
    jr_undef_message(u, msg, sizeof msg);
    if (u.flags & JU_UNSAFE) return jr_fail(r, JINJA_ERENDER, line, "SecurityError: %s", msg);
    return jr_fail(r, JINJA_ERENDER, line, "UndefinedError: %s", msg);
}

static bool oom(jrender *r, int line) {
    if (r->ar->exhausted) {
        jr_fail(r, JINJA_ELIMIT, line, "template exceeded the memory limit (%zu bytes)", r->opts->max_memory);
        return true;
    }
    return false;
}

/* ---- frames --------------------------------------------------------------------------------- */
static jframe *frame_new(jrender *r, jframe *parent) {
    jframe *f = jarena_alloc(r->ar, sizeof *f);
    if (f) f->parent = parent;
    return f;
}

static jv *frame_find_local(jframe *f, const char *s, size_t n) {
    for (size_t i = f->n; i-- > 0;)
        if (f->lens[i] == n && memcmp(f->names[i], s, n) == 0) return &f->vals[i];
    return NULL;
}

static bool frame_set(jrender *r, jframe *f, const char *s, size_t n, jv v) {
    jv *slot = frame_find_local(f, s, n);
    if (slot) { *slot = v; return true; }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        const char **nm = jarena_alloc(r->ar, cap * sizeof *nm);
        uint32_t *ln = jarena_alloc(r->ar, cap * sizeof *ln);
        jv *vs = jarena_alloc(r->ar, cap * sizeof *vs);
        if (!nm || !ln || !vs) return false;
        if (f->n) {
            memcpy(nm, f->names, f->n * sizeof *nm);
            memcpy(ln, f->lens, f->n * sizeof *ln);
            memcpy(vs, f->vals, f->n * sizeof *vs);
        }
        f->names = nm; f->lens = ln; f->vals = vs; f->cap = cap;
    }
    f->names[f->n] = s; f->lens[f->n] = (uint32_t)n; f->vals[f->n] = v; f->n++;
    return true;
}

static jv lookup(jrender *r, jframe *f, jv name) {
    for (; f; f = f->parent) {
        jv *v = frame_find_local(f, name.u.s, name.n);
        if (v) return *v;
        if (f->dict && (v = jdict_get_str(f->dict, name.u.s, name.n))) return *v;
    }
    jv g = jb_global(r, name.u.s, name.n);
    if (g.t != JT_UNDEF) return g;
    return jr_undef_name(name.u.s, name.n);
}

/* ---- expressions ---------------------------------------------------------------------------- */
static jv eval(jrender *r, const jnode *n, jframe *f);
static void exec_body(jrender *r, const jnode *n, jframe *f);

static bool out_put(jrender *r, const char *s, size_t n, int line) {
    if (r->out->n + n > r->opts->max_output) {
        jr_fail(r, JINJA_ELIMIT, line, "template output exceeded the limit of %zu bytes", r->opts->max_output);
        return false;
    }
    jbuf_put(r->out, s, n);
    if (r->out->oom) { jr_fail(r, JINJA_ENOMEM, line, "out of memory"); return false; }
    return true;
}

jv jr_type_error(jrender *r, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return jr_fail(r, JINJA_ERENDER, line, "TypeError: %s", msg);
}

/* Fails if v is undefined (used by operators that Jinja's Undefined refuses). */
static bool check_defined(jrender *r, jv v, int line) {
    if (v.t != JT_UNDEF) return true;
    jr_undef_error(r, v, line);
    return false;
}

static jv str_concat(jrender *r, jv a, jv b, int line) {
    size_t n = (size_t)a.n + b.n;
    if (n > r->opts->max_output) return jr_fail(r, JINJA_ELIMIT, line, "string longer than the output limit (%zu bytes)", r->opts->max_output);
    char *p = jarena_alloc(r->ar, n + 1);
    if (!p) { oom(r, line); return jv_undef(); }
    if (a.n) memcpy(p, a.u.s, a.n);
    if (b.n) memcpy(p + a.n, b.u.s, b.n);
    return jv_strn(p, n);
}

static jv repeat(jrender *r, jv seq, int64_t times, int line) {
    if (times < 0) times = 0;
    size_t unit = seq.t == JT_STR ? seq.n : seq.u.l->n;
    if (unit && (uint64_t)times > r->opts->max_output / unit)
        return jr_fail(r, JINJA_ELIMIT, line, "repetition result exceeds the output limit (%zu)", r->opts->max_output);
    if (seq.t == JT_STR) {
        size_t n = unit * (size_t)times;
        char *p = jarena_alloc(r->ar, n + 1);
        if (!p) { oom(r, line); return jv_undef(); }
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * unit, seq.u.s, unit);
        return jv_strn(p, n);
    }
    jlist *l = jlist_new(r->ar, unit * (size_t)times, seq.u.l->kind);
    if (!l) { oom(r, line); return jv_undef(); }
    for (int64_t i = 0; i < times; i++) for (size_t k = 0; k < unit; k++) l->it[l->n++] = seq.u.l->it[k];
    return jv_list(l);
}

static const char *op_sym(int op) {
    static const char *s[] = { "", "+", "-", "*", "/", "//", "%", "**" };
    return op >= OP_ADD && op <= OP_POW ? s[op] : "?";
}

/* Python integers are unbounded; ours are 64-bit, and a wrong number is worse than an error. */
static jv int_overflow(jrender *r, int line) {
    return jr_fail(r, JINJA_ELIMIT, line, "integer result does not fit in 64 bits (this engine's integers are 64-bit)");
}

static jv binop(jrender *r, int op, jv a, jv b, int line) {
    if (!check_defined(r, a, line) || !check_defined(r, b, line)) return jv_undef();
    if (jv_is_number(a) && jv_is_number(b)) {
        bool fl = a.t == JT_FLOAT || b.t == JT_FLOAT;
        double x = jv_num(a), y = jv_num(b);
        int64_t i = a.t == JT_FLOAT ? 0 : a.u.i, j = b.t == JT_FLOAT ? 0 : b.u.i;
        switch (op) {
        case OP_ADD: case OP_SUB: case OP_MUL: {
            if (fl) return jv_float(op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y);
            int64_t res;
            bool ovf = op == OP_ADD ? __builtin_add_overflow(i, j, &res) : op == OP_SUB ? __builtin_sub_overflow(i, j, &res)
                                                                         : __builtin_mul_overflow(i, j, &res);
            if (ovf) return int_overflow(r, line);
            return jv_int(res);
        }
        case OP_DIV:
            if (y == 0) return jr_fail(r, JINJA_ERENDER, line, "ZeroDivisionError: division by zero");
            return jv_float(x / y);
        case OP_FLOORDIV:
            if (y == 0) return jr_fail(r, JINJA_ERENDER, line, "ZeroDivisionError: integer division or modulo by zero");
            if (fl) return jv_float(floor(x / y));
            if (i == INT64_MIN && j == -1) return jv_int(INT64_MIN);
            { int64_t q = i / j; if ((i % j != 0) && ((i < 0) != (j < 0))) q--; return jv_int(q); }
        case OP_MOD:
            if (y == 0) return jr_fail(r, JINJA_ERENDER, line, "ZeroDivisionError: integer division or modulo by zero");
            if (fl) { double m = fmod(x, y); if (m != 0 && ((m < 0) != (y < 0))) m += y; return jv_float(m); }
            if (j == -1) return jv_int(0);
            { int64_t m = i % j; if (m != 0 && ((m < 0) != (j < 0))) m += j; return jv_int(m); }
        case OP_POW:
            if (!fl && j >= 0) {
                if (i == 0 || i == 1) return jv_int(j == 0 ? 1 : i);
                if (i == -1) return jv_int((j & 1) ? -1 : 1);
                int64_t res = 1;
                for (int64_t k = 0; k < j; k++)
                    if (__builtin_mul_overflow(res, i, &res)) return int_overflow(r, line);
                return jv_int(res);
            }
            return jv_float(pow(x, y));
        }
    }
    if (op == OP_ADD) {
        if (a.t == JT_STR && b.t == JT_STR) {
            /* Markup + str escapes the str (markupsafe), and the result stays Markup */
            if ((a.flags ^ b.flags) & JS_SAFE) {
                if (!(a.flags & JS_SAFE)) a = jb_escape(r, a, line); else b = jb_escape(r, b, line);
                jv s = str_concat(r, a, b, line);
                s.flags |= JS_SAFE;
                return s;
            }
            jv s = str_concat(r, a, b, line);
            s.flags |= a.flags & JS_SAFE;
            return s;
        }
        if (a.t == JT_LIST && b.t == JT_LIST && a.u.l->kind == b.u.l->kind && a.u.l->kind != JL_GEN) {
            jlist *l = jlist_new(r->ar, a.u.l->n + b.u.l->n, a.u.l->kind);
            if (!l) { oom(r, line); return jv_undef(); }
            for (size_t k = 0; k < a.u.l->n; k++) l->it[l->n++] = a.u.l->it[k];
            for (size_t k = 0; k < b.u.l->n; k++) l->it[l->n++] = b.u.l->it[k];
            return jv_list(l);
        }
        if (a.t == JT_STR || (a.t == JT_LIST && a.u.l->kind != JL_GEN))
            return jr_type_error(r, line, "can only concatenate %s (not \"%s\") to %s", jv_type_name(a), jv_type_name(b), jv_type_name(a));
    }
    if (op == OP_MUL) {
        if ((a.t == JT_STR || (a.t == JT_LIST && a.u.l->kind != JL_GEN)) && (b.t == JT_INT || b.t == JT_BOOL)) return repeat(r, a, b.u.i, line);
        if ((b.t == JT_STR || (b.t == JT_LIST && b.u.l->kind != JL_GEN)) && (a.t == JT_INT || a.t == JT_BOOL)) return repeat(r, b, a.u.i, line);
    }
    if (op == OP_MOD && a.t == JT_STR) {
        /* Python: a tuple is the argument list; a list or dict is one argument that may go unused */
        jargs fa = { &b, 1, NULL, NULL, 0 };
        bool lenient = (b.t == JT_LIST && b.u.l->kind != JL_TUPLE) || b.t == JT_DICT;
        if (b.t == JT_LIST && b.u.l->kind == JL_TUPLE) { fa.args = b.u.l->it; fa.nargs = b.u.l->n; }
        return jb_percent_format(r, a, &fa, !lenient, line);
    }
    return jr_type_error(r, line, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_type_name(a), jv_type_name(b));
}

static int contains(jrender *r, jv needle, jv hay, int line) {
    switch (hay.t) {
    case JT_UNDEF: return 0;
    case JT_STR:
        if (needle.t == JT_UNDEF) { jr_undef_error(r, needle, line); return -1; }
        if (needle.t != JT_STR) { jr_type_error(r, line, "'in <string>' requires string as left operand, not %s", jv_type_name(needle)); return -1; }
        if (!needle.n) return 1;
        if (needle.n > hay.n) return 0;
        return memmem(hay.u.s, hay.n, needle.u.s, needle.n) != NULL;
    case JT_LIST:
        if (hay.u.l->n > 64 && !jr_scan(r, hay.u.l->n, line)) return -1;
        for (size_t i = 0; i < hay.u.l->n; i++) if (jv_equal(hay.u.l->it[i], needle)) return 1;
        return 0;
    case JT_DICT:
        if ((needle.t == JT_LIST && needle.u.l->kind != JL_TUPLE) || needle.t == JT_DICT || needle.t == JT_NS) {
            jr_type_error(r, line, "unhashable type: '%s'", jv_type_name(needle));
            return -1;
        }
        return jdict_get(hay.u.d, needle) != NULL;
    default:
        jr_type_error(r, line, "argument of type '%s' is not iterable", jv_type_name(hay));
        return -1;
    }
}

static jv compare(jrender *r, const jnode *n, jframe *f) {
    jv left = eval(r, n->a, f);
    if (jr_failed(r)) return jv_undef();
    for (size_t i = 0; i < n->nv; i++) {
        jv right = eval(r, n->v[i], f);
        if (jr_failed(r)) return jv_undef();
        int op = (int)n->names[i].u.i;
        bool res;
        if (op == OP_EQ) res = jv_equal(left, right);
        else if (op == OP_NE) res = !jv_equal(left, right);
        else if (op == OP_IN || op == OP_NOTIN) {
            int c = contains(r, left, right, n->line);
            if (c < 0) return jv_undef();
            res = op == OP_IN ? c : !c;
        } else {
            if (!check_defined(r, left, n->line) || !check_defined(r, right, n->line)) return jv_undef();
            int c;
            if (!jv_order(left, right, &c)) {
                static const char *ops[] = { "<", "<=", ">", ">=" };
                return jr_type_error(r, n->line, "'%s' not supported between instances of '%s' and '%s'",
                                  ops[op - OP_LT], jv_type_name(left), jv_type_name(right));
            }
            res = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
        }
        if (!res) return jv_bool(false);
        left = right;
    }
    return jv_bool(true);
}

/* Python slice semantics over n elements. Fills indices via callback-free arithmetic. */
static bool slice_bounds(jrender *r, jv s0, jv s1, jv s2, int64_t n, int64_t *start, int64_t *stop, int64_t *step, int line) {
    int64_t st = 1;
    if (s2.t != JT_NONE && s2.t != JT_UNDEF) {
        if (s2.t != JT_INT && s2.t != JT_BOOL) { jr_type_error(r, line, "slice indices must be integers or None"); return false; }
        st = s2.u.i;
        if (st == 0) { jr_fail(r, JINJA_ERENDER, line, "ValueError: slice step cannot be zero"); return false; }
    }
    int64_t lo, hi;
    jv sv[2] = { s0, s1 };
    int64_t out[2];
    for (int k = 0; k < 2; k++) {
        jv v = sv[k];
        if (v.t == JT_NONE || v.t == JT_UNDEF) {
            out[k] = k == 0 ? (st > 0 ? 0 : n - 1) : (st > 0 ? n : -1);
            continue;
        }
        if (v.t != JT_INT && v.t != JT_BOOL) { jr_type_error(r, line, "slice indices must be integers or None"); return false; }
        int64_t x = v.u.i;
        if (x < 0) { x += n; if (x < 0) x = st > 0 ? 0 : -1; }
        else if (x >= n) x = st > 0 ? n : n - 1;
        out[k] = x;
    }
    lo = out[0]; hi = out[1];
    *start = lo; *stop = hi; *step = st;
    return true;
}

static jv do_slice(jrender *r, jv obj, const jnode *sl, jframe *f, int line) {
    jv s0 = sl->a ? eval(r, sl->a, f) : jv_none();
    jv s1 = sl->b ? eval(r, sl->b, f) : jv_none();
    jv s2 = sl->c ? eval(r, sl->c, f) : jv_none();
    if (jr_failed(r)) return jv_undef();
    if (obj.t == JT_UNDEF) return jr_undef_error(r, obj, line);
    int64_t start, stop, step;
    if (obj.t == JT_LIST && obj.u.l->kind != JL_GEN) {
        const jlist *l = obj.u.l;
        if (!slice_bounds(r, s0, s1, s2, (int64_t)l->n, &start, &stop, &step, line)) return jv_undef();
        jlist *o = jlist_new(r->ar, 0, l->kind);
        if (!o) { oom(r, line); return jv_undef(); }
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            if (!jlist_push(r->ar, o, l->it[i])) { oom(r, line); return jv_undef(); }
        return jv_list(o);
    }
    if (obj.t == JT_STR) {
        size_t cps = utf8_count(obj.u.s, obj.n);
        if (!slice_bounds(r, s0, s1, s2, (int64_t)cps, &start, &stop, &step, line)) return jv_undef();
        if (step == 1) {
            if (stop <= start) return jv_strn("", 0);
            if (cps == obj.n) return jv_strn(obj.u.s + start, (size_t)(stop - start));
            size_t a = utf8_offset(obj.u.s, obj.n, (size_t)start), b = utf8_offset(obj.u.s, obj.n, (size_t)stop);
            return jv_strn(obj.u.s + a, b - a);
        }
        jbuf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            size_t a = utf8_offset(obj.u.s, obj.n, (size_t)i), e = utf8_offset(obj.u.s, obj.n, (size_t)i + 1);
            jbuf_put(&b, obj.u.s + a, e - a);
        }
        jv res = jv_from_buf(r->ar, &b);
        jbuf_free(&b);
        return res;
    }
    /* jinja2 compiles a slice to a plain Python subscript: errors are not softened to undefined */
    return jr_type_error(r, line, "'%s' object is not subscriptable", jv_type_name(obj));
}

/* Evaluates call arguments into a (kwargs included; *args expanded). */
static bool eval_args(jrender *r, const jnode *n, jframe *f, jargs *a) {
    memset(a, 0, sizeof *a);
    size_t extra = 0;
    jv star = jv_none();
    if (n->c) {
        star = eval(r, n->c, f);
        if (jr_failed(r)) return false;
        jlist *l = jb_iter(r, star, n->line);
        if (!l) return false;
        star = jv_list(l);
        extra = l->n;
    }
    size_t np = n->nv + extra;
    jv *args = np ? jarena_alloc(r->ar, np * sizeof(jv)) : NULL;
    jv *kwv = n->nw ? jarena_alloc(r->ar, n->nw * sizeof(jv)) : NULL;
    if ((np && !args) || (n->nw && !kwv)) { oom(r, n->line); return false; }
    for (size_t i = 0; i < n->nv; i++) { args[i] = eval(r, n->v[i], f); if (jr_failed(r)) return false; }
    for (size_t i = 0; i < extra; i++) args[n->nv + i] = star.u.l->it[i];
    for (size_t i = 0; i < n->nw; i++) { kwv[i] = eval(r, n->w[i], f); if (jr_failed(r)) return false; }
    a->args = args; a->nargs = np; a->kwnames = n->names; a->kwargs = kwv; a->nkw = n->nw;
    if (n->d) {   /* **kwargs */
        jv kw = eval(r, n->d, f);
        if (jr_failed(r)) return false;
        if (kw.t != JT_DICT) { jr_type_error(r, n->line, "argument after ** must be a mapping, not %s", jv_type_name(kw)); return false; }
        size_t tot = n->nw + kw.u.d->n;
        jv *names = jarena_alloc(r->ar, (tot + 1) * sizeof(jv)), *vals = jarena_alloc(r->ar, (tot + 1) * sizeof(jv));
        if (!names || !vals) { oom(r, n->line); return false; }
        for (size_t i = 0; i < n->nw; i++) { names[i] = n->names[i]; vals[i] = kwv[i]; }
        for (size_t i = 0; i < kw.u.d->n; i++) { names[n->nw + i] = kw.u.d->k[i]; vals[n->nw + i] = kw.u.d->v[i]; }
        a->kwnames = names; a->kwargs = vals; a->nkw = tot;
    }
    return true;
}

static jv call_value(jrender *r, jv fn, const jargs *a, int line, jv caller);

static jv eval_call(jrender *r, const jnode *n, jframe *f, jv caller) {
    jv fn = eval(r, n->a, f);
    if (jr_failed(r)) return jv_undef();
    jargs a;
    if (!eval_args(r, n, f, &a)) return jv_undef();
    return call_value(r, fn, &a, n->line, caller);
}

static jv call_loop(jrender *r, jv lv, const jargs *a, int line);

static jv call_value(jrender *r, jv fn, const jargs *a, int line, jv caller) {
    if (fn.t == JT_UNDEF) return jr_undef_error(r, fn, line);
    if (fn.t == JT_LOOP) return jr_step(r, line) ? call_loop(r, fn, a, line) : jv_undef();
    if (fn.t != JT_FUNC) return jr_type_error(r, line, "'%s' object is not callable", jv_type_name(fn));
    if (!jr_step(r, line)) return jv_undef();
    if (fn.u.fn->kind == FN_MACRO || fn.u.fn->kind == FN_CALLER) {
        if (caller.t == JT_FUNC) {
            jfunc *copy = jarena_alloc(r->ar, sizeof *copy);
            if (!copy) { oom(r, line); return jv_undef(); }
            *copy = *fn.u.fn;
            copy->caller = caller;
            fn.u.fn = copy;
        }
        return jr_call_macro(r, fn, a, line);
    }
    return jb_call(r, fn, a, line);
}

static jv eval_filter(jrender *r, const jnode *n, jframe *f, jv input) {
    jv self = input;
    if (n->a) {
        self = n->a->kind == N_FILTER ? eval_filter(r, n->a, f, input) : eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
    }
    jargs a;
    if (!eval_args(r, n, f, &a)) return jv_undef();
    if (!jr_step(r, n->line)) return jv_undef();
    return jb_filter(r, n->lit.u.s, n->lit.n, self, &a, n->line);
}

static jv eval(jrender *r, const jnode *n, jframe *f) {
    if (jr_failed(r)) return jv_undef();
    switch (n->kind) {
    case N_LIT: return n->lit;
    case N_NAME: return lookup(r, f, n->lit);
    case N_LIST: case N_TUPLE: {
        jlist *l = jlist_new(r->ar, n->nv, n->kind == N_TUPLE ? JL_TUPLE : JL_LIST);
        if (!l) { oom(r, n->line); return jv_undef(); }
        for (size_t i = 0; i < n->nv; i++) { l->it[l->n++] = eval(r, n->v[i], f); if (jr_failed(r)) return jv_undef(); }
        return jv_list(l);
    }
    case N_DICT: {
        jdict *d = jdict_new(r->ar, n->nv);
        if (!d) { oom(r, n->line); return jv_undef(); }
        for (size_t i = 0; i < n->nv; i++) {
            jv k = eval(r, n->v[i], f), v = eval(r, n->w[i], f);
            if (jr_failed(r)) return jv_undef();
            if (k.t == JT_LIST && k.u.l->kind != JL_TUPLE) return jr_type_error(r, n->line, "unhashable type: 'list'");
            if (k.t == JT_DICT) return jr_type_error(r, n->line, "unhashable type: 'dict'");
            if (!jdict_set(r->ar, d, k, v)) { oom(r, n->line); return jv_undef(); }
        }
        return jv_dict(d);
    }
    case N_ATTR: {
        jv o = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        return jb_getattr(r, o, n->lit.u.s, n->lit.n, n->line);
    }
    case N_ITEM: {
        jv o = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        if (n->b->kind == N_SLICE) return do_slice(r, o, n->b, f, n->line);
        jv k = eval(r, n->b, f);
        if (jr_failed(r)) return jv_undef();
        return jb_getitem(r, o, k, n->line);
    }
    case N_CALL: return eval_call(r, n, f, jv_none());
    case N_FILTER: return eval_filter(r, n, f, jv_undef());
    case N_TEST: {
        jv self = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        jargs a;
        if (!eval_args(r, n, f, &a)) return jv_undef();
        int t = jb_test(r, n->lit.u.s, n->lit.n, self, &a, n->line);
        if (t < 0) return jv_undef();
        return jv_bool(n->flag ? !t : t);
    }
    case N_NEG: case N_POS: {
        jv x = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        if (!check_defined(r, x, n->line)) return jv_undef();
        if (!jv_is_number(x)) return jr_type_error(r, n->line, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+", jv_type_name(x));
        if (n->kind == N_POS) return x.t == JT_BOOL ? jv_int(x.u.i) : x;
        if (x.t != JT_FLOAT && x.u.i == INT64_MIN) return int_overflow(r, n->line);
        return x.t == JT_FLOAT ? jv_float(-x.u.f) : jv_int(-x.u.i);
    }
    case N_NOT: { jv x = eval(r, n->a, f); return jr_failed(r) ? jv_undef() : jv_bool(!jv_truthy(x)); }
    case N_AND: { jv x = eval(r, n->a, f); if (jr_failed(r) || !jv_truthy(x)) return x; return eval(r, n->b, f); }
    case N_OR: { jv x = eval(r, n->a, f); if (jr_failed(r) || jv_truthy(x)) return x; return eval(r, n->b, f); }
    case N_BIN: {
        jv a = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        jv b = eval(r, n->b, f);
        if (jr_failed(r)) return jv_undef();
        return binop(r, n->op, a, b, n->line);
    }
    case N_CMP: return compare(r, n, f);
    case N_COND: {
        jv c = eval(r, n->a, f);
        if (jr_failed(r)) return jv_undef();
        if (jv_truthy(c)) return eval(r, n->b, f);
        return n->c ? eval(r, n->c, f) : jv_undef();
    }
    case N_CONCAT: {
        jbuf b = {0};
        for (size_t i = 0; i < n->nv; i++) {
            jv x = eval(r, n->v[i], f);
            if (jr_failed(r)) { jbuf_free(&b); return jv_undef(); }
            jv_str(&b, x);
            if (b.n > r->opts->max_output) { jbuf_free(&b); return jr_fail(r, JINJA_ELIMIT, n->line, "string longer than the output limit"); }
        }
        jv res = jv_from_buf(r->ar, &b);
        jbuf_free(&b);
        oom(r, n->line);
        return res;
    }
    default:
        return jr_fail(r, JINJA_ERENDER, n->line, "internal error: node %d is not an expression", n->kind);
    }
}

/* ---- assignment ----------------------------------------------------------------------------- */
static void assign(jrender *r, const jnode *target, jv v, jframe *f, int line) {
    if (jr_failed(r)) return;
    if (target->kind == N_NAME) {
        if (!frame_set(r, f, target->lit.u.s, target->lit.n, v)) oom(r, line);
        return;
    }
    if (target->kind == N_ATTR) {
        jv ns = lookup(r, f, target->a->lit);
        if (ns.t != JT_NS) {
            jr_fail(r, JINJA_ERENDER, line, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
            return;
        }
        if (!jdict_set(r->ar, ns.u.d, target->lit, v)) oom(r, line);
        return;
    }
    if (target->kind == N_TUPLE) {
        jlist *l = jb_iter(r, v, line);
        if (!l) return;
        if (l->n != target->nv) {
            if (l->n > target->nv) jr_fail(r, JINJA_ERENDER, line, "ValueError: too many values to unpack (expected %zu)", target->nv);
            else jr_fail(r, JINJA_ERENDER, line, "ValueError: not enough values to unpack (expected %zu, got %zu)", target->nv, l->n);
            return;
        }
        for (size_t i = 0; i < target->nv; i++) assign(r, target->v[i], l->it[i], f, line);
        return;
    }
    jr_fail(r, JINJA_ERENDER, line, "cannot assign to this expression");
}

/* Renders a body into a fresh buffer and returns it as a string value. */
static jv capture(jrender *r, const jnode *body, jframe *f) {
    jbuf b = {0}, *saved = r->out;
    r->out = &b;
    exec_body(r, body, f);
    r->out = saved;
    jv s = jv_from_buf(r->ar, &b);
    jbuf_free(&b);
    oom(r, body->line);
    return s;
}

/* ---- macros --------------------------------------------------------------------------------- */
jv jr_call_macro(jrender *r, jv fnv, const jargs *a, int line) {
    const jfunc *fn = fnv.u.fn;
    const jnode *m = fn->macro;
    const jnode *body = m->b;
    if (r->depth >= r->opts->max_call_depth)
        return jr_fail(r, JINJA_ELIMIT, line, "macro calls nested deeper than %d (infinite recursion?)", r->opts->max_call_depth);
    jframe *f = frame_new(r, fn->closure);
    if (!f) { oom(r, line); return jv_undef(); }
    size_t np = m->nnames;
    jlist *varargs = jlist_new(r->ar, 0, JL_TUPLE);
    jdict *kwargs = jdict_new(r->ar, 0);
    if (!varargs || !kwargs) { oom(r, line); return jv_undef(); }
    for (size_t i = 0; i < a->nargs; i++) {
        if (i < np) { if (!frame_set(r, f, m->names[i].u.s, m->names[i].n, a->args[i])) { oom(r, line); return jv_undef(); } }
        else if (!jlist_push(r->ar, varargs, a->args[i])) { oom(r, line); return jv_undef(); }
    }
    for (size_t k = 0; k < a->nkw; k++) {
        jv name = a->kwnames[k];
        bool is_param = false;
        for (size_t i = 0; i < np; i++)
            if (m->names[i].n == name.n && memcmp(m->names[i].u.s, name.u.s, name.n) == 0) {
                if (i < a->nargs) return jr_type_error(r, line, "macro '%s' got multiple values for argument '%.*s'", fn->name ? fn->name : "caller", (int)name.n, name.u.s);
                is_param = true;
                break;
            }
        if (is_param) { if (!frame_set(r, f, name.u.s, name.n, a->kwargs[k])) { oom(r, line); return jv_undef(); } }
        else if (!jdict_set(r->ar, kwargs, name, a->kwargs[k])) { oom(r, line); return jv_undef(); }
    }
    for (size_t i = 0; i < np; i++) {
        if (frame_find_local(f, m->names[i].u.s, m->names[i].n)) continue;
        jv v = m->w[i] ? eval(r, m->w[i], f)
                       : jr_undef(r, "parameter '%.*s' was not provided", (int)m->names[i].n, m->names[i].u.s);
        if (jr_failed(r) || !frame_set(r, f, m->names[i].u.s, m->names[i].n, v)) { oom(r, line); return jv_undef(); }
    }
    if (!frame_set(r, f, "varargs", 7, jv_list(varargs)) || !frame_set(r, f, "kwargs", 6, jv_dict(kwargs))) { oom(r, line); return jv_undef(); }
    if (fn->caller.t == JT_FUNC && !frame_set(r, f, "caller", 6, fn->caller)) { oom(r, line); return jv_undef(); }
    r->depth++;
    int saved_brk = r->brk;
    r->brk = 0;
    jv out = capture(r, body, f);
    r->brk = saved_brk;
    r->depth--;
    return out;
}

static jv make_macro(jrender *r, const jnode *n, jframe *f, int kind) {
    jfunc *fn = jarena_alloc(r->ar, sizeof *fn);
    if (!fn) { oom(r, n->line); return jv_undef(); }
    fn->kind = kind; fn->macro = n; fn->closure = f;
    fn->caller = jv_none();
    if (kind == FN_MACRO) fn->name = jarena_strndup(r->ar, n->lit.u.s, n->lit.n);
    else fn->name = "caller";
    jv v = {0};
    v.t = JT_FUNC; v.u.fn = fn;
    return v;
}

/* ---- statements ----------------------------------------------------------------------------- */
/* Runs the loop n over seq in frame f at recursion depth depth0 (0 for the statement itself). */
static void run_loop(jrender *r, const jnode *n, jframe *f, jv seq, int depth0) {
    jlist *items = jb_iter(r, seq, n->line);
    if (!items) return;
    jframe *lf = frame_new(r, f);
    if (!lf) { oom(r, n->line); return; }
    if (n->c) {   /* {% for x in xs if cond %}: filter before loop.* is computed */
        jlist *kept = jlist_new(r->ar, items->n, JL_LIST);
        if (!kept) { oom(r, n->line); return; }
        for (size_t i = 0; i < items->n; i++) {
            lf->n = 0;
            assign(r, n->a, items->it[i], lf, n->line);
            jv c = eval(r, n->c, lf);
            if (jr_failed(r)) return;
            if (jv_truthy(c)) kept->it[kept->n++] = items->it[i];
        }
        items = kept;
    }
    if (!items->n) {
        if (n->nw) exec_body(r, n->w[0], f);
        return;
    }
    jloop *lp = jarena_alloc(r->ar, sizeof *lp);
    if (!lp) { oom(r, n->line); return; }
    lp->items = items; lp->node = n; lp->outer = f; lp->depth0 = depth0;
    jv lv = {0};
    lv.t = JT_LOOP; lv.u.loop = lp;
    for (size_t i = 0; i < items->n; i++) {
        if (!jr_step(r, n->line)) return;
        lp->index0 = (int64_t)i;
        lf->n = 0;   /* Jinja2 resets the loop body's locals at every iteration */
        assign(r, n->a, items->it[i], lf, n->line);
        if (!frame_set(r, lf, "loop", 4, lv)) { oom(r, n->line); return; }
        exec_body(r, n->d, lf);
        if (jr_failed(r)) return;
        if (r->brk == 1) { r->brk = 0; break; }
        r->brk = 0;
    }
}

static void exec_for(jrender *r, const jnode *n, jframe *f) {
    jv seq = eval(r, n->b, f);
    if (jr_failed(r)) return;
    run_loop(r, n, f, seq, 0);
}

/* loop(items) inside a `for ... recursive` loop: renders the loop again over items, one level deeper. */
static jv call_loop(jrender *r, jv lv, const jargs *a, int line) {
    const jloop *lp = lv.u.loop;
    if (!lp->node->flag) return jr_type_error(r, line, "'LoopContext' object is not callable (the loop is not recursive)");
    if (a->nargs != 1 || a->nkw) return jr_type_error(r, line, "loop() takes exactly one iterable");
    if (lp->depth0 + 1 >= r->opts->max_call_depth)
        return jr_fail(r, JINJA_ELIMIT, line, "recursive loop nested deeper than %d", r->opts->max_call_depth);
    jbuf b = {0}, *saved = r->out;
    r->out = &b;
    run_loop(r, lp->node, lp->outer, a->args[0], lp->depth0 + 1);
    r->out = saved;
    jv s = jv_from_buf(r->ar, &b);
    jbuf_free(&b);
    oom(r, line);
    return s;
}

static void exec_stmt(jrender *r, const jnode *n, jframe *f) {
    switch (n->kind) {
    case N_TEXT: out_put(r, n->lit.u.s, n->lit.n, n->line); return;
    case N_OUTPUT: {
        jv v = eval(r, n->a, f);
        if (jr_failed(r)) return;
        if (v.t == JT_STR) { out_put(r, v.u.s, v.n, n->line); return; }
        jbuf b = {0};
        jv_str(&b, v);
        out_put(r, b.p ? b.p : "", b.n, n->line);
        jbuf_free(&b);
        return;
    }
    case N_IF:
        for (;;) {
            jv c = eval(r, n->a, f);
            if (jr_failed(r)) return;
            if (jv_truthy(c)) { exec_body(r, n->b, f); return; }
            if (!n->c) return;
            if (n->c->kind != N_IF) { exec_body(r, n->c, f); return; }
            n = n->c;
        }
    case N_FOR: exec_for(r, n, f); return;
    case N_SET: { jv v = eval(r, n->b, f); assign(r, n->a, v, f, n->line); return; }
    case N_SETBLOCK: {
        jv v = capture(r, n->b, f);
        if (n->c && !jr_failed(r)) v = eval_filter(r, n->c, f, v);
        assign(r, n->a, v, f, n->line);
        return;
    }
    case N_MACRO: {
        jv m = make_macro(r, n, f, FN_MACRO);
        if (!jr_failed(r) && !frame_set(r, f, n->lit.u.s, n->lit.n, m)) oom(r, n->line);
        return;
    }
    case N_CALLBLOCK: {
        jv caller = make_macro(r, n, f, FN_CALLER);
        if (jr_failed(r)) return;
        jv v = eval_call(r, n->a, f, caller);
        if (jr_failed(r)) return;
        jbuf b = {0};
        jv_str(&b, v);
        out_put(r, b.p ? b.p : "", b.n, n->line);
        jbuf_free(&b);
        return;
    }
    case N_FILTERBLOCK: {
        jv v = capture(r, n->b, f);
        if (jr_failed(r)) return;
        v = eval_filter(r, n->a, f, v);
        if (jr_failed(r)) return;
        jbuf b = {0};
        jv_str(&b, v);
        out_put(r, b.p ? b.p : "", b.n, n->line);
        jbuf_free(&b);
        return;
    }
    case N_WITH: {
        jframe *wf = frame_new(r, f);
        if (!wf) { oom(r, n->line); return; }
        for (size_t i = 0; i < n->nv; i++) {
            jv v = eval(r, n->w[i], f);
            if (jr_failed(r)) return;
            assign(r, n->v[i], v, wf, n->line);
        }
        exec_body(r, n->b, wf);
        return;
    }
    case N_BREAK: r->brk = 1; return;
    case N_CONTINUE: r->brk = 2; return;
    case N_BODY: exec_body(r, n, f); return;
    default: jr_fail(r, JINJA_ERENDER, n->line, "internal error: node %d is not a statement", n->kind);
    }
}

static void exec_body(jrender *r, const jnode *n, jframe *f) {
    for (size_t i = 0; i < n->nv && !jr_failed(r) && !r->brk; i++) exec_stmt(r, n->v[i], f);
}

/* ---- entry ---------------------------------------------------------------------------------- */
int jinja_render(const jinja_template *t, json_t *ctx, const jinja_render_opts *opts,
                 char **out, size_t *out_len, char *err, size_t err_size) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (err && err_size) err[0] = 0;
    if (!t || !out || (ctx && !json_is_object(ctx))) {
        if (err && err_size) snprintf(err, err_size, "%s", !t ? "template is NULL" : !out ? "output pointer is NULL" : "context is not a JSON object");
        return JINJA_EINVAL;
    }
    jinja_render_opts o = {0};
    if (opts) o = *opts;
    if (!o.max_output) o.max_output = 16u << 20;
    if (!o.max_steps) o.max_steps = 10000000;
    if (!o.max_call_depth) o.max_call_depth = 200;
    if (!o.max_memory) o.max_memory = 256u << 20;
    time_t now = o.now ? o.now : time(NULL);

    jarena ar;
    jarena_init(&ar, o.max_memory);
    jbuf b = {0};
    jrender r = { .ar = &ar, .out = &b, .opts = &o, .err = err, .err_size = err_size };
    if (o.now_is_utc) gmtime_r(&now, &r.now_tm); else localtime_r(&now, &r.now_tm);
    jframe *root = frame_new(&r, NULL);
    if (root) {
        jv c = jv_from_json(&ar, ctx);
        root->dict = c.t == JT_DICT ? c.u.d : jdict_new(&ar, 0);
    }
    if (!root || !root->dict || ar.exhausted) jr_fail(&r, JINJA_ENOMEM, 0, "out of memory converting the context");
    else exec_body(&r, t->root, root);
    if (!r.status && b.oom) jr_fail(&r, JINJA_ENOMEM, 0, "out of memory");
    jarena_free(&ar);
    if (r.status) { jbuf_free(&b); return r.status; }
    if (!b.p) { b.p = malloc(1); if (!b.p) return JINJA_ENOMEM; b.p[0] = 0; }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return JINJA_OK;
}
