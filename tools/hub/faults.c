/* faults.c — see faults.h. */
#include "tools/hub/faults.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_one(hub_fault *ft, const char *s, char *err, size_t es) {
    memset(ft, 0, sizeof *ft);
    ft->remaining = -1;
    const char *colon = strchr(s, ':');
    if (!colon) { snprintf(err, es, "fault '%s': expected KIND:GLOB[@N]", s); return -1; }
    size_t kl = (size_t)(colon - s);
    if (kl == 7 && !strncmp(s, "corrupt", kl)) ft->kind = FAULT_CORRUPT;
    else if (kl == 4 && !strncmp(s, "drop", kl)) ft->kind = FAULT_DROP;
    else if (kl == 4 && !strncmp(s, "hide", kl)) ft->kind = FAULT_HIDE;
    else if (kl == 12 && !strncmp(s, "ignore-range", kl)) ft->kind = FAULT_IGNORE_RANGE;
    else if (kl > 7 && !strncmp(s, "status=", 7)) {
        ft->kind = FAULT_STATUS;
        char *end;
        long code = strtol(s + 7, &end, 10);
        if (end != colon || code < 400 || code > 599) {
            snprintf(err, es, "fault '%s': status=CODE needs a code in 400..599", s);
            return -1;
        }
        ft->status = (int)code;
    } else {
        snprintf(err, es, "fault '%s': unknown kind (corrupt, drop, hide, ignore-range, status=CODE)", s);
        return -1;
    }
    const char *g = colon + 1, *at = strrchr(g, '@');
    size_t gl = at ? (size_t)(at - g) : strlen(g);
    if (at) {
        char *end;
        long n = strtol(at + 1, &end, 10);
        if (*end || n < 1) { snprintf(err, es, "fault '%s': @N needs a positive count", s); return -1; }
        ft->remaining = (int)n;
    }
    if (gl == 0 || gl >= sizeof ft->glob) { snprintf(err, es, "fault '%s': empty or too long glob", s); return -1; }
    memcpy(ft->glob, g, gl);
    ft->glob[gl] = 0;
    return 0;
}

int hub_faults_parse(hub_faults *f, const char *spec, char *err, size_t es) {
    if (!spec) return 0;
    char *copy = strdup(spec), *save = NULL;
    if (!copy) { snprintf(err, es, "out of memory"); return -1; }
    int rc = 0;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (f->n >= (int)(sizeof f->v / sizeof f->v[0])) { snprintf(err, es, "too many faults (max 64)"); rc = -1; break; }
        if (parse_one(&f->v[f->n], tok, err, es) != 0) { rc = -1; break; }
        f->n++;
    }
    free(copy);
    return rc;
}

const hub_fault *hub_faults_match(hub_faults *f, fault_kind k, const char *repo, const char *path, int peek) {
    char full[2048];
    snprintf(full, sizeof full, "%s/%s", repo, path);
    for (int i = 0; i < f->n; i++) {
        hub_fault *ft = &f->v[i];
        if (ft->kind != k || ft->remaining == 0 || fnmatch(ft->glob, full, 0) != 0) continue;
        if (!peek && ft->remaining > 0) ft->remaining--;
        return ft;
    }
    return NULL;
}
