/* model.cu — weights, sessions and the forward pass of gpt-oss on one GPU (see model.h). */
#include "engines/gptoss_cuda/model.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/checkpoint.h"
#include "common/kv_pages.h"
}
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/tc.h"

/* ---------------------------------------------------------------- small helpers */

static llmr_engine_status fail(llmr_engine_status st, char *err, size_t es, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static llmr_engine_status fail(llmr_engine_status st, char *err, size_t es, const char *fmt, ...) {
    if (err && es) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, es, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* A failed CUDA call becomes INTERNAL (OOM_VRAM for an allocation) naming the step. */
#define CUDA_TRY(call, what)                                                                                    \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess)                                                                                  \
            return fail(e_ == cudaErrorMemoryAllocation ? LLMR_ENGINE_OOM_VRAM : LLMR_ENGINE_INTERNAL, err, es, \
                        "CUDA error in %s: %s", (what), cudaGetErrorString(e_));                               \
    } while (0)

static uint64_t align256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

#define GPTOSS_MAX_BATCH 64 /* rows of one batched decode step (more running requests wait to be admitted) */

struct gen_req;

/* ---------------------------------------------------------------- weights plan */

typedef struct layer_weights {
    const uint16_t *attn_norm, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b, *sinks;
    const uint16_t *mlp_norm, *router_w, *router_b, *gu_bias, *dn_bias;
    const uint8_t *gu_blocks, *gu_scales, *dn_blocks, *dn_scales;
} layer_weights;

/* One tensor to place in the device arena: what the checkpoint must hold and where it goes. */
typedef struct tensor_plan {
    char name[96];
    llmr_st_dtype dtype;
    int ndim;
    uint64_t shape[4];
    uint64_t bytes, arena_off;
    size_t shard;
    uint64_t file_begin;
    const void **dst;
} tensor_plan;

typedef struct plan {
    tensor_plan *t;
    size_t n, cap;
    uint64_t arena_bytes;
} plan;

struct gptoss_model {
    gptoss_config cfg;
    int device;
    cudaStream_t stream;
    pthread_mutex_t mu;
    const llmr_host_api *host;
    uint32_t max_context, max_sessions;
    void *arena;
    uint64_t arena_bytes, work_bytes;
    layer_weights layers[GPTOSS_MAX_LAYERS];
    const uint16_t *embed, *norm, *lm_head;
    float *inv_freq, attn_factor;
    /* workspace for one chunk of `chunk` tokens (see prefill_settings) */
    int chunk;
    void *work;
    float *x, *h, *q, *o, *rl, *rw, *gu, *act, *dn, *sample_work;
    int32_t *ids, *counts, *offsets, *pair_token, *pair_of, *tok, *sample_out;
    /* decode-step graph (see decode_step): the new token's K/V before they enter the cache, the
     * step's position, the sampled token copied back through pinned memory with one event */
    float *kn, *vn;
    int32_t *pos;
    /* fused decode kernels (qkv_decode.cu, moe_decode.cu): the swizzled normed residual, the expert
     * group table and the router's block counter (0 between launches) */
    float *hsw, *att_part;
    int32_t *grp, *ctr;
    int fused; /* 0 when LLMR_GPTOSS_FUSED=0 (the per-op decode launches, for comparisons) */
    int split_attn; /* fused path: 1 when LLMR_GPTOSS_SPLIT_ATTN=1 (keys split over blocks; faster only at long contexts) */
    int32_t *tok_host; /* pinned, 1 */
    cudaEvent_t tok_ev;
    int use_graph; /* 0 when LLMR_GPTOSS_GRAPH=0 (the launch-per-kernel path, for comparisons) */
    struct step_prof *prof; /* LLMR_GPTOSS_PROFILE=1 only: per-kernel times of decode steps */
    /* prefill on tensor cores (tc.h): cuBLAS handle and scratch in the workspace; off when use_tc = 0 */
    int batch_tc;        /* batched decode steps of >= GPTOSS_TC_MIN_T rows use gptoss_tc_linear (LLMR_GPTOSS_BATCH_TC) */
    int use_tc, tc_attn; /* tc_attn 0 (LLMR_GPTOSS_TC_ATTN=0): GEMMs on tensor cores, attention SIMT */
    gptoss_tc tc;
    void *cublas_ws;
    cudaEvent_t *pf_ev; /* LLMR_GPTOSS_PREFILL_PROFILE=1: 6 per layer + 1, timing each T > 1 forward */
    /* paged KV cache (kernels.h gptoss_kv): one pool for every session, sized at load */
    float *kv_pool;
    uint64_t kv_pool_bytes, page_floats; /* page_floats: floats per page (all layers, K and V) */
    uint32_t max_pages;                  /* block-table entries of a max_context session */
    llmr_kv_pages *pages;                /* which page belongs to whom */
    /* continuous batching (see "scheduler" below): one engine thread owns the stream */
    float *blogits;           /* [GPTOSS_MAX_BATCH, vocab]: the batched step's distributions */
    int32_t *bstage_dev;      /* [tok MAXB | pos MAXB | tables MAXB x max_pages] of a batched step */
    int32_t *bstage_host;     /* pinned mirror, uploaded with one copy per step */
    int batch_rows;           /* rows per linear launch in a batched step (LLMR_GPTOSS_BATCH_ROWS, default 4) */
    pthread_t sched;
    int sched_started, stopping;
    pthread_mutex_t q_mu;     /* the request queue and every request's shared fields */
    pthread_cond_t q_cv;      /* the engine thread waits here for work */
    pthread_cond_t ack_cv;    /* callers signal here when their callbacks have consumed tokens */
    struct gen_req *q_head, *q_tail;
    /* engine thread only */
    struct gen_req *rows[GPTOSS_MAX_BATCH];
    int n_rows;
    struct gen_req *pf_head, *pf_tail; /* admitted, being prefilled (one chunk per iteration) */
    int n_pf;
    /* accounting */
    uint64_t session_bytes; /* held by live sessions (logits, counts, block tables; KV is in the pool) */
    uint32_t active_sessions;
    uint64_t tokens_generated;
};

struct gptoss_session {
    gptoss_model *m;
    uint32_t max_ctx, n_ctx;
    int have_logits;
    llmr_kv_table tab;  /* block table, host copy (pages taken as the session grows) */
    int32_t *tab_dev;   /* device copy, tab.cap entries at a fixed address (the decode graph binds it) */
    uint32_t tab_synced; /* entries already copied to tab_dev */
    float *logits;      /* [vocab]: the distribution after the last evaluated token */
    int32_t *counts;    /* [vocab]: generated-token counts for the penalties */
    cudaGraphExec_t graph; /* one decode step bound to this session's cache and logits (lazy) */
    uint64_t bytes;
    volatile int cancel;
};

static void mlog(const gptoss_model *m, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mlog(const gptoss_model *m, int level, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (m && m->host && m->host->log) m->host->log(m->host->host, level, line);
    else fprintf(stderr, "gptoss_cuda: %s\n", line);
}

static int plan_add(plan *p, const char *name, llmr_st_dtype dt, int ndim, const uint64_t *shape, const void **dst) {
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 512;
        tensor_plan *nt = (tensor_plan *)realloc(p->t, nc * sizeof *nt);
        if (!nt) return -1;
        p->t = nt;
        p->cap = nc;
    }
    tensor_plan *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ndim = ndim;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = shape[i]; numel *= shape[i]; }
    t->bytes = numel * (dt == LLMR_ST_BF16 ? 2 : 1);
    t->arena_off = p->arena_bytes;
    p->arena_bytes += align256(t->bytes);
    t->dst = dst;
    return 0;
}

/* The exact tensor set of a gpt-oss checkpoint for this config (names, dtypes, shapes). When m is
 * non-NULL each entry records the model field that receives the tensor's device address. */
static int plan_build(const gptoss_config *c, gptoss_model *m, plan *p) {
    const uint64_t H = (uint64_t)c->hidden_size, QD = (uint64_t)c->num_heads * c->head_dim,
                   KVD = (uint64_t)c->num_kv_heads * c->head_dim, E = (uint64_t)c->num_experts,
                   I = (uint64_t)c->intermediate_size, V = (uint64_t)c->vocab_size;
    char nm[96];
#define ADD(dt, dstp, ...)                                                                         \
    do {                                                                                           \
        const uint64_t shp_[] = {__VA_ARGS__};                                                     \
        if (plan_add(p, nm, dt, (int)(sizeof shp_ / sizeof shp_[0]), shp_, (const void **)(dstp))) \
            return -1;                                                                             \
    } while (0)
#define NAME(...) snprintf(nm, sizeof nm, __VA_ARGS__)
    for (int l = 0; l < c->num_layers; l++) {
        layer_weights *w = m ? &m->layers[l] : NULL;
#define F(field) (w ? &w->field : NULL)
        NAME("model.layers.%d.input_layernorm.weight", l); ADD(LLMR_ST_BF16, F(attn_norm), H);
        NAME("model.layers.%d.self_attn.q_proj.weight", l); ADD(LLMR_ST_BF16, F(q_w), QD, H);
        NAME("model.layers.%d.self_attn.q_proj.bias", l); ADD(LLMR_ST_BF16, F(q_b), QD);
        NAME("model.layers.%d.self_attn.k_proj.weight", l); ADD(LLMR_ST_BF16, F(k_w), KVD, H);
        NAME("model.layers.%d.self_attn.k_proj.bias", l); ADD(LLMR_ST_BF16, F(k_b), KVD);
        NAME("model.layers.%d.self_attn.v_proj.weight", l); ADD(LLMR_ST_BF16, F(v_w), KVD, H);
        NAME("model.layers.%d.self_attn.v_proj.bias", l); ADD(LLMR_ST_BF16, F(v_b), KVD);
        NAME("model.layers.%d.self_attn.o_proj.weight", l); ADD(LLMR_ST_BF16, F(o_w), H, QD);
        NAME("model.layers.%d.self_attn.o_proj.bias", l); ADD(LLMR_ST_BF16, F(o_b), H);
        NAME("model.layers.%d.self_attn.sinks", l); ADD(LLMR_ST_BF16, F(sinks), (uint64_t)c->num_heads);
        NAME("model.layers.%d.post_attention_layernorm.weight", l); ADD(LLMR_ST_BF16, F(mlp_norm), H);
        NAME("model.layers.%d.mlp.router.weight", l); ADD(LLMR_ST_BF16, F(router_w), E, H);
        NAME("model.layers.%d.mlp.router.bias", l); ADD(LLMR_ST_BF16, F(router_b), E);
        NAME("model.layers.%d.mlp.experts.gate_up_proj_blocks", l); ADD(LLMR_ST_U8, F(gu_blocks), E, 2 * I, H / 32, 16);
        NAME("model.layers.%d.mlp.experts.gate_up_proj_scales", l); ADD(LLMR_ST_U8, F(gu_scales), E, 2 * I, H / 32);
        NAME("model.layers.%d.mlp.experts.gate_up_proj_bias", l); ADD(LLMR_ST_BF16, F(gu_bias), E, 2 * I);
        NAME("model.layers.%d.mlp.experts.down_proj_blocks", l); ADD(LLMR_ST_U8, F(dn_blocks), E, H, I / 32, 16);
        NAME("model.layers.%d.mlp.experts.down_proj_scales", l); ADD(LLMR_ST_U8, F(dn_scales), E, H, I / 32);
        NAME("model.layers.%d.mlp.experts.down_proj_bias", l); ADD(LLMR_ST_BF16, F(dn_bias), E, H);
#undef F
    }
    NAME("model.embed_tokens.weight"); ADD(LLMR_ST_BF16, m ? &m->embed : NULL, V, H);
    NAME("model.norm.weight"); ADD(LLMR_ST_BF16, m ? &m->norm : NULL, H);
    NAME("lm_head.weight"); ADD(LLMR_ST_BF16, m ? &m->lm_head : NULL, V, H);
#undef ADD
#undef NAME
    return 0;
}

/* Structural limits of these kernels; anything else is UNSUPPORTED with the field named. */
static llmr_engine_status check_config(const gptoss_config *c, char *err, size_t es) {
    if (c->head_dim != GPTOSS_HEAD_DIM)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: head_dim %d unsupported (kernels need 64)", c->head_dim);
    if (c->experts_per_token != GPTOSS_TOPK)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: num_experts_per_tok %d unsupported (need 4)",
                    c->experts_per_token);
    if (c->num_experts < GPTOSS_TOPK || c->num_experts > GPTOSS_MAX_EXPERTS)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: num_local_experts %d outside 4..%d", c->num_experts,
                    GPTOSS_MAX_EXPERTS);
    if (c->hidden_size <= 0 || c->hidden_size % 32 || c->intermediate_size <= 0 || c->intermediate_size % 32)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es,
                    "config.json: hidden_size %d and intermediate_size %d must be positive multiples of 32 (MXFP4 blocks)",
                    c->hidden_size, c->intermediate_size);
    if (c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                    c->num_heads, c->num_kv_heads);
    if (c->num_layers <= 0 || c->num_layers > GPTOSS_MAX_LAYERS || c->vocab_size <= 0)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "config.json: num_hidden_layers %d or vocab_size %d out of range",
                    c->num_layers, c->vocab_size);
    return LLMR_ENGINE_OK;
}

/* Checks every planned tensor against the checkpoint (MODEL_CORRUPT names the tensor and shard) and
 * records where each one lives. */
static llmr_engine_status plan_check(plan *p, llmr_checkpoint *ck, char *err, size_t es) {
    for (size_t i = 0; i < p->n; i++) {
        tensor_plan *t = &p->t[i];
        char msg[400];
        if (!llmr_checkpoint_expect(ck, t->name, t->dtype, t->ndim, t->shape, msg, sizeof msg))
            return fail(LLMR_ENGINE_MODEL_CORRUPT, err, es, "%s", msg);
        const llmr_st_tensor *st = llmr_checkpoint_find(ck, t->name, &t->shard);
        t->file_begin = st->begin;
    }
    return LLMR_ENGINE_OK;
}

static uint32_t pick_context(const gptoss_config *c, uint32_t want) {
    uint32_t mc = want ? want : GPTOSS_DEFAULT_CONTEXT;
    if (c->max_position_embeddings > 0 && mc > (uint32_t)c->max_position_embeddings) mc = (uint32_t)c->max_position_embeddings;
    return mc;
}

static uint32_t pages_for(uint32_t ctx) { return (ctx + GPTOSS_KV_PAGE - 1) / GPTOSS_KV_PAGE; }

/* Floats per KV page: every layer's K and V for GPTOSS_KV_PAGE positions. */
static uint64_t page_floats_for(const gptoss_config *c) {
    return (uint64_t)c->num_layers * 2 * GPTOSS_KV_PAGE * c->num_kv_heads * c->head_dim;
}

/* The page pool: max_sessions sessions of ctx positions each. */
static uint64_t pool_bytes_for(const gptoss_config *c, uint32_t ctx, uint32_t sessions) {
    return align256((uint64_t)sessions * pages_for(ctx) * page_floats_for(c) * sizeof(float));
}

/* A session's own device memory (its KV lives in the pool): logits, penalty counts, block table. */
static uint64_t session_bytes_for(const gptoss_config *c, uint32_t ctx) {
    return 2 * align256((uint64_t)c->vocab_size * 4) + align256((uint64_t)pages_for(ctx) * sizeof(int32_t));
}

/* How the T > 1 forward runs, from the environment (read at estimate and at load, so the estimate
 * counts the same workspace): LLMR_GPTOSS_TC=0 keeps the SIMT kernels (no cuBLAS scratch);
 * LLMR_GPTOSS_TC_ATTN=0 keeps only the attention on SIMT; LLMR_GPTOSS_TC_SPLIT=2|3 bf16 parts per
 * activation; LLMR_GPTOSS_CHUNK=64..8192 tokens per step; LLMR_GPTOSS_TC_FASTDQ=0 selects the byte-per-thread
 * MXFP4 dequantization instead of the block-per-thread one (tc.h); LLMR_GPTOSS_TC_BATCHED=1 runs the padded
 * strided-batched expert GEMMs instead of one GEMM per expert (tc.h; measured slower on the H200, so
 * off: it also needs every expert's dequantized weight, 1 GB more scratch on 20b). */
typedef struct prefill_settings {
    int use_tc, tc_attn, splits, chunk, batched;
} prefill_settings;

static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "gptoss_cuda: %s=%s ignored (must be %d..%d); using %d\n", name, v, lo, hi, dflt);
        return dflt;
    }
    return (int)x;
}

static prefill_settings prefill_settings_get(void) {
    prefill_settings p;
    p.use_tc = env_int("LLMR_GPTOSS_TC", 1, 0, 1);
    p.tc_attn = env_int("LLMR_GPTOSS_TC_ATTN", 1, 0, 1);
    p.splits = env_int("LLMR_GPTOSS_TC_SPLIT", 2, 2, 3);
    p.chunk = env_int("LLMR_GPTOSS_CHUNK", GPTOSS_CHUNK, GPTOSS_MAX_BATCH, 8192); /* a batched step uses the chunk workspace */
    p.batched = env_int("LLMR_GPTOSS_TC_BATCHED", 0, 0, 1);
    return p;
}

/* Workspace layout for ps.chunk tokens; with m non-NULL the pointers are set from base. */
static uint64_t workspace_layout(const gptoss_config *c, gptoss_model *m, char *base, prefill_settings ps) {
    const uint64_t C = (uint64_t)ps.chunk, H = c->hidden_size, QD = (uint64_t)c->num_heads * c->head_dim,
                   E = c->num_experts, I = c->intermediate_size, V = c->vocab_size, P = C * GPTOSS_TOPK;
    uint64_t off = 0;
#define CARVE(field, type, count)                                                    \
    do {                                                                             \
        if (m) m->field = (type *)(base + off);                                      \
        off += align256((uint64_t)(count) * sizeof(type));                           \
    } while (0)
    CARVE(x, float, C * H);
    CARVE(h, float, C * H);
    CARVE(q, float, C * QD);
    CARVE(o, float, C * QD);
    CARVE(rl, float, C * E);
    CARVE(rw, float, C * GPTOSS_TOPK);
    CARVE(gu, float, P * 2 * I);
    CARVE(act, float, P * I);
    CARVE(dn, float, P * H);
    CARVE(sample_work, float, V);
    CARVE(ids, int32_t, C * GPTOSS_TOPK);
    CARVE(counts, int32_t, E);
    CARVE(offsets, int32_t, E);
    CARVE(pair_token, int32_t, P);
    CARVE(pair_of, int32_t, P);
    CARVE(tok, int32_t, C);
    CARVE(sample_out, int32_t, 1);
    CARVE(kn, float, C * c->num_kv_heads * c->head_dim); /* new K/V rows before they enter the pages */
    CARVE(vn, float, C * c->num_kv_heads * c->head_dim);
    CARVE(pos, int32_t, 1);
    CARVE(blogits, float, (uint64_t)GPTOSS_MAX_BATCH * V);
    CARVE(hsw, float, (uint64_t)GPTOSS_DECODE_MAX_T * H);
    CARVE(grp, int32_t, gptoss_moe_groups_ints(GPTOSS_DECODE_MAX_T));
    CARVE(ctr, int32_t, 1 + GPTOSS_DECODE_MAX_T + c->num_kv_heads); /* router [0, 64], then split attention */
    CARVE(att_part, float, (uint64_t)c->num_heads * GPTOSS_ATT_SPLITS * (2 + GPTOSS_HEAD_DIM));
    if (ps.use_tc) {
        CARVE(tc.xs, uint16_t, gptoss_tc_xs_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, ps.batched));
        CARVE(tc.ys, float, gptoss_tc_ys_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, (int)E));
        CARVE(tc.wbf, uint16_t, gptoss_tc_wbf_elems((int)H, (int)I, ps.batched ? (int)E : 1));
        CARVE(cublas_ws, char, GPTOSS_TC_CUBLAS_WS);
        if (m) {
            m->tc.xs_elems = gptoss_tc_xs_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, ps.batched);
            m->tc.ys_elems = gptoss_tc_ys_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, (int)E);
            m->tc.wbf_elems = gptoss_tc_wbf_elems((int)H, (int)I, ps.batched ? (int)E : 1);
        }
    }
#undef CARVE
    return off;
}

static llmr_engine_status open_and_plan(const char *dir, gptoss_config *cfg, llmr_checkpoint **ck, plan *p,
                                        gptoss_model *m, char *err, size_t es) {
    char msg[512];
    if (gptoss_config_load(dir, cfg, msg, sizeof msg))
        return fail(LLMR_ENGINE_MODEL_CORRUPT, err, es, "%s", msg);
    llmr_engine_status st = check_config(cfg, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    if (llmr_checkpoint_open(dir, ck, msg, sizeof msg)) return fail(LLMR_ENGINE_MODEL_CORRUPT, err, es, "%s", msg);
    if (plan_build(cfg, m, p)) return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory planning the tensors");
    return plan_check(p, *ck, err, es);
}

llmr_engine_status gptoss_model_estimate(const char *dir, uint32_t max_context, uint32_t max_sessions, uint64_t *bytes,
                                         char *err, size_t es) {
    gptoss_config cfg;
    llmr_checkpoint *ck = NULL;
    plan p = {NULL, 0, 0, 0};
    llmr_engine_status st = open_and_plan(dir, &cfg, &ck, &p, NULL, err, es);
    if (st == LLMR_ENGINE_OK) {
        const uint32_t ctx = pick_context(&cfg, max_context);
        const uint32_t ns = max_sessions ? max_sessions : 1;
        *bytes = p.arena_bytes + workspace_layout(&cfg, NULL, NULL, prefill_settings_get()) + pool_bytes_for(&cfg, ctx, ns) +
                 (uint64_t)ns * session_bytes_for(&cfg, ctx) + 256;
    }
    free(p.t);
    llmr_checkpoint_destroy(ck);
    return st;
}

/* ---------------------------------------------------------------- streaming the weights */

static int cmp_file_order(const void *a, const void *b) {
    const tensor_plan *x = (const tensor_plan *)a, *y = (const tensor_plan *)b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return x->file_begin < y->file_begin ? -1 : x->file_begin > y->file_begin;
}

/* Loading: the checkpoint is cut into pieces of at most LOAD_PIECE bytes (file order); LOAD_THREADS
 * workers (LLMR_GPTOSS_LOAD_THREADS, 1..32) take pieces in turn, each with its own stream and two
 * pinned staging buffers: while the GPU pulls one buffer, the worker fills the other from the page
 * cache. One thread copying from the page cache tops out near 4-5 GB/s (memcpy + page faults on the
 * mmap), well below what PCIe takes, so the copies out of the page cache run on several cores. */
#define LOAD_PIECE ((size_t)16 << 20)
#define LOAD_THREADS 8

typedef struct load_piece {
    const uint8_t *src;
    uint8_t *dst;
    size_t n;
    const char *name; /* the tensor, for messages */
} load_piece;

typedef struct load_job {
    gptoss_model *m;
    load_piece *pieces;
    size_t n_pieces;
    size_t next;          /* next piece to take (atomic) */
    int failed;           /* set once; the other workers stop at their next piece */
    pthread_mutex_t mu;
    char msg[400];        /* the first failure */
} load_job;

static void load_fail(load_job *j, const char *fmt, const char *name, const char *why) {
    pthread_mutex_lock(&j->mu);
    if (!j->failed) snprintf(j->msg, sizeof j->msg, fmt, name, why);
    j->failed = 1;
    pthread_mutex_unlock(&j->mu);
}

static void *load_worker(void *arg) {
    load_job *j = (load_job *)arg;
    void *stage[2] = {NULL, NULL};
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaStream_t st = NULL;
    int cur = 0;
    if (cudaSetDevice(j->m->device) != cudaSuccess || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocHost(&stage[0], LOAD_PIECE) != cudaSuccess || cudaMallocHost(&stage[1], LOAD_PIECE) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming) != cudaSuccess) {
        load_fail(j, "%s: cannot set up a loader thread (stream, 2 pinned buffers of 16 MiB, events): %s", "load",
                  cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    for (;;) {
        const size_t i = __atomic_fetch_add(&j->next, (size_t)1, __ATOMIC_RELAXED);
        if (i >= j->n_pieces || __atomic_load_n(&j->failed, __ATOMIC_RELAXED)) break;
        const load_piece *pc = &j->pieces[i];
        cudaError_t e = cudaEventSynchronize(ev[cur]);
        if (e == cudaSuccess) {
            memcpy(stage[cur], pc->src, pc->n);
            e = cudaMemcpyAsync(pc->dst, stage[cur], pc->n, cudaMemcpyHostToDevice, st);
        }
        if (e == cudaSuccess) e = cudaEventRecord(ev[cur], st);
        if (e != cudaSuccess) {
            load_fail(j, "copying %s to the GPU: %s", pc->name, cudaGetErrorString(e));
            break;
        }
        cur ^= 1;
    }
    if (st && cudaStreamSynchronize(st) != cudaSuccess)
        load_fail(j, "%s: weight upload failed: %s", "load", cudaGetErrorString(cudaGetLastError()));
out:
    if (st) cudaStreamSynchronize(st);
    for (int k = 0; k < 2; k++) {
        if (ev[k]) cudaEventDestroy(ev[k]);
        if (stage[k]) cudaFreeHost(stage[k]);
    }
    if (st) cudaStreamDestroy(st);
    return NULL;
}

/* Copies every tensor from the shard mmaps to its arena slot (see LOAD_PIECE above). */
static llmr_engine_status stream_weights(gptoss_model *m, plan *p, llmr_checkpoint *ck, char *err, size_t es) {
    qsort(p->t, p->n, sizeof *p->t, cmp_file_order);
    char msg[400];
    size_t np = 0;
    for (size_t i = 0; i < p->n; i++) np += (size_t)((p->t[i].bytes + LOAD_PIECE - 1) / LOAD_PIECE);
    load_job j;
    memset(&j, 0, sizeof j);
    j.m = m;
    j.pieces = (load_piece *)calloc(np ? np : 1, sizeof *j.pieces);
    if (!j.pieces) return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory listing %zu load pieces", np);
    for (size_t i = 0; i < p->n; i++) {
        tensor_plan *t = &p->t[i];
        const uint8_t *src = (const uint8_t *)llmr_checkpoint_data(ck, t->name, NULL, msg, sizeof msg);
        if (!src) {
            free(j.pieces);
            return fail(LLMR_ENGINE_MODEL_CORRUPT, err, es, "%s", msg);
        }
        uint8_t *dst = (uint8_t *)m->arena + t->arena_off;
        *t->dst = dst;
        for (uint64_t done = 0; done < t->bytes; done += LOAD_PIECE) {
            load_piece *pc = &j.pieces[j.n_pieces++];
            pc->src = src + done;
            pc->dst = dst + done;
            pc->n = (size_t)(t->bytes - done < LOAD_PIECE ? t->bytes - done : LOAD_PIECE);
            pc->name = t->name;
        }
    }
    int nt = env_int("LLMR_GPTOSS_LOAD_THREADS", LOAD_THREADS, 1, 32);
    if ((size_t)nt > j.n_pieces) nt = j.n_pieces ? (int)j.n_pieces : 1;
    pthread_mutex_init(&j.mu, NULL);
    pthread_t th[32];
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, load_worker, &j) != 0) break;
    if (started == 0) load_worker(&j); /* no thread could start: load on this one */
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    pthread_mutex_destroy(&j.mu);
    free(j.pieces);
    cudaSetDevice(m->device);
    if (j.failed) return fail(LLMR_ENGINE_INTERNAL, err, es, "%s", j.msg);
    return LLMR_ENGINE_OK;
}

/* ---------------------------------------------------------------- decode-step profile
 *
 * LLMR_GPTOSS_PROFILE=1 (for performance work, issue 10): generate runs each decode step's launches
 * directly (no graph) with a CUDA event recorded after every launch, waits for the step, and adds the
 * time between consecutive events to the kernel's category; the sampler is timed the same way. The
 * table goes to stderr when the model is freed. Times include the gap before each launch (launches are
 * not hidden behind a graph here), so they are upper bounds of each kernel's own time. Off by default:
 * nothing of it is touched then. */
enum {
    PROF_EMBED, PROF_NORM, PROF_Q, PROF_KV, PROF_ROPE_STORE, PROF_QKV, PROF_ATTN, PROF_O, PROF_ROUTER, PROF_GATE_UP,
    PROF_SWIGLU, PROF_DOWN, PROF_COMBINE, PROF_LM_HEAD, PROF_SAMPLE, PROF_N
};
static const char *const prof_names[PROF_N] = {
    "embed", "rmsnorm (2 per layer + final)", "q_proj", "k_proj + v_proj", "rope + kv store",
    "fused norm+qkv+rope+kv store", "attention", "o_proj (+residual)", "router (fused: +norm)",
    "MXFP4 gate_up (fused: +swiglu)", "swiglu", "MXFP4 down (fused: +combine)", "combine", "lm_head", "sampling"};

typedef struct step_prof {
    int cap, n;               /* events allocated / recorded in this step */
    cudaEvent_t *ev;          /* ev[0] before the first launch, ev[i] after launch i */
    unsigned char *cat;       /* category of launch i (ev[i-1] -> ev[i]) */
    double ms[PROF_N];
    unsigned long long steps, samples;
} step_prof;

static void prof_free(step_prof *p) {
    if (!p) return;
    for (int i = 0; p->ev && i < p->cap; i++) /* events never made are 0 (calloc) */
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    free(p->ev);
    free(p->cat);
    free(p);
}

/* NULL when profiling is off, or when its events cannot be made (then it stays off, said on stderr). */
static step_prof *prof_create(int layers) {
    const char *v = getenv("LLMR_GPTOSS_PROFILE");
    if (!v || strcmp(v, "1") != 0) return NULL;
    step_prof *p = (step_prof *)calloc(1, sizeof *p);
    if (!p) return NULL;
    p->cap = 8 + layers * 24; /* 1 + ~18 launches per layer + 3, with room */
    p->ev = (cudaEvent_t *)calloc((size_t)p->cap, sizeof *p->ev);
    p->cat = (unsigned char *)calloc((size_t)p->cap, 1);
    int ok = p->ev && p->cat;
    for (int i = 0; ok && i < p->cap; i++) ok = cudaEventCreate(&p->ev[i]) == cudaSuccess;
    if (!ok) {
        fprintf(stderr, "gptoss_cuda: LLMR_GPTOSS_PROFILE=1 ignored: could not create %d CUDA events\n", p->cap);
        prof_free(p);
        return NULL;
    }
    return p;
}

/* Records the start of a timed sequence (before its first launch). */
static cudaError_t prof_begin(step_prof *p, cudaStream_t st) {
    p->n = 1;
    return cudaEventRecord(p->ev[0], st);
}

/* Records "launch of category cat done", after prof_begin. */
static cudaError_t prof_mark(step_prof *p, int cat, cudaStream_t st) {
    if (p->n < 1 || p->n >= p->cap) return cudaErrorInvalidValue; /* more launches than planned: a bug here */
    p->cat[p->n] = (unsigned char)cat;
    return cudaEventRecord(p->ev[p->n++], st);
}

/* Waits for the step's last event and adds its intervals; resets for the next step. */
static cudaError_t prof_collect(step_prof *p, int is_sample) {
    if (p->n < 2) { p->n = 0; return cudaSuccess; }
    cudaError_t e = cudaEventSynchronize(p->ev[p->n - 1]);
    for (int i = 1; e == cudaSuccess && i < p->n; i++) {
        float ms = 0;
        e = cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]);
        p->ms[p->cat[i]] += ms;
    }
    if (is_sample) p->samples++; else p->steps++;
    p->n = 0;
    return e;
}

static void prof_report(const step_prof *p) {
    if (!p || !p->steps) return;
    double total = 0;
    for (int c = 0; c < PROF_N; c++) total += p->ms[c] / (double)(c == PROF_SAMPLE ? (p->samples ? p->samples : 1) : p->steps);
    fprintf(stderr, "gptoss_cuda profile: %llu decode steps, %llu samplings, per token (no graph; each launch's "
                    "time includes the gap before it):\n", p->steps, p->samples);
    for (int c = 0; c < PROF_N; c++) {
        const double us = 1000.0 * p->ms[c] / (double)(c == PROF_SAMPLE ? (p->samples ? p->samples : 1) : p->steps);
        fprintf(stderr, "  %-32s %9.1f us %5.1f%%\n", prof_names[c], us, total > 0 ? 100.0 * us / (1000.0 * total) : 0.0);
    }
    fprintf(stderr, "  %-32s %9.1f us\n", "total", 1000.0 * total);
}

/* ---------------------------------------------------------------- load / free */

/* The events of LLMR_GPTOSS_PREFILL_PROFILE=1 (see prefill_profile_report). */
static void prefill_profile_free(gptoss_model *m) {
    for (int i = 0; m->pf_ev && i < 6 * m->cfg.num_layers + 1; i++)
        if (m->pf_ev[i]) cudaEventDestroy(m->pf_ev[i]);
    free(m->pf_ev);
    m->pf_ev = NULL;
}

static void prefill_profile_create(gptoss_model *m) {
    const char *v = getenv("LLMR_GPTOSS_PREFILL_PROFILE");
    if (!v || strcmp(v, "1") != 0) return;
    const int n = 6 * m->cfg.num_layers + 1;
    m->pf_ev = (cudaEvent_t *)calloc((size_t)n, sizeof *m->pf_ev);
    for (int i = 0; m->pf_ev && i < n; i++)
        if (cudaEventCreate(&m->pf_ev[i]) != cudaSuccess) {
            fprintf(stderr, "gptoss_cuda: LLMR_GPTOSS_PREFILL_PROFILE=1 ignored: cannot create %d CUDA events\n", n);
            prefill_profile_free(m);
            return;
        }
}
static void sched_stop(gptoss_model *m);
static int sched_start(gptoss_model *m);

void gptoss_model_free(gptoss_model *m) {
    if (!m) return;
    sched_stop(m);
    if (m->device >= 0) cudaSetDevice(m->device);
    if (m->stream) cudaStreamSynchronize(m->stream);
    if (m->tok_ev) cudaEventDestroy(m->tok_ev);
    prof_report(m->prof);
    prof_free(m->prof);
    cudaFreeHost(m->tok_host);
    gptoss_tc_destroy(&m->tc);
    prefill_profile_free(m);
    cudaFreeHost(m->bstage_host);
    cudaFree(m->bstage_dev);
    cudaFree(m->arena);
    cudaFree(m->work);
    cudaFree(m->kv_pool);
    llmr_kv_pages_destroy(m->pages);
    cudaFree(m->inv_freq);
    if (m->stream) cudaStreamDestroy(m->stream);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->q_mu);
    pthread_cond_destroy(&m->q_cv);
    pthread_cond_destroy(&m->ack_cv);
    free(m);
}

llmr_engine_status gptoss_model_load(const char *dir, int device, uint64_t budget, uint32_t max_context,
                                     uint32_t max_sessions, const llmr_host_api *host, gptoss_model **out, char *err,
                                     size_t es) {
    if (device < 0) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "gptoss_cuda needs a GPU (device %d given)", device);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "no CUDA device is usable: %s", cudaGetErrorString(cudaGetLastError()));
    if (device >= ndev) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "device %d does not exist (%d CUDA devices)", device, ndev);
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major < 9)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "device %d (%s) has compute capability %d.%d; gptoss_cuda needs 9.0",
                    device, prop.name, prop.major, prop.minor);
    if (cudaSetDevice(device) != cudaSuccess) return fail(LLMR_ENGINE_INTERNAL, err, es, "cudaSetDevice(%d) failed", device);

    gptoss_model *m = (gptoss_model *)calloc(1, sizeof *m);
    if (!m) return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory");
    m->device = device;
    m->host = host;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->q_mu, NULL);
    pthread_cond_init(&m->q_cv, NULL);
    pthread_cond_init(&m->ack_cv, NULL);
    llmr_checkpoint *ck = NULL;
    plan p = {NULL, 0, 0, 0};
    llmr_engine_status st = open_and_plan(dir, &m->cfg, &ck, &p, m, err, es);
    uint64_t need = 0, ws = 0, sess = 0, pool = 0;
    size_t free_b = 0, total_b = 0;
    const prefill_settings ps = prefill_settings_get();
    if (st != LLMR_ENGINE_OK) goto fail;
    m->max_context = pick_context(&m->cfg, max_context);
    m->max_sessions = max_sessions ? max_sessions : 1;
    ws = workspace_layout(&m->cfg, NULL, NULL, ps);
    sess = session_bytes_for(&m->cfg, m->max_context);
    pool = pool_bytes_for(&m->cfg, m->max_context, m->max_sessions);
    m->max_pages = pages_for(m->max_context);
    m->page_floats = page_floats_for(&m->cfg);
    need = p.arena_bytes + ws + pool + (uint64_t)m->max_sessions * sess;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        st = fail(LLMR_ENGINE_INTERNAL, err, es, "cudaMemGetInfo failed on device %d", device);
        goto fail;
    }
    if (need > free_b || (budget && need > budget)) {
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es,
                  "loading needs %llu bytes of GPU memory (weights %llu, workspace %llu, KV page pool %llu = %u sessions "
                  "x %u pages of %d tokens for context %u, sessions %u x %llu) but device %d has %llu free%s%llu",
                  (unsigned long long)need, (unsigned long long)p.arena_bytes, (unsigned long long)ws,
                  (unsigned long long)pool, m->max_sessions, m->max_pages, GPTOSS_KV_PAGE, m->max_context,
                  m->max_sessions, (unsigned long long)sess, device, (unsigned long long)free_b,
                  budget ? " and the budget is " : "", (unsigned long long)(budget ? budget : 0));
        goto fail;
    }
    if (cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc(&m->arena, p.arena_bytes) != cudaSuccess || cudaMalloc(&m->work, ws) != cudaSuccess ||
        cudaMalloc((void **)&m->kv_pool, pool) != cudaSuccess ||
        cudaMalloc((void **)&m->inv_freq, GPTOSS_HEAD_DIM / 2 * sizeof(float)) != cudaSuccess ||
        cudaMallocHost((void **)&m->tok_host, GPTOSS_MAX_BATCH * sizeof(int32_t)) != cudaSuccess ||
        cudaEventCreateWithFlags(&m->tok_ev, cudaEventDisableTiming) != cudaSuccess) {
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "GPU allocation of %llu bytes failed on device %d: %s",
                  (unsigned long long)(p.arena_bytes + ws + pool), device, cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    {
        char msg[256];
        m->kv_pool_bytes = pool;
        m->pages = llmr_kv_pages_create(m->max_sessions * m->max_pages, GPTOSS_KV_PAGE, msg, sizeof msg);
        if (!m->pages) { st = fail(LLMR_ENGINE_OOM_RAM, err, es, "%s", msg); goto fail; }
        const size_t stage = ((size_t)2 + m->max_pages) * GPTOSS_MAX_BATCH * sizeof(int32_t);
        if (cudaMalloc((void **)&m->bstage_dev, stage) != cudaSuccess ||
            cudaMallocHost((void **)&m->bstage_host, stage) != cudaSuccess) {
            st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "GPU allocation of %zu bytes of batch block tables failed", stage);
            goto fail;
        }
    }
    m->arena_bytes = p.arena_bytes;
    m->work_bytes = ws;
    workspace_layout(&m->cfg, m, (char *)m->work, ps);
    m->chunk = ps.chunk;
    m->use_tc = ps.use_tc;
    m->tc_attn = ps.use_tc && ps.tc_attn;
    if (m->use_tc) {
        char msg[256];
        if (gptoss_tc_init(&m->tc, m->stream, ps.splits, m->cublas_ws, msg, sizeof msg)) {
            st = fail(LLMR_ENGINE_INTERNAL, err, es, "prefill tensor-core setup on device %d: %s", device, msg);
            goto fail;
        }
        m->tc.no_batched = !ps.batched;
        /* block-per-thread dequantization: bit-identical to the byte kernel (kernel checks) and faster on
         * the H200 (4,096-token prefill 245 -> 191 ms); LLMR_GPTOSS_TC_FASTDQ=0 keeps the byte kernel */
        m->tc.fast_dequant = env_int("LLMR_GPTOSS_TC_FASTDQ", 1, 0, 1);
    }
    if (cudaMemset(m->ctr, 0, (1 + GPTOSS_DECODE_MAX_T + (size_t)m->cfg.num_kv_heads) * sizeof(int32_t)) != cudaSuccess) {
        st = fail(LLMR_ENGINE_INTERNAL, err, es, "clearing the decode workspace failed on device %d", device);
        goto fail;
    }
    {
        const char *g = getenv("LLMR_GPTOSS_GRAPH");
        m->use_graph = !(g && strcmp(g, "0") == 0);
        const char *g1 = getenv("LLMR_GPTOSS_GEMV1"); /* 0: the older T = 1 GEMV, for comparisons */
        gptoss_linear_use_gemv1(!(g1 && strcmp(g1, "0") == 0));
        const char *fu = getenv("LLMR_GPTOSS_FUSED"); /* 0: the per-op decode launches, for comparisons */
        m->fused = !(fu && strcmp(fu, "0") == 0) && m->cfg.hidden_size <= GPTOSS_DECODE_MAX_K; /* the fused kernels' limit */
        /* 1: the split-over-keys decode attention. Off by default: measured on the H200 (decode2 run 2)
         * it is 13.7 us vs 7.1 us per layer at context 128 (404 vs 440 tok/s end to end) and wins only at
         * long contexts (49.8 vs 86.7 us at 5,000; 322 vs 312 tok/s at 4,096). */
        const char *sa = getenv("LLMR_GPTOSS_SPLIT_ATTN");
        m->split_attn = sa && strcmp(sa, "1") == 0;
        const char *rbv = getenv("LLMR_GPTOSS_ROUTER_BLOCKS"); /* router rows over N blocks (default 1) */
        gptoss_moe_router_blocks(rbv ? atoi(rbv) : 1);
        const char *mr = getenv("LLMR_GPTOSS_MOE_ROWS"); /* 4: the 4-rows-per-warp MXFP4 variant */
        gptoss_moe_decode_rows(mr && strcmp(mr, "4") == 0 ? 4 : 2);
        const char *fg = getenv("LLMR_GPTOSS_FAST_GREEDY"); /* 0: the one-block greedy sampler */
        gptoss_sample_use_fast_greedy(!(fg && strcmp(fg, "0") == 0));
        m->prof = prof_create(m->cfg.num_layers);
        prefill_profile_create(m);
        m->batch_tc = env_int("LLMR_GPTOSS_BATCH_TC", 1, 0, 1); /* 0: batched steps keep the row-group GEMVs */
        const char *br = getenv("LLMR_GPTOSS_BATCH_ROWS"); /* 0 or >= 64: one linear launch over all rows */
        const long brv = br ? strtol(br, NULL, 10) : 4;
        m->batch_rows = brv <= 0 || brv > GPTOSS_MAX_BATCH ? GPTOSS_MAX_BATCH : (int)brv;
    }
    {
        float inv[GPTOSS_HEAD_DIM / 2];
        gptoss_yarn_inv_freq(&m->cfg, inv, &m->attn_factor);
        if (cudaMemcpy(m->inv_freq, inv, sizeof inv, cudaMemcpyHostToDevice) != cudaSuccess) {
            st = fail(LLMR_ENGINE_INTERNAL, err, es, "uploading the RoPE table failed");
            goto fail;
        }
    }
    st = stream_weights(m, &p, ck, err, es);
    if (st != LLMR_ENGINE_OK) goto fail;
    if (sched_start(m)) {
        st = fail(LLMR_ENGINE_INTERNAL, err, es, "cannot start the engine's scheduler thread");
        goto fail;
    }
    mlog(m, LLMR_LOG_INFO,
         "loaded %s on device %d (%s): %d layers, %llu weight bytes, context %u, KV page pool %llu bytes "
         "(%u pages of %d tokens, %llu bytes per 1k tokens)", dir, device, prop.name, m->cfg.num_layers,
         (unsigned long long)p.arena_bytes, m->max_context, (unsigned long long)pool, m->max_sessions * m->max_pages,
         GPTOSS_KV_PAGE, (unsigned long long)(m->page_floats * sizeof(float) * 1000 / GPTOSS_KV_PAGE));
    free(p.t);
    llmr_checkpoint_destroy(ck);
    *out = m;
    return LLMR_ENGINE_OK;
fail:
    free(p.t);
    llmr_checkpoint_destroy(ck);
    gptoss_model_free(m);
    return st;
}

const gptoss_config *gptoss_model_config(const gptoss_model *m) { return &m->cfg; }
uint32_t gptoss_model_max_context(const gptoss_model *m) { return m->max_context; }

/* Lock-free: a heartbeat must not wait for a generate that holds the model's mutex for minutes. */
void gptoss_model_stats(gptoss_model *m, llmr_engine_stats *out) {
    out->vram_bytes = m->arena_bytes + m->work_bytes + m->kv_pool_bytes + __atomic_load_n(&m->session_bytes, __ATOMIC_RELAXED);
    out->ram_bytes = sizeof *m;
    out->active_sessions = __atomic_load_n(&m->active_sessions, __ATOMIC_RELAXED);
    out->tokens_generated = __atomic_load_n(&m->tokens_generated, __ATOMIC_RELAXED);
    out->vocab_size = (uint32_t)m->cfg.vocab_size;
    out->max_context = m->max_context;
}

/* ---------------------------------------------------------------- sessions */

llmr_engine_status gptoss_session_new(gptoss_model *m, uint32_t max_context, gptoss_session **out, char *err,
                                      size_t es) {
    if (max_context > m->max_context)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "session max_context %u exceeds the model's %u", max_context,
                    m->max_context);
    gptoss_session *s = (gptoss_session *)calloc(1, sizeof *s);
    if (!s) return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory");
    s->m = m;
    s->max_ctx = max_context ? max_context : m->max_context;
    const gptoss_config *c = &m->cfg;
    s->bytes = session_bytes_for(c, s->max_ctx);
    s->tab.cap = pages_for(s->max_ctx);
    s->tab.pages = (int32_t *)calloc(s->tab.cap, sizeof(int32_t));
    if (!s->tab.pages) {
        const uint32_t cap = s->tab.cap;
        free(s);
        return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory for a block table of %u pages", cap);
    }
    /* No model lock here: allocating does not touch the buffers a concurrent generate uses. KV pages
     * are taken from the model's pool as the session grows (ensure_pages). */
    cudaSetDevice(m->device);
    cudaError_t e = cudaMalloc((void **)&s->tab_dev, (size_t)s->tab.cap * sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->logits, (size_t)c->vocab_size * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->counts, (size_t)c->vocab_size * sizeof(int32_t));
    if (e == cudaSuccess) {
        __atomic_add_fetch(&m->session_bytes, s->bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&m->active_sessions, 1u, __ATOMIC_RELAXED);
    }
    if (e != cudaSuccess) {
        size_t fb = 0, tb = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fb, &tb);
        cudaFree(s->tab_dev);
        cudaFree(s->logits);
        cudaFree(s->counts);
        const unsigned long long need = (unsigned long long)s->bytes;
        free(s->tab.pages);
        free(s);
        return fail(LLMR_ENGINE_OOM_VRAM, err, es, "a session of %u tokens needs %llu bytes of GPU memory; %llu free",
                    max_context ? max_context : m->max_context, need, (unsigned long long)fb);
    }
    *out = s;
    return LLMR_ENGINE_OK;
}

void gptoss_session_free(gptoss_session *s) {
    if (!s) return;
    gptoss_model *m = s->m;
    /* No generate runs on s (ABI contract); cudaFree waits for the device, so no lock is needed. */
    cudaSetDevice(m->device);
    if (s->graph) cudaGraphExecDestroy(s->graph);
    llmr_kv_pages_release(m->pages, &s->tab); /* its pages go back to the pool for other sessions */
    cudaFree(s->tab_dev);
    cudaFree(s->logits);
    cudaFree(s->counts);
    free(s->tab.pages);
    __atomic_sub_fetch(&m->session_bytes, s->bytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&m->active_sessions, 1u, __ATOMIC_RELAXED);
    free(s);
}

void gptoss_session_cancel(gptoss_session *s) {
    if (s) __atomic_store_n(&s->cancel, 1, __ATOMIC_RELEASE);
}

static int cancelled(gptoss_session *s) { return __atomic_load_n(&s->cancel, __ATOMIC_ACQUIRE); }

/* ---------------------------------------------------------------- paged KV */

/* Layer l of the pool seen through s's block table (table row 0). */
static gptoss_kv layer_kv(const gptoss_session *s, int l) {
    const gptoss_model *m = s->m;
    gptoss_kv kv;
    kv.pool = m->kv_pool;
    kv.table = s->tab_dev;
    kv.max_pages = (int)s->tab.cap;
    kv.kvd = m->cfg.num_kv_heads * m->cfg.head_dim;
    kv.page_floats = (long long)m->page_floats;
    kv.layer_off = (long long)l * 2 * GPTOSS_KV_PAGE * kv.kvd;
    return kv;
}

/* Makes s's block table cover positions [0, tokens): takes pages from the pool and copies the new
 * entries to the device table, ordered on the stream before the kernels that use them (outside any
 * graph: the graph reads the table through its fixed address). OOM_VRAM names pages needed and free. */
static llmr_engine_status ensure_pages(gptoss_session *s, uint64_t tokens, char *err, size_t es) {
    gptoss_model *m = s->m;
    char msg[256];
    llmr_kv_status ks = llmr_kv_pages_reserve(m->pages, &s->tab, tokens, msg, sizeof msg);
    if (ks == LLMR_KV_EXHAUSTED)
        return fail(LLMR_ENGINE_OOM_VRAM, err, es, "%s (the pool holds max_sessions %u x context %u)", msg,
                    m->max_sessions, m->max_context);
    if (ks != LLMR_KV_OK) return fail(LLMR_ENGINE_INTERNAL, err, es, "%s", msg);
    if (s->tab.n > s->tab_synced) {
        /* Pageable source: staged before the call returns, so later appends to tab.pages are safe. */
        CUDA_TRY(cudaMemcpyAsync(s->tab_dev + s->tab_synced, s->tab.pages + s->tab_synced,
                                 (size_t)(s->tab.n - s->tab_synced) * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 m->stream), "block table upload");
        s->tab_synced = s->tab.n;
    }
    return LLMR_ENGINE_OK;
}

/* ---------------------------------------------------------------- forward pass */

/* Host destinations of the parity/debug outputs for the rows of one chunk. */
typedef struct debug_out {
    float *hidden, *router, *logits; /* see gptoss_session_eval_debug; NULL = not wanted */
    const int32_t *force_topk;       /* [layers, n_total, 4] or NULL */
    float *logits_dev;               /* [chunk, vocab] device scratch when logits are wanted */
    size_t n_total, row0;            /* rows of the whole request, first row of this chunk */
} debug_out;

static llmr_engine_status copy_rows(float *dst_host, const float *src_dev, size_t bytes, cudaStream_t st, char *err,
                                    size_t es) {
    CUDA_TRY(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, st), "debug copy");
    CUDA_TRY(cudaStreamSynchronize(st), "debug copy");
    return LLMR_ENGINE_OK;
}

/* LLMR_GPTOSS_PREFILL_PROFILE=1: where a T > 1 forward's time goes, per part summed over the layers,
 * one line on stderr per chunk (events between the parts; the experts include the host wait for the
 * expert counts). For performance work only: off by default. */
static const char *const pf_names[6] = {"norm+qkv+rope+store", "attention", "o_proj", "norm+router+route",
                                        "experts", "combine"};

static void prefill_profile_report(gptoss_model *m, int T, int pos0) {
    double ms[6] = {0, 0, 0, 0, 0, 0}, total = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < 6; k++) {
            float x = 0;
            if (cudaEventElapsedTime(&x, m->pf_ev[6 * l + k], m->pf_ev[6 * l + k + 1]) == cudaSuccess) {
                ms[k] += x;
                total += x;
            }
        }
    fprintf(stderr, "gptoss_cuda prefill profile T=%d pos0=%d:", T, pos0);
    for (int k = 0; k < 6; k++) fprintf(stderr, " %s %.2f ms;", pf_names[k], ms[k]);
    fprintf(stderr, " layers %.2f ms\n", total);
}

/* A failed launch of the forward pass, naming the step and (for cuBLAS) its status. */
#define FWD_TRY(call, what)                                                                                      \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess)                                                                                   \
            return fail(e_ == cudaErrorMemoryAllocation ? LLMR_ENGINE_OOM_VRAM : LLMR_ENGINE_INTERNAL, err, es,  \
                        "CUDA error in %s: %s%s%s", (what), cudaGetErrorString(e_), m->tc.why[0] ? "; " : "",      \
                        m->tc.why);                                                                              \
    } while (0)

/* The dense linear of a T-token step: cuBLAS with split activations when T is large enough to pay
 * for it (tc.h), else the SIMT kernels of linear.cu. */
static cudaError_t fwd_linear(gptoss_model *m, const float *x, int ldx, const uint16_t *W, const uint16_t *b, int T,
                              int K, int N, float *y, int ldy, int accumulate) {
    if (m->use_tc && T >= GPTOSS_TC_MIN_T) return gptoss_tc_linear(&m->tc, x, ldx, W, b, T, K, N, y, ldy, accumulate);
    return gptoss_linear(x, ldx, W, b, T, K, N, y, ldy, accumulate, m->stream);
}

/* The experts of one layer for the grouped pairs already routed (m->counts, offsets, pair_token):
 * gate_up -> SwiGLU -> down into m->dn. */
static cudaError_t fwd_experts(gptoss_model *m, const layer_weights *w, int T) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, E = c->num_experts, I = c->intermediate_size, P = T * GPTOSS_TOPK;
    cudaStream_t st = m->stream;
    cudaError_t e;
    if (m->use_tc && T >= GPTOSS_TC_MIN_T) {
        if ((e = gptoss_tc_fetch_counts(&m->tc, m->counts, E)) != cudaSuccess) return e;
        if ((e = gptoss_tc_experts(&m->tc, m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts,
                                   m->offsets, E, P, H, 2 * I, m->gu)) != cudaSuccess)
            return e;
    } else if ((e = gptoss_mxfp4_grouped(m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts,
                                          m->offsets, E, T, H, 2 * I, m->gu, st)) != cudaSuccess) {
        return e;
    }
    if ((e = gptoss_swiglu(m->gu, P, I, c->swiglu_alpha, c->swiglu_limit, m->act, st)) != cudaSuccess) return e;
    if (m->use_tc && T >= GPTOSS_TC_MIN_T)
        return gptoss_tc_experts(&m->tc, m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts,
                                 m->offsets, E, P, I, H, m->dn);
    return gptoss_mxfp4_grouped(m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, T, I,
                                H, m->dn, st);
}

/* Evaluates T (<= m->chunk) tokens at positions s->n_ctx.. and leaves the distribution after the
 * last one in s->logits. Reads as the model.h overview says. */
static llmr_engine_status forward(gptoss_session *s, const int32_t *tokens, int T, debug_out *dbg, char *err,
                                  size_t es) {
    gptoss_model *m = s->m;
    const gptoss_config *c = &m->cfg;
    cudaStream_t st = m->stream;
    const int H = c->hidden_size, NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    const int QD = NH * D, KVD = NKV * D, E = c->num_experts, V = c->vocab_size;
    const int pos0 = (int)s->n_ctx;
    char what[96];
    llmr_engine_status pr = ensure_pages(s, (uint64_t)pos0 + (uint64_t)T, err, es);
    if (pr != LLMR_ENGINE_OK) return pr;
    CUDA_TRY(cudaMemcpyAsync(m->tok, tokens, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, st), "token upload");
    CUDA_TRY(gptoss_embed(m->embed, m->tok, T, H, m->x, st), "embedding");
    if (dbg && dbg->hidden) {
        llmr_engine_status r = copy_rows(dbg->hidden + dbg->row0 * H, m->x, (size_t)T * H * sizeof(float), st, err, es);
        if (r != LLMR_ENGINE_OK) return r;
    }
#define PF_MARK(i)                                                                          \
    do {                                                                                    \
        if (pf) CUDA_TRY(cudaEventRecord(m->pf_ev[(i)], st), "prefill profile");            \
    } while (0)
    const int pf = m->pf_ev != NULL && T > 1;
    PF_MARK(0);
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const gptoss_kv kv = layer_kv(s, l);
        snprintf(what, sizeof what, "layer %d attention", l);
        CUDA_TRY(gptoss_rmsnorm(m->x, w->attn_norm, T, H, c->rms_norm_eps, m->h, st), what);
        FWD_TRY(fwd_linear(m, m->h, H, w->q_w, w->q_b, T, H, QD, m->q, QD, 0), what);
        FWD_TRY(fwd_linear(m, m->h, H, w->k_w, w->k_b, T, H, KVD, m->kn, KVD, 0), what);
        FWD_TRY(fwd_linear(m, m->h, H, w->v_w, w->v_b, T, H, KVD, m->vn, KVD, 0), what);
        CUDA_TRY(gptoss_rope(m->q, QD, T, NH, pos0, m->inv_freq, m->attn_factor, st), what);
        CUDA_TRY(gptoss_rope(m->kn, KVD, T, NKV, pos0, m->inv_freq, m->attn_factor, st), what);
        CUDA_TRY(gptoss_kv_store_range(m->kn, m->vn, T, pos0, kv, st), what);
        PF_MARK(6 * l + 1);
        CUDA_TRY((m->tc_attn && T >= GPTOSS_TC_MIN_T ? gptoss_attention_tc : gptoss_attention)(
                     m->q, kv, w->sinks, T, pos0, NH, NKV, c->layer_sliding[l] ? c->sliding_window : 0, m->o, st),
                 what);
        PF_MARK(6 * l + 2);
        FWD_TRY(fwd_linear(m, m->o, QD, w->o_w, w->o_b, T, QD, H, m->x, H, 1), what);
        PF_MARK(6 * l + 3);

        snprintf(what, sizeof what, "layer %d experts", l);
        CUDA_TRY(gptoss_rmsnorm(m->x, w->mlp_norm, T, H, c->rms_norm_eps, m->h, st), what);
        FWD_TRY(fwd_linear(m, m->h, H, w->router_w, w->router_b, T, H, E, m->rl, E, 0), what);
        if (dbg && dbg->force_topk) {
            CUDA_TRY(cudaMemcpyAsync(m->ids, dbg->force_topk + ((size_t)l * dbg->n_total + dbg->row0) * GPTOSS_TOPK,
                                     (size_t)T * GPTOSS_TOPK * sizeof(int32_t), cudaMemcpyHostToDevice, st), what);
            CUDA_TRY(gptoss_router_weights(m->rl, T, E, m->ids, m->rw, st), what);
        } else {
            CUDA_TRY(gptoss_router_topk(m->rl, T, E, m->ids, m->rw, st), what);
        }
        CUDA_TRY(gptoss_moe_route(m->ids, T, E, m->counts, m->offsets, m->pair_token, m->pair_of, st), what);
        PF_MARK(6 * l + 4);
        FWD_TRY(fwd_experts(m, w, T), what);
        PF_MARK(6 * l + 5);
        CUDA_TRY(gptoss_moe_combine(m->dn, m->rw, m->pair_of, T, H, m->x, st), what);
        PF_MARK(6 * l + 6);
        if (dbg && dbg->router) {
            llmr_engine_status r = copy_rows(dbg->router + ((size_t)l * dbg->n_total + dbg->row0) * E, m->rl,
                                             (size_t)T * E * sizeof(float), st, err, es);
            if (r != LLMR_ENGINE_OK) return r;
        }
        if (dbg && dbg->hidden) {
            llmr_engine_status r = copy_rows(dbg->hidden + ((size_t)(l + 1) * dbg->n_total + dbg->row0) * H, m->x,
                                             (size_t)T * H * sizeof(float), st, err, es);
            if (r != LLMR_ENGINE_OK) return r;
        }
    }
    /* Final norm and unembedding: every row for the debug path, else only the last row. */
    if (dbg && dbg->logits) {
        CUDA_TRY(gptoss_rmsnorm(m->x, m->norm, T, H, c->rms_norm_eps, m->h, st), "final norm");
        CUDA_TRY(gptoss_linear(m->h, H, m->lm_head, NULL, T, H, V, dbg->logits_dev, V, 0, st), "lm_head");
        llmr_engine_status r = copy_rows(dbg->logits + dbg->row0 * (size_t)V, dbg->logits_dev,
                                         (size_t)T * V * sizeof(float), st, err, es);
        if (r != LLMR_ENGINE_OK) return r;
        CUDA_TRY(cudaMemcpyAsync(s->logits, dbg->logits_dev + (size_t)(T - 1) * V, (size_t)V * sizeof(float),
                                 cudaMemcpyDeviceToDevice, st), "logits copy");
    } else {
        CUDA_TRY(gptoss_rmsnorm(m->x + (size_t)(T - 1) * H, m->norm, 1, H, c->rms_norm_eps, m->h, st), "final norm");
        CUDA_TRY(gptoss_linear(m->h, H, m->lm_head, NULL, 1, H, V, s->logits, V, 0, st), "lm_head");
    }
    CUDA_TRY(cudaStreamSynchronize(st), "forward pass");
#undef PF_MARK
    if (pf) prefill_profile_report(m, T, pos0);
    s->n_ctx += (uint32_t)T;
    s->have_logits = 1;
    return LLMR_ENGINE_OK;
}

/* Appends tokens in chunks; checks the cancel flag between chunks. */
static llmr_engine_status eval_tokens(gptoss_session *s, const int32_t *tokens, size_t n, debug_out *dbg, char *err,
                                      size_t es) {
    for (size_t done = 0; done < n;) {
        if (cancelled(s)) return fail(LLMR_ENGINE_CANCELLED, err, es, "cancelled during prefill");
        const int T = (int)(n - done < (size_t)s->m->chunk ? n - done : (size_t)s->m->chunk);
        if (dbg) dbg->row0 = done;
        llmr_engine_status st = forward(s, tokens + done, T, dbg, err, es);
        if (st != LLMR_ENGINE_OK) return st;
        done += (size_t)T;
    }
    return LLMR_ENGINE_OK;
}

static llmr_engine_status check_tokens(const gptoss_session *s, const int32_t *tokens, size_t n, char *err, size_t es) {
    if (n && !tokens) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "n_tokens is %zu but tokens is NULL", n);
    if (n > (size_t)(s->max_ctx - s->n_ctx))
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "%zu tokens do not fit: the session holds %u of %u", n, s->n_ctx,
                    s->max_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->cfg.vocab_size)
            return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "token %d at index %zu is outside the vocabulary (0..%d)",
                        tokens[i], i, s->m->cfg.vocab_size - 1);
    return LLMR_ENGINE_OK;
}

llmr_engine_status gptoss_session_eval_debug(gptoss_session *s, const int32_t *tokens, size_t n, float *logits,
                                             float *hidden, float *router_logits, const int32_t *force_topk,
                                             char *err, size_t es) {
    gptoss_model *m = s->m;
    pthread_mutex_lock(&m->mu);
    cudaSetDevice(m->device);
    debug_out dbg = {hidden, router_logits, logits, force_topk, NULL, n, 0};
    llmr_engine_status st = check_tokens(s, tokens, n, err, es);
    for (size_t i = 0; st == LLMR_ENGINE_OK && force_topk && i < n * GPTOSS_TOPK * (size_t)m->cfg.num_layers; i++)
        if (force_topk[i] < 0 || force_topk[i] >= m->cfg.num_experts)
            st = fail(LLMR_ENGINE_UNSUPPORTED, err, es, "force_topk[%zu] = %d is not an expert id", i, force_topk[i]);
    if (st == LLMR_ENGINE_OK && logits &&
        cudaMalloc((void **)&dbg.logits_dev, (size_t)m->chunk * m->cfg.vocab_size * sizeof(float)) != cudaSuccess)
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "no GPU memory for %d rows of debug logits", m->chunk);
    if (st == LLMR_ENGINE_OK) st = eval_tokens(s, tokens, n, &dbg, err, es);
    cudaFree(dbg.logits_dev);
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* ---------------------------------------------------------------- decode step as a CUDA graph
 *
 * A decode step is 6 launches per layer with the fused kernels (17 with LLMR_GPTOSS_FUSED=0); launched one by one, the gaps between them
 * cost more than the kernels. So the step is captured once per session as a CUDA graph and replayed.
 * Everything that changes between steps lives in device memory the kernels read: the token in m->tok
 * (written there by the sampler) and the position in m->pos (set by one tiny kernel before the replay);
 * K/V go to the cache row *m->pos through m->kn/m->vn. The graph binds this session's KV cache and
 * logits and the model's workspace: one graph per session, captured at its first decode step and
 * destroyed with it (the model's mutex serialises every replay, so sharing the workspace is safe). */

/* Enqueues the forward pass of the token in m->tok at position *m->pos; the distribution lands in
 * s->logits. Every launch argument is fixed for the session, so this sequence can be captured. */
static cudaError_t decode_body(gptoss_session *s, step_prof *prof) {
    gptoss_model *m = s->m;
    const gptoss_config *c = &m->cfg;
    cudaStream_t st = m->stream;
    const int H = c->hidden_size, NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    const int QD = NH * D, KVD = NKV * D, E = c->num_experts, I = c->intermediate_size, V = c->vocab_size;
    const float eps = c->rms_norm_eps;
    cudaError_t e;
#define K_(call)                                    \
    do {                                            \
        if ((e = (call)) != cudaSuccess) return e;  \
    } while (0)
#define KP_(cat, call)                                                               \
    do {                                                                             \
        if ((e = (call)) != cudaSuccess) return e;                                   \
        if (prof && (e = prof_mark(prof, PROF_##cat, st)) != cudaSuccess) return e;  \
    } while (0)
    if (prof) K_(prof_begin(prof, st));
    KP_(EMBED, gptoss_embed(m->embed, m->tok, 1, H, m->x, st));
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const gptoss_kv kv = layer_kv(s, l);
        if (m->fused) { /* 6 launches per layer */
            KP_(QKV, gptoss_qkv_decode(m->x, w->attn_norm, eps, w->q_w, w->q_b, w->k_w, w->k_b, w->v_w, w->v_b, H, NH, NKV,
                                       m->pos, m->inv_freq, m->attn_factor, m->q, kv, st));
            const int win = c->layer_sliding[l] ? c->sliding_window : 0;
            if (m->split_attn)
                KP_(ATTN, gptoss_attention_decode(m->q, kv, w->sinks, m->pos, 1, NH, NKV, win, m->o, m->att_part, m->ctr + 1 + GPTOSS_DECODE_MAX_T, st));
            else
                KP_(ATTN, gptoss_attention_at(m->q, kv, w->sinks, m->pos, 1, NH, NKV, win, m->o, st));
            KP_(O, gptoss_linear(m->o, QD, w->o_w, w->o_b, 1, QD, H, m->x, H, 1, st));
            KP_(ROUTER, gptoss_moe_router_decode(m->x, w->mlp_norm, eps, w->router_w, w->router_b, 1, H, E, m->hsw, m->ids,
                                                 m->rw, m->grp, m->rl, m->ctr, st));
            KP_(GATE_UP, gptoss_moe_gate_up_decode(m->hsw, m->grp, 1, w->gu_blocks, w->gu_scales, w->gu_bias, E, H, I,
                                                   c->swiglu_alpha, c->swiglu_limit, m->act, st));
            KP_(DOWN, gptoss_moe_down_decode(m->act, m->grp, 1, m->rw, w->dn_blocks, w->dn_scales, w->dn_bias, E, I, H, m->x,
                                             st));
            continue;
        }
        KP_(NORM, gptoss_rmsnorm(m->x, w->attn_norm, 1, H, eps, m->h, st));
        KP_(Q, gptoss_linear(m->h, H, w->q_w, w->q_b, 1, H, QD, m->q, QD, 0, st));
        KP_(KV, gptoss_linear(m->h, H, w->k_w, w->k_b, 1, H, KVD, m->kn, KVD, 0, st));
        KP_(KV, gptoss_linear(m->h, H, w->v_w, w->v_b, 1, H, KVD, m->vn, KVD, 0, st));
        KP_(ROPE_STORE, gptoss_rope_at(m->q, NH, m->pos, m->inv_freq, m->attn_factor, st));
        KP_(ROPE_STORE, gptoss_rope_at(m->kn, NKV, m->pos, m->inv_freq, m->attn_factor, st));
        KP_(ROPE_STORE, gptoss_kv_store(m->kn, m->vn, 1, m->pos, kv, st));
        KP_(ATTN, gptoss_attention_at(m->q, kv, w->sinks, m->pos, 1, NH, NKV, c->layer_sliding[l] ? c->sliding_window : 0,
                               m->o, st));
        KP_(O, gptoss_linear(m->o, QD, w->o_w, w->o_b, 1, QD, H, m->x, H, 1, st));
        KP_(NORM, gptoss_rmsnorm(m->x, w->mlp_norm, 1, H, eps, m->h, st));
        KP_(ROUTER, gptoss_linear(m->h, H, w->router_w, w->router_b, 1, H, E, m->rl, E, 0, st));
        KP_(ROUTER, gptoss_router_topk(m->rl, 1, E, m->ids, m->rw, st));
        KP_(ROUTER, gptoss_moe_route(m->ids, 1, E, m->counts, m->offsets, m->pair_token, m->pair_of, st));
        KP_(GATE_UP, gptoss_mxfp4_grouped(m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts, m->offsets,
                                E, 1, H, 2 * I, m->gu, st));
        KP_(SWIGLU, gptoss_swiglu(m->gu, GPTOSS_TOPK, I, c->swiglu_alpha, c->swiglu_limit, m->act, st));
        KP_(DOWN, gptoss_mxfp4_grouped(m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, 1, I,
                                H, m->dn, st));
        KP_(COMBINE, gptoss_moe_combine(m->dn, m->rw, m->pair_of, 1, H, m->x, st));
    }
    KP_(NORM, gptoss_rmsnorm(m->x, m->norm, 1, H, eps, m->h, st));
    KP_(LM_HEAD, gptoss_linear(m->h, H, m->lm_head, NULL, 1, H, V, s->logits, V, 0, st));
#undef KP_
#undef K_
    return cudaSuccess;
}

/* Captures decode_body into s->graph once. A failed capture leaves s->graph NULL and names the cause. */
static llmr_engine_status decode_graph(gptoss_session *s, char *err, size_t es) {
    gptoss_model *m = s->m;
    if (s->graph) return LLMR_ENGINE_OK;
    cudaGraph_t g = NULL;
    /* ThreadLocal: other threads may allocate sessions meanwhile; only this thread is restricted. */
    CUDA_TRY(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal), "decode graph capture");
    cudaError_t e = decode_body(s, NULL);
    cudaError_t e2 = cudaStreamEndCapture(m->stream, &g);
    if (e == cudaSuccess) e = e2;
    cudaGraphExec_t x = NULL;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return fail(e == cudaErrorMemoryAllocation ? LLMR_ENGINE_OOM_VRAM : LLMR_ENGINE_INTERNAL, err, es,
                    "CUDA error capturing the decode step: %s", cudaGetErrorString(e));
    }
    s->graph = x;
    return LLMR_ENGINE_OK;
}

/* Appends the token already in m->tok at position n_ctx: sets *m->pos, replays the graph. Asynchronous:
 * the next sampling launch is ordered after it on the stream, so no host wait is needed here. */
static llmr_engine_status decode_step(gptoss_session *s, char *err, size_t es) {
    gptoss_model *m = s->m;
    llmr_engine_status pr = ensure_pages(s, (uint64_t)s->n_ctx + 1, err, es); /* outside the graph */
    if (pr != LLMR_ENGINE_OK) return pr;
    if (m->prof) { /* LLMR_GPTOSS_PROFILE=1: the same launches, one by one, timed */
        CUDA_TRY(gptoss_set_i32(m->pos, (int32_t)s->n_ctx, m->stream), "decode position");
        CUDA_TRY(decode_body(s, m->prof), "decode step (profiled)");
        CUDA_TRY(prof_collect(m->prof, 0), "decode step profile");
        s->n_ctx++;
        s->have_logits = 1;
        return LLMR_ENGINE_OK;
    }
    llmr_engine_status r = decode_graph(s, err, es);
    if (r != LLMR_ENGINE_OK) return r;
    CUDA_TRY(gptoss_set_i32(m->pos, (int32_t)s->n_ctx, m->stream), "decode position");
    CUDA_TRY(cudaGraphLaunch(s->graph, m->stream), "decode graph launch");
    s->n_ctx++;
    s->have_logits = 1;
    return LLMR_ENGINE_OK;
}

/* ---------------------------------------------------------------- scheduler (continuous batching)
 *
 * One engine thread per model owns the stream. generate() validates its request, queues it and waits;
 * tokens come back through the request's own array and the caller runs on_token on its own thread
 * (ABI). Each scheduler iteration:
 *   1. admits queued requests (up to GPTOSS_MAX_BATCH rows in flight) and prefills the first admitted
 *      one: one GPTOSS_INTERLEAVE_CHUNK-token slice when other rows are decoding (so they keep flowing),
 *      its whole prompt in chunks of the prefill chunk size when nothing else runs;
 *   2. waits until every running row's caller has consumed the tokens it was handed (the callback of
 *      token t runs while the GPU evaluates t, and its "stop" must be known before t+1 is handed out);
 *   3. finishes rows that are done (stop id / max_tokens after their last token was evaluated, a callback
 *      stop, cancel, a full context), samples one token for every other row with that row's own
 *      parameters and RNG (B launches, one host wait for all B ids), hands the tokens out;
 *   4. evaluates the new tokens: one row -> the session's batch-1 CUDA graph (decode_step, unchanged);
 *      several -> one batched step (batched_step: B rows, each at its own position through its own
 *      block table; launches, no graph).
 * A row's token stream depends only on its own logits and RNG, so a seed gives the same tokens whatever
 * the batch up to fp32 summation order (the batched linear kernels sum in another order than the T = 1
 * GEMV: ~1e-6 relative, which flips a token only at a near-tie). The debug eval path takes the same
 * model mutex as an iteration, so it is serialised with the scheduler. */

typedef struct gen_req {
    gptoss_session *s;
    const llmr_generate_request *in;
    float *logits_out;
    struct gen_req *next;
    /* engine thread only */
    size_t prefilled;
    gptoss_sample_args a;
    uint64_t rng;
    int penalties, finishing; /* finishing: its last token is being evaluated; then it ends */
    llmr_finish_reason finish_pending;
    const float *logits; /* this row's next distribution: s->logits or a row of m->blogits */
    /* shared with the caller, under m->q_mu */
    int32_t *toks;
    uint32_t cap, n_emitted, n_acked;
    int cb_stop, done;
    pthread_cond_t cv;
    llmr_engine_status st;
    llmr_generate_result res;
    char err[512];
} gen_req;

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Hands r back to its caller (engine thread; r's GPU work must be complete). */
static void req_done(gptoss_model *m, gen_req *r, llmr_engine_status st, llmr_finish_reason fin, const char *msg) {
    pthread_mutex_lock(&m->q_mu);
    r->st = st;
    r->res.finish = st == LLMR_ENGINE_CANCELLED ? LLMR_FINISH_CANCELLED : fin;
    if (r->cb_stop && st == LLMR_ENGINE_OK) r->res.finish = LLMR_FINISH_STOP;
    r->res.n_context = r->s->n_ctx;
    if (msg && st != LLMR_ENGINE_OK) snprintf(r->err, sizeof r->err, "%s", msg);
    r->done = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&m->q_mu);
}

/* Fails every running row (a CUDA error in a step concerns all of them). */
static void fail_all(gptoss_model *m, llmr_engine_status st, const char *msg) {
    cudaStreamSynchronize(m->stream);
    for (int i = 0; i < m->n_rows; i++) req_done(m, m->rows[i], st, LLMR_FINISH_LENGTH, msg);
    m->n_rows = 0;
}

/* Prefill work for the first admitted request; moves it to the running rows when its prompt is in. */
static void sched_prefill(gptoss_model *m) {
    gen_req *r = m->pf_head;
    if (!r) return;
    gptoss_session *s = r->s;
    char err[512] = "";
    const size_t n = r->in->n_tokens;
    llmr_engine_status st = LLMR_ENGINE_OK;
    do { /* one chunk when rows are decoding, else the whole prompt */
        if (cancelled(s)) { st = fail(LLMR_ENGINE_CANCELLED, err, sizeof err, "cancelled during prefill"); break; }
        if (r->prefilled >= n) break;
        /* While rows decode, a prompt goes in slices of GPTOSS_INTERLEAVE_CHUNK so their next tokens wait
         * for one slice (tens of ms) rather than a whole chunk; alone, it takes the full chunk. */
        const size_t cap = m->n_rows ? (m->chunk < GPTOSS_INTERLEAVE_CHUNK ? m->chunk : GPTOSS_INTERLEAVE_CHUNK) : m->chunk;
        const int T = (int)(n - r->prefilled < cap ? n - r->prefilled : cap);
        st = forward(s, r->in->tokens + r->prefilled, T, NULL, err, sizeof err);
        if (st == LLMR_ENGINE_OK) r->prefilled += (size_t)T;
    } while (st == LLMR_ENGINE_OK && m->n_rows == 0 && r->prefilled < n);
    if (st == LLMR_ENGINE_OK && r->prefilled < n) return; /* more chunks next iteration */
    m->pf_head = r->next;
    if (!m->pf_head) m->pf_tail = NULL;
    m->n_pf--;
    r->next = NULL;
    if (st != LLMR_ENGINE_OK) { req_done(m, r, st, LLMR_FINISH_LENGTH, err); return; }
    const int V = m->cfg.vocab_size;
    cudaError_t e = cudaSuccess;
    if (r->logits_out) e = cudaMemcpyAsync(r->logits_out, s->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess && r->penalties) e = cudaMemsetAsync(s->counts, 0, (size_t)V * sizeof(int32_t), m->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess) {
        snprintf(err, sizeof err, "CUDA error after prefill: %s", cudaGetErrorString(e));
        req_done(m, r, LLMR_ENGINE_INTERNAL, LLMR_FINISH_LENGTH, err);
        return;
    }
    r->logits = s->logits;
    if (r->in->max_tokens == 0) { req_done(m, r, LLMR_ENGINE_OK, LLMR_FINISH_LENGTH, NULL); return; }
    m->rows[m->n_rows++] = r;
}

/* A linear over n rows in groups of at most m->batch_rows rows: with T <= 4 gptoss_linear takes its
 * GEMVs, which stream W once per group near the copy bandwidth; its T > 4 tile kernel (written for
 * prefill) is far slower for a few rows (a one-launch 8-row step took ~110 ms, docs/performance.md). */
static cudaError_t linear_groups(gptoss_model *m, const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n,
                                 int K, int N, float *y, int ldy, int accumulate) {
    /* Enough rows to pay for tensor cores: one cuBLAS GEMM over every row (the weights read once, not
     * once per group), as the prefill does. A shape beyond the scratch falls back to the row groups. */
    if (m->use_tc && m->batch_tc && n >= GPTOSS_TC_MIN_T) {
        cudaError_t e = gptoss_tc_linear(&m->tc, x, ldx, W, b, n, K, N, y, ldy, accumulate);
        if (e != cudaErrorInvalidValue) return e;
    }
    for (int g = 0; g < n; g += m->batch_rows) {
        const int r = n - g < m->batch_rows ? n - g : m->batch_rows;
        cudaError_t e = gptoss_linear(x + (size_t)g * ldx, ldx, W, b, r, K, N, y + (size_t)g * ldy, ldy, accumulate,
                                      m->stream);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* The forward pass of n <= GPTOSS_MAX_BATCH rows whose tokens, positions and block tables are already
 * on the device (d_tok[n], d_pos[n], d_tab[n][max_pages]); row b's distribution goes to
 * logits + b * vocab. Norms, RoPE, KV store and attention take all n rows (per-row positions and
 * tables); the bf16 linears run in row groups (linear_groups); the MoE block is decode2's fused
 * T = 1..64 kernels (each touched expert read once per group of up to 4 of its tokens), or with
 * LLMR_GPTOSS_FUSED=0 the per-op kernels over all n rows. */
static_assert(GPTOSS_MAX_BATCH <= GPTOSS_DECODE_MAX_T && GPTOSS_MAX_BATCH <= GPTOSS_CHUNK,
              "a batched step's rows must fit the fused MoE kernels and the chunk workspace");

static cudaError_t batched_rows(gptoss_model *m, const int32_t *d_tok, const int32_t *d_pos, const int32_t *d_tab,
                                int n, float *logits) {
    const gptoss_config *c = &m->cfg;
    cudaStream_t st = m->stream;
    const int H = c->hidden_size, NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    const int QD = NH * D, KVD = NKV * D, E = c->num_experts, I = c->intermediate_size, V = c->vocab_size;
    const float eps = c->rms_norm_eps;
    cudaError_t e;
#define K_(call)                                   \
    do {                                           \
        if ((e = (call)) != cudaSuccess) return e; \
    } while (0)
    K_(gptoss_embed(m->embed, d_tok, n, H, m->x, st));
    gptoss_kv kv;
    kv.pool = m->kv_pool;
    kv.table = d_tab;
    kv.max_pages = (int)m->max_pages;
    kv.kvd = KVD;
    kv.page_floats = (long long)m->page_floats;
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        kv.layer_off = (long long)l * 2 * GPTOSS_KV_PAGE * KVD;
        K_(gptoss_rmsnorm(m->x, w->attn_norm, n, H, eps, m->h, st));
        K_(linear_groups(m, m->h, H, w->q_w, w->q_b, n, H, QD, m->q, QD, 0));
        K_(linear_groups(m, m->h, H, w->k_w, w->k_b, n, H, KVD, m->kn, KVD, 0));
        K_(linear_groups(m, m->h, H, w->v_w, w->v_b, n, H, KVD, m->vn, KVD, 0));
        K_(gptoss_rope_rows(m->q, QD, n, NH, d_pos, m->inv_freq, m->attn_factor, st));
        K_(gptoss_rope_rows(m->kn, KVD, n, NKV, d_pos, m->inv_freq, m->attn_factor, st));
        K_(gptoss_kv_store(m->kn, m->vn, n, d_pos, kv, st));
        K_(gptoss_attention_at(m->q, kv, w->sinks, d_pos, n, NH, NKV, c->layer_sliding[l] ? c->sliding_window : 0, m->o,
                               st));
        K_(linear_groups(m, m->o, QD, w->o_w, w->o_b, n, QD, H, m->x, H, 1));
        if (m->fused) {
            K_(gptoss_moe_router_decode(m->x, w->mlp_norm, eps, w->router_w, w->router_b, n, H, E, m->hsw, m->ids, m->rw,
                                        m->grp, m->rl, m->ctr, st));
            K_(gptoss_moe_gate_up_decode(m->hsw, m->grp, n, w->gu_blocks, w->gu_scales, w->gu_bias, E, H, I,
                                         c->swiglu_alpha, c->swiglu_limit, m->act, st));
            K_(gptoss_moe_down_decode(m->act, m->grp, n, m->rw, w->dn_blocks, w->dn_scales, w->dn_bias, E, I, H, m->x, st));
            continue;
        }
        K_(gptoss_rmsnorm(m->x, w->mlp_norm, n, H, eps, m->h, st));
        K_(gptoss_linear(m->h, H, w->router_w, w->router_b, n, H, E, m->rl, E, 0, st));
        K_(gptoss_router_topk(m->rl, n, E, m->ids, m->rw, st));
        K_(gptoss_moe_route(m->ids, n, E, m->counts, m->offsets, m->pair_token, m->pair_of, st));
        K_(gptoss_mxfp4_grouped(m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts, m->offsets, E,
                                n, H, 2 * I, m->gu, st));
        K_(gptoss_swiglu(m->gu, n * GPTOSS_TOPK, I, c->swiglu_alpha, c->swiglu_limit, m->act, st));
        K_(gptoss_mxfp4_grouped(m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, n, I,
                                H, m->dn, st));
        K_(gptoss_moe_combine(m->dn, m->rw, m->pair_of, n, H, m->x, st));
    }
    K_(gptoss_rmsnorm(m->x, m->norm, n, H, eps, m->h, st));
    K_(linear_groups(m, m->h, H, m->lm_head, NULL, n, H, V, logits, V, 0));
#undef K_
    return cudaSuccess;
}

/* Enqueues one forward step for B >= 2 rows, row b = token toks[b] of rows[b]'s session at its n_ctx,
 * through its own block table; distributions land in m->blogits rows. Pages must be reserved. */
static cudaError_t batched_step(gptoss_model *m, gen_req *const *rows, const int32_t *toks, int B) {
    const int MP = (int)m->max_pages;
    int32_t *h_tok = m->bstage_host, *h_pos = h_tok + GPTOSS_MAX_BATCH, *h_tab = h_pos + GPTOSS_MAX_BATCH;
    for (int b = 0; b < B; b++) {
        const gptoss_session *s = rows[b]->s;
        h_tok[b] = toks[b];
        h_pos[b] = (int32_t)s->n_ctx;
        memcpy(h_tab + (size_t)b * MP, s->tab.pages, (size_t)s->tab.n * sizeof(int32_t));
    }
    int32_t *d_tok = m->bstage_dev, *d_pos = d_tok + GPTOSS_MAX_BATCH, *d_tab = d_pos + GPTOSS_MAX_BATCH;
    /* The host stage is rewritten only after the next step's host wait, so one async copy suffices. */
    cudaError_t e = cudaMemcpyAsync(d_tok, h_tok, ((size_t)2 * GPTOSS_MAX_BATCH + (size_t)B * MP) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess) e = batched_rows(m, d_tok, d_pos, d_tab, B, m->blogits);
    return e;
}

/* Ends rows that are done before sampling; returns how many rows remain to sample (compacted first in
 * m->rows). Finished rows whose last distribution sits in m->blogits get it copied to their session
 * (a next turn with no new tokens samples from s->logits). */
static int sched_retire(gptoss_model *m) {
    gen_req *fin[GPTOSS_MAX_BATCH];
    llmr_engine_status fst[GPTOSS_MAX_BATCH];
    llmr_finish_reason frs[GPTOSS_MAX_BATCH];
    int nf = 0, keep = 0;
    const int V = m->cfg.vocab_size;
    for (int i = 0; i < m->n_rows; i++) {
        gen_req *r = m->rows[i];
        gptoss_session *s = r->s;
        llmr_engine_status st = LLMR_ENGINE_OK;
        llmr_finish_reason fr = LLMR_FINISH_LENGTH;
        int end = 1;
        if (r->finishing) fr = r->finish_pending;
        else if (r->cb_stop) fr = LLMR_FINISH_STOP;
        else if (cancelled(s)) st = LLMR_ENGINE_CANCELLED;
        else if (s->n_ctx >= s->max_ctx) fr = LLMR_FINISH_LENGTH; /* context full */
        else end = 0;
        if (!end) { m->rows[keep++] = r; continue; }
        if (r->logits != s->logits) /* ordered before the next batched step overwrites m->blogits */
            cudaMemcpyAsync(s->logits, r->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToDevice, m->stream);
        fin[nf] = r; fst[nf] = st; frs[nf] = fr; nf++;
    }
    m->n_rows = keep;
    if (nf) {
        cudaError_t e = cudaStreamSynchronize(m->stream);
        for (int i = 0; i < nf; i++) {
            if (e != cudaSuccess) {
                char msg[200];
                snprintf(msg, sizeof msg, "CUDA error in the decode step: %s", cudaGetErrorString(e));
                req_done(m, fin[i], LLMR_ENGINE_INTERNAL, LLMR_FINISH_LENGTH, msg);
            } else {
                req_done(m, fin[i], fst[i], frs[i], fst[i] == LLMR_ENGINE_CANCELLED ? "cancelled" : NULL);
            }
        }
        if (e != cudaSuccess) fail_all(m, LLMR_ENGINE_INTERNAL, "CUDA error in the decode step");
    }
    return keep;
}

/* One decode step over the running rows (see the section comment, steps 2-4). */
static void sched_decode(gptoss_model *m) {
    const int V = m->cfg.vocab_size;
    char err[512];
    /* 2: every handed-out token consumed (its callback's stop is known) */
    pthread_mutex_lock(&m->q_mu);
    for (int i = 0; i < m->n_rows; i++)
        while (m->rows[i]->n_acked < m->rows[i]->n_emitted) pthread_cond_wait(&m->ack_cv, &m->q_mu);
    pthread_mutex_unlock(&m->q_mu);
    /* 3: retire, sample, hand out */
    const int B = sched_retire(m);
    if (B == 0) return;
    cudaError_t e = m->prof ? prof_begin(m->prof, m->stream) : cudaSuccess; /* LLMR_GPTOSS_PROFILE=1 */
    for (int b = 0; b < B && e == cudaSuccess; b++) {
        gen_req *r = m->rows[b];
        r->a.u = (float)(splitmix64(&r->rng) >> 40) * (1.0f / 16777216.0f);
        e = gptoss_sample(r->logits, V, r->penalties ? r->s->counts : NULL, r->a, m->sample_work, m->tok + b, m->stream);
        if (e == cudaSuccess && r->penalties) e = gptoss_count_token(r->s->counts, m->tok + b, m->stream);
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(m->tok_host, m->tok, (size_t)B * sizeof(int32_t), cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess) e = cudaEventRecord(m->tok_ev, m->stream);
    if (e == cudaSuccess && m->prof) e = prof_mark(m->prof, PROF_SAMPLE, m->stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(m->tok_ev);
    if (e == cudaSuccess && m->prof) e = prof_collect(m->prof, 1);
    if (e != cudaSuccess) {
        snprintf(err, sizeof err, "CUDA error in sampling: %s", cudaGetErrorString(e));
        fail_all(m, LLMR_ENGINE_INTERNAL, err);
        return;
    }
    int32_t toks[GPTOSS_MAX_BATCH];
    uint64_t handed = 0;
    pthread_mutex_lock(&m->q_mu);
    for (int b = 0; b < B; b++) {
        gen_req *r = m->rows[b];
        const int32_t tok = m->tok_host[b];
        toks[b] = tok;
        if (tok < 0 || tok >= V || r->n_emitted >= r->cap) { /* a sampler bug: never hand it out or evaluate it */
            toks[b] = -1;
            r->finishing = 1;
            r->finish_pending = LLMR_FINISH_LENGTH;
            continue;
        }
        r->toks[r->n_emitted++] = tok;
        r->res.n_generated++;
        handed++;
        pthread_cond_signal(&r->cv);
        for (size_t k = 0; k < r->in->n_stop_ids; k++)
            if (r->in->stop_ids[k] == tok) { r->finishing = 1; r->finish_pending = LLMR_FINISH_STOP; }
        if (!r->finishing && r->res.n_generated >= r->in->max_tokens) {
            r->finishing = 1;
            r->finish_pending = LLMR_FINISH_LENGTH;
        }
    }
    pthread_mutex_unlock(&m->q_mu);
    __atomic_add_fetch(&m->tokens_generated, handed, __ATOMIC_RELAXED);
    /* 4: evaluate every handed-out token (so the session holds it), each row's pages first */
    gen_req *ev[GPTOSS_MAX_BATCH];
    int32_t evt[GPTOSS_MAX_BATCH];
    int nev = 0, first_b = -1, keep = 0;
    for (int b = 0; b < B; b++) {
        gen_req *r = m->rows[b];
        gptoss_session *s = r->s;
        llmr_engine_status st = LLMR_ENGINE_OK;
        if (toks[b] < 0 || toks[b] >= V || (st = ensure_pages(s, (uint64_t)s->n_ctx + 1, err, sizeof err)) != LLMR_ENGINE_OK) {
            /* Not evaluated: its distribution moves to the session before the next batched step
             * overwrites m->blogits. A row out of KV pages ends now with the pool's message. */
            if (r->logits != s->logits) {
                cudaMemcpyAsync(s->logits, r->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToDevice, m->stream);
                r->logits = s->logits;
            }
            if (st == LLMR_ENGINE_OK) { m->rows[keep++] = r; continue; } /* retired next iteration */
            cudaStreamSynchronize(m->stream);
            req_done(m, r, st, LLMR_FINISH_LENGTH, err);
            continue;
        }
        m->rows[keep++] = r;
        if (first_b < 0) first_b = b;
        ev[nev] = r;
        evt[nev++] = toks[b];
    }
    m->n_rows = keep;
    if (nev == 0) return;
    if (nev == 1) { /* the batch-1 path: the session's CUDA graph, exactly as a lone generate */
        gptoss_session *s = ev[0]->s;
        llmr_engine_status st;
        if (first_b != 0 && (e = gptoss_set_i32(m->tok, evt[0], m->stream)) != cudaSuccess) {
            snprintf(err, sizeof err, "CUDA error setting the decode token: %s", cudaGetErrorString(e));
            fail_all(m, LLMR_ENGINE_INTERNAL, err);
            return;
        }
        st = m->use_graph ? decode_step(s, err, sizeof err) : forward(s, &evt[0], 1, NULL, err, sizeof err);
        if (st != LLMR_ENGINE_OK) { fail_all(m, st, err); return; }
        ev[0]->logits = s->logits;
        return;
    }
    e = batched_step(m, ev, evt, nev);
    if (e != cudaSuccess) {
        snprintf(err, sizeof err, "CUDA error in the batched decode step (%d rows): %s", nev, cudaGetErrorString(e));
        fail_all(m, LLMR_ENGINE_INTERNAL, err);
        return;
    }
    for (int b = 0; b < nev; b++) {
        ev[b]->s->n_ctx++;
        ev[b]->s->have_logits = 1;
        ev[b]->logits = m->blogits + (size_t)b * V;
    }
}

static void *sched_main(void *arg) {
    gptoss_model *m = (gptoss_model *)arg;
    cudaSetDevice(m->device);
    pthread_mutex_lock(&m->q_mu);
    for (;;) {
        while (!m->stopping && !m->q_head && m->n_rows == 0 && m->n_pf == 0) pthread_cond_wait(&m->q_cv, &m->q_mu);
        if (m->stopping) break;
        while (m->q_head && m->n_rows + m->n_pf < GPTOSS_MAX_BATCH) { /* admit */
            gen_req *r = m->q_head;
            m->q_head = r->next;
            if (!m->q_head) m->q_tail = NULL;
            r->next = NULL;
            if (m->pf_tail) m->pf_tail->next = r; else m->pf_head = r;
            m->pf_tail = r;
            m->n_pf++;
        }
        pthread_mutex_unlock(&m->q_mu);
        pthread_mutex_lock(&m->mu); /* the GPU: shared with the debug eval path */
        sched_prefill(m);
        if (m->n_rows) sched_decode(m);
        pthread_mutex_unlock(&m->mu);
        pthread_mutex_lock(&m->q_mu);
    }
    pthread_mutex_unlock(&m->q_mu);
    return NULL;
}

static int sched_start(gptoss_model *m) {
    if (pthread_create(&m->sched, NULL, sched_main, m)) return -1;
    m->sched_started = 1;
    return 0;
}

/* Unload: no generate runs any more (ABI), so the thread is idle or about to be. */
static void sched_stop(gptoss_model *m) {
    if (!m->sched_started) return;
    pthread_mutex_lock(&m->q_mu);
    m->stopping = 1;
    pthread_cond_signal(&m->q_cv);
    pthread_mutex_unlock(&m->q_mu);
    pthread_join(m->sched, NULL);
    m->sched_started = 0;
}

/* ---------------------------------------------------------------- generate */

/* Checks what can be checked before queueing (the session is this caller's alone during generate). */
static llmr_engine_status generate_check(gptoss_session *s, const llmr_generate_request *req, float *logits_out,
                                         char *err, size_t es) {
    llmr_engine_status st = check_tokens(s, req->tokens, req->n_tokens, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    if (req->n_tokens == 0 && !s->have_logits && (req->max_tokens > 0 || logits_out))
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "the session is empty and the request has no tokens");
    if (req->n_stop_ids && !req->stop_ids) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "n_stop_ids without stop_ids");
    return LLMR_ENGINE_OK;
}

llmr_engine_status gptoss_session_generate(gptoss_session *s, const llmr_generate_request *req, llmr_token_cb cb,
                                           void *user, llmr_generate_result *res_out, char *err, size_t es) {
    gptoss_model *m = s->m;
    gen_req r;
    memset(&r, 0, sizeof r);
    r.res.struct_size = sizeof r.res;
    r.s = s;
    r.in = req;
    r.logits_out = LLMR_HAS_FIELD(req, llmr_generate_request, logits_out) ? req->logits_out : NULL;
    __atomic_store_n(&s->cancel, 0, __ATOMIC_RELEASE);
    llmr_engine_status st = generate_check(s, req, r.logits_out, err, es);
    r.res.n_prompt = (uint32_t)req->n_tokens;
    /* At most one token per free position after the prompt (each handed-out token is evaluated). */
    const uint64_t room = (uint64_t)s->max_ctx - s->n_ctx - req->n_tokens;
    r.cap = (uint32_t)(req->max_tokens < room ? req->max_tokens : room);
    if (st == LLMR_ENGINE_OK && r.cap && !(r.toks = (int32_t *)malloc((size_t)r.cap * sizeof(int32_t))))
        st = fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory for %u generated tokens", r.cap);
    if (st != LLMR_ENGINE_OK) {
        r.res.n_context = s->n_ctx;
        goto out;
    }
    {
        const llmr_sampling_params *sp = &req->sampling;
        r.penalties = sp->frequency_penalty != 0.0f || sp->presence_penalty != 0.0f;
        r.rng = sp->seed ^ 0x6a09e667f3bcc909ull;
        r.a.temperature = sp->temperature;
        r.a.top_k = sp->top_k;
        r.a.top_p = sp->top_p;
        r.a.min_p = sp->min_p;
        r.a.frequency_penalty = sp->frequency_penalty;
        r.a.presence_penalty = sp->presence_penalty;
    }
    r.res.finish = LLMR_FINISH_LENGTH;
    pthread_cond_init(&r.cv, NULL);
    pthread_mutex_lock(&m->q_mu);
    if (m->q_tail) m->q_tail->next = &r; else m->q_head = &r;
    m->q_tail = &r;
    pthread_cond_signal(&m->q_cv);
    /* Hand tokens to on_token on this thread, outside the lock; acknowledge each batch so the engine
     * thread knows whether a callback asked to stop before it hands out the next token. */
    for (;;) {
        while (!r.done && r.n_acked == r.n_emitted) pthread_cond_wait(&r.cv, &m->q_mu);
        const uint32_t from = r.n_acked, to = r.n_emitted;
        const int done = r.done;
        pthread_mutex_unlock(&m->q_mu);
        int stop = 0;
        for (uint32_t i = from; i < to; i++)
            if (cb && !stop && cb(user, r.toks[i])) stop = 1;
        pthread_mutex_lock(&m->q_mu);
        if (stop) r.cb_stop = 1;
        r.n_acked = to;
        pthread_cond_broadcast(&m->ack_cv);
        if (done && r.n_acked == r.n_emitted) break;
    }
    pthread_mutex_unlock(&m->q_mu);
    pthread_cond_destroy(&r.cv);
    st = r.st;
    if (st != LLMR_ENGINE_OK) fail(st, err, es, "%s", r.err);
    if (r.cb_stop && st == LLMR_ENGINE_OK) r.res.finish = LLMR_FINISH_STOP;
out:
    free(r.toks);
    if (res_out) {
        uint32_t sz = res_out->struct_size && res_out->struct_size < sizeof r.res ? res_out->struct_size : (uint32_t)sizeof r.res;
        r.res.struct_size = sz;
        memcpy(res_out, &r.res, sz);
    }
    return st;
}
