/* gptoss_bench.h — what the gptoss_cuda benches (decode, load, prefill, throughput) share: opening the
 * engine plugin (by default the one beside the build) and comma lists of positive integers. Static
 * functions: each bench is one program and includes this once. */
#ifndef LLMR_BENCH_GPTOSS_BENCH_H
#define LLMR_BENCH_GPTOSS_BENCH_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llmr_engine.h"

/* Opens the engine at engine[] (empty: build/bench/NAME -> build/engines/gptoss_cuda/libgptoss_cuda.so,
 * written back into engine[]) and gets its ABI table. Returns 0, or the exit status after printing
 * "prog: why" (2: no path, 1: not loadable or not an llmr engine). *handle stays open for dlsym. */
__attribute__((unused)) static int bench_open_engine(const char *prog, char *engine, size_t n, void **handle, const llmr_engine_api **api) {
    if (!engine[0]) {
        char exe[4000];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len <= 0) { fprintf(stderr, "%s: cannot read /proc/self/exe\n", prog); return 2; }
        exe[len] = 0;
        for (int k = 0; k < 2; k++) { char *s = strrchr(exe, '/'); if (s) *s = 0; }
        snprintf(engine, n, "%s/engines/gptoss_cuda/libgptoss_cuda.so", exe);
    }
    void *h = dlopen(engine, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s: dlopen %s: %s\n", prog, engine, dlerror()); return 1; }
    llmr_engine_get_api_fn get = (llmr_engine_get_api_fn)dlsym(h, LLMR_ENGINE_ENTRY_SYMBOL);
    *api = get ? get(LLMR_ENGINE_ABI_VERSION) : NULL;
    if (!*api) { fprintf(stderr, "%s: %s is not an llmr engine\n", prog, engine); return 1; }
    *handle = h;
    return 0;
}

/* "a,b,c" into out[0..cap): the count, or -1 when a value is not in 1..hi. */
__attribute__((unused)) static int bench_parse_list(const char *s, int hi, int *out, int cap) {
    int n = 0;
    for (const char *p = s; *p && n < cap;) {
        out[n] = atoi(p);
        if (out[n] < 1 || out[n] > hi) return -1;
        n++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return n;
}

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median and the 99th percentile of v[0..n) (sorts v; both 0 when n is 0): the benches' inter-token latencies. */
__attribute__((unused)) static void bench_p50_p99(double *v, size_t n, double *p50, double *p99) {
    *p50 = *p99 = 0;
    if (!n) return;
    qsort(v, n, sizeof *v, bench_cmp_double);
    *p50 = v[n / 2];
    *p99 = v[(size_t)((double)(n - 1) * 0.99)];
}

#endif
