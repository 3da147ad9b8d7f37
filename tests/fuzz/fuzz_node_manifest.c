/* libFuzzer target: the node's parsers of router/hub input never crash or leak, and what they accept
 * satisfies what the downloader relies on: model manifests (every file name path-safe and unique,
 * sha256 64 lower-case hex) and the streaming JSON checker (never refuses what jansson accepts, for
 * inputs without NULs and too short to nest past the checker's depth limit; the converse does not
 * hold: jansson also refuses numbers it cannot represent, such as 1e400).
 * fuzz-sources below are compiled together with this file by `make fuzz`. */
// fuzz-sources: node/manifest.c node/json_check.c common/path_safety.c common/errmsg.c
#include "common/path_safety.h"
#include "node/json_check.h"
#include "node/manifest.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_files(const llmr_manifest_file *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char why[128];
        if (!f[i].name || !f[i].url || !llmr_path_is_safe(f[i].name, why, sizeof why) || strlen(f[i].sha256) != 64)
            abort();
        for (size_t k = 0; k < 64; k++)
            if (!strchr("0123456789abcdef", f[i].sha256[k])) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    llmr_manifest *m = NULL;
    char err[512];
    if (llmr_manifest_parse((const char *)data, size, &m, err, sizeof err) == 0) {
        if (!m || !m->id || !*m->id) abort();
        check_files(m->files, m->n_files);
        check_files(m->artifacts, m->n_artifacts);
        for (size_t i = 0; i < m->n_artifacts; i++) if (!m->artifacts[i].backend || !m->artifacts[i].optional) abort();
        llmr_manifest_free(m);
    } else if (m || !err[0]) {
        abort();
    }
    int ours = llmr_json_check((const char *)data, size, err, sizeof err) == 0;
    if (!ours && !memchr(data, 0, size) && !memmem(data, size, "\\u0000", 6) && size < 2 * LLMR_JSON_CHECK_MAX_DEPTH) {
        json_error_t je;
        json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, &je);
        if (j) abort(); /* valid JSON refused */
    }
    return 0;
}
