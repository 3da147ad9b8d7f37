/* Unit tests for node/json_check.c: RFC 8259 cases, UTF-8 and surrogate rules, depth limit, error
 * positions, and agreement with jansson on the real gpt-oss tokenizer.json (when cached). */
#include <jansson.h>

#include "node/json_check.h"
#include "testutil.h"

static int ok(const char *s) {
    char err[128];
    return llmr_json_check(s, strlen(s), err, sizeof err) == 0;
}

START_TEST(test_valid) {
    const char *good[] = {"{}", "[]", "0", "-0", "1.5e+10", "-12.25E-3", "\"\"", "true", "false", "null",
                          " \t\r\n{\"a\" : [1, 2.0, {\"b\": null}], \"c\": \"\\u00e9\\n\\\"\"} \n",
                          "\"\\ud83d\\ude00\"", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "[[[[[]]]]]",
                          "{\"\":{}}", "\"\\/\\b\\f\\r\\t\""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) ck_assert_msg(ok(good[i]), "rejected %s", good[i]);
}
END_TEST

START_TEST(test_invalid) {
    const char *badv[] = {"", " ", "{", "}", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "01",
                          "1.", ".5", "1e", "-", "+1", "tru", "nul", "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"",
                          "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\xc3\"", "\"\xc0\x80\"",
                          "\"\xed\xa0\x80\"", "\"\xf5\x80\x80\x80\"", "\xff", "{} {}", "[1] x", "NaN", "[1 2]",
                          "{\"a\":1 \"b\":2}", "'a'"};
    for (size_t i = 0; i < sizeof badv / sizeof *badv; i++) ck_assert_msg(!ok(badv[i]), "accepted [%s]", badv[i]);
    char err[128];
    ck_assert_int_eq(llmr_json_check(NULL, 0, err, sizeof err), -1);
}
END_TEST

START_TEST(test_positions_and_depth) {
    char err[128];
    const char *s = "{\n  \"a\": [1,\n   2,, 3]\n}";
    ck_assert_int_eq(llmr_json_check(s, strlen(s), err, sizeof err), -1);
    ck_assert_str_eq(err, "line 3 column 6: unexpected character");
    char deep[2 * LLMR_JSON_CHECK_MAX_DEPTH + 2];
    memset(deep, '[', LLMR_JSON_CHECK_MAX_DEPTH);
    memset(deep + LLMR_JSON_CHECK_MAX_DEPTH, ']', LLMR_JSON_CHECK_MAX_DEPTH);
    ck_assert_int_eq(llmr_json_check(deep, 2 * LLMR_JSON_CHECK_MAX_DEPTH, err, sizeof err), 0);
    memset(deep, '[', LLMR_JSON_CHECK_MAX_DEPTH + 1);
    memset(deep + LLMR_JSON_CHECK_MAX_DEPTH + 1, ']', LLMR_JSON_CHECK_MAX_DEPTH + 1);
    ck_assert_int_eq(llmr_json_check(deep, sizeof deep, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "nested too deeply"));
    /* An embedded NUL inside a string is a control character. */
    ck_assert_int_eq(llmr_json_check("\"a\0b\"", 5, err, sizeof err), -1);
    ck_assert_int_eq(llmr_json_check_file("/nonexistent/tokenizer.json", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/tokenizer.json"));
}
END_TEST

START_TEST(test_real_tokenizer_agrees_with_jansson) {
    char path[4200], err[256];
    snprintf(path, sizeof path, "%.4000s/tokenizer-gptoss/tokenizer.json", llmr_test_cache_dir());
    FILE *f = fopen(path, "rb");
    if (!f) LLMR_SKIP("%s not cached (tools/fixtures.sh)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
    fclose(f);
    ck_assert_msg(llmr_json_check(buf, (size_t)n, err, sizeof err) == 0, "%s", err);
    /* Truncations are rejected (jansson agrees on the short ones; it is too slow for the long ones
     * under the unit-test time limit), and so is one flipped structural byte. */
    size_t cuts[] = {1, 1000, 100000, (size_t)n / 2, (size_t)n - 2};
    for (size_t i = 0; i < 5; i++) {
        if (cuts[i] <= 100000) {
            json_error_t je;
            ck_assert_ptr_null(json_loadb(buf, cuts[i], 0, &je));
        }
        ck_assert_int_eq(llmr_json_check(buf, cuts[i], err, sizeof err), -1);
    }
    char *comma = memmem(buf + n / 3, (size_t)n / 3, "],\n", 3); /* between two merges */
    ck_assert_ptr_nonnull(comma);
    comma[1] = ';';
    ck_assert_int_eq(llmr_json_check(buf, (size_t)n, err, sizeof err), -1);
    free(buf);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("json_check");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_positions_and_depth);
    tcase_add_test(tc, test_real_tokenizer_agrees_with_jansson);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
