/* Unit tests for router/chat_prompt.h: template selection order and the OpenAI request -> template
 * context mapping, end to end with the real gpt-oss template (tests/data/templates/llama.cpp/). */
#include "router/chat_prompt.h"
#include "tests/unit/testutil.h"

#define GPTOSS "tests/data/templates/llama.cpp/openai-gpt-oss-120b.jinja"

static json_t *J(const char *s) {
    json_error_t e;
    json_t *j = json_loads(s, JSON_DECODE_INT_AS_REAL, &e);
    ck_assert_msg(j != NULL, "bad JSON in test: %s", e.text);
    return j;
}

START_TEST(selection_order) {
    chat_template_source src;
    json_t *cfg = J("{\"chat_template\": \"CFG\"}");
    ck_assert_str_eq(chat_prompt_select_template("OVR", "FILE", cfg, 0, &src), "OVR");
    ck_assert_int_eq(src, CHAT_TEMPLATE_OVERRIDE);
    ck_assert_str_eq(chat_prompt_select_template(NULL, "FILE", cfg, 0, &src), "FILE");
    ck_assert_int_eq(src, CHAT_TEMPLATE_JINJA_FILE);
    ck_assert_str_eq(chat_prompt_select_template("", "", cfg, 0, &src), "CFG");
    ck_assert_int_eq(src, CHAT_TEMPLATE_TOKENIZER_CONFIG);
    ck_assert_str_eq(chat_prompt_select_template(NULL, NULL, NULL, 0, &src), chat_prompt_default_template());
    ck_assert_int_eq(src, CHAT_TEMPLATE_DEFAULT);
    json_decref(cfg);
    cfg = J("{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, {\"name\": \"tool_use\", \"template\": \"T\"}]}");
    ck_assert_str_eq(chat_prompt_select_template(NULL, NULL, cfg, 0, &src), "D");
    ck_assert_str_eq(chat_prompt_select_template(NULL, NULL, cfg, 1, &src), "T");
    json_decref(cfg);
    cfg = J("{\"bos_token\": \"<s>\"}");   /* no chat_template at all */
    ck_assert_str_eq(chat_prompt_select_template(NULL, NULL, cfg, 0, &src), chat_prompt_default_template());
    ck_assert_str_eq(chat_template_source_name(src), "default (ChatML)");
    json_decref(cfg);
}
END_TEST

START_TEST(context_mapping) {
    json_t *req = J("{\"model\": \"m\", \"reasoning\": {\"effort\": \"high\"}, \"messages\": ["
                    "{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]},"
                    "{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"why\","
                    " \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}},"
                    "                {\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"not json\"}}]},"
                    "{\"role\": \"assistant\", \"content\": \"ok\", \"reasoning\": \"r2\"}],"
                    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}");
    json_t *cfg = J("{\"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}, \"eos_token\": \"</s>\", \"model_max_length\": 1000000000000000019884624838656}");
    char err[256];
    json_t *ctx = chat_prompt_build_context(req, cfg, err, sizeof err);
    ck_assert_msg(ctx != NULL, "%s", err);
    json_t *m = json_object_get(ctx, "messages");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "content")), "a\nb");
    json_t *a1 = json_array_get(m, 1);
    ck_assert_str_eq(json_string_value(json_object_get(a1, "content")), "");
    ck_assert_str_eq(json_string_value(json_object_get(a1, "thinking")), "why");
    json_t *args = json_object_get(json_object_get(json_array_get(json_object_get(a1, "tool_calls"), 0), "function"), "arguments");
    ck_assert(json_is_object(args));
    ck_assert_int_eq(json_integer_value(json_object_get(args, "x")), 1);
    args = json_object_get(json_object_get(json_array_get(json_object_get(a1, "tool_calls"), 1), "function"), "arguments");
    ck_assert_str_eq(json_string_value(args), "not json");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 2), "thinking")), "r2");
    ck_assert(json_is_true(json_object_get(ctx, "add_generation_prompt")));
    ck_assert(json_is_array(json_object_get(ctx, "tools")));
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "reasoning_effort")), "high");
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "bos_token")), "<s>");
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "eos_token")), "</s>");
    ck_assert(json_is_null(json_object_get(ctx, "documents")));
    /* the request itself is not modified */
    ck_assert(json_is_string(json_object_get(json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(req, "messages"), 1), "tool_calls"), 0), "function"), "arguments")));
    json_decref(ctx);
    json_decref(req);
    req = J("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"reasoning_effort\": \"low\", \"tools\": [],"
            " \"chat_template_kwargs\": {\"enable_thinking\": false}}");
    ctx = chat_prompt_build_context(req, NULL, err, sizeof err);
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "reasoning_effort")), "low");
    ck_assert(json_is_null(json_object_get(ctx, "tools")));
    ck_assert(json_is_false(json_object_get(ctx, "enable_thinking")));
    ck_assert_ptr_null(json_object_get(ctx, "bos_token"));
    json_decref(ctx);
    json_decref(req);
    json_decref(cfg);
}
END_TEST

START_TEST(bad_requests_name_the_field) {
    const char *bad[][2] = {
        { "[]", "request" },
        { "{}", "messages" },
        { "{\"messages\": [1]}", "messages[0]" },
        { "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[1].content" },
        { "{\"messages\": [], \"tools\": {}}", "tools" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *req = J(bad[i][0]);
        char err[256];
        ck_assert_ptr_null(chat_prompt_build_context(req, NULL, err, sizeof err));
        ck_assert_msg(!strncmp(err, bad[i][1], strlen(bad[i][1])), "'%s' -> '%s'", bad[i][0], err);
        json_decref(req);
    }
}
END_TEST

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = (size_t)n; }
    return b;
}

START_TEST(gptoss_end_to_end) {
    size_t len;
    char *src = slurp(GPTOSS, &len);
    if (!src) LLMR_SKIP("%s not found (run from the repository root)", GPTOSS);
    char err[512];
    int st;
    jinja_template *t = jinja_parse(src, len, NULL, &st, NULL, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    json_t *req = J("{\"reasoning_effort\": \"high\", \"messages\": ["
                    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
                    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Weather in Tokyo?\"}]},"
                    "{\"role\": \"assistant\", \"content\": null, \"reasoning\": \"Use the tool.\", \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\","
                    "  \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Tokyo\\\"}\"}}]},"
                    "{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": \"sunny\"}],"
                    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get weather\","
                    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}");
    jinja_render_opts ro = { .now = 1752148800, .now_is_utc = 1 };
    char *out = NULL;
    size_t n = 0;
    st = chat_prompt_render(t, req, NULL, &ro, &out, &n, err, sizeof err);
    ck_assert_msg(st == JINJA_OK, "%s", err);
    ck_assert(!strncmp(out, "<|start|>system<|message|>You are ChatGPT", 41));
    ck_assert_ptr_nonnull(strstr(out, "Current date: 2025-07-10\n\nReasoning: high\n\n"));
    ck_assert_ptr_nonnull(strstr(out, "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n// Get weather\ntype get_weather = (_: {\ncity: string,\n}) => any;\n\n} // namespace functions<|end|>"));
    ck_assert_ptr_nonnull(strstr(out, "<|start|>user<|message|>Weather in Tokyo?<|end|>"));
    /* arguments parsed before |tojson: no double encoding; reasoning kept before a pending call */
    ck_assert_ptr_nonnull(strstr(out, "<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Tokyo\"}<|call|>"));
    ck_assert_ptr_nonnull(strstr(out, "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>"));
    ck_assert_uint_eq(n, strlen(out));
    ck_assert_str_eq(out + n - strlen("<|start|>assistant"), "<|start|>assistant");
    free(out);
    json_decref(req);
    /* a template error reaches the caller with the template's own message */
    req = J("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"<|channel|>final<|message|>hi\"}]}");
    st = chat_prompt_render(t, req, NULL, &ro, &out, &n, err, sizeof err);
    ck_assert_int_eq(st, JINJA_ERAISE);
    ck_assert(!strncmp(err, "You have passed a message containing <|channel|> tags", 53));
    ck_assert_ptr_null(out);
    json_decref(req);
    /* a bad request is EINVAL with the field named */
    req = J("{\"messages\": 3}");
    ck_assert_int_eq(chat_prompt_render(t, req, NULL, &ro, &out, &n, err, sizeof err), JINJA_EINVAL);
    ck_assert_str_eq(err, "messages: expected an array");
    json_decref(req);
    jinja_destroy(t);
    free(src);
}
END_TEST

START_TEST(default_template_and_check) {
    const char *d = chat_prompt_default_template();
    ck_assert_int_eq(chat_prompt_check_template(d, strlen(d), NULL, NULL, 0), JINJA_OK);
    jinja_template *t = jinja_parse(d, strlen(d), NULL, NULL, NULL, NULL, 0);
    json_t *req = J("{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U\"}]}");
    char *out = NULL, err[256];
    ck_assert_int_eq(chat_prompt_render(t, req, NULL, NULL, &out, NULL, err, sizeof err), JINJA_OK);
    ck_assert_str_eq(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    json_decref(req);
    jinja_destroy(t);
    jinja_pos pos;
    const char *bad = "{% for m in messages %}\n{{ m.content }\n{% endfor %}";
    ck_assert_int_eq(chat_prompt_check_template(bad, strlen(bad), &pos, err, sizeof err), JINJA_ESYNTAX);
    ck_assert_int_eq(pos.line, 2);
    ck_assert_ptr_nonnull(strstr(err, "line 2"));
    json_t *ctx = json_object();
    ck_assert_int_eq(chat_prompt_context_defaults(ctx), 0);
    ck_assert(json_is_false(json_object_get(ctx, "add_generation_prompt")));
    ck_assert(json_is_null(json_object_get(ctx, "tools")));
    json_decref(ctx);
    ck_assert_int_eq(chat_prompt_context_defaults(NULL), -1);
    ck_assert_int_eq(chat_prompt_http_status(JINJA_OK), 200);
    ck_assert_int_eq(chat_prompt_http_status(JINJA_ERAISE), 400);
    ck_assert_int_eq(chat_prompt_http_status(JINJA_ESYNTAX), 400);
    ck_assert_int_eq(chat_prompt_http_status(JINJA_ELIMIT), 400);
    ck_assert_int_eq(chat_prompt_http_status(JINJA_ENOMEM), 500);
}
END_TEST

START_TEST(real_tokenizer_config) {
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/tokenizer-gptoss/tokenizer_config.json", llmr_test_cache_dir());
    json_error_t e;
    /* model_max_length there is 1e30: it only loads with JSON_DECODE_INT_AS_REAL */
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e);
    if (!cfg) LLMR_SKIP("tokenizer_config.json not cached (%s)", e.text);
    json_t *req = J("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    char err[128];
    json_t *ctx = chat_prompt_build_context(req, cfg, err, sizeof err);
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "bos_token")), "<|startoftext|>");
    ck_assert_str_eq(json_string_value(json_object_get(ctx, "eos_token")), "<|return|>");
    json_decref(ctx);
    json_decref(req);
    json_decref(cfg);
}
END_TEST

static Suite *chat_prompt_suite(void) {
    Suite *s = suite_create("chat_prompt");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, selection_order);
    tcase_add_test(tc, context_mapping);
    tcase_add_test(tc, bad_requests_name_the_field);
    tcase_add_test(tc, gptoss_end_to_end);
    tcase_add_test(tc, default_template_and_check);
    tcase_add_test(tc, real_tokenizer_config);
    suite_add_tcase(s, tc);
    return s;
}

LLMR_TEST_MAIN(chat_prompt_suite)
