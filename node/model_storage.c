/* model_storage.c — see model_storage.h. The heavy checks (index vs shards vs headers) are
 * common/checkpoint.c's; this module adds what the node needs around them: required files, a list
 * of every missing shard at once, the error classes, and the descriptor. */
#include "node/model_storage.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/errmsg.h"
#include "common/checkpoint.h"
#include "common/path_safety.h"
#include "node/json_check.h"

#define INDEX_NAME "model.safetensors.index.json"

const char *llmr_storage_strerror(llmr_storage_status st) {
    switch (st) {
    case LLMR_STORAGE_OK: return "ok";
    case LLMR_STORAGE_EINVAL: return "invalid argument";
    case LLMR_STORAGE_ENOMEM: return "out of memory";
    case LLMR_STORAGE_EMISSING_FILE: return "required file missing";
    case LLMR_STORAGE_EBAD_JSON: return "file is not valid JSON";
    case LLMR_STORAGE_EBAD_CONFIG: return "config.json does not describe a model";
    case LLMR_STORAGE_EMISSING_SHARD: return "shard missing";
    case LLMR_STORAGE_EINCONSISTENT: return "shards inconsistent with the index";
    case LLMR_STORAGE_EAMBIGUOUS: return "several weight files and no index";
    case LLMR_STORAGE_EIO: return "file could not be removed";
    }
    return "unknown status";
}

const char *llmr_storage_runtime_for(const char *architecture) {
    if (architecture && strcmp(architecture, "GptOssForCausalLM") == 0) return "gptoss";
    return "unknown";
}


static int file_exists(const char *dir, const char *name) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Loads dir/name as JSON. Missing -> EMISSING_FILE, unparseable -> EBAD_JSON (line and cause). */
static llmr_storage_status load_json(const char *dir, const char *name, json_t **out, char *err, size_t es) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(dir, name)) return llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "%s is missing in %s", name, dir);
    json_error_t je;
    *out = json_load_file(path, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
    if (!*out) return llmr_errf_status(LLMR_STORAGE_EBAD_JSON, err, es, "%s: not valid JSON: %s (line %d)", name, je.text, je.line);
    return LLMR_STORAGE_OK;
}

/* architectures[0], else model_type, from config.json. */
static llmr_storage_status read_config(const char *dir, char **arch_out, char *err, size_t es) {
    json_t *cfg;
    llmr_storage_status st = load_json(dir, "config.json", &cfg, err, es);
    if (st) return st;
    const char *arch = NULL;
    if (json_is_object(cfg)) {
        json_t *a = json_object_get(cfg, "architectures");
        if (json_is_array(a) && json_is_string(json_array_get(a, 0))) arch = json_string_value(json_array_get(a, 0));
        else if (json_is_string(json_object_get(cfg, "model_type"))) arch = json_string_value(json_object_get(cfg, "model_type"));
    }
    if (!arch || !*arch) {
        json_decref(cfg);
        return llmr_errf_status(LLMR_STORAGE_EBAD_CONFIG, err, es, "config.json names neither architectures nor model_type");
    }
    *arch_out = strdup(arch);
    json_decref(cfg);
    return *arch_out ? LLMR_STORAGE_OK : llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
}

/* A growable list of owned strings, without duplicates. */
typedef struct strlist { char **v; size_t n, cap; } strlist;
static int strlist_add(strlist *l, const char *s) {
    for (size_t i = 0; i < l->n; i++) if (strcmp(l->v[i], s) == 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        char **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}
static void strlist_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Reads the index's shard names into shards; names every missing shard at once. */
static llmr_storage_status index_shards(const char *dir, strlist *shards, char *err, size_t es) {
    json_t *idx;
    llmr_storage_status st = load_json(dir, INDEX_NAME, &idx, err, es);
    if (st) return st;
    json_t *wm = json_is_object(idx) ? json_object_get(idx, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        json_decref(idx);
        return llmr_errf_status(LLMR_STORAGE_EINCONSISTENT, err, es, INDEX_NAME ": no weight_map object");
    }
    const char *tensor;
    json_t *v;
    char why[256];
    json_object_foreach(wm, tensor, v) {
        if (!json_is_string(v)) {
            st = llmr_errf_status(LLMR_STORAGE_EINCONSISTENT, err, es, INDEX_NAME ": weight_map[%s] is not a string", tensor);
            break;
        }
        if (!llmr_path_is_safe(json_string_value(v), why, sizeof why)) {
            st = llmr_errf_status(LLMR_STORAGE_EINCONSISTENT, err, es, INDEX_NAME ": unsafe shard name '%s' for %s: %s",
                      json_string_value(v), tensor, why);
            break;
        }
        if (strlist_add(shards, json_string_value(v)) != 0) { st = llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory"); break; }
    }
    json_decref(idx);
    if (st) return st;
    if (shards->n == 0) return llmr_errf_status(LLMR_STORAGE_EINCONSISTENT, err, es, INDEX_NAME ": weight_map is empty");
    char missing[2048] = "";
    size_t len = 0, n_missing = 0;
    for (size_t i = 0; i < shards->n; i++) {
        if (file_exists(dir, shards->v[i])) continue;
        if (len < sizeof missing)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s", n_missing ? ", " : "", shards->v[i]);
        n_missing++;
    }
    if (n_missing)
        return llmr_errf_status(LLMR_STORAGE_EMISSING_SHARD, err, es, "missing shard%s %s (named by " INDEX_NAME ")",
                    n_missing > 1 ? "s" : "", missing);
    return LLMR_STORAGE_OK;
}

/* Files in dir ending in suffix (top level only), for the no-index and gguf cases. */
static llmr_storage_status files_with_suffix(const char *dir, const char *suffix, strlist *out, char *err, size_t es) {
    DIR *d = opendir(dir);
    if (!d) return llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    size_t sl = strlen(suffix);
    llmr_storage_status st = LLMR_STORAGE_OK;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n > sl && strcmp(de->d_name + n - sl, suffix) == 0 && file_exists(dir, de->d_name))
            if (strlist_add(out, de->d_name) != 0) { st = llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory"); break; }
    }
    closedir(d);
    return st;
}

/* tokenizer.json is large (27 MB for gpt-oss): checked for syntax without building a tree. */
static llmr_storage_status check_json_file(const char *dir, const char *name, char *err, size_t es) {
    char path[4096], why[512];
    if (!file_exists(dir, name)) return llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "%s is missing in %s", name, dir);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (llmr_json_check_file(path, why, sizeof why) != 0) {
        const char *rel = strncmp(why, path, strlen(path)) == 0 ? why + strlen(path) + 2 : why;
        return llmr_errf_status(LLMR_STORAGE_EBAD_JSON, err, es, "%s: not valid JSON: %s", name, rel);
    }
    return LLMR_STORAGE_OK;
}

static llmr_storage_status validate_safetensors(const char *dir, strlist *files, char *err, size_t es) {
    llmr_storage_status st = check_json_file(dir, "tokenizer.json", err, es);
    if (st) return st;
    if (strlist_add(files, "config.json") || strlist_add(files, "tokenizer.json"))
        return llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
    if (file_exists(dir, INDEX_NAME)) {
        strlist shards = {0};
        st = index_shards(dir, &shards, err, es);
        for (size_t i = 0; !st && i < shards.n; i++)
            if (strlist_add(files, shards.v[i])) st = llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
        strlist_free(&shards);
        if (st) return st;
        if (strlist_add(files, INDEX_NAME)) return llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
    } else {
        strlist found = {0};
        if ((st = files_with_suffix(dir, ".safetensors", &found, err, es))) { strlist_free(&found); return st; }
        if (found.n == 0) st = llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "%s: no " INDEX_NAME " and no .safetensors file", dir);
        else if (found.n > 1)
            st = llmr_errf_status(LLMR_STORAGE_EAMBIGUOUS, err, es, "%s: %zu .safetensors files (%s, %s%s) but no " INDEX_NAME, dir,
                      found.n, found.v[0], found.v[1], found.n > 2 ? ", ..." : "");
        else if (strlist_add(files, found.v[0])) st = llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
        strlist_free(&found);
        if (st) return st;
    }
    /* Headers against the index (or the lone file parsed strictly). */
    llmr_checkpoint *ck = NULL;
    char why[1024];
    if (llmr_checkpoint_open(dir, &ck, why, sizeof why) != 0)
        return llmr_errf_status(LLMR_STORAGE_EINCONSISTENT, err, es, "%s", why);
    llmr_checkpoint_destroy(ck);
    return LLMR_STORAGE_OK;
}

static llmr_storage_status validate_gguf(const char *dir, strlist *files, char *err, size_t es) {
    strlist found = {0};
    llmr_storage_status st = files_with_suffix(dir, ".gguf", &found, err, es);
    if (!st && found.n == 0) st = llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "%s: no .gguf file", dir);
    else if (!st && found.n > 1)
        st = llmr_errf_status(LLMR_STORAGE_EAMBIGUOUS, err, es, "%s: %zu .gguf files (%s, %s%s)", dir, found.n, found.v[0],
                  found.v[1], found.n > 2 ? ", ..." : "");
    else if (!st && strlist_add(files, found.v[0])) st = llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory");
    strlist_free(&found);
    return st;
}

void llmr_storage_model_free(llmr_storage_model *m) {
    if (!m) return;
    free(m->id); free(m->format); free(m->runtime); free(m->architecture); free(m->model_dir);
    for (size_t i = 0; i < m->n_files; i++) free(m->files[i]);
    free(m->files);
    for (size_t i = 0; i < m->n_artifacts; i++) {
        free(m->artifacts[i].name); free(m->artifacts[i].path); free(m->artifacts[i].backend);
    }
    free(m->artifacts);
    free(m);
}

static llmr_storage_status build(const char *dir, const char *id, const char *format, char *arch, strlist *files,
                                 const llmr_storage_artifact_in *arts, size_t n_arts, llmr_storage_model **out,
                                 char *err, size_t es) {
    llmr_storage_model *m = calloc(1, sizeof *m);
    char *abs = realpath(dir, NULL);
    if (!m || !abs) { free(m); free(abs); free(arch); return llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory"); }
    m->id = strdup(id);
    m->format = strdup(format);
    m->architecture = arch;
    m->runtime = strdup(arch ? llmr_storage_runtime_for(arch) : "unknown");
    m->model_dir = abs;
    m->files = files->v;
    m->n_files = files->n;
    memset(files, 0, sizeof *files);
    int oom = !m->id || !m->format || !m->runtime;
    if (n_arts) {
        m->artifacts = calloc(n_arts, sizeof *m->artifacts);
        oom |= !m->artifacts;
        for (size_t i = 0; m->artifacts && i < n_arts; i++, m->n_artifacts++) {
            m->artifacts[i].name = strdup(arts[i].name ? arts[i].name : "");
            m->artifacts[i].path = strdup(arts[i].path ? arts[i].path : "");
            m->artifacts[i].backend = strdup(arts[i].backend ? arts[i].backend : "");
            oom |= !m->artifacts[i].name || !m->artifacts[i].path || !m->artifacts[i].backend;
        }
    }
    if (oom) { llmr_storage_model_free(m); return llmr_errf_status(LLMR_STORAGE_ENOMEM, err, es, "out of memory"); }
    m->desc.struct_size = sizeof m->desc;
    m->desc.id = m->id;
    m->desc.format = m->format;
    m->desc.runtime = m->runtime;
    m->desc.architecture = m->architecture ? m->architecture : "";
    m->desc.model_dir = m->model_dir;
    m->desc.artifact_path = NULL;
    *out = m;
    return LLMR_STORAGE_OK;
}

llmr_storage_status llmr_storage_validate(const char *model_dir, const char *id, const char *format,
                                          const llmr_storage_artifact_in *artifacts, size_t n_artifacts,
                                          llmr_storage_model **out, char *err, size_t es) {
    if (!model_dir || !id || !format || !out) return llmr_errf_status(LLMR_STORAGE_EINVAL, err, es, "missing argument");
    struct stat sb;
    if (stat(model_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "model folder %s is missing", model_dir);
    strlist files = {0};
    char *arch = NULL;
    llmr_storage_status st;
    if (strcmp(format, "safetensors") == 0) {
        st = read_config(model_dir, &arch, err, es);
        if (!st) st = validate_safetensors(model_dir, &files, err, es);
    } else if (strcmp(format, "gguf") == 0) {
        /* A GGUF carries its own metadata; config.json is optional there. */
        if (file_exists(model_dir, "config.json")) st = read_config(model_dir, &arch, err, es);
        else st = LLMR_STORAGE_OK;
        if (!st) st = validate_gguf(model_dir, &files, err, es);
    } else {
        st = llmr_errf_status(LLMR_STORAGE_EINVAL, err, es, "unknown format '%s' (expected safetensors or gguf)", format);
    }
    for (size_t i = 0; !st && i < n_artifacts; i++) {
        if (!artifacts[i].path || stat(artifacts[i].path, &sb) != 0)
            st = llmr_errf_status(LLMR_STORAGE_EMISSING_FILE, err, es, "artifact %s is missing at %s", artifacts[i].name ? artifacts[i].name : "?",
                      artifacts[i].path ? artifacts[i].path : "(no path)");
    }
    if (st) { strlist_free(&files); free(arch); return st; }
    return build(model_dir, id, format, arch, &files, artifacts, n_artifacts, out, err, es);
}
