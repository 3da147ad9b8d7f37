/* model_impl.h — what the three parts of the gpt-oss model share (not an interface: only they include it).
 *
 *   model.cu      the tensor plan, weight streaming, load/free, sessions and their KV pages;
 *   forward.cu    the forward pass of a chunk (prefill, debug eval), the batch-1 decode step as a CUDA
 *                 graph, and the per-kernel profiles (LLMR_GPTOSS_PROFILE, LLMR_GPTOSS_PREFILL_PROFILE);
 *   scheduler.cu  continuous batching: the engine thread, batched decode steps, generate.
 * The structs below are the whole state; the functions declared at the end are the only calls one part
 * makes into another. */
#ifndef GPTOSS_CUDA_MODEL_IMPL_H
#define GPTOSS_CUDA_MODEL_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/gptoss_cuda/model.h"
extern "C" {
#include "common/checkpoint.h"
#include "common/kv_pages.h"
}
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/tc.h"

static inline llmr_engine_status fail(llmr_engine_status st, char *err, size_t es, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline llmr_engine_status fail(llmr_engine_status st, char *err, size_t es, const char *fmt, ...) {
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

static inline uint64_t align256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

/* gptoss_model.ctr's layout (int32 counters, zero at load, each left zero by its kernel): the router's [0,
 * GPTOSS_DECODE_MAX_T], then the T = 1 split attention's num_kv_heads, then the lone row's greedy sampler's one. */
#define GPTOSS_CTR_ATTN (1 + GPTOSS_DECODE_MAX_T)
#define GPTOSS_CTR_SAMPLER(c) (GPTOSS_CTR_ATTN + (c)->num_kv_heads)
#define GPTOSS_CTR_INTS(c) (GPTOSS_CTR_SAMPLER(c) + 1)

/* pairs the F16 form's pre-staging scratch holds (m->mstage): every launch whose shape reads it (mode 2, below 1,024
 * pairs: the batched steps and prompt chunks of up to 255 tokens); 15 MB at the 20b's sizes: down's pair rows first,
 * then gate_up's token rows (gptoss_mstage_tokens) */
#define GPTOSS_MSTAGE_PAIRS 1024
#define GPTOSS_MSTAGE_ROWS (GPTOSS_MSTAGE_PAIRS + GPTOSS_MSTAGE_PAIRS / 4)
#define GPTOSS_MAX_BATCH 64 /* rows of one batched decode step (more running requests wait to be admitted) */

struct gen_req;

typedef struct layer_weights {
    const uint16_t *attn_norm, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b, *sinks;
    const uint16_t *mlp_norm, *router_w, *router_b, *gu_bias, *dn_bias;
    const uint8_t *gu_blocks, *gu_scales, *dn_blocks, *dn_scales;
    /* the expert cache (LLMR_GPTOSS_EXPERT_CACHE): every expert's gate_up [E, 2I, H] and down [E, H, I]
     * dequantized once at load (bf16, or fp16 with gu_shift / dn_shift below), for the prompt path's cuBLAS
     * experts; NULL without it */
    const uint16_t *gu_bf16, *dn_bf16;
    /* the fp16 experts (tc.h, LLMR_GPTOSS_TC_F16): each expert's power-of-two shift c_e, device [E] each (in
     * gptoss_model.f16_shift); with them the expert cache holds fp16 values, not bf16. NULL otherwise */
    const int32_t *gu_shift, *dn_shift;
    /* the experts' tiled copies (gptoss_mxfp4_tile), read by the streaming kernel's F16 form: in the arena in the
     * experts' place (moe_tiled_in_place; then the T = 1 kernels read them too), or in m->moe_tiled beside them; NULL
     * pointers without either (LLMR_GPTOSS_MOE_TILED, model.cu moe_tile_in_place / moe_tiled_fill) */
    gptoss_mxfp4_tiled gu_tiled, dn_tiled;
    /* q/k/v/o stacked once at load for the prompt's stacked dense linears ([W | W | b, 0 x 7], tc.h "Stacked dense
     * linears"), in m->dense_st; NULL without them (LLMR_GPTOSS_DENSE_KEEP, model.cu dense_stacked_fill): then each
     * long chunk stacks them again into tc.wd */
    const uint16_t *q_st, *k_st, *v_st, *o_st;
} layer_weights;


struct gptoss_model {
    gptoss_config cfg;
    int device;
    cudaStream_t stream;
    pthread_mutex_t mu;
    const llmr_host_api *host;
    uint32_t max_context, max_sessions;
    void *arena;
    uint64_t arena_bytes, work_bytes;
    void *expert_cache; /* owned; NULL without the expert cache (layer_weights gu_bf16 / dn_bf16 point in it) */
    uint64_t expert_cache_bytes;
    void *moe_tiled; /* owned; NULL without the tiled expert copies (LLMR_GPTOSS_MOE_TILED; layer_weights gu_tiled) */
    uint64_t moe_tiled_bytes;
    void *dense_st; /* owned; NULL without the stacked dense weights kept from load (layer_weights q_st .. o_st) */
    uint64_t dense_st_bytes;
    int dense_min_t; /* the prompt's chunks of this many tokens or more take the stacked dense linears */
    /* 1: the tiled copies took the experts' place (model.cu moe_tile_in_place): layer_weights gu_tiled / dn_tiled point
     * into the arena, gu_blocks .. dn_scales are NULL, and every expert reader is given the tiled copy */
    int moe_tiled_in_place;
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
    uint8_t *mstage; /* the F16 form's pre-staged rows: GPTOSS_MSTAGE_ROWS rows of gptoss_mxfp4_stage_f16_units(max(H, I)) */
    int32_t *grp, *ctr;
    int fused; /* 0 when LLMR_GPTOSS_FUSED=0 (the per-op decode launches, for comparisons) */
    /* the router split (default; LLMR_GPTOSS_ROUTER_SPLIT=0 turns it off): the T = 1 router's GEMV as partial sums in o_proj's blocks
     * (gptoss_gemv1_router), then gptoss_moe_router_finish. rwt [layers][H][32] (router_w * mlp_norm, filled at load
     * after the weights), rpart [GPTOSS_GEMV1_ROWS_MAX][router_parts][33] (a small batched step's rows, rows_router);
     * both owned, NULL when off (20b only: 32 experts; fused path) */
    int router_split, router_parts;
    /* the routed ring (LLMR_GPTOSS_ROUTE_RING, set at load only where it applies for every layer): with the router
     * split, 2 (default) the finish in o_proj's last block (gptoss_gemv1_router_finish, then
     * gptoss_moe_routed_gate_up_dp4a), with its counter rctr (0 between launches) and r (rnorm), both owned; 1 the
     * finish folded into every CTA of the ring gate_up (gptoss_moe_route_gate_up_dp4a); 0 its own kernel. All three
     * bit for bit the same. rnorm: GPTOSS_GEMV1_ROWS_MAX floats (rows_router's rows). */
    int route_ring;
    /* LLMR_GPTOSS_ROWS_ROUTER (with route_ring): the small batched steps whose o_proj and experts run a row at a time
     * (batch_o_rows, batch_moe_per_row, moe_rows1) routed as the batch-1 graph, without a router launch, each row's MoE
     * block bit for bit its lone one: 2 o_proj's last block finishes every row (gptoss_gemv1_rows_router_finish, then
     * gptoss_moe_routed_gate_up_dp4a_rows1), 1 every gate_up CTA finishes its own row (gptoss_gemv1_rows_router, then
     * gptoss_moe_route_gate_up_dp4a_rows1; the default); 0 the router launch (gptoss_moe_router_decode_rows) */
    int rows_router;
    float *rwt, *rpart, *rnorm;
    int32_t *rctr;
    /* MXFP4 experts on tensor cores (gptoss_mxfp4_mma, moe_mma.cu): moe_mma for the batched decode
     * step's MoE from moe_mma_min_rows rows (LLMR_GPTOSS_MOE_MMA, default 1, and _MIN_ROWS, default 4: see
     * model.cu), moe_mma_prefill for the experts of T > 1 forward chunks of up to that many tokens
     * (LLMR_GPTOSS_MOE_MMA_PREFILL, default GPTOSS_MMA_PREFILL_MAX, 0 = never), moe_mma_t1 for the T = 1 decode graph's experts
     * (LLMR_GPTOSS_MOE_MMA_T1, default 0); 0 keeps the older paths for comparisons */
    int moe_mma, moe_mma_min_rows, moe_mma_prefill, moe_mma_t1;
    /* LLMR_GPTOSS_DEBUG_PRECISE=1 (debug_precise): a debug forward (gptoss_forward with a debug_out, i.e.
     * gptoss_session_eval_debug) runs every chunk's experts on that kernel with 3 activation parts
     * (fp32-level) instead of the prompt path's (one fp16 part from 209 tokens: logits ~5e-4 from fp32), so
     * it can adjudicate fp32-level differences between two other paths (gptoss_batching's near-tie replays).
     * Off: the debug forward is the prompt path itself, which is what the parity driver measures. */
    int debug_precise;
    /* activation parts of the batched step's tensor-core experts: 2 (default; fp16 parts with batch_moe_f16,
     * else bf16 parts, the prompt path's level) or 3 (LLMR_GPTOSS_BATCH_MOE_PARTS=3: fp32-level, bit for bit
     * gptoss_mxfp4_mma) */
    int batch_moe_parts;
    /* 1 (default where it applies; LLMR_GPTOSS_BATCH_MOE_F16=0 turns it off): with 2 parts, the batched step's experts
     * take the streaming kernel's F16 form (gptoss_mxfp4_mma_stream_f16: fewer decode instructions, 22-bit
     * activations). Set at load only with the fp16 shifts (gu_shift / dn_shift) and where the experts' inputs are
     * bounded within fp16's range for every layer (model.cu batch_moe_f16_applies) */
    int batch_moe_f16;
    /* 1 (default with batch_moe_f16; LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0 turns it off): the F16 form's activations are
     * converted once per launch into mstage (gptoss_mxfp4_stage_f16, kernels.h) and its CTAs copy them from there,
     * instead of each of a tile's row chunks converting them again; the same bits */
    int batch_moe_prestage;
    /* the experts' e5m2 copies (gptoss_mxfp4_tile_e5, LLMR_GPTOSS_MOE_E5; model.cu moe_e5_fill): owned, NULL without them
     * (layer_weights gu_tiled.e5 / dn_tiled.e5 point in it); read by the pre-staged F16 launches of moe_e5_min_pairs
     * pairs or more */
    void *moe_e5;
    uint64_t moe_e5_bytes;
    int moe_e5_min_pairs;
    /* 1 (default with batch_moe_f16 since session 21; LLMR_GPTOSS_PROMPT_MOE_F16=0 turns it off): prompt chunks whose
     * experts run on the tensor-core kernel (up to moe_mma_prefill tokens) take the F16 form too (with pre-staged rows where that shape
     * reads them), instead of 2 bf16 parts (3 below GPTOSS_TC_MIN_T tokens); a debug_precise forward keeps 3 */
    int prompt_moe_f16;
    /* batched steps of up to this many rows run their attention prologue as gptoss_qkv_rows (norm, q/k/v, RoPE and
     * KV store in one launch, each row bit for bit its one-token result); LLMR_GPTOSS_BATCH_QKV_ROWS, 0..8,
     * default 4, 0 = off */
    int batch_qkv_rows;
    /* the same for o_proj: up to this many rows gptoss_gemv1_rows; LLMR_GPTOSS_BATCH_O_ROWS, 0..8 (default 4), 0 = off */
    int batch_o_rows;
    /* the same for lm_head: up to this many rows gptoss_gemv1_rows (each row's logits from its final norm bit for bit
     * gemv1's) instead of cuBLAS; LLMR_GPTOSS_BATCH_HEAD_ROWS, 0..8 (default 2), 0 = off */
    int batch_head_rows;
    /* batched steps of up to this many rows run the batch-1 graph's attention kernel (gptoss_attention_at) on the layers
     * where the batch-1 graph would at their longest row (a sliding layer, or fewer keys than split_from), so each row's
     * attention is its lone result bit for bit; LLMR_GPTOSS_BATCH_ATTN_LONE, 0..8 (default 2), 0 = off */
    int batch_attn_lone;
    /* batched steps of up to this many rows run their experts row by row on the batch-1 kernels (the dp4a ring
     * gate_up, down) after one router launch; LLMR_GPTOSS_BATCH_MOE_PER_ROW, 0..8 (up to the tensor-core experts' rows
     * m->moe_mma_min_rows, which take precedence), 0 = off (the fused T-token kernels) */
    int batch_moe_per_row;
    /* and those rows' gate_up and down in one launch each for all rows (gptoss_moe_gate_up_decode_dp4a_rows1 and
     * gptoss_moe_down_decode_rows1, the same bits as a launch a row); LLMR_GPTOSS_MOE_ROWS1, default 1, 0 = a launch a
     * row */
    int moe_rows1;
    /* from this many rows the per-row experts' gate_up (routed by its CTAs or after the router launch) streams an expert
     * that two rows route to once for both (gptoss_moe_route_gate_up_pairs, gptoss_moe_gate_up_pairs_rows1; the same
     * bits); LLMR_GPTOSS_MOE_PAIRS, 2..8 (default 2), 0 = off. moe_pair_cost (LLMR_GPTOSS_MOE_PAIR_COST, 8..16, default
     * 10): a two-row tile's cost in eighths of a one-row one, by which its CTAs share the work. pair_sync: its flags and
     * count (GPTOSS_GEMV1_ROWS_MAX + 1 ints, 0 between launches); pair_rn: its rows' r; both owned */
    int moe_pairs, moe_pair_cost;
    int32_t *pair_sync;
    float *pair_rn;
    /* which kernel those paths run (gptoss_moe_mma_experts): 1 = gptoss_mxfp4_mma_stream (default; warps
     * streaming whole rows, bit for bit the same results), 0 = gptoss_mxfp4_mma (LLMR_GPTOSS_MOE_MMA_STREAM;
     * LLMR_GPTOSS_MOE_STREAM_WARPS overrides its warps per CTA, 0 = automatic) */
    int moe_mma_stream, moe_stream_warps;
    int split_attn; /* fused path: 1 when LLMR_GPTOSS_SPLIT_ATTN=1 (keys split over blocks; faster only at long contexts) */
    /* fused path: from this many keys on, the T = 1 decode's full-attention layers take a kernel that splits the keys
     * over blocks, in the session's second decode graph (LLMR_GPTOSS_SPLIT_ATTN_FROM, default GPTOSS_SPLIT_FROM;
     * 0 = never); sliding layers never need it */
    int split_from;
    /* that kernel: 1 (default; LLMR_GPTOSS_DECODE_ATTN=0 for session 24's) the batched step's gptoss_attention_rows
     * (blocks of (KV head, 64-key chunk), the 8 query heads sharing each K/V load), or gptoss_attention_decode
     * (one block per query head and key split) */
    int decode_attn_rows;
    int32_t *tok_host; /* pinned, GPTOSS_MAX_BATCH */
    /* tok_host as the device sees it (the sampler writes a lone row's id there itself: gptoss_sample_host); NULL where
     * the device cannot map it, then a copy brings the ids */
    int32_t *tok_host_dev;
    cudaEvent_t tok_ev;
    int use_graph; /* 0 when LLMR_GPTOSS_GRAPH=0 (the launch-per-kernel path, for comparisons) */
    struct step_prof *prof; /* LLMR_GPTOSS_PROFILE=1 only: per-kernel times of decode steps */
    /* prefill on tensor cores (tc.h): cuBLAS handle and scratch in the workspace; off when use_tc = 0 */
    int batch_tc;        /* batched decode steps of >= GPTOSS_TC_MIN_T rows use gptoss_tc_linear (LLMR_GPTOSS_BATCH_TC) */
    int qkv_fused;       /* 1: every layer's q/k/v weights and biases lie back to back, so the tensor-core paths run
                          * them as one linear (gptoss_qkv_tc); 0 when not, or LLMR_GPTOSS_QKV_FUSED=0 */
    int use_tc, tc_attn; /* tc_attn 0 (LLMR_GPTOSS_TC_ATTN=0): GEMMs on tensor cores, attention SIMT */
    uint16_t *atc_kvs;   /* the tensor-core attention's pre-split K/V scratch (tc.h gptoss_attention_tc), in the
                          * workspace: GPTOSS_ATC_KVS_KEYS keys; NULL without tc_attn */
    int tc_fused_mlp;    /* 1: the prompt's experts through gptoss_tc_mlp (two kernels around the GEMMs, the
                          * combine included); 0 (LLMR_GPTOSS_TC_FUSED_MLP=0): five kernels, the same bits */
    gptoss_tc tc;
    int32_t *f16_shift;  /* fp16 experts: every layer's gate_up then down shifts, [L, 2, E], in the workspace */
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
    int batch_linear;         /* 1 (default): gptoss_linear_rows below batch_tc_min rows; 0 (LLMR_GPTOSS_BATCH_LINEAR=0): row groups */
    int batch_tc_min;         /* rows from which batched linears go to cuBLAS (LLMR_GPTOSS_BATCH_TC_MIN, default 5) */
    int batch_tc_min_qkv;     /* the same for the fused q/k/v and lm_head (LLMR_GPTOSS_BATCH_TC_MIN_QKV, default 2) */
    int batch_tc_splits;      /* hi/lo parts of those GEMMs (LLMR_GPTOSS_BATCH_TC_SPLIT: 2, default, or 3, tc.h) */
    int batch_fuse;           /* LLMR_GPTOSS_BATCH_FUSE: 5 (default, session 25) = 4, and that router's last block
                               * also writes the route's tables (no gptoss_moe_route launch);
                               * 4 = 3, and that router also writes gate_up's
                               * pre-staged token rows (the F16 form's staging launch gone);
                               * 3 = 2, and o_proj's parts summed into x by the
                               * router (gptoss_moe_router_decode_add) where the experts take the tensor-core path;
                               * 2 = 1, and o_proj's split written by the attention
                               * (gptoss_attention_rows_split); 1: steps whose q/k/v go to cuBLAS run the row kernels
                               * around it (kernels.h gptoss_rows_norm_split, gptoss_rows_qkv_finish; the same values);
                               * 0: combine, norm, split, reduce, two RoPEs and the KV store as their own launches */
    int interleave;           /* prompt tokens per slice while rows decode (LLMR_GPTOSS_INTERLEAVE) */
    int prefill_burst;        /* prefill slices per scheduler iteration while rows decode (LLMR_GPTOSS_PREFILL_BURST) */
    int batch_attn;           /* batched steps' attention (LLMR_GPTOSS_BATCH_ATTN): 0 _at, 1 decode-split, 2 rows (default) */
    float *batt_part;         /* its scratch for GPTOSS_MAX_BATCH rows (batch_attn only) */
    int32_t *batt_ctr;
    int batch_sample;         /* 1 (default): one gptoss_sample_rows for all rows; 0 (LLMR_GPTOSS_BATCH_SAMPLE=0): per row */
    int prefill_pack;         /* whole prompts prefilled together (LLMR_GPTOSS_PREFILL_PACK, scheduler.cu): 3 short with short
                               * and long with long, 2 any, 1 only those past the experts' crossover, 0 off */
    int pack_max_t;           /* a packed group's most tokens (LLMR_GPTOSS_PREFILL_PACK_MAX; scheduler.cu) */
    int step_ahead;           /* 1 (default): a lone row's step launched before its token reaches the host (scheduler.cu
                               * sched_step_ahead); 0 (LLMR_GPTOSS_STEP_AHEAD=0): after */
    int trace;                /* LLMR_GPTOSS_SCHED_TRACE=1: one stderr line per prefill slice and decode step;
                               * =2 also each row's argmax after its step and before sampling (synchronizes) */
    float *dbg_rl;            /* debug step only: each layer's router logits [layers, rows, experts] (device) */
    gptoss_sample_row *srow_host, *srow_dev; /* its per-row parameters: pinned staging, device copy */
    float *srow_work;         /* its work area, gptoss_sample_rows_work(GPTOSS_MAX_BATCH, vocab) floats */
    gptoss_logprob_row *lprow_host, *lprow_dev; /* logprobs of a step's rows (gptoss_logprobs_rows): pinned staging, */
    llmr_token_logprobs *lp_host, *lp_dev;      /* device copy; results on the device, pinned host copy */
    struct sched_stats *ss;   /* the engine thread's time accounting (scheduler.cu) */
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
    /* one decode step bound to this session's cache and logits (lazy): [0] short contexts, [1] from m->split_from
     * keys on (the full-attention layers on the split kernel) */
    cudaGraphExec_t graph[2];
    uint64_t bytes;
    volatile int cancel;
};

static inline void mlog(const gptoss_model *m, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void mlog(const gptoss_model *m, int level, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (m && m->host && m->host->log) m->host->log(m->host->host, level, line);
    else fprintf(stderr, "gptoss_cuda: %s\n", line);
}

static inline int cancelled(gptoss_session *s) { return __atomic_load_n(&s->cancel, __ATOMIC_ACQUIRE); }

/* What a debug-eval forward copies out (gptoss_session_eval_debug). */
typedef struct debug_out {
    float *hidden, *router, *logits; /* see gptoss_session_eval_debug; NULL = not wanted */
    const int32_t *force_topk;       /* [layers, n_total, 4] or NULL */
    float *logits_dev;               /* [chunk, vocab] device scratch when logits are wanted */
    size_t n_total, row0;            /* rows of the whole request, first row of this chunk */
} debug_out;

/* ---- model.cu */
/* The KV view of layer l through block tables at `table` (row stride max_pages) over the model's pool. */
gptoss_kv gptoss_model_kv(const gptoss_model *m, const int32_t *table, int max_pages, int l);
/* This session's KV view of layer l (its block table, the model's pool). */
gptoss_kv gptoss_layer_kv(const gptoss_session *s, int l);
/* Takes pages until the session can hold `tokens` positions; OOM_VRAM names pages needed and free. */
llmr_engine_status gptoss_ensure_pages(gptoss_session *s, uint64_t tokens, char *err, size_t es);

/* ---- forward.cu */
struct step_prof;
struct step_prof *gptoss_prof_create(int layers); /* NULL unless LLMR_GPTOSS_PROFILE=1 */
void gptoss_prof_report(const struct step_prof *p);
void gptoss_prof_free(struct step_prof *p);
cudaError_t gptoss_prof_begin(struct step_prof *p, cudaStream_t st);       /* before a timed sequence */
cudaError_t gptoss_prof_mark_sample(struct step_prof *p, cudaStream_t st); /* after the sampling launches */
cudaError_t gptoss_prof_collect(struct step_prof *p, int is_sample);       /* waits, adds, resets */
void gptoss_prefill_profile_create(gptoss_model *m); /* LLMR_GPTOSS_PREFILL_PROFILE=1 */
void gptoss_prefill_profile_free(gptoss_model *m);
/* Evaluates T (<= m->chunk) tokens at the session's end; the distribution lands in s->logits. */
llmr_engine_status gptoss_forward(gptoss_session *s, const int32_t *tokens, int T, debug_out *dbg, char *err, size_t es);
/* The same for several sessions' prompt chunks as the rows of one pass (packed prefill): each segment's tokens at its
 * session's end, at most m->chunk rows in all, the sessions distinct. The linears and the experts run over all rows
 * at once, so expert weights are read once for the group; RoPE, the KV store and attention run per segment. Each
 * segment's rows take the same kernels as a lone forward of it where the rows' count picks no other path. Where it
 * does, the experts' precision is kept: in a pass past the experts' crossover, the leading segments that alone would
 * take the tensor-core kernel (gptoss_prompt_precise: short prompts, which the scheduler puts first) become
 * gptoss_tc_mlp's precise rows, two fp16 parts as that kernel's. dbg: only with one segment. */
#define GPTOSS_MAX_SEGMENTS 16
typedef struct gptoss_segment {
    gptoss_session *s;
    const int32_t *tokens;
    int T;
} gptoss_segment;
llmr_engine_status gptoss_forward_segments(const gptoss_segment *segs, int nseg, debug_out *dbg, char *err, size_t es);
/* Whether a whole prompt of T tokens keeps its experts' precision packed into a longer prefill (forward.cu). */
int gptoss_prompt_precise(const gptoss_model *m, int T);
/* n tokens in chunks of m->chunk. */
llmr_engine_status gptoss_eval_tokens(gptoss_session *s, const int32_t *tokens, size_t n, debug_out *dbg, char *err,
                                      size_t es);
/* Room and vocabulary checks of n new tokens (UNSUPPORTED naming the bad token or the limit). */
llmr_engine_status gptoss_check_tokens(const gptoss_session *s, const int32_t *tokens, size_t n, char *err, size_t es);
/* The experts of one layer on tensor cores for the pairs already routed (m->counts, offsets, pair_token):
 * gate_up + SwiGLU from x (rows ldx = hidden size; swz: chunk-swizzled, as m->hsw) into m->act, down +
 * bias into m->dn. max_pairs bounds the pairs (4 x rows). parts: the activations' bf16 parts, 3 (fp32
 * level; the decode steps') or 2 (the prompt path's level, a third fewer products; the streaming kernel
 * only), or GPTOSS_MOE_PARTS_F16: the streaming kernel's F16 form (m->batch_moe_f16; the layer's fp16
 * shifts). The kernel is m->moe_mma_stream's. x_staged: m->mstage already holds gate_up's pre-staged rows, the
 * max_pairs / 4 token rows of x (gptoss_moe_router_decode_add wrote them); only where gptoss_moe_mma_prestaged. */
#define GPTOSS_MOE_PARTS_F16 16
cudaError_t gptoss_moe_mma_experts(gptoss_model *m, const layer_weights *w, const float *x, int swz, int max_pairs,
                                   int parts, int x_staged);
/* Whether gptoss_moe_mma_experts pre-stages gate_up's input at this shape (gptoss_mstage_tokens, gptoss_mxfp4_stage_f16). */
int gptoss_moe_mma_prestaged(const gptoss_model *m, int max_pairs, int parts);
/* Where gate_up's pre-staged token rows go: m->mstage past its GPTOSS_MSTAGE_PAIRS pair rows. */
void *gptoss_mstage_tokens(const gptoss_model *m);
/* q, k and v of T rows of x (the normed residual) into m->q, m->kn, m->vn (+ biases) as ONE tensor-core
 * linear with `splits` activation parts (tc.h gptoss_tc_linear_segs), when m->qkv_fused; returns
 * cudaErrorNotSupported, having launched nothing, when it cannot (not fused, no tensor cores, scratch too
 * small): the caller then runs the three linears. */
cudaError_t gptoss_qkv_tc(gptoss_model *m, const layer_weights *w, const float *x, int T, int splits);
/* Appends the token in m->tok at position n_ctx through the session's decode graph (asynchronous). */
llmr_engine_status gptoss_decode_step(gptoss_session *s, char *err, size_t es);

/* ---- scheduler.cu */
int gptoss_sched_start(gptoss_model *m); /* 0, or -1 when the engine thread cannot start */
void gptoss_sched_stop(gptoss_model *m);  /* fails queued requests, joins the thread; idempotent */

/* The tiled copy a T = 1 expert reader is given: the layer's own where the copy took the experts' place
 * (moe_tiled_in_place), else NULL (the checkpoint's layout). */
static inline const gptoss_mxfp4_tiled *gptoss_gu_tiled(const gptoss_model *m, const layer_weights *w) {
    return m->moe_tiled_in_place ? &w->gu_tiled : NULL;
}
static inline const gptoss_mxfp4_tiled *gptoss_dn_tiled(const gptoss_model *m, const layer_weights *w) {
    return m->moe_tiled_in_place ? &w->dn_tiled : NULL;
}

/* Whether the batch-1 decode graph splits its full-attention layers' keys over blocks at this many keys (its second
 * graph: gptoss_decode_step); the batched steps that take the batch-1 attention kernel follow the same rule. */
static inline int gptoss_split_keys(const gptoss_model *m, uint64_t keys) {
    return m->fused && !m->split_attn && m->split_from > 0 && keys >= (uint64_t)m->split_from;
}

#endif
