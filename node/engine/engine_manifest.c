/* engine_manifest.c — see engine_manifest.h. Rules mirror schema/engine-manifest.schema.json. */
#include "node/engine/engine_manifest.h"
#include "llmr_engine.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes "<origin>: field "<field>": <why>" into err; always returns -1 so callers can `return fail(...)`. */
static int fail(char *err, size_t err_size, const char *origin, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t err_size, const char *origin, const char *field, const char *fmt, ...) {
    if (!err || err_size == 0) return -1;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (field) snprintf(err, err_size, "%s: field \"%s\": %s", origin, field, why);
    else snprintf(err, err_size, "%s: %s", origin, why);
    return -1;
}

/* A short description of a JSON value's type for messages ("number 3", "array", ...). */
static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Character-class matchers standing in for the schema's patterns. */
static int is_lower_id_char(int c) { return islower(c) || isdigit(c) || c == '_' || c == '-'; }

static int match_id(const char *s) { /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
    size_t n = strlen(s);
    if (n < 1 || n > 64 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0]))) return 0;
    for (size_t i = 0; i < n; i++) if (!is_lower_id_char((unsigned char)s[i])) return 0;
    return 1;
}

static int match_runtime(const char *s) { /* ^[a-z0-9][a-z0-9_.-]{0,63}$ */
    size_t n = strlen(s);
    if (n < 1 || n > 64 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0]))) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_id_char((unsigned char)s[i]) && s[i] != '.') return 0;
    return 1;
}

static int match_arch(const char *s) { /* ^[A-Za-z0-9_.-]{1,128}$ */
    size_t n = strlen(s);
    if (n < 1 || n > 128) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-') return 0;
    }
    return 1;
}

static int file_char(unsigned char c) { return isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-'; }

static int match_library(const char *s) { /* ^[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,254}$ */
    size_t n = strlen(s);
    if (n < 1 || n > 255 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) if (!file_char((unsigned char)s[i])) return 0;
    return 1;
}

static int match_artifact_name(const char *s) { /* segments of file chars joined by '/', no "." or ".." */
    size_t n = strlen(s);
    if (n < 1 || n > 255) return 0;
    const char *seg = s;
    for (size_t i = 0; i <= n; i++) {
        if (s[i] == '/' || s[i] == 0) {
            size_t len = (size_t)(s + i - seg);
            if (len == 0) return 0;
            if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) return 0;
            seg = s + i + 1;
        } else if (!file_char((unsigned char)s[i])) return 0;
    }
    return 1;
}

/* ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$, at most 64 chars. */
static int match_semver(const char *s) {
    if (strlen(s) > 64) return 0;
    const char *p = s;
    for (int part = 0; part < 3; part++) {
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
        if (part < 2 && *p++ != '.') return 0;
    }
    if (*p == 0) return 1;
    if (*p != '-' && *p != '+') return 0;
    if (*++p == 0) return 0;
    for (; *p; p++) if (!isalnum((unsigned char)*p) && *p != '.' && *p != '+' && *p != '-') return 0;
    return 1;
}

/* "A.B" with each part of 1..max_digits digits; values into *a, *b. */
static int parse_two_numbers(const char *s, int max_digits, long *a, long *b) {
    const char *p = s;
    long v[2];
    for (int part = 0; part < 2; part++) {
        int digits = 0;
        long x = 0;
        while (isdigit((unsigned char)*p)) { x = x * 10 + (*p - '0'); p++; if (++digits > max_digits) return -1; }
        if (digits == 0) return -1;
        v[part] = x;
        if (part == 0 && *p++ != '.') return -1;
    }
    if (*p) return -1;
    *a = v[0]; *b = v[1];
    return 0;
}

int llmr_abi_version_parse(const char *s, uint32_t *out) {
    long a, b;
    if (!s || parse_two_numbers(s, 4, &a, &b) != 0) return -1; /* at most 4 digits each, as the schema says */
    *out = (uint32_t)((a << 16) | b);
    return 0;
}

static void free_strv(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

void llmr_engine_manifest_free(llmr_engine_manifest *m) {
    if (!m) return;
    free(m->id); free(m->version); free(m->description); free(m->library);
    free(m->dir); free(m->library_path);
    free_strv(m->runtimes, m->n_runtimes);
    free_strv(m->formats, m->n_formats);
    free_strv(m->architectures, m->n_architectures);
    free_strv(m->gpu_backends, m->n_gpu_backends);
    for (size_t i = 0; i < m->n_artifacts; i++) free(m->artifacts[i].name);
    free(m->artifacts);
    free(m);
}

typedef int (*str_rule)(const char *);

static int in_enum(const char *s, const char *const *allowed) {
    for (; *allowed; allowed++) if (strcmp(s, *allowed) == 0) return 1;
    return 0;
}

/* Reads a required string field checked by `rule`; *out gets a copy. */
static int get_string(json_t *root, const char *field, int required, str_rule rule, const char *rule_text,
                      char **out, const char *origin, char *err, size_t err_size) {
    json_t *v = json_object_get(root, field);
    if (!v) {
        if (required) return fail(err, err_size, origin, field, "required field is missing");
        *out = NULL;
        return 0;
    }
    if (!json_is_string(v)) return fail(err, err_size, origin, field, "expected a string, got %s", json_kind(v));
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) return fail(err, err_size, origin, field, "contains a NUL byte");
    if (rule && !rule(s)) return fail(err, err_size, origin, field, "\"%.80s\" does not match %s", s, rule_text);
    if (!(*out = strdup(s))) return fail(err, err_size, origin, field, "out of memory");
    return 0;
}

/* Reads an array of unique strings; each checked by `rule` or `allowed` (one of them non-NULL). */
static int get_string_array(json_t *root, const char *field, size_t min_items, str_rule rule,
                            const char *rule_text, const char *const *allowed, char ***out, size_t *n_out,
                            const char *origin, char *err, size_t err_size) {
    json_t *v = json_object_get(root, field);
    if (!v) return fail(err, err_size, origin, field, "required field is missing");
    if (!json_is_array(v)) return fail(err, err_size, origin, field, "expected an array, got %s", json_kind(v));
    size_t n = json_array_size(v);
    if (n < min_items) return fail(err, err_size, origin, field, "needs at least %zu item(s), got 0", min_items);
    if (n > 256) return fail(err, err_size, origin, field, "too many items (%zu; limit 256)", n);
    char **items = calloc(n ? n : 1, sizeof *items);
    if (!items) return fail(err, err_size, origin, field, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(v, i);
        const char *s = json_is_string(it) ? json_string_value(it) : NULL;
        int ok = s && strlen(s) == json_string_length(it);
        if (!ok) {
            free_strv(items, i);
            return fail(err, err_size, origin, field, "item %zu: expected a string, got %s", i, json_kind(it));
        }
        if ((rule && !rule(s)) || (allowed && !in_enum(s, allowed))) {
            free_strv(items, i);
            return fail(err, err_size, origin, field, "item %zu: \"%.80s\" is not %s", i, s, rule_text);
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(items[j], s) == 0) {
                free_strv(items, i);
                return fail(err, err_size, origin, field, "item %zu: \"%.80s\" is listed twice", i, s);
            }
        if (!(items[i] = strdup(s))) { free_strv(items, i); return fail(err, err_size, origin, field, "out of memory"); }
    }
    *out = items;
    *n_out = n;
    return 0;
}

/* An integer field within [lo, hi]; *out keeps `dflt` when the field is absent and not required. */
static int get_int(json_t *root, const char *field, int required, long lo, long hi, int dflt, int *out,
                   const char *origin, char *err, size_t err_size) {
    json_t *v = json_object_get(root, field);
    *out = dflt;
    if (!v) return required ? fail(err, err_size, origin, field, "required field is missing") : 0;
    if (!json_is_integer(v)) return fail(err, err_size, origin, field, "expected an integer, got %s", json_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(err, err_size, origin, field, "%lld is outside %ld..%ld", (long long)x, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_artifacts(json_t *root, llmr_engine_manifest *m, const char *origin, char *err, size_t err_size) {
    json_t *v = json_object_get(root, "artifacts");
    if (!v) return 0;
    if (!json_is_array(v)) return fail(err, err_size, origin, "artifacts", "expected an array, got %s", json_kind(v));
    size_t n = json_array_size(v);
    if (n > 256) return fail(err, err_size, origin, "artifacts", "too many items (%zu; limit 256)", n);
    m->artifacts = calloc(n ? n : 1, sizeof *m->artifacts);
    if (!m->artifacts) return fail(err, err_size, origin, "artifacts", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(v, i);
        char field[64];
        if (!json_is_object(it))
            return fail(err, err_size, origin, "artifacts", "item %zu: expected an object, got %s", i, json_kind(it));
        const char *key;
        json_t *val;
        json_object_foreach(it, key, val) {
            if (strcmp(key, "name") != 0 && strcmp(key, "priority") != 0)
                return fail(err, err_size, origin, "artifacts", "item %zu: unknown field \"%.60s\"", i, key);
        }
        snprintf(field, sizeof field, "artifacts[%zu].name", i);
        char *name = NULL;
        if (get_string(it, "name", 1, match_artifact_name, "a relative file name (no \".\", \"..\" or empty segments)",
                       &name, origin, err, err_size) != 0) {
            /* re-label with the indexed field name */
            char tmp[512];
            const char *why = strstr(err, ": field \"name\": ");
            snprintf(tmp, sizeof tmp, "%s", why ? why + strlen(": field \"name\": ") : "invalid");
            return fail(err, err_size, origin, field, "%s", tmp);
        }
        m->artifacts[i].name = name;
        m->n_artifacts = i + 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(m->artifacts[j].name, name) == 0)
                return fail(err, err_size, origin, field, "\"%.80s\" is listed twice", name);
        snprintf(field, sizeof field, "artifacts[%zu].priority", i);
        if (get_int(it, "priority", 1, 0, 1000, 0, &m->artifacts[i].priority, origin, err, err_size) != 0) {
            char tmp[512];
            const char *why = strstr(err, ": field \"priority\": ");
            snprintf(tmp, sizeof tmp, "%s", why ? why + strlen(": field \"priority\": ") : "invalid");
            return fail(err, err_size, origin, field, "%s", tmp);
        }
    }
    return 0;
}

static const char *const known_fields[] = {"$schema", "id", "version", "abi_version", "description", "runtimes",
                                           "formats", "architectures", "gpu_backends", "library", "artifacts",
                                           "min_compute_capability", "priority", NULL};
static const char *const formats_enum[] = {"safetensors", "gguf", NULL};
static const char *const backends_enum[] = {"cuda", "metal", "rocm", "cpu", NULL};

/* Validates the document's fields in schema order, filling m. */
static int validate(json_t *root, llmr_engine_manifest *m, const char *origin, char *err, size_t err_size) {
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        (void)val;
        if (!in_enum(key, known_fields)) return fail(err, err_size, origin, key, "unknown field (typo?)");
    }
    if (get_string(root, "id", 1, match_id, "^[a-z0-9][a-z0-9_-]{0,63}$", &m->id, origin, err, err_size)) return -1;
    if (get_string(root, "version", 1, match_semver, "a semantic version (1.2.3)", &m->version, origin, err,
                   err_size)) return -1;
    json_t *abi = json_object_get(root, "abi_version");
    if (!abi) return fail(err, err_size, origin, "abi_version", "required field is missing");
    if (!json_is_string(abi) || llmr_abi_version_parse(json_string_value(abi), &m->abi_version) != 0) {
        if (json_is_string(abi))
            return fail(err, err_size, origin, "abi_version", "expected \"MAJOR.MINOR\", got \"%.40s\"",
                        json_string_value(abi));
        return fail(err, err_size, origin, "abi_version", "expected \"MAJOR.MINOR\" string, got %s", json_kind(abi));
    }
    if (get_string(root, "description", 0, NULL, NULL, &m->description, origin, err, err_size)) return -1;
    if (m->description && strlen(m->description) > 512)
        return fail(err, err_size, origin, "description", "longer than 512 bytes");
    if (!m->description && !(m->description = strdup(""))) return fail(err, err_size, origin, NULL, "out of memory");
    if (get_string_array(root, "runtimes", 1, match_runtime, "a runtime id (^[a-z0-9][a-z0-9_.-]{0,63}$)", NULL,
                         &m->runtimes, &m->n_runtimes, origin, err, err_size)) return -1;
    if (get_string_array(root, "formats", 0, NULL, "one of safetensors, gguf", formats_enum, &m->formats,
                         &m->n_formats, origin, err, err_size)) return -1;
    if (get_string_array(root, "architectures", 1, match_arch, "an architecture name (^[A-Za-z0-9_.-]{1,128}$)",
                         NULL, &m->architectures, &m->n_architectures, origin, err, err_size)) return -1;
    if (get_string_array(root, "gpu_backends", 1, NULL, "one of cuda, metal, rocm, cpu", backends_enum,
                         &m->gpu_backends, &m->n_gpu_backends, origin, err, err_size)) return -1;
    if (get_string(root, "library", 1, match_library, "a plain file name in the plugin folder", &m->library, origin,
                   err, err_size)) return -1;
    if (get_artifacts(root, m, origin, err, err_size)) return -1;
    if (m->n_formats == 0 && m->n_artifacts == 0)
        return fail(err, err_size, origin, "formats", "is empty and no artifacts are listed: the engine could run nothing");
    char *cc = NULL;
    m->min_cc_major = m->min_cc_minor = -1;
    if (get_string(root, "min_compute_capability", 0, NULL, NULL, &cc, origin, err, err_size)) return -1;
    if (cc) {
        long a, b;
        int bad = parse_two_numbers(cc, 2, &a, &b) != 0;
        if (bad) {
            fail(err, err_size, origin, "min_compute_capability", "expected \"MAJOR.MINOR\" such as \"8.0\", got \"%.40s\"", cc);
            free(cc);
            return -1;
        }
        m->min_cc_major = (int)a;
        m->min_cc_minor = (int)b;
        free(cc);
    }
    return get_int(root, "priority", 0, 0, 1000, 0, &m->priority, origin, err, err_size);
}

int llmr_engine_manifest_parse(const char *text, size_t len, const char *dir, const char *origin,
                               llmr_engine_manifest **out, char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!origin) origin = "manifest.json";
    if (!text || !dir || !out) return fail(err, err_size, origin, NULL, "invalid arguments");
    if (len > LLMR_MANIFEST_MAX_BYTES)
        return fail(err, err_size, origin, NULL, "%zu bytes is over the %d-byte limit", len, LLMR_MANIFEST_MAX_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return fail(err, err_size, origin, NULL, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    int rc = -1;
    llmr_engine_manifest *m = calloc(1, sizeof *m);
    if (!m) { fail(err, err_size, origin, NULL, "out of memory"); goto done; }
    if (!json_is_object(root)) { fail(err, err_size, origin, NULL, "expected a JSON object, got %s", json_kind(root)); goto done; }
    if (validate(root, m, origin, err, err_size) != 0) goto done;
    m->dir = strdup(dir);
    size_t pl = strlen(dir) + strlen(m->library) + 2;
    m->library_path = malloc(pl);
    if (!m->dir || !m->library_path) { fail(err, err_size, origin, NULL, "out of memory"); goto done; }
    snprintf(m->library_path, pl, "%s/%s", dir, m->library);
    *out = m;
    m = NULL;
    rc = 0;
done:
    llmr_engine_manifest_free(m);
    json_decref(root);
    return rc;
}

int llmr_engine_manifest_load(const char *dir, llmr_engine_manifest **out, char *err, size_t err_size) {
    char path[4096];
    if (!dir) return fail(err, err_size, "manifest.json", NULL, "no plugin folder given");
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, err_size, path, NULL, "cannot open: %s", strerror(errno));
    char *buf = malloc(LLMR_MANIFEST_MAX_BYTES + 1);
    if (!buf) { fclose(f); return fail(err, err_size, path, NULL, "out of memory"); }
    size_t n = fread(buf, 1, LLMR_MANIFEST_MAX_BYTES + 1, f);
    int rerr = ferror(f);
    fclose(f);
    int rc;
    if (rerr) rc = fail(err, err_size, path, NULL, "read error");
    else rc = llmr_engine_manifest_parse(buf, n, dir, path, out, err, err_size);
    free(buf);
    return rc;
}

static int strv_has(char *const *v, size_t n, const char *s) {
    if (!s) return 0;
    for (size_t i = 0; i < n; i++) if (strcmp(v[i], s) == 0) return 1;
    return 0;
}

int llmr_engine_manifest_has_runtime(const llmr_engine_manifest *m, const char *r) { return strv_has(m->runtimes, m->n_runtimes, r); }
int llmr_engine_manifest_has_format(const llmr_engine_manifest *m, const char *f) { return strv_has(m->formats, m->n_formats, f); }
int llmr_engine_manifest_has_architecture(const llmr_engine_manifest *m, const char *a) { return strv_has(m->architectures, m->n_architectures, a); }
int llmr_engine_manifest_has_backend(const llmr_engine_manifest *m, const char *b) { return strv_has(m->gpu_backends, m->n_gpu_backends, b); }
