/* gptoss/synth.c — see synth.h. Plan the tensors, assign shards, write headers, then fill the data
 * with worker threads (each chunk has its own PRNG stream, so output never depends on scheduling). */
#include "common/gptoss/synth.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/safetensors.h"

#define SYNTH_CHUNK_BYTES (4u << 20) /* unit of work and of PRNG streams: 4 MiB of output */
#define SYNTH_MAX_SHARDS 64
#define CONVERTER_SHARD_CAP 4800000000ull

static const gptoss_synth_dims presets[] = {
    /* name   hidden layers heads kv  hd  experts top  inter  vocab */
    {"tiny",  64,    4,     8,    2,  64, 8,      4,   64,    201088},
    {"small", 256,   6,     16,   4,  64, 16,     4,   256,   201088},
    {"20b",   2880,  24,    64,   8,  64, 32,     4,   2880,  201088},
    /* the 20b's shapes with its first two layers only (one sliding, one full): what the 20b's decode kernels do,
     * at a size transformers checks in seconds (tests/gpu/parity) */
    {"20b-2l", 2880, 2,     64,   8,  64, 32,     4,   2880,  201088},
};

const gptoss_synth_dims *gptoss_synth_preset(const char *name) {
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}


uint16_t gptoss_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
    uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + rounding) >> 16);
}

/* ---- PRNG: splitmix64 to seed, xoshiro256** to draw. Integer-only, so identical everywhere. ---- */

typedef struct rng { uint64_t s[4]; } rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void rng_seed(rng *r, uint64_t seed, const char *name, uint64_t chunk) {
    uint64_t x = seed ^ fnv1a64(name) ^ (chunk * 0xd1342543de82ef95ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return result;
}

/* ~N(0,1): Irwin-Hall sum of four 16-bit uniforms (tails end at ±3.46; plenty for weights). */
static inline float rng_normal(rng *r) {
    uint64_t x = rng_next(r);
    uint32_t sum = (uint32_t)(x & 0xffff) + (uint32_t)((x >> 16) & 0xffff) + (uint32_t)((x >> 32) & 0xffff) + (uint32_t)(x >> 48);
    return ((float)sum - 131070.0f) * (1.0f / 37837.23f);
}

/* ---- the tensor plan ---- */

typedef enum fill_kind { FILL_NORMAL, FILL_SCALES, FILL_BYTES } fill_kind;

typedef struct tplan {
    char name[96];      /* Hugging Face name */
    char orig[96];      /* original OpenAI name: the converter's sort key */
    int sub;            /* order inside a fused original tensor (q, k, v) */
    llmr_st_dtype dtype;
    int ndim;
    uint64_t shape[4];
    uint64_t bytes;
    fill_kind kind;
    float mean, stddev; /* FILL_NORMAL */
    int scale_centre;   /* FILL_SCALES: bytes in centre-1 .. centre+1 */
    int shard;
    uint64_t offset;    /* within the shard's data section */
} tplan;

typedef struct plan {
    const gptoss_synth_dims *d;
    tplan *t;
    int n, cap;
    int n_shards;
    uint64_t shard_bytes[SYNTH_MAX_SHARDS];
} plan;

static tplan *add(plan *p, const char *name, const char *orig, int sub, llmr_st_dtype dt, int ndim, const uint64_t *shape) {
    if (p->n == p->cap) {
        int nc = p->cap ? 2 * p->cap : 64;
        tplan *nt = realloc(p->t, (size_t)nc * sizeof *nt);
        if (!nt) return NULL;
        p->t = nt;
        p->cap = nc;
    }
    tplan *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->orig, sizeof t->orig, "%s", orig);
    t->sub = sub;
    t->dtype = dt;
    t->ndim = ndim;
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = shape[i]; n *= shape[i]; }
    t->bytes = n * (dt == LLMR_ST_BF16 ? 2 : 1);
    return t;
}

static tplan *add_bf16(plan *p, const char *name, const char *orig, int sub, int ndim, const uint64_t *shape, float mean, float sd) {
    tplan *t = add(p, name, orig, sub, LLMR_ST_BF16, ndim, shape);
    if (t) { t->kind = FILL_NORMAL; t->mean = mean; t->stddev = sd; }
    return t;
}

/* E8M0 centre so that an MXFP4 matrix of fan-in k gives outputs of about `target` std for unit inputs.
 * Uniform random nibbles have an RMS value of sqrt(8.5625) = 2.926. */
static int scale_centre(int k, double target) {
    long c = 127 + lround(log2(target / (2.926 * sqrt((double)k))));
    return c < 118 ? 118 : c > 130 ? 130 : (int)c;
}

static int add_layer(plan *p, int L) {
    const gptoss_synth_dims *d = p->d;
    const uint64_t H = (uint64_t)d->hidden_size, E = (uint64_t)d->num_experts, I = (uint64_t)d->intermediate_size;
    const uint64_t Q = (uint64_t)d->num_heads * (uint64_t)d->head_dim, KV = (uint64_t)d->num_kv_heads * (uint64_t)d->head_dim;
    const float sH = 1.0f / sqrtf((float)H), sQ = 1.0f / sqrtf((float)Q);
    char n[96], o[96];
#define HF(s) (snprintf(n, sizeof n, "model.layers.%d.%s", L, s), n)
#define OR(s) (snprintf(o, sizeof o, "block.%d.%s", L, s), o)
#define SH(...) ((const uint64_t[]){__VA_ARGS__})
    int ok = add_bf16(p, HF("input_layernorm.weight"), OR("attn.norm.scale"), 0, 1, SH(H), 1.0f, 0.1f) &&
             add_bf16(p, HF("self_attn.q_proj.weight"), OR("attn.qkv.weight"), 0, 2, SH(Q, H), 0, sH) &&
             add_bf16(p, HF("self_attn.k_proj.weight"), OR("attn.qkv.weight"), 1, 2, SH(KV, H), 0, sH) &&
             add_bf16(p, HF("self_attn.v_proj.weight"), OR("attn.qkv.weight"), 2, 2, SH(KV, H), 0, sH) &&
             add_bf16(p, HF("self_attn.q_proj.bias"), OR("attn.qkv.bias"), 0, 1, SH(Q), 0, 0.1f) &&
             add_bf16(p, HF("self_attn.k_proj.bias"), OR("attn.qkv.bias"), 1, 1, SH(KV), 0, 0.1f) &&
             add_bf16(p, HF("self_attn.v_proj.bias"), OR("attn.qkv.bias"), 2, 1, SH(KV), 0, 0.1f) &&
             add_bf16(p, HF("self_attn.o_proj.weight"), OR("attn.out.weight"), 0, 2, SH(H, Q), 0, 0.5f * sQ) &&
             add_bf16(p, HF("self_attn.o_proj.bias"), OR("attn.out.bias"), 0, 1, SH(H), 0, 0.05f) &&
             add_bf16(p, HF("self_attn.sinks"), OR("attn.sinks"), 0, 1, SH((uint64_t)d->num_heads), 1.5f, 1.0f) &&
             add_bf16(p, HF("post_attention_layernorm.weight"), OR("mlp.norm.scale"), 0, 1, SH(H), 1.0f, 0.1f) &&
             /* router logits ~N(0, 3): the 4th/5th gap is then usually far above fp noise */
             add_bf16(p, HF("mlp.router.weight"), OR("mlp.gate.weight"), 0, 2, SH(E, H), 0, 3.0f * sH) &&
             add_bf16(p, HF("mlp.router.bias"), OR("mlp.gate.bias"), 0, 1, SH(E), 0, 0.5f) &&
             add_bf16(p, HF("mlp.experts.gate_up_proj_bias"), OR("mlp.mlp1_bias"), 0, 2, SH(E, 2 * I), 0, 0.1f) &&
             add_bf16(p, HF("mlp.experts.down_proj_bias"), OR("mlp.mlp2_bias"), 0, 2, SH(E, H), 0, 0.05f);
    if (!ok) return -1;
    tplan *t;
    if (!(t = add(p, HF("mlp.experts.gate_up_proj_blocks"), OR("mlp.mlp1_weight.blocks"), 0, LLMR_ST_U8, 4, SH(E, 2 * I, H / 32, 16)))) return -1;
    t->kind = FILL_BYTES;
    if (!(t = add(p, HF("mlp.experts.gate_up_proj_scales"), OR("mlp.mlp1_weight.scales"), 0, LLMR_ST_U8, 3, SH(E, 2 * I, H / 32)))) return -1;
    t->kind = FILL_SCALES;
    t->scale_centre = scale_centre((int)H, 1.0);
    if (!(t = add(p, HF("mlp.experts.down_proj_blocks"), OR("mlp.mlp2_weight.blocks"), 0, LLMR_ST_U8, 4, SH(E, H, I / 32, 16)))) return -1;
    t->kind = FILL_BYTES;
    if (!(t = add(p, HF("mlp.experts.down_proj_scales"), OR("mlp.mlp2_weight.scales"), 0, LLMR_ST_U8, 3, SH(E, H, I / 32)))) return -1;
    t->kind = FILL_SCALES;
    t->scale_centre = scale_centre((int)I, 0.5);
#undef HF
#undef OR
    return 0;
}

static int cmp_orig(const void *a, const void *b) {
    const tplan *x = a, *y = b;
    int c = strcmp(x->orig, y->orig);
    return c ? c : x->sub - y->sub;
}

/* Builds the tensor list in converter order and assigns shards under cap (0 = preset default). */
static int plan_build(plan *p, const gptoss_synth_dims *d, uint64_t cap, char *err, size_t es) {
    memset(p, 0, sizeof *p);
    p->d = d;
    const uint64_t H = (uint64_t)d->hidden_size, V = (uint64_t)d->vocab_size;
    for (int L = 0; L < d->num_layers; L++)
        if (add_layer(p, L)) return llmr_errf(err, es, "out of memory planning tensors");
    if (!add_bf16(p, "model.embed_tokens.weight", "embedding.weight", 0, 2, SH(V, H), 0, 1.0f) ||
        !add_bf16(p, "model.norm.weight", "norm.scale", 0, 1, SH(H), 1.0f, 0.1f) ||
        !add_bf16(p, "lm_head.weight", "unembedding.weight", 0, 2, SH(V, H), 0, 2.0f / sqrtf((float)H)))
        return llmr_errf(err, es, "out of memory planning tensors");
    qsort(p->t, (size_t)p->n, sizeof *p->t, cmp_orig);
    if (cap == 0) {
        if (strcmp(d->name, "20b") == 0) cap = CONVERTER_SHARD_CAP;
        else {
            uint64_t layer_bytes = 0;
            for (int i = 0; i < p->n; i++)
                if (strncmp(p->t[i].orig, "block.", 6) == 0) layer_bytes += p->t[i].bytes;
            cap = layer_bytes * 3 / 8; /* not a whole number of layers: one straddles two shards */
        }
    }
    /* One original tensor (a group of equal orig names) never straddles shards. */
    uint64_t cur = 0;
    int shard = 0;
    for (int i = 0; i < p->n;) {
        int j = i;
        uint64_t g = 0;
        while (j < p->n && strcmp(p->t[j].orig, p->t[i].orig) == 0) g += p->t[j++].bytes;
        if (cur > 0 && cur + g > cap) {
            p->shard_bytes[shard] = cur;
            if (++shard >= SYNTH_MAX_SHARDS) return llmr_errf(err, es, "shard cap %llu bytes gives more than %d shards", (unsigned long long)cap, SYNTH_MAX_SHARDS);
            cur = 0;
        }
        for (; i < j; i++) {
            p->t[i].shard = shard;
            p->t[i].offset = cur;
            cur += p->t[i].bytes;
        }
    }
    p->shard_bytes[shard] = cur;
    p->n_shards = shard + 1;
    if (p->n_shards < 2) return llmr_errf(err, es, "shard cap %llu bytes leaves a single shard; the layout needs at least two", (unsigned long long)cap);
    return 0;
}
#undef SH

static void shard_file_name(const plan *p, int i, char *buf, size_t n) {
    snprintf(buf, n, "model-%05d-of-%05d.safetensors", i, p->n_shards - 1);
}

/* ---- files ---- */

static int write_all(int fd, const void *buf, size_t n, uint64_t off) {
    const char *b = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int write_text(const char *dir, const char *name, const char *text, char *err, size_t es) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return llmr_errf(err, es, "%s: cannot create: %s", path, strerror(errno));
    int rc = write_all(fd, text, strlen(text), 0);
    if (close(fd) || rc) return llmr_errf(err, es, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

static int write_json(const char *dir, const char *name, json_t *j, char *err, size_t es) {
    if (!j) return llmr_errf(err, es, "%s: out of memory", name);
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!s) return llmr_errf(err, es, "%s: out of memory", name);
    size_t n = strlen(s);
    char *t = malloc(n + 2);
    if (!t) { free(s); return llmr_errf(err, es, "%s: out of memory", name); }
    memcpy(t, s, n);
    t[n] = '\n';
    t[n + 1] = 0;
    free(s);
    int rc = write_text(dir, name, t, err, es);
    free(t);
    return rc;
}

/* Copies src to dir/name. Returns 1 if copied, 0 if src does not exist, -1 on error. */
static int copy_file(const char *src, const char *dir, const char *name, char *err, size_t es) {
    int in = open(src, O_RDONLY);
    if (in < 0) return errno == ENOENT ? 0 : llmr_errf(err, es, "%s: cannot open: %s", src, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) { close(in); return llmr_errf(err, es, "%s: cannot create: %s", path, strerror(errno)); }
    char buf[1 << 16];
    uint64_t off = 0;
    int rc = 1;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { rc = llmr_errf(err, es, "%s: read failed: %s", src, strerror(errno)); break; }
        if (r == 0) break;
        if (write_all(out, buf, (size_t)r, off)) { rc = llmr_errf(err, es, "%s: write failed: %s", path, strerror(errno)); break; }
        off += (uint64_t)r;
    }
    close(in);
    if (close(out) && rc == 1) rc = llmr_errf(err, es, "%s: close failed: %s", path, strerror(errno));
    return rc;
}

static json_t *config_json(const gptoss_synth_dims *d) {
    json_t *c = json_object(), *lt = json_array();
    for (int i = 0; i < d->num_layers; i++) json_array_append_new(lt, json_string(i % 2 ? "full_attention" : "sliding_attention"));
    json_t *mods = json_pack("[ssss]", "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head");
    json_t *rope = json_pack("{s:f, s:f, s:f, s:i, s:s, s:b}", "beta_fast", 32.0, "beta_slow", 1.0, "factor", 32.0,
                             "original_max_position_embeddings", 4096, "rope_type", "yarn", "truncate", 0);
    json_object_set_new(c, "architectures", json_pack("[s]", "GptOssForCausalLM"));
    json_object_set_new(c, "attention_bias", json_true());
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    json_object_set_new(c, "eos_token_id", json_integer(200002));
    json_object_set_new(c, "experts_per_token", json_integer(d->experts_per_token));
    json_object_set_new(c, "head_dim", json_integer(d->head_dim));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "hidden_size", json_integer(d->hidden_size));
    json_object_set_new(c, "initial_context_length", json_integer(4096));
    json_object_set_new(c, "initializer_range", json_real(0.02));
    json_object_set_new(c, "intermediate_size", json_integer(d->intermediate_size));
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "max_position_embeddings", json_integer(131072));
    json_object_set_new(c, "model_type", json_string("gpt_oss"));
    json_object_set_new(c, "num_attention_heads", json_integer(d->num_heads));
    json_object_set_new(c, "num_experts_per_tok", json_integer(d->experts_per_token));
    json_object_set_new(c, "num_hidden_layers", json_integer(d->num_layers));
    json_object_set_new(c, "num_key_value_heads", json_integer(d->num_kv_heads));
    json_object_set_new(c, "num_local_experts", json_integer(d->num_experts));
    json_object_set_new(c, "output_router_logits", json_false());
    json_object_set_new(c, "pad_token_id", json_integer(199999));
    json_object_set_new(c, "quantization_config", json_pack("{s:o, s:s}", "modules_to_not_convert", mods, "quant_method", "mxfp4"));
    json_object_set_new(c, "rms_norm_eps", json_real(1e-05));
    json_object_set_new(c, "rope_scaling", rope);
    json_object_set_new(c, "rope_theta", json_integer(150000));
    json_object_set_new(c, "router_aux_loss_coef", json_real(0.9));
    json_object_set_new(c, "sliding_window", json_integer(128));
    json_object_set_new(c, "swiglu_limit", json_real(7.0));
    json_object_set_new(c, "tie_word_embeddings", json_false());
    json_object_set_new(c, "transformers_version", json_string("4.55.0.dev0"));
    json_object_set_new(c, "use_cache", json_true());
    json_object_set_new(c, "vocab_size", json_integer(d->vocab_size));
    return c;
}

static json_t *generation_config_json(void) {
    return json_pack("{s:i, s:b, s:[iii], s:i, s:s}", "bos_token_id", 199998, "do_sample", 1, "eos_token_id", 200002, 199999,
                     200012, "pad_token_id", 199999, "transformers_version", "4.55.0.dev0");
}

static json_t *index_json(const plan *p, uint64_t total) {
    json_t *wm = json_object();
    char fn[64];
    for (int i = 0; i < p->n; i++) {
        shard_file_name(p, p->t[i].shard, fn, sizeof fn);
        json_object_set_new(wm, p->t[i].name, json_string(fn));
    }
    return json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", wm);
}

/* The safetensors header of shard s, padded with spaces to a multiple of 8 as safetensors does. */
static char *shard_header(const plan *p, int s, size_t *len_out) {
    json_t *h = json_object();
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    for (int i = 0; i < p->n; i++) {
        const tplan *t = &p->t[i];
        if (t->shard != s) continue;
        json_t *shape = json_array();
        for (int k = 0; k < t->ndim; k++) json_array_append_new(shape, json_integer((json_int_t)t->shape[k]));
        json_object_set_new(h, t->name, json_pack("{s:s, s:o, s:[II]}", "dtype", llmr_st_dtype_name(t->dtype), "shape", shape,
                                                  "data_offsets", (json_int_t)t->offset, (json_int_t)(t->offset + t->bytes)));
    }
    char *s_json = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!s_json) return NULL;
    size_t n = strlen(s_json), padded = (n + 7) & ~(size_t)7;
    char *out = malloc(8 + padded);
    if (!out) { free(s_json); return NULL; }
    for (int i = 0; i < 8; i++) out[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(out + 8, s_json, n);
    memset(out + 8 + n, ' ', padded - n);
    free(s_json);
    *len_out = 8 + padded;
    return out;
}

/* ---- parallel fill ---- */

typedef struct job { int tensor; uint64_t chunk; } job;

typedef struct filler {
    const plan *p;
    uint64_t seed;
    const int *fds;
    const uint64_t *data_off;   /* per shard: file offset of the data section */
    job *jobs;
    size_t n_jobs;
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t mu;
    char err[512];
} filler;

static void fill_chunk(const tplan *t, uint64_t seed, uint64_t chunk, uint8_t *buf, size_t n) {
    rng r;
    rng_seed(&r, seed, t->name, chunk);
    if (t->kind == FILL_NORMAL) {
        for (size_t i = 0; i + 1 < n; i += 2) {
            uint16_t b = gptoss_f32_to_bf16(t->mean + t->stddev * rng_normal(&r));
            buf[i] = (uint8_t)(b & 0xff);
            buf[i + 1] = (uint8_t)(b >> 8);
        }
    } else if (t->kind == FILL_SCALES) {
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(t->scale_centre - 1 + (int)(((rng_next(&r) >> 32) * 3) >> 32));
    } else {
        for (size_t i = 0; i < n; i += 8) {
            uint64_t x = rng_next(&r);
            for (size_t k = 0; k < 8 && i + k < n; k++) buf[i + k] = (uint8_t)(x >> (8 * k));
        }
    }
}

static void *fill_worker(void *arg) {
    filler *f = arg;
    uint8_t *buf = malloc(SYNTH_CHUNK_BYTES);
    if (!buf) {
        pthread_mutex_lock(&f->mu);
        if (!atomic_exchange(&f->failed, 1)) snprintf(f->err, sizeof f->err, "out of memory for a %u-byte buffer", SYNTH_CHUNK_BYTES);
        pthread_mutex_unlock(&f->mu);
        return NULL;
    }
    for (;;) {
        size_t j = atomic_fetch_add(&f->next, 1);
        if (j >= f->n_jobs || atomic_load(&f->failed)) break;
        const tplan *t = &f->p->t[f->jobs[j].tensor];
        uint64_t begin = f->jobs[j].chunk * SYNTH_CHUNK_BYTES;
        size_t n = (size_t)(t->bytes - begin < SYNTH_CHUNK_BYTES ? t->bytes - begin : SYNTH_CHUNK_BYTES);
        fill_chunk(t, f->seed, f->jobs[j].chunk, buf, n);
        if (write_all(f->fds[t->shard], buf, n, f->data_off[t->shard] + t->offset + begin)) {
            pthread_mutex_lock(&f->mu);
            if (!atomic_exchange(&f->failed, 1)) snprintf(f->err, sizeof f->err, "shard %d: write of %s failed: %s", t->shard, t->name, strerror(errno));
            pthread_mutex_unlock(&f->mu);
            break;
        }
    }
    free(buf);
    return NULL;
}

static int fill_all(const plan *p, uint64_t seed, const int *fds, const uint64_t *data_off, int threads, char *err, size_t es) {
    size_t n_jobs = 0;
    for (int i = 0; i < p->n; i++) n_jobs += (size_t)((p->t[i].bytes + SYNTH_CHUNK_BYTES - 1) / SYNTH_CHUNK_BYTES);
    filler f = {.p = p, .seed = seed, .fds = fds, .data_off = data_off, .n_jobs = n_jobs};
    f.jobs = malloc((n_jobs ? n_jobs : 1) * sizeof *f.jobs);
    if (!f.jobs) return llmr_errf(err, es, "out of memory for %zu jobs", n_jobs);
    /* Largest tensors first would balance better, but plain order keeps writes mostly sequential. */
    size_t k = 0;
    for (int i = 0; i < p->n; i++)
        for (uint64_t c = 0; c * SYNTH_CHUNK_BYTES < p->t[i].bytes; c++) f.jobs[k++] = (job){i, c};
    atomic_init(&f.next, 0);
    atomic_init(&f.failed, 0);
    pthread_mutex_init(&f.mu, NULL);
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    pthread_t tid[256];
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, fill_worker, &f)) break;
    if (started == 0) fill_worker(&f);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&f.mu);
    free(f.jobs);
    if (atomic_load(&f.failed)) return llmr_errf(err, es, "%s", f.err);
    return 0;
}

static int write_shards(const plan *p, const gptoss_synth_options *o, char *err, size_t es) {
    int fds[SYNTH_MAX_SHARDS];
    uint64_t data_off[SYNTH_MAX_SHARDS];
    int opened = 0, rc = -1;
    char path[4096], fn[64];
    for (; opened < p->n_shards; opened++) {
        shard_file_name(p, opened, fn, sizeof fn);
        snprintf(path, sizeof path, "%s/%s", o->out_dir, fn);
        size_t hlen = 0;
        char *hdr = shard_header(p, opened, &hlen);
        if (!hdr) { llmr_errf(err, es, "%s: out of memory for the header", path); goto out; }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { free(hdr); llmr_errf(err, es, "%s: cannot create: %s", path, strerror(errno)); goto out; }
        fds[opened] = fd;
        data_off[opened] = hlen;
        int bad = write_all(fd, hdr, hlen, 0) || ftruncate(fd, (off_t)(hlen + p->shard_bytes[opened]));
        free(hdr);
        if (bad) { opened++; llmr_errf(err, es, "%s: cannot write %llu bytes: %s", path, (unsigned long long)(hlen + p->shard_bytes[opened - 1]), strerror(errno)); goto out; }
    }
    rc = fill_all(p, o->seed, fds, data_off, o->threads, err, es);
out:
    for (int i = 0; i < opened; i++)
        if (close(fds[i]) && rc == 0) rc = llmr_errf(err, es, "shard %d: close failed: %s", i, strerror(errno));
    return rc;
}

int gptoss_synth_write(const gptoss_synth_options *o, gptoss_synth_report *rep, char *err, size_t es) {
    if (!o) return llmr_errf(err, es, "no options given");
    if (!o->dry_run && (!o->out_dir || !*o->out_dir)) return llmr_errf(err, es, "no output folder given");
    const gptoss_synth_dims *d = gptoss_synth_preset(o->preset);
    if (!d) return llmr_errf(err, es, "unknown preset '%s' (tiny, small, 20b-2l or 20b)", o->preset ? o->preset : "(null)");
    plan p;
    int rc = -1;
    if (plan_build(&p, d, o->shard_cap, err, es)) goto out;
    uint64_t total = 0;
    for (int i = 0; i < p.n; i++) total += p.t[i].bytes;
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->n_shards = p.n_shards;
        rep->n_tensors = p.n;
        rep->total_size = total;
        for (int i = 0; i < p.n_shards && i < 64; i++) rep->shard_payload[i] = p.shard_bytes[i];
    }
    if (o->dry_run) { rc = 0; goto out; }
    if (mkdir(o->out_dir, 0755) && errno != EEXIST) { llmr_errf(err, es, "%s: cannot create folder: %s", o->out_dir, strerror(errno)); goto out; }
    if (write_json(o->out_dir, "config.json", config_json(d), err, es) ||
        write_json(o->out_dir, "generation_config.json", generation_config_json(), err, es) ||
        write_json(o->out_dir, "model.safetensors.index.json", index_json(&p, total), err, es) ||
        write_shards(&p, o, err, es))
        goto out;
    if (o->chat_template_path) {
        int c = copy_file(o->chat_template_path, o->out_dir, "chat_template.jinja", err, es);
        if (c < 0) goto out;
        if (c == 0) { llmr_errf(err, es, "%s: chat template not found", o->chat_template_path); goto out; }
        if (rep) rep->template_copied = 1;
    }
    if (o->tokenizer_dir) {
        char src[4096];
        snprintf(src, sizeof src, "%s/tokenizer.json", o->tokenizer_dir);
        int c = copy_file(src, o->out_dir, "tokenizer.json", err, es);
        if (c < 0) goto out;
        if (c == 1) {
            snprintf(src, sizeof src, "%s/tokenizer_config.json", o->tokenizer_dir);
            if (copy_file(src, o->out_dir, "tokenizer_config.json", err, es) < 0) goto out;
            if (rep) rep->tokenizer_copied = 1;
        }
    }
    rc = 0;
out:
    free(p.t);
    return rc;
}
