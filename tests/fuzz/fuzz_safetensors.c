/* libFuzzer target: the safetensors header parser never crashes, leaks or hangs, and a header it
 * accepts satisfies every invariant the loaders rely on (tensors tile the data section, byte ranges
 * equal shape x dtype, lookups by name find each tensor).
 * Input: a whole file (8-byte length + JSON header + data); the file size is the input size.
 *   make fuzz && build/fuzz/fuzz_safetensors -max_total_time=60 tests/fuzz/corpus/safetensors */
// fuzz-sources: common/safetensors.c common/errmsg.c
#include "common/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    llmr_safetensors *st = NULL;
    char err[512];
    err[0] = 0;
    llmr_st_status s = llmr_st_parse(data, size, size, &st, err, sizeof err);
    if (s != LLMR_ST_OK) {
        if (st || err[0] == 0 || !llmr_st_strerror(s)) abort(); /* a failure says why, leaves *out NULL */
        return 0;
    }
    if (!st) abort();
    uint64_t data_off = llmr_st_data_offset(st), expect = 0;
    if (data_off < 8 || data_off > size || llmr_st_file_size(st) != size) abort();
    for (size_t i = 0; i < llmr_st_count(st); i++) {
        const llmr_st_tensor *t = llmr_st_at(st, i);
        if (!t || !t->name || t->begin != expect || t->end < t->begin) abort();
        if (t->ndim < 0 || t->ndim > LLMR_ST_MAX_DIMS || (unsigned)t->dtype >= LLMR_ST_DTYPE_COUNT) abort();
        uint64_t bits = llmr_st_numel(t) * llmr_st_dtype_bits(t->dtype);
        if (bits / 8 != t->end - t->begin || bits % 8) abort();
        if (llmr_st_find(st, t->name) != t) abort();
        expect = t->end;
    }
    if (data_off + expect != size) abort(); /* the last tensor ends at the end of the file */
    (void)llmr_st_metadata(st, "format");
    llmr_st_destroy(st);
    return 0;
}
