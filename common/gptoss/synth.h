/* gptoss/synth.h — synthetic gpt-oss checkpoints in the exact Hugging Face layout.
 *
 * A synthetic checkpoint is what `openai/gpt-oss-20b` ships, with random weights:
 *   config.json                      the real field set (shared/reference gpt-oss.md §1.1), preset dims
 *   generation_config.json           bos 199998, eos [200002, 199999, 200012], pad 199999
 *   model.safetensors.index.json     metadata.total_size + weight_map (name -> shard file)
 *   model-0000i-of-0000N.safetensors zero-based shard names as the HF converter writes them
 *                                    (N = shard count - 1), at least two shards
 *   chat_template.jinja              copied when a template path is given
 *   tokenizer.json, tokenizer_config.json  copied when the tokenizer folder holds them
 *
 * Tensors (per layer L, names/dtypes as §1.2): BF16 for everything that is not an expert weight
 * (norms included); experts as MXFP4: U8 blocks [E, rows, K/32, 16] and U8 E8M0 scales [E, rows, K/32].
 *
 * Sharding follows the converter: tensors are taken in the sorted order of their *original* OpenAI
 * names (block.N.attn.qkv.weight, ..., embedding.weight, norm.scale, unembedding.weight; q/k/v come from
 * one fused original tensor and stay together) and a new shard starts when the next one would pass the
 * size cap. With the 20b preset and the converter's 4.8e9 cap this reproduces the real three shards
 * byte for byte in payload size (4,792,250,240 / 4,798,679,872 / 4,170,334,656). The small presets
 * default to a cap of 3/8 of the layer bytes, so a layer straddles two shards.
 *
 * Values: deterministic for a seed on any machine and any thread count. Each tensor is cut into fixed
 * chunks and each chunk draws from its own PRNG stream keyed by (seed, tensor name, chunk index).
 * Scales are chosen so activations stay O(1) through the layers: bf16 weights ~N(0, 1/sqrt(fan_in))
 * (scaled), norms ~1, router logits spread wide enough that the top-4 are usually well separated,
 * E8M0 scales within ±1 of a per-matrix centre set by the fan-in (119..122 for the presets; never 255),
 * sinks ~N(1.5, 1). */
#ifndef LLMR_GPTOSS_SYNTH_H
#define LLMR_GPTOSS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* Structural sizes of a preset. All presets keep vocab 201088, head_dim 64, sliding window 128,
 * alternating layer types starting with sliding, YaRN (factor 32 = 131072 / 4096, truncate false). */
typedef struct gptoss_synth_dims {
    const char *name;
    int hidden_size, num_layers, num_heads, num_kv_heads, head_dim;
    int num_experts, experts_per_token, intermediate_size, vocab_size;
} gptoss_synth_dims;

/* The preset called name ("tiny", "small", "20b-2l", "20b"), or NULL if there is none. */
const gptoss_synth_dims *gptoss_synth_preset(const char *name);

typedef struct gptoss_synth_options {
    const char *preset;             /* "tiny" | "small" | "20b-2l" | "20b" */
    uint64_t seed;
    const char *out_dir;            /* created if missing (parent must exist); existing files replaced */
    const char *tokenizer_dir;      /* folder with tokenizer.json (+ tokenizer_config.json); NULL = none */
    const char *chat_template_path; /* file copied to chat_template.jinja; NULL = none */
    int threads;                    /* <= 0: 1 */
    uint64_t shard_cap;             /* bytes; 0 = preset default (20b: 4.8e9, others: 3/8 of the layer bytes) */
    int dry_run;                    /* plan only: fill the report, write nothing */
} gptoss_synth_options;

/* What was (or would be) written. */
typedef struct gptoss_synth_report {
    int n_shards;
    int n_tensors;
    uint64_t total_size;            /* sum of tensor payload bytes (the index's metadata.total_size) */
    uint64_t shard_payload[64];     /* payload bytes of each shard (first 64) */
    int tokenizer_copied;           /* 1 if tokenizer.json was copied */
    int template_copied;
} gptoss_synth_report;

/* Writes (or with dry_run only plans) the checkpoint. Returns 0, or -1 with the cause in err (the
 * file, the preset or the option at fault). report may be NULL. */
int gptoss_synth_write(const gptoss_synth_options *opt, gptoss_synth_report *report, char *err, size_t err_size);

/* Round-to-nearest-even float -> bf16 bits (NaN stays NaN); exposed for tests and engines. */
uint16_t gptoss_f32_to_bf16(float f);
static inline float gptoss_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

#endif
