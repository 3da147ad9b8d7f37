/* generate.c — see generate.h.
 *
 * One request = one `gen`: the loop side (the HTTP request, the SSE stream) and the worker side (a
 * detached thread running tokenize -> session -> generate). The worker appends finished SSE bytes to
 * the gen's outbox under its lock and posts a wake-up to the loop; the loop drains the outbox in
 * order (posts themselves carry no data, so their order does not matter). A gen is freed when its
 * last reference (worker, pending wake-ups, the stream) is gone. */
#include "node/generate.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/harmony/harmony.h"
#include "common/log.h"
#include "common/tokenizer/tokenizer.h"
#include "node/engine/engine_host.h"

/* ---- request parsing ------------------------------------------------------------------------ */

static int num_in(json_t *body, const char *key, double lo, double hi, int lo_open, float *out, char *err, size_t es) {
    json_t *v = json_object_get(body, key);
    if (!v) return 0;
    double d = json_number_value(v);
    if (!json_is_number(v) || !isfinite(d) || d > hi || (lo_open ? d <= lo : d < lo)) {
        snprintf(err, es, "%s: expected a number in %s%g, %g]", key, lo_open ? "(" : "[", lo, hi);
        return -1;
    }
    *out = (float)d;
    return 0;
}

void llmr_gen_params_free(llmr_gen_params *p) {
    if (!p) return;
    free(p->prompt);
    free(p->prompt_ids);
    for (size_t i = 0; i < p->n_stop; i++) free(p->stop[i]);
    memset(p, 0, sizeof *p);
}

int llmr_gen_params_parse(json_t *body, llmr_gen_params *p, char *err, size_t es) {
    memset(p, 0, sizeof *p);
    p->max_tokens = 256;
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->harmony = 1;
    p->logprobs = -1;
    if (!json_is_object(body)) { snprintf(err, es, "body: expected a JSON object"); return -1; }
    const char *model = json_string_value(json_object_get(body, "model"));
    if (!model || !*model || strlen(model) >= sizeof p->model) {
        snprintf(err, es, "model: %s", json_object_get(body, "model") ? "expected a model id" : "missing");
        return -1;
    }
    snprintf(p->model, sizeof p->model, "%s", model);
    const char *rid = json_string_value(json_object_get(body, "request_id"));
    if (rid) snprintf(p->request_id, sizeof p->request_id, "%s", rid);
    json_t *prompt = json_object_get(body, "prompt"), *ids = json_object_get(body, "prompt_ids");
    if (!!prompt == !!ids) { snprintf(err, es, "exactly one of prompt and prompt_ids is required"); goto bad; }
    if (prompt) {
        if (!json_is_string(prompt)) { snprintf(err, es, "prompt: expected a string"); goto bad; }
        p->prompt_len = json_string_length(prompt);
        if (!(p->prompt = malloc(p->prompt_len + 1))) { snprintf(err, es, "out of memory"); goto bad; }
        memcpy(p->prompt, json_string_value(prompt), p->prompt_len + 1);
    } else {
        if (!json_is_array(ids) || json_array_size(ids) == 0) { snprintf(err, es, "prompt_ids: expected a non-empty array"); goto bad; }
        p->n_prompt_ids = json_array_size(ids);
        if (!(p->prompt_ids = malloc(p->n_prompt_ids * sizeof *p->prompt_ids))) { snprintf(err, es, "out of memory"); goto bad; }
        for (size_t i = 0; i < p->n_prompt_ids; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
                snprintf(err, es, "prompt_ids[%zu]: expected a non-negative integer", i);
                goto bad;
            }
            p->prompt_ids[i] = (int32_t)json_integer_value(v);
        }
    }
    json_t *mt = json_object_get(body, "max_tokens");
    if (mt) {
        if (!json_is_integer(mt) || json_integer_value(mt) < 1 || json_integer_value(mt) > 1000000) {
            snprintf(err, es, "max_tokens: expected an integer in [1, 1000000]");
            goto bad;
        }
        p->max_tokens = (uint32_t)json_integer_value(mt);
    }
    if (num_in(body, "temperature", 0, 2, 0, &p->temperature, err, es) || num_in(body, "top_p", 0, 1, 1, &p->top_p, err, es) ||
        num_in(body, "min_p", 0, 1, 0, &p->min_p, err, es) ||
        num_in(body, "frequency_penalty", -2, 2, 0, &p->frequency_penalty, err, es) ||
        num_in(body, "presence_penalty", -2, 2, 0, &p->presence_penalty, err, es))
        goto bad;
    json_t *tk = json_object_get(body, "top_k");
    if (tk) {
        if (!json_is_integer(tk) || json_integer_value(tk) < 0 || json_integer_value(tk) > INT32_MAX) {
            snprintf(err, es, "top_k: expected a non-negative integer");
            goto bad;
        }
        p->top_k = (int32_t)json_integer_value(tk);
    }
    json_t *seed = json_object_get(body, "seed");
    if (seed) {
        if (!json_is_integer(seed)) { snprintf(err, es, "seed: expected an integer"); goto bad; }
        p->seed = (uint64_t)json_integer_value(seed);
        p->has_seed = 1;
    }
    json_t *stop = json_object_get(body, "stop");
    if (stop) {
        if (!json_is_array(stop) || json_array_size(stop) > 4) { snprintf(err, es, "stop: expected an array of at most 4 strings"); goto bad; }
        for (size_t i = 0; i < json_array_size(stop); i++) {
            json_t *s = json_array_get(stop, i);
            if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 256) {
                snprintf(err, es, "stop[%zu]: expected a string of 1 to 256 bytes", i);
                goto bad;
            }
            if (!(p->stop[p->n_stop] = strdup(json_string_value(s)))) { snprintf(err, es, "out of memory"); goto bad; }
            p->n_stop++;
        }
    }
    json_t *lp = json_object_get(body, "logprobs");
    if (lp) {
        if (!json_is_integer(lp) || json_integer_value(lp) < 0 || json_integer_value(lp) > LLMR_MAX_TOP_LOGPROBS) {
            snprintf(err, es, "logprobs: expected an integer in [0, %d] (alternatives per token)", LLMR_MAX_TOP_LOGPROBS);
            goto bad;
        }
        p->logprobs = (int)json_integer_value(lp);
    }
    json_t *parse = json_object_get(body, "parse");
    if (parse) {
        const char *ps = json_string_value(parse);
        if (ps && strcmp(ps, "harmony") == 0) p->harmony = 1;
        else if (ps && strcmp(ps, "none") == 0) p->harmony = 0;
        else { snprintf(err, es, "parse: expected harmony or none"); goto bad; }
    }
    return 0;
bad:
    llmr_gen_params_free(p);
    return -1;
}

/* ---- stop strings ----------------------------------------------------------------------------- */

void llmr_stopper_init(llmr_stopper *s, const char *const *stops, size_t n) {
    memset(s, 0, sizeof *s);
    s->stops = stops;
    s->n_stops = n;
    for (size_t i = 0; i < n; i++) if (strlen(stops[i]) > s->max_len) s->max_len = strlen(stops[i]);
}

void llmr_stopper_free(llmr_stopper *s) {
    free(s->held);
    free(s->out);
    memset(s, 0, sizeof *s);
}

/* Largest cut <= n that does not split a UTF-8 character of buf. */
static size_t utf8_cut(const char *buf, size_t n) {
    size_t i = n;
    while (i > 0 && n - i < 4 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return n;
    unsigned char lead = (unsigned char)buf[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return (n - (i - 1) >= need) ? n : i - 1;
}

int llmr_stopper_push(llmr_stopper *s, const char *text, size_t len, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (s->hit) return 1;
    if (s->n_stops == 0) { *out = text; *out_len = len; return 0; }
    if (s->held_len + len + 1 > s->held_cap) {
        size_t cap = (s->held_len + len + 1) * 2;
        char *nh = realloc(s->held, cap);
        if (!nh) return -1;
        s->held = nh;
        s->held_cap = cap;
    }
    memcpy(s->held + s->held_len, text, len);
    s->held_len += len;
    s->held[s->held_len] = '\0';
    /* The earliest stop string wins. */
    size_t first = SIZE_MAX;
    for (size_t i = 0; i < s->n_stops; i++) {
        const char *at = memmem(s->held, s->held_len, s->stops[i], strlen(s->stops[i]));
        if (at && (size_t)(at - s->held) < first) first = (size_t)(at - s->held);
    }
    if (first != SIZE_MAX) {
        s->hit = 1;
        *out = s->held;
        *out_len = first;
        s->held_len = 0; /* the rest is dropped; *out stays valid until the next call */
        return 1;
    }
    /* Emit all but a tail that could still start a stop string. */
    size_t keep = s->max_len - 1 < s->held_len ? s->max_len - 1 : s->held_len;
    size_t emit = utf8_cut(s->held, s->held_len - keep);
    /* Emitted bytes go out through the stopper's own copy (a thread-local one outlived each request's
     * worker thread, leaking per request); shift the kept tail afterwards. */
    if (emit + 1 > s->out_cap) {
        char *ns = realloc(s->out, emit + 1);
        if (!ns) return -1;
        s->out = ns;
        s->out_cap = emit + 1;
    }
    memcpy(s->out, s->held, emit);
    memmove(s->held, s->held + emit, s->held_len - emit);
    s->held_len -= emit;
    *out = s->out;
    *out_len = emit;
    return 0;
}

void llmr_stopper_flush(llmr_stopper *s, const char **out, size_t *out_len) {
    *out = s->held ? s->held : "";
    *out_len = s->hit ? 0 : s->held_len;
    s->held_len = 0;
}

/* ---- per-request state ------------------------------------------------------------------------ */

typedef struct gen {
    struct llmr_generate *g;
    llmr_http_request *req;     /* loop side; NULL once the stream ended */
    pthread_mutex_t mu;
    int refs;
    char *out; size_t out_len, out_cap; /* SSE bytes waiting for the loop */
    int finished;               /* the worker wrote its last event */
    atomic_int holds_slot;      /* 1 while this request counts in n->active_requests (release_slot) */
    atomic_int gone;            /* the client disconnected */
    llmr_host_session *session; /* under mu: cancel may come from the loop */
    llmr_gen_params p;
    struct gen *next;           /* in g->active */
    /* worker-only state */
    const tokenizer *tok;
    tokenizer_decoder *dec;
    harmony_parser *hp;
    llmr_stopper stopper;
    uint32_t completion_tokens;
    uint32_t reasoning_tokens;  /* tokens spent in the analysis channel (usage.reasoning_tokens) */
    int in_reasoning;           /* the last text the harmony parser gave was reasoning */
    int stopped_by_string;
    llmr_token_logprobs lp;     /* the next token's, from on_logprobs (lp.token == -1: none) */
    json_t *lp_out;             /* logprobs entries the next delta carries (array; NULL when none) */
    json_t *lp_hold;            /* entries of header text: content if the parser gives that text to content,
                                   else none once a harmony token ends the header */
} gen;

typedef struct tok_entry { char id[256]; tokenizer *tok; struct tok_entry *next; } tok_entry;

struct llmr_generate {
    llmr_node *n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gen *active;
    int n_active, stopping;
    tok_entry *toks;
};

static void gen_unref(gen *x) {
    pthread_mutex_lock(&x->mu);
    int left = --x->refs;
    pthread_mutex_unlock(&x->mu);
    if (left) return;
    pthread_mutex_destroy(&x->mu);
    free(x->out);
    llmr_gen_params_free(&x->p);
    free(x);
}

/* Loop thread: writes what the worker queued; ends the stream after the last event. */
static void drain(void *arg) {
    gen *x = arg;
    pthread_mutex_lock(&x->mu);
    if (x->req && x->out_len) {
        llmr_http_stream_write(x->req, x->out, x->out_len); /* a gone client: dropped */
        x->out_len = 0;
    }
    if (x->req && x->finished) {
        llmr_http_stream_end(x->req);
        x->req = NULL;
        x->refs--; /* the stream's reference; the caller's keeps x alive */
    }
    pthread_mutex_unlock(&x->mu);
    gen_unref(x);
}

/* Worker: queues one event (stolen) and wakes the loop. */
/* Gives this request's --max-concurrency slot back, once. Called when the last event is queued (before it
 * can reach the router) so a router that saw the end and sends the next request at once does not get a 429
 * busy from a node that was in fact free (the slot used to be returned only when the worker exited). */
static void release_slot(gen *x) {
    if (atomic_exchange(&x->holds_slot, 0)) atomic_fetch_sub(&x->g->n->active_requests, 1);
}

static void emit(gen *x, json_t *ev, int last) {
    if (last) release_slot(x);
    char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    pthread_mutex_lock(&x->mu);
    if (text) {
        size_t need = x->out_len + strlen(text) + 16;
        if (need > x->out_cap) {
            char *no = realloc(x->out, need * 2);
            if (no) { x->out = no; x->out_cap = need * 2; }
        }
        if (x->out_cap >= need) x->out_len += (size_t)sprintf(x->out + x->out_len, "data: %s\n\n", text);
    }
    if (last) x->finished = 1;
    x->refs++;
    pthread_mutex_unlock(&x->mu);
    free(text);
    if (llmr_loop_post(x->g->n->loop, drain, x) != 0) gen_unref(x);
}

static void emit_error(gen *x, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emit_error(gen *x, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_warn("generate %s%s%s: %s: %s", x->p.model, x->p.request_id[0] ? " " : "", x->p.request_id, code, msg);
    emit(x, json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "message", msg), 1);
}

/* Queues entry (a new reference, taken) for the next delta. */
static void lp_queue(gen *x, json_t *entry) {
    if (!x->lp_out) x->lp_out = json_array();
    json_array_append_new(x->lp_out, entry);
}

/* Moves the held header-text entries to the outgoing ones, as channel ch. */
static void lp_release_hold(gen *x, const char *ch) {
    size_t i;
    json_t *e;
    json_array_foreach(x->lp_hold, i, e) {
        json_object_set_new(e, "channel", json_string(ch));
        lp_queue(x, json_incref(e));
    }
    json_decref(x->lp_hold);
    x->lp_hold = NULL;
}

/* A delta event (stolen), carrying the logprobs entries that wait; content text takes the held ones too
 * (the parser gave header text to content). */
static void emit_delta(gen *x, json_t *ev, int content) {
    if (content && x->lp_hold) {
        json_t *cur = x->lp_out;
        x->lp_out = NULL;
        lp_release_hold(x, "content");
        if (cur) json_array_extend(x->lp_out, cur);
        json_decref(cur);
    }
    if (ev && x->lp_out) {
        json_object_set_new(ev, "logprobs", x->lp_out);
        x->lp_out = NULL;
    }
    emit(x, ev, 0);
}

static void emit_text(gen *x, const char *field, const char *text, size_t len) {
    if (len == 0) return;
    emit_delta(x, json_pack("{s:s, s:s%}", "type", "delta", field, text, len), !strcmp(field, "content"));
}

/* OpenAI's token fields of an id: its text (U+FFFD for bytes that are not UTF-8 on their own; ids the
 * tokenizer does not know read "token_id:N", as vLLM writes them) and its bytes. */
static json_t *lp_token(gen *x, int32_t id, float logprob) {
    size_t len = 0;
    const char *bytes = tokenizer_id_known(x->tok, id) ? tokenizer_id_to_bytes(x->tok, id, &len) : NULL;
    char *text = NULL, buf[32];
    size_t tlen = 0;
    if (bytes && tokenizer_decode(x->tok, &id, 1, TOKENIZER_DECODE_LOSSY, &text, &tlen, NULL, 0) != TOKENIZER_OK) text = NULL;
    if (!bytes) snprintf(buf, sizeof buf, "token_id:%d", (int)id);
    json_t *b = json_array();
    for (size_t i = 0; bytes && i < len; i++) json_array_append_new(b, json_integer((unsigned char)bytes[i]));
    /* JSON has no -inf: OpenAI reports -9999.0 for tokens it rules out */
    const double v = logprob > -9999.0f ? (double)logprob : -9999.0;
    json_t *t = json_pack("{s:s%, s:f, s:o}", "token", text ? text : bytes ? "" : buf, text ? tlen : bytes ? 0 : strlen(buf),
                          "logprob", v, "bytes", b);
    free(text);
    return t;
}

/* The engine's log-probabilities of the token on_token is about to receive. */
static void on_logprobs(void *user, const llmr_token_logprobs *lp) {
    gen *x = user;
    x->lp = *lp;
}

/* x->lp as a node entry (channel set later), or NULL when the engine gave none for `id`. */
static json_t *lp_entry_of(gen *x, int32_t id) {
    if (x->lp.token != id) return NULL;
    x->lp.token = -1;
    json_t *e = lp_token(x, id, x->lp.logprob), *top = json_array();
    json_object_set_new(e, "id", json_integer(id));
    for (uint32_t i = 0; i < x->lp.n_top && i < LLMR_MAX_TOP_LOGPROBS; i++) {
        json_t *a = lp_token(x, x->lp.top_ids[i], x->lp.top_logprobs[i]);
        json_object_set_new(a, "id", json_integer(x->lp.top_ids[i]));
        json_array_append_new(top, a);
    }
    json_object_set_new(e, "top_logprobs", top);
    return e;
}

/* Content passes through the stop-string matcher; returns 1 when a stop string ended it. */
static int emit_content(gen *x, const char *text, size_t len) {
    const char *out;
    size_t n;
    int rc = llmr_stopper_push(&x->stopper, text, len, &out, &n);
    emit_text(x, "content", out, n);
    if (rc == 1) x->stopped_by_string = 1;
    return rc == 1;
}

static int emit_harmony(gen *x, const harmony_delta *d) {
    switch (d->kind) {
    case HARMONY_DELTA_REASONING: emit_text(x, "reasoning", d->text, d->len); return 0;
    case HARMONY_DELTA_CONTENT: return emit_content(x, d->text, d->len);
    case HARMONY_DELTA_TOOL_BEGIN:
        emit_delta(x, json_pack("{s:s, s:[{s:i, s:s, s:s}]}", "type", "delta", "tool_calls", "index", d->tool_index, "id",
                                d->tool_id ? d->tool_id : "", "name", d->tool_name ? d->tool_name : ""), 0);
        return 0;
    case HARMONY_DELTA_TOOL_ARGS:
        if (d->len)
            emit_delta(x, json_pack("{s:s, s:[{s:i, s:s%}]}", "type", "delta", "tool_calls", "index", d->tool_index,
                                    "arguments", d->text, d->len), 0);
        return 0;
    default: return 0;
    }
}

/* Sends logprobs entries that no text delta carried, in a delta of their own. */
static void flush_lp_out(gen *x) {
    if (x->lp_out) emit_delta(x, json_pack("{s:s}", "type", "delta"), 0);
}

/* Engine callback, on the generating thread: one token as soon as it is produced. */
static int on_token(void *user, int32_t id) {
    gen *x = user;
    if (atomic_load(&x->gone)) return 1;
    x->completion_tokens++;
    json_t *entry = x->p.logprobs >= 0 ? lp_entry_of(x, id) : NULL;
    int rc;
    if (x->hp) {
        size_t len = 0;
        const char *bytes = tokenizer_id_to_bytes(x->tok, id, &len);
        harmony_delta d;
        if (harmony_push(x->hp, (uint32_t)id, bytes ? bytes : "", bytes ? len : 0, &d) < 0) return 1;
        /* A token counts as reasoning when it produced reasoning text, or produced nothing yet while
         * the parser was inside the analysis channel (a character split across tokens). */
        if (d.kind == HARMONY_DELTA_REASONING) x->in_reasoning = 1;
        else if (d.kind == HARMONY_DELTA_CONTENT || d.kind == HARMONY_DELTA_TOOL_BEGIN || d.kind == HARMONY_DELTA_TOOL_ARGS)
            x->in_reasoning = 0;
        if (x->in_reasoning) x->reasoning_tokens++;
        /* a token that gave no text yet (part of a character) belongs to the body it is in; harmony's own
         * tokens and header text to none */
        const int special = tokenizer_id_is_special(x->tok, id);
        harmony_delta_kind k = d.kind;
        if (k == HARMONY_DELTA_NONE && !special) k = harmony_text_kind(x->hp);
        const char *ch = k == HARMONY_DELTA_CONTENT ? "content"
                         : k == HARMONY_DELTA_REASONING ? "reasoning"
                         : k == HARMONY_DELTA_TOOL_BEGIN || k == HARMONY_DELTA_TOOL_ARGS ? "tool" : "none";
        if (entry) {
            json_object_set_new(entry, "channel", json_string(ch));
            if (k == HARMONY_DELTA_NONE && !special) { /* header text: held until the parser decides */
                if (!x->lp_hold) x->lp_hold = json_array();
                json_array_append_new(x->lp_hold, entry);
            } else {
                if (special) lp_release_hold(x, "none");
                lp_queue(x, entry);
            }
        }
        rc = emit_harmony(x, &d);
    } else {
        const char *text;
        size_t len;
        char why[256];
        if (entry) {
            json_object_set_new(entry, "channel", json_string("content"));
            lp_queue(x, entry);
        }
        rc = tokenizer_decoder_push(x->dec, id, &text, &len, why, sizeof why) != TOKENIZER_OK ? 0 /* unknown id: skipped */
                                                                                            : emit_content(x, text, len);
    }
    flush_lp_out(x);
    return rc;
}

/* The model's tokenizer, loaded on first use. */
static const tokenizer *get_tokenizer(llmr_generate *g, const char *model, char *err, size_t es) {
    pthread_mutex_lock(&g->mu);
    for (tok_entry *e = g->toks; e; e = e->next)
        if (strcmp(e->id, model) == 0) { pthread_mutex_unlock(&g->mu); return e->tok; }
    pthread_mutex_unlock(&g->mu);
    char dir[4096], path[4200];
    llmr_node_model_dir(g->n, model, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tokenizer *tok = NULL;
    if (tokenizer_create_from_file(path, &tok, err, es) != TOKENIZER_OK) return NULL;
    tok_entry *e = calloc(1, sizeof *e);
    if (!e) { tokenizer_destroy(tok); snprintf(err, es, "out of memory"); return NULL; }
    snprintf(e->id, sizeof e->id, "%s", model);
    e->tok = tok;
    pthread_mutex_lock(&g->mu);
    for (tok_entry *o = g->toks; o; o = o->next)
        if (strcmp(o->id, model) == 0) { /* another thread won the race */
            pthread_mutex_unlock(&g->mu);
            tokenizer_destroy(tok);
            free(e);
            return o->tok;
        }
    e->next = g->toks;
    g->toks = e;
    pthread_mutex_unlock(&g->mu);
    return tok;
}

void llmr_generate_forget(llmr_generate *g, const char *model_id) {
    if (!g) return;
    /* Tokenizers are shared by running generations: one is only dropped at destroy, so a model
     * deleted and registered again with another tokenizer gets a fresh entry instead. */
    pthread_mutex_lock(&g->mu);
    for (tok_entry *e = g->toks; e; e = e->next)
        if (strcmp(e->id, model_id) == 0) e->id[0] = '\0';
    pthread_mutex_unlock(&g->mu);
}

/* eos_token_id of the model's generation_config.json (an integer or a list) into ids; 0 when absent. */
static size_t generation_config_stops(llmr_node *n, const char *model, int32_t *ids, size_t max) {
    char dir[4096], path[4200];
    llmr_node_model_dir(n, model, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    json_t *e = json_object_get(j, "eos_token_id");
    size_t k = 0;
    if (json_is_integer(e) && json_integer_value(e) >= 0) {
        ids[k++] = (int32_t)json_integer_value(e);
    } else if (json_is_array(e)) {
        size_t i;
        json_t *v;
        json_array_foreach(e, i, v)
            if (k < max && json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < INT32_MAX)
                ids[k++] = (int32_t)json_integer_value(v);
    }
    json_decref(j);
    return k;
}

static void run(gen *x) {
    llmr_node *n = x->g->n;
    char err[1024];
    int32_t *ids = NULL;
    size_t n_ids = 0;
    llmr_model_view mv;
    if (llmr_models_get(n->models, x->p.model, &mv) != 0) { emit_error(x, "model_not_found", "model %s is not known to this node", x->p.model); return; }
    if (mv.state != LLMR_MODEL_READY) {
        emit_error(x, "model_not_ready", "model %s is %s on this node%s%s", x->p.model, llmr_model_state_name(mv.state),
                   mv.reason[0] ? ": " : "", mv.reason);
        return;
    }
    llmr_engine_host *host = llmr_node_engines_host(n->engines);
    if (!host) { emit_error(x, "no_engine", "this node has no engine host"); return; }
    if (!(x->tok = get_tokenizer(x->g, x->p.model, err, sizeof err))) { emit_error(x, "tokenizer", "%s", err); return; }
    if (x->p.prompt) {
        if (tokenizer_encode(x->tok, x->p.prompt, x->p.prompt_len, 0, &ids, &n_ids, err, sizeof err) != TOKENIZER_OK) {
            emit_error(x, "invalid_request", "prompt: %s", err);
            return;
        }
    } else {
        for (size_t i = 0; i < x->p.n_prompt_ids; i++)
            if (!tokenizer_id_known(x->tok, x->p.prompt_ids[i])) {
                emit_error(x, "invalid_request", "prompt_ids[%zu]: id %d is unknown to the tokenizer of %s", i,
                           x->p.prompt_ids[i], x->p.model);
                return;
            }
        ids = x->p.prompt_ids;
        n_ids = x->p.n_prompt_ids;
    }
    if (n_ids == 0) { emit_error(x, "invalid_request", "prompt: empty after tokenization"); goto out; }
    llmr_stopper_init(&x->stopper, (const char *const *)x->p.stop, x->p.n_stop);
    if (x->p.harmony) x->hp = harmony_create(NULL);
    else x->dec = tokenizer_decoder_create(x->tok, TOKENIZER_DECODE_LOSSY);
    if ((x->p.harmony && !x->hp) || (!x->p.harmony && !x->dec)) { emit_error(x, "internal", "out of memory"); goto out; }
    /* Stop ids: generation_config.json's eos_token_id (gpt-oss: 200002 <|return|>, 200012 <|call|>,
     * 199999 <|endoftext|>), else those three found by name in the tokenizer. */
    int32_t stop_ids[8];
    size_t n_stop_ids = generation_config_stops(x->g->n, x->p.model, stop_ids, 8);
    const char *names[] = {"<|return|>", "<|call|>", "<|endoftext|>"};
    for (size_t i = 0; i < 3 && n_stop_ids == 0; i++) {
        int32_t id = tokenizer_special_id(x->tok, names[i]);
        if (id >= 0) stop_ids[n_stop_ids++] = id;
    }
    llmr_session_params sp = {.struct_size = sizeof sp};
    llmr_host_session *s = NULL;
    llmr_engine_status st = llmr_engine_host_session_create(host, x->p.model, &sp, &s, err, sizeof err);
    if (st != LLMR_ENGINE_OK) { emit_error(x, llmr_engine_status_name(st), "%s", err); goto out; }
    /* A prompt that leaves no room for one token is the client's error (400 context_length_exceeded at
     * the router, as OpenAI answers it), not an engine failure. Longer outputs stop at the context. */
    const uint32_t ctx = llmr_host_session_max_context(s);
    if (ctx && n_ids >= ctx) {
        llmr_engine_host_session_destroy(s);
        emit_error(x, "context_length_exceeded",
                   "the prompt is %zu tokens, and model %s holds at most %u tokens of prompt and output together "
                   "on this node (--max-context)", n_ids, x->p.model, ctx);
        goto out;
    }
    pthread_mutex_lock(&x->mu);
    x->session = s;
    pthread_mutex_unlock(&x->mu);
    if (atomic_load(&x->gone)) llmr_engine_host_cancel(s);
    llmr_generate_request rq = {.struct_size = sizeof rq, .tokens = ids, .n_tokens = n_ids, .max_tokens = x->p.max_tokens,
                                .stop_ids = stop_ids, .n_stop_ids = n_stop_ids,
                                .on_logprobs = x->p.logprobs >= 0 ? on_logprobs : NULL,
                                .top_logprobs = x->p.logprobs >= 0 ? (uint32_t)x->p.logprobs : 0};
    x->lp.token = -1;
    rq.sampling = (llmr_sampling_params){.struct_size = sizeof rq.sampling, .temperature = x->p.temperature,
                                         .top_k = x->p.top_k, .top_p = x->p.top_p, .min_p = x->p.min_p,
                                         .seed = x->p.has_seed ? x->p.seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)x,
                                         .frequency_penalty = x->p.frequency_penalty,
                                         .presence_penalty = x->p.presence_penalty};
    llmr_generate_result res = {.struct_size = sizeof res};
    st = llmr_engine_host_generate(s, &rq, on_token, x, &res, err, sizeof err);
    pthread_mutex_lock(&x->mu);
    x->session = NULL;
    pthread_mutex_unlock(&x->mu);
    llmr_engine_host_session_destroy(s);
    int hit_length = res.finish == LLMR_FINISH_LENGTH;
    if (st != LLMR_ENGINE_OK && st != LLMR_ENGINE_CANCELLED && st != LLMR_ENGINE_TIMEOUT) {
        emit_error(x, llmr_engine_status_name(st), "%s", err);
        goto out;
    }
    /* Flush what was held back: detokenizer / harmony tail, then the stop matcher's tail. */
    const char *text;
    size_t len;
    if (!x->stopped_by_string) {
        if (x->hp) {
            harmony_delta d;
            if (harmony_finish(x->hp, hit_length, &d) == 0) emit_harmony(x, &d);
        } else {
            tokenizer_decoder_flush(x->dec, &text, &len);
            emit_content(x, text, len);
        }
        llmr_stopper_flush(&x->stopper, &text, &len);
        emit_text(x, "content", text, len);
    }
    lp_release_hold(x, "none"); /* header text the parser dropped */
    flush_lp_out(x);
    const char *finish = st == LLMR_ENGINE_TIMEOUT ? "timeout"
                         : st == LLMR_ENGINE_CANCELLED && !x->stopped_by_string ? "cancelled"
                         : x->stopped_by_string ? "stop"
                         : x->hp && harmony_finish_reason(x->hp) ? harmony_finish_reason(x->hp)
                         : hit_length ? "length" : "stop";
    if (atomic_load(&x->gone)) finish = "cancelled";
    log_info("generate %s%s%s: %u prompt + %u completion tokens, finish %s", x->p.model, x->p.request_id[0] ? " " : "",
             x->p.request_id, (unsigned)n_ids, x->completion_tokens, finish);
    if (st == LLMR_ENGINE_TIMEOUT && !atomic_load(&x->gone)) {
        /* the EngineHost's stall watchdog stopped it: the answer is incomplete, say so as an error */
        emit_error(x, "timeout", "the engine produced no token within the stall watchdog's limit after %u token(s): %s",
                   x->completion_tokens, err[0] ? err : "generation stopped");
        goto out;
    }
    emit(x, json_pack("{s:s, s:s, s:{s:i, s:i, s:i}}", "type", "done", "finish_reason", finish, "usage", "prompt_tokens",
                      (int)n_ids, "completion_tokens", (int)x->completion_tokens, "reasoning_tokens",
                      (int)x->reasoning_tokens), 1);
out:
    if (ids != x->p.prompt_ids) free(ids);
}

static void *worker(void *arg) {
    gen *x = arg;
    llmr_generate *g = x->g;
    run(x);
    pthread_mutex_lock(&x->mu);
    int finished = x->finished;
    pthread_mutex_unlock(&x->mu);
    if (!finished) emit(x, NULL, 1); /* never leave a stream open */
    harmony_destroy(x->hp);
    json_decref(x->lp_out);
    json_decref(x->lp_hold);
    x->lp_out = x->lp_hold = NULL;
    tokenizer_decoder_destroy(x->dec);
    llmr_stopper_free(&x->stopper);
    release_slot(x);
    pthread_mutex_lock(&g->mu);
    for (gen **p = &g->active; *p; p = &(*p)->next)
        if (*p == x) { *p = x->next; break; }
    g->n_active--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    gen_unref(x);
    return NULL;
}

/* Loop thread: the router went away. */
static void on_gone(void *arg) {
    gen *x = arg;
    atomic_store(&x->gone, 1);
    pthread_mutex_lock(&x->mu);
    if (x->session) llmr_engine_host_cancel(x->session);
    pthread_mutex_unlock(&x->mu);
}

static void h_generate(llmr_http_request *req, void *user) {
    llmr_generate *g = user;
    llmr_node *n = g->n;
    if (!llmr_router_client_registered(n->router)) {
        llmr_http_reply_error(req, 503, "server_error", "not_registered", NULL, NULL, "this node has not registered with the router yet");
        return;
    }
    if (!llmr_router_client_check_token(n->router, llmr_http_bearer(req))) {
        llmr_http_reply_error(req, 401, "authentication_error", "invalid_node_token", NULL, NULL,
                              "POST /v0/generate needs Authorization: Bearer <this node's token>");
        return;
    }
    /* A full node says so at the HTTP level (429), so the router can try another one. */
    if (atomic_fetch_add(&n->active_requests, 1) >= n->cfg.max_concurrency) {
        atomic_fetch_sub(&n->active_requests, 1);
        llmr_http_add_header(req, "Retry-After", "1");
        llmr_http_reply_error(req, 429, "rate_limit_error", "busy", NULL, NULL,
                              "this node serves %d requests at once (--max-concurrency)", n->cfg.max_concurrency);
        return;
    }
    gen *x = calloc(1, sizeof *x);
    if (!x) {
        atomic_fetch_sub(&n->active_requests, 1);
        llmr_http_reply_error(req, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return;
    }
    pthread_mutex_init(&x->mu, NULL);
    atomic_init(&x->holds_slot, 1); /* the slot taken above; the last event gives it back */
    x->g = g;
    x->req = req;
    x->refs = 2; /* the stream and the handler/worker */
    llmr_http_stream_start(req, 200, "text/event-stream");
    size_t blen = 0;
    const char *btext = llmr_http_body(req, &blen);
    json_error_t je;
    json_t *body = json_loadb(btext ? btext : "", blen, 0, &je);
    char err[512];
    if (!body) {
        emit_error(x, "invalid_request", "body is not valid JSON: %s (line %d)", je.text, je.line);
        gen_unref(x);
        return;
    }
    int bad = llmr_gen_params_parse(body, &x->p, err, sizeof err);
    json_decref(body);
    if (bad) { emit_error(x, "invalid_request", "%s", err); gen_unref(x); return; }
    llmr_http_on_client_gone(req, on_gone, x);
    pthread_mutex_lock(&g->mu);
    int stopping = g->stopping;
    if (!stopping) { x->next = g->active; g->active = x; g->n_active++; }
    pthread_mutex_unlock(&g->mu);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (stopping || pthread_create(&th, &attr, worker, x) != 0) {
        if (!stopping) {
            pthread_mutex_lock(&g->mu);
            for (gen **p = &g->active; *p; p = &(*p)->next) if (*p == x) { *p = x->next; break; }
            g->n_active--;
            pthread_mutex_unlock(&g->mu);
        }
        emit_error(x, "internal", stopping ? "the node is shutting down" : "cannot start a generation thread");
        gen_unref(x);
    }
    pthread_attr_destroy(&attr);
}

llmr_generate *llmr_generate_create(llmr_node *n, char *err, size_t es) {
    llmr_generate *g = calloc(1, sizeof *g);
    if (!g) { snprintf(err, es, "out of memory"); return NULL; }
    g->n = n;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (llmr_http_server_route(n->http, "POST", "/v0/generate", h_generate, g) != 0) {
        snprintf(err, es, "cannot add the /v0/generate route");
        llmr_generate_destroy(g);
        return NULL;
    }
    return g;
}

void llmr_generate_destroy(llmr_generate *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stopping = 1;
    for (gen *x = g->active; x; x = x->next) on_gone(x);
    while (g->n_active > 0) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    for (tok_entry *e = g->toks, *next; e; e = next) {
        next = e->next;
        tokenizer_destroy(e->tok);
        free(e);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
