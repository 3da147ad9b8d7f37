/* options.c — see options.h. */
#include "common/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int set_value(const llmr_option *o, const char *v, const char *source) {
    if (o->type == LLMR_OPT_STRING) {
        *(const char **)o->target = v;
        return 0;
    }
    if (o->type == LLMR_OPT_BOOL) {
        if (!v || !strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) *(int *)o->target = 1;
        else if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) *(int *)o->target = 0;
        else { fprintf(stderr, "error: %s: --%s expects true/false, got '%s'\n", source, o->name, v); return -1; }
        return 0;
    }
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < -2147483647L || n > 2147483647L) {
        fprintf(stderr, "error: %s: --%s expects an integer, got '%s'\n", source, o->name, v);
        return -1;
    }
    *(int *)o->target = (int)n;
    return 0;
}

void llmr_options_usage(const char *prog, const char *description, const llmr_option *opts, int n) {
    printf("Usage: %s [options]\n\n%s\n\nOptions (flag, environment variable, default):\n", prog, description);
    for (int i = 0; i < n; i++) {
        const llmr_option *o = &opts[i];
        char flag[96];
        snprintf(flag, sizeof flag, "--%s%s", o->name, o->type == LLMR_OPT_BOOL ? "" : o->type == LLMR_OPT_INT ? " N" : " VALUE");
        printf("  %-30s %s\n", flag, o->help);
        if (o->env || o->def)
            printf("  %-30s %s%s%s%s%s\n", "", o->env ? "env " : "", o->env ? o->env : "", o->env && o->def ? ", " : "",
                   o->def ? "default " : "", o->def ? o->def : "");
    }
    printf("  %-30s %s\n", "--help", "show this help and exit");
}

int llmr_options_parse(const char *prog, const char *description, llmr_option *opts, int n, int argc, char **argv) {
    for (int i = 0; i < n; i++) {
        const char *env = opts[i].env ? getenv(opts[i].env) : NULL;
        const char *v = env && *env ? env : opts[i].def;
        if (opts[i].type == LLMR_OPT_STRING) *(const char **)opts[i].target = v;
        else if (v && set_value(&opts[i], v, env && *env ? opts[i].env : "default") != 0) return -1;
        else if (!v) *(int *)opts[i].target = 0;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { llmr_options_usage(prog, description, opts, n); return 1; }
        if (strncmp(arg, "--", 2) != 0) { fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", arg); return -1; }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        const llmr_option *o = NULL;
        for (int i = 0; i < n; i++)
            if (strlen(opts[i].name) == nl && !strncmp(opts[i].name, name, nl)) o = &opts[i];
        if (!o) { fprintf(stderr, "error: unknown option '%.*s' (see --help)\n", (int)(nl + 2), arg); return -1; }
        const char *v = eq ? eq + 1 : NULL;
        if (!v && o->type != LLMR_OPT_BOOL) {
            if (a + 1 >= argc) { fprintf(stderr, "error: --%s needs a value\n", o->name); return -1; }
            v = argv[++a];
        }
        if (set_value(o, v, "command line") != 0) return -1;
    }
    return 0;
}
