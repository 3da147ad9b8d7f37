/* validate.c — see validate.h. */
#include "router/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path_safety.h"
#include "common/sha256.h"

#define INDEX_NAME "model.safetensors.index.json"

/* --- verdicts ------------------------------------------------------------------- */

void router_verdict_free(router_verdict *v) {
    if (!v) return;
    json_decref(v->extra);
    json_decref(v->record);
    free(v->chat_template);
    memset(v, 0, sizeof *v);
}

void router_register_req_free(router_register_req *r) {
    if (!r) return;
    free(r->repo);
    free(r->id);
    free(r->format);
    free(r->revision);
    free(r->chat_template);
    free(r->display_name);
    free(r->filename);
    memset(r, 0, sizeof *r);
}

/* Fills an error verdict; extra is stolen. Returns the status. */
static int verdict(router_verdict *v, int status, const char *code, const char *param, json_t *extra, const char *fmt,
                   ...) __attribute__((format(printf, 6, 7)));
static int verdict(router_verdict *v, int status, const char *code, const char *param, json_t *extra, const char *fmt,
                   ...) {
    v->status = status;
    snprintf(v->code, sizeof v->code, "%s", code);
    snprintf(v->param, sizeof v->param, "%s", param ? param : "");
    json_decref(v->extra);
    v->extra = extra;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
    return status;
}

/* --- request parsing ---------------------------------------------------------------- */

static int part_valid(const char *p, size_t n, const char *which, char *err, size_t es) {
    if (n == 0) { snprintf(err, es, "the %s part is empty", which); return 0; }
    if (n > ROUTER_REPO_PART_MAX) { snprintf(err, es, "the %s part is longer than %d characters", which, ROUTER_REPO_PART_MAX); return 0; }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-') {
            if (c == ' ') snprintf(err, es, "the %s part contains a space", which);
            else if (c < 0x20 || c >= 0x7f) snprintf(err, es, "the %s part contains the byte 0x%02x", which, c);
            else snprintf(err, es, "the %s part contains '%c' (allowed: letters, digits, '.', '_', '-')", which, c);
            return 0;
        }
    }
    if (p[0] == '.' || p[0] == '-' || p[n - 1] == '.' || p[n - 1] == '-') {
        snprintf(err, es, "the %s part may not start or end with '.' or '-'", which);
        return 0;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '.' && p[i + 1] == '.') { snprintf(err, es, "the %s part contains '..'", which); return 0; }
    return 1;
}

int router_repo_name_valid(const char *repo, char *err, size_t es) {
    const char *slash = strchr(repo, '/');
    if (!slash) { snprintf(err, es, "expected OWNER/NAME, got no '/'"); return 0; }
    if (strchr(slash + 1, '/')) { snprintf(err, es, "expected OWNER/NAME, got more than one '/'"); return 0; }
    return part_valid(repo, (size_t)(slash - repo), "owner", err, es) &&
           part_valid(slash + 1, strlen(slash + 1), "name", err, es);
}

static int revision_valid(const char *r, char *err, size_t es) {
    size_t n = strlen(r);
    if (n == 0 || n > ROUTER_REVISION_MAX) { snprintf(err, es, "must be 1 to %d characters", ROUTER_REVISION_MAX); return 0; }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r[i];
        if (!isalnum(c) && !strchr("._-/", c)) {
            snprintf(err, es, "contains byte 0x%02x (allowed: letters, digits, '.', '_', '-', '/')", c);
            return 0;
        }
    }
    if (strstr(r, "..") || r[0] == '/' || r[n - 1] == '/' || strstr(r, "//")) {
        snprintf(err, es, "has an empty or '..' segment");
        return 0;
    }
    return 1;
}

/* Optional string field: 0 ok (*out set or left NULL), -1 with a verdict when of the wrong type. */
static int opt_str(json_t *body, const char *key, size_t max, char **out, router_verdict *v) {
    json_t *j = json_object_get(body, key);
    *out = NULL;
    if (!j || json_is_null(j)) return 0;
    if (!json_is_string(j)) {
        verdict(v, 400, "invalid_type", key, NULL, "'%s' must be a string", key);
        return -1;
    }
    if (json_string_length(j) > max) {
        verdict(v, 400, "invalid_value", key, NULL, "'%s' is longer than %zu bytes", key, max);
        return -1;
    }
    if (!(*out = strdup(json_string_value(j)))) {
        verdict(v, 500, "internal_error", NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

int router_register_parse(json_t *body, router_register_req *r, router_verdict *v) {
    memset(r, 0, sizeof *r);
    memset(v, 0, sizeof *v);
    char why[256];
    if (!json_is_object(body)) {
        verdict(v, 400, "invalid_request", NULL, NULL, "the body must be a JSON object");
        return -1;
    }
    json_t *jr = json_object_get(body, "repo");
    if (!jr) { verdict(v, 400, "missing_field", "repo", NULL, "'repo' is required (e.g. \"openai/gpt-oss-20b\")"); return -1; }
    if (opt_str(body, "repo", 256, &r->repo, v) || opt_str(body, "format", 64, &r->format, v) ||
        opt_str(body, "revision", ROUTER_REVISION_MAX, &r->revision, v) ||
        opt_str(body, "chat_template", 512 * 1024, &r->chat_template, v) ||
        opt_str(body, "display_name", 256, &r->display_name, v) ||
        opt_str(body, "filename", LLMR_PATH_MAX_LEN, &r->filename, v))
        goto bad;
    if (!r->repo) { verdict(v, 400, "invalid_type", "repo", NULL, "'repo' must be a string"); goto bad; }
    if (!router_repo_name_valid(r->repo, why, sizeof why)) {
        verdict(v, 400, "invalid_repo", "repo", NULL, "invalid repo name '%.300s': %s", r->repo, why);
        goto bad;
    }
    if (!(r->id = strdup(r->repo))) { verdict(v, 500, "internal_error", NULL, NULL, "out of memory"); goto bad; }
    for (char *p = r->id; *p; p++) *p = (char)tolower((unsigned char)*p);
    if (r->format && strcmp(r->format, "safetensors") && strcmp(r->format, "gguf")) {
        verdict(v, 400, "invalid_format", "format", NULL, "unknown format '%.64s' (supported: safetensors, gguf)", r->format);
        goto bad;
    }
    if (!r->revision && !(r->revision = strdup("main"))) { verdict(v, 500, "internal_error", NULL, NULL, "out of memory"); goto bad; }
    if (!revision_valid(r->revision, why, sizeof why)) {
        verdict(v, 400, "invalid_revision", "revision", NULL, "invalid revision '%.300s': %s", r->revision, why);
        goto bad;
    }
    if (r->filename && !llmr_path_is_safe(r->filename, why, sizeof why)) {
        verdict(v, 400, "unsafe_file_name", "filename", NULL, "invalid filename '%.300s': %s", r->filename, why);
        goto bad;
    }
    return 0;
bad:
    router_register_req_free(r);
    return -1;
}

/* --- validation ---------------------------------------------------------------------- */

typedef struct fetched { char *path, *body; size_t len; } fetched;

typedef struct vctx {
    const router_validate_env *env;
    const router_register_req *req;
    router_verdict *v;
    router_hub_listing listing;
    fetched cache[16];
    int n_cache;
    json_t *warnings;
    json_t *files;   /* record files */
    uint64_t weight_bytes;
} vctx;

static void warn(vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(vctx *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_array_append_new(c->warnings, json_string(msg));
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Maps a hub error onto a verdict. what: "listing", "config.json"... */
static int hub_verdict(vctx *c, int st, const char *what, const char *msg) {
    const char *ep = c->env->hub->endpoint ? c->env->hub->endpoint : "hub";
    switch (st) {
    case ROUTER_HUB_ENOTFOUND:
        if (!strcmp(what, "listing"))
            return verdict(c->v, 404, "repo_not_found", "repo", NULL, "repo '%s' at revision '%s' was not found on %s (%s)",
                           c->req->repo, c->req->revision, ep, msg);
        return verdict(c->v, 502, "hub_error", NULL, NULL, "%s is in the listing of '%s' but %s cannot serve it (%s)", what,
                       c->req->repo, ep, msg);
    case ROUTER_HUB_EAUTH:
        return verdict(c->v, 403, "repo_access_denied", "repo", NULL,
                       "repo '%s' is gated or private on %s and the router's hub token cannot read it (%s)", c->req->repo,
                       ep, msg);
    case ROUTER_HUB_EUNREACHABLE:
        return verdict(c->v, 502, "hub_unreachable", NULL, NULL, "the hub %s is unreachable: %s", ep, msg);
    case ROUTER_HUB_ETOOBIG:
        return verdict(c->v, 400, "file_too_large", NULL, NULL, "%s of '%s' is too large to fetch: %s", what, c->req->repo, msg);
    default:
        return verdict(c->v, 502, "hub_error", NULL, NULL, "the hub %s answered badly for %s of '%s': %s", ep, what,
                       c->req->repo, msg);
    }
}

/* Fetches a small file of the repo (cached). 0, or an error verdict status. */
static int get_file(vctx *c, const char *path, const char **body, size_t *len) {
    for (int i = 0; i < c->n_cache; i++)
        if (!strcmp(c->cache[i].path, path)) { *body = c->cache[i].body; *len = c->cache[i].len; return 0; }
    if (c->n_cache == (int)(sizeof c->cache / sizeof c->cache[0]))
        return verdict(c->v, 500, "internal_error", NULL, NULL, "too many files fetched");
    char err[1024];
    size_t max = c->env->max_small_file ? c->env->max_small_file : (64u << 20);
    fetched *f = &c->cache[c->n_cache];
    int st = c->env->hub->fetch(c->env->hub->ctx, c->req->repo, c->listing.commit, path, max, &f->body, &f->len, err,
                                sizeof err);
    if (st) return hub_verdict(c, st, path, err);
    if (!(f->path = strdup(path))) { free(f->body); return verdict(c->v, 500, "internal_error", NULL, NULL, "out of memory"); }
    c->n_cache++;
    *body = f->body;
    *len = f->len;
    return 0;
}

/* Adds a repo file to the record: sha256 from the LFS oid, or hashed here from its content. */
static int add_file(vctx *c, const char *name, int weight) {
    for (size_t i = 0; i < json_array_size(c->files); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(c->files, i), "name")), name)) return 0;
    const router_hub_file *f = router_hub_listing_find(&c->listing, name);
    if (!f) return verdict(c->v, 500, "internal_error", NULL, NULL, "%s vanished from the listing", name);
    char why[256];
    if (!llmr_path_is_safe(name, why, sizeof why))
        return verdict(c->v, 400, "unsafe_file_name", NULL, json_pack("{s:[s]}", "files", name),
                       "the repo file name '%.300s' is unsafe: %s", name, why);
    char sha[65];
    uint64_t size = f->size;
    if (f->sha256[0]) {
        snprintf(sha, sizeof sha, "%s", f->sha256);
    } else {
        const char *body;
        size_t len;
        int st = get_file(c, name, &body, &len);
        if (st) return st;
        llmr_sha256_buf(body, len, sha);
        size = len;
    }
    char *url = router_hub_resolve_url(c->env->hub->endpoint, c->req->repo, c->listing.commit, name);
    if (!url) return verdict(c->v, 500, "internal_error", NULL, NULL, "out of memory");
    json_array_append_new(c->files, json_pack("{s:s, s:I, s:s, s:s, s:b}", "name", name, "size", (json_int_t)size,
                                              "sha256", sha, "url", url, "lfs", f->sha256[0] != 0));
    free(url);
    if (weight) c->weight_bytes += size;
    return 0;
}

/* Collects the names of listing files ending in suffix: top-level ones only, or at any depth. */
static json_t *files_with(const router_hub_listing *l, const char *suffix, int any_depth) {
    json_t *a = json_array();
    for (size_t i = 0; i < l->n_files; i++)
        if ((any_depth || !strchr(l->files[i].path, '/')) && ends_with(l->files[i].path, suffix))
            json_array_append_new(a, json_string(l->files[i].path));
    return a;
}

/* Safetensors weights count at the top level only (gpt-oss ships original/model.safetensors beside
 * the HF shards); GGUF files are often kept in folders, so they count at any depth. */
static json_t *top_level_with(const router_hub_listing *l, const char *suffix) { return files_with(l, suffix, 0); }
static json_t *gguf_files(const router_hub_listing *l) { return files_with(l, ".gguf", 1); }

static void join_names(json_t *arr, char *out, size_t n) {
    out[0] = 0;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s%s", i ? ", " : "", json_string_value(e));
    }
}

const char *router_runtime_for_architecture(const char *arch, const char *model_type) {
    if ((arch && !strcmp(arch, "GptOssForCausalLM")) || (model_type && !strcmp(model_type, "gpt_oss"))) return "gptoss";
    return NULL;
}

/* config.json: parses, names the architecture, returns it as a new ref in *cfg. */
static int check_config(vctx *c, json_t **cfg) {
    const char *body;
    size_t len;
    int st = get_file(c, "config.json", &body, &len);
    if (st) return st;
    json_error_t je;
    *cfg = json_loadb(body, len, 0, &je);
    if (!*cfg)
        return verdict(c->v, 400, "invalid_config", NULL, NULL, "config.json of '%s' is not valid JSON (line %d, column %d: %s)",
                       c->req->repo, je.line, je.column, je.text);
    json_t *arch = json_object_get(*cfg, "architectures");
    json_t *mt = json_object_get(*cfg, "model_type");
    int has_arch = json_is_array(arch) && json_array_size(arch) > 0 && json_is_string(json_array_get(arch, 0));
    if (!json_is_object(*cfg) || (!has_arch && !(json_is_string(mt) && json_string_length(mt))))
        return verdict(c->v, 400, "invalid_config", NULL, NULL,
                       "config.json of '%s' names neither 'architectures' (a non-empty list of strings) nor 'model_type'",
                       c->req->repo);
    return 0;
}

/* The shards of an index, checked. *shards receives a new array of unique names. */
static int check_index(vctx *c, json_t **shards) {
    const char *body;
    size_t len;
    int st = get_file(c, INDEX_NAME, &body, &len);
    if (st) return st;
    json_error_t je;
    json_t *idx = json_loadb(body, len, 0, &je);
    json_t *wm = json_object_get(idx, "weight_map");
    if (!idx || !json_is_object(wm) || json_object_size(wm) == 0) {
        json_decref(idx);
        return verdict(c->v, 400, "invalid_index", NULL, NULL, "%s of '%s' %s", INDEX_NAME, c->req->repo,
                       idx ? "has no non-empty 'weight_map' object" : "is not valid JSON");
    }
    json_t *names = json_array(), *unsafe = json_array(), *missing = json_array();
    const char *tensor;
    json_t *shard;
    char why[256] = "";
    json_object_foreach(wm, tensor, shard) {
        if (!json_is_string(shard)) {
            verdict(c->v, 400, "invalid_index", NULL, NULL, "%s of '%s': weight_map[\"%.200s\"] is not a string",
                    INDEX_NAME, c->req->repo, tensor);
            json_decref(names), json_decref(unsafe), json_decref(missing), json_decref(idx);
            return c->v->status;
        }
        const char *s = json_string_value(shard);
        int seen = 0;
        for (size_t i = 0; i < json_array_size(names); i++) seen |= !strcmp(json_string_value(json_array_get(names, i)), s);
        if (seen) continue;
        json_array_append_new(names, json_string(s));
        char w[256];
        if (!llmr_path_is_safe(s, w, sizeof w)) {
            json_array_append_new(unsafe, json_string(s));
            if (!why[0]) snprintf(why, sizeof why, "%s", w);
        } else if (!router_hub_listing_find(&c->listing, s)) {
            json_array_append_new(missing, json_string(s));
        }
    }
    json_decref(idx);
    char list[1536];
    if (json_array_size(unsafe)) {
        join_names(unsafe, list, sizeof list);
        json_decref(names), json_decref(missing);
        return verdict(c->v, 400, "unsafe_file_name", NULL, json_pack("{s:o}", "files", unsafe),
                       "%s of '%s' names unsafe shard file names: %s (%s)", INDEX_NAME, c->req->repo, list, why);
    }
    json_decref(unsafe);
    if (json_array_size(missing)) {
        join_names(missing, list, sizeof list);
        json_decref(names);
        return verdict(c->v, 400, "missing_shard", NULL, json_pack("{s:o}", "missing", missing),
                       "%s of '%s' names shards absent from the repo at %s: %s", INDEX_NAME, c->req->repo,
                       c->listing.commit, list);
    }
    json_decref(missing);
    *shards = names;
    return 0;
}

/* Parses a template through the env's checker. src_name names where it came from. */
static int check_template(vctx *c, const char *src, size_t len, const char *src_name) {
    if (!c->env->check_template) {
        warn(c, "the chat template from %s was not parse-checked (no template engine in this build)", src_name);
        return 0;
    }
    int line = 0, col = 0;
    char err[1024] = "";
    if (c->env->check_template(src, len, &line, &col, err, sizeof err) == 0) return 0;
    return verdict(c->v, 400, "invalid_chat_template", !strcmp(src_name, "request") ? "chat_template" : NULL,
                   json_pack("{s:i, s:i, s:s}", "line", line, "column", col, "source", src_name),
                   "the chat template from %s does not parse at line %d, column %d: %s", src_name, line, col, err);
}

/* Parses the repo's tokenizer_config.json, if it has one (the fetch is cached: the router hashes it
 * anyway). *tc_out is NULL when the file is absent or is not JSON (a warning then says so). */
static int read_tokenizer_config(vctx *c, json_t **tc_out) {
    *tc_out = NULL;
    if (!router_hub_listing_find(&c->listing, "tokenizer_config.json")) return 0;
    const char *body;
    size_t blen;
    int st = get_file(c, "tokenizer_config.json", &body, &blen);
    if (st) return st;
    /* real HF files hold model_max_length = 1e30 written as an integer, beyond jansson's int64 */
    *tc_out = json_loadb(body, blen, JSON_DECODE_INT_AS_REAL, NULL);
    if (!*tc_out) warn(c, "tokenizer_config.json of '%s' is not valid JSON; its chat template and special tokens were ignored", c->req->repo);
    return 0;
}

/* Keeps bos_token/eos_token of tokenizer_config.json in the record: templates render them. */
static void record_special_tokens(json_t *tc, json_t *record) {
    json_t *out = json_object();
    const char *keys[] = {"bos_token", "eos_token"};
    for (int i = 0; i < 2; i++) {
        json_t *t = json_object_get(tc, keys[i]);
        if (json_is_object(t)) t = json_object_get(t, "content"); /* AddedToken form */
        if (json_is_string(t)) json_object_set(out, keys[i], t);
    }
    json_object_set_new(record, "special_tokens", out);
}

/* Chooses the chat template: request, chat_template.jinja, tokenizer_config.json, or the default. */
static int choose_template(vctx *c, json_t *record) {
    const char *source = "default", *text = NULL;
    size_t len = 0;
    char *owned = NULL;
    json_t *tc = NULL;
    int st = read_tokenizer_config(c, &tc);
    if (st) return st;
    record_special_tokens(tc, record);
    if (c->req->chat_template) {
        source = "request";
        text = c->req->chat_template;
        len = strlen(text);
    } else if (router_hub_listing_find(&c->listing, "chat_template.jinja")) {
        if ((st = get_file(c, "chat_template.jinja", &text, &len))) { json_decref(tc); return st; }
        source = "chat_template.jinja";
    } else if (tc) {
        json_t *t = json_object_get(tc, "chat_template");
        if (json_is_array(t)) { /* [{"name":"default","template":"..."}, ...] */
            size_t i;
            json_t *e, *pick = NULL;
            json_array_foreach(t, i, e) if (!pick || !strcmp(json_string_value(json_object_get(e, "name")) ?: "", "default")) pick = e;
            t = json_object_get(pick, "template");
        }
        if (json_is_string(t)) {
            owned = strndup(json_string_value(t), json_string_length(t));
            text = owned;
            len = json_string_length(t);
            source = "tokenizer_config.json";
        }
    }
    json_decref(tc);
    if (text && (st = check_template(c, text, len, source))) { free(owned); return st; }
    json_t *ct = json_pack("{s:s}", "source", source);
    if (text) {
        char sha[65];
        llmr_sha256_buf(text, len, sha);
        json_object_set_new(ct, "sha256", json_string(sha));
        json_object_set_new(ct, "length", json_integer((json_int_t)len));
        c->v->chat_template = owned ? owned : strndup(text, len);
    } else {
        warn(c, "no chat template in the request or the repo; the router's default template applies");
    }
    json_object_set_new(record, "chat_template", ct);
    return 0;
}

static json_int_t cfg_int(json_t *cfg, const char *k) {
    json_t *v = json_object_get(cfg, k);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* Weights + a bf16 KV cache for min(context, 8192) tokens + 10% for activations and workspace. */
static void estimate_vram(vctx *c, json_t *cfg, json_t *record) {
    if (c->weight_bytes == 0) {
        warn(c, "VRAM estimate unavailable: the weight files have no known size");
        json_object_set_new(record, "vram_estimate_bytes", json_null());
        return;
    }
    double need = (double)c->weight_bytes;
    json_int_t layers = cfg_int(cfg, "num_hidden_layers"), kvh = cfg_int(cfg, "num_key_value_heads"),
               hd = cfg_int(cfg, "head_dim"), ctx = cfg_int(cfg, "max_position_embeddings");
    if (!hd && cfg_int(cfg, "num_attention_heads")) hd = cfg_int(cfg, "hidden_size") / cfg_int(cfg, "num_attention_heads");
    if (!kvh) kvh = cfg_int(cfg, "num_attention_heads");
    if (layers > 0 && kvh > 0 && hd > 0) {
        if (ctx <= 0 || ctx > 8192) ctx = 8192;
        need += 2.0 * (double)layers * (double)kvh * (double)hd * 2.0 * (double)ctx;
    } else {
        warn(c, "VRAM estimate covers the weights only: config.json lacks the attention shape for the KV cache");
    }
    json_object_set_new(record, "vram_estimate_bytes", json_integer((json_int_t)(need * 1.1)));
}

/* Official GPU artifacts for this model (supported_models.json), allowlisted and present only. */
static int add_artifacts(vctx *c, json_t *record) {
    json_t *arts = json_array();
    json_object_set_new(record, "artifacts", arts);
    const router_supported_model *m = router_artifacts_find(c->env->artifacts, c->req->id);
    if (!m) return 0;
    for (size_t i = 0; i < m->n_artifacts; i++) {
        const router_artifact *a = &m->artifacts[i];
        if (!router_artifacts_allowed(c->env->artifacts, a->source_repo)) {
            warn(c, "artifact %s (%s) left out: its source repo '%s' matches no allowlist glob (%s)", a->name, a->backend,
                 a->source_repo, router_artifacts_allowlist(c->env->artifacts));
            continue;
        }
        router_hub_listing other = {0};
        const router_hub_listing *l = &c->listing;
        char err[1024];
        if (strcasecmp(a->source_repo, c->req->repo) != 0) {
            int st = c->env->hub->list(c->env->hub->ctx, a->source_repo, "main", &other, err, sizeof err);
            if (st) {
                warn(c, "artifact %s (%s) left out: cannot list '%s': %s", a->name, a->backend, a->source_repo, err);
                continue;
            }
            l = &other;
        }
        const router_hub_file *f = router_hub_listing_find(l, a->path);
        if (!f) {
            warn(c, "artifact %s (%s) left out: '%s' is not in %s at %s", a->name, a->backend, a->path, a->source_repo,
                 l->commit);
        } else if (!f->sha256[0]) {
            warn(c, "artifact %s (%s) left out: %s of %s is not an LFS file, so it has no sha256 to pin", a->name,
                 a->backend, a->path, a->source_repo);
        } else {
            char *url = router_hub_resolve_url(c->env->hub->endpoint, a->source_repo, l->commit, a->path);
            json_array_append_new(arts, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:b}", "backend", a->backend,
                                                  "name", a->name, "source_repo", a->source_repo, "path", a->path, "commit",
                                                  l->commit, "url", url ? url : "", "size", (json_int_t)f->size, "sha256",
                                                  f->sha256, "optional", 1));
            free(url);
        }
        router_hub_listing_free(&other);
    }
    return 0;
}

/* format=safetensors: required files, index or single file, config. */
static int validate_safetensors(vctx *c, json_t *record, json_t **cfg) {
    json_t *missing = json_array();
    const char *req_files[] = {"config.json", "tokenizer.json"};
    for (int i = 0; i < 2; i++)
        if (!router_hub_listing_find(&c->listing, req_files[i])) json_array_append_new(missing, json_string(req_files[i]));
    int has_index = router_hub_listing_find(&c->listing, INDEX_NAME) != NULL;
    json_t *st_files = top_level_with(&c->listing, ".safetensors");
    if (!has_index && json_array_size(st_files) == 0) json_array_append_new(missing, json_string("*.safetensors"));
    if (json_array_size(missing)) {
        char list[512];
        join_names(missing, list, sizeof list);
        json_decref(st_files);
        return verdict(c->v, 400, "missing_required_file", NULL, json_pack("{s:o}", "missing", missing),
                       "repo '%s' at %s lacks required files: %s", c->req->repo, c->listing.commit, list);
    }
    json_decref(missing);
    int st = check_config(c, cfg);
    if (st) { json_decref(st_files); return st; }
    json_t *shards = NULL;
    if (has_index) {
        json_decref(st_files);
        if ((st = check_index(c, &shards))) return st;
    } else if (json_array_size(st_files) > 1) {
        char list[1536];
        join_names(st_files, list, sizeof list);
        return verdict(c->v, 400, "ambiguous_artifacts", NULL, json_pack("{s:o}", "files", st_files),
                       "repo '%s' holds several .safetensors files and no %s: %s", c->req->repo, INDEX_NAME, list);
    } else {
        shards = st_files;
    }
    const char *always[] = {"config.json", "tokenizer.json"};
    for (int i = 0; i < 2 && !st; i++) st = add_file(c, always[i], 0);
    if (!st && has_index) st = add_file(c, INDEX_NAME, 0);
    for (size_t i = 0; !st && i < json_array_size(shards); i++) st = add_file(c, json_string_value(json_array_get(shards, i)), 1);
    json_decref(shards);
    const char *optional[] = {"tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
                              "chat_template.jinja"};
    for (int i = 0; i < 4 && !st; i++)
        if (router_hub_listing_find(&c->listing, optional[i])) st = add_file(c, optional[i], 0);
    if (st) return st;
    const char *arch = json_string_value(json_array_get(json_object_get(*cfg, "architectures"), 0));
    const char *mt = json_string_value(json_object_get(*cfg, "model_type"));
    const char *rt = router_runtime_for_architecture(arch, mt);
    json_object_set_new(record, "architecture", json_string(arch ? arch : mt));
    if (mt) json_object_set_new(record, "model_type", json_string(mt));
    json_object_set_new(record, "runtime", json_string(rt ? rt : "unknown"));
    if (!rt)
        warn(c, "architecture '%s' has no engine runtime in llmr: registered with runtime 'unknown'; nodes will mark it "
                "unsupported", arch ? arch : mt);
    return 0;
}

/* format=gguf: exactly one .gguf (or the one filename names). */
static int validate_gguf(vctx *c, json_t *record) {
    const char *pick = NULL;
    json_t *ggufs = gguf_files(&c->listing);
    if (c->req->filename) {
        if (!ends_with(c->req->filename, ".gguf") || !router_hub_listing_find(&c->listing, c->req->filename)) {
            json_decref(ggufs);
            return verdict(c->v, 400, "missing_required_file", "filename", json_pack("{s:[s]}", "missing", c->req->filename),
                           "repo '%s' at %s has no GGUF file '%.300s'", c->req->repo, c->listing.commit, c->req->filename);
        }
        pick = c->req->filename;
    } else if (json_array_size(ggufs) == 0) {
        json_decref(ggufs);
        return verdict(c->v, 400, "missing_required_file", NULL, json_pack("{s:[s]}", "missing", "*.gguf"),
                       "repo '%s' at %s holds no .gguf file", c->req->repo, c->listing.commit);
    } else if (json_array_size(ggufs) > 1) {
        char list[1536];
        join_names(ggufs, list, sizeof list);
        return verdict(c->v, 400, "ambiguous_artifacts", "filename", json_pack("{s:o}", "files", ggufs),
                       "repo '%s' holds several .gguf files; name one with 'filename': %s", c->req->repo, list);
    } else {
        pick = json_string_value(json_array_get(ggufs, 0));
    }
    int st = add_file(c, pick, 1);
    json_decref(ggufs);
    if (st) return st;
    json_object_set_new(record, "runtime", json_string("gguf"));
    json_object_set_new(record, "architecture", json_string("unknown"));
    warn(c, "format gguf: no GGUF engine plugin ships yet, so nodes report this model unsupported until one is installed");
    return 0;
}

int router_validate_register(const router_validate_env *env, const router_register_req *req, router_verdict *v) {
    memset(v, 0, sizeof *v);
    vctx c = {.env = env, .req = req, .v = v, .warnings = json_array(), .files = json_array()};
    json_t *record = json_object(), *cfg = NULL;
    char err[1024];
    int st = env->hub->list(env->hub->ctx, req->repo, req->revision, &c.listing, err, sizeof err);
    if (st) { hub_verdict(&c, st, "listing", err); goto out; }
    json_t *sts = top_level_with(&c.listing, ".safetensors"), *ggs = gguf_files(&c.listing);
    int has_st = json_array_size(sts) > 0 || router_hub_listing_find(&c.listing, INDEX_NAME);
    int has_gg = json_array_size(ggs) > 0;
    json_decref(sts);
    json_decref(ggs);
    const char *format = req->format;
    if (!format) {
        if (has_st && has_gg) {
            verdict(v, 400, "format_required", "format", NULL,
                    "repo '%s' holds both .safetensors and .gguf weights: say which with \"format\": \"safetensors\" or "
                    "\"gguf\"", req->repo);
            goto out;
        }
        format = has_gg ? "gguf" : "safetensors";
    }
    st = !strcmp(format, "gguf") ? validate_gguf(&c, record) : validate_safetensors(&c, record, &cfg);
    if (st || (st = choose_template(&c, record)) || (st = add_artifacts(&c, record))) goto out;
    estimate_vram(&c, cfg, record);
    uint64_t total = 0;
    for (size_t i = 0; i < json_array_size(c.files); i++)
        total += (uint64_t)json_integer_value(json_object_get(json_array_get(c.files, i), "size"));
    json_object_set_new(record, "object", json_string("model"));
    json_object_set_new(record, "id", json_string(req->id));
    json_object_set_new(record, "repo", json_string(req->repo));
    json_object_set_new(record, "display_name", json_string(req->display_name ? req->display_name : req->repo));
    json_object_set_new(record, "format", json_string(format));
    json_object_set_new(record, "revision", json_string(req->revision));
    json_object_set_new(record, "commit", json_string(c.listing.commit));
    json_object_set_new(record, "hub", json_string(env->hub->endpoint ? env->hub->endpoint : ""));
    json_object_set(record, "files", c.files);
    json_object_set_new(record, "total_size_bytes", json_integer((json_int_t)total));
    json_object_set(record, "warnings", c.warnings);
    v->status = 201;
    v->record = record;
    record = NULL;
out:
    json_decref(record);
    json_decref(cfg);
    json_decref(c.warnings);
    json_decref(c.files);
    for (int i = 0; i < c.n_cache; i++) free(c.cache[i].path), free(c.cache[i].body);
    router_hub_listing_free(&c.listing);
    if (v->status != 201) { free(v->chat_template); v->chat_template = NULL; }
    return v->status;
}

/* --- manifest --------------------------------------------------------------------------- */

json_t *router_manifest_from_record(json_t *rec) {
    json_t *files = json_array(), *arts = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(rec, "files"), i, f)
        json_array_append_new(files, json_pack("{s:O, s:O, s:O, s:O, s:b}", "name", json_object_get(f, "name"), "url",
                                               json_object_get(f, "url"), "size", json_object_get(f, "size"), "sha256",
                                               json_object_get(f, "sha256"), "optional", 0));
    json_array_foreach(json_object_get(rec, "artifacts"), i, f)
        json_array_append_new(arts, json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:b}", "backend", json_object_get(f, "backend"),
                                              "name", json_object_get(f, "name"), "url", json_object_get(f, "url"), "size",
                                              json_object_get(f, "size"), "sha256", json_object_get(f, "sha256"),
                                              "source_repo", json_object_get(f, "source_repo"), "optional", 1));
    json_t *m = json_pack("{s:O, s:O, s:O, s:O, s:O, s:o, s:o}", "id", json_object_get(rec, "id"), "format",
                          json_object_get(rec, "format"), "revision", json_object_get(rec, "revision"), "commit",
                          json_object_get(rec, "commit"), "runtime", json_object_get(rec, "runtime"), "files", files,
                          "artifacts", arts);
    json_t *arch = json_object_get(rec, "architecture");
    if (m && json_is_string(arch)) json_object_set(m, "architecture", arch);
    return m;
}
