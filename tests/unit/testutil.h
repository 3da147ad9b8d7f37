/* Shared helpers for llmr's Check unit tests.
 *
 * Each tests/unit/test_NAME.c is its own binary: it defines its suite and ends with
 * LLMR_TEST_MAIN(suite_fn). A test that cannot run here (missing fixture, no GPU) calls
 * LLMR_SKIP("reason"): it prints a "SKIP ..." line that tests/run_all.sh counts, then passes. */
#ifndef LLMR_TESTUTIL_H
#define LLMR_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLMR_SKIP(...) do { \
    printf("SKIP %s: ", __func__); printf(__VA_ARGS__); printf("\n"); fflush(stdout); return; \
} while (0)

/* Path of the fixture cache (tools/fixtures.sh fills it), e.g. for the real tokenizer.json. */
static inline const char *llmr_test_cache_dir(void) {
    const char *c = getenv("LLMR_CACHE");
    static char buf[4096];
    if (c && *c) return c;
    snprintf(buf, sizeof buf, "%s/.cache/llmr", getenv("HOME") ? getenv("HOME") : "/tmp");
    return buf;
}

/* A fresh temporary directory for one test; the caller removes it. */
static inline char *llmr_test_tmpdir(void) {
    char tmpl[] = "/tmp/llmr-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

#define LLMR_TEST_MAIN(suite_fn) \
    int main(void) { \
        SRunner *sr = srunner_create(suite_fn()); \
        srunner_run_all(sr, CK_NORMAL); \
        int nf = srunner_ntests_failed(sr); \
        srunner_free(sr); \
        return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE; \
    }

#endif
