/* Unit tests for common/kv_pages.h: the KV page pool's free list and block tables. */
#include "common/kv_pages.h"
#include "tests/unit/testutil.h"

START_TEST(reserve_grows_on_demand) {
    char err[200];
    llmr_kv_pages *p = llmr_kv_pages_create(10, 32, err, sizeof err);
    ck_assert_ptr_nonnull(p);
    int32_t pages[8];
    llmr_kv_table t = {pages, 0, 8};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 0, err, sizeof err), LLMR_KV_OK);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 1, err, sizeof err), LLMR_KV_OK);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 32, err, sizeof err), LLMR_KV_OK); /* same page */
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 33, err, sizeof err), LLMR_KV_OK);
    ck_assert_uint_eq(t.n, 2);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 100, err, sizeof err), LLMR_KV_OK);
    ck_assert_uint_eq(t.n, 4);
    ck_assert_uint_eq(llmr_kv_pages_free(p), 6);
    for (uint32_t i = 0; i < t.n; i++) /* distinct ids inside the pool */
        for (uint32_t j = 0; j < i; j++) ck_assert_int_ne(t.pages[i], t.pages[j]);
    for (uint32_t i = 0; i < t.n; i++) ck_assert(t.pages[i] >= 0 && t.pages[i] < 10);
    ck_assert_uint_eq(llmr_kv_pages_for(p, 64), 2);
    ck_assert_uint_eq(llmr_kv_pages_for(p, 65), 3);
    llmr_kv_pages_release(p, &t);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_uint_eq(llmr_kv_pages_free(p), 10);
    llmr_kv_pages_destroy(p);
}
END_TEST

START_TEST(exhausted_takes_nothing_and_names_counts) {
    char err[200];
    llmr_kv_pages *p = llmr_kv_pages_create(5, 16, err, sizeof err);
    int32_t a_pages[8], b_pages[8];
    llmr_kv_table a = {a_pages, 0, 8}, b = {b_pages, 0, 8};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &a, 48, err, sizeof err), LLMR_KV_OK); /* 3 pages */
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &b, 16, err, sizeof err), LLMR_KV_OK); /* 1 page */
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &b, 64, err, sizeof err), LLMR_KV_EXHAUSTED); /* 3 more, 1 free */
    ck_assert_uint_eq(b.n, 1);
    ck_assert_uint_eq(llmr_kv_pages_free(p), 1);
    ck_assert_msg(strstr(err, "3 more pages") && strstr(err, "1 of 5 free"), "message: %s", err);
    llmr_kv_pages_release(p, &a);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &b, 64, err, sizeof err), LLMR_KV_OK);
    ck_assert_uint_eq(b.n, 4);
    llmr_kv_pages_release(p, &b);
    ck_assert_uint_eq(llmr_kv_pages_free(p), 5);
    llmr_kv_pages_destroy(p);
}
END_TEST

START_TEST(table_room_and_bad_args) {
    char err[200];
    ck_assert_ptr_null(llmr_kv_pages_create(0, 32, err, sizeof err));
    ck_assert_msg(strstr(err, "0 pages") != NULL, "%s", err);
    ck_assert_ptr_null(llmr_kv_pages_create(4, 0, err, sizeof err));
    llmr_kv_pages *p = llmr_kv_pages_create(100, 32, err, sizeof err);
    int32_t pages[2];
    llmr_kv_table t = {pages, 0, 2};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 65, err, sizeof err), LLMR_KV_TOO_LONG);
    ck_assert_msg(strstr(err, "holds 2") != NULL, "%s", err);
    ck_assert_uint_eq(llmr_kv_pages_free(p), 100);
    ck_assert_int_eq(llmr_kv_pages_reserve(p, NULL, 1, err, sizeof err), LLMR_KV_INVALID);
    llmr_kv_table bad = {NULL, 0, 4};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &bad, 1, err, sizeof err), LLMR_KV_INVALID);
    llmr_kv_pages_release(p, NULL);
    llmr_kv_pages_release(p, &bad);
    ck_assert_str_eq(llmr_kv_strerror(LLMR_KV_EXHAUSTED), "KV page pool exhausted");
    llmr_kv_pages_destroy(p);
    llmr_kv_pages_destroy(NULL);
}
END_TEST

START_TEST(double_release_is_harmless) {
    char err[200];
    llmr_kv_pages *p = llmr_kv_pages_create(4, 32, err, sizeof err);
    int32_t pages[4], copy[4];
    llmr_kv_table t = {pages, 0, 4};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &t, 64, err, sizeof err), LLMR_KV_OK);
    memcpy(copy, pages, sizeof pages);
    llmr_kv_table stale = {copy, 2, 4}; /* a second table naming the same pages: a caller bug */
    llmr_kv_pages_release(p, &t);
    llmr_kv_pages_release(p, &stale); /* must not push the ids twice */
    ck_assert_uint_eq(llmr_kv_pages_free(p), 4);
    int32_t all[4];
    llmr_kv_table u = {all, 0, 4};
    ck_assert_int_eq(llmr_kv_pages_reserve(p, &u, 128, err, sizeof err), LLMR_KV_OK);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++) ck_assert_int_ne(all[i], all[j]);
    llmr_kv_pages_destroy(p);
}
END_TEST

static Suite *kv_pages_suite(void) {
    Suite *s = suite_create("kv_pages");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reserve_grows_on_demand);
    tcase_add_test(tc, exhausted_takes_nothing_and_names_counts);
    tcase_add_test(tc, table_room_and_bad_args);
    tcase_add_test(tc, double_release_is_harmless);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(kv_pages_suite)
