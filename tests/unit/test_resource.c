/* Unit tests for node/gpu/nvml (dlopen wrapper) and node/engine/resource (providers, monitor).
 * NVML is exercised against the fake libnvidia-ml built into the test plugin
 * (tests/plugins/testengine/fake_nvml.c) through $LLMR_NVML_LIB; no GPU is needed. */
#include "node/engine/resource.h"
#include "node/gpu/nvml.h"
#include "tests/unit/engine_fixture.h"

START_TEST(no_nvml_is_a_clean_error) {
    setenv("LLMR_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    char err[512];
    ck_assert_ptr_null(llmr_nvml_open(err, sizeof err));
    ck_assert_msg(strncmp(err, "no NVML: ", 9) == 0 && strstr(err, "/nonexistent/libnvidia-ml.so.1"), "%s", err);
    llmr_nvml_close(NULL);
}
END_TEST

START_TEST(library_without_nvml_symbols) {
    /* the test plugin's library minus... a library that lacks NVML: libjansson via its soname */
    setenv("LLMR_NVML_LIB", "libjansson.so.4", 1);
    char err[512];
    ck_assert_ptr_null(llmr_nvml_open(err, sizeof err));
    ck_assert_msg(strstr(err, "no NVML: libjansson.so.4 lacks nvmlInit_v2"), "%s", err);
}
END_TEST

START_TEST(fake_nvml_reports_devices) {
    setenv("LLMR_NVML_LIB", fx_testengine_so(), 1);
    setenv("FAKE_NVML_COUNT", "2", 1);
    setenv("FAKE_NVML_TOTAL", "85899345920", 1);
    setenv("FAKE_NVML_USED", "1073741824", 1);
    char err[512], drv[64];
    llmr_nvml *n = llmr_nvml_open(err, sizeof err);
    ck_assert_msg(n != NULL, "%s", err);
    unsigned count;
    ck_assert_int_eq(llmr_nvml_device_count(n, &count, err, sizeof err), 0);
    ck_assert_uint_eq(count, 2);
    llmr_gpu_info g;
    ck_assert_int_eq(llmr_nvml_device_info(n, 1, &g, err, sizeof err), 0);
    ck_assert_str_eq(g.name, "Fake GPU 1");
    ck_assert_str_eq(g.uuid, "GPU-fake-0001");
    ck_assert_uint_eq(g.mem_total, 85899345920ull);
    ck_assert_uint_eq(g.mem_used, 1073741824ull);
    ck_assert_uint_eq(g.mem_free, 85899345920ull - 1073741824ull);
    ck_assert_int_eq(g.cc_major, 9);
    ck_assert_int_eq(g.cc_minor, 0);
    ck_assert_int_eq(llmr_nvml_driver_version(n, drv, sizeof drv, err, sizeof err), 0);
    ck_assert_str_eq(drv, "999.99.99-fake");
    ck_assert_int_eq(llmr_nvml_device_info(n, 5, &g, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "nvmlDeviceGetHandleByIndex(5): Invalid Argument"), "%s", err);
    llmr_nvml_close(n);
}
END_TEST

START_TEST(nvml_init_failure_names_the_reason) {
    setenv("LLMR_NVML_LIB", fx_testengine_so(), 1);
    setenv("FAKE_NVML_FAIL_INIT", "1", 1);
    char err[512];
    ck_assert_ptr_null(llmr_nvml_open(err, sizeof err));
    ck_assert_msg(strstr(err, "NVML init failed: Driver Not Loaded (code 9)"), "%s", err);
}
END_TEST

START_TEST(system_provider_reads_nvml_and_meminfo) {
    setenv("LLMR_NVML_LIB", fx_testengine_so(), 1);
    setenv("FAKE_NVML_TOTAL", "1000", 1);
    setenv("FAKE_NVML_USED", "950", 1);
    char note[512] = "x", err[512];
    llmr_resource_provider *p = llmr_resource_provider_system_create(0, note, sizeof note);
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(note, "");
    ck_assert_str_eq(p->name, "nvml+meminfo");
    llmr_resource_monitor *m = llmr_resource_monitor_create(p, 0.9);
    llmr_resource_state st;
    ck_assert_int_eq(llmr_resource_monitor_poll(m, &st, err, sizeof err), 0);
    ck_assert_int_eq(st.last.has_vram, 1);
    ck_assert_uint_eq(st.last.vram_total, 1000);
    ck_assert_int_eq(st.vram_alert, 1);
    ck_assert_int_eq(st.last.has_ram, 1);
    ck_assert_uint_gt(st.last.ram_total, 0);
    ck_assert_uint_le(st.last.ram_used, st.last.ram_total);
    llmr_resource_monitor_destroy(m);
    /* GPU index beyond the devices: RAM only, with the reason */
    p = llmr_resource_provider_system_create(3, note, sizeof note);
    ck_assert_msg(strstr(note, "GPU 3 not present (NVML sees 1)"), "%s", note);
    llmr_resource_provider_destroy(p);
}
END_TEST

START_TEST(system_provider_without_nvml_still_reports_ram) {
    setenv("LLMR_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    char note[512], err[512];
    llmr_resource_provider *p = llmr_resource_provider_system_create(0, note, sizeof note);
    ck_assert_ptr_nonnull(p);
    ck_assert_msg(strncmp(note, "no NVML: ", 9) == 0, "%s", note);
    llmr_resource_sample s;
    ck_assert_int_eq(p->sample(p->ctx, &s, err, sizeof err), 0);
    ck_assert_int_eq(s.has_vram, 0);
    ck_assert_int_eq(s.has_ram, 1);
    llmr_resource_provider_destroy(p);
}
END_TEST

START_TEST(meminfo_parse) {
    uint64_t t, u;
    ck_assert_int_eq(llmr_meminfo_parse("MemTotal:       16000 kB\nMemFree:  1000 kB\nMemAvailable:   4000 kB\n", &t, &u), 0);
    ck_assert_uint_eq(t, 16000ull * 1024);
    ck_assert_uint_eq(u, 12000ull * 1024);
    /* old kernels: no MemAvailable */
    ck_assert_int_eq(llmr_meminfo_parse("MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 5 kB\nCached: 5 kB\n", &t, &u), 0);
    ck_assert_uint_eq(u, 80ull * 1024);
    ck_assert_int_eq(llmr_meminfo_parse("garbage\n", &t, &u), -1);
    ck_assert_int_eq(llmr_meminfo_parse("", &t, &u), -1);
}
END_TEST

START_TEST(monitor_alerts_on_transitions) {
    llmr_resource_provider *p = llmr_resource_provider_fake_create();
    llmr_resource_monitor *m = llmr_resource_monitor_create(p, 0.9);
    llmr_resource_state st;
    char err[256];
    llmr_resource_fake_set(p, 100, 89, 100, 10);
    ck_assert_int_eq(llmr_resource_monitor_poll(m, &st, err, sizeof err), 0);
    ck_assert_int_eq(st.vram_alert, 0);
    fx_capture_begin();
    llmr_resource_fake_set(p, 100, 90, 100, 10);
    llmr_resource_monitor_poll(m, &st, err, sizeof err);
    llmr_resource_monitor_poll(m, &st, err, sizeof err); /* still high: no second alert */
    llmr_resource_fake_set(p, 100, 50, 100, 10);
    llmr_resource_monitor_poll(m, &st, err, sizeof err);
    char *log = fx_capture_end();
    ck_assert_msg(strstr(log, "WARN  llmr: resource alert: VRAM use 90.0% (90 of 100 bytes) is at or above the 90% threshold"), "%s", log);
    ck_assert_msg(strstr(log, "resource alert cleared: VRAM use 50.0%"), "%s", log);
    ck_assert_ptr_null(strstr(strstr(log, "resource alert: VRAM") + 1, "resource alert: VRAM"));
    free(log);
    ck_assert_uint_eq(st.vram_alerts_total, 1);
    ck_assert_int_eq(st.vram_alert, 0);
    llmr_resource_fake_fail(p, "broken sensor");
    ck_assert_int_eq(llmr_resource_monitor_poll(m, &st, err, sizeof err), -1);
    ck_assert_str_eq(err, "resource provider fake: broken sensor");
    ck_assert_uint_eq(st.sample_failures, 1);
    ck_assert_uint_eq(st.last.vram_used, 50); /* last good sample kept */
    llmr_resource_monitor_state(m, &st);
    ck_assert_uint_eq(st.sample_failures, 1);
    llmr_resource_monitor_destroy(m);
    llmr_resource_monitor_destroy(NULL);
    llmr_resource_provider_destroy(NULL);
}
END_TEST

static Suite *resource_suite(void) {
    Suite *s = suite_create("resource");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, no_nvml_is_a_clean_error);
    tcase_add_test(tc, library_without_nvml_symbols);
    tcase_add_test(tc, fake_nvml_reports_devices);
    tcase_add_test(tc, nvml_init_failure_names_the_reason);
    tcase_add_test(tc, system_provider_reads_nvml_and_meminfo);
    tcase_add_test(tc, system_provider_without_nvml_still_reports_ram);
    tcase_add_test(tc, meminfo_parse);
    tcase_add_test(tc, monitor_alerts_on_transitions);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(resource_suite)
