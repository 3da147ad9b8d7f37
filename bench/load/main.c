/* bench/load — time from the engine's load() call to ready, with the checkpoint in the page cache.
 *
 *   build/bench/load --model DIR [--engine SO] [--reps 3] [--context 8192]
 *
 * First reads every *.safetensors file of DIR once (timed: the page-cache read rate of one thread), so
 * the loads measure the engine, not the disk. Then `reps` times: load (timed) -> stats -> unload; the
 * best and the median are printed with GB/s (checkpoint bytes / load time) and the VRAM the engine holds
 * after load (stats: weights + workspace + the KV page pool planned at load for one session of
 * `context`). The KV cost per 1,000 tokens comes from the engine's estimate_vram at `context` and
 * `context / 2` (the pool is sized at load, so sessions add no KV memory of their own).
 * Exits 0 with "SKIP" when no GPU is usable. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/gptoss_bench.h"
#include "llmr_engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads every *.safetensors of dir to the end; returns the bytes read, or -1 naming the failure. */
static long long warm_cache(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "load: cannot open %s\n", dir); return -1; }
    static char buf[1 << 20];
    long long total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) { fprintf(stderr, "load: cannot open %s\n", path); closedir(d); return -1; }
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0) total += r;
        close(fd);
        if (r < 0) { fprintf(stderr, "load: read error in %s\n", path); closedir(d); return -1; }
    }
    closedir(d);
    return total;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) {
    printf("usage: load --model DIR [--engine SO] [--reps 3] [--context 8192]\n"
           "Engine load time from a warm page cache, GB/s, VRAM after load and per 1k tokens of KV (see the "
           "source header).\n");
}

static uint64_t vram_of(const llmr_engine_api *api, llmr_engine_model *m) {
    llmr_engine_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    api->stats(m, &s);
    return s.vram_bytes;
}

int main(int argc, char **argv) {
    const char *model = NULL;
    char engine[4096] = "";
    int reps = 3, ctx = 8192;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        if (!v) { fprintf(stderr, "load: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--engine")) snprintf(engine, sizeof engine, "%s", v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--context")) ctx = atoi(v);
        else { fprintf(stderr, "load: unknown option %s (see --help)\n", a); return 2; }
        i++;
    }
    if (!model || reps < 1 || reps > 50 || ctx < 2) { usage(); return 2; }
    void *h = NULL;
    const llmr_engine_api *api = NULL;
    const int orc = bench_open_engine("load", engine, sizeof engine, &h, &api);
    if (orc) return orc;

    const double tw = now_s();
    const long long bytes = warm_cache(model);
    if (bytes <= 0) { fprintf(stderr, "load: no *.safetensors bytes read from %s\n", model); return 1; }
    const double warm_s = now_s() - tw;
    printf("model %s: %.2f GB of safetensors; page-cache read by one thread %.2f s (%.1f GB/s)\n", model, bytes / 1e9,
           warm_s, bytes / 1e9 / warm_s);

    char err[1024];
    llmr_model_descriptor d = {sizeof d, "bench", "safetensors", "gptoss", "GptOssForCausalLM", model, NULL};
    llmr_load_params lp = {sizeof lp, 0, 0, (uint32_t)ctx, 1, NULL};
    double t[50];
    uint64_t vram = 0;
    for (int r = 0; r < reps; r++) {
        llmr_engine_model *m = NULL;
        const double t0 = now_s();
        llmr_engine_status st = api->load(&d, &lp, &m, err, sizeof err);
        t[r] = now_s() - t0;
        if (st == LLMR_ENGINE_UNSUPPORTED) { printf("SKIP load: %s\n", err); return 0; }
        if (st != LLMR_ENGINE_OK) { fprintf(stderr, "load: %s: %s\n", llmr_engine_status_name(st), err); return 1; }
        vram = vram_of(api, m);
        api->unload(m);
    }
    uint64_t e2 = 0, e1 = 0;
    llmr_load_params lh = lp;
    lh.max_context = (uint32_t)(ctx / 2);
    if (api->estimate_vram(&d, &lp, &e2, err, sizeof err) != LLMR_ENGINE_OK ||
        api->estimate_vram(&d, &lh, &e1, err, sizeof err) != LLMR_ENGINE_OK) {
        fprintf(stderr, "load: estimate_vram: %s\n", err);
        return 1;
    }
    printf("KV cache (estimate_vram at context %d vs %d): %.1f MB per 1k tokens\n", ctx, ctx / 2,
           ((double)e2 - (double)e1) / (double)(ctx - ctx / 2) * 1000.0 / 1e6);
    double sorted[50];
    memcpy(sorted, t, sizeof(double) * (size_t)reps);
    qsort(sorted, (size_t)reps, sizeof(double), cmp_d);
    printf("%6s %10s %10s %12s\n", "load", "seconds", "GB/s", "VRAM GB");
    for (int r = 0; r < reps; r++) printf("%6d %10.3f %10.2f %12.2f\n", r + 1, t[r], bytes / 1e9 / t[r], vram / 1e9);
    printf("best %.3f s (%.2f GB/s), median %.3f s; VRAM after load %.2f GB (context %d, 1 session planned)\n",
           sorted[0], bytes / 1e9 / sorted[0], sorted[reps / 2], vram / 1e9, ctx);
    return 0;
}
