/* forward.cu — the forward pass of a chunk, the batch-1 decode step as a CUDA graph, and the
 * per-kernel profiles (model_impl.h). */
#include "engines/gptoss_cuda/model_impl.h"

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

void gptoss_prof_free(step_prof *p) {
    if (!p) return;
    for (int i = 0; p->ev && i < p->cap; i++) /* events never made are 0 (calloc) */
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    free(p->ev);
    free(p->cat);
    free(p);
}

/* NULL when profiling is off, or when its events cannot be made (then it stays off, said on stderr). */
struct step_prof *gptoss_prof_create(int layers) {
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
        gptoss_prof_free(p);
        return NULL;
    }
    return p;
}

/* Records the start of a timed sequence (before its first launch). */
cudaError_t gptoss_prof_begin(struct step_prof *p, cudaStream_t st) {
    p->n = 1;
    return cudaEventRecord(p->ev[0], st);
}

/* Records "launch of category cat done", after prof_begin. */
static cudaError_t prof_mark(step_prof *p, int cat, cudaStream_t st) {
    if (p->n < 1 || p->n >= p->cap) return cudaErrorInvalidValue; /* more launches than planned: a bug here */
    p->cat[p->n] = (unsigned char)cat;
    return cudaEventRecord(p->ev[p->n++], st);
}

/* The sampler's launches done (scheduler.cu times its sampling launches in the same table). */
cudaError_t gptoss_prof_mark_sample(struct step_prof *p, cudaStream_t st) { return prof_mark(p, PROF_SAMPLE, st); }

/* Waits for the step's last event and adds its intervals; resets for the next step. */
cudaError_t gptoss_prof_collect(struct step_prof *p, int is_sample) {
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

void gptoss_prof_report(const step_prof *p) {
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

/* The events of LLMR_GPTOSS_PREFILL_PROFILE=1 (see prefill_profile_report). */
void gptoss_prefill_profile_free(gptoss_model *m) {
    for (int i = 0; m->pf_ev && i < 6 * m->cfg.num_layers + 1; i++)
        if (m->pf_ev[i]) cudaEventDestroy(m->pf_ev[i]);
    free(m->pf_ev);
    m->pf_ev = NULL;
}

void gptoss_prefill_profile_create(gptoss_model *m) {
    const char *v = getenv("LLMR_GPTOSS_PREFILL_PROFILE");
    if (!v || strcmp(v, "1") != 0) return;
    const int n = 6 * m->cfg.num_layers + 1;
    m->pf_ev = (cudaEvent_t *)calloc((size_t)n, sizeof *m->pf_ev);
    for (int i = 0; m->pf_ev && i < n; i++)
        if (cudaEventCreate(&m->pf_ev[i]) != cudaSuccess) {
            fprintf(stderr, "gptoss_cuda: LLMR_GPTOSS_PREFILL_PROFILE=1 ignored: cannot create %d CUDA events\n", n);
            gptoss_prefill_profile_free(m);
            return;
        }
}
/* ---------------------------------------------------------------- forward pass */

/* Host destinations of the parity/debug outputs for the rows of one chunk. */

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
    if (m->use_tc && T >= GPTOSS_TC_MIN_T)
        return gptoss_tc_linear(&m->tc, m->tc.splits, x, ldx, W, b, T, K, N, y, ldy, accumulate);
    return gptoss_linear(x, ldx, W, b, T, K, N, y, ldy, accumulate, m->stream);
}

/* Whether the experts of a T-token chunk run on the tensor-core kernel (gptoss_moe_mma_experts): up to
 * m->moe_mma_prefill tokens. The kernel's time grows with T (H200, 20b, one layer with 2 activation
 * parts: 0.93 / 1.63 / 3.10 ms at T = 256 / 512 / 1,024), dequantize + cuBLAS's is mostly fixed per layer
 * (the count sync, the per-expert calls, dequantizing every used expert: ~2 ms a layer up to 512). */
static int fwd_mma_experts(const gptoss_model *m, int T, int precise) {
    return m->moe_mma && (T <= m->moe_mma_prefill || precise);
}

/* Whether a whole prompt of T tokens packed into a longer prefill (the scheduler's packing) keeps its experts'
 * precision there: alone its experts take the tensor-core kernel's F16 form (two fp16 parts per activation, ~2^-22),
 * and in a pass past the crossover its rows become gptoss_tc_mlp's precise rows (two fp16 parts, on
 * gptoss_mxfp4_prompt_gemm or cuBLAS) where that path is the fp16 experts' (tc.f16, the fused MLP, not the stacked
 * experts). */
int gptoss_prompt_precise(const gptoss_model *m, int T) {
    return fwd_mma_experts(m, T, 0) && m->prompt_moe_f16 && m->use_tc && m->tc.f16 && m->tc_fused_mlp &&
           !(m->tc.wst[0] && m->tc.wst[1]);
}

/* Whether the T-token forward runs the stacked experts (tc.h; their scratch exists only with
 * LLMR_GPTOSS_TC_STACKED=1, off by default). */
static int fwd_stacked(const gptoss_model *m, int T, int precise) {
    return m->use_tc && T >= GPTOSS_TC_MIN_T && !fwd_mma_experts(m, T, precise) && m->tc.wst[0] && m->tc.wst[1];
}

/* Enqueues the stacked dequantization of layer l's gate_up (which 0) or down (1) on the side stream. */
static cudaError_t fwd_prefetch(gptoss_model *m, int l, int which, int used_only) {
    const gptoss_config *c = &m->cfg;
    const layer_weights *w = &m->layers[l];
    const int H = c->hidden_size, I = c->intermediate_size, E = c->num_experts;
    if (which == 0) return gptoss_tc_prefetch(&m->tc, 0, w->gu_blocks, w->gu_scales, w->gu_bias, E, 2 * I, H, used_only);
    return gptoss_tc_prefetch(&m->tc, 1, w->dn_blocks, w->dn_scales, w->dn_bias, E, H, I, used_only);
}

/* The stacked experts of layer l: gate_up -> SwiGLU -> down into m->dn. tc.ahead (LLMR_GPTOSS_TC_AHEAD=1):
 * the weights were prefetched a layer ahead, and the next layer's are as soon as this layer's GEMMs free
 * each scratch; else (default) the used experts of both projections are dequantized now on the side
 * stream, one launch each, and each GEMM waits only for its own expert (the down weights are written
 * while the gate_up GEMMs run). */
static cudaError_t fwd_experts_stacked(gptoss_model *m, int l, int T) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, E = c->num_experts, I = c->intermediate_size, P = T * GPTOSS_TOPK;
    const int next = l + 1 < c->num_layers;
    cudaError_t e;
    const int ahead = m->tc.ahead;
    if ((e = gptoss_tc_fetch_counts(&m->tc, m->counts, E)) != cudaSuccess) return e;
    if (!ahead && ((e = fwd_prefetch(m, l, 0, 1)) != cudaSuccess || (e = fwd_prefetch(m, l, 1, 1)) != cudaSuccess))
        return e;
    if ((e = gptoss_tc_experts_stacked(&m->tc, 0, m->h, H, m->pair_token, E, P, H, 2 * I, m->gu)) != cudaSuccess)
        return e;
    if (ahead && next && (e = fwd_prefetch(m, l + 1, 0, 0)) != cudaSuccess) return e;
    if ((e = gptoss_swiglu(m->gu, P, I, c->swiglu_alpha, c->swiglu_limit, m->act, m->stream)) != cudaSuccess) return e;
    if ((e = gptoss_tc_experts_stacked(&m->tc, 1, m->act, I, NULL, E, P, I, H, m->dn)) != cudaSuccess) return e;
    return ahead && next ? fwd_prefetch(m, l + 1, 1, 0) : cudaSuccess;
}

cudaError_t gptoss_qkv_tc(gptoss_model *m, const layer_weights *w, const float *x, int T, int splits) {
    if (!m->qkv_fused || !m->use_tc) return cudaErrorNotSupported;
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, QD = c->num_heads * c->head_dim, KVD = c->num_kv_heads * c->head_dim;
    const gptoss_tc_segs segs = {3, {0, QD, QD + KVD}, {QD, KVD, KVD}, {QD, KVD, KVD}, {m->q, m->kn, m->vn}};
    const cudaError_t e = gptoss_tc_linear_segs(&m->tc, splits, x, H, w->q_w, w->q_b, T, H, &segs);
    return e == cudaErrorInvalidValue ? cudaErrorNotSupported : e; /* refused before any launch: scratch too small */
}

int gptoss_moe_mma_prestaged(const gptoss_model *m, int max_pairs, int parts) {
    return parts == GPTOSS_MOE_PARTS_F16 && m->batch_moe_prestage && max_pairs <= GPTOSS_MSTAGE_PAIRS &&
           gptoss_mxfp4_mma_stream_f16_prestaged(m->cfg.hidden_size, max_pairs);
}

void *gptoss_mstage_tokens(const gptoss_model *m) {
    const int H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
    return m->mstage + (size_t)GPTOSS_MSTAGE_PAIRS * 16 * gptoss_mxfp4_stage_f16_units(H > I ? H : I);
}

cudaError_t gptoss_moe_mma_experts(gptoss_model *m, const layer_weights *w, const float *x, int swz, int max_pairs,
                                   int parts, int x_staged) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, E = c->num_experts, I = c->intermediate_size;
    cudaError_t e;
    if (parts == GPTOSS_MOE_PARTS_F16) { /* the F16 form: set only with the streaming kernel and the fp16 shifts */
        /* pre-staged rows where that shape reads them (max_pairs is the launch's exact pair count here: 4 per row):
         * gate_up's once per token (its launch gathers them by pair), down's once per pair */
        const int pre = m->batch_moe_prestage && max_pairs <= GPTOSS_MSTAGE_PAIRS;
        void *gu_staged = gptoss_moe_mma_prestaged(m, max_pairs, parts) ? gptoss_mstage_tokens(m) : NULL;
        void *dn_staged = pre && gptoss_mxfp4_mma_stream_f16_prestaged(I, max_pairs) ? m->mstage : NULL;
        if (x_staged && !gu_staged) return cudaErrorInvalidValue;
        if (gu_staged && !x_staged &&
            (e = gptoss_mxfp4_stage_f16(x, H, swz, NULL, max_pairs / GPTOSS_TOPK, H, gu_staged, m->stream)) != cudaSuccess)
            return e;
        gptoss_mxfp4_tiled gt = w->gu_tiled, dt = w->dn_tiled; /* the e5m2 copies from moe_e5_min_pairs pairs */
        if (max_pairs < m->moe_e5_min_pairs) gt.e5 = dt.e5 = NULL;
        if ((e = gptoss_mxfp4_mma_stream_f16(x, H, swz, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, w->gu_shift,
                                             m->counts, m->offsets, E, H, 2 * I, 1, c->swiglu_alpha, c->swiglu_limit,
                                             max_pairs, m->moe_stream_warps, gu_staged, &gt, m->act, m->stream)) != cudaSuccess)
            return e;
        if (dn_staged &&
            (e = gptoss_mxfp4_stage_f16(m->act, I, 0, NULL, max_pairs, I, m->mstage, m->stream)) != cudaSuccess)
            return e;
        return gptoss_mxfp4_mma_stream_f16(m->act, I, 0, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, w->dn_shift, m->counts,
                                           m->offsets, E, I, H, 0, 0.0f, 0.0f, max_pairs, m->moe_stream_warps, dn_staged,
                                           &dt, m->dn, m->stream);
    }
    if (m->moe_mma_stream) {
        if ((e = gptoss_mxfp4_mma_stream(x, H, swz, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts,
                                         m->offsets, E, H, 2 * I, 1, c->swiglu_alpha, c->swiglu_limit, max_pairs, parts,
                                         m->moe_stream_warps, m->act, m->stream)) != cudaSuccess)
            return e;
        return gptoss_mxfp4_mma_stream(m->act, I, 0, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E,
                                       I, H, 0, 0.0f, 0.0f, max_pairs, parts, m->moe_stream_warps, m->dn, m->stream);
    }
    if ((e = gptoss_mxfp4_mma(x, H, swz, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts, m->offsets, E,
                              H, 2 * I, 1, c->swiglu_alpha, c->swiglu_limit, m->act, m->stream)) != cudaSuccess)
        return e;
    return gptoss_mxfp4_mma(m->act, I, 0, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, I, H, 0,
                            0.0f, 0.0f, m->dn, m->stream);
}

/* The experts of one layer for the grouped pairs already routed (m->counts, offsets, pair_token):
 * gate_up -> SwiGLU -> down into m->dn. Up to m->moe_mma_prefill tokens: the tensor-core kernel (SwiGLU
 * in its epilogue); else tc.cu's dequantize + cuBLAS for T >= GPTOSS_TC_MIN_T, the SIMT kernels below that.
 * *combined = 1 when the experts' outputs were already added into the residual m->x (gptoss_tc_mlp, which
 * writes no m->dn); else the caller combines m->dn. */
static cudaError_t fwd_experts(gptoss_model *m, const layer_weights *w, int T, int Tp, int precise, int *combined) {
    const gptoss_config *c = &m->cfg;
    const int H = c->hidden_size, E = c->num_experts, I = c->intermediate_size, P = T * GPTOSS_TOPK;
    cudaStream_t st = m->stream;
    cudaError_t e;
    if (fwd_mma_experts(m, T, precise)) /* tensor cores, counts read on the device: no host sync, no bf16
                                         * scratch; the activations in the F16 form's two fp16 parts (prompt_moe_f16:
                                         * the 3-part level), else in as many bf16 parts as the prompt's other
                                         * products at this T (3, fp32-level and bit for bit gptoss_mxfp4_mma, when
                                         * precise) */
        return gptoss_moe_mma_experts(m, w, m->h, 0, P,
                                      !precise && m->prompt_moe_f16                                       ? GPTOSS_MOE_PARTS_F16
                                      : !precise && m->use_tc && T >= GPTOSS_TC_MIN_T && m->tc.splits == 2 ? 2
                                                                                                          : 3,
                                      0);
    if (m->use_tc && T >= GPTOSS_TC_MIN_T) {
        const gptoss_tc_experts_w gu = {w->gu_blocks, w->gu_scales, w->gu_bf16, w->gu_bias, w->gu_shift,
                                        w->gu_tiled.blocks ? &w->gu_tiled : NULL},
                                  dn = {w->dn_blocks, w->dn_scales, w->dn_bf16, w->dn_bias, w->dn_shift,
                                        w->dn_tiled.blocks ? &w->dn_tiled : NULL};
        /* the counts on the host (a sync) unless the fused MLP reads them on the device alone */
        const int dev_counts = m->tc_fused_mlp && gptoss_tc_mlp_device_counts(&m->tc, &gu, &dn, E, T, Tp, H, I);
        if (dev_counts)
            m->tc.counts_fetched = 0; /* the host copy is another layer's */
        else if ((e = Tp ? gptoss_tc_fetch_counts_precise(&m->tc, m->counts, E) : gptoss_tc_fetch_counts(&m->tc, m->counts, E)) !=
                 cudaSuccess)
            return e;
        /* the whole MLP with two kernels around the GEMMs, the combine included (same bits); four calls where it
         * does not apply (not without the host counts, which they read) */
        if (m->tc_fused_mlp &&
            ((e = gptoss_tc_mlp(&m->tc, m->h, H, m->pair_token, &gu, &dn, m->counts, m->offsets, m->rw, m->pair_of, E, T, Tp,
                                H, I, c->swiglu_alpha, c->swiglu_limit, m->x)) != cudaErrorNotSupported ||
             dev_counts)) {
            *combined = e == cudaSuccess;
            return e;
        }
        if (m->moe_tiled_in_place) return cudaErrorNotSupported; /* they dequantize the checkpoint's layout */
        /* the four calls are bf16 only: an fp16 expert cache is left out (they dequantize to bf16 themselves) */
        const uint16_t *gu_cache = m->tc.f16 ? NULL : gu.bf16, *dn_cache = m->tc.f16 ? NULL : dn.bf16;
        if ((e = gptoss_tc_experts(&m->tc, m->h, H, m->pair_token, gu.blocks, gu.scales, gu_cache, gu.bias, m->counts,
                                   m->offsets, E, P, H, 2 * I, m->gu)) != cudaSuccess ||
            (e = gptoss_swiglu(m->gu, P, I, c->swiglu_alpha, c->swiglu_limit, m->act, st)) != cudaSuccess)
            return e;
        return gptoss_tc_experts(&m->tc, m->act, I, NULL, dn.blocks, dn.scales, dn_cache, dn.bias, m->counts, m->offsets, E,
                                 P, I, H, m->dn);
    }
    if ((e = gptoss_mxfp4_grouped(m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts, m->offsets,
                                  E, T, H, 2 * I, m->gu, st)) != cudaSuccess ||
        (e = gptoss_swiglu(m->gu, P, I, c->swiglu_alpha, c->swiglu_limit, m->act, st)) != cudaSuccess)
        return e;
    return gptoss_mxfp4_grouped(m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, T, I,
                                H, m->dn, st);
}

/* Evaluates T (<= m->chunk) tokens at positions s->n_ctx.. and leaves the distribution after the
 * last one in s->logits. Reads as the model.h overview says. */
llmr_engine_status gptoss_forward(gptoss_session *s, const int32_t *tokens, int T, debug_out *dbg, char *err,
                                  size_t es) {
    const gptoss_segment seg = {s, tokens, T};
    return gptoss_forward_segments(&seg, 1, dbg, err, es);
}

/* The forward over the segments' tokens as rows of one pass (see model_impl.h): row `off` of segment i is its first
 * token. Everything but RoPE, the KV store and attention runs over all T rows at once; those three run per segment,
 * each at its session's positions and through its own KV pages, as a lone forward of that segment would. */
llmr_engine_status gptoss_forward_segments(const gptoss_segment *segs, int nseg, debug_out *dbg, char *err, size_t es) {
    gptoss_model *m = segs[0].s->m;
    const gptoss_config *c = &m->cfg;
    cudaStream_t st = m->stream;
    const int H = c->hidden_size, NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    const int QD = NH * D, KVD = NKV * D, E = c->num_experts, V = c->vocab_size;
    const int pos0 = (int)segs[0].s->n_ctx; /* the prefill profile's label */
    char what[96];
    if (nseg < 1 || nseg > GPTOSS_MAX_SEGMENTS || (dbg && nseg != 1))
        return fail(LLMR_ENGINE_INTERNAL, err, es, "forward of %d segments (1..%d, one with a debug output)", nseg,
                    GPTOSS_MAX_SEGMENTS);
    int off[GPTOSS_MAX_SEGMENTS + 1];
    off[0] = 0;
    for (int i = 0; i < nseg; i++) {
        llmr_engine_status pr = gptoss_ensure_pages(segs[i].s, (uint64_t)segs[i].s->n_ctx + (uint64_t)segs[i].T, err, es);
        if (pr != LLMR_ENGINE_OK) return pr;
        off[i + 1] = off[i] + segs[i].T;
    }
    const int T = off[nseg];
    if (T > m->chunk) return fail(LLMR_ENGINE_INTERNAL, err, es, "forward of %d rows (at most %d)", T, m->chunk);
    for (int i = 0; i < nseg; i++)
        CUDA_TRY(cudaMemcpyAsync(m->tok + off[i], segs[i].tokens, (size_t)segs[i].T * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 st),
                 "token upload");
    CUDA_TRY(gptoss_embed(m->embed, m->tok, T, H, c->vocab_size, m->x, st), "embedding");
    if (dbg && dbg->hidden) {
        llmr_engine_status r = copy_rows(dbg->hidden + dbg->row0 * H, m->x, (size_t)T * H * sizeof(float), st, err, es);
        if (r != LLMR_ENGINE_OK) return r;
    }
#define PF_MARK(i)                                                                          \
    do {                                                                                    \
        if (pf) CUDA_TRY(cudaEventRecord(m->pf_ev[(i)], st), "prefill profile");            \
    } while (0)
    /* a debug forward of a model loaded with LLMR_GPTOSS_DEBUG_PRECISE=1 runs its experts at fp32 level */
    const int precise = dbg && m->debug_precise;
    const int pf = m->pf_ev != NULL && T > 1, stacked = fwd_stacked(m, T, precise);
    /* LLMR_GPTOSS_TC_DENSE_STACKED (its scratch exists) for long chunks; the stacked rows need K % 8 == 0 */
    const int dense = m->use_tc && T >= m->dense_min_t && m->tc.wd != NULL && H % 8 == 0 && QD % 8 == 0;
    /* The leading segments that alone would take the tensor-core experts (short prompts, which the scheduler packs
     * first): in a pass on the cuBLAS path their rows keep that precision as gptoss_tc_mlp's precise rows. */
    int Tp = 0;
    if (!stacked && !fwd_mma_experts(m, T, precise) && m->use_tc && T >= GPTOSS_TC_MIN_T)
        for (int i = 0; i < nseg && gptoss_prompt_precise(m, segs[i].T); i++) Tp = off[i + 1];
    if (stacked && m->tc.ahead) { /* layer 0's expert weights; each layer then prefetches the next */
        FWD_TRY(fwd_prefetch(m, 0, 0, 0), "expert weight prefetch");
        FWD_TRY(fwd_prefetch(m, 0, 1, 0), "expert weight prefetch");
    }
    PF_MARK(0);
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        snprintf(what, sizeof what, "layer %d attention", l);
        CUDA_TRY(gptoss_rmsnorm(m->x, w->attn_norm, T, H, c->rms_norm_eps, m->h, st), what);
        if (dense) { /* one stacked split of h for q, k and v (tc.h "Stacked dense linears") */
            FWD_TRY(gptoss_tc_split_stacked(m->h, H, NULL, T, H, m->tc.splits, m->tc.xs, st), what);
            FWD_TRY(gptoss_tc_linear_stacked(&m->tc, w->q_w, w->q_b, w->q_st, T, H, QD, m->q, QD, 0), what);
            FWD_TRY(gptoss_tc_linear_stacked(&m->tc, w->k_w, w->k_b, w->k_st, T, H, KVD, m->kn, KVD, 0), what);
            FWD_TRY(gptoss_tc_linear_stacked(&m->tc, w->v_w, w->v_b, w->v_st, T, H, KVD, m->vn, KVD, 0), what);
        } else {
            /* one linear for q, k and v when their weights are contiguous (tc.h gptoss_tc_linear_segs) */
            const cudaError_t fe = T >= GPTOSS_TC_MIN_T ? gptoss_qkv_tc(m, w, m->h, T, m->tc.splits) : cudaErrorNotSupported;
            if (fe != cudaErrorNotSupported) FWD_TRY(fe, what);
            else {
                FWD_TRY(fwd_linear(m, m->h, H, w->q_w, w->q_b, T, H, QD, m->q, QD, 0), what);
                FWD_TRY(fwd_linear(m, m->h, H, w->k_w, w->k_b, T, H, KVD, m->kn, KVD, 0), what);
                FWD_TRY(fwd_linear(m, m->h, H, w->v_w, w->v_b, T, H, KVD, m->vn, KVD, 0), what);
            }
        }
        const int window = c->layer_sliding[l] ? c->sliding_window : 0;
        for (int i = 0; i < nseg; i++) { /* each segment at its own positions, through its own pages */
            const gptoss_kv kv = gptoss_layer_kv(segs[i].s, l);
            const int Ti = segs[i].T, p0 = (int)segs[i].s->n_ctx;
            float *q = m->q + (size_t)off[i] * QD, *kn = m->kn + (size_t)off[i] * KVD, *vn = m->vn + (size_t)off[i] * KVD;
            CUDA_TRY(gptoss_rope(q, QD, Ti, NH, p0, m->inv_freq, m->attn_factor, st), what);
            CUDA_TRY(gptoss_rope(kn, KVD, Ti, NKV, p0, m->inv_freq, m->attn_factor, st), what);
            CUDA_TRY(gptoss_kv_store_range(kn, vn, Ti, p0, kv, st), what);
            if (i == nseg - 1) PF_MARK(6 * l + 1);
            if (m->tc_attn && Ti >= GPTOSS_TC_MIN_T)
                CUDA_TRY(gptoss_attention_tc(q, kv, w->sinks, Ti, p0, NH, NKV, window, m->o + (size_t)off[i] * QD, m->atc_kvs,
                                             GPTOSS_ATC_KVS_KEYS, st),
                         what);
            else
                CUDA_TRY(gptoss_attention(q, kv, w->sinks, Ti, p0, NH, NKV, window, m->o + (size_t)off[i] * QD, st), what);
        }
        PF_MARK(6 * l + 2);
        if (dense) {
            FWD_TRY(gptoss_tc_split_stacked(m->o, QD, NULL, T, QD, m->tc.splits, m->tc.xs, st), what);
            FWD_TRY(gptoss_tc_linear_stacked(&m->tc, w->o_w, w->o_b, w->o_st, T, QD, H, m->x, H, 1), what);
        } else {
            FWD_TRY(fwd_linear(m, m->o, QD, w->o_w, w->o_b, T, QD, H, m->x, H, 1), what);
        }
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
        CUDA_TRY(gptoss_moe_route_precise(m->ids, T, Tp, E, m->counts, m->offsets, m->pair_token, m->pair_of, st), what);
        PF_MARK(6 * l + 4);
        int combined = 0; /* the tensor-core MLP also adds into the residual (tc.h gptoss_tc_mlp) */
        FWD_TRY(stacked ? fwd_experts_stacked(m, l, T) : fwd_experts(m, w, T, Tp, precise, &combined), what);
        PF_MARK(6 * l + 5);
        if (!combined) CUDA_TRY(gptoss_moe_combine(m->dn, m->rw, m->pair_of, T, H, m->x, st), what);
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
    /* Final norm and unembedding: every row for the debug path, else only each segment's last row. */
    gptoss_session *s = segs[0].s;
    if (dbg && dbg->logits) {
        CUDA_TRY(gptoss_rmsnorm(m->x, m->norm, T, H, c->rms_norm_eps, m->h, st), "final norm");
        CUDA_TRY(gptoss_linear(m->h, H, m->lm_head, NULL, T, H, V, dbg->logits_dev, V, 0, st), "lm_head");
        llmr_engine_status r = copy_rows(dbg->logits + dbg->row0 * (size_t)V, dbg->logits_dev,
                                         (size_t)T * V * sizeof(float), st, err, es);
        if (r != LLMR_ENGINE_OK) return r;
        CUDA_TRY(cudaMemcpyAsync(s->logits, dbg->logits_dev + (size_t)(T - 1) * V, (size_t)V * sizeof(float),
                                 cudaMemcpyDeviceToDevice, st), "logits copy");
    } else {
        for (int i = 0; i < nseg; i++) {
            CUDA_TRY(gptoss_rmsnorm(m->x + (size_t)(off[i + 1] - 1) * H, m->norm, 1, H, c->rms_norm_eps, m->h, st),
                     "final norm");
            CUDA_TRY(gptoss_linear(m->h, H, m->lm_head, NULL, 1, H, V, segs[i].s->logits, V, 0, st), "lm_head");
        }
    }
    CUDA_TRY(cudaStreamSynchronize(st), "forward pass");
#undef PF_MARK
    if (pf) prefill_profile_report(m, T, pos0);
    for (int i = 0; i < nseg; i++) {
        segs[i].s->n_ctx += (uint32_t)segs[i].T;
        segs[i].s->have_logits = 1;
    }
    return LLMR_ENGINE_OK;
}

/* Appends tokens in chunks; checks the cancel flag between chunks. */
llmr_engine_status gptoss_eval_tokens(gptoss_session *s, const int32_t *tokens, size_t n, debug_out *dbg, char *err,
                                      size_t es) {
    for (size_t done = 0; done < n;) {
        if (cancelled(s)) return fail(LLMR_ENGINE_CANCELLED, err, es, "cancelled during prefill");
        const int T = (int)(n - done < (size_t)s->m->chunk ? n - done : (size_t)s->m->chunk);
        if (dbg) dbg->row0 = done;
        llmr_engine_status st = gptoss_forward(s, tokens + done, T, dbg, err, es);
        if (st != LLMR_ENGINE_OK) return st;
        done += (size_t)T;
    }
    return LLMR_ENGINE_OK;
}

llmr_engine_status gptoss_check_tokens(const gptoss_session *s, const int32_t *tokens, size_t n, char *err, size_t es) {
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

/* One row of force_topk: four distinct expert ids, or all four -1 (the router's own choice there). */
static llmr_engine_status check_forced_row(const int32_t *ids, size_t row, int E, char *err, size_t es) {
    if (ids[0] == -1 && ids[1] == -1 && ids[2] == -1 && ids[3] == -1) return LLMR_ENGINE_OK;
    for (int k = 0; k < GPTOSS_TOPK; k++) {
        if (ids[k] < 0 || ids[k] >= E)
            return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "force_topk[%zu] = %d is not an expert id (0..%d, or -1 in all 4 "
                        "slots of a row for the router's own choice)", row * GPTOSS_TOPK + (size_t)k, ids[k], E - 1);
        for (int j = 0; j < k; j++)
            if (ids[j] == ids[k])
                return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "force_topk row %zu names expert %d twice", row, ids[k]);
    }
    return LLMR_ENGINE_OK;
}

llmr_engine_status gptoss_session_eval_debug(gptoss_session *s, const int32_t *tokens, size_t n, float *logits,
                                             float *hidden, float *router_logits, const int32_t *force_topk,
                                             char *err, size_t es) {
    gptoss_model *m = s->m;
    pthread_mutex_lock(&m->mu);
    cudaSetDevice(m->device);
    debug_out dbg = {hidden, router_logits, logits, force_topk, NULL, n, 0};
    llmr_engine_status st = gptoss_check_tokens(s, tokens, n, err, es);
    for (size_t r = 0; st == LLMR_ENGINE_OK && force_topk && r < n * (size_t)m->cfg.num_layers; r++)
        st = check_forced_row(force_topk + r * GPTOSS_TOPK, r, m->cfg.num_experts, err, es);
    if (st == LLMR_ENGINE_OK && logits &&
        cudaMalloc((void **)&dbg.logits_dev, (size_t)m->chunk * m->cfg.vocab_size * sizeof(float)) != cudaSuccess)
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "no GPU memory for %d rows of debug logits", m->chunk);
    if (st == LLMR_ENGINE_OK) st = gptoss_eval_tokens(s, tokens, n, &dbg, err, es);
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
/* long_ctx: the full-attention layers take the split (flash-decoding) kernel, as LLMR_GPTOSS_SPLIT_ATTN=1 does for
 * every layer (gptoss_decode_step picks it from the position: m->split_from). */
static cudaError_t decode_body(gptoss_session *s, step_prof *prof, int long_ctx) {
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
    if (prof) K_(gptoss_prof_begin(prof, st));
    KP_(EMBED, gptoss_embed(m->embed, m->tok, 1, H, c->vocab_size, m->x, st));
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const gptoss_kv kv = gptoss_layer_kv(s, l);
        if (m->fused) { /* 6 launches per layer */
            KP_(QKV, gptoss_qkv_decode(m->x, w->attn_norm, eps, w->q_w, w->q_b, w->k_w, w->k_b, w->v_w, w->v_b, H, NH, NKV,
                                       m->pos, m->inv_freq, m->attn_factor, m->q, kv, st));
            const int win = c->layer_sliding[l] ? c->sliding_window : 0;
            /* long contexts' full layers: the batched step's attention kernel (its grid sized for the session's last
             * position; blocks past the row's own splits return at once), its scratch the scheduler's (never in use
             * during a decode step) */
            if (long_ctx && win == 0 && m->decode_attn_rows && m->batt_part)
                KP_(ATTN, gptoss_attention_rows(m->q, kv, w->sinks, m->pos, 1, (int)s->max_ctx - 1, NH, NKV, win, m->o,
                                                m->batt_part, m->batt_ctr, st));
            else if (m->split_attn || (long_ctx && win == 0))
                KP_(ATTN, gptoss_attention_decode(m->q, kv, w->sinks, m->pos, 1, NH, NKV, win, m->o, m->att_part, m->ctr + GPTOSS_CTR_ATTN, st));
            else
                KP_(ATTN, gptoss_attention_at(m->q, kv, w->sinks, m->pos, 1, NH, NKV, win, m->o, st));
            if (m->route_ring == 2) { /* the router finished by o_proj's last block, then the gate_up it routes */
                KP_(O, gptoss_gemv1_router_finish(m->o, w->o_w, w->o_b, QD, H, m->x, m->rwt + (size_t)l * H * 32, m->rpart,
                                                  w->router_b, eps, m->rctr, m->ids, m->rw, m->grp, m->rl, m->rnorm, st));
                KP_(GATE_UP, gptoss_moe_routed_gate_up_dp4a(m->x, w->mlp_norm, m->rnorm, m->grp, w->gu_blocks, w->gu_scales,
                                                            w->gu_bias, H, I, c->swiglu_alpha, c->swiglu_limit, m->act, st,
                                                            gptoss_gu_tiled(m, w)));
            } else if (m->router_split) { /* the router split (default; LLMR_GPTOSS_ROUTER_SPLIT=0: off): the router's GEMV in o_proj's blocks */
                KP_(O, gptoss_gemv1_router(m->o, w->o_w, w->o_b, QD, H, m->x, m->rwt + (size_t)l * H * 32, m->rpart, st));
                if (!m->route_ring) /* with the routed ring (1) the finish runs inside the gate_up below */
                    KP_(ROUTER, gptoss_moe_router_finish(m->x, w->mlp_norm, eps, m->rpart, m->router_parts, w->router_b, H, E,
                                                         m->hsw, m->ids, m->rw, m->grp, m->rl, st));
            } else {
                KP_(O, gptoss_linear(m->o, QD, w->o_w, w->o_b, 1, QD, H, m->x, H, 1, st));
                KP_(ROUTER, gptoss_moe_router_decode(m->x, w->mlp_norm, eps, w->router_w, w->router_b, 1, H, E, m->hsw,
                                                     m->ids, m->rw, m->grp, m->rl, m->ctr, st));
            }
            if (m->moe_mma_t1) { /* LLMR_GPTOSS_MOE_MMA_T1=1: the batched step's expert kernels, so alone = batched bit for bit */
                KP_(GATE_UP, gptoss_moe_route(m->ids, 1, E, m->counts, m->offsets, m->pair_token, m->pair_of, st));
                KP_(GATE_UP, gptoss_moe_mma_experts(m, w, m->hsw, 1, GPTOSS_TOPK, 3, 0));
                KP_(DOWN, gptoss_moe_combine(m->dn, m->rw, m->pair_of, 1, H, m->x, st));
                continue;
            }
            if (m->route_ring == 1) /* LLMR_GPTOSS_ROUTE_RING=1 (set only with the router split, never with MMA_T1) */
                KP_(GATE_UP, gptoss_moe_route_gate_up_dp4a(m->x, w->mlp_norm, eps, m->rpart, m->router_parts, w->router_b, E,
                                                           w->gu_blocks, w->gu_scales, w->gu_bias, H, I, c->swiglu_alpha,
                                                           c->swiglu_limit, m->ids, m->rw, m->grp, m->rl, m->act, st,
                                                           gptoss_gu_tiled(m, w)));
            else if (m->route_ring == 0) /* (2: above, with o_proj) */
                KP_(GATE_UP, gptoss_moe_gate_up_decode(m->hsw, m->grp, 1, w->gu_blocks, w->gu_scales, w->gu_bias, E, H, I,
                                                       c->swiglu_alpha, c->swiglu_limit, m->act, st, gptoss_gu_tiled(m, w)));
            KP_(DOWN, gptoss_moe_down_decode(m->act, m->grp, 1, m->rw, w->dn_blocks, w->dn_scales, w->dn_bias, E, I, H, m->x,
                                             st, gptoss_dn_tiled(m, w)));
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

/* Captures decode_body into s->graph[long_ctx] once. A failed capture leaves it NULL and names the cause. */
static llmr_engine_status decode_graph(gptoss_session *s, int long_ctx, char *err, size_t es) {
    gptoss_model *m = s->m;
    if (s->graph[long_ctx]) return LLMR_ENGINE_OK;
    cudaGraph_t g = NULL;
    /* ThreadLocal: other threads may allocate sessions meanwhile; only this thread is restricted. */
    CUDA_TRY(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal), "decode graph capture");
    cudaError_t e = decode_body(s, NULL, long_ctx);
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
    s->graph[long_ctx] = x;
    return LLMR_ENGINE_OK;
}

/* Appends the token already in m->tok at position n_ctx: sets *m->pos, replays the graph. Asynchronous:
 * the next sampling launch is ordered after it on the stream, so no host wait is needed here. */
llmr_engine_status gptoss_decode_step(gptoss_session *s, char *err, size_t es) {
    gptoss_model *m = s->m;
    llmr_engine_status pr = gptoss_ensure_pages(s, (uint64_t)s->n_ctx + 1, err, es); /* outside the graph */
    if (pr != LLMR_ENGINE_OK) return pr;
    /* from m->split_from keys on, the full-attention layers split their keys over blocks (its own graph); not where
     * that graph would be the first one again (the per-op path, or every layer split already) */
    const int long_ctx = gptoss_split_keys(m, (uint64_t)s->n_ctx + 1);
    if (m->prof) { /* LLMR_GPTOSS_PROFILE=1: the same launches, one by one, timed */
        CUDA_TRY(gptoss_set_i32(m->pos, (int32_t)s->n_ctx, m->stream), "decode position");
        CUDA_TRY(decode_body(s, m->prof, long_ctx), "decode step (profiled)");
        CUDA_TRY(gptoss_prof_collect(m->prof, 0), "decode step profile");
        s->n_ctx++;
        s->have_logits = 1;
        return LLMR_ENGINE_OK;
    }
    llmr_engine_status r = decode_graph(s, long_ctx, err, es);
    if (r != LLMR_ENGINE_OK) return r;
    CUDA_TRY(gptoss_set_i32(m->pos, (int32_t)s->n_ctx, m->stream), "decode position");
    CUDA_TRY(cudaGraphLaunch(s->graph[long_ctx], m->stream), "decode graph launch");
    s->n_ctx++;
    s->have_logits = 1;
    return LLMR_ENGINE_OK;
}
