/* bench/prefill — prompt prefill speed of the gptoss_cuda engine (the T > 1 forward) against the GPU's
 * dense bf16 tensor-core peak.
 *
 *   build/bench/prefill --model DIR [--engine SO] [--lengths 128,512,1024,4096] [--reps 3]
 *                       [--peak-tflops 989.4] [--gpu NAME]
 *
 * For each prompt length L: a fresh session evaluates L deterministic random tokens through the ABI's
 * generate (max_tokens 0: prefill only, the last row's logits computed); one untimed warm-up run per
 * length, then `reps` timed runs, the best reported (ms, tok/s). Achieved TFLOP/s counts useful work
 * only: 2 x active parameters x L (q/k/v/o, router, the 4 routed experts of each layer) + lm_head for the
 * one row that gets logits + attention (QK^T and PV: 4 x head_dim x heads x keys seen, per query and
 * layer; sliding layers see at most `sliding_window` keys). The split-activation tensor-core path does
 * 2-3x that much tensor work (tc.h), so % of peak understates tensor-core occupancy by that factor.
 * VRAM is the engine's own count (stats: weights + workspace + the session's KV cache).
 * Exits 0 with "SKIP" when no GPU is usable. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gptoss/config.h"
#include "bench/gptoss_bench.h"
#include "llmr_engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Useful FLOPs of prefilling L tokens from an empty context (see the header comment). */
static double prefill_flops(const gptoss_config *g, int L) {
    const double H = g->hidden_size, QD = (double)g->num_heads * g->head_dim, KVD = (double)g->num_kv_heads * g->head_dim;
    const double I = g->intermediate_size, E = g->num_experts;
    const double per_tok_layer = QD * H + 2 * KVD * H + H * QD + E * H + 4.0 * (2 * I * H + H * I);
    double f = 2.0 * per_tok_layer * g->num_layers * L + 2.0 * (double)g->vocab_size * H;
    for (int l = 0; l < g->num_layers; l++) {
        double keys = 0;
        for (int i = 0; i < L; i++) keys += g->layer_sliding[l] && i + 1 > g->sliding_window ? g->sliding_window : i + 1;
        f += 4.0 * g->head_dim * g->num_heads * keys;
    }
    return f;
}

static void usage(void) {
    printf("usage: prefill --model DIR [--engine SO] [--lengths 128,512,1024,4096] [--reps 3] [--peak-tflops T] "
           "[--gpu NAME]\n"
           "Prompt prefill ms, tok/s, achieved TFLOP/s and %% of the dense bf16 peak (default 989.4 TFLOP/s, "
           "H100/H200 SXM), VRAM (see the source header).\n");
}

int main(int argc, char **argv) {
    const char *model = NULL, *lengths = "128,512,1024,4096", *gpu = "";
    char engine[4096] = "";
    int reps = 3;
    double peak = 989.4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        if (!v) { fprintf(stderr, "prefill: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--engine")) snprintf(engine, sizeof engine, "%s", v);
        else if (!strcmp(a, "--lengths")) lengths = v;
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--peak-tflops")) peak = atof(v);
        else if (!strcmp(a, "--gpu")) gpu = v;
        else { fprintf(stderr, "prefill: unknown option %s (see --help)\n", a); return 2; }
        i++;
    }
    int ls[16];
    const int nl = bench_parse_list(lengths, 1 << 30, ls, 16);
    if (!model || reps < 1 || reps > 100 || nl < 1 || peak <= 0) { usage(); return 2; }
    int maxl = 0;
    for (int k = 0; k < nl; k++) maxl = ls[k] > maxl ? ls[k] : maxl;
    char err[1024];
    gptoss_config cfg;
    if (gptoss_config_load(model, &cfg, err, sizeof err)) { fprintf(stderr, "prefill: %s\n", err); return 1; }
    void *h = NULL;
    const llmr_engine_api *api = NULL;
    const int orc = bench_open_engine("prefill", engine, sizeof engine, &h, &api);
    if (orc) return orc;

    llmr_model_descriptor d = {sizeof d, "bench", "safetensors", "gptoss", "GptOssForCausalLM", model, NULL};
    llmr_load_params lp = {sizeof lp, 0, 0, (uint32_t)(maxl + 8), 1, NULL};
    llmr_engine_model *m = NULL;
    llmr_engine_status st = api->load(&d, &lp, &m, err, sizeof err);
    if (st == LLMR_ENGINE_UNSUPPORTED) { printf("SKIP prefill: %s\n", err); return 0; }
    if (st != LLMR_ENGINE_OK) { fprintf(stderr, "prefill: load: %s: %s\n", llmr_engine_status_name(st), err); return 1; }
    const char *chunk = getenv("LLMR_GPTOSS_CHUNK"), *tc = getenv("LLMR_GPTOSS_TC"), *sp = getenv("LLMR_GPTOSS_TC_SPLIT");
    printf("model %s: %d layers, hidden %d, %d experts; GPU %s; peak %.1f dense bf16 TFLOP/s; LLMR_GPTOSS_TC=%s "
           "TC_SPLIT=%s CHUNK=%s\n", model, cfg.num_layers, cfg.hidden_size, cfg.num_experts, gpu[0] ? gpu : "?", peak,
           tc ? tc : "(1)", sp ? sp : "(2)", chunk ? chunk : "(default)");
    printf("%8s %10s %11s %10s %8s %10s\n", "tokens", "ms", "tok/s", "TFLOP/s", "% peak", "VRAM GB");
    int32_t *prompt = malloc((size_t)maxl * sizeof(int32_t));
    if (!prompt) return 1;
    uint64_t x = 88172645463325252ull;
    const int vocab_hi = cfg.vocab_size > 199998 ? 199998 : cfg.vocab_size; /* below the special tokens */
    for (int i = 0; i < maxl; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; prompt[i] = (int32_t)(x % (uint64_t)vocab_hi); }
    int rc = 0;
    for (int k = 0; k < nl && rc == 0; k++) {
        double best = 1e30;
        uint64_t vram = 0;
        for (int r = 0; r <= reps && rc == 0; r++) { /* r == 0: warm-up */
            llmr_session_params sprm = {sizeof sprm, (uint32_t)ls[k]};
            llmr_engine_session *s = NULL;
            if (api->session_create(m, &sprm, &s, err, sizeof err) != LLMR_ENGINE_OK) {
                fprintf(stderr, "prefill: session: %s\n", err);
                rc = 1;
                break;
            }
            llmr_generate_request q;
            memset(&q, 0, sizeof q);
            q.struct_size = sizeof q;
            q.sampling.struct_size = sizeof q.sampling;
            q.tokens = prompt;
            q.n_tokens = (size_t)ls[k];
            llmr_generate_result res;
            memset(&res, 0, sizeof res);
            res.struct_size = sizeof res;
            const double t0 = now_s();
            st = api->generate(s, &q, NULL, NULL, &res, err, sizeof err);
            const double dt = now_s() - t0;
            llmr_engine_stats stats;
            memset(&stats, 0, sizeof stats);
            stats.struct_size = sizeof stats;
            api->stats(m, &stats);
            vram = stats.vram_bytes;
            api->session_destroy(s);
            if (st != LLMR_ENGINE_OK) { fprintf(stderr, "prefill: generate %d tokens: %s\n", ls[k], err); rc = 1; break; }
            if (r > 0 && dt < best) best = dt;
        }
        if (rc) break;
        const double tf = prefill_flops(&cfg, ls[k]) / best / 1e12;
        printf("%8d %10.2f %11.0f %10.1f %7.1f%% %10.2f\n", ls[k], best * 1e3, ls[k] / best, tf, 100.0 * tf / peak,
               vram / 1e9);
    }
    free(prompt);
    api->unload(m);
    return rc;
}
