/* template_check.c — see template_check.h. The Jinja engine lives in router/template/ (branch
 * jinja); until it is merged this file compiles without it and reports itself unavailable. */
#include "router/template_check.h"

#include <stdio.h>

#if defined(__has_include)
#if __has_include("router/template/jinja.h")
#define HAVE_JINJA 1
#include "router/template/jinja.h"
#endif
#endif

#ifdef HAVE_JINJA
const int router_template_check_available = 1;

int router_template_check(const char *src, size_t len, int *line, int *column, char *err, size_t es) {
    jinja_parse_opts o;
    jinja_parse_opts_default(&o);
    int status = 0;
    jinja_pos pos = {0, 0, 0};
    jinja_template *t = jinja_parse(src, len, &o, &status, &pos, err, es);
    if (t) {
        jinja_destroy(t);
        return 0;
    }
    *line = pos.line;
    *column = pos.column;
    return -1;
}
#else
const int router_template_check_available = 0;

int router_template_check(const char *src, size_t len, int *line, int *column, char *err, size_t es) {
    (void)src;
    (void)len;
    *line = *column = 0;
    snprintf(err, es, "no template engine in this build");
    return -1;
}
#endif
