/* artifacts.c — see artifacts.h. */
#include "router/artifacts.h"

#include <ctype.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/path_safety.h"

struct router_artifacts {
    router_supported_model *models;
    size_t n_models;
    char **globs;
    size_t n_globs;
    char *allowlist;
};

void router_artifacts_destroy(router_artifacts *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n_models; i++) {
        router_supported_model *m = &a->models[i];
        for (size_t k = 0; k < m->n_artifacts; k++) {
            free(m->artifacts[k].backend);
            free(m->artifacts[k].source_repo);
            free(m->artifacts[k].path);
            free(m->artifacts[k].name);
        }
        free(m->artifacts);
        free(m->id);
        free(m->runtime);
    }
    free(a->models);
    for (size_t i = 0; i < a->n_globs; i++) free(a->globs[i]);
    free(a->globs);
    free(a->allowlist);
    free(a);
}

static void lower(char *s) {
    for (; s && *s; s++) *s = (char)tolower((unsigned char)*s);
}

/* A required non-empty string field; NULL with a message naming the JSON path otherwise. */
static char *req_str(json_t *o, const char *key, const char *name, const char *where, char *err, size_t es) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || !json_string_length(v)) {
        snprintf(err, es, "%s: %s.%s must be a non-empty string", name, where, key);
        return NULL;
    }
    char *s = strdup(json_string_value(v));
    if (!s) snprintf(err, es, "out of memory");
    return s;
}

static int parse_globs(router_artifacts *a, const char *list, char *err, size_t es) {
    a->allowlist = strdup(list ? list : "");
    if (!a->allowlist) { snprintf(err, es, "out of memory"); return -1; }
    char *copy = strdup(a->allowlist), *save = NULL;
    if (!copy) { snprintf(err, es, "out of memory"); return -1; }
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        size_t n = strlen(t);
        while (n && isspace((unsigned char)t[n - 1])) t[--n] = 0;
        if (!n) continue;
        char **g = realloc(a->globs, (a->n_globs + 1) * sizeof *g);
        if (!g || !(g[a->n_globs] = strdup(t))) {
            if (g) a->globs = g;
            free(copy);
            snprintf(err, es, "out of memory");
            return -1;
        }
        lower(g[a->n_globs]);
        a->globs = g;
        a->n_globs++;
    }
    free(copy);
    return 0;
}

static int parse_artifact(router_artifact *r, json_t *o, const char *name, const char *where, char *err, size_t es) {
    if (!json_is_object(o)) { snprintf(err, es, "%s: %s must be an object", name, where); return -1; }
    if (!(r->backend = req_str(o, "backend", name, where, err, es)) ||
        !(r->source_repo = req_str(o, "source_repo", name, where, err, es)) ||
        !(r->path = req_str(o, "path", name, where, err, es)) || !(r->name = req_str(o, "name", name, where, err, es)))
        return -1;
    char why[256];
    if (!llmr_path_is_safe(r->path, why, sizeof why)) {
        snprintf(err, es, "%s: %s.path '%s': %s", name, where, r->path, why);
        return -1;
    }
    if (!llmr_path_is_safe(r->name, why, sizeof why) || strchr(r->name, '/')) {
        snprintf(err, es, "%s: %s.name '%s' must be a plain file name", name, where, r->name);
        return -1;
    }
    const char *slash = strchr(r->source_repo, '/');
    if (!slash || slash == r->source_repo || !slash[1] || strchr(slash + 1, '/')) {
        snprintf(err, es, "%s: %s.source_repo '%s' must be OWNER/NAME", name, where, r->source_repo);
        return -1;
    }
    return 0;
}

static int parse_model(router_supported_model *m, json_t *o, const char *name, size_t i, char *err, size_t es) {
    char where[64];
    snprintf(where, sizeof where, "models[%zu]", i);
    if (!json_is_object(o)) { snprintf(err, es, "%s: %s must be an object", name, where); return -1; }
    if (!(m->id = req_str(o, "id", name, where, err, es))) return -1;
    lower(m->id);
    json_t *rt = json_object_get(o, "runtime");
    if (rt && !json_is_string(rt)) { snprintf(err, es, "%s: %s.runtime must be a string", name, where); return -1; }
    if (rt && !(m->runtime = strdup(json_string_value(rt)))) { snprintf(err, es, "out of memory"); return -1; }
    json_t *arts = json_object_get(o, "artifacts");
    if (!json_is_array(arts)) { snprintf(err, es, "%s: %s.artifacts must be an array", name, where); return -1; }
    if (json_array_size(arts) && !(m->artifacts = calloc(json_array_size(arts), sizeof *m->artifacts))) {
        snprintf(err, es, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < json_array_size(arts); k++) {
        char aw[96];
        snprintf(aw, sizeof aw, "%s.artifacts[%zu]", where, k);
        m->n_artifacts = k + 1;
        if (parse_artifact(&m->artifacts[k], json_array_get(arts, k), name, aw, err, es)) return -1;
    }
    return 0;
}

router_artifacts *router_artifacts_parse(const char *name, const char *text, size_t len, const char *allowlist,
                                         char *err, size_t es) {
    router_artifacts *a = calloc(1, sizeof *a);
    if (!a) { snprintf(err, es, "out of memory"); return NULL; }
    if (parse_globs(a, allowlist, err, es)) { router_artifacts_destroy(a); return NULL; }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, es, "%s: invalid JSON at line %d column %d: %s", name, je.line, je.column, je.text);
        router_artifacts_destroy(a);
        return NULL;
    }
    json_t *models = json_object_get(root, "models");
    int bad = 0;
    if (!json_is_object(root) || !json_is_array(models)) {
        snprintf(err, es, "%s: the top level must be an object with a 'models' array", name);
        bad = 1;
    } else if (json_array_size(models) && !(a->models = calloc(json_array_size(models), sizeof *a->models))) {
        snprintf(err, es, "out of memory");
        bad = 1;
    }
    for (size_t i = 0; !bad && i < json_array_size(models); i++) {
        a->n_models = i + 1;
        bad = parse_model(&a->models[i], json_array_get(models, i), name, i, err, es) != 0;
        for (size_t k = 0; !bad && k < i; k++)
            if (!strcmp(a->models[k].id, a->models[i].id)) {
                snprintf(err, es, "%s: models[%zu].id '%s' is listed twice", name, i, a->models[i].id);
                bad = 1;
            }
    }
    json_decref(root);
    if (bad) { router_artifacts_destroy(a); return NULL; }
    return a;
}

router_artifacts *router_artifacts_load(const char *path, const char *allowlist, char *err, size_t es) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, es, "%s: cannot open: %m", path); return NULL; }
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[8192];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n > (16u << 20)) { fclose(f); free(buf); snprintf(err, es, "%s: larger than 16 MiB", path); return NULL; }
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *b = realloc(buf, cap);
            if (!b) { fclose(f); free(buf); snprintf(err, es, "out of memory"); return NULL; }
            buf = b;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) { free(buf); snprintf(err, es, "%s: read error", path); return NULL; }
    router_artifacts *a = router_artifacts_parse(path, buf ? buf : "", len, allowlist, err, es);
    free(buf);
    return a;
}

const router_supported_model *router_artifacts_find(const router_artifacts *a, const char *model_id) {
    if (!a) return NULL;
    for (size_t i = 0; i < a->n_models; i++)
        if (!strcasecmp(a->models[i].id, model_id)) return &a->models[i];
    return NULL;
}

int router_artifacts_allowed(const router_artifacts *a, const char *repo) {
    if (!a) return 0;
    char low[512];
    snprintf(low, sizeof low, "%s", repo);
    lower(low);
    for (size_t i = 0; i < a->n_globs; i++)
        if (fnmatch(a->globs[i], low, 0) == 0) return 1;
    return 0;
}

const char *router_artifacts_allowlist(const router_artifacts *a) { return a ? a->allowlist : ""; }
