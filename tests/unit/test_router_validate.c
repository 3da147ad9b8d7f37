/* Unit tests for router/validate: every registration failure of issue 3, sharded success, the
 * artifact allowlist, chat template sources, the manifest; driven by in-memory hub listings. */
#include <jansson.h>

#include "common/sha256.h"
#include "router/template_check.h"
#include "router/validate.h"
#include "tests/unit/testutil.h"

/* --- an in-memory hub: repos of files (small files have content; LFS files a size + oid) --- */
typedef struct mfile { const char *path; const char *content; uint64_t lfs_size; const char *lfs_sha; } mfile;
typedef struct mrepo { const char *repo; const char *commit; mfile files[24]; } mrepo;
typedef struct mhub { mrepo *repos; int n; int fail_list; int fetches; } mhub;

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define SHA_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define COMMIT1 "1111111111111111111111111111111111111111"
#define COMMIT2 "2222222222222222222222222222222222222222"
#define CONFIG_GPTOSS "{\"architectures\":[\"GptOssForCausalLM\"],\"model_type\":\"gpt_oss\",\"num_hidden_layers\":24," \
                      "\"num_key_value_heads\":8,\"head_dim\":64,\"max_position_embeddings\":131072}"
#define INDEX2 "{\"metadata\":{},\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\"," \
               "\"b.weight\":\"model-00002-of-00002.safetensors\",\"c.weight\":\"model-00001-of-00002.safetensors\"}}"

static mrepo *find_repo(mhub *h, const char *repo) {
    for (int i = 0; i < h->n; i++)
        if (!strcasecmp(h->repos[i].repo, repo)) return &h->repos[i];
    return NULL;
}

static int m_list(void *ctx, const char *repo, const char *rev, router_hub_listing *out, char *err, size_t es) {
    mhub *h = ctx;
    (void)rev;
    memset(out, 0, sizeof *out);
    if (h->fail_list) { snprintf(err, es, "GET http://hub/api: connection refused"); return h->fail_list; }
    mrepo *r = find_repo(h, repo);
    if (!r) { snprintf(err, es, "GET http://hub/api/models/%s: HTTP 404", repo); return ROUTER_HUB_ENOTFOUND; }
    snprintf(out->commit, sizeof out->commit, "%s", r->commit);
    for (int i = 0; i < 24 && r->files[i].path; i++) {
        const mfile *f = &r->files[i];
        router_hub_listing_add(out, f->path, f->content ? strlen(f->content) : f->lfs_size, f->lfs_sha ? f->lfs_sha : "");
    }
    return 0;
}

static int m_fetch(void *ctx, const char *repo, const char *commit, const char *path, size_t max, char **body,
                   size_t *len, char *err, size_t es) {
    mhub *h = ctx;
    (void)commit;
    (void)max;
    h->fetches++;
    mrepo *r = find_repo(h, repo);
    for (int i = 0; r && i < 24 && r->files[i].path; i++)
        if (!strcmp(r->files[i].path, path)) {
            const char *c = r->files[i].content ? r->files[i].content : "";
            *body = strdup(c);
            *len = strlen(c);
            return 0;
        }
    snprintf(err, es, "no %s", path);
    return ROUTER_HUB_ENOTFOUND;
}

/* A sharded gpt-oss-like repo plus the official Metal artifact. */
static mrepo base_repo(void) {
    mrepo r = {"openai/gpt-oss-20b", COMMIT1, {
        {"config.json", CONFIG_GPTOSS, 0, NULL},
        {"tokenizer.json", NULL, 27868174, SHA_C},
        {"tokenizer_config.json", "{\"chat_template\":\"{{ bos_token }}\"}", 0, NULL},
        {"chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}", 0, NULL},
        {"model.safetensors.index.json", INDEX2, 0, NULL},
        {"model-00001-of-00002.safetensors", NULL, 1000, SHA_A},
        {"model-00002-of-00002.safetensors", NULL, 500, SHA_B},
        {"original/model.safetensors", NULL, 1500, SHA_A},
        {"metal/model.bin", NULL, 1400, SHA_B},
        {"README.md", "# readme", 0, NULL},
    }};
    return r;
}

static mrepo g_repos[4];
static mhub g_hub;
static router_hub g_rh;
static router_artifacts *g_arts;

static int strict_check(const char *src, size_t len, int *line, int *col, char *err, size_t es) {
    /* Used when the Jinja engine is not built in: an unclosed "{%" is a syntax error at its position. */
    int l = 1, c = 1;
    for (size_t i = 0; i + 1 < len; i++) {
        if (src[i] == '{' && src[i + 1] == '%' && !strstr(src + i, "%}")) {
            *line = l, *col = c;
            snprintf(err, es, "unclosed block tag");
            return -1;
        }
        if (src[i] == '\n') l++, c = 1;
        else c++;
    }
    return 0;
}

static router_validate_env env(void) {
    router_validate_env e = {.hub = &g_rh, .artifacts = g_arts,
                             .check_template = router_template_check_available ? router_template_check : strict_check};
    return e;
}

static void setup(void) {
    memset(&g_hub, 0, sizeof g_hub);
    g_repos[0] = base_repo();
    g_hub.repos = g_repos;
    g_hub.n = 1;
    g_rh = (router_hub){.ctx = &g_hub, .endpoint = "http://hub.test", .list = m_list, .fetch = m_fetch};
    const char *sm = "{\"models\":[{\"id\":\"openai/gpt-oss-20b\",\"artifacts\":["
                     "{\"backend\":\"metal\",\"source_repo\":\"openai/gpt-oss-20b\",\"path\":\"metal/model.bin\",\"name\":\"model.metal.bin\"},"
                     "{\"backend\":\"cuda\",\"source_repo\":\"nvidia/gpt-oss-20b-opt\",\"path\":\"cuda/model.plan\",\"name\":\"model.cuda.plan\"},"
                     "{\"backend\":\"rocm\",\"source_repo\":\"evil/gpt-oss-20b\",\"path\":\"rocm.bin\",\"name\":\"model.rocm.bin\"}]}]}";
    char err[256];
    g_arts = router_artifacts_parse("test", sm, strlen(sm), "openai/*,nvidia/*", err, sizeof err);
    ck_assert_msg(g_arts != NULL, "%s", err);
    mrepo nv = {"nvidia/gpt-oss-20b-opt", COMMIT2, {{"cuda/model.plan", NULL, 777, SHA_C}}};
    mrepo evil = {"evil/gpt-oss-20b", COMMIT2, {{"rocm.bin", NULL, 5, SHA_C}}};
    g_repos[1] = nv;
    g_repos[2] = evil;
    g_hub.n = 3;
}

static void teardown(void) { router_artifacts_destroy(g_arts); }

/* Parses body, validates; returns the status with *v filled (caller frees). */
static int reg(const char *body, router_verdict *v) {
    json_t *j = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    router_register_req r;
    int rc = router_register_parse(j, &r, v);
    json_decref(j);
    if (rc) return v->status;
    router_verdict_free(v);
    router_validate_env e = env();
    int st = router_validate_register(&e, &r, v);
    router_register_req_free(&r);
    return st;
}

static void remove_file(const char *path) {
    mfile *f = g_repos[0].files;
    int n = 0;
    while (n < 24 && f[n].path) n++;
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].path, path)) {
            memmove(&f[i], &f[i + 1], (size_t)(n - i - 1) * sizeof *f);
            f[n - 1] = (mfile){0};
            return;
        }
}

static void add_file(mfile nf) {
    mfile *f = g_repos[0].files;
    int n = 0;
    while (n < 24 && f[n].path) n++;
    f[n] = nf;
}

static void set_content(const char *path, const char *content) {
    for (int i = 0; i < 24 && g_repos[0].files[i].path; i++)
        if (!strcmp(g_repos[0].files[i].path, path)) g_repos[0].files[i].content = content;
}

static const char *warnings_text(json_t *rec) {
    static char buf[8192];
    char *s = json_dumps(json_object_get(rec, "warnings"), 0);
    snprintf(buf, sizeof buf, "%s", s ? s : "");
    free(s);
    return buf;
}

START_TEST(sharded_success) {
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"OpenAI/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 201);
    json_t *r = v.record;
    ck_assert_str_eq(json_string_value(json_object_get(r, "id")), "openai/gpt-oss-20b");
    ck_assert_str_eq(json_string_value(json_object_get(r, "repo")), "OpenAI/gpt-oss-20b");
    ck_assert_str_eq(json_string_value(json_object_get(r, "commit")), COMMIT1);
    ck_assert_str_eq(json_string_value(json_object_get(r, "revision")), "main");
    ck_assert_str_eq(json_string_value(json_object_get(r, "runtime")), "gptoss");
    ck_assert_str_eq(json_string_value(json_object_get(r, "architecture")), "GptOssForCausalLM");
    ck_assert_str_eq(json_string_value(json_object_get(r, "format")), "safetensors");
    /* config, tokenizer, index, 2 shards, tokenizer_config, chat_template.jinja; not original/ or README */
    json_t *files = json_object_get(r, "files");
    ck_assert_int_eq(json_array_size(files), 7);
    uint64_t total = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        ck_assert_int_eq(strlen(sha), 64);
        total += (uint64_t)json_integer_value(json_object_get(f, "size"));
        ck_assert_ptr_null(strstr(name, "original/"));
        char want[512];
        snprintf(want, sizeof want, "http://hub.test/OpenAI/gpt-oss-20b/resolve/%s/%s", COMMIT1, name);
        ck_assert_str_eq(json_string_value(json_object_get(f, "url")), want);
        if (!strcmp(name, "model-00001-of-00002.safetensors")) ck_assert_str_eq(sha, SHA_A);
        if (!strcmp(name, "config.json")) { /* small file hashed by the router */
            char h[65];
            llmr_sha256_buf(CONFIG_GPTOSS, strlen(CONFIG_GPTOSS), h);
            ck_assert_str_eq(sha, h);
        }
    }
    ck_assert_int_eq(json_integer_value(json_object_get(r, "total_size_bytes")), (json_int_t)total);
    /* weights 1500 + KV 2*24*8*64*2*8192 bytes, + 10% */
    json_int_t want_vram = (json_int_t)((1500.0 + 2.0 * 24 * 8 * 64 * 2 * 8192) * 1.1);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "vram_estimate_bytes")), want_vram);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "chat_template"), "source")), "chat_template.jinja");
    ck_assert_str_eq(v.chat_template, "{% for m in messages %}{{ m.content }}{% endfor %}");
    /* artifacts: the metal one (an openai repo) and the nvidia one (another allowed org); evil/ left out */
    json_t *arts = json_object_get(r, "artifacts");
    ck_assert_int_eq(json_array_size(arts), 2);
    json_t *a0 = json_array_get(arts, 0), *a1 = json_array_get(arts, 1);
    ck_assert_str_eq(json_string_value(json_object_get(a0, "name")), "model.metal.bin");
    ck_assert_str_eq(json_string_value(json_object_get(a0, "sha256")), SHA_B);
    ck_assert_str_eq(json_string_value(json_object_get(a0, "url")),
                     "http://hub.test/openai/gpt-oss-20b/resolve/" COMMIT1 "/metal/model.bin");
    ck_assert_str_eq(json_string_value(json_object_get(a1, "source_repo")), "nvidia/gpt-oss-20b-opt");
    ck_assert_str_eq(json_string_value(json_object_get(a1, "url")),
                     "http://hub.test/nvidia/gpt-oss-20b-opt/resolve/" COMMIT2 "/cuda/model.plan");
    ck_assert_ptr_nonnull(strstr(warnings_text(r), "evil/gpt-oss-20b"));
    ck_assert_ptr_nonnull(strstr(warnings_text(r), "allowlist"));

    /* the manifest: schema fields, pinned URLs, optional flags */
    json_t *m = router_manifest_from_record(r);
    ck_assert_str_eq(json_string_value(json_object_get(m, "commit")), COMMIT1);
    ck_assert_int_eq(json_array_size(json_object_get(m, "files")), 7);
    ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(m, "files"), 0), "optional")));
    ck_assert(json_is_true(json_object_get(json_array_get(json_object_get(m, "artifacts"), 0), "optional")));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(m, "artifacts"), 0), "backend")), "metal");
    json_decref(m);
    router_verdict_free(&v);
}
END_TEST

START_TEST(single_file_and_format_inferred) {
    remove_file("model.safetensors.index.json");
    remove_file("model-00002-of-00002.safetensors");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(v.record, "format")), "safetensors");
    ck_assert_int_eq(json_integer_value(json_object_get(v.record, "total_size_bytes")) > 1000, 1);
    router_verdict_free(&v);
}
END_TEST

START_TEST(format_required_and_invalid) {
    add_file((mfile){"model-q4.gguf", NULL, 10, SHA_A});
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 400);
    ck_assert_str_eq(v.code, "format_required");
    ck_assert_str_eq(v.param, "format");
    router_verdict_free(&v);
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"onnx\"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_format");
    ck_assert_ptr_nonnull(strstr(v.message, "onnx"));
    router_verdict_free(&v);
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 201);
    router_verdict_free(&v);
}
END_TEST

START_TEST(missing_required_files_named) {
    remove_file("config.json");
    remove_file("tokenizer.json");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_required_file");
    json_t *missing = json_object_get(v.extra, "missing");
    ck_assert_int_eq(json_array_size(missing), 2);
    ck_assert_str_eq(json_string_value(json_array_get(missing, 0)), "config.json");
    ck_assert_str_eq(json_string_value(json_array_get(missing, 1)), "tokenizer.json");
    ck_assert_ptr_nonnull(strstr(v.message, "config.json"));
    ck_assert_ptr_nonnull(strstr(v.message, "tokenizer.json"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(only_tokenizer_missing) {
    remove_file("tokenizer.json");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_required_file");
    ck_assert_int_eq(json_array_size(json_object_get(v.extra, "missing")), 1);
    ck_assert_ptr_null(strstr(v.message, "config.json"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(invalid_config) {
    router_verdict v;
    set_content("config.json", "{not json");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_config");
    ck_assert_ptr_nonnull(strstr(v.message, "not valid JSON"));
    router_verdict_free(&v);
    set_content("config.json", "{\"hidden_size\":4}");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_config");
    ck_assert_ptr_nonnull(strstr(v.message, "architectures"));
    router_verdict_free(&v);
    set_content("config.json", "[1,2]");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_config");
    router_verdict_free(&v);
}
END_TEST

START_TEST(missing_shard_named) {
    remove_file("model-00002-of-00002.safetensors");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_shard");
    json_t *missing = json_object_get(v.extra, "missing");
    ck_assert_int_eq(json_array_size(missing), 1);
    ck_assert_str_eq(json_string_value(json_array_get(missing, 0)), "model-00002-of-00002.safetensors");
    ck_assert_ptr_nonnull(strstr(v.message, "model-00002-of-00002.safetensors"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(unsafe_shard_names) {
    const char *bad[] = {"{\"weight_map\":{\"a\":\"../../etc/passwd\"}}", "{\"weight_map\":{\"a\":\"/abs.safetensors\"}}",
                         "{\"weight_map\":{\"a\":\"x//y.safetensors\"}}", "{\"weight_map\":{\"a\":\"a\\\\b.safetensors\"}}"};
    for (int i = 0; i < 4; i++) {
        set_content("model.safetensors.index.json", bad[i]);
        router_verdict v;
        ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
        ck_assert_str_eq(v.code, "unsafe_file_name");
        ck_assert_int_eq(json_array_size(json_object_get(v.extra, "files")), 1);
        router_verdict_free(&v);
    }
}
END_TEST

START_TEST(invalid_index) {
    const char *bad[] = {"{", "{\"weight_map\":{}}", "{\"weight_map\":[1]}", "{\"weight_map\":{\"a\":5}}"};
    for (int i = 0; i < 4; i++) {
        set_content("model.safetensors.index.json", bad[i]);
        router_verdict v;
        ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
        ck_assert_str_eq(v.code, "invalid_index");
        router_verdict_free(&v);
    }
}
END_TEST

START_TEST(ambiguous_without_index) {
    remove_file("model.safetensors.index.json");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "ambiguous_artifacts");
    json_t *files = json_object_get(v.extra, "files");
    ck_assert_int_eq(json_array_size(files), 2);
    ck_assert_ptr_nonnull(strstr(v.message, "model-00001-of-00002.safetensors"));
    ck_assert_ptr_nonnull(strstr(v.message, "model-00002-of-00002.safetensors"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(no_weights) {
    remove_file("model.safetensors.index.json");
    remove_file("model-00001-of-00002.safetensors");
    remove_file("model-00002-of-00002.safetensors");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"safetensors\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_required_file");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(v.extra, "missing"), 0)), "*.safetensors");
    router_verdict_free(&v);
}
END_TEST

START_TEST(chat_template_sources) {
    router_verdict v;
    /* a broken template in the request: 400 with the position */
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"chat_template\":\"hello\\n{% if x \"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_chat_template");
    ck_assert_str_eq(v.param, "chat_template");
    ck_assert_int_eq(json_integer_value(json_object_get(v.extra, "line")), 2);
    ck_assert_int_gt(json_integer_value(json_object_get(v.extra, "column")), 0);
    ck_assert_ptr_nonnull(strstr(v.message, "line 2"));
    router_verdict_free(&v);
    /* a good one in the request wins over the repo's */
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"chat_template\":\"{{ messages[0].content }}\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v.record, "chat_template"), "source")), "request");
    router_verdict_free(&v);
    /* a broken chat_template.jinja in the repo */
    set_content("chat_template.jinja", "{{ x }}\n{% for m in messages ");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 400);
    ck_assert_str_eq(v.code, "invalid_chat_template");
    ck_assert_str_eq(json_string_value(json_object_get(v.extra, "source")), "chat_template.jinja");
    router_verdict_free(&v);
    /* tokenizer_config.json when there is no chat_template.jinja */
    remove_file("chat_template.jinja");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v.record, "chat_template"), "source")),
                     "tokenizer_config.json");
    ck_assert_str_eq(v.chat_template, "{{ bos_token }}");
    router_verdict_free(&v);
    /* real HF tokenizer_config.json files hold model_max_length = 1e30 written as an integer */
    set_content("tokenizer_config.json",
                "{\"model_max_length\": 1000000000000000019884624838656, \"chat_template\": \"{{ eos_token }}\","
                " \"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}, \"eos_token\": \"</s>\"}");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_str_eq(v.chat_template, "{{ eos_token }}");
    /* the special tokens the template renders are kept in the record (AddedToken or plain string) */
    json_t *sp = json_object_get(v.record, "special_tokens");
    ck_assert_str_eq(json_string_value(json_object_get(sp, "bos_token")), "<s>");
    ck_assert_str_eq(json_string_value(json_object_get(sp, "eos_token")), "</s>");
    router_verdict_free(&v);
    /* none at all: default, with a warning */
    set_content("tokenizer_config.json", "{}");
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v.record, "chat_template"), "source")), "default");
    ck_assert_ptr_null(v.chat_template);
    ck_assert_ptr_nonnull(strstr(warnings_text(v.record), "default template"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(unknown_architecture_is_a_warning) {
    set_content("config.json", "{\"architectures\":[\"MysteryForCausalLM\"]}");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(v.record, "runtime")), "unknown");
    ck_assert_ptr_nonnull(strstr(warnings_text(v.record), "MysteryForCausalLM"));
    /* no attention shape: the estimate covers weights only, with a warning */
    ck_assert_int_eq(json_integer_value(json_object_get(v.record, "vram_estimate_bytes")), (json_int_t)(1500 * 1.1));
    ck_assert_ptr_nonnull(strstr(warnings_text(v.record), "VRAM estimate"));
    router_verdict_free(&v);
}
END_TEST

START_TEST(gguf) {
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_required_file");
    router_verdict_free(&v);
    add_file((mfile){"m-q4.gguf", NULL, 10, SHA_A});
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(v.record, "format")), "gguf");
    ck_assert_int_eq(json_array_size(json_object_get(v.record, "files")), 1);
    ck_assert_ptr_nonnull(strstr(warnings_text(v.record), "GGUF"));
    router_verdict_free(&v);
    add_file((mfile){"m-q8.gguf", NULL, 20, SHA_B});
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\"}", &v), 400);
    ck_assert_str_eq(v.code, "ambiguous_artifacts");
    ck_assert_int_eq(json_array_size(json_object_get(v.extra, "files")), 2);
    router_verdict_free(&v);
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\",\"filename\":\"m-q8.gguf\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(v.record, "files"), 0), "name")), "m-q8.gguf");
    router_verdict_free(&v);
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\",\"filename\":\"nope.gguf\"}", &v), 400);
    ck_assert_str_eq(v.code, "missing_required_file");
    router_verdict_free(&v);
}
END_TEST

START_TEST(gguf_in_a_folder) {
    router_verdict v;
    add_file((mfile){"gguf/m-q4.gguf", NULL, 10, SHA_A});
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 400); /* both kinds: say which */
    ck_assert_str_eq(v.code, "format_required");
    router_verdict_free(&v);
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\",\"format\":\"gguf\"}", &v), 201);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(v.record, "files"), 0), "name")), "gguf/m-q4.gguf");
    router_verdict_free(&v);
}
END_TEST

START_TEST(hub_failures) {
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"nobody/nothing\"}", &v), 404);
    ck_assert_str_eq(v.code, "repo_not_found");
    ck_assert_ptr_nonnull(strstr(v.message, "nobody/nothing"));
    router_verdict_free(&v);
    g_hub.fail_list = ROUTER_HUB_EUNREACHABLE;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 502);
    ck_assert_str_eq(v.code, "hub_unreachable");
    ck_assert_ptr_nonnull(strstr(v.message, "http://hub.test"));
    ck_assert_ptr_nonnull(strstr(v.message, "connection refused"));
    router_verdict_free(&v);
    g_hub.fail_list = ROUTER_HUB_EAUTH;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 403);
    ck_assert_str_eq(v.code, "repo_access_denied");
    router_verdict_free(&v);
}
END_TEST

START_TEST(artifact_missing_in_source_repo) {
    remove_file("metal/model.bin");
    router_verdict v;
    ck_assert_int_eq(reg("{\"repo\":\"openai/gpt-oss-20b\"}", &v), 201);
    ck_assert_int_eq(json_array_size(json_object_get(v.record, "artifacts")), 1); /* nvidia only */
    ck_assert_ptr_nonnull(strstr(warnings_text(v.record), "metal/model.bin"));
    ck_assert_str_eq(json_string_value(json_object_get(v.record, "format")), "safetensors");
    router_verdict_free(&v);
}
END_TEST

START_TEST(bad_bodies) {
    struct { const char *body, *code, *param; } cases[] = {
        {"[]", "invalid_request", ""},
        {"{}", "missing_field", "repo"},
        {"{\"repo\":5}", "invalid_type", "repo"},
        {"{\"repo\":null}", "invalid_type", "repo"},
        {"{\"repo\":\"a/b\",\"format\":7}", "invalid_type", "format"},
        {"{\"repo\":\"a/b\",\"revision\":[]}", "invalid_type", "revision"},
        {"{\"repo\":\"a/b\",\"chat_template\":{}}", "invalid_type", "chat_template"},
        {"{\"repo\":\"a/b\",\"display_name\":1}", "invalid_type", "display_name"},
        {"{\"repo\":\"noslash\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/b/c\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"../etc\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/..\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/b..c\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a b/c\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"/b\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/b%2f\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/b\\n\"}", "invalid_repo", "repo"},
        {"{\"repo\":\"a/b\",\"format\":\"pytorch\"}", "invalid_format", "format"},
        {"{\"repo\":\"a/b\",\"revision\":\"../x\"}", "invalid_revision", "revision"},
        {"{\"repo\":\"a/b\",\"revision\":\"a b\"}", "invalid_revision", "revision"},
        {"{\"repo\":\"a/b\",\"format\":\"gguf\",\"filename\":\"../x.gguf\"}", "unsafe_file_name", "filename"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = json_loads(cases[i].body, JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(j);
        router_register_req r;
        router_verdict v;
        ck_assert_msg(router_register_parse(j, &r, &v) == -1, "case %zu accepted", i);
        ck_assert_int_eq(v.status, 400);
        ck_assert_msg(!strcmp(v.code, cases[i].code), "case %zu: code %s, want %s", i, v.code, cases[i].code);
        ck_assert_msg(!strcmp(v.param, cases[i].param), "case %zu: param %s", i, v.param);
        json_decref(j);
        router_verdict_free(&v);
    }
    char long_repo[400];
    memset(long_repo, 'a', sizeof long_repo);
    long_repo[0] = 'x', long_repo[1] = '/', long_repo[150] = 0;
    char err[256];
    ck_assert_int_eq(router_repo_name_valid(long_repo, err, sizeof err), 0);
    ck_assert_int_eq(router_repo_name_valid("openai/gpt-oss-20b", err, sizeof err), 1);
    ck_assert_int_eq(router_repo_name_valid("Org_1/Model.v2-x", err, sizeof err), 1);
}
END_TEST

START_TEST(resolve_url_encoding) {
    char *u = router_hub_resolve_url("http://h", "a/b", COMMIT1, "dir/my file#1.json");
    ck_assert_str_eq(u, "http://h/a/b/resolve/" COMMIT1 "/dir/my%20file%231.json");
    free(u);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_validate");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sharded_success);
    tcase_add_test(tc, single_file_and_format_inferred);
    tcase_add_test(tc, format_required_and_invalid);
    tcase_add_test(tc, missing_required_files_named);
    tcase_add_test(tc, only_tokenizer_missing);
    tcase_add_test(tc, invalid_config);
    tcase_add_test(tc, missing_shard_named);
    tcase_add_test(tc, unsafe_shard_names);
    tcase_add_test(tc, invalid_index);
    tcase_add_test(tc, ambiguous_without_index);
    tcase_add_test(tc, no_weights);
    tcase_add_test(tc, chat_template_sources);
    tcase_add_test(tc, unknown_architecture_is_a_warning);
    tcase_add_test(tc, gguf);
    tcase_add_test(tc, gguf_in_a_folder);
    tcase_add_test(tc, hub_failures);
    tcase_add_test(tc, artifact_missing_in_source_repo);
    tcase_add_test(tc, bad_bodies);
    tcase_add_test(tc, resolve_url_encoding);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
