/* bench/decode — single-stream (batch 1) decode speed of the gptoss_cuda engine against the memory
 * roofline of the GPU it runs on.
 *
 *   build/bench/decode --model DIR [--engine SO] [--contexts 128,1024,4096] [--tokens 64]
 *                      [--temperature T] [--top-p P] [--top-k K]
 *
 * For each context length c: a fresh session is prefilled with c deterministic random tokens (timed:
 * prefill tok/s), then `tokens` tokens are generated through the ABI, greedily unless a temperature is given
 * (then with that temperature, top-p and top-k and a fixed seed) (timed: decode tok/s; it
 * includes sampling, the per-token callback and host round trips, as served). The roofline divides the
 * measured device-to-device copy bandwidth (bytes read + written, median of 20 copies of 1 GiB) by the
 * bytes one decode step must read: the weights it touches (attention, router, 4 experts' MXFP4 blocks,
 * scales and biases, the embedding row, lm_head) plus the fp32 KV cache it attends over (full layers: c
 * positions; sliding layers: min(c, window)). ITL p50/p99: the gaps between consecutive generated tokens as
 * the caller receives them (ms); VRAM: the engine's stats after load. Under the table, per context, where a decode
 * token's wall time went (the engine's scheduler accounting, debug_api.h): the GPU time of the decode step and of the
 * sampling, and the rest, the host's part between them (waking on the token, handing it out, launching the next
 * step). Prints a table; exits 0 with "SKIP" when no GPU is usable. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gptoss/config.h"
#include "engines/gptoss_cuda/debug_api.h"
#include "bench/gptoss_bench.h"
#include "llmr_engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Tokens handed out, and when (the first cap of them): their gaps are the inter-token latencies. */
typedef struct {
    int n, cap;
    double *t;
} token_times;

static int count_cb(void *user, int32_t tok) {
    (void)tok;
    token_times *tt = (token_times *)user;
    if (tt->n < tt->cap) tt->t[tt->n] = now_s();
    tt->n++;
    return 0;
}

/* p50 and p99 of the gaps between the recorded token times (ms; 0 with fewer than 2 tokens), gaps[] as scratch. */
static void itl_ms(const token_times *tt, double *gaps, double *p50, double *p99) {
    const int n = tt->n < tt->cap ? tt->n : tt->cap, g = n > 1 ? n - 1 : 0;
    for (int i = 0; i < g; i++) gaps[i] = (tt->t[i + 1] - tt->t[i]) * 1e3;
    bench_p50_p99(gaps, (size_t)g, p50, p99);
}

/* Bytes one decode step reads at context c (see the header comment). */
static double step_bytes(const gptoss_config *g, int c) {
    const double H = g->hidden_size, QD = (double)g->num_heads * g->head_dim, KVD = (double)g->num_kv_heads * g->head_dim;
    const double I = g->intermediate_size, E = g->num_experts;
    double layer = (QD * H + 2 * KVD * H + H * QD) * 2 + (QD + 2 * KVD + H + g->num_heads) * 2 /* attention + biases/sinks */
                   + (E * H + E) * 2                                                       /* router */
                   + 4.0 * ((2 * I * H + H * I) / 32.0 * 17.0 + (2 * I + H) * 2)           /* 4 experts, MXFP4 */
                   + 2 * H * 2;                                                            /* norms */
    double total = layer * g->num_layers + (double)g->vocab_size * H * 2 + H * 2 + H * 2; /* lm_head, embed row, norm */
    for (int l = 0; l < g->num_layers; l++) {
        const int seen = g->layer_sliding[l] && c > g->sliding_window ? g->sliding_window : c;
        total += (double)seen * 2 * KVD * 4; /* fp32 K and V rows */
    }
    return total;
}

static void usage(void) {
    printf("usage: decode --model DIR [--engine SO] [--contexts 128,1024,4096] [--tokens 64]\n"
           "              [--temperature T] [--top-p P] [--top-k K]\n"
           "Batch-1 decode tok/s of gptoss_cuda vs the copy-bandwidth roofline (see the source header); greedy unless\n"
           "a temperature > 0 is given.\n");
}

int main(int argc, char **argv) {
    const char *model = NULL, *contexts = "128,1024,4096";
    char engine[4096] = "";
    int ntok = 64, top_k = 0;
    double temperature = 0, top_p = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        if (!v) { fprintf(stderr, "decode: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--engine")) snprintf(engine, sizeof engine, "%s", v);
        else if (!strcmp(a, "--contexts")) contexts = v;
        else if (!strcmp(a, "--tokens")) ntok = atoi(v);
        else if (!strcmp(a, "--temperature")) temperature = atof(v);
        else if (!strcmp(a, "--top-p")) top_p = atof(v);
        else if (!strcmp(a, "--top-k")) top_k = atoi(v);
        else { fprintf(stderr, "decode: unknown option %s (see --help)\n", a); return 2; }
        i++;
    }
    if (!model || ntok < 1 || ntok > 100000 || temperature < 0 || top_p <= 0 || top_p > 1 || top_k < 0) { usage(); return 2; }
    char err[1024];
    gptoss_config cfg;
    if (gptoss_config_load(model, &cfg, err, sizeof err)) { fprintf(stderr, "decode: %s\n", err); return 1; }
    void *h = NULL;
    const llmr_engine_api *api = NULL;
    const int orc = bench_open_engine("decode", engine, sizeof engine, &h, &api);
    if (orc) return orc;
    gptoss_cuda_copy_bandwidth_fn bw = (gptoss_cuda_copy_bandwidth_fn)dlsym(h, GPTOSS_CUDA_COPY_BW_SYMBOL);
    if (!bw) { fprintf(stderr, "decode: %s is not the gptoss_cuda engine\n", engine); return 1; }
    gptoss_cuda_sched_stats_fn sstats = (gptoss_cuda_sched_stats_fn)dlsym(h, GPTOSS_CUDA_SCHED_STATS_SYMBOL);

    int cs[16], maxc = 0;
    const int nc = bench_parse_list(contexts, 1 << 30, cs, 16);
    if (nc < 0) { fprintf(stderr, "decode: bad --contexts %s\n", contexts); return 2; }
    for (int k = 0; k < nc; k++) maxc = cs[k] > maxc ? cs[k] : maxc;
    llmr_model_descriptor d = {sizeof d, "bench", "safetensors", "gptoss", "GptOssForCausalLM", model, NULL};
    llmr_load_params lp = {sizeof lp, 0, 0, (uint32_t)(maxc + ntok + 8), 1, NULL};
    llmr_engine_model *m = NULL;
    const double tl = now_s();
    llmr_engine_status st = api->load(&d, &lp, &m, err, sizeof err);
    if (st == LLMR_ENGINE_UNSUPPORTED) { printf("SKIP decode: %s\n", err); return 0; }
    if (st != LLMR_ENGINE_OK) { fprintf(stderr, "decode: load: %s: %s\n", llmr_engine_status_name(st), err); return 1; }
    const double load_s = now_s() - tl;
    double gbps = 0;
    st = bw(0, (uint64_t)1 << 30, 20, &gbps, err, sizeof err);
    if (st != LLMR_ENGINE_OK) { fprintf(stderr, "decode: copy bandwidth: %s\n", err); return 1; }
    llmr_engine_stats est;
    memset(&est, 0, sizeof est);
    est.struct_size = sizeof est;
    api->stats(m, &est);
    printf("model %s: %d layers, hidden %d, vocab %d; load %.1f s; VRAM %.2f GB; copy bandwidth %.0f GB/s (read + write)\n",
           model, cfg.num_layers, cfg.hidden_size, cfg.vocab_size, load_s, est.vram_bytes / 1e9, gbps);
    if (temperature > 0) printf("sampling: temperature %g, top-p %g, top-k %d, seed 1234\n", temperature, top_p, top_k);
    else printf("sampling: greedy\n");
    printf("%8s %12s %12s %10s %9s %9s %12s %14s %10s\n", "context", "prefill t/s", "decode t/s", "ms/token", "ITL p50",
           "ITL p99", "GB/token", "roofline t/s", "% roofline");
    int32_t *prompt = malloc((size_t)maxc * sizeof(int32_t));
    double *times = malloc((size_t)ntok * sizeof(double)), *gaps = malloc((size_t)ntok * sizeof(double));
    if (!prompt || !times || !gaps) return 1;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < maxc; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; prompt[i] = (int32_t)(x % 199998); }
    int rc = 0;
    char split[16][200]; /* per context: where a token's time went, printed under the table */
    memset(split, 0, sizeof split);
    for (int k = 0; k < nc; k++) {
        llmr_session_params sp = {sizeof sp, 0};
        llmr_engine_session *s = NULL;
        if (api->session_create(m, &sp, &s, err, sizeof err) != LLMR_ENGINE_OK) { fprintf(stderr, "decode: %s\n", err); rc = 1; break; }
        llmr_generate_request r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        r.sampling.struct_size = sizeof r.sampling;
        r.sampling.temperature = (float)temperature;
        r.sampling.top_p = (float)top_p;
        r.sampling.top_k = top_k;
        r.sampling.seed = 1234;
        r.tokens = prompt;
        r.n_tokens = (size_t)cs[k];
        llmr_generate_result res;
        memset(&res, 0, sizeof res);
        res.struct_size = sizeof res;
        token_times tt = {0, ntok, times};
        const double t0 = now_s();
        st = api->generate(s, &r, count_cb, &tt, &res, err, sizeof err);
        const double t1 = now_s();
        r.tokens = NULL;
        r.n_tokens = 0;
        r.max_tokens = (uint32_t)ntok;
        tt.n = 0;
        gptoss_cuda_sched_stats ss;
        if (sstats) sstats(m, &ss, 1); /* from here on: the decode tokens only */
        if (st == LLMR_ENGINE_OK) st = api->generate(s, &r, count_cb, &tt, &res, err, sizeof err);
        const double t2 = now_s();
        if (st == LLMR_ENGINE_OK && sstats && sstats(m, &ss, 1) == LLMR_ENGINE_OK && ss.steps[0] && ss.samplings) {
            const double wall = (t2 - t1) * 1e3 / tt.n, step = ss.step_ms[0] / ss.steps[0], samp = ss.sample_ms / ss.samplings;
            snprintf(split[k], sizeof split[k], "context %d: a token %.3f ms = decode step %.3f ms GPU + sampling %.3f ms GPU "
                     "+ %.1f us host between them (%llu steps)", cs[k], wall, step, samp, (wall - step - samp) * 1e3,
                     (unsigned long long)ss.steps[0]);
        }
        api->session_destroy(s);
        if (st != LLMR_ENGINE_OK) { fprintf(stderr, "decode: generate: %s\n", err); rc = 1; break; }
        double p50, p99;
        itl_ms(&tt, gaps, &p50, &p99);
        const double tps = tt.n / (t2 - t1), bytes = step_bytes(&cfg, cs[k] + ntok / 2), roof = gbps * 1e9 / bytes;
        printf("%8d %12.0f %12.1f %10.2f %9.2f %9.2f %12.3f %14.0f %9.1f%%\n", cs[k], cs[k] / (t1 - t0), tps, 1e3 / tps,
               p50, p99, bytes / 1e9, roof, 100.0 * tps / roof);
    }
    for (int k = 0; k < nc; k++)
        if (split[k][0]) printf("%s\n", split[k]);
    free(prompt);
    free(times);
    free(gaps);
    api->unload(m);
    return rc;
}
