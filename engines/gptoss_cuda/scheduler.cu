/* scheduler.cu — continuous batching: the engine thread, batched decode steps, generate (model_impl.h). */
#include <time.h>

#include "engines/gptoss_cuda/debug_api.h"
#include "engines/gptoss_cuda/env.h"
#include "engines/gptoss_cuda/model_impl.h"

/* ---------------------------------------------------------------- scheduler (continuous batching)
 *
 * One engine thread per model owns the stream. generate() validates its request, queues it and waits;
 * tokens come back through the request's own array and the caller runs on_token on its own thread
 * (ABI). Each scheduler iteration:
 *   1. admits queued requests (up to GPTOSS_MAX_BATCH rows in flight) and prefills the first admitted
 *      one: one slice of m->interleave (GPTOSS_INTERLEAVE_CHUNK = 1,024) tokens when other rows are
 *      decoding (so they keep flowing), its whole prompt in chunks of the prefill chunk size when nothing
 *      else runs; LLMR_GPTOSS_PREFILL_BURST=N takes up to N slices back to back (default 1);
 *   2. waits until every running row's caller has consumed the tokens it was handed (the callback of
 *      token t runs while the GPU evaluates t, and its "stop" must be known before t+1 is handed out);
 *   3. finishes rows that are done (stop id / max_tokens after their last token was evaluated, a callback
 *      stop, cancel, a full context), samples one token for every other row with that row's own
 *      parameters and RNG (gptoss_sample_rows: one call for all B rows, one host wait for all B
 *      ids), hands the tokens out;
 *   4. evaluates the new tokens: one row -> the session's batch-1 CUDA graph (decode_step, unchanged; launched
 *      right after the sampling, before the host has the token: sched_step_ahead);
 *      several -> one batched step (batched_step: B rows, each at its own position through its own
 *      block table; launches, no graph: the GPU measured busy all the time at 64 streams, so launch gaps
 *      are not what limits it yet).
 * Every piece of GPU work is timed with CUDA events (the time accounting below; debug_api.h).
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
    int lp_top;          /* alternatives per token when the caller wants logprobs; -1 off */
    /* shared with the caller, under m->q_mu */
    int32_t *toks;
    llmr_token_logprobs *lps; /* [cap] with toks, when lp_top >= 0 */
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

/* ---------------------------------------------------------------- time accounting (debug_api.h)
 *
 * Every prefill slice, decode step and sampling gets a pair of CUDA events; the interval is added to its
 * counter once its end event has completed (checked without waiting at the end of each iteration, so the
 * host never waits for the GPU just to account). Events live in a ring; intervals are queued in the
 * order they were recorded, so the oldest interval holds the oldest event still needed: when the ring
 * comes round to it, that interval is waited for and taken first. */
#define SS_EVENTS 2048
typedef struct ss_interval {
    int a, b;
    double *dst;
} ss_interval;

struct sched_stats {
    gptoss_cuda_sched_stats s;
    int profile; /* LLMR_GPTOSS_BATCH_PROFILE=1: per-part events inside batched steps */
    cudaEvent_t ev[SS_EVENTS];
    int next_ev;
    ss_interval q[SS_EVENTS]; /* FIFO: q0 first, nq queued */
    int q0, nq;
};

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int stat_bucket(int rows) {
    int b = 0;
    while (b < GPTOSS_CUDA_STAT_BUCKETS - 1 && rows >= (2 << b)) b++;
    return b;
}

/* Takes the oldest interval: waits for its end event when `wait`, else only if already complete.
 * Returns 1 when one was taken. */
static int ss_take(struct sched_stats *ss, int wait) {
    if (!ss->nq) return 0;
    ss_interval *iv = &ss->q[ss->q0];
    if (wait) cudaEventSynchronize(ss->ev[iv->b]);
    else if (cudaEventQuery(ss->ev[iv->b]) != cudaSuccess) return 0;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ss->ev[iv->a], ss->ev[iv->b]) == cudaSuccess) *iv->dst += ms;
    ss->q0 = (ss->q0 + 1) % SS_EVENTS;
    ss->nq--;
    return 1;
}

/* Records an event on the stream; returns its index (-1 when accounting is off or the record failed). */
static int ss_mark(gptoss_model *m) {
    struct sched_stats *ss = m->ss;
    if (!ss) return -1;
    const int i = ss->next_ev;
    while (ss->nq && ss->q[ss->q0].a == i) ss_take(ss, 1); /* the ring came round to a needed event */
    if (cudaEventRecord(ss->ev[i], m->stream) != cudaSuccess) return -1;
    ss->next_ev = (i + 1) % SS_EVENTS;
    return i;
}

/* Queues the interval a -> b to be added to *dst. */
static void ss_add(gptoss_model *m, int a, int b, double *dst) {
    struct sched_stats *ss = m->ss;
    if (!ss || a < 0 || b < 0) return;
    if (ss->nq == SS_EVENTS) ss_take(ss, 1);
    ss->q[(ss->q0 + ss->nq) % SS_EVENTS] = (ss_interval){a, b, dst};
    ss->nq++;
}

/* A decode step of `rows` rows whose launches began at event a: its GPU time and count into the rows' bucket. */
static void ss_step(gptoss_model *m, int a, int rows) {
    if (!m->ss) return;
    const int bk = stat_bucket(rows);
    ss_add(m, a, ss_mark(m), &m->ss->s.step_ms[bk]);
    m->ss->s.steps[bk]++;
    m->ss->s.step_rows[bk] += (uint64_t)rows;
}

static void ss_collect(gptoss_model *m, int wait) {
    if (m->ss)
        while (ss_take(m->ss, wait)) {
        }
}

void gptoss_model_sched_stats(gptoss_model *m, gptoss_cuda_sched_stats *out, int reset) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->mu);
    if (m->ss) {
        ss_collect(m, 1);
        *out = m->ss->s;
        if (reset) memset(&m->ss->s, 0, sizeof m->ss->s);
    }
    pthread_mutex_unlock(&m->mu);
}

static void ss_destroy(struct sched_stats *ss) {
    if (!ss) return;
    for (int i = 0; i < SS_EVENTS; i++)
        if (ss->ev[i]) cudaEventDestroy(ss->ev[i]);
    free(ss);
}

/* NULL (accounting off) with LLMR_GPTOSS_SCHED_STATS=0, or (said on stderr) when the events cannot be made. */
static struct sched_stats *ss_create(void) {
    const char *off = getenv("LLMR_GPTOSS_SCHED_STATS");
    if (off && strcmp(off, "0") == 0) return NULL;
    struct sched_stats *ss = (struct sched_stats *)calloc(1, sizeof *ss);
    if (!ss) return NULL;
    for (int i = 0; i < SS_EVENTS; i++)
        if (cudaEventCreate(&ss->ev[i]) != cudaSuccess) {
            fprintf(stderr, "gptoss_cuda: scheduler time accounting off: cannot create %d CUDA events\n", SS_EVENTS);
            ss_destroy(ss);
            return NULL;
        }
    const char *p = getenv("LLMR_GPTOSS_BATCH_PROFILE");
    ss->profile = p && strcmp(p, "1") == 0;
    return ss;
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

/* Prompt tokens one prefill slice may take. While rows decode, a prompt goes in slices of m->interleave tokens
 * (GPTOSS_INTERLEAVE_CHUNK unless LLMR_GPTOSS_INTERLEAVE says otherwise) so their next tokens wait for one slice
 * (tens of ms) rather than a whole chunk; alone, it takes the full chunk. */
static size_t sched_slice_cap(const gptoss_model *m) {
    return m->n_rows ? (size_t)(m->chunk < m->interleave ? m->chunk : m->interleave) : (size_t)m->chunk;
}

/* A prefilled request joins the running rows (its distribution ready, its penalty counts cleared), or ends when it
 * only evaluated its tokens. The request is off the prefill list. */
static void sched_prefill_done(gptoss_model *m, gen_req *r) {
    gptoss_session *s = r->s;
    char err[512] = "";
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

/* Whether r's whole prompt may go into a packed prefill: not started, not cancelled, at most `room`, and
 *   longer than the tensor-core experts' crossover (m->moe_mma_prefill), so alone it takes the same one-fp16-part
 *   experts (gptoss_tc_mlp: the prompt kernel or cuBLAS on the fp16 expert cache) as in a group (prefill_pack 1 packs
 *   only these);
 *   or short, with prefill_pack 3 (the default) or 2 (sched_prefill_packed says with which others). *is_short says
 *   which. */
static int sched_packable(const gptoss_model *m, const gen_req *r, size_t room, int *is_short) {
    const size_t n = r->in->n_tokens;
    *is_short = n <= (size_t)m->moe_mma_prefill;
    return m->use_tc && r->prefilled == 0 && !cancelled(r->s) && n <= room && (!*is_short || m->prefill_pack >= 2);
}

/* LLMR_GPTOSS_SCHED_TRACE=1: a packed prefill's prompts, each by its first position and length. */
static void sched_trace_packed(const gptoss_model *m, const gptoss_segment *seg, int k) {
    fprintf(stderr, "gptoss_cuda sched: packed prefill of %d prompts (%d rows decoding):", k, m->n_rows);
    for (int i = 0; i < k; i++) fprintf(stderr, " %u+%d", seg[i].s->n_ctx, seg[i].T);
    fputc('\n', stderr);
}

/* Packed prefill (m->prefill_pack): when the first admitted request's whole prompt is packable, later admitted ones
 * that are too join it, up to the slice's token budget and GPTOSS_MAX_SEGMENTS, and all go through one forward
 * (gptoss_forward_segments): their expert weights are read once for the group instead of once per prompt, which for
 * prompts on the cuBLAS path (fp16 expert cache) is most of a prompt's cost (~20 ms a slice on the 20b), and the
 * group shares it. Short prompts (prefill_pack 2 and 3) go first in the pass: alone their experts take the
 * tensor-core kernel, and in a pass past the crossover they keep its precision as precise rows
 * (gptoss_prompt_precise; before those, session 32, they took one fp16 part there and the 20b batching check failed).
 * Where this load has no precise rows, a short prompt groups only with short ones and within the crossover, where the
 * pass takes the kernel as each alone. With prefill_pack 3 (the default) a group holds only prompts of its first
 * one's kind, so the long prompts' groups are those of mode 1, which the 20b batching check passed for many sessions:
 * a long prompt's experts take one fp16 part, whose rounding can turn fp32-level differences between two groups'
 * GEMM shapes into larger ones, and mode 2 (any with any: +1% at 64 streams on the H200) puts it into more kinds of
 * groups (docs/performance.md, session 33). Returns 1 when it ran a group of two or more (each request then off the
 * list, running or answered), 0 when nothing was packed. */
static int sched_prefill_packed(gptoss_model *m, size_t cap) {
    gen_req *r = m->pf_head;
    int head_short, q_short;
    if (!m->prefill_pack || !sched_packable(m, r, cap, &head_short)) return 0;
    const int within = head_short && !gptoss_prompt_precise(m, (int)r->in->n_tokens);
    if (within && cap > (size_t)m->moe_mma_prefill) cap = (size_t)m->moe_mma_prefill;
    gen_req *grp[GPTOSS_MAX_SEGMENTS];
    int grp_short[GPTOSS_MAX_SEGMENTS];
    size_t used = 0;
    int k = 0;
    for (gen_req *q = r; q && k < GPTOSS_MAX_SEGMENTS && m->n_rows + k < GPTOSS_MAX_BATCH; q = q->next)
        if (sched_packable(m, q, cap - used, &q_short) && (m->prefill_pack != 3 || q_short == head_short) &&
            (within ? q_short : !q_short || gptoss_prompt_precise(m, (int)q->in->n_tokens))) {
            grp[k] = q;
            grp_short[k] = q_short;
            used += q->in->n_tokens;
            k++;
        }
    if (k < 2) return 0;
    gptoss_segment seg[GPTOSS_MAX_SEGMENTS];
    int ns = 0;
    for (int pass = 1; pass >= 0; pass--) /* the short prompts first, each kind in list order */
        for (int i = 0; i < k; i++)
            if (grp_short[i] == pass) seg[ns++] = (gptoss_segment){grp[i]->s, grp[i]->in->tokens, (int)grp[i]->in->n_tokens};
    char err[512] = "";
    const int ea = ss_mark(m);
    if (m->trace) sched_trace_packed(m, seg, k);
    const llmr_engine_status st = gptoss_forward_segments(seg, k, NULL, err, sizeof err);
    /* Too few KV pages for the whole group (checked before any launch): each goes alone, where only the one that
     * cannot get its pages fails, as without packing. */
    if (st == LLMR_ENGINE_OOM_VRAM) return 0;
    if (st == LLMR_ENGINE_OK && m->ss) {
        ss_add(m, ea, ss_mark(m), &m->ss->s.prefill_ms);
        m->ss->s.prefill_slices++;
        m->ss->s.prefill_tokens += (uint64_t)used;
    }
    /* off the list, in list order */
    for (int i = 0; i < k; i++) {
        gen_req **pp = &m->pf_head, *prev = NULL;
        while (*pp != grp[i]) { prev = *pp; pp = &(*pp)->next; }
        *pp = grp[i]->next;
        if (m->pf_tail == grp[i]) m->pf_tail = prev;
        grp[i]->next = NULL;
        m->n_pf--;
    }
    for (int i = 0; i < k; i++) {
        if (st != LLMR_ENGINE_OK) { req_done(m, grp[i], st, LLMR_FINISH_LENGTH, err); continue; }
        grp[i]->prefilled = grp[i]->in->n_tokens;
        sched_prefill_done(m, grp[i]);
    }
    return 1;
}

/* Prefill work for the first admitted request; moves it to the running rows when its prompt is in. */
static void sched_prefill(gptoss_model *m) {
    gen_req *r = m->pf_head;
    if (!r) return;
    gptoss_session *s = r->s;
    char err[512] = "";
    const size_t n = r->in->n_tokens;
    llmr_engine_status st = LLMR_ENGINE_OK;
    {   /* whole prompts together where they fit one slice */
        const size_t cap = sched_slice_cap(m);
        if (sched_prefill_packed(m, cap < (size_t)m->pack_max_t ? cap : (size_t)m->pack_max_t)) return;
    }
    do { /* one chunk when rows are decoding, else the whole prompt */
        if (cancelled(s)) { st = fail(LLMR_ENGINE_CANCELLED, err, sizeof err, "cancelled during prefill"); break; }
        if (r->prefilled >= n) break;
        const size_t cap = sched_slice_cap(m);
        const int T = (int)(n - r->prefilled < cap ? n - r->prefilled : cap);
        const int ea = ss_mark(m);
        if (m->trace) fprintf(stderr, "gptoss_cuda sched: prefill slice positions %u..%u (%d rows decoding)\n", s->n_ctx,
                              s->n_ctx + (unsigned)T - 1, m->n_rows);
        st = gptoss_forward(s, r->in->tokens + r->prefilled, T, NULL, err, sizeof err);
        if (st == LLMR_ENGINE_OK) {
            r->prefilled += (size_t)T;
            if (m->ss) {
                ss_add(m, ea, ss_mark(m), &m->ss->s.prefill_ms);
                m->ss->s.prefill_slices++;
                m->ss->s.prefill_tokens += (uint64_t)T;
            }
        }
    } while (st == LLMR_ENGINE_OK && m->n_rows == 0 && r->prefilled < n);
    if (st == LLMR_ENGINE_OK && r->prefilled < n) return; /* more chunks next iteration */
    m->pf_head = r->next;
    if (!m->pf_head) m->pf_tail = NULL;
    m->n_pf--;
    r->next = NULL;
    if (st != LLMR_ENGINE_OK) { req_done(m, r, st, LLMR_FINISH_LENGTH, err); return; }
    sched_prefill_done(m, r);
}

/* A linear over the n rows of a batched step, reading W as few times as it can:
 *   n >= tc_min (batch_tc_min = 5 for o_proj, batch_tc_min_qkv = 2 for lm_head): one cuBLAS GEMM on
 *   tensor cores (split in batch_tc_splits = 2 parts, tc.h);
 *   else gptoss_linear_rows: one pass over W for up to 16 rows (12 at K = 4096), rows split evenly
 *   over as few launches as that allows (LLMR_GPTOSS_BATCH_LINEAR=0: the old path below);
 *   else groups of at most m->batch_rows rows through gptoss_linear, whose T <= 4 GEMV streams W once per
 *   group; its T > 4 tile kernel (written for prefill) is far slower for a few rows (a one-launch 8-row
 *   step took ~110 ms, docs/performance.md). A shape a path refuses falls through to the next. */
static cudaError_t linear_groups(gptoss_model *m, const float *x, int ldx, const uint16_t *W, const uint16_t *b, int n,
                                 int K, int N, float *y, int ldy, int accumulate, int tc_min) {
    if (m->use_tc && m->batch_tc && n >= tc_min) {
        cudaError_t e = gptoss_tc_linear(&m->tc, m->batch_tc_splits, x, ldx, W, b, n, K, N, y, ldy, accumulate);
        if (e != cudaErrorInvalidValue) return e;
    }
    const int cap = m->batch_linear ? gptoss_linear_rows_max(K) : 0;
    if (n >= 2 && cap >= 2 && ldx % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)W & 15) == 0) {
        const int launches = (n + cap - 1) / cap, per = (n + launches - 1) / launches;
        for (int g = 0; g < n; g += per) {
            const int r = n - g < per ? n - g : per;
            cudaError_t e = r == 1 ? gptoss_linear(x + (size_t)g * ldx, ldx, W, b, 1, K, N, y + (size_t)g * ldy, ldy,
                                                   accumulate, m->stream)
                                   : gptoss_linear_rows(x + (size_t)g * ldx, ldx, W, b, r, K, N, y + (size_t)g * ldy,
                                                        ldy, accumulate, m->stream);
            if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
    }
    for (int g = 0; g < n; g += m->batch_rows) {
        const int r = n - g < m->batch_rows ? n - g : m->batch_rows;
        cudaError_t e = gptoss_linear(x + (size_t)g * ldx, ldx, W, b, r, K, N, y + (size_t)g * ldy, ldy, accumulate,
                                      m->stream);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* gptoss_tc_gemm_split with the batched steps' split count. */
static cudaError_t tc_gemm_split(gptoss_model *m, const uint16_t *W, int K, int N, int n) {
    return gptoss_tc_gemm_split(&m->tc, m->batch_tc_splits, W, K, N, n);
}

/* gptoss_tc_linear over the n rows already split into m->tc.xs, with the batched steps' split count. */
static cudaError_t tc_linear_presplit(gptoss_model *m, const uint16_t *W, const uint16_t *b, int K, int N, int n, float *y,
                                      int accumulate) {
    return gptoss_tc_linear(&m->tc, m->batch_tc_splits, NULL, K, W, b, n, K, N, y, N, accumulate);
}

/* The forward pass of n <= GPTOSS_MAX_BATCH rows whose tokens, positions and block tables are already
 * on the device (d_tok[n], d_pos[n], d_tab[n][max_pages]); row b's distribution goes to
 * logits + b * vocab. Norms, RoPE, KV store and attention take all n rows (per-row positions and
 * tables); up to m->batch_qkv_rows rows the attention prologue is gptoss_qkv_rows (each row's bits as alone, W read
 * once), above it q/k/v (fused) go to cuBLAS; up to m->batch_o_rows rows o_proj is gptoss_gemv1_rows (the same
 * property); lm_head is gptoss_gemv1_rows up to m->batch_head_rows rows (2) and cuBLAS above; o_proj past
 * batch_o_rows goes through linear_groups (one pass over W for 2..4 rows, cuBLAS from 5); the
 * MoE block is the fused router, then from m->moe_mma_min_rows rows (default 7) the experts on tensor
 * cores (gptoss_mxfp4_mma_stream: each touched expert read once per step) and the slot sum; up to
 * m->batch_moe_per_row rows (default 6) each row through the batch-1 expert kernels (the dp4a ring gate_up and down,
 * after one router launch for all; with m->moe_rows1 all rows in one launch each); else decode2's fused T = 1..64
 * kernels (each touched expert read once per group of up to 4 of its tokens);
 * LLMR_GPTOSS_FUSED=0 the per-op kernels.
 * max_pos (host): the largest of the n positions; it sizes the attention's grid (gptoss_attention_rows). */
static_assert(GPTOSS_MAX_BATCH <= GPTOSS_DECODE_MAX_T && GPTOSS_MAX_BATCH <= GPTOSS_CHUNK,
              "a batched step's rows must fit the fused MoE kernels and the chunk workspace");
static_assert(8 * gptoss_moe_groups_ints(1) <= gptoss_moe_groups_ints(GPTOSS_DECODE_MAX_T),
              "m->grp (a table for GPTOSS_DECODE_MAX_T tokens) holds the one-token tables of up to 8 rows (batch_moe_per_row)");

/* The debug step's copy of layer l's router logits (m->rl, every router path writes them); nothing otherwise. */
static cudaError_t dbg_router(gptoss_model *m, int l, int n) {
    const size_t E = (size_t)m->cfg.num_experts;
    return m->dbg_rl ? cudaMemcpyAsync(m->dbg_rl + (size_t)l * n * E, m->rl, (size_t)n * E * sizeof(float),
                                       cudaMemcpyDeviceToDevice, m->stream)
                     : cudaSuccess;
}

static cudaError_t batched_rows(gptoss_model *m, const int32_t *d_tok, const int32_t *d_pos, const int32_t *d_tab,
                                int n, int max_pos, float *logits) {
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
    /* LLMR_GPTOSS_BATCH_PROFILE=1: an event after each part (debug_api.h cat_ms), by row bucket */
    double *cat = m->ss && m->ss->profile ? m->ss->s.cat_ms[stat_bucket(n)] : NULL;
    int ev = cat ? ss_mark(m) : -1;
#define PART_(c)                                    \
    do {                                            \
        if (cat) {                                  \
            const int ev2_ = ss_mark(m);            \
            ss_add(m, ev, ev2_, &cat[(c)]);         \
            ev = ev2_;                              \
        }                                           \
    } while (0)
    /* The row kernels around the tensor-core q/k/v (m->batch_fuse): where every layer's q/k/v takes that path and its
     * scratch holds the step, the MoE block's combine also norms x for the next layer and splits it for the GEMM
     * (gptoss_rows_norm_split), and one launch sums the GEMM's parts, rotates q and k and stores k and v
     * (gptoss_rows_qkv_finish): 2 launches instead of 7 a layer, the same values (kernels.h). presplit: m->tc.xs holds the split of
     * the norm that comes next (m->h that norm). */
    const int S = m->batch_tc_splits, QKV = QD + 2 * KVD;
    const int fuse = m->batch_fuse && !(m->fused && n <= m->batch_qkv_rows) && m->use_tc && m->batch_tc &&
                     n >= m->batch_tc_min_qkv && m->qkv_fused && H <= GPTOSS_ROWS_NORM_MAX_H &&
                     gptoss_tc_fits(&m->tc, S, n, H, QKV);
    /* and the attention writes o_proj's split beside its output (gptoss_attention_rows_split) where o_proj would take
     * the tensor-core GEMM */
    const int fuse_o = fuse && m->batch_fuse >= 2 && m->batch_attn == 2 && !(m->fused && n <= m->batch_o_rows) &&
                       n >= m->batch_tc_min && gptoss_tc_fits(&m->tc, S, n, QD, H);
    /* and o_proj's parts are summed into x by the router (gptoss_moe_router_decode_add) where the experts take the
     * tensor-core path below: o_proj's reduce launch is gone */
    const int moe_mma = m->fused && m->moe_mma && n >= m->moe_mma_min_rows;
    const int fuse_r = fuse_o && m->batch_fuse >= 3 && moe_mma && H <= GPTOSS_ROUTER_ADD_MAX_H;
    int presplit = 0;
    K_(gptoss_embed(m->embed, d_tok, n, H, m->cfg.vocab_size, m->x, st));
    for (int l = 0; l < c->num_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const gptoss_kv kv = gptoss_model_kv(m, d_tab, (int)m->max_pages, l);
        const int window = c->layer_sliding[l] ? c->sliding_window : 0;
        /* norm + q/k/v + RoPE + KV store in one launch, W read once (refused, before any launch, where its rows of x
         * do not fit: then the path below) */
        const int rows_prologue = !fuse && m->fused && n <= m->batch_qkv_rows;
        if (rows_prologue) PART_(0);
        e = rows_prologue ? gptoss_qkv_rows(m->x, w->attn_norm, eps, w->q_w, w->q_b, w->k_w, w->k_b, w->v_w, w->v_b, H, NH,
                                            NKV, n, d_pos, m->inv_freq, m->attn_factor, m->q, kv, st)
                          : cudaErrorNotSupported;
        if (fuse) { /* the norm and split came with the previous layer's combine, or come here (the first layer) */
            if (!presplit)
                K_(gptoss_rows_norm_split(NULL, NULL, NULL, m->x, w->attn_norm, n, H, eps, S, m->h, m->tc.xs, st));
            PART_(0);
            K_(tc_gemm_split(m, w->q_w, H, QKV, n));
            K_(gptoss_rows_qkv_finish(m->tc.ys, QKV, n, S, w->q_b, NH, NKV, d_pos, m->inv_freq, m->attn_factor, m->q, kv,
                                      st));
            PART_(1);
        } else if (e != cudaErrorNotSupported) {
            K_(e);
            PART_(1);
        } else {
            K_(gptoss_rmsnorm(m->x, w->attn_norm, n, H, eps, m->h, st));
            PART_(0);
            /* q, k, v as one tensor-core linear where linear_groups would take cuBLAS anyway */
            e = m->batch_tc && n >= m->batch_tc_min_qkv ? gptoss_qkv_tc(m, w, m->h, n, m->batch_tc_splits)
                                                        : cudaErrorNotSupported;
            if (e != cudaErrorNotSupported) K_(e);
            else {
                K_(linear_groups(m, m->h, H, w->q_w, w->q_b, n, H, QD, m->q, QD, 0, m->batch_tc_min));
                K_(linear_groups(m, m->h, H, w->k_w, w->k_b, n, H, KVD, m->kn, KVD, 0, m->batch_tc_min));
                K_(linear_groups(m, m->h, H, w->v_w, w->v_b, n, H, KVD, m->vn, KVD, 0, m->batch_tc_min));
            }
            K_(gptoss_rope_rows(m->q, QD, n, NH, d_pos, m->inv_freq, m->attn_factor, st));
            K_(gptoss_rope_rows(m->kn, KVD, n, NKV, d_pos, m->inv_freq, m->attn_factor, st));
            K_(gptoss_kv_store(m->kn, m->vn, n, d_pos, kv, st));
            PART_(1);
        }
        /* the batch-1 graph's attention kernel where that graph would take it for every row (decode_body, forward.cu) */
        const int lone_attn = !fuse_o && m->fused && !m->split_attn && n <= m->batch_attn_lone &&
                              (window > 0 || !gptoss_split_keys(m, (uint64_t)max_pos + 1));
        if (lone_attn)
            K_(gptoss_attention_at(m->q, kv, w->sinks, d_pos, n, NH, NKV, window, m->o, st));
        else if (fuse_o)
            K_(gptoss_attention_rows_split(m->q, kv, w->sinks, d_pos, n, max_pos, NH, NKV, window, m->o, m->batt_part,
                                           m->batt_ctr, S, m->tc.xs, st));
        else if (m->batch_attn == 2) /* blocks of (row, KV head, 64-key split): its heads share each K/V row */
            K_(gptoss_attention_rows(m->q, kv, w->sinks, d_pos, n, max_pos, NH, NKV, window, m->o, m->batt_part,
                                     m->batt_ctr, st));
        else if (m->batch_attn == 1) /* keys split over blocks (attention_decode.cu) */
            K_(gptoss_attention_decode(m->q, kv, w->sinks, d_pos, n, NH, NKV, window, m->o, m->batt_part, m->batt_ctr, st));
        else
            K_(gptoss_attention_at(m->q, kv, w->sinks, d_pos, n, NH, NKV, window, m->o, st));
        PART_(2);
        /* o_proj: from the split the attention wrote (fuse_o); or W read once, each row bit for bit its one-token o_proj
         * (refused where its rows of x do not fit), with the router's sums and every row's finish where the experts
         * below go a row at a time (m->rows_router: the batch-1 graph's routing, refused before any launch where its
         * grid is not gptoss_gemv1's) */
        const int route_rows = !fuse_o && !moe_mma && m->fused && n <= m->batch_o_rows && n <= m->batch_moe_per_row &&
                               m->moe_rows1 ? m->rows_router : 0;
        const float *rwt = m->rwt ? m->rwt + (size_t)l * H * 32 : NULL;
        e = route_rows == 2 ? gptoss_gemv1_rows_router_finish(m->o, QD, w->o_w, w->o_b, n, QD, H, m->x, H, rwt, m->rpart,
                                                              w->router_b, eps, m->rctr, m->ids, m->rw, m->grp, m->rl,
                                                              m->rnorm, st)
            : route_rows == 1 ? gptoss_gemv1_rows_router(m->o, QD, w->o_w, w->o_b, n, QD, H, m->x, H, rwt, m->rpart, st)
                              : cudaErrorNotSupported;
        const int routed = e != cudaErrorNotSupported ? route_rows : 0;
        if (!routed)
            e = fuse_r                            ? tc_gemm_split(m, w->o_w, QD, H, n)
                : fuse_o                          ? tc_linear_presplit(m, w->o_w, w->o_b, QD, H, n, m->x, 1)
                : m->fused && n <= m->batch_o_rows ? gptoss_gemv1_rows(m->o, QD, w->o_w, w->o_b, n, QD, H, m->x, H, 1, st)
                                                   : cudaErrorNotSupported;
        if (e != cudaErrorNotSupported) K_(e);
        else K_(linear_groups(m, m->o, QD, w->o_w, w->o_b, n, QD, H, m->x, H, 1, m->batch_tc_min));
        PART_(3);
        if (moe_mma) { /* experts on tensor cores, each read once per step */
            const int parts = m->batch_moe_f16 ? GPTOSS_MOE_PARTS_F16 : m->batch_moe_parts;
            /* with fuse_r, the router also writes gate_up's pre-staged token rows where the experts read them */
            const int stage_r = fuse_r && m->batch_fuse >= 4 && gptoss_moe_mma_prestaged(m, GPTOSS_TOPK * n, parts);
            /* and from =5 the router's last block writes the route's tables (no route launch) */
            const gptoss_moe_route_out route = {m->counts, m->offsets, m->pair_token, m->pair_of};
            const int route_r = fuse_r && m->batch_fuse >= 5;
            if (fuse_r)
                K_(gptoss_moe_router_decode_add(m->x, m->tc.ys, S, w->o_b, w->mlp_norm, eps, w->router_w, w->router_b, n, H,
                                                E, m->hsw, m->ids, m->rw, m->grp, m->rl, m->ctr,
                                                stage_r ? gptoss_mstage_tokens(m) : NULL, route_r ? &route : NULL, st));
            else
                K_(gptoss_moe_router_decode(m->x, w->mlp_norm, eps, w->router_w, w->router_b, n, H, E, m->hsw, m->ids,
                                            m->rw, m->grp, m->rl, m->ctr, st));
            K_(dbg_router(m, l, n));
            if (!route_r) K_(gptoss_moe_route(m->ids, n, E, m->counts, m->offsets, m->pair_token, m->pair_of, st));
            K_(gptoss_moe_mma_experts(m, w, m->hsw, 1, GPTOSS_TOPK * n, parts, stage_r));
            if (fuse) { /* the combine, then the next norm (the final one after the last layer) and its split */
                const uint16_t *nw = l + 1 < c->num_layers ? m->layers[l + 1].attn_norm : m->norm;
                K_(gptoss_rows_norm_split(m->dn, m->rw, m->pair_of, m->x, nw, n, H, eps, S, m->h, m->tc.xs, st));
                presplit = 1;
            } else {
                K_(gptoss_moe_combine(m->dn, m->rw, m->pair_of, n, H, m->x, st));
            }
            PART_(4);
            continue;
        }
        presplit = 0; /* the paths below leave x un-normed */
        if (m->fused && n <= m->batch_moe_per_row) { /* each row through the batch-1 expert kernels (the dp4a ring) */
            if (!routed)
                K_(gptoss_moe_router_decode_rows(m->x, w->mlp_norm, eps, w->router_w, w->router_b, n, H, E, m->hsw, m->ids,
                                                 m->rw, m->grp, m->rl, m->ctr, st));
            /* all rows in one launch each (m->moe_rows1), else one launch a row; the same bits either way. Routed: the
             * gate_up normalises x itself (no h_sw was written, so no other form may follow) */
            if (routed == 2)
                K_(gptoss_moe_routed_gate_up_dp4a_rows1(m->x, w->mlp_norm, m->rnorm, m->grp, n, w->gu_blocks, w->gu_scales,
                                                        w->gu_bias, H, I, c->swiglu_alpha, c->swiglu_limit, m->act, st,
                                                        gptoss_gu_tiled(m, w)));
            else if (routed == 1) { /* from m->moe_pairs rows each expert two rows share once (the same bits) */
                e = m->moe_pairs && n >= m->moe_pairs
                        ? gptoss_moe_route_gate_up_pairs(m->x, w->mlp_norm, eps, m->rpart, m->router_parts, w->router_b, n,
                                                         w->gu_bias, H, I, c->swiglu_alpha, c->swiglu_limit,
                                                         m->moe_pair_cost, m->ids, m->rw, m->grp, m->rl, m->pair_rn,
                                                         m->pair_sync, m->act, st, gptoss_gu_tiled(m, w))
                        : cudaErrorNotSupported;
                if (e == cudaErrorNotSupported)
                    e = gptoss_moe_route_gate_up_dp4a_rows1(m->x, w->mlp_norm, eps, m->rpart, m->router_parts, w->router_b,
                                                            n, w->gu_blocks, w->gu_scales, w->gu_bias, H, I,
                                                            c->swiglu_alpha, c->swiglu_limit, m->ids, m->rw, m->grp, m->rl,
                                                            m->act, st, gptoss_gu_tiled(m, w));
                K_(e);
            }
            K_(dbg_router(m, l, n)); /* after the routed gate_up: with routed 1 it writes the logits */
            e = !routed && m->moe_rows1 && m->moe_pairs && n >= m->moe_pairs
                    ? gptoss_moe_gate_up_pairs_rows1(m->hsw, m->grp, n, E, w->gu_bias, H, I, c->swiglu_alpha, c->swiglu_limit,
                                                     m->moe_pair_cost, m->act, st, gptoss_gu_tiled(m, w))
                    : cudaErrorNotSupported;
            if (e == cudaErrorNotSupported)
                e = routed       ? cudaSuccess
                    : m->moe_rows1 ? gptoss_moe_gate_up_decode_dp4a_rows1(m->hsw, m->grp, n, w->gu_blocks, w->gu_scales,
                                                                         w->gu_bias, H, I, c->swiglu_alpha,
                                                                         c->swiglu_limit, m->act, st, gptoss_gu_tiled(m, w))
                                   : cudaErrorNotSupported;
            const int gu_rows = e != cudaErrorNotSupported;
            if (gu_rows) {
                K_(e);
                K_(gptoss_moe_down_decode_rows1(m->act, m->grp, n, m->rw, w->dn_blocks, w->dn_scales, w->dn_bias, E, I, H,
                                                m->x, st, gptoss_dn_tiled(m, w)));
            }
            for (int r = 0; !gu_rows && r < n; r++) {
                const int32_t *g1 = m->grp + (size_t)r * gptoss_moe_groups_ints(1);
                float *act = m->act + (size_t)r * GPTOSS_TOPK * I;
                K_(gptoss_moe_gate_up_decode(m->hsw + (size_t)r * H, g1, 1, w->gu_blocks, w->gu_scales, w->gu_bias, E, H, I,
                                             c->swiglu_alpha, c->swiglu_limit, act, st, gptoss_gu_tiled(m, w)));
                K_(gptoss_moe_down_decode(act, g1, 1, m->rw + (size_t)r * GPTOSS_TOPK, w->dn_blocks, w->dn_scales,
                                          w->dn_bias, E, I, H, m->x + (size_t)r * H, st, gptoss_dn_tiled(m, w)));
            }
            PART_(4);
            continue;
        }
        if (m->fused) {
            K_(gptoss_moe_router_decode(m->x, w->mlp_norm, eps, w->router_w, w->router_b, n, H, E, m->hsw, m->ids, m->rw,
                                        m->grp, m->rl, m->ctr, st));
            K_(dbg_router(m, l, n));
            K_(gptoss_moe_gate_up_decode(m->hsw, m->grp, n, w->gu_blocks, w->gu_scales, w->gu_bias, E, H, I,
                                         c->swiglu_alpha, c->swiglu_limit, m->act, st, gptoss_gu_tiled(m, w)));
            K_(gptoss_moe_down_decode(m->act, m->grp, n, m->rw, w->dn_blocks, w->dn_scales, w->dn_bias, E, I, H, m->x, st,
                                      gptoss_dn_tiled(m, w)));
            PART_(4);
            continue;
        }
        K_(gptoss_rmsnorm(m->x, w->mlp_norm, n, H, eps, m->h, st));
        K_(gptoss_linear(m->h, H, w->router_w, w->router_b, n, H, E, m->rl, E, 0, st));
        K_(dbg_router(m, l, n));
        K_(gptoss_router_topk(m->rl, n, E, m->ids, m->rw, st));
        K_(gptoss_moe_route(m->ids, n, E, m->counts, m->offsets, m->pair_token, m->pair_of, st));
        K_(gptoss_mxfp4_grouped(m->h, H, m->pair_token, w->gu_blocks, w->gu_scales, w->gu_bias, m->counts, m->offsets, E,
                                n, H, 2 * I, m->gu, st));
        K_(gptoss_swiglu(m->gu, n * GPTOSS_TOPK, I, c->swiglu_alpha, c->swiglu_limit, m->act, st));
        K_(gptoss_mxfp4_grouped(m->act, I, NULL, w->dn_blocks, w->dn_scales, w->dn_bias, m->counts, m->offsets, E, n, I,
                                H, m->dn, st));
        K_(gptoss_moe_combine(m->dn, m->rw, m->pair_of, n, H, m->x, st));
        PART_(4);
    }
    cudaError_t head = cudaErrorInvalidValue; /* lm_head from the split the last combine left */
    if (presplit) { /* m->h is the final norm and m->tc.xs its split: the GEMM and the reduce (refused, before any
                     * launch, where the scratch is too small for the vocabulary: then linear_groups from m->h) */
        head = tc_linear_presplit(m, m->lm_head, NULL, H, V, n, logits, 0);
    } else {
        K_(gptoss_rmsnorm(m->x, m->norm, n, H, eps, m->h, st));
        if (m->fused && n <= m->batch_head_rows) { /* each row's logits as its lone step's gemv1 gives them */
            head = gptoss_gemv1_rows(m->h, H, m->lm_head, NULL, n, H, V, logits, V, 0, st);
            if (head == cudaErrorNotSupported) head = cudaErrorInvalidValue; /* a shape it refuses: linear_groups */
        }
    }
    if (head == cudaErrorInvalidValue)
        K_(linear_groups(m, m->h, H, m->lm_head, NULL, n, H, V, logits, V, 0, m->batch_tc_min_qkv));
    else K_(head);
    PART_(5);
#undef PART_
#undef K_
    return cudaSuccess;
}

/* Enqueues one forward step for B >= 2 rows, row b = token toks[b] of session ss[b] at its n_ctx,
 * through its own block table; distributions land in m->blogits rows. Pages must be reserved. */
static cudaError_t batched_step(gptoss_model *m, gptoss_session *const *ss, const int32_t *toks, int B) {
    const int MP = (int)m->max_pages;
    int max_pos = 0;
    int32_t *h_tok = m->bstage_host, *h_pos = h_tok + GPTOSS_MAX_BATCH, *h_tab = h_pos + GPTOSS_MAX_BATCH;
    for (int b = 0; b < B; b++) {
        const gptoss_session *s = ss[b];
        h_tok[b] = toks[b];
        h_pos[b] = (int32_t)s->n_ctx;
        if (h_pos[b] > max_pos) max_pos = h_pos[b];
        memcpy(h_tab + (size_t)b * MP, s->tab.pages, (size_t)s->tab.n * sizeof(int32_t));
    }
    int32_t *d_tok = m->bstage_dev, *d_pos = d_tok + GPTOSS_MAX_BATCH, *d_tab = d_pos + GPTOSS_MAX_BATCH;
    /* The host stage is rewritten only after the next step's host wait, so one async copy suffices. */
    cudaError_t e = cudaMemcpyAsync(d_tok, h_tok, ((size_t)2 * GPTOSS_MAX_BATCH + (size_t)B * MP) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess) e = batched_rows(m, d_tok, d_pos, d_tab, B, max_pos, m->blogits);
    return e;
}

/* Queues the log-probabilities of the tokens just sampled into m->tok, for the rows that asked (none: nothing
 * is launched); they reach m->lp_host with the tokens' own copy. The pinned staging is rewritten only after the
 * previous step's token wait, as the sampling rows' is. */
static cudaError_t sched_logprobs(gptoss_model *m, int B) {
    int any = 0;
    for (int b = 0; b < B; b++) {
        const gen_req *r = m->rows[b];
        m->lprow_host[b].logits = r->lp_top >= 0 ? r->logits : NULL;
        m->lprow_host[b].n_top = r->lp_top;
        any |= r->lp_top >= 0;
    }
    if (!any) return cudaSuccess;
    cudaError_t e = cudaMemcpyAsync(m->lprow_dev, m->lprow_host, (size_t)B * sizeof(gptoss_logprob_row),
                                    cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess) e = gptoss_logprobs_rows(m->lprow_dev, B, m->cfg.vocab_size, m->tok, m->lp_dev, m->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(m->lp_host, m->lp_dev, (size_t)B * sizeof(llmr_token_logprobs), cudaMemcpyDeviceToHost,
                            m->stream);
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

/* LLMR_GPTOSS_SCHED_TRACE=1: a decode step's rows, each by the position it evaluates (a request's positions tell
 * it apart in a test whose prompts differ in length). */
static void sched_trace_step(gen_req *const *ev, const int32_t *tok, int n) {
    fprintf(stderr, "gptoss_cuda sched: decode step of %d rows at positions", n);
    for (int b = 0; b < n; b++) fprintf(stderr, " %u", ev[b]->s->n_ctx);
    fprintf(stderr, "; tokens");
    for (int b = 0; b < n; b++) fprintf(stderr, " %d", tok[b]);
    fputc('\n', stderr);
}

/* LLMR_GPTOSS_SCHED_TRACE=2: each row's distribution by its argmax (id and logit), read back now: after a step
 * (what it computed) and before sampling (what the sampler reads), so a distribution changed in between shows. */
static void sched_trace_dists(gptoss_model *m, const char *what, gen_req *const *rows, int n) {
    const int V = m->cfg.vocab_size;
    float *h = (float *)malloc((size_t)V * sizeof(float));
    if (!h || cudaStreamSynchronize(m->stream) != cudaSuccess) { free(h); return; }
    fprintf(stderr, "gptoss_cuda sched: %s:", what);
    for (int b = 0; b < n; b++) {
        if (cudaMemcpy(h, rows[b]->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) break;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (h[v] > h[best]) best = v;
        fprintf(stderr, " [pos %u: %d %.6f]", rows[b]->s->n_ctx, best, h[best]);
    }
    fputc('\n', stderr);
    free(h);
}

/* Step 4 for a lone row, launched right after its sampling and before the host waits for the token
 * (LLMR_GPTOSS_STEP_AHEAD, on by default). The sampler writes the id into m->tok, where the session's graph reads it,
 * so the GPU goes from the sampling straight into the step instead of idling while the host wakes on the token,
 * hands it out and launches the step (bench/decode prints that host part). The step is the one step 4 would launch:
 * every handed-out token is evaluated, a stop id too, and a callback's stop still comes before the next token is
 * handed out. Only an id the host then finds invalid (a sampler bug), which step 4 would not evaluate, is undone by
 * sched_step_undo (the embedding gave the step a NaN row). Returns 1 when launched, 0 when step 4 should do it as
 * before (not a lone graph step, or the row's next KV page cannot be had: step 4 reports that), -1 on a CUDA error
 * (err says which). */
static int sched_step_ahead(gptoss_model *m, gen_req *r, char *err, size_t es) {
    gptoss_session *s = r->s;
    if (!m->step_ahead || !m->use_graph || m->prof || m->trace || r->n_emitted >= r->cap) return 0;
    if (gptoss_ensure_pages(s, (uint64_t)s->n_ctx + 1, err, es) != LLMR_ENGINE_OK) return 0;
    const int ea = ss_mark(m);
    if (gptoss_decode_step(s, err, es) != LLMR_ENGINE_OK) return -1;
    ss_step(m, ea, 1);
    r->logits = s->logits;
    return 1;
}

/* Takes back a step sched_step_ahead launched for a token step 4 does not evaluate: its position is free again and
 * the session has no distribution (the step's came from a NaN row), so a next turn must bring tokens. */
static void sched_step_undo(gen_req *r) {
    r->s->n_ctx--;
    r->s->have_logits = 0;
}

/* One decode step over the running rows (see the section comment, steps 2-4). */
static void sched_decode(gptoss_model *m) {
    const int V = m->cfg.vocab_size;
    char err[512];
    /* 2: every handed-out token consumed (its callback's stop is known) */
    const double t_ack = m->ss ? wall_ms() : 0;
    pthread_mutex_lock(&m->q_mu);
    for (int i = 0; i < m->n_rows; i++)
        while (m->rows[i]->n_acked < m->rows[i]->n_emitted) pthread_cond_wait(&m->ack_cv, &m->q_mu);
    pthread_mutex_unlock(&m->q_mu);
    if (m->ss) m->ss->s.ack_wait_ms += wall_ms() - t_ack;
    /* 3: retire, sample, hand out */
    const int B = sched_retire(m);
    if (B == 0) return;
    if (m->trace >= 2) sched_trace_dists(m, "sampling from", m->rows, B);
    cudaError_t e = m->prof ? gptoss_prof_begin(m->prof, m->stream) : cudaSuccess; /* LLMR_GPTOSS_PROFILE=1 */
    const int es0 = ss_mark(m);
    if (m->batch_sample && B >= 2) { /* every row in one gptoss_sample_rows, each row's parameters and u in srow */
        unsigned need = 0;
        for (int b = 0; b < B; b++) {
            gen_req *r = m->rows[b];
            r->a.u = (float)(splitmix64(&r->rng) >> 40) * (1.0f / 16777216.0f);
            gptoss_sample_row *sr = &m->srow_host[b];
            sr->logits = r->logits;
            sr->counts = r->penalties ? r->s->counts : NULL;
            sr->a = r->a;
            sr->count_token = r->penalties;
            need |= gptoss_sample_need(&r->a);
        }
        /* the staging is rewritten only after this step's token wait, so one async copy suffices */
        e = cudaMemcpyAsync(m->srow_dev, m->srow_host, (size_t)B * sizeof(gptoss_sample_row), cudaMemcpyHostToDevice,
                            m->stream);
        if (e == cudaSuccess) e = gptoss_sample_rows(m->srow_dev, B, V, need, m->srow_work, m->tok, m->stream);
    } else {
        for (int b = 0; b < B && e == cudaSuccess; b++) {
            gen_req *r = m->rows[b];
            r->a.u = (float)(splitmix64(&r->rng) >> 40) * (1.0f / 16777216.0f);
            e = gptoss_sample_host(r->logits, V, r->penalties ? r->s->counts : NULL, r->a, m->sample_work,
                                   m->ctr + GPTOSS_CTR_SAMPLER(&m->cfg), m->tok + b,
                                   m->tok_host_dev ? m->tok_host_dev + b : NULL, m->stream);
            if (e == cudaSuccess && r->penalties) e = gptoss_count_token(r->s->counts, m->tok + b, m->stream);
        }
    }
    if (e == cudaSuccess) e = sched_logprobs(m, B);
    if (e == cudaSuccess && ((m->batch_sample && B >= 2) || !m->tok_host_dev)) /* (else each sampling wrote its own) */
        e = cudaMemcpyAsync(m->tok_host, m->tok, (size_t)B * sizeof(int32_t), cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess) e = cudaEventRecord(m->tok_ev, m->stream);
    if (e == cudaSuccess && m->prof) e = gptoss_prof_mark_sample(m->prof, m->stream);
    if (e == cudaSuccess && m->ss) {
        ss_add(m, es0, ss_mark(m), &m->ss->s.sample_ms);
        m->ss->s.samplings++;
    }
    int ahead = 0; /* a lone row's step already launched (sched_step_ahead) */
    if (e == cudaSuccess && B == 1 && (ahead = sched_step_ahead(m, m->rows[0], err, sizeof err)) < 0) {
        fail_all(m, LLMR_ENGINE_INTERNAL, err);
        return;
    }
    const double t_tok = m->ss ? wall_ms() : 0;
    if (e == cudaSuccess) e = cudaEventSynchronize(m->tok_ev);
    if (m->ss) m->ss->s.token_wait_ms += wall_ms() - t_tok;
    if (e == cudaSuccess && m->prof) e = gptoss_prof_collect(m->prof, 1);
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
        if (r->lps) r->lps[r->n_emitted] = m->lp_host[b];
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
        if (ahead && toks[b] >= 0 && toks[b] < V) { /* evaluated already, its pages had */
            m->rows[keep++] = r;
            ev[nev] = r;
            evt[nev++] = toks[b];
            continue;
        }
        if (ahead) sched_step_undo(r);
        if (toks[b] < 0 || toks[b] >= V || (st = gptoss_ensure_pages(s, (uint64_t)s->n_ctx + 1, err, sizeof err)) != LLMR_ENGINE_OK) {
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
    if (nev == 0 || ahead) return;
    if (m->trace) sched_trace_step(ev, evt, nev);
    if (nev == 1) { /* the batch-1 path: the session's CUDA graph, exactly as a lone generate */
        gptoss_session *s = ev[0]->s;
        llmr_engine_status st;
        if (first_b != 0 && (e = gptoss_set_i32(m->tok, evt[0], m->stream)) != cudaSuccess) {
            snprintf(err, sizeof err, "CUDA error setting the decode token: %s", cudaGetErrorString(e));
            fail_all(m, LLMR_ENGINE_INTERNAL, err);
            return;
        }
        const int ea = ss_mark(m);
        st = m->use_graph ? gptoss_decode_step(s, err, sizeof err) : gptoss_forward(s, &evt[0], 1, NULL, err, sizeof err);
        if (st != LLMR_ENGINE_OK) { fail_all(m, st, err); return; }
        ss_step(m, ea, 1);
        ev[0]->logits = s->logits;
        return;
    }
    const int ea = ss_mark(m);
    gptoss_session *evs[GPTOSS_MAX_BATCH];
    for (int b = 0; b < nev; b++) evs[b] = ev[b]->s;
    e = batched_step(m, evs, evt, nev);
    if (e == cudaSuccess) ss_step(m, ea, nev);
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
    if (m->trace >= 2) sched_trace_dists(m, "step computed", ev, nev);
}

/* The debug step (model.h): the scheduler's batched step on sessions the caller names, under the GPU lock. */
llmr_engine_status gptoss_sched_debug_step(gptoss_session *const *ss, const int32_t *toks, int n, float *logits,
                                           float *router_logits, char *err, size_t es) {
    if (n < 2 || n > GPTOSS_MAX_BATCH || !ss || !ss[0] || !toks)
        return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "debug_step: %d rows (2..%d, sessions and tokens required)", n,
                    GPTOSS_MAX_BATCH);
    gptoss_model *m = ss[0]->m;
    for (int b = 0; b < n; b++) {
        if (!ss[b] || ss[b]->m != m) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "debug_step: row %d: no session of this model", b);
        for (int c = 0; c < b; c++)
            if (ss[c] == ss[b]) return fail(LLMR_ENGINE_UNSUPPORTED, err, es, "debug_step: rows %d and %d: one session", c, b);
        llmr_engine_status st = gptoss_check_tokens(ss[b], toks + b, 1, err, es);
        if (st != LLMR_ENGINE_OK) return st;
    }
    const int V = m->cfg.vocab_size;
    pthread_mutex_lock(&m->mu);
    cudaSetDevice(m->device);
    llmr_engine_status st = LLMR_ENGINE_OK;
    for (int b = 0; b < n && st == LLMR_ENGINE_OK; b++) st = gptoss_ensure_pages(ss[b], (uint64_t)ss[b]->n_ctx + 1, err, es);
    const size_t rl_n = (size_t)m->cfg.num_layers * n * m->cfg.num_experts;
    if (st == LLMR_ENGINE_OK && router_logits && cudaMalloc((void **)&m->dbg_rl, rl_n * sizeof(float)) != cudaSuccess) {
        m->dbg_rl = NULL;
        st = fail(LLMR_ENGINE_OOM_VRAM, err, es, "debug_step: no GPU memory for %zu router logits", rl_n);
    }
    cudaError_t e = st == LLMR_ENGINE_OK ? batched_step(m, ss, toks, n) : cudaSuccess;
    if (st == LLMR_ENGINE_OK && e == cudaSuccess && router_logits)
        e = cudaMemcpyAsync(router_logits, m->dbg_rl, rl_n * sizeof(float), cudaMemcpyDeviceToHost, m->stream);
    for (int b = 0; b < n && st == LLMR_ENGINE_OK && e == cudaSuccess; b++) /* each session's distribution, as a prompt leaves it */
        e = cudaMemcpyAsync(ss[b]->logits, m->blogits + (size_t)b * V, (size_t)V * sizeof(float), cudaMemcpyDeviceToDevice,
                            m->stream);
    if (st == LLMR_ENGINE_OK && e == cudaSuccess && logits)
        e = cudaMemcpyAsync(logits, m->blogits, (size_t)n * V * sizeof(float), cudaMemcpyDeviceToHost, m->stream);
    if (st == LLMR_ENGINE_OK && e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    if (st == LLMR_ENGINE_OK && e != cudaSuccess)
        st = fail(LLMR_ENGINE_INTERNAL, err, es, "debug_step: CUDA error in the batched step of %d rows: %s", n,
                  cudaGetErrorString(e));
    for (int b = 0; b < n && st == LLMR_ENGINE_OK; b++) {
        ss[b]->n_ctx++;
        ss[b]->have_logits = 1;
    }
    cudaFree(m->dbg_rl); /* after the synchronize: the copies from it are done */
    m->dbg_rl = NULL;
    pthread_mutex_unlock(&m->mu);
    return st;
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
        const double t0 = m->ss ? wall_ms() : 0;
        for (int k = 0; k < m->prefill_burst && m->pf_head; k++) sched_prefill(m); /* slices back to back */
        if (m->n_rows) sched_decode(m);
        if (m->ss) {
            ss_collect(m, 0); /* what has completed; never waits */
            m->ss->s.iterations++;
            m->ss->s.busy_ms += wall_ms() - t0;
        }
        pthread_mutex_unlock(&m->mu);
        pthread_mutex_lock(&m->q_mu);
    }
    pthread_mutex_unlock(&m->q_mu);
    return NULL;
}

static void sched_free_sampling(gptoss_model *m) {
    cudaFreeHost(m->srow_host);
    cudaFree(m->srow_dev);
    cudaFree(m->srow_work);
    m->srow_host = m->srow_dev = NULL;
    m->srow_work = NULL;
}

static void sched_free_logprobs(gptoss_model *m) {
    cudaFreeHost(m->lprow_host);
    cudaFree(m->lprow_dev);
    cudaFreeHost(m->lp_host);
    cudaFree(m->lp_dev);
    m->lprow_host = m->lprow_dev = NULL;
    m->lp_host = m->lp_dev = NULL;
}

int gptoss_sched_start(gptoss_model *m) {
    m->batch_linear = gptoss_env_int("LLMR_GPTOSS_BATCH_LINEAR", 1, 0, 1);
    /* cuBLAS from 5 rows (8 before session 40): since the attention writes o_proj's split (batch_fuse, steps above
     * batch_qkv_rows) the GEMM takes o_proj at 5-7 rows in 0.41 ms a step against gptoss_linear_rows' 0.65 (H200,
     * 4-7-row steps 5.86 -> 5.57 ms); from 8 rows it was measured faster than gptoss_linear_rows on its own
     * (docs/performance.md). 2 parts (x = hi + lo, the prompt path's accuracy, as the batched experts) since
     * session 10: a 64-row step 13.39 -> 12.98 ms on the H100 (q/k/v 1.24 -> 1.09, o 0.99 -> 0.84, lm_head
     * 0.63 -> 0.57), 8 streams +2%; sessions 4-9 kept 3 (fp32-level, LLMR_GPTOSS_BATCH_TC_SPLIT=3) because
     * gptoss_batching's older oracle failed a batch of 8 with 2. */
    m->batch_tc_min = gptoss_env_int("LLMR_GPTOSS_BATCH_TC_MIN", 5, 2, GPTOSS_MAX_BATCH + 1);
    /* the fused q/k/v and lm_head take cuBLAS from 2 rows: one GEMM over all rows costs about the same from
     * 2 to 15 rows (q/k/v ~0.82 ms a step, lm_head ~0.31), where gptoss_linear_rows grows with the rows
     * (q/k/v 1.14 ms at 2-3 rows, 1.53 at 4-7; lm_head 0.37, 0.53); o_proj is faster on it below 8 rows
     * (0.46 vs 0.67 ms at 2-3 rows). H200, docs/performance.md "Session 8: cuBLAS from 2 rows". */
    m->batch_tc_min_qkv = gptoss_env_int("LLMR_GPTOSS_BATCH_TC_MIN_QKV", 2, 2, GPTOSS_MAX_BATCH + 1);
    m->batch_tc_splits = gptoss_env_int("LLMR_GPTOSS_BATCH_TC_SPLIT", 2, 2, 3);
    m->interleave = gptoss_env_int("LLMR_GPTOSS_INTERLEAVE", GPTOSS_INTERLEAVE_CHUNK, 16, 8192); /* model.h */
    m->prefill_burst = gptoss_env_int("LLMR_GPTOSS_PREFILL_BURST", 1, 1, GPTOSS_MAX_BATCH);
    /* attention of batched steps: 0 gptoss_attention_at, 1 gptoss_attention_decode, 2 gptoss_attention_rows
     * (default: keys split over blocks of (row, KV head, 64-key chunk), the query heads of a KV head sharing
     * each K/V load; docs/performance.md has the measurements). 2 takes heads per KV head 1, 2, 4 or 8. */
    m->batch_attn = gptoss_env_int("LLMR_GPTOSS_BATCH_ATTN", 2, 0, 2);
    const int gq = m->cfg.num_heads / m->cfg.num_kv_heads;
    if (m->batch_attn == 2 && (gq > 8 || (gq & (gq - 1)))) m->batch_attn = 0; /* a shape it refuses */
    if (m->batch_attn >= 1) {
        const gptoss_config *c = &m->cfg;
        const int splits = GPTOSS_ATT_SPLITS > GPTOSS_ATTN_ROWS_SPLITS ? GPTOSS_ATT_SPLITS : GPTOSS_ATTN_ROWS_SPLITS;
        const size_t part = (size_t)GPTOSS_MAX_BATCH * c->num_heads * splits * (2 + GPTOSS_HEAD_DIM);
        const size_t ctr = (size_t)GPTOSS_MAX_BATCH * c->num_kv_heads;
        if (cudaMalloc((void **)&m->batt_part, part * sizeof(float)) != cudaSuccess ||
            cudaMalloc((void **)&m->batt_ctr, ctr * sizeof(int32_t)) != cudaSuccess ||
            cudaMemset(m->batt_ctr, 0, ctr * sizeof(int32_t)) != cudaSuccess) {
            fprintf(stderr, "gptoss_cuda: LLMR_GPTOSS_BATCH_ATTN=%d ignored: no VRAM for its %zu-byte scratch\n",
                    m->batch_attn, part * sizeof(float));
            m->batch_attn = 0;
            cudaFree(m->batt_part);
            cudaFree(m->batt_ctr);
            m->batt_part = NULL;
            m->batt_ctr = NULL;
        }
    }
    m->batch_sample = gptoss_env_int("LLMR_GPTOSS_BATCH_SAMPLE", 1, 0, 1);
    m->trace = gptoss_env_int("LLMR_GPTOSS_SCHED_TRACE", 0, 0, 2);
    m->step_ahead = gptoss_env_int("LLMR_GPTOSS_STEP_AHEAD", 1, 0, 1);
    /* packed prefill (sched_prefill_packed): 3 (default) short prompts with short ones (precise rows), long with
     * long; 2 any with any; 1 only prompts past the experts' crossover (session 21's rule); 0 off */
    m->prefill_pack = gptoss_env_int("LLMR_GPTOSS_PREFILL_PACK", 3, 0, 3);
    /* a packed group's tokens: below the stacked dense linears' threshold (m->dense_min_t), so a packed prompt takes the
     * dense path it takes alone; LLMR_GPTOSS_PREFILL_PACK_MAX for measuring */
    m->pack_max_t = gptoss_env_int("LLMR_GPTOSS_PREFILL_PACK_MAX", m->dense_min_t - 1, 1, 1 << 20);
    if (m->batch_sample) {
        const size_t work = gptoss_sample_rows_work(GPTOSS_MAX_BATCH, m->cfg.vocab_size);
        if (cudaMallocHost((void **)&m->srow_host, GPTOSS_MAX_BATCH * sizeof(gptoss_sample_row)) != cudaSuccess ||
            cudaMalloc((void **)&m->srow_dev, GPTOSS_MAX_BATCH * sizeof(gptoss_sample_row)) != cudaSuccess ||
            cudaMalloc((void **)&m->srow_work, work * sizeof(float)) != cudaSuccess) {
            fprintf(stderr, "gptoss_cuda: batched sampling off: no memory for its %zu-byte work area\n",
                    work * sizeof(float));
            sched_free_sampling(m);
            m->batch_sample = 0;
        }
    }
    if (cudaMallocHost((void **)&m->lprow_host, GPTOSS_MAX_BATCH * sizeof(gptoss_logprob_row)) != cudaSuccess ||
        cudaMalloc((void **)&m->lprow_dev, GPTOSS_MAX_BATCH * sizeof(gptoss_logprob_row)) != cudaSuccess ||
        cudaMallocHost((void **)&m->lp_host, GPTOSS_MAX_BATCH * sizeof(llmr_token_logprobs)) != cudaSuccess ||
        cudaMalloc((void **)&m->lp_dev, GPTOSS_MAX_BATCH * sizeof(llmr_token_logprobs)) != cudaSuccess) {
        sched_free_logprobs(m);
        return -1;
    }
    m->ss = ss_create();
    if (pthread_create(&m->sched, NULL, sched_main, m)) return -1;
    m->sched_started = 1;
    return 0;
}

/* Unload: no generate runs any more (ABI), so the thread is idle or about to be. */
void gptoss_sched_stop(gptoss_model *m) {
    if (m->device >= 0) cudaSetDevice(m->device);
    if (m->sched_started) {
        pthread_mutex_lock(&m->q_mu);
        m->stopping = 1;
        pthread_cond_signal(&m->q_cv);
        pthread_mutex_unlock(&m->q_mu);
        pthread_join(m->sched, NULL);
        m->sched_started = 0;
    }
    if (m->stream) cudaStreamSynchronize(m->stream);
    ss_destroy(m->ss);
    m->ss = NULL;
    cudaFree(m->batt_part);
    cudaFree(m->batt_ctr);
    m->batt_part = NULL;
    m->batt_ctr = NULL;
    sched_free_sampling(m);
    sched_free_logprobs(m);
}

/* ---------------------------------------------------------------- generate */

/* Checks what can be checked before queueing (the session is this caller's alone during generate). */
static llmr_engine_status generate_check(gptoss_session *s, const llmr_generate_request *req, float *logits_out,
                                         char *err, size_t es) {
    llmr_engine_status st = gptoss_check_tokens(s, req->tokens, req->n_tokens, err, es);
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
    const llmr_logprobs_cb lp_cb = LLMR_HAS_FIELD(req, llmr_generate_request, top_logprobs) ? req->on_logprobs : NULL;
    r.lp_top = lp_cb ? (int)req->top_logprobs : -1;
    __atomic_store_n(&s->cancel, 0, __ATOMIC_RELEASE);
    llmr_engine_status st = generate_check(s, req, r.logits_out, err, es);
    if (st == LLMR_ENGINE_OK && lp_cb && req->top_logprobs > LLMR_MAX_TOP_LOGPROBS)
        st = fail(LLMR_ENGINE_UNSUPPORTED, err, es, "top_logprobs %u exceeds %d", req->top_logprobs, LLMR_MAX_TOP_LOGPROBS);
    r.res.n_prompt = (uint32_t)req->n_tokens;
    /* At most one token per free position after the prompt (each handed-out token is evaluated). */
    const uint64_t room = (uint64_t)s->max_ctx - s->n_ctx - req->n_tokens;
    r.cap = (uint32_t)(req->max_tokens < room ? req->max_tokens : room);
    if (st == LLMR_ENGINE_OK && r.cap && !(r.toks = (int32_t *)malloc((size_t)r.cap * sizeof(int32_t))))
        st = fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory for %u generated tokens", r.cap);
    if (st == LLMR_ENGINE_OK && r.cap && lp_cb && !(r.lps = (llmr_token_logprobs *)malloc((size_t)r.cap * sizeof *r.lps)))
        st = fail(LLMR_ENGINE_OOM_RAM, err, es, "out of host memory for the logprobs of %u generated tokens", r.cap);
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
        for (uint32_t i = from; i < to && !stop; i++) {
            if (lp_cb) lp_cb(user, &r.lps[i]);
            if (cb && cb(user, r.toks[i])) stop = 1;
        }
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
    free(r.lps);
    if (res_out) {
        uint32_t sz = res_out->struct_size && res_out->struct_size < sizeof r.res ? res_out->struct_size : (uint32_t)sizeof r.res;
        r.res.struct_size = sz;
        memcpy(res_out, &r.res, sz);
    }
    return st;
}
