/* Unit tests for the harmony output parser (common/harmony/harmony.h).
 *
 * Inputs: hand-written model outputs, OpenAI harmony's reference renders (tests/data/templates/
 * harmony/, origin in ORIGIN.md there) cut into tokens by a tiny splitter (special tokens -> ids,
 * text -> 1..3-byte pieces, so UTF-8 characters are cut across tokens), and the two token-id files
 * decoded with the real gpt-oss tokenizer.json from the fixture cache (skipped when absent). */
#include "common/harmony/harmony.h"
#include "tests/unit/testutil.h"

#include <stdbool.h>
#include <unistd.h>

static const struct { const char *s; uint32_t id; } SPECIALS[] = {
    { "<|start|>", HARMONY_START }, { "<|end|>", HARMONY_END }, { "<|message|>", HARMONY_MESSAGE },
    { "<|channel|>", HARMONY_CHANNEL }, { "<|constrain|>", HARMONY_CONSTRAIN }, { "<|return|>", HARMONY_RETURN },
    { "<|call|>", HARMONY_CALL }, { "<|endoftext|>", HARMONY_ENDOFTEXT },
};

typedef struct { char content[4096], reasoning[4096], args[4096]; int stops, begins, deltas; bool split_utf8; } seen;

static void collect(const harmony_delta *d, seen *s) {
    if (d->kind == HARMONY_DELTA_NONE) return;
    s->deltas++;
    /* a delta never ends inside a UTF-8 character */
    if (d->len) {
        unsigned char last = (unsigned char)d->text[d->len - 1];
        size_t k = d->len;
        while (k > 0 && ((unsigned char)d->text[k - 1] & 0xC0) == 0x80) k--;
        if (last >= 0x80 && k > 0) {
            unsigned char lead = (unsigned char)d->text[k - 1];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            if (d->len - (k - 1) != need) s->split_utf8 = true;
        }
    }
    char *dst = d->kind == HARMONY_DELTA_CONTENT ? s->content : d->kind == HARMONY_DELTA_REASONING ? s->reasoning
              : d->kind == HARMONY_DELTA_TOOL_ARGS ? s->args : NULL;
    if (d->kind == HARMONY_DELTA_TOOL_BEGIN) s->begins++;
    if (dst) strncat(dst, d->text, d->len);
}

/* Feeds text with special tokens spelled out; pieces of text are cut every `cut` bytes. */
static harmony_parser *feed(const char *text, int cut, bool start_outside, seen *s) {
    harmony_opts o;
    harmony_opts_default(&o);
    o.start_outside = start_outside;
    o.call_id_prefix = "call_";
    harmony_parser *p = harmony_create(&o);
    ck_assert_ptr_nonnull(p);
    memset(s, 0, sizeof *s);
    const char *t = text;
    while (*t) {
        bool special = false;
        for (size_t k = 0; k < sizeof SPECIALS / sizeof *SPECIALS; k++) {
            size_t n = strlen(SPECIALS[k].s);
            if (!strncmp(t, SPECIALS[k].s, n)) {
                harmony_delta d;
                int rc = harmony_push(p, SPECIALS[k].id, SPECIALS[k].s, n, &d);
                ck_assert_int_ge(rc, 0);
                s->stops += rc;
                collect(&d, s);
                t += n;
                special = true;
                break;
            }
        }
        if (special) continue;
        size_t n = 0;
        while (t[n] && n < (size_t)cut && t[n] != '<') n++;
        if (!n) n = 1;
        harmony_delta d;
        ck_assert_int_eq(harmony_push(p, 1000, t, n, &d), 0);
        collect(&d, s);
        t += n;
    }
    return p;
}

static void finish(harmony_parser *p, int hit_length, seen *s) {
    harmony_delta d;
    ck_assert_int_eq(harmony_finish(p, hit_length, &d), 0);
    collect(&d, s);
}

START_TEST(reasoning_then_final) {
    seen s;
    for (int cut = 1; cut <= 7; cut++) {
        harmony_parser *p = feed("<|channel|>analysis<|message|>Think é→🙂 hard.<|end|><|start|>assistant<|channel|>final<|message|>Bonjour à toi.<|return|>", cut, false, &s);
        finish(p, 0, &s);
        ck_assert_str_eq(s.reasoning, "Think é→🙂 hard.");
        ck_assert_str_eq(s.content, "Bonjour à toi.");
        ck_assert(!s.split_utf8);
        ck_assert_int_eq(s.stops, 1);   /* <|end|> is not a stop; <|return|> is */
        ck_assert_str_eq(harmony_finish_reason(p), "stop");
        size_t n;
        ck_assert_str_eq(harmony_content(p, &n), "Bonjour à toi.");
        ck_assert_str_eq(harmony_reasoning(p, NULL), "Think é→🙂 hard.");
        ck_assert_uint_eq(harmony_tool_call_count(p), 0);
        harmony_destroy(p);
    }
}
END_TEST

START_TEST(tool_call_recipient_in_channel) {
    seen s;
    harmony_parser *p = feed("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Tokyo\"}<|call|>", 3, false, &s);
    finish(p, 0, &s);
    ck_assert_str_eq(s.reasoning, "Need weather.");
    ck_assert_str_eq(s.content, "");
    ck_assert_int_eq(s.begins, 1);
    ck_assert_str_eq(s.args, "{\"city\": \"Tokyo\"}");
    ck_assert_str_eq(harmony_finish_reason(p), "tool_calls");
    const char *id, *name, *args;
    size_t alen;
    ck_assert_int_eq(harmony_tool_call(p, 0, &id, &name, &args, &alen), 0);
    ck_assert_str_eq(name, "get_weather");
    ck_assert_str_eq(id, "call_0");
    ck_assert_str_eq(args, "{\"city\": \"Tokyo\"}");
    ck_assert_int_eq(harmony_tool_call(p, 1, &id, &name, &args, &alen), -1);
    json_t *m = harmony_message_json(p);
    ck_assert(json_is_null(json_object_get(m, "content")));
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning")), "Need weather.");
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "Need weather.");
    json_t *c0 = json_array_get(json_object_get(m, "tool_calls"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c0, "type")), "function");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "function"), "name")), "get_weather");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "function"), "arguments")), "{\"city\": \"Tokyo\"}");
    json_decref(m);
    harmony_destroy(p);
}
END_TEST

START_TEST(tool_call_recipient_in_role) {
    /* the HF template's own spelling: recipient in the role part, plain "json" content type */
    seen s;
    harmony_parser *p = feed(" to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}<|call|>", 2, false, &s);
    finish(p, 0, &s);
    ck_assert_int_eq(s.begins, 1);
    ck_assert_str_eq(s.args, "{\"q\": 1}");
    const char *name;
    ck_assert_int_eq(harmony_tool_call(p, 0, NULL, &name, NULL, NULL), 0);
    ck_assert_str_eq(name, "lookup");
    ck_assert_str_eq(harmony_finish_reason(p), "tool_calls");
    harmony_destroy(p);
    /* random ids by default */
    harmony_parser *q = harmony_create(NULL);
    harmony_delta d;
    harmony_push(q, HARMONY_CHANNEL, "", 0, &d);
    harmony_push(q, 1, "commentary to=functions.f", 25, &d);
    ck_assert_int_eq(harmony_push(q, HARMONY_MESSAGE, "", 0, &d), 0);
    ck_assert_int_eq(d.kind, HARMONY_DELTA_TOOL_BEGIN);
    ck_assert_int_eq(strlen(d.tool_id), 29);
    ck_assert(!strncmp(d.tool_id, "call_", 5));
    json_t *j = harmony_delta_json(&d);
    json_t *tc = json_array_get(json_object_get(j, "tool_calls"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(tc, "index")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(tc, "function"), "name")), "f");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")), "");
    json_decref(j);
    harmony_destroy(q);
}
END_TEST

START_TEST(text_outside_messages_is_content) {
    seen s;
    /* a model that ignores the format: everything must reach content */
    harmony_parser *p = feed("Hello there,\nplain text é.", 2, false, &s);
    finish(p, 0, &s);
    ck_assert_str_eq(s.content, "Hello there,\nplain text é.");
    ck_assert_str_eq(harmony_finish_reason(p), "stop");
    harmony_destroy(p);
    p = feed("send it to=me", 2, false, &s);
    finish(p, 0, &s);
    ck_assert_str_eq(s.content, "send it to=me");
    harmony_destroy(p);
    p = feed(" to=functions.cut_by_length", 2, false, &s);
    finish(p, 1, &s);
    ck_assert_str_eq(s.content, "");
    harmony_destroy(p);
    p = feed("short", 2, false, &s);
    finish(p, 1, &s);
    ck_assert_str_eq(s.content, "short");
    ck_assert_str_eq(harmony_finish_reason(p), "length");
    harmony_destroy(p);
    /* text after a finished message, outside any header */
    p = feed("<|channel|>final<|message|>A<|end|> stray", 3, false, &s);
    finish(p, 0, &s);
    ck_assert_str_eq(s.content, "A stray");
    harmony_destroy(p);
    /* commentary without recipient = preamble, visible */
    p = feed("<|channel|>commentary<|message|>Let me check.<|end|>", 4, false, &s);
    finish(p, 1, &s);
    ck_assert_str_eq(s.content, "Let me check.");
    ck_assert_str_eq(harmony_finish_reason(p), "length");
    harmony_destroy(p);
}
END_TEST

START_TEST(invalid_utf8_and_deltas) {
    harmony_parser *p = harmony_create(NULL);
    harmony_delta d;
    harmony_push(p, HARMONY_CHANNEL, NULL, 0, &d);
    harmony_push(p, 2, "final", 5, &d);
    harmony_push(p, HARMONY_MESSAGE, NULL, 0, &d);
    ck_assert_int_eq(harmony_push(p, 3, "a\xC3", 2, &d), 0);   /* é cut in two */
    ck_assert_int_eq(d.kind, HARMONY_DELTA_CONTENT);
    ck_assert_uint_eq(d.len, 1);
    ck_assert_int_eq(harmony_push(p, 4, "\xA9", 1, &d), 0);
    ck_assert_uint_eq(d.len, 2);
    ck_assert(!memcmp(d.text, "\xC3\xA9", 2));
    json_t *j = harmony_delta_json(&d);
    ck_assert_str_eq(json_string_value(json_object_get(j, "content")), "é");
    json_decref(j);
    ck_assert_int_eq(harmony_push(p, 5, "\xFF" "b", 2, &d), 0);   /* invalid byte -> U+FFFD */
    ck_assert(!memcmp(d.text, "\xEF\xBF\xBD" "b", 4));
    ck_assert_int_eq(harmony_push(p, 6, "\xE2\x82", 2, &d), 0);   /* cut at the end of the stream */
    ck_assert_int_eq(d.kind, HARMONY_DELTA_NONE);
    ck_assert_int_eq(harmony_finish(p, 1, &d), 0);
    ck_assert(!memcmp(d.text, "\xEF\xBF\xBD", 3));
    json_t *m = harmony_message_json(p);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(m, "content")));
    ck_assert_ptr_null(json_object_get(m, "reasoning"));
    json_decref(m);
    harmony_destroy(p);
    harmony_delta r = { .kind = HARMONY_DELTA_REASONING, .text = "x", .len = 1 };
    j = harmony_delta_json(&r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "reasoning")), "x");
    ck_assert_str_eq(json_string_value(json_object_get(j, "reasoning_content")), "x");
    json_decref(j);
    harmony_destroy(NULL);
    ck_assert(harmony_is_stop(NULL, HARMONY_RETURN) && harmony_is_stop(NULL, HARMONY_CALL) && harmony_is_stop(NULL, HARMONY_ENDOFTEXT));
    ck_assert(!harmony_is_stop(NULL, HARMONY_END) && !harmony_is_stop(NULL, 35644));
    /* a tool name that is not valid UTF-8 (model output) still gives valid JSON (found by fuzz_harmony) */
    p = harmony_create(NULL);
    harmony_push(p, 1, " to=\xff\xfe", 7, &d);
    ck_assert_int_eq(harmony_push(p, HARMONY_MESSAGE, NULL, 0, &d), 0);
    ck_assert_int_eq(d.kind, HARMONY_DELTA_TOOL_BEGIN);
    ck_assert_str_eq(d.tool_name, "\xEF\xBF\xBD\xEF\xBF\xBD");
    j = harmony_delta_json(&d);
    ck_assert_ptr_nonnull(j);
    json_decref(j);
    harmony_destroy(p);
}
END_TEST

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

START_TEST(reference_streamable_parser_file) {
    char *t = slurp("tests/data/templates/harmony/test_streamable_parser.txt");
    if (!t) LLMR_SKIP("tests/data/templates/harmony not found (run from the repository root)");
    seen s;
    harmony_parser *p = feed(t, 3, false, &s);
    finish(p, 0, &s);
    ck_assert(!strncmp(s.reasoning, "User asks \"Who is the current US president?\"", 44));
    ck_assert_ptr_nonnull(strstr(s.reasoning, "Let's browse to confirm."));
    const char *name, *args;
    ck_assert_int_eq(harmony_tool_call(p, 0, NULL, &name, &args, NULL), 0);
    ck_assert_str_eq(name, "browser.search");
    ck_assert_str_eq(args, "{\"query\": \"current US president July 2025\", \"topn\": 10, \"source\": \"news\"}");
    ck_assert_str_eq(harmony_finish_reason(p), "tool_calls");
    harmony_destroy(p);
}
END_TEST

/* GPT-2 byte-level decoding of a tokenizer.json vocab entry. */
static size_t bytelevel_decode(const char *s, char *out) {
    size_t n = 0;
    for (size_t i = 0; s[i];) {
        unsigned c = (unsigned char)s[i];
        unsigned cp;
        if (c < 0x80) { cp = c; i++; }
        else if (c < 0xE0) { cp = ((c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F); i += 2; }
        else { cp = ((c & 0x0F) << 12) | (((unsigned char)s[i + 1] & 0x3F) << 6) | ((unsigned char)s[i + 2] & 0x3F); i += 3; }
        unsigned b;
        if ((cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) b = cp;
        else {   /* the 68 remapped bytes, in order, from U+0100 */
            unsigned k = cp - 0x100, seen_n = 0;
            b = 0;
            for (unsigned x = 0; x < 256; x++) {
                if ((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)) continue;
                if (seen_n++ == k) { b = x; break; }
            }
        }
        out[n++] = (char)b;
    }
    return n;
}

static void run_id_file(json_t *vocab_by_id, const char *file, const char *reasoning, const char *tool, const char *args, const char *content) {
    char *t = slurp(file);
    ck_assert_ptr_nonnull(t);
    harmony_parser *p = harmony_create(NULL);
    seen s;
    memset(&s, 0, sizeof s);
    for (char *tok = strtok(t, " \n"); tok; tok = strtok(NULL, " \n")) {
        uint32_t id = (uint32_t)strtoul(tok, NULL, 10);
        char piece[256];
        size_t n = 0;
        const char *v = json_string_value(json_array_get(vocab_by_id, id));
        if (v && id < 199998) n = bytelevel_decode(v, piece);
        harmony_delta d;
        int rc = harmony_push(p, id, piece, n, &d);
        ck_assert_int_ge(rc, 0);
        collect(&d, &s);
    }
    finish(p, 0, &s);
    ck_assert_str_eq(s.reasoning, reasoning);
    if (tool) {
        const char *name;
        ck_assert_int_eq(harmony_tool_call(p, 0, NULL, &name, NULL, NULL), 0);
        ck_assert_str_eq(name, tool);
        ck_assert_str_eq(s.args, args);
    }
    ck_assert_str_eq(s.content, content);
    harmony_destroy(p);
}

START_TEST(reference_token_id_files) {
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/tokenizer-gptoss/tokenizer.json", llmr_test_cache_dir());
    json_error_t je;
    json_t *tok = json_load_file(path, 0, &je);
    if (!tok) LLMR_SKIP("real tokenizer not cached (%s): run make deps", path);
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    json_t *by_id = json_array();
    for (size_t i = 0; i < 201088; i++) json_array_append_new(by_id, json_null());
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) json_array_set_new(by_id, (size_t)json_integer_value(v), json_string(k));
    if (!access("tests/data/templates/harmony/test_simple_reasoning_response.txt", R_OK)) {
        run_id_file(by_id, "tests/data/templates/harmony/test_simple_reasoning_response.txt",
                    "User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.", NULL, NULL, "2 + 2 = 4.");
        run_id_file(by_id, "tests/data/templates/harmony/test_simple_tool_call.txt",
                    "User asks: \"What is the weather in Tokyo?\" We need to use lookup_weather tool.", "lookup_weather",
                    "{\"location\": \"Tokyo\"}", "");
    }
    json_decref(by_id);
    json_decref(tok);
}
END_TEST

static Suite *harmony_suite(void) {
    Suite *s = suite_create("harmony");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reasoning_then_final);
    tcase_add_test(tc, tool_call_recipient_in_channel);
    tcase_add_test(tc, tool_call_recipient_in_role);
    tcase_add_test(tc, text_outside_messages_is_content);
    tcase_add_test(tc, invalid_utf8_and_deltas);
    tcase_add_test(tc, reference_streamable_parser_file);
    tcase_add_test(tc, reference_token_id_files);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(harmony_suite)
