/* Helpers for the engine host tests: a private engines folder holding a copy of the test plugin
 * (tests/plugins/testengine, built into $LLMR_BUILD/tests/plugins/testengine), model folders with a
 * testengine.json, and stderr capture to check what the host logs. */
#ifndef LLMR_ENGINE_FIXTURE_H
#define LLMR_ENGINE_FIXTURE_H

#include "llmr_engine.h"
#include "tests/unit/testutil.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static inline const char *fx_build(void) {
    const char *b = getenv("LLMR_BUILD");
    return b && *b ? b : "build";
}

/* Path of the built test plugin library. */
static inline const char *fx_testengine_so(void) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/tests/plugins/testengine/libtestengine.so", fx_build());
    return p;
}

static inline void fx_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static inline char *fx_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

/* Copies a file byte for byte (the plugin's library into a test engines folder). */
static inline void fx_copy(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    ck_assert_msg(in != NULL, "missing %s (run make)", src);
    char tmp[8400];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    FILE *out = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    ck_assert_int_eq(rename(tmp, dst), 0); /* atomic replace, as an installer would do */
}

#define FX_MANIFEST_FMT \
    "{\"id\":\"testengine\",\"version\":\"%s\",\"abi_version\":\"1.0\",\"runtimes\":[\"test\"]," \
    "\"formats\":[\"safetensors\"],\"architectures\":[\"TestForCausalLM\"],\"gpu_backends\":[\"cuda\",\"cpu\"]," \
    "\"library\":\"libtestengine.so\"}"

/* Installs the test plugin as ROOT/NAME with the given manifest version. */
static inline void fx_install(const char *root, const char *name, const char *version) {
    char dir[8192], path[8300], text[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/libtestengine.so", dir);
    fx_copy(fx_testengine_so(), path);
    snprintf(text, sizeof text, FX_MANIFEST_FMT, version);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    char tmp[8400];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fx_write(tmp, text);
    ck_assert_int_eq(rename(tmp, path), 0);
}

/* A model folder ROOT/NAME whose testengine.json is `behaviour` (a JSON object). */
static inline char *fx_model(const char *root, const char *name, const char *behaviour) {
    char dir[8192], path[8300];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/testengine.json", dir);
    fx_write(path, behaviour);
    return strdup(dir);
}

static inline llmr_model_descriptor fx_desc(const char *id, const char *dir) {
    llmr_model_descriptor d = {sizeof d, id, "safetensors", "test", "TestForCausalLM", dir, NULL};
    return d;
}

static inline void fx_rm_rf(const char *path) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", path);
}

static inline double fx_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void fx_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* stderr capture: fx_capture_begin() then fx_capture_end() returns what was logged (malloc'd). */
static int fx_saved_fd = -1;
static char fx_cap_path[64];
static inline void fx_capture_begin(void) {
    snprintf(fx_cap_path, sizeof fx_cap_path, "/tmp/llmr-cap-XXXXXX");
    int fd = mkstemp(fx_cap_path);
    fflush(stderr);
    fx_saved_fd = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}
static inline char *fx_capture_end(void) {
    fflush(stderr);
    dup2(fx_saved_fd, STDERR_FILENO);
    close(fx_saved_fd);
    char *s = fx_read(fx_cap_path);
    unlink(fx_cap_path);
    fputs(s, stderr); /* keep it in the test log too */
    return s;
}

#endif
