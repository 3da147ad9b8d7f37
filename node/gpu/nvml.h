/* nvml.h — NVIDIA Management Library, loaded at run time with dlopen.
 *
 * The node must run (and report "no GPU") on machines without a driver, so it never links
 * libnvidia-ml or libcuda: this module dlopens libnvidia-ml.so.1 (or $LLMR_NVML_LIB, which tests
 * point at a fake) and resolves the few entry points it needs. Used by the resource manager
 * (node/engine/resource.c) and the node's GPU inventory.
 *
 * Thread-safety: NVML itself is thread-safe; a handle may be used from several threads. */
#ifndef LLMR_NVML_H
#define LLMR_NVML_H

#include <stddef.h>
#include <stdint.h>

typedef struct llmr_nvml llmr_nvml;

typedef struct llmr_gpu_info {
    unsigned index;
    char name[96];          /* "NVIDIA H100 80GB HBM3" */
    char uuid[96];          /* "GPU-…" */
    uint64_t mem_total;     /* bytes */
    uint64_t mem_free;
    uint64_t mem_used;
    int cc_major, cc_minor; /* CUDA compute capability, e.g. 9.0 */
} llmr_gpu_info;

/* Loads the library and calls nvmlInit. On failure returns NULL and writes "no NVML: <dlerror>" (or
 * "NVML init failed: <reason>") into err. Library: $LLMR_NVML_LIB when set, else libnvidia-ml.so.1. */
llmr_nvml *llmr_nvml_open(char *err, size_t err_size);

/* Shuts NVML down and unloads the library. Accepts NULL. */
void llmr_nvml_close(llmr_nvml *n);

/* Number of GPUs. Returns 0 on success, -1 with err filled on failure. */
int llmr_nvml_device_count(llmr_nvml *n, unsigned *count_out, char *err, size_t err_size);

/* Everything about GPU `index`. Returns 0 on success, -1 with err naming the call that failed. */
int llmr_nvml_device_info(llmr_nvml *n, unsigned index, llmr_gpu_info *out, char *err, size_t err_size);

/* Memory of GPU `index` only (cheap; what the resource poller calls every second). */
int llmr_nvml_memory(llmr_nvml *n, unsigned index, uint64_t *total, uint64_t *used, char *err, size_t err_size);

/* Driver version string, e.g. "550.54.15". */
int llmr_nvml_driver_version(llmr_nvml *n, char *buf, size_t buf_size, char *err, size_t err_size);

#endif
