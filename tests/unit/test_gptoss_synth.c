/* Unit tests for common/gptoss/synth (llmr-mkmodel's generator): the real 20b shard split, a tiny
 * checkpoint that the strict loader accepts with every tensor's dtype/shape, layers straddling shards,
 * sane E8M0 scales, and the same bytes for any thread count. */
#include <math.h>
#include <unistd.h>

#include "common/checkpoint.h"
#include "common/gptoss/config.h"
#include "common/gptoss/synth.h"
#include "common/sha256.h"
#include "tests/unit/testutil.h"

static void rm_rf(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* shared/reference gpt-oss.md §1.2: payload bytes of the three real shards. */
START_TEST(plan_20b_matches_real_split) {
    gptoss_synth_options o = {.preset = "20b", .seed = 1, .dry_run = 1};
    gptoss_synth_report r;
    char err[256];
    ck_assert_msg(gptoss_synth_write(&o, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(r.n_tensors, 459);
    ck_assert_int_eq(r.n_shards, 3);
    ck_assert_uint_eq(r.total_size, 13761264768ull);
    ck_assert_uint_eq(r.shard_payload[0], 4792250240ull);
    ck_assert_uint_eq(r.shard_payload[1], 4798679872ull);
    ck_assert_uint_eq(r.shard_payload[2], 4170334656ull);
}
END_TEST

/* 20b-2l: the 20b's two first layers' tensors plus its globals, split so that layers straddle shards. */
START_TEST(plan_20b_2l_is_two_20b_layers) {
    gptoss_synth_options o = {.preset = "20b-2l", .seed = 1, .dry_run = 1};
    gptoss_synth_report r;
    char err[256];
    ck_assert_msg(gptoss_synth_write(&o, &r, err, sizeof err) == 0, "%s", err);
    const uint64_t globals = 2ull * 201088 * 2880 * 2 + 2880 * 2; /* embedding, lm_head, final norm */
    const uint64_t layer = (13761264768ull - globals) / 24;        /* one 20b layer (plan_20b_matches_real_split) */
    ck_assert_int_eq(r.n_tensors, 19 * 2 + 3);
    ck_assert_uint_eq(r.total_size, globals + 2 * layer);
    ck_assert_int_ge(r.n_shards, 3);
    const gptoss_synth_dims *d = gptoss_synth_preset("20b-2l"), *f = gptoss_synth_preset("20b");
    ck_assert_int_eq(d->num_layers, 2);
    ck_assert_int_eq(d->hidden_size, f->hidden_size);
    ck_assert_int_eq(d->num_experts, f->num_experts);
    ck_assert_int_eq(d->intermediate_size, f->intermediate_size);
}
END_TEST

START_TEST(bad_options_named) {
    gptoss_synth_options o = {.preset = "huge", .seed = 1, .out_dir = "/tmp/x"};
    char err[256];
    ck_assert_int_eq(gptoss_synth_write(&o, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "huge"));
    o.preset = "tiny";
    o.out_dir = "/nonexistent-dir/sub";
    ck_assert_int_eq(gptoss_synth_write(&o, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/sub"));
    o.out_dir = "/tmp/x";
    o.shard_cap = 1ull << 40; /* one shard only: refused */
    o.dry_run = 1;
    ck_assert_int_eq(gptoss_synth_write(&o, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "single shard"));
}
END_TEST

static void write_tiny(const char *dir, int threads) {
    gptoss_synth_options o = {.preset = "tiny", .seed = 7, .out_dir = dir, .threads = threads,
                              .chat_template_path = "tests/data/gptoss/chat_template.jinja"};
    gptoss_synth_report r;
    char err[512];
    ck_assert_msg(gptoss_synth_write(&o, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_int_ge(r.n_shards, 2);
    ck_assert_int_eq(r.template_copied, 1);
}

static void expect(llmr_checkpoint *ck, const char *name, llmr_st_dtype dt, int ndim, const uint64_t *shape) {
    char err[512];
    ck_assert_msg(llmr_checkpoint_expect(ck, name, dt, ndim, shape, err, sizeof err) != NULL, "%s", err);
}

START_TEST(tiny_loads_with_every_tensor) {
    char *dir = llmr_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    write_tiny(dir, 2);
    gptoss_config c;
    char err[512];
    ck_assert_msg(gptoss_config_load(dir, &c, err, sizeof err) == 0, "%s", err);
    const gptoss_synth_dims *d = gptoss_synth_preset("tiny");
    ck_assert_int_eq(c.hidden_size, d->hidden_size);
    ck_assert_int_eq(c.vocab_size, 201088);
    ck_assert_int_eq(c.head_dim, 64);
    ck_assert_int_eq(c.rope_truncate, 0);
    ck_assert(fabsf(c.rope_factor - 32.0f) < 1e-6f);
    ck_assert_int_eq(c.layer_sliding[0], 1);
    ck_assert_int_eq(c.layer_sliding[1], 0);

    llmr_checkpoint *ck = NULL;
    ck_assert_msg(llmr_checkpoint_open(dir, &ck, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(llmr_checkpoint_tensor_count(ck), (size_t)(19 * c.num_layers + 3));
    ck_assert_uint_ge(llmr_checkpoint_shard_count(ck), 2);
    const uint64_t H = (uint64_t)c.hidden_size, E = (uint64_t)c.num_experts, I = (uint64_t)c.intermediate_size;
    const uint64_t Q = (uint64_t)(c.num_heads * c.head_dim), KV = (uint64_t)(c.num_kv_heads * c.head_dim);
    int straddles = 0;
    for (int L = 0; L < c.num_layers; L++) {
        char n[128];
#define T(s) (snprintf(n, sizeof n, "model.layers.%d.%s", L, s), n)
#define SH(...) ((const uint64_t[]){__VA_ARGS__})
        expect(ck, T("input_layernorm.weight"), LLMR_ST_BF16, 1, SH(H));
        expect(ck, T("post_attention_layernorm.weight"), LLMR_ST_BF16, 1, SH(H));
        expect(ck, T("self_attn.q_proj.weight"), LLMR_ST_BF16, 2, SH(Q, H));
        expect(ck, T("self_attn.q_proj.bias"), LLMR_ST_BF16, 1, SH(Q));
        expect(ck, T("self_attn.k_proj.weight"), LLMR_ST_BF16, 2, SH(KV, H));
        expect(ck, T("self_attn.v_proj.bias"), LLMR_ST_BF16, 1, SH(KV));
        expect(ck, T("self_attn.o_proj.weight"), LLMR_ST_BF16, 2, SH(H, Q));
        expect(ck, T("self_attn.sinks"), LLMR_ST_BF16, 1, SH((uint64_t)c.num_heads));
        expect(ck, T("mlp.router.weight"), LLMR_ST_BF16, 2, SH(E, H));
        expect(ck, T("mlp.router.bias"), LLMR_ST_BF16, 1, SH(E));
        expect(ck, T("mlp.experts.gate_up_proj_blocks"), LLMR_ST_U8, 4, SH(E, 2 * I, H / 32, 16));
        expect(ck, T("mlp.experts.gate_up_proj_scales"), LLMR_ST_U8, 3, SH(E, 2 * I, H / 32));
        expect(ck, T("mlp.experts.gate_up_proj_bias"), LLMR_ST_BF16, 2, SH(E, 2 * I));
        expect(ck, T("mlp.experts.down_proj_blocks"), LLMR_ST_U8, 4, SH(E, H, I / 32, 16));
        expect(ck, T("mlp.experts.down_proj_scales"), LLMR_ST_U8, 3, SH(E, H, I / 32));
        expect(ck, T("mlp.experts.down_proj_bias"), LLMR_ST_BF16, 2, SH(E, H));
        size_t s0, s1;
        ck_assert_ptr_nonnull(llmr_checkpoint_find(ck, T("input_layernorm.weight"), &s0));
        ck_assert_ptr_nonnull(llmr_checkpoint_find(ck, T("post_attention_layernorm.weight"), &s1));
        straddles += s0 != s1;
        /* E8M0 scales: sane exponents only (never 255) */
        const llmr_st_tensor *t;
        const uint8_t *sc = llmr_checkpoint_data(ck, T("mlp.experts.down_proj_scales"), &t, err, sizeof err);
        ck_assert_msg(sc != NULL, "%s", err);
        for (uint64_t i = 0; i < llmr_st_numel(t); i++) ck_assert(sc[i] >= 118 && sc[i] <= 130);
#undef T
    }
    ck_assert_int_ge(straddles, 1);
    expect(ck, "model.embed_tokens.weight", LLMR_ST_BF16, 2, SH(201088, H));
    expect(ck, "lm_head.weight", LLMR_ST_BF16, 2, SH(201088, H));
    expect(ck, "model.norm.weight", LLMR_ST_BF16, 1, SH(H));
#undef SH
    /* norms are ~1, embeddings ~N(0,1): the bf16 values are sane */
    const llmr_st_tensor *t;
    const uint16_t *nw = llmr_checkpoint_data(ck, "model.norm.weight", &t, err, sizeof err);
    ck_assert_ptr_nonnull(nw);
    for (uint64_t i = 0; i < H; i++) {
        float v = gptoss_bf16_to_f32(nw[i]);
        ck_assert(v > 0.5f && v < 1.5f);
    }
    llmr_checkpoint_destroy(ck);
    char path[4200];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    ck_assert_int_eq(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    ck_assert_int_eq(access(path, R_OK), 0);
    rm_rf(dir);
    free(dir);
}
END_TEST

static void hash_dir(const char *dir, char out[LLMR_SHA256_HEX_LEN + 1]) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cd '%s' && cat model-*.safetensors model.safetensors.index.json config.json | sha256sum", dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(out, LLMR_SHA256_HEX_LEN + 1, p));
    pclose(p);
}

START_TEST(same_bytes_any_thread_count) {
    char *a = llmr_test_tmpdir(), *b = llmr_test_tmpdir();
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    write_tiny(a, 1);
    write_tiny(b, 5);
    char ha[LLMR_SHA256_HEX_LEN + 1], hb[LLMR_SHA256_HEX_LEN + 1];
    hash_dir(a, ha);
    hash_dir(b, hb);
    ck_assert_str_eq(ha, hb);
    rm_rf(a);
    rm_rf(b);
    free(a);
    free(b);
}
END_TEST

START_TEST(bf16_rounding) {
    ck_assert_uint_eq(gptoss_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(gptoss_f32_to_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between 1 and 1+2^-7: ties to even (1.0) */
    ck_assert_uint_eq(gptoss_f32_to_bf16(1.00390625f), 0x3f80);
    ck_assert_uint_eq(gptoss_f32_to_bf16(1.01171875f), 0x3f82);
    ck_assert(gptoss_bf16_to_f32(0x3f80) == 1.0f);
}
END_TEST

static Suite *synth_suite(void) {
    Suite *s = suite_create("gptoss_synth");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, plan_20b_matches_real_split);
    tcase_add_test(tc, plan_20b_2l_is_two_20b_layers);
    tcase_add_test(tc, bad_options_named);
    tcase_add_test(tc, tiny_loads_with_every_tensor);
    tcase_add_test(tc, same_bytes_any_thread_count);
    tcase_add_test(tc, bf16_rounding);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(synth_suite)
