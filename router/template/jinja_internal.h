/* jinja_internal.h — the engine's private types: arena, values, AST, render state.
 *
 * Not a public header: only router/template/jinja_*.c include it.
 *
 * Memory model: the parser allocates the AST from the template's arena; a render allocates every
 * runtime value from its own arena and frees it in one go. Values are therefore plain structs passed
 * by value with no reference counts; lists and dicts are never mutated after they are built (the
 * sandbox is immutable), except namespace() objects, which are the one mutable kind. */
#ifndef LLMR_JINJA_INTERNAL_H
#define LLMR_JINJA_INTERNAL_H

#include "router/template/jinja.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* ---- arena ---------------------------------------------------------------------------------- */
typedef struct jarena_chunk jarena_chunk;
typedef struct {
    jarena_chunk *head;
    size_t used_total;   /* bytes handed out + chunk overhead */
    size_t limit;        /* 0 = unlimited */
    bool exhausted;      /* set once an allocation failed (limit or malloc) */
} jarena;

void jarena_init(jarena *a, size_t limit);
void jarena_free(jarena *a);
/* Zeroed, 16-byte aligned memory, or NULL (and a->exhausted) past the limit. */
void *jarena_alloc(jarena *a, size_t n);
char *jarena_strndup(jarena *a, const char *s, size_t n);

/* ---- growable byte buffer (malloc'd) ------------------------------------------------------- */
typedef struct { char *p; size_t n, cap; bool oom; } jbuf;
void jbuf_put(jbuf *b, const void *s, size_t n);
void jbuf_putc(jbuf *b, char c);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jbuf_free(jbuf *b);

/* ---- values --------------------------------------------------------------------------------- */
typedef enum {
    JT_UNDEF, JT_NONE, JT_BOOL, JT_INT, JT_FLOAT, JT_STR, JT_LIST, JT_DICT, JT_NS, JT_FUNC, JT_LOOP
} jtype;

enum { JL_LIST = 0, JL_TUPLE = 1, JL_GEN = 2 };   /* jlist.kind: how it prints / what it allows */
enum { JU_UNSAFE = 1,   /* jv.flags on an undefined: a refused method (u.s = message) */
       JS_SAFE = 2,      /* jv.flags on a string: markupsafe.Markup (from |safe / |escape) */
       JU_NAME = 4,      /* undefined variable: u.s/n = its name (message built only if needed) */
       JU_ATTR = 8 };    /* missing attribute: u.s/n = attribute, aux = type of the object */

struct jlist; struct jdict; struct jfunc; struct jloop;
typedef struct jv {
    uint8_t t;        /* jtype */
    uint8_t flags;
    uint16_t aux;     /* JU_ATTR: jtype | list kind << 8 of the object */
    uint32_t n;       /* string length (JT_STR), hint length (JT_UNDEF) */
    union {
        int64_t i;            /* JT_BOOL, JT_INT */
        double f;             /* JT_FLOAT */
        const char *s;        /* JT_STR bytes (not NUL-terminated), JT_UNDEF hint (may be NULL) */
        struct jlist *l;
        struct jdict *d;      /* JT_DICT, JT_NS */
        struct jfunc *fn;
        struct jloop *loop;
    } u;
} jv;

typedef struct jlist {
    size_t n, cap; jv *it; int kind;
    const char *gen_err;        /* JL_GEN: TypeError raised when iterated */
    int64_t range[3];           /* range(start, stop, step) result: prints as Python's range */
    bool is_range;
} jlist;
typedef struct jdict {
    size_t n, cap; jv *k; jv *v;
    /* hash index of the string keys, built lazily once a dict has more than 16 entries, so lookups
     * in big contexts stay O(1); it lives in the same arena as the dict */
    jarena *ar;
    uint32_t *hidx; size_t hcap, hn;
} jdict;

static inline jv jv_undef(void) { jv v = {0}; v.t = JT_UNDEF; return v; }
static inline jv jv_none(void) { jv v = {0}; v.t = JT_NONE; return v; }
static inline jv jv_bool(bool b) { jv v = {0}; v.t = JT_BOOL; v.u.i = b ? 1 : 0; return v; }
static inline jv jv_int(int64_t i) { jv v = {0}; v.t = JT_INT; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {0}; v.t = JT_FLOAT; v.u.f = f; return v; }
static inline jv jv_strn(const char *s, size_t n) { jv v = {0}; v.t = JT_STR; v.u.s = s; v.n = (uint32_t)n; return v; }
jv jv_cstr(const char *s);   /* a static/long-lived C string */

jlist *jlist_new(jarena *a, size_t cap, int kind);
bool jlist_push(jarena *a, jlist *l, jv v);     /* false on arena exhaustion */
static inline jv jv_list(jlist *l) { jv v = {0}; v.t = JT_LIST; v.u.l = l; return v; }
jdict *jdict_new(jarena *a, size_t cap);
/* Inserts or replaces key k (keeps insertion order). false on arena exhaustion. */
bool jdict_set(jarena *a, jdict *d, jv k, jv v);
/* Pointer to the value of key k, or NULL. (May build the dict's hash index: not for concurrent use
 * of one dict, which never happens: every runtime dict belongs to one render.) */
jv *jdict_get(jdict *d, jv k);
jv *jdict_get_str(jdict *d, const char *s, size_t n);
static inline jv jv_dict(jdict *d) { jv v = {0}; v.t = JT_DICT; v.u.d = d; return v; }

/* Python semantics helpers. */
bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);                      /* Python ==, with 1 == 1.0 == True */
/* Python ordering: sets *cmp to -1/0/1; false when the types are not orderable (TypeError). */
bool jv_order(jv a, jv b, int *cmp);
bool jv_is_number(jv v);                        /* int, float or bool */
double jv_num(jv v);
const char *jv_type_name(jv v);                 /* Python type name: 'str', 'dict', 'NoneType', ... */
/* Python str(v) appended to b (strings verbatim, containers as repr). */
void jv_str(jbuf *b, jv v);
/* Python repr(v) appended to b. */
void jv_repr(jbuf *b, jv v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) appended to b. indent < 0 = None.
 * Returns false with the offending type name in *bad when v holds something JSON cannot encode. */
bool jv_tojson(jbuf *b, jv v, bool ensure_ascii, int indent, const char *item_sep, const char *key_sep,
               bool sort_keys, const char **bad);
/* Deep conversion from jansson. NULL json -> none. */
jv jv_from_json(jarena *a, json_t *j);
/* A string value allocated in the arena from b's bytes. */
jv jv_from_buf(jarena *a, const jbuf *b);
void jv_float_repr(jbuf *b, double f);          /* Python float repr: 1.0, 0.1, 1e+16, inf */

/* UTF-8 helpers: code points in s[0..n); byte offset of code point index ci (clamped). */
size_t utf8_count(const char *s, size_t n);
size_t utf8_offset(const char *s, size_t n, size_t ci);

/* ---- AST ------------------------------------------------------------------------------------ */
typedef enum {
    /* expressions */
    N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_NEG, N_POS, N_NOT, N_AND, N_OR, N_BIN, N_CMP, N_COND, N_CONCAT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE, N_WITH,
} jnode_kind;

/* binary / compare operators (jnode.op) */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct jnode jnode;
struct jnode {
    uint16_t kind, op;
    int line;
    jnode *a, *b, *c, *d;   /* kind-specific children (see jinja_parse.c) */
    jnode **v; size_t nv;   /* list: items, args, body, compare operands */
    jnode **w; size_t nw;   /* list: kwargs values, else-body, defaults */
    jv lit;                 /* literal value, name, filter/test/attr name */
    jv *names; size_t nnames; /* kwarg names, macro params, compare ops (as ints) */
    bool flag;              /* test negated; for-recursive; call has *args in a; ... */
};

struct jinja_template {
    jarena arena;
    jnode *root;
};

/* ---- runtime -------------------------------------------------------------------------------- */
typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    size_t n, cap;
    const char **names; uint32_t *lens;
    jv *vals;
    jdict *dict;            /* root frame: the context variables */
};

typedef struct jfunc {
    int kind;               /* FN_* */
    int id;                 /* builtin/method id */
    jv self;                /* bound method receiver */
    const jnode *macro;     /* FN_MACRO / FN_CALLER: the N_MACRO / N_CALLBLOCK node */
    jframe *closure;        /* frame the macro was defined in */
    jv caller;              /* FN_MACRO called from {% call %}: the caller function */
    const char *name;
} jfunc;
enum { FN_GLOBAL = 1, FN_METHOD, FN_MACRO, FN_CALLER, FN_CYCLER_NEXT, FN_JOINER };

typedef struct jloop {
    jlist *items;
    int64_t index0;
    int depth0;
    const jnode *node;      /* the N_FOR (for loop(...) recursion) */
    struct jframe *outer;   /* the frame the loop runs in (for loop(...) recursion) */
    jv changed_last; bool changed_set;
} jloop;

typedef struct {
    jarena *ar;
    jbuf *out;
    const jinja_render_opts *opts;
    int status;             /* first error wins */
    char *err; size_t err_size;
    uint64_t steps;
    int depth;
    int brk;                /* 1 = break, 2 = continue pending */
    struct tm now_tm;
} jrender;

/* Records an error (the first one wins) and returns an undefined value for convenience. */
jv jr_fail(jrender *r, int status, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A render error worded as Python's TypeError ("TypeError: <message>"), as jinja2 reports it. */
jv jr_type_error(jrender *r, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline bool jr_failed(const jrender *r) { return r->status != JINJA_OK; }
bool jr_step(jrender *r, int line);             /* counts one step; false once over the limit */
/* Charges the work of a linear scan of n items (n/16 steps), so quadratic templates hit the limit. */
bool jr_scan(jrender *r, size_t n, int line);
/* An undefined carrying the UndefinedError message used if it is later misused. */
jv jr_undef(jrender *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Cheap undefineds whose message is only formatted when an error needs it. */
jv jr_undef_name(const char *s, size_t n);
jv jr_undef_attr(jv obj, const char *s, size_t n);
/* The UndefinedError message of u, into buf. */
const char *jr_undef_message(jv u, char *buf, size_t size);
/* Fails with the undefined's message (UndefinedError) . */
jv jr_undef_error(jrender *r, jv u, int line);

/* Builtins (jinja_builtins.c). Arguments are evaluated; kwnames[i] names kwargs[i]. */
typedef struct { jv *args; size_t nargs; jv *kwnames; jv *kwargs; size_t nkw; } jargs;
jv jb_filter(jrender *r, const char *name, size_t name_len, jv self, const jargs *a, int line);
/* Test: returns 0/1, or -1 after failing (unknown test, TypeError). */
int jb_test(jrender *r, const char *name, size_t name_len, jv self, const jargs *a, int line);
jv jb_global(jrender *r, const char *name, size_t n);
/* Python's fmt % args; strict: arguments left unused are a TypeError (as for a tuple). */
jv jb_percent_format(jrender *r, jv fmt, const jargs *a, bool strict, int line);
/* markupsafe.escape of a string (not marked safe by itself). */
jv jb_escape(jrender *r, jv s, int line);     /* global function or undefined */
jv jb_call(jrender *r, jv fn, const jargs *a, int line); /* builtins + bound methods */
/* Attribute access with Python/Jinja rules: methods first for `obj.name`. */
jv jb_getattr(jrender *r, jv obj, const char *name, size_t n, int line);
/* Subscript with Jinja rules: items first for `obj[key]`. */
jv jb_getitem(jrender *r, jv obj, jv key, int line);
/* Turns an iterable into a list (dict -> keys, str -> chars, undefined -> empty); fails otherwise. */
jlist *jb_iter(jrender *r, jv v, int line);
/* Calls a macro/caller value (jinja_render.c). */
jv jr_call_macro(jrender *r, jv fn, const jargs *a, int line);

#endif
