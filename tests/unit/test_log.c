/* Unit tests for common/log: level parsing, filtering, JSON-lines escaping. */
#include "common/log.h"
#include "tests/unit/testutil.h"

#include <fcntl.h>
#include <unistd.h>

/* Runs fn with stderr redirected to a buffer; returns what was written. */
static char *capture_stderr(void (*fn)(void)) {
    static char buf[16384];
    char path[] = "/tmp/llmr-log-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return buf;
}

START_TEST(level_parse) {
    ck_assert_int_eq(llmr_log_level_parse("debug"), LLMR_LOG_DEBUG);
    ck_assert_int_eq(llmr_log_level_parse("INFO"), LLMR_LOG_INFO);
    ck_assert_int_eq(llmr_log_level_parse("warning"), LLMR_LOG_WARN);
    ck_assert_int_eq(llmr_log_level_parse("error"), LLMR_LOG_ERROR);
    ck_assert_int_eq(llmr_log_level_parse("loud"), -1);
    ck_assert_int_eq(llmr_log_level_parse(NULL), -1);
}
END_TEST

static void emit_text(void) {
    llmr_log_init("unit", LLMR_LOG_INFO, 0);
    log_debug("hidden %d", 1);
    log_warn("shown %d", 2);
}

START_TEST(text_filters_by_level) {
    char *out = capture_stderr(emit_text);
    ck_assert_ptr_null(strstr(out, "hidden"));
    ck_assert_ptr_nonnull(strstr(out, "WARN  unit: shown 2\n"));
}
END_TEST

static void emit_json(void) {
    llmr_log_init("unit", LLMR_LOG_DEBUG, 1);
    log_error("quote \" back \\ nl\nend");
}

START_TEST(json_lines_escape) {
    char *out = capture_stderr(emit_json);
    ck_assert_ptr_nonnull(strstr(out, "\"level\":\"ERROR\""));
    ck_assert_ptr_nonnull(strstr(out, "\"msg\":\"quote \\\" back \\\\ nl\\nend\"}\n"));
}
END_TEST

static Suite *log_suite(void) {
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, level_parse);
    tcase_add_test(tc, text_filters_by_level);
    tcase_add_test(tc, json_lines_escape);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(log_suite)
