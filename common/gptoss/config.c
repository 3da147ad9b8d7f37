/* gptoss/config.c — see config.h. */
#include "common/gptoss/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"

static int get_int(json_t *o, const char *key, int *out, int required, char *err, size_t es) {
    json_t *v = json_object_get(o, key);
    if (!v) return required ? llmr_errf(err, es, "config.json: missing field '%s'", key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff)
        return llmr_errf(err, es, "config.json: field '%s' must be a non-negative integer", key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, float *out, int required, char *err, size_t es) {
    json_t *v = json_object_get(o, key);
    if (!v) return required ? llmr_errf(err, es, "config.json: missing field '%s'", key) : 0;
    if (!json_is_number(v)) return llmr_errf(err, es, "config.json: field '%s' must be a number", key);
    *out = (float)json_number_value(v);
    return 0;
}

static int parse_rope(json_t *root, gptoss_config *c, char *err, size_t es) {
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs) rs = json_object_get(root, "rope_parameters"); /* transformers v5 spelling */
    if (!json_is_object(rs)) return llmr_errf(err, es, "config.json: missing object 'rope_scaling'");
    json_t *type = json_object_get(rs, "rope_type");
    if (!type) type = json_object_get(rs, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "yarn") != 0)
        return llmr_errf(err, es, "config.json: rope_scaling.rope_type must be \"yarn\"");
    if (get_num(rs, "factor", &c->rope_factor, 1, err, es) || get_num(rs, "beta_fast", &c->rope_beta_fast, 0, err, es) ||
        get_num(rs, "beta_slow", &c->rope_beta_slow, 0, err, es) ||
        get_int(rs, "original_max_position_embeddings", &c->rope_original_max_position, 1, err, es))
        return -1;
    if (json_object_get(rs, "rope_theta") && get_num(rs, "rope_theta", &c->rope_theta, 0, err, es)) return -1;
    json_t *tr = json_object_get(rs, "truncate");
    c->rope_truncate = tr ? json_is_true(tr) : 1; /* transformers' default is truncate=true */
    return 0;
}

static int parse_layer_types(json_t *root, gptoss_config *c, char *err, size_t es) {
    json_t *lt = json_object_get(root, "layer_types");
    if (!lt) { /* default: alternate, sliding first */
        for (int i = 0; i < c->num_layers; i++) c->layer_sliding[i] = (i % 2) == 0;
        return 0;
    }
    if (!json_is_array(lt) || (int)json_array_size(lt) != c->num_layers)
        return llmr_errf(err, es, "config.json: layer_types must list %d entries", c->num_layers);
    for (int i = 0; i < c->num_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (s && strcmp(s, "sliding_attention") == 0) c->layer_sliding[i] = 1;
        else if (s && strcmp(s, "full_attention") == 0) c->layer_sliding[i] = 0;
        else return llmr_errf(err, es, "config.json: layer_types[%d] is neither sliding_attention nor full_attention", i);
    }
    return 0;
}

/* Sizes that must be positive and scalars that must be finite and positive: a zero vocab or head
 * count, or a rope_theta of 1 (log(base) = 0), would otherwise surface later as empty tensors,
 * divisions by zero or NaN rotary tables instead of an error naming the field. */
static int check_positive(const gptoss_config *c, char *err, size_t es) {
    const struct { const char *name; int v; } ints[] = {
        {"hidden_size", c->hidden_size}, {"num_attention_heads", c->num_heads}, {"head_dim", c->head_dim},
        {"num_local_experts", c->num_experts}, {"intermediate_size", c->intermediate_size},
        {"vocab_size", c->vocab_size}, {"max_position_embeddings", c->max_position_embeddings},
        {"rope_scaling.original_max_position_embeddings", c->rope_original_max_position},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v <= 0) return llmr_errf(err, es, "config.json: %s must be positive, got %d", ints[i].name, ints[i].v);
    const struct { const char *name; float v, min; } nums[] = {
        {"rms_norm_eps", c->rms_norm_eps, 0}, {"rope_theta", c->rope_theta, 1}, {"rope_scaling.factor", c->rope_factor, 0},
        {"rope_scaling.beta_fast", c->rope_beta_fast, 0}, {"rope_scaling.beta_slow", c->rope_beta_slow, 0},
        {"swiglu_limit", c->swiglu_limit, 0}, {"swiglu_alpha", c->swiglu_alpha, 0},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!isfinite(nums[i].v) || !(nums[i].v > nums[i].min))
            return llmr_errf(err, es, "config.json: %s must be a finite number above %g, got %g", nums[i].name,
                             (double)nums[i].min, (double)nums[i].v);
    return 0;
}

int gptoss_config_parse(const char *text, size_t len, gptoss_config *c, char *err, size_t es) {
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) return llmr_errf(err, es, "config.json: %s (line %d)", je.text, je.line);
    memset(c, 0, sizeof *c);
    c->rope_theta = 10000.0f;
    c->rope_beta_fast = 32.0f;
    c->rope_beta_slow = 1.0f;
    c->swiglu_limit = 7.0f;
    c->swiglu_alpha = 1.702f;
    c->rms_norm_eps = 1e-5f;
    c->eos_token_id = 200002;
    int rc = -1;
    if (!json_is_object(root)) { llmr_errf(err, es, "config.json: not a JSON object"); goto out; }
    if (get_int(root, "hidden_size", &c->hidden_size, 1, err, es) || get_int(root, "num_hidden_layers", &c->num_layers, 1, err, es) ||
        get_int(root, "num_attention_heads", &c->num_heads, 1, err, es) ||
        get_int(root, "num_key_value_heads", &c->num_kv_heads, 1, err, es) || get_int(root, "head_dim", &c->head_dim, 1, err, es) ||
        get_int(root, "num_local_experts", &c->num_experts, 1, err, es) ||
        get_int(root, "num_experts_per_tok", &c->experts_per_token, 1, err, es) ||
        get_int(root, "intermediate_size", &c->intermediate_size, 1, err, es) ||
        get_int(root, "vocab_size", &c->vocab_size, 1, err, es) || get_int(root, "sliding_window", &c->sliding_window, 1, err, es) ||
        get_int(root, "max_position_embeddings", &c->max_position_embeddings, 1, err, es) ||
        get_num(root, "rms_norm_eps", &c->rms_norm_eps, 0, err, es) || get_num(root, "rope_theta", &c->rope_theta, 0, err, es) ||
        get_num(root, "swiglu_limit", &c->swiglu_limit, 0, err, es) || get_num(root, "swiglu_alpha", &c->swiglu_alpha, 0, err, es))
        goto out;
    json_t *eos = json_object_get(root, "eos_token_id");
    if (json_is_integer(eos)) c->eos_token_id = (int)json_integer_value(eos);
    if (c->num_layers <= 0 || c->num_layers > GPTOSS_MAX_LAYERS) { llmr_errf(err, es, "config.json: num_hidden_layers %d out of range 1..%d", c->num_layers, GPTOSS_MAX_LAYERS); goto out; }
    if (c->num_kv_heads == 0 || c->num_heads % c->num_kv_heads) { llmr_errf(err, es, "config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d", c->num_heads, c->num_kv_heads); goto out; }
    if (c->head_dim == 0 || c->head_dim % 2) { llmr_errf(err, es, "config.json: head_dim %d must be even and positive", c->head_dim); goto out; }
    if (c->hidden_size % GPTOSS_MXFP4_BLOCK || c->intermediate_size % GPTOSS_MXFP4_BLOCK) {
        llmr_errf(err, es, "config.json: hidden_size and intermediate_size must be multiples of %d (MXFP4 blocks)", GPTOSS_MXFP4_BLOCK);
        goto out;
    }
    if (c->experts_per_token == 0 || c->experts_per_token > c->num_experts) { llmr_errf(err, es, "config.json: num_experts_per_tok %d out of range", c->experts_per_token); goto out; }
    if (parse_rope(root, c, err, es) || parse_layer_types(root, c, err, es) || check_positive(c, err, es)) goto out;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int gptoss_config_load(const char *dir, gptoss_config *out, char *err, size_t es) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return llmr_errf(err, es, "%s: cannot open", path);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    int big = !feof(f);
    fclose(f);
    if (big) return llmr_errf(err, es, "%s: larger than 64 KB", path);
    return gptoss_config_parse(buf, n, out, err, es);
}

/* Dimension index whose wavelength completes num_rotations over the original context. */
static double yarn_correction_dim(double num_rotations, int dim, double base, int max_pos) {
    return (dim * log(max_pos / (num_rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

void gptoss_yarn_inv_freq(const gptoss_config *c, float *inv_freq, float *attention_factor) {
    const int half = c->head_dim / 2;
    const double base = c->rope_theta, s = c->rope_factor;
    double low = yarn_correction_dim(c->rope_beta_fast, c->head_dim, base, c->rope_original_max_position);
    double high = yarn_correction_dim(c->rope_beta_slow, c->head_dim, base, c->rope_original_max_position);
    if (c->rope_truncate) { low = floor(low); high = ceil(high); }
    if (low < 0) low = 0;
    if (high > c->head_dim - 1) high = c->head_dim - 1;
    if (low == high) high += 0.001; /* transformers avoids a zero-width ramp the same way */
    for (int i = 0; i < half; i++) {
        /* transformers computes pos_freqs = base ** (arange(0, dim, 2) / dim) in float32 */
        float pos_freq = powf((float)base, (float)(2 * i) / (float)c->head_dim);
        float extrap = 1.0f / pos_freq, interp = 1.0f / ((float)s * pos_freq);
        double ramp = (i - low) / (high - low);
        if (ramp < 0) ramp = 0;
        if (ramp > 1) ramp = 1;
        float extrap_w = 1.0f - (float)ramp;
        inv_freq[i] = interp * (1.0f - extrap_w) + extrap * extrap_w;
    }
    *attention_factor = s <= 1 ? 1.0f : (float)(0.1 * log(s) + 1.0);
}
