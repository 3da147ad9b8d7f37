/* manifest.c — see manifest.h. */
#include "node/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/path_safety.h"

static int is_sha256(const char *s) {
    if (!s || strlen(s) != 64) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* A required string field: copies it into *out. */
static int req_str(json_t *o, const char *key, const char *where, char **out, char *err, size_t es) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) return llmr_errf(err, es, "%s%s: %s", where, key, v ? "expected a string" : "missing");
    if (!(*out = strdup(json_string_value(v)))) return llmr_errf(err, es, "out of memory");
    return 0;
}

static void file_free(llmr_manifest_file *f) {
    free(f->name); free(f->url); free(f->backend); free(f->source_repo);
}

static int parse_file(json_t *o, const char *where, int artifact, llmr_manifest_file *f, char *err, size_t es) {
    char why[256];
    if (!json_is_object(o)) return llmr_errf(err, es, "%s: expected an object", where);
    char w[128];
    snprintf(w, sizeof w, "%s.", where);
    if (req_str(o, "name", w, &f->name, err, es) || req_str(o, "url", w, &f->url, err, es)) return -1;
    if (!*f->name) return llmr_errf(err, es, "%sname: empty", w);
    if (!*f->url) return llmr_errf(err, es, "%surl: empty", w);
    if (!llmr_path_is_safe(f->name, why, sizeof why)) return llmr_errf(err, es, "%sname '%s': %s", w, f->name, why);
    json_t *size = json_object_get(o, "size");
    if (!json_is_integer(size) || json_integer_value(size) < 0)
        return llmr_errf(err, es, "%ssize: expected a non-negative integer", w);
    f->size = (uint64_t)json_integer_value(size);
    json_t *sha = json_object_get(o, "sha256");
    if (!json_is_string(sha) || !is_sha256(json_string_value(sha)))
        return llmr_errf(err, es, "%ssha256: expected 64 lower-case hex digits", w);
    memcpy(f->sha256, json_string_value(sha), 65);
    json_t *opt = json_object_get(o, "optional");
    if (opt && !json_is_boolean(opt)) return llmr_errf(err, es, "%soptional: expected a boolean", w);
    f->optional = json_is_true(opt);
    if (artifact) {
        if (req_str(o, "backend", w, &f->backend, err, es) || req_str(o, "source_repo", w, &f->source_repo, err, es))
            return -1;
        f->optional = 1; /* artifacts are an execution cache: never fatal (issue 4) */
    }
    return 0;
}

static int parse_files(json_t *arr, const char *key, int artifact, llmr_manifest_file **out, size_t *n_out, char *err,
                       size_t es) {
    if (!json_is_array(arr)) return llmr_errf(err, es, "%s: %s", key, arr ? "expected an array" : "missing");
    size_t n = json_array_size(arr);
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out) return llmr_errf(err, es, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "%s[%zu]", key, i);
        (*n_out)++;
        if (parse_file(json_array_get(arr, i), where, artifact, &(*out)[i], err, es)) return -1;
    }
    return 0;
}

void llmr_manifest_free(llmr_manifest *m) {
    if (!m) return;
    free(m->id); free(m->format); free(m->revision); free(m->commit); free(m->runtime); free(m->architecture);
    for (size_t i = 0; i < m->n_files; i++) file_free(&m->files[i]);
    for (size_t i = 0; i < m->n_artifacts; i++) file_free(&m->artifacts[i]);
    free(m->files);
    free(m->artifacts);
    free(m);
}

/* Names must be unique over files and artifacts: they share the model folder. */
static int check_unique(const llmr_manifest *m, char *err, size_t es) {
    size_t n = m->n_files + m->n_artifacts;
    for (size_t i = 0; i < n; i++) {
        const char *a = i < m->n_files ? m->files[i].name : m->artifacts[i - m->n_files].name;
        for (size_t j = i + 1; j < n; j++) {
            const char *b = j < m->n_files ? m->files[j].name : m->artifacts[j - m->n_files].name;
            if (strcmp(a, b) == 0) return llmr_errf(err, es, "file name '%s' appears twice", a);
        }
    }
    return 0;
}

int llmr_manifest_parse(const char *text, size_t len, llmr_manifest **out, char *err, size_t es) {
    json_error_t je;
    json_t *root = json_loadb(text ? text : "", text ? len : 0, 0, &je);
    if (!root) return llmr_errf(err, es, "manifest is not valid JSON: %s (line %d)", je.text, je.line);
    llmr_manifest *m = calloc(1, sizeof *m);
    int rc = -1;
    if (!m) { llmr_errf(err, es, "out of memory"); goto out; }
    if (!json_is_object(root)) { llmr_errf(err, es, "manifest: expected an object"); goto out; }
    if (req_str(root, "id", "", &m->id, err, es) || req_str(root, "format", "", &m->format, err, es) ||
        req_str(root, "revision", "", &m->revision, err, es) || req_str(root, "commit", "", &m->commit, err, es) ||
        req_str(root, "runtime", "", &m->runtime, err, es))
        goto out;
    if (!*m->id) { llmr_errf(err, es, "id: empty"); goto out; }
    json_t *arch = json_object_get(root, "architecture");
    if (json_is_string(arch) && !(m->architecture = strdup(json_string_value(arch)))) { llmr_errf(err, es, "out of memory"); goto out; }
    if (parse_files(json_object_get(root, "files"), "files", 0, &m->files, &m->n_files, err, es) ||
        parse_files(json_object_get(root, "artifacts"), "artifacts", 1, &m->artifacts, &m->n_artifacts, err, es) ||
        check_unique(m, err, es))
        goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc == 0) *out = m;
    else llmr_manifest_free(m);
    return rc;
}

uint64_t llmr_manifest_total_size(const llmr_manifest *m) {
    uint64_t t = 0;
    for (size_t i = 0; i < m->n_files; i++) t += m->files[i].size;
    return t;
}
