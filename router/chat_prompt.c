/* chat_prompt.c — template selection and the OpenAI request -> template context mapping. */
#include "router/chat_prompt.h"

#include <stdio.h>
#include <string.h>

/* ChatML: what transformers used as its default_chat_template before templates became mandatory. */
static const char DEFAULT_TEMPLATE[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char *chat_prompt_default_template(void) { return DEFAULT_TEMPLATE; }

const char *chat_template_source_name(chat_template_source s) {
    switch (s) {
    case CHAT_TEMPLATE_OVERRIDE: return "override";
    case CHAT_TEMPLATE_JINJA_FILE: return "chat_template.jinja";
    case CHAT_TEMPLATE_TOKENIZER_CONFIG: return "tokenizer_config.json chat_template";
    case CHAT_TEMPLATE_DEFAULT: return "default (ChatML)";
    default: return "unknown";
    }
}

static const char *named_template(json_t *list, const char *name) {
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *t = json_string_value(json_object_get(e, "template"));
        if (n && t && !strcmp(n, name)) return t;
    }
    return NULL;
}

const char *chat_prompt_select_template(const char *override, const char *jinja_file, json_t *tokenizer_config,
                                        int want_tool_use, chat_template_source *src) {
    chat_template_source s = CHAT_TEMPLATE_DEFAULT;
    const char *t = NULL;
    if (override && *override) { t = override; s = CHAT_TEMPLATE_OVERRIDE; }
    else if (jinja_file && *jinja_file) { t = jinja_file; s = CHAT_TEMPLATE_JINJA_FILE; }
    else if (tokenizer_config) {
        json_t *ct = json_object_get(tokenizer_config, "chat_template");
        if (json_is_string(ct) && json_string_length(ct)) t = json_string_value(ct);
        else if (json_is_array(ct)) {
            if (want_tool_use) t = named_template(ct, "tool_use");
            if (!t) t = named_template(ct, "default");
        }
        if (t) s = CHAT_TEMPLATE_TOKENIZER_CONFIG;
    }
    if (!t) t = DEFAULT_TEMPLATE;
    if (src) *src = s;
    return t;
}

int chat_prompt_context_defaults(json_t *ctx) {
    if (!json_is_object(ctx)) return -1;
    if (!json_object_get(ctx, "add_generation_prompt")) json_object_set_new(ctx, "add_generation_prompt", json_false());
    if (!json_object_get(ctx, "tools")) json_object_set_new(ctx, "tools", json_null());
    if (!json_object_get(ctx, "documents")) json_object_set_new(ctx, "documents", json_null());
    return 0;
}

static void errf(char *err, size_t n, const char *fmt, const char *a, size_t i) {
    if (err && n) snprintf(err, n, fmt, i, a);
}

/* Flattens an array of content parts into one string (text parts joined by "\n"). */
static json_t *flatten_parts(json_t *parts, size_t mi, char *err, size_t err_size) {
    size_t cap = 256, n = 0, i;
    char *buf = malloc(cap);
    json_t *p;
    int first = 1;
    if (!buf) { errf(err, err_size, "messages[%zu]%s: out of memory", "", mi); return NULL; }
    json_array_foreach(parts, i, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, "text");
        if (json_is_string(p)) text = p;
        else if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            errf(err, err_size, "messages[%zu].content: part of type '%s' is not supported (only text parts)",
                 type ? type : "?", mi);
            free(buf);
            return NULL;
        }
        size_t len = json_string_length(text);
        if (n + len + 2 > cap) {
            while (n + len + 2 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); errf(err, err_size, "messages[%zu]%s: out of memory", "", mi); return NULL; }
            buf = nb;
        }
        if (!first) buf[n++] = '\n';
        memcpy(buf + n, json_string_value(text), len);
        n += len;
        first = 0;
    }
    json_t *s = json_stringn(buf, n);
    free(buf);
    if (!s) errf(err, err_size, "messages[%zu].content%s: text parts are not valid UTF-8", "", mi);
    return s;
}

static int map_tool_calls(json_t *msg) {
    json_t *calls = json_object_get(msg, "tool_calls");
    if (!json_is_array(calls)) return 0;
    json_t *copy = json_deep_copy(calls);
    if (!copy) return -1;
    size_t i;
    json_t *c;
    json_array_foreach(copy, i, c) {
        json_t *fn = json_object_get(c, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_t *parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
            if (parsed) json_object_set_new(fn, "arguments", parsed);
        }
    }
    return json_object_set_new(msg, "tool_calls", copy);
}

static json_t *map_message(json_t *in, size_t i, char *err, size_t err_size) {
    if (!json_is_object(in)) { errf(err, err_size, "messages[%zu]%s: expected an object", "", i); return NULL; }
    if (!json_is_string(json_object_get(in, "role"))) { errf(err, err_size, "messages[%zu].role%s: expected a string", "", i); return NULL; }
    json_t *m = json_copy(in);
    if (!m) { errf(err, err_size, "messages[%zu]%s: out of memory", "", i); return NULL; }
    json_t *content = json_object_get(m, "content");
    if (content) {
        if (json_is_null(content)) json_object_set_new(m, "content", json_string(""));
        else if (json_is_array(content)) {
            json_t *flat = flatten_parts(content, i, err, err_size);
            if (!flat) { json_decref(m); return NULL; }
            json_object_set_new(m, "content", flat);
        } else if (!json_is_string(content)) {
            errf(err, err_size, "messages[%zu].content%s: expected a string, null or an array of parts", "", i);
            json_decref(m);
            return NULL;
        }
    }
    if (!json_object_get(m, "thinking")) {
        json_t *r = json_object_get(m, "reasoning");
        if (!json_is_string(r)) r = json_object_get(m, "reasoning_content");
        if (json_is_string(r)) json_object_set(m, "thinking", r);
    }
    if (map_tool_calls(m) != 0) { errf(err, err_size, "messages[%zu].tool_calls%s: out of memory", "", i); json_decref(m); return NULL; }
    return m;
}

static json_t *token_string(json_t *cfg, const char *key) {
    json_t *t = json_object_get(cfg, key);
    if (json_is_object(t)) t = json_object_get(t, "content");
    return json_is_string(t) ? t : NULL;
}

json_t *chat_prompt_build_context(json_t *request, json_t *tokenizer_config, char *err, size_t err_size) {
    if (err && err_size) err[0] = 0;
    if (!json_is_object(request)) { if (err && err_size) snprintf(err, err_size, "request: expected a JSON object"); return NULL; }
    json_t *msgs = json_object_get(request, "messages");
    if (!json_is_array(msgs)) { if (err && err_size) snprintf(err, err_size, "messages: expected an array"); return NULL; }
    json_t *ctx = json_object(), *out = json_array();
    if (!ctx || !out) { json_decref(ctx); json_decref(out); if (err && err_size) snprintf(err, err_size, "out of memory"); return NULL; }
    json_object_set_new(ctx, "messages", out);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *mm = map_message(m, i, err, err_size);
        if (!mm) { json_decref(ctx); return NULL; }
        json_array_append_new(out, mm);
    }
    json_t *tools = json_object_get(request, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        if (err && err_size) snprintf(err, err_size, "tools: expected an array");
        json_decref(ctx);
        return NULL;
    }
    json_object_set(ctx, "tools", tools && json_array_size(tools) ? tools : json_null());
    json_t *agp = json_object_get(request, "add_generation_prompt");
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(json_is_boolean(agp) ? json_is_true(agp) : 1));
    json_t *effort = json_object_get(request, "reasoning_effort");
    if (!json_is_string(effort)) effort = json_object_get(json_object_get(request, "reasoning"), "effort");
    if (json_is_string(effort)) json_object_set(ctx, "reasoning_effort", effort);
    json_t *bos = token_string(tokenizer_config, "bos_token"), *eos = token_string(tokenizer_config, "eos_token");
    if (bos) json_object_set(ctx, "bos_token", bos);
    if (eos) json_object_set(ctx, "eos_token", eos);
    json_t *kw = json_object_get(request, "chat_template_kwargs");
    if (json_is_object(kw)) {
        const char *k;
        json_t *v;
        json_object_foreach(kw, k, v) if (strcmp(k, "messages") != 0) json_object_set(ctx, k, v);
    }
    chat_prompt_context_defaults(ctx);
    return ctx;
}

int chat_prompt_check_template(const char *src, size_t len, jinja_pos *pos, char *err, size_t err_size) {
    int st = JINJA_OK;
    jinja_template *t = jinja_parse(src, len, NULL, &st, pos, err, err_size);
    jinja_destroy(t);
    return t ? JINJA_OK : st;
}

int chat_prompt_render(const jinja_template *t, json_t *request, json_t *tokenizer_config,
                       const jinja_render_opts *opts, char **out, size_t *out_len, char *err, size_t err_size) {
    if (out) *out = NULL;
    json_t *ctx = chat_prompt_build_context(request, tokenizer_config, err, err_size);
    if (!ctx) return JINJA_EINVAL;
    int st = jinja_render(t, ctx, opts, out, out_len, err, err_size);
    json_decref(ctx);
    return st;
}

int chat_prompt_http_status(int jinja_status) {
    switch (jinja_status) {
    case JINJA_OK: return 200;
    case JINJA_ENOMEM: return 500;
    default: return 400;
    }
}
