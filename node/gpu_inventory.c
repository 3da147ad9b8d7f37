/* gpu_inventory.c — see gpu_inventory.h. */
#include "node/gpu_inventory.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define MAX_GPUS 64

struct llmr_gpu_inventory {
    pthread_mutex_t mu;
    llmr_nvml *nvml;
    llmr_gpu_info gpus[MAX_GPUS];
    size_t n;
    char driver[80];
    char note[512];
};

llmr_gpu_inventory *llmr_gpu_inventory_create(const char *mode, char *err, size_t err_size) {
    if (!mode || (strcmp(mode, "auto") != 0 && strcmp(mode, "none") != 0)) {
        if (err && err_size) snprintf(err, err_size, "--gpu: expected auto or none, got '%s'", mode ? mode : "(null)");
        return NULL;
    }
    llmr_gpu_inventory *inv = calloc(1, sizeof *inv);
    if (!inv) { if (err && err_size) snprintf(err, err_size, "out of memory"); return NULL; }
    pthread_mutex_init(&inv->mu, NULL);
    if (strcmp(mode, "none") == 0) {
        snprintf(inv->note, sizeof inv->note, "no GPU: --gpu none");
        return inv;
    }
    char why[384];
    inv->nvml = llmr_nvml_open(why, sizeof why);
    if (!inv->nvml) {
        snprintf(inv->note, sizeof inv->note, "no GPU: %s", why);
        return inv;
    }
    unsigned count = 0;
    if (llmr_nvml_device_count(inv->nvml, &count, why, sizeof why) != 0) {
        snprintf(inv->note, sizeof inv->note, "no GPU: %s", why);
        return inv;
    }
    if (llmr_nvml_driver_version(inv->nvml, inv->driver, sizeof inv->driver, why, sizeof why) != 0)
        inv->driver[0] = '\0';
    for (unsigned i = 0; i < count && inv->n < MAX_GPUS; i++) {
        if (llmr_nvml_device_info(inv->nvml, i, &inv->gpus[inv->n], why, sizeof why) != 0) {
            log_warn("GPU %u skipped: %s", i, why);
            continue;
        }
        inv->n++;
    }
    if (inv->n == 0) snprintf(inv->note, sizeof inv->note, "no GPU: NVML reports %u device(s), none readable", count);
    return inv;
}

void llmr_gpu_inventory_destroy(llmr_gpu_inventory *inv) {
    if (!inv) return;
    llmr_nvml_close(inv->nvml);
    pthread_mutex_destroy(&inv->mu);
    free(inv);
}

size_t llmr_gpu_inventory_count(llmr_gpu_inventory *inv) {
    pthread_mutex_lock(&inv->mu);
    size_t n = inv->n;
    pthread_mutex_unlock(&inv->mu);
    return n;
}

int llmr_gpu_inventory_get(llmr_gpu_inventory *inv, size_t i, llmr_gpu_info *out) {
    pthread_mutex_lock(&inv->mu);
    int ok = i < inv->n;
    if (ok) *out = inv->gpus[i];
    pthread_mutex_unlock(&inv->mu);
    return ok ? 0 : -1;
}

const char *llmr_gpu_inventory_note(const llmr_gpu_inventory *inv) { return inv->note; }

const char *llmr_gpu_inventory_backend(const llmr_gpu_inventory *inv) { return inv->n ? "cuda" : "cpu"; }

int llmr_gpu_inventory_refresh(llmr_gpu_inventory *inv) {
    int rc = 0;
    pthread_mutex_lock(&inv->mu);
    for (size_t i = 0; i < inv->n; i++) {
        uint64_t total, used;
        char why[256];
        if (llmr_nvml_memory(inv->nvml, inv->gpus[i].index, &total, &used, why, sizeof why) != 0) { rc = -1; continue; }
        inv->gpus[i].mem_total = total;
        inv->gpus[i].mem_used = used;
        inv->gpus[i].mem_free = total > used ? total - used : 0;
    }
    pthread_mutex_unlock(&inv->mu);
    return rc;
}

json_t *llmr_gpu_inventory_register_json(llmr_gpu_inventory *inv) {
    json_t *arr = json_array();
    pthread_mutex_lock(&inv->mu);
    for (size_t i = 0; arr && i < inv->n; i++) {
        const llmr_gpu_info *g = &inv->gpus[i];
        json_t *o = json_object();
        char cc[32];
        json_object_set_new(o, "index", json_integer(g->index));
        json_object_set_new(o, "name", json_string(g->name));
        if (g->uuid[0]) json_object_set_new(o, "uuid", json_string(g->uuid));
        json_object_set_new(o, "memory_total_bytes", json_integer((json_int_t)g->mem_total));
        json_object_set_new(o, "memory_free_bytes", json_integer((json_int_t)g->mem_free));
        if (g->cc_major >= 0) {
            snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
            json_object_set_new(o, "compute_capability", json_string(cc));
        }
        if (inv->driver[0]) json_object_set_new(o, "driver_version", json_string(inv->driver));
        json_object_set_new(o, "backend", json_string("cuda"));
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&inv->mu);
    return arr;
}

json_t *llmr_gpu_inventory_heartbeat_json(llmr_gpu_inventory *inv) {
    json_t *arr = json_array();
    pthread_mutex_lock(&inv->mu);
    for (size_t i = 0; arr && i < inv->n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "index", json_integer(inv->gpus[i].index));
        json_object_set_new(o, "memory_total_bytes", json_integer((json_int_t)inv->gpus[i].mem_total));
        json_object_set_new(o, "memory_free_bytes", json_integer((json_int_t)inv->gpus[i].mem_free));
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&inv->mu);
    return arr;
}
