/* Unit tests for router/node_join: who may POST /v0/nodes with and without a join key. */
#include "router/auth.h"
#include "router/db.h"
#include "router/node_join.h"
#include "tests/unit/testutil.h"

#define ADMIN "admin-key-0123456789"
#define JOIN "join-key-0123456789abcdef"

static char *g_dir;
static router_db *g_db;
static router_auth *g_auth;
static char g_node_tok[128], g_api_key[128];

static void setup(void) {
    char err[512], h[65];
    g_dir = llmr_test_tmpdir();
    g_db = router_db_open(g_dir, 0, err, sizeof err);
    ck_assert_msg(g_db != NULL, "%s", err);
    g_auth = router_auth_create(g_db, ADMIN, 0, err, sizeof err);
    ck_assert_ptr_nonnull(g_auth);
    ck_assert_int_eq(router_auth_random_token(ROUTER_NODE_TOKEN_PREFIX, 32, g_node_tok, sizeof g_node_tok), 0);
    router_auth_hash(g_node_tok, h);
    ck_assert_int_eq(router_db_node_put(g_db, "node-x", h, "{}", 1, err, sizeof err), ROUTER_DB_OK);
    ck_assert_int_eq(router_auth_random_token(ROUTER_API_KEY_PREFIX, 24, g_api_key, sizeof g_api_key), 0);
    router_auth_hash(g_api_key, h);
    ck_assert_int_eq(router_db_apikey_insert(g_db, "key_x", "n", h, "sk-llmr-xxxx", 1, err, sizeof err), ROUTER_DB_OK);
}

static void teardown(void) {
    router_auth_destroy(g_auth);
    router_db_close(g_db);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

START_TEST(key_rules) {
    char err[256];
    ck_assert_ptr_null(router_join_create("short-key", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "--node-join-key is 9 characters; at least 16"));
    router_join *open1 = router_join_create(NULL, err, sizeof err), *open2 = router_join_create("", err, sizeof err);
    ck_assert_ptr_nonnull(open1);
    ck_assert_ptr_nonnull(open2);
    ck_assert_int_eq(router_join_required(open1), 0);
    ck_assert_int_eq(router_join_required(open2), 0);
    ck_assert_int_eq(router_join_required(NULL), 0);
    router_join *j = router_join_create(JOIN, err, sizeof err);
    ck_assert_int_eq(router_join_required(j), 1);
    router_join_destroy(j);
    router_join_destroy(open1);
    router_join_destroy(open2);
    router_join_destroy(NULL);
}
END_TEST

START_TEST(open_joining) {
    char err[256];
    router_join *j = router_join_create(NULL, err, sizeof err);
    router_principal who;
    ck_assert_int_eq(router_join_check(j, g_auth, NULL, &who), ROUTER_JOIN_OPEN);
    ck_assert_int_eq(router_join_check(j, g_auth, "anything-at-all-here", &who), ROUTER_JOIN_OPEN);
    ck_assert_int_eq(router_join_check(j, g_auth, ADMIN, &who), ROUTER_JOIN_OPEN);
    /* a node token stays pinned to its node even when joining is open */
    ck_assert_int_eq(router_join_check(j, g_auth, g_node_tok, &who), ROUTER_JOIN_OWN_NODE);
    ck_assert_str_eq(who.id, "node-x");
    router_join_destroy(j);
}
END_TEST

START_TEST(with_a_join_key) {
    char err[256];
    router_join *j = router_join_create(JOIN, err, sizeof err);
    router_principal who;
    ck_assert_int_eq(router_join_check(j, g_auth, NULL, &who), ROUTER_JOIN_MISSING);
    ck_assert_int_eq(router_join_check(j, g_auth, "", &who), ROUTER_JOIN_MISSING);
    ck_assert_int_eq(router_join_check(j, g_auth, JOIN, &who), ROUTER_JOIN_ADMITTED);
    ck_assert_int_eq(who.role, 0);
    ck_assert_int_eq(router_join_check(j, g_auth, ADMIN, &who), ROUTER_JOIN_ADMITTED);
    ck_assert_int_eq(who.role, ROUTER_ROLE_ADMIN);
    ck_assert_int_eq(router_join_check(j, g_auth, g_node_tok, &who), ROUTER_JOIN_OWN_NODE);
    ck_assert_str_eq(who.id, "node-x");
    /* near misses, other kinds, oversize keys */
    ck_assert_int_eq(router_join_check(j, g_auth, "join-key-0123456789abcde", &who), ROUTER_JOIN_WRONG);
    ck_assert_int_eq(router_join_check(j, g_auth, "join-key-0123456789abcdeff", &who), ROUTER_JOIN_WRONG);
    ck_assert_int_eq(router_join_check(j, g_auth, g_api_key, &who), ROUTER_JOIN_WRONG);
    char big[2000];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ck_assert_int_eq(router_join_check(j, g_auth, big, &who), ROUTER_JOIN_WRONG);
    router_join_destroy(j);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_node_join");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, key_rules);
    tcase_add_test(tc, open_joining);
    tcase_add_test(tc, with_a_join_key);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
