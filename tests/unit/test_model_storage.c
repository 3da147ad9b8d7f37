/* Unit tests for node/model_storage.c: ModelStorage validation cases and the ModelDescriptor. */
#include <sys/stat.h>
#include <unistd.h>

#include "node/model_storage.h"
#include "testutil.h"

static char *dir;

static void put(const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A safetensors file with F32 tensors of 2 elements each, named by a NULL-terminated list. */
static void put_st(const char *name, const char *const *tensors) {
    char header[4096] = "{";
    size_t n = 0;
    for (; tensors[n]; n++) {
        char one[256];
        snprintf(one, sizeof one, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%zu,%zu]}", n ? "," : "",
                 tensors[n], n * 8, n * 8 + 8);
        strcat(header, one);
    }
    strcat(header, "}");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    uint64_t hl = strlen(header);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, hl, f);
    for (size_t i = 0; i < n * 8; i++) fputc(0, f);
    fclose(f);
}

static void rm(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void setup(void) {
    dir = llmr_test_tmpdir();
    put("config.json", "{\"architectures\":[\"GptOssForCausalLM\"],\"model_type\":\"gpt_oss\"}");
    put("tokenizer.json", "{\"model\":{}}");
}

static void teardown(void) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

static const char *const T_AB[] = {"a", "b", NULL};
static const char *const T_A[] = {"a", NULL};
static const char *const T_B[] = {"b", NULL};
static const char *const T_BC[] = {"b", "c", NULL};

static void sharded(void) {
    put_st("model-00001-of-00002.safetensors", T_A);
    put_st("model-00002-of-00002.safetensors", T_B);
    put("model.safetensors.index.json",
        "{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002.safetensors\"}}");
}

static llmr_storage_status check(char *err, size_t es, llmr_storage_model **out) {
    llmr_storage_model *m = NULL;
    llmr_storage_status st = llmr_storage_validate(dir, "openai/gpt-oss-20b", "safetensors", NULL, 0, &m, err, es);
    if (out) *out = m;
    else llmr_storage_model_free(m);
    return st;
}

START_TEST(test_single_file_ok) {
    put_st("model.safetensors", T_AB);
    char err[1024] = "";
    llmr_storage_model *m;
    ck_assert_msg(check(err, sizeof err, &m) == LLMR_STORAGE_OK, "%s", err);
    ck_assert_str_eq(m->desc.id, "openai/gpt-oss-20b");
    ck_assert_str_eq(m->desc.format, "safetensors");
    ck_assert_str_eq(m->desc.runtime, "gptoss");
    ck_assert_str_eq(m->desc.architecture, "GptOssForCausalLM");
    ck_assert_int_eq(m->desc.model_dir[0], '/');
    ck_assert_ptr_null(m->desc.artifact_path);
    ck_assert_uint_eq(m->n_files, 3);
    ck_assert_str_eq(m->files[2], "model.safetensors");
    llmr_storage_model_free(m);
}
END_TEST

START_TEST(test_sharded_ok) {
    sharded();
    char err[1024] = "";
    llmr_storage_model *m;
    ck_assert_msg(check(err, sizeof err, &m) == LLMR_STORAGE_OK, "%s", err);
    ck_assert_uint_eq(m->n_files, 5); /* config, tokenizer, 2 shards, index */
    llmr_storage_model_free(m);
}
END_TEST

START_TEST(test_missing_config_or_tokenizer) {
    put_st("model.safetensors", T_AB);
    char err[1024];
    rm("tokenizer.json");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EMISSING_FILE);
    ck_assert_ptr_nonnull(strstr(err, "tokenizer.json is missing"));
    rm("config.json");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EMISSING_FILE);
    ck_assert_ptr_nonnull(strstr(err, "config.json is missing"));
}
END_TEST

START_TEST(test_bad_json) {
    put_st("model.safetensors", T_AB);
    char err[1024];
    put("tokenizer.json", "{\"model\": ");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EBAD_JSON);
    ck_assert_ptr_nonnull(strstr(err, "tokenizer.json: not valid JSON"));
    put("config.json", "not json");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EBAD_JSON);
    ck_assert_ptr_nonnull(strstr(err, "config.json"));
    put("config.json", "{\"hidden_size\": 4}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EBAD_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "architectures"));
    put("config.json", "[1,2]");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EBAD_CONFIG);
}
END_TEST

START_TEST(test_missing_shards_all_named) {
    put_st("model-00001-of-00003.safetensors", T_A);
    put("model.safetensors.index.json",
        "{\"weight_map\":{\"a\":\"model-00001-of-00003.safetensors\",\"b\":\"model-00002-of-00003.safetensors\","
        "\"c\":\"model-00003-of-00003.safetensors\"}}");
    char err[1024];
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EMISSING_SHARD);
    ck_assert_ptr_nonnull(strstr(err, "model-00002-of-00003.safetensors"));
    ck_assert_ptr_nonnull(strstr(err, "model-00003-of-00003.safetensors"));
    ck_assert_ptr_null(strstr(err, "model-00001-of-00003.safetensors"));
}
END_TEST

START_TEST(test_index_disagrees_with_headers) {
    sharded();
    char err[1024];
    /* b is listed for shard 1 but stored in shard 2. */
    put("model.safetensors.index.json",
        "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00001-of-00002.safetensors\"}}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    ck_assert_ptr_nonnull(strstr(err, "tensor b"));
    /* A tensor in a shard that the index leaves out. */
    put_st("model-00002-of-00002.safetensors", T_BC);
    put("model.safetensors.index.json",
        "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002.safetensors\"}}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    ck_assert_ptr_nonnull(strstr(err, "not listed"));
    /* A corrupt header in a shard. */
    sharded();
    put("model-00002-of-00002.safetensors", "garbage that is no safetensors header");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    ck_assert_ptr_nonnull(strstr(err, "model-00002-of-00002.safetensors"));
}
END_TEST

START_TEST(test_index_hostile) {
    char err[1024];
    put("model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    ck_assert_ptr_nonnull(strstr(err, "unsafe shard name"));
    put("model.safetensors.index.json", "{\"weight_map\":{}}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    put("model.safetensors.index.json", "{\"weight_map\":{\"a\":7}}");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EINCONSISTENT);
    put("model.safetensors.index.json", "{\"weight_map\":");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EBAD_JSON);
}
END_TEST

START_TEST(test_no_index_needs_exactly_one) {
    char err[1024];
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EMISSING_FILE);
    ck_assert_ptr_nonnull(strstr(err, "no .safetensors"));
    put_st("x.safetensors", T_A);
    put_st("y.safetensors", T_B);
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_EAMBIGUOUS);
    ck_assert_ptr_nonnull(strstr(err, "2 .safetensors files"));
    /* A leftover .partial is not a weights file. */
    rm("y.safetensors");
    put("y.safetensors.partial", "half");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_OK);
}
END_TEST

START_TEST(test_metadata_json_never_used) {
    /* A metadata.json claiming another architecture changes nothing, and none is ever written. */
    put_st("model.safetensors", T_AB);
    put("config.json", "{\"architectures\":[\"LlamaForCausalLM\"]}");
    put("metadata.json", "{\"architecture\":\"GptOssForCausalLM\",\"runtime\":\"gptoss\"}");
    char err[1024];
    llmr_storage_model *m;
    ck_assert_int_eq(check(err, sizeof err, &m), LLMR_STORAGE_OK);
    ck_assert_str_eq(m->desc.architecture, "LlamaForCausalLM");
    ck_assert_str_eq(m->desc.runtime, "unknown");
    llmr_storage_model_free(m);
    rm("metadata.json");
    ck_assert_int_eq(check(err, sizeof err, NULL), LLMR_STORAGE_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/metadata.json", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

START_TEST(test_model_type_fallback_and_artifacts) {
    put_st("model.safetensors", T_AB);
    put("config.json", "{\"model_type\":\"gpt_oss\"}");
    put("model.metal.bin", "bin");
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/model.metal.bin", dir);
    llmr_storage_artifact_in art = {"metal/model.bin", path, "metal"};
    llmr_storage_model *m = NULL;
    ck_assert_int_eq(llmr_storage_validate(dir, "openai/gpt-oss-20b", "safetensors", &art, 1, &m, err, sizeof err), LLMR_STORAGE_OK);
    ck_assert_str_eq(m->architecture, "gpt_oss");
    ck_assert_uint_eq(m->n_artifacts, 1);
    ck_assert_str_eq(m->artifacts[0].backend, "metal");
    llmr_storage_model_free(m);
    art.path = "/nonexistent/model.metal.bin";
    ck_assert_int_eq(llmr_storage_validate(dir, "x", "safetensors", &art, 1, &m, err, sizeof err), LLMR_STORAGE_EMISSING_FILE);
    ck_assert_ptr_nonnull(strstr(err, "artifact metal/model.bin"));
}
END_TEST

START_TEST(test_gguf_and_bad_args) {
    char err[1024];
    llmr_storage_model *m = NULL;
    rm("config.json");
    ck_assert_int_eq(llmr_storage_validate(dir, "x/y", "gguf", NULL, 0, &m, err, sizeof err), LLMR_STORAGE_EMISSING_FILE);
    put("model-q4.gguf", "GGUF");
    ck_assert_int_eq(llmr_storage_validate(dir, "x/y", "gguf", NULL, 0, &m, err, sizeof err), LLMR_STORAGE_OK);
    ck_assert_str_eq(m->desc.format, "gguf");
    ck_assert_str_eq(m->desc.runtime, "unknown");
    llmr_storage_model_free(m);
    put("model-q8.gguf", "GGUF");
    ck_assert_int_eq(llmr_storage_validate(dir, "x/y", "gguf", NULL, 0, &m, err, sizeof err), LLMR_STORAGE_EAMBIGUOUS);
    ck_assert_int_eq(llmr_storage_validate(dir, "x/y", "onnx", NULL, 0, &m, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "onnx"));
    ck_assert_int_eq(llmr_storage_validate("/nonexistent/dir", "x/y", "safetensors", NULL, 0, &m, err, sizeof err),
                     LLMR_STORAGE_EMISSING_FILE);
    ck_assert_int_eq(llmr_storage_validate(NULL, "x/y", "safetensors", NULL, 0, &m, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_str_eq(llmr_storage_strerror(LLMR_STORAGE_EMISSING_SHARD), "shard missing");
    llmr_storage_model_free(NULL);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("model_storage");
    TCase *tc = tcase_create("validate");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_single_file_ok);
    tcase_add_test(tc, test_sharded_ok);
    tcase_add_test(tc, test_missing_config_or_tokenizer);
    tcase_add_test(tc, test_bad_json);
    tcase_add_test(tc, test_missing_shards_all_named);
    tcase_add_test(tc, test_index_disagrees_with_headers);
    tcase_add_test(tc, test_index_hostile);
    tcase_add_test(tc, test_no_index_needs_exactly_one);
    tcase_add_test(tc, test_metadata_json_never_used);
    tcase_add_test(tc, test_model_type_fallback_and_artifacts);
    tcase_add_test(tc, test_gguf_and_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
