/* checkpoint.c — see checkpoint.h. */
#include "common/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/errmsg.h"
#include "common/path_safety.h"

typedef struct { const char *name; size_t shard; const llmr_st_tensor *t; } entry;

struct llmr_checkpoint {
    char *dir;
    char **shard_names;
    llmr_safetensors **shards;
    size_t n_shards;
    entry *entries;          /* sorted by name */
    size_t n_entries;
};


void llmr_checkpoint_destroy(llmr_checkpoint *ck) {
    if (!ck) return;
    for (size_t i = 0; i < ck->n_shards; i++) {
        free(ck->shard_names[i]);
        llmr_st_destroy(ck->shards[i]);
    }
    free(ck->shard_names);
    free(ck->shards);
    free(ck->entries);
    free(ck->dir);
    free(ck);
}

static int add_shard(llmr_checkpoint *ck, const char *name, char *err, size_t es) {
    char e[400];
    if (!llmr_path_is_safe(name, e, sizeof e)) return llmr_errf(err, es, "unsafe shard name '%s': %s", name, e);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", ck->dir, name);
    llmr_safetensors *st = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return llmr_errf(err, es, "shard %s is missing (%s)", name, strerror(errno));
    llmr_st_status s = llmr_st_open(path, &st, err, es);
    if (s != LLMR_ST_OK) return -1;
    char **nn = realloc(ck->shard_names, (ck->n_shards + 1) * sizeof *nn);
    if (nn) ck->shard_names = nn;
    llmr_safetensors **ns = realloc(ck->shards, (ck->n_shards + 1) * sizeof *ns);
    if (ns) ck->shards = ns;
    char *copy = strdup(name);
    if (!nn || !ns || !copy) { free(copy); llmr_st_destroy(st); return llmr_errf(err, es, "out of memory"); }
    ck->shard_names[ck->n_shards] = copy;
    ck->shards[ck->n_shards++] = st;
    return 0;
}

static long shard_index(const llmr_checkpoint *ck, const char *name) {
    for (size_t i = 0; i < ck->n_shards; i++)
        if (strcmp(ck->shard_names[i], name) == 0) return (long)i;
    return -1;
}

static int by_name(const void *a, const void *b) { return strcmp(((const entry *)a)->name, ((const entry *)b)->name); }

static int build_entries(llmr_checkpoint *ck, char *err, size_t es) {
    size_t total = 0;
    for (size_t i = 0; i < ck->n_shards; i++) total += llmr_st_count(ck->shards[i]);
    ck->entries = calloc(total ? total : 1, sizeof *ck->entries);
    if (!ck->entries) return llmr_errf(err, es, "out of memory");
    for (size_t i = 0; i < ck->n_shards; i++)
        for (size_t j = 0; j < llmr_st_count(ck->shards[i]); j++) {
            const llmr_st_tensor *t = llmr_st_at(ck->shards[i], j);
            ck->entries[ck->n_entries++] = (entry){t->name, i, t};
        }
    qsort(ck->entries, ck->n_entries, sizeof *ck->entries, by_name);
    for (size_t i = 1; i < ck->n_entries; i++)
        if (strcmp(ck->entries[i - 1].name, ck->entries[i].name) == 0)
            return llmr_errf(err, es, "tensor %s appears in both %s and %s", ck->entries[i].name,
                        ck->shard_names[ck->entries[i - 1].shard], ck->shard_names[ck->entries[i].shard]);
    return 0;
}

static int open_indexed(llmr_checkpoint *ck, const char *index_path, char *err, size_t es) {
    json_error_t je;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return llmr_errf(err, es, "model.safetensors.index.json: %s (line %d)", je.text, je.line);
    int rc = -1;
    json_t *wm = json_object_get(root, "weight_map");
    const char *tname;
    json_t *v;
    if (!json_is_object(wm)) { llmr_errf(err, es, "model.safetensors.index.json: no weight_map object"); goto out; }
    json_object_foreach(wm, tname, v) {
        if (!json_is_string(v)) { llmr_errf(err, es, "model.safetensors.index.json: weight_map[%s] is not a string", tname); goto out; }
        if (shard_index(ck, json_string_value(v)) < 0 && add_shard(ck, json_string_value(v), err, es) != 0) goto out;
    }
    if (build_entries(ck, err, es) != 0) goto out;
    json_object_foreach(wm, tname, v) {
        size_t shard;
        if (!llmr_checkpoint_find(ck, tname, &shard)) {
            llmr_errf(err, es, "tensor %s is listed in the index for %s but is not in that shard", tname, json_string_value(v));
            goto out;
        }
        if (strcmp(ck->shard_names[shard], json_string_value(v)) != 0) {
            llmr_errf(err, es, "tensor %s is listed in the index for %s but stored in %s", tname, json_string_value(v),
                 ck->shard_names[shard]);
            goto out;
        }
    }
    for (size_t i = 0; i < ck->n_entries; i++)
        if (!json_object_get(wm, ck->entries[i].name)) {
            llmr_errf(err, es, "tensor %s in %s is not listed in model.safetensors.index.json", ck->entries[i].name,
                 ck->shard_names[ck->entries[i].shard]);
            goto out;
        }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int open_single(llmr_checkpoint *ck, char *err, size_t es) {
    DIR *d = opendir(ck->dir);
    if (!d) return llmr_errf(err, es, "%s: %s", ck->dir, strerror(errno));
    char found[2][512] = {{0}};
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 12 && strcmp(de->d_name + l - 12, ".safetensors") == 0) {
            if (n < 2) snprintf(found[n], sizeof found[n], "%s", de->d_name);
            n++;
        }
    }
    closedir(d);
    if (n == 0) return llmr_errf(err, es, "%s: no model.safetensors.index.json and no .safetensors file", ck->dir);
    if (n > 1)
        return llmr_errf(err, es, "%s: %d .safetensors files (%s, %s, ...) but no model.safetensors.index.json", ck->dir, n,
                    found[0], found[1]);
    if (add_shard(ck, found[0], err, es) != 0) return -1;
    return build_entries(ck, err, es);
}

int llmr_checkpoint_open(const char *dir, llmr_checkpoint **out, char *err, size_t es) {
    llmr_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->dir = strdup(dir))) { free(ck); return llmr_errf(err, es, "out of memory"); }
    char index_path[4096];
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    struct stat sb;
    int rc = stat(index_path, &sb) == 0 ? open_indexed(ck, index_path, err, es) : open_single(ck, err, es);
    if (rc != 0) { llmr_checkpoint_destroy(ck); return -1; }
    *out = ck;
    return 0;
}

size_t llmr_checkpoint_shard_count(const llmr_checkpoint *ck) { return ck->n_shards; }
const char *llmr_checkpoint_shard_name(const llmr_checkpoint *ck, size_t i) { return i < ck->n_shards ? ck->shard_names[i] : NULL; }
llmr_safetensors *llmr_checkpoint_shard(const llmr_checkpoint *ck, size_t i) { return i < ck->n_shards ? ck->shards[i] : NULL; }
size_t llmr_checkpoint_tensor_count(const llmr_checkpoint *ck) { return ck->n_entries; }

const llmr_st_tensor *llmr_checkpoint_find(const llmr_checkpoint *ck, const char *name, size_t *shard_out) {
    entry key = {name, 0, NULL};
    const entry *e = bsearch(&key, ck->entries, ck->n_entries, sizeof *ck->entries, by_name);
    if (!e) return NULL;
    if (shard_out) *shard_out = e->shard;
    return e->t;
}

const void *llmr_checkpoint_data(llmr_checkpoint *ck, const char *name, const llmr_st_tensor **tensor_out, char *err,
                                 size_t es) {
    size_t shard;
    const llmr_st_tensor *t = llmr_checkpoint_find(ck, name, &shard);
    if (!t) { llmr_errf(err, es, "tensor %s is missing", name); return NULL; }
    const uint8_t *base = llmr_st_map_data(ck->shards[shard], err, es);
    if (!base) return NULL;
    if (tensor_out) *tensor_out = t;
    return base + t->begin;
}

static void format_shape(char *buf, size_t cap, int ndim, const uint64_t *shape) {
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && l < cap; i++) l += (size_t)snprintf(buf + l, cap - l, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

const llmr_st_tensor *llmr_checkpoint_expect(const llmr_checkpoint *ck, const char *name, llmr_st_dtype dtype, int ndim,
                                             const uint64_t *shape, char *err, size_t es) {
    size_t shard;
    const llmr_st_tensor *t = llmr_checkpoint_find(ck, name, &shard);
    if (!t) { llmr_errf(err, es, "tensor %s is missing", name); return NULL; }
    int ok = t->dtype == dtype && t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (ok) return t;
    char want[160], got[160];
    format_shape(want, sizeof want, ndim, shape);
    format_shape(got, sizeof got, t->ndim, t->shape);
    llmr_errf(err, es, "%s (in %s): expected %s %s, found %s %s", name, ck->shard_names[shard], llmr_st_dtype_name(dtype), want,
         llmr_st_dtype_name(t->dtype), got);
    return NULL;
}
