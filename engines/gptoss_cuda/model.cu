/* model.cu — the tensor plan, weight streaming, load/free, sessions and their KV pages (model_impl.h). */
#include "engines/gptoss_cuda/env.h"
#include "engines/gptoss_cuda/model_impl.h"
#include "engines/gptoss_cuda/pdl.h"

/* ---------------------------------------------------------------- weights plan */

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

/* LLMR_GPTOSS_MOE_TILED (moe_tiled_fill says what each mode does): 2 auto (the default), 1 wherever it fits, 0 never. */
static int moe_tiled_mode(void) { return gptoss_env_int("LLMR_GPTOSS_MOE_TILED", 2, 0, 2); }

/* The experts' tiled copies of one layer (gptoss_mxfp4_tile: gate_up in its row order, then down, each 256-byte aligned);
 * 0 where the shapes have none. */
static size_t moe_tiled_gu_bytes(const gptoss_config *c) {
    return align256(gptoss_mxfp4_tiled_bytes(c->num_experts, 2 * c->intermediate_size, c->hidden_size));
}
static size_t moe_tiled_layer_bytes(const gptoss_config *c) {
    const size_t gu = moe_tiled_gu_bytes(c), dn = gptoss_mxfp4_tiled_bytes(c->num_experts, c->hidden_size, c->intermediate_size);
    return gu && dn ? gu + align256(dn) : 0;
}

/* The exact tensor set of a gpt-oss checkpoint for this config (names, dtypes, shapes). When m is
 * non-NULL each entry records the model field that receives the tensor's device address. A layer's four expert
 * tensors lie together, followed (LLMR_GPTOSS_MOE_TILED not 0) by the gap that lets their tiled copy take their place
 * (moe_tile_in_place; ~2% of them at the 20b's shapes). */
static int plan_build(const gptoss_config *c, gptoss_model *m, plan *p) {
    const uint64_t H = (uint64_t)c->hidden_size, QD = (uint64_t)c->num_heads * c->head_dim,
                   KVD = (uint64_t)c->num_kv_heads * c->head_dim, E = (uint64_t)c->num_experts,
                   I = (uint64_t)c->intermediate_size, V = (uint64_t)c->vocab_size;
    char nm[96];
    const int tiled_room = moe_tiled_mode() != 0;
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
        /* q, k, v weights back to back, then their biases: one [QD + 2 KVD, H] matrix for the fused q/k/v
         * linear (gptoss_qkv_tc) when the 256-byte alignment adds no gap (qkv_contiguous, at load) */
        NAME("model.layers.%d.self_attn.q_proj.weight", l); ADD(LLMR_ST_BF16, F(q_w), QD, H);
        NAME("model.layers.%d.self_attn.k_proj.weight", l); ADD(LLMR_ST_BF16, F(k_w), KVD, H);
        NAME("model.layers.%d.self_attn.v_proj.weight", l); ADD(LLMR_ST_BF16, F(v_w), KVD, H);
        NAME("model.layers.%d.self_attn.q_proj.bias", l); ADD(LLMR_ST_BF16, F(q_b), QD);
        NAME("model.layers.%d.self_attn.k_proj.bias", l); ADD(LLMR_ST_BF16, F(k_b), KVD);
        NAME("model.layers.%d.self_attn.v_proj.bias", l); ADD(LLMR_ST_BF16, F(v_b), KVD);
        NAME("model.layers.%d.self_attn.o_proj.weight", l); ADD(LLMR_ST_BF16, F(o_w), H, QD);
        NAME("model.layers.%d.self_attn.o_proj.bias", l); ADD(LLMR_ST_BF16, F(o_b), H);
        NAME("model.layers.%d.self_attn.sinks", l); ADD(LLMR_ST_BF16, F(sinks), (uint64_t)c->num_heads);
        NAME("model.layers.%d.post_attention_layernorm.weight", l); ADD(LLMR_ST_BF16, F(mlp_norm), H);
        NAME("model.layers.%d.mlp.router.weight", l); ADD(LLMR_ST_BF16, F(router_w), E, H);
        NAME("model.layers.%d.mlp.router.bias", l); ADD(LLMR_ST_BF16, F(router_b), E);
        const uint64_t experts_at = p->arena_bytes;
        NAME("model.layers.%d.mlp.experts.gate_up_proj_blocks", l); ADD(LLMR_ST_U8, F(gu_blocks), E, 2 * I, H / 32, 16);
        NAME("model.layers.%d.mlp.experts.gate_up_proj_scales", l); ADD(LLMR_ST_U8, F(gu_scales), E, 2 * I, H / 32);
        NAME("model.layers.%d.mlp.experts.down_proj_blocks", l); ADD(LLMR_ST_U8, F(dn_blocks), E, H, I / 32, 16);
        NAME("model.layers.%d.mlp.experts.down_proj_scales", l); ADD(LLMR_ST_U8, F(dn_scales), E, H, I / 32);
        if (tiled_room) { /* room for the tiled copy in the experts' place */
            const uint64_t tiled = moe_tiled_layer_bytes(c), have = p->arena_bytes - experts_at;
            if (tiled > have) p->arena_bytes += align256(tiled - have);
        }
        NAME("model.layers.%d.mlp.experts.gate_up_proj_bias", l); ADD(LLMR_ST_BF16, F(gu_bias), E, 2 * I);
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

/* Whether every layer's q, k, v weights (and biases) lie back to back in the arena (plan_build's order,
 * unless the 256-byte alignment put a gap between them). */
static int qkv_contiguous(const gptoss_model *m) {
    const gptoss_config *c = &m->cfg;
    const size_t H = (size_t)c->hidden_size, QD = (size_t)c->num_heads * c->head_dim,
                 KVD = (size_t)c->num_kv_heads * c->head_dim;
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        if (w->k_w != w->q_w + QD * H || w->v_w != w->k_w + KVD * H || w->k_b != w->q_b + QD || w->v_b != w->k_b + KVD)
            return 0;
    }
    return 1;
}

/* Prompt lengths the load runs once (model_warmup), up to the chunk and the context. */
static const int warmup_lengths[] = {32, 48, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024, 1536, 2048, 4096};

/* Runs a prompt of each warmup_lengths through the forward pass of a scratch session before the model
 * takes requests (LLMR_GPTOSS_WARMUP=0: not). Why: the first use of each cuBLAS kernel variant loads
 * it (lazy module loading) and the first prompt of each new length paid for that: 81.6 ms instead of 18
 * for a first 128-token prompt, 180 ms instead of 53 for the experts of a first 768-token one (H200,
 * docs/performance.md "Session 8: the cold-shape cost"). A failure here fails the load with its cause:
 * the same path would fail the first request. */
static llmr_engine_status model_warmup(gptoss_model *m, char *err, size_t es) {
    const uint32_t cap = m->max_context < (uint32_t)m->chunk ? m->max_context : (uint32_t)m->chunk;
    gptoss_session *s = NULL;
    llmr_engine_status st = gptoss_session_new(m, m->max_context, &s, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    int32_t *tok = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    if (!tok) {
        gptoss_session_free(s);
        return fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory for the warm-up prompt");
    }
    for (uint32_t i = 0; i < cap; i++) tok[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)m->cfg.vocab_size);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int runs = 0;
    for (size_t i = 0; i < sizeof warmup_lengths / sizeof warmup_lengths[0] && st == LLMR_ENGINE_OK; i++) {
        if ((uint32_t)warmup_lengths[i] > cap) break;
        s->n_ctx = 0; /* the scratch session's pages are overwritten, length after length */
        st = gptoss_forward(s, tok, warmup_lengths[i], NULL, err, es);
        runs++;
    }
    if (st == LLMR_ENGINE_OK && cudaStreamSynchronize(m->stream) != cudaSuccess)
        st = fail(LLMR_ENGINE_INTERNAL, err, es, "CUDA error after the warm-up: %s", cudaGetErrorString(cudaGetLastError()));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(tok);
    gptoss_session_free(s);
    if (st == LLMR_ENGINE_OK)
        mlog(m, LLMR_LOG_INFO, "warm-up: %d prompt lengths (32..%d tokens) in %.0f ms", runs,
             warmup_lengths[runs > 0 ? runs - 1 : 0],
             (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    else {
        char why[400];
        snprintf(why, sizeof why, "%s", err);
        st = fail(st, err, es, "warm-up prompt failed (LLMR_GPTOSS_WARMUP=0 skips it): %s", why);
    }
    return st;
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
 * off: it also needs every expert's dequantized weight, 1 GB more scratch on 20b). Session 5 (tc.h, tc_stacked.cu):
 * LLMR_GPTOSS_TC_DQ_ALL (default 1) one dequantization launch per projection into that 1 GB scratch;
 * LLMR_GPTOSS_TC_DENSE_STACKED (default 1) the K-stacked q/k/v/o; LLMR_GPTOSS_TC_STACKED=1 the K-stacked
 * experts (with LLMR_GPTOSS_TC_STREAMS=1..8 and LLMR_GPTOSS_TC_AHEAD=0|1, read at load). */
typedef struct prefill_settings {
    int use_tc, tc_attn, splits, chunk, batched, stacked, dense_stacked, dq_all, expert_cache, fused_mlp, f16;
} prefill_settings;

static prefill_settings prefill_settings_get(void) {
    prefill_settings p;
    p.use_tc = gptoss_env_int("LLMR_GPTOSS_TC", 1, 0, 1);
    p.tc_attn = gptoss_env_int("LLMR_GPTOSS_TC_ATTN", 1, 0, 1);
    p.splits = gptoss_env_int("LLMR_GPTOSS_TC_SPLIT", 2, 2, 3);
    p.chunk = gptoss_env_int("LLMR_GPTOSS_CHUNK", GPTOSS_CHUNK, GPTOSS_MAX_BATCH, 8192); /* a batched step uses the chunk workspace */
    p.batched = gptoss_env_int("LLMR_GPTOSS_TC_BATCHED", 0, 0, 1);
    /* 1: the K-stacked experts (tc.h "Stacked experts": no ys round trip, the dequantization on a second
     * stream; 3.2 GB of scratch on 20b); 0 (default: measured no faster at 4k, slower at 1k on the H200):
     * the split/ys/reduce path */
    p.stacked = gptoss_env_int("LLMR_GPTOSS_TC_STACKED", 0, 0, 1);
    /* 1 (default): the per-expert path dequantizes every used expert with one launch (1 GB of scratch on
     * 20b; 4k prefill 191.5 -> 185.3 ms on the H200). 0: a launch before each expert's GEMM. It was off
     * in sessions 5-7 together with DENSE_STACKED and LLMR_GPTOSS_ATC_STAGE, because with the three on
     * gptoss_batching --model on the 20b failed about half its runs; session 8's bisect (5 runs each)
     * put all of that on DENSE_STACKED (4 of 5) and none on this one (0 of 5, 0 of 6 in session 6). */
    p.dq_all = gptoss_env_int("LLMR_GPTOSS_TC_DQ_ALL", 1, 0, 1);
    /* 1 (default): the q/k/v/o linears of prompt chunks of GPTOSS_DENSE_STACKED_MIN_T tokens or more the
     * same way (tc.h "Stacked dense linears"; 47 MB of scratch on 20b); 0: gptoss_tc_linear's
     * split/ys/reduce. Off until session 10: the 20b batching check failed with it, and its session-10
     * oracle showed why (the stacked prompt path itself decides the batched token: docs/performance.md,
     * "Session 10: the batching check's oracle") */
    p.dense_stacked = gptoss_env_int("LLMR_GPTOSS_TC_DENSE_STACKED", 1, 0, 1);
    /* 1 (default): the per-expert path's gate_up reduce + SwiGLU + down split, and down reduce + combine, as two
     * kernels (tc.h gptoss_tc_mlp, the same bits); 0: five, for comparisons (docs/performance.md, "Session 11:
     * the experts' MLP without its fp32 round trips") */
    p.fused_mlp = gptoss_env_int("LLMR_GPTOSS_TC_FUSED_MLP", 1, 0, 1);
    /* every expert dequantized once at load (fp16 with the fp16 experts, else bf16; 1.59 GB a layer, 38 GB on
     * 20b), so the prompt path's cuBLAS experts skip the per-chunk dequantization (model_impl.h layer_weights; H100: 1,024-token
     * prefill 84.5 -> 50.4 ms, 4,096 197.4 -> 163.7; docs/performance.md "Session 10: the expert cache").
     * LLMR_GPTOSS_EXPERT_CACHE: 2 (auto, default) when it fits (expert_cache_fits), 1 always (the load
     * fails when it does not fit), 0 never. */
    p.expert_cache = gptoss_env_int("LLMR_GPTOSS_EXPERT_CACHE", 2, 0, 2);
    /* 1 (default): the prompt's experts on one fp16 part per activation, the weights exact in fp16 (tc.h "fp16
     * experts"; docs/performance.md "Session 12: the prompt's experts on one fp16 part"); 0: two bf16 parts.
     * Only gptoss_tc_mlp has the fp16 form, so it needs LLMR_GPTOSS_TC_FUSED_MLP=1 */
    p.f16 = gptoss_env_int("LLMR_GPTOSS_TC_F16", 1, 0, 1) && p.fused_mlp;
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
    CARVE(sample_work, float, gptoss_sample_work(V));
    CARVE(ids, int32_t, C * GPTOSS_TOPK);
    CARVE(counts, int32_t, 2 * E); /* [E, 2E): a packed prefill's precise rows (gptoss_moe_route_precise) */
    CARVE(offsets, int32_t, 2 * E);
    CARVE(pair_token, int32_t, P);
    CARVE(pair_of, int32_t, P);
    CARVE(tok, int32_t, C);
    CARVE(sample_out, int32_t, 1);
    CARVE(kn, float, C * c->num_kv_heads * c->head_dim); /* new K/V rows before they enter the pages */
    CARVE(vn, float, C * c->num_kv_heads * c->head_dim);
    CARVE(pos, int32_t, 1);
    CARVE(blogits, float, (uint64_t)GPTOSS_MAX_BATCH * V);
    CARVE(hsw, float, (uint64_t)GPTOSS_DECODE_MAX_T * H);
    CARVE(mstage, uint8_t, (uint64_t)GPTOSS_MSTAGE_ROWS * 16 * gptoss_mxfp4_stage_f16_units((int)(H > I ? H : I)));
    CARVE(grp, int32_t, gptoss_moe_groups_ints(GPTOSS_DECODE_MAX_T));
    CARVE(ctr, int32_t, GPTOSS_CTR_INTS(c)); /* the router's, the split attention's, the sampler's (model_impl.h) */
    CARVE(att_part, float, (uint64_t)c->num_heads * GPTOSS_ATT_SPLITS * (2 + GPTOSS_HEAD_DIM));
    if (ps.use_tc) {
        uint64_t xs_elems = gptoss_tc_xs_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, ps.batched);
        if (ps.stacked && gptoss_tc_xst_elems(ps.chunk, ps.splits, (int)H, (int)I) > xs_elems)
            xs_elems = gptoss_tc_xst_elems(ps.chunk, ps.splits, (int)H, (int)I);
        const uint64_t KVD = (uint64_t)c->num_kv_heads * c->head_dim;
        const uint64_t dense_rows = C * (uint64_t)gptoss_tc_kstack((int)(H > QD ? H : QD), ps.splits); /* T rows of Ks */
        if (ps.dense_stacked && dense_rows > xs_elems) xs_elems = dense_rows;
        /* gptoss_mxfp4_prompt_gemm's rows: up to 2 per pair (the precise rows' second parts) of gptoss_prompt_row
         * values, so the kernel fits every chunk (without the expert cache nothing else can take a chunk's experts
         * once they are tiled in place) */
        const uint64_t prompt_rows = 2 * C * GPTOSS_TOPK * (uint64_t)gptoss_prompt_row((int)(H > I ? H : I));
        if (prompt_rows > xs_elems) xs_elems = prompt_rows;
        CARVE(tc.xs, uint16_t, xs_elems);
        if (ps.dense_stacked) {
            CARVE(tc.wd, uint16_t, gptoss_tc_wd_elems((int)H, (int)QD, (int)KVD, (int)E, ps.splits));
            if (m) m->tc.wd_elems = gptoss_tc_wd_elems((int)H, (int)QD, (int)KVD, (int)E, ps.splits);
        }
        if (ps.stacked) {
            CARVE(tc.wst[0], uint16_t, gptoss_tc_wst_elems((int)H, (int)(2 * I), (int)E, ps.splits));
            CARVE(tc.wst[1], uint16_t, gptoss_tc_wst_elems((int)I, (int)H, (int)E, ps.splits));
        }
        CARVE(tc.ys, float, gptoss_tc_ys_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, (int)E));
        CARVE(tc.wbf, uint16_t, gptoss_tc_wbf_elems((int)H, (int)I, ps.batched || ps.dq_all ? (int)E : 1));
        CARVE(cublas_ws, char, GPTOSS_TC_CUBLAS_WS);
        if (ps.tc_attn) CARVE(atc_kvs, uint16_t, gptoss_atc_kvs_elems((int)c->num_kv_heads, GPTOSS_ATC_KVS_KEYS));
        if (ps.f16) {
            CARVE(tc.rshift, int32_t, 2 * P);
            CARVE(f16_shift, int32_t, (uint64_t)c->num_layers * 2 * E);
        }
        if (m) {
            m->tc.rshift_elems = ps.f16 ? 2 * P : 0;
            m->tc.xs_elems = xs_elems;
            if (ps.stacked) {
                m->tc.wst_elems[0] = gptoss_tc_wst_elems((int)H, (int)(2 * I), (int)E, ps.splits);
                m->tc.wst_elems[1] = gptoss_tc_wst_elems((int)I, (int)H, (int)E, ps.splits);
            }
            m->tc.ys_elems = gptoss_tc_ys_elems(ps.chunk, ps.splits, (int)H, (int)QD, (int)I, (int)E);
            m->tc.wbf_elems = gptoss_tc_wbf_elems((int)H, (int)I, ps.batched || ps.dq_all ? (int)E : 1);
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

/* Bytes of the expert cache (every layer's experts in 16 bits: fp16 or bf16); 0 when LLMR_GPTOSS_EXPERT_CACHE is 0 or the
 * prompt path has no cuBLAS experts (LLMR_GPTOSS_TC=0). */
static uint64_t expert_cache_bytes_for(const gptoss_config *c, prefill_settings ps) {
    if (!ps.expert_cache || !ps.use_tc) return 0;
    const uint64_t E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    return (uint64_t)c->num_layers * E * (2 * I * H + H * I) * sizeof(uint16_t);
}

/* Auto mode: the cache is taken only when the load, with it, stays within the budget (when one is given)
 * and leaves a fifth of the device (at least 2 GiB) free for other work: it is a speed-up, never the
 * reason a load fails or a later model does not fit. */
static uint64_t vram_reserve(size_t total_b) { return total_b / 5 > (2ull << 30) ? total_b / 5 : (2ull << 30); }
static int expert_cache_fits(uint64_t need, uint64_t cache, uint64_t budget, size_t free_b, size_t total_b) {
    return (!budget || need + cache <= budget) && need + cache + vram_reserve(total_b) <= free_b;
}

/* The fp16 experts' shifts (tc.h gptoss_mxfp4_f16_shifts) of every layer's gate_up and down, into m->f16_shift. */
static llmr_engine_status f16_shifts_fill(gptoss_model *m, char *err, size_t es) {
    const gptoss_config *c = &m->cfg;
    const int E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    for (int l = 0; l < c->num_layers; l++) {
        layer_weights *w = &m->layers[l];
        w->gu_shift = m->f16_shift + (size_t)l * 2 * E;
        w->dn_shift = w->gu_shift + E;
        cudaError_t e = gptoss_mxfp4_f16_shifts(w->gu_scales, E, 2 * I, H, (int32_t *)w->gu_shift, m->stream);
        if (e == cudaSuccess) e = gptoss_mxfp4_f16_shifts(w->dn_scales, E, H, I, (int32_t *)w->dn_shift, m->stream);
        if (e != cudaSuccess)
            return fail(LLMR_ENGINE_INTERNAL, err, es, "the fp16 experts' shifts (layer %d) failed: %s", l,
                        cudaGetErrorString(e));
    }
    return LLMR_ENGINE_OK;
}

/* LLMR_GPTOSS_ROUTER_SPLIT: each layer's router weights times its MLP norm (gptoss_router_rwt), for
 * gptoss_gemv1_router; after the weights are on the device. */
static llmr_engine_status router_rwt_fill(gptoss_model *m, char *err, size_t es) {
    const int H = m->cfg.hidden_size;
    for (int l = 0; l < m->cfg.num_layers; l++) {
        const cudaError_t e = gptoss_router_rwt(m->layers[l].router_w, m->layers[l].mlp_norm, H, 32,
                                                m->rwt + (size_t)l * H * 32, m->stream);
        if (e != cudaSuccess)
            return fail(LLMR_ENGINE_INTERNAL, err, es, "the router weights of LLMR_GPTOSS_ROUTER_SPLIT (layer %d) failed: %s",
                        l, cudaGetErrorString(e));
    }
    return LLMR_ENGINE_OK;
}

/* Layer w's experts tiled into out (moe_tiled_layer_bytes: gate_up, then down at moe_tiled_gu_bytes), *gt / *dt pointed
 * into it; enqueued on the model's stream. */
static cudaError_t moe_tile_layer(gptoss_model *m, const layer_weights *w, uint8_t *out, gptoss_mxfp4_tiled *gt,
                                  gptoss_mxfp4_tiled *dt) {
    const gptoss_config *c = &m->cfg;
    const int E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    const cudaError_t e = gptoss_mxfp4_tile(w->gu_blocks, w->gu_scales, E, 2 * I, H, 1, out, gt, m->stream);
    if (e != cudaSuccess) return e;
    return gptoss_mxfp4_tile(w->dn_blocks, w->dn_scales, E, H, I, 0, out + moe_tiled_gu_bytes(c), dt, m->stream);
}

/* The allocation of an optional copy of `total` bytes (a speed-up only: the experts' tiled copy, the stacked dense
 * weights), or NULL with one log line saying why: in auto mode (2) when it would leave less of the device free than the
 * reserve the expert cache's auto mode keeps (expert_cache_fits: a fifth of the device, at least 2 GiB); in either mode
 * when the load's budget (need: the bytes the load holds so far) or the device has no room. what: the copy's name in
 * the log; env: its switch. */
static void *optional_alloc(gptoss_model *m, const char *what, const char *env, int mode, uint64_t total, uint64_t need,
                            uint64_t budget) {
    size_t free_b = 0, total_b = 0;
    if (mode == 2 && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total + vram_reserve(total_b) > free_b) {
        mlog(m, LLMR_LOG_INFO, "%s off: %.2f GB more would leave too little of device %d's %.2f GB free (%.2f GB free; "
             "%s=1 takes it wherever it fits)", what, total / 1e9, m->device, total_b / 1e9, free_b / 1e9, env);
        return NULL;
    }
    void *buf = NULL;
    if (!total || (budget && need + total > budget) || cudaMalloc(&buf, total) != cudaSuccess) {
        (void)cudaGetLastError();
        mlog(m, mode == 1 ? LLMR_LOG_WARN : LLMR_LOG_INFO, "%s off: no room for it (%.1f MB; %s=%d)", what, total / 1e6,
             env, mode);
        return NULL;
    }
    return buf;
}

/* LLMR_GPTOSS_MOE_TILED: every layer's experts copied once more in gptoss_mxfp4_tile's layout, which the F16 form of
 * the streaming expert kernel reads (the batched steps' experts and short prompts': each warp's loads 1 KB in one
 * piece; docs/performance.md, sessions 30-31). A speed-up only, never the reason a load fails: 2 (auto, the default)
 * takes it where the device keeps, beside it, the reserve the expert cache's auto mode leaves (expert_cache_fits: a
 * fifth of the device, at least 2 GiB) and the load's budget allows it; 1 wherever the device and the budget allow it;
 * 0 never. The cache is decided first: on an 80 GB card with the 20b's cache (38 GB) the auto copy stays off. In auto
 * mode moe_tile_in_place (below) comes first: where every expert reader the load's settings pick reads the tiled
 * layout, the copy takes the experts' place and costs nothing. */
static void moe_tiled_fill(gptoss_model *m, int mode, uint64_t need, uint64_t budget) {
    const gptoss_config *c = &m->cfg;
    const size_t per = moe_tiled_layer_bytes(c), total = per * (size_t)c->num_layers;
    m->moe_tiled = optional_alloc(m, "tiled expert copy", "LLMR_GPTOSS_MOE_TILED", mode, total, need, budget);
    if (!m->moe_tiled) return;
    cudaError_t e = cudaSuccess;
    for (int l = 0; l < c->num_layers && e == cudaSuccess; l++) {
        layer_weights *w = &m->layers[l];
        e = moe_tile_layer(m, w, (uint8_t *)m->moe_tiled + per * (size_t)l, &w->gu_tiled, &w->dn_tiled);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess) {
        mlog(m, LLMR_LOG_WARN, "the experts' tiled copy failed (%s); going on without it", cudaGetErrorString(e));
        for (int l = 0; l < c->num_layers; l++) m->layers[l].gu_tiled = m->layers[l].dn_tiled = gptoss_mxfp4_tiled{NULL, NULL, NULL};
        cudaFree(m->moe_tiled);
        m->moe_tiled = NULL;
        return;
    }
    m->moe_tiled_bytes = total;
    mlog(m, LLMR_LOG_INFO, "tiled expert copy for the batched steps' experts: %.1f MB (LLMR_GPTOSS_MOE_TILED=0 turns it off)",
         total / 1e6);
}

/* LLMR_GPTOSS_MOE_E5 (moe_e5_fill says what each mode does): 2 auto (the default), 1 wherever it fits, 0 never. */
static int moe_e5_mode(void) { return gptoss_env_int("LLMR_GPTOSS_MOE_E5", 2, 0, 2); }

/* Bytes of one layer's e5m2 copy: its gate_up's, then its down's. */
static size_t moe_e5_layer_bytes(const gptoss_config *c) {
    const int E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    return gptoss_mxfp4_tiled_e5_bytes(E, 2 * I, H) + gptoss_mxfp4_tiled_e5_bytes(E, H, I);
}

/* LLMR_GPTOSS_MOE_E5: every layer's experts once more, one byte a weight (gptoss_mxfp4_tile_e5: the F16 form's fp16 values'
 * high bytes), read instead of the MXFP4 tiles by the batched steps' pre-staged F16 launches from moe_e5_min_pairs
 * pairs and by the prompt kernel: the same bits with a third of the decode's ALU work, for twice the bytes (19.5 GB on
 * the 20b). H200, session 38: the 64-row step rate +5%, prompts below 1,024 tokens 9% faster (those of 1,024 or more
 * 8% without the expert cache; with it they read the cache). A speed-up only (optional_alloc): 2 (auto, the default)
 * where the device keeps the expert cache's reserve beside it, so an 80 GB card that holds the cache goes without;
 * 1 wherever the device and the budget allow it; 0 never. Decided last, after the copies worth more. Needs the tiled
 * copies and the fp16 shifts; a layer with a block outside the tables' reach (kernels.h) turns it off for all. */
static void moe_e5_fill(gptoss_model *m, int mode, uint64_t need, uint64_t budget) {
    const gptoss_config *c = &m->cfg;
    const int E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    const size_t gu = gptoss_mxfp4_tiled_e5_bytes(E, 2 * I, H), per = moe_e5_layer_bytes(c),
                 total = per * (size_t)c->num_layers;
    if (!mode || !m->batch_moe_f16 || !per) return;
    for (int l = 0; l < c->num_layers; l++)
        if (!m->layers[l].gu_tiled.blocks || !m->layers[l].dn_tiled.blocks || !m->layers[l].gu_shift) return;
    void *buf = optional_alloc(m, "e5m2 expert copy", "LLMR_GPTOSS_MOE_E5", mode, total, need, budget);
    int32_t *bad = NULL;
    if (!buf) return;
    if (cudaMalloc((void **)&bad, sizeof(int32_t)) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(buf);
        mlog(m, LLMR_LOG_WARN, "e5m2 expert copy off: its 4-byte counter could not be allocated");
        return;
    }
    cudaError_t e = cudaMemsetAsync(bad, 0, sizeof(int32_t), m->stream);
    for (int l = 0; l < c->num_layers && e == cudaSuccess; l++) {
        const layer_weights *w = &m->layers[l];
        uint8_t *at = (uint8_t *)buf + per * (size_t)l;
        e = gptoss_mxfp4_tile_e5(&w->gu_tiled, w->gu_shift, E, 2 * I, H, at, bad, m->stream);
        if (e == cudaSuccess) e = gptoss_mxfp4_tile_e5(&w->dn_tiled, w->dn_shift, E, H, I, at + gu, bad, m->stream);
    }
    int32_t nbad = 0;
    if (e == cudaSuccess) e = cudaMemcpyAsync(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    cudaFree(bad);
    if (e != cudaSuccess || nbad) {
        if (e != cudaSuccess) mlog(m, LLMR_LOG_WARN, "the e5m2 expert copy failed (%s); going on without it", cudaGetErrorString(e));
        else mlog(m, LLMR_LOG_WARN, "e5m2 expert copy off: %d blocks' scales lie outside its reach", (int)nbad);
        cudaFree(buf);
        return;
    }
    for (int l = 0; l < c->num_layers; l++) {
        layer_weights *w = &m->layers[l];
        w->gu_tiled.e5 = (const uint8_t *)buf + per * (size_t)l;
        w->dn_tiled.e5 = w->gu_tiled.e5 + gu;
    }
    m->moe_e5 = buf;
    m->moe_e5_bytes = total;
    mlog(m, LLMR_LOG_INFO,
         "e5m2 expert copy for the batched steps' and the prompts' experts: %.1f MB (LLMR_GPTOSS_MOE_E5=0 turns it off)",
         total / 1e6);
}

/* LLMR_GPTOSS_DENSE_KEEP (dense_stacked_fill says what each mode does): 2 auto (the default), 1 wherever it fits, 0 never. */
static int dense_keep_mode(void) { return gptoss_env_int("LLMR_GPTOSS_DENSE_KEEP", 2, 0, 2); }

/* Bytes of every layer's q/k/v/o stacked with `splits` parts (tc.h "Stacked dense linears": [N, Ks] each; Ks is a
 * multiple of 8, so every weight and row stays 16-byte aligned one after the other). */
static uint64_t dense_stacked_bytes_for(const gptoss_config *c, int splits) {
    const uint64_t H = c->hidden_size, QD = (uint64_t)c->num_heads * c->head_dim,
                   KVD = (uint64_t)c->num_kv_heads * c->head_dim;
    const uint64_t kh = (uint64_t)gptoss_tc_kstack((int)H, splits), kq = (uint64_t)gptoss_tc_kstack((int)QD, splits);
    return (uint64_t)c->num_layers * ((QD + 2 * KVD) * kh + H * kq) * sizeof(uint16_t);
}

/* LLMR_GPTOSS_DENSE_KEEP: every layer's q/k/v/o stacked once at load for the prompt's stacked dense linears
 * (layer_weights q_st .. o_st), so that a chunk of m->dense_min_t tokens or more does not stack them again
 * (tc_stack_weight_kernel: ~1 ms of every such 20b chunk, whatever its length; docs/performance.md, session 37). The
 * same bits. A speed-up only, never the reason a load fails (optional_alloc): 2 auto (the default), 1 wherever the
 * device and the budget allow them, 0 never. Decided after the expert cache and the experts' tiled copy, which are
 * worth more. need: the bytes the load holds so far. */
static void dense_stacked_fill(gptoss_model *m, int mode, uint64_t need, uint64_t budget) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, QD = c->num_heads * c->head_dim, KVD = c->num_kv_heads * c->head_dim, S = m->tc.splits;
    const uint64_t total = dense_stacked_bytes_for(c, S);
    if (!mode || !m->use_tc || !m->tc.wd || H % 8 || QD % 8) return; /* no stacked dense linears to feed */
    void *buf = optional_alloc(m, "stacked dense weights", "LLMR_GPTOSS_DENSE_KEEP", mode, total, need, budget);
    if (!buf) return;
    const size_t kh = (size_t)gptoss_tc_kstack(H, S), kq = (size_t)gptoss_tc_kstack(QD, S);
    uint16_t *at = (uint16_t *)buf;
    cudaError_t e = cudaSuccess;
    for (int l = 0; l < c->num_layers && e == cudaSuccess; l++) {
        layer_weights *w = &m->layers[l];
        uint16_t *q = at, *k = q + (size_t)QD * kh, *v = k + (size_t)KVD * kh, *o = v + (size_t)KVD * kh;
        at = o + (size_t)H * kq;
        e = gptoss_tc_stack_weight(w->q_w, w->q_b, QD, H, S, q, m->stream);
        if (e == cudaSuccess) e = gptoss_tc_stack_weight(w->k_w, w->k_b, KVD, H, S, k, m->stream);
        if (e == cudaSuccess) e = gptoss_tc_stack_weight(w->v_w, w->v_b, KVD, H, S, v, m->stream);
        if (e == cudaSuccess) e = gptoss_tc_stack_weight(w->o_w, w->o_b, H, QD, S, o, m->stream);
        w->q_st = q;
        w->k_st = k;
        w->v_st = v;
        w->o_st = o;
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess) { /* every layer without them */
        mlog(m, LLMR_LOG_WARN, "stacking the dense weights at load failed (%s); each long chunk stacks them instead",
             cudaGetErrorString(e));
        for (int l = 0; l < c->num_layers; l++) {
            layer_weights *w = &m->layers[l];
            w->q_st = w->k_st = w->v_st = w->o_st = NULL;
        }
        cudaFree(buf);
        return;
    }
    m->dense_st = buf;
    m->dense_st_bytes = total;
    mlog(m, LLMR_LOG_INFO, "stacked dense weights for the prompt's long chunks: %.1f MB (LLMR_GPTOSS_DENSE_KEEP=0 "
         "turns them off)", total / 1e6);
}

/* Whether gptoss_mxfp4_prompt_gemm takes every prompt chunk's experts on the tc path (tc.cu mlp_f16: up to
 * tc.prompt_mma tokens, on sm_90; the workspace sizes its rows for a whole chunk), so that without the expert cache no
 * chunk needs the checkpoint's layout for dequantizing. */
static int prompt_kernel_covers(const gptoss_model *m) {
    return m->use_tc && m->tc.f16 && m->tc.prompt_mma >= m->chunk && gptoss_mxfp4_prompt_gemm_ok();
}

/* Whether the tiled copy can take the experts' place (moe_tile_in_place): every expert reader this load's settings
 * pick must read it. Those are the F16 form (batched steps from moe_mma_min_rows rows, prompts up to moe_mma_prefill
 * tokens, prompt_moe_f16), the tensor-core ring gate_up and the 2-rows-a-warp down at T = 1 (batch-1 and the steps of
 * up to batch_moe_per_row rows, which go row by row), and the expert cache's cuBLAS experts for longer prompts (no
 * dequantization from the experts) or, without the cache, gptoss_mxfp4_prompt_gemm for every longer chunk
 * (prompt_kernel_covers). Anything else (no cache and chunks the kernel does not take, the SIMT or pass-wise kernels,
 * the dp4a ring, the stacked experts, the precise debug forward, 4 rows a warp) keeps the checkpoint's layout. */
static int moe_tiled_in_place_ok(const gptoss_model *m) {
    const gptoss_config *c = &m->cfg;
    return m->batch_moe_f16 && m->prompt_moe_f16 && (m->expert_cache || prompt_kernel_covers(m)) && m->use_tc &&
           m->fused && m->moe_mma && m->moe_mma_stream && !m->moe_mma_t1 && !m->debug_precise && !m->tc.wst[0] &&
           gptoss_moe_decode_tiled_ok(c->hidden_size, c->intermediate_size) &&
           m->batch_moe_per_row + 1 >= m->moe_mma_min_rows && m->moe_mma_prefill + 1 >= GPTOSS_TC_MIN_T &&
           moe_tiled_layer_bytes(c) > 0;
}

/* The tiled copy in the experts' place, layer by layer: tiled into a scratch of one layer (~0.43 GB on the 20b), then
 * copied over the layer's four expert tensors and the gap plan_build left after them; the checkpoint's pointers are
 * cleared, so a reader that is not the tiled one faults loudly instead of reading tiles as rows. Called after the
 * expert cache and the fp16 shifts, which read the checkpoint's layout, and before the warm-up. The scratch is its
 * own allocation, freed at once (not the workspace: the fp16 shifts and the decode counters live there already);
 * without it the copy goes beside the experts instead (moe_tiled_fill), and the load says so. A failed kernel or copy
 * fails the load (some layers are tiled by then). */
static llmr_engine_status moe_tile_in_place(gptoss_model *m, char *err, size_t es) {
    const gptoss_config *c = &m->cfg;
    const size_t per = moe_tiled_layer_bytes(c);
    void *scratch = NULL;
    if (cudaMalloc(&scratch, per) != cudaSuccess) {
        (void)cudaGetLastError();
        mlog(m, LLMR_LOG_INFO, "experts not tiled in place: no room for a %.1f MB scratch", per / 1e6);
        return LLMR_ENGINE_OK;
    }
    cudaError_t e = cudaSuccess;
    for (int l = 0; l < c->num_layers && e == cudaSuccess; l++) {
        layer_weights *w = &m->layers[l];
        uint8_t *place = (uint8_t *)w->gu_blocks; /* plan_build: the four tensors, then the gap */
        gptoss_mxfp4_tiled gt, dt;
        e = moe_tile_layer(m, w, (uint8_t *)scratch, &gt, &dt);
        if (e == cudaSuccess) e = cudaMemcpyAsync(place, scratch, per, cudaMemcpyDeviceToDevice, m->stream);
        if (e != cudaSuccess) break;
        const uint8_t *base = (const uint8_t *)scratch;
        w->gu_tiled = gptoss_mxfp4_tiled{place + (gt.blocks - base), place + (gt.scales - base), NULL};
        w->dn_tiled = gptoss_mxfp4_tiled{place + (dt.blocks - base), place + (dt.scales - base), NULL};
        w->gu_blocks = w->gu_scales = w->dn_blocks = w->dn_scales = NULL;
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    cudaFree(scratch);
    if (e != cudaSuccess)
        return fail(LLMR_ENGINE_INTERNAL, err, es, "tiling the experts in place failed: %s", cudaGetErrorString(e));
    m->moe_tiled_in_place = 1;
    mlog(m, LLMR_LOG_INFO, "experts tiled in place (%.1f MB a layer; LLMR_GPTOSS_MOE_TILED=0 keeps the checkpoint's layout)",
         per / 1e6);
    return LLMR_ENGINE_OK;
}

/* Whether the batched step's experts may take the streaming kernel's F16 form (m->batch_moe_f16): its activations
 * must stay within fp16's range. gate_up's input is the MLP norm's output, |x_i r w_i| <= sqrt(H) max |w| (x_i^2 <=
 * the sum of squares, so |x_i| r <= sqrt(H)); down's is the clamped SwiGLU, |g' sigmoid(alpha g')| <= max(limit,
 * 0.28 / alpha) times |u' + 1| <= limit + 1. Both bounds must stay below 32,768 (half of fp16's largest value, for
 * the rounding of hi). Reads the norm weights back from the device; needs the fp16 shifts. */
static int batch_moe_f16_applies(gptoss_model *m) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size;
    if (!m->moe_mma_stream || !m->layers[0].gu_shift || !(c->swiglu_limit > 0.0f) || !(c->swiglu_alpha > 0.0f)) return 0;
    const double glu = c->swiglu_limit > 0.28 / c->swiglu_alpha ? c->swiglu_limit : 0.28 / c->swiglu_alpha;
    if (!(glu * (c->swiglu_limit + 1.0) < 32768.0)) return 0;
    uint16_t *nw = (uint16_t *)malloc((size_t)H * sizeof *nw);
    if (!nw) return 0;
    int ok = 1;
    for (int l = 0; l < c->num_layers && ok; l++) {
        if (cudaMemcpy(nw, m->layers[l].mlp_norm, (size_t)H * sizeof *nw, cudaMemcpyDeviceToHost) != cudaSuccess) {
            (void)cudaGetLastError();
            ok = 0;
            break;
        }
        float mx = 0.0f;
        for (int i = 0; i < H; i++) {
            const float v = fabsf(gptoss_bf16_to_f32(nw[i]));
            mx = v > mx || v != v ? v : mx; /* NaN: not bounded */
        }
        ok = mx == mx && sqrt((double)H) * mx < 32768.0;
    }
    free(nw);
    return ok;
}

/* Fills the expert cache: each layer's gate_up and down, all experts, by the prompt path's exact
 * dequantization (gptoss_mxfp4_dequant_all, or gptoss_mxfp4_dequant_f16_all for the fp16 experts), so the
 * cached weights are the values it would compute. */
static cudaError_t expert_cache_dequant(gptoss_model *m, const uint8_t *blocks, const uint8_t *scales,
                                        const int32_t *shift, int N, int K, uint16_t *w) {
    const int E = m->cfg.num_experts;
    return m->tc.f16 ? gptoss_mxfp4_dequant_f16_all(blocks, scales, shift, NULL, E, N, K, w, m->stream)
                     : gptoss_mxfp4_dequant_all(blocks, scales, NULL, E, N, K, w, m->tc.fast_dequant, m->stream);
}

static llmr_engine_status expert_cache_fill(gptoss_model *m, char *err, size_t es) {
    const gptoss_config *c = &m->cfg;
    const int E = c->num_experts, H = c->hidden_size, I = c->intermediate_size;
    uint16_t *at = (uint16_t *)m->expert_cache;
    for (int l = 0; l < c->num_layers; l++) {
        layer_weights *w = &m->layers[l];
        cudaError_t e = expert_cache_dequant(m, w->gu_blocks, w->gu_scales, w->gu_shift, 2 * I, H, at);
        w->gu_bf16 = at;
        at += (size_t)E * 2 * I * H;
        if (e == cudaSuccess) e = expert_cache_dequant(m, w->dn_blocks, w->dn_scales, w->dn_shift, H, I, at);
        w->dn_bf16 = at;
        at += (size_t)E * H * I;
        if (e != cudaSuccess)
            return fail(LLMR_ENGINE_INTERNAL, err, es, "filling the expert cache (layer %d) failed: %s", l,
                        cudaGetErrorString(e));
    }
    const cudaError_t e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess)
        return fail(LLMR_ENGINE_INTERNAL, err, es, "filling the expert cache failed: %s", cudaGetErrorString(e));
    mlog(m, LLMR_LOG_INFO, "expert cache: every expert in %s for the prompt path, %.1f MB (LLMR_GPTOSS_EXPERT_CACHE=0 "
         "turns it off)", m->tc.f16 ? "fp16" : "bf16", m->expert_cache_bytes / 1e6);
    return LLMR_ENGINE_OK;
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
        const prefill_settings ps = prefill_settings_get();
        *bytes = p.arena_bytes + workspace_layout(&cfg, NULL, NULL, ps) + pool_bytes_for(&cfg, ctx, ns) +
                 (uint64_t)ns * session_bytes_for(&cfg, ctx) + 256;
        /* the cache counts only when required: in auto mode a load that cannot hold it goes without */
        if (ps.expert_cache == 1) *bytes += expert_cache_bytes_for(&cfg, ps);
        /* the optional copies likewise (the tiled experts, the stacked dense weights, the e5m2 copy: auto, the default,
         * goes without where one does not fit) */
        if (moe_tiled_mode() == 1) *bytes += moe_tiled_layer_bytes(&cfg) * (uint64_t)cfg.num_layers;
        if (dense_keep_mode() == 1 && ps.use_tc && ps.dense_stacked) *bytes += dense_stacked_bytes_for(&cfg, ps.splits);
        if (moe_e5_mode() == 1) *bytes += moe_e5_layer_bytes(&cfg) * (uint64_t)cfg.num_layers;
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
    int nt = gptoss_env_int("LLMR_GPTOSS_LOAD_THREADS", LOAD_THREADS, 1, 32);
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

/* ---------------------------------------------------------------- load / free */

void gptoss_model_free(gptoss_model *m) {
    if (!m) return;
    gptoss_sched_stop(m);
    if (m->device >= 0) cudaSetDevice(m->device);
    if (m->stream) cudaStreamSynchronize(m->stream);
    if (m->tok_ev) cudaEventDestroy(m->tok_ev);
    gptoss_prof_report(m->prof);
    gptoss_prof_free(m->prof);
    cudaFreeHost(m->tok_host);
    gptoss_tc_destroy(&m->tc);
    gptoss_prefill_profile_free(m);
    cudaFreeHost(m->bstage_host);
    cudaFree(m->bstage_dev);
    cudaFree(m->arena);
    cudaFree(m->expert_cache);
    cudaFree(m->moe_tiled);
    cudaFree(m->dense_st);
    cudaFree(m->moe_e5);
    cudaFree(m->rwt);
    cudaFree(m->rpart);
    cudaFree(m->rctr);
    cudaFree(m->rnorm);
    cudaFree(m->pair_sync);
    cudaFree(m->pair_rn);
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
    m->expert_cache_bytes = expert_cache_bytes_for(&m->cfg, ps);
    if (ps.expert_cache == 2 && m->expert_cache_bytes &&
        !expert_cache_fits(need, m->expert_cache_bytes, budget, free_b, total_b)) {
        mlog(m, LLMR_LOG_INFO, "expert cache off: %.2f GB more would leave too little of device %d's %.2f GB free "
             "(%.2f GB free, %.2f GB needed without it%s)", m->expert_cache_bytes / 1e9, device, total_b / 1e9,
             free_b / 1e9, need / 1e9, budget ? ", or exceed the budget" : "");
        m->expert_cache_bytes = 0;
    }
    need += m->expert_cache_bytes;
    if (need > free_b || (budget && need > budget)) {
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es,
                  "loading needs %llu bytes of GPU memory (weights %llu, workspace %llu, KV page pool %llu = %u sessions "
                  "x %u pages of %d tokens for context %u, sessions %u x %llu, expert cache %llu) but device %d has "
                  "%llu free%s%llu",
                  (unsigned long long)need, (unsigned long long)p.arena_bytes, (unsigned long long)ws,
                  (unsigned long long)pool, m->max_sessions, m->max_pages, GPTOSS_KV_PAGE, m->max_context,
                  m->max_sessions, (unsigned long long)sess, (unsigned long long)m->expert_cache_bytes, device,
                  (unsigned long long)free_b,
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
    if (cudaHostGetDevicePointer((void **)&m->tok_host_dev, m->tok_host, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        m->tok_host_dev = NULL; /* the sampled ids then come by a copy */
    }
    /* Last, so that in auto mode a failure (another load on the device since cudaMemGetInfo) costs only
     * the cache. */
    if (m->expert_cache_bytes && cudaMalloc(&m->expert_cache, m->expert_cache_bytes) != cudaSuccess) {
        const char *why = cudaGetErrorString(cudaGetLastError());
        m->expert_cache = NULL;
        if (ps.expert_cache == 1) {
            st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "GPU allocation of the %llu-byte expert cache failed on device %d "
                      "(LLMR_GPTOSS_EXPERT_CACHE=1): %s", (unsigned long long)m->expert_cache_bytes, device, why);
            goto fail;
        }
        mlog(m, LLMR_LOG_INFO, "expert cache off: allocating %.2f GB on device %d failed (%s)",
             m->expert_cache_bytes / 1e9, device, why);
        m->expert_cache_bytes = 0;
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
    m->tc_fused_mlp = ps.fused_mlp;
    /* the chunks that take the stacked dense linears (tc.h GPTOSS_DENSE_STACKED_MIN_T; the env for measuring) */
    m->dense_min_t = gptoss_env_int("LLMR_GPTOSS_DENSE_STACKED_MIN_T", GPTOSS_DENSE_STACKED_MIN_T, 1, 1 << 20);
    if (m->use_tc) {
        char msg[256];
        if (gptoss_tc_init(&m->tc, m->stream, ps.splits, m->cublas_ws, msg, sizeof msg)) {
            st = fail(LLMR_ENGINE_INTERNAL, err, es, "prefill tensor-core setup on device %d: %s", device, msg);
            goto fail;
        }
        m->tc.no_batched = !ps.batched;
        m->tc.dq_all = ps.dq_all;
        m->tc.f16 = ps.f16;
        /* block-per-thread dequantization: bit-identical to the byte kernel (kernel checks) and faster on
         * the H200 (4,096-token prefill 245 -> 191 ms); LLMR_GPTOSS_TC_FASTDQ=0 keeps the byte kernel */
        m->tc.fast_dequant = gptoss_env_int("LLMR_GPTOSS_TC_FASTDQ", 1, 0, 1);
        /* the fp16 experts' GEMMs on the MXFP4 weights (gptoss_mxfp4_prompt_gemm) up to this many tokens a chunk,
         * cuBLAS on the expert cache beyond (docs/performance.md, sessions 34-35); without the cache every chunk (it
         * beats dequantizing for cuBLAS at every length); 0: cuBLAS always */
        m->tc.prompt_mma = gptoss_env_int("LLMR_GPTOSS_PROMPT_MMA",
                                   m->expert_cache_bytes ? GPTOSS_PROMPT_MMA_MAX_T : GPTOSS_PROMPT_MMA_UNCACHED, 0, 1 << 20);
        /* the GEMM streams of the experts' GEMMs (tc.h gptoss_tc_streams_setup), for the stacked experts or the
         * per-expert path. 4: H200, prefill 384 / 512 / 1,024 / 4,096 tokens 28.0 / 30.8 / 44.8 / 153.4 ms on
         * one stream, 23.3 / 26.5 / 42.4 / 151.5 on 4 (2: between; 8: no better than 4); docs/performance.md
         * "Session 10: the per-expert GEMMs over several streams". The stacked experts also read whether the
         * weights are dequantized a whole layer ahead (LLMR_GPTOSS_TC_AHEAD=1) or the used experts in the layer */
        const int gs = gptoss_env_int("LLMR_GPTOSS_TC_STREAMS", 4, 1, GPTOSS_TC_MAX_STREAMS);
        if (m->tc.wst[0] ? gptoss_tc_stacked_setup(&m->tc, gs, gptoss_env_int("LLMR_GPTOSS_TC_AHEAD", 0, 0, 1), msg, sizeof msg)
                         : gs > 1 && gptoss_tc_streams_setup(&m->tc, gs, msg, sizeof msg)) {
            st = fail(LLMR_ENGINE_INTERNAL, err, es, "prefill tensor-core setup on device %d: %s", device, msg);
            goto fail;
        }
    }
    if (cudaMemset(m->ctr, 0, (size_t)GPTOSS_CTR_INTS(&m->cfg) * sizeof(int32_t)) != cudaSuccess) {
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
        /* a split kernel for the full-attention layers only, from GPTOSS_SPLIT_FROM keys on (issue 10 steps 25, 50):
         * gptoss_attention_rows, or with LLMR_GPTOSS_DECODE_ATTN=0 gptoss_attention_decode */
        m->split_from = gptoss_env_int("LLMR_GPTOSS_SPLIT_ATTN_FROM", GPTOSS_SPLIT_FROM, 0, 1 << 30);
        m->decode_attn_rows = gptoss_env_int("LLMR_GPTOSS_DECODE_ATTN", 1, 0, 1);
        const char *rbv = getenv("LLMR_GPTOSS_ROUTER_BLOCKS"); /* router rows over N blocks (default 1) */
        gptoss_moe_router_blocks(rbv ? atoi(rbv) : 1);
        /* the small batched steps' router (one-token tables a row) over N blocks a row: 8 since session 50 (2 / 4
         * streams' step rate +1-2% against one SM pulling a row's whole 184 KB router) */
        gptoss_moe_router_rows_blocks(gptoss_env_int("LLMR_GPTOSS_ROUTER_ROWS_BLOCKS", 8, 1, 32));
        const char *mr = getenv("LLMR_GPTOSS_MOE_ROWS"); /* 4: the 4-rows-per-warp MXFP4 variant */
        gptoss_moe_decode_rows(mr && strcmp(mr, "4") == 0 ? 4 : 2);
        const char *pd = getenv("LLMR_GPTOSS_PDL"); /* 1: programmatic dependent launch in the decode step */
        gptoss_use_pdl(pd && strcmp(pd, "1") == 0);
        const char *ma = getenv("LLMR_GPTOSS_MOE_ASYNC"); /* 1: the cp.async T = 1 MXFP4 GEMVs */
        gptoss_moe_decode_async(ma && strcmp(ma, "1") == 0);
        /* the T = 1 gate_up's ring (moe_decode_dp4a.cu): 2 (default since session 28) its sums on integer tensor
         * cores, 1 on dp4a, 0 the fp32 kernel instead */
        const int dp4a = gptoss_env_int("LLMR_GPTOSS_MOE_DP4A", 2, 0, 2);
        /* o_proj's last block's router finish: the partial rows by one bulk copy (1, default) or from L2 (0) */
        const int fin_rows = gptoss_env_int("LLMR_GPTOSS_FIN_ROWS", 1, 0, 1);
        if (gptoss_gemv1_fin_rows(fin_rows) != fin_rows)
            mlog(m, LLMR_LOG_WARN, "the router finish's bulk copy (LLMR_GPTOSS_FIN_ROWS) is off: its kernel could not be queried");
        if (gptoss_moe_decode_dp4a(dp4a) != dp4a)
            mlog(m, LLMR_LOG_WARN, "the dp4a gate_up (LLMR_GPTOSS_MOE_DP4A) is off: its shared-memory size could not be set");
        if (gptoss_env_int("LLMR_GPTOSS_ROUTER_SPLIT", 1, 0, 1) && m->fused && m->cfg.num_experts == 32) {
            const int H = m->cfg.hidden_size, QD = m->cfg.num_heads * m->cfg.head_dim;
            m->router_parts = gptoss_gemv1_blocks(QD, H);
            if (m->router_parts > 0 &&
                cudaMalloc((void **)&m->rwt, (size_t)m->cfg.num_layers * H * 32 * sizeof(float)) == cudaSuccess &&
                cudaMalloc((void **)&m->rpart, (size_t)GPTOSS_GEMV1_ROWS_MAX * m->router_parts * 33 * sizeof(float)) ==
                    cudaSuccess)
                m->router_split = 1;
            else {
                (void)cudaGetLastError();
                mlog(m, LLMR_LOG_WARN, "the router split (LLMR_GPTOSS_ROUTER_SPLIT) is off: its buffers could not be allocated");
            }
        }
        /* 0: the T = 1 down on the tiled copy with 2 rows a warp task instead of 4 (moe_decode.cu) */
        gptoss_moe_down_r4(gptoss_env_int("LLMR_GPTOSS_DOWN_R4", 1, 0, 1));
        const char *lut = getenv("LLMR_GPTOSS_MOE_LUT"); /* 0: the bit-operation MXFP4 decode (the table one is default) */
        gptoss_moe_decode_lut(!(lut && strcmp(lut, "0") == 0));
        const char *fg = getenv("LLMR_GPTOSS_FAST_GREEDY"); /* 0: the one-block greedy sampler */
        gptoss_sample_use_fast_greedy(!(fg && strcmp(fg, "0") == 0));
        const char *smp = getenv("LLMR_GPTOSS_SAMPLER"); /* 0: the one-block sampler for temperature > 0 */
        gptoss_sample_use_radix(!(smp && strcmp(smp, "0") == 0));
        m->prof = gptoss_prof_create(m->cfg.num_layers);
        gptoss_prefill_profile_create(m);
        /* The batched step's experts on gptoss_mxfp4_mma (each touched expert read once per step) from
         * LLMR_GPTOSS_MOE_MMA_MIN_ROWS rows (default 4 since session 8, 8 in session 7, was 32; fewer rows keep decode2's fused kernels, which were
         * faster there: H200 8 streams 506 vs 427 out tok/s); LLMR_GPTOSS_MOE_MMA=0 turns it off. H200, 64
         * streams 1,099 -> 1,285 out tok/s. Its first version (2-part activations, one tensor-core
         * accumulation chain over all K) left ~1e-5 relative at the 20b's shapes and a batched row ~1e-2
         * from the same request alone in the logits; with 3 parts and fp32 partial sums per 128 k it is
         * 5e-7 and gptoss_batching --model (20b) finds no difference at all. LLMR_GPTOSS_MOE_MMA_T1=1 puts
         * the T = 1 experts on it too (slower: 444 -> 239 tok/s with the first version). Session 7: the same
         * products on gptoss_mxfp4_mma_stream (bit for bit; 64 streams ~1,470 -> ~1,700 out tok/s on the H200);
         * from 8 rows it is faster than decode2's kernels too (32 streams ~1,050 -> ~1,240). The 20b batching
         * check's failures with it were router near-ties, shown causally (gptoss_batching's router_flip;
         * docs/performance.md), so MIN_ROWS was 8. Session 8 (H200, two runs each): the MoE of a 4-7-row
         * step 4.88-4.90 ms with the fused kernels, 4.62-4.66 on the streaming one; of a 2-3-row step 2.93-2.95
         * vs 3.30, so 4. Session 49 (H200), with the per-row path's gate_up and down in one launch each for all rows
         * (m->moe_rows1): a 4-row step 3.83 ms on it against 4.71-4.73 here, ~5.6-row steps even (4.73-4.78 both
         * ways), so 6, and the per-row path up to 5 rows (batch_moe_per_row). Session 54 (H200, throughput A/B at 5-8
         * streams, two runs each): the per-row path up to 6 rows, the tensor-core one from 7: 6-8 streams' step rate
         * +1.2-1.4%, their 4-7-row steps 1.0-1.3% shorter; up to 7 was slower at 7 rows (+3.6%, but that launch asked for
         * 399 CTAs where 396 fit, mended since: measure it again), so 7. */
        m->moe_mma = gptoss_env_int("LLMR_GPTOSS_MOE_MMA", 1, 0, 1);
        m->moe_mma_min_rows = gptoss_env_int("LLMR_GPTOSS_MOE_MMA_MIN_ROWS", 7, 2, GPTOSS_MAX_BATCH);
        /* 2 (default since session 10): the batched steps' experts take the activations as 2 parts (+3-4% out
         * tok/s on the H200 over 3): since session 19 the F16 form's fp16 parts (~3e-7, batch_moe_f16 below),
         * else 2 bf16 parts, the prompt path's accuracy (~1e-5); 3: fp32-level, bit for bit gptoss_mxfp4_mma */
        m->batch_moe_parts = gptoss_env_int("LLMR_GPTOSS_BATCH_MOE_PARTS", 2, 2, 3);
        /* batched steps of up to 4 rows: the attention prologue in one launch (gptoss_qkv_rows) instead of the fused
         * tensor-core path (norm and split with the previous combine, cuBLAS q/k/v, one finish launch, and o_proj's
         * split written by the attention); 0: off, up to GPTOSS_QKV_ROWS_MAX. 4 since session 40: at 8 rows that path
         * took q/k/v 0.99 -> 0.45 ms a step and o_proj 0.65 -> 0.37 (H200, 8 streams +11.6% step rate); at 2-3 rows
         * the one launch still wins (no separate norm: 3.73 against 3.85-3.90 ms a step) */
        m->batch_qkv_rows = gptoss_env_int("LLMR_GPTOSS_BATCH_QKV_ROWS", 4, 0, GPTOSS_QKV_ROWS_MAX);
        /* and o_proj (gptoss_gemv1_rows) instead of the row-group GEMV, up to 4 rows: its 8-row form is slower than
         * cuBLAS at 8 rows (H200, session 19 call 11: o_proj 0.65 -> 1.02 ms a step) and even at 5-7; 0: off */
        m->batch_o_rows = gptoss_env_int("LLMR_GPTOSS_BATCH_O_ROWS", 4, 0, GPTOSS_GEMV1_ROWS_MAX);
        /* and lm_head up to 2 rows: 0.32 -> 0.30 ms a 2-row step; its 4-row form (3-4 rows) is slower than cuBLAS,
         * 0.31 -> 0.42 ms (H200, docs/performance.md, session 52); 0: off */
        m->batch_head_rows = gptoss_env_int("LLMR_GPTOSS_BATCH_HEAD_ROWS", 2, 0, GPTOSS_GEMV1_ROWS_MAX);
        /* and the attention up to 2 rows: 128 blocks of the one-token kernel, one wave (3 rows take two) */
        m->batch_attn_lone = gptoss_env_int("LLMR_GPTOSS_BATCH_ATTN_LONE", 2, 0, 8);
        /* steps of 2-6 rows (below the tensor-core experts' 7): each row's experts on the batch-1 kernels; 0: off */
        m->batch_moe_per_row = gptoss_env_int("LLMR_GPTOSS_BATCH_MOE_PER_ROW", 6, 0, 8);
        m->moe_rows1 = gptoss_env_int("LLMR_GPTOSS_MOE_ROWS1", 1, 0, 1);
        /* prompt chunks of up to this many tokens run their experts on the tensor-core kernel (no host
         * sync, no bf16 scratch); longer ones on dequantize + cuBLAS. 640: between the H200's measured
         * 512 (kernel faster) and 768 (cuBLAS faster; docs/performance.md, "Session 8: short prompts'
         * experts on the streaming kernel"); with the expert cache and 4 GEMM streams 208, between the
         * H100's 192 (kernel 22.4 ms vs 22.7-23.5) and 224 (24.9 vs 23.3-24.3; docs/performance.md "Session
         * 10: the prompt crossover with 4 GEMM streams"); 0 = never */
        m->moe_mma_prefill = gptoss_env_int("LLMR_GPTOSS_MOE_MMA_PREFILL",
                                     m->expert_cache_bytes || prompt_kernel_covers(m) ? GPTOSS_MMA_PREFILL_MAX_CACHED
                                                                                      : GPTOSS_MMA_PREFILL_MAX,
                                     0, 1 << 20);
        m->moe_mma_t1 = gptoss_env_int("LLMR_GPTOSS_MOE_MMA_T1", 0, 0, 1);           /* 1: T = 1 decode experts on it too */
        m->debug_precise = gptoss_env_int("LLMR_GPTOSS_DEBUG_PRECISE", 0, 0, 1); /* 1: a fp32-level debug forward (model_impl.h) */
        m->moe_mma_stream = gptoss_env_int("LLMR_GPTOSS_MOE_MMA_STREAM", 1, 0, 1); /* 0: the pass-wise kernel */
        m->moe_stream_warps = gptoss_env_int("LLMR_GPTOSS_MOE_STREAM_WARPS", 0, 0, 16);
        m->batch_tc = gptoss_env_int("LLMR_GPTOSS_BATCH_TC", 1, 0, 1); /* 0: batched steps keep the row-group GEMVs */
        m->batch_fuse = gptoss_env_int("LLMR_GPTOSS_BATCH_FUSE", 5, 0, 5); /* model_impl.h: 0 unfused .. 5 (default) */
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
    if (m->tc.f16 && (st = f16_shifts_fill(m, err, es)) != LLMR_ENGINE_OK) goto fail;
    if (m->expert_cache && (st = expert_cache_fill(m, err, es)) != LLMR_ENGINE_OK) goto fail;
    if (m->router_split && (st = router_rwt_fill(m, err, es)) != LLMR_ENGINE_OK) goto fail;
    m->batch_moe_f16 = 0;
    if (gptoss_env_int("LLMR_GPTOSS_BATCH_MOE_F16", 1, 0, 1) && m->batch_moe_parts == 2) { /* default; =0: the bf16 form */
        m->batch_moe_f16 = batch_moe_f16_applies(m);
        if (!m->batch_moe_f16 && getenv("LLMR_GPTOSS_BATCH_MOE_F16"))
            mlog(m, LLMR_LOG_WARN, "LLMR_GPTOSS_BATCH_MOE_F16=1 ignored: no fp16 shifts (LLMR_GPTOSS_TC_F16=0?), the "
                                   "pass-wise kernel, or activations not bounded within fp16's range");
    }
    m->batch_moe_prestage = m->batch_moe_f16 && gptoss_env_int("LLMR_GPTOSS_BATCH_MOE_PRESTAGE", 1, 0, 1);
    /* on by default since the 20b serving check judges a lone-vs-batched parting by its logprobs (a near-tie passes,
     * e2e/gpu/near_tie.py; docs/performance.md, step 34); LLMR_GPTOSS_PROMPT_MOE_F16=0 turns it off */
    m->prompt_moe_f16 = m->batch_moe_f16 && gptoss_env_int("LLMR_GPTOSS_PROMPT_MOE_F16", 1, 0, 1);
    m->route_ring = 0;
    /* not with PDL: down's prefetch reads the groups before its wait, which is safe only when they come from two
     * kernels back (pdl.h, rule 3), and with the route ring they come from the kernel just before */
    if (m->router_split && !m->moe_mma_t1 && !gptoss_pdl_enabled()) {
        /* read once (a bad value is reported once); default 2: in o_proj; 1: in the gate_up; 0: its own kernel */
        int rr = gptoss_env_int("LLMR_GPTOSS_ROUTE_RING", 2, 0, 2), ok = rr != 0;
        for (int l = 0; ok && l < m->cfg.num_layers; l++)
            ok &= gptoss_moe_route_gate_up_dp4a_ok(m->cfg.hidden_size, m->cfg.intermediate_size, m->cfg.num_experts,
                                                   m->layers[l].gu_blocks, m->layers[l].gu_scales);
        if (ok && rr == 2 && (cudaMalloc((void **)&m->rctr, sizeof(int32_t)) != cudaSuccess ||
                              cudaMalloc((void **)&m->rnorm, GPTOSS_GEMV1_ROWS_MAX * sizeof(float)) != cudaSuccess ||
                              cudaMemset(m->rctr, 0, sizeof(int32_t)) != cudaSuccess)) {
            (void)cudaGetLastError();
            mlog(m, LLMR_LOG_WARN, "LLMR_GPTOSS_ROUTE_RING=2: its counter could not be allocated; the finish runs in the gate_up");
            rr = 1;
        }
        m->route_ring = ok ? rr : 0;
        /* measured against the router launch (0): 1 +3.0-3.4%, 2 -2.6-5.4% at 2-4 streams (session 50 calls 5-6) */
        m->rows_router = m->route_ring ? gptoss_env_int("LLMR_GPTOSS_ROWS_ROUTER", 1, 0, 2) : 0;
        if (m->rows_router == 2 && m->route_ring != 2) m->rows_router = 1; /* its counter and r are route_ring 2's */
        if (rr && !m->route_ring && getenv("LLMR_GPTOSS_ROUTE_RING")) /* said explicitly: say why it is not taken */
            mlog(m, LLMR_LOG_WARN, "LLMR_GPTOSS_ROUTE_RING=%d ignored: the dp4a gate_up does not apply here", rr);
    }
    /* each shared expert once for two rows (session 55): the per-row experts' gate_up, routed by each of its CTAs
     * (rows_router 1) or after the router launch; from 2 rows (call 6: 2 / 4 / 6 streams' step rate +1.4% / +2.4% /
     * +6.0%, their 4-7-row steps -1.9% / -5.4%; from 4 rows no better) */
    m->moe_pairs = m->moe_rows1 ? gptoss_env_int("LLMR_GPTOSS_MOE_PAIRS", 2, 0, GPTOSS_GEMV1_ROWS_MAX) : 0;
    m->moe_pair_cost = gptoss_env_int("LLMR_GPTOSS_MOE_PAIR_COST", 10, 8, 16);
    if (m->moe_pairs == 1) m->moe_pairs = 2; /* a one-row step has no second row */
    if (m->moe_pairs && (!gptoss_moe_gate_up_pairs_ok(m->cfg.hidden_size, m->cfg.intermediate_size) ||
                         cudaMalloc((void **)&m->pair_sync, (GPTOSS_GEMV1_ROWS_MAX + 1) * sizeof(int32_t)) != cudaSuccess ||
                         cudaMalloc((void **)&m->pair_rn, GPTOSS_GEMV1_ROWS_MAX * sizeof(float)) != cudaSuccess ||
                         cudaMemset(m->pair_sync, 0, (GPTOSS_GEMV1_ROWS_MAX + 1) * sizeof(int32_t)) != cudaSuccess)) {
        (void)cudaGetLastError();
        mlog(m, LLMR_LOG_WARN, "LLMR_GPTOSS_MOE_PAIRS=%d ignored: the shared-expert gate_up does not apply here (the "
                               "tensor-core ring on the tiled copy) or its buffers could not be allocated", m->moe_pairs);
        m->moe_pairs = 0;
    }
    m->qkv_fused = gptoss_env_int("LLMR_GPTOSS_QKV_FUSED", 1, 0, 1) && qkv_contiguous(m);
    if (m->batch_moe_f16) { /* the experts' tiled copy (read by the F16 form and the T = 1 kernels): in the experts'
                             * place where every reader the settings pick reads it, else beside them where it fits */
        const int tiled = moe_tiled_mode();
        if (tiled == 2 && moe_tiled_in_place_ok(m) && (st = moe_tile_in_place(m, err, es)) != LLMR_ENGINE_OK)
            goto fail;
        if (tiled && !m->moe_tiled_in_place) moe_tiled_fill(m, tiled, need, budget);
    }
    dense_stacked_fill(m, dense_keep_mode(), need + m->moe_tiled_bytes, budget);
    moe_e5_fill(m, moe_e5_mode(), need + m->moe_tiled_bytes + m->dense_st_bytes, budget);
    /* from 48 rows: the MXFP4 tiles' launches caught up with the copy's below (session 53 call 2, a 20b layer's experts
     * at 16 / 24 / 32 / 48 rows: 0.170 / 0.178 / 0.190 / 0.224 ms against 0.190 / 0.193 / 0.198 / 0.223; at 64 the copy
     * 0.227 against 0.248, session 52); session 38 had put it at 32. The same bits either way (the same fp16 values in
     * the same k order); LLMR_GPTOSS_MOE_E5_MIN_ROWS for measuring */
    m->moe_e5_min_pairs = GPTOSS_TOPK * gptoss_env_int("LLMR_GPTOSS_MOE_E5_MIN_ROWS", 48, 1, GPTOSS_MAX_BATCH);
    /* the warm-up is for cuBLAS's kernels: with LLMR_GPTOSS_TC=0 there are none, and the SIMT prefill of its
     * 11,824 tokens would take seconds */
    if (m->use_tc && gptoss_env_int("LLMR_GPTOSS_WARMUP", 1, 0, 1) && (st = model_warmup(m, err, es)) != LLMR_ENGINE_OK)
        goto fail;
    if (gptoss_sched_start(m)) {
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
    out->vram_bytes = m->arena_bytes + m->expert_cache_bytes + m->moe_tiled_bytes + m->dense_st_bytes + m->moe_e5_bytes +
                      m->work_bytes + m->kv_pool_bytes + __atomic_load_n(&m->session_bytes, __ATOMIC_RELAXED);
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
    for (int g = 0; g < 2; g++)
        if (s->graph[g]) cudaGraphExecDestroy(s->graph[g]);
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


/* ---------------------------------------------------------------- paged KV */

/* Layer l of the pool seen through s's block table (table row 0). */
gptoss_kv gptoss_model_kv(const gptoss_model *m, const int32_t *table, int max_pages, int l) {
    gptoss_kv kv;
    kv.pool = m->kv_pool;
    kv.table = table;
    kv.max_pages = max_pages;
    kv.kvd = m->cfg.num_kv_heads * m->cfg.head_dim;
    kv.page_floats = (long long)m->page_floats;
    kv.layer_off = (long long)l * 2 * GPTOSS_KV_PAGE * kv.kvd;
    return kv;
}

gptoss_kv gptoss_layer_kv(const gptoss_session *s, int l) { return gptoss_model_kv(s->m, s->tab_dev, (int)s->tab.cap, l); }

/* Makes s's block table cover positions [0, tokens): takes pages from the pool and copies the new
 * entries to the device table, ordered on the stream before the kernels that use them (outside any
 * graph: the graph reads the table through its fixed address). OOM_VRAM names pages needed and free. */
llmr_engine_status gptoss_ensure_pages(gptoss_session *s, uint64_t tokens, char *err, size_t es) {
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
