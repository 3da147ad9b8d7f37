/* Unit tests for node/gpu_inventory.c, against the fake NVML built into the test plugin
 * (tests/plugins/testengine/fake_nvml.c) and against a missing library. */
#include <unistd.h>

#include "node/gpu_inventory.h"
#include "testutil.h"

static int use_fake(void) {
    static char path[4096];
    const char *b = getenv("LLMR_BUILD");
    snprintf(path, sizeof path, "%s/tests/plugins/testengine/libtestengine.so", b && *b ? b : "build");
    if (access(path, R_OK) != 0) return 0;
    setenv("LLMR_NVML_LIB", path, 1);
    return 1;
}

START_TEST(test_none_mode) {
    char err[256];
    llmr_gpu_inventory *inv = llmr_gpu_inventory_create("none", err, sizeof err);
    ck_assert_ptr_nonnull(inv);
    ck_assert_uint_eq(llmr_gpu_inventory_count(inv), 0);
    ck_assert_str_eq(llmr_gpu_inventory_note(inv), "no GPU: --gpu none");
    ck_assert_str_eq(llmr_gpu_inventory_backend(inv), "cpu");
    json_t *a = llmr_gpu_inventory_register_json(inv);
    ck_assert_int_eq(json_array_size(a), 0);
    json_decref(a);
    llmr_gpu_inventory_destroy(inv);
    ck_assert_ptr_null(llmr_gpu_inventory_create("sometimes", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "sometimes"));
    llmr_gpu_inventory_destroy(NULL);
}
END_TEST

START_TEST(test_no_driver) {
    char err[256];
    setenv("LLMR_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    llmr_gpu_inventory *inv = llmr_gpu_inventory_create("auto", err, sizeof err);
    ck_assert_ptr_nonnull(inv);
    ck_assert_uint_eq(llmr_gpu_inventory_count(inv), 0);
    ck_assert_ptr_nonnull(strstr(llmr_gpu_inventory_note(inv), "no GPU"));
    llmr_gpu_inventory_destroy(inv);
}
END_TEST

START_TEST(test_fake_nvml) {
    if (!use_fake()) LLMR_SKIP("test plugin with the fake NVML not built");
    setenv("FAKE_NVML_COUNT", "2", 1);
    setenv("FAKE_NVML_TOTAL", "1000", 1);
    setenv("FAKE_NVML_USED", "100", 1);
    char err[256];
    llmr_gpu_inventory *inv = llmr_gpu_inventory_create("auto", err, sizeof err);
    ck_assert_uint_eq(llmr_gpu_inventory_count(inv), 2);
    ck_assert_str_eq(llmr_gpu_inventory_note(inv), "");
    ck_assert_str_eq(llmr_gpu_inventory_backend(inv), "cuda");
    json_t *a = llmr_gpu_inventory_register_json(inv);
    json_t *g = json_array_get(a, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "index")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(g, "name")), "Fake GPU 1");
    ck_assert_str_eq(json_string_value(json_object_get(g, "uuid")), "GPU-fake-0001");
    ck_assert_int_eq(json_integer_value(json_object_get(g, "memory_total_bytes")), 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "memory_free_bytes")), 900);
    ck_assert_str_eq(json_string_value(json_object_get(g, "compute_capability")), "9.0");
    ck_assert_str_eq(json_string_value(json_object_get(g, "driver_version")), "999.99.99-fake");
    ck_assert_str_eq(json_string_value(json_object_get(g, "backend")), "cuda");
    json_decref(a);
    setenv("FAKE_NVML_USED", "600", 1);
    ck_assert_int_eq(llmr_gpu_inventory_refresh(inv), 0);
    a = llmr_gpu_inventory_heartbeat_json(inv);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(a, 0), "memory_free_bytes")), 400);
    json_decref(a);
    llmr_gpu_inventory_destroy(inv);
    /* A driver that fails to initialise: no GPU, and the note says why. */
    setenv("FAKE_NVML_FAIL_INIT", "1", 1);
    inv = llmr_gpu_inventory_create("auto", err, sizeof err);
    ck_assert_uint_eq(llmr_gpu_inventory_count(inv), 0);
    ck_assert_ptr_nonnull(strstr(llmr_gpu_inventory_note(inv), "Driver Not Loaded"));
    llmr_gpu_inventory_destroy(inv);
    unsetenv("FAKE_NVML_FAIL_INIT");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_inventory");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_none_mode);
    tcase_add_test(tc, test_no_driver);
    tcase_add_test(tc, test_fake_nvml);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
