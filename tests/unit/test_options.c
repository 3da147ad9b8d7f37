/* Unit tests for common/options: precedence flag > env > default, errors, --help. */
#include "common/options.h"
#include "tests/unit/testutil.h"

static const char *listen_addr;
static int workers, verbose;
static llmr_option opts[] = {
    {"listen", "LLMR_T_LISTEN", LLMR_OPT_STRING, "127.0.0.1:8080", "address to listen on", &listen_addr},
    {"workers", "LLMR_T_WORKERS", LLMR_OPT_INT, "4", "worker threads", &workers},
    {"verbose", NULL, LLMR_OPT_BOOL, "false", "more logs", &verbose},
};

START_TEST(precedence) {
    unsetenv("LLMR_T_LISTEN");
    setenv("LLMR_T_WORKERS", "8", 1);
    char *argv[] = {"prog", "--listen=0.0.0.0:1", "--verbose", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 3, argv), 0);
    ck_assert_str_eq(listen_addr, "0.0.0.0:1");
    ck_assert_int_eq(workers, 8);
    ck_assert_int_eq(verbose, 1);
    char *argv2[] = {"prog", "--workers", "2", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 3, argv2), 0);
    ck_assert_str_eq(listen_addr, "127.0.0.1:8080");
    ck_assert_int_eq(workers, 2);
    ck_assert_int_eq(verbose, 0);
}
END_TEST

START_TEST(bad_input) {
    unsetenv("LLMR_T_WORKERS");
    char *a1[] = {"prog", "--workers", "many", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 3, a1), -1);
    char *a2[] = {"prog", "--nope", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 2, a2), -1);
    char *a3[] = {"prog", "--listen", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 2, a3), -1);
    setenv("LLMR_T_WORKERS", "x", 1);
    char *a4[] = {"prog", NULL};
    ck_assert_int_eq(llmr_options_parse("prog", "d", opts, 3, 1, a4), -1);
    unsetenv("LLMR_T_WORKERS");
}
END_TEST

static Suite *opt_suite(void) {
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, precedence);
    tcase_add_test(tc, bad_input);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(opt_suite)
