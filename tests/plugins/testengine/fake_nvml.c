/* fake_nvml.c — a stand-in for libnvidia-ml.so.1, built into the test plugin's library so that tests
 * can point LLMR_NVML_LIB at it and exercise node/gpu/nvml.c and the real resource provider on a
 * machine without a GPU. Behaviour from the environment (read at each call):
 *   FAKE_NVML_FAIL_INIT=1   nvmlInit_v2 fails (NVML_ERROR_DRIVER_NOT_LOADED = 9)
 *   FAKE_NVML_COUNT=N       devices (default 1)
 *   FAKE_NVML_TOTAL=bytes   memory per device (default 80 GiB)
 *   FAKE_NVML_USED=bytes    used memory (default 1 GiB)
 * Signatures follow NVIDIA's documented NVML API (opaque device handles). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

typedef struct fake_memory { unsigned long long total, free, used; } fake_memory;

static unsigned long long env_u64(const char *k, unsigned long long d) {
    const char *v = getenv(k);
    return v && *v ? strtoull(v, NULL, 10) : d;
}

__attribute__((visibility("default"))) int nvmlInit_v2(void) {
    const char *f = getenv("FAKE_NVML_FAIL_INIT");
    return f && *f == '1' ? 9 : 0;
}
__attribute__((visibility("default"))) int nvmlShutdown(void) { return 0; }
__attribute__((visibility("default"))) const char *nvmlErrorString(int r) {
    return r == 9 ? "Driver Not Loaded" : r == 2 ? "Invalid Argument" : "Unknown Error";
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned *c) {
    *c = (unsigned)env_u64("FAKE_NVML_COUNT", 1);
    return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {
    if (i >= env_u64("FAKE_NVML_COUNT", 1)) return 2;
    *d = (void *)(uintptr_t)(i + 1);
    return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void *d, char *buf, unsigned len) {
    snprintf(buf, len, "Fake GPU %lu", (unsigned long)(uintptr_t)d - 1);
    return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void *d, char *buf, unsigned len) {
    snprintf(buf, len, "GPU-fake-%04lu", (unsigned long)(uintptr_t)d - 1);
    return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void *d, fake_memory *m) {
    (void)d;
    m->total = env_u64("FAKE_NVML_TOTAL", 80ull << 30);
    m->used = env_u64("FAKE_NVML_USED", 1ull << 30);
    m->free = m->used < m->total ? m->total - m->used : 0;
    return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCudaComputeCapability(void *d, int *maj, int *min) {
    (void)d;
    *maj = 9;
    *min = 0;
    return 0;
}
__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char *buf, unsigned len) {
    snprintf(buf, len, "999.99.99-fake");
    return 0;
}
