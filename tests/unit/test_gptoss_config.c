/* Unit tests for common/gptoss/config: parsing the real config field set and the YaRN tables. */
#include <math.h>

#include "common/gptoss/config.h"
#include "tests/unit/testutil.h"

START_TEST(parses_real_config) {
    gptoss_config c;
    char err[256];
    ck_assert_msg(gptoss_config_load("tests/data/gptoss/20b", &c, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.hidden_size, 2880);
    ck_assert_int_eq(c.head_dim, 64);
    ck_assert_int_eq(c.num_layers, 24);
    ck_assert_int_eq(c.num_kv_heads, 8);
    ck_assert_int_eq(c.vocab_size, 201088);
    ck_assert_int_eq(c.rope_truncate, 0);
    ck_assert_int_eq(c.layer_sliding[0], 1);
    ck_assert_int_eq(c.layer_sliding[1], 0);
    ck_assert_int_eq(c.layer_sliding[22], 1);
    ck_assert(fabsf(c.swiglu_alpha - 1.702f) < 1e-6f);
}
END_TEST

/* Values computed in shared/reference/gpt-oss.md §1.8. */
START_TEST(yarn_tables) {
    gptoss_config c;
    char err[256];
    ck_assert_msg(gptoss_config_load("tests/data/gptoss/20b", &c, err, sizeof err) == 0, "%s", err);
    float inv[32], mscale;
    gptoss_yarn_inv_freq(&c, inv, &mscale);
    ck_assert(fabsf(inv[0] - 1.0f) < 1e-6f);
    ck_assert(fabsf(inv[1] - 0.68904f) < 1e-5f);
    ck_assert(fabsf(inv[3] - 0.32715f) < 1e-5f);
    ck_assert(fabsf(inv[8] - 0.050813f) / 0.050813f < 1e-4f);
    ck_assert(fabsf(inv[31] - 3.0235e-7f) / 3.0235e-7f < 1e-3f);
    ck_assert(fabsf(mscale - 1.346574f) < 1e-5f);
}
END_TEST

START_TEST(bad_configs_named) {
    gptoss_config c;
    char err[256];
    const char *missing = "{\"hidden_size\": 64}";
    ck_assert_int_eq(gptoss_config_parse(missing, strlen(missing), &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "num_hidden_layers"));
    ck_assert_int_eq(gptoss_config_parse("[1", 2, &c, err, sizeof err), -1);
    /* the real config with one value made degenerate: each is refused, naming the field */
    static const struct { const char *from, *to, *named; } cases[] = {
        {"\"vocab_size\": 201088", "\"vocab_size\": 0", "vocab_size must be positive"},
        {"\"hidden_size\": 2880", "\"hidden_size\": 0", "hidden_size must be positive"},
        {"\"num_attention_heads\": 64", "\"num_attention_heads\": 0", "num_attention_heads must be positive"},
        {"\"rope_theta\": 150000", "\"rope_theta\": 1", "rope_theta must be"},
        {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1", "rms_norm_eps must be"},
    };
    FILE *f = fopen("tests/data/gptoss/20b/config.json", "rb");
    ck_assert_ptr_nonnull(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *at = strstr(text, cases[i].from), bad[8300];
        ck_assert_msg(at != NULL, "fixture lacks %s", cases[i].from);
        int len = snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - text), text, cases[i].to, at + strlen(cases[i].from));
        ck_assert_int_eq(gptoss_config_parse(bad, (size_t)len, &c, err, sizeof err), -1);
        ck_assert_msg(strstr(err, cases[i].named) != NULL, "case %zu: %s", i, err);
    }
}
END_TEST

static Suite *cfg_suite(void) {
    Suite *s = suite_create("gptoss_config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, parses_real_config);
    tcase_add_test(tc, yarn_tables);
    tcase_add_test(tc, bad_configs_named);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(cfg_suite)
