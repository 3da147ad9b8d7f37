/* gptoss/config.h — gpt-oss model hyper-parameters from a Hugging Face config.json, shared by the
 * checkpoint generator, the C reference engine and the CUDA engine so all three agree.
 *
 * Facts (see shared reference gpt-oss.md §1): head_dim is read, never derived from hidden/heads;
 * layer_types alternate sliding/full starting with sliding; YaRN rope with truncate=false;
 * SwiGLU alpha 1.702 (not in the shipped config: default when absent), limit swiglu_limit. */
#ifndef LLMR_GPTOSS_CONFIG_H
#define LLMR_GPTOSS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define GPTOSS_MAX_LAYERS 128
#define GPTOSS_MXFP4_BLOCK 32 /* values per MXFP4 block: 16 bytes + 1 E8M0 scale */

typedef struct gptoss_config {
    int hidden_size;          /* 2880 */
    int num_layers;           /* 24 */
    int num_heads;            /* 64 query heads */
    int num_kv_heads;         /* 8 */
    int head_dim;             /* 64 */
    int num_experts;          /* 32 */
    int experts_per_token;    /* 4 */
    int intermediate_size;    /* 2880 per expert */
    int vocab_size;           /* 201088 */
    int sliding_window;       /* 128 */
    int max_position_embeddings;
    float rms_norm_eps;       /* 1e-5 */
    float rope_theta;         /* 150000 */
    float rope_factor;        /* YaRN scaling factor s (32) */
    float rope_beta_fast;     /* 32 */
    float rope_beta_slow;     /* 1 */
    int rope_original_max_position; /* 4096 */
    int rope_truncate;        /* 0 for gpt-oss */
    float swiglu_limit;       /* 7.0 */
    float swiglu_alpha;       /* 1.702 */
    int eos_token_id;         /* 200002 */
    uint8_t layer_sliding[GPTOSS_MAX_LAYERS]; /* 1 = sliding_attention, 0 = full_attention */
} gptoss_config;

/* Parses config.json text. Returns 0, or -1 with the field at fault named in err. */
int gptoss_config_parse(const char *json_text, size_t len, gptoss_config *out, char *err, size_t err_size);
/* Reads dir/config.json. */
int gptoss_config_load(const char *model_dir, gptoss_config *out, char *err, size_t err_size);

/* YaRN RoPE tables: inv_freq[head_dim/2] and the attention factor (mscale) that multiplies cos and sin,
 * computed exactly as transformers' _compute_yarn_parameters (fp64 math, rounded to float at the end). */
void gptoss_yarn_inv_freq(const gptoss_config *c, float *inv_freq, float *attention_factor);

/* The FP4 E2M1 value of a nibble (bit 3 = sign). */
static inline float gptoss_fp4_value(unsigned nibble) {
    static const float table[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return table[nibble & 15];
}

#endif
