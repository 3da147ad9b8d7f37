/* Unit tests for router/db + router/registry: WAL + synchronous=FULL, migrations from every older
 * version with data kept, refusal of a newer schema, atomic insert (409 semantics), keys, nodes. */
#include <sqlite3.h>
#include <unistd.h>

#include "router/db.h"
#include "router/registry.h"
#include "tests/unit/testutil.h"

static char *g_dir;

static void setup(void) { g_dir = llmr_test_tmpdir(); ck_assert_ptr_nonnull(g_dir); }
static void teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    free(g_dir);
}

static int pragma_int(const char *dir, const char *sql) {
    char path[512];
    snprintf(path, sizeof path, "%s/router.db", dir);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

START_TEST(fresh_database) {
    char err[512];
    router_db *db = router_db_open(g_dir, 0, err, sizeof err);
    ck_assert_msg(db != NULL, "%s", err);
    ck_assert_int_eq(router_db_version(db), ROUTER_DB_SCHEMA_VERSION);
    /* WAL is a property of the file: visible to another connection */
    char path[512];
    snprintf(path, sizeof path, "%s/router.db", g_dir);
    sqlite3 *h;
    sqlite3_open(path, &h);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
    router_db_close(db);
    ck_assert_int_eq(pragma_int(g_dir, "PRAGMA user_version"), ROUTER_DB_SCHEMA_VERSION);
    router_db_close(NULL);
}
END_TEST

START_TEST(migrates_every_old_version_keeping_data) {
    for (int from = 1; from < ROUTER_DB_SCHEMA_VERSION; from++) {
        char err[512];
        teardown();
        setup();
        router_db *db = router_db_open(g_dir, from, err, sizeof err);
        ck_assert_msg(db != NULL, "%s", err);
        ck_assert_int_eq(router_db_version(db), from);
        /* version 1 has no chat_template column: write the row the way a v1 router did */
        char path[512];
        snprintf(path, sizeof path, "%s/router.db", g_dir);
        sqlite3 *h;
        sqlite3_open(path, &h);
        ck_assert_int_eq(sqlite3_exec(h, "INSERT INTO models (id, record, created_at) VALUES ('a/b', '{\"id\":\"a/b\"}', 7)",
                                      NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);
        router_db_close(db);
        db = router_db_open(g_dir, 0, err, sizeof err);
        ck_assert_msg(db != NULL, "%s", err);
        ck_assert_int_eq(router_db_version(db), ROUTER_DB_SCHEMA_VERSION);
        char *rec, *tmpl;
        ck_assert_int_eq(router_db_model_get(db, "a/b", &rec, &tmpl, err, sizeof err), ROUTER_DB_OK);
        ck_assert_str_eq(rec, "{\"id\":\"a/b\"}");
        ck_assert_ptr_null(tmpl);
        free(rec);
        /* later tables work */
        ck_assert_int_eq(router_db_apikey_insert(db, "k1", "n", "h", "p", 1, err, sizeof err), ROUTER_DB_OK);
        ck_assert_int_eq(router_db_node_put(db, "n1", "th", "{}", 1, err, sizeof err), ROUTER_DB_OK);
        router_db_close(db);
    }
}
END_TEST

START_TEST(refuses_newer_schema) {
    char err[512];
    router_db *db = router_db_open(g_dir, 0, err, sizeof err);
    router_db_close(db);
    char path[512];
    snprintf(path, sizeof path, "%s/router.db", g_dir);
    sqlite3 *h;
    sqlite3_open(path, &h);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", ROUTER_DB_SCHEMA_VERSION + 1);
    sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    ck_assert_ptr_null(router_db_open(g_dir, 0, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "newer"));
    ck_assert_ptr_nonnull(strstr(err, "router.db"));
}
END_TEST

START_TEST(missing_dir_names_path) {
    char err[512];
    ck_assert_ptr_null(router_db_open("/nonexistent/llmr/dir", 0, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/llmr/dir/router.db"));
}
END_TEST

START_TEST(registry_insert_is_atomic_and_exclusive) {
    char err[512];
    router_db *db = router_db_open(g_dir, 0, err, sizeof err);
    json_t *rec = json_pack("{s:s, s:s}", "id", "openai/gpt-oss-20b", "format", "safetensors");
    ck_assert_int_eq(router_registry_add(db, rec, "TEMPLATE", err, sizeof err), ROUTER_DB_OK);
    json_t *again = json_pack("{s:s, s:s}", "id", "openai/gpt-oss-20b", "format", "gguf");
    ck_assert_int_eq(router_registry_add(db, again, NULL, err, sizeof err), ROUTER_DB_EEXIST);
    ck_assert_ptr_nonnull(strstr(err, "already registered"));
    json_t *got;
    char *tmpl;
    ck_assert_int_eq(router_registry_get(db, "openai/gpt-oss-20b", &got, &tmpl, err, sizeof err), ROUTER_DB_OK);
    ck_assert_str_eq(json_string_value(json_object_get(got, "format")), "safetensors"); /* untouched */
    ck_assert_int_gt(json_integer_value(json_object_get(got, "created_at")), 0);
    ck_assert_str_eq(tmpl, "TEMPLATE");
    free(tmpl);
    json_decref(got);
    json_t *ids = router_registry_ids(db, err, sizeof err);
    ck_assert_int_eq(json_array_size(ids), 1);
    json_decref(ids);
    ck_assert_int_eq(router_registry_delete(db, "openai/gpt-oss-20b", err, sizeof err), ROUTER_DB_OK);
    ck_assert_int_eq(router_registry_delete(db, "openai/gpt-oss-20b", err, sizeof err), ROUTER_DB_ENOTFOUND);
    ck_assert_int_eq(router_registry_get(db, "openai/gpt-oss-20b", &got, NULL, err, sizeof err), ROUTER_DB_ENOTFOUND);
    json_t *all = router_registry_list(db, err, sizeof err);
    ck_assert_int_eq(json_array_size(all), 0);
    json_decref(all);
    json_decref(rec);
    json_decref(again);
    router_db_close(db);
}
END_TEST

START_TEST(survives_reopen) {
    char err[512];
    router_db *db = router_db_open(g_dir, 0, err, sizeof err);
    for (int i = 0; i < 20; i++) {
        char id[32];
        snprintf(id, sizeof id, "org/m%02d", i);
        json_t *rec = json_pack("{s:s, s:i}", "id", id, "n", i);
        ck_assert_int_eq(router_registry_add(db, rec, NULL, err, sizeof err), ROUTER_DB_OK);
        json_decref(rec);
    }
    router_db_close(db);
    db = router_db_open(g_dir, 0, err, sizeof err);
    json_t *all = router_registry_list(db, err, sizeof err);
    ck_assert_int_eq(json_array_size(all), 20);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(all, 7), "n")), 7);
    json_decref(all);
    router_db_close(db);
}
END_TEST

static void count_key(void *u, const char *id, const char *name, const char *prefix, int64_t at) {
    (void)id, (void)name, (void)prefix, (void)at;
    (*(int *)u)++;
}

START_TEST(keys_and_nodes) {
    char err[512], id[64];
    router_db *db = router_db_open(g_dir, 0, err, sizeof err);
    ck_assert_int_eq(router_db_apikey_insert(db, "key_1", "ci", "hash1", "sk-llmr-abcd", 5, err, sizeof err), 0);
    ck_assert_int_eq(router_db_apikey_insert(db, "key_2", "ci", "hash1", "sk-llmr-abcd", 5, err, sizeof err), ROUTER_DB_EEXIST);
    ck_assert_int_eq(router_db_apikey_find(db, "hash1", id, sizeof id), 0);
    ck_assert_str_eq(id, "key_1");
    ck_assert_int_eq(router_db_apikey_find(db, "nope", id, sizeof id), ROUTER_DB_ENOTFOUND);
    int n = 0;
    router_db_apikey_each(db, count_key, &n, err, sizeof err);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(router_db_apikey_delete(db, "key_1", err, sizeof err), 0);
    ck_assert_int_eq(router_db_apikey_delete(db, "key_1", err, sizeof err), ROUTER_DB_ENOTFOUND);
    ck_assert_int_eq(router_db_node_put(db, "node-1", "th1", "{\"a\":1}", 9, err, sizeof err), 0);
    ck_assert_int_eq(router_db_node_put(db, "node-1", "th2", "{\"a\":2}", 9, err, sizeof err), 0); /* replace */
    ck_assert_int_eq(router_db_node_find_token(db, "th1", id, sizeof id), ROUTER_DB_ENOTFOUND);
    ck_assert_int_eq(router_db_node_find_token(db, "th2", id, sizeof id), 0);
    ck_assert_str_eq(id, "node-1");
    router_db_close(db);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("router_db");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, fresh_database);
    tcase_add_test(tc, migrates_every_old_version_keeping_data);
    tcase_add_test(tc, refuses_newer_schema);
    tcase_add_test(tc, missing_dir_names_path);
    tcase_add_test(tc, registry_insert_is_atomic_and_exclusive);
    tcase_add_test(tc, survives_reopen);
    tcase_add_test(tc, keys_and_nodes);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
