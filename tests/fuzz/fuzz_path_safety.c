/* libFuzzer target: llmr_path_is_safe_n agrees with a plain restatement of its rules (path_safety.h),
 * and never reads past len. The input is copied into an exact-size heap buffer so ASan sees overreads.
 *   make fuzz && build/fuzz/fuzz_path_safety -max_total_time=60 tests/fuzz/corpus/path_safety */
// fuzz-sources: common/path_safety.c
#include "common/path_safety.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The rules, written again the slow way: split on '/', judge each segment. */
static int model_safe(const char *p, size_t n) {
    if (n == 0 || n > LLMR_PATH_MAX_LEN || p[0] == '/') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '\\') return 0;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/') continue;
        size_t len = i - start;
        if (len == 0) return 0;
        if ((len == 1 && p[start] == '.') || (len == 2 && p[start] == '.' && p[start + 1] == '.')) return 0;
        start = i + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    char err[128];
    err[0] = 0;
    int ok = llmr_path_is_safe_n(p, size, err, sizeof err);
    if (ok != model_safe(p, size)) abort();
    if (!ok && err[0] == 0) abort(); /* a rejection names its rule */
    if (!memchr(p, 0, size)) {
        char *z = malloc(size + 1);
        if (z) {
            memcpy(z, p, size);
            z[size] = 0;
            if (llmr_path_is_safe(z, NULL, 0) != ok) abort(); /* NULL err buffer is allowed */
            free(z);
        }
    }
    free(p);
    return 0;
}
