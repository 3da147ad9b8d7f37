/* Unit tests for node/engine/engine_manifest: every rule of schema/engine-manifest.schema.json is
 * enforced, and each rejection names the field at fault. */
#include "llmr_engine.h"
#include "node/engine/engine_manifest.h"
#include "tests/unit/testutil.h"

#include <unistd.h>

#define GOOD_FIELDS \
    "\"id\":\"gptoss_cuda\",\"version\":\"1.2.3\",\"abi_version\":\"1.0\",\"runtimes\":[\"gptoss\"]," \
    "\"formats\":[\"safetensors\"],\"architectures\":[\"GptOssForCausalLM\"],\"gpu_backends\":[\"cuda\"]," \
    "\"library\":\"libgptoss_cuda.so\""

static llmr_engine_manifest *parse(const char *text, char *err, size_t err_size) {
    llmr_engine_manifest *m = NULL;
    int rc = llmr_engine_manifest_parse(text, strlen(text), "/plugins/x", "x/manifest.json", &m, err, err_size);
    ck_assert_int_eq(rc == 0, m != NULL);
    return m;
}

START_TEST(good_manifest_parses) {
    char err[512];
    llmr_engine_manifest *m = parse("{" GOOD_FIELDS ",\"description\":\"d\",\"priority\":5,"
                                    "\"min_compute_capability\":\"8.0\",\"artifacts\":[{\"name\":\"metal/model.bin\",\"priority\":7}]}",
                                    err, sizeof err);
    ck_assert_msg(m != NULL, "%s", err);
    ck_assert_str_eq(m->id, "gptoss_cuda");
    ck_assert_str_eq(m->version, "1.2.3");
    ck_assert_uint_eq(m->abi_version, (uint32_t)LLMR_ENGINE_ABI_MAJOR << 16); /* the "1.0" written above */
    ck_assert_str_eq(m->library_path, "/plugins/x/libgptoss_cuda.so");
    ck_assert_int_eq(m->priority, 5);
    ck_assert_int_eq(m->min_cc_major, 8);
    ck_assert_int_eq(m->min_cc_minor, 0);
    ck_assert_uint_eq(m->n_artifacts, 1);
    ck_assert_str_eq(m->artifacts[0].name, "metal/model.bin");
    ck_assert_int_eq(m->artifacts[0].priority, 7);
    ck_assert(llmr_engine_manifest_has_runtime(m, "gptoss"));
    ck_assert(!llmr_engine_manifest_has_runtime(m, "GPTOSS"));
    ck_assert(llmr_engine_manifest_has_backend(m, "cuda"));
    ck_assert(llmr_engine_manifest_has_format(m, "safetensors"));
    ck_assert(llmr_engine_manifest_has_architecture(m, "GptOssForCausalLM"));
    llmr_engine_manifest_free(m);
    llmr_engine_manifest_free(NULL);
}
END_TEST

/* Each case: a manifest text, and what the message must contain (the field name, and the cause). */
static const struct { const char *text, *want1, *want2; } bad_cases[] = {
    {"", "invalid JSON", NULL},
    {"[1]", "expected a JSON object", NULL},
    {"{" GOOD_FIELDS ",\"id\":\"again\"}", "invalid JSON", "duplicate"},
    {"{\"version\":\"1.0.0\"}", "field \"id\"", "missing"},
    {"{" GOOD_FIELDS ",\"runtime\":[\"x\"]}", "field \"runtime\"", "unknown field"},
    {"{\"id\":\"Bad Id\",\"version\":\"1.0.0\"}", "field \"id\"", "does not match"},
    {"{\"id\":7}", "field \"id\"", "expected a string"},
    {"{\"id\":\"a\",\"version\":\"1.0\"}", "field \"version\"", "semantic version"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":3}", "field \"abi_version\"", "MAJOR.MINOR"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1\"}", "field \"abi_version\"", "MAJOR.MINOR"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"70000.0\"}", "field \"abi_version\"", NULL},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[]}", "field \"runtimes\"", "at least 1"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":\"gptoss\"}", "field \"runtimes\"", "expected an array"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\",\"x\"]}", "field \"runtimes\"", "twice"},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[\"onnx\"]}",
     "field \"formats\"", "\"onnx\""},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[\"gguf\"],"
     "\"architectures\":[\"A B\"]}", "field \"architectures\"", NULL},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[\"gguf\"],"
     "\"architectures\":[\"A\"],\"gpu_backends\":[\"tpu\"]}", "field \"gpu_backends\"", "\"tpu\""},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[\"gguf\"],"
     "\"architectures\":[\"A\"],\"gpu_backends\":[\"cpu\"],\"library\":\"../evil.so\"}", "field \"library\"", NULL},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[\"gguf\"],"
     "\"architectures\":[\"A\"],\"gpu_backends\":[\"cpu\"],\"library\":\"sub/l.so\"}", "field \"library\"", NULL},
    {"{\"id\":\"a\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"x\"],\"formats\":[],"
     "\"architectures\":[\"A\"],\"gpu_backends\":[\"cpu\"],\"library\":\"l.so\"}", "field \"formats\"", "run nothing"},
    {"{" GOOD_FIELDS ",\"artifacts\":[{\"name\":\"../x\",\"priority\":1}]}", "field \"artifacts[0].name\"", NULL},
    {"{" GOOD_FIELDS ",\"artifacts\":[{\"name\":\"a\",\"priority\":1},{\"name\":\"b\",\"priority\":1001}]}",
     "field \"artifacts[1].priority\"", "outside 0..1000"},
    {"{" GOOD_FIELDS ",\"artifacts\":[{\"name\":\"a\"}]}", "field \"artifacts[0].priority\"", "missing"},
    {"{" GOOD_FIELDS ",\"artifacts\":[{\"name\":\"a\",\"priority\":1,\"x\":2}]}", "field \"artifacts\"", "unknown field"},
    {"{" GOOD_FIELDS ",\"artifacts\":[{\"name\":\"a\",\"priority\":1},{\"name\":\"a\",\"priority\":2}]}",
     "field \"artifacts[1].name\"", "twice"},
    {"{" GOOD_FIELDS ",\"min_compute_capability\":\"sm90\"}", "field \"min_compute_capability\"", NULL},
    {"{" GOOD_FIELDS ",\"min_compute_capability\":9}", "field \"min_compute_capability\"", "expected a string"},
    {"{" GOOD_FIELDS ",\"priority\":-1}", "field \"priority\"", "outside"},
    {"{" GOOD_FIELDS ",\"priority\":1.5}", "field \"priority\"", "integer"},
    {"{" GOOD_FIELDS ",\"description\":\"a\\u0000b\"}", "invalid JSON", "not allowed"},
};

START_TEST(bad_manifests_name_the_field) {
    const char *text = bad_cases[_i].text;
    char err[512];
    llmr_engine_manifest *m = parse(text, err, sizeof err);
    ck_assert_msg(m == NULL, "case %d accepted: %s", _i, text);
    ck_assert_msg(strstr(err, "x/manifest.json: ") == err, "case %d: origin missing: %s", _i, err);
    ck_assert_msg(strstr(err, bad_cases[_i].want1) != NULL, "case %d: want '%s' in: %s", _i, bad_cases[_i].want1, err);
    if (bad_cases[_i].want2)
        ck_assert_msg(strstr(err, bad_cases[_i].want2) != NULL, "case %d: want '%s' in: %s", _i, bad_cases[_i].want2, err);
}
END_TEST

START_TEST(artifact_only_engine_is_valid) {
    char err[512];
    llmr_engine_manifest *m = parse("{\"id\":\"a\",\"version\":\"0.1.0-rc.1\",\"abi_version\":\"1.3\",\"runtimes\":[\"x\"],"
                                    "\"formats\":[],\"architectures\":[\"A\"],\"gpu_backends\":[\"metal\"],"
                                    "\"library\":\"l.so\",\"artifacts\":[{\"name\":\"metal/model.bin\",\"priority\":0}]}",
                                    err, sizeof err);
    ck_assert_msg(m != NULL, "%s", err);
    ck_assert_uint_eq(m->n_formats, 0);
    ck_assert_uint_eq(LLMR_ENGINE_ABI_MINOR_OF(m->abi_version), 3);
    llmr_engine_manifest_free(m);
}
END_TEST

START_TEST(abi_version_parse) {
    uint32_t v;
    ck_assert_int_eq(llmr_abi_version_parse("1.0", &v), 0);
    ck_assert_uint_eq(v, 0x10000);
    ck_assert_int_eq(llmr_abi_version_parse("2.15", &v), 0);
    ck_assert_uint_eq(v, (2u << 16) | 15);
    ck_assert_int_eq(llmr_abi_version_parse("1.", &v), -1);
    ck_assert_int_eq(llmr_abi_version_parse(".1", &v), -1);
    ck_assert_int_eq(llmr_abi_version_parse("1.0.0", &v), -1);
    ck_assert_int_eq(llmr_abi_version_parse("65536.0", &v), -1);
    ck_assert_int_eq(llmr_abi_version_parse(NULL, &v), -1);
}
END_TEST

START_TEST(load_reads_the_file_and_names_missing_ones) {
    char *dir = llmr_test_tmpdir();
    char err[512], path[4096];
    llmr_engine_manifest *m = NULL;
    ck_assert_int_eq(llmr_engine_manifest_load(dir, &m, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "manifest.json: cannot open"));
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{" GOOD_FIELDS "}", f);
    fclose(f);
    ck_assert_int_eq(llmr_engine_manifest_load(dir, &m, err, sizeof err), 0);
    ck_assert_str_eq(m->dir, dir);
    llmr_engine_manifest_free(m);
    /* oversize */
    f = fopen(path, "w");
    for (int i = 0; i < LLMR_MANIFEST_MAX_BYTES + 10; i++) fputc(' ', f);
    fclose(f);
    m = NULL;
    ck_assert_int_eq(llmr_engine_manifest_load(dir, &m, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "limit"));
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(shipped_manifests_validate) {
    /* The test plugin's manifest and every engine manifest in the tree must pass. */
    const char *dirs[] = {"tests/plugins/testengine", "engines/gptoss_ref", "engines/gptoss_cuda"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/manifest.json", dirs[i]);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        fclose(f);
        llmr_engine_manifest *m = NULL;
        ck_assert_msg(llmr_engine_manifest_load(dirs[i], &m, err, sizeof err) == 0, "%s", err);
        llmr_engine_manifest_free(m);
    }
}
END_TEST

static Suite *manifest_suite(void) {
    Suite *s = suite_create("engine_manifest");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, good_manifest_parses);
    tcase_add_loop_test(tc, bad_manifests_name_the_field, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, artifact_only_engine_is_valid);
    tcase_add_test(tc, abi_version_parse);
    tcase_add_test(tc, load_reads_the_file_and_names_missing_ones);
    tcase_add_test(tc, shipped_manifests_validate);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(manifest_suite)
