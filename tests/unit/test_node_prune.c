/* Unit tests for the deletion of deleted models' files: llmr_storage_remove (node/model_storage.h),
 * which must stay inside --models-dir and never follow a symbolic link, and the pruner's decisions
 * (node/prune.h): wait while busy, keep when registered again, remove and count otherwise. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/model_storage.h"
#include "node/prune.h"
#include "testutil.h"

static char *base, models[4200], outside[4200];

static void put(const char *path, size_t n) {
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++) fputc('x', f);
    fclose(f);
}

static int there(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void setup(void) {
    base = llmr_test_tmpdir();
    snprintf(models, sizeof models, "%s/models", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    mkdir(models, 0755);
    mkdir(outside, 0755);
}

static void teardown(void) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    ck_assert_int_eq(system(cmd), 0);
    free(base);
}

#define P(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

START_TEST(test_remove_counts_and_empty_parents) {
    char p[8600];
    put(P(p, "%s/org/name/config.json", models), 100);
    put(P(p, "%s/org/name/model-00001-of-00002.safetensors", models), 4000);
    put(P(p, "%s/org/name/model-00002-of-00002.safetensors.partial", models), 1234); /* mid-download */
    put(P(p, "%s/org/name/metal/model.bin", models), 10);
    put(P(p, "%s/org/other/config.json", models), 7); /* a sibling model: untouched */
    llmr_storage_removal rm;
    char err[512] = "";
    ck_assert_msg(llmr_storage_remove(models, "org/name", &rm, err, sizeof err) == LLMR_STORAGE_OK, "%s", err);
    ck_assert_uint_eq(rm.bytes, 100 + 4000 + 1234 + 10);
    ck_assert_uint_eq(rm.files, 4);
    ck_assert_uint_eq(rm.dirs, 2); /* name/, name/metal/ */
    ck_assert(!there(P(p, "%s/org/name", models)));
    ck_assert(there(P(p, "%s/org/other/config.json", models)));
    /* The last model of org/ takes the now empty org/ with it, never models/ itself. */
    ck_assert_int_eq(llmr_storage_remove(models, "org/other", &rm, err, sizeof err), LLMR_STORAGE_OK);
    ck_assert_uint_eq(rm.dirs, 2);
    ck_assert(!there(P(p, "%s/org", models)));
    ck_assert(there(models));
    /* Nothing there: OK, nothing counted. */
    ck_assert_int_eq(llmr_storage_remove(models, "org/gone", &rm, err, sizeof err), LLMR_STORAGE_OK);
    ck_assert_uint_eq(rm.files + rm.dirs + rm.bytes, 0);
    ck_assert_int_eq(llmr_storage_remove(models, "flat", NULL, err, sizeof err), LLMR_STORAGE_OK);
}
END_TEST

START_TEST(test_remove_never_follows_links) {
    char p[8600], q[8600];
    put(P(p, "%s/precious.safetensors", outside), 500);
    put(P(p, "%s/dir/keep.json", outside), 50);
    put(P(p, "%s/org/name/config.json", models), 10);
    /* Links inside the snapshot, to a file and to a folder outside: removed as links only. */
    ck_assert_int_eq(symlink(P(q, "%s/precious.safetensors", outside), P(p, "%s/org/name/model.safetensors", models)), 0);
    ck_assert_int_eq(symlink(P(q, "%s/dir", outside), P(p, "%s/org/name/shards", models)), 0);
    llmr_storage_removal rm;
    char err[512] = "";
    ck_assert_msg(llmr_storage_remove(models, "org/name", &rm, err, sizeof err) == LLMR_STORAGE_OK, "%s", err);
    ck_assert_uint_eq(rm.files, 3);
    ck_assert_uint_eq(rm.bytes, 10); /* the links' targets were not counted, nor touched */
    ck_assert(there(P(p, "%s/precious.safetensors", outside)));
    ck_assert(there(P(p, "%s/dir/keep.json", outside)));
    /* The snapshot folder itself a link: the link goes, its target stays. */
    ck_assert_int_eq(symlink(outside, P(p, "%s/linked", models)), 0);
    ck_assert_int_eq(llmr_storage_remove(models, "linked", &rm, err, sizeof err), LLMR_STORAGE_OK);
    ck_assert_uint_eq(rm.files, 1);
    ck_assert(!there(P(p, "%s/linked", models)));
    ck_assert(there(P(p, "%s/precious.safetensors", outside)));
    /* A link among id's parents (org -> outside) is refused: nothing removed anywhere. */
    put(P(p, "%s/name/config.json", outside), 5);
    ck_assert_int_eq(symlink(outside, P(p, "%s/evil", models)), 0);
    ck_assert_int_eq(llmr_storage_remove(models, "evil/name", &rm, err, sizeof err), LLMR_STORAGE_EIO);
    ck_assert_msg(strstr(err, "evil") && strstr(err, "symbolic link"), "%s", err);
    ck_assert(there(P(p, "%s/name/config.json", outside)));
}
END_TEST

START_TEST(test_remove_bad_input) {
    char err[512] = "";
    ck_assert_int_eq(llmr_storage_remove(models, "../outside", NULL, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not a safe folder name"));
    ck_assert_int_eq(llmr_storage_remove(models, "/etc", NULL, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_int_eq(llmr_storage_remove(models, "a/../../x", NULL, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_int_eq(llmr_storage_remove(models, "", NULL, err, sizeof err), LLMR_STORAGE_EINVAL);
    ck_assert_int_eq(llmr_storage_remove(NULL, "x", NULL, err, sizeof err), LLMR_STORAGE_EINVAL);
    char p[8600];
    ck_assert_int_eq(llmr_storage_remove(P(p, "%s/nope", base), "x", NULL, err, sizeof err), LLMR_STORAGE_EIO);
    ck_assert_ptr_nonnull(strstr(err, "nope"));
    ck_assert_str_eq(llmr_storage_strerror(LLMR_STORAGE_EIO), "file could not be removed");
}
END_TEST

START_TEST(test_remove_reports_what_it_cannot) {
    if (geteuid() == 0) LLMR_SKIP("running as root: permissions do not stop a removal");
    char p[8600];
    put(P(p, "%s/org/name/locked/w.bin", models), 3);
    put(P(p, "%s/org/name/a.bin", models), 4);
    chmod(P(p, "%s/org/name/locked", models), 0555);
    llmr_storage_removal rm;
    char err[512] = "";
    ck_assert_int_eq(llmr_storage_remove(models, "org/name", &rm, err, sizeof err), LLMR_STORAGE_EIO);
    ck_assert_msg(strstr(err, "locked/w.bin") && strstr(err, "Permission denied"), "%s", err);
    ck_assert(!there(P(p, "%s/org/name/a.bin", models))); /* what could go went */
    chmod(P(p, "%s/org/name/locked", models), 0755);
}
END_TEST

/* --- the pruner ------------------------------------------------------------------------------------ */

static int registered, busy_calls, busy_left;
static int is_reg(void *u, const char *id) { (void)u; (void)id; return registered; }
static int busy(void *u, const char *id, char *why, size_t ws) {
    (void)u; (void)id;
    busy_calls++;
    if (busy_left > 0) { busy_left--; snprintf(why, ws, "its 1 in-flight request(s) finish"); return 1; }
    return 0;
}

START_TEST(test_pruner_waits_then_removes) {
    char p[8600];
    put(P(p, "%s/org/a/model.safetensors", models), 1000);
    put(P(p, "%s/org/a/tok.json.partial", models), 24);
    registered = 0; busy_calls = 0; busy_left = 2;
    llmr_prune_hooks h = {is_reg, busy, NULL};
    llmr_pruner *pr = llmr_pruner_create(models, &h);
    ck_assert_ptr_nonnull(pr);
    ck_assert_int_eq(llmr_pruner_add(pr, "org/a", 0), 0);
    ck_assert_int_eq(llmr_pruner_add(pr, "org/a", 0), 0); /* once only */
    ck_assert_uint_eq(llmr_pruner_pending(pr), 1);
    json_t *j = llmr_pruner_pending_json(pr);
    ck_assert_str_eq(json_string_value(json_array_get(j, 0)), "org/a");
    json_decref(j);
    /* Busy twice: the files stay while a generate or the cancelled download runs. */
    ck_assert_uint_eq(llmr_pruner_run(pr), 1);
    ck_assert(there(P(p, "%s/org/a/model.safetensors", models)));
    ck_assert_uint_eq(llmr_pruner_run(pr), 1);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert_int_eq(busy_calls, 3);
    ck_assert(!there(P(p, "%s/org", models)));
    llmr_prune_stats st;
    llmr_pruner_stats(pr, &st);
    ck_assert_uint_eq(st.models_removed, 1);
    ck_assert_uint_eq(st.bytes_freed, 1024);
    ck_assert_uint_eq(st.failures, 0);
    llmr_pruner_destroy(pr);
}
END_TEST

START_TEST(test_pruner_keeps_reregistered) {
    char p[8600];
    put(P(p, "%s/m/config.json", models), 9);
    put(P(p, "%s/n/config.json", models), 9);
    registered = 1; busy_left = 0;
    llmr_prune_hooks h = {is_reg, busy, NULL};
    llmr_pruner *pr = llmr_pruner_create(models, &h);
    llmr_pruner_add(pr, "m", 0);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(there(P(p, "%s/m/config.json", models)));
    llmr_prune_stats st;
    llmr_pruner_stats(pr, &st);
    ck_assert_uint_eq(st.kept, 1);
    ck_assert_uint_eq(st.models_removed, 0);
    /* cancel: taken off the queue before any run */
    llmr_pruner_add(pr, "n", 0);
    ck_assert_int_eq(llmr_pruner_cancel(pr, "n"), 1);
    ck_assert_int_eq(llmr_pruner_cancel(pr, "n"), 0);
    registered = 0;
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(there(P(p, "%s/n/config.json", models)));
    /* A failure (unsafe id) is counted, logged and not retried. */
    llmr_pruner_add(pr, "../outside", 0);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    llmr_pruner_stats(pr, &st);
    ck_assert_uint_eq(st.failures, 1);
    ck_assert(there(outside));
    /* Queued deletions dropped at destroy leave the files. */
    llmr_pruner_add(pr, "n", 0);
    llmr_pruner_destroy(pr);
    ck_assert(there(P(p, "%s/n/config.json", models)));
    ck_assert_ptr_null(llmr_pruner_create(NULL, &h));
    llmr_prune_hooks bad = {NULL, busy, NULL};
    ck_assert_ptr_null(llmr_pruner_create(models, &bad));
    llmr_pruner_destroy(NULL);
}
END_TEST

START_TEST(test_pruner_grace) {
    /* A model that merely went missing from a list keeps its files for the grace period; a
     * "deleted" notice (expedite, or a second add without delay) ends it. */
    char p[8600];
    put(P(p, "%s/g/config.json", models), 3);
    put(P(p, "%s/h/config.json", models), 3);
    registered = 0; busy_left = 0;
    llmr_prune_hooks h = {is_reg, busy, NULL};
    llmr_pruner *pr = llmr_pruner_create(models, &h);
    ck_assert_int_eq(llmr_pruner_add(pr, "g", 0.3), 0);
    ck_assert_uint_eq(llmr_pruner_run(pr), 1);
    ck_assert(there(P(p, "%s/g/config.json", models)));
    usleep(350000);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(!there(P(p, "%s/g", models)));
    ck_assert_int_eq(llmr_pruner_add(pr, "h", 60), 0);
    ck_assert_uint_eq(llmr_pruner_run(pr), 1);
    ck_assert_int_eq(llmr_pruner_expedite(pr, "h"), 1);
    ck_assert_int_eq(llmr_pruner_expedite(pr, "never-queued"), 0);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(!there(P(p, "%s/h", models)));
    put(P(p, "%s/h/config.json", models), 3);
    llmr_pruner_add(pr, "h", 60);
    llmr_pruner_add(pr, "h", 0); /* the earlier deadline wins */
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(!there(P(p, "%s/h", models)));
    llmr_pruner_destroy(pr);
}
END_TEST

START_TEST(test_pruner_ledger) {
    /* The folders a node made survive a restart in the ledger; the first list after the start
     * queues those the router no longer lists, and a removal takes them off the ledger. */
    char p[8600], ledger[8600], err[512] = "";
    P(ledger, "%s/owned-models.json", base);
    put(P(p, "%s/org/kept/config.json", models), 5);
    put(P(p, "%s/org/dropped/model.safetensors.partial", models), 77);
    put(P(p, "%s/org/not-ours/config.json", models), 5); /* never in the ledger: never touched */
    registered = 0; busy_left = 0;
    llmr_prune_hooks h = {is_reg, busy, NULL};
    llmr_pruner *pr = llmr_pruner_create(models, &h);
    ck_assert_int_eq(llmr_pruner_own(pr, "org/kept"), 0); /* no ledger yet: nothing recorded */
    ck_assert_int_eq(llmr_pruner_owns(pr, "org/kept"), 0);
    ck_assert_msg(llmr_pruner_open_ledger(pr, ledger, err, sizeof err) == 0, "%s", err); /* missing file: empty */
    ck_assert_int_eq(llmr_pruner_own(pr, "org/kept"), 0);
    ck_assert_int_eq(llmr_pruner_own(pr, "org/dropped"), 0);
    ck_assert_int_eq(llmr_pruner_own(pr, "org/dropped"), 0);
    llmr_pruner_destroy(pr);
    json_t *doc = json_load_file(ledger, 0, NULL);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "models")), 2);
    json_decref(doc);

    /* "Restart": a new pruner reads the ledger back; the router lists org/kept only. */
    pr = llmr_pruner_create(models, &h);
    ck_assert_int_eq(llmr_pruner_open_ledger(pr, ledger, err, sizeof err), 0);
    ck_assert(llmr_pruner_owns(pr, "org/kept") && llmr_pruner_owns(pr, "org/dropped"));
    json_t *listed = json_pack("[ss]", "org/kept", "org/not-ours");
    ck_assert_uint_eq(llmr_pruner_queue_orphans(pr, listed, 0), 1);
    json_decref(listed);
    ck_assert_uint_eq(llmr_pruner_run(pr), 0);
    ck_assert(!there(P(p, "%s/org/dropped", models)));
    ck_assert(there(P(p, "%s/org/kept/config.json", models)));
    ck_assert(there(P(p, "%s/org/not-ours/config.json", models)));
    ck_assert(!llmr_pruner_owns(pr, "org/dropped"));
    doc = json_load_file(ledger, 0, NULL);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "models")), 1);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(doc, "models"), 0)), "org/kept");
    json_decref(doc);
    llmr_pruner_destroy(pr);

    /* A ledger that is not ours to trust: unsafe ids are dropped, a corrupt file is an error. */
    FILE *f = fopen(ledger, "w");
    fputs("{\"models\": [\"../../etc\", \"/abs\", 7, \"org/kept\"]}", f);
    fclose(f);
    pr = llmr_pruner_create(models, &h);
    ck_assert_int_eq(llmr_pruner_open_ledger(pr, ledger, err, sizeof err), 0);
    listed = json_array();
    ck_assert_uint_eq(llmr_pruner_queue_orphans(pr, listed, 0), 1); /* org/kept only */
    json_decref(listed);
    llmr_pruner_destroy(pr);
    f = fopen(ledger, "w");
    fputs("{not json", f);
    fclose(f);
    pr = llmr_pruner_create(models, &h);
    ck_assert_int_eq(llmr_pruner_open_ledger(pr, ledger, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "owned-models.json") && strstr(err, "not valid JSON"), "%s", err);
    llmr_pruner_destroy(pr);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("node_prune");
    TCase *tc = tcase_create("remove");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_remove_counts_and_empty_parents);
    tcase_add_test(tc, test_remove_never_follows_links);
    tcase_add_test(tc, test_remove_bad_input);
    tcase_add_test(tc, test_remove_reports_what_it_cannot);
    tcase_add_test(tc, test_pruner_waits_then_removes);
    tcase_add_test(tc, test_pruner_keeps_reregistered);
    tcase_add_test(tc, test_pruner_grace);
    tcase_add_test(tc, test_pruner_ledger);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(suite)
