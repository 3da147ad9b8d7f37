/* bench/template — µs per render of the gpt-oss chat template: 10 messages, 3 tools.
 *
 *   build/bench/template [--template FILE] [--iterations N] [--help]
 *
 * Prints the parse cost, then parses the template once (as the router should: at registration or on
 * first use) and, per render, builds the context from an
 * OpenAI-style request once per render (as the router does per request), renders, and prints the
 * median and mean µs per render (context mapping included) and the output size. Target: ≤ 100 µs. */
#include "router/chat_prompt.h"
#include "router/template/jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char REQUEST[] =
    "{\"reasoning_effort\": \"medium\", \"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are a helpful travel assistant. Answer briefly.\"},"
    "{\"role\": \"user\", \"content\": \"I am planning a trip to Tokyo next week. What should I pack?\"},"
    "{\"role\": \"assistant\", \"content\": \"Pack light layers, an umbrella and comfortable shoes.\"},"
    "{\"role\": \"user\", \"content\": \"What will the weather be like?\"},"
    "{\"role\": \"assistant\", \"content\": null, \"reasoning\": \"Need the forecast.\", \"tool_calls\": [{\"id\": \"call_1\","
    "  \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Tokyo\\\", \\\"days\\\": 7}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"{\\\"forecast\\\": \\\"rain then sun\\\", \\\"high_c\\\": 24}\"},"
    "{\"role\": \"assistant\", \"content\": \"Rain early in the week, then sunny, highs around 24°C.\"},"
    "{\"role\": \"user\", \"content\": \"Find me a hotel near Shinjuku under 150 dollars.\"},"
    "{\"role\": \"assistant\", \"content\": \"Sure — any preference for the star rating?\"},"
    "{\"role\": \"user\", \"content\": \"Three stars or more, please. And convert the price to yen.\"}],"
    " \"tools\": ["
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather forecast for a city\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
    "  \"days\": {\"type\": \"integer\", \"description\": \"Number of days\", \"default\": 3},"
    "  \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"search_hotels\", \"description\": \"Search hotels\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"area\": {\"type\": \"string\"}, \"max_price\": {\"type\": \"number\"},"
    "  \"stars\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}, \"amenities\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}},"
    "  \"required\": [\"area\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"convert_currency\", \"description\": \"Convert an amount\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"amount\": {\"type\": \"number\"}, \"from\": {\"type\": \"string\"},"
    "  \"to\": {\"type\": \"string\"}}, \"required\": [\"amount\", \"from\", \"to\"]}}}]}";

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *path = "tests/data/templates/llama.cpp/openai-gpt-oss-120b.jinja";
    int iters = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s [--template FILE] [--iterations N]\n"
                   "Prints µs per render of a chat template (default: the gpt-oss template) for a 10-message,\n"
                   "3-tool OpenAI request, context mapping included. Run from the repository root.\n", argv[0]);
            return 0;
        } else if (!strcmp(argv[i], "--template") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iters = atoi(argv[++i]);
        else { fprintf(stderr, "unknown argument %s (see --help)\n", argv[i]); return 2; }
    }
    if (iters < 1) iters = 1;
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s (run from the repository root or pass --template)\n", path); return 2; }
    static char src[1 << 20];
    size_t len = fread(src, 1, sizeof src, f);
    fclose(f);
    char err[512];
    int st;
    jinja_template *t = jinja_parse(src, len, NULL, &st, NULL, err, sizeof err);
    if (!t) { fprintf(stderr, "%s: %s\n", path, err); return 1; }
    /* parse cost: what a router that does not cache parsed templates pays per request */
    double p0 = now_us();
    int np = iters < 200 ? iters : 200;
    for (int i = 0; i < np; i++) jinja_destroy(jinja_parse(src, len, NULL, NULL, NULL, NULL, 0));
    printf("gpt-oss template: %.1f us per parse (%zu bytes of template; parse once and reuse it)\n", (now_us() - p0) / np, len);
    json_error_t je;
    json_t *req = json_loads(REQUEST, 0, &je);
    if (!req) { fprintf(stderr, "request: %s\n", je.text); return 1; }
    jinja_render_opts ro = { .now = 1752148800, .now_is_utc = 1 };
    double *us = malloc(sizeof(double) * (size_t)iters), total = 0;
    size_t out_len = 0;
    if (!us) return 1;
    for (int i = -50; i < iters; i++) {   /* 50 warm-up renders */
        char *out = NULL;
        double t0 = now_us();
        st = chat_prompt_render(t, req, NULL, &ro, &out, &out_len, err, sizeof err);
        double dt = now_us() - t0;
        if (st != JINJA_OK) { fprintf(stderr, "render: %s\n", err); return 1; }
        free(out);
        if (i >= 0) { us[i] = dt; total += dt; }
    }
    qsort(us, (size_t)iters, sizeof *us, cmp_d);
    printf("gpt-oss template, 10 messages, 3 tools: median %.1f us, mean %.1f us, p99 %.1f us per request "
           "(context mapping + render; %d renders, %zu bytes of prompt)\n", us[iters / 2], total / iters, us[(size_t)(iters * 0.99)], iters, out_len);
    /* the render alone, with the context built once */
    json_t *ctx = chat_prompt_build_context(req, NULL, err, sizeof err);
    total = 0;
    for (int i = -50; i < iters; i++) {
        char *out = NULL;
        double t0 = now_us();
        st = jinja_render(t, ctx, &ro, &out, &out_len, err, sizeof err);
        double dt = now_us() - t0;
        if (st != JINJA_OK) { fprintf(stderr, "render: %s\n", err); return 1; }
        free(out);
        if (i >= 0) { us[i] = dt; total += dt; }
    }
    qsort(us, (size_t)iters, sizeof *us, cmp_d);
    printf("gpt-oss template, 10 messages, 3 tools: median %.1f us, mean %.1f us, p99 %.1f us per render (render only)\n",
           us[iters / 2], total / iters, us[(size_t)(iters * 0.99)]);
    json_decref(ctx);
    free(us);
    json_decref(req);
    jinja_destroy(t);
    return 0;
}
