/* libFuzzer target: gpt-oss config.json parsing never crashes, leaks or hangs, names the field it
 * refuses, and a config it accepts yields finite YaRN rotary tables (what every engine computes first).
 *   make fuzz && build/fuzz/fuzz_gptoss_config -max_total_time=60 tests/fuzz/corpus/gptoss_config */
// fuzz-sources: common/gptoss/config.c common/errmsg.c
#include "common/gptoss/config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gptoss_config c;
    char err[512];
    err[0] = 0;
    if (gptoss_config_parse((const char *)data, size, &c, err, sizeof err) != 0) {
        if (err[0] == 0) abort();
        return 0;
    }
    if (c.num_layers < 1 || c.num_layers > GPTOSS_MAX_LAYERS || c.head_dim <= 0 || c.head_dim % 2 || c.vocab_size <= 0 ||
        c.experts_per_token < 1 || c.experts_per_token > c.num_experts || c.num_heads % c.num_kv_heads)
        abort();
    if (c.head_dim > 4096) return 0; /* keep the table small; the math is the same */
    float *inv = malloc((size_t)(c.head_dim / 2) * sizeof *inv), mscale;
    if (!inv) return 0;
    gptoss_yarn_inv_freq(&c, inv, &mscale);
    for (int i = 0; i < c.head_dim / 2; i++)
        if (isnan(inv[i])) abort();
    if (!isfinite(mscale)) abort();
    free(inv);
    return 0;
}
