/* libFuzzer target: manifest.json validation never crashes, leaks or accepts an invalid manifest
 * silently (an accepted manifest must satisfy the invariants the host relies on).
 * fuzz-sources below are compiled together with this file by `make fuzz`. */
// fuzz-sources: node/engine/engine_manifest.c
#include "node/engine/engine_manifest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    llmr_engine_manifest *m = NULL;
    char err[512];
    int rc = llmr_engine_manifest_parse((const char *)data, size, "/plugins/x", "fuzz", &m, err, sizeof err);
    if (rc == 0) {
        if (!m || !m->id || !m->version || !m->library || strchr(m->library, '/') || m->n_runtimes == 0 ||
            m->n_architectures == 0 || m->n_gpu_backends == 0 || (m->n_formats == 0 && m->n_artifacts == 0))
            abort();
        llmr_engine_manifest_free(m);
    } else if (m || err[0] == 0) {
        abort(); /* failure must leave *out untouched and say why */
    }
    return 0;
}
