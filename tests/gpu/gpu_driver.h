/* gpu_driver.h — what the GPU test drivers in plain C (gptoss_parity, gptoss_batching) share: one
 * printed line per check with the counts main() reports, a fatal error that names the driver, a
 * monotonic clock, and paths beside the build. Define DRIVER_NAME (the binary's name, a string)
 * before including; the functions are static, one copy per driver. */
#ifndef LLMR_TESTS_GPU_DRIVER_H
#define LLMR_TESTS_GPU_DRIVER_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DRIVER_NAME
#error "define DRIVER_NAME before including gpu_driver.h"
#endif

static int n_checks, n_failed;

/* Prints "ok" or "FAIL" and the message; counts it. */
static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%-4s ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    n_checks++;
    if (!ok) n_failed++;
}

/* A setup failure (not a failed check): the message on stderr, exit status 2. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, DRIVER_NAME ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static double now_s(void) __attribute__((unused));
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One environment variable set (value NULL: unset) for the engine load that reads it, and put back as the caller had
 * it afterwards, so a run with the engine's settings in its environment keeps them for the checks after. */
typedef struct {
    const char *name;
    int had;
    char old[256];
} env_var;
static env_var env_set(const char *name, const char *value) __attribute__((unused));
static env_var env_set(const char *name, const char *value) {
    env_var v = {name, 0, ""};
    const char *cur = getenv(name);
    if (cur) {
        if (strlen(cur) >= sizeof v.old) die("%s is longer than %zu bytes", name, sizeof v.old - 1);
        v.had = 1;
        strcpy(v.old, cur);
    }
    if (value ? setenv(name, value, 1) != 0 : unsetenv(name) != 0) die("could not set %s", name);
    return v;
}
static void env_restore(const env_var *v) __attribute__((unused));
static void env_restore(const env_var *v) {
    if (v->had ? setenv(v->name, v->old, 1) != 0 : unsetenv(v->name) != 0) die("could not restore %s", v->name);
}

/* Path next to this binary: build/tests/gpu/NAME -> build/<rel>. */
static void beside_build(char *out, size_t n, const char *rel) __attribute__((unused));
static void beside_build(char *out, size_t n, const char *rel) {
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) die("cannot read /proc/self/exe");
    exe[len] = 0;
    for (int i = 0; i < 3; i++) {
        char *s = strrchr(exe, '/');
        if (s) *s = 0;
    }
    if (snprintf(out, n, "%s/%s", exe, rel) >= (int)n) die("path too long");
}

#endif
