/* libFuzzer target: command-line parsing never crashes or reads past argv, and what it accepts lands
 * in the targets with the declared types. Input: argument strings separated by NUL bytes (at most 16).
 * Run with -close_fd_mask=3: refused flags print their message.
 *   make fuzz && build/fuzz/fuzz_options -close_fd_mask=3 -max_total_time=60 tests/fuzz/corpus/options */
// fuzz-sources: common/options.c
#include "common/options.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[18] = {"prog"};
    int argc = 1;
    for (char *p = buf; p <= buf + size && argc < 17; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;
    const char *listen = (const char *)"unset";
    int port = -7, verbose = -7;
    llmr_option opts[] = {
        {"listen", NULL, LLMR_OPT_STRING, "127.0.0.1:8080", "where to listen", &listen},
        {"port", NULL, LLMR_OPT_INT, "80", "a port", &port},
        {"verbose", NULL, LLMR_OPT_BOOL, NULL, "more logs", &verbose},
    };
    int rc = llmr_options_parse("prog", "fuzz", opts, 3, argc, argv);
    if (rc < -1 || rc > 1) abort();
    if (rc == 0) {
        if (!listen || (verbose != 0 && verbose != 1)) abort();
        /* a string target points into argv or at the default, never elsewhere */
        if (strcmp(listen, "127.0.0.1:8080") != 0 && (listen < buf || listen > buf + size)) abort();
    }
    free(buf);
    return 0;
}
