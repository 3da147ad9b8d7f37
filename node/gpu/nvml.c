/* nvml.c — see nvml.h. Prototypes below follow NVIDIA's documented NVML C API; only the calls we
 * use are resolved, and nvmlDevice_t stays an opaque pointer. */
#include "node/gpu/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;              /* nvmlReturn_t; 0 = NVML_SUCCESS */
typedef void *nvml_device;            /* nvmlDevice_t */
typedef struct nvml_memory { unsigned long long total, free, used; } nvml_memory; /* nvmlMemory_t */

struct llmr_nvml {
    void *lib;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*device_count)(unsigned *);
    nvml_return (*handle_by_index)(unsigned, nvml_device *);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*memory)(nvml_device, nvml_memory *);
    nvml_return (*cc)(nvml_device, int *, int *);
    nvml_return (*driver_version)(char *, unsigned);
};

static const char *why(const llmr_nvml *n, nvml_return r) {
    const char *s = n->error_string ? n->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

static int fail(char *err, size_t err_size, const char *fmt, const char *a, int code, const char *b) {
    if (err && err_size) snprintf(err, err_size, fmt, a, code, b);
    return -1;
}

llmr_nvml *llmr_nvml_open(char *err, size_t err_size) {
    const char *path = getenv("LLMR_NVML_LIB");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        if (err && err_size) snprintf(err, err_size, "no NVML: %s", dlerror());
        return NULL;
    }
    llmr_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        dlclose(lib);
        if (err && err_size) snprintf(err, err_size, "no NVML: out of memory");
        return NULL;
    }
    n->lib = lib;
    struct { void **slot; const char *sym; int required; } syms[] = {
        {(void **)&n->init, "nvmlInit_v2", 1},
        {(void **)&n->shutdown, "nvmlShutdown", 1},
        {(void **)&n->error_string, "nvmlErrorString", 0},
        {(void **)&n->device_count, "nvmlDeviceGetCount_v2", 1},
        {(void **)&n->handle_by_index, "nvmlDeviceGetHandleByIndex_v2", 1},
        {(void **)&n->name, "nvmlDeviceGetName", 1},
        {(void **)&n->uuid, "nvmlDeviceGetUUID", 1},
        {(void **)&n->memory, "nvmlDeviceGetMemoryInfo", 1},
        {(void **)&n->cc, "nvmlDeviceGetCudaComputeCapability", 1},
        {(void **)&n->driver_version, "nvmlSystemGetDriverVersion", 1},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(lib, syms[i].sym);
        if (!*syms[i].slot && syms[i].required) {
            if (err && err_size) snprintf(err, err_size, "no NVML: %s lacks %s", path, syms[i].sym);
            dlclose(lib);
            free(n);
            return NULL;
        }
    }
    nvml_return r = n->init();
    if (r != 0) {
        fail(err, err_size, "NVML init failed: %s (code %d)%s", why(n, r), r, "");
        dlclose(lib);
        free(n);
        return NULL;
    }
    return n;
}

void llmr_nvml_close(llmr_nvml *n) {
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

int llmr_nvml_device_count(llmr_nvml *n, unsigned *count_out, char *err, size_t err_size) {
    unsigned c = 0;
    nvml_return r = n->device_count(&c);
    if (r != 0) return fail(err, err_size, "nvmlDeviceGetCount: %s (code %d)%s", why(n, r), r, "");
    *count_out = c;
    return 0;
}

static int device(llmr_nvml *n, unsigned index, nvml_device *d, char *err, size_t err_size) {
    nvml_return r = n->handle_by_index(index, d);
    if (r != 0) {
        if (err && err_size) snprintf(err, err_size, "nvmlDeviceGetHandleByIndex(%u): %s (code %d)", index, why(n, r), r);
        return -1;
    }
    return 0;
}

int llmr_nvml_memory(llmr_nvml *n, unsigned index, uint64_t *total, uint64_t *used, char *err, size_t err_size) {
    nvml_device d;
    if (device(n, index, &d, err, err_size) != 0) return -1;
    nvml_memory m;
    nvml_return r = n->memory(d, &m);
    if (r != 0) return fail(err, err_size, "nvmlDeviceGetMemoryInfo: %s (code %d)%s", why(n, r), r, "");
    *total = m.total;
    *used = m.used;
    return 0;
}

int llmr_nvml_device_info(llmr_nvml *n, unsigned index, llmr_gpu_info *out, char *err, size_t err_size) {
    llmr_gpu_info g;
    memset(&g, 0, sizeof g);
    g.index = index;
    nvml_device d;
    if (device(n, index, &d, err, err_size) != 0) return -1;
    nvml_return r;
    if ((r = n->name(d, g.name, sizeof g.name)) != 0)
        return fail(err, err_size, "nvmlDeviceGetName: %s (code %d)%s", why(n, r), r, "");
    if ((r = n->uuid(d, g.uuid, sizeof g.uuid)) != 0)
        return fail(err, err_size, "nvmlDeviceGetUUID: %s (code %d)%s", why(n, r), r, "");
    nvml_memory m;
    if ((r = n->memory(d, &m)) != 0)
        return fail(err, err_size, "nvmlDeviceGetMemoryInfo: %s (code %d)%s", why(n, r), r, "");
    if ((r = n->cc(d, &g.cc_major, &g.cc_minor)) != 0)
        return fail(err, err_size, "nvmlDeviceGetCudaComputeCapability: %s (code %d)%s", why(n, r), r, "");
    g.name[sizeof g.name - 1] = 0;
    g.uuid[sizeof g.uuid - 1] = 0;
    g.mem_total = m.total;
    g.mem_free = m.free;
    g.mem_used = m.used;
    *out = g;
    return 0;
}

int llmr_nvml_driver_version(llmr_nvml *n, char *buf, size_t buf_size, char *err, size_t err_size) {
    char v[96] = {0};
    nvml_return r = n->driver_version(v, sizeof v);
    if (r != 0) return fail(err, err_size, "nvmlSystemGetDriverVersion: %s (code %d)%s", why(n, r), r, "");
    v[sizeof v - 1] = 0;
    snprintf(buf, buf_size, "%s", v);
    return 0;
}
