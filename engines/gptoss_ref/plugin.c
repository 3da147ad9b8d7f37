/* gptoss_ref — the engine plugin around the C reference forward pass (common/gptoss/ref_model.h).
 *
 * CPU only, fp32, for tests and demos (manifest gpu_backends ["cpu"]: the node offers it only when the
 * router allows CPU engines). Implements the whole ABI of llmr_engine.h:
 *  - load reads config.json + the safetensors shards through common/checkpoint.h; every weight becomes
 *    fp32 in RAM, so a checkpoint too large for RAM fails with OOM_RAM before anything is allocated;
 *  - each session owns its KV cache, grown on demand up to its max_context;
 *  - generate evaluates req->tokens one by one, then samples with common/sampling.h (the ABI's
 *    semantics), one on_token call per token (and on_logprobs before it, when asked). Generated tokens belong to the session: the last one is
 *    evaluated at the start of the next generate (so a session that is destroyed never pays for it),
 *    and n_context counts it;
 *  - cancel is a flag checked between tokens; stats are atomics.
 * Threads: the lm_head (201088 rows) is split over the online CPUs (at most 16). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/gptoss/config.h"
#include "common/gptoss/ref_model.h"
#include "common/sampling.h"
#include "llmr_engine.h"

#define REF_ID "gptoss_ref"
#define REF_VERSION "0.1.0"
#define REF_DEFAULT_CONTEXT 8192u

struct llmr_engine_model {
    gptoss_ref_model *ref;
    llmr_host_api host;          /* copy; host.log may be NULL */
    int has_host;
    uint32_t max_context;        /* default for sessions */
    atomic_uint active_sessions;
    atomic_ullong tokens_generated;
    atomic_ullong session_bytes; /* KV + scratch of all sessions */
};

struct llmr_engine_session {
    llmr_engine_model *model;
    gptoss_ref_state *state;
    float *logits;               /* [vocab] next-token logits after the last evaluated token */
    int have_logits;
    int32_t pending;             /* a generated token not yet evaluated, or -1 */
    atomic_int cancel;
    uint64_t bytes_accounted;    /* what this session added to model->session_bytes */
};


static void host_log(const llmr_engine_model *m, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void host_log(const llmr_engine_model *m, int level, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m && m->has_host && m->host.log) m->host.log(m->host.host, level, msg);
    else fprintf(stderr, REF_ID ": %s\n", msg);
}

static llmr_engine_status ref_describe(llmr_engine_info *out) {
    if (!out) return LLMR_ENGINE_OK;
    llmr_engine_info info = {
        .struct_size = sizeof info,
        .id = REF_ID,
        .version = REF_VERSION,
        .description = "gpt-oss C reference forward pass (fp32, CPU): tests and demos only",
        .abi_version = LLMR_ENGINE_ABI_VERSION,
        .uses_gpu = 0,
    };
    /* the caller's struct may be older (smaller): fill only what it has */
    size_t n = out->struct_size && out->struct_size < sizeof info ? out->struct_size : sizeof info;
    uint32_t keep = out->struct_size;
    memcpy(out, &info, n);
    if (keep && keep < sizeof info) out->struct_size = keep;
    return LLMR_ENGINE_OK;
}

/* Checks the descriptor names a gpt-oss safetensors checkpoint this engine can run. */
static llmr_engine_status check_desc(const llmr_model_descriptor *d, char *err, size_t es) {
    if (!d || !LLMR_HAS_FIELD(d, llmr_model_descriptor, model_dir) || !d->model_dir)
        return llmr_errf_status(LLMR_ENGINE_LOAD_FAILED, err, es, "no model_dir in the model descriptor");
    if (LLMR_HAS_FIELD(d, llmr_model_descriptor, format) && d->format && strcmp(d->format, "safetensors") != 0)
        return llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "format '%s' is not supported (safetensors only)", d->format);
    if (LLMR_HAS_FIELD(d, llmr_model_descriptor, architecture) && d->architecture && strcmp(d->architecture, "GptOssForCausalLM") != 0)
        return llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "architecture '%s' is not supported (GptOssForCausalLM only)", d->architecture);
    return LLMR_ENGINE_OK;
}

static llmr_engine_status ref_estimate_vram(const llmr_model_descriptor *d, const llmr_load_params *p, uint64_t *bytes_out,
                                            char *err, size_t es) {
    (void)p;
    llmr_engine_status st = check_desc(d, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    gptoss_config c;
    if (gptoss_config_load(d->model_dir, &c, err, es)) return LLMR_ENGINE_LOAD_FAILED;
    if (bytes_out) *bytes_out = 0; /* a CPU engine: no device memory at all */
    return LLMR_ENGINE_OK;
}

static llmr_engine_status ref_load(const llmr_model_descriptor *d, const llmr_load_params *p, llmr_engine_model **out, char *err,
                                   size_t es) {
    llmr_engine_status st = check_desc(d, err, es);
    if (st != LLMR_ENGINE_OK) return st;
    if (!out) return llmr_errf_status(LLMR_ENGINE_INTERNAL, err, es, "model_out is NULL");
    llmr_engine_model *m = calloc(1, sizeof *m);
    if (!m) return llmr_errf_status(LLMR_ENGINE_OOM_RAM, err, es, "out of memory");
    if (p && LLMR_HAS_FIELD(p, llmr_load_params, host) && p->host && p->host->struct_size >= offsetof(llmr_host_api, log) + sizeof p->host->log) {
        m->host = *p->host;
        m->has_host = 1;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    int rc = gptoss_ref_load(d->model_dir, threads, 0, &m->ref, err, es);
    if (rc != LLMR_ENGINE_OK) {
        free(m);
        return (llmr_engine_status)rc;
    }
    const gptoss_config *c = gptoss_ref_config(m->ref);
    uint32_t want = p && LLMR_HAS_FIELD(p, llmr_load_params, max_context) && p->max_context ? p->max_context : REF_DEFAULT_CONTEXT;
    if (c->max_position_embeddings > 0 && want > (uint32_t)c->max_position_embeddings) want = (uint32_t)c->max_position_embeddings;
    m->max_context = want;
    host_log(m, LLMR_LOG_INFO, "loaded %s: %d layers, hidden %d, %d experts (top %d), %llu bytes of fp32 weights, %d threads, max_context %u",
             d->model_dir, c->num_layers, c->hidden_size, c->num_experts, c->experts_per_token,
             (unsigned long long)gptoss_ref_ram_bytes(m->ref), threads, m->max_context);
    *out = m;
    return LLMR_ENGINE_OK;
}

static void ref_unload(llmr_engine_model *m) {
    if (!m) return;
    if (atomic_load(&m->active_sessions)) host_log(m, LLMR_LOG_WARN, "unload with %u sessions alive", atomic_load(&m->active_sessions));
    gptoss_ref_free(m->ref);
    free(m);
}

static llmr_engine_status ref_session_create(llmr_engine_model *m, const llmr_session_params *p, llmr_engine_session **out,
                                             char *err, size_t es) {
    if (!m || !out) return llmr_errf_status(LLMR_ENGINE_INTERNAL, err, es, "model or session_out is NULL");
    uint32_t ctx = p && LLMR_HAS_FIELD(p, llmr_session_params, max_context) && p->max_context ? p->max_context : m->max_context;
    if (ctx > m->max_context) ctx = m->max_context;
    llmr_engine_session *s = calloc(1, sizeof *s);
    const gptoss_config *c = gptoss_ref_config(m->ref);
    if (s) s->logits = malloc((size_t)c->vocab_size * sizeof *s->logits);
    if (s && s->logits) s->state = gptoss_ref_state_create(m->ref, (int)ctx);
    if (!s || !s->logits || !s->state) {
        if (s) free(s->logits);
        free(s);
        return llmr_errf_status(LLMR_ENGINE_OOM_RAM, err, es, "out of memory creating a session");
    }
    s->model = m;
    s->pending = -1;
    atomic_init(&s->cancel, 0);
    s->bytes_accounted = gptoss_ref_state_bytes(s->state) + (uint64_t)c->vocab_size * 4;
    atomic_fetch_add(&m->session_bytes, s->bytes_accounted);
    atomic_fetch_add(&m->active_sessions, 1);
    *out = s;
    return LLMR_ENGINE_OK;
}

static void ref_session_destroy(llmr_engine_session *s) {
    if (!s) return;
    atomic_fetch_sub(&s->model->session_bytes, s->bytes_accounted);
    atomic_fetch_sub(&s->model->active_sessions, 1);
    gptoss_ref_state_destroy(s->state);
    free(s->logits);
    free(s);
}

/* Evaluates one token; the logits are computed only when `want` (the lm_head dominates the cost). */
static llmr_engine_status eval_token(llmr_engine_session *s, int32_t tok, int want, char *err, size_t es) {
    char why[256];
    if (gptoss_ref_forward(s->model->ref, s->state, tok, want ? s->logits : NULL, NULL, why, sizeof why))
        return llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "cannot evaluate token %d at position %d: %s", (int)tok,
                    gptoss_ref_state_len(s->state), why);
    s->have_logits = want;
    return LLMR_ENGINE_OK;
}

static int is_stop(const llmr_generate_request *r, int32_t tok) {
    for (size_t i = 0; r->stop_ids && i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == tok) return 1;
    return 0;
}

static void account(llmr_engine_session *s) {
    uint64_t now = gptoss_ref_state_bytes(s->state) + (uint64_t)gptoss_ref_config(s->model->ref)->vocab_size * 4;
    if (now > s->bytes_accounted) atomic_fetch_add(&s->model->session_bytes, now - s->bytes_accounted);
    s->bytes_accounted = now;
}

static llmr_engine_status ref_generate(llmr_engine_session *s, const llmr_generate_request *req, llmr_token_cb on_token, void *user,
                                       llmr_generate_result *res, char *err, size_t es) {
    if (!s || !req || req->struct_size < offsetof(llmr_generate_request, sampling))
        return llmr_errf_status(LLMR_ENGINE_INTERNAL, err, es, "session or request missing (or request struct_size too small)");
    atomic_store(&s->cancel, 0);
    const int V = gptoss_ref_config(s->model->ref)->vocab_size;
    const int cap = gptoss_ref_state_capacity(s->state);
    llmr_generate_result r = {.struct_size = sizeof r, .finish = LLMR_FINISH_NONE};
    llmr_engine_status st = LLMR_ENGINE_OK;
    llmr_sampler *sampler = NULL;
    float *scratch = NULL;
    const int have_sampling = LLMR_HAS_FIELD(req, llmr_generate_request, sampling);
    float *logits_out = LLMR_HAS_FIELD(req, llmr_generate_request, logits_out) ? req->logits_out : NULL;
    size_t n_tok = req->tokens ? req->n_tokens : 0;
    uint32_t max_tokens = req->max_tokens;
    const llmr_logprobs_cb on_lp = LLMR_HAS_FIELD(req, llmr_generate_request, top_logprobs) ? req->on_logprobs : NULL;
    if (on_lp && req->top_logprobs > LLMR_MAX_TOP_LOGPROBS) {
        st = llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "top_logprobs %u exceeds %d", req->top_logprobs,
                              LLMR_MAX_TOP_LOGPROBS);
        goto out;
    }

    /* check the whole input before touching the session */
    for (size_t i = 0; i < n_tok; i++)
        if (req->tokens[i] < 0 || req->tokens[i] >= V) { st = llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "token %zu: id %d out of range 0..%d", i, (int)req->tokens[i], V - 1); goto out; }
    size_t need = (size_t)gptoss_ref_state_len(s->state) + (s->pending >= 0) + n_tok;
    if (need > (size_t)cap) { st = llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "%zu tokens exceed the session's context of %d", need, cap); goto out; }
    if (n_tok == 0 && s->pending < 0 && !s->have_logits && (max_tokens > 0 || logits_out)) {
        st = llmr_errf_status(LLMR_ENGINE_UNSUPPORTED, err, es, "nothing to generate from: the request has no tokens and the session holds no "
                  "logits (it is empty, or its last prompt was cancelled)");
        goto out;
    }
    /* the token generated last time, then the request's tokens */
    if (s->pending >= 0) {
        int32_t t = s->pending;
        if ((st = eval_token(s, t, n_tok == 0, err, es)) != LLMR_ENGINE_OK) goto out;
        s->pending = -1;
    }
    for (size_t i = 0; i < n_tok; i++) {
        if (atomic_load(&s->cancel)) { st = LLMR_ENGINE_CANCELLED; r.finish = LLMR_FINISH_CANCELLED; goto out; }
        if ((st = eval_token(s, req->tokens[i], i + 1 == n_tok, err, es)) != LLMR_ENGINE_OK) goto out;
        r.n_prompt++;
    }
    if (logits_out && s->have_logits) memcpy(logits_out, s->logits, (size_t)V * sizeof *logits_out);
    if (max_tokens == 0) { r.finish = LLMR_FINISH_LENGTH; goto out; }

    llmr_sampling_params sp = {.struct_size = sizeof sp};
    if (have_sampling) sp = req->sampling;
    sampler = llmr_sampler_create(&sp, V);
    scratch = malloc((size_t)V * sizeof *scratch);
    if (!sampler || !scratch) { st = llmr_errf_status(LLMR_ENGINE_OOM_RAM, err, es, "out of memory for sampling"); goto out; }
    for (uint32_t g = 0;; g++) {
        if (atomic_load(&s->cancel)) { st = LLMR_ENGINE_CANCELLED; r.finish = LLMR_FINISH_CANCELLED; break; }
        /* tokens held (evaluated + pending) never exceed the context: a new token needs a free slot */
        if (gptoss_ref_state_len(s->state) >= cap) { r.finish = LLMR_FINISH_LENGTH; break; }
        memcpy(scratch, s->logits, (size_t)V * sizeof *scratch);
        int32_t tok = llmr_sampler_sample(sampler, scratch);
        llmr_sampler_accept(sampler, tok);
        s->pending = tok;
        r.n_generated++;
        atomic_fetch_add(&s->model->tokens_generated, 1);
        if (on_lp) { /* from the raw logits: scratch holds the sampler's processed copy */
            llmr_token_logprobs lp;
            llmr_logprobs_fill(s->logits, V, tok, req->top_logprobs, &lp);
            on_lp(user, &lp);
        }
        int stop_cb = on_token ? on_token(user, tok) != 0 : 0;
        if (is_stop(req, tok) || stop_cb) { r.finish = LLMR_FINISH_STOP; break; }
        if (g + 1 >= max_tokens) { r.finish = LLMR_FINISH_LENGTH; break; }
        if ((st = eval_token(s, tok, 1, err, es)) != LLMR_ENGINE_OK) break;
        s->pending = -1;
    }
out:
    account(s);
    r.n_context = (uint32_t)gptoss_ref_state_len(s->state) + (s->pending >= 0);
    if (res) {
        size_t n = res->struct_size && res->struct_size < sizeof r ? res->struct_size : sizeof r;
        uint32_t keep = res->struct_size;
        memcpy(res, &r, n);
        if (keep && keep < sizeof r) res->struct_size = keep;
    }
    if (st == LLMR_ENGINE_CANCELLED) llmr_errf_status(st, err, es, "cancelled after %u prompt and %u generated tokens", r.n_prompt, r.n_generated);
    llmr_sampler_destroy(sampler);
    free(scratch);
    return st;
}

static void ref_cancel(llmr_engine_session *s) {
    if (s) atomic_store(&s->cancel, 1);
}

static llmr_engine_status ref_stats(llmr_engine_model *m, llmr_engine_stats *out) {
    if (!m || !out) return LLMR_ENGINE_INTERNAL;
    llmr_engine_stats st = {
        .struct_size = sizeof st,
        .vram_bytes = 0,
        .ram_bytes = gptoss_ref_ram_bytes(m->ref) + atomic_load(&m->session_bytes),
        .active_sessions = atomic_load(&m->active_sessions),
        .tokens_generated = atomic_load(&m->tokens_generated),
        .vocab_size = (uint32_t)gptoss_ref_config(m->ref)->vocab_size,
        .max_context = m->max_context,
    };
    size_t n = out->struct_size && out->struct_size < sizeof st ? out->struct_size : sizeof st;
    uint32_t keep = out->struct_size;
    memcpy(out, &st, n);
    if (keep && keep < sizeof st) out->struct_size = keep;
    return LLMR_ENGINE_OK;
}

static const llmr_engine_api api = {
    .struct_size = sizeof(llmr_engine_api),
    .abi_version = LLMR_ENGINE_ABI_VERSION,
    .describe = ref_describe,
    .estimate_vram = ref_estimate_vram,
    .load = ref_load,
    .unload = ref_unload,
    .session_create = ref_session_create,
    .session_destroy = ref_session_destroy,
    .generate = ref_generate,
    .cancel = ref_cancel,
    .stats = ref_stats,
};

LLMR_ENGINE_EXPORT const llmr_engine_api *llmr_engine_get_api(uint32_t host_abi_version) {
    return LLMR_ENGINE_ABI_MAJOR_OF(host_abi_version) == LLMR_ENGINE_ABI_MAJOR ? &api : NULL;
}
