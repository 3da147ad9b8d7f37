/* libFuzzer target: the CPU sampler on arbitrary parameters and logits (NaN, inf, huge penalties,
 * top_k past the vocabulary...) always returns an id inside the vocabulary, never crashes, and is
 * deterministic for a seed.
 * Input: 32 bytes of llmr_sampling_params fields (temperature, top_k, top_p, min_p, seed, frequency
 * and presence penalties), then up to 4096 float logits, raw.
 *   make fuzz && build/fuzz/fuzz_sampling -max_total_time=60 tests/fuzz/corpus/sampling */
// fuzz-sources: common/sampling.c
#include "common/sampling.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEAD 32

static int32_t run(const llmr_sampling_params *p, const float *logits, int n, float *scratch) {
    llmr_sampler *s = llmr_sampler_create(p, n);
    if (!s) abort();
    int32_t t = -1;
    for (int step = 0; step < 3; step++) { /* a few steps so the penalties take effect */
        memcpy(scratch, logits, (size_t)n * sizeof *scratch);
        t = llmr_sampler_sample(s, scratch);
        if (t < 0 || t >= n) abort();
        llmr_sampler_accept(s, t);
    }
    llmr_sampler_accept(s, -5); /* ids outside the vocabulary are ignored */
    llmr_sampler_accept(s, n);
    llmr_sampler_destroy(s);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < HEAD + sizeof(float)) return 0;
    llmr_sampling_params p = {.struct_size = sizeof p};
    memcpy(&p.temperature, data, 4);
    memcpy(&p.top_k, data + 4, 4);
    memcpy(&p.top_p, data + 8, 4);
    memcpy(&p.min_p, data + 12, 4);
    memcpy(&p.seed, data + 16, 8);
    memcpy(&p.frequency_penalty, data + 24, 4);
    memcpy(&p.presence_penalty, data + 28, 4);
    int n = (int)((size - HEAD) / sizeof(float));
    if (n > 4096) n = 4096;
    float *logits = malloc((size_t)n * sizeof *logits), *scratch = malloc((size_t)n * sizeof *scratch);
    if (!logits || !scratch) abort();
    memcpy(logits, data + HEAD, (size_t)n * sizeof *logits);
    if (run(&p, logits, n, scratch) != run(&p, logits, n, scratch)) abort(); /* same seed, same token */
    if (llmr_sampler_create(&p, 0)) abort();                                   /* n_vocab <= 0: NULL */
    free(logits);
    free(scratch);
    return 0;
}
