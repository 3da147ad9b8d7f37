/* gpu_inventory.h — the GPUs this node reports to the router (issue 4 "GPU inventory").
 *
 * With --gpu auto the inventory asks NVML (node/gpu/nvml.h, loaded with dlopen: the node binary
 * never links libnvidia-ml or libcuda) for each GPU's name, uuid, total and free memory, compute
 * capability and the driver version. A host without a driver, or --gpu none, gives an empty
 * inventory and a note saying why ("no GPU: --gpu none", "no NVML: libnvidia-ml.so.1: cannot open
 * ..."), which the node logs at start: it still runs and registers (the router decides whether a
 * GPU-less node may join).
 *
 * Thread-safety: refresh and the JSON builders lock the inventory; the heartbeat thread refreshes
 * memory while HTTP handlers read. */
#ifndef LLMR_NODE_GPU_INVENTORY_H
#define LLMR_NODE_GPU_INVENTORY_H

#include <jansson.h>
#include <stddef.h>

#include "node/gpu/nvml.h"

typedef struct llmr_gpu_inventory llmr_gpu_inventory; /* opaque */

/* mode: "auto" (NVML when present) or "none" (never look). Returns NULL only for a bad mode (err
 * names it) or when out of memory; no GPU is not an error (see llmr_gpu_inventory_note). */
llmr_gpu_inventory *llmr_gpu_inventory_create(const char *mode, char *err, size_t err_size);
/* Frees the inventory and closes NVML. Accepts NULL. */
void llmr_gpu_inventory_destroy(llmr_gpu_inventory *inv);

/* Number of GPUs found (0 on a GPU-less host). */
size_t llmr_gpu_inventory_count(llmr_gpu_inventory *inv);
/* Copies GPU i into *out. Returns 0, or -1 when i is out of range. */
int llmr_gpu_inventory_get(llmr_gpu_inventory *inv, size_t i, llmr_gpu_info *out);
/* Why there is no GPU ("" when there is at least one). */
const char *llmr_gpu_inventory_note(const llmr_gpu_inventory *inv);
/* The backend engines must support here: "cuda" with GPUs, "cpu" without. */
const char *llmr_gpu_inventory_backend(const llmr_gpu_inventory *inv);

/* Re-reads free memory of every GPU. Returns 0, -1 when NVML failed (the old values are kept). */
int llmr_gpu_inventory_refresh(llmr_gpu_inventory *inv);

/* The registration "gpus" array (schema/node-register.request): index, name, uuid,
 * memory_total_bytes, memory_free_bytes, compute_capability, driver_version, backend. */
json_t *llmr_gpu_inventory_register_json(llmr_gpu_inventory *inv);
/* The heartbeat "gpus" array: index, memory_total_bytes, memory_free_bytes. */
json_t *llmr_gpu_inventory_heartbeat_json(llmr_gpu_inventory *inv);

#endif
