/* Unit tests for node/engine/engine_registry: engine choice from a ModelDescriptor (FR-004/005/008). */
#include "node/engine/engine_registry.h"
#include "tests/unit/testutil.h"

static llmr_engine_manifest *mk(const char *id, const char *formats, const char *backends, const char *extra) {
    char text[2048], err[512];
    snprintf(text, sizeof text,
             "{\"id\":\"%s\",\"version\":\"1.0.0\",\"abi_version\":\"1.0\",\"runtimes\":[\"gptoss\"],"
             "\"formats\":[%s],\"architectures\":[\"GptOssForCausalLM\"],\"gpu_backends\":[%s],"
             "\"library\":\"lib%s.so\"%s}", id, formats, backends, id, extra ? extra : "");
    llmr_engine_manifest *m = NULL;
    ck_assert_msg(llmr_engine_manifest_parse(text, strlen(text), "/e", id, &m, err, sizeof err) == 0, "%s", err);
    return m;
}

static const llmr_model_descriptor gptoss = {sizeof(llmr_model_descriptor), "openai/gpt-oss-20b", "safetensors",
                                             "gptoss", "GptOssForCausalLM", "/models/gpt-oss-20b", NULL};
static const llmr_node_backend cuda90 = {"cuda", 9, 0};

START_TEST(safetensors_engine_when_no_artifact) {
    llmr_engine_manifest *ms[2] = {mk("gptoss_cuda", "\"safetensors\"", "\"cuda\"", NULL),
                                   mk("gptoss_metal", "", "\"metal\"", ",\"artifacts\":[{\"name\":\"metal/model.bin\",\"priority\":10}]")};
    llmr_engine_choice c;
    char why[1024];
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 2, &gptoss, NULL, 0, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "gptoss_cuda");
    ck_assert_ptr_null(c.artifact);
    ck_assert_uint_eq(c.index, 0);
    llmr_engine_manifest_free(ms[0]);
    llmr_engine_manifest_free(ms[1]);
}
END_TEST

START_TEST(official_artifact_wins_for_its_backend) {
    llmr_engine_manifest *ms[3] = {
        mk("gptoss_cuda", "\"safetensors\"", "\"cuda\"", ",\"priority\":100"),
        mk("gptoss_trt", "", "\"cuda\"", ",\"artifacts\":[{\"name\":\"cuda/model.plan\",\"priority\":5}]"),
        mk("gptoss_metal", "", "\"metal\"", ",\"artifacts\":[{\"name\":\"metal/model.bin\",\"priority\":50}]")};
    llmr_artifact present[2] = {{"metal/model.bin", "/a/metal/model.bin"}, {"cuda/model.plan", "/a/cuda/model.plan"}};
    llmr_engine_choice c;
    char why[1024];
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, present, 2, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "gptoss_trt");
    ck_assert_str_eq(c.artifact->path, "/a/cuda/model.plan");
    /* On a metal node the metal artifact engine wins; the cuda artifact is not for it. */
    llmr_node_backend metal = {"metal", -1, -1};
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, present, 2, &metal, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "gptoss_metal");
    ck_assert_str_eq(c.artifact->name, "metal/model.bin");
    /* Artifact absent: the safetensors engine (FR-008 fallback). */
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, present, 1, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "gptoss_cuda");
    for (int i = 0; i < 3; i++) llmr_engine_manifest_free(ms[i]);
}
END_TEST

START_TEST(artifact_priority_then_engine_priority_then_id) {
    llmr_engine_manifest *ms[3] = {
        mk("b_engine", "", "\"cuda\"", ",\"artifacts\":[{\"name\":\"x.bin\",\"priority\":5},{\"name\":\"y.bin\",\"priority\":9}]"),
        mk("a_engine", "", "\"cuda\"", ",\"artifacts\":[{\"name\":\"y.bin\",\"priority\":9}]"),
        mk("c_engine", "", "\"cuda\"", ",\"priority\":1,\"artifacts\":[{\"name\":\"x.bin\",\"priority\":9}]")};
    llmr_artifact present[2] = {{"x.bin", "/x"}, {"y.bin", "/y"}};
    llmr_engine_choice c;
    char why[256];
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, present, 2, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "c_engine"); /* prio 9 ties, engine priority 1 wins */
    ck_assert_str_eq(c.artifact->path, "/x");
    ms[2]->priority = 0;
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, present, 2, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "a_engine"); /* then smallest id */
    ck_assert_str_eq(c.artifact->path, "/y");
    for (int i = 0; i < 3; i++) llmr_engine_manifest_free(ms[i]);
}
END_TEST

START_TEST(fallback_prefers_priority_then_id) {
    llmr_engine_manifest *ms[3] = {mk("zz", "\"safetensors\"", "\"cuda\",\"cpu\"", NULL),
                                   mk("aa", "\"safetensors\"", "\"cuda\"", NULL),
                                   mk("mm", "\"safetensors\"", "\"cuda\"", ",\"priority\":3")};
    llmr_engine_choice c;
    char why[256];
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, NULL, 0, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "mm");
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 2, &gptoss, NULL, 0, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "aa");
    llmr_node_backend cpu = {"cpu", -1, -1};
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &gptoss, NULL, 0, &cpu, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "zz");
    for (int i = 0; i < 3; i++) llmr_engine_manifest_free(ms[i]);
}
END_TEST

START_TEST(unsupported_names_each_reason) {
    llmr_engine_manifest *ms[4] = {mk("gptoss_cuda", "\"safetensors\"", "\"cuda\"", ",\"min_compute_capability\":\"9.0\""),
                                   mk("gptoss_ref", "\"safetensors\"", "\"cpu\"", NULL),
                                   mk("gguf_only", "\"gguf\"", "\"cuda\"", NULL), NULL};
    llmr_engine_choice c;
    char why[2048];
    llmr_node_backend ampere = {"cuda", 8, 6};
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 4, &gptoss, NULL, 0, &ampere, &c, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "no engine for openai/gpt-oss-20b (runtime gptoss, architecture GptOssForCausalLM, "
                              "format safetensors, backend cuda)") == why, "%s", why);
    ck_assert_msg(strstr(why, "gptoss_cuda: needs compute capability 9.0, GPU has 8.6"), "%s", why);
    ck_assert_msg(strstr(why, "gptoss_ref: backend cuda not in [cpu]"), "%s", why);
    ck_assert_msg(strstr(why, "gguf_only: format safetensors not in [gguf]"), "%s", why);

    llmr_model_descriptor llama = gptoss;
    llama.architecture = "LlamaForCausalLM";
    llama.runtime = "unknown";
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &llama, NULL, 0, &cuda90, &c, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "architecture LlamaForCausalLM not in [GptOssForCausalLM]"), "%s", why);
    llama.architecture = "GptOssForCausalLM";
    llama.runtime = "other";
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &llama, NULL, 0, &cuda90, &c, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "runtime other not in [gptoss]"), "%s", why);
    /* runtime "unknown" matches on architecture alone */
    llama.runtime = "unknown";
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &llama, NULL, 0, &cuda90, &c, why, sizeof why), 0);
    ck_assert_str_eq(c.manifest->id, "gptoss_cuda");
    ck_assert_int_eq(llmr_engine_registry_select(NULL, 0, &gptoss, NULL, 0, &cuda90, &c, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "no engines are installed"), "%s", why);
    /* a tiny reason buffer is still NUL-terminated */
    char tiny[8];
    ck_assert_int_eq(llmr_engine_registry_select((const llmr_engine_manifest *const *)ms, 3, &llama, NULL, 0, &ampere, &c, tiny, sizeof tiny), -1);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
    for (int i = 0; i < 3; i++) llmr_engine_manifest_free(ms[i]);
}
END_TEST

static Suite *registry_suite(void) {
    Suite *s = suite_create("engine_registry");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, safetensors_engine_when_no_artifact);
    tcase_add_test(tc, official_artifact_wins_for_its_backend);
    tcase_add_test(tc, artifact_priority_then_engine_priority_then_id);
    tcase_add_test(tc, fallback_prefers_priority_then_id);
    tcase_add_test(tc, unsupported_names_each_reason);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(registry_suite)
