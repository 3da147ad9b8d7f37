/* Unit tests for router/auth: key kinds, hashing at rest, admin key rules, insecure mode. */
#include <sqlite3.h>

#include "router/auth.h"
#include "router/db.h"
#include "tests/unit/testutil.h"

static char *g_dir;
static router_db *g_db;

static void setup(void) {
    char err[512];
    g_dir = llmr_test_tmpdir();
    g_db = router_db_open(g_dir, 0, err, sizeof err);
    ck_assert_msg(g_db != NULL, "%s", err);
}

static void teardown(void) {
    router_db_close(g_db);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

START_TEST(admin_key_rules) {
    char err[512];
    ck_assert_ptr_null(router_auth_create(g_db, NULL, 0, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "--admin-key"));
    ck_assert_ptr_null(router_auth_create(g_db, "", 0, err, sizeof err));
    ck_assert_ptr_null(router_auth_create(g_db, "short", 0, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "at least 16"));
    router_auth *a = router_auth_create(g_db, NULL, 1, err, sizeof err);
    ck_assert_ptr_nonnull(a);
    router_auth_destroy(a);
    router_auth_destroy(NULL);
}
END_TEST

START_TEST(identifies_each_kind) {
    char err[512];
    router_auth *a = router_auth_create(g_db, "admin-key-0123456789", 0, err, sizeof err);
    router_principal p;
    ck_assert_int_eq(router_auth_identify(a, "admin-key-0123456789", &p), ROUTER_ROLE_ADMIN);
    ck_assert_int_eq(router_auth_identify(a, "admin-key-012345678", &p), 0);
    ck_assert_int_eq(router_auth_identify(a, NULL, &p), 0);
    ck_assert_int_eq(router_auth_identify(a, "", &p), 0);
    /* a node token and an API key, stored only as hashes */
    char node_tok[128], api_key[128], h[65];
    ck_assert_int_eq(router_auth_random_token(ROUTER_NODE_TOKEN_PREFIX, 32, node_tok, sizeof node_tok), 0);
    ck_assert_int_eq(strlen(node_tok), strlen(ROUTER_NODE_TOKEN_PREFIX) + 64);
    router_auth_hash(node_tok, h);
    router_db_node_put(g_db, "node-x", h, "{}", 1, err, sizeof err);
    ck_assert_int_eq(router_auth_random_token(ROUTER_API_KEY_PREFIX, 24, api_key, sizeof api_key), 0);
    router_auth_hash(api_key, h);
    router_db_apikey_insert(g_db, "key_x", "n", h, "sk-llmr-xxxx", 1, err, sizeof err);
    ck_assert_int_eq(router_auth_identify(a, node_tok, &p), ROUTER_ROLE_NODE);
    ck_assert_str_eq(p.id, "node-x");
    ck_assert_int_eq(router_auth_identify(a, api_key, &p), ROUTER_ROLE_API);
    ck_assert_str_eq(p.id, "key_x");
    /* a token of the right shape but unknown */
    char other[128];
    router_auth_random_token(ROUTER_API_KEY_PREFIX, 24, other, sizeof other);
    ck_assert_int_eq(router_auth_identify(a, other, &p), 0);
    ck_assert_str_ne(other, api_key);
    /* no plaintext key anywhere in the database file */
    char path[512];
    snprintf(path, sizeof path, "%s/router.db", g_dir);
    sqlite3 *hdb;
    sqlite3_open(path, &hdb);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(hdb, "SELECT count(*) FROM api_keys WHERE key_sha256 = ?1 OR prefix = ?1", -1, &st, NULL);
    sqlite3_bind_text(st, 1, api_key, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(hdb);
    router_auth_destroy(a);
}
END_TEST

START_TEST(random_tokens_differ) {
    char a[128], b[128];
    ck_assert_int_eq(router_auth_random_token("p-", 16, a, sizeof a), 0);
    ck_assert_int_eq(router_auth_random_token("p-", 16, b, sizeof b), 0);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(router_auth_random_token("p-", 16, a, 10), -1); /* too small a buffer */
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_auth");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, admin_key_rules);
    tcase_add_test(tc, identifies_each_kind);
    tcase_add_test(tc, random_tokens_differ);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
