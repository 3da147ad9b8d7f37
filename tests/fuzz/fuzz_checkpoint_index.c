/* libFuzzer target: opening a checkpoint folder whose model.safetensors.index.json is the input never
 * crashes, leaks or hangs, always says why it refused, and an index it accepts agrees with the shards.
 * The folder (under $TMPDIR) holds two fixed valid shards: s1.safetensors {a, b} and s2.safetensors {c}.
 *   make fuzz && build/fuzz/fuzz_checkpoint_index -max_total_time=60 tests/fuzz/corpus/checkpoint_index */
// fuzz-sources: common/checkpoint.c common/safetensors.c common/path_safety.c common/errmsg.c
#include "common/checkpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void write_file(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

/* A shard whose header is json and whose data section is data_len zero bytes. */
static void write_shard(const char *name, const char *json, size_t data_len) {
    size_t hl = strlen(json), n = 8 + hl + data_len;
    uint8_t *b = calloc(1, n);
    if (!b) abort();
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    write_file(name, b, n);
    free(b);
}

/* Leaves no temporary folder behind when the fuzzer exits. */
static void cleanup(void) {
    static const char *files[] = {"s1.safetensors", "s2.safetensors", "model.safetensors.index.json"};
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/llmr-fuzz-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) abort();
    atexit(cleanup);
    write_shard("s1.safetensors",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}", 16);
    write_shard("s2.safetensors", "{\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_file("model.safetensors.index.json", data, size);
    llmr_checkpoint *ck = NULL;
    char err[1024];
    err[0] = 0;
    if (llmr_checkpoint_open(dir, &ck, err, sizeof err) != 0) {
        if (ck || err[0] == 0) abort();
        return 0;
    }
    /* Accepted: the shards it names hold exactly the tensors listed for them. */
    size_t want = 0;
    for (size_t i = 0; i < llmr_checkpoint_shard_count(ck); i++) {
        const char *name = llmr_checkpoint_shard_name(ck, i);
        if (strcmp(name, "s1.safetensors") == 0) want += 2;
        else if (strcmp(name, "s2.safetensors") == 0) want += 1;
        else abort();
    }
    if (llmr_checkpoint_tensor_count(ck) != want) abort();
    static const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        size_t shard;
        const llmr_st_tensor *t = llmr_checkpoint_find(ck, names[i], &shard);
        if (t && strcmp(t->name, names[i]) != 0) abort();
        if (t && !llmr_checkpoint_data(ck, names[i], NULL, err, sizeof err)) abort();
    }
    llmr_checkpoint_destroy(ck);
    return 0;
}
