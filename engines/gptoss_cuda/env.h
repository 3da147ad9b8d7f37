/* env.h — the gpt-oss engine's LLMR_GPTOSS_* settings, read from the environment one way (the model's load,
 * the scheduler, the kernels' launchers), so a bad value is said the same way and never taken. Included by .cu files. */
#ifndef GPTOSS_CUDA_ENV_H
#define GPTOSS_CUDA_ENV_H

#include <stdio.h>
#include <stdlib.h>

/* The integer in environment variable `name` when it is one in lo..hi; dflt when unset or empty, or (with a note on
 * stderr) when it is not. */
static inline int gptoss_env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    const long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "gptoss_cuda: %s=%s ignored (must be %d..%d); using %d\n", name, v, lo, hi, dflt);
        return dflt;
    }
    return (int)x;
}

#endif
