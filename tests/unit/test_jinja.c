/* Unit + conformance tests for the Jinja engine (router/template/jinja.h).
 *
 * Conformance data lives in tests/data/templates/ (copied from /work/shared/reference/templates;
 * see ORIGIN.md there): every golden of goldens/llama.cpp-templates-goldens.json must render byte
 * for byte (or fail, for the 46 expected errors, with the same message), plus the hf.js syntax cases
 * and llama.cpp's test-chat-template cases against their Python-jinja2 expectations. */
#include "router/chat_prompt.h"
#include "router/template/jinja.h"
#include "tests/unit/testutil.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#define DATA "tests/data/templates/"
static const time_t NOW_20250710 = 1752148800;   /* 2025-07-10T12:00:00Z */

/* Renders src with ctx (JSON text, NULL = {}) under HF settings; returns the status. */
static int render_opts(const char *src, const char *ctx_json, const jinja_parse_opts *po, const jinja_render_opts *ro,
                       char **out, char *err, size_t err_size) {
    json_error_t je;
    json_t *ctx = ctx_json ? json_loads(ctx_json, 0, &je) : json_object();
    ck_assert_msg(ctx != NULL, "bad test context JSON: %s", je.text);
    int st = 0;
    *out = NULL;
    jinja_template *t = jinja_parse(src, strlen(src), po, &st, NULL, err, err_size);
    if (t) {
        jinja_render_opts o = {0};
        if (ro) o = *ro;
        if (!o.now) { o.now = NOW_20250710; o.now_is_utc = 1; }
        st = jinja_render(t, ctx, &o, out, NULL, err, err_size);
    }
    jinja_destroy(t);
    json_decref(ctx);
    return st;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

static char g_err[2048];
static char *g_out;

/* Renders and returns the output (static until the next call); fails the test on error. */
static const char *R(const char *src, const char *ctx) {
    free(g_out);
    g_out = NULL;
    int st = render_opts(src, ctx, NULL, NULL, &g_out, g_err, sizeof g_err);
    ck_assert_msg(st == JINJA_OK, "render of %s failed: %s", src, g_err);
    return g_out;
}

/* Renders expecting failure; returns the status and leaves the message in g_err. */
static int RERR(const char *src, const char *ctx) {
    free(g_out);
    g_out = NULL;
    int st = render_opts(src, ctx, NULL, NULL, &g_out, g_err, sizeof g_err);
    ck_assert_msg(st != JINJA_OK, "render of %s should fail but gave '%s'", src, g_out ? g_out : "");
    return st;
}

START_TEST(literals_and_python_str) {
    ck_assert_str_eq(R("{{ [1, 'a', none, true, 1.5] }}", NULL), "[1, 'a', None, True, 1.5]");
    ck_assert_str_eq(R("{{ {'k': True, 'n': none} }}", NULL), "{'k': True, 'n': None}");
    ck_assert_str_eq(R("{{ ('a',) }}|{{ (1, 2) }}|{{ () }}", NULL), "('a',)|(1, 2)|()");
    ck_assert_str_eq(R("{{ \"it's\" }}|{{ [\"it's\"] }}|{{ ['a\\nb'] }}", NULL), "it's|[\"it's\"]|['a\\nb']");
    ck_assert_str_eq(R("{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}", NULL),
                     "1.0|0.30000000000000004|1e+16|3.5|3|2|1024");
    ck_assert_str_eq(R("{{ undefined_name }}|{{ none }}", NULL), "|None");
    ck_assert_str_eq(R("{{ 'a' ~ 1 ~ none ~ true }}", NULL), "a1NoneTrue");
    ck_assert_str_eq(R("{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}", NULL), "ababab|[1, 1]|[1, 2]");
}
END_TEST

START_TEST(operators) {
    ck_assert_str_eq(R("{{ 'b' in 'abc' }}{{ 'x' not in 'abc' }}{{ 1 in [1,2] }}{{ 'k' in {'k':1} }}", NULL), "TrueTrueTrueTrue");
    ck_assert_str_eq(R("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}", NULL), "TrueFalseTrueTrue");
    ck_assert_str_eq(R("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ not [] }}", NULL), "x|y|True");
    ck_assert_str_eq(R("{{ 'a' if false }}|{{ 'a' if 0 else 'b' }}", NULL), "|b");
    RERR("{{ 'a' + 1 }}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "can only concatenate str (not \"int\") to str"));
    RERR("{{ 1 in none }}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "argument of type 'NoneType' is not iterable"));
    RERR("{{ 1 < 'a' }}", NULL);
    RERR("{{ 1 / 0 }}", NULL);
}
END_TEST

START_TEST(scoping_like_jinja2) {
    /* a set inside a loop does not leak; namespace attributes do */
    ck_assert_str_eq(R("{% set f = false %}{% for x in [1] %}{% set f = true %}{% endfor %}{{ f }}", NULL), "False");
    ck_assert_str_eq(R("{% set ns = namespace(f=false) %}{% for x in [1] %}{% set ns.f = true %}{% endfor %}{{ ns.f }}", NULL), "True");
    /* if opens no scope */
    ck_assert_str_eq(R("{% if true %}{% set a = 1 %}{% endif %}{{ a }}", NULL), "1");
    /* loop locals are reset every iteration: the read before the set sees the outer value */
    ck_assert_str_eq(R("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", NULL), "01020");
    /* macros see the variables of their definition scope at call time, and have their own locals */
    ck_assert_str_eq(R("{% macro m() %}{% set y = 5 %}{{ g }}{% endmacro %}{% set g = 'G' %}{{ m() }}{{ y }}", NULL), "G");
    /* a set in a macro after an `is defined` check (the gpt-oss pattern) */
    ck_assert_str_eq(R("{% macro m() %}{% if v is not defined %}{% set v = 'd' %}{% endif %}{{ v }}{% endmacro %}{{ m() }}", NULL), "d");
    ck_assert_str_eq(R("{% macro m() %}{% if v is not defined %}{% set v = 'd' %}{% endif %}{{ v }}{% endmacro %}{{ m() }}", "{\"v\":\"ctx\"}"), "ctx");
    ck_assert_str_eq(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}", NULL), "21");
    ck_assert_str_eq(R("{% set x %}  block {{ 1 }}{% endset %}[{{ x }}]", NULL), "[  block 1]");
    ck_assert_str_eq(R("{% set x | upper %}abc{% endset %}{{ x }}", NULL), "ABC");
    ck_assert_str_eq(R("{% with a = 1 %}{{ a }}{% endwith %}{{ a }}", NULL), "1");
}
END_TEST

START_TEST(loops) {
    ck_assert_str_eq(R("{% for x in 'abc' %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", NULL), "1a,2b,3c");
    ck_assert_str_eq(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", NULL), "a=1;b=2;");
    ck_assert_str_eq(R("{% for x in [] %}x{% else %}empty{% endfor %}", NULL), "empty");
    ck_assert_str_eq(R("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", NULL), "135");
    ck_assert_str_eq(R("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", NULL), "13");
    ck_assert_str_eq(R("{% for x in [1,2,3] %}{{ loop.revindex0 }}{{ loop.length }}{{ loop.previtem is defined }}{% endfor %}", NULL),
                     "23False13True03True");
    ck_assert_str_eq(R("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", NULL), "aba");
    ck_assert_str_eq(R("{% for m in messages[1:] %}{{ m }}{% endfor %}|{{ messages[::-1] }}|{{ 'hello'[1:3] }}",
                       "{\"messages\":[1,2,3]}"), "23|[3, 2, 1]|el");
    RERR("{% for x in none %}{% endfor %}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "'NoneType' object is not iterable"));
}
END_TEST

START_TEST(macros_and_calls) {
    ck_assert_str_eq(R("{% macro f(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }}|{{ f(1, 3) }}|{{ f(b=4, a=0) }}", NULL), "1-2|1-3|0-4");
    ck_assert_str_eq(R("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", NULL), "120");
    ck_assert_str_eq(R("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}", NULL), "<in>");
    ck_assert_str_eq(R("{% macro w() %}{{ caller(1) }}{{ caller(2) }}{% endmacro %}{% call(x) w() %}[{{ x }}]{% endcall %}", NULL), "[1][2]");
    ck_assert_str_eq(R("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, k=2) }}", NULL), "(1,){'k': 2}");
    ck_assert_str_eq(R("{% filter upper %}abc{% endfilter %}", NULL), "ABC");
}
END_TEST

START_TEST(whitespace_control) {
    ck_assert_str_eq(R("a  {%- if true -%}  b  {%- endif -%}  c", NULL), "abc");
    ck_assert_str_eq(R("a {{- 'b' -}} c", NULL), "abc");
    /* trim_blocks + lstrip_blocks (HF defaults) */
    ck_assert_str_eq(R("x\n  {% if true %}\n  y\n  {% endif %}\nz", NULL), "x\n  y\nz");
    ck_assert_str_eq(R("  {# c #}\nq", NULL), "q");
    /* variables are not lstripped, and a trailing newline of the template is dropped (one only) */
    ck_assert_str_eq(R("  {{ 'v' }}\n", NULL), "  v");
    ck_assert_str_eq(R("a\n\n", NULL), "a\n");
    ck_assert_str_eq(R("a\r\nb", NULL), "a\nb");
    ck_assert_str_eq(R("  {%+ if true %}k{% endif %}", NULL), "  k");
    ck_assert_str_eq(R("{% raw %}{{ not parsed }}{% endraw %}", NULL), "{{ not parsed }}");
    /* options off */
    jinja_parse_opts po;
    jinja_parse_opts_default(&po);
    po.trim_blocks = 0; po.lstrip_blocks = 0;
    char *out = NULL;
    ck_assert_int_eq(render_opts("x\n  {% if true %}\ny{% endif %}", NULL, &po, NULL, &out, g_err, sizeof g_err), JINJA_OK);
    ck_assert_str_eq(out, "x\n  \ny");
    free(out);
}
END_TEST

START_TEST(filters) {
    ck_assert_str_eq(R("{{ {'b': 'é', 'a': [1, 2.5, none]}|tojson }}", NULL), "{\"b\": \"é\", \"a\": [1, 2.5, null]}");
    ck_assert_str_eq(R("{{ {'b': 1, 'a': 2}|tojson(indent=2, sort_keys=true) }}", NULL), "{\n  \"a\": 2,\n  \"b\": 1\n}");
    ck_assert_str_eq(R("{{ '<a&\"b\">'|tojson }}", NULL), "\"<a&\\\"b\\\">\"");
    ck_assert_str_eq(R("{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ 'é'|tojson(ensure_ascii=true) }}", NULL), "[1,2]|\"\\u00e9\"");
    ck_assert_str_eq(R("{{ '  x '|trim }}|{{ ['a','b']|join(', ') }}|{{ 'abc'|length }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}", NULL), "x|a, b|3|ABCabc");
    ck_assert_str_eq(R("{{ 'a-b'|replace('-', '+') }}|{{ x|default('d') }}|{{ ''|default('e', true) }}", NULL), "a+b|d|e");
    ck_assert_str_eq(R("{{ [3,1,2]|first }}{{ [3,1,2]|last }}{{ [3,1,2]|sort|list }}{{ [1,1,2]|unique|list }}", NULL), "32[1, 2, 3][1, 2]");
    ck_assert_str_eq(R("{{ ms|selectattr('role', 'equalto', 'u')|list|length }}{{ ms|rejectattr('role', 'eq', 'u')|map(attribute='role')|list }}",
                       "{\"ms\":[{\"role\":\"u\"},{\"role\":\"s\"},{\"role\":\"u\"}]}"), "2['s']");
    ck_assert_str_eq(R("{{ [1, none, 2]|select('none')|list }}{{ ['a','b']|map('upper')|join }}", NULL), "[None]AB");
    ck_assert_str_eq(R("{{ '3'|int + 1 }}|{{ 'x'|int }}|{{ 2.7|int }}|{{ 1|float }}|{{ 42|string ~ '' }}", NULL), "4|0|2|1.0|42");
    ck_assert_str_eq(R("{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}", NULL), "a\n  b|  a\n  b");
    ck_assert_str_eq(R("{{ {'b': 1, 'A': 2}|dictsort }}|{{ {'a': 1}|items|list }}", NULL), "[('A', 2), ('b', 1)]|[('a', 1)]");
    ck_assert_str_eq(R("{{ '<b>'|safe + '<i>' }}|{{ '<x>'|e }}", NULL), "<b>&lt;i&gt;|&lt;x&gt;");
    ck_assert_str_eq(R("{{ '%s-%d'|format('a', 3) }}|{{ [1,5,2]|max }}{{ [1,5,2]|min }}{{ [1,2]|sum }}", NULL), "a-3|513");
    RERR("{{ (['a']|map('upper'))|tojson }}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "Object of type generator is not JSON serializable"));
    RERR("{{ 'x'|nosuchfilter }}", NULL);
}
END_TEST

START_TEST(tests_and_methods) {
    ck_assert_str_eq(R("{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 1 is number }}{{ 3 is odd }}", NULL),
                     "FalseTrueTrueTrueTrueTrueTrue");
    ck_assert_str_eq(R("{{ 'a' is not mapping }}{{ [1] is sequence }}{{ 1 is equalto 1 }}{{ true is true }}{{ 0 is false }}", NULL), "TrueTrueTrueTrueFalse");
    ck_assert_str_eq(R("{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ ' a b '.split() }}{{ 'a,b'.split(',', 1) }}", NULL),
                     "TrueTrue['a', 'b']['a', 'b']");
    ck_assert_str_eq(R("{{ ' x '.strip() }}{{ 'xx'.lstrip('x') }}{{ 'ab'.upper() }}{{ 'hello world'.title() }}{{ 'aba'.count('a') }}{{ 'abc'.find('c') }}", NULL),
                     "xABHello World22");
    ck_assert_str_eq(R("{{ '{} and {name}'.format(1, name='n') }}|{{ 'a-b'.replace('-', '') }}", NULL), "1 and n|ab");
    ck_assert_str_eq(R("{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}", "{\"d\":{\"a\":1}}"), "1dflt['a'][1]");
    /* obj.name prefers the method, obj['name'] the item (the gpt-oss template relies on this) */
    ck_assert_str_eq(R("{{ d['items'] }}|{{ d.items is defined }}", "{\"d\":{\"items\":\"I\"}}"), "I|True");
    ck_assert_str_eq(R("{{ 'yes' if d['items'] }}", "{\"d\":{\"type\":\"array\"}}"), "yes");
    ck_assert_str_eq(R("{{ d.missing }}|{{ d.missing is defined }}", "{\"d\":{}}"), "|False");
    RERR("{{ u.attr }}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "'u' is undefined"));
    RERR("{{ d.description + 'x' }}", "{\"d\":{}}");
    ck_assert_ptr_nonnull(strstr(g_err, "'dict object' has no attribute 'description'"));
}
END_TEST

START_TEST(big_dicts_are_indexed) {
    /* > 16 keys: lookups go through the hash index (context dicts, literals, namespaces) */
    char ctx[40000];
    size_t n = (size_t)snprintf(ctx, sizeof ctx, "{\"d\": {");
    for (int i = 0; i < 1000; i++) n += (size_t)snprintf(ctx + n, sizeof ctx - n, "%s\"k%d\": %d", i ? ", " : "", i, i);
    snprintf(ctx + n, sizeof ctx - n, "}}");
    ck_assert_str_eq(R("{% set ns = namespace(t=0) %}{% for i in range(1000) %}{% set ns.t = ns.t + d['k' ~ i] %}{% endfor %}{{ ns.t }}|{{ d.k999 }}|{{ d.nope is defined }}|{{ 'k5' in d }}|{{ d|length }}", ctx),
                     "499500|999|False|True|1000");
    ck_assert_str_eq(R("{% set ns = namespace() %}{% for i in range(40) %}{% set ns.a = i %}{% endfor %}"
                       "{% set x = {'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, 'g': 7, 'h': 8, 'i': 9, 'j': 10, 'k': 11, 'l': 12,"
                       " 'm': 13, 'n': 14, 'o': 15, 'p': 16, 'q': 17, 'a': 99} %}{{ ns.a }}|{{ x.a }}|{{ x.q }}|{{ x|length }}|{{ x.zz is defined }}", NULL),
                     "39|99|17|17|False");
}
END_TEST

START_TEST(sandbox_refuses_mutation) {
    RERR("{% set l = [1] %}{{ l.append(2) }}", NULL);
    ck_assert_ptr_nonnull(strstr(g_err, "SecurityError"));
    ck_assert_ptr_nonnull(strstr(g_err, "append"));
    RERR("{{ d.update({'a': 1}) }}", "{\"d\":{}}");
    ck_assert_ptr_nonnull(strstr(g_err, "SecurityError"));
    ck_assert_str_eq(R("{{ d.__class__ }}", "{\"d\":{}}"), "");
}
END_TEST

START_TEST(raise_and_clock) {
    ck_assert_int_eq(RERR("{{ raise_exception('Bad role: ' ~ 'x') }}", NULL), JINJA_ERAISE);
    ck_assert_str_eq(g_err, "Bad role: x");
    ck_assert_str_eq(R("{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %B %Y') }}", NULL), "2025-07-10 12:00|10 July 2025");
    jinja_render_opts ro = { .now = 86400 * 365, .now_is_utc = 1 };
    char *out = NULL;
    ck_assert_int_eq(render_opts("{{ strftime_now('%Y-%m-%d') }}", NULL, NULL, &ro, &out, g_err, sizeof g_err), JINJA_OK);
    ck_assert_str_eq(out, "1971-01-01");
    free(out);
}
END_TEST

START_TEST(limits) {
    ck_assert_int_eq(RERR("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL), JINJA_ELIMIT);
    ck_assert_ptr_nonnull(strstr(g_err, "deeper than"));
    ck_assert_int_eq(RERR("{% for i in range(100000000000) %}{% endfor %}", NULL), JINJA_ELIMIT);
    ck_assert_int_eq(RERR("{{ 'x' * 100000000000 }}", NULL), JINJA_ELIMIT);
    ck_assert_int_eq(RERR("{{ 10 ** 20 }}", NULL), JINJA_ELIMIT);
    ck_assert_int_eq(RERR("{{ 9223372036854775807 + 1 }}", NULL), JINJA_ELIMIT);
    ck_assert_str_eq(R("{{ 2 ** 62 }}|{{ -9223372036854775807 - 1 }}|{{ 3 ** 0 }}|{{ (-1) ** 3 }}", NULL), "4611686018427387904|-9223372036854775808|1|-1");
    jinja_render_opts ro = { .max_output = 100, .max_steps = 1000 };
    char *out = NULL;
    ck_assert_int_eq(render_opts("{% for i in range(200) %}x{% endfor %}", NULL, NULL, &ro, &out, g_err, sizeof g_err), JINJA_ELIMIT);
    ck_assert_ptr_nonnull(strstr(g_err, "output"));
    ck_assert_int_eq(render_opts("{% for i in range(30) %}{% for j in range(30) %}{% for k in range(30) %}{% endfor %}{% endfor %}{% endfor %}",
                                 NULL, NULL, &ro, &out, g_err, sizeof g_err), JINJA_ELIMIT);
    ck_assert_ptr_nonnull(strstr(g_err, "step"));
    /* quadratic work is charged to the step budget, so it ends with an error instead of hanging */
    ck_assert_int_eq(RERR("{% set l = range(200000)|list %}{% for i in l %}{% if i in l %}{% endif %}{% endfor %}", NULL), JINJA_ELIMIT);
    ck_assert_int_eq(RERR("{{ range(3000000)|unique|list|length }}", NULL), JINJA_ELIMIT);
    /* deep nesting in the source is a syntax error, not a stack overflow */
    char deep[4000];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 1000; i++) deep[n++] = ')';
    snprintf(deep + n, sizeof deep - n, " }}");
    ck_assert_int_eq(RERR(deep, NULL), JINJA_ESYNTAX);
}
END_TEST

START_TEST(syntax_errors_have_positions) {
    const char *bad[] = { "{% if x %}no end", "{{ 1 + }}", "{% for %}{% endfor %}", "{% endif %}", "{{ 'open }}",
                          "{% frob %}", "{{ x", "{# never closed", "{% if %}{% else %}{% else %}{% endif %}", NULL };
    for (int i = 0; bad[i]; i++) {
        int st = 0;
        jinja_pos pos;
        char err[256];
        jinja_template *t = jinja_parse(bad[i], strlen(bad[i]), NULL, &st, &pos, err, sizeof err);
        ck_assert_msg(t == NULL, "'%s' should not parse", bad[i]);
        ck_assert_int_eq(st, JINJA_ESYNTAX);
        ck_assert_int_ge(pos.line, 1);
        ck_assert_ptr_nonnull(strstr(err, "line "));
    }
    int st = 0;
    jinja_pos pos;
    char err[256];
    ck_assert_ptr_null(jinja_parse("ok\n\n  {{ 1 + }}", 15, NULL, &st, &pos, err, sizeof err));
    ck_assert_int_eq(pos.line, 3);
    ck_assert_int_eq(pos.column, 10);
    ck_assert_str_eq(jinja_strerror(JINJA_ESYNTAX), "template syntax error");
    jinja_destroy(NULL);
}
END_TEST

/* ---- conformance ---------------------------------------------------------------------------- */
START_TEST(conformance_goldens) {
    json_error_t je;
    json_t *doc = json_load_file(DATA "goldens/llama.cpp-templates-goldens.json", 0, &je);
    if (!doc) LLMR_SKIP("goldens not found (run from the repository root): %s", je.text);
    json_t *goldens = json_object_get(doc, "goldens");
    size_t i, ok = 0, bad = 0, errors = 0;
    json_t *g;
    json_array_foreach(goldens, i, g) {
        const char *tname = json_string_value(json_object_get(g, "template"));
        const char *cname = json_string_value(json_object_get(g, "context"));
        char path[512];
        snprintf(path, sizeof path, DATA "%s", tname);
        size_t tlen;
        char *src = slurp(path, &tlen);
        ck_assert_msg(src != NULL, "missing %s", path);
        snprintf(path, sizeof path, DATA "goldens/contexts/%s.json", cname);
        json_t *ctx = json_load_file(path, 0, &je);
        ck_assert_msg(ctx != NULL, "context %s: %s", path, je.text);
        json_t *bos = json_object_get(g, "bos_token"), *eos = json_object_get(g, "eos_token");
        if (json_is_string(bos)) json_object_set(ctx, "bos_token", bos);
        if (json_is_string(eos)) json_object_set(ctx, "eos_token", eos);
        chat_prompt_context_defaults(ctx);
        char err[1024] = "";
        int st = 0;
        char *out = NULL;
        size_t olen = 0;
        jinja_template *t = jinja_parse(src, tlen, NULL, &st, NULL, err, sizeof err);
        if (t) {
            jinja_render_opts ro = { .now = NOW_20250710, .now_is_utc = 1 };
            st = jinja_render(t, ctx, &ro, &out, &olen, err, sizeof err);
        }
        json_t *exp = json_object_get(g, "expected"), *experr = json_object_get(g, "expected_error");
        bool good;
        if (experr) {
            /* "TypeError: msg" -> the renderer must fail with the same message */
            const char *e = json_string_value(experr), *colon = strstr(e, ": ");
            good = st != JINJA_OK && strstr(err, colon ? colon + 2 : e) != NULL;
            errors += good;
        } else good = st == JINJA_OK && olen == json_string_length(exp) && memcmp(out, json_string_value(exp), olen) == 0;
        if (good) ok++;
        else {
            bad++;
            printf("golden %zu %s / %s: %s\n", i, tname, cname, st ? err : "output differs");
        }
        free(out);
        jinja_destroy(t);
        json_decref(ctx);
        free(src);
    }
    printf("goldens: %zu ok (%zu expected errors), %zu failed\n", ok, errors, bad);
    ck_assert_uint_eq(json_array_size(goldens), 262);
    ck_assert_uint_eq(errors, 46);
    ck_assert_uint_eq(bad, 0);
    json_decref(doc);
}
END_TEST

START_TEST(conformance_hfjs_syntax_cases) {
    json_error_t je;
    size_t flen = 0;
    char *text = slurp(DATA "cases/hfjs-jinja-syntax-cases.json", &flen);
    if (!text) LLMR_SKIP("cases not found (run from the repository root)");
    /* two TOJSON_ENSURE_ASCII cases have a NUL in an object key, which jansson cannot hold; they
     * are skipped below, so neutralise the escape to load the rest of the file */
    for (char *p = text; (p = strstr(p, "\\u0000")) != NULL; p += 6) p[5] = '1';
    json_t *doc = json_loadb(text, flen, 0, &je);
    free(text);
    ck_assert_msg(doc != NULL, "hfjs cases: %s", je.text);
    size_t i, ok = 0, bad = 0, skipped = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *exp = json_object_get(c, "expected_python"), *perr = json_object_get(c, "python_error");
        /* no Python expectation (JS-only context), or a context key with a NUL byte jansson cannot hold */
        if (json_object_get(c, "skip_reason") || (!exp && !perr) || !strncmp(name, "TOJSON_ENSURE_ASCII", 19)) { skipped++; continue; }
        const char *src = json_string_value(json_object_get(c, "template"));
        json_t *ctx = json_deep_copy(json_object_get(c, "context"));
        char err[1024] = "";
        int st = 0;
        char *out = NULL;
        size_t olen = 0;
        jinja_template *t = jinja_parse(src, strlen(src), NULL, &st, NULL, err, sizeof err);
        if (t) {
            jinja_render_opts ro = { .now = NOW_20250710, .now_is_utc = 1 };
            st = jinja_render(t, ctx, &ro, &out, &olen, err, sizeof err);
        }
        bool good = json_is_string(exp) ? (st == JINJA_OK && olen == json_string_length(exp) && !memcmp(out, json_string_value(exp), olen))
                                        : st != JINJA_OK;
        if (good) ok++;
        else { bad++; printf("hfjs case %s: %s\n", name, st ? err : out); }
        free(out);
        jinja_destroy(t);
        json_decref(ctx);
    }
    printf("hf.js syntax cases: %zu ok, %zu failed, %zu without a Python expectation\n", ok, bad, skipped);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_ge(ok, 155);
    json_decref(doc);
}
END_TEST

START_TEST(conformance_llamacpp_cases) {
    json_error_t je;
    json_t *doc = json_load_file(DATA "cases/llama.cpp-test-chat-template.json", 0, &je);
    if (!doc) LLMR_SKIP("cases not found (run from the repository root): %s", je.text);
    size_t i, ok = 0, bad = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        json_t *ctx = json_object();
        json_object_set(ctx, "messages", json_object_get(doc, "messages"));
        json_object_set(ctx, "add_generation_prompt", json_object_get(doc, "add_generation_prompt"));
        json_object_set(ctx, "bos_token", json_object_get(c, "bos_token"));
        json_object_set(ctx, "eos_token", json_object_get(c, "eos_token"));
        chat_prompt_context_defaults(ctx);
        const char *src = json_string_value(json_object_get(c, "template_str"));
        json_t *exp = json_object_get(c, "expected_python_hf");
        char err[1024] = "";
        int st = 0;
        char *out = NULL;
        size_t olen = 0;
        jinja_template *t = jinja_parse(src, strlen(src), NULL, &st, NULL, err, sizeof err);
        if (t) {
            jinja_render_opts ro = { .now = NOW_20250710, .now_is_utc = 1 };
            st = jinja_render(t, ctx, &ro, &out, &olen, err, sizeof err);
        }
        bool good = json_is_string(exp) ? (st == JINJA_OK && olen == json_string_length(exp) && !memcmp(out, json_string_value(exp), olen))
                                        : st != JINJA_OK;
        if (good) ok++;
        else { bad++; printf("llama.cpp case %s: %s\n", json_string_value(json_object_get(c, "name")), st ? err : out); }
        free(out);
        jinja_destroy(t);
        json_decref(ctx);
    }
    printf("llama.cpp chat-template cases: %zu ok, %zu failed\n", ok, bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(ok, 33);
    json_decref(doc);
}
END_TEST

/* Cases generated with Python jinja2 3.1.6 in the transformers configuration (see the file's _origin).
 * KNOWN_GAPS lists the few whose Python behaviour this engine does not reproduce (docs/templates.md). */
static const char *const KNOWN_GAPS[] = {
    "10 ** 20",               /* integers are 64-bit: an error here, Python prints the big number */
    NULL };

START_TEST(conformance_jinja2_oracle_cases) {
    json_error_t je;
    json_t *doc = json_load_file(DATA "jinja2-oracle-cases.json", 0, &je);
    if (!doc) LLMR_SKIP("oracle cases not found (run from the repository root): %s", je.text);
    json_t *ctx0 = json_object_get(doc, "context"), *ctx1 = json_object_get(doc, "expr_context");
    size_t i, ok = 0, bad = 0, gaps = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        bool gap = false;
        for (const char *const *g = KNOWN_GAPS; *g; g++) if (strstr(src, *g)) gap = true;
        if (gap) { gaps++; continue; }
        json_t *exp = json_object_get(c, "expected");
        json_t *ctx = json_is_true(json_object_get(c, "use_expr_context")) ? ctx1 : ctx0;
        char err[1024] = "";
        int st = 0;
        char *out = NULL;
        size_t olen = 0;
        jinja_template *t = jinja_parse(src, strlen(src), NULL, &st, NULL, err, sizeof err);
        if (t) {
            jinja_render_opts ro = { .now = NOW_20250710, .now_is_utc = 1 };
            st = jinja_render(t, ctx, &ro, &out, &olen, err, sizeof err);
        }
        bool good = exp ? (st == JINJA_OK && olen == json_string_length(exp) && !memcmp(out, json_string_value(exp), olen))
                        : st != JINJA_OK;
        if (good) ok++;
        else { bad++; printf("oracle case %zu %s: %s\n", i, src, st ? err : out); }
        free(out);
        jinja_destroy(t);
    }
    printf("jinja2 oracle cases: %zu ok, %zu failed, %zu known gaps\n", ok, bad, gaps);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_ge(ok, 620);
    json_decref(doc);
}
END_TEST

/* One parsed template rendered from several threads at once gives the same bytes everywhere. */
typedef struct { const jinja_template *t; json_t *ctx; char *out; int st; } thr_arg;

static void *thr_render(void *p) {
    thr_arg *a = p;
    for (int i = 0; i < 50 && a->st == JINJA_OK; i++) {
        free(a->out);
        a->out = NULL;
        char err[256];
        jinja_render_opts ro = { .now = NOW_20250710, .now_is_utc = 1 };
        a->st = jinja_render(a->t, a->ctx, &ro, &a->out, NULL, err, sizeof err);
    }
    return NULL;
}

START_TEST(concurrent_renders) {
    size_t len;
    char *src = slurp(DATA "llama.cpp/openai-gpt-oss-120b.jinja", &len);
    if (!src) LLMR_SKIP("gpt-oss template not found (run from the repository root)");
    json_error_t je;
    json_t *ctx = json_load_file(DATA "goldens/contexts/tools_call_and_result.json", 0, &je);
    ck_assert_ptr_nonnull(ctx);
    chat_prompt_context_defaults(ctx);
    jinja_template *t = jinja_parse(src, len, NULL, NULL, NULL, NULL, 0);
    ck_assert_ptr_nonnull(t);
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) { args[i] = (thr_arg){ t, ctx, NULL, JINJA_OK }; pthread_create(&th[i], NULL, thr_render, &args[i]); }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(args[i].st, JINJA_OK);
        ck_assert_str_eq(args[i].out, args[0].out);
    }
    ck_assert_ptr_nonnull(strstr(args[0].out, "<|start|>assistant to=functions."));
    for (int i = 0; i < 4; i++) free(args[i].out);
    jinja_destroy(t);
    json_decref(ctx);
    free(src);
}
END_TEST

static Suite *jinja_suite(void) {
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, literals_and_python_str);
    tcase_add_test(tc, operators);
    tcase_add_test(tc, scoping_like_jinja2);
    tcase_add_test(tc, loops);
    tcase_add_test(tc, macros_and_calls);
    tcase_add_test(tc, whitespace_control);
    tcase_add_test(tc, filters);
    tcase_add_test(tc, tests_and_methods);
    tcase_add_test(tc, big_dicts_are_indexed);
    tcase_add_test(tc, sandbox_refuses_mutation);
    tcase_add_test(tc, raise_and_clock);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, syntax_errors_have_positions);
    tcase_add_test(tc, conformance_goldens);
    tcase_add_test(tc, conformance_hfjs_syntax_cases);
    tcase_add_test(tc, conformance_llamacpp_cases);
    tcase_add_test(tc, conformance_jinja2_oracle_cases);
    tcase_add_test(tc, concurrent_renders);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(jinja_suite)
