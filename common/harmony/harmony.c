/* harmony.c — the harmony output state machine (see harmony.h for the grammar and mapping). */
#include "common/harmony/harmony.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct { char *p; size_t n, cap; } hbuf;

static bool hb_put(hbuf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p; b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}
static void hb_free(hbuf *b) { free(b->p); memset(b, 0, sizeof *b); }
static const char *hb_str(const hbuf *b) { return b->p ? b->p : ""; }

enum { ST_OUTSIDE, ST_HEADER, ST_BODY };
enum { K_CONTENT, K_REASONING, K_TOOL };

typedef struct { char *id, *name; hbuf args; } htool;

struct harmony_parser {
    harmony_opts o;
    int state;
    hbuf part[3];            /* header text: role part, channel part, constrain part */
    int hpart;
    int kind;                /* body kind */
    hbuf pend;               /* held-back bytes of an unfinished UTF-8 character */
    hbuf content, reasoning;
    htool *tools; size_t ntools, cap;
    hbuf out;                /* the text of the current delta */
    const char *finish;
    const char *stop_reason; /* reason of the stop token seen, if any */
    unsigned long id_counter;
};

void harmony_opts_default(harmony_opts *o) {
    memset(o, 0, sizeof *o);
    o->start = HARMONY_START; o->end = HARMONY_END; o->message = HARMONY_MESSAGE; o->channel = HARMONY_CHANNEL;
    o->constrain = HARMONY_CONSTRAIN; o->ret = HARMONY_RETURN; o->call = HARMONY_CALL; o->endoftext = HARMONY_ENDOFTEXT;
}

int harmony_is_stop(const harmony_opts *o, uint32_t id) {
    harmony_opts d;
    if (!o) { harmony_opts_default(&d); o = &d; }
    return id == o->ret || id == o->call || id == o->endoftext;
}

harmony_parser *harmony_create(const harmony_opts *opts) {
    harmony_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (opts) p->o = *opts; else harmony_opts_default(&p->o);
    p->state = p->o.start_outside ? ST_OUTSIDE : ST_HEADER;
    return p;
}

void harmony_destroy(harmony_parser *p) {
    if (!p) return;
    for (int i = 0; i < 3; i++) hb_free(&p->part[i]);
    hb_free(&p->pend); hb_free(&p->content); hb_free(&p->reasoning); hb_free(&p->out);
    for (size_t i = 0; i < p->ntools; i++) { free(p->tools[i].id); free(p->tools[i].name); hb_free(&p->tools[i].args); }
    free(p->tools);
    free(p);
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */
static int seq_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
}

/* Appends the complete, valid characters of pend+s to out (invalid bytes -> U+FFFD) and keeps an
 * unfinished trailing character in pend (all of it when final is false). */
static bool utf8_take(hbuf *pend, const char *s, size_t n, hbuf *out, bool final) {
    if (!hb_put(pend, s, n)) return false;
    const unsigned char *u = (const unsigned char *)hb_str(pend);
    size_t len = pend->n, i = 0, run = 0;
    while (i < len) {
        int k = seq_len(u[i]);
        bool ok = k > 0;
        if (ok && i + (size_t)k > len) {
            /* an unfinished character at the end: keep it for the next piece (if still possible) */
            bool prefix_ok = true;
            for (size_t j = i + 1; j < len; j++) if ((u[j] & 0xC0) != 0x80) prefix_ok = false;
            if (prefix_ok && !final) break;
            ok = false;
        }
        for (int j = 1; ok && j < k; j++) if ((u[i + (size_t)j] & 0xC0) != 0x80) ok = false;
        if (ok && k == 3 && ((u[i] == 0xE0 && u[i + 1] < 0xA0) || (u[i] == 0xED && u[i + 1] >= 0xA0))) ok = false;
        if (ok && k == 4 && ((u[i] == 0xF0 && u[i + 1] < 0x90) || (u[i] == 0xF4 && u[i + 1] >= 0x90))) ok = false;
        if (ok) { i += (size_t)k; run += (size_t)k; continue; }
        if (run && !hb_put(out, u + i - run, run)) return false;
        run = 0;
        if (!hb_put(out, "\xEF\xBF\xBD", 3)) return false;
        i++;
    }
    if (run && !hb_put(out, u + i - run, run)) return false;
    memmove(pend->p, pend->p + i, len - i);
    pend->n = len - i;
    if (pend->p) pend->p[pend->n] = 0;
    return true;
}

/* ---- deltas --------------------------------------------------------------------------------- */
static void delta_none(harmony_delta *d) { memset(d, 0, sizeof *d); d->tool_index = -1; }

/* Routes text of the current body (or outside text) to its stream and fills d. */
static bool emit_text(harmony_parser *p, int kind, const char *s, size_t n, bool final, harmony_delta *d) {
    p->out.n = 0;
    if (!utf8_take(&p->pend, s, n, &p->out, final)) return false;
    if (!p->out.n) return true;
    hbuf *dst = kind == K_REASONING ? &p->reasoning : kind == K_TOOL ? &p->tools[p->ntools - 1].args : &p->content;
    if (!hb_put(dst, p->out.p, p->out.n)) return false;
    d->kind = kind == K_REASONING ? HARMONY_DELTA_REASONING : kind == K_TOOL ? HARMONY_DELTA_TOOL_ARGS : HARMONY_DELTA_CONTENT;
    d->text = p->out.p; d->len = p->out.n;
    if (kind == K_TOOL) {
        d->tool_index = (int)p->ntools - 1;
        d->tool_id = p->tools[p->ntools - 1].id;
        d->tool_name = p->tools[p->ntools - 1].name;
    }
    return true;
}

/* ---- header --------------------------------------------------------------------------------- */
/* Splits s on whitespace; calls back with each word. */
typedef struct { char role[128], recipient[256], channel[64], ctype[64]; } header;

static void copy_word(char *dst, size_t cap, const char *s, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static void parse_words(const char *s, int part, header *h) {
    size_t i = 0, n = strlen(s);
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        size_t j = i;
        while (j < n && !(s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r')) j++;
        if (j > i) {
            const char *w = s + i;
            size_t wl = j - i;
            if (wl > 3 && !memcmp(w, "to=", 3)) copy_word(h->recipient, sizeof h->recipient, w + 3, wl - 3);
            else if (part == 0 && !h->role[0]) copy_word(h->role, sizeof h->role, w, wl);
            else if (part == 1 && !h->channel[0]) copy_word(h->channel, sizeof h->channel, w, wl);
            else if (!h->ctype[0]) copy_word(h->ctype, sizeof h->ctype, w, wl);
        }
        i = j;
    }
}

static char *random_id(harmony_parser *p) {
    char *id;
    if (p->o.call_id_prefix) {
        size_t n = strlen(p->o.call_id_prefix) + 24;
        id = malloc(n);
        if (id) snprintf(id, n, "%s%zu", p->o.call_id_prefix, p->ntools);
        return id;
    }
    unsigned char r[12];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        unsigned long x = (unsigned long)time(NULL) ^ ((unsigned long)(uintptr_t)p << 16) ^ ++p->id_counter * 2654435761UL;
        for (size_t i = 0; i < sizeof r; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; r[i] = (unsigned char)(x >> 56); }
    }
    id = malloc(5 + 2 * sizeof r + 1);
    if (!id) return NULL;
    memcpy(id, "call_", 5);
    for (size_t i = 0; i < sizeof r; i++) snprintf(id + 5 + 2 * i, 3, "%02x", r[i]);
    return id;
}

/* <|message|> closes the header: decide where the body goes. */
static bool open_body(harmony_parser *p, harmony_delta *d) {
    header h;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < 3; i++) parse_words(hb_str(&p->part[i]), i, &h);
    for (int i = 0; i < 3; i++) p->part[i].n = 0;
    p->state = ST_BODY;
    p->pend.n = 0;
    bool tool = h.recipient[0] && strcmp(h.recipient, "assistant") != 0 && strcmp(h.recipient, "user") != 0;
    if (tool) {
        if (p->ntools == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 4;
            htool *t = realloc(p->tools, cap * sizeof *t);
            if (!t) return false;
            p->tools = t; p->cap = cap;
        }
        htool *t = &p->tools[p->ntools];
        memset(t, 0, sizeof *t);
        const char *name = h.recipient;
        if (!strncmp(name, "functions.", 10)) name += 10;
        /* the name comes from model output: make it valid UTF-8 before it reaches JSON */
        hbuf clean = {0}, pend = {0};
        bool ok = utf8_take(&pend, name, strlen(name), &clean, true);
        t->name = ok ? strdup(hb_str(&clean)) : NULL;
        hb_free(&clean);
        hb_free(&pend);
        t->id = random_id(p);
        if (!t->name || !t->id) { free(t->name); free(t->id); return false; }
        p->ntools++;
        p->kind = K_TOOL;
        d->kind = HARMONY_DELTA_TOOL_BEGIN;
        d->tool_index = (int)p->ntools - 1;
        d->tool_id = t->id; d->tool_name = t->name;
        d->text = ""; d->len = 0;
        return true;
    }
    p->kind = !strcmp(h.channel, "analysis") ? K_REASONING : K_CONTENT;
    return true;
}

/* Header text that turned out not to be a header (no <|message|> came): give it to content. */
static bool header_to_content(harmony_parser *p, harmony_delta *d, const char *more, size_t more_len, bool final) {
    hbuf all = {0};
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) ok = hb_put(&all, hb_str(&p->part[i]), p->part[i].n);
    if (ok) ok = hb_put(&all, more, more_len);
    for (int i = 0; i < 3; i++) p->part[i].n = 0;
    p->state = ST_OUTSIDE;
    p->pend.n = 0;
    if (ok) ok = emit_text(p, K_CONTENT, hb_str(&all), all.n, final, d);
    hb_free(&all);
    return ok;
}

static bool looks_like_text(const hbuf *role) {
    /* a header's role part is a role and/or "to=..." on one short line */
    return memchr(hb_str(role), '\n', role->n) != NULL || role->n > 256;
}

/* ---- push ----------------------------------------------------------------------------------- */
static bool end_body(harmony_parser *p, harmony_delta *d) {
    bool ok = true;
    if (p->state == ST_BODY && p->pend.n) ok = emit_text(p, p->kind, "", 0, true, d);
    if (p->state == ST_HEADER) for (int i = 0; i < 3; i++) p->part[i].n = 0;
    p->state = ST_OUTSIDE;
    p->pend.n = 0;
    return ok;
}

int harmony_push(harmony_parser *p, uint32_t id, const char *piece, size_t len, harmony_delta *d) {
    harmony_delta dummy;
    if (!d) d = &dummy;
    delta_none(d);
    if (!piece) len = 0;
    const harmony_opts *o = &p->o;
    if (id == o->start) {
        if (!end_body(p, d)) return -1;
        p->state = ST_HEADER; p->hpart = 0;
        return 0;
    }
    if (id == o->channel || id == o->constrain) {
        if (p->state != ST_HEADER) {
            if (id == o->constrain) return 0;
            if (!end_body(p, d)) return -1;
            p->state = ST_HEADER;
        }
        p->hpart = id == o->channel ? 1 : 2;
        return 0;
    }
    if (id == o->message) {
        if (p->state == ST_HEADER) return open_body(p, d) ? 0 : -1;
        return 0;
    }
    if (id == o->end) return end_body(p, d) ? 0 : -1;
    if (id == o->ret || id == o->call || id == o->endoftext) {
        if (!end_body(p, d)) return -1;
        p->stop_reason = id == o->call ? "tool_calls" : "stop";
        return 1;
    }
    /* ordinary text */
    switch (p->state) {
    case ST_HEADER: {
        hbuf *part = &p->part[p->hpart];
        if (!hb_put(part, piece, len)) return -1;
        if (p->hpart == 0 && looks_like_text(part)) return header_to_content(p, d, "", 0, false) ? 0 : -1;
        if (p->part[1].n > 256 || p->part[2].n > 256) return header_to_content(p, d, "", 0, false) ? 0 : -1;
        return 0;
    }
    case ST_BODY: return emit_text(p, p->kind, piece, len, false, d) ? 0 : -1;
    default: return emit_text(p, K_CONTENT, piece, len, false, d) ? 0 : -1;
    }
}

harmony_delta_kind harmony_text_kind(const harmony_parser *p) {
    if (p->state == ST_HEADER) return HARMONY_DELTA_NONE;
    if (p->state != ST_BODY) return HARMONY_DELTA_CONTENT;
    return p->kind == K_REASONING ? HARMONY_DELTA_REASONING : p->kind == K_TOOL ? HARMONY_DELTA_TOOL_ARGS : HARMONY_DELTA_CONTENT;
}

int harmony_finish(harmony_parser *p, int hit_length, harmony_delta *d) {
    harmony_delta dummy;
    if (!d) d = &dummy;
    delta_none(d);
    bool ok = true;
    if (p->state == ST_HEADER) {
        /* an unfinished header: keep its role-part text if it is not header syntax */
        const char *role = hb_str(&p->part[0]);
        size_t k = 0;
        while (role[k] == ' ') k++;
        /* a header cut short looks like " to=functions.x" (one word, no channel yet); anything else
         * is text from a model that does not follow the format: keep it */
        bool headerish = p->part[1].n || p->part[2].n || (!strncmp(role + k, "to=", 3) && !strpbrk(role + k, " \t"));
        if (!headerish && role[k]) ok = header_to_content(p, d, "", 0, true);
        else for (int i = 0; i < 3; i++) p->part[i].n = 0;
    } else if (p->pend.n) ok = emit_text(p, p->state == ST_BODY ? p->kind : K_CONTENT, "", 0, true, d);
    p->state = ST_OUTSIDE;
    p->finish = hit_length ? "length" : p->stop_reason ? p->stop_reason : p->ntools ? "tool_calls" : "stop";
    return ok ? 0 : -1;
}

const char *harmony_finish_reason(const harmony_parser *p) {
    return p->finish ? p->finish : p->stop_reason;
}

const char *harmony_content(const harmony_parser *p, size_t *len) { if (len) *len = p->content.n; return hb_str(&p->content); }
const char *harmony_reasoning(const harmony_parser *p, size_t *len) { if (len) *len = p->reasoning.n; return hb_str(&p->reasoning); }
size_t harmony_tool_call_count(const harmony_parser *p) { return p->ntools; }

int harmony_tool_call(const harmony_parser *p, size_t i, const char **id, const char **name, const char **args, size_t *args_len) {
    if (i >= p->ntools) return -1;
    if (id) *id = p->tools[i].id;
    if (name) *name = p->tools[i].name;
    if (args) *args = hb_str(&p->tools[i].args);
    if (args_len) *args_len = p->tools[i].args.n;
    return 0;
}

/* ---- JSON ----------------------------------------------------------------------------------- */
json_t *harmony_message_json(const harmony_parser *p) {
    json_t *m = json_object();
    if (!m) return NULL;
    json_object_set_new(m, "role", json_string("assistant"));
    if (p->content.n || !p->ntools) json_object_set_new(m, "content", json_stringn(hb_str(&p->content), p->content.n));
    else json_object_set_new(m, "content", json_null());
    if (p->reasoning.n) {
        json_object_set_new(m, "reasoning", json_stringn(hb_str(&p->reasoning), p->reasoning.n));
        json_object_set_new(m, "reasoning_content", json_stringn(hb_str(&p->reasoning), p->reasoning.n));
    }
    if (p->ntools) {
        json_t *calls = json_array();
        for (size_t i = 0; i < p->ntools; i++) {
            json_t *fn = json_pack("{s:s, s:s%}", "name", p->tools[i].name, "arguments", hb_str(&p->tools[i].args), p->tools[i].args.n);
            json_array_append_new(calls, json_pack("{s:s, s:s, s:o}", "id", p->tools[i].id, "type", "function", "function", fn));
        }
        json_object_set_new(m, "tool_calls", calls);
    }
    return m;
}

json_t *harmony_delta_json(const harmony_delta *d) {
    switch (d->kind) {
    case HARMONY_DELTA_REASONING:
        return json_pack("{s:s%, s:s%}", "reasoning", d->text, d->len, "reasoning_content", d->text, d->len);
    case HARMONY_DELTA_CONTENT:
        return json_pack("{s:s%}", "content", d->text, d->len);
    case HARMONY_DELTA_TOOL_BEGIN:
        return json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", d->tool_index, "id", d->tool_id,
                         "type", "function", "function", "name", d->tool_name, "arguments", "");
    case HARMONY_DELTA_TOOL_ARGS:
        return json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", d->tool_index, "function", "arguments", d->text, d->len);
    default:
        return NULL;
    }
}
