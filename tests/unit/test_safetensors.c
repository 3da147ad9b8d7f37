/* Unit tests for common/safetensors, common/checkpoint, common/path_safety and common/sha256. */
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checkpoint.h"
#include "common/path_safety.h"
#include "common/safetensors.h"
#include "common/sha256.h"
#include "tests/unit/testutil.h"

/* Reference error names (the Rust reader's variants) -> our status codes. */
static llmr_st_status expected_status(const char *name) {
    static const struct { const char *n; llmr_st_status s; } map[] = {
        {"MetadataIncompleteBuffer", LLMR_ST_ERR_INCOMPLETE}, {"HeaderTooLarge", LLMR_ST_ERR_HEADER_TOO_LARGE},
        {"HeaderTooSmall", LLMR_ST_ERR_HEADER_TOO_SMALL},     {"InvalidHeaderLength", LLMR_ST_ERR_HEADER_LENGTH},
        {"InvalidHeader", LLMR_ST_ERR_HEADER_UTF8},           {"InvalidHeaderDeserialization", LLMR_ST_ERR_HEADER_JSON},
        {"TensorInvalidInfo", LLMR_ST_ERR_TENSOR_INFO},       {"ValidationOverflow", LLMR_ST_ERR_OVERFLOW},
        {"InvalidOffset", LLMR_ST_ERR_OFFSET},                {"MisalignedSlice", LLMR_ST_ERR_MISALIGNED},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].n, name) == 0) return map[i].s;
    return LLMR_ST_OK;
}

static size_t unhex(const char *hex, uint8_t *out) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) sscanf(hex + 2 * i, "%2hhx", &out[i]);
    return n;
}

START_TEST(reference_cases) {
    json_error_t je;
    json_t *root = json_load_file("tests/data/safetensors/safetensors-reader-cases.json", 0, &je);
    ck_assert_msg(root != NULL, "cannot load cases: %s", je.text);
    json_t *cases = json_object_get(root, "cases");
    size_t i;
    json_t *c;
    int checked = 0;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *expect = json_string_value(json_object_get(c, "expect"));
        const char *hex = json_string_value(json_object_get(c, "file_hex"));
        uint64_t file_len = (uint64_t)json_integer_value(json_object_get(c, "file_len"));
        uint8_t *buf = calloc(strlen(hex) / 2 + 8, 1);
        size_t n = unhex(hex, buf);
        /* file_len may exceed the hex when the case describes a longer file (data not materialised). */
        llmr_safetensors *st = NULL;
        char err[512] = "";
        llmr_st_status s = llmr_st_parse(buf, n, file_len, &st, err, sizeof err);
        if (strcmp(expect, "ok") == 0) {
            ck_assert_msg(s == LLMR_ST_OK, "%s: expected ok, got %s: %s", name, llmr_st_strerror(s), err);
            json_t *tensors = json_object_get(c, "tensors");
            const char *tn;
            json_t *ti;
            json_object_foreach(tensors, tn, ti) {
                const llmr_st_tensor *t = llmr_st_find(st, tn);
                ck_assert_msg(t != NULL, "%s: tensor %s missing", name, tn);
                ck_assert_str_eq(llmr_st_dtype_name(t->dtype), json_string_value(json_object_get(ti, "dtype")));
                ck_assert_uint_eq(t->end - t->begin, (uint64_t)json_integer_value(json_object_get(ti, "nbytes")));
            }
        } else if (strcmp(expect, "error") == 0) {
            const char *want = json_string_value(json_object_get(c, "error"));
            ck_assert_msg(s == expected_status(want), "%s: expected %s, got %s (%s)", name, want, llmr_st_strerror(s), err);
            ck_assert_msg(err[0] != 0, "%s: error without a message", name);
        } else if (strstr(expect, "reject")) {
            ck_assert_msg(s != LLMR_ST_OK, "%s: expected a rejection", name);
        }
        llmr_st_destroy(st);
        free(buf);
        checked++;
    }
    ck_assert_int_ge(checked, 30);
    json_decref(root);
}
END_TEST

/* Builds a file image: 8-byte length + header + data_len bytes of data. */
static uint8_t *image(const char *header, size_t data_len, size_t *len_out) {
    size_t hl = strlen(header);
    uint8_t *b = calloc(8 + hl + data_len, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    *len_out = 8 + hl + data_len;
    return b;
}

static llmr_st_status parse_str(const char *header, size_t data_len, char *err, size_t es) {
    size_t n;
    uint8_t *b = image(header, data_len, &n);
    llmr_safetensors *st = NULL;
    llmr_st_status s = llmr_st_parse(b, n, n, &st, err, es);
    llmr_st_destroy(st);
    free(b);
    return s;
}

START_TEST(hostile_headers_named) {
    char err[512];
    ck_assert_int_eq(parse_str("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, err, sizeof err), LLMR_ST_OK);
    ck_assert_int_eq(parse_str("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, err, sizeof err), LLMR_ST_ERR_TENSOR_INFO);
    ck_assert_ptr_nonnull(strstr(err, "'w'"));
    ck_assert_int_eq(parse_str("{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, err, sizeof err), LLMR_ST_ERR_HEADER_JSON);
    ck_assert_ptr_nonnull(strstr(err, "unknown dtype 'Q4'"));
    ck_assert_int_eq(parse_str("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
                               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8, err, sizeof err), LLMR_ST_OK);
    ck_assert_int_eq(parse_str("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 2, err, sizeof err), LLMR_ST_ERR_INCOMPLETE);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    ck_assert_int_eq(parse_str("not json", 0, err, sizeof err), LLMR_ST_ERR_HEADER_JSON);
    /* deep nesting: jansson refuses it; we must report, not crash */
    char deep[5000];
    size_t l = 0;
    l += (size_t)sprintf(deep, "{\"__metadata__\":");
    for (int i = 0; i < 2000; i++) deep[l++] = '[';
    for (int i = 0; i < 2000; i++) deep[l++] = ']';
    deep[l++] = '}';
    deep[l] = 0;
    ck_assert_int_eq(parse_str(deep, 0, err, sizeof err), LLMR_ST_ERR_HEADER_JSON);
}
END_TEST

START_TEST(path_safety_rules) {
    char err[128];
    const char *good[] = {"config.json", "metal/model.bin", "model-00001-of-00002.safetensors", "a.b/c..d"};
    for (size_t i = 0; i < 4; i++) ck_assert_msg(llmr_path_is_safe(good[i], err, sizeof err), "%s: %s", good[i], err);
    const char *bad[] = {"", "/etc/passwd", "../x", "a/../b", "a/./b", "a//b", "a/", "a\\b", "..", ".", "a\nb"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        ck_assert_msg(!llmr_path_is_safe(bad[i], err, sizeof err), "accepted %s", bad[i]);
        ck_assert(err[0]);
    }
    ck_assert(!llmr_path_is_safe_n("a\0b", 3, err, sizeof err));
    ck_assert_str_eq(err, "NUL byte in file name");
}
END_TEST

START_TEST(sha256_known_vectors) {
    char hex[65];
    llmr_sha256_buf("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    llmr_sha256 *h = llmr_sha256_create();
    llmr_sha256_update(h, "a", 1);
    llmr_sha256_update(h, "bc", 2);
    llmr_sha256_final(h, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    llmr_sha256_destroy(h);
    char err[256];
    ck_assert_int_eq(llmr_sha256_file("/nonexistent/file", hex, NULL, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/file"));
}
END_TEST

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

START_TEST(sharded_checkpoint) {
    char *dir = llmr_test_tmpdir();
    size_t n;
    uint8_t *a = image("{\"x.weight\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8, &n);
    write_file(dir, "model-00000-of-00001.safetensors", a, n);
    free(a);
    uint8_t *b = image("{\"y.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &n);
    b[n - 4] = 1;
    write_file(dir, "model-00001-of-00001.safetensors", b, n);
    free(b);
    const char *idx = "{\"metadata\":{\"total_size\":12},\"weight_map\":{\"x.weight\":\"model-00000-of-00001.safetensors\","
                      "\"y.bias\":\"model-00001-of-00001.safetensors\"}}";
    write_file(dir, "model.safetensors.index.json", idx, strlen(idx));
    llmr_checkpoint *ck = NULL;
    char err[512];
    ck_assert_msg(llmr_checkpoint_open(dir, &ck, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(llmr_checkpoint_shard_count(ck), 2);
    uint64_t shape[2] = {2, 2};
    ck_assert_ptr_nonnull(llmr_checkpoint_expect(ck, "x.weight", LLMR_ST_BF16, 2, shape, err, sizeof err));
    ck_assert_ptr_null(llmr_checkpoint_expect(ck, "x.weight", LLMR_ST_F32, 2, shape, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "expected F32 [2, 2], found BF16 [2, 2]"));
    const uint8_t *d = llmr_checkpoint_data(ck, "y.bias", NULL, err, sizeof err);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d[0], 1);
    llmr_checkpoint_destroy(ck);

    /* index naming a tensor that its shard lacks */
    const char *bad = "{\"weight_map\":{\"x.weight\":\"model-00000-of-00001.safetensors\",\"z\":\"model-00001-of-00001.safetensors\","
                      "\"y.bias\":\"model-00001-of-00001.safetensors\"}}";
    write_file(dir, "model.safetensors.index.json", bad, strlen(bad));
    ck_assert_int_eq(llmr_checkpoint_open(dir, &ck, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "tensor z is listed in the index for model-00001-of-00001.safetensors"));
    /* missing shard */
    const char *miss = "{\"weight_map\":{\"x.weight\":\"model-00000-of-00001.safetensors\",\"y.bias\":\"gone.safetensors\"}}";
    write_file(dir, "model.safetensors.index.json", miss, strlen(miss));
    ck_assert_int_eq(llmr_checkpoint_open(dir, &ck, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "shard gone.safetensors is missing"));
    /* hostile shard name */
    const char *evil = "{\"weight_map\":{\"x.weight\":\"../../etc/passwd\"}}";
    write_file(dir, "model.safetensors.index.json", evil, strlen(evil));
    ck_assert_int_eq(llmr_checkpoint_open(dir, &ck, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unsafe shard name"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}
END_TEST

static Suite *st_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reference_cases);
    tcase_add_test(tc, hostile_headers_named);
    tcase_add_test(tc, path_safety_rules);
    tcase_add_test(tc, sha256_known_vectors);
    tcase_add_test(tc, sharded_checkpoint);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(st_suite)
