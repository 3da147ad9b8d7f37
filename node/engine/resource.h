/* resource.h — the node's view of VRAM and RAM (T103–T105).
 *
 * A provider samples memory use; the monitor turns samples into alert state. Two providers exist:
 *   - system: VRAM of one GPU through NVML (node/gpu/nvml.h, dlopened) and RAM from /proc/meminfo;
 *     without NVML it still reports RAM and says why VRAM is unknown;
 *   - fake: values set by a test, or computed by a callback (e.g. from the engines' own accounting).
 * The engine host owns one monitor and polls it every second from its maintenance thread; the alert
 * threshold (default 90%) drives LRU unloading there (see engine_host.h).
 *
 * Thread-safety: a provider is sampled by one thread at a time (the monitor serialises); the fake's
 * setters may be called from any thread. Monitor functions are thread-safe. */
#ifndef LLMR_RESOURCE_H
#define LLMR_RESOURCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct llmr_resource_sample {
    int has_vram;            /* 0: VRAM unknown (no NVML, or a CPU node) */
    uint64_t vram_total, vram_used;
    int has_ram;
    uint64_t ram_total, ram_used; /* used = MemTotal - MemAvailable */
} llmr_resource_sample;

/* The provider interface: a vtable plus its state. */
typedef struct llmr_resource_provider {
    const char *name;                                 /* "nvml+meminfo", "fake" */
    void *ctx;
    /* Fills *out. Returns 0, or -1 with err set when nothing at all could be read. */
    int (*sample)(void *ctx, llmr_resource_sample *out, char *err, size_t err_size);
    void (*destroy)(void *ctx);
} llmr_resource_provider;

/* The system provider for GPU `device`. Never fails for lack of a GPU: VRAM is then reported absent
 * and `note` (if given) receives the reason ("no NVML: …"). Returns NULL only when out of memory. */
llmr_resource_provider *llmr_resource_provider_system_create(unsigned device, char *note, size_t note_size);

/* A fake provider: starts with all values 0 and has_vram = has_ram = 1. */
llmr_resource_provider *llmr_resource_provider_fake_create(void);
void llmr_resource_fake_set(llmr_resource_provider *fake, uint64_t vram_total, uint64_t vram_used,
                            uint64_t ram_total, uint64_t ram_used);
/* When set, vram_used = fn(user) + the value given to llmr_resource_fake_set (so a test can make
 * "device memory" follow what the engines report). fn may be NULL to stop. */
void llmr_resource_fake_set_vram_fn(llmr_resource_provider *fake, uint64_t (*fn)(void *user), void *user);
/* Makes the next samples fail with this message (NULL: succeed again). */
void llmr_resource_fake_fail(llmr_resource_provider *fake, const char *message);

/* Frees a provider (calls its destroy). Accepts NULL. */
void llmr_resource_provider_destroy(llmr_resource_provider *p);

/* Parses /proc/meminfo-format text: ram_total = MemTotal, ram_used = MemTotal - MemAvailable
 * (MemFree + Buffers + Cached when MemAvailable is absent). Returns 0, or -1 if MemTotal is missing. */
int llmr_meminfo_parse(const char *text, uint64_t *total, uint64_t *used);

/* --- monitor --------------------------------------------------------------------------------- */

typedef struct llmr_resource_monitor llmr_resource_monitor;

typedef struct llmr_resource_state {
    llmr_resource_sample last;   /* latest successful sample */
    int valid;                   /* 1 once a sample succeeded */
    double vram_ratio, ram_ratio; /* used/total, 0 when unknown */
    int vram_alert, ram_alert;   /* currently at or above the threshold */
    uint64_t vram_alerts_total, ram_alerts_total; /* times an alert began */
    uint64_t sample_failures;
    double threshold;
} llmr_resource_state;

/* Takes ownership of provider. threshold in (0,1], e.g. 0.9. Returns NULL when out of memory. */
llmr_resource_monitor *llmr_resource_monitor_create(llmr_resource_provider *provider, double threshold);
void llmr_resource_monitor_destroy(llmr_resource_monitor *m); /* accepts NULL; frees the provider */

/* Samples now and updates the alert state; logs a WARN when an alert begins and an INFO when it ends.
 * Returns 0, or -1 (state unchanged except sample_failures; err set) when the provider failed. */
int llmr_resource_monitor_poll(llmr_resource_monitor *m, llmr_resource_state *out, char *err, size_t err_size);

/* The state as of the last poll. */
void llmr_resource_monitor_state(llmr_resource_monitor *m, llmr_resource_state *out);

#endif
