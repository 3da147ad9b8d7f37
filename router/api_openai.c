/* api_openai.c — see api_openai.h. One oa_req per request, owned by the loop thread: it lives until
 * its reply is finished and neither a proxy nor a queue wait refers to it any more. */
#include "router/api_openai.h"

#include <ctype.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "router/balancer.h"
#include "router/chat_prompt.h"
#include "router/metrics.h"
#include "router/nodes.h"
#include "router/proxy.h"
#include "router/registry.h"

typedef struct oa_req oa_req;

#define ROUTER_MAX_TOKENS_LIMIT 1000000 /* the node's own bound (schema/node-generate.request) */
#define ROUTER_MAX_TOKENS_DEFAULT 4096  /* when the request names none */
#define ROUTER_MAX_TOP_LOGPROBS 20      /* alternatives per token: the node's bound (schema/node-generate.request) */

/* A parsed chat template, kept per model so a request does not re-parse it (0.3-0.5 ms for gpt-oss's).
 * Entries are keyed by model id and checked against the registry's current template text, so a model
 * deleted and registered again with another template is parsed afresh. Loop thread only. */
#define TEMPLATE_CACHE_SIZE 32
typedef struct template_entry {
    char *model_id;
    char *text;               /* the template source it was parsed from */
    jinja_template *parsed;   /* immutable: safe to render from any thread */
} template_entry;

typedef struct router_openai {
    router_ctx *ctx;
    router_balancer *bal;
    router_metrics *metrics;
    llmr_httpc *http;
    oa_req *live; /* every request not yet freed */
    template_entry templates[TEMPLATE_CACHE_SIZE];
    unsigned next_evict;
} router_openai;

typedef struct sbuf { char *p; size_t len, cap; } sbuf;

struct oa_req {
    router_openai *a;
    llmr_http_request *req;  /* NULL once the reply is finished */
    const char *route;
    int chat, stream, include_usage;
    char id[64];
    char model[256];         /* as the client wrote it (echoed back) */
    char model_id[256];      /* registry id (lower case) */
    long long created;
    double t0;
    char *node_body;         /* the /v0/generate request */
    router_proxy *proxy;
    router_bal_wait *wait;
    router_node_target node;
    int have_node;           /* a balancer slot is held on node */
    int attempts;
    char failed_node[64];
    int started;             /* the client has bytes (stream headers sent) */
    int terminal;            /* the node sent done or error */
    char first_error[1024];  /* why the first node failed, for the reply when no other could */
    char first_code[48];
    int first_error_status;
    char ev_error[1024];     /* this attempt's error event (before the first byte) */
    char ev_code[48];
    int ev_status;
    sbuf content, reasoning;
    json_t *tools;           /* accumulated tool calls (array) */
    int tool_calls_seen;
    int logprobs;            /* alternatives per token when the client asked for logprobs; -1: not asked */
    json_t *lp_entries;      /* the node's entries not yet sent (streamed) or all of them (non-streamed) */
    long long lp_offset;     /* completions: characters of the tokens reported so far (text_offset) */
    json_int_t prompt_tokens, completion_tokens, reasoning_tokens;
    char finish[32];
    struct event *probe;     /* watches for a client that leaves while nothing is written */
    oa_req *prev, *next;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int sbuf_add(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->len + n + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

/* ---- lifetime ------------------------------------------------------------------------------------ */

static void maybe_free(oa_req *o) {
    if (o->req || o->proxy || o->wait) return;
    if (o->have_node) router_balancer_release(o->a->bal, o->node.id);
    if (o->probe) event_free(o->probe);
    if (o->prev) o->prev->next = o->next; else o->a->live = o->next;
    if (o->next) o->next->prev = o->prev;
    free(o->node_body);
    free(o->content.p);
    free(o->reasoning.p);
    json_decref(o->tools);
    json_decref(o->lp_entries);
    free(o);
}

static void record(oa_req *o, int status) {
    router_metrics_request(o->a->metrics, o->route, status, now_s() - o->t0);
    if (status == 200) router_metrics_tokens(o->a->metrics, (uint64_t)o->prompt_tokens, (uint64_t)o->completion_tokens);
}

/* An OpenAI-shaped error reply before any byte was sent. */
static void fail(oa_req *o, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void fail(oa_req *o, int status, const char *code, const char *param, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!o->req) return;
    if (status == 429) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", router_balancer_retry_after_s(o->a->bal));
        llmr_http_add_header(o->req, "Retry-After", ra);
    }
    log_info("%s %s: %d %s: %s", o->route, o->id, status, code ? code : "-", msg);
    llmr_http_reply_error(o->req, status, NULL, code, param, NULL, "%s", msg);
    o->req = NULL;
    record(o, status);
}

/* ---- output shapes ------------------------------------------------------------------------------- */

static json_t *usage_json(const oa_req *o) {
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", o->prompt_tokens, "completion_tokens",
                     o->completion_tokens, "total_tokens", o->prompt_tokens + o->completion_tokens,
                     "completion_tokens_details", "reasoning_tokens", o->reasoning_tokens);
}

static json_t *chunk_base(const oa_req *o) {
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", o->id, "object",
                          o->chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)o->created,
                          "model", o->model, "choices");
    if (c && o->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

/* Sends one SSE data line with obj (stolen). */
static void send_sse(oa_req *o, json_t *obj) {
    if (!obj || !o->req) { json_decref(obj); return; }
    char *t = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!t) return;
    size_t n = strlen(t);
    char *line = malloc(n + 9);
    if (line) {
        memcpy(line, "data: ", 6);
        memcpy(line + 6, t, n);
        memcpy(line + 6 + n, "\n\n", 2);
        llmr_http_stream_write(o->req, line, n + 8);
        free(line);
    }
    free(t);
}

/* ---- logprobs ---------------------------------------------------------------------------------- */

/* OpenAI's form of one node entry (or alternative): token, logprob, bytes. */
static json_t *lp_openai_token(json_t *e) {
    return json_pack("{s:O, s:O, s:O}", "token", json_object_get(e, "token"), "logprob", json_object_get(e, "logprob"),
                     "bytes", json_object_get(e, "bytes"));
}

/* Characters (code points) of a UTF-8 string. */
static long long utf8_chars(const char *t) {
    long long n = 0;
    for (; t && *t; t++) n += ((unsigned char)*t & 0xC0) != 0x80;
    return n;
}

/* The choice's logprobs for the entries in o->lp_entries, which it takes (null when none are asked for; in a
 * stream, null for a chunk that carries none). Chat: {"content": [{token, logprob, bytes, top_logprobs}],
 * "refusal": null}. Completions (the legacy shape): {tokens, token_logprobs, top_logprobs: [{token:
 * logprob}], text_offset}. */
static json_t *lp_take(oa_req *o) {
    json_t *in = o->lp_entries;
    o->lp_entries = NULL;
    if (o->logprobs < 0 || (o->stream && !json_array_size(in))) { json_decref(in); return json_null(); }
    size_t i, k;
    json_t *e, *a;
    if (o->chat) {
        json_t *content = json_array();
        json_array_foreach(in, i, e) {
            json_t *t = lp_openai_token(e), *top = json_array();
            json_array_foreach(json_object_get(e, "top_logprobs"), k, a) json_array_append_new(top, lp_openai_token(a));
            json_object_set_new(t, "top_logprobs", top);
            json_array_append_new(content, t);
        }
        json_decref(in);
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    json_array_foreach(in, i, e) {
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *top = json_object();
        json_array_foreach(json_object_get(e, "top_logprobs"), k, a) {
            const char *tok = json_string_value(json_object_get(a, "token"));
            if (tok && !json_object_get(top, tok)) json_object_set(top, tok, json_object_get(a, "logprob"));
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer(o->lp_offset));
        o->lp_offset += utf8_chars(json_string_value(json_object_get(e, "token")));
    }
    json_decref(in);
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* Keeps a node delta's logprobs entries for the reply: chat reports the content channel's tokens only
 * (OpenAI's logprobs.content), completions every token. */
static void lp_collect(oa_req *o, json_t *ev) {
    json_t *arr = json_object_get(ev, "logprobs");
    if (o->logprobs < 0 || !json_is_array(arr)) return;
    if (!o->lp_entries) o->lp_entries = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *ch = json_string_value(json_object_get(e, "channel"));
        if (!json_is_object(e) || (o->chat && (!ch || strcmp(ch, "content")))) continue;
        json_array_append(o->lp_entries, e);
    }
}

/* A streamed choice: delta (stolen) for chat, text for completions; it carries the logprobs collected so far. */
static void send_choice(oa_req *o, json_t *delta, const char *text, const char *finish) {
    json_t *c = chunk_base(o);
    json_t *ch = json_pack("{s:i, s:o}", "index", 0, "logprobs", lp_take(o));
    if (o->chat) json_object_set_new(ch, "delta", delta ? delta : json_object());
    else { json_decref(delta); json_object_set_new(ch, "text", json_string(text ? text : "")); }
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_array_append_new(json_object_get(c, "choices"), ch);
    send_sse(o, c);
}

static void start_stream(oa_req *o) {
    if (o->started) return;
    o->started = 1;
    llmr_http_add_header(o->req, "X-Request-Id", o->id);
    llmr_http_stream_start(o->req, 200, "text/event-stream");
    router_metrics_ttft(o->a->metrics, o->route, now_s() - o->t0);
    if (o->chat) { /* the role chunk carries no logprobs: those collected so far belong to the chunk that follows */
        json_t *keep = o->lp_entries;
        o->lp_entries = NULL;
        send_choice(o, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL, NULL);
        o->lp_entries = keep;
    }
}

/* The tool call of index idx in the accumulated list (created). */
static json_t *tool_at(oa_req *o, json_int_t idx) {
    if (!o->tools) o->tools = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(o->tools, i, t)
        if (json_integer_value(json_object_get(t, "index")) == idx) return t;
    t = json_pack("{s:I, s:s, s:s, s:{s:s, s:s}}", "index", idx, "id", "", "type", "function", "function", "name", "",
                  "arguments", "");
    json_array_append_new(o->tools, t);
    return t;
}

static void append_str(json_t *obj, const char *key, const char *add) {
    const char *old = json_string_value(json_object_get(obj, key));
    size_t a = old ? strlen(old) : 0, b = strlen(add);
    char *s = malloc(a + b + 1);
    if (!s) return;
    memcpy(s, old ? old : "", a);
    memcpy(s + a, add, b + 1);
    json_object_set_new(obj, key, json_string(s));
    free(s);
}

/* Folds a node delta's tool_calls into the accumulated list; returns the OpenAI delta entries. */
static json_t *merge_tools(oa_req *o, json_t *calls) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        json_int_t idx = json_integer_value(json_object_get(c, "index"));
        json_t *t = tool_at(o, idx);
        json_t *d = json_pack("{s:I}", "index", idx);
        json_t *fn = json_object();
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *args = json_string_value(json_object_get(c, "arguments"));
        if (!*json_string_value(json_object_get(t, "id"))) {
            char gen[64];
            if (!id || !*id) {
                char rnd[40];
                if (router_auth_random_token("call_", 12, rnd, sizeof rnd) != 0) snprintf(rnd, sizeof rnd, "call_%d", (int)idx);
                id = strcpy(gen, rnd);
            }
            json_object_set_new(t, "id", json_string(id));
            json_object_set_new(d, "id", json_string(id));
            json_object_set_new(d, "type", json_string("function"));
        }
        json_t *tf = json_object_get(t, "function");
        if (name && *name) { append_str(tf, "name", name); json_object_set_new(fn, "name", json_string(name)); }
        if (args) { append_str(tf, "arguments", args); json_object_set_new(fn, "arguments", json_string(args)); }
        json_object_set_new(d, "function", fn);
        json_array_append_new(out, d);
    }
    o->tool_calls_seen = 1;
    return out;
}

static void on_delta(oa_req *o, json_t *ev) {
    const char *content = json_string_value(json_object_get(ev, "content"));
    const char *reasoning = json_string_value(json_object_get(ev, "reasoning"));
    json_t *calls = json_object_get(ev, "tool_calls");
    lp_collect(o, ev);
    if (!content && !reasoning && !json_is_array(calls)) return; /* logprobs alone ride with the next chunk */
    json_t *tool_delta = json_is_array(calls) && json_array_size(calls) ? merge_tools(o, calls) : NULL;
    if (!o->stream) {
        if (content) sbuf_add(&o->content, content, strlen(content));
        if (reasoning) sbuf_add(&o->reasoning, reasoning, strlen(reasoning));
        json_decref(tool_delta);
        return;
    }
    if (!o->chat && !content) { json_decref(tool_delta); return; }
    start_stream(o);
    if (!o->chat) { send_choice(o, NULL, content, NULL); return; }
    json_t *d = json_object();
    if (content) json_object_set_new(d, "content", json_string(content));
    if (reasoning) {
        json_object_set_new(d, "reasoning", json_string(reasoning));
        json_object_set_new(d, "reasoning_content", json_string(reasoning));
    }
    if (tool_delta) json_object_set_new(d, "tool_calls", tool_delta);
    send_choice(o, d, NULL, NULL);
}

static const char *openai_finish(const oa_req *o) {
    if (!strcmp(o->finish, "length")) return "length";
    if (!strcmp(o->finish, "tool_calls") || (o->tool_calls_seen && o->chat)) return "tool_calls";
    return "stop";
}

/* The node's done event: the whole answer (non-streamed) or the last chunks. */
static void on_done_event(oa_req *o, json_t *ev) {
    json_t *u = json_object_get(ev, "usage");
    o->prompt_tokens = json_integer_value(json_object_get(u, "prompt_tokens"));
    o->completion_tokens = json_integer_value(json_object_get(u, "completion_tokens"));
    o->reasoning_tokens = json_integer_value(json_object_get(u, "reasoning_tokens"));
    snprintf(o->finish, sizeof o->finish, "%s", json_string_value(json_object_get(ev, "finish_reason")) ?: "stop");
    if (!strcmp(o->finish, "timeout") || !strcmp(o->finish, "cancelled")) {
        /* the node's stall watchdog (or its own shutdown) ended the generation: an error, not an answer */
        json_t *err = json_pack("{s:s, s:s, s:s}", "type", "error", "code", "timeout", "message",
                                "the generation stalled on the node and was stopped (engine watchdog)");
        if (o->started) {
            send_sse(o, json_pack("{s:{s:s, s:s, s:s, s:n}}", "error", "message", json_string_value(json_object_get(err, "message")),
                                  "type", "server_error", "code", "timeout", "param"));
            llmr_http_stream_end(o->req);
            o->req = NULL;
            record(o, 504);
        } else {
            fail(o, 504, "timeout", NULL, "%s", json_string_value(json_object_get(err, "message")));
        }
        json_decref(err);
        return;
    }
    const char *finish = openai_finish(o);
    if (o->stream) {
        start_stream(o);
        send_choice(o, NULL, "", finish);
        if (o->include_usage) {
            json_t *c = chunk_base(o);
            json_object_set_new(c, "usage", usage_json(o));
            send_sse(o, c);
        }
        llmr_http_stream_write(o->req, "data: [DONE]\n\n", 14);
        llmr_http_stream_end(o->req);
        o->req = NULL;
        record(o, 200);
        return;
    }
    json_t *choice;
    if (o->chat) {
        json_t *msg = json_pack("{s:s, s:s?, s:n}", "role", "assistant", "content", o->content.p ? o->content.p : "",
                                "refusal");
        if (o->tool_calls_seen && !o->content.len) json_object_set_new(msg, "content", json_null());
        if (o->reasoning.len) {
            json_object_set_new(msg, "reasoning", json_string(o->reasoning.p));
            json_object_set_new(msg, "reasoning_content", json_string(o->reasoning.p));
        }
        if (o->tools) {
            size_t i;
            json_t *t;
            json_array_foreach(o->tools, i, t) json_object_del(t, "index");
            json_object_set(msg, "tool_calls", o->tools);
        }
        choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", msg, "logprobs", lp_take(o), "finish_reason",
                           finish);
    } else {
        choice = json_pack("{s:i, s:s, s:o, s:s}", "index", 0, "text", o->content.p ? o->content.p : "", "logprobs",
                           lp_take(o), "finish_reason", finish);
    }
    json_t *body = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", o->id, "object",
                             o->chat ? "chat.completion" : "text_completion", "created", (json_int_t)o->created, "model",
                             o->model, "choices", choice, "usage", usage_json(o));
    llmr_http_add_header(o->req, "X-Request-Id", o->id);
    llmr_http_reply_json(o->req, 200, body);
    o->req = NULL;
    record(o, 200);
}

/* ---- node exchange and failover -------------------------------------------------------------------- */

static void start_on_node(oa_req *o);
static void on_slot(void *user, int outcome, const router_node_target *t);

static int status_for_node_code(const char *code) {
    if (!code) return 502;
    if (!strcmp(code, "invalid_request") || !strcmp(code, "context_length_exceeded")) return 400;
    if (!strcmp(code, "model_not_found")) return 404;
    if (!strcmp(code, "model_not_ready")) return 503;
    if (!strcmp(code, "busy")) return 429;
    if (!strcmp(code, "timeout")) return 504;
    return 502;
}

/* The node failed before the client saw a byte: try one other node, else answer with the error. */
static void failover(oa_req *o, int status, const char *code, const char *msg) {
    if (!o->first_error[0]) {
        snprintf(o->first_error, sizeof o->first_error, "%s", msg);
        snprintf(o->first_code, sizeof o->first_code, "%s", code);
        o->first_error_status = status;
    }
    if (!o->req) return;
    if (status != 400 && o->attempts < 2) {
        snprintf(o->failed_node, sizeof o->failed_node, "%s", o->node.id);
        router_balancer_release(o->a->bal, o->node.id);
        o->have_node = 0;
        o->content.len = o->reasoning.len = 0;
        json_decref(o->tools);
        o->tools = NULL;
        o->tool_calls_seen = 0;
        json_decref(o->lp_entries);
        o->lp_entries = NULL;
        o->lp_offset = 0;
        int r = router_balancer_acquire(o->a->bal, o->model_id, o->failed_node, 1, &o->node, on_slot, o, &o->wait);
        if (r == ROUTER_BAL_QUEUED) {
            log_warn("%s %s: node %s failed before the first byte (%s); waiting for another node", o->route, o->id,
                     o->failed_node, msg);
            router_metrics_failover(o->a->metrics);
            return;
        }
        if (r == ROUTER_BAL_OK) {
            o->have_node = 1;
            log_warn("%s %s: node %s failed before the first byte (%s); retrying on node %s", o->route, o->id,
                     o->failed_node, msg, o->node.id);
            router_metrics_failover(o->a->metrics);
            start_on_node(o);
            return;
        }
    }
    fail(o, o->first_error_status, o->first_code, NULL, "%s", o->first_error);
}

static void px_event(void *user, json_t *ev) {
    oa_req *o = user;
    if (!o->req || o->terminal) return;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type) return;
    if (!strcmp(type, "delta")) { on_delta(o, ev); return; }
    if (!strcmp(type, "done")) { o->terminal = 1; on_done_event(o, ev); return; }
    const char *code = json_string_value(json_object_get(ev, "code"));
    const char *msg = json_string_value(json_object_get(ev, "message"));
    char text[1024];
    snprintf(text, sizeof text, "node %s: %s", o->node.id, msg ? msg : "error");
    if (!o->started) {
        /* decided when the node's connection has closed (px_done): maybe another node can serve */
        snprintf(o->ev_error, sizeof o->ev_error, "%s", text);
        snprintf(o->ev_code, sizeof o->ev_code, "%s", code ? code : "node_error");
        o->ev_status = status_for_node_code(code);
        router_proxy_cancel(o->proxy);
        return;
    }
    o->terminal = 1;
    send_sse(o, json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", text, "type", "server_error", "code", code,
                          "param"));
    llmr_http_stream_end(o->req);
    o->req = NULL;
    record(o, status_for_node_code(code));
}

static void px_done(void *user, const router_proxy_result *r) {
    oa_req *o = user;
    o->proxy = NULL;
    if (o->req && !o->terminal) {
        if (o->started) {
            /* after the first byte there is no taking it back: the stream ends with an error */
            send_sse(o, json_pack("{s:{s:s, s:s, s:s, s:n}}", "error", "message",
                                  r->message[0] ? r->message : "the node's stream ended early", "type", "server_error",
                                  "code", "node_failed", "param"));
            llmr_http_stream_end(o->req);
            o->req = NULL;
            record(o, 502);
        } else if (o->ev_error[0]) {
            if (o->ev_status == 400) /* the client's error: no other node would answer otherwise */
                fail(o, 400, strcmp(o->ev_code, "context_length_exceeded") ? "invalid_request_error" : o->ev_code,
                     NULL, "%s", o->ev_error);
            else failover(o, o->ev_status, o->ev_code, o->ev_error);
        } else if (r->http_status == 429) {
            failover(o, 429, "busy", r->message);
        } else {
            if (r->st == LLMR_HTTPC_EREFUSED || r->st == LLMR_HTTPC_ECONNECT)
                router_nodes_mark_unreachable(o->a->ctx->nodes, o->node.id, llmr_httpc_strerror(r->st));
            failover(o, 502, "node_failed", r->message[0] ? r->message : "the node's stream ended before its last event");
        }
    }
    maybe_free(o);
}

static void start_on_node(oa_req *o) {
    char err[512];
    o->attempts++;
    o->terminal = 0;
    o->ev_error[0] = 0;
    o->proxy = router_proxy_start(o->a->ctx->loop, o->a->http, &o->node, o->node_body, px_event, px_done, o, err, sizeof err);
    if (!o->proxy) fail(o, 500, "internal_error", NULL, "%s", err);
}

static void on_gone(void *user) {
    oa_req *o = user;
    log_info("%s %s: client disconnected: aborting%s%s", o->route, o->id, o->have_node ? " the request on node " : "",
             o->have_node ? o->node.id : "");
    if (o->proxy) router_proxy_cancel(o->proxy);
    if (o->wait) { router_balancer_cancel(o->a->bal, o->wait); o->wait = NULL; }
    if (o->req) {
        if (o->started) llmr_http_stream_end(o->req);
        else llmr_http_reply_error(o->req, 499, NULL, "client_closed", NULL, NULL, "client closed the request");
        o->req = NULL;
        record(o, 499);
    }
    maybe_free(o);
}

/* Every 200 ms while a reply is pending: evhttp sees a closed client only when it writes, and a
 * non-streamed answer (or a request waiting in the queue) writes nothing for a long time. */
static void on_probe(evutil_socket_t fd, short what, void *user) {
    (void)fd; (void)what;
    oa_req *o = user;
    if (!o->req) { event_del(o->probe); return; }
    llmr_http_probe_client_gone(o->req); /* may run on_gone, which may free o */
}

static void on_slot(void *user, int outcome, const router_node_target *t) {
    oa_req *o = user;
    o->wait = NULL;
    if (outcome == ROUTER_BAL_OK) {
        o->node = *t;
        o->have_node = 1;
        if (o->req) start_on_node(o);
    } else if (outcome == ROUTER_BAL_TIMEOUT) {
        fail(o, 504, "queue_timeout", NULL, "no node had a free slot for '%s' within %d ms", o->model,
             o->a->ctx->cfg.queue_timeout_ms);
    } else {
        fail(o, outcome, outcome == 404 ? "model_not_found" : "no_nodes_online", NULL, "model '%s' is no longer served",
             o->model);
    }
    maybe_free(o);
}

/* ---- request validation ---------------------------------------------------------------------------- */

typedef struct vctx { char param[64]; char msg[512]; } vctx;

static int bad(vctx *v, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(vctx *v, const char *param, const char *fmt, ...) {
    snprintf(v->param, sizeof v->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copies a number field in [lo, hi] into out (absent or null: nothing). */
static int num(json_t *b, const char *k, double lo, double hi, json_t *out, const char *outk, vctx *v) {
    json_t *x = json_object_get(b, k);
    if (!x || json_is_null(x)) return 0;
    if (!json_is_number(x)) return bad(v, k, "'%s' must be a number", k);
    double d = json_number_value(x);
    if (!(d >= lo && d <= hi)) return bad(v, k, "'%s' must be between %g and %g (got %g)", k, lo, hi, d);
    if (out) json_object_set_new(out, outk, json_real(d));
    return 0;
}

static int type_is(json_t *b, const char *k, int (*pred)(const json_t *), const char *what, vctx *v) {
    json_t *x = json_object_get(b, k);
    if (!x || json_is_null(x) || pred(x)) return 0;
    return bad(v, k, "'%s' must be %s", k, what);
}
static int is_str(const json_t *x) { return json_is_string(x); }
static int is_bool(const json_t *x) { return json_is_boolean(x); }
static int is_obj(const json_t *x) { return json_is_object(x); }
static int is_arr(const json_t *x) { return json_is_array(x); }
static int is_str_or_obj(const json_t *x) { return json_is_string(x) || json_is_object(x); }

/* Checks the fields both endpoints share and fills the node request nb. */
static int check_common(json_t *b, json_t *nb, oa_req *o, vctx *v) {
    json_t *m = json_object_get(b, "model");
    if (!m) return bad(v, "model", "you must provide a model parameter");
    if (!json_is_string(m) || !*json_string_value(m)) return bad(v, "model", "'model' must be a non-empty string");
    if (strlen(json_string_value(m)) >= sizeof o->model) return bad(v, "model", "'model' is too long");
    if (num(b, "temperature", 0, 2, nb, "temperature", v) || num(b, "top_p", 0, 1, nb, "top_p", v) ||
        num(b, "frequency_penalty", -2, 2, nb, "frequency_penalty", v) ||
        num(b, "presence_penalty", -2, 2, nb, "presence_penalty", v))
        return -1;
    json_t *tp = json_object_get(nb, "top_p");
    if (tp && json_real_value(tp) <= 0) json_object_set_new(nb, "top_p", json_real(1e-6)); /* top_p 0 = greedy */
    const char *mt = json_object_get(b, "max_completion_tokens") && !json_is_null(json_object_get(b, "max_completion_tokens"))
                         ? "max_completion_tokens" : "max_tokens";
    json_t *x = json_object_get(b, mt);
    if (x && !json_is_null(x)) {
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > ROUTER_MAX_TOKENS_LIMIT)
            return bad(v, mt, "'%s' must be an integer between 1 and %d", mt, ROUTER_MAX_TOKENS_LIMIT);
        json_object_set_new(nb, "max_tokens", json_integer(json_integer_value(x)));
    } else {
        /* OpenAI's default is "until done"; a reasoning model needs room, the context bounds it anyway */
        json_object_set_new(nb, "max_tokens", json_integer(ROUTER_MAX_TOKENS_DEFAULT));
    }
    x = json_object_get(b, "seed");
    if (x && !json_is_null(x)) {
        if (!json_is_integer(x)) return bad(v, "seed", "'seed' must be an integer");
        json_object_set_new(nb, "seed", json_integer(json_integer_value(x)));
    }
    x = json_object_get(b, "n");
    if (x && !json_is_null(x)) {
        if (!json_is_integer(x)) return bad(v, "n", "'n' must be an integer");
        if (json_integer_value(x) != 1) return bad(v, "n", "'n' must be 1: this server returns one choice per request");
    }
    if (type_is(b, "stream", is_bool, "a boolean", v) || type_is(b, "user", is_str, "a string", v) ||
        type_is(b, "stream_options", is_obj, "an object", v))
        return -1;
    o->stream = json_is_true(json_object_get(b, "stream"));
    json_t *so = json_object_get(b, "stream_options");
    if (json_is_object(so)) {
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_boolean(iu)) return bad(v, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        o->include_usage = o->stream && json_is_true(iu);
    }
    x = json_object_get(b, "stop");
    if (x && !json_is_null(x)) {
        json_t *arr = json_array();
        json_object_set_new(nb, "stop", arr);
        if (json_is_string(x)) {
            if (*json_string_value(x)) json_array_append(arr, x);
        } else if (json_is_array(x)) {
            if (json_array_size(x) > 4) return bad(v, "stop", "'stop' may hold at most 4 strings");
            size_t i;
            json_t *s;
            json_array_foreach(x, i, s) {
                if (!json_is_string(s)) return bad(v, "stop", "'stop[%zu]' must be a string", i);
                if (*json_string_value(s)) json_array_append(arr, s);
            }
        } else {
            return bad(v, "stop", "'stop' must be a string or an array of strings");
        }
    }
    snprintf(o->model, sizeof o->model, "%s", json_string_value(m));
    size_t i = 0;
    for (; o->model[i] && i < sizeof o->model_id - 1; i++) o->model_id[i] = (char)tolower((unsigned char)o->model[i]);
    o->model_id[i] = 0;
    json_object_set_new(nb, "model", json_string(o->model_id));
    json_object_set_new(nb, "request_id", json_string(o->id));
    return 0;
}

static int check_chat(json_t *b, vctx *v) {
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return bad(v, "messages", "'messages' is required");
    if (!json_is_array(msgs) || !json_array_size(msgs)) return bad(v, "messages", "'messages' must be a non-empty array");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char p[64];
        snprintf(p, sizeof p, "messages[%zu]", i);
        if (!json_is_object(m)) return bad(v, p, "'%s' must be an object", p);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) return bad(v, p, "'%s.role' must be a string", p);
        const char *r = json_string_value(role);
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant") &&
            strcmp(r, "tool") && strcmp(r, "function"))
            return bad(v, p, "'%s.role' must be one of system, developer, user, assistant, tool (got '%s')", p, r);
        json_t *c = json_object_get(m, "content");
        if (c && !json_is_null(c) && !json_is_string(c) && !json_is_array(c))
            return bad(v, p, "'%s.content' must be a string or an array of content parts", p);
    }
    if (type_is(b, "tools", is_arr, "an array", v) || type_is(b, "tool_choice", is_str_or_obj, "a string or an object", v) ||
        type_is(b, "reasoning_effort", is_str, "a string", v))
        return -1;
    json_t *tools = json_object_get(b, "tools");
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return bad(v, "tools", "'tools[%zu]' must be {\"type\":\"function\",\"function\":{\"name\":...}}", i);
    }
    const char *re = json_string_value(json_object_get(b, "reasoning_effort"));
    if (re && strcmp(re, "low") && strcmp(re, "medium") && strcmp(re, "high"))
        return bad(v, "reasoning_effort", "'reasoning_effort' must be low, medium or high (got '%s')", re);
    return 0;
}

static void template_entry_clear(template_entry *e) {
    free(e->model_id);
    free(e->text);
    jinja_destroy(e->parsed);
    memset(e, 0, sizeof *e);
}

/* The parsed template for model_id whose source is src (cached), or NULL with err set. */
static const jinja_template *template_for(router_openai *a, const char *model_id, const char *src, char *err, size_t es) {
    template_entry *slot = NULL;
    for (int i = 0; i < TEMPLATE_CACHE_SIZE; i++) {
        template_entry *e = &a->templates[i];
        if (!e->model_id) { if (!slot) slot = e; continue; }
        if (strcmp(e->model_id, model_id) != 0) continue;
        if (strcmp(e->text, src) == 0) return e->parsed;
        slot = e; /* the model's template changed: replace its entry */
        break;
    }
    if (!slot) slot = &a->templates[a->next_evict++ % TEMPLATE_CACHE_SIZE];
    int st = 0;
    jinja_template *t = jinja_parse(src, strlen(src), NULL, &st, NULL, err, es);
    if (!t) return NULL;
    template_entry_clear(slot);
    slot->model_id = strdup(model_id);
    slot->text = strdup(src);
    if (!slot->model_id || !slot->text) { template_entry_clear(slot); jinja_destroy(t); snprintf(err, es, "out of memory"); return NULL; }
    slot->parsed = t;
    return t;
}

/* Renders the model's chat template over the request, with the bos/eos tokens registered from its
 * tokenizer_config.json. 0 with nb.prompt set, or -1 with v filled. */
static int render_chat(oa_req *o, json_t *b, json_t *nb, vctx *v) {
    json_t *rec = NULL;
    char *tmpl = NULL, err[1024];
    if (router_registry_get(o->a->ctx->db, o->model_id, &rec, &tmpl, err, sizeof err) != ROUTER_DB_OK) return 1;
    const jinja_template *t = template_for(o->a, o->model_id, tmpl ? tmpl : chat_prompt_default_template(), err, sizeof err);
    free(tmpl);
    if (!t) { json_decref(rec); return bad(v, "messages", "the model's chat template does not parse: %s", err); }
    json_t *req = json_deep_copy(b);
    const char *tc = json_string_value(json_object_get(b, "tool_choice"));
    if (tc && !strcmp(tc, "none")) json_object_del(req, "tools");
    char *out = NULL;
    size_t len = 0;
    jinja_render_opts ro = {0};
    int rc = chat_prompt_render(t, req, json_object_get(rec, "special_tokens"), &ro, &out, &len, err, sizeof err);
    json_decref(req);
    json_decref(rec);
    if (rc != JINJA_OK) return bad(v, "messages", "the chat template rejected the request: %s", err);
    json_object_set_new(nb, "prompt", json_stringn(out, len));
    json_object_set_new(nb, "parse", json_string("harmony"));
    free(out);
    return 0;
}

/* logprobs: chat takes logprobs (a boolean) and top_logprobs (0..20, only with logprobs true), completions
 * logprobs (0..20 alternatives; OpenAI allows up to 5). The node gets the count of alternatives. */
static int lp_count_ok(const json_t *x) {
    return json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= ROUTER_MAX_TOP_LOGPROBS;
}

static int check_logprobs(json_t *b, json_t *nb, oa_req *o, vctx *v) {
    json_t *lp = json_object_get(b, "logprobs"), *top = json_object_get(b, "top_logprobs");
    o->logprobs = -1;
    if (o->chat) {
        if (lp && !json_is_null(lp) && !json_is_boolean(lp)) return bad(v, "logprobs", "'logprobs' must be a boolean");
        if (top && !json_is_null(top)) {
            if (!lp_count_ok(top))
                return bad(v, "top_logprobs", "'top_logprobs' must be an integer between 0 and %d", ROUTER_MAX_TOP_LOGPROBS);
            if (!json_is_true(lp)) return bad(v, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
        }
        if (json_is_true(lp)) o->logprobs = top && !json_is_null(top) ? (int)json_integer_value(top) : 0;
    } else if (lp && !json_is_null(lp)) {
        if (!lp_count_ok(lp))
            return bad(v, "logprobs", "'logprobs' must be an integer between 0 and %d (alternatives per token)",
                       ROUTER_MAX_TOP_LOGPROBS);
        o->logprobs = (int)json_integer_value(lp);
    }
    if (o->logprobs >= 0) json_object_set_new(nb, "logprobs", json_integer(o->logprobs));
    return 0;
}

static int check_completion(json_t *b, json_t *nb, vctx *v) {
    json_t *p = json_object_get(b, "prompt");
    if (!p) return bad(v, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        json_object_set(nb, "prompt", p);
    } else if (json_is_array(p) && json_array_size(p)) {
        size_t i;
        json_t *x;
        json_array_foreach(p, i, x)
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                return bad(v, "prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
        json_object_set(nb, "prompt_ids", p);
    } else {
        return bad(v, "prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
    }
    if (type_is(b, "suffix", is_str, "a string", v)) return -1;
    json_object_set_new(nb, "parse", json_string("none"));
    return 0;
}

/* ---- handlers ---------------------------------------------------------------------------------------- */

static void handle(llmr_http_request *req, router_openai *a, int chat) {
    double t0 = now_s();
    const char *route = chat ? "/v1/chat/completions" : "/v1/completions";
    router_principal who;
    if (!router_auth_require(a->ctx->auth, req, ROUTER_ROLE_API | ROUTER_ROLE_ADMIN, &who)) {
        router_metrics_request(a->metrics, route, 401, now_s() - t0);
        return;
    }
    json_t *b = llmr_http_json_body(req);
    if (!b) { router_metrics_request(a->metrics, route, 400, now_s() - t0); return; }
    oa_req *o = calloc(1, sizeof *o);
    json_t *nb = json_object();
    if (!o || !nb) {
        free(o);
        json_decref(nb);
        json_decref(b);
        llmr_http_reply_error(req, 500, NULL, NULL, NULL, NULL, "out of memory");
        return;
    }
    o->a = a;
    o->req = req;
    o->route = route;
    o->chat = chat;
    o->t0 = t0;
    o->created = (long long)time(NULL);
    char rnd[64];
    if (router_auth_random_token(chat ? "chatcmpl-" : "cmpl-", 12, rnd, sizeof rnd) != 0)
        snprintf(rnd, sizeof rnd, "%s%lld", chat ? "chatcmpl-" : "cmpl-", (long long)(t0 * 1e6));
    snprintf(o->id, sizeof o->id, "%s", rnd);
    o->next = a->live;
    if (a->live) a->live->prev = o;
    a->live = o;
    vctx v = {"", ""};
    int rc = check_common(b, nb, o, &v);
    if (!rc) rc = check_logprobs(b, nb, o, &v);
    if (!rc) rc = chat ? check_chat(b, &v) : check_completion(b, nb, &v);
    if (!rc && chat) rc = render_chat(o, b, nb, &v);
    json_decref(b);
    if (rc == 1) {
        json_decref(nb);
        fail(o, 404, "model_not_found", "model", "The model '%s' does not exist or is not registered", o->model);
        maybe_free(o);
        return;
    }
    if (rc) {
        json_decref(nb);
        fail(o, 400, "invalid_request_error", v.param, "%s", v.msg);
        maybe_free(o);
        return;
    }
    o->node_body = json_dumps(nb, JSON_COMPACT);
    json_decref(nb);
    if (!o->node_body) { fail(o, 500, NULL, NULL, "out of memory"); maybe_free(o); return; }
    llmr_http_on_client_gone(req, on_gone, o);
    struct timeval every = {0, 200000};
    o->probe = event_new(llmr_loop_base(a->ctx->loop), -1, EV_PERSIST, on_probe, o);
    if (o->probe) event_add(o->probe, &every);
    int out = router_balancer_acquire(a->bal, o->model_id, NULL, 1, &o->node, on_slot, o, &o->wait);
    switch (out) {
    case ROUTER_BAL_OK: o->have_node = 1; start_on_node(o); break;
    case ROUTER_BAL_QUEUED: log_debug("%s %s: queued for '%s'", route, o->id, o->model); break;
    case ROUTER_BAL_NO_MODEL:
        fail(o, 404, "model_not_found", "model", "The model '%s' is not ready on any online node", o->model);
        break;
    case ROUTER_BAL_NO_NODE: fail(o, 503, "no_nodes_online", NULL, "no node is online to serve '%s'", o->model); break;
    default:
        fail(o, 429, "rate_limit_exceeded", NULL, "every node serving '%s' is busy and the wait queue is full (%d)",
             o->model, a->ctx->cfg.queue_max);
    }
    maybe_free(o);
}

static void h_chat(llmr_http_request *req, void *user) { handle(req, user, 1); }
static void h_completions(llmr_http_request *req, void *user) { handle(req, user, 0); }

static void h_metrics(llmr_http_request *req, void *user) {
    router_openai *a = user;
    char *text = router_metrics_render(a->metrics, router_balancer_queue_depth(a->bal),
                                       router_nodes_online_count(a->ctx->nodes));
    if (!text) { llmr_http_reply_error(req, 500, NULL, NULL, NULL, NULL, "out of memory"); return; }
    llmr_http_reply_text(req, 200, "text/plain; version=0.0.4", text, strlen(text));
    free(text);
}

int router_openai_init(router_ctx *ctx, char *err, size_t es) {
    router_openai *a = calloc(1, sizeof *a);
    if (!a) { snprintf(err, es, "out of memory"); return -1; }
    a->ctx = ctx;
    ctx->openai = a;
    /* No total timeout and no retries: a generation lasts as long as it lasts, failover is ours; a
     * node silent for 5 minutes (not even a token) is a stall. */
    llmr_httpc_opts ho = {.connect_timeout_ms = 3000, .retries = -1, .low_speed_time_s = 300, .user_agent = "llmr-router"};
    a->metrics = router_metrics_create();
    a->http = llmr_httpc_create(&ho);
    a->bal = router_balancer_create(ctx->loop, ctx->nodes, ctx->cfg.queue_max, ctx->cfg.queue_timeout_ms);
    if (!a->metrics || !a->http || !a->bal) { snprintf(err, es, "out of memory"); return -1; }
    llmr_http_server *s = ctx->http;
    if (llmr_http_server_route(s, "POST", "/v1/chat/completions", h_chat, a) ||
        llmr_http_server_route(s, "POST", "/v1/completions", h_completions, a) ||
        llmr_http_server_route(s, "GET", "/metrics", h_metrics, a)) {
        snprintf(err, es, "cannot add the /v1 inference routes");
        return -1;
    }
    return 0;
}

void router_openai_record(router_ctx *ctx, const char *route, int status, double seconds) {
    if (ctx->openai) router_metrics_request(ctx->openai->metrics, route, status, seconds);
}

void router_openai_fini(router_ctx *ctx) {
    router_openai *a = ctx->openai;
    if (!a) return;
    for (oa_req *o = a->live; o; o = o->next)
        if (o->proxy) router_proxy_cancel(o->proxy);
    for (int i = 0; i < 500 && router_proxy_active() > 0; i++) usleep(10000);
    /* Hand over what the finished workers posted after the loop stopped, so those requests end and
     * are freed here rather than leaked. */
    llmr_loop_drain(ctx->loop);
    for (int i = 0; i < TEMPLATE_CACHE_SIZE; i++) template_entry_clear(&a->templates[i]);
    router_balancer_destroy(a->bal);
    router_metrics_destroy(a->metrics);
    if (!router_proxy_active()) llmr_httpc_destroy(a->http);
    free(a);
    ctx->openai = NULL;
}
