/* bench/throughput — aggregate decode throughput of the gptoss_cuda engine under concurrent streams
 * (continuous batching), against the step roofline of the GPU it runs on.
 *
 *   build/bench/throughput --model DIR [--engine SO] [--streams 1,8,32,64] [--seed 1] [--temperature 0]
 *
 * For each concurrency C: C threads each make a session and call generate once through the plugin ABI
 * (as the node does, one thread per request), all released together. Request lengths are ShareGPT-like,
 * drawn from a fixed-seed generator: prompt length log-uniform in [100, 1000] tokens (many short, some
 * long), output length uniform in [100, 500] (max_tokens; the synthetic model never emits a stop id).
 * Printed per C:
 *   out tok/s     all generated tokens / wall time from release to the last stream's end (includes
 *                 every prefill: the aggregate number);
 *   ITL p50/p99   gaps between consecutive tokens of a stream, over all streams (ms);
 *   step tok/s    C / ITL p50: the steady decode rate when all C streams run;
 *   roofline      C x copy bandwidth / bytes of one batched step: the experts the batch touches (expected
 *                 distinct experts per layer for C rows of 4 uniform picks: E(1 - (1 - 4/E)^C)) + attention
 *                 and router weights + lm_head + C embedding rows + the fp32 KV the C rows read at their
 *                 mean context (full layers: context; sliding layers: the window);
 *   % roof        step tok/s / roofline;  VRAM: the engine's stats after load.
 * Under the table, for each C, where the engine thread's time went (debug_api.h gptoss_cuda_sched_stats):
 * GPU time of prefill slices, of decode steps by rows per step (steps, mean rows, ms per step), of
 * sampling, and the thread's host waits; with LLMR_GPTOSS_BATCH_PROFILE=1 also each batched step's parts.
 * The copy bandwidth is measured (device-to-device, median of 20 copies of 1 GiB). Exits 0 with "SKIP"
 * when no GPU is usable. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gptoss/config.h"
#include "engines/gptoss_cuda/debug_api.h"
#include "bench/gptoss_bench.h"
#include "llmr_engine.h"

#define PROMPT_MIN 100
#define PROMPT_MAX 1000
#define OUT_MIN 100
#define OUT_MAX 500

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}
static double rng_unit(uint64_t *x) { return (double)(rng_next(x) >> 11) * (1.0 / 9007199254740992.0); }

typedef struct stream {
    const llmr_engine_api *api;
    llmr_engine_session *ses; /* made and destroyed by the main thread (ABI: one thread at a time) */
    pthread_barrier_t *start;
    int32_t *prompt;
    uint32_t n_prompt, max_tokens;
    float temperature;
    uint64_t seed;
    double *t; /* arrival time of each token */
    uint32_t n;
    llmr_engine_status st;
    char err[512];
} stream;

static int on_token(void *user, int32_t tok) {
    (void)tok;
    stream *s = (stream *)user;
    if (s->n < s->max_tokens) s->t[s->n] = now_s();
    s->n++;
    return 0;
}

static void *stream_main(void *arg) {
    stream *s = (stream *)arg;
    pthread_barrier_wait(s->start);
    llmr_generate_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.sampling.struct_size = sizeof r.sampling;
    r.sampling.temperature = s->temperature;
    r.sampling.seed = s->seed;
    r.tokens = s->prompt;
    r.n_tokens = s->n_prompt;
    r.max_tokens = s->max_tokens;
    llmr_generate_result res;
    memset(&res, 0, sizeof res);
    res.struct_size = sizeof res;
    s->st = s->api->generate(s->ses, &r, on_token, s, &res, s->err, sizeof s->err);
    return NULL;
}

/* Bytes of one batched decode step of B rows at mean context c (see the header comment). */
static double step_bytes(const gptoss_config *g, int B, double c) {
    const double H = g->hidden_size, QD = (double)g->num_heads * g->head_dim, KVD = (double)g->num_kv_heads * g->head_dim;
    const double I = g->intermediate_size, E = g->num_experts;
    const double expert = (2 * I * H + H * I) / 32.0 * 17.0 + (2 * I + H) * 2; /* MXFP4 blocks + scales + biases */
    const double touched = E * (1.0 - pow(1.0 - 4.0 / E, B));
    const double layer = (QD * H + 2 * KVD * H + H * QD) * 2 + (QD + 2 * KVD + H + g->num_heads) * 2 + (E * H + E) * 2 +
                         touched * expert + 2 * H * 2;
    double total = layer * g->num_layers + (double)g->vocab_size * H * 2 + B * H * 2 + H * 2;
    for (int l = 0; l < g->num_layers; l++) {
        const double seen = g->layer_sliding[l] && c > g->sliding_window ? g->sliding_window : c;
        total += B * seen * 2 * KVD * 4;
    }
    return total;
}

static const char *const bucket_names[GPTOSS_CUDA_STAT_BUCKETS] = {"1", "2-3", "4-7", "8-15", "16-31", "32-63", "64"};

/* Where the engine thread's time went during one concurrency level (see the header comment). */
static void print_sched_stats(int C, double wall, const gptoss_cuda_sched_stats *t) {
    if (!t->iterations) {
        printf("\n%d streams: no time accounting (the engine has it off: LLMR_GPTOSS_SCHED_STATS=0)\n", C);
        return;
    }
    double steps_ms = 0;
    uint64_t steps = 0;
    for (int b = 0; b < GPTOSS_CUDA_STAT_BUCKETS; b++) { steps_ms += t->step_ms[b]; steps += t->steps[b]; }
    printf("\n%d streams, wall %.2f s: prefill %.2f s GPU (%llu slices, %llu tokens, %.1f ms/slice); decode steps "
           "%.2f s GPU (%llu steps); sampling %.2f s GPU (%.2f ms each); engine thread: busy %.2f s, waiting for sampled "
           "tokens %.2f s, for callers' acks %.3f s\n",
           C, wall, t->prefill_ms / 1e3, (unsigned long long)t->prefill_slices, (unsigned long long)t->prefill_tokens,
           t->prefill_slices ? t->prefill_ms / t->prefill_slices : 0.0, steps_ms / 1e3, (unsigned long long)steps,
           t->sample_ms / 1e3, t->samplings ? t->sample_ms / t->samplings : 0.0, t->busy_ms / 1e3,
           t->token_wait_ms / 1e3, t->ack_wait_ms / 1e3);
    int prof = 0;
    for (int b = 0; b < GPTOSS_CUDA_STAT_BUCKETS; b++)
        for (int c = 0; c < GPTOSS_CUDA_STAT_CATS; c++) prof |= t->cat_ms[b][c] > 0;
    printf("  %6s %7s %9s %9s %9s", "rows", "steps", "mean rows", "ms/step", "GPU s");
    if (prof) printf("   per step ms: %6s %6s %6s %6s %6s %7s", "norms", "qkv", "attn", "o", "MoE", "lm_head");
    printf("\n");
    for (int b = 0; b < GPTOSS_CUDA_STAT_BUCKETS; b++) {
        if (!t->steps[b]) continue;
        const double n = (double)t->steps[b];
        printf("  %6s %7llu %9.1f %9.2f %9.2f", bucket_names[b], (unsigned long long)t->steps[b], t->step_rows[b] / n,
               t->step_ms[b] / n, t->step_ms[b] / 1e3);
        if (prof && b > 0) {
            printf("   %12s", "");
            for (int c = 0; c < GPTOSS_CUDA_STAT_CATS; c++) printf(" %6.2f", t->cat_ms[b][c] / n);
        }
        printf("\n");
    }
}

static void usage(void) {
    printf("usage: throughput --model DIR [--engine SO] [--streams 1,8,32,64] [--seed 1] [--temperature 0]\n"
           "Aggregate output tok/s of gptoss_cuda at C concurrent streams (ShareGPT-like lengths) vs the step\n"
           "roofline, p50/p99 inter-token latency, VRAM (see the source header).\n");
}

int main(int argc, char **argv) {
    const char *model = NULL, *streams = "1,8,32,64";
    char engine[4096] = "";
    uint64_t seed = 1;
    float temperature = 0.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        if (!v) { fprintf(stderr, "throughput: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--engine")) snprintf(engine, sizeof engine, "%s", v);
        else if (!strcmp(a, "--streams")) streams = v;
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--temperature")) temperature = strtof(v, NULL);
        else { fprintf(stderr, "throughput: unknown option %s (see --help)\n", a); return 2; }
        i++;
    }
    if (!model) { usage(); return 2; }
    int cs[16], maxc = 0;
    const int nc = bench_parse_list(streams, 1024, cs, 16);
    if (nc < 0) { fprintf(stderr, "throughput: bad --streams %s (1..1024 each)\n", streams); return 2; }
    for (int k = 0; k < nc; k++) maxc = cs[k] > maxc ? cs[k] : maxc;
    char err[1024];
    gptoss_config cfg;
    if (gptoss_config_load(model, &cfg, err, sizeof err)) { fprintf(stderr, "throughput: %s\n", err); return 1; }
    void *h = NULL;
    const llmr_engine_api *api = NULL;
    const int orc = bench_open_engine("throughput", engine, sizeof engine, &h, &api);
    if (orc) return orc;
    gptoss_cuda_copy_bandwidth_fn bw = (gptoss_cuda_copy_bandwidth_fn)dlsym(h, GPTOSS_CUDA_COPY_BW_SYMBOL);
    gptoss_cuda_sched_stats_fn sstats = (gptoss_cuda_sched_stats_fn)dlsym(h, GPTOSS_CUDA_SCHED_STATS_SYMBOL);
    if (!bw) { fprintf(stderr, "throughput: %s is not the gptoss_cuda engine\n", engine); return 1; }
    const uint32_t ctx = PROMPT_MAX + OUT_MAX + 8;
    llmr_model_descriptor d = {sizeof d, "bench", "safetensors", "gptoss", "GptOssForCausalLM", model, NULL};
    llmr_load_params lp = {sizeof lp, 0, 0, ctx, (uint32_t)maxc, NULL};
    llmr_engine_model *m = NULL;
    const double tl = now_s();
    llmr_engine_status st = api->load(&d, &lp, &m, err, sizeof err);
    if (st == LLMR_ENGINE_UNSUPPORTED) { printf("SKIP throughput: %s\n", err); return 0; }
    if (st != LLMR_ENGINE_OK) { fprintf(stderr, "throughput: load: %s: %s\n", llmr_engine_status_name(st), err); return 1; }
    const double load_s = now_s() - tl;
    llmr_engine_stats stats = {sizeof stats, 0, 0, 0, 0, 0, 0};
    api->stats(m, &stats);
    double gbps = 0;
    st = bw(0, (uint64_t)1 << 30, 20, &gbps, err, sizeof err);
    if (st != LLMR_ENGINE_OK) { fprintf(stderr, "throughput: copy bandwidth: %s\n", err); return 1; }
    printf("model %s: %d layers, %d experts, vocab %d; load %.1f s (%d sessions x context %u); VRAM %.2f GB; copy "
           "bandwidth %.0f GB/s\nlengths: prompt log-uniform %d-%d, output uniform %d-%d, seed %llu, temperature %.2f\n",
           model, cfg.num_layers, cfg.num_experts, cfg.vocab_size, load_s, maxc, ctx, stats.vram_bytes / 1e9, gbps,
           PROMPT_MIN, PROMPT_MAX, OUT_MIN, OUT_MAX, (unsigned long long)seed, temperature);
    printf("%7s %9s %9s %9s %10s %9s %9s %9s %10s %11s %7s\n", "streams", "prompt", "output", "wall s", "out tok/s",
           "ITL p50", "ITL p99", "step t/s", "GB/step", "roofline", "% roof");
    int rc = 0;
    gptoss_cuda_sched_stats tstats[16];
    double walls[16];
    memset(tstats, 0, sizeof tstats);
    for (int k = 0; k < nc && !rc; k++) {
        const int C = cs[k];
        stream *ss = calloc((size_t)C, sizeof *ss);
        pthread_t *th = calloc((size_t)C, sizeof *th);
        pthread_barrier_t bar;
        if (!ss || !th) { fprintf(stderr, "throughput: out of memory\n"); return 1; }
        uint64_t x = 0x9e3779b97f4a7c15ull ^ (seed * 0x100000001b3ull + (uint64_t)C);
        uint64_t sum_prompt = 0, sum_out = 0;
        for (int i = 0; i < C; i++) {
            stream *s = &ss[i];
            s->api = api;
            llmr_session_params sp = {sizeof sp, 0};
            if (api->session_create(m, &sp, &s->ses, err, sizeof err) != LLMR_ENGINE_OK) {
                fprintf(stderr, "throughput: session_create: %s\n", err);
                return 1;
            }
            s->start = &bar;
            s->temperature = temperature;
            s->seed = seed * 1000 + (uint64_t)i;
            s->n_prompt = (uint32_t)lround(exp(log(PROMPT_MIN) + rng_unit(&x) * (log(PROMPT_MAX) - log(PROMPT_MIN))));
            s->max_tokens = OUT_MIN + (uint32_t)(rng_unit(&x) * (OUT_MAX - OUT_MIN + 1));
            if (s->max_tokens > OUT_MAX) s->max_tokens = OUT_MAX;
            s->prompt = malloc(s->n_prompt * sizeof(int32_t));
            s->t = malloc(s->max_tokens * sizeof(double));
            if (!s->prompt || !s->t) { fprintf(stderr, "throughput: out of memory\n"); return 1; }
            for (uint32_t j = 0; j < s->n_prompt; j++) s->prompt[j] = (int32_t)(rng_next(&x) % 199998);
            sum_prompt += s->n_prompt;
            sum_out += s->max_tokens;
        }
        gptoss_cuda_sched_stats scratch;
        if (sstats) sstats(m, &scratch, 1); /* counting starts now */
        pthread_barrier_init(&bar, NULL, (unsigned)C + 1);
        for (int i = 0; i < C; i++)
            if (pthread_create(&th[i], NULL, stream_main, &ss[i])) { fprintf(stderr, "throughput: pthread_create\n"); return 1; }
        const double t0 = now_s();
        pthread_barrier_wait(&bar);
        for (int i = 0; i < C; i++) pthread_join(th[i], NULL);
        const double wall = now_s() - t0;
        walls[k] = wall;
        if (sstats) sstats(m, &tstats[k], 1);
        pthread_barrier_destroy(&bar);
        uint64_t gen = 0, ngaps = 0;
        for (int i = 0; i < C; i++) {
            if (ss[i].st != LLMR_ENGINE_OK) {
                fprintf(stderr, "throughput: stream %d: %s: %s\n", i, llmr_engine_status_name(ss[i].st), ss[i].err);
                rc = 1;
            }
            gen += ss[i].n;
            if (ss[i].n > 1) ngaps += ss[i].n - 1;
        }
        double *gaps = malloc((ngaps ? ngaps : 1) * sizeof(double));
        if (!gaps) return 1;
        uint64_t g = 0;
        for (int i = 0; i < C; i++)
            for (uint32_t j = 1; j < ss[i].n && j < ss[i].max_tokens; j++) gaps[g++] = ss[i].t[j] - ss[i].t[j - 1];
        double p50, p99;
        bench_p50_p99(gaps, g, &p50, &p99);
        const double mean_ctx = (double)sum_prompt / C + (double)sum_out / C / 2;
        const double bytes = step_bytes(&cfg, C, mean_ctx), roof = C * gbps * 1e9 / bytes;
        const double step_tps = p50 > 0 ? C / p50 : 0;
        printf("%7d %9.0f %9.0f %9.2f %10.1f %9.2f %9.2f %9.1f %10.2f %11.0f %6.1f%%\n", C, (double)sum_prompt / C,
               (double)sum_out / C, wall, gen / wall, p50 * 1e3, p99 * 1e3, step_tps, bytes / 1e9, roof,
               roof > 0 ? 100.0 * step_tps / roof : 0.0);
        fflush(stdout);
        for (int i = 0; i < C; i++) { api->session_destroy(ss[i].ses); free(ss[i].prompt); free(ss[i].t); }
        free(gaps);
        free(ss);
        free(th);
    }
    if (sstats && !rc)
        for (int k = 0; k < nc; k++) print_sched_stats(cs[k], walls[k], &tstats[k]);
    api->unload(m);
    return rc;
}
