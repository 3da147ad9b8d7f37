/* testengine — a test fixture implementing the whole engine ABI (never installed with real engines).
 *
 * It runs no model: it accounts fake VRAM and emits a deterministic token sequence, with behaviour
 * chosen per model by MODEL_DIR/testengine.json (every field optional):
 *   weights_bytes   fake VRAM of the weights                       (default 1048576)
 *   kv_bytes        fake VRAM of one session's KV state            (default 65536)
 *   estimate_bytes  what estimate_vram reports   (default weights + kv * max(1, max_sessions))
 *   ram_bytes       host memory really malloc'd at load and held   (default 0)
 *   vocab           vocabulary size                                 (default 256)
 *   max_context     tokens a session can hold                       (default 4096)
 *   token_delay_ms  sleep before each generated token               (default 0)
 *   stall_after     after this many tokens, stop producing and wait for cancel (default -1: never)
 *   load_delay_ms   sleep inside load                               (default 0)
 *   load_status / generate_status / session_status / estimate_status
 *                   a status name ("model_corrupt", ...) to fail that call with (default "ok")
 *   events_log      a file to which each call appends one line ("load <n>", "session_create <n>", ...)
 * and per process by environment variables read in llmr_engine_get_api:
 *   TESTENGINE_ABI=M.m          the ABI version the plugin claims (default the header's)
 *   TESTENGINE_ABI_LIE=1        return the table even when the host's major differs (host must refuse)
 *   TESTENGINE_STRUCT_SIZE=N    report this struct_size for the table
 *   TESTENGINE_ID=x             report this id from describe (host must refuse a manifest mismatch)
 * Tokens: t_{i+1} = (t_i * 31 + 7 + seed) % vocab, starting from the last prompt token. */
#include "llmr_engine.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct behaviour {
    uint64_t weights_bytes, kv_bytes, estimate_bytes, ram_bytes;
    uint32_t vocab, max_context;
    int token_delay_ms, stall_after, load_delay_ms;
    llmr_engine_status load_status, generate_status, session_status, estimate_status;
    char events_log[1024];
} behaviour;

struct llmr_engine_model {
    behaviour b;
    int serial;                     /* distinguishes instances in the events log */
    void *ram;                      /* ram_bytes really held */
    atomic_uint active_sessions;
    atomic_ullong tokens_generated;
    uint32_t max_context;
};

struct llmr_engine_session {
    llmr_engine_model *model;
    atomic_int cancel;
    uint32_t n_context;
    int32_t last;
};

static atomic_int g_serial;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static llmr_engine_status status_from_name(const char *s) {
    for (int i = 0; i <= LLMR_ENGINE_LOAD_FAILED; i++)
        if (strcmp(s, llmr_engine_status_name((llmr_engine_status)i)) == 0) return (llmr_engine_status)i;
    return LLMR_ENGINE_INTERNAL;
}

static void event(const behaviour *b, const char *what, int serial) {
    if (!b->events_log[0]) return;
    FILE *f = fopen(b->events_log, "a");
    if (!f) return;
    fprintf(f, "%s %d\n", what, serial);
    fclose(f);
}

static uint64_t get_u64(json_t *o, const char *k, uint64_t d) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v) : d;
}

static llmr_engine_status get_status(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? status_from_name(json_string_value(v)) : LLMR_ENGINE_OK;
}

/* Reads MODEL_DIR/testengine.json (absent = defaults). A malformed file is MODEL_CORRUPT. */
static llmr_engine_status read_behaviour(const llmr_model_descriptor *d, const llmr_load_params *p, behaviour *b,
                                         char *err, size_t err_size) {
    memset(b, 0, sizeof *b);
    b->weights_bytes = 1u << 20;
    b->kv_bytes = 65536;
    b->vocab = 256;
    b->max_context = 4096;
    b->stall_after = -1;
    if (!d || !d->model_dir) {
        snprintf(err, err_size, "testengine: descriptor has no model_dir");
        return LLMR_ENGINE_UNSUPPORTED;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/testengine.json", d->model_dir);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) {
        FILE *f = fopen(path, "r");
        if (!f) goto defaults;
        fclose(f);
        snprintf(err, err_size, "testengine: %s: %s", path, je.text);
        return LLMR_ENGINE_MODEL_CORRUPT;
    }
    b->weights_bytes = get_u64(o, "weights_bytes", b->weights_bytes);
    b->kv_bytes = get_u64(o, "kv_bytes", b->kv_bytes);
    b->estimate_bytes = get_u64(o, "estimate_bytes", 0);
    b->ram_bytes = get_u64(o, "ram_bytes", 0);
    b->vocab = (uint32_t)get_u64(o, "vocab", b->vocab);
    b->max_context = (uint32_t)get_u64(o, "max_context", b->max_context);
    b->token_delay_ms = (int)get_u64(o, "token_delay_ms", 0);
    json_t *sa = json_object_get(o, "stall_after");
    b->stall_after = json_is_integer(sa) ? (int)json_integer_value(sa) : -1;
    b->load_delay_ms = (int)get_u64(o, "load_delay_ms", 0);
    b->load_status = get_status(o, "load_status");
    b->generate_status = get_status(o, "generate_status");
    b->session_status = get_status(o, "session_status");
    b->estimate_status = get_status(o, "estimate_status");
    json_t *ev = json_object_get(o, "events_log");
    if (json_is_string(ev)) snprintf(b->events_log, sizeof b->events_log, "%s", json_string_value(ev));
    json_decref(o);
defaults:
    if (b->vocab == 0) b->vocab = 1;
    if (!b->estimate_bytes) {
        uint32_t ns = p && p->max_sessions ? p->max_sessions : 1;
        b->estimate_bytes = b->weights_bytes + b->kv_bytes * ns;
    }
    return LLMR_ENGINE_OK;
}

static llmr_engine_status te_describe(llmr_engine_info *out) {
    const char *id = getenv("TESTENGINE_ID");
    llmr_engine_info info = {sizeof info, id && *id ? id : "testengine", "1.0.0",
                             "test fixture engine", LLMR_ENGINE_ABI_VERSION, 1};
    uint32_t n = out->struct_size && out->struct_size < sizeof info ? out->struct_size : sizeof info;
    memcpy(out, &info, n);
    out->struct_size = n;
    return LLMR_ENGINE_OK;
}

static llmr_engine_status te_estimate(const llmr_model_descriptor *d, const llmr_load_params *p, uint64_t *bytes_out,
                                      char *err, size_t err_size) {
    behaviour b;
    llmr_engine_status s = read_behaviour(d, p, &b, err, err_size);
    if (s != LLMR_ENGINE_OK) return s;
    if (b.estimate_status != LLMR_ENGINE_OK) {
        snprintf(err, err_size, "testengine: estimate_vram told to fail with %s", llmr_engine_status_name(b.estimate_status));
        return b.estimate_status;
    }
    *bytes_out = b.estimate_bytes;
    return LLMR_ENGINE_OK;
}

static llmr_engine_status te_load(const llmr_model_descriptor *d, const llmr_load_params *p, llmr_engine_model **out,
                                  char *err, size_t err_size) {
    behaviour b;
    llmr_engine_status s = read_behaviour(d, p, &b, err, err_size);
    if (s != LLMR_ENGINE_OK) return s;
    int serial = atomic_fetch_add(&g_serial, 1) + 1;
    event(&b, "load", serial);
    if (b.load_delay_ms) sleep_ms(b.load_delay_ms);
    if (b.load_status != LLMR_ENGINE_OK) {
        snprintf(err, err_size, "testengine: load told to fail with %s", llmr_engine_status_name(b.load_status));
        return b.load_status;
    }
    if (p && p->vram_budget_bytes && b.estimate_bytes > p->vram_budget_bytes) {
        snprintf(err, err_size, "testengine: needs %llu bytes of VRAM, budget is %llu",
                 (unsigned long long)b.estimate_bytes, (unsigned long long)p->vram_budget_bytes);
        return LLMR_ENGINE_OOM_VRAM;
    }
    llmr_engine_model *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, err_size, "testengine: out of memory"); return LLMR_ENGINE_OOM_RAM; }
    m->b = b;
    m->serial = serial;
    m->max_context = p && p->max_context ? p->max_context : b.max_context;
    if (b.ram_bytes) {
        m->ram = malloc(b.ram_bytes);
        if (!m->ram) {
            free(m);
            snprintf(err, err_size, "testengine: cannot allocate %llu bytes of RAM", (unsigned long long)b.ram_bytes);
            return LLMR_ENGINE_OOM_RAM;
        }
        memset(m->ram, 1, b.ram_bytes);
    }
    *out = m;
    return LLMR_ENGINE_OK;
}

static void te_unload(llmr_engine_model *m) {
    if (!m) return;
    event(&m->b, "unload", m->serial);
    free(m->ram);
    free(m);
}

static llmr_engine_status te_session_create(llmr_engine_model *m, const llmr_session_params *p,
                                            llmr_engine_session **out, char *err, size_t err_size) {
    (void)p;
    if (m->b.session_status != LLMR_ENGINE_OK) {
        snprintf(err, err_size, "testengine: session_create told to fail");
        return m->b.session_status;
    }
    llmr_engine_session *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, err_size, "testengine: out of memory"); return LLMR_ENGINE_OOM_RAM; }
    s->model = m;
    atomic_fetch_add(&m->active_sessions, 1);
    event(&m->b, "session_create", m->serial);
    *out = s;
    return LLMR_ENGINE_OK;
}

static void te_session_destroy(llmr_engine_session *s) {
    if (!s) return;
    atomic_fetch_sub(&s->model->active_sessions, 1);
    event(&s->model->b, "session_destroy", s->model->serial);
    free(s);
}

static int stop_hit(const llmr_generate_request *r, int32_t t) {
    for (size_t i = 0; i < r->n_stop_ids; i++) if (r->stop_ids[i] == t) return 1;
    return 0;
}

static llmr_engine_status te_generate(llmr_engine_session *s, const llmr_generate_request *r, llmr_token_cb cb,
                                      void *user, llmr_generate_result *res, char *err, size_t err_size) {
    llmr_engine_model *m = s->model;
    llmr_generate_result out = {sizeof out, LLMR_FINISH_NONE, 0, 0, 0};
    atomic_store(&s->cancel, 0);
    event(&m->b, "generate", m->serial);
    if (m->b.generate_status != LLMR_ENGINE_OK) {
        snprintf(err, err_size, "testengine: generate told to fail");
        return m->b.generate_status;
    }
    for (size_t i = 0; i < r->n_tokens; i++) {
        if (r->tokens[i] < 0 || (uint32_t)r->tokens[i] >= m->b.vocab) {
            snprintf(err, err_size, "testengine: prompt token %zu (%d) is outside the vocabulary of %u", i,
                     r->tokens[i], m->b.vocab);
            return LLMR_ENGINE_UNSUPPORTED;
        }
    }
    if (s->n_context + r->n_tokens > m->max_context) {
        snprintf(err, err_size, "testengine: %zu prompt tokens overflow the context (%u of %u used)", r->n_tokens,
                 s->n_context, m->max_context);
        return LLMR_ENGINE_UNSUPPORTED;
    }
    if (r->n_tokens) s->last = r->tokens[r->n_tokens - 1];
    s->n_context += (uint32_t)r->n_tokens;
    out.n_prompt = (uint32_t)r->n_tokens;
    if (r->logits_out)
        for (uint32_t v = 0; v < m->b.vocab; v++) r->logits_out[v] = (float)v / (float)m->b.vocab;
    out.finish = LLMR_FINISH_LENGTH;
    uint64_t seed = LLMR_HAS_FIELD(r, llmr_generate_request, sampling) ? r->sampling.seed : 0;
    for (uint32_t i = 0; i < r->max_tokens; i++) {
        if (m->b.stall_after >= 0 && (int)i >= m->b.stall_after)
            while (!atomic_load(&s->cancel)) sleep_ms(2);
        for (int w = 0; w < m->b.token_delay_ms && !atomic_load(&s->cancel); w++) sleep_ms(1);
        if (atomic_load(&s->cancel)) { out.finish = LLMR_FINISH_CANCELLED; break; }
        if (s->n_context >= m->max_context) { out.finish = LLMR_FINISH_LENGTH; break; }
        int32_t t = (int32_t)(((uint64_t)(uint32_t)s->last * 31u + 7u + seed) % m->b.vocab);
        s->last = t;
        s->n_context++;
        out.n_generated++;
        atomic_fetch_add(&m->tokens_generated, 1);
        int stop_now = cb ? cb(user, t) : 0;
        if (stop_hit(r, t) || stop_now) { out.finish = LLMR_FINISH_STOP; break; }
    }
    out.n_context = s->n_context;
    if (res) {
        uint32_t n = res->struct_size && res->struct_size < sizeof out ? res->struct_size : sizeof out;
        memcpy(res, &out, n);
        res->struct_size = n;
    }
    if (out.finish == LLMR_FINISH_CANCELLED) {
        snprintf(err, err_size, "testengine: cancelled after %u tokens", out.n_generated);
        return LLMR_ENGINE_CANCELLED;
    }
    return LLMR_ENGINE_OK;
}

static void te_cancel(llmr_engine_session *s) {
    if (s) atomic_store(&s->cancel, 1);
}

static llmr_engine_status te_stats(llmr_engine_model *m, llmr_engine_stats *out) {
    unsigned n = atomic_load(&m->active_sessions);
    llmr_engine_stats st = {sizeof st, m->b.weights_bytes + m->b.kv_bytes * n, m->b.ram_bytes, n,
                            atomic_load(&m->tokens_generated), m->b.vocab, m->max_context};
    uint32_t sz = out->struct_size && out->struct_size < sizeof st ? out->struct_size : sizeof st;
    memcpy(out, &st, sz);
    out->struct_size = sz;
    return LLMR_ENGINE_OK;
}

static llmr_engine_api g_api = {
    sizeof(llmr_engine_api), LLMR_ENGINE_ABI_VERSION, te_describe, te_estimate, te_load, te_unload,
    te_session_create, te_session_destroy, te_generate, te_cancel, te_stats,
};

LLMR_ENGINE_EXPORT const llmr_engine_api *llmr_engine_get_api(uint32_t host_abi_version) {
    uint32_t mine = (uint32_t)LLMR_ENGINE_ABI_MAJOR << 16; /* x.0: it implements no minor's additions (no logprobs) */
    const char *abi = getenv("TESTENGINE_ABI");
    unsigned a, b;
    if (abi && sscanf(abi, "%u.%u", &a, &b) == 2) mine = (a << 16) | (b & 0xffffu);
    g_api.abi_version = mine;
    const char *ss = getenv("TESTENGINE_STRUCT_SIZE");
    g_api.struct_size = ss && *ss ? (uint32_t)strtoul(ss, NULL, 10) : (uint32_t)sizeof g_api;
    const char *lie = getenv("TESTENGINE_ABI_LIE");
    if (LLMR_ENGINE_ABI_MAJOR_OF(host_abi_version) != LLMR_ENGINE_ABI_MAJOR_OF(mine) && !(lie && *lie == '1'))
        return NULL;
    return &g_api;
}
