/* bench/router — what the router adds to a streamed request: the same generation asked of a node
 * directly (POST /v0/generate, node token) and through the router (POST /v1/completions, stream),
 * alternately, N times each. Reports p50/p99 of time to first byte and total time for both, and the
 * difference (router overhead). bench/router/run.sh starts hub + router + node and also measures
 * GET /v1/models requests/s with wrk.
 *
 *   build/bench/router --router URL --key API_KEY --node URL --node-token TOKEN --model ID [--requests 50] [--tokens 8] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/http_client.h"
#include "common/options.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run { double t0, first, bytes; } run;

static int on_chunk(void *user, const char *data, size_t len) {
    (void)data;
    run *r = user;
    if (r->first == 0) r->first = now_s() - r->t0;
    r->bytes += (double)len;
    return 0;
}

/* One streamed request: 0 with *ttfb / *total in seconds, -1 on failure (message printed). */
static int once(llmr_httpc *c, const char *url, const char *bearer, const char *body, double *ttfb, double *total) {
    char auth[512], err[1024];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
    const char *headers[] = {auth, NULL};
    llmr_httpc_req rq = {.method = "POST", .url = url, .body = body, .headers = headers, .no_retry = 1};
    llmr_httpc_resp resp = {0};
    run r = {now_s(), 0, 0};
    llmr_httpc_status st = llmr_httpc_stream(c, &rq, NULL, on_chunk, &r, &resp, err, sizeof err);
    *total = now_s() - r.t0;
    *ttfb = r.first;
    long status = resp.status;
    llmr_httpc_resp_free(&resp);
    if (st != LLMR_HTTPC_OK || status != 200) {
        fprintf(stderr, "bench/router: %s: %s (HTTP %ld)\n", url, st ? err : "bad status", status);
        return -1;
    }
    return 0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

int main(int argc, char **argv) {
    const char *router = NULL, *key = NULL, *node = NULL, *ntok = NULL, *model = NULL;
    int n = 50, tokens = 8;
    llmr_option opts[] = {
        {"router", NULL, LLMR_OPT_STRING, NULL, "router base URL (http://127.0.0.1:8080)", &router},
        {"key", NULL, LLMR_OPT_STRING, NULL, "API key (or admin key) for the router", &key},
        {"node", NULL, LLMR_OPT_STRING, NULL, "node base URL", &node},
        {"node-token", NULL, LLMR_OPT_STRING, NULL, "the node's token (state-dir/node.json)", &ntok},
        {"model", NULL, LLMR_OPT_STRING, NULL, "model id", &model},
        {"requests", NULL, LLMR_OPT_INT, "50", "requests per path", &n},
        {"tokens", NULL, LLMR_OPT_INT, "8", "max_tokens per request", &tokens},
    };
    int prc = llmr_options_parse("bench/router",
                                 "Router overhead on a streamed request: node direct vs through the router (p50/p99).",
                                 opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (prc > 0) return 0;
    if (prc < 0) return 2;
    if (!router || !key || !node || !ntok || !model || n < 2 || tokens < 1) {
        fprintf(stderr, "bench/router: --router, --key, --node, --node-token and --model are required (--requests >= 2); see --help\n");
        return 2;
    }
    llmr_httpc *c = llmr_httpc_create(NULL);
    if (!c) return 1;
    char url_r[600], url_n[600], body_r[1024], body_n[1024];
    snprintf(url_r, sizeof url_r, "%s/v1/completions", router);
    snprintf(url_n, sizeof url_n, "%s/v0/generate", node);
    snprintf(body_r, sizeof body_r, "{\"model\":\"%s\",\"prompt\":\"Hello\",\"max_tokens\":%d,\"seed\":1,\"stream\":true}", model, tokens);
    snprintf(body_n, sizeof body_n, "{\"model\":\"%s\",\"prompt\":\"Hello\",\"max_tokens\":%d,\"seed\":1,\"parse\":\"none\"}", model, tokens);
    double *rf = calloc((size_t)n, sizeof *rf), *rt = calloc((size_t)n, sizeof *rt);
    double *nf = calloc((size_t)n, sizeof *nf), *nt = calloc((size_t)n, sizeof *nt);
    if (!rf || !rt || !nf || !nt) return 1;
    double d1, d2;
    if (once(c, url_n, ntok, body_n, &d1, &d2) || once(c, url_r, key, body_r, &d1, &d2)) return 1; /* warm-up */
    for (int i = 0; i < n; i++)
        if (once(c, url_n, ntok, body_n, &nf[i], &nt[i]) || once(c, url_r, key, body_r, &rf[i], &rt[i])) return 1;
    double nf50 = pct(nf, n, .5), nf99 = pct(nf, n, .99), rf50 = pct(rf, n, .5), rf99 = pct(rf, n, .99);
    double nt50 = pct(nt, n, .5), nt99 = pct(nt, n, .99), rt50 = pct(rt, n, .5), rt99 = pct(rt, n, .99);
    printf("streamed request, %d tokens, %d requests per path (ms)\n", tokens, n);
    printf("%-22s %10s %10s\n", "", "p50", "p99");
    printf("%-22s %10.2f %10.2f\n", "node direct: first", nf50 * 1e3, nf99 * 1e3);
    printf("%-22s %10.2f %10.2f\n", "via router: first", rf50 * 1e3, rf99 * 1e3);
    printf("%-22s %10.2f %10.2f\n", "added: first byte", (rf50 - nf50) * 1e3, (rf99 - nf99) * 1e3);
    printf("%-22s %10.2f %10.2f\n", "node direct: total", nt50 * 1e3, nt99 * 1e3);
    printf("%-22s %10.2f %10.2f\n", "via router: total", rt50 * 1e3, rt99 * 1e3);
    printf("%-22s %10.2f %10.2f\n", "added: total", (rt50 - nt50) * 1e3, (rt99 - nt99) * 1e3);
    free(rf); free(rt); free(nf); free(nt);
    llmr_httpc_destroy(c);
    return 0;
}
