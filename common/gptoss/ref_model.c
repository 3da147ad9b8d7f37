/* gptoss/ref_model.c — see ref_model.h. Read it like llama2.c's run.c: weights, state, forward. */
#include "common/gptoss/ref_model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checkpoint.h"
#include "common/gptoss/ref_math.h"
#include "common/gptoss/synth.h" /* bf16 helpers */
#include "llmr_engine.h"

/* ---------------------------------------------------------------------------------------------- */
#define REF_MAX_HALF_DIM 128 /* head_dim <= 256 */

/* weights                                                                                         */

typedef struct layer_weights {
    float *attn_norm;   /* [H] */
    float *wq, *bq;     /* [NH*D, H], [NH*D] */
    float *wk, *bk;     /* [KV*D, H], [KV*D] */
    float *wv, *bv;     /* [KV*D, H], [KV*D] */
    float *wo, *bo;     /* [H, NH*D], [H] */
    float *sinks;       /* [NH] */
    float *mlp_norm;    /* [H] */
    float *wr, *br;     /* router [E, H], [E] */
    float *w_gu, *b_gu; /* experts gate/up [E, 2I, H] (row 2i = gate i, row 2i+1 = up i), [E, 2I] */
    float *w_dn, *b_dn; /* experts down [E, H, I], [E, H] */
} layer_weights;

struct gptoss_ref_model {
    gptoss_config c;
    llmr_checkpoint *ck;     /* owns the mmaps the embedding table points into */
    const uint16_t *embed;   /* [V, H] bf16, mmapped */
    float *final_norm;       /* [H] */
    float *lm_head;          /* [V, H] */
    layer_weights *layers;   /* [L] */
    float inv_freq[REF_MAX_HALF_DIM]; /* [D/2] YaRN inverse frequencies */
    float attn_factor;       /* YaRN attention factor: multiplies cos and sin */
    int threads;
    uint64_t ram_bytes;
};

static int fail(int status, char *err, size_t es, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int status, char *err, size_t es, const char *fmt, ...) {
    if (err && es) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, es, fmt, ap);
        va_end(ap);
    }
    return status;
}

uint64_t gptoss_ref_weight_bytes(const gptoss_config *c) {
    uint64_t H = (uint64_t)c->hidden_size, NH = (uint64_t)c->num_heads, KV = (uint64_t)c->num_kv_heads;
    uint64_t D = (uint64_t)c->head_dim, E = (uint64_t)c->num_experts, I = (uint64_t)c->intermediate_size;
    uint64_t per_layer = 2 * H + (NH * D) * (H + 1) + 2 * (KV * D) * (H + 1) + H * (NH * D + 1) + NH + E * (H + 1) +
                         E * 2 * I * (H + 1) + E * H * (I + 1);
    return 4 * ((uint64_t)c->num_layers * per_layer + H + (uint64_t)c->vocab_size * H);
}

static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (uint64_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : UINT64_MAX;
}

/* Loader context: one checkpoint, a running byte count, the first error. */
typedef struct loader {
    gptoss_ref_model *m;
    char *err;
    size_t es;
    int status;
} loader;

static const void *tensor(loader *ld, const char *name, llmr_st_dtype dt, int ndim, const uint64_t *shape) {
    if (ld->status != LLMR_ENGINE_OK) return NULL;
    if (!llmr_checkpoint_expect(ld->m->ck, name, dt, ndim, shape, ld->err, ld->es)) {
        ld->status = LLMR_ENGINE_MODEL_CORRUPT;
        return NULL;
    }
    char e2[512];
    const void *p = llmr_checkpoint_data(ld->m->ck, name, NULL, e2, sizeof e2);
    if (!p) ld->status = fail(LLMR_ENGINE_MODEL_CORRUPT, ld->err, ld->es, "%s: %s", name, e2);
    return p;
}

static float *alloc_f32(loader *ld, uint64_t n, const char *what) {
    if (ld->status != LLMR_ENGINE_OK) return NULL;
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) ld->status = fail(LLMR_ENGINE_OOM_RAM, ld->err, ld->es, "out of memory: %llu bytes for %s", (unsigned long long)(n * 4), what);
    else ld->m->ram_bytes += n * 4;
    return p;
}

/* A BF16 tensor of the given shape, converted to a new fp32 array. */
static float *bf16_tensor(loader *ld, const char *name, int ndim, const uint64_t *shape) {
    const uint16_t *src = tensor(ld, name, LLMR_ST_BF16, ndim, shape);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *dst = src ? alloc_f32(ld, n, name) : NULL;
    if (!dst) return NULL;
    for (uint64_t i = 0; i < n; i++) dst[i] = gptoss_bf16_to_f32(src[i]);
    return dst;
}

/* An MXFP4 expert stack (NAME_blocks [E, rows, cols/32, 16] + NAME_scales [E, rows, cols/32]) dequantized
 * to fp32 [E, rows, cols]. */
static float *mxfp4_tensor(loader *ld, const char *prefix, uint64_t E, uint64_t rows, uint64_t cols) {
    char bn[160], sn[160];
    snprintf(bn, sizeof bn, "%s_blocks", prefix);
    snprintf(sn, sizeof sn, "%s_scales", prefix);
    const uint8_t *blocks = tensor(ld, bn, LLMR_ST_U8, 4, (const uint64_t[]){E, rows, cols / 32, 16});
    const uint8_t *scales = tensor(ld, sn, LLMR_ST_U8, 3, (const uint64_t[]){E, rows, cols / 32});
    float *dst = blocks && scales ? alloc_f32(ld, E * rows * cols, prefix) : NULL;
    if (!dst) return NULL;
    for (uint64_t e = 0; e < E; e++)
        gptoss_mxfp4_dequant(dst + e * rows * cols, blocks + e * rows * (cols / 2), scales + e * rows * (cols / 32), (int)rows, (int)cols);
    return dst;
}

static void load_layer(loader *ld, int l, layer_weights *w) {
    const gptoss_config *c = &ld->m->c;
    const uint64_t H = (uint64_t)c->hidden_size, Q = (uint64_t)(c->num_heads * c->head_dim);
    const uint64_t KV = (uint64_t)(c->num_kv_heads * c->head_dim), E = (uint64_t)c->num_experts, I = (uint64_t)c->intermediate_size;
    char n[160];
#define NAME(s) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), n)
#define SH(...) ((const uint64_t[]){__VA_ARGS__})
    w->attn_norm = bf16_tensor(ld, NAME("input_layernorm.weight"), 1, SH(H));
    w->wq = bf16_tensor(ld, NAME("self_attn.q_proj.weight"), 2, SH(Q, H));
    w->bq = bf16_tensor(ld, NAME("self_attn.q_proj.bias"), 1, SH(Q));
    w->wk = bf16_tensor(ld, NAME("self_attn.k_proj.weight"), 2, SH(KV, H));
    w->bk = bf16_tensor(ld, NAME("self_attn.k_proj.bias"), 1, SH(KV));
    w->wv = bf16_tensor(ld, NAME("self_attn.v_proj.weight"), 2, SH(KV, H));
    w->bv = bf16_tensor(ld, NAME("self_attn.v_proj.bias"), 1, SH(KV));
    w->wo = bf16_tensor(ld, NAME("self_attn.o_proj.weight"), 2, SH(H, Q));
    w->bo = bf16_tensor(ld, NAME("self_attn.o_proj.bias"), 1, SH(H));
    w->sinks = bf16_tensor(ld, NAME("self_attn.sinks"), 1, SH((uint64_t)c->num_heads));
    w->mlp_norm = bf16_tensor(ld, NAME("post_attention_layernorm.weight"), 1, SH(H));
    w->wr = bf16_tensor(ld, NAME("mlp.router.weight"), 2, SH(E, H));
    w->br = bf16_tensor(ld, NAME("mlp.router.bias"), 1, SH(E));
    w->b_gu = bf16_tensor(ld, NAME("mlp.experts.gate_up_proj_bias"), 2, SH(E, 2 * I));
    w->b_dn = bf16_tensor(ld, NAME("mlp.experts.down_proj_bias"), 2, SH(E, H));
    w->w_gu = mxfp4_tensor(ld, NAME("mlp.experts.gate_up_proj"), E, 2 * I, H);
    w->w_dn = mxfp4_tensor(ld, NAME("mlp.experts.down_proj"), E, H, I);
#undef NAME
#undef SH
}

static void free_layer(layer_weights *w) {
    float *all[] = {w->attn_norm, w->wq, w->bq, w->wk, w->bk, w->wv, w->bv, w->wo, w->bo, w->sinks,
                    w->mlp_norm, w->wr, w->br, w->w_gu, w->b_gu, w->w_dn, w->b_dn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

void gptoss_ref_free(gptoss_ref_model *m) {
    if (!m) return;
    for (int l = 0; m->layers && l < m->c.num_layers; l++) free_layer(&m->layers[l]);
    free(m->layers);
    free(m->final_norm);
    free(m->lm_head);
    llmr_checkpoint_destroy(m->ck);
    free(m);
}

/* Structural limits of this implementation (beyond what gptoss_config_parse already checks). */
static int check_config(const gptoss_config *c, char *err, size_t es) {
    if (c->head_dim / 2 > REF_MAX_HALF_DIM || c->num_experts > 256 || c->experts_per_token > 16 || c->vocab_size <= 0 ||
        c->hidden_size <= 0 || c->num_heads <= 0 || c->num_heads > 256)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es,
                    "config.json: head_dim %d, num_local_experts %d, num_experts_per_tok %d, vocab %d: beyond this reference's "
                    "limits (head_dim <= 256, experts <= 256, top-k <= 16, heads <= 256)", c->head_dim, c->num_experts, c->experts_per_token,
                    c->vocab_size);
    if (c->rope_factor <= 0 || c->rope_theta <= 0) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: rope factor/theta must be positive");
    return LLMR_ENGINE_OK;
}

int gptoss_ref_load(const char *dir, int threads, uint64_t ram_limit, gptoss_ref_model **out, char *err, size_t es) {
    gptoss_ref_model *m = calloc(1, sizeof *m);
    if (!m) return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of memory");
    int st;
    if (gptoss_config_load(dir, &m->c, err, es)) {
        free(m);
        return LLMR_ENGINE_LOAD_FAILED;
    }
    if ((st = check_config(&m->c, err, es)) != LLMR_ENGINE_OK) { free(m); return st; }
    uint64_t need = gptoss_ref_weight_bytes(&m->c), avail = ram_limit ? ram_limit : mem_available();
    if (need > avail) {
        free(m);
        return fail(LLMR_ENGINE_OOM_RAM, err, es, "%s: the fp32 reference needs %llu bytes of RAM for the weights, %llu available "
                    "(it is meant for small synthetic checkpoints)", dir, (unsigned long long)need, (unsigned long long)avail);
    }
    if (llmr_checkpoint_open(dir, &m->ck, err, es)) {
        free(m);
        return LLMR_ENGINE_LOAD_FAILED;
    }
    m->threads = threads > 0 ? threads : 1;
    gptoss_yarn_inv_freq(&m->c, m->inv_freq, &m->attn_factor);
    loader ld = {m, err, es, LLMR_ENGINE_OK};
    const uint64_t H = (uint64_t)m->c.hidden_size, V = (uint64_t)m->c.vocab_size;
    m->embed = tensor(&ld, "model.embed_tokens.weight", LLMR_ST_BF16, 2, (const uint64_t[]){V, H});
    m->final_norm = bf16_tensor(&ld, "model.norm.weight", 1, (const uint64_t[]){H});
    m->lm_head = bf16_tensor(&ld, "lm_head.weight", 2, (const uint64_t[]){V, H});
    m->layers = ld.status == LLMR_ENGINE_OK ? calloc((size_t)m->c.num_layers, sizeof *m->layers) : NULL;
    if (!m->layers && ld.status == LLMR_ENGINE_OK) ld.status = fail(LLMR_ENGINE_OOM_RAM, err, es, "out of memory");
    for (int l = 0; l < m->c.num_layers && ld.status == LLMR_ENGINE_OK; l++) load_layer(&ld, l, &m->layers[l]);
    if (ld.status != LLMR_ENGINE_OK) {
        gptoss_ref_free(m);
        return ld.status;
    }
    *out = m;
    return LLMR_ENGINE_OK;
}

const gptoss_config *gptoss_ref_config(const gptoss_ref_model *m) { return &m->c; }
uint64_t gptoss_ref_ram_bytes(const gptoss_ref_model *m) { return m->ram_bytes; }

/* ---------------------------------------------------------------------------------------------- */
/* state: KV cache + scratch                                                                        */

struct gptoss_ref_state {
    const gptoss_ref_model *m;
    int n, cap, max_context; /* tokens held, tokens the cache has room for, the limit */
    float **k, **v;          /* per layer [cap, KV*D] */
    float *x, *xn;           /* [H] residual stream, normed copy */
    float *q, *kk, *vv;      /* [NH*D], [KV*D], [KV*D] */
    float *att;              /* [NH*D] attention output per head */
    float *tmp;              /* [H] projection output */
    float *moe;              /* [H] */
    float *gu;               /* [2I] */
    float *act;              /* [I] */
    float *rl;               /* [E] router logits */
    float *scores;           /* [heads per KV head, cap] attention scores */
    uint64_t bytes;
};

void gptoss_ref_state_destroy(gptoss_ref_state *s) {
    if (!s) return;
    for (int l = 0; l < s->m->c.num_layers; l++) {
        if (s->k) free(s->k[l]);
        if (s->v) free(s->v[l]);
    }
    free(s->k); free(s->v); free(s->x); free(s->xn); free(s->q); free(s->kk); free(s->vv);
    free(s->att); free(s->tmp); free(s->moe); free(s->gu); free(s->act); free(s->rl); free(s->scores);
    free(s);
}

gptoss_ref_state *gptoss_ref_state_create(const gptoss_ref_model *m, int max_context) {
    const gptoss_config *c = &m->c;
    gptoss_ref_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->m = m;
    s->max_context = max_context > 0 ? max_context : 1;
    const size_t H = (size_t)c->hidden_size, Q = (size_t)(c->num_heads * c->head_dim), KV = (size_t)(c->num_kv_heads * c->head_dim);
    const size_t I = (size_t)c->intermediate_size, L = (size_t)c->num_layers;
    s->k = calloc(L, sizeof *s->k);
    s->v = calloc(L, sizeof *s->v);
    s->x = malloc(H * 4); s->xn = malloc(H * 4); s->tmp = malloc(H * 4); s->moe = malloc(H * 4);
    s->q = malloc(Q * 4); s->att = malloc(Q * 4); s->kk = malloc(KV * 4); s->vv = malloc(KV * 4);
    s->gu = malloc(2 * I * 4); s->act = malloc(I * 4); s->rl = malloc((size_t)c->num_experts * 4);
    s->bytes = (4 * H + 2 * Q + 2 * KV + 3 * I + (size_t)c->num_experts) * 4;
    if (!s->k || !s->v || !s->x || !s->xn || !s->tmp || !s->moe || !s->q || !s->att || !s->kk || !s->vv || !s->gu || !s->act || !s->rl) {
        gptoss_ref_state_destroy(s);
        return NULL;
    }
    return s;
}

int gptoss_ref_state_len(const gptoss_ref_state *s) { return s->n; }
int gptoss_ref_state_capacity(const gptoss_ref_state *s) { return s->max_context; }
uint64_t gptoss_ref_state_bytes(const gptoss_ref_state *s) { return s->bytes; }

/* Makes room for one more token (doubling, up to max_context). */
static int grow(gptoss_ref_state *s) {
    if (s->n < s->cap) return 0;
    int ncap = s->cap ? 2 * s->cap : 64;
    if (ncap > s->max_context) ncap = s->max_context;
    const size_t KV = (size_t)(s->m->c.num_kv_heads * s->m->c.head_dim);
    for (int l = 0; l < s->m->c.num_layers; l++) {
        float *nk = realloc(s->k[l], (size_t)ncap * KV * 4);
        if (!nk) return -1;
        s->k[l] = nk;
        float *nv = realloc(s->v[l], (size_t)ncap * KV * 4);
        if (!nv) return -1;
        s->v[l] = nv;
    }
    const size_t group = (size_t)(s->m->c.num_heads / s->m->c.num_kv_heads);
    float *ns = realloc(s->scores, group * (size_t)ncap * 4);
    if (!ns) return -1;
    s->scores = ns;
    s->bytes += (uint64_t)(ncap - s->cap) * (2 * KV * (size_t)s->m->c.num_layers + group) * 4;
    s->cap = ncap;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* forward                                                                                          */

/* x += attention(RMSNorm(x)) for the token at position pos. */
static void attention_block(const gptoss_ref_model *m, gptoss_ref_state *s, int l, int pos, gptoss_ref_trace *tr) {
    const gptoss_config *c = &m->c;
    const layer_weights *w = &m->layers[l];
    const int H = c->hidden_size, D = c->head_dim, NH = c->num_heads, KVH = c->num_kv_heads;
    const int Q = NH * D, KV = KVH * D;
    gptoss_rmsnorm(s->xn, s->x, w->attn_norm, H, c->rms_norm_eps);
    gptoss_matvec(s->q, w->wq, w->bq, s->xn, Q, H, 1);
    gptoss_matvec(s->kk, w->wk, w->bk, s->xn, KV, H, 1);
    gptoss_matvec(s->vv, w->wv, w->bv, s->xn, KV, H, 1);
    for (int h = 0; h < NH; h++) gptoss_rope(s->q + h * D, D, pos, m->inv_freq, m->attn_factor);
    for (int h = 0; h < KVH; h++) gptoss_rope(s->kk + h * D, D, pos, m->inv_freq, m->attn_factor);
    memcpy(s->k[l] + (size_t)pos * KV, s->kk, (size_t)KV * 4);
    memcpy(s->v[l] + (size_t)pos * KV, s->vv, (size_t)KV * 4);
    /* sliding layers: the query at pos sees keys pos-window+1 .. pos */
    int first = c->layer_sliding[l] && pos + 1 > c->sliding_window ? pos + 1 - c->sliding_window : 0;
    float scale = 1.0f / sqrtf((float)D);
    int group = NH / KVH; /* GQA: query heads g*group .. g*group+group-1 read KV head g */
    float mass[256];
    for (int g = 0; g < KVH; g++) {
        gptoss_attend_group(s->att + g * group * D, s->q + g * group * D, group, s->k[l] + g * D, s->v[l] + g * D, pos + 1, first, D,
                            (size_t)KV, scale, w->sinks + g * group, s->scores, mass);
        if (tr && tr->attn_sink_mass) memcpy(tr->attn_sink_mass + l * NH + g * group, mass, (size_t)group * sizeof *mass);
    }
    gptoss_matvec(s->tmp, w->wo, w->bo, s->att, H, Q, 1);
    for (int i = 0; i < H; i++) s->x[i] += s->tmp[i];
}

/* x += MoE(RMSNorm(x)): top-k experts, softmax over their k logits, clamped SwiGLU experts. */
static void moe_block(const gptoss_ref_model *m, gptoss_ref_state *s, int l, gptoss_ref_trace *tr) {
    const gptoss_config *c = &m->c;
    const layer_weights *w = &m->layers[l];
    const int H = c->hidden_size, E = c->num_experts, K = c->experts_per_token, I = c->intermediate_size;
    gptoss_rmsnorm(s->xn, s->x, w->mlp_norm, H, c->rms_norm_eps);
    gptoss_matvec(s->rl, w->wr, w->br, s->xn, E, H, 1);
    int idx[16];
    float wt[16];
    gptoss_route_topk(s->rl, E, K, idx, wt);
    if (tr && tr->router_logits) memcpy(tr->router_logits + (size_t)l * E, s->rl, (size_t)E * 4);
    if (tr && tr->experts) memcpy(tr->experts + (size_t)l * K, idx, (size_t)K * sizeof *idx);
    memset(s->moe, 0, (size_t)H * 4);
    /* accumulate in ascending expert order, as transformers' eager experts loop does */
    for (int e = 0; e < E; e++)
        for (int j = 0; j < K; j++) {
            if (idx[j] != e) continue;
            gptoss_matvec(s->gu, w->w_gu + (size_t)e * 2 * I * H, w->b_gu + (size_t)e * 2 * I, s->xn, 2 * I, H, 1);
            gptoss_swiglu(s->act, s->gu, I, c->swiglu_alpha, c->swiglu_limit);
            gptoss_matvec(s->tmp, w->w_dn + (size_t)e * H * I, w->b_dn + (size_t)e * H, s->act, H, I, 1);
            for (int i = 0; i < H; i++) s->moe[i] += wt[j] * s->tmp[i];
        }
    for (int i = 0; i < H; i++) s->x[i] += s->moe[i];
}

int gptoss_ref_forward(const gptoss_ref_model *m, gptoss_ref_state *s, int32_t token, float *logits_out,
                       gptoss_ref_trace *tr, char *err, size_t es) {
    const gptoss_config *c = &m->c;
    const int H = c->hidden_size;
    if (token < 0 || token >= c->vocab_size) return fail(-1, err, es, "token id %d out of range 0..%d", (int)token, c->vocab_size - 1);
    if (s->n >= s->max_context) return fail(-1, err, es, "context full: %d tokens (max_context)", s->max_context);
    if (grow(s)) return fail(-1, err, es, "out of memory growing the KV cache past %d tokens", s->cap);
    const int pos = s->n;
    const uint16_t *row = m->embed + (size_t)token * (size_t)H;
    for (int i = 0; i < H; i++) s->x[i] = gptoss_bf16_to_f32(row[i]);
    for (int l = 0; l < c->num_layers; l++) {
        attention_block(m, s, l, pos, tr);
        moe_block(m, s, l, tr);
        if (tr && tr->layer_out) memcpy(tr->layer_out + (size_t)l * H, s->x, (size_t)H * 4);
    }
    if (logits_out) {
        gptoss_rmsnorm(s->xn, s->x, m->final_norm, H, c->rms_norm_eps);
        gptoss_matvec(logits_out, m->lm_head, NULL, s->xn, c->vocab_size, H, m->threads);
    }
    s->n++;
    return 0;
}
